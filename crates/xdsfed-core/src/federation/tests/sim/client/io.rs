//! Moving the simulated world on: streams, requests, responses, timers, and
//! the federation core's actions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Action, CoreEvent, Peer, Request, SERVERS, StreamEnd, World};

/// Rounds of pumping after which a quiet world is declared livelocked.
const MAX_ROUNDS: usize = 10_000;

impl World {
    /// Lets `d` of virtual time pass, firing what falls due on the way.
    pub(crate) fn advance(&mut self, d: Duration) {
        let until = self.now + d;
        loop {
            self.pump();
            match self.next_due().filter(|at| *at <= until) {
                Some(at) => self.now = self.now.max(at),
                None => break,
            }
        }
        self.now = until;
        self.pump();
    }

    /// The earliest moment something is due.
    fn next_due(&self) -> Option<Instant> {
        let mut due: Vec<Instant> = Vec::new();
        for peer in self.peers.values() {
            due.extend(peer.session.poll_timeout());
            due.extend(peer.reconnect_at);
            due.extend(peer.down.front().map(|(at, _)| *at));
            let server = &peer.server;
            for t in [
                server.refusing_until,
                server.silent_until,
                server.delayed_until,
            ] {
                due.extend(t.filter(|t| *t > self.now));
            }
        }
        // Whatever is due now, the pump has done.
        due.into_iter().filter(|at| *at > self.now).min()
    }

    /// Does everything that can be done at `now`, until nothing moves.
    fn pump(&mut self) {
        for _ in 0..MAX_ROUNDS {
            let mut moved = false;
            for label in SERVERS {
                moved |= self.pump_peer(label);
            }
            if !moved {
                return;
            }
        }
        panic!("livelock: the world is still busy after {MAX_ROUNDS} rounds");
    }

    fn pump_peer(&mut self, label: &'static str) -> bool {
        let now = self.now;
        let mut moved = false;
        let peer = self.peer(label);
        peer.session.handle_timeout(now);
        if let Some(end) = peer.session.poll_close() {
            moved = true;
            self.end_stream(label, end);
        }
        moved |= self.connect_if_due(label);
        moved |= self.close_if_idle(label);
        moved |= self.transmit(label);
        moved |= self.receive(label);
        moved |= self.collect_events(label);
        moved
    }

    fn connect_if_due(&mut self, label: &'static str) -> bool {
        let now = self.now;
        let peer = self.peer(label);
        let due = peer.reconnect_at.is_none_or(|t| t <= now);
        if peer.open || !due || !peer.session.has_subscriptions() {
            return false;
        }
        peer.reconnect_at = None;
        peer.session.handle_connected(now);
        if peer.server.refusing_until.is_some_and(|t| now < t) {
            self.end_stream(label, StreamEnd::new(14, "connection refused"));
            return true;
        }
        let peer = self.peer(label);
        peer.open = true;
        peer.server.open_stream(now);
        if !peer.server.dead {
            peer.session.handle_connection_ready(now);
        }
        self.log(|| format!("{label}: stream opened"));
        true
    }

    fn close_if_idle(&mut self, label: &'static str) -> bool {
        let peer = self.peer(label);
        if !peer.open || peer.session.has_subscriptions() {
            return false;
        }
        self.end_stream(label, StreamEnd::local("idle"));
        true
    }

    /// The client writes; the server reads and answers (unless silent).
    fn transmit(&mut self, label: &'static str) -> bool {
        let now = self.now;
        let second = (now - self.t0).as_secs();
        let trace = self.trace;
        let peer = self.peer(label);
        let mut moved = false;
        while let Some(request) = peer.session.poll_transmit(now) {
            moved = true;
            let Request::Delta(request) = request else {
                panic!("the simulation speaks delta only");
            };
            if !peer.open || peer.server.dead {
                continue;
            }
            if trace {
                eprintln!(
                    "          {label} <- sub {:?} unsub {:?} initial {:?} nonce {:?}",
                    request.resource_names_subscribe,
                    request.resource_names_unsubscribe,
                    request.initial_resource_versions,
                    request.response_nonce
                );
            }
            for response in peer.server.handle(&request, second) {
                if trace {
                    eprintln!(
                        "          {label} -> {} resources, removed {:?}",
                        response.resources.len(),
                        response.removed_resources
                    );
                }
                let at = peer.server.delayed_until.unwrap_or(now).max(now);
                peer.down.push_back((at, response));
            }
            let asked = peer
                .server
                .requests_per_second
                .get(&second)
                .copied()
                .unwrap_or(0);
            assert!(
                asked <= super::MAX_REQUESTS_PER_SECOND,
                "{label} was asked {asked} times in one virtual second"
            );
        }
        moved
    }

    /// Responses due reach the client.
    fn receive(&mut self, label: &'static str) -> bool {
        let now = self.now;
        let peer = self.peer(label);
        let mut moved = false;
        while peer.down.front().is_some_and(|(at, _)| *at <= now) {
            let Some((_, response)) = peer.down.pop_front() else {
                break;
            };
            if !peer.open {
                continue;
            }
            moved = true;
            peer.failures = 0;
            peer.session.handle_delta_response(now, response);
        }
        moved
    }

    fn collect_events(&mut self, label: &'static str) -> bool {
        let peer = self.peer(label);
        let events: Vec<_> = std::iter::from_fn(|| peer.session.poll_event()).collect();
        if events.is_empty() {
            return false;
        }
        let server = peer.id;
        if self.trace {
            for event in &events {
                self.log(|| format!("{label} -> {}", summary(event)));
            }
        }
        let reachable = events.iter().rev().find_map(|event| match event {
            CoreEvent::StreamFailed { .. } => Some(false),
            CoreEvent::StreamHealthy => Some(true),
            _ => None,
        });
        let answers = super::checks::Answers(&self.entries);
        self.fed.handle_events(server, events, &answers);
        self.drain();
        if let Some(reachable) = reachable {
            self.check_primary_reachability(label, reachable);
        }
        true
    }

    /// The stream to `label` ends; the client reconnects after a backoff.
    fn end_stream(&mut self, label: &'static str, end: StreamEnd) {
        let now = self.now;
        self.log(|| format!("{label}: stream ends ({})", end.message));
        let peer = self.peer(label);
        peer.open = false;
        peer.server.close_stream();
        peer.down.clear();
        peer.session.handle_stream_end(now, end);
        peer.failures += 1;
        let backoff = Duration::from_secs(1 << peer.failures.min(5)).min(Duration::from_secs(30));
        peer.reconnect_at = Some(now + backoff);
    }

    /// The stream to `label` breaks from the server's side.
    pub(crate) fn lose_stream(&mut self, label: &'static str, why: &str) {
        if self.peer(label).open {
            self.end_stream(label, StreamEnd::new(14, why));
        }
    }

    /// Applies the federation core's actions.
    pub(crate) fn drain(&mut self) {
        while let Some(action) = self.fed.poll_action() {
            self.apply(action);
        }
        self.check_lists();
    }

    fn apply(&mut self, action: Action) {
        match action {
            Action::Subscribe { server, key } => {
                self.peer_of(server).session.subscribe(key);
            }
            Action::Unsubscribe { server, key } => {
                self.peer_of(server).session.unsubscribe(&key);
            }
            Action::ForgetVersion { server, key } => {
                self.peer_of(server).session.forget_version(&key);
            }
            Action::Close { server } => {
                let label = self.label_of(server);
                self.log(|| format!("{label}: closed by the client (switch-back)"));
                let peer = self.peer(label);
                assert!(
                    !peer.session.has_subscriptions(),
                    "closing a server still in use"
                );
                if peer.open {
                    self.end_stream(label, StreamEnd::local("switched back"));
                }
                // A closed connection is dropped; the next one starts afresh.
                let peer = self.peer(label);
                peer.session = crate::protocol::Session::new(
                    peer.session.config().clone(),
                    Arc::clone(&peer.types),
                );
                peer.reconnect_at = None;
                peer.failures = 0;
            }
            other => self.apply_to_model(other),
        }
    }

    fn label_of(&self, server: crate::authority::ServerId) -> &'static str {
        SERVERS
            .into_iter()
            .find(|l| self.peers[*l].id == server)
            .expect("a known server")
    }

    fn peer_of(&mut self, server: crate::authority::ServerId) -> &mut Peer {
        let label = self.label_of(server);
        self.peer(label)
    }
}

fn summary(event: &crate::protocol::CoreEvent) -> String {
    use crate::protocol::CoreEvent;
    match event {
        CoreEvent::Upsert { key, version, .. } => format!("upsert {} v{version}", key.name),
        CoreEvent::Invalid { key, error, .. } => format!("invalid {}: {error}", key.name),
        CoreEvent::Removed { key, .. } => format!("removed {}", key.name),
        CoreEvent::DoesNotExist { key } => format!("does not exist {}", key.name),
        CoreEvent::Redirect { key, target, .. } => format!("redirect {} -> {target}", key.name),
        CoreEvent::StreamFailed { failure } => format!("stream failed: {failure}"),
        CoreEvent::StreamHealthy => "healthy".to_owned(),
        other => format!("{other:?}"),
    }
}
