//! How long one upstream's big result holds up the gateway's calls to its other
//! upstreams (issue #24, defect 12).
//!
//! It runs `mcpx serve --http` with two stdio upstreams: `big`, this program in its
//! `--upstream` role, whose one tool `big` answers with a text of `--mib` MiB, and
//! `small`, `mcpx example-server`. One host connection calls `small__test_simple_text`
//! back to back, the whole time; another calls `big__big` once a round. Each round
//! prints how long the big call took, and the small calls' latencies while it was in
//! flight next to those of the second before it. The figure that matters is the
//! largest small call during the big one: how long the gateway's event loop was held.
//!
//! The big call runs on a thread and a runtime of its own, so what this process does
//! with the big answer (reading and decoding it) does not delay its own small calls:
//! the delay measured is the gateway's. On a machine with two cores the big upstream,
//! the gateway and this host share them, so some delay is left whatever the gateway
//! does; compare binaries on the same machine.
//!
//! Usage (a release build; `--mcpx` defaults to the `mcpx` beside `examples/`):
//!
//! ```text
//! cargo build --release -p mcpx -p mcpx-bench --example big_frame
//! target/release/examples/big_frame [--mcpx PATH] [--mib 60] [--rounds 5] [--threads N]
//! ```
//!
//! `--threads` is passed to `mcpx serve` (its default is one thread).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpx_client::{CallOptions, Connection, EraCache, Target, TargetTransport, connect};
use mcpx_protocol::Params;
use mcpx_protocol::jsonrpc::Kind;
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The command line.
struct Args {
    mcpx: PathBuf,
    mib: usize,
    rounds: usize,
    threads: Option<String>,
    upstream: bool,
}

fn args() -> Result<Args, Error> {
    let mut a = Args {
        mcpx: std::env::current_exe()?
            .parent()
            .and_then(|examples| examples.parent())
            .map(|dir| dir.join("mcpx"))
            .unwrap_or_else(|| PathBuf::from("mcpx")),
        mib: 60,
        rounds: 5,
        threads: None,
        upstream: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--mcpx" => a.mcpx = PathBuf::from(value()?),
            "--mib" => a.mib = value()?.parse()?,
            "--rounds" => a.rounds = value()?.parse()?,
            "--threads" => a.threads = Some(value()?),
            "--upstream" => a.upstream = true,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(a)
}

/// The `big` upstream: a legacy (2025-06-18) stdio server whose tool `big` answers
/// with `mib` MiB of text, the line built once and written whole.
fn upstream(mib: usize) -> Result<(), Error> {
    let text = "x".repeat(mib << 20);
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line?;
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(id), Some(method)) = (msg.get("id"), msg["method"].as_str()) else {
            continue;
        };
        let answer = match method {
            "initialize" => json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "big", "version": "1"}}}),
            "tools/list" => json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [{
                "name": "big", "description": "a big text",
                "inputSchema": {"type": "object"}}]}}),
            "tools/call" => {
                let head = json!({"jsonrpc": "2.0", "id": id}).to_string();
                let head = head.strip_suffix('}').unwrap_or(&head);
                writeln!(
                    out,
                    "{head},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}}}"
                )?;
                out.flush()?;
                continue;
            }
            "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            _ => json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32601, "message": "no such method"}}),
        };
        writeln!(out, "{answer}")?;
        out.flush()?;
    }
    Ok(())
}

/// `mcpx serve --http 127.0.0.1:0` on a configuration with the two upstreams, and the
/// port it announced.
fn gateway(a: &Args, dir: &std::path::Path) -> Result<(Child, u16), Error> {
    let me = std::env::current_exe()?;
    let config = json!({
        "mcpServers": {
            "big": {
                "command": me,
                "args": ["--upstream", "--mib", a.mib.to_string()],
                "mcpx": {"protocol": "legacy", "callTimeoutMs": 120_000}
            },
            "small": {"command": a.mcpx, "args": ["example-server"]}
        },
        "mcpx": {"limits": {"maxFrameBytes": (a.mib + 16) << 20}}
    });
    let cfg = dir.join("mcpx.json");
    std::fs::write(&cfg, config.to_string())?;
    let mut cmd = Command::new(&a.mcpx);
    cmd.args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(&cfg)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(t) = &a.threads {
        cmd.args(["--threads", t]);
    }
    let mut child = cmd.spawn()?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let (tx, rx) = std::sync::mpsc::channel();
    // Reads the announcement, then keeps draining, so mcpx never blocks on stderr.
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("at http://127.0.0.1:").nth(1) {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                let _ = tx.send(digits.parse::<u16>().ok());
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(Some(port)) => Ok((child, port)),
        _ => {
            let _ = child.kill();
            Err("mcpx serve announced no port within 20 s".into())
        }
    }
}

async fn host(port: u16, mib: usize) -> Result<Connection, Error> {
    let mut target = Target::new(
        "gateway",
        TargetTransport::Http {
            url: format!("http://127.0.0.1:{port}/mcp"),
            headers: Vec::new(),
        },
    );
    target.limits.max_frame_bytes = (mib + 16) << 20;
    Ok(connect(&target, &EraCache::disabled()).await?)
}

fn options() -> CallOptions {
    CallOptions {
        timeout: Duration::from_secs(120),
        max_time: Duration::from_secs(120),
        ..CallOptions::default()
    }
}

/// One call of `tool`: its latency, or why it failed.
async fn call(conn: &Connection, params: &Params) -> Result<Duration, Error> {
    let t0 = Instant::now();
    let frame = conn.call("tools/call", Some(params), options()).await?;
    if frame.kind() != Kind::Result {
        return Err(format!("an error: {}", frame.as_str()).into());
    }
    Ok(t0.elapsed())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// p50 and max, in ms.
fn summary(mut lat: Vec<Duration>) -> (usize, f64, f64) {
    lat.sort_unstable();
    let n = lat.len();
    let p50 = lat.get(n / 2).copied().map(ms).unwrap_or_default();
    let max = lat.last().copied().map(ms).unwrap_or_default();
    (n, p50, max)
}

async fn measure(a: &Args, port: u16) -> Result<(), Error> {
    let small = host(port, a.mib).await?;
    let small_params =
        Params::of_value(&json!({"name": "small__test_simple_text", "arguments": {}}));
    let big_params = Arc::new(Params::of_value(
        &json!({"name": "big__big", "arguments": {}}),
    ));

    // The big caller: a thread and a runtime of its own.
    let (go_tx, mut go_rx) = tokio::sync::mpsc::channel::<()>(1);
    let (done_tx, mut done_rx) = tokio::sync::mpsc::channel::<Result<(Instant, Instant), Error>>(1);
    let mib = a.mib;
    let big_thread = std::thread::spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => return eprintln!("big_frame: no runtime: {e}"),
        };
        rt.block_on(async move {
            let big = match host(port, mib).await {
                Ok(c) => c,
                Err(e) => return drop(done_tx.send(Err(e)).await),
            };
            while go_rx.recv().await.is_some() {
                let start = Instant::now();
                let r = call(&big, &big_params).await;
                let r = r.map(|_| (start, Instant::now()));
                if done_tx.send(r).await.is_err() {
                    return;
                }
            }
        });
    });

    // Warm-up: both upstreams ready, the first calls' costs paid.
    for _ in 0..200 {
        call(&small, &small_params).await?;
    }
    println!(
        "big result {} MiB; {} rounds; mcpx serve {}",
        a.mib,
        a.rounds,
        a.threads
            .as_deref()
            .map_or("on its default (one thread)".to_owned(), |t| format!(
                "--threads {t}"
            ))
    );
    println!("round  big call ms  small before: n p50 max ms  small during: n p50 max ms");
    let mut worst = Vec::new();
    for round in 1..=a.rounds {
        let mut before = Vec::new();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(1) {
            before.push(call(&small, &small_params).await?);
        }
        go_tx.send(()).await?;
        let mut calls: Vec<(Instant, Duration)> = Vec::new();
        let (big_start, big_end) = loop {
            let s = Instant::now();
            calls.push((s, call(&small, &small_params).await?));
            if let Ok(done) = done_rx.try_recv() {
                break done?;
            }
        };
        // A small call during the big one: its interval overlaps the big call's.
        let during: Vec<Duration> = calls
            .iter()
            .filter(|(s, lat)| *s < big_end && *s + *lat > big_start)
            .map(|(_, lat)| *lat)
            .collect();
        let (bn, bp50, bmax) = summary(before);
        let (dn, dp50, dmax) = summary(during);
        worst.push(dmax);
        println!(
            "{round:>5}  {:>11.0}  {bn:>14} {bp50:>5.2} {bmax:>6.1}  {dn:>14} {dp50:>5.2} {dmax:>6.1}",
            ms(big_end - big_start)
        );
    }
    drop(go_tx);
    let _ = big_thread.join();
    worst.sort_by(f64::total_cmp);
    if let (Some(lo), Some(hi)) = (worst.first(), worst.last()) {
        println!("the largest small call during a big one: {lo:.0}–{hi:.0} ms");
    }
    small.close().await;
    Ok(())
}

/// Stops `mcpx serve` as Ctrl-C would (SIGTERM: it stops its upstreams, and a
/// profiler run in its place writes its data), or kills it after 10 s.
fn stop(gw: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &gw.id().to_string()])
        .status();
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if let Ok(Some(_)) = gw.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = gw.kill();
    let _ = gw.wait();
}

fn main() -> Result<(), Error> {
    let a = args()?;
    if a.upstream {
        return upstream(a.mib);
    }
    let dir = std::env::temp_dir().join(format!("mcpx-big-frame-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (mut gw, port) = gateway(&a, &dir)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcome = rt.block_on(measure(&a, port));
    stop(&mut gw);
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}
