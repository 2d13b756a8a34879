//! `mcpx conformance`: prints the dispositions registry and its counts by status.

use std::io::Write;
use std::process::ExitCode;

use mcpx_protocol::dispositions::{self, Disposition, Status};

/// Arguments of `mcpx conformance`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Print JSON (`{"items": [...], "counts": {...}}`) for machines.
    #[arg(long)]
    json: bool,
    /// Only items with this status.
    #[arg(long, value_parser = ["done", "planned"])]
    status: Option<String>,
    /// Print each item's behaviour, tests and spec note in full.
    #[arg(long, short)]
    verbose: bool,
}

pub(crate) fn run(args: &Args) -> ExitCode {
    let items = match dispositions::registry() {
        Ok(items) => items,
        Err(e) => {
            eprintln!("mcpx: {e}");
            return ExitCode::FAILURE;
        }
    };
    let shown: Vec<&Disposition> = items
        .iter()
        .filter(|d| {
            args.status
                .as_deref()
                .is_none_or(|s| d.status.as_str() == s)
        })
        .collect();
    let counts = dispositions::counts(&items);
    let out = if args.json {
        render_json(&shown, &counts)
    } else {
        render_table(&shown, &counts, args.verbose)
    };
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`mcpx conformance | head`) is not an error worth reporting.
    let _ = stdout.write_all(out.as_bytes());
    ExitCode::SUCCESS
}

fn render_json(items: &[&Disposition], counts: &[(Status, usize)]) -> String {
    let counts: serde_json::Map<String, serde_json::Value> = counts
        .iter()
        .map(|(s, n)| (s.as_str().to_owned(), (*n).into()))
        .collect();
    let doc = serde_json::json!({ "items": items, "counts": counts });
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

fn render_table(items: &[&Disposition], counts: &[(Status, usize)], verbose: bool) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<6} {:<8} {:<19} {:<44} BEHAVIOUR",
        "ID", "STATUS", "KIND", "SITE"
    );
    for d in items {
        let behaviour = if verbose {
            d.behaviour.trim().to_owned()
        } else {
            one_line(&d.behaviour, 90)
        };
        let _ = writeln!(
            s,
            "{:<6} {:<8} {:<19} {:<44} {}",
            d.id,
            d.status.as_str(),
            d.kind.as_str(),
            d.site,
            behaviour
        );
        if verbose {
            for t in &d.tests {
                let _ = writeln!(s, "{:>8} test: {t}", "");
            }
            if let Some(spec) = &d.spec {
                let _ = writeln!(s, "{:>8} spec: {}", "", one_line(spec, 400));
            }
        }
    }
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    let by: Vec<String> = counts
        .iter()
        .map(|(st, n)| format!("{n} {}", st.as_str()))
        .collect();
    let _ = writeln!(s, "\n{total} items: {}", by.join(", "));
    s
}
