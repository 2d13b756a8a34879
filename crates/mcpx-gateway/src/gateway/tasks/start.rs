//! A host's `tools/call` and the work it starts: the upstream side of the call (an
//! upstream task where the upstream requires or returns one, else the plain call),
//! and a gateway task spawned to carry it on.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use mcpx_client::{CallOptions, ClientError, Connection, ServerFacts};
use mcpx_protocol::Params;
use mcpx_protocol::error::MISSING_REQUIRED_CLIENT_CAPABILITY;
use mcpx_protocol::jsonrpc::Json;
use mcpx_protocol::method::TASKS_EXTENSION;
use mcpx_protocol::revision::TasksFlavor;
use mcpx_protocol::task::{TaskSupport, declares_extension};
use mcpx_server::{Call, Fault, Reply};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::poll::{Outcome, Poll};
use super::shape::{clean, is_task_handle};
use super::store::{Created, Owner, ms};
use super::{session_key, upstream_flavor};
use crate::catalog::ToolFacts;
use crate::error::GatewayError;
use crate::gateway::{Gateway, Routed, Upstream, no_capabilities};

/// What starting the upstream call gave.
enum First {
    /// The final answer.
    Final(Result<Reply, Fault>),
    /// The upstream made a task of it: poll it.
    Upstream(Poll),
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
    /// Carry on with an upstream task already started.
    Adopt(Poll),
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

/// Options for mcpx's own requests to `up` about a task of `flavor` (the extension
/// declared for an ext-tasks upstream), bounded by `up`'s `callTimeoutMs` and
/// `max_time` (`maxCallTimeMs`).
pub(super) fn upstream_opts(up: &Upstream, flavor: TasksFlavor, max_time: Duration) -> CallOptions {
    CallOptions {
        client_capabilities: if flavor == TasksFlavor::Extension {
            Arc::new(with_extension(&json!({})))
        } else {
            no_capabilities()
        },
        timeout: up.config.mcpx.call_timeout,
        max_time,
        ..CallOptions::default()
    }
}

/// The error of a client error on `up`: a reload that replaced or removed `up` says
/// so (its connection, and the upstream task on it, are gone).
pub(super) fn client_fault(up: &Upstream, e: ClientError) -> GatewayError {
    if !up.is_current() {
        return GatewayError::Removed {
            upstream: up.id.clone(),
        };
    }
    GatewayError::Client(e)
}

/// The upstream's suggested interval (`key` of its `task`), no shorter than mcpx's
/// own (`ours`) and at most 20 times it.
fn poll_interval(task: Option<&Value>, key: &str, ours: Duration) -> Duration {
    task.and_then(|t| t.get(key))
        .and_then(Value::as_u64)
        .map_or(ours, |u| Duration::from_millis(u).clamp(ours, ours * 20))
}

/// Takes the host's `task` out of a `tools/call`'s params: it is mcpx's to act on,
/// and upstreams get mcpx's own (E-17, H13). Most calls carry none: their params go
/// on as they are, without a parse.
fn take_task(params: Cow<'_, Params>) -> (Option<Value>, Cow<'_, Params>) {
    if params.member("task").is_none() {
        return (None, params);
    }
    let mut p: Value = serde_json::from_str(&params).unwrap_or_else(|_| json!({}));
    let asked = p.get("task").filter(|t| t.is_object()).cloned();
    if let Some(o) = p.as_object_mut() {
        o.remove("task");
    }
    (asked, Cow::Owned(Params::of_value(&p)))
}

/// `tools/call` from a host of any revision.
pub(in crate::gateway) async fn tools_call(gw: &Arc<Gateway>, call: &Call) -> Result<Reply, Fault> {
    let Routed {
        upstream: up,
        exposed,
        params,
        tool: ToolFacts {
            idempotent,
            support,
        },
    } = match gw.route_name(call, false) {
        Ok(r) => r,
        // Boxed: the exception's future stays out of every call's.
        Err(f) => Box::pin(gw.route_once_started(call, false, f)).await?,
    };
    let (asked, params) = take_task(params);
    let host = call.host;
    let ttl = gw.config().global.task_ttl;
    let work = |params: Cow<'_, Params>| Work::Start {
        up: up.clone(),
        // A task outlives the call: it owns its params.
        params: params.into_owned(),
        idempotent,
        support,
    };
    match host.facts().tasks {
        TasksFlavor::Core => {
            // C-C10: 2025-11-25 §Tool-Level Negotiation, -32601 both ways.
            if asked.is_some() && !support.allows_task() {
                return Err(GatewayError::TaskUnsupported(exposed.into_owned()).to_fault(host));
            }
            if asked.is_none() && support == TaskSupport::Required {
                return Err(GatewayError::TaskRequired(exposed.into_owned()).to_fault(host));
            }
            if let Some(t) = asked {
                let ttl = t
                    .get("ttl")
                    .and_then(Value::as_u64)
                    .map_or(ttl, |v| Duration::from_millis(v).min(ttl));
                return spawn(gw, call, Owner::Core(session_key(call)), ttl, work(params));
            }
        }
        // C-C13: handles only for a request that declared the extension.
        TasksFlavor::Extension if declares_extension(&call.client_capabilities) => {
            if support.allows_task() {
                return spawn(gw, call, Owner::Extension, ttl, work(params));
            }
            return match start(gw, call, &up, &params, idempotent, support).await {
                First::Final(r) => r.map(clean),
                First::Upstream(p) => spawn(gw, call, Owner::Extension, ttl, Work::Adopt(p)),
            };
        }
        _ => {}
    }
    // Everyone else: the final result, whatever the upstream made of it.
    match start(gw, call, &up, &params, idempotent, support).await {
        First::Final(r) => r.map(clean),
        First::Upstream(p) => Box::pin(p.run(gw, call, &gw.tasks, &call.cancel, true))
            .await
            .map(|r| r.map(clean))
            .unwrap_or_else(|| Err(GatewayError::UpstreamTaskCancelled.to_fault(host))),
    }
}

/// Starts the upstream side of a `tools/call`: an upstream task where the upstream
/// requires or returns one, else the plain call.
async fn start(
    gw: &Arc<Gateway>,
    call: &Call,
    up: &Arc<Upstream>,
    params: &Params,
    idempotent: bool,
    support: TaskSupport,
) -> First {
    // Taken once: the call runs on the connection whose facts chose its way.
    let (generation, conn) = match up.live() {
        Some(c) => c,
        None => match Box::pin(up.connection_slow()).await {
            Ok(c) => c,
            Err(e) => return First::Final(Err(e.to_fault(call.host))),
        },
    };
    let facts = conn.facts();
    match upstream_flavor(&facts) {
        // 2025-11-25 §Tool-Level Negotiation: a "required" tool MUST be invoked as a
        // task; "optional" ones are called plainly (progress and asks stay live).
        TasksFlavor::Core if support == TaskSupport::Required => {
            start_core(gw, call, up, conn, &facts, params).await
        }
        // ext-tasks: mcpx always declares the extension to an upstream that has it,
        // so a tool that needs a task still runs for hosts without it (C-C13).
        TasksFlavor::Extension => {
            start_extension(gw, call, up, (generation, conn), params, idempotent).await
        }
        _ => {
            let taken = Some((generation, conn));
            First::Final(
                gw.forward(call, up, taken, "tools/call", params, idempotent)
                    .await,
            )
        }
    }
}

/// A 2025-11-25 upstream's `required` tool: a task-augmented `tools/call`.
async fn start_core(
    gw: &Arc<Gateway>,
    call: &Call,
    up: &Arc<Upstream>,
    conn: Connection,
    facts: &ServerFacts,
    params: &Params,
) -> First {
    let mut p: Value = serde_json::from_str(params).unwrap_or_else(|_| json!({}));
    p["task"] = json!({ "ttl": ms(gw.config().global.task_ttl) });
    let max_time = gw.config().global.max_call_time;
    let mut opts = upstream_opts(up, TasksFlavor::Core, max_time);
    opts.cancel = call.cancel.clone();
    opts.progress = call.progress.is_some();
    // Boxed, as every rarer branch on a call's path: a future is as large as its
    // largest branch, and a call's is moved and allocated on every call.
    let frame = match Box::pin(conn.call("tools/call", Some(&Params::of_value(&p)), opts)).await {
        Ok(f) => f,
        Err(e) => return First::Final(Err(client_fault(up, e).to_fault(call.host))),
    };
    let task = frame
        .result()
        .and_then(|r| serde_json::from_str::<Value>(r).ok())
        .and_then(|v| v.get("task").cloned());
    match task
        .as_ref()
        .and_then(|t| t.get("taskId").and_then(Value::as_str))
    {
        Some(id) => {
            let ours = gw.config().global.task_poll_interval;
            let interval = poll_interval(task.as_ref(), "pollInterval", ours);
            let flavor = TasksFlavor::Core;
            First::Upstream(Poll::new(up.clone(), conn, flavor, id.to_owned(), interval))
        }
        None => First::Final(gw.answer(call, facts, up.id.as_str(), "tools/call", frame)),
    }
}

/// A 2026-07-28 upstream's tool: the host's capabilities go up as declared (A-C16);
/// when the upstream answers that the tool needs the extension (-32021), mcpx declares
/// it itself and drives the task (C-C13).
async fn start_extension(
    gw: &Arc<Gateway>,
    call: &Call,
    up: &Arc<Upstream>,
    (generation, conn): (u64, Connection),
    params: &Params,
    idempotent: bool,
) -> First {
    let taken = Some((generation, conn.clone()));
    let mut reply = gw
        .forward(call, up, taken, "tools/call", params, idempotent)
        .await;
    let needs_extension = matches!(&reply, Err(f)
        if f.code == MISSING_REQUIRED_CLIENT_CAPABILITY
            && f.data.as_ref().and_then(|d| d.pointer("/requiredCapabilities/extensions"))
                .and_then(|e| e.get(TASKS_EXTENSION)).is_some());
    if needs_extension && !declares_extension(&call.client_capabilities) {
        let derived = derive(
            call,
            Arc::new(with_extension(&call.client_capabilities)),
            call.cancel.clone(),
            call.related_task.clone(),
        );
        let taken = Some((generation, conn.clone()));
        reply = Box::pin(gw.forward(&derived, up, taken, "tools/call", params, idempotent)).await;
    }
    // Most replies are final results: their `resultType` is read as raw text and only
    // a task handle is parsed as a whole.
    let handle = reply
        .as_ref()
        .ok()
        .filter(|r| is_task_handle(r.result.as_str()))
        .and_then(|r| serde_json::from_str::<Value>(r.result.as_str()).ok());
    match handle
        .as_ref()
        .and_then(|h| h.get("taskId").and_then(Value::as_str))
    {
        Some(id) => {
            let ours = gw.config().global.task_poll_interval;
            let interval = poll_interval(handle.as_ref(), "pollIntervalMs", ours);
            let flavor = TasksFlavor::Extension;
            First::Upstream(Poll::new(up.clone(), conn, flavor, id.to_owned(), interval))
        }
        None => First::Final(reply),
    }
}

/// Creates a gateway task whose work is `work`, and answers with its handle.
fn spawn(
    gw: &Arc<Gateway>,
    call: &Call,
    owner: Owner,
    ttl: Duration,
    work: Work,
) -> Result<Reply, Fault> {
    let config = gw.config();
    let g = &config.global;
    let Created { id, task, cancel } = gw
        .tasks
        .create(owner.clone(), ttl, g.max_tasks, g.task_poll_interval)
        .map_err(|e| e.to_fault(call.host))?;
    let tcall = derive(
        call,
        call.client_capabilities.clone(),
        cancel.clone(),
        Some(id.clone()),
    );
    let stop_on_cancel = matches!(owner, Owner::Core(_));
    let gw = gw.clone();
    tokio::spawn(async move {
        let outcome = run(&gw, &tcall, work, &cancel, stop_on_cancel).await;
        gw.tasks.finish(&id, outcome);
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

/// A gateway task's work, `call` its copy of the host's request, to its end.
async fn run(
    gw: &Arc<Gateway>,
    call: &Call,
    work: Work,
    cancel: &CancellationToken,
    stop_on_cancel: bool,
) -> Outcome {
    let first = match work {
        Work::Start {
            up,
            params,
            idempotent,
            support,
        } => start(gw, call, &up, &params, idempotent, support).await,
        Work::Adopt(p) => First::Upstream(p),
    };
    match first {
        First::Final(r) => Some(r).filter(|_| !cancel.is_cancelled()),
        First::Upstream(p) => p.run(gw, call, &gw.tasks, cancel, stop_on_cancel).await,
    }
}
