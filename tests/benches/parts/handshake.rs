//! `BASHD_BENCH=handshake` (issue 31): what a new connection's first request costs
//! when `Hello` goes alone and `Welcome` is awaited before the request goes out (every
//! client until issue 31, and `Client::handshake` still, for the relay), against
//! `Hello` and the request in one write (`Client::connect`): the round trip through
//! the daemon that the first request no longer waits for. A new connection and one
//! `status` each time, the two ways in turns in one process (no process start in
//! either figure), on a current-thread runtime as the CLI's. Beside them, a `status` on
//! a warm connection: what is left of a new connection's cost over it is the
//! daemon's accept and checks of the peer, which no client can save.

use std::time::{Duration, Instant};

use bashd_tests::Daemon;

use super::{ROUND_TRIPS, median_of, report};

pub fn handshake() {
    let daemon = Daemon::start();
    let socket = daemon.socket_path();
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (pipelined, waited, warm) = tokio.block_on(async {
        let call = |wait_for_welcome: bool| {
            let socket = socket.clone();
            async move {
                let start = Instant::now();
                let client = bashc::Client::connect(&socket).await.unwrap();
                if wait_for_welcome {
                    client.welcome().await.unwrap();
                }
                client.status().await.unwrap();
                start.elapsed()
            }
        };
        let (mut pipelined, mut waited): (Vec<Duration>, Vec<Duration>) = Default::default();
        // The first pair warms the daemon up, and is not counted.
        for i in 0..=ROUND_TRIPS {
            // Which goes first alternates, so neither always follows the other's close.
            let (p, w) = if i % 2 == 0 {
                (call(false).await, call(true).await)
            } else {
                let w = call(true).await;
                (call(false).await, w)
            };
            if i > 0 {
                pipelined.push(p);
                waited.push(w);
            }
        }
        let client = bashc::Client::connect(&socket).await.unwrap();
        let mut warm = Vec::new();
        for i in 0..=ROUND_TRIPS {
            let start = Instant::now();
            client.status().await.unwrap();
            if i > 0 {
                warm.push(start.elapsed());
            }
        }
        (median_of(pipelined), median_of(waited), median_of(warm))
    });
    report(
        "new connection and status: Hello with the request vs Welcome awaited first (median)",
        pipelined,
        waited,
        1.0,
    );
    report(
        "new connection and status (Hello with the request) vs status on a warm connection (median)",
        pipelined,
        warm,
        2.0,
    );
}
