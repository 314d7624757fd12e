//! The Linux backend: a [`SandboxSpec`] becomes a `linux_sandbox::Policy` (Landlock + seccomp).
//!
//! This module owns the system locations a Linux program needs to start. For a single program
//! (`run`) they are exactly the files its loader opens, read from its ELF headers
//! (module `libdeps`), plus `/etc/ld.so.cache` (RUN-7); for a shell (`command`) they
//! are the system runtime set of [`sysset`](crate::sysset) — program, library, header and data
//! trees and the world-readable part of `/etc`, by rule (CMD-10, LIVE-1) — plus the kernel facts
//! and devices below. Devices: `/dev/null`, `/dev/zero`, `/dev/full` read + write,
//! `/dev/random`, `/dev/urandom` read. Not `/dev/tty`: the command runs in a session of its own
//! without a controlling terminal, so it has none to open (and would reach the user's terminal
//! if it had). Not `/dev/ptmx` and `/dev/pts`: Landlock can only grant the host's devpts as a
//! whole, which holds every pseudo-terminal of the host (typing into the user's shell through
//! `/dev/pts/N`); where the command's view is a new root, `linux_sandbox` mounts a private
//! devpts there instead (its own terminals only; `/dev/ptmx` leads into it).
//!
//! A shell's writable roots are also executable (programs built in the workspace run); `run`'s
//! are not.

use std::path::Path;
use std::sync::Arc;

use linux_sandbox::{Access as LlAccess, Launch, Network as LlNetwork, Policy};

use crate::spec::{Access, Network, Program, SandboxSpec};

/// Kernel facts a shell command may read (CPU count and memory size for build tools' `-j`,
/// runtimes' heap sizing). Not `/proc/self`: Landlock binds a rule to the inode when it is made,
/// in the parent, so it would expose the *host's* `/proc/<pid>`.
pub const SHELL_KERNEL_FACTS: &[&str] = &[
    "/proc/meminfo",
    "/proc/cpuinfo",
    "/proc/stat",
    "/sys/devices/system/cpu",
];

/// Devices a shell command may read and write: the sinks and sources every shell script uses.
pub const SHELL_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Devices a shell command may only read: the kernel's random sources.
pub const SHELL_RANDOM: &[&str] = &["/dev/random", "/dev/urandom"];

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
    let mut unix_sockets = spec.unix_sockets;
    let mut policy = match &spec.program {
        Program::Single(program) => single_program(program)?,
        Program::Shell => {
            let set = crate::sysset::current();
            // The view binds `/etc` whole: a socket anywhere in it would be reachable.
            unix_sockets &= set.etc.sockets.is_empty();
            // Where a shell could change outside metadata or signal outside: refused.
            let mut p = Policy::new().refuse_uncontained_shell();
            // System locations, not user paths: their descriptors are cached by the sandbox
            // crate until something changes what they name (the spawn cost).
            for tree in &set.trees {
                let access = if tree.execute {
                    LlAccess::READ | LlAccess::EXECUTE
                } else {
                    LlAccess::READ
                };
                p = p.allow_system(tree.path.clone(), access);
            }
            // On the descriptors the walk judged, never the paths again (else a
            // secret renamed onto a judged name in between would be granted).
            for (entry, file) in set.etc.allowed.iter().zip(&set.etc.files) {
                p = p.allow_system_file(entry.clone(), file, LlAccess::READ);
            }
            for path in SHELL_KERNEL_FACTS.iter().chain(SHELL_RANDOM) {
                p = p.allow_system(*path, LlAccess::READ);
            }
            for dev in SHELL_DEVICES {
                p = p.allow_system(*dev, LlAccess::READ | LlAccess::WRITE);
            }
            if spec.network == Network::All {
                p = with_resolver(p);
            }
            p
        }
    };
    let shell = matches!(spec.program, Program::Shell);
    for grant in &spec.grants {
        let access = match grant.access {
            // A read-only grant (an approved extra path) runs what it holds: `~/.cargo` runs
            // `cargo`.
            Access::Read => LlAccess::READ | LlAccess::EXECUTE,
            // A shell's writable roots (the workspace, the call's temp dir, writable extra
            // paths) run what is built there: `./m`, `make test`, `go test`'s binaries in
            // TMPDIR. This adds no power: the shell already runs any interpreter on any file it
            // may write, and an executed program is confined by the same kernel rules as the
            // shell. `run`'s one program stays the only executable (RUN-7).
            Access::ReadWrite if shell => LlAccess::READ | LlAccess::WRITE | LlAccess::EXECUTE,
            Access::ReadWrite => LlAccess::READ | LlAccess::WRITE,
        };
        // The descriptor opened at validation, never the path.
        policy = policy.allow_fd(grant.path.clone(), Arc::clone(&grant.fd), access);
    }
    for path in &spec.hidden {
        policy = policy.hide(path.clone());
    }
    for path in &spec.protected {
        policy = policy.protect(path.clone());
    }
    for path in &spec.frozen {
        policy = policy.freeze(path.clone());
    }
    for (path, (dev, ino)) in &spec.found_at {
        policy = policy.found_at(path.clone(), *dev, *ino);
    }
    for staged in &spec.staged {
        policy = policy.stage(
            staged.dir.clone(),
            staged.upper.clone(),
            staged.work.clone(),
            staged.through.clone(),
        );
    }
    // A shell's temp dir becomes a tmpfs of its size where the command has a private mount
    // namespace (LIM-1); a single program's stays as it is (`RLIMIT_FSIZE` bounds its files).
    if let (true, Some(temp)) = (shell, &spec.temp_dir) {
        policy = policy.bounded_temp_dir(temp.clone(), spec.resources.temp_dir.get());
    }
    // Where proctree's supervisor will start the command: inside its own user namespace (a host
    // that is not root), as PID 2 of a PID namespace whose PID 1 is the supervisor.
    Ok(policy
        .unix_sockets_in_view(unix_sockets)
        .launch(launch())
        .network(match spec.network {
            Network::None => LlNetwork::None,
            Network::All => LlNetwork::All,
        }))
}

/// The resolver's configuration where it lies outside `/etc`: with systemd-resolved,
/// `/etc/resolv.conf` is a link to `/run/systemd/resolve/stub-resolv.conf`, and the system set
/// gives a link no rule of its own (it reaches only targets in the set, and `/run` is not), so a
/// command with the network could not resolve a name (RC-7). Granted (read, following the link)
/// only when the network is on, and only when the file it leads to is one everyone may read, as
/// every `/etc` entry of the set is.
pub const RESOLVER_CONFIG: &str = "/etc/resolv.conf";

fn with_resolver(policy: Policy) -> Policy {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(RESOLVER_CONFIG) {
        Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o004 != 0 => {
            policy.allow_system(RESOLVER_CONFIG, LlAccess::READ)
        }
        _ => policy,
    }
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
