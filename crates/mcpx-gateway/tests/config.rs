//! Configuration files as hosts write them, plus mcpx's own blocks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use mcpx_gateway::config::{self, ConfigError, ProtocolPreference, Transport};
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
