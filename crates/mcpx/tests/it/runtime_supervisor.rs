//! Acceptance tests of the supervisor mcpx runs for each upstream: a stdio child that
//! exits is started again by mcpx itself (before any call, after `backoffMs`), a call
//! in flight when its child dies fails at once naming the upstream, quick failures in
//! a row end in a crash loop (no further start until `crashLoopRetryMs`, which calls
//! and `mcpx probe` report), and no upstream process outlives `mcpx serve` (SIGTERM,
//! stdin EOF) or `mcpx tools`/`mcpx call`.
//!
//! Processes are watched through `/proc`: an upstream's child is the child of the
//! `mcpx serve` process whose environment says `MCPX_TEST_UPSTREAM=<name>`, in a process
//! group of its own.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tokio::process::Command;

use crate::common;
use crate::runtime;
use common::R1125;
use runtime::*;

/// Lines in `file` (0 when it does not exist).
fn lines(file: &Path) -> usize {
    std::fs::read_to_string(file)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// kill -9 of an idle stdio upstream: mcpx starts a new child (another pid, its own
/// child, in a group of its own) within 5 s with no call made, and a call then
/// succeeds. (The default restart settings: `backoffMs` 1000.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_idle_child_is_started_again_before_any_call() {
    let config = json!({"mcpServers": {"victim": example_entry("victim", &[])}});
    let mut gw = Gateway::start("restart-idle", &config, R1125, &[]).await;
    gw.initialize().await;
    gw.call_until_ok("test_simple_text", json!({}), Duration::from_secs(20))
        .await;
    let first = gw
        .wait_upstream("victim", None, Duration::from_secs(10))
        .await;
    let calls = |gw: &Gateway| {
        gw.wire()
            .iter()
            .filter(|f| f["method"] == "tools/call")
            .count()
    };
    let calls_before = calls(&gw);

    signal(first, "KILL");
    let second = gw
        .wait_upstream("victim", Some(first), Duration::from_secs(5))
        .await;
    assert!(!alive(first), "the killed child {first} still runs");
    let st = stat(second).unwrap();
    assert_eq!(st.ppid, gw.pid, "the new child is mcpx's own");
    assert_eq!(
        st.pgrp, second,
        "the new child leads a process group of its own"
    );
    assert_eq!(calls(&gw), calls_before, "no call was made meanwhile");

    let r = gw
        .call_until_ok("test_simple_text", json!({}), Duration::from_secs(10))
        .await;
    assert_eq!(first_text(&r), SIMPLE_TEXT, "{r}");
}

/// A call in flight when its upstream's child is killed gets an error naming the
/// upstream within 1 s of the kill (not when the call would have ended, 10 s later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_fails_when_its_child_dies() {
    let config = json!({"mcpServers": {"slowpoke": example_entry("slowpoke", &[])}});
    let mut gw = Gateway::start("restart-inflight", &config, R1125, &[]).await;
    gw.initialize().await;
    gw.call_until_ok("test_simple_text", json!({}), Duration::from_secs(20))
        .await;
    let child = gw
        .wait_upstream("slowpoke", None, Duration::from_secs(10))
        .await;
    // Ten seconds of progress steps.
    let id = gw
        .send_request(
            "tools/call",
            json!({"name": "test_tool_with_progress", "arguments": {"steps": 100, "delayMs": 100}}),
        )
        .await;
    let dir = gw.dir.clone();
    wait_for(
        Duration::from_secs(10),
        "the slow call reached the upstream",
        || {
            wire(&dir)
                .iter()
                .any(|f| {
                    f["method"] == "tools/call" && f["params"]["name"] == "test_tool_with_progress"
                })
                .then_some(())
        },
        || format!("{:?}", wire(&dir)),
    )
    .await;

    signal(child, "KILL");
    let v = gw
        .response(id, "tools/call", Duration::from_secs(1))
        .await
        .unwrap_or_else(|| {
            panic!(
                "no answer to the call within 1 s of its upstream's kill; stderr:\n{}",
                gw.stderr()
            )
        });
    let message = v["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error, got {v}"));
    assert!(
        message.contains("slowpoke"),
        "the error names no upstream: {v}"
    );
}

/// A command that exits at once (counting its starts in a file), with a quick
/// backoff and `maxRestarts` 3: a few starts (more than one, at most maxRestarts + 1),
/// then none while the test goes on (a crash loop waits `crashLoopRetryMs`, 5 min by
/// default); a call to a tool in its namespace gets -32603 with `data.state`
/// `crash_loop`, its message saying how the command exited; `mcpx probe` on the same
/// configuration says `crash loop` and how the command exited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_failures_in_a_row_end_in_a_crash_loop() {
    let files = crate::scratch_dir("rt-crashes");
    let restart = json!({"backoffMs": 50, "maxBackoffMs": 200, "maxRestarts": 3});
    let config = |starts: &Path| {
        json!({"mcpServers": {
            "crashy": with_mcpx(
                sh_entry("crashy", &format!("echo x >> '{}'; exit 1", starts.display())),
                json!({"restart": restart}),
            ),
            "ok": example_entry("ok", &[]),
        }})
    };
    let starts = files.join("serve-starts");
    let mut gw = Gateway::start("crash-loop", &config(&starts), R1125, &[]).await;
    gw.initialize().await;
    wait_for(
        Duration::from_secs(3),
        "crashy was started again",
        || (lines(&starts) > 1).then_some(()),
        || format!("{} start(s); stderr:\n{}", lines(&starts), gw.stderr()),
    )
    .await;
    // Until its crash loop, a call may find it starting or in backoff.
    let every = Duration::from_millis(100);
    let looping = crate::wait::poll_every(Duration::from_secs(10), every, async || {
        let call = json!({"name": "crashy__test_simple_text", "arguments": {}});
        let v = gw.request("tools/call", call).await;
        (v["error"]["data"]["state"] == "crash_loop").then_some(())
    })
    .await;
    assert!(
        looping.is_some(),
        "crashy was not in a crash loop within 10 s; stderr:\n{}",
        gw.stderr()
    );
    let n = lines(&starts);
    assert!(
        (2..=4).contains(&n),
        "{n} starts before the crash loop (expected 2..=maxRestarts+1); stderr:\n{}",
        gw.stderr()
    );
    let id = gw
        .send_request(
            "tools/call",
            json!({"name": "crashy__test_simple_text", "arguments": {}}),
        )
        .await;
    let v = gw
        .response(id, "tools/call", Duration::from_secs(5))
        .await
        .expect("no answer within 5 s to a call of the crash-looping upstream");
    assert_eq!(not_ready_state(&v, "crashy"), "crash_loop", "{v}");
    // The cause: how the command ended.
    assert!(
        v["error"]["message"].as_str().unwrap().contains("status 1"),
        "{v}"
    );
    // The other upstream serves meanwhile.
    gw.call_until_ok("ok__test_simple_text", json!({}), Duration::from_secs(10))
        .await;
    // Not started again meanwhile: the crash loop waits (its timing on the paused
    // clock: mcpx-gateway's restarts::quick_failures_in_a_row_end_in_a_crash_loop).
    assert_eq!(
        lines(&starts),
        n,
        "crashy was started again in its crash loop"
    );
    drop(gw);

    let cfg = files.join("probe.json");
    std::fs::write(&cfg, config(&files.join("probe-starts")).to_string()).unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        Command::new(MCPX)
            .args(["probe", "--config"])
            .arg(&cfg)
            .env("XDG_CACHE_HOME", files.join("cache"))
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("mcpx probe did not finish within 30 s")
    .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .find(|l| l.contains("crashy"))
        .unwrap_or_else(|| panic!("mcpx probe said nothing of crashy:\n{text}"));
    assert!(line.contains("crash loop"), "{text}");
    assert!(line.contains("status 1"), "{text}");
}

/// A configuration of two upstreams whose processes can be counted: `a` runs the
/// example server behind a shell that leaves a `sleep` behind in its process group (a
/// grandchild, as `npx` and wrappers do), `b` the example server itself.
fn two_upstreams() -> serde_json::Value {
    json!({"mcpServers": {
        "a": sh_entry("a", &format!("sleep 600 </dev/null >/dev/null 2>&1 & exec '{MCPX}' example-server")),
        "b": example_entry("b", &[]),
    }})
}

/// Waits until both upstreams of [`two_upstreams`] run (a's grandchild too); returns
/// their process groups.
async fn upstream_groups(parent: u32) -> Vec<u32> {
    wait_for(
        Duration::from_secs(20),
        "both upstreams running",
        || {
            let a = tagged_children(parent, "a");
            let b = tagged_children(parent, "b");
            let (&[a], &[b]) = (&a[..], &b[..]) else {
                return None;
            };
            let (ga, gb) = (stat(a)?.pgrp, stat(b)?.pgrp);
            (ga == a && gb == b && group(ga).len() >= 2).then_some(vec![ga, gb])
        },
        || format!("children: {:?}", children(parent)),
    )
    .await
}

/// SIGTERM to `mcpx serve` on stdio: within 5 s no process of the upstreams' groups
/// is left (a's grandchild included), and mcpx has exited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_leaves_no_upstream_process_on_stdio() {
    let mut gw = Gateway::start("sigterm-stdio", &two_upstreams(), R1125, &[]).await;
    gw.initialize().await;
    let groups = upstream_groups(gw.pid).await;
    let _cleanup = KillGroups(groups.clone());
    signal(gw.pid, "TERM");
    groups_end(&groups, Duration::from_secs(5), "SIGTERM (stdio)").await;
    assert!(
        gw.wait_exit(Duration::from_secs(5)).await.is_some(),
        "mcpx serve did not exit on SIGTERM"
    );
}

/// The host closing stdin ends `mcpx serve` on stdio the same way: no upstream
/// process left within 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_eof_leaves_no_upstream_process() {
    let mut gw = Gateway::start("eof-stdio", &two_upstreams(), R1125, &[]).await;
    gw.initialize().await;
    let groups = upstream_groups(gw.pid).await;
    let _cleanup = KillGroups(groups.clone());
    gw.close_stdin();
    groups_end(&groups, Duration::from_secs(5), "stdin EOF").await;
    assert!(
        gw.wait_exit(Duration::from_secs(5)).await.is_some(),
        "mcpx serve did not exit at stdin EOF"
    );
}

/// SIGTERM to `mcpx serve --http`: no upstream process left within 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_leaves_no_upstream_process_over_http() {
    let mut gw = HttpGateway::start("sigterm-http", &two_upstreams(), &[]).await;
    let groups = upstream_groups(gw.pid).await;
    let _cleanup = KillGroups(groups.clone());
    gw.children();
    signal(gw.pid, "TERM");
    groups_end(&groups, Duration::from_secs(5), "SIGTERM (--http)").await;
    assert!(
        gw.wait_exit(Duration::from_secs(5)).await.is_some(),
        "mcpx serve --http did not exit on SIGTERM"
    );
}

/// `mcpx tools` and `mcpx call` with an upstream that never answers (its shell writes
/// its pid, the group's id, to a file and leaves a `sleep` behind): once they give up
/// and exit, no process of that upstream's group is left (within 5 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_and_call_leave_no_upstream_process_when_they_give_up() {
    let files = crate::scratch_dir("rt-give-up");
    for (command, extra) in [("tools", vec![]), ("call", vec!["ok__test_simple_text"])] {
        let pidfile = files.join(format!("{command}.pid"));
        let script = format!(
            "echo $$ > '{}'; sleep 600 </dev/null >/dev/null 2>&1 & exec sleep 600",
            pidfile.display()
        );
        let config = json!({"mcpServers": {
            "hang": with_mcpx(sh_entry("hang", &script), json!({"connectTimeoutMs": 1000})),
            "ok": example_entry("ok", &[]),
        }});
        let cfg = files.join(format!("{command}.json"));
        std::fs::write(&cfg, config.to_string()).unwrap();
        let run = Command::new(MCPX)
            .arg(command)
            .args(&extra)
            .arg("--config")
            .arg(&cfg)
            .env("XDG_CACHE_HOME", files.join("cache"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .status();
        let status = tokio::time::timeout(Duration::from_secs(60), run).await;
        let pgid: u32 = std::fs::read_to_string(&pidfile)
            .unwrap_or_else(|e| panic!("mcpx {command} never started the upstream: {e}"))
            .trim()
            .parse()
            .unwrap();
        let _cleanup = KillGroups(vec![pgid]);
        assert!(status.is_ok(), "mcpx {command} did not give up within 60 s");
        groups_end(
            &[pgid],
            Duration::from_secs(5),
            &format!("mcpx {command} gave up"),
        )
        .await;
    }
}
