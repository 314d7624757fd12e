//! Finding what of a writable root a host obeys without being asked: every `.git` directory at
//! any depth and every bare repository (a directory holding a `HEAD` file, an `objects` and a
//! `refs` directory), which git enters as a repository when a program starts in it; every
//! gitlink (a `.git` file) and `.gitmodules`; and every entry a caller's list names as auto-run
//! configuration (TRUST-2: `.claude/`, `.mcp.json`, `.cargo/config.toml`, …).
//!
//! The walk reads directories only (`getdents`, the entry type from `d_type`; no `stat` per
//! file), never follows a symbolic link, never enters a git directory it found (its
//! submodules' and worktrees' git directories are inside it, in its private copy) nor an
//! auto-run directory, and stops after a budget of entries; the result says when it did, so a
//! caller can report the repositories it could not see.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::FileType;
use std::path::{Path, PathBuf};

/// One git directory found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitDir {
    /// The git directory (a `.git` directory or a bare repository).
    pub path: PathBuf,
    /// Its `objects` directory, when it has one: written through (content-addressed data).
    pub objects: Option<PathBuf>,
}

/// What a host obeys beneath some roots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// Git directories, shallowest first.
    pub dirs: Vec<GitDir>,
    /// Gitlinks: `.git` files (a worktree's or a submodule's pointer to its git directory).
    pub gitlinks: Vec<PathBuf>,
    /// `.git` entries that are symbolic links (git follows them to the git directory).
    pub git_links: Vec<PathBuf>,
    /// `.gitmodules` files.
    pub gitmodules: Vec<PathBuf>,
    /// Entries the caller's classifier named auto-run configuration (files or directories).
    pub autorun: Vec<PathBuf>,
    /// With [`find_changed_since`]: regular files changed since then (their status-change
    /// time) that are executable or that a build runs ([`runs_when_built`]).
    pub executable_changes: Vec<PathBuf>,
    /// The walk stopped at its budget: deeper entries were not seen.
    pub truncated: bool,
    /// Each directory listed, with the directories beneath it the walk entered (absolute and
    /// relative to the root): what a later walk since a time needs to list again only where
    /// entries changed.
    walked: HashMap<PathBuf, Vec<(PathBuf, PathBuf)>>,
    /// Files with a name a build runs, wherever they were listed.
    build_files: Vec<PathBuf>,
}

/// Says whether the entry `name` of the directory `parent` (relative to its root; the root
/// itself is empty) is auto-run configuration; the flag says it is a directory. Called for
/// every entry of the tree: a classifier rejects most names before it builds anything.
pub type Classifier<'a> = &'a dyn Fn(&Path, &OsStr, bool) -> bool;

/// Walks each of `roots` (directories, canonical) for git directories, visiting at most
/// `budget` directories in all (each one's entries are all read: a directory of a million
/// files cannot hide the `.git` beside them).
pub fn find(roots: &[&Path], budget: usize) -> Found {
    find_with(roots, budget, &|_, _, _| false)
}

/// [`find`], also collecting what `autorun` names.
pub fn find_with(roots: &[&Path], budget: usize, autorun: Classifier<'_>) -> Found {
    walk(roots, budget, autorun, None)
}

/// [`find_with`] again, after `earlier` (a walk of the same roots) and since `since`: only a
/// directory whose entries changed since then is listed again (one `lstat` per directory;
/// the others' subdirectories are taken from `earlier`), and the files a user may run that
/// changed are collected — the files of the directories listed, and the files with a name a
/// build runs from `earlier`, each `lstat`ed.
pub fn find_changed_since(
    roots: &[&Path],
    budget: usize,
    autorun: Classifier<'_>,
    earlier: &Found,
    since: std::time::SystemTime,
) -> Found {
    let mut found = walk(roots, budget, autorun, Some((earlier, since)));
    for file in &earlier.build_files {
        // A changed directory was listed again, its files checked there.
        let listed = file.parent().is_some_and(|p| changed_since(p, since));
        if listed || found.executable_changes.contains(file) {
            continue;
        }
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        if changed_and_runnable(file, &name, since) {
            found.executable_changes.push(file.clone());
        }
    }
    found
}

/// Names a build or a package manager runs as code when the user builds or installs the
/// project (TRUST, part b: reported, never refused — the user runs them by choice).
pub fn runs_when_built(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "Makefile",
        "makefile",
        "GNUmakefile",
        "build.rs",
        "Cargo.toml",
        "package.json",
        "setup.py",
        "setup.cfg",
        "pyproject.toml",
        "conftest.py",
        "noxfile.py",
        "tox.ini",
        "CMakeLists.txt",
        "configure",
        "meson.build",
        "build.gradle",
        "build.gradle.kts",
        "settings.gradle",
        "settings.gradle.kts",
        "gradlew",
        "mvnw",
        "pom.xml",
        "Rakefile",
        "Gemfile",
        "Dockerfile",
        "justfile",
        "Justfile",
        "Taskfile.yml",
        "Vagrantfile",
        "build.sbt",
        "deno.json",
        "bunfig.toml",
    ];
    const SUFFIXES: &[&str] = &[".sh", ".mk", ".cmake", ".gemspec", ".bash", ".zsh"];
    NAMES.contains(&name) || SUFFIXES.iter().any(|s| name.ends_with(s))
}

fn walk(
    roots: &[&Path],
    budget: usize,
    autorun: Classifier<'_>,
    after: Option<(&Found, std::time::SystemTime)>,
) -> Found {
    let since = after.map(|(_, since)| since);
    let mut found = Found::default();
    let mut left = budget;
    'roots: for root in roots {
        // Each directory with its path relative to the root, built once per directory.
        let mut stack = vec![(root.to_path_buf(), PathBuf::new())];
        while let Some((dir, dir_rel)) = stack.pop() {
            if left == 0 {
                found.truncated = true;
                break 'roots;
            }
            left -= 1;
            let dir_changed = since.is_some_and(|since| changed_since(&dir, since));
            // Unchanged since the earlier walk: the same subdirectories, nothing new to see.
            if let (Some((earlier, _)), false) = (after, dir_changed) {
                if let Some(children) = earlier.walked.get(&dir) {
                    stack.extend(children.iter().cloned());
                    found.walked.insert(dir, children.clone());
                    continue;
                }
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            // Names as the kernel has them (never lossily converted: a directory whose name is
            // not UTF-8 is walked like any other).
            let mut names: Vec<(OsString, FileType)> = Vec::new();
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                names.push((entry.file_name(), kind));
            }
            if is_bare(&names) && dir.as_path() != *root {
                found.dirs.push(git_dir(&dir));
                continue;
            }
            let mut children = Vec::new();
            for (name, kind) in names {
                if kind.is_dir() && name == ".git" {
                    found.dirs.push(git_dir(&dir.join(&name)));
                } else if kind.is_symlink() && name == ".git" {
                    // git follows it: the git directory it leads to is this work tree's.
                    found.git_links.push(dir.join(&name));
                } else if kind.is_file() && name == ".git" {
                    found.gitlinks.push(dir.join(&name));
                } else if kind.is_file() && name == ".gitmodules" {
                    found.gitmodules.push(dir.join(&name));
                } else if !kind.is_symlink() && autorun(&dir_rel, &name, kind.is_dir()) {
                    found.autorun.push(dir.join(&name));
                } else if kind.is_dir() {
                    children.push((dir.join(&name), dir_rel.join(&name)));
                } else if kind.is_file() {
                    // Entries made, removed or renamed change their directory's time: only in
                    // such a directory, and for the names a build runs, is a file worth a
                    // `stat` (an existing file made executable in place, in a directory
                    // otherwise untouched, is not seen).
                    let text = name.to_string_lossy();
                    let build = runs_when_built(&text);
                    if build {
                        found.build_files.push(dir.join(&name));
                    }
                    if let (Some(since), true) = (since, dir_changed || build) {
                        let path = dir.join(&name);
                        if changed_and_runnable(&path, &text, since) {
                            found.executable_changes.push(path);
                        }
                    }
                }
            }
            stack.extend(children.iter().cloned());
            found.walked.insert(dir, children);
        }
    }
    found.dirs.sort_by_key(|d| d.path.components().count());
    found
}

/// Whether the regular file `path` changed at or after `since` and can be run: an execute bit,
/// or a name a build runs.
fn changed_and_runnable(path: &Path, name: &str, since: std::time::SystemTime) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = path.symlink_metadata() else {
        return false;
    };
    status_changed_since(&meta, since) && (meta.mode() & 0o111 != 0 || runs_when_built(name))
}

/// Whether the directory `dir`'s entries changed at or after `since`.
fn changed_since(dir: &Path, since: std::time::SystemTime) -> bool {
    dir.symlink_metadata()
        .is_ok_and(|meta| status_changed_since(&meta, since))
}

/// Whether `meta`'s status-change time is at or after `since`.
fn status_changed_since(meta: &std::fs::Metadata, since: std::time::SystemTime) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::time::UNIX_EPOCH
        .checked_add(std::time::Duration::new(
            u64::try_from(meta.ctime()).unwrap_or(0),
            u32::try_from(meta.ctime_nsec()).unwrap_or(0),
        ))
        .is_some_and(|ctime| ctime >= since)
}

/// git's own test for a git directory, as loosely as git applies it: `HEAD` (a file or a
/// link), and `objects` and `refs` (directories or links), or a `commondir` naming them.
fn is_bare(names: &[(OsString, FileType)]) -> bool {
    let has = |want: &str| {
        names
            .iter()
            .any(|(n, k)| n == want && (k.is_file() || k.is_dir() || k.is_symlink()))
    };
    has("HEAD") && ((has("objects") && has("refs")) || has("commondir"))
}

fn git_dir(path: &Path) -> GitDir {
    let objects = path.join("objects");
    let real_dir = std::fs::symlink_metadata(&objects).is_ok_and(|m| m.is_dir());
    GitDir {
        path: path.to_owned(),
        objects: real_dir.then_some(objects),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_git_directories_at_any_depth_and_bare_repositories_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in [
            ".git/objects",
            ".git/modules/sub/objects",
            "vendor/lib/.git/refs",
            "evil/objects",
            "evil/refs",
            "ordinary/objects",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("evil/HEAD"), "ref: refs/heads/main\n").unwrap();
        // A `.git` file (a worktree's gitlink) is not a git directory itself.
        std::fs::create_dir_all(root.join("wt")).unwrap();
        std::fs::write(root.join("wt/.git"), "gitdir: ../.git/worktrees/wt\n").unwrap();
        std::fs::write(root.join(".gitmodules"), "").unwrap();
        let found = find(&[root], 10_000);
        let paths: Vec<PathBuf> = found.dirs.iter().map(|d| d.path.clone()).collect();
        assert_eq!(
            paths,
            vec![
                root.join(".git"),
                root.join("evil"),
                root.join("vendor/lib/.git")
            ]
        );
        assert_eq!(found.dirs[0].objects, Some(root.join(".git/objects")));
        assert_eq!(found.dirs[2].objects, None);
        assert_eq!(found.gitlinks, vec![root.join("wt/.git")]);
        assert_eq!(found.gitmodules, vec![root.join(".gitmodules")]);
        assert!(!found.truncated);
        assert!(find(&[root], 3).truncated);
        assert!(!find(&[root], 100).truncated);
    }

    #[test]
    fn files_changed_since_that_run_are_collected() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("old.sh"), "").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let since = std::time::SystemTime::now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/Makefile"), "all:\n").unwrap();
        std::fs::write(root.join("tool"), "").unwrap();
        std::fs::set_permissions(root.join("tool"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::fs::write(root.join("notes.txt"), "").unwrap();
        let earlier = find(&[root], 100);
        let mut found = find_changed_since(&[root], 100, &|_, _, _| false, &earlier, since);
        found.executable_changes.sort();
        assert_eq!(
            found.executable_changes,
            vec![root.join("sub/Makefile"), root.join("tool")]
        );
        assert!(find(&[root], 100).executable_changes.is_empty());
    }

    #[test]
    fn what_the_classifier_names_is_collected_and_not_entered() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".claude/inner")).unwrap();
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/.envrc"), "").unwrap();
        std::fs::write(root.join("sub/ok.txt"), "").unwrap();
        let seen = std::cell::RefCell::new(Vec::new());
        let classify = |parent: &Path, name: &OsStr, _dir: bool| {
            let rel = parent.join(name);
            let hit = rel.ends_with(".claude") || rel.ends_with(".envrc");
            seen.borrow_mut().push(rel);
            hit
        };
        let mut found = find_with(&[root], 100, &classify);
        found.autorun.sort();
        assert_eq!(
            found.autorun,
            vec![root.join(".claude"), root.join("sub/.envrc")]
        );
        assert!(!seen.borrow().contains(&PathBuf::from(".claude/inner")));
    }
}
