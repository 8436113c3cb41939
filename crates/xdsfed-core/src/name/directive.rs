//! Processing directives: the `#alt=…,entry=…` fragment of an `xdstp:` URL.
//!
//! xDS TP1 defines two directives, comma separated in the fragment:
//!
//! - `alt=<xdstp:// URL>`: a fallback URL to fetch when the primary cannot be.
//! - `entry=<name>`: an anchor naming an inlined entry of a list collection.
//!
//! "The same directive may not appear more than once in a given URI." Any
//! other directive is refused: a client that ignored one would silently
//! fetch something other than what the name asked for.
//!
//! Because `,` separates directives, an `alt` URL cannot hold a literal `,`;
//! it must be written `%2C` (which, like any reserved character, then stays
//! encoded and names a different resource than `,` would).

use std::fmt;

use super::error::NameError;
use super::percent::Component;
use super::xdstp::{self, Input, Origin, XdstpName};

/// The directives of an `xdstp:` URL. URNs (and so canonical names) have none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Directives {
    alt: Option<Box<XdstpName>>,
    entry: Option<String>,
}

impl Directives {
    /// The `alt=` fallback URL.
    pub fn alt(&self) -> Option<&XdstpName> {
        self.alt.as_deref()
    }

    /// The `entry=` name, percent-encoding normalised.
    pub fn entry(&self) -> Option<&str> {
        self.entry.as_deref()
    }

    /// Whether there are no directives.
    pub fn is_empty(&self) -> bool {
        self.alt.is_none() && self.entry.is_none()
    }
}

/// `alt=…,entry=…`, in that order; parses back to equal directives.
impl fmt::Display for Directives {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        if let Some(alt) = &self.alt {
            write!(f, "alt={alt}")?;
            sep = ",";
        }
        if let Some(entry) = &self.entry {
            write!(f, "{sep}entry={entry}")?;
        }
        Ok(())
    }
}

/// Whether `entry` is a valid inline entry name.
///
/// TP1's prose says `[a-zA-Z0-9_-\./]+`; the `CollectionEntry.InlineEntry.name`
/// field in its proto says `^[0-9a-zA-Z_\-\.~:]+$`. We follow the proto: an
/// `entry=` directive can only ever refer to an `InlineEntry.name`, and the
/// proto's validation rule is what servers enforce on that field, so a name
/// outside the proto pattern (one with `/`, say) could never match an entry,
/// while one with `~` or `:` can.
fn is_valid_entry(entry: &str) -> bool {
    !entry.is_empty()
        && entry
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'~' | b':'))
}

/// Parses the fragment `name[start..]`. An empty fragment has no directives.
pub(crate) fn parse_directives(
    input: &Input<'_>,
    start: usize,
    origin: Origin,
) -> Result<Directives, NameError> {
    let name = input.name;
    let end = name.len();
    // Check the whole fragment's characters first, so that a stray `#` or
    // space is reported where it is, whatever directive it sits in.
    input.component(start, end, Component::Fragment)?;
    let mut directives = Directives::default();
    if start >= end {
        return Ok(directives);
    }
    let mut piece_start = start;
    while piece_start <= end {
        let piece_end = name
            .get(piece_start..)
            .and_then(|rest| rest.find(','))
            .map_or(end, |i| piece_start + i);
        let piece = name.get(piece_start..piece_end).unwrap_or_default();
        if piece.is_empty() {
            return Err(NameError::EmptyDirective {
                name: name.to_owned(),
                position: piece_start,
            });
        }
        let (directive, value_start) = match piece.split_once('=') {
            Some((d, _)) => (d, piece_start + d.len() + 1),
            None => (piece, piece_end),
        };
        match directive {
            "alt" => {
                if directives.alt.is_some() {
                    return Err(duplicate(name, piece_start, "alt"));
                }
                let value = name.get(value_start..piece_end).unwrap_or_default();
                let alt = xdstp::parse(value, origin).map_err(|e| NameError::InvalidAlt {
                    name: name.to_owned(),
                    position: value_start,
                    source: Box::new(e),
                })?;
                directives.alt = Some(Box::new(alt));
            }
            "entry" => {
                if directives.entry.is_some() {
                    return Err(duplicate(name, piece_start, "entry"));
                }
                let entry = input.component(value_start, piece_end, Component::Fragment)?;
                if !is_valid_entry(&entry) {
                    return Err(NameError::InvalidEntryName {
                        name: name.to_owned(),
                        position: value_start,
                        entry,
                    });
                }
                directives.entry = Some(entry);
            }
            other => {
                return Err(NameError::UnknownDirective {
                    name: name.to_owned(),
                    position: piece_start,
                    directive: other.to_owned(),
                });
            }
        }
        piece_start = piece_end + 1;
    }
    Ok(directives)
}

fn duplicate(name: &str, position: usize, directive: &'static str) -> NameError {
    NameError::DuplicateDirective {
        name: name.to_owned(),
        position,
        directive,
    }
}
