//! A call's outcome as the `error_type` label: one pure function, [`classify`], over
//! what the call ended with ([`End`]).
//!
//! The values follow the OpenTelemetry MCP conventions where they say something
//! (`error.type` is not set on success, is `tool_error` for a result with `isError:
//! true`, and is the JSON-RPC error code otherwise), with the codes grouped into a
//! bounded set of classes so that an upstream inventing codes cannot grow the series
//! without end.

use mcpx_protocol::Frame;
use mcpx_protocol::error::{
    INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR,
};
use mcpx_protocol::jsonrpc::{first_member, member};

/// The outcome of one call, as its `error_type` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorType {
    /// A result (an empty label: `error_type=""` in a query).
    Ok,
    /// A `tools/call` result with `isError: true`: an error to its user.
    ToolError,
    /// JSON-RPC -32700.
    ParseError,
    /// JSON-RPC -32600.
    InvalidRequest,
    /// JSON-RPC -32601.
    MethodNotFound,
    /// JSON-RPC -32602.
    InvalidParams,
    /// JSON-RPC -32603.
    InternalError,
    /// A JSON-RPC error in -32099..=-32000, the range JSON-RPC leaves to servers (MCP's
    /// own codes, such as -32002 and -32042, are there).
    ServerError,
    /// Any other JSON-RPC error code.
    OtherError,
    /// No answer in time (`callTimeoutMs`, `maxCallTimeMs`).
    Timeout,
    /// The caller cancelled, or went away before the answer.
    Cancelled,
    /// The transport failed: a process that exited, a connection that broke, an HTTP
    /// error, an answer that could not be read.
    Transport,
}

impl ErrorType {
    /// Every value, in the order of [`ErrorType::index`].
    pub const ALL: [ErrorType; 12] = [
        ErrorType::Ok,
        ErrorType::ToolError,
        ErrorType::ParseError,
        ErrorType::InvalidRequest,
        ErrorType::MethodNotFound,
        ErrorType::InvalidParams,
        ErrorType::InternalError,
        ErrorType::ServerError,
        ErrorType::OtherError,
        ErrorType::Timeout,
        ErrorType::Cancelled,
        ErrorType::Transport,
    ];

    /// How many values there are.
    pub const COUNT: usize = ErrorType::ALL.len();

    /// The label's value.
    pub const fn label(self) -> &'static str {
        match self {
            ErrorType::Ok => "",
            ErrorType::ToolError => "tool_error",
            ErrorType::ParseError => "-32700",
            ErrorType::InvalidRequest => "-32600",
            ErrorType::MethodNotFound => "-32601",
            ErrorType::InvalidParams => "-32602",
            ErrorType::InternalError => "-32603",
            ErrorType::ServerError => "server_error",
            ErrorType::OtherError => "jsonrpc_error",
            ErrorType::Timeout => "timeout",
            ErrorType::Cancelled => "cancelled",
            ErrorType::Transport => "transport",
        }
    }

    /// Its place in [`ErrorType::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The class of JSON-RPC error `code`.
    pub const fn of_code(code: i64) -> ErrorType {
        match code {
            PARSE_ERROR => ErrorType::ParseError,
            INVALID_REQUEST => ErrorType::InvalidRequest,
            METHOD_NOT_FOUND => ErrorType::MethodNotFound,
            INVALID_PARAMS => ErrorType::InvalidParams,
            INTERNAL_ERROR => ErrorType::InternalError,
            -32099..=-32000 => ErrorType::ServerError,
            _ => ErrorType::OtherError,
        }
    }

    /// The class of a failure whose cause is `kind`, the one word mcpx gives it
    /// (`mcpx_client::ClientError::kind`, a host's error `data.cause`); `None` for a
    /// word that names none of these classes (`remote`: a JSON-RPC error).
    pub fn of_cause(kind: &str) -> Option<ErrorType> {
        Some(match kind {
            "timeout" => ErrorType::Timeout,
            "cancelled" | "ended" => ErrorType::Cancelled,
            "spawn" | "exited" | "io" | "http" | "session_expired" | "result_unknown"
            | "handshake" | "protocol" | "unauthorized" => ErrorType::Transport,
            _ => return None,
        })
    }
}

/// What a call ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End<'a> {
    /// A result object's text; `tool_call` when it answers a `tools/call` (only then
    /// does `isError` mean anything).
    Result {
        /// The call was a `tools/call`.
        tool_call: bool,
        /// The result object (valid JSON).
        result: &'a str,
    },
    /// A JSON-RPC error, and the kind of cause mcpx named in its `data.cause`, if any
    /// (the gateway's own errors about an upstream carry one).
    Error {
        /// The code.
        code: i64,
        /// `data.cause`, decoded.
        cause: Option<&'a str>,
    },
    /// No answer: the call failed with a cause of this kind
    /// (`mcpx_client::ClientError::kind`).
    Failed {
        /// The kind.
        cause: &'a str,
    },
    /// The caller cancelled it, or went away.
    Cancelled,
}

impl<'a> End<'a> {
    /// A response frame's end: its result, or its error with `data.cause`.
    pub fn of_response(frame: &'a Frame, tool_call: bool) -> End<'a> {
        match frame.error() {
            Some(e) => End::Error {
                code: e.code,
                cause: e
                    .data
                    .as_deref()
                    .filter(|d| d.starts_with('{'))
                    .and_then(|d| member(d, "cause"))
                    .and_then(|c| c.strip_prefix('"')?.strip_suffix('"')),
            },
            None => End::Result {
                tool_call,
                result: frame.result().unwrap_or("{}"),
            },
        }
    }
}

/// The `error_type` of a call that ended with `end`.
pub fn classify(end: End<'_>) -> ErrorType {
    match end {
        End::Result { tool_call, result } => {
            if tool_call && is_error(result) {
                ErrorType::ToolError
            } else {
                ErrorType::Ok
            }
        }
        End::Error { code, cause } => cause
            .and_then(ErrorType::of_cause)
            .unwrap_or_else(|| ErrorType::of_code(code)),
        End::Failed { cause } => ErrorType::of_cause(cause).unwrap_or(ErrorType::Transport),
        End::Cancelled => ErrorType::Cancelled,
    }
}

/// Whether result object `result` says `"isError": true`. Most results do not name
/// `isError` at all, and a search of the text (no walk, with a searcher built once)
/// says so; only a text that names it is read member by member. A key spelt with
/// escapes (`"is\u0045rror"`, which no JSON encoder writes for ASCII letters) is not
/// looked for: this is a metric's label, not a protocol decision, and every call would
/// pay for the search.
fn is_error(result: &str) -> bool {
    names_is_error(result.as_bytes()) && first_member(result, "isError") == Some("true")
}

/// Whether `text` has `"isError"` in it. A short text (most results) is searched for
/// its `E`s, each checked where it stands: cheaper than setting a substring search up.
/// A long one goes to a substring searcher built once, which skips ahead on rare bytes.
fn names_is_error(text: &[u8]) -> bool {
    const NEEDLE: &[u8] = b"\"isError\"";
    static LONG: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(NEEDLE));
    if text.len() > 1024 {
        return LONG.find(text).is_some();
    }
    memchr::memchr_iter(b'E', text).any(|e| {
        e.checked_sub(3)
            .and_then(|start| text.get(start..start + NEEDLE.len()))
            == Some(NEEDLE)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(text: &str) -> ErrorType {
        classify(End::Result {
            tool_call: true,
            result: text,
        })
    }

    #[test]
    fn results_are_ok_unless_a_tool_says_is_error() {
        assert_eq!(result(r#"{"content":[]}"#), ErrorType::Ok);
        assert_eq!(result(r#"{"content":[],"isError":false}"#), ErrorType::Ok);
        assert_eq!(
            result(r#"{"content":[],"isError":true}"#),
            ErrorType::ToolError
        );
        assert_eq!(
            result(r#"{"isError" : true,"content":[]}"#),
            ErrorType::ToolError
        );
        // Spelt with an escape: not looked for (see `is_error`).
        assert_eq!(
            result(r#"{"content":[],"is\u0045rror":true}"#),
            ErrorType::Ok
        );
        // Nested, or in a text, it is not the result's.
        assert_eq!(
            result(r#"{"content":[{"type":"text","text":"\"isError\": true"}]}"#),
            ErrorType::Ok
        );
        assert_eq!(
            result(r#"{"structuredContent":{"isError":true},"content":[]}"#),
            ErrorType::Ok
        );
        // Only a tools/call result can be a tool error.
        assert_eq!(
            classify(End::Result {
                tool_call: false,
                result: r#"{"isError":true}"#
            }),
            ErrorType::Ok
        );
    }

    #[test]
    fn is_error_is_found_in_short_and_long_texts() {
        for pad in [0, 10, 2000] {
            let filler = "E".repeat(pad);
            let named =
                format!(r#"{{"content":[{{"type":"text","text":"{filler}"}}],"isError":true}}"#);
            assert!(names_is_error(named.as_bytes()), "{pad}");
            assert_eq!(result(&named), ErrorType::ToolError, "{pad}");
            let first =
                format!(r#"{{"isError":true,"content":[{{"type":"text","text":"{filler}"}}]}}"#);
            assert_eq!(result(&first), ErrorType::ToolError, "{pad}");
            let unnamed = format!(r#"{{"content":[{{"type":"text","text":"{filler}Error"}}]}}"#);
            assert!(!names_is_error(unnamed.as_bytes()), "{pad}");
        }
        assert!(!names_is_error(b"E"));
        assert!(!names_is_error(b"isE"));
        assert!(names_is_error(b"\"isError\""));
    }

    #[test]
    fn json_rpc_errors_by_code_class() {
        let code = |c| {
            classify(End::Error {
                code: c,
                cause: None,
            })
        };
        assert_eq!(code(-32700), ErrorType::ParseError);
        assert_eq!(code(-32600), ErrorType::InvalidRequest);
        assert_eq!(code(-32601), ErrorType::MethodNotFound);
        assert_eq!(code(-32602), ErrorType::InvalidParams);
        assert_eq!(code(-32603), ErrorType::InternalError);
        assert_eq!(code(-32002), ErrorType::ServerError);
        assert_eq!(code(-32042), ErrorType::ServerError);
        assert_eq!(code(-32000), ErrorType::ServerError);
        assert_eq!(code(-32099), ErrorType::ServerError);
        assert_eq!(code(-32100), ErrorType::OtherError);
        assert_eq!(code(1), ErrorType::OtherError);
        assert_eq!(code(i64::MIN), ErrorType::OtherError);
    }

    #[test]
    fn a_named_cause_decides_over_the_code() {
        let error = |cause| {
            classify(End::Error {
                code: -32603,
                cause: Some(cause),
            })
        };
        assert_eq!(error("timeout"), ErrorType::Timeout);
        assert_eq!(error("cancelled"), ErrorType::Cancelled);
        assert_eq!(error("exited"), ErrorType::Transport);
        assert_eq!(error("spawn"), ErrorType::Transport);
        // A cause that is no class of its own leaves the code's.
        assert_eq!(error("remote"), ErrorType::InternalError);
        assert_eq!(error("whatever"), ErrorType::InternalError);
    }

    #[test]
    fn failures_without_an_answer() {
        let failed = |cause| classify(End::Failed { cause });
        assert_eq!(failed("timeout"), ErrorType::Timeout);
        assert_eq!(failed("cancelled"), ErrorType::Cancelled);
        assert_eq!(failed("ended"), ErrorType::Cancelled);
        for transport in [
            "exited",
            "io",
            "http",
            "spawn",
            "protocol",
            "result_unknown",
        ] {
            assert_eq!(failed(transport), ErrorType::Transport, "{transport}");
        }
        assert_eq!(failed("something new"), ErrorType::Transport);
        assert_eq!(classify(End::Cancelled), ErrorType::Cancelled);
    }

    #[test]
    fn a_response_frame_is_read_for_its_result_or_its_cause() {
        let decode = |t: &str| match mcpx_protocol::codec::decode(t.to_owned(), &Default::default())
        {
            Ok(mcpx_protocol::Decoded::Single(f)) => f,
            other => panic!("not one frame: {other:?}"),
        };
        let f = decode(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}"#);
        assert_eq!(classify(End::of_response(&f, true)), ErrorType::ToolError);
        let f = decode(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"m","data":{"upstream":"u","cause":"timeout"}}}"#,
        );
        assert_eq!(classify(End::of_response(&f, true)), ErrorType::Timeout);
        let f =
            decode(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"m","data":"x"}}"#);
        assert_eq!(
            classify(End::of_response(&f, true)),
            ErrorType::InvalidParams
        );
    }

    #[test]
    fn labels_are_distinct_and_indices_match() {
        let mut seen = std::collections::HashSet::new();
        for (i, e) in ErrorType::ALL.iter().enumerate() {
            assert_eq!(e.index(), i);
            assert!(seen.insert(e.label()), "{e:?}");
        }
    }
}
