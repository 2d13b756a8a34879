//! The era bridge of a call: a 2026-07-28 host's call to a legacy upstream runs in a
//! task of its own, parked while the host answers the upstream's asks as
//! `input_required` rounds (register E-1, E-13, E-24).
//!
//! The upstream may ask the client something (sampling, elicitation, roots) with wire
//! requests in the middle of the call; a modern host can only be asked with an
//! `input_required` result (MRTR). So mcpx gathers the questions the upstream sends
//! back to back, parks the call with the ask broker, answers the host
//! `input_required` with a `requestState` naming the parked call, and resumes it when
//! the host retries with the answers.

use std::sync::Arc;

use mcpx_client::{CallOptions, Connection};
use mcpx_protocol::jsonrpc::Json;
use mcpx_protocol::{Era, Params, Revision};
use mcpx_server::{Call, Fault, Reply};
use serde_json::{Map, Value, json};

use super::admit::Admitted;
use crate::error::{Cause, GatewayError};
use crate::gateway::asks::park::{Leg, Parked, Step};
use crate::gateway::asks::{PARKED_PREFIX, call_target, input_responses, random_token};
use crate::gateway::{Gateway, no_capabilities};
use crate::upstream::Upstream;

/// Whether `call` is bridged: a modern host, a legacy upstream.
pub(super) fn parks(call: &Call, facts: &mcpx_client::ServerFacts) -> bool {
    call.host.era() == Era::Modern && facts.era == Era::Legacy
}

/// Runs `call` parked at its legacy upstream.
pub(super) async fn forward_parking(
    gw: &Arc<Gateway>,
    call: &Call,
    up: &Arc<Upstream>,
    admitted: Admitted<'_>,
    method: &str,
    params: &Params,
    idempotent: bool,
) -> Result<Reply, Fault> {
    let Admitted {
        conn, _in_flight, ..
    } = admitted;
    // Answers the host sent ahead, for questions the upstream has yet to ask.
    let supplied = input_responses(call)?;
    // A legacy upstream logs at its session's level: a modern host's per-request
    // logLevel lowers it like a legacy host's logging/setLevel (H9, C-C8).
    if let Some(log) = &call.log {
        gw.lower_upstream_log_level(log.threshold()).await;
    }
    let leg = start(gw, call, up, conn, method, params, idempotent);
    let parked = Parked::new(
        up.clone(),
        method.to_owned(),
        call_target(call),
        gw.label(up),
        leg,
    );
    run(gw, call, parked, supplied).await
}

/// Starts the upstream call of a parked call, in a task of its own.
fn start(
    gw: &Gateway,
    call: &Call,
    up: &Upstream,
    conn: Connection,
    method: &str,
    params: &Params,
    idempotent: bool,
) -> Leg {
    let (tx, events) = tokio::sync::mpsc::channel(64);
    let cancel = tokio_util::sync::CancellationToken::new();
    let opts = CallOptions {
        events: Some(tx),
        progress: call.progress.is_some(),
        log_level: call.log.as_ref().map(|l| l.threshold().as_str().to_owned()),
        client_capabilities: no_capabilities(),
        timeout: up.config.mcpx.call_timeout,
        max_time: gw.config().global.max_call_time,
        cancel: cancel.clone(),
        idempotent,
        attribute_unsolicited: true,
        caller_meta_is_envelope: true,
        // The host's request span is the parent (this path has no client span).
        trace: mcpx_telemetry::span::outgoing(&tracing::Span::current(), call.trace.as_ref()),
    };
    let text = without_mrtr_members(params);
    let method_owned = method.to_owned();
    let facts = conn.facts();
    let conn_generation = up.supervisor().ready().map_or(0, |(g, _)| g);
    let observed = gw.upstream_leg(call, up, method);
    // Boxed: see mcpx_transport::stdio (the harness moves a spawned future by value).
    let task = tokio::spawn(Box::pin(async move {
        let outcome = conn.call(&method_owned, Some(&text), opts).await;
        if let Some(observed) = observed {
            observed.end(&outcome);
        }
        outcome
    }));
    Leg {
        facts,
        conn_generation,
        events,
        task,
        cancel,
    }
}

/// `params` without `inputResponses` and `requestState`: they are mcpx's to consume,
/// and a legacy revision has neither.
fn without_mrtr_members(params: &Params) -> Params {
    if params.member("inputResponses").is_none() && params.member("requestState").is_none() {
        return params.clone();
    }
    let mut v: Value = serde_json::from_str(params).unwrap_or(json!({}));
    if let Some(o) = v.as_object_mut() {
        o.remove("inputResponses");
        o.remove("requestState");
    }
    Params::of_value(&v)
}

/// Drives a (possibly resumed) parked call until it answers, or asks questions
/// `supplied` does not answer.
async fn run(
    gw: &Arc<Gateway>,
    call: &Call,
    mut p: Parked,
    mut supplied: Map<String, Value>,
) -> Result<Reply, Fault> {
    let name = p.upstream().id.to_string();
    let facts = p.facts().clone();
    loop {
        match p.next(&call.cancel).await {
            Step::Ended(joined, before) => {
                let outcome = joined.map_err(|e| {
                    GatewayError::Internal(format!("upstream {name}: {e}")).to_fault(call.host)
                })?;
                for ev in before {
                    let _ = gw.on_event(call, &facts, &name, ev).await;
                }
                return match outcome {
                    Ok(frame) => gw.answer(call, &facts, &name, p.method(), frame),
                    Err(e) => {
                        // As on the plain path: the supervisor hears of a dead connection.
                        if e.breaks_connection() {
                            p.upstream()
                                .lost(p.conn_generation(), Cause::Client(e.clone()));
                        }
                        Err(GatewayError::Client(e).to_fault(call.host))
                    }
                };
            }
            Step::Cancelled => {
                return Err(GatewayError::Internal("cancelled".into()).to_fault(call.host));
            }
            Step::Ask {
                method,
                params,
                reply,
            } => {
                // E-9: a url-mode question the host cannot take ends its request; the
                // upstream hears "cancel" and its call is cancelled.
                if mcpx_protocol::method::MRTR_METHODS.contains(&p.method())
                    && let Some(f) = gw.asks.relay.url_refusal(
                        call,
                        &name,
                        gw.label(p.upstream()).as_deref(),
                        &method,
                        params.as_ref(),
                    )
                {
                    let _ = reply.send(Ok(json!({ "action": "cancel" })));
                    p.cancel();
                    return Err(f);
                }
                let gather = gw.config().global.ask_gather;
                p.take_question(call, &mut supplied, method, params, reply, gather);
            }
            Step::Event(ev) => {
                let _ = gw.on_event(call, &facts, &name, ev).await;
            }
            Step::Gathered => {
                let max = gw.config().global.max_parked;
                if gw.asks.parked.len() >= max {
                    // Too many calls already wait for hosts' answers: the upstream
                    // hears -32603 for these questions and degrades or fails.
                    p.refuse_open(&format!(
                        "too many calls waiting for clients' answers (maxParkedCalls {max})"
                    ));
                    continue;
                }
                return put_questions(gw, call, p, None);
            }
        }
    }
}

/// Parks `p` and answers the host `input_required` with its open questions, under a
/// new `requestState` or, when asking again for what a retry lacked, the same one
/// (E-24).
fn put_questions(
    gw: &Gateway,
    call: &Call,
    p: Parked,
    token: Option<String>,
) -> Result<Reply, Fault> {
    let Some(token) = token.or_else(random_token) else {
        p.cancel();
        return Err(GatewayError::Internal("no randomness".into()).to_fault(call.host));
    };
    let result = json!({
        "resultType": "input_required",
        "inputRequests": p.input_requests(),
        "requestState": format!("{PARKED_PREFIX}{token}"),
    });
    gw.asks
        .parked
        .park(token, p, gw.config().global.ask_timeout);
    Ok(Reply {
        result: Json::of_value(&result),
        revision: Revision::NEWEST,
    })
}

/// A modern host's retry of a parked call (`state`, its `requestState`): hand its
/// answers to the upstream and go on.
pub(in crate::gateway) async fn resume(
    gw: &Arc<Gateway>,
    call: &Call,
    state: &str,
) -> Result<Reply, Fault> {
    let token = state.strip_prefix(PARKED_PREFIX).unwrap_or_default();
    let Some(mut p) = gw.asks.parked.take(token) else {
        // 2026-07-28 basic/patterns/mrtr: state that fails its integrity check is
        // rejected; an unknown token is what a forged or replayed one is.
        return Err(GatewayError::UnknownRequestState.to_fault(call.host));
    };
    if !p.upstream().is_current() {
        // A reload replaced or removed the upstream the call was parked at: its call
        // is gone with its connection.
        p.cancel();
        return Err(GatewayError::Removed {
            upstream: p.upstream().id.clone(),
        }
        .to_fault(call.host));
    }
    let checked = if p.is_retry_of(&call.method, call_target(call)) {
        input_responses(call)
    } else {
        Err(GatewayError::ForeignRequestState.to_fault(call.host))
    };
    let mut supplied = match checked {
        Ok(s) => s,
        Err(f) => {
            // The parked call stays for a well-formed retry.
            gw.asks.parked.restore(token.to_owned(), p);
            return Err(f);
        }
    };
    p.answer(&mut supplied);
    if p.has_open() {
        // mrtr: a retry missing answers is asked again for them (E-24).
        return put_questions(gw, call, p, Some(token.to_owned()));
    }
    run(gw, call, p, supplied).await
}
