//! Writes `descriptors/envoy-types.bin` and `descriptors/envoy-types.version`
//! again from the `envoy-types` package in use, after an upgrade:
//!
//! ```sh
//! cargo run -p xdsfed-core --example update_envoy_descriptors
//! ```
//!
//! This is a maintainer's tool, run by hand with the network at hand, so it
//! may ask cargo where the package lives; the build itself never does (see
//! the module doc of `xdsfed_core::json`). Source comments are stripped: the
//! JSON mapping needs names and numbers only, and the file shrinks from
//! 3.4 MB to 0.7 MB.

use std::{error::Error, path::PathBuf, process::Command};

use prost::Message;
use prost_types::FileDescriptorSet;

fn main() -> Result<(), Box<dyn Error>> {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let (version, package_dir) = envoy_types_package(&crate_dir)?;
    let shipped = std::fs::read(package_dir.join("src/generated/types.bin"))?;
    let mut set = FileDescriptorSet::decode(shipped.as_slice())?;
    for file in &mut set.file {
        file.source_code_info = None;
    }
    let out = crate_dir.join("descriptors");
    std::fs::write(out.join("envoy-types.bin"), set.encode_to_vec())?;
    std::fs::write(
        out.join("envoy-types.version"),
        format!("envoy-types {version}\n"),
    )?;
    println!("wrote {} files of envoy-types {version}", set.file.len());
    Ok(())
}

/// The version and package directory of the `envoy-types` this crate uses.
fn envoy_types_package(crate_dir: &std::path::Path) -> Result<(String, PathBuf), Box<dyn Error>> {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(crate_dir.join("Cargo.toml"))
        .output()?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned().into());
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let package = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "envoy-types")
        .ok_or("cargo metadata lists no envoy-types package")?;
    let version = package["version"].as_str().ok_or("no version")?.to_owned();
    let manifest = PathBuf::from(
        package["manifest_path"]
            .as_str()
            .ok_or("no manifest_path")?,
    );
    let dir = manifest.parent().ok_or("manifest_path has no parent")?;
    Ok((version, dir.to_owned()))
}
