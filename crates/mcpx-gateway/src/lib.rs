//! The gateway: many upstream MCP servers presented to a host as one.
//!
//! # Layout
//!
//! * [`catalog`]: the merged catalog, built from each upstream's last known lists by a
//!   pure function, and the routes back from a host's name or URI to an upstream.
//! * [`config`]: the `mcpServers` configuration (JSONC) with mcpx's own blocks, and
//!   where it is found.
//! * [`gateway`]: the upstreams, the merged catalog, routing and relays: the
//!   [`mcpx_server::Backend`] behind the serve seam.
//! * [`id`]: an upstream's stable identity, its server name.
//! * [`naming`]: how upstream names become the names a host sees, and back.
//! * [`watch`]: a watch on the configuration file that reports, debounced, that it
//!   may have changed.
#![forbid(unsafe_code)]

pub mod catalog;
pub mod config;
pub mod gateway;
pub mod id;
pub mod naming;
pub mod watch;
