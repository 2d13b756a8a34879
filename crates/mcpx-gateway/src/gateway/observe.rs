//! Metrics: the upstream leg of each call made for a host, the catalog's tool names
//! handed to the registry, and the gauges sampled at each scrape ([`Source`]).
//!
//! Everything here is behind `Gateway::metrics`, an `Option`: with metrics off a
//! call pays one check per leg.

use mcpx_metrics::{End, ErrorType, Metrics, Sample, Source, UpstreamSample, classify};
use mcpx_protocol::trace::TraceContext;

use super::*;

impl Gateway {
    /// The registry, when metrics are on.
    pub fn metrics(&self) -> Option<&Arc<Metrics>> {
        self.metrics.as_ref()
    }

    /// Gateway tasks held for hosts (H13), as the metrics' `mcpx_tasks` gauge counts
    /// them.
    pub fn tasks_held(&self) -> usize {
        self.tasks.len()
    }

    /// Hands the catalog's tool names, with their upstreams, to the registry: the
    /// only values `gen_ai_tool_name` takes (else `other`).
    pub(super) fn observe_catalog(&self, catalog: &Catalog) {
        if let Some(m) = &self.metrics {
            m.set_tools(catalog.tools().map(|(name, up)| (name, up.as_str())));
        }
    }

    /// Counts `up`'s restarts as its supervisor publishes them.
    pub(super) fn observe_restarts(&self, up: &Upstream, seen: &mut u32, now: u32) {
        if let Some(m) = &self.metrics
            && now > *seen
        {
            m.restarted(up.id.as_str(), u64::from(now - *seen));
        }
        *seen = now;
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

impl Source for Gateway {
    fn sample(&self) -> Sample {
        Sample {
            states: upstream::State::KEYS,
            upstreams: self
                .upstreams()
                .iter()
                .map(|u| UpstreamSample {
                    name: u.id.to_string(),
                    state: u.status().state.key(),
                    in_flight: u.supervisor().in_flight(),
                })
                .collect(),
            parked_calls: self.asks.parked.len(),
            tasks: self.tasks.len(),
        }
    }
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
