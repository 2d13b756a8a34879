//! Calls of 2026-07-28 hosts parked at legacy upstreams (register E-1, E-13, E-24).
//!
//! A [`Parked`] call runs in a task of its own. Its upstream's questions are gathered
//! while they come back to back, then put to the host as one `input_required` round
//! under a `requestState` token. [`ParkedCalls`] holds each parked call by its token
//! until the host's retry takes it, or its ask timeout ends it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mcpx_client::{AskRefusal, CallEvent, ClientError, ServerFacts};
use mcpx_protocol::Frame;
use mcpx_protocol::error::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND};
use mcpx_protocol::lower::elicitation;
use mcpx_server::Call;
use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::{MAX_OPEN_QUESTIONS, label_elicitation, prepare_sampling};
use crate::gateway::tasks;
use crate::upstream::Upstream;

/// Where a host's answer to one question goes: the upstream's pending request.
type Reply = oneshot::Sender<Result<Value, AskRefusal>>;

/// The upstream call a parked call runs: started by the call path.
#[derive(Debug)]
pub(in crate::gateway) struct Leg {
    /// The facts of the connection the call runs on.
    pub(in crate::gateway) facts: Arc<ServerFacts>,
    /// That connection's generation, for telling the supervisor it broke.
    pub(in crate::gateway) conn_generation: u64,
    /// The call's events (progress, logs, the upstream's questions).
    pub(in crate::gateway) events: mpsc::Receiver<Box<CallEvent>>,
    /// The call itself.
    pub(in crate::gateway) task: tokio::task::JoinHandle<Result<Frame, ClientError>>,
    /// Cancels the call.
    pub(in crate::gateway) cancel: CancellationToken,
}

/// A modern host's call to a legacy upstream, waiting for the host's answers.
#[derive(Debug)]
pub(in crate::gateway) struct Parked {
    upstream: Arc<Upstream>,
    leg: Leg,
    method: String,
    /// The tool or prompt name or resource URI the host's call named: a retry must
    /// name the same (E-30).
    target: Option<String>,
    /// The upstream's questions put to the host and not yet answered, in asking order.
    open: Vec<Question>,
    /// Questions asked so far in this call: numbers the keys mcpx mints.
    asked: usize,
    /// Which parking this is: an expiry timer of an earlier one leaves it alone.
    generation: u64,
    /// Put before each elicitation message when namespaces are in use (E-10).
    label: Option<String>,
    /// Set while questions are open: when the gathering window closes.
    gathered_by: Option<tokio::time::Instant>,
}

/// One server-to-client request of a legacy upstream, put to a modern host as an
/// `inputRequests` entry.
#[derive(Debug)]
struct Question {
    key: String,
    method: String,
    params: Value,
    reply: Reply,
}

/// What a parked call did next ([`Parked::next`]).
pub(in crate::gateway) enum Step {
    /// The upstream call ended; the events it sent before, to relay first.
    Ended(
        Result<Result<Frame, ClientError>, tokio::task::JoinError>,
        Vec<CallEvent>,
    ),
    /// The host's request was cancelled; so is the upstream call.
    Cancelled,
    /// The upstream asks the client something.
    Ask {
        method: String,
        params: Option<Value>,
        reply: Reply,
    },
    /// Another event of the call, to relay.
    Event(CallEvent),
    /// The gathering window closed: the open questions go to the host.
    Gathered,
}

impl Parked {
    /// A call of `method` (naming `target`) running as `leg` at `upstream`.
    pub(in crate::gateway) fn new(
        upstream: Arc<Upstream>,
        method: String,
        target: Option<String>,
        label: Option<String>,
        leg: Leg,
    ) -> Parked {
        Parked {
            upstream,
            leg,
            method,
            target,
            open: Vec::new(),
            asked: 0,
            generation: 0,
            label,
            gathered_by: None,
        }
    }

    pub(in crate::gateway) fn upstream(&self) -> &Arc<Upstream> {
        &self.upstream
    }

    pub(in crate::gateway) fn facts(&self) -> &Arc<ServerFacts> {
        &self.leg.facts
    }

    pub(in crate::gateway) fn method(&self) -> &str {
        &self.method
    }

    pub(in crate::gateway) fn conn_generation(&self) -> u64 {
        self.leg.conn_generation
    }

    /// Whether a host's retry names what this call named (E-30).
    pub(in crate::gateway) fn is_retry_of(&self, method: &str, target: Option<String>) -> bool {
        self.method == method && self.target == target
    }

    /// Cancels the upstream call.
    pub(in crate::gateway) fn cancel(&self) {
        self.leg.cancel.cancel();
    }

    /// Waits for what the call does next; `cancelled` is the host request's.
    pub(in crate::gateway) async fn next(&mut self, cancelled: &CancellationToken) -> Step {
        let by = self.gathered_by;
        let window = async move {
            match by {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        let events = &mut self.leg.events;
        tokio::select! {
            // Events were sent before the call ended: relay them first.
            biased;
            joined = &mut self.leg.task, if events.is_empty() => {
                let mut before = Vec::new();
                while let Ok(ev) = events.try_recv() {
                    if !matches!(*ev, CallEvent::Ask { .. }) {
                        before.push(*ev);
                    }
                }
                Step::Ended(joined, before)
            }
            () = cancelled.cancelled() => {
                self.leg.cancel.cancel();
                Step::Cancelled
            }
            Some(ev) = events.recv() => match *ev {
                CallEvent::Ask { method, params, reply } => Step::Ask { method, params, reply },
                other => Step::Event(other),
            },
            () = window => Step::Gathered,
        }
    }

    /// Takes one question the upstream asks: refused when the host cannot be asked
    /// it, answered from `supplied` when the host sent the answer ahead, else left
    /// open for the host. Each question restarts the gathering window of `gather`
    /// while questions are open: those sent back to back go to the host in one round.
    pub(in crate::gateway) fn take_question(
        &mut self,
        call: &Call,
        supplied: &mut Map<String, Value>,
        method: String,
        params: Option<Value>,
        reply: Reply,
        gather: Duration,
    ) {
        self.open_question(call, supplied, method, params, reply);
        if !self.open.is_empty() {
            self.gathered_by = Some(tokio::time::Instant::now() + gather);
        }
    }

    fn open_question(
        &mut self,
        call: &Call,
        supplied: &mut Map<String, Value>,
        method: String,
        params: Option<Value>,
        reply: Reply,
    ) {
        let params = match self.admit_question(call, &method, params) {
            Ok(params) => params,
            Err(refusal) => {
                let _ = reply.send(Err(refusal));
                return;
            }
        };
        self.asked += 1;
        let cap = mcpx_protocol::method::ask_capability(&method).unwrap_or_default();
        // The upstream's own key when it names one (a fixed key lets a host answer
        // ahead and both eras see the same names), else one mcpx mints.
        let named = params
            .get("_meta")
            .and_then(|m| m.get(mcpx_protocol::meta::INPUT_KEY))
            .and_then(Value::as_str)
            .filter(|k| !k.is_empty() && k.len() <= 128 && !self.open.iter().any(|q| q.key == *k))
            .map(str::to_owned);
        let key = named.unwrap_or_else(|| format!("{cap}_{}", self.asked));
        if let Some(answer) = supplied.remove(&key) {
            let _ = reply.send(Ok(answer));
            return;
        }
        // No ask permit (E-15): the host is not being asked until it chooses to retry,
        // and a round it abandons must not hold the upstream's permits for
        // askTimeoutMs. Parked calls are bounded by maxParkedCalls instead.
        self.open.push(Question {
            key,
            method,
            params,
            reply,
        });
    }

    /// A question's params as the host is shown them, or the upstream's refusal.
    fn admit_question(
        &self,
        call: &Call,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, AskRefusal> {
        // 2026-07-28 basic/patterns/mrtr §Supported Requests: only these requests may
        // answer input_required (E-26).
        if !mcpx_protocol::method::MRTR_METHODS.contains(&self.method.as_str()) {
            return Err(AskRefusal::new(
                INTERNAL_ERROR,
                format!("the client cannot be asked during {}", self.method),
            ));
        }
        let cap = mcpx_protocol::method::ask_capability(method).unwrap_or_default();
        // mrtr: never ask for what the client did not declare; the upstream hears
        // -32601, as from a client without the feature, and may degrade (E-25).
        if cap.is_empty() || call.client_capabilities.get(cap).is_none() {
            return Err(AskRefusal::new(
                METHOD_NOT_FOUND,
                format!("the client did not declare the capability {method} needs"),
            ));
        }
        if self.open.len() >= MAX_OPEN_QUESTIONS {
            return Err(AskRefusal::new(
                INTERNAL_ERROR,
                format!("more than {MAX_OPEN_QUESTIONS} questions at once"),
            ));
        }
        let mut params = params.unwrap_or(json!({}));
        tasks::strip_ask_task(&mut params);
        // E-16, E-23: a malformed sampling ask, or one with tools for a host without
        // sampling.tools, is the legacy upstream's error (-32602), not a question.
        if method == "sampling/createMessage" {
            prepare_sampling(call, &mut params)
                .map_err(|e| AskRefusal::new(INVALID_PARAMS, e.to_string()))?;
        }
        if method == "elicitation/create" {
            // E-11, E-18: checked and shaped for the host (2026 has no elicitationId);
            // a malformed ask, or a mode mcpx did not declare, is the upstream's
            // -32602 (E-14).
            elicitation::lower(&mut params, call.host, String::new)
                .map_err(|e| AskRefusal::new(INVALID_PARAMS, e.to_string()))?;
            label_elicitation(self.label.as_deref(), &mut params);
        }
        if let Some(o) = params.as_object_mut()
            && let Some(Value::Object(m)) = o.get_mut("_meta")
        {
            // The upstream's request id means nothing to the host.
            m.remove(mcpx_protocol::meta::RELATED_REQUEST);
            if m.is_empty() {
                o.remove("_meta");
            }
        }
        Ok(params)
    }

    /// Whether questions wait for the host.
    pub(in crate::gateway) fn has_open(&self) -> bool {
        !self.open.is_empty()
    }

    /// Refuses every open question with -32603 `why` (the upstream degrades or fails)
    /// and closes the gathering window.
    pub(in crate::gateway) fn refuse_open(&mut self, why: &str) {
        for q in self.open.drain(..) {
            let _ = q.reply.send(Err(AskRefusal::new(INTERNAL_ERROR, why)));
        }
        self.gathered_by = None;
    }

    /// The open questions as a result's `inputRequests`, by key.
    pub(in crate::gateway) fn input_requests(&self) -> Map<String, Value> {
        self.open
            .iter()
            .map(|q| {
                (
                    q.key.clone(),
                    json!({ "method": q.method, "params": q.params }),
                )
            })
            .collect()
    }

    /// Hands the host's answers in `supplied` to the open questions they answer;
    /// the rest stay open.
    pub(in crate::gateway) fn answer(&mut self, supplied: &mut Map<String, Value>) {
        for q in std::mem::take(&mut self.open) {
            match supplied.remove(&q.key) {
                Some(answer) => {
                    let _ = q.reply.send(Ok(answer));
                }
                None => self.open.push(q),
            }
        }
    }

    /// A host that never came back: an open elicitation is answered "cancel" and any
    /// other question with an error, and the upstream call is cancelled (E-6, E-24).
    fn expire(self) {
        for q in self.open {
            let answer = if q.method == "elicitation/create" {
                Ok(json!({ "action": "cancel" }))
            } else {
                Err(AskRefusal::new(
                    INTERNAL_ERROR,
                    "the client did not answer in time",
                ))
            };
            let _ = q.reply.send(answer);
        }
        self.leg.cancel.cancel();
    }
}

/// The parked calls, by `requestState` token.
#[derive(Debug, Default)]
pub(in crate::gateway) struct ParkedCalls {
    /// Shared with each call's expiry timer, which holds it weakly.
    calls: Arc<Mutex<HashMap<String, Parked>>>,
    /// Counter for [`Parked::generation`].
    parkings: AtomicU64,
}

impl ParkedCalls {
    /// How many calls are parked.
    pub(in crate::gateway) fn len(&self) -> usize {
        self.calls.lock().len()
    }

    /// Parks `p` under `token` until a retry takes it, or for `expiry` at most.
    pub(in crate::gateway) fn park(&self, token: String, mut p: Parked, expiry: Duration) {
        let generation = self.parkings.fetch_add(1, Ordering::Relaxed);
        p.generation = generation;
        // Its questions are put: the next gathering window starts with the next one.
        p.gathered_by = None;
        self.calls.lock().insert(token.clone(), p);
        let calls = Arc::downgrade(&self.calls);
        tokio::spawn(async move {
            tokio::time::sleep(expiry).await;
            let Some(calls) = calls.upgrade() else { return };
            let stale = {
                let mut m = calls.lock();
                match m.get(&token) {
                    Some(p) if p.generation == generation => m.remove(&token),
                    _ => None,
                }
            };
            if let Some(p) = stale {
                p.expire();
            }
        });
    }

    /// Takes the call parked under `token`.
    pub(in crate::gateway) fn take(&self, token: &str) -> Option<Parked> {
        self.calls.lock().remove(token)
    }

    /// Puts back a call a malformed retry took: it stays for a well-formed one, under
    /// its parking's expiry.
    pub(in crate::gateway) fn restore(&self, token: String, p: Parked) {
        self.calls.lock().insert(token, p);
    }
}
