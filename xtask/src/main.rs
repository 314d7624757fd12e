//! Project automation behind `cargo xtask` (the cargo-xtask pattern): one Rust binary instead of
//! shell scripts, so `cargo xtask ci` passing locally means CI passes.
//!
//! `cargo xtask` alone lists the tasks. Each task prints the commands it runs and stops at the
//! first failure, naming the step that failed.

mod bench;
mod bench_soak;
mod fuzz;
mod macos;
#[cfg(target_os = "linux")]
mod matrix;
/// Off Linux the matrix has no level to force: its levels are the Linux sandbox's.
#[cfg(not(target_os = "linux"))]
mod matrix {
    const WHY: &str = "the matrix forces the Linux sandbox's capability levels (Landlock ABIs, \
                       user namespaces); run it on Linux";

    pub(crate) fn run(_args: &[String]) -> Result<(), String> {
        Err(WHY.to_owned())
    }

    pub(crate) fn ci() -> Result<(), String> {
        println!("xtask ci: skipped: {WHY}");
        Ok(())
    }
}
mod soak;
#[cfg(test)]
mod tidy;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const TASKS: &[(&str, &str)] = &[
    (
        "ci",
        "fmt --check, clippy -D warnings, check-macos, tests (with the escape suite), the matrix, docs -D warnings, fuzz --smoke",
    ),
    (
        "matrix [--full]",
        "escape and liveness suites at each capability level (Landlock ABI, userns, root/nobody); a subset without --full",
    ),
    (
        "bench scan [--files N] [--runs N]",
        "fsguard::scan_hard_links against `find -links +1` on a generated tree; medians and ratio",
    ),
    (
        "bench spawn [--runs N]",
        "/bin/true through exec::run vs bare Command, then vs bwrap --unshare-all (300 rounds)",
    ),
    (
        "bench drain [--runs N]",
        "1 GiB to stdout with a 64 KiB cap vs the same child writing to /dev/null",
    ),
    (
        "bench call [--runs N] [--mb N]",
        "agent-exec call command/run/run_command as whole processes vs bwrap, sh -c true, bare true and bare wc -l",
    ),
    (
        "bench git [--runs N] [--files N]",
        "git status and git clone of a 50 000-file repository through call command vs the host's bare git",
    ),
    (
        "bench links [--runs N] [--files N]",
        "call command in 50 000 hard-linked pnpm-style files (kept read-only) vs the same files unlinked",
    ),
    (
        "bench stop [--runs N]",
        "stop a 500-process tree with 100 setsid escapees, both proctree modes",
    ),
    (
        "bench micro [criterion args]",
        "in-process criterion benchmarks (argv-policy's decide, seatbelt's evaluator); ratios",
    ),
    (
        "bench soak [--calls N] [--concurrency C]",
        "N mixed calls of every tool (10 000, 16 at once) through one agent-exec mcp: p50/p99, no fd/thread/zombie/temp-dir/RSS growth, no survivors (not in ci)",
    ),
    (
        "fuzz --smoke | NAME [--seconds N]",
        "cargo-fuzz targets (nightly): each for 10 s after one build, or one for N s (600); --list",
    ),
    (
        "soak [--minutes M] [--tasks N]",
        "background_command soak: N mixed tasks for M min (10, 20); no fd/thread/RSS growth, no survivors (not in ci)",
    ),
    (
        "check-macos",
        "clippy -D warnings (a full type-check) of every crate a Mac builds, for aarch64- and x86_64-apple-darwin; no Mac needed",
    ),
    (
        "macos",
        "the macOS-only suite (Seatbelt against sandbox-exec); prints `skipped: not macOS` elsewhere",
    ),
];

/// A task: what runs it with the arguments after its name.
type Task = fn(&[String]) -> Result<(), String>;

/// The dispatcher: every task `cargo xtask NAME` runs. One table, so tidy can check that the
/// docs name only tasks that exist (`every_xtask_task_the_project_names_exists`).
const DISPATCH: &[(&str, Task)] = &[
    ("ci", |_| ci()),
    ("bench", bench::run),
    ("fuzz", fuzz::run),
    ("soak", soak::run),
    ("matrix", matrix::run),
    ("check-macos", macos::check),
    ("macos", macos::suite),
];

/// The task called `name`, if the dispatcher has one.
fn task(name: &str) -> Option<Task> {
    DISPATCH.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None | Some("help" | "--help" | "-h") => {
            print_tasks();
            Ok(())
        }
        Some(name) => match task(name) {
            Some(run) => run(&args[1..]),
            None => {
                print_tasks();
                Err(format!(
                    "unknown task `{name}`; pick one of the tasks above"
                ))
            }
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn print_tasks() {
    println!("usage: cargo xtask <task>\n\ntasks:");
    for (name, what) in TASKS {
        println!("  {name:<38} {what}");
    }
}

/// The workspace root: the parent of this crate's manifest directory.
pub(crate) fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// One `cargo xtask ci` step: its name, cargo's arguments, extra environment.
type Step<'a> = (&'a str, &'a [&'a str], &'a [(&'a str, &'a str)]);

fn ci() -> Result<(), String> {
    let steps: &[Step] = &[
        ("fmt", &["fmt", "--all", "--check"], &[]),
        (
            "clippy",
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
            &[],
        ),
        ("test", &["test", "--workspace"], &[]),
        (
            "doc",
            &["doc", "--workspace", "--no-deps"],
            &[("RUSTDOCFLAGS", "-D warnings")],
        ),
    ];
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    for (name, args, env) in steps {
        println!("xtask ci: step `{name}`: cargo {}", args.join(" "));
        let status = Command::new(&cargo)
            .args(*args)
            .envs(env.iter().copied())
            .current_dir(workspace_root())
            .status()
            .map_err(|e| format!("ci step `{name}` could not start cargo: {e}"))?;
        if !status.success() {
            return Err(format!(
                "ci step `{name}` failed ({status}); fix it and run `cargo xtask ci` again"
            ));
        }
        if *name == "clippy" {
            println!("xtask ci: step `check-macos`: cargo xtask check-macos");
            macos::check(&[]).map_err(|e| {
                format!("ci step `check-macos` failed: {e}; fix it and run `cargo xtask ci` again")
            })?;
        }
        if *name == "test" {
            println!("xtask ci: step `matrix`: cargo xtask matrix");
            matrix::ci().map_err(|e| {
                format!("ci step `matrix` failed: {e}; fix it and run `cargo xtask ci` again")
            })?;
        }
    }
    // Last: it needs nightly and cargo-fuzz, and skips loudly without them (fuzz.rs).
    println!("xtask ci: step `fuzz`: cargo xtask fuzz --smoke");
    fuzz::run(&["--smoke".to_owned()]).map_err(|e| format!("ci step `fuzz` failed: {e}"))?;
    println!("xtask ci: all steps passed (fmt, clippy, check-macos, test, matrix, doc, fuzz)");
    Ok(())
}
