//! `mcpx log` and `mcpx stats` over a real database: one seeded with
//! `mcpx_history::Store::insert`, and one `mcpx serve` wrote.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use mcpx_history::{Outcome, Record, Store};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::{self, R1125};

fn mcpx(args: &[&str]) -> Output {
    mcpx_env(args, &[])
}

/// A directory with nothing in it: the commands' home and working directory, so that
/// no configuration of the user's is found. Made once: the tests share it.
fn nowhere() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| crate::scratch_dir("history-cli-nowhere"))
        .clone()
}

/// `mcpx ARGS`, with no configuration and no state directory of the user's.
fn mcpx_env(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let empty = nowhere();
    Command::new(env!("CARGO_BIN_EXE_mcpx"))
        .args(args)
        .current_dir(&empty)
        .env_remove("MCPX_CONFIG")
        .env("HOME", &empty)
        .env("XDG_STATE_HOME", empty.join("state"))
        .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// One call, `ago_ms` before `now`.
#[allow(clippy::too_many_arguments)]
fn call(
    now: i64,
    ago_ms: i64,
    upstream: Option<&str>,
    target: &str,
    method: &str,
    host: &str,
    outcome: Outcome,
    duration_us: i64,
    error: Option<(Option<i64>, &str)>,
) -> Record {
    let mut r = Record::new(now - ago_ms, method.to_owned());
    r.upstream = upstream.map(Into::into);
    r.target = Some(target.to_owned());
    r.client_name = Some(host.into());
    r.client_version = Some("1".into());
    r.era = "legacy".into();
    r.revision = "2025-11-25".into();
    r.transport = "stdio".into();
    r.outcome = outcome;
    r.duration_us = duration_us;
    if let Some((code, message)) = error {
        r.error_code = code;
        r.error_message = Some(message.to_owned());
    }
    r
}

const MIN: i64 = 60_000;
const HOUR: i64 = 60 * MIN;

/// A database in a directory of its own, seeded with eight calls (ids 1 to 8, oldest
/// first), and the time they were counted back from.
fn seeded(name: &str) -> (PathBuf, i64) {
    let db = crate::scratch_dir(name).join("history.sqlite3");
    let now = mcpx_history::now_ms();
    let calls = [
        call(
            now,
            3 * HOUR,
            Some("alpha"),
            "search",
            "tools/call",
            "claude",
            Outcome::Result,
            10_000,
            None,
        ),
        call(
            now,
            3 * HOUR - 1000,
            Some("alpha"),
            "search",
            "tools/call",
            "claude",
            Outcome::ToolError,
            30_000,
            Some((None, "nothing found")),
        ),
        call(
            now,
            2 * HOUR,
            Some("beta"),
            "fetch_url",
            "tools/call",
            "cursor",
            Outcome::Error,
            5_000,
            Some((Some(-32602), "Invalid params\nthe second line")),
        ),
        call(
            now,
            30 * MIN,
            Some("alpha"),
            "search",
            "tools/call",
            "cursor",
            Outcome::Result,
            20_000,
            None,
        ),
        call(
            now,
            20 * MIN,
            Some("beta"),
            "fetch_url",
            "tools/call",
            "claude",
            Outcome::Timeout,
            60_000,
            Some((None, "no answer within 60 s")),
        ),
        call(
            now,
            10 * MIN,
            Some("beta"),
            "file:///notes.txt",
            "resources/read",
            "claude",
            Outcome::Result,
            1_000,
            None,
        ),
        call(
            now,
            5 * MIN,
            Some("alpha"),
            "search_all",
            "tools/call",
            "claude",
            Outcome::Result,
            40_000,
            None,
        ),
        call(
            now,
            MIN,
            None,
            "missing",
            "tools/call",
            "cursor",
            Outcome::Error,
            500,
            Some((Some(-32602), "Unknown tool: missing")),
        ),
    ];
    let mut store = Store::open(&db).unwrap();
    assert_eq!(store.insert(&calls).unwrap(), 8);
    (db, now)
}

/// `mcpx log --json --db DB ARGS`: the ids of the rows, in the order printed.
fn ids(db: &Path, args: &[&str]) -> Vec<i64> {
    rows(db, args)
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect()
}

fn rows(db: &Path, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["log", "--json", "--db", db.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = mcpx(&all);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn stats(db: &Path, args: &[&str]) -> Value {
    let mut all = vec!["stats", "--json", "--db", db.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = mcpx(&all);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
}

fn rfc3339(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap());
    humantime::format_rfc3339_millis(at).to_string()
}

#[test]
fn log_json_picks_the_calls_each_filter_names() {
    let (db, now) = seeded("history-cli-filters");
    let all = rows(&db, &[]);
    assert_eq!(all.len(), 8);
    let first = &all[1];
    assert_eq!(first["id"], 2);
    assert_eq!(first["upstream"], "alpha");
    assert_eq!(first["target"], "search");
    assert_eq!(first["clientName"], "claude");
    assert_eq!(first["outcome"], "tool_error");
    assert_eq!(first["errorMessage"], "nothing found");
    assert_eq!(first["durationUs"], 30_000);
    assert_eq!(first["time"], rfc3339(now - 3 * HOUR + 1000));
    assert_eq!(ids(&db, &[]), [1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(ids(&db, &["--since", "1h"]), [4, 5, 6, 7, 8]);
    assert_eq!(ids(&db, &["--since", "90m"]), [4, 5, 6, 7, 8]);
    assert_eq!(
        ids(&db, &["--since", &rfc3339(now - 150 * MIN)]),
        [3, 4, 5, 6, 7, 8]
    );
    assert_eq!(ids(&db, &["--until", "1h"]), [1, 2, 3]);
    assert_eq!(ids(&db, &["--since", "1h", "--until", "15m"]), [4, 5]);
    assert_eq!(ids(&db, &["--upstream", "beta"]), [3, 5, 6]);
    assert_eq!(ids(&db, &["--tool", "search*"]), [1, 2, 4, 7]);
    assert_eq!(ids(&db, &["--tool", "search"]), [1, 2, 4]);
    assert_eq!(ids(&db, &["--tool", "file://*"]), [6]);
    assert_eq!(ids(&db, &["--errors"]), [2, 3, 5, 8]);
    assert_eq!(ids(&db, &["--host", "cursor"]), [3, 4, 8]);
    assert_eq!(ids(&db, &["--limit", "3"]), [6, 7, 8]);
    assert_eq!(ids(&db, &["--limit", "0"]), [1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(ids(&db, &["--upstream", "alpha", "--errors"]), [2]);
    assert_eq!(
        ids(&db, &["--host", "claude", "--errors", "--limit", "1"]),
        [5]
    );
    assert!(ids(&db, &["--upstream", "gamma"]).is_empty());
}

/// One group of `stats --json`: its key, its upstream or code, calls, errors, p50,
/// p95, p99 and total ms.
type Summary = (String, Value, u64, u64, f64, f64, f64, f64);

fn group(g: &Value) -> Summary {
    let extra = if g.get("upstream").is_some() {
        g["upstream"].clone()
    } else {
        g.get("errorCode").cloned().unwrap_or(Value::Null)
    };
    (
        g["key"].as_str().unwrap().to_owned(),
        extra,
        g["calls"].as_u64().unwrap(),
        g["errors"].as_u64().unwrap(),
        g["p50Ms"].as_f64().unwrap(),
        g["p95Ms"].as_f64().unwrap(),
        g["p99Ms"].as_f64().unwrap(),
        g["totalMs"].as_f64().unwrap(),
    )
}

fn groups(v: &Value) -> Vec<Summary> {
    v["groups"].as_array().unwrap().iter().map(group).collect()
}

#[test]
fn stats_json_counts_each_grouping_exactly() {
    let (db, now) = seeded("history-cli-stats");
    let s = |k: &str| k.to_owned();
    let by_tool = stats(&db, &[]);
    assert_eq!(by_tool["by"], "tool");
    assert_eq!(by_tool["since"], Value::Null);
    assert_eq!(
        groups(&by_tool),
        [
            (s("search"), json!("alpha"), 3, 1, 20.0, 30.0, 30.0, 60.0),
            (s("fetch_url"), json!("beta"), 2, 2, 5.0, 60.0, 60.0, 65.0),
            (
                s("file:///notes.txt"),
                json!("beta"),
                1,
                0,
                1.0,
                1.0,
                1.0,
                1.0
            ),
            (s("missing"), Value::Null, 1, 1, 0.5, 0.5, 0.5, 0.5),
            (
                s("search_all"),
                json!("alpha"),
                1,
                0,
                40.0,
                40.0,
                40.0,
                40.0
            ),
        ]
    );
    let rate = by_tool["groups"][0]["errorRate"].as_f64().unwrap();
    assert!((rate - 1.0 / 3.0).abs() < 1e-9, "{rate}");
    assert_eq!(
        groups(&stats(&db, &["--by", "upstream"])),
        [
            (s("alpha"), Value::Null, 4, 1, 20.0, 40.0, 40.0, 100.0),
            (s("beta"), Value::Null, 3, 2, 5.0, 60.0, 60.0, 66.0),
            (s(""), Value::Null, 1, 1, 0.5, 0.5, 0.5, 0.5),
        ]
    );
    assert_eq!(
        groups(&stats(&db, &["--by", "host"])),
        [
            (s("claude"), Value::Null, 5, 2, 30.0, 60.0, 60.0, 141.0),
            (s("cursor"), Value::Null, 3, 2, 5.0, 20.0, 20.0, 25.5),
        ]
    );
    assert_eq!(
        groups(&stats(&db, &["--by", "error"])),
        [
            (s("result"), Value::Null, 4, 0, 10.0, 40.0, 40.0, 71.0),
            (s("error"), json!(-32602), 2, 2, 0.5, 5.0, 5.0, 5.5),
            (s("timeout"), Value::Null, 1, 1, 60.0, 60.0, 60.0, 60.0),
            (s("tool_error"), Value::Null, 1, 1, 30.0, 30.0, 30.0, 30.0),
        ]
    );
    // The filters narrow the calls grouped.
    let recent = stats(&db, &["--since", "1h", "--upstream", "alpha"]);
    assert_eq!(recent["since"].as_str().map(str::len), Some(24));
    assert_eq!(
        groups(&recent),
        [
            (s("search"), json!("alpha"), 1, 0, 20.0, 20.0, 20.0, 20.0),
            (
                s("search_all"),
                json!("alpha"),
                1,
                0,
                40.0,
                40.0,
                40.0,
                40.0
            ),
        ]
    );
    let cursor = stats(
        &db,
        &["--host", "cursor", "--tool", "search*", "--by", "host"],
    );
    assert_eq!(
        groups(&cursor),
        [(s("cursor"), Value::Null, 1, 0, 20.0, 20.0, 20.0, 20.0)]
    );
    let until = stats(&db, &["--until", &rfc3339(now - HOUR), "--by", "upstream"]);
    assert_eq!(until["until"], rfc3339(now - HOUR));
    assert_eq!(
        groups(&until).iter().map(|g| g.2).collect::<Vec<_>>(),
        [2, 1]
    );
}

/// The start of each column in `header`, as the heads are found there.
fn starts(header: &str, heads: &[&str]) -> Vec<usize> {
    let mut at = 0;
    heads
        .iter()
        .map(|h| {
            let i = at
                + header[at..]
                    .find(h)
                    .unwrap_or_else(|| panic!("{h} in {header:?}"));
            at = i + h.len();
            i
        })
        .collect()
}

#[test]
fn the_tables_are_aligned_and_have_no_colour_off_a_terminal() {
    let (db, _) = seeded("history-cli-tables");
    let o = mcpx(&["log", "--db", db.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(!out.contains('\x1b'), "{out}");
    let lines: Vec<Vec<char>> = out.lines().map(|l| l.chars().collect()).collect();
    assert_eq!(lines.len(), 9, "{out}");
    let header: String = lines[0].iter().collect();
    let heads = [
        "TIME (UTC)",
        "UPSTREAM",
        "TARGET",
        "METHOD",
        "HOST",
        "OUTCOME",
        "MS",
        "ERROR",
    ];
    let at = starts(&header, &heads);
    let ms_end = at[6] + 2;
    for (n, line) in lines.iter().enumerate().skip(1) {
        let text: String = line.iter().collect();
        for (i, &start) in at.iter().enumerate() {
            if i == 6 {
                // Durations are right-aligned: they end where the head does.
                assert!(line[ms_end - 1].is_ascii_digit(), "{text}");
                assert_eq!(line[ms_end], ' ', "{text}");
                continue;
            }
            assert_ne!(line[start], ' ', "column {} of line {n}: {text}", heads[i]);
            if i > 0 {
                assert_eq!(
                    &line[start - 2..start],
                    [' ', ' '],
                    "column {} of line {n}: {text}",
                    heads[i]
                );
            }
        }
        assert!(!text.ends_with(' '), "{text:?}");
    }
    let row = |n: usize| lines[n].iter().collect::<String>();
    // Times in UTC, to the millisecond; what is missing is `-`; an error's first line.
    let time = rfc3339_of(&db, 1).replacen('T', " ", 1);
    assert!(
        row(1).starts_with(&format!("{}  alpha ", time.trim_end_matches('Z'))),
        "{}",
        row(1)
    );
    assert!(
        row(8).contains("  -  "),
        "the unrouted call's upstream: {}",
        row(8)
    );
    assert!(row(3).ends_with("-32602 Invalid params …"), "{}", row(3));
    assert!(row(3).contains("  error  "), "{}", row(3));
    assert!(row(1).ends_with("  10.0  -"), "{}", row(1));

    // A table cut by the limit says so, on stderr.
    let o = mcpx(&["log", "--db", db.to_str().unwrap(), "--limit", "3"]);
    assert_eq!(stdout(&o).lines().count(), 4, "{}", stdout(&o));
    assert!(
        stderr(&o).contains("the latest 3 of 8 calls"),
        "{}",
        stderr(&o)
    );

    let o = mcpx(&["stats", "--db", db.to_str().unwrap(), "--by", "error"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(!out.contains('\x1b'), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert!(lines[0].starts_with("OUTCOME  "), "{out}");
    // Every column but the first is right-aligned, so every line is as long.
    let width = lines[0].chars().count();
    assert!(lines.iter().all(|l| l.chars().count() == width), "{out}");
    assert!(lines[1].starts_with("result "), "{out}");
    assert!(lines[2].contains(" -32602 "), "{out}");
    let error_rate = starts(lines[0], &["ERROR %"])[0] + "ERROR %".len();
    assert_eq!(&lines[2][error_rate - 5..error_rate], "100.0", "{out}");
}

fn rfc3339_of(db: &Path, id: i64) -> String {
    let r = rows(db, &["--limit", "0"]);
    r[usize::try_from(id - 1).unwrap()]["time"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn purge_removes_what_the_filters_pick_and_with_none_everything() {
    let (db, _) = seeded("history-cli-purge");
    let p = db.to_str().unwrap();
    let o = mcpx(&[
        "log",
        "--purge",
        "--db",
        p,
        "--upstream",
        "beta",
        "--errors",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), format!("removed 2 calls from {p}"));
    assert_eq!(ids(&db, &[]), [1, 2, 4, 6, 7, 8]);
    let o = mcpx(&["log", "--purge", "--json", "--db", p, "--until", "1h"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        serde_json::from_slice::<Value>(&o.stdout).unwrap(),
        json!({"removed": 2})
    );
    assert_eq!(ids(&db, &[]), [4, 6, 7, 8]);
    let o = mcpx(&["log", "--purge", "--db", p]);
    assert_eq!(stdout(&o).trim(), format!("removed 4 calls from {p}"));
    assert!(ids(&db, &[]).is_empty());
    // --purge takes no --limit, and does not follow.
    let o = mcpx(&["log", "--purge", "--limit", "3", "--db", p]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn a_bad_time_is_a_usage_error_and_a_missing_database_is_no_error() {
    for command in ["log", "stats"] {
        let o = mcpx(&[command, "--since", "yesterday"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains("--since") && e.contains("\"yesterday\" is neither a duration"),
            "{e}"
        );
        let o = mcpx(&[command, "--until", "2026-02-30T99:00:00Z"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    }
    let o = mcpx(&["stats", "--by", "tools"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));

    let dir = crate::scratch_dir("history-cli-missing");
    let db = dir.join("none.sqlite3");
    for args in [
        &["log"][..],
        &["log", "--json"],
        &["stats"],
        &["stats", "--json"],
        &["log", "--purge"],
    ] {
        let mut all = args.to_vec();
        all.extend(["--db", db.to_str().unwrap()]);
        let o = mcpx(&all);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?}: {}", stdout(&o));
        assert_eq!(
            stderr(&o).trim(),
            format!("no calls recorded yet (database {})", db.display())
        );
        assert!(!db.exists(), "{args:?} made the database");
    }
    // Without a configuration, the default place: $XDG_STATE_HOME/mcpx/history.sqlite3.
    let o = mcpx_env(&["log"], &[("XDG_STATE_HOME", &dir)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("{}", dir.join("mcpx/history.sqlite3").display())),
        "{}",
        stderr(&o)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_records_the_calls_that_log_then_shows() {
    let mut config = common::example(R1125);
    // Relative: next to the configuration file.
    config["mcpx"] = json!({"history": {"path": "calls.sqlite3"}});
    let mut h = common::host("history-cli-serve", &config, R1125).await;
    let (ok, _) = h
        .request(
            "tools/call",
            json!({"name": "test_simple_text", "arguments": {}}),
        )
        .await;
    assert!(ok.get("result").is_some(), "{ok}");
    let (failed, _) = h
        .request(
            "tools/call",
            json!({"name": "test_error_handling", "arguments": {}}),
        )
        .await;
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    let cfg = h.dir.join("mcpx.json");
    // The writer thread writes off the call path: the calls appear soon after.
    let rows = crate::wait::poll(Duration::from_secs(20), async || {
        let o = mcpx(&["log", "--json", "--config", cfg.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let rows: Vec<Value> = stdout(&o)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (rows.len() >= 2).then_some(rows)
    })
    .await
    .expect("the two calls in the history");
    assert_eq!(rows.len(), 2, "{rows:?}");
    for (row, (tool, outcome)) in rows.iter().zip([
        ("test_simple_text", "result"),
        ("test_error_handling", "tool_error"),
    ]) {
        assert_eq!(row["target"], tool, "{row}");
        assert_eq!(row["outcome"], outcome, "{row}");
        assert_eq!(row["upstream"], "up", "{row}");
        assert_eq!(row["method"], "tools/call", "{row}");
        assert_eq!(row["clientName"], "mcpx-tests", "{row}");
        assert_eq!(row["transport"], "stdio", "{row}");
    }
    assert!(h.dir.join("calls.sqlite3").exists());
    let errors = mcpx(&[
        "log",
        "--json",
        "--errors",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert_eq!(stdout(&errors).lines().count(), 1, "{}", stdout(&errors));
    h.finish().await;
}

/// `mcpx log --follow ARGS` on `db`, its stdout's lines and stderr's.
fn follow(
    db: &Path,
    args: &[&str],
) -> (
    tokio::process::Child,
    tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    tokio::io::Lines<BufReader<tokio::process::ChildStderr>>,
) {
    let empty = nowhere();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpx"))
        .args(["log", "--follow", "--db"])
        .arg(db)
        .args(args)
        .current_dir(&empty)
        .env("HOME", &empty)
        .env_remove("MCPX_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap()).lines();
    let err = BufReader::new(child.stderr.take().unwrap()).lines();
    (child, out, err)
}

async fn next<R: tokio::io::AsyncBufRead + Unpin>(
    lines: &mut tokio::io::Lines<R>,
    what: &str,
) -> String {
    tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("no line within 20 s: {what}"))
        .unwrap()
        .unwrap_or_else(|| panic!("the stream ended: {what}"))
}

fn id_of(line: &str) -> i64 {
    serde_json::from_str::<Value>(line).unwrap()["id"]
        .as_i64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_prints_calls_as_they_are_written() {
    let (db, now) = seeded("history-cli-follow");
    let (mut child, mut out, _err) =
        follow(&db, &["--json", "--upstream", "alpha", "--limit", "2"]);
    // The latest two of alpha's calls first: it is reading.
    assert_eq!(id_of(&next(&mut out, "row 4").await), 4);
    assert_eq!(id_of(&next(&mut out, "row 7").await), 7);
    let mut store = Store::open(&db).unwrap();
    let alpha = call(
        now,
        0,
        Some("alpha"),
        "search",
        "tools/call",
        "claude",
        Outcome::Result,
        1,
        None,
    );
    let beta = call(
        now,
        0,
        Some("beta"),
        "fetch_url",
        "tools/call",
        "claude",
        Outcome::Result,
        1,
        None,
    );
    store.insert(&[beta.clone(), alpha.clone()]).unwrap();
    let line = next(&mut out, "the new call to alpha").await;
    assert_eq!(id_of(&line), 10, "{line}");
    assert_eq!(
        serde_json::from_str::<Value>(&line).unwrap()["upstream"],
        "alpha"
    );
    store.insert(&[alpha.clone(), beta, alpha]).unwrap();
    assert_eq!(id_of(&next(&mut out, "row 11").await), 11);
    assert_eq!(id_of(&next(&mut out, "row 13").await), 13);
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_waits_for_the_database_to_appear() {
    let db = crate::scratch_dir("history-cli-follow-late").join("later.sqlite3");
    let (mut child, mut out, mut err) = follow(&db, &["--json"]);
    let said = next(&mut err, "the missing database").await;
    assert_eq!(
        said,
        format!("no calls recorded yet (database {})", db.display())
    );
    let mut store = Store::open(&db).unwrap();
    let now = mcpx_history::now_ms();
    store
        .insert(&[call(
            now,
            0,
            Some("alpha"),
            "search",
            "tools/call",
            "claude",
            Outcome::Result,
            1,
            None,
        )])
        .unwrap();
    assert_eq!(id_of(&next(&mut out, "the first call").await), 1);
    child.kill().await.unwrap();
}

/// With a daemon serving the configuration, `--follow` reads the calls the daemon
/// writes (told by its events, or by the database read every 5 s meanwhile).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_with_a_daemon_prints_the_calls_it_serves() {
    use crate::daemon_support::{self, Daemon};
    let mut config = common::example(R1125);
    config["mcpx"] = json!({"history": {"path": "calls.sqlite3"}});
    let d = Daemon::start("history-follow", &config, &[]).await;
    let cfg = d.config.to_str().unwrap().to_owned();
    let call = async |tool: &str| {
        let (ok, out, err) = daemon_support::run(&d.dir, &["call", tool, "--config", &cfg]).await;
        assert!(ok || tool == "test_error_handling", "{out}{err}");
    };
    call("test_simple_text").await;
    let mut child = daemon_support::mcpx(&d.dir, &["log", "--follow", "--json", "--config", &cfg])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&next(&mut out, "the first call").await).unwrap();
    assert_eq!(first["target"], "test_simple_text", "{first}");
    call("test_error_handling").await;
    let second: Value = serde_json::from_str(&next(&mut out, "the second call").await).unwrap();
    assert_eq!(second["target"], "test_error_handling", "{second}");
    assert_eq!(second["outcome"], "tool_error", "{second}");
    child.kill().await.unwrap();
}
