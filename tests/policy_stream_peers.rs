//! The policy stream's client against peers other than its own testbed's
//! happy path: a hand-written server that answers only what it is asked
//! (and not always at once), and the testbed's server under restarts, bad
//! policies and policies for other evaluators (docs/rules.md, "The policy
//! stream against independent peers").

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{PATIENCE, bootstrap_json, client, describe, eventually, next};
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};
use xdsfed::client::client::XdsClient;
use xdsfed::client::watch::{Watch, WatchEvent};
use xdsfed::core::policy_stream::wire::{
    HealthCheckRequest, HealthCheckResponse, PolicyDiscoveryRequest, PolicyDiscoveryResponse,
    ValidatingPolicy, ValidatingPolicySpec, Validation,
};
use xdsfed::core::types::ValidatingPolicyType;
use xdsfed::testbed::policy::stub::validating_policy_service_server::{
    ValidatingPolicyService, ValidatingPolicyServiceServer,
};
use xdsfed::testbed::{Protocol, Server, ServerSpec, Testbed};

const ONPREM: &str = "policies.onprem";
/// The node id, and so the client address the servers see.
const CLIENT: &str = "e2e-node";
/// Timers short enough for tests: the client polls every 50 ms. The
/// first-response deadline stays the default (20 s, longer than
/// [`PATIENCE`]): waiting it out is the failure these tests catch.
const POLICY_STREAM: &str = r#", "protocol": "policy_stream", "policy_stream": {"poll_interval": "0.05s", "health_check_interval": "0.1s"}"#;

fn name(policy: &str) -> String {
    format!("xdstp://{ONPREM}/kyverno.http.v1alpha1.ValidatingPolicy/{policy}")
}

fn policy(name: &str, expression: &str) -> ValidatingPolicy {
    ValidatingPolicy {
        name: name.into(),
        delete: false,
        spec: Some(ValidatingPolicySpec {
            validations: vec![Validation {
                expression: expression.into(),
                ..Default::default()
            }],
            evaluation_mode: "Envoy".into(),
            ..Default::default()
        }),
    }
}

fn new_client(uri: &str) -> XdsClient {
    client(&bootstrap_json(uri, &[(ONPREM, &[uri])], POLICY_STREAM))
}

fn expression(p: &ValidatingPolicy) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.validations.first())
        .map_or("", |v| v.expression.as_str())
}

async fn expect(watch: &mut Watch<ValidatingPolicyType>, wanted: &str) {
    common::changed_until(watch, wanted, |p| expression(p) == wanted).await;
}

// ----- a server that answers only what it is asked -----

/// A policy server written from the spec alone, as an independent control
/// plane would be: it sends nothing before a request (no response headers
/// either: the handler reads the first request before it answers the
/// call), and when a client reconnects it misses the new stream's first
/// request (it is still loading), answering only later ones. Its first
/// stream serves `v1` and ends once that is ACKed; later streams serve
/// `v2`.
#[derive(Debug, Default)]
struct ForgetfulServer {
    streams: AtomicUsize,
    /// Every request, by stream.
    requests: Arc<Mutex<Vec<Vec<PolicyDiscoveryRequest>>>>,
}

fn snapshot(version: &str) -> PolicyDiscoveryResponse {
    PolicyDiscoveryResponse {
        version_info: version.into(),
        policies: vec![policy("require-auth", version)],
        nonce: format!("nonce-{version}"),
    }
}

#[tonic::async_trait]
impl ValidatingPolicyService for ForgetfulServer {
    type PolicyDiscoveryStreamStream = ReceiverStream<Result<PolicyDiscoveryResponse, Status>>;

    async fn policy_discovery_stream(
        &self,
        request: Request<Streaming<PolicyDiscoveryRequest>>,
    ) -> Result<Response<Self::PolicyDiscoveryStreamStream>, Status> {
        let mut inbound = request.into_inner();
        let stream = self.streams.fetch_add(1, Ordering::SeqCst);
        let log = Arc::clone(&self.requests);
        log.lock().unwrap().push(Vec::new());
        let record = move |r: &PolicyDiscoveryRequest| log.lock().unwrap()[stream].push(r.clone());
        // Nothing is sent, headers included, before the first request.
        let first = inbound
            .message()
            .await?
            .ok_or_else(|| Status::cancelled("no request"))?;
        record(&first);
        let (tx, rx) = mpsc::channel(8);
        tokio::spawn(async move {
            let version = if stream == 0 { "v1" } else { "v2" };
            if stream == 0 && tx.send(Ok(snapshot(version))).await.is_err() {
                return;
            }
            while let Ok(Some(request)) = inbound.message().await {
                record(&request);
                let acked = request.response_nonce == format!("nonce-{version}");
                if acked && stream == 0 {
                    // Ends the stream (OK): the client reconnects.
                    return;
                }
                if !acked && tx.send(Ok(snapshot(version))).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn health_check(
        &self,
        _request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        Ok(Response::new(HealthCheckResponse {}))
    }
}

/// Serves `service` on loopback; its URI.
async fn serve(service: ForgetfulServer) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(ValidatingPolicyServiceServer::new(service))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    format!("http://{addr}")
}

/// §Connection Lifecycle 1–2: every stream starts with the initial request,
/// sent at once whatever the server does. A server that speaks only when
/// spoken to and misses the first request of a reconnected stream is asked
/// again at the next poll, not after the first-response deadline.
#[tokio::test]
async fn reconnected_stream_asks_again_when_the_server_missed_its_first_request() {
    let server = ForgetfulServer::default();
    let requests = Arc::clone(&server.requests);
    let uri = serve(server).await;
    let client = new_client(&uri);
    let mut watch = client
        .watch::<ValidatingPolicyType>(&name("require-auth"))
        .unwrap();
    expect(&mut watch, "v1").await;
    expect(&mut watch, "v2").await;
    let requests = requests.lock().unwrap().clone();
    assert!(requests.len() >= 2, "{requests:?}");
    let initial = PolicyDiscoveryRequest {
        client_address: CLIENT.into(),
        ..Default::default()
    };
    for stream in &requests {
        assert_eq!(stream.first(), Some(&initial), "{requests:?}");
    }
    // The stream that got `v2`: its first request was missed, and asked
    // again as it was.
    assert_eq!(requests[1].get(1), Some(&initial), "{requests:?}");
}

// ----- the testbed's server -----

struct Setup {
    testbed: Testbed,
    client: XdsClient,
}

impl Setup {
    async fn start() -> Setup {
        let spec = ServerSpec::new("onprem", [ONPREM]).with_protocol(Protocol::policy_stream());
        let testbed = Testbed::start([spec]).await.unwrap();
        let client = new_client(&testbed.servers()[0].uri());
        Setup { testbed, client }
    }

    fn server(&self) -> &Server {
        &self.testbed.servers()[0]
    }

    fn set(&self, policy: &ValidatingPolicy) {
        self.server().set_message(&policy.name, policy).unwrap();
    }

    fn watch(&self, policy: &str) -> Watch<ValidatingPolicyType> {
        self.client
            .watch::<ValidatingPolicyType>(&name(policy))
            .unwrap()
    }

    /// Whether the client has a stream open on the server now.
    fn connected(&self) -> bool {
        self.server()
            .policies()
            .clients()
            .iter()
            .any(|c| c.client_address == CLIENT && c.connected)
    }
}

/// gRFC A88: a resource that does not exist is reported so once; stream
/// failures and reconnects do not say it again (the name has not existed
/// since). The next event is the policy itself, once it exists.
#[tokio::test]
async fn absent_policy_is_reported_once_across_reconnects() {
    let s = Setup::start().await;
    s.set(&policy("other", "true"));
    let mut watch = s.watch("require-auth");
    let event = next(&mut watch).await;
    assert!(
        matches!(event, WatchEvent::DoesNotExist),
        "{}",
        describe(&event)
    );
    for _ in 0..3 {
        let failures = s.client.status().servers[0].server_failure;
        // Down long enough for attempts to fail before any response.
        s.server()
            .restart(true, Duration::from_millis(300))
            .await
            .unwrap();
        eventually("the client failed and came back", || {
            s.client.status().servers[0].server_failure > failures && s.connected()
        })
        .await;
    }
    s.set(&policy("require-auth", "now"));
    let event = next(&mut watch).await;
    assert!(
        matches!(&event, WatchEvent::Changed(p) if expression(p) == "now"),
        "{}",
        describe(&event)
    );
}

/// The upstream plugin considers only policies whose evaluation mode is
/// its own (a `ValidatingPolicy` is generic; one for Kubernetes "doesn't
/// apply"). Such a policy is skipped, not an error: the rest of the
/// snapshot is ACKed and serves, and the skipped one is absent, its
/// status naming why.
#[tokio::test]
async fn policy_for_another_evaluator_is_skipped_and_the_rest_acked() {
    let s = Setup::start().await;
    s.set(&policy("require-auth", "v1"));
    let mut other = policy("kubernetes-only", "true");
    other.spec.as_mut().unwrap().evaluation_mode = String::new();
    s.set(&other);
    let mut watch = s.watch("require-auth");
    let mut skipped = s.watch("kubernetes-only");
    expect(&mut watch, "v1").await;
    let event = next(&mut skipped).await;
    assert!(
        matches!(event, WatchEvent::DoesNotExist),
        "{}",
        describe(&event)
    );
    let status = s.client.status();
    let entry = status
        .resources
        .iter()
        .find(|r| r.name == name("kubernetes-only"))
        .unwrap();
    let error = entry.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("not considered") && error.contains("evaluation_mode"),
        "{entry:?}"
    );
    let (_, report) = s.server().policies().wait_acked(PATIENCE).await;
    assert!(report.nacked_by.is_empty(), "{report:?}");
    assert_eq!(report.acked_by, [CLIENT], "{report:?}");
}

/// What a test's subscriber wrote.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Captures the warnings of this thread (the test's runtime, and so
    /// every task it spawns) until the guard drops.
    fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// §Request Processing 2 seen from the operator's side: a NACKed snapshot
/// reaches the watchers of the policies it would have changed as an
/// ambient error (their last good copies keep serving), and the log as
/// one warning naming the server, the version and the reason.
#[tokio::test]
async fn nacked_snapshot_is_an_ambient_error_and_one_warning() {
    let (logs, _guard) = Logs::capture();
    let s = Setup::start().await;
    s.set(&policy("require-auth", "v1"));
    let mut watch = s.watch("require-auth");
    expect(&mut watch, "v1").await;
    // A policy nobody watches goes bad: the whole snapshot is rejected.
    let mut bad = policy("rate-limit", "true");
    bad.spec.as_mut().unwrap().failure_policy = Some("Sometimes\u{1b}[2J".into());
    s.set(&bad);
    let (version, report) = s.server().policies().wait_acked(PATIENCE).await;
    assert_eq!(report.nacked_by.len(), 1, "{report:?}");
    let event = next(&mut watch).await;
    let WatchEvent::AmbientError(error) = &event else {
        panic!("{}", describe(&event));
    };
    let message = error.to_string();
    assert!(
        message.contains(&version) && message.contains("rate-limit"),
        "{message}"
    );
    assert_eq!(expression(&watch.current().unwrap()), "v1");
    // The NACK is re-sent at every poll; it is still one warning.
    tokio::task::yield_now().await;
    let nacks: Vec<String> = logs
        .lines()
        .into_iter()
        .filter(|l| l.contains("NACK"))
        .collect();
    assert_eq!(nacks.len(), 1, "{nacks:?}");
    let line = &nacks[0];
    let uri = s.server().uri();
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains(&uri) && line.contains(&version), "{line}");
    assert!(
        line.contains("rate-limit") && line.contains("failure_policy"),
        "{line}"
    );
    // Server text is escaped: no raw control character reaches the log.
    assert!(!line.contains('\u{1b}'), "{line:?}");
}
