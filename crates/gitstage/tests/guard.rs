//! What the command made where no private copy was, checked after the call (TRUST-1): the
//! check never waits on what the command left (a FIFO), and a root that became a git
//! directory is checked like any new repository.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::git;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

/// Stages `root`, lets `command` act as the command did, and applies; the report, or `None`
/// when applying did not finish within a minute.
fn call(root: &Path, command: impl FnOnce(&Path)) -> Option<gitstage::Report> {
    let stage_base = root.parent().unwrap().join("stage");
    let stage = gitstage::Stage::for_roots(&[root], &stage_base, &|_, _, _| false).unwrap();
    command(root);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(stage.apply(&[], &|_, _, _| false));
    });
    rx.recv_timeout(Duration::from_secs(60)).ok()
}

fn root() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir(&root).unwrap();
    (t, root)
}

#[test]
fn a_fifo_in_a_new_repository_neither_hangs_the_check_nor_hides_the_repositories_after_it() {
    let (_t, root) = root();
    if !git(&root, &["init", "-q", "probe"]) {
        eprintln!("skipped: no git to make a repository with");
        return;
    }
    std::fs::remove_dir_all(root.join("probe")).unwrap();
    let report = call(&root, |root| {
        assert!(git(root, &["init", "-q", "a"]));
        std::fs::remove_file(root.join("a/.git/index")).ok();
        mkfifo(&root.join("a/.git/index"));
        std::fs::remove_file(root.join("a/.git/config")).unwrap();
        mkfifo(&root.join("a/.git/config"));
        assert!(git(root, &["init", "-q", "b/c"]));
        assert!(git(
            &root.join("b/c"),
            &["config", "core.fsmonitor", "touch /tmp/x"]
        ));
    })
    .expect("applying the stage hung on a FIFO");
    let moved = |p: &str| {
        report
            .quarantined
            .iter()
            .any(|q| q.path == root.join(p).display().to_string() && q.moved_to.is_some())
    };
    assert!(moved("b/c/.git/config"), "{report:?}");
    assert!(moved("a/.git/config"), "{report:?}");
}

#[test]
fn a_root_made_into_a_git_directory_is_checked_like_a_new_repository() {
    let (_t, root) = root();
    let report = call(&root, |root| {
        std::fs::create_dir_all(root.join("objects")).unwrap();
        std::fs::create_dir_all(root.join("refs/heads")).unwrap();
        std::os::unix::fs::symlink("refs/heads/main", root.join("HEAD")).unwrap();
        std::fs::write(
            root.join("config"),
            format!(
                "[core]\n\tbare = false\n\tworktree = {}\n\tfsmonitor = touch /tmp/x\n",
                root.display()
            ),
        )
        .unwrap();
    })
    .expect("apply");
    assert!(
        report
            .quarantined
            .iter()
            .any(|q| q.path == root.join("config").display().to_string()),
        "{report:?}"
    );
    assert!(!root.join("config").exists());
}

#[test]
fn a_gitlink_into_a_worktrees_state_is_moved_aside() {
    let (_t, root) = root();
    if !git(&root, &["init", "-q"]) {
        eprintln!("skipped: no git to make a repository with");
        return;
    }
    let stage_base = root.parent().unwrap().join("stage");
    let stage =
        gitstage::Stage::for_roots(&[root.as_path()], &stage_base, &|_, _, _| false).unwrap();
    // A whole repository written as a worktree's refs, and a gitlink to it.
    let planted = stage.dirs()[0].upper().join("worktrees/w/refs/evil");
    std::fs::create_dir_all(planted.join("objects")).unwrap();
    std::fs::create_dir_all(planted.join("refs/heads")).unwrap();
    std::fs::write(planted.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(
        planted.join("config"),
        "[core]\n\tfsmonitor = touch /tmp/x\n",
    )
    .unwrap();
    std::fs::create_dir(root.join("x")).unwrap();
    let target = root.join(".git/worktrees/w/refs/evil");
    std::fs::write(
        root.join("x/.git"),
        format!("gitdir: {}\n", target.display()),
    )
    .unwrap();

    let report = stage.apply(&[], &|_, _, _| false);

    assert!(
        report
            .quarantined
            .iter()
            .any(|q| q.path == root.join("x/.git").display().to_string() && q.moved_to.is_some()),
        "{report:?}"
    );
    assert!(!root.join("x/.git").exists());
}
