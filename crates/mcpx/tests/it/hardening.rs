//! Issue #39: what a hostile local user, a web page or a bad file could do to the
//! daemon's listeners, the metrics listener and `mcpx serve --http`, each over real
//! sockets against the real binary. Every wait is bounded.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::Command;

use crate::common::start_listening;
use crate::daemon_support::{Daemon, WITHIN, mcpx, run, two_examples};

/// The daemon's token in these tests.
const TOKEN: &str = "hardening-token-of-thirty-two-bytes-or-more";

/// A daemon on TCP requiring [`TOKEN`], in a directory named `tag`.
async fn daemon_with_token(tag: &str, extra: &[&str]) -> Daemon {
    let dir = crate::scratch_dir(&format!("hardening-{tag}"));
    let tokens = dir.join("tokens");
    crate::write_token_file(&tokens, &format!("{TOKEN}\n"));
    let mut args = vec![
        "--http",
        "127.0.0.1:0",
        "--token-file",
        tokens.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let d = Daemon::start_in(dir, &two_examples(), &args).await;
    d.ready().await;
    d
}

/// Sends `request` (raw bytes) to `port` and reads the answer until the server closes
/// or `Connection: close` ends it: the status and the whole text.
async fn raw(port: u16, request: &str) -> (u16, String) {
    let exchange = async {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut text = Vec::new();
        let _ = s.read_to_end(&mut text).await;
        String::from_utf8_lossy(&text).into_owned()
    };
    let text = tokio::time::timeout(WITHIN, exchange)
        .await
        .expect("an answer in time");
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    (status, text)
}

/// A GET of `path` with `headers` (each a whole line), closing after the answer.
fn get(port: u16, path: &str, headers: &[&str]) -> String {
    let mut r = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers
        .iter()
        .any(|h| h.to_ascii_lowercase().starts_with("host:"))
    {
        r.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for h in headers {
        r.push_str(h);
        r.push_str("\r\n");
    }
    r.push_str("\r\n");
    r
}

/// A 2025-06-18 `initialize` request.
fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
}

fn bearer() -> String {
    format!("Authorization: Bearer {TOKEN}")
}

/// Item 3: without a token, `--http` on loopback serves every local user, so it is
/// refused unless `--allow-any-local-user` says so, and the daemon's first line says
/// who it serves. Run as root, another local user (made for the test) without the
/// token is refused on `/v1/call`.
#[tokio::test]
async fn a_loopback_listener_without_a_token_needs_allow_any_local_user() {
    let dir = crate::scratch_dir("hardening-any-user");
    let cfg = dir.join("mcpx.json");
    std::fs::write(&cfg, two_examples().to_string()).unwrap();
    let cfg = cfg.to_str().unwrap();
    let (ok, _, err) = run(&dir, &["daemon", "--config", cfg, "--http", "127.0.0.1:0"]).await;
    assert!(!ok, "{err}");
    assert!(
        err.contains("every local user can reach this port")
            && err.contains("--allow-any-local-user"),
        "{err}"
    );
    let mut open = Daemon::start(
        "hardening-any-user-open",
        &two_examples(),
        &["--http", "127.0.0.1:0", "--allow-any-local-user"],
    )
    .await;
    let first = open.stderr.lock().clone();
    assert!(
        first.contains("no token: every local user may use it"),
        "{first}"
    );
    open.terminate().await;

    let Some(other) = OtherUser::create("mcpxhard") else {
        return;
    };
    let d = daemon_with_token("other-user", &[]).await;
    let url = d.url("/v1/call");
    let out = tokio::time::timeout(
        WITHIN,
        other
            .command("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
            .args(["-H", "content-type: application/json"])
            .args(["--data", r#"{"tool":"everything__test_simple_text"}"#])
            .arg(&url)
            .output(),
    )
    .await
    .expect("curl in time")
    .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "401",
        "another user without the token"
    );
}

/// A local user made for a test (when running as root), removed when dropped.
struct OtherUser {
    name: String,
    uid: u32,
    gid: u32,
}

impl OtherUser {
    fn create(name: &str) -> Option<OtherUser> {
        if nix_uid() != 0 {
            eprintln!("skipped: making a second local user needs root");
            return None;
        }
        let _ = std::process::Command::new("userdel").arg(name).output();
        let made = std::process::Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                name,
            ])
            .output();
        if !made.is_ok_and(|o| o.status.success()) {
            eprintln!("skipped: useradd {name} failed");
            return None;
        }
        let id = |flag: &str| {
            let out = std::process::Command::new("id")
                .args([flag, name])
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stdout).trim().parse().ok()
        };
        Some(OtherUser {
            name: name.to_owned(),
            uid: id("-u")?,
            gid: id("-g")?,
        })
    }

    /// `program` run as this user.
    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.uid(self.uid)
            .gid(self.gid)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    }
}

impl Drop for OtherUser {
    fn drop(&mut self) {
        let _ = std::process::Command::new("userdel")
            .arg(&self.name)
            .output();
    }
}

/// The effective uid of the test process.
fn nix_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid())
}

/// Item 4: 1,100 idle connections, 50 slowloris heads and 1,100 `/v1/events`
/// listeners on the daemon's TCP listener, and a host with the token is still served
/// at once on `/v1` and `/mcp`; the listeners beyond the bound are cut, the oldest
/// first, and told why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_and_event_listeners_never_lock_a_host_out() {
    let d = daemon_with_token("flood", &[]).await;
    let port = d.port.unwrap();
    let mut held = Vec::new();
    for _ in 0..1100 {
        held.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    }
    for _ in 0..50 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(b"GET /v1/health HTTP/1.1\r\nHost: 127")
            .await
            .unwrap();
        held.push(s);
    }
    let subscribe = get(port, "/v1/events", &[&bearer()]);
    let mut first = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    first.write_all(subscribe.as_bytes()).await.unwrap();
    for _ in 0..1099 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(subscribe.as_bytes()).await.unwrap();
        held.push(s);
    }
    let http = reqwest::Client::builder().timeout(WITHIN).build().unwrap();
    let r = http
        .get(d.url("/v1/health"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("served beside the flood");
    assert_eq!(r.status(), 200);
    let r = http
        .post(d.url("/mcp"))
        .bearer_auth(TOKEN)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(initialize().to_string())
        .send()
        .await
        .expect("served beside the flood");
    assert_eq!(r.status(), 200);
    // The first listener was cut to make room, and told so.
    let mut seen = Vec::new();
    let told = tokio::time::timeout(WITHIN, async {
        let mut buf = [0u8; 4096];
        loop {
            match first.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
            if String::from_utf8_lossy(&seen).contains("event: closed") {
                return true;
            }
        }
    })
    .await;
    assert_eq!(told.ok(), Some(true), "{}", String::from_utf8_lossy(&seen));
    drop(held);
}

/// Item 5: 40 connections that hold half a request head do not stall a scrape, and
/// a scrape whose `Host` is foreign (a DNS-rebinding page) is refused.
#[tokio::test]
async fn metrics_serve_a_scrape_beside_idle_connections_and_refuse_a_foreign_host() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpx"));
    cmd.args([
        "serve",
        "--demo",
        "--http",
        "127.0.0.1:0",
        "--metrics",
        "127.0.0.1:0",
    ])
    .env_remove("MCPX_SERVE_TOKEN")
    .stdout(Stdio::null());
    let (_gw, port) = start_listening(cmd).await;
    let mut held = Vec::new();
    for _ in 0..40 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n").await.unwrap();
        held.push(s);
    }
    // Well inside the 10 s a half-sent head may take: no place waits for one.
    let (status, text) = tokio::time::timeout(
        Duration::from_secs(5),
        raw(port, &get(port, "/metrics", &[])),
    )
    .await
    .expect("a scrape is not held behind idle connections");
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("mcpx_"), "{text}");
    let (status, text) = raw(port, &get(port, "/metrics", &["Host: evil.example"])).await;
    assert_eq!(status, 403, "{text}");
    assert!(!text.contains("mcpx_"), "{text}");
    drop(held);
}

/// Item 6 and 9: `/v1` has serve's guard. Two `Host` headers are refused, an
/// absolute-form target names a foreign host and is refused, a lowercase `bearer`
/// scheme is accepted, `https://localhost:P` is not the plain-HTTP listener's own
/// origin, and a POST's body must be JSON (a form's `text/plain` is refused).
#[tokio::test]
async fn v1_has_the_guard_of_every_listener() {
    let d = daemon_with_token("guard", &[]).await;
    let port = d.port.unwrap();
    let b = bearer();
    let (status, text) = raw(
        port,
        &get(
            port,
            "/v1/health",
            &[&b, "Host: 127.0.0.1", "Host: evil.example"],
        ),
    )
    .await;
    assert_eq!(status, 400, "two Host headers: {text}");
    let (status, text) = raw(
        port,
        &format!(
            "GET http://evil.example/v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{b}\r\nConnection: close\r\n\r\n"
        ),
    )
    .await;
    assert_eq!(status, 403, "an absolute-form target's host: {text}");
    let (status, text) = raw(
        port,
        &get(
            port,
            "/v1/health",
            &[&format!("authorization: bearer {TOKEN}")],
        ),
    )
    .await;
    assert_eq!(status, 200, "the scheme's case is not significant: {text}");
    let (status, text) = raw(
        port,
        &get(
            port,
            "/v1/health",
            &[&b, &format!("Origin: https://localhost:{port}")],
        ),
    )
    .await;
    assert_eq!(status, 403, "https is not this listener's origin: {text}");
    let (status, _) = raw(
        port,
        &get(
            port,
            "/v1/health",
            &[&b, &format!("Origin: http://localhost:{port}")],
        ),
    )
    .await;
    assert_eq!(status, 200, "its own origin");
    let body = r#"{"tool":"everything__test_simple_text"}"#;
    let post = |ctype: &str| {
        format!(
            "POST /v1/call HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{b}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let (status, text) = raw(port, &post("text/plain")).await;
    assert_eq!(status, 415, "{text}");
    let (status, text) = raw(port, &post("application/json; charset=utf-8")).await;
    assert_eq!(status, 200, "{text}");
}

/// Item 7: a token file others can read, a short token in it, and a short
/// `$MCPX_SERVE_TOKEN` are each refused with the reason.
#[tokio::test]
async fn token_files_are_private_and_tokens_long() {
    use std::os::unix::fs::PermissionsExt;
    let dir = crate::scratch_dir("hardening-token-files");
    let file = dir.join("tokens");
    let serve = |env: Option<&str>, file: Option<&std::path::Path>| {
        let mut c = mcpx(&dir, &["serve", "--demo", "--http", "127.0.0.1:0"]);
        if let Some(f) = file {
            c.arg("--token-file").arg(f);
        }
        if let Some(t) = env {
            c.env("MCPX_SERVE_TOKEN", t);
        }
        c.stdout(Stdio::null()).stderr(Stdio::piped());
        async move {
            let out = tokio::time::timeout(WITHIN, c.output())
                .await
                .expect("refused at once")
                .unwrap();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
    };
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (ok, err) = serve(None, Some(&file)).await;
    assert!(
        !ok && err.contains("readable by group or others (mode 644)"),
        "{err}"
    );
    crate::write_token_file(&file, "x\n");
    let (ok, err) = serve(None, Some(&file)).await;
    assert!(!ok && err.contains("line 1 has 1 bytes"), "{err}");
    let (ok, err) = serve(Some("short"), None).await;
    assert!(!ok && err.contains("has 5 bytes"), "{err}");
}

/// Item 8: a `Last-Event-ID` past every event (the largest u64) listens from now:
/// no overflow, no `lost` event.
#[tokio::test]
async fn a_last_event_id_past_every_event_listens_from_now() {
    let d = daemon_with_token("last-event-id", &[]).await;
    let port = d.port.unwrap();
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let req = get(
        port,
        "/v1/events",
        &[&bearer(), "Last-Event-ID: 18446744073709551615"],
    );
    s.write_all(req.as_bytes()).await.unwrap();
    // An event after subscribing: a call.
    let http = reqwest::Client::new();
    let mut seen = String::new();
    let got = tokio::time::timeout(WITHIN, async {
        let mut buf = [0u8; 4096];
        let mut called = false;
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
            if !called && seen.contains(": mcpx events") {
                called = true;
                let r = http
                    .post(d.url("/v1/call"))
                    .bearer_auth(TOKEN)
                    .header("content-type", "application/json")
                    .body(json!({"tool": "everything__test_simple_text"}).to_string())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
            }
            if seen.contains("event: call") {
                return true;
            }
        }
    })
    .await;
    assert_eq!(got.ok(), Some(true), "{seen}");
    assert!(!seen.contains("event: lost"), "{seen}");
}

/// Item 9: at `maxSessions`, a flood of sessions under one token evicts that token's
/// idle sessions first: another token's idle session lives on.
#[tokio::test]
async fn a_session_flood_under_one_token_evicts_its_own_sessions_first() {
    let dir = crate::scratch_dir("hardening-sessions");
    let (alpha, beta) = (
        "alpha-token-of-thirty-two-bytes-at-least",
        "beta-token-of-thirty-two-bytes-at-least",
    );
    let tokens = dir.join("tokens");
    crate::write_token_file(&tokens, &format!("{alpha}\n{beta}\n"));
    let config = json!({
        "mcpServers": {"everything": {"command": env!("CARGO_BIN_EXE_mcpx"), "args": ["example-server"]}},
        "mcpx": {"limits": {"maxSessions": 3}},
    });
    let file = dir.join("config.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpx"));
    cmd.args(["serve", "--config"])
        .arg(&file)
        .args(["--http", "127.0.0.1:0", "--token-file"])
        .arg(&tokens)
        .env_remove("MCPX_SERVE_TOKEN")
        .stdout(Stdio::null());
    let (_gw, port) = start_listening(cmd).await;
    let http = reqwest::Client::builder().timeout(WITHIN).build().unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let post = |token: &str, sid: Option<&str>, body: Value| {
        let mut b = http
            .post(&url)
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-06-18");
        if let Some(s) = sid {
            b = b.header("mcp-session-id", s);
        }
        b.body(body.to_string()).send()
    };
    let open = |token: &'static str| {
        let r = post(token, None, initialize());
        async move {
            let r = r.await.unwrap();
            assert_eq!(r.status(), 200);
            r.headers()["mcp-session-id"].to_str().unwrap().to_owned()
        }
    };
    let beta_session = open(beta).await;
    for _ in 0..6 {
        open(alpha).await;
    }
    let r = post(
        beta,
        Some(&beta_session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200, "beta's session outlived alpha's flood");
}

/// `mcpx serve --http` on `config`, with its own cache directory (the era cache on
/// disk, as users have it), in `dir`; its pid and port.
async fn serve_http(dir: &std::path::Path, config: &Value) -> (tokio::process::Child, u16) {
    let file = dir.join("mcpx.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let mut cmd = mcpx(dir, &["serve", "--config"]);
    cmd.arg(&file)
        .args(["--http", "127.0.0.1:0"])
        .stdout(Stdio::null());
    start_listening(cmd).await
}

/// A legacy session on `port`: its id.
async fn legacy_session(http: &reqwest::Client, port: u16) -> String {
    let r = http
        .post(format!("http://127.0.0.1:{port}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(initialize().to_string())
        .send()
        .await
        .expect("initialize answered");
    assert_eq!(r.status(), 200);
    r.headers()["mcp-session-id"].to_str().unwrap().to_owned()
}

/// One request in `session`: the answer's text (JSON or an SSE body).
async fn in_session(http: &reqwest::Client, port: u16, session: &str, body: Value) -> String {
    let r = http
        .post(format!("http://127.0.0.1:{port}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-06-18")
        .header("mcp-session-id", session)
        .body(body.to_string())
        .send()
        .await
        .expect("answered");
    r.text().await.unwrap()
}

/// Item 1: a configuration file replaced by a FIFO with no writer, then SIGHUP: the
/// gateway (one runtime thread, as by default) goes on answering hosts, and says
/// why it did not reload; a file over the size cap is refused the same way.
#[tokio::test]
async fn a_configuration_path_that_blocks_never_freezes_the_gateway() {
    let dir = crate::scratch_dir("hardening-fifo");
    let exe = env!("CARGO_BIN_EXE_mcpx");
    let config = json!({"mcpServers": {"a": {"command": exe, "args": ["example-server"]}}});
    let (gw, port) = serve_http(&dir, &config).await;
    let pid = gw.id().unwrap().to_string();
    let http = reqwest::Client::builder().timeout(WITHIN).build().unwrap();
    let file = dir.join("mcpx.json");
    std::fs::remove_file(&file).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&file)
        .status()
        .unwrap();
    assert!(made.success());
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(hup.success());
    let session = legacy_session(&http, port).await;
    let listed = in_session(
        &http,
        port,
        &session,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    // One upstream: its tools keep their own names.
    assert!(listed.contains("\"test_simple_text\""), "{listed}");

    // Over the cap (4 MiB): a valid file of 5 MiB, refused unread.
    let with_b = |pad: usize| {
        json!({"mcpServers": {"a": {"command": exe, "args": ["example-server"]},
            "b": {"command": exe, "args": ["example-server"], "env": {"PAD": "x".repeat(pad)}}}})
    };
    std::fs::remove_file(&file).unwrap();
    std::fs::write(&file, with_b(5 << 20).to_string()).unwrap();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(hup.success());
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let listed = in_session(&http, port, &session, list.clone()).await;
    assert!(
        listed.contains("\"test_simple_text\"") && !listed.contains("b__"),
        "{listed}"
    );
    // The same file under the cap is read: reloads still work.
    std::fs::write(&file, with_b(16).to_string()).unwrap();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(hup.success());
    let joined = crate::wait::until(WITHIN, async || {
        in_session(&http, port, &session, list.clone())
            .await
            .contains("b__test_simple_text")
    })
    .await;
    assert!(joined, "a file under the cap was reloaded");
}

/// Item 9: the first restart after a crash starts the process once. The upstream's
/// era is remembered on disk (as users have it) and the restarted process exits at
/// once, as a broken server does: the remembered era's handshake failed, and the
/// start went on to the other era and a third probe, three processes in 250 ms. The
/// daemon's status says when the restart's start has ended.
#[tokio::test]
async fn a_crashed_upstream_is_started_once_per_restart() {
    let dir = crate::scratch_dir("hardening-one-spawn");
    let starts = dir.join("starts");
    // Each start is a line; every start after the first exits at once.
    let script = format!(
        "echo $$ >> '{log}'; [ \"$(wc -l < '{log}')\" -gt 1 ] && exit 1; exec '{exe}' example-server",
        log = starts.display(),
        exe = env!("CARGO_BIN_EXE_mcpx")
    );
    let config = json!({"mcpServers": {"a": {"command": "sh", "args": ["-c", script]}}});
    let d = Daemon::start_in(dir, &config, &[]).await;
    d.ready().await;
    let pids = || -> Vec<String> {
        std::fs::read_to_string(&starts)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    };
    let before = pids();
    assert_eq!(before.len(), 1, "one start: {before:?}");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &before[0]])
        .status()
        .unwrap();
    assert!(killed.success());
    // Once the restart's process is recorded, the state is `starting` until that
    // start has ended, however many processes it takes.
    d.wait_status("the first restart's start ended", |v| {
        pids().len() >= 2 && v["upstreams"][0]["state"] != "starting"
    })
    .await;
    let after = pids();
    assert_eq!(after.len(), 2, "one start for the first restart: {after:?}");
}
