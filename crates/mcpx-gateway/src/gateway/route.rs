//! Routing: the upstream that serves a host's call, by the tool or prompt name or
//! the resource URI it names, read from one catalog snapshot and the upstream set.

use std::borrow::Cow;
use std::sync::Arc;

use mcpx_protocol::Params;
use mcpx_protocol::jsonrpc::Json;
use mcpx_server::{Call, Fault, Reply};
use serde_json::{Value, json};

use super::Upstreams;
use crate::catalog::{Catalog, ToolFacts};
use crate::error::GatewayError;
use crate::upstream::{self, Upstream};

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

/// The upstream of a `tools/call` or `prompts/get`, the upstream's own name for it,
/// and the params to send it: the host's text as it came when the name passes
/// through unchanged (nothing re-encoded), else with `name` rewritten.
///
/// A name the catalog does not list, in the namespace of an upstream that is not
/// ready, gets that upstream's state and cause (its tools may simply not be known
/// yet), never "unknown tool".
pub(super) fn name<'a>(
    catalog: &Catalog,
    upstreams: &Upstreams,
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
    let found = if prompts {
        catalog.prompt(&name)
    } else {
        catalog.tool(&name)
    };
    let Some(found) = found else {
        if let Some(owner) = catalog.owner_of_name(&name)
            && let Some(up) = upstreams.get(owner.as_str())
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
    let up = upstreams
        .get(found.upstream.as_str())
        .cloned()
        .ok_or_else(|| {
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
pub(super) fn uri(
    catalog: &Catalog,
    upstreams: &Upstreams,
    call: &Call,
    uri: &str,
) -> Result<(Arc<Upstream>, String), Fault> {
    if let Some((id, theirs)) = catalog.resource(uri) {
        let up = upstreams.get(id.as_str()).cloned().ok_or_else(|| {
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
