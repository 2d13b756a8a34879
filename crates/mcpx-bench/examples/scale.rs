//! How mcpx's cost grows with the work (issue #26). Run by `scripts/bench.sh scale`.
//!
//! ```text
//! scale [--mcpx PATH] [--smoke] [--out FILE] [--only start,catalogs,payloads,concurrency]
//! scale --upstream [--tools N] [--http] [--trigger FILE]   (the test upstream)
//! ```
//!
//! Everything runs on 127.0.0.1, `mcpx serve --http` on its default (one thread). Items:
//!
//! * **start**: from spawning `mcpx serve` with N stdio upstreams (`mcpx
//!   example-server`) to a host's first complete `tools/list`, against N example
//!   servers spawned directly, in parallel, each `initialize`d and listed;
//! * **memory**: mcpx's RSS with 50 idle stdio upstreams; the RSS growth per idle legacy
//!   Streamable HTTP session (`initialize`, `notifications/initialized`, connection
//!   closed) and per open GET SSE stream on those sessions (each on its own connection,
//!   so a stream's figure includes its connection);
//! * **catalogs**: a full paginated `tools/list` of 100 upstreams × 100 tools (this
//!   program's `--upstream` role) through mcpx; and mcpx's CPU (schedstat) for one
//!   upstream's `notifications/tools/list_changed` (2,000 tools of its own, the list
//!   changed each time) with 0, 10 and 50 other upstreams of 100 tools: the re-list and
//!   the merged catalog. The CPU is counted over one second after the notification,
//!   minus that of an idle second;
//! * **payloads**: a 10 and a 60 MiB result (tool `big`) from the upstream over HTTP and
//!   over stdio, through mcpx (its host side HTTP) and straight from the upstream; mcpx's
//!   peak RSS (VmHWM; one gateway per row); a host calling another upstream's small tool
//!   back to back meanwhile, and its p99 during big calls against that before them;
//! * **concurrency**: rounds of 1,000 calls at once from one 2026-07-28 host to one stdio
//!   upstream through mcpx: calls/s, p50, p99, and calls lost (any error).
//!
//! `--smoke`: small sizes, a few seconds; exit status 1 only when something broke (a
//! call lost, an error), never on a figure. The tables are printed, and written to
//! `--out` when given.
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read as _, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mcpx_bench::{cpu_ns, peak_rss_kib, rss_kib};
use mcpx_client::{
    CallOptions, Connection, EraCache, ProtocolPreference, Target, TargetTransport, connect,
};
use mcpx_protocol::Params;
use mcpx_protocol::jsonrpc::Kind;
use parking_lot::Mutex;
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error + Send + Sync>;

// ---------------------------------------------------------------------------------------
// The test upstream.

/// One answer of the test upstream to `msg`, or `None` for a notification.
fn answer(msg: &Value, tools: usize, generation: u64) -> Option<String> {
    let id = msg.get("id")?;
    let method = msg["method"].as_str().unwrap_or_default();
    let result = match method {
        "initialize" => json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "scale", "version": "1"}}),
        "tools/list" => {
            let mut list = Vec::with_capacity(tools + 1);
            list.push(json!({"name": "big", "description": "a text of `mib` MiB",
                "inputSchema": {"type": "object", "properties": {"mib": {"type": "number"}}}}));
            for i in 0..tools {
                list.push(json!({"name": format!("tool_{i:05}"),
                    "description": format!("tool {i}, generation {generation}"),
                    "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}));
            }
            json!({"tools": list})
        }
        "tools/call" => {
            let mib = msg["params"]["arguments"]["mib"].as_u64().unwrap_or(0) as usize;
            let text = "x".repeat(mib << 20);
            let head = json!({"jsonrpc": "2.0", "id": id}).to_string();
            let head = head.strip_suffix('}').unwrap_or(&head);
            return Some(format!(
                "{head},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}}}"
            ));
        }
        "ping" => json!({}),
        _ => {
            return Some(
                json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "no such method"}})
                .to_string(),
            );
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string())
}

struct UpArgs {
    tools: usize,
    http: bool,
    trigger: Option<PathBuf>,
}

/// The stdio role. With `--trigger FILE`, it listens on a port of 127.0.0.1 (written to
/// FILE) and each byte received there changes its tool list and sends
/// `notifications/tools/list_changed`.
fn upstream_stdio(a: &UpArgs) -> Result<(), Error> {
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let generation = Arc::new(AtomicU64::new(0));
    if let Some(file) = &a.trigger {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std::fs::write(file, listener.local_addr()?.port().to_string())?;
        let (out, generation) = (out.clone(), generation.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut byte = [0u8; 1];
                while matches!(stream.read(&mut byte), Ok(1)) {
                    generation.fetch_add(1, Ordering::SeqCst);
                    let mut o = out.lock();
                    let _ = writeln!(
                        o,
                        "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}}"
                    );
                    let _ = o.flush();
                }
            }
        });
    }
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if let Some(reply) = answer(&msg, a.tools, generation.load(Ordering::SeqCst)) {
            let mut o = out.lock();
            writeln!(o, "{reply}")?;
            o.flush()?;
        }
    }
    Ok(())
}

/// The HTTP role: a sessionless 2025-06-18 Streamable HTTP server answering JSON, its
/// port printed on stdout.
fn upstream_http(a: &UpArgs) -> Result<(), Error> {
    use http_body_util::{BodyExt, Full};
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper::{Method, Request, Response, StatusCode};
    use hyper_util::rt::TokioIo;

    let tools = a.tools;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("PORT {}", listener.local_addr()?.port());
        std::io::stdout().flush()?;
        loop {
            let (tcp, _) = listener.accept().await?;
            let _ = tcp.set_nodelay(true);
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<hyper::body::Incoming>| async move {
                    let reply = |status: StatusCode, body: String| {
                        Response::builder()
                            .status(status)
                            .header("content-type", "application/json")
                            .body(Full::new(bytes::Bytes::from(body)))
                    };
                    if req.method() != Method::POST {
                        return reply(StatusCode::METHOD_NOT_ALLOWED, String::new());
                    }
                    let body = match req.into_body().collect().await {
                        Ok(b) => b.to_bytes(),
                        Err(_) => return reply(StatusCode::BAD_REQUEST, String::new()),
                    };
                    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
                        return reply(StatusCode::BAD_REQUEST, String::new());
                    };
                    match answer(&msg, tools, 0) {
                        Some(text) => reply(StatusCode::OK, text),
                        None => reply(StatusCode::ACCEPTED, String::new()),
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
        }
    })
}

// ---------------------------------------------------------------------------------------
// The gateway and hosts.

struct Gateway {
    child: Child,
    port: u16,
    pid: u32,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16, Error> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `mcpx serve --http 127.0.0.1:PORT` on `servers` (an `mcpServers` object) and the
/// top-level `mcpx` block `global`, and the instant it was spawned. It is not waited
/// for: the caller connects when it likes.
fn gateway(
    mcpx: &Path,
    dir: &Path,
    servers: Value,
    global: Value,
) -> Result<(Gateway, Instant), Error> {
    let cfg = dir.join(format!("mcpx-{}.json", free_port()?));
    std::fs::write(
        &cfg,
        json!({"mcpServers": servers, "mcpx": global}).to_string(),
    )?;
    let port = free_port()?;
    let t0 = Instant::now();
    let mut child = Command::new(mcpx)
        .args(["serve", "--http", &format!("127.0.0.1:{port}"), "--config"])
        .arg(&cfg)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(stderr) = child.stderr.take() {
        std::thread::spawn(move || for _ in BufReader::new(stderr).lines() {});
    }
    let pid = child.id();
    Ok((Gateway { child, port, pid }, t0))
}

fn http_target(url: String, era: ProtocolPreference) -> Target {
    let mut t = Target::new(
        "gateway",
        TargetTransport::Http {
            url,
            headers: vec![],
        },
    );
    t.preference = era;
    t.limits.max_frame_bytes = 128 << 20;
    t
}

/// A host connection to the gateway, retried until its listener is up.
async fn host(port: u16, era: ProtocolPreference) -> Result<Connection, Error> {
    let target = http_target(format!("http://127.0.0.1:{port}/mcp"), era);
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        match connect(&target, &EraCache::disabled()).await {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() > until => return Err(e.into()),
            Err(_) => tokio::time::sleep(Duration::from_millis(2)).await,
        }
    }
}

fn stdio_target(command: &Path, args: &[&str]) -> Target {
    let mut t = Target::new(
        "direct",
        TargetTransport::Stdio {
            command: command.display().to_string(),
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            env: vec![],
            cwd: None,
        },
    );
    t.preference = ProtocolPreference::Legacy;
    t.limits.max_frame_bytes = 128 << 20;
    t
}

fn opts() -> CallOptions {
    CallOptions {
        timeout: Duration::from_secs(120),
        max_time: Duration::from_secs(120),
        ..CallOptions::default()
    }
}

async fn tool_count(conn: &Connection) -> Result<usize, Error> {
    Ok(conn
        .list_all("tools/list", "tools", opts(), 100_000)
        .await?
        .len())
}

/// Calls `name` with `arguments`: its latency, or why it failed.
async fn call(conn: &Connection, name: &str, arguments: Value) -> Result<Duration, Error> {
    let params = Params::of_value(&json!({"name": name, "arguments": arguments}));
    let t0 = Instant::now();
    let frame = conn.call("tools/call", Some(&params), opts()).await?;
    if frame.kind() != Kind::Result || frame.as_str().contains("\"isError\":true") {
        return Err(format!(
            "{name}: {}",
            &frame.as_str()[..frame.as_str().len().min(300)]
        )
        .into());
    }
    Ok(t0.elapsed())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    ms(sorted[i])
}

fn verdict(holds: bool) -> &'static str {
    if holds { "yes" } else { "**no**" }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

struct Run {
    mcpx: PathBuf,
    me: PathBuf,
    dir: PathBuf,
    smoke: bool,
    out: String,
    broken: Vec<String>,
}

impl Run {
    fn table(&mut self, text: &str) {
        print!("{text}");
        let _ = std::io::stdout().flush();
        self.out.push_str(text);
    }

    fn example_servers(&self, n: usize) -> Value {
        let mut s = serde_json::Map::new();
        for i in 0..n {
            s.insert(
                format!("e{i}"),
                json!({"command": self.mcpx, "args": ["example-server"]}),
            );
        }
        Value::Object(s)
    }

    fn scale_upstream(&self, tools: usize, trigger: Option<&Path>) -> Value {
        let mut args = vec![
            json!("--upstream"),
            json!("--tools"),
            json!(tools.to_string()),
        ];
        if let Some(t) = trigger {
            args.push(json!("--trigger"));
            args.push(json!(t));
        }
        json!({"command": self.me, "args": args, "mcpx": {"protocol": "legacy"}})
    }
}

// ---------------------------------------------------------------------------------------
// The items.

/// Start with 1, 10, 50 upstreams; and RSS with the largest count idle.
async fn start(r: &mut Run) -> Result<(), Error> {
    let counts: &[usize] = if r.smoke { &[1, 5] } else { &[1, 10, 50] };
    let rounds = if r.smoke { 1 } else { 3 };
    let mut t = String::from(
        "\n### Start: spawn to a host's first complete `tools/list`\n\n\
         | upstreams | direct, all in parallel (ms) | through mcpx (ms) | target: ≤ direct + 50 ms | holds |\n\
         |---:|---:|---:|---:|---|\n",
    );
    let mut idle = None;
    for &n in counts {
        let (mut direct, mut through) = (Vec::new(), Vec::new());
        let mut per_server = 0;
        for _ in 0..rounds {
            // Direct: n example servers, started and listed in parallel.
            let t0 = Instant::now();
            let mut tasks = Vec::new();
            for _ in 0..n {
                let target = stdio_target(&r.mcpx, &["example-server"]);
                tasks.push(tokio::spawn(async move {
                    let c = connect(&target, &EraCache::disabled()).await?;
                    let k = tool_count(&c).await?;
                    Ok::<_, Error>((c, k))
                }));
            }
            let mut conns = Vec::new();
            for task in tasks {
                let (c, k) = task.await??;
                per_server = k;
                conns.push(c);
            }
            direct.push(ms(t0.elapsed()));
            for c in conns {
                c.close().await;
            }
            // Through mcpx.
            let (gw, t0) = gateway(&r.mcpx, &r.dir, r.example_servers(n), json!({}))?;
            let conn = host(gw.port, ProtocolPreference::Legacy).await?;
            let until = Instant::now() + Duration::from_secs(30);
            loop {
                let k = tool_count(&conn).await?;
                if k >= n * per_server {
                    break;
                }
                if Instant::now() > until {
                    return Err(format!("start: {k} of {} tools after 30 s", n * per_server).into());
                }
            }
            through.push(ms(t0.elapsed()));
            conn.close().await;
            if n == *counts.last().unwrap_or(&0) && idle.is_none() {
                tokio::time::sleep(Duration::from_secs(2)).await;
                idle = rss_kib(gw.pid);
            }
        }
        let (d, g) = (median(direct), median(through));
        let _ = writeln!(
            t,
            "| {n} | {d:.0} | {g:.0} | {:.0} | {} |",
            d + 50.0,
            verdict(g <= d + 50.0)
        );
    }
    r.table(&t);
    let n = counts.last().copied().unwrap_or(0);
    let idle = idle.map(mib).unwrap_or(f64::NAN);
    let mut t =
        String::from("\n### Memory\n\n| what | figure | target | holds |\n|---|---:|---:|---|\n");
    let _ = writeln!(
        t,
        "| RSS of mcpx, {n} idle stdio upstreams | {idle:.1} MiB | ≤ 20 MiB | {} |",
        verdict(idle <= 20.0)
    );
    sessions(r, &mut t).await?;
    r.table(&t);
    Ok(())
}

/// One HTTP/1.1 request on a connection of its own, read to its end.
fn post(port: u16, body: &str, session: Option<&str>) -> Result<(String, String), Error> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    let sid = session.map_or(String::new(), |s| format!("Mcp-Session-Id: {s}\r\n"));
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n\
         {sid}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Ok((head.to_owned(), rest.to_owned()))
}

fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_owned())
    })
}

/// RSS per idle legacy session and per open GET stream.
async fn sessions(r: &mut Run, t: &mut String) -> Result<(), Error> {
    let n = if r.smoke { 50 } else { 1000 };
    let (gw, _) = gateway(&r.mcpx, &r.dir, r.example_servers(1), json!({}))?;
    let conn = host(gw.port, ProtocolPreference::Legacy).await?;
    tool_count(&conn).await?;
    conn.close().await;
    let port = gw.port;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "scale", "version": "1"}}})
    .to_string();
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    // A few sessions first, so that what is allocated once is not counted.
    let open = |count: usize| -> Result<Vec<String>, Error> {
        let mut ids = Vec::new();
        for _ in 0..count {
            let (head, _) = post(port, &init, None)?;
            let sid = header(&head, "mcp-session-id").ok_or("initialize: no session id")?;
            let (head, _) = post(port, initialized, Some(&sid))?;
            if !head.contains(" 202") {
                return Err(format!("notifications/initialized: {head}").into());
            }
            ids.push(sid);
        }
        Ok(ids)
    };
    let _warm = open(20)?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(gw.pid).unwrap_or(0);
    let ids = tokio::task::block_in_place(|| open(n))?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kib(gw.pid).unwrap_or(0);
    let per_session = (after.saturating_sub(before)) as f64 * 1024.0 / n as f64;
    // A GET stream on each, each on its own connection, kept open.
    let mut streams = Vec::new();
    for sid in &ids {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
        write!(
            s,
            "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\
             MCP-Protocol-Version: 2025-06-18\r\nMcp-Session-Id: {sid}\r\n\r\n"
        )?;
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if s.read(&mut byte)? == 0 {
                return Err("GET stream closed before its head".into());
            }
            head.push(byte[0]);
        }
        if !head.starts_with(b"HTTP/1.1 200") {
            return Err(format!("GET stream: {}", String::from_utf8_lossy(&head)).into());
        }
        streams.push(s);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let with_streams = rss_kib(gw.pid).unwrap_or(0);
    let per_stream = (with_streams.saturating_sub(after)) as f64 * 1024.0 / n as f64;
    let _ = writeln!(
        t,
        "| RSS per idle legacy session ({n} sessions) | {:.1} KiB | ≤ 4 KiB | {} |",
        per_session / 1024.0,
        verdict(per_session <= 4096.0)
    );
    let _ = writeln!(
        t,
        "| RSS per open GET SSE stream, its connection included ({n}) | {:.1} KiB | ≤ 16 KiB | {} |",
        per_stream / 1024.0,
        verdict(per_stream <= 16384.0)
    );
    drop(streams);
    Ok(())
}

/// The full paginated catalog, and the CPU of one upstream's list_changed.
async fn catalogs(r: &mut Run) -> Result<(), Error> {
    let (ups, per) = if r.smoke { (10, 20) } else { (100, 100) };
    let mut servers = serde_json::Map::new();
    for i in 0..ups {
        servers.insert(format!("s{i}"), r.scale_upstream(per, None));
    }
    let (gw, _) = gateway(&r.mcpx, &r.dir, Value::Object(servers), json!({}))?;
    let conn = host(gw.port, ProtocolPreference::Legacy).await?;
    let want = ups * (per + 1);
    let until = Instant::now() + Duration::from_secs(60);
    while tool_count(&conn).await? < want {
        if Instant::now() > until {
            return Err("catalogs: the catalog never filled".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (mut times, mut cpus) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let c0 = cpu_ns(gw.pid).unwrap_or(0);
        let t0 = Instant::now();
        let k = tool_count(&conn).await?;
        times.push(ms(t0.elapsed()));
        cpus.push((cpu_ns(gw.pid).unwrap_or(0).saturating_sub(c0)) as f64 / 1e6);
        if k != want {
            r.broken.push(format!("catalog: {k} tools of {want}"));
        }
    }
    let rss = rss_kib(gw.pid).map(mib).unwrap_or(f64::NAN);
    conn.close().await;
    drop(gw);
    let mut t = format!(
        "\n### Catalogs\n\n| what | time (ms) | mcpx CPU (ms) | mcpx RSS (MiB) |\n|---|---:|---:|---:|\n\
         | full `tools/list`, {ups} upstreams × {per} tools, pages of 100 | {:.0} | {:.0} | {rss:.1} |\n",
        median(times),
        median(cpus)
    );
    // list_changed.
    let own = if r.smoke { 200 } else { 2000 };
    let others: &[usize] = if r.smoke { &[0, 2] } else { &[0, 10, 50] };
    let _ = write!(
        t,
        "\n| one upstream's `list_changed`, {own} tools of its own | mcpx CPU (ms) | target: proportional to that upstream |\n|---|---:|---|\n"
    );
    let mut first = None;
    for &k in others {
        let trigger = r.dir.join(format!("trigger-{k}"));
        let _ = std::fs::remove_file(&trigger);
        let mut servers = serde_json::Map::new();
        servers.insert("own".into(), r.scale_upstream(own, Some(&trigger)));
        for i in 0..k {
            servers.insert(format!("o{i}"), r.scale_upstream(100, None));
        }
        let (gw, _) = gateway(&r.mcpx, &r.dir, Value::Object(servers), json!({}))?;
        let conn = host(gw.port, ProtocolPreference::Legacy).await?;
        let want = own + 1 + k * 101;
        let until = Instant::now() + Duration::from_secs(60);
        while tool_count(&conn).await? < want {
            if Instant::now() > until {
                return Err("list_changed: the catalog never filled".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let port: u16 = std::fs::read_to_string(&trigger)?.trim().parse()?;
        let mut fire = std::net::TcpStream::connect(("127.0.0.1", port))?;
        let mut cpus = Vec::new();
        let rounds = if r.smoke { 2 } else { 5 };
        for g in 1..=rounds {
            let idle = idle_cpu(gw.pid).await;
            let c0 = cpu_ns(gw.pid).unwrap_or(0);
            fire.write_all(b"!")?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let used = cpu_ns(gw.pid).unwrap_or(0).saturating_sub(c0);
            cpus.push(used.saturating_sub(idle) as f64 / 1e6);
            // The change reached the catalog (listed outside the measured second).
            let items = conn
                .list_all("tools/list", "tools", opts(), 100_000)
                .await?;
            let seen = items.iter().any(|i| {
                i["description"]
                    .as_str()
                    .is_some_and(|d| d.ends_with(&format!("generation {g}")))
            });
            if !seen {
                r.broken.push(format!(
                    "list_changed with {k} others: generation {g} not listed"
                ));
            }
        }
        let c = median(cpus);
        let base = *first.get_or_insert(c);
        let _ = writeln!(
            t,
            "| with {k} other upstreams of 100 tools | {c:.1} | {:.2}× the figure with 0 |",
            c / base
        );
        conn.close().await;
    }
    r.table(&t);
    Ok(())
}

/// The CPU `pid` uses in one second left alone, in ns.
async fn idle_cpu(pid: u32) -> u64 {
    let c0 = cpu_ns(pid).unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    cpu_ns(pid).unwrap_or(0).saturating_sub(c0)
}

/// One payload row: the big result straight from the upstream and through mcpx.
async fn payload(r: &mut Run, http: bool, size: usize, t: &mut String) -> Result<(), Error> {
    let rounds = if r.smoke { 1 } else { 3 };
    // The upstream: over HTTP one process for both paths; over stdio, spawned anew.
    let mut up_child = None;
    let big = if http {
        let mut child = Command::new(&r.me)
            .args(["--upstream", "--http", "--tools", "1"])
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().ok_or("no stdout")?).read_line(&mut line)?;
        let port: u16 = line
            .trim()
            .strip_prefix("PORT ")
            .ok_or("no port")?
            .parse()?;
        up_child = Some(child);
        json!({"url": format!("http://127.0.0.1:{port}/mcp"), "mcpx": {"protocol": "legacy", "callTimeoutMs": 120_000}})
    } else {
        json!({"command": r.me, "args": ["--upstream", "--tools", "1"],
               "mcpx": {"protocol": "legacy", "callTimeoutMs": 120_000}})
    };
    // Direct.
    let target = if http {
        http_target(
            big["url"].as_str().unwrap_or_default().to_owned(),
            ProtocolPreference::Legacy,
        )
    } else {
        stdio_target(&r.me, &["--upstream", "--tools", "1"])
    };
    let direct_conn = connect(&target, &EraCache::disabled()).await?;
    let mut direct = Vec::new();
    call(&direct_conn, "big", json!({"mib": 1})).await?;
    for _ in 0..rounds {
        direct.push(ms(call(&direct_conn, "big", json!({"mib": size})).await?));
    }
    direct_conn.close().await;
    // Through mcpx.
    let servers = json!({"big": big, "small": {"command": r.mcpx, "args": ["example-server"]}});
    let (gw, _) = gateway(&r.mcpx, &r.dir, servers, json!({}))?;
    let small = host(gw.port, ProtocolPreference::Legacy).await?;
    let until = Instant::now() + Duration::from_secs(30);
    while tool_count(&small).await? < 2 {
        if Instant::now() > until {
            return Err("payloads: the catalog never filled".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for _ in 0..200 {
        call(&small, "small__test_simple_text", json!({})).await?;
    }
    let idle = rss_kib(gw.pid).map(mib).unwrap_or(f64::NAN);
    let port = gw.port;
    let (go_tx, mut go_rx) = tokio::sync::mpsc::channel::<()>(1);
    let (done_tx, mut done_rx) = tokio::sync::mpsc::channel::<Result<(Instant, Instant), Error>>(1);
    let big_thread = std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async move {
            let conn = match host(port, ProtocolPreference::Legacy).await {
                Ok(c) => c,
                Err(e) => return drop(done_tx.send(Err(e)).await),
            };
            let _ = call(&conn, "big__big", json!({"mib": 1})).await;
            while go_rx.recv().await.is_some() {
                let s = Instant::now();
                let r = call(&conn, "big__big", json!({"mib": size})).await;
                if done_tx.send(r.map(|_| (s, Instant::now()))).await.is_err() {
                    return;
                }
            }
        });
    });
    let (mut before, mut during, mut through) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(if r.smoke { 200 } else { 1000 }) {
            before.push(call(&small, "small__test_simple_text", json!({})).await?);
        }
        go_tx.send(()).await?;
        let mut calls = Vec::new();
        let (s, e) = loop {
            let s = Instant::now();
            calls.push((s, call(&small, "small__test_simple_text", json!({})).await?));
            if let Ok(done) = done_rx.try_recv() {
                break done?;
            }
        };
        through.push(ms(e - s));
        during.extend(
            calls
                .iter()
                .filter(|(cs, lat)| *cs < e && *cs + *lat > s)
                .map(|(_, lat)| *lat),
        );
    }
    drop(go_tx);
    let _ = big_thread.join();
    let hwm = peak_rss_kib(gw.pid).map(mib).unwrap_or(f64::NAN);
    small.close().await;
    drop(gw);
    if let Some(mut c) = up_child {
        let _ = c.kill();
        let _ = c.wait();
    }
    before.sort_unstable();
    during.sort_unstable();
    let (d, g) = (median(direct), median(through));
    let (p99b, p99d) = (pct(&before, 0.99), pct(&during, 0.99));
    let _ = writeln!(
        t,
        "| HTTP → {} | {size} | {d:.0} | {g:.0} | {:.2}× {} | {hwm:.0} MiB, {:.0} over idle = {:.1}× {} | {p99b:.1} → {p99d:.1} {} |",
        if http { "HTTP" } else { "stdio" },
        g / d,
        verdict(g <= 1.3 * d),
        hwm - idle,
        (hwm - idle) / size as f64,
        verdict(hwm - idle <= 3.0 * size as f64),
        verdict(p99d - p99b <= 20.0)
    );
    Ok(())
}

async fn payloads(r: &mut Run) -> Result<(), Error> {
    let sizes: &[usize] = if r.smoke { &[1, 4] } else { &[10, 60] };
    let mut t = String::from(
        "\n### Payloads: one big result, a small call to another upstream running meanwhile\n\n\
         | path | MiB | direct (ms) | mcpx (ms) | mcpx/direct, ≤ 1.3× | mcpx VmHWM; over idle ≤ 3× | small call p99 before → during (ms), ≤ +20 |\n\
         |---|---:|---:|---:|---|---|---|\n",
    );
    for http in [true, false] {
        for &size in sizes {
            payload(r, http, size, &mut t).await?;
        }
    }
    r.table(&t);
    Ok(())
}

/// Rounds of N calls at once to one stdio upstream.
async fn concurrency(r: &mut Run) -> Result<(), Error> {
    let (n, rounds) = if r.smoke { (100, 2) } else { (1000, 5) };
    let (gw, _) = gateway(&r.mcpx, &r.dir, r.example_servers(1), json!({}))?;
    let conn = Arc::new(host(gw.port, ProtocolPreference::Modern).await?);
    let until = Instant::now() + Duration::from_secs(30);
    while tool_count(&conn).await? == 0 {
        if Instant::now() > until {
            return Err("concurrency: no tools after 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for _ in 0..100 {
        call(&conn, "test_simple_text", json!({})).await?;
    }
    let (mut lat, mut lost, mut first_error) = (Vec::new(), 0usize, None);
    let t0 = Instant::now();
    for _ in 0..rounds {
        let mut tasks = Vec::with_capacity(n);
        for _ in 0..n {
            let conn = conn.clone();
            tasks.push(tokio::spawn(async move {
                call(&conn, "test_simple_text", json!({})).await
            }));
        }
        for task in tasks {
            match task.await {
                Ok(Ok(d)) => lat.push(d),
                Ok(Err(e)) => {
                    lost += 1;
                    first_error.get_or_insert(e.to_string());
                }
                Err(e) => {
                    lost += 1;
                    first_error.get_or_insert(e.to_string());
                }
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    lat.sort_unstable();
    if let Some(e) = &first_error {
        r.broken
            .push(format!("concurrency: {lost} calls lost; the first: {e}"));
    }
    let t = format!(
        "\n### Concurrency: {rounds} rounds of {n} calls at once, one stdio upstream\n\n\
         | calls/s | p50 (ms) | p99 (ms) | lost, target 0 | holds |\n|---:|---:|---:|---:|---|\n\
         | {:.0} | {:.1} | {:.1} | {lost} | {} |\n",
        lat.len() as f64 / secs,
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        verdict(lost == 0)
    );
    drop(gw);
    r.table(&t);
    Ok(())
}

fn main() -> Result<(), Error> {
    let mut it = std::env::args().skip(1).peekable();
    let mut mcpx = std::env::current_exe()?
        .parent()
        .and_then(|examples| examples.parent())
        .map(|dir| dir.join("mcpx"))
        .unwrap_or_else(|| PathBuf::from("mcpx"));
    let (mut smoke, mut out, mut up, mut tools, mut http, mut trigger) =
        (false, None, false, 100, false, None);
    let mut only: Option<String> = None;
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--mcpx" => mcpx = PathBuf::from(value()?),
            "--smoke" => smoke = true,
            "--only" => only = Some(value()?),
            "--out" => out = Some(PathBuf::from(value()?)),
            "--upstream" => up = true,
            "--tools" => tools = value()?.parse()?,
            "--http" => http = true,
            "--trigger" => trigger = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if up {
        let a = UpArgs {
            tools,
            http,
            trigger,
        };
        return if a.http {
            upstream_http(&a)
        } else {
            upstream_stdio(&a)
        };
    }
    let dir = std::env::temp_dir().join(format!("mcpx-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut r = Run {
        mcpx,
        me: std::env::current_exe()?,
        dir: dir.clone(),
        smoke,
        out: String::new(),
        broken: Vec::new(),
    };
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    r.table(&format!(
        "## scale{} — load average before: {}\n",
        if smoke { " --smoke" } else { "" },
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    ));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let outcome = rt.block_on(async {
        let on = |item: &str| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|x| x == item))
        };
        if on("start") {
            start(&mut r).await?;
        }
        if on("catalogs") {
            catalogs(&mut r).await?;
        }
        if on("payloads") {
            payloads(&mut r).await?;
        }
        if on("concurrency") {
            concurrency(&mut r).await?;
        }
        Ok::<_, Error>(())
    });
    if let Some(path) = out {
        std::fs::write(path, &r.out)?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    outcome?;
    if !r.broken.is_empty() {
        for b in &r.broken {
            eprintln!("scale: broken: {b}");
        }
        std::process::exit(1);
    }
    Ok(())
}
