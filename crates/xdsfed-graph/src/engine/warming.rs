//! The warming timers of cold nodes, cancelled by forgetting them.
//!
//! A cold start arms a timer for every node it creates, hundreds of
//! thousands in one batch, and nearly every one is ended early by the
//! resource arriving. A table that finds a timer by its key to cancel it
//! costs a hash of the node's name at arming and again at cancelling, on
//! the graph's own task, which is the cold start's longest chain of work.
//!
//! Rule: a timer is never looked up. Arming pushes `(deadline, key)` on a
//! heap ordered by deadline (and then by arming order); ending a wait
//! does nothing here. When a deadline comes, the engine fires it only if
//! the node is still cold *with that deadline* (the node's state carries
//! it); otherwise the entry is stale and dropped. A node that went cold
//! again later has a later deadline, so its old entry cannot fire it early.
//!
//! Rule: stale entries do not pile up for a whole warming timeout (which
//! can be long: minutes). When no node is cold every entry is stale, and
//! the heap is dropped with its room; otherwise, once the entries
//! outnumber twice the cold nodes plus [`WarmingTimers::SLACK`], the stale
//! ones are swept out in one pass, which the waits ended since pay for
//! (tests `warming::tests`, `engine::tests::warming`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use crate::edges::Key;

/// Armed warming deadlines, earliest first. See the [module docs](self).
#[derive(Debug, Default)]
pub(super) struct WarmingTimers {
    heap: BinaryHeap<Reverse<Armed>>,
    /// How many timers were ever armed: keeps equal deadlines in the order
    /// they were armed.
    armed: u64,
}

#[derive(Debug)]
struct Armed {
    deadline: Instant,
    order: u64,
    key: Key,
}

impl PartialEq for Armed {
    fn eq(&self, other: &Self) -> bool {
        (self.deadline, self.order) == (other.deadline, other.order)
    }
}

impl Eq for Armed {}

impl PartialOrd for Armed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Armed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.deadline, self.order).cmp(&(other.deadline, other.order))
    }
}

impl WarmingTimers {
    /// Stale entries tolerated beyond twice the live ones before a sweep.
    pub(super) const SLACK: usize = 1024;

    /// Arms a timer for `key` at `deadline`.
    pub(super) fn arm(&mut self, key: Key, deadline: Instant) {
        self.armed += 1;
        self.heap.push(Reverse(Armed {
            deadline,
            order: self.armed,
            key,
        }));
    }

    /// The earliest deadline armed, stale or not: waking for a stale one
    /// costs a look, never a wrong firing.
    pub(super) fn first(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(armed)| armed.deadline)
    }

    /// The earliest timer due at `now`, taken off the heap, with the
    /// deadline it was armed for.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<(Instant, Key)> {
        if self.first()? > now {
            return None;
        }
        let Reverse(armed) = self.heap.pop()?;
        if self.heap.is_empty() {
            // A cold start's worth of room, otherwise kept for good.
            self.heap = BinaryHeap::new();
        }
        Some((armed.deadline, armed.key))
    }

    /// Called when a wait has ended and `cold` waits are left: drops every
    /// entry when none is, and otherwise sweeps the entries `live` does
    /// not recognise once they are too many (see the module docs).
    pub(super) fn wait_ended(&mut self, cold: usize, live: impl Fn(Instant, &Key) -> bool) {
        if cold == 0 {
            self.heap = BinaryHeap::new();
        } else if self.heap.len() > 2 * cold + Self::SLACK {
            self.heap
                .retain(|Reverse(armed)| live(armed.deadline, &armed.key));
            self.heap.shrink_to_fit();
        }
    }

    /// How many timers are armed, stale ones included.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::ResourceKind;
    use std::sync::Arc;
    use std::time::Duration;

    fn key(name: &str) -> Key {
        Key {
            kind: ResourceKind::Cluster,
            name: Arc::from(name),
        }
    }

    #[test]
    fn due_timers_come_out_by_deadline_then_by_arming_order() {
        let t0 = Instant::now();
        let mut timers = WarmingTimers::default();
        timers.arm(key("late"), t0 + Duration::from_secs(2));
        timers.arm(key("b"), t0 + Duration::from_secs(1));
        timers.arm(key("a"), t0 + Duration::from_secs(1));
        assert_eq!(timers.first(), Some(t0 + Duration::from_secs(1)));
        assert_eq!(
            timers.pop_due(t0),
            None,
            "nothing is due before its deadline"
        );
        let at_one = t0 + Duration::from_secs(1);
        let names: Vec<_> = std::iter::from_fn(|| timers.pop_due(at_one))
            .map(|(deadline, k)| (deadline, k.name.to_string()))
            .collect();
        assert_eq!(
            names,
            [(at_one, "b".to_string()), (at_one, "a".to_string())]
        );
        assert_eq!(timers.len(), 1);
        let (deadline, late) = timers.pop_due(t0 + Duration::from_secs(5)).unwrap();
        assert_eq!(
            (deadline, &*late.name),
            (t0 + Duration::from_secs(2), "late")
        );
    }

    /// Ended waits leave entries behind only until they outnumber the
    /// live ones by the slack, and none once nothing waits.
    #[test]
    fn stale_entries_are_swept_once_they_outnumber_the_live_ones() {
        let t0 = Instant::now();
        let mut timers = WarmingTimers::default();
        let total = 3 * WarmingTimers::SLACK;
        for i in 0..total {
            timers.arm(key(&format!("c{i}")), t0);
        }
        let live =
            |cold: usize| move |_: Instant, k: &Key| k.name[1..].parse::<usize>().unwrap() < cold;
        // The first waits end one by one: no sweep while within the slack.
        let mut cold = total;
        while timers.len() <= 2 * (cold - 1) + WarmingTimers::SLACK {
            cold -= 1;
            timers.wait_ended(cold, live(cold));
        }
        assert_eq!(timers.len(), total, "nothing swept within the slack");
        cold -= 1;
        timers.wait_ended(cold, live(cold));
        assert_eq!(timers.len(), cold, "only the live entries are left");
        timers.wait_ended(0, live(0));
        assert_eq!((timers.len(), timers.heap.capacity()), (0, 0));
    }

    #[test]
    fn an_emptied_heap_gives_its_room_back() {
        let t0 = Instant::now();
        let mut timers = WarmingTimers::default();
        for i in 0..10_000 {
            timers.arm(key(&format!("c{i}")), t0);
        }
        while timers.pop_due(t0).is_some() {}
        assert_eq!(timers.heap.capacity(), 0);
    }
}
