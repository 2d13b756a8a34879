//! Driving an upstream task to its end: polls, its asks relayed, its cancellation.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use mcpx_client::{AskRefusal, CallEvent, CallOptions, ClientError, Connection};
use mcpx_protocol::error::INTERNAL_ERROR;
use mcpx_protocol::jsonrpc::Json;
use mcpx_protocol::method::TASKS_EXTENSION;
use mcpx_protocol::revision::TasksFlavor;
use mcpx_protocol::task::Status;
use mcpx_protocol::{Era, Frame, Params};
use mcpx_server::{Call, Fault, Reply};
use serde_json::{Map, Value, json};
// tokio's clock (the system's but when a test pauses it), as the supervisor's.
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::store::UpstreamTask;
use crate::gateway::{Asks, Gateway, Upstream, fault};

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

impl Gateway {
    /// Polls an upstream task until it ends. `cancel` asks the upstream to cancel
    /// (`tasks/cancel`) once; with `stop_on_cancel` the result is then `None` at once
    /// (a 2025-11-25 host's task is already cancelled), else polling goes on and the
    /// upstream's terminal status is reported (ext-tasks cooperative cancellation).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn task_poll(
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
        update_upstream(self, call, up, conn, id, responses).await?;
        asked.extend(keys);
        Ok(())
    }
}

/// Sends `responses` to upstream `i`'s task `id` (ext-tasks §Task Update
/// Requests); its refusal is `call`'s host's error.
pub(super) async fn update_upstream(
    gw: &Gateway,
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
            gw.upstream_opts(up, TasksFlavor::Extension),
        )
        .await
        .map_err(|e| gw.client_fault(up, e, call.host))?;
    if frame.error().is_some() {
        // An error frame is always the upstream's refusal, for the host.
        gw.answer(call, &conn.facts(), up.id.as_str(), "tasks/update", frame)?;
    }
    Ok(())
}
