//! `POST /v1/servers/{name}/restart`, `POST /v1/reload`, `GET /v1/tasks` and
//! `POST /v1/shutdown`.

use std::sync::Arc;

use axum::extract::{Path, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use mcpx_gateway::app::{ReloadError, ReloadTrigger};
use mcpx_gateway::upstream::Command;
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::daemon::Daemon;
use crate::daemon::problem::{Problem, json_response};

/// What `POST /v1/servers/{name}/restart` answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct Restarted {
    /// The upstream's name.
    pub name: String,
    /// How often it had been restarted before this restart.
    pub restarts: u32,
}

/// What `POST /v1/reload` answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct Reloaded {
    /// What the reload changed, in words.
    pub plan: String,
}

/// What `GET /v1/tasks` answers.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tasks {
    /// The calls in flight, the oldest first: id, tool, via, startedAtMs, elapsedMs.
    #[schema(value_type = Vec<Object>)]
    pub calls: Vec<Value>,
    /// How many gateway tasks hosts hold.
    pub gateway_tasks: usize,
}

/// What `POST /v1/shutdown` answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct Stopping {
    /// Always true: the daemon is stopping.
    pub stopping: bool,
}

/// `POST /v1/servers/{name}/restart`.
pub fn restart(d: Arc<Daemon>, req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let (mut parts, _) = req.into_parts();
        let name = match axum::RequestPartsExt::extract::<Path<String>>(&mut parts).await {
            Ok(Path(n)) => n,
            Err(e) => return Problem::bad_request(e.to_string()).into_response(),
        };
        let Some(up) = d.app.gateway().upstream(&name) else {
            return Problem::not_found(format!("no upstream named {name:?}")).into_response();
        };
        let restarts = up.status().restarts;
        up.supervisor().command(Command::Restart);
        d.events.publish("restart", json!({ "name": name.clone() }));
        json_response(StatusCode::ACCEPTED, &Restarted { name, restarts })
    })
}

/// `POST /v1/reload` (its `reload` event is the app's observer's, as every reload's).
pub fn reload(d: Arc<Daemon>, _req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        match d.app.reload_async(ReloadTrigger::Asked).await {
            Ok(plan) => json_response(
                StatusCode::OK,
                &Reloaded {
                    plan: plan.to_string(),
                },
            ),
            Err(e @ ReloadError::NoFile) => {
                Problem::new(StatusCode::CONFLICT, "no-file", e.to_string()).into_response()
            }
            Err(e) => Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "bad-config",
                format!("not reloaded, the configuration in force goes on: {e}"),
            )
            .into_response(),
        }
    })
}

/// `GET /v1/tasks`.
pub fn tasks(d: Arc<Daemon>, _req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let tasks = Tasks {
            calls: d.calls_in_flight(),
            gateway_tasks: d.app.gateway().tasks_held(),
        };
        json_response(StatusCode::OK, &tasks)
    })
}

/// `POST /v1/shutdown`.
pub fn shutdown(d: Arc<Daemon>, _req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        tracing::info!("stopping: asked over the API");
        d.stop.cancel();
        json_response(StatusCode::ACCEPTED, &Stopping { stopping: true })
    })
}
