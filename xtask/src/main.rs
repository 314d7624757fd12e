//! Project automation behind `cargo xtask` (the cargo-xtask pattern): one Rust binary instead of
//! shell scripts, so `cargo xtask ci` passing locally means CI passes.
//!
//! `cargo xtask` alone lists the tasks. Each task prints the commands it runs and stops at the
//! first failure, naming the step that failed.

mod bench;
#[cfg(test)]
mod tidy;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const TASKS: &[(&str, &str)] = &[
    (
        "ci",
        "fmt --check, clippy -D warnings, tests (with the escape suite), docs -D warnings",
    ),
    (
        "bench scan [--files N] [--runs N]",
        "fsguard::scan_hard_links against `find -links +1` on a generated tree; medians and ratio",
    ),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None | Some("help" | "--help" | "-h") => {
            print_tasks();
            Ok(())
        }
        Some("ci") => ci(),
        Some("bench") => bench::run(&args[1..]),
        Some(other) => {
            print_tasks();
            Err(format!(
                "unknown task `{other}`; pick one of the tasks above"
            ))
        }
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

fn ci() -> Result<(), String> {
    let steps: &[(&str, &[&str], &[(&str, &str)])] = &[
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
    }
    println!("xtask ci: all steps passed (fmt, clippy, test, doc)");
    Ok(())
}
