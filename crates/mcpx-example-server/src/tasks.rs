//! Tasks, in both flavours (register H13), for mcpx's gateway tests and the conformance
//! suite's `tasks-*` scenarios (0.2.0-alpha.12, SEP-2663 fixtures).
//!
//! * **2025-11-25 core** (basic/utilities/tasks): the `tasks` capability, tools with
//!   `execution.taskSupport`, `params.task` creating a task (`CreateTaskResult {task}`),
//!   `tasks/get`, `tasks/result` (blocks until terminal; the result carries
//!   `io.modelcontextprotocol/related-task`), `tasks/list` (the session's tasks),
//!   `tasks/cancel` (moves to `cancelled` before answering; terminal tasks are -32602).
//!   A tool result with `isError` ends the task `failed` (§Task Execution Errors).
//! * **2026-07-28 extension** (ext-tasks): `capabilities.extensions` advertises it; a
//!   request that declared it in `clientCapabilities.extensions` gets a flat
//!   `resultType: "task"` handle for a task-supporting tool; `tasks/get` inlines `result`
//!   or `error`; `tasks/cancel` is an empty ack (idempotent on terminal tasks); a
//!   non-declaring request gets -32021 for `tasks/*` and for `required` tools, and runs
//!   `optional` tools synchronously. `isError` results end `completed`.
//!
//! Fixtures (names from the suite): `greet` (never a task), `slow_compute`
//! (`optional`; sleeps `seconds`, cancellable), `failing_job` (`required`; a tool error
//! after 300 ms), `protocol_error_job` (`optional`; a -32603 JSON-RPC error after 200 ms).
//! Extension only, tasks that need input (ext-tasks §Input Requests: the task is
//! `input_required` with its open `inputRequests` on `tasks/get` until `tasks/update`
//! answers them; keys not outstanding are ignored, a partial answer leaves the rest
//! open): `confirm_delete` (`optional`; asks to confirm deleting `filename`) and
//! `multi_input` (`optional`; asks two questions at once). Called without the
//! extension, both ask on the request instead (MRTR). `test_tool_with_task`
//! (`required`) asks for `user_name` on the request (MRTR) and only then creates its
//! task, whose result greets the name (SEP-2663 451f5e1: MRTR before task creation).
//! Beyond the suite, `approval_task` (`required`) asks for approval while it runs: what
//! a gateway in front must relay to hosts that cannot see a task's `inputRequests`.
//! Core only: `task_augmented_ask` (see [`task_augmented_ask`]), `confirm_job`
//! (`optional`; asks `elicitation/create` and reports the answer: called plainly, on the
//! request; run as a task, the task is `input_required` while the ask, carrying
//! `io.modelcontextprotocol/related-task`, waits on the session: §Input Required Status)
//! and `approval_job` (`required`: the same, always as a task; what a gateway in front
//! must relay to hosts that cannot see the upstream's task).
//!
//! The store is bounded ([`MAX_TASKS`], [`TTL_MS`]): expired tasks are purged on every
//! access, and creating a task beyond the bound is refused with -32603.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcpx_protocol::Revision;
use mcpx_protocol::error::{
    INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY,
};
use mcpx_protocol::revision::TasksFlavor;
use mcpx_protocol::task::{Status, TaskSupport, declares_extension, iso8601};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::RpcError;

/// The most tasks held at once.
pub const MAX_TASKS: usize = 256;
/// How long a task is kept after its creation (ms).
pub const TTL_MS: u64 = 10 * 60 * 1000;
/// The suggested polling interval (ms).
pub const POLL_MS: u64 = 100;

/// The task-supporting fixtures and their support.
pub(crate) fn support(name: &str) -> Option<TaskSupport> {
    Some(match name {
        "greet" => TaskSupport::Forbidden,
        "slow_compute" | "protocol_error_job" => TaskSupport::Optional,
        "failing_job" => TaskSupport::Required,
        "task_augmented_ask" => TaskSupport::Forbidden,
        "confirm_job" | "confirm_delete" | "multi_input" => TaskSupport::Optional,
        "test_tool_with_task" | "approval_task" | "approval_job" => TaskSupport::Required,
        _ => return None,
    })
}

/// The task fixtures' definitions for `rev` (only where the revision has tasks).
pub(crate) fn tools(rev: Revision) -> Vec<Value> {
    let flavor = rev.facts().tasks;
    if flavor == TasksFlavor::None {
        return Vec::new();
    }
    let obj = |props: Value, required: &[&str]| json!({"type": "object", "properties": props, "required": required});
    let defs = [
        (
            "greet",
            "Says hello (never a task).",
            obj(json!({"name": {"type": "string"}}), &["name"]),
        ),
        (
            "slow_compute",
            "Sleeps `seconds` then answers; may run as a task.",
            obj(
                json!({"seconds": {"type": "number"}, "label": {"type": "string"}}),
                &[],
            ),
        ),
        (
            "failing_job",
            "Must run as a task; ends with a tool execution error.",
            obj(json!({}), &[]),
        ),
        (
            "protocol_error_job",
            "May run as a task; ends with a JSON-RPC error.",
            obj(json!({}), &[]),
        ),
    ];
    let ask = (
        "task_augmented_ask",
        "Asks the client with a task-augmented elicitation/create (2025-11-25) and reports what came back.",
        obj(json!({}), &[]),
    );
    let confirm = (
        "confirm_job",
        "Asks the client to confirm (elicitation/create) and reports the answer; may run as a task.",
        obj(json!({}), &[]),
    );
    let approval = (
        "approval_job",
        "Must run as a task; asks the client to confirm (elicitation/create, naming the task) while it runs.",
        obj(json!({}), &[]),
    );
    let extension = [
        (
            "confirm_delete",
            "Asks to confirm deleting `filename`; as a task, the task waits for the answer (tasks/update).",
            obj(json!({"filename": {"type": "string"}}), &[]),
        ),
        (
            "multi_input",
            "Asks two questions at once; as a task, both wait on tasks/update.",
            obj(json!({}), &[]),
        ),
        (
            "test_tool_with_task",
            "Must run as a task; asks for user_name on the request (input_required) first.",
            obj(json!({}), &[]),
        ),
        (
            "approval_task",
            "Must run as a task; asks for approval (inputRequests) while it runs.",
            obj(json!({}), &[]),
        ),
    ];
    let core = (flavor == TasksFlavor::Core)
        .then_some([ask, confirm, approval])
        .into_iter()
        .flatten();
    let extension = (flavor == TasksFlavor::Extension)
        .then_some(extension)
        .into_iter()
        .flatten();
    defs.into_iter()
        .chain(core)
        .chain(extension)
        .map(|(name, description, input)| {
            let mut t = json!({"name": name, "description": description, "inputSchema": input});
            // 2025-11-25 schema ToolExecution; 2026-07-28's Tool has no `execution`.
            if flavor == TasksFlavor::Core {
                let s = match support(name).unwrap_or_default() {
                    TaskSupport::Forbidden => "forbidden",
                    TaskSupport::Optional => "optional",
                    TaskSupport::Required => "required",
                };
                t["execution"] = json!({ "taskSupport": s });
            }
            t
        })
        .collect()
}

/// The tasks capability of `rev` (2025-11-25 §Server Capabilities; ext-tasks
/// §Capability Negotiation), merged into `caps`.
pub(crate) fn capabilities(rev: Revision, caps: &mut Value) {
    match rev.facts().tasks {
        TasksFlavor::None => {}
        TasksFlavor::Core => {
            caps["tasks"] = json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
        }
        TasksFlavor::Extension => {
            caps["extensions"] = json!({ mcpx_protocol::method::TASKS_EXTENSION: {} });
        }
    }
}

type Outcome = Result<Value, RpcError>;

#[derive(Debug)]
struct Entry {
    flavor: TasksFlavor,
    /// Legacy session the task belongs to (core `tasks/list`).
    session: Option<String>,
    status: Status,
    message: Option<String>,
    created: u64,
    updated: u64,
    outcome: Option<Outcome>,
    cancel: CancellationToken,
    changed: watch::Sender<Status>,
    /// ext-tasks: the work's open input requests, by key (surfaced on `tasks/get`
    /// while the task is `input_required`).
    inputs: Map<String, Value>,
    /// Answers `tasks/update` delivered, by key, not yet taken by the work.
    answers: Map<String, Value>,
    /// Wakes the work when an answer arrives (a stored permit: none is missed).
    answered: Arc<Notify>,
}

/// The task store.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    inner: Mutex<HashMap<String, Entry>>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn random_id() -> String {
    // Unguessable enough for a test server: time, a counter and the address of a
    // fresh allocation, hashed (2025-11-25 §Task Isolation; the gateway uses OS
    // randomness).
    use std::hash::{BuildHasher, Hasher};
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut out = String::new();
    for salt in 0..2u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(now_ms() ^ n.rotate_left(17) ^ salt);
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

/// The task body of a fixture: what the tool returns, after its delay.
async fn run_body(name: &str, args: &Value, cancel: &CancellationToken) -> Option<Outcome> {
    let (delay, outcome) = match name {
        "slow_compute" => {
            let secs = args
                .get("seconds")
                .and_then(Value::as_f64)
                .unwrap_or(1.0)
                .clamp(0.0, 3600.0);
            let label = args.get("label").and_then(Value::as_str).unwrap_or("job");
            (
                Duration::from_secs_f64(secs),
                Ok(json!({"content": [{"type": "text",
                    "text": format!("computed {label} after {secs} s")}]})),
            )
        }
        "failing_job" => (
            Duration::from_millis(300),
            Ok(
                json!({"content": [{"type": "text", "text": "failing_job failed, as it always does"}],
                "isError": true}),
            ),
        ),
        "test_tool_with_task" => (
            Duration::from_millis(100),
            Ok(
                json!({"content": [{"type": "text", "text": format!("Hello, {}! (from a task)",
                args.get("user_name").and_then(Value::as_str).unwrap_or("?"))}]}),
            ),
        ),
        "protocol_error_job" => (
            Duration::from_millis(200),
            Err(RpcError::new(
                INTERNAL_ERROR,
                "protocol_error_job: simulated internal failure",
            )),
        ),
        _ => (
            Duration::ZERO,
            Ok(
                json!({"content": [{"type": "text", "text": format!("Hello, {}!",
                args.get("name").and_then(Value::as_str).unwrap_or("world"))}]}),
            ),
        ),
    };
    tokio::select! {
        () = cancel.cancelled() => None,
        () = tokio::time::sleep(delay) => Some(outcome),
    }
}

/// What a request needs from the server for task handling.
pub(crate) struct Req<'a> {
    pub(crate) rev: Revision,
    pub(crate) modern: bool,
    pub(crate) params: &'a Value,
    pub(crate) caps: &'a Value,
    pub(crate) session: Option<String>,
    pub(crate) cancel: &'a CancellationToken,
    pub(crate) ctx: &'a mcpx_transport::RequestCtx,
}

fn missing_extension() -> RpcError {
    RpcError::with_data(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        "this request needs the io.modelcontextprotocol/tasks extension",
        mcpx_protocol::task::required_extension_data(),
    )
}

impl Tasks {
    fn purge(map: &mut HashMap<String, Entry>, now: u64) {
        map.retain(|_, e| now.saturating_sub(e.created) < TTL_MS);
    }

    fn task_json(id: &str, e: &Entry) -> Value {
        let mut t = json!({
            "taskId": id,
            "status": e.status.as_str(),
            "createdAt": iso8601(e.created),
            "lastUpdatedAt": iso8601(e.updated),
        });
        if let Some(m) = &e.message {
            t["statusMessage"] = json!(m);
        }
        match e.flavor {
            TasksFlavor::Extension => {
                t["ttlMs"] = json!(TTL_MS);
                t["pollIntervalMs"] = json!(POLL_MS);
            }
            _ => {
                t["ttl"] = json!(TTL_MS);
                t["pollInterval"] = json!(POLL_MS);
            }
        }
        t
    }

    fn finish(&self, id: &str, outcome: Option<Outcome>) {
        let mut map = self.inner.lock();
        let Some(e) = map.get_mut(id) else {
            return;
        };
        // 2025-11-25 §Task Cancellation: a cancelled task stays cancelled.
        if e.status.is_terminal() {
            return;
        }
        let Some(outcome) = outcome else {
            return;
        };
        let tool_error = outcome
            .as_ref()
            .ok()
            .and_then(|r| r.get("isError"))
            .and_then(Value::as_bool)
            == Some(true);
        e.status = match (&outcome, e.flavor) {
            (Err(_), _) => Status::Failed,
            // 2025-11-25 §Task Execution Errors: isError ends `failed`; ext-tasks: a
            // tool error is `completed` (failed is for JSON-RPC errors only).
            (Ok(_), TasksFlavor::Core) if tool_error => Status::Failed,
            (Ok(_), _) => Status::Completed,
        };
        e.message = match &outcome {
            Err(err) => Some(err.message.clone()),
            Ok(_) if tool_error => Some("the tool reported an error".to_owned()),
            Ok(_) => None,
        };
        e.outcome = Some(outcome);
        e.updated = now_ms();
        e.changed.send_replace(e.status);
    }

    /// Creates a task running fixture `name`; returns its id and task object.
    fn create(
        self: &Arc<Self>,
        flavor: TasksFlavor,
        session: Option<String>,
        name: &str,
        args: Value,
        peer: Option<mcpx_transport::Peer>,
    ) -> Result<Value, RpcError> {
        let id = random_id();
        let cancel = CancellationToken::new();
        let now = now_ms();
        let entry = Entry {
            flavor,
            session,
            status: Status::Working,
            message: None,
            created: now,
            updated: now,
            outcome: None,
            cancel: cancel.clone(),
            changed: watch::channel(Status::Working).0,
            inputs: Map::new(),
            answers: Map::new(),
            answered: Arc::new(Notify::new()),
        };
        let task = Self::task_json(&id, &entry);
        {
            let mut map = self.inner.lock();
            Self::purge(&mut map, now);
            if map.len() >= MAX_TASKS {
                return Err(RpcError::new(
                    INTERNAL_ERROR,
                    &format!("too many tasks (at most {MAX_TASKS})"),
                ));
            }
            map.insert(id.clone(), entry);
        }
        let me = self.clone();
        let name = name.to_owned();
        tokio::spawn(async move {
            let outcome = match name.as_str() {
                "confirm_job" | "approval_job" => me.confirm_task(&name, &id, peer, &cancel).await,
                _ => match task_questions(&name, &args) {
                    questions if questions.is_empty() => run_body(&name, &args, &cancel).await,
                    questions => {
                        let reqs = questions
                            .into_iter()
                            .map(|(k, r)| (k.to_owned(), r))
                            .collect();
                        me.ask(&id, reqs, &cancel)
                            .await
                            .map(|a| Ok(tool_text(&task_answer(&name, &args, &a))))
                    }
                },
            };
            me.finish(&id, outcome);
        });
        Ok(task)
    }

    /// Moves a live task between `working` and `input_required` (2025-11-25 §Task
    /// Status Lifecycle: both ways are valid paths; terminal tasks stay as they are).
    fn set_waiting(&self, id: &str, waiting: bool) {
        let mut map = self.inner.lock();
        if let Some(e) = map.get_mut(id).filter(|e| !e.status.is_terminal()) {
            e.status = if waiting {
                Status::InputRequired
            } else {
                Status::Working
            };
            e.updated = now_ms();
            e.changed.send_replace(e.status);
        }
    }

    /// ext-tasks §Input Requests: opens `reqs` on task `id` (which is `input_required`
    /// until every one is answered by `tasks/update`) and returns the answers, or `None`
    /// when the task is cancelled or gone.
    async fn ask(
        &self,
        id: &str,
        reqs: Vec<(String, Value)>,
        cancel: &CancellationToken,
    ) -> Option<Map<String, Value>> {
        let answered = {
            let mut map = self.inner.lock();
            let e = map.get_mut(id).filter(|e| !e.status.is_terminal())?;
            e.inputs.extend(reqs);
            e.status = Status::InputRequired;
            e.updated = now_ms();
            e.changed.send_replace(e.status);
            e.answered.clone()
        };
        loop {
            {
                let mut map = self.inner.lock();
                let e = map.get_mut(id)?;
                if e.inputs.is_empty() {
                    return Some(std::mem::take(&mut e.answers));
                }
            }
            tokio::select! {
                () = cancel.cancelled() => return None,
                () = answered.notified() => {}
            }
        }
    }

    /// `confirm_job` run as a task, and `approval_job` (which always is): §Input Required Status, the task is
    /// `input_required` while its ask, naming it with related-task, waits on the session
    /// (the request that created the task has been answered).
    async fn confirm_task(
        &self,
        tool: &str,
        id: &str,
        peer: Option<mcpx_transport::Peer>,
        cancel: &CancellationToken,
    ) -> Option<Outcome> {
        let Some(peer) = peer else {
            return Some(Ok(confirm_text(tool, Err(AskFailed::NoSession))));
        };
        let mut params = confirm_params();
        params["_meta"] = json!({ mcpx_protocol::meta::RELATED_TASK: {"taskId": id} });
        let raw = serde_json::value::RawValue::from_string(params.to_string()).ok();
        self.set_waiting(id, true);
        let answer = tokio::select! {
            () = cancel.cancelled() => return None,
            a = peer.request("elicitation/create", raw.as_deref(), Duration::from_secs(60)) => a,
        };
        self.set_waiting(id, false);
        Some(Ok(confirm_text(tool, answer.map_err(AskFailed::from))))
    }

    /// A `tools/call` of a task fixture; `None` for other tools.
    pub(crate) async fn tool_call(
        self: &Arc<Self>,
        r: &Req<'_>,
        name: &str,
        args: &Value,
    ) -> Option<Result<Value, RpcError>> {
        let support = support(name)?;
        let flavor = r.rev.facts().tasks;
        if name == "task_augmented_ask" {
            return Some(Ok(task_augmented_ask(r).await));
        }
        if name == "confirm_job" && r.params.get("task").is_none() {
            let raw = serde_json::value::RawValue::from_string(confirm_params().to_string()).ok();
            let answer = r
                .ctx
                .request(
                    "elicitation/create",
                    raw.as_deref(),
                    Duration::from_secs(60),
                )
                .await;
            return Some(Ok(confirm_text(name, answer.map_err(AskFailed::from))));
        }
        let wants_task = match flavor {
            TasksFlavor::None => false,
            TasksFlavor::Core => {
                let asked = r.params.get("task").is_some_and(Value::is_object);
                // 2025-11-25 §Tool-Level Negotiation: -32601 both ways.
                match (asked, support) {
                    (true, TaskSupport::Forbidden) => {
                        return Some(Err(RpcError::new(
                            METHOD_NOT_FOUND,
                            &format!("{name} does not support task-augmented calls"),
                        )));
                    }
                    (false, TaskSupport::Required) => {
                        return Some(Err(RpcError::new(
                            METHOD_NOT_FOUND,
                            &format!("{name} must be called as a task"),
                        )));
                    }
                    (asked, _) => asked,
                }
            }
            TasksFlavor::Extension if r.modern => {
                let declared = declares_extension(r.caps);
                match support {
                    // ext-tasks §Capability Negotiation: MUST return -32021.
                    TaskSupport::Required if !declared => return Some(Err(missing_extension())),
                    // A `task` param is tolerated and never promotes a sync tool.
                    TaskSupport::Forbidden => false,
                    _ => declared,
                }
            }
            TasksFlavor::Extension => false,
        };
        if !wants_task {
            if matches!(name, "confirm_delete" | "multi_input") {
                // Without a task they ask on the request itself (MRTR): the caller's job.
                return None;
            }
            return Some(match run_body(name, args, r.cancel).await {
                Some(o) => o,
                None => Err(RpcError::new(INTERNAL_ERROR, "cancelled")),
            });
        }
        // ext-tasks §Input Requests are subject to the same rules as the requests they
        // stand for: nothing the client did not declare is asked (basic/patterns/mrtr).
        if let Some(e) = crate::mrtr::missing_capabilities(r.caps, &task_questions(name, args)) {
            return Some(Err(e));
        }
        let peer = r.ctx.peer().cloned();
        let task = match self.create(flavor, r.session.clone(), name, args.clone(), peer) {
            Ok(t) => t,
            Err(e) => return Some(Err(e)),
        };
        Some(Ok(match flavor {
            TasksFlavor::Core => json!({ "task": task }),
            _ => {
                let mut t = task;
                t["resultType"] = json!("task");
                t
            }
        }))
    }

    fn task_id(params: &Value) -> Result<String, RpcError> {
        params
            .get("taskId")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| RpcError::new(INVALID_PARAMS, "params.taskId is required"))
    }

    fn not_found(id: &str) -> RpcError {
        RpcError::new(
            INVALID_PARAMS,
            &format!("Failed to retrieve task: Task not found: {id}"),
        )
    }

    /// ext-tasks §Task Update Requests: the answers to outstanding keys go to the work
    /// (a malformed one is -32602 and nothing is taken); keys not outstanding (never
    /// issued, answered before, or of a finished task) are ignored; the ack is empty.
    fn update(e: &mut Entry, params: &Value) -> Outcome {
        let Some(responses) = params.get("inputResponses").and_then(Value::as_object) else {
            return Err(RpcError::new(
                INVALID_PARAMS,
                "params.inputResponses must be an object mapping input keys to responses",
            ));
        };
        for (key, resp) in responses {
            if let Some(req) = e.inputs.get(key)
                && !crate::mrtr::response_ok(req, resp)
            {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    &format!(
                        "inputResponses[{key:?}] is not a valid response to its input request"
                    ),
                ));
            }
        }
        let mut took = false;
        for (key, resp) in responses {
            if e.inputs.remove(key).is_some() {
                e.answers.insert(key.clone(), resp.clone());
                took = true;
            }
        }
        if took {
            // A partial answer leaves the task input_required for the rest.
            if e.inputs.is_empty() && e.status == Status::InputRequired {
                e.status = Status::Working;
                e.updated = now_ms();
                e.changed.send_replace(e.status);
            }
            e.answered.notify_one();
        }
        Ok(json!({}))
    }

    /// `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`, `tasks/update`.
    pub(crate) async fn method(self: &Arc<Self>, r: &Req<'_>, method: &str) -> Outcome {
        let flavor = r.rev.facts().tasks;
        if flavor == TasksFlavor::Extension && !declares_extension(r.caps) {
            return Err(missing_extension());
        }
        if method == "tasks/list" {
            let mut map = self.inner.lock();
            if let Some(c) = r.params.get("cursor") {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    &format!("invalid cursor {c}: every task fits on one page"),
                ));
            }
            Self::purge(&mut map, now_ms());
            let mut tasks: Vec<(&String, &Entry)> = map
                .iter()
                .filter(|(_, e)| e.flavor == flavor && e.session == r.session)
                .collect();
            tasks.sort_by_key(|(_, e)| e.created);
            let list: Vec<Value> = tasks.iter().map(|(i, e)| Self::task_json(i, e)).collect();
            return Ok(json!({ "tasks": list }));
        }
        let id = Self::task_id(r.params)?;
        let mut waiter = {
            let mut map = self.inner.lock();
            Self::purge(&mut map, now_ms());
            let e = map
                .get_mut(&id)
                .filter(|e| {
                    e.flavor == flavor && (flavor != TasksFlavor::Core || e.session == r.session)
                })
                .ok_or_else(|| Self::not_found(&id))?;
            match method {
                "tasks/get" => {
                    let mut t = Self::task_json(&id, e);
                    if flavor == TasksFlavor::Extension {
                        match (&e.status, &e.outcome) {
                            (Status::Completed, Some(Ok(res))) => t["result"] = res.clone(),
                            (Status::Failed, Some(Err(err))) => {
                                t["error"] = json!({"code": err.code, "message": err.message});
                            }
                            (Status::Failed, Some(Ok(res))) => t["result"] = res.clone(),
                            // §Task Polling: every outstanding request.
                            (Status::InputRequired, _) if !e.inputs.is_empty() => {
                                t["inputRequests"] = Value::Object(e.inputs.clone());
                            }
                            _ => {}
                        }
                    }
                    return Ok(t);
                }
                "tasks/cancel" => {
                    if e.status.is_terminal() {
                        return match flavor {
                            // 2025-11-25 §Task Cancellation: MUST reject with -32602.
                            TasksFlavor::Core => Err(RpcError::new(
                                INVALID_PARAMS,
                                &format!(
                                    "Cannot cancel task: already in terminal status '{}'",
                                    e.status.as_str()
                                ),
                            )),
                            // ext-tasks: an ack, whatever the state.
                            _ => Ok(json!({})),
                        };
                    }
                    e.cancel.cancel();
                    e.status = Status::Cancelled;
                    e.message = Some("The task was cancelled by request.".to_owned());
                    e.updated = now_ms();
                    e.changed.send_replace(e.status);
                    return Ok(match flavor {
                        TasksFlavor::Core => Self::task_json(&id, e),
                        _ => json!({}),
                    });
                }
                "tasks/update" => return Self::update(e, r.params),
                "tasks/result" => e.changed.subscribe(),
                other => {
                    return Err(RpcError::new(
                        METHOD_NOT_FOUND,
                        &format!("method not found: {other}"),
                    ));
                }
            }
        };
        // tasks/result: blocks until terminal (2025-11-25 §Retrieving Task Results).
        loop {
            if waiter.borrow_and_update().is_terminal() {
                break;
            }
            tokio::select! {
                () = r.cancel.cancelled() => return Err(RpcError::new(INTERNAL_ERROR, "cancelled")),
                changed = waiter.changed() => if changed.is_err() { break },
            }
        }
        let map = self.inner.lock();
        let e = map.get(&id).ok_or_else(|| Self::not_found(&id))?;
        let related = json!({ "taskId": id });
        match &e.outcome {
            Some(Ok(res)) => {
                let mut res = res.clone();
                // §Related Task Metadata: tasks/result MUST carry it.
                res["_meta"] = json!({ mcpx_protocol::meta::RELATED_TASK: related });
                Ok(res)
            }
            Some(Err(err)) => Err(err.clone()),
            None => Err(RpcError::new(
                INVALID_PARAMS,
                &format!("task {id} was cancelled before it produced a result"),
            )),
        }
    }
}

/// `task_augmented_ask`: an elicitation with `task` (2025-11-25 basic/utilities/tasks),
/// sent whatever the client declared, so a gateway's handling of it shows (E-17): a
/// receiver without the capability processes it normally; a `CreateTaskResult` back is
/// reported as a tool error.
async fn task_augmented_ask(r: &Req<'_>) -> Value {
    let params = json!({
        "message": "Confirm?",
        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
        "task": {"ttl": 60000},
    });
    let raw = serde_json::value::RawValue::from_string(params.to_string()).ok();
    let answer = r
        .ctx
        .request(
            "elicitation/create",
            raw.as_deref(),
            Duration::from_secs(60),
        )
        .await;
    let text =
        |t: String, err: bool| json!({"content": [{"type": "text", "text": t}], "isError": err});
    match answer {
        Err(e) => text(format!("elicitation/create failed: {e}"), true),
        Ok(f) => match (f.result(), f.error()) {
            (Some(res), _) => {
                let v: Value = serde_json::from_str(res).unwrap_or(Value::Null);
                if v.get("task").is_some() {
                    text(format!("got a CreateTaskResult: {v}"), true)
                } else {
                    let action = v.get("action").and_then(Value::as_str).unwrap_or("?");
                    text(format!("elicitation answered: {action}"), false)
                }
            }
            (_, Some(e)) => text(format!("the client refused: {}", e.message), true),
            _ => text("empty answer".to_owned(), true),
        },
    }
}

/// `confirm_job`'s question.
fn confirm_params() -> Value {
    json!({
        "message": "Go ahead?",
        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
    })
}

/// Why `confirm_job`'s question got no answer.
#[derive(Debug, thiserror::Error)]
enum AskFailed {
    /// The call came with no session to ask on.
    #[error("no session to ask on")]
    NoSession,
    /// The request to the client failed.
    #[error(transparent)]
    Request(#[from] mcpx_transport::pending::PeerError),
}

/// `confirm_job`'s result: the action and content the client answered, and the
/// `_meta` of its answer, if any (so a test can see what reached this server).
fn confirm_text(tool: &str, answer: Result<mcpx_protocol::Frame, AskFailed>) -> Value {
    let text =
        |t: String, err: bool| json!({"content": [{"type": "text", "text": t}], "isError": err});
    match answer {
        Err(e) => text(format!("elicitation/create failed: {e}"), true),
        Ok(f) => match (f.result(), f.error()) {
            (Some(res), _) => {
                let v: Value = serde_json::from_str(res).unwrap_or(Value::Null);
                let action = v.get("action").and_then(Value::as_str).unwrap_or("?");
                let content = v.get("content").cloned().unwrap_or(Value::Null);
                let mut t = format!("{tool}: {action} {content}");
                if let Some(m) = v.get("_meta") {
                    t.push_str(&format!(" _meta {m}"));
                }
                text(t, false)
            }
            (_, Some(e)) => text(format!("the client refused: {}", e.message), true),
            _ => text("empty answer".to_owned(), true),
        },
    }
}

/// The questions a task fixture asks while it runs (ext-tasks §Input Requests), by key;
/// none for the others.
fn task_questions(name: &str, args: &Value) -> Vec<(&'static str, Value)> {
    match name {
        "confirm_delete" => vec![("confirm", confirm_delete_request(filename(args)))],
        "multi_input" => multi_input_requests(),
        "approval_task" => vec![("approve", approval_request())],
        _ => Vec::new(),
    }
}

/// What a task fixture that asked ([`task_questions`]) answers, from the answers.
fn task_answer(name: &str, args: &Value, answers: &Map<String, Value>) -> String {
    match name {
        "confirm_delete" => confirm_delete_text(filename(args), answers),
        "multi_input" => multi_input_text(answers),
        _ => approval_text(answers),
    }
}

/// `confirm_delete`'s file (argument `filename`).
pub(crate) fn filename(args: &Value) -> &str {
    args.get("filename")
        .and_then(Value::as_str)
        .unwrap_or("the file")
}

/// `confirm_delete`'s question.
pub(crate) fn confirm_delete_request(file: &str) -> Value {
    crate::elicit_request(
        &format!("Delete {file}?"),
        json!({"confirm": {"type": "boolean"}}),
        &["confirm"],
    )
}

/// `confirm_delete`'s answer: deleted only on an accepted `confirm: true`.
pub(crate) fn confirm_delete_text(file: &str, answers: &Map<String, Value>) -> String {
    let a = answers.get("confirm");
    let action = a
        .and_then(|a| a.get("action"))
        .and_then(Value::as_str)
        .unwrap_or("?");
    let yes = a.and_then(|a| a.pointer("/content/confirm")) == Some(&Value::Bool(true));
    if action == "accept" && yes {
        format!("Deleted {file}")
    } else {
        format!("Kept {file} ({action})")
    }
}

/// `approval_task`'s question.
fn approval_request() -> Value {
    crate::elicit_request(
        "Approve the job?",
        json!({"approve": {"type": "boolean"}}),
        &["approve"],
    )
}

/// `approval_task`'s answer: the action and content it got.
fn approval_text(answers: &Map<String, Value>) -> String {
    let a = answers.get("approve");
    let action = a
        .and_then(|a| a.get("action"))
        .and_then(Value::as_str)
        .unwrap_or("?");
    let content = a.and_then(|a| a.get("content")).unwrap_or(&Value::Null);
    format!("approval_task: {action} {content}")
}

/// `multi_input`'s two questions, asked at once.
pub(crate) fn multi_input_requests() -> Vec<(&'static str, Value)> {
    vec![
        (
            "name",
            crate::elicit_request(
                "What is your name?",
                json!({"name": {"type": "string"}}),
                &["name"],
            ),
        ),
        (
            "confirm",
            crate::elicit_request(
                "Proceed?",
                json!({"confirm": {"type": "boolean"}}),
                &["confirm"],
            ),
        ),
    ]
}

/// `multi_input`'s answer: what each question got.
pub(crate) fn multi_input_text(answers: &Map<String, Value>) -> String {
    let field = |k: &str, f: &str| {
        answers
            .get(k)
            .and_then(|a| a.pointer(&format!("/content/{f}")))
            .map_or_else(|| "?".to_owned(), Value::to_string)
    };
    format!(
        "name = {}, confirm = {}",
        field("name", "name"),
        field("confirm", "confirm")
    )
}

fn tool_text(t: &str) -> Value {
    json!({"content": [{"type": "text", "text": t}]})
}
