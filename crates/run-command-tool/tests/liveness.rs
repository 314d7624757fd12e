//! Ordinary work keeps working through run_command (issue 18 "Tests"): `git init` + `git
//! commit`, `pytest`, `npm test` and `cargo test --offline` in a temp project, with the user's
//! real home (its toolchains: `~/.cargo`, `~/.rustup`, `~/.pyenv`, …) read through the
//! sandbox. A toolchain this machine lacks skips loudly.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::{args, call_with};
use run_command_tool::{DenyAllAsker, Mode, RunCommandState};

fn real_home() -> PathBuf {
    PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()))
        .canonicalize()
        .unwrap()
}

/// A project directory outside the home (a temp dir).
fn project() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().canonicalize().unwrap();
    (dir, p)
}

fn on_path(program: &str) -> bool {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .any(|d| std::path::Path::new(d).join(program).is_file())
}

async fn run(argv: &[&str], proj: &std::path::Path, env: Vec<(String, String)>) -> String {
    let home = real_home();
    let out = call_with(
        args(argv),
        proj,
        &home,
        Mode::AllowAll,
        &DenyAllAsker,
        &RunCommandState::default(),
        |o| o.env = env,
    )
    .await
    .unwrap();
    assert!(
        out.is_success(),
        "{argv:?} failed:\n{}\n{out:?}",
        out.output
    );
    out.output
}

#[tokio::test(flavor = "multi_thread")]
async fn git_init_and_commit_work() {
    if !testkit::sandbox_available() || !on_path("git") {
        return;
    }
    let (_d, proj) = project();
    std::fs::write(proj.join("a.txt"), "a\n").unwrap();
    run(&["git", "init", "-q"], &proj, Vec::new()).await;
    run(&["git", "add", "a.txt"], &proj, Vec::new()).await;
    run(
        &[
            "git",
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.invalid",
            "commit",
            "-q",
            "-m",
            "first",
        ],
        &proj,
        Vec::new(),
    )
    .await;
    let log = run(&["git", "log", "--format=%s"], &proj, Vec::new()).await;
    assert_eq!(log.trim(), "first");
}

#[tokio::test(flavor = "multi_thread")]
async fn pytest_runs_a_tiny_test() {
    if !testkit::sandbox_available() {
        return;
    }
    // The first python3 on PATH with pytest (pyenv's shim, else the system's).
    let python = ["python3", "/usr/bin/python3"].into_iter().find(|p| {
        std::process::Command::new(p)
            .args(["-c", "import pytest"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(python) = python else {
        eprintln!("skipped: no python3 with pytest on this machine");
        return;
    };
    let (_d, proj) = project();
    std::fs::write(
        proj.join("test_tiny.py"),
        "def test_one():\n    assert 1 + 1 == 2\n",
    )
    .unwrap();
    let out = run(
        &[python, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        &proj,
        Vec::new(),
    )
    .await;
    assert!(out.contains("1 passed"), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn npm_test_runs_a_tiny_package() {
    if !testkit::sandbox_available() || !on_path("npm") {
        return;
    }
    let (_d, proj) = project();
    std::fs::write(
        proj.join("package.json"),
        r#"{"name": "tiny", "version": "1.0.0", "scripts": {"test": "node -e \"console.log('npm-ok')\""}}"#,
    )
    .unwrap();
    let out = run(&["npm", "test"], &proj, Vec::new()).await;
    assert!(out.contains("npm-ok"), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cargo_test_offline_builds_and_tests_a_tiny_crate() {
    if !testkit::sandbox_available() || !on_path("cargo") {
        return;
    }
    let (_d, proj) = project();
    std::fs::create_dir(proj.join("src")).unwrap();
    std::fs::write(
        proj.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        proj.join("src/lib.rs"),
        "#[test]\nfn adds() { assert_eq!(1 + 1, 2); }\n",
    )
    .unwrap();
    let target = proj.join("target").to_string_lossy().into_owned();
    let out = run(
        &["cargo", "test", "--offline"],
        &proj,
        vec![("CARGO_TARGET_DIR".into(), target)],
    )
    .await;
    assert!(out.contains("test result: ok. 1 passed"), "{out}");
}
