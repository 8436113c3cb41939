//! A request body that can be sent again: what the first attempt reads from
//! the application is kept, up to a bound, so a retry sends the same
//! messages (gRPC buffers a call's messages for retries the same way).
//!
//! Attempts are not held back: each one streams as the application writes,
//! so client- and bidi-streaming calls flow as before. A retry replays the
//! kept frames, then reads on from the application where the last attempt
//! stopped. Once a call has written more than [`RETRY_BUFFER`] bytes, or
//! trailers, nothing is kept any more and the call can no longer be retried.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};

use crate::error::BoxError;

/// How many request bytes one call keeps for retries (gRPC's default
/// per-call retry buffer).
pub(crate) const RETRY_BUFFER: usize = 256 * 1024;

/// The application's body and what was kept of it.
struct Source {
    body: Pin<Box<tonic::body::Body>>,
    /// The data frames read so far, while the call is still replayable.
    kept: Vec<Bytes>,
    kept_bytes: usize,
    /// Frames read from the application in all.
    frames_read: usize,
    /// Something was not kept: no attempt can start over.
    spilled: bool,
    ended: bool,
}

/// The shared source of a call's attempts.
#[derive(Clone)]
pub(crate) struct Replayable {
    source: Arc<Mutex<Source>>,
}

impl std::fmt::Debug for Replayable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replayable").finish_non_exhaustive()
    }
}

impl Replayable {
    pub(crate) fn new(body: tonic::body::Body) -> Self {
        Self {
            source: Arc::new(Mutex::new(Source {
                body: Box::pin(body),
                kept: Vec::new(),
                kept_bytes: 0,
                frames_read: 0,
                spilled: false,
                ended: false,
            })),
        }
    }

    /// A body for the next attempt, starting from the first frame.
    pub(crate) fn attempt(&self) -> tonic::body::Body {
        tonic::body::Body::new(AttemptBody {
            source: Arc::clone(&self.source),
            next: 0,
        })
    }

    /// Whether a new attempt could still send the whole body.
    pub(crate) fn can_replay(&self) -> bool {
        !self.lock().spilled
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Source> {
        lock(&self.source)
    }
}

fn lock(source: &Mutex<Source>) -> std::sync::MutexGuard<'_, Source> {
    // The frames are plain data: a panic cannot leave them torn.
    source.lock().unwrap_or_else(|e| e.into_inner())
}

/// One attempt's view of the body: its place in the frames.
struct AttemptBody {
    source: Arc<Mutex<Source>>,
    next: usize,
}

impl Body for AttemptBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let next = self.next;
        let mut source = lock(&self.source);
        if next < source.frames_read {
            let Some(frame) = source.kept.get(next).cloned().filter(|_| !source.spilled) else {
                return Poll::Ready(Some(Err(
                    "request body is no longer kept for a retry".into()
                )));
            };
            drop(source);
            self.next += 1;
            return Poll::Ready(Some(Ok(Frame::data(frame))));
        }
        if source.ended {
            return Poll::Ready(None);
        }
        let polled = source.body.as_mut().poll_frame(cx);
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                source.frames_read += 1;
                match frame.data_ref() {
                    Some(data) if !source.spilled => keep(&mut source, data.clone()),
                    Some(_) => {}
                    None => spill(&mut source),
                }
                drop(source);
                self.next += 1;
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                spill(&mut source);
                Poll::Ready(Some(Err(error.into())))
            }
            Poll::Ready(None) => {
                source.ended = true;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

fn keep(source: &mut Source, data: Bytes) {
    if source.kept_bytes.saturating_add(data.len()) > RETRY_BUFFER {
        spill(source);
    } else {
        source.kept_bytes += data.len();
        source.kept.push(data);
    }
}

/// Stops keeping frames: the memory goes, and so does replay.
fn spill(source: &mut Source) {
    source.spilled = true;
    source.kept = Vec::new();
    source.kept_bytes = 0;
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;

    fn body(chunks: Vec<&'static [u8]>) -> tonic::body::Body {
        let frames = chunks
            .into_iter()
            .map(|c| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from_static(c))));
        tonic::body::Body::new(http_body_util::StreamBody::new(futures::stream::iter(
            frames,
        )))
    }

    async fn read(body: tonic::body::Body) -> Result<Vec<u8>, tonic::Status> {
        Ok(body.collect().await?.to_bytes().to_vec())
    }

    /// A retry sends the same bytes as the first attempt.
    #[tokio::test]
    async fn request_body_is_replayed_for_a_second_attempt() {
        let replay = Replayable::new(body(vec![b"ab", b"cd"]));
        assert_eq!(read(replay.attempt()).await.unwrap(), b"abcd");
        assert!(replay.can_replay());
        assert_eq!(read(replay.attempt()).await.unwrap(), b"abcd");
    }

    /// A body larger than the retry buffer is sent once, and not replayed.
    #[tokio::test]
    async fn request_body_over_the_retry_buffer_is_not_replayed() {
        static BIG: [u8; RETRY_BUFFER] = [7; RETRY_BUFFER];
        let replay = Replayable::new(body(vec![b"x", &BIG]));
        assert_eq!(
            read(replay.attempt()).await.unwrap().len(),
            RETRY_BUFFER + 1
        );
        assert!(!replay.can_replay());
        assert!(read(replay.attempt()).await.is_err());
    }
}
