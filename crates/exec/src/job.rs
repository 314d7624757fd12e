//! A job and what became of it: the [`Job`] the runner takes, the [`Outcome`] it returns with
//! its one [`End`], and the [`ExecError`] when nothing could run. Plain data shared by the
//! runner (`run`) and both platform seams (`backend` on Linux, `macos_run`), which therefore
//! depend on this module and not on each other.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use fsguard::{RelPath, RootLease};
use toolscope::{CancelReason, ErrorCode};

use crate::spec::SandboxSpec;

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
    /// Keep running, keep the first `stdout_cap / 2` and the last `stdout_cap / 2` bytes of
    /// stdout (the tail appended right after the head, no marker: see
    /// [`Outcome::stdout_head_len`]), count what was dropped between them
    /// ([`Outcome::stdout_omitted`]); stderr is truncated as in [`OnCap::Truncate`]
    /// (`run_command`, RC-13).
    HeadAndTail,
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
    /// Send stderr into the stdout pipe, so both arrive in the order they were written (one
    /// pipe for both); [`Outcome::stderr`] is then empty and `stdout_cap` bounds both.
    pub merge_stderr: bool,
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
/// 3. [`LimitExceeded`](End::LimitExceeded): the call hit one of its resource limits (LIM-2),
///    seen while it ran or once it was stopped — also when the deadline passed meanwhile (a
///    fork bomb held at its process limit runs until then) or the main process exited first.
/// 4. [`TimedOut`](End::TimedOut): the deadline stopped the command.
/// 5. [`OutputLimit`](End::OutputLimit): a cap was passed in kill mode, also when the main
///    process's exit was seen first (RUN-9).
/// 6. [`Exited`](End::Exited): none of the above; the main process ended by itself.
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
    /// The call hit a resource limit (LIM-2; which one and its value); the tree was stopped.
    LimitExceeded(crate::LimitHit),
}

/// What the runner finds once the tree is stopped, besides what ended the wait.
#[cfg(any(target_os = "linux", target_os = "macos"))]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AfterStop {
    /// The lease's last check failed: the root was replaced at some point during the run.
    pub(crate) lease_lost: bool,
    /// The job is in [`OnCap::Kill`] mode and a stream passed its cap.
    pub(crate) cap_passed: bool,
    /// A resource limit the kernel counted a hit of, during the run or at its end.
    pub(crate) limit_hit: Option<crate::LimitHit>,
}

impl End {
    /// The one end of a run from what ended the wait and what was found after the stop, in
    /// the precedence documented on [`End`].
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    pub(crate) fn settle(waited: End, after: AfterStop) -> End {
        match waited {
            End::Cancelled(reason) => End::Cancelled(reason),
            _ if after.lease_lost => End::LeaseLost,
            End::LimitExceeded(hit) => End::LimitExceeded(hit),
            _ if after.limit_hit.is_some() => {
                after.limit_hit.map_or(End::Exited, End::LimitExceeded)
            }
            End::Exited if after.cap_passed => End::OutputLimit,
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
    /// In [`OnCap::HeadAndTail`] mode, the bytes dropped between the head and the tail of
    /// stdout; 0 otherwise.
    pub stdout_omitted: u64,
    /// How many bytes of [`stdout`](Outcome::stdout) are the head: where a caller puts its
    /// marker when [`stdout_omitted`](Outcome::stdout_omitted) is not 0 (then the tail
    /// follows); `stdout.len()` otherwise.
    pub stdout_head_len: usize,
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
    /// The program's `/tmp` and `/var/tmp` were its own (Linux's private root, NET-2): what it
    /// found or missed there, beyond the grants bound beneath them, was never the host's.
    pub own_tmp: bool,
    /// The program ran without network in a private network namespace whose only interface is
    /// its own `lo` (NET-1): a refused connection there was to its own loopback, which no
    /// network switch changes.
    pub private_loopback: bool,
    /// Which mechanism held each resource limit, in words (LIM-1; [`crate::LimitsReport`]),
    /// e.g. "limits fully enforced (processes 1024: cgroup v1; memory 8 GiB: cgroup v1; …)".
    pub limits: String,
    /// Each directory of [`SandboxSpec::staged`](crate::SandboxSpec::staged) the command saw
    /// read-only instead of through its private copy, and why (the overlay could not be made
    /// here). Empty when every staged directory was private.
    pub staged_read_only: Vec<(std::path::PathBuf, String)>,
}

impl Outcome {
    /// Whether the command ran to its own end (not stopped by timeout, cancellation, cap or
    /// lease loss).
    pub fn finished(&self) -> bool {
        self.end == End::Exited
    }

    /// What the program saw of the file system, for [`denials::explain`](crate::denials::explain).
    pub fn view(&self) -> crate::denials::View {
        match (self.view_is_grants_only, self.own_tmp) {
            (false, _) => crate::denials::View::Host,
            (true, false) => crate::denials::View::GrantsOnly,
            (true, true) => crate::denials::View::GrantsAndOwnTmp,
        }
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
            // The one mapping the tools share (an I/O failure is not a bad path).
            ExecError::WorkDir(e) => crate::open_error_code(e),
            ExecError::Refused(_) => ErrorCode::ExecPathInvalid,
            ExecError::Io(_) => ErrorCode::ExecIoFailed,
        }
    }
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
            let after = AfterStop {
                lease_lost,
                cap_passed: cap,
                limit_hit: None,
            };
            assert_eq!(End::settle(waited, after), want, "{row}");
        }
    }

    #[test]
    fn a_limit_hit_outranks_the_deadline_the_cap_and_the_exit_but_not_a_lost_lease() {
        let hit = crate::LimitHit {
            limit: crate::Limit::Processes,
            value: 1024,
        };
        let after = |lease_lost| AfterStop {
            lease_lost,
            cap_passed: true,
            limit_hit: Some(hit),
        };
        for waited in [End::Exited, End::TimedOut, End::OutputLimit] {
            assert_eq!(
                End::settle(waited.clone(), after(false)),
                End::LimitExceeded(hit),
                "{waited:?}"
            );
            assert_eq!(End::settle(waited, after(true)), End::LeaseLost);
        }
        assert_eq!(
            End::settle(End::Cancelled(CancelReason::Requested), after(false)),
            End::Cancelled(CancelReason::Requested)
        );
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
            End::LimitExceeded(crate::LimitHit {
                limit: crate::Limit::Memory,
                value: 1 << 30,
            }),
        ] {
            out.end = end;
            assert!(!out.finished(), "{:?}", out.end);
        }
    }
}
