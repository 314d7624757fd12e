//! `cargo xtask soak [--minutes M] [--tasks N] [--json]`: the `background_command` soak —
//! builds run-command-tool's `background_soak` example in release and runs it: N tasks with
//! mixed lifetimes kept running for M minutes in one host process, whose fds, threads and RSS
//! must not grow, with no survivor and no log file left (defaults: 10 minutes, 20 tasks).
//!
//! Not part of `cargo xtask ci`: it takes as long as it is told to.

use std::path::PathBuf;
use std::process::Command;

use crate::workspace_root;

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let minutes = crate::bench::flag(args, "--minutes", 10)? as u64;
    let tasks = crate::bench::flag(args, "--tasks", 20)? as u64;
    let mut json = false;
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--minutes" | "--tasks" => {
                rest.next();
            }
            "--json" => json = true,
            unknown => {
                return Err(format!(
                    "unknown soak argument `{unknown}`; use --minutes M --tasks N [--json]"
                ));
            }
        }
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "-p",
            "run-command-tool",
            "--example",
            "background_soak",
        ])
        .current_dir(workspace_root())
        .status()
        .map_err(|e| format!("cannot start cargo: {e}"))?;
    if !status.success() {
        return Err("building the background_soak example failed".to_owned());
    }
    let binary = target_dir()
        .join("release")
        .join("examples")
        .join("background_soak");
    let mut cmd = Command::new(&binary);
    cmd.args([
        "--minutes",
        &minutes.to_string(),
        "--tasks",
        &tasks.to_string(),
    ]);
    if json {
        cmd.arg("--json");
    }
    println!("xtask soak: {} min, {tasks} tasks", minutes);
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "the soak failed ({status}): its table and FAIL lines above say what grew or survived"
        ))
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}
