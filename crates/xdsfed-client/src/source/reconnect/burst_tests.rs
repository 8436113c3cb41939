//! A run of wakes the attempt's IO already holds is handled before the
//! loop flushes, up to its bound, and none is lost at the bound or at an
//! end.

use std::collections::VecDeque;
use std::task::Poll;
use std::time::{Duration, Instant};

use super::{AttemptEnd, READY_BURST, SourceDriver, handle_ready};
use crate::source::handle::Command;

/// A wake the scripted IO holds: a response, or the stream's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    Response(usize),
    End,
}

/// IO whose wakes are all ready at once, as responses a connection read in
/// one go are.
#[derive(Default)]
struct Ready(VecDeque<Wake>);

/// Records what it was fed; with `due_after`, says a flush is due once
/// that many wakes were handled.
#[derive(Default)]
struct Recording {
    handled: Vec<Wake>,
    due_after: Option<usize>,
}

impl SourceDriver for Recording {
    type Io = Ready;
    type Wake = Wake;

    fn has_subscriptions(&self) -> bool {
        true
    }
    fn apply(&mut self, _command: Command) {}
    fn flush(&mut self, _io: Option<&mut Ready>) {}
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _now: Instant) {}
    fn flush_due(&self) -> bool {
        self.due_after.is_some_and(|n| self.handled.len() >= n)
    }
    fn idle_grace(&self) -> Option<Duration> {
        None
    }
    fn span(&self, _attempt: u64) -> tracing::Span {
        tracing::Span::none()
    }
    fn open(&mut self) -> Result<Ready, AttemptEnd> {
        Ok(Ready::default())
    }
    fn next(io: &mut Ready) -> impl Future<Output = Wake> + Send + '_ {
        std::future::poll_fn(move |_| io.0.pop_front().map_or(Poll::Pending, Poll::Ready))
    }
    fn handle(&mut self, _io: &mut Ready, wake: Wake) -> Option<AttemptEnd> {
        self.handled.push(wake);
        (wake == Wake::End).then_some(AttemptEnd::Ended { had_response: true })
    }
    fn poll_close(&mut self, _io: &mut Ready) -> Option<AttemptEnd> {
        None
    }
    fn end_locally(&mut self, _io: Ready, _why: &str) {}
    fn backing_off(&self, _delay: Duration, _attempt: u64, _had_response: bool) {}
}

fn responses(range: std::ops::Range<usize>) -> Vec<Wake> {
    range.map(Wake::Response).collect()
}

#[test]
fn the_wakes_already_ready_are_handled_before_the_flush() {
    let mut kind = Recording::default();
    let mut io = Ready(responses(1..6).into());
    let end = handle_ready(&mut kind, &mut io, Wake::Response(0));
    assert_eq!(end, None);
    assert_eq!(kind.handled, responses(0..6));
    assert!(io.0.is_empty());
}

#[test]
fn a_burst_stops_at_its_bound_and_leaves_the_rest_to_the_next_wait() {
    let mut kind = Recording::default();
    let mut io = Ready(responses(1..READY_BURST + 9).into());
    assert_eq!(handle_ready(&mut kind, &mut io, Wake::Response(0)), None);
    assert_eq!(kind.handled, responses(0..READY_BURST));
    let left: Vec<Wake> = io.0.into_iter().collect();
    assert_eq!(left, responses(READY_BURST..READY_BURST + 9));
}

#[test]
fn a_burst_stops_where_the_kind_says_a_flush_is_due() {
    let mut kind = Recording {
        due_after: Some(3),
        ..Recording::default()
    };
    let mut io = Ready(responses(1..6).into());
    assert_eq!(handle_ready(&mut kind, &mut io, Wake::Response(0)), None);
    assert_eq!(kind.handled, responses(0..3));
    let left: Vec<Wake> = io.0.into_iter().collect();
    assert_eq!(left, responses(3..6));
}

#[test]
fn a_burst_ends_with_the_attempt_and_takes_nothing_after_it() {
    let mut kind = Recording::default();
    let mut io = Ready(vec![Wake::Response(1), Wake::End, Wake::Response(2)].into());
    let end = handle_ready(&mut kind, &mut io, Wake::Response(0));
    assert_eq!(end, Some(AttemptEnd::Ended { had_response: true }));
    assert_eq!(
        kind.handled,
        vec![Wake::Response(0), Wake::Response(1), Wake::End]
    );
    assert_eq!(io.0, VecDeque::from([Wake::Response(2)]));
}
