//! One record file: its bytes, its name, and the checks a file must pass
//! to be read back. Pure functions: no IO.
//!
//! ```text
//! offset  size  field
//! 0       8     magic "XDSFEDS1"
//! 8       4     type URL length    (u32, little endian)
//! 12      4     name length        (u32)
//! 16      4     version length     (u32)
//! 20      4     server length      (u32)
//! 24      8     resource length    (u64)
//! 32      …     type URL, name, version, server (UTF-8), resource bytes
//! end-32  32    SHA-256 of every byte before it
//! ```
//!
//! A file is read back only when its length is exactly what its header
//! says, its checksum matches, its strings are UTF-8 and its file name is
//! the one its key gives ([`file_name`]): a truncated, corrupted, foreign
//! or misplaced file is an error naming why.

use std::sync::Arc;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::protocol::ResourceKey;

/// The first bytes of every record file (format version 1).
pub const MAGIC: &[u8; 8] = b"XDSFEDS1";
/// Header bytes before the fields.
const HEADER: usize = 32;
/// Checksum bytes after the fields.
const CHECKSUM: usize = 32;
/// What a record file's name ends with.
pub const RECORD_SUFFIX: &str = ".rec";
/// What a record's temporary file's name ends with, while it is written
/// ([`temp_file_name`]; older versions named it `<record>.tmp`).
pub const TEMP_SUFFIX: &str = ".tmp";

/// One persisted copy of a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The resource's type URL.
    pub type_url: Arc<str>,
    /// Its canonical name (the cache key).
    pub name: Arc<str>,
    /// The version the server sent it with.
    pub version: Arc<str>,
    /// The server that sent it, as the client names it (its URI first).
    pub server: Arc<str>,
    /// The resource's bytes (the `value` of its `Any`), as received.
    pub resource: Bytes,
}

/// Why a file is not a readable record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The file does not start with [`MAGIC`]: not written by this format.
    #[error("not an xdsfed state record (no XDSFEDS1 magic)")]
    Foreign,
    /// The file is shorter than its header says (an interrupted write, or
    /// a truncation).
    #[error("truncated: {len} bytes, the header says {expected}")]
    Truncated {
        /// The file's length.
        len: u64,
        /// The length its header gives (or the smallest record).
        expected: u64,
    },
    /// The file is longer than its header says.
    #[error("{extra} bytes after the record")]
    TrailingBytes {
        /// How many bytes too many.
        extra: u64,
    },
    /// The checksum does not match the content.
    #[error("checksum mismatch: the content was corrupted")]
    Checksum,
    /// A string field is not UTF-8.
    #[error("field {0} is not UTF-8")]
    NotUtf8(&'static str),
    /// The file is larger than a record may be.
    #[error("{len} bytes, over the bound of {max}")]
    TooLarge {
        /// The file's length.
        len: u64,
        /// The bound.
        max: u64,
    },
    /// The record is whole but its file name is not the one its key gives.
    #[error("file name does not match the record's key ({expected} expected)")]
    Misplaced {
        /// The file name the record's key gives.
        expected: String,
    },
}

/// The file name of `key`'s record: the hex SHA-256 of `type URL NUL name`.
/// Fixed length and free of any character a server chose.
pub fn file_name(type_url: &str, name: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(type_url.as_bytes());
    hash.update([0u8]);
    hash.update(name.as_bytes());
    format!("{}{RECORD_SUFFIX}", hex::encode(hash.finalize()))
}

/// [`file_name`] of a cache key.
pub fn file_name_of(key: &ResourceKey) -> String {
    file_name(&key.type_url, &key.name)
}

/// The name of a temporary file for the record file `record_file`:
/// `<record_file>.<nonce as 16 hex digits>.tmp`. The writer draws `nonce`
/// at random, so nobody can create the name ahead of it.
pub fn temp_file_name(record_file: &str, nonce: u64) -> String {
    format!("{record_file}.{nonce:016x}{TEMP_SUFFIX}")
}

/// Whether `file_name` is a temporary file an interrupted write left: of
/// [`temp_file_name`]'s scheme, or of the older `<record>.tmp`.
pub fn is_temp_file_name(file_name: &str) -> bool {
    file_name.ends_with(TEMP_SUFFIX)
}

/// The length of the encoded record of these fields.
pub fn encoded_len(
    type_url: &str,
    name: &str,
    version: &str,
    server: &str,
    resource: usize,
) -> u64 {
    let fields = [
        type_url.len(),
        name.len(),
        version.len(),
        server.len(),
        resource,
    ];
    fields.iter().fold((HEADER + CHECKSUM) as u64, |sum, len| {
        sum.saturating_add(*len as u64)
    })
}

impl Record {
    /// The length of [`Record::encode`]'s output.
    pub fn encoded_len(&self) -> u64 {
        encoded_len(
            &self.type_url,
            &self.name,
            &self.version,
            &self.server,
            self.resource.len(),
        )
    }

    /// The record's cache key.
    pub fn key(&self) -> ResourceKey {
        ResourceKey::new(Arc::clone(&self.type_url), Arc::clone(&self.name))
    }

    /// The record's bytes. Strings longer than 4 GiB cannot be encoded:
    /// `None` (no name or version comes near that; the caller bounds the
    /// record's size well below it).
    pub fn encode(&self) -> Option<Vec<u8>> {
        let len32 = |s: &str| u32::try_from(s.len()).ok();
        let mut out = Vec::with_capacity(usize::try_from(self.encoded_len()).ok()?);
        out.extend_from_slice(MAGIC);
        for field in [&self.type_url, &self.name, &self.version, &self.server] {
            out.extend_from_slice(&len32(field)?.to_le_bytes());
        }
        out.extend_from_slice(&(self.resource.len() as u64).to_le_bytes());
        for field in [&self.type_url, &self.name, &self.version, &self.server] {
            out.extend_from_slice(field.as_bytes());
        }
        out.extend_from_slice(&self.resource);
        let sum = Sha256::digest(&out);
        out.extend_from_slice(&sum);
        Some(out)
    }

    /// Reads a record back from `bytes`, checking its length, checksum and
    /// strings (not its file name: see [`Record::decode_file`]).
    pub fn decode(bytes: &[u8]) -> Result<Record, RecordError> {
        let len = bytes.len() as u64;
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(RecordError::Foreign);
        }
        let smallest = (HEADER + CHECKSUM) as u64;
        if len < smallest {
            return Err(RecordError::Truncated {
                len,
                expected: smallest,
            });
        }
        let u32_at = |at: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&bytes[at..at + 4]);
            u64::from(u32::from_le_bytes(b))
        };
        let mut resource_len = [0u8; 8];
        resource_len.copy_from_slice(&bytes[24..32]);
        let lens = [
            u32_at(8),
            u32_at(12),
            u32_at(16),
            u32_at(20),
            u64::from_le_bytes(resource_len),
        ];
        let expected = lens.iter().fold(smallest, |sum, l| sum.saturating_add(*l));
        if len < expected {
            return Err(RecordError::Truncated { len, expected });
        }
        if len > expected {
            return Err(RecordError::TrailingBytes {
                extra: len - expected,
            });
        }
        // The length is exact, so every field below is in bounds.
        let body = bytes.len() - CHECKSUM;
        if Sha256::digest(&bytes[..body]).as_slice() != &bytes[body..] {
            return Err(RecordError::Checksum);
        }
        let mut at = HEADER;
        let mut take = |len: u64| {
            let len = usize::try_from(len).unwrap_or(usize::MAX).min(body - at);
            let field = &bytes[at..at + len];
            at += len;
            field
        };
        let mut text = |len: u64, field: &'static str| {
            std::str::from_utf8(take(len))
                .map(Arc::from)
                .map_err(|_| RecordError::NotUtf8(field))
        };
        let type_url = text(lens[0], "type_url")?;
        let name = text(lens[1], "name")?;
        let version = text(lens[2], "version")?;
        let server = text(lens[3], "server")?;
        let resource = Bytes::copy_from_slice(take(lens[4]));
        Ok(Record {
            type_url,
            name,
            version,
            server,
            resource,
        })
    }

    /// Reads the record in the file `file_name` from `bytes`: a whole
    /// record whose key gives that file name.
    pub fn decode_file(file_name: &str, bytes: &[u8]) -> Result<Record, RecordError> {
        let record = Record::decode(bytes)?;
        let expected = self::file_name(&record.type_url, &record.name);
        if expected != file_name {
            return Err(RecordError::Misplaced { expected });
        }
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Record {
        Record {
            type_url: Arc::from("type.googleapis.com/envoy.config.cluster.v3.Cluster"),
            name: Arc::from("xdstp://a/envoy.config.cluster.v3.Cluster/c1"),
            version: Arc::from("7"),
            server: Arc::from("http://127.0.0.1:1 (insecure)"),
            resource: Bytes::from_static(b"\x0a\x02c1\x10\x03"),
        }
    }

    #[test]
    fn record_round_trips_through_its_bytes_and_file_name() {
        let record = small();
        let bytes = record.encode().unwrap();
        assert_eq!(bytes.len() as u64, record.encoded_len());
        let name = file_name_of(&record.key());
        assert_eq!(Record::decode_file(&name, &bytes), Ok(record));
    }

    #[test]
    fn empty_fields_round_trip() {
        let record = Record {
            type_url: Arc::from(""),
            name: Arc::from(""),
            version: Arc::from(""),
            server: Arc::from(""),
            resource: Bytes::new(),
        };
        let bytes = record.encode().unwrap();
        assert_eq!(Record::decode(&bytes), Ok(record));
    }

    /// Every prefix of a record (an interrupted write, a truncated file)
    /// is rejected.
    #[test]
    fn every_truncation_of_a_record_is_rejected() {
        let bytes = small().encode().unwrap();
        for len in 0..bytes.len() {
            let got = Record::decode(&bytes[..len]);
            assert!(got.is_err(), "a record cut to {len} bytes was accepted");
        }
    }

    /// Every single-byte change anywhere in a record is rejected: in the
    /// magic (foreign), a length (truncated or trailing, or the checksum),
    /// a field or the checksum itself.
    #[test]
    fn every_single_byte_flip_of_a_record_is_rejected() {
        let bytes = small().encode().unwrap();
        for at in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[at] ^= flip;
                let got = Record::decode(&bad);
                assert!(got.is_err(), "byte {at} ^ {flip:#x} was accepted");
            }
        }
    }

    #[test]
    fn foreign_file_is_rejected_as_foreign() {
        assert_eq!(
            Record::decode(b"{\"not\": \"a record\"}"),
            Err(RecordError::Foreign)
        );
        assert_eq!(Record::decode(b""), Err(RecordError::Foreign));
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        let mut bytes = small().encode().unwrap();
        bytes.push(0);
        assert_eq!(
            Record::decode(&bytes),
            Err(RecordError::TrailingBytes { extra: 1 })
        );
    }

    /// A whole record under another key's file name (copied or renamed by
    /// hand) is not read as that key.
    #[test]
    fn record_under_another_file_name_is_rejected() {
        let bytes = small().encode().unwrap();
        let other = file_name("t", "n");
        assert!(matches!(
            Record::decode_file(&other, &bytes),
            Err(RecordError::Misplaced { .. })
        ));
    }

    /// Both the current and the older temporary names are recognised as
    /// leftovers; a record's own name is not.
    #[test]
    fn temporary_names_of_both_schemes_are_recognised() {
        let record = file_name("t", "n");
        let temp = temp_file_name(&record, 0x0123_4567_89ab_cdef);
        assert_eq!(temp, format!("{record}.0123456789abcdef.tmp"));
        assert!(is_temp_file_name(&temp));
        assert!(is_temp_file_name(&format!("{record}.tmp")));
        assert!(!is_temp_file_name(&record));
    }

    #[test]
    fn file_name_separates_type_and_name() {
        assert_ne!(file_name("ab", "c"), file_name("a", "bc"));
        assert_eq!(file_name("a", "b").len(), 64 + RECORD_SUFFIX.len());
    }
}
