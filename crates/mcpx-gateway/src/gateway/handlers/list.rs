//! `tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`: one page
//! of a merged list, from the catalog in force.

use std::sync::Arc;

use mcpx_protocol::Revision;
use mcpx_protocol::jsonrpc::Json;
use mcpx_server::{Call, Fault, Reply};
use serde::Deserialize;
use serde_json::{Value, json};

use super::super::{Gateway, tasks};
use crate::catalog::ListKind;
use crate::error::GatewayError;

/// A list request's params (`PaginatedRequestParams`).
#[derive(Debug, Deserialize)]
struct ListParams {
    cursor: Option<String>,
}

/// One page of list `kind`, written as 2026-07-28 (the seam lowers it). A host's first
/// list waits for the eager upstreams' first starts, and lazy ones start: it is the
/// full list.
pub(super) async fn handle(gw: &Arc<Gateway>, call: &Call, kind: ListKind) -> Result<Reply, Fault> {
    // Boxed: both waits are the exception.
    if !gw.is_settled() {
        Box::pin(gw.settled()).await;
    }
    Box::pin(gw.list_lazy()).await;
    page(gw, call, kind)
}

fn page(gw: &Gateway, call: &Call, kind: ListKind) -> Result<Reply, Fault> {
    let ListParams { cursor } = super::params(call, "params.cursor must be a string")?;
    let start = match cursor.as_deref() {
        None => 0,
        Some(c) => c
            .strip_prefix("mcpx:")
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| GatewayError::InvalidCursor(c.to_owned()).to_fault(call.host))?,
    };
    let page = gw.config().global.page_size.max(1);
    let catalog = gw.catalog();
    let all = catalog.list(kind);
    if start > all.len() {
        return Err(GatewayError::CursorPastEnd(start).to_fault(call.host));
    }
    let end = (start + page).min(all.len());
    let items: Vec<Value> = all[start..end].iter().map(|i| Value::clone(i)).collect();
    let shaped = (kind == ListKind::Tools)
        .then(|| tasks::shape_tools(&items, call.host))
        .flatten();
    let mut result = json!({ kind.key(): shaped.as_deref().unwrap_or(&items) });
    if end < all.len() {
        result["nextCursor"] = json!(format!("mcpx:{end}"));
    }
    let starting = gw.starting();
    if !starting.is_empty() {
        result["_meta"] = json!({ mcpx_protocol::meta::STARTING: starting });
    }
    Ok(Reply {
        result: Json::of_value(&result),
        revision: Revision::NEWEST,
    })
}
