//! Starting a scenario and running its schedule.

use std::sync::Arc;

use tokio::task::{JoinHandle, JoinSet};

use super::model::ScheduleClock;
use super::{Action, Planned, Scenario, ScenarioError, Source, Step, generate, invalid, json};
use crate::{Testbed, faults::Injected, server::Server};

/// A started scenario. Dropping it stops the schedule; the testbed stops when
/// the last reference to it goes.
#[derive(Debug)]
pub struct RunningScenario {
    testbed: Arc<Testbed>,
    schedule: JoinHandle<Vec<ScenarioError>>,
}

impl RunningScenario {
    /// The servers and backends.
    pub fn testbed(&self) -> &Arc<Testbed> {
        &self.testbed
    }

    /// Waits for the schedule to finish; returns the steps that failed (a
    /// failed step is also logged, and later steps still run).
    pub async fn schedule_finished(&mut self) -> Vec<ScenarioError> {
        (&mut self.schedule).await.unwrap_or_default()
    }
}

impl Drop for RunningScenario {
    fn drop(&mut self) {
        self.schedule.abort();
    }
}

struct Env {
    testbed: Arc<Testbed>,
    ports: json::BackendPorts,
    pool: prost_reflect::DescriptorPool,
}

impl Env {
    fn server(&self, path: &str, name: &str) -> Result<&Arc<Server>, ScenarioError> {
        self.testbed
            .server(name)
            .ok_or_else(|| invalid(path, format!("no server is named {name:?}")))
    }

    fn set(&self, planned: &Planned) -> Result<(), ScenarioError> {
        let any = match &planned.source {
            Source::Encoded(any) => any.clone(),
            Source::Yaml(value) => json::to_any(&self.pool, value, &self.ports)
                .map_err(|why| invalid(format!("{}.resource", planned.path), why))?,
        };
        self.server(&planned.path, &planned.server)?
            .set_resource(&planned.name, any)
            .map_err(|source| ScenarioError::Apply {
                path: planned.path.clone(),
                source: Box::new(source),
            })?;
        Ok(())
    }

    /// Applies `step`; a failure is logged and kept, and the schedule goes on.
    async fn run_step(&self, step: &Step, failed: &mut Vec<ScenarioError>) {
        match self.apply(step).await {
            Ok(()) => tracing::info!(step = %step.path, at = ?step.at, "scheduled step applied"),
            Err(e) => {
                tracing::warn!(step = %step.path, error = %e, "scheduled step failed");
                failed.push(e);
            }
        }
    }

    async fn apply(&self, step: &Step) -> Result<(), ScenarioError> {
        let apply = |source| ScenarioError::Apply {
            path: step.path.clone(),
            source: Box::new(source),
        };
        match &step.action {
            Action::Set(planned) => self.set(planned),
            Action::Delete {
                server,
                type_url,
                name,
            } => self
                .server(&step.path, server)?
                .delete_resource(type_url, name)
                .map(drop)
                .map_err(apply),
            Action::Faults {
                server,
                faults,
                inject,
            } => {
                let mut faults = faults.clone();
                for (i, (name, value)) in inject.iter().enumerate() {
                    let resource = json::to_any(&self.pool, value, &self.ports).map_err(|why| {
                        invalid(format!("{}.faults.inject[{i}].resource", step.path), why)
                    })?;
                    faults.inject.push(Injected {
                        name: name.clone(),
                        resource,
                    });
                }
                self.server(&step.path, server)?.set_faults(faults);
                Ok(())
            }
            Action::Restart {
                server,
                keep_state,
                down_for,
            } => self
                .server(&step.path, server)?
                .restart(*keep_state, *down_for)
                .await
                .map_err(apply),
        }
    }
}

pub(super) async fn start(scenario: &Scenario) -> Result<RunningScenario, ScenarioError> {
    let mut testbed = Testbed::start(scenario.servers.iter().cloned()).await?;
    for server in testbed.servers() {
        server.recording().set_limits(scenario.recording);
    }
    let mut ports = json::BackendPorts::new();
    for name in &scenario.backends {
        let backend = testbed.add_backend(name).await?;
        ports.insert(name.clone(), backend.addr().port());
    }
    let env = Env {
        testbed: Arc::new(testbed),
        ports,
        pool: scenario.pool.clone(),
    };
    for planned in &scenario.resources {
        env.set(planned)?;
    }
    for generator in &scenario.generators {
        let mut spec = generator.spec.clone();
        spec.backend_port = generator
            .backend
            .as_ref()
            .and_then(|b| env.ports.get(b).copied());
        let server = env.server(&generator.path, &generator.server)?;
        for (name, any) in generate::clusters(&spec) {
            server
                .set_resource(&name, any)
                .map_err(|source| ScenarioError::Apply {
                    path: generator.path.clone(),
                    source: Box::new(source),
                })?;
        }
    }
    let (initial, later): (Vec<Step>, Vec<Step>) = scenario
        .schedule
        .iter()
        .cloned()
        .partition(|step| step.at.is_zero());
    let mut failed = Vec::new();
    for step in &initial {
        env.run_step(step, &mut failed).await;
    }
    let testbed = env.testbed.clone();
    let clock = scenario.schedule_clock;
    let schedule = tokio::spawn(async move {
        if clock == ScheduleClock::FirstRequest && !later.is_empty() {
            first_request(&env.testbed).await;
        }
        let started = tokio::time::Instant::now();
        for step in later {
            tokio::time::sleep_until(started + step.at).await;
            env.run_step(&step, &mut failed).await;
        }
        failed
    });
    Ok(RunningScenario { testbed, schedule })
}

/// Resolves once any server has received an xDS request. A connection
/// refused by a fault carries none, so a client that falls back past a
/// refusing server starts the clock at the server that answers it.
async fn first_request(testbed: &Testbed) {
    let mut waits: JoinSet<()> = JoinSet::new();
    for server in testbed.servers() {
        let server = Arc::clone(server);
        waits.spawn(async move {
            // A policy-stream server records no xDS streams: its plane
            // says when a client first asked.
            tokio::select! {
                () = server.recording().wait_for_request() => {}
                () = server.policies().wait_for_request() => {}
            }
        });
    }
    // The first to finish is enough; the others end with the set.
    waits.join_next().await;
}
