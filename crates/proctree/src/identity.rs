//! Process identity: a PID is only a name that the kernel recycles; the PID together with the
//! process's start time names one process for good (CMD-7, invariant 3).
//!
//! The `/proc/<pid>/stat` parser here allocates nothing, so the supervisor may use it between
//! `fork` and `exec` as well as the host.

use std::fmt;

/// One process, for good: its PID and its start time.
///
/// Two values are the same process only if both fields match; a PID alone is never trusted,
/// because the kernel hands a freed PID to the next process that asks (CMD-7).
///
/// On Linux the start time is field 22 of `/proc/<pid>/stat` (clock ticks since boot); on macOS it
/// is `pbi_start_tvsec * 1_000_000 + pbi_start_tvusec` from `proc_pidinfo`. Values from different
/// platforms are never compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessId {
    pid: u32,
    start_time: u64,
}

impl ProcessId {
    /// A process identity from its two parts, e.g. from a table made in a test or read on
    /// another platform.
    #[must_use]
    pub const fn new(pid: u32, start_time: u64) -> Self {
        Self { pid, start_time }
    }

    /// The PID. Only meaningful together with [`start_time`](Self::start_time).
    #[must_use]
    pub const fn pid(self) -> u32 {
        self.pid
    }

    /// The start time in the platform's unit (see the type's documentation).
    #[must_use]
    pub const fn start_time(self) -> u64 {
        self.start_time
    }
}

impl fmt::Display for ProcessId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {} (started at {})", self.pid, self.start_time)
    }
}

/// What a process's state letter says about whether a signal can still stop it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProcessState {
    /// Running, sleeping, stopped, traced or in disk sleep: a live process.
    Alive,
    /// Exited and waiting to be reaped (`Z`) or being torn down (`X`): it runs no code any more,
    /// so it is never counted as stopped by us. A `Z` thread-group leader whose other threads
    /// still run (the main thread called `pthread_exit`) is [`Alive`](Self::Alive): its code
    /// runs, and a signal to it reaches those threads (counted as dead, such a process would
    /// never be signalled and would outlive its call).
    Dead,
}

// `/proc` parsing: used by the Linux backend, unit-tested everywhere.
#[cfg(any(target_os = "linux", test))]
/// The fields of `/proc/<pid>/stat` that this crate uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stat {
    pub(crate) pid: u32,
    pub(crate) state: ProcessState,
    pub(crate) ppid: u32,
    pub(crate) pgid: u32,
    /// Field 20: how many threads the process has (each may have children of its own).
    pub(crate) threads: u32,
    pub(crate) start_time: u64,
}

#[cfg(any(target_os = "linux", test))]
/// Parses `/proc/<pid>/stat` without allocating.
///
/// The command name (field 2) is in parentheses and may itself contain spaces and parentheses,
/// so the remaining fields are read after the *last* `)` (proc(5)). `None` when the text does
/// not have that shape.
pub(crate) fn parse_stat(text: &[u8]) -> Option<Stat> {
    let open = text.iter().position(|&b| b == b'(')?;
    let close = text.iter().rposition(|&b| b == b')')?;
    if close < open {
        return None;
    }
    let pid = parse_u64(trim_spaces(&text[..open]))?;
    let rest = text.get(close + 1..)?;
    // Fields 3.. after the name; field n is at index n - 3.
    let mut state = None;
    let mut zombie_leader = false;
    let mut ppid = None;
    let mut pgid = None;
    let mut threads = None;
    let mut start_time = None;
    for (index, field) in rest
        .split(|&b| b == b' ' || b == b'\n')
        .filter(|f| !f.is_empty())
        .enumerate()
    {
        match index {
            0 => {
                zombie_leader = field == b"Z";
                state = Some(match field {
                    b"Z" | b"X" | b"x" => ProcessState::Dead,
                    [_] => ProcessState::Alive,
                    _ => return None,
                });
            }
            1 => ppid = Some(parse_u64(field)?),
            2 => pgid = Some(parse_u64(field)?),
            17 => threads = Some(parse_u64(field)?),
            19 => {
                start_time = Some(parse_u64(field)?);
                break;
            }
            _ => {}
        }
    }
    let threads = u32::try_from(threads?).ok()?;
    // `Z` only says the leader thread exited; with other threads left the process still runs.
    let state = match state? {
        ProcessState::Dead if zombie_leader && threads > 1 => ProcessState::Alive,
        s => s,
    };
    Some(Stat {
        pid: u32::try_from(pid).ok()?,
        state,
        ppid: u32::try_from(ppid?).ok()?,
        pgid: u32::try_from(pgid?).ok()?,
        threads,
        start_time: start_time?,
    })
}

#[cfg(any(target_os = "linux", test))]
fn trim_spaces(mut s: &[u8]) -> &[u8] {
    while let [b' ', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' '] = s {
        s = rest;
    }
    s
}

#[cfg(any(target_os = "linux", test))]
/// Decimal digits to a number; `None` on anything else or on overflow. Allocation-free.
pub(crate) fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    let mut value: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expect: Option<(u32, ProcessState, u32, u32, u64)>) {
        let got =
            parse_stat(text.as_bytes()).map(|s| (s.pid, s.state, s.ppid, s.pgid, s.start_time));
        assert_eq!(got, expect, "parsing {text:?}");
    }

    const TAIL: &str = "0 0 4194560 100 0 0 0 0 0 0 0 20 0 1 0 98765 1000 100 18446744073709551615";

    #[test]
    fn stat_fields_are_read_after_the_last_parenthesis() {
        check(
            &format!("42 (sleep) S 7 42 7 {TAIL}"),
            Some((42, ProcessState::Alive, 7, 42, 98765)),
        );
        check(
            &format!("43 (a) (b) c)) R 8 9 9 {TAIL}"),
            Some((43, ProcessState::Alive, 8, 9, 98765)),
        );
        check(
            &format!("44 (x y) Z 1 1 1 {TAIL}"),
            Some((44, ProcessState::Dead, 1, 1, 98765)),
        );
        check(
            &format!("45 ()) X 1 1 1 {TAIL}\n"),
            Some((45, ProcessState::Dead, 1, 1, 98765)),
        );
    }

    #[test]
    fn a_zombie_leader_with_running_threads_is_alive() {
        // `pthread_exit` in main: the leader shows `Z`, two threads still run.
        let text = "46 (zl) Z 1 46 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 3 0 777 1 1";
        assert_eq!(
            parse_stat(text.as_bytes()).map(|s| s.state),
            Some(ProcessState::Alive)
        );
        let reaped_soon = "47 (zl) Z 1 47 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 777 1 1";
        assert_eq!(
            parse_stat(reaped_soon.as_bytes()).map(|s| s.state),
            Some(ProcessState::Dead)
        );
    }

    #[test]
    fn thread_count_is_field_twenty() {
        let stat = parse_stat(format!("42 (sleep) S 7 42 7 {TAIL}").as_bytes()).unwrap();
        assert_eq!(stat.threads, 1);
        // A process without a controlling terminal has tpgid -1 (field 8), which is not read.
        let text = "9 (java) S 1 9 9 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 37 0 555 1 1";
        assert_eq!(
            parse_stat(text.as_bytes()).map(|s| (s.threads, s.start_time)),
            Some((37, 555))
        );
    }

    #[test]
    fn malformed_stat_is_refused_not_guessed() {
        check("", None);
        check("42 sleep S 7 42", None);
        check("42 (sleep) S 7 42 7 0 0", None);
        check(&format!("x (sleep) S 7 42 7 {TAIL}"), None);
        check(&format!("42 (sleep) SS 7 42 7 {TAIL}"), None);
        check(&format!("42 (sleep) S -7 42 7 {TAIL}"), None);
        check(
            "99999999999 (s) S 1 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1",
            None,
        );
    }

    #[test]
    fn numbers_overflowing_u64_are_refused() {
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b""), None);
    }

    proptest::proptest! {
        #[test]
        fn any_command_name_parses_to_the_same_fields(name in "[ -~]{0,15}", pid in 1u32.., start in proptest::num::u64::ANY) {
            let text = format!("{pid} ({name}) S 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 {start} 23");
            let stat = parse_stat(text.as_bytes()).unwrap();
            proptest::prop_assert_eq!((stat.pid, stat.ppid, stat.pgid, stat.start_time), (pid, 3, 4, start));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = parse_stat(&bytes);
        }
    }
}
