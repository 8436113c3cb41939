//! Where an entry keeps its state: bare, or in a channel once a single
//! watcher needs one.
//!
//! Rule: a bare state that is nothing but a status and when it was set
//! (no copy, version, error, failed update or source: requested and
//! nothing heard, a glob answered by its members, a resource that does
//! not exist) is held without an allocation, in the slot itself, and
//! reads as exactly that state (test `a_copyless_state_is_held_without_a_box`).
//! A graph following LEDS keeps an entry per glob collection in such a
//! state for good (its members answer it, never the glob itself): a box
//! of 128 bytes a collection otherwise.
//!
//! A `tokio::sync::watch` channel costs about 650 bytes and a wake-up per
//! change. Entries read through queues (watch sets, wildcard and collection
//! watchers) never need one, and a graph of a hundred thousand clusters has
//! two hundred thousand such entries. So the channel is made when the first
//! [`Watch`](crate::watch::Watch) subscribes, and given up again when no
//! receiver is left.

use tokio::sync::watch;

use std::time::{Duration, SystemTime};

use super::{ResourceState, ResourceStatus};

/// An entry's state.
#[derive(Debug)]
pub(super) enum Slot {
    /// Bare, and nothing but `status`, set at `at` (nanoseconds since the
    /// Unix epoch; [`Slot::NEVER`] for a state with no time).
    Copyless { status: ResourceStatus, at: u64 },
    /// Read only through the cache (queues, status dumps). Boxed, though
    /// the entry is boxed already: inline, its 176 bytes would be room that
    /// every entry holding a channel leaves empty (the bench's ingest of a
    /// million single watches went from 11.0–12.1× the cost of a hundred
    /// thousand to 12.3–12.7× when it was tried).
    Bare(Box<ResourceState>),
    /// Also read by single watchers, through their receivers.
    Watched(watch::Sender<ResourceState>),
}

impl Slot {
    /// The time of a copyless state that has none.
    const NEVER: u64 = u64::MAX;

    pub(super) fn new() -> Self {
        Slot::Copyless {
            status: ResourceStatus::Requested,
            at: Self::NEVER,
        }
    }

    /// A slot holding `state`.
    pub(super) fn bare(state: ResourceState) -> Self {
        match copyless(&state) {
            Some((status, at)) => Slot::Copyless { status, at },
            None => Slot::Bare(Box::new(state)),
        }
    }

    /// Runs `f` on the state.
    pub(super) fn with<R>(&self, f: impl FnOnce(&ResourceState) -> R) -> R {
        match self {
            Slot::Copyless { status, at } => f(&copyless_state(*status, *at)),
            Slot::Bare(state) => f(state),
            Slot::Watched(tx) => f(&tx.borrow()),
        }
    }

    /// The state's status, read without building a state.
    pub(super) fn status(&self) -> ResourceStatus {
        match self {
            Slot::Copyless { status, .. } => *status,
            Slot::Bare(state) => state.status,
            Slot::Watched(tx) => tx.borrow().status,
        }
    }

    /// A copy of the state.
    pub(super) fn get(&self) -> ResourceState {
        self.with(ResourceState::clone)
    }

    /// Runs `f` on the state; its receivers are woken if `f` says the state
    /// changed. Returns what `f` said.
    pub(super) fn modify(&mut self, f: impl FnOnce(&mut ResourceState) -> bool) -> bool {
        match self {
            Slot::Copyless { status, at } => {
                let mut state = copyless_state(*status, *at);
                let changed = f(&mut state);
                *self = Slot::bare(state);
                changed
            }
            Slot::Bare(state) => f(state),
            Slot::Watched(tx) => tx.send_if_modified(f),
        }
    }

    /// Replaces the state, waking its receivers.
    pub(super) fn replace(&mut self, state: ResourceState) {
        match self {
            Slot::Copyless { .. } => *self = Slot::bare(state),
            Slot::Bare(old) => **old = state,
            Slot::Watched(tx) => {
                tx.send_replace(state);
            }
        }
    }

    /// A receiver of the state's changes, making the channel if there is
    /// none yet.
    pub(super) fn subscribe(&mut self) -> watch::Receiver<ResourceState> {
        match self {
            Slot::Watched(tx) => tx.subscribe(),
            Slot::Copyless { .. } | Slot::Bare(_) => {
                let state = match std::mem::replace(self, Slot::new()) {
                    Slot::Bare(state) => *state,
                    Slot::Copyless { status, at } => copyless_state(status, at),
                    Slot::Watched(tx) => tx.borrow().clone(),
                };
                let tx = watch::Sender::new(state);
                let rx = tx.subscribe();
                *self = Slot::Watched(tx);
                rx
            }
        }
    }

    /// Gives the channel up when no receiver is left.
    pub(super) fn shed_unused_channel(&mut self) {
        if let Slot::Watched(tx) = self
            && tx.receiver_count() == 0
        {
            let state = tx.borrow().clone();
            *self = Slot::bare(state);
        }
    }
}

/// `state`'s status and time (as [`Slot::Copyless`] holds it), when it has
/// nothing else.
fn copyless(state: &ResourceState) -> Option<(ResourceStatus, u64)> {
    let ResourceState {
        resource,
        version,
        status,
        error,
        last_updated,
        failed_update,
        source,
    } = state;
    let bare = resource.is_none()
        && version.is_none()
        && error.is_none()
        && failed_update.is_none()
        && source.is_none();
    if !bare {
        return None;
    }
    let at = match last_updated {
        None => Slot::NEVER,
        Some(at) => {
            let since = at.duration_since(SystemTime::UNIX_EPOCH).ok()?;
            u64::try_from(since.as_nanos())
                .ok()
                .filter(|&at| at != Slot::NEVER)?
        }
    };
    Some((*status, at))
}

/// The state a [`Slot::Copyless`] stands for.
fn copyless_state(status: ResourceStatus, at: u64) -> ResourceState {
    ResourceState {
        status,
        last_updated: (at != Slot::NEVER)
            .then(|| SystemTime::UNIX_EPOCH + Duration::from_nanos(at)),
        ..ResourceState::requested()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::ResourceStatus;

    fn does_not_exist(state: &mut ResourceState) -> bool {
        state.status = ResourceStatus::DoesNotExist;
        true
    }

    /// A state changed while bare is what the first receiver sees, and a
    /// receiver is woken by later changes.
    #[test]
    fn the_first_receiver_sees_the_bare_state_and_later_changes() {
        let mut slot = Slot::new();
        assert!(slot.modify(does_not_exist));
        let mut rx = slot.subscribe();
        assert_eq!(rx.borrow().status, ResourceStatus::DoesNotExist);
        assert!(!rx.has_changed().unwrap_or(false));

        slot.replace(ResourceState::requested());
        assert!(rx.has_changed().unwrap_or(false));
        assert_eq!(rx.borrow_and_update().status, ResourceStatus::Requested);
    }

    /// Holding a status and a time in place makes the slot no larger
    /// than its pointers made it.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_slot_is_16_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 16);
    }

    /// Rule of the module: a state of a status and a time is held without
    /// a box, and reads, changes and subscribes as a boxed one would; a
    /// state that has nothing else again goes back to no box.
    #[test]
    fn a_copyless_state_is_held_without_a_box() {
        let copyless = |slot: &Slot| matches!(slot, Slot::Copyless { .. });
        let requested = Some((ResourceStatus::Requested, Slot::NEVER));
        let mut slot = Slot::new();
        assert!(copyless(&slot));
        assert_eq!(super::copyless(&slot.get()), requested);
        assert!(!slot.modify(|_| false));
        assert!(copyless(&slot), "nothing changed");

        let answered_at = SystemTime::now();
        assert!(slot.modify(|state| {
            state.status = ResourceStatus::Acked;
            state.last_updated = Some(answered_at);
            true
        }));
        assert!(copyless(&slot), "a status and a time");
        let answered = slot.get();
        assert_eq!(answered.status, ResourceStatus::Acked);
        assert_eq!(
            answered.last_updated,
            Some(answered_at),
            "to the nanosecond"
        );

        assert!(slot.modify(|state| {
            state.error = Some(xdsfed_core::error::XdsError::new(
                xdsfed_core::error::ErrorKind::Transient,
                "down",
            ));
            true
        }));
        assert!(matches!(slot, Slot::Bare(_)), "an error is boxed");
        slot.replace(ResourceState::requested());
        assert_eq!(super::copyless(&slot.get()), requested);

        let answered = super::copyless(&answered);
        let (status, at) = answered.expect("copyless");
        let mut slot = Slot::bare(super::copyless_state(status, at));
        assert!(copyless(&slot));
        let rx = slot.subscribe();
        assert_eq!(super::copyless(&rx.borrow()), answered);
        drop(rx);
        slot.shed_unused_channel();
        assert!(copyless(&slot));
        assert_eq!(super::copyless(&slot.get()), answered);
    }

    /// The channel goes with its last receiver, and the state stays.
    #[test]
    fn the_channel_is_given_up_with_its_last_receiver_and_the_state_kept() {
        let mut slot = Slot::new();
        let rx = slot.subscribe();
        slot.shed_unused_channel();
        assert!(matches!(slot, Slot::Watched(_)), "a receiver is left");

        assert!(slot.modify(does_not_exist));
        drop(rx);
        slot.shed_unused_channel();
        assert!(!matches!(slot, Slot::Watched(_)));
        assert_eq!(slot.get().status, ResourceStatus::DoesNotExist);
    }
}
