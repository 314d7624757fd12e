//! Errors: one enum for preparing a sandbox (in the parent, may allocate) and one small `Copy`
//! value for applying it (in the child, between `fork` and `exec`, must not allocate).

use std::path::PathBuf;

/// Why [`Policy::prepare`](crate::Policy::prepare) failed.
///
/// [`is_unavailable`](SandboxError::is_unavailable) separates "this kernel cannot enforce the
/// sandbox" (a runner reports `AGENT_EXEC_SANDBOX_UNAVAILABLE`, RUN-6) from "the policy
/// or the filesystem is wrong" (a bug in the caller or a path that vanished).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// Landlock is missing, disabled, or limited away: the filesystem restriction would not be
    /// enforced at all, so nothing may run.
    #[error(
        "Landlock is not available ({reason}); commands cannot be sandboxed on this kernel. \
         Use Linux 5.13 or newer with Landlock enabled (lsm=…,landlock on the kernel command line)"
    )]
    LandlockUnavailable {
        /// What the probe found.
        reason: String,
    },
    /// The host's cap on the Landlock ABI (`AGENT_EXEC_LANDLOCK_ABI_MAX`) is malformed: which
    /// ABI it meant is unknown, so nothing runs rather than at a guessed level.
    #[error("{reason}; commands are not sandboxed until it is fixed")]
    LandlockAbiCap {
        /// What is wrong and what to set instead (the probe's words).
        reason: String,
    },
    /// The machine lacks a layer without which this policy's program could get out
    /// ([`Availability::shell_refusal`](crate::Availability::shell_refusal) names which).
    #[error("this machine cannot contain a shell: {reason}; nothing ran")]
    ShellUncontained {
        /// What is missing and what would give it.
        reason: String,
    },
    /// seccomp filter mode is missing.
    #[error(
        "seccomp filters are not available ({reason}); commands cannot be sandboxed on this \
         kernel. Use a kernel built with CONFIG_SECCOMP_FILTER"
    )]
    SeccompUnavailable {
        /// What the probe found.
        reason: String,
    },
    /// A policy path is not absolute; it would depend on the working directory.
    #[error("sandbox path {path:?} is not absolute; pass an absolute path")]
    RelativePath {
        /// The offending path.
        path: PathBuf,
    },
    /// A required policy path does not exist.
    #[error(
        "sandbox path {path:?} does not exist; create it first, or grant it with \
         allow_if_exists if it is optional"
    )]
    MissingPath {
        /// The missing path.
        path: PathBuf,
    },
    /// A protected or staged path resolves to another file than the caller found there
    /// ([`Policy::found_at`](crate::Policy::found_at)).
    #[error(
        "{path:?} changed while the sandbox was being made (a directory on its way was moved \
         or replaced by a link: another process, such as a background task, is moving it); \
         run the command again when nothing else moves the workspace's directories"
    )]
    Moved {
        /// The path.
        path: PathBuf,
    },
    /// A policy path exists but could not be opened or inspected.
    #[error("cannot open sandbox path {path:?}: {source}")]
    OpenPath {
        /// The path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A single-program policy grants execution elsewhere too.
    #[error(
        "{path:?} is granted EXECUTE but this policy allows only its one program to run; \
         grant READ instead"
    )]
    ExecuteOutsideProgram {
        /// The path that was granted `EXECUTE`.
        path: PathBuf,
    },
    /// The program of a single-program policy is not a regular file.
    #[error("program {path:?} is not a regular file; pass the path of the executable itself")]
    ProgramNotFile {
        /// The program path.
        path: PathBuf,
    },
    /// More mounts than the child can keep track of.
    #[error(
        "the sandbox would need {count} mounts (writable paths, bound directories, protected \
         and hidden paths together) but makes at most {max}; grant fewer writable paths or \
         protect and hide fewer paths"
    )]
    TooManyMounts {
        /// Mounts needed.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A read-only grant with hidden paths beneath it would need more Landlock rules than the
    /// bound allows: each entry of a directory on the way to a hidden path gets one of its own
    /// (module `split`), so that nothing created there during the call is granted.
    #[error(
        "{dir:?} has too many entries: leaving the private paths beneath a read-only grant out \
         of the sandbox takes one Landlock rule per entry of each directory on the way to them, \
         and this policy would need more than {max}; move entries of {dir:?} into a \
         subdirectory, or grant a directory with fewer entries"
    )]
    TooManyEntries {
        /// The directory whose entries were being granted when the bound was reached.
        dir: PathBuf,
        /// The bound.
        max: usize,
    },
    /// A path to hide lies beneath a granted one, and no private mount namespace can be made
    /// here to hide it.
    #[error(
        "{root:?} contains {hidden:?}, which a sandboxed program must never read or change (it \
         holds the host's own state: grants, mirrors, locks), and this machine cannot make a \
         private mount namespace to hide it ({reason}); grant a directory that does not contain \
         it, or move the state directory elsewhere"
    )]
    CannotHide {
        /// The granted path.
        root: PathBuf,
        /// The path that would be exposed.
        hidden: PathBuf,
        /// Why there is no private mount namespace.
        reason: String,
    },
    /// A file to hide lies beneath a granted one and the program's view is the host's tree
    /// (a single program, or a grant of `/`), where no empty file can be made to cover it.
    #[error(
        "{root:?} contains the file {hidden:?}, which a sandboxed program must never read or \
         change, and only a shell's view of its grants alone can cover a file; grant a \
         directory that does not contain it"
    )]
    CannotHideFile {
        /// The granted path.
        root: PathBuf,
        /// The file that would be exposed.
        hidden: PathBuf,
    },
    /// A file with another name elsewhere ([`Policy::freeze`](crate::Policy::freeze)) lies
    /// beneath a writable grant, and no private mount namespace can be made here to keep it
    /// read-only.
    #[error(
        "{root:?} is writable and contains {frozen:?}, which holds files with other names \
         elsewhere (hard links: a package store's, another clone's) that must stay read-only, \
         and this machine cannot make a private mount namespace to keep them so ({reason}), so \
         nothing ran; replace the links with copies (uv `--link-mode=copy`, pnpm \
         `package-import-method=copy`, `git clone --no-hardlinks`)"
    )]
    CannotFreeze {
        /// The writable granted path.
        root: PathBuf,
        /// The file, or the directory holding such files.
        frozen: PathBuf,
        /// Why there is no private mount namespace.
        reason: String,
    },
    /// A path to keep read-only lies beneath a writable grant, and no private mount namespace
    /// can be made here to keep it so.
    #[error(
        "{root:?} is writable and contains {protected:?}, which must stay read-only (a git hook, \
         a git or shell configuration), and this machine cannot make a private mount namespace \
         to protect it ({reason}), so nothing ran; work in a directory that does not contain it"
    )]
    CannotProtect {
        /// The writable granted path.
        root: PathBuf,
        /// The path that would be writable.
        protected: PathBuf,
        /// Why there is no private mount namespace.
        reason: String,
    },
    /// The kernel refused a Landlock rule for an opened path.
    #[error("cannot add a Landlock rule to the ruleset: {source}")]
    LandlockRule {
        /// The underlying error.
        source: std::io::Error,
    },
    /// The landlock crate refused the ruleset.
    #[error("cannot build the Landlock ruleset: {source}")]
    Landlock {
        /// The underlying error.
        #[from]
        source: landlock::RulesetError,
    },
}

impl SandboxError {
    /// True when the kernel lacks what the sandbox needs (map to
    /// `AGENT_EXEC_SANDBOX_UNAVAILABLE`); false for a wrong policy or a vanished path.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            SandboxError::LandlockUnavailable { .. }
                | SandboxError::LandlockAbiCap { .. }
                | SandboxError::ShellUncontained { .. }
                | SandboxError::SeccompUnavailable { .. }
        )
    }
}

/// The step of [`PreparedSandbox::apply_in_child`](crate::PreparedSandbox::apply_in_child) that
/// failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ApplyStage {
    /// The private mount and IPC namespaces and their mounts. `ESTALE`: a granted path, a
    /// hidden path or the working directory no longer named the file pinned when the policy
    /// was prepared (it was swapped), so nothing ran.
    Namespaces,
    /// Emptying the capability sets.
    Capabilities,
    /// `prctl(PR_SET_NO_NEW_PRIVS)`.
    NoNewPrivs,
    /// `landlock_restrict_self`.
    Landlock,
    /// `seccomp(SECCOMP_SET_MODE_FILTER)`.
    Seccomp,
}

/// A failed step in the child. `Copy` and allocation-free, because it is made between `fork`
/// and `exec`. Convert with `i32::from` for a supervisor hook that passes back a raw errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("sandbox step {stage:?} failed with errno {errno}")]
pub struct ApplyError {
    /// Which step failed.
    pub stage: ApplyStage,
    /// The raw `errno`.
    pub errno: i32,
}

impl From<ApplyError> for i32 {
    fn from(error: ApplyError) -> i32 {
        error.errno
    }
}

impl From<ApplyError> for std::io::Error {
    fn from(error: ApplyError) -> std::io::Error {
        std::io::Error::from_raw_os_error(error.errno)
    }
}
