use envoy_types::pb::envoy::config::core::v3::RuntimeFractionalPercent;
use envoy_types::pb::envoy::config::route::v3::header_matcher::HeaderMatchSpecifier;
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use envoy_types::pb::envoy::config::route::v3::weighted_cluster::ClusterWeight;
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, HeaderMatcher, RouteAction as ProtoRouteAction, RouteMatch, VirtualHost,
};
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use envoy_types::pb::envoy::r#type::matcher::v3::{RegexMatcher, StringMatcher};
use envoy_types::pb::envoy::r#type::v3::{FractionalPercent, Int64Range};
use envoy_types::pb::google::protobuf::{BoolValue, UInt32Value};
use http::{HeaderMap, HeaderValue};

use super::*;

fn to(cluster: &str) -> Option<Action> {
    Some(Action::Route(ProtoRouteAction {
        cluster_specifier: Some(ClusterSpecifier::Cluster(cluster.into())),
        ..Default::default()
    }))
}

fn route(path: PathSpecifier, headers: Vec<HeaderMatcher>, action: Option<Action>) -> Route {
    Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(path),
            headers,
            ..Default::default()
        }),
        action,
        ..Default::default()
    }
}

fn prefix(p: &str, cluster: &str) -> Route {
    route(PathSpecifier::Prefix(p.into()), vec![], to(cluster))
}

fn header(name: &str, spec: HeaderMatchSpecifier) -> HeaderMatcher {
    HeaderMatcher {
        name: name.into(),
        header_match_specifier: Some(spec),
        ..Default::default()
    }
}

fn exact_header(name: &str, value: &str) -> HeaderMatcher {
    header(
        name,
        HeaderMatchSpecifier::StringMatch(StringMatcher {
            match_pattern: Some(MatchPattern::Exact(value.into())),
            ignore_case: false,
        }),
    )
}

fn config(hosts: Vec<(&[&str], Vec<Route>)>) -> RouteConfiguration {
    RouteConfiguration {
        name: "rc".into(),
        virtual_hosts: hosts
            .into_iter()
            .enumerate()
            .map(|(i, (domains, routes))| VirtualHost {
                name: format!("vh{i}"),
                domains: domains.iter().map(|d| (*d).to_owned()).collect(),
                routes,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn table(config: &RouteConfiguration) -> RouteTable<String> {
    RouteTable::compile(config, "svc", str::to_owned)
}

fn pick(
    table: &RouteTable<String>,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<String, String> {
    pick_at(table, "svc", path, headers)
}

fn pick_at(
    table: &RouteTable<String>,
    authority: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<String, String> {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        map.append(
            http::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    let request = RequestView {
        authority,
        path,
        method: "POST",
        headers: &map,
    };
    table
        .route(&request, || 0)
        .cloned()
        .map_err(|e| e.to_string())
}

#[test]
fn routes_are_tried_in_order_by_prefix_path_and_regex() {
    let rc = config(vec![(
        &["*"],
        vec![
            route(
                PathSpecifier::Path("/pkg.Svc/Exact".into()),
                vec![],
                to("exact"),
            ),
            route(
                PathSpecifier::SafeRegex(RegexMatcher {
                    regex: "/pkg\\.Svc/Re[a-z]+".into(),
                    ..Default::default()
                }),
                vec![],
                to("regex"),
            ),
            prefix("/pkg.Svc/", "prefix"),
            prefix("", "default"),
        ],
    )]);
    let t = table(&rc);
    assert_eq!(pick(&t, "/pkg.Svc/Exact", &[]).unwrap(), "exact");
    assert_eq!(pick(&t, "/pkg.Svc/Regex", &[]).unwrap(), "regex");
    // A regex must match the whole path.
    assert_eq!(pick(&t, "/pkg.Svc/Regex2", &[]).unwrap(), "prefix");
    assert_eq!(pick(&t, "/other.Svc/M", &[]).unwrap(), "default");
}

#[test]
fn case_sensitive_false_applies_to_prefix_and_path() {
    let mut r = prefix("/PKG.svc/", "c");
    r.r#match.as_mut().unwrap().case_sensitive = Some(BoolValue { value: false });
    let t = table(&config(vec![(&["*"], vec![r])]));
    assert_eq!(pick(&t, "/pkg.Svc/M", &[]).unwrap(), "c");
    let t = table(&config(vec![(&["*"], vec![prefix("/PKG.svc/", "c")])]));
    assert!(pick(&t, "/pkg.Svc/M", &[]).is_err());
}

#[test]
fn header_matchers_must_all_match() {
    let gold = route(
        PathSpecifier::Prefix("/".into()),
        vec![
            exact_header("x-tier", "gold"),
            header(
                "x-level",
                HeaderMatchSpecifier::RangeMatch(Int64Range { start: 1, end: 10 }),
            ),
        ],
        to("gold"),
    );
    let t = table(&config(vec![(&["*"], vec![gold, prefix("/", "plain")])]));
    assert_eq!(
        pick(&t, "/a", &[("x-tier", "gold"), ("x-level", "9")]).unwrap(),
        "gold"
    );
    assert_eq!(
        pick(&t, "/a", &[("x-tier", "gold"), ("x-level", "10")]).unwrap(),
        "plain"
    );
    assert_eq!(pick(&t, "/a", &[("x-tier", "gold")]).unwrap(), "plain");
}

#[test]
fn header_values_are_joined_and_binary_headers_are_invisible() {
    let joined = route(
        PathSpecifier::Prefix("/".into()),
        vec![exact_header("x-a", "1,2")],
        to("joined"),
    );
    let binary = route(
        PathSpecifier::Prefix("/".into()),
        vec![header("x-b-bin", HeaderMatchSpecifier::PresentMatch(true))],
        to("binary"),
    );
    let t = table(&config(vec![(
        &["*"],
        vec![joined, binary, prefix("/", "none")],
    )]));
    assert_eq!(
        pick(&t, "/", &[("x-a", "1"), ("x-a", "2")]).unwrap(),
        "joined"
    );
    assert_eq!(pick(&t, "/", &[("x-b-bin", "AAAA")]).unwrap(), "none");
}

#[test]
fn invert_and_present_matchers() {
    let mut absent = header("x-debug", HeaderMatchSpecifier::PresentMatch(true));
    absent.invert_match = true;
    let regex = header(
        "x-user",
        HeaderMatchSpecifier::StringMatch(StringMatcher {
            match_pattern: Some(MatchPattern::SafeRegex(RegexMatcher {
                regex: "[a-z]+-[0-9]+".into(),
                ..Default::default()
            })),
            ignore_case: false,
        }),
    );
    let t = table(&config(vec![(
        &["*"],
        vec![
            route(PathSpecifier::Prefix("/".into()), vec![regex], to("user")),
            route(PathSpecifier::Prefix("/".into()), vec![absent], to("quiet")),
            prefix("/", "debug"),
        ],
    )]));
    assert_eq!(pick(&t, "/", &[("x-user", "ann-42")]).unwrap(), "user");
    assert_eq!(pick(&t, "/", &[("x-user", "ann-42x")]).unwrap(), "quiet");
    assert_eq!(pick(&t, "/", &[("x-debug", "1")]).unwrap(), "debug");
}

#[test]
fn runtime_fraction_uses_its_default_value() {
    let mut r = prefix("/", "sampled");
    r.r#match.as_mut().unwrap().runtime_fraction = Some(RuntimeFractionalPercent {
        default_value: Some(FractionalPercent {
            numerator: 25,
            denominator: 0, // HUNDRED
        }),
        runtime_key: String::new(),
    });
    let t = table(&config(vec![(&["*"], vec![r, prefix("/", "rest")])]));
    let headers = HeaderMap::new();
    let request = RequestView {
        authority: "svc",
        path: "/",
        method: "POST",
        headers: &headers,
    };
    assert_eq!(t.route(&request, || 24).unwrap(), "sampled");
    assert_eq!(t.route(&request, || 25).unwrap(), "rest");
    assert_eq!(t.route(&request, || 124).unwrap(), "sampled");
}

#[test]
fn weighted_clusters_are_picked_by_cumulative_weight() {
    let weighted = |clusters: &[(&str, u32)]| {
        Some(Action::Route(ProtoRouteAction {
            cluster_specifier: Some(ClusterSpecifier::WeightedClusters(WeightedCluster {
                clusters: clusters
                    .iter()
                    .map(|(name, w)| ClusterWeight {
                        name: (*name).into(),
                        weight: Some(UInt32Value { value: *w }),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })),
            ..Default::default()
        }))
    };
    let r = route(
        PathSpecifier::Prefix("/".into()),
        vec![],
        weighted(&[("a", 80), ("zero", 0), ("b", 20)]),
    );
    let t = table(&config(vec![(&["*"], vec![r])]));
    let headers = HeaderMap::new();
    let request = RequestView {
        authority: "svc",
        path: "/",
        method: "POST",
        headers: &headers,
    };
    let at = |n: u64| t.route(&request, move || n).unwrap().clone();
    assert_eq!(at(0), "a");
    assert_eq!(at(79), "a");
    assert_eq!(at(80), "b");
    assert_eq!(at(99), "b");
    assert_eq!(at(100), "a");
}

#[test]
fn a_non_forwarding_route_fails_naming_the_route() {
    let mut r = route(
        PathSpecifier::Prefix("/".into()),
        vec![],
        Some(Action::DirectResponse(DirectResponseAction::default())),
    );
    r.name = "teapot".into();
    let t = table(&config(vec![(&["*"], vec![r])]));
    let error = pick(&t, "/x", &[]).unwrap_err();
    assert_eq!(
        error,
        r#"route "teapot" of virtual host "vh0": is a direct response, which does not forward"#
    );
}

#[test]
fn a_cluster_header_route_fails_naming_the_header() {
    let r = route(
        PathSpecifier::Prefix("/".into()),
        vec![],
        Some(Action::Route(ProtoRouteAction {
            cluster_specifier: Some(ClusterSpecifier::ClusterHeader("x-cluster".into())),
            ..Default::default()
        })),
    );
    let t = table(&config(vec![(&["*"], vec![r])]));
    let error = pick(&t, "/x", &[]).unwrap_err();
    assert!(
        error.contains(r#"route #0 of virtual host "vh0""#),
        "{error}"
    );
    assert!(error.contains(r#""x-cluster" (cluster_header)"#), "{error}");
}

#[test]
fn the_virtual_host_follows_the_requests_authority() {
    let t = table(&config(vec![
        (&["svc"], vec![prefix("/", "own")]),
        (&["*.example.com"], vec![prefix("/", "example")]),
    ]));
    assert_eq!(pick(&t, "/", &[]).unwrap(), "own");
    assert_eq!(pick_at(&t, "api.example.com", "/", &[]).unwrap(), "example");
    let error = pick_at(&t, "elsewhere", "/", &[]).unwrap_err();
    assert_eq!(
        error,
        r#"route configuration "rc": no virtual host matches authority "elsewhere""#
    );
}

#[test]
fn no_matching_route_names_the_virtual_host_and_path() {
    let t = table(&config(vec![(&["*"], vec![prefix("/a/", "a")])]));
    assert_eq!(
        pick(&t, "/b/M", &[]).unwrap_err(),
        r#"virtual host "vh0": no route matches path "/b/M""#
    );
}

#[test]
fn a_route_with_a_bad_regex_or_query_matcher_never_matches() {
    let bad = route(
        PathSpecifier::SafeRegex(RegexMatcher {
            regex: "(".into(),
            ..Default::default()
        }),
        vec![],
        to("bad"),
    );
    let mut query = prefix("/", "query");
    query.r#match.as_mut().unwrap().query_parameters = vec![Default::default()];
    let t = table(&config(vec![(&["*"], vec![bad, query, prefix("/", "ok")])]));
    assert_eq!(pick(&t, "/", &[]).unwrap(), "ok");
}
