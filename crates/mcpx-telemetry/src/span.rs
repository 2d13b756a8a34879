//! What the gateway does with its request spans, traces on or off.
//!
//! The server span ([`SERVER`]) takes the host's trace context as its parent; the
//! client span ([`CLIENT`]) of each upstream call gives the context the upstream is
//! sent ([`outgoing`]). With traces off, the host's context is passed on as it came
//! (a W3C intermediary that does not trace may), and the trace id is still a log
//! field when the host sent one.
//!
//! The fields the gateway declares on these spans are the OpenTelemetry MCP
//! conventions' attributes; `otel.name`, `otel.kind` and `otel.status_code` are
//! read by tracing-opentelemetry as the span's name, kind and status.

use std::str::FromStr;
use std::sync::Arc;

use mcpx_protocol::trace::TraceContext;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The span of a host's request (kind server).
pub const SERVER: &str = "mcp.request";
/// The span of an upstream call made for it (kind client).
pub const CLIENT: &str = "mcp.upstream";
/// The field that carries the trace id (32 hex digits) for the logs.
pub const TRACE_ID: &str = "trace_id";

/// Starts a server span that has its `otel.name`: the host's context becomes its
/// parent, and its trace id a field. Call before the span is first entered (its
/// parent cannot change once it has started).
pub fn start_server(span: &tracing::Span, host: Option<&TraceContext>) {
    if span.is_disabled() {
        return;
    }
    if let Some(t) = host {
        // Fails only without the OpenTelemetry layer (traces off): nothing to do.
        let _ = span.set_parent(parent_context(t));
    }
    let traced = span.context().span().span_context().clone();
    let id = if traced.is_valid() {
        Some(traced.trace_id().to_string())
    } else {
        host.map(TraceContext::trace_id_hex)
    };
    if let Some(id) = id {
        span.record(TRACE_ID, id);
    }
}

/// The trace id (32 hex digits) of the current span, when traces are on and it has
/// one.
pub fn current_trace_id() -> Option<String> {
    if !crate::traces_on() {
        return None;
    }
    let cx = tracing::Span::current().context();
    let traced = cx.span().span_context().clone();
    traced.is_valid().then(|| traced.trace_id().to_string())
}

/// The trace context to send upstream from the client span `span`: this span as the
/// parent when traces are on, else the host's context as it came.
pub fn outgoing(
    span: &tracing::Span,
    host: Option<&Arc<TraceContext>>,
) -> Option<Arc<TraceContext>> {
    if span.is_disabled() {
        return host.cloned();
    }
    let cx = span.context();
    let ours = cx.span().span_context().clone();
    if !ours.is_valid() {
        return host.cloned();
    }
    let header = ours.trace_state().header();
    let tracestate = host
        .and_then(|h| h.tracestate.clone())
        .or_else(|| (!header.is_empty()).then(|| header.into_boxed_str()));
    Some(Arc::new(TraceContext {
        trace_id: ours.trace_id().to_bytes(),
        parent_id: ours.span_id().to_bytes(),
        flags: ours.trace_flags().to_u8(),
        tracestate,
    }))
}

/// Marks a span as failed, with the conventions' `error.type`.
pub fn failed(span: &tracing::Span, error_type: &str) {
    if span.is_disabled() {
        return;
    }
    span.record("error.type", error_type);
    span.record("otel.status_code", "error");
}

/// The host's context as an OpenTelemetry parent (a remote span).
fn parent_context(t: &TraceContext) -> opentelemetry::Context {
    let state = t
        .tracestate
        .as_deref()
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or_default();
    let remote = SpanContext::new(
        TraceId::from_bytes(t.trace_id),
        SpanId::from_bytes(t.parent_id),
        TraceFlags::new(t.flags),
        true,
        state,
    );
    opentelemetry::Context::new().with_remote_span_context(remote)
}
