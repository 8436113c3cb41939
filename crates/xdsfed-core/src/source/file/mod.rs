//! Filesystem sources: a server entry whose `server_uri` is `file://PATH`
//! (Envoy: `path_config_source`) serves what one file holds, as the xDS
//! protocol's "Filesystem subscriptions" describe and as xDS TP1's
//! handcrafted configuration on a filesystem uses (list collections with
//! inline entries). Its events are the same [`CoreEvent`](crate::protocol::CoreEvent)s an ADS stream
//! produces, so gRFC A71 fallback, `#alt`, status and metrics work alike.
//!
//! ```text
//!  subscribe / unsubscribe       ──►┐               ┌─► poll_event ─► CoreEvent (Upsert / Invalid /
//!  subscribe_wildcard / unsub.   ──►│  FileSession  │                Removed / DoesNotExist /
//!  handle_contents (bytes | why) ──►┘               │                StreamFailed / StreamHealthy)
//!                                                   └─ no timers, nothing to transmit
//! ```
//!
//! The file holds one `DiscoveryResponse`: binary protobuf (`.pb`, `.bin`),
//! or the protobuf JSON mapping as JSON (`.json`) or YAML (`.yaml`,
//! `.yml`). Its resources may be of several types (each `Any` names its
//! own; the response's `type_url` is not consulted), bare or wrapped in a
//! `Resource` (whose name keys it: a list collection has no name of its
//! own, so it needs the wrapper). The driver (`FileConnection`, in xdsfed-client) watches
//! the file's directory (or `watched_directory`), lets a burst of changes
//! settle, and reads the file again, bounded by `max_message_size`.
//!
//! # Rules
//!
//! Each rule has a test of the same name in `tests.rs`; `docs/rules.md`
//! ("Filesystem sources") lists them.
//!
//! 1. The file is the whole state. A subscribed resource present and valid
//!    is delivered (`Upsert`), its version the response's `version_info`,
//!    or a digest of the bytes when that is empty
//!    (`valid_resource_is_delivered_with_the_file_version`,
//!    `empty_version_is_a_digest_of_the_bytes`).
//! 2. A resource present but invalid (it fails validation, its inner name
//!    disagrees with its wrapper's, or its name appears twice) is reported
//!    `Invalid`; the last good copy keeps serving. There is no ACK or NACK
//!    (`invalid_resource_is_reported_and_the_copy_kept`,
//!    `duplicate_names_are_invalid`).
//! 3. A resource delivered before and now absent is `Removed`
//!    (`absent_resource_is_removed`).
//! 4. A subscribed resource absent from the first good read is
//!    `DoesNotExist` at once: the file is the answer, no timer runs
//!    (`absent_at_first_read_does_not_exist_at_once`).
//! 5. A subscription after a good read is answered from the held contents
//!    at once (`late_subscription_is_answered_from_held_contents`); a
//!    wildcard subscription likewise gets every resource of its type
//!    (`wildcard_gets_every_resource_of_its_type`).
//! 6. A file that cannot be read, or does not decode as a whole (a mapping
//!    error names the field; an entry without a name or a type names its
//!    index), fails the source: `StreamFailed`, naming the file, every copy
//!    kept; the next good read is `StreamHealthy`
//!    (`bad_file_fails_the_source_and_keeps_every_copy`,
//!    `unnamed_entry_fails_the_whole_file`).
//! 7. Identical bytes make no events
//!    (`identical_bytes_make_no_events`); the same failure is reported
//!    once (`same_failure_is_reported_once`).
//! 8. Resources of authorities the source does not serve are ignored
//!    (`foreign_authority_is_ignored`); glob collections are not served
//!    (`glob_collection_is_not_requested`).

mod entries;
mod session;

pub use session::{FileSession, FileSessionConfig, FileStats};
