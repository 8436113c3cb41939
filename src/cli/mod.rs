//! The subcommands of `xdsfed`.
//!
//! Each subcommand lives in its own module with a clap `Args` struct and a
//! `run(args) -> Result<(), CliError>` function; adding one means adding a
//! module, a variant to [`Command`] and an arm to [`Command::run`]. Errors say
//! whether the input was at fault ([`CliError::BadInput`], exit code 2) or the
//! run failed ([`CliError::Runtime`], exit code 1); `main` prints them with
//! their cause chain and a hint, never as a Debug dump.
//!
//! Shared pieces: [`target`] (what to subscribe to, and the client),
//! [`progress`] (the terminal progress line), [`render`] (snapshot trees,
//! Graphviz and Mermaid), [`table`] (the CSDS-style status table) and
//! [`text`] (escaping for the terminal), the last two from the library's
//! hidden `terminal` module so the fuzz targets reach them.

pub(crate) mod bootstrap;
pub(crate) mod demo;
pub(crate) mod dump;
pub(crate) mod graph;
pub(crate) mod progress;
pub(crate) mod publish;
pub(crate) mod render;
pub(crate) mod target;
pub(crate) mod testbed;
pub(crate) mod watch;

use std::fmt;
use std::process::ExitCode;

use clap::Subcommand;
pub(crate) use xdsfed::terminal::{table, text};

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Watch an embedded two-authority testbed warm up, update, lose a
    /// server and recover, then print the final snapshot. No setup needed.
    #[command(
        after_help = "Takes a few seconds, prints to stdout only, fits 80 columns.\n\
        Exit code 0 when every act completed, 1 otherwise."
    )]
    Demo(demo::Args),
    /// Subscribe to resources and print every update as it arrives, until
    /// Ctrl-C; optionally serve CSDS and Prometheus metrics.
    #[command(after_help = "Examples:\n  \
        xdsfed watch --bootstrap b.yaml --listener LISTENER\n  \
        xdsfed watch --bootstrap b.yaml --resource cluster CLUSTER --json\n  \
        xdsfed watch --bootstrap b.yaml --wildcard cluster --admin 127.0.0.1:9901\n  \
        xdsfed watch --bootstrap b.yaml --collection cluster COLLECTION\n  \
        xdsfed watch --bootstrap b.yaml --collection listener COLLECTION --graph\n\n\
        Exit codes: 0 on Ctrl-C, 1 when the client stops, 2 for bad input.")]
    Watch(watch::Args),
    /// Subscribe, wait until everything is received (or --timeout), print
    /// the CSDS-style status, and fail if anything is missing or rejected.
    #[command(after_help = "Examples:\n  \
        xdsfed dump --bootstrap b.yaml --listener LISTENER\n  \
        xdsfed dump --bootstrap b.yaml --wildcard cluster --timeout 10s --json\n\n\
        Exit codes: 0 when every resource is ACKED, 1 when one is NACKED, does not exist,\n\
        or did not arrive within --timeout (the table is printed anyway), 2 for bad input.")]
    Dump(dump::Args),
    /// Print a listener's dependency graph as a tree, Graphviz dot or
    /// Mermaid, with the authority of every node.
    Graph(graph::Args),
    /// Follow resources and write them, as they change, into a directory a
    /// static file host (nginx, any CDN origin) serves to HTTP CDN
    /// clients; until Ctrl-C.
    #[command(after_help = "Examples:\n  \
        xdsfed publish --bootstrap b.yaml --dir www COLLECTION\n  \
        xdsfed publish --bootstrap b.yaml --dir www xds:///greeter\n  \
        xdsfed publish --bootstrap b.yaml --dir www --resource cluster pay-v2\n\n\
        COLLECTION: e.g. xdstp://cdn.example/envoy.config.cluster.v3.ClusterCollection/mesh/all\n\n\
        Each file is {dir}/AUTH/TYPE/ID (old-style names: {dir}/TYPE/NAME), a binary\n\
        DiscoveryResponse; docs/federation.md (\"Publishing a CDN directory\") shows nginx's\n\
        configuration. Exit codes: 0 on Ctrl-C, 1 when the client stops, 2 for bad input.")]
    Publish(publish::Args),
    /// Run federated xDS management servers from a scenario file, with the
    /// gRPC control API, until Ctrl-C.
    Testbed(testbed::Args),
    /// Inspect bootstrap files.
    #[command(subcommand)]
    Bootstrap(bootstrap::Command),
}

impl Command {
    /// The log level when neither `RUST_LOG` nor `-v` says otherwise. The
    /// demo breaks connections on purpose and narrates them, so the
    /// transport's warnings about them would only repeat it.
    pub(crate) fn default_log_level(&self) -> &'static str {
        match self {
            Self::Demo(_) => "error",
            _ => "warn",
        }
    }

    /// Runs the subcommand to completion.
    pub(crate) fn run(self) -> Result<(), CliError> {
        match self {
            Self::Demo(args) => demo::run(args),
            Self::Watch(args) => watch::run(args),
            Self::Dump(args) => dump::run(args),
            Self::Graph(args) => graph::run(args),
            Self::Publish(args) => publish::run(args),
            Self::Testbed(args) => testbed::run(args),
            Self::Bootstrap(command) => bootstrap::run(command),
        }
    }
}

/// Why a subcommand failed: whose fault, what happened, and what to try.
#[derive(Debug)]
pub(crate) enum CliError {
    /// The flags or an input file are wrong; the message names the field.
    BadInput(Failure),
    /// The run failed (a port in use, a server that never answered).
    Runtime(Failure),
}

/// The text of a failure: a message, the causes under it, and a hint.
#[derive(Debug, Default)]
pub(crate) struct Failure {
    message: String,
    causes: Vec<String>,
    hint: Option<String>,
}

impl CliError {
    /// Bad input (exit code 2).
    pub(crate) fn bad_input(message: impl Into<String>) -> Self {
        Self::BadInput(Failure {
            message: message.into(),
            ..Failure::default()
        })
    }

    /// A failed run (exit code 1).
    pub(crate) fn runtime(message: impl Into<String>) -> Self {
        Self::Runtime(Failure {
            message: message.into(),
            ..Failure::default()
        })
    }

    /// Adds what to try next.
    pub(crate) fn hint(mut self, hint: impl Into<String>) -> Self {
        self.failure_mut().hint = Some(hint.into());
        self
    }

    /// Adds the chain of `source()`s of `error` as causes, so the message
    /// itself can stay short.
    pub(crate) fn caused_by(mut self, error: &(dyn std::error::Error + 'static)) -> Self {
        let failure = self.failure_mut();
        failure.causes.push(error.to_string());
        let mut source = error.source();
        while let Some(cause) = source {
            let text = cause.to_string();
            // Some errors repeat their source's text in their own message.
            if !failure.causes.iter().any(|c| c.contains(&text)) {
                failure.causes.push(text);
            }
            source = cause.source();
        }
        self
    }

    /// Adds one line under the message.
    pub(crate) fn with_cause(mut self, cause: impl Into<String>) -> Self {
        self.failure_mut().causes.push(cause.into());
        self
    }

    /// 2 for bad input, 1 for a failed run.
    pub(crate) fn exit_code(&self) -> ExitCode {
        match self {
            Self::BadInput(_) => ExitCode::from(2),
            Self::Runtime(_) => ExitCode::from(1),
        }
    }

    fn failure(&self) -> &Failure {
        match self {
            Self::BadInput(f) | Self::Runtime(f) => f,
        }
    }

    fn failure_mut(&mut self) -> &mut Failure {
        match self {
            Self::BadInput(f) | Self::Runtime(f) => f,
        }
    }
}

/// How many characters of one message, cause or hint an error prints.
/// Messages quote names and file paths from outside; a 70 000-character
/// name must not bury the rest.
const ERROR_LINE_CHARS: usize = 2_000;

/// `message`, then `  caused by: …` lines, then `  hint: …`; each one line,
/// escaped and cut (see [`text`]): causes quote servers and input files.
impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let failure = self.failure();
        let line = |piece: &str| text::shown_within(piece, ERROR_LINE_CHARS);
        f.write_str(&line(&failure.message))?;
        for cause in &failure.causes {
            write!(f, "\n  caused by: {}", line(cause))?;
        }
        if let Some(hint) = &failure.hint {
            write!(f, "\n  hint: {}", line(hint))?;
        }
        Ok(())
    }
}

impl std::error::Error for CliError {}

/// Logs to stderr, filtered by `RUST_LOG`, else by the number of `-v`
/// flags (none: `quiet`; `-v`: info; `-vv`: debug; `-vvv`: trace).
pub(crate) fn init_logging(verbose: u8, quiet: &str) {
    let default = match verbose {
        0 => quiet,
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // A second initialisation (impossible from main) would only be ignored.
    // Colours only for a terminal: logs piped to a file stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Resolves on Ctrl-C (SIGINT). The handler is installed when this is
/// called, not when the future is first polled: a command that prints
/// `ready` and then awaits it does not die of a Ctrl-C that comes in
/// between. Without a handler it never resolves: the command runs until
/// killed. Must be called inside the tokio runtime.
pub(crate) fn ctrl_c() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
    async move {
        #[cfg(unix)]
        if let Ok(mut interrupt) = interrupt {
            interrupt.recv().await;
            return;
        }
        #[cfg(not(unix))]
        if tokio::signal::ctrl_c().await.is_ok() {
            return;
        }
        std::future::pending::<()>().await;
    }
}

/// A multi-threaded tokio runtime for a subcommand.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::runtime("cannot start the async runtime").caused_by(&e))
}

/// A tokio runtime on the calling thread alone, for a subcommand whose
/// peak memory matters more than a second core: every allocation then
/// comes from one allocator arena, where memory one task frees is reused
/// by the next. On several threads, glibc gives each its own arena, and
/// what one arena frees the others cannot reuse: `watch` at 100 000
/// clusters peaked anywhere from 580 to 665 MB from run to run that way,
/// and at 593 MB every run on one thread.
pub(crate) fn single_thread_runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::runtime("cannot start the async runtime").caused_by(&e))
}

/// Writes `text` to stdout and flushes, so a harness reading a pipe sees
/// each line as it happens. A closed stdout (`| head`) ends the command.
pub(crate) fn emit(text: &str) -> Result<(), CliError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| {
            if text.ends_with('\n') {
                Ok(())
            } else {
                out.write_all(b"\n")
            }
        })
        .and_then(|()| out.flush())
        .map_err(stdout_failed)
}

/// [`emit`] for output too large to build as one String first (the
/// picture of a snapshot of 100 000 clusters): `draw` writes to stdout
/// through a buffer; then, as `emit` does, a newline unless the output
/// ended with one, and a flush.
pub(crate) fn emit_with(
    draw: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), CliError> {
    use std::io::Write;
    let mut out = LineEnd::new(std::io::BufWriter::new(std::io::stdout().lock()));
    draw(&mut out)
        .and_then(|()| out.end_line())
        .and_then(|()| out.flush())
        .map_err(stdout_failed)
}

/// What a failed write to stdout means for the command.
fn stdout_failed(error: std::io::Error) -> CliError {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        // The reader is gone (`| head`): nobody is left to tell.
        std::process::exit(0);
    }
    CliError::runtime("cannot write to stdout").caused_by(&error)
}

/// A writer that remembers whether what went through it ends with a
/// newline, so that [`emit_with`] can end the output as [`emit`] does.
struct LineEnd<W> {
    inner: W,
    ends_line: bool,
}

impl<W: std::io::Write> LineEnd<W> {
    fn new(inner: W) -> Self {
        Self {
            inner,
            ends_line: false,
        }
    }

    /// Writes a newline unless the last byte written was one (or when
    /// nothing was written, as `emit("")` prints an empty line).
    fn end_line(&mut self) -> std::io::Result<()> {
        if self.ends_line {
            Ok(())
        } else {
            std::io::Write::write_all(self, b"\n")
        }
    }
}

impl<W: std::io::Write> std::io::Write for LineEnd<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = self.inner.write(buf)?;
        if let Some(&last) = buf.get(..written).and_then(<[u8]>::last) {
            self.ends_line = last == b'\n';
        }
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Parses durations such as `250ms`, `5s`, `1.5s`, `2m`.
pub(crate) fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let (number, unit) = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map_or((text, ""), |i| text.split_at(i));
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 500ms, 5s or 1m"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" | "" => value,
        "m" => value * 60.0,
        _ => return Err(format!("unknown unit {unit:?} in {text:?}: use ms, s or m")),
    };
    std::time::Duration::try_from_secs_f64(seconds)
        .map_err(|_| format!("{text:?} is not a duration such as 500ms, 5s or 1m"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations_accept_milliseconds_seconds_and_minutes() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5h").is_err());
    }

    /// `emit_with` ends its output as `emit` does: one newline, never two.
    #[test]
    fn streamed_output_ends_with_exactly_one_newline() {
        use std::io::Write;
        for (written, expected) in [("", "\n"), ("a", "a\n"), ("a\n", "a\n"), ("a\nb", "a\nb\n")] {
            let mut out = LineEnd::new(Vec::new());
            out.write_all(written.as_bytes()).unwrap();
            out.end_line().unwrap();
            assert_eq!(out.inner, expected.as_bytes(), "{written:?}");
        }
    }

    #[test]
    fn errors_print_causes_then_hint() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = CliError::bad_input("cannot read x")
            .caused_by(&io)
            .hint("check the path");
        assert_eq!(
            e.to_string(),
            "cannot read x\n  caused by: no such file\n  hint: check the path"
        );
        assert_eq!(e.exit_code(), ExitCode::from(2));
    }

    /// A server's error text cannot add lines or escapes to stderr.
    #[test]
    fn errors_escape_what_they_quote() {
        let e = CliError::runtime("cannot watch a\nxdsfed: forged")
            .with_cause("bad \x1b[31mred")
            .hint("x".repeat(10_000));
        let text = e.to_string();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(
            text.starts_with("cannot watch a\\nxdsfed: forged\n"),
            "{text}"
        );
        assert!(text.contains("caused by: bad \\x1b[31mred"), "{text}");
        assert!(text.ends_with("…(8000 more bytes)"), "{text}");
    }
}
