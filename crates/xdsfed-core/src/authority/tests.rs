//! Unit tests of the authority rules; each test names the rule it checks.

use std::sync::Arc;

use super::*;
use crate::bootstrap::Bootstrap;

fn bootstrap(json: &str) -> Bootstrap {
    match Bootstrap::from_json_str(json) {
        Ok(b) => b,
        Err(e) => panic!("test bootstrap should load: {e}"),
    }
}

fn name(s: &str) -> ResourceName {
    match ResourceName::parse_user_supplied(s) {
        Ok(n) => n,
        Err(e) => panic!("{s}: {e}"),
    }
}

fn uris(servers: &[ServerConfig]) -> Vec<&str> {
    servers.iter().map(|s| s.server_uri.as_str()).collect()
}

const FEDERATED: &str = r#"{
  "xds_servers": [{"server_uri": "default:1", "channel_creds": [{"type": "insecure"}]}],
  "authorities": {
    "cloud.example": {
      "xds_servers": [
        {"server_uri": "cloud:1", "channel_creds": [{"type": "insecure"}]},
        {"server_uri": "cloud-backup:1", "channel_creds": [{"type": "insecure"}]}
      ]
    },
    "onprem.example": {
      "client_listener_resource_name_template": "xdstp://onprem.example/envoy.config.listener.v3.Listener/grpc/client/%s?project=1",
      "xds_servers": []
    },
    "": {}
  },
  "client_default_listener_resource_name_template": "xdstp://cloud.example/envoy.config.listener.v3.Listener/%s"
}"#;

#[test]
fn resolve_gives_the_authority_servers_in_order() {
    let registry = AuthorityRegistry::new(&bootstrap(FEDERATED));
    let servers = registry.resolve(&name(
        "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/c",
    ));
    assert_eq!(servers.map(uris), Ok(vec!["cloud:1", "cloud-backup:1"]));
}

#[test]
fn resolve_uses_top_level_servers_when_the_authority_has_none() {
    let registry = AuthorityRegistry::new(&bootstrap(FEDERATED));
    let servers = registry.resolve(&name("xdstp://onprem.example/T/c"));
    assert_eq!(servers.map(uris), Ok(vec!["default:1"]));
    let servers = registry.resolve(&name("xdstp:///T/c"));
    assert_eq!(servers.map(uris), Ok(vec!["default:1"]));
}

#[test]
fn resolve_refuses_an_unknown_authority_without_fallback() {
    let registry = AuthorityRegistry::new(&bootstrap(FEDERATED));
    let err = registry.resolve(&name("xdstp://elsewhere.example/T/c?k=v#entry=e"));
    assert_eq!(
        err,
        Err(AuthorityError::UnknownAuthority {
            authority: "elsewhere.example".into(),
            name: "xdstp://elsewhere.example/T/c?k=v#entry=e".into(),
        })
    );
    let text = err.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        text.contains("authority \"elsewhere.example\" not present in bootstrap"),
        "{text}"
    );
}

#[test]
fn resolve_matches_authorities_after_normalisation() {
    let registry = AuthorityRegistry::new(&bootstrap(FEDERATED));
    let servers = registry.resolve(&name("xdstp://cloud%2eexample/T/c"));
    assert_eq!(servers.map(uris), Ok(vec!["cloud:1", "cloud-backup:1"]));
}

#[test]
fn resolve_sends_old_style_names_to_top_level_servers() {
    let registry = AuthorityRegistry::new(&bootstrap(FEDERATED));
    assert_eq!(
        registry.resolve(&name("listener-a")).map(uris),
        Ok(vec!["default:1"])
    );
}

#[test]
fn resolve_refuses_old_style_names_without_top_level_servers() {
    let b = Bootstrap::from_yaml_str(
        "config_sources:\n- authorities: [{name: a}]\n  api_config_source:\n    grpc_services: [{google_grpc: {target_uri: 'a:1'}}]\n",
    );
    let registry = AuthorityRegistry::new(&b.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(
        registry.resolve(&name("old")),
        Err(AuthorityError::NoServers { name: "old".into() })
    );
}

#[test]
fn authorities_with_equal_server_keys_share_one_stream_key() {
    let b = bootstrap(
        r#"{
      "xds_servers": [{"server_uri": "shared:1", "channel_creds": [{"type": "insecure"}]}],
      "authorities": {
        "a.example": {"xds_servers": [{"server_uri": "shared:1", "channel_creds": [{"type": "google_default"}, {"type": "insecure"}], "server_features": ["unknown_feature"]}]},
        "b.example": {"xds_servers": [{"server_uri": "shared:1", "channel_creds": [{"type": "insecure"}]}]},
        "c.example": {"xds_servers": [{"server_uri": "shared:1", "channel_creds": [{"type": "insecure"}], "server_features": ["ignore_resource_deletion"]}]}
      }
    }"#,
    );
    let registry = AuthorityRegistry::new(&b);
    let ids = |n: &str| {
        registry
            .resolve_ids(&name(n))
            .map(<[_]>::to_vec)
            .unwrap_or_default()
    };
    let a = ids("xdstp://a.example/T/x");
    let b_id = ids("xdstp://b.example/T/x");
    let c = ids("xdstp://c.example/T/x");
    assert_eq!(a, b_id, "an unknown feature must not split the stream");
    assert_ne!(a, c, "a behaviour-changing feature gives its own stream");
    assert_eq!(registry.server_keys().count(), 2);
    let served: Vec<_> = a
        .first()
        .map(|id| registry.partitions_served_by(*id).cloned().collect())
        .unwrap_or_default();
    assert_eq!(
        served,
        vec![
            Partition::OldStyle,
            Partition::Authority("a.example".into()),
            Partition::Authority("b.example".into())
        ]
    );
}

/// Equal keys intern to one id however many authorities list them, ids
/// follow the order servers first appear in the bootstrap, and each keeps
/// one shared name and URI.
#[test]
fn equal_server_keys_intern_to_one_id_in_bootstrap_order() {
    let b = bootstrap(
        r#"{
      "xds_servers": [{"server_uri": "default:1", "channel_creds": [{"type": "insecure"}]}],
      "authorities": {
        "a.example": {"xds_servers": [
          {"server_uri": "z-primary:1", "channel_creds": [{"type": "insecure"}]},
          {"server_uri": "default:1", "channel_creds": [{"type": "insecure"}]}]},
        "b.example": {"xds_servers": [
          {"server_uri": "default:1", "channel_creds": [{"type": "insecure"}], "server_features": ["unknown_feature"]},
          {"server_uri": "z-primary:1", "channel_creds": [{"type": "insecure"}]},
          {"server_uri": "a-backup:1", "channel_creds": [{"type": "insecure"}]}]},
        "c.example": {}
      }
    }"#,
    );
    let registry = AuthorityRegistry::new(&b);
    let id_of = |uri: &str| {
        registry
            .id_of(&ServerKey::new(&ServerConfig::insecure(uri)))
            .unwrap_or_else(|| panic!("{uri} is interned"))
    };
    let (default, primary, backup) = (
        id_of("default:1"),
        id_of("z-primary:1"),
        id_of("a-backup:1"),
    );
    assert_eq!(
        registry.server_ids().collect::<Vec<_>>(),
        [default, primary, backup],
        "one id per distinct key, in the order the servers first appear"
    );
    assert!(default < primary && primary < backup);
    let resolved = |n: &str| registry.resolve_ids(&name(n)).map(<[_]>::to_vec);
    assert_eq!(
        resolved("xdstp://a.example/T/x"),
        Ok(vec![primary, default])
    );
    assert_eq!(
        resolved("xdstp://b.example/T/x"),
        Ok(vec![default, primary, backup])
    );
    assert_eq!(resolved("xdstp://c.example/T/x"), Ok(vec![default]));
    assert_eq!(resolved("old"), Ok(vec![default]));
    for id in [default, primary, backup] {
        assert_eq!(registry.id_of(registry.key(id)), Some(id));
        assert_eq!(&**registry.name(id), registry.key(id).to_string());
        assert_eq!(&**registry.uri(id), registry.key(id).server_uri);
    }
    // One shared name: looking it up twice gives the same allocation.
    assert!(Arc::ptr_eq(registry.name(default), registry.name(default)));
    assert!(registry.in_bootstrap(backup));
}

/// A server a ConfigSource names joins the registry after the bootstrap's,
/// serving none of their partitions; one the bootstrap lists keeps its id.
#[test]
fn interned_servers_follow_the_bootstrap_and_serve_no_partition() {
    let mut registry = AuthorityRegistry::new(&bootstrap(FEDERATED));
    let count = registry.server_ids().count();
    let stranger = registry
        .intern(&ServerConfig::insecure("stranger:1"))
        .expect("an id");
    assert_eq!(stranger.index(), count);
    assert!(!registry.in_bootstrap(stranger));
    assert_eq!(registry.partitions_served_by(stranger).count(), 0);
    assert_eq!(&**registry.name(stranger), "stranger:1 (insecure)");
    assert_eq!(
        registry.intern(&ServerConfig::insecure("stranger:1")),
        Ok(stranger)
    );
    let cloud = registry
        .intern(&ServerConfig::insecure("cloud:1"))
        .expect("an id");
    assert!(registry.in_bootstrap(cloud));
    assert_eq!(
        registry.server_keys().count(),
        count,
        "the bootstrap's servers only"
    );
}

#[test]
fn server_key_differs_by_creds_and_api_variant() {
    let base = ServerConfig::insecure("s:1");
    let mut sotw = base.clone();
    sotw.api = ApiVariant::Sotw;
    let mut tls = base.clone();
    tls.channel_creds = ChannelCreds::Tls {
        ca_certificate_file: Some("ca.pem".into()),
        certificate_file: None,
        private_key_file: None,
    };
    let keys = [&base, &sotw, &tls].map(ServerKey::from);
    assert_ne!(keys[0], keys[1]);
    assert_ne!(keys[0], keys[2]);
    assert_eq!(keys[0].to_string(), "s:1 (insecure)");
    assert_eq!(keys[1].to_string(), "s:1 (insecure, sotw)");
    assert_eq!(keys[2].to_string(), "s:1 (tls)");
}

#[test]
fn may_deliver_refuses_names_of_other_authorities() {
    let registry = AuthorityRegistry::new(&bootstrap(FEDERATED));
    let id = |uri: &str| {
        registry
            .id_of(&ServerKey::from(&ServerConfig::insecure(uri)))
            .unwrap_or_else(|| panic!("{uri} is interned"))
    };
    let (cloud, default) = (id("cloud:1"), id("default:1"));
    assert!(registry.may_deliver(cloud, "xdstp://cloud.example/T/x"));
    assert!(!registry.may_deliver(cloud, "xdstp://onprem.example/T/x"));
    assert!(!registry.may_deliver(cloud, "listener-a"));
    assert!(registry.may_deliver(default, "listener-a"));
    assert!(registry.may_deliver(default, "xdstp://onprem.example/T/x"));
    assert!(registry.may_deliver(default, "xdstp:///T/x"));
    assert!(!registry.may_deliver(default, "xdstp://cloud.example/T/x"));
    let stranger = ServerKey::from(&ServerConfig::insecure("stranger:1"));
    assert_eq!(registry.id_of(&stranger), None);
    assert!(registry.serves_old_style(default));
    assert!(!registry.serves_old_style(cloud));
    assert_eq!(
        registry.authorities_for(cloud).collect::<Vec<_>>(),
        ["cloud.example"]
    );
    assert_eq!(
        registry.authorities_for(default).collect::<Vec<_>>(),
        ["", "onprem.example"]
    );
}

#[test]
fn partition_of_old_style_never_equals_the_empty_authority() {
    assert_ne!(Partition::of_key("xdstp:///T/x"), Partition::of_key("x"));
    assert_eq!(
        Partition::of(&name("xdstp:///T/x")),
        Partition::Authority(String::new())
    );
}

fn listener(registry: &AuthorityRegistry, target: &str) -> Result<String, AuthorityError> {
    registry
        .listener_resource_name(target)
        .map(|n| n.to_string())
}

#[test]
fn template_expansion_without_authority_uses_default_template() {
    let registry = AuthorityRegistry::new(&bootstrap(FEDERATED));
    assert_eq!(
        listener(&registry, "xds:///a/b"),
        Ok("xdstp://cloud.example/envoy.config.listener.v3.Listener/a/b".into())
    );
    assert_eq!(
        listener(&registry, "xds:svc%20x?ignored#too"),
        Ok("xdstp://cloud.example/envoy.config.listener.v3.Listener/svc%20x".into())
    );
}

#[test]
fn template_expansion_with_plain_default_keeps_the_service_unencoded() {
    let registry = AuthorityRegistry::new(&bootstrap(
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}]}"#,
    ));
    assert_eq!(listener(&registry, "xds:///a/b"), Ok("a/b".into()));
    assert_eq!(listener(&registry, "xds:///a%20b:80"), Ok("a b:80".into()));
    assert_eq!(
        listener(&registry, "xds:server.example.com"),
        Ok("server.example.com".into())
    );
}

#[test]
fn template_expansion_with_authority_uses_its_template_and_encodes() {
    let registry = AuthorityRegistry::new(&bootstrap(FEDERATED));
    assert_eq!(
        listener(&registry, "xds://cloud.example/svc"),
        Ok("xdstp://cloud.example/envoy.config.listener.v3.Listener/svc".into())
    );
    assert_eq!(
        listener(&registry, "xds://onprem.example/a/b c?d"),
        Ok("xdstp://onprem.example/envoy.config.listener.v3.Listener/grpc/client/a/b%20c?project=1".into())
    );
    // `%2F` in the target decodes to `/`, which the encoding keeps (A47:
    // "characters allowed in a URI path ... (which includes '/')").
    assert_eq!(
        listener(&registry, "xds://cloud.example/a%2Fb%3F%25"),
        Ok("xdstp://cloud.example/envoy.config.listener.v3.Listener/a/b%3F%25".into())
    );
}

#[test]
fn template_expansion_refuses_unknown_authority_and_bad_targets() {
    let registry = AuthorityRegistry::new(&bootstrap(FEDERATED));
    assert_eq!(
        registry.listener_resource_name("xds://elsewhere/svc"),
        Err(AuthorityError::UnknownTargetAuthority {
            target: "xds://elsewhere/svc".into(),
            authority: "elsewhere".into()
        })
    );
    for bad in [
        "dns:///svc",
        "svc",
        "xds:///",
        "xds://cloud.example",
        "xds:///a%zz",
    ] {
        assert!(
            matches!(
                registry.listener_resource_name(bad),
                Err(AuthorityError::InvalidTarget { .. })
            ),
            "{bad}"
        );
    }
}
