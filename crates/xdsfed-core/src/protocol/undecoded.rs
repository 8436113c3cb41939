//! What a transport could not decode of a SotW response: resources that
//! did not map, and responses it could not read at all. Over ADS the
//! response is protobuf and gRPC decodes it whole or fails the stream; a
//! REST-JSON body maps to a `DiscoveryResponse` field by field, so one bad
//! resource, or a body that is not a response, is news the server sent,
//! and is answered as Envoy's REST subscription answers it: a rejected
//! update (`UpdateRejected`), NACKed, not a failure of the server.
//!
//! - An [`UndecodedResource`] is rejected like a resource that fails
//!   validation (gRFC A46): under the name it gives itself when the
//!   transport could read it ([`CoreEvent::Invalid`], the last good copy
//!   keeps serving), else by its position; the response's other resources
//!   apply, and the NACK names each rejected one.
//! - A response rejected whole is NACKed with the last accepted version,
//!   its nonce if it could be read, and why; every name of the type the
//!   session wants hears of it as [`CoreEvent::Invalid`] (a SotW response
//!   is the state of all of them). The server answered: the stream is
//!   healthy.

use crate::hash::HashSet;
use std::sync::Arc;
use std::time::Instant;

use super::ack::{PendingAck, Rejected, response_error_detail};
use super::event::{CoreEvent, ResourceKey};
use super::ingest::{Body, Item};
use super::session::Session;
use crate::types::ValidationError;
use crate::version::Version;

/// A resource of a SotW response that the transport could not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndecodedResource {
    /// Its position in the response's `resources`.
    pub index: usize,
    /// The name it gives itself, if the transport could read it.
    pub name: Option<String>,
    /// Why it does not decode.
    pub error: ValidationError,
}

impl UndecodedResource {
    /// The resource as an item of the response of version `version`, to be
    /// rejected under its name; without a name, the rejection itself.
    pub(super) fn into_item(self, version: &Version) -> Result<Item, Rejected> {
        match self.name {
            Some(name) => Ok(Item::new(
                name,
                Body::Failed(self.error),
                version.clone(),
                None,
            )),
            None => Err(Rejected::Unnamed {
                index: self.index,
                error: self.error,
            }),
        }
    }
}

/// The positions in the response of the resources that did decode: every
/// position but those of `undecoded`, in order.
pub(super) fn decoded_positions(
    undecoded: &[UndecodedResource],
) -> impl Iterator<Item = usize> + use<> {
    let skipped: HashSet<usize> = undecoded.iter().map(|u| u.index).collect();
    (0..).filter(move |i| !skipped.contains(i))
}

impl Session {
    /// Rejects a SotW response of `type_url` as a whole (see the module
    /// docs); `nonce` and `version` are the response's, as far as they
    /// could be read.
    pub(super) fn on_sotw_rejected(
        &mut self,
        now: Instant,
        type_url: &str,
        nonce: String,
        version: &str,
        error: ValidationError,
    ) {
        self.note_response(now);
        let Some(type_url) = self.requested_type(type_url) else {
            return;
        };
        let Some(state) = self.states.get_mut(&type_url) else {
            return;
        };
        state.stream.nonce.clone_from(&nonce);
        let durable = &state.durable;
        let mut names: Vec<Arc<str>> = durable
            .subscribed
            .iter()
            .chain(durable.held.keys())
            .cloned()
            .collect();
        names.sort_unstable();
        names.dedup();
        let previous = durable.acked_version.clone();
        let version = Version::new(version);
        for name in names {
            self.events.push_back(CoreEvent::Invalid {
                key: ResourceKey::new(Arc::clone(&type_url), name),
                error: error.clone(),
                version: version.clone(),
            });
        }
        let detail = response_error_detail(&type_url, &error);
        self.stream.acks.push_back(PendingAck {
            type_url,
            nonce,
            version: previous,
            error: Some(detail),
        });
    }
}
