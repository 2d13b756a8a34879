//! The ask bridge: server-to-client requests (sampling, elicitation, roots) between
//! an upstream and a host, within an era and across eras.
//!
//! * Legacy upstream, legacy host: the ask is relayed as a request on the host's
//!   session ([`Gateway::ask`]).
//! * Legacy upstream, 2026-07-28 host: the upstream call runs in a task of its own and
//!   is *parked* while the host answers an `input_required` result; the host's retry
//!   resumes it ([`Gateway::forward_parking`], [`Gateway::resume`]).
//! * 2026-07-28 upstream, legacy host: each `inputRequests` entry is put to the host as
//!   a request and the call retried with the answers ([`Gateway::ask_legacy_host_all`]).
//! * Elicitations are labelled with their upstream when namespaces are in use (E-10);
//!   url-mode completions go back to the host they came from (E-12).

use super::*;

/// What the ask bridge holds across requests.
#[derive(Debug)]
pub(super) struct AskBroker {
    /// Calls of modern hosts to legacy upstreams, parked while the host answers an
    /// `input_required` result, by `requestState` token.
    pub(super) parked: Mutex<HashMap<String, Parked>>,
    /// Counter for [`Parked::generation`].
    pub(super) parkings: std::sync::atomic::AtomicU64,
    /// Counter for minted elicitation ids.
    pub(super) elicitations: std::sync::atomic::AtomicU64,
    /// Url-mode elicitations relayed to 2025-11-25 hosts: (upstream, elicitationId) and
    /// the host session it went to, oldest first, so the upstream's
    /// `notifications/elicitation/complete` reaches that host only (E-12).
    pub(super) url_elicitations: Mutex<std::collections::VecDeque<(UpstreamId, String, Peer)>>,
    /// Asks relayed to legacy hosts with a progress token: the token mcpx gave the host
    /// (random, so no other host can reach the ask) to the asking upstream and its own
    /// token (C-C6).
    pub(super) ask_progress: Mutex<HashMap<String, (UpstreamId, Value)>>,
    /// Authorization flows a host was asked to complete, by upstream.
    pub(super) logins: super::authorize::Logins,
    /// 2026-07-28 hosts asked to authorize an upstream, by `requestState` token.
    pub(super) login_states: super::authorize::LoginStates,
}

impl AskBroker {
    pub(super) fn new() -> AskBroker {
        AskBroker {
            parked: Mutex::new(HashMap::new()),
            parkings: std::sync::atomic::AtomicU64::new(0),
            elicitations: std::sync::atomic::AtomicU64::new(1),
            url_elicitations: Mutex::new(std::collections::VecDeque::new()),
            ask_progress: Mutex::new(HashMap::new()),
            logins: tokio::sync::Mutex::new(HashMap::new()),
            login_states: Mutex::new(std::collections::VecDeque::new()),
        }
    }
}

/// The `requestState` prefix of a call mcpx parked (followed by a random token).
pub(super) const PARKED_PREFIX: &str = "mcpx1:";

/// The most questions one parked call may have open at once; more are refused.
pub(super) const MAX_OPEN_QUESTIONS: usize = 16;

/// How many url-mode elicitations relayed to 2025-11-25 hosts mcpx remembers for
/// their completion notifications (E-12); the oldest is forgotten first (2025-11-25
/// client/elicitation §Completion Notifications: clients ignore unknown ids anyway).
pub(super) const MAX_URL_ELICITATIONS: usize = 256;

/// A modern host's call to a legacy upstream, waiting for the host's answers.
#[derive(Debug)]
pub(super) struct Parked {
    upstream: Arc<Upstream>,
    /// The facts of the connection the upstream call runs on, and its generation.
    facts: Arc<ServerFacts>,
    conn_generation: u64,
    method: String,
    /// The tool or prompt name or resource URI the host's call named: a retry must
    /// name the same (E-30).
    target: Option<String>,
    events: tokio::sync::mpsc::Receiver<Box<CallEvent>>,
    task: tokio::task::JoinHandle<Result<Frame, ClientError>>,
    cancel: tokio_util::sync::CancellationToken,
    /// The upstream's questions put to the host and not yet answered, in asking order.
    open: Vec<Question>,
    /// Questions asked so far in this call: numbers the keys mcpx mints.
    asked: usize,
    /// Which parking this is: an expiry timer of an earlier one leaves it alone.
    generation: u64,
    /// Put before each elicitation message when namespaces are in use (E-10).
    label: Option<String>,
}

/// One server-to-client request of a legacy upstream, put to a modern host as an
/// `inputRequests` entry.
#[derive(Debug)]
pub(super) struct Question {
    key: String,
    method: String,
    params: Value,
    /// Where the host's answer goes (the upstream's pending request).
    reply: tokio::sync::oneshot::Sender<Result<Value, AskRefusal>>,
}

/// 128 random bits, hex: unguessable, so a `requestState` cannot be forged (E-13, E-30).
pub(super) fn random_token() -> Option<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).ok()?;
    Some(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Names, in an ask's `_meta`, the host request it is sent while serving
/// ([`mcpx_protocol::meta::RELATED_REQUEST`]): on stdio and HTTP+SSE nothing else
/// tells a host with several requests in flight which one asks. An upstream's value
/// names its own request, meaningless to the host, so it is replaced.
pub(super) fn stamp_related(params: &mut Value, id: &mcpx_protocol::Id) {
    if let Some(o) = params.as_object_mut()
        && let Some(m) = o
            .entry("_meta")
            .or_insert_with(|| json!({}))
            .as_object_mut()
    {
        m.insert(
            mcpx_protocol::meta::RELATED_REQUEST.to_owned(),
            serde_json::to_value(id).unwrap_or(Value::Null),
        );
    }
}

/// The tool or prompt name, or resource URI, a host's call names.
pub(super) fn call_target(call: &Call) -> Option<String> {
    let p = call.params.as_ref()?;
    let v = p.member("name").or_else(|| p.member("uri"))?;
    serde_json::from_str(v).ok()
}

/// A modern host's `inputResponses`: absent is none; anything but an object of
/// objects (every answer is a result object) is -32602 (2026-07-28
/// basic/patterns/mrtr: protocol errors in the retry are JSON-RPC errors).
pub(super) fn input_responses(call: &Call) -> Result<Map<String, Value>, Fault> {
    let Some(raw) = call
        .params
        .as_ref()
        .and_then(|p| p.member("inputResponses"))
    else {
        return Ok(Map::new());
    };
    let bad = |why: &str| fault(INVALID_PARAMS, format!("inputResponses {why}"), call.host);
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(m)) => match m.iter().find(|(_, v)| !v.is_object()) {
            Some((k, _)) => Err(bad(&format!("[{k:?}] must be a result object"))),
            None => Ok(m),
        },
        _ => Err(bad("must be an object")),
    }
}

/// Takes one question a legacy upstream asks during a parked call: refused when the
/// host cannot be asked it, answered from `supplied` when the host sent the answer
/// ahead, else left open for the host.
pub(super) fn take_question(
    call: &Call,
    p: &mut Parked,
    supplied: &mut Map<String, Value>,
    method: String,
    params: Option<Value>,
    reply: tokio::sync::oneshot::Sender<Result<Value, AskRefusal>>,
) {
    // 2026-07-28 basic/patterns/mrtr §Supported Requests: only these requests may
    // answer input_required (E-26).
    if !mcpx_protocol::method::MRTR_METHODS.contains(&p.method.as_str()) {
        let _ = reply.send(Err(AskRefusal::new(
            INTERNAL_ERROR,
            format!("the client cannot be asked during {}", p.method),
        )));
        return;
    }
    let cap = mcpx_protocol::method::ask_capability(&method).unwrap_or_default();
    // mrtr: never ask for what the client did not declare; the upstream hears
    // -32601, as from a client without the feature, and may degrade (E-25).
    if cap.is_empty() || call.client_capabilities.get(cap).is_none() {
        let _ = reply.send(Err(AskRefusal::new(
            METHOD_NOT_FOUND,
            format!("the client did not declare the capability {method} needs"),
        )));
        return;
    }
    if p.open.len() >= MAX_OPEN_QUESTIONS {
        let _ = reply.send(Err(AskRefusal::new(
            INTERNAL_ERROR,
            format!("more than {MAX_OPEN_QUESTIONS} questions at once"),
        )));
        return;
    }
    let mut params = params.unwrap_or(json!({}));
    tasks::strip_ask_task(&mut params);
    // E-16, E-23: a malformed sampling ask, or one with tools for a host without
    // sampling.tools, is the legacy upstream's error (-32602), not a question.
    if method == "sampling/createMessage"
        && let Err(e) = prepare_sampling(call, &mut params)
    {
        let _ = reply.send(Err(AskRefusal::new(INVALID_PARAMS, e.to_string())));
        return;
    }
    if method == "elicitation/create" {
        // E-11, E-18: checked and shaped for the host (2026 has no elicitationId); a
        // malformed ask, or a mode mcpx did not declare, is the upstream's -32602 (E-14).
        if let Err(e) = elicitation::lower(&mut params, call.host, String::new) {
            let _ = reply.send(Err(AskRefusal::new(INVALID_PARAMS, e.to_string())));
            return;
        }
        label_elicitation(p.label.as_deref(), &mut params);
    }
    if let Some(o) = params.as_object_mut() {
        // The upstream's request id means nothing to the host.
        if let Some(Value::Object(m)) = o.get_mut("_meta") {
            m.remove(mcpx_protocol::meta::RELATED_REQUEST);
            if m.is_empty() {
                o.remove("_meta");
            }
        }
    }
    p.asked += 1;
    // The upstream's own key when it names one (a fixed key lets a host answer ahead
    // and both eras see the same names), else one mcpx mints.
    let named = params
        .get("_meta")
        .and_then(|m| m.get(mcpx_protocol::meta::INPUT_KEY))
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty() && k.len() <= 128 && !p.open.iter().any(|q| q.key == *k))
        .map(str::to_owned);
    let key = named.unwrap_or_else(|| format!("{cap}_{}", p.asked));
    if let Some(answer) = supplied.remove(&key) {
        let _ = reply.send(Ok(answer));
        return;
    }
    // No ask permit (E-15): the host is not being asked until it chooses to retry, and
    // a round it abandons must not hold the upstream's permits for askTimeoutMs. Parked
    // calls are bounded by maxParkedCalls instead.
    p.open.push(Question {
        key,
        method,
        params,
        reply,
    });
}

/// Checks a sampling ask and lowers it to the revision of the host of `call` (E-16:
/// malformed asks are not forwarded; E-23: tools only to a host that declared
/// `sampling.tools`; E-7: what the host's revision cannot represent is refused, never
/// cut). Everything else passes unchanged (E-8, E-27, E-28).
pub(super) fn prepare_sampling(call: &Call, params: &mut Value) -> Result<(), SamplingRefusal> {
    check_sampling_request(params)?;
    if let Some(field) = sampling_tool_fields(params)
        && call
            .client_capabilities
            .pointer("/sampling/tools")
            .is_none()
    {
        return Err(SamplingRefusal::ToolsNotDeclared(field));
    }
    lower_sampling_request(params, call.host)
}

/// Forgets an ask's progress route when the ask ends (answered, failed or dropped).
pub(super) struct ProgressRoute<'a> {
    routes: &'a Mutex<HashMap<String, (UpstreamId, Value)>>,
    token: String,
}

impl Drop for ProgressRoute<'_> {
    fn drop(&mut self) {
        {
            let mut m = self.routes.lock();
            m.remove(&self.token);
        }
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
pub(super) struct Asks<'a> {
    running: Option<Box<futures_util::stream::FuturesUnordered<AskFuture<'a>>>>,
}

/// One ask being put to a host, answering the upstream when it ends.
type AskFuture<'a> = std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

impl<'a> Asks<'a> {
    /// Whether an ask was ever started (the call's loop then polls [`Asks::next`]).
    pub(super) fn started(&self) -> bool {
        self.running.is_some()
    }

    fn start(&mut self, ask: AskFuture<'a>) {
        self.running.get_or_insert_with(Box::default).push(ask);
    }

    /// Runs the asks; resolves when one has ended, and never while none runs.
    pub(super) async fn next(&mut self) {
        use futures_util::StreamExt;
        match self.running.as_mut() {
            Some(r) if !r.is_empty() => {
                r.next().await;
            }
            _ => std::future::pending().await,
        }
    }
}

/// A permit for one sampling or elicitation ask an upstream puts to a host (register
/// E-15): each upstream may have `askMaxPending` of them held by mcpx at once; a further
/// one is refused with -32603. Client rate limiting is a SHOULD for elicitation in
/// 2025-06-18 and 2025-11-25 client/elicitation §Security Considerations and for
/// sampling in every revision (client/sampling §Security Considerations). Roots are
/// not limited.
pub(super) fn ask_permit(
    asks: &Arc<tokio::sync::Semaphore>,
    method: &str,
) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, AskRefusal> {
    if !matches!(method, "sampling/createMessage" | "elicitation/create") {
        return Ok(None);
    }
    asks.clone().try_acquire_owned().map(Some).map_err(|_| {
        AskRefusal::new(
            INTERNAL_ERROR,
            format!("too many pending requests: {method} refused"),
        )
    })
}

/// E-10: puts `label` ("[<namespace>] ") before an elicitation's message. 2025-11-25
/// client/elicitation §Security Considerations: clients MUST make clear which server
/// asks; behind mcpx the host sees only mcpx, so the message names the upstream.
/// Labels the elicitations of `inputRequests` (E-10) and removes their
/// `elicitationId`, which 2026 lacks (E-12); whether anything changed.
pub(super) fn relabel_input_requests(
    label: Option<&str>,
    requests: &mut Map<String, Value>,
) -> bool {
    let mut changed = false;
    for req in requests.values_mut() {
        if req.get("method").and_then(Value::as_str) != Some("elicitation/create") {
            continue;
        }
        if let Some(params) = req.get_mut("params") {
            if let Some(o) = params.as_object_mut() {
                changed |= o.remove("elicitationId").is_some();
            }
            if label.is_some() && params.get("message").is_some_and(Value::is_string) {
                label_elicitation(label, params);
                changed = true;
            }
        }
    }
    changed
}

pub(super) fn label_elicitation(label: Option<&str>, params: &mut Value) {
    if let (Some(label), Some(Value::String(m))) = (label, params.get_mut("message")) {
        *m = format!("{label}{m}");
    }
}

/// Whether the host of `call` can be put a url-mode elicitation: its revision has url
/// mode and it declared `elicitation.url` (2025-11-25 client/elicitation
/// §Capabilities: an empty `elicitation` object means form mode only).
pub(super) fn host_takes_url(call: &Call) -> bool {
    // `get`, not `pointer`: a JSON pointer is split and unescaped into new strings,
    // and a host's every `tools/call` asks this (callgrind: 2 allocations a call).
    elicitation::shape(call.host).modes
        && call
            .client_capabilities
            .get("elicitation")
            .and_then(|e| e.get("url"))
            .is_some()
}

/// Whether mcpx may send `method` to the legacy host of `call`:
///
/// * register A-C8 (every legacy basic/lifecycle §Initialization: the server "SHOULD
///   NOT send requests other than pings and logging before receiving the initialized
///   notification", read literally): no request but `ping` before the host's
///   `notifications/initialized`; notifications are not restricted;
/// * register E-2 (2025-11-25 basic/lifecycle §Operation: "Only use capabilities that
///   were successfully negotiated"): `roots/list`, `sampling/createMessage` and
///   `elicitation/create` only when the host declared `roots`, `sampling` or
///   `elicitation` at `initialize` (`call.client_capabilities`, the session's).
pub(super) fn host_may_be_asked(call: &Call, method: &str) -> Result<(), AskRefusal> {
    let Some(p) = &call.peer else {
        return Ok(());
    };
    if method != "ping" && !p.is_initialized() {
        return Err(AskRefusal::new(
            INTERNAL_ERROR,
            format!(
                "the client has not sent notifications/initialized, so it cannot be sent {method}"
            ),
        ));
    }
    let Some(cap) = mcpx_protocol::method::ask_capability(method) else {
        return Ok(());
    };
    if call.client_capabilities.get(cap).is_none() {
        return Err(AskRefusal::new(
            INTERNAL_ERROR,
            format!("the client did not declare the {cap} capability needed for {method}"),
        ));
    }
    Ok(())
}

impl Gateway {
    /// A modern host's call to a legacy upstream. The upstream may ask the client
    /// something (sampling, elicitation, roots) with wire requests in the middle of the
    /// call; a modern host can only be asked with an `input_required` result (MRTR). So
    /// the upstream call runs in its own task; when it asks, mcpx gathers the questions
    /// it sends back to back, parks the call, answers the host `input_required` with a
    /// `requestState` naming the parked call, and resumes it when the host retries
    /// with the answers (register E-1, E-13, E-24).
    pub(super) async fn forward_parking(
        self: &Arc<Self>,
        call: &Call,
        up: &Arc<Upstream>,
        conn: Connection,
        method: &str,
        params: &Params,
        idempotent: bool,
    ) -> Result<Reply, Fault> {
        // Answers the host sent ahead, for questions the upstream has yet to ask.
        let supplied = input_responses(call)?;
        // A legacy upstream logs at its session's level: a modern host's per-request
        // logLevel lowers it like a legacy host's logging/setLevel (H9, C-C8).
        if let Some(log) = &call.log {
            self.lower_upstream_log_level(log.threshold()).await;
        }
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let cancel = tokio_util::sync::CancellationToken::new();
        let opts = CallOptions {
            events: Some(tx),
            progress: call.progress.is_some(),
            log_level: call.log.as_ref().map(|l| l.threshold().as_str().to_owned()),
            client_capabilities: no_capabilities(),
            timeout: up.config.mcpx.call_timeout,
            max_time: self.config().global.max_call_time,
            cancel: cancel.clone(),
            idempotent,
            attribute_unsolicited: true,
            caller_meta_is_envelope: true,
            // The host's request span is the parent (this path has no client span).
            trace: mcpx_telemetry::span::outgoing(&tracing::Span::current(), call.trace.as_ref()),
        };
        // inputResponses and requestState are mcpx's to consume: a legacy revision
        // has neither.
        let text = if params.member("inputResponses").is_some()
            || params.member("requestState").is_some()
        {
            let mut v: Value = serde_json::from_str(params).unwrap_or(json!({}));
            if let Some(o) = v.as_object_mut() {
                o.remove("inputResponses");
                o.remove("requestState");
            }
            Params::of_value(&v)
        } else {
            params.clone()
        };
        let method_owned = method.to_owned();
        let facts = conn.facts();
        let conn_generation = up.supervisor().ready().map_or(0, |(g, _)| g);
        let leg = self.upstream_leg(call, up, method);
        // Boxed: see mcpx_transport::stdio (the harness moves a spawned future by value).
        let task = tokio::spawn(Box::pin(async move {
            let outcome = conn.call(&method_owned, Some(&text), opts).await;
            if let Some(leg) = leg {
                leg.end(&outcome);
            }
            outcome
        }));
        let parked = Parked {
            upstream: up.clone(),
            facts,
            conn_generation,
            method: method.to_owned(),
            target: call_target(call),
            events: rx,
            task,
            cancel,
            open: Vec::new(),
            asked: 0,
            generation: 0,
            label: self.label(up),
        };
        self.run_parked(call, parked, supplied).await
    }

    /// Drives a (possibly resumed) parked call until it answers, or asks questions
    /// `supplied` does not answer.
    pub(super) async fn run_parked(
        self: &Arc<Self>,
        call: &Call,
        mut p: Parked,
        mut supplied: Map<String, Value>,
    ) -> Result<Reply, Fault> {
        let name = p.upstream.id.to_string();
        let facts = p.facts.clone();
        // Set while questions are open: when the gathering window closes.
        let mut gathered_by: Option<tokio::time::Instant> = None;
        loop {
            let window = async {
                match gathered_by {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                // Events were sent before the call ended: relay them first.
                biased;
                joined = &mut p.task, if p.events.is_empty() => {
                    let outcome = joined.map_err(|e| fault(INTERNAL_ERROR, format!("upstream {name}: {e}"), call.host))?;
                    while let Ok(ev) = p.events.try_recv() {
                        if !matches!(*ev, CallEvent::Ask { .. }) {
                            let _ = self.on_event(call, &facts, &name, *ev).await;
                        }
                    }
                    return match outcome {
                        Ok(frame) => self.answer(call, &facts, &name, &p.method, frame),
                        Err(e) => {
                            // As in `forward`: the supervisor hears of a dead connection.
                            if e.breaks_connection() {
                                p.upstream.lost(p.conn_generation, Cause::Client(e.clone()));
                            }
                            Err(GatewayError::Client(e).to_fault(call.host))
                        }
                    };
                }
                () = call.cancel.cancelled() => {
                    p.cancel.cancel();
                    return Err(fault(INTERNAL_ERROR, "cancelled".into(), call.host));
                }
                Some(ev) = p.events.recv() => match *ev {
                    CallEvent::Ask { method, params, reply } => {
                        // E-9: a url-mode question the host cannot take ends its
                        // request; the upstream hears "cancel" and its call is cancelled.
                        if mcpx_protocol::method::MRTR_METHODS.contains(&p.method.as_str())
                            && let Some(f) = self.url_refusal(call, &name, &method, params.as_ref())
                        {
                            let _ = reply.send(Ok(json!({ "action": "cancel" })));
                            p.cancel.cancel();
                            return Err(f);
                        }
                        take_question(call, &mut p, &mut supplied, method, params, reply);
                        // Each question restarts the window: questions sent back to
                        // back go to the host in one round.
                        if !p.open.is_empty() {
                            gathered_by = Some(tokio::time::Instant::now() + self.config().global.ask_gather);
                        }
                    }
                    other => {
                        let _ = self.on_event(call, &facts, &name, other).await;
                    }
                },
                () = window => {
                    if !self.may_park() {
                        // Too many calls already wait for hosts' answers: the upstream
                        // hears -32603 for these questions and degrades or fails.
                        for q in p.open.drain(..) {
                            let _ = q.reply.send(Err(AskRefusal::new(INTERNAL_ERROR, format!(
                                    "too many calls waiting for clients' answers (maxParkedCalls {})",
                                    self.config().global.max_parked
                                ))));
                        }
                        gathered_by = None;
                        continue;
                    }
                    return self.put_questions(call, p, None);
                }
            }
        }
    }

    /// Parks `p` and answers the host `input_required` with its open questions, under
    /// a new `requestState` or, when asking again for what a retry lacked, the same
    /// one (E-24).
    pub(super) fn put_questions(
        self: &Arc<Self>,
        call: &Call,
        p: Parked,
        token: Option<String>,
    ) -> Result<Reply, Fault> {
        let token = match token.or_else(random_token) {
            Some(t) => t,
            None => {
                p.cancel.cancel();
                return Err(fault(INTERNAL_ERROR, "no randomness".into(), call.host));
            }
        };
        let requests: Map<String, Value> = p
            .open
            .iter()
            .map(|q| {
                (
                    q.key.clone(),
                    json!({ "method": q.method, "params": q.params }),
                )
            })
            .collect();
        let result = json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": format!("{PARKED_PREFIX}{token}"),
        });
        self.park(token, p);
        Ok(Reply {
            result: Json::of_value(&result),
            revision: Revision::NEWEST,
        })
    }

    /// Whether another call may be parked (`mcpx.limits.maxParkedCalls`).
    pub(super) fn may_park(&self) -> bool {
        self.asks.parked.lock().len() < self.config().global.max_parked
    }

    pub(super) fn park(self: &Arc<Self>, token: String, mut p: Parked) {
        let generation = self
            .asks
            .parkings
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        p.generation = generation;
        {
            let mut parked = self.asks.parked.lock();
            parked.insert(token.clone(), p);
        }
        // A host that never comes back: after the ask timeout an open elicitation is
        // answered "cancel" and any other question with an error, and the upstream
        // call is cancelled (E-6, E-24).
        let gw = Arc::downgrade(self);
        let timeout = self.config().global.ask_timeout;
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            let Some(gw) = gw.upgrade() else { return };
            let stale = {
                let mut m = gw.asks.parked.lock();
                match m.get(&token) {
                    Some(p) if p.generation == generation => m.remove(&token),
                    _ => None,
                }
            };
            if let Some(p) = stale {
                for q in p.open {
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
                p.cancel.cancel();
            }
        });
    }

    /// A modern host's retry of a parked call: hand its answers to the upstream and go
    /// on.
    pub(super) async fn resume(self: &Arc<Self>, call: &Call, state: &str) -> Result<Reply, Fault> {
        let token = state.strip_prefix(PARKED_PREFIX).unwrap_or_default();
        let parked = self.asks.parked.lock().remove(token);
        let Some(mut p) = parked else {
            // 2026-07-28 basic/patterns/mrtr: state that fails its integrity check
            // is rejected; an unknown token is what a forged or replayed one is.
            return Err(fault(
                INVALID_PARAMS,
                "unknown or expired requestState".into(),
                call.host,
            ));
        };
        if !p.upstream.is_current() {
            // A reload replaced or removed the upstream the call was parked at: its
            // call is gone with its connection.
            p.cancel.cancel();
            return Err(GatewayError::Removed {
                upstream: p.upstream.id.clone(),
            }
            .to_fault(call.host));
        }
        let checked = if call.method != p.method || call_target(call) != p.target {
            Err(fault(
                INVALID_PARAMS,
                "requestState belongs to another request".into(),
                call.host,
            ))
        } else {
            input_responses(call)
        };
        let mut supplied = match checked {
            Ok(s) => s,
            Err(f) => {
                // The parked call stays for a well-formed retry.
                {
                    let mut m = self.asks.parked.lock();
                    m.insert(token.to_owned(), p);
                }
                return Err(f);
            }
        };
        for q in std::mem::take(&mut p.open) {
            match supplied.remove(&q.key) {
                Some(answer) => {
                    let _ = q.reply.send(Ok(answer));
                }
                None => p.open.push(q),
            }
        }
        if !p.open.is_empty() {
            // mrtr: a retry missing answers is asked again for them (E-24).
            return self.put_questions(call, p, Some(token.to_owned()));
        }
        self.run_parked(call, p, supplied).await
    }

    /// Asks a legacy host, with a wire request in its revision, what a modern
    /// upstream's `inputRequests` entry asks (register E-1, E-11).
    /// Puts each of a 2026-07-28 upstream's `inputRequests` (`requests`, by key) to
    /// the legacy host of `call` with [`Self::ask_legacy_host`], one after the other;
    /// the answers by the same keys. A question the host cannot be shown or refuses
    /// fails the whole (E-9: a url-mode elicitation is not retried, the host learns the
    /// URL from the error).
    pub(super) async fn ask_legacy_host_all<'r>(
        &self,
        call: &Call,
        upstream: &str,
        requests: impl Iterator<Item = (&'r String, &'r Value)>,
    ) -> Result<Map<String, Value>, Fault> {
        let mut responses = Map::new();
        for (key, req) in requests {
            let method = req
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let params = req.get("params").cloned();
            if let Some(f) = self.url_refusal(call, upstream, method, params.as_ref()) {
                return Err(f);
            }
            let answer = self
                .ask_legacy_host(call, upstream, method, params)
                .await
                .map_err(|r| fault(r.code, r.message, call.host))?;
            responses.insert(key.clone(), answer);
        }
        Ok(responses)
    }

    pub(super) async fn ask_legacy_host(
        &self,
        call: &Call,
        upstream: &str,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, AskRefusal> {
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
        let mut params = params.unwrap_or(json!({}));
        // The modern upstream cannot be told (its ask has no error channel): the host's
        // request fails, -32602 when the host lacks sampling.tools (E-23), else -32603
        // (E-7, E-16).
        if method == "sampling/createMessage"
            && let Err(e) = prepare_sampling(call, &mut params)
        {
            let code = match e {
                SamplingRefusal::ToolsNotDeclared(_) => INVALID_PARAMS,
                _ => INTERNAL_ERROR,
            };
            return Err(AskRefusal::new(code, format!("upstream {upstream}: {e}")));
        }
        let up = self.upstream(upstream);
        if method == "elicitation/create" {
            // E-11, E-18: shaped for the host (a 2025-11-25 url-mode ask gets a minted
            // elicitationId); what the host cannot be shown fails its request, since a
            // modern upstream has no error channel for it.
            elicitation::lower(&mut params, call.host, || {
                format!("mcpx-{}", self.next_elicitation())
            })
            .map_err(|e| AskRefusal::new(INTERNAL_ERROR, format!("upstream {upstream}: {e}")))?;
            label_elicitation(
                up.as_ref().and_then(|u| self.label(u)).as_deref(),
                &mut params,
            );
        }
        let _permit = match &up {
            Some(up) => ask_permit(&up.asks, method)?,
            None => None,
        };
        stamp_related(&mut params, &call.id);
        let raw = RawValue::from_string(params.to_string())
            .map_err(|e| AskRefusal::new(INTERNAL_ERROR, e.to_string()))?;
        match call
            .ctx
            .request(method, Some(&raw), self.config().global.ask_timeout)
            .await
        {
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

    /// E-10: "[<namespace>] ", put before upstream `i`'s elicitation messages when
    /// namespaces are in use (several upstreams; names are then prefixed too).
    pub(super) fn label(&self, up: &Upstream) -> Option<String> {
        self.namespaced().then(|| format!("[{}] ", up.namespace))
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
    pub(super) fn url_refusal(
        &self,
        call: &Call,
        name: &str,
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
        label_elicitation(
            self.upstream(name)
                .and_then(|up| self.label(&up))
                .as_deref(),
            &mut shown,
        );
        let message = shown["message"].as_str().unwrap_or_default().to_owned();
        let text = format!(
            "upstream {name} needs the user to open {url} ({message}); this client cannot show url-mode elicitations"
        );
        if !mcpx_protocol::error::may_emit(call.host, URL_ELICITATION_REQUIRED) {
            return Some(fault(INTERNAL_ERROR, text, call.host));
        }
        let id = params
            .get("elicitationId")
            .and_then(Value::as_str)
            .map_or_else(
                || format!("mcpx-{}", self.next_elicitation()),
                str::to_owned,
            );
        let mut f = fault(URL_ELICITATION_REQUIRED, text, call.host);
        f.data = Some(json!({ "elicitations": [{
            "mode": "url", "elicitationId": id, "url": url, "message": message,
        }]}));
        Some(f)
    }

    /// Remembers that upstream `i`'s url-mode elicitation `id` went to `peer`, when the
    /// host's revision has completion notifications (E-12: 2025-11-25 only).
    pub(super) fn note_url_elicitation(
        &self,
        host: Revision,
        up: &UpstreamId,
        id: &str,
        peer: &Peer,
    ) {
        if !mcpx_protocol::method::server_may_send("notifications/elicitation/complete", host) {
            return;
        }
        {
            let mut m = self.asks.url_elicitations.lock();
            m.retain(|(u, e, _)| !(u == up && e == id));
            m.push_back((up.clone(), id.to_owned(), peer.clone()));
            while m.len() > MAX_URL_ELICITATIONS {
                m.pop_front();
            }
        }
    }

    /// E-12: the elicitations of an upstream's -32042 that reach a 2025-11-25 host
    /// unchanged (A-C11) are remembered like relayed ones, for their completion.
    pub(super) fn note_required_elicitations(&self, call: &Call, name: &str, data: Option<&str>) {
        let (Some(up), Some(peer)) = (self.upstream(name), &call.peer) else {
            return;
        };
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
                self.note_url_elicitation(call.host, &up.id, id, peer);
            }
        }
    }

    /// E-12: an upstream's `notifications/elicitation/complete` goes, unchanged, to
    /// the 2025-11-25 host its elicitation went to, once; one naming an elicitation
    /// mcpx did not relay that way (unknown, completed, or put to a 2026-07-28 host,
    /// whose revision has no such notification) is dropped (2025-11-25
    /// client/elicitation §Completion Notifications: only to the client that
    /// initiated the elicitation; clients ignore unknown ids).
    pub(super) async fn relay_elicitation_complete(&self, up: &UpstreamId, frame: &Frame) {
        let id = frame
            .params()
            .and_then(|p| mcpx_protocol::jsonrpc::member(p, "elicitationId"))
            .and_then(|v| serde_json::from_str::<String>(v).ok());
        let peer = id.as_ref().and_then(|id| {
            let mut m = self.asks.url_elicitations.lock();
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

    /// A 2026-07-28 upstream's `input_required` result passes to a modern host as it
    /// is (its `requestState` untouched: E-32), except that elicitation messages are
    /// labelled when namespaces are in use (E-10) and an `elicitationId`, which 2026
    /// lacks, is removed (E-12). `None` when nothing changes.
    pub(super) fn relabel_input_required(&self, name: &str, result: &str) -> Option<Json> {
        let label = self.upstream(name).and_then(|up| self.label(&up));
        if label.is_none() && !result.contains("\"elicitationId\"") {
            return None;
        }
        let mut v: Value = serde_json::from_str(result).ok()?;
        if v.get("resultType").and_then(Value::as_str) != Some("input_required") {
            return None;
        }
        let requests = v.get_mut("inputRequests").and_then(Value::as_object_mut)?;
        relabel_input_requests(label.as_deref(), requests).then(|| Json::of_value(&v))
    }

    /// Shapes a 2026-07-28 upstream's `inputRequests` for a modern host, in place, as
    /// [`Self::relabel_input_required`] does (an upstream task's, ext-tasks §Input
    /// Requests, are the same requests).
    pub(super) fn relabel_requests(&self, name: &str, requests: &mut Map<String, Value>) {
        let label = self.upstream(name).and_then(|up| self.label(&up));
        relabel_input_requests(label.as_deref(), requests);
    }

    pub(super) fn next_elicitation(&self) -> u64 {
        self.asks
            .elicitations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Relays one event of an upstream call. `Some` when it ends the host's request
    /// (E-9); the caller then cancels the upstream call.
    pub(super) async fn on_event(
        &self,
        call: &Call,
        facts: &ServerFacts,
        name: &str,
        ev: CallEvent,
    ) -> Option<Fault> {
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
                if let (Some(l), Some(level)) = (&call.log, Level::parse(&level)) {
                    l.log(level, logger.as_deref(), &data).await;
                }
            }
            CallEvent::Ask {
                method,
                params,
                reply,
            } => {
                if let Some(f) = self.ask_ends_request(call, facts, name, &method, params.as_ref())
                {
                    let _ = reply.send(Ok(json!({ "action": "cancel" })));
                    return Some(f);
                }
                let mut reply = reply;
                tokio::select! {
                    answer = self.ask(call, facts, name, &method, params) => {
                        let _ = reply.send(answer);
                    }
                    // The upstream withdrew its question: dropping the ask withdraws it
                    // from the host too.
                    () = reply.closed() => {}
                }
            }
        }
        None
    }

    /// [`Self::on_event`], except that an ask is started in `asks`, beside the call,
    /// instead of awaited: the caller polls `asks` with the call.
    pub(super) async fn on_event_beside<'a>(
        &'a self,
        call: &'a Call,
        facts: &'a ServerFacts,
        name: &'a str,
        ev: CallEvent,
        asks: &mut Asks<'a>,
    ) -> Option<Fault> {
        let CallEvent::Ask {
            method,
            params,
            reply,
        } = ev
        else {
            return self.on_event(call, facts, name, ev).await;
        };
        if let Some(f) = self.ask_ends_request(call, facts, name, &method, params.as_ref()) {
            let _ = reply.send(Ok(json!({ "action": "cancel" })));
            return Some(f);
        }
        asks.start(Box::pin(async move {
            let mut reply = reply;
            tokio::select! {
                answer = self.ask(call, facts, name, &method, params) => {
                    let _ = reply.send(answer);
                }
                // Withdrawn by the upstream: so from the host too (see `on_event`).
                () = reply.closed() => {}
            }
        }));
        None
    }

    /// E-9: a url-mode elicitation the legacy host of `call` cannot take ends its
    /// request (this fault); the caller answers the upstream's ask "cancel".
    fn ask_ends_request(
        &self,
        call: &Call,
        facts: &ServerFacts,
        name: &str,
        method: &str,
        params: Option<&Value>,
    ) -> Option<Fault> {
        if facts.era == Era::Legacy && call.host.era() == Era::Legacy && call.peer.is_some() {
            self.url_refusal(call, name, method, params)
        } else {
            None
        }
    }

    /// Relays a server-to-client request from an upstream to the host, within one era.
    pub(super) async fn ask(
        &self,
        call: &Call,
        facts: &ServerFacts,
        name: &str,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, AskRefusal> {
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
        let mut params = params.unwrap_or(json!({}));
        // E-7, E-16, E-23: the asking upstream hears -32602.
        if method == "sampling/createMessage" {
            prepare_sampling(call, &mut params)
                .map_err(|e| AskRefusal::new(INVALID_PARAMS, e.to_string()))?;
        }
        let up = self.upstream(name);
        if method == "elicitation/create" {
            // E-11, E-18: shaped for the host; what it cannot be shown, a malformed
            // ask, or a mode mcpx did not declare is the upstream's -32602 (E-14).
            let mode = elicitation::lower(&mut params, call.host, || {
                format!("mcpx-{}", self.next_elicitation())
            })
            .map_err(|e| AskRefusal::new(INVALID_PARAMS, e.to_string()))?;
            label_elicitation(
                up.as_ref().and_then(|u| self.label(u)).as_deref(),
                &mut params,
            );
            if let (elicitation::Mode::Url, Some(up), Some(peer), Some(id)) = (
                mode,
                &up,
                &call.peer,
                params.get("elicitationId").and_then(Value::as_str),
            ) {
                self.note_url_elicitation(call.host, &up.id, id, peer);
            }
        }
        let _permit = match &up {
            Some(up) => ask_permit(&up.asks, method)?,
            None => None,
        };
        // C-C12: the upstream's own related-task (its task's id, when the ask came from
        // one), kept for the answer that goes back to it.
        let theirs = params
            .get("_meta")
            .and_then(|m| m.get(meta::RELATED_TASK))
            .cloned();
        stamp_related(&mut params, &call.id);
        tasks::ask_params(&mut params, call);
        let _route = self.route_ask_progress(name, &mut params);
        let raw = RawValue::from_string(params.to_string())
            .map(Some)
            .map_err(|e| AskRefusal::new(INTERNAL_ERROR, e.to_string()))?;
        // 2025-11-25 basic/utilities/tasks §Input Required Status: a gateway task whose
        // work waits on this ask is input_required until it is answered (C-C12).
        let _waiting = self.tasks.waiting(call);
        let timeout = self.config().global.ask_timeout;
        let sent = match (&call.related_task, &call.peer) {
            // A task's work outlives the request that created it (answered with the
            // CreateTaskResult), so its asks go on the session: on HTTP the GET stream
            // (§Input Required Status: "clients SHOULD expect messages to be delivered
            // on any SSE stream, including the HTTP GET stream").
            (Some(_), Some(peer)) => peer.request(method, raw.as_deref(), timeout).await,
            _ => call.ctx.request(method, raw.as_deref(), timeout).await,
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

    /// C-C6 (2025-11-25 basic/utilities/progress: "Either side can send progress
    /// notifications"): an ask a legacy upstream sends with a progress token reaches the
    /// legacy host with a token of mcpx's own, so the host's progress on it can go back
    /// to that upstream alone, with the upstream's token. Returns the route, forgotten
    /// when dropped.
    pub(super) fn route_ask_progress(
        &self,
        upstream: &str,
        params: &mut Value,
    ) -> Option<ProgressRoute<'_>> {
        let id = self.upstream(upstream)?.id.clone();
        let meta = params.get_mut("_meta")?.as_object_mut()?;
        let theirs = meta.get(meta::PROGRESS_TOKEN)?.clone();
        let token = format!("mcpx-ask-{}", random_token()?);
        meta.insert(meta::PROGRESS_TOKEN.to_owned(), json!(token));
        self.asks
            .ask_progress
            .lock()
            .insert(token.clone(), (id, theirs));
        Some(ProgressRoute {
            routes: &self.asks.ask_progress,
            token,
        })
    }

    /// A legacy host's `notifications/progress`: relayed to the upstream whose ask it
    /// reports on, if that ask is still open and the upstream's revision lets a client
    /// send progress (C-C6: never a modern upstream). Anything else is dropped.
    pub(super) async fn relay_ask_progress(&self, params: Option<&str>) {
        let Some(mut params) = params.and_then(|p| serde_json::from_str::<Value>(p).ok()) else {
            return;
        };
        let Some(token) = params.get("progressToken").and_then(Value::as_str) else {
            return;
        };
        let route = self.asks.ask_progress.lock().get(token).cloned();
        let Some((id, theirs)) = route else {
            return;
        };
        let conn = self.upstream(id.as_str()).and_then(|u| u.ready());
        let Some(conn) = conn else { return };
        if !mcpx_protocol::method::client_may_send("notifications/progress", conn.facts().revision)
        {
            return;
        }
        params["progressToken"] = theirs;
        let _ = conn.notify("notifications/progress", Some(params)).await;
    }
}
