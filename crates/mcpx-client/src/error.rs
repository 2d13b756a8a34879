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
    /// The connection itself is fine; mcpx runs no user authorization flow, so the
    /// operator must configure the upstream's credential (`headers`, or `mcpx.oauth`;
    /// registers B-C15, B-C18).
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
