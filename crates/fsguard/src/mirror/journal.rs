//! A change journal of one tree (the folder or its mirror): which paths may have changed since
//! each of its directories was first looked at, so a turn re-examines those and no others
//! again. Linux: inotify; elsewhere there is none and every turn walks the whole tree.
//!
//! **Why it misses no change made through the tree's own names, on this machine.** A watch is placed on every directory of the tree by the
//! walk that records the tree's state, on the directory's open descriptor, *before* the walk
//! lists that directory or looks at any of its entries; so whatever the walk recorded for an
//! entry was read after its directory's watch was in place. From then on the kernel queues an
//! event, synchronously, inside every system call that changes an entry of a watched
//! directory — before that call returns: creating, deleting or renaming a name (`IN_CREATE`,
//! `IN_DELETE`, `IN_MOVED_FROM`/`IN_MOVED_TO`), writing, truncating, `fallocate`,
//! `copy_file_range` into a file (`IN_MODIFY`), changing its mode, owner, times, link count or
//! extended attributes (`IN_ATTRIB`), and closing a file opened for writing
//! (`IN_CLOSE_WRITE`). Each event names the entry, relative to a watched directory whose path
//! the journal knows, and the journal marks that path **dirty: it and everything below it are
//! re-examined**, as the full walk would. A directory that is new (made after the walk) has no
//! watch, but making it was an event in its parent, so its path is dirty, and with it
//! everything below; a directory renamed elsewhere is dirty at both names (its events, still
//! reported under its old path, dirty that old path again: more than needed, never less).
//!
//! **When it cannot vouch, it says so** ([`Journal::dirty`] returns `None`) and the caller
//! walks the whole tree: the kernel dropped events (`IN_Q_OVERFLOW`: its queue holds
//! `fs.inotify.max_queued_events`), a file system under the tree was unmounted (`IN_UNMOUNT`),
//! a watch went away (`IN_IGNORED`) or the root itself was deleted or moved, a watch could not
//! be placed (the per-user `fs.inotify.max_user_watches` is shared with every other watcher
//! of the user, commands included — exec's limits give a call in its own user namespace half
//! of it, so the journal may find none left), or no inotify instance could be had at all.
//! A reader thread keeps the kernel's queue drained between turns, so a busy idle period
//! does not overflow it as easily; the paths it collects are kept until the next turn takes
//! them.
//!
//! **What it does not see.** Writes through a shared writable memory mapping raise no event
//! until the mapping's file is closed (`IN_CLOSE_WRITE`, at the writer's exit at the latest).
//! In the mirror that is the end of the call: `run`'s programs are dead before their turn's
//! changes are read. In the folder, a process that keeps a file mapped for writing across
//! turns can change it unseen until it closes it — the writers the mirror's assumption (4)
//! already leaves out (module docs of `mirror`).
//!
//! **What it cannot hear at all**, so the folder's journal
//! ([`Journaling::Both`](crate::Journaling)) is not used by the shipped server: a write,
//! truncation or `chmod` through another hard link to a file of the tree, made outside it (the
//! event goes to the directory of the name used; a full walk would refuse the linked file);
//! changes made by another machine or below a FUSE, NFS or SMB mount (inotify hears only this
//! kernel's local calls); mounts made or removed inside the tree (no event; an unmounted
//! tree's files stay recorded, and one directory reached at two paths has one watch); and
//! watches of directories moved out of the tree stay placed. The mirror's journal, alive only
//! during a turn on a private directory only the call's program writes to, is not exposed to
//! these.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Why a journal cannot vouch for its tree.
type Lost = &'static str;

#[derive(Debug, Default)]
struct State {
    /// Watch descriptor → the directory's path, relative to the tree's root, when watched.
    dirs: HashMap<i32, PathBuf>,
    /// Paths below which something may have changed, collected since last taken.
    dirty: Vec<PathBuf>,
    lost: Option<Lost>,
}

#[derive(Debug)]
struct Shared {
    fd: OwnedFd,
    state: Mutex<State>,
    stop: AtomicBool,
}

/// The change journal of one tree (module docs). Dropping it stops its reader and removes
/// every watch.
#[derive(Debug)]
pub(crate) struct Journal {
    shared: Arc<Shared>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Journal {
    /// A journal with no watch yet; `None` where the system has none to give.
    pub(crate) fn start() -> Option<Journal> {
        imp::init().map(|fd| Journal {
            shared: Arc::new(Shared {
                fd,
                state: Mutex::new(State::default()),
                stop: AtomicBool::new(false),
            }),
            reader: None,
        })
    }

    /// Watches the directory open as `dir`, at `rel` in the tree. Call it before the
    /// directory is listed: what the walk then reads is covered. A watch that cannot be placed
    /// makes the journal unable to vouch.
    pub(crate) fn watch(&self, dir: BorrowedFd<'_>, rel: &Path) {
        // Locked first: the reader cannot take an event of this watch before its path is known.
        let mut state = self.shared.lock();
        match imp::add_watch(self.shared.fd.as_fd(), dir) {
            Ok(wd) => {
                // A directory watched before, now at another path (renamed; a directory has
                // one name at a time): its events are about the new one from here on. One
                // queued earlier but read later dirties a path below the new name, which
                // the walk that watched it again has just recorded: more than needed.
                state.dirs.insert(wd, rel.to_path_buf());
            }
            Err(why) => {
                state.lost.get_or_insert(why);
            }
        }
    }

    /// Starts the thread that keeps the kernel's queue drained (for a journal that outlives
    /// the turn that made it). Without it the queue is read when [`dirty`](Self::dirty) is
    /// called.
    pub(crate) fn keep_reading(&mut self) {
        if self.reader.is_some() {
            return;
        }
        let shared = Arc::clone(&self.shared);
        let spawned = std::thread::Builder::new()
            .name("fsguard-journal".into())
            .spawn(move || {
                while !shared.stop.load(Ordering::Relaxed) {
                    imp::wait(shared.fd.as_fd());
                    shared.drain();
                }
            });
        match spawned {
            Ok(handle) => self.reader = Some(handle),
            Err(_) => {
                // Read at each turn instead; an overflow then only costs a full walk.
            }
        }
    }

    /// The paths that may have changed since the watches were placed (or since the last
    /// [`take`](Self::take)), each meaning itself and everything below it, without
    /// ancestors' descendants repeated, sorted; `None` when the journal cannot vouch.
    pub(crate) fn dirty(&self) -> Option<Vec<PathBuf>> {
        self.shared.drain();
        let mut state = self.shared.lock();
        if state.lost.is_some() {
            return None;
        }
        let roots = minimal_roots(std::mem::take(&mut state.dirty));
        state.dirty.clone_from(&roots);
        Some(roots)
    }

    /// Like [`dirty`](Self::dirty), and forgets them: the caller brings those paths up to
    /// date now; anything that happens from here on is collected again.
    pub(crate) fn take(&self) -> Option<Vec<PathBuf>> {
        let roots = self.dirty()?;
        self.shared.lock().dirty.clear();
        Some(roots)
    }
}

impl Drop for Journal {
    /// The reader is told to stop and left to: it notices within one poll interval, and the
    /// watches go when it lets go of the inotify descriptor. Nobody waits for it.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        drop(self.reader.take());
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads every queued event into the state. Past [`MAX_DIRTY`] distinct paths a full
    /// walk is the cheaper way to find the changes: the journal then stops vouching.
    fn drain(&self) {
        let mut state = self.lock();
        imp::read_events(self.fd.as_fd(), &mut state);
        if state.dirty.len() > MAX_DIRTY {
            let roots = minimal_roots(std::mem::take(&mut state.dirty));
            state.dirty = roots;
            if state.dirty.len() > MAX_DIRTY {
                state.lost.get_or_insert("too many changes to track");
            }
        }
    }
}

/// Distinct dirty paths a journal keeps before it gives up (see [`Shared::drain`]).
const MAX_DIRTY: usize = 1 << 16;

/// The paths of `dirty` that have no ancestor (or equal) among the others, sorted.
fn minimal_roots(mut dirty: Vec<PathBuf>) -> Vec<PathBuf> {
    dirty.sort();
    dirty.dedup();
    let mut roots: Vec<PathBuf> = Vec::new();
    for path in dirty {
        if roots.last().is_some_and(|r| path.starts_with(r)) {
            continue;
        }
        roots.push(path);
    }
    roots
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    use std::ffi::OsStr;
    use std::mem::MaybeUninit;
    use std::os::unix::ffi::OsStrExt;

    use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

    use std::os::fd::AsRawFd;

    use super::{AsFd, BorrowedFd, Lost, OwnedFd, State};

    /// Every event that says an entry changed (module docs); not opens, reads or closes after
    /// reading.
    fn mask() -> WatchFlags {
        WatchFlags::MODIFY
            | WatchFlags::ATTRIB
            | WatchFlags::CLOSE_WRITE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR
    }

    pub(super) fn init() -> Option<OwnedFd> {
        inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()
    }

    /// `inotify_add_watch` takes a path, not a descriptor: `/proc/self/fd/N` names the very
    /// directory `dir` opened (a magic link to its inode, not a path looked up again).
    pub(super) fn add_watch(inot: BorrowedFd<'_>, dir: BorrowedFd<'_>) -> Result<i32, Lost> {
        let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        inotify::add_watch(inot, path.as_str(), mask()).map_err(|e| match e {
            rustix::io::Errno::NOSPC => "the user's inotify watches are used up",
            _ => "a directory could not be watched",
        })
    }

    /// Waits up to 100 ms for events (the reader's stop flag is looked at in between).
    pub(super) fn wait(inot: BorrowedFd<'_>) {
        let mut fds = [rustix::event::PollFd::new(
            &inot,
            rustix::event::PollFlags::IN,
        )];
        let timeout = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 100_000_000,
        };
        let _ = rustix::event::poll(&mut fds, Some(&timeout));
    }

    pub(super) fn read_events(inot: BorrowedFd<'_>, state: &mut State) {
        let mut buf = [MaybeUninit::<u8>::uninit(); 16 * 1024];
        let mut reader = inotify::Reader::new(inot.as_fd(), &mut buf);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::AGAIN) => return,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => {
                    state.lost.get_or_insert("the journal could not be read");
                    return;
                }
            };
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                state
                    .lost
                    .get_or_insert("the kernel dropped events (queue overflow)");
                continue;
            }
            if flags.contains(ReadFlags::UNMOUNT) {
                state
                    .lost
                    .get_or_insert("a file system under the tree was unmounted");
                continue;
            }
            let Some(dir) = state.dirs.get(&event.wd()).cloned() else {
                // Every watch is known before its first event can be read (`watch` holds
                // the lock); one forgotten after `IN_IGNORED` has no more events. Be safe.
                state.lost.get_or_insert("an event of an unknown watch");
                continue;
            };
            match event.file_name() {
                Some(name) if !name.to_bytes().is_empty() => {
                    state
                        .dirty
                        .push(dir.join(OsStr::from_bytes(name.to_bytes())));
                }
                _ => {
                    // An event about the watched directory itself. Gone or moved (its parent
                    // reported the name too; this makes sure): dirty, and a watch removed
                    // (`IN_IGNORED`, after its directory was deleted) is forgotten. The root
                    // gone or moved: nothing to vouch for. `IN_ATTRIB` on a directory itself:
                    // its parent's watch reported the same change by name (the root has none,
                    // and its mode is not recorded).
                    let gone = ReadFlags::IGNORED | ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF;
                    if flags.intersects(gone) {
                        if dir.as_os_str().is_empty() {
                            state.lost.get_or_insert("the tree's root went away");
                        }
                        state.dirty.push(dir);
                    }
                    if flags.contains(ReadFlags::IGNORED) {
                        state.dirs.remove(&event.wd());
                    }
                }
            }
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod imp {
    use super::{BorrowedFd, Lost, OwnedFd, State};

    pub(super) fn init() -> Option<OwnedFd> {
        None
    }
    pub(super) fn add_watch(_: BorrowedFd<'_>, _: BorrowedFd<'_>) -> Result<i32, Lost> {
        Err("no change journal on this system")
    }
    pub(super) fn wait(_: BorrowedFd<'_>) {}
    pub(super) fn read_events(_: BorrowedFd<'_>, _: &mut State) {}
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn dirty_paths_are_reduced_to_the_outermost() {
        let got = minimal_roots(
            ["a/b/c", "a/b", "x", "a/bc", "x", "a/b/d/e"]
                .iter()
                .map(PathBuf::from)
                .collect(),
        );
        let want: Vec<PathBuf> = ["a/b", "a/bc", "x"].iter().map(PathBuf::from).collect();
        assert_eq!(got, want);
    }
}
