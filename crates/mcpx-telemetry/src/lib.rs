//! Traces and logs for mcpx.
//!
//! * [`init`] installs the process's `tracing` subscriber: logs on stderr, as text or
//!   as one JSON object a line (`MCPX_LOG_FORMAT`), filtered by `MCPX_LOG`; and, when
//!   the standard `OTEL_*` variables name an OTLP endpoint, an OpenTelemetry layer
//!   that exports mcpx's request spans over OTLP/HTTP ([`settings`]).
//! * [`span`]: what the gateway does with its spans: the host's trace context as the
//!   server span's parent, the client span's context for the upstream, and the trace
//!   id as a span field for the logs.
//! * `export` (private): the exporter's HTTP client, on a runtime of its own.
//!
//! With traces off and text logs, nothing here runs per call: the spans mcpx makes
//! are disabled at their call site, as before.
#![forbid(unsafe_code)]

mod export;
pub mod settings;
pub mod span;

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::filter::{EnvFilter, FilterExt, filter_fn};
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

pub use settings::{LogFormat, Protocol, Settings, SettingsError, TraceSettings};

/// The spans mcpx exports and puts in JSON logs: one per host request, one per
/// upstream call made for it (crates/mcpx-gateway).
pub const SPANS: [&str; 2] = [span::SERVER, span::CLIENT];

/// The tracer provider, once traces are on: flushed by [`shutdown`].
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Set by [`install`] when traces or JSON logs are on: see [`spans_on`].
static SPANS_ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The log format installed (text until [`install`]).
static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// The target of [`notice`]'s events in JSON logs, written whatever the level.
const NOTICE: &str = "mcpx_notice";

/// How long [`shutdown`] waits for the last spans to be exported.
const FLUSH_WAIT: Duration = Duration::from_secs(5);

/// Installs the subscriber from the environment ([`Settings::from_env`]): logs on
/// stderr only (stdout may be the MCP stream), and traces when asked for. A setting
/// that cannot be used is reported on stderr and left at its default: a gateway a
/// host started keeps serving. Installing twice keeps the first.
pub fn init() {
    let (settings, problems) = Settings::from_env(|k| std::env::var(k).ok());
    for p in &problems {
        eprintln!("mcpx: {p}");
    }
    install(settings);
}

/// Installs the subscriber `settings` describe (see [`init`]).
pub fn install(settings: Settings) {
    let filter = EnvFilter::try_new(settings.log_filter.as_deref().unwrap_or("warn"))
        .unwrap_or_else(|e| {
            eprintln!("mcpx: MCPX_LOG: {e}; logging at warn");
            EnvFilter::new("warn")
        });
    let logs = match settings.log_format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .with_filter(filter)
            .boxed(),
        // The request spans are on for JSON logs whatever the level, so that every
        // line logged inside a request carries its fields (the trace id too). At
        // `info` and below, each request and upstream call also ends with a line of
        // its own (`"message":"close"`, with `time.busy` and `time.idle`).
        LogFormat::Json => {
            let per_request = filter
                .max_level_hint()
                .is_some_and(|l| l >= tracing::level_filters::LevelFilter::INFO);
            tracing_subscriber::fmt::layer()
                .json()
                .with_target(true)
                .with_current_span(true)
                .with_span_list(true)
                .with_span_events(if per_request {
                    FmtSpan::CLOSE
                } else {
                    FmtSpan::NONE
                })
                .with_writer(std::io::stderr)
                .with_filter(filter_fn(|m| is_request_span(m) || m.target() == NOTICE).or(filter))
                .boxed()
        }
    };
    let traces = settings.traces.and_then(|t| match tracer_provider(&t) {
        Ok(provider) => {
            let tracer = provider.tracer("mcpx");
            let _ = PROVIDER.set(provider);
            Some(
                tracing_opentelemetry::layer()
                    .with_tracer(tracer)
                    .with_location(false)
                    .with_threads(false)
                    .with_target(false)
                    .with_level(false)
                    // Nothing in mcpx reads OpenTelemetry's current context, and busy
                    // and idle times are not conventions' attributes: entering and
                    // leaving a span (each poll of a request) then costs nothing.
                    .with_context_activation(false)
                    .with_tracked_inactivity(false)
                    .with_filter(filter_fn(is_request_span)),
            )
        }
        Err(e) => {
            eprintln!("mcpx: traces are off: {e}");
            None
        }
    });
    let _ = FORMAT.set(settings.log_format);
    if traces.is_some() || settings.log_format == LogFormat::Json {
        SPANS_ON.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    // No `Option` layer: a `None` layer would say every callsite is of interest, and
    // every disabled span and event would then be checked on each use (callgrind:
    // 9 k instructions a call). So each shape is a subscriber of its own.
    let _ = match traces {
        Some(traces) => Registry::default().with(logs).with(traces).try_init(),
        None => Registry::default().with(logs).try_init(),
    };
}

/// Says `message` on stderr whatever the log level (an address listened on, an
/// upstream that could not start): a line of text, or in JSON logs an object like
/// every other line (`"target":"mcpx_notice"`).
pub fn notice(message: &str) {
    match FORMAT.get() {
        Some(LogFormat::Json) => tracing::info!(target: NOTICE, "{message}"),
        _ => eprintln!("{message}"),
    }
}

/// Whether traces are being exported.
pub fn traces_on() -> bool {
    PROVIDER.get().is_some()
}

/// Whether the request spans are on (traces, or JSON logs, want them); a cheap check
/// for work only they need.
pub fn spans_on() -> bool {
    SPANS_ON.load(std::sync::atomic::Ordering::Relaxed)
}

/// Exports the spans not yet sent, waiting at most a few seconds; call once, before
/// the process exits. Nothing to do with traces off.
pub fn shutdown() {
    if let Some(p) = PROVIDER.get()
        && let Err(e) = p.shutdown_with_timeout(FLUSH_WAIT)
    {
        eprintln!("mcpx: the last traces may not have been exported: {e}");
    }
}

fn is_request_span(meta: &tracing::Metadata<'_>) -> bool {
    meta.is_span() && SPANS.contains(&meta.name())
}

/// The OTLP/HTTP exporter behind a batch processor, and the sampler and resource
/// the SDK reads from `OTEL_TRACES_SAMPLER`, `OTEL_SERVICE_NAME` and
/// `OTEL_RESOURCE_ATTRIBUTES` (with `service.name` `mcpx` unless one is given).
fn tracer_provider(t: &TraceSettings) -> Result<SdkTracerProvider, export::ExportError> {
    let client = export::Client::start()?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(match t.protocol {
            Protocol::HttpProtobuf => opentelemetry_otlp::Protocol::HttpBinary,
            Protocol::HttpJson => opentelemetry_otlp::Protocol::HttpJson,
        })
        // The endpoint is the exporter's to read: the signal's variable as it is,
        // the generic one with `/v1/traces` appended.
        .build()
        .map_err(export::ExportError::Build)?;
    let mut resource = opentelemetry_sdk::Resource::builder();
    if t.default_service_name {
        resource = resource.with_service_name("mcpx");
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build())
}
