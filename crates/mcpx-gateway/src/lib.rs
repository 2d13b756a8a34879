//! The gateway: many upstream MCP servers presented to a host as one.
//!
//! # Layout
//!
//! * [`app`]: configuration → gateway → serve seam, with reload, status and
//!   shutdown: what `mcpx serve` runs.
//! * [`catalog`]: the merged catalog, built from each upstream's last known lists by a
//!   pure function, and the routes back from a host's name or URI to an upstream.
//! * [`config`]: the `mcpServers` configuration (JSONC) with mcpx's own blocks, and
//!   where it is found.
//! * [`error`]: the gateway's typed errors, and the one place they become a host's
//!   JSON-RPC error.
//! * [`gateway`]: the upstreams, the merged catalog, routing and relays: the
//!   [`mcpx_server::Backend`] behind the serve seam.
//! * [`id`]: an upstream's stable identity, its server name.
//! * [`naming`]: how upstream names become the names a host sees, and back.
//! * [`reload`]: what a new configuration changes, by server name.
//! * [`upstream`]: one upstream and the supervisor that owns its lifecycle.
//! * [`watch`]: a watch on the configuration file that reports, debounced, that it
//!   may have changed.
#![forbid(unsafe_code)]

pub mod app;
pub mod catalog;
pub mod config;
pub mod error;
pub mod gateway;
pub mod id;
pub mod naming;
pub mod reload;
pub mod upstream;
pub mod watch;
