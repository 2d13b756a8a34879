//! What one call leaves behind.

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Outcome {
    /// A result.
    Result,
    /// A `tools/call` result with `isError: true`.
    ToolError,
    /// A JSON-RPC error (its code in [`Record::error_code`]).
    Error,
    /// No answer in time.
    Timeout,
    /// The host cancelled, or went away.
    Cancelled,
    /// The upstream's transport failed: it exited, its connection broke, it wrote
    /// what could not be read.
    Transport,
}

impl Outcome {
    /// Every outcome, in the order the status page's chart stacks them.
    pub const ALL: [Outcome; 6] = [
        Outcome::Result,
        Outcome::ToolError,
        Outcome::Error,
        Outcome::Timeout,
        Outcome::Cancelled,
        Outcome::Transport,
    ];

    /// Its name in the database and in JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Result => "result",
            Outcome::ToolError => "tool_error",
            Outcome::Error => "error",
            Outcome::Timeout => "timeout",
            Outcome::Cancelled => "cancelled",
            Outcome::Transport => "transport",
        }
    }

    /// The outcome named `s`.
    pub fn parse(s: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// Anything but a result.
    pub const fn is_failure(self) -> bool {
        !matches!(self, Outcome::Result)
    }
}

/// How much of a call's content is kept (`mcpx.history.capture`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capture {
    /// Neither arguments nor results (the default).
    #[default]
    None,
    /// The arguments (a tool's `arguments`, a prompt's, a completion's `argument`).
    Arguments,
    /// The arguments and the result.
    All,
}

impl Capture {
    /// The setting named `s`.
    pub fn parse(s: &str) -> Option<Capture> {
        match s {
            "none" => Some(Capture::None),
            "arguments" => Some(Capture::Arguments),
            "all" => Some(Capture::All),
            _ => None,
        }
    }

    /// Whether arguments are kept.
    pub const fn arguments(self) -> bool {
        !matches!(self, Capture::None)
    }

    /// Whether results are kept.
    pub const fn results(self) -> bool {
        matches!(self, Capture::All)
    }
}

/// One call: who made it, to what, how it ended. Times are the call's start, in
/// milliseconds since the Unix epoch; sizes are bytes of JSON text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Record {
    /// When the call started (ms since the Unix epoch).
    pub ts_ms: i64,
    /// How long it took, in microseconds.
    pub duration_us: i64,
    /// The host's `clientInfo.name`.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub client_name: Option<Arc<str>>,
    /// The host's `clientInfo.version`.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub client_version: Option<Arc<str>>,
    /// `legacy` or `modern`.
    pub era: Cow<'static, str>,
    /// The host's protocol revision.
    pub revision: Cow<'static, str>,
    /// How the host reached mcpx: `stdio`, `streamable_http`, `sse` or `api` (the
    /// daemon's `/v1`).
    pub transport: Cow<'static, str>,
    /// The host's session (`Mcp-Session-Id`, HTTP+SSE's `sessionId`), if it has one.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub session: Option<Arc<str>>,
    /// The upstream the call went to (its server name), when it was routed.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub upstream: Option<Arc<str>>,
    /// The method.
    pub method: Cow<'static, str>,
    /// The tool or prompt name, or the resource URI, as the host named it.
    pub target: Option<String>,
    /// How it ended.
    pub outcome: Outcome,
    /// The JSON-RPC error code, for an error.
    pub error_code: Option<i64>,
    /// What went wrong: the error's message, or a tool error's text.
    pub error_message: Option<String>,
    /// The request's params, in bytes.
    pub request_bytes: i64,
    /// The result (or error), in bytes.
    pub response_bytes: i64,
    /// The W3C trace id the call ran under, when it had one.
    pub trace_id: Option<String>,
    /// The authorized subject (an inbound token's `sub`), when there is one.
    pub subject: Option<String>,
    /// The captured arguments, as JSON text (redacted and capped by the writer).
    pub arguments: Option<String>,
    /// The captured result, as JSON text (redacted and capped by the writer).
    pub result: Option<String>,
}

impl Record {
    /// A record of a call of `method` at `ts_ms`, every other field empty.
    pub fn new(ts_ms: i64, method: impl Into<Cow<'static, str>>) -> Record {
        Record {
            ts_ms,
            duration_us: 0,
            client_name: None,
            client_version: None,
            era: Cow::Borrowed(""),
            revision: Cow::Borrowed(""),
            transport: Cow::Borrowed(""),
            session: None,
            upstream: None,
            method: method.into(),
            target: None,
            outcome: Outcome::Result,
            error_code: None,
            error_message: None,
            request_bytes: 0,
            response_bytes: 0,
            trace_id: None,
            subject: None,
            arguments: None,
            result: None,
        }
    }
}

/// A record as stored: its number (increasing in the order written) and its start as
/// an RFC 3339 time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Row {
    /// The record's number.
    pub id: i64,
    /// `ts_ms` as an RFC 3339 time, UTC, to the millisecond.
    pub time: String,
    /// The record.
    #[serde(flatten)]
    pub record: Record,
}

/// `ms` since the Unix epoch as an RFC 3339 time, UTC, to the millisecond.
pub(crate) fn rfc3339(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH
        + std::time::Duration::from_millis(u64::try_from(ms.max(0)).unwrap_or(0));
    humantime::format_rfc3339_millis(at).to_string()
}
