//! The scenarios of `bootstrap-examples/federation/`, run the way their
//! header comments and docs/federation.md say: `xdsfed testbed --config FILE
//! --bootstrap-out BOOTSTRAP`, and once it prints `ready`, `xdsfed watch
//! --bootstrap BOOTSTRAP …`. The commands are read from each file's header,
//! so the documented commands are the tested ones; each test then reads the
//! watch's lines until the documented sequence has gone by.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_fixture;
mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use cli_fixture::Running;
use tempfile::TempDir;

fn scenario_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bootstrap-examples/federation")
}

/// The scenario files this suite runs, one test each.
const TESTED: &[&str] = &[
    "alt.yaml",
    "fallback.yaml",
    "glob.yaml",
    "graph.yaml",
    "isolation.yaml",
    "list.yaml",
    "policy-stream.yaml",
    "redirect.yaml",
];

/// The `xdsfed …` commands of a scenario's header comment, split into
/// arguments as a shell would (single quotes, `\` line continuations).
fn header_commands(file: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut commands = Vec::new();
    let mut pending: Option<String> = None;
    for line in text.lines() {
        let Some(comment) = line.strip_prefix('#') else {
            break;
        };
        let comment = comment.trim();
        let joined = match pending.take() {
            Some(start) => format!("{start} {comment}"),
            None if comment.starts_with("xdsfed ") => comment.to_owned(),
            None => continue,
        };
        match joined.strip_suffix('\\') {
            Some(open) => pending = Some(open.trim_end().to_owned()),
            None => commands.push(shell_words(&joined)),
        }
    }
    commands
}

fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut in_word = false;
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                in_word = true;
            }
            c if c.is_whitespace() && !quoted => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// A scenario's testbed, running, and its other header commands.
struct Scenario {
    _testbed: Running,
    _dir: TempDir,
    /// The `xdsfed watch …` commands, with the bootstrap path of this run.
    watches: Vec<Vec<String>>,
}

impl Scenario {
    /// Starts the header's `xdsfed testbed` command with the bootstrap in a
    /// temporary directory, and waits for `ready`.
    fn start(file: &str) -> Self {
        let path = scenario_dir().join(file);
        let commands = header_commands(&path);
        assert!(
            commands.len() >= 2,
            "{file}: the header gives the testbed and watch commands: {commands:?}"
        );
        let dir = tempfile::tempdir().unwrap();
        let documented = commands[0]
            .iter()
            .skip_while(|a| *a != "--bootstrap-out")
            .nth(1)
            .cloned()
            .unwrap_or_else(|| panic!("{file}: the testbed command has --bootstrap-out"));
        let bootstrap = dir.path().join("bootstrap.json");
        let bootstrap = bootstrap.to_str().unwrap().to_owned();
        let localise = |command: &Vec<String>| -> Vec<String> {
            assert_eq!(command[0], "xdsfed", "{file}: {command:?}");
            command[1..]
                .iter()
                .map(|arg| {
                    if *arg == documented {
                        bootstrap.clone()
                    } else if arg.starts_with("bootstrap-examples/") {
                        Path::new(env!("CARGO_MANIFEST_DIR"))
                            .join(arg)
                            .to_str()
                            .unwrap()
                            .to_owned()
                    } else {
                        arg.clone()
                    }
                })
                .collect()
        };
        let testbed_args = localise(&commands[0]);
        assert_eq!(testbed_args[0], "testbed", "{file}: {testbed_args:?}");
        let args: Vec<&str> = testbed_args.iter().map(String::as_str).collect();
        let mut testbed = Running::spawn(&args);
        testbed.line_where("ready", |l| l == "ready");
        let watches: Vec<Vec<String>> = commands[1..].iter().map(localise).collect();
        for watch in &watches {
            assert_eq!(watch[0], "watch", "{file}: {watch:?}");
        }
        Self {
            _testbed: testbed,
            _dir: dir,
            watches,
        }
    }

    /// Runs the `n`-th watch command of the header, with `extra` flags.
    fn watch(&self, n: usize, extra: &[&str]) -> Running {
        let mut args: Vec<&str> = self.watches[n].iter().map(String::as_str).collect();
        args.extend_from_slice(extra);
        Running::spawn(&args)
    }
}

/// A line the test waits for: what it is, and how to recognise it.
type Wanted<'a> = (&'a str, &'a dyn Fn(&str) -> bool);

/// Reads lines until each of `wanted` has matched one, in any order.
fn lines_in_any_order(watch: &mut Running, wanted: &[Wanted<'_>]) {
    let mut missing: BTreeSet<usize> = (0..wanted.len()).collect();
    while let Some(&first) = missing.iter().next() {
        let what = wanted[first].0;
        let line = watch.line_where(what, |l| missing.iter().any(|&i| (wanted[i].1)(l)));
        missing.retain(|&i| !(wanted[i].1)(&line));
    }
}

fn is_event(line: &str, event: &str, name: &str) -> bool {
    let mut fields = line.split_whitespace();
    fields.nth(1) == Some(event) && fields.nth(1) == Some(name)
}

#[test]
fn every_federation_scenario_has_a_test_and_a_place_in_the_docs() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(scenario_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let tested: BTreeSet<String> = TESTED.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(on_disk, tested, "add a test to tests/cli_federation.rs");
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/federation.md"))
            .unwrap();
    for file in TESTED {
        let path = format!("bootstrap-examples/federation/{file}");
        assert!(docs.contains(&path), "docs/federation.md names {path}");
        for command in header_commands(&scenario_dir().join(file)) {
            let flags: Vec<&String> = command.iter().filter(|a| a.starts_with("--")).collect();
            assert!(!flags.is_empty(), "{file}: {command:?}");
        }
    }
}

#[test]
fn header_commands_are_split_like_a_shell_would() {
    assert_eq!(
        shell_words("xdsfed watch --resource cluster 'a#alt=b c'"),
        ["xdsfed", "watch", "--resource", "cluster", "a#alt=b c"]
    );
}

/// gRFC A71: the primary refuses connections at startup, so the cluster
/// comes from the secondary; when the primary answers, the client returns.
#[test]
fn fallback_scenario_serves_the_secondary_then_the_primary() {
    let scenario = Scenario::start("fallback.yaml");
    let mut watch = scenario.watch(0, &[]);
    let first = watch.line_where("the secondary's copy", |l| l.contains(" CHANGED "));
    assert!(first.contains("from-secondary"), "{first}");
    assert!(first.contains("(fallback server)"), "{first}");
    let back = watch.line_where("the primary's copy", |l| {
        l.contains(" CHANGED ") && l.contains("from-primary")
    });
    assert!(!back.contains("via "), "{back}");
}

/// The policy stream: while the edge control plane refuses connections,
/// onprem's copy of require-auth serves under the edge name (`#alt`), then
/// edge's own; onprem's rate-limit comes by its full type name.
#[test]
fn policy_stream_scenario_serves_the_alternative_then_the_primary() {
    let scenario = Scenario::start("policy-stream.yaml");
    let mut watch = scenario.watch(0, &[]);
    let first = watch.line_where("the alternative", |l| l.contains(" CHANGED "));
    assert!(
        first.contains("policies.edge/require-auth ")
            && first.contains("onprem: authorization required")
            && first.contains("#alt policies.onprem/require-auth"),
        "{first}"
    );
    watch.line_where("edge's own copy", |l| {
        l.contains(" CHANGED ") && l.contains("edge: authorization required")
    });
    let mut rate = scenario.watch(1, &[]);
    rate.line_where("onprem's rate-limit", |l| {
        l.contains(" CHANGED ") && l.contains("onprem: path too long")
    });
}

/// TP1 `#alt`: onprem's alternative serves under the watched name while
/// cloud refuses connections, then cloud's own copy replaces it.
#[test]
fn alt_scenario_serves_the_alternative_then_the_primary() {
    let scenario = Scenario::start("alt.yaml");
    let mut watch = scenario.watch(0, &[]);
    let first = watch.line_where("the alternative", |l| l.contains(" CHANGED "));
    assert!(
        first.contains("cloud.example/payments ") && first.contains("endpoints payments-onprem"),
        "{first}"
    );
    assert!(
        first.contains("(#alt onprem.example/payments-onprem)"),
        "{first}"
    );
    let back = watch.line_where("cloud's copy", |l| {
        l.contains(" CHANGED ") && l.contains("payments-cloud")
    });
    assert!(!back.contains("via "), "{back}");
}

/// TP1 §Glob: members arrive and leave; the empty glob is reported; the
/// resources that are not members never show.
#[test]
fn glob_scenario_reports_members_a_removal_and_the_empty_glob() {
    let scenario = Scenario::start("glob.yaml");
    let mut watch = scenario.watch(0, &[]);
    let one = "cloud.example/pool/one?zone=a";
    let two = "cloud.example/pool/two?zone=a";
    let first = watch.line_where("the first member", |l| is_event(l, "UPSERT", one));
    assert!(first.contains("EDS endpoints one"), "{first}");
    watch.line_where("the added member", |l| is_event(l, "UPSERT", two));
    watch.line_where("the removal", |l| is_event(l, "REMOVED", one));
    lines_in_any_order(
        &mut watch,
        &[
            ("the last removal", &|l| is_event(l, "REMOVED", two)),
            ("the empty glob", &|l| {
                is_event(l, "EMPTY", "cloud.example/pool/*?zone=a")
            }),
        ],
    );
    for outsider in ["three", "four", "five"] {
        assert!(
            watch.seen.iter().all(|l| !l.contains(outsider)),
            "{outsider} is no member: {:?}",
            watch.seen
        );
    }
}

/// TP1 §List collections: the member list, each locator from its own
/// authority, the inline entry (also watched alone with `#entry=`), a
/// member's update and its removal from the list.
#[test]
fn list_scenario_lists_members_across_authorities_and_inline() {
    let scenario = Scenario::start("list.yaml");
    let mut watch = scenario.watch(0, &[]);
    let entry = "cloud.example/edge#entry=admin";
    let members = format!("3 members: cloud.example/web, {entry}, onprem.example/api");
    watch.line_where("the member list", |l| {
        is_event(l, "LISTED", "cloud.example/edge") && l.ends_with(&members)
    });
    lines_in_any_order(
        &mut watch,
        &[
            ("cloud's listener", &|l| {
                is_event(l, "UPSERT", "cloud.example/web") && l.contains("routes cloud.example/web")
            }),
            ("onprem's listener", &|l| {
                is_event(l, "UPSERT", "onprem.example/api")
                    && l.contains("routes onprem.example/api")
            }),
            ("the inline entry", &|l| {
                is_event(l, "UPSERT", entry) && l.contains("routes cloud.example/admin")
            }),
        ],
    );
    watch.line_where("onprem's update", |l| {
        is_event(l, "UPSERT", "onprem.example/api") && l.contains("api-v2")
    });
    lines_in_any_order(
        &mut watch,
        &[
            ("the shorter list", &|l| {
                l.contains(" LISTED ")
                    && l.contains(&format!("2 members: cloud.example/web, {entry}"))
            }),
            ("the removal", &|l| {
                is_event(l, "REMOVED", "onprem.example/api")
            }),
        ],
    );

    let mut alone = scenario.watch(1, &[]);
    let line = alone.line_where("the inline entry alone", |l| l.contains(" CHANGED "));
    assert!(
        line.contains(entry) && line.contains("routes cloud.example/admin"),
        "{line}"
    );
}

/// TP1 "Server redirects": a member redirected across authorities is
/// delivered under its own name and marked; a loop, a chain past the hop
/// limit and an unknown authority are errors; a redirected singleton (TP1
/// "Aliasing") is followed too.
#[test]
fn redirect_scenario_follows_members_and_reports_bad_chains() {
    let scenario = Scenario::start("redirect.yaml");
    let mut watch = scenario.watch(0, &[]);
    lines_in_any_order(
        &mut watch,
        &[
            ("the member of its own", &|l| {
                is_event(l, "UPSERT", "cloud.example/pool/two") && !l.contains("via ")
            }),
            ("the redirected member", &|l| {
                is_event(l, "UPSERT", "cloud.example/pool/one")
                    && l.contains("endpoints payments-onprem")
                    && l.contains("(redirected to onprem.example/payments-onprem)")
            }),
            ("the loop", &|l| {
                is_event(l, "ERROR", "cloud.example/pool/loop") && l.contains("loop")
            }),
            ("the hop limit", &|l| {
                is_event(l, "ERROR", "cloud.example/pool/far")
                    && l.contains("more than 8 redirects")
            }),
            ("the unknown authority", &|l| {
                is_event(l, "ERROR", "cloud.example/pool/stray")
                    && l.contains("refused")
                    && l.contains("elsewhere.example")
            }),
        ],
    );
    watch.line_where("the target's update", |l| {
        is_event(l, "UPSERT", "cloud.example/pool/one") && l.contains("payments-onprem-v2")
    });

    let mut singleton = scenario.watch(1, &[]);
    singleton.line_where("the alias, followed", |l| {
        l.contains("cloud.example/alias")
            && l.contains("endpoints two")
            && l.contains("(redirected to cloud.example/pool/two)")
    });
}

/// Fallback is per authority: cloud.example moves to its fallback server
/// while other.example, on the same stream to the primary, stays put.
#[test]
fn isolation_scenario_moves_one_authority_and_leaves_the_other() {
    let scenario = Scenario::start("isolation.yaml");
    let mut watch = scenario.watch(0, &[]);
    lines_in_any_order(
        &mut watch,
        &[
            ("other.example's member", &|l| {
                is_event(l, "UPSERT", "other.example/db") && !l.contains("via ")
            }),
            ("cloud.example's member from the fallback server", &|l| {
                is_event(l, "UPSERT", "cloud.example/web") && l.contains("(fallback server)")
            }),
        ],
    );
    watch.line_where("cloud.example's member from the primary again", |l| {
        is_event(l, "UPSERT", "cloud.example/web") && !l.contains("via ")
    });
    assert!(
        watch
            .seen
            .iter()
            .filter(|l| is_event(l, "UPSERT", "other.example/db"))
            .all(|l| !l.contains("via ")),
        "other.example never leaves the primary: {:?}",
        watch.seen
    );
}

/// `--json` prints one object per collection event, with where the copy
/// came from; `--admin` works beside a collection.
#[test]
fn collection_json_lines_carry_the_member_and_its_source() {
    let scenario = Scenario::start("redirect.yaml");
    let mut watch = scenario.watch(0, &["--json", "--admin", "127.0.0.1:0"]);
    let admin = watch.line_where("the admin address", |l| l.contains(r#""event":"admin""#));
    let admin: serde_json::Value = serde_json::from_str(&admin).unwrap();
    assert!(
        admin["address"]
            .as_str()
            .is_some_and(|a| a.starts_with("127.0.0.1:")),
        "{admin}"
    );
    let line = watch.line_where("the redirected member", |l| {
        l.contains(r#""event":"upsert""#) && l.contains("pool/one")
    });
    let event: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(event["type"], "cluster");
    assert_eq!(
        event["collection"],
        "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/pool/*"
    );
    assert_eq!(
        event["name"],
        "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/pool/one"
    );
    assert_eq!(event["source"]["redirected"], true);
    assert_eq!(
        event["source"]["fetched_as"],
        "xdstp://onprem.example/envoy.config.cluster.v3.Cluster/payments-onprem"
    );
    assert!(event["version"].as_str().is_some(), "{event}");
    let line = watch.line_where("the loop", |l| {
        l.contains(r#""event":"error""#) && l.contains("pool/loop")
    });
    let event: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert!(
        event["error"].as_str().is_some_and(|e| e.contains("loop")),
        "{event}"
    );
}

/// Collections as graph roots: the glob's listeners are followed to their
/// endpoints across authorities and printed as a tree under the
/// collection; a listener that arrives joins the tree, and a deleted one
/// leaves it with everything only it reached.
#[test]
fn graph_scenario_follows_the_collection_members_through_the_graph() {
    let scenario = Scenario::start("graph.yaml");
    let mut watch = scenario.watch(0, &[]);
    let is_root = |l: &str, members: &str| {
        l.starts_with("Collection edge/* · cloud.example · ") && l.ends_with(members)
    };
    watch.line_where("the first tree", |l| is_root(l, " 1 member"));
    watch.line_where("edge/one's endpoints on onprem", |l| {
        l.ends_with("onprem/rack-1  10.0.0.7:8080")
    });
    watch.line_where("the tree with edge/two", |l| is_root(l, " 2 members"));
    watch.line_where("edge/two's endpoints on cloud", |l| {
        l.ends_with("cloud/cloud-a  10.1.0.9:8443")
    });
    watch.line_where("the tree without edge/one", |l| is_root(l, " 1 member"));
    let from = watch.seen.len();
    watch.line_where("edge/two's endpoints again", |l| {
        l.ends_with("cloud/cloud-a  10.1.0.9:8443")
    });
    let last_tree = &watch.seen[from..];
    assert!(
        last_tree
            .iter()
            .all(|l| !l.contains("edge/one") && !l.contains("10.0.0.7")),
        "edge/one and what only it reached are gone: {last_tree:?}"
    );
    assert!(
        last_tree.iter().any(|l| l.contains("Listener edge/two")),
        "{last_tree:?}"
    );
}
