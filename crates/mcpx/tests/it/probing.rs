//! How `mcpx serve` finds an upstream's era, seen on the wire (`MCPX_WIRE_LOG`):
//! register D-C10 (discover first; a cached legacy era goes straight to initialize) and
//! A-C6 (a counter-offer mcpx cannot speak ends the connection).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

/// A legacy stdio upstream answering `initialize` with `version`, discover with -32601,
/// and `tools/list` with one tool.
fn upstream(version: &str) -> Value {
    let script = format!(
        r#"out() {{ printf '%s\n' "$1"; }}
while IFS= read -r line; do
  id=$(printf '%s' "$line" | grep -o '"id":[0-9][0-9]*' | head -n 1 | cut -d: -f2)
  [ -z "$id" ] && continue
  case "$line" in
    *'"method":"server/discover"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"error":{{"code":-32601,"message":"Method not found"}}}}' ;;
    *'"method":"initialize"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"protocolVersion":"{version}","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"fake","version":"1"}}}}}}' ;;
    *'"method":"tools/list"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"tools":[{{"name":"t","inputSchema":{{"type":"object"}}}}]}}}}' ;;
    *)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{}}}}' ;;
  esac
done
"#
    );
    json!({"mcpServers": {"up": {"command": "sh", "args": ["-c", script]}}})
}

fn dir(tag: &str) -> PathBuf {
    crate::scratch_dir(&format!("probing-{tag}"))
}

/// Runs `mcpx serve` once as a 2025-11-25 host: initialize, then `tools/list`. Returns
/// the tool names and the frames mcpx sent upstream.
async fn run(dir: &Path, config: &Value, cache: &Path) -> (Vec<String>, Vec<String>) {
    let cfg = dir.join("mcpx.json");
    std::fs::write(&cfg, config.to_string()).unwrap();
    let wire = dir.join("wire.jsonl");
    let _ = std::fs::remove_file(&wire);
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpx"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .env("XDG_CACHE_HOME", cache)
        .env("MCPX_WIRE_LOG", &wire)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
    ] {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    stdin.flush().await.unwrap();
    let tools = loop {
        let l = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("no answer")
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_str(&l).unwrap();
        if v["id"] == 2 {
            // No upstream offering tools: mcpx does not offer them either (-32601).
            break v["result"]["tools"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|t| t["name"].as_str().unwrap().to_owned())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
        }
    };
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    let sent = std::fs::read_to_string(&wire)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    (tools, sent)
}

fn methods(wire: &[String]) -> Vec<String> {
    wire.iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["method"].as_str().map(str::to_owned))
        .collect()
}

/// D-C10: an uncached upstream is probed with `server/discover` first; once its era is
/// cached as legacy, the next run goes straight to `initialize`.
#[tokio::test]
async fn discover_first_then_the_cached_era() {
    let d = dir("d-c10");
    let cache = d.join("cache");
    let config = upstream("2025-06-18");
    let (tools, wire) = run(&d, &config, &cache).await;
    assert_eq!(tools, ["t"]);
    let m = methods(&wire);
    assert_eq!(m[..2], ["server/discover", "initialize"], "{m:?}");
    let (tools, wire) = run(&d, &config, &cache).await;
    assert_eq!(tools, ["t"]);
    let m = methods(&wire);
    assert_eq!(m[0], "initialize", "{m:?}");
    assert!(!m.contains(&"server/discover".to_owned()), "{m:?}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A-C6: an upstream that counter-offers a version mcpx does not support is dropped:
/// no `notifications/initialized`, none of its tools offered.
#[tokio::test]
async fn an_unsupported_counter_offer_ends_the_connection() {
    let d = dir("a-c6");
    let (tools, wire) = run(&d, &upstream("1999-01-01"), &d.join("cache")).await;
    assert!(tools.is_empty(), "{tools:?}");
    let m = methods(&wire);
    assert!(m.contains(&"initialize".to_owned()), "{m:?}");
    assert!(
        !m.contains(&"notifications/initialized".to_owned()),
        "{m:?}"
    );
    assert!(!m.contains(&"tools/list".to_owned()), "{m:?}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A stdio upstream whose first `server/discover` is refused with -32022 listing
/// `supported`; a later one is answered as a 2026-07-28 server; `initialize` as a
/// 2025-06-18 server; `tools/list` with one tool.
fn refusing_upstream(supported: &str) -> Value {
    let script = format!(
        r#"out() {{ printf '%s\n' "$1"; }}
n=0
while IFS= read -r line; do
  id=$(printf '%s' "$line" | grep -o '"id":[0-9][0-9]*' | head -n 1 | cut -d: -f2)
  [ -z "$id" ] && continue
  case "$line" in
    *'"method":"server/discover"'*)
      n=$((n + 1))
      if [ "$n" = 1 ]; then
        out '{{"jsonrpc":"2.0","id":'"$id"',"error":{{"code":-32022,"message":"Unsupported protocol version","data":{{"supported":{supported},"requested":"2026-07-28"}}}}}}'
      else
        out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"supportedVersions":["2026-07-28"],"capabilities":{{"tools":{{}}}},"ttlMs":0,"cacheScope":"private","resultType":"complete"}}}}'
      fi ;;
    *'"method":"initialize"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"protocolVersion":"2025-06-18","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"fake","version":"1"}}}}}}' ;;
    *'"method":"tools/list"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"tools":[{{"name":"t","inputSchema":{{"type":"object"}}}}],"ttlMs":0,"cacheScope":"private","resultType":"complete"}}}}' ;;
    *)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"resultType":"complete"}}}}' ;;
  esac
done
"#
    );
    json!({"mcpServers": {"up": {"command": "sh", "args": ["-c", script]}}})
}

/// D-C10 (2026-07-28 basic/versioning §Protocol Version Negotiation: the client retries
/// with a mutually supported version): a `server/discover` refused with -32022 is
/// retried once with the newest modern revision the refusal lists, under a new id; a
/// refusal listing only legacy revisions leads to `initialize`; one listing nothing
/// mcpx speaks ends the connection.
#[tokio::test]
async fn a_refused_version_is_retried_with_a_supported_one() {
    let d = dir("discover-32022");
    let (tools, wire) = run(&d, &refusing_upstream(r#"["2026-07-28"]"#), &d.join("c1")).await;
    assert_eq!(tools, ["t"], "{wire:?}");
    let m = methods(&wire);
    assert_eq!(
        m[..3],
        ["server/discover", "server/discover", "tools/list"],
        "{m:?}"
    );
    let ids: Vec<Value> = wire
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["method"] == "server/discover")
        .map(|v| v["id"].clone())
        .collect();
    assert_ne!(ids[0], ids[1], "a new id for the retry");

    let (tools, wire) = run(&d, &refusing_upstream(r#"["2025-06-18"]"#), &d.join("c2")).await;
    assert_eq!(tools, ["t"], "{wire:?}");
    let m = methods(&wire);
    assert_eq!(m[..2], ["server/discover", "initialize"], "{m:?}");

    let (tools, wire) = run(&d, &refusing_upstream(r#"["1999-01-01"]"#), &d.join("c3")).await;
    assert!(tools.is_empty(), "{tools:?}");
    let m = methods(&wire);
    assert_eq!(m, ["server/discover"], "{m:?}");
    let _ = std::fs::remove_dir_all(&d);
}

/// H1 and C-C15, client side: a 2026-07-28 upstream that ends mcpx's listen stream
/// with `notifications/cancelled` (its stdio teardown) ends that listen; mcpx, still
/// connected, opens it again.
#[tokio::test]
async fn an_upstream_ending_its_listen_is_listened_to_again() {
    let script = r#"out() { printf '%s\n' "$1"; }
while IFS= read -r line; do
  id=$(printf '%s' "$line" | grep -o '"id":[0-9][0-9]*' | head -n 1 | cut -d: -f2)
  [ -z "$id" ] && continue
  case "$line" in
    *'"method":"server/discover"'*)
      out '{"jsonrpc":"2.0","id":'"$id"',"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"ttlMs":0,"cacheScope":"private","resultType":"complete"}}' ;;
    *'"method":"tools/list"'*)
      out '{"jsonrpc":"2.0","id":'"$id"',"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}],"ttlMs":0,"cacheScope":"private","resultType":"complete"}}' ;;
    *'"method":"subscriptions/listen"'*)
      out '{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":'"$id"'},"notifications":{"toolsListChanged":true}}}'
      out '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":'"$id"',"reason":"shutting down"}}' ;;
    *)
      out '{"jsonrpc":"2.0","id":'"$id"',"result":{"resultType":"complete"}}' ;;
  esac
done
"#;
    let d = dir("h1-client");
    let cfg = d.join("mcpx.json");
    std::fs::write(
        &cfg,
        json!({"mcpServers": {"up": {"command": "sh", "args": ["-c", script]}}}).to_string(),
    )
    .unwrap();
    let wire = d.join("wire.jsonl");
    // The host keeps mcpx running (stdin open) while its listen loop works.
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpx"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .env("XDG_CACHE_HOME", d.join("cache"))
        .env("MCPX_WIRE_LOG", &wire)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let every = Duration::from_millis(100);
    let listens = crate::wait::poll_every(Duration::from_secs(10), every, async || {
        let text = std::fs::read_to_string(&wire).unwrap_or_default();
        let n = text.matches("\"subscriptions/listen\"").count();
        (n >= 2).then_some(n)
    })
    .await;
    let _ = child.kill().await;
    assert!(listens.is_some(), "the listen was not opened again");
    let _ = std::fs::remove_dir_all(&d);
}

/// Issue #32: a 2026-07-28 stdio upstream (`mcpx example-server --revision 2026-07-28`,
/// which refuses `initialize` with -32022) whose `server/discover` answer comes after
/// the probe's wait (`probeTimeoutMs` 300, the answer 1500 ms late) is used as modern,
/// started once, and cached as modern; `mcpx probe` reports it 2026-07-28.
#[tokio::test]
async fn a_late_discover_answer_is_used() {
    let d = dir("late-discover");
    let starts = d.join("starts");
    let command = format!(
        "echo started >> '{}'; exec '{}' example-server --revision 2026-07-28 --discover-delay-ms 1500",
        starts.display(),
        env!("CARGO_BIN_EXE_mcpx")
    );
    let config = json!({
        "mcpx": {"limits": {"startupWaitMs": 30000}},
        "mcpServers": {"up": {
            "command": "sh",
            "args": ["-c", command],
            "mcpx": {"probeTimeoutMs": 300},
        }},
    });
    let cache = d.join("cache");
    let (tools, wire) = run(&d, &config, &cache).await;
    assert!(tools.iter().any(|t| t == "test_simple_text"), "{tools:?}");
    let m = methods(&wire);
    assert_eq!(m[0], "server/discover", "{m:?}");
    // The probe's wait passed: initialize went out too, and its refusal was not the end.
    assert!(m.contains(&"initialize".to_owned()), "{m:?}");
    assert!(
        !m.contains(&"notifications/initialized".to_owned()),
        "{m:?}"
    );
    // The upstream's lists went out in 2026-07-28.
    let list = wire
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["method"] == "tools/list")
        .expect("tools/list was sent");
    assert_eq!(
        list["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    let started = std::fs::read_to_string(&starts).unwrap();
    assert_eq!(started.lines().count(), 1, "started more than once");
    let eras: Value =
        serde_json::from_str(&std::fs::read_to_string(cache.join("mcpx/eras.json")).unwrap())
            .unwrap();
    let entry = &eras[format!("stdio:sh -c {command}")];
    assert_eq!(entry["era"], "modern", "{eras}");
    assert_eq!(entry["revision"], "2026-07-28", "{eras}");

    // `mcpx probe` (no era cache) finds it modern too.
    let cfg = d.join("mcpx.json");
    let out = Command::new(env!("CARGO_BIN_EXE_mcpx"))
        .args(["probe", "--json", "--config"])
        .arg(&cfg)
        .env("HOME", &d)
        .env("XDG_CACHE_HOME", &cache)
        .env("XDG_RUNTIME_DIR", d.join("run"))
        .env_remove("MCPX_AUTOSTART")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reports: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reports[0]["era"], "modern", "{reports}");
    assert_eq!(reports[0]["revision"], "2026-07-28", "{reports}");
    let _ = std::fs::remove_dir_all(&d);
}
