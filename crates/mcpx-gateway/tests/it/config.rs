//! Configuration files as hosts write them, plus mcpx's own blocks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use mcpx_gateway::config::{
    self, ConfigError, HealthCheck, OnExit, ProtocolPreference, RestartPolicy, StartMode, Transport,
};
use mcpx_protocol::Revision;

const CLAUDE_DESKTOP: &str = r#"{
  // Claude Desktop / Cursor / VS Code style, with comments and trailing commas.
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp",],
      "env": { "DEBUG": "1" },
      "alwaysAllow": ["read_file"],      /* another host's key: tolerated */
      "autoApprove": [],
      "mcpx": {
        "namespace": "fs",
        "tools": { "include": ["read_*", "/^list_/"], "exclude": ["read_secret"] },
        "protocol": "prefer-legacy",
        "callTimeoutMs": 5000,
      },
    },
    "remote": { "type": "http", "url": "http://127.0.0.1:9000/mcp", "headers": {"X-Token": "t"} },
    "old": { "type": "sse", "url": "http://127.0.0.1:9001/sse" },
    "off": { "command": "false", "disabled": true },
  },
  "mcpx": {
    "spec": { "precedence": ["2025-06-18"], "lenient": ["2026-07-28"] },
    "names": { "separator": ".", "maxLength": 48 },
  },
}"#;

#[test]
fn host_formats_with_mcpx_blocks() {
    let c = config::parse(CLAUDE_DESKTOP, Path::new("c.json")).unwrap();
    assert_eq!(c.servers.len(), 4);
    let fs = &c.servers["filesystem"];
    match &fs.transport {
        Transport::Stdio {
            command, args, env, ..
        } => {
            assert_eq!(command, "npx");
            assert_eq!(args.len(), 3);
            assert_eq!(env["DEBUG"], "1");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fs.mcpx.namespace.as_deref(), Some("fs"));
    assert!(fs.mcpx.tools.allows("read_file"));
    assert!(fs.mcpx.tools.allows("list_dir"));
    assert!(!fs.mcpx.tools.allows("read_secret"));
    assert!(!fs.mcpx.tools.allows("write_file"));
    assert_eq!(fs.mcpx.protocol, ProtocolPreference::PreferLegacy);
    assert_eq!(fs.mcpx.call_timeout, Duration::from_millis(5000));
    assert!(
        matches!(&c.servers["remote"].transport, Transport::Http { headers, .. } if headers["X-Token"] == "t")
    );
    assert!(matches!(&c.servers["old"].transport, Transport::Sse { .. }));
    assert!(c.servers["off"].disabled);
    assert_eq!(c.global.separator, ".");
    assert_eq!(c.global.max_name_len, 48);
    assert_eq!(c.spec.first(), Revision::V2025_06_18);
    assert!(!c.spec.governs(Revision::V2026_07_28));
}

#[test]
fn unknown_key_in_an_mcpx_block_names_file_line_and_key() {
    let text = "{\n  \"mcpServers\": {\n    \"a\": {\n      \"command\": \"x\",\n      \"mcpx\": { \"namspace\": \"typo\" }\n    }\n  }\n}";
    let err = config::parse(text, Path::new("/etc/mcpx.json")).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ConfigError::Invalid { line: 5, .. }), "{msg}");
    assert!(msg.starts_with("/etc/mcpx.json:5:"), "{msg}");
    assert!(msg.contains("unknown field `namspace`"), "{msg}");
    let top = "{\"mcpx\": {\n\"specs\": {}}}";
    let msg = config::parse(top, Path::new("f")).unwrap_err().to_string();
    assert!(msg.starts_with("f:2:") && msg.contains("`specs`"), "{msg}");
}

#[test]
fn bad_values_are_refused_clearly() {
    for (text, want) in [
        (
            r#"{"mcpServers":{"a":{}}}"#,
            "mcpServers.a: needs `command` (stdio) or `url`",
        ),
        (
            r#"{"mcpServers":{"a":{"command":"x","url":"y"}}}"#,
            "has both",
        ),
        (
            r#"{"mcpServers":{"a":{"type":"ws","url":"y"}}}"#,
            "unknown type \"ws\"",
        ),
        (
            r#"{"mcpServers":{"a":{"command":"x","mcpx":{"tools":{"include":["/(/"]}}}}}"#,
            "pattern /(/",
        ),
        (
            r#"{"mcpx":{"spec":{"precedence":["2025-13-01"]}}}"#,
            "valid revisions are 2026-07-28",
        ),
        (r#"{"mcpx":{"names":{"separator":"::"}}}"#, "separator"),
        (
            r#"{"mcpx":{"limits":{"maxHeaderCount":4}}}"#,
            "mcpx.limits.maxHeaderCount 4 is too small (at least 8)",
        ),
        (
            r#"{"mcpx":{"limits":{"maxHeaderBytes":100}}}"#,
            "mcpx.limits.maxHeaderBytes 100 is too small (at least 1024)",
        ),
        (
            r#"{"mcpServers":{"a":{"command":"x","mcpx":{"protocol":"fastest"}}}}"#,
            "unknown variant `fastest`",
        ),
        ("{\"mcpServers\": [", "expected a map"),
        ("{\"mcpServers\": {", "EOF"),
    ] {
        let msg = config::parse(text, Path::new("cfg"))
            .unwrap_err()
            .to_string();
        assert!(msg.contains(want), "{text}: {msg}");
    }
}

#[test]
fn explicit_files_must_exist_and_search_falls_through() {
    let err = config::load(Some(Path::new("/nonexistent/mcpx.json"))).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/mcpx.json"), "{err}");
    let dir = mcpx_testkit::scratch::dir("config");
    let file = dir.join("x.json");
    std::fs::write(&file, r#"{"mcpServers":{"e":{"command":"echo"}}}"#).unwrap();
    let (path, c) = config::load(Some(&file)).unwrap();
    assert_eq!(path, file);
    assert!(c.servers.contains_key("e"));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn parse_server(mcpx: &str) -> Result<config::ServerConfig, ConfigError> {
    let text = format!(r#"{{"mcpServers": {{"a": {{"command": "x", "mcpx": {mcpx}}}}}}}"#);
    config::parse(&text, Path::new("cfg")).map(|c| c.servers["a"].clone())
}

#[test]
fn supervision_settings_default_when_absent() {
    let s = parse_server("{}").unwrap().mcpx;
    let ms = Duration::from_millis;
    assert_eq!(
        s.restart,
        RestartPolicy {
            on_exit: OnExit::Always,
            max_restarts: 5,
            backoff: ms(1000),
            max_backoff: ms(30_000),
            reset_after: ms(60_000),
            crash_loop_retry: ms(300_000),
        }
    );
    assert_eq!(s.restart, RestartPolicy::default());
    assert_eq!(s.start, StartMode::Eager);
    assert_eq!(s.idle_timeout, None);
    assert_eq!(s.health_check, None);
    let g = config::parse("{}", Path::new("cfg")).unwrap().global;
    // No server: the default connect timeout.
    assert_eq!(g.startup_wait, ms(30_000));
    assert_eq!(g.capability_wait, ms(1000));
    assert_eq!(g.drain_timeout, ms(10_000));
    assert_eq!(g.list_changed_window, ms(150));
    assert_eq!(g.reload_debounce, ms(300));
}

#[test]
fn supervision_settings_are_parsed() {
    let s = parse_server(
        r#"{"restart": {"onExit": "on-failure", "maxRestarts": 3, "backoffMs": 200,
            "maxBackoffMs": 800, "resetAfterMs": 5000, "crashLoopRetryMs": 9000},
            "start": "lazy", "idleTimeoutMs": 120000,
            "healthCheck": {"intervalMs": 250, "timeoutMs": 100}}"#,
    )
    .unwrap()
    .mcpx;
    let ms = Duration::from_millis;
    assert_eq!(
        s.restart,
        RestartPolicy {
            on_exit: OnExit::OnFailure,
            max_restarts: 3,
            backoff: ms(200),
            max_backoff: ms(800),
            reset_after: ms(5000),
            crash_loop_retry: ms(9000),
        }
    );
    assert_eq!(s.restart.delay(3), ms(800));
    assert_eq!(s.start, StartMode::Lazy);
    assert_eq!(s.idle_timeout, Some(ms(120_000)));
    assert_eq!(
        s.health_check,
        Some(HealthCheck {
            interval: ms(250),
            timeout: ms(100),
        })
    );
    for (value, want) in [
        ("always", OnExit::Always),
        ("on-failure", OnExit::OnFailure),
        ("never", OnExit::Never),
    ] {
        let r = parse_server(&format!(r#"{{"restart": {{"onExit": "{value}"}}}}"#)).unwrap();
        assert_eq!(r.mcpx.restart.on_exit, want);
    }
    let eager = parse_server(r#"{"start": "eager"}"#).unwrap();
    assert_eq!(eager.mcpx.start, StartMode::Eager);
    let h = parse_server(r#"{"healthCheck": {"intervalMs": 100}}"#).unwrap();
    assert_eq!(
        h.mcpx.health_check,
        Some(HealthCheck {
            interval: ms(100),
            timeout: ms(5000),
        })
    );
    let remote = config::parse(
        r#"{"mcpServers": {"r": {"url": "http://127.0.0.1:1/mcp",
            "mcpx": {"healthCheck": {"intervalMs": 1000}, "start": "lazy"}}}}"#,
        Path::new("cfg"),
    )
    .unwrap();
    assert!(remote.servers["r"].mcpx.health_check.is_some());
    let g = config::parse(
        r#"{"mcpx": {"limits": {"startupWaitMs": 0, "drainMs": 2500,
            "listChangedWindowMs": 40, "reloadDebounceMs": 1000}}}"#,
        Path::new("cfg"),
    )
    .unwrap()
    .global;
    assert_eq!(g.startup_wait, ms(0));
    assert_eq!(g.drain_timeout, ms(2500));
    assert_eq!(g.list_changed_window, ms(40));
    assert_eq!(g.reload_debounce, ms(1000));
}

#[test]
fn bad_supervision_settings_are_refused_naming_the_key() {
    for (mcpx, want) in [
        (
            r#"{"restart": {"onExit": "sometimes"}}"#,
            "mcpx.restart.onExit",
        ),
        (
            r#"{"restart": {"maxRestarts": 0}}"#,
            "mcpx.restart.maxRestarts",
        ),
        (r#"{"restart": {"backoffMs": 0}}"#, "mcpx.restart.backoffMs"),
        (
            r#"{"restart": {"backoffMs": 5000, "maxBackoffMs": 4000}}"#,
            "mcpx.restart.maxBackoffMs (4000 ms) must be at least backoffMs (5000 ms)",
        ),
        (
            r#"{"restart": {"crashLoopRetryMs": 0}}"#,
            "mcpx.restart.crashLoopRetryMs",
        ),
        (r#"{"start": "later"}"#, "mcpx.start"),
        (r#"{"idleTimeoutMs": 0}"#, "mcpx.idleTimeoutMs"),
        (
            r#"{"healthCheck": {"intervalMs": 99}}"#,
            "mcpx.healthCheck.intervalMs must be at least 100",
        ),
        (
            r#"{"healthCheck": {"intervalMs": 1000, "timeoutMs": 0}}"#,
            "mcpx.healthCheck.timeoutMs",
        ),
    ] {
        let e = parse_server(mcpx).unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(e, ConfigError::Value { line: Some(1), .. }),
            "{msg}"
        );
        assert!(msg.starts_with("cfg:1: mcpServers.a: "), "{msg}");
        assert!(msg.contains(want), "{mcpx}: {msg}");
    }
    // Shape errors: an unknown key, a missing interval, a wrong type (file, line, key).
    for (mcpx, want) in [
        (
            r#"{"restart": {"maxRestart": 1}}"#,
            "unknown field `maxRestart`",
        ),
        (
            r#"{"healthCheck": {"timeoutMs": 10}}"#,
            "missing field `intervalMs`",
        ),
        (r#"{"restart": {"maxRestarts": -1}}"#, "invalid value"),
    ] {
        let e = parse_server(mcpx).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, ConfigError::Invalid { line: 1, .. }), "{msg}");
        assert!(msg.contains(want), "{mcpx}: {msg}");
    }
    let e = config::parse(
        "{\"mcpx\": {\"limits\": {\n\"drainMs\": \"soon\"}}}",
        Path::new("cfg"),
    )
    .unwrap_err();
    assert!(matches!(e, ConfigError::Invalid { line: 2, .. }), "{e}");
    let e = config::parse(
        "{\"mcpx\": {\"limits\": {\n\"reloadDebounce\": 1}}}",
        Path::new("cfg"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("cfg:2:") && e.contains("`reloadDebounce`"),
        "{e}"
    );
}

#[test]
fn idle_timeout_is_for_stdio_upstreams() {
    for server in [
        r#"{"url": "http://127.0.0.1:1/mcp", "mcpx": {"idleTimeoutMs": 1000}}"#,
        r#"{"type": "sse", "url": "http://127.0.0.1:1/sse", "mcpx": {"idleTimeoutMs": 1000}}"#,
    ] {
        let text = format!("{{\n\"mcpServers\": {{\n\n  \"r\": {server}\n}}}}");
        let e = config::parse(&text, Path::new("/etc/mcpx.json")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/etc/mcpx.json:4: mcpServers.r: mcpx.idleTimeoutMs is for stdio upstreams (a child process mcpx can stop)"
        );
    }
}

#[test]
fn a_servers_value_error_says_the_line_its_entry_starts_on() {
    let text = r#"{
  // "bad": a comment naming the server first
  "mcpServers": {
    "good": { "command": "x", "env": { "bad": "1" } },

    "bad": {
      "command": "x",
      "mcpx": { "restart": { "maxRestarts": 0 } }
    }
  }
}"#;
    let e = config::parse(text, Path::new("/etc/mcpx.json")).unwrap_err();
    assert!(
        matches!(&e, ConfigError::Value { line: Some(6), .. }),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "/etc/mcpx.json:6: mcpServers.bad: mcpx.restart.maxRestarts must be at least 1"
    );
    // A global value has no server line.
    let e = config::parse(r#"{"mcpx":{"names":{"separator":"::"}}}"#, Path::new("f")).unwrap_err();
    assert!(matches!(&e, ConfigError::Value { line: None, .. }), "{e:?}");
    assert!(e.to_string().starts_with("f: mcpx.names.separator"), "{e}");
}

#[test]
fn the_example_in_docs_config_md_parses() {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config.md");
    let text = std::fs::read_to_string(&doc).unwrap();
    let example = text
        .split("```jsonc\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap();
    let c = config::parse(example, &doc).unwrap();
    let files = &c.servers["files"].mcpx;
    assert_eq!(files.start, StartMode::Lazy);
    assert_eq!(files.restart.on_exit, OnExit::OnFailure);
    assert!(c.servers["remote"].mcpx.health_check.is_some());
    assert_eq!(c.global.drain_timeout, Duration::from_millis(5000));
}

/// `startupWaitMs` defaults to the time a start may take: the longest
/// `connectTimeoutMs` of the eager servers (a lazy or disabled one's does not count).
#[test]
fn the_startup_wait_defaults_to_the_longest_eager_connect_timeout() {
    let text = r#"{"mcpServers": {
        "a": {"command": "a", "mcpx": {"connectTimeoutMs": 45000}},
        "b": {"command": "b"},
        "c": {"command": "c", "mcpx": {"connectTimeoutMs": 90000, "start": "lazy"}},
        "d": {"command": "d", "disabled": true, "mcpx": {"connectTimeoutMs": 99000}}
    }}"#;
    let g = config::parse(text, Path::new("cfg")).unwrap().global;
    assert_eq!(g.startup_wait, Duration::from_millis(45_000));
    let set = r#"{"mcpx": {"limits": {"startupWaitMs": 5000}},
                  "mcpServers": {"a": {"command": "a", "mcpx": {"connectTimeoutMs": 45000}}}}"#;
    let g = config::parse(set, Path::new("cfg")).unwrap().global;
    assert_eq!(g.startup_wait, Duration::from_millis(5000));
}
