//! Where a published resource's file lives under the output directory, and
//! what it holds (sans-IO: pure functions of the name and the bytes).
//!
//! The file's path is the URL path [`url_path_of`] gives the name, each
//! segment percent-decoded as a file host decodes a request before it
//! looks for the file: `xdstp://a/T/x%20y` is the file `a/T/x y`, served at
//! `/a/T/x%20y`. `url_path_of` has already refused segments that decode to
//! `.`, `..`, a separator or a control character; the publisher also
//! refuses what a directory of files cannot serve (see
//! [`PublishLayoutError`]).

use std::time::{Duration, SystemTime};

use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use envoy_types::pb::google::protobuf::Any;
use prost::Message as _;
use sha2::{Digest as _, Sha256};

use crate::name::percent;
use crate::name::{ResourceName, url_path_of};
use crate::protocol::is_glob;

/// What a temporary file's name ends with ([`temp_file_name`]).
pub const TEMP_SUFFIX: &str = ".tmp";

/// The longest file name most file systems take (`NAME_MAX`).
const NAME_MAX: usize = 255;

/// The file of one resource: the directories from the output directory
/// down, then the file's own name; every segment decoded, non-empty, free
/// of separators, and not starting with `.`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PublishedPath {
    /// The directories, outermost first (at least the type's).
    pub dirs: Vec<String>,
    /// The file's name.
    pub file: String,
}

impl std::fmt::Display for PublishedPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for dir in &self.dirs {
            write!(f, "{dir}/")?;
        }
        f.write_str(&self.file)
    }
}

/// Why a resource has no file in a published directory. Each names the
/// resource.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PublishLayoutError {
    /// The name does not parse, or [`url_path_of`] refuses one of its
    /// segments.
    #[error("{name}: no file path can hold it: {why}")]
    Unsafe {
        /// The resource's name.
        name: String,
        /// Why.
        why: String,
    },
    /// A glob collection: a directory of files cannot list.
    #[error("{name}: a glob collection has no file (its members are published one by one)")]
    Glob {
        /// The collection's name.
        name: String,
    },
    /// An inline entry of a list collection (`…#entry=`): it lives inside
    /// its collection's file.
    #[error("{name}: an inline entry lives in its collection's file, not a file of its own")]
    InlineEntry {
        /// The entry's key.
        name: String,
    },
    /// Context parameters: a static host ignores the query, and would
    /// serve one file for all of a name's variants.
    #[error("{name}: context parameters are a query string, which a static file host ignores")]
    ContextParameters {
        /// The resource's name.
        name: String,
    },
    /// A segment a directory of files cannot serve under its own name.
    #[error("{name}: segment {segment:?} {why}")]
    Segment {
        /// The resource's name.
        name: String,
        /// The decoded segment (escaped).
        segment: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// The file of the resource `name` (a canonical key) of type `type_url`
/// under the output directory.
pub fn published_path(type_url: &str, name: &str) -> Result<PublishedPath, PublishLayoutError> {
    let owned = || name.to_owned();
    if name.contains('#') {
        return Err(PublishLayoutError::InlineEntry { name: owned() });
    }
    if is_glob(name) {
        return Err(PublishLayoutError::Glob { name: owned() });
    }
    let unsafe_name = |why: String| PublishLayoutError::Unsafe { name: owned(), why };
    let parsed = ResourceName::parse(name).map_err(|e| unsafe_name(e.to_string()))?;
    let path = url_path_of(type_url, &parsed).map_err(|e| unsafe_name(e.to_string()))?;
    if path.contains('?') {
        return Err(PublishLayoutError::ContextParameters { name: owned() });
    }
    let mut segments = Vec::new();
    for segment in path.split('/').skip(1) {
        segments.push(decoded_segment(name, segment)?);
    }
    let file = segments
        .pop()
        .ok_or_else(|| unsafe_name("it has no path".to_owned()))?;
    Ok(PublishedPath {
        dirs: segments,
        file,
    })
}

/// One segment of `url_path_of`'s path decoded, if a directory of files
/// can hold it under that name.
fn decoded_segment(name: &str, segment: &str) -> Result<String, PublishLayoutError> {
    let refused = |shown: String, why: &'static str| PublishLayoutError::Segment {
        name: name.to_owned(),
        segment: shown,
        why,
    };
    let bytes = percent::decode(segment)
        .map_err(|_| refused(segment.to_owned(), "is not percent-encoded"))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        refused(
            String::from_utf8_lossy(e.as_bytes())
                .escape_debug()
                .to_string(),
            "is not UTF-8",
        )
    })?;
    let why = if text.is_empty() {
        Some("is empty: a directory of files has no empty name")
    } else if text.starts_with('.') {
        Some(
            "starts with `.`: names starting with a dot are the publisher's temporary files (and hidden by many hosts)",
        )
    } else if text.len() > NAME_MAX {
        Some("is longer than the 255 bytes a file name may have")
    } else {
        None
    };
    match why {
        Some(why) => Err(refused(text.escape_debug().to_string(), why)),
        None => Ok(text),
    }
}

/// The bytes of the file of a resource of type `type_url` whose protobuf
/// encoding is `raw`: a binary `DiscoveryResponse` holding that one
/// resource, as the HTTP CDN source decodes it (any `Content-Type` but
/// JSON is read as binary protobuf). Its `version_info` is
/// [`content_version`], so the same resource always makes the same bytes.
pub fn file_contents(type_url: &str, raw: &[u8]) -> Vec<u8> {
    DiscoveryResponse {
        version_info: content_version(type_url, raw),
        type_url: type_url.to_owned(),
        resources: vec![Any {
            type_url: type_url.to_owned(),
            value: raw.to_vec(),
        }],
        ..Default::default()
    }
    .encode_to_vec()
}

/// A version that follows from the content alone: the first 16 hex digits
/// of SHA-256 over the type URL, a NUL and the resource's bytes.
pub fn content_version(type_url: &str, raw: &[u8]) -> String {
    let mut hash = Sha256::new();
    hash.update(type_url.as_bytes());
    hash.update([0u8]);
    hash.update(raw);
    hex::encode(&hash.finalize()[..8])
}

/// The modification time a file replacing one modified at `previous` gets
/// when written at `now`: whole seconds, and at least a second after
/// `previous`. nginx's `ETag` is the mtime in seconds and the size, so a
/// resource changed twice within a second into the same size would keep
/// its ETag, and clients revalidating with it would keep the old copy;
/// a later second makes every change a new ETag. Under sustained changes
/// more often than once a second the time runs ahead of the clock, and
/// falls back to it once they slow down.
pub fn modification_time(now: SystemTime, previous: Option<SystemTime>) -> SystemTime {
    let seconds = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    };
    let after_previous = previous.map_or(0, |p| seconds(p).saturating_add(1));
    SystemTime::UNIX_EPOCH + Duration::from_secs(seconds(now).max(after_previous))
}

/// The name of a temporary file for `file`: `.<file>.<nonce as 16 hex
/// digits>.tmp`. The writer draws `nonce` at random, so nobody can create
/// the name ahead of it; the leading dot keeps it apart from every
/// resource's file (see [`published_path`]).
pub fn temp_file_name(file: &str, nonce: u64) -> String {
    format!(".{file}.{nonce:016x}{TEMP_SUFFIX}")
}

/// Whether `file_name` is a temporary file an interrupted write left.
pub fn is_temp_file_name(file_name: &str) -> bool {
    file_name.starts_with('.') && file_name.ends_with(TEMP_SUFFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    const CDS_LIST: &str = "type.googleapis.com/envoy.config.cluster.v3.ClusterCollection";

    fn path(type_url: &str, name: &str) -> Result<String, PublishLayoutError> {
        published_path(type_url, name).map(|p| p.to_string())
    }

    /// The publisher's files: an xdstp name is the file AUTH/TYPE/ID…, each
    /// segment decoded as a file host decodes the request's path.
    #[test]
    fn xdstp_name_is_the_decoded_url_path() {
        assert_eq!(
            path(
                CDS_LIST,
                "xdstp://cdn.example/envoy.config.cluster.v3.ClusterCollection/mesh/all"
            ),
            Ok("cdn.example/envoy.config.cluster.v3.ClusterCollection/mesh/all".to_owned())
        );
        assert_eq!(
            path(
                CDS,
                "xdstp://a.example/envoy.config.cluster.v3.Cluster/pay%20v2/b:c"
            ),
            Ok("a.example/envoy.config.cluster.v3.Cluster/pay v2/b:c".to_owned())
        );
        assert_eq!(
            path(CDS, "pay v2"),
            Ok("envoy.config.cluster.v3.Cluster/pay v2".to_owned())
        );
    }

    /// The publisher's files: a name no file can hold is refused, naming
    /// it: a segment that decodes to a step or a separator, a dot-name
    /// (the temporaries'), context parameters, globs and inline entries.
    #[test]
    fn names_a_directory_cannot_serve_are_refused() {
        for (type_url, name) in [
            (
                CDS,
                "xdstp://a/envoy.config.cluster.v3.Cluster/..%2F..%2Fsecret",
            ),
            (CDS, "xdstp://a/envoy.config.cluster.v3.Cluster/%2e%2e"),
            (CDS, "xdstp://a/envoy.config.cluster.v3.Cluster/.hidden"),
            (
                CDS,
                "xdstp://a/envoy.config.cluster.v3.Cluster/x/.c.0123456789abcdef.tmp",
            ),
            (CDS, "xdstp://a/envoy.config.cluster.v3.Cluster/x?k=v"),
            (CDS, "xdstp://a/envoy.config.cluster.v3.Cluster/x/*"),
            (CDS, "xdstp://a/envoy.config.cluster.v3.Cluster/x//y"),
            (
                CDS_LIST,
                "xdstp://a/envoy.config.cluster.v3.ClusterCollection/l#entry=one",
            ),
            (CDS, "pay/v2"),
            (CDS, ".."),
        ] {
            let why = path(type_url, name).unwrap_err().to_string();
            assert!(why.contains(name), "{name}: {why}");
        }
    }

    /// The publisher's files: the same resource makes the same bytes, and
    /// the CDN source's own reader takes them.
    #[test]
    fn contents_follow_from_the_resource_alone() {
        let one = file_contents(CDS, b"\x0a\x01x");
        assert_eq!(one, file_contents(CDS, b"\x0a\x01x"));
        assert_ne!(one, file_contents(CDS, b"\x0a\x01y"));
        let response = DiscoveryResponse::decode(one.as_slice()).unwrap();
        assert_eq!(response.type_url, CDS);
        assert_eq!(response.version_info, content_version(CDS, b"\x0a\x01x"));
        assert_eq!(response.resources.len(), 1);
    }

    /// The publisher's files: a replaced file's mtime is a later second
    /// than the one it replaces, so nginx's mtime-and-size ETag changes.
    #[test]
    fn replacing_file_is_stamped_a_second_later_than_the_one_it_replaces() {
        let at = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        let now = at(100) + Duration::from_millis(300);
        assert_eq!(modification_time(now, None), at(100));
        assert_eq!(modification_time(now, Some(at(50))), at(100));
        assert_eq!(
            modification_time(now, Some(at(100) + Duration::from_millis(900))),
            at(101)
        );
        assert_eq!(modification_time(now, Some(at(101))), at(102));
    }

    /// Temporary names are dot-names ending in `.tmp`, never a resource's.
    #[test]
    fn temporary_names_are_recognised_and_never_a_resources() {
        let temp = temp_file_name("pay", 0x0123_4567_89ab_cdef);
        assert_eq!(temp, ".pay.0123456789abcdef.tmp");
        assert!(is_temp_file_name(&temp));
        assert!(!is_temp_file_name("pay.tmp"));
        assert!(
            path(
                CDS,
                &format!("xdstp://a/envoy.config.cluster.v3.Cluster/{temp}")
            )
            .is_err()
        );
    }
}
