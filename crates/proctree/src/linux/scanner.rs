//! The background recorder of descendants while commands run (CMD-7: parent links observed
//! while the command runs, at a short interval, plus a final walk at stop).
//!
//! One thread per host process serves every running tree, started on first use and then
//! parked on a condition variable between due times. A thread per command would cost a thread
//! start and a join on every spawn — most commands end long before their first interval.
//! Nothing here is needed for completeness (the supervisor keeps every orphan below it, and
//! `stop` walks the tree again), so if the thread cannot be started, trees are simply not
//! recorded in between.

use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::tree::{Shared, scan_into};

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
