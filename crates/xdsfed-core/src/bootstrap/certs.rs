//! `certificate_providers`: named sources of certificates (gRFC A29), which
//! resources such as a cluster's TLS context refer to by instance name.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::walk::{At, Result};

/// The `file_watcher` plugin's default `refresh_interval` (gRFC A29).
pub const DEFAULT_REFRESH_INTERVAL: Duration = Duration::from_secs(600);

/// One `certificate_providers` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CertificateProvider {
    /// `plugin_name: "file_watcher"`: PEM files re-read periodically.
    FileWatcher(FileWatcherConfig),
    /// A plugin this client does not implement. Kept, not refused, so that a
    /// bootstrap shared with other clients still loads; a resource that
    /// refers to this instance fails when it is used.
    Unsupported {
        /// The plugin's name.
        plugin_name: String,
    },
}

/// `file_watcher` configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileWatcherConfig {
    /// PEM certificate chain; set together with `private_key_file`.
    pub certificate_file: Option<PathBuf>,
    /// PEM private key; set together with `certificate_file`.
    pub private_key_file: Option<PathBuf>,
    /// PEM CA bundle for validating peers.
    pub ca_certificate_file: Option<PathBuf>,
    /// SPIFFE trust bundle map (gRFC A87).
    pub spiffe_trust_bundle_map_file: Option<PathBuf>,
    /// How often to re-read the files.
    pub refresh_interval: Duration,
}

/// Reads the `certificate_providers` object.
pub(crate) fn parse_certificate_providers(
    at: &At<'_>,
) -> Result<BTreeMap<String, CertificateProvider>> {
    let mut out = BTreeMap::new();
    for (name, entry) in at.entries()? {
        let plugin = entry.require("plugin_name", "a string")?.non_empty_str()?;
        let provider = match plugin {
            "file_watcher" => CertificateProvider::FileWatcher(parse_file_watcher(&entry)?),
            other => CertificateProvider::Unsupported {
                plugin_name: other.to_owned(),
            },
        };
        out.insert(name.to_owned(), provider);
    }
    Ok(out)
}

fn parse_file_watcher(entry: &At<'_>) -> Result<FileWatcherConfig> {
    let Some(config) = entry.get("config")? else {
        return Err(entry.missing("config", "an object with the files to watch"));
    };
    config.object()?;
    let path = |key: &str| -> Result<Option<PathBuf>> {
        match config.get(key)? {
            Some(at) => Ok(Some(PathBuf::from(at.non_empty_str()?))),
            None => Ok(None),
        }
    };
    let certificate_file = path("certificate_file")?;
    let private_key_file = path("private_key_file")?;
    let ca_certificate_file = path("ca_certificate_file")?;
    let spiffe_trust_bundle_map_file = path("spiffe_trust_bundle_map_file")?;
    match (&certificate_file, &private_key_file) {
        (Some(_), None) => {
            return Err(config.missing("private_key_file", "a path, since certificate_file is set"));
        }
        (None, Some(_)) => {
            return Err(config.missing("certificate_file", "a path, since private_key_file is set"));
        }
        _ => {}
    }
    if certificate_file.is_none()
        && ca_certificate_file.is_none()
        && spiffe_trust_bundle_map_file.is_none()
    {
        return Err(config.error(
            "expected certificate_file and private_key_file, ca_certificate_file, or spiffe_trust_bundle_map_file",
        ));
    }
    let refresh_interval = match config.get("refresh_interval")? {
        Some(at) => parse_duration(&at)?,
        None => DEFAULT_REFRESH_INTERVAL,
    };
    Ok(FileWatcherConfig {
        certificate_file,
        private_key_file,
        ca_certificate_file,
        spiffe_trust_bundle_map_file,
        refresh_interval,
    })
}

/// A `google.protobuf.Duration` in its JSON form: decimal seconds with at
/// most nine fractional digits and an `s` suffix, e.g. `"600s"`, `"1.5s"`.
/// Must be positive: a zero interval would re-read the files in a loop.
pub(crate) fn parse_duration(at: &At<'_>) -> Result<Duration> {
    let text = at.str()?;
    let bad = || {
        at.error(format!(
            "expected a positive duration like \"600s\" or \"1.5s\", found {text:?}"
        ))
    };
    let digits = text.strip_suffix('s').ok_or_else(bad)?;
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let dot_without_digits = digits.contains('.') && frac.is_empty();
    if whole.is_empty()
        || dot_without_digits
        || !all_digits(whole)
        || !all_digits(frac)
        || frac.len() > 9
    {
        return Err(bad());
    }
    let secs: u64 = whole.parse().map_err(|_| bad())?;
    let nanos: u32 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse().map_err(|_| bad())?
    };
    let duration = Duration::new(secs, nanos);
    if duration.is_zero() {
        return Err(bad());
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn duration(text: &str) -> Option<Duration> {
        let doc = serde_json::Value::String(text.to_owned());
        parse_duration(&At::root(&doc)).ok()
    }

    #[test]
    fn duration_parses_protobuf_json_form() {
        assert_eq!(duration("600s"), Some(Duration::from_secs(600)));
        assert_eq!(duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(duration("0.000000001s"), Some(Duration::from_nanos(1)));
        for bad in [
            "",
            "s",
            "10",
            "-1s",
            "1.s0",
            "0s",
            "1.0000000001s",
            "1e3s",
            " 1s",
            "1.s",
            "99999999999999999999s",
        ] {
            assert_eq!(duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn file_watcher_requires_key_and_certificate_together() {
        let doc = serde_json::json!({"p": {"plugin_name": "file_watcher", "config": {"certificate_file": "c.pem"}}});
        let err = parse_certificate_providers(&At::root(&doc))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "p.config.private_key_file: required: expected a path, since certificate_file is set"
            )
        );
    }

    #[test]
    fn unknown_plugins_are_kept_not_refused() {
        let doc = serde_json::json!({"p": {"plugin_name": "vault"}});
        let providers = parse_certificate_providers(&At::root(&doc)).ok();
        assert_eq!(
            providers.and_then(|p| p.get("p").cloned()),
            Some(CertificateProvider::Unsupported {
                plugin_name: "vault".into()
            })
        );
    }
}
