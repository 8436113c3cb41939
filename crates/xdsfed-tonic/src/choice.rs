//! The pick among a cluster's ready endpoints: `choice_count` distinct
//! candidates drawn at random, the least loaded wins (gRFC A48's
//! LEAST_REQUEST; ROUND_ROBIN here draws two). tower's power-of-two-choices
//! balancer always draws two, so this is the same balancer with the number
//! of candidates as a parameter. RING_HASH (gRFC A42) picks instead the
//! first ready endpoint walking the ring from the request's hash.
//!
//! [`pick_least_loaded`] and [`Ring`] decide (sans-IO, randomness passed
//! in); [`ChoiceBalance`] keeps the endpoints (tower's `ReadyCache`, fed by
//! the cluster's [`EndpointDiscover`]) and dispatches.

use std::pin::Pin;
use std::task::{Context, Poll};

use tower::Service;
use tower::discover::{Change, Discover};
use tower::load::Load;
use tower::ready_cache::ReadyCache;
use tower::ready_cache::error::Failed;

use crate::discover::{EndpointDiscover, EndpointRegistry, registry_map};
use crate::endpoint::{Endpoint, EndpointAddress, Request, Response};
use crate::error::BoxError;
use crate::ring::Ring;

/// The index, in `0..len`, of the least loaded of `choices` distinct
/// candidates drawn with `random`; every index when `choices >= len`.
/// Ties go to the candidate drawn first (when every index is a candidate,
/// they are walked from a random start). `None` when `len` is 0.
pub(crate) fn pick_least_loaded(
    len: usize,
    choices: usize,
    load: impl Fn(usize) -> f64,
    mut random: impl FnMut() -> u64,
) -> Option<usize> {
    let better = |best: Option<(usize, f64)>, i: usize| {
        let l = load(i);
        match best {
            Some((_, b)) if b <= l => best,
            _ => Some((i, l)),
        }
    };
    if choices >= len {
        // From a random start, so that ties spread.
        let start = (random() % len.max(1) as u64) as usize;
        return (start..len)
            .chain(0..start)
            .fold(None, better)
            .map(|(i, _)| i);
    }
    // Robert Floyd's sampling: `choices` distinct indices in O(choices²).
    let mut drawn: Vec<usize> = Vec::with_capacity(choices);
    for upper in (len - choices)..len {
        // In 0..=upper; the modulo bias is negligible for endpoint counts.
        let candidate = (random() % (upper as u64 + 1)) as usize;
        drawn.push(if drawn.contains(&candidate) {
            upper
        } else {
            candidate
        });
    }
    drawn.into_iter().fold(None, better).map(|(i, _)| i)
}

/// How a balancer picks among ready endpoints.
#[derive(Debug)]
pub(crate) enum Picker {
    /// The least loaded of `choices` random ones.
    LeastLoaded { choices: usize },
    /// The first ready one walking the ring from the request's hash.
    Ring {
        min_size: u64,
        max_size: u64,
        ring: Ring<EndpointAddress>,
        /// The endpoints changed since the ring was built.
        stale: bool,
        /// The hash of the request being picked for.
        hash: Option<u64>,
    },
}

impl Picker {
    pub(crate) fn ring(min_size: u64, max_size: u64) -> Self {
        Self::Ring {
            min_size,
            max_size,
            ring: Ring::default(),
            stale: true,
            hash: None,
        }
    }
}

/// A cluster's endpoints, ready ones picked by their [`Picker`].
pub(crate) struct ChoiceBalance {
    discover: EndpointDiscover,
    registry: EndpointRegistry,
    services: ReadyCache<EndpointAddress, Endpoint, Request>,
    /// The endpoint picked by the last `poll_ready`, which `call` uses.
    ready_index: Option<usize>,
    picker: Picker,
}

impl std::fmt::Debug for ChoiceBalance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChoiceBalance")
            .field("ready", &self.services.ready_len())
            .field("pending", &self.services.pending_len())
            .field("picker", &self.picker)
            .finish_non_exhaustive()
    }
}

impl ChoiceBalance {
    /// Balances over `discover`'s endpoints as `picker` says (at least 2
    /// candidates for the least loaded).
    pub(crate) fn new(discover: EndpointDiscover, mut picker: Picker) -> Self {
        if let Picker::LeastLoaded { choices } = &mut picker {
            *choices = (*choices).max(2);
        }
        Self {
            registry: discover.registry(),
            discover,
            services: ReadyCache::default(),
            ready_index: None,
            picker,
        }
    }

    /// The hash of the next request, for RING_HASH; a random one when the
    /// request has none.
    pub(crate) fn set_request_hash(&mut self, request_hash: Option<u64>) {
        if let Picker::Ring { hash, .. } = &mut self.picker {
            *hash = Some(request_hash.unwrap_or_else(crate::rng::next_u64));
            // A pick made for another request's hash does not carry over.
            self.ready_index = None;
        }
    }

    /// Applies every endpoint change the discovery has.
    fn apply_changes(&mut self, cx: &mut Context<'_>) {
        while let Poll::Ready(Some(Ok(change))) = Pin::new(&mut self.discover).poll_discover(cx) {
            if let Picker::Ring { stale, .. } = &mut self.picker {
                *stale = true;
            }
            match change {
                Change::Insert(address, endpoint) => self.services.push(address, endpoint),
                Change::Remove(address) => {
                    self.services.evict(&address);
                }
            }
        }
    }

    /// Moves endpoints that became ready into the ready set. An endpoint
    /// never fails (it stays pending while disconnected), so errors only
    /// drop it, as tower's balancer does.
    fn promote_ready(&mut self, cx: &mut Context<'_>) {
        while let Poll::Ready(Err(Failed(address, error))) = self.services.poll_pending(cx) {
            tracing::debug!(endpoint = %address, %error, "dropping failed endpoint");
        }
    }

    fn pick(&mut self) -> Option<usize> {
        let choices = match &mut self.picker {
            Picker::LeastLoaded { choices } => *choices,
            Picker::Ring {
                min_size,
                max_size,
                ring,
                stale,
                hash,
            } => {
                if *stale {
                    let mut weights: Vec<(EndpointAddress, f64)> = registry_map(&self.registry)
                        .iter()
                        .map(|(address, stats)| (address.clone(), stats.weight()))
                        .collect();
                    weights.sort_by(|a, b| a.0.cmp(&b.0));
                    *ring = Ring::build(&weights, *min_size, *max_size);
                    *stale = false;
                }
                let hash = hash.unwrap_or_else(crate::rng::next_u64);
                let services = &self.services;
                return ring
                    .walk(hash)
                    .find_map(|address| services.get_ready(address).map(|(index, ..)| index));
            }
        };
        let load = |i| {
            self.services
                .get_ready_index(i)
                .map_or(f64::INFINITY, |(_, endpoint)| endpoint.load())
        };
        pick_least_loaded(
            self.services.ready_len(),
            choices,
            load,
            crate::rng::next_u64,
        )
    }
}

impl Service<Request> for ChoiceBalance {
    type Response = Response;
    type Error = BoxError;
    type Future = <Endpoint as Service<Request>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.apply_changes(cx);
        self.promote_ready(cx);
        loop {
            if let Some(index) = self.ready_index.take() {
                match self.services.check_ready_index(cx, index) {
                    Ok(true) => {
                        self.ready_index = Some(index);
                        return Poll::Ready(Ok(()));
                    }
                    Ok(false) => {}
                    Err(Failed(address, error)) => {
                        tracing::debug!(endpoint = %address, %error, "endpoint failed");
                    }
                }
            }
            self.ready_index = self.pick();
            if self.ready_index.is_none() {
                return Poll::Pending;
            }
        }
    }

    fn call(&mut self, request: Request) -> Self::Future {
        match self.ready_index.take() {
            Some(index) => self.services.call_ready_index(index, request),
            // tower calls only after poll_ready said ready; answer a misuse
            // with an error, not a panic.
            None => Box::pin(std::future::ready(Err(BoxError::from(
                "balancer called before it was ready",
            )))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter() -> impl FnMut() -> u64 {
        let mut n = 0x9E37_79B9_7F4A_7C15u64;
        move || {
            n = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            n >> 11
        }
    }

    /// gRFC A48: with `choice_count` at least the number of endpoints,
    /// every endpoint is a candidate and the least loaded always wins.
    #[test]
    fn choice_count_covering_every_endpoint_always_picks_the_least_loaded() {
        let loads = [3.0, 1.0, 0.0, 2.0];
        let mut random = counter();
        for _ in 0..100 {
            assert_eq!(pick_least_loaded(4, 4, |i| loads[i], &mut random), Some(2));
            assert_eq!(pick_least_loaded(4, 9, |i| loads[i], &mut random), Some(2));
        }
        assert_eq!(pick_least_loaded(0, 2, |_| 0.0, &mut random), None);
    }

    /// Candidates are distinct: with 3 of 4 drawn, the most loaded endpoint
    /// never wins, and the least loaded wins in 3 draws of 4.
    #[test]
    fn candidates_are_distinct_draws() {
        let loads = [0.0, 1.0, 2.0, 3.0];
        let mut random = counter();
        let mut wins = [0u32; 4];
        for _ in 0..4000 {
            let i = pick_least_loaded(4, 3, |i| loads[i], &mut random).unwrap();
            wins[i] += 1;
        }
        assert_eq!(wins[3], 0, "{wins:?}");
        assert!((2700..3300).contains(&wins[0]), "{wins:?}");
    }
}
