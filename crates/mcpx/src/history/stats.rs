//! `mcpx stats`: the calls of the history grouped by tool, upstream, host or error,
//! the most called first: per group the calls, errors, error rate, p50/p95/p99
//! durations and total time. A table, or with `--json` one JSON document:
//! `{"by": …, "since": …, "until": …, "groups": [mcpx_history::Group…]}`.

use std::process::ExitCode;

use mcpx_history::{By, Group};

use super::table::{Align, Cell, Table};
use super::{Common, Database, Error, print_json, rfc3339, say};

/// Arguments of `mcpx stats`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// How to group the calls: by tool (with its upstream), upstream, host
    /// (`clientInfo.name`), or error (the outcome and JSON-RPC code).
    #[arg(long, value_enum, default_value_t = ByArg::Tool)]
    by: ByArg,
}

/// `--by`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ByArg {
    Tool,
    Upstream,
    Host,
    Error,
}

impl ByArg {
    const fn by(self) -> By {
        match self {
            ByArg::Tool => By::Tool,
            ByArg::Upstream => By::Upstream,
            ByArg::Host => By::Host,
            ByArg::Error => By::Error,
        }
    }
}

/// What `--json` prints.
#[derive(Debug, serde::Serialize)]
struct Report<'a> {
    /// The grouping.
    by: &'static str,
    /// `--since` as an RFC 3339 time (UTC), or `null`.
    since: Option<String>,
    /// `--until` likewise.
    until: Option<String>,
    /// The groups, the most called first.
    groups: &'a [Group],
}

/// `mcpx stats`.
pub fn run(args: &Args) -> ExitCode {
    match stats(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpx stats: {e}");
            ExitCode::FAILURE
        }
    }
}

fn stats(args: &Args) -> Result<(), Error> {
    let db = Database::of(&args.common)?;
    let filter = args.common.filter(mcpx_history::now_ms());
    let Some(store) = db.open()? else {
        db.say_missing();
        return Ok(());
    };
    let by = args.by.by();
    let groups = store.stats(&filter, by)?;
    if args.common.json {
        print_json(&Report {
            by: by.as_str(),
            since: filter.since_ms.map(rfc3339),
            until: filter.until_ms.map(rfc3339),
            groups: &groups,
        });
        return Ok(());
    }
    if groups.is_empty() {
        eprintln!("no calls match (database {})", db.path.display());
        return Ok(());
    }
    let mut heads: Vec<(&'static str, Align)> = match by {
        By::Tool => vec![("TOOL", Align::Left), ("UPSTREAM", Align::Left)],
        By::Upstream => vec![("UPSTREAM", Align::Left)],
        By::Host => vec![("HOST", Align::Left)],
        By::Error => vec![("OUTCOME", Align::Left), ("CODE", Align::Right)],
    };
    heads.extend([
        ("CALLS", Align::Right),
        ("ERRORS", Align::Right),
        ("ERROR %", Align::Right),
        ("P50 MS", Align::Right),
        ("P95 MS", Align::Right),
        ("P99 MS", Align::Right),
        ("TOTAL MS", Align::Right),
    ]);
    let rows: Vec<Vec<Cell>> = groups.iter().map(|g| cells(by, g)).collect();
    let mut table = Table::new(&heads, false);
    table.fit(&rows);
    say!("{}", table.header());
    for row in &rows {
        say!("{}", table.line(row));
    }
    Ok(())
}

/// A group's cells.
fn cells(by: By, g: &Group) -> Vec<Cell> {
    let mut cells = vec![Cell::new(&g.key)];
    match by {
        By::Tool => cells.push(Cell::opt(g.upstream.as_deref())),
        By::Error => cells.push(Cell::new(
            &g.error_code.map(|c| c.to_string()).unwrap_or_default(),
        )),
        By::Upstream | By::Host => {}
    }
    let ms = |v: f64| Cell::new(&format!("{v:.1}"));
    cells.extend([
        Cell::new(&g.calls.to_string()),
        Cell::new(&g.errors.to_string()),
        Cell::new(&format!("{:.1}", g.error_rate * 100.0)),
        ms(g.p50_ms),
        ms(g.p95_ms),
        ms(g.p99_ms),
        ms(g.total_ms),
    ]);
    cells
}
