//! `completion/complete`: routed by its reference (a prompt by name, a resource
//! template by URI) to the owning upstream.

use std::sync::Arc;

use mcpx_protocol::Params;
use mcpx_protocol::jsonrpc::Json;
use mcpx_server::{Call, Fault, Reply};
use serde::Deserialize;
use serde_json::json;

use super::super::Gateway;
use crate::error::GatewayError;
use crate::upstream::Upstream;

/// `CompleteRequestParams`' reference (`PromptReference` or
/// `ResourceTemplateReference`).
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum Ref {
    #[serde(rename = "ref/prompt")]
    Prompt {
        #[serde(default)]
        name: String,
    },
    #[serde(rename = "ref/resource")]
    Resource {
        #[serde(default)]
        uri: String,
    },
}

#[derive(Debug, Deserialize)]
struct CompleteParams {
    r#ref: Ref,
}

/// Completes an argument of the prompt or resource template `call` refers to.
pub(super) async fn handle(gw: &Arc<Gateway>, call: &Call) -> Result<Reply, Fault> {
    let CompleteParams { r#ref } =
        super::params(call, "params.ref must be ref/prompt or ref/resource")?;
    let mut params = super::params_json(call);
    let up = match r#ref {
        Ref::Prompt { name } => {
            let (up, original) = Box::pin(prompt_owner(gw, call, &name)).await?;
            params["ref"]["name"] = json!(original);
            up
        }
        Ref::Resource { uri } => {
            let (up, theirs) = Box::pin(gw.route_uri_once_settled(call, &uri)).await?;
            params["ref"]["uri"] = json!(theirs);
            up
        }
    };
    // C-C9: from 2025-03-26 a server that completes declares `completions`; an
    // upstream that did not is not asked (a 2024-11-05 one, which had no such
    // capability, is). Its answer is "no suggestions".
    let facts = up.ready().map(|c| c.facts());
    if let Some(f) =
        facts.filter(|f| f.revision.facts().completions_capability && !f.has("completions"))
    {
        return Ok(Reply {
            result: Json::of_value(&json!({ "completion": { "values": [], "hasMore": false } })),
            revision: f.revision,
        });
    }
    gw.forward(
        call,
        &up,
        None,
        "completion/complete",
        &Params::of_value(&params),
        true,
    )
    .await
}

/// The upstream of prompt `name` (as the host names it) and its own name for it.
async fn prompt_owner(
    gw: &Gateway,
    call: &Call,
    name: &str,
) -> Result<(Arc<Upstream>, String), Fault> {
    if gw.catalog().prompt(name).is_none() && !gw.is_settled() {
        // Its upstream may not be listed yet.
        gw.settled().await;
    }
    let catalog = gw.catalog();
    let found = catalog.prompt(name).ok_or_else(|| {
        GatewayError::UnknownName {
            kind: "prompt",
            name: name.to_owned(),
        }
        .to_fault(call.host)
    })?;
    let up = gw.upstream(found.upstream.as_str()).ok_or_else(|| {
        GatewayError::Removed {
            upstream: found.upstream.clone(),
        }
        .to_fault(call.host)
    })?;
    Ok((up, found.original.to_string()))
}
