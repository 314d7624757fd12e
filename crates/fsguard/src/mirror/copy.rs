//! The copy half of [`Mirror::create`](super::Mirror::create): a parallel walk of the folder
//! that copies files into the mirror and records the baseline (RUN-11).
//!
//! Worker threads (the crate's worker pool, `pool.rs`) share one stack of jobs: a directory to
//! open on both sides and list, or a batch of a listed directory's files to copy. Batches let one wide directory spread over
//! every core; directories are opened relative to their parent's fd (`O_NOFOLLOW`), so no path
//! is re-resolved and no symlink followed. `d_type` sends regular files and directories
//! straight to the `open` that `fstat`s them; only other and `DT_UNKNOWN` entries are
//! `stat`ed. The stack is LIFO and a directory's batches are pushed after its subdirectories,
//! so a listed directory's fds are released soon and the open fds stay near the tree's depth.
//! The first error stops the walk; `create` and `refresh` then remove the half-made mirror.
//!
//! A regular file with more than one link (checked on the `fstat` of the descriptor it would be
//! copied from) is not copied: it is listed, and from then on the walk only looks for more of
//! them, copying nothing, so the refusal names every one (module docs of `mirror`, "Hard
//! links").
//!
//! [`Mirror::refresh`](super::Mirror::refresh) runs the same walk over a mirror already pruned
//! to the folder's shape ([`super::refresh`]): directories may exist already, anything not
//! copied is removed from the mirror, and a file is kept instead of copied only when the
//! [`Reuse`] record proves both sides unchanged since it was copied.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{Mode, OFlags};

use super::refresh::{Reuse, remove_at};
use super::{
    BaselineEntry, CopyStamp, EntryKind, Journals, MirrorError, Time, copy_hashing, copy_plain,
    io_err, is_recent,
};
use crate::lease::FileId;
use crate::relpath::is_git_name;
use crate::scan::HardLink;
use crate::sys::{self, Kind, Meta};
use crate::temps::is_temp_name;

/// Files per batch: large enough that the queue's lock is no cost, small enough that a
/// directory of a few hundred files is shared between cores.
const FILES_PER_JOB: usize = 64;

/// What the mirror already has at a name the folder's directory lists (refresh; a new
/// mirror is empty), from the mirror directory's own listing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum InMirror {
    Absent,
    Dir,
    /// A file, anything else, or a type the listing did not say.
    Other,
}

impl InMirror {
    fn of(kind: Option<Kind>) -> InMirror {
        match kind {
            Some(Kind::Dir) => InMirror::Dir,
            _ => InMirror::Other,
        }
    }
}

pub(super) enum Job {
    /// A directory already open on both sides, to list.
    List {
        rel: PathBuf,
        src: Arc<OwnedFd>,
        dst: Arc<OwnedFd>,
    },
    /// A directory to open (and create in the mirror), then list; opened when taken, so a
    /// waiting job holds only its parents' fds.
    Open {
        rel: PathBuf,
        src_parent: Arc<OwnedFd>,
        dst_parent: Arc<OwnedFd>,
        in_mirror: InMirror,
    },
    /// Files of one listed directory to copy.
    Files {
        dir: PathBuf,
        src: Arc<OwnedFd>,
        dst: Arc<OwnedFd>,
        names: Vec<(OsString, InMirror)>,
    },
}

/// What the walk recorded: the baseline, the copies' stamps, directory modes to set last, and
/// the hard-linked files it refused to copy.
#[derive(Default)]
pub(super) struct Copied {
    /// Every entry's baseline and, for a copied file, its copy's stamp.
    pub(super) entries: Vec<(PathBuf, (BaselineEntry, Option<CopyStamp>))>,
    pub(super) dir_modes: Vec<(PathBuf, u32)>,
    /// Paths relative to the folder, in walk order (the caller sorts).
    pub(super) hard_links: Vec<HardLink>,
    /// Files a refresh kept instead of copying.
    pub(super) kept: usize,
}

impl Copied {
    fn record(&mut self, rel: PathBuf, kind: EntryKind, meta: Option<&Meta>) {
        self.entries
            .push((rel, (BaselineEntry::recorded(kind, meta, None), None)));
    }

    /// A copied (or kept) file: the folder's side as `meta` and `hash` say, the copy's stamp.
    fn file(&mut self, rel: PathBuf, meta: &Meta, hash: Option<[u8; 32]>, copy: CopyStamp) {
        let base = BaselineEntry::recorded(EntryKind::File, Some(meta), hash);
        self.entries.push((rel, (base, Some(copy))));
    }

    fn append(&mut self, other: Copied) {
        self.entries.extend(other.entries);
        self.dir_modes.extend(other.dir_modes);
        self.hard_links.extend(other.hard_links);
        self.kept += other.kept;
    }
}

/// What every worker reads.
struct Shared<'r> {
    /// The mirror's own directory, never copied into itself.
    own: FileId,
    /// Files changed at or after this are hashed while copied (racily clean).
    since: Time,
    /// `Some` when refreshing an existing mirror.
    reuse: Option<&'r Reuse>,
    /// A hard-linked file was found: the mirror will be removed, so copy nothing more and only
    /// look for the other hard links.
    refused: AtomicBool,
    /// Each directory is watched here before it is listed.
    journals: &'r Journals,
}

/// Copies the folder open at `src_root` into the empty mirror open at `dst_root`.
pub(super) fn copy_tree(
    src_root: OwnedFd,
    dst_root: OwnedFd,
    own: FileId,
    since: Time,
    reuse: Option<&Reuse>,
    journals: &Journals,
) -> Result<Copied, MirrorError> {
    let root = Job::List {
        rel: PathBuf::new(),
        src: Arc::new(src_root),
        dst: Arc::new(dst_root),
    };
    walk(vec![root], Copied::default(), own, since, reuse, journals)
}

/// Runs the copy walk from `jobs` (the root's, or [`subtree_jobs`]), adding to `copied`.
pub(super) fn walk(
    jobs: Vec<Job>,
    mut copied: Copied,
    own: FileId,
    since: Time,
    reuse: Option<&Reuse>,
    journals: &Journals,
) -> Result<Copied, MirrorError> {
    let threads = super::walk_threads();
    let shared = Shared {
        own,
        since,
        reuse,
        refused: AtomicBool::new(false),
        journals,
    };
    // The first error stops the walk (the pool drops what is queued); the caller removes the
    // half-made mirror.
    let parts = crate::pool::run(threads, jobs, |job, jobs, local: &mut Local| {
        run(&shared, job, &mut local.buf, jobs, &mut local.copied)
    })?;
    for part in parts {
        copied.append(part.copied);
    }
    if copied.hard_links.is_empty() {
        Ok(copied)
    } else {
        let mut links = copied.hard_links;
        links.sort_by(|a, b| a.path.cmp(&b.path));
        Err(MirrorError::HardLinked { links })
    }
}

/// One worker's own: what it copied and recorded, and its directory-reading buffer.
#[derive(Default)]
struct Local {
    copied: Copied,
    buf: Vec<u8>,
}

fn run(
    shared: &Shared<'_>,
    job: Job,
    buf: &mut Vec<u8>,
    jobs: &mut Vec<Job>,
    out: &mut Copied,
) -> Result<(), MirrorError> {
    // A refresh knows about how many entries to expect: room for a worker's share at once,
    // instead of growing (and copying) the list of large entries as it fills.
    if out.entries.capacity() == 0 {
        let expected = shared.reuse.map_or(0, |r| r.len());
        out.entries
            .reserve(expected / super::walk_threads() + expected / 8);
    }
    match job {
        Job::List { rel, src, dst } => list(shared, &rel, &src, &dst, buf, jobs, out),
        Job::Open {
            rel,
            src_parent,
            dst_parent,
            in_mirror,
        } => match open_pair(shared, &rel, &src_parent, &dst_parent, in_mirror, out)? {
            Some((src, dst)) => list(shared, &rel, &Arc::new(src), &Arc::new(dst), buf, jobs, out),
            None => Ok(()),
        },
        Job::Files {
            dir,
            src,
            dst,
            names,
        } => {
            for (name, in_mirror) in names {
                let rel = dir.join(&name);
                copy_file(shared, src.as_fd(), dst.as_fd(), &name, in_mirror, rel, out)?;
            }
            Ok(())
        }
    }
}

/// Lists `rel` (open as `src`, its mirror as `dst`): subdirectories become `Open` jobs, files
/// `Files` batches (pushed last, so taken first), anything else is recorded here. When
/// refreshing, the mirror's directory is listed too: what the folder's lacks (and any `.git`)
/// is removed here, and each job is told what the mirror has at its name, so nothing is
/// created that exists or removed that does not.
fn list(
    shared: &Shared<'_>,
    rel: &Path,
    src: &Arc<OwnedFd>,
    dst: &Arc<OwnedFd>,
    buf: &mut Vec<u8>,
    jobs: &mut Vec<Job>,
    out: &mut Copied,
) -> Result<(), MirrorError> {
    if let Some(journal) = &shared.journals.source {
        journal.watch(src.as_fd(), rel);
    }
    if let Some(journal) = &shared.journals.mirror {
        journal.watch(dst.as_fd(), rel);
    }
    let mut entries: Vec<(OsString, Option<Kind>)> = Vec::new();
    sys::for_each_entry(src.as_fd(), buf, |name, kind| {
        entries.push((OsStr::from_bytes(name.to_bytes()).to_os_string(), kind));
        Ok(())
    })
    .map_err(io_err("list", rel))?;
    // `.git` is never mirrored; nor are our own temporary files, which only the process that
    // made them (or the sweep after its death) may rename or remove.
    entries.retain(|(name, _)| !is_git_name(name.as_bytes()) && !is_temp_name(name));
    let mut in_dst = vec![InMirror::Absent; entries.len()];
    if shared.reuse.is_some() {
        // Both listings sorted by name and merged: what the mirror has at each of the
        // folder's names, and what it has that the folder lacks (removed now).
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut theirs: Vec<(OsString, Option<Kind>)> = Vec::new();
        sys::for_each_entry(dst.as_fd(), buf, |name, kind| {
            theirs.push((OsStr::from_bytes(name.to_bytes()).to_os_string(), kind));
            Ok(())
        })
        .map_err(io_err("list", rel))?;
        theirs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut ours = entries.iter().enumerate().peekable();
        for (name, kind) in theirs {
            while ours.next_if(|(_, (n, _))| *n < name).is_some() {}
            match ours.next_if(|(_, (n, _))| *n == name) {
                Some((i, _)) => in_dst[i] = InMirror::of(kind),
                None => {
                    remove_at(dst.as_fd(), &name).map_err(io_err("remove", &rel.join(&name)))?;
                }
            }
        }
    }
    let mut files: Vec<(OsString, InMirror)> = Vec::new();
    for ((name, kind), in_mirror) in entries.into_iter().zip(in_dst) {
        let entry = Entry {
            name,
            kind,
            in_mirror,
        };
        dispatch(rel, src, dst, entry, jobs, &mut files, out)?;
    }
    push_files(rel, src, dst, files, jobs);
    Ok(())
}

/// One name of a listed directory: what the folder's listing says it is (`None`: not said,
/// so it is `stat`-ed) and what the mirror has there.
struct Entry {
    name: OsString,
    kind: Option<Kind>,
    in_mirror: InMirror,
}

/// Sends one entry of the directory `rel` (open as `src`, its mirror as `dst`) where it goes:
/// a directory becomes an `Open` job, a file joins `files`, anything else is recorded here.
fn dispatch(
    rel: &Path,
    src: &Arc<OwnedFd>,
    dst: &Arc<OwnedFd>,
    entry: Entry,
    jobs: &mut Vec<Job>,
    files: &mut Vec<(OsString, InMirror)>,
    out: &mut Copied,
) -> Result<(), MirrorError> {
    let Entry {
        name,
        kind,
        in_mirror,
    } = entry;
    let kind = match kind {
        Some(k @ (Kind::File | Kind::Dir)) => k,
        // Links, special files and `DT_UNKNOWN`: what the entry is decides, so `stat` it.
        _ => {
            let child = rel.join(&name);
            match sys::stat_at(src.as_fd(), name.as_os_str()) {
                Ok(m) if matches!(m.kind, Kind::File | Kind::Dir) => m.kind,
                Ok(m) => {
                    clear(in_mirror, dst.as_fd(), &name, &child)?;
                    out.record(child, EntryKind::from_kind(m.kind), Some(&m));
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return clear(in_mirror, dst.as_fd(), &name, &child);
                }
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    clear(in_mirror, dst.as_fd(), &name, &child)?;
                    out.record(child, EntryKind::Unreadable, None);
                    return Ok(());
                }
                Err(e) => return Err(io_err("stat", &child)(e)),
            }
        }
    };
    match kind {
        Kind::Dir => jobs.push(Job::Open {
            rel: rel.join(&name),
            src_parent: Arc::clone(src),
            dst_parent: Arc::clone(dst),
            in_mirror,
        }),
        _ => files.push((name, in_mirror)),
    }
    Ok(())
}

/// The files of the directory `rel` as `Files` jobs, in batches.
fn push_files(
    rel: &Path,
    src: &Arc<OwnedFd>,
    dst: &Arc<OwnedFd>,
    mut files: Vec<(OsString, InMirror)>,
    jobs: &mut Vec<Job>,
) {
    while !files.is_empty() {
        let rest = files.split_off(files.len().saturating_sub(FILES_PER_JOB));
        jobs.push(Job::Files {
            dir: rel.to_path_buf(),
            src: Arc::clone(src),
            dst: Arc::clone(dst),
            names: rest,
        });
    }
}

/// The jobs that bring the subtrees at `roots` (relative; none the root itself) of the mirror
/// open at `dst_root` up to date with the folder open at `src_root`, as the whole walk would
/// (a journaled refresh, [`super::refresh`]). `None` when a root's parent directory cannot be
/// opened on either side: then only the whole walk can say what is there. Each root's mirror
/// parent is made owner-`rwx` for the walk and gets the folder's mode (`parent_modes`) back
/// at the end.
pub(super) fn subtree_jobs(
    src_root: BorrowedFd<'_>,
    dst_root: BorrowedFd<'_>,
    roots: &[PathBuf],
    parent_mode: impl Fn(&Path) -> Option<u32>,
    out: &mut Copied,
) -> Result<Option<Vec<Job>>, MirrorError> {
    let mut jobs = Vec::new();
    for root in roots {
        let (Some(name), Some(parent)) = (root.file_name(), root.parent()) else {
            return Ok(None);
        };
        let (Ok(src), Ok(dst)) = (
            super::open_rel_dir(src_root, parent),
            super::open_rel_dir(dst_root, parent),
        ) else {
            return Ok(None);
        };
        if !parent.as_os_str().is_empty() {
            let Some(mode) = parent_mode(parent) else {
                return Ok(None);
            };
            let now = sys::fstat(&dst).map_err(io_err("stat", parent))?.mode & 0o7777;
            if now & 0o700 != 0o700 {
                rustix::fs::fchmod(&dst, sys::perm((now | 0o700) & 0o1777))
                    .map_err(|e| io_err("chmod", parent)(e.into()))?;
                out.dir_modes.push((parent.to_path_buf(), mode));
            }
        }
        let in_mirror = match sys::stat_at(dst.as_fd(), name) {
            Ok(m) => InMirror::of(Some(m.kind)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => InMirror::Absent,
            Err(e) => return Err(io_err("stat", root)(e)),
        };
        let (src, dst) = (Arc::new(src), Arc::new(dst));
        if is_git_name(name.as_bytes()) || is_temp_name(name) {
            // Never copied; whatever the mirror has there goes, as a listing would remove it.
            clear(in_mirror, dst.as_fd(), name, root)?;
            continue;
        }
        let mut files = Vec::new();
        let entry = Entry {
            name: name.to_os_string(),
            kind: None,
            in_mirror,
        };
        dispatch(parent, &src, &dst, entry, &mut jobs, &mut files, out)?;
        push_files(parent, &src, &dst, files, &mut jobs);
    }
    Ok(Some(jobs))
}

/// Opens the directory `rel` in the folder and creates and opens its mirror; `None` when it
/// is recorded but not descended (unreadable, vanished, swapped for something else, or the
/// mirror itself).
fn open_pair(
    shared: &Shared<'_>,
    rel: &Path,
    src_parent: &OwnedFd,
    dst_parent: &OwnedFd,
    in_mirror: InMirror,
    out: &mut Copied,
) -> Result<Option<(OwnedFd, OwnedFd)>, MirrorError> {
    let name = rel.file_name().unwrap_or_default();
    let src = sys::open_dir_child(src_parent.as_fd(), name);
    if src.is_err() {
        clear(in_mirror, dst_parent.as_fd(), name, rel)?;
    }
    let src = match src {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            let meta = sys::stat_at(src_parent.as_fd(), name).ok();
            out.record(rel.to_path_buf(), EntryKind::Unreadable, meta.as_ref());
            return Ok(None);
        }
        // Swapped for a symlink or file since it was listed: record what it is now.
        Err(_) => {
            let meta = sys::stat_at(src_parent.as_fd(), name).ok();
            let kind = meta.map_or(EntryKind::Unreadable, |m| EntryKind::from_kind(m.kind));
            let kind = if kind.is_copied() {
                EntryKind::Unreadable
            } else {
                kind
            };
            out.record(rel.to_path_buf(), kind, meta.as_ref());
            return Ok(None);
        }
    };
    let meta = sys::fstat(&src).map_err(io_err("stat", rel))?;
    if (FileId {
        dev: meta.dev,
        ino: meta.ino,
    }) == shared.own
    {
        // The mirror lives inside the folder: never copy it into itself.
        clear(in_mirror, dst_parent.as_fd(), name, rel)?;
        return Ok(None);
    }
    let dst = match in_mirror {
        // Refresh: the mirror has this directory already; what the folder's lacks goes when
        // it is listed. It must be ours to fill: owner rwx, as a new one is.
        InMirror::Dir => open_own_dir(dst_parent.as_fd(), name, rel)?,
        InMirror::Absent | InMirror::Other => {
            clear(in_mirror, dst_parent.as_fd(), name, rel)?;
            rustix::fs::mkdirat(dst_parent.as_fd(), name, Mode::from_raw_mode(0o700))
                .map_err(|e| io_err("create", rel)(e.into()))?;
            let fd = sys::open_dir_child(dst_parent.as_fd(), name).map_err(io_err("open", rel))?;
            (fd, 0o700)
        }
    };
    out.record(rel.to_path_buf(), EntryKind::Dir, Some(&meta));
    // Directory modes are set last (a read-only one must be filled first), and only where
    // the mirror's differs: a kept directory usually has the folder's mode already.
    if dst.1 != meta.mode & 0o1777 {
        out.dir_modes.push((rel.to_path_buf(), meta.mode));
    }
    Ok(Some((src, dst.0)))
}

/// Opens the mirror's existing directory `name` for a refresh, with the mode it has now made
/// owner-`rwx` (a failed turn may have left it read-only or unreadable); returns that mode.
fn open_own_dir(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    rel: &Path,
) -> Result<(OwnedFd, u32), MirrorError> {
    let fd = match sys::open_dir_child(dir, name) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            sys::chmod_dir_child(dir, name, Mode::from_raw_mode(0o700))
                .map_err(io_err("chmod", rel))?;
            sys::open_dir_child(dir, name).map_err(io_err("open", rel))?
        }
        Err(e) => return Err(io_err("open", rel)(e)),
    };
    let mode = sys::fstat(&fd).map_err(io_err("stat", rel))?.mode & 0o7777;
    if mode & 0o700 == 0o700 {
        return Ok((fd, mode));
    }
    let mode = (mode | 0o700) & 0o1777;
    rustix::fs::fchmod(&fd, sys::perm(mode)).map_err(|e| io_err("chmod", rel)(e.into()))?;
    Ok((fd, mode))
}

/// Copies one file (or records what it turned out to be). `meta` is taken before the first
/// byte is read: a write during the copy moves the folder's ctime past it, and finalize then
/// sees the file as changed (module docs of `mirror`).
fn copy_file(
    shared: &Shared<'_>,
    src_dir: BorrowedFd<'_>,
    dst_dir: BorrowedFd<'_>,
    name: &OsStr,
    in_mirror: InMirror,
    rel: PathBuf,
    out: &mut Copied,
) -> Result<(), MirrorError> {
    let since = shared.since;
    if in_mirror == InMirror::Other && keep_copy(shared, src_dir, dst_dir, name, &rel, out) {
        return Ok(());
    }
    let fd = sys::open_file_child(src_dir, name);
    if fd.is_err() {
        clear(in_mirror, dst_dir, name, &rel)?;
    }
    let fd = match fd {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            let meta = sys::stat_at(src_dir, name).ok();
            out.record(rel, EntryKind::Unreadable, meta.as_ref());
            return Ok(());
        }
        // A symlink (`ELOOP` under `O_NOFOLLOW`) or anything else it became since listed.
        Err(e) => {
            return match sys::stat_at(src_dir, name) {
                Ok(m) if m.kind != Kind::File => {
                    out.record(rel, EntryKind::from_kind(m.kind), Some(&m));
                    Ok(())
                }
                Err(e2) if e2.kind() == io::ErrorKind::NotFound => Ok(()),
                _ => Err(io_err("open", &rel)(e)),
            };
        }
    };
    let meta = sys::fstat(&fd).map_err(io_err("stat", &rel))?;
    // CMD-9 and FILE-1's rule, for what `run` will read: another name of this file may be
    // outside the folder. Decided on the descriptor the copy would read, before any byte is.
    if meta.kind == Kind::File && meta.nlink > 1 {
        shared.refused.store(true, Ordering::Relaxed);
        out.hard_links.push(HardLink {
            path: rel,
            links: meta.nlink,
            id: FileId {
                dev: meta.dev,
                ino: meta.ino,
            },
        });
        return Ok(());
    }
    if shared.refused.load(Ordering::Relaxed) {
        return Ok(());
    }
    if let Some(reuse) = shared.reuse {
        if meta.kind == Kind::File && !is_recent(&meta, since) {
            if let Some(stamp) = reuse.reusable(&rel, &meta, dst_dir, name) {
                out.kept += 1;
                out.file(rel, &meta, None, stamp);
                return Ok(());
            }
        }
        clear(in_mirror, dst_dir, name, &rel)?;
    }
    if meta.kind != Kind::File {
        if meta.kind == Kind::Dir {
            // Swapped for a directory since listed: recorded, not descended.
            out.record(rel, EntryKind::Unreadable, Some(&meta));
        } else {
            out.record(rel, EntryKind::from_kind(meta.kind), Some(&meta));
        }
        return Ok(());
    }
    sys::set_blocking(fd.as_fd()).map_err(io_err("open", &rel))?;
    let out_fd = rustix::fs::openat(
        dst_dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| io_err("create", &rel)(e.into()))?;
    let mut to = File::from(out_fd);
    let mut from = File::from(fd);
    let hash = if is_recent(&meta, since) {
        Some(copy_hashing(&mut from, Some(&mut to)).map_err(io_err("copy", &rel))?)
    } else {
        copy_plain(&mut from, &mut to).map_err(io_err("copy", &rel))?;
        None
    };
    rustix::fs::fchmod(&to, sys::perm(meta.mode & 0o1777))
        .map_err(|e| io_err("chmod", &rel)(e.into()))?;
    let copied = sys::fstat(&to).map_err(io_err("stat", &rel))?;
    out.file(rel, &meta, hash, CopyStamp::of(&copied));
    Ok(())
}

/// Refresh: keeps the mirror's copy of the folder's file `name` without opening either, when
/// the [`Reuse`] record proves both sides unchanged since it was copied (the `refresh` module
/// docs). The folder's side is `stat`-ed fresh (on a network file system from the server, as
/// the `open` of the slow path would make it); a file with more than one link, a recent one,
/// or any other doubt takes the slow path, which opens it and decides on its descriptor.
fn keep_copy(
    shared: &Shared<'_>,
    src_dir: BorrowedFd<'_>,
    dst_dir: BorrowedFd<'_>,
    name: &OsStr,
    rel: &Path,
    out: &mut Copied,
) -> bool {
    let Some(reuse) = shared.reuse else {
        return false;
    };
    if shared.refused.load(Ordering::Relaxed) {
        return false;
    }
    let Ok(meta) = sys::stat_fresh(src_dir, name) else {
        return false;
    };
    if meta.kind != Kind::File || meta.nlink != 1 || is_recent(&meta, shared.since) {
        return false;
    }
    let Some(stamp) = reuse.reusable(rel, &meta, dst_dir, name) else {
        return false;
    };
    out.kept += 1;
    out.file(rel.to_path_buf(), &meta, None, stamp);
    true
}

/// Refresh only: removes whatever the mirror has at `name` (nothing there in a new mirror, or
/// where the mirror's listing had nothing).
fn clear(
    in_mirror: InMirror,
    dst_dir: BorrowedFd<'_>,
    name: &OsStr,
    rel: &Path,
) -> Result<(), MirrorError> {
    if in_mirror != InMirror::Absent {
        remove_at(dst_dir, name).map_err(io_err("remove", rel))?;
    }
    Ok(())
}
