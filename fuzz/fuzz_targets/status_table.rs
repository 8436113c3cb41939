//! Fuzzes the CLI's status table with names, versions, errors and server
//! names a hostile management server could send, and checks that the
//! table never panics, shows no character that acts on a terminal, and
//! has exactly its own rows: a name cannot forge one.

#![no_main]

use libfuzzer_sys::fuzz_target;
use xdsfed::core::cache::ResourceStatus;
use xdsfed::core::status::{ClientStatus, ResourceStatusEntry, ServerStatus, SourceStatus};
use xdsfed::terminal::{table, text};

fuzz_target!(|data: &[u8]| {
    // NUL separates the fields; a short input leaves the rest empty.
    let input = String::from_utf8_lossy(data);
    let mut fields = input.split('\0').map(str::to_owned);
    let mut next = || fields.next().unwrap_or_default();
    let (name, version, error, server, node_id, fetched_as) =
        (next(), next(), next(), next(), next(), next());
    let has_error = !error.is_empty();
    let status = ClientStatus {
        state_dir: None,
        node_id,
        resources: vec![ResourceStatusEntry {
            type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
            name,
            authority: None,
            server: server.clone(),
            version: Some(version.clone()),
            status: ResourceStatus::Nacked,
            last_updated_unix_ms: None,
            error: has_error.then_some(error),
            failed_version: Some(version),
            failed_at_unix_ms: None,
            raw: None,
            cached: true,
            source: Some(SourceStatus {
                server: server.clone(),
                authority: None,
                fetched_as: Some(fetched_as),
                fallback: true,
                alt: false,
                redirected: true,
            }),
        }],
        servers: vec![ServerStatus {
            server,
            connected: true,
            server_failure: 0,
            resource_updates_valid: 0,
            resource_updates_invalid: 1,
            resource_updates_by_type: Default::default(),
            foreign_resources_ignored: 0,
            variant: "delta".into(),
            answered_types: Vec::new(),
        }],
        authorities: Vec::new(),
    };
    let rendered = table::status_table(&status);
    // node, header, the row, its error, a blank line, header, the server.
    let expected = 6 + usize::from(has_error);
    assert_eq!(rendered.lines().count(), expected, "{rendered}");
    for line in rendered.lines() {
        assert!(!text::has_terminal_controls(line), "{line:?}");
    }
    for problem in table::problems(&status) {
        assert!(!problem.contains('\n') && !text::has_terminal_controls(&problem));
    }
});
