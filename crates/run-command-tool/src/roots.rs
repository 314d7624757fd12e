//! The file-system side of the run_command sandbox (RCS-1…RCS-3): which roots are writable,
//! what stays hidden and what stays read-only inside them, and the pinned `write_paths` with
//! what each costs the user (TRUST-5, RC-10: a confirmation or the password).
//!
//! **Owns:** the refusals of roots that would hand over too much (a writable root that is or
//! contains `$HOME`; a `write_paths` entry that is, contains or lies in a private location),
//! pinning every writable root with `openat2(RESOLVE_NO_SYMLINKS)` (a root swapped for a link
//! after this check grants nothing new), the bounded `.git` scan, and creating an empty
//! `.git/hooks` where a repository has none (git would create it on the next `git init`
//! anyway; an absent directory cannot be bound read-only, so a command could plant one).
//! It also owns the classification of a `write_paths` entry ([`classify_write_path`]): under
//! `$HOME` only a directory no host program reads as configuration or code is confirmed;
//! every other one needs the password, like a path outside `$HOME`.
//! **Refuses to know:** how the sandbox enforces them (`exec`) and how the gate asks (`gate`).

use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use argv_policy::SHELL_STARTUP_FILES;
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
    /// What the user must give before it is writable (TRUST-5, RC-10).
    pub(crate) gate: WriteGate,
}

/// What a `write_paths` entry costs the user (TRUST-5, RC-10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WriteGate {
    /// A directory under `$HOME` that no host program reads as configuration or code: a
    /// confirmation (none under `allow-all`).
    Confirm,
    /// The system password, whatever the mode, for the reason given.
    Password(NeedsPassword),
}

/// Why a `write_paths` entry needs the password (TRUST-5, RC-10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NeedsPassword {
    /// Outside `$HOME` (RC-10).
    OutsideHome,
    /// `$HOME` itself.
    Home,
    /// A dot-directory under `$HOME` or something beneath one: programs read these as
    /// configuration (`~/.config`), code (`~/.local/lib/python*/site-packages/*.pth`) or
    /// programs (`~/.local/bin`).
    DotDirectory,
    /// `~/bin` or `~/Library` (or beneath): a program directory and macOS's configuration tree.
    HomeProgramOrConfig,
    /// A directory on the host's `PATH`, beneath one, or holding one: a program planted there
    /// runs in place of the real one (a fake `git`).
    OnPath(PathBuf),
    /// Inside an installation prefix whose `bin` is on the host's `PATH` (`~/miniconda3` for
    /// `~/miniconda3/bin`): its libraries are loaded by the programs on `PATH`.
    InstallPrefix(PathBuf),
    /// Holds another git repository (a `.git` below the entry's own): a host's git obeys
    /// that repository's hooks and configuration.
    HoldsRepository(PathBuf),
    /// The walk for other repositories was cut off (too deep, too many entries, or a
    /// directory it could not read), so the entry may hold one.
    WalkCutOff,
    /// A link a host program follows leads into it: a startup file of `$HOME` (`~/.bashrc` →
    /// `~/dotfiles/bashrc`) or a program on `PATH` (`~/.local/bin/tool` → `~/apps/tool/bin`).
    LinkedFrom(PathBuf),
}

impl NeedsPassword {
    /// The reason, as the gate's label shows it.
    pub(crate) fn describe(&self) -> String {
        match self {
            NeedsPassword::OutsideHome => "outside $HOME".to_owned(),
            NeedsPassword::Home => "$HOME itself".to_owned(),
            NeedsPassword::DotDirectory => {
                "a dot-directory of $HOME, which programs read as configuration or code".to_owned()
            }
            NeedsPassword::HomeProgramOrConfig => {
                "a directory of $HOME that holds programs or configuration".to_owned()
            }
            NeedsPassword::OnPath(dir) => {
                format!("on, below or above {} on your PATH", dir.display())
            }
            NeedsPassword::InstallPrefix(prefix) => format!(
                "inside {}, whose programs are on your PATH and load code from it",
                prefix.display()
            ),
            NeedsPassword::HoldsRepository(git) => {
                format!("holds another git repository ({})", git.display())
            }
            NeedsPassword::LinkedFrom(link) => format!(
                "where {} leads (a link host programs follow)",
                link.display()
            ),
            NeedsPassword::WalkCutOff => format!(
                "not checked whole for other git repositories (more than {REPO_WALK_ENTRIES} \
                 entries, deeper than {REPO_WALK_DEPTH} levels, or an unreadable directory)"
            ),
        }
    }
}

/// Directories right below `$HOME` that hold programs or configuration without a leading dot.
const HOME_PROGRAM_OR_CONFIG: &[&str] = &["bin", "Library"];

/// How deep below a `write_paths` entry the walk for other repositories goes. Deeper
/// directories are not read: when one exists the walk counts as cut off.
pub(crate) const REPO_WALK_DEPTH: usize = 8;
/// At most this many directory entries are read by that walk; past it the walk is cut off.
pub(crate) const REPO_WALK_ENTRIES: usize = 20_000;

/// Classifies one `write_paths` entry (TRUST-5, RC-10). `real` and `home` are absolute and
/// normalised; `path_dirs` are the host's `PATH` entries (relative ones are ignored, and each
/// is compared as written and, when it exists, canonical).
///
/// Under `$HOME` only a directory no host program reads as configuration or code gets the
/// confirmation: not `$HOME`, no component starting with `.`, not `~/bin` or `~/Library`,
/// not on, below or above a `PATH` directory, not inside the prefix of a `PATH` directory
/// named `bin`/`sbin` (when that prefix lies strictly below `$HOME`), and holding no other
/// git repository within a walk of [`REPO_WALK_DEPTH`] levels and [`REPO_WALK_ENTRIES`]
/// entries. A cut-off walk needs the password. Everything else needs the password.
pub(crate) fn classify_write_path(real: &Path, home: &Path, path_dirs: &[PathBuf]) -> WriteGate {
    let why = lexical_write_class(real, home, path_dirs)
        .or_else(|| linked_into(real, home, path_dirs).map(NeedsPassword::LinkedFrom));
    match why {
        Some(why) => WriteGate::Password(why),
        None => match other_repository(real) {
            RepoWalk::None => WriteGate::Confirm,
            RepoWalk::Found(git) => WriteGate::Password(NeedsPassword::HoldsRepository(git)),
            RepoWalk::CutOff => WriteGate::Password(NeedsPassword::WalkCutOff),
        },
    }
}

/// The directories of a `PATH` value, a leading `~` read as `$HOME` (bash searches such an
/// entry there).
pub(crate) fn path_dirs(path: &std::ffi::OsStr, home: &Path) -> Vec<PathBuf> {
    std::env::split_paths(path)
        .map(|d| match d.strip_prefix("~") {
            Ok(rest) => home.join(rest),
            Err(_) => d,
        })
        .collect()
}

/// The most entries of one directory [`linked_into`] reads.
const LINKS_LISTED_MAX: usize = 10_000;

/// A link that leads into `real` from where host programs follow links without being asked:
/// the dot-entries of `$HOME` and of `~/.config` (startup files, configuration), and the
/// entries of the `PATH` directories below `$HOME` (programs).
fn linked_into(real: &Path, home: &Path, path_dirs: &[PathBuf]) -> Option<PathBuf> {
    let home_dots = |dir: &Path, dots_only: bool| -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .take(LINKS_LISTED_MAX)
            .filter(|e| !dots_only || e.file_name().as_encoded_bytes().starts_with(b"."))
            .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
            .map(|e| e.path())
            .collect()
    };
    let mut links = home_dots(home, true);
    links.extend(home_dots(&home.join(".config"), false));
    for dir in path_dirs
        .iter()
        .filter(|d| d.is_absolute() && d.starts_with(home))
    {
        links.extend(home_dots(dir, false));
    }
    links
        .into_iter()
        .find(|link| link.canonicalize().is_ok_and(|t| t.starts_with(real)))
}

/// The rules of [`classify_write_path`] that need no walk: `Some` when the password is
/// needed.
pub(crate) fn lexical_write_class(
    real: &Path,
    home: &Path,
    path_dirs: &[PathBuf],
) -> Option<NeedsPassword> {
    let Ok(below) = real.strip_prefix(home) else {
        return Some(NeedsPassword::OutsideHome);
    };
    let names: Vec<&std::ffi::OsStr> = below
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    let Some(first) = names.first() else {
        return Some(NeedsPassword::Home);
    };
    if names.iter().any(|n| n.as_encoded_bytes().starts_with(b".")) {
        return Some(NeedsPassword::DotDirectory);
    }
    if HOME_PROGRAM_OR_CONFIG.iter().any(|d| first == d) {
        return Some(NeedsPassword::HomeProgramOrConfig);
    }
    for dir in path_dirs.iter().filter(|d| d.is_absolute()) {
        let lexical = normalize(Path::new("/"), dir);
        for d in [lexical.clone(), canonical(&lexical)] {
            if real.starts_with(&d) || d.starts_with(real) {
                return Some(NeedsPassword::OnPath(d));
            }
            let is_bin = d.file_name().is_some_and(|n| n == "bin" || n == "sbin");
            if let Some(prefix) = d
                .parent()
                .filter(|p| is_bin && p.starts_with(home) && *p != home)
            {
                if real.starts_with(prefix) {
                    return Some(NeedsPassword::InstallPrefix(prefix.to_path_buf()));
                }
            }
        }
    }
    None
}

/// What the walk for other repositories found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RepoWalk {
    None,
    Found(PathBuf),
    CutOff,
}

/// Looks below `root` for a `.git` other than `root/.git` (which is the entry's own
/// repository, staged by the git guard like the working directory's). Symbolic links are not
/// followed: a write through one reaches only what another grant allows.
pub(crate) fn other_repository(root: &Path) -> RepoWalk {
    let mut budget = REPO_WALK_ENTRIES;
    let mut stack: Vec<(PathBuf, usize)> = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return RepoWalk::CutOff;
        };
        for entry in entries {
            let Ok(entry) = entry else {
                return RepoWalk::CutOff;
            };
            if budget == 0 {
                return RepoWalk::CutOff;
            }
            budget -= 1;
            let path = entry.path();
            if entry.file_name() == ".git" {
                if depth > 0 {
                    return RepoWalk::Found(path);
                }
                continue;
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                if depth + 1 >= REPO_WALK_DEPTH {
                    return RepoWalk::CutOff;
                }
                stack.push((path, depth + 1));
            }
        }
    }
    RepoWalk::None
}

/// Checks and pins each `write_paths` entry (taken against the working directory): it must
/// exist, have no symbolic link on the way, not be `$HOME` or hold it, and not be, hold or lie
/// inside a private location. Each is classified by [`classify_write_path`] against the
/// host's `PATH` directories `path_dirs`.
pub(crate) fn write_paths(
    entries: &[String],
    workdir: &Path,
    home: &Path,
    private: &[PathBuf],
    path_dirs: &[PathBuf],
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
                 (keys, tokens, histories, or the host's own state), which no command may \
                 write; name a directory without private data",
                real.display(),
                p.display()
            )));
        }
        // The system temp dir holds every call's private directory and the sessions' kept
        // cache views (other sessions' too): a root holding it would hand them over.
        let temp = canonical(&std::env::temp_dir());
        if temp.starts_with(&real) {
            return Err(path_error(format!(
                "write_paths entry {} is or contains the system temp dir {}, where other calls \
                 and sessions keep their private directories; name a directory inside it (a \
                 new one of the command's own) or elsewhere",
                real.display(),
                temp.display()
            )));
        }
        let gate = classify_write_path(&real, home, path_dirs);
        out.push(WritePath {
            path: real,
            fd: Arc::new(fd),
            gate,
        });
    }
    Ok(out)
}

/// The toolchains' cache directories among `paths` that exist as real directories (no link on
/// the way).
pub(crate) fn caches(paths: &[PathBuf]) -> Vec<(PathBuf, OwnedFd)> {
    paths
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .filter_map(|p| pin(p).ok().map(|fd| (p.clone(), fd)))
        .collect()
}

/// Each of `paths` that exists, pinned through no symbolic link (a location reached through
/// a link is not granted: whoever controls the link controls what the grant names).
pub(crate) fn existing(paths: &[PathBuf]) -> Vec<(PathBuf, OwnedFd)> {
    paths
        .iter()
        .filter_map(|p| pin(p).ok().map(|fd| (p.clone(), fd)))
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
                    make_hooks_dir(root, &git);
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

/// Makes the empty `hooks` directory of the git directory `git` (beneath `root`), reaching it
/// from `root` without following a link: another process of the session may have swapped a
/// directory on the way for a link into someone else's repository.
fn make_hooks_dir(root: &Path, git: &Path) {
    use rustix::fs::{Mode, OFlags};
    let Ok(rel) = git.strip_prefix(root) else {
        return;
    };
    let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY;
    let Ok(mut at) = rustix::fs::open(root, OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
    else {
        return;
    };
    for part in rel.components() {
        let std::path::Component::Normal(name) = part else {
            return;
        };
        match rustix::fs::openat(&at, name, flags, Mode::empty()) {
            Ok(next) => at = next,
            Err(_) => return,
        }
    }
    let _ = rustix::fs::mkdirat(&at, "hooks", Mode::from_raw_mode(0o755));
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
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn normalize_gives_an_absolute_path_without_dot_components(
            parts in proptest::collection::vec("(\\.|\\.\\.|[a-z]{1,3})", 0..12),
            absolute in any::<bool>(),
        ) {
            let joined = parts.join("/");
            let p = if absolute { format!("/{joined}") } else { joined };
            let n = normalize(Path::new("/w/x"), Path::new(&p));
            prop_assert!(n.is_absolute());
            prop_assert!(n.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_))));
            prop_assert_eq!(normalize(Path::new("/"), &n), n.clone());
        }
    }

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

    /// TRUST-5: the lexical rules, one row per case.
    #[test]
    fn write_paths_under_home_are_confirmed_only_outside_configuration_and_code() {
        let home = Path::new("/home/u");
        let path = [
            PathBuf::from("/usr/bin"),
            PathBuf::from("/home/u/.cargo/bin"),
            PathBuf::from("/home/u/tools/bin"),
            PathBuf::from("/home/u/miniconda3/bin"),
            PathBuf::from("/home/u/bin"),
            PathBuf::from("relative/bin"),
        ];
        let check = |p: &str, want: Option<NeedsPassword>| {
            assert_eq!(lexical_write_class(Path::new(p), home, &path), want, "{p}");
        };
        check("/home/u/data", None);
        check("/home/u/data/sub", None);
        check("/home/u/projects/site", None);
        check("/home/u/relative/bin", None);
        check("/home/u", Some(NeedsPassword::Home));
        check("/srv/data", Some(NeedsPassword::OutsideHome));
        check("/home/user2", Some(NeedsPassword::OutsideHome));
        check("/home/u/.local/bin", Some(NeedsPassword::DotDirectory));
        check("/home/u/.local/lib", Some(NeedsPassword::DotDirectory));
        check("/home/u/.config", Some(NeedsPassword::DotDirectory));
        check("/home/u/data/.hidden/x", Some(NeedsPassword::DotDirectory));
        check("/home/u/bin", Some(NeedsPassword::HomeProgramOrConfig));
        check("/home/u/bin/sub", Some(NeedsPassword::HomeProgramOrConfig));
        check(
            "/home/u/Library/LaunchAgents",
            Some(NeedsPassword::HomeProgramOrConfig),
        );
        let on_path = |d: &str| Some(NeedsPassword::OnPath(PathBuf::from(d)));
        check("/home/u/tools/bin", on_path("/home/u/tools/bin"));
        check("/home/u/tools/bin/sub", on_path("/home/u/tools/bin"));
        check("/home/u/tools", on_path("/home/u/tools/bin"));
        let prefix = |d: &str| Some(NeedsPassword::InstallPrefix(PathBuf::from(d)));
        check("/home/u/tools/lib", prefix("/home/u/tools"));
        check(
            "/home/u/miniconda3/lib/python3.12",
            prefix("/home/u/miniconda3"),
        );
        // `~/bin`'s prefix is `$HOME` itself, which makes no sibling of it a prefix.
        check("/home/u/binaries", None);
    }

    #[test]
    fn a_path_entry_through_a_link_counts_by_its_target() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().canonicalize().unwrap();
        std::fs::create_dir_all(home.join("real/tools")).unwrap();
        std::os::unix::fs::symlink(home.join("real"), home.join("via")).unwrap();
        let path = [home.join("via/tools")];
        assert_eq!(
            lexical_write_class(&home.join("real/tools"), &home, &path),
            Some(NeedsPassword::OnPath(home.join("real/tools")))
        );
    }

    #[test]
    fn a_directory_holding_another_repository_needs_the_password() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().canonicalize().unwrap();
        let root = home.join("w");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        assert_eq!(
            other_repository(&root),
            RepoWalk::None,
            "its own .git is fine"
        );
        std::fs::create_dir_all(root.join("src/deep/vendored")).unwrap();
        std::fs::write(root.join("src/deep/vendored/.git"), "gitdir: x\n").unwrap();
        assert_eq!(
            other_repository(&root),
            RepoWalk::Found(root.join("src/deep/vendored/.git"))
        );
        assert_eq!(
            classify_write_path(&root, &home, &[]),
            WriteGate::Password(NeedsPassword::HoldsRepository(
                root.join("src/deep/vendored/.git")
            ))
        );
    }

    #[test]
    fn a_walk_cut_off_by_depth_or_entries_needs_the_password() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let deep: PathBuf = (0..REPO_WALK_DEPTH).map(|i| format!("d{i}")).collect();
        std::fs::create_dir_all(root.join("a").join(&deep)).unwrap();
        assert_eq!(other_repository(&root.join("a")), RepoWalk::CutOff);
        let shallow: PathBuf = (0..REPO_WALK_DEPTH - 1).map(|i| format!("d{i}")).collect();
        std::fs::create_dir_all(root.join("b").join(&shallow)).unwrap();
        assert_eq!(other_repository(&root.join("b")), RepoWalk::None);
        let wide = root.join("c");
        std::fs::create_dir_all(&wide).unwrap();
        for i in 0..=REPO_WALK_ENTRIES {
            std::fs::write(wide.join(i.to_string()), "").unwrap();
        }
        assert_eq!(other_repository(&wide), RepoWalk::CutOff);
        assert_eq!(
            classify_write_path(&wide, &root, &[]),
            WriteGate::Password(NeedsPassword::WalkCutOff)
        );
    }

    #[test]
    fn a_write_path_a_startup_file_or_a_program_on_path_links_into_needs_the_password() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().canonicalize().unwrap().join("home");
        for d in ["dotfiles", "apps/tool/bin", ".local/bin", "projects/p"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::write(home.join("dotfiles/bashrc"), "").unwrap();
        std::fs::write(home.join("apps/tool/bin/tool"), "").unwrap();
        std::os::unix::fs::symlink(home.join("dotfiles/bashrc"), home.join(".bashrc")).unwrap();
        std::os::unix::fs::symlink(
            home.join("apps/tool/bin/tool"),
            home.join(".local/bin/tool"),
        )
        .unwrap();
        let path = [home.join(".local/bin")];
        assert_eq!(
            classify_write_path(&home.join("dotfiles"), &home, &path),
            WriteGate::Password(NeedsPassword::LinkedFrom(home.join(".bashrc")))
        );
        assert_eq!(
            classify_write_path(&home.join("apps/tool"), &home, &path),
            WriteGate::Password(NeedsPassword::LinkedFrom(home.join(".local/bin/tool")))
        );
        assert_eq!(
            classify_write_path(&home.join("projects/p"), &home, &path),
            WriteGate::Confirm
        );
    }

    #[test]
    fn a_path_entry_starting_with_a_tilde_is_read_in_home() {
        let home = Path::new("/home/u");
        assert_eq!(
            path_dirs(std::ffi::OsStr::new("~/tools/bin:/usr/bin:~"), home),
            vec![
                PathBuf::from("/home/u/tools/bin"),
                PathBuf::from("/usr/bin"),
                PathBuf::from("/home/u")
            ]
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
        let ok = write_paths(&["../data".into()], &w, &home, &private, &[]).unwrap();
        assert_eq!(ok[0].path, home.join("data"));
        assert_eq!(ok[0].gate, WriteGate::Confirm);
        for bad in [home.join(".ssh"), home.clone(), t.path().to_path_buf()] {
            let e = bad.to_string_lossy().into_owned();
            assert!(
                write_paths(&[e], &w, &home, &private, &[]).is_err(),
                "{bad:?}"
            );
        }
        std::os::unix::fs::symlink(home.join("data"), home.join("link")).unwrap();
        assert!(write_paths(&["../link".into()], &w, &home, &private, &[]).is_err());
    }
}
