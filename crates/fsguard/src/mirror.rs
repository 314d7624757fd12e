//! `Mirror`: a private copy of a user's folder, written back only where the folder still
//! matches what was copied (RUN-11, invariant 7).
//!
//! # How "unchanged" is decided without reading every file
//!
//! A mirror is taken and finalized around every one-call turn, so its cost is paid per call.
//! Hashing every file at create and again at finalize made that cost proportional to the size
//! of the folder; metadata decides instead wherever it can, and contents are read only where
//! metadata cannot decide.
//!
//! **The folder's side.** For every entry the baseline records type, device, inode, size,
//! permission bits, mtime and ctime, from the `fstat` of the descriptor the copy is read from,
//! taken *before* the first byte is read. At finalize a file counts as unchanged only if all of
//! them are equal. The argument: every change to a file's content, mode or times — `write`,
//! `truncate`, `fallocate`, `chmod`, `chown`, `utimensat`, even a link or unlink — makes the
//! kernel set its ctime to the current time, and no system call sets a chosen ctime
//! (`utimensat` sets atime and mtime, and itself moves ctime to now). So a rewrite that restores
//! the size and the mtime is still caught by the ctime; a replacement by rename (an editor's
//! save) puts another inode under the name. A write during the copy moves the ctime past the
//! recorded one, so a torn copy is never mistaken for the folder's file either.
//!
//! **Racily clean files.** Timestamps have a granularity: the kernel stamps files from a coarse
//! clock (one tick, 1–10 ms, where the file system does not hand out fine-grained times; Linux
//! 6.13+ "multigrain" timestamps do for files whose ctime was read), some file systems store
//! seconds or two seconds (FAT). A file changed in the same tick as the change the baseline saw
//! can keep every field. As in git's "racy clean" index entries, a file whose mtime or ctime is
//! within [`RACY_WINDOW`] (3 s) of the snapshot — or after it — is hashed (BLAKE3) while it is
//! copied, and finalize compares its content as well. Everything older is decided by metadata.
//!
//! **The mirror's side.** After a file is copied and its mode set, its metadata (the same
//! fields) is recorded. Then the mirror's own clock is read — the root of the mirror is
//! `chmod`-ed to its own mode and its ctime read back — until it is past every recorded ctime
//! (one tick at most, nothing with multigrain timestamps; at most 50 ms). From then
//! on any change to a copy gets a later ctime, so a copy whose metadata is still equal was not
//! written to, and it is neither read nor written back. A copy the clock could not vouch for
//! within the wait is hashed instead. A copy whose metadata changed is compared by content: with
//! the recorded hash if there is one, else with the folder's file if that still matches the
//! baseline (byte for byte, so a copy only touched is no change); when the folder's file has
//! changed too, the copy's original content is no longer known and the copy counts as modified
//! — finalize then reports a conflict rather than guess, and overwrites nothing.
//!
//! **What is assumed.** (1) The file systems maintain ctime (every POSIX local file system,
//! NFS and SMB servers do; a FUSE file system that reports a constant ctime weakens the check
//! to inode, size, mode and mtime). (2) The system clock does not step backwards between the
//! snapshot and finalize: setting it needs `CAP_SYS_TIME`, so a process of the same user cannot
//! make a change land on the old ctime; nor can it without root (writing the block device, or
//! `debugfs`). (3) A network file system's server clock is not more than [`RACY_WINDOW`] behind
//! this machine's, or a just-changed file may not count as recent; and its attributes are
//! revalidated on open (NFS close-to-open), which is why finalize opens the folder's file before
//! `fstat`; an SMB client (not this machine) can set a file's change time explicitly, and is
//! trusted not to. (4) Writes through a shared writable memory mapping move the times when the
//! kernel write-protects the pages again — after writeback (by default within about 30 s) or an
//! `msync` — so a process holding a file mapped can change an already-dirty page unseen in
//! between; the old per-file hash would have seen it. Such writers (databases holding their
//! files open) are not safe targets of a write-back in any case: the rename leaves them writing
//! to the old inode.
//!
//! # Change journals
//!
//! Metadata decides "unchanged" without reading a file, but still costs a `stat` of every file
//! on each side at every turn. A change journal (module `journal`: inotify on Linux) says which
//! paths may have changed at all, so a turn looks at those and no others
//! ([`MirrorOptions::journaling`]):
//!
//! - **The mirror's, during a turn** (the default, [`Journaling::Mirror`]): the walk that
//!   refreshes the mirror watches each mirror directory before it lists it, so
//!   [`Mirror::changes`] — and with it [`Mirror::finalize`] — compares only the paths the
//!   journal names with the baseline; every other path is exactly as the walk recorded it. The
//!   arguments above decide those paths as before.
//! - **Both trees, between turns** ([`Journaling::Both`], for a process that keeps the mirror,
//!   such as an MCP server): the folder's directories are watched too, by the same walk, and a
//!   reader thread keeps the kernel's queue drained while the process idles.
//!   [`Mirror::refresh_journaled`] then brings the mirror up to date by walking only the
//!   subtrees either journal names — as [`Mirror::refresh`] walks the whole tree, keeping a
//!   file whose both sides still match what was recorded — so a turn costs what changed since
//!   the last one, not the size of the folder.
//!
//! **Why no change is missed.** Every path the journal does not name was recorded by the walk
//! *after* its directory's watch was in place, and the kernel queues an event inside every
//! system call that creates, removes, renames, writes, truncates or re-modes an entry of a
//! watched directory, before the call returns; a directory made later was itself an event,
//! and everything below a named path is looked at. So a path without an event is unchanged
//! since it was recorded, whatever its timestamps' granularity. Where the journal cannot say
//! that — the kernel dropped events, a watch could not be placed (the per-user inotify limits
//! are shared with the user's other watchers and with commands), a watch or a root went away,
//! the record beside the mirror is no longer the one this mirror wrote (another process took
//! the mirror in between) — it says so and the whole walk runs, as without a journal. The one
//! thing it does not see is a write through a shared writable mapping before the file is
//! closed: in the mirror, `run`'s programs have exited before the turn's changes are read; in
//! the folder, such a writer is assumption (4)'s (module `journal` spells this out). Debug
//! builds check every journaled [`Mirror::changes`] against the full walk.
//!
//! # A save during the write-back
//!
//! Checking a file right before replacing it leaves a window: a user's save between the check
//! and the rename would be overwritten and the file reported applied. So the write-back never
//! removes a file it replaces or deletes until it has seen it, after the replacement, exactly
//! as the baseline recorded it: the new file is swapped in with `renameat2(RENAME_EXCHANGE)`
//! (a deleted file is renamed aside), the old one waits under a private name beside it for
//! [`WRITE_BACK_SETTLE`], and is removed only if it is still the vetted, unchanged inode;
//! otherwise the swap is undone and the path is a conflict. **Guarantee:** a save whose
//! `write` or `rename` returned before the write-back verified that file is never lost, in
//! place or by rename, and is reported as a conflict, not as applied. **Limits:** a process
//! that holds the file open and writes after the verification (it writes to the removed
//! inode, as it would after any atomic save); an `open` stalled for longer than the settle
//! time between looking up the name and truncating; file systems that cannot exchange names
//! (a plain rename after the check, the earlier behaviour). Measured: before, 10 of 4000
//! random-order saves and 102–493 of 2000 saves aimed at the file being written were lost
//! per run; after, none (`tests/it/writeback_race.rs`).
//!
//! # Hard links
//!
//! A regular file with more than one link may be another name of a file outside the folder
//! (`ln /elsewhere/secret folder/x`); copying it would hand `run` the outside content, which
//! `command` (CMD-9) and the file tools (FILE-1) refuse to touch. So the copy walk checks the
//! link count on the `fstat` of the very descriptor the content would be read from, before the
//! first byte, and a folder holding such a file is not mirrored at all:
//! [`MirrorError::HardLinked`] names every one (the walk goes on looking, copying nothing
//! more), and [`Mirror::create`] and [`Mirror::refresh`] remove the half-made mirror before they
//! return the error, so no later call can take it for a copy. A name added to the file after
//! that `fstat` does not change what is read: the descriptor's inode had one name, ours, and
//! its content is the folder's. A hard-linked file the process may not open is never read:
//! it is recorded as unreadable, like any unreadable file, and never replaced.
//!
//! Write-back never writes through a link either. It replaces a folder entry by exchanging a
//! new file in (FILE-2) and never opens the old inode for writing, so other names keep their
//! content; and a folder file that gained a name after the mirror was taken no longer matches
//! its baseline (the link count is recorded, and `link(2)` moves the ctime), so it is a
//! [`ConflictReason::ChangedInSource`] and left as it is.
//!
//! Inside the mirror, the program cannot make a hard link: the sandbox's seccomp filter denies
//! `link` and `linkat` (and Landlock, on its own, refuses to link in a file from a directory
//! outside its rules).
//! One made anyway would only give a mirror file a second name — both names are written back
//! as separate copies of mirror content — and a same-user process outside the sandbox that
//! links an outside file into the mirror is CMD-11's limit (it could write that content
//! anywhere itself). A refresh copies any file whose copy's ctime moved, linked ones included.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::ops::Bound;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::fs::{AtFlags, Mode};

use crate::atomic::{Contents, Exchanged, Replace, WriteError, exchange_entry, write_entry};
use crate::lease::{LeaseError, RootLease};
use crate::relpath::is_git_name;
use crate::scan::HardLink;
use crate::sys::{self, Kind, Meta};

mod copy;
mod journal;
mod refresh;
mod settle;
mod writeback;

pub use writeback::{
    PendingWriteBack, Recovered, STAGED_PREFIX, pending_write_backs, recover_write_backs, unique_id,
};

pub use refresh::{record_path, remove_mirror, remove_tree, set_mirror_aside};
pub use settle::WRITE_BACK_SETTLE;

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

/// A file time: seconds and nanoseconds since the epoch, ordered as a pair.
type Time = (i64, u32);

/// One path's recorded state in the folder: type, identity (device, inode), link count,
/// permission bits, size, mtime, ctime and, for a file changed within [`RACY_WINDOW`] of the
/// snapshot, a BLAKE3 hash of its content (see the module docs for why metadata decides
/// everywhere else).
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
    /// Status-change time, seconds and nanoseconds: moved by the kernel on every write, chmod,
    /// rename, link or `utimensat`, and not settable from user space.
    pub ctime: (i64, u32),
    /// Device of the file system holding the entry.
    pub dev: u64,
    /// Inode number: a file replaced by another (an editor's save-by-rename) has a new one.
    pub ino: u64,
    /// Link count: 1 for every copied file (a hard-linked one refuses the mirror); a file that
    /// gained a name since no longer matches, so write-back leaves it alone.
    pub nlink: u64,
    /// BLAKE3 of the content, recorded only for a file whose mtime or ctime was within the
    /// racy window ([`RACY_WINDOW`] unless [`MirrorOptions`] say otherwise) of the snapshot, or
    /// that a write-back just wrote; `None` for every other entry.
    pub hash: Option<[u8; 32]>,
}

impl BaselineEntry {
    fn recorded(kind: EntryKind, meta: Option<&Meta>, hash: Option<[u8; 32]>) -> BaselineEntry {
        BaselineEntry {
            kind,
            mode: meta.map_or(0, |m| m.mode),
            size: meta.map_or(0, |m| m.size),
            mtime: meta.map_or((0, 0), |m| m.mtime),
            ctime: meta.map_or((0, 0), |m| m.ctime),
            dev: meta.map_or(0, |m| m.dev),
            ino: meta.map_or(0, |m| m.ino),
            nlink: meta.map_or(0, |m| m.nlink),
            hash,
        }
    }

    /// Whether a file's metadata `m` is what was recorded (all but the hash).
    fn same_meta(&self, m: &Meta) -> bool {
        EntryKind::from_kind(m.kind) == self.kind
            && m.mode == self.mode
            && m.size == self.size
            && m.mtime == self.mtime
            && m.ctime == self.ctime
            && m.dev == self.dev
            && m.ino == self.ino
            && m.nlink == self.nlink
    }

    /// Whether the folder's current `now` is still what was recorded. Directories compare by
    /// kind and mode only (their mtime moves with every entry added or removed); everything
    /// else by kind, identity, link count, mode, size, mtime and ctime, and a recent file also
    /// by content
    /// ([`source_state`] hashes `now` exactly when this entry has a hash and the metadata
    /// matched). A `touch`, a chmod back and forth, or a rewrite that restores the mtime all
    /// count as changes: conservative on purpose.
    fn matches(&self, now: &BaselineEntry) -> bool {
        match self.kind {
            EntryKind::Dir => now.kind == EntryKind::Dir && now.mode == self.mode,
            _ => self == now,
        }
    }
}

/// A file whose mtime or ctime is this close to the snapshot (or later) is "racily clean":
/// a change made within the same tick of the file system's clock could leave every metadata
/// field as it was, so its content is hashed too. Three seconds cover the coarsest common
/// timestamp granularity (FAT's two seconds) plus the kernel's coarse-clock lag.
pub const RACY_WINDOW: Duration = Duration::from_secs(3);

/// How [`Mirror::create_with`] takes its baseline.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MirrorOptions {
    /// Files whose mtime or ctime is within this of the snapshot are hashed (module docs,
    /// "Racily clean files"). Default [`RACY_WINDOW`].
    pub racy_window: Duration,
    /// Which trees get a change journal (module docs, "Change journals"). Default
    /// [`Journaling::Mirror`].
    pub journaling: Journaling,
}

/// Which trees a mirror keeps a change journal of (module docs, "Change journals").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Journaling {
    /// None: every [`Mirror::changes`] walks the whole mirror.
    Off,
    /// The mirror's, from the walk that refreshed it: [`Mirror::changes`] (and so
    /// [`Mirror::finalize`]) looks only at what changed in the mirror during the turn. (A new
    /// mirror has none: its own copies would name every path.)
    #[default]
    Mirror,
    /// The mirror's and the folder's, kept across turns by a reader thread: for a mirror a
    /// long-lived process keeps, so [`Mirror::refresh_journaled`] brings it up to date by
    /// looking only at what changed on either side since the last turn.
    Both,
}

impl MirrorOptions {
    /// The defaults [`Mirror::create`] uses.
    pub fn new() -> MirrorOptions {
        MirrorOptions {
            racy_window: RACY_WINDOW,
            journaling: Journaling::Mirror,
        }
    }

    /// Sets [`journaling`](Self::journaling).
    #[must_use]
    pub fn journaling(mut self, journaling: Journaling) -> MirrorOptions {
        self.journaling = journaling;
        self
    }

    /// Sets [`racy_window`](Self::racy_window). A shorter window hashes fewer files and is
    /// only as safe as the promise behind it: that no file in the folder changed within the
    /// folder file system's timestamp granularity before the mirror is taken. Tests keep that
    /// promise by waiting for the clock to tick, then use zero to exercise the metadata path.
    #[must_use]
    pub fn racy_window(mut self, window: Duration) -> MirrorOptions {
        self.racy_window = window;
        self
    }
}

impl Default for MirrorOptions {
    fn default() -> MirrorOptions {
        MirrorOptions::new()
    }
}

/// Times at or after the returned one are recent (within `window` of now). A clock before
/// 1970 makes every time recent: hashing more is the safe side.
fn recent_since(window: Duration) -> Time {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(now) => {
            let since = now.saturating_sub(window);
            (
                i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
                since.subsec_nanos(),
            )
        }
        Err(_) => (i64::MIN, 0),
    }
}

/// The outermost of `paths` (none below another), sorted, each cut after its first `.git`
/// component: nothing below a `.git` is ever copied or walked.
fn outermost(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut cut: Vec<PathBuf> = paths
        .into_iter()
        .map(|r| {
            let mut kept = PathBuf::new();
            for c in r.components() {
                kept.push(c);
                if is_git_name(c.as_os_str().as_bytes()) {
                    break;
                }
            }
            kept
        })
        .collect();
    cut.sort();
    cut.dedup_by(|later, earlier| later.starts_with(&*earlier));
    cut
}

/// The walk's entries as the baseline's and the copies' pairs, in the order given.
type Split = (Vec<(PathBuf, BaselineEntry)>, Vec<(PathBuf, CopyStamp)>);

fn split_entries(entries: Vec<(PathBuf, (BaselineEntry, Option<CopyStamp>))>) -> Split {
    let mut copies = Vec::with_capacity(entries.len());
    let baseline = entries
        .into_iter()
        .map(|(path, (base, copy))| {
            if let Some(copy) = copy {
                copies.push((path.clone(), copy));
            }
            (path, base)
        })
        .collect();
    (baseline, copies)
}

/// Gives the directories under `root` their modes (set-id bits left out), deepest first: a
/// read-only directory must be filled before it becomes read-only.
fn set_dir_modes(root: BorrowedFd<'_>, mut modes: Vec<(PathBuf, u32)>) -> Result<(), MirrorError> {
    modes.sort_by_key(|(p, _)| std::cmp::Reverse(p.components().count()));
    for (rel, mode) in modes {
        let fd = open_rel_dir(root, &rel).map_err(io_err("open", &rel))?;
        rustix::fs::fchmod(&fd, crate::sys::perm(mode & 0o1777))
            .map_err(|e| io_err("chmod", &rel)(e.into()))?;
    }
    Ok(())
}

fn is_recent(m: &Meta, since: Time) -> bool {
    m.mtime >= since || m.ctime >= since
}

/// How long [`Mirror::settle_copies`] waits for the mirror's clock to tick.
const SETTLE_WAIT: Duration = Duration::from_millis(50);

/// The mirror file system's clock now, read as a ctime: `fchmod` of the mirror's root to its
/// own mode sets the root's ctime to the current time of that file system, which `fstat` reads.
fn fs_clock(root: BorrowedFd<'_>) -> io::Result<Time> {
    let fd = sys::reopen_dir(root)?;
    let mode = sys::fstat(&fd)?.mode;
    rustix::fs::fchmod(&fd, sys::perm(mode))?;
    Ok(sys::fstat(&fd)?.ctime)
}

/// The mirror's copy of a file as [`Mirror::create`] (or a write-back) left it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CopyStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mode: u32,
    mtime: Time,
    ctime: Time,
    trust: Trust,
    /// BLAKE3 of an untrusted copy, taken when it was found untrusted.
    hash: Option<[u8; 32]>,
}

/// Whether equal metadata proves a copy untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trust {
    /// Just recorded; the next [`Mirror::settle_copies`] decides.
    Pending,
    /// The mirror file system's clock was seen past the copy's ctime right after it was
    /// recorded: any later change to the copy gets a later ctime.
    Trusted,
    /// The clock was not seen past it: a change in the same tick could keep every field, so
    /// the copy's content was hashed instead.
    Untrusted,
}

impl CopyStamp {
    fn of(m: &Meta) -> CopyStamp {
        CopyStamp {
            dev: m.dev,
            ino: m.ino,
            size: m.size,
            mode: m.mode,
            mtime: m.mtime,
            ctime: m.ctime,
            trust: Trust::Pending,
            hash: None,
        }
    }

    /// True only when the copy provably was not written, chmod-ed, replaced or touched.
    fn untouched(&self, m: &Meta) -> bool {
        self.trust == Trust::Trusted
            && m.kind == Kind::File
            && m.dev == self.dev
            && m.ino == self.ino
            && m.size == self.size
            && m.mode == self.mode
            && m.mtime == self.mtime
            && m.ctime == self.ctime
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
    /// The path contains `.git` in some letter case, or its name is one of our temporary
    /// files' ([`is_temp_name`](crate::is_temp_name)); it is never written.
    ForbiddenName,
    /// The folder's file changed while the write-back was replacing or removing it, and a
    /// still later save sits at its name: the version the write-back had set aside could not
    /// be put back without displacing that save, so it is kept under this folder-relative
    /// path (a `.agent-exec-wb-*.tmp` name beside it under a journal, [`STAGED_PREFIX`], else
    /// a `.fsguard-*.tmp` one) for the user to look at (see
    /// [`WRITE_BACK_SETTLE`]).
    KeptAside {
        /// Where the set-aside version is, relative to the folder.
        at: PathBuf,
    },
    /// Writing this path back failed (permissions, a full disk, an immutable directory…);
    /// the folder's entry is left as it was, the agent's version stays in the mirror, and the
    /// rest of the write-back went on.
    Failed {
        /// What failed.
        error: String,
    },
    /// Another path's conflict blocks this one (its parent or child, or the other half of a
    /// type change).
    Dependent {
        /// The conflicting path.
        on: PathBuf,
    },
}

/// What the folder has at a path the mirror did not copy ([`Mirror::not_copied`]). Displays
/// as the noun phrase: "a FIFO".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotCopied {
    /// A symbolic link: never copied nor followed.
    Symlink,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A character or block device.
    Device,
    /// Another special file (or one that could no longer be looked at).
    Special,
    /// An entry the copy could not read (permissions).
    Unreadable,
}

impl std::fmt::Display for NotCopied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NotCopied::Symlink => "a symbolic link",
            NotCopied::Fifo => "a FIFO",
            NotCopied::Socket => "a socket",
            NotCopied::Device => "a device",
            NotCopied::Special => "a special file",
            NotCopied::Unreadable => "an unreadable entry",
        })
    }
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
    /// The folder holds regular files with more than one link; nothing was mirrored (module
    /// docs, "Hard links").
    #[error(
        "{} hard-linked file(s) in the folder: {}. A hard link may be another name of a file \
         outside the workspace, so the folder was not mirrored and nothing ran; replace each \
         with a copy (e.g. `cp --remove-destination f f.copy && mv f.copy f`) or remove the \
         extra name",
        links.len(),
        shown_links(links)
    )]
    HardLinked {
        /// Every such file, by path relative to the folder, sorted, with its link count.
        links: Vec<HardLink>,
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
/// following a symlink (links, FIFOs and unreadable entries are recorded, not copied), and
/// refusing a folder that holds a hard-linked file ([`MirrorError::HardLinked`]) — and
/// records each path's type, identity, mode, size, mtime and ctime (and a content hash for a
/// recently changed file; see the module docs). [`changes`](Mirror::changes) compares the
/// mirror with that baseline. [`finalize`](Mirror::finalize) writes the mirror's
/// changes into the folder, each file atomically, only where the folder still matches the
/// baseline; everything else comes back as a [`Conflict`], with both sides left untouched.
/// [`refresh`](Mirror::refresh) brings a mirror a previous turn left (and recorded with
/// [`save_record`](Mirror::save_record)) back to an exact copy, copying only what may differ.
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
    /// The mirror side of every copied file, by the same relative path.
    copies: BTreeMap<PathBuf, CopyStamp>,
    options: MirrorOptions,
    /// The change journals the last walk started ([`MirrorOptions::journaling`]).
    journals: Journals,
    /// The bytes of a record that describes this mirror as recorded now — the one a refresh
    /// read, when it kept every file it names and copied nothing — so `save_record` writes
    /// them as they are; `None` once anything recorded changes.
    record: Option<Vec<u8>>,
    /// The record file as [`save_record`](Mirror::save_record) last left it, and whether
    /// anything recorded changed since: a save with nothing new to say writes nothing, and a
    /// journaled refresh trusts its state only while the record is still the one it wrote
    /// (another process that took the mirror in between writes its own).
    saved: refresh::Saved,
}

/// A mirror's change journals (module `journal`): `None` where not asked for or not available.
#[derive(Debug, Default)]
pub(crate) struct Journals {
    pub(crate) source: Option<journal::Journal>,
    pub(crate) mirror: Option<journal::Journal>,
}

impl Journals {
    fn start(journaling: Journaling) -> Journals {
        let (source, mirror) = match journaling {
            Journaling::Off => (false, false),
            Journaling::Mirror => (false, true),
            Journaling::Both => (true, true),
        };
        let mut journals = Journals {
            source: source.then(journal::Journal::start).flatten(),
            mirror: mirror.then(journal::Journal::start).flatten(),
        };
        if journaling == Journaling::Both {
            for j in [&mut journals.source, &mut journals.mirror]
                .into_iter()
                .flatten()
            {
                j.keep_reading();
            }
        }
        journals
    }
}

/// At most this many hard-linked files are named in [`MirrorError::HardLinked`]'s message (all
/// are in the value), as `command` names them (CMD-9).
const HARD_LINKS_SHOWN: usize = 20;

fn shown_links(links: &[HardLink]) -> String {
    let mut list: Vec<String> = links
        .iter()
        .take(HARD_LINKS_SHOWN)
        .map(|l| format!("`{}` ({} links)", l.path.display(), l.links))
        .collect();
    if links.len() > HARD_LINKS_SHOWN {
        list.push(format!("and {} more", links.len() - HARD_LINKS_SHOWN));
    }
    list.join(", ")
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> MirrorError + 'a {
    move |source| MirrorError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

impl Drop for Mirror {
    /// A large mirror's maps are freed on a thread of their own: a hundred thousand
    /// allocations a caller that is about to exit (a one-shot call) need not wait for.
    fn drop(&mut self) {
        if self.baseline.len() < 4096 {
            return;
        }
        let maps = (
            std::mem::take(&mut self.baseline),
            std::mem::take(&mut self.copies),
        );
        // If no thread can be had, the closure (and the maps) are dropped right here.
        let _ = std::thread::Builder::new()
            .name("fsguard-free".into())
            .spawn(move || drop(maps));
    }
}

impl Mirror {
    /// Copies `source` (an absolute directory path) into `destination` (absolute, must not
    /// exist; its parent must) and records the baseline.
    ///
    /// A regular file in `source` with more than one link fails the copy with
    /// [`MirrorError::HardLinked`], naming every such file (module docs, "Hard links"). When the
    /// copy fails after `destination` was made, it is removed again before the error returns.
    pub fn create(
        source: impl AsRef<Path>,
        destination: impl AsRef<Path>,
    ) -> Result<Mirror, MirrorError> {
        Mirror::create_with(source, destination, &MirrorOptions::new())
    }

    /// [`create`](Mirror::create) with explicit [`MirrorOptions`].
    pub fn create_with(
        source: impl AsRef<Path>,
        destination: impl AsRef<Path>,
        options: &MirrorOptions,
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
            copies: BTreeMap::new(),
            options: options.clone(),
            journals: Journals::default(),
            record: None,
            saved: refresh::Saved::default(),
        };
        match this.copy_all().and_then(|_| this.settle_copies()) {
            Ok(()) => Ok(this),
            Err(e) => Err(this.discard(e)),
        }
    }

    /// Removes the half-made mirror after a failed copy, then hands back `err`: nothing
    /// half-written is left for a later call to use. Best effort, and only the directory the
    /// lease pinned: if the path names another one by now it is left alone. A leftover has no
    /// record, so [`refresh`](Mirror::refresh) would not trust it either, and `create` refuses
    /// an existing destination.
    fn discard(self, err: MirrorError) -> MirrorError {
        if self.mirror.verify().is_ok() {
            let _ = refresh::remove_tree(self.mirror.path());
        }
        err
    }

    /// Whether this mirror's change journals ([`MirrorOptions::journaling`]) can vouch for
    /// everything that changed since its last walk: no events dropped, every watch in place.
    /// When they cannot, [`changes`](Mirror::changes) and
    /// [`refresh_journaled`](Mirror::refresh_journaled) walk everything instead.
    pub fn journals_vouch(&self) -> bool {
        let vouches =
            |j: &Option<journal::Journal>| j.as_ref().is_some_and(|j| j.dirty().is_some());
        match self.options.journaling {
            Journaling::Off => false,
            Journaling::Mirror => vouches(&self.journals.mirror),
            Journaling::Both => vouches(&self.journals.source) && vouches(&self.journals.mirror),
        }
    }

    /// The folder's path.
    pub fn source_path(&self) -> &Path {
        self.source.path()
    }

    /// The identity of the folder this mirror was taken from (and writes back to): the
    /// directory its source lease pins, whatever the path names now.
    pub fn source_id(&self) -> crate::FileId {
        self.source.id()
    }

    /// The mirror's path.
    pub fn mirror_path(&self) -> &Path {
        self.mirror.path()
    }

    /// The recorded baseline, by path relative to the roots.
    pub fn baseline(&self) -> &BTreeMap<PathBuf, BaselineEntry> {
        &self.baseline
    }

    /// Why `rel` has no copy in the mirror, when the folder has an entry there (or above it)
    /// that the mirror skipped: the skipped path — `rel` itself or the nearest ancestor — and
    /// what it is. `None` when `rel` and every ancestor were copied or never existed. Lets a
    /// tool say "not mirrored: a FIFO" instead of "does not exist".
    ///
    /// A special file is classified by looking at the folder's entry now (the baseline only
    /// records that it was not a file, directory or symlink); if that fails, it is
    /// [`NotCopied::Special`].
    pub fn not_copied(&self, rel: &Path) -> Option<(PathBuf, NotCopied)> {
        let mut ancestors: Vec<&Path> = rel.ancestors().collect();
        ancestors.reverse();
        for a in ancestors {
            let Some(entry) = self.baseline.get(a) else {
                continue;
            };
            let what = match entry.kind {
                EntryKind::Symlink => NotCopied::Symlink,
                EntryKind::Unreadable => NotCopied::Unreadable,
                EntryKind::Special => self.special_kind(a),
                EntryKind::File | EntryKind::Dir => continue,
            };
            return Some((a.to_path_buf(), what));
        }
        None
    }

    fn special_kind(&self, rel: &Path) -> NotCopied {
        let Ok((dir, name)) = open_rel_parent(self.source.as_fd(), rel) else {
            return NotCopied::Special;
        };
        match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => match rustix::fs::FileType::from_raw_mode(st.st_mode as _) {
                rustix::fs::FileType::Fifo => NotCopied::Fifo,
                rustix::fs::FileType::Socket => NotCopied::Socket,
                rustix::fs::FileType::CharacterDevice | rustix::fs::FileType::BlockDevice => {
                    NotCopied::Device
                }
                _ => NotCopied::Special,
            },
            Err(_) => NotCopied::Special,
        }
    }

    fn copy_all(&mut self) -> Result<usize, MirrorError> {
        self.copy_all_with(None)
    }

    /// The copy walk; `reuse` when refreshing an existing mirror. Returns how many files
    /// were kept as they were.
    fn copy_all_with(&mut self, reuse: Option<&refresh::Reuse>) -> Result<usize, MirrorError> {
        self.record = None;
        self.saved.changed();
        let since = recent_since(self.options.racy_window);
        let src_root =
            sys::reopen_dir(self.source.as_fd()).map_err(io_err("open", Path::new(".")))?;
        let dst_root =
            sys::reopen_dir(self.mirror.as_fd()).map_err(io_err("open", Path::new(".")))?;
        // Journals start with the walk: each directory is watched before it is listed, so what
        // the walk records is covered (module `journal`).
        // A new mirror's own copies would name every path in its journal: the first turn's
        // `changes` walks it all in any case, so only a refresh (or a kept mirror) watches.
        let journaling = match (self.options.journaling, reuse) {
            (Journaling::Mirror, None) => Journaling::Off,
            (journaling, _) => journaling,
        };
        self.journals = Journals::start(journaling);
        let mut copied = copy::copy_tree(
            src_root,
            dst_root,
            self.mirror.id(),
            since,
            reuse,
            &self.journals,
        )?;
        // Sorted by bytes first: building a map from sorted pairs takes one `Path` comparison
        // per entry, from the walk's order a sort's worth of them.
        sort_in_path_order(&mut copied.entries);
        let (baseline, copies) = split_entries(std::mem::take(&mut copied.entries));
        // The two maps are built side by side: each is a pass over 50 000 large entries.
        let (baseline, copies) = std::thread::scope(|s| {
            let copies = s.spawn(|| copies.into_iter().collect::<BTreeMap<_, _>>());
            let baseline: BTreeMap<_, _> = baseline.into_iter().collect();
            (baseline, copies.join())
        });
        self.baseline = baseline;
        self.copies = copies.unwrap_or_else(|p| std::panic::resume_unwind(p));
        set_dir_modes(self.mirror.as_fd(), copied.dir_modes)?;
        Ok(copied.kept)
    }

    /// Marks the copies recorded so far as trusted once the mirror file system's clock has
    /// moved past their ctimes (module docs, "The mirror side"). Waits for that at most
    /// [`SETTLE_WAIT`]: a tick of the kernel's coarse clock (1–10 ms), or nothing at all where
    /// the file system hands out fine-grained timestamps to files whose ctime was read (Linux
    /// 6.13+ multigrain timestamps on ext4, xfs, btrfs, tmpfs). A copy left untrusted (a
    /// coarse-grained mirror file system) is hashed now, and `changes` compares its content.
    ///
    /// Only the probe right after a copy was recorded may vouch for it: a later probe would
    /// also vouch for a change made in the copy's own tick in between.
    fn settle_copies(&mut self) -> Result<(), MirrorError> {
        let pending = |c: &&CopyStamp| c.trust == Trust::Pending;
        let Some(latest) = self.copies.values().filter(pending).map(|c| c.ctime).max() else {
            return Ok(());
        };
        let started = Instant::now();
        let clock = loop {
            match fs_clock(self.mirror.as_fd()) {
                Ok(now) if now > latest => break Some(now),
                Ok(now) if started.elapsed() >= SETTLE_WAIT => break Some(now),
                Ok(_) => std::thread::sleep(Duration::from_millis(1)),
                Err(_) => break None,
            }
        };
        self.judge_copies(clock)
    }

    /// Trusts each pending copy whose ctime is before `clock` (the mirror file system's clock
    /// read after it was recorded); hashes the others. `None`: the clock could not be read.
    fn judge_copies(&mut self, clock: Option<Time>) -> Result<(), MirrorError> {
        for (rel, copy) in &mut self.copies {
            if copy.trust != Trust::Pending {
                continue;
            }
            if clock.is_some_and(|clock| copy.ctime < clock) {
                copy.trust = Trust::Trusted;
                continue;
            }
            copy.trust = Trust::Untrusted;
            copy.hash = match open_regular(self.mirror.as_fd(), rel)? {
                Some((mut file, _)) => {
                    Some(copy_hashing(&mut file, None).map_err(io_err("read", rel))?)
                }
                // Gone or replaced already: `changes` reports it whatever the hash.
                None => None,
            };
        }
        Ok(())
    }

    /// Lists how the mirror differs from the baseline, sorted by path (a `Deleted` before an
    /// `Added` at the same path). A `.git` entry the mirror gained is listed, not descended.
    ///
    /// With the mirror's change journal vouching (module docs, "Change journals"), only the
    /// paths it names are looked at: everything else is as the walk that started it recorded
    /// it. Otherwise the whole mirror is walked.
    pub fn changes(&self) -> Result<Vec<Change>, MirrorError> {
        let journaled = self.journaled_changes()?;
        // Debug builds (every test) check the journal against the walk it saves.
        let journaled = match journaled {
            Some(out) if !cfg!(debug_assertions) => return Ok(out),
            other => other,
        };
        let now = snapshot_tree(self.mirror.as_fd())?;
        let mut out = Vec::new();
        self.diff(self.baseline.iter(), self.copies.iter(), &now, &mut out)?;
        out.sort_by(|a, b| a.path.cmp(&b.path).then(b.kind.cmp(&a.kind)));
        if let Some(journaled) = journaled {
            assert_eq!(journaled, out, "the mirror's journal missed a change");
        }
        Ok(out)
    }

    /// [`changes`](Mirror::changes) from the journal's paths; `None` when it cannot say.
    fn journaled_changes(&self) -> Result<Option<Vec<Change>>, MirrorError> {
        let mut out = Vec::new();
        match self.journaled_roots() {
            Some(roots) => {
                for root in roots {
                    let Some(now) = snapshot_under(self.mirror.as_fd(), &root)? else {
                        return Ok(None);
                    };
                    let base = self
                        .baseline
                        .range::<Path, _>((Bound::Included(root.as_path()), Bound::Unbounded))
                        .take_while(|(p, _)| p.starts_with(&root));
                    let copies = self
                        .copies
                        .range::<Path, _>((Bound::Included(root.as_path()), Bound::Unbounded))
                        .take_while(|(p, _)| p.starts_with(&root));
                    self.diff(base, copies, &now, &mut out)?;
                }
            }
            None => return Ok(None),
        }
        out.sort_by(|a, b| a.path.cmp(&b.path).then(b.kind.cmp(&a.kind)));
        Ok(Some(out))
    }

    /// The paths the mirror's journal says may have changed, outermost only, each cut at its
    /// first `.git` component (never descended); `None` when there is no journal, it cannot
    /// vouch, or so much changed that one walk is cheaper than looking path by path.
    fn journaled_roots(&self) -> Option<Vec<PathBuf>> {
        let roots = self.journals.mirror.as_ref()?.dirty()?;
        if roots.len() > (self.baseline.len() / 8).max(64) {
            return None;
        }
        let cut = outermost(roots);
        // The root itself dirty (never from events; be safe): the whole walk.
        if cut.iter().any(|r| r.as_os_str().is_empty()) {
            return None;
        }
        Some(cut)
    }

    /// Appends how the mirror's entries `now` differ from the baseline entries `base` (and
    /// the copies' stamps `copies`): the same paths' parts of each, all in path order.
    fn diff<'m>(
        &self,
        base: impl Iterator<Item = (&'m PathBuf, &'m BaselineEntry)>,
        copies: impl Iterator<Item = (&'m PathBuf, &'m CopyStamp)>,
        now: &[(PathBuf, Meta)],
        out: &mut Vec<Change>,
    ) -> Result<(), MirrorError> {
        // A merge of three lists in the same path order (the baseline, the copies, the
        // mirror's walk): one pass, no lookups.
        let mut copies = copies.peekable();
        let mut base_it = base.peekable();
        let mut now_it = now.iter().peekable();
        loop {
            let order = match (base_it.peek(), now_it.peek()) {
                (None, None) => break,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some((b, _)), Some((n, _))) => b.as_path().cmp(n.as_path()),
            };
            let (base, cur) = match order {
                Ordering::Less => (base_it.next(), None),
                Ordering::Greater => (None, now_it.next()),
                Ordering::Equal => (base_it.next(), now_it.next()),
            };
            let base = base.filter(|(_, b)| b.kind.is_copied());
            match (base, cur) {
                (None, None) => {}
                (Some((path, base)), None) => {
                    out.push(change(path, ChangeKind::Deleted, base.kind));
                }
                (None, Some((path, cur))) => {
                    out.push(change(
                        path,
                        ChangeKind::Added,
                        EntryKind::from_kind(cur.kind),
                    ));
                }
                (Some((path, base)), Some((_, cur))) => {
                    let kind = EntryKind::from_kind(cur.kind);
                    if kind != base.kind {
                        out.push(change(path, ChangeKind::Deleted, base.kind));
                        out.push(change(path, ChangeKind::Added, kind));
                        continue;
                    }
                    while copies
                        .next_if(|(p, _)| p.as_path() < path.as_path())
                        .is_some()
                    {}
                    let copy = copies.next_if(|(p, _)| *p == path).map(|(_, c)| c);
                    // The copy never carried set-id bits (see `copy_file`).
                    let modified = cur.mode != base.mode & 0o1777
                        || (base.kind == EntryKind::File
                            && self.content_changed(path, base, copy, cur)?);
                    if modified {
                        out.push(change(path, ChangeKind::Modified, base.kind));
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether the mirror's file at `rel` (metadata `cur`) holds other content than was copied.
    /// Metadata decides when the copy is provably untouched; otherwise the content is compared
    /// with the recorded hash (a recent file), or with the folder's file while that still
    /// matches the baseline. When neither is available the copy's content is no longer known
    /// and a written-to copy counts as modified: finalize then reports it as a conflict rather
    /// than guess.
    fn content_changed(
        &self,
        rel: &Path,
        base: &BaselineEntry,
        copy: Option<&CopyStamp>,
        cur: &Meta,
    ) -> Result<bool, MirrorError> {
        let Some(copy) = copy else {
            return Ok(true);
        };
        if copy.untouched(cur) {
            return Ok(false);
        }
        if cur.size != copy.size {
            return Ok(true);
        }
        let Some(mut ours) = open_regular(self.mirror.as_fd(), rel)? else {
            return Ok(true);
        };
        if let Some(hash) = copy.hash.or(base.hash) {
            return Ok(copy_hashing(&mut ours.0, None).map_err(io_err("read", rel))? != hash);
        }
        let Some(mut theirs) = open_regular(self.source.as_fd(), rel)? else {
            return Ok(true);
        };
        if !base.same_meta(&theirs.1) {
            return Ok(true);
        }
        Ok(!same_content(&mut ours.0, &mut theirs.0).map_err(io_err("read", rel))?)
    }

    /// Writes the mirror's changes back into the folder where the folder still matches the
    /// baseline, each file atomically (FILE-2); returns what was applied and the conflicts
    /// (RUN-11). Applied changes become the new baseline, so a later turn's `finalize` compares
    /// against what it last wrote. Conflicting paths keep both sides as they are.
    ///
    /// Deletions go first, deepest first; then additions and modifications, shallowest first.
    /// Each change re-checks the folder just before it acts, and a file it replaces or deletes
    /// is set aside, not removed, until it has been verified unchanged *after* the replacement
    /// (the `settle` module: a user's save during the write-back is never lost, it becomes a
    /// conflict; the guarantee and its limits are spelled out there and in the module docs).
    pub fn finalize(&mut self) -> Result<FinalizeReport, MirrorError> {
        self.write_back(None)
    }

    /// [`Mirror::finalize`] under a write-back journal kept in `journals` (RUN-16; module
    /// `writeback`): the plan is recorded and every new file staged beside its target, durably,
    /// before the first rename, so a process killed in the middle leaves a write-back that
    /// [`recover_write_backs`] finishes. An error recording the journal fails the write-back
    /// before anything in the folder changed.
    pub fn finalize_journaled(&mut self, journals: &Path) -> Result<FinalizeReport, MirrorError> {
        self.write_back(Some(journals))
    }

    fn write_back(&mut self, journals: Option<&Path>) -> Result<FinalizeReport, MirrorError> {
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
        let staging = match journals {
            Some(dir) => Some(self.stage(dir, &changes, &verdict, &order)?),
            None => None,
        };
        let mut report = FinalizeReport::default();
        let mut dir_modes: Vec<(PathBuf, u32)> = Vec::new();
        let mut written: Vec<(PathBuf, Meta)> = Vec::new();
        // Replacements and deletions wait here until verified (see `settle`); a file's copy
        // stamp is recorded only once its change counts as applied.
        let mut settling = settle::Settling::default();
        let mut copies: BTreeMap<usize, Meta> = BTreeMap::new();
        let mut outcome: Vec<Option<Option<ConflictReason>>> = vec![None; changes.len()];
        let record = |done: Vec<settle::Settled>, outcome: &mut Vec<Option<Option<_>>>| {
            for (i, reason) in done {
                outcome[i] = Some(reason);
            }
        };
        for &i in &order {
            let c = &changes[i];
            if c.kind == ChangeKind::Deleted && c.entry == EntryKind::Dir {
                record(settling.settle_under(&c.path), &mut outcome);
            }
            let reason = match verdict[i].take() {
                Some(r) => Some(r),
                // One path's I/O error is that path's conflict, not the end of the write-back:
                // the report must list what did land.
                None => match self
                    .apply(c, i, &mut dir_modes, staging.as_ref())
                    .unwrap_or_else(|e| {
                        Applied::Now(
                            Some(ConflictReason::Failed {
                                error: e.to_string(),
                            }),
                            None,
                        )
                    }) {
                    Applied::Now(reason, copy) => {
                        if let Some(copy) = copy {
                            copies.insert(i, copy);
                        }
                        reason
                    }
                    Applied::Later(pending, copy) => {
                        if let Some(copy) = copy {
                            copies.insert(i, copy);
                        }
                        record(settling.push(*pending), &mut outcome);
                        continue;
                    }
                },
            };
            outcome[i] = Some(reason);
        }
        record(settling.settle_all(), &mut outcome);
        if let Some(staging) = staging {
            // Every rename is done and verified; a journal that cannot be removed is found by
            // the next recovery, which sees each entry done or left by the user.
            let _ = staging.clear();
        }
        for &i in &order {
            let c = &changes[i];
            match outcome[i].take().flatten() {
                Some(reason) => report.conflicts.push(Conflict {
                    change: c.clone(),
                    reason,
                }),
                None => {
                    if let Some(copy) = copies.remove(&i) {
                        written.push((c.path.clone(), copy));
                    }
                    report.applied.push(c.clone());
                }
            }
        }
        set_dir_modes(self.source.as_fd(), dir_modes)?;
        // What was written is the new baseline: the folder's side (recent by construction, so
        // hashed — whatever the options promised about the folder at create, these files were
        // changed just now) and the mirror's side (the copy as it was read for the write-back).
        let since = recent_since(self.options.racy_window.max(RACY_WINDOW));
        if !report.applied.is_empty() {
            self.record = None;
            self.saved.changed();
        }
        for c in &report.applied {
            match source_state(self.source.as_fd(), &c.path, |m| is_recent(m, since))? {
                SourceState::Present(now) => {
                    self.baseline.insert(c.path.clone(), now);
                }
                _ => {
                    self.baseline.remove(&c.path);
                }
            }
            if c.kind == ChangeKind::Deleted {
                self.copies.remove(&c.path);
            }
        }
        for (rel, meta) in written {
            self.copies.insert(rel, CopyStamp::of(&meta));
        }
        self.settle_copies()?;
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
            || c.path.file_name().is_some_and(crate::temps::is_temp_name)
        {
            return Ok(Some(ConflictReason::ForbiddenName));
        }
        let base = self.baseline.get(&c.path);
        let state = source_state_for(self.source.as_fd(), &c.path, base)?;
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
        index: usize,
        dir_modes: &mut Vec<(PathBuf, u32)>,
        staging: Option<&writeback::Staging>,
    ) -> Result<Applied, MirrorError> {
        let now = |reason| Ok(Applied::Now(reason, None));
        let Some(name) = c.path.file_name() else {
            return now(Some(ConflictReason::UnsafePath));
        };
        let parent_rel = c.path.parent().unwrap_or(Path::new(""));
        let parent = match open_rel_dir(self.source.as_fd(), parent_rel) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return now(Some(ConflictReason::DeletedInSource));
            }
            Err(_) => return now(Some(ConflictReason::UnsafePath)),
        };
        // A replacement or deletion that stays undoable until `settle` verified what it moved.
        let later = |parent: OwnedFd,
                     aside: String,
                     moved: Option<Meta>,
                     step,
                     base: Option<BaselineEntry>| {
            let base = base
                .or_else(|| self.baseline.get(&c.path).cloned())
                .ok_or_else(|| {
                    io_err("write back", &c.path)(io::Error::other("no baseline entry"))
                })?;
            Ok::<_, MirrorError>(settle::Pending {
                index,
                rel: c.path.clone(),
                parent: std::sync::Arc::new(parent),
                name: name.to_os_string(),
                aside,
                base,
                moved,
                step,
                at: Instant::now(),
            })
        };

        let shown = self.source.path().join(&c.path);
        let still_baseline = || -> Result<bool, MirrorError> {
            let base = self.baseline.get(&c.path);
            Ok(
                match (source_state_for(self.source.as_fd(), &c.path, base)?, base) {
                    (SourceState::Present(now), Some(base)) => base.matches(&now),
                    _ => false,
                },
            )
        };
        match (c.kind, c.entry) {
            (ChangeKind::Deleted, kind) => {
                if matches!(
                    source_state(self.source.as_fd(), &c.path, |_| false)?,
                    SourceState::Absent
                ) {
                    return now(None);
                }
                if !still_baseline()? {
                    return now(Some(ConflictReason::ChangedInSource));
                }
                if kind == EntryKind::Dir {
                    return match rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR) {
                        Ok(()) => now(None),
                        Err(rustix::io::Errno::NOTEMPTY | rustix::io::Errno::EXIST) => {
                            now(Some(ConflictReason::ChangedInSource))
                        }
                        Err(e) => Err(io_err("delete", &c.path)(e.into())),
                    };
                }
                let planned = staging.and_then(|s| s.aside(index));
                match crate::atomic::move_aside(parent.as_fd(), name, planned) {
                    Ok((aside, moved)) => Ok(Applied::Later(
                        Box::new(later(
                            parent,
                            aside,
                            Some(moved),
                            settle::Step::Deleted,
                            None,
                        )?),
                        None,
                    )),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => now(None),
                    Err(e) => Err(io_err("delete", &c.path)(e)),
                }
            }
            (ChangeKind::Added, EntryKind::Dir) => {
                let mode = self.mirror_meta(&c.path)?.mode;
                match rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(0o700)) {
                    Ok(()) => {}
                    Err(rustix::io::Errno::EXIST) => match sys::stat_at(parent.as_fd(), name) {
                        Ok(m) if m.kind == Kind::Dir => {
                            // Made while staging: it gets its mode like any new directory.
                            if staging.is_some_and(|s| s.made_dir(index)) {
                                dir_modes.push((c.path.clone(), mode));
                            }
                            return now(None);
                        }
                        _ => return now(Some(ConflictReason::CreatedInSource)),
                    },
                    Err(e) => return Err(io_err("create", &c.path)(e.into())),
                }
                dir_modes.push((c.path.clone(), mode));
                now(None)
            }
            (ChangeKind::Modified, EntryKind::Dir) => {
                if !still_baseline()? {
                    return now(Some(ConflictReason::ChangedInSource));
                }
                dir_modes.push((c.path.clone(), self.mirror_meta(&c.path)?.mode));
                now(None)
            }
            (ChangeKind::Modified, _) => {
                // Vetted by content as well: a save during the fill below that keeps size and
                // mtime (`touch -r`, `rsync --inplace -t`) and lands before the swap changes
                // only the ctime, which the swap itself moves, so the verification after it
                // compares the set-aside file with the content read here.
                let Some(vetted) = self.vetted_file(&c.path)? else {
                    return now(Some(ConflictReason::ChangedInSource));
                };
                let mut file = None;
                let (contents, copy) =
                    match self.new_contents(&c.path, index, staging, &mut file)? {
                        Ok(new) => new,
                        Err(reason) => return now(Some(reason)),
                    };
                match exchange_entry(parent.as_fd(), name, contents, Some(copy.mode), shown) {
                    Ok(Exchanged {
                        aside: Some(aside),
                        new,
                        old,
                    }) => Ok(Applied::Later(
                        Box::new(later(
                            parent,
                            aside,
                            old,
                            settle::Step::Replaced { new },
                            Some(vetted),
                        )?),
                        Some(copy),
                    )),
                    // No exchange on this file system: replaced after the check only.
                    Ok(Exchanged { aside: None, .. }) => Ok(Applied::Now(None, Some(copy))),
                    Err(e) => refused_write(&c.path, e),
                }
            }
            (_, _) => {
                let mut file = None;
                let (contents, copy) =
                    match self.new_contents(&c.path, index, staging, &mut file)? {
                        Ok(new) => new,
                        Err(reason) => return now(Some(reason)),
                    };
                match write_entry(
                    parent.as_fd(),
                    name,
                    contents,
                    Some(copy.mode),
                    Replace::Never,
                    shown,
                ) {
                    Ok(()) => Ok(Applied::Now(None, Some(copy))),
                    Err(e) => refused_write(&c.path, e),
                }
            }
        }
    }

    /// The new content of change `index` at `rel` and the mirror copy it comes from: the file
    /// staged for it under a write-back journal, or else the mirror's file (opened into
    /// `file`); `Err` is the change's conflict when its staging failed.
    fn new_contents<'f>(
        &self,
        rel: &Path,
        index: usize,
        staging: Option<&'f writeback::Staging>,
        file: &'f mut Option<File>,
    ) -> Result<Result<(Contents<'f>, Meta), ConflictReason>, MirrorError> {
        match staging.map(|s| s.file(index)) {
            Some(writeback::StagedFile::Yes(staged, copy)) => {
                Ok(Ok((Contents::Staged(staged), copy)))
            }
            Some(writeback::StagedFile::Failed(error)) => Ok(Err(ConflictReason::Failed { error })),
            _ => {
                let (opened, copy) = self.mirror_file(rel)?;
                Ok(Ok((Contents::CopyOf(file.insert(opened)), copy)))
            }
        }
    }

    /// The folder's file at `rel` if it still is what the baseline recorded, with the hash of
    /// its content now (the baseline's own hash must match where it has one).
    fn vetted_file(&self, rel: &Path) -> Result<Option<BaselineEntry>, MirrorError> {
        let Some(base) = self.baseline.get(rel) else {
            return Ok(None);
        };
        if base.kind != EntryKind::File {
            return Ok(None);
        }
        let SourceState::Present(now) =
            source_state(self.source.as_fd(), rel, |m| base.same_meta(m))?
        else {
            return Ok(None);
        };
        let same = match base.hash {
            Some(_) => base.matches(&now),
            None => {
                now.hash.is_some()
                    && BaselineEntry {
                        hash: None,
                        ..now.clone()
                    } == *base
            }
        };
        Ok(same.then(|| BaselineEntry {
            hash: now.hash,
            ..base.clone()
        }))
    }

    fn mirror_meta(&self, rel: &Path) -> Result<Meta, MirrorError> {
        let (dir, name) = open_rel_parent(self.mirror.as_fd(), rel).map_err(io_err("open", rel))?;
        sys::stat_at(dir.as_fd(), name).map_err(io_err("stat", rel))
    }

    /// The mirror's file at `rel`, open for reading, and its metadata from before the first
    /// read.
    fn mirror_file(&self, rel: &Path) -> Result<(File, Meta), MirrorError> {
        let (dir, name) = open_rel_parent(self.mirror.as_fd(), rel).map_err(io_err("open", rel))?;
        let fd = sys::open_file_child(dir.as_fd(), name).map_err(io_err("open", rel))?;
        let meta = sys::fstat(&fd).map_err(io_err("stat", rel))?;
        if meta.kind != Kind::File {
            return Err(io_err("read", rel)(io::Error::other(
                "no longer a regular file",
            )));
        }
        sys::set_blocking(fd.as_fd()).map_err(io_err("open", rel))?;
        Ok((File::from(fd), meta))
    }
}

/// What [`Mirror::apply`] did: decided now (`None` applied, or the conflict), or left undoable
/// until verified (`settle`); with the mirror copy's metadata when a file was written.
enum Applied {
    Now(Option<ConflictReason>, Option<Meta>),
    Later(Box<settle::Pending>, Option<Meta>),
}

/// A write-back write the folder refused: a conflict when the folder changed under it (the
/// name appeared, vanished or is no longer a regular file), else the error.
fn refused_write(rel: &Path, e: WriteError) -> Result<Applied, MirrorError> {
    let reason = match e {
        WriteError::AlreadyExists { .. } => ConflictReason::CreatedInSource,
        WriteError::Missing { .. } => ConflictReason::DeletedInSource,
        WriteError::NotARegularFile { .. } => ConflictReason::ChangedInSource,
        e => {
            return Err(MirrorError::Io {
                op: "write back",
                path: rel.to_path_buf(),
                source: io::Error::other(e),
            });
        }
    };
    Ok(Applied::Now(Some(reason), None))
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

/// The folder's entry at `rel`, its content hashed when `hash_if` says so for its metadata.
fn source_state(
    root: BorrowedFd<'_>,
    rel: &Path,
    hash_if: impl FnOnce(&Meta) -> bool,
) -> Result<SourceState, MirrorError> {
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
    // Opened, not only stat-ed: on NFS the open revalidates the attributes (close-to-open
    // consistency), and an unreadable file is `Unsafe` rather than silently "unchanged".
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
    let hash = if hash_if(&meta) {
        sys::set_blocking(fd.as_fd()).map_err(io_err("open", rel))?;
        Some(copy_hashing(&mut File::from(fd), None).map_err(io_err("read", rel))?)
    } else {
        None
    };
    Ok(SourceState::Present(BaselineEntry::recorded(
        EntryKind::File,
        Some(&meta),
        hash,
    )))
}

/// The folder's entry at `rel` in the form `base` can be compared with: hashed exactly when
/// `base` has a hash and the metadata already matched.
fn source_state_for(
    root: BorrowedFd<'_>,
    rel: &Path,
    base: Option<&BaselineEntry>,
) -> Result<SourceState, MirrorError> {
    source_state(root, rel, |m| {
        base.is_some_and(|b| b.hash.is_some() && b.same_meta(m))
    })
}

/// Opens the regular file `rel` under `root` for reading, without following a symlink, with
/// its metadata; `None` when it is missing, not a regular file, or cannot be opened.
fn open_regular(root: BorrowedFd<'_>, rel: &Path) -> Result<Option<(File, Meta)>, MirrorError> {
    let Ok((dir, name)) = open_rel_parent(root, rel) else {
        return Ok(None);
    };
    let Ok(fd) = sys::open_file_child(dir.as_fd(), name) else {
        return Ok(None);
    };
    let meta = sys::fstat(&fd).map_err(io_err("stat", rel))?;
    if meta.kind != Kind::File {
        return Ok(None);
    }
    sys::set_blocking(fd.as_fd()).map_err(io_err("open", rel))?;
    Ok(Some((File::from(fd), meta)))
}

/// Every entry of the mirror with its metadata, in `Path` order (each directory's names
/// sorted, a directory right before its contents: exactly the order of a
/// `BTreeMap<PathBuf, _>`, so `changes` can merge instead of look up). Entries named `.git` in
/// any case are listed but not descended. Nothing is read: `changes` decides from metadata
/// first. The directories are listed and their entries `stat`-ed on the crate's worker pool
/// (one job per directory, relative to its open fd); the result is sorted once at the end.
fn snapshot_tree(root: BorrowedFd<'_>) -> Result<Vec<(PathBuf, Meta)>, MirrorError> {
    let root = sys::reopen_dir(root).map_err(io_err("open", Path::new("")))?;
    let mut out = snapshot_below(root, PathBuf::new())?;
    sort_in_path_order(&mut out);
    Ok(out)
}

/// The mirror's entry at `rel` (if any) and, for a directory not named `.git`, everything
/// below it, as [`snapshot_tree`] lists them. `None` when the parent directory cannot be
/// opened: a journal's root always has one (its parent was not dirty, so it is the directory
/// the walk watched), so the caller no longer trusts the journal and walks everything.
fn snapshot_under(
    root: BorrowedFd<'_>,
    rel: &Path,
) -> Result<Option<Vec<(PathBuf, Meta)>>, MirrorError> {
    let Ok((dir, name)) = open_rel_parent(root, rel) else {
        return Ok(None);
    };
    let meta = match sys::stat_at(dir.as_fd(), name) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Some(Vec::new())),
        Err(e) => return Err(io_err("stat", rel)(e)),
    };
    let mut out = vec![(rel.to_path_buf(), meta)];
    if meta.kind == Kind::Dir && !is_git_name(name.as_bytes()) {
        let fd = sys::open_dir_child(dir.as_fd(), name).map_err(io_err("open", rel))?;
        out.extend(snapshot_below(fd, rel.to_path_buf())?);
    }
    sort_in_path_order(&mut out);
    Ok(Some(out))
}

/// Every entry below the directory open as `top` (at `top_rel`), in no particular order: the
/// directories are listed and their entries `stat`-ed on the crate's worker pool.
fn snapshot_below(top: OwnedFd, top_rel: PathBuf) -> Result<Vec<(PathBuf, Meta)>, MirrorError> {
    /// A directory to list, opened only when taken (relative to its parent's fd): a waiting
    /// job holds only its parent open, so the open fds stay near the tree's depth.
    struct Dir {
        parent: Option<std::sync::Arc<OwnedFd>>,
        rel: PathBuf,
    }
    #[derive(Default)]
    struct Found {
        entries: Vec<(PathBuf, Meta)>,
        buf: Vec<u8>,
    }
    let top = std::sync::Arc::new(top);
    let first = Dir {
        parent: None,
        rel: top_rel,
    };
    let parts = crate::pool::run(
        walk_threads(),
        vec![first],
        |dir: Dir, jobs: &mut Vec<Dir>, found: &mut Found| {
            let fd = match (&dir.parent, dir.rel.file_name()) {
                (Some(parent), Some(name)) => std::sync::Arc::new(
                    sys::open_dir_child(parent.as_fd(), name).map_err(io_err("open", &dir.rel))?,
                ),
                _ => std::sync::Arc::clone(&top),
            };
            let mut names = Vec::new();
            sys::for_each_entry(fd.as_fd(), &mut found.buf, |name, _| {
                names.push(OsStr::from_bytes(name.to_bytes()).to_os_string());
                Ok(())
            })
            .map_err(io_err("list", &dir.rel))?;
            for name in names {
                let child = dir.rel.join(&name);
                let meta = match sys::stat_at(fd.as_fd(), name.as_os_str()) {
                    Ok(m) => m,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(io_err("stat", &child)(e)),
                };
                // A `.git` entry is listed so finalize can refuse it by name; never descended.
                if meta.kind == Kind::Dir && !is_git_name(name.as_bytes()) {
                    jobs.push(Dir {
                        parent: Some(std::sync::Arc::clone(&fd)),
                        rel: child.clone(),
                    });
                }
                found.entries.push((child, meta));
            }
            Ok(())
        },
    )?;
    Ok(parts.into_iter().flat_map(|f| f.entries).collect())
}

/// How many threads the crate's tree walks use: every core, at most [`MAX_WALK_THREADS`].
pub(crate) fn walk_threads() -> usize {
    // Asked once per process: the answer reads the cgroup's CPU quota files each time.
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(MAX_WALK_THREADS)
    })
}

/// At most this many threads walk a tree, whatever the machine has: past that the file
/// system's own locks, not the CPUs, are the limit.
const MAX_WALK_THREADS: usize = 8;

/// Sorts `(path, _)` pairs into `Path` order (the order of a `BTreeMap<PathBuf, _>`) by
/// comparing bytes, with the separator below every other byte — the same order for the
/// normalized relative paths the walks build (components joined by one `/`), without
/// `Path`'s component parsing on every comparison. Indices are sorted, then the entries moved
/// once: they are large.
pub(crate) fn sort_in_path_order<T: Sync>(entries: &mut [(PathBuf, T)]) {
    let mut order: Vec<u32> = (0..u32::try_from(entries.len()).unwrap_or(u32::MAX)).collect();
    if order.len() != entries.len() {
        entries.sort_unstable_by(|a, b| path_order(&a.0, &b.0));
        return;
    }
    let by_path = |a: &u32, b: &u32| path_order(&entries[*a as usize].0, &entries[*b as usize].0);
    // A large list: two halves sorted side by side (the walk ran on every core; this need
    // not run on one), then merged.
    let half = if order.len() < 4096 {
        0
    } else {
        order.len() / 2
    };
    let (left, right) = order.split_at_mut(half);
    std::thread::scope(|s| {
        if !left.is_empty() {
            s.spawn(|| left.sort_unstable_by(by_path));
        }
        right.sort_unstable_by(by_path);
    });
    let mut merged = Vec::with_capacity(order.len());
    let (mut l, mut r) = (
        order[..half].iter().peekable(),
        order[half..].iter().peekable(),
    );
    loop {
        let next = match (l.peek(), r.peek()) {
            (Some(a), Some(b)) if by_path(a, b) != Ordering::Greater => l.next(),
            (Some(_), Some(_)) => r.next(),
            (Some(_), None) => l.next(),
            (None, _) => r.next(),
        };
        match next {
            Some(&i) => merged.push(i),
            None => break,
        }
    }
    let mut order = merged;
    // In place, cycle by cycle: position `i` takes the entry `order[i]` names; no second
    // vector of the (large) entries.
    for start in 0..order.len() {
        let mut i = start;
        while order[i] as usize != start {
            let next = order[i] as usize;
            entries.swap(i, next);
            order[i] = i as u32;
            i = next;
        }
        order[i] = i as u32;
    }
}

/// `a.cmp(b)` for normalized relative paths, by bytes (see [`sort_in_path_order`]).
fn path_order(a: &Path, b: &Path) -> Ordering {
    let (a, b) = (a.as_os_str().as_bytes(), b.as_os_str().as_bytes());
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n && a[i..i + 8] == b[i..i + 8] {
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    // The end of a path sorts first, then the separator, then every other byte.
    let key = |s: &[u8]| match s.get(i) {
        None => 0u16,
        Some(b'/') => 1,
        Some(&c) => u16::from(c) + 2,
    };
    key(a).cmp(&key(b))
}

/// Copies `from` to `to` without looking at the bytes. On Linux `std::io::copy` between two
/// files is `copy_file_range(2)`: the kernel copies page cache to page cache with no trip
/// through user space, and on btrfs, xfs and bcachefs it shares the extents instead (a reflink,
/// no data copied; an explicit `FICLONE` would add nothing); NFS 4.2 copies on the server. It
/// falls back to `read`/`write` itself where the call is refused (other kernels, across some
/// file systems) and is plain `read`/`write` elsewhere.
fn copy_plain(from: &mut File, to: &mut File) -> io::Result<()> {
    io::copy(from, to).map(|_| ())
}

/// Whether two files have the same bytes (read to the end of both).
fn same_content(a: &mut File, b: &mut File) -> io::Result<bool> {
    let mut buf_a = vec![0u8; 64 * 1024];
    let mut buf_b = vec![0u8; 64 * 1024];
    loop {
        let n = read_full(a, &mut buf_a)?;
        let m = read_full(b, &mut buf_b)?;
        if n != m || buf_a[..n] != buf_b[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

/// Fills `buf` as far as the file goes; fewer bytes only at the end.
fn read_full(f: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match f.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// `changes` merges the walk with the baseline map, so the walk must come out in exactly
    /// the map's order, separators and all ("a/x" sorts before "a-b" as paths, not as bytes).
    #[test]
    fn the_mirror_walk_comes_out_in_path_order() {
        let tmp = tempfile::tempdir().unwrap();
        for p in [
            "a/x/1", "a/x-y", "a-b/z", "a0", "a.b/c", "A", "b/.git/h", "\u{e9}/x", "a/x/0",
        ] {
            let path = tmp.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        let root = std::fs::File::open(tmp.path()).unwrap();
        let walked: Vec<PathBuf> = snapshot_tree(root.as_fd())
            .unwrap()
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        let mut sorted = walked.clone();
        sorted.sort();
        assert_eq!(walked, sorted);
        assert!(walked.contains(&PathBuf::from("b/.git")));
        assert!(!walked.contains(&PathBuf::from("b/.git/h")));
        assert_eq!(walked.len(), 15, "{walked:?}");
    }

    /// Paths as the walks build them, in no particular order.
    const WALKED: [&str; 20] = [
        "a",
        "a/x",
        "a/x/0",
        "a/x/1",
        "a/x-y",
        "a-b",
        "a-b/z",
        "a.b",
        "a0",
        "A",
        "ab/c/d/e/f/g/h/i",
        "ab/c/d/e/f/g/h",
        "ab/c/d/e/f/g",
        "ab/c/d/e/f",
        "ab/c/d/e",
        "ab/c/d",
        "ab/c",
        "ab",
        "\u{e9}",
        "\u{e9}/x",
    ];

    /// The byte comparison the walks sort with is `Path`'s own order on their paths.
    #[test]
    fn the_byte_order_of_walked_paths_is_path_order() {
        let more = ["n/p-1/lib/f.js", "n/p-1/lib.js", "n/p-1/lib/f", "n/p-10"];
        for a in WALKED.iter().chain(&more) {
            for b in WALKED.iter().chain(&more) {
                let (a, b) = (Path::new(a), Path::new(b));
                assert_eq!(path_order(a, b), a.cmp(b), "{a:?} {b:?}");
            }
        }
    }

    /// The walks' results come out of `sort_in_path_order` exactly as `Path` sorts them,
    /// whatever order the workers produced them in, and nothing is lost.
    #[test]
    fn walk_results_are_put_in_path_order() {
        let names = WALKED;
        let mut sorted: Vec<PathBuf> = names.iter().map(PathBuf::from).collect();
        sorted.sort();
        let mut entries: Vec<(PathBuf, usize)> = names
            .iter()
            .rev()
            .enumerate()
            .map(|(i, n)| (PathBuf::from(n), i))
            .collect();
        sort_in_path_order(&mut entries);
        assert_eq!(
            entries.iter().map(|e| e.0.clone()).collect::<Vec<_>>(),
            sorted
        );
        // An entry without its parent: still all there, still in order.
        let mut orphan: Vec<(PathBuf, ())> = ["b/c", "a", "b/c/d"]
            .iter()
            .map(|n| (PathBuf::from(n), ()))
            .collect();
        sort_in_path_order(&mut orphan);
        let got: Vec<&Path> = orphan.iter().map(|e| e.0.as_path()).collect();
        assert_eq!(got, [Path::new("a"), Path::new("b/c"), Path::new("b/c/d")]);
    }

    /// A list long enough to be sorted in two halves and merged comes out the same.
    #[test]
    fn a_long_walk_result_is_put_in_path_order_too() {
        let mut paths: Vec<PathBuf> = Vec::new();
        for d in 0..60 {
            paths.push(PathBuf::from(format!("d{d}")));
            for f in 0..90 {
                paths.push(PathBuf::from(format!("d{d}/f-{f}")));
                paths.push(PathBuf::from(format!("d{d}-x/f.{f}")));
            }
        }
        let mut sorted = paths.clone();
        sorted.sort();
        // A fixed shuffle: what the workers give back is in no order.
        let mut entries: Vec<(PathBuf, usize)> = paths.into_iter().zip(0..).collect();
        let mut seed = 0x2545_f491_u64;
        for i in (1..entries.len()).rev() {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            entries.swap(i, (seed >> 33) as usize % (i + 1));
        }
        sort_in_path_order(&mut entries);
        assert!(entries.len() > 4096);
        assert_eq!(entries.into_iter().map(|e| e.0).collect::<Vec<_>>(), sorted);
    }

    /// Where the mirror's clock cannot be seen to tick (a coarse-grained file system), the
    /// copies are hashed instead and changes are decided by content.
    #[test]
    fn copies_the_clock_cannot_vouch_for_are_hashed_and_compared_by_content() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("same"), "one").unwrap();
        std::fs::write(src.join("touched"), "two").unwrap();
        std::fs::write(src.join("edited"), "three").unwrap();
        let mut m = Mirror::create(&src, tmp.path().join("mirror")).unwrap();
        for copy in m.copies.values_mut() {
            copy.trust = Trust::Pending;
        }
        m.judge_copies(None).unwrap();
        assert!(
            m.copies
                .values()
                .all(|c| c.trust == Trust::Untrusted && c.hash.is_some())
        );
        assert!(m.changes().unwrap().is_empty());

        let mirror = m.mirror_path().to_path_buf();
        std::fs::File::options()
            .write(true)
            .open(mirror.join("touched"))
            .unwrap()
            .set_modified(SystemTime::now() + Duration::from_secs(60))
            .unwrap();
        std::fs::write(mirror.join("edited"), "THREE").unwrap();
        let changes = m.changes().unwrap();
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].path, Path::new("edited"));
        let report = m.finalize().unwrap();
        assert!(report.conflicts.is_empty(), "{report:?}");
        assert_eq!(std::fs::read(src.join("edited")).unwrap(), b"THREE");
        assert_eq!(std::fs::read(src.join("touched")).unwrap(), b"two");
    }
}
