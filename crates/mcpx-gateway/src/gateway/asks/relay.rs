//! Asks put to hosts as requests: a legacy upstream's within the legacy era, and a
//! modern upstream's `inputRequests` entries to a legacy host (register E-1, E-11).
//!
//! [`Relay`] holds what such asks leave behind across requests: the counter of the
//! elicitation ids mcpx mints, the url-mode elicitations whose completion goes back
//! to one host (E-12), and the progress routes of asks (C-C6).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mcpx_client::{AskRefusal, Connection, ServerFacts};
use mcpx_protocol::error::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND};
use mcpx_protocol::lower::SamplingRefusal;
use mcpx_protocol::lower::elicitation;
use mcpx_protocol::{Era, Frame, Revision, meta};
use mcpx_server::{Call, Fault};
use mcpx_transport::Peer;
use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

use super::{
    MAX_URL_ELICITATIONS, ask_permit, host_may_be_asked, host_takes_url, label_elicitation,
    prepare_sampling, random_token, stamp_related,
};
use crate::error::GatewayError;
use crate::gateway::tasks;
use crate::id::UpstreamId;
use crate::upstream::Upstream;

/// What putting one upstream's asks to a host needs besides the [`Relay`]: given by
/// the gateway, which knows the upstreams and the configuration.
pub(in crate::gateway) struct Asking<'a> {
    /// The asking upstream's name, as messages name it.
    pub(in crate::gateway) name: &'a str,
    /// The asking upstream, when it is still in force.
    pub(in crate::gateway) up: Option<Arc<Upstream>>,
    /// Put before its elicitation messages when namespaces are in use (E-10).
    pub(in crate::gateway) label: Option<String>,
    /// How long a host has to answer (`askTimeoutMs`).
    pub(in crate::gateway) timeout: Duration,
    /// The gateway's tasks: one whose work waits on an ask is `input_required`.
    pub(in crate::gateway) tasks: &'a tasks::Store,
}

/// What asks put to hosts leave behind across requests.
#[derive(Debug)]
pub(in crate::gateway) struct Relay {
    /// Counter for minted elicitation ids.
    elicitations: AtomicU64,
    /// Url-mode elicitations relayed to 2025-11-25 hosts: (upstream, elicitationId)
    /// and the host session it went to, oldest first, so the upstream's
    /// `notifications/elicitation/complete` reaches that host only (E-12).
    url_elicitations: Mutex<VecDeque<(UpstreamId, String, Peer)>>,
    /// Asks relayed to legacy hosts with a progress token: the token mcpx gave the
    /// host (random, so no other host can reach the ask) to the asking upstream and
    /// its own token (C-C6).
    progress: Mutex<HashMap<String, (UpstreamId, Value)>>,
}

impl Default for Relay {
    fn default() -> Relay {
        Relay {
            elicitations: AtomicU64::new(1),
            url_elicitations: Mutex::new(VecDeque::new()),
            progress: Mutex::new(HashMap::new()),
        }
    }
}

/// Forgets an ask's progress route when the ask ends (answered, failed or dropped).
pub(in crate::gateway) struct ProgressRoute<'a> {
    routes: &'a Mutex<HashMap<String, (UpstreamId, Value)>>,
    token: String,
}

impl Drop for ProgressRoute<'_> {
    fn drop(&mut self) {
        self.routes.lock().remove(&self.token);
    }
}

/// The asks of one upstream call being put to its legacy host, side by side: each is
/// started when it comes, so an ask the host leaves unanswered holds up neither the
/// others (one past `askMaxPending` is refused at once, E-15) nor the call, whose
/// timeouts keep running (`maxCallTimeMs` bounds it, asks included). Nothing is
/// allocated until the first ask. Dropped with asks still open (the call is over),
/// each open request to the host is forgotten and the host told
/// (`mcpx_transport::pending::Pending::call`), and each upstream request is answered
/// -32603 by the connection.
#[derive(Default)]
pub(in crate::gateway) struct Asks<'a> {
    running: Option<Box<futures_util::stream::FuturesUnordered<AskFuture<'a>>>>,
}

/// One ask being put to a host, answering the upstream when it ends.
type AskFuture<'a> = std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

impl<'a> Asks<'a> {
    /// Whether an ask was ever started (the call's loop then polls [`Asks::next`]).
    pub(in crate::gateway) fn started(&self) -> bool {
        self.running.is_some()
    }

    fn start(&mut self, ask: AskFuture<'a>) {
        self.running.get_or_insert_with(Box::default).push(ask);
    }

    /// Runs the asks; resolves when one has ended, and never while none runs.
    pub(in crate::gateway) async fn next(&mut self) {
        use futures_util::StreamExt;
        match self.running.as_mut() {
            Some(r) if !r.is_empty() => {
                r.next().await;
            }
            _ => std::future::pending().await,
        }
    }
}

/// Where an upstream's question is answered.
type Answer = oneshot::Sender<Result<Value, AskRefusal>>;

impl Relay {
    /// An elicitation id of mcpx's own.
    pub(in crate::gateway) fn mint_elicitation_id(&self) -> String {
        format!("mcpx-{}", self.elicitations.fetch_add(1, Ordering::Relaxed))
    }

    /// An upstream call's ask (`method`, `params`), put to the host of `call` and
    /// answered on `reply`. `Some` when it ends the host's request instead (E-9);
    /// the caller then cancels the upstream call.
    pub(in crate::gateway) async fn on_ask(
        &self,
        a: &Asking<'_>,
        call: &Call,
        facts: &ServerFacts,
        (method, params): (String, Option<Value>),
        mut reply: Answer,
    ) -> Option<Fault> {
        if let Some(f) = self.ask_ends_request(a, call, facts, &method, params.as_ref()) {
            let _ = reply.send(Ok(json!({ "action": "cancel" })));
            return Some(f);
        }
        tokio::select! {
            answer = self.ask(a, call, facts, &method, params) => {
                let _ = reply.send(answer);
            }
            // The upstream withdrew its question: dropping the ask withdraws it from
            // the host too.
            () = reply.closed() => {}
        }
        None
    }

    /// [`Relay::on_ask`], except that the ask is started in `asks`, beside the call,
    /// instead of awaited: the caller polls `asks` with the call.
    pub(in crate::gateway) fn ask_beside<'a>(
        &'a self,
        a: Asking<'a>,
        call: &'a Call,
        facts: &'a ServerFacts,
        (method, params): (String, Option<Value>),
        mut reply: Answer,
        asks: &mut Asks<'a>,
    ) -> Option<Fault> {
        if let Some(f) = self.ask_ends_request(&a, call, facts, &method, params.as_ref()) {
            let _ = reply.send(Ok(json!({ "action": "cancel" })));
            return Some(f);
        }
        asks.start(Box::pin(async move {
            tokio::select! {
                answer = self.ask(&a, call, facts, &method, params) => {
                    let _ = reply.send(answer);
                }
                // Withdrawn by the upstream: so from the host too (see `on_ask`).
                () = reply.closed() => {}
            }
        }));
        None
    }

    /// E-9: a url-mode elicitation the legacy host of `call` cannot take ends its
    /// request (this fault); the caller answers the upstream's ask "cancel".
    fn ask_ends_request(
        &self,
        a: &Asking<'_>,
        call: &Call,
        facts: &ServerFacts,
        method: &str,
        params: Option<&Value>,
    ) -> Option<Fault> {
        if facts.era == Era::Legacy && call.host.era() == Era::Legacy && call.peer.is_some() {
            self.url_refusal(call, a.name, a.label.as_deref(), method, params)
        } else {
            None
        }
    }

    /// Relays a server-to-client request from an upstream to the host, within one era.
    pub(in crate::gateway) async fn ask(
        &self,
        a: &Asking<'_>,
        call: &Call,
        facts: &ServerFacts,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, AskRefusal> {
        let name = a.name;
        if facts.era != Era::Legacy || call.host.era() != Era::Legacy || call.peer.is_none() {
            return Err(AskRefusal::new(
                INTERNAL_ERROR,
                format!(
                    "mcpx cannot relay {method} from upstream {name} ({}) to this client ({}): requests across protocol eras are not bridged yet",
                    facts.revision, call.host
                ),
            ));
        }
        if !mcpx_protocol::method::server_may_send(method, call.host) {
            return Err(AskRefusal::new(
                METHOD_NOT_FOUND,
                format!(
                    "{method} does not exist in this client's protocol revision {}",
                    call.host
                ),
            ));
        }
        host_may_be_asked(call, method)?;
        let mut params = self.shape_ask(a, call, method, params)?;
        let _permit = match &a.up {
            Some(up) => ask_permit(&up.asks, method)?,
            None => None,
        };
        // C-C12: the upstream's own related-task (its task's id, when the ask came
        // from one), kept for the answer that goes back to it.
        let theirs = params
            .get("_meta")
            .and_then(|m| m.get(meta::RELATED_TASK))
            .cloned();
        stamp_related(&mut params, &call.id);
        tasks::ask_params(&mut params, call);
        let _route =
            a.up.as_ref()
                .and_then(|up| self.route_progress(&up.id, &mut params));
        let raw = RawValue::from_string(params.to_string())
            .map(Some)
            .map_err(|e| AskRefusal::new(INTERNAL_ERROR, e.to_string()))?;
        // 2025-11-25 basic/utilities/tasks §Input Required Status: a gateway task
        // whose work waits on this ask is input_required until it is answered (C-C12).
        let _waiting = a.tasks.waiting(call);
        let sent = match (&call.related_task, &call.peer) {
            // A task's work outlives the request that created it (answered with the
            // CreateTaskResult), so its asks go on the session: on HTTP the GET stream
            // (§Input Required Status: "clients SHOULD expect messages to be delivered
            // on any SSE stream, including the HTTP GET stream").
            (Some(_), Some(peer)) => peer.request(method, raw.as_deref(), a.timeout).await,
            _ => call.ctx.request(method, raw.as_deref(), a.timeout).await,
        };
        match sent {
            Ok(frame) => match (frame.result(), frame.error()) {
                (Some(r), _) => {
                    let mut v: Value = serde_json::from_str(r)
                        .map_err(|e| AskRefusal::new(INTERNAL_ERROR, e.to_string()))?;
                    tasks::answer_upstream(&mut v, theirs, facts.revision);
                    Ok(v)
                }
                (_, Some(e)) => Err(AskRefusal::new(e.code, e.message.clone())),
                _ => Err(AskRefusal::new(INTERNAL_ERROR, "empty answer")),
            },
            Err(e) => Err(AskRefusal::new(
                INTERNAL_ERROR,
                format!("the client did not answer {method}: {e}"),
            )),
        }
    }

    /// A legacy upstream's ask, checked and shaped for the host of `call`: its
    /// refusals are the upstream's -32602 (E-7, E-14, E-16, E-23).
    fn shape_ask(
        &self,
        a: &Asking<'_>,
        call: &Call,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, AskRefusal> {
        let mut params = params.unwrap_or(json!({}));
        if method == "sampling/createMessage" {
            prepare_sampling(call, &mut params)
                .map_err(|e| AskRefusal::new(INVALID_PARAMS, e.to_string()))?;
        }
        if method == "elicitation/create" {
            // E-11, E-18: shaped for the host; what it cannot be shown, a malformed
            // ask, or a mode mcpx did not declare is the upstream's -32602 (E-14).
            let mode = elicitation::lower(&mut params, call.host, || self.mint_elicitation_id())
                .map_err(|e| AskRefusal::new(INVALID_PARAMS, e.to_string()))?;
            label_elicitation(a.label.as_deref(), &mut params);
            if let (elicitation::Mode::Url, Some(up), Some(peer), Some(id)) = (
                mode,
                &a.up,
                &call.peer,
                params.get("elicitationId").and_then(Value::as_str),
            ) {
                self.note_url_elicitation(call.host, &up.id, id, peer);
            }
        }
        Ok(params)
    }

    /// Puts each of a 2026-07-28 upstream's `inputRequests` (`requests`, by key) to
    /// the legacy host of `call` with [`Relay::ask_legacy_host`], one after the
    /// other; the answers by the same keys. A question the host cannot be shown or
    /// refuses fails the whole (E-9: a url-mode elicitation is not retried, the host
    /// learns the URL from the error).
    pub(in crate::gateway) async fn ask_legacy_host_all<'r>(
        &self,
        a: &Asking<'_>,
        call: &Call,
        requests: impl Iterator<Item = (&'r String, &'r Value)>,
    ) -> Result<Map<String, Value>, Fault> {
        let mut responses = Map::new();
        for (key, req) in requests {
            let method = req
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let params = req.get("params").cloned();
            if let Some(f) =
                self.url_refusal(call, a.name, a.label.as_deref(), method, params.as_ref())
            {
                return Err(f);
            }
            let answer = self
                .ask_legacy_host(a, call, method, params)
                .await
                .map_err(|r| GatewayError::AskRefused(r).to_fault(call.host))?;
            responses.insert(key.clone(), answer);
        }
        Ok(responses)
    }

    /// Asks a legacy host, with a wire request in its revision, what a modern
    /// upstream's `inputRequests` entry asks (register E-1, E-11).
    pub(in crate::gateway) async fn ask_legacy_host(
        &self,
        a: &Asking<'_>,
        call: &Call,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, AskRefusal> {
        let upstream = a.name;
        if call.peer.is_none() || !mcpx_protocol::method::server_may_send(method, call.host) {
            return Err(AskRefusal::new(
                INTERNAL_ERROR,
                format!(
                    "upstream {upstream} needs {method}, which this client's protocol revision {} cannot carry",
                    call.host
                ),
            ));
        }
        host_may_be_asked(call, method)?;
        let params = self.shape_input_request(a, call, method, params)?;
        let _permit = match &a.up {
            Some(up) => ask_permit(&up.asks, method)?,
            None => None,
        };
        let raw = RawValue::from_string(params.to_string())
            .map_err(|e| AskRefusal::new(INTERNAL_ERROR, e.to_string()))?;
        match call.ctx.request(method, Some(&raw), a.timeout).await {
            Ok(frame) => match (frame.result(), frame.error()) {
                (Some(r), _) => serde_json::from_str(r)
                    .map_err(|e| AskRefusal::new(INTERNAL_ERROR, e.to_string())),
                // E-6: the host's refusal fails the original request.
                (_, Some(e)) => Err(AskRefusal::new(
                    INTERNAL_ERROR,
                    format!("the client refused {method}: {}", e.message),
                )),
                _ => Err(AskRefusal::new(INTERNAL_ERROR, "empty answer")),
            },
            Err(e) => Err(AskRefusal::new(
                INTERNAL_ERROR,
                format!("the client did not answer {method}: {e}"),
            )),
        }
    }

    /// A modern upstream's `inputRequests` entry, checked and shaped for the legacy
    /// host of `call`. The upstream cannot be told (its ask has no error channel):
    /// the host's request fails, -32602 when the host lacks sampling.tools (E-23),
    /// else -32603 (E-7, E-16).
    fn shape_input_request(
        &self,
        a: &Asking<'_>,
        call: &Call,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, AskRefusal> {
        let upstream = a.name;
        let mut params = params.unwrap_or(json!({}));
        if method == "sampling/createMessage"
            && let Err(e) = prepare_sampling(call, &mut params)
        {
            let code = match e {
                SamplingRefusal::ToolsNotDeclared(_) => INVALID_PARAMS,
                _ => INTERNAL_ERROR,
            };
            return Err(AskRefusal::new(code, format!("upstream {upstream}: {e}")));
        }
        if method == "elicitation/create" {
            // E-11, E-18: shaped for the host (a 2025-11-25 url-mode ask gets a
            // minted elicitationId); what the host cannot be shown fails its request,
            // since a modern upstream has no error channel for it.
            elicitation::lower(&mut params, call.host, || self.mint_elicitation_id()).map_err(
                |e| AskRefusal::new(INTERNAL_ERROR, format!("upstream {upstream}: {e}")),
            )?;
            label_elicitation(a.label.as_deref(), &mut params);
        }
        stamp_related(&mut params, &call.id);
        Ok(params)
    }

    /// E-9, E-19: a url-mode elicitation of upstream `name` for a host that declared
    /// elicitation but cannot take url mode (a 2025-06-18 host, or one without
    /// `elicitation.url`). mcpx never turns it into a form (2025-11-25
    /// client/elicitation §User Interaction Model: sensitive data goes by url, never
    /// by form), so it ends the host's request: with -32042 and the elicitation in
    /// `data.elicitations` for a 2025-11-25 host (client/elicitation §URL Elicitation
    /// Required Error, read as a MUST: E-19), else with -32603 whose message carries
    /// the URL (2026-07-28 basic/index §Error Codes: -32042 MUST NOT be emitted).
    /// Hosts that declared no elicitation are refused as for any undeclared ask.
    pub(in crate::gateway) fn url_refusal(
        &self,
        call: &Call,
        name: &str,
        label: Option<&str>,
        method: &str,
        params: Option<&Value>,
    ) -> Option<Fault> {
        if method != "elicitation/create"
            || host_takes_url(call)
            || !elicitation::shape(call.host).exists
            || call.client_capabilities.get("elicitation").is_none()
        {
            return None;
        }
        let params = params?;
        if elicitation::mode(params).ok()? != elicitation::Mode::Url {
            return None;
        }
        let url = params
            .get("url")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut shown = json!({
            "message": params.get("message").and_then(Value::as_str).unwrap_or_default(),
        });
        label_elicitation(label, &mut shown);
        let message = shown["message"].as_str().unwrap_or_default().to_owned();
        let id = params
            .get("elicitationId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let error = GatewayError::UrlElicitation {
            upstream: name.to_owned(),
            url: url.to_owned(),
            message,
            id: if mcpx_protocol::error::may_emit(
                call.host,
                mcpx_protocol::error::URL_ELICITATION_REQUIRED,
            ) {
                Some(id.unwrap_or_else(|| self.mint_elicitation_id()))
            } else {
                None
            },
        };
        Some(error.to_fault(call.host))
    }

    /// Remembers that upstream `up`'s url-mode elicitation `id` went to `peer`, when
    /// the host's revision has completion notifications (E-12: 2025-11-25 only).
    pub(in crate::gateway) fn note_url_elicitation(
        &self,
        host: Revision,
        up: &UpstreamId,
        id: &str,
        peer: &Peer,
    ) {
        if !mcpx_protocol::method::server_may_send("notifications/elicitation/complete", host) {
            return;
        }
        let mut m = self.url_elicitations.lock();
        m.retain(|(u, e, _)| !(u == up && e == id));
        m.push_back((up.clone(), id.to_owned(), peer.clone()));
        while m.len() > MAX_URL_ELICITATIONS {
            m.pop_front();
        }
    }

    /// E-12: the elicitations of upstream `up`'s -32042 (its error's `data`) that
    /// reach a 2025-11-25 host unchanged (A-C11) are remembered like relayed ones,
    /// for their completion.
    pub(in crate::gateway) fn note_required_elicitations(
        &self,
        call: &Call,
        up: &UpstreamId,
        data: Option<&str>,
    ) {
        let Some(peer) = &call.peer else { return };
        let data: Value = data
            .and_then(|d| serde_json::from_str(d).ok())
            .unwrap_or(Value::Null);
        for e in data
            .get("elicitations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(id) = e.get("elicitationId").and_then(Value::as_str) {
                self.note_url_elicitation(call.host, up, id, peer);
            }
        }
    }

    /// E-12: an upstream's `notifications/elicitation/complete` goes, unchanged, to
    /// the 2025-11-25 host its elicitation went to, once; one naming an elicitation
    /// mcpx did not relay that way (unknown, completed, or put to a 2026-07-28 host,
    /// whose revision has no such notification) is dropped (2025-11-25
    /// client/elicitation §Completion Notifications: only to the client that
    /// initiated the elicitation; clients ignore unknown ids).
    pub(in crate::gateway) async fn relay_elicitation_complete(
        &self,
        up: &UpstreamId,
        frame: &Frame,
    ) {
        let id = frame
            .params()
            .and_then(|p| mcpx_protocol::jsonrpc::member(p, "elicitationId"))
            .and_then(|v| serde_json::from_str::<String>(v).ok());
        let peer = id.as_ref().and_then(|id| {
            let mut m = self.url_elicitations.lock();
            let at = m.iter().position(|(u, e, _)| u == up && e == id)?;
            m.remove(at).map(|(_, _, p)| p)
        });
        match peer {
            Some(peer) => {
                let _ = peer.notify(frame.clone()).await;
            }
            None => tracing::debug!(
                upstream = %up,
                elicitation = ?id,
                "dropped notifications/elicitation/complete for no relayed elicitation"
            ),
        }
    }

    /// C-C6 (2025-11-25 basic/utilities/progress: "Either side can send progress
    /// notifications"): an ask a legacy upstream sends with a progress token reaches
    /// the legacy host with a token of mcpx's own, so the host's progress on it can go
    /// back to that upstream alone, with the upstream's token. Returns the route,
    /// forgotten when dropped.
    fn route_progress(&self, up: &UpstreamId, params: &mut Value) -> Option<ProgressRoute<'_>> {
        let meta = params.get_mut("_meta")?.as_object_mut()?;
        let theirs = meta.get(meta::PROGRESS_TOKEN)?.clone();
        let token = format!("mcpx-ask-{}", random_token()?);
        meta.insert(meta::PROGRESS_TOKEN.to_owned(), json!(token));
        self.progress
            .lock()
            .insert(token.clone(), (up.clone(), theirs));
        Some(ProgressRoute {
            routes: &self.progress,
            token,
        })
    }

    /// A legacy host's `notifications/progress`: relayed to the upstream whose ask it
    /// reports on, if that ask is still open and the upstream's revision lets a client
    /// send progress (C-C6: never a modern upstream). Anything else is dropped.
    /// `connection` gives the ready connection of an upstream in force.
    pub(in crate::gateway) async fn relay_progress(
        &self,
        params: Option<&str>,
        connection: impl FnOnce(&UpstreamId) -> Option<Connection>,
    ) {
        let Some(mut params) = params.and_then(|p| serde_json::from_str::<Value>(p).ok()) else {
            return;
        };
        let Some(token) = params.get("progressToken").and_then(Value::as_str) else {
            return;
        };
        let route = self.progress.lock().get(token).cloned();
        let Some((id, theirs)) = route else {
            return;
        };
        let Some(conn) = connection(&id) else { return };
        if !mcpx_protocol::method::client_may_send("notifications/progress", conn.facts().revision)
        {
            return;
        }
        params["progressToken"] = theirs;
        let _ = conn.notify("notifications/progress", Some(params)).await;
    }
}
