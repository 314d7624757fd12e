//! The `run_command` and `background_command` tools (not implemented yet).
//!
//! Will own: the argv schema, `sh -c` parsing and per-command validation, the denied list, the
//! read-only allowlist, sensitive paths, rm → trash, sudo, `network` / `write_paths` /
//! `sandbox: false`, watcher detection, masking, and background tasks with their monitor.
//! SPEC: RC-*, BG-*.
//!
//! Will refuse to know: the `run` and `command` tools, the host.
