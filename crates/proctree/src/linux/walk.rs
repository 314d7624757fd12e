//! Reading one command's processes by walking down from its supervisor through
//! `/proc/<pid>/task/<tid>/children`, instead of reading the `stat` of every process on the
//! machine (CMD-6, CMD-7; invariant 3).
//!
//! # Why the walk is complete
//! The supervisor is a child subreaper (and, in PID-namespace mode, the namespace's init), so
//! an orphan re-parents to the nearest live subreaper above it: the supervisor, or a process
//! of the command that made itself a subreaper. Either way every live process the command
//! started stays below the supervisor by parent links, and the walk reaches it. A process
//! group or session only ever holds processes forked inside it, so the members of a group that
//! a tracked process anchors are below the supervisor too: the group expansion of
//! [`Tracker::observe`](crate::Tracker::observe) would find nothing the walk has not reached.
//! So on Linux the walk hands each parent link it verified to
//! [`Tracker::adopt`](crate::Tracker::adopt), which applies the parent-link rule; the full
//! scan with group expansion remains for kernels without children files.
//!
//! # Why a walked process is the command's
//! A child is handed over only when, after its pidfd was opened, its own `stat` names the
//! parent we listed it under *and* that parent had not exited when the check finished. A
//! parent that has not exited still owns its PID, so when the child's `stat` was read the child
//! was the parent's; the pidfd opened before that read pins the child itself. Anything that
//! does not fit — a child gone or re-parented between the reads, a parent that exited — is
//! skipped and the round is reported unsettled, so the caller walks again.
//!
//! # Why a later round may skip a list
//! A frozen process cannot fork, so the children list of a process that was frozen before its
//! list was read, and whose listed children were all frozen too, can only change when a
//! process below it exits (its orphans re-parent) — and every process below it is pinned, so
//! [`Walk::round`] sees that exit on a pidfd and reads every list again. The supervisor's own
//! list is read in every round: orphans land there. (A fork already inside the kernel when the
//! stop signal arrives still completes; a child born that way after its parent's list was read
//! is not frozen, but it cannot outlive the supervisor's final sweep, which kills and counts
//! every live process left below it.)

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use super::sys;
use crate::identity::{ProcessId, ProcessState};
use crate::table::ProcessEntry;

/// A process reached by a walk, pinned by a pidfd opened before its identity was read.
#[derive(Debug)]
pub(crate) struct Seen {
    pub(crate) id: ProcessId,
    /// `None` only when the host is out of descriptors; whoever signals it then re-verifies
    /// the identity right before.
    pub(crate) fd: Option<OwnedFd>,
    pub(crate) pgid: u32,
    pub(crate) state: ProcessState,
    threads: u32,
    /// Whether it cannot fork any more (frozen by us, or a zombie).
    pub(crate) still: bool,
    /// Its children as last read, kept while that list cannot change (see the module
    /// documentation); `None`: read it again next round.
    children: Option<Vec<u32>>,
}

impl Seen {
    /// The row the [`Tracker`](crate::Tracker) decides on; `parent` is the PID it was listed
    /// under.
    pub(crate) fn entry(&self, parent: u32) -> ProcessEntry {
        ProcessEntry {
            id: self.id,
            ppid: parent,
            pgid: self.pgid,
            state: self.state,
        }
    }
}

/// What the caller decided about a child handed to it.
pub(crate) enum Adopt {
    /// Not the command's (or not any more): not remembered, not descended into.
    No,
    /// The command's; `still` when it can no longer fork (frozen, or a zombie).
    Yes { still: bool },
}

/// Walks from one root, remembering what it pinned across rounds.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    /// Every process adopted so far, by PID.
    pub(crate) seen: HashMap<u32, Seen>,
    path: Vec<u8>,
    buf: Vec<u8>,
}

impl Walk {
    /// One pass from `root`, which must be the host's own unreaped child (so its PID cannot be
    /// recycled during the walk). Every child not seen before is pinned and handed to `adopt`
    /// with its verified parent before its own children are read, so a caller that freezes it
    /// there reads a list that no longer grows. Returns whether the round was unsettled.
    ///
    /// # Errors
    /// When the root's children cannot be read (`/proc` hidden, or no children files).
    pub(crate) fn round(
        &mut self,
        root: ProcessId,
        adopt: &mut dyn FnMut(ProcessId, &Seen) -> Adopt,
    ) -> io::Result<bool> {
        let mut unsettled = false;
        if self.note_exits() {
            // Orphans may have moved anywhere above the exited processes: read every list.
            unsettled = true;
            for s in self.seen.values_mut() {
                s.children = None;
            }
        }
        let mut visited: HashSet<u32> = HashSet::from([root.pid()]);
        let mut stack = vec![root.pid()];
        let mut fresh = Vec::new();
        while let Some(parent) = stack.pop() {
            let is_root = parent == root.pid();
            let (parent_id, cached) = match self.seen.get_mut(&parent) {
                Some(p) => (p.id, p.children.take()),
                None if is_root => (root, None),
                None => continue,
            };
            let list = match cached {
                Some(list) => list,
                None => {
                    let mut list = Vec::new();
                    match self.children(parent, is_root, &mut list) {
                        Ok(()) => list,
                        Err(e) if is_root => return Err(e),
                        Err(_) => {
                            // The parent is gone: its children moved up; walk again.
                            unsettled = true;
                            continue;
                        }
                    }
                }
            };
            let mut stable = !is_root && self.seen.get(&parent).is_some_and(|p| p.still);
            fresh.clear();
            for &child in &list {
                if !visited.insert(child) {
                    continue;
                }
                match self.seen.get(&child) {
                    Some(known) if known.state == ProcessState::Alive => {
                        stable &= known.still;
                        stack.push(child);
                    }
                    Some(zombie) => {
                        // A zombie we saw before: the same one only if its PID still shows its
                        // start time (a zombie's pidfd is readable, so it cannot tell).
                        let same = sys::read_stat(child, &mut self.buf)
                            .is_some_and(|s| s.start_time == zombie.id.start_time());
                        if !same {
                            self.seen.remove(&child);
                            stable = false;
                            unsettled |= self.pin(child, parent, &mut fresh);
                        }
                    }
                    None => {
                        stable = false;
                        unsettled |= self.pin(child, parent, &mut fresh);
                    }
                }
            }
            if !fresh.is_empty() && !is_root && self.parent_left(parent) {
                // The children's `ppid` may name a newer process with the parent's PID.
                unsettled = true;
                fresh.clear();
            }
            for mut seen in fresh.drain(..) {
                match adopt(parent_id, &seen) {
                    Adopt::No => {}
                    Adopt::Yes { still } => {
                        seen.still = still;
                        if seen.state == ProcessState::Alive {
                            stack.push(seen.id.pid());
                        } else {
                            // A zombie seen for the first time: something exited meanwhile.
                            unsettled = true;
                        }
                        self.seen.insert(seen.id.pid(), seen);
                    }
                }
            }
            if let Some(p) = self.seen.get_mut(&parent) {
                p.children = stable.then_some(list);
            }
        }
        unsettled |= self.note_exits();
        Ok(unsettled)
    }

    /// Whether `parent` (seen, not the root) may no longer own its PID.
    fn parent_left(&mut self, parent: u32) -> bool {
        let Some(p) = self.seen.get(&parent) else {
            return true;
        };
        match &p.fd {
            Some(fd) => sys::has_exited(fd.as_fd()),
            None => sys::read_stat(parent, &mut self.buf)
                .is_none_or(|s| s.start_time != p.id.start_time()),
        }
    }

    /// The children of `pid` across all its threads.
    fn children(&mut self, pid: u32, is_root: bool, out: &mut Vec<u32>) -> io::Result<()> {
        let threads = if is_root {
            1
        } else {
            self.seen.get(&pid).map_or(1, |s| s.threads)
        };
        if threads <= 1 {
            return sys::read_children(pid, pid, &mut self.path, &mut self.buf, out);
        }
        let mut tids = Vec::new();
        sys::read_tasks(pid, &mut tids)?;
        for tid in tids {
            // A thread that ended between the listing and the read has no children left.
            let _ = sys::read_children(pid, tid, &mut self.path, &mut self.buf, out);
        }
        Ok(())
    }

    /// Pins `child`, listed under `parent`: opens its pidfd, then reads its stat. Returns
    /// whether the round became unsettled (the child vanished or has another parent now).
    fn pin(&mut self, child: u32, parent: u32, fresh: &mut Vec<Seen>) -> bool {
        let fd = match sys::pidfd_open(child) {
            Ok(fd) => Some(fd),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return true,
            // Out of descriptors, say: identify it all the same, unpinned.
            Err(_) => None,
        };
        match sys::read_stat(child, &mut self.buf) {
            Some(s) if s.ppid == parent => {
                fresh.push(Seen {
                    id: ProcessId::new(child, s.start_time),
                    fd,
                    pgid: s.pgid,
                    state: s.state,
                    threads: s.threads,
                    still: false,
                    children: None,
                });
                false
            }
            _ => true,
        }
    }

    /// Marks every pinned live process that has exited since as dead; `true` if any had.
    fn note_exits(&mut self) -> bool {
        let mut fds: Vec<libc::pollfd> = self
            .seen
            .values()
            .filter(|s| s.state == ProcessState::Alive)
            .filter_map(|s| s.fd.as_ref())
            .map(|fd| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if !sys::poll_now(&mut fds) {
            return false;
        }
        let exited: HashSet<i32> = fds
            .iter()
            .filter(|p| p.revents != 0)
            .map(|p| p.fd)
            .collect();
        for s in self.seen.values_mut() {
            if s.fd
                .as_ref()
                .is_some_and(|fd| exited.contains(&fd.as_raw_fd()))
            {
                s.state = ProcessState::Dead;
                s.still = true;
            }
        }
        true
    }
}
