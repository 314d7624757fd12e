//! host-shim's integration tests, one binary (ripgrep's habit): configuration table, persisted
//! grants, turns, one-call answers and file tools, through the library. The `agent-exec`
//! binary's own tests are in `crates/agent-exec/tests`.

// Fixture helpers outside `#[test]` fns unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod config;
mod files;
mod outcome;
mod state;
mod turns;
mod util;
