//! The host request's server span: named, given the host's session and trace
//! context, and ended with the outcome (the OpenTelemetry MCP conventions).

use mcpx_metrics::{End, ErrorType, classify};
use mcpx_protocol::trace::TraceContext;

use super::*;

/// Names the server span `{mcp.method.name} {target}` (the tool or prompt the host
/// named, else the method alone) and gives it the host's session and trace context.
pub(super) fn start_server_span(span: &tracing::Span, call: &Call) {
    span.record("otel.name", span_name(&call.method, call.params.as_ref()));
    if let Some(id) = call.peer.as_ref().and_then(|p| p.session_id()) {
        span.record("mcp.session.id", id);
    }
    mcpx_telemetry::span::start_server(span, call.trace.as_deref());
}

/// Records how the host's request ended on its span.
pub(super) fn end_server_span(
    span: &tracing::Span,
    tool_call: bool,
    outcome: &Result<Reply, Fault>,
) {
    let error_type = classify(match outcome {
        Ok(reply) => End::Result {
            tool_call,
            result: reply.result.as_str(),
        },
        Err(f) => End::Error {
            code: f.code,
            cause: f
                .data
                .as_ref()
                .and_then(|d| d.get("cause"))
                .and_then(Value::as_str),
        },
    });
    if error_type != ErrorType::Ok {
        mcpx_telemetry::span::failed(span, error_type.label());
    }
}

/// Names the client span after the upstream's own tool or prompt, and returns the
/// trace context to send with the call (this span as the parent when traces are on).
pub(super) fn start_client_span(
    span: &tracing::Span,
    method: &str,
    params: &Params,
    host: Option<&Arc<TraceContext>>,
) -> Option<Arc<TraceContext>> {
    span.record("otel.name", span_name(method, Some(params)));
    if let Some(name) = target(method, Some(params)) {
        match method {
            "prompts/get" => span.record("gen_ai.prompt.name", name.as_str()),
            _ => span.record("gen_ai.tool.name", name.as_str()),
        };
    }
    mcpx_telemetry::span::outgoing(span, host)
}

/// `{method} {target}`, or the method alone without a target.
fn span_name(method: &str, params: Option<&Params>) -> String {
    match target(method, params) {
        Some(t) => format!("{method} {t}"),
        None => method.to_owned(),
    }
}

/// The low-cardinality target of a request: the tool or prompt it names.
fn target(method: &str, params: Option<&Params>) -> Option<String> {
    if !matches!(method, "tools/call" | "prompts/get") {
        return None;
    }
    params
        .and_then(|p| p.member("name"))
        .and_then(|n| serde_json::from_str::<String>(n).ok())
}

#[cfg(test)]
mod tests {
    use crate::upstream::State;

    #[test]
    fn every_state_is_a_value_of_the_state_gauge() {
        let at = tokio::time::Instant::now();
        let all = [
            State::Idle,
            State::Starting { attempt: 0 },
            State::Ready,
            State::Backoff {
                attempt: 1,
                retry_at: at,
            },
            State::CrashLoop {
                failures: 4,
                retry_at: at,
            },
            State::NeedsAuthorization { retry_at: at },
            State::Failed,
            State::Stopped,
        ];
        assert_eq!(all.len(), State::KEYS.len());
        for s in all {
            assert!(State::KEYS.contains(&s.key()), "{s:?}");
        }
    }
}
