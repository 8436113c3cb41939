//! gRFC A97 JWT call credentials end to end: a client whose bootstrap
//! gives a server `call_creds` of type `jwt_token_file` sends the file's
//! token as `authorization: Bearer <token>` on every ADS stream, REST-JSON
//! request and HTTP CDN fetch, over TLS, against the testbed on loopback.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::credentials::{jwt, pki};
use common::resources::cluster;
use common::{changed, eventually, fast_transport, next};
use xdsfed::client::client::XdsClient;
use xdsfed::client::watch::WatchEvent;
use xdsfed::core::bootstrap::Bootstrap;
use xdsfed::core::types::ClusterType;
use xdsfed::testbed::{Protocol, Server, ServerSpec, Testbed};

const AUTHORITY: &str = "secure.example";
const CLUSTER: &str = "xdstp://secure.example/envoy.config.cluster.v3.Cluster/payments";
const EDS: &str = "xdstp://secure.example/envoy.config.endpoint.v3.ClusterLoadAssignment/payments";

/// Writes `token` to `path` as a rotation does: a new file renamed over
/// the old one, with a trailing newline the credential trims.
fn write_token(path: &Path, token: &str) {
    let temp = path.with_extension("new");
    std::fs::write(&temp, format!("{token}\n")).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

/// A client of the server at `uri` for `secure.example`, over TLS trusting
/// `ca`, with the JWT token file `token`; `extra` adds members to the
/// server entry (`api_type` and timers).
fn client(uri: &str, ca: &Path, token: &Path, extra: &str) -> XdsClient {
    let json = format!(
        r#"{{"xds_servers": [{{"server_uri": "{uri}",
              "channel_creds": [{{"type": "tls", "config": {{"ca_certificate_file": "{ca}"}}}}],
              "call_creds": [{{"type": "some_future_type"}},
                             {{"type": "jwt_token_file", "config": {{"jwt_token_file": "{token}"}}}}]{extra}}}],
            "node": {{"id": "jwt-node"}},
            "authorities": {{"{AUTHORITY}": {{}}}}}}"#,
        ca = ca.display(),
        token = token.display(),
    );
    XdsClient::builder(Bootstrap::from_json_str(&json).expect("a valid bootstrap"))
        .transport_options(fast_transport())
        .build()
        .expect("in a runtime")
}

struct Setup {
    testbed: Testbed,
    dir: tempfile::TempDir,
    ca: std::path::PathBuf,
    token: std::path::PathBuf,
}

impl Setup {
    async fn start(protocol: Protocol) -> Self {
        let (tls, ca_pem) = pki();
        let testbed = Testbed::start([ServerSpec::new("secure", [AUTHORITY])
            .with_protocol(protocol)
            .with_tls(tls)])
        .await
        .unwrap();
        testbed.servers()[0]
            .set_message(CLUSTER, &cluster(CLUSTER, EDS))
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, ca_pem).unwrap();
        let token = dir.path().join("token.jwt");
        Setup {
            testbed,
            dir,
            ca,
            token,
        }
    }

    fn server(&self) -> &Server {
        &self.testbed.servers()[0]
    }
}

/// gRFC A97: "the call credential will add a header named
/// `authorization`. The header value will be the string `Bearer ` [...]
/// followed by the token value"; the file is read again for a new stream
/// once it changed, so a rotated token is used by the next stream.
#[tokio::test]
async fn ads_streams_carry_the_bearer_token_and_the_next_stream_the_rotated_one() {
    let setup = Setup::start(Protocol::Ads).await;
    let first = jwt("first");
    write_token(&setup.token, &first);
    let client = client(&setup.server().uri(), &setup.ca, &setup.token, "");
    let mut watch = client.watch::<ClusterType>(CLUSTER).unwrap();
    assert_eq!(changed(&mut watch).await.name(), CLUSTER);
    let streams = setup.server().recording().streams();
    assert_eq!(
        streams[0].authorization,
        vec![format!("Bearer {first}")],
        "the ADS stream's metadata"
    );

    let second = jwt("second");
    write_token(&setup.token, &second);
    let before = setup.server().recording().stream_count();
    setup
        .server()
        .restart(true, Duration::from_millis(50))
        .await
        .unwrap();
    eventually("the client opens a new stream", || {
        setup.server().recording().stream_count() > before
    })
    .await;
    let streams = setup.server().recording().streams();
    assert_eq!(
        streams[before].authorization,
        vec![format!("Bearer {second}")],
        "the next stream carries the rotated token"
    );
    drop(setup.dir);
}

/// A token file that is missing fails the connection (the transport's
/// failure, before any stream opens), in an error naming the file.
#[tokio::test]
async fn missing_token_file_fails_the_connection_naming_the_file() {
    let setup = Setup::start(Protocol::Ads).await;
    let client = client(&setup.server().uri(), &setup.ca, &setup.token, "");
    let mut watch = client.watch::<ClusterType>(CLUSTER).unwrap();
    match next(&mut watch).await {
        WatchEvent::Error(e) => {
            let message = e.to_string();
            assert!(
                message.contains(&setup.token.display().to_string()),
                "names the token file: {message}"
            );
        }
        other => panic!("expected an error, got {}", common::describe(&other)),
    }
    assert_eq!(
        setup.server().recording().stream_count(),
        0,
        "no stream without the token"
    );
}

/// REST-JSON polls carry the token as an HTTP `Authorization` header.
#[tokio::test]
async fn rest_requests_carry_the_bearer_token() {
    let setup = Setup::start(Protocol::Rest).await;
    let token = jwt("rest");
    write_token(&setup.token, &token);
    let extra = r#", "api_type": "REST", "refresh_delay": "0.05s", "request_timeout": "1s""#;
    let client = client(&setup.server().uri(), &setup.ca, &setup.token, extra);
    let mut watch = client.watch::<ClusterType>(CLUSTER).unwrap();
    assert_eq!(changed(&mut watch).await.name(), CLUSTER);
    let streams = setup.server().recording().streams();
    assert_eq!(streams[0].authorization, vec![format!("Bearer {token}")]);
}

/// HTTP CDN fetches carry the token as an HTTP `Authorization` header.
#[tokio::test]
async fn cdn_fetches_carry_the_bearer_token() {
    let setup = Setup::start(Protocol::HttpCdn).await;
    let token = jwt("cdn");
    write_token(&setup.token, &token);
    let extra = r#", "api_type": "HTTP_CDN", "refresh_delay": "0.05s", "request_timeout": "1s""#;
    let uri = format!("{}/", setup.server().uri());
    let client = client(&uri, &setup.ca, &setup.token, extra);
    let mut watch = client.watch::<ClusterType>(CLUSTER).unwrap();
    assert_eq!(changed(&mut watch).await.name(), CLUSTER);
    let requests = setup.server().cdn_requests();
    assert!(!requests.is_empty());
    let expected = format!("Bearer {token}");
    assert!(
        requests
            .iter()
            .all(|r| r.authorization.as_deref() == Some(expected.as_str())),
        "every fetch carries the token"
    );
}

/// The policy stream carries the token on its stream and on the health
/// checks beside it.
#[tokio::test]
async fn policy_stream_and_its_health_checks_carry_the_bearer_token() {
    use xdsfed::core::policy_stream::wire::{ValidatingPolicy, ValidatingPolicySpec, Validation};
    use xdsfed::core::types::ValidatingPolicyType;
    use xdsfed::testbed::policy::CallKind;

    let setup = Setup::start(Protocol::policy_stream()).await;
    let name = format!("xdstp://{AUTHORITY}/kyverno.http.v1alpha1.ValidatingPolicy/p1");
    let policy = ValidatingPolicy {
        name: "p1".into(),
        delete: false,
        spec: Some(ValidatingPolicySpec {
            validations: vec![Validation {
                expression: "true".into(),
                ..Default::default()
            }],
            evaluation_mode: "Envoy".into(),
            ..Default::default()
        }),
    };
    setup.server().set_message("p1", &policy).unwrap();
    let token = jwt("policy");
    write_token(&setup.token, &token);
    let extra = r#", "protocol": "policy_stream", "policy_stream": {"poll_interval": "0.05s", "health_check_interval": "0.1s"}"#;
    let client = client(&setup.server().uri(), &setup.ca, &setup.token, extra);
    let mut watch = client.watch::<ValidatingPolicyType>(&name).unwrap();
    assert_eq!(changed(&mut watch).await.name, "p1");
    let expected = vec![format!("Bearer {token}")];
    eventually("a stream and a health check were seen", || {
        let calls = setup.server().policies().calls();
        [CallKind::Stream, CallKind::HealthCheck]
            .iter()
            .all(|kind| calls.iter().any(|c| c.kind == *kind))
    })
    .await;
    let calls = setup.server().policies().calls();
    assert!(
        calls.iter().all(|c| c.authorization == expected),
        "every call carries the token: {calls:?}"
    );
}
