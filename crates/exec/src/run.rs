//! The runner: one [`Job`] in, one [`Outcome`] out.
//!
//! Order of a run (docs/architecture.md, "The path of one call"): check the call is still
//! wanted, verify the
//! root lease, build the sandbox (everything allocated here, before any fork), open the working
//! directory through the lease, spawn under `proctree`'s supervisor with the sandbox applied
//! between `fork` and `exec`, verify the lease again, then wait for the first of: the main
//! process exits, the deadline, cancellation, an output cap in kill mode, or a lease tick that
//! finds the root replaced. Whatever ended the wait, the whole tree is stopped and reaped
//! (CMD-6), the lease is verified once more before release (CMD-8), and the pipes are drained
//! to EOF (invariant 5). Dropping the future stops the tree too: `proctree::ProcessTree` stops
//! everything in its `Drop`.

#[cfg(target_os = "linux")]
use fsguard::RootLease;
use toolscope::CallContext;
#[cfg(target_os = "linux")]
use toolscope::{CancelReason, ErrorCode};

#[cfg(target_os = "linux")]
use crate::job::{AfterStop, DRAIN_GRACE, End, LEASE_TICK, OnCap};
use crate::job::{ExecError, Job, Outcome};

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

/// Runs `job` in its sandbox under `ctx` and returns once nothing it started is alive.
///
/// # Errors
/// [`ExecError`] when nothing could be started (sandbox unavailable, lease lost, cancelled
/// first, bad working directory) or supervision failed. A command that ran and failed is an
/// `Ok(Outcome)` with its exit code.
#[cfg(target_os = "linux")]
pub async fn run(job: Job, ctx: &CallContext) -> Result<Outcome, ExecError> {
    run_inner(job, None, ctx).await
}

/// Called with every chunk of output as it is read, in order, from the task that drains the
/// pipe: it must not block for long (the command's writes wait on the pipe meanwhile, which is
/// the back-pressure a slow consumer should see, never a lost byte).
pub type Tap = std::sync::Arc<dyn Fn(&[u8]) + Send + Sync>;

/// [`run`], streaming: stdout and stderr are merged and every byte read is also given to `tap`
/// as it arrives (a background task's log and monitor). The job's `on_cap` becomes
/// [`OnCap::HeadAndTail`](crate::OnCap::HeadAndTail) (only that mode reads every byte) and
/// `merge_stderr` is set; the [`Outcome`] keeps the head and tail as in that mode.
///
/// # Errors
/// As [`run`].
pub async fn run_tapped(mut job: Job, tap: Tap, ctx: &CallContext) -> Result<Outcome, ExecError> {
    job.limits.on_cap = crate::OnCap::HeadAndTail;
    job.merge_stderr = true;
    #[cfg(target_os = "linux")]
    return run_inner(job, Some(tap), ctx).await;
    #[cfg(target_os = "macos")]
    return crate::macos_run::run(job, Some(tap), ctx).await;
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        drop(tap);
        run(job, ctx).await
    }
}

#[cfg(target_os = "linux")]
async fn run_inner(job: Job, tap: Option<Tap>, ctx: &CallContext) -> Result<Outcome, ExecError> {
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
    // A host whose limits setting is malformed runs no shell-kind call until it is fixed: the
    // limits it asked for would not be the ones applied.
    if job.sandbox.may_spawn() {
        crate::limits::host_overrides()
            .map_err(|e| ExecError::SandboxUnavailable(e.to_string()))?;
    }
    // A library host sets the limits itself: one below its minimum would fail as something
    // else (exit 127, a refused set-up), so it is refused here, naming the limit.
    job.sandbox.resources.check().map_err(|why| {
        ExecError::SandboxUnavailable(format!(
            "the call's resource limits are too small: {why}; raise SandboxSpec::resources"
        ))
    })?;
    let lease = job.workdir.lease.clone();
    lease.verify().map_err(ExecError::LeaseLost)?;
    let prepared = crate::backend::prepare(&job.sandbox)?;
    let enforcement = prepared.enforcement().to_string();
    let view_is_grants_only = prepared.enforcement().private_root();
    let own_tmp = prepared.enforcement().private_tmp();
    let private_loopback = prepared.enforcement().private_loopback();
    let bounded_temp = prepared.enforcement().bounded_temp();
    let private_proc = prepared.enforcement().private_proc();
    let staging = prepared.staging();
    // The call's cgroups (removed when `armed` drops, after the tree: declared before it) and
    // the rlimits its first process sets (LIM-1).
    let (mut armed, child_limits) = crate::cgroup::Armed::arm(
        &job.sandbox.resources,
        crate::cgroup::Situation {
            own_user_namespace: crate::linux::launch().own_user_namespace,
            bounded_temp,
            single_program: !job.sandbox.may_spawn(),
        },
    );
    let limits_report = armed.report.to_string();
    let cwd = lease
        .open_dir(&job.workdir.rel)
        .map_err(ExecError::WorkDir)?;
    let (out_rx, out_tx) = pipe_pair()?;
    let (err_rx, err_tx) = pipe_pair()?;
    // Merged: both descriptors are the one stdout pipe, so the order of writes is kept; the
    // stderr pipe's write end is dropped here and its reader sees EOF at once.
    let err_tx = if job.merge_stderr {
        drop(err_tx);
        out_tx
            .try_clone()
            .map_err(|e| ExecError::Io(format!("cannot share the output pipe: {e}")))?
    } else {
        err_tx
    };

    let mut tree = crate::backend::spawn(&job, prepared, cwd, out_tx, err_tx, child_limits)?;
    // What tells a hit the kernel does not count (LIM-2): the tmpfs full, the command's /proc.
    armed.watch_tree(
        tree.main().pid(),
        job.sandbox.temp_dir.as_deref(),
        private_proc,
    );

    let over_cap = Notify::new();
    let stop_draining = CancellationToken::new();
    let (out_keep, err_keep) = crate::capture::keep(&job.limits, tap);
    let out_drain = drain(out_rx, out_keep, &over_cap, stop_draining.clone());
    let err_drain = drain(err_rx, err_keep, &over_cap, stop_draining.clone());
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
            .alongside(wait(&mut tree, &job, ctx, &over_cap, &lease, &armed))
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
    let limit_hit = armed
        .hit()
        .or_else(|| armed.hit_by_signal(status.and_then(|s| s.signal())));
    armed.unwatch();

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
            AfterStop {
                lease_lost: lease_lost_after,
                cap_passed: job.limits.on_cap == OnCap::Kill && (out.truncated || err.truncated),
                limit_hit,
            },
        ),
        exit_code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()),
        stdout: out.bytes,
        stderr: err.bytes,
        stdout_head_len: out.head_len,
        stdout_omitted: out.omitted,
        stdout_truncated: out.truncated,
        stderr_truncated: err.truncated,
        descendants_stopped: report.descendants_stopped,
        main_stopped: report.main_stopped,
        enforcement,
        view_is_grants_only,
        own_tmp,
        private_loopback,
        limits: limits_report,
        staged_read_only: read_only_staged(&staging),
    })
}

/// The staged directories the child reported read-only (the overlay could not be made), and
/// why. One it could not report on (`Unknown`) was never writable either.
#[cfg(target_os = "linux")]
fn read_only_staged(staging: &linux_sandbox::Staging) -> Vec<(std::path::PathBuf, String)> {
    staging
        .outcomes()
        .into_iter()
        .filter_map(|(dir, outcome)| match outcome {
            linux_sandbox::StageOutcome::Private => None,
            linux_sandbox::StageOutcome::ReadOnly { errno } => Some((
                dir,
                format!(
                    "the kernel refused the private copy ({}); read-only for this call",
                    std::io::Error::from_raw_os_error(errno)
                ),
            )),
            _ => Some((
                dir,
                "not reported by the command's process; read-only or private".to_owned(),
            )),
        })
        .collect()
}

/// Runs `job` under Seatbelt (`sandbox-exec`) and returns once its process group is gone.
///
/// # Errors
/// As on Linux; see the `macos_run` module for what macOS does not track yet.
#[cfg(target_os = "macos")]
pub async fn run(job: Job, ctx: &CallContext) -> Result<Outcome, ExecError> {
    crate::macos_run::run(job, None, ctx).await
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
    limits: &crate::cgroup::Armed,
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
                if let Some(hit) = limits.hit() {
                    return Ok(End::LimitExceeded(hit));
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
