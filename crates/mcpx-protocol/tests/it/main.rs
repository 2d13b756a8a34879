//! The protocol core's tests, one test binary: each module was a test file of its own.
//! The property tests keep their regressions beside them (`*.proptest-regressions`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Shared by the property tests.
mod common;

mod batch;
mod classify;
mod codec_props;
mod lower;
mod method_table;
mod params_props;
mod roundtrip;
mod scan_props;
mod spec_policy;
