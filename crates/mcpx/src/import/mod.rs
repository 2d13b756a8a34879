//! `mcpx import`: a host's MCP servers moved into mcpx's file, and with `--write` the
//! host's file rewritten to start `mcpx serve` instead (a backup kept, `--undo`
//! restoring it).
//!
//! `hosts.rs` knows where each host keeps its file and which format it has;
//! `entries.rs` turns one host's entry into mcpx's (or says why it stays); `jsonc.rs`
//! edits a JSON-with-comments text by spans, `codex.rs` a TOML one in place. This file
//! plans the merge, writes, and reports.

mod codex;
mod entries;
mod hosts;
mod jsonc;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;

use entries::{Carry, Entry};
use hosts::{Env, Format, Host, Source};
use jsonc::{Doc, SyntaxError};

/// Arguments of `mcpx import`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The host to import from: claude-desktop, claude-code, cursor, vscode, windsurf,
    /// zed, gemini or codex; or a host's file, whose format is found from its content
    /// and name. Without it, list the hosts whose files are found, and import nothing.
    #[arg(value_name = "HOST|FILE")]
    source: Option<String>,
    /// mcpx's file to merge into (created when missing). Default: `$MCPX_CONFIG`, else
    /// `~/.config/mcpx/config.json`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Also rewrite the host's file: the servers that moved give way to one entry,
    /// `mcpx`, that runs `mcpx serve --config` with mcpx's file. The file as it was is
    /// kept beside it as `<file>.mcpx-backup`.
    #[arg(long, requires = "source")]
    write: bool,
    /// With `--write`: the entry runs `mcpx serve --attach`, so the host shares the
    /// daemon's upstreams (`mcpx daemon`) instead of starting its own.
    #[arg(long, requires = "write")]
    attach: bool,
    /// Say what would be done, and write nothing.
    #[arg(long, requires = "source")]
    dry_run: bool,
    /// Put back the host's files that `--write` rewrote, from their backups.
    #[arg(long, requires = "source", conflicts_with_all = ["write", "dry_run", "config"])]
    undo: bool,
}

/// Why `mcpx import` did not do what was asked.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error(
        "{name:?} is neither a host nor a file; the hosts are {}",
        Host::ALL.map(Host::name).join(", ")
    )]
    Unknown { name: String },
    #[error("no configuration of {host} found; looked for {}", list(.looked))]
    NoFile {
        host: &'static str,
        looked: Vec<PathBuf>,
    },
    #[error("{}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{}:{}: {}", .path.display(), .error.line, .error.column, .error.message)]
    Syntax { path: PathBuf, error: SyntaxError },
    #[error("{}: {message}", .path.display())]
    Shape { path: PathBuf, message: String },
    #[error(transparent)]
    Config(#[from] mcpx_gateway::config::ConfigError),
    #[error("{} is mcpx's own file; import from another host's file", .0.display())]
    SameFile(PathBuf),
    #[error(
        "{} already has a backup, {}, from an earlier --write; run `mcpx import --undo` \
         first, or remove the backup",
        .file.display(), .backup.display()
    )]
    BackupExists { file: PathBuf, backup: PathBuf },
    #[error("no backup to restore; looked for {}", list(.looked))]
    NoBackup { looked: Vec<PathBuf> },
    #[error("{}: the edit would have changed more than the servers; the file is left as it is ({why})", .path.display())]
    Edit { path: PathBuf, why: String },
    #[error("cannot find mcpx's own executable: {0}")]
    Exe(std::io::Error),
    #[error("$HOME is not set, so mcpx's file cannot be found; give it with --config")]
    NoHome,
}

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `mcpx import`.
pub(crate) fn run(args: &Args) -> ExitCode {
    let env = Env::from_process();
    let mut out = String::new();
    let result = match (&args.source, args.undo) {
        (None, _) => {
            survey(&env, &mut out);
            Ok(())
        }
        (Some(source), true) => undo(source, &env, &mut out),
        (Some(source), false) => import(args, source, &env, &mut out),
    };
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpx import: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A host's file, read: its text, its value and its server tables.
struct HostFile {
    source: Source,
    doc: Text,
    value: Value,
    tables: Vec<Table>,
}

enum Text {
    Json(Doc),
    Toml(String),
}

/// One object of servers in a host's file, and what becomes of each.
struct Table {
    path: Vec<String>,
    servers: Vec<(String, Carry)>,
}

/// What HOST|FILE names.
enum Named {
    Host(Host),
    File(PathBuf),
}

fn named(source: &str) -> Result<Named, Error> {
    if let Some(h) = Host::from_name(source) {
        return Ok(Named::Host(h));
    }
    let path = PathBuf::from(source);
    if path.exists() || source.contains('/') || source.contains('.') {
        return Ok(Named::File(path));
    }
    Err(Error::Unknown {
        name: source.to_owned(),
    })
}

/// Reads a host's file; `None` when there is none.
fn read_source(source: &Source, env: &Env) -> Result<Option<HostFile>, Error> {
    let text = match std::fs::read_to_string(&source.file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Error::Read {
                path: source.file.clone(),
                source: e,
            });
        }
    };
    let syntax = |error| Error::Syntax {
        path: source.file.clone(),
        error,
    };
    let (doc, value) = if source.format == Format::Codex {
        let value = codex::parse(&text).map_err(syntax)?;
        (Text::Toml(text), value)
    } else {
        let doc = Doc::parse(&text).map_err(syntax)?;
        let value = doc.value.clone();
        (Text::Json(doc), value)
    };
    let inputs = source.format.inputs(&value);
    let mut tables = Vec::new();
    for path in source.format.tables(&value, &env.cwd) {
        let Some(v) = at(&value, &path) else { continue };
        let Some(obj) = v.as_object() else {
            return Err(Error::Shape {
                path: source.file.clone(),
                message: format!("`{}` is not an object", path.join(".")),
            });
        };
        let servers = obj
            .iter()
            .map(|(name, entry)| (name.clone(), entries::convert(source.format, entry, inputs)))
            .collect();
        tables.push(Table { path, servers });
    }
    Ok(Some(HostFile {
        source: source.clone(),
        doc,
        value,
        tables,
    }))
}

/// The host's files that exist, read.
fn read_named(named: &Named, env: &Env) -> Result<Vec<HostFile>, Error> {
    match named {
        Named::Host(host) => {
            let sources = host.sources(env);
            let mut files = Vec::new();
            for s in &sources {
                files.extend(read_source(s, env)?);
            }
            if files.is_empty() {
                return Err(Error::NoFile {
                    host: host.name(),
                    looked: sources.into_iter().map(|s| s.file).collect(),
                });
            }
            Ok(files)
        }
        Named::File(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| Error::Read {
                path: path.clone(),
                source: e,
            })?;
            let value = if path.extension().is_some_and(|e| e == "toml") {
                None
            } else {
                Some(Doc::parse(&text).map_err(|error| Error::Syntax {
                    path: path.clone(),
                    error,
                })?)
            };
            let format =
                Format::detect(path, value.as_ref().map(|d| &d.value)).ok_or_else(|| {
                    Error::Shape {
                        path: path.clone(),
                        message: "no servers to import: it has no `mcpServers`, `servers`, \
                              `mcp.servers`, `context_servers` or (TOML) `mcp_servers`"
                            .to_owned(),
                    }
                })?;
            let source = Source {
                file: path.clone(),
                format,
            };
            read_source(&source, env)?
                .ok_or_else(|| Error::Read {
                    path: path.clone(),
                    source: std::io::ErrorKind::NotFound.into(),
                })
                .map(|f| vec![f])
        }
    }
}

fn at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

fn set(v: &mut Value, path: &[String], new: Value) {
    let mut cur = v;
    for k in path {
        match cur.get_mut(k) {
            Some(next) => cur = next,
            None => return,
        }
    }
    *cur = new;
}

/// `mcpx import` without HOST|FILE: which hosts have files, and their servers.
fn survey(env: &Env, out: &mut String) {
    let mut found = 0;
    for host in Host::ALL {
        for s in host.sources(env) {
            match read_source(&s, env) {
                Ok(None) => {}
                Ok(Some(f)) => {
                    found += 1;
                    let names: Vec<&str> = f
                        .tables
                        .iter()
                        .flat_map(|t| t.servers.iter().map(|(n, _)| n.as_str()))
                        .collect();
                    let _ = writeln!(
                        out,
                        "{}: {}: {}",
                        host.name(),
                        s.file.display(),
                        match names.len() {
                            0 => "no servers".to_owned(),
                            1 => format!("1 server ({})", names[0]),
                            n => format!("{n} servers ({})", names.join(", ")),
                        }
                    );
                }
                Err(e) => {
                    found += 1;
                    let _ = writeln!(out, "{}: {e}", host.name());
                }
            }
        }
    }
    if found == 0 {
        let _ = writeln!(out, "No host's MCP configuration was found.");
    } else {
        let _ = writeln!(
            out,
            "\n`mcpx import HOST` moves a host's servers into mcpx's file; \
             `--dry-run` shows what it would do."
        );
    }
}

/// What becomes of one server in mcpx's file.
enum Outcome {
    Added,
    Renamed(String),
    Same(String),
    Stays(String),
    Ours,
}

/// mcpx's file: where, its text when it exists, and its servers.
struct Target {
    path: PathBuf,
    doc: Option<Doc>,
    servers: BTreeMap<String, Value>,
}

fn target(args: &Args, env: &Env) -> Result<Target, Error> {
    let path = match (&args.config, std::env::var_os("MCPX_CONFIG")) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) if !p.is_empty() => PathBuf::from(p),
        _ => env
            .home
            .as_ref()
            .ok_or(Error::NoHome)?
            .join(".config/mcpx/config.json"),
    };
    let path = if path.is_absolute() {
        path
    } else {
        env.cwd.join(path)
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::Read { path, source: e }),
    };
    let Some(text) = text else {
        return Ok(Target {
            path,
            doc: None,
            servers: BTreeMap::new(),
        });
    };
    // A file mcpx refuses is not touched: the error says why, as `mcpx serve` would.
    mcpx_gateway::config::parse(&text, &path)?;
    let doc = Doc::parse(&text).map_err(|error| Error::Syntax {
        path: path.clone(),
        error,
    })?;
    let servers = doc
        .value
        .get("mcpServers")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    Ok(Target {
        path,
        doc: Some(doc),
        servers,
    })
}

/// What makes two entries the same server: the transport and its settings.
fn definition(v: &Value) -> Value {
    let get = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    let or = |k: &str, d: Value| v.get(k).cloned().unwrap_or(d);
    let kind = match (v.get("type").and_then(Value::as_str), v.get("command")) {
        (Some("streamable-http" | "streamableHttp"), _) => "http",
        (Some(t), _) => t,
        (None, Some(_)) => "stdio",
        (None, None) => "http",
    };
    serde_json::json!({
        "type": kind,
        "command": get("command"),
        "args": or("args", serde_json::json!([])),
        "env": or("env", serde_json::json!({})),
        "cwd": get("cwd"),
        "url": get("url"),
        "headers": or("headers", serde_json::json!({})),
    })
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

fn import(args: &Args, source: &str, env: &Env, out: &mut String) -> Result<(), Error> {
    let named = named(source)?;
    let target = target(args, env)?;
    let files = read_named(&named, env)?;
    for f in &files {
        if same_file(&f.source.file, &target.path) {
            return Err(Error::SameFile(target.path.clone()));
        }
    }
    if args.dry_run {
        let _ = writeln!(out, "Dry run: nothing is written.\n");
    }

    // The plan: each server's outcome, in the files' and tables' order.
    let mut taken = target.servers.clone();
    let mut added: Vec<(String, Entry)> = Vec::new();
    let mut outcomes: Vec<Vec<Vec<Outcome>>> = Vec::new();
    for f in &files {
        let host = f.source.format.host().name();
        let mut per_table = Vec::new();
        for t in &f.tables {
            let mut per_server = Vec::new();
            for (name, carry) in &t.servers {
                let outcome = match carry {
                    Carry::Stays(why) => Outcome::Stays(why.clone()),
                    Carry::Ours => Outcome::Ours,
                    Carry::Entry { entry, .. } => {
                        let def = definition(&entry.value());
                        let same = taken
                            .get(name)
                            .filter(|v| definition(v) == def)
                            .map(|_| name.clone())
                            .or_else(|| {
                                taken
                                    .iter()
                                    .find(|(_, v)| definition(v) == def)
                                    .map(|(n, _)| n.clone())
                            });
                        match same {
                            Some(n) => Outcome::Same(n),
                            None => {
                                let new = free_name(name, host, &taken);
                                taken.insert(new.clone(), entry.value());
                                added.push((new.clone(), entry.clone()));
                                if new == *name {
                                    Outcome::Added
                                } else {
                                    Outcome::Renamed(new)
                                }
                            }
                        }
                    }
                };
                per_server.push(outcome);
            }
            per_table.push(per_server);
        }
        outcomes.push(per_table);
    }

    // mcpx's file with the new servers, checked before anything is written.
    let merged = if added.is_empty() {
        None
    } else {
        Some(merged_text(&target, &added)?)
    };

    // The hosts' files, rewritten.
    let mut rewrites: Vec<(PathBuf, String, String, PathBuf)> = Vec::new();
    if args.write {
        let exe = std::env::current_exe()
            .and_then(|e| e.canonicalize())
            .map_err(Error::Exe)?;
        let mut launch_args = vec!["serve".to_owned()];
        if args.attach {
            launch_args.push("--attach".to_owned());
        }
        launch_args.push("--config".to_owned());
        launch_args.push(target.path.display().to_string());
        for (f, per_table) in files.iter().zip(&outcomes) {
            let moved = per_table
                .iter()
                .flatten()
                .any(|o| matches!(o, Outcome::Added | Outcome::Renamed(_) | Outcome::Same(_)));
            if !moved {
                continue;
            }
            let real = f
                .source
                .file
                .canonicalize()
                .unwrap_or_else(|_| f.source.file.clone());
            let backup = backup_path(&real);
            if backup.exists() {
                return Err(Error::BackupExists {
                    file: f.source.file.clone(),
                    backup,
                });
            }
            let (text, name) = rewritten(f, per_table, &exe, &launch_args)?;
            rewrites.push((f.source.file.clone(), text, name, backup));
        }
    }

    // The report.
    for (f, per_table) in files.iter().zip(&outcomes) {
        let host = f.source.format.host().name();
        for (i, (t, per_server)) in f.tables.iter().zip(per_table).enumerate() {
            let where_ = if i == 0 && t.path.len() == 1 {
                String::new()
            } else {
                format!(" ({})", t.path.join(" > "))
            };
            let _ = writeln!(
                out,
                "{host}: {}{where_}: {}",
                f.source.file.display(),
                match t.servers.len() {
                    0 => "no servers".to_owned(),
                    1 => "1 server".to_owned(),
                    n => format!("{n} servers"),
                }
            );
            for ((name, carry), outcome) in t.servers.iter().zip(per_server) {
                let said = match outcome {
                    Outcome::Added => "added".to_owned(),
                    Outcome::Renamed(new) => {
                        format!("added as {new} (mcpx's file has a different {name})")
                    }
                    Outcome::Same(n) if n == name => "already in mcpx's file".to_owned(),
                    Outcome::Same(n) => format!("already in mcpx's file, as {n}"),
                    Outcome::Stays(why) => format!("stays in {host}'s file: {why}"),
                    Outcome::Ours => "not imported: it starts mcpx itself".to_owned(),
                };
                let _ = writeln!(out, "  {name}: {said}");
                if let Carry::Entry { lost, .. } = carry
                    && !matches!(outcome, Outcome::Stays(_))
                {
                    for l in lost {
                        let _ = writeln!(out, "    not carried: {l}");
                    }
                }
            }
        }
    }
    let _ = writeln!(out);
    let n = added.len();
    let servers = if n == 1 { "server" } else { "servers" };
    match (&merged, args.dry_run) {
        (None, _) => {
            let _ = writeln!(
                out,
                "mcpx's file {}: nothing to add.",
                target.path.display()
            );
        }
        (Some(_), true) => {
            let _ = writeln!(out, "Would add {n} {servers} to {}.", target.path.display());
        }
        (Some(text), false) => {
            write_atomic(&target.path, text).map_err(|e| Error::Read {
                path: target.path.clone(),
                source: e,
            })?;
            let _ = writeln!(out, "Added {n} {servers} to {}.", target.path.display());
        }
    }
    if !args.write {
        let _ = writeln!(
            out,
            "The host's files are unchanged; `mcpx import {source} --write` also makes {} start mcpx instead.",
            if files.len() == 1 { "it" } else { "them" },
        );
    }
    for (file, text, name, backup) in &rewrites {
        if args.dry_run {
            let _ = writeln!(
                out,
                "Would rewrite {} to start mcpx (its entry `{name}`), keeping it as {}.",
                file.display(),
                backup.display()
            );
            continue;
        }
        backup_then_write(file, text, backup).map_err(|e| Error::Read {
            path: file.clone(),
            source: e,
        })?;
        let _ = writeln!(
            out,
            "Rewrote {}: its entry `{name}` starts mcpx; the file as it was is {}, \
             which `mcpx import --undo {source}` puts back.",
            file.display(),
            backup.display()
        );
    }
    if args.write && rewrites.is_empty() {
        let _ = writeln!(
            out,
            "No host's file rewritten: none of its servers moved to mcpx."
        );
    }
    Ok(())
}

/// `name`, else `name-<host>`, else `name-<host>-2`, … : the first mcpx's file lacks.
fn free_name(name: &str, host: &str, taken: &BTreeMap<String, Value>) -> String {
    if !taken.contains_key(name) {
        return name.to_owned();
    }
    let base = format!("{name}-{host}");
    let mut candidate = base.clone();
    let mut n = 2;
    while taken.contains_key(&candidate) {
        candidate = format!("{base}-{n}");
        n += 1;
    }
    candidate
}

/// mcpx's file with `added` in its `mcpServers`, checked: mcpx accepts it, and it
/// differs from the file only by those servers.
fn merged_text(target: &Target, added: &[(String, Entry)]) -> Result<String, Error> {
    let parts: Vec<String> = added
        .iter()
        .map(|(n, e)| jsonc::ordered_member(n, &e.0))
        .collect();
    let empty;
    let doc = match &target.doc {
        Some(d) => d,
        None => {
            empty = Doc::parse("{\n  \"mcpServers\": {}\n}\n").map_err(|error| Error::Syntax {
                path: target.path.clone(),
                error,
            })?;
            &empty
        }
    };
    let edit_err = |why: &str| Error::Edit {
        path: target.path.clone(),
        why: why.to_owned(),
    };
    let text = match doc.object(&["mcpServers"]) {
        Some(obj) => doc.add_members(&obj, &parts),
        None => {
            let root = doc
                .object(&[])
                .ok_or_else(|| edit_err("its root is not an object"))?;
            let inner = parts.join(",\n").replace('\n', "\n  ");
            let member = format!("\"mcpServers\": {{\n  {inner}\n}}");
            doc.add_members(&root, &[member])
        }
    };
    let mut expected = doc.value.clone();
    if let Some(root) = expected.as_object_mut() {
        let servers = root
            .entry("mcpServers")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(servers) = servers.as_object_mut() {
            for (n, e) in added {
                servers.insert(n.clone(), e.value());
            }
        }
    }
    let got = Doc::parse(&text).map_err(|e| edit_err(&e.message))?;
    if got.value != expected {
        return Err(edit_err("the merged file did not read back as expected"));
    }
    mcpx_gateway::config::parse(&text, &target.path)?;
    Ok(text)
}

/// The host's entry that starts mcpx, in the host's own shape.
fn launch(f: &HostFile, table: &Value, exe: &Path, args: &[String]) -> Vec<(&'static str, Value)> {
    let exe = Value::String(exe.display().to_string());
    let args = serde_json::json!(args);
    let entries: Vec<&Value> = table
        .as_object()
        .map(|m| m.values().collect())
        .unwrap_or_default();
    match f.source.format {
        Format::VsCodeMcp | Format::VsCodeSettings | Format::ClaudeUser => {
            vec![("type", "stdio".into()), ("command", exe), ("args", args)]
        }
        Format::McpServers(Host::ClaudeCode) => {
            vec![("type", "stdio".into()), ("command", exe), ("args", args)]
        }
        Format::Zed
            if entries
                .iter()
                .any(|e| e.get("command").is_some_and(Value::is_object)) =>
        {
            vec![("command", serde_json::json!({"path": exe, "args": args}))]
        }
        Format::Zed if entries.iter().any(|e| e.get("source").is_some()) => {
            vec![
                ("source", "custom".into()),
                ("command", exe),
                ("args", args),
            ]
        }
        _ => vec![("command", exe), ("args", args)],
    }
}

/// The host's file with the servers that moved (and any earlier entry of mcpx's)
/// replaced by one entry that starts mcpx, checked to differ only there; and the
/// entry's name.
fn rewritten(
    f: &HostFile,
    outcomes: &[Vec<Outcome>],
    exe: &Path,
    args: &[String],
) -> Result<(String, String), Error> {
    let edit_err = |why: String| Error::Edit {
        path: f.source.file.clone(),
        why,
    };
    let goes = |o: &Outcome| !matches!(o, Outcome::Stays(_));
    let moved = |o: &Outcome| matches!(o, Outcome::Added | Outcome::Renamed(_) | Outcome::Same(_));
    // The first table that servers moved from gets the entry.
    let first = outcomes
        .iter()
        .position(|t| t.iter().any(moved))
        .unwrap_or(0);
    let stays_names: Vec<&str> = f.tables[first]
        .servers
        .iter()
        .zip(&outcomes[first])
        .filter(|(_, o)| !goes(o))
        .map(|(s, _)| s.0.as_str())
        .collect();
    let mut name = "mcpx".to_owned();
    let mut n = 2;
    while stays_names.contains(&name.as_str()) {
        name = format!("mcpx-{n}");
        n += 1;
    }
    let mut expected = f.value.clone();
    let mut launch_entry = Vec::new();
    let mut edits: Vec<(usize, Vec<String>)> = Vec::new();
    for (i, (t, per_server)) in f.tables.iter().zip(outcomes).enumerate() {
        if !per_server.iter().any(moved) {
            continue;
        }
        let gone: Vec<&str> = t
            .servers
            .iter()
            .zip(per_server)
            .filter(|(_, o)| goes(o))
            .map(|(s, _)| s.0.as_str())
            .collect();
        let table_value = at(&f.value, &t.path).cloned().unwrap_or(Value::Null);
        let mut new_table = table_value.clone();
        if let Some(m) = new_table.as_object_mut() {
            m.retain(|k, _| !gone.contains(&k.as_str()));
            if i == first {
                launch_entry = launch(f, &table_value, exe, args);
                m.insert(name.clone(), Entry(launch_entry.clone()).value());
            }
        }
        set(&mut expected, &t.path, new_table);
        edits.push((i, gone.iter().map(|s| (*s).to_owned()).collect()));
    }
    let text = match &f.doc {
        Text::Toml(text) => {
            let gone: Vec<&str> = edits
                .iter()
                .flat_map(|(_, g)| g.iter().map(String::as_str))
                .collect();
            let new = codex::rewrite(text, &gone, &name, &launch_entry)
                .map_err(|e| edit_err(e.to_string()))?;
            let got = codex::parse(&new).map_err(|e| edit_err(e.message))?;
            if got != expected {
                return Err(edit_err(
                    "the rewritten file did not read back as expected".into(),
                ));
            }
            new
        }
        Text::Json(doc) => {
            let mut spans = Vec::new();
            for (i, gone) in &edits {
                let t = &f.tables[*i];
                let keys: Vec<&str> = t.path.iter().map(String::as_str).collect();
                let obj = doc
                    .object(&keys)
                    .ok_or_else(|| edit_err(format!("`{}` was not found", t.path.join("."))))?;
                let kept: Vec<&str> = obj
                    .members
                    .iter()
                    .filter(|m| !gone.contains(&m.key))
                    .map(|m| doc.member_text(m))
                    .collect();
                let mut parts = Vec::new();
                if *i == first {
                    parts.push(jsonc::ordered_member(&name, &launch_entry));
                }
                spans.push((
                    obj.open..obj.close + 1,
                    doc.object_text(&obj, &kept, &parts),
                ));
            }
            spans.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
            let mut new = doc.text.clone();
            for (range, body) in spans {
                new.replace_range(range, &body);
            }
            let got = Doc::parse(&new).map_err(|e| edit_err(e.message))?;
            if got.value != expected {
                return Err(edit_err(
                    "the rewritten file did not read back as expected".into(),
                ));
            }
            new
        }
    };
    Ok((text, name))
}

fn backup_path(real: &Path) -> PathBuf {
    let mut name = real.as_os_str().to_owned();
    name.push(".mcpx-backup");
    PathBuf::from(name)
}

/// Writes `text` to `path` through a temporary file and a rename, so a reader sees the
/// old file or the new one, never a part. An existing file keeps its permissions (and
/// a symbolic link stays one: the file it points at is replaced); a new one is 0600,
/// as it may hold the servers' secrets.
fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let real = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    let dir = real.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mode = std::fs::metadata(&real).map_or(0o600, |m| m.permissions().mode() & 0o7777);
    let name = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.mcpx-{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
        std::fs::rename(&tmp, &real)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Keeps the host's file as `backup` (byte for byte, with its permissions), then
/// writes `text` in its place.
fn backup_then_write(file: &Path, text: &str, backup: &Path) -> std::io::Result<()> {
    let real = file.canonicalize()?;
    let old = std::fs::read(&real)?;
    let mode = std::fs::metadata(&real)?.permissions().mode() & 0o7777;
    let mut b = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(backup)?;
    b.write_all(&old)?;
    b.sync_all()?;
    write_atomic(&real, text)
}

/// `mcpx import --undo HOST|FILE`: each of the host's files that has a backup gets it
/// back.
fn undo(source: &str, env: &Env, out: &mut String) -> Result<(), Error> {
    let files: Vec<PathBuf> = match named(source)? {
        Named::Host(h) => h.sources(env).into_iter().map(|s| s.file).collect(),
        Named::File(p) => vec![p],
    };
    let mut looked = Vec::new();
    let mut restored = 0;
    for file in files {
        let real = file.canonicalize().unwrap_or_else(|_| file.clone());
        let backup = backup_path(&real);
        if !backup.exists() {
            looked.push(backup);
            continue;
        }
        std::fs::rename(&backup, &real).map_err(|e| Error::Read {
            path: backup.clone(),
            source: e,
        })?;
        restored += 1;
        let _ = writeln!(
            out,
            "Restored {} from {}.",
            file.display(),
            backup.display()
        );
    }
    if restored == 0 {
        return Err(Error::NoBackup { looked });
    }
    let _ = writeln!(
        out,
        "mcpx's file keeps the servers imported from it; remove them there if they should go."
    );
    Ok(())
}
