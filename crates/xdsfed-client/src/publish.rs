//! The published directory's IO (`xdsfed publish`): the output directory
//! checked, each resource's file written atomically through the state
//! directory's file helpers ([`crate::state_dir::files`]), an unchanged
//! file left alone, deleted files removed, and the temporaries of a
//! crashed run cleaned. Where each file lives and what it holds is
//! `xdsfed_core::publish` (sans-IO), which also states the rules.

use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use xdsfed_core::publish::{PublishedPath, is_temp_file_name, modification_time, temp_file_name};

use crate::state_dir::files::{NewFile, open_regular, sync_dir, write_file_atomically};
use crate::state_dir::{Follow, StateDirError, ensure_dir};

/// Published files and their directories are readable by everyone: they
/// are meant to be served to anyone who asks, by a web server that
/// usually runs as another user. Only their owner may write them.
const FILE_MODE: u32 = 0o644;
/// See [`FILE_MODE`].
const DIR_MODE: u32 = 0o755;

/// How deep [`PublishDir::clean_temporaries`] looks: deeper than any
/// path a resource name of the client's bounds can make, but bounded.
const MAX_DEPTH: usize = 64;

/// What [`PublishDir::write`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The file was created or replaced.
    Replaced,
    /// The file already held these bytes: left as it was, so its mtime
    /// (and the ETag a web server derives from it) stays put.
    Unchanged,
}

/// An output directory: created if missing, owned by the process's user
/// and writable by nobody else.
#[derive(Debug, Clone)]
pub struct PublishDir {
    root: PathBuf,
}

impl PublishDir {
    /// Creates `root` (0755) if missing and checks it as the state
    /// directory is checked (see [`ensure_dir`]): a directory (a symlink
    /// the user chose is followed), owned by the process's effective user,
    /// that neither its group nor others may write.
    pub fn open(root: &Path) -> Result<Self, StateDirError> {
        ensure_dir(root, DIR_MODE, Follow::Yes)?;
        Ok(PublishDir {
            root: root.to_owned(),
        })
    }

    /// The output directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Deletes the temporary files an interrupted run left anywhere under
    /// the output directory (symlinks are not followed) and returns them.
    pub fn clean_temporaries(&self) -> std::io::Result<Vec<PathBuf>> {
        let mut removed = Vec::new();
        clean(&self.root, 0, &mut removed)?;
        Ok(removed)
    }

    /// Writes `bytes` as the file at `path`, unless it holds them already.
    /// Each directory on the way is created 0755 if missing and must be a
    /// directory of this user's that nobody else may write, never a
    /// symlink.
    pub fn write(&self, path: &PublishedPath, bytes: &[u8]) -> std::io::Result<Written> {
        let dir = self.dir_of(path)?;
        let target = dir.join(&path.file);
        if holds(&target, bytes) {
            return Ok(Written::Unchanged);
        }
        let previous = fs::symlink_metadata(&target)
            .ok()
            .filter(fs::Metadata::is_file)
            .and_then(|m| m.modified().ok());
        let new_file = NewFile {
            mode: FILE_MODE,
            temp_name: temp_file_name,
            modified: Some(modification_time(SystemTime::now(), previous)),
        };
        write_file_atomically(&dir, &path.file, bytes, &new_file)?;
        Ok(Written::Replaced)
    }

    /// Removes the file at `path`; `false` when there was none. Its
    /// directories stay: another resource may be written there next.
    pub fn remove(&self, path: &PublishedPath) -> std::io::Result<bool> {
        let dir = path.dirs.iter().fold(self.root.clone(), |d, s| d.join(s));
        match fs::remove_file(dir.join(&path.file)) {
            Ok(()) => sync_dir(&dir).map(|()| true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The directory of `path`, each level created and checked.
    fn dir_of(&self, path: &PublishedPath) -> std::io::Result<PathBuf> {
        let mut dir = self.root.clone();
        for segment in &path.dirs {
            dir.push(segment);
            ensure_dir(&dir, DIR_MODE, Follow::No).map_err(std::io::Error::other)?;
        }
        Ok(dir)
    }
}

/// Whether the regular file at `path` holds exactly `bytes`; read no
/// further than one byte past their length.
fn holds(path: &Path, bytes: &[u8]) -> bool {
    let Ok(file) = open_regular(path) else {
        return false;
    };
    let mut held = Vec::with_capacity(bytes.len());
    let limit = u64::try_from(bytes.len())
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    file.take(limit).read_to_end(&mut held).is_ok() && held == bytes
}

/// Deletes the temporary files under `dir`, descending into directories
/// (not symlinks) up to [`MAX_DEPTH`].
fn clean(dir: &Path, depth: usize, removed: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            clean(&path, depth + 1, removed)?;
        } else if kind.is_file() && entry.file_name().to_str().is_some_and(is_temp_file_name) {
            fs::remove_file(&path)?;
            removed.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    use std::time::Duration;

    use super::*;
    use xdsfed_core::publish::published_path;

    const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

    fn pay() -> PublishedPath {
        published_path(
            CDS,
            "xdstp://a.example/envoy.config.cluster.v3.Cluster/pay/v1",
        )
        .unwrap()
    }

    /// The publisher's files: a file is written 0644 under 0755
    /// directories, through a temporary that is gone afterwards.
    #[test]
    fn file_is_written_readable_with_no_temporary_left() {
        let root = tempfile::tempdir().unwrap();
        let dir = PublishDir::open(root.path()).unwrap();
        assert_eq!(dir.write(&pay(), b"one").unwrap(), Written::Replaced);
        let file = root
            .path()
            .join("a.example/envoy.config.cluster.v3.Cluster/pay/v1");
        assert_eq!(fs::read(&file).unwrap(), b"one");
        assert_eq!(fs::metadata(&file).unwrap().mode() & 0o777, 0o644);
        let parent = file.parent().unwrap();
        assert_eq!(fs::metadata(parent).unwrap().mode() & 0o777, 0o755);
        assert_eq!(fs::read_dir(parent).unwrap().count(), 1);
    }

    /// The publisher's files: an unchanged resource is not rewritten, so
    /// its mtime (and a web server's ETag) stays put.
    #[test]
    fn unchanged_file_is_not_rewritten() {
        let root = tempfile::tempdir().unwrap();
        let dir = PublishDir::open(root.path()).unwrap();
        dir.write(&pay(), b"same").unwrap();
        let file = root.path().join(pay().to_string());
        let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(dir.write(&pay(), b"same").unwrap(), Written::Unchanged);
        assert_eq!(fs::metadata(&file).unwrap().modified().unwrap(), old);
        assert_eq!(dir.write(&pay(), b"new").unwrap(), Written::Replaced);
        assert_ne!(fs::metadata(&file).unwrap().modified().unwrap(), old);
        let replaced = fs::metadata(&file).unwrap().modified().unwrap();
        assert_eq!(dir.write(&pay(), b"two").unwrap(), Written::Replaced);
        let again = fs::metadata(&file).unwrap().modified().unwrap();
        assert!(
            again > replaced,
            "a second later: {again:?} after {replaced:?}"
        );
    }

    /// The publisher's files: a symlink planted as one of the directories
    /// is refused, never written through.
    #[test]
    fn symlinked_directory_inside_the_output_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join("a.example")).unwrap();
        let dir = PublishDir::open(root.path()).unwrap();
        let why = dir.write(&pay(), b"x").unwrap_err().to_string();
        assert!(why.contains("a symbolic link"), "{why}");
        assert_eq!(fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }

    /// The publisher's files: an output directory others may write is
    /// refused, naming it.
    #[test]
    fn output_directory_writable_by_others_is_refused() {
        let root = tempfile::tempdir().unwrap();
        fs::set_permissions(root.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let why = PublishDir::open(root.path()).unwrap_err();
        assert!(
            matches!(why, StateDirError::WritableByOthers { .. }),
            "{why}"
        );
    }

    /// The publisher's files: leftover temporaries are deleted at start,
    /// and only they; a deleted resource's file is removed.
    #[test]
    fn temporaries_are_cleaned_and_deleted_files_removed() {
        let root = tempfile::tempdir().unwrap();
        let dir = PublishDir::open(root.path()).unwrap();
        dir.write(&pay(), b"x").unwrap();
        let parent = root
            .path()
            .join("a.example/envoy.config.cluster.v3.Cluster/pay");
        let temp = parent.join(temp_file_name("v2", 7));
        fs::write(&temp, b"partial").unwrap();
        assert_eq!(dir.clean_temporaries().unwrap(), vec![temp]);
        assert_eq!(fs::read_dir(&parent).unwrap().count(), 1);
        assert!(dir.remove(&pay()).unwrap());
        assert!(!dir.remove(&pay()).unwrap());
        assert_eq!(fs::read_dir(&parent).unwrap().count(), 0);
    }
}
