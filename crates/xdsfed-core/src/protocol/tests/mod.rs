//! Deterministic tests of the protocol core, one file per spec section. No
//! tokio, no sleeps: time is an `Instant` the test moves.

mod ack_nack;
mod authority;
mod deadlines;
mod deletion;
mod does_not_exist;
mod federation;
mod names;
mod reconnect;
mod resume;
mod sim;
mod support;
mod ttl;
mod undecoded;
mod wildcard;
mod wire;
