//! The tonic driver of the protocol core: channels, ADS streams, reconnects.
//!
//! Placeholder: the protocol/transport issue builds it.
