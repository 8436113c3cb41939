//! What the source kinds and the one reconnecting loop
//! ([`reconnect`](super::reconnect)) share around their sessions: the clock
//! they pass in, the sleep on the session's next deadline, the idle
//! deadline after the last subscription goes, the publishing of a
//! protocol session's counters, and who ended a failed gRPC call.

use std::time::{Duration, Instant};

use crate::transport::ConnectionStats;
use xdsfed_core::protocol::{Initiator, SessionStats};

/// The clock: tokio's, so that paused-time tests control it.
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Who ended a gRPC call (ADS, the policy stream) that failed with
/// `status`. tonic attaches the error it made a status from as the
/// status's source: a refused connection, a TLS handshake that failed, a
/// connection reset, a connect deadline, the transport's ends. A status
/// the server sent is read off the wire and has none.
pub(crate) fn initiator_of(status: &tonic::Status) -> Initiator {
    if std::error::Error::source(status).is_some() {
        Initiator::Transport
    } else {
        Initiator::Server
    }
}

/// Sleeps until `at`, or forever without one (a `select!` branch that
/// never fires).
pub(crate) async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}

/// When an attempt with nothing subscribed ends: `idle_grace` after the
/// last subscription went. One per attempt.
#[derive(Debug, Default)]
pub(crate) struct IdleTimer {
    /// Since when nothing is subscribed.
    since: Option<Instant>,
}

impl IdleTimer {
    /// The deadline, given whether anything is `subscribed` now.
    pub(crate) fn deadline(&mut self, subscribed: bool, grace: Duration) -> Option<Instant> {
        if subscribed {
            self.since = None;
        } else if self.since.is_none() {
            self.since = Some(now());
        }
        self.since.map(|t| t + grace)
    }
}

/// Publishes a protocol session's counters (ADS, REST) in the connection's,
/// and `answered` (the types of the responses handled since the last call;
/// several when responses that arrived together were handled together)
/// among the answered types: called once the events of those answers
/// reached the cache, as [`ConnectionStats::answered_types`] requires.
pub(crate) fn publish_session_stats(
    stats: &mut ConnectionStats,
    s: &SessionStats,
    answered: impl IntoIterator<Item = impl AsRef<[u8]>>,
) {
    stats.server_failure = s.server_failure;
    stats.resource_updates_valid = s.resource_updates_valid;
    stats.resource_updates_invalid = s.resource_updates_invalid;
    // The session's map only grows; copy what changed, allocating only
    // for a type's first count.
    for (type_url, counts) in &s.updates_by_type {
        match stats.updates_by_type.get_mut(&**type_url) {
            Some(published) => *published = *counts,
            None => {
                stats.updates_by_type.insert(type_url.to_string(), *counts);
            }
        }
    }
    stats.foreign_names_ignored = s.foreign_names_ignored;
    for type_url in answered {
        if let Ok(type_url) = std::str::from_utf8(type_url.as_ref())
            && !stats.answered_types.contains(type_url)
        {
            stats.answered_types.insert(type_url.to_owned());
        }
    }
}
