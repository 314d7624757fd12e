//! Preparing a policy in the parent (open paths, build the Landlock ruleset, compile the BPF,
//! plan the isolation) and applying it in the child: the isolation's namespaces and mounts,
//! then three raw system calls, all on memory prepared in the parent.

use std::ffi::CString;
use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{
    Access as _, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, Ruleset, RulesetAttr,
    Scope,
};
use rustix::fs::{FileType, Mode, OFlags};

use crate::error::{ApplyError, ApplyStage, SandboxError};
use crate::interp;
use crate::isolate::{self, Ident, Isolation};
use crate::policy::{Access, Network, PathRule, Policy, Scopes, Spawn};
use crate::probe::probe;
use crate::seccomp::{self, FilterOptions};
use crate::split;
use crate::syscache;

bitflags::bitflags! {
    /// Protections a policy asked for that the running kernel cannot give, by Landlock or by
    /// seccomp. Empty means [`EnforcementStatus::FullyEnforced`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Gaps: u8 {
        /// `truncate(2)` on a file outside the writable paths is not checked (Landlock ABI < 3).
        const TRUNCATE = 1;
        /// `ioctl` on device files is not checked (Landlock ABI < 5).
        const DEVICE_IOCTL = 1 << 1;
        /// Signals to processes outside the sandbox are not blocked (Landlock ABI < 6).
        const SIGNAL_SCOPE = 1 << 2;
        /// Connecting to outside abstract unix sockets is not blocked. Never reported: below
        /// Landlock ABI 6 seccomp refuses `socket(AF_UNIX)` under either
        /// network setting instead.
        const ABSTRACT_UNIX_SOCKET_SCOPE = 1 << 3;
        /// No private mount namespace: the mode, owner and times of files outside the
        /// writable paths that the program's user owns can still be changed (Landlock does not
        /// govern metadata). seccomp still refuses set-id mode bits, extended attributes, the
        /// immutable flag and `file_setattr` everywhere, and host IPC (no private IPC
        /// namespace either).
        const METADATA_OUTSIDE = 1 << 4;
    }
}

/// Whether the whole policy is enforced.
///
/// There is no "not enforced": a kernel without Landlock or seccomp makes
/// [`Policy::prepare`] fail with an error for which
/// [`SandboxError::is_unavailable`] is true.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EnforcementStatus {
    /// Everything the policy denies is denied.
    FullyEnforced,
    /// Files, hard links, network and spawning are enforced, but some protections are missing
    /// on this kernel; [`Enforcement::gaps`] names them.
    PartiallyEnforced,
}

/// What a prepared sandbox will enforce once applied.
///
/// Computed in the parent by [`Policy::prepare`]: the ruleset is built with the landlock
/// crate's *hard requirement* level for exactly the rights of the ABI in use, so it either
/// builds completely or `prepare` fails, and `landlock_restrict_self` in the child is
/// all-or-nothing. So if [`PreparedSandbox::apply_in_child`] succeeds (the child execs), this
/// report is exactly what the child runs under; if it fails, the child never execs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Enforcement {
    landlock_abi: u8,
    gaps: Gaps,
    namespaces: bool,
    proc: bool,
    shm: bool,
    root: bool,
    unix: bool,
    temp: bool,
    /// In a new root: whether `/tmp` and `/var/tmp` are the program's own (NET-2). `None`
    /// without a new root (the host's `/tmp`, as far as the grants reach).
    tmp: Option<bool>,
    /// Without network: whether the program has a private loopback (NET-1). `None` with
    /// network.
    loopback: Option<bool>,
}

impl Enforcement {
    /// Fully or partially enforced.
    pub fn status(&self) -> EnforcementStatus {
        if self.gaps.is_empty() {
            EnforcementStatus::FullyEnforced
        } else {
            EnforcementStatus::PartiallyEnforced
        }
    }

    /// The Landlock ABI the ruleset uses.
    pub fn landlock_abi(&self) -> u8 {
        self.landlock_abi
    }

    /// What is missing on this kernel.
    pub fn gaps(&self) -> Gaps {
        self.gaps
    }

    /// Whether the program runs in private mount and IPC namespaces: a read-only view of
    /// everything but the writable paths, hidden paths covered, nothing of the host's IPC.
    pub fn private_namespaces(&self) -> bool {
        self.namespaces
    }

    /// Whether the program sees a `/proc` of its own (LIVE-2): a fresh `proc` of its
    /// PID namespace in its private view, readable, listing only the processes it may ptrace
    /// (its own; not the supervisor). Otherwise the host's `/proc` stays denied but for the
    /// files the policy grants (a shell's `meminfo`, `cpuinfo`, `stat`), and `ps` fails.
    pub fn private_proc(&self) -> bool {
        self.proc
    }

    /// Whether the program has a `/dev/shm` of its own (LIVE-2): a fresh,
    /// size-bounded tmpfs, where `shm_open` works and nothing of the host or another call is
    /// visible. Otherwise `/dev/shm` is denied.
    pub fn private_shm(&self) -> bool {
        self.shm
    }

    /// Whether the program's view is a new root holding only what the policy grants:
    /// the system paths, the devices and the grants at their own paths, nothing else
    /// of the host's tree, so none of the host's unix sockets outside the grants. Then (with
    /// Landlock's abstract-socket scope) `socket(AF_UNIX)` is allowed; otherwise it is refused
    /// below Landlock ABI 9.
    pub fn private_root(&self) -> bool {
        self.root
    }

    /// Whether the call's temp dir is a size-bounded tmpfs of its own
    /// ([`Policy::bounded_temp_dir`](crate::Policy::bounded_temp_dir), LIM-1).
    pub fn bounded_temp(&self) -> bool {
        self.temp
    }

    /// Whether the program's `/tmp` and `/var/tmp` are its own (NET-2): each a fresh tmpfs in
    /// its new root, bounded like its temp dir, where what it writes never reaches the host's
    /// and nothing of the host's is visible but the grants bound beneath it. Otherwise a new
    /// root's `/tmp` is read-only: a grant beneath `/tmp` would gain rights from the tmpfs's
    /// Landlock rule ([`Policy::bounded_temp_dir`](crate::Policy::bounded_temp_dir) not set,
    /// a grant at `/tmp` itself, or one beneath it that is split around hidden paths or lacks a
    /// right its read-only bind does not refuse).
    pub fn private_tmp(&self) -> bool {
        self.tmp == Some(true)
    }

    /// Whether the program runs in a private network namespace of its own whose only
    /// interface is `lo` (NET-1): its servers and clients meet on `127.0.0.1` and `::1`,
    /// nothing of the host's network (loopback services, abstract unix sockets) is reachable,
    /// and seccomp allows `AF_INET`, `AF_INET6` and route and socket-diagnostics netlink.
    /// Without it and without network, inet sockets are refused.
    pub fn private_loopback(&self) -> bool {
        self.loopback == Some(true)
    }

    /// Whether the program may make unix sockets (`socket(AF_UNIX)`): where nothing outside
    /// the sandbox can be reached through one, with or without the network (a [`private_root`] and the
    /// abstract-socket scope, or Landlock ABI 9). `socketpair` always works.
    ///
    /// [`private_root`]: Enforcement::private_root
    pub fn unix_sockets(&self) -> bool {
        self.unix
    }
}

impl fmt::Display for Enforcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let layers = match (self.namespaces, self.proc, self.shm) {
            (false, ..) => "no private namespaces, no capabilities",
            (true, true, true) if self.root => {
                "private mount and IPC namespaces, a root of the grants only, private /proc and \
                 /dev/shm, no capabilities"
            }
            (true, true, true) => {
                "private mount and IPC namespaces, private /proc and /dev/shm, no capabilities"
            }
            (true, false, true) => {
                "private mount and IPC namespaces, private /dev/shm, host /proc denied, \
                 no capabilities"
            }
            (true, true, false) => {
                "private mount and IPC namespaces, private /proc, no capabilities"
            }
            (true, false, false) => "private mount and IPC namespaces, no capabilities",
        };
        let unix = if self.unix {
            ""
        } else {
            ", unix sockets refused (the view holds the host's)"
        };
        let loopback = match self.loopback {
            Some(true) => ", a private loopback network",
            Some(false) => {
                ", no private network namespace (inet sockets refused: no loopback for test \
                 servers)"
            }
            None => "",
        };
        let tmp = match self.tmp {
            Some(true) => ", a private /tmp",
            Some(false) => ", /tmp read-only",
            None => "",
        };
        match self.status() {
            EnforcementStatus::FullyEnforced => {
                write!(
                    f,
                    "fully enforced (Landlock ABI {}; {layers}{tmp}{unix}{loopback})",
                    self.landlock_abi
                )
            }
            EnforcementStatus::PartiallyEnforced => {
                let names: Vec<&str> = self.gaps.iter_names().map(|(name, _)| name).collect();
                write!(
                    f,
                    "partially enforced (Landlock ABI {}; {layers}{tmp}{unix}{loopback}; not enforced: {})",
                    self.landlock_abi,
                    names.join(", ")
                )
            }
        }
    }
}

/// A sandbox ready to apply in a child process: the Landlock ruleset fd and the compiled BPF
/// program. Made by [`Policy::prepare`] in the parent; applying it allocates nothing.
///
/// It is `Send + Sync + 'static`, so it can be moved into a supervisor's boxed
/// `Fn() -> Result<(), i32> + Send + Sync` hook:
///
/// ```no_run
/// use linux_sandbox::{Access, Policy};
///
/// let sandbox = Policy::new()
///     .allow("/usr", Access::READ | Access::EXECUTE)
///     .prepare()?;
/// let hook: Box<dyn Fn() -> Result<(), i32> + Send + Sync> =
///     Box::new(move || sandbox.apply_in_child().map_err(i32::from));
/// # Ok::<(), linux_sandbox::SandboxError>(())
/// ```
pub struct PreparedSandbox {
    /// `O_CLOEXEC` (the landlock crate creates it so): gone in the program after `exec`.
    ruleset: OwnedFd,
    filter: Vec<libc::sock_filter>,
    enforcement: Enforcement,
    /// The namespaces and mounts made in the child, when the machine allows them.
    isolation: Option<Isolation>,
    /// With a private `/dev/shm`: the supervisor's hard-link broker (LIVE-2).
    links: Option<LinkBroker>,
}

/// What the child needs to hand `link`/`linkat` to the supervisor
/// ([`PreparedSandbox::take_link_broker`]).
struct LinkBroker {
    /// The same program with `SECCOMP_RET_USER_NOTIF` for `link` and `linkat`.
    filter: Vec<libc::sock_filter>,
    /// The child's end of the channel (close-on-exec): the listener and `/dev/shm` go over it.
    child: OwnedFd,
    /// The supervisor's end until [`PreparedSandbox::take_link_broker`] takes it; only then
    /// does the child install `filter` (nobody would answer otherwise).
    supervisor: Option<OwnedFd>,
}

impl fmt::Debug for PreparedSandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedSandbox")
            .field("ruleset", &self.ruleset)
            .field("filter_len", &self.filter.len())
            .field("enforcement", &self.enforcement)
            .field("isolation", &self.isolation)
            .field(
                "link_broker",
                &self.links.as_ref().map(|l| l.supervisor.is_none()),
            )
            .finish()
    }
}

/// An opened path grant.
struct OpenedRule {
    /// Shared with the system-path cache for [`Policy::allow_system`] paths.
    fd: Arc<OwnedFd>,
    access: Access,
    id: FileId,
    /// An [`Policy::allow_system`] location.
    system: bool,
    /// The caller's path as it was given (not for system locations).
    path: Option<PathBuf>,
    /// An interpreter's path as the program names it (`PT_INTERP`, `#!`).
    interpreter: Option<PathBuf>,
    /// The canonical path, where opening proved it (a system location opened with no link on
    /// the way); otherwise read from the descriptor when the new root needs it.
    canonical: Option<PathBuf>,
}

/// Adds a grant on `fd`. A system location that is the same file as one already granted (with
/// merged `/usr`, `/bin` is `/usr/bin`, `/lib*` are `/usr/lib*`) widens that grant instead: one
/// system call fewer here, one rule fewer to copy into each child's domain, and the same
/// result, since Landlock merges rules on one inode alike. Only system locations: they are on
/// local filesystems, where device and inode numbers name one file; a FUSE server may report
/// one number for two files, and merging those would widen a grant.
fn push_rule(opened: &mut Vec<OpenedRule>, rule: OpenedRule) {
    let same = |r: &&mut OpenedRule| {
        r.system && rule.system && (r.id.dev, r.id.ino) == (rule.id.dev, rule.id.ino)
    };
    match opened.iter_mut().find(same) {
        Some(existing) => existing.access |= rule.access,
        None => opened.push(rule),
    }
}

impl Policy {
    /// Makes [`prepare`](Policy::prepare) refuse this policy, if it may spawn, where a shell
    /// could get out (`SandboxError::ShellUncontained`, an unavailable error): with no private
    /// mount namespace, or below Landlock ABI 6 without a PID namespace of its own
    /// ([`Availability::shell_refusal`](crate::Availability::shell_refusal) says why). Every
    /// shell `exec` runs sets it (`cargo xtask matrix` tests both holes); without
    /// it those holes are only reported as [`Gaps`], for callers that run a program they
    /// trust to make none of those calls.
    pub fn refuse_uncontained_shell(mut self) -> Self {
        self.refuse_uncontained = true;
        self
    }

    /// Validates the policy and builds everything the child will need: opens every path
    /// (`O_PATH`, following symbolic links, so grants land on the real files), builds the
    /// Landlock ruleset at the newest ABI both the kernel and this crate know, and compiles the
    /// seccomp program. Call it in the parent, before `fork`.
    ///
    /// Missing paths: a path added with [`allow`](Policy::allow) must exist
    /// ([`SandboxError::MissingPath`]); one added with
    /// [`allow_if_exists`](Policy::allow_if_exists) is skipped. The program of a
    /// [`single_program`](Policy::single_program) policy must be a regular file.
    pub fn prepare(&self) -> Result<PreparedSandbox, SandboxError> {
        let availability = probe();
        if let Err(reason) = availability.landlock_abi_cap() {
            return Err(SandboxError::LandlockAbiCap {
                reason: reason.to_owned(),
            });
        }
        let kernel_abi =
            availability
                .landlock_abi()
                .ok_or_else(|| SandboxError::LandlockUnavailable {
                    reason: format!("{:?}", availability.landlock()),
                })?;
        if !availability.seccomp() {
            return Err(SandboxError::SeccompUnavailable {
                reason: "SECCOMP_GET_ACTION_AVAIL failed".to_owned(),
            });
        }
        let abi = self.abi_limit.map_or(kernel_abi, |cap| cap.min(kernel_abi));
        if abi == 0 {
            return Err(SandboxError::LandlockUnavailable {
                reason: "limited to ABI 0 by the policy".to_owned(),
            });
        }
        if self.may_spawn() && self.refuse_uncontained {
            // At the policy's own ABI limit, which may be below the probe's.
            let mut at_abi = availability.clone();
            at_abi.limit_abi(abi);
            if let Some(reason) = at_abi.shell_refusal(self.launch) {
                return Err(SandboxError::ShellUncontained { reason });
            }
        }

        let opened = self.open_paths()?;
        let splits = self.splits(&opened)?;
        // Private namespaces: where the child may make them (root, or its own user namespace)
        // and the kernel lets it (probed once).
        let namespaces = self.namespaces && availability.private_namespaces_for(self.launch);
        let mut isolation = self.isolation(&opened, namespaces)?;
        if let Some(isolation) = isolation.as_mut() {
            isolation.world = self.world(availability, abi);
            if self.may_spawn() {
                isolation.root = self.new_root(&opened, &splits, &isolation.world, abi)?;
            }
            // An empty file to cover a hidden one is made in the new root only: the host's
            // tree has no place to make one that the host would not see.
            isolation.cover_files()?;
            // The empty file over hidden files reads as empty, not refused, where its
            // directory is split (only `READ_DIR` above it, module `split`).
            let ll_abi = landlock::ABI::from(i32::from(abi));
            let all = AccessFs::from_all(ll_abi);
            isolation.cover_rights = (all & AccessFs::ReadFile).bits();
            // A staged directory that is itself a grant keeps its grant on the overlay's root.
            // Only the writable directory grants can be one, and only a call that stages looks.
            let mut granted: Vec<(PathBuf, u64)> = Vec::new();
            if isolation.has_staged() {
                for rule in opened
                    .iter()
                    .filter(|r| r.path.is_some() && r.id.is_dir && r.access.contains(Access::WRITE))
                {
                    if let Ok(path) = isolate::canonical_path_of(rule.fd.as_fd()) {
                        granted.push((path, fs_rights(rule.access, ll_abi, true).bits()));
                    }
                }
            }
            isolation.give_staged_rights(|dir| {
                granted
                    .iter()
                    .filter(|(path, _)| path == dir)
                    .fold(0, |all, (_, rights)| all | rights)
            });
        }
        let root = isolation.as_ref().is_some_and(|i| i.root.is_some());
        let (proc, shm, temp) = isolation.as_ref().map_or((false, false, false), |i| {
            (
                i.world.proc_rights.is_some(),
                i.world.shm.is_some(),
                i.world.temp.is_some(),
            )
        });
        let loopback = isolation.as_ref().is_some_and(|i| i.world.net);
        let tmp = isolation
            .as_ref()
            .and_then(|i| i.root.as_ref())
            .map(|r| r.tmp.is_some());
        let ruleset = build_ruleset(self, abi, &opened, &splits, loopback)?;
        let unix_connect_contained = abi >= 9
            || (root
                && self.unix_in_view
                && abi >= 6
                && self.scopes.contains(Scopes::ABSTRACT_UNIX_SOCKET));
        let options = FilterOptions {
            network: self.network,
            may_spawn: self.may_spawn(),
            // Pathname sockets: Landlock (ABI 9) or a view without the host's; abstract ones:
            // the scope (ABI 6).
            unix_connect_contained,
            private_ipc: namespaces,
            own_pid_namespace: self.launch.own_pid_namespace,
            broker_links: false,
            private_net: loopback,
        };
        let filter = seccomp::build_cached(options)?;
        // Only a private `/dev/shm` makes brokered links possible: the supervisor links names
        // in that directory and nowhere else.
        let links = if shm {
            let (child, supervisor) = seqpacket_pair()?;
            Some(LinkBroker {
                filter: seccomp::build_cached(FilterOptions {
                    broker_links: true,
                    ..options
                })?,
                child,
                supervisor: Some(supervisor),
            })
        } else {
            None
        };
        // BPF_MAXINSNS: the kernel refuses longer programs; refuse here, not in the child.
        if filter.len() > 4096 {
            return Err(SandboxError::SeccompUnavailable {
                reason: format!("filter of {} instructions exceeds 4096", filter.len()),
            });
        }
        let mut gaps = gaps(self, abi);
        if !namespaces {
            gaps |= Gaps::METADATA_OUTSIDE;
        }
        Ok(PreparedSandbox {
            ruleset,
            filter,
            enforcement: Enforcement {
                landlock_abi: abi,
                gaps,
                namespaces,
                proc,
                shm,
                root,
                unix: unix_connect_contained,
                temp,
                tmp,
                loopback: (self.network == Network::None).then_some(loopback),
            },
            isolation,
            links,
        })
    }

    /// The private `/proc` and `/dev/shm` of a shell's view (LIVE-2): only where the
    /// program may start processes (a single program, RUN-7, writes nowhere but its grants),
    /// `/proc` only in a PID namespace of the program's own where the kernel lets a fresh
    /// `proc` be mounted, `/dev/shm` only where the host has it as a directory.
    fn world(&self, availability: &crate::Availability, abi: u8) -> isolate::World {
        if !self.may_spawn() {
            return isolate::World::default();
        }
        let abi = landlock::ABI::from(i32::from(abi));
        let proc_rights = (self.launch.own_pid_namespace && availability.private_proc())
            .then(|| fs_rights(Access::READ, abi, true).bits());
        let shm_is_dir = rustix::fs::lstat("/dev/shm")
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory);
        // Files only: shared memory objects and semaphores are files in its root.
        let shm_rights = (AccessFs::ReadFile
            | AccessFs::ReadDir
            | AccessFs::WriteFile
            | AccessFs::MakeReg
            | AccessFs::RemoveFile
            | AccessFs::Truncate)
            & AccessFs::from_all(abi);
        // Its own terminals: open, read, write, and their ioctls (Landlock ABI 5 governs those
        // on devices); listing `/dev/pts` too.
        let pts_rights =
            (AccessFs::ReadFile | AccessFs::ReadDir | AccessFs::WriteFile | AccessFs::IoctlDev)
                & AccessFs::from_all(abi);
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        // The temp dir's tmpfs gets what a shell's writable grant gets (programs built in
        // TMPDIR run).
        let temp = self.bounded_temp.as_ref().and_then(|(path, bytes)| {
            let path = CString::new(path.as_os_str().as_bytes()).ok()?;
            let rights = fs_rights(Access::READ | Access::WRITE | Access::EXECUTE, abi, true);
            Some((path, tmpfs_bounds(*bytes), rights.bits()))
        });
        isolate::World {
            temp,
            net: self.network == Network::None && availability.private_network(),
            mask_proc: proc_rights.is_some() && root && !self.launch.own_user_namespace,
            proc_rights,
            shm: shm_is_dir.then(|| (self.shm_size(), shm_rights.bits())),
            pts: Some(pts_rights.bits()),
        }
    }

    /// The new root of a shell's view: every opened grant by its canonical path, the links on
    /// the way to each path as the policy named it, and its own `/tmp` and `/var/tmp` where
    /// [`private_tmp_keeps_grants_exact`] holds.
    fn new_root(
        &self,
        opened: &[OpenedRule],
        splits: &[Option<split::Tree>],
        world: &isolate::World,
        abi: u8,
    ) -> Result<Option<isolate::NewRoot>, SandboxError> {
        let mut grants = Vec::with_capacity(opened.len());
        for rule in opened {
            let path = if let Some(path) = &rule.canonical {
                Ok(path.clone())
            } else if rule.system {
                isolate::canonical_path_of_system(&rule.fd)
            } else {
                isolate::canonical_path_of(rule.fd.as_fd())
            }
            .map_err(|source| SandboxError::OpenPath {
                path: rule.path.clone().unwrap_or_default(),
                source,
            })?;
            grants.push(isolate::Grant {
                path,
                id: Ident::from(rule.id),
                is_dir: rule.id.is_dir,
                writable: rule.access.contains(Access::WRITE),
                system: rule.system,
            });
        }
        // How each path as the policy named it resolves. A system location's walk is cached
        // with its descriptor; the caller's paths are canonical (validated) but for links a
        // program's interpreter path passes (`/lib64`), walked on every call.
        let mut views: Vec<Arc<isolate::PathView>> = Vec::new();
        {
            // As `open_paths` left it: the same descriptors' entries.
            let cache = syscache::shared_as_is();
            for rule in self.rules.iter().filter(|r| r.system) {
                if rule.id.is_some() {
                    // Opened by the caller with no link on the way (`allow_system_file`).
                    views.push(Arc::new(isolate::PathView::direct(&rule.path)));
                    continue;
                }
                // Not cached (another thread's `prepare` saw a change and emptied the cache
                // since `open_paths`): walked now. Never skipped: `/bin` would be missing from
                // the view.
                views.push(match cache.cached(&rule.path) {
                    Some(_) if cache.direct(&rule.path) => {
                        Arc::new(isolate::PathView::direct(&rule.path))
                    }
                    Some(fd) => isolate::PathView::of_system(&rule.path, &fd),
                    None => Arc::new(isolate::PathView::walk(&rule.path)),
                });
            }
        }
        for given in self
            .rules
            .iter()
            .filter(|r| !r.system && r.fd.is_none())
            .map(|r| r.path.as_path())
            .chain(self.program())
            .chain(opened.iter().filter_map(|r| r.interpreter.as_deref()))
        {
            views.push(Arc::new(isolate::PathView::walk(given)));
        }
        let views: Vec<&isolate::PathView> = views.iter().map(|v| &**v).collect();
        let mut root = isolate::NewRoot::plan(
            &grants,
            &views,
            world.proc_rights.is_some(),
            world.shm.is_some(),
            world.pts.is_some(),
        )?;
        // NET-2: the view's own `/tmp` and `/var/tmp`, bounded like the call's temp dir and
        // with its rights, where that is bounded (LIM-1).
        if let (Some(root), Some((_, size, rights))) = (root.as_mut(), &world.temp) {
            let abi = landlock::ABI::from(i32::from(abi));
            let exact = opened
                .iter()
                .zip(&grants)
                .zip(splits)
                .all(|((rule, grant), split)| {
                    let rights_of = fs_rights(rule.access, abi, grant.is_dir).bits();
                    private_tmp_keeps_grants_exact(grant, rights_of, split.is_some(), *rights, abi)
                });
            if exact && root.may_have_private_tmp() {
                root.tmp = Some((size.clone(), *rights));
            }
        }
        Ok(root)
    }

    /// The mounts of the private namespaces, or (without them) the refusal of a policy whose
    /// grants contain a hidden path or whose writable grants contain a protected one.
    fn isolation(
        &self,
        opened: &[OpenedRule],
        namespaces: bool,
    ) -> Result<Option<Isolation>, SandboxError> {
        let open_error = |path: &Path, source: std::io::Error| SandboxError::OpenPath {
            path: path.to_owned(),
            source,
        };
        // Nothing to mount and nothing to refuse: no work on the spawn path.
        if !namespaces
            && self.hidden.is_empty()
            && self.protected.is_empty()
            && self.frozen.is_empty()
            && self.staged.is_empty()
        {
            return Ok(None);
        }
        let mut roots = Vec::new();
        for rule in opened {
            let Some(given) = &rule.path else { continue };
            let writable = rule.access.contains(Access::WRITE);
            // A read-only grant matters only as a place a hidden path may lie beneath.
            if !writable && self.hidden.is_empty() {
                continue;
            }
            roots.push(isolate::Root {
                path: isolate::canonical_path_of(rule.fd.as_fd())
                    .map_err(|e| open_error(given, e))?,
                // The identity `open_paths` already read, in the child's `statx` terms.
                id: Ident::from(rule.id),
                writable,
            });
        }
        let no_namespaces = || {
            if self.namespaces {
                probe()
                    .why_no_private_namespaces(self.launch)
                    .unwrap_or_default()
            } else {
                "private namespaces are turned off by the policy".to_owned()
            }
        };
        // Each path as it is now (links followed: the file the program would reach); a path
        // that does not exist has nothing to hide or protect.
        let resolve = |path: &PathBuf| -> Result<Option<isolate::Covered>, SandboxError> {
            if !path.is_absolute() {
                return Err(SandboxError::RelativePath { path: path.clone() });
            }
            let Some((fd, file_id)) = open_path(path, true)? else {
                if self.found.iter().any(|(p, _, _)| p == path) {
                    return Err(SandboxError::Moved { path: path.clone() });
                }
                return Ok(None);
            };
            let moved = self
                .found
                .iter()
                .any(|(p, dev, ino)| p == path && (*dev, *ino) != (file_id.dev, file_id.ino));
            if moved {
                return Err(SandboxError::Moved { path: path.clone() });
            }
            let canonical =
                isolate::canonical_path_of(fd.as_fd()).map_err(|e| open_error(path, e))?;
            Ok(Some(isolate::Covered {
                path: canonical,
                id: Ident::from(file_id),
                is_dir: file_id.is_dir,
            }))
        };
        let mut hidden = Vec::with_capacity(self.hidden.len());
        // Those that do not exist now stay absent beneath a staged directory (`with_staged`).
        let mut missing = Vec::new();
        for path in &self.hidden {
            let Some(covered) = resolve(path)? else {
                if path.is_absolute() {
                    missing.push(isolate::canonical_as_far_as_it_exists(path));
                }
                continue;
            };
            if !namespaces {
                if let Some(root) = roots
                    .iter()
                    .find(|r| covered.path != r.path && covered.path.starts_with(&r.path))
                {
                    return Err(SandboxError::CannotHide {
                        root: root.path.clone(),
                        hidden: covered.path,
                        reason: no_namespaces(),
                    });
                }
            }
            hidden.push(covered);
        }
        // A hidden path inside another hidden directory (a host's log directory inside its
        // state directory), or given twice, is covered by the outer one: a mount of its own
        // would find it gone beneath the outer cover and refuse the whole call.
        hidden.sort_by_key(|c| c.path.components().count());
        let mut outer: Vec<isolate::Covered> = Vec::with_capacity(hidden.len());
        for covered in hidden {
            let inside = outer
                .iter()
                .any(|o| o.path == covered.path || (o.is_dir && covered.path.starts_with(&o.path)));
            if !inside {
                outer.push(covered);
            }
        }
        let hidden = outer;
        let mut protected = Vec::with_capacity(self.protected.len());
        let mut links = Vec::new();
        for path in &self.protected {
            let Some(covered) = resolve(path)? else {
                continue;
            };
            links.extend(isolate::Covered::links_to(path));
            if !namespaces {
                if let Some(root) = roots
                    .iter()
                    .find(|r| r.writable && covered.path.starts_with(&r.path))
                {
                    return Err(SandboxError::CannotProtect {
                        root: root.path.clone(),
                        protected: covered.path,
                        reason: no_namespaces(),
                    });
                }
            }
            protected.push(covered);
        }
        let mut frozen = Vec::with_capacity(self.frozen.len());
        for path in &self.frozen {
            let Some(covered) = resolve(path)? else {
                continue;
            };
            if !namespaces {
                if let Some(root) = roots
                    .iter()
                    .find(|r| r.writable && covered.path.starts_with(&r.path))
                {
                    return Err(SandboxError::CannotFreeze {
                        root: root.path.clone(),
                        frozen: covered.path,
                        reason: no_namespaces(),
                    });
                }
            }
            frozen.push(covered);
        }
        let mut staged = Vec::with_capacity(self.staged.len());
        for request in &self.staged {
            let Some(dir) = resolve(&request.dir)? else {
                continue;
            };
            if !namespaces {
                if let Some(root) = roots
                    .iter()
                    .find(|r| r.writable && dir.path.starts_with(&r.path))
                {
                    return Err(SandboxError::CannotProtect {
                        root: root.path.clone(),
                        protected: dir.path,
                        reason: no_namespaces(),
                    });
                }
                continue;
            }
            let required = |path: &PathBuf| -> Result<isolate::Covered, SandboxError> {
                resolve(path)?.ok_or_else(|| SandboxError::MissingPath { path: path.clone() })
            };
            let upper = required(&request.upper)?;
            let work = required(&request.work)?;
            let mut through = Vec::with_capacity(request.through.len());
            for path in &request.through {
                if let Some(covered) = resolve(path)? {
                    if covered.path != dir.path && covered.path.starts_with(&dir.path) {
                        through.push(covered);
                    }
                }
            }
            links.extend(isolate::Covered::links_to(&request.dir));
            staged.push(isolate::StagedDir {
                dir,
                upper,
                work,
                through,
            });
        }
        if !namespaces {
            return Ok(None);
        }
        Isolation::prepare(&roots, &hidden, &protected, &frozen, &links)
            .and_then(|plan| plan.with_staged(&roots, staged, &missing))
            .map(Some)
    }

    /// Which opened rules are split around hidden paths (module `split`), aligned with
    /// `opened`: the caller's read-only directory grants with a hidden path strictly beneath
    /// them (as it resolves now, existing or not) that no writable grant inside them covers.
    fn splits(&self, opened: &[OpenedRule]) -> Result<Vec<Option<split::Tree>>, SandboxError> {
        let mut splits: Vec<Option<split::Tree>> = opened.iter().map(|_| None).collect();
        if self.hidden.is_empty() {
            return Ok(splits);
        }
        let resolved: Vec<PathBuf> = self
            .hidden
            .iter()
            .filter_map(|h| split::resolve(h))
            .collect();
        let mut canonical: Vec<Option<PathBuf>> = Vec::with_capacity(opened.len());
        for rule in opened {
            canonical.push(match &rule.path {
                Some(given) if !rule.system && rule.id.is_dir => Some(
                    isolate::canonical_path_of(rule.fd.as_fd()).map_err(|source| {
                        SandboxError::OpenPath {
                            path: given.clone(),
                            source,
                        }
                    })?,
                ),
                _ => None,
            });
        }
        let writable: Vec<PathBuf> = opened
            .iter()
            .zip(&canonical)
            .filter(|(r, _)| r.access.contains(Access::WRITE))
            .filter_map(|(_, c)| c.clone())
            .collect();
        for ((rule, path), split) in opened.iter().zip(&canonical).zip(&mut splits) {
            if let (Some(path), false) = (path, rule.access.contains(Access::WRITE)) {
                *split = split::Tree::plan(path, &resolved, &writable);
            }
        }
        Ok(splits)
    }

    /// Validate, then open: every rule path (and, for executables, their interpreters).
    fn open_paths(&self) -> Result<Vec<OpenedRule>, SandboxError> {
        for rule in &self.rules {
            if !rule.path.is_absolute() {
                return Err(SandboxError::RelativePath {
                    path: rule.path.clone(),
                });
            }
            if !self.may_spawn() && rule.access.contains(Access::EXECUTE) {
                return Err(SandboxError::ExecuteOutsideProgram {
                    path: rule.path.clone(),
                });
            }
        }
        // The program of a no-spawn policy is one more rule; the policy's own rules are read
        // in place, not copied (this runs on every call).
        let program_rule = match &self.spawn {
            Spawn::Denied { program } if !program.is_absolute() => {
                return Err(SandboxError::RelativePath {
                    path: program.clone(),
                });
            }
            Spawn::Denied { program } => Some(PathRule {
                path: program.clone(),
                fd: None,
                access: Access::READ | Access::EXECUTE,
                optional: false,
                system: false,
                id: None,
            }),
            _ => None,
        };

        let mut opened = Vec::with_capacity(self.rules.len() + 2);
        let mut interpreters: Vec<PathBuf> = Vec::new();
        // System locations first, under the shared cache's lock (taken and refreshed once),
        // which is released before anything of the caller's is opened: a slow or blocking
        // user path (a FIFO, a hung network mount) must not stall every other `prepare`.
        let mut system_programs: Vec<&Path> = Vec::new();
        {
            let mut cache = None;
            for rule in self.rules.iter().filter(|r| r.system) {
                // Opened and judged by the caller, with no link on the way: its path is its
                // canonical path, and the cache is not asked.
                let (fd, id, canonical) = if let (Some(fd), Some(id)) = (&rule.fd, rule.id) {
                    let canonical = rule.path.components().collect::<PathBuf>();
                    (Arc::clone(fd), id, Some(canonical))
                } else {
                    let found = cache
                        .get_or_insert_with(syscache::shared)
                        .lookup(&rule.path)?;
                    let Some((fd, id)) = found else {
                        continue;
                    };
                    let canonical = cache
                        .as_ref()
                        .is_some_and(|c| c.direct(&rule.path))
                        // Rebuilt from its components: "/usr/" and "/usr" are one canonical
                        // path.
                        .then(|| rule.path.components().collect::<PathBuf>());
                    (fd, id, canonical)
                };
                if rule.access.contains(Access::EXECUTE) && !id.is_dir {
                    system_programs.push(&rule.path);
                }
                push_rule(
                    &mut opened,
                    OpenedRule {
                        fd,
                        access: rule.access,
                        id,
                        system: true,
                        path: None,
                        interpreter: None,
                        canonical,
                    },
                );
            }
        }
        for path in system_programs {
            interpreter_chain(path, &mut interpreters)?;
        }
        for rule in self
            .rules
            .iter()
            .filter(|r| !r.system)
            .chain(program_rule.as_ref())
        {
            let (fd, id) = match &rule.fd {
                // The caller's descriptor, opened when it validated the path: never the path.
                Some(fd) => {
                    let stat = rustix::fs::fstat(&**fd).map_err(|e| SandboxError::OpenPath {
                        path: rule.path.clone(),
                        source: e.into(),
                    })?;
                    (Arc::clone(fd), FileId::of(&stat))
                }
                None => match open_path(&rule.path, rule.optional)? {
                    Some((fd, id)) => (Arc::new(fd), id),
                    None => continue,
                },
            };
            if self.program() == Some(rule.path.as_path()) && id.is_dir {
                return Err(SandboxError::ProgramNotFile {
                    path: rule.path.clone(),
                });
            }
            // Only the one program of a no-spawn policy gets its interpreters added. A grant
            // of the caller's (an approved extra path, a toolchain file) is data the command
            // may have written: following its `#!` line would let a file grant whatever path
            // it names, `/` included. A script there runs only with an
            // interpreter the policy already allows (the shell's system set).
            if program_rule.as_ref().is_some_and(|p| p.path == rule.path) && !id.is_dir {
                interpreter_chain(&rule.path, &mut interpreters)?;
            }
            push_rule(
                &mut opened,
                OpenedRule {
                    fd,
                    access: rule.access,
                    id,
                    system: false,
                    path: Some(rule.path.clone()),
                    interpreter: None,
                    canonical: None,
                },
            );
        }
        for path in interpreters {
            if let Some((fd, id)) = open_path(&path, false)? {
                push_rule(
                    &mut opened,
                    OpenedRule {
                        fd: Arc::new(fd),
                        access: Access::READ | Access::EXECUTE,
                        id,
                        system: false,
                        path: None,
                        interpreter: Some(path.clone()),
                        canonical: None,
                    },
                );
            }
        }
        Ok(opened)
    }
}

/// Which file a path named when it was looked up: enough to tell "still the same file".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) is_dir: bool,
}

impl FileId {
    pub(crate) fn of(stat: &rustix::fs::Stat) -> FileId {
        FileId {
            dev: stat.st_dev,
            ino: stat.st_ino,
            is_dir: FileType::from_raw_mode(stat.st_mode) == FileType::Directory,
        }
    }
}

/// Opens `path` with `O_PATH | O_CLOEXEC` and says which file it is. `None` for a missing
/// optional path.
pub(crate) fn open_path(
    path: &Path,
    optional: bool,
) -> Result<Option<(OwnedFd, FileId)>, SandboxError> {
    match rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
        Ok(fd) => {
            let stat = rustix::fs::fstat(&fd).map_err(|e| SandboxError::OpenPath {
                path: path.to_owned(),
                source: e.into(),
            })?;
            Ok(Some((fd, FileId::of(&stat))))
        }
        Err(e) if e == rustix::io::Errno::NOENT && optional => Ok(None),
        Err(e) if e == rustix::io::Errno::NOENT => Err(SandboxError::MissingPath {
            path: path.to_owned(),
        }),
        Err(e) => Err(SandboxError::OpenPath {
            path: path.to_owned(),
            source: e.into(),
        }),
    }
}

/// Adds the interpreters `execve(program)` opens (ELF loader; `#!` interpreter and its loader).
fn interpreter_chain(program: &Path, out: &mut Vec<PathBuf>) -> Result<(), SandboxError> {
    let mut current = program.to_owned();
    // The kernel follows at most 4 levels of interpreters (BINPRM_MAX_RECURSION).
    for _ in 0..4 {
        let next = interp::interpreter(&current).map_err(|source| SandboxError::OpenPath {
            path: current.clone(),
            source,
        })?;
        match next {
            Some(next) if !out.contains(&next) => {
                out.push(next.clone());
                current = next;
            }
            _ => break,
        }
    }
    Ok(())
}

/// Whether the view's own `/tmp` and `/var/tmp`, with Landlock's `tmp_rights` on the root of
/// each, leave `grant` exactly its own rights (NET-2). A Landlock rule covers everything beneath
/// its directory, mount points included, so a grant bound beneath the private `/tmp` also gets
/// the rule of that tmpfs. That adds nothing only where the grant holds those rights already,
/// but for the writes its read-only bind refuses anyway (`EROFS`). Connecting to a unix socket
/// is no write, so a read-only grant that lacks it stays without a private `/tmp`. A grant split
/// around hidden paths (module `split`) relies on no rule above it: what the user makes there
/// during the call would become readable.
fn private_tmp_keeps_grants_exact(
    grant: &isolate::Grant,
    rights: u64,
    split: bool,
    tmp_rights: u64,
    abi: landlock::ABI,
) -> bool {
    let path = grant.path.as_os_str().as_bytes();
    if !(path.starts_with(b"/tmp/") || path.starts_with(b"/var/tmp/")) {
        return true;
    }
    if split {
        return false;
    }
    let applicable = if grant.is_dir {
        tmp_rights
    } else {
        tmp_rights & AccessFs::from_file(abi).bits()
    };
    let refused_by_mount = if grant.writable {
        0
    } else {
        (AccessFs::WriteFile
            | AccessFs::RemoveDir
            | AccessFs::RemoveFile
            | AccessFs::MakeChar
            | AccessFs::MakeDir
            | AccessFs::MakeReg
            | AccessFs::MakeSock
            | AccessFs::MakeFifo
            | AccessFs::MakeBlock
            | AccessFs::MakeSym
            | AccessFs::Refer
            | AccessFs::Truncate)
            .bits()
    };
    let needed = applicable & !refused_by_mount;
    rights & needed == needed
}

/// Landlock rights for one grant at `abi`.
pub(crate) fn fs_rights(access: Access, abi: landlock::ABI, is_dir: bool) -> BitFlags<AccessFs> {
    let mut rights = BitFlags::<AccessFs>::EMPTY;
    if access.contains(Access::READ) {
        rights |= AccessFs::ReadFile | AccessFs::ReadDir;
    }
    if access.contains(Access::EXECUTE) {
        // The kernel opens the executable for reading (see `interp`).
        rights |= AccessFs::Execute | AccessFs::ReadFile;
    }
    if access.contains(Access::WRITE) {
        // Deliberately not MakeChar/MakeBlock (raw devices) nor IoctlDev.
        rights |= AccessFs::WriteFile
            | AccessFs::RemoveDir
            | AccessFs::RemoveFile
            | AccessFs::MakeDir
            | AccessFs::MakeReg
            | AccessFs::MakeSock
            | AccessFs::MakeFifo
            | AccessFs::MakeSym
            | AccessFs::Refer
            | AccessFs::Truncate
            | AccessFs::ResolveUnix;
    }
    rights &= AccessFs::from_all(abi);
    if !is_dir {
        rights &= AccessFs::from_file(abi);
    }
    rights
}

fn build_ruleset(
    policy: &Policy,
    abi: u8,
    opened: &[OpenedRule],
    splits: &[Option<split::Tree>],
    loopback: bool,
) -> Result<OwnedFd, SandboxError> {
    let landlock_abi = landlock::ABI::from(i32::from(abi));
    // Hard requirement: every right handled here exists at `abi` (the kernel's or lower), so
    // the ruleset is either complete or an error, never silently weaker.
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(landlock_abi))?;
    // In a private network namespace every address is the command's own loopback (NET-1):
    // its test servers bind and its clients connect there.
    if policy.network == Network::None && abi >= 4 && !loopback {
        // Handled with no rule: every TCP bind/connect (and UDP from ABI 10) is denied.
        ruleset = ruleset.handle_access(AccessNet::from_all(landlock_abi))?;
    }
    if abi >= 6 {
        let mut scopes = BitFlags::<Scope>::EMPTY;
        if policy.scopes.contains(Scopes::SIGNAL) {
            scopes |= Scope::Signal;
        }
        if policy.scopes.contains(Scopes::ABSTRACT_UNIX_SOCKET) {
            scopes |= Scope::AbstractUnixSocket;
        }
        if !scopes.is_empty() {
            ruleset = ruleset.scope(scopes)?;
        }
    }
    let created = ruleset.create()?;
    let fd: Option<OwnedFd> = created.into();
    let fd = fd.ok_or_else(|| SandboxError::LandlockUnavailable {
        reason: "the landlock crate created no ruleset".to_owned(),
    })?;
    let mut budget = split::MAX_SPLIT_RULES;
    for (rule, split) in opened.iter().zip(splits) {
        let rights = fs_rights(rule.access, landlock_abi, rule.id.is_dir);
        if rights.is_empty() {
            continue;
        }
        match split {
            // Not one rule on the root: rules on what exists beneath it but the hidden paths.
            Some(tree) => split::add_rules(
                &fd,
                rule.fd.as_fd(),
                rule.path.as_deref().unwrap_or(Path::new("/")),
                tree,
                split::Rights {
                    dir: rights,
                    file: fs_rights(rule.access, landlock_abi, false),
                },
                &mut budget,
            )?,
            None => add_path_rule(&fd, rule.fd.as_fd(), rights)?,
        }
    }
    // Move the ruleset above the low numbers a child's fd plumbing reuses (stdio, a
    // supervisor's channel and cwd), so a supervisor can keep it open at the same number until
    // `apply_in_child` runs. Close-on-exec: the program never inherits it.
    if fd.as_raw_fd() < RULESET_MIN_FD {
        return rustix::io::fcntl_dupfd_cloexec(&fd, RULESET_MIN_FD).map_err(|e| {
            SandboxError::LandlockUnavailable {
                reason: format!("cannot move the ruleset descriptor: {e}"),
            }
        });
    }
    Ok(fd)
}

/// `PR_SET_NO_NEW_PRIVS` and `SECCOMP_SET_MODE_FILTER` as raw syscall arguments.
const PR_SET_NO_NEW_PRIVS: usize = libc::PR_SET_NO_NEW_PRIVS as usize;
const SECCOMP_SET_MODE_FILTER: usize = libc::SECCOMP_SET_MODE_FILTER as usize;
const SECCOMP_FILTER_FLAG_NEW_LISTENER: usize = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER as usize;

/// A close-on-exec `AF_UNIX` `SOCK_SEQPACKET` pair (one message, one read).
fn seqpacket_pair() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    use std::os::fd::FromRawFd;
    let mut fds = [-1; 2];
    // SAFETY: socketpair fills the two-element array.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(SandboxError::SeccompUnavailable {
            reason: format!(
                "cannot make the link broker's channel: {}",
                std::io::Error::last_os_error()
            ),
        });
    }
    // SAFETY: two fresh descriptors nothing else owns.
    let pair = unsafe { [OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])] };
    // Above 9: a supervisor keeps its low numbers for its own plumbing (proctree refuses to
    // keep 0-4 for the hook), and a host with few open descriptors hands out low ones.
    let [child, supervisor] = pair.map(|fd| {
        if fd.as_raw_fd() > 9 {
            return Ok(fd);
        }
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a descriptor we own.
        let moved = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
        if moved < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(moved) })
    });
    match (child, supervisor) {
        (Ok(child), Ok(supervisor)) => Ok((child, supervisor)),
        (Err(e), _) | (_, Err(e)) => Err(SandboxError::SeccompUnavailable {
            reason: format!("cannot move the link broker's channel above 9: {e}"),
        }),
    }
}

/// The error of a failed step in the child: the kernel's errno, straight from the syscall's
/// return value (never from the thread-local `errno`).
fn apply_error(stage: ApplyStage, errno: syscalls::Errno) -> ApplyError {
    ApplyError {
        stage,
        errno: errno.into_raw(),
    }
}

/// `struct landlock_path_beneath_attr` from `<linux/landlock.h>` (packed in the UAPI).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `LANDLOCK_RULE_PATH_BENEATH`.
const LANDLOCK_RULE_PATH_BENEATH: usize = 1;

/// `landlock_add_rule` for one opened path, made here rather than through the landlock crate:
/// the crate `fstat`s every descriptor again to tell files from directories, which
/// `open_paths` already knows (and `fs_rights` already keeps directory-only rights off files).
pub(crate) fn add_path_rule(
    ruleset: &OwnedFd,
    parent: BorrowedFd<'_>,
    rights: BitFlags<AccessFs>,
) -> Result<(), SandboxError> {
    let attr = PathBeneathAttr {
        allowed_access: rights.bits(),
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: `attr` is a valid, initialised `landlock_path_beneath_attr` that outlives the
    // call; the kernel only reads it. Both descriptors are open.
    unsafe {
        syscalls::syscall4(
            syscalls::Sysno::landlock_add_rule,
            ruleset.as_raw_fd() as usize,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr as usize,
            0,
        )
    }
    .map(drop)
    .map_err(|errno| SandboxError::LandlockRule {
        source: std::io::Error::from_raw_os_error(errno.into_raw()),
    })
}

impl Policy {
    /// The bounds of the private `/dev/shm` (see [`shm_size`]), no larger than the call's temp
    /// dir where the policy bounds that (LIM-1: both are the call's files in memory).
    fn shm_size(&self) -> (CString, CString) {
        let default = shm_size().to_str().ok().and_then(|s| s.parse::<u64>().ok());
        let bytes = match (default, &self.bounded_temp) {
            (Some(d), Some((_, temp))) => d.min(*temp),
            (Some(d), None) => d,
            (None, Some((_, temp))) => *temp,
            (None, None) => 64 << 20,
        };
        tmpfs_bounds(bytes)
    }
}

/// A tmpfs's `size=` and `nr_inodes=` for `bytes` (NUL-terminated): one inode per 16 KiB, at
/// least 4096. Why inodes too: an empty file takes no block, so `size=` alone lets a command
/// pin kernel memory with millions of empty files (each inode and dentry is kernel memory,
/// outside every limit where no memory cgroup charges it).
fn tmpfs_bounds(bytes: u64) -> (CString, CString) {
    let inodes = (bytes / (16 << 10)).max(4096);
    (
        CString::new(bytes.to_string()).unwrap_or_default(),
        CString::new(inodes.to_string()).unwrap_or_default(),
    )
}

/// The size bound of a private `/dev/shm`, as tmpfs's `size=` option: a quarter of the
/// machine's memory, at most 1 GiB, at least 64 MiB. Why: tmpfs pages are memory (charged to
/// the writer's cgroup), so an unbounded one lets a command fill the host's RAM; systemd's
/// default of half the memory is more than any call needs, and Docker's 64 MiB is too little
/// for a data loader's or a test suite's shared buffers. Computed once per process.
fn shm_size() -> &'static std::ffi::CStr {
    static SIZE: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();
    SIZE.get_or_init(|| {
        const MIB: u64 = 1 << 20;
        // SAFETY: an all-zero sysinfo is a valid value of this plain C struct, filled by the
        // kernel.
        let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
        // SAFETY: a writable sysinfo.
        // `totalram` is a C `unsigned long`: 32 bits on some targets.
        #[allow(clippy::useless_conversion)]
        let total = if unsafe { libc::sysinfo(&mut info) } == 0 {
            u64::from(info.totalram).saturating_mul(u64::from(info.mem_unit.max(1)))
        } else {
            0
        };
        let bytes = (total / 4).clamp(64 * MIB, 1024 * MIB);
        std::ffi::CString::new(bytes.to_string()).unwrap_or_default()
    })
}

/// The lowest descriptor number a prepared ruleset gets (see `build_ruleset`).
const RULESET_MIN_FD: std::os::fd::RawFd = 10;

fn gaps(policy: &Policy, abi: u8) -> Gaps {
    let mut gaps = Gaps::empty();
    if abi < 3 {
        gaps |= Gaps::TRUNCATE;
    }
    if abi < 5 {
        gaps |= Gaps::DEVICE_IOCTL;
    }
    if abi < 6 && policy.scopes.contains(Scopes::SIGNAL) {
        gaps |= Gaps::SIGNAL_SCOPE;
    }
    // No ABSTRACT_UNIX_SOCKET_SCOPE any more: below ABI 6 no unix socket is contained, so
    // seccomp refuses `socket(AF_UNIX)` whatever the network.
    gaps
}

impl PreparedSandbox {
    /// What the child will run under once this is applied (see [`Enforcement`] for why this is
    /// known in the parent).
    pub fn enforcement(&self) -> Enforcement {
        self.enforcement
    }

    /// What became of each staged directory ([`Policy::stage`]): filled in by the child, so
    /// read it once the program was started.
    pub fn staging(&self) -> crate::stage::Staging {
        self.isolation
            .as_ref()
            .map(Isolation::staging)
            .unwrap_or_default()
    }

    /// The compiled seccomp program, for `examples/seccomp_attach.rs` and for dumping the
    /// program when debugging. Not part of the supported API: its shape may change.
    #[doc(hidden)]
    pub fn seccomp_program(&self) -> &[libc::sock_filter] {
        &self.filter
    }

    /// Hands the command's hard links to a supervisor (LIVE-2): returns the
    /// supervisor's end of the channel (for `proctree::Command::link_broker`) where the command
    /// gets a private `/dev/shm`, `None` elsewhere (links stay refused, CMD-9). From then on
    /// [`apply_in_child`](Self::apply_in_child) installs the variant of the seccomp program that
    /// returns `SECCOMP_RET_USER_NOTIF` for `link` and `linkat`, with a new listener, and sends
    /// that listener and an `O_PATH` descriptor of the private `/dev/shm` over
    /// [`link_channel_fd`](Self::link_channel_fd) before returning; the program never holds
    /// them (both close-on-exec, and closed right after sending). The supervisor must answer;
    /// without one, a link would wait until the channel's last holder closes it.
    pub fn take_link_broker(&mut self) -> Option<OwnedFd> {
        self.links.as_mut().and_then(|l| l.supervisor.take())
    }

    /// The hook's end of the link channel, to keep open in the child like
    /// [`ruleset_fd`](Self::ruleset_fd); `Some` after [`take_link_broker`](Self::take_link_broker)
    /// returned the other end.
    pub fn link_channel_fd(&self) -> Option<BorrowedFd<'_>> {
        self.brokered().map(|l| l.child.as_fd())
    }

    fn brokered(&self) -> Option<&LinkBroker> {
        self.links.as_ref().filter(|l| l.supervisor.is_none())
    }

    /// The Landlock ruleset fd. A supervisor that closes inherited fds in the child before
    /// running its hooks must keep this one open until [`apply_in_child`] has run.
    ///
    /// [`apply_in_child`]: PreparedSandbox::apply_in_child
    pub fn ruleset_fd(&self) -> BorrowedFd<'_> {
        self.ruleset.as_fd()
    }

    /// Irreversibly sandboxes the **calling thread**: sets `no_new_privs`, restricts it with the
    /// Landlock ruleset, installs the seccomp program. Call it in the child between `fork` and
    /// `exec` (calling it anywhere else sandboxes that thread of your process).
    ///
    /// Async-signal-safe and TLS-free: safe in a vfork-style child that shares the parent's
    /// memory. After the isolation's namespaces and mounts (module `isolate`), it makes three raw
    /// system calls (`prctl`, `landlock_restrict_self`, `seccomp`, issued with inline assembly by
    /// the `syscalls` crate), all on memory prepared in the parent; it allocates nothing, and never reads or writes `errno`: glibc's wrappers would
    /// write the failure into the thread-local `errno`, which in a `clone(CLONE_VM |
    /// CLONE_VFORK)` child is the *parent thread's* slot. The errno of a failed step comes back
    /// in [`ApplyError::errno`] instead.
    pub fn apply_in_child(&self) -> Result<(), ApplyError> {
        use syscalls::{Sysno, syscall3, syscall5};
        // Namespaces and mounts need the capabilities that the next step drops.
        if let Some(isolation) = &self.isolation {
            isolation.enter(self.ruleset.as_raw_fd())?;
        }
        // The private `/dev/shm` the supervisor will link in, opened in the new root before
        // anything else can change it.
        let shm = match self.brokered() {
            Some(_) => Some(isolate::open_private_shm().map_err(|errno| ApplyError {
                stage: ApplyStage::Seccomp,
                errno,
            })?),
            None => None,
        };
        isolate::drop_capabilities()?;
        // no_new_privs first: landlock_restrict_self and seccomp both require it of an
        // unprivileged caller, and it keeps setuid binaries from gaining privileges.
        // SAFETY: prctl with integer arguments only; no memory is passed.
        unsafe { syscall5(Sysno::prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }
            .map_err(|e| apply_error(ApplyStage::NoNewPrivs, e))?;
        // `ruleset` is a valid open fd (>= 0) for as long as `self` lives.
        let ruleset = self.ruleset.as_raw_fd() as usize;
        // SAFETY: a ruleset fd and no flags; the kernel reads no memory of ours.
        unsafe { syscall3(Sysno::landlock_restrict_self, ruleset, 0, 0) }
            .map_err(|e| apply_error(ApplyStage::Landlock, e))?;
        let (filter, flags) = match self.brokered() {
            Some(links) => (&links.filter, SECCOMP_FILTER_FLAG_NEW_LISTENER),
            None => (&self.filter, 0),
        };
        // The length was checked against BPF_MAXINSNS in `prepare`.
        let fprog = libc::sock_fprog {
            len: u16::try_from(filter.len()).unwrap_or(u16::MAX),
            filter: filter.as_ptr().cast_mut(),
        };
        // SAFETY: `fprog` points at `len` instructions owned by `self`, alive for the call; the
        // kernel copies them.
        let installed = unsafe {
            syscall3(
                Sysno::seccomp,
                SECCOMP_SET_MODE_FILTER,
                flags,
                &fprog as *const libc::sock_fprog as usize,
            )
        }
        .map_err(|e| apply_error(ApplyStage::Seccomp, e))?;
        if let (Some(links), Some(shm)) = (self.brokered(), shm) {
            // With NEW_LISTENER the call returns the listener (close-on-exec).
            let listener = installed as i32;
            let sent = isolate::send_two_fds(links.child.as_raw_fd(), [listener, shm]);
            isolate::close_fd(listener);
            isolate::close_fd(shm);
            sent.map_err(|errno| ApplyError {
                stage: ApplyStage::Seccomp,
                errno,
            })?;
        }
        Ok(())
    }

    /// Applies this sandbox to `command`'s child through `pre_exec` and returns what it will
    /// enforce. If applying fails in the child, `spawn` returns that errno as an
    /// `std::io::Error` and nothing runs.
    ///
    /// ```no_run
    /// use linux_sandbox::{Access, Policy};
    /// use std::process::Command;
    ///
    /// let mut command = Command::new("/usr/bin/true");
    /// let sandbox = Policy::new()
    ///     .allow("/usr", Access::READ | Access::EXECUTE)
    ///     .allow_if_exists("/lib64", Access::READ | Access::EXECUTE)
    ///     .prepare()?;
    /// let enforcement = sandbox.install(&mut command);
    /// println!("{enforcement}");
    /// assert!(command.status()?.success());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn install(self, command: &mut std::process::Command) -> Enforcement {
        use std::os::unix::process::CommandExt;
        let enforcement = self.enforcement;
        // SAFETY: the closure is async-signal-safe (see `apply_in_child`): it allocates nothing
        // and makes only raw syscalls, as `pre_exec` requires.
        unsafe {
            command.pre_exec(move || self.apply_in_child().map_err(std::io::Error::from));
        }
        enforcement
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage_number(stage: ApplyStage) -> i32 {
        match stage {
            ApplyStage::Namespaces => 1,
            ApplyStage::Capabilities => 2,
            ApplyStage::NoNewPrivs => 3,
            ApplyStage::Landlock => 4,
            _ => 5,
        }
    }

    /// Runs `apply_in_child` on `sandbox` in a forked child whose thread-local `errno` holds a
    /// sentinel, and returns (the result, whether `errno` still held the sentinel afterwards).
    fn apply_in_forked_child(sandbox: &PreparedSandbox) -> (Result<(), ApplyError>, bool) {
        const SENTINEL: i32 = 4321;
        let mut fds = [0; 2];
        // SAFETY: `fds` is a valid out-array of two ints.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the child runs only async-signal-safe code (errno access, the raw syscalls of
        // `apply_in_child`, write, _exit) on memory that exists before the fork.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // SAFETY: this thread's errno slot; async-signal-safe calls only; _exit never returns.
            unsafe {
                *libc::__errno_location() = SENTINEL;
                let (stage, errno) = match sandbox.apply_in_child() {
                    Ok(()) => (0, 0),
                    Err(e) => (stage_number(e.stage), e.errno),
                };
                let kept = i32::from(*libc::__errno_location() == SENTINEL);
                let report = [stage, errno, kept];
                libc::write(fds[1], report.as_ptr().cast(), 12);
                libc::_exit(0);
            }
        }
        let mut report = [0i32; 3];
        // SAFETY: our pipe ends, a local buffer, our own child.
        unsafe {
            libc::close(fds[1]);
            assert_eq!(libc::read(fds[0], report.as_mut_ptr().cast(), 12), 12);
            libc::close(fds[0]);
            let mut status = 0;
            assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
        }
        let stage = [
            ApplyStage::Namespaces,
            ApplyStage::Capabilities,
            ApplyStage::NoNewPrivs,
            ApplyStage::Landlock,
            ApplyStage::Seccomp,
        ]
        .into_iter()
        .find(|&s| stage_number(s) == report[0]);
        let result = match stage {
            None => Ok(()),
            Some(stage) => Err(ApplyError {
                stage,
                errno: report[1],
            }),
        };
        (result, report[2] == 1)
    }

    #[test]
    fn apply_in_child_reports_the_kernels_errno_and_leaves_thread_errno_alone() {
        if !testkit::sandbox_available() {
            return;
        }
        let good = Policy::new().prepare().unwrap();
        let (result, kept) = apply_in_forked_child(&good);
        assert_eq!(result, Ok(()));
        assert!(kept, "apply_in_child wrote errno on success");

        // Not a ruleset: landlock_restrict_self fails with EBADFD.
        let not_a_ruleset = PreparedSandbox {
            ruleset: rustix::fs::open(
                "/dev/null",
                rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )
            .unwrap(),
            filter: good.filter.clone(),
            enforcement: good.enforcement,
            isolation: None,
            links: None,
        };
        let (result, kept) = apply_in_forked_child(&not_a_ruleset);
        assert_eq!(
            result,
            Err(ApplyError {
                stage: ApplyStage::Landlock,
                errno: libc::EBADFD
            })
        );
        assert!(
            kept,
            "apply_in_child wrote errno after a failed landlock step"
        );

        // An invalid BPF opcode: seccomp fails with EINVAL.
        let mut bad_filter = Policy::new().prepare().unwrap();
        bad_filter.filter = vec![libc::sock_filter {
            code: 0xffff,
            jt: 0,
            jf: 0,
            k: 0,
        }];
        let (result, kept) = apply_in_forked_child(&bad_filter);
        assert_eq!(
            result,
            Err(ApplyError {
                stage: ApplyStage::Seccomp,
                errno: libc::EINVAL
            })
        );
        assert!(
            kept,
            "apply_in_child wrote errno after a failed seccomp step"
        );
    }

    fn cached(path: &Path) -> Option<Arc<OwnedFd>> {
        crate::syscache::shared().cached(path)
    }

    #[test]
    fn two_system_paths_to_one_directory_make_one_rule_with_both_grants() {
        // As /bin and /usr/bin with merged /usr.
        let dir = tempfile::tempdir().unwrap();
        let (real, link) = (dir.path().join("usr-bin"), dir.path().join("bin"));
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap();
        let policy = Policy::new()
            .allow_system(&link, Access::READ)
            .allow_system(&other, Access::READ)
            .allow_system(&real, Access::READ | Access::WRITE);
        let opened = policy.open_paths().unwrap();
        assert_eq!(opened.len(), 2);
        assert_eq!(opened[0].access, Access::READ | Access::WRITE);
        assert_eq!(opened[1].access, Access::READ);
        // The caller's own paths are never merged (a FUSE server may give two files one inode
        // number); Landlock merges rules on one inode by itself.
        let policy = Policy::new()
            .allow(&link, Access::READ)
            .allow(&real, Access::READ | Access::WRITE);
        assert_eq!(policy.open_paths().unwrap().len(), 2);
    }

    #[test]
    fn a_fifo_named_as_the_program_never_blocks_prepare() {
        use std::os::unix::fs::OpenOptionsExt;
        // Reading a FIFO's "header" would wait for a writer forever (a FIFO
        // in a toolchain file would hang the host). The interpreter is read non-blocking and only
        // from a regular file, so prepare answers at once.
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("program");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o700) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = Policy::single_program(&fifo)
                .allow_system("/usr", Access::READ)
                .prepare()
                .map(drop);
            let _ = tx.send(r);
        });
        let answered = rx.recv_timeout(std::time::Duration::from_secs(10));
        if answered.is_err() {
            // Unblock the thread before failing, so the test binary can exit.
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(dir.path().join("program"));
        }
        assert!(answered.is_ok(), "prepare blocked on a FIFO program");
    }

    /// `allow_system_file` grants the file its caller judged, whatever the path names when the
    /// policy is prepared (a secret may be swapped onto a judged `/etc` name
    /// between the two), with its path as the canonical one and the cache never asked.
    #[test]
    fn a_system_file_rule_is_made_on_the_judged_file_not_on_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let (public, secret) = (dir.path().join("public"), dir.path().join("secret"));
        std::fs::write(&public, "p").unwrap();
        std::fs::write(&secret, "s").unwrap();
        let parent = rustix::fs::open(
            dir.path(),
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        let judged = crate::SystemFile::open_beneath(parent.as_fd(), c"public", false).unwrap();
        std::fs::rename(&secret, &public).unwrap();
        let policy = Policy::new().allow_system_file(&public, &judged, Access::READ);
        let opened = policy.open_paths().unwrap();
        assert_eq!(opened.len(), 1);
        let granted = rustix::fs::fstat(&*opened[0].fd).unwrap();
        assert_eq!((granted.st_dev, granted.st_ino), judged.dev_ino());
        let now = rustix::fs::stat(&public).unwrap();
        assert_ne!((granted.st_dev, granted.st_ino), (now.st_dev, now.st_ino));
        assert_eq!(opened[0].canonical.as_deref(), Some(public.as_path()));
        assert!(cached(&public).is_none(), "the cache was asked");
    }

    #[test]
    fn system_paths_are_cached_on_their_current_inode_and_user_paths_never() {
        if !testkit::sandbox_available() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (system, user) = (dir.path().join("system"), dir.path().join("user"));
        std::fs::write(&system, "s").unwrap();
        std::fs::write(&user, "u").unwrap();
        let policy = Policy::new()
            .allow_system(&system, Access::READ)
            .allow(&user, Access::READ)
            .allow_if_exists(dir.path(), Access::READ);
        // Reuse across calls is pinned in `syscache`'s tests (this cache is shared with the
        // other tests of this binary, whose temp files rightly empty it now and then).
        // Prepared and looked at again until one look finds it cached: another test's temp
        // files in the shared temp dir may empty the cache between the two (a flake in CI).
        let held_is_on_disk = || {
            for _ in 0..100 {
                policy.prepare().unwrap();
                let Some(held) = cached(&system) else {
                    continue;
                };
                let on_disk = rustix::fs::stat(&system).unwrap();
                let held = rustix::fs::fstat(&*held).unwrap();
                return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino);
            }
            panic!("the system path was never found cached after 100 prepares");
        };
        policy.prepare().unwrap();
        assert!(held_is_on_disk());
        assert!(cached(&user).is_none());
        assert!(cached(dir.path()).is_none());

        // Replaced: a descriptor on the new inode.
        std::fs::write(dir.path().join("next"), "t").unwrap();
        std::fs::rename(dir.path().join("next"), &system).unwrap();
        assert!(held_is_on_disk());

        // Gone: skipped like allow_if_exists, and dropped from the cache.
        std::fs::remove_file(&system).unwrap();
        policy.prepare().unwrap();
        assert!(cached(&system).is_none());
    }

    #[test]
    fn a_shell_policy_that_refuses_uncontained_runs_is_refused_below_abi_6_without_a_pid_namespace()
    {
        if !probe().can_sandbox() {
            eprintln!("skipped: no sandbox here:\n{}", probe());
            return;
        }
        let launch = crate::Launch {
            own_user_namespace: true,
            own_pid_namespace: false,
        };
        let err = Policy::new()
            .refuse_uncontained_shell()
            .launch(launch)
            .limit_landlock_abi(5)
            .prepare()
            .unwrap_err();
        assert!(
            matches!(err, SandboxError::ShellUncontained { .. }),
            "{err}"
        );
        assert!(err.is_unavailable(), "{err}");
        // A single program keeps running there, its gaps reported.
        let single = Policy::single_program("/usr/bin/true")
            .refuse_uncontained_shell()
            .launch(launch)
            .limit_landlock_abi(5);
        assert!(single.prepare().is_ok());
        // Without the opt-in the gap is reported, not refused (the crate's own callers).
        let gaps = Policy::new()
            .launch(launch)
            .limit_landlock_abi(5)
            .prepare()
            .map(|p| p.enforcement().gaps());
        if let Ok(gaps) = gaps {
            assert!(gaps.contains(Gaps::SIGNAL_SCOPE));
        }
    }
}
