//! Cross-crate integration tests. The test files live in `tests/tests/`:
//!
//! - `escape.rs` — the escape suite: every way out of the sandbox an agent might try,
//!   run through `exec::run` with the `command` and `run` specs, each asserting that the attempt
//!   failed, that nothing outside changed, and that no process survived; plus liveness checks
//!   that ordinary work still runs. It runs as root and re-runs itself as an unprivileged user.
//! - `autorun.rs` — the file tools `write` and `edit` as a host calls them, refusing auto-run
//!   configuration and git metadata (TRUST-1, TRUST-2), each refusal beside the ordinary file
//!   next to it that is still written and edited.
//!
//! This library itself is empty on purpose: the suite uses only the crates' public APIs.
