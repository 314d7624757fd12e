//! fsguard's integration tests, compiled into one binary (ripgrep's layout): one module per
//! public operation, a shared fixture helper, and the permission tests that re-run themselves as
//! an unprivileged user when started as root.

// Fixture helpers outside `#[test]` fns unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod atomic;
mod checked;
mod hard_links;
mod journal;
mod lease;
mod mirror;
mod races;
mod refresh;
mod relpath;
mod scan;
mod unprivileged;
mod util;
mod writeback_race;
