//! A scripted HTTP/1.1 server on loopback for REST-JSON tests: every
//! `POST` is recorded (path and JSON body, as the client wrote it) and
//! answered by the test's script, so a test can play a third-party control
//! plane (sovereign answers without `type_url` or nonce, and `304` while
//! the version is unchanged, whatever names are asked). Also a one-shot
//! raw `POST`, to show what a server makes of a body the test writes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Bounds every read and write of the helpers; never a timing assertion.
const IO_DEADLINE: Duration = Duration::from_secs(10);

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// e.g. `/v3/discovery:clusters`.
    pub path: String,
    /// The body as JSON (`Null` if it was not JSON).
    pub body: serde_json::Value,
}

/// What the script answers.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

impl Reply {
    /// `200 OK` with a JSON body.
    pub fn json(body: impl Into<String>) -> Self {
        Reply {
            status: 200,
            body: body.into(),
        }
    }

    /// A status without a body (`304`, `404`).
    pub fn status(status: u16) -> Self {
        Reply {
            status,
            body: String::new(),
        }
    }
}

type Script = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

/// The server; stops when dropped.
pub struct ScriptedHttp {
    uri: String,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    task: JoinHandle<()>,
}

impl ScriptedHttp {
    /// Serves on `127.0.0.1:0`, answering every request with `script`.
    pub async fn start(script: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri = format!("http://{}", listener.local_addr().unwrap());
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let script: Script = Arc::new(script);
        let task = tokio::spawn({
            let recorded = Arc::clone(&recorded);
            async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let (recorded, script) = (Arc::clone(&recorded), Arc::clone(&script));
                    tokio::spawn(serve_connection(stream, recorded, script));
                }
            }
        });
        ScriptedHttp {
            uri,
            recorded,
            task,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Every request so far, in order.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.recorded.lock().unwrap().clone()
    }
}

impl Drop for ScriptedHttp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers the requests of one keep-alive connection until it closes.
async fn serve_connection(stream: TcpStream, recorded: Arc<Mutex<Vec<Recorded>>>, script: Script) {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    while let Ok(Some((path, body))) =
        tokio::time::timeout(IO_DEADLINE, read_request(&mut read)).await
    {
        let request = Recorded {
            path,
            body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
        };
        let reply = script(&request);
        recorded.lock().unwrap().push(request);
        let head = format!(
            "HTTP/1.1 {} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            reply.status,
            reply.body.len()
        );
        let mut out = head.into_bytes();
        if reply.status != 304 {
            out.extend_from_slice(reply.body.as_bytes());
        }
        if write.write_all(&out).await.is_err() {
            return;
        }
    }
}

/// Reads one request: its path and body. `None` when the connection ends.
async fn read_request(
    read: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
) -> Option<(String, Vec<u8>)> {
    let mut line = String::new();
    read.read_line(&mut line).await.ok()?;
    let path = line.split_whitespace().nth(1)?.to_owned();
    let mut length = 0usize;
    loop {
        line.clear();
        read.read_line(&mut line).await.ok()?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    read.read_exact(&mut body).await.ok()?;
    Some((path, body))
}

/// POSTs `body` to `{uri}{path}` on a connection of its own and returns
/// the status and the body of the answer.
pub async fn post_raw(uri: &str, path: &str, body: &str) -> (u16, String) {
    let authority = uri.trim_start_matches("http://");
    let exchange = async {
        let mut stream = TcpStream::connect(authority).await.unwrap();
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    };
    let answer = tokio::time::timeout(IO_DEADLINE, exchange)
        .await
        .expect("the server answers a raw POST");
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}
