//! A gateway that runs for days sees legacy sessions come and go: what it keeps for a
//! session ends with the session. Found by the soak (`scripts/bench.sh soak`): mcpx
//! kept every legacy session it had ever seen (to tell it about list changes), about
//! 3 KiB each, and scanned them all on every request.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use mcpx_protocol::Revision;
use serde_json::json;

use crate::runtime;
use runtime::*;

/// Opens `n` sessions, 8 at a time; each makes one request and is deleted.
async fn churn(url: &str, n: usize) {
    let mut tasks = Vec::new();
    for w in 0..8 {
        let url = url.to_owned();
        tasks.push(tokio::spawn(async move {
            for _ in (w..n).step_by(8) {
                let s = Session::open(&url, Revision::V2025_11_25, Duration::from_secs(20)).await;
                let r = s.request("tools/list", json!({})).await;
                assert!(r["result"]["tools"].is_array(), "{r}");
                assert_eq!(s.delete().await, 204);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_sessions_leave_nothing_behind() {
    let config = json!({"mcpServers": {"ex": example_entry("ex", &[])}});
    let gw = HttpGateway::start("sessions-churn", &config, &[]).await;
    let url = gw.url();
    // Warm-up: the allocator's pools and every lazy structure are in place.
    churn(&url, 500).await;
    let before = rss_kib(gw.pid);
    churn(&url, 3000).await;
    let after = rss_kib(gw.pid);
    // 3,000 sessions at the 3 KiB each that used to stay would be about 9 MiB.
    assert!(
        after < before + 3 * 1024,
        "RSS grew from {before} KiB to {after} KiB over 3,000 ended sessions"
    );
}
