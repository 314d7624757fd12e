//! The `agent-exec` binary's integration tests, one binary (ripgrep's habit): `call`, the
//! grants, `check run_command`, the disk bounds and signals, and `mcp` with a real MCP client,
//! each through the built binary.

// Fixture helpers outside `#[test]` fns unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod check;
mod cli;
mod descriptors;
mod disk;
mod disk_space;
mod mcp;
mod mcp_background;
mod mcp_wire;
mod run_command;
mod tty;
mod util;
mod writeback_kill;
