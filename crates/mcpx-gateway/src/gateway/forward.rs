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
        let required =
            || GatewayError::InvalidParams("params.name is required".into()).to_fault(call.host);
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
            return Err(GatewayError::UnknownName {
                kind: if prompts { "prompt" } else { "tool" },
                name: name.into_owned(),
            }
            .to_fault(call.host));
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
        Err(GatewayError::ResourceNotFound {
            uri: uri.to_owned(),
        }
        .to_fault(call.host))
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
