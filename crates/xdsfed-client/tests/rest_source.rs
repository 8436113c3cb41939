//! The REST-JSON polling source (xds-protocol-v3, "REST-JSON polling
//! subscriptions") against the testbed's REST server over loopback HTTP:
//! delivery and updates by polling, ACK and NACK, failures as ambient
//! errors with recovery, and gRFC A71 fallback between a REST and a gRPC
//! server. Timers are short (refresh 50 ms); nothing asserts on timing.

// Tests state their expectations with unwrap, expect and panic (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/scripted_http.rs"]
mod scripted_http;

use std::time::Duration;
use xdsfed_core::types::ClusterView;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, CustomClusterType,
};
use xdsfed_client::XdsClient;
use xdsfed_client::cache::ResourceStatus;
use xdsfed_client::transport::{BackoffConfig, TransportOptions};
use xdsfed_client::watch::{Watch, WatchEvent};
use xdsfed_core::bootstrap::Bootstrap;
use xdsfed_core::types::ClusterType;
use xdsfed_testbed::resources::cluster;
use xdsfed_testbed::{Protocol, Server, ServerSpec, Testbed};

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const NAME: &str = "c1";
/// Long enough for loopback on a loaded machine; only bounds how long a
/// failure takes to show.
const PATIENCE: Duration = Duration::from_secs(10);

/// A server entry: REST with short timers, or gRPC ADS.
fn entry(uri: &str, rest: bool) -> String {
    let timers = if rest {
        r#", "api_type": "REST", "refresh_delay": "0.05s", "request_timeout": "0.3s""#
    } else {
        ""
    };
    format!(r#"{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]{timers}}}"#)
}

/// A client whose top-level servers are `servers`, in order (A71 order).
fn client(servers: &[(&Server, bool)]) -> XdsClient {
    let uris: Vec<(String, bool)> = servers.iter().map(|(s, rest)| (s.uri(), *rest)).collect();
    client_at(&uris)
}

/// A client whose top-level servers are at `uris` (REST if `true`).
fn client_at(uris: &[(String, bool)]) -> XdsClient {
    let list: Vec<String> = uris.iter().map(|(uri, rest)| entry(uri, *rest)).collect();
    let json = format!(
        r#"{{"xds_servers": [{}], "node": {{"id": "rest-node"}}}}"#,
        list.join(",")
    );
    let bootstrap = Bootstrap::from_json_str(&json).unwrap();
    let defaults = TransportOptions::default();
    let options = TransportOptions {
        does_not_exist_timeout: Duration::from_secs(5),
        idle_grace: Duration::from_millis(200),
        backoff: BackoffConfig {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(200),
            ..defaults.backoff
        },
        ..defaults
    };
    XdsClient::builder(bootstrap)
        .transport_options(options)
        .build()
        .unwrap()
}

fn rest_spec(name: &str) -> ServerSpec {
    ServerSpec::new(name, ["rest.example"]).with_protocol(Protocol::Rest)
}

/// Stores `c1` on `server`, its EDS service name `service`.
fn serve(server: &Server, service: &str) {
    server.set_message(NAME, &cluster(NAME, service)).unwrap();
}

fn service_of(c: &ClusterView) -> &str {
    c.eds_service_name().unwrap_or_default()
}

/// The next event that satisfies `want`, skipping others.
async fn event_until(
    watch: &mut Watch<ClusterType>,
    what: &str,
    mut want: impl FnMut(&WatchEvent<ClusterView>) -> bool,
) -> WatchEvent<ClusterView> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match tokio::time::timeout_at(deadline, watch.next()).await {
            Ok(Some(event)) if want(&event) => return event,
            Ok(Some(_)) => {}
            Ok(None) => panic!("the watch ended waiting for {what}"),
            Err(_) => panic!("no {what} within {PATIENCE:?}; state {:?}", watch.state()),
        }
    }
}

/// Waits for the copy whose service is `service`.
async fn copy_from(watch: &mut Watch<ClusterType>, service: &str) {
    event_until(
        watch,
        &format!("the copy of {service}"),
        |e| matches!(e, WatchEvent::Changed(c) if service_of(c) == service),
    )
    .await;
}

/// Waits for an ambient error and returns its text.
async fn ambient_error(watch: &mut Watch<ClusterType>) -> String {
    match event_until(watch, "an ambient error", |e| {
        matches!(e, WatchEvent::AmbientError(_))
    })
    .await
    {
        WatchEvent::AmbientError(e) => e.to_string(),
        _ => unreachable!(),
    }
}

async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Every SotW request the server recorded, in order.
fn requests(
    server: &Server,
) -> Vec<envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest> {
    server
        .recording()
        .streams()
        .iter()
        .flat_map(|s| s.sotw_requests().cloned().collect::<Vec<_>>())
        .collect()
}

/// Server failures (`server_failure`) the client counted, over all servers.
fn server_failures(client: &XdsClient) -> u64 {
    client
        .status()
        .servers
        .iter()
        .map(|s| s.server_failure)
        .sum()
}

/// The copy the client serves is still `service`.
fn still_serves(watch: &Watch<ClusterType>, service: &str) {
    let current = watch.current().expect("a copy is cached");
    assert_eq!(service_of(&current), service);
}

/// A REST source delivers a cluster, then an update arrives by polling:
/// nothing pushes it, the next poll asks.
#[tokio::test]
async fn rest_source_delivers_and_polls_updates() {
    let testbed = Testbed::start([rest_spec("rest")]).await.unwrap();
    let server = &testbed.servers()[0];
    serve(server, "v1");
    let client = client(&[(server, true)]);
    let mut watch = client.watch::<ClusterType>(NAME).unwrap();
    copy_from(&mut watch, "v1").await;
    serve(server, "v2");
    copy_from(&mut watch, "v2").await;
    let polls = requests(server);
    assert!(
        polls
            .iter()
            .all(|r| r.node.as_ref().is_some_and(|n| n.id == "rest-node")),
        "every poll names the node"
    );
}

/// ACK: the poll after a response carries its version and nonce; NACK: an
/// invalid resource is answered with the last good version and
/// `error_detail`, and the last good copy keeps serving.
#[tokio::test]
async fn rest_source_acks_and_nacks_keeping_the_last_good_copy() {
    let testbed = Testbed::start([rest_spec("rest")]).await.unwrap();
    let server = &testbed.servers()[0];
    serve(server, "v1");
    let client = client(&[(server, true)]);
    let mut watch = client.watch::<ClusterType>(NAME).unwrap();
    copy_from(&mut watch, "v1").await;
    let report = server.wait_acked(CDS, NAME, None, PATIENCE).await.unwrap();
    assert_eq!(report.acked_by, ["rest-node"], "{report:?}");
    let response = server.recording().streams()[0]
        .sotw_responses()
        .last()
        .cloned()
        .unwrap();
    eventually("a poll ACKs the response", || {
        requests(server).iter().any(|r| {
            r.version_info == response.version_info
                && r.response_nonce == response.nonce
                && r.error_detail.is_none()
        })
    })
    .await;

    // Valid protobuf (JSON has no way to carry bytes that do not decode),
    // invalid as a cluster: a custom cluster type the client does not know.
    let invalid = Cluster {
        name: NAME.into(),
        cluster_discovery_type: Some(ClusterDiscoveryType::ClusterType(CustomClusterType {
            name: "envoy.clusters.unknown".into(),
            typed_config: None,
        })),
        ..Default::default()
    };
    server.set_message(NAME, &invalid).unwrap();
    let report = server.wait_acked(CDS, NAME, None, PATIENCE).await.unwrap();
    assert_eq!(report.nacked_by.len(), 1, "{report:?}");
    let nack = requests(server)
        .into_iter()
        .find(|r| r.error_detail.is_some())
        .unwrap();
    assert_eq!(
        nack.version_info, response.version_info,
        "a NACK names the last good version"
    );
    assert_eq!(nack.error_detail.unwrap().code, 3, "INVALID_ARGUMENT");
    eventually("the client marks the copy NACKed", || {
        watch.state().status == ResourceStatus::Nacked
    })
    .await;
    still_serves(&watch, "v1");
}

/// A 5xx answer fails the poll: watchers get an ambient error, the copy
/// keeps serving, and polling recovers when the server does.
#[tokio::test]
async fn rest_source_http_error_is_ambient_and_recovers() {
    let testbed = Testbed::start([rest_spec("rest")]).await.unwrap();
    let server = &testbed.servers()[0];
    serve(server, "v1");
    let client = client(&[(server, true)]);
    let mut watch = client.watch::<ClusterType>(NAME).unwrap();
    copy_from(&mut watch, "v1").await;
    server.update_faults(|f| f.http_status = Some(503));
    let error = ambient_error(&mut watch).await;
    assert!(error.contains("503"), "{error}");
    still_serves(&watch, "v1");
    server.update_faults(|f| f.http_status = None);
    serve(server, "v2");
    copy_from(&mut watch, "v2").await;
}

/// A body that is not a `DiscoveryResponse` is a rejected update, not a
/// server failure (Envoy's `http_subscription_impl.cc`: a body that does
/// not load is `UpdateRejected`): the next poll NACKs it with the last
/// accepted version and an `error_detail`, watchers hear of the NACK while
/// the last good copy keeps serving, and the server is not counted failed.
#[tokio::test]
async fn rest_source_nacks_a_body_that_is_not_a_discovery_response() {
    let testbed = Testbed::start([rest_spec("rest")]).await.unwrap();
    let server = &testbed.servers()[0];
    serve(server, "v1");
    let client = client(&[(server, true)]);
    let mut watch = client.watch::<ClusterType>(NAME).unwrap();
    copy_from(&mut watch, "v1").await;
    let accepted = server.recording().streams()[0]
        .sotw_responses()
        .last()
        .cloned()
        .unwrap()
        .version_info;
    server.update_faults(|f| f.malformed_body = true);
    // A new version, so that the server answers with a body, not 304.
    serve(server, "v2");
    let error = ambient_error(&mut watch).await;
    assert!(error.contains("not a DiscoveryResponse"), "{error}");
    eventually("a poll NACKs the body", || {
        requests(server)
            .iter()
            .any(|r| r.error_detail.is_some() && r.version_info == accepted)
    })
    .await;
    still_serves(&watch, "v1");
    assert_eq!(
        server_failures(&client),
        0,
        "a rejected body is no server failure"
    );
    server.update_faults(|f| f.malformed_body = false);
    copy_from(&mut watch, "v2").await;
}

/// A poll that outlasts `request_timeout` fails, and is retried (with the
/// transport's backoff) until the server answers in time.
#[tokio::test]
async fn rest_source_request_timeout_fails_and_retries() {
    let testbed = Testbed::start([rest_spec("rest")]).await.unwrap();
    let server = &testbed.servers()[0];
    serve(server, "v1");
    let client = client(&[(server, true)]);
    let mut watch = client.watch::<ClusterType>(NAME).unwrap();
    copy_from(&mut watch, "v1").await;
    server.update_faults(|f| f.response_delay = Some(Duration::from_secs(2)));
    serve(server, "v2");
    let before = requests(server).len();
    let error = ambient_error(&mut watch).await;
    assert!(error.contains("request_timeout"), "{error}");
    eventually("the failed poll is retried", || {
        requests(server).len() >= before + 3
    })
    .await;
    still_serves(&watch, "v1");
    server.update_faults(|f| f.response_delay = None);
    copy_from(&mut watch, "v2").await;
    let stats = &client.status();
    assert!(!stats.resources.is_empty());
}

/// gRFC A71: a failing REST primary falls back to a gRPC secondary, and the
/// client switches back once the primary answers.
#[tokio::test]
async fn rest_primary_falls_back_to_grpc_and_back() {
    let testbed = Testbed::start([rest_spec("rest"), ServerSpec::new("grpc", ["rest.example"])])
        .await
        .unwrap();
    let (rest, grpc) = (&testbed.servers()[0], &testbed.servers()[1]);
    serve(rest, "rest");
    serve(grpc, "grpc");
    rest.update_faults(|f| f.http_status = Some(503));
    let client = client(&[(rest, true), (grpc, false)]);
    let mut watch = client.watch::<ClusterType>(NAME).unwrap();
    copy_from(&mut watch, "grpc").await;
    rest.update_faults(|f| f.http_status = None);
    copy_from(&mut watch, "rest").await;
}

/// gRFC A71 the other way: a gRPC primary that refuses connections falls
/// back to a REST secondary.
#[tokio::test]
async fn grpc_primary_falls_back_to_rest() {
    let testbed = Testbed::start([ServerSpec::new("grpc", ["rest.example"]), rest_spec("rest")])
        .await
        .unwrap();
    let (grpc, rest) = (&testbed.servers()[0], &testbed.servers()[1]);
    serve(grpc, "grpc");
    serve(rest, "rest");
    grpc.update_faults(|f| f.refuse_connections = true);
    let client = client(&[(grpc, false), (rest, true)]);
    let mut watch = client.watch::<ClusterType>(NAME).unwrap();
    copy_from(&mut watch, "rest").await;
    grpc.update_faults(|f| f.refuse_connections = false);
    copy_from(&mut watch, "grpc").await;
}

/// The runnable example in `bootstrap-examples/rest-source/` loads: both
/// bootstraps name a REST server at the scenario's REST port, and the
/// scenario serves REST there.
#[test]
fn rest_source_example_loads() {
    use xdsfed_core::bootstrap::ServerProtocol;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bootstrap-examples/rest-source");
    for file in ["bootstrap.json", "envoy.yaml"] {
        let b = Bootstrap::from_file(dir.join(file)).unwrap_or_else(|e| panic!("{e}"));
        let rest = &b.authorities["rest.example"].xds_servers[0];
        assert!(matches!(rest.protocol, ServerProtocol::Rest(_)), "{file}");
        assert!(rest.server_uri.ends_with("127.0.0.1:18110"), "{file}");
    }
    let scenario = xdsfed_testbed::scenario::Scenario::from_file(&dir.join("testbed.yaml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let rest = &scenario.servers()[0];
    assert_eq!((rest.protocol, rest.port), (Protocol::Rest, 18110));
}

// ----- REST-JSON with third-party servers -----

const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";

/// Cluster `name` in the JSON form a control plane writes, its EDS service
/// name `service`.
fn cluster_json(name: &str, service: &str) -> String {
    format!(
        r#"{{"@type": "{CDS}", "name": "{name}", "type": "EDS",
            "eds_cluster_config": {{"service_name": "{service}",
              "eds_config": {{"ads": {{}}, "resource_api_version": "V3"}}}}}}"#
    )
}

/// Plays sovereign 0.32.12's `/v3/discovery:clusters`
/// (`sovereign/views/discovery.py`, `sovereign/discovery.py`): it reads
/// only the proto field names `version_info` (`"0"` when absent) and
/// `resource_names`; its version hashes everything the template renders,
/// whatever names are asked; a request at that version is answered `304`;
/// otherwise the asked resources (all for no names), `404` for none; no
/// `type_url` and no nonce in the response.
#[derive(Clone, Default)]
struct SovereignLike {
    clusters: std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, String>>>,
}

impl SovereignLike {
    fn serve(&self, name: &str, service: &str) {
        self.clusters
            .lock()
            .unwrap()
            .insert(name.to_owned(), cluster_json(name, service));
    }

    fn reply(&self, request: &scripted_http::Recorded) -> scripted_http::Reply {
        use scripted_http::Reply;
        use std::hash::{Hash as _, Hasher as _};
        let clusters = self.clusters.lock().unwrap();
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        clusters.hash(&mut hasher);
        let version = hasher.finish().to_string();
        let body = &request.body;
        let asked = body.get("version_info").and_then(|v| v.as_str());
        if asked.unwrap_or("0") == version {
            return Reply::status(304);
        }
        let names: Vec<&str> = body
            .get("resource_names")
            .and_then(|v| v.as_array())
            .map(|a| a.iter().filter_map(|n| n.as_str()).collect())
            .unwrap_or_default();
        let resources: Vec<&str> = clusters
            .iter()
            .filter(|(name, _)| names.is_empty() || names.contains(&name.as_str()))
            .map(|(_, resource)| resource.as_str())
            .collect();
        if resources.is_empty() {
            return Reply::status(404);
        }
        Reply::json(format!(
            r#"{{"version_info": "{version}", "resources": [{}]}}"#,
            resources.join(",")
        ))
    }

    /// A scripted server playing this control plane.
    async fn start(&self) -> scripted_http::ScriptedHttp {
        let plane = self.clone();
        scripted_http::ScriptedHttp::start(move |request| plane.reply(request)).await
    }
}

/// The first request `server` received that satisfies `want`, waiting for
/// it.
async fn request_where(
    server: &scripted_http::ScriptedHttp,
    what: &str,
    want: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let mut found = None;
    eventually(what, || {
        found = server
            .recorded()
            .into_iter()
            .map(|r| r.body)
            .find(|body| want(body));
        found.is_some()
    })
    .await;
    found.unwrap()
}

/// "type_url" of a response is not read: Envoy's REST subscription
/// (`http_subscription_impl.cc`) never reads it, and sovereign sends none;
/// the polled path names the type.
#[tokio::test]
async fn rest_source_takes_the_type_from_the_path_when_type_url_is_absent() {
    let plane = SovereignLike::default();
    plane.serve(NAME, "v1");
    let server = plane.start().await;
    let client = client_at(&[(server.uri().to_owned(), true)]);
    let mut watch = client.watch::<ClusterType>(NAME).unwrap();
    copy_from(&mut watch, "v1").await;
    assert_eq!(server_failures(&client), 0);
}

/// A response whose `type_url` names another type than the polled one is
/// rejected: the next poll NACKs it with an `error_detail` naming both
/// types, and the server is not counted failed.
#[tokio::test]
async fn rest_source_nacks_a_response_of_another_type_naming_both() {
    let server = scripted_http::ScriptedHttp::start(|_| {
        scripted_http::Reply::json(format!(
            r#"{{"version_info": "1", "nonce": "n1", "type_url": "{LDS}", "resources": []}}"#
        ))
    })
    .await;
    let client = client_at(&[(server.uri().to_owned(), true)]);
    let _watch = client.watch::<ClusterType>(NAME).unwrap();
    let nack = request_where(&server, "a NACK", |b| b.get("error_detail").is_some()).await;
    let message = nack["error_detail"]["message"].as_str().unwrap();
    assert!(message.contains(CDS) && message.contains(LDS), "{message}");
    assert_eq!(nack["response_nonce"], "n1");
    assert_eq!(server_failures(&client), 0);
}

/// Requests are written in the proto field names (`version_info`,
/// `resource_names`, `type_url`, `response_nonce`, `error_detail`), as
/// Envoy's REST subscription prints them and as sovereign reads them, with
/// fields at their default value printed too: sovereign's request model
/// requires `node.cluster` (and a NACK's `error_detail.details`).
#[tokio::test]
async fn rest_source_writes_requests_in_proto_field_names() {
    let server = scripted_http::ScriptedHttp::start(|_| {
        scripted_http::Reply::json(format!(
            r#"{{"version_info": "1", "type_url": "{CDS}", "resources": [{}]}}"#,
            cluster_json(NAME, "v1")
        ))
    })
    .await;
    let client = client_at(&[(server.uri().to_owned(), true)]);
    let mut watch = client.watch::<ClusterType>(NAME).unwrap();
    copy_from(&mut watch, "v1").await;
    let first = server.recorded()[0].clone();
    assert_eq!(first.path, "/v3/discovery:clusters");
    let first = first.body;
    for field in [
        "version_info",
        "resource_names",
        "type_url",
        "response_nonce",
        "node",
    ] {
        assert!(first.get(field).is_some(), "{field} in {first}");
    }
    for camel in ["versionInfo", "resourceNames", "typeUrl", "responseNonce"] {
        assert!(first.get(camel).is_none(), "{camel} in {first}");
    }
    assert_eq!(first["resource_names"], serde_json::json!([NAME]));
    assert_eq!(first["node"]["id"], "rest-node");
    assert_eq!(
        first["node"]["cluster"], "",
        "printed though empty: {first}"
    );
}

/// The testbed's REST server reads a request in either form the protobuf
/// JSON mapping allows: proto field names or lowerCamelCase.
#[tokio::test]
async fn testbed_rest_server_reads_either_field_naming() {
    let testbed = Testbed::start([rest_spec("rest")]).await.unwrap();
    let server = &testbed.servers()[0];
    serve(server, "v1");
    let bodies = [
        r#"{"node": {"id": "snake"}, "resource_names": ["c1"], "type_url": "TYPE"}"#,
        r#"{"node": {"id": "camel"}, "resourceNames": ["c1"], "typeUrl": "TYPE"}"#,
    ];
    for body in bodies {
        let body = body.replace("TYPE", CDS);
        let (status, answer) =
            scripted_http::post_raw(&server.uri(), "/v3/discovery:clusters", &body).await;
        assert_eq!(status, 200, "{body}: {answer}");
        let response = xdsfed_core::json::discovery_response_from_json(answer.as_bytes()).unwrap();
        assert_eq!(response.resources.len(), 1, "{body}");
    }
}

/// One resource that does not decode is a rejected resource, not a failed
/// poll (gRFC A46 as on ADS; Envoy's `UpdateRejected`): the other resources
/// apply, the next poll NACKs with the last accepted version, the
/// response's nonce and an INVALID_ARGUMENT `error_detail` naming the
/// resource and why, the bad resource's last good copy keeps serving, and
/// the server is not counted failed.
#[tokio::test]
async fn rest_source_nacks_a_resource_that_does_not_decode_and_keeps_the_rest() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let broken = Arc::new(AtomicBool::new(false));
    let server = scripted_http::ScriptedHttp::start({
        let broken = Arc::clone(&broken);
        move |_| {
            let (version, resources) = if broken.load(Ordering::SeqCst) {
                let bad = cluster_json("c2", "v2").replace(
                    r#""type": "EDS""#,
                    r#""type": "EDS", "connect_timeout": "forever""#,
                );
                ("2", format!("{},{bad}", cluster_json(NAME, "v2")))
            } else {
                let good = [cluster_json(NAME, "v1"), cluster_json("c2", "v1")];
                ("1", good.join(","))
            };
            scripted_http::Reply::json(format!(
                r#"{{"version_info": "{version}", "nonce": "n{version}", "type_url": "{CDS}",
                    "resources": [{resources}]}}"#
            ))
        }
    })
    .await;
    let client = client_at(&[(server.uri().to_owned(), true)]);
    let mut c1 = client.watch::<ClusterType>(NAME).unwrap();
    let mut c2 = client.watch::<ClusterType>("c2").unwrap();
    copy_from(&mut c1, "v1").await;
    copy_from(&mut c2, "v1").await;
    broken.store(true, Ordering::SeqCst);
    copy_from(&mut c1, "v2").await;
    let nack = request_where(&server, "a NACK", |b| b.get("error_detail").is_some()).await;
    assert_eq!(
        nack["version_info"], "1",
        "the last accepted version: {nack}"
    );
    assert_eq!(nack["response_nonce"], "n2", "{nack}");
    let detail = &nack["error_detail"];
    assert_eq!(detail["code"], 3, "INVALID_ARGUMENT: {detail}");
    let message = detail["message"].as_str().unwrap();
    assert!(
        message.contains("c2") && message.contains("connect_timeout"),
        "{message}"
    );
    assert!(
        !message.contains(NAME),
        "only the bad resource is named: {message}"
    );
    assert_eq!(detail["details"], serde_json::json!([]), "{detail}");
    eventually("c2 is marked NACKed", || {
        c2.state().status == ResourceStatus::Nacked
    })
    .await;
    still_serves(&c2, "v1");
    assert_eq!(
        server_failures(&client),
        0,
        "a rejected resource is no server failure"
    );
}

/// The first poll after a type's names change carries an empty
/// `version_info`: sovereign versions everything its template renders, so
/// a poll naming a new name at the version held is answered `304 Not
/// Modified`, and the new name would wait for the next change of the whole
/// type.
#[tokio::test]
async fn rest_source_asks_afresh_after_subscribing_a_new_name() {
    let plane = SovereignLike::default();
    plane.serve(NAME, "v1");
    plane.serve("c2", "v1");
    let server = plane.start().await;
    let client = client_at(&[(server.uri().to_owned(), true)]);
    let mut c1 = client.watch::<ClusterType>(NAME).unwrap();
    copy_from(&mut c1, "v1").await;
    let version = request_where(&server, "a poll at the version held", |b| {
        b["version_info"].as_str().is_some_and(|v| !v.is_empty())
    })
    .await["version_info"]
        .clone();
    let mut c2 = client.watch::<ClusterType>("c2").unwrap();
    copy_from(&mut c2, "v1").await;
    let fresh = request_where(&server, "the poll naming c2", |b| {
        b["resource_names"].as_array().is_some_and(|n| n.len() == 2)
    })
    .await;
    assert_eq!(fresh["version_info"], "", "not {version}: {fresh}");
}
