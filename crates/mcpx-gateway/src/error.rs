//! The gateway's typed errors, and the one place they become a host's JSON-RPC error.
//!
//! [`Cause`] says why an upstream is not serving: what its supervisor last saw.
//! [`GatewayError`] says why a host's request failed. [`GatewayError::to_fault`]
//! turns it into the [`Fault`] the serve seam lowers to the host's revision; every
//! such error carries `data` naming the upstream and the kind of cause, so that a
//! host (and its model) can tell "restarting" from "needs authorization" from "timed
//! out" without parsing the message.

use std::sync::Arc;
use std::time::Duration;

use mcpx_client::ClientError;
use mcpx_protocol::Revision;
use mcpx_protocol::error::{
    INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, URL_ELICITATION_REQUIRED, resource_not_found,
};
use mcpx_protocol::lower::LowerError;
use mcpx_server::Fault;
use serde_json::{Value, json};

use crate::id::UpstreamId;
use crate::upstream::restarts::human;

/// Why an upstream is not serving.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Cause {
    /// Starting it failed, or its connection failed (spawn, handshake, transport,
    /// a refused credential).
    #[error("{}", .0.reason())]
    Client(ClientError),
    /// The connection was not made within `connectTimeoutMs`.
    #[error("no connection within {} (connectTimeoutMs)", human(*.0))]
    ConnectTimeout(Duration),
    /// The connection ended while it served: a process that exited (with its status
    /// and the tail of its stderr), a stream that closed.
    #[error("{0}")]
    Closed(String),
    /// A health check failed.
    #[error("health check failed: {}", .0.reason())]
    HealthCheck(ClientError),
    /// A health check got no answer in time.
    #[error("health check got no answer within {}", human(*.0))]
    HealthTimeout(Duration),
}

impl Cause {
    /// One word for the kind of cause (`data.cause` in a host's error).
    pub fn kind(&self) -> &'static str {
        match self {
            Cause::Client(e) => e.kind(),
            Cause::ConnectTimeout(_) => "timeout",
            Cause::Closed(_) => "exited",
            Cause::HealthCheck(_) | Cause::HealthTimeout(_) => "health_check",
        }
    }

    /// Whether the upstream refused mcpx's credential: a person must act
    /// (configure or renew it), so the supervisor does not retry quickly.
    pub fn needs_authorization(&self) -> bool {
        matches!(self, Cause::Client(ClientError::Unauthorized { .. }))
    }
}

/// Why a host's request failed in the gateway.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GatewayError {
    /// The upstream that serves the request is not ready.
    #[error("upstream {upstream} is {phrase}{}", .cause.as_ref().map(|c| format!(": {c}")).unwrap_or_default())]
    Unavailable {
        /// The upstream.
        upstream: UpstreamId,
        /// Its state in one word (`starting`, `backoff`, `crash_loop`, ...).
        state: &'static str,
        /// Its state in words, with the attempt and the next try where known.
        phrase: String,
        /// What it last failed with.
        cause: Option<Arc<Cause>>,
    },
    /// The request was held for an upstream that a reload removed or replaced.
    #[error("upstream {upstream} was replaced or removed by a reload of the configuration")]
    Removed {
        /// The upstream.
        upstream: UpstreamId,
    },
    /// The upstream has as many calls in flight as it may, and the queue for a place
    /// is full or the call waited too long.
    #[error("upstream {upstream} is busy: {} calls are in flight (maxInFlight){}", .busy.in_flight, match .busy.waited {
        None => format!(" and {} more wait (maxQueued)", .busy.queued),
        Some(w) => format!(", and no place freed within {} (callTimeoutMs)", human(w)),
    })]
    Busy {
        /// The upstream.
        upstream: UpstreamId,
        /// Its limits, and how long the call waited.
        busy: crate::upstream::Busy,
    },
    /// The upstream call failed.
    #[error("{0}")]
    Client(ClientError),
    /// The request's params are not what its method takes (the message says which
    /// member and why: it is all a host can act on).
    #[error("{0}")]
    InvalidParams(String),
    /// The request names a tool or prompt no upstream lists.
    #[error("unknown {kind}: {name}")]
    UnknownName {
        /// `tool` or `prompt`.
        kind: &'static str,
        /// The name, as the host gave it.
        name: String,
    },
    /// The request names a resource no upstream serves.
    #[error("resource not found: {uri}")]
    ResourceNotFound {
        /// The URI, as the host gave it.
        uri: String,
    },
    /// A list cursor mcpx did not hand out.
    #[error("invalid cursor {0:?}")]
    InvalidCursor(String),
    /// A list cursor beyond the list's end (the list shrank since).
    #[error("cursor {0} is past the end")]
    CursorPastEnd(usize),
    /// A `requestState` mcpx does not hold (forged, replayed, or expired).
    #[error("unknown or expired requestState")]
    UnknownRequestState,
    /// A `requestState` of another request (method, tool, prompt or URI).
    #[error("requestState belongs to another request")]
    ForeignRequestState,
    /// A method mcpx does not serve.
    #[error("method not found: {0}")]
    MethodNotFound(String),
    /// A method or mode the target does not support (the message says which).
    #[error("{0}")]
    Unsupported(String),
    /// The upstream asked a legacy host for input more rounds than mcpx answers.
    #[error("upstream {upstream} asked for input more than {rounds} times")]
    InputRounds {
        /// The upstream.
        upstream: UpstreamId,
        /// `MAX_INPUT_ROUNDS`.
        rounds: usize,
    },
    /// A url-mode elicitation of `upstream` for a host that cannot show one (E-9,
    /// E-19): -32042 with the elicitation in `data` when the host's revision has that
    /// code (`id` is then the elicitation's id), else -32603 with the URL in the
    /// message alone.
    #[error(
        "upstream {upstream} needs the user to open {url} ({message}); this client cannot show url-mode elicitations"
    )]
    UrlElicitation {
        /// The asking upstream.
        upstream: String,
        /// The URL the user must open.
        url: String,
        /// The elicitation's message, labelled (E-10).
        message: String,
        /// The elicitation's id, when the host gets -32042.
        id: Option<String>,
    },
    /// `upstream` needs a user's authorization, which the host is asked for with
    /// the url-mode elicitation `id` (register B-C15: -32042 to a 2025-11-25 host).
    #[error("upstream {upstream} needs authorization: open {url} to authorize mcpx, then retry")]
    NeedsLogin {
        /// The upstream to authorize.
        upstream: String,
        /// The authorization URL.
        url: String,
        /// The elicitation's message, labelled (E-10).
        message: String,
        /// The elicitation's id, the same for every host told of the flow.
        id: String,
    },
    /// A login a 2026-07-28 host was asked for did not end with tokens (`why`).
    #[error("upstream {upstream} needs authorization ({why}): run `mcpx auth login {upstream}`")]
    LoginFailed {
        /// The upstream to authorize.
        upstream: String,
        /// Why the login did not end with tokens.
        why: &'static str,
    },
    /// A task mcpx does not hold for the requester: never created, expired, or
    /// another session's (both task flavours: -32602).
    #[error("Failed to retrieve task: Task not found: {0}")]
    TaskNotFound(String),
    /// `tasks/cancel` of a 2025-11-25 task already in a terminal status (§Task
    /// Cancellation: -32602).
    #[error("Cannot cancel task: already in terminal status '{0}'")]
    TaskTerminal(&'static str),
    /// `tasks/result` of a task that was cancelled before its work ended.
    #[error("task {0} was cancelled and has no result")]
    TaskNoResult(String),
    /// A new task would hold more than `mcpx.limits.maxTasks`.
    #[error("too many tasks (mcpx.limits.maxTasks = {0})")]
    TooManyTasks(usize),
    /// A task-augmented call of a tool without task support (C-C10: -32601).
    #[error("{0} does not support task-augmented calls (execution.taskSupport)")]
    TaskUnsupported(String),
    /// A plain call of a tool that must be called as a task (C-C10: -32601).
    #[error("{0} must be called as a task (execution.taskSupport is \"required\")")]
    TaskRequired(String),
    /// A 2025-11-25 upstream task needs input, and the host is newer than 2025-11-25:
    /// its requests can be relayed only on a legacy host's session.
    #[error(
        "upstream {upstream}'s task needs input from the client; mcpx relays a 2025-11-25 upstream task's requests to clients of 2025-11-25 and earlier only, and this one speaks {host}"
    )]
    TaskInputUnrelayable {
        /// The upstream whose task asks.
        upstream: UpstreamId,
        /// The host's revision.
        host: Revision,
    },
    /// A 2026-07-28 upstream task needs input, and the modern host did not declare
    /// the tasks extension, so it cannot be asked.
    #[error(
        "upstream {upstream}'s task needs input from the client; a {host} client is asked a task's questions only when it declares {}",
        mcpx_protocol::method::TASKS_EXTENSION
    )]
    TaskInputUndeclared {
        /// The upstream whose task asks.
        upstream: UpstreamId,
        /// The host's revision.
        host: Revision,
    },
    /// An upstream task mcpx drives ran longer than `mcpx.limits.taskTtlMs`.
    #[error("upstream {upstream}'s task {task} outlived mcpx.limits.taskTtlMs")]
    UpstreamTaskExpired {
        /// The upstream.
        upstream: UpstreamId,
        /// The upstream's task id.
        task: String,
    },
    /// An upstream answered `tasks/get` without a status mcpx knows.
    #[error("upstream {0}: tasks/get answered without a valid status")]
    UpstreamTaskStatus(UpstreamId),
    /// The upstream task behind a call that waited for its end was cancelled.
    #[error("the upstream task was cancelled")]
    UpstreamTaskCancelled,
    /// A result that cannot be lowered to the host's revision.
    #[error("{0}")]
    Lower(#[from] LowerError),
    /// A question put to a legacy host for a modern upstream could not be asked or
    /// was refused: the host's request fails with the refusal's code (E-6, E-7).
    #[error("{}", .0.message)]
    AskRefused(mcpx_client::AskRefusal),
    /// A failure of mcpx's own, not the request's nor an upstream's (the message is
    /// all there is to say).
    #[error("{0}")]
    Internal(String),
}

impl From<ClientError> for GatewayError {
    fn from(e: ClientError) -> Self {
        GatewayError::Client(e)
    }
}

impl GatewayError {
    /// The upstream this error is about, if it is about one.
    pub fn upstream(&self) -> Option<&str> {
        match self {
            GatewayError::Unavailable { upstream, .. }
            | GatewayError::Removed { upstream }
            | GatewayError::Busy { upstream, .. }
            | GatewayError::InputRounds { upstream, .. } => Some(upstream.as_str()),
            GatewayError::Client(e) => Some(e.upstream()),
            _ => None,
        }
    }

    /// The JSON-RPC error code a host of `host`'s revision gets: -32602 for a request
    /// that is wrong, -32601 for a method or mode not served, the revision's
    /// resource-not-found code, else -32603 (the failure is the gateway's or an
    /// upstream's, not the request's).
    pub fn code(&self, host: Revision) -> i64 {
        match self {
            GatewayError::InvalidParams(_)
            | GatewayError::UnknownName { .. }
            | GatewayError::InvalidCursor(_)
            | GatewayError::CursorPastEnd(_)
            | GatewayError::UnknownRequestState
            | GatewayError::ForeignRequestState
            | GatewayError::TaskNotFound(_)
            | GatewayError::TaskTerminal(_)
            | GatewayError::TaskNoResult(_) => INVALID_PARAMS,
            GatewayError::MethodNotFound(_)
            | GatewayError::Unsupported(_)
            | GatewayError::TaskUnsupported(_)
            | GatewayError::TaskRequired(_) => METHOD_NOT_FOUND,
            GatewayError::ResourceNotFound { .. } => resource_not_found(host),
            GatewayError::AskRefused(r) => r.code,
            GatewayError::UrlElicitation { id: Some(_), .. } | GatewayError::NeedsLogin { .. } => {
                URL_ELICITATION_REQUIRED
            }
            _ => INTERNAL_ERROR,
        }
    }

    /// `data` for the host: the upstream, and the state and kind of cause (the URI
    /// of a resource not found).
    fn data(&self) -> Option<Value> {
        let upstream = self.upstream();
        Some(match self {
            GatewayError::Unavailable { state, cause, .. } => {
                let mut d = json!({ "upstream": upstream, "state": state });
                if let Some(c) = cause {
                    d["cause"] = json!(c.kind());
                }
                d
            }
            GatewayError::Removed { .. } => json!({ "upstream": upstream, "state": "removed" }),
            GatewayError::Busy { .. } => json!({ "upstream": upstream, "state": "busy" }),
            GatewayError::Client(e) => json!({ "upstream": upstream, "cause": e.kind() }),
            GatewayError::ResourceNotFound { uri } => json!({ "uri": uri }),
            GatewayError::UrlElicitation {
                url,
                message,
                id: Some(id),
                ..
            }
            | GatewayError::NeedsLogin {
                url, message, id, ..
            } => json!({ "elicitations": [{
                "mode": "url", "elicitationId": id, "url": url, "message": message,
            }]}),
            _ => return None,
        })
    }

    /// The JSON-RPC error a host of `host`'s revision gets: [`GatewayError::code`],
    /// the message, and `data`.
    pub fn to_fault(&self, host: Revision) -> Fault {
        let mut f = Fault::new(self.code(host), self.to_string(), host);
        f.data = self.data();
        f
    }
}
