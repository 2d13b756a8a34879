//! The host request's server span: named, given the host's session and trace
//! context, and ended with the outcome (the OpenTelemetry MCP conventions).

use mcpx_metrics::{End, ErrorType, classify};
use mcpx_protocol::trace::TraceContext;

use super::*;

/// A backend with the host request's server span around each call (the
/// OpenTelemetry MCP conventions' server span): a layer over the seam's backend, so
/// that the gateway's own code opens none. Routing fills in the upstream and the
/// tool. The span is disabled, so free, unless logs or traces want it.
#[derive(Debug, Clone)]
pub struct Observed<B>(pub B);

impl<B: Backend> Backend for Observed<B> {
    fn summary(&self) -> Summary {
        self.0.summary()
    }

    fn offered(&self) -> Offered {
        self.0.offered()
    }

    fn described(&self) -> impl Future<Output = ()> + Send {
        self.0.described()
    }

    fn is_described(&self) -> bool {
        self.0.is_described()
    }

    fn session_opened(&self, peer: &Peer) {
        self.0.session_opened(peer);
    }

    fn log_level_requested(&self, level: Level) -> impl Future<Output = ()> + Send {
        self.0.log_level_requested(level)
    }

    fn param_headers(&self) -> mcpx_transport::ParamHeaders {
        self.0.param_headers()
    }

    fn notification(
        &self,
        method: &str,
        params: Option<&str>,
        host: Revision,
    ) -> impl Future<Output = ()> + Send {
        self.0.notification(method, params, host)
    }

    fn call(&self, call: Call) -> impl Future<Output = Result<Reply, Fault>> + Send {
        // The host request's span (the OpenTelemetry MCP conventions' server span):
        // routing fills in the upstream and the tool. Disabled, so free, unless logs
        // or traces want it.
        let span = tracing::info_span!(
            "mcp.request",
            otel.name = tracing::field::Empty,
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            mcp.method.name = call.method.as_str(),
            mcp.protocol.version = call.host.as_str(),
            mcp.session.id = tracing::field::Empty,
            jsonrpc.request.id = %call.id,
            network.transport = if call.ctx.is_stdio() { "pipe" } else { "tcp" },
            mcpx.upstream = tracing::field::Empty,
            gen_ai.tool.name = tracing::field::Empty,
            gen_ai.prompt.name = tracing::field::Empty,
            error.type = tracing::field::Empty,
            trace_id = tracing::field::Empty,
        );
        if !span.is_disabled() {
            start_server_span(&span, &call);
        }
        let tool_call = call.method == "tools/call";
        // A map, not an `async` block awaiting it: that would hold the call's future
        // twice (the captured one and the awaited one), and a bigger future is copied
        // on every call (callgrind: 8 k instructions of memcpy a call). The span is
        // the current one when the map runs (inside `instrument`): it is not held
        // twice either, and is looked up only when spans are on.
        let call_future = futures_util::FutureExt::map(self.0.call(call), move |outcome| {
            if mcpx_telemetry::spans_on() {
                end_server_span(&tracing::Span::current(), tool_call, &outcome);
            }
            outcome
        });
        tracing::Instrument::instrument(call_future, span)
    }
}

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
