//! Commands outside the sandbox, only after the password: `sudo -n` (RC-11) and
//! `sandbox: false` (RC-12).
//!
//! **Owns:** finding `sudo` (fixed system locations) and the target binary (the system's
//! program directories), running them with merged, bounded output (head and tail), the
//! timeout and cancellation — for sudo SIGTERM (sudo forwards it) and SIGKILL after 2 s, also
//! when the call's future is dropped; for `sandbox: false` proctree's supervisor, which stops
//! the whole tree at the end — `sudo -k` afterwards, and [`SUDO_ONE_AT_A_TIME`]. **Refuses to know:** the gate (module `gate`): nothing here runs
//! before the password passed.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use toolscope::{CallContext, CancelReason, ErrorCode, ToolError};

use crate::capture::HeadTail;
use crate::sandboxed::Ran;
use crate::types::{OUTPUT_CAP, Status};

/// Where `sudo` is: a fixed system location, never looked up on a `PATH` a caller controls.
pub(crate) fn sudo_binary() -> Option<PathBuf> {
    ["/usr/bin/sudo", "/bin/sudo", "/usr/local/bin/sudo"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// One sudo call of this process at a time, from its password check to its `sudo -k`: sudo's
/// cached credential is per process (no terminal), so two overlapping calls would reset each
/// other's.
pub(crate) static SUDO_ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The system's program directories, where a `sudo` target is looked up (sudo's own
/// `secure_path` on most systems).
const SECURE_PATH: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// How long sudo gets after SIGTERM before SIGKILL (RC-11).
const TERM_GRACE: Duration = Duration::from_secs(2);
/// How long the output pipe may stay open after the command ended.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

fn io_error(what: &str, e: impl std::fmt::Display) -> ToolError {
    ToolError::new(ErrorCode::ExecIoFailed, format!("{what}: {e}"))
}

fn pipe_pair() -> Result<(pipe::Receiver, OwnedFd), ToolError> {
    let (rx, tx) = cloexec_pipe().map_err(|e| io_error("cannot create a pipe", e))?;
    let rx = pipe::Receiver::from_owned_fd(rx).map_err(|e| io_error("cannot watch a pipe", e))?;
    Ok((rx, tx))
}

/// A pipe whose two ends close on `exec`, set atomically by `pipe2`.
#[cfg(not(target_os = "macos"))]
fn cloexec_pipe() -> rustix::io::Result<(OwnedFd, OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
}

/// A pipe whose two ends close on `exec`. macOS has no `pipe2`, so the flag is set right after
/// `pipe`, as std does there: a child another thread spawns in between inherits the ends.
#[cfg(target_os = "macos")]
fn cloexec_pipe() -> rustix::io::Result<(OwnedFd, OwnedFd)> {
    let (rx, tx) = rustix::pipe::pipe()?;
    for fd in [&rx, &tx] {
        rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC)?;
    }
    Ok((rx, tx))
}

/// Reads the merged output to its end (or until told to stop).
fn reader(mut rx: pipe::Receiver, tap: Option<exec::Tap>) -> tokio::task::JoinHandle<HeadTail> {
    tokio::spawn(async move {
        let mut cap = HeadTail::new(OUTPUT_CAP);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match rx.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if let Some(tap) = &tap {
                        tap(&buf[..n]);
                    }
                    cap.push(&buf[..n]);
                }
            }
        }
        cap
    })
}

async fn collect(handle: tokio::task::JoinHandle<HeadTail>) -> (String, bool) {
    let abort = handle.abort_handle();
    match tokio::time::timeout(DRAIN_GRACE, handle).await {
        Ok(Ok(cap)) => cap.finish(),
        Ok(Err(_)) => (String::new(), false),
        Err(_) => {
            abort.abort();
            (
                "[the output pipe stayed open after the command ended]".into(),
                false,
            )
        }
    }
}

/// Why the wait ended.
enum Ended {
    Exited(std::process::ExitStatus),
    TimedOut,
    Cancelled(CancelReason),
}

fn status_of(ended: &Ended) -> (Status, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match ended {
        Ended::Exited(s) => match s.code() {
            Some(c) => (Status::Exited, Some(c)),
            None if s.signal().is_some() => (Status::Signaled, None),
            None => (Status::Signaled, None),
        },
        Ended::TimedOut => (Status::TimedOut, None),
        Ended::Cancelled(CancelReason::Deadline) => (Status::TimedOut, None),
        Ended::Cancelled(_) => (Status::Cancelled, None),
    }
}

/// `sudo -n <binary> …` in the working directory (RC-11), then `sudo -k`.
pub(crate) async fn sudo(
    argv: &[String],
    workdir: &Path,
    timeout: Duration,
    tap: Option<exec::Tap>,
    ctx: &CallContext,
) -> Result<Ran, ToolError> {
    let sudo = sudo_binary().ok_or_else(|| {
        ToolError::new(
            ErrorCode::ExecUnsupported,
            "sudo is not installed on this machine, so nothing ran",
        )
    })?;
    let target = &argv[1];
    let Some(binary) = SECURE_PATH
        .iter()
        .map(|d| Path::new(d).join(target))
        .find(|p| p.is_file())
    else {
        return Ok(Ran {
            output: format!(
                "sudo: {target}: not found in the system's program directories ({})\n",
                SECURE_PATH.join(":")
            ),
            exit_code: Some(1),
            status: Status::Exited,
            truncated: false,
            descendants_stopped: 0,
            denials: Vec::new(),
            sandbox: "none (sudo)".into(),
            limit: None,
            own_loopback: false,
        });
    };
    let (rx, tx) = pipe_pair()?;
    let tx2 = tx
        .try_clone()
        .map_err(|e| io_error("cannot share the output pipe", e))?;
    let mut cmd = tokio::process::Command::new(&sudo);
    cmd.arg("-n")
        .arg("--")
        .arg(&binary)
        .args(&argv[2..])
        .current_dir(workdir)
        .env_clear()
        .env("PATH", SECURE_PATH.join(":"))
        .env(
            "LANG",
            std::env::var("LANG").unwrap_or_else(|_| "C.UTF-8".into()),
        )
        .env("TERM", "dumb")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::from(tx))
        .stderr(std::process::Stdio::from(tx2));
    let mut child = cmd.spawn().map_err(|e| io_error("cannot start sudo", e))?;
    // Dropping the call's future must not orphan a root command: SIGKILL to sudo could not be
    // forwarded, so the guard sends SIGTERM (sudo passes it on) instead.
    let guard = TermOnDrop(child.id());
    // The Command holds the write ends until it is dropped: drop it so EOF follows the exit.
    drop(cmd);
    let output = reader(rx, tap);
    let ended = tokio::select! {
        s = child.wait() => Ended::Exited(s.map_err(|e| io_error("waiting for sudo failed", e))?),
        () = tokio::time::sleep(timeout) => Ended::TimedOut,
        reason = ctx.cancelled() => Ended::Cancelled(reason),
    };
    if !matches!(ended, Ended::Exited(_)) {
        if let Some(pid) = child.id() {
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
        }
        if tokio::time::timeout(TERM_GRACE, child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
    }
    drop(guard.disarm());
    let (text, truncated) = collect(output).await;
    forget_sudo().await;
    if let Ended::Cancelled(reason @ CancelReason::Revoked(_)) = &ended {
        return Err(reason.to_error());
    }
    let (status, exit_code) = status_of(&ended);
    Ok(Ran {
        output: text,
        exit_code,
        status,
        truncated,
        descendants_stopped: 0,
        denials: Vec::new(),
        sandbox: "none (sudo: outside the sandbox, as root)".into(),
        limit: None,
        own_loopback: false,
    })
}

/// Sends SIGTERM to sudo when the call's future is dropped before sudo was reaped.
struct TermOnDrop(Option<u32>);

impl TermOnDrop {
    fn disarm(mut self) -> Self {
        self.0 = None;
        self
    }
}

impl Drop for TermOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self
            .0
            .and_then(|p| rustix::process::Pid::from_raw(p as i32))
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
}

/// `sudo -k`: no cached credential outlives the call (RC-11: the password every time).
pub(crate) async fn forget_sudo() {
    let Some(sudo) = sudo_binary() else { return };
    let _ = tokio::process::Command::new(sudo)
        .arg("-k")
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .await;
}

/// `sandbox: false` (RC-12): the command with the user's own rights and environment, under
/// proctree's supervisor (the whole tree stopped at the end).
#[cfg(target_os = "linux")]
pub(crate) async fn unsandboxed(
    argv: &[String],
    workdir: &Path,
    timeout: Duration,
    tap: Option<exec::Tap>,
    ctx: &CallContext,
) -> Result<Ran, ToolError> {
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;

    let host_path = std::env::var("PATH").unwrap_or_else(|_| crate::env::SYSTEM_PATH.into());
    let dirs: Vec<PathBuf> = host_path.split(':').map(PathBuf::from).collect();
    let first = if argv[0] == "sh" { "/bin/sh" } else { &argv[0] };
    let program = match crate::sandboxed::resolve_program(first, &dirs, workdir) {
        Ok(p) => p,
        Err(message) => {
            return Ok(Ran {
                output: format!("{message}\n"),
                exit_code: Some(127),
                status: Status::Exited,
                truncated: false,
                descendants_stopped: 0,
                denials: Vec::new(),
                sandbox: "none (sandbox: false)".into(),
                limit: None,
                own_loopback: false,
            });
        }
    };
    let (rx, tx) = pipe_pair()?;
    let tx2 = tx
        .try_clone()
        .map_err(|e| io_error("cannot share the output pipe", e))?;
    let (stdin, stdin_writer) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| io_error("cannot make the command's stdin", e))?;
    drop(stdin_writer);
    let mut command = proctree::Command::new(&program)
        .args(&argv[1..])
        .current_dir(workdir)
        .stdin(stdin)
        .stdout(tx)
        .stderr(tx2);
    for (k, v) in std::env::vars_os() {
        if k != "TERM" {
            command = command.env(k, v);
        }
    }
    command = command.env("TERM", "dumb");
    let mut tree = command
        .spawn()
        .map_err(|e| io_error("cannot start the command", e))?;
    let output = reader(rx, tap);
    let io = |e: std::io::Error| io_error("watching the command failed", e);
    let owned = tree.status_fd().try_clone_to_owned().map_err(io)?;
    // SAFETY: `owned` is our own descriptor, open and unchanged for the AsyncFd's life.
    let status_fd = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
        .map_err(|e| io_error("watching the command failed", e))?;
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let ended = loop {
        if let Some(s) = tree.try_main_status().map_err(io)? {
            break Ended::Exited(s);
        }
        tokio::select! {
            ready = status_fd.readable() => {
                let mut guard = ready.map_err(io)?;
                if let Some(s) = tree.try_main_status().map_err(io)? {
                    break Ended::Exited(s);
                }
                // Readable with no status: a message we absorbed (re-arm), or the supervisor
                // is gone (EOF stays readable).
                if !readable_now(status_fd.get_ref()) {
                    guard.clear_ready();
                } else if tree.try_main_status().map_err(io)?.is_none()
                    && readable_now(status_fd.get_ref())
                {
                    return Err(io_error(
                        "watching the command failed",
                        "the supervisor ended without reporting the command's status",
                    ));
                }
            }
            () = &mut deadline => break Ended::TimedOut,
            reason = ctx.cancelled() => break Ended::Cancelled(reason),
        }
    };
    let report = tokio::task::spawn_blocking(move || tree.stop())
        .await
        .map_err(|e| io_error("the stop task failed", e))?
        .map_err(|e| io_error("stopping the command failed", e))?;
    let (text, truncated) = collect(output).await;
    if let Ended::Cancelled(reason @ CancelReason::Revoked(_)) = &ended {
        return Err(reason.to_error());
    }
    let (status, exit_code) = status_of(&ended);
    Ok(Ran {
        output: text,
        exit_code,
        status,
        truncated,
        descendants_stopped: report.descendants_stopped,
        denials: Vec::new(),
        sandbox: "none (sandbox: false: the user's full rights)".into(),
        limit: None,
        own_loopback: false,
    })
}

/// Elsewhere no supervisor tracks the tree: refused rather than run with survivors.
#[cfg(not(target_os = "linux"))]
pub(crate) async fn unsandboxed(
    _argv: &[String],
    _workdir: &Path,
    _timeout: Duration,
    _tap: Option<exec::Tap>,
    _ctx: &CallContext,
) -> Result<Ran, ToolError> {
    Err(ToolError::new(
        ErrorCode::ExecUnsupported,
        "sandbox: false is not supported on this platform yet (no process-tree supervisor); \
         nothing ran",
    ))
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
