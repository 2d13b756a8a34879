//! A host asked to authorize an upstream (issue #21, register B-C15).
//!
//! A host call that finds an upstream needing a user's authorization ends with
//! -32042 (`URLElicitationRequiredError`, 2025-11-25 client/elicitation §URL
//! Elicitation Required Error) carrying the authorization URL, when the host declared
//! url-mode elicitation. mcpx runs the rest of the flow (the callback listener `mcpx
//! auth login` uses, the token request, the store's write), starts the upstream
//! again, sends `notifications/elicitation/complete`, and the host's retry succeeds.
//! A 2026-07-28 host, which has no -32042, gets an `input_required` result with the
//! url elicitation and a `requestState` naming the flow; its retry waits for the
//! flow, then goes on as the call it is. Without the capability the host gets the
//! error naming `mcpx auth login NAME`, as before. No browser is ever opened.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use mcpx_protocol::error::URL_ELICITATION_REQUIRED;
use mcpx_protocol::jsonrpc::Json;
use mcpx_protocol::{Era, Frame, Params, Revision};
use mcpx_server::{Call, Fault, Reply};
use mcpx_transport::Peer;
use mcpx_transport::oauth::code::{self, Begun};
use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::{call_target, host_takes_url, input_responses, label_elicitation, random_token};
use crate::config::Transport;
use crate::error::GatewayError;
use crate::id::UpstreamId;
use crate::upstream::{self, State, Upstream};

/// The `requestState` prefix of a 2026-07-28 host's call that was asked to
/// authorize an upstream (followed by a random token).
pub(in crate::gateway) const LOGIN_STATE_PREFIX: &str = "mcpx-auth1:";

/// The `inputRequests` key of the url elicitation a 2026-07-28 host is asked.
const LOGIN_KEY: &str = "mcpx/authorize";

/// The most `requestState`s of unanswered asks kept (the oldest is forgotten).
const MAX_LOGIN_STATES: usize = 256;

/// One authorization flow for an upstream, shared by every host call that meets the
/// upstream meanwhile (one flow per upstream in this process; the callback port
/// keeps other processes out).
#[derive(Debug)]
struct LoginFlow {
    /// The upstream's name.
    upstream: String,
    /// The authorization URL the user must open.
    url: String,
    /// The elicitation's id, the same for every host told of it.
    id: String,
    /// The host sessions told, for `notifications/elicitation/complete`.
    peers: Mutex<Vec<Peer>>,
    /// How it ended: `None` while it runs, then whether the tokens are stored and
    /// the upstream is listed again.
    done: tokio::sync::watch::Sender<Option<bool>>,
}

/// A 2026-07-28 host's ask, by its `requestState` token: the flow, and the call
/// (method and name or URI) it belongs to.
#[derive(Debug)]
struct LoginState {
    flow: Arc<LoginFlow>,
    method: String,
    target: Option<String>,
}

/// The flows in progress, by upstream.
type Flows = tokio::sync::Mutex<HashMap<UpstreamId, Arc<LoginFlow>>>;

/// The logins hosts were asked to complete.
#[derive(Debug, Default)]
pub(in crate::gateway) struct Logins {
    /// The flows in progress, by upstream; shared with each flow's second half.
    flows: Arc<Flows>,
    /// The asks of 2026-07-28 hosts, oldest first.
    states: Mutex<VecDeque<(String, LoginState)>>,
}

/// Waits, up to a limit, until the gateway listed an upstream again after its
/// login; `None` when the gateway is gone. Given by the gateway.
pub(in crate::gateway) type Listed =
    Box<dyn FnOnce(Arc<Upstream>, Duration) -> Option<BoxFuture<'static, ()>> + Send>;

/// The upstream a host is offered to authorize, as the gateway knows it.
pub(in crate::gateway) struct LoginTo {
    pub(in crate::gateway) up: Arc<Upstream>,
    /// Put before the elicitation's message when namespaces are in use (E-10).
    pub(in crate::gateway) label: Option<String>,
    /// How long the user has (`askTimeoutMs`).
    pub(in crate::gateway) ask_timeout: Duration,
    pub(in crate::gateway) listed: Listed,
}

/// What a host call needs to be offered the authorization URL: taken before the
/// call runs, only for a host that can be asked (2025-11-25 with
/// `elicitation.url`) and a method that reaches one upstream.
#[derive(Debug)]
pub(in crate::gateway) struct Asker {
    host: Revision,
    peer: Option<Peer>,
    method: String,
    target: Option<String>,
}

impl Asker {
    /// `Some` when `call`'s failure for want of authorization may be turned into
    /// a url elicitation: -32042 (2025-11-25) or `input_required` (2026-07-28).
    pub(in crate::gateway) fn of(call: &Call) -> Option<Asker> {
        (matches!(
            call.method.as_str(),
            "tools/call" | "prompts/get" | "resources/read"
        ) && host_takes_url(call)
            && (mcpx_protocol::error::may_emit(call.host, URL_ELICITATION_REQUIRED)
                || call.host.era() == Era::Modern))
            .then(|| Asker {
                host: call.host,
                peer: call.peer.clone(),
                method: call.method.clone(),
                target: call_target(call),
            })
    }
}

/// The upstream a failed call names, when it failed because the upstream needs
/// authorization (its state `needs_authorization`, or the call's own refusal).
pub(in crate::gateway) fn needing_authorization(f: &Fault) -> Option<&str> {
    let d = f.data.as_ref()?;
    let refused = d.get("state").and_then(Value::as_str) == Some("needs_authorization")
        || d.get("cause").and_then(Value::as_str) == Some("unauthorized");
    refused
        .then(|| d.get("upstream").and_then(Value::as_str))
        .flatten()
}

impl Logins {
    /// `f`, the failure of a host call for want of a user's authorization of
    /// `to.up`, turned into -32042 with the authorization URL (or an
    /// `input_required` result for a 2026-07-28 host) when the upstream takes one;
    /// else `f` unchanged. `mint` gives a new flow its elicitation id.
    pub(in crate::gateway) async fn offer(
        &self,
        asker: Asker,
        f: Fault,
        to: LoginTo,
        mint: impl FnOnce() -> String,
    ) -> Result<Reply, Fault> {
        let up = to.up.clone();
        let label = to.label.clone();
        match self.flow(to, mint).await {
            Ok(Some(flow)) if asker.host.era() == Era::Modern => {
                self.ask_modern(asker, &up, label.as_deref(), flow).ok_or(f)
            }
            Ok(Some(flow)) => Err(ask_legacy(asker, &up, label.as_deref(), &flow)),
            Ok(None) => Err(f),
            Err(e) => {
                tracing::warn!(upstream = %up.id, "cannot ask a host to authorize: {e}");
                Err(f)
            }
        }
    }

    /// A 2026-07-28 host's `input_required` result for `flow`, remembered by its
    /// `requestState` for the retry (`None` without randomness).
    fn ask_modern(
        &self,
        asker: Asker,
        up: &Upstream,
        label: Option<&str>,
        flow: Arc<LoginFlow>,
    ) -> Option<Reply> {
        let token = random_token()?;
        let mut shown = json!({
            "mode": "url",
            "message": format!("Authorize mcpx to use upstream {}", up.id),
            "url": flow.url,
        });
        label_elicitation(label, &mut shown);
        {
            let mut states = self.states.lock();
            states.push_back((
                token.clone(),
                LoginState {
                    flow,
                    method: asker.method,
                    target: asker.target,
                },
            ));
            while states.len() > MAX_LOGIN_STATES {
                states.pop_front();
            }
        }
        let result = json!({
            "resultType": "input_required",
            "inputRequests": { LOGIN_KEY: {
                "method": "elicitation/create", "params": shown,
            }},
            "requestState": format!("{LOGIN_STATE_PREFIX}{token}"),
        });
        Some(Reply {
            result: Json::of_value(&result),
            revision: Revision::NEWEST,
        })
    }

    /// A 2026-07-28 host's retry after it was asked to authorize an upstream: the
    /// ask is spent; an accepted one waits for the flow (up to `ask_timeout`), and
    /// the call goes on with these params (the retry's, without `inputResponses` and
    /// `requestState`, which are mcpx's). A declined one, or a flow that failed,
    /// fails the call with the error naming `mcpx auth login`.
    pub(in crate::gateway) async fn retried(
        &self,
        call: &Call,
        ask_timeout: Duration,
    ) -> Result<Option<Params>, Fault> {
        let flow = self.spend(call)?;
        let failed = |why| {
            GatewayError::LoginFailed {
                upstream: flow.upstream.clone(),
                why,
            }
            .to_fault(call.host)
        };
        let action = input_responses(call)?
            .get(LOGIN_KEY)
            .and_then(|r| r.get("action"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        if action.as_deref() != Some("accept") {
            return Err(failed(
                "the user did not accept to open the authorization URL",
            ));
        }
        let mut done = flow.done.subscribe();
        let ended = tokio::time::timeout(ask_timeout, async {
            loop {
                if let Some(ok) = *done.borrow_and_update() {
                    return ok;
                }
                if done.changed().await.is_err() {
                    return false;
                }
            }
        })
        .await;
        match ended {
            Ok(true) => {}
            Ok(false) => return Err(failed("the authorization did not complete")),
            Err(_) => return Err(failed("no authorization came back within askTimeoutMs")),
        }
        let mut v: Value = call
            .params
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(json!({}));
        if let Some(o) = v.as_object_mut() {
            o.remove("inputResponses");
            o.remove("requestState");
        }
        Ok(Some(Params::of_value(&v)))
    }

    /// The flow a retry's `requestState` names, its ask spent. Checked before it is
    /// spent: a malformed retry leaves it for a good one.
    fn spend(&self, call: &Call) -> Result<Arc<LoginFlow>, Fault> {
        let state: String = call
            .params
            .as_ref()
            .and_then(|p| p.member("requestState"))
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or_default();
        let token = state.strip_prefix(LOGIN_STATE_PREFIX).unwrap_or_default();
        let known = self
            .states
            .lock()
            .iter()
            .find(|(t, _)| t == token)
            .map(|(_, s)| (s.method.clone(), s.target.clone()));
        let Some((method, target)) = known else {
            return Err(GatewayError::UnknownRequestState.to_fault(call.host));
        };
        if method != call.method || target != call_target(call) {
            return Err(GatewayError::ForeignRequestState.to_fault(call.host));
        }
        // The inputResponses are checked before the ask is spent, too.
        input_responses(call)?;
        let ask = {
            let mut m = self.states.lock();
            m.iter()
                .position(|(t, _)| t == token)
                .and_then(|at| m.remove(at))
        };
        // None: another retry with it came first.
        ask.map(|(_, s)| s.flow)
            .ok_or_else(|| GatewayError::UnknownRequestState.to_fault(call.host))
    }

    /// The flow in progress for `to.up`, else a new one: the callback listener
    /// bound, discovery and registration done (within `connectTimeoutMs`), the URL
    /// made, and a task waiting for the redirect. `None` when the upstream takes no
    /// user login (a refused header, client credentials) or another process holds
    /// its callback port.
    async fn flow(
        &self,
        to: LoginTo,
        mint: impl FnOnce() -> String,
    ) -> Result<Option<Arc<LoginFlow>>, mcpx_transport::TransportError> {
        let up = &to.up;
        let Some(user) = up.config.mcpx.user_auth.as_ref() else {
            return Ok(None);
        };
        let (url, sse) = match &up.config.transport {
            Transport::Http { url, .. } => (url, false),
            Transport::Sse { url, .. } => (url, true),
            Transport::Stdio { .. } => return Ok(None),
        };
        let Ok(url) = url::Url::parse(url) else {
            return Ok(None);
        };
        // Held across the flow's first half, so that concurrent calls share one flow.
        let mut flows = self.flows.lock().await;
        if let Some(flow) = flows.get(&up.id) {
            return Ok(Some(flow.clone()));
        }
        let http = code::Http::with_proxy(&up.config.mcpx.proxy, up.config.mcpx.connect_timeout);
        let extra = code::wanted_scope(user, url.as_str()).unwrap_or_default();
        // Bounded as a start is: the host's call waits for this half.
        let limit = up.config.mcpx.connect_timeout;
        let begun = tokio::time::timeout(
            limit,
            code::begin_login(&http, user, &url, sse, None, &extra),
        )
        .await
        .map_err(|_| {
            mcpx_transport::TransportError::NeedsAuthorization(format!(
                "OAuth discovery and registration took longer than {} s (connectTimeoutMs)",
                limit.as_secs()
            ))
        })??;
        let pending = match begun {
            Begun::Pending(p) => p,
            Begun::Elsewhere { port } => {
                tracing::info!(
                    upstream = %up.id,
                    "not asking a host to authorize: callback port {port} is taken (another login is running)"
                );
                return Ok(None);
            }
        };
        let flow = Arc::new(LoginFlow {
            upstream: up.id.to_string(),
            done: tokio::sync::watch::Sender::new(None),
            url: pending.authorization_url().to_string(),
            id: mint(),
            peers: Mutex::new(Vec::new()),
        });
        flows.insert(up.id.clone(), flow.clone());
        drop(flows);
        tokio::spawn(finish(self.flows.clone(), to, flow.clone(), pending, http));
        Ok(Some(flow))
    }
}

/// A 2025-11-25 host's -32042 for `flow`; its session is told when the flow
/// completes.
fn ask_legacy(asker: Asker, up: &Upstream, label: Option<&str>, flow: &LoginFlow) -> Fault {
    if let Some(peer) = asker.peer
        && mcpx_protocol::method::server_may_send("notifications/elicitation/complete", asker.host)
    {
        let mut peers = flow.peers.lock();
        // Once per session (a host that calls again is told once).
        peers.retain(|p| !p.is_closed() && p.session_id() != peer.session_id());
        peers.push(peer);
    }
    let mut shown = json!({
        "message": format!("Authorize mcpx to use upstream {}", up.id),
    });
    label_elicitation(label, &mut shown);
    GatewayError::NeedsLogin {
        upstream: up.id.to_string(),
        url: flow.url.clone(),
        message: shown["message"].as_str().unwrap_or_default().to_owned(),
        id: flow.id.clone(),
    }
    .to_fault(asker.host)
}

/// The flow's second half: waits up to `askTimeoutMs` for the redirect, stores the
/// tokens, starts the upstream again (unless it is up: its next request reads the
/// store), waits until it is listed (up to `connectTimeoutMs`), then tells every
/// host asked that the elicitation is complete.
async fn finish(
    flows: Arc<Flows>,
    to: LoginTo,
    flow: Arc<LoginFlow>,
    pending: Box<code::PendingLogin>,
    http: code::Http,
) {
    let LoginTo {
        up,
        ask_timeout,
        listed,
        ..
    } = to;
    let result = pending.finish(&http, ask_timeout).await;
    let limit = up.config.mcpx.connect_timeout;
    if let Err(e) = &result {
        tracing::warn!(upstream = %up.id, "authorization asked of a host failed: {e}");
    } else if let Some(listed) = listed(up.clone(), limit) {
        tracing::info!(upstream = %up.id, "authorized through a host's url elicitation");
        if up.status().state != State::Ready {
            up.supervisor().command(upstream::Command::Restart);
        }
        let mut status = up.supervisor().watch();
        let ready = async {
            // The restart is under way once the state left the one it failed in.
            while status.borrow_and_update().state != State::Ready {
                if status.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(limit, ready).await;
        listed.await;
    }
    {
        let mut flows = flows.lock().await;
        if flows.get(&up.id).is_some_and(|f| Arc::ptr_eq(f, &flow)) {
            flows.remove(&up.id);
        }
    }
    flow.done.send_replace(Some(result.is_ok()));
    if result.is_err() {
        return;
    }
    let peers = std::mem::take(&mut *flow.peers.lock());
    let Ok(params) = RawValue::from_string(json!({ "elicitationId": flow.id }).to_string()) else {
        return;
    };
    for peer in peers {
        let _ = peer
            .notify(Frame::notification(
                "notifications/elicitation/complete",
                Some(&params),
            ))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpx_protocol::error::INTERNAL_ERROR;

    #[test]
    fn only_a_refusal_for_want_of_authorization_names_an_upstream() {
        let mut f = Fault::new(INTERNAL_ERROR, "x", Revision::V2025_11_25);
        assert_eq!(needing_authorization(&f), None);
        f.data = Some(json!({"upstream": "up", "state": "needs_authorization"}));
        assert_eq!(needing_authorization(&f), Some("up"));
        f.data = Some(json!({"upstream": "up", "cause": "unauthorized"}));
        assert_eq!(needing_authorization(&f), Some("up"));
        f.data = Some(json!({"upstream": "up", "state": "crash_loop", "cause": "exited"}));
        assert_eq!(needing_authorization(&f), None);
    }
}
