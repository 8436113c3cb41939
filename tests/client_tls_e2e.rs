//! TLS and mTLS to management servers, with certificates made in the test.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;

use common::resources::{cluster, endpoints};
use common::{changed, fast_transport, next};
use xdsfed::client::client::XdsClient;
use xdsfed::client::watch::WatchEvent;
use xdsfed::core::bootstrap::Bootstrap;
use xdsfed::core::types::{ClusterType, EndpointType};
use xdsfed::testbed::{ServerSpec, ServerTls, Testbed};

const CLUSTER: &str = "xdstp://secure.example/envoy.config.cluster.v3.Cluster/payments";
const EDS: &str = "xdstp://secure.example/envoy.config.endpoint.v3.ClusterLoadAssignment/payments";

/// A CA and a leaf it signed for `127.0.0.1`, all PEM.
struct Pki {
    ca: String,
    cert: String,
    key: String,
}

fn pki() -> Pki {
    let (tls, ca) = common::credentials::pki();
    Pki {
        ca,
        cert: tls.cert_pem,
        key: tls.key_pem,
    }
}

fn write(dir: &Path, name: &str, pem: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, pem).expect("temp file");
    path.display().to_string()
}

fn tls_bootstrap(uri: &str, creds_config: &str) -> XdsClient {
    let json = format!(
        r#"{{"xds_servers": [{{"server_uri": "{uri}", "channel_creds": [{{"type": "tls", "config": {{{creds_config}}}}}]}}],
            "node": {{"id": "tls-node"}},
            "authorities": {{"secure.example": {{}}}}}}"#
    );
    let bootstrap = Bootstrap::from_json_str(&json).expect("valid TLS bootstrap");
    XdsClient::builder(bootstrap)
        .transport_options(fast_transport())
        .build()
        .expect("in a runtime")
}

#[tokio::test]
async fn tls_server_is_verified_against_the_configured_ca() {
    let server_pki = pki();
    let tls = ServerTls {
        cert_pem: server_pki.cert.clone(),
        key_pem: server_pki.key.clone(),
        client_ca_pem: None,
    };
    let testbed = Testbed::start([ServerSpec::new("secure", ["secure.example"]).with_tls(tls)])
        .await
        .unwrap();
    let server = &testbed.servers()[0];
    server.set_message(CLUSTER, &cluster(CLUSTER, EDS)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = write(dir.path(), "ca.pem", &server_pki.ca);

    let client = tls_bootstrap(&server.uri(), &format!(r#""ca_certificate_file": "{ca}""#));
    let mut watch = client.watch::<ClusterType>(CLUSTER).unwrap();
    assert_eq!(changed(&mut watch).await.name(), CLUSTER);
}

#[tokio::test]
async fn tls_server_signed_by_another_ca_is_refused() {
    let server_pki = pki();
    let other = pki();
    let tls = ServerTls {
        cert_pem: server_pki.cert,
        key_pem: server_pki.key,
        client_ca_pem: None,
    };
    let testbed = Testbed::start([ServerSpec::new("secure", ["secure.example"]).with_tls(tls)])
        .await
        .unwrap();
    let server = &testbed.servers()[0];
    server.set_message(CLUSTER, &cluster(CLUSTER, EDS)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = write(dir.path(), "other-ca.pem", &other.ca);

    let client = tls_bootstrap(&server.uri(), &format!(r#""ca_certificate_file": "{ca}""#));
    let mut watch = client.watch::<ClusterType>(CLUSTER).unwrap();
    match next(&mut watch).await {
        WatchEvent::Error(e) => {
            assert!(e.message().contains(&server.uri()), "names the server: {e}")
        }
        other => panic!(
            "an untrusted server must not deliver: {}",
            common::describe(&other)
        ),
    }
}

#[tokio::test]
async fn mtls_client_presents_its_certificate() {
    let server_pki = pki();
    let client_pki = pki();
    let tls = ServerTls {
        cert_pem: server_pki.cert,
        key_pem: server_pki.key,
        client_ca_pem: Some(client_pki.ca.clone()),
    };
    let testbed = Testbed::start([ServerSpec::new("secure", ["secure.example"]).with_tls(tls)])
        .await
        .unwrap();
    let server = &testbed.servers()[0];
    server
        .set_message(EDS, &endpoints(EDS, &[("10.1.0.1", 443)]))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = write(dir.path(), "ca.pem", &server_pki.ca);
    let cert = write(dir.path(), "client.pem", &client_pki.cert);
    let key = write(dir.path(), "client.key", &client_pki.key);

    let client = tls_bootstrap(
        &server.uri(),
        &format!(
            r#""ca_certificate_file": "{ca}", "certificate_file": "{cert}", "private_key_file": "{key}""#
        ),
    );
    let mut watch = client.watch::<EndpointType>(EDS).unwrap();
    assert_eq!(changed(&mut watch).await.cluster_name(), EDS);
    assert_eq!(server.clients()[0].node_id, "tls-node");
}

#[tokio::test]
async fn mtls_server_refuses_a_client_without_a_certificate() {
    let server_pki = pki();
    let client_pki = pki();
    let tls = ServerTls {
        cert_pem: server_pki.cert,
        key_pem: server_pki.key,
        client_ca_pem: Some(client_pki.ca),
    };
    let testbed = Testbed::start([ServerSpec::new("secure", ["secure.example"]).with_tls(tls)])
        .await
        .unwrap();
    let server = &testbed.servers()[0];
    server
        .set_message(EDS, &endpoints(EDS, &[("10.1.0.1", 443)]))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = write(dir.path(), "ca.pem", &server_pki.ca);

    let client = tls_bootstrap(&server.uri(), &format!(r#""ca_certificate_file": "{ca}""#));
    let mut watch = client.watch::<EndpointType>(EDS).unwrap();
    let event = next(&mut watch).await;
    assert!(
        matches!(event, WatchEvent::Error(_)),
        "{}",
        common::describe(&event)
    );
    assert!(
        server
            .recording()
            .streams()
            .iter()
            .all(|s| s.response_count() == 0)
    );
}
