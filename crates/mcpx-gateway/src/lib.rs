//! The gateway: many upstream MCP servers presented to a host as one.
//!
//! # Layout
//!
//! * [`config`]: the `mcpServers` configuration (JSONC) with mcpx's own blocks, and
//!   where it is found.
//! * [`gateway`]: the upstreams, the merged catalog, routing and relays: the
//!   [`mcpx_server::Backend`] behind the serve seam.
//! * [`naming`]: how upstream names become the names a host sees, and back.
//! * [`watch`]: a watch on the configuration file that reports, debounced, that it
//!   may have changed.
#![forbid(unsafe_code)]

pub mod config;
pub mod gateway;
pub mod naming;
pub mod watch;
