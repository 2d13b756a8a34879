//! The `/v1` API: every operation declared once, in [`OPERATIONS`], from which both
//! the routes ([`router`]) and the OpenAPI 3.1 document ([`openapi`]) are made.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, on};
use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};

use super::Daemon;
use super::ops;
use super::problem::{PROBLEM_JSON, Problem};

/// An operation's handler: the daemon and the whole request in, a response out.
pub type Handler = fn(Arc<Daemon>, Request) -> BoxFuture<'static, Response>;

/// An HTTP method an operation is served on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// GET.
    Get,
    /// POST.
    Post,
}

impl Verb {
    /// Lower case, as OpenAPI writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Post => "post",
        }
    }
}

/// Where a parameter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum In {
    /// In the path (`{name}`).
    Path,
    /// In the query string.
    Query,
}

/// A parameter of an operation.
#[derive(Debug)]
pub struct Param {
    /// Its name.
    pub name: &'static str,
    /// Where it is.
    pub location: In,
    /// Its JSON Schema type.
    pub kind: &'static str,
    /// What it means.
    pub description: &'static str,
}

/// One operation of the API.
#[derive(Debug)]
pub struct Operation {
    /// Its method.
    pub verb: Verb,
    /// Its path, with `{param}` for path parameters.
    pub path: &'static str,
    /// Its OpenAPI `operationId`.
    pub id: &'static str,
    /// What it does.
    pub summary: &'static str,
    /// Its parameters.
    pub params: &'static [Param],
    /// The JSON Schema of its body, if it takes one.
    pub body: Option<fn() -> Value>,
    /// Its success status and the JSON Schema of what it answers.
    pub ok: (u16, fn() -> Value),
    /// Other media types it can answer with (streams), beside `application/json`.
    pub streams: &'static [&'static str],
    /// Its handler.
    pub handler: Handler,
}

/// The media type of a newline-delimited JSON stream.
pub const NDJSON: &str = "application/x-ndjson";
/// The media type of an SSE stream.
pub const SSE: &str = "text/event-stream";

fn object(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required})
}

fn any_object() -> Value {
    json!({"type": "object"})
}

const NAME: Param = Param {
    name: "name",
    location: In::Path,
    kind: "string",
    description: "The upstream's name, as in the configuration.",
};

/// Every operation of the API.
pub static OPERATIONS: &[Operation] = &[
    Operation {
        verb: Verb::Get,
        path: "/v1/health",
        id: "health",
        summary: "The daemon's process id, version and uptime, its log file and its last reload.",
        params: &[],
        body: None,
        ok: (200, || {
            object(
                json!({"pid": {"type": "integer"}, "version": {"type": "string"},
                    "uptimeSeconds": {"type": "number"}, "config": {"type": "string"},
                    "lastEvent": {"type": "integer"},
                    "log": {"type": ["string", "null"], "description": "The file the daemon logs to, when started in the background."},
                    "lastReload": {"type": ["object", "null"], "description": "The last reload's event: trigger (file, sighup or asked), ok, plan or error, atMs."}}),
                &["pid", "version", "uptimeSeconds", "config"],
            )
        }),
        streams: &[],
        handler: ops::info::health,
    },
    Operation {
        verb: Verb::Get,
        path: "/v1/status",
        id: "status",
        summary: "Each upstream: its supervisor's state, era, revision, pid, restarts, last error (with its time; past once the upstream is ready again) and tool count (null until its first list).",
        params: &[],
        body: None,
        ok: (200, || {
            object(
                json!({"upstreams": {"type": "array", "items": object(json!({
                    "name": {"type": "string"}, "state": {"type": "string"},
                    "phrase": {"type": "string"}, "era": {"type": ["string", "null"]},
                    "revision": {"type": ["string", "null"]}, "pid": {"type": ["integer", "null"]},
                    "restarts": {"type": "integer"}, "lastError": {"type": ["string", "null"]},
                    "lastErrorAt": {"type": ["string", "null"], "format": "date-time"},
                    "tools": {"type": ["integer", "null"]}}), &["name", "state", "restarts", "tools"])}}),
                &["upstreams"],
            )
        }),
        streams: &[],
        handler: ops::info::status,
    },
    Operation {
        verb: Verb::Get,
        path: "/v1/tools",
        id: "tools",
        summary: "The tools a host sees, every page; `q` keeps those whose name or description contains it (any case).",
        params: &[Param {
            name: "q",
            location: In::Query,
            kind: "string",
            description: "Text to search for in names and descriptions.",
        }],
        body: None,
        ok: (200, || {
            object(
                json!({"tools": {"type": "array", "items": any_object()}}),
                &["tools"],
            )
        }),
        streams: &[],
        handler: ops::mcp::tools,
    },
    Operation {
        verb: Verb::Post,
        path: "/v1/call",
        id: "call",
        summary: "Calls a tool and answers its result (CallToolResult). With `Accept: application/x-ndjson` or `text/event-stream`, progress and logs come first, one event each, and the result (or problem) last.",
        params: &[],
        body: Some(|| {
            object(
                json!({"tool": {"type": "string"}, "arguments": {"type": "object"},
                    "capabilities": {"type": "object", "description": "Client capabilities: a caller that declares them gets an input_required result to answer."},
                    "inputResponses": {"type": "object", "description": "The answers to an input_required result's inputRequests, by key."},
                    "requestState": {"type": "string", "description": "The input_required result's requestState, sent back with the answers."}}),
                &["tool"],
            )
        }),
        ok: (200, any_object),
        streams: &[NDJSON, SSE],
        handler: ops::mcp::call,
    },
    Operation {
        verb: Verb::Post,
        path: "/v1/read",
        id: "read",
        summary: "Reads a resource (ReadResourceResult).",
        params: &[],
        body: Some(|| object(json!({"uri": {"type": "string"}}), &["uri"])),
        ok: (200, any_object),
        streams: &[],
        handler: ops::mcp::read,
    },
    Operation {
        verb: Verb::Post,
        path: "/v1/prompt",
        id: "prompt",
        summary: "Gets a prompt (GetPromptResult).",
        params: &[],
        body: Some(|| {
            object(
                json!({"name": {"type": "string"}, "arguments": {"type": "object"}}),
                &["name"],
            )
        }),
        ok: (200, any_object),
        streams: &[],
        handler: ops::mcp::prompt,
    },
    Operation {
        verb: Verb::Get,
        path: "/v1/servers",
        id: "servers",
        summary: "The configured upstreams: name, namespace, transport, whether disabled, and state.",
        params: &[],
        body: None,
        ok: (200, || {
            object(
                json!({"servers": {"type": "array", "items": any_object()}}),
                &["servers"],
            )
        }),
        streams: &[],
        handler: ops::info::servers,
    },
    Operation {
        verb: Verb::Post,
        path: "/v1/servers/{name}/restart",
        id: "restart",
        summary: "Stops the upstream (if running) and starts it again now, forgiving earlier failures.",
        params: &[NAME],
        body: None,
        ok: (202, || {
            object(
                json!({"name": {"type": "string"}, "restarts": {"type": "integer"}}),
                &["name"],
            )
        }),
        streams: &[],
        handler: ops::control::restart,
    },
    Operation {
        verb: Verb::Post,
        path: "/v1/reload",
        id: "reload",
        summary: "Reads the configuration file again and applies it; on an error the configuration in force stays.",
        params: &[],
        body: None,
        ok: (200, || {
            object(json!({"plan": {"type": "string"}}), &["plan"])
        }),
        streams: &[],
        handler: ops::control::reload,
    },
    Operation {
        verb: Verb::Get,
        path: "/v1/tasks",
        id: "tasks",
        summary: "The calls in flight (through this API and hosts' sessions), and how many gateway tasks hosts hold.",
        params: &[],
        body: None,
        ok: (200, || {
            object(
                json!({"calls": {"type": "array", "items": any_object()},
                    "gatewayTasks": {"type": "integer"}}),
                &["calls", "gatewayTasks"],
            )
        }),
        streams: &[],
        handler: ops::control::tasks,
    },
    Operation {
        verb: Verb::Get,
        path: "/v1/events",
        id: "events",
        summary: "Server-sent events: upstream states, catalog changes, calls (through this API and hosts' sessions) and reloads (whatever asked for them, with their outcome), each with its number as the event id. `since` (or Last-Event-ID) replays the kept events after it.",
        params: &[Param {
            name: "since",
            location: In::Query,
            kind: "integer",
            description: "Replay the kept events numbered after this one.",
        }],
        body: None,
        ok: (200, || json!({"type": "string"})),
        streams: &[SSE],
        handler: ops::events::events,
    },
    Operation {
        verb: Verb::Get,
        path: "/v1/attach",
        id: "attach",
        summary: "Upgrades the connection (`Upgrade: mcpx-stdio`) to an MCP stdio session with the gateway: newline-delimited JSON-RPC both ways. `mcpx serve --attach` uses it.",
        params: &[],
        body: None,
        ok: (101, || json!({"type": "string"})),
        streams: &[],
        handler: ops::attach::attach,
    },
    Operation {
        verb: Verb::Post,
        path: "/v1/shutdown",
        id: "shutdown",
        summary: "Stops the daemon: every upstream is stopped, and the socket and record removed.",
        params: &[],
        body: None,
        ok: (202, || {
            object(json!({"stopping": {"type": "boolean"}}), &["stopping"])
        }),
        streams: &[],
        handler: ops::control::shutdown,
    },
    Operation {
        verb: Verb::Get,
        path: "/v1/openapi.json",
        id: "openapi",
        summary: "This document.",
        params: &[],
        body: None,
        ok: (200, any_object),
        streams: &[],
        handler: ops::info::openapi,
    },
];

/// The `/v1` routes, each from its operation; other methods on a path get 405 and
/// other paths 404, both as problems.
pub fn router(daemon: Arc<Daemon>) -> Router {
    let mut router = Router::new();
    for op in OPERATIONS {
        let handler = op.handler;
        let filter = match op.verb {
            Verb::Get => MethodFilter::GET,
            Verb::Post => MethodFilter::POST,
        };
        let verb = op.verb.as_str().to_uppercase();
        let route = on(filter, move |State(d): State<Arc<Daemon>>, req: Request| {
            handler(d, req)
        })
        .fallback(move || {
            let verb = verb.clone();
            async move {
                let mut r = Problem::new(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "method-not-allowed",
                    format!("this path takes {verb} only"),
                )
                .into_response();
                if let Ok(v) = axum::http::HeaderValue::from_str(&verb) {
                    r.headers_mut().insert(axum::http::header::ALLOW, v);
                }
                r
            }
        });
        router = router.route(op.path, route);
    }
    // The status page (not an API operation: plain files).
    router
        .route("/", axum::routing::get(ops::page::index))
        .route("/page.css", axum::routing::get(ops::page::css))
        .route("/page.js", axum::routing::get(ops::page::js))
        .with_state(daemon)
}

/// The answer to a path no operation has.
pub async fn no_route(uri: axum::http::Uri) -> Response {
    Problem::not_found(format!(
        "no such path: {} (GET /v1/openapi.json lists them)",
        uri.path()
    ))
    .into_response()
}

/// The OpenAPI 3.1 document of [`OPERATIONS`].
pub fn openapi() -> Value {
    let mut paths = Map::new();
    for op in OPERATIONS {
        let mut o = json!({
            "operationId": op.id,
            "summary": op.summary,
        });
        let params: Vec<Value> = op
            .params
            .iter()
            .map(|p| {
                json!({
                    "name": p.name,
                    "in": match p.location { In::Path => "path", In::Query => "query" },
                    "required": p.location == In::Path,
                    "description": p.description,
                    "schema": {"type": p.kind},
                })
            })
            .collect();
        if !params.is_empty() {
            o["parameters"] = Value::Array(params);
        }
        if let Some(body) = op.body {
            o["requestBody"] = json!({
                "required": true,
                "content": {"application/json": {"schema": body()}},
            });
        }
        let (status, schema) = op.ok;
        let mut content = Map::new();
        // A stream of its own (the events), or a switch of protocols, answers no JSON.
        let stream_only = op.verb == Verb::Get && op.streams == [SSE];
        if status != 101 && !stream_only {
            content.insert("application/json".into(), json!({"schema": schema()}));
        }
        for media in op.streams {
            content.insert((*media).into(), json!({"schema": {"type": "string"}}));
        }
        let mut ok = json!({"description": op.summary});
        if !content.is_empty() {
            ok["content"] = Value::Object(content);
        }
        o["responses"] = json!({
            status.to_string(): ok,
            "default": {
                "description": "A problem (RFC 9457), with the JSON-RPC error when the gateway answered one.",
                "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
            },
        });
        let entry = paths
            .entry(op.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        entry[op.verb.as_str()] = o;
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "mcpx daemon",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The control API of `mcpx daemon`, on its Unix socket and its TCP listener.",
        },
        "paths": paths,
        "components": {"schemas": {"Problem": Problem::schema()}},
    })
}

/// Largest request body the API reads.
pub const MAX_BODY: usize = 4 * 1024 * 1024;
/// How long a request's body may take to arrive.
pub const BODY_WITHIN: Duration = Duration::from_secs(30);

/// A request's body as a JSON object, or the problem it is.
pub async fn json_body(req: Request) -> Result<Map<String, Value>, Problem> {
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body-too-large",
            format!("the body is over {MAX_BODY} bytes"),
        ));
    }
    let bytes = tokio::time::timeout(BODY_WITHIN, axum::body::to_bytes(req.into_body(), MAX_BODY))
        .await
        .map_err(|_| {
            Problem::new(
                StatusCode::REQUEST_TIMEOUT,
                "body-timeout",
                format!("the body did not arrive within {} s", BODY_WITHIN.as_secs()),
            )
        })?
        .map_err(|e| {
            Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body-too-large",
                format!("the body could not be read within {MAX_BODY} bytes: {e}"),
            )
        })?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err(Problem::bad_request("the body must be a JSON object")),
        Err(e) => Err(Problem::bad_request(format!("the body is not JSON: {e}"))),
    }
}

/// The string member `key` of `body`, or the problem it is missing.
pub fn string_member<'a>(body: &'a Map<String, Value>, key: &str) -> Result<&'a str, Problem> {
    match body.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(Problem::bad_request(format!("`{key}` must be a string"))),
        None => Err(Problem::bad_request(format!("`{key}` is required"))),
    }
}

/// The object member `key` of `body` (`{}` when absent), or the problem it is not one.
pub fn object_member(body: &Map<String, Value>, key: &str) -> Result<Value, Problem> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(json!({})),
        Some(v @ Value::Object(_)) => Ok(v.clone()),
        Some(_) => Err(Problem::bad_request(format!("`{key}` must be an object"))),
    }
}

/// The query parameter `key` of `req`, percent-decoded.
pub fn query_param(req: &Request, key: &str) -> Option<String> {
    let query = req.uri().query()?;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == key).then(|| {
            percent_encoding::percent_decode_str(&v.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}
