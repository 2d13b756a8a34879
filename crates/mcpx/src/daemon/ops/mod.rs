//! The `/v1` operations' handlers, by concern.

pub mod attach;
pub mod control;
pub mod events;
pub mod history;
pub mod info;
pub mod mcp;
pub mod page;
