//! Other projects' `.env` files under `$HOME` (TRUST-6): found by a bounded walk before the
//! call and hidden from the command like a private location.
//!
//! **Owns:** which files count (named `.env`, `.env.<anything>` or `.envrc`; a symbolic link
//! counts with its target when that lies in `$HOME`), where the walk goes and its bounds. It
//! starts at `$HOME` and reads directories breadth first, at most [`ENV_WALK_DEPTH`] levels
//! down and [`ENV_WALK_ENTRIES`] entries in all, keeping at most [`ENV_FILES_MAX`] files. It
//! never enters a dot-directory, `node_modules`, a symbolic link, the working directory's own
//! project, or a directory the caller names in `skip` (caches, `write_paths`, private
//! locations). The working directory's own project is its git work tree (the nearest
//! ancestor below `$HOME` holding `.git`), else the working directory itself: its own
//! `.env` stays readable.
//! **Refuses to know:** how a hidden file is kept out (`exec`: Landlock splits the read grant
//! of `$HOME` around each hidden path, and the mount view covers it).
//!
//! **Limits, by design:** the sandbox hides paths, not names, so the rule is a list made when
//! the call starts. A `.env` deeper than the walk's depth, past its entry budget, or inside a
//! dot-directory stays readable; the result says when the walk was cut off, and `doctor`
//! shows it. The bounds keep the walk to a few milliseconds, and keep the Landlock rules the
//! split adds (one per entry of each directory on the way to a hidden file) below the
//! entries the walk read.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

/// How many levels below `$HOME` the walk reads (`~/a/b/c/d/.env` is found).
pub const ENV_WALK_DEPTH: usize = 4;
/// At most this many directory entries are read by one walk.
pub const ENV_WALK_ENTRIES: usize = 5_000;
/// At most this many files are hidden; past it the walk counts as cut off.
pub const ENV_FILES_MAX: usize = 256;

/// What the walk found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvFiles {
    /// The files to hide (absolute; a link's target after the link).
    pub files: Vec<PathBuf>,
    /// The walk stopped at its entry or file budget: files past it stay readable. (The depth
    /// is a rule, not a cut-off: deeper files are never looked for.)
    pub cut_off: bool,
}

/// `true` for `.env`, `.env.<anything>` and `.envrc`.
pub fn is_env_file_name(name: &std::ffi::OsStr) -> bool {
    let name = name.as_encoded_bytes();
    name == b".env" || name == b".envrc" || (name.starts_with(b".env.") && name.len() > 5)
}

/// The working directory's own project: the nearest ancestor strictly below `home` that holds
/// `.git`, else `workdir`.
pub fn own_project(workdir: &Path, home: &Path) -> PathBuf {
    workdir
        .ancestors()
        .take_while(|a| a.starts_with(home) && *a != home)
        .find(|a| std::fs::symlink_metadata(a.join(".git")).is_ok())
        .unwrap_or(workdir)
        .to_path_buf()
}

/// Walks `home` for other projects' `.env` files (see the module docs). `workdir` is the
/// working directory; nothing in its own project, and nothing at or below a path of `skip`,
/// is looked at.
pub fn other_projects_env_files(home: &Path, workdir: &Path, skip: &[PathBuf]) -> EnvFiles {
    let own = own_project(workdir, home);
    let excluded = |p: &Path| p.starts_with(&own) || skip.iter().any(|s| p.starts_with(s));
    let mut found = EnvFiles::default();
    let mut budget = ENV_WALK_ENTRIES;
    let mut queue: VecDeque<(PathBuf, usize)> = VecDeque::from([(home.to_path_buf(), 0)]);
    'walk: while let Some((dir, depth)) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if budget == 0 {
                found.cut_off = true;
                break 'walk;
            }
            budget -= 1;
            let name = entry.file_name();
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if is_env_file_name(&name) && !kind.is_dir() && !excluded(&path) {
                if found.files.len() + 2 > ENV_FILES_MAX {
                    found.cut_off = true;
                    break 'walk;
                }
                if kind.is_symlink() {
                    // The link's own path is covered; its target is what a read reaches.
                    if let Ok(target) = std::fs::canonicalize(&path) {
                        if target.starts_with(home) && target != home && !excluded(&target) {
                            found.files.push(target);
                        }
                    }
                }
                found.files.push(path);
                continue;
            }
            let enter = kind.is_dir()
                && depth < ENV_WALK_DEPTH
                && !name.as_encoded_bytes().starts_with(b".")
                && name != "node_modules"
                && !excluded(&path);
            if enter {
                queue.push_back((path, depth + 1));
            }
        }
    }
    found.files.sort();
    found.files.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn env_file_names() {
        for yes in [".env", ".env.local", ".env.production", ".envrc"] {
            assert!(is_env_file_name(OsStr::new(yes)), "{yes}");
        }
        for no in [
            "env",
            ".env.",
            ".environment",
            "x.env",
            ".envrc.bak.d/x",
            ".envs",
        ] {
            assert!(!is_env_file_name(OsStr::new(no)), "{no}");
        }
    }

    fn tree() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().canonicalize().unwrap().join("home");
        for d in [
            "proj/.git",
            "proj/sub",
            "other/.git",
            "other/app",
            "deep/a/b/c/d/e",
        ] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        for f in [
            "proj/.env",
            "proj/sub/.env",
            "other/.env",
            "other/.env.local",
            "other/app/.envrc",
            "other/.env.d/x",
            "deep/a/b/c/.env",
            "deep/a/b/c/d/.env",
            "notes.txt",
        ] {
            let p = home.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "SECRET=1\n").unwrap();
        }
        (t, home)
    }

    #[test]
    fn other_projects_env_files_are_found_and_the_own_project_s_are_not() {
        let (_t, home) = tree();
        let found = other_projects_env_files(&home, &home.join("proj/sub"), &[]);
        assert_eq!(
            found.files,
            vec![
                home.join("deep/a/b/c/.env"),
                home.join("other/.env"),
                home.join("other/.env.local"),
                home.join("other/app/.envrc"),
            ]
        );
        assert!(!found.cut_off, "deep/a/b/c/d is past the depth, by rule");
    }

    #[test]
    fn skipped_directories_and_dot_directories_are_not_entered() {
        let (_t, home) = tree();
        std::fs::create_dir_all(home.join(".config/x")).unwrap();
        std::fs::write(home.join(".config/x/.env"), "").unwrap();
        std::fs::remove_dir_all(home.join("deep")).unwrap();
        let found = other_projects_env_files(&home, &home.join("proj"), &[home.join("other/app")]);
        assert_eq!(
            found.files,
            vec![home.join("other/.env"), home.join("other/.env.local")]
        );
        assert!(!found.cut_off);
    }

    #[test]
    fn a_linked_env_file_hides_its_target_too() {
        let (_t, home) = tree();
        std::fs::create_dir_all(home.join("vault")).unwrap();
        std::fs::write(home.join("vault/real"), "SECRET=2\n").unwrap();
        std::os::unix::fs::symlink(home.join("vault/real"), home.join("other/app/.env")).unwrap();
        let found = other_projects_env_files(&home, &home.join("proj"), &[]);
        assert!(found.files.contains(&home.join("vault/real")), "{found:?}");
        assert!(found.files.contains(&home.join("other/app/.env")));
    }

    #[test]
    fn the_own_project_is_the_nearest_git_work_tree_below_home() {
        let (_t, home) = tree();
        assert_eq!(
            own_project(&home.join("proj/sub"), &home),
            home.join("proj")
        );
        assert_eq!(
            own_project(&home.join("deep/a"), &home),
            home.join("deep/a")
        );
        std::fs::create_dir_all(home.join(".git")).unwrap();
        assert_eq!(
            own_project(&home.join("deep/a"), &home),
            home.join("deep/a"),
            "a repository at $HOME is not a project"
        );
    }

    #[test]
    fn the_entry_budget_cuts_the_walk_off() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().canonicalize().unwrap();
        std::fs::create_dir_all(home.join("big")).unwrap();
        for i in 0..ENV_WALK_ENTRIES {
            std::fs::write(home.join("big").join(i.to_string()), "").unwrap();
        }
        let found = other_projects_env_files(&home, &home.join("w"), &[]);
        assert!(found.cut_off);
    }
}
