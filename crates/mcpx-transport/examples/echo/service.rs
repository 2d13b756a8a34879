//! A minimal MCP server built directly on the transport layer: one `echo` tool, one
//! `slow` tool (progress, honours cancellation), one `ask` tool (asks the client for
//! its roots, legacy only) and one `region` tool whose arguments are mirrored into
//! `Mcp-Param-*` headers (2026-07-28 `x-mcp-header`). It answers in the revision each request was classified in:
//! `initialize` for legacy clients, `server/discover` and the modern result envelope
//! for 2026-07-28 ones. Shared by the `echo_server` example and the transport tests.

use std::time::Duration;

use mcpx_protocol::error::{INVALID_PARAMS, METHOD_NOT_FOUND};
use mcpx_protocol::header;
use mcpx_protocol::jsonrpc::member;
use mcpx_protocol::method::client_may_send;
use mcpx_protocol::{Frame, Revision, Verdict};
use mcpx_transport::{Incoming, Peer, RequestCtx, Service};
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// The echo service.
#[derive(Debug, Default)]
pub struct Echo;

fn raw(v: &Value) -> Box<RawValue> {
    // A Value always serialises.
    RawValue::from_string(v.to_string())
        .unwrap_or_else(|_| RawValue::from_string("{}".into()).unwrap_or_default())
}

const SERVER_INFO: &str = r#"{"name":"mcpx-echo","version":"0.1.0"}"#;

fn tools() -> Value {
    json!([
        {"name": "echo", "description": "Echoes its text.",
         "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
        {"name": "slow", "description": "Reports progress every 50 ms for `steps` steps; honours cancellation.",
         "inputSchema": {"type": "object", "properties": {"steps": {"type": "integer"}}}},
        {"name": "ask", "description": "Asks the client for its roots (legacy clients only).",
         "inputSchema": {"type": "object"}},
        {"name": "region", "description": "Echoes its `region` and `n`, which modern clients mirror into Mcp-Param-Region and Mcp-Param-N.",
         "inputSchema": region_schema()}
    ])
}

/// The `region` tool's input schema: two arguments annotated with `x-mcp-header`
/// (2026-07-28 basic/transports/streamable-http §Custom Headers from Tool Parameters).
fn region_schema() -> Value {
    json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "n": {"type": "integer", "x-mcp-header": "N"}
    }})
}

/// Adds what every 2026-07-28 result carries: `resultType`, `serverInfo` in `_meta`,
/// and for cacheable methods `ttlMs`/`cacheScope`.
fn envelope(mut result: Value, verdict: Verdict, cacheable: bool) -> Value {
    if let (Verdict::Modern { .. }, Some(o)) = (verdict, result.as_object_mut()) {
        {
            o.insert("resultType".into(), json!("complete"));
            let info: Value = serde_json::from_str(SERVER_INFO).unwrap_or(Value::Null);
            o.insert(
                "_meta".into(),
                json!({"io.modelcontextprotocol/serverInfo": info}),
            );
            if cacheable {
                o.insert("ttlMs".into(), json!(0));
                o.insert("cacheScope".into(), json!("public"));
            }
        }
    }
    result
}

fn text_result(text: &str, verdict: Verdict) -> Value {
    envelope(
        json!({"content": [{"type": "text", "text": text}]}),
        verdict,
        false,
    )
}

impl Service for Echo {
    async fn request(&self, req: Incoming, ctx: RequestCtx) -> Frame {
        let frame = &req.frame;
        let id = frame.id().cloned().unwrap_or(mcpx_protocol::Id::Number(0));
        let method = frame.method().unwrap_or_default();
        let rev = req.verdict.revision();
        let ok = |v: Value| Frame::result_response(&id, &raw(&v));
        let err = |code: i64, msg: &str| Frame::error_response(Some(&id), code, msg, None);
        if !client_may_send(method, rev) {
            return err(METHOD_NOT_FOUND, &format!("method not found: {method}"));
        }
        let params: Value = frame
            .params()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(Value::Null);
        match method {
            "initialize" => ok(json!({
                "protocolVersion": rev.as_str(),
                "capabilities": {"tools": {}},
                "serverInfo": serde_json::from_str::<Value>(SERVER_INFO).unwrap_or(Value::Null),
            })),
            "server/discover" => ok(envelope(
                json!({
                    "supportedVersions": [Revision::V2026_07_28.as_str()],
                    "capabilities": {"tools": {}},
                }),
                req.verdict,
                true,
            )),
            "ping" => ok(json!({})),
            "tools/list" => ok(envelope(json!({"tools": tools()}), req.verdict, true)),
            "tools/call" => {
                let name = params
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let args = params.get("arguments").cloned().unwrap_or(Value::Null);
                match name {
                    "echo" => match args.get("text").and_then(Value::as_str) {
                        Some(t) => ok(text_result(t, req.verdict)),
                        None => err(INVALID_PARAMS, "echo needs a string `text`"),
                    },
                    "slow" => {
                        let steps = args.get("steps").and_then(Value::as_u64).unwrap_or(3);
                        let token = params.pointer("/_meta/progressToken").cloned();
                        for i in 1..=steps {
                            tokio::select! {
                                () = ctx.cancelled().cancelled() => return err(-32603, "cancelled"),
                                () = tokio::time::sleep(Duration::from_millis(50)) => {}
                            }
                            if let Some(t) = &token {
                                let p = json!({"progressToken": t, "progress": i, "total": steps});
                                let _ = ctx
                                    .notify(Frame::notification(
                                        "notifications/progress",
                                        Some(&raw(&p)),
                                    ))
                                    .await;
                            }
                        }
                        ok(text_result(
                            &format!("done after {steps} steps"),
                            req.verdict,
                        ))
                    }
                    "ask" => match ctx
                        .request("roots/list", None, Duration::from_secs(10))
                        .await
                    {
                        Ok(answer) => {
                            let roots = answer
                                .result()
                                .and_then(|r| member(r, "roots"))
                                .unwrap_or("null")
                                .to_owned();
                            ok(text_result(&format!("roots: {roots}"), req.verdict))
                        }
                        Err(e) => err(-32603, &format!("could not ask the client: {e}")),
                    },
                    "region" => {
                        let region = args.get("region").and_then(Value::as_str);
                        let n = args.get("n").and_then(Value::as_i64);
                        ok(text_result(
                            &format!("region {region:?}, n {n:?}"),
                            req.verdict,
                        ))
                    }
                    other => err(INVALID_PARAMS, &format!("unknown tool: {other}")),
                }
            }
            other => err(METHOD_NOT_FOUND, &format!("method not found: {other}")),
        }
    }

    async fn notification(&self, _n: Incoming, _peer: Option<Peer>) {}

    fn param_headers(&self) -> mcpx_transport::ParamHeaders {
        // The annotations are ours and valid; an invalid set would make the tool
        // invalid for clients (§Schema Extension), so none are checked then either.
        let region = header::param_headers(&region_schema()).unwrap_or_default();
        mcpx_transport::ParamHeaders::new([("region".to_owned(), region)].into())
    }
}
