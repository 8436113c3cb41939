//! HTTP CDN delivery (xDS TP1 "Use cases"), end to end over loopback: a
//! list collection served by the testbed's static file host, its locator
//! entries fetched from two ADS servers of their own authorities.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::time::Duration;
use xdsfed_core::types::ClusterView;

use futures::FutureExt as _;
use xdsfed_client::client::XdsClient;
use xdsfed_client::transport::{BackoffConfig, TransportOptions};
use xdsfed_client::watch::{CollectionEvent, CollectionWatch};
use xdsfed_core::bootstrap::Bootstrap;
use xdsfed_core::types::ClusterType;
use xdsfed_testbed::resources::{cluster, cluster_collection, locator};
use xdsfed_testbed::{Faults, Protocol, Server, ServerSpec, Testbed};

/// Bounds how long a failure takes to show; never a timing assertion.
const PATIENCE: Duration = Duration::from_secs(10);

const CDN: &str = "cdn.example";
const MESH_A: &str = "a.example";
const MESH_B: &str = "b.example";
/// The CDN's `request_timeout` in the bootstrap below.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);

fn cluster_name(authority: &str, id: &str) -> String {
    format!("xdstp://{authority}/envoy.config.cluster.v3.Cluster/{id}")
}

fn collection_name(id: &str) -> String {
    format!("xdstp://{CDN}/envoy.config.cluster.v3.ClusterCollection/{id}")
}

fn collection_path(id: &str) -> String {
    format!("/{CDN}/envoy.config.cluster.v3.ClusterCollection/{id}")
}

/// A CDN server for `cdn.example` and two ADS servers for the meshes.
struct Setup {
    testbed: Testbed,
    client: XdsClient,
}

impl Setup {
    async fn start() -> Self {
        let testbed = Testbed::start([
            ServerSpec::new("cdn", [CDN]).with_protocol(Protocol::HttpCdn),
            ServerSpec::new("mesh-a", [MESH_A]),
            ServerSpec::new("mesh-b", [MESH_B]),
        ])
        .await
        .unwrap();
        let [cdn, a, b] = [0, 1, 2].map(|i| testbed.servers()[i].uri());
        let ads = |uri: &str| {
            format!(r#"{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]}}"#)
        };
        let bootstrap = format!(
            r#"{{"node": {{"id": "cdn-e2e"}},
                "xds_servers": [{a_server}],
                "authorities": {{
                  "{CDN}": {{"xds_servers": [{{"server_uri": "{cdn}", "channel_creds": [{{"type": "insecure"}}],
                            "api_type": "HTTP_CDN", "refresh_delay": "0.05s", "request_timeout": "0.5s"}}]}},
                  "{MESH_A}": {{"xds_servers": [{a_server}]}},
                  "{MESH_B}": {{"xds_servers": [{b_server}]}}}}}}"#,
            a_server = ads(&a),
            b_server = ads(&b),
        );
        let defaults = TransportOptions::default();
        let options = TransportOptions {
            does_not_exist_timeout: Duration::from_millis(500),
            backoff: BackoffConfig {
                initial: Duration::from_millis(20),
                max: Duration::from_millis(200),
                ..defaults.backoff
            },
            ..defaults
        };
        let client = XdsClient::builder(Bootstrap::from_json_str(&bootstrap).unwrap())
            .transport_options(options)
            .build()
            .unwrap();
        Setup { testbed, client }
    }

    fn server(&self, i: usize) -> &Server {
        &self.testbed.servers()[i]
    }

    fn cdn(&self) -> &Server {
        self.server(0)
    }

    /// Publishes the collection `id` on the CDN with locators to `members`.
    fn publish(&self, id: &str, members: &[&str]) {
        let entries = members.iter().map(|m| locator(m)).collect();
        self.cdn()
            .set_resource(&collection_name(id), cluster_collection(entries))
            .unwrap();
    }

    /// Serves the cluster `id` of `authority` (on its mesh's ADS server).
    fn serve_cluster(&self, authority: &str, id: &str, service: &str) {
        let server = if authority == MESH_A { 1 } else { 2 };
        let name = cluster_name(authority, id);
        self.server(server)
            .set_message(&name, &cluster(&name, service))
            .unwrap();
    }

    /// The CDN server's counter of valid updates, as the client sees it.
    fn cdn_valid_updates(&self) -> u64 {
        let status = self.client.status();
        let cdn = self.cdn().uri();
        status
            .servers
            .iter()
            .find(|s| s.server.starts_with(&cdn))
            .map_or(0, |s| s.resource_updates_valid)
    }
}

fn service_of(c: &ClusterView) -> &str {
    c.eds_service_name().unwrap_or_default()
}

/// The latest event text per member ("#listed" for the member list,
/// "#error" for the collection's own error, "#empty" for `Empty`).
type Seen = HashMap<String, String>;

/// Collects events until `done(seen)`.
async fn until(
    watch: &mut CollectionWatch<ClusterType>,
    seen: &mut Seen,
    what: &str,
    done: impl Fn(&Seen) -> bool,
) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !done(seen) {
        let event = match tokio::time::timeout_at(deadline, watch.next()).await {
            Ok(Some(event)) => event,
            Ok(None) => panic!("collection watch ended waiting for {what}"),
            Err(_) => panic!("no {what} within {PATIENCE:?}: {seen:?}"),
        };
        record(watch, seen, event);
    }
}

fn record(
    watch: &CollectionWatch<ClusterType>,
    seen: &mut Seen,
    event: CollectionEvent<ClusterView>,
) {
    let collection = watch.key().name.to_string();
    let (name, text) = match event {
        CollectionEvent::Upsert { name, resource } => (
            name.to_string(),
            format!("upsert {}", service_of(&resource)),
        ),
        CollectionEvent::Removed { name } => (name.to_string(), "removed".to_owned()),
        CollectionEvent::Empty => ("#empty".to_owned(), "empty".to_owned()),
        CollectionEvent::Error { name, error } if *name == *collection => {
            ("#error".to_owned(), error.to_string())
        }
        CollectionEvent::Error { name, error } => (name.to_string(), format!("error {error}")),
        CollectionEvent::Listed { members } => ("#listed".to_owned(), members.join(" ")),
    };
    seen.insert(name, text);
}

fn is(seen: &Seen, name: &str, text: &str) -> bool {
    seen.get(name).is_some_and(|t| t == text)
}

/// Waits until the collection's own state holds no error (the source
/// recovered), taking events meanwhile.
async fn until_recovered(watch: &mut CollectionWatch<ClusterType>, seen: &mut Seen) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while watch.state().error.is_some() {
        let step = tokio::time::Instant::now() + Duration::from_millis(50);
        assert!(step < deadline, "no recovery within {PATIENCE:?}: {seen:?}");
        if let Ok(Some(event)) = tokio::time::timeout_at(step, watch.next()).await {
            record(watch, seen, event);
        }
    }
}

/// Waits until the CDN's log holds `n` more `304`s for `path` than at `from`.
async fn until_revalidated(server: &Server, path: &str, n: usize) {
    let count = || {
        server
            .cdn_requests()
            .iter()
            .filter(|r| r.path == path && r.status == 304)
            .count()
    };
    let target = count() + n;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while count() < target {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {n} revalidations of {path} within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// 1 and 2: the members of a CDN-served list collection come from their
/// own authorities' ADS servers; an unchanged file is revalidated with
/// `304` (no update counted, no event); a changed one is followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_list_collection_members_come_from_their_own_authorities() {
    let s = Setup::start().await;
    let (a, b, c) = (
        cluster_name(MESH_A, "pay"),
        cluster_name(MESH_B, "ledger"),
        cluster_name(MESH_B, "audit"),
    );
    s.serve_cluster(MESH_A, "pay", "pay-a");
    s.serve_cluster(MESH_B, "ledger", "ledger-b");
    s.serve_cluster(MESH_B, "audit", "audit-b");
    s.publish("mesh/all", &[&a, &b]);
    let mut watch = s
        .client
        .watch_list_collection::<ClusterType>(&collection_name("mesh/all"))
        .unwrap();
    let mut seen = Seen::new();
    let both = format!("{a} {b}");
    until(&mut watch, &mut seen, "both members", |s| {
        is(s, &a, "upsert pay-a") && is(s, &b, "upsert ledger-b") && is(s, "#listed", &both)
    })
    .await;
    let status = s.client.status();
    let member = status.resources.iter().find(|r| r.name == b).unwrap();
    assert_eq!(member.authority.as_deref(), Some(MESH_B));
    assert!(member.server.starts_with(&s.server(2).uri()), "{member:?}");

    // Unchanged: revalidated with the ETag, answered 304, nothing new.
    let path = collection_path("mesh/all");
    let valid = s.cdn_valid_updates();
    until_revalidated(s.cdn(), &path, 2).await;
    let last = s
        .cdn()
        .cdn_requests()
        .into_iter()
        .rev()
        .find(|r| r.path == path)
        .unwrap();
    assert!(last.if_none_match.is_some(), "{last:?}");
    assert_eq!(s.cdn_valid_updates(), valid, "a 304 is not an update");
    assert!(watch.next().now_or_never().is_none(), "no event for a 304");

    // A member is added and one removed on the CDN.
    s.publish("mesh/all", &[&a, &c]);
    let now = format!("{a} {c}");
    until(&mut watch, &mut seen, "the new member list", |s| {
        is(s, &c, "upsert audit-b") && is(s, &b, "removed") && is(s, "#listed", &now)
    })
    .await;
}

/// 3: a 5xx, a malformed body, a refused connection and a timeout keep the
/// last good collection and give the watchers an ambient error; the next
/// good answer recovers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_failures_keep_the_collection_and_give_an_ambient_error() {
    let s = Setup::start().await;
    let a = cluster_name(MESH_A, "pay");
    let b = cluster_name(MESH_B, "ledger");
    s.serve_cluster(MESH_A, "pay", "pay-a");
    s.serve_cluster(MESH_B, "ledger", "ledger-b");
    s.publish("mesh/all", &[&a]);
    let mut watch = s
        .client
        .watch_list_collection::<ClusterType>(&collection_name("mesh/all"))
        .unwrap();
    let mut seen = Seen::new();
    until(&mut watch, &mut seen, "the member", |s| {
        is(s, &a, "upsert pay-a") && is(s, "#listed", &a)
    })
    .await;

    for (what, faults) in [
        (
            "503",
            Faults {
                cdn_status: Some(503),
                ..Faults::default()
            },
        ),
        (
            "malformed body",
            Faults {
                cdn_malformed_body: true,
                ..Faults::default()
            },
        ),
        (
            "refused connections",
            Faults {
                refuse_connections: true,
                ..Faults::default()
            },
        ),
        (
            "an answer later than request_timeout",
            Faults {
                response_delay: Some(REQUEST_TIMEOUT * 2),
                ..Faults::default()
            },
        ),
    ] {
        seen.remove("#error");
        s.cdn().set_faults(faults);
        until(&mut watch, &mut seen, what, |s| s.contains_key("#error")).await;
        let state = watch.state();
        assert!(state.resource.is_some(), "{what}: the copy keeps serving");
        assert!(state.error.is_some(), "{what}: {state:?}");
        assert!(
            watch
                .member_state(a.as_str())
                .and_then(|m| m.resource)
                .is_some(),
            "{what}: the member keeps serving"
        );
        s.cdn().set_faults(Faults::default());
        until_recovered(&mut watch, &mut seen).await;
    }

    // Recovered: changes are followed again.
    s.publish("mesh/all", &[&a, &b]);
    let both = format!("{a} {b}");
    until(&mut watch, &mut seen, "the change after recovery", |s| {
        is(s, &b, "upsert ledger-b") && is(s, "#listed", &both)
    })
    .await;
}

/// 4: a `404` for a collection never seen is the server's answer that it
/// does not exist, at once (no does-not-exist timer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_not_found_for_a_never_seen_collection_is_does_not_exist() {
    let s = Setup::start().await;
    let mut watch = s
        .client
        .watch_list_collection::<ClusterType>(&collection_name("nowhere"))
        .unwrap();
    let mut seen = Seen::new();
    until(&mut watch, &mut seen, "does-not-exist", |s| {
        s.contains_key("#empty")
    })
    .await;
    let log = s.cdn().cdn_requests();
    assert_eq!(
        log.first().map(|r| (r.path.clone(), r.status)),
        Some((collection_path("nowhere"), 404))
    );

    // Published later: the next poll finds it.
    let a = cluster_name(MESH_A, "pay");
    s.serve_cluster(MESH_A, "pay", "pay-a");
    s.publish("nowhere", &[&a]);
    until(&mut watch, &mut seen, "the published collection", |s| {
        is(s, &a, "upsert pay-a")
    })
    .await;
}

/// `bootstrap-examples/cdn/`: the bootstrap names the CDN with its base
/// path, the mesh scenario loads, and the published file is the collection
/// the comments describe. `XDSFED_WRITE_EXAMPLES=1` writes the file again.
#[test]
fn cdn_example_is_consistent() {
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
    use prost::Message as _;
    use xdsfed_core::bootstrap::ServerProtocol;

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bootstrap-examples/cdn");
    let bootstrap = Bootstrap::from_file(dir.join("bootstrap.yaml")).unwrap();
    let cdn = &bootstrap.authorities[CDN].xds_servers[0];
    assert!(
        matches!(cdn.protocol, ServerProtocol::HttpCdn(_)),
        "{cdn:?}"
    );
    let base = cdn
        .server_uri
        .strip_prefix("http://127.0.0.1:18100")
        .unwrap();
    xdsfed_testbed::scenario::Scenario::from_file(&dir.join("mesh.yaml")).unwrap();

    let members = [cluster_name(MESH_A, "pay"), cluster_name(MESH_B, "ledger")];
    let expected = DiscoveryResponse {
        version_info: "1".into(),
        type_url: xdsfed_core::types::CLUSTER_COLLECTION_TYPE_URL.into(),
        resources: vec![cluster_collection(
            members.iter().map(|m| locator(m)).collect(),
        )],
        ..Default::default()
    }
    .encode_to_vec();
    let file = dir.join(format!("www{base}{}", collection_path("mesh/all")));
    if std::env::var_os("XDSFED_WRITE_EXAMPLES").is_some() {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, &expected).unwrap();
    }
    let on_disk = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    assert!(
        on_disk == expected,
        "{} is stale: run with XDSFED_WRITE_EXAMPLES=1",
        file.display()
    );
}

/// A CA and a leaf it signed for `127.0.0.1`: (CA, certificate, key) PEM.
fn pki() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

/// A client whose `cdn.example` is the CDN at `cdn` over HTTPS with the
/// `tls` credentials `config` (JSON members), and `a.example` the ADS
/// server at `mesh`.
fn https_client(mesh: &str, cdn: &str, config: &str) -> XdsClient {
    let bootstrap = format!(
        r#"{{"xds_servers": [{{"server_uri": "{mesh}", "channel_creds": [{{"type": "insecure"}}]}}],
            "authorities": {{
              "{CDN}": {{"xds_servers": [{{"server_uri": "{cdn}/", "api_type": "HTTP_CDN",
                  "channel_creds": [{{"type": "tls", "config": {{{config}}}}}]}}]}},
              "{MESH_A}": {{}}}}}}"#
    );
    XdsClient::builder(Bootstrap::from_json_str(&bootstrap).unwrap())
        .build()
        .unwrap()
}

/// Starts a CDN over HTTPS (`tls`) serving a collection whose one member
/// is on an ADS server; returns the testbed and the member's name.
async fn https_setup(tls: xdsfed_testbed::ServerTls) -> (Testbed, String) {
    let testbed = Testbed::start([
        ServerSpec::new("cdn", [CDN])
            .with_protocol(Protocol::HttpCdn)
            .with_tls(tls),
        ServerSpec::new("mesh-a", [MESH_A]),
    ])
    .await
    .unwrap();
    let (cdn, mesh) = (&testbed.servers()[0], &testbed.servers()[1]);
    assert!(cdn.uri().starts_with("https://"), "{}", cdn.uri());
    let a = cluster_name(MESH_A, "pay");
    mesh.set_message(&a, &cluster(&a, "pay-a")).unwrap();
    cdn.set_resource(
        &collection_name("mesh/all"),
        cluster_collection(vec![locator(&a)]),
    )
    .unwrap();
    (testbed, a)
}

/// Waits for the member `a` (`Ok`) or the collection's error (`Err`).
async fn member_or_error(client: &XdsClient, a: &str) -> Result<(), String> {
    let mut watch = client
        .watch_list_collection::<ClusterType>(&collection_name("mesh/all"))
        .unwrap();
    let mut seen = Seen::new();
    until(&mut watch, &mut seen, "the member or an error", |s| {
        s.contains_key(a) || s.contains_key("#error")
    })
    .await;
    match seen.get("#error") {
        Some(error) => Err(error.clone()),
        None => Ok(()),
    }
}

/// A CDN over HTTPS is trusted through the bootstrap's CA file only: the
/// collection arrives; with another CA it is a failure of the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_over_https_trusts_only_the_configured_ca() {
    let ((ca, cert, key), (other_ca, _, _)) = (pki(), pki());
    let tls = xdsfed_testbed::ServerTls {
        cert_pem: cert,
        key_pem: key,
        client_ca_pem: None,
    };
    let (testbed, a) = https_setup(tls).await;
    let (cdn, mesh) = (testbed.servers()[0].uri(), testbed.servers()[1].uri());
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, pem: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).unwrap();
        path.display().to_string()
    };
    let (trusted, untrusted) = (file("ca.pem", &ca), file("other.pem", &other_ca));

    let client = https_client(
        &mesh,
        &cdn,
        &format!(r#""ca_certificate_file": "{trusted}""#),
    );
    assert_eq!(member_or_error(&client, &a).await, Ok(()));
    let client = https_client(
        &mesh,
        &cdn,
        &format!(r#""ca_certificate_file": "{untrusted}""#),
    );
    let error = member_or_error(&client, &a).await.unwrap_err();
    assert!(error.contains("certificate"), "{error}");
}

/// A CDN over HTTPS that offers HTTP/2 (ALPN `h2`) is spoken to in
/// HTTP/2: the collection and its refreshes are requests multiplexed on
/// one connection, as CDNs serve them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_over_https_speaks_http2_when_the_server_offers_it() {
    let (ca, cert, key) = pki();
    let tls = xdsfed_testbed::ServerTls {
        cert_pem: cert,
        key_pem: key,
        client_ca_pem: None,
    };
    let (testbed, a) = https_setup(tls).await;
    let (cdn, mesh) = (&testbed.servers()[0], testbed.servers()[1].uri());
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca).unwrap();
    let client = https_client(
        &mesh,
        &cdn.uri(),
        &format!(r#""ca_certificate_file": "{}""#, ca_file.display()),
    );
    assert_eq!(member_or_error(&client, &a).await, Ok(()));
    let requests = cdn.cdn_requests();
    assert!(!requests.is_empty());
    for request in &requests {
        assert_eq!(request.version, http::Version::HTTP_2, "{request:?}");
    }
}

/// mTLS: a CDN that requires client certificates serves a client that
/// presents one its CA signed, and refuses one that presents none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_over_mtls_needs_the_client_certificate() {
    let ((ca, cert, key), (client_ca, client_cert, client_key)) = (pki(), pki());
    let tls = xdsfed_testbed::ServerTls {
        cert_pem: cert,
        key_pem: key,
        client_ca_pem: Some(client_ca),
    };
    let (testbed, a) = https_setup(tls).await;
    let (cdn, mesh) = (testbed.servers()[0].uri(), testbed.servers()[1].uri());
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, pem: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).unwrap();
        path.display().to_string()
    };
    let (ca, cert, key) = (
        file("ca.pem", &ca),
        file("client.pem", &client_cert),
        file("client.key", &client_key),
    );
    let with_cert = format!(
        r#""ca_certificate_file": "{ca}", "certificate_file": "{cert}", "private_key_file": "{key}""#
    );
    let client = https_client(&mesh, &cdn, &with_cert);
    assert_eq!(member_or_error(&client, &a).await, Ok(()));
    let client = https_client(&mesh, &cdn, &format!(r#""ca_certificate_file": "{ca}""#));
    assert!(member_or_error(&client, &a).await.is_err());
}
