//! Why a call to an upstream failed, in words a host can act on.

use std::time::Duration;

use mcpx_protocol::jsonrpc::ErrorObject;
use mcpx_transport::TransportError;

/// A failed call or connection. Every variant names the upstream.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientError {
    /// The transport failed (the process died, the connection broke, an HTTP error).
    #[error("upstream {upstream}: {source}")]
    Transport {
        /// The upstream's name.
        upstream: String,
        /// What happened.
        source: TransportError,
    },
    /// The upstream refused mcpx's credential (HTTP 401, or 403 `insufficient_scope`).
    /// The connection itself is fine: the upstream's credential must be configured
    /// (`headers`, or `mcpx.oauth`), or its user's authorization given (`mcpx auth
    /// login`; registers B-C15, B-C18).
    #[error("upstream {upstream}: {source}")]
    Unauthorized {
        /// The upstream's name.
        upstream: String,
        /// The transport's [`TransportError::Auth`], with the challenge.
        source: TransportError,
    },
    /// No answer within the timeout (which progress resets).
    #[error(
        "upstream request timed out: upstream {upstream} did not answer {method} within {after:?}"
    )]
    Timeout {
        /// The upstream's name.
        upstream: String,
        /// The method.
        method: String,
        /// How long mcpx waited.
        after: Duration,
    },
    /// The caller cancelled.
    #[error("upstream {upstream}: {method} was cancelled")]
    Cancelled {
        /// The upstream's name.
        upstream: String,
        /// The method.
        method: String,
    },
    /// The upstream ended the request itself (`notifications/cancelled` for it: the
    /// 2026-07-28 stdio teardown of a `subscriptions/listen`).
    #[error("upstream {upstream} ended {method}")]
    EndedByUpstream {
        /// The upstream's name.
        upstream: String,
        /// The method.
        method: String,
    },
    /// Connecting or the handshake failed.
    #[error("upstream {upstream}: {message}")]
    Handshake {
        /// The upstream's name.
        upstream: String,
        /// What went wrong.
        message: String,
    },
    /// A modern request's stream broke and re-issuing it would not be safe (register
    /// B-C10): its result is unknown.
    #[error(
        "upstream {upstream}: the connection broke during {method}; it was not re-issued because it may have side effects, so its result is unknown"
    )]
    ResultUnknown {
        /// The upstream's name.
        upstream: String,
        /// The method.
        method: String,
    },
    /// The upstream answered with a JSON-RPC error.
    #[error("upstream {upstream}: error {}: {}", .error.code, .error.message)]
    Remote {
        /// The upstream's name.
        upstream: String,
        /// The error it sent.
        error: ErrorObject,
    },
    /// The upstream sent something unusable.
    #[error("upstream {upstream}: {message}")]
    Protocol {
        /// The upstream's name.
        upstream: String,
        /// What was wrong.
        message: String,
    },
}

impl ClientError {
    /// The kind of cause, one word: what a host's error `data.cause` and a metric's
    /// label say. `spawn` (the program could not start), `exited` (the connection
    /// closed: a process that exited, a stream that ended), `framing` (a stdio
    /// upstream's output could no longer be split into messages), `io`, `http`, `timeout`,
    /// `unauthorized`, `cancelled`, `ended`, `handshake`, `result_unknown`, `remote`
    /// (a JSON-RPC error), `protocol`.
    pub fn kind(&self) -> &'static str {
        match self {
            ClientError::Transport { source, .. } => match source {
                TransportError::Spawn { .. } => "spawn",
                TransportError::Closed { .. } => "exited",
                TransportError::Io(_) => "io",
                TransportError::Http { .. } | TransportError::Redirected { .. } => "http",
                TransportError::Auth { .. } | TransportError::NeedsAuthorization(_) => {
                    "unauthorized"
                }
                TransportError::SessionExpired => "session_expired",
                TransportError::Protocol(_) => "protocol",
                TransportError::Timeout(_) => "timeout",
                TransportError::Framing(_) => "framing",
            },
            ClientError::Unauthorized { .. } => "unauthorized",
            ClientError::Timeout { .. } => "timeout",
            ClientError::Cancelled { .. } => "cancelled",
            ClientError::EndedByUpstream { .. } => "ended",
            ClientError::Handshake { .. } => "handshake",
            ClientError::ResultUnknown { .. } => "result_unknown",
            ClientError::Remote { .. } => "remote",
            ClientError::Protocol { .. } => "protocol",
        }
    }

    /// The upstream this error names.
    pub fn upstream(&self) -> &str {
        match self {
            ClientError::Transport { upstream, .. }
            | ClientError::Unauthorized { upstream, .. }
            | ClientError::Timeout { upstream, .. }
            | ClientError::Cancelled { upstream, .. }
            | ClientError::EndedByUpstream { upstream, .. }
            | ClientError::Handshake { upstream, .. }
            | ClientError::ResultUnknown { upstream, .. }
            | ClientError::Remote { upstream, .. }
            | ClientError::Protocol { upstream, .. } => upstream,
        }
    }

    /// The message without its leading `upstream NAME: `, for a sentence that names
    /// the upstream already.
    pub fn reason(&self) -> String {
        let full = self.to_string();
        let prefix = format!("upstream {}: ", self.upstream());
        match full.strip_prefix(&prefix) {
            Some(rest) => rest.to_owned(),
            None => full,
        }
    }

    /// Whether the connection this came from is unusable: it closed (a process that
    /// exited, a stream that ended), its output could no longer be framed, it could not
    /// be reached, or its handshake failed.
    /// A JSON-RPC error, a timeout, a refused credential or an HTTP error status on
    /// one request leave it as it was: the next request may well succeed.
    pub fn breaks_connection(&self) -> bool {
        match self {
            ClientError::Transport { source, .. } => matches!(
                source,
                TransportError::Closed { .. }
                    | TransportError::Framing(_)
                    | TransportError::Io(_)
                    | TransportError::Spawn { .. }
            ),
            ClientError::Handshake { .. } => true,
            _ => false,
        }
    }
}

/// A client's refusal of a server-to-client request (sampling, elicitation, roots):
/// the JSON-RPC error the asking upstream is answered with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("error {code}: {message}")]
pub struct AskRefusal {
    /// The JSON-RPC error code.
    pub code: i64,
    /// What the upstream is told.
    pub message: String,
}

impl AskRefusal {
    /// A refusal with `code` and `message`.
    pub fn new(code: i64, message: impl Into<String>) -> AskRefusal {
        AskRefusal {
            code,
            message: message.into(),
        }
    }
}
