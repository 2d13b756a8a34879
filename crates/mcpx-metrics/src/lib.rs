//! mcpx's metrics: one registry, [`Metrics`], written in the Prometheus text format
//! at `/metrics` on a listener of its own ([`serve`]).
//!
//! Names follow the OpenTelemetry MCP semantic conventions in Prometheus form:
//!
//! * `mcp_server_operation_duration_seconds`: each host request, from the serve seam's
//!   first look at it to its response (the host's leg);
//! * `mcp_client_operation_duration_seconds`: each upstream call made for a host's
//!   request (the upstream leg).
//!
//! Both are labelled `mcp_method_name` (a method of the protocol, else `other`),
//! `gen_ai_tool_name` (a tool the catalog lists, else `other`; empty for other
//! methods), `upstream` and `error_type` ([`ErrorType`], from [`classify`]).
//!
//! The rest is mcpx's own (`mcpx_`): bytes to and from hosts, legacy sessions,
//! reloads and restarts as they happen; upstream states, calls in flight, parked
//! calls and tasks sampled from the gateway at each scrape ([`Source`]).
//!
//! # Cost
//!
//! With metrics off nothing here runs: the callers hold an `Option<Arc<Metrics>>`.
//! With metrics on, a call costs two clock reads per leg and one histogram
//! observation (atomics). Label sets are resolved once: each tool the catalog lists
//! has its [`ToolSeries`], found by name once per host request, and each of its
//! histograms is made on its first use ([`Series`]).
#![forbid(unsafe_code)]

mod classify;
mod endpoint;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

pub use classify::{End, ErrorType, classify};
pub use endpoint::{CONTENT_TYPE, PATH, Rules, serve};

/// The duration histograms' buckets, in seconds: the OpenTelemetry MCP conventions'
/// (10 ms to 300 s), below them the gateway's own range (100 µs to 5 ms).
pub const BUCKETS: [f64; 20] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
    10.0, 30.0, 60.0, 120.0, 300.0,
];

/// The label names of the two duration histograms, in order.
pub const LABELS: [&str; 4] = [
    "mcp_method_name",
    "gen_ai_tool_name",
    "upstream",
    "error_type",
];

/// The `gen_ai_tool_name` of a tool the catalog does not list.
pub const OTHER: &str = "other";

/// Why the registry could not be made (a name or label the registry refuses: a bug,
/// caught by the tests).
#[derive(Debug, thiserror::Error)]
#[error("metrics: {0}")]
pub struct MetricsError(#[from] prometheus::Error);

/// What the gateway reports at each scrape ([`Source::sample`]).
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// Every state an upstream can be in (`mcpx_upstream_state` shows each, 0 or 1).
    pub states: &'static [&'static str],
    /// Each upstream in force.
    pub upstreams: Vec<UpstreamSample>,
    /// Calls of modern hosts parked at legacy upstreams while the host answers.
    pub parked_calls: usize,
    /// Gateway tasks held.
    pub tasks: usize,
}

/// One upstream at a scrape.
#[derive(Debug, Clone)]
pub struct UpstreamSample {
    /// Its name.
    pub name: String,
    /// Its state, one of [`Sample::states`].
    pub state: &'static str,
    /// Its calls in flight.
    pub in_flight: usize,
}

/// Whatever can tell the gauges' values at a scrape (the gateway).
pub trait Source: Send + Sync + 'static {
    /// The values now.
    fn sample(&self) -> Sample;
}

/// Which leg a histogram measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leg {
    Host,
    Upstream,
}

/// One label set of a duration histogram but its `error_type`: a histogram per error
/// type, each made on its first use.
#[derive(Debug)]
pub struct Series {
    vec: HistogramVec,
    method: &'static str,
    tool: Box<str>,
    upstream: Box<str>,
    cells: [OnceLock<Histogram>; ErrorType::COUNT],
}

impl Series {
    fn new(vec: &HistogramVec, method: &'static str, tool: &str, upstream: &str) -> Series {
        Series {
            vec: vec.clone(),
            method,
            tool: tool.into(),
            upstream: upstream.into(),
            cells: Default::default(),
        }
    }

    /// Records one call of `secs` seconds that ended as `error_type`.
    pub fn observe(&self, error_type: ErrorType, secs: f64) {
        if let Some(h) = self.histogram(error_type) {
            h.observe(secs);
        }
    }

    /// The histogram of `error_type`, made now if it was not yet.
    fn histogram(&self, error_type: ErrorType) -> Option<&Histogram> {
        let cell = &self.cells[error_type.index()];
        if let Some(h) = cell.get() {
            return Some(h);
        }
        let labels = [self.method, &self.tool, &self.upstream, error_type.label()];
        match self.vec.get_metric_with_label_values(&labels) {
            Ok(h) => Some(cell.get_or_init(|| h)),
            Err(e) => {
                tracing::debug!("metrics: {e}");
                None
            }
        }
    }

    /// The `upstream` label.
    pub fn upstream(&self) -> &str {
        &self.upstream
    }
}

/// A tool the catalog lists: its `tools/call` series on both legs.
#[derive(Debug)]
pub struct ToolSeries {
    host: Series,
    upstream: Series,
}

impl ToolSeries {
    /// The host's leg.
    pub fn host(&self) -> &Series {
        &self.host
    }

    /// The upstream leg.
    pub fn upstream(&self) -> &Series {
        &self.upstream
    }
}

/// Where a [`Timing`] records.
#[derive(Debug)]
enum Target {
    Tool(Arc<ToolSeries>, Leg),
    Plain(Arc<Series>),
}

/// One call being timed. [`Timing::end`] records it with its outcome; dropped
/// without, it is recorded as cancelled (the caller's future was dropped: a host
/// that went away).
#[derive(Debug)]
pub struct Timing {
    target: Target,
    start: Instant,
    ended: bool,
}

impl Timing {
    fn start(target: Target) -> Timing {
        Timing {
            target,
            start: Instant::now(),
            ended: false,
        }
    }

    /// Records the call, which ended as `error_type`.
    pub fn end(mut self, error_type: ErrorType) {
        self.ended = true;
        self.record(error_type);
    }

    fn record(&self, error_type: ErrorType) {
        let secs = self.start.elapsed().as_secs_f64();
        match &self.target {
            Target::Tool(t, Leg::Host) => t.host.observe(error_type, secs),
            Target::Tool(t, Leg::Upstream) => t.upstream.observe(error_type, secs),
            Target::Plain(s) => s.observe(error_type, secs),
        }
    }
}

impl Drop for Timing {
    fn drop(&mut self) {
        if !self.ended {
            self.record(ErrorType::Cancelled);
        }
    }
}

/// A host request being timed ([`Metrics::host_request`]), with the tool's series if
/// it is a `tools/call` of a tool the catalog lists.
#[derive(Debug)]
pub struct HostTiming {
    timing: Timing,
    tool_call: bool,
}

impl HostTiming {
    /// The series of the tool called, for the upstream leg of the same call.
    pub fn tool(&self) -> Option<Arc<ToolSeries>> {
        match &self.timing.target {
            Target::Tool(t, _) if !t.host.upstream.is_empty() => Some(t.clone()),
            _ => None,
        }
    }

    /// Records the request, answered with `response`; `cancelled` when the host
    /// cancelled it meanwhile (its answer, if any, is not sent).
    pub fn end(self, response: &mcpx_protocol::Frame, cancelled: bool) {
        let error_type = if cancelled {
            ErrorType::Cancelled
        } else {
            classify(End::of_response(response, self.tool_call))
        };
        self.timing.end(error_type);
    }
}

/// The tools the catalog lists, by the name hosts call them.
type Tools = HashMap<Box<str>, Arc<ToolSeries>, foldhash::fast::RandomState>;

/// Every other series: by leg (`true` for the host's), method and upstream.
type Plain = HashMap<(bool, &'static str, Box<str>), Arc<Series>, foldhash::fast::RandomState>;

/// The registry, and the handles mcpx records with.
pub struct Metrics {
    registry: Registry,
    server: HistogramVec,
    client: HistogramVec,
    host_received: IntCounter,
    host_sent: IntCounter,
    sessions: IntGauge,
    reloads: IntCounterVec,
    restarts: IntCounterVec,
    state: IntGaugeVec,
    in_flight: IntGaugeVec,
    parked: IntGauge,
    tasks: IntGauge,
    /// Tools by name, replaced whole when the catalog is rebuilt.
    tools: RwLock<Arc<Tools>>,
    /// `tools/call` of a name the catalog does not list.
    other_tool: Arc<ToolSeries>,
    /// Every other method's series.
    plain: Mutex<Plain>,
    source: Mutex<Option<Weak<dyn Source>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// The `mcp_method_name` of `method`: its name in the method tables, else `other`.
pub fn method_label(method: &str) -> &'static str {
    if method == "tools/call" {
        return "tools/call";
    }
    if let Some(e) = mcpx_protocol::method::lookup(method) {
        return e.name;
    }
    mcpx_protocol::method::TASKS_EXTENSION_METHODS
        .iter()
        .find(|m| m.name == method)
        .map_or(OTHER, |m| m.name)
}

impl Metrics {
    /// A registry with every metric mcpx records.
    pub fn new() -> Result<Metrics, MetricsError> {
        let registry = Registry::new();
        let histogram = |name: &str, help: &str| -> Result<HistogramVec, MetricsError> {
            let h = HistogramVec::new(
                HistogramOpts::new(name, help).buckets(BUCKETS.to_vec()),
                &LABELS,
            )?;
            registry.register(Box::new(h.clone()))?;
            Ok(h)
        };
        let server = histogram(
            "mcp_server_operation_duration_seconds",
            "Host requests (the host's leg), from the serve seam's first look to the response.",
        )?;
        let client = histogram(
            "mcp_client_operation_duration_seconds",
            "Upstream calls made for a host's request (the upstream leg).",
        )?;
        let counter = |name: &str, help: &str| -> Result<IntCounter, MetricsError> {
            let c = IntCounter::new(name, help)?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let gauge = |name: &str, help: &str| -> Result<IntGauge, MetricsError> {
            let g = IntGauge::new(name, help)?;
            registry.register(Box::new(g.clone()))?;
            Ok(g)
        };
        let host_received = counter(
            "mcpx_host_received_bytes_total",
            "Bytes of the JSON-RPC messages hosts sent (requests and notifications).",
        )?;
        let host_sent = counter(
            "mcpx_host_sent_bytes_total",
            "Bytes of the JSON-RPC responses sent to hosts.",
        )?;
        let sessions = gauge(
            "mcpx_legacy_sessions",
            "Legacy host sessions open (stdio, Streamable HTTP, HTTP+SSE).",
        )?;
        let parked = gauge(
            "mcpx_parked_calls",
            "Calls of modern hosts parked at legacy upstreams while the host answers.",
        )?;
        let tasks = gauge("mcpx_tasks", "Gateway tasks held.")?;
        let reloads = IntCounterVec::new(
            Opts::new(
                "mcpx_reloads_total",
                "Configuration reloads, by result (applied, failed).",
            ),
            &["result"],
        )?;
        registry.register(Box::new(reloads.clone()))?;
        let restarts = IntCounterVec::new(
            Opts::new(
                "mcpx_upstream_restarts_total",
                "Starts of an upstream after its first.",
            ),
            &["upstream"],
        )?;
        registry.register(Box::new(restarts.clone()))?;
        let state = IntGaugeVec::new(
            Opts::new(
                "mcpx_upstream_state",
                "Each upstream's state: 1 for the state it is in, 0 for the others.",
            ),
            &["upstream", "state"],
        )?;
        registry.register(Box::new(state.clone()))?;
        let in_flight = IntGaugeVec::new(
            Opts::new(
                "mcpx_upstream_calls_in_flight",
                "Calls in flight at each upstream.",
            ),
            &["upstream"],
        )?;
        registry.register(Box::new(in_flight.clone()))?;
        let other_tool = Arc::new(ToolSeries {
            host: Series::new(&server, "tools/call", OTHER, ""),
            upstream: Series::new(&client, "tools/call", OTHER, ""),
        });
        Ok(Metrics {
            registry,
            server,
            client,
            host_received,
            host_sent,
            sessions,
            reloads,
            restarts,
            state,
            in_flight,
            parked,
            tasks,
            tools: RwLock::new(Arc::default()),
            other_tool,
            plain: Mutex::new(HashMap::default()),
            source: Mutex::new(None),
        })
    }

    /// Where the gauges sampled at each scrape come from.
    pub fn set_source(&self, source: Weak<dyn Source>) {
        *self.source.lock() = Some(source);
    }

    /// The tools the catalog lists now, each with its upstream: `gen_ai_tool_name`
    /// takes these names only. A tool listed before keeps its series.
    pub fn set_tools<'a>(&self, tools: impl IntoIterator<Item = (&'a str, &'a str)>) {
        let before = self.tools();
        let mut next = Tools::default();
        for (name, upstream) in tools {
            let series = match before.get(name) {
                Some(s) if *s.host.upstream == *upstream => s.clone(),
                _ => {
                    let series = ToolSeries {
                        host: Series::new(&self.server, "tools/call", name, upstream),
                        upstream: Series::new(&self.client, "tools/call", name, upstream),
                    };
                    // Each listed tool's successes show from the start, at 0 (so a
                    // rate has a first point), and are made here, not amid a call.
                    series.host.histogram(ErrorType::Ok);
                    series.upstream.histogram(ErrorType::Ok);
                    Arc::new(series)
                }
            };
            next.insert(name.into(), series);
        }
        *self.tools.write() = Arc::new(next);
    }

    fn tools(&self) -> Arc<Tools> {
        self.tools.read().clone()
    }

    fn tool(&self, name: &str) -> Arc<ToolSeries> {
        let found = self.tools.read().get(name).cloned();
        found.unwrap_or_else(|| self.other_tool.clone())
    }

    fn plain(&self, leg: Leg, method: &'static str, upstream: &str) -> Arc<Series> {
        let key = (leg == Leg::Host, method, Box::<str>::from(upstream));
        let mut plain = self.plain.lock();
        plain
            .entry(key)
            .or_insert_with(|| {
                let vec = match leg {
                    Leg::Host => &self.server,
                    Leg::Upstream => &self.client,
                };
                Arc::new(Series::new(vec, method, "", upstream))
            })
            .clone()
    }

    /// Starts timing a host request (the host's leg) of `method`; `tool` is the name a
    /// `tools/call` names (JSON text: its `params.name` as received).
    pub fn host_request(&self, method: &str, tool: Option<&str>) -> HostTiming {
        self.host_request_since(method, tool, Instant::now())
    }

    /// [`Metrics::host_request`] for a request that arrived at `started`: the tool is
    /// looked up now, among the tools the catalog lists now (a call that comes before
    /// its upstream's tools are listed, during a start, counts as another tool).
    pub fn host_request_since(
        &self,
        method: &str,
        tool: Option<&str>,
        started: Instant,
    ) -> HostTiming {
        let method = method_label(method);
        let tool_call = method == "tools/call";
        let target = if tool_call {
            // The name's text without its quotes when it has no escapes (the usual
            // case), else decoded.
            let plain = tool
                .and_then(|t| t.strip_prefix('"')?.strip_suffix('"'))
                .filter(|n| memchr::memchr2(b'\\', b'"', n.as_bytes()).is_none());
            let series = match plain {
                Some(n) => self.tool(n),
                None => match tool.and_then(mcpx_protocol::jsonrpc::string_value) {
                    Some(n) => self.tool(&n),
                    None => self.other_tool.clone(),
                },
            };
            Target::Tool(series, Leg::Host)
        } else {
            Target::Plain(self.plain(Leg::Host, method, ""))
        };
        HostTiming {
            timing: Timing {
                target,
                start: started,
                ended: false,
            },
            tool_call,
        }
    }

    /// Starts timing the upstream leg of a `tools/call` of the tool of `series`.
    pub fn upstream_tool_call(&self, series: &Arc<ToolSeries>) -> Timing {
        Timing::start(Target::Tool(series.clone(), Leg::Upstream))
    }

    /// Starts timing an upstream call of `method` to `upstream` (not a `tools/call` of
    /// a listed tool: [`Metrics::upstream_tool_call`]).
    pub fn upstream_call(&self, method: &str, upstream: &str) -> Timing {
        let method = method_label(method);
        if method == "tools/call" {
            // A name the catalog did not list (its series names no upstream).
            return Timing::start(Target::Tool(self.other_tool.clone(), Leg::Upstream));
        }
        Timing::start(Target::Plain(self.plain(Leg::Upstream, method, upstream)))
    }

    /// Counts bytes received from hosts.
    pub fn host_received(&self, bytes: usize) {
        self.host_received.inc_by(bytes as u64);
    }

    /// Counts bytes sent to hosts.
    pub fn host_sent(&self, bytes: usize) {
        self.host_sent.inc_by(bytes as u64);
    }

    /// A legacy session opened.
    pub fn session_opened(&self) {
        self.sessions.inc();
    }

    /// A legacy session closed.
    pub fn session_closed(&self) {
        self.sessions.dec();
    }

    /// A reload was applied (`true`), or refused (a file that does not load).
    pub fn reloaded(&self, applied: bool) {
        let result = if applied { "applied" } else { "failed" };
        self.reloads.with_label_values(&[result]).inc();
    }

    /// `upstream` started again `count` more times.
    pub fn restarted(&self, upstream: &str, count: u64) {
        if count > 0 {
            self.restarts.with_label_values(&[upstream]).inc_by(count);
        }
    }

    /// Samples the gauges from the [`Source`] and writes every metric in the
    /// Prometheus text format ([`CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        let source = self.source.lock().as_ref().and_then(Weak::upgrade);
        if let Some(source) = source {
            let sample = source.sample();
            // Upstreams a reload removed leave no series behind.
            self.state.reset();
            self.in_flight.reset();
            for up in &sample.upstreams {
                for state in sample.states {
                    self.state
                        .with_label_values(&[up.name.as_str(), state])
                        .set(i64::from(*state == up.state));
                }
                self.in_flight
                    .with_label_values(&[up.name.as_str()])
                    .set(i64::try_from(up.in_flight).unwrap_or(i64::MAX));
            }
            self.parked
                .set(i64::try_from(sample.parked_calls).unwrap_or(i64::MAX));
            self.tasks
                .set(i64::try_from(sample.tasks).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        if let Err(e) = TextEncoder::new().encode_utf8(&self.registry.gather(), &mut out) {
            tracing::warn!("metrics: {e}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_labels_are_bounded() {
        assert_eq!(method_label("tools/call"), "tools/call");
        assert_eq!(method_label("initialize"), "initialize");
        assert_eq!(method_label("tasks/update"), "tasks/update");
        assert_eq!(method_label("made/up"), OTHER);
    }

    #[test]
    fn tools_outside_the_catalog_count_as_other() {
        let m = Metrics::new().unwrap();
        m.set_tools([("echo", "a")]);
        let listed = m.host_request("tools/call", Some("\"echo\""));
        assert_eq!(
            listed.tool().map(|t| t.host().upstream().to_owned()),
            Some("a".into())
        );
        listed.timing.end(ErrorType::Ok);
        let unlisted = m.host_request("tools/call", Some("\"nope\""));
        assert!(unlisted.tool().is_none());
        unlisted.timing.end(ErrorType::ToolError);
        // Dropped without an end: cancelled.
        drop(m.host_request("ping", None));
        let text = m.render();
        assert!(text.contains(r#"mcp_server_operation_duration_seconds_count{error_type="",gen_ai_tool_name="echo",mcp_method_name="tools/call",upstream="a"} 1"#), "{text}");
        assert!(text.contains(r#"mcp_server_operation_duration_seconds_count{error_type="tool_error",gen_ai_tool_name="other",mcp_method_name="tools/call",upstream=""} 1"#), "{text}");
        assert!(text.contains(r#"mcp_server_operation_duration_seconds_count{error_type="cancelled",gen_ai_tool_name="",mcp_method_name="ping",upstream=""} 1"#), "{text}");
    }

    #[test]
    fn a_tool_keeps_its_series_across_rebuilds_unless_its_upstream_changes() {
        let m = Metrics::new().unwrap();
        m.set_tools([("echo", "a")]);
        let first = m.tool("echo");
        m.set_tools([("echo", "a"), ("add", "a")]);
        assert!(Arc::ptr_eq(&first, &m.tool("echo")));
        m.set_tools([("echo", "b")]);
        assert!(!Arc::ptr_eq(&first, &m.tool("echo")));
        assert!(Arc::ptr_eq(&m.tool("add"), &m.other_tool));
    }

    #[derive(Debug)]
    struct Fixed;

    impl Source for Fixed {
        fn sample(&self) -> Sample {
            Sample {
                states: &["ready", "backoff"],
                upstreams: vec![UpstreamSample {
                    name: "a".into(),
                    state: "ready",
                    in_flight: 2,
                }],
                parked_calls: 1,
                tasks: 3,
            }
        }
    }

    #[test]
    fn gauges_are_sampled_at_each_scrape() {
        let m = Metrics::new().unwrap();
        let source: Arc<dyn Source> = Arc::new(Fixed);
        m.set_source(Arc::downgrade(&source));
        m.restarted("a", 2);
        m.reloaded(true);
        m.session_opened();
        let text = m.render();
        for line in [
            r#"mcpx_upstream_state{state="ready",upstream="a"} 1"#,
            r#"mcpx_upstream_state{state="backoff",upstream="a"} 0"#,
            r#"mcpx_upstream_calls_in_flight{upstream="a"} 2"#,
            r#"mcpx_upstream_restarts_total{upstream="a"} 2"#,
            r#"mcpx_reloads_total{result="applied"} 1"#,
            "mcpx_parked_calls 1",
            "mcpx_tasks 3",
            "mcpx_legacy_sessions 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
