//! The host facade (not implemented yet).
//!
//! Will own: accounts, plugins and their grants, agent configuration v2, workspaces (`mounted`
//! mirror, `direct`, `app-private`), turns (one `ToolScope` each; mirror finalize on success), the
//! `Approver` trait, the file tools, the tool registry, and the `agent-exec` binary (`call`,
//! `mcp`, `doctor`). SPEC: PERM-*, FILE-*, TS-*.
//!
//! Will refuse to know: how a sandbox is built (it asks the tools).
