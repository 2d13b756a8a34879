//! Gateway tasks on the paused clock: a task is kept `taskTtlMs` from its creation,
//! then forgotten and its work cancelled; hosts are told `taskPollIntervalMs`, and
//! mcpx polls an upstream's task no more often than that.

use std::time::Duration;

use mcpx_protocol::Revision;
use serde_json::json;
use tokio::time::{Instant, sleep};

use crate::harness::{Host, InMemory, Upstream, config, text};

/// A 2026-07-28 host declaring the tasks extension, in front of a 2026-07-28 upstream.
fn tasked(global: serde_json::Value) -> Host {
    let links = InMemory::default().with("up", Upstream::strict(Revision::V2026_07_28));
    Host::start(config(global, &[("up", json!({}))]), links)
}

/// A task outlives its call but not `taskTtlMs` (5 s): at 4 s `tasks/get` still sees
/// it working; past 5 s it is unknown (-32602), and its upstream work is cancelled.
#[tokio::test(start_paused = true)]
async fn a_task_is_forgotten_after_its_ttl_and_its_work_cancelled() {
    let host = tasked(json!({"limits": {"taskTtlMs": 5000}}));
    let created = Instant::now();
    let v = host
        .request_ext(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 600}}),
            "CreateTaskResult",
        )
        .await;
    let id = v.result()["taskId"].as_str().unwrap().to_owned();
    assert_eq!(v.result()["ttlMs"], 5000, "{:?}", v.response);

    sleep(Duration::from_secs(4)).await;
    let v = host
        .request_ext("tasks/get", json!({"taskId": id}), "GetTaskResult")
        .await;
    assert_eq!(v.result()["status"], "working", "{:?}", v.response);
    assert!(
        host.links.requests_to("up", "tasks/cancel").is_empty(),
        "cancelled before its ttl"
    );

    tokio::time::sleep_until(created + Duration::from_millis(5100)).await;
    let v = host
        .request_ext("tasks/get", json!({"taskId": id}), "GetTaskResult")
        .await;
    assert_eq!(v.error()["code"], -32602, "{:?}", v.response);
    sleep(Duration::from_millis(100)).await;
    assert!(
        !host.links.requests_to("up", "tasks/cancel").is_empty(),
        "the expired task's upstream work was not cancelled: {:?}",
        host.links.sent_to("up")
    );
    host.finish().await;
}

/// `taskPollIntervalMs` (1 s) is what a host is told, and the shortest at which mcpx
/// polls the upstream's task (the upstream suggests 100 ms): a 5 s task is polled
/// about five times, a poll interval apart, and completes.
#[tokio::test(start_paused = true)]
async fn the_poll_interval_is_told_to_hosts_and_bounds_upstream_polls() {
    let host = tasked(json!({"limits": {"taskPollIntervalMs": 1000}}));
    let v = host
        .request_ext(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 5, "label": "p"}}),
            "CreateTaskResult",
        )
        .await;
    assert_eq!(v.result()["pollIntervalMs"], 1000, "{:?}", v.response);
    let id = v.result()["taskId"].as_str().unwrap().to_owned();

    sleep(Duration::from_secs(8)).await;
    let v = host
        .request_ext("tasks/get", json!({"taskId": id}), "GetTaskResult")
        .await;
    assert_eq!(v.result()["status"], "completed", "{:?}", v.response);
    assert_eq!(text(&v.result()["result"]), "computed p after 5 s");

    let polls: Vec<Instant> = host
        .links
        .requests_to("up", "tasks/get")
        .into_iter()
        .map(|(at, _)| at)
        .collect();
    assert!(
        (4..=6).contains(&polls.len()),
        "{} polls of a 5 s task at 1 s",
        polls.len()
    );
    for w in polls.windows(2) {
        assert!(
            w[1] - w[0] >= Duration::from_millis(1000),
            "polled {:?} apart",
            w[1] - w[0]
        );
    }
    host.finish().await;
}

/// A host without the extension gets the final result of a `required` tool, which
/// mcpx drives as an upstream task, polling at the interval.
#[tokio::test(start_paused = true)]
async fn a_host_without_the_extension_gets_the_driven_tasks_result() {
    let host = tasked(json!({"limits": {"taskPollIntervalMs": 200}}));
    let started = Instant::now();
    let v = host
        .request(
            "tools/call",
            json!({"name": "failing_job", "arguments": {}}),
        )
        .await;
    let r = v.result();
    assert_eq!(r["resultType"], "complete", "{r}");
    assert_eq!(r["isError"], true, "{r}");
    // The job fails after 300 ms; mcpx sees it at its second poll (400 ms).
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(700),
        "answered after {took:?}"
    );
    assert!(!host.links.requests_to("up", "tasks/get").is_empty());
    host.finish().await;
}
