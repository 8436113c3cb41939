//! Fuzzes the bootstrap parser (JSON and YAML) and the authority registry
//! built from whatever it accepts.

#![no_main]

use libfuzzer_sys::fuzz_target;
use xdsfed_core::authority::AuthorityRegistry;
use xdsfed_core::bootstrap::{Bootstrap, Format};
use xdsfed_core::name::ResourceName;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let format = if selector & 1 == 0 {
        Format::Json
    } else {
        Format::Yaml
    };
    let bootstrap = match Bootstrap::from_str_as(text, format) {
        Ok(b) => b,
        Err(e) => {
            // Errors must render.
            let _ = e.to_string();
            return;
        }
    };
    let registry = AuthorityRegistry::new(&bootstrap);
    for authority in bootstrap.authorities.keys() {
        let name = format!("xdstp://{authority}/envoy.config.cluster.v3.Cluster/c");
        let parsed = match ResourceName::parse(&name) {
            Ok(p) => p,
            Err(e) => panic!("configured authority {authority:?} makes an invalid name: {e}"),
        };
        assert!(registry.resolve(&parsed).is_ok(), "{name} does not resolve");
        let _ = registry.listener_resource_name(&format!("xds://{authority}/svc"));
    }
    let _ = registry.listener_resource_name("xds:///svc/a b");
    let _ = bootstrap.node_proto();
    for id in registry.server_ids() {
        let _ = registry.key(id).to_string();
        let _ = registry.partitions_served_by(id).count();
    }
});
