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

use crate::authz;
use crate::common;
use authz::*;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_status_refresh_once_per_expiry_and_logout() {
    // Refreshes: at the gateway's start (64 s: within the 60 s margin four seconds later), at
    // the burst (64 s again), at the two processes (an hour).
    let st = server(vec![64, 64, 3600]).await;
    let port = st.lock().port;
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
        let a = st.lock();
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
    assert_eq!(st.lock().counts.refresh_grants, 1);
    // The refreshed token (64 s) comes within mcpx's 60 s margin.
    // real sleep: a token's expiry, on the clock of the mcpx process.
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
    assert_eq!(st.lock().counts.refresh_grants, 2, "20 calls, one refresh");
    assert_eq!(st.lock().counts.authorizations, 1, "no login");
    h.finish().await;

    // Two processes at the next expiry: one refresh between them (the store's lock,
    // the store re-read after taking it). The stored token is made to expire now
    // (a new process reads its expiry from the store).
    expire_stored_tokens(&store);
    let (a, b2) = tokio::join!(s.run(&["call", "hello"]), s.run(&["call", "hello"]));
    assert!(a.0 && a.1.contains("hi"), "{a:?}");
    assert!(b2.0 && b2.1.contains("hi"), "{b2:?}");
    {
        let a = st.lock();
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

/// Rewrites every stored token set's `expires_at` to now: each is then due for a
/// refresh, as at its expiry.
fn expire_stored_tokens(store: &std::path::Path) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut expired = 0;
    for e in std::fs::read_dir(store.join("tokens")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let mut record: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert!(record.get("expires_at").is_some(), "{p:?}: no expiry");
        record["expires_at"] = serde_json::json!(now);
        // Written in place: the file keeps its 0600.
        std::fs::write(&p, record.to_string()).unwrap();
        expired += 1;
    }
    assert!(expired > 0, "no stored token set");
}

/// A refresh refused with `invalid_grant` deletes the stored token set (it is still
/// the refused one), and `mcpx serve`, which runs no login by itself, reports the
/// upstream unavailable with the reason and `mcpx auth login up`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_refresh_deletes_the_token_and_serve_names_the_login() {
    let st = server(vec![3600]).await;
    let port = st.lock().port;
    let s = setup("user-auth-revoked", port);
    let (ok, out, err) = s.run(&["auth", "login", "up"]).await;
    assert!(ok, "{out}\n{err}");
    st.lock().revoke_refresh = true;
    let line = unavailable_because(
        "user-auth-revoked-gw",
        &serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap(),
        &[("XDG_STATE_HOME", s.state.as_os_str())],
    )
    .await;
    assert!(line.contains("run `mcpx auth login up`"), "{line}");
    assert!(line.contains("revoked"), "{line}");
    assert!(!line.contains("rt-1") && !line.contains("at-1"), "{line}");
    assert_eq!(st.lock().counts.refused_refreshes, 1);
    assert_eq!(st.lock().counts.authorizations, 1, "serve ran no login");
    let (ok, out, _) = s.run(&["auth", "status"]).await;
    assert!(ok && out.contains("needs login"), "{out}");
}

/// An HTTP+SSE upstream gets the same as a Streamable HTTP one: `mcpx auth login` reads
/// the challenge of the stream's GET, and the stream's GET and every POST carry the
/// stored token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_upstream_is_authorized_the_same_way() {
    let st = server(vec![3600]).await;
    let port = st.lock().port;
    let s = setup_as("user-auth-sse", port, "sse", "sse");
    let (ok, out, err) = s.run(&["auth", "login", "up"]).await;
    assert!(ok, "{out}\n{err}");
    let sse = format!("http://127.0.0.1:{port}/sse");
    assert_eq!(st.lock().resources, [sse.clone(), sse]);
    let (ok, out, err) = s.run(&["call", "hello"]).await;
    assert!(ok && out.contains("hi"), "{out}\n{err}");
    let a = st.lock();
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
    let port = st.lock().port;
    let s = setup("user-auth-twice", port);
    // The first's browser takes a while, so that the second starts meanwhile; it
    // is opened once the first holds the callback port, and says so.
    let slow = s.dir.join("slow-browser.sh");
    let opened = s.dir.join("browser-opened");
    std::fs::write(
        &slow,
        format!(
            "#!/bin/sh\ntouch '{}'\nsleep 2\nexec {} \"$1\"\n",
            opened.display(),
            s.browser.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut first = s.mcpx(&["auth", "login", "up"]);
    first.env("BROWSER", &slow);
    let first = first.output();
    let second = async {
        let open = crate::wait::until(Duration::from_secs(10), async || opened.exists()).await;
        assert!(open, "the first login never opened its browser");
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
    assert_eq!(st.lock().counts.authorizations, 1, "one flow");
}

/// The line of `mcpx auth status`'s output for `name`.
fn status_line<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no line for {name} in\n{out}"))
}

/// Issue #32: `mcpx auth status` said "needs login" of every HTTP upstream, and `mcpx
/// auth login` on one that asks for no authorization failed at client registration
/// (HTTP 404). Now an upstream needs login once it refused a request with a 401 (seen
/// by the status's own request without a token, or by the gateway, and recorded), and
/// a login is tried only on one that asks (or with `--force`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_login_tell_an_upstream_that_asks_from_one_that_does_not() {
    let st = server(vec![3600]).await;
    let port = st.lock().port;
    let (_ex, open_port) = example_http(&[]).await;
    let s = setup("user-auth-asks", port);
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap();
    cfg["mcpServers"]["open"] =
        json!({"type": "http", "url": format!("http://127.0.0.1:{open_port}/mcp")});
    std::fs::write(&s.config, cfg.to_string()).unwrap();

    // From the store alone: neither was seen to ask.
    let (ok, out, err) = s.run(&["auth", "status", "--no-probe"]).await;
    assert!(ok, "{err}");
    for name in ["up", "open"] {
        assert!(
            status_line(&out, name).ends_with("  not needed so far: no 401 seen from it"),
            "{out}"
        );
    }

    // Asking them: `up` refuses a request without a token, `open` answers it.
    let (ok, out, err) = s.run(&["auth", "status"]).await;
    assert!(ok, "{err}");
    assert!(
        status_line(&out, "up").ends_with(
            "  needs login (`mcpx auth login up`): it refuses a request without a token (HTTP 401)"
        ),
        "{out}"
    );
    let open = status_line(&out, "open");
    assert!(
        open.contains("  not needed so far: it answers a request without a token (HTTP "),
        "{out}"
    );
    assert!(!open.contains("needs login"), "{out}");
    // The 401 is remembered: the store alone now tells it.
    let (_, out, _) = s.run(&["auth", "status", "--no-probe"]).await;
    assert!(
        status_line(&out, "up").contains(
            "  needs login (`mcpx auth login up`): it asked for authorization (HTTP 401, first at "
        ),
        "{out}"
    );

    // No login to the upstream that does not ask: it says so, the authorization
    // server never hears of it.
    let (ok, out, err) = s.run(&["auth", "login", "open"]).await;
    assert!(!ok, "{out}");
    assert!(
        err.starts_with("mcpx auth: upstream open does not ask for authorization (a request without a token got HTTP "),
        "{err}"
    );
    assert!(
        err.ends_with("; no login needed (`mcpx auth login open --force` logs in anyway)\n"),
        "{err}"
    );
    // `--force` tries anyway, and fails as an upstream with no authorization server does.
    let (ok, _, err) = s.run(&["auth", "login", "open", "--force"]).await;
    assert!(!ok);
    assert!(!err.contains("does not ask"), "{err}");
    assert_eq!(st.lock().counts.registrations, 0);
    // The upstream that asks gets its login.
    let (ok, out, err) = s.run(&["auth", "login", "up"]).await;
    assert!(ok, "{out}\n{err}");
    assert_eq!(st.lock().counts.authorizations, 1);
}

/// A 401 the gateway meets (`mcpx serve`, no token stored) is recorded: `mcpx auth
/// status` tells it without sending a request of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_the_gateway_meets_is_remembered() {
    let st = server(vec![3600]).await;
    let port = st.lock().port;
    let s = setup("user-auth-asks-gw", port);
    let line = unavailable_because(
        "user-auth-asks-gw-serve",
        &serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap(),
        &[("XDG_STATE_HOME", s.state.as_os_str())],
    )
    .await;
    assert!(line.contains("run `mcpx auth login up`"), "{line}");
    let (ok, out, err) = s.run(&["auth", "status", "--no-probe"]).await;
    assert!(ok, "{err}");
    assert!(
        status_line(&out, "up").contains(
            "needs login (`mcpx auth login up`): it asked for authorization (HTTP 401, first at "
        ),
        "{out}"
    );
}

/// Issue #39, item 2: a forged redirect (any local user, or a page's `<img>`) to the
/// login's callback with a wrong `state` gets 400 and the login waits on; the real
/// redirect then completes it. Here the browser sends the forged one first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_redirect_leaves_the_login_waiting() {
    let st = server(vec![3600]).await;
    let port = st.lock().port;
    let s = setup("user-auth-forged", port);
    let forged = s.dir.join("forged-status");
    let hostile = s.dir.join("hostile-browser.py");
    std::fs::write(
        &hostile,
        format!(
            r#"#!/usr/bin/env python3
import os, sys, urllib.error, urllib.parse, urllib.request
q = urllib.parse.parse_qs(urllib.parse.urlsplit(sys.argv[1]).query)
forged = q["redirect_uri"][0] + "?code=x&state=WRONG"
try:
    status = urllib.request.urlopen(forged, timeout=10).status
except urllib.error.HTTPError as e:
    status = e.code
except OSError as e:
    status = "unanswered: " + str(e)
open({out:?}, "w").write(str(status))
os.execv({real:?}, [{real:?}, sys.argv[1]])
"#,
            out = forged.display().to_string(),
            real = s.browser.display().to_string(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hostile, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut login = s.mcpx(&["auth", "login", "up"]);
    login.env("BROWSER", &hostile);
    let out = tokio::time::timeout(Duration::from_secs(60), login.output())
        .await
        .expect("the login ends")
        .unwrap();
    let status = std::fs::read_to_string(&forged).unwrap_or_default();
    assert_eq!(status, "400", "the forged redirect's answer");
    assert!(
        out.status.success(),
        "the real redirect completed the login: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(st.lock().counts.code_grants, 1, "one code exchanged");
}
