//! Which server a persisted copy may be claimed on: the server that sent
//! it, by the registry's server identity.
//!
//! A record names its server by the text the client shows for it (a
//! [`ServerKey`](crate::authority::ServerKey)'s `Display`), which leaves out
//! parts of the key (the TLS files, for one). So the text is only a way to
//! find the identity: it must name exactly one [`ServerId`] of the
//! registry, and that id must be the stream's. A record whose text matches
//! several servers (same URI and credential type, other files), or none
//! (the bootstrap changed), is claimed on no stream: a version is only
//! ever claimed to the server that issued it.

use crate::authority::{AuthorityRegistry, ServerId};

/// Whether a copy persisted as sent by `recorded` (a record's server) was
/// sent by `server`, so that a delta stream to `server` may claim its
/// version in `initial_resource_versions`.
pub fn sent_by(registry: &AuthorityRegistry, recorded: &str, server: ServerId) -> bool {
    let mut named = registry
        .server_ids()
        .filter(|id| &**registry.name(*id) == recorded);
    matches!((named.next(), named.next()), (Some(id), None) if id == server)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::Bootstrap;

    fn registry(servers: &str) -> AuthorityRegistry {
        let json = format!(r#"{{"xds_servers": {servers}, "node": {{"id": "n"}}}}"#);
        AuthorityRegistry::new(&Bootstrap::from_json_str(&json).expect("a valid bootstrap"))
    }

    /// A copy is claimed only on the stream to the server that sent it.
    #[test]
    fn persisted_copy_is_claimed_only_on_the_stream_to_its_own_server() {
        let registry = registry(
            r#"[{"server_uri": "a.example:443", "channel_creds": [{"type": "insecure"}]},
                {"server_uri": "b.example:443", "channel_creds": [{"type": "insecure"}]}]"#,
        );
        let ids: Vec<ServerId> = registry.server_ids().collect();
        let (a, b) = (ids[0], ids[1]);
        let recorded = registry.name(a).clone();
        assert!(sent_by(&registry, &recorded, a));
        assert!(
            !sent_by(&registry, &recorded, b),
            "another server's version"
        );
        assert!(!sent_by(&registry, "c.example:443 (insecure)", a));
        assert!(
            !sent_by(&registry, "a.example:443", a),
            "a URI alone is not the server's identity"
        );
    }

    /// Two servers the display text cannot tell apart (same URI and
    /// credential type, other CA files) are two identities: a record
    /// naming that text is claimed on neither.
    #[test]
    fn persisted_copy_whose_server_text_names_two_identities_is_never_claimed() {
        let registry = registry(
            r#"[{"server_uri": "a.example:443", "channel_creds": [{"type": "tls", "config": {"ca_certificate_file": "/one.pem"}}]},
                {"server_uri": "a.example:443", "channel_creds": [{"type": "tls", "config": {"ca_certificate_file": "/two.pem"}}]}]"#,
        );
        let ids: Vec<ServerId> = registry.server_ids().collect();
        assert_eq!(ids.len(), 2, "two identities");
        let recorded = registry.name(ids[0]).clone();
        assert_eq!(&recorded, registry.name(ids[1]), "one display text");
        assert!(!sent_by(&registry, &recorded, ids[0]));
        assert!(!sent_by(&registry, &recorded, ids[1]));
    }
}
