//! One MCP request of the gateway, made in-process: the `/v1` API asks the serve seam
//! exactly as a 2026-07-28 host would, so names, results and errors are what a host
//! gets.

use std::sync::atomic::{AtomicU64, Ordering};

use mcpx_protocol::codec::{Decoded, Limits, decode};
use mcpx_protocol::{Frame, Revision, Verdict, meta};
use mcpx_transport::{Incoming, RequestCtx, Service};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Daemon;
use super::problem::Problem;

/// Request ids of the API's requests.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What a request relays while it runs.
#[derive(Debug, Default)]
pub struct Relay {
    /// Where progress and log notifications go (none: not asked for).
    pub related: Option<mpsc::Sender<Frame>>,
    /// The log level asked for, with `related`.
    pub log_level: Option<&'static str>,
    /// The client capabilities the caller declares (`{}` when none): a caller that
    /// declares some answers an `input_required` result itself, and gets it.
    pub capabilities: Option<Value>,
}

/// Asks the gateway `method` with `params` (an object, without `_meta`), as a
/// 2026-07-28 host; `cancel` cancels it. The result, or the problem it became.
/// `unknown` says whether the name asked for is unknown to the catalog, for the
/// problem's status.
pub async fn invoke(
    daemon: &Daemon,
    method: &str,
    mut params: Value,
    relay: Relay,
    cancel: CancellationToken,
    unknown: impl FnOnce() -> bool,
) -> Result<Value, Problem> {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let answers_input = relay.capabilities.is_some();
    let mut meta = json!({
        meta::PROTOCOL_VERSION: Revision::V2026_07_28.as_str(),
        meta::CLIENT_CAPABILITIES: relay.capabilities.unwrap_or_else(|| json!({})),
        meta::CLIENT_INFO: {"name": "mcpx-daemon-api", "version": env!("CARGO_PKG_VERSION")},
    });
    let related = match relay.related {
        Some(tx) => {
            meta[meta::PROGRESS_TOKEN] = json!(id);
            if let Some(level) = relay.log_level {
                meta[meta::LOG_LEVEL] = json!(level);
            }
            tx
        }
        // Nothing is relayed: the notifications go nowhere.
        None => mpsc::channel(1).0,
    };
    if let Value::Object(p) = &mut params {
        p.insert("_meta".into(), meta);
    }
    let text = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    let limits = Limits {
        max_frame_bytes: daemon.app.gateway().config().global.max_frame_bytes,
        ..Limits::default()
    };
    let frame = match decode(text, &limits) {
        Ok(Decoded::Single(f)) => f,
        Ok(Decoded::Batch(_)) => return Err(Problem::bad_request("not a single request")),
        Err(e) => return Err(Problem::bad_request(e.to_string())),
    };
    let incoming = Incoming {
        frame,
        verdict: Verdict::Modern {
            revision: Revision::V2026_07_28,
        },
    };
    let ctx = RequestCtx::in_process(cancel, related);
    let response = daemon.app.seam().request(incoming, ctx).await;
    if let Some(e) = response.error() {
        let data = e.data.as_deref().and_then(|d| serde_json::from_str(d).ok());
        return Err(Problem::of_rpc(e.code, &e.message, data, unknown()));
    }
    let result: Value = response
        .result()
        .and_then(|r| serde_json::from_str(r).ok())
        .ok_or_else(|| {
            Problem::new(
                axum::http::StatusCode::BAD_GATEWAY,
                "no-result",
                format!("{method}: an answer without a result"),
            )
        })?;
    if result.get("resultType").and_then(Value::as_str) == Some("input_required") && !answers_input
    {
        return Err(Problem::new(
            axum::http::StatusCode::NOT_IMPLEMENTED,
            "input-required",
            format!(
                "{method}: the server asked for input (an elicitation, sampling or roots request), which this caller declared no capabilities to answer (send `capabilities`, then `inputResponses` and `requestState`)"
            ),
        ));
    }
    Ok(result)
}
