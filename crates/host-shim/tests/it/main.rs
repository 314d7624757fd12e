//! host-shim's integration tests, one binary (ripgrep's habit): configuration table, persisted
//! grants, turns and one-call answers, through the library. The file tools are tested in
//! `crates/file-tools`, the `agent-exec` binary in `crates/agent-exec/tests`.

// Fixture helpers outside `#[test]` fns unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod background;
mod config;
mod grants;
mod outcome;
mod run_command;
mod state;
mod turns;
mod util;
