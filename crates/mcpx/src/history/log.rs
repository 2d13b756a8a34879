//! `mcpx log`: the calls of the history, the latest 50 by default, oldest first. A
//! table (times in UTC) or, with `--json`, one `mcpx_history::Row` per line (NDJSON).
//! `--follow` goes on printing calls as they are written; `--purge` removes the calls
//! the filters pick instead of printing them.

use std::process::ExitCode;

use mcpx_history::{Filter, Row};

use super::table::{Align, Cell, Table, colour_on_stdout, shorten};
use super::{Common, Database, Error, print_json, say};

/// Arguments of `mcpx log`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Only calls that did not end with a result: tool errors, errors, timeouts,
    /// cancellations, transport failures.
    #[arg(long)]
    errors: bool,
    /// At most N calls: the latest (0: every call).
    #[arg(long, value_name = "N", default_value_t = 50, conflicts_with = "purge")]
    limit: usize,
    /// Go on printing calls as they are written, until Ctrl-C. With a daemon serving
    /// the configuration, the database is read when the daemon says it wrote calls,
    /// and every 5 s for other writers; otherwise (and with --db) every 500 ms.
    #[arg(long, conflicts_with = "purge")]
    follow: bool,
    /// Remove the calls the filters pick (with no filter, every call) and print how
    /// many were removed.
    #[arg(long)]
    purge: bool,
}

/// The table's columns.
const HEADS: [(&str, Align); 8] = [
    ("TIME (UTC)", Align::Left),
    ("UPSTREAM", Align::Left),
    ("TARGET", Align::Left),
    ("METHOD", Align::Left),
    ("HOST", Align::Left),
    ("OUTCOME", Align::Left),
    ("MS", Align::Right),
    ("ERROR", Align::Left),
];

/// The columns' widths while following, before any call is seen: calls that come
/// later line up with those printed first unless they are wider.
const FOLLOW_WIDTHS: [usize; 8] = [23, 12, 24, 14, 12, 10, 8, 0];

/// Most characters of an error's message in the table (`--json` has it whole).
const ERROR_CHARS: usize = 60;

/// Most characters of a tool's name or a resource's URI in the table.
const TARGET_CHARS: usize = 48;

/// `mcpx log`.
pub fn run(args: &Args) -> ExitCode {
    match log(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpx log: {e}");
            ExitCode::FAILURE
        }
    }
}

fn log(args: &Args) -> Result<(), Error> {
    let db = Database::of(&args.common)?;
    let mut filter = args.common.filter(mcpx_history::now_ms());
    filter.errors = args.errors;
    if args.purge {
        return purge(&db, &filter, args.common.json);
    }
    let mut out = Out::new(args.common.json, args.follow);
    let Some(store) = db.open()? else {
        db.say_missing();
        if args.follow {
            return super::follow::follow(&db, None, &filter, 0, &mut |rows| out.print(rows));
        }
        return Ok(());
    };
    // The last number before reading: a call written meanwhile is read when following.
    let before = store.last_id()?;
    let first = store.calls(&Filter {
        limit: (args.limit > 0).then_some(args.limit),
        ..filter.clone()
    })?;
    out.print(&first);
    if !args.common.json {
        if first.is_empty() && !args.follow {
            eprintln!("no calls match (database {})", db.path.display());
        } else if args.limit > 0 && first.len() == args.limit {
            let all = store.count(&filter)?;
            if all > first.len() as u64 {
                eprintln!(
                    "the latest {} of {all} calls (--limit N for more, 0 for all)",
                    first.len()
                );
            }
        }
    }
    if !args.follow {
        return Ok(());
    }
    let cursor = first.last().map_or(before, |r| r.id.max(before));
    super::follow::follow(&db, Some(store), &filter, cursor, &mut |rows| {
        out.print(rows);
    })
}

/// `mcpx log --purge`.
fn purge(db: &Database, filter: &Filter, json: bool) -> Result<(), Error> {
    let Some(mut store) = db.open()? else {
        db.say_missing();
        return Ok(());
    };
    let removed = store.purge(filter)?;
    if json {
        print_json(&serde_json::json!({ "removed": removed }));
    } else {
        let calls = if removed == 1 { "call" } else { "calls" };
        say!("removed {removed} {calls} from {}", db.path.display());
    }
    Ok(())
}

/// Where rows go: NDJSON, or the table (its header once, before the first row).
struct Out {
    json: bool,
    table: Option<Table>,
    follow: bool,
}

impl Out {
    fn new(json: bool, follow: bool) -> Out {
        Out {
            json,
            table: None,
            follow,
        }
    }

    fn print(&mut self, rows: &[Row]) {
        if self.json {
            for r in rows {
                print_json(r);
            }
            return;
        }
        let cells: Vec<Vec<Cell>> = rows.iter().map(cells).collect();
        let table = match &mut self.table {
            Some(t) => t,
            None => {
                if rows.is_empty() && !self.follow {
                    return;
                }
                let mut t = Table::new(&HEADS, colour_on_stdout());
                if self.follow {
                    t = t.at_least(&FOLLOW_WIDTHS);
                }
                t.fit(&cells);
                say!("{}", t.header());
                self.table.insert(t)
            }
        };
        for row in &cells {
            say!("{}", table.line(row));
        }
    }
}

/// A row's cells.
fn cells(r: &Row) -> Vec<Cell> {
    let c = &r.record;
    // `2026-01-02T03:04:05.678Z` as `2026-01-02 03:04:05.678`.
    let time = r.time.replacen('T', " ", 1);
    let time = time.strip_suffix('Z').unwrap_or(&time);
    #[allow(clippy::cast_precision_loss)]
    let ms = c.duration_us as f64 / 1000.0;
    let error = match (c.error_code, c.error_message.as_deref()) {
        (Some(code), Some(m)) => format!("{code} {}", crate::daemon::cli::one_line(m)),
        (Some(code), None) => code.to_string(),
        (None, Some(m)) => crate::daemon::cli::one_line(m),
        (None, None) => String::new(),
    };
    vec![
        Cell::new(time),
        Cell::opt(c.upstream.as_deref()),
        Cell::new(&shorten(c.target.as_deref().unwrap_or(""), TARGET_CHARS)),
        Cell::new(&c.method),
        Cell::opt(c.client_name.as_deref()),
        Cell::outcome(c.outcome),
        Cell::new(&format!("{ms:.1}")),
        Cell::new(&shorten(&error, ERROR_CHARS)),
    ]
}
