//! Readers that join a fetch late: the server will not send its answer
//! again, so the core keeps each fetch's last answer and replays it.

use super::route::From;
use super::state::{Answer, Recorded};
use super::{Answers, Federation};
use std::sync::Arc;

use crate::protocol::{CoreEvent, ResourceKey};

impl Federation {
    /// Records what `key`'s server answered, for readers to come.
    pub(super) fn record(&mut self, key: &ResourceKey, event: &CoreEvent, from: &From<'_>) {
        let Some(fetch) = self.fetches.get_mut(key) else {
            return;
        };
        let answer = || Answer {
            event: Recorded::of(event),
            server: std::sync::Arc::clone(from.server),
            fallback: from.fallback,
        };
        match event {
            CoreEvent::Invalid { .. } => keep(&mut fetch.nack, answer()),
            CoreEvent::Upsert { .. }
            | CoreEvent::Removed { .. }
            | CoreEvent::DoesNotExist { .. }
            | CoreEvent::Redirect { .. }
            | CoreEvent::ResourceError { .. } => {
                keep(&mut fetch.answer, answer());
                fetch.nack = None;
            }
            _ => {}
        }
    }

    /// Routes the recorded answer of each fetch a reader joined late, as if
    /// its server had just sent it; a redirect replayed to a new chain
    /// extends that chain, whose hops replay in turn.
    pub(super) fn replay(&mut self, answers: &dyn Answers) {
        while let Some((reader, key)) = self.replays.pop_front() {
            let Some(fetch) = self.fetches.get(&key) else {
                continue;
            };
            if !fetch.readers.contains(&key, &reader) {
                continue;
            }
            let recorded: Vec<(CoreEvent, Arc<str>, bool)> = fetch
                .answer
                .iter()
                .chain(fetch.nack.iter())
                .map(|a| (a.event.event(&key), Arc::clone(&a.server), a.fallback))
                .collect();
            for (event, server, fallback) in recorded {
                let from = From {
                    server: &server,
                    fallback,
                };
                self.route_to_reader(&reader, &key, &event, &from, answers);
            }
        }
    }
}

/// Puts `answer` in `slot`, in the room of the one it replaces if there is
/// one: a fetch's answer changes with every update, and a box each time
/// would be an allocation each time.
fn keep(slot: &mut Option<Box<Answer>>, answer: Answer) {
    match slot {
        Some(held) => **held = answer,
        None => *slot = Some(Box::new(answer)),
    }
}
