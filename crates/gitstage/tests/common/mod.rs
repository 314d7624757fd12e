//! What the integration tests share: running the system's git as the tests need it.

use std::path::Path;
use std::process::Command;

/// Runs `git args` in `dir` with no system or global config; whether it succeeded.
pub fn git(dir: &Path, args: &[&str]) -> bool {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .is_ok_and(|o| o.status.success())
}
