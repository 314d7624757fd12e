//! Thin safe wrappers over the few Linux system calls the host side needs: pidfds, `/proc`
//! reads, `poll`. Everything here may allocate; none of it runs between `fork` and `exec`.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::identity::{ProcessId, ProcessState, Stat, parse_stat};

/// Reads and parses `/proc/<pid>/stat`; `None` when the process is gone or unreadable.
pub(crate) fn read_stat(pid: u32, buf: &mut Vec<u8>) -> Option<Stat> {
    buf.clear();
    let mut file = File::open(format!("/proc/{pid}/stat")).ok()?;
    file.read_to_end(buf).ok()?;
    parse_stat(buf).filter(|s| s.pid == pid)
}

/// Opens a pidfd for `pid` (Linux 5.3+), close-on-exec.
pub(crate) fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: pidfd_open takes a PID and flags and returns a new descriptor or -1; no pointers.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sends `sig` to the process a pidfd names; the kernel guarantees it is that very process,
/// whatever has happened to its PID since the pidfd was opened.
pub(crate) fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: a valid descriptor, a signal number, a null siginfo (as kill(2) would) and no flags.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A process pinned by a pidfd whose identity was checked *after* the pidfd was opened, so the
/// pidfd provably names `id` (CMD-7: identity re-verified immediately before each signal).
#[derive(Debug)]
pub(crate) struct Pinned {
    pub(crate) fd: OwnedFd,
    pub(crate) state: ProcessState,
}

/// What became of an identity when we tried to pin it.
#[derive(Debug)]
pub(crate) enum Pin {
    Pinned(Pinned),
    /// No process has that PID any more.
    Gone,
    /// The PID now names another process: it must never be signalled.
    IdentityChanged,
}

pub(crate) fn pin(id: ProcessId, buf: &mut Vec<u8>) -> io::Result<Pin> {
    let fd = match pidfd_open(id.pid()) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(Pin::Gone),
        Err(e) => return Err(e),
    };
    // Read the identity only now: if the PID was recycled before pidfd_open, the stat read
    // here describes the new process and the start time tells it apart.
    match read_stat(id.pid(), buf) {
        None => Ok(Pin::Gone),
        Some(s) if s.start_time != id.start_time() => Ok(Pin::IdentityChanged),
        Some(s) => Ok(Pin::Pinned(Pinned { fd, state: s.state })),
    }
}

/// `poll(2)` on one descriptor for input; `Ok(true)` when readable (or hung up).
pub(crate) fn poll_in(fd: BorrowedFd<'_>, timeout_ms: i32) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd that lives across the call.
        let r = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if r >= 0 {
            return Ok(r > 0);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Waits until every pidfd in `fds` reports its process exited, or `timeout` passes.
/// Returns how many did not exit in time.
pub(crate) fn wait_exited(fds: &[BorrowedFd<'_>], timeout: std::time::Duration) -> usize {
    let deadline = std::time::Instant::now() + timeout;
    let mut pending: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    while !pending.is_empty() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1);
        let n = libc::nfds_t::try_from(pending.len()).unwrap_or(libc::nfds_t::MAX);
        // SAFETY: `pending` is a live array of `n` pollfds for the duration of the call.
        let r = unsafe { libc::poll(pending.as_mut_ptr(), n, ms) };
        if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break;
        }
        pending.retain(|p| p.revents == 0);
        for p in &mut pending {
            p.revents = 0;
        }
    }
    pending.len()
}

/// Sets `O_NONBLOCK` on a descriptor.
pub(crate) fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: fcntl on a valid descriptor with integer arguments.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
