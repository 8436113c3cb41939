//! How each event changes a watched entry's state (gRFC A88), with the
//! server features of gRFC A53/A88 (`ignore_resource_deletion`,
//! `fail_on_data_errors`, `resource_timer_indicates_transient_failure`):
//!
//! | event | cached copy | without one |
//! | --- | --- | --- |
//! | valid update | replaced (wakes only if the bytes differ, even after a NACK) | stored |
//! | NACK | kept, ambient error (dropped with `fail_on_data_errors`); the NACK last reported, again, wakes nobody | error |
//! | deletion by the server | dropped, does not exist (kept with `ignore_resource_deletion`) | does not exist |
//! | does-not-exist timer | — | does not exist (timeout with the transient-timer feature) |
//! | TP3 resource error | kept, ambient error (dropped for NOT_FOUND/PERMISSION_DENIED with `fail_on_data_errors`) | error (does not exist for NOT_FOUND) |
//! | stream failure (A57) | kept, ambient error | error; a known absence records it quietly (no second "does not exist") |
//!
//! A copy loaded from the state directory (status `FromDisk`) serves with
//! an ambient error saying so: the first update replaces it (and wakes
//! watchers even with the same bytes, to clear the error), a deletion
//! drops it, transient errors leave it and its error as they are, and the
//! does-not-exist timer drops it only once its server has answered on the
//! current stream (the cache decides that, in `cache/from_disk.rs`).
//!
//! Pure functions of a state and an event: the cache runs them inside its
//! channels, and the whole-client simulation runs the same ones on its
//! model of the watchers.

use std::sync::Arc;
use std::time::SystemTime;

use super::{DataErrorPolicy, ResourceState, ResourceStatus, Source};
use crate::error::{Cause, ErrorKind, GrpcCode, RedirectRefusal, XdsError};
use crate::protocol::{CoreEvent, RemovedReason, ResourceKey};
use crate::types::{Decoded, ValidationError};
use crate::version::Version;

/// What an event is applied with.
#[derive(Debug)]
pub struct Context<'a> {
    /// The server as error messages name it (with `(as NAME)` when the copy
    /// stood in for the entry).
    pub server: &'a Arc<str>,
    /// The server features in force.
    pub policy: DataErrorPolicy,
    /// The wall-clock time the event is applied at (CSDS timestamps).
    pub now: SystemTime,
}

/// The last NACK an entry's watchers heard of (failed version, message).
/// Boxed: every cached resource holds one and nearly all are `None`, so
/// inline it would cost 40 bytes a resource instead of 8.
pub type ReportedNack = Option<Box<(Version, String)>>;

/// Applies `event` (about `key`) to `state`. Returns whether watchers
/// should hear of it. `source` is where an update came from.
pub fn apply(
    state: &mut ResourceState,
    reported: &mut ReportedNack,
    event: &CoreEvent,
    source: Source,
    cx: &Context<'_>,
) -> bool {
    match event {
        CoreEvent::Upsert {
            resource, version, ..
        } => {
            let changed = upsert(state, resource, version, source, cx.now);
            if changed {
                *reported = None;
            }
            changed
        }
        CoreEvent::Invalid {
            key,
            error,
            version,
        } => invalid(state, reported, key, error, version, cx),
        CoreEvent::Removed { key, reason } => removed(state, key, *reason, cx),
        CoreEvent::DoesNotExist { key } => does_not_exist(state, key, cx),
        CoreEvent::ResourceError { key, code, message } => {
            resource_error(state, key, *code, message, cx)
        }
        CoreEvent::NotRequested { key, reason } => {
            let message = format!(
                "{} {} not requested from server {}: {reason}",
                short_type(&key.type_url),
                key.name,
                cx.server
            );
            let error = XdsError::new(ErrorKind::Watch, message).with_cause(Cause::NotRequested);
            state.error = Some(about(error, key, cx));
            true
        }
        CoreEvent::Redirect { key, target, .. } => {
            // Only an unrouted copy (a wildcard delivery) gets here: a
            // watched entry's redirects are the federation core's.
            let message = format!(
                "{} {} redirected by server {} to {}: not followed for a wildcard delivery",
                short_type(&key.type_url),
                key.name,
                cx.server,
                target
            );
            let error = XdsError::new(ErrorKind::ServerError, message)
                .with_cause(Cause::RedirectRefused(RedirectRefusal::InvalidTarget));
            data_error(state, about(error, key, cx))
        }
        _ => false,
    }
}

/// A valid copy: stored; watchers wake only if its bytes differ from the
/// copy they hold. The copy they hold, sent again (after a reconnect, or
/// after a NACK), is no news: the state is brought up to date quietly.
pub(super) fn upsert(
    state: &mut ResourceState,
    resource: &Decoded,
    version: &Version,
    source: Source,
    now: SystemTime,
) -> bool {
    let same_bytes = state.resource.as_ref().map(|r| r.raw()) == Some(resource.raw());
    let was_from_disk = state.status == ResourceStatus::FromDisk;
    state.version = Some(version.clone());
    state.source = Some(source);
    state.status = ResourceStatus::Acked;
    state.error = None;
    state.failed_update = None;
    if !same_bytes {
        state.resource = Some(resource.clone());
        state.last_updated = Some(now);
    }
    !same_bytes || was_from_disk
}

/// A rejected copy (NACK): the last good one keeps serving; the same NACK
/// as the one last reported wakes nobody.
fn invalid(
    state: &mut ResourceState,
    reported: &mut ReportedNack,
    key: &ResourceKey,
    error: &ValidationError,
    version: &Version,
    cx: &Context<'_>,
) -> bool {
    let fail = cx.policy.fail_on_data_errors;
    let message = format!(
        "{} {} rejected (NACKed) from server {}: {}",
        short_type(&key.type_url),
        key.name,
        cx.server,
        error
    );
    let nack = (version.clone(), message);
    let repeated = reported.as_deref() == Some(&nack);
    state.status = ResourceStatus::Nacked;
    state.failed_update = Some(Box::new(super::FailedUpdate {
        version: version.clone(),
        at: cx.now,
    }));
    let typed = XdsError::new(ErrorKind::Nacked, nack.1.clone()).with_cause(Cause::Rejected {
        version: Arc::from(&*version.as_str()),
    });
    state.error = Some(about(typed, key, cx));
    if fail {
        state.resource = None;
    }
    *reported = Some(Box::new(nack));
    !repeated || fail
}

/// Deleted by the server (or its TTL passed).
fn removed(
    state: &mut ResourceState,
    key: &ResourceKey,
    reason: RemovedReason,
    cx: &Context<'_>,
) -> bool {
    let keep = cx.policy.ignore_resource_deletion && reason == RemovedReason::Deleted;
    // A removal of a name the client holds no copy of deletes nothing: the
    // server is saying it does not have it.
    let (why, cause) = match reason {
        RemovedReason::Deleted if state.resource.is_none() => ("not found on", Cause::NotOnServer),
        RemovedReason::Deleted => ("deleted by", Cause::Deleted),
        RemovedReason::TtlExpired => ("expired (TTL) from", Cause::TtlExpired),
        RemovedReason::NotConsidered => (
            "not considered (its evaluation_mode is not one this client evaluates) from",
            Cause::Deleted,
        ),
    };
    let message = format!(
        "{} {} {why} server {}",
        short_type(&key.type_url),
        key.name,
        cx.server
    );
    let error = about(
        XdsError::new(ErrorKind::NotFound, message).with_cause(cause),
        key,
        cx,
    );
    if !(keep && state.resource.is_some()) {
        state.resource = None;
        state.version = None;
        state.status = ResourceStatus::DoesNotExist;
    }
    state.error = Some(error);
    true
}

/// The does-not-exist timer fired. gRFC A57: it never applies to a cached
/// resource.
fn does_not_exist(state: &mut ResourceState, key: &ResourceKey, cx: &Context<'_>) -> bool {
    if state.resource.is_some() {
        return false;
    }
    let message = format!(
        "{} {} not received from server {} before the does-not-exist timer fired",
        short_type(&key.type_url),
        key.name,
        cx.server
    );
    let (status, kind) = if cx.policy.timer_is_transient {
        (ResourceStatus::Timeout, ErrorKind::Transient)
    } else {
        (ResourceStatus::DoesNotExist, ErrorKind::NotFound)
    };
    state.status = status;
    let error = XdsError::new(kind, message).with_cause(Cause::NotReceived);
    state.error = Some(about(error, key, cx));
    true
}

/// A TP3 resource error. gRFC A88: NOT_FOUND and PERMISSION_DENIED drop a
/// cached copy under `fail_on_data_errors`.
fn resource_error(
    state: &mut ResourceState,
    key: &ResourceKey,
    code: GrpcCode,
    message: &str,
    cx: &Context<'_>,
) -> bool {
    let text = format!(
        "server {} reported an error for {} {}: {} (code {})",
        cx.server,
        short_type(&key.type_url),
        key.name,
        message,
        code.as_i32()
    );
    let drops = matches!(code, GrpcCode::NotFound | GrpcCode::PermissionDenied);
    if cx.policy.fail_on_data_errors && drops {
        state.resource = None;
    }
    let cause = Cause::ServerReported { code };
    let (status, kind) = if state.resource.is_none() && code == GrpcCode::NotFound {
        (ResourceStatus::DoesNotExist, ErrorKind::NotFound)
    } else {
        (ResourceStatus::ReceivedError, ErrorKind::ServerError)
    };
    state.status = status;
    state.error = Some(about(XdsError::new(kind, text).with_cause(cause), key, cx));
    true
}

/// A permanent error found by the client (a refused redirect, a list
/// member it cannot fetch): like a NACK, the last good copy keeps serving.
pub fn data_error(state: &mut ResourceState, error: XdsError) -> bool {
    state.status = ResourceStatus::ReceivedError;
    state.error = Some(error);
    true
}

/// A transient error (gRFC A57): the copy, if any, keeps serving.
/// A copy from the state directory keeps its own ambient error: that no
/// server has confirmed it says more than why one cannot be reached.
/// A known absence stands too: the error is recorded (the status shows
/// it) but wakes nobody, since all a watcher could be told is that the
/// resource does not exist, which it was told already. The error the
/// state carries already is no news either: a server that stays down
/// fails each retry alike, and its watchers heard of the first.
pub fn transient(state: &mut ResourceState, error: &XdsError) -> bool {
    if state.status == ResourceStatus::FromDisk || state.error.as_ref() == Some(error) {
        return false;
    }
    state.error = Some(error.clone());
    !is_known_absent(state)
}

/// The server that failed answers again: the transient error its failure
/// left is over (a timed-out entry keeps its timeout).
pub fn healthy_again(state: &mut ResourceState) -> bool {
    let stale = state.status != ResourceStatus::Timeout
        && state.status != ResourceStatus::FromDisk
        && state
            .error
            .as_ref()
            .is_some_and(|e| e.kind() == ErrorKind::Transient);
    if stale {
        state.error = None;
    }
    // A known absence heard nothing of the error: nothing to clear for it.
    stale && !is_known_absent(state)
}

/// Whether watchers of `state` were told it does not exist, and have
/// nothing else to hear until it exists again (gRFC A88: does-not-exist
/// is reported once per transition).
fn is_known_absent(state: &ResourceState) -> bool {
    state.resource.is_none() && state.status == ResourceStatus::DoesNotExist
}

/// How messages name the server of `source`: with `(as NAME)` when the copy
/// stood in for the entry (an `#alt`, a redirect target, a list's entry).
pub fn named_server(source: &Source) -> Arc<str> {
    if source.fetched_as.is_empty() {
        Arc::clone(&source.server)
    } else {
        Arc::from(format!("{} (as {})", source.server, source.fetched_as))
    }
}

/// Whether `state` answers its entry (gRFC A71's "cached"): a copy, or a
/// known absence. A glob holds no copy of its own: a member answers for it.
pub fn is_answered(key: &ResourceKey, state: &ResourceState) -> bool {
    state.resource.is_some()
        || state.status == ResourceStatus::DoesNotExist
        || state.status == ResourceStatus::Acked && crate::protocol::is_glob(&key.name)
}

fn about(error: XdsError, key: &ResourceKey, cx: &Context<'_>) -> XdsError {
    error
        .with_resource(key.clone())
        .with_server(Arc::clone(cx.server))
}

/// `envoy.config.cluster.v3.Cluster` from its type URL.
pub fn short_type(type_url: &str) -> &str {
    type_url.rsplit('/').next().unwrap_or(type_url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_failed() -> XdsError {
        XdsError::new(ErrorKind::Transient, "stream to a failed").with_cause(Cause::StreamFailed)
    }

    /// gRFC A88: does-not-exist is reported once per transition. A stream
    /// failure and the reconnect after it leave a known absence as it was
    /// for its watchers (the status shows the error meanwhile); an entry
    /// still waiting for its first answer hears of both.
    #[test]
    fn known_absence_is_not_reported_again_on_stream_failure_or_recovery() {
        let mut absent = ResourceState::requested();
        absent.status = ResourceStatus::DoesNotExist;
        assert!(!transient(&mut absent, &stream_failed()));
        assert!(absent.error.is_some());
        assert!(!healthy_again(&mut absent));
        assert!(absent.error.is_none());

        let mut waiting = ResourceState::requested();
        assert!(transient(&mut waiting, &stream_failed()));
        assert!(healthy_again(&mut waiting));
    }

    /// A server that stays down fails every retry with the same error:
    /// the watchers heard of the first, and a different one is news again.
    #[test]
    fn the_same_transient_error_again_wakes_nobody() {
        let mut state = ResourceState::requested();
        assert!(transient(&mut state, &stream_failed()));
        assert!(!transient(&mut state, &stream_failed()));
        let other = XdsError::new(ErrorKind::Transient, "stream to b failed")
            .with_cause(Cause::StreamFailed);
        assert!(transient(&mut state, &other));
        assert_eq!(state.error, Some(other));
    }
}
