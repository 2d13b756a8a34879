//! The status page: `GET /` and its stylesheet and script, built into the binary.
//! The page is rendered here, whole (the upstreams, the last reload, the last calls,
//! the history's recent calls), so a client without JavaScript sees it; the script
//! keeps it current from `/v1/status` and `/v1/events`, and draws the history's
//! charts from `/v1/history/minutes` and `/v1/stats`.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::daemon::Daemon;
use crate::daemon::problem::to_value;

const INDEX: &str = include_str!("../page/index.html");
const CSS: &str = include_str!("../page/page.css");
const JS: &str = include_str!("../page/page.js");

fn file(body: impl Into<axum::body::Body>, media: &'static str) -> Response {
    let mut r = (StatusCode::OK, body.into()).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Not to be framed or scripted by other pages.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'self'; frame-ancestors 'none'"),
    );
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// `text` with HTML's special characters escaped, for an element's text or a
/// quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A JSON value as a cell's text: strings as they are, `null` as nothing.
fn text_of(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// A table row of `cells`: each its text and, if any, its class.
fn row(attrs: &str, cells: &[(String, Option<&str>)]) -> String {
    let mut r = format!("<tr{attrs}>");
    for (text, class) in cells {
        match class {
            Some(c) => {
                let _ = write!(r, "<td class=\"{}\">{}</td>", escape(c), escape(text));
            }
            None => {
                let _ = write!(r, "<td>{}</td>", escape(text));
            }
        }
    }
    r.push_str("</tr>");
    r
}

/// The upstreams' rows, as `/v1/status` has them.
fn upstream_rows(upstreams: &[Value]) -> String {
    upstreams
        .iter()
        .map(|u| {
            let state = text_of(&u["state"]);
            let attrs = format!(
                " data-name=\"{}\" data-state=\"{}\"",
                escape(&text_of(&u["name"])),
                escape(&state)
            );
            let state_class = format!("state {state}");
            // As the script draws them: tools not yet listed are unknown, not 0, and a
            // ready upstream's last error is past, marked so, with its time.
            let ready = state == "ready";
            let tools = match &u["tools"] {
                Value::Null if ready => "listing".to_owned(),
                Value::Null => "unknown".to_owned(),
                n => text_of(n),
            };
            let error = match u["lastError"].as_str() {
                None => String::new(),
                Some(e) => {
                    let at = u["lastErrorAt"]
                        .as_str()
                        .map(|t| format!("{t}: "))
                        .unwrap_or_default();
                    format!("{}{at}{e}", if ready { "earlier: " } else { "" })
                }
            };
            let error_class = if ready { "past reason" } else { "reason" };
            row(
                &attrs,
                &[
                    (text_of(&u["name"]), None),
                    (text_of(&u["phrase"]), Some(&state_class)),
                    (text_of(&u["era"]), None),
                    (text_of(&u["revision"]), None),
                    (text_of(&u["pid"]), None),
                    (text_of(&u["restarts"]), None),
                    (tools, None),
                    (error, Some(error_class)),
                ],
            )
        })
        .collect()
}

/// The calls' rows: those running, then those finished, the newest first.
fn call_rows(running: &[Value], finished: &[Value]) -> String {
    let mut out = String::new();
    for c in running.iter().rev() {
        out.push_str(&row(
            "",
            &[
                (text_of(&c["id"]), None),
                (text_of(&c["tool"]), None),
                (text_of(&c["via"]), None),
                ("running".to_owned(), Some("starting")),
                (String::new(), None),
                (String::new(), None),
            ],
        ));
    }
    for c in finished {
        let outcome = text_of(&c["outcome"]);
        let duration = c["durationMs"]
            .as_f64()
            .map(|ms| format!("{ms:.1} ms"))
            .unwrap_or_default();
        out.push_str(&row(
            "",
            &[
                (text_of(&c["id"]), None),
                (text_of(&c["tool"]), None),
                (text_of(&c["via"]), None),
                (outcome.clone(), Some(&outcome)),
                (duration, None),
                (text_of(&c["detail"]), Some("reason")),
            ],
        ));
    }
    out
}

/// Calls of the history the page shows.
pub const HISTORY_ROWS: usize = 20;

/// The history's recent calls' rows (`rows` oldest first), the newest first, as the
/// script draws them: each with its numbers in `data-*`.
fn history_rows(rows: &[mcpx_history::Row]) -> String {
    let mut out = String::new();
    for c in rows.iter().rev() {
        let r = &c.record;
        #[allow(clippy::cast_precision_loss)]
        let ms = r.duration_us as f64 / 1000.0;
        let tool = r.target.clone().unwrap_or_else(|| r.method.to_string());
        let outcome = r.outcome.as_str();
        let mut title = c.time.clone();
        if let Some(m) = &r.error_message {
            title.push('\n');
            title.push_str(m);
        }
        let attrs = format!(
            " data-id=\"{}\" data-outcome=\"{outcome}\" data-upstream=\"{}\" data-tool=\"{}\" data-host=\"{}\" data-ms=\"{ms:.3}\" title=\"{}\"",
            c.id,
            escape(r.upstream.as_deref().unwrap_or("")),
            escape(&tool),
            escape(r.client_name.as_deref().unwrap_or("")),
            escape(&title),
        );
        out.push_str(&row(
            &attrs,
            &[
                (c.time.get(11..19).unwrap_or("").to_owned(), None),
                (
                    r.client_name.as_deref().unwrap_or_default().to_owned(),
                    None,
                ),
                (r.upstream.as_deref().unwrap_or_default().to_owned(), None),
                (tool, None),
                (outcome.to_owned(), Some(outcome)),
                (format!("{ms:.1}"), None),
            ],
        ));
    }
    out
}

/// The last reload in words (as the script writes it) and its class.
fn reload_line(r: Option<&Value>) -> (String, &'static str) {
    let Some(r) = r else {
        return (String::new(), "");
    };
    let why = match r["trigger"].as_str() {
        Some("file") => "the file changed",
        Some("sighup") => "SIGHUP",
        Some("asked") => "asked",
        _ => "?",
    };
    if r["ok"] == Value::Bool(true) {
        (
            format!("last reload: ok ({why}): {}", text_of(&r["plan"])),
            "ok",
        )
    } else {
        (
            format!(
                "last reload: failed ({why}), the configuration in force goes on: {}",
                text_of(&r["error"])
            ),
            "failed",
        )
    }
}

/// The page, rendered from the daemon's state now and the history's recent calls
/// (an error: the history is off, or could not be read, and the page says why).
pub fn render(d: &Daemon, history: Result<&[mcpx_history::Row], String>) -> String {
    let upstreams: Vec<Value> = d
        .app
        .gateway()
        .upstreams()
        .iter()
        .map(|u| to_value(&super::info::upstream_status(u)))
        .collect();
    let daemon = format!(
        "pid {}, mcpx {}, {}",
        std::process::id(),
        env!("CARGO_PKG_VERSION"),
        d.key
    );
    let last = d.last_reload();
    let (reload, class) = reload_line(last.as_ref());
    let class_attr = if class.is_empty() {
        String::new()
    } else {
        format!(" class=\"{class}\"")
    };
    INDEX
        .replace("<!--daemon-->", &escape(&daemon))
        .replace("<!--reload-class-->", &class_attr)
        .replace("<!--reload-->", &escape(&reload))
        .replace("<!--upstreams-->", &upstream_rows(&upstreams))
        .replace(
            "<!--calls-->",
            &call_rows(&d.calls_in_flight(), &d.recent_calls()),
        )
        .replace(
            "<!--history-->",
            &history
                .as_ref()
                .map_or(String::new(), |rows| history_rows(rows)),
        )
        .replace(
            "data-history=\"unknown\"",
            if history.is_ok() {
                "data-history=\"on\""
            } else {
                "data-history=\"off\""
            },
        )
        .replace(
            "<!--history-note-->",
            &history.err().map(|e| escape(&e)).unwrap_or_default(),
        )
}

/// `GET /`.
pub async fn index(State(d): State<Arc<Daemon>>) -> Response {
    let recent = super::history::recent(&d, HISTORY_ROWS).await;
    let history = recent.as_deref().map_err(|p| p.detail.clone());
    file(render(&d, history), "text/html; charset=utf-8")
}

/// `GET /page.css`.
pub async fn css() -> Response {
    file(CSS, "text/css; charset=utf-8")
}

/// `GET /page.js`.
pub async fn js() -> Response {
    file(JS, "text/javascript; charset=utf-8")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_the_page_shows_is_escaped_and_an_error_row_has_its_reason() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        let rows = call_rows(
            &[],
            &[
                json!({"id": 2, "tool": "t", "via": "host", "outcome": "error",
                "durationMs": 1.25, "detail": "error -32602: <bad>"}),
            ],
        );
        assert!(rows.contains("<td class=\"error\">error</td>"), "{rows}");
        assert!(rows.contains("1.2 ms") || rows.contains("1.3 ms"), "{rows}");
        assert!(rows.contains("error -32602: &lt;bad&gt;"), "{rows}");
        let (line, class) = reload_line(Some(
            &json!({"trigger": "file", "ok": false, "error": "c.json:1:2: x"}),
        ));
        assert_eq!(class, "failed");
        assert!(line.contains("failed (the file changed)") && line.contains("c.json:1:2: x"));
    }

    #[test]
    fn a_history_row_carries_its_numbers_and_is_escaped() {
        let mut r = mcpx_history::Record::new(1_767_323_045_250, "tools/call");
        r.duration_us = 1500;
        r.upstream = Some("up".into());
        r.target = Some("<t>".into());
        r.client_name = Some("host\"x".into());
        r.outcome = mcpx_history::Outcome::ToolError;
        r.error_message = Some("bad & worse".into());
        let row = mcpx_history::Row {
            id: 7,
            time: "2026-01-02T03:04:05.250Z".into(),
            record: r,
        };
        let html = history_rows(&[row]);
        assert!(
            html.starts_with("<tr data-id=\"7\" data-outcome=\"tool_error\""),
            "{html}"
        );
        assert!(html.contains("data-ms=\"1.500\""), "{html}");
        assert!(html.contains("data-tool=\"&lt;t&gt;\""), "{html}");
        assert!(html.contains("data-host=\"host&quot;x\""), "{html}");
        assert!(html.contains("<td>03:04:05</td>"), "{html}");
        assert!(
            html.contains("<td class=\"tool_error\">tool_error</td>"),
            "{html}"
        );
        assert!(html.contains("bad &amp; worse"), "{html}");
    }
}
