//! The macOS tasks.
//!
//! - `check-macos`: every crate a Mac builds, type-checked and linted (`clippy -D warnings`)
//!   for `aarch64-apple-darwin` and `x86_64-apple-darwin`, from any host. Nothing is linked or
//!   run: there is no macOS SDK off the Mac.
//! - `macos`: on a Mac, the suite only a Mac can run (seatbelt's profiles against the real
//!   `sandbox-exec`); elsewhere it prints `skipped: not macOS`.
//!
//! ## Where the Apple standard library comes from
//!
//! A target installed with rustup (`rustup target add aarch64-apple-darwin`) ships `std`
//! prebuilt, and the check uses it. Where it is missing (CI here cannot download rustup
//! targets), Debian 12's Rust is used: `rustc-web`, `cargo-web` and `rust-web-clippy` put a
//! Rust 1.96 in `/usr/bin` and `rust-web-src` adds the standard library's source, from which
//! cargo builds `std` for the Apple target (`-Zbuild-std`, unlocked on a stable compiler by
//! `RUSTC_BOOTSTRAP=1`). This task installs nothing; it names the packages it misses.
//!
//! ## One clippy run per route, no `cargo check`
//!
//! clippy-driver is rustc with lints added: each workspace crate it lints is fully
//! type-checked first, so a `cargo check` beside it would redo the work and find nothing more.
//! Both targets go into one invocation, so the host's build scripts and proc macros are
//! built once and the two `std` builds run side by side. The target dir is its own
//! (`target/macos-check`): a different compiler would otherwise evict the Linux build.
//!
//! ## Build scripts that compile C
//!
//! A check still runs every build script, and three compile code for the target:
//! - blake3 gets its `pure` feature: its C includes libc headers only the macOS SDK has.
//! - psm (pest's stack guard, under argv-policy's shell parser) assembles one `.s` file, and
//!   alloca (criterion, for seatbelt's benchmarks) compiles one C file that includes only
//!   `stddef.h` and `stdint.h`. Off the Mac, clang builds both as Mach-O objects with its own
//!   headers (`-nostdlibinc` keeps the host's glibc headers out); no SDK is needed.
//!
//! ## What is left out
//!
//! [`LINUX_ONLY`] crates, and the test, bench and example targets other than the ones a Mac
//! builds ([`MAC_TARGET_FILTER`]): their tests share testkit, whose helpers are Linux's.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::workspace_root;

/// The two Macs: Apple silicon and Intel.
const APPLE_TARGETS: [&str; 2] = ["aarch64-apple-darwin", "x86_64-apple-darwin"];

/// Workspace members a Mac never builds, with why. Every other member is checked, so a new
/// crate is checked for macOS until someone lists it here with its reason.
const LINUX_ONLY: &[(&str, &str)] = &[
    ("linux-sandbox", "Landlock, seccomp and namespaces"),
    ("testkit", "test helpers built on prctl, O_PATH and inotify"),
    ("tests", "the escape suite against the Linux sandbox"),
];

/// The targets of each checked crate that a Mac builds: libraries and binaries
/// (`agent-exec`, `xtask` itself), the Mac suite (`cargo xtask macos`) and the SBPL example
/// the README shows.
const MAC_TARGET_FILTER: &[&str] = &["--lib", "--bins", "--test", "macos", "--example", "sbpl"];

/// clippy's flags: the Linux build's (`-D warnings`), and house rule 5 for every unsafe block a
/// Mac builds (each says why it is sound).
const LINTS: &[&str] = &["-D", "warnings", "-D", "clippy::undocumented_unsafe_blocks"];

/// The Debian 12 route's files, each with the package that installs it.
const DEBIAN_CARGO: &str = "/usr/bin/cargo";
const DEBIAN_RUSTC: &str = "/usr/bin/rustc";
const DEBIAN_CLIPPY: &str = "/usr/bin/cargo-clippy";
const DEBIAN_FILES: &[(&str, &str)] = &[
    (DEBIAN_RUSTC, "rustc-web"),
    (DEBIAN_CARGO, "cargo-web"),
    (DEBIAN_CLIPPY, "rust-web-clippy"),
    (
        "/usr/lib/rustlib/src/rust/library/Cargo.toml",
        "rust-web-src",
    ),
];

/// Every Debian package the task may need off the Mac: the Rust of the source route and the
/// C compiler of both routes.
pub(crate) const DEBIAN_PACKAGES: &str = "rustc-web cargo-web rust-web-src rust-web-clippy clang";

/// `cargo xtask check-macos`.
pub(crate) fn check(args: &[String]) -> Result<(), String> {
    if let Some(extra) = args.first() {
        return Err(format!("check-macos takes no arguments (got `{extra}`)"));
    }
    let started = Instant::now();
    let (installed, from_source): (Vec<&str>, Vec<&str>) =
        APPLE_TARGETS.iter().partition(|t| std_installed(t));
    if !cfg!(target_os = "macos") {
        require_clang()?;
    }
    if !installed.is_empty() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let mut cmd = Command::new(cargo);
        cmd.arg("clippy");
        run_clippy(cmd, &installed, "the rustup toolchain's std")?;
    }
    if !from_source.is_empty() {
        require_debian_rust(&from_source)?;
        let mut cmd = Command::new(DEBIAN_CLIPPY);
        // cargo-clippy runs `$CARGO`; rustup's `cargo xtask` set it to rustup's cargo, which
        // would pair Debian's clippy-driver with the wrong cargo.
        cmd.env("CARGO", DEBIAN_CARGO)
            .env("RUSTC", DEBIAN_RUSTC)
            .env("RUSTC_BOOTSTRAP", "1")
            .env_remove("RUSTUP_TOOLCHAIN")
            .args(["clippy", "-Zbuild-std=std"]);
        run_clippy(cmd, &from_source, "std built from Debian's rust-web-src")?;
    }
    println!(
        "xtask check-macos: {} checked and linted in {:.0?}",
        APPLE_TARGETS.join(" and "),
        started.elapsed()
    );
    Ok(())
}

/// Runs `cmd` (a cargo clippy) over the Mac crates for `targets`, at the workspace root.
fn run_clippy(mut cmd: Command, targets: &[&str], std_from: &str) -> Result<(), String> {
    let target_dir = workspace_root().join("target").join("macos-check");
    // cargo compiles a built std (and the host's build scripts and proc macros) to machine
    // code even for a check; no debugger reads it, so it goes without debug info.
    cmd.env("CARGO_PROFILE_DEV_DEBUG", "false")
        .arg("--target-dir")
        .arg(&target_dir)
        .arg("--workspace");
    for (krate, _) in LINUX_ONLY {
        cmd.args(["--exclude", krate]);
    }
    cmd.args(MAC_TARGET_FILTER)
        .args(["--features", "blake3/pure"]);
    for target in targets {
        cmd.args(["--target", target]);
        if !cfg!(target_os = "macos") {
            let var = target.replace('-', "_");
            cmd.env(format!("CC_{var}"), "clang")
                .env(format!("CFLAGS_{var}"), "-nostdlibinc");
        }
    }
    cmd.arg("--").args(LINTS).current_dir(workspace_root());
    println!(
        "xtask check-macos: {} ({std_from}): {}",
        targets.join(", "),
        shown(&cmd)
    );
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start {}: {e}", cmd.get_program().to_string_lossy()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "the macOS check failed for {} ({status}): the errors above are what a Mac build \
             would report",
            targets.join(", ")
        ))
    }
}

/// Whether the toolchain running xtask has `std` for `target` (installed with rustup).
fn std_installed(target: &str) -> bool {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let Ok(out) = Command::new(rustc)
        .args(["--print", "target-libdir", "--target", target])
        .output()
    else {
        return false;
    };
    let libdir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    out.status.success() && has_std(&libdir)
}

/// Whether `libdir` holds a compiled `std` (`libstd-<hash>.rlib`).
fn has_std(libdir: &Path) -> bool {
    std::fs::read_dir(libdir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("libstd-"))
    })
}

/// The install line that fixes a missing prerequisite.
fn remedy(targets: &[&str]) -> String {
    format!(
        "either `rustup target add {}`, or on Debian 12 `apt-get install {DEBIAN_PACKAGES}`",
        targets.join(" ")
    )
}

/// Off the Mac, psm's and alloca's build scripts need clang for the Apple targets.
fn require_clang() -> Result<(), String> {
    let works = Command::new("clang")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        Ok(())
    } else {
        Err(format!(
            "the macOS check needs clang off the Mac (build scripts assemble and compile for \
             Mach-O); install it: `apt-get install clang` (all it needs: {})",
            remedy(&APPLE_TARGETS)
        ))
    }
}

/// The Debian route's files, or an error naming the packages that are missing.
fn require_debian_rust(targets: &[&str]) -> Result<(), String> {
    let missing: Vec<&str> = DEBIAN_FILES
        .iter()
        .filter(|(path, _)| !Path::new(path).exists())
        .map(|(_, package)| *package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the macOS check needs a standard library for {}, and the toolchain running xtask has \
         none; Debian's Rust with std's source would build one, but {} {} not installed. \
         Install {}",
        targets.join(" and "),
        missing.join(", "),
        if missing.len() == 1 { "is" } else { "are" },
        remedy(targets)
    ))
}

/// `cmd` as a shell line, with the environment it sets, for the log.
fn shown(cmd: &Command) -> String {
    let mut line: Vec<String> = cmd
        .get_envs()
        .filter_map(|(k, v)| Some(format!("{}={}", k.to_string_lossy(), v?.to_string_lossy())))
        .collect();
    line.push(cmd.get_program().to_string_lossy().into_owned());
    line.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    line.join(" ")
}

/// `cargo xtask macos`: seatbelt's conformance suite, which compares the evaluator's decisions
/// with what `sandbox-exec` does. It needs a real Mac.
pub(crate) fn suite(args: &[String]) -> Result<(), String> {
    if let Some(extra) = args.first() {
        return Err(format!("macos takes no arguments (got `{extra}`)"));
    }
    if !cfg!(target_os = "macos") {
        println!(
            "skipped: not macOS (the Seatbelt profiles are still built, parsed and evaluated by \
             `cargo test`, and `cargo xtask check-macos` compiles and lints the macOS code)"
        );
        return Ok(());
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .args(["test", "-p", "seatbelt", "--test", "macos"])
        .current_dir(workspace_root())
        .status()
        .map_err(|e| format!("cannot start cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err("the macOS suite failed".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_linux_only_crate_is_a_workspace_member() {
        let root = workspace_root();
        for (krate, _) in LINUX_ONLY {
            let listed = ["crates", ""]
                .iter()
                .any(|dir| root.join(dir).join(krate).join("Cargo.toml").is_file());
            assert!(
                listed,
                "LINUX_ONLY names `{krate}`, which is no workspace member"
            );
        }
    }
}
