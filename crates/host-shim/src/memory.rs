//! The address-space budget of calls: under an address-space limit (`ulimit -v`,
//! `RLIMIT_AS`) a call that would not fit is refused before it starts, with its own code and
//! the limit named (`AGENT_EXEC_MEMORY_EXHAUSTED`).
//!
//! Rust aborts the whole process when an allocation fails. At the limit that is any allocation
//! of any call, and every request in flight goes unanswered. So every call reserves
//! [`PER_CALL`] bytes of address space before it starts: it is admitted only while the
//! address space mapped now, plus a share for each call in flight, fits under the limit. The
//! share covers what a call maps at its peak: its threads' stacks, the walks' buffers and the
//! output it holds. Without a limit nothing is checked.

use toolscope::{ErrorCode, ToolError};

/// The address space one call may map at once, with room to spare: eight `run` and `command`
/// calls in flight raised a server's mapped size by 7 to 9 MiB together (with its malloc
/// arenas bounded, see `agent-exec`'s `main`); a call that starts threads (the walks' pool,
/// 2 MiB of stack each) or holds its output (up to 1 MiB per stream) maps more.
pub const PER_CALL: u64 = 16 << 20;

/// The soft `RLIMIT_AS` of this process (`None`: unlimited or unknown).
fn limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::As).current
}

/// The address space this process maps now (`VmSize`); `None` where it cannot be read.
fn mapped_now() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmSize:"))?
            .trim()
            .strip_suffix("kB")?
            .trim()
            .parse()
            .ok()?;
        Some(kib.saturating_mul(1024))
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// The address space `agent-exec` maps on its way to serving a first call, beyond what it maps
/// when it starts: its threads' stacks, the runtime, the state and the system set's walk.
pub const TO_START: u64 = 16 << 20;

/// Refuses to start a process that would run out of address space before it could answer: at
/// the limit an allocation aborts the process, with the requests it read unanswered.
///
/// # Errors
/// `AGENT_EXEC_MEMORY_EXHAUSTED` naming the limit and what a start needs.
pub fn memory_to_start() -> Result<(), ToolError> {
    let Some(limit) = limit() else {
        return Ok(());
    };
    let Some(mapped) = mapped_now() else {
        return Ok(());
    };
    let needed = mapped.saturating_add(TO_START);
    if needed <= limit {
        return Ok(());
    }
    Err(ToolError::new(
        ErrorCode::ExecMemoryExhausted,
        format!(
            "the address-space limit (`ulimit -v`) is {} MiB, too low to start: agent-exec \
             maps {} MiB before it can answer a first call, and a call needs about {} MiB \
             more. Start it with a higher limit (`ulimit -v unlimited`, or at least {} MiB)",
            mib(limit),
            mib(needed),
            mib(PER_CALL),
            mib(needed + PER_CALL) + 1,
        ),
    ))
}

fn mib(bytes: u64) -> u64 {
    bytes >> 20
}

/// Refuses a call (with `others` in flight) that would not fit under the address-space limit.
pub(crate) fn check(others: u64) -> Result<(), ToolError> {
    let Some(limit) = limit() else {
        return Ok(());
    };
    // Unknown use at a finite limit: admitted, as before the limit was known to matter.
    let Some(mapped) = mapped_now() else {
        return Ok(());
    };
    let needed = mapped.saturating_add((others + 1).saturating_mul(PER_CALL));
    if needed <= limit {
        return Ok(());
    }
    Err(ToolError::new(
        ErrorCode::ExecMemoryExhausted,
        format!(
            "agent-exec cannot reserve the memory this call needs: it may map {} MiB \
             (`ulimit -v`), {} MiB are mapped and {others} other call(s) are in flight; a call \
             needs about {} MiB. Nothing ran. Start agent-exec with a higher limit (`ulimit -v \
             unlimited`, or at least {} MiB more), or send fewer calls at once",
            mib(limit),
            mib(mapped),
            mib(PER_CALL),
            mib(needed - limit).max(1),
        ),
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn without_a_limit_every_call_is_admitted() {
        if limit().is_some() {
            eprintln!("skipped: this test process has an address-space limit");
            return;
        }
        assert!(check(1_000_000).is_ok());
    }

    #[test]
    fn the_mapped_size_is_read() {
        #[cfg(target_os = "linux")]
        assert!(mapped_now().unwrap() > 1 << 20);
    }
}
