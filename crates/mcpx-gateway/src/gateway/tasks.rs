//! Gateway tasks (registers H13, C-C10, C-C11, C-C12, C-C13, E-17).
//!
//! A child module of `gateway` (it drives calls through the gateway's routing). Every
//! task a host sees is mcpx's own: a random 128-bit id in a bounded [`Store`] (at most
//! `mcpx.limits.maxTasks`, each kept `taskTtlMs` from its creation), whose underlying
//! work is a spawned driver that brings the upstream call to its end:
//!
//! * a plain `tools/call` to the upstream (any revision);
//! * a 2025-11-25 upstream's task (a tool with `execution.taskSupport: "required"`):
//!   task-augmented `tools/call`, `tasks/get` every poll interval, then `tasks/result`;
//!   cancellation is `tasks/cancel` (2025-11-25 basic/utilities/tasks);
//! * a 2026-07-28 upstream's task (the host's declaration, or mcpx's own after a -32021
//!   naming the extension): `tasks/get` until terminal,
//!   the result or error inlined; cancellation is `tasks/cancel` (ext-tasks 2026-07-28).
//!
//! What the host sees depends on its revision ([`mcpx_protocol::revision::Facts::tasks`]):
//!
//! * **2025-11-25** (core): tools keep their `execution.taskSupport`; a call with
//!   `params.task` to a tool that supports tasks gets `CreateTaskResult {task}`; a call
//!   with a task to a tool without support, or without one to a `required` tool, gets
//!   -32601 (§Tool-Level Negotiation, C-C10). `tasks/cancel` moves the task to
//!   `cancelled` before answering and it stays so; a terminal task is -32602 (§Task
//!   Cancellation, C-C11). Tasks are bound to the host's session (`tasks/list` shows
//!   only its own). `io.modelcontextprotocol/related-task` is put on the `tasks/result`
//!   response and on asks raised by the task's work, never on `tasks/get|list|cancel`
//!   results (§Related Task Metadata, C-C12). Those asks go on the host's session (the
//!   creating request is answered) and the task is `input_required` while any waits
//!   (§Input Required Status); the host's answers go upstream without mcpx's task id.
//!   Incoming `tasks/get|result|cancel` are served by `params.taskId` alone. mcpx sends
//!   no `notifications/tasks/status` (a MAY, §Task Notifications).
//! * **2026-07-28 with the extension declared on the request** (C-C13): a tool that
//!   supports tasks, or an upstream that answered with a task, gets a flat
//!   `resultType: "task"` handle; `tasks/get` inlines `result`/`error`; `tasks/cancel`
//!   is an acknowledgement and the task reports how the work really ended (ext-tasks
//!   §Task Cancellation: cooperative). Modern requests carry no session, so extension
//!   tasks are bound to nothing but their unguessable id (ext-tasks §Security).
//! * **everyone else**: `params.task` and `execution.taskSupport` are removed, and mcpx
//!   drives any upstream task to completion itself, answering with the final result.
//!
//! mcpx declares no client-side tasks capability to upstreams, so the `task` field of
//! an upstream's sampling/elicitation ask is removed and the ask relayed as a normal
//! request (E-17).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use mcpx_client::{AskRefusal, CallEvent, CallOptions, ClientError, Connection, ServerFacts};
use mcpx_protocol::error::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, translate_code};
use mcpx_protocol::jsonrpc::Json;
use mcpx_protocol::lower::lower_result;
use mcpx_protocol::method::TASKS_EXTENSION;
use mcpx_protocol::revision::TasksFlavor;
use mcpx_protocol::task::{Status, TaskSupport, declares_extension, iso8601, strip_task_support};
use mcpx_protocol::{Era, Frame, Params, Revision, meta};
use mcpx_server::{Call, Fault, Reply};

use super::{GatewayError, Upstream};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
// tokio's clock (the system's but when a test pauses it), as the supervisor's.
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Asks, Gateway, fault, random_token};

/// How an upstream runs tasks, from what it declared at connection.
pub(super) fn upstream_flavor(f: &ServerFacts) -> TasksFlavor {
    match f.revision.facts().tasks {
        // 2025-11-25 §Tool-Level Negotiation rule 1: only with tasks.requests.tools.call.
        TasksFlavor::Core
            // Member by member: this runs on every tools/call, and a JSON pointer
            // re-escapes each token it walks.
            if f.capabilities
                .get("tasks")
                .and_then(|t| t.get("requests"))
                .and_then(|r| r.get("tools"))
                .and_then(|t| t.get("call"))
                .is_some() =>
        {
            TasksFlavor::Core
        }
        TasksFlavor::Extension
            if f.capabilities
                .get("extensions")
                .and_then(|e| e.get(TASKS_EXTENSION))
                .is_some() =>
        {
            TasksFlavor::Extension
        }
        _ => TasksFlavor::None,
    }
}

/// Whether mcpx offers tasks at all: some upstream runs them.
pub(super) fn offered<'a>(facts: impl IntoIterator<Item = &'a Arc<ServerFacts>>) -> bool {
    facts
        .into_iter()
        .any(|f| upstream_flavor(f) != TasksFlavor::None)
}

/// One page of `tools/list` for `host`: `execution.taskSupport` exists only in
/// 2025-11-25 (schema `ToolExecution`); other hosts get it removed (H13).
pub(super) fn shape_tools(items: &[Value], host: Revision) -> Option<Vec<Value>> {
    if host.facts().tasks == TasksFlavor::Core {
        return None;
    }
    let mut out = items.to_vec();
    let changed = out.iter_mut().fold(false, |c, t| strip_task_support(t) | c);
    changed.then_some(out)
}

/// An upstream's server-to-client ask, before it is relayed to `call`'s host: its
/// `task` is removed (mcpx declared no client tasks capability, so the ask is processed
/// normally: 2025-11-25 basic/utilities/tasks, E-17), and when the ask is raised by a
/// gateway task's work for a 2025-11-25 host it names that task (C-C12).
pub(super) fn ask_params(params: &mut Value, call: &Call) {
    strip_ask_task(params);
    if let (Some(id), TasksFlavor::Core) = (&call.related_task, call.host.facts().tasks)
        && let Some(o) = params.as_object_mut()
        && let Some(m) = o
            .entry("_meta")
            .or_insert_with(|| json!({}))
            .as_object_mut()
    {
        m.insert(meta::RELATED_TASK.to_owned(), json!({ "taskId": id }));
    }
}

/// Removes `task` from an ask's params (E-17), and the upstream's own related-task,
/// which names a task the host does not know.
pub(super) fn strip_ask_task(params: &mut Value) {
    if let Some(o) = params.as_object_mut() {
        o.remove("task");
        if let Some(Value::Object(m)) = o.get_mut("_meta") {
            m.remove(meta::RELATED_TASK);
            if m.is_empty() {
                o.remove("_meta");
            }
        }
    }
}

/// The host's answer to an ask, before it goes back to the upstream that asked: the
/// host's related-task names mcpx's task, which the upstream does not know, so it is
/// removed; when the ask came from the upstream's own task (a 2025-11-25 upstream's
/// related-task on it), the answer names that task instead (2025-11-25
/// basic/utilities/tasks §Associating Task-Related Messages: responses related to a
/// task MUST carry it; C-C12).
pub(super) fn answer_upstream(answer: &mut Value, theirs: Option<Value>, upstream: Revision) {
    strip_ask_task(answer);
    if let (Some(t), TasksFlavor::Core) = (theirs, upstream.facts().tasks)
        && let Some(o) = answer.as_object_mut()
        && let Some(m) = o
            .entry("_meta")
            .or_insert_with(|| json!({}))
            .as_object_mut()
    {
        m.insert(meta::RELATED_TASK.to_owned(), t);
    }
}

/// A 2025-11-25 upstream's task asks with requests on its session, which only a legacy
/// host with a session can be sent: `call` ends with this fault, and the task's ask
/// `ev`, if any, is answered with the same message (the upstream task is cancelled
/// after it).
fn unaskable(call: &Call, name: &str, ev: Option<CallEvent>) -> Fault {
    let message = format!(
        "upstream {name}'s task needs input from the client; mcpx relays a 2025-11-25 upstream task's requests to clients of 2025-11-25 and earlier only, and this one speaks {}",
        call.host
    );
    if let Some(CallEvent::Ask { reply, .. }) = ev {
        let _ = reply.send(Err(AskRefusal::new(INTERNAL_ERROR, message.clone())));
    }
    fault(INTERNAL_ERROR, message, call.host)
}

/// Who may see a task: a 2025-11-25 host's session, or any extension request.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    Core(String),
    Extension,
}

#[derive(Debug)]
struct Entry {
    owner: Owner,
    status: Status,
    message: Option<String>,
    created: u64,
    updated: u64,
    ttl: Duration,
    born: Instant,
    /// `None` until the work ends (or when it was cancelled).
    outcome: Option<Result<Reply, Fault>>,
    /// Fired by `tasks/cancel` (and on expiry): the work's cancellation.
    cancel: CancellationToken,
    changed: watch::Sender<Status>,
    /// Asks of the work waiting on the host (while any does, the task is
    /// `input_required`).
    asks: usize,
    /// ext-tasks: the upstream task's outstanding input requests, as the host sees
    /// them, by key (on `tasks/get` while `input_required`).
    inputs: Map<String, Value>,
    /// Keys whose answers went upstream: never surfaced again (ext-tasks §Input
    /// Requests: keys are unique over a task's life), though a poll may still list
    /// them before the upstream has taken the answer in (its ack is eventually
    /// consistent).
    answered: HashSet<String>,
    /// ext-tasks: the upstream task behind this one, where `tasks/update` goes.
    upstream: Option<UpstreamTask>,
}

/// An upstream's 2026-07-28 task that a gateway task stands for.
#[derive(Debug, Clone)]
struct UpstreamTask {
    upstream: Arc<Upstream>,
    id: String,
    conn: Connection,
}

/// An open ask of a 2025-11-25 gateway task's work: the task is `input_required` until
/// the last one is dropped, then `working` again (2025-11-25 §Input Required Status:
/// "SHOULD move the task to the input_required status", and back "when the receiver
/// receives all required input"; §Task Status Lifecycle allows both ways).
pub(super) struct Waiting<'a> {
    store: &'a Store,
    id: String,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut map = self.store.map.lock();
        if let Some(e) = map.get_mut(&self.id) {
            e.asks = e.asks.saturating_sub(1);
            if e.asks == 0 && e.status == Status::InputRequired {
                e.status = Status::Working;
                e.updated = now_ms();
                e.changed.send_replace(Status::Working);
            }
        }
    }
}

/// The gateway's tasks, bounded by `mcpx.limits.maxTasks` and `taskTtlMs`.
#[derive(Debug, Default)]
pub(super) struct Store {
    map: Mutex<HashMap<String, Entry>>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn not_found(id: &str, host: Revision) -> Fault {
    // Both flavours: an unknown (or expired) taskId is -32602.
    fault(
        INVALID_PARAMS,
        format!("Failed to retrieve task: Task not found: {id}"),
        host,
    )
}

/// The `Task` object in the owner's flavour.
fn task_json(id: &str, e: &Entry, poll: Duration) -> Value {
    let mut t = json!({
        "taskId": id,
        "status": e.status.as_str(),
        "createdAt": iso8601(e.created),
        "lastUpdatedAt": iso8601(e.updated),
    });
    if let Some(m) = &e.message {
        t["statusMessage"] = json!(m);
    }
    match e.owner {
        Owner::Core(_) => {
            t["ttl"] = json!(ms(e.ttl));
            t["pollInterval"] = json!(ms(poll));
        }
        Owner::Extension => {
            t["ttlMs"] = json!(ms(e.ttl));
            t["pollIntervalMs"] = json!(ms(poll));
        }
    }
    t
}

/// Whether `result` (a result's valid text) is an ext-tasks handle (`"resultType":
/// "task"`), read without parsing the rest of the result.
fn is_task_handle(result: &str) -> bool {
    // "task" written without escapes appears in the text as it is; with no backslash
    // there are no escapes. So a result without either cannot be a handle, and the walk
    // to its `resultType` (which every modern result has, usually last) is skipped.
    static TASK: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new("\"task\""));
    let bytes = result.as_bytes();
    if TASK.find(bytes).is_none() && memchr::memchr(b'\\', bytes).is_none() {
        return false;
    }
    mcpx_protocol::jsonrpc::first_member(result, "resultType")
        .and_then(|raw| serde_json::from_str::<std::borrow::Cow<'_, str>>(raw).ok())
        .is_some_and(|t| t == "task")
}

/// The tool result's `isError`.
fn is_tool_error(reply: &Reply) -> bool {
    serde_json::from_str::<Value>(reply.result.as_str())
        .ok()
        .and_then(|v| v.get("isError").and_then(Value::as_bool))
        == Some(true)
}

/// Removes an upstream's related-task from a final result: it names the upstream's task.
fn clean(mut reply: Reply) -> Reply {
    // Every final result passes here: one searcher built once, not one per call
    // (`str::contains` sets up a two-way searcher each time).
    static RELATED_TASK: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(meta::RELATED_TASK));
    if RELATED_TASK
        .find(reply.result.as_str().as_bytes())
        .is_some()
        && let Ok(mut v) = serde_json::from_str::<Value>(reply.result.as_str())
    {
        strip_ask_task(&mut v);
        reply.result = Json::of_value(&v);
    }
    reply
}

impl Store {
    /// How many tasks it holds (the `mcpx_tasks` gauge).
    pub(super) fn len(&self) -> usize {
        self.map.lock().len()
    }

    /// Marks `call`'s task (if it is the work of a 2025-11-25 host's task) as waiting
    /// on an ask until the returned guard is dropped.
    pub(super) fn waiting(&self, call: &Call) -> Option<Waiting<'_>> {
        let id = call.related_task.as_ref()?;
        let mut map = self.map.lock();
        let e = map
            .get_mut(id)
            .filter(|e| matches!(e.owner, Owner::Core(_)))?;
        e.asks += 1;
        if e.status == Status::Working {
            e.status = Status::InputRequired;
            e.updated = now_ms();
            e.changed.send_replace(Status::InputRequired);
        }
        Some(Waiting {
            store: self,
            id: id.clone(),
        })
    }

    /// The extension-owned gateway task `call` is the work of, if any.
    fn extension_task<'m>(
        map: &'m mut HashMap<String, Entry>,
        call: &Call,
    ) -> Option<&'m mut Entry> {
        let id = call.related_task.as_ref()?;
        map.get_mut(id)
            .filter(|e| e.owner == Owner::Extension && !e.status.is_terminal())
    }

    /// Records the upstream task behind `call`'s extension task (where its
    /// `tasks/update` goes); false when there is no such task.
    fn attach(&self, call: &Call, upstream: UpstreamTask) -> bool {
        let mut map = self.map.lock();
        Self::extension_task(&mut map, call).is_some_and(|e| {
            e.upstream = Some(upstream);
            true
        })
    }

    /// The upstream task is `input_required` with `requests` outstanding: `call`'s
    /// extension task shows the ones not yet answered (ext-tasks §Task Polling: all of
    /// them, as a snapshot) and is `input_required` while any is left.
    fn surface(&self, call: &Call, requests: Map<String, Value>) {
        let mut map = self.map.lock();
        let Some(e) = Self::extension_task(&mut map, call) else {
            return;
        };
        e.inputs = requests
            .into_iter()
            .filter(|(k, _)| !e.answered.contains(k))
            .collect();
        let status = if e.inputs.is_empty() {
            Status::Working
        } else {
            Status::InputRequired
        };
        if e.status != status {
            e.status = status;
            e.updated = now_ms();
            e.changed.send_replace(status);
        }
    }

    /// Forgets expired tasks, cancelling their work.
    fn purge(map: &mut HashMap<String, Entry>) {
        map.retain(|_, e| {
            let keep = e.born.elapsed() < e.ttl;
            if !keep {
                e.cancel.cancel();
            }
            keep
        });
    }

    fn create(
        &self,
        owner: Owner,
        ttl: Duration,
        max: usize,
        poll: Duration,
        host: Revision,
    ) -> Result<(String, Value, CancellationToken), Fault> {
        let id = random_token()
            .ok_or_else(|| fault(INTERNAL_ERROR, "no randomness for a task id".into(), host))?;
        let now = now_ms();
        let cancel = CancellationToken::new();
        let e = Entry {
            owner,
            status: Status::Working,
            message: None,
            created: now,
            updated: now,
            ttl,
            born: Instant::now(),
            outcome: None,
            cancel: cancel.clone(),
            changed: watch::channel(Status::Working).0,
            asks: 0,
            inputs: Map::new(),
            answered: HashSet::new(),
            upstream: None,
        };
        let task = task_json(&id, &e, poll);
        let mut map = self.map.lock();
        Self::purge(&mut map);
        if map.len() >= max {
            // 2025-11-25 §Resource Management: a bound on tasks, documented
            // (mcpx.limits.maxTasks).
            return Err(fault(
                INTERNAL_ERROR,
                format!("too many tasks (mcpx.limits.maxTasks = {max})"),
                host,
            ));
        }
        // Durable before the handle is returned (ext-tasks §Task Creation).
        map.insert(id.clone(), e);
        Ok((id, task, cancel))
    }

    /// Records how the work ended: `None` is cancelled.
    fn finish(&self, id: &str, outcome: Option<Result<Reply, Fault>>) {
        let mut map = self.map.lock();
        let Some(e) = map.get_mut(id) else {
            return;
        };
        // C-C11: a 2025-11-25 task cancelled by request stays cancelled whatever the
        // work ends with (§Task Cancellation: MUST remain in cancelled status).
        if e.status.is_terminal() {
            return;
        }
        let core = matches!(e.owner, Owner::Core(_));
        let (status, message) = match &outcome {
            None => (
                Status::Cancelled,
                Some("The task was cancelled.".to_owned()),
            ),
            Some(Err(f)) => (Status::Failed, Some(f.message.clone())),
            // 2025-11-25 §Task Execution Errors: isError ends the task failed; ext-tasks
            // §Task Status: a tool error is completed, failed is for JSON-RPC errors.
            Some(Ok(r)) if core && is_tool_error(r) => (
                Status::Failed,
                Some("The tool reported an error.".to_owned()),
            ),
            Some(Ok(_)) => (Status::Completed, None),
        };
        e.status = status;
        e.message = message;
        e.outcome = outcome.map(|o| o.map(clean));
        e.updated = now_ms();
        e.changed.send_replace(status);
    }
}

/// What starting the upstream call gave.
enum First {
    /// The final answer.
    Final(Result<Reply, Fault>),
    /// The upstream made a task of it: poll it.
    Upstream {
        conn: Connection,
        flavor: TasksFlavor,
        id: String,
        poll: Duration,
    },
}

/// A copy of `call` for the work of a task (or an upstream request that declares the
/// extension): what differs is its capabilities, cancellation and related task.
fn derive(
    call: &Call,
    caps: Arc<Value>,
    cancel: CancellationToken,
    related: Option<String>,
) -> Call {
    Call {
        id: call.id.clone(),
        method: call.method.clone(),
        params: call.params.clone(),
        host: call.host,
        progress: call.progress.clone(),
        log: call.log.clone(),
        cancel,
        peer: call.peer.clone(),
        client_capabilities: caps,
        ctx: call.ctx.clone(),
        related_task: related,
        tool_series: call.tool_series.clone(),
        trace: call.trace.clone(),
    }
}

fn with_extension(caps: &Value) -> Value {
    let mut caps = if caps.is_object() {
        caps.clone()
    } else {
        json!({})
    };
    let ext = caps
        .as_object_mut()
        .map(|o| o.entry("extensions").or_insert_with(|| json!({})));
    if let Some(Value::Object(e)) = ext {
        e.insert(TASKS_EXTENSION.to_owned(), json!({}));
    }
    caps
}

impl Gateway {
    fn upstream_opts(&self, up: &Upstream, flavor: TasksFlavor) -> CallOptions {
        CallOptions {
            client_capabilities: if flavor == TasksFlavor::Extension {
                Arc::new(with_extension(&json!({})))
            } else {
                super::no_capabilities()
            },
            timeout: up.config.mcpx.call_timeout,
            max_time: self.config().global.max_call_time,
            ..CallOptions::default()
        }
    }

    /// The upstream fault of a client error.
    /// The fault of a client error on `up`: a reload that replaced or removed `up`
    /// says so (its connection, and the upstream task on it, are gone).
    fn client_fault(&self, up: &Upstream, e: ClientError, host: Revision) -> Fault {
        if !up.is_current() {
            return GatewayError::Removed {
                upstream: up.id.clone(),
            }
            .to_fault(host);
        }
        GatewayError::Client(e).to_fault(host)
    }

    /// Starts the upstream side of a `tools/call`: an upstream task where the upstream
    /// requires or returns one, else the plain call.
    async fn task_start(
        self: &Arc<Self>,
        call: &Call,
        up: &Arc<Upstream>,
        params: &Params,
        idempotent: bool,
        support: TaskSupport,
    ) -> First {
        let conn = match up.live() {
            Some((_, c)) => c,
            None => match Box::pin(up.connection_slow()).await {
                Ok((_, c)) => c,
                Err(e) => return First::Final(Err(e.to_fault(call.host))),
            },
        };
        let facts = conn.facts();
        match upstream_flavor(&facts) {
            // 2025-11-25 §Tool-Level Negotiation: a "required" tool MUST be invoked as a
            // task; "optional" ones are called plainly (progress and asks stay live).
            TasksFlavor::Core if support == TaskSupport::Required => {
                let mut p: Value = serde_json::from_str(params).unwrap_or_else(|_| json!({}));
                p["task"] = json!({ "ttl": ms(self.config().global.task_ttl) });
                let mut opts = self.upstream_opts(up, TasksFlavor::Core);
                opts.cancel = call.cancel.clone();
                opts.progress = call.progress.is_some();
                // Boxed, as every rarer branch on a call's path: a future is as large as its
                // largest branch, and a call's is moved and allocated on every call.
                let frame = match Box::pin(conn.call(
                    "tools/call",
                    Some(&Params::of_value(&p)),
                    opts,
                ))
                .await
                {
                    Ok(f) => f,
                    Err(e) => return First::Final(Err(self.client_fault(up, e, call.host))),
                };
                let task = frame
                    .result()
                    .and_then(|r| serde_json::from_str::<Value>(r).ok())
                    .and_then(|v| v.get("task").cloned());
                match task
                    .as_ref()
                    .and_then(|t| t.get("taskId").and_then(Value::as_str))
                {
                    Some(id) => First::Upstream {
                        id: id.to_owned(),
                        poll: self.poll_interval(task.as_ref(), "pollInterval"),
                        conn,
                        flavor: TasksFlavor::Core,
                    },
                    None => {
                        First::Final(self.answer(call, &facts, up.id.as_str(), "tools/call", frame))
                    }
                }
            }
            // ext-tasks: mcpx always declares the extension to an upstream that has it,
            // so a tool that needs a task still runs for hosts without it (C-C13).
            // The host's capabilities go up as declared (A-C16); when the upstream
            // answers that the tool needs the extension (-32021), mcpx declares it itself
            // and drives the task (C-C13).
            TasksFlavor::Extension => {
                let mut reply = self
                    .forward(call, up, "tools/call", params, idempotent)
                    .await;
                let needs_extension = matches!(&reply, Err(f)
                    if f.code == mcpx_protocol::error::MISSING_REQUIRED_CLIENT_CAPABILITY
                        && f.data.as_ref().and_then(|d| d.pointer("/requiredCapabilities/extensions"))
                            .and_then(|e| e.get(TASKS_EXTENSION)).is_some());
                if needs_extension && !declares_extension(&call.client_capabilities) {
                    let derived = derive(
                        call,
                        Arc::new(with_extension(&call.client_capabilities)),
                        call.cancel.clone(),
                        call.related_task.clone(),
                    );
                    reply = Box::pin(self.forward(&derived, up, "tools/call", params, idempotent))
                        .await;
                }
                // Most replies are final results: their `resultType` is read as raw text
                // and only a task handle is parsed as a whole.
                let handle = reply
                    .as_ref()
                    .ok()
                    .filter(|r| is_task_handle(r.result.as_str()))
                    .and_then(|r| serde_json::from_str::<Value>(r.result.as_str()).ok());
                match handle
                    .as_ref()
                    .and_then(|h| h.get("taskId").and_then(Value::as_str))
                {
                    Some(id) => First::Upstream {
                        id: id.to_owned(),
                        poll: self.poll_interval(handle.as_ref(), "pollIntervalMs"),
                        conn,
                        flavor: TasksFlavor::Extension,
                    },
                    None => First::Final(reply),
                }
            }
            _ => First::Final(
                self.forward(call, up, "tools/call", params, idempotent)
                    .await,
            ),
        }
    }

    /// The upstream's suggested interval, no shorter than mcpx's own.
    fn poll_interval(&self, task: Option<&Value>, key: &str) -> Duration {
        let ours = self.config().global.task_poll_interval;
        task.and_then(|t| t.get(key))
            .and_then(Value::as_u64)
            .map_or(ours, |u| Duration::from_millis(u).clamp(ours, ours * 20))
    }

    /// Polls an upstream task until it ends. `cancel` asks the upstream to cancel
    /// (`tasks/cancel`) once; with `stop_on_cancel` the result is then `None` at once
    /// (a 2025-11-25 host's task is already cancelled), else polling goes on and the
    /// upstream's terminal status is reported (ext-tasks cooperative cancellation).
    #[allow(clippy::too_many_arguments)]
    async fn task_poll(
        self: &Arc<Self>,
        call: &Call,
        up: &Arc<Upstream>,
        conn: Connection,
        flavor: TasksFlavor,
        id: String,
        poll: Duration,
        cancel: &CancellationToken,
        stop_on_cancel: bool,
    ) -> Option<Result<Reply, Fault>> {
        let facts = conn.facts();
        let name = up.id.to_string();
        let params = Params::of_value(&json!({ "taskId": id }));
        let mut cancel_sent = false;
        // Keys asked of a host that cannot see the task, and answered upstream (keys
        // are unique over a task's life; a poll may list them again before the
        // upstream takes the answer in).
        let mut asked = HashSet::new();
        // ext-tasks §Input Requests: a host that declared the extension answers the
        // upstream task's questions itself, through its gateway task (tasks/get,
        // tasks/update).
        let relays_input = flavor == TasksFlavor::Extension
            && self.tasks.attach(
                call,
                UpstreamTask {
                    upstream: up.clone(),
                    id: id.clone(),
                    conn: conn.clone(),
                },
            );
        // 2025-11-25 §Input Required Status: a core task asks on the session, naming
        // itself with related-task, while it is `input_required`; its asks reach
        // `call`'s host as the call's own would (on the session, naming the host's own
        // gateway task, for a task's work: C-C12), and where the host cannot be asked
        // the upstream hears why.
        let (asks_tx, mut asks_rx) = tokio::sync::mpsc::channel(8);
        let _asks =
            (flavor == TasksFlavor::Core).then(|| conn.route_task_asks(&id, asks_tx.clone()));
        let can_ask = call.host.era() == Era::Legacy && call.peer.is_some();
        let deadline = Instant::now() + self.config().global.task_ttl;
        loop {
            if cancel.is_cancelled() && !cancel_sent {
                cancel_sent = true;
                let _ = conn
                    .call(
                        "tasks/cancel",
                        Some(&params),
                        self.upstream_opts(up, flavor),
                    )
                    .await;
                if stop_on_cancel {
                    return None;
                }
            }
            if Instant::now() > deadline {
                return Some(Err(fault(
                    INTERNAL_ERROR,
                    format!("upstream {name}'s task {id} outlived mcpx.limits.taskTtlMs"),
                    call.host,
                )));
            }
            tokio::select! {
                () = tokio::time::sleep(poll) => {}
                () = cancel.cancelled(), if !cancel_sent => continue,
                Some(ev) = asks_rx.recv() => {
                    let ended = if can_ask {
                        Box::pin(self.on_event(call, &facts, &name, *ev)).await
                    } else {
                        Some(unaskable(call, &name, Some(*ev)))
                    };
                    if let Some(f) = ended {
                        let _ = conn
                            .call("tasks/cancel", Some(&params), self.upstream_opts(up, flavor))
                            .await;
                        return Some(Err(f));
                    }
                    continue;
                }
            }
            let frame = match conn
                .call("tasks/get", Some(&params), self.upstream_opts(up, flavor))
                .await
            {
                Ok(f) => f,
                Err(e) => return Some(Err(self.client_fault(up, e, call.host))),
            };
            if frame.error().is_some() {
                return Some(self.answer(call, &facts, &name, "tasks/get", frame));
            }
            let task: Value = frame
                .result()
                .and_then(|r| serde_json::from_str(r).ok())
                .unwrap_or(Value::Null);
            let status = task
                .get("status")
                .and_then(Value::as_str)
                .and_then(Status::parse);
            match (flavor, status) {
                (_, Some(Status::Cancelled)) => return None,
                (TasksFlavor::Core, Some(Status::Completed | Status::Failed)) => {
                    // §Retrieving Task Results: the result is the underlying request's.
                    let mut opts = self.upstream_opts(up, flavor);
                    opts.timeout = opts.timeout.max(poll * 4);
                    return Some(match conn.call("tasks/result", Some(&params), opts).await {
                        Ok(f) => self.answer(call, &facts, &name, "tools/call", f),
                        Err(e) => Err(self.client_fault(up, e, call.host)),
                    });
                }
                (_, Some(Status::Completed)) => {
                    let result = task.get("result").cloned().unwrap_or_else(|| json!({}));
                    return Some(Ok(Reply {
                        result: Json::of_value(&result),
                        revision: facts.revision,
                    }));
                }
                (_, Some(Status::Failed)) => {
                    let e = task.get("error");
                    return Some(Err(Fault {
                        code: e
                            .and_then(|e| e.get("code"))
                            .and_then(Value::as_i64)
                            .unwrap_or(INTERNAL_ERROR),
                        message: format!(
                            "upstream {name}: {}",
                            e.and_then(|e| e.get("message"))
                                .and_then(Value::as_str)
                                .unwrap_or("the task failed")
                        ),
                        data: e.and_then(|e| e.get("data")).cloned(),
                        from: facts.revision,
                        input_validation: false,
                    }));
                }
                (_, Some(Status::InputRequired)) if relays_input => {
                    let mut requests = match task.get("inputRequests") {
                        Some(Value::Object(r)) => r.clone(),
                        _ => Map::new(),
                    };
                    self.relabel_requests(&name, &mut requests);
                    self.tasks.surface(call, requests);
                }
                (TasksFlavor::Extension, Some(Status::InputRequired)) => {
                    // A host that cannot see the task is asked its questions itself.
                    if let Err(f) =
                        Box::pin(self.ask_for_task(call, up, &conn, &id, &task, &mut asked)).await
                    {
                        let _ = conn
                            .call(
                                "tasks/cancel",
                                Some(&params),
                                self.upstream_opts(up, flavor),
                            )
                            .await;
                        return Some(Err(f));
                    }
                }
                // §Input Required Status: "the requestor SHOULD preemptively call
                // tasks/result"; the task's asks come on its stream or on the session
                // (both relayed), and its answer is the task's result.
                (TasksFlavor::Core, Some(Status::InputRequired)) if can_ask => {
                    let outcome = Box::pin(self.core_task_result(
                        call,
                        up,
                        &conn,
                        &params,
                        (&asks_tx, &mut asks_rx),
                        cancel,
                        deadline,
                    ))
                    .await;
                    match outcome {
                        Ok(f) => return Some(self.answer(call, &facts, &name, "tools/call", f)),
                        // The loop's top asks the upstream to cancel.
                        Err(None) => {}
                        Err(Some(f)) => {
                            let _ = conn
                                .call(
                                    "tasks/cancel",
                                    Some(&params),
                                    self.upstream_opts(up, flavor),
                                )
                                .await;
                            return Some(Err(f));
                        }
                    }
                }
                (_, Some(Status::InputRequired)) => {
                    let _ = conn
                        .call(
                            "tasks/cancel",
                            Some(&params),
                            self.upstream_opts(up, flavor),
                        )
                        .await;
                    return Some(Err(unaskable(call, &name, None)));
                }
                (_, Some(Status::Working)) => {
                    if relays_input {
                        self.tasks.surface(call, Map::new());
                    }
                }
                (_, None) => {
                    return Some(Err(fault(
                        INTERNAL_ERROR,
                        format!("upstream {name}: tasks/get answered without a valid status"),
                        call.host,
                    )));
                }
            }
        }
    }

    /// A 2025-11-25 upstream task is `input_required`: its `tasks/result`, with the
    /// task's asks (on that request's stream or, routed by related-task, on the
    /// session) relayed to `call`'s host meanwhile. `Err(None)`: cancelled by the host;
    /// `Err(Some(_))`: the call ends with that fault.
    #[allow(clippy::too_many_arguments)]
    async fn core_task_result(
        self: &Arc<Self>,
        call: &Call,
        up: &Arc<Upstream>,
        conn: &Connection,
        params: &Params,
        (asks_tx, asks_rx): (
            &tokio::sync::mpsc::Sender<Box<CallEvent>>,
            &mut tokio::sync::mpsc::Receiver<Box<CallEvent>>,
        ),
        cancel: &CancellationToken,
        deadline: Instant,
    ) -> Result<Frame, Option<Fault>> {
        let facts = conn.facts();
        let name = up.id.as_str();
        let left = deadline.saturating_duration_since(Instant::now());
        let opts = CallOptions {
            events: Some(asks_tx.clone()),
            cancel: cancel.clone(),
            // It blocks until the task ends, which may wait on a person: the task's
            // lifetime bounds it, not a call's.
            timeout: left,
            max_time: left,
            ..self.upstream_opts(up, TasksFlavor::Core)
        };
        let fut = conn.call("tasks/result", Some(params), opts);
        tokio::pin!(fut);
        // Put to the host side by side (see `Asks`); what is open when the result
        // comes is moot.
        let mut asks = Asks::default();
        let outcome = loop {
            tokio::select! {
                biased;
                () = asks.next(), if asks.started() => {}
                Some(ev) = asks_rx.recv() => {
                    if let Some(f) = Box::pin(self.on_event_beside(call, &facts, name, *ev, &mut asks)).await {
                        return Err(Some(f));
                    }
                }
                r = &mut fut => break r,
            }
        };
        drop(asks);
        match outcome {
            Ok(f) => Ok(f),
            Err(ClientError::Cancelled { .. }) => Err(None),
            Err(e) => Err(Some(self.client_fault(up, e, call.host))),
        }
    }

    /// A 2026-07-28 upstream task is `input_required` and `call`'s host cannot see its
    /// requests (the host did not declare the extension, so mcpx drives the task for
    /// its call): a legacy host is asked each request not asked before, as a request of
    /// its own revision on that call, and the answers go to the upstream task with
    /// `tasks/update` (ext-tasks §Task Update Requests). A 2026-07-28 host cannot be
    /// asked in the middle of a call: the call fails. (A 2025-11-25 host's own tasks
    /// never reach here: a 2026-07-28 upstream's tools declare no task support, so such
    /// a host calls them plainly.)
    async fn ask_for_task(
        self: &Arc<Self>,
        call: &Call,
        up: &Arc<Upstream>,
        conn: &Connection,
        id: &str,
        task: &Value,
        asked: &mut HashSet<String>,
    ) -> Result<(), Fault> {
        let name = up.id.as_str();
        if call.host.era() == mcpx_protocol::Era::Modern {
            return Err(fault(
                INTERNAL_ERROR,
                format!(
                    "upstream {name}'s task needs input from the client; a {} client is asked a task's questions only when it declares {TASKS_EXTENSION}",
                    call.host
                ),
                call.host,
            ));
        }
        let responses = match task.get("inputRequests") {
            Some(Value::Object(requests)) => {
                let open = requests.iter().filter(|(k, _)| !asked.contains(*k));
                self.ask_legacy_host_all(call, name, open).await?
            }
            _ => return Ok(()),
        };
        if responses.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = responses.keys().cloned().collect();
        self.update_upstream(call, up, conn, id, responses).await?;
        asked.extend(keys);
        Ok(())
    }

    /// Sends `responses` to upstream `i`'s task `id` (ext-tasks §Task Update
    /// Requests); its refusal is `call`'s host's error.
    async fn update_upstream(
        &self,
        call: &Call,
        up: &Arc<Upstream>,
        conn: &Connection,
        id: &str,
        responses: Map<String, Value>,
    ) -> Result<(), Fault> {
        let p = Params::of_value(&json!({ "taskId": id, "inputResponses": responses }));
        let frame = conn
            .call(
                "tasks/update",
                Some(&p),
                self.upstream_opts(up, TasksFlavor::Extension),
            )
            .await
            .map_err(|e| self.client_fault(up, e, call.host))?;
        if frame.error().is_some() {
            // An error frame is always the upstream's refusal, for the host.
            self.answer(call, &conn.facts(), up.id.as_str(), "tasks/update", frame)?;
        }
        Ok(())
    }

    /// Creates a gateway task whose work is `work`, and answers with its handle.
    fn task_spawn(
        self: &Arc<Self>,
        call: &Call,
        owner: Owner,
        ttl: Duration,
        work: Work,
    ) -> Result<Reply, Fault> {
        let config = self.config();
        let g = &config.global;
        let (id, task, cancel) = self.tasks.create(
            owner.clone(),
            ttl,
            g.max_tasks,
            g.task_poll_interval,
            call.host,
        )?;
        let tcall = derive(
            call,
            call.client_capabilities.clone(),
            cancel.clone(),
            Some(id.clone()),
        );
        let gw = self.clone();
        let stop_on_cancel = matches!(owner, Owner::Core(_));
        let task_id = id.clone();
        tokio::spawn(async move {
            let first = match work {
                Work::Start {
                    up,
                    params,
                    idempotent,
                    support,
                } => {
                    let first = gw
                        .task_start(&tcall, &up, &params, idempotent, support)
                        .await;
                    (up, first)
                }
                Work::Adopt { up, first } => (up, first),
            };
            let outcome = match first {
                (_, First::Final(r)) => Some(r).filter(|_| !cancel.is_cancelled()),
                (
                    up,
                    First::Upstream {
                        conn,
                        flavor,
                        id,
                        poll,
                    },
                ) => {
                    gw.task_poll(&tcall, &up, conn, flavor, id, poll, &cancel, stop_on_cancel)
                        .await
                }
            };
            gw.tasks.finish(&task_id, outcome);
        });
        let result = match owner {
            Owner::Core(_) => json!({ "task": task }),
            Owner::Extension => {
                let mut t = task;
                t["resultType"] = json!("task");
                t
            }
        };
        Ok(Reply {
            result: Json::of_value(&result),
            revision: call.host,
        })
    }
}

/// The work of a new gateway task.
enum Work {
    /// Start the upstream call.
    Start {
        up: Arc<Upstream>,
        params: Params,
        idempotent: bool,
        support: TaskSupport,
    },
    /// Carry on with an upstream call already started.
    Adopt { up: Arc<Upstream>, first: First },
}

fn session_key(call: &Call) -> String {
    call.peer
        .as_ref()
        .and_then(|p| p.session_id())
        .unwrap_or_default()
        .to_owned()
}

/// `tools/call` from a host of any revision.
pub(super) async fn tools_call(gw: &Arc<Gateway>, call: &Call) -> Result<Reply, Fault> {
    let super::Routed {
        upstream: up,
        exposed,
        params,
        tool: super::ToolFacts {
            idempotent,
            support,
        },
    } = match gw.route_name(call, false) {
        Ok(r) => r,
        // Boxed: the exception's future stays out of every call's.
        Err(f) => Box::pin(gw.route_once_started(call, false, f)).await?,
    };
    // The host's `task` is mcpx's to act on; upstreams get mcpx's own (E-17, H13).
    // Most calls carry none: their params go on as they are, without a parse.
    let (asked, params) = if params.member("task").is_some() {
        let mut p: Value = serde_json::from_str(&params).unwrap_or_else(|_| json!({}));
        let asked = p.get("task").filter(|t| t.is_object()).cloned();
        if let Some(o) = p.as_object_mut() {
            o.remove("task");
        }
        (asked, std::borrow::Cow::Owned(Params::of_value(&p)))
    } else {
        (None, params)
    };
    let config = gw.config();
    let g = &config.global;
    match call.host.facts().tasks {
        TasksFlavor::Core => {
            // C-C10: 2025-11-25 §Tool-Level Negotiation, -32601 both ways.
            if asked.is_some() && !support.allows_task() {
                return Err(fault(
                    METHOD_NOT_FOUND,
                    format!(
                        "{exposed} does not support task-augmented calls (execution.taskSupport)"
                    ),
                    call.host,
                ));
            }
            if asked.is_none() && support == TaskSupport::Required {
                return Err(fault(
                    METHOD_NOT_FOUND,
                    format!(
                        "{exposed} must be called as a task (execution.taskSupport is \"required\")"
                    ),
                    call.host,
                ));
            }
            if let Some(t) = asked {
                let ttl = t
                    .get("ttl")
                    .and_then(Value::as_u64)
                    .map_or(g.task_ttl, |v| Duration::from_millis(v).min(g.task_ttl));
                let work = Work::Start {
                    up: up.clone(),
                    // A task outlives the call: it owns its params.
                    params: params.into_owned(),
                    idempotent,
                    support,
                };
                return gw.task_spawn(call, Owner::Core(session_key(call)), ttl, work);
            }
        }
        // C-C13: handles only for a request that declared the extension.
        TasksFlavor::Extension if declares_extension(&call.client_capabilities) => {
            if support.allows_task() {
                let work = Work::Start {
                    up: up.clone(),
                    // A task outlives the call: it owns its params.
                    params: params.into_owned(),
                    idempotent,
                    support,
                };
                return gw.task_spawn(call, Owner::Extension, g.task_ttl, work);
            }
            return match gw.task_start(call, &up, &params, idempotent, support).await {
                First::Final(r) => r.map(clean),
                first @ First::Upstream { .. } => gw.task_spawn(
                    call,
                    Owner::Extension,
                    g.task_ttl,
                    Work::Adopt {
                        up: up.clone(),
                        first,
                    },
                ),
            };
        }
        _ => {}
    }
    // Everyone else: the final result, whatever the upstream made of it.
    match gw.task_start(call, &up, &params, idempotent, support).await {
        First::Final(r) => r.map(clean),
        First::Upstream {
            conn,
            flavor,
            id,
            poll,
        } => Box::pin(gw.task_poll(call, &up, conn, flavor, id, poll, &call.cancel, true))
            .await
            .map(|r| r.map(clean))
            .unwrap_or_else(|| {
                Err(fault(
                    INTERNAL_ERROR,
                    "the upstream task was cancelled".into(),
                    call.host,
                ))
            }),
    }
}

/// `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel` (2025-11-25) and
/// `tasks/get`, `tasks/update`, `tasks/cancel` (extension; the seam has checked the
/// request declared it).
pub(super) async fn method(gw: &Arc<Gateway>, call: &Call) -> Result<Reply, Fault> {
    let host = call.host;
    let owner = match host.facts().tasks {
        TasksFlavor::Core => Owner::Core(session_key(call)),
        TasksFlavor::Extension => Owner::Extension,
        TasksFlavor::None => {
            return Err(fault(
                METHOD_NOT_FOUND,
                format!("method not found: {}", call.method),
                host,
            ));
        }
    };
    let poll = gw.config().global.task_poll_interval;
    let params: Value = call
        .params
        .as_deref()
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or_else(|| json!({}));
    let reply = |v: Value| {
        Ok(Reply {
            result: Json::of_value(&v),
            revision: host,
        })
    };
    if call.method == "tasks/list" {
        let page = gw.config().global.page_size.max(1);
        let start = match params.get("cursor") {
            None => 0,
            Some(c) => c
                .as_str()
                .and_then(|c| c.strip_prefix("mcpxt:"))
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| fault(INVALID_PARAMS, format!("invalid cursor {c}"), host))?,
        };
        let mut map = gw.tasks.map.lock();
        Store::purge(&mut map);
        let mut mine: Vec<(&String, &Entry)> =
            map.iter().filter(|(_, e)| e.owner == owner).collect();
        mine.sort_by(|a, b| a.1.born.cmp(&b.1.born).then(a.0.cmp(b.0)));
        if start > mine.len() {
            return Err(fault(INVALID_PARAMS, "cursor past the end".into(), host));
        }
        let end = (start + page).min(mine.len());
        let tasks: Vec<Value> = mine[start..end]
            .iter()
            .map(|(id, e)| task_json(id, e, poll))
            .collect();
        let mut out = json!({ "tasks": tasks });
        if end < mine.len() {
            out["nextCursor"] = json!(format!("mcpxt:{end}"));
        }
        return reply(out);
    }
    // C-C12: params.taskId names the task; a related-task in _meta is ignored.
    let id = params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| fault(INVALID_PARAMS, "params.taskId is required".into(), host))?
        .to_owned();
    if call.method == "tasks/update" {
        return update(gw, call, &id, &params, &owner).await;
    }
    let mut changed = {
        let mut map = gw.tasks.map.lock();
        Store::purge(&mut map);
        let e = map
            .get_mut(&id)
            .filter(|e| e.owner == owner)
            .ok_or_else(|| not_found(&id, host))?;
        match call.method.as_str() {
            "tasks/get" => {
                let mut t = task_json(&id, e, poll);
                if owner == Owner::Extension {
                    // ext-tasks §Task Polling: completed inlines result, failed error.
                    match &e.outcome {
                        Some(Ok(r)) if e.status == Status::Completed => {
                            let lowered =
                                lower_result("tools/call", r.result.as_str(), r.revision, host)
                                    .map_err(|x| fault(INTERNAL_ERROR, x.to_string(), host))?;
                            t["result"] = serde_json::from_str(&lowered).unwrap_or_default();
                        }
                        Some(Err(f)) if e.status == Status::Failed => {
                            let mut err = json!({
                                "code": translate_code(f.code, "tools/call", f.from, host),
                                "message": f.message,
                            });
                            if let Some(d) = &f.data {
                                err["data"] = d.clone();
                            }
                            t["error"] = err;
                        }
                        // §Task Polling: all outstanding requests (MUST).
                        _ if e.status == Status::InputRequired && !e.inputs.is_empty() => {
                            t["inputRequests"] = Value::Object(e.inputs.clone());
                        }
                        _ => {}
                    }
                }
                return reply(t);
            }
            "tasks/cancel" => {
                if owner == Owner::Extension {
                    // ext-tasks §Task Cancellation: an acknowledgement; the task ends as
                    // the work really ends (C-C11).
                    e.cancel.cancel();
                    return reply(json!({}));
                }
                if e.status.is_terminal() {
                    // 2025-11-25 §Task Cancellation: MUST reject with -32602.
                    return Err(fault(
                        INVALID_PARAMS,
                        format!(
                            "Cannot cancel task: already in terminal status '{}'",
                            e.status.as_str()
                        ),
                        host,
                    ));
                }
                // MUST transition to cancelled before sending the response.
                e.status = Status::Cancelled;
                e.message = Some("The task was cancelled by request.".to_owned());
                e.updated = now_ms();
                e.cancel.cancel();
                e.changed.send_replace(Status::Cancelled);
                return reply(task_json(&id, e, poll));
            }

            "tasks/result" => e.changed.subscribe(),
            other => {
                return Err(fault(
                    METHOD_NOT_FOUND,
                    format!("method not found: {other}"),
                    host,
                ));
            }
        }
    };
    // tasks/result blocks until the task is terminal (§Retrieving Task Results).
    while !changed.borrow_and_update().is_terminal() {
        tokio::select! {
            () = call.cancel.cancelled() => {
                return Err(fault(INTERNAL_ERROR, "cancelled".into(), host));
            }
            r = changed.changed() => if r.is_err() { return Err(not_found(&id, host)) },
        }
    }
    let outcome = {
        let map = gw.tasks.map.lock();
        map.get(&id)
            .ok_or_else(|| not_found(&id, host))?
            .outcome
            .clone()
    };
    match outcome {
        Some(Ok(r)) => {
            let lowered = lower_result("tools/call", r.result.as_str(), r.revision, host)
                .map_err(|x| fault(INTERNAL_ERROR, x.to_string(), host))?;
            let mut v: Value = serde_json::from_str(&lowered).unwrap_or_else(|_| json!({}));
            // §Related Task Metadata: tasks/result MUST carry it (C-C12).
            if let Some(o) = v.as_object_mut()
                && let Some(m) = o
                    .entry("_meta")
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
            {
                m.insert(meta::RELATED_TASK.to_owned(), json!({ "taskId": id }));
            }
            reply(v)
        }
        // "If the underlying request resulted in a JSON-RPC error, tasks/result MUST
        // return that same JSON-RPC error."
        Some(Err(f)) => Err(f),
        None => Err(fault(
            INVALID_PARAMS,
            format!("task {id} was cancelled and has no result"),
            host,
        )),
    }
}

/// ext-tasks §Task Update Requests: the host's answers to the outstanding requests of
/// its task go to the upstream task they came from; responses to keys not outstanding
/// (never issued, answered before, or of a task that never asked) are ignored (SHOULD).
/// The upstream's refusal is the host's error; once it acknowledges, the keys are
/// answered and the task is `working` again when none is left (the ack is empty).
async fn update(
    gw: &Arc<Gateway>,
    call: &Call,
    id: &str,
    params: &Value,
    owner: &Owner,
) -> Result<Reply, Fault> {
    let host = call.host;
    let ack = || {
        Ok(Reply {
            result: Json::of_value(&json!({})),
            revision: host,
        })
    };
    let Some(responses) = params.get("inputResponses").and_then(Value::as_object) else {
        return Err(fault(
            INVALID_PARAMS,
            "params.inputResponses must be an object mapping input keys to responses".into(),
            host,
        ));
    };
    let (up, open) = {
        let mut map = gw.tasks.map.lock();
        Store::purge(&mut map);
        let e = map
            .get(id)
            .filter(|e| &e.owner == owner)
            .ok_or_else(|| not_found(id, host))?;
        let open: Map<String, Value> = responses
            .iter()
            .filter(|(k, _)| e.inputs.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        match &e.upstream {
            Some(up) if !open.is_empty() => (up.clone(), open),
            _ => return ack(),
        }
    };
    let keys: Vec<String> = open.keys().cloned().collect();
    gw.update_upstream(call, &up.upstream, &up.conn, &up.id, open)
        .await?;
    let mut map = gw.tasks.map.lock();
    if let Some(e) = map.get_mut(id) {
        for k in keys {
            e.inputs.remove(&k);
            e.answered.insert(k);
        }
        if e.inputs.is_empty() && e.status == Status::InputRequired {
            e.status = Status::Working;
            e.updated = now_ms();
            e.changed.send_replace(Status::Working);
        }
    }
    drop(map);
    ack()
}

#[cfg(test)]
mod tests {
    use super::is_task_handle;

    #[test]
    fn a_task_handle_is_told_by_its_top_level_result_type_alone() {
        assert!(is_task_handle(r#"{"resultType":"task","taskId":"t1"}"#));
        assert!(is_task_handle(
            r#"{ "taskId":"t1", "resultType" : "t\u0061sk" }"#
        ));
        assert!(!is_task_handle(r#"{"resultType":"complete","content":[]}"#));
        assert!(!is_task_handle(
            r#"{"content":[{"type":"text","text":"x"}]}"#
        ));
        // A nested resultType is the tool's content, not the result's envelope.
        assert!(!is_task_handle(
            r#"{"structuredContent":{"resultType":"task"},"content":[]}"#
        ));
        assert!(!is_task_handle(r#"{"resultType":7}"#));
        // "task" elsewhere in the text: the walk decides.
        assert!(!is_task_handle(
            r#"{"content":[{"type":"text","text":"task"}],"resultType":"complete"}"#
        ));
        assert!(is_task_handle(
            r#"{"content":[{"type":"text","text":"task"}],"resultType":"task"}"#
        ));
    }
}
