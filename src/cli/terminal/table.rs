//! The CSDS-style status of a client as a text table: one row per
//! resource (status, type, name, version, server), its error under it, then
//! one row per server connection with gRFC A78's counters.
//!
//! Every cell and note that holds a server's or a user's text goes through
//! [`shown`]: escaped, and cut when long, so a hostile name can neither
//! forge a row nor make the table unreadable; columns are padded by hand,
//! so no width can panic a formatter.

use crate::client::cache::ResourceStatus;
use crate::core::status::{ClientStatus, ResourceStatusEntry, SourceStatus};

use super::names::{short_name, short_version, type_short};
use super::text::{pad, shown};

/// The status table, ending with a newline.
pub fn status_table(status: &ClientStatus) -> String {
    let mut rows: Vec<[String; 5]> = vec![[
        "STATUS".into(),
        "TYPE".into(),
        "NAME".into(),
        "VERSION".into(),
        "SERVER".into(),
    ]];
    let mut errors: Vec<Option<String>> = vec![None];
    for r in &status.resources {
        rows.push([
            status_name(r.status).to_owned(),
            shown(type_short(&r.type_url)),
            shown(&r.name),
            shown(r.version.as_deref().map_or("-", short_version)),
            server_cell(r),
        ]);
        errors.push(r.error.as_ref().map(|e| match &r.failed_version {
            Some(v) => format!("rejected version {}: {}", shown(short_version(v)), shown(e)),
            None => shown(e),
        }));
    }
    let mut out = format!("node {}\n", shown(&status.node_id));
    out.push_str(&columns(&rows, &errors));
    let mut servers: Vec<[String; 6]> = vec![[
        "SERVER".into(),
        "CONNECTED".into(),
        "VARIANT".into(),
        "VALID".into(),
        "INVALID".into(),
        "FAILURES".into(),
    ]];
    for s in &status.servers {
        servers.push([
            shown(&s.server),
            if s.connected { "yes" } else { "no" }.into(),
            shown(&s.variant),
            s.resource_updates_valid.to_string(),
            s.resource_updates_invalid.to_string(),
            s.server_failure.to_string(),
        ]);
    }
    out.push('\n');
    out.push_str(&columns(&servers, &vec![None; servers.len()]));
    out
}

/// The server that sent the copy (the subscription's server before one
/// arrived), and how the copy arrived when not straight from the name's
/// own authority's first server.
fn server_cell(r: &ResourceStatusEntry) -> String {
    match &r.source {
        Some(source) => match arrival(source) {
            Some(why) => format!("{} ({why})", shown(&source.server_uri)),
            None => shown(&source.server_uri),
        },
        None => shown(&r.server_uri),
    }
}

/// Left-aligned columns two spaces apart; each row may carry a note
/// printed under it, indented.
fn columns<const N: usize>(rows: &[[String; N]], notes: &[Option<String>]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for (row, note) in rows.iter().zip(notes) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if i + 1 == N {
                line.push_str(cell);
            } else {
                line.push_str(&pad(cell, w));
                line.push_str("  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if let Some(note) = note {
            out.push_str(&format!("    └ {note}\n"));
        }
    }
    out
}

/// The CSDS name of a status.
pub fn status_name(status: ResourceStatus) -> &'static str {
    match status {
        ResourceStatus::Requested => "REQUESTED",
        ResourceStatus::DoesNotExist => "DOES_NOT_EXIST",
        ResourceStatus::Acked => "ACKED",
        ResourceStatus::Nacked => "NACKED",
        ResourceStatus::ReceivedError => "RECEIVED_ERROR",
        ResourceStatus::Timeout => "TIMEOUT",
        ResourceStatus::FromDisk => "FROM_DISK",
    }
}

/// How a copy arrived when not straight from its own authority's first
/// server (`fallback server`, `#alt NAME`, `redirected to NAME`); `None`
/// for one that did. Escaped, like every cell.
pub fn arrival(source: &SourceStatus) -> Option<String> {
    let fetched_as = source
        .fetched_as
        .as_deref()
        .map(|name| shown(&short_name(name)));
    let mut why = Vec::new();
    if source.redirected {
        why.push(format!(
            "redirected to {}",
            fetched_as.as_deref().unwrap_or("?")
        ));
    }
    if source.alt {
        why.push(format!("#alt {}", fetched_as.as_deref().unwrap_or("?")));
    }
    if source.fallback {
        why.push("fallback server".to_owned());
    }
    (!why.is_empty()).then(|| why.join(", "))
}

/// `via SERVER (why)` for a copy that did not come straight from its own
/// authority's first server; `None` for one that did. Escaped.
pub fn origin(source: &SourceStatus) -> Option<String> {
    arrival(source).map(|why| format!("via {} ({why})", shown(&source.server_uri)))
}

/// What is wrong in a dump, one line per problem: anything not ACKED.
/// Escaped, like every cell.
pub fn problems(status: &ClientStatus) -> Vec<String> {
    status
        .resources
        .iter()
        .filter(|r| r.status != ResourceStatus::Acked)
        .map(|r| {
            let what = match r.status {
                ResourceStatus::Requested => "never arrived".to_owned(),
                ResourceStatus::DoesNotExist => "does not exist".to_owned(),
                other => status_name(other).to_owned(),
            };
            let (kind, name) = (shown(type_short(&r.type_url)), shown(&r.name));
            match &r.error {
                Some(e) => format!("{kind} {name}: {what}: {}", shown(e)),
                None => format!("{kind} {name}: {what}"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::status::ServerStatus;

    #[test]
    fn table_lists_resources_with_errors_under_them_and_servers() {
        let status = ClientStatus {
            state_dir: None,
            node_id: "n1".into(),
            resources: vec![ResourceStatusEntry {
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
                name: "c1".into(),
                authority: None,
                server: "127.0.0.1:1 (insecure)".into(),
                server_uri: "127.0.0.1:1".into(),
                version: Some("0123456789abcdef".into()),
                status: ResourceStatus::Nacked,
                last_updated_unix_ms: None,
                error: Some("bad lb_policy".into()),
                failed_version: Some("fedcba9876543210".into()),
                failed_at_unix_ms: None,
                raw: None,
                cached: true,
                source: None,
            }],
            servers: vec![ServerStatus {
                server: "127.0.0.1:1 (insecure)".into(),
                server_uri: "127.0.0.1:1".into(),
                connected: true,
                server_failure: 0,
                resource_updates_valid: 1,
                resource_updates_invalid: 1,
                resource_updates_by_type: Default::default(),
                foreign_resources_ignored: 0,
                variant: "delta".into(),
                answered_types: Vec::new(),
            }],
            authorities: Vec::new(),
        };
        let table = status_table(&status);
        assert!(
            table.contains("NACKED  Cluster  c1    01234567  127.0.0.1:1"),
            "{table}"
        );
        assert!(
            table.contains("└ rejected version fedcba98: bad lb_policy"),
            "{table}"
        );
        assert!(table.contains("127.0.0.1:1 (insecure)  yes"), "{table}");
        assert_eq!(problems(&status).len(), 1);
    }

    /// The SERVER column names the server that sent the copy and, when it
    /// was not the name's own first server, how the copy arrived.
    #[test]
    fn server_column_says_who_sent_the_copy_and_how() {
        let entry = |source: Option<SourceStatus>| ResourceStatusEntry {
            type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
            name: "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/pool/one".into(),
            authority: Some("cloud.example".into()),
            server: "127.0.0.1:1 (insecure)".into(),
            server_uri: "127.0.0.1:1".into(),
            version: Some("0123456789abcdef".into()),
            status: ResourceStatus::Acked,
            last_updated_unix_ms: None,
            error: None,
            failed_version: None,
            failed_at_unix_ms: None,
            raw: None,
            cached: true,
            source,
        };
        let source = |server: &str, fallback: bool, redirected: bool| SourceStatus {
            server: format!("{server} (insecure)"),
            server_uri: server.to_owned(),
            authority: Some("onprem.example".into()),
            fetched_as: redirected.then(|| {
                "xdstp://onprem.example/envoy.config.cluster.v3.Cluster/payments".to_owned()
            }),
            fallback,
            alt: false,
            redirected,
        };
        assert_eq!(server_cell(&entry(None)), "127.0.0.1:1");
        assert_eq!(
            server_cell(&entry(Some(source("127.0.0.1:1", false, false)))),
            "127.0.0.1:1"
        );
        assert_eq!(
            server_cell(&entry(Some(source("127.0.0.1:2", true, false)))),
            "127.0.0.1:2 (fallback server)"
        );
        assert_eq!(
            server_cell(&entry(Some(source("127.0.0.1:3", false, true)))),
            "127.0.0.1:3 (redirected to onprem.example/payments)"
        );
    }

    /// One resource whose every text field is `text`, and its server.
    fn hostile(text: &str, error: bool) -> ClientStatus {
        ClientStatus {
            state_dir: None,
            node_id: text.to_owned(),
            resources: vec![ResourceStatusEntry {
                type_url: text.to_owned(),
                name: text.to_owned(),
                authority: Some(text.to_owned()),
                server: text.to_owned(),
                server_uri: text.to_owned(),
                version: Some(text.to_owned()),
                status: ResourceStatus::Nacked,
                last_updated_unix_ms: None,
                error: error.then(|| text.to_owned()),
                failed_version: Some(text.to_owned()),
                failed_at_unix_ms: None,
                raw: None,
                cached: true,
                source: Some(SourceStatus {
                    server: text.to_owned(),
                    server_uri: text.to_owned(),
                    authority: Some(text.to_owned()),
                    fetched_as: Some(text.to_owned()),
                    fallback: true,
                    alt: true,
                    redirected: true,
                }),
            }],
            servers: vec![ServerStatus {
                server: text.to_owned(),
                server_uri: text.to_owned(),
                connected: false,
                server_failure: 0,
                resource_updates_valid: 0,
                resource_updates_invalid: 0,
                resource_updates_by_type: Default::default(),
                foreign_resources_ignored: 0,
                variant: text.to_owned(),
                answered_types: Vec::new(),
            }],
            authorities: Vec::new(),
        }
    }

    /// The table's own lines: node, header, the row, its error, a blank
    /// line, header, the server. A name cannot add one.
    fn assert_safe(table: &str, error: bool) {
        assert_eq!(table.lines().count(), 6 + usize::from(error), "{table}");
        for line in table.lines() {
            assert!(
                !crate::terminal::text::has_terminal_controls(line),
                "{line:?}"
            );
        }
    }

    /// Issue 19, defect 2: a 70 000-character name panicked the width.
    #[test]
    fn a_name_longer_than_any_width_is_cut_not_a_panic() {
        let long = "x".repeat(70_000);
        let table = status_table(&hostile(&long, true));
        assert_safe(&table, true);
        assert!(table.contains("…(69800 more bytes)"), "{table}");
        assert!(table.len() < 5_000, "{} bytes", table.len());
    }

    #[test]
    fn a_name_cannot_forge_a_row_or_an_escape() {
        let forged = "evil\nACKED  Cluster  forged\x1b[31m\u{202e}";
        let table = status_table(&hostile(forged, false));
        assert_safe(&table, false);
        assert!(table.contains("evil\\nACKED  Cluster  forged\\x1b[31m\\u{202e}"));
    }

    proptest::proptest! {
        /// Whatever a server names things, the table keeps its shape and
        /// shows nothing that acts on a terminal.
        #[test]
        fn any_text_renders_safely(text in proptest::prelude::any::<String>(), error: bool) {
            assert_safe(&status_table(&hostile(&text, error)), error);
            for problem in problems(&hostile(&text, error)) {
                proptest::prop_assert!(!problem.contains('\n'));
            }
        }

        /// Long runs of any one character, control or not.
        #[test]
        fn long_text_of_any_character_renders_safely(
            c: char,
            len in 0usize..100_000,
        ) {
            let text: String = std::iter::repeat_n(c, len).collect();
            assert_safe(&status_table(&hostile(&text, true)), true);
        }
    }
}
