//! A git directory's parent swapped for a link while the command runs (another process of the
//! session moves it, in a mount namespace of its own): the stage applies the command's changes
//! to the directory it found, never to the one the link leads to (TRUST-1).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::git;

use std::path::{Path, PathBuf};

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// A root holding `b/sub/.git`, and a victim repository outside it.
fn setup() -> Option<(tempfile::TempDir, PathBuf, PathBuf)> {
    let t = tempfile::tempdir().unwrap();
    let base = t.path().canonicalize().unwrap();
    let root = base.join("root");
    let victim = base.join("victim");
    for repo in [root.join("b/sub"), victim.join("sub")] {
        std::fs::create_dir_all(&repo).unwrap();
        if !git(&repo, &["init", "-q"]) {
            eprintln!("skipped: no git to make a repository with");
            return None;
        }
    }
    Some((t, root, victim))
}

#[test]
fn changes_are_applied_to_the_git_directory_found_when_a_parent_is_swapped_for_a_link() {
    let Some((_t, root, victim)) = setup() else {
        return;
    };
    let victim_git = victim.join("sub/.git");
    let victim_config = read(&victim_git.join("config"));
    let stage_base = root.parent().unwrap().join("stage");
    let stage = gitstage::Stage::for_roots(&[root.as_path()], &stage_base, &|_, _, _| false)
        .expect("stage");
    let staged = &stage.dirs()[0];
    assert_eq!(staged.path(), root.join("b/sub/.git"));
    // What the command wrote through its private copy: a new branch, and an identity.
    let upper = staged.upper();
    std::fs::create_dir_all(upper.join("refs/heads")).unwrap();
    std::fs::write(
        upper.join("refs/heads/planted"),
        "0123456789012345678901234567890123456789\n",
    )
    .unwrap();
    let config = format!(
        "{}[user]\n\tname = Someone\n",
        read(&staged.path().join("config"))
    );
    std::fs::write(upper.join("config"), config).unwrap();
    // Meanwhile another process moved `b` away and put a link to the victim in its place.
    std::fs::rename(root.join("b"), root.join("b.old")).unwrap();
    std::os::unix::fs::symlink(&victim, root.join("b")).unwrap();

    let report = stage.apply(&[], &|_, _, _| false);

    assert!(
        !victim_git.join("refs/heads/planted").exists(),
        "a ref was written through the link: {report:?}"
    );
    assert_eq!(read(&victim_git.join("config")), victim_config);
    let found = root.join("b.old/sub/.git");
    assert!(found.join("refs/heads/planted").exists(), "{report:?}");
    assert!(
        read(&found.join("config")).contains("Someone"),
        "{report:?}"
    );
    assert!(!found.join("config.lock").exists());
    assert!(!stage_base.exists(), "the staging area is removed");
}

#[test]
fn a_git_directory_reached_only_through_a_link_is_not_staged() {
    let Some((_t, root, victim)) = setup() else {
        return;
    };
    std::os::unix::fs::symlink(&victim, root.join("v")).unwrap();
    let dir = gitstage::GitDir {
        path: root.join("v/sub/.git"),
        objects: None,
    };
    let err = gitstage::Stage::create(
        &root.parent().unwrap().join("stage"),
        std::slice::from_ref(&root),
        &[dir],
    )
    .unwrap_err();
    assert!(matches!(err, gitstage::StageError::Moved { .. }), "{err}");
    assert!(err.to_string().contains("run the call again"), "{err}");
    assert!(!root.parent().unwrap().join("stage").exists());
}

#[test]
fn a_config_locked_by_the_hosts_git_keeps_the_hosts_and_says_so() {
    let Some((_t, root, _victim)) = setup() else {
        return;
    };
    let stage_base = root.parent().unwrap().join("stage");
    let stage = gitstage::Stage::for_roots(&[root.as_path()], &stage_base, &|_, _, _| false)
        .expect("stage");
    let staged = &stage.dirs()[0];
    let real = staged.path().to_owned();
    let before = read(&real.join("config"));
    let config = format!("{before}[user]\n\tname = Someone\n");
    std::fs::write(staged.upper().join("config"), config).unwrap();
    std::fs::write(real.join("config.lock"), "the host's git at work").unwrap();

    let report = stage.apply(&[], &|_, _, _| false);

    assert_eq!(read(&real.join("config")), before);
    assert_eq!(read(&real.join("config.lock")), "the host's git at work");
    assert!(
        report
            .refused
            .iter()
            .any(|r| r.why.contains("config.lock exists")),
        "{report:?}"
    );
}
