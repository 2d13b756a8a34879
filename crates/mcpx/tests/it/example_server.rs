//! `mcpx example-server` as a real child process on stdio: strict modes refusing other
//! revisions, a feature tour per revision, MRTR and subscriptions on 2026-07-28, and bad
//! input. Every frame the server writes is validated against the schema of the revision
//! the test speaks (`validate_response` for responses, `validate_frame` for the rest).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use mcpx_protocol::{Era, Revision};
use mcpx_testkit::tap::tap;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const LEGACY: [Revision; 4] = [
    Revision::V2024_11_05,
    Revision::V2025_03_26,
    Revision::V2025_06_18,
    Revision::V2025_11_25,
];
const MODERN: Revision = Revision::V2026_07_28;

struct Proc {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    /// The revision the test speaks; every frame is validated against it.
    rev: Revision,
    next: i64,
    /// Requests sent, by id, for `validate_response`.
    pending: HashMap<String, String>,
    /// Notifications received while waiting for responses.
    notes: Vec<Value>,
    /// Frames validated so far.
    validated: usize,
}

fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {
            "sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}}
    })
}

impl Proc {
    fn start(args: &[&str], rev: Revision) -> Proc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpx"))
            .arg("example-server")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Proc {
            _child: child,
            stdin,
            lines,
            rev,
            next: 100,
            pending: HashMap::new(),
            notes: Vec::new(),
            validated: 0,
        }
    }

    async fn send_raw(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    async fn send(&mut self, v: &Value) {
        if let (Some(id), Some(m)) = (v.get("id"), v.get("method").and_then(Value::as_str)) {
            self.pending.insert(id.to_string(), m.to_owned());
        }
        self.send_raw(&v.to_string()).await;
    }

    /// The next frame, validated against `self.rev`'s schema.
    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
            .await
            .expect("no frame within 10 s")
            .unwrap()
            .expect("stdout closed");
        let v: Value = serde_json::from_str(&line).unwrap();
        let is_response = v.get("result").is_some() || v.get("error").is_some();
        let method = v
            .get("id")
            .and_then(|id| self.pending.get(&id.to_string()))
            .cloned();
        match (is_response, method) {
            (true, Some(m)) => tap().validate_response(self.rev, &m, &line),
            _ => tap().validate_frame(self.rev, &line),
        }
        .unwrap_or_else(|e| panic!("{} frame invalid: {e}", self.rev));
        self.validated += 1;
        v
    }

    fn params(&self, mut params: Value) -> Value {
        if self.rev.era() == Era::Modern {
            let meta = params
                .as_object_mut()
                .unwrap()
                .entry("_meta")
                .or_insert_with(|| json!({}));
            for (k, v) in modern_meta().as_object().unwrap() {
                meta.as_object_mut()
                    .unwrap()
                    .entry(k.clone())
                    .or_insert(v.clone());
            }
        }
        params
    }

    /// Sends a request and returns its response; notifications on the way are kept in
    /// `notes`; server-to-client requests are answered with `answer`.
    async fn call_with(
        &mut self,
        method: &str,
        params: Value,
        answer: impl Fn(&Value) -> Value,
    ) -> Value {
        self.next += 1;
        let id = self.next;
        let params = self.params(params);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let v = self.recv().await;
            if v.get("method").is_some() && v.get("id").is_some() {
                let result = answer(&v);
                self.send_raw(
                    &json!({"jsonrpc": "2.0", "id": v["id"], "result": result}).to_string(),
                )
                .await;
            } else if v.get("method").is_some() {
                self.notes.push(v);
            } else if v["id"] == id {
                return v;
            } else {
                panic!("unexpected frame {v}");
            }
        }
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.call_with(method, params, |r| panic!("unexpected request {r}"))
            .await
    }

    async fn result(&mut self, method: &str, params: Value) -> Value {
        let v = self.call(method, params).await;
        assert!(v.get("result").is_some(), "{method}: {v}");
        v["result"].clone()
    }

    async fn error_code(&mut self, method: &str, params: Value) -> i64 {
        let v = self.call(method, params).await;
        v["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{method}: expected an error, got {v}"))
    }

    async fn initialize(&mut self, version: &str) -> Value {
        let r = self
            .result(
                "initialize",
                json!({"protocolVersion": version,
                    "capabilities": {"sampling": {}, "roots": {"listChanged": true}, "elicitation": {}},
                    "clientInfo": {"name": "test", "version": "1"}}),
            )
            .await;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        r
    }

    /// Waits for a notification `method` (already received, or the next ones).
    async fn wait_note(&mut self, method: &str) -> Value {
        loop {
            if let Some(i) = self.notes.iter().position(|n| n["method"] == method) {
                return self.notes.remove(i);
            }
            let v = self.recv().await;
            assert!(v.get("id").is_none(), "unexpected {v}");
            self.notes.push(v);
        }
    }

    fn take_notes(&mut self, method: &str) -> Vec<Value> {
        let (yes, no) = std::mem::take(&mut self.notes)
            .into_iter()
            .partition(|n| n["method"] == method);
        self.notes = no;
        yes
    }
}

fn texts(result: &Value) -> String {
    result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test]
async fn strict_legacy_servers_refuse_other_revisions() {
    // Strict 2024-11-05: server/discover is -32601 whatever the era it arrives in.
    let mut p = Proc::start(&["--revision", "2024-11-05"], Revision::V2024_11_05);
    let r = p.initialize("2024-11-05").await;
    assert_eq!(r["protocolVersion"], "2024-11-05");
    assert_eq!(p.error_code("server/discover", json!({})).await, -32601);
    // 2025-11-25's tasks/list does not exist in 2024-11-05.
    assert_eq!(p.error_code("tasks/list", json!({})).await, -32601);
    // Elicitation tools are absent, and no audio.
    let tools = p.result("tools/list", json!({})).await;
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"test_elicitation") && !names.contains(&"test_audio_content"));
    // A modern request: -32601 for what 2024-11-05 lacks, -32602 for what it has.
    p.rev = MODERN;
    assert_eq!(p.error_code("server/discover", json!({})).await, -32601);
    let v = p.call("tools/list", json!({})).await;
    assert_eq!(v["error"]["code"], -32602);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2024-11-05")
    );

    // Strict 2025-03-26 counter-offers itself to a 2025-06-18 initialize.
    let mut p = Proc::start(&["--revision", "2025-03-26"], Revision::V2025_03_26);
    let r = p.initialize("2025-06-18").await;
    assert_eq!(r["protocolVersion"], "2025-03-26");
    assert!(r["capabilities"]["completions"].is_object());
    assert_eq!(p.error_code("server/discover", json!({})).await, -32601);

    // Strict 2025-11-25: a modern server/discover is -32601 before and after initialize.
    let mut p = Proc::start(&["--revision", "2025-11-25"], MODERN);
    assert_eq!(p.error_code("server/discover", json!({})).await, -32601);
    assert_eq!(
        p.error_code("subscriptions/listen", json!({})).await,
        -32601
    );
    p.rev = Revision::V2025_11_25;
    let r = p.initialize("2026-07-28").await;
    assert_eq!(r["protocolVersion"], "2025-11-25");
}

#[tokio::test]
async fn strict_modern_server_refuses_initialize_with_its_versions() {
    let mut p = Proc::start(&["--revision", "2026-07-28"], MODERN);
    for version in ["2025-06-18", "2024-11-05"] {
        p.next += 1;
        let id = p.next;
        p.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        )
        .await;
        let v = p.recv().await;
        assert_eq!(v["error"]["code"], -32022, "{v}");
        assert_eq!(v["error"]["data"]["supported"], json!(["2026-07-28"]));
        assert_eq!(v["error"]["data"]["requested"], version);
    }
    // A legacy-classified ping (no initialize, no _meta) gets the same answer.
    p.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}))
        .await;
    let v = p.recv().await;
    assert_eq!(v["error"]["code"], -32022);
    // Modern requests are served; removed methods are -32601.
    let d = p.result("server/discover", json!({})).await;
    assert_eq!(d["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(
        p.error_code("logging/setLevel", json!({"level": "info"}))
            .await,
        -32601
    );
    assert_eq!(
        p.error_code("resources/subscribe", json!({"uri": "test://static-text"}))
            .await,
        -32601
    );
}

/// The content tools of `rev` answer with the content their names promise.
async fn content_tools(p: &mut Proc) {
    let tools = p.result("tools/list", json!({})).await;
    let names: Vec<String> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert!(t["description"].is_string() && t["inputSchema"].is_object());
            t["name"].as_str().unwrap().to_owned()
        })
        .collect();
    for (tool, kind) in [
        ("test_simple_text", "text"),
        ("test_image_content", "image"),
        ("test_audio_content", "audio"),
        ("test_embedded_resource", "resource"),
        ("test_resource_link", "resource_link"),
    ] {
        if !names.iter().any(|n| n == tool) {
            continue;
        }
        let r = p
            .result("tools/call", json!({"name": tool, "arguments": {}}))
            .await;
        assert_eq!(r["content"][0]["type"], kind, "{tool}");
    }
    let r = p
        .result("tools/call", json!({"name": "test_multiple_content_types"}))
        .await;
    let kinds: Vec<&str> = r["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["text", "image", "resource"]);
    let r = p
        .result("tools/call", json!({"name": "test_error_handling"}))
        .await;
    assert_eq!(r["isError"], true);
    if names.iter().any(|n| n == "test_structured_content") {
        let r = p
            .result("tools/call", json!({"name": "test_structured_content"}))
            .await;
        assert_eq!(r["structuredContent"]["temperature"], 22.5);
    }
}

/// Resources, templates, pagination, prompts and completion.
async fn catalog_tour(p: &mut Proc) {
    let mut uris = Vec::new();
    let mut cursor: Option<Value> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        let r = p.result("resources/list", params).await;
        let page = r["resources"].as_array().unwrap();
        assert!(page.len() <= 2);
        uris.extend(page.iter().map(|x| x["uri"].as_str().unwrap().to_owned()));
        pages += 1;
        match r.get("nextCursor") {
            Some(c) => cursor = Some(c.clone()),
            None => break,
        }
    }
    assert!(pages >= 3, "{pages} pages");
    assert!(uris.contains(&"test://static-text".to_owned()));
    let r = p
        .result("resources/read", json!({"uri": "test://static-text"}))
        .await;
    assert!(r["contents"][0]["text"].is_string());
    let r = p
        .result("resources/read", json!({"uri": "test://static-binary"}))
        .await;
    assert!(r["contents"][0]["blob"].is_string());
    let r = p.result("resources/templates/list", json!({})).await;
    assert_eq!(
        r["resourceTemplates"][0]["uriTemplate"],
        "test://template/{id}/data"
    );
    let r = p
        .result("resources/read", json!({"uri": "test://template/123/data"}))
        .await;
    assert!(r["contents"][0]["text"].as_str().unwrap().contains("123"));

    let r = p.result("prompts/list", json!({})).await;
    assert!(r["prompts"].as_array().unwrap().len() >= 4);
    let r = p
        .result(
            "prompts/get",
            json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "testValue1", "arg2": "testValue2"}}),
        )
        .await;
    assert!(r["messages"].to_string().contains("testValue2"));
    let r = p
        .result(
            "prompts/get",
            json!({"name": "test_prompt_with_embedded_resource", "arguments": {"resourceUri": "test://example-resource"}}),
        )
        .await;
    assert_eq!(r["messages"][0]["content"]["type"], "resource");
    let r = p
        .result("prompts/get", json!({"name": "test_prompt_with_image"}))
        .await;
    assert_eq!(r["messages"][0]["content"]["type"], "image");
    let r = p
        .result("prompts/get", json!({"name": "test_simple_prompt"}))
        .await;
    assert_eq!(r["messages"][0]["content"]["type"], "text");

    let r = p
        .result(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                   "argument": {"name": "arg1", "value": "test"}}),
        )
        .await;
    assert_eq!(
        r["completion"]["values"],
        json!(["test-value-1", "test-value-2", "testing"])
    );
    let r = p
        .result(
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": "test://template/{id}/data"},
                   "argument": {"name": "id", "value": "4"}}),
        )
        .await;
    assert_eq!(r["completion"]["values"], json!(["456"]));
}

#[tokio::test]
async fn legacy_feature_tour_in_every_legacy_revision() {
    for rev in LEGACY {
        let mut p = Proc::start(&[], rev);
        let init = p.initialize(rev.as_str()).await;
        assert_eq!(init["protocolVersion"], rev.as_str());
        assert!(init.get("resultType").is_none());
        content_tools(&mut p).await;
        catalog_tour(&mut p).await;

        // Logging: nothing before setLevel, then filtered to the level.
        p.result("tools/call", json!({"name": "test_tool_with_logging"}))
            .await;
        assert!(p.take_notes("notifications/message").is_empty(), "{rev}");
        assert_eq!(
            p.result("logging/setLevel", json!({"level": "warning"}))
                .await,
            json!({})
        );
        p.result("tools/call", json!({"name": "test_tool_with_logging"}))
            .await;
        let logs = p.take_notes("notifications/message");
        let levels: Vec<&str> = logs
            .iter()
            .map(|l| l["params"]["level"].as_str().unwrap())
            .collect();
        assert_eq!(
            levels,
            ["warning", "error", "critical", "alert", "emergency"],
            "{rev}"
        );

        // Progress.
        p.result(
            "tools/call",
            json!({"name": "test_tool_with_progress", "arguments": {"steps": 3},
                   "_meta": {"progressToken": "tok"}}),
        )
        .await;
        let progress = p.take_notes("notifications/progress");
        let values: Vec<i64> = progress
            .iter()
            .map(|n| n["params"]["progress"].as_i64().unwrap())
            .collect();
        assert_eq!(values, [1, 2, 3], "{rev}");

        // Sampling and roots: server-to-client requests.
        let r = p
            .call_with(
                "tools/call",
                json!({"name": "test_sampling", "arguments": {"prompt": "hi"}}),
                |req| {
                    assert_eq!(req["method"], "sampling/createMessage");
                    json!({"role": "assistant", "content": {"type": "text", "text": "Paris"},
                       "model": "m", "stopReason": "endTurn"})
                },
            )
            .await;
        assert!(texts(&r["result"]).contains("Paris"), "{r}");
        let r = p
            .call_with("tools/call", json!({"name": "test_list_roots"}), |req| {
                assert_eq!(req["method"], "roots/list");
                json!({"roots": [{"uri": "file:///work", "name": "work"}]})
            })
            .await;
        assert!(texts(&r["result"]).contains("file:///work"));
        if mcpx_protocol::method::direction("elicitation/create", rev).exists() {
            let r = p
                .call_with("tools/call", json!({"name": "test_elicitation", "arguments": {"message": "who?"}}), |req| {
                    assert_eq!(req["method"], "elicitation/create");
                    json!({"action": "accept", "content": {"username": "u", "email": "u@example.com"}})
                })
                .await;
            assert!(texts(&r["result"]).contains("u@example.com"));
        }

        if mcpx_example_server::features::features(rev).rich_elicitation_schemas {
            // SEP-1034 defaults, SEP-1330 enums and URL mode: the server's
            // elicitation/create requests are schema-checked by `recv`.
            for tool in [
                "test_elicitation_sep1034_defaults",
                "test_elicitation_sep1330_enums",
                "test_elicitation_url",
            ] {
                let r = p
                    .call_with("tools/call", json!({ "name": tool }), |req| {
                        assert_eq!(req["method"], "elicitation/create");
                        json!({"action": "accept", "content": {}})
                    })
                    .await;
                assert!(r["result"]["content"].is_array(), "{tool}: {r}");
            }
            assert_eq!(p.take_notes("notifications/elicitation/complete").len(), 1);
        }

        // Subscriptions and list_changed on the session.
        assert_eq!(
            p.result(
                "resources/subscribe",
                json!({"uri": "test://watched-resource"})
            )
            .await,
            json!({})
        );
        p.result(
            "tools/call",
            json!({"name": "test_trigger_resource_update"}),
        )
        .await;
        let updated = p.take_notes("notifications/resources/updated");
        assert_eq!(updated[0]["params"]["uri"], "test://watched-resource");
        p.result(
            "resources/unsubscribe",
            json!({"uri": "test://watched-resource"}),
        )
        .await;
        p.result(
            "tools/call",
            json!({"name": "test_trigger_resource_update"}),
        )
        .await;
        assert!(p.take_notes("notifications/resources/updated").is_empty());
        p.result("tools/call", json!({"name": "test_trigger_tool_change"}))
            .await;
        assert_eq!(p.take_notes("notifications/tools/list_changed").len(), 1);
        let tools = p.result("tools/list", json!({})).await;
        assert!(tools.to_string().contains("test_dynamic_tool"));
        assert!(p.validated > 40, "{rev}: {} frames validated", p.validated);
    }
}

#[tokio::test]
async fn progress_tool_honours_cancellation() {
    let mut p = Proc::start(&[], Revision::V2025_06_18);
    p.initialize("2025-06-18").await;
    p.send(
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "test_tool_with_progress", "arguments": {"steps": 100, "delayMs": 20},
        "_meta": {"progressToken": 1}}}),
    )
    .await;
    let first = p.recv().await;
    assert_eq!(first["method"], "notifications/progress");
    p.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}),
    )
    .await;
    // No response for the cancelled request; the server still answers.
    let r = p.call("ping", json!({})).await;
    assert_eq!(r["result"], json!({}));
    for n in std::mem::take(&mut p.notes) {
        assert_eq!(n["method"], "notifications/progress");
    }
}

#[tokio::test]
async fn modern_feature_tour() {
    let mut p = Proc::start(&[], MODERN);
    let d = p.result("server/discover", json!({})).await;
    assert_eq!(d["resultType"], "complete");
    assert!(d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"].is_string());
    assert!(d["ttlMs"].is_u64() && d["cacheScope"].is_string());
    content_tools(&mut p).await;
    catalog_tour(&mut p).await;
    let r = p
        .result("tools/call", json!({"name": "test_structured_value"}))
        .await;
    assert_eq!(r["structuredContent"], json!([1, 2, 3]));
    let r = p
        .result("resources/read", json!({"uri": "test://static-text"}))
        .await;
    assert!(r["ttlMs"].is_u64(), "resources/read is cacheable");
    let r = p
        .result("tools/call", json!({"name": "test_simple_text"}))
        .await;
    assert!(r.get("ttlMs").is_none(), "tools/call is not cacheable");

    // Logging only with _meta logLevel, filtered.
    p.result("tools/call", json!({"name": "test_logging_tool"}))
        .await;
    assert!(p.take_notes("notifications/message").is_empty());
    p.result(
        "tools/call",
        json!({"name": "test_logging_tool", "_meta": {"io.modelcontextprotocol/logLevel": "error"}}),
    )
    .await;
    assert_eq!(p.take_notes("notifications/message").len(), 4);

    // Progress.
    p.result(
        "tools/call",
        json!({"name": "test_tool_with_progress", "_meta": {"progressToken": "t"}}),
    )
    .await;
    assert_eq!(p.take_notes("notifications/progress").len(), 3);
}

#[tokio::test]
async fn modern_mrtr_round_trips() {
    let mut p = Proc::start(&[], MODERN);
    // Elicitation: input_required, then the retry completes.
    let r = p
        .result(
            "tools/call",
            json!({"name": "test_input_required_result_elicitation"}),
        )
        .await;
    assert_eq!(r["resultType"], "input_required");
    assert_eq!(
        r["inputRequests"]["user_name"]["method"],
        "elicitation/create"
    );
    let r = p
        .result(
            "tools/call",
            json!({"name": "test_input_required_result_elicitation",
                   "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}},
                                      "extra": {"action": "accept", "content": {}}}}),
        )
        .await;
    assert_eq!(r["resultType"], "complete");
    assert!(texts(&r).contains("Hello, Alice!"));
    // A wrong key is asked again; an invalid answer is -32602.
    let r = p
        .result(
            "tools/call",
            json!({"name": "test_input_required_result_elicitation",
                   "inputResponses": {"wrong_key": {"action": "accept", "content": {}}}}),
        )
        .await;
    assert_eq!(r["resultType"], "input_required");
    for bad in [json!({"user_name": 12345}), Value::Null] {
        let code = p
            .error_code(
                "tools/call",
                json!({"name": "test_input_required_result_elicitation", "inputResponses": bad}),
            )
            .await;
        assert_eq!(code, -32602);
    }

    // Sampling on the legacy tool name is MRTR on 2026-07-28.
    let r = p
        .result(
            "tools/call",
            json!({"name": "test_sampling", "arguments": {"prompt": "q"}}),
        )
        .await;
    assert_eq!(
        r["inputRequests"]["sampling"]["method"],
        "sampling/createMessage"
    );
    let r = p
        .result(
            "tools/call",
            json!({"name": "test_sampling", "arguments": {"prompt": "q"}, "inputResponses": {"sampling":
                {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}}}),
        )
        .await;
    assert!(texts(&r).contains("Paris"));

    // requestState round trip, and tampering.
    let r = p
        .result(
            "tools/call",
            json!({"name": "test_input_required_result_request_state"}),
        )
        .await;
    let state = r["requestState"].as_str().unwrap().to_owned();
    let answer = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    let r = p
        .result(
            "tools/call",
            json!({"name": "test_input_required_result_request_state",
                   "inputResponses": answer, "requestState": state}),
        )
        .await;
    assert!(texts(&r).contains("state-ok"));
    let code = p
        .error_code(
            "tools/call",
            json!({"name": "test_input_required_result_tampered_state",
                   "inputResponses": answer, "requestState": format!("{state}-TAMPERED")}),
        )
        .await;
    assert_eq!(code, -32602);

    // Two rounds.
    let r = p
        .result(
            "tools/call",
            json!({"name": "test_input_required_result_multi_round"}),
        )
        .await;
    let s1 = r["requestState"].clone();
    let r = p
        .result(
            "tools/call",
            json!({"name": "test_input_required_result_multi_round", "requestState": s1,
                   "inputResponses": {"step1": {"action": "accept", "content": {"name": "Bo"}}}}),
        )
        .await;
    assert!(r["inputRequests"]["step2"].is_object());
    let r = p
        .result(
            "tools/call",
            json!({"name": "test_input_required_result_multi_round", "requestState": r["requestState"],
                   "inputResponses": {"step2": {"action": "accept", "content": {"color": "red"}}}}),
        )
        .await;
    assert!(texts(&r).contains("Bo's favorite color is red"));

    // Capabilities: only what was declared; -32021 without it.
    let only_sampling = json!({"io.modelcontextprotocol/clientCapabilities": {"sampling": {}}});
    let r = p
        .result(
            "tools/call",
            json!({"name": "test_input_required_result_capabilities", "_meta": only_sampling}),
        )
        .await;
    let keys: Vec<&String> = r["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["capital_question"]);
    let v = p
        .call(
            "tools/call",
            json!({"name": "test_missing_capability",
                   "_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}),
        )
        .await;
    assert_eq!(v["error"]["code"], -32021);
    assert_eq!(
        v["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );

    // prompts/get and resources/read may be input_required too; lists never are.
    let r = p
        .result(
            "prompts/get",
            json!({"name": "test_input_required_result_prompt"}),
        )
        .await;
    assert_eq!(r["resultType"], "input_required");
    let r = p
        .result(
            "prompts/get",
            json!({"name": "test_input_required_result_prompt", "inputResponses":
                {"user_context": {"action": "accept", "content": {"context": "ctx"}}}}),
        )
        .await;
    assert!(r["messages"].to_string().contains("ctx"));
    let r = p
        .result("resources/read", json!({"uri": "test://confirm-resource"}))
        .await;
    assert_eq!(r["resultType"], "input_required");
    assert!(r.get("ttlMs").is_none());
    for m in ["tools/list", "prompts/list"] {
        assert_eq!(p.result(m, json!({})).await["resultType"], "complete");
    }
}

#[tokio::test]
async fn modern_subscriptions_listen() {
    let mut p = Proc::start(&[], MODERN);
    let params = p.params(json!({"notifications": {"toolsListChanged": true,
        "resourceSubscriptions": ["test://watched-resource"]}}));
    p.send(&json!({"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen", "params": params}))
        .await;
    let ack = p.recv().await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    assert_eq!(ack["params"]["notifications"]["toolsListChanged"], true);
    // A prompts change is not requested: not delivered. A tools change and an update are.
    p.result("tools/call", json!({"name": "test_trigger_prompt_change"}))
        .await;
    p.result("tools/call", json!({"name": "test_trigger_tool_change"}))
        .await;
    p.result(
        "tools/call",
        json!({"name": "test_trigger_resource_update"}),
    )
    .await;
    // Listen-stream notifications may arrive after the trigger's own response.
    for method in [
        "notifications/tools/list_changed",
        "notifications/resources/updated",
    ] {
        let n = p.wait_note(method).await;
        assert_eq!(
            n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            "sub-1"
        );
    }
    p.result("server/discover", json!({})).await;
    assert!(p.notes.is_empty(), "nothing unrequested: {:?}", p.notes);
    // Cancelling ends the stream without a response.
    p.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": "sub-1", "_meta": modern_meta()}}),
    )
    .await;
    p.notes.clear();
    p.result("tools/call", json!({"name": "test_trigger_tool_change"}))
        .await;
    p.result("server/discover", json!({})).await;
    assert!(p.notes.is_empty(), "{:?}", p.notes);
}

#[tokio::test]
async fn bad_input_gets_the_right_error_and_no_crash() {
    for rev in [Revision::V2025_06_18, Revision::V2025_11_25, MODERN] {
        let mut p = Proc::start(&[], rev);
        if rev.era() == Era::Legacy {
            p.initialize(rev.as_str()).await;
        }
        assert_eq!(p.error_code("tools/frobnicate", json!({})).await, -32601);
        assert_eq!(
            p.error_code("tools/call", json!({"name": "no_such_tool"}))
                .await,
            -32602
        );
        assert_eq!(p.error_code("tools/call", json!({})).await, -32602);
        assert_eq!(
            p.error_code("prompts/get", json!({"name": "nope"})).await,
            -32602
        );
        assert_eq!(
            p.error_code("prompts/get", json!({"name": "test_prompt_with_arguments"}))
                .await,
            -32602
        );
        let v = p
            .call("resources/read", json!({"uri": "test://nonexistent"}))
            .await;
        let expected = mcpx_protocol::error::resource_not_found(rev);
        assert_eq!(v["error"]["code"], expected);
        assert_eq!(v["error"]["data"]["uri"], "test://nonexistent");
        assert_eq!(
            p.error_code("resources/list", json!({"cursor": "garbage"}))
                .await,
            -32602
        );
        assert_eq!(
            p.error_code(
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "x"},
                "argument": {"name": "a", "value": ""}})
            )
            .await,
            -32602
        );
        // Invalid tool input: a protocol error up to 2025-06-18, a tool error from 2025-11-25.
        let v = p
            .call(
                "tools/call",
                json!({"name": "test_add", "arguments": {"a": "one"}}),
            )
            .await;
        if rev.facts().input_validation_is_tool_error {
            assert_eq!(v["result"]["isError"], true, "{rev}: {v}");
        } else {
            assert_eq!(v["error"]["code"], -32602, "{rev}: {v}");
        }
        let r = p
            .result(
                "tools/call",
                json!({"name": "test_add", "arguments": {"a": 1, "b": 2}}),
            )
            .await;
        assert!(texts(&r).contains("is 3"));
        // Unparseable JSON: -32700, and the server goes on. The response has no id,
        // which schemas before 2025-11-25 cannot represent (register A-C4, the recorded
        // exception), so it is validated only where the id is optional.
        p.send_raw("{not json").await;
        let v = if rev.facts().error_id_optional {
            p.recv().await
        } else {
            let line = p.lines.next_line().await.unwrap().unwrap();
            serde_json::from_str::<Value>(&line).unwrap()
        };
        assert_eq!(v["error"]["code"], -32700);
        if rev.era() == Era::Modern {
            // Missing clientCapabilities is -32602 (2026-07-28 basic/index §_meta).
            p.send(
                &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"_meta":
                {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}),
            )
            .await;
            assert_eq!(p.recv().await["error"]["code"], -32602);
        } else {
            assert_eq!(
                p.error_code("logging/setLevel", json!({"level": "loud"}))
                    .await,
                -32602
            );
        }
        let r = p
            .call("tools/call", json!({"name": "test_simple_text"}))
            .await;
        assert!(r.get("result").is_some());
    }
}
