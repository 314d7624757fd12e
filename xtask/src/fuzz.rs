//! `cargo xtask fuzz`: the cargo-fuzz targets in `fuzz/` (one per parser or validator that
//! reads untrusted input; docs/architecture.md, "Fuzzing").
//!
//! - `fuzz --list`: the targets, each with the first line of its doc.
//! - `fuzz --smoke [--seconds N]`: builds every target once (unoptimised, [`Profile`]), then
//!   runs each for N seconds (default [`SMOKE_SECONDS`]) from its committed seeds; the last
//!   step of `cargo xtask ci`.
//! - `fuzz NAME [--seconds N]`: one target for as long as asked (default 10 minutes).
//!
//! The targets need the nightly toolchain and cargo-fuzz. Without them this prints
//! `skipped: …` with how to install them and succeeds — unless `AGENT_EXEC_REQUIRE` names
//! `fuzz` (as `.ci/run` does where nightly exists), then it fails: a CI machine that should
//! fuzz cannot go green without fuzzing.
//!
//! Builds use `--sanitizer none` (the code under test is safe Rust apart from a few system
//! calls, and the uninstrumented build is much faster to build and run) and
//! `--debug-assertions` (an arithmetic overflow is a finding). What a run generates goes to
//! `fuzz/target/corpus/NAME` (not committed); a crash is written to `fuzz/artifacts/NAME/`
//! and fails the task, naming the file and how to reproduce it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workspace_root;

/// How long `--smoke` runs each target: ten targets at 10 s add 100 s to CI on top of the
/// build.
pub(crate) const SMOKE_SECONDS: u64 = 10;

/// How long `fuzz NAME` runs without `--seconds`.
const DEFAULT_SECONDS: u64 = 600;

/// The flags every build and run uses (module docs say why).
const BUILD_FLAGS: &[&str] = &["--sanitizer", "none", "--debug-assertions"];

/// The build profile: `--smoke` builds unoptimised (`--dev`: half the CPU time of a release
/// build, which is most of the smoke's cost; ten seconds of slower fuzzing still run every
/// seed and thousands of mutations), a long run builds optimised (release, cargo-fuzz's
/// default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Profile {
    Dev,
    Release,
}

impl Profile {
    fn flags(self) -> &'static [&'static str] {
        match self {
            Profile::Dev => &["--dev"],
            Profile::Release => &[],
        }
    }
}

/// What `AGENT_EXEC_REQUIRE` names to make a missing toolchain a failure.
const REQUIRE_NAME: &str = "fuzz";

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let seconds = seconds(args)?;
    let mut skip_value = false;
    let mut mode = None;
    for a in args {
        if skip_value {
            skip_value = false;
            continue;
        }
        match a.as_str() {
            "--seconds" => skip_value = true,
            "--list" | "--smoke" => mode = Some(a.clone()),
            name if !name.starts_with('-') && mode.is_none() => mode = Some(name.to_owned()),
            unknown => {
                return Err(format!(
                    "unknown fuzz argument `{unknown}`; use `--list`, `--smoke [--seconds N]` \
                     or `NAME [--seconds N]`"
                ));
            }
        }
    }
    let targets = targets()?;
    match mode.as_deref() {
        None | Some("--list") => {
            list(&targets);
            Ok(())
        }
        Some("--smoke") => smoke(&targets, seconds.unwrap_or(SMOKE_SECONDS)),
        Some(name) => {
            let Some(target) = targets.iter().find(|t| t.name == name) else {
                list(&targets);
                return Err(format!(
                    "no fuzz target `{name}`; pick one of the targets above"
                ));
            };
            if !toolchain_ready()? {
                return Ok(());
            }
            build(Profile::Release)?;
            fuzz_one(target, seconds.unwrap_or(DEFAULT_SECONDS), Profile::Release)
        }
    }
}

/// `--seconds N`, if given.
fn seconds(args: &[String]) -> Result<Option<u64>, String> {
    match args.iter().position(|a| a == "--seconds") {
        None => Ok(None),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .filter(|v| *v > 0)
            .map(Some)
            .ok_or_else(|| "--seconds needs a positive number, e.g. `--seconds 60`".to_owned()),
    }
}

/// One fuzz target: `fuzz/fuzz_targets/NAME.rs`, its seeds in `fuzz/corpus/NAME`.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) name: String,
    /// The first line of its `//!` doc.
    pub(crate) about: String,
}

pub(crate) fn fuzz_dir() -> PathBuf {
    workspace_root().join("fuzz")
}

/// The targets, from the files in `fuzz/fuzz_targets` (sorted): a new file is a new target
/// everywhere at once.
pub(crate) fn targets() -> Result<Vec<Target>, String> {
    let dir = fuzz_dir().join("fuzz_targets");
    let entries =
        std::fs::read_dir(&dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    let mut targets = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let about = text
            .lines()
            .find_map(|l| l.strip_prefix("//!"))
            .unwrap_or("")
            .trim()
            .to_owned();
        targets.push(Target {
            name: name.to_owned(),
            about,
        });
    }
    targets.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(targets)
}

fn list(targets: &[Target]) {
    println!("fuzz targets (fuzz/fuzz_targets; seeds in fuzz/corpus/NAME):");
    for t in targets {
        println!("  {:<16} {}", t.name, t.about);
    }
}

/// Whether `AGENT_EXEC_REQUIRE` (comma-separated) names `fuzz`.
fn required(setting: &str) -> bool {
    setting.split(',').map(str::trim).any(|n| n == REQUIRE_NAME)
}

/// Why the fuzz toolchain is missing, with how to install it; `None` when it is there.
fn missing_toolchain() -> Option<String> {
    let works = |args: &[&str]| {
        Command::new("cargo")
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !works(&["+nightly", "--version"]) {
        return Some(
            "no nightly toolchain (`cargo +nightly --version` fails); install it with \
             `rustup toolchain install nightly`, then `cargo install cargo-fuzz --locked`"
                .to_owned(),
        );
    }
    if !works(&["+nightly", "fuzz", "--version"]) {
        return Some(
            "cargo-fuzz is not installed; install it with `cargo install cargo-fuzz --locked`"
                .to_owned(),
        );
    }
    None
}

/// `true` when the targets can be built; `false` after a loud skip; an error when the skip is
/// not allowed.
fn toolchain_ready() -> Result<bool, String> {
    let Some(why) = missing_toolchain() else {
        return Ok(true);
    };
    let setting = std::env::var("AGENT_EXEC_REQUIRE").unwrap_or_default();
    if required(&setting) {
        return Err(format!(
            "fuzzing is required (AGENT_EXEC_REQUIRE={setting:?} names `{REQUIRE_NAME}`) but {why}"
        ));
    }
    println!("xtask fuzz: skipped: {why}");
    Ok(false)
}

/// `cargo +nightly fuzz …` in the workspace root (cargo-fuzz finds `fuzz/` there). Cargo's
/// own `CARGO`/`RUSTUP_TOOLCHAIN` from the stable `cargo xtask` are removed so `+nightly`
/// decides the toolchain.
fn cargo_fuzz(args: &[&str]) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.arg("+nightly")
        .arg("fuzz")
        .args(args)
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO")
        .env_remove("RUSTC")
        .current_dir(workspace_root());
    cmd
}

fn build(profile: Profile) -> Result<(), String> {
    let mut args = vec!["build"];
    args.extend_from_slice(BUILD_FLAGS);
    args.extend_from_slice(profile.flags());
    println!("xtask fuzz: cargo +nightly fuzz {}", args.join(" "));
    let started = std::time::Instant::now();
    let status = cargo_fuzz(&args)
        .status()
        .map_err(|e| format!("cannot start cargo fuzz: {e}"))?;
    if !status.success() {
        return Err(format!("building the fuzz targets failed ({status})"));
    }
    println!(
        "xtask fuzz: built in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs `target` for `seconds` from its seeds; a crash fails with where it was written.
fn fuzz_one(target: &Target, seconds: u64, profile: Profile) -> Result<(), String> {
    let dir = fuzz_dir();
    let work = dir.join("target").join("corpus").join(&target.name);
    let seeds = dir.join("corpus").join(&target.name);
    let artifacts = dir.join("artifacts").join(&target.name);
    for d in [&work, &artifacts] {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    let max_time = format!("-max_total_time={seconds}");
    let prefix = format!("-artifact_prefix={}/", artifacts.display());
    let mut args = vec!["run"];
    args.extend_from_slice(BUILD_FLAGS);
    args.extend_from_slice(profile.flags());
    args.push(&target.name);
    let work_s = path_str(&work)?;
    let seeds_s = path_str(&seeds)?;
    args.extend_from_slice(&[work_s, seeds_s, "--", &max_time, "-timeout=10", &prefix]);
    println!("xtask fuzz: `{}` for {seconds} s", target.name);
    let status = cargo_fuzz(&args)
        .status()
        .map_err(|e| format!("cannot start cargo fuzz: {e}"))?;
    if status.success() {
        return Ok(());
    }
    Err(format!(
        "fuzz target `{}` failed ({status}): the input is in {} (the `artifact` line above); \
         reproduce with `cargo +nightly fuzz run {} {} FILE`, fix the crate and add a \
         regression test named after what it broke",
        target.name,
        artifacts.display(),
        BUILD_FLAGS.join(" "),
        target.name
    ))
}

fn path_str(p: &Path) -> Result<&str, String> {
    p.to_str()
        .ok_or_else(|| format!("{} is not UTF-8", p.display()))
}

fn smoke(targets: &[Target], seconds: u64) -> Result<(), String> {
    if !toolchain_ready()? {
        return Ok(());
    }
    let started = std::time::Instant::now();
    build(Profile::Dev)?;
    let mut failed = Vec::new();
    for t in targets {
        if let Err(e) = fuzz_one(t, seconds, Profile::Dev) {
            eprintln!("xtask fuzz: {e}");
            failed.push(t.name.clone());
        }
    }
    if !failed.is_empty() {
        return Err(format!(
            "fuzz smoke: {} failed: {}; each one's message above says where its input is",
            failed.len(),
            failed.join(", ")
        ));
    }
    println!(
        "xtask fuzz: smoke passed: {} targets, {seconds} s each, {:.0} s in all",
        targets.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuzz_is_required_only_when_the_setting_names_it() {
        assert!(required("landlock, fuzz"));
        assert!(required("fuzz"));
        assert!(!required(""));
        assert!(!required("landlock,fuzzy"));
    }

    #[test]
    fn every_fuzz_target_is_declared_and_has_seeds_and_a_doc() {
        let targets = targets().unwrap();
        assert!(!targets.is_empty());
        let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
        for t in &targets {
            assert!(
                manifest.contains(&format!("path = \"fuzz_targets/{}.rs\"", t.name)),
                "fuzz/Cargo.toml has no [[bin]] for {}",
                t.name
            );
            let seeds = std::fs::read_dir(fuzz_dir().join("corpus").join(&t.name))
                .map(|d| d.count())
                .unwrap_or(0);
            assert!(seeds > 0, "fuzz/corpus/{} has no seed", t.name);
            assert!(!t.about.is_empty(), "{} has no `//!` doc", t.name);
        }
    }
}
