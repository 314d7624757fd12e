//! The `command` tool (not implemented yet).
//!
//! Will own: `/bin/sh -c` in the work scope, `extraPaths` with per-call approval, the hard-link
//! pre-scan, lease checks while running, and `status` / `truncated` / `partialExecution` /
//! `descendantsStopped`. SPEC: CMD-1…CMD-13.
//!
//! Will refuse to know: other tools, the host, accounts.
