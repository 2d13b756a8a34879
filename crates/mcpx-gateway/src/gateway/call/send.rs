//! One connection call: the request written to the upstream, its events (progress,
//! logs, asks) relayed to the host in order while it runs, and the asks that come
//! after the answer refused.

use std::sync::Arc;
use std::time::Duration;

use mcpx_client::{AskRefusal, CallEvent, CallOptions};
use mcpx_protocol::error::INTERNAL_ERROR;
use mcpx_protocol::{Era, Frame, Params};
use mcpx_server::{Call, Fault};

use super::admit::Admitted;
use super::observe;
use crate::error::{Cause, GatewayError};
use crate::gateway::{Asks, Gateway, no_capabilities};
use crate::upstream::Upstream;

/// What one send needs.
pub(super) struct Send<'s, 'a> {
    pub(super) call: &'s Call,
    pub(super) up: &'s Arc<Upstream>,
    pub(super) admitted: &'s Admitted<'a>,
    pub(super) method: &'s str,
    /// The params as sent this round.
    pub(super) params: &'s Params,
    pub(super) idempotent: bool,
    /// What is left of the call's time.
    pub(super) max_time: Duration,
    /// Which `input_required` round this is (0 for the first send).
    pub(super) round: usize,
}

/// Sends once and returns the upstream's answer (an error frame included); a fault
/// when the call failed, or an ask ended the host's request first (E-9).
pub(super) async fn send(gw: &Arc<Gateway>, s: Send<'_, '_>) -> Result<Frame, Fault> {
    let Send {
        call,
        up,
        admitted,
        method,
        params,
        idempotent,
        max_time,
        round,
    } = s;
    let facts = &admitted.facts;
    let (tx, mut rx) = gw.event_channels.take();
    // Fired by the host's cancellation, or when an ask ends the host's request
    // before the upstream answers (E-9).
    let cancel = call.cancel.child_token();
    let mut ended: Option<Fault> = None;
    let mut asks = Asks::default();
    let mut opts = options(call, up, facts, max_time, idempotent, &cancel);
    // A clone: `tx` outlives the call, so that the channel can go back to the pool
    // once the call is over.
    opts.events = Some(tx.clone());
    let outcome = {
        let span = observe::upstream_span(up, facts, method, round);
        opts.trace = observe::trace_for(&span, call, method, params);
        let fut =
            tracing::Instrument::instrument(admitted.conn.call(method, Some(params), opts), span);
        tokio::pin!(fut);
        let leg = observe::leg(gw.metrics.as_deref(), call, up, method);
        let outcome = loop {
            tokio::select! {
                // Asks that ended answer the upstream first; then events, which were
                // sent before the response.
                biased;
                () = asks.next(), if asks.started() => {}
                Some(ev) = rx.recv() => {
                    // Boxed, as events are the exception (and the call's future is live
                    // meanwhile: the two would be laid out side by side). An ask runs
                    // beside the call, never awaited here: the call goes on (its
                    // timeouts too) while the host thinks.
                    if let Some(f) = Box::pin(gw.on_event_beside(call, facts, up.id.as_str(), *ev, &mut asks)).await {
                        cancel.cancel();
                        ended.get_or_insert(f);
                    }
                }
                r = &mut fut => break r,
            }
        };
        observe::ended(leg, fut.span(), method, &outcome);
        outcome
    };
    // The upstream has answered: its asks still open are moot (dropped, each host
    // request is cancelled and each upstream request refused), and so are those that
    // come after the answer.
    drop(asks);
    refuse_late(gw, call, facts, up, &mut rx, &mut ended).await;
    gw.event_channels.give(tx, rx);
    if let Some(f) = ended {
        return Err(f);
    }
    outcome.map_err(|e| {
        if e.breaks_connection() {
            // The supervisor starts it again (a call never does).
            up.lost(admitted.generation, Cause::Client(e.clone()));
        }
        GatewayError::Client(e).to_fault(call.host)
    })
}

/// The events left once the upstream has answered: asks are refused (they came
/// after the answer to the request they served), the rest relayed. The first fault
/// an event gives is kept in `ended`.
async fn refuse_late(
    gw: &Gateway,
    call: &Call,
    facts: &mcpx_client::ServerFacts,
    up: &Upstream,
    rx: &mut tokio::sync::mpsc::Receiver<Box<CallEvent>>,
    ended: &mut Option<Fault>,
) {
    while let Ok(ev) = rx.try_recv() {
        let f = match *ev {
            CallEvent::Ask { method, reply, .. } => {
                let _ = reply.send(Err(AskRefusal::new(
                    INTERNAL_ERROR,
                    format!("{method} came after the answer to the request it served"),
                )));
                None
            }
            ev => Box::pin(gw.on_event(call, facts, up.id.as_str(), ev)).await,
        };
        if let Some(f) = f {
            ended.get_or_insert(f);
        }
    }
}

/// The options of one send; `events` and `trace` are filled in by [`send`].
fn options(
    call: &Call,
    up: &Upstream,
    facts: &mcpx_client::ServerFacts,
    max_time: Duration,
    idempotent: bool,
    cancel: &tokio_util::sync::CancellationToken,
) -> CallOptions {
    CallOptions {
        events: None,
        progress: call.progress.is_some(),
        log_level: call.log.as_ref().map(|l| l.threshold().as_str().to_owned()),
        // A modern upstream may only ask for what the host can answer: the host's own
        // capabilities (per request on modern, from initialize on legacy, where mcpx
        // answers for it).
        client_capabilities: if facts.era == Era::Modern {
            call.client_capabilities.clone()
        } else {
            no_capabilities()
        },
        timeout: up.config.mcpx.call_timeout,
        max_time,
        cancel: cancel.clone(),
        idempotent,
        attribute_unsolicited: true,
        caller_meta_is_envelope: call.host.era() == Era::Modern,
        trace: None,
    }
}

/// Relays a progress or log event of an upstream call to the host of `call` (an
/// ask goes through the ask broker instead: `Gateway::on_event`).
pub(in crate::gateway) async fn relay_event(call: &Call, ev: CallEvent) {
    match ev {
        CallEvent::Progress {
            progress,
            total,
            message,
        } => {
            if let Some(p) = &call.progress {
                p.progress(progress, total, message.as_deref()).await;
            }
        }
        CallEvent::Log {
            level,
            logger,
            data,
        } => {
            if let (Some(l), Some(level)) = (&call.log, mcpx_server::Level::parse(&level)) {
                l.log(level, logger.as_deref(), &data).await;
            }
        }
        CallEvent::Ask { .. } => {}
    }
}
