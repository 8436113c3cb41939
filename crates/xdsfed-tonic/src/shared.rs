//! One xDS client per bootstrap, shared by every channel of the process
//! that was built from it, as gRPC shares one xDS client per bootstrap
//! configuration: ten channels to ten services open one ADS stream per
//! server, not ten.
//!
//! The registry holds its clients weakly: a client lives as long as a
//! channel (or anything else) uses it, and the next channel after the last
//! one went starts a new one. Channels built on different tokio runtimes
//! should not share a bootstrap: a client's streams run on the runtime it
//! was built on.

use std::sync::{Mutex, PoisonError};

use xdsfed_client::{BuildError, WeakXdsClient, XdsClient};
use xdsfed_core::bootstrap::Bootstrap;

/// The live clients, by the bootstrap they were built from. A process has
/// few bootstraps, so a list compared by equality is enough.
static SHARED: Mutex<Vec<(Bootstrap, WeakXdsClient)>> = Mutex::new(Vec::new());

/// The client of this process for `bootstrap`: the one a live channel
/// already uses, or a new one, registered for the next channel.
pub(crate) fn client_for(bootstrap: Bootstrap) -> Result<XdsClient, BuildError> {
    // A panic elsewhere cannot leave the list torn: each change is one
    // push or retain.
    let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    shared.retain(|(_, client)| client.upgrade().is_some());
    if let Some(client) = shared
        .iter()
        .find(|(held, _)| *held == bootstrap)
        .and_then(|(_, client)| client.upgrade())
    {
        return Ok(client);
    }
    let client = XdsClient::builder(bootstrap.clone()).build()?;
    shared.push((bootstrap, client.downgrade()));
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bootstrap(port: u16) -> Bootstrap {
        Bootstrap::from_json_str(&format!(
            r#"{{"xds_servers": [{{"server_uri": "127.0.0.1:{port}", "channel_creds": [{{"type": "insecure"}}]}}],
                "node": {{"id": "shared-test"}}}}"#
        ))
        .unwrap()
    }

    /// Two channels of one bootstrap share a client (one ADS stream per
    /// server); another bootstrap gets its own; a client no channel uses
    /// any more is not kept.
    #[tokio::test]
    async fn one_client_per_bootstrap_while_it_is_used() {
        let first = client_for(bootstrap(1)).unwrap();
        let again = client_for(bootstrap(1)).unwrap();
        assert!(first.ptr_eq(&again));
        let other = client_for(bootstrap(2)).unwrap();
        assert!(!first.ptr_eq(&other));
        let weak = first.downgrade();
        drop((first, again));
        assert!(weak.upgrade().is_none());
        let fresh = client_for(bootstrap(1)).unwrap();
        assert!(fresh.downgrade().upgrade().is_some());
    }
}
