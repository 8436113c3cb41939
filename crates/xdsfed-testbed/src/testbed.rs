//! A set of management servers and backends started together.

use std::sync::Arc;

use crate::{
    backend::Backend,
    server::{Server, ServerError, ServerSpec},
};

/// Why a testbed could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestbedError {
    /// Two servers share a name.
    #[error("two servers are named {0:?}")]
    DuplicateServer(String),
    /// Two backends share a name.
    #[error("two backends are named {0:?}")]
    DuplicateBackend(String),
    /// A server failed to start.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// A backend failed to start.
    #[error("backend {name:?}: cannot listen: {source}")]
    Backend {
        /// The backend's name.
        name: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Management servers and backends on loopback. Dropping it stops them all.
#[derive(Debug, Default)]
pub struct Testbed {
    servers: Vec<Arc<Server>>,
    backends: Vec<Backend>,
}

impl Testbed {
    /// Starts one server per spec.
    pub async fn start(specs: impl IntoIterator<Item = ServerSpec>) -> Result<Self, TestbedError> {
        let mut testbed = Self::default();
        for spec in specs {
            testbed.add_server(spec).await?;
        }
        Ok(testbed)
    }

    /// Starts one more server.
    pub async fn add_server(&mut self, spec: ServerSpec) -> Result<Arc<Server>, TestbedError> {
        if self.server(&spec.name).is_some() {
            return Err(TestbedError::DuplicateServer(spec.name));
        }
        let server = Arc::new(Server::start(spec).await?);
        self.servers.push(server.clone());
        Ok(server)
    }

    /// Starts a health backend named `name` on an ephemeral port.
    pub async fn add_backend(&mut self, name: &str) -> Result<&Backend, TestbedError> {
        if self.backend(name).is_some() {
            return Err(TestbedError::DuplicateBackend(name.to_owned()));
        }
        let backend = Backend::start(name)
            .await
            .map_err(|source| TestbedError::Backend {
                name: name.to_owned(),
                source,
            })?;
        let index = self.backends.len();
        self.backends.push(backend);
        Ok(&self.backends[index])
    }

    /// The servers in the order they started.
    pub fn servers(&self) -> &[Arc<Server>] {
        &self.servers
    }

    /// The server named `name`.
    pub fn server(&self, name: &str) -> Option<&Arc<Server>> {
        self.servers.iter().find(|s| s.name() == name)
    }

    /// The first server that serves `authority`.
    pub fn server_for_authority(&self, authority: &str) -> Option<&Arc<Server>> {
        self.servers
            .iter()
            .find(|s| s.authorities().iter().any(|a| a == authority))
    }

    /// The backends in the order they started.
    pub fn backends(&self) -> &[Backend] {
        &self.backends
    }

    /// The backend named `name`.
    pub fn backend(&self, name: &str) -> Option<&Backend> {
        self.backends.iter().find(|b| b.name() == name)
    }

    /// Stops every server and backend.
    pub async fn shutdown(&self) {
        for server in &self.servers {
            server.stop().await;
        }
        for backend in &self.backends {
            backend.stop();
        }
    }
}
