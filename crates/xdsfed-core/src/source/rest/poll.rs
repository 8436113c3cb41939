//! When each type's next REST-JSON poll leaves: the sans-IO schedule
//! between the protocol session and the HTTP client.
//!
//! ```text
//!  handle_request(req, cause) ──►┐                 ┌─► poll_request ─► POST /v3/discovery:{type}
//!  handle_answer(type)        ──►│ PollSchedule    │
//!  clear()                    ──►┘                 └─► poll_timeout ─► the driver's sleep
//! ```
//!
//! The session says *what* to ask (each type's latest SotW request: its
//! names, the version and nonce of its ACK or NACK); this says *when*. Its
//! rules ("REST-JSON polling" in docs/rules.md):
//!
//! 1. **One outstanding request per type** (xds-protocol-v3, "REST-JSON
//!    polling subscriptions": "a single outstanding request at any point in
//!    time"). A type's next poll waits for its answer.
//! 2. **A poll repeats the type's latest request**, `refresh_delay` after
//!    the last answer. The ACK or NACK an answer earns is not sent at once:
//!    it rides on that next poll, so a server answering at once is polled
//!    once per `refresh_delay`, never in a loop.
//! 3. **A change of interest leaves at once**: a request the session made
//!    because the subscriptions changed is due now, or, while a poll of its
//!    type is outstanding, as soon as that poll is answered.
//! 4. **Every poll carries the node**: there is no stream for a first
//!    request to identify the client on, so each request names it.
//! 5. **A type with no names left is not polled**: an empty SotW list would
//!    ask for nothing (or, on a first request, mean `*`).
//! 6. **A failure clears the schedule**: the next attempt starts afresh with
//!    what the session writes for a new stream (every type, due at once).
//! 7. **New names are asked afresh**: a poll whose names differ from those
//!    of the type's last answered poll carries an empty `version_info`,
//!    whatever version the session holds. Over REST the version is all a
//!    server can compare, and a server that versions the whole type (one
//!    version for everything its templates render: sovereign) answers a
//!    poll at the version held `304 Not Modified`, though the new name was
//!    never sent: it would wait for the next change of the whole type. An
//!    empty version asks for the state of the world; the answer carries
//!    its version, which the next polls hold again. The names answered
//!    last outlive a failure (the version does too), and are forgotten
//!    with the type.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;

/// Why the session wrote a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The subscriptions changed, or a new attempt started: due at once.
    Interest,
    /// An answer was ACKed or NACKed: due with the next poll.
    Answer,
}

/// One type's polling state.
#[derive(Debug)]
struct TypePoll {
    /// The request every poll of this type sends, until the session writes
    /// a newer one.
    latest: DiscoveryRequest,
    /// When the next poll is due; `None` while one is outstanding.
    due: Option<Instant>,
    /// A poll is on the wire.
    outstanding: bool,
    /// A change of interest is waiting for the outstanding poll's answer.
    urgent: bool,
    /// The names of the poll on the wire.
    in_flight: Vec<String>,
}

/// The polling schedule of one REST-JSON source.
#[derive(Debug)]
pub struct PollSchedule {
    refresh_delay: Duration,
    node: Node,
    types: BTreeMap<String, TypePoll>,
    /// Per type, the names of its last answered poll (rule 7).
    answered_names: BTreeMap<String, Vec<String>>,
}

impl PollSchedule {
    /// An empty schedule polling every `refresh_delay`, each request
    /// carrying `node`.
    pub fn new(refresh_delay: Duration, node: Node) -> Self {
        PollSchedule {
            refresh_delay,
            node,
            types: BTreeMap::new(),
            answered_names: BTreeMap::new(),
        }
    }

    /// The session wrote `request` for `cause` (rules 2, 3 and 5).
    pub fn handle_request(&mut self, now: Instant, request: DiscoveryRequest, cause: Cause) {
        if request.resource_names.is_empty() {
            self.types.remove(&request.type_url);
            self.answered_names.remove(&request.type_url);
            return;
        }
        let mut request = request;
        request.node = Some(self.node.clone());
        let poll = self
            .types
            .entry(request.type_url.clone())
            .or_insert_with(|| TypePoll {
                latest: DiscoveryRequest::default(),
                due: Some(now),
                outstanding: false,
                urgent: false,
                in_flight: Vec::new(),
            });
        poll.latest = request;
        if cause == Cause::Interest {
            if poll.outstanding {
                poll.urgent = true;
            } else {
                poll.due = Some(now);
            }
        }
    }

    /// The outstanding poll of `type_url` was answered (a response, or
    /// "not modified"): the next is due `refresh_delay` from `now`, or at
    /// once if interest changed meanwhile, and the server has answered for
    /// its names (rule 7). `false` if the type is no longer polled (its
    /// answer is stale).
    pub fn handle_answer(&mut self, now: Instant, type_url: &str) -> bool {
        let Some(poll) = self.types.get_mut(type_url) else {
            return false;
        };
        if !poll.outstanding {
            return false;
        }
        poll.outstanding = false;
        let names = std::mem::take(&mut poll.in_flight);
        self.answered_names.insert(type_url.to_owned(), names);
        poll.due = Some(if poll.urgent {
            now
        } else {
            now + self.refresh_delay
        });
        poll.urgent = false;
        true
    }

    /// Forgets every type but the names last answered (rules 6 and 7).
    pub fn clear(&mut self) {
        self.types.clear();
    }

    /// The next request to POST, if one is due at `now`; it is outstanding
    /// until [`handle_answer`](Self::handle_answer) or
    /// [`clear`](Self::clear).
    #[must_use]
    pub fn poll_request(&mut self, now: Instant) -> Option<DiscoveryRequest> {
        let (type_url, poll) = self
            .types
            .iter_mut()
            .find(|(_, p)| !p.outstanding && p.due.is_some_and(|due| due <= now))?;
        poll.outstanding = true;
        poll.due = None;
        let mut request = poll.latest.clone();
        if self.answered_names.get(type_url) != Some(&request.resource_names) {
            request.version_info.clear();
        }
        poll.in_flight.clone_from(&request.resource_names);
        Some(request)
    }

    /// When the next poll is due.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.types
            .values()
            .filter(|p| !p.outstanding)
            .filter_map(|p| p.due)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";

    fn node() -> Node {
        Node {
            id: "n1".into(),
            ..Default::default()
        }
    }

    fn request(type_url: &str, names: &[&str], version: &str, nonce: &str) -> DiscoveryRequest {
        DiscoveryRequest {
            type_url: type_url.into(),
            resource_names: names.iter().map(|n| (*n).to_owned()).collect(),
            version_info: version.into(),
            response_nonce: nonce.into(),
            ..Default::default()
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Rules 1 and 2: a type's poll waits for its answer; its ACK leaves
    /// with the next poll, `refresh_delay` after the answer, and polls
    /// repeat it.
    #[test]
    fn ack_rides_on_the_next_poll_after_refresh_delay() {
        let t0 = Instant::now();
        let mut s = PollSchedule::new(ms(100), node());
        s.handle_request(t0, request(CDS, &["c1"], "", ""), Cause::Interest);
        let first = s.poll_request(t0).unwrap();
        assert_eq!(first.resource_names, ["c1"]);
        assert_eq!(s.poll_request(t0), None, "one outstanding request per type");
        assert_eq!(s.poll_timeout(), None);
        assert!(s.handle_answer(t0 + ms(5), CDS));
        s.handle_request(t0 + ms(5), request(CDS, &["c1"], "v1", "n1"), Cause::Answer);
        assert_eq!(
            s.poll_request(t0 + ms(50)),
            None,
            "the ACK is not sent at once"
        );
        assert_eq!(s.poll_timeout(), Some(t0 + ms(105)));
        let ack = s.poll_request(t0 + ms(105)).unwrap();
        assert_eq!((&*ack.version_info, &*ack.response_nonce), ("v1", "n1"));
        // "not modified": the same request again one delay later
        assert!(s.handle_answer(t0 + ms(110), CDS));
        assert_eq!(s.poll_request(t0 + ms(209)), None);
        assert_eq!(s.poll_request(t0 + ms(210)), Some(ack));
    }

    /// Rule 3: a change of interest goes at once, or right after the
    /// outstanding poll's answer.
    #[test]
    fn interest_change_leaves_at_once_or_after_the_outstanding_answer() {
        let t0 = Instant::now();
        let mut s = PollSchedule::new(ms(100), node());
        s.handle_request(t0, request(CDS, &["c1"], "", ""), Cause::Interest);
        let _ = s.poll_request(t0).unwrap();
        s.handle_request(
            t0 + ms(1),
            request(CDS, &["c1", "c2"], "", ""),
            Cause::Interest,
        );
        assert_eq!(s.poll_request(t0 + ms(1)), None);
        assert!(s.handle_answer(t0 + ms(2), CDS));
        s.handle_request(
            t0 + ms(2),
            request(CDS, &["c1", "c2"], "v1", "n1"),
            Cause::Answer,
        );
        let next = s.poll_request(t0 + ms(2)).unwrap();
        assert_eq!(next.resource_names, ["c1", "c2"]);
        assert!(s.handle_answer(t0 + ms(3), CDS));
        // idle between polls: a new name is due now, not at the refresh
        s.handle_request(
            t0 + ms(10),
            request(CDS, &["c1", "c2", "c3"], "v1", "n1"),
            Cause::Interest,
        );
        assert_eq!(s.poll_timeout(), Some(t0 + ms(10)));
    }

    /// Rule 1 holds per type: types poll side by side.
    #[test]
    fn types_poll_independently() {
        let t0 = Instant::now();
        let mut s = PollSchedule::new(ms(100), node());
        s.handle_request(t0, request(CDS, &["c1"], "", ""), Cause::Interest);
        s.handle_request(t0, request(LDS, &["l1"], "", ""), Cause::Interest);
        let a = s.poll_request(t0).unwrap();
        let b = s.poll_request(t0).unwrap();
        assert_ne!(a.type_url, b.type_url);
        assert_eq!(s.poll_request(t0), None);
    }

    /// Rule 4: every poll names the node.
    #[test]
    fn every_poll_carries_the_node() {
        let t0 = Instant::now();
        let mut s = PollSchedule::new(ms(100), node());
        s.handle_request(t0, request(CDS, &["c1"], "", ""), Cause::Interest);
        let first = s.poll_request(t0).unwrap();
        assert!(s.handle_answer(t0, CDS));
        let again = s.poll_request(t0 + ms(100)).unwrap();
        for r in [first, again] {
            assert_eq!(r.node.map(|n| n.id).as_deref(), Some("n1"));
        }
    }

    /// Rule 7: a poll whose names differ from those of the type's last
    /// answered poll carries an empty version, on the same attempt or the
    /// next; the same names keep the version; a type dropped and asked
    /// again starts afresh.
    #[test]
    fn a_poll_naming_other_names_than_the_last_answered_carries_an_empty_version() {
        let t0 = Instant::now();
        let mut s = PollSchedule::new(ms(100), node());
        s.handle_request(t0, request(CDS, &["c1"], "", ""), Cause::Interest);
        let _ = s.poll_request(t0).unwrap();
        assert!(s.handle_answer(t0 + ms(1), CDS));
        s.handle_request(t0 + ms(1), request(CDS, &["c1"], "v1", ""), Cause::Answer);
        let ack = s.poll_request(t0 + ms(101)).unwrap();
        assert_eq!(ack.version_info, "v1", "the same names keep the version");
        assert!(s.handle_answer(t0 + ms(102), CDS));

        let more = request(CDS, &["c1", "c2"], "v1", "");
        s.handle_request(t0 + ms(110), more.clone(), Cause::Interest);
        let fresh = s.poll_request(t0 + ms(110)).unwrap();
        assert_eq!(fresh.version_info, "", "a new name: asked afresh");
        assert_eq!(fresh.resource_names, ["c1", "c2"]);
        // The attempt fails before the answer: the next asks afresh too.
        s.clear();
        s.handle_request(t0 + ms(120), more, Cause::Interest);
        assert_eq!(s.poll_request(t0 + ms(120)).unwrap().version_info, "");
        assert!(s.handle_answer(t0 + ms(121), CDS));
        s.handle_request(
            t0 + ms(121),
            request(CDS, &["c1", "c2"], "v2", ""),
            Cause::Answer,
        );
        assert_eq!(s.poll_request(t0 + ms(221)).unwrap().version_info, "v2");
        assert!(s.handle_answer(t0 + ms(222), CDS));

        // Dropped, then asked again at the version the session kept.
        s.handle_request(t0 + ms(230), request(CDS, &[], "v2", ""), Cause::Interest);
        s.handle_request(
            t0 + ms(231),
            request(CDS, &["c1", "c2"], "v2", ""),
            Cause::Interest,
        );
        assert_eq!(s.poll_request(t0 + ms(231)).unwrap().version_info, "");
    }

    /// Rules 5 and 6: nothing left to ask stops the type; a failure stops
    /// everything, and a stale answer is refused.
    #[test]
    fn empty_names_and_failures_stop_polling() {
        let t0 = Instant::now();
        let mut s = PollSchedule::new(ms(100), node());
        s.handle_request(t0, request(CDS, &["c1"], "", ""), Cause::Interest);
        let _ = s.poll_request(t0).unwrap();
        s.handle_request(t0, request(CDS, &[], "v1", "n1"), Cause::Interest);
        assert!(!s.handle_answer(t0 + ms(1), CDS), "stale answer");
        assert_eq!(s.poll_timeout(), None);
        s.handle_request(t0, request(LDS, &["l1"], "", ""), Cause::Interest);
        let _ = s.poll_request(t0).unwrap();
        s.clear();
        assert!(!s.handle_answer(t0 + ms(1), LDS));
        assert_eq!(s.poll_request(t0 + ms(500)), None);
    }
}
