//! `mcpx daemon`'s life: its files and their permissions, a stale socket replaced, one
//! daemon per configuration, SIGTERM, `--idle-exit`, resumable events, hosts sharing
//! its upstreams (over `/mcp` and `mcpx serve --attach`), and the command line on top.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use mcpx_client::{CallOptions, EraCache, ProtocolPreference, Target, TargetTransport};
use mcpx_protocol::Params;
use serde_json::{Value, json};

use crate::daemon_support;
use daemon_support::{Daemon, WITHIN, alive, run, two_examples};

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// The daemon's record in its runtime directory.
fn record(run_dir: &Path) -> Option<(PathBuf, Value)> {
    let dir = run_dir.join("mcpx");
    let entry = std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "json"))?;
    let text = std::fs::read_to_string(entry.path()).ok()?;
    Some((entry.path(), serde_json::from_str(&text).ok()?))
}

#[tokio::test]
async fn its_files_are_private_and_its_record_finds_it() {
    let mut d = Daemon::start("files", &two_examples(), &[]).await;
    let dir = d.run.join("mcpx");
    assert_eq!(mode(&dir), 0o700, "the directory");
    assert_eq!(mode(&d.socket), 0o600, "the socket");
    assert_eq!(d.socket.parent(), Some(dir.as_path()));
    let (path, rec) = record(&d.run).expect("a record");
    assert_eq!(mode(&path), 0o600, "the record");
    assert_eq!(rec["pid"].as_u64(), Some(u64::from(d.child.id().unwrap())));
    assert_eq!(rec["socket"].as_str(), d.socket.to_str());
    assert_eq!(rec["version"], env!("CARGO_PKG_VERSION"));
    let canonical = std::fs::canonicalize(&d.config).unwrap();
    assert_eq!(rec["config"].as_str(), canonical.to_str());
    assert_eq!(
        std::fs::metadata(&d.socket).unwrap().uid(),
        std::fs::metadata("/proc/self").unwrap().uid()
    );
    // A second daemon for the same configuration refuses to start.
    let (ok, _, err) = run(&d.dir, &["daemon", "--config", d.config.to_str().unwrap()]).await;
    assert!(!ok);
    assert!(err.contains("already running"), "{err}");
    // The first one is still there.
    assert_eq!(d.get("/v1/health").await.0, 200);
    // SIGTERM: exit 0, files removed, no upstream process left.
    let pids: Vec<u64> = d.ready().await["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["pid"].as_u64().unwrap())
        .collect();
    assert!(d.terminate().await, "exit status 0");
    assert!(!d.socket.exists(), "socket removed");
    assert!(record(&d.run).is_none(), "record removed");
    for pid in pids {
        assert!(!alive(pid), "upstream {pid} outlived the daemon");
    }
}

#[tokio::test]
async fn a_stale_socket_is_replaced() {
    let dir = crate::scratch_dir("daemon-stale");
    // A daemon killed outright leaves its socket and record behind.
    let mut first = Daemon::start_in(dir.clone(), &two_examples(), &[]).await;
    // Its upstreams started first: a child between fork and exec holds a copy of the
    // listening socket, which would still accept for a moment after the kill.
    first.ready().await;
    let socket = first.socket.clone();
    first.child.kill().await.unwrap();
    let _ = first.child.wait().await;
    assert!(socket.exists(), "SIGKILL leaves the socket");
    assert!(record(&first.run).is_some(), "and the record");
    // The command line does not take it for a daemon: it runs in-process.
    let (ok, out, err) = run(&dir, &["tools", "--config", first.config.to_str().unwrap()]).await;
    assert!(ok, "{err}");
    assert!(out.contains("everything__test_simple_text"), "{out}");
    // A new daemon replaces the stale socket and serves.
    let second = Daemon::start_in(dir, &two_examples(), &[]).await;
    assert_eq!(second.socket, socket);
    assert_eq!(second.get("/v1/health").await.0, 200);
    let (_, rec) = record(&second.run).unwrap();
    assert_eq!(
        rec["pid"].as_u64(),
        Some(u64::from(second.child.id().unwrap()))
    );
    second.post("/v1/shutdown", &json!({})).await;
}

#[tokio::test]
async fn it_stops_when_idle_for_idle_exit() {
    let mut d = Daemon::start("idle", &two_examples(), &["--idle-exit", "1s"]).await;
    // Asked now and then, it stays.
    for _ in 0..4 {
        assert_eq!(d.get("/v1/health").await.0, 200);
        // real sleep: the daemon's idle-exit runs on its own clock; the gaps are the point.
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    // Left alone, it stops by itself.
    let status = tokio::time::timeout(WITHIN, d.child.wait())
        .await
        .expect("the idle daemon stops")
        .unwrap();
    assert!(status.success());
    assert!(!d.socket.exists());
}

/// Reads SSE events from `GET /v1/events{query}` over the socket until `until` holds
/// for the text so far.
async fn events(d: &Daemon, query: &str, until: impl Fn(&str) -> bool) -> String {
    events_from(d, query, None, until).await
}

/// [`events`], with a `Last-Event-ID`.
async fn events_from(
    d: &Daemon,
    query: &str,
    last_event_id: Option<u64>,
    until: impl Fn(&str) -> bool,
) -> String {
    use http_body_util::BodyExt as _;
    let stream = tokio::net::UnixStream::connect(&d.socket).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::get(format!("/v1/events{query}")).header("host", "localhost");
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id.to_string());
    }
    let req = req
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let mut body = sender.send_request(req).await.unwrap().into_body();
    let mut seen = String::new();
    let done = tokio::time::timeout(WITHIN, async {
        while let Some(Ok(f)) = body.frame().await {
            if let Some(d) = f.data_ref() {
                seen.push_str(&String::from_utf8_lossy(d));
            }
            if until(&seen) {
                return;
            }
        }
    })
    .await;
    assert!(done.is_ok(), "events: not seen in time:\n{seen}");
    seen
}

fn ids(sse: &str) -> Vec<u64> {
    sse.lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(|n| n.parse().unwrap())
        .collect()
}

#[tokio::test]
async fn events_tell_of_states_and_calls_and_resume_after_since() {
    let d = Daemon::start("events", &two_examples(), &[]).await;
    d.ready().await;
    // From the start: each upstream starting, then ready.
    let all = events(&d, "?since=0", |s| {
        s.matches("\"state\":\"ready\"").count() >= 2
    })
    .await;
    let first = ids(&all);
    assert_eq!(first[0], 1);
    assert!(first.windows(2).all(|w| w[1] == w[0] + 1), "{first:?}");
    assert!(all.contains("event: upstream\n"), "{all}");
    // A call and a restart, live.
    let last = *first.last().unwrap();
    d.post("/v1/call", &json!({"tool": "everything__test_simple_text"}))
        .await;
    d.post("/v1/servers/legacy/restart", &json!({})).await;
    let later = events(&d, &format!("?since={last}"), |s| {
        s.contains("\"phase\":\"end\"") && s.contains("event: restart")
    })
    .await;
    let resumed = ids(&later);
    assert_eq!(resumed[0], last + 1, "resumed right after {last}: {later}");
    assert!(later.contains("\"outcome\":\"ok\""), "{later}");
    assert!(
        later.contains("\"tool\":\"everything__test_simple_text\""),
        "{later}"
    );
    // Last-Event-ID does the same as since.
    let same = events_from(&d, "", Some(last), |s| s.contains("event: restart")).await;
    assert_eq!(ids(&same)[0], last + 1, "{same}");
    // Without either, only what comes next.
    let again = events(&d, "", |s| s.contains("mcpx events")).await;
    assert!(ids(&again).is_empty(), "{again}");
    d.post("/v1/shutdown", &json!({})).await;
}

async fn host(
    name: &str,
    transport: TargetTransport,
    pref: ProtocolPreference,
) -> mcpx_client::Connection {
    let mut target = Target::new(name, transport);
    target.preference = pref;
    tokio::time::timeout(WITHIN, mcpx_client::connect(&target, &EraCache::disabled()))
        .await
        .expect("connects in time")
        .expect("connects")
}

async fn ask(conn: &mcpx_client::Connection, method: &str, params: Value) -> Value {
    let opts = CallOptions {
        timeout: WITHIN,
        max_time: WITHIN,
        ..CallOptions::default()
    };
    let frame = conn
        .call(method, Some(&Params::of_value(&params)), opts)
        .await
        .unwrap();
    assert!(frame.error().is_none(), "{method}: {}", frame.as_str());
    serde_json::from_str(frame.result().unwrap()).unwrap()
}

fn tool_names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn hosts_on_mcp_and_attached_share_one_upstream_process() {
    let d = Daemon::start(
        "share",
        &two_examples(),
        &["--http", "127.0.0.1:0", "--allow-any-local-user"],
    )
    .await;
    let before = d.ready().await;
    let url = d.url("/mcp");
    let http = |url: &str| TargetTransport::Http {
        url: url.to_owned(),
        headers: vec![],
    };
    let modern = host("modern", http(&url), ProtocolPreference::Modern).await;
    let legacy = host("legacy", http(&url), ProtocolPreference::Legacy).await;
    let attached = host(
        "attached",
        TargetTransport::Stdio {
            command: env!("CARGO_BIN_EXE_mcpx").to_owned(),
            args: vec![
                "serve".into(),
                "--attach".into(),
                "--config".into(),
                d.config.to_str().unwrap().into(),
            ],
            env: vec![("XDG_RUNTIME_DIR".into(), d.run.to_str().unwrap().into())],
            cwd: None,
        },
        ProtocolPreference::Legacy,
    )
    .await;
    let dynamic = "everything__test_dynamic_tool".to_owned();
    for conn in [&modern, &legacy, &attached] {
        assert!(!tool_names(&ask(conn, "tools/list", json!({})).await).contains(&dynamic));
    }
    // One host changes the upstream's state; the others see the change: it is one
    // process.
    let r = ask(
        &modern,
        "tools/call",
        json!({"name": "everything__test_trigger_tool_change", "arguments": {}}),
    )
    .await;
    assert_ne!(r["isError"], true, "{r}");
    // Every connection sees it within one bound.
    let every = Duration::from_millis(50);
    let seen = crate::wait::poll_every(WITHIN, every, async || {
        for conn in [&legacy, &attached, &modern] {
            if !tool_names(&ask(conn, "tools/list", json!({})).await).contains(&dynamic) {
                return None;
            }
        }
        Some(())
    })
    .await;
    assert!(seen.is_some(), "the change is not seen");
    let r = ask(
        &attached,
        "tools/call",
        json!({"name": "legacy__test_simple_text", "arguments": {}}),
    )
    .await;
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("simple text")
    );
    // Nothing was started again for the hosts.
    let after = d.get("/v1/status").await.1;
    for i in 0..2 {
        assert_eq!(after["upstreams"][i]["pid"], before["upstreams"][i]["pid"]);
        assert_eq!(after["upstreams"][i]["restarts"], 0);
    }
    attached.close().await;
    modern.close().await;
    legacy.close().await;
    d.post("/v1/shutdown", &json!({})).await;
}

#[tokio::test]
async fn the_command_line_asks_the_running_daemon() {
    let d = Daemon::start("cli", &two_examples(), &[]).await;
    let before = d.ready().await;
    let cfg = d.config.to_str().unwrap().to_owned();
    let c = ["--config", cfg.as_str()];
    let with = |cmd: &'static str, more: &[&'static str]| {
        let mut v = vec![cmd];
        v.extend_from_slice(more);
        v
    };
    let (ok, out, err) = run(&d.dir, &[&with("tools", &[])[..], &c[..]].concat()).await;
    assert!(ok, "{err}");
    assert!(out.contains("legacy__test_simple_text"), "{out}");
    let (ok, out, err) = run(
        &d.dir,
        &[
            &with("call", &["everything__test_structured_content"])[..],
            &c[..],
        ]
        .concat(),
    )
    .await;
    assert!(ok, "{err}");
    // The payload once: the text block, not the structured content again.
    assert_eq!(out.matches("temperature").count(), 1, "{out}");
    let (ok, out, _) = run(
        &d.dir,
        &[
            &with("call", &["everything__test_structured_content", "--json"])[..],
            &c[..],
        ]
        .concat(),
    )
    .await;
    assert!(ok);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["structuredContent"].is_object(), "{v}");
    let (ok, _, err) = run(
        &d.dir,
        &[&with("call", &["no_such_tool"])[..], &c[..]].concat(),
    )
    .await;
    assert!(!ok);
    assert!(
        err.contains("error -32602: unknown tool: no_such_tool"),
        "{err}"
    );
    let (ok, out, _) = run(
        &d.dir,
        &[&with("read", &["test://static-text"])[..], &c[..]].concat(),
    )
    .await;
    assert!(ok, "{out}");
    let (ok, out, _) = run(
        &d.dir,
        &[
            &with("prompt", &["everything__test_simple_prompt"])[..],
            &c[..],
        ]
        .concat(),
    )
    .await;
    assert!(ok && out.contains("user: "), "{out}");
    // They went through the daemon: its events have the call, and no upstream was
    // started again.
    let seen = events(&d, "?since=0", |s| {
        s.lines().any(|l| {
            l.contains("\"tool\":\"everything__test_structured_content\"")
                && l.contains("\"phase\":\"end\"")
        }) && s.contains("\"tool\":\"no_such_tool\"")
    })
    .await;
    assert!(seen.contains("\"tool\":\"no_such_tool\""), "{seen}");
    let after = d.get("/v1/status").await.1;
    assert_eq!(after["upstreams"][0]["pid"], before["upstreams"][0]["pid"]);

    // probe: the upstreams as the daemon holds them.
    let (ok, out, err) = run(&d.dir, &[&with("probe", &[])[..], &c[..]].concat()).await;
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("everything (stdio:"), "{out}");
    assert!(
        lines[0].contains(": modern 2026-07-28, mcpx-example-server"),
        "{out}"
    );
    assert!(
        lines[0].contains("capabilities: ") && lines[0].ends_with(" tools"),
        "{out}"
    );
    assert!(lines[1].contains(": legacy 2025-03-26, "), "{out}");

    let (ok, out, err) = run(&d.dir, &[&with("status", &[])[..], &c[..]].concat()).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("daemon: pid "), "{out}");
    assert!(
        out.contains("everything  ready, modern 2026-07-28"),
        "{out}"
    );
    assert!(
        out.contains("legacy      ready, legacy 2025-03-26"),
        "{out}"
    );
    let (ok, out, _) = run(&d.dir, &[&with("status", &["--json"])[..], &c[..]].concat()).await;
    assert!(ok);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["upstreams"].as_array().unwrap().len(), 2);
    let (ok, out, _) = run(
        &d.dir,
        &[&with("restart", &["legacy"])[..], &c[..]].concat(),
    )
    .await;
    assert!(ok && out.contains("legacy: restarting"), "{out}");
    d.wait_status("restarted", |v| v["upstreams"][1]["restarts"] == 1)
        .await;
    let (ok, _, err) = run(
        &d.dir,
        &[&with("restart", &["nobody"])[..], &c[..]].concat(),
    )
    .await;
    assert!(!ok && err.contains("no upstream named"), "{err}");
    let (ok, out, err) = run(&d.dir, &[&with("reload", &[])[..], &c[..]].concat()).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("reloaded: "), "{out}");
    let (ok, out, err) = run(&d.dir, &[&with("stop", &[])[..], &c[..]].concat()).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("stopped (pid "), "{out}");
    assert!(!d.socket.exists());
    let (ok, _, err) = run(&d.dir, &[&with("status", &[])[..], &c[..]].concat()).await;
    assert!(
        !ok && err.contains("no daemon serves this configuration"),
        "{err}"
    );
}

#[tokio::test]
async fn autostart_starts_a_daemon_that_later_commands_share() {
    let dir = crate::scratch_dir("daemon-autostart");
    let cfg = dir.join("mcpx.json");
    std::fs::write(&cfg, two_examples().to_string()).unwrap();
    let cfg = cfg.to_str().unwrap();
    let (ok, out, err) = run(&dir, &["tools", "--config", cfg, "--autostart"]).await;
    assert!(ok, "{err}");
    assert!(out.contains("everything__test_simple_text"), "{out}");
    let (_, rec) = record(&dir.join("run")).expect("the started daemon's record");
    let pid = rec["pid"].as_u64().unwrap();
    assert!(alive(pid));
    // The next command, without --autostart, finds it.
    let (ok, out, _) = run(&dir, &["status", "--config", cfg, "--json"]).await;
    assert!(ok);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["daemon"]["pid"].as_u64(), Some(pid));
    let (ok, _, err) = run(&dir, &["stop", "--config", cfg]).await;
    assert!(ok, "{err}");
    let gone = crate::wait::until(WITHIN, async || !alive(pid)).await;
    assert!(gone, "the daemon outlived stop");
}

#[tokio::test]
async fn it_reloads_when_its_configuration_file_changes() {
    let d = Daemon::start("watch", &two_examples(), &[]).await;
    let before = d.ready().await;
    let kept = before["upstreams"][0]["pid"].clone();
    let mut config = two_examples();
    config["mcpServers"]
        .as_object_mut()
        .unwrap()
        .remove("legacy");
    std::fs::write(&d.config, config.to_string()).unwrap();
    let after = d
        .wait_status("legacy removed by the watcher", |v| {
            v["upstreams"].as_array().unwrap().len() == 1
        })
        .await;
    // The unchanged upstream keeps its process.
    assert_eq!(after["upstreams"][0]["pid"], kept);
    d.post("/v1/shutdown", &json!({})).await;
}

#[tokio::test]
async fn tcp_is_loopback_only_unless_allow_host_and_a_token_are_given() {
    let dir = crate::scratch_dir("daemon-bind");
    let cfg = dir.join("mcpx.json");
    std::fs::write(&cfg, two_examples().to_string()).unwrap();
    let cfg = cfg.to_str().unwrap();
    let (ok, _, err) = run(&dir, &["daemon", "--config", cfg, "--http", "0.0.0.0:0"]).await;
    assert!(!ok);
    assert!(err.contains("not a loopback address"), "{err}");
    let (ok, _, err) = run(
        &dir,
        &[
            "daemon",
            "--config",
            cfg,
            "--http",
            "0.0.0.0:0",
            "--allow-host",
            "box.lan",
        ],
    )
    .await;
    assert!(!ok, "a host allowed but no token");
    assert!(err.contains("needs --allow-host and a token"), "{err}");
}

#[tokio::test]
async fn another_users_process_is_refused_on_the_socket() {
    // Needs root (setpriv changes user), as the project's machines and CI run.
    // The socket's permissions keep other users out; to reach the uid check behind
    // them, this test opens a socket of its own to everyone.
    let dir = crate::scratch_dir("daemon-peer-uid");
    let open = dir.join("open");
    std::fs::create_dir_all(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = open.join("d.sock");
    let d = Daemon::start_in(
        dir,
        &two_examples(),
        &["--socket", socket.to_str().unwrap()],
    )
    .await;
    assert_eq!(d.socket, socket);
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let ask = |uid: &str| {
        // Prints the answer's status line; nothing when the daemon closed on it.
        let script = format!(
            "import socket\n\
             s = socket.socket(socket.AF_UNIX)\n\
             s.connect({:?})\n\
             s.settimeout(10)\n\
             d = b''\n\
             try:\n\
             \x20   s.sendall(b'GET /v1/health HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n')\n\
             \x20   while c := s.recv(4096):\n\
             \x20       d += c\n\
             except (BrokenPipeError, ConnectionResetError):\n\
             \x20   pass\n\
             print(d[:12].decode())\n",
            socket.to_str().unwrap()
        );
        let mut c = std::process::Command::new("setpriv");
        // The system's Python: a user's shims may be closed to `nobody`.
        c.args([
            "--reuid",
            uid,
            "--regid",
            uid,
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            &script,
        ]);
        c.output().unwrap()
    };
    let me = std::fs::metadata("/proc/self").unwrap().uid().to_string();
    let own = ask(&me);
    assert_eq!(
        String::from_utf8_lossy(&own.stdout).trim(),
        "HTTP/1.1 200",
        "{own:?}"
    );
    // nobody (65534) connects, and is closed on without an answer.
    let other = ask("65534");
    assert!(other.status.success(), "{other:?}");
    assert_eq!(
        String::from_utf8_lossy(&other.stdout).trim(),
        "",
        "{other:?}"
    );
    // And says so in its log.
    let logged = crate::wait::until(WITHIN, async || {
        d.stderr
            .lock()
            .contains("refused a connection from uid 65534")
    })
    .await;
    assert!(logged, "{}", d.stderr.lock());
    d.post("/v1/shutdown", &json!({})).await;
}

#[tokio::test]
async fn a_call_on_a_terminal_streams_its_progress_and_prints_the_result() {
    let d = Daemon::start("terminal", &two_examples(), &[]).await;
    d.ready().await;
    // `script` gives the command a terminal (a pty) for stdin, stdout and stderr.
    let cmd = format!(
        "{} call legacy__test_tool_with_progress --args '{{\"steps\": 5, \"delayMs\": 100}}' --config {}",
        env!("CARGO_BIN_EXE_mcpx"),
        d.config.display()
    );
    let mut script = tokio::process::Command::new("script");
    script
        .args(["-qec", &cmd, "/dev/null"])
        .env("XDG_RUNTIME_DIR", &d.run)
        .env("TERM", "xterm")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let out = tokio::time::timeout(WITHIN, script.output())
        .await
        .expect("in time")
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("Progress test completed after 5 steps."),
        "{text}"
    );
    // The bar was drawn: position/length and the progress message.
    assert!(text.contains("5/5 step 5 of 5"), "{text}");
    // It went through the daemon: the call is among its events.
    let seen = events(&d, "?since=0", |s| {
        s.contains("\"tool\":\"legacy__test_tool_with_progress\"")
            && s.contains("\"outcome\":\"ok\"")
    })
    .await;
    assert!(seen.contains("event: call"));
    d.post("/v1/shutdown", &json!({})).await;
}

/// Runs `mcpx ARGS` on a terminal (`script` gives it a pty) with `input` typed in; its
/// output, the terminal's.
async fn on_terminal(d: &Daemon, args: &str, input: &str) -> (bool, String) {
    use tokio::io::AsyncWriteExt as _;
    let cmd = format!("{} {args}", env!("CARGO_BIN_EXE_mcpx"));
    let mut script = tokio::process::Command::new("script");
    script
        .args(["-qec", &cmd, "/dev/null"])
        .env("XDG_RUNTIME_DIR", &d.run)
        .env("XDG_CACHE_HOME", d.dir.join("cache"))
        .env("TERM", "xterm")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = script.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    let out = tokio::time::timeout(WITHIN, child.wait_with_output())
        .await
        .expect("in time")
        .unwrap();
    drop(stdin);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[tokio::test]
async fn a_call_on_a_terminal_answers_the_servers_questions() {
    let d = Daemon::start("elicit", &two_examples(), &[]).await;
    d.ready().await;
    let args = format!(
        "call everything__test_input_required_result_elicitation --config {}",
        d.config.display()
    );
    // Through the daemon: the form's field asked, the answer sent back.
    let (ok, out) = on_terminal(&d, &args, "Ada\n").await;
    assert!(ok, "{out}");
    assert!(out.contains("What is your name?"), "{out}");
    assert!(out.contains("Hello, Ada!"), "{out}");
    // Ctrl-D at the question declines it.
    let (_, out) = on_terminal(&d, &args, "\x04").await;
    assert!(!out.contains("Hello,"), "{out}");
    // In-process, without the daemon: the same.
    d.post("/v1/shutdown", &json!({})).await;
    assert!(crate::wait::until(WITHIN, async || !d.socket.exists()).await);
    let (ok, out) = on_terminal(&d, &args, "Grace\n").await;
    assert!(ok, "{out}");
    assert!(out.contains("Hello, Grace!"), "{out}");
}

#[tokio::test]
async fn serve_attach_to_a_named_socket_starts_no_daemon() {
    let d = Daemon::start("attach-socket", &two_examples(), &[]).await;
    d.ready().await;
    // Named, it reaches that daemon, whatever the environment says.
    let conn = host(
        "attached",
        TargetTransport::Stdio {
            command: env!("CARGO_BIN_EXE_mcpx").to_owned(),
            args: vec![
                "serve".into(),
                "--attach".into(),
                "--socket".into(),
                d.socket.to_str().unwrap().into(),
            ],
            env: vec![("XDG_RUNTIME_DIR".into(), "/nonexistent".into())],
            cwd: None,
        },
        ProtocolPreference::Modern,
    )
    .await;
    let r = ask(
        &conn,
        "tools/call",
        json!({"name": "everything__test_simple_text", "arguments": {}}),
    )
    .await;
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("simple text")
    );
    conn.close().await;
    // A socket nobody answers on: an error, and no daemon started.
    let gone = d.dir.join("nobody.sock");
    let (ok, _, err) = run(
        &d.dir,
        &["serve", "--attach", "--socket", gone.to_str().unwrap()],
    )
    .await;
    assert!(!ok);
    assert!(err.contains("no daemon answers"), "{err}");
    assert!(!gone.exists());
    d.post("/v1/shutdown", &json!({})).await;
}

/// The data of each `reload` event in an SSE text.
fn reloads(sse: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut kind = "";
    for line in sse.lines() {
        if let Some(k) = line.strip_prefix("event: ") {
            kind = k;
        } else if let Some(d) = line.strip_prefix("data: ")
            && kind == "reload"
        {
            out.push(serde_json::from_str(d).unwrap());
        }
    }
    out
}

/// Reads the events from the start until a `reload` event matches `check`; its data.
async fn reload_event(d: &Daemon, check: impl Fn(&Value) -> bool) -> Value {
    let seen = events(d, "?since=0", |s| reloads(s).iter().any(&check)).await;
    reloads(&seen).into_iter().find(|r| check(r)).unwrap()
}

#[tokio::test]
async fn a_broken_file_leaves_the_daemon_seen_stoppable_and_its_failed_reload_shown() {
    let d = Daemon::start("broken", &two_examples(), &[]).await;
    d.ready().await;
    let cfg = d.config.to_str().unwrap().to_owned();
    // An edit that does not parse: the watcher's reload fails, and says where.
    std::fs::write(
        &d.config,
        "{\"mcpServers\": {\n  \"a\": {\"command\": }\n}}",
    )
    .unwrap();
    let failed = reload_event(&d, |r| r["trigger"] == "file" && r["ok"] == false).await;
    let error = failed["error"].as_str().unwrap();
    assert!(error.contains(&format!("{cfg}:2:")), "{failed}");
    // The status page shows it, without a script.
    let (status, page) = d.get_text("/").await;
    assert_eq!(status, 200);
    assert!(
        page.contains("<p id=\"reload\" class=\"failed\">"),
        "{page}"
    );
    assert!(
        page.contains("last reload: failed (the file changed)"),
        "{page}"
    );
    // `status` finds the daemon by the file's path, and tells both.
    let (ok, out, err) = run(&d.dir, &["status", "--config", &cfg]).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("daemon: pid "), "{out}");
    assert!(out.contains("\neverything  ready"), "{out}");
    assert!(
        out.contains("last reload: failed (the file changed)"),
        "{out}"
    );
    assert!(
        out.contains("configuration: does not parse") && out.contains(&format!("{cfg}:2:")),
        "{out}"
    );
    let (ok, out, _) = run(&d.dir, &["status", "--config", &cfg, "--json"]).await;
    assert!(ok);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["configError"]
            .as_str()
            .unwrap()
            .contains(&format!("{cfg}:2:"))
    );
    assert_eq!(v["daemon"]["lastReload"]["ok"], false);
    // `reload` asks the daemon, which says why (and the failed reload is an event).
    let (ok, _, err) = run(&d.dir, &["reload", "--config", &cfg]).await;
    assert!(!ok);
    assert!(err.contains(&format!("{cfg}:2:")), "{err}");
    reload_event(&d, |r| r["trigger"] == "asked" && r["ok"] == false).await;
    // `stop` stops it.
    let (ok, out, err) = run(&d.dir, &["stop", "--config", &cfg]).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("stopped (pid "), "{out}");
    assert!(err.contains("does not parse"), "{err}");
    assert!(!d.socket.exists());
}

#[tokio::test]
async fn a_sighup_and_a_changed_file_each_reload_with_an_event() {
    let d = Daemon::start("reload-events", &two_examples(), &[]).await;
    d.ready().await;
    let pid = d.child.id().unwrap().to_string();
    let _ = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status();
    let hup = reload_event(&d, |r| r["trigger"] == "sighup").await;
    assert_eq!(hup["ok"], true, "{hup}");
    assert_eq!(hup["plan"], "unchanged everything, legacy", "{hup}");
    let mut config = two_examples();
    config["mcpServers"]
        .as_object_mut()
        .unwrap()
        .remove("legacy");
    std::fs::write(&d.config, config.to_string()).unwrap();
    let file = reload_event(&d, |r| r["trigger"] == "file").await;
    assert_eq!(file["ok"], true, "{file}");
    assert_eq!(
        file["plan"], "removed legacy; unchanged everything",
        "{file}"
    );
    // The last one is the daemon's, in its health and on its page.
    let (_, health) = d.get("/v1/health").await;
    assert_eq!(health["lastReload"]["trigger"], "file", "{health}");
    let (_, page) = d.get_text("/").await;
    assert!(
        page.contains("last reload: ok (the file changed)"),
        "{page}"
    );
    d.post("/v1/shutdown", &json!({})).await;
}

#[tokio::test]
async fn a_daemon_started_in_the_background_logs_to_a_file_status_names() {
    let dir = crate::scratch_dir("daemon-log");
    let cfg = dir.join("mcpx.json");
    std::fs::write(&cfg, two_examples().to_string()).unwrap();
    let cfg = cfg.to_str().unwrap();
    let (ok, _, err) = run(&dir, &["tools", "--config", cfg, "--autostart"]).await;
    assert!(ok, "{err}");
    let (ok, out, err) = run(&dir, &["status", "--config", cfg]).await;
    assert!(ok, "{err}");
    let log = out
        .lines()
        .find_map(|l| l.strip_prefix("log: "))
        .unwrap_or_else(|| panic!("status names no log: {out}"));
    let log = PathBuf::from(log);
    assert!(log.starts_with(dir.join("state").join("mcpx")), "{log:?}");
    assert_eq!(mode(&log), 0o600);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("mcpx daemon: serving"), "{text}");
    let (ok, _, err) = run(&dir, &["stop", "--config", cfg]).await;
    assert!(ok, "{err}");
}

#[tokio::test]
async fn a_multi_line_last_error_keeps_status_on_one_line_an_upstream() {
    let mut config = two_examples();
    config["mcpServers"]["bad"] = json!({"command": "sh",
        "args": ["-c", "echo first line >&2; echo second line >&2; exit 3"]});
    let d = Daemon::start("multiline", &config, &[]).await;
    d.wait_status("bad has failed once", |v| {
        v["upstreams"].as_array().unwrap().iter().any(|u| {
            u["name"] == "bad" && u["lastError"].as_str().is_some_and(|e| e.contains('\n'))
        })
    })
    .await;
    let cfg = d.config.to_str().unwrap();
    let (ok, out, err) = run(&d.dir, &["status", "--config", cfg]).await;
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(lines.len(), 3, "one line an upstream: {out}");
    for l in &lines {
        assert!(
            ["bad         ", "everything  ", "legacy      "]
                .iter()
                .any(|n| l.starts_with(n)),
            "{out}"
        );
    }
    assert!(out.contains("stderr: first line …"), "{out}");
    // The whole text stays in --json.
    let (_, json_out, _) = run(&d.dir, &["status", "--config", cfg, "--json"]).await;
    assert!(json_out.contains("first line\\nsecond line"), "{json_out}");
    d.post("/v1/shutdown", &json!({})).await;
}

#[tokio::test]
async fn the_status_page_without_a_script_shows_upstreams_and_hosts_calls_with_reasons() {
    let d = Daemon::start(
        "page",
        &two_examples(),
        &["--http", "127.0.0.1:0", "--allow-any-local-user"],
    )
    .await;
    d.ready().await;
    let modern = host(
        "modern",
        TargetTransport::Http {
            url: d.url("/mcp"),
            headers: vec![],
        },
        ProtocolPreference::Modern,
    )
    .await;
    let r = ask(
        &modern,
        "tools/call",
        json!({"name": "everything__test_simple_text", "arguments": {}}),
    )
    .await;
    assert_ne!(r["isError"], true, "{r}");
    let r = ask(
        &modern,
        "tools/call",
        json!({"name": "everything__test_error_handling", "arguments": {}}),
    )
    .await;
    assert_eq!(r["isError"], true, "{r}");
    let opts = CallOptions {
        timeout: WITHIN,
        max_time: WITHIN,
        ..CallOptions::default()
    };
    let unknown = modern
        .call(
            "tools/call",
            Some(&Params::of_value(
                &json!({"name": "everything__nope", "arguments": {}}),
            )),
            opts,
        )
        .await
        .unwrap();
    assert!(unknown.error().is_some());
    // The calls are the daemon's too: events and /v1/tasks know of hosts' calls.
    events(&d, "?since=0", |s| {
        s.matches("\"via\":\"host\"").count() >= 6
    })
    .await;
    let (status, page) = d.get_text("/").await;
    assert_eq!(status, 200);
    assert!(
        page.contains("<tr data-name=\"everything\" data-state=\"ready\">"),
        "{page}"
    );
    assert!(
        page.contains("<td>everything__test_simple_text</td><td>host</td><td class=\"ok\">ok</td>"),
        "{page}"
    );
    assert!(
        page.contains("<td class=\"tool_error\">tool_error</td>")
            && page.contains("This tool intentionally returns an error for testing."),
        "{page}"
    );
    assert!(
        page.contains("<td class=\"error\">error</td>")
            && page.contains("unknown tool: everything__nope"),
        "{page}"
    );
    // An error through /v1 has its reason too.
    d.post("/v1/call", &json!({"tool": "everything__nope"}))
        .await;
    let (_, page) = d.get_text("/").await;
    assert!(
        page.contains("<td>everything__nope</td><td>api</td><td class=\"error\">error</td>"),
        "{page}"
    );
    modern.close().await;
    d.post("/v1/shutdown", &json!({})).await;
}
