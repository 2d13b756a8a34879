//! `mcpx`: the command-line entry point. A thin layer: it parses arguments and calls
//! into the library crates, which do the work.
#![forbid(unsafe_code)]

mod bench;
mod conformance;
mod example_server;
mod inspect;
mod runtime;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    /// Connect to every configured upstream and report its protocol era, revision,
    /// identity, capabilities and tools, or why it cannot be reached.
    Probe(inspect::Source),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve::run(&args),
        Command::Conformance(args) => conformance::run(&args),
        Command::ExampleServer(args) => example_server::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Tools(source) => inspect::tools(&source),
        Command::Call(named) => inspect::call(&named),
        Command::Read(read) => inspect::read(&read),
        Command::Prompt(named) => inspect::prompt(&named),
        Command::Probe(source) => inspect::probe(&source),
    }
}
