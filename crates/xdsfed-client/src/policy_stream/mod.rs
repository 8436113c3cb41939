//! The policy-distribution stream's IO: a driver task that runs a
//! [`PolicySession`](xdsfed_core::policy_stream::PolicySession) over a
//! tonic stream, with its health checks. The rules are the session's
//! module doc in xdsfed-core.

mod connection;
mod driver;
pub mod stub;

pub(crate) use connection::PolicyConnection;
