//! Reading the local files that configure the client — the bootstrap and
//! the TLS credentials it names — with bounds.
//!
//! ```text
//! path ─► stat: a regular file? ─► no: FIFO, device, directory, socket ─► refused
//!                 │ yes
//!                 └► size ≤ limit? ─► no ─► refused
//!                       │ yes
//!                       └► open, read at most limit + 1 bytes ─► more? refused
//! ```
//!
//! A FIFO would block the reader until some writer appears (forever, and
//! a blocked thread does not see Ctrl-C); `/dev/zero` would be read until
//! memory runs out. Both are refused before opening. The size is checked
//! twice: before reading, and while reading, in case the file grew in
//! between. `docs/bootstrap.md` states the limits.

use std::fmt;
use std::io::Read;
use std::path::Path;

use rustls::pki_types::{
    CertificateDer, PrivateKeyDer,
    pem::{self, PemObject},
};

/// The most a bootstrap file may hold: far more than any real one.
pub const BOOTSTRAP_LIMIT: u64 = 4 * 1024 * 1024;

/// The most a PEM file (CA bundle, certificate chain, private key) may
/// hold: room for thousands of certificates.
pub const PEM_LIMIT: u64 = 1024 * 1024;

/// Why a file was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileError {
    /// The operating system refused (missing file, no permission, …).
    Io(String),
    /// Not a regular file: what it is instead.
    NotRegular(&'static str),
    /// Larger than the limit, in bytes.
    TooLarge(u64),
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::Io(message) => f.write_str(message),
            FileError::NotRegular(what) => write!(f, "{what}, not a regular file"),
            FileError::TooLarge(limit) => {
                write!(f, "larger than the limit of {}", human_size(*limit))
            }
        }
    }
}

/// Reads the regular file at `path`, refusing anything else and anything
/// over `limit` bytes.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let metadata = std::fs::metadata(path).map_err(|e| FileError::Io(e.to_string()))?;
    if !metadata.is_file() {
        return Err(FileError::NotRegular(kind_of(&metadata.file_type())));
    }
    if metadata.len() > limit {
        return Err(FileError::TooLarge(limit));
    }
    let file = std::fs::File::open(path).map_err(|e| FileError::Io(e.to_string()))?;
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| FileError::Io(e.to_string()))?;
    if u64::try_from(bytes.len()).map_or(true, |n| n > limit) {
        return Err(FileError::TooLarge(limit));
    }
    Ok(bytes)
}

/// What a file that is not regular is, in words.
fn kind_of(file_type: &std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    "a special file"
}

/// `4 MiB`, `1 MiB`, or bytes for anything smaller.
fn human_size(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// What a PEM file must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PemKind {
    /// One or more certificates (a CA bundle, a certificate chain).
    Certificates,
    /// A private key.
    PrivateKey,
}

/// Checks that `pem` holds what `kind` says; the problem in words when
/// not ("holds no PEM certificate").
pub fn check_pem(pem: &[u8], kind: PemKind) -> Result<(), String> {
    match kind {
        PemKind::Certificates => {
            let mut count = 0usize;
            for cert in CertificateDer::pem_slice_iter(pem) {
                cert.map_err(|e| format!("is not valid PEM: {e}"))?;
                count += 1;
            }
            if count == 0 {
                return Err("holds no PEM certificate".to_owned());
            }
            Ok(())
        }
        PemKind::PrivateKey => PrivateKeyDer::from_pem_slice(pem)
            .map(drop)
            .map_err(|e| match e {
                pem::Error::NoItemsFound => "holds no PEM private key".to_owned(),
                e => format!("is not valid PEM: {e}"),
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A fresh directory of this test's own under the system's temporary
    /// directory.
    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xdsfed-file-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        dir
    }

    #[test]
    fn a_regular_file_within_the_limit_is_read() {
        let file = scratch("regular").join("f");
        std::fs::write(&file, b"hello").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_bounded(&file, 5), Ok(b"hello".to_vec()));
        assert_eq!(read_bounded(&file, 4), Err(FileError::TooLarge(4)));
    }

    #[test]
    fn directories_and_missing_files_are_refused() {
        let dir = scratch("dir");
        assert_eq!(
            read_bounded(&dir, PEM_LIMIT),
            Err(FileError::NotRegular("a directory"))
        );
        let missing = read_bounded(&dir.join("nope"), PEM_LIMIT);
        assert!(matches!(missing, Err(FileError::Io(_))), "{missing:?}");
    }

    /// `/dev/zero` is never opened: it would be read until memory runs out.
    #[cfg(unix)]
    #[test]
    fn devices_are_refused_before_reading() {
        let zero = read_bounded(Path::new("/dev/zero"), BOOTSTRAP_LIMIT);
        assert_eq!(zero, Err(FileError::NotRegular("a character device")));
        assert_eq!(
            zero.map_err(|e| e.to_string()),
            Err("a character device, not a regular file".to_owned())
        );
    }

    /// A FIFO with no writer would block `open` forever; it is refused
    /// from its metadata alone.
    #[cfg(unix)]
    #[test]
    fn fifos_are_refused_without_blocking() {
        let fifo = scratch("fifo").join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            // No mkfifo on this system: nothing to test.
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(read_bounded(&fifo, PEM_LIMIT));
        });
        let result = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("reading a FIFO blocked"));
        assert_eq!(result, Err(FileError::NotRegular("a FIFO (named pipe)")));
    }

    #[test]
    fn pem_kinds_are_checked() {
        assert_eq!(
            check_pem(b"not pem", PemKind::Certificates),
            Err("holds no PEM certificate".to_owned())
        );
        assert_eq!(
            check_pem(b"", PemKind::PrivateKey),
            Err("holds no PEM private key".to_owned())
        );
        assert_eq!(human_size(BOOTSTRAP_LIMIT), "4 MiB");
        assert_eq!(human_size(10), "10 bytes");
    }
}
