//! Acceptance tests of hot reload: `mcpx serve` watches its `--config` file (debounced
//! `reloadDebounceMs`) and reloads on SIGHUP too. Unchanged upstreams keep their child
//! (same pid), changed ones are restarted, removed ones stopped, added ones started;
//! a call in flight on an unchanged upstream finishes; hosts hear
//! `notifications/tools/list_changed` (a legacy host on its session, a 2026-07-28
//! host on a `subscriptions/listen` stream that asked for `toolsListChanged`); a file
//! that does not parse leaves the old configuration serving and is reported on stderr
//! with its path and line.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use serde_json::{Value, json};

use crate::common;
use crate::runtime;
use common::{R1125, R2026};
use runtime::*;

const LIST_CHANGED: &str = "notifications/tools/list_changed";

/// Upstreams `a`, `b` (with `b_args`), and `c` and/or `d`.
fn servers(b_args: &[&str], c: bool, d: bool) -> Value {
    let mut s = json!({
        "a": example_entry("a", &[]),
        "b": example_entry("b", b_args),
    });
    if c {
        s["c"] = example_entry("c", &[]);
    }
    if d {
        s["d"] = example_entry("d", &[]);
    }
    json!({"mcpServers": s})
}

fn has_list_changed(frames: &[Value]) -> bool {
    frames.iter().any(|f| f["method"] == LIST_CHANGED)
}

/// `mcpx serve --http` with a legacy host (a session with its GET stream open) and a
/// 2026-07-28 host (a `subscriptions/listen` for `toolsListChanged`), upstreams a, b,
/// c. The file is replaced (written aside, renamed over) with c removed, b's args
/// changed and d added, while a slow call on a is in flight: a keeps its child, b gets
/// a new one (with the new args), c's is gone, d's runs; the list shows d's tools and
/// none of c's; the call on a finishes; both hosts hear list_changed. Then a file
/// with a syntax error: the old configuration still serves (a's and d's tools
/// callable, no child restarted) and stderr names the file and the line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_file_restarts_only_what_changed() {
    let mut gw = HttpGateway::start("reload-http", &servers(&[], true, false), &[]).await;
    let url = gw.url();
    let legacy = Session::open(&url, R1125, Duration::from_secs(20)).await;
    let get = legacy.get_stream().await;
    let listen = listen(&url, "tools-listen", json!({"toolsListChanged": true})).await;

    // Every upstream up, and the hosts' streams quiet.
    let mut names = Vec::new();
    let every = Duration::from_millis(100);
    let up = crate::wait::poll_every(Duration::from_secs(20), every, async || {
        names = legacy.tools().await;
        ["a", "b", "c"]
            .iter()
            .all(|u| names.contains(&format!("{u}__test_simple_text")))
            .then_some(())
    })
    .await;
    assert!(up.is_some(), "not every upstream came up: {names:?}");
    let pid = gw.pid;
    let [a1, b1, c1] = wait_for(
        Duration::from_secs(10),
        "a child per upstream",
        || {
            let mut pids = Vec::new();
            for u in ["a", "b", "c"] {
                match tagged_children(pid, u)[..] {
                    [p] => pids.push(p),
                    _ => return None,
                }
            }
            pids.try_into().ok()
        },
        || format!("children: {:?}", children(pid)),
    )
    .await;
    gw.children();
    get.settle(Duration::from_millis(500), Duration::from_secs(5))
        .await;
    listen
        .settle(Duration::from_millis(500), Duration::from_secs(5))
        .await;
    let (get_mark, listen_mark) = (get.len(), listen.len());

    // A slow call on a (2 s), in flight during the reload.
    let caller = legacy.clone();
    let slow = tokio::spawn(async move {
        caller
            .request(
                "tools/call",
                json!({"name": "a__test_tool_with_progress",
                       "arguments": {"steps": 10, "delayMs": 200}}),
            )
            .await
    });
    let dir = gw.dir.clone();
    wait_for(
        Duration::from_secs(10),
        "the slow call reached a",
        || {
            wire(&dir)
                .iter()
                .any(|f| {
                    f["method"] == "tools/call" && f["params"]["name"] == "test_tool_with_progress"
                })
                .then_some(())
        },
        String::new,
    )
    .await;

    replace_file(
        &gw.cfg,
        &serde_json::to_string_pretty(&servers(&["--revision", "2025-11-25"], false, true))
            .unwrap(),
    );
    let (b2, d1) = wait_for(
        Duration::from_secs(10),
        "b restarted, c stopped and d started",
        || {
            let b = tagged_children(pid, "b");
            let d = tagged_children(pid, "d");
            let (&[b2], &[d1]) = (&b[..], &d[..]) else {
                return None;
            };
            (b2 != b1 && tagged_children(pid, "c").is_empty()).then_some((b2, d1))
        },
        || {
            format!(
                "children: {:?}; stderr:\n{}",
                children(pid)
                    .into_iter()
                    .map(|p| (p, env_of(p, TAG_VAR)))
                    .collect::<Vec<_>>(),
                gw.stderr()
            )
        },
    )
    .await;
    gw.children();
    assert_eq!(gw.upstream_pid("a"), Some(a1), "a's child was replaced");
    assert!(
        cmdline(b2).contains("--revision 2025-11-25"),
        "b's new child runs the old args: {}",
        cmdline(b2)
    );
    wait_for(
        Duration::from_secs(5),
        "the old children of b and c ended",
        || (!alive(b1) && !alive(c1)).then_some(()),
        String::new,
    )
    .await;

    let mut names = Vec::new();
    let every = Duration::from_millis(100);
    let swapped = crate::wait::poll_every(Duration::from_secs(10), every, async || {
        names = legacy.tools().await;
        let has_d = names.contains(&"d__test_simple_text".to_owned());
        let has_c = names.iter().any(|x| x.starts_with("c__"));
        (has_d && !has_c).then_some(())
    })
    .await;
    assert!(
        swapped.is_some(),
        "d's tools in, c's out: not in 10 s: {names:?}"
    );
    assert!(
        names.contains(&"a__test_simple_text".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"b__test_simple_text".to_owned()),
        "{names:?}"
    );

    let done = tokio::time::timeout(Duration::from_secs(20), slow)
        .await
        .expect("the call on a did not finish")
        .unwrap();
    assert!(
        done["result"]["content"].is_array() && done["result"]["isError"] != true,
        "the call on a did not survive the reload: {done}"
    );

    wait_for(
        Duration::from_secs(5),
        "list_changed on the legacy host's GET stream",
        || has_list_changed(&get.frames_after(get_mark)).then_some(()),
        || get.text(),
    )
    .await;
    wait_for(
        Duration::from_secs(5),
        "list_changed on the 2026-07-28 host's listen stream",
        || {
            listen
                .frames_after(listen_mark)
                .iter()
                .any(|f| {
                    f["method"] == LIST_CHANGED
                        && f["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
                            == "tools-listen"
                })
                .then_some(())
        },
        || listen.text(),
    )
    .await;
    validate_all(R1125, &get.frames());
    validate_all(R2026, &listen.frames());
    for name in ["b__test_simple_text", "d__test_simple_text"] {
        let v = legacy
            .request("tools/call", json!({"name": name, "arguments": {}}))
            .await;
        assert_eq!(first_text(&v["result"]), SIMPLE_TEXT, "{name}: {v}");
    }

    // A file that does not parse (line 3).
    let mark = gw.stderr().len();
    replace_file(&gw.cfg, "{\n  \"mcpServers\": {\n    \"a\": oops\n  }\n}\n");
    let path = gw.cfg.display().to_string();
    let report = wait_for(
        Duration::from_secs(5),
        "the broken file reported on stderr",
        || {
            let e = gw.stderr();
            let new = e.get(mark..).unwrap_or_default().to_owned();
            new.contains(&path).then_some(new)
        },
        || gw.stderr(),
    )
    .await;
    assert!(
        report.contains(&format!("{path}:3")) || report.contains("line 3"),
        "the report does not give the line: {report}"
    );
    for name in ["a__test_simple_text", "d__test_simple_text"] {
        let v = legacy
            .request("tools/call", json!({"name": name, "arguments": {}}))
            .await;
        assert_eq!(first_text(&v["result"]), SIMPLE_TEXT, "{name}: {v}");
    }
    assert_eq!(
        gw.upstream_pid("a"),
        Some(a1),
        "a restarted on a broken file"
    );
    assert_eq!(
        gw.upstream_pid("d"),
        Some(d1),
        "d restarted on a broken file"
    );
}

/// SIGHUP reloads at once on stdio, whatever the watcher's debounce (set to a minute
/// here, so only the signal can explain a reload within 5 s): the added upstream's
/// tools are listed, the unchanged ones keep their children, and the host gets a
/// list_changed notification line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_on_stdio() {
    let limits = json!({"limits": {"reloadDebounceMs": 60000}});
    let mut first = servers(&[], false, false);
    first["mcpx"] = limits.clone();
    let mut gw = Gateway::start("reload-sighup", &first, R1125, &[]).await;
    gw.initialize().await;
    for name in ["a__test_simple_text", "b__test_simple_text"] {
        gw.call_until_ok(name, json!({}), Duration::from_secs(20))
            .await;
    }
    let a1 = gw.wait_upstream("a", None, Duration::from_secs(10)).await;
    let b1 = gw.wait_upstream("b", None, Duration::from_secs(10)).await;
    // Notifications of the startup are not the reload's.
    gw.drain(Duration::from_millis(500)).await;

    let mut second = servers(&[], false, true);
    second["mcpx"] = limits;
    replace_file(&gw.cfg, &serde_json::to_string_pretty(&second).unwrap());
    signal(gw.pid, "HUP");
    let names = gw
        .tools_until(Duration::from_secs(5), "d's tools after SIGHUP", |n| {
            n.contains(&"d__test_simple_text".to_owned())
        })
        .await;
    assert!(
        names.contains(&"a__test_simple_text".to_owned()),
        "{names:?}"
    );
    assert!(
        gw.wait_note(LIST_CHANGED, Duration::from_secs(5)).await,
        "no list_changed line on stdio after the reload"
    );
    gw.call_until_ok("d__test_simple_text", json!({}), Duration::from_secs(10))
        .await;
    assert_eq!(gw.upstream_pid("a"), Some(a1), "a's child was replaced");
    assert_eq!(gw.upstream_pid("b"), Some(b1), "b's child was replaced");
}
