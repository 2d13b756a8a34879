//! Sampling and roots asks through `mcpx serve` (a real process, stdio), in every
//! pairing of eras: what mcpx checks, lowers and relays unchanged, what it refuses and
//! to whom, what it never caches, and what it sends (or not) besides the asks
//! (progress, cancellation, roots list changes). Upstreams are `mcpx example-server`
//! or scripted `sh` servers that ask exactly what a test needs. Every frame mcpx sends
//! the host is validated against the host's revision, every frame it sends the
//! upstream (`MCPX_WIRE_LOG`) against the upstream's; each test names the register ids
//! it proves.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

use std::time::Duration;

use mcpx_protocol::{Era, Revision};
use serde_json::{Value, json};

use crate::common;
use common::*;

const R1105: Revision = Revision::V2024_11_05;

impl Host {
    /// `tools/call` of `tool`; a modern host declares `caps` in the request.
    async fn call(
        &mut self,
        tool: &str,
        args: Value,
        caps: Value,
        extra: Value,
        answer: &mut dyn FnMut(&Value) -> Vec<Value>,
    ) -> (Value, Vec<Value>) {
        let mut params = json!({"name": tool, "arguments": args});
        if self.rev.era() == Era::Modern {
            params["_meta"] = modern_meta(caps);
        }
        for (k, v) in extra.as_object().unwrap() {
            params[k] = v.clone();
        }
        let (v, asks, notes) = self.exchange("tools/call", params, answer).await;
        if self.rev.era() == Era::Modern {
            // 2026-07-28 basic/patterns: never a server-to-client request on the wire.
            assert!(asks.is_empty(), "{asks:?}");
        }
        let _ = notes;
        (v, asks)
    }
}

async fn legacy_host(tag: &str, config: &Value, rev: Revision, caps: Value) -> Host {
    let mut h = Host::start(tag, config, rev).await;
    h.initialize(caps).await;
    h
}

/// The response frame answering request `req` with `result`.
fn reply(req: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": req["id"], "result": result})
}

/// Answers every ask with `result`.
fn always(result: Value) -> impl FnMut(&Value) -> Vec<Value> {
    move |req| vec![reply(req, result.clone())]
}

fn never(req: &Value) -> Vec<Value> {
    panic!("the host was asked {req}")
}

fn sampled(text: &str) -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": "m",
           "stopReason": "endTurn"})
}

/// mcpx's responses to the scripted upstream's ask (id `"ask-1"`), in order.
fn ask_answers(wire: &[Value]) -> Vec<Value> {
    wire.iter()
        .filter(|f| f["id"] == "ask-1" && f.get("method").is_none())
        .cloned()
        .collect()
}

/// A scripted upstream at `rev` with one tool per `(name, ask)`: calling it makes the
/// upstream ask the client `ask` (`{"method", "params"}`) and then answer the call with
/// the text "answered". A legacy upstream (initialize) asks with a wire request of id
/// `"ask-1"` and answers when mcpx responds to it; a 2026-07-28 upstream
/// (`server/discover`) answers `input_required` with the ask under the key `q`, and
/// "answered" on a retry that carries `inputResponses`.
fn asking(rev: Revision, tools: &[(&str, Value)]) -> Value {
    let out = |s: String| format!("out '{s}'");
    let list: Vec<Value> = tools
        .iter()
        .map(|(n, _)| json!({"name": n, "inputSchema": {"type": "object"}}))
        .collect();
    let answered = json!({"content": [{"type": "text", "text": "answered"}]});
    let mut branches = String::new();
    for (name, ask) in tools {
        let line = if rev.era() == Era::Modern {
            let r = json!({"resultType": "input_required", "inputRequests": {"q": ask}});
            format!(r#"{{"jsonrpc":"2.0","id":'"$id"',"result":{r}}}"#)
        } else {
            let mut req = ask.clone();
            req["jsonrpc"] = json!("2.0");
            req["id"] = json!("ask-1");
            req.to_string()
        };
        branches.push_str(&format!(
            "        *'\"name\":\"{name}\"'*) {} ;;\n",
            out(line)
        ));
    }
    let (discover, tools_result, done) = if rev.era() == Era::Modern {
        let l =
            json!({"tools": list, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"});
        let mut a = answered.clone();
        a["resultType"] = json!("complete");
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":'"$id"',"result":{}}}"#,
                json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                       "serverInfo": {"name": "asker", "version": "1"}, "ttlMs": 0,
                       "cacheScope": "private", "resultType": "complete"})
            ),
            l,
            a,
        )
    } else {
        (
            r#"{"jsonrpc":"2.0","id":'"$id"',"error":{"code":-32601,"message":"Method not found"}}"#
                .to_owned(),
            json!({"tools": list}),
            answered,
        )
    };
    let init = json!({"protocolVersion": rev.as_str(), "capabilities": {"tools": {}},
                      "serverInfo": {"name": "asker", "version": "1"}});
    let script = format!(
        r#"out() {{ printf '%s\n' "$1"; }}
cid=0
while IFS= read -r line; do
  case "$line" in
    *'"id":"ask-1"'*)
      {answer_call}
      continue ;;
  esac
  id=$(printf '%s' "$line" | grep -o '"id":[0-9][0-9]*' | head -n 1 | cut -d: -f2)
  [ -z "$id" ] && continue
  case "$line" in
    *'"method":"server/discover"'*) {discover} ;;
    *'"method":"initialize"'*) {init} ;;
    *'"method":"tools/list"'*) {list} ;;
    *'"method":"tools/call"'*)
      cid=$id
      case "$line" in
        *'"inputResponses"'*) {done} ;;
{branches}      esac ;;
    *) out '{{"jsonrpc":"2.0","id":'"$id"',"result":{{}}}}' ;;
  esac
done
"#,
        answer_call = out(format!(
            r#"{{"jsonrpc":"2.0","id":'"$cid"',"result":{}}}"#,
            json!({"content": [{"type": "text", "text": "answered"}]})
        )),
        discover = out(discover),
        init = out(format!(
            r#"{{"jsonrpc":"2.0","id":'"$id"',"result":{init}}}"#
        )),
        list = out(format!(
            r#"{{"jsonrpc":"2.0","id":'"$id"',"result":{tools_result}}}"#
        )),
        done = out(format!(
            r#"{{"jsonrpc":"2.0","id":'"$id"',"result":{done}}}"#
        )),
    );
    json!({"mcpServers": {"up": {"command": "sh", "args": ["-c", script]}}})
}

fn sampling_ask(params: Value) -> Value {
    json!({"method": "sampling/createMessage", "params": params})
}

fn user_text(t: &str) -> Value {
    json!({"role": "user", "content": {"type": "text", "text": t}})
}

fn tool_use(id: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "weather", "input": {"city": "Paris"},
           "_meta": {"cache/key": format!("use-{id}")}})
}

fn tool_result(id: &str) -> Value {
    json!({"type": "tool_result", "toolUseId": id,
           "content": [{"type": "text", "text": "18C"}],
           "_meta": {"cache/key": format!("result-{id}")}})
}

fn weather_tool() -> Value {
    json!({"name": "weather", "inputSchema": {"type": "object"}})
}

/// The sampling asks the scripted upstreams send, by tool name.
fn sampling_tools() -> Vec<(&'static str, Value)> {
    vec![
        // One block in an array, includeContext and maxTokens set (E-7, E-8, E-28).
        (
            "one_block",
            sampling_ask(json!({
                "messages": [{"role": "user", "content": [
                    {"type": "text", "text": "hi", "_meta": {"k": 1}}]}],
                "maxTokens": 77, "includeContext": "thisServer"})),
        ),
        // Two blocks: no pre-2025-11-25 message holds them (E-7).
        (
            "two_blocks",
            sampling_ask(json!({
                "messages": [{"role": "user", "content": [
                    {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
                "maxTokens": 10})),
        ),
        // A tool loop: tool_use/tool_result content with _meta, tools (E-7, E-23, E-27).
        (
            "tool_loop",
            sampling_ask(json!({
                "messages": [user_text("weather?"),
                             {"role": "assistant", "content": [tool_use("a"), tool_use("b")]},
                             {"role": "user", "content": [tool_result("a"), tool_result("b")]}],
                "tools": [weather_tool()], "toolChoice": {"mode": "auto"},
                "maxTokens": 1000})),
        ),
        // toolChoice alone needs sampling.tools as well (E-23).
        (
            "tool_choice",
            sampling_ask(
                json!({"messages": [user_text("x")], "toolChoice": {"mode": "none"},
                                "maxTokens": 10}),
            ),
        ),
        // Malformed (E-16): a message without role, one without content; a user
        // message mixing tool results with text (E-31, request side).
        (
            "no_role",
            sampling_ask(
                json!({"messages": [{"content": {"type": "text", "text": "x"}}],
                                "maxTokens": 10}),
            ),
        ),
        (
            "no_content",
            sampling_ask(json!({"messages": [{"role": "user"}], "maxTokens": 10})),
        ),
        (
            "mixed_user",
            sampling_ask(json!({
                "messages": [{"role": "user", "content": [tool_result("a"),
                             {"type": "text", "text": "and also"}]}],
                "tools": [weather_tool()], "maxTokens": 10})),
        ),
        // A progress token on the ask (C-C6).
        (
            "with_progress",
            sampling_ask(json!({"messages": [user_text("slow")], "maxTokens": 10,
                                "_meta": {"progressToken": "up-7"}})),
        ),
    ]
}

fn sampling_upstream(rev: Revision) -> Value {
    asking(rev, &sampling_tools())
}

fn ask_params(tool: &str) -> Value {
    sampling_tools()
        .into_iter()
        .find(|(n, _)| *n == tool)
        .unwrap()
        .1["params"]
        .clone()
}

/// The params the host was sent, without mcpx's own `_meta` stamp.
fn unstamped(ask: &Value) -> Value {
    let mut p = ask["params"].clone();
    if let Some(m) = p.get_mut("_meta").and_then(Value::as_object_mut) {
        m.remove("mcpx/relatedRequestId");
        if m.is_empty() {
            p.as_object_mut().unwrap().remove("_meta");
        }
    }
    p
}

// ---------------------------------------------------------------------------------
// Sampling: lowering and checks.

/// E-7, E-8, E-27, E-28: a legacy upstream's sampling ask reaches an older legacy host
/// lowered (a one-block array unwrapped, the block's `_meta`, includeContext and
/// maxTokens kept); what the host's revision cannot hold (two blocks, tool content,
/// tools) never reaches it and the upstream hears -32602. A 2025-11-25 host that
/// declared sampling.tools gets the tool loop unchanged, tool content `_meta` included.
/// The hosts' results pass upward unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_asks_are_lowered_for_legacy_hosts() {
    let caps = json!({"sampling": {"tools": {}}});
    let mut h = legacy_host("lower-0618", &sampling_upstream(R1125), R0618, caps.clone()).await;
    let answer = sampled("fewer tokens than asked");
    let (v, asks) = h
        .call(
            "one_block",
            json!({}),
            json!({}),
            json!({}),
            &mut always(answer.clone()),
        )
        .await;
    assert_eq!(text(result(&v, "one_block")), "answered");
    assert_eq!(asks.len(), 1);
    let mut lowered = ask_params("one_block");
    lowered["messages"][0]["content"] = json!({"type": "text", "text": "hi", "_meta": {"k": 1}});
    assert_eq!(unstamped(&asks[0]), lowered, "{}", asks[0]);
    for tool in ["two_blocks", "tool_loop"] {
        let (v, _) = h
            .call(tool, json!({}), json!({}), json!({}), &mut never)
            .await;
        assert_eq!(text(result(&v, tool)), "answered");
    }
    let answers = ask_answers(&h.finish_checked(R1125).await);
    assert_eq!(answers.len(), 3, "{answers:?}");
    // E-28: the result (fewer tokens than maxTokens) is relayed as the host sent it.
    assert_eq!(answers[0]["result"], answer, "{answers:?}");
    for a in &answers[1..] {
        assert_eq!(a["error"]["code"], -32602, "{a}");
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains("2025-06-18"),
            "{a}"
        );
    }

    // 2025-11-25 with sampling.tools: everything passes unchanged, both ways.
    let mut h = legacy_host("lower-1125", &sampling_upstream(R1125), R1125, caps).await;
    let loop_answer = json!({"role": "assistant", "model": "m", "stopReason": "toolUse",
                             "content": [{"type": "text", "text": "checking"}, tool_use("c")]});
    let (v, asks) = h
        .call(
            "tool_loop",
            json!({}),
            json!({}),
            json!({}),
            &mut always(loop_answer.clone()),
        )
        .await;
    assert_eq!(text(result(&v, "tool_loop")), "answered");
    assert_eq!(unstamped(&asks[0]), ask_params("tool_loop"), "{}", asks[0]);
    let (_, asks) = h
        .call(
            "two_blocks",
            json!({}),
            json!({}),
            json!({}),
            &mut always(sampled("ok")),
        )
        .await;
    assert_eq!(unstamped(&asks[0]), ask_params("two_blocks"));
    let answers = ask_answers(&h.finish_checked(R1125).await);
    assert_eq!(answers[0]["result"], loop_answer, "{answers:?}");
}

/// E-16, E-23, E-31: a malformed sampling ask (no role, no content, a user message
/// mixing tool results with text) and one with tools or toolChoice for a host that did
/// not declare sampling.tools are not put to the host, legacy or modern: the legacy
/// upstream hears -32602. With sampling.tools declared, a modern host gets the tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_or_undeclared_sampling_asks_are_refused_to_legacy_upstreams() {
    let refused = [
        "no_role",
        "no_content",
        "mixed_user",
        "tool_loop",
        "tool_choice",
    ];
    let mut h = legacy_host(
        "refuse-legacy",
        &sampling_upstream(R1125),
        R1125,
        json!({"sampling": {}}),
    )
    .await;
    for tool in refused {
        let (v, _) = h
            .call(tool, json!({}), json!({}), json!({}), &mut never)
            .await;
        assert_eq!(text(result(&v, tool)), "answered");
    }
    let answers = ask_answers(&h.finish_checked(R1125).await);
    assert_eq!(answers.len(), refused.len(), "{answers:?}");
    for (a, tool) in answers.iter().zip(refused) {
        assert_eq!(a["error"]["code"], -32602, "{tool}: {a}");
    }
    assert!(
        answers[3]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sampling.tools")
    );
    assert!(
        answers[4]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("toolChoice")
    );

    let mut h = Host::start("refuse-modern", &sampling_upstream(R1125), R2026).await;
    for tool in refused {
        let (v, _) = h
            .call(
                tool,
                json!({}),
                json!({"sampling": {}}),
                json!({}),
                &mut never,
            )
            .await;
        // Never a question: the upstream was refused and finished the call.
        assert_eq!(text(result(&v, tool)), "answered", "{tool}: {v}");
    }
    let (v, _) = h
        .call(
            "tool_loop",
            json!({}),
            json!({"sampling": {"tools": {}}}),
            json!({}),
            &mut never,
        )
        .await;
    let r = result(&v, "tool_loop with sampling.tools");
    assert_eq!(r["resultType"], "input_required", "{r}");
    let q = r["inputRequests"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap();
    assert_eq!(q["params"], ask_params("tool_loop"), "{r}");
    // (At exit the parked tool_loop question may be answered too.)
    let answers = ask_answers(&h.finish_checked(R1125).await);
    assert!(answers.len() >= refused.len(), "{answers:?}");
    for (a, tool) in answers.iter().zip(refused) {
        assert_eq!(a["error"]["code"], -32602, "{tool}: {a}");
    }
}

/// E-7, E-16, E-23 (modern upstream, legacy host): mcpx puts a 2026-07-28 upstream's
/// input_required sampling ask to a 2025-06-18 host lowered and retries with the host's
/// answer unchanged (E-28, E-31); an ask the host's revision cannot hold, or a
/// malformed one, fails the host's call with -32603, one with tools for a host without
/// sampling.tools with -32602 naming it, and the upstream call is not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_upstream_sampling_asks_to_a_legacy_host() {
    let mut h = legacy_host(
        "modern-up",
        &sampling_upstream(R2026),
        R0618,
        json!({"sampling": {}}),
    )
    .await;
    let answer = sampled("short");
    let (v, asks) = h
        .call(
            "one_block",
            json!({}),
            json!({}),
            json!({}),
            &mut always(answer.clone()),
        )
        .await;
    assert_eq!(text(result(&v, "one_block")), "answered");
    let mut lowered = ask_params("one_block");
    lowered["messages"][0]["content"] = json!({"type": "text", "text": "hi", "_meta": {"k": 1}});
    assert_eq!(unstamped(&asks[0]), lowered, "{}", asks[0]);
    for (tool, code) in [
        ("two_blocks", -32603),
        ("no_role", -32603),
        ("tool_choice", -32602),
    ] {
        let (v, _) = h
            .call(tool, json!({}), json!({}), json!({}), &mut never)
            .await;
        assert_eq!(error_code(&v, tool), code, "{tool}: {v}");
        if tool == "tool_choice" {
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("sampling.tools"),
                "{v}"
            );
        }
    }
    let wire = h.finish_checked(R2026).await;
    let calls = sent(&wire, "tools/call");
    // one_block twice (the call and its retry), the refused three once each.
    assert_eq!(calls.len(), 5, "{calls:?}");
    assert_eq!(
        calls[1]["params"]["inputResponses"]["q"], answer,
        "{}",
        calls[1]
    );
    for c in &calls[2..] {
        assert!(c["params"].get("inputResponses").is_none(), "retried: {c}");
    }
}

/// E-31, E-27, E-28: a host's sampling result with several tool uses and text, or a
/// user-role result mixing a tool result with text, reaches the legacy upstream exactly
/// as the host sent it, from a legacy host (a wire response) and from a modern one (an
/// inputResponses entry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_results_pass_upward_unchanged() {
    let results = [
        json!({"role": "assistant", "model": "m", "stopReason": "toolUse",
               "content": [{"type": "text", "text": "two calls"}, tool_use("x"), tool_use("y")],
               "_meta": {"r": 1}}),
        json!({"role": "user", "model": "m",
               "content": [tool_result("x"), {"type": "text", "text": "mixed"}]}),
    ];
    let caps = json!({"sampling": {"tools": {}}});
    let mut h = legacy_host(
        "results-legacy",
        &sampling_upstream(R1125),
        R1125,
        caps.clone(),
    )
    .await;
    for r in &results {
        h.call(
            "tool_loop",
            json!({}),
            json!({}),
            json!({}),
            &mut always(r.clone()),
        )
        .await;
    }
    let answers = ask_answers(&h.finish_checked(R1125).await);
    assert_eq!(answers.len(), 2);
    for (a, r) in answers.iter().zip(&results) {
        assert_eq!(&a["result"], r, "{a}");
    }

    let mut h = Host::start("results-modern", &sampling_upstream(R1125), R2026).await;
    for r in &results {
        let (v, _) = h
            .call("tool_loop", json!({}), caps.clone(), json!({}), &mut never)
            .await;
        let round = result(&v, "round 1");
        let key = round["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .next()
            .unwrap()
            .clone();
        let extra = json!({"requestState": round["requestState"], "inputResponses": {key: r}});
        let (v, _) = h
            .call("tool_loop", json!({}), caps.clone(), extra, &mut never)
            .await;
        assert_eq!(text(result(&v, "round 2")), "answered", "{v}");
    }
    let answers = ask_answers(&h.finish_checked(R1125).await);
    assert_eq!(answers.len(), 2);
    for (a, r) in answers.iter().zip(&results) {
        assert_eq!(&a["result"], r, "{a}");
    }
}

// ---------------------------------------------------------------------------------
// Every era; roots.

/// E-5, E-22: sampling and roots are brokered between every pair of eras (hosts of
/// 2024-11-05, 2025-06-18 and 2026-07-28 before upstreams of 2025-03-26 and
/// 2026-07-28), and a modern upstream is told per request that the client has roots
/// and sampling exactly when the host declared them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_and_roots_are_brokered_in_every_era() {
    let caps = json!({"sampling": {}, "roots": {}});
    let roots = json!({"roots": [{"uri": "file:///work", "name": "work"}]});
    for up in [R0326, R2026] {
        for host in [R1105, R0618, R2026] {
            let tag = format!("era-{up}-{host}");
            let mut h = if host.era() == Era::Legacy {
                legacy_host(&tag, &example(up), host, caps.clone()).await
            } else {
                Host::start(&tag, &example(up), host).await
            };
            for (tool, args, answer, expect) in [
                (
                    "test_sampling",
                    json!({"prompt": "capital?"}),
                    sampled("Paris"),
                    "LLM response: Paris",
                ),
                (
                    "test_list_roots",
                    json!({}),
                    roots.clone(),
                    "Client roots: file:///work",
                ),
            ] {
                let mut answer_all = always(answer.clone());
                let (mut v, _) = h
                    .call(tool, args.clone(), caps.clone(), json!({}), &mut answer_all)
                    .await;
                if host.era() == Era::Modern {
                    let r = result(&v, tool).clone();
                    assert_eq!(r["resultType"], "input_required", "{tag} {tool}: {r}");
                    let responses: serde_json::Map<String, Value> = r["inputRequests"]
                        .as_object()
                        .unwrap()
                        .keys()
                        .map(|k| (k.clone(), answer.clone()))
                        .collect();
                    let mut extra = json!({"inputResponses": responses});
                    if let Some(state) = r.get("requestState") {
                        extra["requestState"] = state.clone();
                    }
                    v = h.call(tool, args, caps.clone(), extra, &mut never).await.0;
                }
                assert_eq!(text(result(&v, tool)), expect, "{tag} {tool}: {v}");
            }
            // A host that declared neither: a modern upstream is not told it has them.
            if host.era() == Era::Modern {
                h.call(
                    "test_simple_text",
                    json!({}),
                    json!({}),
                    json!({}),
                    &mut never,
                )
                .await;
            }
            let wire = h.finish_checked(up).await;
            if up.era() == Era::Modern {
                for c in sent(&wire, "tools/call") {
                    let declared =
                        &c["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
                    let simple = c["params"]["name"] == "test_simple_text";
                    for cap in ["sampling", "roots"] {
                        assert_eq!(declared.get(cap).is_some(), !simple, "{tag}: {c}");
                    }
                }
            }
        }
    }
}

/// E-4, E-20, E-21: every roots/list ask reaches the host that made the call, legacy
/// (a wire request, from a legacy and from a modern upstream) or modern (an
/// input_required round): nothing is answered from an earlier answer. The host's roots
/// reach the upstream exactly as sent, and mcpx restricts nothing to them: a resource
/// outside every root is read as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_are_asked_every_time_and_relayed_unchanged() {
    let roots = |uri: &str| json!({"roots": [{"uri": uri, "name": "r", "_meta": {"mine": true}}], "_meta": {"n": uri}});
    for up in [R1125, R2026] {
        let mut h = legacy_host(
            &format!("roots-{up}"),
            &example(up),
            R1125,
            json!({"roots": {}}),
        )
        .await;
        for uri in ["file:///one", "file:///two"] {
            let (v, asks) = h
                .call(
                    "test_list_roots",
                    json!({}),
                    json!({}),
                    json!({}),
                    &mut always(roots(uri)),
                )
                .await;
            assert_eq!(asks.len(), 1, "{up}: answered without asking");
            assert_eq!(
                text(result(&v, "roots")),
                format!("Client roots: {uri}"),
                "{v}"
            );
        }
        let (v, _) = h
            .request("resources/read", json!({"uri": "test://static-text"}))
            .await;
        assert!(
            result(&v, "read outside roots")["contents"].is_array(),
            "{v}"
        );
        let wire = h.finish_checked(up).await;
        if up.era() == Era::Legacy {
            // The wire answers to the upstream's roots/list requests, as the host sent them.
            let answers: Vec<&Value> = wire
                .iter()
                .filter(|f| f.get("result").is_some_and(|r| r.get("roots").is_some()))
                .collect();
            assert_eq!(answers.len(), 2, "{wire:?}");
            assert_eq!(answers[0]["result"], roots("file:///one"));
            assert_eq!(answers[1]["result"], roots("file:///two"));
        } else {
            let retries: Vec<&Value> = sent(&wire, "tools/call")
                .into_iter()
                .filter(|c| c["params"].get("inputResponses").is_some())
                .collect();
            assert_eq!(retries.len(), 2, "{wire:?}");
            assert_eq!(
                retries[0]["params"]["inputResponses"]["client_roots"],
                roots("file:///one")
            );
        }
    }

    let mut h = Host::start("roots-modern", &example(R1125), R2026).await;
    for uri in ["file:///one", "file:///two"] {
        let caps = json!({"roots": {}});
        let (v, _) = h
            .call(
                "test_list_roots",
                json!({}),
                caps.clone(),
                json!({}),
                &mut never,
            )
            .await;
        let r = result(&v, "round 1");
        assert_eq!(
            r["resultType"], "input_required",
            "answered without asking: {r}"
        );
        let extra = json!({"requestState": r["requestState"],
                           "inputResponses": {"client_roots": roots(uri)}});
        let (v, _) = h
            .call("test_list_roots", json!({}), caps, extra, &mut never)
            .await;
        assert_eq!(
            text(result(&v, "round 2")),
            format!("Client roots: {uri}"),
            "{v}"
        );
    }
    let wire = h.finish_checked(R1125).await;
    let answers: Vec<&Value> = wire
        .iter()
        .filter(|f| f.get("result").is_some_and(|r| r.get("roots").is_some()))
        .collect();
    assert_eq!(answers[1]["result"], roots("file:///two"));
}

/// E-3: mcpx declares roots to legacy upstreams without listChanged, so a legacy host's
/// notifications/roots/list_changed goes to no upstream, legacy or modern (the next
/// roots/list ask gets the new roots anyway, E-21); from a modern host, whose revision
/// has no such notification, it is dropped without an answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_list_changed_is_not_forwarded() {
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"});
    for up in [R1125, R2026] {
        let mut h = legacy_host(
            &format!("rlc-{up}"),
            &example(up),
            R1125,
            json!({"roots": {"listChanged": true}}),
        )
        .await;
        h.send(&changed).await;
        let roots = json!({"roots": [{"uri": "file:///new"}]});
        let (v, _) = h
            .call(
                "test_list_roots",
                json!({}),
                json!({}),
                json!({}),
                &mut always(roots),
            )
            .await;
        assert_eq!(text(result(&v, "roots")), "Client roots: file:///new");
        let wire = h.finish_checked(up).await;
        assert!(
            sent(&wire, "notifications/roots/list_changed").is_empty(),
            "{wire:?}"
        );
        if up.era() == Era::Legacy {
            let init = sent(&wire, "initialize");
            assert_eq!(
                init[0]["params"]["capabilities"]["roots"],
                json!({}),
                "{}",
                init[0]
            );
        }
    }
    for up in [R1125, R2026] {
        let mut h = Host::start(&format!("rlc-modern-{up}"), &example(up), R2026).await;
        h.send(&changed).await;
        let (v, notes) = h.request("tools/list", json!({})).await;
        result(&v, "tools/list after the notification");
        assert!(notes.is_empty(), "{notes:?}");
        let wire = h.finish_checked(up).await;
        assert!(
            sent(&wire, "notifications/roots/list_changed").is_empty(),
            "{wire:?}"
        );
    }
}

// ---------------------------------------------------------------------------------
// Cancellation and progress around asks.

/// C-C2: when a legacy host does not answer an ask in askTimeoutMs, mcpx cancels it
/// with notifications/cancelled naming the ask (the legacy timeout SHOULD); a modern
/// host, whose questions are input_required rounds, is never sent a request nor a
/// notifications/cancelled when its questions expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_out_asks_are_cancelled_only_on_legacy_connections() {
    let mut config = example(R1125);
    config["mcpx"] = json!({"limits": {"askTimeoutMs": 400}});
    let mut h = legacy_host("cc2-legacy", &config, R1125, json!({"sampling": {}})).await;
    let (v, asks, notes) = h
        .exchange(
            "tools/call",
            json!({"name": "test_sampling", "arguments": {"prompt": "?"}}),
            &mut |_| Vec::new(),
        )
        .await;
    assert_eq!(asks.len(), 1);
    // The upstream heard the ask failed, and its tool says so.
    assert_eq!(result(&v, "unanswered")["isError"], true, "{v}");
    let cancels: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/cancelled")
        .collect();
    assert_eq!(cancels.len(), 1, "{notes:?}");
    assert_eq!(
        cancels[0]["params"]["requestId"], asks[0]["id"],
        "{notes:?}"
    );
    h.finish_checked(R1125).await;

    let mut h = Host::start("cc2-modern", &config, R2026).await;
    let (v, _) = h
        .call(
            "test_input_required_result_sampling",
            json!({}),
            json!({"sampling": {}}),
            json!({}),
            &mut never,
        )
        .await;
    assert_eq!(result(&v, "round 1")["resultType"], "input_required");
    // The question expires: mcpx refuses it upstream (-32603).
    let expired = wait_for_wire(&h, |f| {
        f.get("method").is_none() && f.pointer("/error/code") == Some(&json!(-32603))
    })
    .await;
    assert!(expired, "the question did not expire: {:?}", h.wire());
    // Then a round trip: a notifications/cancelled sent at the expiry comes before it.
    let (v, notes) = h.request("tools/list", json!({})).await;
    result(&v, "tools/list");
    assert!(
        notes
            .iter()
            .all(|n| n["method"] != "notifications/cancelled"),
        "{notes:?}"
    );
    h.finish_checked(R1125).await;
}

/// Waits (bounded) until mcpx has sent the upstream a frame `pred` accepts.
async fn wait_for_wire(h: &Host, pred: impl Fn(&Value) -> bool) -> bool {
    let every = Duration::from_millis(50);
    crate::wait::poll_every(Duration::from_secs(10), every, async || {
        h.wire().iter().any(&pred).then_some(())
    })
    .await
    .is_some()
}

/// C-C6: a legacy host's progress on an ask reaches the legacy upstream that asked,
/// with that upstream's own progress token (the host saw one of mcpx's); progress
/// naming any other token goes nowhere. A modern upstream is never sent progress, and
/// a modern host's progress notification is ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_progress_on_an_ask_reaches_only_the_legacy_upstream_that_asked() {
    let progress = |token: &Value, n: u64| {
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
               "params": {"progressToken": token, "progress": n, "total": 2}})
    };
    let mut h = legacy_host(
        "cc6-legacy",
        &sampling_upstream(R1125),
        R1125,
        json!({"sampling": {}}),
    )
    .await;
    // Ask, then report progress, wait for it upstream, then answer.
    let id = h.next_id;
    h.next_id += 1;
    h.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "with_progress", "arguments": {}}}))
        .await;
    let ask = h.next_frame("with_progress").await;
    assert_eq!(ask["method"], "sampling/createMessage", "{ask}");
    let token = ask["params"]["_meta"]["progressToken"].clone();
    assert!(token.is_string() && token != "up-7", "{ask}");
    h.send(&progress(&json!("up-7"), 1)).await;
    h.send(&progress(&token, 1)).await;
    let relayed = wait_for_wire(&h, |f| f["method"] == "notifications/progress").await;
    assert!(relayed, "{:?}", h.wire());
    h.send(&reply(&ask, sampled("done"))).await;
    let v = h.next_frame("with_progress").await;
    assert_eq!(text(result(&v, "with_progress")), "answered");
    // After the ask is answered its token leads nowhere.
    h.send(&progress(&token, 2)).await;
    let (v, _) = h.request("tools/list", json!({})).await;
    result(&v, "tools/list");
    let wire = h.finish_checked(R1125).await;
    let sent_progress = sent(&wire, "notifications/progress");
    assert_eq!(sent_progress.len(), 1, "{sent_progress:?}");
    assert_eq!(
        sent_progress[0]["params"],
        json!({"progressToken": "up-7", "progress": 1, "total": 2})
    );

    // A modern upstream's ask, put to a legacy host: its progress goes nowhere.
    let mut h = legacy_host(
        "cc6-modern-up",
        &sampling_upstream(R2026),
        R1125,
        json!({"sampling": {}}),
    )
    .await;
    let mut answer = |ask: &Value| {
        let token = ask["params"]["_meta"]["progressToken"].clone();
        vec![progress(&token, 1), reply(ask, sampled("done"))]
    };
    let (v, _) = h
        .call(
            "with_progress",
            json!({}),
            json!({}),
            json!({}),
            &mut answer,
        )
        .await;
    assert_eq!(text(result(&v, "with_progress")), "answered");
    let (v, _) = h.request("tools/list", json!({})).await;
    result(&v, "tools/list");
    let wire = h.finish_checked(R2026).await;
    assert!(sent(&wire, "notifications/progress").is_empty(), "{wire:?}");

    // A modern host sending progress with the legacy upstream's token: ignored.
    let mut h = Host::start("cc6-modern-host", &sampling_upstream(R1125), R2026).await;
    let (v, _) = h
        .call(
            "with_progress",
            json!({}),
            json!({"sampling": {}}),
            json!({}),
            &mut never,
        )
        .await;
    let r = result(&v, "round 1").clone();
    let q = r["inputRequests"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone();
    h.send(&progress(&q["params"]["_meta"]["progressToken"], 1))
        .await;
    h.send(&progress(&json!("up-7"), 1)).await;
    let key = r["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let extra =
        json!({"requestState": r["requestState"], "inputResponses": {key: sampled("done")}});
    let (v, _) = h
        .call(
            "with_progress",
            json!({}),
            json!({"sampling": {}}),
            extra,
            &mut never,
        )
        .await;
    assert_eq!(text(result(&v, "round 2")), "answered");
    let wire = h.finish_checked(R1125).await;
    assert!(sent(&wire, "notifications/progress").is_empty(), "{wire:?}");
}
