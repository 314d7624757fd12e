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
    /// `.gitmodules` files.
    pub gitmodules: Vec<PathBuf>,
    /// Entries the caller's classifier named auto-run configuration (files or directories).
    pub autorun: Vec<PathBuf>,
    /// The walk stopped at its budget: deeper entries were not seen.
    pub truncated: bool,
}

/// Says whether `rel` (a path relative to its root; a directory when the flag is set) is
/// auto-run configuration.
pub type Classifier<'a> = &'a dyn Fn(&Path, bool) -> bool;

/// Walks each of `roots` (directories, canonical) for git directories, reading at most
/// `budget` directory entries in all.
pub fn find(roots: &[&Path], budget: usize) -> Found {
    find_with(roots, budget, &|_, _| false)
}

/// [`find`], also collecting what `autorun` names.
pub fn find_with(roots: &[&Path], budget: usize, autorun: Classifier<'_>) -> Found {
    let mut found = Found::default();
    let mut left = budget;
    'roots: for root in roots {
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut names: Vec<(String, FileType)> = Vec::new();
            for entry in entries.flatten() {
                if left == 0 {
                    found.truncated = true;
                    break;
                }
                left -= 1;
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                names.push((entry.file_name().to_string_lossy().into_owned(), kind));
            }
            if is_bare(&names) && dir.as_path() != *root {
                found.dirs.push(git_dir(&dir));
                continue;
            }
            for (name, kind) in names {
                let path = dir.join(&name);
                let rel = path.strip_prefix(root).unwrap_or(&path);
                if kind.is_dir() && name == ".git" {
                    found.dirs.push(git_dir(&path));
                } else if kind.is_file() && name == ".git" {
                    found.gitlinks.push(path);
                } else if kind.is_file() && name == ".gitmodules" {
                    found.gitmodules.push(path);
                } else if !kind.is_symlink() && autorun(rel, kind.is_dir()) {
                    found.autorun.push(path);
                } else if kind.is_dir() {
                    stack.push(path);
                }
            }
            if found.truncated {
                break 'roots;
            }
        }
    }
    found.dirs.sort_by_key(|d| d.path.components().count());
    found
}

/// `HEAD` a file, `objects` and `refs` directories: git's own test for a git directory.
fn is_bare(names: &[(String, FileType)]) -> bool {
    let has = |want: &str, dir: bool| {
        names
            .iter()
            .any(|(n, k)| n == want && if dir { k.is_dir() } else { k.is_file() })
    };
    has("HEAD", false) && has("objects", true) && has("refs", true)
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
        let classify = |rel: &Path, _dir: bool| {
            seen.borrow_mut().push(rel.to_owned());
            rel.ends_with(".claude") || rel.ends_with(".envrc")
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
