//! The one driver loop every source kind runs: ADS, REST-JSON, the policy
//! stream, HTTP CDN and files.
//!
//! ```text
//!          ┌──────────── no subscriptions ◄──────────────┐
//!          ▼                                              │ idle_grace
//!   WaitingForInterest ──subscribe──► Attempt ────────────┘
//!          ▲                           │ the attempt ends
//!          │                           ▼
//!          └──────────────────── BackingOff (after every end, OK or not;
//!                                 the delay counts from the attempt's
//!                                 start, and a response resets it)
//! ```
//!
//! An attempt is what a stream is to ADS: a stream (ADS, policy stream), a
//! run of polls that ends with the first failed one (REST), a period of
//! fetching (CDN: each fetch backs off in the session, so its attempts
//! never fail) or of watching (a file: it has no connection to lose, so its
//! attempts never fail either). The rule of gRFC A57/A88, "no new attempt
//! less than one backoff interval after the last one started, after every
//! end", is written here once, with the core's [`ReconnectPolicy`].
//!
//! Each kind supplies only what differs ([`SourceDriver`]): how an attempt
//! opens, what its IO wakes with, what a command means to its session, and
//! how the session's output reaches the wire and the sink. In every state
//! the loop keeps applying commands and firing the session's timers (TTLs
//! run while disconnected); it never awaits anything but the attempt's IO,
//! commands and timers. What the IO already holds when it wakes the loop
//! (responses the connection read in one go) is handled in one run before
//! the loop flushes, so the session's output for all of it leaves together.

use std::future::Future;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use tracing::Instrument as _;

use crate::random::random_u64;
use crate::source::driving::{IdleTimer, now, sleep_until};
use crate::source::handle::{Command, Commands};
use xdsfed_core::backoff::{BackoffConfig, ReconnectPolicy};

/// How an attempt ended, when neither the client nor idleness ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttemptEnd {
    /// The server ended it or it failed: the next one waits out the
    /// backoff, reset first if the attempt had a response.
    Ended {
        /// Whether the server answered on this attempt.
        had_response: bool,
    },
    /// The server refused this form of attempt (delta ADS unimplemented)
    /// and the session switched to another: the next starts at once.
    Switched,
}

/// What differs between source kinds; the loop in [`run`] does the rest.
pub(crate) trait SourceDriver: Send {
    /// What one attempt holds open: a stream, polls in flight, a watcher.
    type Io: Send;
    /// What the attempt's IO woke the driver with.
    type Wake: Send;

    /// Whether anything is subscribed.
    fn has_subscriptions(&self) -> bool;
    /// Applies one command to the session.
    fn apply(&mut self, command: Command);
    /// Hands on what the session has to say: its requests to `io` (none
    /// between attempts), its events to the sink, its counters to the
    /// handle.
    fn flush(&mut self, io: Option<&mut Self::Io>);
    /// When the session's next timer fires.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Fires the session's timers due at `now`.
    fn handle_timeout(&mut self, now: Instant);
    /// How long an attempt with nothing subscribed stays open; `None`: it
    /// stays until it ends.
    fn idle_grace(&self) -> Option<Duration>;
    /// The span an attempt runs in.
    fn span(&self, attempt: u64) -> tracing::Span;

    /// Starts an attempt; `Err` when it failed at once (the session was
    /// told).
    fn open(&mut self) -> Result<Self::Io, AttemptEnd>;
    /// Whether what was handled since the last flush is already work enough
    /// that the flush's own cost (its writes, the sink's batch and the
    /// wake-ups behind them) is small beside it: a run of wakes already
    /// ready stops there ([`handle_ready`]). By default a run stops only at
    /// its bound.
    fn flush_due(&self) -> bool {
        false
    }
    /// The next thing the attempt's IO has. Must be cancel-safe: whatever
    /// is under way lives in `io`.
    fn next(io: &mut Self::Io) -> impl Future<Output = Self::Wake> + Send + '_;
    /// Feeds `wake` to the session; `Some` when the attempt is over (the
    /// session was told).
    fn handle(&mut self, io: &mut Self::Io, wake: Self::Wake) -> Option<AttemptEnd>;
    /// Whether the session asks for the attempt to end (a handshake or
    /// first-response deadline passed): the server's failure.
    fn poll_close(&mut self, io: &mut Self::Io) -> Option<AttemptEnd>;
    /// The client ends the attempt itself (`why`: idle, shut down).
    fn end_locally(&mut self, io: Self::Io, why: &str);
    /// Says that the next attempt starts after `delay`.
    fn backing_off(&self, delay: Duration, attempt: u64, had_response: bool);
}

/// How an attempt ended, as the loop sees it.
enum Outcome {
    Ended(AttemptEnd),
    Idle,
    Shutdown,
}

/// What woke the loop during an attempt.
enum Step<W> {
    Command(Option<Command>),
    Io(W),
    Timer,
    Idle,
}

/// Drives `kind` until shutdown: waits for interest, runs attempts, backs
/// off between them by `backoff`, seeded from the process's randomness.
pub(crate) async fn run<K: SourceDriver>(
    mut kind: K,
    mut commands: Commands,
    backoff: BackoffConfig,
) {
    let mut policy = ReconnectPolicy::new(backoff, random_u64());
    let mut attempt: u64 = 0;
    loop {
        if !kind.has_subscriptions() && !wait_between(&mut kind, &mut commands, None).await {
            return;
        }
        attempt += 1;
        let span = kind.span(attempt);
        policy.started(now());
        let had_response = match drive_attempt(&mut kind, &mut commands)
            .instrument(span)
            .await
        {
            Outcome::Shutdown => return,
            Outcome::Idle => {
                policy.closed_locally();
                continue;
            }
            Outcome::Ended(AttemptEnd::Switched) => continue,
            Outcome::Ended(AttemptEnd::Ended { had_response }) => had_response,
        };
        let at = policy.ended(now(), had_response);
        kind.backing_off(at.saturating_duration_since(now()), attempt, had_response);
        if !wait_between(&mut kind, &mut commands, Some(at)).await {
            return;
        }
    }
}

/// Applies `first` and every command queued behind it; `false` on
/// shutdown.
fn apply<K: SourceDriver>(kind: &mut K, commands: &mut Commands, first: Option<Command>) -> bool {
    commands.apply_queued(first, |command| kind.apply(command))
}

/// Between attempts: applies commands and fires the session's timers until
/// `deadline` (or, without one, until something is subscribed). `false` on
/// shutdown.
async fn wait_between<K: SourceDriver>(
    kind: &mut K,
    commands: &mut Commands,
    deadline: Option<Instant>,
) -> bool {
    loop {
        kind.flush(None);
        if deadline.is_none() && kind.has_subscriptions() {
            return true;
        }
        let timer = kind.poll_timeout();
        tokio::select! {
            cmd = commands.recv() => {
                if !apply(kind, commands, cmd) {
                    return false;
                }
            }
            () = sleep_until(timer) => kind.handle_timeout(now()),
            () = sleep_until(deadline) => return true,
        }
    }
}

/// How many of an attempt's wakes in a row are handled before the loop
/// flushes and looks at commands and timers again.
const READY_BURST: usize = 32;

/// Feeds `first`, then what the attempt's IO already holds behind it (up to
/// [`READY_BURST`] wakes in all, and until the kind says a flush is due),
/// to the session; `Some` when the attempt is over. Small responses that
/// arrived together are then flushed together: their ACKs written in one
/// go, their events handed to the sink as one batch, so that the cache and
/// the graph take one step for them, not one each. Large ones are flushed
/// one by one, as they come: gathering them would save little and hold
/// back the sink's work, which runs beside the reading of the next.
fn handle_ready<K: SourceDriver>(
    kind: &mut K,
    io: &mut K::Io,
    first: K::Wake,
) -> Option<AttemptEnd> {
    let mut wake = first;
    for _ in 1..READY_BURST {
        if let Some(end) = kind.handle(io, wake) {
            return Some(end);
        }
        if kind.flush_due() {
            return None;
        }
        // Polled once: a wake that is not ready yet is left for the loop's
        // next wait, which `next`'s cancel-safety keeps intact.
        wake = K::next(io).now_or_never()?;
    }
    kind.handle(io, wake)
}

/// Opens an attempt and drives it until it ends.
async fn drive_attempt<K: SourceDriver>(kind: &mut K, commands: &mut Commands) -> Outcome {
    let mut io = match kind.open() {
        Ok(io) => io,
        Err(end) => return Outcome::Ended(end),
    };
    let mut idle = IdleTimer::default();
    loop {
        if let Some(end) = kind.poll_close(&mut io) {
            return Outcome::Ended(end);
        }
        kind.flush(Some(&mut io));
        let subscribed = kind.has_subscriptions();
        let idle_at = kind
            .idle_grace()
            .and_then(|grace| idle.deadline(subscribed, grace));
        let timer = kind.poll_timeout();
        let step = tokio::select! {
            cmd = commands.recv() => Step::Command(cmd),
            wake = K::next(&mut io) => Step::Io(wake),
            () = sleep_until(timer) => Step::Timer,
            () = sleep_until(idle_at) => Step::Idle,
        };
        match step {
            Step::Command(cmd) => {
                if !apply(kind, commands, cmd) {
                    kind.end_locally(io, "shut down");
                    return Outcome::Shutdown;
                }
            }
            Step::Io(wake) => {
                if let Some(end) = handle_ready(kind, &mut io, wake) {
                    return Outcome::Ended(end);
                }
            }
            Step::Timer => kind.handle_timeout(now()),
            Step::Idle => {
                kind.end_locally(io, "idle");
                return Outcome::Idle;
            }
        }
    }
}

#[cfg(test)]
mod burst_tests;
#[cfg(test)]
mod tests;
