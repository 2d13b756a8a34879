//! `POST /v1/servers/{name}/restart`, `POST /v1/reload`, `GET /v1/tasks` and
//! `POST /v1/shutdown`.

use std::sync::Arc;

use axum::extract::{Path, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use mcpx_gateway::app::ReloadError;
use mcpx_gateway::upstream::Command;
use serde_json::json;

use crate::daemon::Daemon;
use crate::daemon::problem::{Problem, json_response};

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
        json_response(
            StatusCode::ACCEPTED,
            &json!({ "name": name, "restarts": restarts }),
        )
    })
}

/// `POST /v1/reload` (its `reload` event is the app's observer's, as every reload's).
pub fn reload(d: Arc<Daemon>, _req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        match d.app.reload() {
            Ok(plan) => json_response(StatusCode::OK, &json!({ "plan": plan.to_string() })),
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
        let calls = d.calls_in_flight();
        json_response(
            StatusCode::OK,
            &json!({ "calls": calls, "gatewayTasks": d.app.gateway().tasks_held() }),
        )
    })
}

/// `POST /v1/shutdown`.
pub fn shutdown(d: Arc<Daemon>, _req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        tracing::info!("stopping: asked over the API");
        d.stop.cancel();
        json_response(StatusCode::ACCEPTED, &json!({ "stopping": true }))
    })
}
