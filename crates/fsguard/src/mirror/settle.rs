//! The write-back's replacements and deletions, held undoable until verified
//! (invariant 7).
//!
//! A check of the folder's file right before it is replaced cannot be enough: a user's save
//! that lands between the check and the `rename` is overwritten, and the file listed as
//! applied. So the write-back never deletes a file it replaces or removes before it has seen
//! that file, *after* the replacement, still exactly as the baseline recorded it:
//!
//! 1. **Replace** — the new content goes into a temp file beside the name, and
//!    `renameat2(RENAME_EXCHANGE)` swaps the two names: the name holds the new file, the temp
//!    name the old one, in one step. **Delete** — the name is renamed aside (never over
//!    anything). Either way the old file is still there, under a name only we know, and its
//!    metadata is read at once (the rename itself moved its ctime).
//! 2. **Settle** — the old file is kept there for at least [`WRITE_BACK_SETTLE`]. A save that
//!    had already looked the name up when the name was swapped (`open(O_TRUNC)` resolved, not
//!    yet truncated) lands on the old file within that time.
//! 3. **Verify** — the old file must be the vetted inode with the baseline's size, mode, mtime
//!    and link count, the ctime read right after the swap, and — for a replaced file — the
//!    content read when it was vetted, right before the new file was written (a save during
//!    that write which keeps size and mtime changes only the ctime, which the swap moves
//!    anyway). Then it is deleted and the change reported applied.
//! 4. **Undo** otherwise — a save reached the old file, or a save by rename put another file
//!    under the name just before the swap (so that is what was swapped out): the two names are
//!    swapped back (a deletion renamed back, never over anything), and the change is a
//!    [`ConflictReason::ChangedInSource`]. Where a still later save sits at the name and the
//!    swap back would displace it, nothing is swapped: the set-aside file stays where it is and
//!    the conflict ([`ConflictReason::KeptAside`]) names it.
//!
//! A save that lands on the *new* file after the swap simply wins: the user's version is what
//! the folder holds, and the change is reported as a conflict rather than applied.
//!
//! **The guarantee.** A save that completes — the saving process's `write` or `rename`
//! returned — before the write-back's verification of that file is never lost; nothing a
//! write-back replaces is deleted unless it was verified unchanged after it had been
//! replaced. **Outside it:** a process that keeps a file open for writing and writes to it
//! after the verification writes to the deleted file (as with any atomic save, an editor's
//! included — the module docs of the mirror say so for mappings); an `open` that stays between
//! looking the name up and truncating it for longer than the settle time (a process stopped
//! in the middle of the system call); a deleted file is compared by metadata only (not read:
//! a deleted `node_modules` would cost its whole size), so a same-size save that also restores
//! the mtime within the microseconds between the check and the rename is not seen; and file
//! systems that cannot exchange two names (`EINVAL`: a plain `rename` replaces the file after
//! the check, as before).
//!
//! At most [`MAX_PENDING`] changes wait at once (each holds its directory open); the oldest
//! is verified first. A verification's own error is that path's conflict; on unwinding,
//! whatever still waits is verified, so no set-aside file is left unexamined.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, RenameFlags};

use super::{BaselineEntry, ConflictReason, EntryKind, MirrorError, copy_hashing, io_err};
use crate::sys::{self, Meta};

/// How long a replaced or deleted file is kept aside before it is verified and removed.
pub const WRITE_BACK_SETTLE: Duration = Duration::from_millis(10);

/// The most changes waiting for verification at once.
pub(super) const MAX_PENDING: usize = 256;

/// What was done to the folder's file, still undoable.
#[derive(Debug)]
pub(super) enum Step {
    /// The name now holds the new file (this metadata); the old one is aside.
    Replaced { new: Meta },
    /// The old file was renamed aside; the name is free.
    Deleted,
}

/// One replacement or deletion waiting to be verified.
#[derive(Debug)]
pub(super) struct Pending {
    /// Index of the change in the write-back's list.
    pub(super) index: usize,
    /// The change's path, relative to the folder.
    pub(super) rel: PathBuf,
    pub(super) parent: Arc<OwnedFd>,
    pub(super) name: OsString,
    /// The name the old file sits under, in `parent`.
    pub(super) aside: String,
    /// What the old file must still be.
    pub(super) base: BaselineEntry,
    /// The old file's metadata right after it was moved aside (`None`: could not be read).
    pub(super) moved: Option<Meta>,
    pub(super) step: Step,
    pub(super) at: Instant,
}

/// The changes waiting for verification, oldest first.
#[derive(Debug, Default)]
pub(super) struct Settling {
    queue: VecDeque<Pending>,
}

/// A verified change: `None` applied, `Some` the conflict.
pub(super) type Settled = (usize, Option<ConflictReason>);

impl Settling {
    /// Queues `p`; returns the changes that had to be verified to make room.
    pub(super) fn push(&mut self, p: Pending) -> Vec<Settled> {
        let mut out = Vec::new();
        while self.queue.len() >= MAX_PENDING {
            out.extend(self.queue.pop_front().map(settle));
        }
        self.queue.push_back(p);
        out
    }

    /// Verifies every waiting change whose path is `dir` or below it (before `dir` itself is
    /// removed: set-aside files would keep it from being empty).
    pub(super) fn settle_under(&mut self, dir: &Path) -> Vec<Settled> {
        let (under, rest): (VecDeque<Pending>, VecDeque<Pending>) = std::mem::take(&mut self.queue)
            .into_iter()
            .partition(|p| p.rel.starts_with(dir));
        self.queue = rest;
        under.into_iter().map(settle).collect()
    }

    /// Verifies every waiting change.
    pub(super) fn settle_all(&mut self) -> Vec<Settled> {
        self.queue.drain(..).map(settle).collect()
    }
}

impl Drop for Settling {
    /// A panic left changes waiting: verify (and keep or undo) each, so no set-aside file
    /// stays unexamined. Their outcome is lost with the panic, not the files.
    fn drop(&mut self) {
        for p in self.queue.drain(..) {
            settle(p);
        }
    }
}

/// Waits until `p` has settled, then verifies it. An error is this path's conflict: the
/// set-aside file may be left, so the conflict says where.
fn settle(p: Pending) -> Settled {
    let ready = p.at + WRITE_BACK_SETTLE;
    let now = Instant::now();
    if ready > now {
        std::thread::sleep(ready - now);
    }
    let index = p.index;
    let aside = aside_path(&p);
    let reason = verify(p).unwrap_or_else(|e| {
        Some(ConflictReason::Failed {
            error: format!(
                "{e}; the folder's earlier version may be left at {}",
                aside.display()
            ),
        })
    });
    (index, reason)
}

/// Whether the set-aside file is still the vetted one, unchanged since it was moved.
fn intact(p: &Pending) -> Result<bool, MirrorError> {
    let Some(moved) = p.moved else {
        return Ok(false);
    };
    let now = match sys::stat_at(p.parent.as_fd(), p.aside.as_str()) {
        Ok(m) => m,
        Err(_) => return Ok(false),
    };
    let b = &p.base;
    // Everything as recorded, except the ctime, which the move itself set.
    let same = now.ctime == moved.ctime
        && b.kind == EntryKind::File
        && b.same_meta(&Meta {
            ctime: b.ctime,
            ..now
        });
    if !same {
        return Ok(false);
    }
    let Some(hash) = b.hash else {
        return Ok(true);
    };
    let fd = match sys::open_file_child(p.parent.as_fd(), p.aside.as_str()) {
        Ok(fd) => fd,
        Err(_) => return Ok(false),
    };
    let opened = sys::fstat(&fd).map_err(io_err("stat", &p.rel))?;
    if (opened.dev, opened.ino) != (b.dev, b.ino) {
        return Ok(false);
    }
    sys::set_blocking(fd.as_fd()).map_err(io_err("open", &p.rel))?;
    let content = copy_hashing(&mut File::from(fd), None).map_err(io_err("read", &p.rel))?;
    Ok(content == hash)
}

/// The folder-relative path of `p`'s set-aside file.
fn aside_path(p: &Pending) -> PathBuf {
    p.rel.with_file_name(&p.aside)
}

fn holds<P: rustix::path::Arg>(p: &Pending, name: P, what: &Meta) -> bool {
    sys::stat_at(p.parent.as_fd(), name).is_ok_and(|m| (m.dev, m.ino) == (what.dev, what.ino))
}

/// Step 3 or 4 of the module docs for one change.
fn verify(p: Pending) -> Result<Option<ConflictReason>, MirrorError> {
    let dir = p.parent.as_fd();
    let unlink_aside = |p: &Pending| {
        rustix::fs::unlinkat(dir, p.aside.as_str(), AtFlags::empty())
            .map_err(|e| io_err("delete", &p.rel)(e.into()))
    };
    if intact(&p)? {
        unlink_aside(&p)?;
        return Ok(match &p.step {
            Step::Deleted => None,
            // A save by rename after the swap replaced the new file: the user's version stays.
            Step::Replaced { new } if !holds(&p, p.name.as_os_str(), new) => {
                Some(ConflictReason::ChangedInSource)
            }
            Step::Replaced { .. } => None,
        });
    }
    let kept = || ConflictReason::KeptAside { at: aside_path(&p) };
    match &p.step {
        Step::Deleted => {
            match rustix::fs::renameat_with(
                dir,
                p.aside.as_str(),
                dir,
                &p.name,
                RenameFlags::NOREPLACE,
            ) {
                Ok(()) => Ok(Some(ConflictReason::ChangedInSource)),
                Err(rustix::io::Errno::EXIST) => Ok(Some(kept())),
                Err(e) => Err(io_err("restore", &p.rel)(e.into())),
            }
        }
        Step::Replaced { new } => {
            if !holds(&p, p.name.as_os_str(), new) {
                // A later save sits at the name; swapping back would displace it.
                return Ok(Some(kept()));
            }
            rustix::fs::renameat_with(dir, p.aside.as_str(), dir, &p.name, RenameFlags::EXCHANGE)
                .map_err(|e| io_err("restore", &p.rel)(e.into()))?;
            if holds(&p, p.aside.as_str(), new) {
                unlink_aside(&p)?;
                Ok(Some(ConflictReason::ChangedInSource))
            } else {
                // A save landed at the name between the check and the swap back: it is what
                // came out. Put it back at the name; the restored old file stays aside.
                rustix::fs::renameat_with(
                    dir,
                    p.aside.as_str(),
                    dir,
                    &p.name,
                    RenameFlags::EXCHANGE,
                )
                .map_err(|e| io_err("restore", &p.rel)(e.into()))?;
                Ok(Some(kept()))
            }
        }
    }
}
