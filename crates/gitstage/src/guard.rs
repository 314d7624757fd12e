//! After the call, what the staging could not cover: names the command made where no private
//! copy was — a new repository (`git init`, `git clone`, a bare repository assembled file by
//! file), new auto-run configuration (`.claude/`, `.mcp.json`, `.envrc`, …), a `.gitmodules`
//! whose submodules run a command — are moved aside (`<name>.agent-exec-quarantined`, never
//! deleted, execute bits off) and reported, so a host's git, editor or agent never obeys them.
//!
//! A new repository keeps what git writes for ordinary work: its objects, refs, index, `HEAD`
//! and a `config` holding only allowed keys (crate `allow`); its hooks other than git's
//! `*.sample` files, a `config` with any other key, `commondir`, `config.worktree` and
//! `info/attributes` are moved aside.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use crate::allow;
use crate::beneath;
use crate::config::Git;
use crate::{Quarantined, Report};

/// The suffix a quarantined name gets.
pub const QUARANTINE_SUFFIX: &str = ".agent-exec-quarantined";

/// Moves `path` aside to the first free `<path>.agent-exec-quarantined[.N]`, its files'
/// execute bits off, and records it. `path` is reached from the root of `roots` it lies in
/// without following a link (a concurrent process may have swapped a parent for one): where
/// it cannot be, it is reported unmoved.
pub(crate) fn quarantine(
    roots: &[PathBuf],
    path: &Path,
    why: &str,
    user_may_keep: bool,
    report: &mut Report,
) {
    let moved = move_aside(roots, path);
    report.quarantined.push(Quarantined {
        path: path.display().to_string(),
        moved_to: moved.map(|p| p.display().to_string()),
        why: why.to_owned(),
        user_may_keep,
        roots: roots.to_vec(),
    });
}

/// The most `.N` suffixes tried for a free name.
const FREE_NAMES_MAX: usize = 1000;

/// How deep beneath a quarantined directory execute bits are cleared.
const STRIP_DEPTH: usize = 32;

pub(crate) fn move_aside(roots: &[PathBuf], path: &Path) -> Option<PathBuf> {
    use rustix::fs::RenameFlags;
    let (dir, name) = beneath::open_parent_in(roots, path).ok()?;
    for n in 0..FREE_NAMES_MAX {
        let mut target = name.to_os_string();
        target.push(QUARANTINE_SUFFIX);
        if n > 0 {
            target.push(format!(".{n}"));
        }
        // `NOREPLACE`: a name taken meanwhile is never overwritten.
        match rustix::fs::renameat_with(&dir, name, &dir, &*target, RenameFlags::NOREPLACE) {
            Ok(()) => {
                beneath::strip_execute(dir.as_fd(), &target, STRIP_DEPTH);
                return Some(path.with_file_name(target));
            }
            Err(rustix::io::Errno::EXIST) => {}
            Err(_) => return None,
        }
    }
    None
}

/// A repository the command made: what of it makes git run a program goes aside, in it and in
/// every git directory beneath its `modules/` and `worktrees/`.
pub(crate) fn new_git_dir(roots: &[PathBuf], dir: &Path, git: Option<&Git>, report: &mut Report) {
    one_new_git_dir(roots, dir, git, report);
    let mut stack: Vec<(PathBuf, usize)> = ["modules", "worktrees"]
        .iter()
        .map(|d| (dir.join(d), 0))
        .collect();
    while let Some((path, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for e in entries.flatten() {
            if !e.file_type().is_ok_and(|t| t.is_dir()) || depth > 8 {
                continue;
            }
            if e.path().join("HEAD").symlink_metadata().is_ok() {
                new_git_dir(roots, &e.path(), git, report);
            } else {
                stack.push((e.path(), depth + 1));
            }
        }
    }
}

fn one_new_git_dir(roots: &[PathBuf], dir: &Path, git: Option<&Git>, report: &mut Report) {
    // Its index: `git checkout -- .` writes what it names.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name != "index" && !name.starts_with("sharedindex.") {
                continue;
            }
            let ordinary = beneath::read_path(&e.path(), u64::MAX)
                .is_some_and(|b| crate::index::check(&b).is_ok());
            if !ordinary {
                quarantine(
                    roots,
                    &e.path(),
                    "a new repository's index naming a path git never checks out",
                    false,
                    report,
                );
            }
        }
    }
    let hooks = dir.join("hooks");
    let live_hook = std::fs::read_dir(&hooks).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| !e.file_name().to_string_lossy().ends_with(".sample"))
    });
    if live_hook || hooks.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
        quarantine(
            roots,
            &hooks,
            "a new repository's hooks: git would run them",
            false,
            report,
        );
    }
    for (name, why) in [
        ("commondir", "it points git at another repository's config"),
        ("config.worktree", "git reads it as config"),
        (
            "info/attributes",
            "attributes select filters that run programs",
        ),
    ] {
        let path = dir.join(name);
        if path.symlink_metadata().is_ok() {
            quarantine(roots, &path, why, false, report);
        }
    }
    let config = dir.join("config");
    if config.symlink_metadata().is_err() {
        return;
    }
    let refused = match git {
        None => Some("no system git to check it with".to_owned()),
        Some(git) => match git.list(&config) {
            Err(e) => Some(e),
            Ok(list) => list
                .iter()
                .find(|(k, v)| {
                    let values = [v.clone().unwrap_or_default()];
                    !allow::key_allowed(k, &values, None)
                })
                .map(|(k, _)| format!("it sets {k}, which only the user sets")),
        },
    };
    if let Some(why) = refused {
        quarantine(
            roots,
            &config,
            &format!("a new repository's config: {why}"),
            false,
            report,
        );
    }
}

/// Where the gitlink `link` (`gitdir: PATH`) leads, every link followed; `None` when it is not
/// one or leads nowhere.
pub(crate) fn gitlink_target(link: &Path) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = beneath::read_path(link, 1 << 20)?;
    // As git reads it: everything after `gitdir: `, only trailing line ends removed (a newline
    // inside is part of the path).
    let mut target = bytes.strip_prefix(b"gitdir: ")?;
    while let Some(rest) = target
        .strip_suffix(b"\n")
        .or_else(|| target.strip_suffix(b"\r"))
    {
        target = rest;
    }
    let parent = link.parent()?;
    parent
        .join(std::ffi::OsStr::from_bytes(target))
        .canonicalize()
        .ok()
}

/// A `.gitmodules` the command made or changed: aside when a submodule's `update` runs a
/// command or its URL is not one git fetches without running a program.
pub(crate) fn gitmodules(roots: &[PathBuf], path: &Path, git: Option<&Git>, report: &mut Report) {
    let why = match git {
        None => Some("no system git to check it with".to_owned()),
        Some(git) => match git.list(path) {
            Err(e) => Some(e),
            Ok(list) => list.iter().find_map(|(k, v)| {
                let v = v.clone().unwrap_or_default();
                let bad = (k.ends_with(".update") && v.starts_with('!'))
                    || (k.ends_with(".url") && !allow::url_allowed(&v));
                bad.then(|| format!("{k} = {} would run a program", v.escape_debug()))
            }),
        },
    };
    if let Some(why) = why {
        quarantine(roots, path, &why, false, report);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_quarantined_name_moves_to_a_free_name_without_execute_bits() {
        let dir = tempfile::tempdir().unwrap();
        let hooks = dir.path().join("hooks");
        std::fs::create_dir(&hooks).unwrap();
        std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            hooks.join("pre-commit"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(
            dir.path().join(format!("hooks{QUARANTINE_SUFFIX}")),
            "taken",
        )
        .unwrap();
        let mut report = Report::default();
        quarantine(&[dir.path().to_owned()], &hooks, "why", false, &mut report);
        let moved = dir.path().join(format!("hooks{QUARANTINE_SUFFIX}.1"));
        assert_eq!(
            report.quarantined[0].moved_to.as_deref(),
            Some(moved.to_str().unwrap())
        );
        assert!(!hooks.exists());
        let mode = std::fs::metadata(moved.join("pre-commit"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0);
    }

    #[test]
    fn a_name_behind_a_link_is_reported_unmoved_and_what_the_link_leads_to_is_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let victim = dir.path().join("victim");
        std::fs::create_dir_all(victim.join(".claude")).unwrap();
        std::fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink(&victim, root.join("b")).unwrap();
        let mut report = Report::default();
        quarantine(
            std::slice::from_ref(&root),
            &root.join("b/.claude"),
            "why",
            true,
            &mut report,
        );
        assert_eq!(report.quarantined[0].moved_to, None);
        assert!(victim.join(".claude").is_dir());
        assert!(!victim.join(format!(".claude{QUARANTINE_SUFFIX}")).exists());
    }
}
