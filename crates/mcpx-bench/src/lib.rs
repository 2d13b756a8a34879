//! mcpx's load generator, behind `mcpx bench`.
//!
//! [`run`] opens N sessions to one MCP server (each its own [`Connection`]: a legacy
//! session runs the `initialize` handshake, a modern one is stateless), warms them up,
//! then has every session call one tool back to back (`tools/call`, one call in flight
//! per session) for a duration or a number of calls, and returns a [`Report`]: calls/s,
//! latency percentiles (a sorted vector of every call's latency, no sampling), errors,
//! and the peak RSS (`VmHWM`) and CPU per call of a watched process and of the load
//! generator's own children (the servers it started over stdio).
//!
//! The target is whatever [`TargetTransport`] says: a command over stdio (one child per
//! session, as hosts launch servers) or a Streamable HTTP URL.
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mcpx_client::{
    CallOptions, ClientError, Connection, EraCache, ProtocolPreference, Target, TargetTransport,
    connect,
};
use mcpx_protocol::Era;
use mcpx_protocol::jsonrpc::Kind;
use serde::Serialize;
use serde_json::Value;

/// How long to run the measured phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// For this long.
    Duration(Duration),
    /// This many calls in all (shared by the sessions).
    Calls(u64),
}

/// One benchmark run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where the server is.
    pub transport: TargetTransport,
    /// The era to speak (legacy: `initialize` per session; modern: stateless).
    pub era: Era,
    /// Concurrent sessions, one call in flight each.
    pub sessions: usize,
    /// The measured phase.
    pub budget: Budget,
    /// The warm-up before it (calls made, not measured).
    pub warmup: Duration,
    /// The tool to call.
    pub tool: String,
    /// Its `arguments`.
    pub arguments: Value,
    /// The client capabilities a 2026-07-28 call declares (legacy sessions declare
    /// theirs at `initialize`).
    pub client_capabilities: Value,
    /// A process whose peak RSS to report (e.g. the gateway).
    pub watch_pid: Option<u32>,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// The era spoken.
    pub era: Era,
    /// Concurrent sessions.
    pub sessions: usize,
    /// Successful calls in the measured phase.
    pub calls: u64,
    /// Calls that failed (error response or transport error) in the measured phase.
    pub errors: u64,
    /// Length of the measured phase, in seconds.
    pub elapsed_s: f64,
    /// Successful calls per second.
    pub calls_per_s: f64,
    /// Median latency, in microseconds.
    pub p50_us: f64,
    /// 99th percentile latency, in microseconds.
    pub p99_us: f64,
    /// Mean latency, in microseconds.
    pub mean_us: f64,
    /// Slowest call, in microseconds.
    pub max_us: f64,
    /// Peak RSS (`VmHWM`) of the watched process, in KiB.
    pub watched_peak_rss_kib: Option<u64>,
    /// The largest peak RSS among this process's children (stdio servers), in KiB.
    pub child_peak_rss_kib: Option<u64>,
    /// CPU time the watched process ran during the measured phase, per successful call,
    /// in microseconds (all its threads, from `/proc/PID/task/*/schedstat`).
    pub watched_cpu_us_per_call: Option<f64>,
    /// The same for this process's children together (the stdio servers: one per
    /// session).
    pub child_cpu_us_per_call: Option<f64>,
    /// The first error seen, if any.
    pub first_error: Option<String>,
}

impl Report {
    /// One human-readable line.
    pub fn human(&self) -> String {
        let mut s = format!(
            "{} {} x{}: {:.0} calls/s, p50 {:.1} µs, p99 {:.1} µs, mean {:.1} µs, max {:.1} µs ({} calls, {} errors, {:.2} s)",
            self.transport,
            self.era,
            self.sessions,
            self.calls_per_s,
            self.p50_us,
            self.p99_us,
            self.mean_us,
            self.max_us,
            self.calls,
            self.errors,
            self.elapsed_s
        );
        if let Some(k) = self.watched_peak_rss_kib {
            s.push_str(&format!(", watched peak RSS {:.1} MiB", k as f64 / 1024.0));
        }
        if let Some(k) = self.child_peak_rss_kib {
            s.push_str(&format!(", child peak RSS {:.1} MiB", k as f64 / 1024.0));
        }
        if let Some(c) = self.watched_cpu_us_per_call {
            s.push_str(&format!(", watched CPU {c:.1} µs/call"));
        }
        if let Some(c) = self.child_cpu_us_per_call {
            s.push_str(&format!(", children's CPU {c:.1} µs/call"));
        }
        if let Some(e) = &self.first_error {
            s.push_str(&format!("; first error: {e}"));
        }
        s
    }
}

/// Why a run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A session could not connect.
    #[error("session {session}: {source}")]
    Connect {
        /// Which session.
        session: usize,
        /// Why.
        source: ClientError,
    },
    /// The options make no sense.
    #[error("{0}")]
    Invalid(String),
    /// Not one call succeeded.
    #[error("no call succeeded: {0}")]
    NothingWorked(String),
}

/// Per-session tallies.
#[derive(Debug, Default)]
struct Tally {
    latencies_ns: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
}

/// Runs one benchmark.
pub async fn run(opts: &Options) -> Result<Report, BenchError> {
    if opts.sessions == 0 {
        return Err(BenchError::Invalid("--sessions must be at least 1".into()));
    }
    let params = mcpx_protocol::Params::of_value(
        &serde_json::json!({ "name": opts.tool, "arguments": opts.arguments }),
    );
    let params = Arc::new(params);
    let call_options = CallOptions {
        client_capabilities: Arc::new(opts.client_capabilities.clone()),
        ..CallOptions::default()
    };
    let mut target = Target::new("bench", opts.transport.clone());
    target.preference = match opts.era {
        Era::Legacy => ProtocolPreference::Legacy,
        Era::Modern => ProtocolPreference::Modern,
    };
    let cache = EraCache::disabled();

    // Connect every session (in parallel: a stdio server takes a few ms to start).
    let mut connecting = Vec::with_capacity(opts.sessions);
    for _ in 0..opts.sessions {
        let target = target.clone();
        let cache = cache.clone();
        connecting.push(tokio::spawn(async move { connect(&target, &cache).await }));
    }
    let mut conns = Vec::with_capacity(opts.sessions);
    for (session, h) in connecting.into_iter().enumerate() {
        let conn = h
            .await
            .map_err(|e| BenchError::Invalid(format!("session {session}: {e}")))?
            .map_err(|source| BenchError::Connect { session, source })?;
        conns.push(conn);
    }

    // Warm-up: every session calls for `warmup`, nothing recorded.
    if !opts.warmup.is_zero() {
        let until = Instant::now() + opts.warmup;
        phase(
            &conns,
            &params,
            &call_options,
            Budget::Duration(opts.warmup),
            until,
            false,
        )
        .await;
    }

    let watched_cpu_before = opts.watch_pid.and_then(cpu_ns);
    let children_cpu_before = children_cpu_ns();
    let start = Instant::now();
    let until = match opts.budget {
        Budget::Duration(d) => start + d,
        Budget::Calls(_) => start + Duration::from_secs(24 * 3600),
    };
    let tallies = phase(&conns, &params, &call_options, opts.budget, until, true).await;
    let elapsed = start.elapsed();
    let watched_cpu = opts
        .watch_pid
        .and_then(cpu_ns)
        .zip(watched_cpu_before)
        .and_then(|(after, before)| after.checked_sub(before));
    let children_cpu = children_cpu_ns()
        .zip(children_cpu_before)
        .and_then(|(after, before)| after.checked_sub(before));

    let watched_peak_rss_kib = opts.watch_pid.and_then(peak_rss_kib);
    let child_peak_rss_kib = children_peak_rss_kib();
    for c in &conns {
        c.close().await;
    }

    let mut lat: Vec<u64> = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    for t in tallies {
        lat.extend(t.latencies_ns);
        errors += t.errors;
        if first_error.is_none() {
            first_error = t.first_error;
        }
    }
    if lat.is_empty() {
        return Err(BenchError::NothingWorked(
            first_error.unwrap_or_else(|| "no call was made".into()),
        ));
    }
    lat.sort_unstable();
    let us = |ns: u64| ns as f64 / 1000.0;
    let pct = |p: f64| {
        let i = ((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1;
        us(lat[i])
    };
    let calls = lat.len() as u64;
    let secs = elapsed.as_secs_f64();
    Ok(Report {
        transport: match opts.transport {
            TargetTransport::Stdio { .. } => "stdio",
            TargetTransport::Http { .. } => "http",
            TargetTransport::Sse { .. } => "sse",
            TargetTransport::Stream(_) => "stream",
        },
        era: opts.era,
        sessions: opts.sessions,
        calls,
        errors,
        elapsed_s: secs,
        calls_per_s: calls as f64 / secs,
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        mean_us: us(lat.iter().sum::<u64>() / calls),
        max_us: lat.last().copied().map(us).unwrap_or_default(),
        watched_peak_rss_kib,
        child_peak_rss_kib,
        watched_cpu_us_per_call: watched_cpu.map(|ns| ns as f64 / 1000.0 / calls as f64),
        child_cpu_us_per_call: children_cpu.map(|ns| ns as f64 / 1000.0 / calls as f64),
        first_error,
    })
}

/// Every session calls back to back until `until` or until the shared call budget is
/// spent; returns each session's tally.
async fn phase(
    conns: &[Connection],
    params: &Arc<mcpx_protocol::Params>,
    call_options: &CallOptions,
    budget: Budget,
    until: Instant,
    record: bool,
) -> Vec<Tally> {
    let remaining = Arc::new(AtomicU64::new(match budget {
        Budget::Calls(n) => n,
        Budget::Duration(_) => u64::MAX,
    }));
    let mut tasks = Vec::with_capacity(conns.len());
    for conn in conns {
        let conn = conn.clone();
        let params = params.clone();
        let call_options = call_options.clone();
        let remaining = remaining.clone();
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            if record {
                tally.latencies_ns.reserve(64 * 1024);
            }
            loop {
                if Instant::now() >= until {
                    break;
                }
                // Take one call from the shared budget.
                if remaining
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_err()
                {
                    break;
                }
                let t0 = Instant::now();
                let out = conn
                    .call("tools/call", Some(&params), call_options.clone())
                    .await;
                let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
                let failure = match out {
                    Ok(f) if f.kind() == Kind::Result => None,
                    Ok(f) => Some(format!("error response: {}", f.as_str())),
                    Err(e) => Some(e.to_string()),
                };
                match failure {
                    None if record => tally.latencies_ns.push(ns),
                    None => {}
                    Some(e) => {
                        tally.errors += 1;
                        if tally.first_error.is_none() {
                            tracing::warn!("bench call failed: {e}");
                            tally.first_error = Some(e);
                        }
                        if conn.is_closed() {
                            break;
                        }
                    }
                }
            }
            tally
        }));
    }
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        match t.await {
            Ok(tally) => out.push(tally),
            Err(e) => out.push(Tally {
                latencies_ns: Vec::new(),
                errors: 1,
                first_error: Some(format!("session task failed: {e}")),
            }),
        }
    }
    if !record {
        out.clear();
    }
    out
}

/// `VmHWM` of `/proc/PID/status`, in KiB.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status_field_kib(&status, "VmHWM:")
}

/// `VmRSS` of `/proc/PID/status` (the resident set now), in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status_field_kib(&status, "VmRSS:")
}

fn status_field_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// The largest `VmHWM` among this process's live children, in KiB.
fn children_peak_rss_kib() -> Option<u64> {
    children()
        .into_iter()
        .filter_map(|(_, status)| status_field_kib(&status, "VmHWM:"))
        .max()
}

/// This process's live children: their pids and `/proc/PID/status`.
fn children() -> Vec<(u32, String)> {
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let parent = status
                .lines()
                .find_map(|l| l.strip_prefix("PPid:"))
                .map(str::trim);
            (parent == Some(me.as_str())).then_some((pid, status))
        })
        .collect()
}

/// The CPU time `pid` has run, in nanoseconds: the sum over its live threads of the
/// first field of `/proc/PID/task/TID/schedstat` (nanosecond clock, where `stat`'s
/// `utime`/`stime` count 10 ms ticks: too coarse for a second's run of a process that
/// spends tens of microseconds a call). A thread that ended takes its time with it;
/// the processes measured here keep theirs for the whole run.
pub fn cpu_ns(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0u64;
    let mut any = false;
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        if let Some(ns) = stat
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
        {
            total = total.saturating_add(ns);
            any = true;
        }
    }
    any.then_some(total)
}

/// [`cpu_ns`] of this process's live children together.
fn children_cpu_ns() -> Option<u64> {
    let all: Vec<u64> = children()
        .iter()
        .filter_map(|(pid, _)| cpu_ns(*pid))
        .collect();
    (!all.is_empty()).then(|| all.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_vmhwm() {
        let s = "Name:\tx\nVmPeak:\t  100 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(status_field_kib(s, "VmHWM:"), Some(2048));
        assert!(peak_rss_kib(std::process::id()).is_some());
    }

    #[test]
    fn reads_cpu_time_that_grows_as_the_process_runs() {
        let me = std::process::id();
        let Some(before) = cpu_ns(me) else {
            // No schedstat on this kernel: the report says nothing rather than 0.
            return;
        };
        // Spin until 10 ms of CPU show, however loaded the machine (bounded wait).
        let spin = Instant::now();
        let mut x = 0u64;
        let mut after = before;
        while after < before + 10_000_000 && spin.elapsed() < Duration::from_secs(30) {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            after = cpu_ns(me).unwrap_or(0);
        }
        assert!(after >= before + 10_000_000, "{before} -> {after}");
    }
}
