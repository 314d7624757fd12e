//! The availability probe: what this kernel offers the sandbox (Landlock ABI, seccomp filters,
//! user namespaces), asked once per process and cached. `agent-exec doctor` prints its
//! `Display`.
//!
//! The host (never the agent: it is this process's environment) may lower the Landlock ABI
//! the sandbox uses with [`LANDLOCK_ABI_MAX_VAR`], so the code paths for older kernels run on
//! a new one (`cargo xtask matrix`). The cap only lowers: a value above the kernel's ABI is the
//! kernel's. A malformed value is not ignored: the probe reports it and every
//! [`Policy::prepare`](crate::Policy::prepare) fails with an unavailable error naming the
//! variable and the values it takes.

use std::fmt;
use std::sync::OnceLock;

/// The newest Landlock ABI this crate knows how to use (the `landlock` crate's `ABI::V10`).
/// A newer kernel is used at this level.
pub(crate) const NEWEST_KNOWN_ABI: u8 = 10;

/// The environment variable that caps the Landlock ABI the sandbox uses: a decimal number from
/// 1 (`1`…`255`, no sign or spaces); the ABI used is the smallest of it, the kernel's and
/// the newest this crate knows. Unset means no cap; anything else (empty, `0`, `v3`, ` 3`)
/// makes every call fail with [`SandboxError::LandlockAbiCap`](crate::SandboxError).
pub const LANDLOCK_ABI_MAX_VAR: &str = "AGENT_EXEC_LANDLOCK_ABI_MAX";

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
    net: Result<(), i32>,
    abi_cap: Result<Option<u8>, String>,
}

impl Availability {
    /// Landlock support.
    pub fn landlock(&self) -> LandlockSupport {
        self.landlock
    }

    /// The Landlock ABI this crate will use: the kernel's, capped at the newest it knows and
    /// at [`LANDLOCK_ABI_MAX_VAR`]; `None` when Landlock is unavailable or that variable is
    /// malformed ([`landlock_abi_cap`](Self::landlock_abi_cap) says why).
    pub fn landlock_abi(&self) -> Option<u8> {
        let cap = self.abi_cap.as_ref().ok()?.unwrap_or(u8::MAX);
        match self.landlock {
            LandlockSupport::Available { abi } if abi > 0 => Some(
                u8::try_from(abi)
                    .unwrap_or(u8::MAX)
                    .min(NEWEST_KNOWN_ABI)
                    .min(cap),
            ),
            _ => None,
        }
    }

    /// The host's cap on the Landlock ABI ([`LANDLOCK_ABI_MAX_VAR`]): `Ok(None)` when unset,
    /// `Err` with what is wrong and what to set instead when malformed.
    pub fn landlock_abi_cap(&self) -> Result<Option<u8>, &str> {
        self.abi_cap.as_ref().copied().map_err(String::as_str)
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
    /// own `/proc` (LIVE-2).
    pub fn private_proc(&self) -> bool {
        self.proc.is_ok()
    }

    /// Whether a child in its own user namespace (or as root) can make a network namespace
    /// and bring its `lo` up (tried once in a forked child): then a shell without network
    /// gets its own loopback (NET-1); otherwise inet sockets stay refused.
    pub fn private_network(&self) -> bool {
        self.net.is_ok()
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

    /// Why a policy that may start programs of its own choosing (a shell: `command`,
    /// `run_command`) is refused for a program started as `launch` says, in words naming what
    /// is missing and what would give it; `None` where it runs. The escape suite proves both
    /// holes at `cargo xtask matrix`'s weakest level (no user namespaces, not root), and no
    /// other layer closes them without breaking ordinary work, so the call is refused
    /// (`AGENT_EXEC_SANDBOX_UNAVAILABLE`) instead of running weaker:
    ///
    /// - no private mount namespace: the mode, owner, times and extended attributes of the
    ///   user's own files outside the writable paths could be changed (Landlock does not
    ///   govern metadata, and refusing `chmod`/`utimensat` everywhere would break `touch`,
    ///   `cp -p`, `tar`, `ld`, `pip`);
    /// - Landlock below ABI 6 and no PID namespace: nothing keeps `kill` from reaching the
    ///   user's other processes (seccomp cannot tell the command's own PIDs from others).
    ///
    /// A single program (`run`) keeps running there with the gaps reported: it is the host's
    /// fixed choice (`awk`, `wc`, `sort`, `diff` make none of those calls).
    /// [`Policy::prepare`](crate::Policy::prepare) applies exactly this rule.
    pub fn shell_refusal(&self, launch: crate::Launch) -> Option<String> {
        if let Some(why) = self.why_no_private_namespaces(launch) {
            return Some(format!(
                "a shell needs a private mount namespace here, to keep the files outside its \
                 writable paths read-only (Landlock does not govern chmod, chown, utimes or \
                 xattrs), and there is none ({why}); allow user namespaces for this user \
                 (user.max_user_namespaces > 0, or the distribution's unprivileged-userns \
                 switch) or run the host as root"
            ));
        }
        let abi = self.landlock_abi().unwrap_or(0);
        if abi < 6 && !launch.own_pid_namespace {
            return Some(format!(
                "a shell needs Landlock ABI 6 (Linux 6.12) or a PID namespace of its own here, \
                 to keep its signals from the user's other processes, and this machine has \
                 Landlock ABI {abi} and no PID namespace for it; use a newer kernel, or allow \
                 user namespaces for this user"
            ));
        }
        None
    }

    /// Lowers the ABI as the host's cap would (a policy's own `limit_landlock_abi`).
    pub(crate) fn limit_abi(&mut self, abi: u8) {
        let cap = self.abi_cap.clone().ok().flatten().unwrap_or(u8::MAX);
        self.abi_cap = Ok(Some(cap.min(abi)));
    }

    /// Whether [`Policy::prepare`](crate::Policy::prepare) can succeed on this kernel.
    pub fn can_sandbox(&self) -> bool {
        self.landlock_abi().is_some() && self.seccomp()
    }
}

fn errno_text(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno).to_string()
}

impl Availability {
    /// The probe's report after its Landlock line.
    fn fmt_after_landlock(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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
                "private namespaces: not available ({}); shells are refused (metadata of \
                 files outside the writable paths could change), a single program runs with \
                 host IPC refused by seccomp",
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
        match self.net {
            Ok(()) => writeln!(
                f,
                "private network: available (a shell without network gets its own loopback, \
                 127.0.0.1 and ::1, and nothing of the host's network)"
            )?,
            Err(errno) => writeln!(
                f,
                "private network: not available ({}); a shell without network gets no \
                 loopback (inet sockets refused)",
                errno_text(errno)
            )?,
        }
        if let Err(why) = &self.abi_cap {
            write!(
                f,
                "sandbox: UNAVAILABLE (commands are refused with AGENT_EXEC_SANDBOX_UNAVAILABLE: {why})"
            )
        } else if self.can_sandbox() {
            write!(f, "sandbox: enforced")
        } else {
            write!(
                f,
                "sandbox: UNAVAILABLE (commands are refused with AGENT_EXEC_SANDBOX_UNAVAILABLE)"
            )
        }
    }
}

impl fmt::Display for Availability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.landlock {
            LandlockSupport::Available { abi } => {
                let used = self.landlock_abi().unwrap_or(0);
                write!(f, "landlock: available, ABI {abi}")?;
                match &self.abi_cap {
                    Ok(Some(cap)) => write!(
                        f,
                        " (used as ABI {used}: {LANDLOCK_ABI_MAX_VAR}={cap} caps it)"
                    )?,
                    Ok(None) if u32::from(used) != abi => write!(f, " (used as ABI {used})")?,
                    Ok(None) => {}
                    Err(why) => {
                        writeln!(f, " (not used: {why})")?;
                        return self.fmt_after_landlock(f);
                    }
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
        self.fmt_after_landlock(f)
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
        let (proc, net) = crate::isolate::probe_private_proc_and_network();
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
            net,
            abi_cap: abi_cap(std::env::var_os(LANDLOCK_ABI_MAX_VAR).as_deref()),
        }
    })
}

/// The cap [`LANDLOCK_ABI_MAX_VAR`] sets, read from its value (`None`: unset).
fn abi_cap(value: Option<&std::ffi::OsStr>) -> Result<Option<u8>, String> {
    let Some(value) = value else {
        return Ok(None);
    };
    let parsed = value
        .to_str()
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<u8>().ok())
        .filter(|&abi| abi >= 1);
    match parsed {
        Some(abi) => Ok(Some(abi)),
        None => Err(format!(
            "{LANDLOCK_ABI_MAX_VAR}={value:?} is not a Landlock ABI; set it to a number from 1 \
             to 255 (the ABI used is the smaller of it and the kernel's), or unset it to use \
             the kernel's"
        )),
    }
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
    // try it in a child that shares this process's memory (no fork: see `ProbeStack`) and only
    // makes the one raw system call.
    crate::isolate::ProbeStack::new()?.run(&|| {
        // SAFETY: plain flags, no memory.
        match unsafe { syscalls::syscall!(syscalls::Sysno::unshare, libc::CLONE_NEWUSER) } {
            Ok(_) => Ok(()),
            Err(errno) => Err(errno.into_raw()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn the_abi_cap_is_a_number_from_one_and_unset_means_none() {
        assert_eq!(abi_cap(None), Ok(None));
        for (value, cap) in [("1", 1), ("3", 3), ("07", 7), ("255", 255)] {
            assert_eq!(abi_cap(Some(OsStr::new(value))), Ok(Some(cap)), "{value}");
        }
    }

    #[test]
    fn a_malformed_abi_cap_is_refused_with_the_variable_and_the_valid_values() {
        for value in [
            "",
            "0",
            "-1",
            "+3",
            " 3",
            "3 ",
            "v3",
            "3.0",
            "256",
            "99999999999",
        ] {
            let err = abi_cap(Some(OsStr::new(value))).unwrap_err();
            assert!(
                err.starts_with(&format!("{LANDLOCK_ABI_MAX_VAR}={value:?}")),
                "{err}"
            );
            assert!(err.contains("a number from 1 to 255"), "{err}");
        }
    }

    fn kernel(abi: u32, namespaces: Result<(), i32>) -> Availability {
        Availability {
            landlock: LandlockSupport::Available { abi },
            seccomp: Ok(()),
            user_namespaces: namespaces,
            namespaces,
            proc: namespaces,
            net: namespaces,
            abi_cap: Ok(None),
        }
    }

    const IN_OWN_NAMESPACES: crate::Launch = crate::Launch {
        own_user_namespace: true,
        own_pid_namespace: true,
    };

    #[test]
    fn a_shell_without_a_private_mount_namespace_is_refused_naming_it() {
        let none = kernel(7, Err(libc::ENOSPC));
        let why = none.shell_refusal(crate::Launch::default()).unwrap();
        assert!(why.contains("private mount namespace"), "{why}");
        assert!(why.contains("No space left on device"), "{why}");
    }

    #[test]
    fn a_shell_below_abi_6_without_a_pid_namespace_is_refused_and_with_one_runs() {
        let mut old = kernel(7, Ok(()));
        old.limit_abi(5);
        assert_eq!(old.shell_refusal(IN_OWN_NAMESPACES), None);
        let no_pid_ns = crate::Launch {
            own_pid_namespace: false,
            ..IN_OWN_NAMESPACES
        };
        let why = old.shell_refusal(no_pid_ns).unwrap();
        assert!(
            why.contains("Landlock ABI 6") && why.contains("ABI 5"),
            "{why}"
        );
        assert_eq!(kernel(6, Ok(())).shell_refusal(no_pid_ns), None);
    }

    #[test]
    fn the_cap_only_lowers_the_kernels_abi() {
        let with = |abi, cap: Result<Option<u8>, String>| Availability {
            landlock: LandlockSupport::Available { abi },
            seccomp: Ok(()),
            user_namespaces: Ok(()),
            namespaces: Ok(()),
            proc: Ok(()),
            net: Ok(()),
            abi_cap: cap,
        };
        assert_eq!(with(7, Ok(Some(3))).landlock_abi(), Some(3));
        assert_eq!(with(7, Ok(Some(200))).landlock_abi(), Some(7));
        assert_eq!(with(7, Ok(None)).landlock_abi(), Some(7));
        let malformed = with(7, Err("bad".to_owned()));
        assert_eq!(malformed.landlock_abi(), None);
        assert!(!malformed.can_sandbox());
        assert!(malformed.to_string().contains("UNAVAILABLE"), "{malformed}");
        let capped = with(7, Ok(Some(3))).to_string();
        assert!(capped.contains("AGENT_EXEC_LANDLOCK_ABI_MAX=3"), "{capped}");
    }
}
