//! The state directory: a last-known-good copy of every accepted resource
//! on disk, so a client that restarts while its servers are unreachable
//! serves what it had (opt in with
//! [`XdsClientBuilder::state_dir`](crate::client::XdsClientBuilder::state_dir)).
//!
//! ```text
//! cache applies an Upsert ─► Writer::put ─► WritePlan (one pending copy per key)
//! cache drops a copy      ─► Writer::remove ─┘        │  writer thread
//!                                                    ▼
//!            DIR/xdsfed-state-v1/<sha256(type URL NUL name)>.rec  (tmp, fsync, rename, fsync dir)
//! build() ─► read_records ─► decode + validate (TypeRegistry) ─► cache, status FROM_DISK
//! ```
//!
//! - [`record`] (in xdsfed-core): the file format and its checks (pure functions).
//! - `directory`: the directory itself, created private and checked.
//! - `files`: creating, writing and reading record files by the rule below.
//! - `plan` (in xdsfed-core): which write comes next, coalescing, bounds and retries (sans-IO).
//! - `writer`: the thread that performs the plan.
//! - [`read_records`]: the loader, public so tools and tests can read a
//!   directory the way the client does.
//!
//! # The file-safety rule
//!
//! Records hold whatever servers sent (inline TLS private keys included),
//! and their names and contents come from outside, so every file of the
//! state directory is handled so that nobody else can read it, plant a
//! file the client then writes through, or stop the client with it:
//!
//! - The state directory and its records directory are created 0700. A
//!   path that is not a directory, or a directory that another user owns
//!   or that its group or others may write, is refused when the client is
//!   built ([`StateDirError`]). A records directory with wider read bits
//!   (older versions made it 0755) is narrowed to 0700, and each record
//!   with wider bits to 0600 as it loads.
//! - A record is written to a temporary file created exclusively
//!   (`O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600) under a name with a random
//!   part ([`record::temp_file_name`]), synced, renamed over the record, and
//!   the directory synced. Leftover temporary files (of this scheme or the
//!   older `<record>.tmp`) are deleted at the next load.
//! - Only regular files are read: each is opened with `O_NOFOLLOW` and
//!   `O_NONBLOCK` and checked on the open descriptor, and read up to the
//!   record bound. Symlinks, FIFOs, sockets, devices and directories are
//!   reported as problems and skipped.
//! - A failing write or deletion backs off (exponential, with jitter, per
//!   resource) and is given up after a bounded number of attempts; the
//!   failures are counted, and logged once per burst. Dropping the client
//!   never waits on a backoff.
//!
//! docs/client.md, "The state directory", says when a record is written
//! and when it is deleted.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use xdsfed_core::types::{Decoded, TypeRegistry};

mod directory;
pub mod files;
mod writer;

pub use directory::{Follow, StateDirError, ensure_dir};
pub use xdsfed_core::state_dir::StateDirStatus;
use xdsfed_core::state_dir::plan;
pub use xdsfed_core::state_dir::record::{self, Record, RecordError};

pub(crate) use writer::Writer;

/// The directory inside the state directory that holds the records of
/// this format (a later format gets a directory of its own).
pub const RECORDS_DIR: &str = "xdsfed-state-v1";

/// The default bound on the records' total size: 1 GiB.
pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 1 << 30;

/// How many problems the status keeps (all are counted).
const MAX_PROBLEMS: usize = 64;

/// A record read back from a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// The file it was read from.
    pub file: PathBuf,
    /// The record.
    pub record: Record,
    /// The file's length in bytes.
    pub len: u64,
}

/// A file that is not a usable record, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file.
    pub file: PathBuf,
    /// Why it was ignored.
    pub why: String,
}

/// What [`read_records`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    /// The whole records, in no particular order.
    pub records: Vec<StoredRecord>,
    /// The files that were ignored, and why.
    pub problems: Vec<Problem>,
    /// Temporary files left by an interrupted write (ignored).
    pub temporary: Vec<PathBuf>,
}

/// Reads every record of the state directory `dir` (its
/// [`RECORDS_DIR`]), checking each as the client does: a regular file
/// (not followed through a symlink), whole, checksum, file name, at most
/// `max_record` bytes. Does not change the directory. A directory that
/// does not exist holds no records.
pub fn read_records(dir: &Path, max_record: u64) -> std::io::Result<Scan> {
    scan_dir(&dir.join(RECORDS_DIR), max_record, Narrow::No)
}

/// Whether a scan narrows the mode of records that others may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Narrow {
    Yes,
    No,
}

fn scan_dir(records_dir: &Path, max_record: u64, narrow: Narrow) -> std::io::Result<Scan> {
    let mut scan = Scan::default();
    let entries = match std::fs::read_dir(records_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(scan),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if record::is_temp_file_name(&file_name) {
            scan.temporary.push(path);
            continue;
        }
        // The entry's own type (a symlink is not followed); the opened
        // file is checked again in case it was swapped meanwhile.
        let read = match entry.file_type() {
            Ok(kind) if !kind.is_file() => Err(files::not_regular(&kind)),
            _ => read_one(&path, &file_name, max_record, narrow),
        };
        match read {
            Ok(stored) => scan.records.push(stored),
            Err(why) => scan.problems.push(Problem { file: path, why }),
        }
    }
    Ok(scan)
}

fn read_one(
    path: &Path,
    file_name: &str,
    max_record: u64,
    narrow: Narrow,
) -> Result<StoredRecord, String> {
    let file = files::open_regular(path)?;
    let too_large = |len| RecordError::TooLarge {
        len,
        max: max_record,
    };
    let on_disk = file.metadata().map_err(|e| e.to_string())?.len();
    if on_disk > max_record {
        return Err(too_large(on_disk).to_string());
    }
    let mut bytes = Vec::new();
    // Bounded again while reading: the file may grow after the check.
    (&file)
        .take(max_record.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    let len = bytes.len() as u64;
    if len > max_record {
        return Err(too_large(len).to_string());
    }
    let record = Record::decode_file(file_name, &bytes).map_err(|e| e.to_string())?;
    if narrow == Narrow::Yes {
        files::narrow_record(&file)?;
    }
    Ok(StoredRecord {
        file: path.to_owned(),
        record,
        len,
    })
}

/// The counters behind [`StateDirStatus`], shared with the writer thread.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    status: Mutex<StateDirStatus>,
}

impl Counters {
    fn with(&self, f: impl FnOnce(&mut StateDirStatus)) {
        f(&mut self.status.lock().unwrap_or_else(|e| e.into_inner()));
    }

    pub(crate) fn snapshot(&self) -> StateDirStatus {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A file ignored, with why: warned, counted and listed.
    fn rejected(&self, file: &Path, why: &str) {
        tracing::warn!(file = %file.display(), why, "state directory: file ignored");
        self.with(|s| {
            s.records_rejected += 1;
            if s.problems.len() < MAX_PROBLEMS {
                s.problems.push(format!("{}: {why}", file.display()));
            }
        });
    }

    fn over_bound(&self, dir: &Path, report: &plan::Report) {
        let (key, len, bound, what) = match report {
            plan::Report::OverRecordBound { key, len, bound } => (key, len, bound, "record"),
            plan::Report::OverTotalBound { key, len, bound } => (key, len, bound, "total"),
        };
        tracing::warn!(
            dir = %dir.display(),
            resource = %key,
            len,
            bound,
            "state directory: copy not persisted, over the {what} bound"
        );
        self.with(|s| s.over_bound += 1);
    }

    /// A failed attempt, counted (the writer logs once per burst).
    fn write_failed(&self, failure: &plan::Failure) {
        self.with(|s| {
            s.write_errors += 1;
            if let plan::Failure::GaveUp { .. } = failure {
                s.gave_up += 1;
            }
        });
    }

    fn performed(&self, op: &plan::Op) {
        self.with(|s| match op {
            plan::Op::Write(_) => s.records_written += 1,
            plan::Op::Delete => s.records_deleted += 1,
        });
    }
}

/// A state directory opened by a client: the writer (`None` when the
/// directory cannot be written), what loaded, and the counters.
pub(crate) struct Opened {
    pub(crate) writer: Option<Writer>,
    pub(crate) loaded: Vec<(Record, Decoded)>,
    pub(crate) counters: Arc<Counters>,
}

/// Opens the state directory `dir`: creates and checks it (the one
/// failure: an unsafe or unusable directory), deletes temporary files left
/// by a crash, loads and validates every record, and starts the writer.
/// What is wrong with the files inside is warned and counted, never fatal.
pub(crate) fn open(
    dir: &Path,
    max_record: u64,
    max_total: u64,
    types: &TypeRegistry,
) -> Result<Opened, StateDirError> {
    let records_dir = directory::prepare(dir)?;
    let counters = Arc::new(Counters::default());
    counters.with(|s| s.dir = dir.display().to_string());
    let scan = scan_dir(&records_dir, max_record, Narrow::Yes).unwrap_or_else(|e| {
        counters.rejected(&records_dir, &format!("cannot read the directory: {e}"));
        Scan::default()
    });
    for temp in &scan.temporary {
        // What an interrupted write left; the record it was for (if any)
        // is still whole under its own name.
        let _ = std::fs::remove_file(temp);
    }
    for problem in &scan.problems {
        counters.rejected(&problem.file, &problem.why);
    }
    let mut plan = plan::WritePlan::new(max_record, max_total);
    let mut loaded = Vec::with_capacity(scan.records.len());
    for stored in scan.records {
        match validate(&stored.record, types) {
            Ok(decoded) => {
                plan.handle_existing(stored.record.key(), stored.len);
                loaded.push((stored.record, decoded));
            }
            Err(why) => counters.rejected(&stored.file, &why),
        }
    }
    counters.with(|s| s.records_loaded = loaded.len() as u64);
    let writer = match Writer::start(records_dir, plan, Arc::clone(&counters)) {
        Ok(writer) => Some(writer),
        Err(e) => {
            counters.rejected(dir, &format!("cannot start the writer thread: {e}"));
            None
        }
    };
    Ok(Opened {
        writer,
        loaded,
        counters,
    })
}

/// Decodes and validates a record's resource again, as if a server had
/// just sent it.
fn validate(record: &Record, types: &TypeRegistry) -> Result<Decoded, String> {
    let Some(erased) = types.get(&record.type_url) else {
        return Err(format!(
            "resource type {} is not registered with this client",
            record.type_url
        ));
    };
    erased
        .decode(record.resource.clone())
        .map_err(|e| format!("{} fails validation: {e}", record.name))
}
