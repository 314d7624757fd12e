//! A command's changes to git directories, kept in a private copy for the whole call and
//! applied afterwards from an allowlist (TRUST-1).
//!
//! **Owns:** finding the git directories of a writable root ([`find`]: `.git` directories at
//! any depth and bare repositories), the per-call staging area ([`Stage`]: for each git
//! directory an empty `upper` and `work` directory, and a baseline of what the host's files
//! were), and applying each copy afterwards ([`Stage::apply`]): refs, logs, objects, the
//! index, `HEAD` and the files of an operation in progress as they are; `config` key by key,
//! from an allowlist of keys and values git itself writes for ordinary work (identity,
//! upstreams, remotes and submodules with fetchable URLs, what `init` and `clone` set); a new
//! worktree's `commondir` only when it names this repository. Everything else — hooks,
//! `core.fsmonitor` and every other key that makes git run a program or read another file,
//! `commondir`, `config.worktree`, `info/attributes` — is refused and reported, never applied:
//! only the user sets those. A top-level file or a key the host changed meanwhile keeps the
//! host's value and is reported as a conflict. Each git directory is opened once, from its
//! root without following a link, and read and written through that descriptor only (module
//! `beneath`); [`Stage::found`] gives the sandbox the same identities, so another process
//! that swaps a directory on the way for a link (a background task of the session) neither
//! redirects the changes nor unprotects what was found.
//! **Refuses to know:** how the copy is made (the sandbox shows the command each git directory
//! through an overlay whose upper directory is the stage's; `linux_sandbox::Policy::stage`),
//! which tool ran, and how a result is worded beyond [`Report`].
//!
//! What the command sees during the call: its own changes, all of them (git keeps working:
//! `remote add` then `push -u`, `submodule add`, `worktree add`); what the host sees: the
//! repository as it was, but for new objects, until the call ends and the allowed changes are
//! applied. A refused change is gone with the stage.
//!
//! Dependencies: `rustix` (directory-relative opens that follow no link), `serde` (the
//! report), `thiserror`. The config files are read and written by the system's `git`
//! (module `config`), so every quoting rule is git's own.
//!
//! # Example
//! ```no_run
//! use std::path::{Path, PathBuf};
//!
//! let roots = [PathBuf::from("/home/me/project")];
//! let found = gitstage::find(&[roots[0].as_path()], 100_000);
//! let stage = gitstage::Stage::create(Path::new("/tmp/call-1234/stage"), &roots, &found.dirs)?;
//! for dir in stage.dirs() {
//!     // Hand dir.path, dir.upper, dir.work and dir.through to the sandbox; run the command.
//!     let _ = (dir.path(), dir.upper(), dir.work(), dir.through());
//! }
//! let report = stage.apply(&[], &|_, _, _| false);
//! for refused in &report.refused {
//!     eprintln!("not applied: {} {} ({})", refused.path, refused.what, refused.why);
//! }
//! # Ok::<(), gitstage::StageError>(())
//! ```
#![deny(missing_docs)]

mod allow;
mod beneath;
mod config;
mod find;
mod guard;
mod index;
mod merge;

use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use find::{Classifier, Found, GitDir, find, find_changed_since, find_with, runs_when_built};
pub use guard::QUARANTINE_SUFFIX;

/// Whether `bytes`, a whole git index file (`DIRC`, version 2 to 4, SHA-1 or SHA-256), parses
/// and names only paths git may check out: relative, no `.` or `..` component, none that is a
/// git directory on any filesystem (`.git` in any case, `.git.`, `git~1`, with code points
/// HFS+ ignores). A command can write an index naming `.git/config`; the host's
/// `git checkout -- .` would then write it.
pub fn index_is_ordinary(bytes: &[u8]) -> bool {
    index::check(bytes).is_ok()
}

/// What applying the copies did, for a tool's result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Report {
    /// Changes applied to the real git directories.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<Applied>,
    /// Changes not applied, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Refused>,
    /// Files or keys the host changed during the call: the host's stay.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
    /// Names the command made where no private copy was (a new repository's hooks or config,
    /// new auto-run configuration, a `.gitmodules` that runs a command), moved aside.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quarantined: Vec<Quarantined>,
    /// Git directories the command saw read-only instead of through a private copy, and why
    /// (the copy could not be made on this machine): git commands that write there failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only: Vec<String>,
    /// Set when the search for git directories stopped at its budget: repositories deeper in
    /// the tree were neither seen nor protected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_searched: Option<String>,
    /// Files of the writable roots the call made or changed that a user may run later: an
    /// execute bit, or a name a build runs ([`runs_when_built`]). Not part of this report's
    /// JSON: a tool lists them at the top of its result (`executableChanges`).
    #[serde(skip)]
    pub executable_changes: Vec<String>,
    /// The config changes refused for their key alone, as they were: a host that can ask the
    /// user names each one and applies it on a yes ([`apply_key`]), then moves it from
    /// `refused` to `applied` ([`Report::confirmed`]). Not part of the JSON.
    #[serde(skip)]
    pub refused_keys: Vec<KeyChange>,
}

/// One config change the allowlist refused: where, which key, the values the command left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyChange {
    /// The real config file, as the report names it.
    pub config: PathBuf,
    /// The directory holding it, as the stage found it: a change is written there, wherever
    /// that directory's path leads by then.
    dir: PinnedDir,
    /// The key as `git config --list` names it.
    pub key: String,
    /// Its values in order (`None`: a bare boolean key); empty: removed.
    pub values: Vec<Option<String>>,
    /// How `refused` shows it (`key=value, …`, escaped).
    pub shown: String,
}

impl Report {
    /// Records that the quarantined `q` was put back after the user confirmed it.
    pub fn kept(&mut self, q: &Quarantined) {
        self.quarantined.retain(|x| x != q);
        self.applied.push(Applied {
            path: q.path.clone(),
            change: "kept (confirmed by the user)".to_owned(),
        });
    }

    /// Records that `change` was applied after the user confirmed it: its refusal becomes an
    /// applied change marked `(confirmed)`.
    pub fn confirmed(&mut self, change: &KeyChange) {
        let path = change.config.display().to_string();
        self.refused
            .retain(|r| !(r.path == path && r.what == change.shown));
        self.applied.push(Applied {
            path,
            change: format!("{} (confirmed by the user)", change.shown),
        });
    }
}

/// Applies a config change the allowlist refused, after the user confirmed it by name.
///
/// # Errors
/// No system git, or git could not set it.
pub fn apply_key(change: &KeyChange) -> Result<(), String> {
    let git = config::Git::find().ok_or("no system git to set it with")?;
    let scratch = tempfile_dir()?;
    let edit = config::Locked::take(change.dir.0.as_fd(), &scratch)?;
    git.replace(edit.copy(), &change.key, &change.values)?;
    edit.commit()
}

/// A private directory for one config edit, removed when dropped.
fn tempfile_dir() -> Result<config::Scratch, String> {
    config::Scratch::new().map_err(|e| format!("cannot make a temporary directory: {e}"))
}

/// A directory descriptor shared by the stage and the changes it reports; equal when it is
/// the same descriptor.
#[derive(Debug, Clone)]
pub(crate) struct PinnedDir(pub(crate) Arc<OwnedFd>);

impl PartialEq for PinnedDir {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for PinnedDir {}

impl Report {
    /// Whether nothing was applied, refused or in conflict.
    pub fn is_empty(&self) -> bool {
        self.applied.is_empty()
            && self.refused.is_empty()
            && self.conflicts.is_empty()
            && self.quarantined.is_empty()
            && self.read_only.is_empty()
            && self.not_searched.is_none()
    }
}

/// One applied change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Applied {
    /// The real file.
    pub path: String,
    /// `written`, `removed`, or a config change `key=value`.
    pub change: String,
}

/// One name moved aside after the call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Quarantined {
    /// Where it was.
    pub path: String,
    /// Where it is now (`<path>.agent-exec-quarantined`, execute bits off); absent when it
    /// could not be moved, and then the user must look at it.
    pub moved_to: Option<String>,
    /// Why a host would have obeyed it.
    pub why: String,
    /// Auto-run configuration the command made: a host that can ask the user may put it back
    /// on a yes that names it ([`restore`]). Not part of the JSON.
    #[serde(skip)]
    pub user_may_keep: bool,
    /// The roots it lies in: [`restore`] reaches it from there, following no link.
    #[serde(skip)]
    pub(crate) roots: Vec<PathBuf>,
}

/// Puts a quarantined name back where the command made it, after the user confirmed keeping
/// it by name; only where nothing took its place since.
///
/// # Errors
/// It was never moved, or its place is taken, or the rename failed.
pub fn restore(q: &Quarantined) -> Result<(), String> {
    let moved = q.moved_to.as_deref().ok_or("it was never moved")?;
    let (dir, name) = beneath::open_parent_in(&q.roots, Path::new(&q.path))
        .map_err(|e| format!("cannot reach it without following a link: {e}"))?;
    let moved_name = Path::new(moved).file_name().ok_or("no name")?;
    // `NOREPLACE`: whatever took its place since stays.
    rustix::fs::renameat_with(
        &dir,
        moved_name,
        &dir,
        name,
        rustix::fs::RenameFlags::NOREPLACE,
    )
    .map_err(|e| match e {
        rustix::io::Errno::EXIST => format!("{} exists again", q.path),
        e => e.to_string(),
    })
}

/// Moves `path`, lying in one of `roots`, aside to the first free
/// `<path>.agent-exec-quarantined[.N]` (never over another name) with its files' execute bits
/// off, reaching it from its root without following a link: a directory on its way swapped
/// for a link (another process of the session moves it) leaves it unmoved, never moves what
/// the link leads to. Where it is now, or `None` when it could not be moved.
pub fn move_aside(roots: &[PathBuf], path: &Path) -> Option<PathBuf> {
    guard::move_aside(roots, path)
}

/// One refused change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Refused {
    /// The real file it would have changed.
    pub path: String,
    /// For config, the key and its values (escaped); otherwise empty or `removed`.
    pub what: String,
    /// Why it was refused.
    pub why: String,
}

/// A file's identity and times: did the host change it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileStamp {
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_ns: i64,
}

impl FileStamp {
    pub(crate) fn of(path: &Path) -> Option<FileStamp> {
        let m = std::fs::symlink_metadata(path).ok()?;
        Some(FileStamp {
            ino: m.ino(),
            size: m.size(),
            mtime: m.mtime(),
            mtime_ns: m.mtime_nsec(),
        })
    }

    /// The stamp of `rel` beneath `at`, no link followed. (`st_mtime_nsec` is an `i64` on
    /// macOS, not on Linux.)
    #[allow(clippy::useless_conversion)]
    pub(crate) fn at(at: BorrowedFd<'_>, rel: &Path) -> Option<FileStamp> {
        let st = beneath::stat(at, rel)?;
        Some(FileStamp {
            ino: st.st_ino,
            size: u64::try_from(st.st_size).unwrap_or(0),
            mtime: st.st_mtime,
            mtime_ns: i64::try_from(st.st_mtime_nsec).unwrap_or(0),
        })
    }
}

/// What the host's git directory held at the start: each top-level file's stamp (`None`:
/// absent), and each config's content (its own and its submodules').
#[derive(Debug, Clone, Default)]
pub(crate) struct Baseline {
    /// Files directly in the git directory, and the loose refs and reflogs beneath `refs/` and
    /// `logs/` (at most [`BASELINE_REFS_MAX`]), by their path relative to it.
    pub(crate) files: BTreeMap<String, Option<FileStamp>>,
    /// The walk of `refs/` and `logs/` stopped at its bound: a ref not recorded is not
    /// checked.
    pub(crate) refs_incomplete: bool,
    pub(crate) configs: BTreeMap<String, Option<Vec<u8>>>,
}

/// The most loose refs and reflogs a baseline records.
const BASELINE_REFS_MAX: usize = 50_000;

/// The most bytes of a config kept as a baseline.
const BASELINE_CONFIG_MAX: u64 = 1 << 20;

/// A directory entry's name, when it is one the baseline keeps (UTF-8).
fn utf8_name(name: &[u8]) -> Option<&str> {
    std::str::from_utf8(name).ok()
}

impl Baseline {
    /// Reads the git directory `dir` (its descriptor), following no link.
    fn take(dir: BorrowedFd<'_>) -> Baseline {
        use rustix::fs::FileType;
        let mut b = Baseline::default();
        for (name, kind) in beneath::entries(dir) {
            if kind == Some(FileType::RegularFile) {
                if let Some(name) = utf8_name(&name) {
                    b.files
                        .insert(name.to_owned(), FileStamp::at(dir, Path::new(name)));
                }
            }
        }
        b.configs.insert(
            "config".to_owned(),
            beneath::read(dir, Path::new("config"), BASELINE_CONFIG_MAX),
        );
        // Loose refs and reflogs: a branch the host's git moved while the command ran keeps
        // the host's commit.
        let mut stack: Vec<String> = vec!["refs".to_owned(), "logs".to_owned()];
        let mut recorded = 0;
        while let Some(rel) = stack.pop() {
            let Ok(fd) = beneath::open_dir(dir, Path::new(&rel)) else {
                continue;
            };
            for (name, kind) in beneath::entries(fd.as_fd()) {
                let Some(name) = utf8_name(&name) else {
                    continue;
                };
                let child = format!("{rel}/{name}");
                match kind {
                    Some(FileType::Directory) => stack.push(child),
                    Some(FileType::RegularFile) => {
                        if recorded == BASELINE_REFS_MAX {
                            b.refs_incomplete = true;
                            continue;
                        }
                        recorded += 1;
                        b.files
                            .insert(child, FileStamp::at(fd.as_fd(), Path::new(name)));
                    }
                    _ => {}
                }
            }
        }
        // Submodules' git directories, a few levels down.
        let mut stack = vec![("modules".to_owned(), 0)];
        while let Some((rel, depth)) = stack.pop() {
            if depth > 6 {
                continue;
            }
            let Ok(fd) = beneath::open_dir(dir, Path::new(&rel)) else {
                continue;
            };
            for (name, kind) in beneath::entries(fd.as_fd()) {
                let Some(name) = utf8_name(&name).filter(|_| kind == Some(FileType::Directory))
                else {
                    continue;
                };
                let child = format!("{rel}/{name}");
                let config = Path::new(name).join("config");
                if beneath::stat(fd.as_fd(), &config)
                    .is_some_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile)
                {
                    b.configs.insert(
                        format!("{child}/config"),
                        beneath::read(fd.as_fd(), &config, BASELINE_CONFIG_MAX),
                    );
                }
                stack.push((child, depth + 1));
            }
        }
        b
    }
}

fn read_config(path: &Path) -> Option<Vec<u8>> {
    beneath::read_path(path, BASELINE_CONFIG_MAX)
}

/// One staged git directory.
#[derive(Debug)]
pub struct StagedDir {
    path: PathBuf,
    /// The git directory as the stage found it, walking from its root without following a
    /// link: the changes are applied here, wherever its path leads by then.
    fd: PinnedDir,
    id: (u64, u64),
    through: Vec<PathBuf>,
    upper: PathBuf,
    work: PathBuf,
    scratch: PathBuf,
    baseline: Baseline,
}

impl StagedDir {
    /// The real git directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Where the command's changes land (the overlay's upper directory).
    pub fn upper(&self) -> &Path {
        &self.upper
    }
    /// The overlay's work directory, beside `upper`.
    pub fn work(&self) -> &Path {
        &self.work
    }
    /// Directories beneath the git directory written through (its `objects`).
    pub fn through(&self) -> &[PathBuf] {
        &self.through
    }
    /// The git directory's device and inode, as the stage found it: a sandbox stages this
    /// directory only, never another one a link leads to by the time the command starts.
    pub fn id(&self) -> (u64, u64) {
        self.id
    }
}

/// The staging area of one call: for each git directory an `upper` and a `work` directory
/// (mode 0700) beneath a base directory the caller gives — one the command does not see (the
/// call's temp dir, which the sandbox covers with its own tmpfs, serves) — and a baseline of
/// the host's files. Applying it ([`Stage::apply`]) consumes it; dropping it removes its
/// directories.
#[derive(Debug)]
pub struct Stage {
    base: PathBuf,
    dirs: Vec<StagedDir>,
    /// When the stage was made: files changed since are candidates for `executableChanges`.
    started: std::time::SystemTime,
    /// What the search found at the start (empty when made by [`Stage::create`]).
    before: Found,
    /// The `.gitmodules` files at the start and their stamps.
    gitmodules: BTreeMap<PathBuf, Option<FileStamp>>,
    /// The roots searched.
    roots: Vec<PathBuf>,
    /// Each `.git` link at the start and where it led.
    git_link_targets: BTreeMap<PathBuf, Option<PathBuf>>,
    /// Hooks directories named by `core.hooksPath` inside the roots: existing (read-only for
    /// the call) and missing (moved aside after the call if the command made them).
    hooks_paths: Vec<PathBuf>,
    missing_hooks_paths: Vec<PathBuf>,
    /// Git directories past [`STAGED_MAX`]: read-only for the call ([`Stage::protect`]).
    read_only: Vec<PathBuf>,
    /// Where [`Stage::protect`]'s paths and the staged directories were found ([`Stage::found`]).
    found_at: Vec<(PathBuf, (u64, u64))>,
}

/// The most git directories one call stages (the sandbox's limit); the deeper ones are
/// read-only for the call.
pub const STAGED_MAX: usize = 32;

/// Directories [`Stage::for_roots`] visits at most (each one's own entries are all read,
/// however many): past it the call is refused, never run with repositories unseen.
pub const SEARCH_BUDGET: usize = 200_000;

/// Why a call's git directories could not be staged. Nothing ran.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StageError {
    /// A writable root is a git directory or lies inside one.
    #[error(
        "{} is inside the git directory {}: a command there would change what git obeys; \
         work in the repository's work tree instead",
        root.display(),
        git_dir.display()
    )]
    InGitDir {
        /// The root.
        root: PathBuf,
        /// The git directory it is or lies in.
        git_dir: PathBuf,
    },
    /// The search for git directories passed its budget.
    #[error(
        "{} hold more than {SEARCH_BUDGET} directories, more than the search for git \
         repositories may visit, so their repositories could not all be protected; work in a \
         smaller directory (a project rather than a whole tree)",
        roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    TooLarge {
        /// The roots searched.
        roots: Vec<PathBuf>,
    },
    /// A git directory or a protected path is no longer where the search found it, or a link
    /// now stands on its way: another process moves directories of the roots.
    #[error(
        "{} changed while the call was being prepared (a directory on its way was moved or \
         replaced by a link: another process, such as a background task, is moving it); \
         run the call again when nothing else moves the workspace's directories",
        path.display()
    )]
    Moved {
        /// The path.
        path: PathBuf,
    },
    /// The staging area could not be made.
    #[error("cannot make the staging area: {0}")]
    Io(#[source] std::io::Error),
}

/// How far before now a walk's start is put where the file systems' own clock cannot be read:
/// they stamp times from the kernel's coarse clock, up to a tick (10 ms at `HZ=100`) behind a
/// fine reading, so a name made right after the start can carry an earlier time.
const CLOCK_MARGIN: std::time::Duration = std::time::Duration::from_millis(100);

/// The time changes are looked for from, as the file systems stamp it: the status-change time
/// of a file made for the purpose in `dir` (and removed), which no later change precedes;
/// without one, the fine clock less [`CLOCK_MARGIN`].
fn walk_started(dir: Option<&Path>) -> std::time::SystemTime {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let stamped = dir.and_then(|dir| {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let probe = dir.join(format!(".gitstage-clock-{}-{n}", std::process::id()));
        let file = std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(&probe)
            .ok()?;
        let meta = file.metadata();
        let _ = std::fs::remove_file(&probe);
        let meta = meta.ok()?;
        std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(
            u64::try_from(meta.ctime()).ok()?,
            u32::try_from(meta.ctime_nsec()).ok()?,
        ))
    });
    stamped.unwrap_or_else(|| {
        let now = std::time::SystemTime::now();
        now.checked_sub(CLOCK_MARGIN).unwrap_or(now)
    })
}

/// Whether `dir` is a git directory: named `.git`, or holding a `HEAD` (a file or a link, as
/// git accepts) with `objects` and `refs`, or with `commondir` (git's loose test, as the walk
/// applies it).
fn is_git_dir(dir: &Path) -> bool {
    let exists = |name: &str| std::fs::symlink_metadata(dir.join(name)).is_ok();
    dir.file_name().is_some_and(|n| n == ".git")
        || (exists("HEAD") && ((exists("objects") && exists("refs")) || exists("commondir")))
}

impl Stage {
    /// Makes `base` (which must not exist) and a staging area for each of `dirs` in it. Each
    /// git directory is opened from the root of `roots` it lies in without following a link
    /// below it, and applied through that descriptor.
    ///
    /// # Errors
    /// [`StageError::Moved`]: a git directory is not reached that way (it lies in no root,
    /// or a link stands on its way); [`StageError::Io`]: a directory could not be made.
    /// Nothing is left behind.
    pub fn create(base: &Path, roots: &[PathBuf], dirs: &[GitDir]) -> Result<Stage, StageError> {
        let mut pinned = Vec::with_capacity(dirs.len());
        for dir in dirs {
            let moved = || StageError::Moved {
                path: dir.path.clone(),
            };
            let fd = beneath::open_dir_in(roots, &dir.path).map_err(|_| moved())?;
            let st = rustix::fs::fstat(&fd).map_err(|_| moved())?;
            pinned.push((fd, beneath::id_of(&st)));
        }
        let mut builder = std::fs::DirBuilder::new();
        builder.mode(0o700);
        builder.create(base).map_err(StageError::Io)?;
        let mut stage = Stage {
            base: base.to_owned(),
            dirs: Vec::with_capacity(dirs.len()),
            started: walk_started(Some(base)),
            before: Found::default(),
            gitmodules: BTreeMap::new(),
            roots: Vec::new(),
            git_link_targets: BTreeMap::new(),
            hooks_paths: Vec::new(),
            missing_hooks_paths: Vec::new(),
            read_only: Vec::new(),
            found_at: Vec::new(),
        };
        for (i, (dir, (fd, id))) in dirs.iter().zip(pinned).enumerate() {
            let area = base.join(i.to_string());
            let (upper, work, scratch) = (area.join("u"), area.join("w"), area.join("s"));
            for d in [&area, &upper, &work, &scratch] {
                builder.create(d).map_err(StageError::Io)?;
            }
            stage.found_at.push((dir.path.clone(), id));
            stage.dirs.push(StagedDir {
                path: dir.path.clone(),
                through: dir.objects.iter().cloned().collect(),
                upper,
                work,
                scratch,
                baseline: Baseline::take(fd.as_fd()),
                fd: PinnedDir(Arc::new(fd)),
                id,
            });
        }
        stage.roots = roots.to_vec();
        Ok(stage)
    }

    /// Finds the git directories of `roots` ([`find`], at most [`SEARCH_BUDGET`] entries) and
    /// makes a staging area for them in `base` (which must not exist).
    ///
    /// # Errors
    /// [`StageError`]: a root in a git directory, too many directories, or no staging area.
    pub fn for_roots(
        roots: &[&Path],
        base: &Path,
        autorun: Classifier<'_>,
    ) -> Result<Stage, StageError> {
        // A root that is a git directory, or lies in one, has no work tree around its git
        // metadata to stage: every write would land in the git directory itself.
        for root in roots {
            if let Some(dir) = root.ancestors().find(|a| is_git_dir(a)) {
                return Err(StageError::InGitDir {
                    root: root.to_path_buf(),
                    git_dir: dir.to_path_buf(),
                });
            }
        }
        // Before the walk: a directory changed while it is listed must count as changed.
        let started = walk_started(base.parent());
        let mut found = find_with(roots, SEARCH_BUDGET, autorun);
        if found.truncated {
            return Err(StageError::TooLarge {
                roots: roots.iter().map(|r| r.to_path_buf()).collect(),
            });
        }
        // A `.git` that is a link: the git directory it leads to, where it lies in a root, is
        // staged like any other (outside every root it is read-only anyway).
        for link in &found.git_links {
            let Ok(target) = link.canonicalize() else {
                continue;
            };
            let inside = roots.iter().any(|r| target.starts_with(r));
            if inside && target.is_dir() && !found.dirs.iter().any(|d| d.path == target) {
                let objects = target.join("objects");
                found.dirs.push(GitDir {
                    objects: objects.is_dir().then_some(objects),
                    path: target,
                });
            }
        }
        found.dirs.sort_by_key(|d| d.path.components().count());
        // The shallowest get a private copy; the rest are read-only for this call.
        let staged = &found.dirs[..found.dirs.len().min(STAGED_MAX)];
        let owned_roots: Vec<PathBuf> = roots.iter().map(|r| r.to_path_buf()).collect();
        let mut stage = Stage::create(base, &owned_roots, staged)?;
        stage.started = started;
        stage.read_only = found.dirs[staged.len()..]
            .iter()
            .map(|d| d.path.clone())
            .collect();
        stage.gitmodules = found
            .gitmodules
            .iter()
            .map(|p| (p.clone(), FileStamp::of(p)))
            .collect();
        // The hooks directory a repository's own config names (`core.hooksPath`) is as much
        // git's to run as `hooks/`: read-only for the call where it exists in a root, and
        // moved aside after the call where the command made it.
        if let Some(git) = config::Git::find() {
            // The user's and the system's config name it for every repository (a hook
            // manager's relative `.githooks`).
            let everywhere = config::hooks_paths_of_host(&git);
            for dir in &found.dirs {
                // The key's name appears in the file as written (any case): a config without
                // it needs no `git` process on the call's path.
                let names_hooks_path = read_config(&dir.path.join("config"))
                    .is_some_and(|t| t.to_ascii_lowercase().windows(9).any(|w| w == b"hookspath"));
                let mut values = everywhere.clone();
                if names_hooks_path {
                    if let Ok(list) = git.list(&dir.path.join("config")) {
                        values.extend(
                            list.into_iter()
                                .filter(|(key, _)| key == "core.hookspath")
                                .filter_map(|(_, value)| value),
                        );
                    }
                }
                let work_tree = if dir.path.file_name().is_some_and(|n| n == ".git") {
                    dir.path.parent().unwrap_or(&dir.path)
                } else {
                    &dir.path
                };
                for value in values {
                    let hooks = match (value.strip_prefix("~/"), std::env::var_os("HOME")) {
                        (Some(rest), Some(home)) => Path::new(&home).join(rest),
                        _ => work_tree.join(value),
                    };
                    if !roots.iter().any(|r| hooks.starts_with(r)) {
                        continue;
                    }
                    if hooks.symlink_metadata().is_ok() {
                        stage.hooks_paths.push(hooks);
                    } else {
                        stage.missing_hooks_paths.push(hooks);
                    }
                }
            }
            stage.hooks_paths.sort();
            stage.hooks_paths.dedup();
            stage.missing_hooks_paths.sort();
            stage.missing_hooks_paths.dedup();
        }
        stage.git_link_targets = found
            .git_links
            .iter()
            .map(|l| (l.clone(), l.canonicalize().ok()))
            .collect();
        stage.before = found;
        // Each protected path the search found (it follows no link) as it is now, reached from
        // its root through no link: the sandbox protects this file, or refuses the call if a
        // link now leads elsewhere. A `core.hooksPath` directory is named by config and may
        // lie beyond a link of the user's: the sandbox protects it where the link leads.
        let searched: Vec<PathBuf> = stage
            .before
            .autorun
            .iter()
            .chain(&stage.before.gitlinks)
            .chain(&stage.read_only)
            .cloned()
            .collect();
        for path in searched {
            let id = beneath::identity_in(&stage.roots, &path)
                .map_err(|_| StageError::Moved { path: path.clone() })?;
            stage.found_at.push((path, id));
        }
        Ok(stage)
    }

    /// Where the staged git directories and the paths of [`Stage::protect`] were found, by
    /// device and inode, each reached from its root without following a link: a sandbox must
    /// refuse to stage or protect anything else at those paths (a concurrent process may swap
    /// a parent directory for a link between the search and the command's start).
    pub fn found(&self) -> &[(PathBuf, (u64, u64))] {
        &self.found_at
    }

    /// What must stay read-only for the whole call beside the staged directories: the auto-run
    /// configuration, the gitlinks and the `core.hooksPath` directories inside the roots that
    /// exist now (a command may not change them; new ones are moved aside after the call), and
    /// the git directories past [`STAGED_MAX`].
    pub fn protect(&self) -> Vec<PathBuf> {
        self.before
            .autorun
            .iter()
            .chain(&self.before.gitlinks)
            .chain(&self.hooks_paths)
            .chain(&self.read_only)
            .cloned()
            .collect()
    }

    /// The staged git directories.
    pub fn dirs(&self) -> &[StagedDir] {
        &self.dirs
    }

    /// Applies each copy to its git directory (crate docs), after the command's whole tree has
    /// ended, and removes the staging area. `read_only` are the git directories the command
    /// saw read-only instead (the sandbox could not make their copy), with why: reported, and
    /// their (empty) copies skipped.
    pub fn apply(self, read_only: &[(PathBuf, String)], autorun: Classifier<'_>) -> Report {
        let git = config::Git::find();
        let mut report = Report::default();
        if self.before.truncated {
            report.not_searched = Some(format!(
                "the search for git repositories stopped after {SEARCH_BUDGET} directory \
                 entries; repositories deeper in the tree were not protected during the call"
            ));
        }
        for (dir, why) in read_only {
            report.read_only.push(format!("{}: {why}", dir.display()));
        }
        for dir in &self.read_only {
            report.read_only.push(format!(
                "{}: more than {STAGED_MAX} repositories in the writable roots; the deeper \
                 ones are read-only for a call",
                dir.display()
            ));
        }
        let staged: Vec<PathBuf> = self.dirs.iter().map(|d| d.path.clone()).collect();
        for dir in &self.dirs {
            if read_only.iter().any(|(d, _)| *d == dir.path) {
                continue;
            }
            merge::Merge {
                real: &dir.path,
                dir: &dir.fd,
                upper: &dir.upper,
                baseline: &dir.baseline,
                git: git.as_ref(),
                scratch: &dir.scratch,
                roots: &self.roots,
                staged: &staged,
                report: &mut report,
            }
            .run();
        }
        if !self.roots.is_empty() {
            self.guard_new_names(git.as_ref(), autorun, &mut report);
        }
        report
    }

    /// Module `guard`: what the command made where no private copy was.
    fn guard_new_names(
        &self,
        git: Option<&config::Git>,
        autorun: Classifier<'_>,
        report: &mut Report,
    ) {
        let roots: Vec<&Path> = self.roots.iter().map(PathBuf::as_path).collect();
        let after = find_changed_since(&roots, SEARCH_BUDGET, autorun, &self.before, self.started);
        let mut runnable = after.executable_changes.clone();
        runnable.sort();
        report.executable_changes = runnable.iter().map(|p| p.display().to_string()).collect();
        for dir in &after.dirs {
            let known = self.before.dirs.iter().any(|d| d.path == dir.path);
            if !known {
                guard::new_git_dir(&self.roots, &dir.path, git, report);
            }
        }
        // A root the command made into a git directory (the walk looks for repositories
        // beneath a root; a root that was one is refused before the call).
        for root in &self.roots {
            if is_git_dir(root) {
                guard::new_git_dir(&self.roots, root, git, report);
            }
        }
        for path in &after.autorun {
            if !self.before.autorun.contains(path) {
                guard::quarantine(
                    &self.roots,
                    path,
                    "auto-run configuration a host obeys without asking; only the user makes it",
                    true,
                    report,
                );
            }
        }
        // A gitlink the command made or changed must lead to a submodule's or a worktree's git
        // directory inside a staged one, or to a repository the guard just checked.
        for link in &after.gitlinks {
            if self.before.gitlinks.contains(link) {
                continue;
            }
            let leads_to = guard::gitlink_target(link);
            let inside_staged = leads_to
                .as_ref()
                .is_some_and(|t| self.dirs.iter().any(|d| leads_into(&d.path, t)));
            let checked = leads_to.as_ref().is_some_and(|t| {
                after
                    .dirs
                    .iter()
                    .any(|d| d.path == *t || leads_into(&d.path, t))
            });
            if !inside_staged && !checked {
                guard::quarantine(
                    &self.roots,
                    link,
                    "a gitlink to a directory that is not a submodule's or a worktree's git \
                     directory",
                    false,
                    report,
                );
            }
        }
        // A `.git` link the command made or re-pointed: only to a git directory that was staged
        // or that the guard just checked.
        for link in &after.git_links {
            let target = link.canonicalize().ok();
            if self.git_link_targets.get(link) == Some(&target) {
                continue;
            }
            let staged = target.as_ref().is_some_and(|t| {
                self.dirs
                    .iter()
                    .any(|d| d.path == *t || leads_into(&d.path, t))
            });
            let checked = target
                .as_ref()
                .is_some_and(|t| after.dirs.iter().any(|d| d.path == *t));
            if !staged && !checked {
                guard::quarantine(
                    &self.roots,
                    link,
                    "a .git link to a directory that is not a checked git directory",
                    false,
                    report,
                );
            }
        }
        for hooks in &self.missing_hooks_paths {
            if hooks.symlink_metadata().is_ok() {
                guard::quarantine(
                    &self.roots,
                    hooks,
                    "the hooks directory the repository's core.hooksPath names: git runs it",
                    false,
                    report,
                );
            }
        }
        for path in &after.gitmodules {
            let unchanged = self
                .gitmodules
                .get(path)
                .is_some_and(|stamp| *stamp == FileStamp::of(path));
            if !unchanged {
                guard::gitmodules(&self.roots, path, git, report);
            }
        }
        if after.truncated && report.not_searched.is_none() {
            report.not_searched = Some(format!(
                "the search for new repositories and auto-run configuration stopped after \
                 {SEARCH_BUDGET} directory entries; deeper ones were not checked"
            ));
        }
    }
}

/// Whether `target` is a submodule's git directory beneath `git_dir`'s `modules/` (whose
/// every `config` is applied key by key and whose hooks are refused, at any depth) or exactly a
/// worktree's, `worktrees/<name>`: deeper in a worktree's directory lies its state, where a
/// whole repository could be planted as refs.
fn leads_into(git_dir: &Path, target: &Path) -> bool {
    target.starts_with(git_dir.join("modules"))
        || target.parent() == Some(git_dir.join("worktrees").as_path())
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}
