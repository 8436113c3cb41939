//! The sans-IO xDS protocol core.
//!
//! Placeholder: the protocol issue builds the state machine here. The types in
//! [`event`] are the contract between the core (which produces them) and the
//! cache (which consumes them); extend them, keep their names.

pub mod event;

pub use event::{CoreEvent, ResourceKey};
