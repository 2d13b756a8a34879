//! Gateway tasks on the paused clock: a task is kept `taskTtlMs` from its creation,
//! then forgotten and its work cancelled; hosts are told `taskPollIntervalMs`, and
//! mcpx polls an upstream's task no more often than that. Also the tasks hosts of
//! each kind see, core and extension.
//!
//! In-process versions of `crates/mcpx/tests/tasks.rs`'s `core_host_gets_gateway_tasks`,
//! `core_host_tool_level_negotiation`, `core_host_cancellation`,
//! `older_host_never_sees_tasks`, `extension_host_gets_handles`,
//! `modern_host_without_extension_gets_final_results` and `modern_upstream_tasks`.

use std::time::Duration;

use mcpx_protocol::Revision;
use serde_json::{Value, json};
use tokio::time::{Instant, sleep};

use crate::harness::{
    Host, InMemory, LegacyHost, TASKS_EXTENSION, Upstream, config, ext_caps, refuse_all, text,
};

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

/// A 2025-11-25 host in front of a 2025-11-25 upstream.
async fn core_host() -> LegacyHost {
    let links = InMemory::default().with("up", Upstream::strict(Revision::V2025_11_25));
    LegacyHost::start(
        config(json!({}), &[("up", json!({}))]),
        links,
        Revision::V2025_11_25,
        json!({}),
        refuse_all(),
    )
    .await
}

fn tool<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name} in {list}"))
}

/// Polls a core task until `done(status)`, a paused 50 ms apart; returns the last
/// `tasks/get` result.
async fn poll_core(h: &mut LegacyHost, id: &str, done: &[&str]) -> Value {
    for _ in 0..200 {
        let v = h.request("tasks/get", json!({"taskId": id})).await;
        let r = v.result().clone();
        if done.contains(&r["status"].as_str().unwrap_or_default()) {
            return r;
        }
        sleep(Duration::from_millis(50)).await;
    }
    panic!("task {id} never reached {done:?}");
}

/// Polls an extension task until `done(status)`; returns the last `tasks/get` result.
async fn poll_ext(h: &Host, id: &str, done: &[&str]) -> Value {
    for _ in 0..200 {
        let v = h
            .request_ext("tasks/get", json!({"taskId": id}), "GetTaskResult")
            .await;
        let r = v.result().clone();
        if done.contains(&r["status"].as_str().unwrap_or_default()) {
            return r;
        }
        sleep(Duration::from_millis(50)).await;
    }
    panic!("task {id} never reached {done:?}");
}

/// The frames mcpx sent upstream `up` whose text holds every one of `needles`.
fn containing(h: &InMemory, needles: &[&str]) -> Vec<Value> {
    h.sent_to("up")
        .into_iter()
        .filter(|v| {
            let l = v.to_string();
            needles.iter().all(|n| l.contains(n))
        })
        .collect()
}

/// H13, C-C12: a 2025-11-25 host sees taskSupport, gets gateway tasks for
/// task-augmented calls (CreateTaskResult, tasks/get, tasks/list, tasks/result), with
/// related-task on the tasks/result response only; an "optional" tool reaches the
/// upstream as a plain call, a "required" one as an upstream task mcpx drives.
#[tokio::test(start_paused = true)]
async fn core_host_gets_gateway_tasks() {
    let mut h = core_host().await;
    assert_eq!(
        h.initialized["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        "{}",
        h.initialized
    );
    let list = h.request("tools/list", json!({})).await;
    let list = list.result();
    assert_eq!(
        tool(list, "slow_compute")["execution"]["taskSupport"],
        "optional"
    );
    assert_eq!(
        tool(list, "failing_job")["execution"]["taskSupport"],
        "required"
    );

    let v = h
        .request(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 0.3, "label": "a"},
                   "task": {"ttl": 60000}}),
        )
        .await;
    let task = &v.result()["task"];
    let id = task["taskId"]
        .as_str()
        .expect("a CreateTaskResult")
        .to_owned();
    assert_eq!(task["status"], "working");
    assert_eq!(task["ttl"], 60000);
    let g = h.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(g.result()["taskId"], json!(id));
    assert!(
        g.result().get("_meta").is_none(),
        "C-C12: no related-task on tasks/get: {:?}",
        g.response
    );
    let l = h.request("tasks/list", json!({})).await;
    assert!(
        l.result()["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["taskId"] == json!(id))
    );
    // tasks/result blocks until the task ends, and names it.
    let r = h.request("tasks/result", json!({"taskId": id})).await;
    let r = r.result();
    assert_eq!(text(r), "computed a after 0.3 s");
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/related-task"],
        json!({"taskId": id})
    );
    let done = poll_core(&mut h, &id, &["completed"]).await;
    assert!(done.get("_meta").is_none());

    // "required": mcpx runs the upstream's task; isError ends it failed (2025-11-25).
    let v = h
        .request(
            "tools/call",
            json!({"name": "failing_job", "arguments": {}, "task": {}}),
        )
        .await;
    let id2 = v.result()["task"]["taskId"].as_str().unwrap().to_owned();
    let r = h.request("tasks/result", json!({"taskId": id2})).await;
    assert_eq!(r.result()["isError"], true);
    assert_eq!(
        poll_core(&mut h, &id2, &["failed", "completed"]).await["status"],
        "failed"
    );
    // Unknown ids are -32602.
    let u = h.request("tasks/get", json!({"taskId": "nope"})).await;
    assert_eq!(u.error()["code"], -32602);

    let plain = containing(&h.links, &["\"tools/call\"", "slow_compute"]);
    assert!(
        !plain.is_empty() && plain.iter().all(|l| !l.to_string().contains("\"task\"")),
        "{plain:?}"
    );
    assert!(
        !containing(&h.links, &["\"tools/call\"", "failing_job", "\"task\""]).is_empty(),
        "the required tool as an upstream task"
    );
    assert!(!containing(&h.links, &["\"tasks/result\""]).is_empty());
    // E-17: no client-side tasks capability toward the upstream.
    let init_up = containing(&h.links, &["\"initialize\""]);
    assert!(
        !init_up.is_empty() && init_up.iter().all(|l| !l.to_string().contains("\"tasks\"")),
        "{init_up:?}"
    );
    h.finish().await;
}

/// C-C10: 2025-11-25 §Tool-Level Negotiation, -32601 both ways.
#[tokio::test(start_paused = true)]
async fn core_host_tool_level_negotiation() {
    let mut h = core_host().await;
    for (params, what) in [
        (
            json!({"name": "failing_job", "arguments": {}}),
            "required tool without task",
        ),
        (
            json!({"name": "greet", "arguments": {"name": "x"}, "task": {}}),
            "forbidden tool with task",
        ),
        (
            json!({"name": "test_simple_text", "arguments": {}, "task": {}}),
            "tool without taskSupport, with task",
        ),
    ] {
        let v = h.request("tools/call", params).await;
        assert_eq!(v.error()["code"], -32601, "{what}: {:?}", v.response);
    }
    let v = h
        .request(
            "tools/call",
            json!({"name": "greet", "arguments": {"name": "x"}}),
        )
        .await;
    assert_eq!(text(v.result()), "Hello, x!");
    h.finish().await;
}

/// C-C11: tasks/cancel moves the task to cancelled before replying, cancels the upstream
/// work, and the task stays cancelled; cancelling a terminal task is -32602.
#[tokio::test(start_paused = true)]
async fn core_host_cancellation() {
    let mut h = core_host().await;
    let v = h
        .request(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 0.6}, "task": {}}),
        )
        .await;
    let id = v.result()["task"]["taskId"].as_str().unwrap().to_owned();
    let c = h.request("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(c.result()["status"], "cancelled");
    // Past the moment the work would have completed: still cancelled.
    sleep(Duration::from_millis(900)).await;
    let g = h.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(g.result()["status"], "cancelled");
    let again = h.request("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(again.error()["code"], -32602, "cancel a cancelled task");
    // A completed task cannot be cancelled either.
    let v = h
        .request(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 0}, "task": {}}),
        )
        .await;
    let id2 = v.result()["task"]["taskId"].as_str().unwrap().to_owned();
    poll_core(&mut h, &id2, &["completed"]).await;
    let c2 = h.request("tasks/cancel", json!({"taskId": id2})).await;
    assert_eq!(c2.error()["code"], -32602, "cancel a completed task");
    assert!(
        !containing(&h.links, &["notifications/cancelled"]).is_empty(),
        "the upstream work was cancelled"
    );
    h.finish().await;
}

/// H13, C-C13 against a 2026-07-28 upstream: its handles are wrapped in gateway tasks for
/// a declaring host, polled to completion for the others (mcpx declares the extension
/// upstream), and cancellation reaches the upstream as tasks/cancel.
#[tokio::test(start_paused = true)]
async fn modern_upstream_tasks() {
    let h = tasked(json!({}));
    let v = h
        .request_ext(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 0.2, "label": "e"}}),
            "CreateTaskResult",
        )
        .await;
    let id = v.result()["taskId"].as_str().unwrap().to_owned();
    let done = poll_ext(&h, &id, &["completed"]).await;
    assert_eq!(text(&done["result"]), "computed e after 0.2 s");
    let v = h
        .request_ext(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 30}}),
            "CreateTaskResult",
        )
        .await;
    let id = v.result()["taskId"].as_str().unwrap().to_owned();
    h.request_ext("tasks/cancel", json!({"taskId": id}), "CancelTaskResult")
        .await;
    assert_eq!(
        poll_ext(&h, &id, &["cancelled", "completed", "failed"]).await["status"],
        "cancelled"
    );
    // Without the extension: the required tool still runs, driven by mcpx.
    let v = h
        .request(
            "tools/call",
            json!({"name": "failing_job", "arguments": {}}),
        )
        .await;
    let r = v.result();
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["isError"], true);
    assert!(!containing(&h.links, &["\"tasks/get\""]).is_empty());
    assert!(
        !containing(&h.links, &["\"tasks/cancel\""]).is_empty(),
        "cancellation reached the upstream"
    );
    h.finish().await;
}

/// H13 toward a 2025-06-18 host: no tasks capability, no taskSupport, task params
/// stripped, tasks/* absent; a "required" upstream tool is driven to its final result.
#[tokio::test(start_paused = true)]
async fn older_host_never_sees_tasks() {
    let links = InMemory::default().with("up", Upstream::strict(Revision::V2025_11_25));
    let mut h = LegacyHost::start(
        config(json!({}), &[("up", json!({}))]),
        links,
        Revision::V2025_06_18,
        json!({}),
        refuse_all(),
    )
    .await;
    assert!(
        h.initialized["capabilities"].get("tasks").is_none(),
        "{}",
        h.initialized
    );
    let list = h.request("tools/list", json!({})).await;
    assert!(
        list.result()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("execution").is_none()),
        "{:?}",
        list.response
    );
    let v = h
        .request(
            "tools/call",
            json!({"name": "failing_job", "arguments": {}}),
        )
        .await;
    let r = v.result();
    assert_eq!(r["isError"], true);
    assert!(
        r.get("_meta").is_none(),
        "the upstream's related-task is not passed on: {r}"
    );
    let v = h
        .request(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "b"},
                   "task": {"ttl": 5}}),
        )
        .await;
    assert_eq!(text(v.result()), "computed b after 0 s");
    let v = h.request("tasks/get", json!({"taskId": "x"})).await;
    assert_eq!(v.error()["code"], -32601, "tasks/get on 2025-06-18");
    let calls = containing(&h.links, &["\"tools/call\"", "slow_compute"]);
    assert!(
        !calls.is_empty() && calls.iter().all(|l| !l.to_string().contains("\"task\"")),
        "{calls:?}"
    );
    h.finish().await;
}

/// A 2026-07-28 host in front of a 2025-11-25 upstream.
fn modern_before_core() -> Host {
    let links = InMemory::default().with("up", Upstream::strict(Revision::V2025_11_25));
    Host::start(config(json!({}), &[("up", json!({}))]), links)
}

/// H13, C-C11, C-C13 toward a 2026-07-28 host that declared the extension, in front of
/// a 2025-11-25 upstream: flat handles, tasks/get inlining result or error, a tool error
/// completed (not failed), cooperative cancellation, core-only methods absent.
#[tokio::test(start_paused = true)]
async fn extension_host_gets_handles() {
    let h = modern_before_core();
    let d = h.request_as("server/discover", json!({}), ext_caps()).await;
    assert_eq!(
        d.result()["capabilities"]["extensions"][TASKS_EXTENSION],
        json!({}),
        "{:?}",
        d.response
    );
    assert!(d.result()["capabilities"].get("tasks").is_none());
    let list = h.request_as("tools/list", json!({}), ext_caps()).await;
    assert!(
        list.result()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("execution").is_none())
    );

    let call = |params: Value| h.request_ext("tools/call", params, "CreateTaskResult");
    let v =
        call(json!({"name": "slow_compute", "arguments": {"seconds": 0.2, "label": "c"}})).await;
    assert_eq!(v.result()["resultType"], "task");
    let id = v.result()["taskId"].as_str().unwrap().to_owned();
    let done = poll_ext(&h, &id, &["completed"]).await;
    assert_eq!(text(&done["result"]), "computed c after 0.2 s");

    let v = call(json!({"name": "failing_job", "arguments": {}})).await;
    let id = v.result()["taskId"].as_str().unwrap().to_owned();
    let done = poll_ext(&h, &id, &["completed", "failed"]).await;
    assert_eq!(
        done["status"], "completed",
        "ext-tasks: a tool error is completed"
    );
    assert_eq!(done["result"]["isError"], true);

    let v = call(json!({"name": "protocol_error_job", "arguments": {}})).await;
    let id = v.result()["taskId"].as_str().unwrap().to_owned();
    let done = poll_ext(&h, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "failed");
    assert_eq!(done["error"]["code"], -32603);

    // Cooperative cancellation: an empty ack, then the work's own end.
    let v = call(json!({"name": "slow_compute", "arguments": {"seconds": 30}})).await;
    let id = v.result()["taskId"].as_str().unwrap().to_owned();
    let ack = h
        .request_ext("tasks/cancel", json!({"taskId": id}), "CancelTaskResult")
        .await;
    assert_eq!(ack.result()["resultType"], "complete");
    assert!(ack.result().get("status").is_none(), "{:?}", ack.response);
    assert_eq!(
        poll_ext(&h, &id, &["cancelled", "completed", "failed"]).await["status"],
        "cancelled"
    );
    // A terminal task's cancel is acknowledged too (no -32602 in the extension).
    let again = h
        .request_ext("tasks/cancel", json!({"taskId": id}), "CancelTaskResult")
        .await;
    again.result();
    let u = h
        .request_ext(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {}}),
            "UpdateTaskResult",
        )
        .await;
    u.result();
    let nf = h
        .request_as("tasks/get", json!({"taskId": "nope"}), ext_caps())
        .await;
    assert_eq!(nf.error()["code"], -32602, "unknown task");
    for m in ["tasks/result", "tasks/list"] {
        let v = h.request_as(m, json!({"taskId": id}), ext_caps()).await;
        assert_eq!(
            v.error()["code"],
            -32601,
            "{m} does not exist in the extension"
        );
    }
    h.finish().await;
}

/// C-C13: a 2026-07-28 request without the extension never gets a handle: final results
/// (mcpx drives the upstream's required task), and tasks/* are -32021.
#[tokio::test(start_paused = true)]
async fn modern_host_without_extension_gets_final_results() {
    let h = modern_before_core();
    let d = h.request("server/discover", json!({})).await;
    assert_eq!(
        d.result()["capabilities"]["extensions"][TASKS_EXTENSION],
        json!({})
    );
    let v = h
        .request(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 0.1, "label": "d"}}),
        )
        .await;
    let r = v.result();
    assert_eq!(r["resultType"], "complete");
    assert_eq!(text(r), "computed d after 0.1 s");
    let v = h
        .request(
            "tools/call",
            json!({"name": "failing_job", "arguments": {}}),
        )
        .await;
    let r = v.result();
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["isError"], true);
    let v = h.request("tasks/get", json!({"taskId": "x"})).await;
    assert_eq!(v.error()["code"], -32021, "tasks/get without the extension");
    assert_eq!(
        v.error()["data"]["requiredCapabilities"]["extensions"][TASKS_EXTENSION],
        json!({})
    );
    h.finish().await;
}
