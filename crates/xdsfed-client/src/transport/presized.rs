//! Decoding a response with its list of resources sized once.
//!
//! prost pushes a repeated field's elements one at a time, so a response
//! of n resources grows its `Vec` log₂ n times, each time moving every
//! resource decoded so far (a `Resource` is 200 bytes), and ends with up
//! to twice the room it needs. The resources are the response's field 2
//! in both ADS variants (and the policies in the policy stream's); when the first one is met, the rest of the
//! message (which is in one buffer: the framer hands out whole messages)
//! is scanned for the others, tag by tag without decoding them, and the
//! list is given exactly that room.

use bytes::{Buf, BufMut, Bytes};
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, DiscoveryResponse};
use prost::encoding::{DecodeContext, WireType, decode_key, decode_varint, skip_field};
use prost::{DecodeError, Message};
use xdsfed_core::policy_stream::wire::PolicyDiscoveryResponse;
use xdsfed_core::protocol::WireDeltaResponse;

/// The field number of the list in every response message the client
/// reads: `resources` in both ADS variants, `policies` in the policy
/// stream's.
const RESOURCES: u32 = 2;

/// A response whose resources are a repeated message field numbered 2.
pub(crate) trait Resources: Message + Default {
    /// Makes room for `additional` more resources.
    fn reserve_resources(&mut self, additional: usize);
    /// How many resources there is room for.
    fn resources_capacity(&self) -> usize;
    /// Refuses what decoding let through but the message may not hold:
    /// text fields read as bytes that are not UTF-8.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

impl Resources for WireDeltaResponse {
    fn reserve_resources(&mut self, additional: usize) {
        self.resources.reserve_exact(additional);
    }
    fn resources_capacity(&self) -> usize {
        self.resources.capacity()
    }
    fn check(&self) -> Result<(), String> {
        self.check_text().map_err(|e| e.to_string())
    }
}

impl Resources for DeltaDiscoveryResponse {
    fn reserve_resources(&mut self, additional: usize) {
        self.resources.reserve_exact(additional);
    }
    fn resources_capacity(&self) -> usize {
        self.resources.capacity()
    }
}

impl Resources for DiscoveryResponse {
    fn reserve_resources(&mut self, additional: usize) {
        self.resources.reserve_exact(additional);
    }
    fn resources_capacity(&self) -> usize {
        self.resources.capacity()
    }
}

impl Resources for PolicyDiscoveryResponse {
    fn reserve_resources(&mut self, additional: usize) {
        self.policies.reserve_exact(additional);
    }
    fn resources_capacity(&self) -> usize {
        self.policies.capacity()
    }
}

/// Decodes `bytes` as an `M`, its resources in one allocation of the
/// right size.
pub(crate) fn decode<M: Resources>(bytes: Bytes) -> Result<M, DecodeError> {
    Presized::<M>::decode(bytes).map(|p| p.0)
}

#[derive(Debug, Default)]
struct Presized<M>(M);

impl<M: Resources> Message for Presized<M> {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        self.0.encode_raw(buf);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        if tag == RESOURCES
            && wire_type == WireType::LengthDelimited
            && self.0.resources_capacity() == 0
        {
            self.0.reserve_resources(count_resources(buf.chunk()));
        }
        self.0.merge_field(tag, wire_type, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        self.0.encoded_len()
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

/// How many resources `rest` holds: it starts with the length of the
/// first one (its key was read), and goes on with the message's other
/// fields. A malformed tail ends the count; decoding then reports it.
fn count_resources(mut rest: &[u8]) -> usize {
    let Some(first) = skip_length_delimited(&mut rest) else {
        return 0;
    };
    let mut count = usize::from(first);
    while rest.has_remaining() {
        let Ok((tag, wire_type)) = decode_key(&mut rest) else {
            break;
        };
        if tag == RESOURCES && wire_type == WireType::LengthDelimited {
            match skip_length_delimited(&mut rest) {
                Some(true) => count += 1,
                _ => break,
            }
        } else if skip_field(wire_type, tag, &mut rest, DecodeContext::default()).is_err() {
            break;
        }
    }
    count
}

/// Skips one length-delimited value; `Some(true)` when it was whole.
fn skip_length_delimited(rest: &mut &[u8]) -> Option<bool> {
    let len = usize::try_from(decode_varint(rest).ok()?).ok()?;
    if len > rest.len() {
        return Some(false);
    }
    rest.advance(len);
    Some(true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use envoy_types::pb::envoy::service::discovery::v3::Resource;

    fn response(n: usize) -> DeltaDiscoveryResponse {
        DeltaDiscoveryResponse {
            system_version_info: "v1".into(),
            resources: (0..n)
                .map(|i| Resource {
                    name: format!("r{i}"),
                    version: "1".into(),
                    ..Resource::default()
                })
                .collect(),
            type_url: "t".into(),
            nonce: "n".into(),
            removed_resources: vec!["gone".into()],
            ..DeltaDiscoveryResponse::default()
        }
    }

    #[test]
    fn the_resources_get_exactly_the_room_they_need() {
        for n in [0, 1, 5, 1000] {
            let sent = response(n);
            let got: DeltaDiscoveryResponse = decode(sent.encode_to_vec().into()).unwrap();
            assert_eq!(got, sent);
            assert_eq!(got.resources.capacity(), n);
        }
    }

    #[test]
    fn a_cut_message_is_still_an_error() {
        let bytes = response(10).encode_to_vec();
        for cut in [bytes.len() - 1, bytes.len() / 2, 7] {
            let cut = Bytes::copy_from_slice(&bytes[..cut]);
            assert!(decode::<DeltaDiscoveryResponse>(cut).is_err());
        }
    }

    #[test]
    fn the_state_of_the_world_variant_is_sized_too() {
        let sent = DiscoveryResponse {
            resources: vec![envoy_types::pb::google::protobuf::Any::default(); 3],
            ..DiscoveryResponse::default()
        };
        let got: DiscoveryResponse = decode(sent.encode_to_vec().into()).unwrap();
        assert_eq!(got.resources.capacity(), 3);
    }
}
