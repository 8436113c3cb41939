//! What can go wrong: building a channel ([`ChannelError`]), and sending one
//! request ([`Unservable`], which becomes the gRPC status the caller sees).
//!
//! A request that cannot be served fails alone, with `UNAVAILABLE` and a
//! message naming what is missing (the cluster, the route, the listener),
//! as gRPC's xDS resolver fails it; the channel keeps serving every other
//! route.

use std::fmt::Write as _;
use std::sync::Arc;

use xdsfed_client::client::BuildError;
use xdsfed_core::authority::AuthorityError;

/// The boxed error of tower services.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why [`ChannelBuilder::build`](crate::ChannelBuilder::build) refused.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The target is not an `xds:` URI the bootstrap can resolve (gRFC
    /// A47): malformed, an authority the bootstrap lacks, or a template that
    /// expands to an invalid listener name.
    #[error(transparent)]
    Target(#[from] AuthorityError),
    /// The xDS client could not be built.
    #[error("cannot start the xDS client: {0}")]
    Client(#[from] BuildError),
    /// The bootstrap could not be read ([`channel_from_env`](crate::channel_from_env)).
    #[error(transparent)]
    Bootstrap(#[from] xdsfed_core::bootstrap::BootstrapError),
}

/// Why one request could not be sent. Each becomes `UNAVAILABLE`
/// ([`Unservable::to_status`]). Names from the control plane are held as
/// they are shown: quoted, with control characters escaped and long names
/// elided.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unservable {
    /// No configuration arrived within the channel's ready timeout.
    #[error("{target}: no xDS configuration for listener {listener} within {after:?}")]
    NotReady {
        /// The channel's target.
        target: Arc<str>,
        /// The listener the channel follows.
        listener: Arc<str>,
        /// How long the request waited.
        after: std::time::Duration,
    },
    /// The graph stopped before publishing anything.
    #[error("{target}: the xDS graph stopped before its first snapshot")]
    GraphGone {
        /// The channel's target.
        target: Arc<str>,
    },
    /// The listener or its route configuration cannot be used.
    #[error("{0}")]
    Listener(Arc<str>),
    /// No virtual host's domains match the request's authority.
    #[error("route configuration {route_config}: no virtual host matches authority {authority}")]
    NoVirtualHost {
        /// The route configuration's name.
        route_config: Arc<str>,
        /// The authority matched.
        authority: String,
    },
    /// No route of the virtual host matches the request.
    #[error("virtual host {virtual_host}: no route matches path {path}")]
    NoRoute {
        /// The virtual host's name.
        virtual_host: Arc<str>,
        /// The request's path.
        path: String,
    },
    /// The route matched but its action cannot be served; the message names
    /// the route and why (a missing or failed cluster, an unsupported load
    /// balancing policy, an action that does not forward).
    #[error("{0}")]
    Route(Arc<str>),
    /// The cluster has no endpoint that is HEALTHY or UNKNOWN.
    #[error("cluster {0} has no healthy endpoints")]
    NoEndpoints(Arc<str>),
    /// Every endpoint of the cluster failed its last connection attempt.
    #[error(
        "cluster {cluster}: none of its {endpoints} endpoints accepts a connection{}",
        last_error_suffix(.last_error.as_deref())
    )]
    Unreachable {
        /// The cluster's name, as shown.
        cluster: Arc<str>,
        /// How many endpoints are failing to connect.
        endpoints: usize,
        /// Why the latest failed attempt failed (a refused certificate, a
        /// missing file, a refused connection), cleaned for a message.
        last_error: Option<Arc<str>>,
    },
    /// Outlier detection holds every endpoint of the cluster out (gRFC A50
    /// with `max_ejection_percent` 100): gRPC's picker sees only endpoints
    /// in TRANSIENT_FAILURE and fails the call.
    #[error("cluster {cluster}: outlier detection has ejected all of its {endpoints} endpoints")]
    AllEjected {
        /// The cluster's name, as shown.
        cluster: Arc<str>,
        /// How many endpoints are ejected.
        endpoints: usize,
    },
}

impl Unservable {
    /// The gRPC status a caller sees: `UNAVAILABLE`, as gRPC fails a call
    /// its xDS configuration cannot serve.
    pub fn to_status(&self) -> tonic::Status {
        tonic::Status::unavailable(self.to_string())
    }

    /// The status, boxed as the error of the channel's service: tonic's
    /// generated clients find a `Status` in the error and return it as is.
    pub(crate) fn into_box_error(self) -> BoxError {
        Box::new(self.to_status())
    }
}

fn last_error_suffix(why: Option<&str>) -> String {
    why.map(|why| format!(" (last error: {why})"))
        .unwrap_or_default()
}

/// Longest a name from a server is shown in a message.
const SHOWN_MAX: usize = 200;

/// A name from a control plane, safe to put in a message: quoted, control
/// characters escaped, and elided past [`SHOWN_MAX`] characters, so that a
/// name can neither forge a line nor flood a log.
pub(crate) fn shown(untrusted: &str) -> String {
    let mut out = String::with_capacity(untrusted.len().min(SHOWN_MAX) + 2);
    out.push('"');
    push_escaped(&mut out, untrusted, |c| {
        c.is_control() || c == '"' || c == '\\'
    });
    out.push('"');
    out
}

/// A message that already quotes its names (a graph error): only control
/// characters escaped, elided past [`SHOWN_MAX`] characters.
pub(crate) fn cleaned(untrusted: &str) -> String {
    let mut out = String::with_capacity(untrusted.len().min(SHOWN_MAX));
    push_escaped(&mut out, untrusted, char::is_control);
    out
}

fn push_escaped(out: &mut String, text: &str, escape: impl Fn(char) -> bool) {
    for (i, c) in text.chars().enumerate() {
        if i == SHOWN_MAX {
            out.push('…');
            break;
        }
        if escape(c) {
            // Writing to a String cannot fail.
            let _ = write!(out, "{}", c.escape_debug());
        } else {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_escapes_control_characters_and_elides_long_names() {
        assert_eq!(shown("a\nb"), r#""a\nb""#);
        let long = "x".repeat(SHOWN_MAX + 10);
        let s = shown(&long);
        assert!(s.ends_with("…\""), "{s}");
        assert_eq!(s.chars().filter(|c| *c == 'x').count(), SHOWN_MAX);
        assert_eq!(cleaned("cluster \"a\"\x1b[2J"), "cluster \"a\"\\u{1b}[2J");
    }

    #[test]
    fn unservable_becomes_unavailable_naming_what_is_missing() {
        let status = Unservable::NoEndpoints(shown("payments").into()).to_status();
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(
            status.message(),
            r#"cluster "payments" has no healthy endpoints"#
        );
    }
}
