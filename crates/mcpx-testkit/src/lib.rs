//! Test support shared by every mcpx crate's tests. Dev-only: no production code
//! depends on it.
//!
//! # Layout
//!
//! * [`scratch`]: test directories, swept once their process has exited.
//! * [`shared`]: finds `../shared` (the read-only spec, register and requirements).
//! * [`tap`]: the schema tap: validates any frame against a given revision's
//!   `schema.json`, compiled once per revision and definition.
#![forbid(unsafe_code)]

pub mod scratch;
pub mod shared;
pub mod tap;

pub use tap::{SchemaTap, TapError};
