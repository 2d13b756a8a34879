//! `GET /v1/health`, `/v1/status`, `/v1/servers` and `/v1/openapi.json`.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use futures_util::future::BoxFuture;
use mcpx_gateway::catalog::ListKind;
use serde_json::{Value, json};

use crate::daemon::Daemon;
use crate::daemon::api;
use crate::daemon::problem::json_response;

/// `GET /v1/health`.
pub fn health(d: Arc<Daemon>, _req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        json_response(
            StatusCode::OK,
            &json!({
                "pid": std::process::id(),
                "version": env!("CARGO_PKG_VERSION"),
                "uptimeSeconds": d.started.elapsed().as_secs_f64(),
                "config": d.key,
                "lastEvent": d.events.last(),
                "log": d.log.as_ref().map(|l| l.to_string_lossy()),
                "lastReload": d.last_reload(),
            }),
        )
    })
}

/// One upstream's status.
pub fn upstream_status(up: &mcpx_gateway::upstream::Upstream) -> Value {
    let st = up.status();
    let facts = up.facts();
    json!({
        "name": up.id.as_str(),
        "state": st.state.key(),
        "phrase": st.state.phrase(tokio::time::Instant::now()),
        "era": facts.as_ref().map(|f| format!("{:?}", f.era).to_lowercase()),
        "revision": facts.as_ref().map(|f| f.revision.as_str()),
        "serverInfo": facts.as_ref().map(|f| f.info.clone()),
        "capabilities": facts.as_ref().map(|f| f.capabilities.clone()),
        "pid": st.pid,
        "restarts": st.restarts,
        "lastError": st.last_error.as_ref().map(|e| e.to_string()),
        "tools": up.lists().get(ListKind::Tools).map_or(0, Vec::len),
        "inFlight": up.supervisor().in_flight(),
    })
}

/// `GET /v1/status`.
pub fn status(d: Arc<Daemon>, _req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let ups: Vec<Value> = d
            .app
            .gateway()
            .upstreams()
            .iter()
            .map(|u| upstream_status(u))
            .collect();
        json_response(StatusCode::OK, &json!({ "upstreams": ups }))
    })
}

/// `GET /v1/servers`.
pub fn servers(d: Arc<Daemon>, _req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let gw = d.app.gateway();
        let config = gw.config();
        let servers: Vec<Value> = config
            .servers
            .iter()
            .map(|(name, s)| {
                let target = mcpx_gateway::gateway::upstream_target(&config, name, s);
                let state = gw
                    .upstream(name)
                    .map_or("disabled", |u| u.status().state.key());
                json!({
                    "name": name,
                    "namespace": s.mcpx.namespace.clone().unwrap_or_else(|| name.clone()),
                    "transport": target.transport.identity(),
                    "disabled": s.disabled,
                    "state": state,
                })
            })
            .collect();
        json_response(StatusCode::OK, &json!({ "servers": servers }))
    })
}

/// `GET /v1/openapi.json`.
pub fn openapi(_d: Arc<Daemon>, _req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move { json_response(StatusCode::OK, &api::openapi()) })
}
