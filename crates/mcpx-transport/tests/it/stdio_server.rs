//! The stdio server, as a real child process (the `echo_server` example) driven over
//! its stdin and stdout. Every frame it writes is checked against the schema of the
//! revision the test speaks.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use mcpx_protocol::Revision;
use mcpx_testkit::tap::tap;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// `target/<profile>/examples/echo_server`, next to this test's own executable.
fn echo_server() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let path = profile_dir.join("examples").join("echo_server");
    assert!(
        path.exists(),
        "{} is missing: `cargo test` builds examples; run it for the whole crate",
        path.display()
    );
    path
}

struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Proc {
    fn start(env: &[(&str, &str)]) -> Proc {
        let mut cmd = Command::new(echo_server());
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Proc {
            child,
            stdin,
            lines,
        }
    }

    async fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    async fn send_json(&mut self, v: Value) {
        self.send(&v.to_string()).await;
    }

    /// The next line, within 5 s.
    async fn recv(&mut self) -> String {
        tokio::time::timeout(Duration::from_secs(5), self.lines.next_line())
            .await
            .expect("no line within 5 s")
            .unwrap()
            .expect("stdout closed")
    }

    async fn recv_json(&mut self) -> Value {
        serde_json::from_str(&self.recv().await).unwrap()
    }

    /// Closes stdin and waits for the exit status.
    async fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .expect("server did not exit after EOF")
            .unwrap()
    }
}

fn init(id: i64, version: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{
        "protocolVersion": version, "capabilities": {"roots": {}},
        "clientInfo": {"name":"test","version":"1"}}})
}

fn modern_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion":"2026-07-28",
           "io.modelcontextprotocol/clientCapabilities":{}})
}

#[tokio::test]
async fn legacy_handshake_then_calls_in_every_legacy_revision() {
    for rev in Revision::ALL
        .into_iter()
        .filter(|r| r.era() == mcpx_protocol::Era::Legacy)
    {
        let mut p = Proc::start(&[]);
        p.send_json(init(1, rev.as_str())).await;
        let line = p.recv().await;
        tap().validate_response(rev, "initialize", &line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["result"]["protocolVersion"], rev.as_str());
        p.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        p.send_json(json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
            "params":{"name":"echo","arguments":{"text":"hi"}}}))
            .await;
        let line = p.recv().await;
        tap().validate_response(rev, "tools/call", &line).unwrap();
        assert!(line.contains(r#""text":"hi""#), "{line}");
        assert!(p.finish().await.success());
    }
}

#[tokio::test]
async fn unsupported_initialize_version_is_counter_offered() {
    let mut p = Proc::start(&[]);
    p.send_json(init(1, "1999-01-01")).await;
    let v = p.recv_json().await;
    assert_eq!(v["result"]["protocolVersion"], "2025-11-25");
}

#[tokio::test]
async fn modern_requests_are_served_per_request_even_after_initialize() {
    let mut p = Proc::start(&[]);
    // Modern first, on a fresh process.
    p.send_json(json!({"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta": modern_meta()}}))
        .await;
    let line = p.recv().await;
    tap()
        .validate_response(Revision::V2026_07_28, "server/discover", &line)
        .unwrap();
    // A legacy client initialises the same process ...
    p.send_json(init(1, "2025-06-18")).await;
    tap()
        .validate_response(Revision::V2025_06_18, "initialize", &p.recv().await)
        .unwrap();
    // ... and a modern request is still modern.
    p.send_json(
        json!({"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta": modern_meta()}}),
    )
    .await;
    let line = p.recv().await;
    tap()
        .validate_response(Revision::V2026_07_28, "tools/list", &line)
        .unwrap();
    // ... while a plain one is legacy at the negotiated revision.
    p.send(r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#)
        .await;
    let line = p.recv().await;
    tap()
        .validate_response(Revision::V2025_06_18, "tools/list", &line)
        .unwrap();
    assert!(!line.contains("resultType"));
}

#[tokio::test]
async fn progress_precedes_the_response_and_requests_run_concurrently() {
    let mut p = Proc::start(&[]);
    p.send_json(init(1, "2025-11-25")).await;
    p.recv().await;
    p.send_json(json!({"jsonrpc":"2.0","id":"slow","method":"tools/call",
        "params":{"name":"slow","arguments":{"steps":3},"_meta":{"progressToken":"p1"}}}))
        .await;
    // A quick request overtakes the slow one.
    p.send_json(json!({"jsonrpc":"2.0","id":"quick","method":"ping"}))
        .await;
    let mut seen = Vec::new();
    loop {
        let line = p.recv().await;
        let v: Value = serde_json::from_str(&line).unwrap();
        if v.get("method").is_some() {
            tap().validate_frame(Revision::V2025_11_25, &line).unwrap();
            seen.push(format!("progress {}", v["params"]["progress"]));
        } else {
            seen.push(format!("response {}", v["id"]));
            if v["id"] == "slow" {
                tap()
                    .validate_response(Revision::V2025_11_25, "tools/call", &line)
                    .unwrap();
                break;
            }
        }
    }
    assert_eq!(
        seen,
        [
            "response \"quick\"",
            "progress 1",
            "progress 2",
            "progress 3",
            "response \"slow\""
        ]
    );
}

#[tokio::test]
async fn cancelled_request_gets_no_response() {
    let mut p = Proc::start(&[]);
    p.send_json(init(1, "2025-06-18")).await;
    p.recv().await;
    // Two equal calls of four 50 ms steps, 7 then 9; 7 is cancelled at once. Were it
    // answered, its answer would come first: the first answer is 9's.
    let slow = |id: u64| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"slow","arguments":{"steps":4}}})
    };
    p.send_json(slow(7)).await;
    // No wait: the server reads its stdin in order, so the request is in flight
    // before the cancellation after it is read.
    p.send_json(
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}),
    )
    .await;
    p.send_json(slow(9)).await;
    // basic/utilities/cancellation: the receiver SHOULD NOT respond to it.
    assert_eq!(p.recv_json().await["id"], 9);
    p.send(r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#).await;
    assert_eq!(p.recv_json().await["id"], 8);
}

#[tokio::test]
async fn server_to_client_request_round_trips_on_legacy() {
    let mut p = Proc::start(&[]);
    p.send_json(init(1, "2025-03-26")).await;
    p.recv().await;
    p.send_json(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{}}}))
        .await;
    let line = p.recv().await;
    tap().validate_frame(Revision::V2025_03_26, &line).unwrap();
    let ask: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(ask["method"], "roots/list");
    p.send_json(json!({"jsonrpc":"2.0","id":ask["id"],"result":{"roots":[{"uri":"file:///w"}]}}))
        .await;
    let line = p.recv().await;
    tap()
        .validate_response(Revision::V2025_03_26, "tools/call", &line)
        .unwrap();
    assert!(line.contains("file:///w"), "{line}");
}

/// A batched request can ask the client too (2025-03-26): the batch's requests run
/// beside the reader, which goes on reading, so the client's answer reaches the ask and
/// the batch's response follows, with a request sent after the batch answered meanwhile.
#[tokio::test]
async fn a_batched_request_can_ask_the_client() {
    let mut p = Proc::start(&[]);
    p.send_json(init(1, "2025-03-26")).await;
    p.recv().await;
    p.send(r#"[{"jsonrpc":"2.0","id":"b1","method":"tools/call","params":{"name":"ask","arguments":{}}}]"#)
        .await;
    let line = p.recv().await;
    tap().validate_frame(Revision::V2025_03_26, &line).unwrap();
    let ask: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(ask["method"], "roots/list", "{line}");
    // The reader is not held by the batch: a ping is answered while the ask waits.
    p.send(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
        .await;
    assert_eq!(p.recv_json().await["id"], "p");
    p.send_json(json!({"jsonrpc":"2.0","id":ask["id"],"result":{"roots":[{"uri":"file:///b"}]}}))
        .await;
    let line = p.recv().await;
    let v: Value = serde_json::from_str(&line).unwrap();
    tap()
        .validate_definition(Revision::V2025_03_26, "JSONRPCBatchResponse", &v)
        .unwrap();
    assert_eq!(v[0]["id"], "b1", "{line}");
    assert!(line.contains("file:///b"), "{line}");
}

#[tokio::test]
async fn modern_requests_never_get_server_requests() {
    let mut p = Proc::start(&[]);
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"roots": {}});
    p.send_json(json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
        "params":{"name":"ask","arguments":{},"_meta": meta}}))
        .await;
    let line = p.recv().await;
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        v["id"], 2,
        "the first frame is the response, not a request: {line}"
    );
    assert!(v["error"]["message"].as_str().unwrap().contains("legacy"));
    tap().validate_frame(Revision::V2026_07_28, &line).unwrap();
}

#[tokio::test]
async fn batches_only_for_2025_03_26() {
    let batch = r#"[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"b","method":"tools/list"}]"#;
    let mut p = Proc::start(&[]);
    p.send_json(init(1, "2025-03-26")).await;
    p.recv().await;
    p.send(batch).await;
    let line = p.recv().await;
    let v: Value = serde_json::from_str(&line).unwrap();
    let ids: Vec<&Value> = v.as_array().unwrap().iter().map(|r| &r["id"]).collect();
    assert_eq!(ids, [&json!("a"), &json!("b")]);
    tap()
        .validate_definition(Revision::V2025_03_26, "JSONRPCBatchResponse", &v)
        .unwrap();

    let mut p = Proc::start(&[]);
    p.send_json(init(1, "2025-06-18")).await;
    p.recv().await;
    p.send(batch).await;
    let v = p.recv_json().await;
    assert_eq!(v["error"]["code"], -32600);
    assert!(v.get("id").is_none());
}

/// The bad-input table: each line gets its documented error, and the server goes on.
#[tokio::test]
async fn bad_input_gets_clear_errors_and_the_server_goes_on() {
    let mut p = Proc::start(&[]);
    p.send_json(init(1, "2025-11-25")).await;
    p.recv().await;
    let cases: [(&str, i64, Option<Value>); 7] = [
        ("{not json", -32700, None),
        (
            r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#,
            -32600,
            Some(json!(3)),
        ),
        (
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            -32600,
            None,
        ),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":7}"#,
            -32600,
            Some(json!(4)),
        ),
        (
            r#"{"jsonrpc":"2.0","id":5,"method":"server/discover"}"#,
            -32601,
            Some(json!(5)),
        ),
        (
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{}}}"#,
            -32602,
            Some(json!(6)),
        ),
        ("\u{0}\u{1}binary", -32700, None),
    ];
    for (line, code, id) in cases {
        p.send(line).await;
        let out = p.recv().await;
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["error"]["code"], code, "{line} -> {out}");
        assert_eq!(v.get("id"), id.as_ref(), "{line} -> {out}");
        tap().validate_frame(Revision::V2025_11_25, &out).unwrap();
    }
    // Deep nesting and an over-long line (limit lowered for the test).
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"ping","params":{{"a":{}1{}}}}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    p.send(&deep).await;
    let v = p.recv_json().await;
    assert_eq!(v["error"]["code"], -32600);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nests deeper")
    );
    p.send(r#"{"jsonrpc":"2.0","id":10,"method":"ping"}"#).await;
    assert_eq!(p.recv_json().await["id"], 10);
    assert!(p.finish().await.success());
}

#[tokio::test]
async fn over_long_line_is_refused_naming_the_limit() {
    let mut p = Proc::start(&[("ECHO_MAX_FRAME_BYTES", "1024")]);
    let long = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(5000)
    );
    p.send(&long).await;
    let v = p.recv_json().await;
    assert_eq!(v["error"]["code"], -32600);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limit of 1024 bytes"),
        "{v}"
    );
    p.send(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#).await;
    // ping before initialize is legacy (basic/lifecycle allows pings first).
    assert_eq!(p.recv_json().await["id"], 2);
}

#[tokio::test]
async fn eof_drains_in_flight_requests() {
    let mut p = Proc::start(&[]);
    p.send_json(init(1, "2025-06-18")).await;
    p.recv().await;
    p.send_json(json!({"jsonrpc":"2.0","id":"s","method":"tools/call",
        "params":{"name":"slow","arguments":{"steps":4}}}))
        .await;
    drop(p.stdin.take());
    // The response still arrives after EOF, then the process exits cleanly.
    let v = p.recv_json().await;
    assert_eq!(v["id"], "s");
    assert!(
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("done")
    );
    assert!(p.finish().await.success());
}
