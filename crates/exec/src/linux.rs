//! The Linux backend: a [`SandboxSpec`] becomes a `linux_sandbox::Policy` (Landlock + seccomp).
//!
//! This module owns the system locations a Linux program needs to start. For a single program
//! (`run`) they are exactly the files its loader opens, read from its ELF headers
//! ([`libdeps`](crate::libdeps)), plus `/etc/ld.so.cache`; for a shell (`command`) they are the
//! system's program and library directories and a short list of `/etc` files — not all of
//! `/usr`, not all of `/etc` (CMD-10).

use std::path::Path;
use std::sync::Arc;

use linux_sandbox::{Access as LlAccess, Launch, Network as LlNetwork, Policy};

use crate::spec::{Access, Network, Program, SandboxSpec};

/// Program and library directories a shell command may read and execute (CMD-10).
const SHELL_EXEC_DIRS: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr/bin",
    "/usr/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/lib",
    "/lib64",
    "/lib32",
    "/usr/lib",
    "/usr/lib64",
    "/usr/lib32",
    "/usr/libexec",
    "/usr/local/lib",
    // Helpers a program in /usr/local/bin runs (a locally built git's `git-core`), issue 16.
    "/usr/local/libexec",
];

/// Read-only data shell commands commonly need: shared data (locales, terminfo, zoneinfo) and
/// the `/etc` files that libc, the loader and TLS clients read. Not `/etc` as a whole: it holds
/// `shadow`, `sudoers` and system services' credentials. Not `/proc/self`: Landlock binds a rule
/// to the inode when it is made, in the parent, so it would expose the *host's* `/proc/<pid>`.
const SHELL_READ: &[&str] = &[
    "/usr/share",
    "/usr/local/share",
    // C and C++ headers: without them no compiler works (issue 16).
    "/usr/include",
    "/usr/local/include",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ssl/certs",
    // OpenSSL's configuration (node exits 13 without it, issue 16); not `/etc/ssl/private`.
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
    "/etc/alternatives",
    "/etc/mime.types",
    "/etc/gitconfig",
    "/etc/inputrc",
    "/etc/python3",
    "/etc/python3.11",
    "/dev/urandom",
    "/dev/random",
    "/proc/meminfo",
    "/proc/cpuinfo",
    "/proc/stat",
    "/sys/devices/system/cpu",
];

/// Devices a shell command may read and write. Not `/dev/tty`: a command has no business
/// writing into the user's terminal.
const SHELL_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Why a spec could not become a policy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The files the program's loader needs could not be determined.
    #[error("cannot prepare the sandbox for {program}: {source}")]
    Loader {
        /// The program.
        program: std::path::PathBuf,
        /// What went wrong.
        #[source]
        source: crate::libdeps::LibDepsError,
    },
}

/// The Landlock + seccomp policy for `spec`.
pub fn policy(spec: &SandboxSpec) -> Result<Policy, BackendError> {
    let mut policy = match &spec.program {
        Program::Single(program) => single_program(program)?,
        Program::Shell => {
            let mut p = Policy::new();
            // System locations, not user paths: their descriptors are cached by the sandbox
            // crate until something changes what they name (issue 4's spawn cost).
            for dir in SHELL_EXEC_DIRS {
                p = p.allow_system(*dir, LlAccess::READ | LlAccess::EXECUTE);
            }
            for path in SHELL_READ {
                p = p.allow_system(*path, LlAccess::READ);
            }
            for dev in SHELL_DEVICES {
                p = p.allow_system(*dev, LlAccess::READ | LlAccess::WRITE);
            }
            p
        }
    };
    for grant in &spec.grants {
        let access = match grant.access {
            // A read-only grant (an approved extra path) runs what it holds: `~/.cargo` runs
            // `cargo` (issue 16). Read-write roots stay non-executable, as before.
            Access::Read => LlAccess::READ | LlAccess::EXECUTE,
            Access::ReadWrite => LlAccess::READ | LlAccess::WRITE,
        };
        // The descriptor opened at validation, never the path (issue 14).
        policy = policy.allow_fd(grant.path.clone(), Arc::clone(&grant.fd), access);
    }
    for path in &spec.hidden {
        policy = policy.hide(path.clone());
    }
    // Where proctree's supervisor will start the command: inside its own user namespace (a host
    // that is not root), as PID 2 of a PID namespace whose PID 1 is the supervisor.
    Ok(policy.launch(launch()).network(match spec.network {
        Network::None => LlNetwork::None,
        Network::All => LlNetwork::All,
    }))
}

/// Where proctree's supervisor starts a command in its default mode, as the sandbox needs to
/// know it (the doctor report uses the same answer).
pub fn launch() -> Launch {
    Launch {
        own_user_namespace: proctree::user_namespace_in_use(),
        own_pid_namespace: proctree::pid_namespace_available(),
    }
}

/// One program, its loader's files read-only (the sandbox crate adds the ELF interpreter with
/// execute), `/etc/ld.so.cache`, and nothing else (RUN-7).
fn single_program(program: &Path) -> Result<Policy, BackendError> {
    let loader =
        crate::libdeps::loader_files_cached(program).map_err(|source| BackendError::Loader {
            program: program.to_path_buf(),
            source,
        })?;
    let mut p = Policy::single_program(program);
    for file in loader.iter() {
        p = p.allow(file.clone(), LlAccess::READ);
    }
    Ok(p.allow_system("/etc/ld.so.cache", LlAccess::READ))
}
