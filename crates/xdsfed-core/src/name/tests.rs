//! Unit tests of the naming rules; each test names the rule it checks.

use proptest::prelude::*;

use super::*;

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

fn xdstp(name: &str) -> XdstpName {
    match XdstpName::parse(name) {
        Ok(n) => n,
        Err(e) => panic!("{name} should parse: {e}"),
    }
}

fn key(name: &str) -> String {
    match canonical_key(name) {
        Ok(k) => k,
        Err(e) => panic!("{name} should parse: {e}"),
    }
}

/// TP1 §Normalization: equal modulo context parameter order.
#[test]
fn scheme_is_case_insensitive_and_canonically_lower_case() {
    let lower = "xdstp://auth/envoy.config.cluster.v3.Cluster/c1";
    for name in [
        "XDSTP://auth/envoy.config.cluster.v3.Cluster/c1",
        "XdStP://auth/envoy.config.cluster.v3.Cluster/c1",
    ] {
        let parsed = ResourceName::parse(name).expect("an xdstp name");
        assert_eq!(parsed.authority(), Some("auth"), "{name} is an xdstp name");
        assert_eq!(key(name), lower);
        assert!(ResourceName::parse_user_supplied(name).is_ok_and(|n| n.as_xdstp().is_some()));
    }
    // Only the scheme is case-insensitive: the rest of the name is not.
    assert_ne!(
        key("XDSTP://auth/envoy.config.cluster.v3.Cluster/C1"),
        lower
    );
    assert_eq!(
        ResourceName::parse("xdstpx://auth/T/c1").expect("an old-style name"),
        ResourceName::OldStyle("xdstpx://auth/T/c1".into())
    );
}

#[test]
fn canonical_is_equal_modulo_context_param_order() {
    let a = key("xdstp://auth/envoy.config.cluster.v3.Cluster/c?z=1&a=2&m=3");
    let b = key("xdstp://auth/envoy.config.cluster.v3.Cluster/c?m=3&z=1&a=2");
    assert_eq!(a, b);
    assert_eq!(
        a,
        "xdstp://auth/envoy.config.cluster.v3.Cluster/c?a=2&m=3&z=1"
    );
    assert_eq!(
        xdstp("xdstp://auth/T/c?z=1&a=2"),
        xdstp("xdstp://auth/T/c?a=2&z=1")
    );
}

#[test]
fn canonical_sorts_repeated_keys_by_value() {
    assert_eq!(
        key("xdstp://a/T/c?k=2&k=1&j=9"),
        "xdstp://a/T/c?j=9&k=1&k=2"
    );
}

#[test]
fn canonical_differs_when_a_component_differs() {
    let base = key("xdstp://a/T/c?k=1");
    for other in [
        "xdstp://b/T/c?k=1",
        "xdstp://a/U/c?k=1",
        "xdstp://a/T/d?k=1",
        "xdstp://a/T/c?k=2",
        "xdstp://a/T/c",
        "xdstp://a/T/c/?k=1",
    ] {
        assert_ne!(key(other), base, "{other}");
    }
}

#[test]
fn canonical_decodes_unreserved_escapes_and_uppercases_others() {
    assert_eq!(
        key("xdstp://a%2Eb/T/%7euser%2fx?k%61=%2c%41"),
        "xdstp://a.b/T/~user%2Fx?ka=%2CA"
    );
}

#[test]
fn canonical_keeps_reserved_escapes_distinct_from_literals() {
    assert_ne!(key("xdstp://a/T/x%2Fy"), key("xdstp://a/T/x/y"));
    assert_ne!(key("xdstp://a/T/x?k=a%26b"), key("xdstp://a/T/x?k=a&b"));
}

#[test]
fn canonical_removes_directives_and_keeps_glob() {
    assert_eq!(
        key("xdstp://a/T/dir/*?k=v#alt=xdstp://b/T/x,entry=e1"),
        "xdstp://a/T/dir/*?k=v"
    );
}

#[test]
fn canonical_of_old_style_name_is_the_name() {
    assert_eq!(canonical_key(""), Err(NameError::Empty));
    for name in ["cluster-a", "xdstp-like", "a b/c?d#e"] {
        assert_eq!(key(name), name);
        assert_eq!(authority_of(&key(name)), None);
    }
}

#[test]
fn canonical_key_accepts_xds_namespace_params_from_servers() {
    assert_eq!(
        key("xdstp://a/T/x?xds.resource.vip=1.2.3.4"),
        "xdstp://a/T/x?xds.resource.vip=1.2.3.4"
    );
}

#[test]
fn percent_encoding_round_trips_through_canonical() {
    let raw = "xdstp://a/T/%c3%a9t%C3%A9%20x%7E?q=%3f%3F&r=%25";
    let once = key(raw);
    assert_eq!(once, "xdstp://a/T/%C3%A9t%C3%A9%20x~?q=%3F%3F&r=%25");
    assert_eq!(key(&once), once);
    let encoded = encode_path("svc/é ü?".as_bytes());
    assert_eq!(
        percent_decode(&encoded).as_deref(),
        Ok("svc/é ü?".as_bytes())
    );
}

#[test]
fn parse_reports_accessors() {
    let n = xdstp("xdstp://cloud.example/envoy.config.cluster.v3.Cluster/pay/v2?b=2&a=1");
    assert_eq!(n.authority(), "cloud.example");
    assert_eq!(n.resource_type(), "envoy.config.cluster.v3.Cluster");
    assert_eq!(n.id(), "pay/v2");
    assert_eq!(n.id_segments().collect::<Vec<_>>(), ["pay", "v2"]);
    assert_eq!(
        n.context_params().collect::<Vec<_>>(),
        [("a", "1"), ("b", "2")]
    );
    assert!(n.is_urn());
    assert!(!n.is_glob());
}

#[test]
fn parse_accepts_empty_authority() {
    let n = xdstp("xdstp:///T/x");
    assert_eq!(n.authority(), "");
    assert_eq!(authority_of(&n.canonical()), Some(""));
}

#[test]
fn parse_treats_param_without_value_as_empty_value() {
    assert_eq!(key("xdstp://a/T/x?flag&&k=v"), "xdstp://a/T/x?flag=&k=v");
    assert_eq!(key("xdstp://a/T/x?k=v=w"), "xdstp://a/T/x?k=v=w");
}

#[test]
fn glob_is_detected_only_for_a_trailing_star_segment() {
    assert!(xdstp("xdstp://a/T/*").is_glob());
    assert!(xdstp("xdstp://a/T/some/longer/path/*?k=v").is_glob());
    assert!(!xdstp("xdstp://a/T/foo*").is_glob());
    assert!(!xdstp("xdstp://a/T/*/foo").is_glob());
    assert!(!xdstp("xdstp://a/T/%2A").is_glob());
    assert!(!xdstp("xdstp://a/T/*").is_urn());
}

#[test]
fn directives_parse_alt_and_entry() {
    let n = xdstp("xdstp://a/T/x#alt=xdstp://b/T/y?k=v,entry=e-1.x~:y");
    assert_eq!(n.directives().entry(), Some("e-1.x~:y"));
    assert_eq!(
        n.directives().alt().map(XdstpName::canonical).as_deref(),
        Some("xdstp://b/T/y?k=v")
    );
    assert!(!n.is_urn());
    assert_eq!(
        n.to_string(),
        "xdstp://a/T/x#alt=xdstp://b/T/y?k=v,entry=e-1.x~:y"
    );
    assert_eq!(xdstp(&n.to_string()), n);
}

#[test]
fn directives_refuse_duplicates() {
    let name = "xdstp://a/T/x#entry=a,entry=b";
    assert_eq!(
        XdstpName::parse(name),
        Err(NameError::DuplicateDirective {
            name: name.into(),
            position: 22,
            directive: "entry"
        })
    );
    let name = "xdstp://a/T/x#alt=xdstp://b/T/y,alt=xdstp://c/T/y";
    assert!(matches!(
        XdstpName::parse(name),
        Err(NameError::DuplicateDirective {
            directive: "alt",
            position: 32,
            ..
        })
    ));
}

#[test]
fn directives_refuse_unknown_empty_and_malformed() {
    assert!(matches!(
        XdstpName::parse("xdstp://a/T/x#foo=1"),
        Err(NameError::UnknownDirective { position: 14, ref directive, .. }) if directive == "foo"
    ));
    assert!(matches!(
        XdstpName::parse("xdstp://a/T/x#entry=a,"),
        Err(NameError::EmptyDirective { position: 22, .. })
    ));
    assert!(matches!(
        XdstpName::parse("xdstp://a/T/x#entry"),
        Err(NameError::InvalidEntryName { position: 19, .. })
    ));
    assert!(matches!(
        XdstpName::parse("xdstp://a/T/x#alt=cluster-b"),
        Err(NameError::InvalidAlt { position: 18, .. })
    ));
    assert!(matches!(
        XdstpName::parse("xdstp://a/T/x#entry=a#b"),
        Err(NameError::InvalidChar {
            position: 21,
            ch: '#',
            ..
        })
    ));
    // An empty fragment carries no directive.
    assert!(xdstp("xdstp://a/T/x#").is_urn());
}

#[test]
fn entry_names_follow_the_proto_pattern() {
    for bad in ["a/b", "a%20b", "", "a!"] {
        let name = format!("xdstp://a/T/x#entry={bad}");
        assert!(
            matches!(
                XdstpName::parse(&name),
                Err(NameError::InvalidEntryName { position: 20, .. })
            ),
            "{name}"
        );
    }
    // `%41` is an escaped unreserved `A`, which the pattern allows.
    assert_eq!(
        xdstp("xdstp://a/T/x#entry=%41").directives().entry(),
        Some("A")
    );
}

#[test]
fn type_check_accepts_the_type_and_its_collection() {
    xdstp("xdstp://a/envoy.config.cluster.v3.Cluster/x")
        .check_type(CDS)
        .unwrap_or_else(|e| panic!("{e}"));
    xdstp("xdstp://a/envoy.config.cluster.v3.ClusterCollection/x")
        .check_type(CDS)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ResourceName::OldStyle("c".into()).check_type(CDS), Ok(()));
}

#[test]
fn type_check_mismatch_names_both_types() {
    let err = xdstp("xdstp://a/envoy.config.listener.v3.Listener/x").check_type(CDS);
    let Err(err) = err else {
        panic!("a listener name watched as a cluster must be refused");
    };
    assert_eq!(
        err,
        NameError::TypeMismatch {
            name: "xdstp://a/envoy.config.listener.v3.Listener/x".into(),
            position: 10,
            name_type: "envoy.config.listener.v3.Listener".into(),
            watched_type: CDS.into(),
        }
    );
    let text = err.to_string();
    assert!(
        text.contains("envoy.config.listener.v3.Listener") && text.contains(CDS),
        "{text}"
    );
    // `ClusterCollectionX` is neither the type nor its collection.
    assert!(
        xdstp("xdstp://a/envoy.config.cluster.v3.ClusterX/x")
            .check_type(CDS)
            .is_err()
    );
}

#[test]
fn type_check_applies_to_the_alt_url() {
    let n = xdstp(
        "xdstp://a/envoy.config.cluster.v3.Cluster/x#alt=xdstp://b/envoy.config.listener.v3.Listener/y",
    );
    assert!(matches!(
        n.check_type(CDS),
        Err(NameError::TypeMismatch { .. })
    ));
}

#[test]
fn user_supplied_names_refuse_the_xds_namespace() {
    let name = "xdstp://a/T/x?ok=1&xds.resource.vip=1";
    assert_eq!(
        ResourceName::parse_user_supplied(name),
        Err(NameError::ReservedContextParam {
            name: name.into(),
            position: 19,
            key: "xds.resource.vip".into()
        })
    );
    // An escaped `x` is still `x` once normalised.
    assert!(ResourceName::parse_user_supplied("xdstp://a/T/x?%78ds.k=1").is_err());
    // ... including inside an alt URL.
    assert!(ResourceName::parse_user_supplied("xdstp://a/T/x#alt=xdstp://b/T/y?xds.k=1").is_err());
    assert!(ResourceName::parse_user_supplied("xdstp://a/T/x?xdsk=1").is_ok());
    assert!(ResourceName::parse("xdstp://a/T/x?xds.k=1").is_ok());
}

#[test]
fn malformed_xdstp_names_report_the_position() {
    let cases: &[(&str, usize)] = &[
        ("xdstp:", 6),
        ("xdstp:a/T/x", 6),
        ("xdstp://a", 9),
        ("xdstp://a?k=v", 9),
        ("xdstp://a/", 10),
        ("xdstp://a//x", 10),
        ("xdstp://a/T", 11),
        ("xdstp://a/T/", 12),
        ("xdstp://a/T?k=v", 11),
        ("xdstp://a b/T/x", 9),
        ("xdstp://a/T/x y", 13),
        ("xdstp://a/T/x%4", 13),
        ("xdstp://a/T/x%zz", 13),
        ("xdstp://a/T/x?=v", 14),
        ("xdstp://a/T/x?k=é", 16),
        ("xdstp://a/T/[x]", 12),
    ];
    for &(name, position) in cases {
        match XdstpName::parse(name) {
            Ok(n) => panic!("{name} parsed as {n}"),
            Err(e) => {
                assert_eq!(e.position(), position, "{name}: {e}");
                assert_eq!(e.name(), name);
                assert!(e.to_string().contains(&format!("byte {position}")), "{e}");
            }
        }
    }
}

#[test]
fn authority_of_reads_canonical_keys() {
    assert_eq!(
        authority_of("xdstp://cloud.example/T/x"),
        Some("cloud.example")
    );
    assert_eq!(authority_of("xdstp:///T/x"), Some(""));
    assert_eq!(authority_of("cluster-a"), None);
}

#[test]
fn resource_name_partitions_old_style_names() {
    assert_eq!(
        ResourceName::parse("listener-a"),
        Ok(ResourceName::OldStyle("listener-a".into()))
    );
    assert_eq!(
        ResourceName::parse("listener-a").map(|n| n.authority().is_none()),
        Ok(true)
    );
    assert!(ResourceName::parse("xdstp:bad").is_err());
}

/// Strategies for generated names: each component drawn from characters that
/// exercise the normalisation (escapes of unreserved and reserved characters,
/// mixed-case hex, sub-delims).
fn component(extra: &'static str) -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        "[a-zA-Z0-9._~-]",
        Just("%7e".to_string()),
        Just("%7E".to_string()),
        Just("%41".to_string()),
        Just("%2f".to_string()),
        Just("%2F".to_string()),
        Just("%c3%a9".to_string()),
        Just("%25".to_string()),
        proptest::sample::select(extra.chars().collect::<Vec<_>>()).prop_map(String::from),
    ];
    proptest::collection::vec(atom, 1..6).prop_map(|v| v.concat())
}

fn generated_name() -> impl Strategy<Value = String> {
    (
        prop_oneof![Just(String::new()), component(":@!$'()*+,;=")],
        component("!$'()+,;:@"),
        proptest::collection::vec(component("!$'()*+,;=:@"), 1..4),
        any::<bool>(),
        proptest::collection::vec(
            (component("!$'()*+,;:@/?"), component("!$'()*+,;=:@/?")),
            0..4,
        ),
        proptest::option::of(component("~:._-")),
    )
        .prop_map(|(authority, ty, id, glob, params, entry)| {
            let mut s = format!("xdstp://{authority}/{ty}/{}", id.join("/"));
            if glob {
                s.push_str("/*");
            }
            for (i, (k, v)) in params.iter().enumerate() {
                s.push(if i == 0 { '?' } else { '&' });
                s.push_str(&format!("{k}={v}"));
            }
            if let Some(entry) = entry {
                // Escapes other than unreserved ones would fail the entry
                // pattern, so keep only pattern characters here.
                let entry: String = entry
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric())
                    .collect();
                if !entry.is_empty() {
                    s.push_str(&format!("#entry={entry}"));
                }
            }
            s
        })
}

proptest! {
    /// canonical(parse(canonical(n))) == canonical(n), and parsing the
    /// canonical form gives back the same name less its directives.
    #[test]
    fn canonical_is_a_fixed_point(name in generated_name()) {
        let parsed = XdstpName::parse(&name);
        prop_assert!(parsed.is_ok(), "{name}: {parsed:?}");
        let Ok(parsed) = parsed else { unreachable!() };
        let canonical = parsed.canonical();
        let reparsed = XdstpName::parse(&canonical);
        prop_assert!(reparsed.is_ok(), "{canonical}: {reparsed:?}");
        let Ok(reparsed) = reparsed else { unreachable!() };
        prop_assert_eq!(reparsed.canonical(), canonical.clone());
        prop_assert_eq!(canonical_key(&canonical), Ok(canonical));
        prop_assert_eq!(XdstpName::parse(&parsed.to_string()), Ok(parsed));
    }

    /// Permuting context parameters never changes the canonical form.
    #[test]
    fn canonical_ignores_param_permutations(
        params in proptest::collection::vec(("[a-z]{1,3}", "[a-z0-9]{0,3}"), 1..5),
        seed in any::<u64>(),
    ) {
        let render = |ps: &[(String, String)]| {
            let q: Vec<String> = ps.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("xdstp://a/T/x?{}", q.join("&"))
        };
        let mut shuffled = params.clone();
        let len = shuffled.len();
        // A deterministic rotation and swap driven by the seed.
        shuffled.rotate_left((seed as usize) % len);
        shuffled.swap(0, (seed as usize / 7) % len);
        prop_assert_eq!(key(&render(&params)), key(&render(&shuffled)));
    }

    /// The parser never panics, whatever the input.
    #[test]
    fn parse_never_panics(s in "xdstp:(//)?[ -~é]{0,40}") {
        let _ = ResourceName::parse(&s);
        let _ = ResourceName::parse_user_supplied(&s);
    }
}

/// The slow path of [`canonical_key`]: every name taken apart.
fn key_by_parsing(name: &str) -> Result<String, NameError> {
    Ok(ResourceName::parse(name)?.canonical().into_owned())
}

/// A name already canonical is recognised without being taken apart, and
/// only such a name: a capital scheme, an escape, a context parameter, a
/// directive, a missing part or a character a part does not allow each
/// send it through the parser.
#[test]
fn plain_canonical_names_are_recognised_in_one_pass() {
    for name in [
        "xdstp://auth/envoy.config.cluster.v3.Cluster/c1",
        "xdstp://a0.test/envoy.config.cluster.v3.Cluster/svc/*",
        "xdstp:///envoy.config.listener.v3.Listener/edge",
        "xdstp://auth/T//",
    ] {
        assert!(xdstp::is_plain_canonical(name), "{name}");
        assert_eq!(key(name), name);
        assert_eq!(key_by_parsing(name).as_deref(), Ok(name));
    }
    for name in [
        "XDSTP://auth/T/c1",
        "xdstp://auth/T/c%41",
        "xdstp://auth/T/c1?b=2&a=1",
        "xdstp://auth/T/c1#alt=xdstp://other/T/c1",
        "xdstp://auth/T",
        "xdstp://auth//c1",
        "xdstp://au th/T/c1",
        "xdstp://auth/T/c\u{e9}",
        "cluster-1",
    ] {
        assert!(!xdstp::is_plain_canonical(name), "{name}");
    }
}

proptest! {
    /// Recognising a canonical name in one pass never changes the key:
    /// `canonical_key` agrees with parsing on every name, good or bad.
    #[test]
    fn canonical_key_agrees_with_parsing(
        scheme in prop_oneof![Just("xdstp://"), Just("XDSTP://"), Just("")],
        authority in "(%41|%2f|[a.:*?#& é\\[-]){0,4}",
        resource_type in "(%41|[T./*?=#]){0,3}",
        id in "(%41|%2f|[a/*?&=# é.-]){0,6}",
    ) {
        let name = format!("{scheme}{authority}/{resource_type}/{id}");
        prop_assert_eq!(canonical_key(&name).ok(), key_by_parsing(&name).ok());
    }
}
