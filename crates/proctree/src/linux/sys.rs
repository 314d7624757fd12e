//! Thin safe wrappers over the few Linux system calls the host side needs: pidfds, `/proc`
//! reads, `poll`. Everything here may allocate; none of it runs between `fork` and `exec`.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::identity::{ProcessId, ProcessState, Stat, parse_stat};

/// `/proc/<pid>` followed by `suffix`, NUL-terminated, in `path` (reused between calls).
fn proc_path<'a>(path: &'a mut Vec<u8>, pid: u32, suffix: &[u8]) -> Option<&'a CStr> {
    use std::io::Write as _;
    path.clear();
    write!(path, "/proc/{pid}").ok()?;
    path.extend_from_slice(suffix);
    path.push(0);
    CStr::from_bytes_with_nul(path).ok()
}

/// Reads a whole `/proc` file into `buf` with one `open`, as few `read`s as the text needs and
/// one `close`: no `statx`, no small first reads, no path allocation (the stat of a process is
/// read hundreds of times per stop, so this is the hot path of a scan).
fn read_proc(path: &CStr, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    // SAFETY: a NUL-terminated path and plain flags; the result is checked before use.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    loop {
        let len = buf.len();
        buf.resize(len + 4096, 0);
        let spare = buf.get_mut(len..).unwrap_or(&mut []);
        // SAFETY: `spare` is a live, writable buffer of that length.
        let n = unsafe { libc::read(fd.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            buf.truncate(len);
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let n = usize::try_from(n).unwrap_or(0);
        buf.truncate(len + n);
        if n == 0 {
            return Ok(());
        }
    }
}

/// Reads and parses `/proc/<pid>/stat`; `None` when the process is gone or unreadable.
pub(crate) fn read_stat(pid: u32, buf: &mut Vec<u8>) -> Option<Stat> {
    let mut path = Vec::with_capacity(32);
    read_proc(proc_path(&mut path, pid, b"/stat")?, buf).ok()?;
    parse_stat(buf).filter(|s| s.pid == pid)
}

/// Appends the PIDs listed in `/proc/<pid>/task/<tid>/children` (the children of that one
/// thread, in `/proc`'s PID namespace) to `out`.
pub(crate) fn read_children(
    pid: u32,
    tid: u32,
    path: &mut Vec<u8>,
    buf: &mut Vec<u8>,
    out: &mut Vec<u32>,
) -> io::Result<()> {
    use std::io::Write as _;
    path.clear();
    write!(path, "/proc/{pid}/task/{tid}/children\0")?;
    let cpath = CStr::from_bytes_with_nul(path).map_err(io::Error::other)?;
    read_proc(cpath, buf)?;
    for word in buf.split(|b| *b == b' ' || *b == b'\n') {
        if word.is_empty() {
            continue;
        }
        match crate::identity::parse_u64(word).and_then(|n| u32::try_from(n).ok()) {
            Some(child) => out.push(child),
            None => return Err(io::Error::from(io::ErrorKind::InvalidData)),
        }
    }
    Ok(())
}

/// The thread ids of `pid`, from `/proc/<pid>/task`.
pub(crate) fn read_tasks(pid: u32, out: &mut Vec<u32>) -> io::Result<()> {
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let entry = entry?;
        if let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
            out.push(tid);
        }
    }
    Ok(())
}

/// Whether `/proc/<pid>/task/<tid>/children` exists on this kernel (`CONFIG_PROC_CHILDREN`),
/// probed once on the host's own main thread.
pub(crate) fn children_files_exist() -> bool {
    static PROBE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PROBE.get_or_init(|| {
        let pid = std::process::id();
        std::path::Path::new(&format!("/proc/{pid}/task/{pid}/children")).exists()
    })
}

/// Whether the process a pidfd names has exited (a pidfd polls readable from its exit on).
pub(crate) fn has_exited(fd: BorrowedFd<'_>) -> bool {
    poll_in(fd, 0).unwrap_or(true)
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

/// `poll(2)` with a zero timeout on `fds`, filling their `revents`; `true` when any is ready.
pub(crate) fn poll_now(fds: &mut [libc::pollfd]) -> bool {
    if fds.is_empty() {
        return false;
    }
    let n = libc::nfds_t::try_from(fds.len()).unwrap_or(libc::nfds_t::MAX);
    loop {
        // SAFETY: `fds` is a live array of `n` pollfds for the duration of the call.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), n, 0) };
        if r >= 0 {
            return r > 0;
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            // Fail towards "something changed": callers then look again.
            for p in fds.iter_mut() {
                p.revents = libc::POLLERR;
            }
            return true;
        }
    }
}

/// Waits until every pidfd in `fds` reports its process exited, or `timeout` passes.
/// Returns how many did not exit in time.
///
/// One descriptor at a time: they were all killed together and die together, so after the
/// first wait the rest are mostly ready already, and a `poll` over one descriptor costs the
/// kernel one wait-queue entry instead of one per process on every wake-up.
pub(crate) fn wait_exited(fds: &[BorrowedFd<'_>], timeout: std::time::Duration) -> usize {
    let deadline = std::time::Instant::now() + timeout;
    let mut left_over = 0;
    for fd in fds {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
        if !poll_in(*fd, ms).unwrap_or(false) {
            left_over += 1;
        }
    }
    left_over
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
