//! The call history in the daemon's API: `GET /v1/history` (its filters, `after`,
//! `limit`), `/v1/stats` by each grouping, `/v1/history/minutes`, the `history` event
//! on `/v1/events`, the status page's recent calls, and the problems: 400 for a
//! parameter that does not read, 404 with the history off.

use serde_json::{Value, json};

use crate::daemon_support::{Daemon, WITHIN};

/// The example server as `everything` (the one upstream: its names are not
/// prefixed), and the history in the test's directory.
fn config(dir: &std::path::Path, enabled: bool) -> Value {
    let exe = env!("CARGO_BIN_EXE_mcpx");
    json!({
        "mcpServers": {"everything": {"command": exe, "args": ["example-server"]}},
        "mcpx": {"history": {
            "enabled": enabled,
            "path": dir.join("history.sqlite3").to_str().unwrap(),
        }},
    })
}

fn targets(v: &Value) -> Vec<&str> {
    v["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["target"].as_str().unwrap())
        .collect()
}

/// `path`'s answer, which must be 200.
async fn ok(d: &Daemon, path: &str) -> Value {
    let (s, v) = d.get(path).await;
    assert_eq!(s, 200, "{path}: {v}");
    v
}

/// Each group's key and its calls and errors.
fn groups(v: &Value) -> Vec<(String, u64, u64)> {
    let mut g: Vec<_> = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["key"].as_str().unwrap().to_owned(),
                g["calls"].as_u64().unwrap(),
                g["errors"].as_u64().unwrap(),
            )
        })
        .collect();
    g.sort();
    g
}

#[tokio::test]
async fn the_history_answers_what_was_called_filtered_grouped_and_by_minute() {
    let dir = crate::scratch_dir("daemon-history");
    let d = Daemon::start_in(
        dir.clone(),
        &config(&dir, true),
        &["--http", "127.0.0.1:0", "--allow-any-local-user"],
    )
    .await;
    d.ready().await;
    assert_eq!(
        ok(&d, "/v1/history").await,
        json!({"calls": [], "lastId": 0})
    );

    // One call that succeeds, one that is a tool's error, one of no such tool.
    let (s, v) = d
        .post("/v1/call", &json!({"tool": "test_simple_text"}))
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = d
        .post("/v1/call", &json!({"tool": "test_error_handling"}))
        .await;
    assert_eq!((s, &v["isError"]), (200, &json!(true)), "{v}");
    let (s, v) = d.post("/v1/call", &json!({"tool": "no_such_tool"})).await;
    assert_eq!(s, 404, "{v}");

    // Written off the call path: polled until all three are in.
    let mut last = Value::Null;
    let written = crate::wait::poll(WITHIN, async || {
        last = d.get("/v1/history").await.1;
        (last["calls"].as_array().map(Vec::len) == Some(3)).then(|| last.clone())
    })
    .await;
    let all = written.unwrap_or_else(|| panic!("three calls not written: {last}"));
    assert_eq!(
        targets(&all),
        ["test_simple_text", "test_error_handling", "no_such_tool"],
        "oldest first"
    );
    let calls = all["calls"].as_array().unwrap();
    let outcomes: Vec<&str> = calls
        .iter()
        .map(|c| c["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["result", "tool_error", "error"]);
    assert_eq!(calls[0]["upstream"], "everything");
    assert_eq!(calls[1]["upstream"], "everything");
    assert_eq!(calls[2]["errorCode"], -32602);
    for c in calls {
        assert_eq!(c["clientName"], "mcpx-daemon-api", "{c}");
        assert_eq!(c["transport"], "api", "{c}");
        assert!(c["time"].as_str().unwrap().ends_with('Z'), "{c}");
    }
    let ids: Vec<i64> = calls.iter().map(|c| c["id"].as_i64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert_eq!(all["lastId"], ids[2]);

    // Filters.
    let picked = async |query: &str| targets(&ok(&d, &format!("/v1/history?{query}")).await).len();
    assert_eq!(picked("errors=true").await, 2);
    assert_eq!(picked("errors=false").await, 3);
    assert_eq!(picked("tool=*simple*").await, 1);
    assert_eq!(picked("tool=test_*").await, 2);
    assert_eq!(picked("upstream=everything").await, 2);
    assert_eq!(picked("upstream=elsewhere").await, 0);
    assert_eq!(picked("host=mcpx-daemon-api").await, 3);
    assert_eq!(picked("host=another").await, 0);
    assert_eq!(picked("since=1h").await, 3);
    assert_eq!(picked("since=1d&until=1h").await, 0);
    let first_ms = calls[0]["tsMs"].as_i64().unwrap();
    assert_eq!(picked(&format!("until={first_ms}")).await, 0);
    assert_eq!(picked(&format!("since={first_ms}")).await, 3);
    let last_time = calls[2]["time"].as_str().unwrap();
    assert!(picked(&format!("since={last_time}")).await >= 1);
    assert_eq!(picked("since=2000-01-01T00:00:00Z").await, 3);
    // `after` and `limit`: the calls since one, and the latest ones.
    let after = ok(&d, &format!("/v1/history?after={}", ids[0])).await;
    assert_eq!(after["calls"].as_array().unwrap().len(), 2);
    assert_eq!(after["calls"][0]["id"], ids[1]);
    let after_all = ok(&d, &format!("/v1/history?after={}", ids[2])).await;
    assert_eq!(after_all, json!({"calls": [], "lastId": ids[2]}));
    let latest = ok(&d, "/v1/history?limit=1").await;
    assert_eq!(targets(&latest), ["no_such_tool"]);
    assert_eq!(
        ok(&d, "/v1/history?limit=2&errors=true").await["calls"][0]["target"],
        "test_error_handling"
    );

    // Statistics, by each grouping.
    let by_tool = ok(&d, "/v1/stats").await;
    assert_eq!(by_tool["by"], "tool");
    assert_eq!(
        groups(&by_tool),
        [
            ("no_such_tool".to_owned(), 1, 1),
            ("test_error_handling".to_owned(), 1, 1),
            ("test_simple_text".to_owned(), 1, 0),
        ]
    );
    let by_upstream = ok(&d, "/v1/stats?by=upstream").await;
    assert_eq!(by_upstream["by"], "upstream");
    assert_eq!(
        groups(&by_upstream),
        [(String::new(), 1, 1), ("everything".to_owned(), 2, 1)]
    );
    let everything = by_upstream["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["key"] == "everything")
        .unwrap();
    let (p50, p95) = (
        everything["p50Ms"].as_f64().unwrap(),
        everything["p95Ms"].as_f64().unwrap(),
    );
    assert!(p50 > 0.0 && p95 >= p50, "{everything}");
    assert_eq!(
        groups(&ok(&d, "/v1/stats?by=host").await),
        [("mcpx-daemon-api".to_owned(), 3, 2)]
    );
    let by_error = ok(&d, "/v1/stats?by=error").await;
    assert_eq!(
        groups(&by_error),
        [
            ("error".to_owned(), 1, 1),
            ("result".to_owned(), 1, 0),
            ("tool_error".to_owned(), 1, 1),
        ]
    );
    let error = by_error["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["key"] == "error")
        .unwrap();
    assert_eq!(error["errorCode"], -32602);
    assert_eq!(
        groups(&ok(&d, "/v1/stats?by=upstream&errors=true&tool=*_*").await),
        [(String::new(), 1, 1), ("everything".to_owned(), 1, 1)]
    );

    // Calls per minute, by outcome (the three may fall in two minutes).
    let minutes = ok(&d, "/v1/history/minutes").await;
    let mut sum = std::collections::BTreeMap::<String, u64>::new();
    for m in minutes["minutes"].as_array().unwrap() {
        assert_eq!(m["startMs"].as_i64().unwrap() % 60_000, 0, "{m}");
        for (o, n) in m["outcomes"].as_object().unwrap() {
            *sum.entry(o.clone()).or_default() += n.as_u64().unwrap();
        }
    }
    let want: std::collections::BTreeMap<String, u64> =
        [("error", 1), ("result", 1), ("tool_error", 1)]
            .into_iter()
            .map(|(o, n)| (o.to_owned(), n))
            .collect();
    assert_eq!(sum, want, "{minutes}");
    assert_eq!(
        ok(&d, "/v1/history/minutes?since=1d&until=1h").await,
        json!({"minutes": []})
    );

    // The writes are told on /v1/events, as `history` with the last number.
    let r = reqwest::Client::new()
        .get(d.url("/v1/events?since=0"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let want = format!("event: history\ndata: {}\n", json!({"lastId": ids[2]}));
    let mut body = r.bytes_stream();
    let mut seen = String::new();
    let found = tokio::time::timeout(WITHIN, async {
        use futures_util::StreamExt as _;
        while let Some(Ok(chunk)) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains(&want) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "{want:?} not in {seen}");
    drop(body);

    // The status page shows the recent calls, each with its number.
    let (s, page) = d.get_text("/").await;
    assert_eq!(s, 200);
    assert!(page.contains("data-history=\"on\""), "{page}");
    for id in &ids {
        assert!(
            page.contains(&format!("<tr data-id=\"{id}\"")),
            "{id}: {page}"
        );
    }

    // Parameters that do not read: 400, naming the parameter.
    for (path, names) in [
        ("/v1/history?since=soon", "`since`"),
        ("/v1/history?until=yesterday", "`until`"),
        ("/v1/history?limit=0", "`limit`"),
        ("/v1/history?limit=1001", "`limit`"),
        ("/v1/history?after=-1", "`after`"),
        ("/v1/history?errors=maybe", "`errors`"),
        ("/v1/stats?by=weekday", "`by`"),
        ("/v1/stats?since=soon", "`since`"),
        ("/v1/history/minutes?since=30d", "`since`"),
        ("/v1/history/minutes?since=soon", "`since`"),
    ] {
        let (s, media, p) = d.ask_full("GET", path, None, &[]).await;
        assert_eq!(s, 400, "{path}: {p}");
        assert_eq!(media, "application/problem+json", "{path}");
        assert_eq!(p["type"], "urn:mcpx:problem:bad-request", "{path}");
        assert!(p["detail"].as_str().unwrap().contains(names), "{path}: {p}");
    }
    let long = format!("/v1/history?tool={}", "x".repeat(2000));
    assert_eq!(d.get(&long).await.0, 400);
}

#[tokio::test]
async fn with_the_history_off_its_operations_answer_404() {
    let dir = crate::scratch_dir("daemon-history-off");
    let d = Daemon::start_in(dir.clone(), &config(&dir, false), &[]).await;
    d.ready().await;
    let (s, v) = d
        .post("/v1/call", &json!({"tool": "test_simple_text"}))
        .await;
    assert_eq!(s, 200, "{v}");
    for path in [
        "/v1/history",
        "/v1/stats?by=upstream",
        "/v1/history/minutes?since=1h",
    ] {
        let (s, media, p) = d.ask_full("GET", path, None, &[]).await;
        assert_eq!(s, 404, "{path}: {p}");
        assert_eq!(media, "application/problem+json", "{path}");
        assert_eq!(p["type"], "urn:mcpx:problem:history-off", "{path}");
        assert_eq!(
            p["detail"], "the call history is off (mcpx.history.enabled is false)",
            "{path}"
        );
    }
    // Parameters are read first: a bad one is still a 400.
    assert_eq!(d.get("/v1/history?since=soon").await.0, 400);
    let (s, page) = d.get_text("/").await;
    assert_eq!(s, 200);
    assert!(page.contains("data-history=\"off\""), "{page}");
    assert!(page.contains("mcpx.history.enabled is false"), "{page}");
    assert!(!dir.join("history.sqlite3").exists(), "no database is made");
}
