//! The state directory itself: created private, and refused when someone
//! else could plant or swap files in it.
//!
//! [`prepare`] creates the state directory and its records directory
//! ([`RECORDS_DIR`]) with mode 0700 when they are missing, and checks both
//! ([`judge`], a pure function): each must be a directory (the state
//! directory may be reached through a symlink the user chose; the records
//! directory may not be one), owned by the process's effective user, and
//! writable by nobody else. A records directory with wider read or search
//! bits (0755, as older versions made it) is narrowed to 0700, so records
//! written before are no longer readable by others either.

use std::fs::{self, DirBuilder, Metadata};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::RECORDS_DIR;

/// Why a state directory cannot be used. Each names the directory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateDirError {
    /// The directory is missing and cannot be created.
    #[error("state directory {}: cannot create it: {why}", path.display())]
    Create {
        /// The directory.
        path: PathBuf,
        /// The operating system's reason.
        why: String,
    },
    /// The path exists and is something else than a directory.
    #[error("state directory {}: not a directory ({kind})", path.display())]
    NotADirectory {
        /// The path.
        path: PathBuf,
        /// What it is instead ("a regular file", "a symbolic link", …).
        kind: &'static str,
    },
    /// Its group or others may create, rename or delete files in it.
    #[error(
        "state directory {}: writable by its group or others (mode {mode:04o}); give a directory only its owner may write",
        path.display()
    )]
    WritableByOthers {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Another user owns it, and could plant or swap files in it.
    #[error(
        "state directory {}: owned by uid {owner}, not by this process's user (uid {user})",
        path.display()
    )]
    ForeignOwner {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The process's effective user.
        user: u32,
    },
    /// Its metadata cannot be read, or its mode cannot be narrowed.
    #[error("state directory {}: {why}", path.display())]
    Unusable {
        /// The directory.
        path: PathBuf,
        /// What failed.
        why: String,
    },
}

/// What [`judge`] looks at, from a directory's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DirFacts {
    /// `None` for a directory, else what the path is.
    pub(crate) not_a_dir: Option<&'static str>,
    /// The owner's uid.
    pub(crate) owner: u32,
    /// The permission bits (and setuid, setgid, sticky).
    pub(crate) mode: u32,
}

impl DirFacts {
    fn of(meta: &Metadata) -> Self {
        let kind = meta.file_type();
        DirFacts {
            not_a_dir: (!kind.is_dir()).then(|| kind_name(&kind)),
            owner: meta.uid(),
            mode: meta.mode() & 0o7777,
        }
    }
}

/// What a file system entry is, for messages: "a regular file", "a FIFO"…
pub(crate) fn kind_name(kind: &fs::FileType) -> &'static str {
    if kind.is_file() {
        "a regular file"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_char_device() {
        "a character device"
    } else {
        "neither a file nor a directory"
    }
}

/// Whether the directory at `path`, described by `facts`, may hold the
/// records of a process running as `user`: a directory, owned by `user`,
/// that neither its group nor others may write (a sticky bit does not make
/// a shared directory private: others still create files in it).
pub(crate) fn judge(path: &Path, facts: DirFacts, user: u32) -> Result<(), StateDirError> {
    let path = path.to_owned();
    if let Some(kind) = facts.not_a_dir {
        return Err(StateDirError::NotADirectory { path, kind });
    }
    if facts.owner != user {
        return Err(StateDirError::ForeignOwner {
            path,
            owner: facts.owner,
            user,
        });
    }
    if facts.mode & 0o022 != 0 {
        return Err(StateDirError::WritableByOthers {
            path,
            mode: facts.mode,
        });
    }
    Ok(())
}

/// Creates (0700) and checks the state directory `dir` and its records
/// directory, narrows the records directory to 0700, and returns its path.
pub(crate) fn prepare(dir: &Path) -> Result<PathBuf, StateDirError> {
    ensure_dir(dir, 0o700, Follow::Yes)?;
    let records = dir.join(RECORDS_DIR);
    ensure_dir(&records, 0o700, Follow::No)?;
    narrow(&records)?;
    Ok(records)
}

/// Whether a path may be reached through a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// The user's own path: a symlink to a directory is that directory.
    Yes,
    /// A path inside the state directory: a symlink is refused.
    No,
}

/// Creates `path` (and its missing parents) with `mode` if missing, then
/// checks what is there: a directory (reached through a symlink only with
/// [`Follow::Yes`]) that the process's effective user owns and that
/// neither its group nor others may write. The state directory's own
/// directories are made 0700; the publisher's 0755, to be served.
pub fn ensure_dir(path: &Path, mode: u32, follow: Follow) -> Result<(), StateDirError> {
    let user = rustix::process::geteuid().as_raw();
    let created = DirBuilder::new().recursive(true).mode(mode).create(path);
    let stat = match follow {
        Follow::Yes => fs::metadata(path),
        Follow::No => fs::symlink_metadata(path),
    };
    let meta = match (stat, created) {
        (Ok(meta), _) => meta,
        (Err(_), Err(e)) => {
            return Err(StateDirError::Create {
                path: path.to_owned(),
                why: e.to_string(),
            });
        }
        (Err(e), Ok(())) => {
            return Err(StateDirError::Unusable {
                path: path.to_owned(),
                why: format!("cannot read its metadata: {e}"),
            });
        }
    };
    judge(path, DirFacts::of(&meta), user)
}

/// Takes the group's and others' bits off the records directory. Its
/// parent was judged: nobody else can swap it for something else.
fn narrow(records: &Path) -> Result<(), StateDirError> {
    let unusable = |why: String| StateDirError::Unusable {
        path: records.to_owned(),
        why,
    };
    let mode = fs::symlink_metadata(records)
        .map_err(|e| unusable(format!("cannot read its metadata: {e}")))?
        .mode()
        & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    fs::set_permissions(records, fs::Permissions::from_mode(0o700))
        .map_err(|e| unusable(format!("cannot narrow its mode {mode:04o} to 0700: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u32 = 1000;

    fn dir(owner: u32, mode: u32) -> DirFacts {
        DirFacts {
            not_a_dir: None,
            owner,
            mode,
        }
    }

    fn judged(facts: DirFacts) -> Result<(), StateDirError> {
        judge(Path::new("/srv/state"), facts, ME)
    }

    /// The state directory's files: a directory of the process's user that
    /// nobody else may write is used, whatever others may read.
    #[test]
    fn own_directory_writable_only_by_its_owner_is_used() {
        for mode in [0o700, 0o750, 0o755, 0o500] {
            assert_eq!(judged(dir(ME, mode)), Ok(()), "mode {mode:o}");
        }
    }

    /// The state directory's files: a directory its group or others may
    /// write (a sticky /tmp included) is refused, naming it and its mode.
    #[test]
    fn directory_writable_by_group_or_others_is_refused() {
        for mode in [0o770, 0o702, 0o777, 0o1777, 0o720] {
            let e = judged(dir(ME, mode)).unwrap_err();
            assert_eq!(
                e,
                StateDirError::WritableByOthers {
                    path: PathBuf::from("/srv/state"),
                    mode
                }
            );
            let text = e.to_string();
            assert!(text.contains("/srv/state") && text.contains(&format!("{mode:04o}")));
        }
    }

    /// The state directory's files: a directory another user owns is
    /// refused, even when only its owner may write it (root's included).
    #[test]
    fn directory_of_another_user_is_refused() {
        for owner in [0, 1001] {
            let e = judged(dir(owner, 0o700)).unwrap_err();
            assert_eq!(
                e,
                StateDirError::ForeignOwner {
                    path: PathBuf::from("/srv/state"),
                    owner,
                    user: ME
                }
            );
            assert!(e.to_string().contains("/srv/state"), "{e}");
        }
    }

    /// The state directory's files: a path that is not a directory is
    /// refused, saying what it is.
    #[test]
    fn path_that_is_not_a_directory_is_refused_saying_what_it_is() {
        let facts = DirFacts {
            not_a_dir: Some("a regular file"),
            ..dir(ME, 0o600)
        };
        let e = judged(facts).unwrap_err();
        assert_eq!(
            e.to_string(),
            "state directory /srv/state: not a directory (a regular file)"
        );
    }

    /// A records directory made 0755 by an older version is narrowed to
    /// 0700; a symlink in its place is refused.
    #[test]
    fn records_directory_is_narrowed_and_may_not_be_a_symlink() {
        let root = tempfile::tempdir().unwrap();
        let state = root.path().join("state");
        let records = state.join(RECORDS_DIR);
        fs::create_dir_all(&records).unwrap();
        fs::set_permissions(&state, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(&records, fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(prepare(&state), Ok(records.clone()));
        let mode = |p: &Path| fs::symlink_metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(&records), 0o700);
        assert_eq!(
            mode(&state),
            0o755,
            "the user's own directory is left as is"
        );

        fs::remove_dir(&records).unwrap();
        let elsewhere = root.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &records).unwrap();
        assert_eq!(
            prepare(&state),
            Err(StateDirError::NotADirectory {
                path: records,
                kind: "a symbolic link"
            })
        );
    }
}
