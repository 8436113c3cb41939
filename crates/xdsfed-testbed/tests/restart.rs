//! Restarts and stops: a stop ends a restart's down period at once.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{sync::Arc, time::Duration};

use xdsfed_testbed::{ServerError, ServerSpec, Testbed};

/// Far longer than any test runs: only a stop can end it in time.
const DOWN_FOR: Duration = Duration::from_secs(600);

/// How long a failure may take to show; never a timing assertion.
const PATIENCE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn stop_ends_a_restarts_down_period_and_the_server_stays_stopped() {
    let tb = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .unwrap();
    let server = Arc::clone(&tb.servers()[0]);
    let addr = server.addr();
    let restarting = {
        let server = Arc::clone(&server);
        tokio::spawn(async move { server.restart(true, DOWN_FOR).await })
    };
    // The restart closes the port for the down period.
    tokio::time::timeout(PATIENCE, async {
        while tokio::net::TcpStream::connect(addr).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the server goes down");

    tokio::time::timeout(PATIENCE, server.stop())
        .await
        .expect("stop does not wait for the down period");
    let restarted = tokio::time::timeout(PATIENCE, restarting)
        .await
        .expect("the restart ends with the stop")
        .unwrap();
    assert!(
        matches!(restarted, Err(ServerError::Stopped { ref server }) if server == "cloud"),
        "{restarted:?}"
    );
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "a stopped server does not listen again"
    );

    // A later restart brings it back.
    server.restart(true, Duration::ZERO).await.unwrap();
    tokio::net::TcpStream::connect(addr)
        .await
        .expect("the restarted server listens");
}
