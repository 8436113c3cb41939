//! `xdstp://` resource names (xDS TP1) and old-style opaque names.
//!
//! Placeholder: the naming issue replaces this module. The two functions below
//! are the contract the protocol core and the testbed rely on; keep their
//! signatures.

use std::fmt;

/// Why a name is not a valid resource name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameError {
    /// The offending name.
    pub name: String,
    /// What is wrong.
    pub why: String,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid resource name {:?}: {}", self.name, self.why)
    }
}

impl std::error::Error for NameError {}

/// The cache key of a resource name as it appears on the wire: for an `xdstp:`
/// name the canonical URN (context parameters sorted, percent-encoding
/// normalised, directives removed); an old-style name unchanged.
pub fn canonical_key(name: &str) -> Result<String, NameError> {
    Ok(name.split('#').next().unwrap_or(name).to_owned())
}

/// The authority of a canonical key: `Some("")` for `xdstp:///…`, `None` for
/// old-style names.
pub fn authority_of(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("xdstp://")?;
    Some(rest.split('/').next().unwrap_or(""))
}
