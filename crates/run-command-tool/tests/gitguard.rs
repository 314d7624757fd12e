//! The git guard end to end (issue 18, RCS-3, RC-4): a run_command call never leaves behind git
//! metadata that makes git run a program (the reviewer's reproductions fail), while `git init`,
//! `git add` and `git commit`, in the workspace and in a nested repository, keep working and
//! quarantine nothing. No survivors.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{args, call, fixture};
use run_command_tool::{DenyAllAsker, Mode, RunCommandOutput};

const GIT: &str = "git -c user.name=t -c user.email=t@example.invalid";

async fn sh(script: &str, dir: &Path, home: &Path) -> RunCommandOutput {
    call(
        args(&["sh", "-c", script]),
        dir,
        home,
        Mode::AllowAll,
        &DenyAllAsker,
    )
    .await
    .unwrap()
}

fn git_on_host(dir: &Path, a: &[&str]) {
    let ok = std::process::Command::new("git")
        .args(a)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "git {a:?}");
}

fn have_git() -> bool {
    std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// What the git guard and the staging's guard of new names moved aside (TRUST-1).
fn quarantined_paths(out: &RunCommandOutput) -> Vec<String> {
    out.quarantined
        .iter()
        .map(|q| q.path.clone())
        .chain(out.git.quarantined.iter().map(|q| q.path.clone()))
        .collect()
}

/// Whether `p` or a directory above it was moved aside.
fn moved_aside(q: &[String], p: &Path) -> bool {
    p.ancestors()
        .any(|a| q.contains(&a.to_string_lossy().into_owned()))
}

#[tokio::test(flavor = "multi_thread")]
async fn git_init_add_commit_and_a_nested_repo_work_and_quarantine_nothing() {
    if !testkit::sandbox_available() || !have_git() {
        eprintln!("SKIP: no sandbox or no git");
        return;
    }
    let f = fixture();
    let marker = testkit::marker();
    let out = sh(
        &format!(
            "set -e; git init -q; echo a > a; git add a; {GIT} commit -qm one; \
             git init -q sub; echo b > sub/b; cd sub; git add b; {GIT} commit -qm two; cd ..; \
             git log --oneline | wc -l; (sleep {marker} &) ; echo done"
        ),
        &f.proj,
        &f.home,
    )
    .await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert!(out.quarantined.is_empty(), "{:?}", out.quarantined);
    assert!(out.message.is_none(), "{:?}", out.message);
    assert!(f.proj.join(".git/hooks/pre-commit.sample").exists());
    assert!(f.proj.join("sub/.git/config").exists());
    // A second call on the now existing repositories commits again.
    let out = sh(
        &format!("set -e; echo c >> a; {GIT} commit -qam three; git status --short"),
        &f.proj,
        &f.home,
    )
    .await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert!(out.quarantined.is_empty(), "{:?}", out.quarantined);
    assert!(testkit::alive_with(&marker).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn hooks_planted_in_a_repository_made_during_the_call_are_quarantined() {
    if !testkit::sandbox_available() || !have_git() {
        eprintln!("SKIP: no sandbox or no git");
        return;
    }
    let f = fixture();
    // The reviewer's finding 3: no .git at the start, and a nested repo made in the call.
    let out = sh(
        "mkdir -p .git/hooks; printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit; \
         chmod +x .git/hooks/pre-commit; git init -q; git init -q sub; \
         cp .git/hooks/pre-commit sub/.git/hooks/post-checkout; \
         printf '[core]\\n\\tfsmonitor = /tmp/evil\\n' >> sub/.git/config; echo ok",
        &f.proj,
        &f.home,
    )
    .await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let q = quarantined_paths(&out);
    for p in [
        f.proj.join(".git/hooks/pre-commit"),
        f.proj.join("sub/.git/hooks/post-checkout"),
        f.proj.join("sub/.git/config"),
    ] {
        assert!(moved_aside(&q, &p), "{p:?} in {q:?}");
        assert!(!p.exists(), "{p:?} still there");
    }
    let moved = f.proj.join(".git/hooks.agent-exec-quarantined/pre-commit");
    let mode = std::fs::metadata(&moved).unwrap().permissions().mode();
    assert_eq!(mode & 0o111, 0, "execute bits stripped");
    assert!(
        out.git.quarantined.iter().any(|q| q.why.contains("hooks")),
        "{:?}",
        out.git
    );
    // The repository still works: git status runs no hook and sees no fsmonitor.
    git_on_host(&f.proj.join("sub"), &["status", "--short"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn commondir_config_worktree_and_deep_repos_cannot_make_git_run_a_program() {
    if !testkit::sandbox_available() || !have_git() {
        eprintln!("SKIP: no sandbox or no git");
        return;
    }
    let f = fixture();
    git_on_host(&f.proj, &["init", "-q"]);
    let deep = f.proj.join("a/b/c/deep");
    std::fs::create_dir_all(&deep).unwrap();
    git_on_host(&deep, &["init", "-q"]);
    std::fs::create_dir_all(f.proj.join(".git/modules/m/hooks")).unwrap();
    std::fs::write(f.proj.join(".git/modules/m/config"), "[core]\n").unwrap();
    // The reviewer's finding 2: commondir to an attacker git dir, config.worktree with
    // core.fsmonitor; finding 3: a repository three levels down, submodules' git dirs.
    let out = sh(
        "mkdir -p evil/hooks; echo x > evil/hooks/pre-commit; \
         printf '[core]\\n\\thooksPath = /tmp/x\\n' > evil/config; \
         echo ../evil > .git/commondir; \
         printf '[core]\\n\\tfsmonitor = /tmp/evil\\n' > .git/config.worktree; \
         echo x > a/b/c/deep/.git/hooks/pre-commit; \
         echo x > .git/modules/m/hooks/post-checkout; \
         echo '[alias] st = !sh' >> .git/modules/m/config; \
         echo '[alias] st = !sh' >> a/b/c/deep/.git/config; echo end",
        &f.proj,
        &f.home,
    )
    .await;
    assert!(out.executed, "{out:?}");
    // The git directories were private copies for the whole call (TRUST-1): the new names
    // never reached them and are reported as refused.
    let refused: Vec<&str> = out.git.refused.iter().map(|r| r.path.as_str()).collect();
    for p in [".git/commondir", ".git/config.worktree"] {
        let p = f.proj.join(p);
        assert!(
            refused.contains(&p.to_string_lossy().as_ref()),
            "{p:?} in {refused:?}"
        );
        assert!(!p.exists());
    }
    // Existing repositories at any depth and submodules' git dirs are read-only.
    assert!(
        !deep.join(".git/hooks/pre-commit").exists(),
        "{}",
        out.output
    );
    assert!(!f.proj.join(".git/modules/m/hooks/post-checkout").exists());
    assert_eq!(
        std::fs::read_to_string(f.proj.join(".git/modules/m/config")).unwrap(),
        "[core]\n"
    );
    assert!(
        !std::fs::read_to_string(deep.join(".git/config"))
            .unwrap()
            .contains("alias")
    );
    git_on_host(&f.proj, &["status", "--short"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn rm_of_repository_metadata_is_refused_and_nothing_moves() {
    let f = fixture();
    std::fs::create_dir_all(f.proj.join(".git/hooks")).unwrap();
    std::fs::write(f.proj.join(".git/config"), "").unwrap();
    std::fs::create_dir_all(f.proj.join("vendor/lib/.git")).unwrap();
    std::fs::write(f.proj.join(".gitmodules"), "").unwrap();
    for argv in [
        &["rm", "-r", ".git"][..],
        &["rm", ".git/config"],
        &["rm", "-r", ".git/hooks"],
        &["rm", "-r", "vendor"],
        &["rm", ".gitmodules"],
    ] {
        let e = call(args(argv), &f.proj, &f.home, Mode::Auto, &DenyAllAsker)
            .await
            .unwrap_err();
        assert_eq!(e.code().as_str(), "RUN_COMMAND_RM_INVALID", "{argv:?}");
        assert!(
            e.message().contains("repository metadata"),
            "{}",
            e.message()
        );
    }
    assert!(f.proj.join(".git/config").exists());
    assert!(f.proj.join("vendor/lib/.git").is_dir());
    assert!(f.proj.join(".gitmodules").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_private_location_cannot_be_the_working_directory() {
    let f = fixture();
    let e = call(
        args(&["ls"]),
        &f.home.join(".ssh"),
        &f.home,
        Mode::AllowAll,
        &DenyAllAsker,
    )
    .await
    .unwrap_err();
    assert!(
        e.message()
            .contains("a private location cannot be the working directory"),
        "{}",
        e.message()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_in_the_label_of_a_call_that_did_not_run_is_masked() {
    let f = fixture();
    let token = format!("ghp_{}", "Ab1".repeat(12));
    let out = call(
        args(&[
            "curl",
            "-H",
            &format!("Authorization: token {token}"),
            "https://x.invalid",
        ]),
        &f.proj,
        &f.home,
        Mode::Safe,
        &DenyAllAsker,
    )
    .await
    .unwrap();
    assert!(!out.executed, "{out:?}");
    assert!(out.label.contains("curl"), "{}", out.label);
    assert!(!out.label.contains(&token), "{}", out.label);
    assert!(!out.message.unwrap_or_default().contains(&token));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_linked_worktree_and_its_commondir_are_not_quarantined() {
    if !testkit::sandbox_available() || !have_git() {
        eprintln!("SKIP: no sandbox or no git");
        return;
    }
    let f = fixture();
    git_on_host(&f.proj, &["init", "-q"]);
    std::fs::write(f.proj.join("a"), "a").unwrap();
    git_on_host(&f.proj, &["add", "a"]);
    git_on_host(
        &f.proj,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e.invalid",
            "commit",
            "-qm",
            "one",
        ],
    );
    let out = sh(
        "git worktree add -q wt && git -C wt status --short && echo ok",
        &f.proj,
        &f.home,
    )
    .await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert!(out.quarantined.is_empty(), "{:?}", out.quarantined);
    assert!(f.proj.join("wt/.git").is_file());
    // A .git file made to point outside the writable roots is quarantined.
    let out = sh(
        &format!(
            "mkdir other && echo 'gitdir: {}' > other/.git",
            f.outside.display()
        ),
        &f.proj,
        &f.home,
    )
    .await;
    assert_eq!(
        quarantined_paths(&out),
        [f.proj.join("other/.git").to_string_lossy()]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_dropped_while_its_command_runs_still_quarantines() {
    if !testkit::sandbox_available() || !have_git() {
        eprintln!("SKIP: no sandbox or no git");
        return;
    }
    let f = fixture();
    let marker = testkit::marker();
    let hook = f.proj.join(".git/hooks/pre-commit");
    let script = format!(
        "git init -q && echo x > .git/hooks/pre-commit.tmp && \
         mv .git/hooks/pre-commit.tmp .git/hooks/pre-commit && sleep {marker}"
    );
    let call = sh(&script, &f.proj, &f.home);
    let planted = async {
        while !hook.exists() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        out = call => panic!("the command ended on its own: {out:?}"),
        () = planted => {}
    }
    // The call's future is dropped here: its tree is stopped, then the guard ran.
    assert!(!hook.exists(), "the planted hook stayed");
    assert!(
        f.proj
            .join(".git/hooks/pre-commit.agent-exec-quarantined")
            .exists()
    );
    assert!(testkit::alive_with(&marker).is_empty());
}

#[test]
fn every_test_also_holds_unprivileged() {
    if !testkit::is_root() {
        return;
    }
    let text = testkit::run_as_nobody(&["--skip", "every_test_also_holds_unprivileged"], &[]);
    assert!(text.contains("test result: ok"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_git_key_is_applied_only_after_the_user_confirms_it_by_name() {
    // TRUST-1 — in run_command a key beyond the allowlist needs a confirmation that
    // names it; without one (or with a no) it stays refused and the repository unchanged.
    if !testkit::sandbox_available() || !have_git() {
        eprintln!("SKIP: no sandbox or no git");
        return;
    }
    let f = fixture();
    git_on_host(&f.proj, &["init", "-q"]);
    let argv = ["git", "config", "core.hooksPath", ".githooks"];
    let refused = call(args(&argv), &f.proj, &f.home, Mode::AllowAll, &DenyAllAsker)
        .await
        .unwrap();
    assert_eq!(refused.git.refused.len(), 1, "{:?}", refused.git);
    let config = std::fs::read_to_string(f.proj.join(".git/config")).unwrap();
    assert!(!config.contains("hooksPath"), "{config}");

    let asker = common::Scripted::yes();
    let out = call(args(&argv), &f.proj, &f.home, Mode::AllowAll, &asker)
        .await
        .unwrap();
    let labels = asker.labels.lock().unwrap().clone();
    assert_eq!(labels.len(), 1, "{labels:?}");
    assert!(labels[0].contains("core.hookspath=.githooks"), "{labels:?}");
    assert!(out.git.refused.is_empty(), "{:?}", out.git);
    assert!(
        out.git.applied[0].change.contains("confirmed"),
        "{:?}",
        out.git
    );
    let config = std::fs::read_to_string(f.proj.join(".git/config")).unwrap();
    assert!(config.contains("hookspath = .githooks"), "{config}");
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_run_configuration_a_command_made_stays_only_on_a_yes_that_names_it() {
    // TRUST-2 — `.mcp.json` written by a run_command call is moved aside, and put back
    // only when the user confirms keeping that file.
    if !testkit::sandbox_available() {
        eprintln!("SKIP: no sandbox");
        return;
    }
    let f = fixture();
    let argv = ["sh", "-c", "echo '{}' > .mcp.json"];
    let out = call(args(&argv), &f.proj, &f.home, Mode::AllowAll, &DenyAllAsker)
        .await
        .unwrap();
    assert!(!f.proj.join(".mcp.json").exists(), "{:?}", out.git);
    assert_eq!(out.git.quarantined.len(), 1, "{:?}", out.git);

    let f = fixture();
    let asker = common::Scripted::yes();
    let out = call(args(&argv), &f.proj, &f.home, Mode::AllowAll, &asker)
        .await
        .unwrap();
    let labels = asker.labels.lock().unwrap().clone();
    assert!(labels.iter().any(|l| l.contains(".mcp.json")), "{labels:?}");
    assert_eq!(
        std::fs::read_to_string(f.proj.join(".mcp.json")).unwrap(),
        "{}\n"
    );
    assert!(out.git.quarantined.is_empty(), "{:?}", out.git);
}
