//! The call history over a real database in a test directory.

use std::time::Duration;

use mcpx_history::{
    By, Capture, Filter, History, Outcome, Record, SCHEMA_VERSION, Settings, Store,
};

fn db(name: &str) -> std::path::PathBuf {
    mcpx_testkit::scratch::dir(name).join("state/mcpx/history.sqlite3")
}

fn call(ts_ms: i64, upstream: &str, tool: &str, outcome: Outcome, duration_ms: i64) -> Record {
    let mut r = Record::new(ts_ms, "tools/call");
    r.duration_us = duration_ms * 1000;
    r.era = "legacy".into();
    r.revision = "2025-06-18".into();
    r.transport = "stdio".into();
    r.client_name = Some("test-host".into());
    r.upstream = Some(upstream.into());
    r.target = Some(tool.into());
    r.outcome = outcome;
    if outcome == Outcome::Error {
        r.error_code = Some(-32602);
        r.error_message = Some("unknown tool".into());
    }
    r
}

#[test]
fn a_record_reads_back_with_every_field() {
    let path = db("history-fields");
    let mut store = Store::open(&path).unwrap();
    let mut r = call(1_700_000_000_123, "fs", "fs__read", Outcome::ToolError, 12);
    r.client_version = Some("1.2.3".into());
    r.session = Some("s-1".into());
    r.error_message = Some("no such file".into());
    r.request_bytes = 40;
    r.response_bytes = 90;
    r.trace_id = Some("4bf92f3577b34da6a3ce929d0e0e4736".into());
    r.subject = Some("alice".into());
    r.arguments = Some(r#"{"path":"/x"}"#.into());
    let last = store.insert(std::slice::from_ref(&r)).unwrap();
    let rows = store.calls(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].id, last);
    assert_eq!(rows[0].record, r);
    assert_eq!(rows[0].time, "2023-11-14T22:13:20.123Z");
    // The file is the user's alone, like its directory.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
}

#[test]
fn filters_narrow_and_stats_group() {
    let path = db("history-filters");
    let mut store = Store::open(&path).unwrap();
    let mut rs = Vec::new();
    for i in 0..100 {
        rs.push(call(1000 + i, "fs", "fs__read", Outcome::Result, i + 1));
    }
    rs.push(call(2000, "gh", "gh__open_pr", Outcome::Error, 5));
    rs.push(call(2001, "gh", "gh__open_pr", Outcome::Timeout, 30_000));
    let mut other = call(2002, "gh", "gh__list", Outcome::Result, 2);
    other.client_name = Some("other-host".into());
    rs.push(other);
    store.insert(&rs).unwrap();

    let f = |f: Filter| store.calls(&f).unwrap();
    assert_eq!(f(Filter::default()).len(), 103);
    assert_eq!(
        f(Filter {
            upstream: Some("gh".into()),
            ..Filter::default()
        })
        .len(),
        3
    );
    assert_eq!(
        f(Filter {
            tool: Some("gh__open*".into()),
            ..Filter::default()
        })
        .len(),
        2
    );
    let errors = f(Filter {
        errors: true,
        ..Filter::default()
    });
    assert_eq!(
        errors.iter().map(|r| r.record.outcome).collect::<Vec<_>>(),
        vec![Outcome::Error, Outcome::Timeout]
    );
    assert_eq!(
        f(Filter {
            host: Some("other-host".into()),
            ..Filter::default()
        })
        .len(),
        1
    );
    assert_eq!(
        f(Filter {
            since_ms: Some(2000),
            until_ms: Some(2002),
            ..Filter::default()
        })
        .len(),
        2
    );
    let latest = f(Filter {
        limit: Some(2),
        ..Filter::default()
    });
    assert_eq!(
        latest.iter().map(|r| r.record.ts_ms).collect::<Vec<_>>(),
        vec![2001, 2002],
        "the latest, oldest first"
    );
    let after = f(Filter {
        after_id: Some(latest[0].id),
        ..Filter::default()
    });
    assert_eq!(after.len(), 1);

    let by_tool = store.stats(&Filter::default(), By::Tool).unwrap();
    assert_eq!(by_tool[0].key, "fs__read");
    assert_eq!(by_tool[0].upstream.as_deref(), Some("fs"));
    assert_eq!((by_tool[0].calls, by_tool[0].errors), (100, 0));
    assert_eq!(
        (by_tool[0].p50_ms, by_tool[0].p95_ms, by_tool[0].p99_ms),
        (50.0, 95.0, 99.0)
    );
    assert_eq!(by_tool[0].total_ms, 5050.0);
    let pr = by_tool.iter().find(|g| g.key == "gh__open_pr").unwrap();
    assert_eq!((pr.calls, pr.errors, pr.error_rate), (2, 2, 1.0));
    let by_up = store.stats(&Filter::default(), By::Upstream).unwrap();
    assert_eq!(
        by_up
            .iter()
            .map(|g| (g.key.as_str(), g.calls))
            .collect::<Vec<_>>(),
        vec![("fs", 100), ("gh", 3)]
    );
    let by_host = store.stats(&Filter::default(), By::Host).unwrap();
    assert_eq!(
        by_host
            .iter()
            .map(|g| (g.key.as_str(), g.calls))
            .collect::<Vec<_>>(),
        vec![("test-host", 102), ("other-host", 1)]
    );
    let by_err = store
        .stats(
            &Filter {
                errors: true,
                ..Filter::default()
            },
            By::Error,
        )
        .unwrap();
    assert_eq!(
        by_err
            .iter()
            .map(|g| (g.key.as_str(), g.error_code))
            .collect::<Vec<_>>(),
        vec![("error", Some(-32602)), ("timeout", None)]
    );
    let minutes = store.minutes(&Filter::default()).unwrap();
    assert_eq!(minutes.len(), 1);
    assert_eq!(minutes[0].outcomes.get("result"), Some(&101));
    assert_eq!(minutes[0].outcomes.get("timeout"), Some(&1));
}

#[test]
fn an_older_schema_is_migrated_and_keeps_its_calls() {
    let path = db("history-migrate");
    {
        let store = Store::open_at(&path, 1).unwrap();
        assert_eq!(store.version().unwrap(), 1);
    }
    // A version-1 row, written as version 1 wrote it (no trace_id, no subject).
    drop(insert_v1_row(&path).unwrap());
    let store = Store::open(&path).unwrap();
    assert_eq!(store.version().unwrap(), SCHEMA_VERSION);
    let rows = store.calls(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].record.target.as_deref(), Some("old__tool"));
    assert_eq!(rows[0].record.trace_id, None);
    assert_eq!(rows[0].record.subject, None);
}

/// Openers of a new database at the same moment (a daemon's writer, `mcpx log
/// --follow` waiting for the file) each find it migrated; none fails on a step another
/// took.
#[test]
fn openers_at_once_each_find_the_schema_made() {
    let path = db("history-open-race");
    for round in 0..50 {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        let start = std::sync::Arc::new(std::sync::Barrier::new(8));
        let openers: Vec<_> = (0..8)
            .map(|_| {
                let (path, start) = (path.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    Store::open(&path).map(|s| s.version())
                })
            })
            .collect();
        for o in openers {
            let version = o.join().unwrap();
            assert!(
                matches!(version, Ok(Ok(SCHEMA_VERSION))),
                "round {round}: {version:?}"
            );
        }
    }
}

/// Inserts a row as version 1 wrote it: `Store::insert` names version 2's columns, so
/// the row goes in as SQL of its own.
fn insert_v1_row(path: &std::path::Path) -> Result<Store, mcpx_history::HistoryError> {
    let store = Store::open_at(path, 1)?;
    store.execute_sql(
        "INSERT INTO calls (ts_ms, duration_us, era, revision, transport, method, target, \
             outcome, request_bytes, response_bytes) VALUES \
             (1, 2, 'legacy', '2024-11-05', 'stdio', 'tools/call', 'old__tool', 'result', 3, 4)",
    )?;
    Ok(store)
}

#[test]
fn a_newer_schema_is_refused_with_what_to_do() {
    let path = db("history-newer");
    let store = Store::open(&path).unwrap();
    store.execute_sql("PRAGMA user_version = 99").unwrap();
    drop(store);
    let e = Store::open(&path).unwrap_err().to_string();
    assert!(
        e.contains("schema version 99") && e.contains("upgrade mcpx"),
        "{e}"
    );
}

#[test]
fn retention_takes_out_old_calls_then_the_oldest_past_the_size() {
    let path = db("history-retain");
    let mut store = Store::open(&path).unwrap();
    let now = 100 * 24 * 3600 * 1000;
    let day = 24 * 3600 * 1000;
    let old = call(now - 31 * day, "fs", "old", Outcome::Result, 1);
    let recent = call(now - day, "fs", "recent", Outcome::Result, 1);
    store.insert(&[old, recent]).unwrap();
    let r = store
        .retain(now, Duration::from_secs(30 * 24 * 3600), u64::MAX)
        .unwrap();
    assert_eq!((r.by_age, r.by_size), (1, 0));
    let left = store.calls(&Filter::default()).unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].record.target.as_deref(), Some("recent"));

    // About 4 MiB of calls; keep 1 MiB.
    let big: Vec<Record> = (0..4096)
        .map(|i| {
            let mut r = call(now - day + i, "fs", &format!("t{i}"), Outcome::Error, 1);
            r.error_message = Some("x".repeat(1000));
            r
        })
        .collect();
    store.insert(&big).unwrap();
    assert!(store.used_bytes().unwrap() > 4 << 20);
    let r = store
        .retain(now, Duration::from_secs(30 * 24 * 3600), 1 << 20)
        .unwrap();
    assert!(r.by_size > 3000, "{r:?}");
    assert!(store.used_bytes().unwrap() <= 1 << 20);
    let left = store.calls(&Filter::default()).unwrap();
    assert_eq!(
        left.last().unwrap().record.target.as_deref(),
        Some("t4095"),
        "the newest stay"
    );
    assert!(
        left.iter()
            .all(|r| r.record.target.as_deref() != Some("recent")),
        "the oldest go first"
    );
    let file = std::fs::metadata(&path).unwrap().len();
    assert!(file <= 2 << 20, "the file shrank too: {file} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_drops_and_counts_and_never_waits() {
    let path = db("history-full");
    let mut settings = Settings::at(path.clone());
    settings.queue = 4;
    let history = History::open(settings).unwrap();
    // Another process holds the database: the writer waits on it, the queue fills.
    let blocker = Store::open(&path).unwrap();
    blocker.execute_sql("BEGIN EXCLUSIVE").unwrap();
    for i in 0..100 {
        history.record(Box::new(call(i, "fs", "t", Outcome::Result, 1)));
    }
    let c = history.counts();
    assert_eq!(c.recorded + c.dropped, 100);
    // The writer may take a few into the batch it is writing before it waits.
    assert!(c.dropped > 50, "{c:?}");
    blocker.execute_sql("COMMIT").unwrap();
    history.flush().await;
    let c = history.counts();
    assert_eq!(c.written, c.recorded, "{c:?}");
    let store = Store::open(&path).unwrap();
    assert_eq!(store.count(&Filter::default()).unwrap(), c.written);
    assert_eq!(*history.written().borrow(), store.last_id().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_redacts_and_caps_what_was_captured() {
    let path = db("history-capture");
    let mut settings = Settings::at(path.clone());
    settings.capture = Capture::All;
    settings.max_value_bytes = 200;
    let history = History::open(settings).unwrap();
    let mut r = call(1, "fs", "t", Outcome::Result, 1);
    r.arguments =
        Some(r#"{"q":"hi","auth":{"GitHub_Token":"ghp_x","list":[{"password":"p"}]}}"#.into());
    r.result = Some(format!(
        r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#,
        "y".repeat(500)
    ));
    history.record(Box::new(r));
    history.flush().await;
    let rows = Store::open(&path)
        .unwrap()
        .calls(&Filter::default())
        .unwrap();
    let args: serde_json::Value =
        serde_json::from_str(rows[0].record.arguments.as_deref().unwrap()).unwrap();
    assert_eq!(args["auth"]["GitHub_Token"], "[redacted]");
    assert_eq!(args["auth"]["list"][0]["password"], "[redacted]");
    assert_eq!(args["q"], "hi");
    let result: serde_json::Value =
        serde_json::from_str(rows[0].record.result.as_deref().unwrap()).unwrap();
    assert!(result["mcpx/truncated"].as_u64().unwrap() > 500);
}
