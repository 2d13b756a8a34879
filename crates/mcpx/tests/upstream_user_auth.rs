//! A user's authorization toward an HTTP upstream (the authorization-code grant, issue
//! #21), over real sockets and real processes: an authorization server and a protected
//! MCP upstream on 127.0.0.1 (one axum app, both counted), `mcpx auth login` through a
//! `$BROWSER` script that follows the authorization server's redirect to mcpx's
//! callback, `mcpx auth status`, the token store's modes, refresh at expiry (once for
//! 20 concurrent calls in one process; once for two processes), `invalid_grant`, an
//! HTTP+SSE upstream, and `mcpx auth logout`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

use serde_json::json;

mod common;
use common::*;
#[path = "common/authz.rs"]
mod authz;
use authz::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_status_refresh_once_per_expiry_and_logout() {
    // Refreshes: at the gateway's start (64 s: within the 60 s margin four seconds later), at
    // the burst (64 s again), at the two processes (an hour).
    let st = server(vec![64, 64, 3600]).await;
    let port = st.lock().unwrap().port;
    let s = setup("user-auth", port);

    // Before a login: status says so; nothing is stored.
    let (ok, out, _) = s.run(&["auth", "status"]).await;
    assert!(
        ok && out.contains("needs login (`mcpx auth login up`)"),
        "{out}"
    );

    let (ok, out, err) = s.run(&["auth", "login", "up"]).await;
    assert!(ok, "{out}\n{err}");
    let b = format!("http://127.0.0.1:{port}");
    assert!(out.contains(&format!("authorized by {b}/as")), "{out}");
    // The URL is printed; no token ever is.
    assert!(err.contains(&format!("{b}/as/authorize?")), "{err}");
    assert!(!out.contains("at-1") && !err.contains("at-1") && !err.contains("rt-1"));
    {
        let a = st.lock().unwrap();
        assert_eq!(
            (
                a.counts.registrations,
                a.counts.authorizations,
                a.counts.code_grants
            ),
            (1, 1, 1)
        );
        // RFC 8707: the Protected Resource Metadata's resource, on both requests.
        assert_eq!(a.resources, [format!("{b}/mcp"), format!("{b}/mcp")]);
    }

    let (ok, out, _) = s.run(&["auth", "status"]).await;
    assert!(ok, "{out}");
    assert!(out.contains("authorized"), "{out}");
    assert!(out.contains(&format!("issuer {b}/as")), "{out}");
    assert!(out.contains("scope mcp offline_access"), "{out}");
    assert!(!out.contains("at-") && !out.contains("rt-"), "{out}");

    // The store: 0700 directories, 0600 files, the token in the tokens file only.
    let store = s.store();
    assert_eq!(mode(&store), 0o700);
    let mut files = 0;
    for sub in ["tokens", "clients", "upstreams"] {
        assert_eq!(mode(&store.join(sub)), 0o700, "{sub}");
        for e in std::fs::read_dir(store.join(sub)).unwrap() {
            let p = e.unwrap().path();
            assert_eq!(mode(&p), 0o600, "{p:?}");
            let text = std::fs::read_to_string(&p).unwrap();
            if sub != "tokens" {
                assert!(!text.contains("at-1"), "{p:?}: {text}");
            }
            files += 1;
        }
    }
    assert!(files >= 3, "{files}");

    // One gateway process: its start refreshes the expiring token (no login), then 20
    // concurrent calls at the next expiry share one refresh.
    let mut h = Host::start_env(
        "user-auth-gw",
        &serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap(),
        R1125,
        &[],
        &[("XDG_STATE_HOME", s.state.as_os_str())],
    )
    .await;
    h.initialize(json!({})).await;
    let (r, _) = h
        .request("tools/call", json!({"name": "hello", "arguments": {}}))
        .await;
    assert_eq!(text(result(&r, "tools/call")), "hi", "{r}");
    assert_eq!(st.lock().unwrap().counts.refresh_grants, 1);
    // The refreshed token (64 s) comes within mcpx's 60 s margin.
    tokio::time::sleep(Duration::from_millis(4500)).await;
    for id in 1000..1020 {
        h.send(&tool_call(id)).await;
    }
    let mut answered = 0;
    while answered < 20 {
        let f = h.next_frame("a tools/call answer").await;
        if f["id"].as_u64().is_some_and(|i| (1000..1020).contains(&i)) {
            assert_eq!(text(&f["result"]), "hi", "{f}");
            answered += 1;
        }
    }
    assert_eq!(
        st.lock().unwrap().counts.refresh_grants,
        2,
        "20 calls, one refresh"
    );
    assert_eq!(st.lock().unwrap().counts.authorizations, 1, "no login");
    h.finish().await;

    // Two processes at the next expiry: one refresh between them (the store's lock,
    // the store re-read after taking it).
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let (a, b2) = tokio::join!(s.run(&["call", "hello"]), s.run(&["call", "hello"]));
    assert!(a.0 && a.1.contains("hi"), "{a:?}");
    assert!(b2.0 && b2.1.contains("hi"), "{b2:?}");
    {
        let a = st.lock().unwrap();
        assert_eq!(a.counts.refresh_grants, 3, "two processes, one refresh");
        assert_eq!(a.counts.authorizations, 1, "no login");
    }

    // Logout deletes the token set; status says a login is needed.
    let (ok, out, _) = s.run(&["auth", "logout", "up"]).await;
    assert!(ok && out.contains("logged out"), "{out}");
    let (ok, out, _) = s.run(&["auth", "status"]).await;
    assert!(ok && out.contains("needs login"), "{out}");
    assert_eq!(
        std::fs::read_dir(store.join("tokens"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "json")
            })
            .count(),
        0
    );
}

/// A refresh refused with `invalid_grant` deletes the stored token set (it is still
/// the refused one), and `mcpx serve`, which runs no login by itself, reports the
/// upstream unavailable with the reason and `mcpx auth login up`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_refresh_deletes_the_token_and_serve_names_the_login() {
    let st = server(vec![3600]).await;
    let port = st.lock().unwrap().port;
    let s = setup("user-auth-revoked", port);
    let (ok, out, err) = s.run(&["auth", "login", "up"]).await;
    assert!(ok, "{out}\n{err}");
    st.lock().unwrap().revoke_refresh = true;
    let line = unavailable_because(
        "user-auth-revoked-gw",
        &serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap(),
        &[("XDG_STATE_HOME", s.state.as_os_str())],
    )
    .await;
    assert!(line.contains("run `mcpx auth login up`"), "{line}");
    assert!(line.contains("revoked"), "{line}");
    assert!(!line.contains("rt-1") && !line.contains("at-1"), "{line}");
    assert_eq!(st.lock().unwrap().counts.refused_refreshes, 1);
    assert_eq!(
        st.lock().unwrap().counts.authorizations,
        1,
        "serve ran no login"
    );
    let (ok, out, _) = s.run(&["auth", "status"]).await;
    assert!(ok && out.contains("needs login"), "{out}");
}

/// An HTTP+SSE upstream gets the same as a Streamable HTTP one: `mcpx auth login` reads
/// the challenge of the stream's GET, and the stream's GET and every POST carry the
/// stored token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_upstream_is_authorized_the_same_way() {
    let st = server(vec![3600]).await;
    let port = st.lock().unwrap().port;
    let s = setup_as("user-auth-sse", port, "sse", "sse");
    let (ok, out, err) = s.run(&["auth", "login", "up"]).await;
    assert!(ok, "{out}\n{err}");
    let sse = format!("http://127.0.0.1:{port}/sse");
    assert_eq!(st.lock().unwrap().resources, [sse.clone(), sse]);
    let (ok, out, err) = s.run(&["call", "hello"]).await;
    assert!(ok && out.contains("hi"), "{out}\n{err}");
    let a = st.lock().unwrap();
    // The GET, and the POSTs of initialize, initialized, tools/list and tools/call.
    assert!(a.sse_authorized >= 5, "{}", a.sse_authorized);
    assert_eq!(a.counts.authorizations, 1, "no second login");
}

/// An upstream that needs no authorization is not stopped by a token store mcpx cannot
/// use (no state directory at all: neither HOME nor XDG_STATE_HOME): its calls go
/// without a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_state_directory_stops_no_open_upstream() {
    let (_ex, port) = example_http(&[]).await;
    let cfg = json!({"mcpServers": {"open": {"type": "http",
        "url": format!("http://127.0.0.1:{port}/mcp")}}});
    let dir = temp_dir("user-auth-nostate");
    let config = dir.join("mcpx.json");
    std::fs::write(&config, cfg.to_string()).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpx"))
        .args(["call", "test_simple_text", "--config"])
        .arg(&config)
        .env_remove("HOME")
        .env_remove("XDG_STATE_HOME")
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .output()
        .await
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains(SIMPLE_TEXT),
        "{stdout}\n{stderr}"
    );
}

/// Two logins to one server at once: the second cannot bind the callback port, takes
/// that for the first's login, and waits for its tokens instead of starting a second
/// flow (one authorization at the server; both succeed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_login_waits_for_the_first() {
    let st = server(vec![3600]).await;
    let port = st.lock().unwrap().port;
    let s = setup("user-auth-twice", port);
    // The first's browser takes a while, so that the second starts meanwhile.
    let slow = s.dir.join("slow-browser.sh");
    std::fs::write(
        &slow,
        format!("#!/bin/sh\nsleep 2\nexec {} \"$1\"\n", s.browser.display()),
    )
    .unwrap();
    std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut first = s.mcpx(&["auth", "login", "up"]);
    first.env("BROWSER", &slow);
    let first = first.output();
    let second = async {
        tokio::time::sleep(Duration::from_millis(700)).await;
        s.run(&["auth", "login", "up"]).await
    };
    let (first, second) = tokio::join!(first, second);
    let first = first.unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(second.0, "{}\n{}", second.1, second.2);
    assert!(second.2.contains("waiting for its result"), "{}", second.2);
    assert!(second.1.contains("authorized by"), "{}", second.1);
    assert_eq!(st.lock().unwrap().counts.authorizations, 1, "one flow");
}
