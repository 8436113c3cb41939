//! Reading a scenario file: only a regular file, and only up to
//! [`MAX_SCENARIO_BYTES`], so that a FIFO, a device or `/dev/zero` given as
//! the scenario is an error instead of a hang or an exhausted memory.

use std::{
    fs::File,
    io::{Error, ErrorKind, Read},
    path::Path,
};

/// The largest scenario accepted, in bytes (16 MiB). Bulk resources belong
/// in generators, which write one line for a million endpoints.
pub const MAX_SCENARIO_BYTES: usize = 16 * 1024 * 1024;

/// Reads `file`, which must be a regular file of at most
/// [`MAX_SCENARIO_BYTES`] in UTF-8.
pub(crate) fn read_bounded(file: &Path) -> Result<String, Error> {
    // Checked before opening: opening a FIFO blocks until someone writes.
    if !std::fs::metadata(file)?.is_file() {
        return Err(not_regular());
    }
    let opened = File::open(file)?;
    // Checked again on what was opened, in case the path changed meanwhile.
    if !opened.metadata()?.is_file() {
        return Err(not_regular());
    }
    let limit = u64::try_from(MAX_SCENARIO_BYTES).unwrap_or(u64::MAX);
    let mut bytes = Vec::new();
    opened.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() > MAX_SCENARIO_BYTES {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("the file is larger than {MAX_SCENARIO_BYTES} bytes (16 MiB)"),
        ));
    }
    String::from_utf8(bytes)
        .map_err(|_| Error::new(ErrorKind::InvalidData, "the file is not UTF-8 text"))
}

fn not_regular() -> Error {
    Error::new(
        ErrorKind::InvalidInput,
        "not a regular file (a directory, FIFO, socket or device); give a YAML file",
    )
}
