//! Where an entry keeps its state: bare, or in a channel once a single
//! watcher needs one.
//!
//! A `tokio::sync::watch` channel costs about 650 bytes and a wake-up per
//! change. Entries read through queues (watch sets, wildcard and collection
//! watchers) never need one, and a graph of a hundred thousand clusters has
//! two hundred thousand such entries. So the channel is made when the first
//! [`Watch`](crate::watch::Watch) subscribes, and given up again when no
//! receiver is left.

use tokio::sync::watch;

use super::ResourceState;

/// An entry's state.
#[derive(Debug)]
pub(super) enum Slot {
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
    pub(super) fn new() -> Self {
        Self::bare(ResourceState::requested())
    }

    /// A slot holding `state`.
    pub(super) fn bare(state: ResourceState) -> Self {
        Slot::Bare(Box::new(state))
    }

    /// Runs `f` on the state.
    pub(super) fn with<R>(&self, f: impl FnOnce(&ResourceState) -> R) -> R {
        match self {
            Slot::Bare(state) => f(state),
            Slot::Watched(tx) => f(&tx.borrow()),
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
            Slot::Bare(state) => f(state),
            Slot::Watched(tx) => tx.send_if_modified(f),
        }
    }

    /// Replaces the state, waking its receivers.
    pub(super) fn replace(&mut self, state: ResourceState) {
        match self {
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
            Slot::Bare(state) => {
                let state = std::mem::replace(&mut **state, ResourceState::requested());
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
            *self = Slot::Bare(Box::new(state));
        }
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
        assert!(matches!(slot, Slot::Bare(_)));
        assert_eq!(slot.get().status, ResourceStatus::DoesNotExist);
    }
}
