//! The supervisor: the process that stands between the host and the command (CMD-6,
//! CMD-7 \[beyond\], RUN-10).
//!
//! # How it is started, and why it never `exec`s
//! The host is a multi-threaded tokio process, and the supervisor must live as long as the
//! command, so it cannot be a short pre-exec hook. Re-executing a helper binary would need that
//! binary to be found at run time by every embedder. Instead everything the supervisor needs
//! (C strings, pointer arrays, descriptors, uid/gid map text, two stacks) is built *before* the
//! clone, and the supervisor runs only async-signal-safe code for its whole life: raw system
//! calls, stack buffers, no allocation, no locks, no `std::fs`, no panics (no slice indexing
//! that could fail, wrapping arithmetic only).
//!
//! In [`Mode::PidNamespace`](crate::Mode) the supervisor is cloned with `CLONE_VM`: it shares
//! the host's memory instead of copying it. Forking a large multi-threaded host costs its page
//! tables, a TLB shoot-down on every CPU, and then a copy-on-write fault for every page the
//! host touches while the command runs — most of a short command's overhead (`cargo xtask
//! bench spawn`). Sharing is safe because the supervisor touches only its own stack and the plan,
//! which the host keeps alive (and unmoved) until the supervisor reported, and because it never
//! touches thread-local storage: after the host's `clone` returns, every system call here goes
//! through the `syscalls` crate, which returns the error instead of writing the `errno` of a
//! host thread. The one exception is glibc's `clone` wrapper when starting the main process,
//! which writes `errno` on failure — while the host thread whose TLS that is sits blocked in
//! [`Command::spawn`](crate::Command::spawn) waiting for this very report. In
//! [`Mode::Subreaper`](crate::Mode) the supervisor is an ordinary copy (no `CLONE_VM`): if the
//! host is OOM-killed, the kernel also kills every process sharing its memory, and only a PID
//! namespace then still takes the command's tree down with its supervisor.
//!
//! The command's main process is started posix_spawn-style, `CLONE_VM | CLONE_VFORK` on a stack
//! of its own: it shares memory until `execve`, while the supervisor waits, so no page table is
//! copied twice.
//!
//! # What it does
//! 1. Becomes a child subreaper (`PR_SET_CHILD_SUBREAPER`) and a session leader, or PID 1 of a
//!    fresh PID namespace when the host chose that mode. Either way every orphan of the command
//!    re-parents to it, so the command's whole tree stays below it.
//! 2. Starts the command's main process, which applies the caller's `pre_exec` hook (the
//!    sandbox) and `execve`s, reporting only a failure; then reports the main process's host
//!    PID and start time to the host.
//! 3. Reaps every child that exits, reporting the main process's wait status to the host. When
//!    the main process has exited and no child is left at all, nothing can start another
//!    process below it any more: it reports [`Message::Done`] right away and exits, so a stop needs
//!    no round trip.
//! 4. On the host's stop request, or on EOF from the host (the host died, even by SIGKILL), it
//!    kills every remaining descendant (only its own unreaped children, repeatedly, so no PID it
//!    signals can have been recycled), reaps them all, reports and exits.
//! 5. On EOF only (the host is gone), once that tree is reaped, it removes the call
//!    directories the host handed it ([`CallDir`](crate::CallDir): the call's temp dir, a
//!    per-call copy of the workspace), fd-relative and without following links. A host that
//!    lives removes its own; one that died cannot, and the order — tree first, files after —
//!    means nothing is still writing into them.
//!
//! It runs the sandboxed command; it is not sandboxed by it.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;

use libc::{c_char, c_int, c_void};
use syscalls::{Sysno, syscall};

use super::remove::{DirId, remove_tree_at};
use super::wire::{Message, RECORD, Stage};
use crate::identity::{ProcessState, parse_stat, parse_u64};

/// The most call directories one supervisor removes (a tool's temp dir and a turn's copy of
/// the workspace need two).
pub(crate) const MAX_CALL_DIRS: usize = 4;

/// A call directory as the supervisor keeps it: on its own stack, because the host may free
/// the plan once the command started. `name` is NUL-terminated.
#[derive(Clone, Copy)]
struct CallDirSlot {
    parent: RawFd,
    name: [u8; 256],
    id: DirId,
}

impl CallDirSlot {
    const EMPTY: CallDirSlot = CallDirSlot {
        parent: -1,
        name: [0; 256],
        id: (0, 0),
    };
}

/// Copies the plan's call directories to the stack (names longer than `NAME_MAX` are skipped;
/// the kernel would not have made them).
fn call_dir_slots(plan: &Plan) -> [CallDirSlot; MAX_CALL_DIRS] {
    let mut slots = [CallDirSlot::EMPTY; MAX_CALL_DIRS];
    for (slot, (fd, name, id)) in slots.iter_mut().zip(plan.call_dirs.iter()) {
        let bytes = name.as_bytes_with_nul();
        if let Some(dst) = slot.name.get_mut(..bytes.len()) {
            dst.copy_from_slice(bytes);
            slot.parent = std::os::fd::AsRawFd::as_raw_fd(fd);
            slot.id = *id;
        }
    }
    slots
}

/// Removes the call directories: only after the sweep, when nothing of the tree is left to
/// write into them.
fn remove_call_dirs(slots: &[CallDirSlot; MAX_CALL_DIRS]) {
    for slot in slots.iter().filter(|s| s.parent >= 0) {
        if let Ok(name) = CStr::from_bytes_until_nul(&slot.name) {
            let _ = remove_tree_at(slot.parent, name, Some(slot.id));
        }
    }
}

/// Fixed descriptor numbers inside the supervisor after it tidied its table.
const CHAN_FD: RawFd = 3;
pub(crate) const CWD_FD: RawFd = 4;

/// The hook applied in the command's child after the clone, before `execve`.
pub(crate) type PreExec = Box<dyn Fn() -> Result<(), i32> + Send + Sync>;

/// The working directory for the command.
#[derive(Debug)]
pub(crate) enum Cwd {
    Inherit,
    Fd(std::os::fd::OwnedFd),
    Path(CString),
}

/// Everything the supervisor and the command's child need, built before the clone.
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
    /// Directories to remove once the tree is gone if the host died first: the
    /// parent's descriptor (above `CWD_FD`), the name, and the identity it must still have.
    pub(crate) call_dirs: Vec<(std::os::fd::OwnedFd, CString, DirId)>,
    /// `keep_fds` and the `call_dirs` descriptors, sorted: what survives the descriptor tidy.
    pub(crate) survive_fds: Vec<RawFd>,
    /// `Some((uid_map, gid_map))` when the supervisor enters a new user namespace.
    pub(crate) id_maps: Option<(Vec<u8>, Vec<u8>)>,
    /// Top of the stack the main process runs on until `execve` (see [`Stacks`]).
    pub(crate) main_stack: usize,
    /// The supervisor's end of the link broker's channel (above `CWD_FD`, in
    /// `survive_fds`): the hook sends a seccomp listener and a directory over it before
    /// `execve` (see [`links`](super::links)).
    pub(crate) link_broker: Option<std::os::fd::OwnedFd>,
}

impl Plan {
    /// Fills the NULL-terminated pointer arrays; called once, before the clone, after which
    /// neither `argv` nor `envp` is touched (the pointers stay valid).
    pub(crate) fn seal(&mut self) {
        self.argv_ptrs = self.argv.iter().map(|s| s.as_ptr()).collect();
        self.argv_ptrs.push(std::ptr::null());
        self.envp_ptrs = self.envp.iter().map(|s| s.as_ptr()).collect();
        self.envp_ptrs.push(std::ptr::null());
    }
}

/// Usable bytes of each stack. Mapped lazily, so only the pages touched cost memory; the
/// supervisor's deepest path (the sweep) uses a few KiB.
const STACK_SIZE: usize = 256 * 1024;

/// The two stacks a spawn runs on — the supervisor's and the main process's until `execve` —
/// in one anonymous mapping with an inaccessible guard page below each.
///
/// A `CLONE_VM` supervisor runs on the host's copy of this memory, so it is reused or unmapped
/// only when the supervisor is known to be gone (reaped by us); otherwise
/// [`Stacks::keep_forever`] leaks it, which is the safe choice.
#[derive(Debug)]
pub(crate) struct Stacks {
    base: usize,
    len: usize,
    page: usize,
    unmap_on_drop: bool,
}

/// Stacks whose supervisor is gone, kept for the next spawn: mapping a pair afresh costs an
/// `mmap`, two `mprotect`s, an `munmap` and a page fault for every page touched, on every call.
/// (base, len, page) of each; at most [`POOL_MAX`].
static POOL: std::sync::Mutex<Vec<(usize, usize, usize)>> = std::sync::Mutex::new(Vec::new());
const POOL_MAX: usize = 4;

impl Stacks {
    pub(crate) fn new() -> io::Result<Self> {
        if let Some((base, len, page)) = POOL.lock().ok().and_then(|mut pool| pool.pop()) {
            return Ok(Stacks {
                base,
                len,
                page,
                unmap_on_drop: true,
            });
        }
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096);
        let len = 2 * (page + STACK_SIZE);
        // SAFETY: a fresh anonymous private mapping; no existing memory is affected.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stacks = Stacks {
            base: base as usize,
            len,
            page,
            unmap_on_drop: true,
        };
        for guard in [0, page + STACK_SIZE] {
            // SAFETY: a page-aligned page inside the mapping we just created.
            let r = unsafe {
                libc::mprotect((stacks.base + guard) as *mut c_void, page, libc::PROT_NONE)
            };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(stacks)
    }

    /// The supervisor's initial stack pointer (16-byte aligned, as every ABI here wants).
    pub(crate) fn supervisor_top(&self) -> usize {
        (self.base + self.page + STACK_SIZE) & !15
    }

    /// The main process's initial stack pointer.
    pub(crate) fn main_top(&self) -> usize {
        (self.base + self.len) & !15
    }

    /// Never unmap: a supervisor sharing our memory may still be running on it.
    pub(crate) fn keep_forever(&mut self) {
        self.unmap_on_drop = false;
    }
}

impl Drop for Stacks {
    fn drop(&mut self) {
        if !self.unmap_on_drop {
            return;
        }
        // Nothing runs on it any more (see `keep_forever`): reuse it, or unmap it.
        if let Ok(mut pool) = POOL.lock() {
            if pool.len() < POOL_MAX {
                pool.push((self.base, self.len, self.page));
                return;
            }
        }
        // SAFETY: our own mapping, which nothing runs on any more.
        unsafe { libc::munmap(self.base as *mut c_void, self.len) };
    }
}

/// What the supervisor's entry point receives through `clone`'s argument.
pub(crate) struct Start {
    pub(crate) plan: *const Plan,
    pub(crate) chan: RawFd,
}

/// Starts the supervisor on `stack_top` with `clone(2)`: `CLONE_VM` when `share_memory`, plus
/// the namespace `flags`. Returns its PID, or the error.
///
/// # Safety
/// `start` and the plan it points to must stay alive and unmoved until the supervisor has
/// reported ([`Message::Started`] or [`Message::Failed`]) or exited; with `share_memory`, `stack_top`
/// must stay mapped until the supervisor has exited.
pub(crate) unsafe fn clone_supervisor(
    start: &Start,
    stack_top: usize,
    flags: c_int,
    share_memory: bool,
) -> io::Result<libc::pid_t> {
    extern "C" fn entry(arg: *mut c_void) -> c_int {
        // SAFETY: `arg` is the `Start` the host keeps alive (see `clone_supervisor`), and its
        // plan pointer is valid until we report.
        let start = unsafe { &*(arg as *const Start) };
        // SAFETY: we are the freshly cloned supervisor.
        unsafe { supervisor_main(&*start.plan, start.chan) }
    }
    let vm = if share_memory { libc::CLONE_VM } else { 0 };
    // SAFETY: glibc's clone wrapper runs `entry` on the given stack in the child; `entry` is
    // async-signal-safe and never returns.
    let pid = unsafe {
        libc::clone(
            entry,
            stack_top as *mut c_void,
            flags | vm | libc::SIGCHLD,
            start as *const Start as *mut c_void,
        )
    };
    if pid < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(pid)
    }
}

/// Clones a child that only enters the namespaces in `flags` (sharing memory, as the real
/// supervisor will) and writes `id_maps`; its exit status says whether that worked.
///
/// # Safety
/// `stack_top` must be the top of a mapped stack that outlives the child (reap it first).
pub(crate) unsafe fn clone_probe(
    id_maps: Option<&(Vec<u8>, Vec<u8>)>,
    stack_top: usize,
    flags: c_int,
) -> io::Result<libc::pid_t> {
    extern "C" fn entry(arg: *mut c_void) -> c_int {
        // SAFETY: `arg` is null or points at the id maps, alive until the probe is reaped.
        let maps = unsafe { (arg as *const (Vec<u8>, Vec<u8>)).as_ref() };
        exit(i32::from(maps.is_some_and(|m| write_id_maps(m).is_err())))
    }
    let arg = id_maps.map_or(std::ptr::null_mut(), |m| {
        m as *const (Vec<u8>, Vec<u8>) as *mut c_void
    });
    // SAFETY: as in `clone_supervisor`; the child runs only `entry`, which is async-signal-safe.
    let pid = unsafe {
        libc::clone(
            entry,
            stack_top as *mut c_void,
            // No exit signal: a host that ignores SIGCHLD would have a SIGCHLD child reaped by
            // the kernel before the probe's wait (`__WALL`) reads its status.
            flags | libc::CLONE_VM,
            arg,
        )
    };
    if pid < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(pid)
    }
}

// The raw system calls used after the clone. Each returns the error number instead of writing
// `errno` (see the module documentation), and none allocates.

pub(crate) type Sys<T> = Result<T, c_int>;

pub(crate) fn sys(r: Result<usize, syscalls::Errno>) -> Sys<usize> {
    r.map_err(|e| e.into_raw())
}

fn fd_of(r: Sys<usize>) -> Sys<RawFd> {
    r.and_then(|n| RawFd::try_from(n).map_err(|_| libc::EBADF))
}

fn read(fd: RawFd, buf: &mut [u8]) -> Sys<usize> {
    // SAFETY: `buf` is a live, writable buffer of that length.
    sys(unsafe { syscall!(Sysno::read, fd, buf.as_mut_ptr(), buf.len()) })
}

fn write(fd: RawFd, buf: &[u8]) -> Sys<usize> {
    // SAFETY: `buf` is a live buffer of that length.
    sys(unsafe { syscall!(Sysno::write, fd, buf.as_ptr(), buf.len()) })
}

fn send(fd: RawFd, buf: &[u8]) -> Sys<usize> {
    // SAFETY: `buf` is a live buffer of that length; no address (connected socket).
    sys(unsafe {
        syscall!(
            Sysno::sendto,
            fd,
            buf.as_ptr(),
            buf.len(),
            libc::MSG_NOSIGNAL,
            0usize,
            0usize
        )
    })
}

pub(crate) fn close(fd: RawFd) {
    // SAFETY: closing a descriptor number; a stale one only yields EBADF.
    let _ = unsafe { syscall!(Sysno::close, fd) };
}

pub(crate) fn openat(dir: RawFd, path: &CStr, flags: c_int) -> Sys<RawFd> {
    // SAFETY: a NUL-terminated path; the mode argument is unused without O_CREAT.
    fd_of(sys(unsafe {
        syscall!(
            Sysno::openat,
            dir,
            path.as_ptr(),
            flags | libc::O_CLOEXEC,
            0usize
        )
    }))
}

fn exit(code: c_int) -> ! {
    loop {
        // SAFETY: ends this process (its own thread group) without running any host code.
        let _ = unsafe { syscall!(Sysno::exit_group, code) };
    }
}

/// Sets every catchable signal to its default action; SIGCHLD also with SA_NOCLDSTOP.
fn default_signal_actions() {
    for sig in 1..=64usize {
        if sig == libc::SIGKILL as usize || sig == libc::SIGSTOP as usize {
            continue;
        }
        // The kernel's `struct sigaction`: handler (0 = SIG_DFL), flags, then the restorer
        // (where the arch has one) and the mask. All zero but the flags is the same on every
        // layout, so four words cover them all.
        let mut act = [0u64; 4];
        if sig == libc::SIGCHLD as usize {
            act[1] = libc::SA_NOCLDSTOP as u64;
        }
        // SAFETY: `act` is a readable kernel sigaction; errors (none expected) are ignored.
        let _ = unsafe {
            syscall!(
                Sysno::rt_sigaction,
                sig,
                act.as_ptr(),
                0usize,
                std::mem::size_of::<u64>()
            )
        };
    }
}

/// Replaces the signal mask with `mask` (bit n-1 = signal n).
fn set_signal_mask(mask: u64) -> Sys<usize> {
    // SAFETY: a readable 8-byte kernel sigset, no old set requested.
    sys(unsafe {
        syscall!(
            Sysno::rt_sigprocmask,
            libc::SIG_SETMASK,
            &mask as *const u64,
            0usize,
            std::mem::size_of::<u64>()
        )
    })
}

fn sigbit(sig: c_int) -> u64 {
    1u64 << ((sig as u32).wrapping_sub(1) & 63)
}

/// `ppoll` on `fds` for at most `timeout_ms` (negative: no limit).
fn poll(fds: &mut [libc::pollfd], timeout_ms: i64) -> Sys<usize> {
    let ts = libc::timespec {
        tv_sec: (timeout_ms.max(0) / 1000) as libc::time_t,
        tv_nsec: ((timeout_ms.max(0) % 1000) * 1_000_000) as libc::c_long,
    };
    let tsp = if timeout_ms < 0 {
        std::ptr::null()
    } else {
        &ts as *const libc::timespec
    };
    // SAFETY: a live pollfd array of that length and a readable timespec (or null).
    sys(unsafe {
        syscall!(
            Sysno::ppoll,
            fds.as_mut_ptr(),
            fds.len(),
            tsp,
            0usize,
            std::mem::size_of::<u64>()
        )
    })
}

/// Writes all of `bytes`; async-signal-safe. `send` with `MSG_NOSIGNAL` on sockets so a
/// vanished host cannot kill us with SIGPIPE; plain `write` on pipes.
fn write_all(fd: RawFd, mut bytes: &[u8], socket: bool) -> bool {
    while !bytes.is_empty() {
        let r = if socket {
            send(fd, bytes)
        } else {
            write(fd, bytes)
        };
        match r {
            Ok(n) => bytes = bytes.get(n..).unwrap_or(&[]),
            Err(libc::EINTR) => {}
            Err(_) => return false,
        }
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
        match read(fd, rest) {
            Ok(0) => break,
            Ok(n) => got = got.wrapping_add(n),
            Err(libc::EINTR) => {}
            Err(_) => break,
        }
    }
    got
}

/// `open` + `write_all` + `close`; async-signal-safe.
fn write_file(path: &CStr, bytes: &[u8]) -> Sys<()> {
    let fd = openat(libc::AT_FDCWD, path, libc::O_WRONLY)?;
    let ok = write_all(fd, bytes, false);
    close(fd);
    if ok { Ok(()) } else { Err(libc::EIO) }
}

/// Denies setgroups, then maps our uid and gid, which an unprivileged process may do for
/// itself in a user namespace it created (user_namespaces(7)).
fn write_id_maps((uid_map, gid_map): &(Vec<u8>, Vec<u8>)) -> Sys<()> {
    write_file(c"/proc/self/setgroups", b"deny")?;
    write_file(c"/proc/self/uid_map", uid_map)?;
    write_file(c"/proc/self/gid_map", gid_map)
}

/// Formats `/proc/<pid>` plus an optional suffix into `buf` as a C string; async-signal-safe.
fn proc_path<'a>(buf: &'a mut [u8; 64], pid: u64, suffix: &[u8]) -> Option<&'a CStr> {
    c_path(buf, b"/proc/", pid, suffix)
}

/// Formats `prefix`, the decimal `number` and `suffix` into `buf` as a C string;
/// async-signal-safe.
pub(super) fn c_path<'a>(
    buf: &'a mut [u8; 64],
    prefix: &[u8],
    number: u64,
    suffix: &[u8],
) -> Option<&'a CStr> {
    let mut digits = [0u8; 20];
    let mut n = 0usize;
    let mut v = number;
    loop {
        *digits.get_mut(n)? = b'0'.wrapping_add((v % 10) as u8);
        n = n.wrapping_add(1);
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut at = 0usize;
    for &b in prefix {
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

/// The main process's PID as `/proc` (the host) sees it, and its start time. In our own PID
/// namespace `main` is our namespace's number, so the PID comes from the `Pid:` line of the
/// pidfd's fdinfo; as a subreaper `main` already is it. The process is our unreaped child, so
/// that PID cannot name anyone else meanwhile. The start time is 0 when `/proc/<pid>/stat`
/// cannot be read (`hidepid`, and a set-user-ID program without no_new_privs): the program
/// has already been exec'd, so failing the spawn now would only hide that it ran; a 0 never
/// matches a later `/proc` read, so nothing is ever signalled by PID on its strength. `None`
/// when the PID cannot be learnt.
fn main_identity(pidfd: RawFd, main: libc::pid_t, own_pid_namespace: bool) -> Option<(u32, u64)> {
    let mut path = [0u8; 64];
    let pid = if own_pid_namespace {
        let fdinfo = c_path(
            &mut path,
            b"/proc/self/fdinfo/",
            u64::try_from(pidfd).ok()?,
            b"",
        )?;
        let mut text = [0u8; 512];
        let fd = openat(libc::AT_FDCWD, fdinfo, libc::O_RDONLY).ok()?;
        let got = read_full(fd, &mut text);
        close(fd);
        fdinfo_pid(text.get(..got)?)?
    } else {
        u64::try_from(main).ok()?
    };
    let pid32 = u32::try_from(pid).ok().filter(|&p| p > 0)?;
    let stat_path = proc_path(&mut path, pid, b"/stat")?;
    let mut stat = [0u8; 1024];
    let got = match openat(libc::AT_FDCWD, stat_path, libc::O_RDONLY) {
        Ok(fd) => {
            let got = read_full(fd, &mut stat);
            close(fd);
            got
        }
        Err(_) => 0,
    };
    let start = stat
        .get(..got)
        .and_then(parse_stat)
        .map_or(0, |s| s.start_time);
    Some((pid32, start))
}

/// The value of the `Pid:` line of a pidfd's fdinfo (`-1` once reaped: `None`).
fn fdinfo_pid(text: &[u8]) -> Option<u64> {
    let mut rest = text;
    while !rest.is_empty() {
        let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        let line = rest.get(..end)?;
        if let Some(value) = line.strip_prefix(b"Pid:") {
            let digits = value.trim_ascii();
            return parse_u64(digits);
        }
        rest = rest.get(end.wrapping_add(1)..).unwrap_or(&[]);
    }
    None
}

/// Entry point of the supervisor, in the freshly cloned child. Never returns.
///
/// # Safety
/// Must be called only in the freshly cloned child. Async-signal-safe throughout.
unsafe fn supervisor_main(plan: &Plan, chan: RawFd) -> ! {
    let code = {
        // SAFETY: we are the cloned child; this function upholds async-signal-safety.
        unsafe { supervise(plan, chan) }
    };
    exit(code)
}

fn fail(chan: RawFd, errno: c_int, stage: Stage) -> c_int {
    let _ = write_all(chan, &Message::failed(errno, stage).encode(), true);
    1
}

/// What the main process's entry point receives through `clone`'s argument.
struct MainStart<'a> {
    plan: &'a Plan,
    report: RawFd,
}

/// # Safety
/// As [`supervisor_main`].
unsafe fn supervise(plan: &Plan, chan: RawFd) -> c_int {
    use std::os::fd::AsRawFd;

    // Read now: the plan may be freed once the command has started.
    let call_dirs = call_dir_slots(plan);
    let broker_chan = plan.link_broker.as_ref().map(|fd| fd.as_raw_fd());

    // 1. Our own user namespace, when asked.
    if let Some(maps) = &plan.id_maps {
        if let Err(e) = write_id_maps(maps) {
            return fail(chan, e, Stage::IdMap);
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
            match fd_of(sys(unsafe {
                syscall!(Sysno::fcntl, *from, libc::F_DUPFD_CLOEXEC, 10usize)
            })) {
                Ok(fd) => *slot = fd,
                Err(e) => return fail(chan, e, Stage::Setup),
            }
        }
    }
    for (fresh, (_, target)) in moved.iter().zip(wanted.iter()) {
        if *fresh >= 0 {
            // 0-2 lose close-on-exec (the command inherits them); the rest keep it.
            let flags = if *target <= 2 { 0 } else { libc::O_CLOEXEC };
            // SAFETY: both are descriptor numbers; `fresh` is ours and differs from `target`.
            if let Err(e) = sys(unsafe { syscall!(Sysno::dup3, *fresh, *target, flags) }) {
                return fail(chan, e, Stage::Setup);
            }
        }
    }
    let chan = CHAN_FD;
    // Close everything above our plumbing except the descriptors kept for the hook and the
    // call directories' parents (sorted before the clone), range by range.
    let mut from = CWD_FD + 1;
    for &keep in plan.survive_fds.iter().chain(std::iter::once(&RawFd::MAX)) {
        if keep > from {
            let last = if keep == RawFd::MAX {
                u32::MAX
            } else {
                (keep - 1) as u32
            };
            // SAFETY: close_range with plain integers; on old kernels close one by one.
            if unsafe { syscall!(Sysno::close_range, from as u32, last, 0usize) }.is_err() {
                for fd in from..keep.min(65_536) {
                    close(fd);
                }
            }
        }
        from = from.max(keep.saturating_add(1));
    }

    // 3. Signals: default dispositions (the host's handlers are not ours — with a shared
    //    address space they would even run host code on our stack — and an ignored SIGPIPE
    //    must not leak into the command); SIGCHLD blocked and read from a signalfd, and not
    //    raised when a child merely stops (SA_NOCLDSTOP): the host freezes hundreds of
    //    processes at a stop, and each would wake us for nothing. `execve` clears the flag.
    default_signal_actions();
    let chld = sigbit(libc::SIGCHLD);
    if let Err(e) = set_signal_mask(chld) {
        return fail(chan, e, Stage::Setup);
    }
    // SAFETY: a readable 8-byte kernel sigset; a new descriptor is returned.
    let sigfd = match fd_of(sys(unsafe {
        syscall!(
            Sysno::signalfd4,
            -1isize,
            &chld as *const u64,
            std::mem::size_of::<u64>(),
            libc::SFD_CLOEXEC | libc::SFD_NONBLOCK
        )
    })) {
        Ok(fd) => fd,
        Err(e) => return fail(chan, e, Stage::Setup),
    };

    // 4. A session of our own (no controlling terminal of the host's; groups of the command can
    //    never be joined from outside) and the subreaper bit (CMD-6: setsid escapees stay ours).
    // SAFETY: plain system calls without pointers.
    unsafe {
        let _ = syscall!(Sysno::setsid);
        if let Err(e) = sys(syscall!(
            Sysno::prctl,
            libc::PR_SET_CHILD_SUBREAPER,
            1usize,
            0usize,
            0usize,
            0usize
        )) {
            return fail(chan, e, Stage::Setup);
        }
    }

    // 5. The command's main process, posix_spawn-style: it shares our memory on its own
    //    stack, and we are suspended until it has called `execve` or exited.
    let mut report = [0 as c_int; 2];
    // SAFETY: pipe2 fills the two-element array.
    if let Err(e) = sys(unsafe { syscall!(Sysno::pipe2, report.as_mut_ptr(), libc::O_CLOEXEC) }) {
        return fail(chan, e, Stage::Setup);
    }
    let [report_r, report_w] = report;
    let start = MainStart {
        plan,
        report: report_w,
    };
    extern "C" fn main_entry(arg: *mut c_void) -> c_int {
        // SAFETY: `arg` is the `MainStart` on the supervisor's stack, which is suspended
        // (CLONE_VFORK) until this child has called execve or exited.
        let start = unsafe { &*(arg as *const MainStart<'_>) };
        // SAFETY: we are the freshly cloned child.
        unsafe { main_child(start.plan, start.report) }
    }
    // A pidfd for the main process: its fdinfo names its PID as `/proc` (the host) sees it,
    // which we, PID 1 of a namespace, cannot otherwise tell. The child's descriptor table is
    // copied before the pidfd is made, so the command never holds it.
    let mut pidfd: c_int = -1;
    // SAFETY: glibc's clone wrapper runs `main_entry` on the plan's main stack, which the host
    // keeps mapped; `main_entry` is async-signal-safe and never returns. With CLONE_PIDFD the
    // kernel stores the pidfd through the parent-tid pointer.
    let main = unsafe {
        libc::clone(
            main_entry,
            plan.main_stack as *mut c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD,
            &start as *const MainStart<'_> as *mut c_void,
            &mut pidfd as *mut c_int,
            // tls and child-tid: unused without CLONE_SETTLS and CLONE_CHILD_*.
            std::ptr::null_mut::<c_void>(),
            std::ptr::null_mut::<c_int>(),
        )
    };
    if main < 0 {
        // glibc wrote errno into the TLS block we share with the host thread that is blocked
        // in `spawn` until we report (module documentation); read it back once.
        let e = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EAGAIN);
        return fail(chan, e, Stage::Setup);
    }
    close(report_w);
    // The hook's descriptors (a Landlock ruleset) served the main process, which has its own
    // table and has called `execve` or exited by now. Freeing them here, while the command
    // runs, keeps that work out of our exit, which the host waits for.
    for &fd in &plan.keep_fds {
        close(fd);
    }
    // The report pipe carries the failure record of a step before `execve`, or closes
    // without a word: at `execve` (close-on-exec), or when the child died before it (a signal);
    // the latter then reads as an exit right away.
    let mut failure = [0u8; RECORD];
    let got = read_full(report_r, &mut failure);
    close(report_r);
    // The link broker's listener, sent by the main process before `execve` (we were
    // suspended until then, so it is queued by now), or nothing after a failed start.
    let mut broker = broker_chan.and_then(super::links::receive);
    // The main process's identity, read here, after its `execve`, rather than by the main
    // process before it: the command starts that much sooner. We are
    // PID 1 exactly when we run in a PID namespace of our own.
    // SAFETY: getpid takes no arguments.
    let own_pid_namespace = unsafe { syscall!(Sysno::getpid) }.is_ok_and(|pid| pid == 1);
    let identity = if got == 0 {
        main_identity(pidfd, main, own_pid_namespace)
    } else {
        None
    };
    close(pidfd);
    let mut main_reported = false;
    let Some((host_pid, start_time)) = identity else {
        let msg = if got == RECORD {
            failure
        } else {
            Message::failed(libc::EIO, Stage::Setup).encode()
        };
        let told = write_all(chan, &msg, true);
        if let Some(b) = broker.take() {
            super::links::release(b);
        }
        sweep(sigfd, main, &mut main_reported, chan, false);
        if !told {
            // Nobody heard the failure: the host is gone, and so is whoever would remove
            // the call's directories.
            remove_call_dirs(&call_dirs);
        }
        return 1;
    };
    // From this report on the host may free the plan: nothing below reads it.
    if !write_all(
        chan,
        &Message::Started {
            pid: host_pid,
            start_time,
        }
        .encode(),
        true,
    ) {
        // The host died while the command was starting: as on its EOF below.
        sweep(sigfd, main, &mut main_reported, chan, false);
        remove_call_dirs(&call_dirs);
        return 1;
    }
    // We must not hold the command's output pipes open: the host reads them to EOF.
    for fd in [0, 1, 2, CWD_FD] {
        close(fd);
    }

    // 6. Reap; leave as soon as the main process exited and nothing is left below us, or on
    //    the stop request or the host's EOF.
    let mut host_gone = false;
    loop {
        if reap(main, &mut main_reported, chan, true) && main_reported {
            return 0;
        }
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
            libc::pollfd {
                // Negative: not polled.
                fd: broker.map_or(-1, |b| b.listener),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        match poll(&mut fds, -1) {
            Err(libc::EINTR) | Ok(_) => {}
            Err(_) => break,
        }
        drain(sigfd);
        if let Some(b) = broker {
            let revents = fds[2].revents;
            // POLLHUP: no sandboxed process is left to ask.
            let broken = (revents & libc::POLLIN != 0 && !super::links::answer_one(b))
                || (revents & libc::POLLIN == 0 && revents != 0);
            if broken {
                super::links::release(b);
                broker = None;
            }
        }
        if fds[0].revents != 0 {
            let mut byte = [0u8; 1];
            match read(chan, &mut byte) {
                Err(libc::EINTR) => continue,
                // A stop request: the host lives on and removes its own directories.
                Ok(1) => {}
                // EOF (the host is gone, even if SIGKILLed) or a broken channel.
                _ => host_gone = true,
            }
            break;
        }
    }
    // Pending link requests end with the tree (the kill interrupts them) or, once the
    // listener is closed, with ENOSYS.
    if let Some(b) = broker.take() {
        super::links::release(b);
    }
    let late = sweep(sigfd, main, &mut main_reported, chan, true);
    if host_gone {
        // The tree is gone (killed and reaped): nothing can write into the call's
        // directories any more, and nobody else will remove them.
        remove_call_dirs(&call_dirs);
    }
    let _ = write_all(chan, &Message::Done { killed: late }.encode(), true);
    0
}

fn drain(sigfd: RawFd) {
    let mut buf = [0u8; 1024];
    while matches!(read(sigfd, &mut buf), Ok(n) if n > 0) {}
}

/// Reaps every child that has exited and reports the main process's status the first time it
/// is seen. `true` when we have no children left at all. With `finish`, an empty tree after
/// the main process exited is also reported as done ([`Message::Done`], nothing killed), in the
/// same write: nothing is left that could start a process below us again.
fn reap(main: libc::pid_t, main_reported: &mut bool, chan: RawFd, finish: bool) -> bool {
    let mut main_status = None;
    let empty = loop {
        let mut status: c_int = 0;
        // SAFETY: wait4 writes the status into a local; no rusage requested.
        let r = sys(unsafe {
            syscall!(
                Sysno::wait4,
                -1isize,
                &mut status as *mut c_int,
                libc::WNOHANG | libc::__WALL,
                0usize
            )
        });
        match r {
            Ok(0) => break false,
            Ok(pid) => {
                if pid == main as usize && !*main_reported {
                    *main_reported = true;
                    main_status = Some(status);
                }
            }
            Err(libc::EINTR) => {}
            Err(_) => break true,
        }
    };
    let mut msg = [0u8; 2 * RECORD];
    let mut len = 0usize;
    if let Some(status) = main_status {
        if let Some(slot) = msg.get_mut(..RECORD) {
            slot.copy_from_slice(&Message::MainExited { status }.encode());
            len = RECORD;
        }
    }
    if finish && empty && *main_reported {
        if let Some(slot) = msg.get_mut(len..len.wrapping_add(RECORD)) {
            slot.copy_from_slice(&Message::Done { killed: 0 }.encode());
            len = len.wrapping_add(RECORD);
        }
    }
    if len > 0 {
        let _ = write_all(chan, msg.get(..len).unwrap_or(&[]), true);
    }
    empty
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
        if reap(main, main_reported, chan, false) {
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
        let mut pfd = [libc::pollfd {
            fd: sigfd,
            events: libc::POLLIN,
            revents: 0,
        }];
        let _ = poll(&mut pfd, 50);
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
    let Ok(dir) = openat(libc::AT_FDCWD, path, libc::O_RDONLY | libc::O_DIRECTORY) else {
        return KillOutcome::Dead;
    };
    let mut buf = [0u8; 1024];
    let n = match openat(dir, c"stat", libc::O_RDONLY) {
        Ok(fd) => {
            let n = read_full(fd, &mut buf);
            close(fd);
            n
        }
        Err(_) => 0,
    };
    let state = buf.get(..n).and_then(parse_stat).map(|s| s.state);
    let outcome = match state {
        Some(ProcessState::Alive) => {
            // SAFETY: signal through a descriptor we own; null siginfo as kill(2).
            match sys(unsafe {
                syscall!(Sysno::pidfd_send_signal, dir, libc::SIGKILL, 0usize, 0usize)
            }) {
                Ok(_) => KillOutcome::KilledLive,
                Err(libc::ESRCH) => KillOutcome::Dead,
                Err(_) => KillOutcome::Failed,
            }
        }
        _ => KillOutcome::Dead,
    };
    close(dir);
    outcome
}

/// Calls `f` with each PID in `/proc/thread-self/children` (we are single-threaded, so these
/// are all our children), streaming through a stack buffer.
fn for_each_child(mut f: impl FnMut(u32)) {
    let Ok(fd) = openat(
        libc::AT_FDCWD,
        c"/proc/thread-self/children",
        libc::O_RDONLY,
    ) else {
        return;
    };
    let mut buf = [0u8; 512];
    let mut current: u64 = 0;
    let mut in_number = false;
    loop {
        let n = match read(fd, &mut buf) {
            Ok(n) => n,
            Err(libc::EINTR) => continue,
            Err(_) => 0,
        };
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
    close(fd);
}

/// The command's main process, from the clone to `execve`. Never returns.
///
/// # Safety
/// Only in the freshly cloned child of the supervisor; async-signal-safe and TLS-free
/// throughout, including the caller's `pre_exec` hook, which the API requires to be so.
unsafe fn main_child(plan: &Plan, report: RawFd) -> ! {
    fn die_with(report: RawFd, errno: c_int, stage: Stage) -> ! {
        let _ = write_all(report, &Message::failed(errno, stage).encode(), false);
        exit(127)
    }
    let _ = set_signal_mask(0);
    // Its own process group, so RUN-10's group kill and CMD-7's group expansion have a
    // group that is the command's and nobody else's.
    // SAFETY: plain integers.
    let _ = unsafe { syscall!(Sysno::setpgid, 0usize, 0usize) };

    // SAFETY: chdir/fchdir on a C string or our descriptor.
    let cwd = unsafe {
        match &plan.cwd {
            Cwd::Inherit => Ok(0),
            Cwd::Fd(_) => sys(syscall!(Sysno::fchdir, CWD_FD)),
            Cwd::Path(p) => sys(syscall!(Sysno::chdir, p.as_ptr())),
        }
    };
    if let Err(e) = cwd {
        die_with(report, e, Stage::Cwd);
    }
    if let Some(Err(e)) = plan.pre_exec.as_ref().map(|hook| hook()) {
        die_with(report, e, Stage::PreExec);
    }
    // SAFETY: program, argv and envp are NUL-terminated strings and NULL-terminated arrays
    // built and sealed before the clone, alive until the host hears from the supervisor.
    let e = unsafe {
        syscall!(
            Sysno::execve,
            plan.program.as_ptr(),
            plan.argv_ptrs.as_ptr(),
            plan.envp_ptrs.as_ptr()
        )
    };
    die_with(
        report,
        e.err().map_or(libc::EIO, |e| e.into_raw()),
        Stage::Exec,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn main_identity_without_a_visible_stat_has_start_time_zero() {
        // A PID /proc does not show (above PID_MAX_LIMIT, so never a process; as under
        // hidepid): the PID stands, the start time is unknown (0), the spawn goes on.
        assert_eq!(main_identity(-1, 4_194_999, false), Some((4_194_999, 0)));
        // Our own process: both known.
        let me = std::process::id();
        let identity = main_identity(-1, me as libc::pid_t, false).unwrap();
        assert_eq!(identity.0, me);
        assert_ne!(identity.1, 0);
        // In a PID namespace of our own the PID must come from a pidfd.
        assert_eq!(main_identity(-1, 2, true), None);
    }

    #[test]
    fn fdinfo_pid_reads_the_pid_line_only() {
        let text =
            b"pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nPid:\t4242\nNSpid:\t4242\t2\n";
        assert_eq!(fdinfo_pid(text), Some(4242));
        assert_eq!(fdinfo_pid(b"Pid:\t-1\nNSpid:\t-1\n"), None, "reaped");
        assert_eq!(fdinfo_pid(b"NSpid:\t7\n"), None);
        assert_eq!(fdinfo_pid(b""), None);
        assert_eq!(fdinfo_pid(b"Pid:\t31"), Some(31), "no final newline");
    }

    proptest::proptest! {
        #[test]
        fn fdinfo_pid_finds_the_pid_among_any_other_lines(
            pid in 1u32..=4_194_304,
            before in proptest::collection::vec("[a-z_]{1,8}:\t[0-9a-f]{0,12}", 0..6),
            after in proptest::collection::vec("[A-Za-z_]{1,8}:\t[0-9 \t]{0,12}", 0..6),
        ) {
            let mut text = String::new();
            for line in &before {
                text.push_str(line);
                text.push('\n');
            }
            text.push_str(&format!("Pid:\t{pid}\n"));
            for line in &after {
                text.push_str(line);
                text.push('\n');
            }
            proptest::prop_assert_eq!(fdinfo_pid(text.as_bytes()), Some(u64::from(pid)));
        }

        #[test]
        fn fdinfo_pid_never_panics(text in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let _ = fdinfo_pid(&text);
        }
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
