//! Cross-crate integration tests (being built): end-to-end tool calls through `host-shim` and the
//! escape suite, which tries to leave the sandbox the way an agent would. Today it holds no test;
//! the escape suite arrives with the first tool that runs a process.
