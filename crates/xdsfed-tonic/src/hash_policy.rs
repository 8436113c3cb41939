//! A route's `hash_policy`: the request hash RING_HASH picks by (gRFC
//! A42). Sans-IO: the channel's id and a random fallback are passed in.
//!
//! - `header`: XXH64 of the header's value (several values joined by
//!   `,`), after `regex_rewrite` when set; headers ending in `-bin` give
//!   none. A request without the header gets no hash from that policy.
//! - `filter_state` with key `io.grpc.channel_id`: the channel's id, the
//!   same for every request of one channel.
//! - Other policies are ignored. Hashes combine as `hash.rotate_left(1) ^
//!   next`; a `terminal` policy that produced a hash ends the list.
//! - No hash at all: a random one.

use envoy_types::pb::envoy::config::route::v3::route_action::HashPolicy as EnvoyHashPolicy;
use envoy_types::pb::envoy::config::route::v3::route_action::hash_policy::PolicySpecifier;
use regex::Regex;
use xxhash_rust::xxh64::xxh64;

use crate::routing::RequestView;

/// The filter state key of the channel id (gRFC A42).
const CHANNEL_ID_KEY: &str = "io.grpc.channel_id";

/// One compiled hash policy.
#[derive(Debug, Clone)]
pub(crate) struct HashPolicy {
    source: Source,
    terminal: bool,
}

#[derive(Debug, Clone)]
enum Source {
    Header {
        name: String,
        rewrite: Option<(Regex, String)>,
    },
    ChannelId,
}

impl HashPolicy {
    /// The policies of a route that gRPC applies, in order; the others (and
    /// headers whose rewrite does not compile) are left out.
    pub(crate) fn compile(policies: &[EnvoyHashPolicy]) -> Vec<Self> {
        policies
            .iter()
            .filter_map(|p| {
                let source = match p.policy_specifier.as_ref()? {
                    PolicySpecifier::Header(h) => Source::Header {
                        name: h.header_name.to_ascii_lowercase(),
                        rewrite: match &h.regex_rewrite {
                            Some(r) => Some((
                                Regex::new(&r.pattern.as_ref()?.regex).ok()?,
                                r.substitution.clone(),
                            )),
                            None => None,
                        },
                    },
                    PolicySpecifier::FilterState(f) if f.key == CHANNEL_ID_KEY => Source::ChannelId,
                    _ => return None,
                };
                Some(Self {
                    source,
                    terminal: p.terminal,
                })
            })
            .collect()
    }
}

/// The request's hash under `policies`, or `random()` when none applies.
pub(crate) fn request_hash(
    policies: &[HashPolicy],
    request: &RequestView<'_>,
    channel_id: u64,
    random: impl FnOnce() -> u64,
) -> u64 {
    let mut hash: Option<u64> = None;
    for policy in policies {
        let next = match &policy.source {
            Source::ChannelId => Some(channel_id),
            Source::Header { name, rewrite } => header_hash(request, name, rewrite.as_ref()),
        };
        if let Some(next) = next {
            hash = Some(hash.map_or(next, |h| h.rotate_left(1) ^ next));
        }
        if policy.terminal && hash.is_some() {
            break;
        }
    }
    hash.unwrap_or_else(random)
}

fn header_hash(
    request: &RequestView<'_>,
    name: &str,
    rewrite: Option<&(Regex, String)>,
) -> Option<u64> {
    if name.ends_with("-bin") {
        return None;
    }
    let value = request.header(name)?;
    let value = match rewrite {
        Some((regex, substitution)) => regex.replace_all(&value, substitution.as_str()),
        None => value,
    };
    Some(xxh64(value.as_bytes(), 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::route::v3::route_action::hash_policy::{
        FilterState, Header,
    };

    fn header(name: &str, terminal: bool) -> EnvoyHashPolicy {
        EnvoyHashPolicy {
            policy_specifier: Some(PolicySpecifier::Header(Header {
                header_name: name.into(),
                regex_rewrite: None,
            })),
            terminal,
        }
    }

    fn channel_id() -> EnvoyHashPolicy {
        EnvoyHashPolicy {
            policy_specifier: Some(PolicySpecifier::FilterState(FilterState {
                key: CHANNEL_ID_KEY.into(),
            })),
            terminal: false,
        }
    }

    fn view(headers: &http::HeaderMap) -> RequestView<'_> {
        RequestView {
            authority: "svc",
            path: "/s/m",
            method: "POST",
            headers,
        }
    }

    /// gRFC A42: a header hashes to XXH64 of its value; policies combine
    /// by rotate-and-xor; a terminal policy that hashed ends the list.
    #[test]
    fn request_hash_combines_header_and_channel_id_policies() {
        let mut headers = http::HeaderMap::new();
        headers.insert("x-user", "alice".parse().unwrap());
        let request = view(&headers);
        let alice = xxh64(b"alice", 0);
        let one = HashPolicy::compile(&[header("X-User", false)]);
        assert_eq!(request_hash(&one, &request, 7, || 0), alice);
        let both = HashPolicy::compile(&[header("x-user", false), channel_id()]);
        assert_eq!(
            request_hash(&both, &request, 7, || 0),
            alice.rotate_left(1) ^ 7
        );
        let terminal = HashPolicy::compile(&[header("x-user", true), channel_id()]);
        assert_eq!(request_hash(&terminal, &request, 7, || 0), alice);
    }

    /// gRFC A42: a missing header or a `-bin` header gives no hash; with
    /// none at all the hash is random.
    #[test]
    fn request_without_the_header_gets_a_random_hash() {
        let headers = http::HeaderMap::new();
        let policies = HashPolicy::compile(&[header("x-user", true), header("x-key-bin", false)]);
        assert_eq!(request_hash(&policies, &view(&headers), 7, || 42), 42);
        let channel = HashPolicy::compile(&[header("x-user", true), channel_id()]);
        assert_eq!(request_hash(&channel, &view(&headers), 7, || 42), 7);
    }
}
