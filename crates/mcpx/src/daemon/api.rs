//! The `/v1` API: every operation declared once, in [`OPERATIONS`], from which both
//! the routes ([`router`]) and the OpenAPI 3.1 document ([`openapi`]) are made. The
//! document's schemas are derived (utoipa) from the types the handlers read and answer.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, on};
use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ComponentsBuilder, Object, Schema, Type};
use utoipa::openapi::{
    Content, InfoBuilder, OpenApiBuilder, PathsBuilder, Ref, RefOr, Required, ResponseBuilder,
    ResponsesBuilder,
};

use super::Daemon;
use super::ops;
use super::ops::control::{Reloaded, Restarted, Stopping, Tasks};
use super::ops::history::{Calls, Minutes, Stats};
use super::ops::info::{Health, Servers, Status};
use super::ops::mcp::{CallRequest, PromptRequest, ReadRequest, Tools};
use super::problem::{PROBLEM_JSON, Problem, ProblemDocument, to_value};

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

/// The JSON Schema type of a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string.
    String,
    /// An integer.
    Integer,
    /// A boolean.
    Boolean,
}

/// A parameter of an operation.
#[derive(Debug)]
pub struct Param {
    /// Its name.
    pub name: &'static str,
    /// Where it is.
    pub location: In,
    /// Its JSON Schema type.
    pub kind: Kind,
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
    pub body: Option<SchemaOf>,
    /// Its success status and the JSON Schema of what it answers.
    pub ok: (u16, SchemaOf),
    /// Other media types it can answer with (streams), beside `application/json`.
    pub streams: &'static [&'static str],
    /// Its handler.
    pub handler: Handler,
}

/// The media type of a newline-delimited JSON stream.
pub const NDJSON: &str = "application/x-ndjson";
/// The media type of an SSE stream.
pub const SSE: &str = "text/event-stream";

/// The named schemas of a document's components, as they are collected.
pub type Schemas = Vec<(String, RefOr<Schema>)>;

/// A schema for the document: a reference to a named one, which it adds (with those it
/// uses) to the components, or one written in place.
pub type SchemaOf = fn(&mut Schemas) -> RefOr<Schema>;

/// The schema of `T`, derived from the type: a reference to its component.
fn named<T: ToSchema>(schemas: &mut Schemas) -> RefOr<Schema> {
    T::schemas(schemas);
    schemas.push((T::name().into_owned(), T::schema()));
    Ref::from_schema_name(T::name()).into()
}

/// Any JSON object: an MCP result the gateway relays as it is, or this document.
fn any_object(_: &mut Schemas) -> RefOr<Schema> {
    Object::with_type(Type::Object).into()
}

/// Text: a stream, or no body.
fn text(_: &mut Schemas) -> RefOr<Schema> {
    Object::with_type(Type::String).into()
}

const NAME: Param = Param {
    name: "name",
    location: In::Path,
    kind: Kind::String,
    description: "The upstream's name, as in the configuration.",
};

const SINCE: Param = Param {
    name: "since",
    location: In::Query,
    kind: Kind::String,
    description: "Calls that started at or after this: a duration back from now (`15m`, `2h`, `1d`), an RFC 3339 time (UTC) or milliseconds since the Unix epoch.",
};

const UNTIL: Param = Param {
    name: "until",
    location: In::Query,
    kind: Kind::String,
    description: "Calls that started before this (as `since`).",
};

const UPSTREAM: Param = Param {
    name: "upstream",
    location: In::Query,
    kind: Kind::String,
    description: "Calls to this upstream.",
};

const TOOL: Param = Param {
    name: "tool",
    location: In::Query,
    kind: Kind::String,
    description: "Calls whose tool, prompt or resource URI matches this glob (`*`, `?`, `[…]`; case-sensitive).",
};

const ERRORS: Param = Param {
    name: "errors",
    location: In::Query,
    kind: Kind::Boolean,
    description: "`true`: only the calls that did not end with a result.",
};

const HOST: Param = Param {
    name: "host",
    location: In::Query,
    kind: Kind::String,
    description: "Calls of the host whose `clientInfo.name` is this (`/v1/call`'s is `mcpx-daemon-api`).",
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
        ok: (200, named::<Health>),
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
        ok: (200, named::<Status>),
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
            kind: Kind::String,
            description: "Text to search for in names and descriptions.",
        }],
        body: None,
        ok: (200, named::<Tools>),
        streams: &[],
        handler: ops::mcp::tools,
    },
    Operation {
        verb: Verb::Post,
        path: "/v1/call",
        id: "call",
        summary: "Calls a tool and answers its result (CallToolResult). With `Accept: application/x-ndjson` or `text/event-stream`, progress and logs come first, one event each, and the result (or problem) last.",
        params: &[],
        body: Some(named::<CallRequest>),
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
        body: Some(named::<ReadRequest>),
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
        body: Some(named::<PromptRequest>),
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
        ok: (200, named::<Servers>),
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
        ok: (202, named::<Restarted>),
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
        ok: (200, named::<Reloaded>),
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
        ok: (200, named::<Tasks>),
        streams: &[],
        handler: ops::control::tasks,
    },
    Operation {
        verb: Verb::Get,
        path: "/v1/history",
        id: "history",
        summary: "The call history: the latest `limit` calls the filters pick, oldest first, and the number of the last call written (`lastId`; `after=lastId` asks for those written since). 404 when the history is off.",
        params: &[
            SINCE,
            UNTIL,
            UPSTREAM,
            TOOL,
            ERRORS,
            HOST,
            Param {
                name: "limit",
                location: In::Query,
                kind: Kind::Integer,
                description: "At most this many calls, 1 to 1000 (default 50).",
            },
            Param {
                name: "after",
                location: In::Query,
                kind: Kind::Integer,
                description: "Only the calls numbered after this one.",
            },
        ],
        body: None,
        ok: (200, named::<Calls>),
        streams: &[],
        handler: ops::history::history,
    },
    Operation {
        verb: Verb::Get,
        path: "/v1/history/minutes",
        id: "historyMinutes",
        summary: "Calls per minute by outcome, for the minutes that had any: by default the last 60 (at most 7 days). 404 when the history is off.",
        params: &[SINCE, UNTIL, UPSTREAM, TOOL, ERRORS, HOST],
        body: None,
        ok: (200, named::<Minutes>),
        streams: &[],
        handler: ops::history::minutes,
    },
    Operation {
        verb: Verb::Get,
        path: "/v1/stats",
        id: "stats",
        summary: "The calls the filters pick, grouped `by` tool (the default), upstream, host or error: calls, errors, error rate, p50, p95 and p99 duration, the most called first (at most 1000 groups). 404 when the history is off.",
        params: &[
            SINCE,
            UNTIL,
            UPSTREAM,
            TOOL,
            ERRORS,
            HOST,
            Param {
                name: "by",
                location: In::Query,
                kind: Kind::String,
                description: "`tool`, `upstream`, `host` or `error` (default `tool`).",
            },
        ],
        body: None,
        ok: (200, named::<Stats>),
        streams: &[],
        handler: ops::history::stats,
    },
    Operation {
        verb: Verb::Get,
        path: "/v1/events",
        id: "events",
        summary: "Server-sent events: upstream states, catalog changes, calls (through this API and hosts' sessions), reloads (whatever asked for them, with their outcome) and the call history's writes (`history`, `{\"lastId\": N}`, at most four a second), each with its number as the event id. `since` (or Last-Event-ID) replays the kept events after it.",
        params: &[Param {
            name: "since",
            location: In::Query,
            kind: Kind::Integer,
            description: "Replay the kept events numbered after this one.",
        }],
        body: None,
        ok: (200, text),
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
        ok: (101, text),
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
        ok: (202, named::<Stopping>),
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
        let post = matches!(op.verb, Verb::Post);
        let route = on(
            filter,
            move |State(d): State<Arc<Daemon>>, req: Request| match post.then(|| json_media(&req)) {
                Some(Err(p)) => Box::pin(std::future::ready(p.into_response())),
                _ => handler(d, req),
            },
        )
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

/// A POST's body must be JSON (`mcpx_transport::json_api::post_media`): else 415.
fn json_media(req: &Request) -> Result<(), Problem> {
    mcpx_transport::json_api::post_media(req.headers()).map_err(|why| {
        Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            why.to_string(),
        )
    })
}

/// The answer to a path no operation has.
pub async fn no_route(uri: axum::http::Uri) -> Response {
    Problem::not_found(format!(
        "no such path: {} (GET /v1/openapi.json lists them)",
        uri.path()
    ))
    .into_response()
}

/// The OpenAPI 3.1 document of [`OPERATIONS`], as JSON.
pub fn openapi() -> &'static Value {
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    DOCUMENT.get_or_init(|| to_value(&document()))
}

/// The OpenAPI 3.1 document of [`OPERATIONS`].
pub fn document() -> utoipa::openapi::OpenApi {
    let mut schemas = Schemas::new();
    let problem = named::<ProblemDocument>(&mut schemas);
    let mut paths = PathsBuilder::new();
    for op in OPERATIONS {
        let mut o = OperationBuilder::new()
            .operation_id(Some(op.id))
            .summary(Some(op.summary));
        for p in op.params {
            let (location, required) = match p.location {
                In::Path => (ParameterIn::Path, Required::True),
                In::Query => (ParameterIn::Query, Required::False),
            };
            o = o.parameter(
                ParameterBuilder::new()
                    .name(p.name)
                    .parameter_in(location)
                    .required(required)
                    .description(Some(p.description))
                    .schema(Some(Object::with_type(match p.kind {
                        Kind::String => Type::String,
                        Kind::Integer => Type::Integer,
                        Kind::Boolean => Type::Boolean,
                    }))),
            );
        }
        if let Some(body) = op.body {
            o = o.request_body(Some(
                RequestBodyBuilder::new()
                    .required(Some(Required::True))
                    .content("application/json", Content::new(Some(body(&mut schemas))))
                    .build(),
            ));
        }
        let (status, schema) = op.ok;
        let mut ok = ResponseBuilder::new().description(op.summary);
        // A stream of its own (the events), or a switch of protocols, answers no JSON.
        let stream_only = op.verb == Verb::Get && op.streams == [SSE];
        if status == 101 || stream_only {
            schema(&mut schemas);
        } else {
            ok = ok.content("application/json", Content::new(Some(schema(&mut schemas))));
        }
        for media in op.streams {
            ok = ok.content(*media, Content::new(Some(text(&mut schemas))));
        }
        let responses = ResponsesBuilder::new()
            .response(status.to_string(), ok)
            .response(
            "default",
            ResponseBuilder::new()
                .description(
                    "A problem (RFC 9457), with the JSON-RPC error when the gateway answered one.",
                )
                .content(PROBLEM_JSON, Content::new(Some(problem.clone()))),
        );
        let method = match op.verb {
            Verb::Get => HttpMethod::Get,
            Verb::Post => HttpMethod::Post,
        };
        paths = paths.path(op.path, PathItem::new(method, o.responses(responses)));
    }
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("mcpx daemon")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "The control API of `mcpx daemon`, on its Unix socket and its TCP listener.",
                )),
        )
        .paths(paths)
        .components(Some(
            ComponentsBuilder::new().schemas_from_iter(schemas).build(),
        ))
        .build()
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
    mcpx_transport::json_api::json_object(&bytes).map_err(|e| Problem::bad_request(e.to_string()))
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

/// The query parameter `key` of `req`, decoded as a form's.
pub fn query_param(req: &Request, key: &str) -> Option<String> {
    mcpx_transport::json_api::query_param(req.uri().query(), key)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each operation's path, method, id, parameters and, by status, media types.
    fn shape(doc: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for (path, methods) in doc["paths"].as_object().into_iter().flatten() {
            for (method, op) in methods.as_object().into_iter().flatten() {
                let params: Vec<&str> = op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p["name"].as_str())
                    .collect();
                let responses: Vec<String> = op["responses"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(status, r)| {
                        let media: Vec<&String> = r["content"]
                            .as_object()
                            .into_iter()
                            .flatten()
                            .map(|(m, _)| m)
                            .collect();
                        format!("{status}{media:?}")
                    })
                    .collect();
                let body = if op.get("requestBody").is_some() {
                    " body"
                } else {
                    ""
                };
                out.push(format!(
                    "{method} {path} {} {params:?}{body} {}",
                    op["operationId"].as_str().unwrap_or("?"),
                    responses.join(" ")
                ));
            }
        }
        out.sort();
        out
    }

    /// The document's paths, operation ids, methods, parameters, status codes and media
    /// types, as the hand-written document had them before its schemas were derived.
    #[test]
    fn the_document_keeps_its_operations_and_statuses() {
        let problem = r#"default["application/problem+json"]"#;
        let json = r#"["application/json"]"#;
        let mut want = vec![
            format!(r#"get /v1/attach attach [] 101[] {problem}"#),
            format!(
                r#"post /v1/call call [] body 200["application/json", "application/x-ndjson", "text/event-stream"] {problem}"#
            ),
            format!(r#"get /v1/events events ["since"] 200["text/event-stream"] {problem}"#),
            format!(r#"get /v1/health health [] 200{json} {problem}"#),
            format!(
                r#"get /v1/history history ["since", "until", "upstream", "tool", "errors", "host", "limit", "after"] 200{json} {problem}"#
            ),
            format!(
                r#"get /v1/history/minutes historyMinutes ["since", "until", "upstream", "tool", "errors", "host"] 200{json} {problem}"#
            ),
            format!(
                r#"get /v1/stats stats ["since", "until", "upstream", "tool", "errors", "host", "by"] 200{json} {problem}"#
            ),
            format!(r#"get /v1/openapi.json openapi [] 200{json} {problem}"#),
            format!(r#"post /v1/prompt prompt [] body 200{json} {problem}"#),
            format!(r#"post /v1/read read [] body 200{json} {problem}"#),
            format!(r#"post /v1/reload reload [] 200{json} {problem}"#),
            format!(r#"get /v1/servers servers [] 200{json} {problem}"#),
            format!(r#"post /v1/servers/{{name}}/restart restart ["name"] 202{json} {problem}"#),
            format!(r#"post /v1/shutdown shutdown [] 202{json} {problem}"#),
            format!(r#"get /v1/status status [] 200{json} {problem}"#),
            format!(r#"get /v1/tasks tasks [] 200{json} {problem}"#),
            format!(r#"get /v1/tools tools ["q"] 200{json} {problem}"#),
        ];
        want.sort();
        let doc = openapi();
        assert_eq!(shape(doc), want);
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(doc["info"]["title"], "mcpx daemon");
        // Every reference resolves to a component.
        let text = doc.to_string();
        for r in text.split(r##""$ref":"#/components/schemas/"##).skip(1) {
            let name = r.split('"').next().unwrap_or_default();
            assert!(doc["components"]["schemas"][name].is_object(), "{name}");
        }
    }
}
