//! Integration tests of the gate, one binary (ripgrep's layout): dedup and budget
//! (TS-1, TS-2), authorization in flight (TS-3), account generations (CMD-12), and a property
//! test over random interleavings of all of them.

// Helpers outside `#[test]` fns are not covered by clippy.toml's test exemption; a panic in a test
// helper is a test failure with a backtrace, which is what we want (house rule 5).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod dedup_budget;
mod generations;
mod interleavings;
mod revocation;
