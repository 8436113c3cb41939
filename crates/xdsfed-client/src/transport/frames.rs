//! gRPC's length-prefixed messages (gRPC over HTTP/2: a flag byte, a
//! four-byte big-endian length, the message): read out of a response
//! body's chunks, and written for requests. Sans-IO: chunks in, whole
//! messages out.
//!
//! Each message is read into a buffer of exactly its own length and handed
//! over whole, so no buffer outlives the message it held. tonic's
//! `Streaming` keeps one receive buffer per stream, grown to the largest
//! message seen and kept for the stream's life: after a first response of
//! 100 000 clusters that is 66 MB held beside the resources taken out of
//! it. A message that lies whole within one chunk is sliced from the
//! chunk, not copied.
//!
//! Rules:
//! - a length over the limit ends the stream before any of the message is
//!   buffered (RESOURCE_EXHAUSTED, naming both sizes and the option);
//! - a compressed message ends it (INTERNAL): no compression is offered;
//! - a body that ends inside a message is an error, not a short message.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tonic::Status;

/// The flag byte and the length before each message.
const PREFIX: usize = 5;

/// Splits a response body's chunks into whole messages.
#[derive(Debug)]
pub(super) struct MessageReader {
    max_message_size: usize,
    /// What is left of the last chunk.
    chunk: Bytes,
    prefix: [u8; PREFIX],
    prefix_len: usize,
    /// The message being filled across chunks, and the length it will have.
    partial: Option<(BytesMut, usize)>,
}

impl MessageReader {
    /// A reader that refuses messages over `max_message_size` bytes.
    pub(super) fn new(max_message_size: usize) -> Self {
        MessageReader {
            max_message_size,
            chunk: Bytes::new(),
            prefix: [0; PREFIX],
            prefix_len: 0,
            partial: None,
        }
    }

    /// Takes the body's next chunk. Call it once [`poll_message`]
    /// has returned `None`: the previous chunk is then used up.
    ///
    /// [`poll_message`]: Self::poll_message
    pub(super) fn handle_chunk(&mut self, chunk: Bytes) {
        debug_assert!(self.chunk.is_empty(), "a chunk was left unread");
        self.chunk = chunk;
    }

    /// The next whole message, or `None` until more chunks arrive.
    pub(super) fn poll_message(&mut self) -> Result<Option<Bytes>, Status> {
        loop {
            if let Some((buf, len)) = &mut self.partial {
                let take = (*len - buf.len()).min(self.chunk.len());
                buf.extend_from_slice(&self.chunk[..take]);
                self.chunk.advance(take);
                if buf.len() < *len {
                    return Ok(None);
                }
                return Ok(self.partial.take().map(|(buf, _)| buf.freeze()));
            }
            let take = (PREFIX - self.prefix_len).min(self.chunk.len());
            self.prefix[self.prefix_len..self.prefix_len + take]
                .copy_from_slice(&self.chunk[..take]);
            self.chunk.advance(take);
            self.prefix_len += take;
            if self.prefix_len < PREFIX {
                return Ok(None);
            }
            self.prefix_len = 0;
            let len = self.checked_length()?;
            if self.chunk.len() >= len {
                return Ok(Some(self.chunk.split_to(len)));
            }
            self.partial = Some((BytesMut::with_capacity(len), len));
        }
    }

    /// Whether the body so far stops inside a message.
    pub(super) fn is_inside_message(&self) -> bool {
        self.prefix_len > 0 || self.partial.is_some() || !self.chunk.is_empty()
    }

    /// The length in the prefix just read, once its flag and size pass.
    fn checked_length(&self) -> Result<usize, Status> {
        let [flag, length @ ..] = self.prefix;
        match flag {
            0 => {}
            1 => {
                return Err(Status::internal(
                    "a compressed message, though the client offered no compression",
                ));
            }
            other => {
                return Err(Status::internal(format!(
                    "a message flag of {other}: gRPC defines 0 and 1"
                )));
            }
        }
        let len = u32::from_be_bytes(length) as usize;
        if len > self.max_message_size {
            return Err(Status::resource_exhausted(over_limit(
                "a response",
                len,
                self.max_message_size,
            )));
        }
        Ok(len)
    }
}

/// Appends `message` to `buf` as one length-prefixed gRPC message, unless
/// it is over `max_message_size` bytes.
pub(super) fn encode_into<M: prost::Message>(
    message: &M,
    max_message_size: usize,
    buf: &mut BytesMut,
) -> Result<(), Status> {
    let len = message.encoded_len();
    let prefix_len = u32::try_from(len)
        .ok()
        .filter(|_| len <= max_message_size)
        .ok_or_else(|| {
            Status::resource_exhausted(over_limit("a request", len, max_message_size))
        })?;
    buf.reserve(PREFIX + len);
    buf.put_u8(0);
    buf.put_u32(prefix_len);
    message.encode_raw(buf);
    Ok(())
}

/// The error of a message over the limit, in the client's words.
fn over_limit(what: &str, len: usize, limit: usize) -> String {
    format!(
        "{what} of {len} bytes is over the message size limit of {limit} bytes \
         (TransportOptions::max_message_size); the stream was ended"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn framed(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            out.push(0);
            out.extend_from_slice(&(p.len() as u32).to_be_bytes());
            out.extend_from_slice(p);
        }
        out
    }

    /// Feeds `body` in chunks of `size` bytes, collecting the messages.
    fn read_in_chunks(body: &[u8], size: usize) -> (Vec<Bytes>, MessageReader) {
        let mut reader = MessageReader::new(1024);
        let mut messages = Vec::new();
        for chunk in body.chunks(size) {
            reader.handle_chunk(Bytes::copy_from_slice(chunk));
            while let Some(m) = reader.poll_message().unwrap() {
                messages.push(m);
            }
        }
        (messages, reader)
    }

    #[test]
    fn messages_are_whole_however_the_body_is_cut() {
        let payloads: [&[u8]; 4] = [b"first", b"", b"a longer third message", b"4"];
        let body = framed(&payloads);
        for size in 1..=body.len() {
            let (messages, reader) = read_in_chunks(&body, size);
            assert_eq!(messages, payloads, "chunks of {size}");
            assert!(!reader.is_inside_message(), "chunks of {size}");
        }
    }

    #[test]
    fn a_message_split_across_chunks_gets_a_buffer_of_its_own_length() {
        let payload = vec![7u8; 300];
        let body = framed(&[&payload]);
        let (messages, _) = read_in_chunks(&body, 64);
        assert_eq!(messages.len(), 1);
        // Frozen from a buffer made with exactly this capacity: turning it
        // back into a mutable buffer shows the capacity.
        let back = BytesMut::from(messages.into_iter().next().unwrap());
        assert_eq!(back.capacity(), 300);
    }

    #[test]
    fn a_body_cut_inside_a_message_is_noticed() {
        let body = framed(&[b"whole", b"cut short"]);
        for cut in [body.len() - 1, 10 + 2, 10 + 5] {
            let (messages, reader) = read_in_chunks(&body[..cut], 3);
            assert_eq!(messages.len(), 1, "cut at {cut}");
            assert!(reader.is_inside_message(), "cut at {cut}");
        }
    }

    #[test]
    fn a_length_over_the_limit_is_refused_before_anything_is_buffered() {
        let mut reader = MessageReader::new(16);
        let mut prefix = vec![0];
        prefix.extend_from_slice(&u32::MAX.to_be_bytes());
        reader.handle_chunk(Bytes::from(prefix));
        let status = reader.poll_message().unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert!(
            status.message().starts_with(
                "a response of 4294967295 bytes is over the message size limit of 16 bytes"
            ),
            "{}",
            status.message()
        );
        assert!(reader.partial.is_none());
    }

    #[test]
    fn compressed_and_unknown_flags_are_refused() {
        for flag in [1u8, 2] {
            let mut reader = MessageReader::new(16);
            reader.handle_chunk(Bytes::from(vec![flag, 0, 0, 0, 1, 9]));
            let status = reader.poll_message().unwrap_err();
            assert_eq!(status.code(), Code::Internal, "flag {flag}");
        }
    }

    #[test]
    fn requests_are_prefixed_and_bounded() {
        let message = prost_types::Duration {
            seconds: 3,
            nanos: 0,
        };
        let mut bytes = BytesMut::new();
        encode_into(&message, 64, &mut bytes).unwrap();
        let mut reader = MessageReader::new(64);
        reader.handle_chunk(bytes.freeze());
        let payload = reader.poll_message().unwrap().unwrap();
        assert_eq!(
            <prost_types::Duration as prost::Message>::decode(payload).unwrap(),
            message
        );
        let status = encode_into(&message, 1, &mut BytesMut::new()).unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert!(status.message().starts_with("a request of 2 bytes"));
    }
}
