//! `mcpx daemon`'s `/v1` API over its real Unix socket and its TCP listener: every
//! route, the OpenAPI document's parity with the routes, problems for bad input, and
//! cancellation when a client goes away mid-call.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use serde_json::{Value, json};

use crate::daemon_support;
use daemon_support::{Daemon, WITHIN, two_examples, wire};

fn names(v: &Value) -> Vec<String> {
    v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[tokio::test]
async fn every_route_answers_over_the_socket() {
    let d = Daemon::start("routes", &two_examples(), &[]).await;
    let status = d.ready().await;
    let ups = status["upstreams"].as_array().unwrap();
    assert_eq!(ups.len(), 2);
    let everything = &ups[0];
    assert_eq!(everything["name"], "everything");
    assert_eq!(everything["era"], "modern");
    assert_eq!(everything["revision"], "2026-07-28");
    assert!(everything["pid"].as_u64().is_some(), "{everything}");
    assert!(everything["tools"].as_u64().unwrap() > 10, "{everything}");
    assert_eq!(ups[1]["revision"], "2025-03-26");

    let (s, health) = d.get("/v1/health").await;
    assert_eq!(s, 200);
    assert_eq!(
        health["pid"].as_u64(),
        Some(u64::from(d.child.id().unwrap()))
    );
    assert_eq!(health["version"], env!("CARGO_PKG_VERSION"));
    assert!(health["uptimeSeconds"].as_f64().unwrap() > 0.0);

    let (s, tools) = d.get("/v1/tools").await;
    assert_eq!(s, 200);
    let all = names(&tools);
    assert!(all.contains(&"everything__test_simple_text".to_owned()));
    assert!(all.contains(&"legacy__test_simple_text".to_owned()));
    // The search keeps names or descriptions that contain the text, in any case.
    let (_, found) = d.get("/v1/tools?q=PROGRESS").await;
    let found = names(&found);
    assert!(!found.is_empty() && found.len() < all.len(), "{found:?}");
    assert!(found.iter().all(|n| n.contains("progress")), "{found:?}");
    let (_, none) = d.get("/v1/tools?q=no%20such%20thing").await;
    assert!(names(&none).is_empty());

    let (s, r) = d
        .post(
            "/v1/call",
            &json!({"tool": "legacy__test_add", "arguments": {"a": 2, "b": 3}}),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(text(&r), "The sum of 2 and 3 is 5", "{r}");
    let (s, r) = d
        .post(
            "/v1/call",
            &json!({"tool": "everything__test_error_handling"}),
        )
        .await;
    assert_eq!(s, 200, "a tool's own error is its result: {r}");
    assert_eq!(r["isError"], true);

    let (s, r) = d
        .post("/v1/read", &json!({"uri": "test://static-text"}))
        .await;
    assert_eq!(s, 200, "{r}");
    assert!(r["contents"][0]["text"].as_str().is_some(), "{r}");

    let (s, r) = d
        .post(
            "/v1/prompt",
            &json!({"name": "everything__test_simple_prompt", "arguments": {}}),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    assert!(
        r["messages"].as_array().is_some_and(|m| !m.is_empty()),
        "{r}"
    );

    let (s, r) = d.get("/v1/servers").await;
    assert_eq!(s, 200);
    let servers = r["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 2);
    assert_eq!(servers[1]["name"], "legacy");
    assert!(
        servers[1]["transport"]
            .as_str()
            .unwrap()
            .starts_with("stdio:")
    );

    let (s, r) = d.get("/v1/tasks").await;
    assert_eq!(s, 200);
    assert_eq!(r["calls"], json!([]), "nothing in flight");
    assert_eq!(r["gatewayTasks"], 0);

    // Restart: a new process, one more restart.
    let before = d.get("/v1/status").await.1["upstreams"][1].clone();
    let (s, r) = d.post("/v1/servers/legacy/restart", &json!({})).await;
    assert_eq!(s, 202, "{r}");
    let after = d
        .wait_status("legacy restarted", |v| {
            let l = &v["upstreams"][1];
            l["state"] == "ready" && l["restarts"] == before["restarts"].as_u64().unwrap() + 1
        })
        .await;
    assert_ne!(after["upstreams"][1]["pid"], before["pid"]);
    assert!(!daemon_support::alive(before["pid"].as_u64().unwrap()));

    // Reload: an upstream removed from the file goes.
    let mut config = two_examples();
    config["mcpServers"]
        .as_object_mut()
        .unwrap()
        .remove("legacy");
    std::fs::write(&d.config, config.to_string()).unwrap();
    let (s, r) = d.post("/v1/reload", &json!({})).await;
    assert_eq!(s, 200, "{r}");
    assert!(r["plan"].as_str().unwrap().contains("legacy"), "{r}");
    d.wait_status("legacy removed", |v| {
        v["upstreams"].as_array().unwrap().len() == 1
    })
    .await;
    // A file that does not parse: 422, and the configuration in force stays.
    std::fs::write(&d.config, "{ not json").unwrap();
    let (s, r) = d.post("/v1/reload", &json!({})).await;
    assert_eq!(s, 422, "{r}");
    assert_eq!(r["type"], "urn:mcpx:problem:bad-config");
    let (s, _) = d
        .post("/v1/call", &json!({"tool": "test_simple_text"}))
        .await;
    assert_eq!(s, 200, "one upstream left: its tools are not namespaced");

    let (s, r) = d.post("/v1/shutdown", &json!({})).await;
    assert_eq!(s, 202, "{r}");
    let mut d = d;
    let exited = tokio::time::timeout(WITHIN, d.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exited.success());
    assert!(!d.socket.exists(), "the socket is removed");
}

/// The TCP listener's token in these tests.
const SECRET: &str = "s3cret-of-the-daemon-at-least-32-bytes";

#[tokio::test]
async fn every_route_answers_over_tcp_behind_a_token() {
    let dir = mcpx_testkit::scratch::dir("daemon-tcp");
    let tokens = dir.join("tokens");
    crate::write_token_file(&tokens, &format!("{SECRET}\n"));
    let d = Daemon::start_in(
        dir,
        &two_examples(),
        &[
            "--http",
            "127.0.0.1:0",
            "--token-file",
            tokens.to_str().unwrap(),
        ],
    )
    .await;
    d.ready().await;
    let http = reqwest::Client::new();
    let get = |path: &str| http.get(d.url(path)).bearer_auth(SECRET).send();
    // No token, a wrong one, a foreign Origin, a foreign Host: refused.
    let r = http.get(d.url("/v1/health")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    let r = http
        .get(d.url("/v1/health"))
        .bearer_auth("nope")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .get(d.url("/v1/health"))
        .bearer_auth(SECRET)
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.headers().get("access-control-allow-origin").is_none());
    let r = http
        .get(d.url("/v1/health"))
        .bearer_auth(SECRET)
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // The daemon's own origin (its status page's) is served.
    let own = format!("http://127.0.0.1:{}", d.port.unwrap());
    let r = http
        .get(d.url("/v1/health"))
        .bearer_auth(SECRET)
        .header("origin", own)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // The socket needs no token: its permissions are its access control.
    assert_eq!(d.get("/v1/health").await.0, 200);

    for path in [
        "/v1/health",
        "/v1/status",
        "/v1/tools?q=echo",
        "/v1/servers",
        "/v1/tasks",
        "/v1/openapi.json",
    ] {
        let r = get(path).await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
        assert!(v.is_object(), "{path}: {v}");
    }
    let post = |path: &str, body: Value| {
        http.post(d.url(path))
            .bearer_auth(SECRET)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let r = post("/v1/call", json!({"tool": "everything__test_simple_text"}))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    assert!(text(&v).contains("simple text"), "{v}");
    let r = post("/v1/read", json!({"uri": "test://static-text"}))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = post(
        "/v1/prompt",
        json!({"name": "everything__test_simple_prompt"}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let r = post("/v1/servers/everything/restart", json!({}))
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let r = post("/v1/reload", json!({})).await.unwrap();
    assert_eq!(r.status(), 200);
    // Events: the restart just asked for is among them.
    let r = http
        .get(d.url("/v1/events?since=0"))
        .bearer_auth(SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let mut body = r.bytes_stream();
    let mut seen = String::new();
    let found = tokio::time::timeout(WITHIN, async {
        use futures_util::StreamExt as _;
        while let Some(Ok(chunk)) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("event: restart") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "{seen}");
    drop(body);
    // The status page and its two files, with a policy that keeps other pages out.
    for (path, media, has) in [
        ("/", "text/html; charset=utf-8", "<table id=\"upstreams\">"),
        (
            "/page.js",
            "text/javascript; charset=utf-8",
            "/v1/events?since=0",
        ),
        ("/page.css", "text/css; charset=utf-8", "td.state"),
    ] {
        let r = get(path).await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.headers()["content-type"], media, "{path}");
        assert!(
            r.headers()["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("frame-ancestors 'none'")
        );
        assert!(r.text().await.unwrap().contains(has), "{path}");
    }
    let r = post("/v1/shutdown", json!({})).await.unwrap();
    assert_eq!(r.status(), 202);
}

#[tokio::test]
async fn the_openapi_document_lists_every_route_and_every_listed_route_is_served() {
    let d = Daemon::start("openapi", &two_examples(), &[]).await;
    d.ready().await;
    let (s, doc) = d.get("/v1/openapi.json").await;
    assert_eq!(s, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["components"]["schemas"]["Problem"].is_object());
    let paths = doc["paths"].as_object().unwrap();
    let mut operations = 0;
    for (path, methods) in paths {
        let concrete = path.replace("{name}", "everything");
        for (method, op) in methods.as_object().unwrap() {
            operations += 1;
            assert!(op["operationId"].is_string(), "{path} {method}");
            assert!(op["responses"]["default"].is_object(), "{path} {method}");
            if path == "/v1/shutdown" {
                continue; // asked last, below
            }
            let body = op
                .get("requestBody")
                .map(|_| r#"{"tool":"everything__test_simple_text","uri":"test://static-text","name":"everything__test_simple_prompt"}"#);
            let (status, media, answer) = d
                .ask_full(
                    &method.to_uppercase(),
                    &concrete,
                    body,
                    &[("content-type", "application/json")],
                )
                .await;
            // Served: neither "no such path" nor "wrong method".
            assert_ne!(
                answer["type"], "urn:mcpx:problem:not-found",
                "{path}: {answer}"
            );
            assert_ne!(status, 405, "{method} {path}");
            // Its status is the documented one, or a problem (the `default` response:
            // /v1/attach asked without an upgrade).
            let documented = op["responses"]
                .as_object()
                .unwrap()
                .keys()
                .any(|k| k == &status.to_string())
                || media == "application/problem+json";
            assert!(documented, "{method} {path}: {status} is not documented");
            if status == 200 && path != "/v1/events" {
                assert_eq!(media, "application/json", "{path}");
            }
            // Every other method of a documented path is refused with 405.
            let other = if method == "get" { "POST" } else { "GET" };
            let (status, _, answer) = d.ask_full(other, &concrete, None, &[]).await;
            assert_eq!(status, 405, "{other} {path}: {answer}");
            assert_eq!(answer["type"], "urn:mcpx:problem:method-not-allowed");
        }
    }
    assert!(operations >= 14, "{operations} operations documented");
    // A path the document does not list is not served.
    let (status, _, answer) = d.ask_full("GET", "/v1/nothing", None, &[]).await;
    assert_eq!(status, 404);
    assert_eq!(answer["type"], "urn:mcpx:problem:not-found");
    let (s, _) = d.post("/v1/shutdown", &json!({})).await;
    assert_eq!(s, 202);
}

/// The schema `doc` gives `op`'s answer with `status` in `media`: the one of that
/// status, or the `default` one (a problem).
fn answer_schema<'a>(op: &'a Value, status: u16, media: &str) -> Option<&'a Value> {
    let responses = &op["responses"];
    let response = responses
        .get(status.to_string())
        .unwrap_or(&responses["default"]);
    response["content"].get(media).map(|c| &c["schema"])
}

/// `instance` checked against `schema`, whose references point into `doc`'s
/// components: the errors, one a line.
fn violations(doc: &Value, schema: &Value, instance: &Value) -> String {
    let mut root = schema.clone();
    root["components"] = doc["components"].clone();
    let validator = jsonschema::validator_for(&root).unwrap();
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn every_route_answers_as_the_served_document_says() {
    let d = Daemon::start("documented", &two_examples(), &[]).await;
    d.ready().await;
    let (s, doc) = d.get("/v1/openapi.json").await;
    assert_eq!(s, 200);
    // A minimal valid body for each operation that takes one.
    let bodies = json!({
        "call": {"tool": "everything__test_simple_text"},
        "read": {"uri": "test://static-text"},
        "prompt": {"name": "everything__test_simple_prompt"},
    });
    let mut operations = Vec::new();
    for (path, methods) in doc["paths"].as_object().unwrap() {
        for (method, op) in methods.as_object().unwrap() {
            operations.push((path.clone(), method.clone(), op.clone()));
        }
    }
    // Restart and shutdown change what the others answer: they go last.
    let rank = |op: &Value| match op["operationId"].as_str() {
        Some("restart") => 1,
        Some("shutdown") => 2,
        _ => 0,
    };
    operations.sort_by_key(|(_, _, op)| rank(op));
    let mut checked = Vec::new();
    for (path, method, op) in &operations {
        let id = op["operationId"].as_str().unwrap();
        let concrete = path.replace("{name}", "everything");
        let body = op.get("requestBody").map(|b| {
            let body = &bodies[id];
            assert!(body.is_object(), "{id}: no body to send");
            let schema = &b["content"]["application/json"]["schema"];
            let wrong = violations(&doc, schema, body);
            assert!(
                wrong.is_empty(),
                "{id}: the body sent is not as documented: {wrong}"
            );
            body.to_string()
        });
        let (status, media, answer) = d
            .ask_full(
                &method.to_uppercase(),
                &concrete,
                body.as_deref(),
                &[("content-type", "application/json")],
            )
            .await;
        let media = media.split(';').next().unwrap_or("").trim().to_owned();
        let documented = op["responses"].get(status.to_string()).is_some();
        assert!(
            documented || media == "application/problem+json",
            "{method} {path}: {status} is not documented: {answer}"
        );
        if status == 101 {
            // A switch of protocols answers no body.
            assert!(op["responses"]["101"].get("content").is_none(), "{path}");
            checked.push(format!("{id} {status}"));
            continue;
        }
        let schema = answer_schema(op, status, &media)
            .unwrap_or_else(|| panic!("{method} {path}: {status} in {media} is not documented"));
        if media.ends_with("json") {
            let wrong = violations(&doc, schema, &answer);
            assert!(
                wrong.is_empty(),
                "{method} {path}: {status} does not match its schema: {wrong}\n{answer}"
            );
        } else {
            assert_eq!(schema["type"], "string", "{path}: {media}");
        }
        checked.push(format!("{id} {status}"));
    }
    // Every operation was asked, and those that answer JSON on success did.
    assert_eq!(checked.len(), operations.len());
    assert!(operations.len() >= 14, "{checked:?}");
    for want in [
        "health 200",
        "status 200",
        "tools 200",
        "call 200",
        "read 200",
        "prompt 200",
        "servers 200",
        "restart 202",
        "reload 200",
        "tasks 200",
        "events 200",
        "shutdown 202",
        "openapi 200",
    ] {
        assert!(
            checked.iter().any(|c| c == want),
            "{want} not seen: {checked:?}"
        );
    }
    // Without an upgrade, /v1/attach answers a problem, checked against `default`.
    assert!(checked.iter().any(|c| c == "attach 426"), "{checked:?}");
}

#[tokio::test]
async fn bad_input_gets_a_problem_with_the_right_status_never_a_hang() {
    let d = Daemon::start("bad-input", &two_examples(), &[]).await;
    d.ready().await;
    let problem = |what: &str, status: u16, got: &(u16, String, Value), kind: &str| {
        assert_eq!(got.0, status, "{what}: {}", got.2);
        assert_eq!(got.1, "application/problem+json", "{what}");
        assert_eq!(got.2["status"], status, "{what}");
        assert_eq!(
            got.2["type"],
            format!("urn:mcpx:problem:{kind}"),
            "{what}: {}",
            got.2
        );
        assert!(
            got.2["detail"].as_str().is_some_and(|d| !d.is_empty()),
            "{what}"
        );
    };
    let json_ct = [("content-type", "application/json")];
    let unknown = d
        .ask_full(
            "POST",
            "/v1/call",
            Some(r#"{"tool":"no_such_tool"}"#),
            &json_ct,
        )
        .await;
    problem("unknown tool", 404, &unknown, "unknown-name");
    assert_eq!(
        unknown.2["jsonrpc"]["code"], -32602,
        "the JSON-RPC error is carried"
    );
    assert!(
        unknown.2["jsonrpc"]["message"]
            .as_str()
            .unwrap()
            .contains("no_such_tool")
    );
    let p = d
        .ask_full("POST", "/v1/call", Some("{not json"), &json_ct)
        .await;
    problem("bad JSON", 400, &p, "bad-request");
    let p = d.ask_full("POST", "/v1/call", Some("[1]"), &json_ct).await;
    problem("not an object", 400, &p, "bad-request");
    let p = d.ask_full("POST", "/v1/call", Some("{}"), &json_ct).await;
    problem("no tool", 400, &p, "bad-request");
    let p = d
        .ask_full(
            "POST",
            "/v1/call",
            Some(r#"{"tool":"x","arguments":[1]}"#),
            &json_ct,
        )
        .await;
    problem("arguments not an object", 400, &p, "bad-request");
    let p = d
        .ask_full(
            "POST",
            "/v1/call?log=loud",
            Some(r#"{"tool":"everything__test_simple_text"}"#),
            &json_ct,
        )
        .await;
    problem("bad log level", 400, &p, "bad-request");
    let p = d
        .ask_full(
            "POST",
            "/v1/prompt",
            Some(r#"{"name":"no_such_prompt"}"#),
            &json_ct,
        )
        .await;
    problem("unknown prompt", 404, &p, "unknown-name");
    let p = d
        .ask_full("POST", "/v1/read", Some(r#"{"uri":"nope://x"}"#), &json_ct)
        .await;
    assert_eq!(p.0, 404, "unknown resource: {}", p.2);
    assert!(p.2["jsonrpc"]["code"].is_i64());
    let p = d
        .ask_full("POST", "/v1/servers/nobody/restart", None, &[])
        .await;
    problem("unknown upstream", 404, &p, "not-found");
    let p = d.ask_full("GET", "/v1/events?since=soon", None, &[]).await;
    problem("bad since", 400, &p, "bad-request");
    let p = d.ask_full("GET", "/v1/attach", None, &[]).await;
    problem("attach without an upgrade", 426, &p, "upgrade-required");
    let big = format!(
        r#"{{"tool":"x","arguments":{{"a":"{}"}}}}"#,
        "x".repeat(5 << 20)
    );
    // Over 4 MiB: the daemon answers before the body is all sent, and may close on
    // the rest, so the body is written on a raw connection whose write errors are
    // ignored, and the answer read from it.
    let p = raw_post(&d.socket, "/v1/call", big.as_bytes()).await;
    problem("a body over 4 MiB", 413, &p, "body-too-large");
    // A tool's invalid input: the gateway's answer for a 2026-07-28 host.
    let (s, r) = d
        .post(
            "/v1/call",
            &json!({"tool": "everything__test_add", "arguments": {"a": "x"}}),
        )
        .await;
    assert!(s == 200 || s == 422, "{s} {r}");
    // The daemon still serves.
    assert_eq!(d.get("/v1/health").await.0, 200);
    d.post("/v1/shutdown", &json!({})).await;
}

/// Calls a slow tool, reads until its first progress, then drops the connection; the
/// upstream must be sent `notifications/cancelled` for it.
async fn cancelled_when_the_client_goes(d: &Daemon, tool: &str, stream: bool) {
    use http_body_util::BodyExt as _;
    let before = wire(&d.dir)
        .iter()
        .filter(|f| f["method"] == "notifications/cancelled")
        .count();
    let stream_sock = tokio::net::UnixStream::connect(&d.socket).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream_sock))
            .await
            .unwrap();
    let conn = tokio::spawn(conn);
    let body = json!({"tool": tool, "arguments": {"steps": 200, "delayMs": 100}}).to_string();
    let req = hyper::Request::post("/v1/call")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header(
            "accept",
            if stream {
                "application/x-ndjson"
            } else {
                "application/json"
            },
        )
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    if stream {
        let resp = sender.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        let mut body = resp.into_body();
        let first = tokio::time::timeout(WITHIN, body.frame()).await.unwrap();
        let first = first.unwrap().unwrap().into_data().unwrap();
        assert!(
            String::from_utf8_lossy(&first).contains("progress"),
            "{first:?}"
        );
    } else {
        let pending = tokio::spawn(async move { sender.send_request(req).await });
        d.wait_status("the call in flight", |_| true).await;
        let started = crate::wait::until(WITHIN, async || {
            !d.get("/v1/tasks").await.1["calls"]
                .as_array()
                .unwrap()
                .is_empty()
        })
        .await;
        assert!(started, "the call never started");
        pending.abort();
    }
    conn.abort();
    let cancelled = crate::wait::until(WITHIN, async || {
        wire(&d.dir)
            .iter()
            .filter(|f| f["method"] == "notifications/cancelled")
            .count()
            > before
    })
    .await;
    assert!(
        cancelled,
        "{tool} (stream {stream}): no notifications/cancelled went upstream"
    );
    // And the call is no longer in flight.
    let ended = crate::wait::until(WITHIN, async || {
        d.get("/v1/tasks").await.1["calls"]
            .as_array()
            .unwrap()
            .is_empty()
    })
    .await;
    assert!(ended, "the call is still in flight");
}

#[tokio::test]
async fn a_client_that_goes_away_mid_call_cancels_the_upstream_call() {
    let d = Daemon::start("cancel", &two_examples(), &[]).await;
    d.ready().await;
    // A 2026-07-28 upstream and a 2025-03-26 one, each cancelled on stdio with
    // notifications/cancelled; a streamed call and a plain one.
    cancelled_when_the_client_goes(&d, "everything__test_tool_with_progress", true).await;
    cancelled_when_the_client_goes(&d, "legacy__test_tool_with_progress", true).await;
    cancelled_when_the_client_goes(&d, "legacy__test_tool_with_progress", false).await;
    cancelled_when_the_client_goes(&d, "everything__test_tool_with_progress", false).await;
    // The events tell of the cancelled calls.
    let (_, health) = d.get("/v1/health").await;
    assert!(health["lastEvent"].as_u64().unwrap() > 0);
    d.post("/v1/shutdown", &json!({})).await;
}

#[tokio::test]
async fn a_streamed_call_relays_progress_and_logs_then_the_result() {
    let d = Daemon::start("stream", &two_examples(), &[]).await;
    d.ready().await;
    let body = json!({"tool": "legacy__test_tool_with_progress", "arguments": {"steps": 3, "delayMs": 10}});
    let text = body.to_string();
    let (s, media, _) = d
        .ask_full(
            "POST",
            "/v1/call",
            Some(&text),
            &[("accept", "application/x-ndjson")],
        )
        .await;
    assert_eq!((s, media.as_str()), (200, "application/x-ndjson"));
    // Read it whole as text: NDJSON lines.
    let out = tokio::time::timeout(WITHIN, async {
        use http_body_util::BodyExt as _;
        let stream = tokio::net::UnixStream::connect(&d.socket).await.unwrap();
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(conn);
        let req = hyper::Request::post("/v1/call?log=debug")
            .header("host", "localhost")
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(http_body_util::Full::new(bytes::Bytes::from(
                json!({"tool": "everything__test_tool_with_logging"}).to_string(),
            )))
            .unwrap();
        let sse = sender.send_request(req).await.unwrap();
        let sse = String::from_utf8(sse.into_body().collect().await.unwrap().to_bytes().to_vec())
            .unwrap();
        let stream = tokio::net::UnixStream::connect(&d.socket).await.unwrap();
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(conn);
        let req = hyper::Request::post("/v1/call")
            .header("host", "localhost")
            .header("content-type", "application/json")
            .header("accept", "application/x-ndjson")
            .body(http_body_util::Full::new(bytes::Bytes::from(text.clone())))
            .unwrap();
        let nd = sender.send_request(req).await.unwrap();
        let nd =
            String::from_utf8(nd.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
        (sse, nd)
    })
    .await
    .unwrap();
    let (sse, nd) = out;
    let lines: Vec<Value> = nd
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["progress", "progress", "progress", "result"],
        "{nd}"
    );
    assert_eq!(lines[2]["data"]["progress"], 3.0);
    assert_eq!(lines[2]["data"]["total"], 3.0);
    assert!(text_of(&lines[3]["data"]).contains("3 steps"), "{nd}");
    // SSE: eight log events (every level, as asked with log=debug), then the result.
    assert_eq!(sse.matches("event: log\n").count(), 8, "{sse}");
    assert!(
        sse.trim_end().ends_with('}') && sse.contains("event: result\n"),
        "{sse}"
    );
    assert!(sse.find("event: result").unwrap() > sse.rfind("event: log").unwrap());
    d.post("/v1/shutdown", &json!({})).await;
}

fn text_of(result: &Value) -> String {
    text(result)
}

/// POSTs `body` on a connection of its own, its write errors ignored, and reads the
/// answer: its status, content type and JSON body.
async fn raw_post(socket: &std::path::Path, path: &str, body: &[u8]) -> (u16, String, Value) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let stream = tokio::net::UnixStream::connect(socket).await.unwrap();
    let (mut rd, mut wr) = stream.into_split();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let body = body.to_vec();
    tokio::spawn(async move {
        let _ = wr.write_all(head.as_bytes()).await;
        let _ = wr.write_all(&body).await;
    });
    let mut got = Vec::new();
    tokio::time::timeout(WITHIN, async {
        let mut buf = [0u8; 8192];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
            if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&got[..at]).to_lowercase();
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .and_then(|n| n.trim().parse::<usize>().ok());
                if len.is_some_and(|n| got.len() >= at + 4 + n) {
                    break;
                }
            }
        }
    })
    .await
    .expect("an answer in time");
    let text = String::from_utf8_lossy(&got).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a whole head");
    let status = head[9..12].parse().unwrap();
    let media = head
        .lines()
        .find_map(|l| {
            l.to_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_owned)
        })
        .unwrap_or_default();
    (
        status,
        media,
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn a_caller_that_declares_capabilities_answers_the_servers_questions() {
    let d = Daemon::start("mrtr", &two_examples(), &[]).await;
    d.ready().await;
    let tool = "everything__test_input_required_result_elicitation";
    // Without capabilities: the server refuses to ask (-32021), a 400.
    let (s, p) = d.post("/v1/call", &json!({"tool": tool})).await;
    assert_eq!(s, 400, "{p}");
    assert_eq!(p["type"], "urn:mcpx:problem:missing-capability");
    assert_eq!(p["jsonrpc"]["code"], -32021);
    // With them: the question, then the answer with the server's state.
    let caps = json!({"elicitation": {"form": {}}});
    let (s, asked) = d
        .post("/v1/call", &json!({"tool": tool, "capabilities": caps}))
        .await;
    assert_eq!(s, 200, "{asked}");
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let question = &asked["inputRequests"]["user_name"];
    assert_eq!(question["method"], "elicitation/create", "{asked}");
    let mut retry = json!({
        "tool": tool,
        "capabilities": caps,
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Ada"}}},
    });
    if let Some(state) = asked.get("requestState") {
        retry["requestState"] = state.clone();
    }
    let (s, done) = d.post("/v1/call", &retry).await;
    assert_eq!(s, 200, "{done}");
    assert_eq!(text(&done), "Hello, Ada!", "{done}");
    // Bad shapes are problems.
    let (s, _) = d
        .post("/v1/call", &json!({"tool": tool, "capabilities": 1}))
        .await;
    assert_eq!(s, 400);
    let (s, _) = d
        .post("/v1/call", &json!({"tool": tool, "requestState": 1}))
        .await;
    assert_eq!(s, 400);
    d.post("/v1/shutdown", &json!({})).await;
}
