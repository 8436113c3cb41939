//! [`NameError`]: why a string is not a valid resource name.

/// Why a string is not a valid resource name.
///
/// Every variant carries the offending `name` and, where one exists, the byte
/// `position` in it where the problem starts, so that a message can point at
/// the character. Errors are `Clone + PartialEq` so that one error can be
/// handed to many watchers and tests can compare them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// The empty string: no resource has an empty name.
    #[error("empty resource name")]
    Empty,
    /// `xdstp:` is not followed by `//` and an authority.
    #[error("resource name {name:?}: expected \"//\" after \"xdstp:\" at byte {position}")]
    NotHierarchical {
        /// The offending name.
        name: String,
        /// Byte offset of what follows `xdstp:`.
        position: usize,
    },
    /// A character that RFC 3986 does not allow in that part of the URI.
    #[error(
        "resource name {name:?}: character {ch:?} at byte {position} is not allowed in the {component} (percent-encode it)"
    )]
    InvalidChar {
        /// The offending name.
        name: String,
        /// Byte offset of the character.
        position: usize,
        /// The character.
        ch: char,
        /// The URI component it appeared in.
        component: &'static str,
    },
    /// A `%` not followed by two hex digits.
    #[error(
        "resource name {name:?}: malformed percent-encoding at byte {position} (expected '%' and two hex digits)"
    )]
    BadPercentEncoding {
        /// The offending name.
        name: String,
        /// Byte offset of the `%`.
        position: usize,
    },
    /// The path has no resource type (`xdstp://authority/` then nothing, or
    /// no path at all).
    #[error("resource name {name:?}: missing resource type at byte {position}")]
    MissingResourceType {
        /// The offending name.
        name: String,
        /// Byte offset where the resource type should start.
        position: usize,
    },
    /// The path has a resource type but no id after it.
    #[error(
        "resource name {name:?}: missing resource id after the resource type at byte {position}"
    )]
    MissingId {
        /// The offending name.
        name: String,
        /// Byte offset where the id should start.
        position: usize,
    },
    /// A context parameter with an empty key (`?=v`).
    #[error("resource name {name:?}: context parameter at byte {position} has an empty key")]
    EmptyContextParamKey {
        /// The offending name.
        name: String,
        /// Byte offset of the parameter.
        position: usize,
    },
    /// A user-supplied name sets a context parameter in the reserved `xds.`
    /// namespace (xDS TP1: "These must not be in the xds.* namespace").
    #[error(
        "resource name {name:?}: context parameter {key:?} at byte {position} is in the reserved \"xds.\" namespace"
    )]
    ReservedContextParam {
        /// The offending name.
        name: String,
        /// Byte offset of the parameter.
        position: usize,
        /// The key, normalised.
        key: String,
    },
    /// An empty directive (`#alt=…,,entry=…`).
    #[error("resource name {name:?}: empty directive at byte {position}")]
    EmptyDirective {
        /// The offending name.
        name: String,
        /// Byte offset where the directive should be.
        position: usize,
    },
    /// A directive other than `alt=` and `entry=`. (A known directive
    /// without `=` fails its value's check instead.)
    #[error(
        "resource name {name:?}: unknown directive {directive:?} at byte {position} (expected \"alt=<xdstp URL>\" or \"entry=<name>\")"
    )]
    UnknownDirective {
        /// The offending name.
        name: String,
        /// Byte offset of the directive.
        position: usize,
        /// The directive's name (the text before `=`).
        directive: String,
    },
    /// The same directive twice (xDS TP1: "The same directive may not appear
    /// more than once in a given URI").
    #[error("resource name {name:?}: directive {directive:?} at byte {position} appears twice")]
    DuplicateDirective {
        /// The offending name.
        name: String,
        /// Byte offset of the second occurrence.
        position: usize,
        /// `alt` or `entry`.
        directive: &'static str,
    },
    /// An `entry=` value that does not match `^[0-9a-zA-Z_\-.~:]+$`.
    #[error(
        "resource name {name:?}: entry name {entry:?} at byte {position} must match [0-9a-zA-Z_-.~:]+"
    )]
    InvalidEntryName {
        /// The offending name.
        name: String,
        /// Byte offset of the entry name.
        position: usize,
        /// The entry name, normalised.
        entry: String,
    },
    /// An `alt=` value that is not a valid `xdstp:` URL.
    #[error(
        "resource name {name:?}: alt directive at byte {position} is not a valid xdstp URL: {source}"
    )]
    InvalidAlt {
        /// The offending name.
        name: String,
        /// Byte offset of the alternative URL.
        position: usize,
        /// What is wrong with the alternative.
        source: Box<NameError>,
    },
    /// The resource type in the path is not the watched type nor its
    /// `<T>Collection`.
    #[error(
        "resource name {name:?}: names resource type {name_type:?} but is watched as {watched_type:?}"
    )]
    TypeMismatch {
        /// The offending name (canonical form).
        name: String,
        /// Byte offset of the resource type in `name`.
        position: usize,
        /// The type in the name's path.
        name_type: String,
        /// The watched type URL.
        watched_type: String,
    },
}

impl NameError {
    /// The offending name.
    pub fn name(&self) -> &str {
        match self {
            NameError::Empty => "",
            NameError::NotHierarchical { name, .. }
            | NameError::InvalidChar { name, .. }
            | NameError::BadPercentEncoding { name, .. }
            | NameError::MissingResourceType { name, .. }
            | NameError::MissingId { name, .. }
            | NameError::EmptyContextParamKey { name, .. }
            | NameError::ReservedContextParam { name, .. }
            | NameError::EmptyDirective { name, .. }
            | NameError::UnknownDirective { name, .. }
            | NameError::DuplicateDirective { name, .. }
            | NameError::InvalidEntryName { name, .. }
            | NameError::InvalidAlt { name, .. }
            | NameError::TypeMismatch { name, .. } => name,
        }
    }

    /// The byte offset in [`NameError::name`] where the problem starts.
    pub fn position(&self) -> usize {
        match self {
            NameError::Empty => 0,
            NameError::NotHierarchical { position, .. }
            | NameError::InvalidChar { position, .. }
            | NameError::BadPercentEncoding { position, .. }
            | NameError::MissingResourceType { position, .. }
            | NameError::MissingId { position, .. }
            | NameError::EmptyContextParamKey { position, .. }
            | NameError::ReservedContextParam { position, .. }
            | NameError::EmptyDirective { position, .. }
            | NameError::UnknownDirective { position, .. }
            | NameError::DuplicateDirective { position, .. }
            | NameError::InvalidEntryName { position, .. }
            | NameError::InvalidAlt { position, .. }
            | NameError::TypeMismatch { position, .. } => *position,
        }
    }
}
