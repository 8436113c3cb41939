//! How a call on an endpoint ended, for outlier detection (gRFC A50): its
//! gRPC status, read from a trailers-only response's headers or from the
//! trailers at the end of the body. OK counts as a success, any other
//! status as a failure; a call dropped before its status counts as
//! neither.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame};

use crate::endpoint::{EndpointStats, Response};

/// Whether `headers` carry an OK status; `None` when they carry none.
fn status_ok(headers: &HeaderMap) -> Option<bool> {
    headers.get("grpc-status").map(|v| v.as_bytes() == b"0")
}

/// `response`, counted in `stats` once its status is known.
pub(crate) fn counted(response: Response, stats: Arc<EndpointStats>) -> Response {
    if let Some(ok) = status_ok(response.headers()) {
        stats.record_call(ok);
        return response;
    }
    response.map(|body| {
        tonic::body::Body::new(CountedBody {
            body,
            stats: Some(stats),
        })
    })
}

/// A response body that counts its call when the trailers pass.
struct CountedBody {
    body: tonic::body::Body,
    /// Taken when the call is counted.
    stats: Option<Arc<EndpointStats>>,
}

impl Body for CountedBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        let outcome = match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                frame.trailers_ref().map(|t| status_ok(t) == Some(true))
            }
            Poll::Ready(Some(Err(_))) | Poll::Ready(None) => Some(false),
            Poll::Pending => None,
        };
        if let Some(ok) = outcome
            && let Some(stats) = self.stats.take()
        {
            stats.record_call(ok);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
