//! `mcpx conformance`: prints the dispositions registry and its counts by status, or
//! one register item whole (`mcpx conformance E-12`).

use std::io::Write;
use std::process::ExitCode;

use mcpx_protocol::dispositions::{self, Disposition, Registry, RegistryError, Status};

/// A registry that cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConformanceError {
    /// The built-in text is not a registry file.
    #[error("dispositions registry: {0}")]
    Decode(#[from] toml::de::Error),
    /// Its items break the registry's rules.
    #[error(transparent)]
    Check(#[from] RegistryError),
}

/// The registry built into this binary, decoded and checked.
pub(crate) fn registry() -> Result<Vec<Disposition>, ConformanceError> {
    let registry: Registry = toml::from_str(dispositions::REGISTRY_TOML)?;
    Ok(dispositions::check(registry)?)
}

/// Arguments of `mcpx conformance`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// One register item to print whole (`E-12`, `H1`): its title, area, kind, status,
    /// code site, behaviour, tests and spec note. Without it, every item, one a line.
    #[arg(value_name = "ID", conflicts_with = "status")]
    id: Option<String>,
    /// Print JSON (`{"items": [...], "counts": {...}}`) for machines.
    #[arg(long)]
    json: bool,
    /// Only items with this status.
    #[arg(long, value_parser = ["done", "planned"])]
    status: Option<String>,
    /// Print each item's title, behaviour, tests and spec note in full.
    #[arg(long, short)]
    verbose: bool,
}

pub(crate) fn run(args: &Args) -> ExitCode {
    let items = match registry() {
        Ok(items) => items,
        Err(e) => {
            eprintln!("mcpx: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(id) = &args.id {
        return run_one(&items, id, args.json);
    }
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

/// `mcpx conformance ID`: one item whole, or exit 1 naming the unknown id.
fn run_one(items: &[Disposition], id: &str, json: bool) -> ExitCode {
    let Some(d) = dispositions::find(items, id) else {
        eprintln!(
            "mcpx conformance: {id:?} is not a register id; `mcpx conformance` lists every id"
        );
        return ExitCode::FAILURE;
    };
    let out = if json {
        let mut s = serde_json::to_string_pretty(d).unwrap_or_default();
        s.push('\n');
        s
    } else {
        render_item(d)
    };
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(out.as_bytes());
    ExitCode::SUCCESS
}

/// The width `mcpx conformance ID` wraps prose to.
const WRAP: usize = 88;

/// One item whole: a heading, its fields, then its prose wrapped and indented.
fn render_item(d: &Disposition) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "{}: {}\n", d.id, d.title);
    for (field, value) in [
        ("area", d.area.as_str()),
        ("kind", d.kind.as_str()),
        ("status", d.status.as_str()),
        ("site", d.site.as_str()),
    ] {
        let _ = writeln!(s, "{field:<8} {value}");
    }
    let _ = writeln!(s, "\nbehaviour\n{}", indented(&d.behaviour));
    let _ = writeln!(s, "\ntests");
    if d.tests.is_empty() {
        let _ = writeln!(s, "  (none yet)");
    }
    for t in &d.tests {
        let _ = writeln!(s, "  {t}");
    }
    if let Some(spec) = &d.spec {
        let _ = writeln!(s, "\nspec\n{}", indented(spec));
    }
    s
}

/// `text`'s paragraphs, each wrapped to [`WRAP`] columns and indented by two spaces,
/// with a blank line between paragraphs.
fn indented(text: &str) -> String {
    let mut out = Vec::new();
    for paragraph in text.trim().split("\n\n") {
        if !out.is_empty() {
            out.push(String::new());
        }
        let mut line = String::from(" ");
        for word in paragraph.split_whitespace() {
            if line.len() > 1 && line.chars().count() + 1 + word.chars().count() > WRAP {
                out.push(std::mem::replace(&mut line, String::from(" ")));
            }
            line.push(' ');
            line.push_str(word);
        }
        out.push(line);
    }
    out.join("\n")
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
            let _ = writeln!(s, "{:>8} title: {}", "", d.title);
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
