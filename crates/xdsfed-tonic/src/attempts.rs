//! The driver of one call under its route's [`CallPolicy`]: the deadline
//! (gRFC A31) and the attempts (gRFC A44 over A6). The decisions are in
//! `call_policy.rs` and `throttle.rs`; this file only sends, waits and
//! sleeps.
//!
//! ```text
//! request ─► deadline = min(grpc-timeout, route's max_stream_duration)
//!   loop: attempt (body replayed) ─► balancer ─► endpoint
//!         response headers without grpc-status ─► committed: returned, body under the deadline
//!         trailers-only status or transport error ─► retryable? attempts left? bucket allows?
//!                                                    body replayable? ─► back off, again
//!   deadline passes anywhere ─► DEADLINE_EXCEEDED
//! ```
//!
//! A call is committed, and never retried, once response headers arrive
//! without a status: as in gRPC, only a trailers-only answer (or a failure
//! before any answer) is retried. `grpc-retry-pushback-ms` from the server
//! replaces the backoff; a malformed or negative one stops retries (A6).

use std::future::Future as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;
use http_body::{Body, Frame};
use tokio::time::{Instant, Sleep};
use tonic::Code;

use crate::balancer::ClusterBalancer;
use crate::call_policy::{CallPolicy, RetryPolicy, format_grpc_timeout, parse_grpc_timeout};
use crate::endpoint::{Request, Response};
use crate::error::BoxError;
use crate::replay::Replayable;
use crate::rng;
use crate::throttle::RetryBucket;

const GRPC_TIMEOUT: &str = "grpc-timeout";
const PUSHBACK: &str = "grpc-retry-pushback-ms";

/// Sends `request` to `balancer` as `policy` says.
pub(crate) async fn send(
    balancer: Arc<ClusterBalancer>,
    policy: &CallPolicy,
    bucket: Option<&RetryBucket>,
    mut request: Request,
) -> Result<Response, BoxError> {
    let application = request
        .headers()
        .get(GRPC_TIMEOUT)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_grpc_timeout);
    let timeout = policy.timeout(application);
    let deadline = timeout.map(|t| Instant::now() + t);
    let exceeded = || deadline_exceeded(timeout, application);
    if let Some(timeout) = timeout {
        set_timeout(&mut request, timeout);
    }
    let attempts = async {
        match &policy.retry {
            None => balancer.send(request).await,
            Some(retry) => {
                Attempts::new(&balancer, retry, bucket, deadline, request)
                    .run()
                    .await
            }
        }
    };
    let Some(deadline) = deadline else {
        return attempts.await;
    };
    let response = match tokio::time::timeout_at(deadline, attempts).await {
        // The endpoint (or its transport) may enforce the `grpc-timeout`
        // sent to it first, failing in its own words: past the deadline,
        // every failure is the deadline's.
        Ok(Ok(response))
            if Instant::now() >= deadline
                && trailers_only_status(&response).is_some_and(|c| c != Code::Ok) =>
        {
            return Err(exceeded().into());
        }
        Ok(Ok(response)) => response,
        Ok(Err(_)) | Err(_) if Instant::now() >= deadline => return Err(exceeded().into()),
        Ok(Err(error)) => return Err(error),
        Err(_) => return Err(exceeded().into()),
    };
    Ok(response.map(|body| {
        tonic::body::Body::new(DeadlineBody {
            body,
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
            status: Some(exceeded()),
        })
    }))
}

fn deadline_exceeded(timeout: Option<Duration>, application: Option<Duration>) -> tonic::Status {
    let whose = if application == timeout {
        "the call's deadline"
    } else {
        "the route's max_stream_duration"
    };
    tonic::Status::deadline_exceeded(format!(
        "{whose} of {:?} passed",
        timeout.unwrap_or_default()
    ))
}

/// Tells the endpoint how long is left, as gRPC propagates a deadline.
fn set_timeout(request: &mut Request, timeout: Duration) {
    if let Ok(value) = HeaderValue::from_str(&format_grpc_timeout(timeout)) {
        request.headers_mut().insert(GRPC_TIMEOUT, value);
    }
}

/// One call's attempts under a retry policy.
struct Attempts<'a> {
    balancer: &'a ClusterBalancer,
    retry: &'a RetryPolicy,
    bucket: Option<&'a RetryBucket>,
    deadline: Option<Instant>,
    parts: http::request::Parts,
    body: Replayable,
}

/// How one attempt ended.
enum Outcome {
    /// Response headers without a status: the call is committed.
    Committed(Response),
    /// A status or a transport error; `pushback` is the server's wish.
    Failed {
        code: Code,
        result: Result<Response, BoxError>,
        pushback: Option<Option<Duration>>,
    },
}

impl<'a> Attempts<'a> {
    fn new(
        balancer: &'a ClusterBalancer,
        retry: &'a RetryPolicy,
        bucket: Option<&'a RetryBucket>,
        deadline: Option<Instant>,
        request: Request,
    ) -> Self {
        let (parts, body) = request.into_parts();
        Self {
            balancer,
            retry,
            bucket,
            deadline,
            parts,
            body: Replayable::new(body),
        }
    }

    async fn run(mut self) -> Result<Response, BoxError> {
        let mut attempt: u32 = 1;
        loop {
            match self.attempt().await {
                Outcome::Committed(response) => {
                    if let Some(bucket) = self.bucket {
                        bucket.handle_success();
                    }
                    return Ok(response);
                }
                Outcome::Failed {
                    code,
                    result,
                    pushback,
                } => {
                    let Some(wait) = self.retry_after(code, attempt, pushback) else {
                        return result;
                    };
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
            }
        }
    }

    /// The wait before the next attempt, or `None` when the call ends here.
    fn retry_after(
        &self,
        code: Code,
        attempt: u32,
        pushback: Option<Option<Duration>>,
    ) -> Option<Duration> {
        if !self.retry.retries_on(code) {
            return None;
        }
        let bucket_allows = self
            .bucket
            .is_none_or(RetryBucket::handle_retryable_failure);
        if !bucket_allows || attempt >= self.retry.max_attempts || !self.body.can_replay() {
            return None;
        }
        let wait = match pushback {
            Some(pushback) => pushback?,
            None => self.retry.backoff(attempt, rng::next_u64()),
        };
        let fits = self
            .deadline
            .is_none_or(|deadline| Instant::now() + wait < deadline);
        fits.then_some(wait)
    }

    async fn attempt(&mut self) -> Outcome {
        let mut request = Request::new(self.body.attempt());
        *request.method_mut() = self.parts.method.clone();
        *request.uri_mut() = self.parts.uri.clone();
        *request.version_mut() = self.parts.version;
        *request.headers_mut() = self.parts.headers.clone();
        *request.extensions_mut() = self.parts.extensions.clone();
        if let Some(deadline) = self.deadline {
            set_timeout(
                &mut request,
                deadline.saturating_duration_since(Instant::now()),
            );
        }
        match self.balancer.send(request).await {
            Ok(response) => match trailers_only_status(&response) {
                None | Some(Code::Ok) => Outcome::Committed(response),
                Some(code) => Outcome::Failed {
                    code,
                    pushback: pushback(&response),
                    result: Ok(response),
                },
            },
            Err(error) => Outcome::Failed {
                code: error
                    .downcast_ref::<tonic::Status>()
                    .map_or(Code::Unavailable, tonic::Status::code),
                result: Err(error),
                pushback: None,
            },
        }
    }
}

/// The status of a trailers-only response (`grpc-status` in its headers).
fn trailers_only_status(response: &Response) -> Option<Code> {
    let value = response.headers().get("grpc-status")?;
    let code: i32 = value.to_str().ok()?.trim().parse().ok()?;
    Some(Code::from_i32(code))
}

/// `grpc-retry-pushback-ms`: `None` when absent, `Some(None)` when it says
/// not to retry (negative or malformed, gRFC A6).
fn pushback(response: &Response) -> Option<Option<Duration>> {
    let value = response.headers().get(PUSHBACK)?;
    let ms = value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok());
    Some(ms.map(Duration::from_millis))
}

/// A response body that ends with DEADLINE_EXCEEDED once the call's
/// deadline passes.
struct DeadlineBody {
    body: tonic::body::Body,
    sleep: Pin<Box<Sleep>>,
    status: Option<tonic::Status>,
}

impl Body for DeadlineBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if this.sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(this.status.take().map(Err));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response_with(headers: &[(&'static str, &'static str)]) -> Response {
        let mut response = Response::new(tonic::body::Body::empty());
        for (name, value) in headers {
            response
                .headers_mut()
                .insert(*name, HeaderValue::from_static(value));
        }
        response
    }

    /// gRFC A6: a trailers-only response carries its status in the headers;
    /// headers without one commit the call.
    #[test]
    fn trailers_only_status_is_read_from_response_headers() {
        assert_eq!(
            trailers_only_status(&response_with(&[("grpc-status", "14")])),
            Some(Code::Unavailable)
        );
        assert_eq!(trailers_only_status(&response_with(&[])), None);
    }

    /// gRFC A6: pushback replaces the backoff; a malformed or negative one
    /// means do not retry.
    #[test]
    fn pushback_header_gives_the_wait_or_forbids_the_retry() {
        let r = |v| pushback(&response_with(&[(PUSHBACK, v)]));
        assert_eq!(r("150"), Some(Some(Duration::from_millis(150))));
        assert_eq!(r("-1"), Some(None));
        assert_eq!(r("soon"), Some(None));
        assert_eq!(pushback(&response_with(&[])), None);
    }
}
