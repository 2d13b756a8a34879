//! `mcpx`: the command-line entry point. A thin layer: it parses arguments and calls
//! into the library crates, which do the work.
#![forbid(unsafe_code)]

mod auth;
mod bench;
mod cli_doc;
mod conformance;
mod daemon;
mod example_server;
mod history;
mod import;
mod inspect;
mod runtime;
mod serve;

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// mcpx: one MCP server for your host, many upstream MCP servers behind it, any
/// protocol revision on either side.
#[derive(Debug, Parser)]
#[command(name = "mcpx", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the gateway: one MCP server for your host, fronting the upstream servers of
    /// your configuration (or, with --demo, the built-in example servers).
    Serve(serve::Args),
    /// Run one warm gateway for a configuration, on a Unix socket (and optionally
    /// TCP): the `/v1` API and MCP's `/mcp` and `/sse`. `mcpx tools`, `call`, … then
    /// ask it instead of starting a gateway each time.
    Daemon(daemon::Args),
    /// Show the dispositions registry: every item of the revision-conflict register,
    /// the behaviour mcpx chooses, where it is implemented and the tests that prove it.
    Conformance(conformance::Args),
    /// Run the reference MCP server (every feature of every revision) on stdio or HTTP,
    /// dual-era or strict to one revision.
    ExampleServer(example_server::Args),
    /// Load-test an MCP server (or the gateway in front of one): `tools/call` at N
    /// concurrent sessions, calls/s, latency p50/p99 and peak RSS.
    Bench(bench::Args),
    /// List the tools the gateway offers a host (it starts `mcpx serve` on the
    /// configuration and asks it).
    Tools(inspect::Source),
    /// Call one of the gateway's tools and print its result.
    Call(inspect::Named),
    /// Read one of the gateway's resources and print its contents.
    Read(inspect::Read),
    /// Get one of the gateway's prompts and print its messages.
    Prompt(inspect::Named),
    /// Log in to upstreams that need a user's OAuth authorization, log out, and show
    /// what is stored (never a token).
    Auth(auth::Args),
    /// Show the daemon serving the configuration (its log file and last reload) and
    /// each upstream's state, era, revision, pid, restarts and tools; and the file's
    /// parse error, when it has one.
    Status(daemon::cli::Target),
    /// Restart one upstream of the daemon serving the configuration.
    Restart(daemon::cli::Restart),
    /// Make the daemon serving the configuration read its file again.
    Reload(daemon::cli::Target),
    /// Stop the daemon serving the configuration (and every upstream it runs).
    Stop(daemon::cli::Target),
    /// Connect to every configured upstream and report its protocol era, revision,
    /// identity, capabilities and tools, or why it cannot be reached.
    Probe(inspect::Source),
    /// Show the calls hosts made through mcpx (the call history): a table (times in
    /// UTC), or NDJSON with --json; with --follow, new calls as they are made; with
    /// --purge, remove them.
    Log(history::log::Args),
    /// Sum up the call history by tool, upstream, host or error: calls, errors, error
    /// rate, p50/p95/p99 durations and total time.
    Stats(history::stats::Args),
    /// Move a host's MCP servers (Claude Desktop, Claude Code, Cursor, VS Code, Windsurf,
    /// Zed, Gemini CLI, Codex) into mcpx's file, and with --write make the host start
    /// mcpx instead.
    ///
    /// Each server is added to mcpx's file. One already there with the same command or
    /// URL is not added again; a different one of the same name is added as NAME-HOST.
    /// The report says what became of each server, and what of it mcpx cannot carry
    /// over. A server that would not work from mcpx's file stays in the host's: one
    /// whose values use the host's variables (VS Code's `${input:…}` prompts,
    /// `${workspaceFolder}`), one that reads an envFile, a Zed extension's.
    ///
    /// mcpx's file keeps its comments and other settings, and is replaced whole (a
    /// temporary file, then a rename). The host's file is not touched without --write.
    /// With it, the servers that moved give way to one entry, `mcpx`, that runs this
    /// executable as `serve --config FILE` (FILE: mcpx's file); the rest of the host's
    /// file stays as it was, and the old file is kept beside it, `.mcpx-backup` added to
    /// its name, for `--undo` to put back. Where each host's files are, and what is read
    /// from them: docs/config.md, "Importing a host's servers".
    Import(import::Args),
    /// Print a completion script for a shell, so the shell completes mcpx's commands
    /// and options.
    ///
    /// bash: `mcpx completion bash > ~/.local/share/bash-completion/completions/mcpx`.
    /// zsh: `mcpx completion zsh > ~/.zfunc/_mcpx`, with `fpath+=~/.zfunc` before
    /// `compinit` in ~/.zshrc. fish: `mcpx completion fish >
    /// ~/.config/fish/completions/mcpx.fish`. A new shell then completes mcpx.
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print documentation generated from mcpx's own definitions (for mcpx's
    /// developers).
    #[command(hide = true)]
    Docs {
        /// Which document.
        #[command(subcommand)]
        doc: Doc,
    },
}

/// The documents `mcpx docs` prints.
#[derive(Debug, Subcommand)]
enum Doc {
    /// docs/cli.md: every command, with its usage, arguments and options.
    Cli,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve::run(&args),
        Command::Daemon(args) => daemon::run(&args),
        Command::Conformance(args) => conformance::run(&args),
        Command::ExampleServer(args) => example_server::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Tools(source) => inspect::tools(&source),
        Command::Call(named) => inspect::call(&named),
        Command::Read(read) => inspect::read(&read),
        Command::Prompt(named) => inspect::prompt(&named),
        Command::Probe(source) => inspect::probe(&source),
        Command::Auth(args) => auth::run(&args),
        Command::Import(args) => import::run(&args),
        Command::Status(target) => daemon::cli::status(&target),
        Command::Restart(r) => daemon::cli::restart(&r),
        Command::Reload(target) => daemon::cli::reload(&target),
        Command::Stop(target) => daemon::cli::stop(&target),
        Command::Log(args) => history::log::run(&args),
        Command::Stats(args) => history::stats::run(&args),
        Command::Completion { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut completion_command(), "mcpx", &mut out);
            print_out(&out)
        }
        Command::Docs { doc: Doc::Cli } => print_out(cli_doc::markdown(&Cli::command()).as_bytes()),
    }
}

/// The command line as completions offer it: the hidden subcommands (`mcpx docs`) left
/// out, which clap_complete would otherwise offer.
fn completion_command() -> clap::Command {
    let full = Cli::command();
    let visible: Vec<clap::Command> = full
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .cloned()
        .collect();
    // The name and version as `#[command(name = "mcpx", version)]` gives them.
    clap::Command::new("mcpx")
        .version(env!("CARGO_PKG_VERSION"))
        .about(full.get_about().cloned().unwrap_or_default())
        .args(full.get_arguments().cloned())
        .subcommands(visible)
}

/// Writes `out` to stdout; a closed pipe (`mcpx completion bash | head`) is not an
/// error worth reporting.
fn print_out(out: &[u8]) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(out).and_then(|()| stdout.flush());
    ExitCode::SUCCESS
}
