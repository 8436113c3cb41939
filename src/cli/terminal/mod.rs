//! What the `xdsfed` command prints about a client, as text for a
//! terminal: the CSDS-style status table ([`table`]), short forms of names
//! ([`names`]) and the escaping of every string that came from a server or
//! from input ([`text`]).
//!
//! Part of the library, not only of the command, so that the fuzz targets
//! can render hostile names through the same code; it is not a stable API.

pub mod names;
pub mod table;
pub mod text;
