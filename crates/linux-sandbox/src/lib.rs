//! Linux enforcement for one program run: a Landlock ruleset and a seccomp filter, built from a
//! small [`Policy`] in the parent and applied in the child between its `clone` and `exec`.
//!
//! **Owns**: the policy type (readable, writable and executable paths, by path or by a
//! descriptor the caller validated; hidden paths, files or directories; protected paths,
//! read-only beneath writable grants; network none/all; hard links always denied;
//! spawning allowed or a single program; signal and abstract-socket scopes), its translation
//! into a Landlock ruleset at the newest ABI the kernel offers (with what is enforced reported
//! as an [`Enforcement`]), a seccomp filter (a deny-list: hard links, `ptrace`, `io_uring`,
//! mounts, namespaces, keyrings, `bpf`, sockets without network (`AF_UNIX` ones too but in a
//! new root or on Landlock ABI 9), fork without
//! spawning, set-id mode bits, xattr setters, the immutable flag, other processes' limits and
//! priorities, and ENOSYS for every number newer than it knows), the program's own world where
//! the machine allows it (private mount and IPC namespaces with a read-only view outside the
//! writable paths, protected paths bound read-only and hidden paths covered — and, beneath a
//! read-only grant, left out of Landlock's rules too (module `split`); for a shell a new root holding only the grants,
//! where unix sockets are allowed, a private `/proc` of its PID namespace, a private
//! `/dev/shm` and, where no grant beneath them would gain a right, its own `/tmp` and
//! `/var/tmp`, module `isolate`), no capabilities, applying all of it async-signal-safely, and
//! a cached availability [`probe`].
//! RUN-6, RUN-7, CMD-2, CMD-9, CMD-10, LIVE-2, RCS-2, RCS-3; docs/architecture.md,
//! "Platforms".
//!
//! **Refuses to know**: tools, arguments, which paths a tool needs (the `exec` crate decides),
//! macOS, output capture, process cleanup. It never runs anything unsandboxed: a kernel without
//! Landlock or seccomp makes [`Policy::prepare`] fail ([`SandboxError::is_unavailable`]).
//!
//! # Example
//!
//! ```no_run
//! use linux_sandbox::{Access, EnforcementStatus, Policy};
//! use std::process::Command;
//!
//! let work = tempfile_dir();
//! let sandbox = Policy::new()
//!     // Fixed system locations: descriptors cached across calls, dropped when they change.
//!     .allow_system("/usr", Access::READ | Access::EXECUTE)
//!     .allow_system("/lib64", Access::READ | Access::EXECUTE)
//!     .allow_system("/etc/ld.so.cache", Access::READ)
//!     // The user's path: opened afresh on every call.
//!     .allow(&work, Access::READ | Access::WRITE)
//!     .prepare()?;
//! let mut command = Command::new("/usr/bin/touch");
//! command.arg(work.join("inside")).arg("/etc/outside");
//! let enforcement = sandbox.install(&mut command);
//! assert_eq!(enforcement.status(), EnforcementStatus::FullyEnforced);
//! let status = command.status()?; // touch fails on /etc/outside
//! assert!(!status.success());
//! assert!(work.join("inside").exists());
//! # fn tempfile_dir() -> std::path::PathBuf { std::env::temp_dir() }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Landlock and `execve`
//!
//! Landlock checks `EXECUTE` *and* `READ_FILE` when the kernel opens a file to execute it, and
//! the kernel opens the ELF interpreter (`ld-linux`) and a `#!` interpreter the same way; shared
//! libraries are opened and `mmap`ed by `ld.so` and need only `READ_FILE`. So an
//! [`Access::EXECUTE`] grant on a file also grants read, and `prepare` adds its interpreter
//! chain with read and execute. Paths are opened with `O_PATH` following symbolic links, so an
//! alternatives link like `/usr/bin/awk` grants on its target (`/usr/bin/mawk`). The ELF
//! headers behind that are read by the workspace's one ELF reader, [`elf_load`] (the `object`
//! crate, bounded reads of a regular file opened non-blocking), which also gives `exec` the
//! `DT_NEEDED` names of the loader files it grants a single program.
//!
//! # Enforcement report
//!
//! [`Policy::prepare`] computes the [`Enforcement`] in the parent: the ruleset is built for
//! exactly the rights of the ABI in use (a hard requirement in the landlock crate's terms), and
//! `landlock_restrict_self` is all-or-nothing, so a child that reaches `exec` runs under exactly
//! that report. [`PreparedSandbox::install`] returns it.
#![deny(missing_docs)]

mod error;
mod explain;
mod interp;
mod isolate;
mod policy;
mod probe;
mod sandbox;
mod seccomp;
mod split;
mod stage;
mod syscache;
pub mod watch;

pub use error::{ApplyError, ApplyStage, SandboxError};
pub use explain::{Denial, Explainer, Explanation};
pub use interp::{ElfClass, ElfError, ElfLoad, elf_load};
pub use policy::{Access, Launch, Network, Policy, Scopes, SystemFile};
pub use probe::{Availability, LANDLOCK_ABI_MAX_VAR, LandlockSupport, probe};
pub use sandbox::{Enforcement, EnforcementStatus, Gaps, PreparedSandbox};
pub use stage::{StageOutcome, Staging};

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync_static<T: Send + Sync + 'static>() {}

    #[test]
    fn prepared_sandbox_can_move_into_a_supervisor_hook() {
        assert_send_sync_static::<PreparedSandbox>();
        assert_send_sync_static::<Enforcement>();
        assert_send_sync_static::<SandboxError>();
    }

    #[test]
    fn relative_path_is_refused_before_anything_opens() {
        let err = Policy::new()
            .allow("usr", Access::READ)
            .prepare()
            .unwrap_err();
        if err.is_unavailable() {
            eprintln!("skipped: {err}");
            return;
        }
        assert!(matches!(err, SandboxError::RelativePath { .. }), "{err}");
    }

    #[test]
    fn missing_required_path_is_an_error_and_missing_optional_path_is_skipped() {
        if !testkit::sandbox_available() {
            return;
        }
        let err = Policy::new()
            .allow("/nonexistent/agent-exec", Access::READ)
            .prepare()
            .unwrap_err();
        assert!(matches!(err, SandboxError::MissingPath { .. }), "{err}");
        assert!(err.to_string().contains("allow_if_exists"));
        Policy::new()
            .allow_if_exists("/nonexistent/agent-exec", Access::READ)
            .prepare()
            .unwrap();
    }

    #[test]
    fn a_protected_path_that_resolves_elsewhere_than_it_was_found_refuses_the_policy() {
        use std::os::unix::fs::MetadataExt;
        if !testkit::sandbox_available() {
            eprintln!("skipped: no sandbox on this machine");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        // Found at b/sub; then b was moved away and a link put in its place.
        std::fs::create_dir_all(root.join("b.old/sub")).unwrap();
        std::fs::create_dir_all(root.join("elsewhere/sub")).unwrap();
        std::os::unix::fs::symlink(root.join("elsewhere"), root.join("b")).unwrap();
        let found = std::fs::metadata(root.join("b.old/sub")).unwrap();
        let there = std::fs::metadata(root.join("elsewhere/sub")).unwrap();
        let policy = |(dev, ino): (u64, u64)| {
            Policy::new()
                .allow(&root, Access::READ | Access::WRITE)
                .protect(root.join("b/sub"))
                .found_at(root.join("b/sub"), dev, ino)
        };
        let err = policy((found.dev(), found.ino())).prepare().unwrap_err();
        assert!(matches!(err, SandboxError::Moved { .. }), "{err}");
        assert!(err.to_string().contains("run the command again"), "{err}");
        // The same path found as what it resolves to now is no refusal of this kind.
        if let Err(err) = policy((there.dev(), there.ino())).prepare() {
            assert!(!matches!(err, SandboxError::Moved { .. }), "{err}");
        }
    }

    #[test]
    fn single_program_policy_refuses_other_executables() {
        if !testkit::sandbox_available() {
            return;
        }
        let err = Policy::single_program("/bin/sh")
            .allow("/usr/bin", Access::READ | Access::EXECUTE)
            .prepare()
            .unwrap_err();
        assert!(
            matches!(err, SandboxError::ExecuteOutsideProgram { .. }),
            "{err}"
        );
        let err = Policy::single_program("/usr/bin").prepare().unwrap_err();
        assert!(matches!(err, SandboxError::ProgramNotFile { .. }), "{err}");
    }

    #[test]
    fn abi_limit_zero_is_unavailable_not_a_silent_run() {
        let err = Policy::new().limit_landlock_abi(0).prepare().unwrap_err();
        assert!(err.is_unavailable(), "{err}");
    }

    #[test]
    fn older_abis_report_their_gaps() {
        if !testkit::sandbox_available() {
            return;
        }
        let Some(kernel) = probe().landlock_abi() else {
            unreachable!("sandbox_available checked Landlock");
        };
        let cases = [
            (1, Gaps::TRUNCATE | Gaps::DEVICE_IOCTL | Gaps::SIGNAL_SCOPE),
            (3, Gaps::DEVICE_IOCTL | Gaps::SIGNAL_SCOPE),
            (5, Gaps::SIGNAL_SCOPE),
            (6, Gaps::empty()),
        ];
        for (abi, expected) in cases {
            if abi > kernel {
                eprintln!("skipped ABI {abi}: kernel has {kernel}");
                continue;
            }
            let enforcement = Policy::new()
                .limit_landlock_abi(abi)
                .prepare()
                .unwrap()
                .enforcement();
            assert_eq!(enforcement.landlock_abi(), abi);
            assert_eq!(enforcement.gaps(), expected, "ABI {abi}");
        }
        let enforcement = Policy::new()
            .network(Network::All)
            .limit_landlock_abi(5)
            .prepare()
            .unwrap()
            .enforcement();
        // Below ABI 6 no unix socket is made even with the network: no abstract-socket gap.
        assert!(
            !enforcement
                .gaps()
                .contains(Gaps::ABSTRACT_UNIX_SOCKET_SCOPE)
        );
        assert!(!enforcement.unix_sockets(), "{enforcement}");
        assert_eq!(enforcement.status(), EnforcementStatus::PartiallyEnforced);
        assert!(enforcement.to_string().contains("SIGNAL_SCOPE"));
    }

    #[test]
    fn probe_display_names_every_layer() {
        let text = probe().to_string();
        for word in ["landlock:", "seccomp:", "user namespaces:", "sandbox:"] {
            assert!(text.contains(word), "{text}");
        }
    }
}
