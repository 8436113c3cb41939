use super::*;
use envoy_types::pb::envoy::r#type::matcher::v3::RegexMatcher;

fn matcher(pattern: MatchPattern, ignore_case: bool) -> SanMatcher {
    SanMatcher::compile(&StringMatcher {
        match_pattern: Some(pattern),
        ignore_case,
    })
    .unwrap()
}

fn exact(v: &str) -> SanMatcher {
    matcher(MatchPattern::Exact(v.into()), false)
}

fn dns(v: &str) -> SubjectAltName {
    SubjectAltName::Dns(v.into())
}

/// gRFC A29 (as grpc-go applies it): an exact matcher against a wildcard
/// DNS SAN matches one whole leftmost label, case-insensitively.
#[test]
fn exact_matcher_applies_dns_wildcard_rules() {
    let m = exact("foo.example.com");
    assert!(m.matches(&dns("*.example.com")));
    assert!(m.matches(&dns("FOO.Example.com.")));
    assert!(!m.matches(&dns("*.com.example")));
    assert!(
        !exact("a.b.example.com").matches(&dns("*.example.com")),
        "one label only"
    );
    assert!(!exact("example.com").matches(&dns("*.example.com")));
    for bad in [
        "*",
        "*.",
        "f*.example.com",
        "*oo.example.com",
        "foo.*.com",
        "*.*.com",
    ] {
        assert!(!m.matches(&dns(bad)), "{bad}");
    }
    assert!(!exact("*.example.com").matches(&SubjectAltName::Uri("foo.example.com".into())));
}

/// Prefix, suffix, contains and regex compare text; ignore_case folds
/// ASCII case except for regexes.
#[test]
fn string_matchers_compare_san_text() {
    let uri = SubjectAltName::Uri("spiffe://Prod.example/ns/payments/sa/api".into());
    assert!(matcher(MatchPattern::Prefix("spiffe://Prod.".into()), false).matches(&uri));
    assert!(!matcher(MatchPattern::Prefix("spiffe://prod.".into()), false).matches(&uri));
    assert!(matcher(MatchPattern::Prefix("SPIFFE://prod.".into()), true).matches(&uri));
    assert!(matcher(MatchPattern::Suffix("/SA/API".into()), true).matches(&uri));
    assert!(matcher(MatchPattern::Contains("payments".into()), false).matches(&uri));
    let regex = |r: &str| {
        MatchPattern::SafeRegex(RegexMatcher {
            regex: r.into(),
            ..Default::default()
        })
    };
    assert!(matcher(regex("spiffe://[^/]+/ns/payments/.*"), false).matches(&uri));
    assert!(
        !matcher(regex("ns/payments"), false).matches(&uri),
        "full match"
    );
    let ip = SubjectAltName::Ip("::1".parse().unwrap());
    assert!(exact("::1").matches(&ip));
    assert!(SanMatcher::compile(&StringMatcher::default()).is_err());
    assert!(
        SanMatcher::compile(&StringMatcher {
            match_pattern: Some(regex("(")),
            ignore_case: false
        })
        .is_err()
    );
}

/// gRFC A29: no matchers accept any SAN; otherwise any matcher matching
/// any SAN accepts the certificate.
#[test]
fn certificate_is_accepted_when_any_matcher_matches_any_san() {
    let sans = [
        dns("a.example"),
        SubjectAltName::Email("ops@example".into()),
    ];
    assert!(san_matches(&[], &sans));
    assert!(san_matches(&[], &[]));
    assert!(san_matches(&[exact("nope"), exact("ops@example")], &sans));
    assert!(!san_matches(&[exact("nope")], &sans));
    assert!(!san_matches(&[exact("a.example")], &[]));
}

/// The SANs of a real certificate are read from its DER, of every kind.
#[test]
fn leaf_subject_alt_names_reads_dns_uri_email_and_ip() {
    use rcgen::{CertificateParams, KeyPair, SanType};
    let mut params = CertificateParams::new(vec!["a.example".to_owned()]).unwrap();
    params.subject_alt_names.extend([
        SanType::URI("spiffe://td/x".try_into().unwrap()),
        SanType::Rfc822Name("ops@example".try_into().unwrap()),
        SanType::IpAddress("10.0.0.1".parse().unwrap()),
    ]);
    let cert = params.self_signed(&KeyPair::generate().unwrap()).unwrap();
    let sans = leaf_subject_alt_names(cert.der()).unwrap();
    assert_eq!(
        sans,
        [
            dns("a.example"),
            SubjectAltName::Uri("spiffe://td/x".into()),
            SubjectAltName::Email("ops@example".into()),
            SubjectAltName::Ip("10.0.0.1".parse().unwrap()),
        ]
    );
    let none = CertificateParams::new(Vec::<String>::new()).unwrap();
    let cert = none.self_signed(&KeyPair::generate().unwrap()).unwrap();
    assert_eq!(leaf_subject_alt_names(cert.der()).unwrap(), []);
    assert!(leaf_subject_alt_names(&cert.der()[..40]).is_err());
    assert!(leaf_subject_alt_names(b"\x30\x84\xff\xff\xff\xff").is_err());
}

proptest::proptest! {
    /// The SANs are read from a server's certificate, outside input: any
    /// bytes give names or an error, never a panic.
    #[test]
    fn leaf_subject_alt_names_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
        let _ = leaf_subject_alt_names(&bytes);
    }

    /// The same for a real certificate with one byte changed.
    #[test]
    fn leaf_subject_alt_names_never_panics_on_a_damaged_certificate(at in 0usize..2048, value in proptest::prelude::any::<u8>()) {
        let mut der = sample_certificate();
        let at = at % der.len();
        der[at] = value;
        let _ = leaf_subject_alt_names(&der);
    }
}

fn sample_certificate() -> Vec<u8> {
    use rcgen::{CertificateParams, KeyPair};
    let params =
        CertificateParams::new(vec!["a.example".to_owned(), "b.example".to_owned()]).unwrap();
    params
        .self_signed(&KeyPair::generate().unwrap())
        .unwrap()
        .der()
        .to_vec()
}
