//! The testbed and its load generator in a process of their own.
//!
//! The bench re-runs its own executable with `--serve-fleet` and a shape;
//! that child loads the workload into a testbed, prints its servers'
//! addresses and then obeys commands read from its stdin, one a line:
//!
//! ```text
//! child  → parent   uri <server uri>        (one per server)
//!                   ready
//! parent → child    churn                   starts the load generator
//! child  → parent   sample <cluster> <port> <unix ns>   (sampled updates)
//!                   churned <sent> <load generator CPU ns>
//! parent → child    stop                    shuts the servers down
//! child  → parent   stopped
//! ```
//!
//! So the client's process holds the client alone: its RSS, its live heap
//! and its CPU are the client's, not the testbed's, and the two do not
//! share an allocator. A sampled update carries its wall-clock time, the
//! clock both processes read, so the parent can time it to the snapshot.
//! The child ends when its stdin closes, so it never outlives the bench.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, SystemTime};

use crate::fleet::{self, Mode, Shape};

/// The argument that makes the bench a fleet.
pub const SERVE: &str = "--serve-fleet";

/// How long the parent waits for any one reply (loading 1 000 000 endpoint
/// resources takes about a minute).
const REPLY_WAIT: Duration = Duration::from_secs(600);

/// Sampled updates not yet seen: cluster → (port, when set).
pub type Pending = Arc<Mutex<HashMap<usize, (u32, SystemTime)>>>;

/// The parent's handle on a running fleet.
pub struct Fleet {
    child: Child,
    stdin: ChildStdin,
    replies: mpsc::Receiver<String>,
    /// Each server's URI, in server order.
    pub uris: Vec<String>,
    /// Updates the load generator sampled, until a snapshot shows them.
    pub pending: Pending,
}

impl Fleet {
    /// Starts a fleet serving `shape` and waits until it is loaded.
    pub fn start(shape: &Shape) -> Self {
        let exe = std::env::current_exe().expect("the bench knows its executable");
        let mut child = Command::new(exe)
            .arg(SERVE)
            .args(shape_args(shape))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the fleet process starts");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let pending = Pending::default();
        let (tx, replies) = mpsc::channel();
        let samples = Arc::clone(&pending);
        std::thread::Builder::new()
            .name("fleet-reader".into())
            .spawn(move || read_replies(BufReader::new(stdout), &samples, &tx))
            .expect("the reader thread starts");
        let mut fleet = Self {
            child,
            stdin,
            replies,
            uris: Vec::new(),
            pending,
        };
        loop {
            let line = fleet.reply();
            match line.split_once(' ') {
                Some(("uri", uri)) => fleet.uris.push(uri.to_owned()),
                _ if line == "ready" => return fleet,
                _ => panic!("unexpected line from the fleet: {line}"),
            }
        }
    }

    /// The fleet's process id, for its threads' CPU time.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts the load generator.
    pub fn begin_churn(&mut self) {
        self.send("churn");
    }

    /// Waits for the load generator to finish: (resources set, its CPU).
    pub fn end_churn(&mut self) -> (usize, Duration) {
        let line = self.reply();
        let mut words = line.split(' ');
        assert_eq!(words.next(), Some("churned"), "fleet said {line}");
        let mut number = || {
            words
                .next()
                .and_then(|w| w.parse::<u64>().ok())
                .expect("a number")
        };
        let sent = number() as usize;
        (sent, Duration::from_nanos(number()))
    }

    /// Shuts the servers down and waits for the process to end.
    pub fn stop(mut self) {
        self.send("stop");
        let line = self.reply();
        assert_eq!(line, "stopped", "fleet said {line}");
        self.child.wait().ok();
    }

    fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").expect("the fleet reads its commands");
        self.stdin.flush().ok();
    }

    fn reply(&mut self) -> String {
        self.replies
            .recv_timeout(REPLY_WAIT)
            .expect("the fleet replies in time")
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // Stopped already, or the bench is unwinding: it must not linger.
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// Sample lines go to `pending`; every other line is a reply.
fn read_replies(stdout: impl BufRead, pending: &Pending, replies: &mpsc::Sender<String>) {
    for line in stdout.lines() {
        let Ok(line) = line else { return };
        if let Some(sample) = line.strip_prefix("sample ") {
            if let (Some((cluster, port, at)), Ok(mut p)) = (parse_sample(sample), pending.lock()) {
                p.insert(cluster, (port, at));
            }
        } else if replies.send(line).is_err() {
            return;
        }
    }
}

fn parse_sample(sample: &str) -> Option<(usize, u32, SystemTime)> {
    let mut words = sample.split(' ');
    let cluster = words.next()?.parse().ok()?;
    let port = words.next()?.parse().ok()?;
    let nanos: u64 = words.next()?.parse().ok()?;
    Some((
        cluster,
        port,
        SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos),
    ))
}

fn shape_args(shape: &Shape) -> [String; 4] {
    let mode = match shape.mode {
        Mode::Eds => "eds",
        Mode::Leds => "leds",
        Mode::Listener => "listener",
    };
    [
        shape.clusters.to_string(),
        shape.authorities.to_string(),
        shape.servers.to_string(),
        mode.to_owned(),
    ]
}

fn parse_shape(args: &[String]) -> Shape {
    let number = |i: usize| -> usize {
        args.get(i)
            .and_then(|a| a.parse().ok())
            .expect("the fleet's shape")
    };
    let mode = match args.get(3).map(String::as_str) {
        Some("leds") => Mode::Leds,
        Some("listener") => Mode::Listener,
        _ => Mode::Eds,
    };
    Shape {
        clusters: number(0),
        authorities: number(1),
        servers: number(2),
        mode,
    }
}

/// The child: serves the shape in `args` (what follows [`SERVE`]) and obeys
/// its parent until told to stop or its stdin closes.
pub fn serve(args: &[String]) {
    let shape = parse_shape(args);
    let rt = crate::runtime("testbed");
    let testbed = rt.block_on(fleet::serve(&shape));
    for server in testbed.servers() {
        println!("uri {}", server.uri());
    }
    println!("ready");
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match line.trim() {
            "churn" => {
                let (sent, cpu) = crate::churn::generate(testbed.servers().to_vec(), shape);
                println!("churned {sent} {}", cpu.as_nanos());
            }
            "stop" => {
                rt.block_on(testbed.shutdown());
                println!("stopped");
                return;
            }
            other => eprintln!("fleet: unknown command {other:?}"),
        }
    }
}

/// Prints one sampled update for the parent.
pub fn report_sample(cluster: usize, port: u32) {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    println!("sample {cluster} {port} {nanos}");
}
