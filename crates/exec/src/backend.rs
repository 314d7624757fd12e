//! The Linux seam: turn a [`SandboxSpec`] into a prepared Landlock + seccomp sandbox, and spawn
//! a [`Job`] under it with `proctree`'s supervisor. macOS has its own runner (`macos_run`);
//! every other platform gets [`ExecError::Unsupported`] — never an unsandboxed run.

use std::os::fd::OwnedFd;

use crate::job::{ExecError, Job};
use crate::spec::SandboxSpec;

pub(crate) type Prepared = linux_sandbox::PreparedSandbox;

/// Builds the sandbox in the parent: everything that allocates happens here, before any fork.
pub(crate) fn prepare(spec: &SandboxSpec) -> Result<Prepared, ExecError> {
    let policy =
        crate::linux::policy(spec).map_err(|e| ExecError::SandboxUnavailable(e.to_string()))?;
    let prepared = policy.prepare().map_err(|e| match e {
        e if e.is_unavailable() => ExecError::SandboxUnavailable(e.to_string()),
        e @ (linux_sandbox::SandboxError::CannotHide { .. }
        | linux_sandbox::SandboxError::CannotHideFile { .. }
        | linux_sandbox::SandboxError::CannotProtect { .. }
        | linux_sandbox::SandboxError::CannotFreeze { .. }
        | linux_sandbox::SandboxError::Moved { .. }
        | linux_sandbox::SandboxError::TooManyMounts { .. }
        | linux_sandbox::SandboxError::TooManyEntries { .. }) => ExecError::Refused(e.to_string()),
        e => ExecError::Io(format!("cannot prepare the sandbox: {e}")),
    })?;
    // `prepare` fails outright when filesystem restriction cannot be enforced; a partial
    // status (a kernel without the signal scopes, say) still confines files, links, network and
    // spawning and is reported by `agent-exec doctor`.
    Ok(prepared)
}

/// Spawns `job` under the supervisor with `prepared` applied between fork and exec.
pub(crate) fn spawn(
    job: &Job,
    mut prepared: Prepared,
    cwd: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
    limits: crate::cgroup::ChildLimits,
) -> Result<proctree::ProcessTree, ExecError> {
    // Standard input is the read end of a pipe whose write end is already closed: reads see
    // EOF (RUN-8), and no descriptor of a host file reaches the command. A host `/dev/null`
    // opened here would carry the host's read-write mount into the command's private mount
    // namespace, where `fchmod(0, …)` changed the host's `/dev/null`.
    let (stdin, stdin_writer) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| ExecError::Io(format!("cannot make the command's stdin: {e}")))?;
    drop(stdin_writer);
    let mut command = proctree::Command::new(&job.program)
        .args(&job.args)
        .stdin(stdin)
        .current_dir_fd(cwd)
        .stdout(stdout)
        .stderr(stderr)
        // The hook applies this ruleset; the supervisor closes every other inherited fd.
        .keep_fd(prepared.ruleset_fd());
    // With a private `/dev/shm`, the supervisor brokers the hard links inside it
    // (LIVE-2: `sem_open`); every other link stays refused (CMD-9).
    if let Some(channel) = prepared.take_link_broker() {
        command = command.link_broker(channel);
        if let Some(fd) = prepared.link_channel_fd() {
            command = command.keep_fd(fd);
        }
    }
    for (key, value) in &job.env {
        command = command.env(key, value);
    }
    // The cgroups' `cgroup.procs`, joined by the hook before anything else (LIM-1).
    for fd in limits.fds() {
        command = command.keep_fd(fd);
    }
    // SAFETY: `apply_in_child` is async-signal-safe (raw prctl, landlock_restrict_self and
    // seccomp syscalls on memory prepared here, no allocation), as `pre_exec` requires; so is
    // `ChildLimits::apply` (raw write and setrlimit on descriptors and values prepared here).
    // The limits come first: joining a cgroup needs no access the sandbox then takes away.
    let command = unsafe {
        command.pre_exec(move || {
            limits.apply()?;
            prepared.apply_in_child().map_err(i32::from)
        })
    };
    command.spawn().map_err(|e| match e {
        // The child found a granted, hidden or protected path or its working directory swapped for
        // another file since the sandbox was prepared: nothing ran.
        proctree::SpawnError::PreExec { code }
            if code == rustix::io::Errno::STALE.raw_os_error() =>
        {
            ExecError::Refused(
                "a granted path, a hidden path or the working directory was replaced while the \
             sandbox was being set up, so nothing ran; retry, and stop whatever renames it"
                    .to_owned(),
            )
        }
        proctree::SpawnError::PreExec { .. } => ExecError::SandboxUnavailable(format!(
            "{e}; the kernel refused to apply the sandbox or the call's resource limits in the \
             child"
        )),
        other => ExecError::Io(other.to_string()),
    })
}
