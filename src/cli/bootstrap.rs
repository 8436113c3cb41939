//! `xdsfed bootstrap check FILE`: validate a bootstrap and show how it
//! resolves: each authority's servers in order of preference, which
//! authorities end up on the same ADS stream, and the gRPC services servers
//! without `trusted_xds_server` may name (gRFC A102), with their credentials.
//!
//! ```text
//! bootstrap-examples/federated.yaml: valid
//! node xdsfed-client-1 (cluster checkout)
//!
//! AUTHORITY        SERVERS, IN ORDER OF PREFERENCE   LISTENER TEMPLATE
//! (old-style)      127.0.0.1:18000 (insecure)        xdstp://cloud.example/…/%s
//! …
//! ```

use std::path::PathBuf;

use xdsfed::core::authority::AuthorityRegistry;
use xdsfed::core::bootstrap::{Bootstrap, ServerConfig};

use super::target::load_bootstrap;
use super::text::{pad, shown};
use super::{CliError, emit};

/// `xdsfed bootstrap …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Validate a bootstrap file and print the authority → servers table and
    /// the ADS streams it implies (authorities whose servers are equal share
    /// one stream). Exit code 2, naming the field, when it is invalid.
    Check(CheckArgs),
}

/// Flags of `xdsfed bootstrap check`.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// The bootstrap file (JSON, or YAML when it ends in .yaml/.yml).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(command: Command) -> Result<(), CliError> {
    match command {
        Command::Check(args) => check(args),
    }
}

fn check(args: CheckArgs) -> Result<(), CliError> {
    let bootstrap = load_bootstrap(&args.file)?;
    let report = Report::of(&bootstrap);
    if args.json {
        let json = serde_json::json!({
            "file": args.file.display().to_string(),
            "valid": true,
            "node": {"id": bootstrap.node.id, "cluster": bootstrap.node.cluster},
            "authorities": report.authorities.iter().map(|a| serde_json::json!({
                "authority": a.name,
                "servers": a.servers,
                "listener_template": a.template,
            })).collect::<Vec<_>>(),
            "streams": report.streams.iter().map(|s| serde_json::json!({
                "server": s.server,
                "serves": s.serves,
            })).collect::<Vec<_>>(),
            "allowed_grpc_services": report.allowed.iter().map(|a| serde_json::json!({
                "target": a.target,
                "channel_creds": a.channel_creds,
                "call_creds": a.call_creds,
            })).collect::<Vec<_>>(),
        });
        return emit(&serde_json::to_string_pretty(&json).unwrap_or_default());
    }
    emit(&format!(
        "{}: valid\n{}",
        shown(&args.file.display().to_string()),
        report.text(&bootstrap)
    ))
}

/// One row of the authority table.
struct AuthorityRow {
    /// `None` for old-style names (the top-level servers).
    name: Option<String>,
    servers: Vec<String>,
    template: String,
}

/// One ADS stream and what it carries.
struct StreamRow {
    server: String,
    serves: Vec<String>,
}

/// One entry of `allowed_grpc_services` (gRFC A102).
struct AllowedRow {
    target: String,
    channel_creds: &'static str,
    call_creds: Vec<&'static str>,
}

struct Report {
    authorities: Vec<AuthorityRow>,
    streams: Vec<StreamRow>,
    allowed: Vec<AllowedRow>,
}

impl Report {
    fn of(bootstrap: &Bootstrap) -> Self {
        let names = |servers: &[ServerConfig]| -> Vec<String> {
            servers
                .iter()
                .map(|s| xdsfed::core::authority::ServerKey::new(s).to_string())
                .collect()
        };
        let mut authorities = vec![AuthorityRow {
            name: None,
            servers: names(&bootstrap.xds_servers),
            template: bootstrap
                .client_default_listener_resource_name_template
                .clone(),
        }];
        for (name, config) in &bootstrap.authorities {
            authorities.push(AuthorityRow {
                name: Some(name.clone()),
                servers: names(bootstrap.servers_for_authority(name).unwrap_or(&[])),
                template: config.client_listener_resource_name_template.clone(),
            });
        }
        let registry = AuthorityRegistry::new(bootstrap);
        // Sorted by key, as `server_keys` gives them.
        let streams = registry
            .server_keys()
            .filter_map(|key| registry.id_of(key))
            .map(|id| {
                let mut serves: Vec<String> = Vec::new();
                if registry.serves_old_style(id) {
                    serves.push("old-style names".to_owned());
                }
                serves.extend(registry.authorities_for(id).map(display_authority));
                StreamRow {
                    server: registry.name(id).to_string(),
                    serves,
                }
            })
            .collect();
        let allowed = bootstrap
            .allowed_grpc_services
            .iter()
            .map(|(target, listed)| AllowedRow {
                target: target.clone(),
                channel_creds: listed.channel_creds.type_name(),
                call_creds: listed.call_creds.iter().map(|c| c.type_name()).collect(),
            })
            .collect();
        Report {
            authorities,
            streams,
            allowed,
        }
    }

    /// The report as text; every name, server and template escaped and
    /// cut (see [`super::text`]), columns padded by hand so no width panics.
    fn text(&self, bootstrap: &Bootstrap) -> String {
        let mut out = format!("node {}", shown(&bootstrap.node.id));
        if !bootstrap.node.cluster.is_empty() {
            out.push_str(&format!(" (cluster {})", shown(&bootstrap.node.cluster)));
        }
        out.push_str("\n\n");
        let names: Vec<(String, String)> = self
            .authorities
            .iter()
            .map(|a| {
                let shown_name = a.name.as_deref().map(|n| shown(&display_authority(n)));
                (
                    shown_name
                        .clone()
                        .unwrap_or_else(|| "(old-style)".to_owned()),
                    shown_name.unwrap_or_else(|| "(xds:/// default)".to_owned()),
                )
            })
            .collect();
        let width = names
            .iter()
            .map(|(name, _)| name.chars().count())
            .max()
            .unwrap_or(0)
            .max(17);
        out.push_str(&pad("AUTHORITY", width));
        out.push_str("  SERVERS, IN ORDER OF PREFERENCE\n");
        for (a, (name, _)) in self.authorities.iter().zip(&names) {
            let servers = if a.servers.is_empty() {
                "(none: only servers named in ConfigSources)".to_owned()
            } else {
                a.servers
                    .iter()
                    .map(|s| shown(s))
                    .collect::<Vec<_>>()
                    .join(", then ")
            };
            out.push_str(&format!("{}  {servers}\n", pad(name, width)));
        }
        out.push_str("\nLISTENER TEMPLATES\n");
        for (a, (_, name)) in self.authorities.iter().zip(&names) {
            out.push_str(&format!("{}  {}\n", pad(name, width), shown(&a.template)));
        }
        out.push_str(&format!(
            "\nADS STREAMS ({}, one per distinct server)\n",
            self.streams.len()
        ));
        for s in &self.streams {
            let shared = if s.serves.len() > 1 { "  (shared)" } else { "" };
            let serves: Vec<String> = s.serves.iter().map(|x| shown(x)).collect();
            out.push_str(&format!(
                "{}\n  carries {}{shared}\n",
                shown(&s.server),
                serves.join(", ")
            ));
        }
        self.allowed_text(&mut out);
        out
    }

    /// The `allowed_grpc_services` section, when the bootstrap has one:
    /// each target and the credentials it is dialled with.
    fn allowed_text(&self, out: &mut String) {
        if self.allowed.is_empty() {
            return;
        }
        out.push_str(
            "\nALLOWED gRPC SERVICES (targets servers without trusted_xds_server may name)\n",
        );
        let targets: Vec<String> = self.allowed.iter().map(|a| shown(&a.target)).collect();
        let width = targets.iter().map(|t| t.chars().count()).max().unwrap_or(0);
        for (a, target) in self.allowed.iter().zip(&targets) {
            let mut creds = vec![a.channel_creds];
            creds.extend(&a.call_creds);
            out.push_str(&format!("{}  {}\n", pad(target, width), creds.join(", ")));
        }
    }
}

/// The empty authority (`xdstp:///…`) needs a visible name.
fn display_authority(name: &str) -> String {
    if name.is_empty() {
        "\"\" (empty)".to_owned()
    } else {
        name.to_owned()
    }
}
