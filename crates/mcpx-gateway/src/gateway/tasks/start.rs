//! Starting a task's work: the upstream side of a `tools/call`, and a gateway task
//! spawned to carry it on.

use std::sync::Arc;
use std::time::Duration;

use mcpx_client::{CallOptions, ClientError, Connection};
use mcpx_protocol::error::{INTERNAL_ERROR, METHOD_NOT_FOUND};
use mcpx_protocol::jsonrpc::Json;
use mcpx_protocol::method::TASKS_EXTENSION;
use mcpx_protocol::revision::TasksFlavor;
use mcpx_protocol::task::{TaskSupport, declares_extension};
use mcpx_protocol::{Params, Revision};
use mcpx_server::{Call, Fault, Reply};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::shape::{clean, is_task_handle};
use super::store::{Owner, ms};
use super::{session_key, upstream_flavor};
use crate::gateway::{Gateway, GatewayError, Upstream, fault};

/// What starting the upstream call gave.
pub(super) enum First {
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
pub(super) fn derive(
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
    pub(super) fn upstream_opts(&self, up: &Upstream, flavor: TasksFlavor) -> CallOptions {
        CallOptions {
            client_capabilities: if flavor == TasksFlavor::Extension {
                Arc::new(with_extension(&json!({})))
            } else {
                crate::gateway::no_capabilities()
            },
            timeout: up.config.mcpx.call_timeout,
            max_time: self.config().global.max_call_time,
            ..CallOptions::default()
        }
    }

    /// The upstream fault of a client error.
    /// The fault of a client error on `up`: a reload that replaced or removed `up`
    /// says so (its connection, and the upstream task on it, are gone).
    pub(super) fn client_fault(&self, up: &Upstream, e: ClientError, host: Revision) -> Fault {
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
    pub(super) async fn task_start(
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
    pub(super) fn poll_interval(&self, task: Option<&Value>, key: &str) -> Duration {
        let ours = self.config().global.task_poll_interval;
        task.and_then(|t| t.get(key))
            .and_then(Value::as_u64)
            .map_or(ours, |u| Duration::from_millis(u).clamp(ours, ours * 20))
    }

    /// Creates a gateway task whose work is `work`, and answers with its handle.
    pub(super) fn task_spawn(
        self: &Arc<Self>,
        call: &Call,
        owner: Owner,
        ttl: Duration,
        work: Work,
    ) -> Result<Reply, Fault> {
        let config = self.config();
        let g = &config.global;
        let super::store::Created { id, task, cancel } = self
            .tasks
            .create(owner.clone(), ttl, g.max_tasks, g.task_poll_interval)
            .map_err(|e| e.to_fault(call.host))?;
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
pub(super) enum Work {
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

/// `tools/call` from a host of any revision.
pub(in crate::gateway) async fn tools_call(gw: &Arc<Gateway>, call: &Call) -> Result<Reply, Fault> {
    let crate::gateway::Routed {
        upstream: up,
        exposed,
        params,
        tool: crate::gateway::ToolFacts {
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
