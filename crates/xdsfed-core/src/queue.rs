//! Output queues that give back the room a burst took.
//!
//! A state machine's output queue (the session's events, the federation
//! core's actions, the graph's watch changes) fills with one entry per
//! resource when a response carries a hundred thousand of them, and a
//! `VecDeque` keeps its largest capacity for good: after a cold start that
//! was some 350 bytes per cluster held for nothing. [`pop_front`] hands
//! the room back once the queue is drained, keeping a little for the
//! usual trickle.

use std::collections::VecDeque;

/// The room a drained queue keeps.
pub const KEPT_ROOM: usize = 64;

/// The front of `queue`; once that empties it, room beyond [`KEPT_ROOM`]
/// is given back.
///
/// ```
/// use std::collections::VecDeque;
/// use xdsfed_core::queue::{KEPT_ROOM, pop_front};
///
/// let mut queue: VecDeque<u32> = (0..10_000).collect();
/// while pop_front(&mut queue).is_some() {}
/// assert!(queue.capacity() <= KEPT_ROOM);
/// ```
pub fn pop_front<T>(queue: &mut VecDeque<T>) -> Option<T> {
    let front = queue.pop_front();
    if queue.is_empty() && queue.capacity() > KEPT_ROOM {
        queue.shrink_to(KEPT_ROOM);
    }
    front
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rule: a drained queue keeps at most `KEPT_ROOM`; one still holding
    /// entries keeps its room (no reallocation per pop).
    #[test]
    fn a_drained_queue_gives_its_room_back() {
        let mut queue: VecDeque<u64> = (0..1_000).collect();
        let grown = queue.capacity();
        assert_eq!(pop_front(&mut queue), Some(0));
        assert_eq!(queue.capacity(), grown);
        while pop_front(&mut queue).is_some() {}
        assert!(queue.capacity() <= KEPT_ROOM);
        queue.push_back(7);
        assert_eq!(pop_front(&mut queue), Some(7));
    }
}
