//! A route configuration compiled for per-request matching.
//!
//! ```text
//! request (authority, path, headers)
//!   ─► virtual host by domain (domain.rs)
//!   ─► first route whose match accepts it (matcher.rs)
//!   ─► its action: one cluster, weighted clusters (picked by weight), or a failure
//!   ─► the cluster's target T (a balancer, or why the cluster cannot be used)
//!      and the route's call policy (timeout, retries: call_policy.rs)
//! ```
//!
//! [`RouteTable`] is generic over what a cluster name resolves to, so the
//! matching is tested without balancers; the channel resolves names to its
//! balancers once per snapshot, not per request. The virtual host for the
//! channel's own authority is chosen once per snapshot too.

mod domain;
mod matcher;

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::ClusterSpecifier;
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteConfiguration, VirtualHost, WeightedCluster,
};

use crate::call_policy::{CallPolicy, RetryPolicy, route_max_duration};
use crate::hash_policy::HashPolicy;

use crate::error::{Unservable, shown};
use domain::DomainPattern;
pub(crate) use matcher::RequestView;
use matcher::RouteMatcher;

/// What a request is routed to: its cluster's target and its route's
/// call policy.
#[derive(Debug)]
pub(crate) struct Picked<'t, T> {
    pub(crate) target: &'t T,
    pub(crate) policy: &'t Arc<CallPolicy>,
}

/// A route configuration, compiled; `T` is what a cluster resolves to.
#[derive(Debug)]
pub(crate) struct RouteTable<T> {
    name: Arc<str>,
    virtual_hosts: Vec<VirtualHostRoutes<T>>,
    /// The virtual host for the channel's authority.
    default_host: Option<usize>,
    default_authority: Arc<str>,
}

#[derive(Debug)]
struct VirtualHostRoutes<T> {
    name: Arc<str>,
    domains: Vec<DomainPattern>,
    routes: Vec<CompiledRoute<T>>,
}

#[derive(Debug)]
struct CompiledRoute<T> {
    matcher: RouteMatcher,
    action: RouteAction<T>,
}

#[derive(Debug)]
enum RouteAction<T> {
    /// Cumulative weights and their targets; one entry for a single cluster.
    Clusters {
        total: u64,
        targets: Vec<(u64, T)>,
        policy: Arc<CallPolicy>,
    },
    /// The route matches, but requests it takes fail with this.
    Fail(Arc<str>),
}

impl<T> RouteTable<T> {
    /// Compiles `config`; `resolve` turns each cluster name into a target,
    /// and is called once per cluster use.
    #[cfg(test)]
    pub(crate) fn compile(
        config: &RouteConfiguration,
        authority: &str,
        resolve: impl FnMut(&str) -> T,
    ) -> Self {
        Self::compile_with(config, authority, None, resolve)
    }

    /// Compiles `config`; `resolve` turns each cluster name into a target,
    /// and is called once per cluster use. Routes that set no
    /// `max_stream_duration` take `listener_max_duration` (the
    /// HttpConnectionManager's, gRFC A31).
    pub(crate) fn compile_with(
        config: &RouteConfiguration,
        authority: &str,
        listener_max_duration: Option<Duration>,
        mut resolve: impl FnMut(&str) -> T,
    ) -> Self {
        let virtual_hosts: Vec<VirtualHostRoutes<T>> = config
            .virtual_hosts
            .iter()
            .map(|vh| {
                let name: Arc<str> = shown(&vh.name).into();
                let host = HostDefaults::of(vh, listener_max_duration);
                let routes = vh
                    .routes
                    .iter()
                    .enumerate()
                    .filter_map(|(i, route)| compile_route(route, i, &name, &host, &mut resolve))
                    .collect();
                VirtualHostRoutes {
                    name,
                    domains: vh.domains.iter().map(|d| DomainPattern::parse(d)).collect(),
                    routes,
                }
            })
            .collect();
        let default_host = domain::best_match(
            virtual_hosts.iter().map(|vh| vh.domains.as_slice()),
            authority,
        );
        Self {
            name: shown(&config.name).into(),
            virtual_hosts,
            default_host,
            default_authority: authority.into(),
        }
    }

    /// The target for `request`, or why it has none. `random` gives the
    /// randomness of runtime fractions and weighted clusters.
    #[cfg(test)]
    pub(crate) fn route(
        &self,
        request: &RequestView<'_>,
        random: impl FnMut() -> u64,
    ) -> Result<&T, Unservable> {
        self.pick(request, random).map(|picked| picked.target)
    }

    /// The target and call policy for `request`, or why it has none.
    /// `random` gives the randomness of runtime fractions and weighted
    /// clusters.
    pub(crate) fn pick(
        &self,
        request: &RequestView<'_>,
        mut random: impl FnMut() -> u64,
    ) -> Result<Picked<'_, T>, Unservable> {
        let host = if request.authority == &*self.default_authority {
            self.default_host
        } else {
            domain::best_match(
                self.virtual_hosts.iter().map(|vh| vh.domains.as_slice()),
                request.authority,
            )
        };
        let host = host
            .and_then(|i| self.virtual_hosts.get(i))
            .ok_or_else(|| Unservable::NoVirtualHost {
                route_config: Arc::clone(&self.name),
                authority: shown(request.authority),
            })?;
        let route = host
            .routes
            .iter()
            .find(|r| r.matcher.matches(request, random()))
            .ok_or_else(|| Unservable::NoRoute {
                virtual_host: Arc::clone(&host.name),
                path: shown(request.path),
            })?;
        match &route.action {
            RouteAction::Fail(message) => Err(Unservable::Route(Arc::clone(message))),
            RouteAction::Clusters {
                total,
                targets,
                policy,
            } => {
                let point = random() % total;
                targets
                    .iter()
                    .find(|(upto, _)| point < *upto)
                    .map(|(_, target)| Picked { target, policy })
                    // Unreachable: the last cumulative weight is `total`.
                    .ok_or_else(|| Unservable::Route("weighted clusters add up to 0".into()))
            }
        }
    }
}

/// What a virtual host gives the routes that say nothing themselves.
struct HostDefaults {
    max_duration: Option<Duration>,
    retry: Option<RetryPolicy>,
}

impl HostDefaults {
    fn of(host: &VirtualHost, listener_max_duration: Option<Duration>) -> Self {
        Self {
            max_duration: listener_max_duration,
            retry: host.retry_policy.as_ref().and_then(RetryPolicy::from_envoy),
        }
    }
}

/// How a route is named in messages: its name, else its place.
fn route_label(route: &Route, index: usize, host: &str) -> String {
    if route.name.is_empty() {
        format!("route #{index} of virtual host {host}")
    } else {
        format!("route {} of virtual host {host}", shown(&route.name))
    }
}

/// A route, or `None` when it can never match (it is skipped, as gRPC
/// skips a route it cannot read).
fn compile_route<T>(
    route: &Route,
    index: usize,
    host: &str,
    defaults: &HostDefaults,
    resolve: &mut impl FnMut(&str) -> T,
) -> Option<CompiledRoute<T>> {
    let label = || route_label(route, index, host);
    let matcher = match route.r#match.as_ref().map(RouteMatcher::compile) {
        Some(Ok(m)) => m,
        Some(Err(why)) => {
            tracing::debug!(route = %label(), %why, "route never matches");
            return None;
        }
        None => return None,
    };
    let fail = |why: &str| RouteAction::Fail(format!("{}: {why}", label()).into());
    let action = match &route.action {
        Some(Action::Route(action)) => match &action.cluster_specifier {
            Some(ClusterSpecifier::Cluster(name)) => RouteAction::Clusters {
                total: 1,
                targets: vec![(1, resolve(name))],
                policy: call_policy(action, defaults),
            },
            Some(ClusterSpecifier::WeightedClusters(weighted)) => {
                weighted_action(weighted, call_policy(action, defaults), resolve)
                    .unwrap_or_else(|why| fail(&why))
            }
            Some(ClusterSpecifier::ClusterHeader(header)) => fail(&format!(
                "selects its cluster by request header {} (cluster_header), which is not supported",
                shown(header)
            )),
            Some(_) => fail("selects its cluster with a plugin, which is not supported"),
            None => fail("names no cluster"),
        },
        Some(Action::Redirect(_)) => fail("is a redirect, which does not forward"),
        Some(Action::DirectResponse(_)) => fail("is a direct response, which does not forward"),
        Some(_) | None => fail("does not forward (non-forwarding action)"),
    };
    Some(CompiledRoute { matcher, action })
}

/// The route's own timeout and retry policy, else its host's (gRFC A31,
/// A44).
fn call_policy(
    action: &envoy_types::pb::envoy::config::route::v3::RouteAction,
    defaults: &HostDefaults,
) -> Arc<CallPolicy> {
    let max_duration =
        route_max_duration(action.max_stream_duration.as_ref()).unwrap_or(defaults.max_duration);
    let retry = match &action.retry_policy {
        Some(policy) => RetryPolicy::from_envoy(policy),
        None => defaults.retry.clone(),
    };
    Arc::new(CallPolicy {
        max_duration,
        retry,
        hash_policy: HashPolicy::compile(&action.hash_policy),
    })
}

/// Cumulative weights over the clusters with a positive weight.
fn weighted_action<T>(
    weighted: &WeightedCluster,
    policy: Arc<CallPolicy>,
    resolve: &mut impl FnMut(&str) -> T,
) -> Result<RouteAction<T>, String> {
    let mut total: u64 = 0;
    let mut targets = Vec::with_capacity(weighted.clusters.len());
    for cluster in &weighted.clusters {
        let weight = cluster.weight.as_ref().map_or(0, |w| u64::from(w.value));
        if weight == 0 {
            continue;
        }
        if cluster.name.is_empty() {
            return Err("a weighted cluster is chosen by header, which is not supported".into());
        }
        total += weight;
        targets.push((total, resolve(&cluster.name)));
    }
    if total == 0 {
        return Err("its weighted clusters add up to 0".into());
    }
    Ok(RouteAction::Clusters {
        total,
        targets,
        policy,
    })
}

#[cfg(test)]
mod tests;
