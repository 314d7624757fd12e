//! The availability probe: what this kernel offers the sandbox (Landlock ABI, seccomp filters,
//! user namespaces), asked once per process and cached. `agent-exec doctor` prints its
//! `Display`.

use std::fmt;
use std::sync::OnceLock;

/// The newest Landlock ABI this crate knows how to use (the `landlock` crate's `ABI::V10`).
/// A newer kernel is used at this level.
pub(crate) const NEWEST_KNOWN_ABI: u8 = 10;

/// Landlock support on the running kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LandlockSupport {
    /// Landlock works; `abi` is the kernel's ABI version (may exceed what this crate uses).
    Available {
        /// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`.
        abi: u32,
    },
    /// Built into the kernel but not enabled at boot (`EOPNOTSUPP`).
    NotEnabled,
    /// Not built into the kernel, or blocked by an outer seccomp filter (`ENOSYS` or other).
    NotImplemented,
}

/// What the running kernel offers, as seen by this process. Get it from [`probe`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Availability {
    landlock: LandlockSupport,
    seccomp: Result<(), i32>,
    user_namespaces: Result<(), i32>,
    namespaces: Result<(), i32>,
    proc: Result<(), i32>,
}

impl Availability {
    /// Landlock support.
    pub fn landlock(&self) -> LandlockSupport {
        self.landlock
    }

    /// The Landlock ABI this crate will use: the kernel's, capped at the newest it knows;
    /// `None` when Landlock is unavailable.
    pub fn landlock_abi(&self) -> Option<u8> {
        match self.landlock {
            LandlockSupport::Available { abi } if abi > 0 => {
                Some(u8::try_from(abi).unwrap_or(u8::MAX).min(NEWEST_KNOWN_ABI))
            }
            _ => None,
        }
    }

    /// Whether seccomp filter mode works (`SECCOMP_GET_ACTION_AVAIL` for `SECCOMP_RET_ERRNO`).
    pub fn seccomp(&self) -> bool {
        self.seccomp.is_ok()
    }

    /// Whether this process can create a user namespace (tried in a forked child), which the
    /// process supervisor uses for a PID namespace. Not needed by this crate's sandbox.
    pub fn user_namespaces(&self) -> bool {
        self.user_namespaces.is_ok()
    }

    /// Whether a child of this process can make the private mount and IPC namespaces of the
    /// sandbox (directly as root, inside a user namespace of its own otherwise; tried once in
    /// a forked child). Without them the [`Enforcement`](crate::Enforcement) report names
    /// what is missing.
    pub fn private_namespaces(&self) -> bool {
        self.namespaces.is_ok()
    }

    /// Whether a child in a PID namespace of its own (proctree's supervisor mode) can mount a
    /// fresh `proc` there (tried once in a forked child): then a shell's private view gets its
    /// own `/proc` (issue 16, LIVE-2).
    pub fn private_proc(&self) -> bool {
        self.proc.is_ok()
    }

    /// Whether a program started as `launch` says gets private namespaces: the kernel allows
    /// them and its process may make them (as root, or inside its own user namespace). The
    /// one rule [`Policy::prepare`](crate::Policy::prepare) applies.
    pub fn private_namespaces_for(&self, launch: crate::Launch) -> bool {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        self.private_namespaces() && (root || launch.own_user_namespace)
    }

    /// Why a program started as `launch` says gets no private namespaces, in words; `None`
    /// when it gets them.
    pub(crate) fn why_no_private_namespaces(&self, launch: crate::Launch) -> Option<String> {
        match self.namespaces {
            Err(errno) => Some(format!("the kernel refused them: {}", errno_text(errno))),
            Ok(()) if !self.private_namespaces_for(launch) => Some(
                "the program's process has no user namespace of its own and the host is not root"
                    .to_owned(),
            ),
            Ok(()) => None,
        }
    }

    /// Whether [`Policy::prepare`](crate::Policy::prepare) can succeed on this kernel.
    pub fn can_sandbox(&self) -> bool {
        self.landlock_abi().is_some() && self.seccomp()
    }
}

fn errno_text(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno).to_string()
}

impl fmt::Display for Availability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.landlock {
            LandlockSupport::Available { abi } => {
                let used = self.landlock_abi().unwrap_or(0);
                write!(f, "landlock: available, ABI {abi}")?;
                if u32::from(used) != abi {
                    write!(f, " (used as ABI {used})")?;
                }
                let mut features = vec!["filesystem"];
                if used >= 4 {
                    features.push("tcp");
                }
                if used >= 6 {
                    features.push("signal and abstract-socket scopes");
                }
                if used >= 9 {
                    features.push("pathname unix sockets");
                }
                if used >= 10 {
                    features.push("udp");
                }
                writeln!(f, ": {}", features.join(", "))?;
            }
            LandlockSupport::NotEnabled => writeln!(
                f,
                "landlock: built in but not enabled (add landlock to the lsm= boot parameter)"
            )?,
            LandlockSupport::NotImplemented => writeln!(
                f,
                "landlock: not available (needs Linux 5.13+ with Landlock)"
            )?,
        }
        match self.seccomp {
            Ok(()) => writeln!(f, "seccomp: filter mode available")?,
            Err(errno) => writeln!(f, "seccomp: not available ({})", errno_text(errno))?,
        }
        match self.user_namespaces {
            Ok(()) => writeln!(f, "user namespaces: available")?,
            Err(errno) => writeln!(f, "user namespaces: not available ({})", errno_text(errno))?,
        }
        match self.namespaces {
            Ok(()) => writeln!(
                f,
                "private namespaces: available (read-only view outside the writable paths, \
                 private IPC, hidden state directory)"
            )?,
            Err(errno) => writeln!(
                f,
                "private namespaces: not available ({}); metadata of files outside the \
                 writable paths is not protected, host IPC is refused by seccomp",
                errno_text(errno)
            )?,
        }
        match self.proc {
            Ok(()) => writeln!(
                f,
                "private /proc: available in a PID namespace (only the command's processes)"
            )?,
            Err(errno) => writeln!(
                f,
                "private /proc: not available ({}); the host's /proc stays denied but for \
                 meminfo, cpuinfo and stat",
                errno_text(errno)
            )?,
        }
        if self.can_sandbox() {
            write!(f, "sandbox: enforced")
        } else {
            write!(
                f,
                "sandbox: UNAVAILABLE (commands are refused with AGENT_EXEC_SANDBOX_UNAVAILABLE)"
            )
        }
    }
}

/// Probes the kernel once per process and returns the cached answer.
///
/// ```
/// let availability = linux_sandbox::probe();
/// println!("{availability}");
/// ```
pub fn probe() -> &'static Availability {
    static CACHE: OnceLock<Availability> = OnceLock::new();
    CACHE.get_or_init(|| {
        // The `/proc` probe makes the namespaces first, in the same way: where it succeeds the
        // namespaces probe would too, and one throwaway child fewer is forked (each costs this
        // whole process's page tables).
        let proc = crate::isolate::probe_private_proc();
        let namespaces = match proc {
            Ok(()) => Ok(()),
            Err(_) => crate::isolate::probe_namespaces(),
        };
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        // Not root, those probes began with `unshare(CLONE_NEWUSER)` and its id maps.
        let user_namespaces = match namespaces {
            Ok(()) if !root => Ok(()),
            _ => probe_user_namespaces(),
        };
        Availability {
            landlock: probe_landlock(),
            seccomp: probe_seccomp(),
            user_namespaces,
            namespaces,
            proc,
        }
    })
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn probe_landlock() -> LandlockSupport {
    // SAFETY: with a NULL attribute pointer, size 0 and the VERSION flag the kernel only returns
    // the ABI number; no memory is read or written.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if ret >= 0 {
        LandlockSupport::Available {
            abi: u32::try_from(ret).unwrap_or(0),
        }
    } else if last_errno() == libc::EOPNOTSUPP {
        LandlockSupport::NotEnabled
    } else {
        LandlockSupport::NotImplemented
    }
}

/// `LANDLOCK_CREATE_RULESET_VERSION` from `<linux/landlock.h>`.
const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
/// `SECCOMP_GET_ACTION_AVAIL` from `<linux/seccomp.h>` (Linux 4.14).
const SECCOMP_GET_ACTION_AVAIL: u32 = 2;

fn probe_seccomp() -> Result<(), i32> {
    let action: u32 = libc::SECCOMP_RET_ERRNO;
    // SAFETY: the kernel reads one u32 from a valid pointer to a local.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0u32,
            &action as *const u32,
        )
    };
    if ret == 0 { Ok(()) } else { Err(last_errno()) }
}

fn probe_user_namespaces() -> Result<(), i32> {
    // `unshare(CLONE_NEWUSER)` fails in a multi-threaded process, and would change this one, so
    // try it in a forked child that only makes raw syscalls (async-signal-safe) and exits.
    // SAFETY: fork has no memory-safety preconditions; the child below only calls
    // async-signal-safe functions (unshare, _exit) before exiting.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(last_errno());
    }
    if pid == 0 {
        // Child: async-signal-safe code only.
        // SAFETY: raw syscalls on no memory; _exit never returns.
        unsafe {
            let code = if libc::unshare(libc::CLONE_NEWUSER) == 0 {
                0
            } else {
                // errno fits in an exit status (all values are < 256 on Linux).
                *libc::__errno_location()
            };
            libc::_exit(code & 0xff);
        }
    }
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child; `status` is a valid out-pointer.
        let ret = unsafe { libc::waitpid(pid, &mut status, 0) };
        if ret == pid {
            break;
        }
        if last_errno() != libc::EINTR {
            return Err(last_errno());
        }
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else if libc::WIFEXITED(status) {
        Err(libc::WEXITSTATUS(status))
    } else {
        Err(libc::ECHILD)
    }
}
