//! Tasks through `mcpx serve` (a real process, stdio): 2025-11-25 hosts get gateway
//! tasks (core), 2026-07-28 hosts get extension handles when the request declared the
//! extension and final results otherwise, older hosts never see tasks; against the
//! example server in 2025-11-25 and 2026-07-28 modes. Every frame mcpx sends the host is
//! validated against the host's schema (and extension results against the ext-tasks
//! schema); each test names the register ids it proves.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

use std::time::Duration;

use mcpx_testkit::tap::tap;
use serde_json::{Value, json};

use crate::common;
use common::*;

const EXT: &str = "io.modelcontextprotocol/tasks";

/// A 2026-07-28 request's `_meta`, declaring the tasks extension or not.
fn meta_with(ext: bool) -> Value {
    let mut m = modern_meta(json!({}));
    if ext {
        m["io.modelcontextprotocol/clientCapabilities"] = json!({"extensions": {EXT: {}}});
    }
    m
}

impl Host {
    /// A 2026-07-28 request with (or without) the extension, its result checked
    /// against the ext-tasks definition `def` when one is given.
    async fn modern(&mut self, method: &str, params: Value, ext: bool, def: Option<&str>) -> Value {
        self.modern_as(method, params, meta_with(ext), def).await
    }

    /// [`Self::modern`] with the request's whole `_meta`.
    async fn modern_as(
        &mut self,
        method: &str,
        mut params: Value,
        meta: Value,
        def: Option<&str>,
    ) -> Value {
        params["_meta"] = meta;
        let id = self.next_id;
        self.next_id += 1;
        let frame = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        self.send(&frame).await;
        loop {
            let line = self.next_line(method).await;
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id") == Some(&json!(id)) && v.get("method").is_none() {
                match def {
                    Some(d) => tap()
                        .validate_tasks_extension_response(d, &line)
                        .unwrap_or_else(|e| panic!("to the host: {e}")),
                    None if v.get("result").is_some() => tap()
                        .validate_response(R2026, method, &line)
                        .unwrap_or_else(|e| panic!("to the host: {e}")),
                    None => tap()
                        .validate_frame(R2026, &line)
                        .unwrap_or_else(|e| panic!("to the host: {e}")),
                }
                return v;
            }
            tap()
                .validate_frame(R2026, &line)
                .unwrap_or_else(|e| panic!("to the host: {e}"));
        }
    }

    /// A 2025-11-25 host calls `tool` as a task, whose work asks `elicitation/create`:
    /// the CreateTaskResult and the ask, in whichever order they come, each validated
    /// against the host's schema.
    async fn task_and_its_ask(&mut self, tool: &str) -> (Value, Value) {
        let call_id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc":"2.0","id":call_id,"method":"tools/call",
            "params":{"name":tool,"arguments":{},"task":{"ttl":60000}}}))
            .await;
        let (mut created, mut ask) = (None, None);
        while created.is_none() || ask.is_none() {
            let v = self.next_frame(tool).await;
            if v.get("id") == Some(&json!(call_id)) && v.get("method").is_none() {
                tap()
                    .validate_response(R1125, "tools/call", &v.to_string())
                    .unwrap_or_else(|e| panic!("to the host: {e}"));
                created = Some(v);
            } else {
                assert_eq!(v["method"], "elicitation/create", "{v}");
                ask = Some(v);
            }
        }
        (created.unwrap(), ask.unwrap())
    }

    /// Polls a task until `done(status)`; returns the last tasks/get result.
    async fn poll_core(&mut self, id: &str, done: &[&str]) -> Value {
        let every = Duration::from_millis(50);
        let r = crate::wait::poll_every(Duration::from_secs(10), every, async || {
            let (v, _) = self.request("tasks/get", json!({"taskId": id})).await;
            let r = result(&v, "tasks/get").clone();
            done.contains(&r["status"].as_str().unwrap_or_default())
                .then_some(r)
        })
        .await;
        r.unwrap_or_else(|| panic!("task {id} never reached {done:?}"))
    }

    async fn poll_ext(&mut self, id: &str, done: &[&str]) -> Value {
        let every = Duration::from_millis(50);
        let r = crate::wait::poll_every(Duration::from_secs(10), every, async || {
            let v = self
                .modern(
                    "tasks/get",
                    json!({"taskId": id}),
                    true,
                    Some("GetTaskResult"),
                )
                .await;
            let r = result(&v, "tasks/get").clone();
            done.contains(&r["status"].as_str().unwrap_or_default())
                .then_some(r)
        })
        .await;
        r.unwrap_or_else(|| panic!("task {id} never reached {done:?}"))
    }
}

fn tool<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name} in {list}"))
}

/// Frames mcpx sent the upstream whose text contains every one of `needles`.
fn containing<'a>(wire: &'a [Value], needles: &[&str]) -> Vec<&'a Value> {
    wire.iter()
        .filter(|v| {
            let l = v.to_string();
            needles.iter().all(|n| l.contains(n))
        })
        .collect()
}

/// H13, C-C13 (ext-tasks §Input Requests, §Task Update Requests; SEP-2663 451f5e1): a
/// 2026-07-28 upstream's task that needs input shows its outstanding requests on the
/// declaring host's gateway task; the host's `tasks/update` answers go to the upstream
/// task (responses to keys not outstanding are ignored, a partial answer leaves the rest
/// open); a tool that asks on the request before it makes a task reaches the host as an
/// `input_required` round first, then as a task.
#[tokio::test]
async fn extension_host_answers_an_upstream_tasks_questions() {
    let mut h = Host::start("taskinput", &example(R2026), R2026).await;
    let mut meta = meta_with(true);
    meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"] = json!({});
    let v = h
        .modern_as(
            "tools/call",
            json!({"name": "confirm_delete", "arguments": {"filename": "a.txt"}}),
            meta.clone(),
            Some("CreateTaskResult"),
        )
        .await;
    let id = result(&v, "confirm_delete")["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut host_ids = vec![id.clone()];
    let waiting = h.poll_ext(&id, &["input_required"]).await;
    let ask = &waiting["inputRequests"]["confirm"];
    assert_eq!(ask["method"], "elicitation/create", "{waiting}");
    assert_eq!(ask["params"]["message"], "Delete a.txt?", "{waiting}");

    let update = |responses: Value| json!({"taskId": id, "inputResponses": responses});
    // A key that is not outstanding is ignored; the task still waits.
    let ack = h
        .modern(
            "tasks/update",
            update(json!({"unknown-key": {"ignored": true}})),
            true,
            Some("UpdateTaskResult"),
        )
        .await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    for envelope in ["taskId", "status", "inputRequests"] {
        assert!(ack["result"].get(envelope).is_none(), "{ack}");
    }
    let bad = h
        .modern(
            "tasks/update",
            json!({"taskId": id, "inputResponses": [1]}),
            true,
            None,
        )
        .await;
    assert_eq!(error_code(&bad, "inputResponses not an object"), -32602);
    let again = h.poll_ext(&id, &["input_required"]).await;
    assert_eq!(again["inputRequests"], waiting["inputRequests"]);

    let ack = h
        .modern(
            "tasks/update",
            update(json!({"confirm": {"action": "accept", "content": {"confirm": true}}})),
            true,
            Some("UpdateTaskResult"),
        )
        .await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let done = h.poll_ext(&id, &["completed", "failed"]).await;
    assert_eq!(text(&done["result"]), "Deleted a.txt", "{done}");
    assert!(done.get("inputRequests").is_none(), "{done}");

    // Two questions at once, answered one at a time.
    let v = h
        .modern_as(
            "tools/call",
            json!({"name": "multi_input", "arguments": {}}),
            meta.clone(),
            Some("CreateTaskResult"),
        )
        .await;
    let id = result(&v, "multi_input")["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    host_ids.push(id.clone());
    let mut waiting = h.poll_ext(&id, &["input_required"]).await;
    for _ in 0..100 {
        if waiting["inputRequests"].as_object().map(|o| o.len()) == Some(2) {
            break;
        }
        waiting = h.poll_ext(&id, &["input_required"]).await;
    }
    let mut keys: Vec<&String> = waiting["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    keys.sort();
    assert_eq!(keys, ["confirm", "name"], "{waiting}");
    h.modern(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"name": {"action": "accept", "content": {"name": "Ann"}}}}),
        true,
        Some("UpdateTaskResult"),
    )
    .await;
    let half = h.poll_ext(&id, &["input_required"]).await;
    let left: Vec<&String> = half["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(left, ["confirm"], "the answered key is gone: {half}");
    h.modern(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": false}}}}),
        true,
        Some("UpdateTaskResult"),
    )
    .await;
    let done = h.poll_ext(&id, &["completed", "failed"]).await;
    assert_eq!(text(&done["result"]), r#"name = "Ann", confirm = false"#);

    // Input on the request first (no task yet), then the task.
    let round1 = h
        .modern_as(
            "tools/call",
            json!({"name": "test_tool_with_task", "arguments": {}}),
            meta.clone(),
            None,
        )
        .await;
    let r1 = result(&round1, "round 1");
    assert_eq!(r1["resultType"], "input_required", "{round1}");
    assert!(r1.get("taskId").is_none(), "{round1}");
    assert_eq!(
        r1["inputRequests"]["user_name"]["method"],
        "elicitation/create"
    );
    let mut retry = json!({"name": "test_tool_with_task", "arguments": {},
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}}});
    if let Some(state) = r1.get("requestState") {
        retry["requestState"] = state.clone();
    }
    let round2 = h
        .modern_as("tools/call", retry, meta, Some("CreateTaskResult"))
        .await;
    let r2 = result(&round2, "round 2");
    assert_eq!(r2["resultType"], "task", "{round2}");
    assert!(r2.get("requestState").is_none(), "{round2}");
    let id = r2["taskId"].as_str().unwrap().to_owned();
    host_ids.push(id.clone());
    let done = h.poll_ext(&id, &["completed", "failed"]).await;
    assert_eq!(text(&done["result"]), "Hello, Alice! (from a task)");

    let wire = h.finish().await;
    let updates = containing(&wire, &["\"tasks/update\"", "inputResponses"]);
    assert_eq!(
        updates.len(),
        3,
        "one upstream tasks/update per answer that counted"
    );
    for u in updates {
        let up_id = u["params"]["taskId"].as_str().unwrap();
        assert!(
            !host_ids.iter().any(|h| h == up_id),
            "the upstream is told its own task's id, not mcpx's: {u}"
        );
    }
}

/// H13: a host that cannot see a 2026-07-28 upstream task's `inputRequests` (it did not
/// declare the extension) is asked them itself when it is a legacy host, as requests of
/// its revision, and the answers go to the upstream task with `tasks/update`; a 2026-07-28 host cannot be asked in the middle
/// of a call, so its call fails clearly and the upstream task is cancelled.
#[tokio::test]
async fn other_hosts_and_an_upstream_tasks_questions() {
    let approve = |q: &Value| {
        vec![json!({"jsonrpc":"2.0","id":q["id"],"result":{
            "action":"accept","content":{"approve":true}}})]
    };
    // A 2025-06-18 host: the driven call's question on the call.
    let mut h = Host::start("taskask0618", &example(R2026), R0618).await;
    h.initialize(json!({"elicitation": {}})).await;
    let (v, asks, _) = h
        .exchange(
            "tools/call",
            json!({"name": "approval_task", "arguments": {}}),
            &mut |q| approve(q),
        )
        .await;
    assert_eq!(
        text(result(&v, "approval_task")),
        r#"approval_task: accept {"approve":true}"#,
        "{v}"
    );
    assert_eq!(asks.len(), 1, "{asks:?}");
    assert_eq!(asks[0]["method"], "elicitation/create");
    assert_eq!(asks[0]["params"]["message"], "Approve the job?");
    let wire = h.finish().await;
    let updates = containing(&wire, &["\"tasks/update\"", "\"approve\":true"]);
    assert_eq!(updates.len(), 1, "{wire:?}");

    // A 2025-11-25 host: the tool shows no task support (a 2026-07-28 upstream's tools
    // say none), so it is called plainly and driven the same way.
    let mut h = Host::start("taskask1125", &example(R2026), R1125).await;
    h.initialize(json!({"elicitation": {}})).await;
    let (list, _) = h.request("tools/list", json!({})).await;
    assert!(
        tool(result(&list, "tools/list"), "approval_task")
            .get("execution")
            .is_none(),
        "{list}"
    );
    let (v, asks, _) = h
        .exchange(
            "tools/call",
            json!({"name": "approval_task", "arguments": {}}),
            &mut |q| vec![json!({"jsonrpc":"2.0","id":q["id"],"result":{"action":"decline"}})],
        )
        .await;
    assert_eq!(
        text(result(&v, "approval_task")),
        "approval_task: decline null",
        "{v}"
    );
    assert_eq!(asks.len(), 1, "{asks:?}");
    assert!(
        asks[0]["params"]["_meta"].get(RELATED).is_none(),
        "{}",
        asks[0]
    );
    h.finish().await;

    // A 2026-07-28 host without the extension: a clear failure, the task cancelled.
    let mut h = Host::start("taskask2026", &example(R2026), R2026).await;
    let mut meta = meta_with(false);
    meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"] = json!({});
    let v = h
        .modern_as(
            "tools/call",
            json!({"name": "approval_task", "arguments": {}}),
            meta,
            None,
        )
        .await;
    assert_eq!(
        error_code(&v, "approval_task without the extension"),
        -32603
    );
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains(EXT), "{msg}");
    let wire = h.finish().await;
    assert_eq!(
        containing(&wire, &["\"tasks/cancel\""]).len(),
        1,
        "{wire:?}"
    );
}

/// H13 for a 2025-11-25 host in front of a 2026-07-28 upstream: the required tool's
/// upstream task is driven to completion; the host gets the final result.
#[tokio::test]
async fn core_host_in_front_of_modern_upstream() {
    let mut h = host("core26", &example(R2026), R1125).await;
    let (v, _) = h
        .request(
            "tools/call",
            json!({"name": "failing_job", "arguments": {}}),
        )
        .await;
    let r = result(&v, "failing_job");
    assert_eq!(r["isError"], true);
    assert!(r.get("resultType").is_none());
    h.finish().await;
}

/// E-17: mcpx declares no client tasks capability upstream; an upstream's
/// task-augmented elicitation reaches the host without `task` (even one that declared
/// task support for elicitation), and the ordinary result goes back.
#[tokio::test]
async fn task_augmented_asks_are_processed_normally() {
    let mut h = Host::start("ask", &example(R1125), R1125).await;
    h.initialize(
        json!({"elicitation": {}, "tasks": {"requests": {"elicitation": {"create": {}}}}}),
    )
    .await;
    let id = h.next_id;
    h.next_id += 1;
    h.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"task_augmented_ask","arguments":{}}})).await;
    let mut asked = None;
    loop {
        let line = h.next_line("task_augmented_ask").await;
        tap()
            .validate_frame(R1125, &line)
            .unwrap_or_else(|e| panic!("to the host: {e}"));
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["method"] == "elicitation/create" {
            asked = Some(v.clone());
            h.send(&json!({"jsonrpc":"2.0","id":v["id"],"result":{"action":"accept","content":{"ok":true}}})).await;
            continue;
        }
        if v.get("id") == Some(&json!(id)) {
            assert_eq!(
                text(result(&v, "task_augmented_ask")),
                "elicitation answered: accept",
                "{v}"
            );
            break;
        }
    }
    let asked = asked.expect("the elicitation reached the host");
    assert!(asked["params"].get("task").is_none(), "{asked}");
    let wire = h.finish().await;
    let init_up = containing(&wire, &["\"initialize\""]);
    assert!(
        init_up.iter().all(|l| !l.to_string().contains("\"tasks\"")),
        "{init_up:?}"
    );
}

const RELATED: &str = "io.modelcontextprotocol/related-task";

/// C-C12 (2025-11-25 basic/utilities/tasks §Associating Task-Related Messages, §Input
/// Required Status): an elicitation raised by the work of a gateway task reaches the
/// host on the session, naming mcpx's task in related-task, while the task is
/// `input_required`; the host's answer (carrying the same related-task, as in the spec's
/// elicitation flow) reaches the upstream without it, since it names a task the upstream
/// does not know; the tasks/result response names the task. The same tool called
/// without a task asks without related-task.
#[tokio::test]
async fn core_task_asks_name_the_task() {
    let mut h = Host::start("taskask", &example(R1125), R1125).await;
    h.initialize(json!({"elicitation": {}})).await;
    let (list, _) = h.request("tools/list", json!({})).await;
    assert_eq!(
        tool(result(&list, "tools/list"), "confirm_job")["execution"]["taskSupport"],
        "optional"
    );

    let (created, ask) = h.task_and_its_ask("confirm_job").await;
    let id = result(&created, "tools/call")["task"]["taskId"]
        .as_str()
        .expect("a CreateTaskResult")
        .to_owned();
    assert_eq!(
        ask["params"]["_meta"][RELATED],
        json!({"taskId": id}),
        "the ask names mcpx's task: {ask}"
    );
    assert!(ask["params"].get("task").is_none(), "{ask}");
    // §Input Required Status: the task waits on the host.
    let (g, notes) = h.request("tasks/get", json!({"taskId": id})).await;
    assert!(notes.is_empty(), "{notes:?}");
    let g = result(&g, "tasks/get");
    assert_eq!(g["status"], "input_required", "{g}");
    assert!(
        g.get("_meta").is_none(),
        "no related-task on tasks/get: {g}"
    );

    h.send(&json!({"jsonrpc":"2.0","id":ask["id"],"result":{
        "action":"accept","content":{"ok":true},"_meta":{RELATED:{"taskId":id}}}}))
        .await;
    let (r, _) = h.request("tasks/result", json!({"taskId": id})).await;
    let r = result(&r, "tasks/result");
    // The upstream reports exactly what it received: the answer, no _meta.
    assert_eq!(text(r), r#"confirm_job: accept {"ok":true}"#, "{r}");
    assert_eq!(r["_meta"][RELATED], json!({"taskId": id}));
    assert_eq!(
        h.poll_core(&id, &["completed"]).await["status"],
        "completed"
    );

    // Not a task: the ask names none.
    let (v, asks, _) = h
        .exchange(
            "tools/call",
            json!({"name": "confirm_job", "arguments": {}}),
            &mut |q| vec![json!({"jsonrpc":"2.0","id":q["id"],"result":{"action":"decline"}})],
        )
        .await;
    assert_eq!(text(result(&v, "confirm_job")), "confirm_job: decline null");
    assert_eq!(asks.len(), 1, "{asks:?}");
    assert!(
        asks[0]["params"]["_meta"].get(RELATED).is_none(),
        "{}",
        asks[0]
    );
    assert!(v["result"].get("_meta").is_none(), "{v}");

    let wire = h.finish_checked(R1125).await;
    let answers = containing(&wire, &["\"action\":\"accept\""]);
    assert_eq!(
        answers.len(),
        1,
        "the host's answer went upstream: {wire:?}"
    );
    assert!(answers[0].get("method").is_none(), "{}", answers[0]);
    assert!(!answers[0].to_string().contains(RELATED), "{}", answers[0]);
    let calls = containing(&wire, &["\"tools/call\"", "confirm_job"]);
    assert!(
        !calls.is_empty() && calls.iter().all(|l| !l.to_string().contains("\"task\"")),
        "an optional tool goes upstream as a plain call: {calls:?}"
    );
}

/// H13, C-C12 (2025-11-25 basic/utilities/tasks §Input Required Status): a `required`
/// tool's upstream task asks on the upstream's session, naming its task with
/// related-task, while it is `input_required`. mcpx relays the ask to a legacy host as
/// the call's own: on the host's plain call (mcpx drives the task), without the
/// upstream's related-task; for a 2025-11-25 host's own task, on the session, naming
/// mcpx's task, which is `input_required` meanwhile. The answer goes back naming the
/// upstream's task, and mcpx takes the task's result with tasks/result. A 2026-07-28
/// host cannot be asked in the middle of its call: -32603 saying so, and the upstream
/// task is cancelled.
#[tokio::test]
async fn core_upstream_task_questions_reach_legacy_hosts() {
    // A 2025-06-18 host's plain call: mcpx runs the upstream task for it and relays
    // the task's ask on the call.
    let mut h = Host::start("coreask0618", &example(R1125), R0618).await;
    h.initialize(json!({"elicitation": {}})).await;
    let (v, asks, _) = h
        .exchange(
            "tools/call",
            json!({"name": "approval_job", "arguments": {}}),
            &mut |q| {
                vec![json!({"jsonrpc":"2.0","id":q["id"],"result":{
                    "action":"accept","content":{"ok":true}}})]
            },
        )
        .await;
    // The upstream reports what it received: the answer, naming its task (checked
    // against the wire below).
    assert!(
        text(result(&v, "approval_job"))
            .starts_with(r#"approval_job: accept {"ok":true} _meta {"io.modelcontextprotocol/related-task":{"taskId":"#),
        "{v}"
    );
    assert_eq!(asks.len(), 1, "{asks:?}");
    assert_eq!(asks[0]["method"], "elicitation/create");
    assert!(
        asks[0]["params"]
            .get("_meta")
            .and_then(|m| m.get(RELATED))
            .is_none(),
        "the upstream's task is not the host's: {}",
        asks[0]
    );
    let wire = h.finish_checked(R1125).await;
    // The same over Streamable HTTP, where the task's ask comes on the session's GET
    // stream.
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpx"));
    cmd.args([
        "example-server",
        "--revision",
        "2025-11-25",
        "--http",
        "127.0.0.1:0",
    ])
    .stdout(std::process::Stdio::null());
    let (_upstream, port) = common::start_listening(cmd).await;
    let config = json!({"mcpServers": {"up": {"type": "http",
        "url": format!("http://127.0.0.1:{port}/mcp")}}});
    let mut hh = Host::start("coreask0618http", &config, R0618).await;
    hh.initialize(json!({"elicitation": {}})).await;
    let (v, asks, _) = hh
        .exchange(
            "tools/call",
            json!({"name": "approval_job", "arguments": {}}),
            &mut |q| vec![json!({"jsonrpc":"2.0","id":q["id"],"result":{"action":"cancel"}})],
        )
        .await;
    assert!(
        text(result(&v, "approval_job")).starts_with("approval_job: cancel null _meta"),
        "{v}"
    );
    assert_eq!(asks.len(), 1, "{asks:?}");
    hh.finish().await;
    let plain_answers: Vec<_> = wire
        .iter()
        .filter(|f| f.get("method").is_none() && f["result"].get("action").is_some())
        .cloned()
        .collect();

    // A 2025-11-25 host's own task: the ask comes on the session, naming mcpx's task.
    let mut h = Host::start("coreask", &example(R1125), R1125).await;
    h.initialize(json!({"elicitation": {}})).await;
    let (list, _) = h.request("tools/list", json!({})).await;
    assert_eq!(
        tool(result(&list, "tools/list"), "approval_job")["execution"]["taskSupport"],
        "required"
    );
    let (created, ask) = h.task_and_its_ask("approval_job").await;
    let id = result(&created, "tools/call")["task"]["taskId"]
        .as_str()
        .expect("a CreateTaskResult")
        .to_owned();
    assert_eq!(
        ask["params"]["_meta"][RELATED],
        json!({"taskId": id}),
        "{ask}"
    );
    let (g, _) = h.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(result(&g, "tasks/get")["status"], "input_required");
    h.send(&json!({"jsonrpc":"2.0","id":ask["id"],"result":{
        "action":"decline","_meta":{RELATED:{"taskId":id}}}}))
        .await;
    let (r, _) = h.request("tasks/result", json!({"taskId": id})).await;
    let r = result(&r, "tasks/result");
    assert!(
        text(r).starts_with(
            r#"approval_job: decline null _meta {"io.modelcontextprotocol/related-task""#
        ),
        "{r}"
    );
    assert_eq!(r["_meta"][RELATED], json!({"taskId": id}));

    let task_wire = h.finish_checked(R1125).await;
    // Each answer went back naming the upstream's own task, whose result mcpx then
    // took with tasks/result; the tool went upstream as a task both times.
    for wire in [&wire, &task_wire] {
        let answers: Vec<_> = wire
            .iter()
            .filter(|f| f.get("method").is_none() && f["result"].get("action").is_some())
            .collect();
        assert_eq!(answers.len(), 1, "{wire:?}");
        let theirs = &answers[0]["result"]["_meta"][RELATED]["taskId"];
        assert!(theirs.is_string(), "{}", answers[0]);
        assert_ne!(theirs, &json!(id), "{}", answers[0]);
        assert!(
            containing(wire, &["\"tasks/result\""])
                .iter()
                .any(|r| &r["params"]["taskId"] == theirs),
            "tasks/result for {theirs}: {wire:?}"
        );
        let calls = containing(wire, &["\"tools/call\"", "approval_job"]);
        assert!(
            calls.len() == 1 && calls[0]["params"].get("task").is_some(),
            "a required tool goes upstream as a task: {calls:?}"
        );
    }
    assert_eq!(plain_answers.len(), 1);

    // A 2026-07-28 host cannot be asked in the middle of its call.
    let mut h = Host::start("coreask26", &example(R1125), R2026).await;
    let v = h
        .modern(
            "tools/call",
            json!({"name": "approval_job", "arguments": {}}),
            false,
            None,
        )
        .await;
    assert_eq!(error_code(&v, "approval_job for a 2026-07-28 host"), -32603);
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("needs input") && message.contains("2026-07-28"),
        "{v}"
    );
    let wire = h.finish_checked(R1125).await;
    assert_eq!(
        containing(&wire, &["\"tasks/cancel\""]).len(),
        1,
        "the upstream task is cancelled: {wire:?}"
    );
}

/// C-C12 (§Associating Task-Related Messages: "the taskId parameter in the request MUST
/// be used as the source of truth ... receivers MUST ignore such metadata"): tasks/get,
/// tasks/result and tasks/cancel whose related-task names another task are served by
/// params.taskId, and related-task alone names nothing.
#[tokio::test]
async fn incoming_task_requests_use_params_task_id() {
    let mut h = host("taskid", &example(R1125), R1125).await;
    let start = |label: &'static str, secs: f64| json!({"name": "slow_compute", "arguments": {"seconds": secs, "label": label}, "task": {}});
    let (a, _) = h.request("tools/call", start("a", 0.2)).await;
    let a = result(&a, "tools/call")["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (b, _) = h.request("tools/call", start("b", 30.0)).await;
    let b = result(&b, "tools/call")["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let misleading =
        |id: &str, other: &str| json!({"taskId": id, "_meta": {RELATED: {"taskId": other}}});

    let (g, _) = h.request("tasks/get", misleading(&a, &b)).await;
    assert_eq!(result(&g, "tasks/get")["taskId"], json!(a), "{g}");
    let (g, _) = h.request("tasks/get", misleading(&b, &a)).await;
    assert_eq!(result(&g, "tasks/get")["taskId"], json!(b), "{g}");
    // related-task alone is not a taskId.
    let (n, _) = h
        .request("tasks/get", json!({"_meta": {RELATED: {"taskId": a}}}))
        .await;
    assert_eq!(error_code(&n, "tasks/get without params.taskId"), -32602);

    // tasks/result of a (which ends), with related-task naming b (which does not).
    let (r, _) = h.request("tasks/result", misleading(&a, &b)).await;
    let r = result(&r, "tasks/result");
    assert_eq!(text(r), "computed a after 0.2 s");
    assert_eq!(r["_meta"][RELATED], json!({"taskId": a}));

    // tasks/cancel of b (working), with related-task naming a (completed: -32602 if
    // it were the target).
    let (c, _) = h.request("tasks/cancel", misleading(&b, &a)).await;
    let c = result(&c, "tasks/cancel");
    assert_eq!(c["taskId"], json!(b), "{c}");
    assert_eq!(c["status"], "cancelled");
    assert_eq!(h.poll_core(&a, &["completed"]).await["status"], "completed");
    // And the other way: cancelling a (completed) is -32602 whatever related-task says.
    let (c, _) = h.request("tasks/cancel", misleading(&a, &b)).await;
    assert_eq!(error_code(&c, "cancel a completed task"), -32602);
    h.finish().await;
}
