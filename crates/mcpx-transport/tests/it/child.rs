//! The stdio child-process client against real processes (small shell scripts).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use mcpx_protocol::codec::Limits;
use mcpx_protocol::jsonrpc::Kind;
use mcpx_protocol::{Frame, Id};
use mcpx_transport::TransportError;
use mcpx_transport::child::{ChildConfig, ChildUpstream};
use mcpx_transport::upstream::Upstream;
use serde_json::value::RawValue;

use crate::wait;

fn sh(script: &str) -> ChildConfig {
    let mut c = ChildConfig::new("sh", ["-c", script]);
    c.stop_grace = Duration::from_millis(500);
    c
}

fn req(id: i64, method: &str, params: &str) -> Frame {
    let p = RawValue::from_string(params.to_owned()).unwrap();
    Frame::request(&Id::Number(id), method, Some(&p))
}

/// A fake server: answers every request line with a result echoing its id.
const ECHO: &str = r#"while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  [ -n "$id" ] && printf '{"jsonrpc":"2.0","id":%s,"result":{"echo":true}}\n' "$id"
done"#;

#[tokio::test]
async fn round_trip_and_notifications() {
    let script = format!(
        "printf '{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{}}}}\\n'; {ECHO}"
    );
    let (up, mut un) = ChildUpstream::spawn(sh(&script)).unwrap();
    let init = req(
        1,
        "initialize",
        r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}"#,
    );
    let resp = up
        .request(init)
        .await
        .unwrap()
        .response(|_| {})
        .await
        .unwrap();
    assert_eq!(resp.kind(), Kind::Result);
    assert_eq!(resp.id(), Some(&Id::Number(1)));
    let resp = up
        .request(req(
            2,
            "tools/call",
            r#"{"name":"echo","arguments":{"text":"hi"}}"#,
        ))
        .await
        .unwrap()
        .response(|_| {})
        .await
        .unwrap();
    assert_eq!(resp.id(), Some(&Id::Number(2)));
    let n = tokio::time::timeout(Duration::from_secs(5), un.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n.method(), Some("notifications/message"));
    up.close().await;
}

#[tokio::test]
async fn echo_server_example_round_trip() {
    let exe = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/debug/examples/echo_server");
    if !exe.exists() {
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "-p", "mcpx-transport", "--example", "echo_server"])
            .status()
            .unwrap();
        assert!(status.success());
    }
    let (up, _un) = ChildUpstream::spawn(ChildConfig::new(
        exe.to_string_lossy(),
        Vec::<String>::new(),
    ))
    .unwrap();
    let init = req(
        1,
        "initialize",
        r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}"#,
    );
    let resp = up
        .request(init)
        .await
        .unwrap()
        .response(|_| {})
        .await
        .unwrap();
    assert_eq!(resp.kind(), Kind::Result, "{resp}");
    assert!(resp.as_str().contains("2025-11-25"), "{resp}");
    up.send(Frame::notification("notifications/initialized", None))
        .await
        .unwrap();
    let resp = up
        .request(req(2, "tools/list", "{}"))
        .await
        .unwrap()
        .response(|_| {})
        .await
        .unwrap();
    assert_eq!(resp.id(), Some(&Id::Number(2)), "{resp}");
    let start = Instant::now();
    up.close().await;
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "echo_server exits at EOF"
    );
}

#[tokio::test]
async fn crash_mid_request_quotes_stderr() {
    let script = "read -r line; echo 'panic: something broke' >&2; exit 3";
    let (up, _un) = ChildUpstream::spawn(sh(script)).unwrap();
    let ex = up.request(req(1, "tools/list", "{}")).await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(5), ex.response(|_| {}))
        .await
        .unwrap()
        .unwrap_err();
    let TransportError::Closed { detail } = err else {
        panic!("{err:?}")
    };
    assert!(detail.contains("exited with status 3"), "{detail}");
    assert!(detail.contains("panic: something broke"), "{detail}");
    // Later requests fail at once with the same detail.
    let err = up.request(req(2, "tools/list", "{}")).await.unwrap_err();
    assert!(matches!(err, TransportError::Closed { .. }), "{err:?}");
}

/// An error quotes a short tail of the server's stderr (its last lines, at most
/// about 2 KB), not the 16 KB kept: the message goes to a host's model.
#[tokio::test]
async fn a_crash_quotes_only_the_last_lines_of_stderr() {
    let script = "read -r line; i=0; while [ $i -lt 200 ]; do \
        echo \"line $i: $(printf '%090d' 0)\" >&2; i=$((i+1)); done; exit 3";
    let (up, _un) = ChildUpstream::spawn(sh(script)).unwrap();
    let ex = up.request(req(1, "tools/list", "{}")).await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(5), ex.response(|_| {}))
        .await
        .unwrap()
        .unwrap_err();
    let TransportError::Closed { detail } = err else {
        panic!("{err:?}")
    };
    let stderr = detail.split("; stderr: ").nth(1).unwrap_or_default();
    assert!(stderr.starts_with('…'), "{detail}");
    assert!(
        stderr.len() <= 2048 + '…'.len_utf8(),
        "{} bytes: {detail}",
        stderr.len()
    );
    assert!(stderr.contains("line 199: "), "{detail}");
    assert!(
        !stderr.contains("line 189: "),
        "more than ten lines: {detail}"
    );
}

#[tokio::test]
async fn garbage_lines_are_skipped_and_counted() {
    // Lines that are not JSON at all (a banner, a log line that starts with a bracket)
    // are skipped: the lines around them are read as they were.
    let script = r#"read -r line; echo 'Welcome to my server v1.0'; echo '[INFO] {not json'; printf '{"jsonrpc":"2.0","id":1,"result":{}}\n'; read -r line; exit 0"#;
    let (up, _un) = ChildUpstream::spawn(sh(script)).unwrap();
    let resp = up
        .request(req(1, "ping", "{}"))
        .await
        .unwrap()
        .response(|_| {})
        .await
        .unwrap();
    assert_eq!(resp.id(), Some(&Id::Number(1)));
    let ex = up.request(req(2, "ping", "{}")).await.unwrap();
    let TransportError::Closed { detail } = ex.response(|_| {}).await.unwrap_err() else {
        panic!()
    };
    assert!(
        detail.contains("2 non-JSON-RPC stdout line(s) skipped"),
        "{detail}"
    );
}

/// The error `ex` ends with, within 5 s: it must be [`TransportError::Framing`]; its
/// text.
async fn framing_error(ex: mcpx_transport::upstream::Exchange) -> String {
    let err = tokio::time::timeout(Duration::from_secs(5), ex.response(|_| {}))
        .await
        .expect("the exchange still waits")
        .unwrap_err();
    match err {
        TransportError::Framing(detail) => detail,
        other => panic!("not a framing error: {other:?}"),
    }
}

#[tokio::test]
async fn a_line_over_the_limit_ends_the_connection_as_it_crosses_it() {
    // 5000 bytes of a line over a 1024-byte limit, and no newline for a long while: the
    // request fails as the line crosses the limit; later ones fail the same way, and
    // `closed` says so too.
    let script = r#"read -r line; printf '{"jsonrpc":"2.0","id":1,"result":{"x":"'; head -c 5000 /dev/zero | tr '\0' 'x'; sleep 30; printf '"}}\n'"#;
    let mut cfg = sh(script);
    cfg.limits = Limits {
        max_frame_bytes: 1024,
        ..Limits::default()
    };
    let (up, _un) = ChildUpstream::spawn(cfg).unwrap();
    let t0 = Instant::now();
    let detail = framing_error(up.request(req(1, "ping", "{}")).await.unwrap()).await;
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert!(
        detail.contains("a line of more than 1024 bytes on stdout"),
        "{detail}"
    );
    assert!(up.is_closed());
    let err = up.request(req(2, "ping", "{}")).await.unwrap_err();
    assert!(matches!(err, TransportError::Framing(_)), "{err:?}");
    let closed = tokio::time::timeout(Duration::from_secs(1), up.closed())
        .await
        .unwrap();
    assert!(matches!(closed, TransportError::Framing(_)), "{closed:?}");
    up.close().await;
}

#[tokio::test]
async fn two_messages_on_one_line_end_the_connection() {
    let script = r#"read -r line; printf '{"jsonrpc":"2.0","id":1,"result":{}}{"jsonrpc":"2.0","id":1,"result":{}}\n'; sleep 30"#;
    let (up, _un) = ChildUpstream::spawn(sh(script)).unwrap();
    let detail = framing_error(up.request(req(1, "ping", "{}")).await.unwrap()).await;
    assert!(detail.contains("not JSON"), "{detail}");
    up.close().await;
}

#[tokio::test]
async fn an_unfinished_line_ends_the_connection_once_it_has_been_quiet() {
    // The start of a response and nothing more: not given up while bytes may still
    // come, given up once the line has been quiet for as long as asked.
    let script =
        r#"read -r line; printf '{"jsonrpc":"2.0","id":1,"res'; echo 'still alive' >&2; sleep 30"#;
    let (up, _un) = ChildUpstream::spawn(sh(script)).unwrap();
    let ex = up.request(req(1, "ping", "{}")).await.unwrap();
    // The child wrote the start of the line before its stderr line.
    assert!(
        wait::until(Duration::from_secs(5), async || up
            .stderr_tail()
            .contains("still alive"))
        .await,
        "the child never wrote its stderr line"
    );
    // Quiet for less than asked: kept.
    assert!(up.give_up_if_unfinished(Duration::from_secs(60)).is_none());
    assert!(!up.is_closed(), "given up before the line had been quiet");
    let err = wait::poll_every(
        Duration::from_secs(5),
        Duration::from_millis(50),
        async || up.give_up_if_unfinished(Duration::from_millis(200)),
    )
    .await
    .expect("the unfinished line was never seen");
    let TransportError::Framing(detail) = &err else {
        panic!("{err:?}")
    };
    assert!(
        detail.contains("unfinished line on stdout: 28 bytes with no newline"),
        "{detail}"
    );
    assert!(detail.contains("still alive"), "no stderr tail: {detail}");
    // The request waiting for it fails with the same error.
    assert_eq!(framing_error(ex).await, *detail);
    up.close().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_big_response_arrives_whole_and_the_next_one_too() {
    // 3 MiB of text, over the size decoded off the event loop, then a small answer:
    // both arrive, whole and in order, on a single-threaded runtime.
    let script = r#"read -r line; printf '{"jsonrpc":"2.0","id":1,"result":{"text":"'; head -c 3145728 /dev/zero | tr '\0' 'x'; printf '"}}\n'; read -r line; printf '{"jsonrpc":"2.0","id":2,"result":{}}\n'; read -r line"#;
    let (up, _un) = ChildUpstream::spawn(sh(script)).unwrap();
    let big = tokio::time::timeout(
        Duration::from_secs(20),
        up.request(req(1, "ping", "{}"))
            .await
            .unwrap()
            .response(|_| {}),
    )
    .await
    .unwrap()
    .unwrap();
    let text: serde_json::Value = serde_json::from_str(big.result().unwrap()).unwrap();
    assert_eq!(text["text"].as_str().map(str::len), Some(3 << 20));
    let small = tokio::time::timeout(
        Duration::from_secs(5),
        up.request(req(2, "ping", "{}"))
            .await
            .unwrap()
            .response(|_| {}),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(small.id(), Some(&Id::Number(2)));
    up.close().await;
}

fn alive(pid: i32) -> bool {
    // Signal 0 probes; a zombie still counts, so check /proc state too.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[tokio::test]
async fn stubborn_server_and_its_group_are_killed() {
    let dir = mcpx_testkit::scratch::dir("child");
    let pidfile = dir.join("grandchild.pid");
    // Ignores stdin EOF and SIGTERM; leaves a grandchild in its group.
    let script = format!(
        "trap '' TERM; sleep 1000 & echo $! > {}; while :; do sleep 1; done",
        pidfile.display()
    );
    let (up, _un) = ChildUpstream::spawn(sh(&script)).unwrap();
    let pid = up.pid().unwrap() as i32;
    let grandchild = wait::poll_every(
        Duration::from_millis(2500),
        Duration::from_millis(50),
        async || {
            std::fs::read_to_string(&pidfile)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
        },
    )
    .await
    .expect("grandchild pid");
    assert!(alive(pid) && alive(grandchild));
    let start = Instant::now();
    up.close().await;
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "waited both graces: {took:?}"
    );
    assert!(
        took < Duration::from_millis(2500),
        "killed within ~2x grace + slack: {took:?}"
    );
    // The group was sent SIGKILL; the grandchild is reaped by init, not by us.
    let gone = async |p: i32| wait::until(Duration::from_secs(2), async || !alive(p)).await;
    assert!(gone(pid).await, "server survived");
    assert!(gone(grandchild).await, "grandchild survived");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_spawn_failure_names_the_program() {
    let err = ChildUpstream::spawn(ChildConfig::new(
        "/nonexistent/mcp-server",
        Vec::<String>::new(),
    ))
    .unwrap_err();
    assert!(
        matches!(&err, TransportError::Spawn { command, .. } if command == "/nonexistent/mcp-server"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "command not found: /nonexistent/mcp-server (no such file)"
    );
}

/// A program name not in PATH is said to be so, at once (issue #32: `mcpx probe`
/// retried it for 31 s, saying "No such file or directory (os error 2)").
#[tokio::test]
async fn a_program_not_in_path_is_not_found() {
    let err = ChildUpstream::spawn(ChildConfig::new(
        "mcpx-no-such-program",
        Vec::<String>::new(),
    ))
    .unwrap_err();
    assert!(
        matches!(
            &err,
            TransportError::Spawn {
                not_found: true,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "command not found: mcpx-no-such-program (not in PATH)"
    );
    // A missing working directory is not taken for a missing program.
    let mut cfg = ChildConfig::new("sh", vec!["-c".to_owned(), "true".to_owned()]);
    cfg.cwd = Some("/nonexistent/dir".into());
    let err = ChildUpstream::spawn(cfg).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot start \"sh\": its working directory /nonexistent/dir does not exist"
    );
}

#[tokio::test]
async fn a_dropped_exchange_stops_awaiting_its_id() {
    // A server that reads everything and answers nothing, allowed two requests awaited
    // at once: each dropped exchange must give its place back.
    let mut cfg = sh("cat > /dev/null");
    cfg.max_pending = 2;
    let (up, _un) = ChildUpstream::spawn(cfg).unwrap();
    for id in 1..=5 {
        let exchange = up.request(req(id, "tools/list", "{}")).await.unwrap();
        drop(exchange);
    }
    // Two kept: the third is refused, and names the bound.
    let _a = up.request(req(6, "tools/list", "{}")).await.unwrap();
    let _b = up.request(req(7, "tools/list", "{}")).await.unwrap();
    let err = up.request(req(8, "tools/list", "{}")).await.unwrap_err();
    assert!(
        matches!(&err, TransportError::Protocol(m) if m.contains("limit 2")),
        "{err:?}"
    );
    // The same id again once its exchange is gone is fine too.
    drop(_a);
    let again = up.request(req(6, "tools/list", "{}")).await;
    assert!(again.is_ok(), "{again:?}");
}

#[tokio::test]
async fn an_exchange_ends_with_the_connections_error_when_the_child_exits() {
    // Reads one line, says why on stderr, exits without answering.
    let (up, _un) =
        ChildUpstream::spawn(sh("read -r line; echo 'out of cheese' >&2; exit 3")).unwrap();
    let exchange = up.request(req(1, "tools/list", "{}")).await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(10), exchange.response(|_| {}))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(&err, TransportError::Closed { detail } if detail.contains("out of cheese")),
        "{err:?}"
    );
}
