//! Hostile scenario input: every case is refused while the scenario is
//! checked, as bad input naming its field, never by a panic, an abort or a
//! hang once the testbed runs.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{
    path::{Path, PathBuf},
    sync::mpsc,
    time::Duration,
};

use xdsfed_testbed::scenario::{Scenario, ScenarioError};

/// How long a check may take before the test calls it a hang; tests never
/// assert timings, so this only turns a hang into a failure.
const PATIENCE: Duration = Duration::from_secs(60);

/// Checks `yaml` and returns the error, which must be bad input.
fn refused(yaml: &str) -> ScenarioError {
    let Err(err) = Scenario::from_yaml(yaml) else {
        panic!("the scenario is accepted");
    };
    assert!(err.is_bad_input(), "{err}");
    err
}

/// The field path of an `Invalid` error.
fn invalid_path(err: &ScenarioError) -> &str {
    match err {
        ScenarioError::Invalid { path, .. } => path,
        other => panic!("expected an invalid field, got {other}"),
    }
}

const ONE_SERVER: &str = "servers: [{name: a, authorities: [a.example]}]\n";

#[test]
fn step_beyond_the_longest_duration_is_refused_naming_at() {
    let err = refused(&format!(
        "{ONE_SERVER}schedule:\n  - at: 10000000000000000000s\n    faults: {{server: a}}\n"
    ));
    assert_eq!(invalid_path(&err), "schedule[0].at", "{err}");
}

#[test]
fn restart_down_for_and_response_delay_beyond_the_longest_duration_are_refused() {
    let err = refused(&format!(
        "{ONE_SERVER}schedule:\n  - at: 1s\n    restart: {{server: a, down_for: 1000000m}}\n"
    ));
    assert_eq!(invalid_path(&err), "schedule[0].restart.down_for", "{err}");
    let err = refused(&format!(
        "{ONE_SERVER}schedule:\n  - at: 1s\n    faults: {{server: a, response_delay: 99999999999s}}\n"
    ));
    assert_eq!(
        invalid_path(&err),
        "schedule[0].faults.response_delay",
        "{err}"
    );
}

#[test]
fn the_longest_duration_is_accepted() {
    Scenario::from_yaml(&format!(
        "{ONE_SERVER}schedule:\n  - at: 525600m\n    faults: {{server: a}}\n"
    ))
    .expect("a year is the longest offset, and allowed");
}

#[test]
fn generator_of_too_many_clusters_is_refused_naming_count() {
    let err = refused(&format!(
        "{ONE_SERVER}generators:\n  - server: a\n    clusters: {{count: 4294967295}}\n"
    ));
    assert_eq!(invalid_path(&err), "generators[0].clusters.count", "{err}");
}

#[test]
fn generator_of_too_many_endpoints_is_refused_naming_endpoints_per_cluster() {
    let err = refused(&format!(
        "{ONE_SERVER}generators:\n  - server: a\n    clusters: {{count: 2, endpoints_per_cluster: 4294967295}}\n"
    ));
    assert_eq!(
        invalid_path(&err),
        "generators[0].clusters.endpoints_per_cluster",
        "{err}"
    );
}

/// The bounds are on the whole scenario: generators that are each within
/// them but together exceed them are refused at the first one too many.
#[test]
fn generators_together_beyond_the_bound_are_refused_at_the_one_too_many() {
    let err = refused(&format!(
        "{ONE_SERVER}generators:\n  \
         - server: a\n    clusters: {{count: 1000000, endpoints_per_cluster: 6}}\n  \
         - server: a\n    clusters: {{count: 1000000, endpoints_per_cluster: 6, prefix: more}}\n"
    ));
    assert_eq!(invalid_path(&err), "generators[1].clusters.count", "{err}");
}

/// xDS TP1's design load, a million endpoints, fits within the bounds.
#[test]
fn a_million_endpoints_are_accepted() {
    Scenario::from_yaml(&format!(
        "{ONE_SERVER}generators:\n  - server: a\n    clusters: {{count: 100000, endpoints_per_cluster: 10}}\n"
    ))
    .expect("a million endpoints are within the bounds");
}

/// Deeply nested flow collections made the YAML parser quadratic; they are
/// refused before parsing, with the line where the nesting got too deep.
#[test]
fn deeply_nested_flow_collections_are_refused_before_parsing() {
    let text = format!("servers: {}", "[".repeat(100_000));
    let err = refused(&text);
    let message = err.to_string();
    assert!(
        message.contains("nested") && message.contains("line 1"),
        "{message}"
    );
}

#[test]
fn brackets_in_quoted_strings_comments_and_plain_scalars_do_not_count_as_nesting() {
    let deep = "[".repeat(500);
    Scenario::from_yaml(&format!(
        "# {deep}\nservers:\n  - name: \"{deep}\"\n    authorities: ['{deep}x.example']\n\
         resources:\n  - name: a{deep}\n    server: \"{deep}\"\n"
    ))
    .map(drop)
    .or_else(|e| match e {
        // Only the content is wrong (the authority and server name), never the nesting.
        ScenarioError::Invalid { .. } => Ok(()),
        other => Err(other),
    })
    .expect("no nesting error");
}

/// A directory of its own under the system's temporary directory, removed
/// when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("xdsfed-testbed-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `Scenario::from_file` on a thread, so a hang fails the test.
fn from_file_within_patience(file: &Path) -> Result<Scenario, ScenarioError> {
    let (tx, rx) = mpsc::channel();
    let file = file.to_owned();
    std::thread::spawn(move || {
        let _ = tx.send(Scenario::from_file(&file));
    });
    rx.recv_timeout(PATIENCE)
        .expect("reading the scenario returns instead of hanging")
}

#[test]
fn fifo_as_scenario_is_refused_naming_the_file() {
    let dir = TempDir::new("fifo");
    let fifo = dir.path().join("scenario.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let Err(err) = from_file_within_patience(&fifo) else {
        panic!("a FIFO is accepted");
    };
    assert!(err.is_bad_input());
    let message = err.to_string();
    assert!(
        message.contains(&fifo.display().to_string()) && message.contains("regular file"),
        "{message}"
    );
}

#[test]
fn oversized_scenario_file_is_refused_naming_the_file() {
    let dir = TempDir::new("oversized");
    let file = dir.path().join("huge.yaml");
    let mut text = String::from(ONE_SERVER);
    let comment = format!("# {}\n", "x".repeat(1000));
    while text.len() <= 17 * 1024 * 1024 {
        text.push_str(&comment);
    }
    std::fs::write(&file, text).unwrap();
    let Err(err) = from_file_within_patience(&file) else {
        panic!("the oversized file is accepted");
    };
    assert!(err.is_bad_input());
    let message = err.to_string();
    assert!(
        message.contains(&file.display().to_string()) && message.contains("larger than"),
        "{message}"
    );
}

#[test]
fn authority_that_is_not_a_uri_authority_is_refused_naming_it() {
    let err = refused("servers: [{name: a, authorities: [ok.example, \"a b/c\"]}]\n");
    assert_eq!(invalid_path(&err), "servers[0].authorities[1]", "{err}");
    let err = refused("servers: [{name: a, authorities: [a/c]}]\n");
    assert_eq!(invalid_path(&err), "servers[0].authorities[0]", "{err}");
}

#[test]
fn redirect_target_that_is_not_an_xdstp_name_is_refused_naming_it() {
    let err = refused(&format!(
        "{ONE_SERVER}schedule:\n  - at: 1s\n    faults:\n      server: a\n      redirects:\n        \
         xdstp://a.example/envoy.config.listener.v3.Listener/l: not-an-xdstp-name\n"
    ));
    let path = invalid_path(&err);
    assert!(
        path.starts_with("schedule[0].faults.redirects") && path.contains("Listener/l"),
        "{err}"
    );
}

#[test]
fn redirect_to_an_xdstp_name_is_accepted() {
    Scenario::from_yaml(&format!(
        "{ONE_SERVER}schedule:\n  - at: 1s\n    faults:\n      server: a\n      redirects:\n        \
         xdstp://a.example/envoy.config.listener.v3.Listener/l: xdstp://b.example/envoy.config.listener.v3.Listener/m\n"
    ))
    .expect("an xdstp target is fine");
}

#[test]
fn recording_limit_of_zero_is_refused_naming_it() {
    let err = refused(&format!(
        "{ONE_SERVER}recording: {{events_per_stream: 0}}\n"
    ));
    assert_eq!(invalid_path(&err), "recording.events_per_stream", "{err}");
    let err = refused(&format!("{ONE_SERVER}recording: {{streams: 0}}\n"));
    assert_eq!(invalid_path(&err), "recording.streams", "{err}");
}

/// Each generated name carries the prefix and the authority, a million
/// times over: both are bounded.
#[test]
fn generator_with_a_huge_prefix_or_authority_is_refused_naming_it() {
    let long = "p".repeat(100_000);
    let err = refused(&format!(
        "{ONE_SERVER}generators:\n  - server: a\n    clusters: {{count: 1000, prefix: {long}}}\n"
    ));
    assert_eq!(invalid_path(&err), "generators[0].clusters.prefix", "{err}");
    let err = refused(&format!(
        "servers: [{{name: a, authorities: [{long}]}}]\ngenerators:\n  - server: a\n    clusters: {{count: 1000}}\n"
    ));
    assert_eq!(
        invalid_path(&err),
        "generators[0].clusters.authority",
        "{err}"
    );
}

/// A checked scenario can be logged: its `Debug` leaves out the descriptor
/// pool, whose own `Debug` overflows a thread's stack.
#[test]
fn a_scenario_formats_with_debug() {
    let Ok(scenario) = Scenario::from_yaml(ONE_SERVER) else {
        panic!("the scenario is valid");
    };
    let text = format!("{scenario:?}");
    assert!(text.contains("a.example"), "{text}");
}

/// Well-known types at the edges of their range go through the JSON
/// mapping without a panic: accepted or refused naming the resource.
#[test]
fn extreme_well_known_values_in_resources_do_not_panic() {
    for value in [
        "-9223372036854775808s",
        "9223372036854775807.999999999s",
        "-315576000000.999999999s",
        "99999999999999999999999s",
        "1e308s",
        "-0.000000001s",
    ] {
        let yaml = format!(
            "{ONE_SERVER}resources:\n  - name: c\n    server: a\n    resource:\n      \
             \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n      \
             connect_timeout: \"{value}\"\n"
        );
        let result = std::panic::catch_unwind(|| Scenario::from_yaml(&yaml).err());
        match result {
            Ok(None) => {}
            Ok(Some(err)) => {
                assert!(err.to_string().contains("resources[0]"), "{value}: {err}")
            }
            Err(_) => panic!("{value} panicked"),
        }
    }
}

/// Aliases that expand exponentially ("billion laughs") are refused by the
/// YAML deserializer's repetition limit instead of filling the memory.
#[test]
fn exponentially_expanding_aliases_are_refused() {
    // Inside a resource, where any YAML value is read before the mapping.
    let mut yaml = format!(
        "{ONE_SERVER}resources:\n  - name: c\n    server: a\n    resource:\n      \
         \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n      \
         x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    );
    for i in 1..10 {
        let p = i - 1;
        yaml.push_str(&format!(
            "      x{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    let message = refused(&yaml).to_string();
    assert!(message.contains("repetition limit"), "{message}");
}

/// A resource whose own name differs from its scenario name would be one
/// resource to one client and another to the next: refused, naming the
/// field and both names.
#[test]
fn resource_named_differently_inside_is_refused_naming_both() {
    let err = refused(&format!(
        "{ONE_SERVER}resources:
  - name: svc
    server: a
    resource:
      \"@type\": type.googleapis.com/envoy.config.listener.v3.Listener
      name: other
"
    ));
    assert_eq!(invalid_path(&err), "resources[0].name", "{err}");
    let message = err.to_string();
    assert!(
        message.contains("\"svc\" is not the name inside the resource: resource.name is \"other\""),
        "{message}"
    );
}

#[test]
fn scheduled_set_and_endpoints_are_checked_by_their_own_name_field() {
    let err = refused(&format!(
        "{ONE_SERVER}schedule:
  - at: 1s
    set:
      name: xdstp://a.example/envoy.config.endpoint.v3.ClusterLoadAssignment/e1
      resource:
        \"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
        cluster_name: xdstp://a.example/envoy.config.endpoint.v3.ClusterLoadAssignment/e2
"
    ));
    assert_eq!(invalid_path(&err), "schedule[0].set.name", "{err}");
    assert!(err.to_string().contains("resource.cluster_name is \"xdstp://a.example/envoy.config.endpoint.v3.ClusterLoadAssignment/e2\""), "{err}");
}

/// `encoded` bytes are checked too (`0a05` then "other" is a Cluster named
/// "other"), and a resource without a name inside is refused as well.
#[test]
fn encoded_and_unnamed_resources_are_checked() {
    let err = refused(&format!(
        "{ONE_SERVER}resources:
  - name: svc
    server: a
    encoded: {{type_url: type.googleapis.com/envoy.config.cluster.v3.Cluster, hex: \"0a056f74686572\"}}
"
    ));
    assert_eq!(invalid_path(&err), "resources[0].name", "{err}");
    assert!(
        err.to_string().contains("encoded.name is \"other\""),
        "{err}"
    );
    let err = refused(&format!(
        "{ONE_SERVER}resources:
  - name: svc
    server: a
    resource: {{\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration}}
"
    ));
    assert!(err.to_string().contains("resource.name is \"\""), "{err}");
}

/// xdstp names compare by canonical key, as the client compares them.
#[test]
fn xdstp_names_spelled_differently_are_the_same_name() {
    Scenario::from_yaml(&format!(
        "{ONE_SERVER}resources:
  - name: xdstp://a.example/envoy.config.listener.v3.Listener/l?b=2&a=1
    resource:
      \"@type\": type.googleapis.com/envoy.config.listener.v3.Listener
      name: xdstp://a.example/envoy.config.listener.v3.Listener/l?a=1&b=%32
"
    ))
    .expect("the same name in another spelling");
}

/// A resource that does not map to its type names the field inside it,
/// after the resource's own path, for an enum, a nested number and an
/// unknown key alike.
#[test]
fn resource_mapping_errors_name_the_field_inside_the_resource() {
    let resource = |body: &str| {
        format!(
            "{ONE_SERVER}resources:\n  - name: xdstp://a.example/envoy.config.cluster.v3.Cluster/c\n    \
             resource: {{\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, {body}}}\n"
        )
    };
    let cases = [
        (
            "lb_policy: ROUND_ROBN",
            "resources[0].resource.lb_policy",
            "unrecognized enum value 'ROUND_ROBN'",
        ),
        (
            "load_assignment: {endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {port_value: x}}}}]}]}",
            "resources[0].resource.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value",
            "",
        ),
        ("colour: red", "resources[0].resource.colour", "colour"),
    ];
    for (body, path, message) in cases {
        let err = refused(&resource(body));
        assert_eq!(invalid_path(&err), path, "{err}");
        assert!(err.to_string().contains(message), "{err}");
        assert_eq!(err.to_string().matches(path).count(), 1, "{err}");
    }
}

/// An unknown scenario field prints its path once.
#[test]
fn unknown_scenario_field_prints_its_path_once() {
    let err = refused("servers: [{name: a, authorities: [a.example], colour: red}]\n");
    let text = err.to_string();
    assert!(
        text.starts_with("servers[0].colour: unknown field `colour`"),
        "{text}"
    );
    assert!(!text.contains("servers[0]: "), "{text}");
}
