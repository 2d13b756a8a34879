//! `GET /v1/tools`, `POST /v1/call`, `POST /v1/read` and `POST /v1/prompt`: MCP
//! requests of the gateway, asked as a 2026-07-28 host asks them.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use mcpx_protocol::Frame;
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use crate::daemon::Daemon;
use crate::daemon::api::{self, NDJSON, SSE};
use crate::daemon::invoke::{Relay, invoke};
use crate::daemon::problem::{Problem, json_response};

/// Most pages of a list followed.
const MAX_PAGES: usize = 10_000;

/// Every item of a paginated list.
pub async fn list_all(d: &Daemon, method: &str, key: &str) -> Result<Vec<Value>, Problem> {
    let mut items = Vec::new();
    let mut params = json!({});
    for _ in 0..MAX_PAGES {
        let mut page = invoke(
            d,
            method,
            params,
            Relay::default(),
            CancellationToken::new(),
            || false,
        )
        .await?;
        if let Some(Value::Array(more)) = page.get_mut(key).map(Value::take) {
            items.extend(more);
        }
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(c) => params = json!({ "cursor": c }),
            None => return Ok(items),
        }
    }
    Err(Problem::new(
        StatusCode::BAD_GATEWAY,
        "too-many-pages",
        format!("{method}: more than {MAX_PAGES} pages"),
    ))
}

/// Whether `tool` (or the prompt) matches the search `q` (lower case).
fn matches(item: &Value, q: &str) -> bool {
    ["name", "title", "description"].iter().any(|k| {
        item.get(*k)
            .and_then(Value::as_str)
            .is_some_and(|s| s.to_lowercase().contains(q))
    })
}

/// What `GET /v1/tools` answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct Tools {
    /// The tools (MCP `Tool`s), as a host sees them.
    #[schema(value_type = Vec<Object>)]
    pub tools: Vec<Value>,
}

/// The body of `POST /v1/call`.
#[derive(Debug, ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct CallRequest {
    /// The tool's name, as a host sees it.
    pub tool: String,
    /// The tool's arguments (`{}` when absent).
    #[schema(value_type = Object, required = false)]
    pub arguments: Value,
    /// Client capabilities: a caller that declares them gets an input_required result to answer.
    #[schema(value_type = Object, required = false)]
    pub capabilities: Option<Value>,
    /// The answers to an input_required result's inputRequests, by key.
    #[schema(value_type = Object, required = false)]
    pub input_responses: Option<Value>,
    /// The input_required result's requestState, sent back with the answers.
    #[schema(value_type = String, required = false)]
    pub request_state: Option<Value>,
}

impl CallRequest {
    /// The call `body` asks for, or the problem it is.
    fn from_body(body: &Map<String, Value>) -> Result<CallRequest, Problem> {
        let tool = api::string_member(body, "tool")?.to_owned();
        let arguments = api::object_member(body, "arguments")?;
        let capabilities = match body.get("capabilities") {
            None => None,
            Some(c @ Value::Object(_)) => Some(c.clone()),
            Some(_) => return Err(Problem::bad_request("`capabilities` must be an object")),
        };
        let input_responses = match body.get("inputResponses") {
            None => None,
            Some(r @ Value::Object(_)) => Some(r.clone()),
            Some(_) => return Err(Problem::bad_request("`inputResponses` must be an object")),
        };
        let request_state = match body.get("requestState") {
            None => None,
            Some(r @ Value::String(_)) => Some(r.clone()),
            Some(_) => return Err(Problem::bad_request("`requestState` must be a string")),
        };
        Ok(CallRequest {
            tool,
            arguments,
            capabilities,
            input_responses,
            request_state,
        })
    }
}

/// The body of `POST /v1/read`.
#[derive(Debug, ToSchema)]
pub struct ReadRequest {
    /// The resource's URI, as a host sees it.
    pub uri: String,
}

/// The body of `POST /v1/prompt`.
#[derive(Debug, ToSchema)]
pub struct PromptRequest {
    /// The prompt's name, as a host sees it.
    pub name: String,
    /// The prompt's arguments (`{}` when absent).
    #[schema(value_type = Object, required = false)]
    pub arguments: Value,
}

/// `GET /v1/tools[?q=TEXT]`.
pub fn tools(d: Arc<Daemon>, req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let q = api::query_param(&req, "q").map(|q| q.to_lowercase());
        match list_all(&d, "tools/list", "tools").await {
            Ok(mut tools) => {
                if let Some(q) = q.filter(|q| !q.is_empty()) {
                    tools.retain(|t| matches(t, &q));
                }
                json_response(StatusCode::OK, &Tools { tools })
            }
            Err(p) => p.into_response(),
        }
    })
}

/// `POST /v1/read` `{uri}`.
pub fn read(d: Arc<Daemon>, req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let asked = async {
            let body = api::json_body(req).await?;
            let ReadRequest { uri } = ReadRequest {
                uri: api::string_member(&body, "uri")?.to_owned(),
            };
            let gw = d.app.gateway().clone();
            let unknown = || gw.catalog().resource(&uri).is_none();
            let params = json!({ "uri": uri.clone() });
            invoke(
                &d,
                "resources/read",
                params,
                Relay::default(),
                CancellationToken::new(),
                unknown,
            )
            .await
        };
        answer(asked.await)
    })
}

/// `POST /v1/prompt` `{name, arguments}`.
pub fn prompt(d: Arc<Daemon>, req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let asked = async {
            let body = api::json_body(req).await?;
            let PromptRequest { name, arguments } = PromptRequest {
                name: api::string_member(&body, "name")?.to_owned(),
                arguments: api::object_member(&body, "arguments")?,
            };
            let gw = d.app.gateway().clone();
            let unknown = || gw.catalog().prompt(&name).is_none();
            let params = json!({ "name": name.clone(), "arguments": arguments });
            invoke(
                &d,
                "prompts/get",
                params,
                Relay::default(),
                CancellationToken::new(),
                unknown,
            )
            .await
        };
        answer(asked.await)
    })
}

fn answer(r: Result<Value, Problem>) -> Response {
    match r {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(p) => p.into_response(),
    }
}

/// A token cancelled when the guard is dropped.
fn cancel_on_drop() -> (CancellationToken, tokio_util::sync::DropGuard) {
    let t = CancellationToken::new();
    (t.clone(), t.drop_guard())
}

/// How a call's answer is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Json,
    Ndjson,
    Sse,
}

fn framing(req: &Request) -> Framing {
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .unwrap_or("");
    // The first of the stream types named wins; JSON otherwise.
    let at = |m: &str| accept.find(m);
    match (at(NDJSON), at(SSE)) {
        (Some(n), Some(s)) if s < n => Framing::Sse,
        (Some(_), _) => Framing::Ndjson,
        (None, Some(_)) => Framing::Sse,
        (None, None) => Framing::Json,
    }
}

/// One event of a streamed call, as NDJSON or SSE.
fn event(framing: Framing, kind: &str, data: &Value) -> Bytes {
    match framing {
        Framing::Sse => Bytes::from(format!("event: {kind}\ndata: {data}\n\n")),
        _ => {
            let mut v = json!({ "event": kind });
            v["data"] = data.clone();
            Bytes::from(format!("{v}\n"))
        }
    }
}

/// A related notification as a stream event: progress or a log message.
fn related_event(frame: &Frame) -> Option<(&'static str, Value)> {
    let params: Value = serde_json::from_str(frame.params()?).ok()?;
    match frame.method()? {
        "notifications/progress" => Some((
            "progress",
            json!({"progress": params.get("progress"), "total": params.get("total"),
                "message": params.get("message")}),
        )),
        "notifications/message" => Some((
            "log",
            json!({"level": params.get("level"), "logger": params.get("logger"),
                "data": params.get("data")}),
        )),
        _ => None,
    }
}

/// Events of a streamed call queued for its client.
const STREAM_QUEUE: usize = 64;

/// `POST /v1/call` `{tool, arguments}`: the result as JSON, or progress, logs and the
/// result as NDJSON or SSE when the client accepts one. A client that goes away
/// cancels the call (the gateway cancels it upstream as the upstream's era does).
pub fn call(d: Arc<Daemon>, req: Request) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let framing = framing(&req);
        let level = api::query_param(&req, "log");
        let body = match api::json_body(req).await {
            Ok(b) => b,
            Err(p) => return p.into_response(),
        };
        let CallRequest {
            tool,
            arguments,
            capabilities,
            input_responses,
            request_state,
        } = match CallRequest::from_body(&body) {
            Ok(c) => c,
            Err(p) => return p.into_response(),
        };
        // A caller that answers servers' questions (multi round-trip): its
        // capabilities, and on a retry its answers and the server's state.
        let mut retry = serde_json::Map::new();
        if let Some(r) = input_responses {
            retry.insert("inputResponses".into(), r);
        }
        if let Some(r) = request_state {
            retry.insert("requestState".into(), r);
        }
        let log_level = match level.as_deref().map(mcpx_protocol::logging::Level::parse) {
            None => Some("info"),
            Some(Some(l)) => Some(l.as_str()),
            Some(None) => {
                return Problem::bad_request(format!(
                    "log={}: not a log level",
                    level.unwrap_or_default()
                ))
                .into_response();
            }
        };
        let (cancel, guard) = cancel_on_drop();
        let (related_tx, mut related_rx) = mpsc::channel::<Frame>(STREAM_QUEUE);
        let relay = match framing {
            Framing::Json => Relay {
                capabilities,
                ..Relay::default()
            },
            _ => Relay {
                related: Some(related_tx),
                log_level,
                capabilities,
            },
        };
        let work = {
            let d = d.clone();
            let cancel = cancel.clone();
            let tool = tool.clone();
            tokio::spawn(async move {
                let track = d.track_call(&tool, crate::daemon::Via::Api);
                let gw = d.app.gateway().clone();
                let unknown = || gw.catalog().tool(&tool).is_none();
                let mut params = json!({ "name": tool.clone(), "arguments": arguments });
                if let Value::Object(p) = &mut params {
                    p.extend(retry);
                }
                let r = invoke(&d, "tools/call", params, relay, cancel.clone(), unknown).await;
                track.finish(&r, cancel.is_cancelled());
                r
            })
        };
        if framing == Framing::Json {
            // The guard lives as long as this future: a client gone cancels the call.
            let r = work.await;
            drop(guard);
            return match r {
                Ok(r) => answer(r),
                Err(e) => Problem::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal-error",
                    e.to_string(),
                )
                .into_response(),
            };
        }
        let (out_tx, out_rx) = mpsc::channel::<Bytes>(STREAM_QUEUE);
        tokio::spawn(async move {
            let mut work = work;
            loop {
                tokio::select! {
                    biased;
                    Some(frame) = related_rx.recv() => {
                        if let Some((kind, data)) = related_event(&frame)
                            && out_tx.send(event(framing, kind, &data)).await.is_err()
                        {
                            return;
                        }
                    }
                    done = &mut work => {
                        // Relayed notifications still queued go first.
                        while let Ok(frame) = related_rx.try_recv() {
                            if let Some((kind, data)) = related_event(&frame) {
                                let _ = out_tx.send(event(framing, kind, &data)).await;
                            }
                        }
                        let last = match done {
                            Ok(Ok(result)) => event(framing, "result", &result),
                            Ok(Err(p)) => event(framing, "problem", &p.to_json()),
                            Err(e) => event(framing, "problem", &Problem::new(
                                StatusCode::INTERNAL_SERVER_ERROR, "internal-error", e.to_string()).to_json()),
                        };
                        let _ = out_tx.send(last).await;
                        return;
                    }
                    () = out_tx.closed() => return,
                }
            }
        });
        // The body holds the guard: when the client goes, the body is dropped and the
        // call cancelled.
        let stream = futures_util::stream::unfold((out_rx, guard), |(mut rx, guard)| async move {
            rx.recv()
                .await
                .map(|b| (Ok::<_, Infallible>(b), (rx, guard)))
        });
        let mut r = Response::new(Body::from_stream(stream));
        let media = if framing == Framing::Sse { SSE } else { NDJSON };
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        r
    })
}
