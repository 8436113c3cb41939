//! Publishing resources as a directory a static file host serves: the
//! layout the HTTP CDN source (`source::cdn`) fetches, written by
//! `xdsfed publish` from what a client receives (docs/federation.md,
//! "Publishing a CDN directory").
//!
//! ```text
//! resource (type URL, name, bytes) ─► published_path + file_contents (here, sans-IO)
//!                                    └► xdsfed_client::publish::PublishDir (IO)
//!                                         {dir}/AUTH/TYPE/ID…  or  {dir}/TYPE/NAME
//! ```
//!
//! # The rules
//!
//! - A resource's file is the path [`url_path_of`](crate::name::url_path_of)
//!   gives its name, each segment decoded as a file host decodes a
//!   request; names it refuses, names with context parameters (a static
//!   host ignores the query), globs, inline entries and names with a
//!   segment starting with `.` (the temporaries' names) have no file.
//! - A file holds a binary `DiscoveryResponse` with that one resource and
//!   a `version_info` derived from its bytes: the same resource always
//!   makes the same file, and a file that already holds the bytes is not
//!   rewritten (its mtime, and so an nginx ETag, stays put). A file that
//!   is replaced gets an mtime a whole second later than the one it
//!   replaces ([`modification_time`]), so nginx's ETag (mtime in seconds
//!   and size) changes with every change of content.
//! - Each file is written through a temporary created exclusively with
//!   `O_NOFOLLOW` under a random dot-name ending in `.tmp`, synced,
//!   renamed, and its directory synced; leftover temporaries are deleted
//!   when the publisher starts. Files are 0644 and directories 0755
//!   (meant to be served by a web server running as another user); the
//!   output directory and every directory in it must be the user's own
//!   and writable by nobody else, and none may be a symlink below the
//!   output directory.

mod layout;

pub use layout::{
    PublishLayoutError, PublishedPath, TEMP_SUFFIX, content_version, file_contents,
    is_temp_file_name, modification_time, published_path, temp_file_name,
};
