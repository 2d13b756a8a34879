//! What a stdio upstream inherits of mcpx's environment: everything but mcpx's own
//! secrets (the serve token, every variable an `…Env` setting names), plus its entry's
//! `env`; with `"environment": "minimal"`, only PATH, HOME, LANG, TMPDIR and USER of
//! it. A third-party server must not read the gateway's credentials back (issue
//! "Reliability and security", defect 5).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::ffi::OsStr;
use std::path::Path;

use mcpx_protocol::Revision;
use serde_json::{Value, json};

use crate::common;
use common::{Host, result, text};

/// A stdio upstream running tests/fixtures/env_server.py, with `env` and `settings`.
fn env_server(env: Value, settings: Value) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/env_server.py");
    json!({"command": "python3", "args": [script], "env": env, "mcpx": settings})
}

async fn get_env(host: &mut Host, tool: &str, name: &str) -> String {
    let (r, _) = host
        .request(
            "tools/call",
            json!({"name": tool, "arguments": {"name": name}}),
        )
        .await;
    text(result(&r, &format!("get_env {name}")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_never_inherit_mcpxs_secrets() {
    let config = json!({"mcpServers": {
        "inherit": env_server(json!({"FROM_ENTRY": "entry"}), json!({})),
        "minimal": env_server(json!({"FROM_ENTRY": "entry"}), json!({"environment": "minimal"})),
        // Its client secret is read from MCPX_TEST_OAUTH_SECRET: a secret of mcpx's.
        "remote": {"type": "http", "url": "http://127.0.0.1:1/mcp", "mcpx": {"oauth": {
            "tokenUrl": "http://127.0.0.1:1/token", "clientId": "c",
            "clientSecretEnv": "MCPX_TEST_OAUTH_SECRET"}}},
    }});
    let env: &[(&str, &OsStr)] = &[
        ("MCPX_SERVE_TOKEN", OsStr::new("the-serve-token")),
        ("MCPX_TEST_OAUTH_SECRET", OsStr::new("the-client-secret")),
        ("MCPX_TEST_PLAIN", OsStr::new("plain")),
        // The OTLP collector's credentials are mcpx's; its endpoint is not secret.
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            OsStr::new("x-api-key=collector-secret"),
        ),
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            OsStr::new("http://127.0.0.1:9/v1/traces"),
        ),
    ];
    let mut host = Host::start_env("env-secrets", &config, Revision::V2025_06_18, &[], env).await;
    host.initialize(json!({})).await;
    for tool in ["inherit__get_env", "minimal__get_env"] {
        assert_eq!(
            get_env(&mut host, tool, "MCPX_SERVE_TOKEN").await,
            "<unset>",
            "{tool}"
        );
        assert_eq!(
            get_env(&mut host, tool, "MCPX_TEST_OAUTH_SECRET").await,
            "<unset>",
            "{tool}"
        );
        assert_eq!(
            get_env(&mut host, tool, "OTEL_EXPORTER_OTLP_HEADERS").await,
            "<unset>",
            "{tool}"
        );
        assert_eq!(
            get_env(&mut host, tool, "FROM_ENTRY").await,
            "entry",
            "{tool}"
        );
        assert_ne!(get_env(&mut host, tool, "PATH").await, "<unset>", "{tool}");
    }
    // Everything else is inherited, unless the environment is minimal.
    assert_eq!(
        get_env(&mut host, "inherit__get_env", "MCPX_TEST_PLAIN").await,
        "plain"
    );
    assert_eq!(
        get_env(
            &mut host,
            "inherit__get_env",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        )
        .await,
        "http://127.0.0.1:9/v1/traces"
    );
    assert_eq!(
        get_env(&mut host, "minimal__get_env", "MCPX_TEST_PLAIN").await,
        "<unset>"
    );
    host.finish().await;
}

#[test]
fn minimal_is_for_stdio_upstreams() {
    let text = json!({"mcpServers": {"r": {"type": "http", "url": "http://127.0.0.1:1/mcp",
        "mcpx": {"environment": "minimal"}}}})
    .to_string();
    let e = mcpx_gateway::config::parse(&text, Path::new("mcpx.json"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("mcpx.environment is for stdio upstreams"), "{e}");
    let text =
        json!({"mcpServers": {"s": {"command": "x", "mcpx": {"environment": "some"}}}}).to_string();
    let e = mcpx_gateway::config::parse(&text, Path::new("mcpx.json"))
        .unwrap_err()
        .to_string();
    assert!(e.contains(r#"is "inherit" or "minimal""#), "{e}");
}
