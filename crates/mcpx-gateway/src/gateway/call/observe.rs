//! The upstream leg's span (the OpenTelemetry MCP conventions' client span) and
//! metrics, in one place. Both are free when off: a disabled span records nothing and
//! with metrics off a leg is one `None`.

use std::sync::Arc;

use mcpx_client::{ClientError, ServerFacts};
use mcpx_metrics::{End, ErrorType, Metrics, Timing, classify};
use mcpx_protocol::trace::TraceContext;
use mcpx_protocol::{Era, Frame, Params};
use mcpx_server::Call;

use crate::upstream::Upstream;

/// The outcome of an upstream call (a `tools/call` when `tool_call`), as its
/// `error_type` label says it.
pub(crate) fn upstream_error_type(
    tool_call: bool,
    outcome: &Result<Frame, ClientError>,
) -> ErrorType {
    classify(match outcome {
        Ok(frame) => End::of_response(frame, tool_call),
        Err(ClientError::Remote { error, .. }) => End::Error {
            code: error.code,
            cause: None,
        },
        Err(e) => End::Failed { cause: e.kind() },
    })
}

/// One upstream call being timed (`None` with metrics off).
pub(crate) struct UpstreamLeg {
    timing: Timing,
    tool_call: bool,
}

/// Starts timing the upstream leg of `call`: `method` sent to `up`.
pub(crate) fn leg(
    metrics: Option<&Metrics>,
    call: &Call,
    up: &Upstream,
    method: &str,
) -> Option<UpstreamLeg> {
    let m = metrics?;
    let tool_call = method == "tools/call";
    let timing = match (&call.tool_series, tool_call) {
        (Some(series), true) => m.upstream_tool_call(series),
        _ => m.upstream_call(method, up.id.as_str()),
    };
    Some(UpstreamLeg { timing, tool_call })
}

/// The upstream leg's span (disabled, so free, unless logs or traces want it).
pub(super) fn upstream_span(
    up: &Upstream,
    facts: &ServerFacts,
    method: &str,
    round: usize,
) -> tracing::Span {
    tracing::info_span!(
        "mcp.upstream",
        otel.name = tracing::field::Empty,
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        mcp.method.name = method,
        mcp.protocol.version = facts.revision.as_str(),
        mcp.session.id = tracing::field::Empty,
        jsonrpc.request.id = tracing::field::Empty,
        network.transport = network_transport(up),
        mcpx.upstream = up.id.as_str(),
        mcpx.era = if facts.era == Era::Modern { "modern" } else { "legacy" },
        mcpx.round = round,
        gen_ai.tool.name = tracing::field::Empty,
        gen_ai.prompt.name = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// The trace context the upstream is sent: the host's, or this leg's span as the
/// parent when the span is on (then named after the upstream's own tool or prompt).
pub(super) fn trace_for(
    span: &tracing::Span,
    call: &Call,
    method: &str,
    params: &Params,
) -> Option<Arc<TraceContext>> {
    if span.is_disabled() {
        return call.trace.clone();
    }
    super::super::observe::start_client_span(span, method, params, call.trace.as_ref())
}

/// Records how the leg ended, on its metrics and its span.
pub(super) fn ended(
    leg: Option<UpstreamLeg>,
    span: &tracing::Span,
    method: &str,
    outcome: &Result<Frame, ClientError>,
) {
    if let Some(leg) = leg {
        leg.end(outcome);
    }
    if !span.is_disabled() {
        let error_type = upstream_error_type(method == "tools/call", outcome);
        if error_type != ErrorType::Ok {
            mcpx_telemetry::span::failed(span, error_type.label());
        }
    }
}

/// The conventions' `network.transport` of an upstream: `pipe` for stdio, `tcp`
/// for HTTP.
pub(crate) fn network_transport(up: &Upstream) -> &'static str {
    match up.config.transport {
        crate::config::Transport::Stdio { .. } => "pipe",
        _ => "tcp",
    }
}

impl UpstreamLeg {
    /// Records the call, which ended with `outcome`.
    pub(crate) fn end(self, outcome: &Result<Frame, ClientError>) {
        self.timing
            .end(upstream_error_type(self.tool_call, outcome));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mcpx_protocol::jsonrpc::ErrorObject;
    use mcpx_transport::TransportError;

    use super::*;

    #[test]
    fn upstream_outcomes_by_error_type() {
        let up = || "u".to_owned();
        let remote = Err(ClientError::Remote {
            upstream: up(),
            error: ErrorObject {
                code: -32602,
                message: "bad".into(),
                data: None,
            },
        });
        assert_eq!(upstream_error_type(true, &remote), ErrorType::InvalidParams);
        let timeout = Err(ClientError::Timeout {
            upstream: up(),
            method: "tools/call".into(),
            after: Duration::from_millis(5),
        });
        assert_eq!(upstream_error_type(true, &timeout), ErrorType::Timeout);
        let cancelled = Err(ClientError::Cancelled {
            upstream: up(),
            method: "tools/call".into(),
        });
        assert_eq!(upstream_error_type(true, &cancelled), ErrorType::Cancelled);
        let exited = Err(ClientError::Transport {
            upstream: up(),
            source: TransportError::Closed {
                detail: "exit status 1".into(),
            },
        });
        assert_eq!(upstream_error_type(true, &exited), ErrorType::Transport);
    }
}
