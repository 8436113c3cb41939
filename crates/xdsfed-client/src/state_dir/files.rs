//! The record files' IO, by the file-safety rule of the module docs of
//! [`state_dir`](super): temporary files created exclusively, not through
//! a symlink, under a name nobody can guess, 0600; written, synced,
//! renamed over the record and the directory synced; and only regular
//! files read, opened without following a symlink or blocking on a FIFO.
//! The publisher ([`crate::publish`]) writes and reads its files with the
//! same functions, under names and a mode of its own.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::random::random_u64;

use super::directory::kind_name;
use xdsfed_core::state_dir::record::temp_file_name;

/// Names tried for one temporary file before giving up: a taken name is
/// another writer's or a plant, and a fresh random name avoids it.
const TEMP_NAME_TRIES: usize = 8;

/// Writes `bytes` to `dir/record_file` atomically: a new temporary file
/// (see [`create_temp`]), written, synced, renamed over the record (a
/// rename replaces a symlink in the record's place, never follows it), and
/// the directory synced. A crash leaves the old record or the new one,
/// whole, and perhaps a temporary file, which the next load deletes.
pub(crate) fn write_atomically(dir: &Path, record_file: &str, bytes: &[u8]) -> std::io::Result<()> {
    let new_file = NewFile {
        mode: 0o600,
        temp_name: temp_file_name,
        modified: None,
    };
    write_file_atomically(dir, record_file, bytes, &new_file)
}

/// How [`write_file_atomically`] creates a file.
#[derive(Debug, Clone, Copy)]
pub struct NewFile {
    /// The new file's permission bits (before the umask).
    pub mode: u32,
    /// The temporary file's name for the file's name and a random nonce:
    /// one the directory's readers recognise and clean up.
    pub temp_name: fn(&str, u64) -> String,
    /// The modification time to give the file, if not the time of writing.
    pub modified: Option<std::time::SystemTime>,
}

/// Writes `bytes` to `dir/file_name` atomically: a temporary file created
/// exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`) with `new_file.mode` under
/// `new_file.temp_name` with a random nonce, written (and given
/// `new_file.modified`, if set), synced, renamed over
/// `file_name` (a rename replaces a symlink in its place, never follows
/// it), and the directory synced. A crash leaves the old file or the new
/// one, whole, and perhaps a temporary file.
pub fn write_file_atomically(
    dir: &Path,
    file_name: &str,
    bytes: &[u8],
    new_file: &NewFile,
) -> std::io::Result<()> {
    let (temp, mut file) = create_temp(dir, file_name, new_file)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| new_file.modified.map_or(Ok(()), |t| file.set_modified(t)))
        .and_then(|()| file.sync_all())
        .and_then(|()| fs::rename(&temp, dir.join(file_name)));
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written?;
    sync_dir(dir)
}

/// Creates a temporary file for `record_file` in `dir`: exclusively
/// (`O_CREAT|O_EXCL`, and `O_NOFOLLOW`), with `new_file`'s mode and
/// temporary name (with a random nonce).
fn create_temp(
    dir: &Path,
    record_file: &str,
    new_file: &NewFile,
) -> std::io::Result<(PathBuf, File)> {
    for _ in 0..TEMP_NAME_TRIES {
        let path = dir.join((new_file.temp_name)(record_file, random_u64()));
        let created = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(new_file.mode)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path);
        match created {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!(
            "{TEMP_NAME_TRIES} random temporary names for {record_file} in {} were all taken",
            dir.display()
        ),
    ))
}

/// Makes a rename or deletion in `dir` durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Opens `path` for reading if it is a regular file: without following a
/// symlink (`O_NOFOLLOW`) or waiting for a FIFO's writer (`O_NONBLOCK`),
/// then checked on the opened file itself, so nothing swapped in between
/// is read. The error says what the path is instead.
pub fn open_regular(path: &Path) -> Result<File, String> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match fs::symlink_metadata(path) {
            Ok(meta) if !meta.is_file() => not_regular(&meta.file_type()),
            _ => e.to_string(),
        })?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err(not_regular(&meta.file_type()));
    }
    Ok(file)
}

/// Why a path that is not a regular file is not read.
pub(crate) fn not_regular(kind: &fs::FileType) -> String {
    format!("not a regular file ({}): not read", kind_name(kind))
}

/// Takes the group's and others' bits off the opened record `file` (one
/// written by an older version, 0644), through its descriptor.
pub(crate) fn narrow_record(file: &File) -> Result<(), String> {
    let mode = file.metadata().map_err(|e| e.to_string())?.mode() & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    file.set_permissions(fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot narrow its mode {mode:04o} to 0600: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode_of(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    /// The state directory's files: a record is written 0600 through a
    /// fresh temporary file, which is gone afterwards.
    #[test]
    fn record_is_written_private_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        write_atomically(dir.path(), "r.rec", b"one").unwrap();
        write_atomically(dir.path(), "r.rec", b"two").unwrap();
        let path = dir.path().join("r.rec");
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(mode_of(&path), 0o600);
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    /// The state directory's files: a symlink planted at the record's name
    /// is replaced, never written through.
    #[test]
    fn symlink_at_the_record_name_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "mine").unwrap();
        let records = dir.path().join("records");
        fs::create_dir(&records).unwrap();
        std::os::unix::fs::symlink(&victim, records.join("r.rec")).unwrap();
        write_atomically(&records, "r.rec", b"record").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "mine");
        assert!(
            fs::symlink_metadata(records.join("r.rec"))
                .unwrap()
                .is_file()
        );
    }

    /// The state directory's files: only regular files are opened; a
    /// symlink (even to a regular file) and a directory are named as what
    /// they are.
    #[test]
    fn only_regular_files_are_opened() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "x").unwrap();
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(open_regular(&file).is_ok());
        let why = open_regular(&link).unwrap_err();
        assert!(why.contains("a symbolic link"), "{why}");
        let why = open_regular(dir.path()).unwrap_err();
        assert!(why.contains("a directory"), "{why}");
    }

    /// A record an older version left 0644 is narrowed to 0600.
    #[test]
    fn record_of_an_older_version_is_narrowed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.rec");
        fs::write(&path, "x").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        narrow_record(&open_regular(&path).unwrap()).unwrap();
        assert_eq!(mode_of(&path), 0o600);
    }
}
