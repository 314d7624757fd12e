//! The background recorder of descendants while commands run (CMD-7: parent links observed
//! while the command runs, at a short interval, plus a final walk at stop).
//!
//! One thread per host process serves every running tree, started on first use and then
//! parked on a condition variable between due times. A thread per command would cost a thread
//! start and a join on every spawn — most commands end long before their first interval.
//! Nothing here is needed for completeness (the supervisor keeps every orphan below it, and
//! `stop` walks the tree again), so if the thread cannot be started, trees are simply not
//! recorded in between.
//!
//! What a tree shares with this thread ([`Shared`]: its tracker and the closed flag) and the
//! walk both use ([`scan_into`]) live here, so `tree` depends on this module and not the
//! other way round.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::sys;
use super::walk::{Adopt, Walk};
use crate::identity::ProcessId;
use crate::table::ProcessTable;
use crate::tracker::Tracker;

struct Entry {
    tree: Weak<Shared>,
    every: Duration,
    due: Instant,
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    /// When the thread will wake up by itself (`None`: it waits for a registration).
    wakes_at: Option<Instant>,
}

struct Scanner {
    state: Mutex<State>,
    wake: Condvar,
}

fn scanner() -> Option<&'static Scanner> {
    static SCANNER: OnceLock<Option<&'static Scanner>> = OnceLock::new();
    *SCANNER.get_or_init(|| {
        let scanner: &'static Scanner = Box::leak(Box::new(Scanner {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("proctree-scan".into())
            .spawn(move || run(scanner))
            .ok()
            .map(|_| scanner)
    })
}

/// Records `tree` every `every` until it is stopped or dropped.
pub(super) fn register(tree: &Arc<Shared>, every: Duration) {
    let Some(scanner) = scanner() else {
        return;
    };
    let Ok(mut state) = scanner.state.lock() else {
        return;
    };
    let due = Instant::now() + every;
    state.entries.push(Entry {
        tree: Arc::downgrade(tree),
        every,
        due,
    });
    // Wake the thread only if it would otherwise sleep past this tree's first due time.
    if state.wakes_at.is_none_or(|at| at > due) {
        scanner.wake.notify_one();
    }
}

fn run(scanner: &Scanner) {
    let Ok(mut state) = scanner.state.lock() else {
        return;
    };
    loop {
        state
            .entries
            .retain(|e| e.tree.upgrade().is_some_and(|t| !t.is_closed()));
        let now = Instant::now();
        let Some(next) = state.entries.iter().map(|e| e.due).min() else {
            state.wakes_at = None;
            state = match scanner.wake.wait(state) {
                Ok(s) => s,
                Err(_) => return,
            };
            continue;
        };
        if next > now {
            state.wakes_at = Some(next);
            state = match scanner.wake.wait_timeout(state, next - now) {
                Ok((s, _)) => s,
                Err(_) => return,
            };
            continue;
        }
        let mut due = Vec::new();
        for e in state.entries.iter_mut().filter(|e| e.due <= now) {
            e.due = now + e.every;
            if let Some(tree) = e.tree.upgrade() {
                due.push(tree);
            }
        }
        state.wakes_at = None;
        drop(state);
        for tree in due {
            let _ = scan_into(&tree);
        }
        state = match scanner.state.lock() {
            Ok(s) => s,
            Err(_) => return,
        };
    }
}

/// What the host and the background scanner share about one tree.
#[derive(Debug)]
pub(super) struct Shared {
    tracker: Mutex<Tracker>,
    /// Set by `ProcessTree::stop` before the supervisor is reaped: from then on its PID may
    /// name another process, so nothing may walk from it again.
    closed: AtomicBool,
}

impl Shared {
    pub(super) fn new(tracker: Tracker) -> Shared {
        Shared {
            tracker: Mutex::new(tracker),
            closed: AtomicBool::new(false),
        }
    }

    /// Closes the tree for every later walk (see `closed`).
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    pub(super) fn lock(&self) -> io::Result<std::sync::MutexGuard<'_, Tracker>> {
        self.tracker
            .lock()
            .map_err(|_| io::Error::other("tracker lock poisoned"))
    }
}

/// Whether the live process with `id`'s PID is still `id`.
pub(super) fn still_same(id: ProcessId) -> bool {
    let mut buf = Vec::new();
    sys::read_stat(id.pid(), &mut buf).is_some_and(|s| s.start_time == id.start_time())
}

/// Records what is below the supervisor now; returns the identities tracked for the first
/// time. The walk runs without the lock, so a stop never waits for a background walk; its
/// links are adopted only if the tree was not closed meanwhile (then the supervisor was not
/// reaped during the walk, so its PID named it throughout).
pub(super) fn scan_into(shared: &Shared) -> io::Result<Vec<ProcessId>> {
    if shared.is_closed() {
        return Ok(Vec::new());
    }
    let root = shared.lock()?.root();
    if !sys::children_files_exist() {
        let table = ProcessTable::read()?;
        let mut tracker = shared.lock()?;
        if shared.is_closed() {
            return Ok(Vec::new());
        }
        return Ok(tracker.observe(&table, &mut still_same));
    }
    let mut links = Vec::new();
    Walk::default().round(root, &mut |parent, child| {
        if shared.is_closed() {
            return Adopt::No;
        }
        links.push((parent, child.entry(parent.pid())));
        Adopt::Yes { still: false }
    })?;
    let mut tracker = shared.lock()?;
    if shared.is_closed() {
        return Ok(Vec::new());
    }
    let mut new = Vec::new();
    for (parent, entry) in links {
        let known = tracker.is_tracked(entry.id);
        if tracker.adopt(parent, &entry) && !known {
            new.push(entry.id);
        }
    }
    Ok(new)
}
