//! Gateway tasks (register H13; also C-C10, C-C11, C-C12, C-C13, E-17).
//!
//! The task store holds every task a host sees. Each is mcpx's own: a random 128-bit
//! id, an owner, a status, and the outcome of its work. The store is bounded by
//! `mcpx.limits.maxTasks`, and a task is kept `taskTtlMs` from its creation. The work
//! is a spawned driver that brings the upstream call to its end:
//!
//! * a plain `tools/call` to the upstream (any revision);
//! * a 2025-11-25 upstream's task (a tool with `execution.taskSupport: "required"`):
//!   task-augmented `tools/call`, `tasks/get` every poll interval, then `tasks/result`;
//!   cancellation is `tasks/cancel` (2025-11-25 basic/utilities/tasks);
//! * a 2026-07-28 upstream's task (the host's declaration, or mcpx's own after a -32021
//!   naming the extension): `tasks/get` until terminal, the result or error inlined;
//!   cancellation is `tasks/cancel` (the ext-tasks extension, 2026-07-28).
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
//!
//! # Files
//!
//! * `store.rs`: [`Store`], the task store. It owns its entries and its lock; the
//!   rest of the module uses its methods.
//! * `start.rs`: `tools_call`, the upstream side of a call, and spawning a gateway
//!   task with its work.
//! * `poll.rs`: `Poll`, one upstream task driven to its end (`tasks/get`, its asks,
//!   `tasks/cancel`, `tasks/result`, `tasks/update`).
//! * `methods.rs`: `method`, the host's `tasks/*` requests, with typed params.
//! * `shape.rs`: what hosts and upstreams see of tasks (tool lists, asks, answers,
//!   final results).
//! * This file: how an upstream runs tasks, and whether mcpx offers them.
//!
//! Nothing here is an `impl Gateway`. Where a task drives the call path or the ask
//! bridge, it calls the gateway's methods for them (`forward`, `answer`, `on_event`,
//! `on_event_beside`, `ask_legacy_host_all`, `relabel_requests`, `route_name`).

mod methods;
mod poll;
mod shape;
mod start;
mod store;

use std::sync::Arc;

use mcpx_client::ServerFacts;
use mcpx_protocol::method::TASKS_EXTENSION;
use mcpx_protocol::revision::TasksFlavor;
use mcpx_server::Call;

pub(super) use methods::method;
pub(super) use shape::{answer_upstream, ask_params, shape_tools, strip_ask_task};
pub(super) use start::tools_call;
pub(super) use store::Store;

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

/// The session a 2025-11-25 host's tasks are bound to (`""` without one).
pub(super) fn session_key(call: &Call) -> String {
    call.peer
        .as_ref()
        .and_then(|p| p.session_id())
        .unwrap_or_default()
        .to_owned()
}
