//! Driving an upstream task to its end: [`Poll`] is one upstream task, [`Run`] its
//! polls (`tasks/get` every interval), its asks relayed to the host, its
//! cancellation (`tasks/cancel`) and its result.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use mcpx_client::{
    AskRefusal, CallEvent, CallOptions, ClientError, Connection, ServerFacts, TaskAsks,
};
use mcpx_protocol::error::INTERNAL_ERROR;
use mcpx_protocol::jsonrpc::Json;
use mcpx_protocol::revision::TasksFlavor;
use mcpx_protocol::task::Status;
use mcpx_protocol::{Era, Frame, Params};
use mcpx_server::{Call, Fault, Reply};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
// tokio's clock (the system's but when a test pauses it), as the supervisor's.
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::start::{client_fault, upstream_opts};
use super::store::{Store, UpstreamTask};
use crate::error::GatewayError;
use crate::gateway::{Asks, Gateway, Upstream};

/// How a task's work ended: `None` is cancelled (as [`Store::finish`] takes it).
pub(super) type Outcome = Option<Result<Reply, Fault>>;

/// A 2025-11-25 upstream's task asks with requests on its session, which only a legacy
/// host with a session can be sent: `call` ends with this fault, and the task's ask
/// `ev`, if any, is answered with the same message (the upstream task is cancelled
/// after it).
fn unaskable(call: &Call, up: &Upstream, ev: Option<CallEvent>) -> Fault {
    let e = GatewayError::TaskInputUnrelayable {
        upstream: up.id.clone(),
        host: call.host,
    };
    if let Some(CallEvent::Ask { reply, .. }) = ev {
        let _ = reply.send(Err(AskRefusal::new(INTERNAL_ERROR, e.to_string())));
    }
    e.to_fault(call.host)
}

/// An upstream task that a call or a gateway task waits on.
pub(super) struct Poll {
    task: UpstreamTask,
    flavor: TasksFlavor,
    /// The upstream's suggested interval, no shorter than mcpx's own.
    interval: Duration,
}

impl Poll {
    pub(super) fn new(
        up: Arc<Upstream>,
        conn: Connection,
        flavor: TasksFlavor,
        id: String,
        interval: Duration,
    ) -> Self {
        Poll {
            task: UpstreamTask {
                upstream: up,
                id,
                conn,
            },
            flavor,
            interval,
        }
    }

    /// Polls the upstream task for `call` until it ends. `cancel` asks the upstream
    /// to cancel (`tasks/cancel`) once; with `stop_on_cancel` the outcome is then
    /// `None` at once (a 2025-11-25 host's task is already cancelled), else polling
    /// goes on and the upstream's terminal status is reported (ext-tasks cooperative
    /// cancellation). `store` holds the gateway task `call` is the work of, if any.
    pub(super) async fn run(
        self,
        gw: &Arc<Gateway>,
        call: &Call,
        store: &Store,
        cancel: &CancellationToken,
        stop_on_cancel: bool,
    ) -> Outcome {
        let mut run = Run::new(self, gw, call, store, cancel, stop_on_cancel);
        loop {
            if let ControlFlow::Break(outcome) = run.round().await {
                return outcome;
            }
        }
    }
}

/// A [`Poll`] under way: what it keeps from one round to the next.
struct Run<'a> {
    poll: Poll,
    gw: &'a Arc<Gateway>,
    call: &'a Call,
    store: &'a Store,
    facts: Arc<ServerFacts>,
    name: String,
    /// `{"taskId": id}`: the params of every request about the upstream task.
    params: Params,
    cancel: &'a CancellationToken,
    stop_on_cancel: bool,
    cancel_sent: bool,
    /// Keys asked of a host that cannot see the task, and answered upstream (keys
    /// are unique over a task's life; a poll may list them again before the
    /// upstream takes the answer in).
    asked: HashSet<String>,
    /// ext-tasks §Input Requests: a host that declared the extension answers the
    /// upstream task's questions itself, through its gateway task (tasks/get,
    /// tasks/update).
    relays_input: bool,
    /// 2025-11-25 §Input Required Status: a core task asks on the session, naming
    /// itself with related-task, while it is `input_required`; its asks reach
    /// `call`'s host as the call's own would (on the session, naming the host's own
    /// gateway task, for a task's work: C-C12), and where the host cannot be asked
    /// the upstream hears why.
    asks_tx: mpsc::Sender<Box<CallEvent>>,
    asks_rx: mpsc::Receiver<Box<CallEvent>>,
    _routed: Option<TaskAsks>,
    can_ask: bool,
    deadline: Instant,
}

impl<'a> Run<'a> {
    fn new(
        poll: Poll,
        gw: &'a Arc<Gateway>,
        call: &'a Call,
        store: &'a Store,
        cancel: &'a CancellationToken,
        stop_on_cancel: bool,
    ) -> Self {
        let t = &poll.task;
        let relays_input = poll.flavor == TasksFlavor::Extension && store.attach(call, t.clone());
        let (asks_tx, asks_rx) = mpsc::channel(8);
        let routed = (poll.flavor == TasksFlavor::Core)
            .then(|| t.conn.route_task_asks(&t.id, asks_tx.clone()));
        Run {
            facts: t.conn.facts(),
            name: t.upstream.id.to_string(),
            params: Params::of_value(&json!({ "taskId": t.id })),
            relays_input,
            asks_tx,
            asks_rx,
            _routed: routed,
            can_ask: call.host.era() == Era::Legacy && call.peer.is_some(),
            deadline: Instant::now() + gw.config().global.task_ttl,
            poll,
            gw,
            call,
            store,
            cancel,
            stop_on_cancel,
            cancel_sent: false,
            asked: HashSet::new(),
        }
    }

    /// Options for a request about the upstream task.
    fn opts(&self) -> CallOptions {
        let max_time = self.gw.config().global.max_call_time;
        upstream_opts(&self.poll.task.upstream, self.poll.flavor, max_time)
    }

    fn client_fault(&self, e: ClientError) -> Fault {
        client_fault(&self.poll.task.upstream, e).to_fault(self.call.host)
    }

    /// Asks the upstream to cancel its task (its answer does not matter).
    async fn cancel_upstream(&self) {
        let t = &self.poll.task;
        let _ = t
            .conn
            .call("tasks/cancel", Some(&self.params), self.opts())
            .await;
    }

    /// Cancels the upstream task: the work ends with `f`.
    async fn abandon(&self, f: Fault) -> ControlFlow<Outcome> {
        self.cancel_upstream().await;
        ControlFlow::Break(Some(Err(f)))
    }

    /// One round: the host's cancellation passed on, the deadline, a wait of one
    /// interval (or for an ask), then `tasks/get`.
    async fn round(&mut self) -> ControlFlow<Outcome> {
        if self.cancel.is_cancelled() && !self.cancel_sent {
            self.cancel_sent = true;
            self.cancel_upstream().await;
            if self.stop_on_cancel {
                return ControlFlow::Break(None);
            }
        }
        if Instant::now() > self.deadline {
            let e = GatewayError::UpstreamTaskExpired {
                upstream: self.poll.task.upstream.id.clone(),
                task: self.poll.task.id.clone(),
            };
            return ControlFlow::Break(Some(Err(e.to_fault(self.call.host))));
        }
        let ev = tokio::select! {
            () = tokio::time::sleep(self.poll.interval) => None,
            () = self.cancel.cancelled(), if !self.cancel_sent => return ControlFlow::Continue(()),
            Some(ev) = self.asks_rx.recv() => Some(ev),
        };
        if let Some(ev) = ev {
            return self.on_ask(*ev).await;
        }
        match self.get().await {
            Ok(task) => self.on_status(&task).await,
            Err(ended) => ControlFlow::Break(Some(ended)),
        }
    }

    /// An ask of a 2025-11-25 upstream task, on its session, between polls.
    async fn on_ask(&mut self, ev: CallEvent) -> ControlFlow<Outcome> {
        let ended = if self.can_ask {
            Box::pin(self.gw.on_event(self.call, &self.facts, &self.name, ev)).await
        } else {
            Some(unaskable(self.call, &self.poll.task.upstream, Some(ev)))
        };
        match ended {
            Some(f) => self.abandon(f).await,
            None => ControlFlow::Continue(()),
        }
    }

    /// The upstream task as `tasks/get` tells it; `Err` is the work's end (the
    /// request failed, or the upstream refused it).
    async fn get(&self) -> Result<Value, Result<Reply, Fault>> {
        let t = &self.poll.task;
        let frame = t
            .conn
            .call("tasks/get", Some(&self.params), self.opts())
            .await
            .map_err(|e| Err(self.client_fault(e)))?;
        if frame.error().is_some() {
            let call = self.call;
            return Err(self
                .gw
                .answer(call, &self.facts, &self.name, "tasks/get", frame));
        }
        Ok(frame
            .result()
            .and_then(|r| serde_json::from_str(r).ok())
            .unwrap_or(Value::Null))
    }

    /// What the upstream task's status calls for.
    async fn on_status(&mut self, task: &Value) -> ControlFlow<Outcome> {
        let status = task
            .get("status")
            .and_then(Value::as_str)
            .and_then(Status::parse);
        let done = |o: Result<Reply, Fault>| ControlFlow::Break(Some(o));
        match (self.poll.flavor, status) {
            (_, Some(Status::Cancelled)) => ControlFlow::Break(None),
            (TasksFlavor::Core, Some(Status::Completed | Status::Failed)) => {
                done(self.core_result().await)
            }
            (_, Some(Status::Completed)) => {
                let result = task.get("result").cloned().unwrap_or_else(|| json!({}));
                done(Ok(Reply {
                    result: Json::of_value(&result),
                    revision: self.facts.revision,
                }))
            }
            (_, Some(Status::Failed)) => done(Err(self.failed(task))),
            (_, Some(Status::InputRequired)) if self.relays_input => {
                let mut requests = match task.get("inputRequests") {
                    Some(Value::Object(r)) => r.clone(),
                    _ => Map::new(),
                };
                self.gw.relabel_requests(&self.name, &mut requests);
                self.store.surface(self.call, requests);
                ControlFlow::Continue(())
            }
            (TasksFlavor::Extension, Some(Status::InputRequired)) => {
                // A host that cannot see the task is asked its questions itself.
                match Box::pin(self.ask_for_task(task)).await {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(f) => self.abandon(f).await,
                }
            }
            // §Input Required Status: "the requestor SHOULD preemptively call
            // tasks/result"; the task's asks come on its stream or on the session
            // (both relayed), and its answer is the task's result.
            (TasksFlavor::Core, Some(Status::InputRequired)) if self.can_ask => {
                match Box::pin(self.core_task_result()).await {
                    Ok(f) => {
                        let call = self.call;
                        done(
                            self.gw
                                .answer(call, &self.facts, &self.name, "tools/call", f),
                        )
                    }
                    // The next round asks the upstream to cancel.
                    Err(None) => ControlFlow::Continue(()),
                    Err(Some(f)) => self.abandon(f).await,
                }
            }
            (_, Some(Status::InputRequired)) => {
                self.cancel_upstream().await;
                done(Err(unaskable(self.call, &self.poll.task.upstream, None)))
            }
            (_, Some(Status::Working)) => {
                if self.relays_input {
                    self.store.surface(self.call, Map::new());
                }
                ControlFlow::Continue(())
            }
            (_, None) => {
                let e = GatewayError::UpstreamTaskStatus(self.poll.task.upstream.id.clone());
                done(Err(e.to_fault(self.call.host)))
            }
        }
    }

    /// A 2025-11-25 upstream task ended: its result is the underlying request's
    /// (§Retrieving Task Results).
    async fn core_result(&self) -> Result<Reply, Fault> {
        let mut opts = self.opts();
        opts.timeout = opts.timeout.max(self.poll.interval * 4);
        let t = &self.poll.task;
        match t.conn.call("tasks/result", Some(&self.params), opts).await {
            Ok(f) => self
                .gw
                .answer(self.call, &self.facts, &self.name, "tools/call", f),
            Err(e) => Err(self.client_fault(e)),
        }
    }

    /// A 2026-07-28 upstream task failed: its error, as the upstream's.
    fn failed(&self, task: &Value) -> Fault {
        let e = task.get("error");
        Fault {
            code: e
                .and_then(|e| e.get("code"))
                .and_then(Value::as_i64)
                .unwrap_or(INTERNAL_ERROR),
            message: format!(
                "upstream {}: {}",
                self.name,
                e.and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("the task failed")
            ),
            data: e.and_then(|e| e.get("data")).cloned(),
            from: self.facts.revision,
            input_validation: false,
        }
    }

    /// A 2025-11-25 upstream task is `input_required`: its `tasks/result`, with the
    /// task's asks (on that request's stream or, routed by related-task, on the
    /// session) relayed to `call`'s host meanwhile. `Err(None)`: cancelled by the host;
    /// `Err(Some(_))`: the call ends with that fault.
    async fn core_task_result(&mut self) -> Result<Frame, Option<Fault>> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let opts = CallOptions {
            events: Some(self.asks_tx.clone()),
            cancel: self.cancel.clone(),
            // It blocks until the task ends, which may wait on a person: the task's
            // lifetime bounds it, not a call's.
            timeout: left,
            max_time: left,
            ..self.opts()
        };
        let (gw, call, facts, name) = (self.gw, self.call, &*self.facts, self.name.as_str());
        let fut = self
            .poll
            .task
            .conn
            .call("tasks/result", Some(&self.params), opts);
        tokio::pin!(fut);
        // Put to the host side by side (see `Asks`); what is open when the result
        // comes is moot.
        let mut asks = Asks::default();
        let outcome = loop {
            tokio::select! {
                biased;
                () = asks.next(), if asks.started() => {}
                Some(ev) = self.asks_rx.recv() => {
                    if let Some(f) = Box::pin(gw.on_event_beside(call, facts, name, *ev, &mut asks)).await {
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
            Err(e) => Err(Some(self.client_fault(e))),
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
    async fn ask_for_task(&mut self, task: &Value) -> Result<(), Fault> {
        let t = &self.poll.task;
        if self.call.host.era() == Era::Modern {
            let e = GatewayError::TaskInputUndeclared {
                upstream: t.upstream.id.clone(),
                host: self.call.host,
            };
            return Err(e.to_fault(self.call.host));
        }
        let responses = match task.get("inputRequests") {
            Some(Value::Object(requests)) => {
                let open = requests.iter().filter(|(k, _)| !self.asked.contains(*k));
                self.gw
                    .ask_legacy_host_all(self.call, &self.name, open)
                    .await?
            }
            _ => return Ok(()),
        };
        if responses.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = responses.keys().cloned().collect();
        update_upstream(self.gw, self.call, &t.upstream, &t.conn, &t.id, responses).await?;
        self.asked.extend(keys);
        Ok(())
    }
}

/// Sends `responses` to upstream `up`'s task `id` (ext-tasks §Task Update
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
    let max_time = gw.config().global.max_call_time;
    let opts = upstream_opts(up, TasksFlavor::Extension, max_time);
    let frame = conn
        .call("tasks/update", Some(&p), opts)
        .await
        .map_err(|e| client_fault(up, e).to_fault(call.host))?;
    if frame.error().is_some() {
        // An error frame is always the upstream's refusal, for the host.
        gw.answer(call, &conn.facts(), up.id.as_str(), "tasks/update", frame)?;
    }
    Ok(())
}
