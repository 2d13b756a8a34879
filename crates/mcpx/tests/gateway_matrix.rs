//! The gateway matrix: every host revision × every upstream revision, over stdio.
//!
//! Each cell runs `mcpx serve` (a real process) fronting `mcpx example-server
//! --revision <upstream>` (a real child of it) and drives it as a host speaking
//! `<host>`: `tools/list`, `tools/call` with progress, a structured-output tool where
//! the upstream has one, `resources/read`, `prompts/get`. Every frame mcpx sends the
//! host is validated against the host's schema; every frame it sends the upstream
//! (recorded through `MCPX_WIRE_LOG`) against the upstream's.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use mcpx_protocol::{Era, Revision};
use mcpx_testkit::tap::tap;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    rev: Revision,
    next_id: i64,
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mcpx-matrix-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

impl Host {
    async fn start(dir: &Path, config: &Value, rev: Revision) -> Host {
        let cfg = dir.join("mcpx.json");
        std::fs::write(&cfg, config.to_string()).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpx"))
            .args(["serve", "--config"])
            .arg(&cfg)
            .env("XDG_CACHE_HOME", dir.join("cache"))
            .env("MCPX_WIRE_LOG", dir.join("wire.jsonl"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Host {
            child,
            stdin,
            lines,
            rev,
            next_id: 1,
        }
    }

    async fn send(&mut self, v: &Value) {
        let s = self.stdin.as_mut().unwrap();
        s.write_all(v.to_string().as_bytes()).await.unwrap();
        s.write_all(b"\n").await.unwrap();
        s.flush().await.unwrap();
    }

    /// Sends a request written for the host's revision; returns the response and the
    /// notifications that came before it, all validated against the host's schema.
    async fn request(&mut self, method: &str, mut params: Value) -> (Value, Vec<Value>) {
        let id = self.next_id;
        self.next_id += 1;
        if self.rev.era() == Era::Modern {
            params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(self.rev.as_str());
            params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
        }
        self.send(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
            .await;
        let mut notes = Vec::new();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
                .await
                .unwrap_or_else(|_| panic!("{}: no answer to {method}", self.rev))
                .unwrap()
                .expect("mcpx closed stdout");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id") == Some(&json!(id)) {
                tap()
                    .validate_response(self.rev, method, &line)
                    .unwrap_or_else(|e| panic!("to the host: {e}"));
                return (v, notes);
            }
            tap()
                .validate_frame(self.rev, &line)
                .unwrap_or_else(|e| panic!("to the host: {e}"));
            notes.push(v);
        }
    }

    async fn finish(mut self) {
        drop(self.stdin.take());
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

fn result<'a>(v: &'a Value, what: &str) -> &'a Value {
    v.get("result")
        .unwrap_or_else(|| panic!("{what}: expected a result, got {v}"))
}

async fn cell(host_rev: Revision, up_rev: Revision) {
    let tag = format!("{host_rev}-{up_rev}");
    let dir = temp_dir(&tag);
    let config = json!({"mcpServers": {"up": {
        "command": env!("CARGO_BIN_EXE_mcpx"),
        "args": ["example-server", "--revision", up_rev.as_str()],
    }}});
    let mut host = Host::start(&dir, &config, host_rev).await;
    if host_rev.era() == Era::Legacy {
        let (init, _) = host
            .request(
                "initialize",
                json!({"protocolVersion": host_rev.as_str(), "capabilities": {},
                       "clientInfo": {"name": "matrix", "version": "1"}}),
            )
            .await;
        assert_eq!(
            result(&init, "initialize")["protocolVersion"],
            host_rev.as_str(),
            "{tag}"
        );
        host.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .await;
    }

    let (list, _) = host.request("tools/list", json!({})).await;
    let tools: Vec<String> = result(&list, "tools/list")["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        tools.contains(&"test_tool_with_progress".to_owned()),
        "{tag}: {tools:?}"
    );

    let (call, notes) = host
        .request(
            "tools/call",
            json!({"name": "test_tool_with_progress", "arguments": {},
                   "_meta": {"progressToken": "matrix-progress"}}),
        )
        .await;
    assert!(
        result(&call, "tools/call")["content"].is_array(),
        "{tag}: {call}"
    );
    let progress: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty(), "{tag}: no progress relayed");
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "matrix-progress")
    );

    if tools.contains(&"test_structured_content".to_owned()) {
        let (call, _) = host
            .request(
                "tools/call",
                json!({"name": "test_structured_content", "arguments": {}}),
            )
            .await;
        let r = result(&call, "structured");
        if host_rev < Revision::V2025_06_18 {
            assert!(r.get("structuredContent").is_none(), "{tag}: {r}");
        } else {
            assert!(r["structuredContent"].is_object(), "{tag}: {r}");
        }
    }

    let (read, _) = host
        .request("resources/read", json!({"uri": "test://static-text"}))
        .await;
    assert!(
        result(&read, "resources/read")["contents"][0]["text"]
            .as_str()
            .is_some(),
        "{tag}: {read}"
    );
    let (prompt, _) = host
        .request("prompts/get", json!({"name": "test_simple_prompt"}))
        .await;
    assert!(
        result(&prompt, "prompts/get")["messages"].is_array(),
        "{tag}"
    );
    host.finish().await;

    // Everything mcpx sent upstream is valid for the upstream's revision.
    let wire = std::fs::read_to_string(dir.join("wire.jsonl")).unwrap();
    assert!(wire.lines().count() >= 5, "{tag}: wire log too short");
    for line in wire.lines() {
        tap()
            .validate_frame(up_rev, line)
            .unwrap_or_else(|e| panic!("{tag}: to the upstream: {e}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_host_revision_through_every_upstream_revision() {
    for host in Revision::ALL {
        for up in Revision::ALL {
            cell(host, up).await;
        }
    }
}
