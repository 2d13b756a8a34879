//! Hosts' calls, seen by the daemon: the serve seam behind `/mcp`, `/sse` and attached
//! stdio sessions, wrapped so that each `tools/call` a host makes is tracked as
//! `/v1/call`'s are (in `/v1/tasks` while it runs, a `call` event at its start and
//! end, the status page's last calls), with `via: "host"`.

use std::sync::Arc;

use mcpx_gateway::gateway::Served;
use mcpx_protocol::Frame;
use mcpx_server::Seam;
use mcpx_transport::{Incoming, Peer, RequestCtx, Service};
use serde_json::Value;

use super::{Daemon, Via};

/// The seam, its `tools/call`s tracked by the daemon.
#[derive(Debug)]
pub struct Observed {
    seam: Arc<Seam<Served>>,
    daemon: Arc<Daemon>,
}

impl Observed {
    /// The daemon's seam, observed.
    pub fn new(daemon: Arc<Daemon>) -> Arc<Observed> {
        Arc::new(Observed {
            seam: daemon.app.seam(),
            daemon,
        })
    }
}

/// How a host's `tools/call` ended, from its response: `ok`, `tool_error` (with the
/// tool's text) or `error` (with the JSON-RPC error's message).
pub fn outcome(response: &Frame) -> (&'static str, Option<String>) {
    if let Some(e) = response.error() {
        return ("error", Some(format!("error {}: {}", e.code, e.message)));
    }
    // Only a result that names `isError` is parsed: most do not.
    match response.result() {
        Some(raw) if raw.contains("\"isError\"") => match serde_json::from_str::<Value>(raw) {
            Ok(v) if v.get("isError") == Some(&Value::Bool(true)) => {
                ("tool_error", Some(super::tool_error_text(&v)))
            }
            _ => ("ok", None),
        },
        _ => ("ok", None),
    }
}

impl Service for Observed {
    async fn request(&self, req: Incoming, ctx: RequestCtx) -> Frame {
        if req.frame.method() != Some("tools/call") {
            return self.seam.request(req, ctx).await;
        }
        let tool = req
            .frame
            .params_name()
            .and_then(|n| serde_json::from_str::<String>(n).ok())
            .unwrap_or_default();
        let cancel = ctx.cancelled().clone();
        let track = self.daemon.track_call(&tool, Via::Host);
        let response = self.seam.request(req, ctx).await;
        if cancel.is_cancelled() {
            track.end("cancelled", None);
        } else {
            let (outcome, detail) = outcome(&response);
            track.end(outcome, detail);
        }
        response
    }

    async fn notification(&self, n: Incoming, peer: Option<Peer>) {
        self.seam.notification(n, peer).await;
    }

    fn session_opened(&self, peer: &Peer) {
        self.seam.session_opened(peer);
    }

    fn session_closed(&self, peer: &Peer) {
        self.seam.session_closed(peer);
    }

    fn param_headers(&self) -> mcpx_transport::ParamHeaders {
        self.seam.param_headers()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpx_protocol::Id;

    #[test]
    fn a_response_says_how_the_call_ended_and_why() {
        let id = Id::Number(1);
        let result =
            |v: Value| Frame::result_response(&id, &serde_json::value::to_raw_value(&v).unwrap());
        let ok = result(serde_json::json!({"content": []}));
        assert_eq!(outcome(&ok), ("ok", None));
        let tool = result(serde_json::json!(
            {"isError": true, "content": [{"type": "text", "text": "no such city"}]}
        ));
        assert_eq!(outcome(&tool), ("tool_error", Some("no such city".into())));
        let err = Frame::error_response(Some(&id), -32602, "unknown tool: x", None);
        assert_eq!(
            outcome(&err),
            ("error", Some("error -32602: unknown tool: x".into()))
        );
    }
}
