//! [`FileConnection`]: the handle on one filesystem source's driver task,
//! as the client's executor sees it (a [`SourceConnection`](crate::source::SourceConnection)).

use std::sync::Arc;

use super::driver::Driver;
use crate::source::SourceHandle;
use crate::transport::{EventSink, TransportOptions};
use xdsfed_core::bootstrap::{ApiVariant, FileFormat, FileSource, ServerConfig};
use xdsfed_core::protocol::AuthorityFilter;
use xdsfed_core::source::file::{FileSession, FileSessionConfig};
use xdsfed_core::types::TypeRegistry;

/// Marks a [`SourceHandle`] as a filesystem source's.
#[derive(Debug)]
pub(crate) enum FileKind {}

/// A handle on one filesystem source. Nothing is read until the first
/// subscription; from then on the file is re-read whenever its directory
/// changes. The driver task ends on [`SourceHandle::shutdown`] or when
/// every handle is dropped. A file has no versions to forget.
pub(crate) type FileConnection = SourceHandle<FileKind>;

impl SourceHandle<FileKind> {
    /// Spawns the driver of `source` (the file of `server`) on the current
    /// tokio runtime (panics outside one, like `tokio::spawn`). `filter`
    /// says which names the file may deliver; a file larger than
    /// `opts.max_message_size` (a JSON or YAML one: than
    /// `opts.text_message_limit()`) is refused.
    pub(crate) fn spawn(
        server: ServerConfig,
        source: FileSource,
        filter: AuthorityFilter,
        types: Arc<TypeRegistry>,
        sink: Arc<dyn EventSink>,
        opts: &TransportOptions,
    ) -> Self {
        let cfg = FileSessionConfig {
            path: source.path.clone(),
            format: source.format,
            filter,
        };
        // The file is the full state: the nearer of the variants.
        let (handle, commands, stats) = Self::new(ApiVariant::Sotw);
        let limit = match source.format {
            FileFormat::Protobuf => opts.max_message_size,
            FileFormat::Json | FileFormat::Yaml => opts.text_message_limit(),
        };
        let limit = u64::try_from(limit).unwrap_or(u64::MAX);
        let driver = Driver {
            session: FileSession::new(cfg, types),
            server,
            source,
            limit,
            sink,
            stats,
        };
        // Its attempts never fail: the backoff is never used.
        tokio::spawn(crate::source::reconnect::run(
            driver,
            commands,
            opts.backoff,
        ));
        handle
    }
}
