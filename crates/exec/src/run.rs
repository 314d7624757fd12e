//! The runner: one [`Job`] in, one [`Outcome`] out.
//!
//! Order of a run (DESIGN "One call, end to end"): check the call is still wanted, verify the
//! root lease, build the sandbox (everything allocated here, before any fork), open the working
//! directory through the lease, spawn under `proctree`'s supervisor with the sandbox applied
//! between `fork` and `exec`, verify the lease again, then wait for the first of: the main
//! process exits, the deadline, cancellation, an output cap in kill mode, or a lease tick that
//! finds the root replaced. Whatever ended the wait, the whole tree is stopped and reaped
//! (CMD-6), the lease is verified once more before release (CMD-8), and the pipes are drained
//! to EOF (invariant 5). Dropping the future stops the tree too: `proctree::ProcessTree` stops
//! everything in its `Drop`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use fsguard::{RelPath, RootLease};
use toolscope::{CallContext, CancelReason, ErrorCode};

use crate::spec::SandboxSpec;

#[cfg(target_os = "linux")]
use {
    crate::capture::{Captured, drain},
    std::io,
    std::os::fd::OwnedFd,
    std::os::unix::process::ExitStatusExt,
    tokio::io::Interest,
    tokio::io::unix::AsyncFd,
    tokio::net::unix::pipe,
    tokio::sync::Notify,
    tokio_util::sync::CancellationToken,
};

/// How often the root lease is re-verified while a command runs (CMD-8: at least every 250 ms).
pub const LEASE_TICK: Duration = Duration::from_millis(200);

/// How long the pipes may stay open after the tree was stopped. Every writer is dead by then,
/// so EOF is immediate unless a descriptor escaped the tree (e.g. passed over a unix socket);
/// the call must not hang on that.
pub(crate) const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// What to do when a stream passes its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnCap {
    /// Stop the whole tree at the first byte over the cap (`run`, RUN-9).
    Kill,
    /// Keep running, keep the first `cap` bytes, read and drop the rest (`command`, CMD-5).
    Truncate,
}

/// Time and output bounds of one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock limit from spawn.
    pub timeout: Duration,
    /// Bytes of stdout kept.
    pub stdout_cap: usize,
    /// Bytes of stderr kept.
    pub stderr_cap: usize,
    /// What passing a cap does.
    pub on_cap: OnCap,
}

/// The working directory: a path relative to a leased root, opened through the lease's fd so a
/// symlink on the way is refused when it is used (RUN-4, CMD-8).
#[derive(Debug, Clone)]
pub struct WorkDir {
    /// The pinned root; re-verified before, during and after the run.
    pub lease: Arc<RootLease>,
    /// The directory beneath it.
    pub rel: RelPath,
}

/// One program to run in a sandbox.
#[derive(Debug, Clone)]
pub struct Job {
    /// Absolute path of the program (never looked up on `PATH`).
    pub program: PathBuf,
    /// Arguments after `argv[0]`.
    pub args: Vec<OsString>,
    /// Working directory.
    pub workdir: WorkDir,
    /// The complete environment (empty means empty; nothing is inherited, RUN-8, CMD-13).
    pub env: Vec<(OsString, OsString)>,
    /// What the program may touch.
    pub sandbox: SandboxSpec,
    /// Time and output bounds.
    pub limits: Limits,
}

/// Why a run ended: exactly one reason, so "finished" and "stopped" cannot both be true.
///
/// Several can hold at once (the deadline passes while the root is being replaced; a run in
/// [`OnCap::Kill`] mode exits on its own in the same instant it passes a cap). The runner then
/// keeps the first that applies in this order — the order in which the tools answer them:
/// 1. [`Cancelled`](End::Cancelled): the caller withdrew the call; a revocation must surface as
///    the permission error whatever else happened.
/// 2. [`LeaseLost`](End::LeaseLost): the work root is not the granted directory any more (CMD-8),
///    seen by a tick or by the check after the stop; whatever the command did landed elsewhere,
///    so its result is not the one asked for, and the caller must start a new turn.
/// 3. [`TimedOut`](End::TimedOut): the deadline stopped the command.
/// 4. [`OutputLimit`](End::OutputLimit): a cap was passed in kill mode, also when the main
///    process's exit was seen first (RUN-9).
/// 5. [`Exited`](End::Exited): none of the above; the main process ended by itself.
///
/// Not `#[non_exhaustive]` on purpose: a new way to end must break every `match` that
/// interprets one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum End {
    /// The main process ended on its own (an exit code or a signal in [`Outcome`]).
    #[default]
    Exited,
    /// The deadline passed before the main process exited.
    TimedOut,
    /// The call was cancelled (and why) before the main process exited.
    Cancelled(CancelReason),
    /// A cap was passed in [`OnCap::Kill`] mode and the tree was stopped.
    OutputLimit,
    /// The work root no longer was the leased directory (CMD-8); the tree was stopped.
    LeaseLost,
}

impl End {
    /// The one end of a run from what ended the wait and what was found after the stop, in
    /// the precedence documented on [`End`].
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    pub(crate) fn settle(
        waited: End,
        lease_lost_after: bool,
        cap_passed_in_kill_mode: bool,
    ) -> End {
        match waited {
            End::Cancelled(reason) => End::Cancelled(reason),
            _ if lease_lost_after => End::LeaseLost,
            End::Exited if cap_passed_in_kill_mode => End::OutputLimit,
            other => other,
        }
    }
}

/// What happened.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Outcome {
    /// Why the run ended.
    pub end: End,
    /// The main process's exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended the main process, if one did.
    pub signal: Option<i32>,
    /// The first `stdout_cap` bytes of stdout.
    pub stdout: Vec<u8>,
    /// The first `stderr_cap` bytes of stderr.
    pub stderr: Vec<u8>,
    /// Stdout passed its cap.
    pub stdout_truncated: bool,
    /// Stderr passed its cap.
    pub stderr_truncated: bool,
    /// Tracked descendants other than the main process that were alive and stopped (CMD-6).
    pub descendants_stopped: usize,
    /// Whether the main process was still running when the tree was stopped.
    pub main_stopped: bool,
    /// What the sandbox enforced, in words (on Linux, e.g. "fully enforced (Landlock ABI 7;
    /// private mount and IPC namespaces, no capabilities)"; gaps are named).
    pub enforcement: String,
    /// The program saw only its grants and the system runtime (Linux's private root), so a
    /// path outside them was absent rather than refused (`ENOENT`, not `EACCES`).
    pub view_is_grants_only: bool,
}

impl Outcome {
    /// Whether the command ran to its own end (not stopped by timeout, cancellation, cap or
    /// lease loss).
    pub fn finished(&self) -> bool {
        self.end == End::Exited
    }
}

/// Why a job did not run (nothing was started) or could not be supervised.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// No sandbox provider exists for this platform.
    #[error("no sandbox provider exists for this platform; run on Linux or macOS")]
    Unsupported,
    /// The sandbox cannot be applied here; nothing ran (RUN-6: no unsandboxed fallback).
    #[error("the sandbox cannot be applied on this machine, so nothing ran: {0}")]
    SandboxUnavailable(String),
    /// The call was cancelled before anything started.
    #[error("the call was cancelled before the command started")]
    Cancelled(CancelReason),
    /// The work root was replaced or moved (CMD-8).
    #[error("the work root is no longer the directory that was granted: {0}; start a new turn")]
    LeaseLost(#[source] fsguard::LeaseError),
    /// The working directory could not be opened safely.
    #[error("cannot open the working directory: {0}; pass an existing directory without symlinks")]
    WorkDir(#[source] fsguard::OpenError),
    /// The sandbox refused to run this job as asked (a hidden path inside a root that this
    /// machine cannot hide, a root replaced during setup); nothing ran.
    #[error("{0}")]
    Refused(String),
    /// The program could not be started or supervised.
    #[error("cannot run the program: {0}")]
    Io(String),
}

impl ExecError {
    /// The stable public code of this error (RUN-13).
    pub fn code(&self) -> ErrorCode {
        match self {
            ExecError::Unsupported => ErrorCode::ExecUnsupported,
            ExecError::SandboxUnavailable(_) => ErrorCode::ExecSandboxUnavailable,
            ExecError::Cancelled(reason) => reason.to_error().code(),
            ExecError::LeaseLost(_) => ErrorCode::ExecCancelled,
            ExecError::WorkDir(_) | ExecError::Refused(_) => ErrorCode::ExecPathInvalid,
            ExecError::Io(_) => ErrorCode::ExecIoFailed,
        }
    }
}

/// Runs `job` in its sandbox under `ctx` and returns once nothing it started is alive.
///
/// # Errors
/// [`ExecError`] when nothing could be started (sandbox unavailable, lease lost, cancelled
/// first, bad working directory) or supervision failed. A command that ran and failed is an
/// `Ok(Outcome)` with its exit code.
#[cfg(target_os = "linux")]
pub async fn run(job: Job, ctx: &CallContext) -> Result<Outcome, ExecError> {
    if let Some(reason) = ctx.reason() {
        return Err(ExecError::Cancelled(reason));
    }
    // Held until the tree is gone, so an account switch waits for this run to truly end
    // (CMD-12). Declared before the tree: locals drop in reverse order.
    let generation = ctx.lease().map_err(|e| {
        ExecError::Cancelled(match e.code() {
            ErrorCode::AccountRetired => CancelReason::AccountSwitched,
            _ => CancelReason::Requested,
        })
    })?;
    let lease = job.workdir.lease.clone();
    lease.verify().map_err(ExecError::LeaseLost)?;
    let prepared = crate::backend::prepare(&job.sandbox)?;
    let enforcement = prepared.enforcement().to_string();
    let view_is_grants_only = prepared.enforcement().private_root();
    let cwd = lease
        .open_dir(&job.workdir.rel)
        .map_err(ExecError::WorkDir)?;
    let (out_rx, out_tx) = pipe_pair()?;
    let (err_rx, err_tx) = pipe_pair()?;

    let mut tree = crate::backend::spawn(&job, prepared, cwd, out_tx, err_tx)?;

    let over_cap = Notify::new();
    let stop_draining = CancellationToken::new();
    let out_drain = drain(
        out_rx,
        job.limits.stdout_cap,
        &over_cap,
        stop_draining.clone(),
    );
    let err_drain = drain(
        err_rx,
        job.limits.stderr_cap,
        &over_cap,
        stop_draining.clone(),
    );
    tokio::pin!(out_drain, err_drain);
    let mut readers = Readers {
        out: out_drain,
        err: err_drain,
        out_read: None,
        err_read: None,
    };

    let ended = if lease.verify().is_err() {
        End::LeaseLost
    } else {
        readers
            .alongside(wait(&mut tree, &job, ctx, &over_cap, &lease))
            .await?
    };

    // Stop and reap everything. When the supervisor already reported the tree empty, that is
    // only collecting an exiting process: done here. Otherwise off the async threads
    // (freezing a large tree takes a moment).
    let finish = move |mut tree: proctree::ProcessTree| {
        let report = tree.stop();
        let status = tree.try_main_status();
        drop(generation);
        (report, status)
    };
    let stopped = if tree.settled() {
        finish(tree)
    } else {
        // The pipes are still read while the tree is frozen and killed: a writer must not
        // block on a full pipe meanwhile (invariant 5).
        readers
            .alongside(tokio::task::spawn_blocking(move || finish(tree)))
            .await
            .map_err(|e| ExecError::Io(format!("the stop task failed: {e}")))?
    };
    let (report, status) = stopped;
    let report = report.map_err(|e| ExecError::Io(e.to_string()))?;
    let status = report.main_status.or(status.ok().flatten());
    let lease_lost_after = lease.verify().is_err();

    // Every writer is dead now: EOF follows at once unless a descriptor escaped the tree.
    let (out, err) = readers.finish(&stop_draining).await;
    let out = captured(out)?;
    let err = captured(err)?;

    Ok(Outcome {
        // A passed cap in kill mode fails the run even when the main process happened to
        // exit before the wait saw the cap (RUN-9): both were ready and `select!` picked the
        // exit.
        end: End::settle(
            ended,
            lease_lost_after,
            job.limits.on_cap == OnCap::Kill && (out.truncated || err.truncated),
        ),
        exit_code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()),
        stdout: out.bytes,
        stderr: err.bytes,
        stdout_truncated: out.truncated,
        stderr_truncated: err.truncated,
        descendants_stopped: report.descendants_stopped,
        main_stopped: report.main_stopped,
        enforcement,
        view_is_grants_only,
    })
}

/// Runs `job` under Seatbelt (`sandbox-exec`) and returns once its process group is gone.
///
/// # Errors
/// As on Linux; see the `macos_run` module for what macOS does not track yet.
#[cfg(target_os = "macos")]
pub async fn run(job: Job, ctx: &CallContext) -> Result<Outcome, ExecError> {
    crate::macos_run::run(job, ctx).await
}

/// Runs `job`: on this platform there is no sandbox provider, so nothing runs (RUN-6).
///
/// # Errors
/// Always [`ExecError::Unsupported`].
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub async fn run(_job: Job, _ctx: &CallContext) -> Result<Outcome, ExecError> {
    Err(ExecError::Unsupported)
}

/// The two output readers, polled inside the run's own future next to whatever it awaits: no
/// task per stream, so no wake-up crosses threads on a multi-thread runtime and nothing is
/// spawned per call.
#[cfg(target_os = "linux")]
struct Readers<'a, F: Future<Output = io::Result<Captured>>> {
    out: std::pin::Pin<&'a mut F>,
    err: std::pin::Pin<&'a mut F>,
    out_read: Option<io::Result<Captured>>,
    err_read: Option<io::Result<Captured>>,
}

#[cfg(target_os = "linux")]
impl<F: Future<Output = io::Result<Captured>>> Readers<'_, F> {
    /// Awaits `work` while both streams keep being read.
    async fn alongside<T>(&mut self, work: impl Future<Output = T>) -> T {
        tokio::pin!(work);
        loop {
            tokio::select! {
                done = &mut work => return done,
                r = self.out.as_mut(), if self.out_read.is_none() => self.out_read = Some(r),
                r = self.err.as_mut(), if self.err_read.is_none() => self.err_read = Some(r),
            }
        }
    }

    /// Reads both streams to their end; [`DRAIN_GRACE`] after the call, `stop` ends them
    /// (only a descriptor that escaped the dead tree can still hold a pipe open then).
    async fn finish(
        mut self,
        stop: &CancellationToken,
    ) -> (Option<io::Result<Captured>>, Option<io::Result<Captured>>) {
        let grace = tokio::time::sleep(DRAIN_GRACE);
        tokio::pin!(grace);
        while self.out_read.is_none() || self.err_read.is_none() {
            tokio::select! {
                r = self.out.as_mut(), if self.out_read.is_none() => self.out_read = Some(r),
                r = self.err.as_mut(), if self.err_read.is_none() => self.err_read = Some(r),
                () = &mut grace, if !stop.is_cancelled() => stop.cancel(),
            }
        }
        (self.out_read, self.err_read)
    }
}

#[cfg(target_os = "linux")]
fn captured(r: Option<io::Result<Captured>>) -> Result<Captured, ExecError> {
    r.unwrap_or_else(|| Err(io::Error::other("the stream was not read to its end")))
        .map_err(|e| ExecError::Io(format!("reading output failed: {e}")))
}

#[cfg(target_os = "linux")]
/// A pipe for one output stream: the read end for us (non-blocking, registered with tokio),
/// the write end for the child. Both close-on-exec; the supervisor dups the write end onto
/// fd 1 or 2.
fn pipe_pair() -> Result<(pipe::Receiver, OwnedFd), ExecError> {
    let (rx, tx) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| ExecError::Io(format!("cannot create a pipe: {e}")))?;
    let rx = pipe::Receiver::from_owned_fd(rx)
        .map_err(|e| ExecError::Io(format!("cannot watch a pipe: {e}")))?;
    Ok((rx, tx))
}

/// Waits for the first reason to end the run.
#[cfg(target_os = "linux")]
async fn wait(
    tree: &mut proctree::ProcessTree,
    job: &Job,
    ctx: &CallContext,
    over_cap: &Notify,
    lease: &RootLease,
) -> Result<End, ExecError> {
    let io = |e: io::Error| ExecError::Io(format!("watching the command failed: {e}"));
    let owned = tree.status_fd().try_clone_to_owned().map_err(io)?;
    // SAFETY: `owned` is an fd we own; it stays open and unchanged for the AsyncFd's life.
    let status_fd = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
        .map_err(|e| ExecError::Io(format!("watching the command failed: {e}")))?;
    let deadline = tokio::time::sleep(job.limits.timeout);
    tokio::pin!(deadline);
    let mut tick = tokio::time::interval(LEASE_TICK);
    tick.tick().await; // the first tick is immediate; the lease was just verified
    let kill_on_cap = job.limits.on_cap == OnCap::Kill;
    loop {
        // Check before waiting: `spawn`'s handshake may already have read the exit record (a
        // command that fails at once), and then the descriptor never becomes readable again.
        if tree.try_main_status().map_err(io)?.is_some() {
            return Ok(End::Exited);
        }
        tokio::select! {
            ready = status_fd.readable() => {
                let mut guard = ready.map_err(io)?;
                if tree.try_main_status().map_err(io)?.is_some() {
                    return Ok(End::Exited);
                }
                // Readable with no status: either a message we absorbed, or the supervisor
                // is gone (EOF stays readable). Re-arm only when there is nothing to read.
                if !readable_now(status_fd.get_ref()) {
                    guard.clear_ready();
                } else if tree.try_main_status().map_err(io)?.is_none()
                    && readable_now(status_fd.get_ref())
                {
                    return Err(ExecError::Io(
                        "the supervisor ended without reporting the command's status".into(),
                    ));
                }
            }
            () = &mut deadline => return Ok(End::TimedOut),
            reason = ctx.cancelled() => return Ok(End::Cancelled(reason)),
            () = over_cap.notified(), if kill_on_cap => return Ok(End::OutputLimit),
            _ = tick.tick() => {
                if lease.verify().is_err() {
                    return Ok(End::LeaseLost);
                }
            }
        }
    }
}

/// Whether `fd` is readable right now (zero-timeout poll).
#[cfg(target_os = "linux")]
fn readable_now(fd: &OwnedFd) -> bool {
    let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
    matches!(rustix::event::poll(&mut fds, Some(&rustix::event::Timespec::default())), Ok(n) if n > 0)
        && fds[0]
            .revents()
            .intersects(rustix::event::PollFlags::IN | rustix::event::PollFlags::HUP)
}

#[cfg(all(test, any(target_os = "linux", target_os = "macos")))]
mod tests {
    use super::*;

    #[test]
    fn a_run_has_one_end_in_the_documented_precedence() {
        let turn_ended = || End::Cancelled(CancelReason::TurnEnded);
        // (what ended the wait, lease lost after the stop, cap passed in kill mode) → end
        let rows = [
            (End::Exited, false, false, End::Exited),
            (End::Exited, false, true, End::OutputLimit),
            (End::Exited, true, false, End::LeaseLost),
            (End::Exited, true, true, End::LeaseLost),
            (End::TimedOut, false, false, End::TimedOut),
            (End::TimedOut, false, true, End::TimedOut),
            (End::TimedOut, true, false, End::LeaseLost),
            (turn_ended(), true, true, turn_ended()),
            (turn_ended(), false, false, turn_ended()),
            (End::OutputLimit, false, true, End::OutputLimit),
            (End::OutputLimit, true, true, End::LeaseLost),
            (End::LeaseLost, false, false, End::LeaseLost),
            (End::LeaseLost, false, true, End::LeaseLost),
        ];
        for (waited, lease_lost, cap, want) in rows {
            let row = format!("{waited:?} lease_lost={lease_lost} cap={cap}");
            assert_eq!(End::settle(waited, lease_lost, cap), want, "{row}");
        }
    }

    #[test]
    fn only_an_exit_on_its_own_is_finished() {
        let mut out = Outcome::default();
        assert!(out.finished());
        for end in [
            End::TimedOut,
            End::Cancelled(CancelReason::Requested),
            End::OutputLimit,
            End::LeaseLost,
        ] {
            out.end = end;
            assert!(!out.finished(), "{:?}", out.end);
        }
    }
}
