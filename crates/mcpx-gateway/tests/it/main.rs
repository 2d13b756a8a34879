//! The gateway's in-process tests: one binary, every module a behaviour.
//!
//! No process is started: each upstream is an example server (`mcpx-example-server`)
//! in this process, served by the stdio listener over `tokio::io::duplex` and reached
//! by the gateway's ordinary stdio client ([`harness::InMemory`], the app's
//! connector), and the host calls the serve seam directly ([`harness::Host`]), every
//! frame it sends and gets checked against its revision's schema by the tap. Time is
//! tokio's paused clock where it matters (`#[tokio::test(start_paused = true)]`): a
//! timeout of minutes passes at once, and nothing sleeps for real.
//!
//! To write one: configure the upstreams by name (the `command` is never run),
//! register what serves each name in an [`harness::InMemory`], start a
//! [`harness::Host`] and ask it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod harness;

mod ask_bounds;
mod asks;
mod availability;
mod bad_upstreams;
mod config;
mod config_doc;
mod config_file;
mod elicitation;
mod first_list;
mod history;
mod idle;
mod lists;
mod matrix;
mod probing;
mod restarts;
mod subscriptions;
mod tap;
mod tasks;
mod timeouts;
