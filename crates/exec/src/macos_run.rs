//! The macOS runner: the job under `/usr/bin/sandbox-exec` with the Seatbelt profile from
//! [`crate::macos::profile_spec`], in its own process group.
//!
//! Compiled only on macOS and checked here with `cargo check --target aarch64-apple-darwin`;
//! it runs only on a Mac (`cargo xtask macos`). What it does not do yet, and says so: it stops
//! the command's *process group* (RUN-10's floor), not an identity-tracked tree — a
//! descendant that left the group with `setsid` is not found again (the seed admits this on
//! macOS; `proctree`'s libproc tracking is not wired), and `descendants_stopped` is therefore
//! reported as 0.

use std::process::Stdio;
use std::sync::Arc;

use tokio::net::unix::pipe;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use toolscope::{CallContext, CancelReason, ErrorCode};

use crate::capture::drain;
use crate::job::{AfterStop, DRAIN_GRACE, End, ExecError, Job, LEASE_TICK, OnCap, Outcome};

pub(crate) async fn run(
    job: Job,
    tap: Option<crate::Tap>,
    ctx: &CallContext,
) -> Result<Outcome, ExecError> {
    if let Some(reason) = ctx.reason() {
        return Err(ExecError::Cancelled(reason));
    }
    let _generation = ctx.lease().map_err(|e| {
        ExecError::Cancelled(match e.code() {
            ErrorCode::AccountRetired => CancelReason::AccountSwitched,
            _ => CancelReason::Requested,
        })
    })?;
    let lease = job.workdir.lease.clone();
    lease.verify().map_err(ExecError::LeaseLost)?;
    if !std::path::Path::new(seatbelt::SANDBOX_EXEC).exists() {
        return Err(ExecError::SandboxUnavailable(format!(
            "{} is missing",
            seatbelt::SANDBOX_EXEC
        )));
    }
    // Hidden paths are denied and protected ones never written, after every allow (RCS-2,
    // RCS-3); what Seatbelt refuses to bind is refused here.
    let bound = crate::macos::bound_profile(&job.sandbox)
        .map_err(|e| ExecError::SandboxUnavailable(e.to_string()))?;
    // Open the directory through the lease first: a symlink on the way is refused here. std
    // has no fchdir-before-exec, so the (just verified) path is what the child enters.
    drop(
        lease
            .open_dir(&job.workdir.rel)
            .map_err(ExecError::WorkDir)?,
    );
    let cwd = lease.path().join(job.workdir.rel.as_path());
    let mut command = bound
        .command(&job.program, &job.args)
        .map_err(|e| ExecError::SandboxUnavailable(e.to_string()))?;
    command
        .env_clear()
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&cwd)
        .stdin(Stdio::null());
    // Merged: one pipe for both streams, so the order of writes is kept; the stderr reader
    // gets a pipe whose writer is closed at once (EOF).
    let merged = if job.merge_stderr {
        let (reader, writer) = cloexec_pipe()?;
        let second = writer
            .try_clone()
            .map_err(|e| ExecError::Io(format!("cannot share the output pipe: {e}")))?;
        command
            .stdout(Stdio::from(writer))
            .stderr(Stdio::from(second));
        let (empty, closed) = cloexec_pipe()?;
        drop(closed);
        Some((reader, empty))
    } else {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        None
    };
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = tokio::process::Command::from(command)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ExecError::Io(format!("cannot start sandbox-exec: {e}")))?;
    let group = child.id().map(|pid| pid as libc::pid_t);
    let io = |e: std::io::Error| ExecError::Io(format!("cannot watch the output: {e}"));
    let (out_rx, err_rx) = match merged {
        Some(pair) => pair,
        None => (
            child
                .stdout
                .take()
                .ok_or_else(|| ExecError::Io("no stdout pipe".into()))?
                .into_owned_fd()
                .map_err(io)?,
            child
                .stderr
                .take()
                .ok_or_else(|| ExecError::Io("no stderr pipe".into()))?
                .into_owned_fd()
                .map_err(io)?,
        ),
    };
    let out_rx = pipe::Receiver::from_owned_fd(out_rx).map_err(io)?;
    let err_rx = pipe::Receiver::from_owned_fd(err_rx).map_err(io)?;
    let over_cap = Arc::new(Notify::new());
    let stop_draining = CancellationToken::new();
    let reader = |rx, keep| {
        let (over_cap, stop) = (over_cap.clone(), stop_draining.clone());
        tokio::spawn(async move { drain(rx, keep, &over_cap, stop).await })
    };
    let (out_keep, err_keep) = crate::capture::keep(&job.limits, tap);
    let out_task = reader(out_rx, out_keep);
    let err_task = reader(err_rx, err_keep);

    let deadline = tokio::time::sleep(job.limits.timeout);
    tokio::pin!(deadline);
    let mut tick = tokio::time::interval(LEASE_TICK);
    tick.tick().await;
    let kill_on_cap = job.limits.on_cap == OnCap::Kill;
    let mut outcome = Outcome {
        enforcement: "Seatbelt profile through sandbox-exec".to_owned(),
        // LIM-1 on macOS (rlimits) is not built yet: said, not pretended.
        limits: "limits not enforced (macOS: not built yet)".to_owned(),
        staged_read_only: job
            .sandbox
            .staged
            .iter()
            .map(|s| {
                (
                    s.dir.clone(),
                    "macOS has no private copy; read-only".to_owned(),
                )
            })
            .collect(),
        ..Outcome::default()
    };
    let (waited, status) = loop {
        tokio::select! {
            status = child.wait() => {
                break (End::Exited, Some(status.map_err(|e| ExecError::Io(e.to_string()))?))
            }
            () = &mut deadline => break (End::TimedOut, None),
            reason = ctx.cancelled() => break (End::Cancelled(reason), None),
            () = over_cap.notified(), if kill_on_cap => break (End::OutputLimit, None),
            _ = tick.tick() => {
                if lease.verify().is_err() {
                    break (End::LeaseLost, None);
                }
            }
        }
    };
    outcome.main_stopped = status.is_none();
    // Stop the whole group whether or not the main process ended on its own (CMD-6).
    if let Some(group) = group {
        // SAFETY: killpg with a group id we created (process_group(0) made the child leader).
        unsafe { libc::killpg(group, libc::SIGKILL) };
    }
    let status = match status {
        Some(s) => s,
        None => child
            .wait()
            .await
            .map_err(|e| ExecError::Io(e.to_string()))?,
    };
    let lease_lost_after = lease.verify().is_err();

    let grace = tokio::time::sleep(DRAIN_GRACE);
    tokio::pin!(grace);
    let drained = async move { (out_task.await, err_task.await) };
    tokio::pin!(drained);
    let (out, err) = tokio::select! {
        r = &mut drained => r,
        () = &mut grace => { stop_draining.cancel(); drained.await }
    };
    let fail = |e: String| ExecError::Io(format!("reading output failed: {e}"));
    let out = out
        .map_err(|e| fail(e.to_string()))?
        .map_err(|e| fail(e.to_string()))?;
    let err = err
        .map_err(|e| fail(e.to_string()))?
        .map_err(|e| fail(e.to_string()))?;
    use std::os::unix::process::ExitStatusExt;
    outcome.exit_code = status.code();
    outcome.signal = status.signal();
    outcome.stdout_head_len = out.head_len;
    outcome.stdout_omitted = out.omitted;
    outcome.stdout = out.bytes;
    outcome.stderr = err.bytes;
    outcome.stdout_truncated = out.truncated;
    outcome.stderr_truncated = err.truncated;
    // A passed cap in kill mode fails the run even if the exit was seen first (RUN-9).
    outcome.end = End::settle(
        waited,
        AfterStop {
            lease_lost: lease_lost_after,
            cap_passed: kill_on_cap && (out.truncated || err.truncated),
            limit_hit: None,
        },
    );
    Ok(outcome)
}

/// A pipe whose ends close on `exec` (macOS has no `pipe2`): the read end and the write end.
fn cloexec_pipe() -> Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd), ExecError> {
    let io = |e: rustix::io::Errno| ExecError::Io(format!("cannot make the output pipe: {e}"));
    let (reader, writer) = rustix::pipe::pipe().map_err(io)?;
    for fd in [&reader, &writer] {
        rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC).map_err(io)?;
    }
    Ok((reader, writer))
}
