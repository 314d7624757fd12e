//! The supervisor: the process that stands between the host and the command (SPEC: CMD-6,
//! CMD-7 \[beyond\], RUN-10).
//!
//! # Why it is forked and never `exec`s
//! The host is a multi-threaded tokio process, and the supervisor must live as long as the
//! command, so it cannot be a short pre-exec hook. Re-executing a helper binary would need that
//! binary to be found at run time by every embedder. Instead everything the supervisor needs
//! (C strings, pointer arrays, descriptors, uid/gid map text) is built *before* the fork, and
//! the supervisor runs only async-signal-safe code for its whole life: raw system calls through
//! `libc`, stack buffers, no allocation, no locks, no `std::fs`, no panics (no slice indexing
//! that could fail, wrapping arithmetic only). The same holds for the command's child between
//! its fork and `execve`.
//!
//! # What it does
//! 1. Becomes a child subreaper (`PR_SET_CHILD_SUBREAPER`) and a session leader, or PID 1 of a
//!    fresh PID namespace when the host chose that mode. Either way every orphan of the command
//!    re-parents to it, so the command's whole tree stays below it.
//! 2. Forks the command's main process, which reports its host PID and start time, applies the
//!    caller's `pre_exec` hook (the sandbox) and `execve`s.
//! 3. Reaps every child that exits, reporting the main process's wait status to the host.
//! 4. On the host's stop request, or on EOF from the host (the host died, even by SIGKILL), it
//!    kills every remaining descendant (only its own unreaped children, repeatedly, so no PID it
//!    signals can have been recycled), reaps them all, reports and exits.
//!
//! It runs the sandboxed command; it is not sandboxed by it.

use std::ffi::{CStr, CString};
use std::os::fd::RawFd;

use libc::{c_char, c_int};

use crate::identity::{ProcessState, parse_stat, parse_u64};

/// A record on the host channel: kind, a 32-bit and a 64-bit value. 16 bytes, so each record
/// is written in one `send` and never interleaves.
pub(crate) const RECORD: usize = 16;
/// Supervisor → host: the main process runs (`a` = host PID, `b` = start time). Main child →
/// supervisor: the same, first thing after fork.
pub(crate) const MSG_STARTED: u32 = 1;
/// Spawning failed (`a` = errno, `b` = a [`stage`] constant).
pub(crate) const MSG_FAILED: u32 = 2;
/// The main process exited (`a` = raw wait status).
pub(crate) const MSG_MAIN_EXITED: u32 = 3;
/// The supervisor killed `a` processes the host had not, reaped everything and is exiting.
pub(crate) const MSG_DONE: u32 = 4;

/// Where a spawn failed, carried in [`MSG_FAILED`].
pub(crate) mod stage {
    pub(crate) const ID_MAP: u64 = 1;
    pub(crate) const SETUP: u64 = 2;
    pub(crate) const CWD: u64 = 3;
    pub(crate) const PRE_EXEC: u64 = 4;
    pub(crate) const EXEC: u64 = 5;
}

/// Fixed descriptor numbers inside the supervisor after it tidied its table.
const CHAN_FD: RawFd = 3;
pub(crate) const CWD_FD: RawFd = 4;

/// The hook applied in the command's child after fork, before `execve`.
pub(crate) type PreExec = Box<dyn Fn() -> Result<(), i32> + Send + Sync>;

/// The working directory for the command.
#[derive(Debug)]
pub(crate) enum Cwd {
    Inherit,
    Fd(std::os::fd::OwnedFd),
    Path(CString),
}

/// Everything the supervisor and the command's child need, built before the fork.
pub(crate) struct Plan {
    pub(crate) program: CString,
    pub(crate) argv: Vec<CString>,
    pub(crate) envp: Vec<CString>,
    pub(crate) argv_ptrs: Vec<*const c_char>,
    pub(crate) envp_ptrs: Vec<*const c_char>,
    pub(crate) cwd: Cwd,
    pub(crate) stdin: std::os::fd::OwnedFd,
    pub(crate) stdout: std::os::fd::OwnedFd,
    pub(crate) stderr: std::os::fd::OwnedFd,
    pub(crate) pre_exec: Option<PreExec>,
    /// Descriptors left open for `pre_exec` (sorted, all above `CWD_FD`).
    pub(crate) keep_fds: Vec<RawFd>,
    /// `Some((uid_map, gid_map))` when the supervisor enters a new user namespace.
    pub(crate) id_maps: Option<(Vec<u8>, Vec<u8>)>,
}

impl Plan {
    /// Fills the NULL-terminated pointer arrays; called once, before the fork, after which
    /// neither `argv` nor `envp` is touched (the pointers stay valid).
    pub(crate) fn seal(&mut self) {
        self.argv_ptrs = self.argv.iter().map(|s| s.as_ptr()).collect();
        self.argv_ptrs.push(std::ptr::null());
        self.envp_ptrs = self.envp.iter().map(|s| s.as_ptr()).collect();
        self.envp_ptrs.push(std::ptr::null());
    }
}

/// `clone(2)` without a new stack: fork semantics, plus namespace flags. Returns the child's
/// PID in the parent, 0 in the child, -1 on error.
///
/// # Safety
/// In the child only async-signal-safe code may run (see the module documentation).
pub(crate) unsafe fn raw_clone(flags: libc::c_ulong) -> libc::pid_t {
    let flags = flags | libc::SIGCHLD as libc::c_ulong;
    // SAFETY: with a null stack, clone behaves like fork: the child continues on a copy of the
    // caller's stack. The caller upholds the async-signal-safety of what the child runs.
    let r = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    libc::pid_t::try_from(r).unwrap_or(-1)
}

fn errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn record(kind: u32, a: u32, b: u64) -> [u8; RECORD] {
    let mut r = [0u8; RECORD];
    let (k, rest) = r.split_at_mut(4);
    let (x, y) = rest.split_at_mut(4);
    k.copy_from_slice(&kind.to_ne_bytes());
    x.copy_from_slice(&a.to_ne_bytes());
    y.copy_from_slice(&b.to_ne_bytes());
    r
}

/// Splits a record into (kind, a, b).
pub(crate) fn parse_record(r: &[u8; RECORD]) -> (u32, u32, u64) {
    let mut k = [0u8; 4];
    let mut a = [0u8; 4];
    let mut b = [0u8; 8];
    k.copy_from_slice(r.get(0..4).unwrap_or(&[0; 4]));
    a.copy_from_slice(r.get(4..8).unwrap_or(&[0; 4]));
    b.copy_from_slice(r.get(8..16).unwrap_or(&[0; 8]));
    (
        u32::from_ne_bytes(k),
        u32::from_ne_bytes(a),
        u64::from_ne_bytes(b),
    )
}

/// Writes all of `bytes`; async-signal-safe. `send` with `MSG_NOSIGNAL` on sockets so a
/// vanished host cannot kill us with SIGPIPE; plain `write` on pipes.
fn write_all(fd: RawFd, mut bytes: &[u8], socket: bool) -> bool {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a live buffer of that length.
        let n = unsafe {
            if socket {
                libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL)
            } else {
                libc::write(fd, bytes.as_ptr().cast(), bytes.len())
            }
        };
        if n < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            return false;
        }
        let n = usize::try_from(n).unwrap_or(0);
        bytes = bytes.get(n..).unwrap_or(&[]);
    }
    true
}

/// Reads up to `buf.len()` bytes, retrying on EINTR until EOF or the buffer is full.
fn read_full(fd: RawFd, buf: &mut [u8]) -> usize {
    let mut got = 0usize;
    while got < buf.len() {
        let Some(rest) = buf.get_mut(got..) else {
            break;
        };
        // SAFETY: `rest` is a live, writable buffer of that length.
        let n = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
        if n < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            break;
        }
        if n == 0 {
            break;
        }
        got = got.wrapping_add(usize::try_from(n).unwrap_or(0));
    }
    got
}

/// `open` + `write_all` + `close`; async-signal-safe.
fn write_file(path: &CStr, bytes: &[u8]) -> Result<(), c_int> {
    // SAFETY: a NUL-terminated path and plain flags.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    let ok = write_all(fd, bytes, false);
    let e = errno();
    // SAFETY: closing the descriptor we just opened.
    unsafe { libc::close(fd) };
    if ok { Ok(()) } else { Err(e) }
}

/// Formats `/proc/<pid>` plus an optional suffix into `buf` as a C string; async-signal-safe.
fn proc_path<'a>(buf: &'a mut [u8; 64], pid: u64, suffix: &[u8]) -> Option<&'a CStr> {
    let mut digits = [0u8; 20];
    let mut n = 0usize;
    let mut v = pid;
    loop {
        *digits.get_mut(n)? = b'0'.wrapping_add((v % 10) as u8);
        n = n.wrapping_add(1);
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut at = 0usize;
    for &b in b"/proc/" {
        *buf.get_mut(at)? = b;
        at = at.wrapping_add(1);
    }
    while n > 0 {
        n = n.wrapping_sub(1);
        *buf.get_mut(at)? = *digits.get(n)?;
        at = at.wrapping_add(1);
    }
    for &b in suffix {
        *buf.get_mut(at)? = b;
        at = at.wrapping_add(1);
    }
    *buf.get_mut(at)? = 0;
    CStr::from_bytes_with_nul(buf.get(..=at)?).ok()
}

/// Entry point of the supervisor, in the child of `raw_clone`. Never returns.
///
/// # Safety
/// Must be called only in the freshly cloned child. Async-signal-safe throughout.
pub(crate) unsafe fn supervisor_main(plan: &Plan, chan: RawFd) -> ! {
    let code = {
        // SAFETY: we are the cloned child; this function upholds async-signal-safety.
        unsafe { supervise(plan, chan) }
    };
    // SAFETY: _exit is async-signal-safe and skips every atexit handler of the host.
    unsafe { libc::_exit(code) }
}

fn fail(chan: RawFd, errno: c_int, stage: u64) -> c_int {
    let _ = write_all(
        chan,
        &record(MSG_FAILED, u32::try_from(errno).unwrap_or(0), stage),
        true,
    );
    1
}

/// # Safety
/// As [`supervisor_main`].
unsafe fn supervise(plan: &Plan, chan: RawFd) -> c_int {
    use std::os::fd::AsRawFd;

    // 1. Our own user namespace, when asked: deny setgroups, then map our uid and gid, which
    //    an unprivileged process may do for itself (user_namespaces(7)).
    if let Some((uid_map, gid_map)) = &plan.id_maps {
        let steps: [(&CStr, &[u8]); 3] = [
            (c"/proc/self/setgroups", b"deny"),
            (c"/proc/self/uid_map", uid_map),
            (c"/proc/self/gid_map", gid_map),
        ];
        for (path, text) in steps {
            if let Err(e) = write_file(path, text) {
                return fail(chan, e, stage::ID_MAP);
            }
        }
    }

    // 2. A known descriptor table: 0-2 the command's stdio, CHAN_FD the host channel, CWD_FD
    //    the working directory; everything else closed. The host's other descriptors (another
    //    command's channel above all) must not live on here, or that command's supervisor
    //    would never see EOF when its host dies.
    let cwd_fd = match &plan.cwd {
        Cwd::Fd(fd) => fd.as_raw_fd(),
        _ => -1,
    };
    let wanted: [(RawFd, RawFd); 5] = [
        (plan.stdin.as_raw_fd(), 0),
        (plan.stdout.as_raw_fd(), 1),
        (plan.stderr.as_raw_fd(), 2),
        (chan, CHAN_FD),
        (cwd_fd, CWD_FD),
    ];
    let mut moved: [RawFd; 5] = [-1; 5];
    for (slot, (from, _)) in moved.iter_mut().zip(wanted.iter()) {
        if *from >= 0 {
            // SAFETY: duplicating a descriptor we own to a number >= 10 (none of the targets).
            let fd = unsafe { libc::fcntl(*from, libc::F_DUPFD_CLOEXEC, 10) };
            if fd < 0 {
                return fail(chan, errno(), stage::SETUP);
            }
            *slot = fd;
        }
    }
    for (fresh, (_, target)) in moved.iter().zip(wanted.iter()) {
        if *fresh >= 0 {
            // 0-2 lose close-on-exec (the command inherits them); the rest keep it.
            let flags = if *target <= 2 { 0 } else { libc::O_CLOEXEC };
            // SAFETY: both are descriptor numbers; `fresh` is ours and differs from `target`.
            if unsafe { libc::dup3(*fresh, *target, flags) } < 0 {
                return fail(chan, errno(), stage::SETUP);
            }
        }
    }
    let chan = CHAN_FD;
    // Close everything above our plumbing except the descriptors kept for the hook (sorted
    // before the fork), range by range.
    let mut from = CWD_FD + 1;
    for &keep in plan.keep_fds.iter().chain(std::iter::once(&RawFd::MAX)) {
        if keep > from {
            let last = if keep == RawFd::MAX {
                u32::MAX
            } else {
                (keep - 1) as u32
            };
            // SAFETY: close_range with plain integers; on old kernels close one by one.
            if unsafe { libc::syscall(libc::SYS_close_range, from as u32, last, 0) } < 0 {
                for fd in from..keep.min(65_536) {
                    // SAFETY: closing a number that may or may not be open is harmless here.
                    unsafe { libc::close(fd) };
                }
            }
        }
        from = from.max(keep.saturating_add(1));
    }

    // 3. Signals: default dispositions (the host's handlers are not ours, and an ignored
    //    SIGPIPE must not leak into the command); SIGCHLD blocked and read from a signalfd,
    //    and not raised when a child merely stops (SA_NOCLDSTOP): the host freezes hundreds of
    //    processes at a stop, and each would wake us for nothing. `execve` clears the flag.
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: a zeroed sigaction is SIG_DFL with an empty mask; errors (reserved signals)
        // are ignored on purpose.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = libc::SIG_DFL;
            if sig == libc::SIGCHLD {
                act.sa_flags = libc::SA_NOCLDSTOP;
            }
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
    // SAFETY: sigset operations on a local set, then signalfd on it.
    let sigfd = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK)
    };
    if sigfd < 0 {
        return fail(chan, errno(), stage::SETUP);
    }

    // 4. A session of our own (no controlling terminal of the host's; groups of the command can
    //    never be joined from outside) and the subreaper bit (CMD-6: setsid escapees stay ours).
    // SAFETY: plain system calls without pointers.
    unsafe {
        libc::setsid();
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0 {
            return fail(chan, errno(), stage::SETUP);
        }
    }

    // 5. The command's main process.
    let mut report = [0 as c_int; 2];
    // SAFETY: pipe2 fills the two-element array.
    if unsafe { libc::pipe2(report.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return fail(chan, errno(), stage::SETUP);
    }
    let [report_r, report_w] = report;
    // SAFETY: the child runs only `main_child`, which is async-signal-safe.
    let main = unsafe { raw_clone(0) };
    if main < 0 {
        return fail(chan, errno(), stage::SETUP);
    }
    if main == 0 {
        // SAFETY: we are the freshly cloned child.
        unsafe { main_child(plan, report_w) }
    }
    // SAFETY: our copy of the write end; the child keeps its own until execve closes it.
    unsafe { libc::close(report_w) };
    let mut first = [0u8; RECORD];
    let got = read_full(report_r, &mut first);
    let mut second = [0u8; RECORD];
    let failed = got == RECORD && read_full(report_r, &mut second) == RECORD;
    // SAFETY: closing our read end.
    unsafe { libc::close(report_r) };
    let mut main_reported = false;
    if got != RECORD || failed {
        let msg = if failed {
            second
        } else {
            record(MSG_FAILED, libc::EIO as u32, stage::SETUP)
        };
        let _ = write_all(chan, &msg, true);
        sweep(sigfd, main, &mut main_reported, chan, false);
        return 1;
    }
    if !write_all(chan, &first, true) {
        sweep(sigfd, main, &mut main_reported, chan, false);
        return 1;
    }
    // We must not hold the command's output pipes open: the host reads them to EOF.
    // SAFETY: closing our copies of the command's stdio and cwd.
    unsafe {
        libc::close(0);
        libc::close(1);
        libc::close(2);
        libc::close(CWD_FD);
    }

    // 6. Reap and wait for the stop request or the host's EOF.
    loop {
        reap(main, &mut main_reported, chan);
        let mut fds = [
            libc::pollfd {
                fd: chan,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: sigfd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: a live array of two pollfds.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if r < 0 && errno() != libc::EINTR {
            break;
        }
        drain(sigfd);
        if fds[0].revents != 0 {
            let mut byte = [0u8; 1];
            // SAFETY: a one-byte buffer.
            let n = unsafe { libc::read(chan, byte.as_mut_ptr().cast(), 1) };
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            // EOF (the host is gone, even if SIGKILLed), an error, or a stop request.
            break;
        }
    }
    let late = sweep(sigfd, main, &mut main_reported, chan, true);
    let _ = write_all(chan, &record(MSG_DONE, late, 0), true);
    0
}

fn drain(sigfd: RawFd) {
    let mut buf = [0u8; 1024];
    // SAFETY: reading into a stack buffer from our non-blocking signalfd.
    while unsafe { libc::read(sigfd, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
}

/// Reaps every child that has exited. `true` when we have no children left at all.
fn reap(main: libc::pid_t, main_reported: &mut bool, chan: RawFd) -> bool {
    loop {
        let mut status: c_int = 0;
        // SAFETY: waitpid writes the status into a local.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::__WALL) };
        if r > 0 {
            if r == main && !*main_reported {
                *main_reported = true;
                let _ = write_all(chan, &record(MSG_MAIN_EXITED, status as u32, 0), true);
            }
            continue;
        }
        if r == 0 {
            return false;
        }
        if errno() == libc::EINTR {
            continue;
        }
        return true;
    }
}

/// Kills and reaps every descendant; returns how many live ones it killed that were not
/// already dying. Only our own unreaped children are signalled: their PIDs cannot be recycled
/// until we reap them, so no stranger can be hit. A killed child's children re-parent to us
/// (we are the subreaper, or PID 1), and the next round kills them. Gives up after 10 s
/// without progress (a child we may not signal, e.g. a setuid program).
fn sweep(
    sigfd: RawFd,
    main: libc::pid_t,
    main_reported: &mut bool,
    chan: RawFd,
    count: bool,
) -> u32 {
    let mut counted = [0u32; 512];
    let mut n_counted = 0usize;
    let mut killed = 0u32;
    let mut idle_rounds = 0u32;
    loop {
        if reap(main, main_reported, chan) {
            return killed;
        }
        let mut progress = false;
        for_each_child(|pid| match kill_child(pid) {
            KillOutcome::KilledLive => {
                progress = true;
                let seen = counted.get(..n_counted).is_some_and(|c| c.contains(&pid));
                if count && !seen {
                    killed = killed.wrapping_add(1);
                    if let Some(slot) = counted.get_mut(n_counted) {
                        *slot = pid;
                        n_counted = n_counted.wrapping_add(1);
                    }
                }
            }
            KillOutcome::Dead => progress = true,
            KillOutcome::Failed => {}
        });
        idle_rounds = if progress {
            0
        } else {
            idle_rounds.wrapping_add(1)
        };
        if idle_rounds > 200 {
            return killed;
        }
        let mut pfd = libc::pollfd {
            fd: sigfd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        unsafe { libc::poll(&mut pfd, 1, 50) };
        drain(sigfd);
    }
}

enum KillOutcome {
    KilledLive,
    Dead,
    Failed,
}

/// SIGKILLs our child `pid` (a PID in the namespace of `/proc`, which is the host's) through a
/// `/proc/<pid>` directory descriptor, which `pidfd_send_signal` accepts as a pidfd; that also
/// works when we are PID 1 of a namespace whose PIDs differ from `/proc`'s.
fn kill_child(pid: u32) -> KillOutcome {
    let mut path = [0u8; 64];
    let Some(path) = proc_path(&mut path, u64::from(pid), b"") else {
        return KillOutcome::Failed;
    };
    // SAFETY: a NUL-terminated path; a directory descriptor is returned or -1.
    let dir = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if dir < 0 {
        return KillOutcome::Dead;
    }
    let mut buf = [0u8; 1024];
    // SAFETY: openat relative to our directory descriptor, then a read into a stack buffer.
    let state = unsafe {
        let fd = libc::openat(dir, c"stat".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        let n = if fd >= 0 { read_full(fd, &mut buf) } else { 0 };
        if fd >= 0 {
            libc::close(fd);
        }
        buf.get(..n).and_then(parse_stat).map(|s| s.state)
    };
    let outcome = match state {
        Some(ProcessState::Alive) => {
            // SAFETY: signal through a descriptor we own; null siginfo as kill(2).
            let r = unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    dir,
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            };
            if r == 0 {
                KillOutcome::KilledLive
            } else if errno() == libc::ESRCH {
                KillOutcome::Dead
            } else {
                KillOutcome::Failed
            }
        }
        _ => KillOutcome::Dead,
    };
    // SAFETY: closing our directory descriptor.
    unsafe { libc::close(dir) };
    outcome
}

/// Calls `f` with each PID in `/proc/thread-self/children` (we are single-threaded, so these
/// are all our children), streaming through a stack buffer.
fn for_each_child(mut f: impl FnMut(u32)) {
    // SAFETY: a NUL-terminated literal path.
    let fd = unsafe {
        libc::open(
            c"/proc/thread-self/children".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return;
    }
    let mut buf = [0u8; 512];
    let mut current: u64 = 0;
    let mut in_number = false;
    loop {
        // SAFETY: reading into a stack buffer.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        let n = usize::try_from(n).unwrap_or(0);
        if n == 0 {
            break;
        }
        for &b in buf.get(..n).unwrap_or(&[]) {
            if b.is_ascii_digit() {
                current = current.wrapping_mul(10).wrapping_add(u64::from(b - b'0'));
                in_number = true;
            } else if in_number {
                f(u32::try_from(current).unwrap_or(0));
                current = 0;
                in_number = false;
            }
        }
    }
    if in_number {
        f(u32::try_from(current).unwrap_or(0));
    }
    // SAFETY: closing our descriptor.
    unsafe { libc::close(fd) };
}

/// The command's main process, from fork to `execve`. Never returns.
///
/// # Safety
/// Only in the freshly cloned child of the supervisor; async-signal-safe throughout, including
/// the caller's `pre_exec` hook, which the API requires to be async-signal-safe.
unsafe fn main_child(plan: &Plan, report: RawFd) -> ! {
    fn die_with(report: RawFd, errno: c_int, stage: u64) -> ! {
        let _ = write_all(
            report,
            &record(MSG_FAILED, u32::try_from(errno).unwrap_or(0), stage),
            false,
        );
        // SAFETY: _exit never returns and runs no host code.
        unsafe { libc::_exit(127) }
    }
    // SAFETY: plain system calls on local data.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        // Its own process group, so RUN-10's group kill and CMD-7's group expansion have a
        // group that is the command's and nobody else's.
        libc::setpgid(0, 0);
    }

    // Report our identity as the host sees it: `/proc/self` resolves in /proc's namespace,
    // which is the host's even when we are inside a new PID namespace.
    let mut link = [0u8; 32];
    // SAFETY: readlink into a stack buffer of the given length.
    let n = unsafe { libc::readlink(c"/proc/self".as_ptr(), link.as_mut_ptr().cast(), link.len()) };
    let pid = usize::try_from(n)
        .ok()
        .and_then(|n| link.get(..n))
        .and_then(parse_u64)
        .unwrap_or(0);
    let mut stat = [0u8; 1024];
    // SAFETY: open/read/close of a proc file into a stack buffer.
    let got = unsafe {
        let fd = libc::open(
            c"/proc/self/stat".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        let got = if fd >= 0 { read_full(fd, &mut stat) } else { 0 };
        if fd >= 0 {
            libc::close(fd);
        }
        got
    };
    let Some(start) = stat.get(..got).and_then(parse_stat).map(|s| s.start_time) else {
        die_with(report, libc::EIO, stage::SETUP)
    };
    if pid == 0 {
        die_with(report, libc::EIO, stage::SETUP);
    }
    if !write_all(report, &record(MSG_STARTED, pid as u32, start), false) {
        die_with(report, errno(), stage::SETUP);
    }

    // SAFETY: chdir/fchdir on a C string or our descriptor.
    let cwd = unsafe {
        match &plan.cwd {
            Cwd::Inherit => 0,
            Cwd::Fd(_) => libc::fchdir(CWD_FD),
            Cwd::Path(p) => libc::chdir(p.as_ptr()),
        }
    };
    if cwd < 0 {
        die_with(report, errno(), stage::CWD);
    }
    if let Some(Err(e)) = plan.pre_exec.as_ref().map(|hook| hook()) {
        die_with(report, e, stage::PRE_EXEC);
    }
    // SAFETY: program, argv and envp are NUL-terminated strings and NULL-terminated arrays
    // built and sealed before the fork.
    unsafe {
        libc::execve(
            plan.program.as_ptr(),
            plan.argv_ptrs.as_ptr(),
            plan.envp_ptrs.as_ptr(),
        );
    }
    die_with(report, errno(), stage::EXEC)
}

/// The child of the PID-namespace probe: enters the namespace(s) the flags asked for, writes
/// the id maps if any, and exits 0 on success. Never returns.
///
/// # Safety
/// Only in the freshly cloned child; async-signal-safe.
pub(crate) unsafe fn probe_child(id_maps: Option<&(Vec<u8>, Vec<u8>)>) -> ! {
    let mut code = 0;
    if let Some((uid_map, gid_map)) = id_maps {
        let steps: [(&CStr, &[u8]); 3] = [
            (c"/proc/self/setgroups", b"deny"),
            (c"/proc/self/uid_map", uid_map),
            (c"/proc/self/gid_map", gid_map),
        ];
        for (path, text) in steps {
            if write_file(path, text).is_err() {
                code = 1;
                break;
            }
        }
    }
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(code) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let r = record(MSG_MAIN_EXITED, 0xdead, u64::MAX - 1);
        assert_eq!(parse_record(&r), (MSG_MAIN_EXITED, 0xdead, u64::MAX - 1));
    }

    #[test]
    fn proc_paths_are_formatted_without_allocating() {
        let mut buf = [0u8; 64];
        assert_eq!(proc_path(&mut buf, 0, b"").unwrap(), c"/proc/0");
        let mut buf = [0u8; 64];
        assert_eq!(
            proc_path(&mut buf, 4_194_304, b"/stat").unwrap(),
            c"/proc/4194304/stat"
        );
        let mut buf = [0u8; 64];
        assert_eq!(
            proc_path(&mut buf, u64::MAX, b"/stat").unwrap(),
            c"/proc/18446744073709551615/stat"
        );
    }
}
