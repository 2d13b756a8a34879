//! A soak of `mcpx serve --http`: minutes of mixed load, with the upstream crashing on
//! a schedule, and an account of every call. Run by `scripts/bench.sh soak`.
//!
//! ```text
//! soak --mcpx target/release/mcpx [--secs 600] [--crash-every 30] [--warmup 60]
//! ```
//!
//! It writes a configuration with two stdio upstreams (`mcpx example-server`): `a`,
//! which it kills with SIGKILL every `--crash-every` seconds, and `b`, which it leaves
//! alone. It starts `mcpx serve --http 127.0.0.1:0` on it and drives, at once:
//!
//! * legacy hosts (2025-11-25 sessions, each its own worker), cycling through plain
//!   calls to `a` and `b`, calls with progress, a sampling question answered, a
//!   sampling question left unanswered (mcpx's `askTimeoutMs` ends it), and a call
//!   cancelled 300 ms in;
//! * modern hosts (2026-07-28, stateless) with plain and progress calls;
//! * an abandoner: a new legacy session every 200 ms, one call, then dropped without a
//!   `DELETE` (mcpx's `maxSessions` and `sessionIdleMs` must deal with them).
//!
//! Every call ends in one of: *ok* (a result, `isError` or not), *refused* (a JSON-RPC
//! error with a message: the upstream was restarting, say), *cancelled* (by the soak),
//! *lost* (the host's connection to mcpx failed, or an error without a reason) or *hung*
//! (no answer within 120 s: far beyond every bound mcpx is configured with). Calls to
//! `b`, which never crashes, must all be ok.
//!
//! Every 5 s it samples mcpx's RSS and open file descriptors. At the end it prints the
//! tallies and the samples after warm-up, and one JSON line (`SOAK {...}`) for the
//! script. Exit status 1 when any call was lost or hung or a call to `b` failed.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpx_client::{
    CallEvent, CallOptions, ClientError, Connection, EraCache, ProtocolPreference, Target,
    TargetTransport, connect,
};
use mcpx_protocol::Params;
use mcpx_protocol::jsonrpc::Kind;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Longest any call may take before the soak calls it hung.
const HUNG: Duration = Duration::from_secs(120);
/// Legacy workers, each with its own session.
const LEGACY_WORKERS: usize = 8;
/// Modern workers.
const MODERN_WORKERS: usize = 4;
/// How often a session is abandoned.
const ABANDON_EVERY: Duration = Duration::from_millis(200);
/// How often RSS and descriptors are sampled.
const SAMPLE_EVERY: Duration = Duration::from_secs(5);

struct Args {
    mcpx: PathBuf,
    secs: u64,
    crash_every: u64,
    warmup: u64,
}

/// Why the soak did not run.
#[derive(Debug, thiserror::Error)]
enum SoakError {
    /// A flag without its value.
    #[error("{0} needs a value")]
    NoValue(String),
    /// A flag's value is not a number.
    #[error("{flag} {value}: {source}")]
    Number {
        flag: String,
        value: String,
        source: std::num::ParseIntError,
    },
    /// A flag not known.
    #[error("unknown flag {0}")]
    UnknownFlag(String),
    /// A file (the binary, or the one started) failed.
    #[error("{}: {source}", path.display())]
    Path {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The scratch files failed, or mcpx serve's stderr.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// mcpx serve exited at once.
    #[error("mcpx serve exited at once")]
    Exited,
    /// mcpx serve's stderr was not piped.
    #[error("no stderr")]
    NoStderr,
    /// mcpx serve said no address in time.
    #[error("mcpx serve announced no address within 20 s")]
    NoAddress,
    /// mcpx serve exited before it said its address.
    #[error("mcpx serve exited before announcing its address")]
    ExitedEarly,
}

fn args() -> Result<Args, SoakError> {
    let mut a = Args {
        mcpx: PathBuf::from("target/release/mcpx"),
        secs: 600,
        crash_every: 30,
        warmup: 60,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| SoakError::NoValue(flag.clone()))?;
        let number = || {
            value.parse::<u64>().map_err(|source| SoakError::Number {
                flag: flag.clone(),
                value: value.clone(),
                source,
            })
        };
        match flag.as_str() {
            "--mcpx" => a.mcpx = PathBuf::from(&value),
            "--secs" => a.secs = number()?,
            "--crash-every" => a.crash_every = number()?.max(1),
            "--warmup" => a.warmup = number()?,
            _ => return Err(SoakError::UnknownFlag(flag)),
        }
    }
    Ok(a)
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Ok,
    Refused,
    Cancelled,
    Lost,
    Hung,
}

/// What a worker does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    CallA,
    CallB,
    Progress,
    AskAnswered,
    AskUnanswered,
    Cancel,
    Abandoned,
}

const LEGACY_CYCLE: [Op; 10] = [
    Op::CallA,
    Op::CallB,
    Op::CallA,
    Op::Progress,
    Op::AskAnswered,
    Op::CallB,
    Op::AskUnanswered,
    Op::CallA,
    Op::Cancel,
    Op::CallB,
];
const MODERN_CYCLE: [Op; 4] = [Op::CallA, Op::CallB, Op::Progress, Op::CallA];

#[derive(Default)]
struct Tallies {
    counts: BTreeMap<(Op, Outcome), u64>,
    /// The first few reasons per (op, outcome) other than ok.
    examples: BTreeMap<(Op, Outcome), Vec<String>>,
}

impl Tallies {
    fn add(&mut self, op: Op, outcome: Outcome, why: Option<String>) {
        *self.counts.entry((op, outcome)).or_default() += 1;
        if let Some(why) = why {
            let ex = self.examples.entry((op, outcome)).or_default();
            if ex.len() < 3 && !ex.contains(&why) {
                ex.push(why);
            }
        }
    }
    fn total(&self, f: impl Fn(Op, Outcome) -> bool) -> u64 {
        self.counts
            .iter()
            .filter(|((op, o), _)| f(*op, *o))
            .map(|(_, n)| n)
            .sum()
    }
}

type Shared = Arc<Mutex<Tallies>>;

fn record(t: &Shared, op: Op, outcome: Outcome, why: Option<String>) {
    t.lock().add(op, outcome, why);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("soak: {e}");
            std::process::exit(2);
        }
    };
    match soak(a).await {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("soak: {e}");
            std::process::exit(2);
        }
    }
}

async fn soak(a: Args) -> Result<bool, SoakError> {
    let mcpx = std::fs::canonicalize(&a.mcpx).map_err(|source| SoakError::Path {
        path: a.mcpx.clone(),
        source,
    })?;
    let dir = std::env::temp_dir().join(format!("mcpx-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("mcpx.json");
    let entry = |tag: &str| {
        json!({
            "command": mcpx,
            "args": ["example-server"],
            "env": {"MCPX_SOAK_TAG": tag},
            // Killed every 30 s, `a` is restarted each time: with the default
            // resetAfterMs (60 s) a kill every 30 s is a crash loop, retried every 5
            // minutes, and the soak would mostly measure refusals.
            "mcpx": {"callTimeoutMs": 10000, "restart": {"resetAfterMs": 10000}}
        })
    };
    let doc = json!({
        "mcpServers": {"a": entry("a"), "b": entry("b")},
        "mcpx": {"limits": {
            "maxCallTimeMs": 30000,
            "askTimeoutMs": 2000,
            "askMaxPending": 16,
            "maxSessions": 64,
            "sessionIdleMs": 30000
        }}
    });
    std::fs::write(&config, doc.to_string())?;

    let mut serve = tokio::process::Command::new(&mcpx)
        .args(["serve", "--config"])
        .arg(&config)
        .args(["--http", "127.0.0.1:0"])
        .env_remove("MCPX_SERVE_TOKEN")
        .env("MCPX_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| SoakError::Path {
            path: mcpx.clone(),
            source,
        })?;
    let pid = serve.id().ok_or(SoakError::Exited)?;
    let stderr = serve.stderr.take().ok_or(SoakError::NoStderr)?;
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .map_err(|_| SoakError::NoAddress)??
            .ok_or(SoakError::ExitedEarly)?;
        if let Some(rest) = line.split("Streamable HTTP at ").nth(1) {
            break rest.split(',').next().unwrap_or_default().trim().to_owned();
        }
    };
    // Keep draining its stderr; count what it says.
    let warnings = Arc::new(Mutex::new(0u64));
    {
        let warnings = warnings.clone();
        tokio::spawn(async move {
            while let Ok(Some(_)) = lines.next_line().await {
                *warnings.lock() += 1;
            }
        });
    }
    eprintln!(
        "soak: mcpx serve (pid {pid}) at {url}: {} s of load, upstream a killed every {} s",
        a.secs, a.crash_every
    );

    let tallies: Shared = Arc::default();
    let start = Instant::now();
    let until = start + Duration::from_secs(a.secs);
    let mut tasks = Vec::new();
    for w in 0..LEGACY_WORKERS {
        tasks.push(tokio::spawn(worker(
            url.clone(),
            ProtocolPreference::Legacy,
            &LEGACY_CYCLE,
            w,
            until,
            tallies.clone(),
        )));
    }
    for w in 0..MODERN_WORKERS {
        tasks.push(tokio::spawn(worker(
            url.clone(),
            ProtocolPreference::Modern,
            &MODERN_CYCLE,
            w,
            until,
            tallies.clone(),
        )));
    }
    tasks.push(tokio::spawn(abandoner(url.clone(), until, tallies.clone())));
    let crashes = tokio::spawn(crasher(pid, a.crash_every, until));
    let samples = tokio::spawn(sampler(pid, until));

    for t in tasks {
        let _ = t.await;
    }
    let crashes = crashes.await.unwrap_or(0);
    let samples = samples.await.unwrap_or_default();
    let _ = serve.start_kill();
    let _ = serve.wait().await;
    let _ = std::fs::remove_dir_all(&dir);

    let t = tallies.lock();
    Ok(report(
        &t,
        &samples,
        crashes,
        a.warmup,
        start.elapsed(),
        &warnings,
    ))
}

fn report(
    t: &Tallies,
    samples: &[(f64, u64, u64)],
    crashes: u64,
    warmup: u64,
    elapsed: Duration,
    warnings: &Mutex<u64>,
) -> bool {
    println!(
        "soak: {:.0} s, upstream a killed {crashes} times",
        elapsed.as_secs_f64()
    );
    for ((op, outcome), n) in &t.counts {
        let ex = t
            .examples
            .get(&(*op, *outcome))
            .map(|v| format!("  e.g. {}", v.join(" | ")))
            .unwrap_or_default();
        println!("  {op:?} {outcome:?}: {n}{ex}");
    }
    let calls = t.total(|_, _| true);
    let lost = t.total(|_, o| o == Outcome::Lost);
    let hung = t.total(|_, o| o == Outcome::Hung);
    let b_failed = t.total(|op, o| op == Op::CallB && o != Outcome::Ok);
    let after: Vec<_> = samples
        .iter()
        .filter(|(s, _, _)| *s >= warmup as f64)
        .collect();
    let stat = |f: fn(&(f64, u64, u64)) -> u64| {
        let v: Vec<u64> = after.iter().map(|s| f(s)).collect();
        (
            v.iter().min().copied().unwrap_or(0),
            v.iter().max().copied().unwrap_or(0),
            v.last().copied().unwrap_or(0),
        )
    };
    let rss = stat(|s| s.1);
    let fds = stat(|s| s.2);
    println!(
        "  after {warmup} s of warm-up ({} samples): RSS {:.1}–{:.1} MiB (last {:.1}), fds {}–{} (last {})",
        after.len(),
        rss.0 as f64 / 1024.0,
        rss.1 as f64 / 1024.0,
        rss.2 as f64 / 1024.0,
        fds.0,
        fds.1,
        fds.2
    );
    // Each minute's peak, to see a trend rather than a range.
    let mut minutes: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for (at, rss, fds) in samples {
        let m = minutes.entry((*at / 60.0) as u64).or_default();
        *m = (m.0.max(*rss), m.1.max(*fds));
    }
    let trend: Vec<String> = minutes
        .iter()
        .map(|(m, (rss, fds))| format!("{m}: {:.1} MiB/{fds}", *rss as f64 / 1024.0))
        .collect();
    println!("  each minute's peak RSS/fds: {}", trend.join(", "));
    let warned = *warnings.lock();
    let summary = json!({
        "secs": elapsed.as_secs_f64().round(),
        "calls": calls,
        "ok": t.total(|_, o| o == Outcome::Ok),
        "refused": t.total(|_, o| o == Outcome::Refused),
        "cancelled": t.total(|_, o| o == Outcome::Cancelled),
        "lost": lost,
        "hung": hung,
        "b_failed": b_failed,
        "crashes": crashes,
        "rss_kib": {"min": rss.0, "max": rss.1, "last": rss.2},
        "fds": {"min": fds.0, "max": fds.1, "last": fds.2},
        "stderr_lines": warned,
        "rss_kib_per_minute": minutes.values().map(|m| m.0).collect::<Vec<_>>(),
    });
    println!("SOAK {summary}");
    lost == 0 && hung == 0 && b_failed == 0 && calls > 0
}

fn target(url: &str, preference: ProtocolPreference) -> Target {
    let mut t = Target::new(
        "soak",
        TargetTransport::Http {
            url: url.to_owned(),
            headers: Vec::new(),
        },
    );
    t.preference = preference;
    t.legacy_capabilities = json!({"sampling": {}});
    t
}

fn params(tool: &str, arguments: Value) -> Params {
    Params::of_value(&json!({"name": tool, "arguments": arguments}))
}

/// One host: connects, then cycles through `cycle` until `until`.
async fn worker(
    url: String,
    preference: ProtocolPreference,
    cycle: &'static [Op],
    offset: usize,
    until: Instant,
    tallies: Shared,
) {
    let target = target(&url, preference);
    let cache = EraCache::disabled();
    let mut conn: Option<Connection> = None;
    let mut i = offset;
    while Instant::now() < until {
        let c = match &conn {
            Some(c) if !c.is_closed() => c.clone(),
            _ => match connect(&target, &cache).await {
                Ok(c) => {
                    conn = Some(c.clone());
                    c
                }
                Err(e) => {
                    // Connecting is a call too (initialize): mcpx must answer it.
                    record(
                        &tallies,
                        Op::CallA,
                        Outcome::Lost,
                        Some(format!("connect: {e}")),
                    );
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            },
        };
        let op = cycle[i % cycle.len()];
        i += 1;
        let (outcome, why) = one(&c, op, preference == ProtocolPreference::Modern).await;
        record(&tallies, op, outcome, why);
        if outcome != Outcome::Ok {
            // Do not spin while upstream a restarts.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    if let Some(c) = conn {
        c.close().await;
    }
}

/// One call of kind `op` on `conn`.
async fn one(conn: &Connection, op: Op, modern: bool) -> (Outcome, Option<String>) {
    let (tool, arguments) = match op {
        Op::CallA | Op::Abandoned => ("a__test_simple_text", json!({})),
        Op::CallB => ("b__test_simple_text", json!({})),
        Op::Progress => (
            "a__test_tool_with_progress",
            json!({"steps": 3, "delayMs": 20}),
        ),
        Op::AskAnswered | Op::AskUnanswered => (
            "a__test_sampling",
            json!({"prompt": "What is the capital of France?"}),
        ),
        Op::Cancel => (
            "a__test_tool_with_progress",
            json!({"steps": 50, "delayMs": 100}),
        ),
    };
    let p = params(tool, arguments);
    let cancel = CancellationToken::new();
    let (events, mut rx) = mpsc::channel::<Box<CallEvent>>(16);
    let opts = CallOptions {
        events: Some(events),
        progress: matches!(op, Op::Progress | Op::Cancel),
        timeout: HUNG,
        max_time: HUNG,
        cancel: cancel.clone(),
        client_capabilities: Arc::new(if modern {
            json!({"sampling": {}})
        } else {
            json!({})
        }),
        ..CallOptions::default()
    };
    // Answers (or holds) the questions the call brings.
    let answer = op != Op::AskUnanswered;
    let asks = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Some(ev) = rx.recv().await {
            if let CallEvent::Ask { reply, .. } = *ev {
                if answer {
                    let _ = reply.send(Ok(json!({
                        "role": "assistant",
                        "content": {"type": "text", "text": "Paris"},
                        "model": "soak",
                        "stopReason": "endTurn"
                    })));
                } else {
                    held.push(reply);
                }
            }
        }
        drop(held);
    });
    if op == Op::Cancel {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            cancel.cancel();
        });
    }
    let out = tokio::time::timeout(
        HUNG + Duration::from_secs(5),
        conn.call("tools/call", Some(&p), opts),
    )
    .await;
    asks.abort();
    match out {
        Err(_) => (
            Outcome::Hung,
            Some(format!("{tool}: no answer in {HUNG:?}")),
        ),
        Ok(Ok(f)) if f.kind() == Kind::Result => (Outcome::Ok, None),
        Ok(Ok(f)) => match f.error() {
            Some(e) if !e.message.trim().is_empty() => {
                let why = format!("{}: {}", e.code, e.message);
                (Outcome::Refused, Some(shorten(&why)))
            }
            _ => (Outcome::Lost, Some(shorten(f.as_str()))),
        },
        Ok(Err(ClientError::Cancelled { .. })) if op == Op::Cancel => (Outcome::Cancelled, None),
        Ok(Err(ClientError::Timeout { .. })) => (Outcome::Hung, Some(format!("{tool}: timed out"))),
        Ok(Err(e)) => (Outcome::Lost, Some(shorten(&e.to_string()))),
    }
}

fn shorten(s: &str) -> String {
    let mut s: String = s.chars().take(160).collect();
    if let Some(i) = s.find(" (attempt") {
        s.truncate(i);
    }
    s
}

/// A new legacy session every [`ABANDON_EVERY`]: one call, then dropped, no `DELETE`.
async fn abandoner(url: String, until: Instant, tallies: Shared) {
    let target = target(&url, ProtocolPreference::Legacy);
    let cache = EraCache::disabled();
    while Instant::now() < until {
        match connect(&target, &cache).await {
            Ok(c) => {
                let (outcome, why) = one(&c, Op::Abandoned, false).await;
                record(&tallies, Op::Abandoned, outcome, why);
                drop(c);
            }
            Err(e) => record(
                &tallies,
                Op::Abandoned,
                Outcome::Lost,
                Some(format!("connect: {e}")),
            ),
        }
        tokio::time::sleep(ABANDON_EVERY).await;
    }
}

/// Kills upstream `a` (the child of `pid` whose environment carries its tag) every
/// `every` seconds; returns how many times it did.
async fn crasher(pid: u32, every: u64, until: Instant) -> u64 {
    let mut n = 0;
    loop {
        tokio::time::sleep(Duration::from_secs(every)).await;
        if Instant::now() >= until {
            return n;
        }
        for child in children(pid) {
            let environ = std::fs::read(format!("/proc/{child}/environ")).unwrap_or_default();
            let tagged = environ
                .split(|b| *b == 0)
                .any(|kv| kv == b"MCPX_SOAK_TAG=a");
            if tagged {
                let killed = tokio::process::Command::new("kill")
                    .args(["-KILL", &child.to_string()])
                    .status()
                    .await
                    .is_ok_and(|s| s.success());
                if killed {
                    n += 1;
                }
            }
        }
    }
}

fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let text = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        out.extend(
            text.split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok()),
        );
    }
    out
}

/// (seconds since start, RSS in KiB, open descriptors) every [`SAMPLE_EVERY`].
async fn sampler(pid: u32, until: Instant) -> Vec<(f64, u64, u64)> {
    let start = Instant::now();
    let mut out = Vec::new();
    while Instant::now() < until {
        tokio::time::sleep(SAMPLE_EVERY).await;
        if let (Some(rss), Some(fds)) = (mcpx_bench::rss_kib(pid), fd_count(pid)) {
            out.push((start.elapsed().as_secs_f64(), rss, fds));
        }
    }
    out
}

fn fd_count(pid: u32) -> Option<u64> {
    let dir = Path::new("/proc").join(pid.to_string()).join("fd");
    Some(std::fs::read_dir(dir).ok()?.count() as u64)
}
