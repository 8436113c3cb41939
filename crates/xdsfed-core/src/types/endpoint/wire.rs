//! An `LbEndpoint` of the common shape, read straight from its bytes.
//!
//! Nearly every endpoint a server sends is a socket address and a port,
//! perhaps with a health status and a weight:
//!
//! ```text
//! LbEndpoint
//! ├─ 1 endpoint: Endpoint
//! │  └─ 1 address: Address
//! │     └─ 1 socket_address: SocketAddress
//! │        ├─ 1 protocol       varint (not viewed)
//! │        ├─ 2 address        string
//! │        └─ 3 port_value     varint
//! ├─ 2 health_status           varint
//! └─ 4 load_balancing_weight: UInt32Value
//!    └─ 1 value                varint
//! ```
//!
//! LEDS brings such messages by the hundred thousand. Decoding each into
//! prost's structs, to validate it and read four values out, costs an
//! allocation per level and per string; here the values are read in one
//! pass over the bytes that allocates nothing.
//!
//! Rule: the walk answers only where it is sure to agree with the full
//! decode and validation: a valid endpoint of exactly this shape, each
//! field at most once, in any order. Anything else is `None` and left to
//! the full path, which decides and names the error: another field, a
//! known field with another wire type, a field repeated (prost would merge
//! the sub-messages or keep the last value), a missing address or port, an
//! empty address, a port above 65535, a weight of 0, a string that is not
//! UTF-8, bytes that do not parse. Values are read as prost reads them: a
//! varint is at most ten bytes, the tenth holding bit 63 alone, and a
//! 32-bit field keeps a varint's low 32 bits.
//!
//! (Not to be confused with `types::wire`, which walks any message's
//! fields with prost's own primitives, to hand each to prost.)

use std::ops::Range;

pub(super) mod assignment;

/// What the view of an endpoint of the common shape holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Common<'a> {
    /// `endpoint.address.socket_address.address`, not empty.
    pub(super) address: &'a str,
    /// Where the address lies in the bytes.
    pub(super) address_at: Range<usize>,
    /// `endpoint.address.socket_address.port_value`.
    pub(super) port: u16,
    /// `load_balancing_weight`, 1 when unset, never 0.
    pub(super) weight: u32,
    /// `health_status` as sent.
    pub(super) health_status: i32,
}

/// A field's key: its number and wire type, as they lead it in the bytes.
const fn key(number: u64, wire_type: u64) -> u64 {
    (number << 3) | wire_type
}
const VARINT: u64 = 0;
const DELIMITED: u64 = 2;

/// `LbEndpoint.endpoint`, `.health_status`, `.load_balancing_weight`.
const ENDPOINT: u64 = key(1, DELIMITED);
const HEALTH_STATUS: u64 = key(2, VARINT);
const LOAD_BALANCING_WEIGHT: u64 = key(4, DELIMITED);
/// `Endpoint.address`, and `Address.socket_address`: both field 1.
const ADDRESS: u64 = key(1, DELIMITED);
const SOCKET_ADDRESS: u64 = key(1, DELIMITED);
/// `SocketAddress.protocol`, `.address`, `.port_value`.
const PROTOCOL: u64 = key(1, VARINT);
const HOST: u64 = key(2, DELIMITED);
const PORT_VALUE: u64 = key(3, VARINT);
/// `google.protobuf.UInt32Value.value`.
const VALUE: u64 = key(1, VARINT);

/// The endpoint encoded in `bytes`, when it is valid and of the common
/// shape; `None` for anything else.
pub(super) fn lb_endpoint(bytes: &[u8]) -> Option<Common<'_>> {
    lb_endpoint_in(Cursor::new(bytes))
}

/// The endpoint encoded in `message`'s bytes (see [`lb_endpoint`]); its
/// address's range is a range of the whole buffer `message` walks.
pub(super) fn lb_endpoint_in(mut message: Cursor<'_>) -> Option<Common<'_>> {
    let mut seen = Seen::default();
    let mut socket = None;
    let mut health_status = 0;
    let mut weight = 1;
    while !message.is_empty() {
        let key = message.key(&mut seen)?;
        match key {
            ENDPOINT => socket = Some(endpoint(message.delimited()?)?),
            // An enum: prost keeps the low 32 bits, known value or not.
            HEALTH_STATUS => health_status = message.varint()? as i32,
            LOAD_BALANCING_WEIGHT => weight = uint32_value(message.delimited()?)?,
            _ => return None,
        }
    }
    let ((address, address_at), port) = socket?;
    // A weight of 0 is refused by validation, which names it.
    (weight != 0).then_some(Common {
        address,
        address_at,
        port,
        weight,
        health_status,
    })
}

/// An `Endpoint` holding only an `Address` holding only a socket address:
/// that socket address's host and port.
fn endpoint(endpoint: Cursor<'_>) -> Option<(Text<'_>, u16)> {
    let address = endpoint.sole(ADDRESS)?;
    socket_address(address.sole(SOCKET_ADDRESS)?)
}

/// A `SocketAddress`'s host, not empty, and port, at most 65535.
fn socket_address(mut socket: Cursor<'_>) -> Option<(Text<'_>, u16)> {
    let mut seen = Seen::default();
    let mut host = None;
    let mut port = None;
    while !socket.is_empty() {
        match socket.key(&mut seen)? {
            // An enum the view does not show: any value decodes.
            PROTOCOL => {
                socket.varint()?;
            }
            HOST => host = Some(socket.string()?),
            PORT_VALUE => port = Some(socket.varint()? as u32),
            _ => return None,
        }
    }
    let host = host.filter(|(h, _)| !h.is_empty())?;
    let port = u16::try_from(port?).ok()?;
    Some((host, port))
}

/// A `UInt32Value`'s value: 0 when the message is empty.
pub(super) fn uint32_value(mut wrapper: Cursor<'_>) -> Option<u32> {
    let mut seen = Seen::default();
    let mut value = 0;
    while !wrapper.is_empty() {
        match wrapper.key(&mut seen)? {
            VALUE => value = wrapper.varint()? as u32,
            _ => return None,
        }
    }
    Some(value)
}

/// The keys a message has shown so far, to refuse a second of any: prost
/// merges a repeated sub-message and keeps a repeated scalar's last value,
/// which the walk does not follow. Every key it knows is below 64.
#[derive(Default)]
pub(super) struct Seen(u64);

impl Seen {
    /// `Some` the first time `key` is shown, `None` after (and for a key
    /// above 63, which no field the walk knows has).
    fn first(&mut self, key: u64) -> Option<()> {
        let bit = 1u64.checked_shl(u32::try_from(key).ok()?)?;
        let first = self.0 & bit == 0;
        self.0 |= bit;
        first.then_some(())
    }
}

/// A string of the bytes, and where it lies in them.
pub(super) type Text<'a> = (&'a str, Range<usize>);

/// A position in one message's bytes, within a buffer that may hold more
/// around it (the enclosing messages): ranges it gives are of the buffer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cursor<'a> {
    buffer: &'a [u8],
    at: usize,
    end: usize,
}

impl<'a> Cursor<'a> {
    /// The message that is the whole of `buffer`.
    pub(super) fn new(buffer: &'a [u8]) -> Self {
        Cursor {
            buffer,
            at: 0,
            end: buffer.len(),
        }
    }

    /// Whether the message has no more bytes.
    pub(super) fn is_empty(&self) -> bool {
        self.at >= self.end
    }

    fn byte(&mut self) -> Option<u8> {
        if self.is_empty() {
            return None;
        }
        let byte = *self.buffer.get(self.at)?;
        self.at += 1;
        Some(byte)
    }

    /// A varint as prost reads it: seven bits a byte, low bits first, at
    /// most ten bytes, the tenth holding bit 63 alone (more would
    /// overflow 64 bits, which prost refuses).
    pub(super) fn varint(&mut self) -> Option<u64> {
        let mut value = 0;
        for i in 0..10 {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                return (i < 9 || byte < 2).then_some(value);
            }
        }
        None
    }

    /// The next field's key, `None` if the message showed it before.
    pub(super) fn key(&mut self, seen: &mut Seen) -> Option<u64> {
        let key = self.varint()?;
        seen.first(key)?;
        Some(key)
    }

    /// A length-delimited value: the message (or string) it holds, which
    /// must end within this one.
    pub(super) fn delimited(&mut self) -> Option<Cursor<'a>> {
        let len = usize::try_from(self.varint()?).ok()?;
        let end = self.at.checked_add(len).filter(|&end| end <= self.end)?;
        let inner = Cursor {
            buffer: self.buffer,
            at: self.at,
            end,
        };
        self.at = end;
        Some(inner)
    }

    /// A string and where it lies in the buffer, `None` unless it is UTF-8
    /// (prost refuses a string that is not).
    pub(super) fn string(&mut self) -> Option<Text<'a>> {
        let value = self.delimited()?;
        let range = value.at..value.end;
        let text = std::str::from_utf8(self.buffer.get(range.clone())?).ok()?;
        Some((text, range))
    }

    /// The message held by the one field of this message, which must be
    /// the length-delimited field `key`.
    fn sole(mut self, key: u64) -> Option<Cursor<'a>> {
        if self.varint()? != key {
            return None;
        }
        let inner = self.delimited()?;
        self.is_empty().then_some(inner)
    }
}

#[cfg(test)]
mod tests;
