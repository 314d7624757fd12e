//! `Mirror`: a private copy of a user's folder, written back only where the folder still
//! matches what was copied (RUN-11, DESIGN invariant 7).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags};

use crate::atomic::{Replace, WriteError, write_entry};
use crate::lease::{FileId, LeaseError, RootLease};
use crate::relpath::is_git_name;
use crate::sys::{self, Kind, Meta};

/// What kind of entry a path is, as the mirror records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EntryKind {
    /// A regular file: copied.
    File,
    /// A directory: copied.
    Dir,
    /// A symbolic link: never copied nor followed, never replaced by a write-back.
    Symlink,
    /// A FIFO, socket or device: never copied, never replaced.
    Special,
    /// Could not be read when the mirror was taken: not copied, never replaced.
    Unreadable,
}

impl EntryKind {
    fn from_kind(kind: Kind) -> EntryKind {
        match kind {
            Kind::File => EntryKind::File,
            Kind::Dir => EntryKind::Dir,
            Kind::Symlink => EntryKind::Symlink,
            Kind::Other => EntryKind::Special,
        }
    }

    /// File and Dir entries are copied into the mirror; the others only recorded.
    fn is_copied(self) -> bool {
        matches!(self, EntryKind::File | EntryKind::Dir)
    }
}

/// One path's recorded state: type, permission bits, size, mtime and, for files, a BLAKE3 hash
/// of the content.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BaselineEntry {
    /// The entry's kind.
    pub kind: EntryKind,
    /// Permission bits (`0o7777`).
    pub mode: u32,
    /// Size in bytes (files).
    pub size: u64,
    /// Modification time, seconds and nanoseconds.
    pub mtime: (i64, u32),
    /// BLAKE3 of the content (files only).
    pub hash: Option<[u8; 32]>,
}

impl BaselineEntry {
    fn recorded(kind: EntryKind, meta: Option<&Meta>, hash: Option<[u8; 32]>) -> BaselineEntry {
        BaselineEntry {
            kind,
            mode: meta.map_or(0, |m| m.mode),
            size: meta.map_or(0, |m| m.size),
            mtime: meta.map_or((0, 0), |m| m.mtime),
            hash,
        }
    }

    /// Whether the folder's current `now` is still what was recorded. Directories compare by
    /// kind and mode only (their mtime moves with every entry added or removed); files also by
    /// size, mtime and content, so a `touch` counts as a change — conservative on purpose.
    fn matches(&self, now: &BaselineEntry) -> bool {
        match self.kind {
            EntryKind::Dir => now.kind == EntryKind::Dir && now.mode == self.mode,
            _ => self == now,
        }
    }
}

/// How a path differs between the baseline and the mirror now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ChangeKind {
    /// Present in the mirror, not in the baseline.
    Added,
    /// Present in both with a different content or mode.
    Modified,
    /// In the baseline, gone from the mirror.
    Deleted,
}

/// One difference between the baseline and the mirror. A change of type (file became a
/// directory or the reverse) is a `Deleted` and an `Added` at the same path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Relative to the mirror's root.
    pub path: PathBuf,
    /// What happened.
    pub kind: ChangeKind,
    /// The entry's kind: the mirror's for `Added` and `Modified`, the baseline's for `Deleted`.
    pub entry: EntryKind,
}

/// Why a change was not written back.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConflictReason {
    /// The folder's entry is no longer what the mirror copied (edited, touched, re-moded,
    /// changed type, or a directory that gained entries).
    ChangedInSource,
    /// The folder's entry was deleted since the mirror was taken.
    DeletedInSource,
    /// The mirror added this path and the folder now has an entry there too.
    CreatedInSource,
    /// The folder's entry here (a symlink, special file or unreadable entry) was never mirrored.
    NotMirrored,
    /// A symlink, a non-directory or a denied directory is on the way in the folder.
    UnsafePath,
    /// The mirror holds a symlink or special file here; only files and directories go back.
    UnsupportedType,
    /// The path contains `.git` in some letter case; it is never written.
    ForbiddenName,
    /// Another path's conflict blocks this one (its parent or child, or the other half of a
    /// type change).
    Dependent {
        /// The conflicting path.
        on: PathBuf,
    },
}

/// A change left unapplied; both sides of it are untouched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The change that was not applied.
    pub change: Change,
    /// Why.
    pub reason: ConflictReason,
}

/// The outcome of [`Mirror::finalize`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FinalizeReport {
    /// Changes written into the folder.
    pub applied: Vec<Change>,
    /// Changes left alone, with the reason.
    pub conflicts: Vec<Conflict>,
}

/// Why a mirror could not be created, compared or finalized.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MirrorError {
    /// The folder or the mirror directory could not be pinned, or was replaced.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// The mirror's destination already exists.
    #[error("`{}` already exists; give a path that does not exist yet for the mirror", path.display())]
    DestinationExists {
        /// The destination.
        path: PathBuf,
    },
    /// A file or directory could not be read or written.
    #[error("mirror: cannot {op} `{}`: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path, relative to the folder or mirror root.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
}

/// A private copy of a folder and the baseline it was taken from (RUN-11).
///
/// [`create`](Mirror::create) copies the folder — leaving out `.git` in any letter case, never
/// following a symlink (links, FIFOs and unreadable entries are recorded, not copied) — and
/// records each path's type, mode, size, mtime and content hash. [`changes`](Mirror::changes)
/// compares the mirror with that baseline. [`finalize`](Mirror::finalize) writes the mirror's
/// changes into the folder, each file atomically, only where the folder still matches the
/// baseline; everything else comes back as a [`Conflict`], with both sides left untouched.
///
/// ```
/// use fsguard::{ChangeKind, Mirror};
/// let tmp = tempfile::tempdir().unwrap();
/// let src = tmp.path().join("folder");
/// std::fs::create_dir(&src).unwrap();
/// std::fs::write(src.join("a.txt"), "one").unwrap();
///
/// let mut mirror = Mirror::create(&src, tmp.path().join("mirror")).unwrap();
/// std::fs::write(mirror.mirror_path().join("a.txt"), "two").unwrap();
/// assert_eq!(mirror.changes().unwrap()[0].kind, ChangeKind::Modified);
///
/// let report = mirror.finalize().unwrap();
/// assert!(report.conflicts.is_empty());
/// assert_eq!(std::fs::read_to_string(src.join("a.txt")).unwrap(), "two");
/// ```
#[derive(Debug)]
pub struct Mirror {
    source: RootLease,
    mirror: RootLease,
    baseline: BTreeMap<PathBuf, BaselineEntry>,
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> MirrorError + 'a {
    move |source| MirrorError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// A directory waiting to be copied: where it is in the folder, and the mirror directory it
/// goes into, both opened relative to their parents.
struct CopyJob {
    rel: PathBuf,
    src_parent: Arc<OwnedFd>,
    dst_parent: Arc<OwnedFd>,
}

impl Mirror {
    /// Copies `source` (an absolute directory path) into `destination` (absolute, must not
    /// exist; its parent must) and records the baseline.
    pub fn create(
        source: impl AsRef<Path>,
        destination: impl AsRef<Path>,
    ) -> Result<Mirror, MirrorError> {
        let source = RootLease::acquire(source)?;
        let dst = destination.as_ref();
        if !dst.is_absolute() {
            return Err(LeaseError::NotAbsolute {
                path: dst.to_path_buf(),
            }
            .into());
        }
        match rustix::fs::mkdir(dst, Mode::from_raw_mode(0o700)) {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST) => {
                return Err(MirrorError::DestinationExists {
                    path: dst.to_path_buf(),
                });
            }
            Err(e) => return Err(io_err("create", dst)(e.into())),
        }
        let mirror = RootLease::acquire(dst)?;
        let mut this = Mirror {
            source,
            mirror,
            baseline: BTreeMap::new(),
        };
        this.copy_all()?;
        Ok(this)
    }

    /// The folder's path.
    pub fn source_path(&self) -> &Path {
        self.source.path()
    }

    /// The mirror's path.
    pub fn mirror_path(&self) -> &Path {
        self.mirror.path()
    }

    /// The recorded baseline, by path relative to the roots.
    pub fn baseline(&self) -> &BTreeMap<PathBuf, BaselineEntry> {
        &self.baseline
    }

    fn copy_all(&mut self) -> Result<(), MirrorError> {
        let own = self.mirror.id();
        let src_root =
            Arc::new(sys::reopen_dir(self.source.as_fd()).map_err(io_err("open", Path::new(".")))?);
        let dst_root =
            Arc::new(sys::reopen_dir(self.mirror.as_fd()).map_err(io_err("open", Path::new(".")))?);
        let mut stack = vec![(PathBuf::new(), src_root, dst_root)];
        let mut dir_modes: Vec<(PathBuf, u32)> = Vec::new();
        let mut pending: Vec<CopyJob> = Vec::new();
        let mut buf = Vec::new();
        loop {
            let (rel, src_dir, dst_dir) = if let Some(top) = stack.pop() {
                top
            } else if let Some(job) = pending.pop() {
                match self.open_copy_job(&job, own, &mut dir_modes)? {
                    Some(opened) => opened,
                    None => continue,
                }
            } else {
                break;
            };
            let mut names = Vec::new();
            sys::for_each_entry(src_dir.as_fd(), &mut buf, |name, _| {
                names.push(OsStr::from_bytes(name.to_bytes()).to_os_string());
                Ok(())
            })
            .map_err(io_err("list", &rel))?;
            for name in names {
                if is_git_name(name.as_bytes()) {
                    continue;
                }
                let child = rel.join(&name);
                let meta = match sys::stat_at(src_dir.as_fd(), name.as_os_str()) {
                    Ok(m) => m,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                        self.record(child, EntryKind::Unreadable, None, None);
                        continue;
                    }
                    Err(e) => return Err(io_err("stat", &child)(e)),
                };
                match meta.kind {
                    Kind::Dir => pending.push(CopyJob {
                        rel: child,
                        src_parent: Arc::clone(&src_dir),
                        dst_parent: Arc::clone(&dst_dir),
                    }),
                    Kind::File => self.copy_file(src_dir.as_fd(), dst_dir.as_fd(), &name, child)?,
                    other => self.record(child, EntryKind::from_kind(other), Some(&meta), None),
                }
            }
        }
        // Directory modes last, deepest first: a read-only directory must be filled before it
        // becomes read-only.
        dir_modes.sort_by_key(|(p, _)| std::cmp::Reverse(p.components().count()));
        for (rel, mode) in dir_modes {
            let fd = open_rel_dir(self.mirror.as_fd(), &rel).map_err(io_err("open", &rel))?;
            rustix::fs::fchmod(&fd, crate::sys::perm(mode & 0o1777))
                .map_err(|e| io_err("chmod", &rel)(e.into()))?;
        }
        Ok(())
    }

    /// Opens a queued directory on both sides; `None` when it is recorded but not descended
    /// (unreadable, vanished, or the mirror itself).
    #[allow(clippy::type_complexity)]
    fn open_copy_job(
        &mut self,
        job: &CopyJob,
        own: FileId,
        dir_modes: &mut Vec<(PathBuf, u32)>,
    ) -> Result<Option<(PathBuf, Arc<OwnedFd>, Arc<OwnedFd>)>, MirrorError> {
        let name = job.rel.file_name().unwrap_or_default();
        let src = match sys::open_dir_child(job.src_parent.as_fd(), name) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                let meta = sys::stat_at(job.src_parent.as_fd(), name).ok();
                self.record(job.rel.clone(), EntryKind::Unreadable, meta.as_ref(), None);
                return Ok(None);
            }
            // Swapped for a symlink or file since it was listed: record what it is now.
            Err(_) => {
                let meta = sys::stat_at(job.src_parent.as_fd(), name).ok();
                let kind = meta.map_or(EntryKind::Unreadable, |m| EntryKind::from_kind(m.kind));
                let kind = if kind.is_copied() {
                    EntryKind::Unreadable
                } else {
                    kind
                };
                self.record(job.rel.clone(), kind, meta.as_ref(), None);
                return Ok(None);
            }
        };
        let meta = sys::fstat(&src).map_err(io_err("stat", &job.rel))?;
        if (FileId {
            dev: meta.dev,
            ino: meta.ino,
        }) == own
        {
            // The mirror lives inside the folder: never copy it into itself.
            return Ok(None);
        }
        rustix::fs::mkdirat(job.dst_parent.as_fd(), name, Mode::from_raw_mode(0o700))
            .map_err(|e| io_err("create", &job.rel)(e.into()))?;
        let dst =
            sys::open_dir_child(job.dst_parent.as_fd(), name).map_err(io_err("open", &job.rel))?;
        self.record(job.rel.clone(), EntryKind::Dir, Some(&meta), None);
        dir_modes.push((job.rel.clone(), meta.mode));
        Ok(Some((job.rel.clone(), Arc::new(src), Arc::new(dst))))
    }

    fn record(
        &mut self,
        rel: PathBuf,
        kind: EntryKind,
        meta: Option<&Meta>,
        hash: Option<[u8; 32]>,
    ) {
        self.baseline
            .insert(rel, BaselineEntry::recorded(kind, meta, hash));
    }

    fn copy_file(
        &mut self,
        src_dir: BorrowedFd<'_>,
        dst_dir: BorrowedFd<'_>,
        name: &OsStr,
        rel: PathBuf,
    ) -> Result<(), MirrorError> {
        let fd = match sys::open_file_child(src_dir, name) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                let meta = sys::stat_at(src_dir, name).ok();
                self.record(rel, EntryKind::Unreadable, meta.as_ref(), None);
                return Ok(());
            }
            Err(e) => return Err(io_err("open", &rel)(e)),
        };
        let meta = sys::fstat(&fd).map_err(io_err("stat", &rel))?;
        if meta.kind != Kind::File {
            self.record(rel, EntryKind::from_kind(meta.kind), Some(&meta), None);
            return Ok(());
        }
        sys::set_blocking(fd.as_fd()).map_err(io_err("open", &rel))?;
        let out = rustix::fs::openat(
            dst_dir,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| io_err("create", &rel)(e.into()))?;
        let mut out = File::from(out);
        let hash =
            copy_hashing(&mut File::from(fd), Some(&mut out)).map_err(io_err("copy", &rel))?;
        rustix::fs::fchmod(&out, crate::sys::perm(meta.mode & 0o1777))
            .map_err(|e| io_err("chmod", &rel)(e.into()))?;
        self.record(rel, EntryKind::File, Some(&meta), Some(hash));
        Ok(())
    }

    /// Lists how the mirror differs from the baseline, sorted by path (a `Deleted` before an
    /// `Added` at the same path). A `.git` entry the mirror gained is listed, not descended.
    pub fn changes(&self) -> Result<Vec<Change>, MirrorError> {
        let now = snapshot_tree(self.mirror.as_fd())?;
        let mut out = Vec::new();
        for (path, base) in &self.baseline {
            if !base.kind.is_copied() {
                continue;
            }
            match now.get(path) {
                None => out.push(change(path, ChangeKind::Deleted, base.kind)),
                Some(cur) if cur.kind != base.kind => {
                    out.push(change(path, ChangeKind::Deleted, base.kind));
                    out.push(change(path, ChangeKind::Added, cur.kind));
                }
                Some(cur) => {
                    // The copy never carried set-id bits (see `copy_file`).
                    let same = cur.mode == base.mode & 0o1777
                        && (cur.kind == EntryKind::Dir || cur.hash == base.hash);
                    if !same {
                        out.push(change(path, ChangeKind::Modified, cur.kind));
                    }
                }
            }
        }
        for (path, cur) in &now {
            match self.baseline.get(path) {
                Some(base) if base.kind.is_copied() => {}
                _ => out.push(change(path, ChangeKind::Added, cur.kind)),
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path).then(b.kind.cmp(&a.kind)));
        Ok(out)
    }

    /// Writes the mirror's changes back into the folder where the folder still matches the
    /// baseline, each file atomically (FILE-2); returns what was applied and the conflicts
    /// (RUN-11). Applied changes become the new baseline, so a later turn's `finalize` compares
    /// against what it last wrote. Conflicting paths keep both sides as they are.
    ///
    /// Deletions go first, deepest first; then additions and modifications, shallowest first.
    /// Each change re-checks the folder just before it acts; a process of the same user racing
    /// that re-check is outside what this guards (CMD-11).
    pub fn finalize(&mut self) -> Result<FinalizeReport, MirrorError> {
        self.source.verify()?;
        self.mirror.verify()?;
        let changes = self.changes()?;
        let mut verdict: Vec<Option<ConflictReason>> = changes
            .iter()
            .map(|c| self.precheck(c, &changes))
            .collect::<Result<_, _>>()?;
        propagate(&changes, &mut verdict);

        let mut order: Vec<usize> = (0..changes.len()).collect();
        order.sort_by_key(|&i| {
            let depth = changes[i].path.components().count() as isize;
            match changes[i].kind {
                ChangeKind::Deleted => (0, -depth),
                _ => (1, depth),
            }
        });
        let mut report = FinalizeReport::default();
        let mut dir_modes: Vec<(PathBuf, u32)> = Vec::new();
        for i in order {
            let c = &changes[i];
            let reason = match verdict[i].take() {
                Some(r) => Some(r),
                None => self.apply(c, &mut dir_modes)?,
            };
            match reason {
                Some(reason) => report.conflicts.push(Conflict {
                    change: c.clone(),
                    reason,
                }),
                None => report.applied.push(c.clone()),
            }
        }
        dir_modes.sort_by_key(|(p, _)| std::cmp::Reverse(p.components().count()));
        for (rel, mode) in dir_modes {
            let fd = open_rel_dir(self.source.as_fd(), &rel).map_err(io_err("open", &rel))?;
            rustix::fs::fchmod(&fd, crate::sys::perm(mode & 0o1777))
                .map_err(|e| io_err("chmod", &rel)(e.into()))?;
        }
        for c in &report.applied {
            match source_state(self.source.as_fd(), &c.path)? {
                SourceState::Present(now) => {
                    self.baseline.insert(c.path.clone(), now);
                }
                _ => {
                    self.baseline.remove(&c.path);
                }
            }
        }
        report
            .applied
            .sort_by(|a, b| a.path.cmp(&b.path).then(b.kind.cmp(&a.kind)));
        report.conflicts.sort_by(|a, b| {
            a.change
                .path
                .cmp(&b.change.path)
                .then(b.change.kind.cmp(&a.change.kind))
        });
        Ok(report)
    }

    /// Decides, without touching anything, whether `c` can be applied.
    fn precheck(&self, c: &Change, all: &[Change]) -> Result<Option<ConflictReason>, MirrorError> {
        if c.path
            .components()
            .any(|p| is_git_name(p.as_os_str().as_bytes()))
        {
            return Ok(Some(ConflictReason::ForbiddenName));
        }
        let state = source_state(self.source.as_fd(), &c.path)?;
        let base = self.baseline.get(&c.path);
        Ok(match c.kind {
            ChangeKind::Added => {
                if !c.entry.is_copied() {
                    return Ok(Some(ConflictReason::UnsupportedType));
                }
                let not_mirrored = c
                    .path
                    .ancestors()
                    .any(|a| self.baseline.get(a).is_some_and(|b| !b.kind.is_copied()));
                if not_mirrored {
                    return Ok(Some(ConflictReason::NotMirrored));
                }
                let also_deleted = all
                    .iter()
                    .any(|o| o.path == c.path && o.kind == ChangeKind::Deleted);
                match state {
                    SourceState::Absent => None,
                    // The mirror creates the directory on the way (new, or in place of a file
                    // it deletes): fine if that change goes through, which `propagate` ensures
                    // and the nofollow walk at apply time re-checks.
                    SourceState::ParentAbsent | SourceState::Unsafe
                        if parent_added(&c.path, all) =>
                    {
                        None
                    }
                    SourceState::ParentAbsent => Some(ConflictReason::DeletedInSource),
                    SourceState::Unsafe => Some(ConflictReason::UnsafePath),
                    SourceState::Present(_) if also_deleted => None,
                    SourceState::Present(now)
                        if now.kind == EntryKind::Dir && c.entry == EntryKind::Dir =>
                    {
                        None
                    }
                    SourceState::Present(_) => Some(ConflictReason::CreatedInSource),
                }
            }
            ChangeKind::Modified | ChangeKind::Deleted => match (state, base) {
                (SourceState::Absent | SourceState::ParentAbsent, _) => {
                    (c.kind == ChangeKind::Modified).then_some(ConflictReason::DeletedInSource)
                }
                (SourceState::Unsafe, _) => Some(ConflictReason::UnsafePath),
                (SourceState::Present(now), Some(base)) if base.matches(&now) => {
                    if c.kind == ChangeKind::Deleted && base.kind == EntryKind::Dir {
                        self.dir_gained_entries(&c.path, all)?
                    } else {
                        None
                    }
                }
                (SourceState::Present(_), _) => Some(ConflictReason::ChangedInSource),
            },
        })
    }

    /// A directory the mirror deleted may be removed from the folder only if every entry it has
    /// there now is itself being deleted.
    fn dir_gained_entries(
        &self,
        rel: &Path,
        all: &[Change],
    ) -> Result<Option<ConflictReason>, MirrorError> {
        let fd = match open_rel_dir(self.source.as_fd(), rel) {
            Ok(fd) => fd,
            Err(_) => return Ok(Some(ConflictReason::UnsafePath)),
        };
        let deleted: BTreeSet<&Path> = all
            .iter()
            .filter(|c| c.kind == ChangeKind::Deleted)
            .map(|c| c.path.as_path())
            .collect();
        let mut extra = false;
        let mut buf = Vec::new();
        sys::for_each_entry(fd.as_fd(), &mut buf, |name, _| {
            let child = rel.join(OsStr::from_bytes(name.to_bytes()));
            extra |= !deleted.contains(child.as_path());
            Ok(())
        })
        .map_err(io_err("list", rel))?;
        Ok(extra.then_some(ConflictReason::ChangedInSource))
    }

    /// Applies one prechecked change, re-checking the folder first. `Some(reason)` when the
    /// folder changed in between.
    fn apply(
        &self,
        c: &Change,
        dir_modes: &mut Vec<(PathBuf, u32)>,
    ) -> Result<Option<ConflictReason>, MirrorError> {
        let Some(name) = c.path.file_name() else {
            return Ok(Some(ConflictReason::UnsafePath));
        };
        let parent_rel = c.path.parent().unwrap_or(Path::new(""));
        let parent = match open_rel_dir(self.source.as_fd(), parent_rel) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Some(ConflictReason::DeletedInSource));
            }
            Err(_) => return Ok(Some(ConflictReason::UnsafePath)),
        };
        let shown = self.source.path().join(&c.path);
        let still_baseline = || -> Result<bool, MirrorError> {
            Ok(
                match (
                    source_state(self.source.as_fd(), &c.path)?,
                    self.baseline.get(&c.path),
                ) {
                    (SourceState::Present(now), Some(base)) => base.matches(&now),
                    _ => false,
                },
            )
        };
        match (c.kind, c.entry) {
            (ChangeKind::Deleted, kind) => {
                if matches!(
                    source_state(self.source.as_fd(), &c.path)?,
                    SourceState::Absent
                ) {
                    return Ok(None);
                }
                if !still_baseline()? {
                    return Ok(Some(ConflictReason::ChangedInSource));
                }
                let flags = if kind == EntryKind::Dir {
                    AtFlags::REMOVEDIR
                } else {
                    AtFlags::empty()
                };
                match rustix::fs::unlinkat(&parent, name, flags) {
                    Ok(()) => Ok(None),
                    Err(rustix::io::Errno::NOTEMPTY | rustix::io::Errno::EXIST) => {
                        Ok(Some(ConflictReason::ChangedInSource))
                    }
                    Err(e) => Err(io_err("delete", &c.path)(e.into())),
                }
            }
            (ChangeKind::Added, EntryKind::Dir) => {
                let mode = self.mirror_meta(&c.path)?.mode;
                match rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(0o700)) {
                    Ok(()) => {}
                    Err(rustix::io::Errno::EXIST) => match sys::stat_at(parent.as_fd(), name) {
                        Ok(m) if m.kind == Kind::Dir => return Ok(None),
                        _ => return Ok(Some(ConflictReason::CreatedInSource)),
                    },
                    Err(e) => return Err(io_err("create", &c.path)(e.into())),
                }
                dir_modes.push((c.path.clone(), mode));
                Ok(None)
            }
            (ChangeKind::Modified, EntryKind::Dir) => {
                if !still_baseline()? {
                    return Ok(Some(ConflictReason::ChangedInSource));
                }
                dir_modes.push((c.path.clone(), self.mirror_meta(&c.path)?.mode));
                Ok(None)
            }
            (kind, _) => {
                if kind == ChangeKind::Modified && !still_baseline()? {
                    return Ok(Some(ConflictReason::ChangedInSource));
                }
                let (contents, mode) = self.mirror_file(&c.path)?;
                let replace = if kind == ChangeKind::Added {
                    Replace::Never
                } else {
                    Replace::Allow
                };
                match write_entry(parent.as_fd(), name, &contents, Some(mode), replace, shown) {
                    Ok(()) => Ok(None),
                    Err(WriteError::AlreadyExists { .. }) => {
                        Ok(Some(ConflictReason::CreatedInSource))
                    }
                    Err(WriteError::NotARegularFile { .. }) => {
                        Ok(Some(ConflictReason::ChangedInSource))
                    }
                    Err(e) => Err(MirrorError::Io {
                        op: "write back",
                        path: c.path.clone(),
                        source: io::Error::other(e),
                    }),
                }
            }
        }
    }

    fn mirror_meta(&self, rel: &Path) -> Result<Meta, MirrorError> {
        let (dir, name) = open_rel_parent(self.mirror.as_fd(), rel).map_err(io_err("open", rel))?;
        sys::stat_at(dir.as_fd(), name).map_err(io_err("stat", rel))
    }

    fn mirror_file(&self, rel: &Path) -> Result<(Vec<u8>, u32), MirrorError> {
        let (dir, name) = open_rel_parent(self.mirror.as_fd(), rel).map_err(io_err("open", rel))?;
        let fd = sys::open_file_child(dir.as_fd(), name).map_err(io_err("open", rel))?;
        let meta = sys::fstat(&fd).map_err(io_err("stat", rel))?;
        if meta.kind != Kind::File {
            return Err(io_err("read", rel)(io::Error::other(
                "no longer a regular file",
            )));
        }
        sys::set_blocking(fd.as_fd()).map_err(io_err("open", rel))?;
        let mut contents = Vec::new();
        File::from(fd)
            .read_to_end(&mut contents)
            .map_err(io_err("read", rel))?;
        Ok((contents, meta.mode))
    }
}

/// True when the mirror adds a directory at some ancestor of `path`.
fn parent_added(path: &Path, all: &[Change]) -> bool {
    path.ancestors().skip(1).any(|a| {
        all.iter()
            .any(|o| o.path == a && o.kind == ChangeKind::Added && o.entry == EntryKind::Dir)
    })
}

/// Marks changes that depend on a conflicting one until nothing more changes.
fn propagate(changes: &[Change], verdict: &mut [Option<ConflictReason>]) {
    loop {
        let mut changed = false;
        for c in 0..changes.len() {
            if verdict[c].is_none() {
                continue;
            }
            let cp = &changes[c].path;
            for o in 0..changes.len() {
                if verdict[o].is_some() {
                    continue;
                }
                let op = &changes[o].path;
                let blocked = match changes[o].kind {
                    // A directory cannot go while something below it stays.
                    ChangeKind::Deleted => {
                        changes[o].entry == EntryKind::Dir && cp != op && cp.starts_with(op)
                    }
                    // Nothing can be added below, or in place of, what could not be changed.
                    ChangeKind::Added => {
                        (op != cp && op.starts_with(cp) && changes[c].kind == ChangeKind::Added)
                            || (op == cp && changes[c].kind == ChangeKind::Deleted)
                    }
                    ChangeKind::Modified => false,
                };
                if blocked {
                    verdict[o] = Some(ConflictReason::Dependent { on: cp.clone() });
                    changed = true;
                }
            }
        }
        if !changed {
            return;
        }
    }
}

fn change(path: &Path, kind: ChangeKind, entry: EntryKind) -> Change {
    Change {
        path: path.to_path_buf(),
        kind,
        entry,
    }
}

/// The folder's entry at a path, seen without following any symlink.
enum SourceState {
    Absent,
    /// A directory on the way is missing.
    ParentAbsent,
    /// A symlink, a non-directory or a denied directory is on the way.
    Unsafe,
    Present(BaselineEntry),
}

fn source_state(root: BorrowedFd<'_>, rel: &Path) -> Result<SourceState, MirrorError> {
    let (dir, name) = match open_rel_parent(root, rel) {
        Ok(x) => x,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(SourceState::ParentAbsent),
        Err(_) => return Ok(SourceState::Unsafe),
    };
    let meta = match sys::stat_at(dir.as_fd(), name) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(SourceState::Absent),
        Err(_) => return Ok(SourceState::Unsafe),
    };
    if meta.kind != Kind::File {
        return Ok(SourceState::Present(BaselineEntry::recorded(
            EntryKind::from_kind(meta.kind),
            Some(&meta),
            None,
        )));
    }
    let fd = match sys::open_file_child(dir.as_fd(), name) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(SourceState::Absent),
        Err(_) => return Ok(SourceState::Unsafe),
    };
    let meta = sys::fstat(&fd).map_err(io_err("stat", rel))?;
    if meta.kind != Kind::File {
        return Ok(SourceState::Present(BaselineEntry::recorded(
            EntryKind::from_kind(meta.kind),
            Some(&meta),
            None,
        )));
    }
    sys::set_blocking(fd.as_fd()).map_err(io_err("open", rel))?;
    let hash = copy_hashing(&mut File::from(fd), None).map_err(io_err("read", rel))?;
    Ok(SourceState::Present(BaselineEntry::recorded(
        EntryKind::File,
        Some(&meta),
        Some(hash),
    )))
}

/// Every entry of the mirror with its kind, mode and (files) content hash. Entries named `.git`
/// in any case are listed but not descended.
fn snapshot_tree(root: BorrowedFd<'_>) -> Result<BTreeMap<PathBuf, BaselineEntry>, MirrorError> {
    let mut out = BTreeMap::new();
    // Paths, not fds, wait on the stack so a wide tree does not hold a descriptor per
    // directory; each is re-opened from the root without following links.
    let mut stack = vec![PathBuf::new()];
    let mut buf = Vec::new();
    while let Some(rel) = stack.pop() {
        let dir = open_rel_dir(root, &rel).map_err(io_err("open", &rel))?;
        let mut names = Vec::new();
        sys::for_each_entry(dir.as_fd(), &mut buf, |name, _| {
            names.push(OsStr::from_bytes(name.to_bytes()).to_os_string());
            Ok(())
        })
        .map_err(io_err("list", &rel))?;
        for name in names {
            let child = rel.join(&name);
            let meta = match sys::stat_at(dir.as_fd(), name.as_os_str()) {
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err("stat", &child)(e)),
            };
            let kind = EntryKind::from_kind(meta.kind);
            let mut hash = None;
            if is_git_name(name.as_bytes()) {
                // Listed so finalize can refuse it by name; never read.
            } else if meta.kind == Kind::Dir {
                stack.push(child.clone());
            } else if meta.kind == Kind::File {
                let fd = sys::open_file_child(dir.as_fd(), name.as_os_str())
                    .map_err(io_err("open", &child))?;
                sys::set_blocking(fd.as_fd()).map_err(io_err("open", &child))?;
                hash =
                    Some(copy_hashing(&mut File::from(fd), None).map_err(io_err("read", &child))?);
            }
            out.insert(child, BaselineEntry::recorded(kind, Some(&meta), hash));
        }
    }
    Ok(out)
}

/// Reads `from` to the end, hashing it and, if given, writing it to `to`.
fn copy_hashing(from: &mut File, mut to: Option<&mut File>) -> io::Result<[u8; 32]> {
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buf[..n];
        hasher.update(chunk);
        if let Some(out) = to.as_deref_mut() {
            out.write_all(chunk)?;
        }
    }
    Ok(*hasher.finalize().as_bytes())
}

/// Opens the directory `rel` (relative, normal components only) under `root` without following
/// a symlink; `""` re-opens the root.
fn open_rel_dir(root: BorrowedFd<'_>, rel: &Path) -> io::Result<OwnedFd> {
    let mut cur: Option<OwnedFd> = None;
    for comp in rel.components() {
        let Component::Normal(name) = comp else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        let base = cur.as_ref().map_or(root, |fd| fd.as_fd());
        cur = Some(sys::open_dir_child(base, name)?);
    }
    match cur {
        Some(fd) => Ok(fd),
        None => sys::reopen_dir(root),
    }
}

fn open_rel_parent<'p>(root: BorrowedFd<'_>, rel: &'p Path) -> io::Result<(OwnedFd, &'p OsStr)> {
    let name = rel
        .file_name()
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let dir = open_rel_dir(root, rel.parent().unwrap_or(Path::new("")))?;
    Ok((dir, name))
}
