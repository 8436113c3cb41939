//! A scripted HTTP/1.1 file host on loopback for CDN tests: every `GET` is
//! recorded (path and headers, as the client wrote them) and answered by
//! the test's script, on keep-alive connections that are counted as they
//! are accepted. Also a one-shot raw `GET`, to read the headers a server
//! sends.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Bounds every read and write of the helpers; never a timing assertion.
const IO_DEADLINE: Duration = Duration::from_secs(10);

/// One request the host received.
#[derive(Debug, Clone)]
pub struct Request {
    /// The path and query.
    pub path: String,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// The value of the header `name` (lower case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the script answers.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// A status without a body.
    pub fn status(status: u16) -> Self {
        Response {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// `200 OK` with a protobuf body.
    pub fn ok(body: Vec<u8>) -> Self {
        Response {
            status: 200,
            headers: vec![("content-type".into(), "application/x-protobuf".into())],
            body,
        }
    }

    /// This answer with one more header.
    pub fn with(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

type Script = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// The host; stops when dropped.
pub struct StaticOrigin {
    uri: String,
    requests: Arc<Mutex<Vec<Request>>>,
    connections: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl StaticOrigin {
    /// Serves on `127.0.0.1:0`, answering every request with `script`.
    pub async fn start(script: impl Fn(&Request) -> Response + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let script: Script = Arc::new(script);
        let task = tokio::spawn({
            let (requests, connections) = (Arc::clone(&requests), Arc::clone(&connections));
            async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    connections.fetch_add(1, Ordering::SeqCst);
                    let (requests, script) = (Arc::clone(&requests), Arc::clone(&script));
                    tokio::spawn(serve_connection(stream, requests, script));
                }
            }
        });
        StaticOrigin {
            uri,
            requests,
            connections,
            task,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// How many TCP connections were accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for StaticOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers requests on one keep-alive connection until the client closes it.
async fn serve_connection(stream: TcpStream, requests: Arc<Mutex<Vec<Request>>>, script: Script) {
    let mut stream = BufReader::new(stream);
    loop {
        let Ok(Some(request)) = tokio::time::timeout(IO_DEADLINE, read_head(&mut stream))
            .await
            .unwrap_or(Ok(None))
        else {
            return;
        };
        let response = script(&request);
        requests.lock().unwrap().push(request);
        let mut head = format!("HTTP/1.1 {} X\r\n", response.status);
        for (name, value) in &response.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("content-length: {}\r\n\r\n", response.body.len()));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&response.body);
        let written = tokio::time::timeout(IO_DEADLINE, stream.get_mut().write_all(&bytes)).await;
        if !matches!(written, Ok(Ok(()))) {
            return;
        }
    }
}

/// Reads one request head (a `GET` has no body); `None` at the end.
async fn read_head(stream: &mut BufReader<TcpStream>) -> std::io::Result<Option<Request>> {
    let mut line = String::new();
    if stream.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let path = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if stream.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    Ok(Some(Request { path, headers }))
}

/// One `GET` of `path` at `uri` (`http://HOST:PORT`) with `headers`, on a
/// connection of its own: the status line and the headers (names in lower
/// case) of the answer.
pub async fn raw_get(
    uri: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, Vec<(String, String)>) {
    let addr = uri.trim_start_matches("http://");
    let mut stream = tokio::time::timeout(IO_DEADLINE, TcpStream::connect(addr))
        .await
        .unwrap()
        .unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).await.unwrap();
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap();
    let mut out = Vec::new();
    loop {
        let mut line = String::new();
        tokio::time::timeout(IO_DEADLINE, reader.read_line(&mut line))
            .await
            .unwrap()
            .unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            return (code, out);
        }
        if let Some((name, value)) = line.split_once(':') {
            out.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
}
