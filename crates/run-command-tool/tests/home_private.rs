//! TRUST-6, RCS-1 through `run_command`: the home view keeps the tools' credentials private,
//! also where the host's environment relocates them, and other projects' `.env` files; the
//! rest of `$HOME` stays readable (a plain file, a toolchain's program). The home is a temp
//! dir (`common::fixture`); each test skips, saying why, where the sandbox is unavailable.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{args, call_with, fixture, plant};
use run_command_tool::{DenyAllAsker, Mode, RunCommandOptions, RunCommandOutput, RunCommandState};

/// Runs `cat` on each of `files` (one after the other, errors ignored), then `echo done`.
async fn cat_all(
    f: &common::Fixture,
    files: &[&Path],
    tweak: impl FnOnce(&mut RunCommandOptions),
) -> RunCommandOutput {
    let script = files
        .iter()
        .map(|p| format!("cat '{}';", p.display()))
        .collect::<String>()
        + " echo done";
    let out = call_with(
        args(&["sh", "-c", &script]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
        &RunCommandState::default(),
        tweak,
    )
    .await
    .unwrap();
    assert!(out.executed, "{out:?}");
    assert!(out.output.contains("done"), "{}", out.output);
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn planted_vnc_filezilla_and_ide_credentials_are_unreadable() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    let files = [
        f.home.join(".vnc/passwd"),
        f.home.join(".config/filezilla/sitemanager.xml"),
        f.home.join(".config/JetBrains/IntelliJIdea2024.1/c.kdbx"),
        f.home.join(".config/Code/User/globalStorage/state.vscdb"),
        f.home.join(".minikube/profiles/minikube/client.key"),
        f.home.join(".yarnrc"),
    ];
    for (i, p) in files.iter().enumerate() {
        plant(p, &format!("PLANTED-SECRET-{i}\n"));
    }
    let refs: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
    let out = cat_all(&f, &refs, |_| {}).await;
    assert!(!out.output.contains("PLANTED-SECRET"), "{}", out.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_relocated_docker_config_and_xdg_config_are_unreadable() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    let docker = f.home.join("cfg/docker");
    let xdg = f.home.join("cfg/xdg");
    plant(&docker.join("config.json"), "PLANTED-DOCKER-AUTH\n");
    plant(&xdg.join("gh/hosts.yml"), "PLANTED-GH-TOKEN\n");
    plant(&xdg.join("mytool/settings"), "READABLE-SETTINGS\n");
    let (d, x) = (docker.clone(), xdg.clone());
    let out = cat_all(
        &f,
        &[
            &docker.join("config.json"),
            &xdg.join("gh/hosts.yml"),
            &xdg.join("mytool/settings"),
        ],
        move |o| {
            o.env
                .push(("DOCKER_CONFIG".into(), d.display().to_string()));
            o.env
                .push(("XDG_CONFIG_HOME".into(), x.display().to_string()));
        },
    )
    .await;
    assert!(
        !out.output.contains("PLANTED-DOCKER-AUTH"),
        "{}",
        out.output
    );
    assert!(!out.output.contains("PLANTED-GH-TOKEN"), "{}", out.output);
    assert!(out.output.contains("READABLE-SETTINGS"), "{}", out.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn another_project_s_env_file_is_unreadable_and_the_own_one_is_readable() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    std::fs::create_dir_all(f.home.join("code/other/.git")).unwrap();
    let other = f.home.join("code/other/.env");
    let other_local = f.home.join("code/other/web/.env.local");
    let own = f.proj.join(".env");
    plant(&other, "PLANTED-OTHER-ENV\n");
    plant(&other_local, "PLANTED-OTHER-ENV-LOCAL\n");
    plant(&own, "OWN-ENV\n");
    let out = cat_all(&f, &[&other, &other_local, &own], |_| {}).await;
    assert!(!out.output.contains("PLANTED-OTHER-ENV"), "{}", out.output);
    assert!(out.output.contains("OWN-ENV"), "{}", out.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn ordinary_home_reads_and_a_toolchain_in_cargo_bin_still_work() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    plant(&f.home.join("notes.txt"), "READABLE-NOTES\n");
    let tool = f.home.join(".cargo/bin/mytool");
    plant(&tool, "#!/bin/sh\necho TOOL-RAN\n");
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The toolchain home relocated inside $HOME hides only its credentials.
    plant(
        &f.home.join(".cargo/credentials.toml"),
        "PLANTED-CARGO-TOKEN\n",
    );
    let script = format!(
        "cat '{h}/notes.txt'; mytool; cat '{h}/.cargo/credentials.toml'; echo done",
        h = f.home.display(),
    );
    let cargo_home = f.home.join(".cargo").display().to_string();
    let path = format!("{cargo_home}/bin:/usr/bin:/bin");
    let out = call_with(
        args(&["sh", "-c", &script]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
        &RunCommandState::default(),
        |o| {
            o.env.push(("CARGO_HOME".into(), cargo_home));
            o.env.push(("PATH".into(), path));
        },
    )
    .await
    .unwrap();
    assert!(out.executed, "{out:?}");
    assert!(out.output.contains("READABLE-NOTES"), "{}", out.output);
    assert!(out.output.contains("TOOL-RAN"), "{}", out.output);
    assert!(
        !out.output.contains("PLANTED-CARGO-TOKEN"),
        "{}",
        out.output
    );
    assert!(out.output.contains("done"), "{}", out.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn links_elsewhere_in_home_to_hidden_files_read_nothing() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    let docker = f.home.join("cfg/docker");
    plant(&docker.join("config.json"), "PLANTED-DOCKER-AUTH\n");
    std::fs::create_dir_all(f.home.join("code/other/.git")).unwrap();
    plant(&f.home.join("code/other/.env"), "PLANTED-OTHER-ENV\n");
    plant(&f.home.join(".vnc/passwd"), "PLANTED-VNC\n");
    let links = f.home.join("links");
    std::fs::create_dir_all(&links).unwrap();
    for (name, target) in [
        ("docker.json", docker.join("config.json")),
        ("env", f.home.join("code/other/.env")),
        ("vnc", f.home.join(".vnc/passwd")),
    ] {
        std::os::unix::fs::symlink(&target, links.join(name)).unwrap();
        std::os::unix::fs::symlink(&target, f.proj.join(name)).unwrap();
    }
    let names = ["docker.json", "env", "vnc"];
    let paths: Vec<std::path::PathBuf> = names
        .iter()
        .flat_map(|n| [links.join(n), f.proj.join(n)])
        .collect();
    let refs: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
    let d = docker.display().to_string();
    let out = cat_all(&f, &refs, move |o| o.env.push(("DOCKER_CONFIG".into(), d))).await;
    assert!(!out.output.contains("PLANTED"), "{}", out.output);
}
