//! host-shim's integration tests, one binary (ripgrep's habit): configuration table, persisted
//! grants, turns, file tools, and `agent-exec` end to end through the built binary (`call`, `mcp`
//! with a real MCP client, `check run_command`).

// Fixture helpers outside `#[test]` fns unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod check;
mod cli;
mod config;
mod disk;
mod files;
mod mcp;
mod mcp_wire;
mod outcome;
mod state;
mod turns;
mod util;
