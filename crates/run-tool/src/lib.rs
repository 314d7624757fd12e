//! The `run` tool (not implemented yet).
//!
//! Will own: `AgentRunArguments` / `AgentRunOutput`, the argument whitelist for `awk`, `wc`, `sort`
//! and `diff`, the fixed program paths and the `run` sandbox spec. SPEC: RUN-1…RUN-15.
//!
//! Will refuse to know: other tools, the host, accounts.
