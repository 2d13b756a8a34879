//! `GET /v1/health`, `/v1/status`, `/v1/servers` and `/v1/openapi.json`.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use futures_util::future::BoxFuture;
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

/// When `at` was, on the wall clock: ISO 8601 (UTC).
pub fn wall_time(at: tokio::time::Instant) -> String {
    let ago = tokio::time::Instant::now().saturating_duration_since(at);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let ms = u64::try_from(now.saturating_sub(ago).as_millis()).unwrap_or(u64::MAX);
    mcpx_protocol::task::iso8601(ms)
}

/// One upstream's status. `tools` is null while not known (see
/// `Upstream::tool_count`); `lastError` stays after a recovery, with `lastErrorAt`,
/// and a report of a ready upstream shows it as past.
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
        "lastErrorAt": st.last_error_at.map(wall_time),
        "tools": up.tool_count(),
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use mcpx_client::{EraCache, ServerFacts};
    use mcpx_gateway::catalog::Lists;
    use mcpx_gateway::id::UpstreamId;
    use mcpx_gateway::upstream::Upstream;
    use mcpx_protocol::{Era, Revision};

    fn upstream() -> std::sync::Arc<Upstream> {
        let config = mcpx_gateway::config::parse(
            r#"{"mcpServers": {"a": {"command": "true"}}}"#,
            std::path::Path::new("test.json"),
        )
        .unwrap();
        let (name, s) = config.servers.iter().next().unwrap();
        let target = mcpx_gateway::gateway::upstream_target(&config, name, s);
        let (up, _commands) = Upstream::new(
            UpstreamId::new(name),
            s.clone(),
            target,
            std::sync::Arc::new(mcpx_gateway::upstream::Connect),
            EraCache::default(),
            4,
            std::time::Duration::from_secs(1),
        );
        up
    }

    fn facts(capabilities: Value) -> std::sync::Arc<ServerFacts> {
        std::sync::Arc::new(ServerFacts {
            era: Era::Legacy,
            revision: Revision::V2025_11_25,
            capabilities,
            info: json!({}),
            instructions: None,
        })
    }

    /// Issue #32: an upstream connected but not yet listed showed 0 tools.
    #[test]
    fn tools_are_unknown_until_the_first_list() {
        let up = upstream();
        assert_eq!(
            upstream_status(&up)["tools"],
            Value::Null,
            "never connected"
        );
        up.set_facts(facts(json!({"tools": {}})));
        assert_eq!(upstream_status(&up)["tools"], Value::Null, "not listed yet");
        up.set_lists(Lists {
            tools: Some(vec![json!({"name": "t"})]),
            ..Lists::default()
        });
        assert_eq!(upstream_status(&up)["tools"], json!(1));
        // One that offers no tools has none.
        let none = upstream();
        none.set_facts(facts(json!({"prompts": {}})));
        assert_eq!(upstream_status(&none)["tools"], json!(0));
    }
}
