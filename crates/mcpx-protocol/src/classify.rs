//! Telling legacy from modern: the era and revision each incoming message is handled in.
//!
//! Pure functions of the message and what the transport saw (../shared/spec/README.md
//! §"Telling legacy from modern"; 2026-07-28 basic/versioning §Backward Compatibility):
//!
//! * **stdio**: an `initialize` makes the process legacy; a request whose
//!   `params._meta` carries `io.modelcontextprotocol/protocolVersion` with a modern
//!   revision is modern, per request, whatever the process is.
//! * **HTTP**: the `MCP-Protocol-Version` header, `Mcp-Session-Id`, and the body.
//!   A missing header means 2025-03-26 for a legacy request (register B-C8); a modern
//!   body without the header is a header mismatch (-32020).
//!
//! The result is a [`Verdict`] or a [`Rejection`] carrying the error code and HTTP status
//! the sender is owed.

use serde_json::json;

use crate::error::{
    HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION,
};
use crate::jsonrpc::{Frame, Id, Kind};
use crate::meta;
use crate::method::client_may_send;
use crate::revision::{Era, Revision};

/// How a message is to be handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Legacy semantics at `revision`. `initialize` is true for the `initialize`
    /// request itself, whose revision is the negotiated one (H4, A-C5).
    Legacy {
        /// The revision to serve.
        revision: Revision,
        /// This message is the `initialize` request opening the legacy session.
        initialize: bool,
    },
    /// Modern, stateless semantics at `revision`.
    Modern {
        /// The revision the request is written in.
        revision: Revision,
    },
}

impl Verdict {
    /// The era.
    pub fn era(&self) -> Era {
        match self {
            Verdict::Legacy { .. } => Era::Legacy,
            Verdict::Modern { .. } => Era::Modern,
        }
    }
    /// The revision.
    pub fn revision(&self) -> Revision {
        match *self {
            Verdict::Legacy { revision, .. } | Verdict::Modern { revision } => revision,
        }
    }
}

/// A message that cannot be classified, and the answer it is owed.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// JSON-RPC error code.
    pub code: i64,
    /// HTTP status, for the HTTP transport.
    pub http_status: u16,
    /// Human-readable reason.
    pub message: String,
    /// `error.data`, if any.
    pub data: Option<serde_json::Value>,
}

impl Rejection {
    fn new(code: i64, http_status: u16, message: impl Into<String>) -> Self {
        Rejection {
            code,
            http_status,
            message: message.into(),
            data: None,
        }
    }

    /// 2026-07-28 `UnsupportedProtocolVersionError` (-32022, HTTP 400).
    pub fn unsupported_version(requested: &str) -> Self {
        let supported: Vec<&str> = Revision::of_era(Era::Modern)
            .map(Revision::as_str)
            .collect();
        Rejection {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            http_status: 400,
            message: format!(
                "unsupported protocol version {requested:?}; supported: {}",
                supported.join(", ")
            ),
            data: Some(json!({ "supported": supported, "requested": requested })),
        }
    }

    /// The error response for request `id` (omitted when `None`, register A-C4).
    pub fn to_response(&self, id: Option<&Id>) -> Frame {
        Frame::error_response(id, self.code, &self.message, self.data.as_ref())
    }
}

/// The legacy revision mcpx serves to an `initialize` that requested `requested`:
/// the same when it is a legacy revision mcpx supports, otherwise the newest legacy
/// revision (every legacy basic/lifecycle §Version Negotiation: the server "MUST
/// respond with another protocol version it supports"; H4, A-C5).
pub fn negotiate_legacy(requested: Option<&str>) -> Revision {
    requested
        .and_then(Revision::from_wire)
        .filter(|r| r.era() == Era::Legacy)
        .unwrap_or(Revision::NEWEST_LEGACY)
}

/// The `protocolVersion` an `initialize` request asks for.
fn initialize_requested(frame: &Frame) -> Option<String> {
    let params = frame.params()?;
    let raw = crate::jsonrpc::member(params, "protocolVersion")?;
    serde_json::from_str(raw).ok()
}

/// What `params._meta["io.modelcontextprotocol/protocolVersion"]` says.
#[derive(Debug, Clone, PartialEq, Eq)]
enum MetaVersion {
    Absent,
    Modern(Revision),
    /// Present but not a modern revision: a string (maybe a legacy peer's own data under
    /// a prefix 2025-06-18 did not reserve, A-C9) or some other JSON value.
    Other(String),
}

fn meta_version(frame: &Frame) -> MetaVersion {
    let Some(raw) = frame.params_meta(meta::PROTOCOL_VERSION) else {
        return MetaVersion::Absent;
    };
    match crate::jsonrpc::string_value(raw) {
        Some(s) => match Revision::from_wire(&s) {
            Some(r) if r.era() == Era::Modern => MetaVersion::Modern(r),
            _ => MetaVersion::Other(s.into_owned()),
        },
        None => MetaVersion::Other(raw.to_owned()),
    }
}

/// The first required 2026-07-28 request `_meta` key `frame` lacks (basic/index §_meta:
/// "A request missing any required field is malformed"; register A-C12).
fn missing_required_meta(frame: &Frame) -> Option<&'static str> {
    if frame.kind() != Kind::Request {
        return None;
    }
    meta::MODERN_REQUIRED_REQUEST_KEYS
        .iter()
        .copied()
        .find(|k| frame.params_meta(k).is_none())
}

fn missing_meta_rejection(key: &str) -> Rejection {
    // 2026-07-28 basic/index §_meta: -32602, and on HTTP status 400.
    Rejection::new(
        INVALID_PARAMS,
        400,
        format!("missing required _meta key {key:?}"),
    )
}

/// A modern verdict for `frame`, unless it lacks a required `_meta` key.
fn modern(frame: &Frame, revision: Revision) -> Result<Verdict, Rejection> {
    match missing_required_meta(frame) {
        Some(key) => Err(missing_meta_rejection(key)),
        None => Ok(Verdict::Modern { revision }),
    }
}

/// Classifies a message received on stdio.
///
/// `process` is the legacy revision the process negotiated with `initialize`, if any:
/// the only state stdio keeps (2026-07-28 basic/versioning: an `initialize` selects
/// legacy semantics "scoped to the stdio process").
pub fn classify_stdio(process: Option<Revision>, frame: &Frame) -> Result<Verdict, Rejection> {
    if frame.kind() == Kind::Request && frame.method() == Some("initialize") {
        let requested = initialize_requested(frame);
        return Ok(Verdict::Legacy {
            revision: negotiate_legacy(requested.as_deref()),
            initialize: true,
        });
    }
    let legacy = |revision| Verdict::Legacy {
        revision,
        initialize: false,
    };
    match frame.kind() {
        Kind::Request | Kind::Notification => match (meta_version(frame), process) {
            (MetaVersion::Modern(revision), _) => modern(frame, revision),
            (MetaVersion::Absent | MetaVersion::Other(_), Some(rev)) => Ok(legacy(rev)),
            (MetaVersion::Other(v), None) if frame.kind() == Kind::Request => {
                Err(Rejection::unsupported_version(&v))
            }
            (_, None) => fresh_without_version(frame),
        },
        // Responses answer server-to-client requests, which only legacy has (B-C1).
        Kind::Result | Kind::Error => match process {
            Some(rev) => Ok(legacy(rev)),
            None => Err(Rejection::new(
                INVALID_REQUEST,
                400,
                "a response was received, but no legacy session is open and modern clients \
                 never send responses",
            )),
        },
    }
}

/// A message with no modern version on a stdio process that has not initialised.
fn fresh_without_version(frame: &Frame) -> Result<Verdict, Rejection> {
    let method = frame.method().unwrap_or_default();
    let newest_legacy = Verdict::Legacy {
        revision: Revision::NEWEST_LEGACY,
        initialize: false,
    };
    if frame.kind() == Kind::Notification {
        // Notifications get no answer: handle them in the newest era that has them.
        return Ok(if client_may_send(method, Revision::NEWEST) {
            Verdict::Modern {
                revision: Revision::NEWEST,
            }
        } else {
            newest_legacy
        });
    }
    // Legacy lets a client ping before initialising (basic/lifecycle §Initialization:
    // "other than pings"); ping does not exist in the modern era.
    if method == "ping" {
        return Ok(newest_legacy);
    }
    Err(Rejection::new(
        INVALID_PARAMS,
        400,
        format!(
            "{method:?} carries no _meta {:?} (required by 2026-07-28) and no initialize \
             has opened a legacy session",
            meta::PROTOCOL_VERSION
        ),
    ))
}

/// The HTTP method of a request to the MCP endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpMethod {
    /// POST: a message.
    Post,
    /// GET: opens a legacy server stream.
    Get,
    /// DELETE: ends a legacy session.
    Delete,
}

/// What the transport saw of an HTTP request, for classification.
#[derive(Debug, Clone, Copy)]
pub struct HttpRequest<'a> {
    /// The HTTP method.
    pub method: HttpMethod,
    /// The `MCP-Protocol-Version` header, if present.
    pub protocol_version: Option<&'a str>,
    /// The `Mcp-Session-Id` header, if present.
    pub session_id: Option<&'a str>,
    /// The body's single message, for POST; `None` for GET, DELETE and batches.
    pub body: Option<&'a Frame>,
}

/// Classifies a request to the Streamable HTTP endpoint.
pub fn classify_http(req: &HttpRequest<'_>) -> Result<Verdict, Rejection> {
    let header = req.protocol_version.map(str::trim);
    let header_rev = header.and_then(Revision::from_wire);
    let body_meta = req.body.map_or(MetaVersion::Absent, meta_version);
    let is_initialize = req
        .body
        .is_some_and(|f| f.kind() == Kind::Request && f.method() == Some("initialize"));
    let legacy = |revision| {
        Ok(Verdict::Legacy {
            revision,
            initialize: false,
        })
    };

    if req.method != HttpMethod::Post {
        // GET and DELETE exist only for legacy sessions; a modern client gets 405 from
        // the transport, which still needs to know the request is modern.
        return match header_rev {
            Some(r) if r.era() == Era::Modern => Ok(Verdict::Modern { revision: r }),
            Some(r) => legacy(r),
            None => legacy(Revision::V2025_03_26),
        };
    }
    if is_initialize {
        if let Some(Revision::V2026_07_28) = header_rev {
            // A modern header on a legacy handshake: the modern path answers it (-32601).
            return Ok(Verdict::Modern {
                revision: Revision::V2026_07_28,
            });
        }
        let requested = req.body.and_then(initialize_requested);
        return Ok(Verdict::Legacy {
            revision: negotiate_legacy(requested.as_deref()),
            initialize: true,
        });
    }
    match (header, header_rev) {
        // 2026-07-28 basic/transports/streamable-http §Protocol Version Header: the header
        // must equal the body's `_meta` version; a missing `_meta` key is -32602.
        (Some(_), Some(rev)) if rev.era() == Era::Modern => match body_meta {
            MetaVersion::Modern(m) if m == rev => match req.body {
                Some(f) => modern(f, rev),
                None => Ok(Verdict::Modern { revision: rev }),
            },
            MetaVersion::Absent if req.body.is_some_and(|f| f.kind() == Kind::Request) => {
                Err(missing_meta_rejection(meta::PROTOCOL_VERSION))
            }
            MetaVersion::Absent => Ok(Verdict::Modern { revision: rev }),
            MetaVersion::Modern(m) => Err(header_mismatch(&format!(
                "MCP-Protocol-Version header {rev} does not match _meta protocolVersion {m}"
            ))),
            MetaVersion::Other(v) => Err(header_mismatch(&format!(
                "MCP-Protocol-Version header {rev} does not match _meta protocolVersion {v:?}"
            ))),
        },
        (Some(_), Some(rev)) => match body_meta {
            MetaVersion::Modern(m) => Err(header_mismatch(&format!(
                "MCP-Protocol-Version header {rev} does not match _meta protocolVersion {m}"
            ))),
            _ => legacy(rev),
        },
        (Some(h), None) => match body_meta {
            MetaVersion::Absent if req.session_id.is_some() => Err(Rejection::new(
                INVALID_REQUEST,
                400,
                format!(
                    "unsupported MCP-Protocol-Version {h:?}; supported: {}",
                    Revision::wire_names_newest_first().join(", ")
                ),
            )),
            _ => Err(Rejection::unsupported_version(h)),
        },
        // Register B-C8: no header on a legacy request means 2025-03-26; on a modern one it
        // is a HeaderMismatch (2026-07-28 §Server Validation).
        (None, _) => match body_meta {
            MetaVersion::Modern(m) => Err(header_mismatch(&format!(
                "missing MCP-Protocol-Version header (the body is written in {m})"
            ))),
            _ => legacy(Revision::V2025_03_26),
        },
    }
}

fn header_mismatch(message: &str) -> Rejection {
    Rejection::new(HEADER_MISMATCH, 400, message)
}
