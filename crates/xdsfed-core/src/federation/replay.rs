//! Readers that join a fetch late: the server will not send its answer
//! again, so the core keeps each fetch's last answer and replays it.

use super::route::From;
use super::state::Answer;
use super::{Answers, Federation};
use crate::protocol::{CoreEvent, ResourceKey};

impl Federation {
    /// Records what `key`'s server answered, for readers to come.
    pub(super) fn record(&mut self, key: &ResourceKey, event: &CoreEvent, from: &From<'_>) {
        let Some(fetch) = self.fetches.get_mut(key) else {
            return;
        };
        let answer = || Answer {
            event: event.clone(),
            server: std::sync::Arc::clone(from.server),
            fallback: from.fallback,
        };
        match event {
            CoreEvent::Invalid { .. } => fetch.nack = Some(answer()),
            CoreEvent::Upsert { .. }
            | CoreEvent::Removed { .. }
            | CoreEvent::DoesNotExist { .. }
            | CoreEvent::Redirect { .. }
            | CoreEvent::ResourceError { .. } => {
                fetch.answer = Some(answer());
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
            if !fetch.readers.contains(&reader) {
                continue;
            }
            let recorded: Vec<Answer> = fetch
                .answer
                .iter()
                .chain(fetch.nack.iter())
                .cloned()
                .collect();
            for answer in recorded {
                let from = From {
                    server: &answer.server,
                    fallback: answer.fallback,
                };
                self.route_to_reader(&reader, &key, &answer.event, &from, answers);
            }
        }
    }
}
