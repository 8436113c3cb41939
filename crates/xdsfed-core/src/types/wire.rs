//! A walk over the fields of a protobuf message as they lie in its bytes,
//! skipping every value.
//!
//! Decoders that must not build the whole message at once (an endpoint
//! list sized before it is filled, a route configuration viewed one route
//! at a time) find its fields here and hand each to prost. Every length is
//! checked by prost's own `skip_field` against what is left, groups are
//! followed as prost follows them (to its nesting limit), and a field that
//! cannot be followed ends the walk with prost's error for it.

use prost::DecodeError;
use prost::encoding::{DecodeContext, WireType, decode_key, decode_varint, skip_field};

/// One field of a message as it lies in the bytes.
pub(super) struct Field<'a> {
    /// Its field number.
    pub(super) number: u32,
    /// Its tag and value.
    pub(super) whole: &'a [u8],
    /// The value of a length-delimited field, without its length.
    pub(super) payload: Option<&'a [u8]>,
}

impl<'a> Field<'a> {
    /// The value of this field if it is the length-delimited field
    /// `number` (an embedded message, a string, bytes): a field of that
    /// number with another wire type is not one prost would decode as a
    /// message, so it is not taken for one.
    pub(super) fn message(&self, number: u32) -> Option<&'a [u8]> {
        self.payload.filter(|_| self.number == number)
    }
}

/// The fields of a message in order; an item is an error where a field
/// cannot be followed, after which the walk ends.
pub(super) struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    /// The fields of the message encoded in `bytes`.
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Fields(bytes)
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<Field<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let field = next_field(self.0);
        match &field {
            Ok((_, rest)) => self.0 = rest,
            Err(_) => self.0 = &[],
        }
        Some(field.map(|(field, _)| field))
    }
}

/// The field at the start of `bytes`, and what follows it.
fn next_field(bytes: &[u8]) -> Result<(Field<'_>, &[u8]), DecodeError> {
    let mut rest = bytes;
    let (number, wire_type) = decode_key(&mut rest)?;
    let mut payload = rest;
    if wire_type == WireType::LengthDelimited {
        decode_varint(&mut payload)?;
    }
    skip_field(wire_type, number, &mut rest, DecodeContext::default())?;
    // Skipping only advances, so `rest` is what is left of `bytes` and of
    // `payload` alike: neither subtraction can underflow.
    let (whole, _) = bytes.split_at(bytes.len() - rest.len());
    let payload = (wire_type == WireType::LengthDelimited)
        .then(|| payload.split_at(payload.len() - rest.len()).0);
    Ok((
        Field {
            number,
            whole,
            payload,
        },
        rest,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_found_with_their_values_and_groups_are_followed() {
        let bytes = [
            0x08, 0x96, 0x01, // 1: varint 150
            0x12, 0x02, b'h', b'i', // 2: "hi"
            0x1b, 0x08, 0x01, 0x1c, // 3: a group holding 1: varint 1
            0x25, 1, 2, 3, 4, // 4: fixed32
        ];
        let fields: Vec<_> = Fields::new(&bytes).map(Result::unwrap).collect();
        let numbers: Vec<_> = fields.iter().map(|f| f.number).collect();
        assert_eq!(numbers, [1, 2, 3, 4]);
        assert_eq!(fields[1].message(2), Some(&b"hi"[..]));
        assert_eq!(fields[1].message(3), None);
        assert_eq!(fields[2].whole, &bytes[7..11]);
        assert_eq!(fields[2].payload, None);
        assert_eq!(fields[3].whole, &bytes[11..]);
    }

    #[test]
    fn a_field_that_cannot_be_followed_ends_the_walk_with_prosts_error() {
        let bytes = [0x08, 0x01, 0x12, 0x05, b'h', b'i'];
        let mut fields = Fields::new(&bytes);
        assert!(fields.next().is_some_and(|f| f.is_ok()));
        let error = fields.next().unwrap().err().unwrap();
        assert_eq!(
            error.to_string(),
            "failed to decode Protobuf message: buffer underflow"
        );
        assert!(fields.next().is_none());
        // Field 2 as a varint is not a message numbered 2.
        let bad = [0x10, 0x01];
        let field = Fields::new(&bad).next().unwrap().unwrap();
        assert_eq!(field.message(2), None);
    }
}
