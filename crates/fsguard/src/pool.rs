//! The one worker pool of the crate's parallel walks (the hard-link [scan](crate::scan) and the
//! mirror's copy): scoped threads sharing one LIFO stack of jobs behind a `Mutex` + `Condvar`.
//!
//! A job may push more jobs. The worker goes on with the job it pushed last without waking
//! anyone (depth first: a directory's descriptors are released soon, so the open fds stay near
//! the tree's depth, not its width) and shares the rest. The walk ends when the stack is empty
//! and no worker is busy — a busy worker may still push — or at the first error a job returns:
//! then everything queued is dropped, every worker stops after its current job, and that error
//! is the result. Each worker keeps its own state (`S`: what it found, its read buffer), handed
//! back per worker so nothing is shared but the stack.

use std::sync::{Condvar, Mutex, PoisonError};

struct Queue<J, E> {
    jobs: Vec<J>,
    /// Workers running a job (they may still push more).
    busy: usize,
    error: Option<E>,
}

struct Shared<J, E> {
    queue: Mutex<Queue<J, E>>,
    ready: Condvar,
}

/// Jobs the caller runs alone before the other workers start. A walk that ends within them (a
/// one-call workspace of a few directories) starts no thread: starting and joining one cost
/// more than such a walk — 0.5–2 ms of a one-directory hard-link scan on a 2-core machine
/// whose cores were busy, for a scan of microseconds.
const ALONE_FIRST: usize = 32;

/// Runs `jobs` and every job they push on `threads` threads (the caller's included; 0 or 1
/// runs everything on the caller's thread) and returns each worker's state, the caller's first:
/// one state when the walk ended within the caller's [`ALONE_FIRST`] jobs, else `threads`.
///
/// # Errors
/// The first error a job returned; the walk stopped there.
pub(crate) fn run<J, S, E, W>(threads: usize, jobs: Vec<J>, work: W) -> Result<Vec<S>, E>
where
    J: Send,
    S: Default + Send,
    E: Send,
    W: Fn(J, &mut Vec<J>, &mut S) -> Result<(), E> + Sync,
{
    // The caller alone first: a small walk ends before any thread is started.
    let mut first = S::default();
    let mut jobs = jobs;
    if threads > 1 {
        let mut pushed = Vec::new();
        for _ in 0..ALONE_FIRST {
            let Some(job) = jobs.pop() else {
                return Ok(vec![first]);
            };
            work(job, &mut pushed, &mut first)?;
            // Depth first, as the workers go: the job pushed last is popped next.
            jobs.append(&mut pushed);
        }
    }
    let shared = Shared {
        queue: Mutex::new(Queue {
            jobs,
            busy: 0,
            error: None,
        }),
        ready: Condvar::new(),
    };
    let states = if threads <= 1 {
        vec![worker(&shared, &work, first)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (1..threads)
                .map(|_| s.spawn(|| worker(&shared, &work, S::default())))
                .collect();
            let mut states = Vec::with_capacity(threads);
            states.push(worker(&shared, &work, first));
            for h in handles {
                // A worker only panics on a bug; resuming the panic keeps it visible.
                states.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
            }
            states
        })
    };
    let queue = shared
        .queue
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    match queue.error {
        Some(e) => Err(e),
        None => Ok(states),
    }
}

fn worker<J, S, E, W>(shared: &Shared<J, E>, work: &W, mut state: S) -> S
where
    W: Fn(J, &mut Vec<J>, &mut S) -> Result<(), E>,
{
    let mut pushed: Vec<J> = Vec::new();
    let mut next: Option<J> = None;
    loop {
        let job = match next.take() {
            Some(job) => job,
            None => {
                let mut q = shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
                loop {
                    if let Some(job) = q.jobs.pop() {
                        q.busy += 1;
                        break job;
                    }
                    if q.busy == 0 {
                        drop(q);
                        shared.ready.notify_all();
                        return state;
                    }
                    q = shared.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
                }
            }
        };
        let result = work(job, &mut pushed, &mut state);
        let mut q = shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = result {
            q.error.get_or_insert(e);
        }
        if q.error.is_some() {
            // Stop: drop what is queued and what this job pushed.
            q.jobs.clear();
            pushed.clear();
        }
        // Go on with the job pushed last (no wake-up needed); share the rest.
        next = pushed.pop();
        let shared_any = !pushed.is_empty();
        q.jobs.append(&mut pushed);
        if next.is_none() {
            q.busy -= 1;
        }
        let idle = q.busy == 0 && q.jobs.is_empty();
        drop(q);
        if shared_any || idle {
            shared.ready.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A job `n` pushes `n - 1` jobs of `n - 1`: a tree with 1 + 3 + 3·2 + 3·2·1 = 16 nodes for 3.
    fn fan_out(n: u32, pushed: &mut Vec<u32>) {
        pushed.extend(std::iter::repeat_n(n.saturating_sub(1), n as usize));
    }

    #[test]
    fn every_pushed_job_runs_once_on_any_number_of_threads() {
        for threads in [0, 1, 2, 8] {
            let states: Vec<Vec<u32>> =
                run(threads, vec![4, 3], |n, pushed, seen: &mut Vec<u32>| {
                    seen.push(n);
                    fan_out(n, pushed);
                    Ok::<(), ()>(())
                })
                .unwrap();
            // More than ALONE_FIRST jobs: every worker started.
            assert_eq!(states.len(), threads.max(1), "one state per worker");
            let mut all: Vec<u32> = states.into_iter().flatten().collect();
            all.sort_unstable();
            // 4 → 65 nodes, 3 → 16 nodes.
            assert_eq!(all.len(), 65 + 16, "threads={threads}");
            assert_eq!(all.iter().filter(|&&n| n == 4).count(), 1);
            assert_eq!(all.iter().filter(|&&n| n == 0).count(), 24 + 6);
        }
    }

    #[test]
    fn the_first_error_stops_the_walk_and_is_the_result() {
        for threads in [1, 4] {
            let ran = AtomicUsize::new(0);
            let result = run(threads, vec![6], |n, pushed, (): &mut ()| {
                ran.fetch_add(1, Ordering::SeqCst);
                if n == 3 {
                    return Err(n);
                }
                fan_out(n, pushed);
                Ok(())
            });
            assert_eq!(result, Err(3));
            // A full walk of 6 is 1957 jobs; the stop drops what was queued.
            assert!(ran.load(Ordering::SeqCst) < 1957, "threads={threads}");
        }
    }

    #[test]
    fn no_jobs_is_an_empty_walk() {
        let states: Vec<u32> =
            run(3, Vec::<u8>::new(), |_, _, _: &mut u32| Ok::<(), ()>(())).unwrap();
        assert_eq!(states, vec![0]);
    }

    #[test]
    fn a_walk_within_the_callers_first_jobs_starts_no_thread() {
        let caller = std::thread::current().id();
        // 3 → 16 jobs, fewer than ALONE_FIRST.
        let states = run(8, vec![3], |n, pushed, seen: &mut Vec<u32>| {
            assert_eq!(std::thread::current().id(), caller);
            seen.push(n);
            fan_out(n, pushed);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(states.len(), 1);
        assert_eq!(states[0].len(), 16);
        // Depth first, as the workers go: the last job pushed runs next.
        assert_eq!(&states[0][..4], &[3, 2, 1, 0]);
    }
}
