//! TLS to endpoints (gRFC A29): a cluster's `UpstreamTlsContext` names the
//! bootstrap's `file_watcher` certificate providers for the roots and the
//! client's identity; the server's chain is checked against those roots
//! and its SANs against `match_subject_alt_names`. Real tonic backends
//! over loopback TLS, certificates made by rcgen.

// Tests state their expectations with unwrap, expect and panic (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::TransportSocket;
use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::common_tls_context::ValidationContextType;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateProviderPluginInstance, CertificateValidationContext, CommonTlsContext,
    UpstreamTlsContext,
};
use envoy_types::pb::envoy::r#type::matcher::v3::StringMatcher;
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic::{Code, Request, Response, Status};
use xdsfed::proto::greeter::v1::greeter_client::GreeterClient;
use xdsfed::proto::greeter::v1::greeter_server::{Greeter, GreeterServer};
use xdsfed::proto::greeter::v1::{HelloReply, HelloRequest};
use xdsfed_core::bootstrap::Bootstrap;
use xdsfed_graph::GraphOptions;
use xdsfed_testbed::resources::{api_listener, cluster};
use xdsfed_testbed::{Server as TestbedServer, ServerSpec, Testbed};
use xdsfed_tonic::{ChannelBuilder, XdsChannel};

use common::*;

/// A certificate authority made for one test.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf with these DNS SANs: its certificate and key, as PEM.
    fn leaf(&self, sans: &[&str]) -> (String, String) {
        let params =
            CertificateParams::new(sans.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
                .unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

struct Greets(&'static str);

#[tonic::async_trait]
impl Greeter for Greets {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        Ok(Response::new(HelloReply {
            message: format!("hello {}", request.into_inner().name),
            backend: self.0.to_owned(),
        }))
    }

    async fn say_goodbye(&self, _: Request<HelloRequest>) -> Result<Response<HelloReply>, Status> {
        Err(Status::unimplemented("not in these tests"))
    }
}

/// A greeter serving TLS with `identity`, requiring a client certificate
/// signed by `client_ca` when given.
struct TlsBackend {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl TlsBackend {
    async fn start(
        name: &'static str,
        identity: &(String, String),
        client_ca: Option<&Ca>,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut tls = ServerTlsConfig::new().identity(Identity::from_pem(&identity.0, &identity.1));
        if let Some(ca) = client_ca {
            tls = tls.client_ca_root(Certificate::from_pem(&ca.pem));
        }
        let mut server = Server::builder().tls_config(tls).unwrap();
        let router = server.add_service(GreeterServer::new(Greets(name)));
        let task = tokio::spawn(async move {
            let _ = router
                .serve_with_incoming(TcpListenerStream::new(listener))
                .await;
        });
        Self { addr, task }
    }
}

impl Drop for TlsBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A bootstrap for `server` with `providers`: instance name to its
/// `file_watcher` config as JSON.
fn bootstrap_with(server: &TestbedServer, providers: &[(&str, String)]) -> Bootstrap {
    let providers: Vec<String> = providers
        .iter()
        .map(|(name, config)| {
            format!(r#""{name}": {{"plugin_name": "file_watcher", "config": {config}}}"#)
        })
        .collect();
    Bootstrap::from_json_str(&format!(
        r#"{{"xds_servers": [{{"server_uri": "{}", "channel_creds": [{{"type": "insecure"}}]}}],
            "node": {{"id": "tonic-tls-test"}}, "certificate_providers": {{{}}}}}"#,
        server.uri(),
        providers.join(",")
    ))
    .unwrap()
}

fn instance(name: &str) -> Option<CertificateProviderPluginInstance> {
    Some(CertificateProviderPluginInstance {
        instance_name: name.into(),
        certificate_name: String::new(),
    })
}

/// The EDS cluster `name` over TLS: roots from `roots`, identity from
/// `identity`, SANs matched exactly against `sans`.
fn tls_cluster(name: &str, roots: &str, identity: Option<&str>, sans: &[&str]) -> Cluster {
    let context = UpstreamTlsContext {
        common_tls_context: Some(CommonTlsContext {
            tls_certificate_provider_instance: identity.and_then(instance),
            validation_context_type: Some(ValidationContextType::ValidationContext(
                #[allow(deprecated)]
                CertificateValidationContext {
                    ca_certificate_provider_instance: instance(roots),
                    match_subject_alt_names: sans
                        .iter()
                        .map(|s| StringMatcher {
                            match_pattern: Some(MatchPattern::Exact((*s).into())),
                            ignore_case: false,
                        })
                        .collect(),
                    ..Default::default()
                },
            )),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut c = cluster(name, &format!("{name}-endpoints"));
    c.transport_socket = Some(TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(ConfigType::TypedConfig(Any {
            type_url: UpstreamTlsContext::type_url(),
            value: context.encode_to_vec(),
        })),
    });
    c
}

/// The testbed serving `xds:///greeter` → cluster `secure` → `backend`.
async fn serve_greeter(testbed: &Testbed, backend: SocketAddr, secure: &Cluster) {
    let server = testbed.server("main").unwrap();
    server
        .set_message("greeter", &api_listener("greeter", "greeter-routes"))
        .unwrap();
    let all = route(
        "all",
        PathSpecifier::Prefix("/".into()),
        to_cluster("secure"),
    );
    server
        .set_message("greeter-routes", &routes("greeter-routes", vec![all]))
        .unwrap();
    server.set_message("secure", secure).unwrap();
    let cla = xdsfed_testbed::resources::endpoints(
        "secure-endpoints",
        &[("127.0.0.1", u32::from(backend.port()))],
    );
    let mut cla = cla;
    for locality in &mut cla.endpoints {
        locality.load_balancing_weight =
            Some(envoy_types::pb::google::protobuf::UInt32Value { value: 1 });
    }
    server.set_message("secure-endpoints", &cla).unwrap();
}

fn channel_for(bootstrap: Bootstrap) -> XdsChannel {
    ChannelBuilder::new("xds:///greeter", bootstrap)
        .graph_options(GraphOptions::default().with_warming_timeout(Duration::from_secs(2)))
        .ready_timeout(PATIENCE)
        .build()
        .unwrap()
}

/// Calls until one succeeds (a failed connection is retried with backoff,
/// about a second), at most `PATIENCE`.
async fn eventually_hello(greeter: &mut GreeterClient<XdsChannel>) -> Result<String, Status> {
    let deadline = tokio::time::Instant::now() + PATIENCE * 2;
    loop {
        let outcome = hello(greeter).await;
        if outcome.is_ok() || tokio::time::Instant::now() > deadline {
            return outcome;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// gRFC A29: mTLS to endpoints. The backend's certificate is signed by
/// CA-1 and it requires a client certificate signed by CA-2; the cluster
/// names a root provider holding CA-1 and an identity provider holding a
/// certificate signed by CA-2, and calls succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mtls_to_endpoints_uses_the_clusters_provider_certificates() {
    let (ca1, ca2) = (Ca::new("ca-1"), Ca::new("ca-2"));
    let backend = TlsBackend::start("secure", &ca1.leaf(&["backend.example"]), Some(&ca2)).await;
    let dir = tempfile::tempdir().unwrap();
    let (client_cert, client_key) = ca2.leaf(&["client.example"]);
    let roots = format!(
        r#"{{"ca_certificate_file": "{}"}}"#,
        write(dir.path(), "ca1.pem", &ca1.pem)
    );
    let identity = format!(
        r#"{{"certificate_file": "{}", "private_key_file": "{}"}}"#,
        write(dir.path(), "client.pem", &client_cert),
        write(dir.path(), "client.key", &client_key)
    );
    let testbed = Testbed::start([ServerSpec::new("main", ["main.example"])])
        .await
        .unwrap();
    let bootstrap = bootstrap_with(
        testbed.server("main").unwrap(),
        &[("roots", roots), ("identity", identity)],
    );
    serve_greeter(
        &testbed,
        backend.addr,
        &tls_cluster("secure", "roots", Some("identity"), &["backend.example"]),
    )
    .await;

    let mut greeter = GreeterClient::new(channel_for(bootstrap));
    assert_eq!(hello(&mut greeter).await.unwrap(), "secure");
}

/// gRFC A29: the SAN matchers replace the hostname check. A backend whose
/// certificate has no matching SAN is refused (UNAVAILABLE naming the
/// cluster and, from the last connection error, the SAN); once the cluster matches its SAN, calls succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_certificate_whose_san_does_not_match_is_refused() {
    let ca = Ca::new("ca");
    let backend = TlsBackend::start("secure", &ca.leaf(&["other.example"]), None).await;
    let dir = tempfile::tempdir().unwrap();
    let roots = format!(
        r#"{{"ca_certificate_file": "{}"}}"#,
        write(dir.path(), "ca.pem", &ca.pem)
    );
    let testbed = Testbed::start([ServerSpec::new("main", ["main.example"])])
        .await
        .unwrap();
    let server = testbed.server("main").unwrap();
    let bootstrap = bootstrap_with(server, &[("roots", roots)]);
    serve_greeter(
        &testbed,
        backend.addr,
        &tls_cluster("secure", "roots", None, &["backend.example"]),
    )
    .await;
    let mut greeter = GreeterClient::new(channel_for(bootstrap));

    let refused = hello(&mut greeter).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(refused.message().contains("\"secure\""), "{refused:?}");
    assert!(
        refused
            .message()
            .contains("match_subject_alt_names: [other.example]"),
        "the last connection error names the SAN: {refused:?}"
    );

    server
        .set_message(
            "secure",
            &tls_cluster(
                "secure",
                "roots",
                None,
                &["backend.example", "other.example"],
            ),
        )
        .unwrap();
    assert_eq!(eventually_hello(&mut greeter).await.unwrap(), "secure");
}

/// gRFC A29: the server's chain must lead to the root provider's CAs. A
/// backend signed by another CA is refused; once the provider's CA file
/// holds that CA, the next connection attempt reads it and succeeds (the
/// `file_watcher` files are read at each attempt).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_certificate_from_another_ca_is_refused_until_the_ca_file_trusts_it() {
    let (trusted, other) = (Ca::new("trusted"), Ca::new("other"));
    let backend = TlsBackend::start("secure", &other.leaf(&["backend.example"]), None).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = write(dir.path(), "ca.pem", &trusted.pem);
    let roots = format!(r#"{{"ca_certificate_file": "{ca_file}"}}"#);
    let testbed = Testbed::start([ServerSpec::new("main", ["main.example"])])
        .await
        .unwrap();
    let bootstrap = bootstrap_with(testbed.server("main").unwrap(), &[("roots", roots)]);
    serve_greeter(
        &testbed,
        backend.addr,
        &tls_cluster("secure", "roots", None, &[]),
    )
    .await;
    let mut greeter = GreeterClient::new(channel_for(bootstrap));

    let refused = hello(&mut greeter).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");

    write(dir.path(), "ca.pem", &other.pem);
    assert_eq!(eventually_hello(&mut greeter).await.unwrap(), "secure");
}

/// gRFC A29: a provider instance the bootstrap does not have fails the
/// cluster's connections (UNAVAILABLE naming the cluster and the
/// instance); a cluster
/// naming one it has is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_naming_an_unknown_provider_instance_is_not_served() {
    let ca = Ca::new("ca");
    let backend = TlsBackend::start("secure", &ca.leaf(&["backend.example"]), None).await;
    let dir = tempfile::tempdir().unwrap();
    let roots = format!(
        r#"{{"ca_certificate_file": "{}"}}"#,
        write(dir.path(), "ca.pem", &ca.pem)
    );
    let testbed = Testbed::start([ServerSpec::new("main", ["main.example"])])
        .await
        .unwrap();
    let server = testbed.server("main").unwrap();
    let bootstrap = bootstrap_with(server, &[("roots", roots)]);
    serve_greeter(
        &testbed,
        backend.addr,
        &tls_cluster("secure", "missing", None, &[]),
    )
    .await;
    let mut greeter = GreeterClient::new(channel_for(bootstrap));

    let refused = hello(&mut greeter).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(refused.message().contains("\"secure\""), "{refused:?}");
    assert!(
        refused.message().contains("instance \"missing\""),
        "{refused:?}"
    );

    server
        .set_message("secure", &tls_cluster("secure", "roots", None, &[]))
        .unwrap();
    assert_eq!(eventually_hello(&mut greeter).await.unwrap(), "secure");
}
