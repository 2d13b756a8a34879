//! Register items proven over the wire through `mcpx serve` (a real process, stdio),
//! fronting `mcpx example-server --revision <rev>` or a small scripted upstream (`sh`).
//! Every frame mcpx sends the host is validated with the schema tap against the host's
//! revision. Each test names the register ids it proves (see dispositions.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use mcpx_protocol::Era;
use mcpx_testkit::tap::tap;
use serde_json::{Value, json};

use crate::common;
use common::*;

const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// H6, D-C2: resource not found reaches legacy hosts as -32002 and modern hosts
/// as -32602, whichever code the upstream's revision used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_not_found_is_recoded_for_the_host() {
    for up in [R0618, R2026] {
        for host_rev in [R0618, R1125, R2026] {
            let tag = format!("h6-{host_rev}-{up}");
            let mut h = host(&tag, &example(up), host_rev).await;
            let (v, _) = h
                .request("resources/read", json!({"uri": "test://no-such-resource"}))
                .await;
            let want = if host_rev.era() == Era::Legacy {
                -32002
            } else {
                -32602
            };
            assert_eq!(error_code(&v, &tag), want, "{tag}: {v}");
            // D-C14: a tool mcpx cannot route is a -32602 error in every revision.
            let (v, _) = h
                .request(
                    "tools/call",
                    json!({"name": "no_such_tool", "arguments": {}}),
                )
                .await;
            assert_eq!(error_code(&v, &tag), -32602, "{tag}: {v}");
            h.finish().await;
        }
    }
}

/// H7, D-C5: structuredContent and outputSchema per host revision, from a 2026-07-28
/// upstream whose tool returns a non-object (an array).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_content_is_lowered_per_host() {
    for host_rev in [R2411, R0326, R0618, R1125, R2026] {
        let tag = format!("h7-{host_rev}");
        let mut h = host(&tag, &example(R2026), host_rev).await;
        let (list, _) = h.request("tools/list", json!({})).await;
        let tools = result(&list, &tag)["tools"].as_array().unwrap().clone();
        let tool = tools
            .iter()
            .find(|t| t["name"] == "test_structured_value")
            .unwrap_or_else(|| panic!("{tag}: no test_structured_value in {tools:?}"));
        let (call, _) = h
            .request(
                "tools/call",
                json!({"name": "test_structured_value", "arguments": {}}),
            )
            .await;
        let r = result(&call, &tag);
        let texts: Vec<&str> = r["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["text"].as_str())
            .collect();
        match host_rev {
            R2411 | R0326 => {
                assert!(tool.get("outputSchema").is_none(), "{tag}: {tool}");
                assert!(r.get("structuredContent").is_none(), "{tag}: {r}");
            }
            R0618 | R1125 => {
                assert_eq!(tool["outputSchema"]["type"], "object", "{tag}: {tool}");
                assert_eq!(tool["outputSchema"]["required"], json!(["result"]));
                assert_eq!(
                    tool["outputSchema"]["properties"]["result"]["type"],
                    "array"
                );
                let wrapped = &r["structuredContent"]["result"];
                assert!(wrapped.is_array(), "{tag}: {r}");
                // Its JSON text is kept in a text block.
                let text = serde_json::to_string(wrapped).unwrap();
                assert!(
                    texts
                        .iter()
                        .any(|t| serde_json::from_str::<Value>(t).ok().as_ref() == Some(wrapped)),
                    "{tag}: {text} not in {texts:?}"
                );
            }
            _ => {
                assert_eq!(tool["outputSchema"]["type"], "array", "{tag}: {tool}");
                assert!(r["structuredContent"].is_array(), "{tag}: {r}");
            }
        }
        h.finish().await;
    }
}

/// H12, C-C14, D-C11: server/discover and the cacheable results lowered to a modern
/// host carry ttlMs and cacheScope (mcpx's own: 0 and "private"); legacy hosts get
/// neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_hints_on_modern_results_only() {
    for up in [R0618, R2026] {
        let tag = format!("h12-modern-{up}");
        let mut h = host(&tag, &example(up), R2026).await;
        for (method, params) in [
            ("server/discover", json!({})),
            ("tools/list", json!({})),
            ("prompts/list", json!({})),
            ("resources/list", json!({})),
            ("resources/templates/list", json!({})),
            ("resources/read", json!({"uri": "test://static-text"})),
        ] {
            let (v, _) = h.request(method, params).await;
            let r = result(&v, &tag);
            assert!(r["ttlMs"].is_u64(), "{tag} {method}: {r}");
            assert!(
                r["cacheScope"] == "private" || r["cacheScope"] == "public",
                "{tag} {method}: {r}"
            );
            assert_eq!(r["resultType"], "complete", "{tag} {method}");
        }
        let (v, _) = h.request("server/discover", json!({})).await;
        let r = result(&v, &tag);
        assert_eq!(
            (r["ttlMs"].clone(), r["cacheScope"].clone()),
            (json!(0), json!("private"))
        );
        assert!(
            r["supportedVersions"]
                .as_array()
                .unwrap()
                .contains(&json!("2026-07-28"))
        );
        if up.era() == Era::Legacy {
            // From a legacy upstream: 0 and "private".
            let (v, _) = h
                .request("resources/read", json!({"uri": "test://static-text"}))
                .await;
            let r = result(&v, &tag);
            assert_eq!(
                (r["ttlMs"].clone(), r["cacheScope"].clone()),
                (json!(0), json!("private"))
            );
        }
        h.finish().await;

        let tag = format!("h12-legacy-{up}");
        let mut h = host(&tag, &example(up), R1125).await;
        for (method, params) in [
            ("tools/list", json!({})),
            ("resources/read", json!({"uri": "test://static-text"})),
        ] {
            let (v, _) = h.request(method, params).await;
            let r = result(&v, &tag);
            for k in ["ttlMs", "cacheScope", "resultType"] {
                assert!(r.get(k).is_none(), "{tag} {method}: {k} in {r}");
            }
        }
        h.finish().await;
    }
}

/// A-C17, D-C12: serverInfo top-level in a legacy InitializeResult (never in result
/// `_meta`); for modern hosts supportedVersions in DiscoverResult and serverInfo in the
/// `_meta` of every result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_info_placement_per_era() {
    let mut h = Host::start("ac17-legacy", &example(R2026), R1125).await;
    let init = h.initialize(json!({})).await;
    let r = result(&init, "initialize");
    assert_eq!(r["serverInfo"]["name"], "mcpx");
    assert_eq!(r["protocolVersion"], "2025-11-25");
    assert!(r["instructions"].is_string(), "{r}");
    for (method, params) in [
        ("tools/list", json!({})),
        ("ping", json!({})),
        ("resources/read", json!({"uri": "test://static-text"})),
        (
            "tools/call",
            json!({"name": "test_simple_text", "arguments": {}}),
        ),
    ] {
        let (v, _) = h.request(method, params).await;
        let r = result(&v, method);
        assert!(
            r.pointer("/_meta")
                .and_then(|m| m.get(SERVER_INFO))
                .is_none(),
            "{method}: {r}"
        );
    }
    h.finish().await;

    let mut h = Host::start("ac17-modern", &example(R0618), R2026).await;
    let (v, _) = h.request("server/discover", json!({})).await;
    let r = result(&v, "server/discover");
    assert!(r.get("serverInfo").is_none(), "{r}");
    assert!(r["supportedVersions"].is_array());
    assert!(r["capabilities"].is_object());
    assert!(r["instructions"].is_string(), "{r}");
    assert_eq!(r["_meta"][SERVER_INFO]["name"], "mcpx");
    for (method, params) in [
        ("tools/list", json!({})),
        ("resources/read", json!({"uri": "test://static-text"})),
        (
            "tools/call",
            json!({"name": "test_simple_text", "arguments": {}}),
        ),
        ("prompts/get", json!({"name": "test_simple_prompt"})),
    ] {
        let (v, _) = h.request(method, params).await;
        let r = result(&v, method);
        assert_eq!(r["_meta"][SERVER_INFO]["name"], "mcpx", "{method}: {r}");
    }
    h.finish().await;
}

fn log_messages(notes: &[Value]) -> Vec<&Value> {
    notes
        .iter()
        .filter(|n| n["method"] == "notifications/message")
        .collect()
}

/// H9, C-C8: no log messages to a host that asked for no level; after
/// logging/setLevel (legacy) or with `_meta` logLevel (modern) they come, filtered to
/// the level; an invalid per-request level is refused -32602.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_only_where_the_host_asked() {
    let call = || json!({"name": "test_tool_with_logging", "arguments": {}});
    for up in [R0618, R2026] {
        // Legacy host.
        let tag = format!("h9-legacy-{up}");
        let mut h = host(&tag, &example(up), R0618).await;
        let (v, notes) = h.request("tools/call", call()).await;
        result(&v, &tag);
        assert!(log_messages(&notes).is_empty(), "{tag}: {notes:?}");
        let (v, _) = h
            .request("logging/setLevel", json!({"level": "info"}))
            .await;
        result(&v, &tag);
        let (v, notes) = h.request("tools/call", call()).await;
        result(&v, &tag);
        let logs = log_messages(&notes);
        assert!(!logs.is_empty(), "{tag}: no logs after setLevel: {notes:?}");
        // Filtered: at an "emergency" threshold only the tool's emergency message passes.
        let (v, _) = h
            .request("logging/setLevel", json!({"level": "emergency"}))
            .await;
        result(&v, &tag);
        let (v, notes) = h.request("tools/call", call()).await;
        result(&v, &tag);
        let filtered = log_messages(&notes);
        assert!(filtered.len() < logs.len(), "{tag}: {notes:?}");
        assert!(
            filtered.iter().all(|l| l["params"]["level"] == "emergency"),
            "{tag}: {notes:?}"
        );
        h.finish().await;

        // Modern host.
        let tag = format!("h9-modern-{up}");
        let mut h = host(&tag, &example(up), R2026).await;
        let (v, notes) = h.request("tools/call", call()).await;
        result(&v, &tag);
        assert!(log_messages(&notes).is_empty(), "{tag}: {notes:?}");
        let mut p = call();
        p["_meta"]["io.modelcontextprotocol/logLevel"] = json!("debug");
        let (v, notes) = h.request("tools/call", p).await;
        result(&v, &tag);
        let all = log_messages(&notes).len();
        assert!(all > 1, "{tag}: no logs with logLevel");
        let mut p = call();
        p["_meta"]["io.modelcontextprotocol/logLevel"] = json!("emergency");
        let (v, notes) = h.request("tools/call", p).await;
        result(&v, &tag);
        let filtered = log_messages(&notes);
        assert!(filtered.len() < all, "{tag}: {notes:?}");
        assert!(
            filtered.iter().all(|l| l["params"]["level"] == "emergency"),
            "{tag}: {notes:?}"
        );
        let mut p = call();
        p["_meta"]["io.modelcontextprotocol/logLevel"] = json!("loud");
        let (v, _) = h.request("tools/call", p).await;
        assert_eq!(error_code(&v, &tag), -32602);
        h.finish().await;
    }
}

/// H9 with several calls in flight on stdio, where nothing in the transport ties a log
/// to a request: an upstream log naming the request it is about
/// (`_meta["mcpx/relatedRequestId"]`, mcpx's extension, as the example server does)
/// reaches that call's host request, and mcpx names the host's request the same way.
/// Before, a log was attributed only when a single call was in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_reach_their_call_with_several_in_flight() {
    let mut h = host("h9-inflight", &example(R1125), R1125).await;
    let (v, _) = h
        .request("logging/setLevel", json!({"level": "info"}))
        .await;
    result(&v, "setLevel");
    // A call that stays in flight, then one that logs meanwhile.
    let (slow, logging) = (h.next_id, h.next_id + 1);
    h.next_id += 2;
    h.send(&json!({"jsonrpc":"2.0","id":slow,"method":"tools/call",
        "params":{"name":"slow_compute","arguments":{"seconds":1}}}))
        .await;
    h.send(&json!({"jsonrpc":"2.0","id":logging,"method":"tools/call",
        "params":{"name":"test_tool_with_logging","arguments":{}}}))
        .await;
    let mut logs = Vec::new();
    let mut answered = Vec::new();
    while answered.len() < 2 {
        let v = h.next_frame("two calls").await;
        if v["method"] == "notifications/message" {
            logs.push(v);
        } else if v.get("id").is_some() {
            result(&v, "tools/call");
            answered.push(v["id"].clone());
        }
    }
    assert_eq!(
        answered,
        [json!(logging), json!(slow)],
        "the logging call ends first"
    );
    // The eight levels from debug up; info and above pass the threshold.
    assert_eq!(logs.len(), 7, "{logs:?}");
    for l in &logs {
        assert_eq!(
            l["params"]["_meta"]["mcpx/relatedRequestId"], logging,
            "{l}"
        );
    }
    h.finish().await;
}

/// H4, A-C5: a legacy initialize naming an unsupported version is counter-offered the
/// newest legacy version; -32022 only for a modern request with an unsupported
/// `_meta` protocolVersion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_is_counter_offered_modern_gets_32022() {
    let mut h = Host::start("h4", &example(R0618), R1125).await;
    let (v, _) = h
        .raw_request(
            "initialize",
            json!({"protocolVersion": "1999-01-01", "capabilities": {},
                   "clientInfo": {"name": "disp", "version": "1"}}),
        )
        .await;
    assert_eq!(result(&v, "initialize")["protocolVersion"], "2025-11-25");
    h.finish().await;

    let mut h = Host::start("h4-modern", &example(R0618), R2026).await;
    let (v, _) = h
        .raw_request(
            "tools/list",
            json!({"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2099-01-01",
                "io.modelcontextprotocol/clientCapabilities": {},
            }}),
        )
        .await;
    assert_eq!(error_code(&v, "tools/list"), -32022, "{v}");
    h.finish().await;
}

/// C-C9: the completions capability is absent for 2024-11-05 hosts (their schema has
/// none) and present from 2025-03-26; completion/complete is answered in both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_capability_follows_the_host_revision() {
    for host_rev in [R2411, R0326, R1125] {
        let tag = format!("cc9-{host_rev}");
        let mut h = Host::start(&tag, &example(R0618), host_rev).await;
        let init = h.initialize(json!({})).await;
        let caps = &result(&init, &tag)["capabilities"];
        assert_eq!(
            caps.get("completions").is_some(),
            host_rev != R2411,
            "{tag}: {caps}"
        );
        let (v, _) = h
            .request(
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                       "argument": {"name": "arg2", "value": ""}}),
            )
            .await;
        assert!(
            result(&v, &tag)["completion"]["values"].is_array(),
            "{tag}: {v}"
        );
        h.finish().await;
    }
}

/// A-C12: a modern request lacking clientCapabilities (or params) is refused -32602 by
/// mcpx's server; every modern request mcpx's client sends carries protocolVersion,
/// clientCapabilities and clientInfo in `_meta`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_requests_need_and_carry_the_meta_keys() {
    let mut h = Host::start("ac12", &example(R2026), R2026).await;
    let (v, _) = h
        .raw_request(
            "tools/list",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
        )
        .await;
    assert_eq!(error_code(&v, "no clientCapabilities"), -32602, "{v}");
    // A-C3: ping does not exist for a modern host.
    let (v, _) = h.request("ping", json!({})).await;
    assert_eq!(error_code(&v, "modern ping"), -32601, "{v}");
    let (v, _) = h.request("tools/list", json!({})).await;
    result(&v, "tools/list");
    let (v, _) = h
        .request(
            "tools/call",
            json!({"name": "test_simple_text", "arguments": {}}),
        )
        .await;
    result(&v, "tools/call");
    let wire = h.finish().await;
    let requests: Vec<&Value> = wire
        .iter()
        .filter(|v| v.get("id").is_some() && v.get("method").is_some())
        .collect();
    assert!(requests.len() >= 2, "{wire:?}");
    for r in &requests {
        let meta = &r["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
            "{r}"
        );
        assert!(
            meta["io.modelcontextprotocol/clientCapabilities"].is_object(),
            "{r}"
        );
        assert!(
            meta["io.modelcontextprotocol/clientInfo"]["name"].is_string(),
            "{r}"
        );
    }
}

/// A scripted stdio upstream. `era` is `modern` (answers server/discover for
/// 2026-07-28) or `legacy` (refuses server/discover, answers initialize for
/// 2025-06-18). tools/list pages: the first page ends with `"nextCursor": ""`, the
/// page for cursor `""` has tool `second`. tools/call first sends the client a
/// request with id `"ask-1"` (`roots/list` when modern, `ping` when legacy), then
/// answers.
fn script(era: &str) -> String {
    format!(
        r#"era={era}
out() {{ printf '%s\n' "$1"; }}
while IFS= read -r line; do
  id=$(printf '%s' "$line" | grep -o '"id":[0-9][0-9]*' | head -n 1 | cut -d: -f2)
  [ -z "$id" ] && continue
  case "$line" in
    *'"method":"server/discover"'*)
      if [ "$era" = modern ]; then
        out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"supportedVersions":["2026-07-28"],"capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"fake","version":"1"}},"ttlMs":0,"cacheScope":"private","resultType":"complete"}}}}'
      else
        out '{{"jsonrpc":"2.0","id":'"$id"',"error":{{"code":-32601,"message":"Method not found"}}}}'
      fi ;;
    *'"method":"initialize"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"protocolVersion":"2025-06-18","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"fake","version":"1"}}}}}}' ;;
    *'"method":"tools/list"'*)
      case "$line" in
        *'"cursor":""'*)
          out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"tools":[{{"name":"second","inputSchema":{{"type":"object"}}}}]}}}}' ;;
        *)
          out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"tools":[{{"name":"first","inputSchema":{{"type":"object"}}}}],"nextCursor":""}}}}' ;;
      esac ;;
    *'"method":"tools/call"'*)
      if [ "$era" = modern ]; then
        out '{{"jsonrpc":"2.0","id":"ask-1","method":"roots/list","params":{{}}}}'
      else
        out '{{"jsonrpc":"2.0","id":"ask-1","method":"ping"}}'
      fi
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"content":[{{"type":"text","text":"called"}}]}}}}' ;;
    *)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{}}}}' ;;
  esac
done
"#
    )
}

fn tool_names(v: &Value) -> Vec<String> {
    result(v, "tools/list")["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// H8, C-C5: an empty-string nextCursor from a 2026-07-28 upstream is followed like any
/// cursor; from a legacy upstream it ends the list. mcpx's own cursors are never "".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_cursor_is_a_cursor_only_from_modern_upstreams() {
    for (era, want) in [
        ("modern", vec!["first", "second"]),
        ("legacy", vec!["first"]),
    ] {
        let tag = format!("h8-{era}");
        let mut h = host(&tag, &scripted(&script(era)), R1125).await;
        let (v, _) = h.request("tools/list", json!({})).await;
        assert_eq!(tool_names(&v), want, "{tag}: {v}");
        assert!(result(&v, &tag).get("nextCursor").is_none(), "{tag}: {v}");
        let wire = h.finish().await;
        let cursor_requests = wire
            .iter()
            .filter(|v| v["method"] == "tools/list" && v["params"]["cursor"] == "")
            .count();
        assert_eq!(
            cursor_requests,
            usize::from(era == "modern"),
            "{tag}: {wire:?}"
        );
    }
    // mcpx's own pages: a non-empty cursor on every page but the last.
    let config = json!({"mcpServers": {"up": {
        "command": env!("CARGO_BIN_EXE_mcpx"),
        "args": ["example-server", "--revision", "2025-11-25"],
    }}, "mcpx": {"limits": {"pageSize": 2}}});
    let mut h = host("h8-pages", &config, R2026).await;
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let (v, _) = h.request("tools/list", params).await;
        pages += 1;
        match result(&v, "page").get("nextCursor") {
            None => break,
            Some(c) => {
                let c = c.as_str().unwrap();
                assert!(!c.is_empty());
                cursor = Some(c.to_owned());
            }
        }
    }
    assert!(pages > 1, "page size not applied");
    h.finish().await;
}

/// H2 (second sentence): a JSON-RPC request from a 2026-07-28 upstream is dropped (not
/// answered, not relayed to the host) while 2026-07-28 is held strictly, and answered
/// when 2026-07-28 is in spec.lenient.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wire_request_from_a_modern_upstream_is_dropped_while_strict() {
    for lenient in [false, true] {
        let tag = format!("h2-lenient-{lenient}");
        let mut config = scripted(&script("modern"));
        if lenient {
            config["mcpx"] = json!({"spec": {"lenient": ["2026-07-28"]}});
        }
        let mut h = Host::start(&tag, &config, R1125).await;
        h.initialize(json!({"roots": {"listChanged": true}})).await;
        let (v, notes) = h
            .request("tools/call", json!({"name": "first", "arguments": {}}))
            .await;
        assert_eq!(result(&v, &tag)["content"][0]["text"], "called", "{tag}");
        assert!(
            notes.iter().all(|n| n.get("id").is_none()),
            "{tag}: the host got a request: {notes:?}"
        );
        // One more round trip, so an answer to "ask-1" would have been written.
        let (v, _) = h.request("ping", json!({})).await;
        result(&v, &tag);
        if lenient {
            // The answer is written upstream asynchronously: wait for it (bounded).
            let every = Duration::from_millis(100);
            let _ = crate::wait::poll_every(Duration::from_secs(5), every, async || {
                h.wire().iter().any(|v| v["id"] == "ask-1").then_some(())
            })
            .await;
        } else {
            // real sleep: an absence (no answer to "ask-1" written upstream).
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let wire = h.finish().await;
        let answer = wire.iter().find(|v| v["id"] == "ask-1");
        assert_eq!(answer.is_some(), lenient, "{tag}: {wire:?}");
        if let Some(a) = answer {
            // The broker relays wire asks only between legacy peers.
            assert_eq!(a["error"]["code"], -32603, "{tag}: {a}");
        }
    }
}

/// H5, D-C1: an upstream's -32602 for a tool's arguments (up to 2025-06-18) reaches
/// hosts up to 2025-06-18 as -32602 and 2025-11-25/2026-07-28 hosts as an isError
/// result carrying the message; an upstream's isError result passes to every host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_validation_failures_take_the_host_form() {
    let bad = || json!({"name": "test_add", "arguments": {"a": "one"}});
    for up in [R0618, R1125, R2026] {
        for host_rev in [R0326, R0618, R1125, R2026] {
            let tag = format!("h5-{host_rev}-{up}");
            let mut h = host(&tag, &example(up), host_rev).await;
            let (v, _) = h.request("tools/call", bad()).await;
            let as_error = !up.facts().input_validation_is_tool_error
                && !host_rev.facts().input_validation_is_tool_error;
            if as_error {
                assert_eq!(error_code(&v, &tag), -32602, "{tag}: {v}");
            } else {
                let r = result(&v, &tag);
                assert_eq!(r["isError"], true, "{tag}: {r}");
                assert!(r["content"][0]["text"].as_str().is_some(), "{tag}: {r}");
            }
            h.finish().await;
        }
    }
}

/// A-C3: a legacy upstream's ping is answered with an empty result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_from_a_legacy_upstream_is_answered() {
    let mut h = host("ac3", &scripted(&script("legacy")), R1125).await;
    let (v, notes) = h
        .request("tools/call", json!({"name": "first", "arguments": {}}))
        .await;
    assert_eq!(result(&v, "tools/call")["content"][0]["text"], "called");
    assert!(notes.iter().all(|n| n.get("id").is_none()), "{notes:?}");
    let (v, _) = h.request("ping", json!({})).await;
    assert_eq!(result(&v, "ping"), &json!({}));
    // The answer is written upstream asynchronously: wait for it (bounded).
    let every = Duration::from_millis(100);
    let _ = crate::wait::poll_every(Duration::from_secs(5), every, async || {
        h.wire().iter().any(|v| v["id"] == "ask-1").then_some(())
    })
    .await;
    let wire = h.finish().await;
    let answer = wire
        .iter()
        .find(|v| v["id"] == "ask-1")
        .unwrap_or_else(|| panic!("ping not answered: {wire:?}"));
    assert_eq!(answer["result"], json!({}), "{answer}");
}

/// H2 (first sentence), C-C2: an upstream's ask reaches a legacy host as a wire
/// request and a modern host only inside an input_required result (never a request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asks_reach_legacy_hosts_as_requests_and_modern_hosts_as_input_required() {
    let call = json!({"name": "test_list_roots", "arguments": {}});
    // Legacy host, legacy upstream: a roots/list wire request, answered by the host.
    let mut h = Host::start("h2-legacy", &example(R0618), R0618).await;
    h.initialize(json!({"roots": {"listChanged": true}})).await;
    h.send(&json!({"jsonrpc":"2.0","id":"call","method":"tools/call","params":call}))
        .await;
    let mut asked = false;
    let response = loop {
        let line = h.next_line("tools/call").await;
        tap().validate_frame(R0618, &line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["method"] == "roots/list" {
            asked = true;
            h.send(&json!({"jsonrpc":"2.0","id":v["id"],
                           "result":{"roots":[{"uri":"file:///disp","name":"disp"}]}}))
                .await;
        } else if v["id"] == "call" {
            break v;
        }
    };
    assert!(asked, "no roots/list request reached the legacy host");
    assert!(response.to_string().contains("file:///disp"), "{response}");
    h.finish().await;

    // Modern host, legacy upstream: input_required, no request on the wire.
    let mut h = Host::start("h2-modern", &example(R0618), R2026).await;
    let mut meta = modern_meta(json!({}));
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"roots": {}});
    let mut params = call.clone();
    params["_meta"] = meta;
    let (v, notes) = h.raw_request("tools/call", params).await;
    assert!(notes.iter().all(|n| n.get("id").is_none()), "{notes:?}");
    let r = result(&v, "tools/call");
    assert_eq!(r["resultType"], "input_required", "{r}");
    let asks: Vec<&Value> = r["inputRequests"].as_object().unwrap().values().collect();
    assert!(asks.iter().any(|a| a["method"] == "roots/list"), "{r}");
    h.finish().await;
}

/// E-1 (second half): a 2026-07-28 upstream's inputRequests entry becomes a wire
/// request to a legacy host (mcpx retries the upstream call with the answer), and
/// passes through to a modern host as input_required.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_upstream_input_requests_reach_each_host_era() {
    let call = json!({"name": "test_input_required_result_list_roots", "arguments": {}});
    let mut h = Host::start("e1-legacy", &example(R2026), R1125).await;
    h.initialize(json!({"roots": {"listChanged": true}})).await;
    h.send(&json!({"jsonrpc":"2.0","id":"call","method":"tools/call","params":call}))
        .await;
    let mut asked = false;
    let response = loop {
        let line = h.next_line("tools/call").await;
        tap().validate_frame(R1125, &line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["method"] == "roots/list" {
            asked = true;
            h.send(&json!({"jsonrpc":"2.0","id":v["id"],
                           "result":{"roots":[{"uri":"file:///e1","name":"e1"}]}}))
                .await;
        } else if v["id"] == "call" {
            break v;
        }
    };
    assert!(asked, "no roots/list request reached the legacy host");
    let r = result(&response, "tools/call");
    assert!(r.get("resultType").is_none(), "{r}");
    assert!(r["content"].is_array(), "{r}");
    assert!(r.get("isError").is_none_or(|e| e == false), "{r}");
    h.finish().await;

    let mut h = Host::start("e1-modern", &example(R2026), R2026).await;
    let mut meta = modern_meta(json!({}));
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"roots": {}});
    let mut params = call.clone();
    params["_meta"] = meta;
    let (v, notes) = h.raw_request("tools/call", params).await;
    assert!(notes.iter().all(|n| n.get("id").is_none()), "{notes:?}");
    let r = result(&v, "tools/call");
    assert_eq!(r["resultType"], "input_required", "{r}");
    let asks: Vec<&Value> = r["inputRequests"].as_object().unwrap().values().collect();
    assert!(asks.iter().any(|a| a["method"] == "roots/list"), "{r}");
    h.finish().await;
}

/// A legacy upstream (at `version`) that offers resources and no `completions`
/// capability, and answers `completion/complete` with one suggestion if asked.
fn no_completions_script(version: &str) -> String {
    format!(
        r#"out() {{ printf '%s\n' "$1"; }}
while IFS= read -r line; do
  id=$(printf '%s' "$line" | grep -o '"id":[0-9][0-9]*' | head -n 1 | cut -d: -f2)
  [ -z "$id" ] && continue
  case "$line" in
    *'"method":"server/discover"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"error":{{"code":-32601,"message":"Method not found"}}}}' ;;
    *'"method":"initialize"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"protocolVersion":"{version}","capabilities":{{"resources":{{}}}},"serverInfo":{{"name":"fake","version":"1"}}}}}}' ;;
    *'"method":"resources/templates/list"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"resourceTemplates":[{{"uriTemplate":"test://t/{{id}}","name":"t"}}]}}}}' ;;
    *'"method":"resources/list"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"resources":[]}}}}' ;;
    *'"method":"completion/complete"'*)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{"completion":{{"values":["asked"]}}}}}}' ;;
    *)
      out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{}}}}' ;;
  esac
done
"#
    )
}

/// C-C9 and A-C7/D-C7: from 2025-03-26 a server that completes declares `completions`,
/// so an upstream that did not is not asked, and when no upstream offers completions
/// mcpx does not advertise them either and answers -32601; a 2024-11-05 server had no
/// such capability to declare, so it is offered and asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_is_asked_only_where_the_upstream_can_answer() {
    for (version, asked) in [("2025-06-18", false), ("2024-11-05", true)] {
        let tag = format!("c-c9-{version}");
        let mut h = Host::start(&tag, &scripted(&no_completions_script(version)), R1125).await;
        let init = h.initialize(json!({})).await;
        let advertised = init["result"]["capabilities"].get("completions").is_some();
        assert_eq!(advertised, asked, "{tag}: {init}");
        let (v, _) = h
            .request(
                "completion/complete",
                json!({"ref": {"type": "ref/resource", "uri": "test://t/{id}"},
                       "argument": {"name": "id", "value": "a"}}),
            )
            .await;
        let wire = h.finish().await;
        let sent = wire.iter().any(|v| v["method"] == "completion/complete");
        assert_eq!(sent, asked, "{tag}: {wire:?}");
        if asked {
            assert_eq!(
                result(&v, &tag)["completion"]["values"],
                json!(["asked"]),
                "{tag}"
            );
        } else {
            assert_eq!(error_code(&v, &tag), -32601, "{tag}");
        }
    }
}

/// D-C7, A-C7: mcpx declares a capability iff some upstream offers it, the same set to
/// a legacy host (InitializeResult) and a modern one (DiscoverResult); a method behind
/// a capability it did not declare is -32601.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_follow_the_upstreams() {
    let config = scripted(&no_completions_script("2025-06-18"));
    let mut legacy = Host::start("d-c7-legacy", &config, R1125).await;
    let init = legacy.initialize(json!({})).await;
    let mut keys: Vec<String> = init["result"]["capabilities"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    keys.sort();
    assert_eq!(keys, ["resources"], "{init}");
    let (v, _) = legacy.request("tools/list", json!({})).await;
    assert_eq!(error_code(&v, "tools/list"), -32601);
    let (v, _) = legacy.request("prompts/list", json!({})).await;
    assert_eq!(error_code(&v, "prompts/list"), -32601);
    let (v, _) = legacy.request("resources/templates/list", json!({})).await;
    assert!(result(&v, "templates")["resourceTemplates"].is_array());
    legacy.finish().await;
    let mut modern = Host::start("d-c7-modern", &config, R2026).await;
    let (v, _) = modern.request("server/discover", json!({})).await;
    let mut mkeys: Vec<String> = result(&v, "discover")["capabilities"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    mkeys.sort();
    assert_eq!(mkeys, keys, "{v}");
    modern.finish().await;
}

/// D-C3, D-C6: when an upstream's tools change, mcpx refreshes its one merged catalog
/// and tells every host in its era's way: a modern host only on a
/// `subscriptions/listen` stream that asked for that kind (tagged with the listen id),
/// a legacy host on its session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changes_reach_each_host_era_its_own_way() {
    let config = json!({"mcpServers": {"up": {
        "command": env!("CARGO_BIN_EXE_mcpx"), "args": ["example-server"]}}});
    // Modern: a listen stream for tools only, opened once the upstream is listed (its
    // joining is a list change too, not the one this test makes).
    let mut h = Host::start("d-c6-modern", &config, R2026).await;
    h.request("tools/list", json!({})).await;
    let mut listen = json!({"notifications": {"toolsListChanged": true}});
    for (k, v) in modern_meta(json!({})).as_object().unwrap() {
        listen["_meta"][k] = v.clone();
    }
    h.send(
        &json!({"jsonrpc":"2.0","id":"listen-1","method":"subscriptions/listen","params":listen}),
    )
    .await;
    let ack: Value = serde_json::from_str(&h.next_line("ack").await).unwrap();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    tap()
        .validate_frame(R2026, &ack.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    let (v, notes) = h
        .request(
            "tools/call",
            json!({"name": "test_trigger_tool_change", "arguments": {}}),
        )
        .await;
    assert!(result(&v, "trigger")["content"].is_array());
    // The change arrives on the listen stream (before or after the call's answer).
    let mut seen: Vec<Value> = notes;
    while !seen
        .iter()
        .any(|n| n["method"] == "notifications/tools/list_changed")
    {
        let line = h.next_line("list_changed").await;
        tap()
            .validate_frame(R2026, &line)
            .unwrap_or_else(|e| panic!("{e}"));
        seen.push(serde_json::from_str(&line).unwrap());
    }
    let change = seen
        .iter()
        .find(|n| n["method"] == "notifications/tools/list_changed")
        .unwrap();
    assert_eq!(
        change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );
    assert!(
        !seen
            .iter()
            .any(|n| n["method"] == "notifications/prompts/list_changed"),
        "an unrequested kind was sent: {seen:?}"
    );
    let (v, _) = h.request("tools/list", json!({})).await;
    assert!(
        tool_names(&v).contains(&"test_dynamic_tool".to_owned()),
        "{v}"
    );
    h.finish().await;

    // Legacy: on the session.
    let mut h = Host::start("d-c6-legacy", &config, R1125).await;
    h.initialize(json!({})).await;
    let (_, mut notes) = h
        .request(
            "tools/call",
            json!({"name": "test_trigger_tool_change", "arguments": {}}),
        )
        .await;
    while !notes
        .iter()
        .any(|n| n["method"] == "notifications/tools/list_changed")
    {
        let line = h.next_line("legacy list_changed").await;
        tap()
            .validate_frame(R1125, &line)
            .unwrap_or_else(|e| panic!("{e}"));
        notes.push(serde_json::from_str(&line).unwrap());
    }
    h.finish().await;
}
