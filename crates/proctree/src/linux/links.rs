//! The supervisor's hard-link broker (LIVE-2, CMD-9): the one kind of hard link a
//! sandboxed command may make is between two names directly inside the call's own private
//! `/dev/shm`, which glibc's `sem_open` needs (it creates `/dev/shm/sem.XXXXXX` and links it to
//! `/dev/shm/sem.NAME`, so that a semaphore appears fully initialised or not at all).
//!
//! **Owns:** receiving, once, a seccomp user-notification listener and a directory descriptor
//! from the command's main process (over the channel given to
//! [`Command::link_broker`](crate::Command::link_broker), before `execve`; the listener never
//! reaches the program), and answering each `link`/`linkat` notification: both paths copied out
//! of the caller's memory once, each exactly `/dev/shm/<name>` (one component, not `.`/`..`, at
//! most `NAME_MAX` bytes), `linkat` with flags 0, the notification still valid after the copy;
//! then the supervisor links `<name>` to `<name>` in *that directory* itself, on its copy of the
//! strings (no time-of-check/time-of-use window), and answers with the result.
//!
//! **Refuses:** everything else, with `EPERM` (today's answer): relative paths, any other
//! directory, paths through anything (`/dev/shm/a/b`, `/dev/shm/../x`), `AT_SYMLINK_FOLLOW`,
//! `AT_EMPTY_PATH`, a directory that is not a tmpfs. The names are resolved in the received
//! directory only, never in the caller's view, so neither a symbolic link in `/dev/shm` nor a
//! changed root can point the link elsewhere; `linkat` with flags 0 links a final symbolic link
//! itself, not its target.
//!
//! Async-signal-safe like the rest of the supervisor: raw system calls, stack buffers only.

use std::os::fd::RawFd;

use libc::c_int;
use syscalls::{Sysno, syscall};

use super::supervisor::{Sys, close, sys};

/// The received listener and the directory its links are made in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Broker {
    pub(crate) listener: RawFd,
    dir: RawFd,
}

/// `TMPFS_MAGIC` (`<linux/magic.h>`).
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// The one directory both names must be directly inside, as the command names it.
const PREFIX: &[u8] = b"/dev/shm/";

/// `NAME_MAX`: the longest name accepted.
const NAME_MAX: usize = 255;

/// Bytes read from the caller: the prefix, the longest name and its NUL.
const READ_MAX: usize = PREFIX.len() + NAME_MAX + 1;

/// A control message with two descriptors (`CMSG_SPACE(2 * sizeof(int))` on LP64).
#[repr(C)]
struct TwoFds {
    hdr: libc::cmsghdr,
    fds: [c_int; 2],
}

/// Receives the listener and the directory the main process sent before `execve`, if it sent
/// them (a failed start sends nothing), and closes the channel. The directory must be a tmpfs.
pub(crate) fn receive(chan: RawFd) -> Option<Broker> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: all-zero is a valid `cmsghdr` and `msghdr` (plain integers and null pointers).
    let mut control: TwoFds = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = (&mut control as *mut TwoFds).cast();
    msg.msg_controllen = std::mem::size_of::<TwoFds>();
    // SAFETY: `msg` points at live buffers of the lengths it names.
    let got = sys(unsafe {
        syscall!(
            Sysno::recvmsg,
            chan,
            &mut msg as *mut libc::msghdr,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC
        )
    });
    close(chan);
    let whole = got == Ok(1)
        && msg.msg_flags & libc::MSG_CTRUNC == 0
        && msg.msg_controllen >= std::mem::size_of::<TwoFds>()
        && control.hdr.cmsg_level == libc::SOL_SOCKET
        && control.hdr.cmsg_type == libc::SCM_RIGHTS
        && control.hdr.cmsg_len == std::mem::size_of::<TwoFds>();
    if !whole {
        if got.is_ok() && control.hdr.cmsg_type == libc::SCM_RIGHTS {
            // A partial message: close whatever arrived. Unused slots are still 0, and 0-2
            // are our standard descriptors, so anything received is above them.
            for fd in control.fds {
                if fd > 2 {
                    close(fd);
                }
            }
        }
        return None;
    }
    let [listener, dir] = control.fds;
    // SAFETY: all-zero is a valid `statfs`; fstatfs fills it.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a writable statfs.
    let fs = sys(unsafe { syscall!(Sysno::fstatfs, dir, &mut st as *mut libc::statfs) });
    #[allow(clippy::unnecessary_cast)] // `f_type` is not an i64 on every target
    let tmpfs = fs.is_ok() && st.f_type as i64 == TMPFS_MAGIC;
    if !tmpfs {
        close(listener);
        close(dir);
        return None;
    }
    Some(Broker { listener, dir })
}

/// Closes both descriptors.
pub(crate) fn release(broker: Broker) {
    close(broker.listener);
    close(broker.dir);
}

/// Receives one notification and answers it. `false` when the listener is broken (stop
/// polling it); a notification whose caller is gone meanwhile is not an error.
pub(crate) fn answer_one(broker: Broker) -> bool {
    // SAFETY: all-zero is a valid `seccomp_notif`; the kernel requires it zeroed.
    let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: `req` is a writable struct of the size the request encodes.
    let r = sys(unsafe {
        syscall!(
            Sysno::ioctl,
            broker.listener,
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut req as *mut libc::seccomp_notif
        )
    });
    match r {
        Ok(_) => {}
        // Interrupted, or the caller was killed before we looked.
        Err(libc::EINTR) | Err(libc::ENOENT) => return true,
        Err(_) => return false,
    }
    let error = match decide(broker, &req) {
        Ok(()) => 0,
        Err(e) => -e,
    };
    let resp = libc::seccomp_notif_resp {
        id: req.id,
        val: 0,
        error,
        flags: 0,
    };
    // SAFETY: `resp` is a readable struct of the size the request encodes. ENOENT: the caller
    // is gone (killed meanwhile); nothing to answer.
    let _ = unsafe {
        syscall!(
            Sysno::ioctl,
            broker.listener,
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &resp as *const libc::seccomp_notif_resp
        )
    };
    true
}

/// The answer to one notification: validate, then link.
fn decide(broker: Broker, req: &libc::seccomp_notif) -> Sys<()> {
    let args = req.data.args;
    let nr = i64::from(req.data.nr);
    let (old, new) = if nr == libc::SYS_linkat {
        // `int flags`: the kernel reads the low half only, and so do we. Any flag
        // (AT_SYMLINK_FOLLOW, AT_EMPTY_PATH) is refused; the dirfds do not matter, since
        // both paths must be absolute.
        if args[4] as u32 != 0 {
            return Err(libc::EPERM);
        }
        (args[1], args[3])
    } else if link_nr() == Some(nr) {
        (args[0], args[1])
    } else {
        return Err(libc::EPERM);
    };
    let mut old_buf = [0u8; READ_MAX];
    let mut new_buf = [0u8; READ_MAX];
    let old_name = name_in_shm(req.pid, old, &mut old_buf).ok_or(libc::EPERM)?;
    let new_name = name_in_shm(req.pid, new, &mut new_buf).ok_or(libc::EPERM)?;
    // The strings came from the memory of the process that made the call only if it is
    // still waiting for this answer (its PID could have been reused otherwise).
    let mut id = req.id;
    // SAFETY: `id` is a readable u64.
    sys(unsafe {
        syscall!(
            Sysno::ioctl,
            broker.listener,
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &mut id as *mut u64
        )
    })
    .map_err(|_| libc::EPERM)?;
    // SAFETY: two NUL-terminated names in our buffers, resolved in our directory; flags 0:
    // a final symbolic link is linked itself, and a new name never follows one.
    sys(unsafe {
        syscall!(
            Sysno::linkat,
            broker.dir,
            old_name.as_ptr(),
            broker.dir,
            new_name.as_ptr(),
            0usize
        )
    })
    .map(drop)
}

/// `link` where the architecture has it.
fn link_nr() -> Option<i64> {
    #[cfg(target_arch = "x86_64")]
    return Some(libc::SYS_link);
    #[cfg(not(target_arch = "x86_64"))]
    return None;
}

/// Copies the string at `addr` in process `pid` into `buf` and returns the name after
/// `/dev/shm/`, NUL-terminated, when the whole string is `/dev/shm/<name>` with `<name>` one
/// component other than `.` and `..`.
fn name_in_shm(pid: u32, addr: u64, buf: &mut [u8; READ_MAX]) -> Option<&[u8]> {
    let len = read_remote(pid, addr, buf);
    let read = buf.get(..len)?;
    let end = read.iter().position(|&b| b == 0)?;
    let path = read.get(..end)?;
    let name = path.strip_prefix(PREFIX)?;
    if !valid_name(name) {
        return None;
    }
    // The name with its NUL.
    buf.get(PREFIX.len()..=end)
}

/// One path component that names an entry of the directory itself.
pub(crate) fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= NAME_MAX
        && name != b"."
        && name != b".."
        && !name.contains(&b'/')
        && !name.contains(&0)
}

/// Reads up to `buf.len()` bytes at `addr` of process `pid`, split at every 4 KiB boundary so
/// that an unmapped page after a short string still lets the bytes before it through
/// (`process_vm_readv` transfers whole iovecs only). Returns the bytes read (0 on failure).
fn read_remote(pid: u32, addr: u64, buf: &mut [u8; READ_MAX]) -> usize {
    const PAGE: u64 = 4096;
    let Ok(addr) = usize::try_from(addr) else {
        return 0;
    };
    let first = (PAGE as usize - addr % PAGE as usize).min(buf.len());
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = [
        libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: first,
        },
        libc::iovec {
            iov_base: addr.wrapping_add(first) as *mut libc::c_void,
            iov_len: buf.len() - first,
        },
    ];
    let count = if first == buf.len() { 1 } else { 2 };
    // SAFETY: one local iovec over our buffer; the remote ones are only read by the kernel,
    // which checks them against the other process's mappings.
    sys(unsafe {
        syscall!(
            Sysno::process_vm_readv,
            pid as usize,
            &local as *const libc::iovec,
            1usize,
            remote.as_ptr(),
            count,
            0usize
        )
    })
    .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_single_components_are_names() {
        for good in [&b"sem.abc"[..], b"a", b"...", &[b'x'; 255]] {
            assert!(valid_name(good), "{good:?}");
        }
        for bad in [&b""[..], b".", b"..", b"a/b", b"/", b"a\0b", &[b'x'; 256]] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn names_are_read_out_of_a_process_and_anything_but_dev_shm_name_is_refused() {
        let pid = std::process::id();
        let cases: [(&[u8], Option<&[u8]>); 9] = [
            (b"/dev/shm/sem.x\0", Some(b"sem.x\0")),
            (b"/dev/shm/../x\0", None),
            (b"/dev/shm/a/b\0", None),
            (b"/dev/shm/\0", None),
            (b"/dev/shm/.\0", None),
            (b"dev/shm/x\0", None),
            (b"//dev/shm/x\0", None),
            (b"/tmp/x\0", None),
            (b"/dev/shmx\0", None),
        ];
        for (path, want) in cases {
            let mut buf = [0u8; READ_MAX];
            let got = name_in_shm(pid, path.as_ptr() as u64, &mut buf);
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(path));
        }
        let mut buf = [0u8; READ_MAX];
        assert_eq!(name_in_shm(pid, 0, &mut buf), None);
    }
}
