//! TRUST-6 with `network: true`: a call that can send what it reads anywhere reads of `$HOME`
//! only the toolchains' homes and caches, the `PATH` directories below it and the tools'
//! settings — the user's documents, other projects and application data stay out, and a
//! refused read says why. Real tools (git with its global settings, python importing a
//! `pip --user` package) keep working. The home is a temp dir (`common::fixture`); each test
//! skips, saying why, where the sandbox is unavailable. Root and uid 65534.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{args, call_with, fixture, plant};
use run_command_tool::{DenyAllAsker, Mode, RunCommandOutput, RunCommandState};

/// Runs `script` through `sh -c` with `network` and the fixture's home on `PATH` (`~/bin`,
/// `~/.cargo/bin`), in auto mode (network is not asked there).
async fn sh(f: &common::Fixture, script: &str, network: bool) -> RunCommandOutput {
    let path = format!(
        "{h}/bin:{h}/.cargo/bin:/usr/local/bin:/usr/bin:/bin",
        h = f.home.display()
    );
    let mut a = args(&["sh", "-c", script]);
    a.network = network;
    let out = call_with(
        a,
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
        &RunCommandState::default(),
        |o| o.env.push(("PATH".into(), path)),
    )
    .await
    .unwrap();
    assert!(out.executed, "{out:?}");
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn with_network_documents_other_projects_and_browser_data_are_unreadable() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    let secrets = [
        f.home.join("notes.txt"),
        f.home.join("Documents/taxes.csv"),
        f.home.join("code/other/src/lib.rs"),
        f.home.join(".cache/google-chrome/Default/Cookies"),
        f.home.join(".config/Code/User/settings.json"),
    ];
    for (i, p) in secrets.iter().enumerate() {
        plant(p, &format!("USER-DATA-{i}\n"));
    }
    let script: String = secrets
        .iter()
        .map(|p| format!("cat '{}';", p.display()))
        .collect::<String>()
        + " echo done";
    // Without network, the same reads work: the narrowing is network's alone.
    let out = sh(&f, &script, false).await;
    assert!(out.output.contains("USER-DATA-4"), "{}", out.output);
    let out = sh(&f, &script, true).await;
    assert!(out.output.contains("done"), "{}", out.output);
    assert!(!out.output.contains("USER-DATA"), "{}", out.output);
    // Each refusal is said, with the view's reason.
    for p in &secrets {
        let d = out
            .denials
            .iter()
            .find(|d| Path::new(&d.path) == p)
            .unwrap_or_else(|| panic!("no denial for {}: {:?}", p.display(), out.denials));
        assert_eq!(d.access, "read");
        assert!(
            d.reason.contains("call with network reads of $HOME"),
            "{d:?}"
        );
        assert!(d.remedy.contains("without network"), "{d:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn with_network_toolchains_path_programs_and_git_settings_still_work() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    for (rel, name) in [(".cargo/bin/cargotool", "CARGO"), ("bin/mytool", "MINE")] {
        let tool = f.home.join(rel);
        plant(&tool, &format!("#!/bin/sh\necho {name}-TOOL-RAN\n"));
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    plant(&f.home.join(".cargo/config.toml"), "# CARGO-CONFIG\n");
    plant(&f.home.join(".cargo/credentials.toml"), "PLANTED-TOKEN\n");
    plant(&f.home.join(".cache/pip/http/entry"), "PIP-CACHE\n");
    plant(&f.home.join(".gitconfig"), "[user]\n\tname = Net Home\n");
    let script = "cargotool; mytool; cat ~/.cargo/config.toml ~/.cache/pip/http/entry; \
                  cat ~/.cargo/credentials.toml; git config --global --get user.name; echo done";
    let out = sh(&f, script, true).await;
    for seen in [
        "CARGO-TOOL-RAN",
        "MINE-TOOL-RAN",
        "# CARGO-CONFIG",
        "PIP-CACHE",
        "Net Home",
        "done",
    ] {
        assert!(out.output.contains(seen), "{seen}: {}", out.output);
    }
    // A private location inside an allowed home stays hidden.
    assert!(!out.output.contains("PLANTED-TOKEN"), "{}", out.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn with_network_python_imports_a_user_site_package() {
    if !testkit::sandbox_available() {
        return;
    }
    let Ok(version) = std::process::Command::new("python3")
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
    else {
        eprintln!("skipped: no python3");
        return;
    };
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    let f = fixture();
    plant(
        &f.home.join(format!(
            ".local/lib/python{version}/site-packages/netmod.py"
        )),
        "print('USER-SITE-IMPORTED')\n",
    );
    let out = sh(&f, "python3 -c 'import netmod'", true).await;
    assert!(out.is_success(), "{out:?}");
    assert!(out.output.contains("USER-SITE-IMPORTED"), "{}", out.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn with_network_a_cache_write_stays_in_the_view_and_other_caches_are_absent() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    plant(&f.home.join(".cache/pip/wheels/w.whl"), "WHEEL\n");
    plant(&f.home.join(".cache/someapp/state"), "APP-STATE\n");
    let script = "echo changed >> ~/.cache/pip/wheels/w.whl; cat ~/.cache/pip/wheels/w.whl; \
                  cat ~/.cache/someapp/state; echo done";
    let out = sh(&f, script, true).await;
    assert!(out.output.contains("WHEEL\nchanged"), "{}", out.output);
    assert!(!out.output.contains("APP-STATE"), "{}", out.output);
    assert_eq!(
        std::fs::read_to_string(f.home.join(".cache/pip/wheels/w.whl")).unwrap(),
        "WHEEL\n"
    );
}

#[test]
fn every_test_also_holds_unprivileged() {
    common::rerun_suite_unprivileged("every_test_also_holds_unprivileged");
}
