//! Issue #24 defect 6 over the wire: a `tools/call` whose params have a member name
//! that is a lone surrogate escape, `{"\udd04":1,"name":"test_simple_text",…}`, sent
//! as written to a real `mcpx serve` (fronting `mcpx example-server`) on stdio and on
//! Streamable HTTP, in both eras.
//!
//! serde_json refuses a lone surrogate in every string it decodes ("lone leading
//! surrogate in hex escape", a syntax error); only a value it skips unread (a
//! `RawValue`) may hold one. mcpx reads the names of `params` to route a call (`name`,
//! `_meta`), so it reads them as serde_json does: the request is not JSON it can read,
//! and the host gets -32700 (Parse error) with serde_json's words, to the request's id,
//! which was read (basic/index: an error response carries the request's id unless it
//! could not be read); on HTTP with 400, as for any message that does not decode. Before
//! the fix the walk of the params stopped at that name, so `name` and `_meta` after it
//! were missing: `params.name is required`, or `400 missing required _meta key`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Stdio;
use std::time::Duration;

use mcpx_protocol::{Era, Revision};
use mcpx_testkit::tap::tap;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::common;
use common::*;

/// The params as the issue has them, as raw text (a `Value` cannot hold a lone
/// surrogate); a modern host's also carry its `_meta`.
fn bad_params(rev: Revision) -> String {
    let mut params = r#"{"\udd04":1,"name":"test_simple_text","arguments":{}"#.to_owned();
    if rev.era() == Era::Modern {
        params.push_str(&format!(r#","_meta":{}"#, modern_meta(json!({}))));
    }
    params.push('}');
    params
}

fn bad_call(id: i64, rev: Revision) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{}}}"#,
        bad_params(rev)
    )
}

/// The answer to a bad call: -32700 to its id, in serde_json's words; valid for the
/// host's revision.
fn refused(rev: Revision, id: i64, line: &str) {
    tap()
        .validate_frame(rev, line)
        .unwrap_or_else(|e| panic!("{rev}: to the host: {e}\n{line}"));
    let v: Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["error"]["code"], -32700, "{rev}: {v}");
    assert_eq!(v["id"], id, "{rev}: {v}");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("lone leading surrogate in hex escape"),
        "{rev}: {v}"
    );
}

async fn on_stdio(rev: Revision) {
    let mut h = Host::start(&format!("surrogate-{rev}"), &example(rev), rev).await;
    if rev.era() == Era::Legacy {
        h.initialize(json!({})).await;
    }
    let id = h.next_id;
    h.next_id += 1;
    h.send_line(&bad_call(id, rev)).await;
    let line = h.next_line("the call with a lone surrogate").await;
    refused(rev, id, &line);
    // The same call without that member is served, on the same connection.
    h.calls_simple_text("test_simple_text").await;
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_surrogate_name_is_a_parse_error_on_stdio_legacy() {
    on_stdio(R1125).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_surrogate_name_is_a_parse_error_on_stdio_modern() {
    on_stdio(R2026).await;
}

/// `mcpx serve --http` fronting the example server (stdio).
async fn http_gateway(tag: &str) -> (Child, u16) {
    let dir = temp_dir(tag);
    let cfg = dir.join("mcpx.json");
    std::fs::write(&cfg, example(R2026).to_string()).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpx"));
    cmd.args(["serve", "--config"])
        .arg(&cfg)
        .args(["--http", "127.0.0.1:0"])
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .stdout(Stdio::null());
    start_listening(cmd).await
}

/// POSTs `body` (as written) to `/mcp` with `headers`; the status, the headers (names
/// in lower case) and the JSON-RPC messages of the answer (one JSON body, or an SSE
/// stream's `data` lines).
async fn post(port: u16, headers: &[(&str, &str)], body: &str) -> (u16, String, Vec<String>) {
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    let mut all = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut all))
        .await
        .expect("the answer did not end")
        .unwrap();
    let all = String::from_utf8(all).unwrap();
    let (head, mut rest) = all.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let head = head.to_ascii_lowercase();
    let mut body = String::new();
    if head.contains("transfer-encoding: chunked") {
        while let Some((size, after)) = rest.split_once("\r\n") {
            let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).unwrap();
            if size == 0 {
                break;
            }
            body.push_str(&after[..size]);
            rest = after[size..].strip_prefix("\r\n").unwrap_or(&after[size..]);
        }
    } else {
        body.push_str(rest);
    }
    let messages = if head.contains("content-type: text/event-stream") {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.trim().to_owned())
            .filter(|d| !d.is_empty())
            .collect()
    } else {
        vec![body]
    };
    (status, head, messages)
}

/// The headers a modern POST of `tools/call` carries.
const MODERN: [(&str, &str); 3] = [
    ("MCP-Protocol-Version", "2026-07-28"),
    ("Mcp-Method", "tools/call"),
    ("Mcp-Name", "test_simple_text"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_surrogate_name_is_a_parse_error_on_http() {
    let (_gw, port) = http_gateway("surrogate-http").await;

    // Modern (stateless): 400, -32700 to the request's id.
    let (status, _, messages) = post(port, &MODERN, &bad_call(3, R2026)).await;
    assert_eq!(status, 400, "{messages:?}");
    assert_eq!(messages.len(), 1, "{messages:?}");
    refused(R2026, 3, &messages[0]);
    // The same call without that member is served.
    let good = bad_call(4, R2026).replace(r#""\udd04":1,"#, "");
    let (status, _, messages) = post(port, &MODERN, &good).await;
    assert_eq!(status, 200, "{messages:?}");
    let last: Value = serde_json::from_str(messages.last().unwrap()).unwrap();
    assert_eq!(text(result(&last, "tools/call")), SIMPLE_TEXT, "{last}");

    // Legacy (a 2025-11-25 session): the same.
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion": R1125.as_str(), "capabilities": {},
        "clientInfo": {"name": "surrogate", "version": "1"}}});
    let (status, head, _) = post(port, &[], &init.to_string()).await;
    assert_eq!(status, 200, "{head}");
    let sid = head
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id:"))
        .unwrap()
        .trim()
        .to_owned();
    let session = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", R1125.as_str()),
    ];
    let initialized = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    let (status, _, _) = post(port, &session, &initialized.to_string()).await;
    assert_eq!(status, 202);
    let (status, _, messages) = post(port, &session, &bad_call(5, R1125)).await;
    assert_eq!(status, 400, "{messages:?}");
    assert_eq!(messages.len(), 1, "{messages:?}");
    refused(R1125, 5, &messages[0]);
    let good = bad_call(6, R1125).replace(r#""\udd04":1,"#, "");
    let (status, _, messages) = post(port, &session, &good).await;
    assert_eq!(status, 200, "{messages:?}");
    let last: Value = serde_json::from_str(messages.last().unwrap()).unwrap();
    assert_eq!(text(result(&last, "tools/call")), SIMPLE_TEXT, "{last}");
}
