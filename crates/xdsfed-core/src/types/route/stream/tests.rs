use envoy_types::pb::envoy::config::route::v3::retry_policy::RetryBackOff;
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::{
    ClusterSpecifier, RequestMirrorPolicy,
};
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use envoy_types::pb::envoy::config::route::v3::weighted_cluster::ClusterWeight;
use envoy_types::pb::envoy::config::route::v3::{
    RedirectAction, RetryPolicy, RouteAction, RouteMatch, WeightedCluster,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    ListMatcher, MetadataMatcher, RegexMatcher, ValueMatcher, list_matcher, value_matcher,
};
use envoy_types::pb::google::protobuf::{Duration, UInt32Value};

use super::*;
use crate::types::route::validate_route_configuration;
use crate::types::tests_support::route_config;
use crate::types::{ResourceType, RouteConfigurationType, RouteTarget, decode_message};

/// The configuration `bytes` encode, as the streamed path takes it.
fn streamed(bytes: &[u8]) -> Result<RouteConfigView, ValidationError> {
    RouteConfigurationType::decode_shared(&Bytes::copy_from_slice(bytes))
}

/// The same, as decoding the whole message took it: decoded, validated,
/// then viewed.
fn whole(bytes: &[u8]) -> Result<RouteConfigView, ValidationError> {
    let rc: RouteConfiguration = decode_message(bytes, "RouteConfiguration")?;
    validate_route_configuration(&rc)?;
    RouteConfigView::of_validated(&rc, Bytes::copy_from_slice(bytes))
}

/// Rule: the streamed view is the whole path's, and lists what the view
/// of the decoded message lists.
fn assert_same_view(bytes: &[u8]) -> RouteConfigView {
    let ours = streamed(bytes).expect("valid");
    assert_eq!(ours, whole(bytes).expect("valid"));
    let decoded = RouteConfiguration::decode(bytes).expect("decodes");
    let fresh = RouteConfigView::new(&decoded).expect("valid");
    assert_eq!(
        ours.targets().collect::<Vec<_>>(),
        fresh.targets().collect::<Vec<_>>()
    );
    assert_eq!(ours.name(), fresh.name());
    assert_eq!(ours.virtual_host_count(), fresh.virtual_host_count());
    assert_eq!(ours.raw().as_ref(), bytes);
    assert_eq!(ours.decode().expect("decodes"), decoded);
    ours
}

fn mirror(cluster: &str) -> RequestMirrorPolicy {
    RequestMirrorPolicy {
        cluster: cluster.into(),
        ..Default::default()
    }
}

fn weight(value: u32) -> Option<UInt32Value> {
    Some(UInt32Value { value })
}

fn route_to(specifier: ClusterSpecifier, mirrors: &[&str]) -> Route {
    Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(PathSpecifier::Prefix("/".into())),
            ..Default::default()
        }),
        action: Some(Action::Route(RouteAction {
            cluster_specifier: Some(specifier),
            request_mirror_policies: mirrors.iter().map(|m| mirror(m)).collect(),
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn cluster(name: &str) -> ClusterSpecifier {
    ClusterSpecifier::Cluster(name.into())
}

fn host(name: &str, routes: Vec<Route>) -> VirtualHost {
    VirtualHost {
        name: name.into(),
        domains: vec![format!("{name}.example")],
        routes,
        ..Default::default()
    }
}

/// Several virtual hosts, mirrors at all three levels, weighted clusters,
/// cluster headers, names used again, a route that does not route.
fn configuration() -> RouteConfiguration {
    let header_weight = ClusterWeight {
        cluster_header: "x-weighted".into(),
        weight: weight(10),
        ..Default::default()
    };
    let split = weighted(vec![named("b", 30), named("a", 60), header_weight]);
    let redirect = Route {
        action: Some(Action::Redirect(RedirectAction::default())),
        ..route_to(cluster("unused"), &[])
    };
    let header_mirror = RequestMirrorPolicy {
        cluster_header: "x-mirror".into(),
        ..Default::default()
    };
    let mut one = host(
        "one",
        vec![
            route_to(cluster("a"), &[]),
            route_to(split, &["route-shadow"]),
            route_to(ClusterSpecifier::ClusterHeader("x-cluster".into()), &[]),
            redirect,
        ],
    );
    one.request_mirror_policies = vec![mirror("host-shadow"), header_mirror];
    one.retry_policy = Some(RetryPolicy {
        retry_on: "unavailable".into(),
        num_retries: weight(2),
        ..Default::default()
    });
    let three = host("three", vec![route_to(cluster("a"), &["shadow", "a"])]);
    RouteConfiguration {
        name: "front".into(),
        request_mirror_policies: vec![mirror("shadow")],
        virtual_hosts: vec![one, host("two", Vec::new()), three],
        ..Default::default()
    }
}

/// The tag and length of field `number`, then `payload`.
fn field(number: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    open(number, payload.len(), &mut out);
    out.extend_from_slice(payload);
    out
}

/// Unknown fields a server may send: field 99 as a varint and field 98 as
/// a group holding a string.
const UNKNOWN: &[u8] = &[
    0x98, 0x06, 0x2a, // 99: 42
    0x93, 0x06, 0x0a, 0x02, b'h', b'i', 0x94, 0x06, // 98: group { 1: "hi" }
];

#[test]
fn the_streamed_view_is_the_view_of_the_whole_message() {
    let rc = configuration();
    let held = assert_same_view(&rc.encode_to_vec());
    assert_eq!(held.virtual_host_count(), 3);
    assert_eq!(
        held.targets().collect::<Vec<_>>(),
        [
            RouteTarget::Mirror("shadow"),
            RouteTarget::Mirror("host-shadow"),
            RouteTarget::Header("x-mirror"),
            RouteTarget::Cluster("a"),
            RouteTarget::Weighted("b", 30),
            RouteTarget::Weighted("a", 60),
            RouteTarget::Header("x-weighted"),
            RouteTarget::Mirror("route-shadow"),
            RouteTarget::Header("x-cluster"),
            RouteTarget::Cluster("a"),
            RouteTarget::Mirror("shadow"),
            RouteTarget::Mirror("a"),
        ]
    );
    for rc in [
        RouteConfiguration::default(),
        route_config("r", &["c1"]),
        route_config("r", &["same", "same", "other", "same"]),
    ] {
        assert_same_view(&rc.encode_to_vec());
    }
    assert_eq!(streamed(&[]).expect("valid").name(), "");
}

/// Fields in an order no encoder of ours writes: the configuration's name
/// after its virtual hosts and given twice (the last wins), a virtual host
/// whose routes come before and after its domains, a retry policy in two
/// pieces that merge, and unknown fields, groups among them, at each level.
#[test]
fn fields_in_any_order_merge_as_in_the_whole_message() {
    let rc = configuration();
    let piece = |m: VirtualHost| m.encode_to_vec();
    let mut vhost = piece(VirtualHost {
        routes: vec![route_to(cluster("early"), &["early-shadow"])],
        ..Default::default()
    });
    vhost.extend(piece(VirtualHost {
        name: "mixed".into(),
        domains: vec!["mixed.example".into()],
        retry_policy: Some(RetryPolicy {
            retry_on: "unavailable".into(),
            ..Default::default()
        }),
        ..Default::default()
    }));
    vhost.extend(UNKNOWN);
    vhost.extend(piece(VirtualHost {
        routes: vec![route_to(cluster("late"), &[])],
        request_mirror_policies: vec![mirror("mixed-shadow")],
        retry_policy: Some(RetryPolicy {
            num_retries: weight(3),
            ..Default::default()
        }),
        ..Default::default()
    }));
    let mut route = route_to(cluster("odd"), &[]).encode_to_vec();
    route.extend(UNKNOWN);
    vhost.extend(field(ROUTES, &route));

    let mut bytes = RouteConfiguration {
        virtual_hosts: rc.virtual_hosts[..1].to_vec(),
        ..Default::default()
    }
    .encode_to_vec();
    bytes.extend(
        RouteConfiguration {
            name: "first".into(),
            request_mirror_policies: vec![mirror("first-shadow")],
            ..Default::default()
        }
        .encode_to_vec(),
    );
    bytes.extend(field(VIRTUAL_HOSTS, &vhost));
    bytes.extend(UNKNOWN);
    bytes.extend(rc.encode_to_vec());

    let held = assert_same_view(&bytes);
    assert_eq!(held.name(), "front");
    assert_eq!(held.virtual_host_count(), 5);
    let decoded = held.decode().expect("decodes");
    let mixed = &decoded.virtual_hosts[1];
    assert_eq!(mixed.routes.len(), 3);
    let retry = mixed.retry_policy.as_ref().expect("merged");
    assert_eq!(
        (retry.retry_on.as_str(), retry.num_retries),
        ("unavailable", weight(3))
    );
}

/// The action of route `r` of virtual host `v`.
fn action(rc: &mut RouteConfiguration, v: usize, r: usize) -> &mut RouteAction {
    match rc.virtual_hosts[v].routes[r].action.as_mut() {
        Some(Action::Route(action)) => action,
        _ => unreachable!("a route action"),
    }
}

fn weighted(clusters: Vec<ClusterWeight>) -> ClusterSpecifier {
    ClusterSpecifier::WeightedClusters(WeightedCluster {
        clusters,
        ..Default::default()
    })
}

fn named(name: &str, w: u32) -> ClusterWeight {
    ClusterWeight {
        name: name.into(),
        weight: weight(w),
        ..Default::default()
    }
}

/// A retry policy backing off from `base` to `max` seconds.
fn back_off(base: i64, max: Option<i64>) -> RetryPolicy {
    let seconds = |seconds| Duration { seconds, nanos: 0 };
    RetryPolicy {
        retry_back_off: Some(RetryBackOff {
            base_interval: Some(seconds(base)),
            max_interval: max.map(seconds),
        }),
        ..Default::default()
    }
}

/// Each invalid configuration, with what makes it so.
fn invalid_configurations() -> Vec<(&'static str, RouteConfiguration)> {
    let mut all: Vec<(&'static str, RouteConfiguration)> = Vec::new();
    let mut case = |what, change: &dyn Fn(&mut RouteConfiguration)| {
        let mut rc = configuration();
        change(&mut rc);
        all.push((what, rc));
    };
    case("no domains", &|rc| rc.virtual_hosts[1].domains.clear());
    case("no retries", &|rc| {
        rc.virtual_hosts[0].retry_policy = Some(RetryPolicy {
            num_retries: weight(0),
            ..Default::default()
        })
    });
    case("no base interval", &|rc| {
        rc.virtual_hosts[2].retry_policy = Some(back_off(0, None))
    });
    case("zero max interval", &|rc| {
        rc.virtual_hosts[0].retry_policy = Some(back_off(1, Some(0)))
    });
    case("no match", &|rc| {
        rc.virtual_hosts[2].routes[0].r#match = None
    });
    case("empty regex", &|rc| {
        rc.virtual_hosts[0].routes[1].r#match = Some(RouteMatch {
            path_specifier: Some(PathSpecifier::SafeRegex(RegexMatcher::default())),
            ..Default::default()
        })
    });
    case("empty cluster", &|rc| {
        action(rc, 0, 0).cluster_specifier = Some(cluster(""))
    });
    case("empty header", &|rc| {
        action(rc, 0, 2).cluster_specifier = Some(ClusterSpecifier::ClusterHeader("".into()))
    });
    case("no weighted clusters", &|rc| {
        action(rc, 0, 1).cluster_specifier = Some(weighted(Vec::new()))
    });
    case("unnamed weighted cluster", &|rc| {
        action(rc, 0, 1).cluster_specifier = Some(weighted(vec![named("a", 1), named("", 1)]))
    });
    case("zero total", &|rc| {
        action(rc, 2, 0).cluster_specifier = Some(weighted(vec![named("a", 0)]))
    });
    case("total over 32 bits", &|rc| {
        action(rc, 2, 0).cluster_specifier =
            Some(weighted(vec![named("a", u32::MAX), named("b", 1)]))
    });
    case("no cluster", &|rc| {
        action(rc, 0, 0).cluster_specifier = None
    });
    case("route retry", &|rc| {
        action(rc, 0, 2).retry_policy = Some(back_off(-1, None))
    });
    case("two routes, the first wins", &|rc| {
        rc.virtual_hosts[0].routes[3].r#match = None;
        action(rc, 0, 0).cluster_specifier = None;
    });
    case("a host before a later host's route", &|rc| {
        rc.virtual_hosts[0].routes[1].r#match = None;
        rc.virtual_hosts[2].domains.clear();
    });
    case("a host's own rules before its routes", &|rc| {
        rc.virtual_hosts[2].domains.clear();
        rc.virtual_hosts[2].routes[0].r#match = None;
    });
    all
}

/// Rule: every validation error is the whole path's, word for word, and
/// the first one met is the one reported.
#[test]
fn every_validation_error_is_reported_as_before() {
    for (what, rc) in invalid_configurations() {
        let bytes = rc.encode_to_vec();
        let before = whole(&bytes).expect_err(what);
        assert_eq!(streamed(&bytes).expect_err(what), before, "{what}");
        assert_eq!(RouteConfigView::new(&rc).expect_err(what), before, "{what}");
    }
    let (_, no_domains) = &invalid_configurations()[0];
    assert_eq!(
        streamed(&no_domains.encode_to_vec())
            .expect_err("invalid")
            .0,
        r#"virtual_hosts[1] ("two").domains: empty"#
    );
    let (_, host_first) = invalid_configurations().pop().expect("cases");
    assert_eq!(
        streamed(&host_first.encode_to_vec())
            .expect_err("invalid")
            .0,
        r#"virtual_hosts[2] ("three").domains: empty"#
    );
}

/// Rule: bytes are accepted exactly when the whole message decodes and
/// validates, and then viewed alike; cut short or changed anywhere, they
/// are refused without a panic where the whole path refused them.
#[test]
fn truncated_or_damaged_bytes_are_refused_as_before() {
    let bytes = configuration().encode_to_vec();
    let same = |damaged: &[u8], what: &dyn Fn() -> String| match (streamed(damaged), whole(damaged))
    {
        (Ok(ours), Ok(before)) => assert_eq!(ours, before, "{}", what()),
        (Err(_), Err(_)) => {}
        (ours, before) => panic!("{}: {ours:?} where the whole path gave {before:?}", what()),
    };
    for cut in 0..bytes.len() {
        same(&bytes[..cut], &|| format!("cut at {cut}"));
    }
    for at in 0..bytes.len() {
        for value in [0x00, 0x01, 0x02, 0x0a, 0x12, 0x1a, 0x7f, 0x80, 0xff] {
            let mut changed = bytes.clone();
            changed[at] = value;
            same(&changed, &|| format!("byte {at} set to {value:#x}"));
        }
    }
    for garbage in [&[0xff][..], &[0x12, 0x05, 0x1a], &[0x13], &[0x0c], &[0x00]] {
        assert!(streamed(garbage).is_err(), "{garbage:?}");
    }
    // An empty virtual host and an empty route are messages all the same.
    let empty_host = field(VIRTUAL_HOSTS, &[]);
    assert_eq!(streamed(&empty_host), whole(&empty_host));
    let empty_route = field(
        VIRTUAL_HOSTS,
        &[
            &host("h", Vec::new()).encode_to_vec()[..],
            &field(ROUTES, &[]),
        ]
        .concat(),
    );
    assert_eq!(
        streamed(&empty_route).expect_err("no match").0,
        "virtual_hosts[0].routes[0].match: missing"
    );
    assert_eq!(streamed(&empty_route), whole(&empty_route));
}

/// Bytes that do not decode are refused naming the part where prost
/// stopped, then prost's error as decoding the whole message gives it.
#[test]
fn malformed_bytes_name_the_part_where_decoding_stopped() {
    let mut rc = configuration();
    rc.virtual_hosts[2].routes[0].name = "\u{e9}".into();
    let mut bytes = rc.encode_to_vec();
    // The route's name, é, no longer UTF-8.
    let at = bytes
        .windows(2)
        .rposition(|w| w == "\u{e9}".as_bytes())
        .expect("the name");
    bytes[at] = 0xff;
    let prost = RouteConfiguration::decode(bytes.as_slice()).expect_err("malformed");
    assert_eq!(
        streamed(&bytes).expect_err("malformed").0,
        format!("not a valid RouteConfiguration: virtual_hosts[2].routes[0]: {prost}")
    );
    assert!(
        prost
            .to_string()
            .contains("Route.name: VirtualHost.routes: "),
        "{prost}"
    );
    // A virtual host's own field, and a field of the configuration's.
    let host = field(VIRTUAL_HOSTS, &[0x0a, 0x01, 0xff]);
    assert!(
        streamed(&host)
            .expect_err("malformed")
            .0
            .starts_with("not a valid RouteConfiguration: virtual_hosts[0]: failed to decode")
    );
    let name = [0x0a, 0x01, 0xff];
    assert_eq!(
        streamed(&name).expect_err("malformed"),
        whole(&name).expect_err("malformed")
    );
}

/// A route nested as deep as prost allows in a whole configuration: one
/// level more is refused, as the whole message is, though the route alone
/// would still decode.
#[test]
fn a_route_nests_no_deeper_than_in_the_whole_message() {
    let nested = |depth: usize| {
        let mut value = ValueMatcher {
            match_pattern: Some(value_matcher::MatchPattern::PresentMatch(true)),
        };
        for _ in 0..depth {
            value = ValueMatcher {
                match_pattern: Some(value_matcher::MatchPattern::ListMatch(Box::new(
                    ListMatcher {
                        match_pattern: Some(list_matcher::MatchPattern::OneOf(Box::new(value))),
                    },
                ))),
            };
        }
        let mut rc = route_config("r", &["c"]);
        let route = &mut rc.virtual_hosts[0].routes[0];
        if let Some(m) = route.r#match.as_mut() {
            m.dynamic_metadata = vec![MetadataMatcher {
                filter: "f".into(),
                value: Some(value),
                ..Default::default()
            }];
        }
        let route = route.encode_to_vec();
        (rc.encode_to_vec(), route)
    };
    let deepest = (0..100)
        .take_while(|&depth| RouteConfiguration::decode(nested(depth).0.as_slice()).is_ok())
        .last()
        .expect("some depth decodes");
    assert_same_view(&nested(deepest).0);
    let (too_deep, route) = nested(deepest + 1);
    assert!(
        Route::decode(route.as_slice()).is_ok(),
        "alone, the route decodes"
    );
    let error = streamed(&too_deep).expect_err("too deep").0;
    assert!(error.ends_with("recursion limit reached"), "{error}");
}
