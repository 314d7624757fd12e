//! The file-descriptor budget of calls: a call that cannot get the descriptors it needs is
//! refused before it starts, with its own code and the limit named
//! (`AGENT_EXEC_DESCRIPTORS_EXHAUSTED`).
//!
//! A call opens descriptors all along its way: the folder and mirror walks, the sandbox's
//! channels, the supervisor's pipes, the state directory. At the process limit (`ulimit -n`,
//! `RLIMIT_NOFILE`) whichever of these comes first fails with `EMFILE`, and each step reports
//! its own failure ("cannot make the link broker's channel", "check the state directory's
//! permissions") — never the cause. So every call reserves [`PER_CALL`] descriptors before it
//! starts: it is admitted only while the descriptors open now, plus a share for each call in
//! flight that may not have opened its own yet, fit under the limit. A failure that still
//! carries `EMFILE` or `ENFILE` (another part of the process used more) is reported the same
//! way ([`remap`]).

use std::sync::atomic::{AtomicU64, Ordering};

use toolscope::{ErrorCode, ToolError};

/// The descriptors one call may hold at once: a `run` or `command` call measured about 18 at
/// its peak (mirror, sandbox channels, supervisor pipes and pidfd), with room for the walks'
/// threads.
pub const PER_CALL: u64 = 32;

/// Calls admitted and not yet finished, in this process.
static IN_FLIGHT: AtomicU64 = AtomicU64::new(0);

/// A call's admission; the call's share is free again when this is dropped.
#[derive(Debug)]
pub(crate) struct Admission(());

impl Drop for Admission {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The soft `RLIMIT_NOFILE` of this process (`None`: unlimited or unknown).
fn limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// How many descriptors this process has open now; `None` when they cannot be listed (which,
/// at the limit, is itself a sign: listing needs one).
fn open_now() -> Option<u64> {
    #[cfg(target_os = "linux")]
    let dir = "/proc/self/fd";
    #[cfg(not(target_os = "linux"))]
    let dir = "/dev/fd";
    // The listing's own descriptor is among the entries.
    let n = std::fs::read_dir(dir).ok()?.count() as u64;
    Some(n.saturating_sub(1))
}

/// The refusal, naming the limit and what a call needs.
/// `cause`: the errno a step met, for a call that got that far; `None` for a call refused
/// before it started.
fn exhausted(limit: u64, open: Option<u64>, others: u64, cause: Option<&str>) -> ToolError {
    let open = open.map_or_else(|| "all".to_owned(), |n| n.to_string());
    let ran = if cause.is_none() { " Nothing ran." } else { "" };
    let cause = cause.map_or_else(String::new, |c| format!(" ({c})"));
    ToolError::new(
        ErrorCode::ExecDescriptorsExhausted,
        format!(
            "agent-exec cannot open the file descriptors this call needs{cause}: it may have \
             {limit} open (`ulimit -n`), {open} are open and {others} other call(s) are in \
             flight; a call needs about {PER_CALL}.{ran} Start agent-exec with a higher limit \
             (`ulimit -n 4096`), or send fewer calls at once"
        ),
    )
}

/// Admits a call, or refuses it when the descriptors or the address space it needs would not
/// be there ([`crate::memory`]).
pub(crate) fn admit() -> Result<Admission, ToolError> {
    let others = IN_FLIGHT.fetch_add(1, Ordering::AcqRel);
    let admission = Admission(());
    let Some(limit) = limit() else {
        return crate::memory::check(others).map(|()| admission);
    };
    let open = open_now();
    // Calls in flight may not have opened their share yet; the open count has those that have
    // (counted twice: the estimate errs on refusing, never on failing mid-way).
    let needed = open.map(|n| n + (others + 1) * PER_CALL);
    match needed {
        Some(n) if n <= limit => crate::memory::check(others).map(|()| admission),
        _ => Err(exhausted(limit, open, others, None)),
    }
}

/// The descriptors a process needs before it can take a first call: the runtime's event
/// queue, its signal channel, the state directory's lock and record, the standard streams.
pub const TO_START: u64 = 16;

/// Refuses to start a process whose descriptor limit leaves no room to start: tokio panics
/// where its signal driver cannot open a socket pair, so this is checked before the runtime
/// is built.
///
/// # Errors
/// `AGENT_EXEC_DESCRIPTORS_EXHAUSTED` naming the limit and what a start and a call need.
pub fn descriptors_to_start() -> Result<(), ToolError> {
    let Some(limit) = limit() else {
        return Ok(());
    };
    let open = open_now();
    if open.is_some_and(|n| n + TO_START <= limit) {
        return Ok(());
    }
    let open = open.map_or_else(|| "all".to_owned(), |n| n.to_string());
    Err(ToolError::new(
        ErrorCode::ExecDescriptorsExhausted,
        format!(
            "agent-exec cannot open the file descriptors it needs to start: it may have {limit} \
             open (`ulimit -n`) and {open} are open; it needs about {TO_START} to start and \
             {PER_CALL} for each call. Nothing ran. Start agent-exec with a higher limit \
             (`ulimit -n 4096`)"
        ),
    ))
}

/// `err`, or — when its cause is the descriptor table (`EMFILE`, `ENFILE`) — the
/// `AGENT_EXEC_DESCRIPTORS_EXHAUSTED` error naming the limit: for a step outside a call, such
/// as the binary building its runtime.
#[must_use]
pub fn descriptor_failure(err: ToolError) -> ToolError {
    remap(err)
}

/// A failed call whose cause is the descriptor table (`EMFILE`, `ENFILE`) reported as such,
/// whatever step it reached; every other error as it is.
pub(crate) fn remap(err: ToolError) -> ToolError {
    let msg = err.message();
    let cause = [
        (
            "Too many open files in system",
            "the system's file table is full (ENFILE)",
        ),
        ("Too many open files", "EMFILE"),
    ]
    .into_iter()
    .find(|(text, _)| msg.contains(text));
    match (cause, limit()) {
        (Some((_, why)), Some(limit)) => {
            let others = IN_FLIGHT.load(Ordering::Acquire).saturating_sub(1);
            let full = exhausted(limit, open_now(), others, Some(why));
            ToolError::new(
                ErrorCode::ExecDescriptorsExhausted,
                format!("{}; the step that failed: {msg}", full.message()),
            )
        }
        _ => err,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_failure_of_emfile_is_reported_with_the_limit_not_as_a_missing_kernel_feature() {
        let err = ToolError::new(
            ErrorCode::ExecSandboxUnavailable,
            "seccomp filters are not available (cannot make the link broker's channel: Too \
             many open files (os error 24))",
        );
        let mapped = remap(err);
        assert_eq!(mapped.code(), ErrorCode::ExecDescriptorsExhausted);
        assert!(
            mapped.message().contains("`ulimit -n`"),
            "{}",
            mapped.message()
        );
        assert!(
            mapped
                .message()
                .contains(&format!("a call needs about {PER_CALL}")),
            "{}",
            mapped.message()
        );
        let other = ToolError::new(ErrorCode::ExecIoFailed, "disk full");
        assert_eq!(remap(other).code(), ErrorCode::ExecIoFailed);
    }
}
