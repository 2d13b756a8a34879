//! Serve-side register items (what mcpx does toward hosts) proven over the wire through
//! `mcpx serve`: on stdio (a real process) and on Streamable HTTP (127.0.0.1), fronting
//! `mcpx example-server` or a small scripted upstream (`sh`). Every frame mcpx sends the
//! host is validated with the schema tap against the host's revision. Each test names
//! the register ids it proves (see dispositions.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use mcpx_protocol::{Era, Revision};
use mcpx_testkit::tap::tap;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::common;
use common::*;

// ---------------------------------------------------------------------------------
// A scripted legacy upstream.

/// `out '<json>'` for the shell, with `__ID__` standing for the request's id.
fn out(json: &str) -> String {
    format!("out '{}'", json.replace("__ID__", "'\"$id\"'"))
}

/// A legacy upstream at `version`, offering tools and prompts. Before answering
/// `initialize` it sends a log message (A-C8: a client accepts notifications before it
/// sent `initialized`). Its tools:
///
/// * `own_code`: error -32001 (an implementation's own code, legacy sub-range);
/// * `url_needed`: error -32042 with one URL elicitation;
/// * `jumpy`: progress 1, 1, 0.5, 2 for the request's token, then a result;
/// * `embedded`: an embedded resource without `mimeType`;
/// * `meta_result`: a result whose `_meta` has `io.modelcontextprotocol/serverInfo` and
///   `modelcontextprotocol.io/k`, the upstream's own data in 2025-06-18 terms.
///
/// `prompts/get` answers a `resource_link` message and an embedded resource without
/// `mimeType`.
fn fake(version: &str) -> String {
    let tools = ["own_code", "url_needed", "jumpy", "embedded", "meta_result"]
        .iter()
        .map(|n| format!(r#"{{"name":"{n}","inputSchema":{{"type":"object"}}}}"#))
        .collect::<Vec<_>>()
        .join(",");
    let no_mime = r#"{"type":"resource","resource":{"uri":"test://no-mime","text":"plain"}}"#;
    let call = |name: &str, body: Vec<String>| {
        format!(
            "        *'\"name\":\"{name}\"'*)\n{}\n          ;;\n",
            body.into_iter()
                .map(|l| format!("          {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        )
    };
    let progress = |p: &str| {
        format!(
            r#"out '{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":'"$tok"',"progress":{p},"total":4}}}}'"#
        )
    };
    let mut calls = String::new();
    calls += &call(
        "own_code",
        vec![out(
            r#"{"jsonrpc":"2.0","id":__ID__,"error":{"code":-32001,"message":"an own failure of the upstream"}}"#,
        )],
    );
    calls += &call(
        "url_needed",
        vec![out(
            r#"{"jsonrpc":"2.0","id":__ID__,"error":{"code":-32042,"message":"authorisation needed","data":{"elicitations":[{"mode":"url","elicitationId":"e-1","url":"https://auth.example.com/start","message":"Sign in"}]}}}"#,
        )],
    );
    calls += &call(
        "jumpy",
        vec![
            r#"tok=$(printf '%s' "$line" | grep -o '"progressToken":[^,}]*' | head -n 1 | cut -d: -f2-)"#
                .to_owned(),
            progress("1"),
            progress("1"),
            progress("0.5"),
            progress("2"),
            out(r#"{"jsonrpc":"2.0","id":__ID__,"result":{"content":[{"type":"text","text":"jumped"}]}}"#),
        ],
    );
    calls += &call(
        "embedded",
        vec![out(&format!(
            r#"{{"jsonrpc":"2.0","id":__ID__,"result":{{"content":[{no_mime}]}}}}"#
        ))],
    );
    calls += &call(
        "meta_result",
        vec![out(
            r#"{"jsonrpc":"2.0","id":__ID__,"result":{"content":[{"type":"text","text":"m"}],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"own","version":"9"},"modelcontextprotocol.io/k":1}}}"#,
        )],
    );
    format!(
        r#"out() {{ printf '%s\n' "$1"; }}
while IFS= read -r line; do
  id=$(printf '%s' "$line" | grep -o '"id":[0-9][0-9]*' | head -n 1 | cut -d: -f2)
  [ -z "$id" ] && continue
  case "$line" in
    *'"method":"server/discover"'*)
      {discover} ;;
    *'"method":"initialize"'*)
      {early_log}
      {init} ;;
    *'"method":"tools/list"'*)
      {tools_list} ;;
    *'"method":"prompts/list"'*)
      {prompts_list} ;;
    *'"method":"prompts/get"'*)
      {prompt} ;;
    *'"method":"tools/call"'*)
      case "$line" in
{calls}      esac ;;
    *)
      {empty} ;;
  esac
done
"#,
        discover = out(
            r#"{"jsonrpc":"2.0","id":__ID__,"error":{"code":-32601,"message":"Method not found"}}"#
        ),
        early_log = out(
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"before initialized"}}"#
        ),
        init = out(&format!(
            r#"{{"jsonrpc":"2.0","id":__ID__,"result":{{"protocolVersion":"{version}","capabilities":{{"tools":{{}},"prompts":{{}}}},"serverInfo":{{"name":"fake","version":"1"}}}}}}"#
        )),
        tools_list = out(&format!(
            r#"{{"jsonrpc":"2.0","id":__ID__,"result":{{"tools":[{tools}]}}}}"#
        )),
        prompts_list =
            out(r#"{"jsonrpc":"2.0","id":__ID__,"result":{"prompts":[{"name":"linked"}]}}"#),
        prompt = out(&format!(
            r#"{{"jsonrpc":"2.0","id":__ID__,"result":{{"messages":[{{"role":"user","content":{{"type":"resource_link","uri":"test://linked","name":"linked-doc"}}}},{{"role":"user","content":{no_mime}}}]}}}}"#
        )),
        empty = out(r#"{"jsonrpc":"2.0","id":__ID__,"result":{}}"#),
    )
}

fn call(name: &str) -> Value {
    json!({"name": name, "arguments": {}})
}

// ---------------------------------------------------------------------------------
// Lifecycle, `_meta`, error codes.

/// A-C8: before `notifications/initialized` mcpx sends a legacy host no request (the
/// upstream's `roots/list` is refused instead); after it, the same call reaches the host
/// as a `roots/list` request. As a client, mcpx accepts an upstream's notification sent
/// before its `initialize` result (the scripted upstream logs first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_reaches_a_legacy_host_before_initialized() {
    let mut h = Host::start("a-c8", &example(R0618), R0618).await;
    h.initialize_only(json!({"roots": {}})).await;
    let (v, notes) = h.raw_request("tools/call", call("test_list_roots")).await;
    assert!(
        notes.iter().all(|n| n.get("id").is_none()),
        "a request before initialized: {notes:?}"
    );
    assert!(!v.to_string().contains("file:///a-c8"), "{v}");
    h.initialized().await;
    h.send(&json!({"jsonrpc":"2.0","id":"after","method":"tools/call",
                   "params": call("test_list_roots")}))
        .await;
    let mut asked = false;
    let response = loop {
        let v = h.next_frame("tools/call").await;
        if v["method"] == "roots/list" {
            asked = true;
            h.send(&json!({"jsonrpc":"2.0","id":v["id"],
                           "result":{"roots":[{"uri":"file:///a-c8","name":"a-c8"}]}}))
                .await;
        } else if v["id"] == "after" {
            break v;
        }
    };
    assert!(asked, "no roots/list after initialized");
    assert!(response.to_string().contains("file:///a-c8"), "{response}");
    h.finish().await;

    // The client half: the upstream logged before answering initialize.
    let mut h = host("a-c8-client", &scripted(&fake("2025-06-18")), R0618).await;
    let (v, _) = h.request("tools/list", json!({})).await;
    assert_eq!(
        result(&v, "tools/list")["tools"].as_array().unwrap().len(),
        5
    );
    h.finish().await;
}

/// A-C9: `io.modelcontextprotocol/*` keys are protocol data only in revisions that
/// define them. A 2025-06-18 host's such keys (and other reserved-looking ones) reach a
/// legacy upstream unchanged; a modern host's envelope keys are removed before a legacy
/// upstream sees them, its other keys kept; a 2025-06-18 upstream's result `_meta`
/// reaches a 2025-03-26 host unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_keys_are_protocol_data_only_where_the_revision_defines_them() {
    let opaque = json!({
        "io.modelcontextprotocol/protocolVersion": "mine",
        "io.modelcontextprotocol/clientInfo": {"own": true},
        "io.modelcontextprotocol/logLevel": "chatty",
        "modelcontextprotocol.io/k": 1,
    });
    let mut h = host("a-c9-legacy", &example(R0618), R0618).await;
    let mut p = call("test_simple_text");
    p["_meta"] = opaque.clone();
    let (v, _) = h.request("tools/call", p).await;
    result(&v, "tools/call");
    let wire = h.finish().await;
    let up = sent(&wire, "tools/call");
    assert_eq!(up.len(), 1, "{wire:?}");
    assert_eq!(up[0]["params"]["_meta"], opaque, "{}", up[0]);

    let mut h = Host::start("a-c9-modern", &example(R0618), R2026).await;
    let mut p = call("test_simple_text");
    p["_meta"] = modern_meta(json!({}));
    p["_meta"]["io.modelcontextprotocol/custom"] = json!(3);
    p["_meta"]["io.modelcontextprotocol/logLevel"] = json!("error");
    let (v, _) = h.raw_request("tools/call", p).await;
    result(&v, "tools/call");
    let wire = h.finish().await;
    let up = sent(&wire, "tools/call");
    assert_eq!(
        up[0]["params"]["_meta"],
        json!({"io.modelcontextprotocol/custom": 3}),
        "{}",
        up[0]
    );

    let mut h = host("a-c9-result", &scripted(&fake("2025-06-18")), R0326).await;
    let (v, _) = h.request("tools/call", call("meta_result")).await;
    assert_eq!(
        result(&v, "meta_result")["_meta"],
        json!({"io.modelcontextprotocol/serverInfo": {"name": "own", "version": "9"},
               "modelcontextprotocol.io/k": 1}),
        "{v}"
    );
    h.finish().await;
}

/// A-C10: an upstream's own code in -32000..-32019 reaches hosts of both eras unchanged;
/// mcpx's own errors (an unknown tool, a missing `_meta` key, a method the revision
/// lacks, a capability not offered) use JSON-RPC codes, never that range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_own_code_in_the_legacy_range_and_upstream_codes_pass() {
    for rev in [R0618, R1125, R2026] {
        let tag = format!("a-c10-{rev}");
        let mut h = host(&tag, &scripted(&fake("2025-06-18")), rev).await;
        let (v, _) = h.request("tools/call", call("own_code")).await;
        assert_eq!(error_code(&v, &tag), -32001, "{tag}: {v}");
        let mut own = Vec::new();
        let (v, _) = h.request("tools/call", call("no_such_tool")).await;
        own.push(error_code(&v, &tag));
        let (v, _) = h.request("resources/list", json!({})).await;
        own.push(error_code(&v, &tag));
        let (v, _) = h
            .request("tools/list", json!({"cursor": "not-a-cursor"}))
            .await;
        own.push(error_code(&v, &tag));
        if rev.era() == Era::Modern {
            let (v, _) = h.request("ping", json!({})).await;
            own.push(error_code(&v, &tag));
            let (v, _) = h
                .raw_request(
                    "tools/list",
                    json!({"_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
                )
                .await;
            own.push(error_code(&v, &tag));
        } else {
            let (v, _) = h
                .request("logging/setLevel", json!({"level": "info"}))
                .await;
            own.push(error_code(&v, &tag));
        }
        assert!(
            own.iter().all(|c| !(-32019..=-32000).contains(c)),
            "{tag}: {own:?}"
        );
        h.finish().await;
    }
}

/// A-C11: -32042 reaches only 2025-11-25 hosts; others get an error whose message
/// carries the URL (never -32042). -32002 (resource not found) only legacy hosts, as
/// dispositions_wire.rs::resource_not_found_is_recoded_for_the_host shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_elicitation_required_only_to_2025_11_25_hosts() {
    for rev in [R0618, R1125, R2026] {
        let tag = format!("a-c11-{rev}");
        let mut h = host(&tag, &scripted(&fake("2025-11-25")), rev).await;
        let (v, _) = h.request("tools/call", call("url_needed")).await;
        let code = error_code(&v, &tag);
        let message = v["error"]["message"].as_str().unwrap();
        if rev == R1125 {
            assert_eq!(code, -32042, "{tag}: {v}");
            assert_eq!(
                v["error"]["data"]["elicitations"][0]["url"],
                "https://auth.example.com/start"
            );
        } else {
            assert_ne!(code, -32042, "{tag}: {v}");
            assert!(
                !(-32099..=-32000).contains(&code) || rev.era() == Era::Legacy,
                "{tag}: {v}"
            );
            assert!(
                message.contains("https://auth.example.com/start"),
                "{tag}: {v}"
            );
        }
        h.finish().await;
    }
}

// ---------------------------------------------------------------------------------
// Capabilities per era.

/// A-C16, E-2, A-C19: a modern host's capabilities (roots, extensions) are read from
/// each request and never remembered: with `roots` declared a legacy upstream's
/// `roots/list` becomes an `input_required` ask, on the next request without it the
/// ask is refused. A modern upstream gets, per request, the capabilities of the host
/// request it serves, extensions included. A legacy upstream gets the brokerable set
/// once, at initialize.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_capabilities_are_per_request() {
    let mut h = Host::start("a-c16-legacy-up", &example(R0618), R2026).await;
    let mut p = call("test_list_roots");
    p["_meta"] = modern_meta(json!({"roots": {}}));
    let (v, _) = h.raw_request("tools/call", p).await;
    assert_eq!(result(&v, "first")["resultType"], "input_required", "{v}");
    let mut p = call("test_list_roots");
    p["_meta"] = modern_meta(json!({}));
    let (v, _) = h.raw_request("tools/call", p).await;
    assert!(
        v.pointer("/result/resultType") != Some(&json!("input_required")),
        "roots remembered from an earlier request: {v}"
    );
    let wire = h.finish().await;
    let init = sent(&wire, "initialize");
    assert_eq!(
        init[0]["params"]["capabilities"],
        json!({"roots": {}, "sampling": {}, "elicitation": {"form": {}, "url": {}}}),
        "{}",
        init[0]
    );

    let mut h = Host::start("a-c16-modern-up", &example(R2026), R2026).await;
    let declared = json!({"roots": {}, "extensions": {"com.example/ext": {"v": 1}}});
    let mut p = call("test_simple_text");
    p["_meta"] = modern_meta(declared.clone());
    let (v, _) = h.raw_request("tools/call", p).await;
    result(&v, "with caps");
    let mut p = call("test_simple_text");
    p["_meta"] = modern_meta(json!({}));
    let (v, _) = h.raw_request("tools/call", p).await;
    result(&v, "without caps");
    let wire = h.finish().await;
    let calls = sent(&wire, "tools/call");
    assert_eq!(calls.len(), 2, "{wire:?}");
    let caps =
        |c: &Value| c["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"].clone();
    assert_eq!(caps(calls[0]), declared);
    assert_eq!(caps(calls[1]), json!({}));
    assert!(sent(&wire, "initialize").is_empty(), "{wire:?}");
}

/// E-2: a legacy host's capabilities come from its initialize and hold for the
/// session: a host that declared no `roots` is never sent `roots/list`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_host_capabilities_come_from_initialize() {
    for up in [R0618, R2026] {
        let tag = format!("e-2-{up}");
        let tool = if up == R2026 {
            "test_input_required_result_list_roots"
        } else {
            "test_list_roots"
        };
        let mut h = Host::start(&tag, &example(up), R1125).await;
        h.initialize_only(json!({})).await;
        h.initialized().await;
        let (_, notes) = h.request("tools/call", call(tool)).await;
        assert!(
            notes.iter().all(|n| n["method"] != "roots/list"),
            "{tag}: roots/list to a host without roots: {notes:?}"
        );
        h.finish().await;
    }
}

/// A-C20, A-C19: mcpx declares its features in the DiscoverResult (capabilities there,
/// no extensions of its own to declare but the tasks extension it serves for an upstream
/// that has it, H13), never in results' `_meta`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_features_are_declared_only_on_discover() {
    let mut h = Host::start("a-c20", &example(R2026), R2026).await;
    let (v, _) = h.request("server/discover", json!({})).await;
    let caps = &result(&v, "discover")["capabilities"];
    assert!(caps["tools"].is_object(), "{v}");
    assert_eq!(
        caps.get("extensions"),
        Some(&json!({"io.modelcontextprotocol/tasks": {}})),
        "{v}"
    );
    for (method, params) in [
        ("tools/list", json!({})),
        ("tools/call", call("test_simple_text")),
        ("resources/read", json!({"uri": "test://static-text"})),
    ] {
        let (v, _) = h.request(method, params).await;
        let r = result(&v, method);
        assert!(r.get("capabilities").is_none(), "{method}: {r}");
        let meta = r["_meta"].as_object().unwrap();
        assert!(
            meta.keys()
                .all(|k| k == "io.modelcontextprotocol/serverInfo"),
            "{method}: {r}"
        );
    }
    h.finish().await;
}

// ---------------------------------------------------------------------------------
// Progress, content.

/// C-C7: a progress value that does not exceed the last one relayed for the token is
/// dropped: the upstream sends 1, 1, 0.5, 2 and the host sees 1, 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_host_only_increasing() {
    for rev in [R1125, R2026] {
        let tag = format!("c-c7-{rev}");
        let mut h = host(&tag, &scripted(&fake("2025-11-25")), rev).await;
        let mut p = call("jumpy");
        p["_meta"] = json!({"progressToken": "tok-7"});
        let (v, notes) = h.request("tools/call", p).await;
        result(&v, &tag);
        let seen: Vec<f64> = notes
            .iter()
            .filter(|n| n["method"] == "notifications/progress")
            .map(|n| {
                assert_eq!(n["params"]["progressToken"], "tok-7");
                n["params"]["progress"].as_f64().unwrap()
            })
            .collect();
        assert_eq!(seen, [1.0, 2.0], "{tag}: {notes:?}");
        h.finish().await;
    }
}

/// D-C8, D-C9: an upstream's embedded resource without `mimeType` reaches every host
/// unchanged; a prompt's `resource_link` passes unchanged to 2025-06-18+ hosts and
/// becomes a text block with its name and URI for 2024-11-05 and 2025-03-26 hosts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_resources_and_prompt_resource_links_per_host() {
    let no_mime = json!({"type":"resource","resource":{"uri":"test://no-mime","text":"plain"}});
    for rev in [R2411, R0326, R0618, R1125, R2026] {
        let tag = format!("d-c8-{rev}");
        let mut h = host(&tag, &scripted(&fake("2025-06-18")), rev).await;
        let (v, _) = h.request("tools/call", call("embedded")).await;
        assert_eq!(result(&v, &tag)["content"][0], no_mime, "{tag}: {v}");
        let (v, _) = h.request("prompts/get", json!({"name": "linked"})).await;
        let messages = &result(&v, &tag)["messages"];
        assert_eq!(messages[1]["content"], no_mime, "{tag}: {v}");
        let link = &messages[0]["content"];
        if rev >= R0618 {
            assert_eq!(
                link,
                &json!({"type":"resource_link","uri":"test://linked","name":"linked-doc"}),
                "{tag}"
            );
        } else {
            assert_eq!(link["type"], "text", "{tag}: {link}");
            let text = link["text"].as_str().unwrap();
            assert!(
                text.contains("linked-doc") && text.contains("test://linked"),
                "{tag}: {text}"
            );
        }
        h.finish().await;
    }
}

// ---------------------------------------------------------------------------------
// Subscriptions.

async fn listen(h: &mut Host, id: &str, notifications: Value) -> Value {
    let mut params = json!({"notifications": notifications});
    params["_meta"] = modern_meta(json!({}));
    h.send(&json!({"jsonrpc":"2.0","id":id,"method":"subscriptions/listen","params":params}))
        .await;
    loop {
        let v = h.next_frame("ack").await;
        if v["method"] == "notifications/subscriptions/acknowledged"
            && v["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == id
        {
            return v;
        }
    }
}

/// Reads frames until `pred` matches one or `wait` passes; returns all read.
async fn read_for(h: &mut Host, wait: Duration, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut seen = Vec::new();
    let _ = tokio::time::timeout(wait, async {
        loop {
            let v = h.next_frame("frames").await;
            let done = pred(&v);
            seen.push(v);
            if done {
                return;
            }
        }
    })
    .await;
    seen
}

/// D-C3: a modern host gets notifications/resources/list_changed only on a listen
/// stream whose filter asked for resourcesListChanged, tagged with that listen's id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_list_changes_reach_modern_hosts_only_when_asked() {
    let config = json!({"mcpServers": {"up": {
        "command": env!("CARGO_BIN_EXE_mcpx"), "args": ["example-server"]}}});
    let mut h = Host::start("d-c3", &config, R2026).await;
    let ack = listen(&mut h, "tools-only", json!({"toolsListChanged": true})).await;
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    let (v, mut seen) = h
        .request("tools/call", call("test_trigger_resource_change"))
        .await;
    result(&v, "trigger");
    seen.extend(read_for(&mut h, Duration::from_millis(800), |_| false).await);
    assert!(
        seen.iter()
            .all(|n| n["method"] != "notifications/resources/list_changed"),
        "unrequested resources/list_changed: {seen:?}"
    );
    listen(&mut h, "resources", json!({"resourcesListChanged": true})).await;
    let (v, mut seen) = h
        .request("tools/call", call("test_trigger_resource_change"))
        .await;
    result(&v, "trigger");
    let is_change = |n: &Value| n["method"] == "notifications/resources/list_changed";
    if !seen.iter().any(is_change) {
        seen.extend(read_for(&mut h, Duration::from_secs(10), is_change).await);
    }
    let changes: Vec<&Value> = seen.iter().filter(|n| is_change(n)).collect();
    assert_eq!(changes.len(), 1, "{seen:?}");
    assert_eq!(
        changes[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "resources"
    );
    h.finish().await;
}

/// D-C4: resources.subscribe is advertised when the upstream supports it. A legacy
/// host's resources/subscribe reaches the upstream and updates reach its session; a
/// modern host's resources/subscribe is -32601, and it subscribes with the listen
/// filter's resourceSubscriptions instead, getting updates tagged with its listen id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_subscriptions_per_host_era() {
    let watched = "test://watched-resource";
    for up in [R0618, R2026] {
        // Legacy host.
        let tag = format!("d-c4-legacy-{up}");
        let mut h = Host::start(&tag, &example(up), R1125).await;
        let init = h.initialize_only(json!({})).await;
        h.initialized().await;
        assert_eq!(
            result(&init, &tag)["capabilities"]["resources"]["subscribe"],
            true,
            "{init}"
        );
        let (v, _) = h
            .request("resources/subscribe", json!({"uri": watched}))
            .await;
        result(&v, &tag);
        let (v, mut seen) = h
            .request("tools/call", call("test_trigger_resource_update"))
            .await;
        result(&v, &tag);
        let is_update = |n: &Value| n["method"] == "notifications/resources/updated";
        if !seen.iter().any(is_update) {
            seen.extend(read_for(&mut h, Duration::from_secs(10), is_update).await);
        }
        let update = seen.iter().find(|n| is_update(n));
        assert_eq!(
            update.map(|u| u["params"]["uri"].clone()),
            Some(json!(watched)),
            "{tag}: {seen:?}"
        );
        let wire = h.finish().await;
        if up.era() == Era::Legacy {
            assert_eq!(sent(&wire, "resources/subscribe").len(), 1, "{tag}");
        }

        // Modern host.
        let tag = format!("d-c4-modern-{up}");
        let mut h = Host::start(&tag, &example(up), R2026).await;
        let (v, _) = h.request("server/discover", json!({})).await;
        assert_eq!(
            result(&v, &tag)["capabilities"]["resources"]["subscribe"],
            true
        );
        let (v, _) = h
            .request("resources/subscribe", json!({"uri": watched}))
            .await;
        assert_eq!(error_code(&v, &tag), -32601, "{tag}: {v}");
        let ack = listen(&mut h, "res", json!({"resourceSubscriptions": [watched]})).await;
        assert_eq!(
            ack["params"]["notifications"],
            json!({"resourceSubscriptions": [watched]}),
            "{tag}"
        );
        // The upstream subscription (a modern upstream: mcpx's own listen) settles
        // after the ack, and nothing tells the host when: trigger until an update
        // comes (bounded); a trigger before it settles is lost.
        let mut seen = Vec::new();
        let every = Duration::from_millis(50);
        let update = crate::wait::poll_every(Duration::from_secs(10), every, async || {
            let (v, notes) = h
                .request("tools/call", call("test_trigger_resource_update"))
                .await;
            result(&v, &tag);
            seen.extend(notes);
            if !seen.iter().any(is_update) {
                seen.extend(read_for(&mut h, Duration::from_millis(500), is_update).await);
            }
            seen.iter().find(|n| is_update(n)).cloned()
        })
        .await
        .unwrap_or_else(|| panic!("{tag}: no update: {seen:?}"));
        assert_eq!(update["params"]["uri"], watched);
        assert_eq!(
            update["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            "res"
        );
        h.finish().await;
    }
}

// ---------------------------------------------------------------------------------
// Streamable HTTP.

/// `mcpx serve --http` fronting the dual-era example server (stdio).
async fn http_gateway(dir: &Path) -> (Child, u16) {
    let cfg = dir.join("mcpx.json");
    std::fs::write(
        &cfg,
        json!({"mcpServers": {"up": {"command": env!("CARGO_BIN_EXE_mcpx"), "args": ["example-server"]}}})
            .to_string(),
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpx"));
    cmd.args(["serve", "--config"])
        .arg(&cfg)
        .args(["--http", "127.0.0.1:0"])
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .stdout(Stdio::null());
    start_listening(cmd).await
}

/// An HTTP response being read: status, headers, and a de-chunked body.
struct Http {
    status: u16,
    headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
    chunked: bool,
    /// Bytes left in the current chunk.
    left: usize,
    done: bool,
}

impl Http {
    async fn send(port: u16, method: &str, headers: &[(&str, &str)], body: Option<&Value>) -> Http {
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut req = format!(
            "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            body.len()
        );
        if !body.is_empty() {
            req.push_str("Content-Type: application/json\r\n");
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(req.as_bytes()).await.unwrap();
        let mut reader = BufReader::new(s);
        let mut line = String::new();
        reader.read_line(&mut line).await.unwrap();
        let status = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        let mut headers = Vec::new();
        loop {
            let mut l = String::new();
            reader.read_line(&mut l).await.unwrap();
            let l = l.trim_end();
            if l.is_empty() {
                break;
            }
            let (k, v) = l.split_once(':').unwrap();
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
        let chunked = headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
        Http {
            status,
            headers,
            reader,
            chunked,
            left: 0,
            done: false,
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The next piece of the body; `None` at its end.
    async fn piece(&mut self) -> Option<Vec<u8>> {
        if self.done {
            return None;
        }
        if !self.chunked {
            let mut buf = vec![0u8; 4096];
            let n = self.reader.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                self.done = true;
                return None;
            }
            buf.truncate(n);
            return Some(buf);
        }
        if self.left == 0 {
            let mut size = String::new();
            if self.reader.read_line(&mut size).await.unwrap_or(0) == 0 {
                self.done = true;
                return None;
            }
            let size = size.trim();
            if size.is_empty() {
                // The CRLF after the previous chunk.
                return Some(Vec::new());
            }
            self.left = usize::from_str_radix(size.split(';').next().unwrap(), 16).unwrap();
            if self.left == 0 {
                self.done = true;
                return None;
            }
        }
        let mut buf = vec![0u8; self.left.min(4096)];
        let n = self.reader.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            self.done = true;
            return None;
        }
        buf.truncate(n);
        self.left -= n;
        Some(buf)
    }

    /// The whole body.
    async fn body(mut self) -> (u16, String) {
        let mut all = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(p) = self.piece().await {
                all.extend(p);
            }
        })
        .await;
        assert!(read.is_ok(), "the body did not end");
        (self.status, String::from_utf8(all).unwrap())
    }
}

/// The JSON frames of an SSE body, or the one JSON body.
fn frames(body: &str) -> Vec<Value> {
    if body.trim_start().starts_with('{') {
        return vec![serde_json::from_str(body).unwrap()];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        // A line cut by the end of what was read (a live GET stream) is skipped.
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

fn validate_all(rev: Revision, frames: &[Value]) {
    for f in frames {
        tap()
            .validate_frame(rev, &f.to_string())
            .unwrap_or_else(|e| panic!("to the host: {e}"));
    }
}

/// A legacy session over HTTP; returns its id.
async fn http_session(port: u16, rev: Revision) -> String {
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion": rev.as_str(), "capabilities": {},
        "clientInfo": {"name": "serve-side", "version": "1"}}});
    let r = Http::send(port, "POST", &[], Some(&init)).await;
    let sid = r.header("mcp-session-id").unwrap().to_owned();
    let (status, body) = r.body().await;
    assert_eq!(status, 200, "{body}");
    let v = Http::send(
        port,
        "POST",
        &[
            ("Mcp-Session-Id", &sid),
            ("MCP-Protocol-Version", rev.as_str()),
        ],
        Some(&json!({"jsonrpc":"2.0","method":"notifications/initialized"})),
    )
    .await;
    assert_eq!(v.status, 202);
    sid
}

fn modern_headers<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
    ];
    if let Some(n) = name {
        h.push(("Mcp-Name", n));
    }
    h
}

fn slow_call(id: i64, token: &str, modern: bool) -> Value {
    let mut v = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
        "name":"test_tool_with_progress","arguments":{"steps":5,"delayMs":150},
        "_meta":{"progressToken":token}}});
    if modern {
        for (k, m) in modern_meta(json!({})).as_object().unwrap() {
            v["params"]["_meta"][k] = m.clone();
        }
    }
    v
}

/// B-C1: a modern host that POSTs a JSON-RPC response gets 400 with an id-less -32600;
/// on stdio such a response is dropped (nothing is written back, the next request is
/// answered). (That a modern host never receives a request:
/// dispositions_wire.rs::asks_reach_legacy_hosts_as_requests_and_modern_hosts_as_input_required.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_hosts_cannot_send_responses() {
    let d = temp_dir("b-c1-http");
    let (_gw, port) = http_gateway(&d).await;
    let r = Http::send(
        port,
        "POST",
        &[("MCP-Protocol-Version", "2026-07-28")],
        Some(&json!({"jsonrpc":"2.0","id":5,"result":{}})),
    )
    .await;
    let (status, body) = r.body().await;
    assert_eq!(status, 400, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], -32600, "{v}");
    assert!(v.get("id").is_none_or(Value::is_null), "{v}");
    tap().validate_frame(R2026, &body).unwrap();

    let mut h = Host::start("b-c1-stdio", &example(R2026), R2026).await;
    h.send(&json!({"jsonrpc":"2.0","id":"x","result":{}})).await;
    h.send(&json!({"jsonrpc":"2.0","id":"e","error":{"code":-32603,"message":"m"}}))
        .await;
    let (v, notes) = h.request("tools/list", json!({})).await;
    result(&v, "tools/list");
    assert!(notes.is_empty(), "mcpx answered a response: {notes:?}");
    h.finish().await;
}

/// B-C4: on a POST's SSE stream mcpx writes the response before the stream ends, in
/// both eras (2025-11-25 primes the stream with an event id and still keeps it open).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_streams_end_with_their_response() {
    let d = temp_dir("b-c4");
    let (_gw, port) = http_gateway(&d).await;
    for rev in [R0326, R1125] {
        let sid = http_session(port, rev).await;
        let r = Http::send(
            port,
            "POST",
            &[
                ("Mcp-Session-Id", &sid),
                ("MCP-Protocol-Version", rev.as_str()),
            ],
            Some(&slow_call(9, "p", false)),
        )
        .await;
        assert_eq!(r.header("content-type"), Some("text/event-stream"), "{rev}");
        let (_, body) = r.body().await;
        let f = frames(&body);
        validate_all(rev, &f);
        assert!(f.len() > 1, "{rev}: {body}");
        assert_eq!(f.last().unwrap()["id"], 9, "{rev}: {body}");
        assert!(f.last().unwrap()["result"].is_object(), "{rev}: {body}");
    }
    let r = Http::send(
        port,
        "POST",
        &modern_headers("tools/call", Some("test_tool_with_progress")),
        Some(&slow_call(10, "p", true)),
    )
    .await;
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let (_, body) = r.body().await;
    let f = frames(&body);
    validate_all(R2026, &f);
    assert_eq!(f.last().unwrap()["id"], 10, "{body}");
    assert!(f.last().unwrap()["result"].is_object(), "{body}");
}

/// B-C3: a POST's SSE stream carries only messages related to its request (progress
/// for its token, then its response); a list change that happens meanwhile goes to the
/// legacy session's GET stream, and for a modern host (no listen stream) nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_streams_carry_only_related_messages() {
    let d = temp_dir("b-c3");
    let (_gw, port) = http_gateway(&d).await;
    // Legacy: a GET stream, a slow call, and a tool change during it.
    let sid = http_session(port, R1125).await;
    let legacy = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let mut get = Http::send(port, "GET", &legacy, None).await;
    assert_eq!(get.status, 200);
    let slow = Http::send(port, "POST", &legacy, Some(&slow_call(2, "slow", false))).await;
    let trigger = json!({"jsonrpc":"2.0","id":3,"method":"tools/call",
                         "params": call("test_trigger_tool_change")});
    let (status, body) = Http::send(port, "POST", &legacy, Some(&trigger))
        .await
        .body()
        .await;
    assert_eq!(status, 200, "{body}");
    let (_, body) = slow.body().await;
    let f = frames(&body);
    validate_all(R1125, &f);
    let (last, related) = f.split_last().unwrap();
    assert_eq!(last["id"], 2, "{body}");
    assert!(!related.is_empty(), "{body}");
    for n in related {
        assert_eq!(
            n["method"], "notifications/progress",
            "unrelated on the POST stream: {n}"
        );
        assert_eq!(n["params"]["progressToken"], "slow");
    }
    let mut text = String::new();
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(p) = get.piece().await {
            text.push_str(&String::from_utf8_lossy(&p));
            if text.contains("notifications/tools/list_changed") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        got.ok(),
        Some(true),
        "no list_changed on the GET stream: {text}"
    );
    validate_all(R1125, &frames(&text));

    // Modern: the change during a slow call is not on its stream.
    let slow = Http::send(
        port,
        "POST",
        &modern_headers("tools/call", Some("test_tool_with_progress")),
        Some(&slow_call(4, "slow", true)),
    )
    .await;
    let mut trigger = json!({"jsonrpc":"2.0","id":5,"method":"tools/call",
                             "params": call("test_trigger_tool_change")});
    trigger["params"]["_meta"] = modern_meta(json!({}));
    let (status, body) = Http::send(
        port,
        "POST",
        &modern_headers("tools/call", Some("test_trigger_tool_change")),
        Some(&trigger),
    )
    .await
    .body()
    .await;
    assert_eq!(status, 200, "{body}");
    let (_, body) = slow.body().await;
    let f = frames(&body);
    validate_all(R2026, &f);
    let (last, related) = f.split_last().unwrap();
    assert_eq!(last["id"], 4, "{body}");
    for n in related {
        assert_eq!(
            n["method"], "notifications/progress",
            "unrelated on the POST stream: {n}"
        );
    }
}

/// B-C11: a modern notification POST is accepted with 202 without Mcp-Method or
/// Mcp-Name; an MCP-Protocol-Version naming an unsupported version is 400. (mcpx's
/// client POSTs no notification to a modern HTTP upstream:
/// gateway_cancel.rs::a_modern_http_upstream_is_cancelled_by_closing_the_stream.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_notification_posts_need_only_a_supported_version() {
    let d = temp_dir("b-c11");
    let (_gw, port) = http_gateway(&d).await;
    let note = json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                      "params":{"requestId": 99, "reason": "test"}});
    let r = Http::send(
        port,
        "POST",
        &[("MCP-Protocol-Version", "2026-07-28")],
        Some(&note),
    )
    .await;
    let (status, body) = r.body().await;
    assert_eq!(status, 202, "{body}");
    assert!(body.is_empty(), "{body}");
    let r = Http::send(
        port,
        "POST",
        &[("MCP-Protocol-Version", "2099-01-01")],
        Some(&note),
    )
    .await;
    let (status, body) = r.body().await;
    assert_eq!(status, 400, "{body}");
}

// ---------------------------------------------------------------------------------
// serverInfo, both sides.

/// D-C12: legacy hosts get serverInfo and protocolVersion top-level in InitializeResult,
/// modern hosts supportedVersions in DiscoverResult and serverInfo in every result's
/// `_meta` (dispositions_wire.rs::server_info_placement_per_era); mcpx's client reads an
/// upstream's serverInfo from either place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_reads_server_info_from_either_place() {
    for rev in [R0618, R1125, R2026] {
        let target = mcpx_client::Target::new(
            "up",
            mcpx_client::TargetTransport::Stdio {
                command: env!("CARGO_BIN_EXE_mcpx").to_owned(),
                args: vec![
                    "example-server".into(),
                    "--revision".into(),
                    rev.as_str().into(),
                ],
                env: Vec::new(),
                cwd: None,
            },
        );
        let conn = mcpx_client::connect(&target, &mcpx_client::EraCache::disabled())
            .await
            .unwrap();
        let facts = conn.facts();
        assert_eq!(facts.era, rev.era(), "{rev}");
        assert!(
            facts.info["name"].as_str().is_some_and(|n| !n.is_empty()),
            "{rev}: {:?}",
            facts.info
        );
        conn.close().await;
    }
}

/// A-C19: nothing is negotiated by an initialization on the modern path: an
/// `initialize` POSTed as 2026-07-28 is an unknown method (404, -32601).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_initialize_negotiates_nothing() {
    let d = temp_dir("a-c19");
    let (_gw, port) = http_gateway(&d).await;
    let mut init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion": "2025-11-25", "capabilities": {"extensions": {"com.example/ext": {}}},
        "clientInfo": {"name": "x", "version": "1"}}});
    init["params"]["_meta"] = modern_meta(json!({}));
    let r = Http::send(
        port,
        "POST",
        &modern_headers("initialize", None),
        Some(&init),
    )
    .await;
    assert!(r.header("mcp-session-id").is_none());
    let (status, body) = r.body().await;
    assert_eq!(status, 404, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], -32601, "{v}");
    tap().validate_frame(R2026, &body).unwrap();
}

/// `mcpx serve --http` in front of the 2025-11-25 example server (a legacy upstream),
/// logging what it sends upstream to `dir/wire.jsonl`.
async fn legacy_upstream_gateway(dir: &Path) -> (Child, u16) {
    let cfg = dir.join("mcpx.json");
    std::fs::write(&cfg, example(R1125).to_string()).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpx"));
    cmd.args(["serve", "--config"])
        .arg(&cfg)
        .args(["--http", "127.0.0.1:0"])
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("MCPX_WIRE_LOG", dir.join("wire.jsonl"))
        .stdout(Stdio::null());
    start_listening(cmd).await
}

/// What [`legacy_upstream_gateway`] has sent upstream so far.
fn upstream_wire(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("wire.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A legacy host's `resources/subscribe` or `resources/unsubscribe` over HTTP, answered
/// `{}`.
async fn legacy_subscription(port: u16, sid: &str, id: i64, method: &str, uri: &str) {
    let r = Http::send(
        port,
        "POST",
        &[
            ("Mcp-Session-Id", sid),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        Some(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"uri": uri}})),
    )
    .await;
    let (status, body) = r.body().await;
    assert_eq!(status, 200, "{method}: {body}");
    let frames = frames(&body);
    validate_all(R1125, &frames);
    assert!(frames.iter().any(|f| f["result"] == json!({})), "{body}");
}

/// D-C4 (legacy upstream, legacy hosts): one upstream subscription serves every host
/// subscribed to a URI, so it ends only when the last of them unsubscribes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_subscription_ends_with_its_last_host() {
    let dir = temp_dir("unsubscribe-last");
    let (_gateway, port) = legacy_upstream_gateway(&dir).await;
    let uri = "test://static-text";
    let (a, b) = (
        http_session(port, R1125).await,
        http_session(port, R1125).await,
    );
    for (sid, id, method) in [
        (&a, 2, "resources/subscribe"),
        (&b, 2, "resources/subscribe"),
        (&a, 3, "resources/unsubscribe"),
        (&b, 3, "resources/unsubscribe"),
    ] {
        legacy_subscription(port, sid, id, method, uri).await;
    }
    let upstream = upstream_wire(&dir);
    assert_eq!(
        sent(&upstream, "resources/subscribe").len(),
        2,
        "{upstream:?}"
    );
    // Only B's unsubscribe, the last, reached the upstream.
    assert_eq!(
        sent(&upstream, "resources/unsubscribe").len(),
        1,
        "{upstream:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// D-C4 across eras (legacy upstream): mcpx's one upstream subscription to a URI is
/// held by legacy hosts' subscriptions and modern hosts' listens alike, and ends only
/// when the last holder of either kind lets go. A legacy host's unsubscribe leaves it
/// to the listens; their ends let go of it. Over HTTP, as a process; the absences
/// are checked in-process (mcpx-gateway's tests/it/subscriptions.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_subscription_outlives_a_legacy_unsubscribe_while_a_listen_holds_it() {
    let dir = temp_dir("unsubscribe-listen");
    let (_gateway, port) = legacy_upstream_gateway(&dir).await;
    let uri = "test://static-text";
    // Two modern hosts' listens for the URI, each open on its own connection.
    let listen = async |id: &str| {
        let req = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {
            "notifications": {"resourceSubscriptions": [uri]},
            "_meta": modern_meta(json!({}))}});
        let mut r = Http::send(
            port,
            "POST",
            &modern_headers("subscriptions/listen", None),
            Some(&req),
        )
        .await;
        assert_eq!(r.status, 200);
        let mut seen = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(p) = r.piece().await {
                seen.extend(p);
                if String::from_utf8_lossy(&seen)
                    .contains("notifications/subscriptions/acknowledged")
                {
                    return;
                }
            }
        })
        .await
        .expect("no acknowledgement");
        let ack = frames(&String::from_utf8_lossy(&seen))
            .into_iter()
            .find(|f| f["method"] == "notifications/subscriptions/acknowledged")
            .unwrap();
        validate_all(R2026, std::slice::from_ref(&ack));
        assert_eq!(
            ack["params"]["notifications"]["resourceSubscriptions"],
            json!([uri]),
            "{ack}"
        );
        r
    };
    let first = listen("A").await;
    let second = listen("B").await;
    let unsubscribes = || sent(&upstream_wire(&dir), "resources/unsubscribe").len();
    // A legacy host subscribes and lets go: the listens still hold the subscription.
    let sid = http_session(port, R1125).await;
    legacy_subscription(port, &sid, 2, "resources/subscribe", uri).await;
    legacy_subscription(port, &sid, 3, "resources/unsubscribe", uri).await;
    assert_eq!(unsubscribes(), 0, "{:?}", upstream_wire(&dir));
    // Both listens end (their connections close): mcpx unsubscribes, once. That the
    // first one's end alone lets go of nothing is checked on the paused clock, in
    // mcpx-gateway's tests/it/subscriptions.rs.
    drop(first);
    drop(second);
    let every = Duration::from_millis(50);
    let ended = crate::wait::poll_every(Duration::from_secs(10), every, async || {
        (unsubscribes() > 0).then_some(())
    })
    .await;
    assert!(ended.is_some(), "no unsubscribe: {:?}", upstream_wire(&dir));
    let upstream = upstream_wire(&dir);
    assert_eq!(unsubscribes(), 1, "{upstream:?}");
    // Each listen subscribed, and the legacy host did.
    assert_eq!(
        sent(&upstream, "resources/subscribe").len(),
        3,
        "{upstream:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
