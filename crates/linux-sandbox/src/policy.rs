//! The policy value: which paths a sandboxed program may read, write and execute, whether it
//! may use the network, start other processes, or reach outside through signals and abstract
//! unix sockets. A `Policy` is plain data; nothing touches the kernel until
//! [`Policy::prepare`](crate::Policy::prepare).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

bitflags::bitflags! {
    /// What a sandboxed program may do beneath one path.
    ///
    /// Rights are granted on the inode the path resolves to when the policy is prepared, so a
    /// symbolic link such as `/usr/bin/awk` (an alternatives link) grants on its real target,
    /// and a directory grant covers everything beneath it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Access: u8 {
        /// Read files and list directories.
        const READ = 1;
        /// Create, write, truncate, rename and remove files and directories, and make
        /// symbolic links, fifos and sockets. Never device nodes (a root-run command could
        /// otherwise read a raw disk through a block device it made), never hard links
        /// (CMD-9; see [`Policy`]).
        const WRITE = 1 << 1;
        /// Execute files. Implies reading the file: the kernel opens an executable for reading
        /// and Landlock checks both rights on that open.
        const EXECUTE = 1 << 2;
    }
}

bitflags::bitflags! {
    /// Landlock scopes: ways out of the sandbox that do not go through a path.
    ///
    /// Both are on by default and need Landlock ABI 6 (Linux 6.12); on older kernels the
    /// [`Enforcement`](crate::Enforcement) report names them as gaps.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Scopes: u8 {
        /// Deny signals to any process outside the sandbox (the host, the user's shell).
        const SIGNAL = 1;
        /// Deny connecting to abstract unix sockets created outside the sandbox.
        const ABSTRACT_UNIX_SOCKET = 1 << 1;
    }
}

impl Default for Scopes {
    fn default() -> Self {
        Scopes::all()
    }
}

/// Network access of the sandboxed program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Network {
    /// No network (the default). seccomp refuses `socket` and `socketpair` for every family
    /// but `AF_UNIX`; Landlock (ABI ≥ 4) also refuses TCP bind and connect. `socket(AF_UNIX)`
    /// itself is refused too while the kernel cannot restrict connecting to *pathname* unix
    /// sockets (Landlock ABI < 9): otherwise the session D-Bus socket or a Docker socket would be
    /// a way out — unless the program's view is a new root holding only the grants (a shell
    /// with private namespaces; see
    /// [`Enforcement::private_root`](crate::Enforcement::private_root)), where those sockets
    /// are not, and the abstract-socket scope holds. `socketpair(AF_UNIX)` always works.
    #[default]
    None,
    /// Unrestricted network (RC-7 `network: true`): every socket family, TCP and UDP anywhere.
    /// Not unix sockets where one outside the sandbox could be reached (the same rule as
    /// [`Network::None`]'s: a granted home holds gpg-agent's and Docker Desktop's): those are
    /// local doors, not the network. `socketpair(AF_UNIX)` always works.
    All,
}

/// Whether the sandboxed program may start other processes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Spawn {
    /// Fork and exec are allowed; executable paths come from the rules.
    Allowed,
    /// No new process: `fork`, `vfork` and `clone` without `CLONE_THREAD` are refused, `clone3`
    /// reports `ENOSYS` (so libc falls back to `clone` and threads still work), and only this
    /// program (plus its interpreter) is executable. RUN-7.
    Denied {
        /// The one executable file.
        program: PathBuf,
    },
}

/// Where the sandboxed program's process starts, as far as the sandbox needs to know: the
/// caller's process supervisor decides it, this crate cannot see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Launch {
    /// The process runs in a user namespace of its own (made by its supervisor), where it holds
    /// the capabilities to make private mount and IPC namespaces before it `exec`s. A root
    /// host's process may make them anyway.
    pub own_user_namespace: bool,
    /// The process's supervisor is PID 1 of a PID namespace of the process's own, so every
    /// other process it can name is its own descendant except PID 1.
    pub own_pid_namespace: bool,
}

/// One path grant.
#[derive(Debug, Clone)]
pub(crate) struct PathRule {
    pub(crate) path: PathBuf,
    /// Set by [`Policy::allow_fd`]: the rule is made on this descriptor, and `path` is never
    /// opened (it names the grant in errors only).
    pub(crate) fd: Option<Arc<OwnedFd>>,
    pub(crate) access: Access,
    /// A missing optional path is skipped; a missing required one fails `prepare`.
    pub(crate) optional: bool,
    /// A fixed system location whose `O_PATH` descriptor may be reused across `prepare`
    /// calls (see [`Policy::allow_system`]). Never set for a user's path.
    pub(crate) system: bool,
    /// Set by [`Policy::allow_system_file`]: the system location as its caller opened and
    /// judged it (with `fd`, the same descriptor): neither the path nor the cache is looked up.
    pub(crate) id: Option<crate::sandbox::FileId>,
}

/// A deny-default sandbox policy for one program run.
///
/// Everything not granted is denied: the filesystem outside the granted paths, the network
/// (unless [`Network::All`]), signals and abstract sockets outside the sandbox. Some things are
/// denied whatever the policy says, because no tool needs them and each is a known way out:
/// creating hard links (`link`/`linkat`; Landlock alone allows a link inside one writable
/// directory, CMD-9), `ptrace` and `process_vm_*`, `io_uring_*`, the mount family,
/// `unshare`/`setns`/`clone` with namespace flags, `keyctl`/`add_key`/`request_key`, `bpf`,
/// `perf_event_open`, `userfaultfd`, module loading, `kexec_*`, terminal injection (`TIOCSTI`,
/// `TIOCLINUX`), and the root-only calls that act on the whole machine (`reboot`, clock
/// setting, `swapon`, `iopl`, `chroot`, `open_by_handle_at`, …).
///
/// ```
/// use linux_sandbox::{Access, Network, Policy};
///
/// let policy = Policy::new()
///     .allow("/usr/bin", Access::READ | Access::EXECUTE)
///     .allow_if_exists("/usr/share/zoneinfo", Access::READ)
///     .network(Network::None);
/// assert_eq!(policy.network_access(), Network::None);
/// ```
#[derive(Debug, Clone)]
pub struct Policy {
    pub(crate) rules: Vec<PathRule>,
    pub(crate) hidden: Vec<PathBuf>,
    pub(crate) protected: Vec<PathBuf>,
    /// Files (or directories holding them) read-only by their own bind ([`Policy::freeze`]).
    pub(crate) frozen: Vec<PathBuf>,
    /// Directories seen through a private copy ([`Policy::stage`]).
    pub(crate) staged: Vec<crate::stage::StageRequest>,
    /// Where the caller found protected or staged paths ([`Policy::found_at`]).
    pub(crate) found: Vec<(PathBuf, u64, u64)>,
    pub(crate) network: Network,
    pub(crate) spawn: Spawn,
    pub(crate) scopes: Scopes,
    pub(crate) abi_limit: Option<u8>,
    pub(crate) launch: Launch,
    pub(crate) namespaces: bool,
    /// Whether unix sockets may be made where the view holds only the grants.
    pub(crate) unix_in_view: bool,
    /// A writable grant to cover with a fresh tmpfs of this many bytes (LIM-1).
    pub(crate) bounded_temp: Option<(PathBuf, u64)>,
    /// Whether a policy that may spawn is refused where a shell would get out
    /// ([`Policy::refuse_uncontained_shell`]).
    pub(crate) refuse_uncontained: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Policy::new()
    }
}

impl Policy {
    /// A policy that grants no path, no network, and lets the program start other processes
    /// (each of them sandboxed the same way). Add executable paths with
    /// [`allow`](Policy::allow).
    pub fn new() -> Self {
        Policy {
            rules: Vec::new(),
            hidden: Vec::new(),
            protected: Vec::new(),
            frozen: Vec::new(),
            staged: Vec::new(),
            found: Vec::new(),
            network: Network::None,
            spawn: Spawn::Allowed,
            scopes: Scopes::default(),
            abi_limit: None,
            launch: Launch::default(),
            namespaces: true,
            unix_in_view: true,
            bounded_temp: None,
            refuse_uncontained: false,
        }
    }

    /// A policy for exactly one program that may not start any other process (the `run` tool,
    /// RUN-7): `program` is the only executable file (with its ELF interpreter, which the
    /// kernel opens for execution too), `fork`/`vfork`/non-thread `clone` fail with `EPERM`.
    /// Threads still work. Grant the program's shared libraries with
    /// [`allow`](Policy::allow)`(…, Access::READ)`; [`Access::EXECUTE`] on any other path makes
    /// [`prepare`](Policy::prepare) fail.
    pub fn single_program(program: impl Into<PathBuf>) -> Self {
        Policy {
            spawn: Spawn::Denied {
                program: program.into(),
            },
            ..Policy::new()
        }
    }

    /// Grants `access` beneath `path`. The path must exist when the policy is prepared.
    pub fn allow(mut self, path: impl Into<PathBuf>, access: Access) -> Self {
        self.rules.push(PathRule {
            path: path.into(),
            fd: None,
            access,
            optional: false,
            system: false,
            id: None,
        });
        self
    }

    /// Grants `access` beneath the file or directory `fd` names (an `O_PATH` or ordinary
    /// descriptor), opened by the caller when it validated the path. The rule is made on this
    /// descriptor and `path` is never looked up again, so a path swapped for a symbolic link
    /// after validation changes nothing. `path` names the grant in errors.
    pub fn allow_fd(mut self, path: impl Into<PathBuf>, fd: Arc<OwnedFd>, access: Access) -> Self {
        self.rules.push(PathRule {
            path: path.into(),
            fd: Some(fd),
            access,
            optional: false,
            system: false,
            id: None,
        });
        self
    }

    /// Hides `path` (a directory, or a file: `~/.netrc`) from the program wherever it lies
    /// strictly beneath a granted path (a host's own state directory inside a workspace of
    /// `$HOME`, a credential file inside a granted `$HOME`): in the program's private mount
    /// namespace an empty read-only directory covers a directory, and an empty read-only
    /// regular file covers anything else (reads find nothing, writes fail with `EROFS`); each
    /// directory between a writable grant and it is bound onto itself, so the program can
    /// neither rename it away nor plant a forged copy in its place. Where no private mount
    /// namespace can be made, [`prepare`](Policy::prepare) refuses a policy whose grants
    /// contain a hidden path ([`SandboxError::CannotHide`](crate::SandboxError::CannotHide)),
    /// and a hidden *file* is covered only in a shell's new root (a single program's view of
    /// the host's tree refuses it the same way). A hidden path that contains a grant, or is
    /// one, hides nothing from it; a path that does not exist when the policy is prepared
    /// gets no cover (and needs no namespace).
    ///
    /// Beneath a read-only directory grant of the caller's, Landlock does not grant a hidden
    /// path either, existing or not: the grant gets no rule on its root but
    /// `READ_DIR` on it and on each directory on the way to a hidden path, and its rights on
    /// every other entry of those directories that exists at `prepare` (symbolic links get
    /// none). So a private directory the host makes during the call (`~/.docker`), or a file it
    /// replaces by rename (`~/.netrc`, git's `~/.git-credentials`), is unreadable, and so is
    /// any other entry made in those directories during the call; names there can be listed.
    /// At most 16 384 such rules per policy
    /// ([`SandboxError::TooManyEntries`](crate::SandboxError::TooManyEntries) past them).
    /// Beneath a writable grant only the mount covers it: what the command makes there must
    /// stay readable to it, and it cannot rename anything over a covered path (`EBUSY`).
    pub fn hide(mut self, path: impl Into<PathBuf>) -> Self {
        self.hidden.push(path.into());
        self
    }

    /// Keeps `path` (a file or a directory) read-only even where it lies beneath a writable
    /// grant (RCS-3: `.git/hooks`, `.git/config`, shell startup files): in the program's
    /// private mount namespace a read-only bind of the path covers it, and each directory
    /// between the writable grant and it is bound onto itself, so neither it nor an ancestor
    /// can be renamed away and replaced by a writable copy. Everything beneath it is read-only
    /// too, a writable grant inside it included. Where no private mount namespace can be made
    /// and the path lies beneath a writable grant, [`prepare`](Policy::prepare) refuses the
    /// policy ([`SandboxError::CannotProtect`](crate::SandboxError::CannotProtect)). A path
    /// outside every writable grant is read-only anyway and needs nothing; a path that does
    /// not exist when the policy is prepared protects nothing.
    pub fn protect(mut self, path: impl Into<PathBuf>) -> Self {
        self.protected.push(path.into());
        self
    }

    /// Keeps the file at `path` (or every file beneath a directory `path`) read-only where it
    /// lies beneath a writable grant, for what it *is* rather than for its name: a file with
    /// another name elsewhere (a hard link into a package store or another clone) must not
    /// change through this one (TRUST-3). In the program's private mount namespace a read-only
    /// bind covers it and, as for [`protect`](Policy::protect), each directory between the
    /// writable grant and it is bound onto itself: every call in a folder pins its linked files
    /// in place, so no call can move one past another call's scan. It cannot be removed or
    /// renamed over (`EBUSY`), nor opened for writing (`EROFS`).
    /// Where no private mount namespace can be made and the path lies beneath a writable grant,
    /// [`prepare`](Policy::prepare) refuses the policy
    /// ([`SandboxError::CannotFreeze`](crate::SandboxError::CannotFreeze)); a path that does
    /// not exist when the policy is prepared freezes nothing.
    pub fn freeze(mut self, path: impl Into<PathBuf>) -> Self {
        self.frozen.push(path.into());
        self
    }

    /// Shows the program the directory `dir`, beneath a writable grant, through a private copy
    /// (module `stage`, TRUST-1): whatever it creates, renames or writes there lands in `upper`
    /// (an empty directory outside the program's view, with the empty `work` beside it on the
    /// same filesystem, as overlayfs needs), never in `dir`, for the whole run. Each directory
    /// of `through` (beneath `dir`) stays the real one, writable: a git directory's `objects`.
    /// What of `upper` to apply afterwards is the caller's decision.
    ///
    /// Where the child cannot make the private copy, `dir` is read-only instead; the report
    /// ([`PreparedSandbox::staging`](crate::PreparedSandbox::staging)) says which. Where no
    /// private mount namespace can be made and `dir` lies beneath a writable grant,
    /// [`prepare`](Policy::prepare) refuses the policy
    /// ([`SandboxError::CannotProtect`](crate::SandboxError::CannotProtect)). A `dir` that does
    /// not exist at `prepare` stages nothing; one outside every writable grant is read-only
    /// anyway and needs nothing. All paths must be absolute; `upper` and `work` must exist.
    pub fn stage(
        mut self,
        dir: impl Into<PathBuf>,
        upper: impl Into<PathBuf>,
        work: impl Into<PathBuf>,
        through: Vec<PathBuf>,
    ) -> Self {
        self.staged.push(crate::stage::StageRequest {
            dir: dir.into(),
            upper: upper.into(),
            work: work.into(),
            through,
        });
        self
    }

    /// Says that the caller found `path` (a path it also [protects](Policy::protect) or
    /// [stages](Policy::stage)) as the file with device `dev` and inode `ino`, reached from its
    /// writable grant without following a link. Where `path` resolves to another file at
    /// [`prepare`](Policy::prepare) — another process swapped a directory on its way for a
    /// link — the policy is refused ([`SandboxError::Moved`](crate::SandboxError::Moved)):
    /// protecting what the link leads to would leave the file found writable. The child checks
    /// the same identity when it mounts.
    pub fn found_at(mut self, path: impl Into<PathBuf>, dev: u64, ino: u64) -> Self {
        self.found.push((path.into(), dev, ino));
        self
    }

    /// Says where the program's process will start (see [`Launch`]); default: no namespaces
    /// of its own.
    pub fn launch(mut self, launch: Launch) -> Self {
        self.launch = launch;
        self
    }

    /// Whether the program may make unix sockets where its view holds only the grants (default
    /// `true`; see [`Network::None`]). Pass `false` when a grant may hold another program's
    /// listening socket: a user's approved `/tmp` holds tmux's and ssh-agent's, and Landlock
    /// below ABI 9 does not govern `connect`. `socketpair` always works.
    pub fn unix_sockets_in_view(mut self, allowed: bool) -> Self {
        self.unix_in_view = allowed;
        self
    }

    /// Bounds the size of the call's temp dir `path` (one of the writable grants, by its
    /// canonical path, holding only empty `home/` and `tmp/`) to `bytes` (LIM-1): in a shell's
    /// private mount namespace a fresh tmpfs of that size covers it, with empty `home` and
    /// `tmp` directories (mode 0700) made in it, and gets the writable grant's rights. Its
    /// pages are memory, charged to the writer's memory cgroup; they are gone with the call's
    /// namespace. Without a private mount namespace (or for a single program) nothing covers
    /// it and [`Enforcement::bounded_temp`](crate::Enforcement::bounded_temp) says so; the
    /// caller bounds file sizes another way (`RLIMIT_FSIZE`).
    pub fn bounded_temp_dir(mut self, path: impl Into<PathBuf>, bytes: u64) -> Self {
        self.bounded_temp = Some((path.into(), bytes));
        self
    }

    /// Whether private mount and IPC namespaces may be used where the kernel allows them
    /// (default `true`). `false` behaves as a machine without them (the tests of the fallback);
    /// the [`Enforcement`](crate::Enforcement) report says so.
    pub fn private_namespaces(mut self, allowed: bool) -> Self {
        self.namespaces = allowed;
        self
    }

    /// Grants `access` beneath `path` if it exists when the policy is prepared; for system
    /// directories that differ between distributions (`/lib64`, `/usr/libexec`, …).
    pub fn allow_if_exists(mut self, path: impl Into<PathBuf>, access: Access) -> Self {
        self.rules.push(PathRule {
            path: path.into(),
            fd: None,
            access,
            optional: true,
            system: false,
            id: None,
        });
        self
    }

    /// Grants `access` beneath a fixed **system** location (`/usr/bin`, `/lib64`,
    /// `/etc/ld.so.cache`, `/dev/null`, …) if it exists, like
    /// [`allow_if_exists`](Policy::allow_if_exists), and lets [`prepare`](Policy::prepare)
    /// reuse the location's `O_PATH` descriptor from a process-wide cache.
    ///
    /// Why: a `command` sandbox grants ~40 such locations, and opening each one afresh on every
    /// call was most of `prepare`'s cost. The cache stays correct when a file is replaced
    /// (`ldconfig` renames a new `/etc/ld.so.cache` into place, `useradd` replaces
    /// `/etc/passwd`, `/etc/localtime` is re-pointed, something is mounted on top): from a
    /// process's second `prepare` on, every directory the path's resolution passes through
    /// (links followed hop by hop) carries an inotify watch, the mount table is polled, and
    /// any change empties the cache before the next `prepare` uses it; a missing location is
    /// remembered the same way. Before that, where inotify is unavailable, and for paths
    /// through filesystems not known to be local (NFS, FUSE, …: another client's change
    /// queues no event), every `prepare` looks the path up again (one `stat`) and reuses the
    /// descriptor only if it still names the same file (device, inode and type).
    ///
    /// Never pass a user's path here (a workspace, an extra path, a temp dir): the cache keeps
    /// every location it has seen open for the life of the process. User paths go through
    /// [`allow`](Policy::allow), which opens them on every call.
    pub fn allow_system(mut self, path: impl Into<PathBuf>, access: Access) -> Self {
        self.rules.push(PathRule {
            path: path.into(),
            fd: None,
            access,
            optional: true,
            system: true,
            id: None,
        });
        self
    }

    /// Grants `access` beneath `file`, a system location its caller opened without following
    /// any link and judged by that descriptor ([`SystemFile::open_beneath`]): the rule is made
    /// on exactly the file that was judged, never on what `path` names when the sandbox is
    /// prepared, and `path` is its canonical path. For a caller that enumerates a system tree
    /// entry by entry and decides on each by its mode (the shell's `/etc`): a rename of a
    /// secret onto a judged name between the judgement and the grant changes nothing.
    pub fn allow_system_file(
        mut self,
        path: impl Into<PathBuf>,
        file: &SystemFile,
        access: Access,
    ) -> Self {
        self.rules.push(PathRule {
            path: path.into(),
            fd: Some(Arc::clone(&file.fd)),
            access,
            optional: true,
            system: true,
            id: Some(file.id),
        });
        self
    }

    /// Sets network access (default [`Network::None`]).
    pub fn network(mut self, network: Network) -> Self {
        self.network = network;
        self
    }

    /// Sets the Landlock scopes (default: all of them).
    pub fn scopes(mut self, scopes: Scopes) -> Self {
        self.scopes = scopes;
        self
    }

    /// Uses at most Landlock ABI `abi` even if the kernel offers a newer one, to run a test
    /// as it would behave on an older kernel. `0` means "as if Landlock were missing", which
    /// makes [`prepare`](Policy::prepare) fail.
    pub fn limit_landlock_abi(mut self, abi: u8) -> Self {
        self.abi_limit = Some(abi);
        self
    }

    /// The network access this policy grants.
    pub fn network_access(&self) -> Network {
        self.network
    }

    /// Whether the program may start other processes.
    pub fn may_spawn(&self) -> bool {
        matches!(self.spawn, Spawn::Allowed)
    }

    /// The one executable of a [`single_program`](Policy::single_program) policy.
    pub fn program(&self) -> Option<&Path> {
        match &self.spawn {
            Spawn::Allowed => None,
            Spawn::Denied { program } => Some(program),
        }
    }
}

/// A system location opened by its caller beneath a directory it opened the same way, never
/// through a link, for [`Policy::allow_system_file`]: the descriptor and what `fstat` said of
/// it, so the caller judges and the sandbox grants the one same file.
#[derive(Debug, Clone)]
pub struct SystemFile {
    fd: Arc<OwnedFd>,
    id: crate::sandbox::FileId,
    mode: u32,
}

impl SystemFile {
    /// Opens `name` in `dir` without following a link: a directory (`directory`: listable,
    /// `O_RDONLY | O_DIRECTORY`), else `O_PATH` (a FIFO is never opened for reading), and
    /// `fstat`s that descriptor.
    ///
    /// # Errors
    /// The open's or the `fstat`'s (`ENOTDIR` when `directory` is asked of something else).
    pub fn open_beneath(
        dir: std::os::fd::BorrowedFd<'_>,
        name: &std::ffi::CStr,
        directory: bool,
    ) -> std::io::Result<SystemFile> {
        use rustix::fs::{Mode, OFlags};
        let flags = if directory {
            OFlags::RDONLY | OFlags::DIRECTORY
        } else {
            OFlags::PATH
        };
        let fd = rustix::fs::openat(
            dir,
            name,
            flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let stat = rustix::fs::fstat(&fd)?;
        Ok(SystemFile {
            fd: Arc::new(fd),
            id: crate::sandbox::FileId::of(&stat),
            mode: stat.st_mode,
        })
    }

    /// The descriptor (a directory's lists it).
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }

    /// The file's type and permission bits (`st_mode`).
    pub fn mode(&self) -> u32 {
        self.mode
    }

    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        self.id.is_dir
    }

    /// The file's device and inode numbers.
    pub fn dev_ino(&self) -> (u64, u64) {
        (self.id.dev, self.id.ino)
    }

    /// Whether the file still has the mode it had when opened (one `fstat`; `false` if that
    /// fails): what its caller judged it by still holds, whatever name changed it.
    pub fn unchanged(&self) -> bool {
        rustix::fs::fstat(&*self.fd).is_ok_and(|st| st.st_mode == self.mode)
    }
}

impl PartialEq for SystemFile {
    /// The same file: device and inode.
    fn eq(&self, other: &SystemFile) -> bool {
        (self.id.dev, self.id.ino) == (other.id.dev, other.id.ino)
    }
}

impl Eq for SystemFile {}
