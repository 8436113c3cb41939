//! Act 6 of `xdsfed demo`: a hybrid restart. The proxy starts again while
//! the cloud authority is unreachable; its client is ready at once from its
//! state directory and from a directory on-prem keeps on disk, and it
//! converges when the cloud returns.
//!
//! ```text
//! client of acts 1-5 ──accepts──► state directory ──loads──► new client
//! onprem server's store ──► SCRATCH/onprem/onprem.pb ──► new client's
//!                           onprem.example: [onprem server, the file]
//! ```
//!
//! The new client has the demo's bootstrap with the file added after the
//! onprem server: that server refuses connections, so onprem.example falls
//! back to the file (gRFC A71). The cloud server refuses connections too,
//! until the act lets it back.

use std::path::{Path, PathBuf};

use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use prost::Message;
use tokio::time::Instant;
use xdsfed::client::cache::ResourceStatus;
use xdsfed::client::state_dir::read_records;
use xdsfed::core::bootstrap::{FILE_SCHEME, FileSource};
use xdsfed::core::protocol::DEFAULT_MAX_MESSAGE_SIZE;
use xdsfed::core::status::{ClientStatus, ResourceStatusEntry};
use xdsfed::core::version::Version;
use xdsfed::graph::{ClusterEndpoints, ConfigGraph, Snapshot, Versioned};

use super::{ACT_LIMIT, Demo, LISTENER, build_client, demo_bootstrap};
use crate::cli::{CliError, emit};

/// The authority on-prem serves.
const ONPREM: &str = "onprem.example";
/// The file on-prem writes its resources to, in a directory of its own.
const FILE_NAME: &str = "onprem.pb";
const CLUSTER_TYPE: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const EDS_TYPE: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// How many names the scratch directory tries before giving up.
const SCRATCH_TRIES: u32 = 100;

/// The demo's own directory in the system's temporary directory: the state
/// directory when `--state-dir` is not given, and on-prem's local
/// directory. Removed, with everything in it, when dropped.
#[derive(Debug)]
pub(super) struct Scratch {
    root: PathBuf,
}

impl Scratch {
    /// Creates `xdsfed-demo-<pid>-<n>` in the temporary directory, with
    /// the first `n` not taken, 0700: it holds the demo's state directory,
    /// which must be private (`xdsfed_core::state_dir`).
    pub(super) fn create() -> Result<Self, CliError> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let pid = std::process::id();
        for n in 0..SCRATCH_TRIES {
            let root = base.join(format!("xdsfed-demo-{pid}-{n}"));
            match std::fs::DirBuilder::new().mode(0o700).create(&root) {
                Ok(()) => return Ok(Self { root }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(CliError::runtime(format!(
                        "cannot create the directory {}",
                        root.display()
                    ))
                    .caused_by(&e)
                    .hint("set TMPDIR to a directory the demo may write to"));
                }
            }
        }
        Err(CliError::runtime(format!(
            "{} already holds {SCRATCH_TRIES} directories xdsfed-demo-{pid}-*",
            base.display()
        )))
    }

    /// The directory.
    pub(super) fn path(&self) -> &Path {
        &self.root
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Best effort: what is left in the temporary directory harms nobody.
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Demo {
    /// Act 6: the interconnect to the cloud goes down and the proxy
    /// restarts; the new client serves from disk and from on-prem's file,
    /// then converges when the cloud returns.
    pub(super) async fn hybrid(
        mut self,
        state_dir: &Path,
        scratch: &Scratch,
    ) -> Result<Demo, CliError> {
        emit(
            "\n6. A hybrid restart. The client kept every copy it accepted in its state\n   directory. Now the interconnect to the cloud goes down, the onprem\n   server is down too, and the proxy restarts. On-prem keeps its\n   resources in a local directory, a file the new bootstrap lists after\n   the onprem server (gRFC A71 fallback).",
        )?;
        let file = self.write_onprem_directory(scratch)?;
        for name in ["cloud", "onprem"] {
            self.server(name)?
                .update_faults(|f| f.refuse_connections = true);
        }
        self.say("servers cloud and onprem refuse connections")?;
        let mut demo = self.restart_proxy(state_dir, &file).await?;
        demo.until_ready_with_onprem_from_file().await?;
        demo.cloud_returns().await?;
        Ok(demo)
    }

    /// On-prem's local directory: the onprem server's resources the graph
    /// uses (its clusters and their endpoints), as that server stores
    /// them, in one `DiscoveryResponse` of binary protobuf.
    fn write_onprem_directory(&mut self, scratch: &Scratch) -> Result<PathBuf, CliError> {
        let snapshot = self
            .graph
            .load()
            .ok_or_else(|| CliError::runtime("no snapshot yet"))?;
        let onprem = self.server("onprem")?.clone();
        let mut resources = Vec::new();
        for (type_url, name) in onprem_resources(&snapshot) {
            let stored = onprem.store().get(type_url, &name).ok_or_else(|| {
                CliError::runtime(format!("the onprem server does not hold {name}"))
            })?;
            resources.push(stored.resource.clone());
        }
        let count = resources.len();
        // No version_info: the client names the file's version by a digest
        // of its bytes.
        let response = DiscoveryResponse {
            resources,
            ..Default::default()
        };
        let dir = scratch.path().join("onprem");
        let path = dir.join(FILE_NAME);
        write_atomically(&dir, &path, &response.encode_to_vec())?;
        self.say(&format!("on-prem's local directory: {}", dir.display()))?;
        self.say(&format!(
            "on-prem writes its {count} resources there, to {FILE_NAME}"
        ))?;
        Ok(path)
    }

    /// Stops the client and its graph, and starts a new one on the same
    /// state directory, with `file` as onprem.example's second server.
    async fn restart_proxy(self, state_dir: &Path, file: &Path) -> Result<Demo, CliError> {
        let Demo {
            started,
            _scenario,
            testbed,
            client,
            graph,
            mut narrator,
        } = self;
        graph.shutdown().await;
        // The last handle: dropping it waits for the writes to the state
        // directory still pending, so the next client finds them all.
        drop(client);
        let scan = read_records(state_dir, DEFAULT_MAX_MESSAGE_SIZE as u64).map_err(|e| {
            CliError::runtime(format!("cannot read {}", state_dir.display())).caused_by(&e)
        })?;
        narrator.say(&format!(
            "the proxy stops; its state directory holds {} copies",
            scan.records.len()
        ))?;

        let mut source = FileSource::new(file).map_err(CliError::runtime)?;
        source.watched_directory = file.parent().map(Path::to_path_buf);
        let file_uri = source.uri();
        let mut bootstrap = demo_bootstrap(&testbed)?;
        bootstrap
            .authorities
            .get_mut(ONPREM)
            .ok_or_else(|| CliError::runtime(format!("the demo's bootstrap has no {ONPREM}")))?
            .xds_servers
            .push(source.server());
        let client = build_client(bootstrap, state_dir)?;
        narrator.forget();
        narrator.name_server(&file_uri, FILE_NAME);
        let loaded = client
            .status()
            .state_dir
            .map_or(0, |dir| dir.records_loaded);
        narrator.say(&format!(
            "the proxy starts again: {loaded} copies loaded from the state directory"
        ))?;
        // Before the graph watches anything, so before any server (or the
        // file) is asked: every copy is seen as it came from disk.
        narrator.look(&client.status())?;
        let graph = ConfigGraph::builder(client.clone())
            .listener(LISTENER)
            .start();
        Ok(Demo {
            started,
            _scenario,
            testbed,
            client,
            graph,
            narrator,
        })
    }

    /// Narrates until the new graph is ready, has every onprem.example
    /// copy from the file, and the client has failed to reach the cloud:
    /// the fallback, each copy, and where the snapshots' copies came from.
    async fn until_ready_with_onprem_from_file(&mut self) -> Result<(), CliError> {
        let cloud = self.server("cloud")?.addr().to_string();
        let deadline = Instant::now() + ACT_LIMIT;
        let mut said_fallback = false;
        let mut said_snapshot = None;
        let mut said_unreachable = false;
        loop {
            let status = self.client.status();
            let failed = status
                .servers
                .iter()
                .any(|s| s.server_uri.as_str() == cloud && s.server_failure > 0);
            if failed && !said_unreachable {
                said_unreachable = true;
                self.say("the client cannot reach server cloud; the copies from disk serve")?;
            }
            let fallback = status
                .authorities
                .iter()
                .find(|a| a.authority.as_deref() == Some(ONPREM) && a.on_fallback);
            if let Some(authority) = fallback.filter(|_| !said_fallback) {
                said_fallback = true;
                let active = self.narrator.server_name(&authority.active_uri);
                self.say(&format!("{ONPREM} falls back to {active} (gRFC A71)"))?;
            }
            self.narrator.look(&status)?;
            if let Some(snapshot) = self.graph.load() {
                let generation = snapshot.generation();
                if said_snapshot != Some(generation) {
                    let origins = self.origins(&snapshot, &status);
                    let ready = if said_snapshot.is_none() {
                        " ready"
                    } else {
                        ""
                    };
                    self.say(&format!("snapshot {generation}{ready}: {origins}"))?;
                    said_snapshot = Some(generation);
                }
                if said_fallback && said_unreachable && onprem_from_file(&snapshot, &status) {
                    return Ok(());
                }
            }
            self.tick(deadline, "onprem.example from the file").await?;
        }
    }

    /// Lets the cloud server accept connections again, and narrates until
    /// the client has converged: no copy left from disk, no ambient error.
    async fn cloud_returns(&mut self) -> Result<(), CliError> {
        let before = self.graph.load().map_or(0, |s| s.generation());
        self.server("cloud")?
            .update_faults(|f| f.refuse_connections = false);
        self.say("the interconnect is back: server cloud accepts connections")?;
        let back = Instant::now();
        let deadline = back + ACT_LIMIT;
        loop {
            let status = self.client.status();
            self.narrator.look(&status)?;
            let snapshot = self
                .graph
                .load()
                .filter(|s| s.generation() > before && converged(s, &status));
            if let Some(snapshot) = snapshot {
                let origins = self.origins(&snapshot, &status);
                self.say(&format!("snapshot {}: {origins}", snapshot.generation()))?;
                return self.say(&format!(
                    "converged {:.2} s after the cloud came back",
                    back.elapsed().as_secs_f64()
                ));
            }
            self.tick(deadline, "the client to converge").await?;
        }
    }

    /// Where the snapshot's copies came from, counted, and how many carry
    /// an ambient error: `4 from disk, 2 from onprem.pb; 4 ambient errors`.
    /// The client's status says where each copy came from (from disk, or
    /// the server that sent it, a fallback included) and its ambient error.
    fn origins(&self, snapshot: &Snapshot, status: &ClientStatus) -> String {
        let mut counts: Vec<(String, usize)> = Vec::new();
        let mut ambient = 0;
        for held in held_copies(snapshot) {
            let entry = status_of(status, &held);
            let origin = match entry {
                Some(r) if r.status == ResourceStatus::FromDisk => "from disk".to_owned(),
                Some(r) => {
                    let server = r
                        .source
                        .as_ref()
                        .map_or(r.server_uri.as_str(), |s| &s.server_uri);
                    format!("from {}", self.narrator.server_name(server))
                }
                None => "from nowhere the client says".to_owned(),
            };
            match counts.iter_mut().find(|(o, _)| *o == origin) {
                Some((_, n)) => *n += 1,
                None => counts.push((origin, 1)),
            }
            ambient += usize::from(held.ambient || entry.is_some_and(|r| r.error.is_some()));
        }
        let counted: Vec<String> = counts.iter().map(|(o, n)| format!("{n} {o}")).collect();
        let errors = match ambient {
            0 => "no ambient error".to_owned(),
            1 => "1 ambient error".to_owned(),
            n => format!("{n} ambient errors"),
        };
        format!("{}; {errors}", counted.join(", "))
    }
}

/// One copy the snapshot holds: its name, version, and whether the graph
/// has an ambient error with it.
struct Held<'a> {
    name: &'a str,
    version: &'a Version,
    ambient: bool,
}

/// The client's status of the copy the snapshot holds: the entry of that
/// name, if it still has that version.
fn status_of<'s>(status: &'s ClientStatus, held: &Held<'_>) -> Option<&'s ResourceStatusEntry> {
    status
        .resources
        .iter()
        .find(|r| r.name == held.name && r.version.as_deref().is_some_and(|v| *held.version == *v))
}

/// Every copy the snapshot holds: listeners, route configurations,
/// clusters and their EDS endpoints.
fn held_copies(snapshot: &Snapshot) -> Vec<Held<'_>> {
    fn held<'a, T>(name: &'a str, copy: Option<&'a Versioned<T>>) -> Option<Held<'a>> {
        copy.map(|v| Held {
            name,
            version: &v.provenance.version,
            ambient: v.ambient_error.is_some(),
        })
    }
    let mut copies = Vec::new();
    for l in snapshot.listeners() {
        copies.extend(held(&l.name, l.listener.as_ref()));
    }
    for r in snapshot.route_configs() {
        copies.extend(held(&r.name, r.route_config.as_ref()));
    }
    for c in snapshot.clusters() {
        copies.extend(held(&c.name, c.cluster.as_ref()));
        if let ClusterEndpoints::Eds {
            service_name,
            assignment,
        } = &c.endpoints
        {
            copies.extend(held(service_name, assignment.as_ref()));
        }
    }
    copies
}

/// `(type URL, name)` of the snapshot's onprem.example clusters and their
/// EDS endpoints.
fn onprem_resources(snapshot: &Snapshot) -> Vec<(&'static str, String)> {
    fn onprem<T>(copy: &Option<Versioned<T>>) -> bool {
        copy.as_ref()
            .is_some_and(|v| v.provenance.authority.as_deref() == Some(ONPREM))
    }
    let mut names = Vec::new();
    for c in snapshot.clusters() {
        if onprem(&c.cluster) {
            names.push((CLUSTER_TYPE, c.name.to_string()));
        }
        if let ClusterEndpoints::Eds {
            service_name,
            assignment,
        } = &c.endpoints
            && onprem(assignment)
        {
            names.push((EDS_TYPE, service_name.to_string()));
        }
    }
    names
}

/// Whether every onprem.example copy of the snapshot came from a file,
/// as the client's status says.
fn onprem_from_file(snapshot: &Snapshot, status: &ClientStatus) -> bool {
    let held = held_copies(snapshot);
    let onprem = onprem_resources(snapshot);
    !onprem.is_empty()
        && onprem.iter().all(|(_, name)| {
            held.iter()
                .find(|h| h.name == name)
                .and_then(|h| status_of(status, h))
                .and_then(|r| r.source.as_ref())
                .is_some_and(|s| s.server_uri.as_str().starts_with(FILE_SCHEME))
        })
}

/// Whether every copy of the snapshot is the client's current one,
/// confirmed by a server (none from disk) and without an ambient error.
fn converged(snapshot: &Snapshot, status: &ClientStatus) -> bool {
    held_copies(snapshot).iter().all(|held| {
        !held.ambient
            && status_of(status, held)
                .is_some_and(|r| r.status != ResourceStatus::FromDisk && r.error.is_none())
    })
}

/// Writes `bytes` to `path` as configuration tools do: a temporary file
/// beside it, renamed over it, so a reader never sees half a file.
fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let failed = |e: std::io::Error| {
        CliError::runtime(format!("cannot write {}", path.display())).caused_by(&e)
    };
    std::fs::create_dir_all(dir).map_err(failed)?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(failed)?;
    std::fs::rename(&tmp, path).map_err(failed)
}
