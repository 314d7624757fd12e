//! The file-system side of the run_command sandbox (RCS-1…RCS-3): which roots are writable,
//! what stays hidden and what stays read-only inside them, and the pinned `write_paths`.
//!
//! **Owns:** the refusals of roots that would hand over too much (a writable root that is or
//! contains `$HOME`; a `write_paths` entry that is, contains or lies in a private location),
//! pinning every writable root with `openat2(RESOLVE_NO_SYMLINKS)` (a root swapped for a link
//! after this check grants nothing new), the bounded `.git` scan, and creating an empty
//! `.git/hooks` where a repository has none (git would create it on the next `git init`
//! anyway; an absent directory cannot be bound read-only, so a command could plant one).
//! **Refuses to know:** how the sandbox enforces them (`exec`).

use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use argv_policy::{Policy, SHELL_STARTUP_FILES};
use toolscope::{ErrorCode, ToolError};

/// How deep below a writable root `.git` entries are looked for (the root's own, and two
/// levels of subdirectories: a monorepo's vendored checkouts).
pub(crate) const GIT_SCAN_DEPTH: usize = 2;
/// At most this many directory entries are read by one root's scan (a huge tree is scanned
/// only as far as this; what lies deeper stays writable, documented).
const GIT_SCAN_ENTRIES: usize = 20_000;

/// Lexical normalisation: `.` dropped, `..` pops (never above `/`), relative paths taken
/// against `base`.
pub(crate) fn normalize(base: &Path, p: &Path) -> PathBuf {
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    };
    let mut out = PathBuf::from("/");
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// The canonical form of `p` when it exists, else `p`.
pub(crate) fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Opens `path` without following any symbolic link on the way (Linux: `openat2`
/// `RESOLVE_NO_SYMLINKS`; elsewhere the last component not followed).
pub(crate) fn pin(path: &Path) -> std::io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    #[cfg(target_os = "linux")]
    let fd = rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        rustix::fs::ResolveFlags::NO_SYMLINKS | rustix::fs::ResolveFlags::NO_MAGICLINKS,
    )?;
    #[cfg(not(target_os = "linux"))]
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok(fd)
}

fn path_error(message: String) -> ToolError {
    ToolError::new(ErrorCode::ExecPathInvalid, message)
}

/// A writable root that is `$HOME` or contains it is refused: the whole home (its startup
/// files, its private locations) would be writable.
pub(crate) fn refuse_home_root(root: &Path, home: &Path, what: &str) -> Result<(), ToolError> {
    if home.starts_with(root) {
        return Err(path_error(format!(
            "{what} {} is your home directory or contains it, which run_command never makes \
             writable (shell startup files, keys and tokens live there); pick the project \
             directory instead",
            root.display()
        )));
    }
    Ok(())
}

/// One approved `write_paths` entry, pinned.
#[derive(Debug)]
pub(crate) struct WritePath {
    /// Absolute, normalised, as the kernel names the pinned file.
    pub(crate) path: PathBuf,
    pub(crate) fd: Arc<OwnedFd>,
    /// Inside `$HOME` (confirmation) or not (password).
    pub(crate) in_home: bool,
}

/// Checks and pins each `write_paths` entry (taken against the working directory): it must
/// exist, have no symbolic link on the way, not be `$HOME` or hold it, and not be, hold or lie
/// inside a private location.
pub(crate) fn write_paths(
    entries: &[String],
    workdir: &Path,
    home: &Path,
    private: &[PathBuf],
) -> Result<Vec<WritePath>, ToolError> {
    let mut out = Vec::new();
    for e in entries {
        let path = normalize(workdir, Path::new(e));
        let fd = pin(&path).map_err(|err| {
            path_error(format!(
                "write_paths entry {e:?} ({}) cannot be opened without following a symbolic \
                 link: {err}; give the real, existing path",
                path.display()
            ))
        })?;
        #[cfg(target_os = "linux")]
        let real = {
            use std::os::fd::AsFd;
            fsguard::kernel_path(fd.as_fd()).unwrap_or_else(|| path.clone())
        };
        #[cfg(not(target_os = "linux"))]
        let real = canonical(&path);
        refuse_home_root(&real, home, "write_paths entry")?;
        if let Some(p) = private
            .iter()
            .find(|p| real.starts_with(p) || p.starts_with(&real))
        {
            return Err(path_error(format!(
                "write_paths entry {} is, contains or lies inside the private location {} \
                 (keys, tokens, histories), which no command may write; name a directory \
                 without private data",
                real.display(),
                p.display()
            )));
        }
        let in_home = real.starts_with(home);
        out.push(WritePath {
            path: real,
            fd: Arc::new(fd),
            in_home,
        });
    }
    Ok(out)
}

/// The toolchains' cache directories that exist as real directories (no link on the way).
pub(crate) fn caches(policy: &Policy, home: &Path) -> Vec<(PathBuf, OwnedFd)> {
    policy
        .cache_paths(home)
        .into_iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .filter_map(|p| pin(&p).ok().map(|fd| (p, fd)))
        .collect()
}

/// The paths of RCS-3 that stay read-only inside `roots`, creating an empty `.git/hooks`
/// where a `.git` directory has none.
pub(crate) fn protected(roots: &[PathBuf], home: &Path, host: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for root in roots {
        let mut gits = Vec::new();
        scan_git(root, 0, &mut gits, &mut 0);
        for git in gits {
            let parent = git.parent().map(Path::to_path_buf).unwrap_or_default();
            let meta = std::fs::symlink_metadata(&git);
            if meta.as_ref().is_ok_and(|m| m.is_dir()) {
                let hooks = git.join("hooks");
                if std::fs::symlink_metadata(&hooks).is_err() {
                    let _ = std::fs::create_dir(&hooks);
                }
                out.push(hooks);
                out.push(git.join("config"));
            } else {
                // A `.git` file points git at another directory: rewriting it would redirect
                // git to planted hooks.
                out.push(git.clone());
            }
            out.push(parent.join(".gitmodules"));
        }
        for f in SHELL_STARTUP_FILES {
            let p = home.join(f);
            if p.starts_with(root) {
                out.push(p);
            }
        }
    }
    out.extend(host.iter().cloned());
    out.retain(|p| std::fs::symlink_metadata(p).is_ok());
    out.sort();
    out.dedup();
    out
}

/// Startup files a writable root holds that do not exist: a command could create them, and a
/// missing path cannot be bound read-only, so such a root is refused.
pub(crate) fn missing_startup_files(root: &Path, home: &Path) -> Option<PathBuf> {
    SHELL_STARTUP_FILES
        .iter()
        .map(|f| home.join(f))
        .find(|p| p.starts_with(root) && std::fs::symlink_metadata(p).is_err())
}

fn scan_git(dir: &Path, depth: usize, found: &mut Vec<PathBuf>, budget: &mut usize) {
    let git = dir.join(".git");
    if std::fs::symlink_metadata(&git).is_ok() {
        found.push(git);
    }
    if depth >= GIT_SCAN_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        *budget += 1;
        if *budget > GIT_SCAN_ENTRIES {
            return;
        }
        if entry.file_name() == ".git" {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            scan_git(&entry.path(), depth + 1, found, budget);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(
            normalize(Path::new("/w"), Path::new("a/../b/./c")),
            PathBuf::from("/w/b/c")
        );
        assert_eq!(
            normalize(Path::new("/w"), Path::new("../../..")),
            PathBuf::from("/")
        );
    }

    #[test]
    fn a_root_holding_home_is_refused() {
        let h = Path::new("/home/u");
        assert!(refuse_home_root(Path::new("/home/u"), h, "x").is_err());
        assert!(refuse_home_root(Path::new("/home"), h, "x").is_err());
        assert!(refuse_home_root(Path::new("/home/u/p"), h, "x").is_ok());
    }

    #[test]
    fn protected_finds_git_up_to_depth_two_and_creates_missing_hooks() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), "").unwrap();
        std::fs::create_dir_all(root.join("a/b/.git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("a/b/c/.git/hooks")).unwrap();
        std::fs::write(root.join(".gitmodules"), "").unwrap();
        let p = protected(
            std::slice::from_ref(&root),
            Path::new("/nonexistent-home"),
            &[],
        );
        assert!(p.contains(&root.join(".git/hooks")), "{p:?}");
        assert!(root.join(".git/hooks").is_dir());
        assert!(p.contains(&root.join(".git/config")));
        assert!(p.contains(&root.join(".gitmodules")));
        assert!(p.contains(&root.join("a/b/.git/hooks")));
        assert!(
            !p.contains(&root.join("a/b/c/.git/hooks")),
            "depth 3 is not scanned"
        );
    }

    #[test]
    fn write_paths_refuse_private_home_and_links() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().canonicalize().unwrap().join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(home.join("data")).unwrap();
        let private = vec![home.join(".ssh")];
        let w = home.join("proj");
        std::fs::create_dir_all(&w).unwrap();
        let ok = write_paths(&["../data".into()], &w, &home, &private).unwrap();
        assert_eq!(ok[0].path, home.join("data"));
        assert!(ok[0].in_home);
        for bad in [home.join(".ssh"), home.clone(), t.path().to_path_buf()] {
            let e = bad.to_string_lossy().into_owned();
            assert!(write_paths(&[e], &w, &home, &private).is_err(), "{bad:?}");
        }
        std::os::unix::fs::symlink(home.join("data"), home.join("link")).unwrap();
        assert!(write_paths(&["../link".into()], &w, &home, &private).is_err());
    }
}
