//! One bidirectional gRPC call on a tonic [`Channel`], with its messages
//! framed by [`frames`](super::frames) instead of tonic's `Streaming`, so
//! that a large response's buffer is freed once the response is decoded.
//!
//! tonic still owns the connection (HTTP/2, TLS, keepalive, the user
//! agent); this writes the request's headers as tonic's client does and
//! reads the response's status as tonic does: from the headers of a
//! trailers-only answer, else from the trailers, and from the HTTP status
//! when there is no gRPC one.

use std::future::poll_fn;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body as _, Frame};
use tokio::sync::mpsc;
use tonic::codegen::Service as _;
use tonic::codegen::http::header::{CONTENT_TYPE, TE};
use tonic::codegen::http::{self, HeaderMap, HeaderValue, Method, StatusCode, Uri, Version};
use tonic::transport::Channel;
use tonic::{Code, Status};

use super::frames::{MessageReader, encode_into};

/// Opens the call to `path` on `channel`: `requests` are its messages, in
/// order, until their sender is dropped. Resolves once the server answers
/// with its headers.
pub(crate) async fn open<Req, Resp>(
    mut channel: Channel,
    path: &'static str,
    headers: HeaderMap,
    requests: mpsc::UnboundedReceiver<Req>,
    max_message_size: usize,
) -> Result<Messages<Resp>, Status>
where
    Req: prost::Message + 'static,
    Resp: super::presized::Resources,
{
    let body = RequestBody {
        requests,
        max_message_size,
    };
    let mut request = http::Request::new(tonic::body::Body::new(body));
    *request.method_mut() = Method::POST;
    *request.version_mut() = Version::HTTP_2;
    *request.uri_mut() = Uri::from_static(path);
    *request.headers_mut() = headers;
    let grpc = request.headers_mut();
    grpc.insert(TE, HeaderValue::from_static("trailers"));
    grpc.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    poll_fn(|cx| channel.poll_ready(cx))
        .await
        .map_err(|e| Status::unknown(format!("Service was not ready: {e}")))?;
    let response = channel
        .call(request)
        .await
        .map_err(|e| Status::from_error(Box::new(e)))?;
    Messages::of(response, max_message_size)
}

/// The requests of a call, encoded as the body asks for them: those
/// already waiting go out together in one frame, up to
/// [`COALESCE_LIMIT`] bytes, as tonic's encoder sends them.
struct RequestBody<Req> {
    requests: mpsc::UnboundedReceiver<Req>,
    max_message_size: usize,
}

/// The size past which waiting requests are not added to a frame.
const COALESCE_LIMIT: usize = 32 * 1024;

impl<Req: prost::Message> http_body::Body for RequestBody<Req> {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let max = self.max_message_size;
        let Some(first) = std::task::ready!(self.requests.poll_recv(cx)) else {
            return Poll::Ready(None);
        };
        let mut buf = BytesMut::new();
        let mut encoded = encode_into(&first, max, &mut buf);
        while encoded.is_ok() && buf.len() < COALESCE_LIMIT {
            match self.requests.try_recv() {
                Ok(next) => encoded = encode_into(&next, max, &mut buf),
                Err(_) => break,
            }
        }
        Poll::Ready(Some(encoded.map(|()| Frame::data(buf.freeze()))))
    }
}

/// The responses of an open call.
pub(crate) struct Messages<Resp> {
    body: tonic::body::Body,
    reader: MessageReader,
    trailers: Option<HeaderMap>,
    /// The call's status came with its headers: there are no messages.
    trailers_only: bool,
    /// The end was reported; there is nothing more.
    ended: bool,
    _responses: PhantomData<fn() -> Resp>,
}

impl<Resp: super::presized::Resources> Messages<Resp> {
    /// The messages of `response`, or the status it ended the call with.
    fn of(response: http::Response<tonic::body::Body>, max: usize) -> Result<Self, Status> {
        let (parts, body) = response.into_parts();
        let trailers_only = match Status::from_header_map(&parts.headers) {
            Some(status) if status.code() != Code::Ok => return Err(status),
            Some(_) => true,
            None if parts.status != StatusCode::OK => return Err(http_status(parts.status)),
            None => false,
        };
        Ok(Messages {
            body,
            reader: MessageReader::new(max),
            trailers: None,
            trailers_only,
            ended: false,
            _responses: PhantomData,
        })
    }

    /// The next response; `None` once the server ended the call with OK.
    pub(crate) async fn message(&mut self) -> Result<Option<Resp>, Status> {
        loop {
            if let Some(bytes) = self.reader.poll_message()? {
                let message = super::presized::decode::<Resp>(bytes)
                    .map_err(|e| Status::internal(e.to_string()))?;
                message.check().map_err(Status::internal)?;
                return Ok(Some(message));
            }
            if self.ended {
                return Ok(None);
            }
            let frame = poll_fn(|cx| Pin::new(&mut self.body).poll_frame(cx)).await;
            match frame {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => self.reader.handle_chunk(data),
                    Err(frame) => self.trailers = frame.into_trailers().ok(),
                },
                Some(Err(status)) => {
                    self.ended = true;
                    return Err(status);
                }
                None => {
                    self.ended = true;
                    return self.end().map(|()| None);
                }
            }
        }
    }

    /// The call's status once its body has ended.
    fn end(&self) -> Result<(), Status> {
        if self.reader.is_inside_message() {
            return Err(Status::internal("the stream ended inside a message"));
        }
        if self.trailers_only {
            return Ok(());
        }
        match self.trailers.as_ref().and_then(Status::from_header_map) {
            Some(status) if status.code() == Code::Ok => Ok(()),
            Some(status) => Err(status),
            None => Err(Status::unknown(
                "the stream ended without a grpc-status (cut short on the way?)",
            )),
        }
    }
}

/// The status of an answer with no gRPC status, from its HTTP status
/// (gRPC's http-grpc-status-mapping).
fn http_status(status: StatusCode) -> Status {
    let code = match status {
        StatusCode::BAD_REQUEST => Code::Internal,
        StatusCode::UNAUTHORIZED => Code::Unauthenticated,
        StatusCode::FORBIDDEN => Code::PermissionDenied,
        StatusCode::NOT_FOUND => Code::Unimplemented,
        StatusCode::TOO_MANY_REQUESTS
        | StatusCode::BAD_GATEWAY
        | StatusCode::SERVICE_UNAVAILABLE
        | StatusCode::GATEWAY_TIMEOUT => Code::Unavailable,
        _ => Code::Unknown,
    };
    Status::new(code, format!("HTTP status {status} without a gRPC status"))
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use prost_types::Duration;

    /// A response body of the given frames, in order.
    struct Frames(VecDeque<Frame<Bytes>>);

    impl http_body::Body for Frames {
        type Data = Bytes;
        type Error = Status;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
            Poll::Ready(self.0.pop_front().map(Ok))
        }
    }

    fn response(
        status: StatusCode,
        headers: &[(&'static str, &'static str)],
        frames: Vec<Frame<Bytes>>,
    ) -> http::Response<tonic::body::Body> {
        let mut response = http::Response::new(tonic::body::Body::new(Frames(frames.into())));
        *response.status_mut() = status;
        for (name, value) in headers {
            response
                .headers_mut()
                .insert(*name, HeaderValue::from_static(value));
        }
        response
    }

    fn trailers(pairs: &[(&'static str, &'static str)]) -> Frame<Bytes> {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        Frame::trailers(map)
    }

    /// A message with no list of resources to size.
    impl super::super::presized::Resources for Duration {
        fn reserve_resources(&mut self, _: usize) {}
        fn resources_capacity(&self) -> usize {
            0
        }
    }

    fn seconds(n: i64) -> Duration {
        Duration {
            seconds: n,
            nanos: 0,
        }
    }

    /// Two messages cut across three data frames.
    fn two_messages_in_three_frames() -> Vec<Frame<Bytes>> {
        let mut body = BytesMut::new();
        encode_into(&seconds(1), 64, &mut body).unwrap();
        encode_into(&seconds(2), 64, &mut body).unwrap();
        let (a, rest) = body.split_at(3);
        let (b, c) = rest.split_at(4);
        [a, b, c]
            .into_iter()
            .map(|part| Frame::data(Bytes::copy_from_slice(part)))
            .collect()
    }

    async fn read_all(mut messages: Messages<Duration>) -> (Vec<i64>, Result<(), Status>) {
        let mut read = Vec::new();
        loop {
            match messages.message().await {
                Ok(Some(m)) => read.push(m.seconds),
                Ok(None) => return (read, Ok(())),
                Err(status) => return (read, Err(status)),
            }
        }
    }

    #[tokio::test]
    async fn messages_then_an_ok_status_end_the_call_cleanly() {
        let mut frames = two_messages_in_three_frames();
        frames.push(trailers(&[("grpc-status", "0")]));
        let messages = Messages::of(response(StatusCode::OK, &[], frames), 64).unwrap();
        let (read, end) = read_all(messages).await;
        assert_eq!(read, [1, 2]);
        assert!(end.is_ok(), "{end:?}");
    }

    #[tokio::test]
    async fn the_servers_status_in_the_trailers_ends_the_call() {
        let mut frames = two_messages_in_three_frames();
        frames.push(trailers(&[
            ("grpc-status", "14"),
            ("grpc-message", "draining"),
        ]));
        let messages = Messages::of(response(StatusCode::OK, &[], frames), 64).unwrap();
        let (read, end) = read_all(messages).await;
        assert_eq!(read, [1, 2]);
        let status = end.unwrap_err();
        assert_eq!(
            (status.code(), status.message()),
            (Code::Unavailable, "draining")
        );
    }

    #[tokio::test]
    async fn a_call_that_ends_without_a_status_or_inside_a_message_fails() {
        let messages = Messages::of(
            response(StatusCode::OK, &[], two_messages_in_three_frames()),
            64,
        )
        .unwrap();
        let (read, end) = read_all(messages).await;
        assert_eq!((read, end.unwrap_err().code()), (vec![1, 2], Code::Unknown));

        let mut cut = two_messages_in_three_frames();
        let last = cut.pop().and_then(|f| f.into_data().ok()).unwrap();
        cut.push(Frame::data(last.slice(..last.len() - 1)));
        cut.push(trailers(&[("grpc-status", "0")]));
        let messages = Messages::of(response(StatusCode::OK, &[], cut), 64).unwrap();
        let (read, end) = read_all(messages).await;
        assert_eq!((read, end.unwrap_err().code()), (vec![1], Code::Internal));
    }

    /// A delta response whose text is not UTF-8 fails the call as a
    /// message that does not decode does, naming the field; the one before
    /// it comes through.
    #[tokio::test]
    async fn a_delta_response_whose_text_is_not_utf8_fails_the_call() {
        use xdsfed_core::protocol::{WireDeltaResponse, WireResource};
        let named = |name: &'static [u8]| WireDeltaResponse {
            resources: vec![WireResource {
                name: Bytes::from_static(name),
                ..WireResource::default()
            }],
            nonce: Bytes::from_static(b"1"),
            ..WireDeltaResponse::default()
        };
        let mut body = BytesMut::new();
        encode_into(&named(b"good"), 1024, &mut body).unwrap();
        encode_into(&named(&[0xc3, 0x28]), 1024, &mut body).unwrap();
        let frames = vec![
            Frame::data(body.freeze()),
            trailers(&[("grpc-status", "0")]),
        ];
        let mut messages: Messages<WireDeltaResponse> =
            Messages::of(response(StatusCode::OK, &[], frames), 1024).unwrap();
        let first = messages.message().await.unwrap().unwrap();
        assert_eq!(&first.resources[0].name[..], b"good");
        let status = messages.message().await.unwrap_err();
        assert_eq!(status.code(), Code::Internal);
        assert!(status.message().contains("resources.name"), "{status:?}");
    }

    #[test]
    fn a_trailers_only_answer_is_the_calls_status() {
        let headers = [("grpc-status", "7"), ("grpc-message", "no")];
        let Err(status) = Messages::<Duration>::of(response(StatusCode::OK, &headers, vec![]), 64)
        else {
            panic!("a trailers-only error opened a call");
        };
        assert_eq!(
            (status.code(), status.message()),
            (Code::PermissionDenied, "no")
        );
        let ok = [("grpc-status", "0")];
        assert!(Messages::<Duration>::of(response(StatusCode::OK, &ok, vec![]), 64).is_ok());
    }

    #[test]
    fn an_http_status_without_a_grpc_one_is_mapped() {
        for (http, grpc) in [
            (StatusCode::NOT_FOUND, Code::Unimplemented),
            (StatusCode::SERVICE_UNAVAILABLE, Code::Unavailable),
            (StatusCode::UNAUTHORIZED, Code::Unauthenticated),
            (StatusCode::IM_A_TEAPOT, Code::Unknown),
        ] {
            let Err(status) = Messages::<Duration>::of(response(http, &[], vec![]), 64) else {
                panic!("{http} opened a call");
            };
            assert_eq!(status.code(), grpc, "{http}");
        }
    }
}
