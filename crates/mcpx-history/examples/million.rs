//! The call history at scale: N recorded calls (default 1 000 000) spread over the
//! last 30 days, written as the recorder writes them (batches of 512), then the
//! database's size and the time of the queries `mcpx stats` and `mcpx log` make.
//!
//!     cargo run --release -p mcpx-history --example million -- [N] [DIR]
//!
//! DIR (default: a new directory under the system's temp directory) holds the
//! database; it is left there. `scripts/bench.sh history` runs this.

use std::time::{Duration, Instant};

use mcpx_history::{By, Filter, Outcome, Record, Store};

const DAY_MS: i64 = 24 * 3600 * 1000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(Ok(1_000_000), |a| a.parse())?;
    let dir = args.next().map_or_else(
        || std::env::temp_dir().join(format!("mcpx-history-{}", std::process::id())),
        std::path::PathBuf::from,
    );
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("history.sqlite3");
    let _ = std::fs::remove_file(&path);
    let mut store = Store::open(&path)?;
    let now = mcpx_history::now_ms();
    let span_ms = 30 * DAY_MS;
    let mut rng = fastrand::Rng::with_seed(7);

    let started = Instant::now();
    let mut batch = Vec::with_capacity(512);
    for i in 0..n {
        // Oldest first, as they are written.
        let ts = now - span_ms
            + i64::try_from(i).unwrap_or(0) * span_ms / i64::try_from(n.max(1)).unwrap_or(1);
        batch.push(record(&mut rng, ts));
        if batch.len() == 512 {
            store.insert(&batch)?;
            batch.clear();
        }
    }
    if !batch.is_empty() {
        store.insert(&batch)?;
    }
    let insert = started.elapsed();
    store.execute_sql("PRAGMA wal_checkpoint(TRUNCATE)")?;
    let file = std::fs::metadata(&path)?.len();

    let day = Filter {
        since_ms: Some(now - DAY_MS),
        ..Filter::default()
    };
    let (by_tool, t_stats) = timed(|| store.stats(&day, By::Tool))?;
    let (_, t_stats_up) = timed(|| store.stats(&day, By::Upstream))?;
    let (_, t_stats_all) = timed(|| store.stats(&Filter::default(), By::Upstream))?;
    let latest = Filter {
        limit: Some(50),
        ..Filter::default()
    };
    let (_, t_log) = timed(|| store.calls(&latest))?;
    let errors = Filter {
        errors: true,
        upstream: Some("github".into()),
        limit: Some(50),
        ..day.clone()
    };
    let (_, t_log_errors) = timed(|| store.calls(&errors))?;
    let hour = Filter {
        since_ms: Some(now - 3600 * 1000),
        ..Filter::default()
    };
    let (_, t_minutes) = timed(|| store.minutes(&hour))?;
    let calls_in_day: u64 = by_tool.iter().map(|g| g.calls).sum();

    println!("calls recorded:          {n}");
    println!(
        "insert (batches of 512): {:.1} s, {:.0} calls/s",
        insert.as_secs_f64(),
        n as f64 / insert.as_secs_f64()
    );
    println!(
        "database size:           {:.1} MiB ({:.0} bytes a call)",
        file as f64 / 1048576.0,
        file as f64 / n.max(1) as f64
    );
    println!(
        "stats --since 1d --by tool:     {} ({calls_in_day} calls, {} groups)",
        ms(t_stats),
        by_tool.len()
    );
    println!("stats --since 1d --by upstream: {}", ms(t_stats_up));
    println!("stats --by upstream (30 days):  {}", ms(t_stats_all));
    println!("log (the latest 50):            {}", ms(t_log));
    println!("log --errors --upstream --since 1d: {}", ms(t_log_errors));
    println!("minutes of the last hour:       {}", ms(t_minutes));
    println!("database: {}", path.display());
    Ok(())
}

fn timed<T, E>(f: impl Fn() -> Result<T, E>) -> Result<(T, Duration), E> {
    // The best of three: the first run also reads the file into the page cache.
    let t = Instant::now();
    let v = f()?;
    let mut best = t.elapsed();
    for _ in 0..2 {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed());
    }
    Ok((v, best))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

const UPSTREAMS: [&str; 10] = [
    "github",
    "filesystem",
    "playwright",
    "slack",
    "notion",
    "postgres",
    "memory",
    "fetch",
    "kubernetes",
    "time",
];

fn record(rng: &mut fastrand::Rng, ts_ms: i64) -> Record {
    let up = UPSTREAMS[rng.usize(..UPSTREAMS.len())];
    let mut r = Record::new(ts_ms, "tools/call");
    r.duration_us =
        i64::from(rng.u32(200..20_000)) + if rng.u8(..100) == 0 { 2_000_000 } else { 0 };
    r.client_name = Some(["claude-code", "cursor", "codex"][rng.usize(..3)].into());
    r.client_version = Some("1.0.0".into());
    r.era = "legacy".into();
    r.revision = "2025-06-18".into();
    r.transport = "stdio".into();
    r.session = None;
    r.upstream = Some(up.into());
    r.target = Some(format!("{up}__tool_{}", rng.u8(..8)));
    r.outcome = match rng.u8(..100) {
        0..=94 => Outcome::Result,
        95..=97 => Outcome::ToolError,
        98 => Outcome::Error,
        _ => Outcome::Timeout,
    };
    if r.outcome != Outcome::Result {
        r.error_message = Some("something went wrong with the request".to_owned());
        r.error_code = (r.outcome == Outcome::Error).then_some(-32602);
    }
    r.request_bytes = i64::from(rng.u32(60..400));
    r.response_bytes = i64::from(rng.u32(100..4000));
    r
}
