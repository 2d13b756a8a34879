//! `mcpx serve` asking a host to authorize an upstream (issue #21, register B-C15),
//! over real sockets and real processes: the authorization server and protected
//! upstream of `common/authz.rs` on 127.0.0.1, `mcpx serve` on stdio. A 2025-11-25
//! host that declared url-mode elicitation gets -32042 with the
//! authorization URL; the test "visits" it with the `$BROWSER` script (the
//! authorization server redirects to mcpx's callback); mcpx stores the tokens, tells
//! the host `notifications/elicitation/complete`, and the host's retry succeeds. A
//! 2026-07-28 host gets `input_required`, and its retry waits for the tokens. A host
//! without the capability (2025-11-25 without `elicitation.url`, 2025-06-18,
//! 2026-07-28) gets the error naming `mcpx auth login up`, and no flow is begun.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use serde_json::{Value, json};

use crate::authz;
use crate::common;
use authz::*;
use common::*;

/// `mcpx serve` for `s`'s configuration, with its state directory (the token store)
/// and no `$BROWSER`: serve must open none.
async fn serve(s: &Setup, tag: &str, rev: mcpx_protocol::Revision) -> Host {
    let cfg: Value = serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap();
    Host::start_env(
        tag,
        &cfg,
        rev,
        &[],
        &[
            ("XDG_STATE_HOME", s.state.as_os_str()),
            ("BROWSER", std::ffi::OsStr::new("/bin/false")),
        ],
    )
    .await
}

fn hello() -> Value {
    json!({"name": "hello", "arguments": {}})
}

/// A login by `mcpx auth login`, then `mcpx serve` with a host of `rev` declaring
/// `caps`, which sees the tool `hello`; then the authorization server revokes every
/// token: the upstream refuses the access token and the token endpoint the refresh
/// token (`invalid_grant`, so mcpx deletes the token set). A host only calls tools
/// it was shown, so this is how a host's call meets an upstream that needs
/// authorization.
async fn serve_then_revoke(
    s: &Setup,
    st: &Shared,
    tag: &str,
    rev: mcpx_protocol::Revision,
    caps: Value,
) -> Host {
    st.lock().revoke_refresh = false;
    let (ok, out, err) = s.run(&["auth", "login", "up"]).await;
    assert!(ok, "{out}\n{err}");
    let mut h = serve(s, tag, rev).await;
    if rev.era() == mcpx_protocol::Era::Legacy {
        h.initialize(caps).await;
    }
    let (listed, _) = h.request("tools/list", json!({})).await;
    assert_eq!(
        result(&listed, "tools/list")["tools"][0]["name"],
        "hello",
        "{listed}"
    );
    let mut a = st.lock();
    a.valid.clear();
    a.revoke_refresh = true;
    drop(a);
    h
}

/// Whether the callback port of `s`'s upstream is free (no flow listens on it).
fn callback_port_free(s: &Setup) -> bool {
    let cfg: Value = serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap();
    let port = cfg["mcpServers"]["up"]["mcpx"]["oauth"]["callbackPort"]
        .as_u64()
        .unwrap();
    std::net::TcpListener::bind(("127.0.0.1", u16::try_from(port).unwrap())).is_ok()
}

/// Waits for `notifications/elicitation/complete`; the frames before it.
async fn completion(h: &mut Host) -> (Value, Vec<Value>) {
    let mut before = Vec::new();
    loop {
        let f = h.next_frame("notifications/elicitation/complete").await;
        if f["method"] == "notifications/elicitation/complete" {
            return (f, before);
        }
        before.push(f);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_with_url_elicitation_is_asked_and_its_retry_succeeds() {
    let st = server(vec![3600]).await;
    let port = st.lock().port;
    let s = setup("user-auth-url", port);
    let mut h = serve_then_revoke(
        &s,
        &st,
        "user-auth-url-gw",
        R1125,
        json!({"elicitation": {"form": {}, "url": {}}}),
    )
    .await;

    // Two calls at once before the user acts: one flow, the same URL and
    // elicitation.
    let (a, b) = (h.next_id, h.next_id + 1);
    h.next_id += 2;
    for id in [a, b] {
        h.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": hello()}))
            .await;
    }
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 2 {
        let f = h.next_frame("tools/call").await;
        if let Some(id) = f["id"].as_i64() {
            answers.insert(id, f);
        }
    }
    let (first, second) = (answers.remove(&a).unwrap(), answers.remove(&b).unwrap());
    assert_eq!(error_code(&first, "tools/call"), -32042, "{first}");
    assert_eq!(error_code(&second, "tools/call"), -32042, "{second}");
    let e = &first["error"]["data"]["elicitations"][0];
    assert_eq!(e["mode"], "url", "{first}");
    assert_eq!(
        e, &second["error"]["data"]["elicitations"][0],
        "one flow for both calls"
    );
    let url = e["url"].as_str().unwrap().to_owned();
    let id = e["elicitationId"].as_str().unwrap().to_owned();
    assert!(
        url.starts_with(&format!("http://127.0.0.1:{port}/as/authorize?")),
        "{url}"
    );
    assert!(
        url.contains("code_challenge=") && url.contains("state="),
        "{url}"
    );
    assert!(!callback_port_free(&s), "the flow's listener is up");
    let shown = first.to_string();
    assert!(!shown.contains("code_verifier"), "{shown}");
    assert!(
        first["error"]["message"]
            .as_str()
            .unwrap()
            .contains(url.as_str()),
        "{first}"
    );
    {
        let mut a = st.lock();
        assert_eq!(a.counts.refused_refreshes, 1, "one refusal for both calls");
        assert_eq!(
            a.counts.registrations, 1,
            "the login's registration is reused"
        );
        assert_eq!(
            a.counts.code_grants, 1,
            "nothing exchanged before the visit"
        );
        assert_eq!(a.counts.authorizations, 1, "serve opened no browser");
        // The new token set's refresh token is good again.
        a.revoke_refresh = false;
    }

    // The host "visits" the URL: the authorization server redirects to mcpx's
    // callback.
    let visited = tokio::process::Command::new(&s.browser)
        .arg(&url)
        .status()
        .await
        .unwrap();
    assert!(visited.success(), "the callback answered an error");
    let (done, _) = completion(&mut h).await;
    assert_eq!(done["params"]["elicitationId"], json!(id), "{done}");
    {
        let a = st.lock();
        assert_eq!(a.counts.authorizations, 2);
        assert_eq!(a.counts.code_grants, 2);
    }

    // The retry reaches the upstream with the stored token.
    let (retry, _) = h.request("tools/call", hello()).await;
    assert_eq!(text(result(&retry, "tools/call")), "hi", "{retry}");

    // The tokens are in the store, where `mcpx auth status` (another process) sees them.
    let (ok, out, _) = s.run(&["auth", "status"]).await;
    assert!(ok && out.contains("authorized"), "{out}");
    assert!(!out.contains("needs login"), "{out}");
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_without_url_elicitation_gets_the_login_error() {
    let st = server(vec![3600]).await;
    let port = st.lock().port;
    let s = setup("user-auth-nourl", port);
    for (rev, caps) in [
        (R1125, json!({"elicitation": {"form": {}}})),
        (R1125, json!({})),
        (R0618, json!({"elicitation": {}})),
        (R2026, json!({"elicitation": {"form": {}}})),
    ] {
        let mut h = serve_then_revoke(&s, &st, "user-auth-nourl-gw", rev, caps.clone()).await;
        let mut params = hello();
        if rev == R2026 {
            params["_meta"] = modern_meta(caps.clone());
        }
        let (v, _) = h.request("tools/call", params).await;
        assert_eq!(error_code(&v, "tools/call"), -32603, "{rev} {caps}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("run `mcpx auth login up`"),
            "{rev} {caps}: {message}"
        );
        assert!(v["error"]["data"].get("elicitations").is_none(), "{v}");
        assert!(callback_port_free(&s), "serve began no flow");
        h.finish().await;
    }
    let a = st.lock();
    assert_eq!(a.counts.refused_refreshes, 4);
    assert_eq!(a.counts.authorizations, 4, "the four logins' only");
    assert_eq!(a.counts.registrations, 1, "no flow was begun by serve");
}

/// An upstream never authorized: beside another upstream that offers tools, its
/// namespace's name `up__hello` meets it in `needs_authorization`. After the visit
/// mcpx starts it again and waits until it is listed before telling the host, so
/// the retry finds the tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_never_authorized_is_started_again_after_the_visit() {
    let st = server(vec![3600]).await;
    let port = st.lock().port;
    let s = setup("user-auth-url-start", port);
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap();
    cfg["mcpServers"]["ex"] = json!({"command": env!("CARGO_BIN_EXE_mcpx"),
        "args": ["example-server", "--revision", "2025-11-25"]});
    std::fs::write(&s.config, cfg.to_string()).unwrap();
    let mut h = serve(&s, "user-auth-url-start-gw", R1125).await;
    h.initialize(json!({"elicitation": {"url": {}}})).await;
    let call = json!({"name": "up__hello", "arguments": {}});
    let (first, _) = h.request("tools/call", call.clone()).await;
    assert_eq!(error_code(&first, "tools/call"), -32042, "{first}");
    let e = &first["error"]["data"]["elicitations"][0];
    assert_eq!(
        e["message"], "[up] Authorize mcpx to use upstream up",
        "{first}"
    );
    let url = e["url"].as_str().unwrap().to_owned();
    let visited = tokio::process::Command::new(&s.browser)
        .arg(&url)
        .status()
        .await
        .unwrap();
    assert!(visited.success());
    let (done, _) = completion(&mut h).await;
    assert_eq!(
        done["params"]["elicitationId"], e["elicitationId"],
        "{done}"
    );
    let (retry, _) = h.request("tools/call", call).await;
    assert_eq!(text(result(&retry, "tools/call")), "hi", "{retry}");
    assert_eq!(st.lock().counts.code_grants, 1);
    h.finish().await;
}

/// A 2026-07-28 host that declared url elicitation gets an `input_required` result
/// with the authorization URL (its revision has no -32042). Its retry, sent before
/// the user visits the URL, waits for the flow and then succeeds; the
/// `requestState` is spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_host_is_asked_with_input_required_and_its_retry_waits() {
    let st = server(vec![3600]).await;
    let port = st.lock().port;
    let s = setup("user-auth-url-2026", port);
    let caps = json!({"elicitation": {"url": {}}});
    let mut h = serve_then_revoke(&s, &st, "user-auth-url-2026-gw", R2026, caps.clone()).await;
    let mut params = hello();
    params["_meta"] = modern_meta(caps.clone());
    let (first, _) = h.request("tools/call", params.clone()).await;
    let r = result(&first, "tools/call");
    assert_eq!(r["resultType"], "input_required", "{first}");
    let ask = &r["inputRequests"]["mcpx/authorize"];
    assert_eq!(ask["method"], "elicitation/create", "{first}");
    assert_eq!(ask["params"]["mode"], "url", "{first}");
    assert!(ask["params"].get("elicitationId").is_none(), "{first}");
    let url = ask["params"]["url"].as_str().unwrap().to_owned();
    assert!(
        url.starts_with(&format!("http://127.0.0.1:{port}/as/authorize?")),
        "{url}"
    );
    let state = r["requestState"].as_str().unwrap().to_owned();
    st.lock().revoke_refresh = false;

    let mut retry = params.clone();
    retry["inputResponses"] = json!({"mcpx/authorize": {"action": "accept"}});
    retry["requestState"] = json!(state);
    // With another call it is refused, and kept for the right one.
    let mut other = retry.clone();
    other["name"] = json!("other");
    let (wrong, _) = h.request("tools/call", other).await;
    assert_eq!(error_code(&wrong, "tools/call"), -32602, "{wrong}");

    // The retry goes first and waits; then the user visits the URL.
    let id = h.next_id;
    h.next_id += 1;
    h.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": retry}))
        .await;
    // A request after it is answered first: mcpx has read the retry (its stdin is
    // read in order), and the retry waits.
    let (listed, before) = h.request("tools/list", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
    assert!(
        before.iter().all(|f| f["id"] != json!(id)),
        "the retry was answered before the visit: {before:?}"
    );
    assert_eq!(st.lock().counts.code_grants, 1, "not visited yet");
    let visited = tokio::process::Command::new(&s.browser)
        .arg(&url)
        .status()
        .await
        .unwrap();
    assert!(visited.success());
    let answer = loop {
        let f = h.next_frame("tools/call").await;
        if f["id"] == json!(id) {
            break f;
        }
    };
    assert_eq!(text(result(&answer, "tools/call")), "hi", "{answer}");
    assert_eq!(st.lock().counts.code_grants, 2);

    // Spent: the same requestState again is refused.
    let (again, _) = h.request("tools/call", retry).await;
    assert_eq!(error_code(&again, "tools/call"), -32602, "{again}");
    h.finish().await;
}
