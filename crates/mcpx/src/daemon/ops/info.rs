//! `GET /v1/health`, `/v1/status`, `/v1/servers` and `/v1/openapi.json`.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use futures_util::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::daemon::Daemon;
use crate::daemon::api;
use crate::daemon::problem::json_response;

/// What `GET /v1/health` answers.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// The daemon's process id.
    pub pid: u32,
    /// mcpx's version.
    pub version: &'static str,
    /// How long the daemon has run.
    pub uptime_seconds: f64,
    /// The configuration file the daemon serves.
    pub config: String,
    /// The number of the last event published.
    pub last_event: u64,
    /// The file the daemon logs to, when started in the background.
    pub log: Option<String>,
    /// The last reload's event: trigger (file, sighup or asked), ok, plan or error, atMs.
    #[schema(value_type = Option<Object>)]
    pub last_reload: Option<Value>,
}

/// `GET /v1/health`.
pub fn health(d: Arc<Daemon>, _req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        json_response(
            StatusCode::OK,
            &Health {
                pid: std::process::id(),
                version: env!("CARGO_PKG_VERSION"),
                uptime_seconds: d.started.elapsed().as_secs_f64(),
                config: d.key.clone(),
                last_event: d.events.last(),
                log: d.log.as_ref().map(|l| l.to_string_lossy().into_owned()),
                last_reload: d.last_reload(),
            },
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

/// One upstream's status.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpstreamStatus {
    /// Its name, as in the configuration.
    pub name: String,
    /// Its supervisor's state.
    pub state: &'static str,
    /// Its state in words.
    pub phrase: String,
    /// The era it speaks (`legacy` or `modern`), once connected.
    pub era: Option<String>,
    /// The protocol revision it speaks, once connected.
    pub revision: Option<&'static str>,
    /// Its `serverInfo`, once connected.
    #[schema(value_type = Option<Object>)]
    pub server_info: Option<Value>,
    /// Its capabilities, once connected.
    #[schema(value_type = Option<Object>)]
    pub capabilities: Option<Value>,
    /// Its process id, when it is a running process.
    pub pid: Option<u32>,
    /// How often it was restarted.
    pub restarts: u32,
    /// Its last error; past once the upstream is ready again.
    pub last_error: Option<String>,
    /// When its last error was (ISO 8601, UTC).
    #[schema(format = DateTime)]
    pub last_error_at: Option<String>,
    /// How many tools it offers; null until its first list.
    pub tools: Option<usize>,
    /// How many of its requests are in flight.
    pub in_flight: usize,
}

/// One upstream's status. `tools` is null while not known (see
/// `Upstream::tool_count`); `lastError` stays after a recovery, with `lastErrorAt`,
/// and a report of a ready upstream shows it as past.
pub fn upstream_status(up: &mcpx_gateway::upstream::Upstream) -> UpstreamStatus {
    let st = up.status();
    let facts = up.facts();
    UpstreamStatus {
        name: up.id.as_str().to_owned(),
        state: st.state.key(),
        phrase: st.state.phrase(tokio::time::Instant::now()),
        era: facts
            .as_ref()
            .map(|f| format!("{:?}", f.era).to_lowercase()),
        revision: facts.as_ref().map(|f| f.revision.as_str()),
        server_info: facts.as_ref().map(|f| f.info.clone()),
        capabilities: facts.as_ref().map(|f| f.capabilities.clone()),
        pid: st.pid,
        restarts: st.restarts,
        last_error: st.last_error.as_ref().map(|e| e.to_string()),
        last_error_at: st.last_error_at.map(wall_time),
        tools: up.tool_count(),
        in_flight: up.supervisor().in_flight(),
    }
}

/// What `GET /v1/status` answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct Status {
    /// Each upstream, in the configuration's order.
    pub upstreams: Vec<UpstreamStatus>,
}

/// `GET /v1/status`.
pub fn status(d: Arc<Daemon>, _req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let upstreams = d
            .app
            .gateway()
            .upstreams()
            .iter()
            .map(|u| upstream_status(u))
            .collect();
        json_response(StatusCode::OK, &Status { upstreams })
    })
}

/// One configured upstream.
#[derive(Debug, Serialize, ToSchema)]
pub struct Server {
    /// Its name, as in the configuration.
    pub name: String,
    /// The namespace of its tools, prompts and resources.
    pub namespace: String,
    /// How it is reached: its command line or its URL.
    pub transport: String,
    /// Whether the configuration disables it.
    pub disabled: bool,
    /// Its supervisor's state, or `disabled`.
    pub state: &'static str,
}

/// What `GET /v1/servers` answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct Servers {
    /// Each configured upstream.
    pub servers: Vec<Server>,
}

/// `GET /v1/servers`.
pub fn servers(d: Arc<Daemon>, _req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let gw = d.app.gateway();
        let config = gw.config();
        let servers = config
            .servers
            .iter()
            .map(|(name, s)| {
                let target = mcpx_gateway::gateway::upstream_target(&config, name, s);
                let state = gw
                    .upstream(name)
                    .map_or("disabled", |u| u.status().state.key());
                Server {
                    name: name.clone(),
                    namespace: s.mcpx.namespace.clone().unwrap_or_else(|| name.clone()),
                    transport: target.transport.identity(),
                    disabled: s.disabled,
                    state,
                }
            })
            .collect();
        json_response(StatusCode::OK, &Servers { servers })
    })
}

/// `GET /v1/openapi.json`.
pub fn openapi(_d: Arc<Daemon>, _req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move { json_response(StatusCode::OK, api::openapi()) })
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
    use serde_json::json;

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
        assert_eq!(upstream_status(&up).tools, None, "never connected");
        up.set_facts(facts(json!({"tools": {}})));
        assert_eq!(upstream_status(&up).tools, None, "not listed yet");
        up.set_lists(Lists {
            tools: Some(vec![json!({"name": "t"})]),
            ..Lists::default()
        });
        assert_eq!(upstream_status(&up).tools, Some(1));
        // One that offers no tools has none.
        let none = upstream();
        none.set_facts(facts(json!({"prompts": {}})));
        assert_eq!(upstream_status(&none).tools, Some(0));
    }
}
