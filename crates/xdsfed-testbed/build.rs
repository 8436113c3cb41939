//! Copies the protobuf descriptor set that `envoy-types` ships
//! (`src/generated/types.bin`) into `OUT_DIR`, so that scenario files can write
//! Envoy resources through the protobuf JSON mapping.
//!
//! The crate does not expose the file as an API, so its package directory is
//! found with `cargo metadata`, the one source of truth for where cargo keeps a
//! dependency's sources (registry, vendored directory or git checkout alike).

use std::{env, fs, path::PathBuf, process::Command};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=build.rs");
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("Cargo.toml");
    // `--filter-platform` keeps cargo from wanting the manifests of packages
    // for other platforms, which an offline machine has never downloaded.
    let target = env::var("TARGET")?;
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &target, "--manifest-path"])
        .arg(&manifest)
        .output()?;
    if !output.status.success() {
        return Err(format!(
            "`cargo metadata` failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let packages = metadata["packages"]
        .as_array()
        .ok_or("`cargo metadata` printed no package list")?;
    let envoy_manifest = packages
        .iter()
        .filter(|p| p["name"] == "envoy-types")
        .filter_map(|p| p["manifest_path"].as_str())
        .next()
        .ok_or("`cargo metadata` lists no envoy-types package")?;
    let descriptors = PathBuf::from(envoy_manifest)
        .parent()
        .ok_or("envoy-types manifest path has no parent")?
        .join("src/generated/types.bin");
    println!("cargo:rerun-if-changed={}", descriptors.display());
    let out = PathBuf::from(env::var("OUT_DIR")?).join("envoy_types.bin");
    fs::copy(&descriptors, &out).map_err(|e| format!("copying {}: {e}", descriptors.display()))?;
    Ok(())
}
