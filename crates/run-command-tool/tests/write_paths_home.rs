//! TRUST-5, RC-10 through `run_command`: a `write_paths` entry under `$HOME` is confirmed only
//! when no host program reads it as configuration or code; a dot-directory, a `PATH`
//! directory and a directory holding another repository need the system password, like a path
//! outside `$HOME`, whatever the mode. The gate is decided before anything runs, so these tests
//! need no sandbox: the scripted asker cannot give a password and nothing executes.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::sync::atomic::Ordering;

use common::{Reply, Scripted, args, call_with, fixture};
use run_command_tool::{Confirmation, Mode, RunCommandState};

/// Calls `touch <dir>/planted` with `dir` in `write_paths`, the asker confirming everything and
/// unable to give a password; `path` is the host `PATH` the call sees. Returns the asker and
/// whether the command ran.
async fn try_write(dir: &Path, f: &common::Fixture, mode: Mode, path: Option<&str>) -> Scripted {
    let target = dir.join("planted").to_string_lossy().into_owned();
    let mut a = args(&["touch", &target]);
    a.write_paths = vec![dir.to_string_lossy().into_owned()];
    let asker = Scripted::new(Confirmation::Yes, vec![Reply::CannotAsk]);
    let path = path.map(str::to_owned);
    let out = call_with(
        a,
        &f.proj,
        &f.home,
        mode,
        &asker,
        &RunCommandState::default(),
        |o| {
            if let Some(p) = path {
                o.env.push(("PATH".into(), p));
            }
        },
    )
    .await
    .unwrap();
    assert!(!out.executed, "{out:?}");
    assert!(!dir.join("planted").exists());
    asker
}

fn assert_password_asked(asker: &Scripted, says: &str) {
    assert_eq!(
        asker.prompts.load(Ordering::SeqCst),
        1,
        "the password was asked"
    );
    let labels = asker.labels.lock().unwrap();
    assert!(labels.iter().any(|l| l.contains(says)), "{labels:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn write_paths_in_dot_directories_need_the_password_in_every_mode() {
    let f = fixture();
    for rel in [".local/bin", ".local/lib", ".config/mytool"] {
        let dir = f.home.join(rel);
        std::fs::create_dir_all(&dir).unwrap();
        for mode in [Mode::Safe, Mode::Auto, Mode::AllowAll] {
            let asker = try_write(&dir, &f, mode, None).await;
            assert_password_asked(&asker, "dot-directory");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn write_paths_home_bin_needs_the_password() {
    let f = fixture();
    let dir = f.home.join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    let asker = try_write(&dir, &f, Mode::AllowAll, None).await;
    assert_password_asked(&asker, "holds programs or configuration");
}

#[tokio::test(flavor = "multi_thread")]
async fn write_paths_on_the_host_path_or_in_its_prefix_need_the_password() {
    let f = fixture();
    let bin = f.home.join("tools/bin");
    let lib = f.home.join("tools/lib");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&lib).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    for (dir, says) in [
        (&bin, "on your PATH"),
        (&f.home.join("tools"), "on your PATH"),
        (&lib, "whose programs are on your PATH"),
    ] {
        let asker = try_write(dir, &f, Mode::AllowAll, Some(&path)).await;
        assert_password_asked(&asker, says);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn write_paths_holding_another_repository_need_the_password() {
    let f = fixture();
    let code = f.home.join("code");
    std::fs::create_dir_all(code.join("other/.git/hooks")).unwrap();
    let asker = try_write(&code, &f, Mode::Auto, None).await;
    assert_password_asked(&asker, "holds another git repository");
}

#[tokio::test(flavor = "multi_thread")]
async fn write_paths_in_a_plain_home_directory_are_only_confirmed() {
    let f = fixture();
    let data = f.home.join("data/sub");
    std::fs::create_dir_all(&data).unwrap();
    // Its own repository is not another one.
    std::fs::create_dir_all(f.home.join("data/.git")).unwrap();
    let target = data.join("planted").to_string_lossy().into_owned();
    let mut a = args(&["touch", &target]);
    a.write_paths = vec![f.home.join("data").to_string_lossy().into_owned()];
    let asker = Scripted::new(Confirmation::No, vec![Reply::CannotAsk]);
    let out = call_with(
        a,
        &f.proj,
        &f.home,
        Mode::Auto,
        &asker,
        &RunCommandState::default(),
        |_| {},
    )
    .await
    .unwrap();
    assert!(!out.executed, "{out:?}");
    assert_eq!(asker.confirms.load(Ordering::SeqCst), 1);
    assert_eq!(asker.prompts.load(Ordering::SeqCst), 0, "no password");
    let labels = asker.labels.lock().unwrap();
    assert!(
        labels.iter().any(|l| l.contains("writable for this call")),
        "{labels:?}"
    );
}
