//! [`BootstrapError`]: where a bootstrap is wrong and what was expected.

use std::fmt;
use std::path::PathBuf;

/// Where a bootstrap came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// A file.
    File(PathBuf),
    /// The contents of an environment variable (`GRPC_XDS_BOOTSTRAP_CONFIG`).
    EnvVar(&'static str),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(path) => write!(f, "{}", path.display()),
            Origin::EnvVar(name) => write!(f, "${name}"),
        }
    }
}

/// The text format of a bootstrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON (gRPC's format).
    Json,
    /// YAML (the same schema, or Envoy-style `config_sources`).
    Yaml,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Json => "JSON",
            Format::Yaml => "YAML",
        })
    }
}

/// What is wrong with a bootstrap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BootstrapErrorKind {
    /// The file could not be read.
    #[error("cannot read the bootstrap: {message}")]
    Read {
        /// The I/O error.
        message: String,
    },
    /// The text is not valid JSON or YAML.
    #[error("{format} syntax error at line {line}, column {column}: {message}")]
    Syntax {
        /// JSON or YAML.
        format: Format,
        /// 1-based line; 0 when unknown.
        line: usize,
        /// 1-based column; 0 when unknown.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// A field has the wrong shape or value.
    #[error("{path}: {problem}")]
    Field {
        /// The field's path, e.g. `xds_servers[0].channel_creds` or
        /// `authorities."cloud.example".client_listener_resource_name_template`.
        path: String,
        /// What was expected.
        problem: String,
    },
    /// Neither bootstrap environment variable is set.
    #[error(
        "no bootstrap: set GRPC_XDS_BOOTSTRAP to a file's path or GRPC_XDS_BOOTSTRAP_CONFIG to its contents"
    )]
    NotConfigured,
}

/// Why a bootstrap could not be loaded: what is wrong, and in which file or
/// environment variable.
///
/// ```
/// use xdsfed_core::bootstrap::Bootstrap;
///
/// let err = Bootstrap::from_json_str(r#"{"xds_servers": [{"server_uri": "x:1"}]}"#).unwrap_err();
/// assert_eq!(err.field_path(), Some("xds_servers[0].channel_creds"));
/// assert_eq!(
///     err.to_string(),
///     "xds_servers[0].channel_creds: required: expected an array of {\"type\": ...} objects"
/// );
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct BootstrapError {
    origin: Option<Origin>,
    kind: BootstrapErrorKind,
}

/// The message, as `Display` writes it, so that `?` from a `main` that
/// returns `Result<_, Box<dyn Error>>` prints what is wrong; `{:#?}` shows
/// the fields.
impl fmt::Debug for BootstrapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            return f
                .debug_struct("BootstrapError")
                .field("origin", &self.origin)
                .field("kind", &self.kind)
                .finish();
        }
        write!(f, "BootstrapError: {self}")
    }
}

impl BootstrapError {
    pub(crate) fn new(kind: BootstrapErrorKind) -> Self {
        BootstrapError { origin: None, kind }
    }

    pub(crate) fn field(path: impl fmt::Display, problem: impl Into<String>) -> Self {
        Self::new(BootstrapErrorKind::Field {
            path: path.to_string(),
            problem: problem.into(),
        })
    }

    pub(crate) fn with_origin(mut self, origin: Origin) -> Self {
        self.origin = Some(origin);
        self
    }

    /// The file or variable the bootstrap came from, when not a string.
    pub fn origin(&self) -> Option<&Origin> {
        self.origin.as_ref()
    }

    /// What is wrong.
    pub fn kind(&self) -> &BootstrapErrorKind {
        &self.kind
    }

    /// The path of the bad field, for [`BootstrapErrorKind::Field`] errors.
    pub fn field_path(&self) -> Option<&str> {
        match &self.kind {
            BootstrapErrorKind::Field { path, .. } => Some(path),
            _ => None,
        }
    }
}

impl fmt::Display for BootstrapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(origin) = &self.origin {
            write!(f, "{origin}: ")?;
        }
        self.kind.fmt(f)
    }
}

impl std::error::Error for BootstrapError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.kind)
    }
}

/// One step of a [`FieldPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// A path into the bootstrap document, printed as `a.b[0]."c.d"`: keys that
/// are not plain identifiers are JSON-quoted, so that a dot inside an
/// authority name cannot be read as a separator.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldPath(Vec<Segment>);

impl FieldPath {
    pub(crate) fn key(&self, key: &str) -> FieldPath {
        let mut segments = self.0.clone();
        segments.push(Segment::Key(key.to_owned()));
        FieldPath(segments)
    }

    pub(crate) fn index(&self, index: usize) -> FieldPath {
        let mut segments = self.0.clone();
        segments.push(Segment::Index(index));
        FieldPath(segments)
    }
}

/// How much of a key a path shows.
const PATH_KEY_BYTES: usize = 100;

fn is_identifier(key: &str) -> bool {
    !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(top level)");
        }
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Index(index) => write!(f, "[{index}]")?,
                Segment::Key(key) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    if key.len() > PATH_KEY_BYTES {
                        // A key can be as long as the file: show its start.
                        let end = (0..=PATH_KEY_BYTES)
                            .rev()
                            .find(|&i| key.is_char_boundary(i))
                            .unwrap_or(0);
                        write!(f, "{:?}…({} more bytes)", &key[..end], key.len() - end)?;
                    } else if is_identifier(key) {
                        f.write_str(key)?;
                    } else {
                        // Debug-quoting a str escapes quotes and controls.
                        write!(f, "{key:?}")?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `?` from `main` prints an error's `Debug`: it carries the message,
    /// not `BootstrapError { origin: None, kind: NotConfigured }`.
    #[test]
    fn debug_carries_the_message() {
        let error = BootstrapError::new(BootstrapErrorKind::NotConfigured);
        let boxed: Box<dyn std::error::Error> = Box::new(error.clone());
        assert_eq!(format!("{boxed:?}"), format!("BootstrapError: {error}"));
        assert!(format!("{error:#?}").contains("NotConfigured"));
    }

    #[test]
    fn field_path_quotes_keys_that_are_not_identifiers() {
        let path = FieldPath::default()
            .key("authorities")
            .key("cloud.example")
            .key("xds_servers")
            .index(2)
            .key("server_uri");
        assert_eq!(
            path.to_string(),
            "authorities.\"cloud.example\".xds_servers[2].server_uri"
        );
        assert_eq!(FieldPath::default().to_string(), "(top level)");
        assert_eq!(FieldPath::default().key("").to_string(), "\"\"");
        let long = FieldPath::default()
            .key("authorities")
            .key(&"a".repeat(70_000));
        assert_eq!(
            long.to_string(),
            format!("authorities.{:?}…(69900 more bytes)", "a".repeat(100))
        );
    }

    #[test]
    fn error_display_prefixes_the_origin() {
        let err = BootstrapError::field("node.id", "expected a string, found a number")
            .with_origin(Origin::File("/etc/xds.json".into()));
        assert_eq!(
            err.to_string(),
            "/etc/xds.json: node.id: expected a string, found a number"
        );
        assert_eq!(err.field_path(), Some("node.id"));
    }
}
