//! Forwarding: lists answered from the catalog, routing by name or URI, and one
//! upstream call with its events relayed and its answer taken for the host.

use super::*;

/// A `tools/call` or `prompts/get` routed by its `params.name`.
pub(super) struct Routed<'a> {
    /// The upstream.
    pub(super) upstream: Arc<Upstream>,
    /// The name the host called (mcpx's, possibly namespaced).
    pub(super) exposed: Cow<'a, str>,
    /// The params to send upstream: the host's, borrowed, when the names agree; renamed
    /// otherwise.
    pub(super) params: Cow<'a, Params>,
    /// A tool's facts, read under the same catalog lock as its name (the defaults for a
    /// prompt).
    pub(super) tool: ToolFacts,
}

/// How many `input_required` rounds mcpx answers for a legacy host before giving up.
pub(super) const MAX_INPUT_ROUNDS: usize = 10;

/// A `resources/read` result of a URI the host named `exposed` and the upstream knows
/// as `theirs` (see [`Catalog::resource`]): its contents name the URI as the host does.
pub(super) fn expose_contents(mut reply: Reply, exposed: &str, theirs: &str) -> Reply {
    let Ok(mut v) = serde_json::from_str::<Value>(reply.result.as_str()) else {
        return reply;
    };
    let mut changed = false;
    if let Some(items) = v.get_mut("contents").and_then(Value::as_array_mut) {
        for item in items {
            if item.get("uri").and_then(Value::as_str) == Some(theirs) {
                item["uri"] = json!(exposed);
                changed = true;
            }
        }
    }
    if changed {
        reply.result = Json::of_value(&v);
    }
    reply
}

impl Gateway {
    /// The upstream of a `tools/call` or `prompts/get`, the upstream's own name for it,
    /// and the params to send it: the host's text as it came when the name passes
    /// through unchanged (nothing re-encoded), else with `name` rewritten.
    ///
    /// A name the catalog does not list, in the namespace of an upstream that is not
    /// ready, gets that upstream's state and cause (its tools may simply not be known
    /// yet), never "unknown tool".
    pub(super) fn route_name<'a>(
        &self,
        call: &'a Call,
        prompts: bool,
    ) -> Result<Routed<'a>, Fault> {
        let required = || fault(INVALID_PARAMS, "params.name is required".into(), call.host);
        let raw = call.params.as_ref().ok_or_else(required)?;
        // Where the decoder saw `name` (a walk when it could not tell), and whether it
        // is given only once.
        let (name_span, _) = raw.sole_member("name").unwrap_or((0..0, false));
        let name = raw
            .get(name_span)
            .and_then(mcpx_protocol::jsonrpc::string_value)
            .ok_or_else(required)?;
        let catalog = self.catalog();
        let found = if prompts {
            catalog.prompt(&name)
        } else {
            catalog.tool(&name)
        };
        let Some(found) = found else {
            if let Some(owner) = catalog.owner_of_name(&name)
                && let Some(up) = self.upstream(owner.as_str())
            {
                let status = up.status();
                if status.state != upstream::State::Ready {
                    return Err(up.unavailable(&status).to_fault(call.host));
                }
            }
            // 2025-11-25 server/tools §Error Handling: an unknown tool is a protocol error
            // (register D-C14).
            return Err(fault(
                INVALID_PARAMS,
                format!(
                    "unknown {}: {name}",
                    if prompts { "prompt" } else { "tool" }
                ),
                call.host,
            ));
        };
        let up = self.upstream(found.upstream.as_str()).ok_or_else(|| {
            GatewayError::Removed {
                upstream: found.upstream.clone(),
            }
            .to_fault(call.host)
        })?;
        let span = tracing::Span::current();
        span.record("mcpx.upstream", up.id.as_str());
        if prompts {
            span.record("gen_ai.prompt.name", name.as_ref());
        } else {
            span.record("gen_ai.tool.name", name.as_ref());
        }
        let original = found.original;
        let params = if original == name {
            Cow::Borrowed(raw)
        } else if let Some(renamed) = raw.with_name(original) {
            // The upstream's name in place of the exposed one; every other byte of the
            // host's params is kept (no re-encoding, no reordering of its members).
            Cow::Owned(renamed)
        } else {
            // A name given twice: re-encoded with the one name the upstream must see.
            let mut params: Value = serde_json::from_str(raw).unwrap_or(json!({}));
            params["name"] = json!(original);
            Cow::Owned(Params::of_value(&params))
        };
        let tool = found.facts;
        Ok(Routed {
            upstream: up,
            exposed: name,
            params,
            tool,
        })
    }

    /// The upstream serving resource `uri` (as a host names it) and the URI to send
    /// it (see [`Catalog::resource`]).
    pub(super) fn route_uri(
        &self,
        call: &Call,
        uri: &str,
    ) -> Result<(Arc<Upstream>, String), Fault> {
        let catalog = self.catalog();
        if let Some((id, theirs)) = catalog.resource(uri) {
            let up = self.upstream(id.as_str()).ok_or_else(|| {
                GatewayError::Removed {
                    upstream: id.clone(),
                }
                .to_fault(call.host)
            })?;
            return Ok((up, theirs.to_owned()));
        }
        Err(Fault {
            code: mcpx_protocol::error::resource_not_found(call.host),
            message: format!("resource not found: {uri}"),
            data: Some(json!({ "uri": uri })),
            from: call.host,
            input_validation: false,
        })
    }

    /// [`Gateway::route_uri`], and when the URI is not known while upstreams are
    /// still making their first start, again once they have (up to `startupWaitMs`):
    /// its upstream may not be listed yet.
    pub(super) async fn route_uri_once_settled(
        &self,
        call: &Call,
        uri: &str,
    ) -> Result<(Arc<Upstream>, String), Fault> {
        match self.route_uri(call, uri) {
            Err(_) if !self.is_settled() => {
                self.settled().await;
                self.route_uri(call, uri)
            }
            routed => routed,
        }
    }

    /// Sends `method` with `params` to upstream `up` for `call`, relaying events.
    pub(super) async fn forward(
        self: &Arc<Self>,
        call: &Call,
        up: &Arc<Upstream>,
        method: &str,
        params: &Params,
        idempotent: bool,
    ) -> Result<Reply, Fault> {
        let (generation, conn) = match up.live() {
            Some(c) => c,
            // Boxed, as every exception on a call's path.
            None => Box::pin(up.connection_slow())
                .await
                .map_err(|e| e.to_fault(call.host))?,
        };
        let _in_flight = match up.supervisor().try_begin_call() {
            Some(place) => place,
            // Boxed: waiting for a place is the exception.
            None => Box::pin(
                up.supervisor()
                    .begin_call_queued(up.config.mcpx.call_timeout),
            )
            .await
            .map_err(|busy| {
                GatewayError::Busy {
                    upstream: up.id.clone(),
                    busy,
                }
                .to_fault(call.host)
            })?,
        };
        let facts = conn.facts();
        let host_modern = call.host.era() == Era::Modern;
        if host_modern && facts.era == Era::Legacy {
            // Boxed: the rarer path's future stays out of every call's.
            return Box::pin(self.forward_parking(call, up, conn, method, params, idempotent))
                .await;
        }
        let max_call_time = self.config().global.max_call_time;
        // A 2026-07-28 upstream may answer a legacy host's call `input_required`: mcpx
        // then asks the host between rounds, and maxCallTimeMs bounds every round and
        // every question together (the clock is read only for this pairing).
        let rounds_until = (facts.era == Era::Modern && !host_modern)
            .then(|| tokio::time::Instant::now() + max_call_time);
        // The params as sent: the caller's text until an input round rewrites them.
        let mut text = std::borrow::Cow::Borrowed(params);
        // A 2026-07-28 upstream asks for input with `input_required` results (MRTR). A
        // modern host gets them as they are and retries itself; for a legacy host mcpx
        // asks it with wire requests and retries for it (register E-1), a bounded
        // number of rounds.
        let mut rounds = 0;
        loop {
            // A retry has what is left of the whole call's time.
            let max_time = match rounds_until {
                Some(until) if rounds > 0 => {
                    let left = until.saturating_duration_since(tokio::time::Instant::now());
                    if left.is_zero() {
                        return Err(self.rounds_timed_out(call, up, method));
                    }
                    left
                }
                _ => max_call_time,
            };
            let (tx, mut rx) = self.event_channels.take();
            // Fired by the host's cancellation, or when an ask ends the host's request
            // before the upstream answers (E-9).
            let cancel = call.cancel.child_token();
            let mut ended: Option<Fault> = None;
            let mut asks = Asks::default();
            let mut opts = CallOptions {
                // A clone: `tx` outlives the call, so that the channel can go back to
                // the pool once the call is over.
                events: Some(tx.clone()),
                progress: call.progress.is_some(),
                log_level: call.log.as_ref().map(|l| l.threshold().as_str().to_owned()),
                // A modern upstream may only ask for what the host can answer: the
                // host's own capabilities (per request on modern, from initialize on
                // legacy, where mcpx answers for it).
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
                caller_meta_is_envelope: host_modern,
                trace: None,
            };
            let outcome = {
                // The upstream leg's span (the conventions' client span; disabled, so
                // free, unless logs or traces want it). It gives the trace context
                // the upstream is sent.
                let span = tracing::info_span!(
                    "mcp.upstream",
                    otel.name = tracing::field::Empty,
                    otel.kind = "client",
                    otel.status_code = tracing::field::Empty,
                    mcp.method.name = method,
                    mcp.protocol.version = facts.revision.as_str(),
                    mcp.session.id = tracing::field::Empty,
                    jsonrpc.request.id = tracing::field::Empty,
                    network.transport = observe::network_transport(up),
                    mcpx.upstream = up.id.as_str(),
                    mcpx.era = if facts.era == Era::Modern { "modern" } else { "legacy" },
                    mcpx.round = rounds,
                    gen_ai.tool.name = tracing::field::Empty,
                    gen_ai.prompt.name = tracing::field::Empty,
                    error.type = tracing::field::Empty,
                );
                opts.trace = if span.is_disabled() {
                    call.trace.clone()
                } else {
                    observe::start_client_span(&span, method, &text, call.trace.as_ref())
                };
                let fut =
                    tracing::Instrument::instrument(conn.call(method, Some(&text), opts), span);
                tokio::pin!(fut);
                let leg = self.upstream_leg(call, up, method);
                let outcome = loop {
                    tokio::select! {
                        // Asks that ended answer the upstream first; then events, which
                        // were sent before the response.
                        biased;
                        () = asks.next(), if asks.started() => {}
                        Some(ev) = rx.recv() => {
                            // Boxed, as events are the exception (and the call's
                            // future is live meanwhile: the two would be laid out side
                            // by side). An ask runs beside the call, never awaited
                            // here: the call goes on (its timeouts too) while the
                            // host thinks.
                            if let Some(f) = Box::pin(self.on_event_beside(call, &facts, up.id.as_str(), *ev, &mut asks)).await {
                                cancel.cancel();
                                ended.get_or_insert(f);
                            }
                        }
                        r = &mut fut => break r,
                    }
                };
                if let Some(leg) = leg {
                    leg.end(&outcome);
                }
                if !fut.span().is_disabled() {
                    observe::end_client_span(fut.span(), method, &outcome);
                }
                outcome
            };
            // The upstream has answered: its asks still open are moot (dropped, each
            // host request is cancelled and each upstream request refused), and
            // so are those that come after the answer.
            drop(asks);
            while let Ok(ev) = rx.try_recv() {
                let f = match *ev {
                    CallEvent::Ask { method, reply, .. } => {
                        let _ = reply.send(Err(AskRefusal::new(
                            INTERNAL_ERROR,
                            format!("{method} came after the answer to the request it served"),
                        )));
                        None
                    }
                    ev => Box::pin(self.on_event(call, &facts, up.id.as_str(), ev)).await,
                };
                if let Some(f) = f {
                    ended.get_or_insert(f);
                }
            }
            self.event_channels.give(tx, rx);
            if let Some(f) = ended {
                return Err(f);
            }
            let frame = match outcome {
                Ok(frame) => frame,
                Err(e) => {
                    if e.breaks_connection() {
                        // The supervisor starts it again (a call never does).
                        up.lost(generation, Cause::Client(e.clone()));
                    }
                    return Err(GatewayError::Client(e).to_fault(call.host));
                }
            };
            let input_required = facts.era == Era::Modern
                && !host_modern
                && frame
                    .result()
                    .and_then(|r| mcpx_protocol::jsonrpc::first_member(r, "resultType"))
                    == Some("\"input_required\"");
            if !input_required {
                return self.answer(call, &facts, up.id.as_str(), method, frame);
            }
            rounds += 1;
            if rounds > MAX_INPUT_ROUNDS {
                return Err(fault(
                    INTERNAL_ERROR,
                    format!(
                        "upstream {} asked for input more than {MAX_INPUT_ROUNDS} times",
                        up.id
                    ),
                    call.host,
                ));
            }
            let result: Value = frame
                .result()
                .and_then(|r| serde_json::from_str(r).ok())
                .unwrap_or(Value::Null);
            let responses = match result.get("inputRequests") {
                Some(Value::Object(requests)) => {
                    let asked = self.ask_legacy_host_all(call, up.id.as_str(), requests.iter());
                    let until = rounds_until.unwrap_or_else(tokio::time::Instant::now);
                    match Box::pin(tokio::time::timeout_at(until, asked)).await {
                        Ok(answers) => answers?,
                        Err(_) => return Err(self.rounds_timed_out(call, up, method)),
                    }
                }
                _ => Map::new(),
            };
            // The retry: the original params, the answers, and the state echoed
            // verbatim (2026-07-28 basic/patterns/mrtr).
            let mut params: Value = serde_json::from_str(&text).unwrap_or(json!({}));
            params["inputResponses"] = Value::Object(responses);
            match result.get("requestState") {
                Some(state) => params["requestState"] = state.clone(),
                None => {
                    if let Some(o) = params.as_object_mut() {
                        o.remove("requestState");
                    }
                }
            }
            text = std::borrow::Cow::Owned(Params::of_value(&params));
        }
    }

    /// The host's error when a modern upstream's `input_required` rounds, and the
    /// questions mcpx puts to the host between them, outlast `maxCallTimeMs`: the
    /// upstream holds nothing between rounds, so only the host is told.
    fn rounds_timed_out(&self, call: &Call, up: &Upstream, method: &str) -> Fault {
        GatewayError::Client(ClientError::Timeout {
            upstream: up.id.to_string(),
            method: method.to_owned(),
            after: self.config().global.max_call_time,
        })
        .to_fault(call.host)
    }

    pub(super) fn answer(
        &self,
        call: &Call,
        facts: &ServerFacts,
        name: &str,
        method: &str,
        frame: Frame,
    ) -> Result<Reply, Fault> {
        if let Some(e) = frame.error() {
            if e.code == URL_ELICITATION_REQUIRED {
                self.note_required_elicitations(call, name, e.data.as_deref());
            }
            return Err(Fault {
                code: e.code,
                message: format!("upstream {name}: {}", e.message),
                data: e.data.as_deref().and_then(|d| serde_json::from_str(d).ok()),
                from: facts.revision,
                // Up to 2025-06-18 a tool's invalid input is a -32602 protocol error; hosts
                // from 2025-11-25 get it as an isError result (H5, D-C1).
                input_validation: method == "tools/call"
                    && e.code == INVALID_PARAMS
                    && !facts.revision.facts().input_validation_is_tool_error,
            });
        }
        // Taken from the decoded frame, not copied out of it: not parsed again on its
        // way to the host.
        let mut result = frame
            .into_result_json()
            .unwrap_or_else(|| Json::of_value(&json!({})));
        if facts.era == Era::Modern
            && call.host.era() == Era::Modern
            && let Some(relabelled) = self.relabel_input_required(name, result.as_str())
        {
            result = relabelled;
        }
        if facts.era == Era::Modern && call.host.era() == Era::Legacy {
            let input_required = serde_json::from_str::<Value>(result.as_str())
                .ok()
                .and_then(|v| {
                    v.get("resultType")
                        .and_then(Value::as_str)
                        .map(|t| t == "input_required")
                })
                .unwrap_or(false);
            if input_required {
                return Err(fault(
                    INTERNAL_ERROR,
                    format!(
                        "upstream {name} (2026-07-28) needs input from the client (an input_required result); mcpx does not yet bridge that to a {} client",
                        call.host
                    ),
                    call.host,
                ));
            }
        }
        Ok(Reply {
            result,
            revision: facts.revision,
        })
    }
}

impl Gateway {
    /// After [`Gateway::route_name`] refused `call` with `refused`: a name of an upstream that is starting,
    /// lazy and idle, or up but not yet listed, waits (up to the upstream's connect
    /// timeout) for it to come up and be listed, and is then routed again (else `refused` stands): a lazy
    /// upstream starts on its first use, and a host's first call need not fail for
    /// an upstream that is about to be ready.
    pub(super) async fn route_once_started<'a>(
        self: &Arc<Self>,
        call: &'a Call,
        prompts: bool,
        refused: Fault,
    ) -> Result<Routed<'a>, Fault> {
        let Some(name) = call_target(call) else {
            return Err(refused);
        };
        let owner = self.catalog().owner_of_name(&name).cloned();
        let Some(up) = owner.and_then(|id| self.upstream(id.as_str())) else {
            // No upstream's namespace: known, perhaps, once the first starts end.
            if !self.is_settled() {
                self.settled().await;
                return self.route_name(call, prompts);
            }
            return Err(refused);
        };
        let listed = self.catalog.is_listed(&up.id);
        match up.status().state {
            State::Idle | State::Starting { .. } => {
                up.connection().await.map_err(|e| e.to_fault(call.host))?;
            }
            // Up, but its first lists are still on their way.
            State::Ready if !listed => {}
            _ => return Err(refused),
        }
        self.wait_listed(&up, up.config.mcpx.connect_timeout).await;
        self.route_name(call, prompts)
    }

    /// The upstreams still making their first start, or up but not yet listed: what
    /// a list answered now lacks (`_meta` [`mcpx_protocol::meta::STARTING`]).
    pub(super) fn starting(&self) -> Vec<String> {
        self.catalog.starting(&self.upstreams())
    }

    /// Waits until `up`'s lists are in the catalog, up to `within`.
    pub(super) async fn wait_listed(&self, up: &Upstream, within: Duration) {
        self.catalog.wait_listed(&up.id, within).await;
    }

    /// Starts the lazy upstreams that were never listed, and waits for their lists
    /// (up to `startupWaitMs`): a host's list is a use of every upstream in it.
    pub(super) async fn list_lazy(&self) {
        let waiting: Vec<Arc<Upstream>> = self
            .upstreams()
            .iter()
            .filter(|u| {
                u.config.mcpx.start == crate::config::StartMode::Lazy
                    && !self.catalog.is_listed(&u.id)
            })
            .cloned()
            .collect();
        if waiting.is_empty() {
            return;
        }
        let within = self.config().global.startup_wait;
        for up in &waiting {
            up.supervisor().command(upstream::Command::Wake);
        }
        let all = waiting.iter().map(|up| self.wait_listed(up, within));
        futures_util::future::join_all(all).await;
    }
}
