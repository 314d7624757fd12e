//! Where a call's blocking file-system work runs (a hard-link scan, removing a temp dir):
//! [`off_async`].
//!
//! **Owns** one process-wide choice, made by the process itself: a process that makes exactly
//! one call and then exits (`agent-exec call`) declares it with [`one_call_process`], and its
//! blocking work then runs on the calling thread. Everywhere else (an MCP server, a library
//! host) it runs on tokio's blocking pool, so one call's 50 000-file scan never holds up another
//! call or the server's protocol loop.
//!
//! Why the choice exists: handing one call's scan of a small workspace to a new
//! blocking thread cost 0.5–3 ms of `agent-exec call command true` on a 2-core machine — the
//! thread's start and a wake-up while both cores run the process's warm-up threads — for a scan
//! of some microseconds, in a process with no other async work to keep free.
//!
//! **Refuses** to decide for the process: a library never becomes "one call" by itself.

use std::sync::atomic::{AtomicBool, Ordering};

static ONE_CALL: AtomicBool = AtomicBool::new(false);

/// Declares that this process makes one call and exits: [`off_async`] then runs its work on
/// the calling thread. For a one-shot front end only; a server must not call it.
pub fn one_call_process() {
    ONE_CALL.store(true, Ordering::Relaxed);
}

/// Runs `work` off the async threads (tokio's blocking pool), or on this thread in a
/// [`one_call_process`].
///
/// # Errors
/// The pool's [`JoinError`](tokio::task::JoinError) when the work panicked or the runtime is
/// shutting down.
pub async fn off_async<T, F>(work: F) -> Result<T, tokio::task::JoinError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    if ONE_CALL.load(Ordering::Relaxed) {
        Ok(work())
    } else {
        tokio::task::spawn_blocking(work).await
    }
}
