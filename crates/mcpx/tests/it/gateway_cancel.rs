//! Cancellation through the gateway, per era and transport.
//!
//! * H3 / C-C4: a modern host that closes its HTTP connection mid-call has cancelled the
//!   call (2026-07-28: MUST); mcpx cancels the upstream request. A legacy host's dropped
//!   stream is not a cancellation (2025-11-25: SHOULD NOT): the upstream call runs on.
//! * C-C3: toward a 2026-07-28 Streamable HTTP upstream mcpx cancels by closing the
//!   request's stream and sends no `notifications/cancelled`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::common;
use common::start_listening;

fn dir(tag: &str) -> PathBuf {
    crate::scratch_dir(&format!("cancel-{tag}"))
}

fn mcpx(args: &[&str], dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mcpx"));
    c.args(args)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("MCPX_WIRE_LOG", dir.join("wire.jsonl"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    c
}

fn wire(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("wire.jsonl")).unwrap_or_default()
}

/// A gateway on HTTP fronting `mcpx example-server` over stdio.
async fn http_gateway(dir: &Path) -> (Child, u16) {
    let cfg = dir.join("mcpx.json");
    std::fs::write(
        &cfg,
        json!({"mcpServers": {"up": {"command": env!("CARGO_BIN_EXE_mcpx"), "args": ["example-server"]}}})
            .to_string(),
    )
    .unwrap();
    let mut cmd = mcpx(
        &[
            "serve",
            "--config",
            cfg.to_str().unwrap(),
            "--http",
            "127.0.0.1:0",
        ],
        dir,
    );
    cmd.stdout(Stdio::null());
    start_listening(cmd).await
}

fn post(port: u16, headers: &[(&str, &str)], body: &Value) -> String {
    let body = body.to_string();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&body);
    req
}

/// Sends `request` and reads its response until a line `done` accepts (within 10 s);
/// what it read, and the connection, to keep or drop.
async fn read_until(
    port: u16,
    request: &str,
    done: impl Fn(&str) -> bool,
) -> (bool, String, BufReader<TcpStream>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut r = BufReader::new(s);
    let mut seen = String::new();
    let found = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).await.unwrap() == 0 {
                return false;
            }
            seen.push_str(&line);
            if done(&line) {
                return true;
            }
        }
    })
    .await
    .unwrap_or(false);
    (found, seen, r)
}

/// Sends `request`, reads until the first SSE `data:` line (a progress notification),
/// then drops the connection mid-call.
async fn start_then_drop(port: u16, request: &str) -> String {
    let (found, seen, conn) = read_until(port, request, |l| {
        l.starts_with("data:") && l.contains("notifications/progress")
    })
    .await;
    assert!(found, "no progress before the drop:\n{seen}");
    drop(conn);
    seen
}

/// Sends `request` and reads its SSE stream up to the event holding its result.
async fn call_to_end(port: u16, request: &str) -> String {
    let (done, seen, _) = read_until(port, request, |l| {
        l.starts_with("data:") && l.contains("\"result\"")
    })
    .await;
    assert!(done, "no result:\n{seen}");
    seen
}

fn slow_call(id: i64) -> Value {
    slow_call_of(id, 30)
}

/// A call of `steps` progress steps, 100 ms each.
fn slow_call_of(id: i64, steps: u64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
        "name":"test_tool_with_progress","arguments":{"steps":steps,"delayMs":100},
        "_meta":{"progressToken":"p"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_host_closing_its_stream_cancels_the_upstream_call() {
    let d = dir("h3-modern");
    let (_gw, port) = http_gateway(&d).await;
    let mut body = slow_call(7);
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let req = post(
        port,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "test_tool_with_progress"),
        ],
        &body,
    );
    start_then_drop(port, &req).await;
    // The upstream (stdio) is told: notifications/cancelled for mcpx's request.
    let cancelled = crate::wait::until(Duration::from_secs(3), async || {
        wire(&d).contains("notifications/cancelled")
    })
    .await;
    assert!(cancelled, "no cancellation upstream:\n{}", wire(&d));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_host_dropping_its_stream_does_not_cancel() {
    let d = dir("h3-legacy");
    let (_gw, port) = http_gateway(&d).await;
    // A legacy session first.
    let init = post(
        port,
        &[],
        &json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
    );
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(init.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 8192];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]).to_string();
    let sid = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id:\n{head}"));
    drop(s);
    let headers = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    start_then_drop(port, &post(port, &headers, &slow_call_of(2, 10))).await;
    // The call runs on upstream. An equal call made after it runs to its end, so the
    // dropped one has too by then, and no notifications/cancelled went before.
    let after = call_to_end(port, &post(port, &headers, &slow_call_of(3, 10))).await;
    assert!(after.contains("\"id\":3"), "{after}");
    assert!(
        !wire(&d).contains("notifications/cancelled"),
        "a legacy disconnect cancelled the upstream call:\n{}",
        wire(&d)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_http_upstream_is_cancelled_by_closing_the_stream() {
    let d = dir("c-c3");
    // The upstream: the example server on Streamable HTTP (probed as 2026-07-28).
    let mut cmd = mcpx(&["example-server", "--http", "127.0.0.1:0"], &d);
    cmd.env_remove("MCPX_WIRE_LOG").stdout(Stdio::null());
    let (_up, up_port) = start_listening(cmd).await;
    let cfg = d.join("mcpx.json");
    std::fs::write(
        &cfg,
        json!({"mcpServers": {"up": {"type": "http", "url": format!("http://127.0.0.1:{up_port}/mcp")}}})
            .to_string(),
    )
    .unwrap();
    let mut gw = mcpx(&["serve", "--config", cfg.to_str().unwrap()], &d)
        .spawn()
        .unwrap();
    let mut stdin = gw.stdin.take().unwrap();
    let mut lines = BufReader::new(gw.stdout.take().unwrap()).lines();
    for line in [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        slow_call(2),
    ] {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    stdin.flush().await.unwrap();
    // Wait for the first progress, then cancel.
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let l = lines.next_line().await.unwrap().unwrap();
            if l.contains("notifications/progress") {
                return;
            }
        }
    })
    .await
    .expect("no progress");
    let cancel =
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}});
    stdin
        .write_all(format!("{cancel}\n").as_bytes())
        .await
        .unwrap();
    // The next request, to the same upstream, is answered; a notifications/cancelled
    // sent on the cancellation would have gone upstream before it.
    let next = json!({"jsonrpc":"2.0","id":3,"method":"tools/call",
        "params":{"name":"test_simple_text","arguments":{}}});
    stdin
        .write_all(format!("{next}\n").as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    // No response for the cancelled request; the next request is answered.
    let next = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let l = lines.next_line().await.unwrap().unwrap();
            let v: Value = serde_json::from_str(&l).unwrap();
            if v.get("id").is_some() {
                return v;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(next["id"], 3, "{next}");
    assert!(next.get("result").is_some(), "{next}");
    let w = wire(&d);
    assert_eq!(w.matches("\"tools/call\"").count(), 2, "{w}");
    assert!(
        !w.contains("notifications/cancelled"),
        "a notification was sent to a modern HTTP upstream:\n{w}"
    );
}

fn listen_request(id: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"subscriptions/listen","params":{
        "notifications":{"toolsListChanged":true},
        "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
                 "io.modelcontextprotocol/clientCapabilities":{}}}})
}

fn sigterm(child: &Child) {
    let pid = child.id().expect("running");
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

/// H1, B-C12, C-C1, A-C21, C-C15: when mcpx ends a modern host's listen on its own
/// (shutdown), on stdio it sends notifications/cancelled for the listen id and then the
/// listen's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_a_stdio_listen_with_cancelled_then_the_result() {
    let d = dir("h1-stdio");
    let cfg = d.join("mcpx.json");
    std::fs::write(
        &cfg,
        json!({"mcpServers": {"up": {"command": env!("CARGO_BIN_EXE_mcpx"), "args": ["example-server"]}}})
            .to_string(),
    )
    .unwrap();
    let mut gw = mcpx(&["serve", "--config", cfg.to_str().unwrap()], &d)
        .spawn()
        .unwrap();
    let mut stdin = gw.stdin.take().unwrap();
    let mut lines = BufReader::new(gw.stdout.take().unwrap()).lines();
    stdin
        .write_all(format!("{}\n", listen_request("L1")).as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    let next = async |lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>| {
        tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("no line")
            .unwrap()
            .expect("stdout closed")
    };
    let ack = next(&mut lines).await;
    assert!(
        ack.contains("notifications/subscriptions/acknowledged"),
        "{ack}"
    );
    sigterm(&gw);
    let cancelled = next(&mut lines).await;
    mcpx_testkit::tap::tap()
        .validate_frame(mcpx_protocol::Revision::V2026_07_28, &cancelled)
        .unwrap();
    let v: Value = serde_json::from_str(&cancelled).unwrap();
    assert_eq!(v["method"], "notifications/cancelled", "{v}");
    assert_eq!(v["params"]["requestId"], "L1");
    let result = next(&mut lines).await;
    mcpx_testkit::tap::tap()
        .validate_response(
            mcpx_protocol::Revision::V2026_07_28,
            "subscriptions/listen",
            &result,
        )
        .unwrap();
    let v: Value = serde_json::from_str(&result).unwrap();
    assert_eq!(v["id"], "L1");
    assert_eq!(
        v["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "L1"
    );
    let status = tokio::time::timeout(Duration::from_secs(10), gw.wait())
        .await
        .expect("mcpx did not exit")
        .unwrap();
    assert!(status.success(), "{status}");
}

/// H1 on Streamable HTTP: only the listen's result, then the stream closes; no
/// notifications/cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_an_http_listen_with_its_result_only() {
    let d = dir("h1-http");
    let (gw, port) = http_gateway(&d).await;
    let req = post(
        port,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "subscriptions/listen"),
        ],
        &listen_request("L2"),
    );
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    let mut r = BufReader::new(s);
    let mut seen = String::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let mut line = String::new();
            assert!(r.read_line(&mut line).await.unwrap() > 0, "{seen}");
            seen.push_str(&line);
            if line.contains("notifications/subscriptions/acknowledged") {
                return;
            }
        }
    })
    .await
    .expect("no acknowledgement");
    sigterm(&gw);
    let mut rest = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), r.read_to_string(&mut rest)).await;
    assert!(!rest.contains("notifications/cancelled"), "{rest}");
    let data: Vec<&str> = rest
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let last = data.last().unwrap_or_else(|| panic!("no result:\n{rest}"));
    mcpx_testkit::tap::tap()
        .validate_response(
            mcpx_protocol::Revision::V2026_07_28,
            "subscriptions/listen",
            last,
        )
        .unwrap();
    let v: Value = serde_json::from_str(last).unwrap();
    assert_eq!(v["id"], "L2", "{rest}");
}
