//! `GET /v1/attach` with `Upgrade: mcpx-stdio`: the connection becomes an MCP stdio
//! session with the daemon's gateway, so a stdio host (through `mcpx serve --attach`)
//! shares the daemon's upstreams. The session is the host's own, as if it had
//! launched `mcpx serve`: its `initialize`, log level, asks and subscriptions.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use hyper_util::rt::TokioIo;
use mcpx_transport::stdio::StdioConfig;

use crate::daemon::Daemon;
use crate::daemon::problem::Problem;

/// The protocol token of the upgrade.
pub const PROTOCOL: &str = "mcpx-stdio";

/// `GET /v1/attach`.
pub fn attach(d: Arc<Daemon>, mut req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let asked = req
            .headers()
            .get(header::UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case(PROTOCOL));
        if !asked {
            return Problem::new(
                StatusCode::UPGRADE_REQUIRED,
                "upgrade-required",
                format!("send `Connection: upgrade` and `Upgrade: {PROTOCOL}`"),
            )
            .into_response();
        }
        let Some(on_upgrade) = req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>() else {
            return Problem::bad_request("this connection cannot be upgraded").into_response();
        };
        let max_frame = d.app.gateway().config().global.max_frame_bytes;
        tokio::spawn(async move {
            let upgraded = match on_upgrade.await {
                Ok(u) => u,
                Err(e) => {
                    tracing::debug!("attach: the upgrade failed: {e}");
                    return;
                }
            };
            let _open = d.activity.open();
            let (reader, writer) = tokio::io::split(TokioIo::new(upgraded));
            let mut config = StdioConfig::default();
            config.limits.max_frame_bytes = max_frame;
            let stop = d.stop.clone();
            let hosts = crate::daemon::hosts::Observed::new(d);
            let served = mcpx_transport::stdio::serve(hosts, reader, writer, config, stop).await;
            if let Err(e) = served {
                tracing::debug!("attach: the session ended: {e}");
            }
        });
        let mut r = StatusCode::SWITCHING_PROTOCOLS.into_response();
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        r.headers_mut()
            .insert(header::UPGRADE, HeaderValue::from_static(PROTOCOL));
        r
    })
}
