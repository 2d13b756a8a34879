//! `client_probe <stdio|http|sse|modern> <command-or-url> [args…]`: connects to an MCP
//! server with one of mcpx's client transports and prints one JSON line per result.
//! Legacy: initialize (2025-11-25; 2024-11-05 for `sse`) + tools/list + tools/call echo.
//! Modern: server/discover + tools/list + tools/call echo with `_meta`
//! (protocolVersion 2026-07-28). Used by `scripts/interop.sh`.
#![allow(missing_docs)]

use std::time::Duration;

use mcpx_protocol::{Frame, Id};
use mcpx_transport::TransportError;
use mcpx_transport::child::{ChildConfig, ChildUpstream};
use mcpx_transport::http_sse_client::{SseClientConfig, SseUpstream};
use mcpx_transport::streamable_http::client::{HttpClientConfig, HttpUpstream};
use mcpx_transport::upstream::Upstream;
use serde_json::value::RawValue;

// Result<_, String>: the example prints the words; they are all its caller uses.
fn req(id: i64, method: &str, params: &str) -> Result<Frame, String> {
    let p = RawValue::from_string(params.to_owned()).map_err(|e| e.to_string())?;
    Ok(Frame::request(&Id::Number(id), method, Some(&p)))
}

async fn call<U: Upstream>(up: &U, f: Frame) -> Result<Frame, TransportError> {
    match tokio::time::timeout(Duration::from_secs(20), async {
        up.request(f).await?.response(|_| {}).await
    })
    .await
    {
        Ok(r) => r,
        Err(_) => Err(TransportError::Timeout(Duration::from_secs(20))),
    }
}

// Result<_, String>: the example prints the words; they are all its caller uses.
async fn legacy<U: Upstream>(up: &U, version: &str) -> Result<(), String> {
    let init = format!(
        r#"{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"client_probe","version":"0"}}}}"#
    );
    let r = call(up, req(1, "initialize", &init)?)
        .await
        .map_err(|e| e.to_string())?;
    println!("initialize {r}");
    up.send(Frame::notification("notifications/initialized", None))
        .await
        .map_err(|e| e.to_string())?;
    let r = call(up, req(2, "tools/list", "{}")?)
        .await
        .map_err(|e| e.to_string())?;
    println!("tools/list {r}");
    let r = call(
        up,
        req(
            3,
            "tools/call",
            r#"{"name":"echo","arguments":{"text":"héllo"}}"#,
        )?,
    )
    .await
    .map_err(|e| e.to_string())?;
    println!("tools/call {r}");
    Ok(())
}

// Result<_, String>: the example prints the words; they are all its caller uses.
async fn modern<U: Upstream>(up: &U) -> Result<(), String> {
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    for (id, method, params) in [
        (1, "server/discover", format!("{{{meta}}}")),
        (2, "tools/list", format!("{{{meta}}}")),
        (
            3,
            "tools/call",
            format!(r#"{{"name":"echo","arguments":{{"text":"héllo"}},{meta}}}"#),
        ),
    ] {
        match call(up, req(id, method, &params)?).await {
            Ok(r) => println!("{method} {r}"),
            Err(e) => {
                println!(
                    "{method} ERROR {e} (recognised modern error: {})",
                    e.is_recognised_modern_error()
                );
                return Err(e.to_string());
            }
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(mode), Some(target)) = (args.first(), args.get(1)) else {
        eprintln!("usage: client_probe <stdio|http|sse|modern> <command-or-url> [args…]");
        std::process::exit(2);
    };
    let res = match mode.as_str() {
        "stdio" => match ChildUpstream::spawn(ChildConfig::new(target, args[2..].to_vec())) {
            Ok((up, _un)) => {
                let r = legacy(&up, "2025-11-25").await;
                up.close().await;
                r
            }
            Err(e) => Err(e.to_string()),
        },
        "http" | "modern" => match HttpUpstream::new(HttpClientConfig::new(target)) {
            Ok((up, _un)) => {
                let r = if mode == "http" {
                    legacy(&up, "2025-11-25").await
                } else {
                    modern(&up).await
                };
                up.close().await;
                r
            }
            Err(e) => Err(e.to_string()),
        },
        "sse" => match SseUpstream::connect(SseClientConfig::new(target)).await {
            Ok((up, _un)) => {
                let r = legacy(&up, "2024-11-05").await;
                up.close().await;
                r
            }
            Err(e) => Err(e.to_string()),
        },
        other => Err(format!("unknown mode {other}")),
    };
    if let Err(e) = res {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
