//! The Linux mechanisms of the per-call resource limits (LIM-1, LIM-2; [`crate::limits`]).
//!
//! **Owns:** finding the cgroup hierarchies this host may use (once per process), a cgroup of
//! its own for each call (made before the spawn, joined by the command's first process before
//! `execve`, so everything it starts is inside), watching it for a hit while the call runs, and
//! removing it after the tree is gone; the rlimits the first process sets for what no cgroup
//! holds; and the sweep of cgroups a dead host left.
//!
//! In order of preference, per controller (`pids`, `memory`):
//! 1. **cgroup v2**, a child of the host's own cgroup where that cgroup delegates the
//!    controller to its children (`cgroup.subtree_control`). A host alone in a delegated cgroup
//!    whose children do not have it yet (a systemd unit with `Delegate=yes`) first moves itself
//!    into a leaf `agent-exec-host` beside the calls' cgroups and enables the controllers: the
//!    kernel lets only a cgroup without processes delegate ("no internal processes"). A host
//!    sharing its cgroup with other processes never moves anything.
//! 2. **cgroup v1**, a child of the host's cgroup in the `pids` and `memory` hierarchies, where
//!    the host may make one (a root host on a machine without v2 controllers).
//! 3. **rlimits** set by the first process before `execve`: `RLIMIT_NPROC` when the command has a
//!    user namespace of its own (the kernel counts a user's processes per user namespace, so it
//!    counts this call's only), `RLIMIT_DATA` for memory (per process), `RLIMIT_FSIZE` for the
//!    temp dir where no tmpfs bounds it (per file). `RLIMIT_NOFILE` is always set (no cgroup
//!    counts descriptors), and `RLIMIT_CORE` is 0: a core dump of a large process is a large
//!    write, and a piped `core_pattern` hands it to a program running outside the sandbox.
//!
//! A hit is seen where the kernel counts it: `pids.events` (`max`: a fork refused),
//! `memory.events` or v1's `memory.oom_control` (`oom_kill`). The runner then stops the tree.
//! v2's `memory.oom.group` is set, so an out-of-memory kill takes the whole cgroup at once.
//!
//! Names: `agent-exec.<pid>.<start time>.<n>`, so the sweep (at the first call of a process)
//! removes only the cgroups of hosts that are gone; a cgroup with processes cannot be removed
//! (`EBUSY`) and is left alone.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{Mode, OFlags};
use rustix::process::{Resource, Rlimit};

use crate::limits::{Enforcer, Limit, LimitHit, LimitsReport, ResourceLimits};

/// The prefix of every call's cgroup (and of the sweep's pattern).
const PREFIX: &str = "agent-exec.";

/// The hierarchies this process may use, found once.
#[derive(Debug, Default)]
struct Hierarchies {
    /// The v2 parent of the calls' cgroups and which controllers its children get.
    v2: Option<(PathBuf, bool, bool)>,
    /// The v1 `pids` parent.
    pids_v1: Option<PathBuf>,
    /// The v1 `memory` parent.
    memory_v1: Option<PathBuf>,
    /// The v1 `cpu` parent: each call is a scheduling group of its own, so a call of 900
    /// busy processes gets one group's share of the CPU, not 900 processes' (the host and other
    /// calls stay responsive; no limit, only fairness).
    cpu_v1: Option<PathBuf>,
}

fn hierarchies() -> &'static Hierarchies {
    static FOUND: OnceLock<Hierarchies> = OnceLock::new();
    FOUND.get_or_init(|| {
        let found = find().unwrap_or_default();
        let mut parents: Vec<&Path> = Vec::new();
        parents.extend(found.v2.as_ref().map(|(p, ..)| p.as_path()));
        parents.extend(found.pids_v1.as_deref());
        parents.extend(found.memory_v1.as_deref());
        parents.extend(found.cpu_v1.as_deref());
        for parent in parents {
            sweep(parent);
        }
        found
    })
}

/// Reads `/proc/self/mountinfo` and `/proc/self/cgroup`.
fn find() -> io::Result<Hierarchies> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo")?;
    let own = fs::read_to_string("/proc/self/cgroup")?;
    let mounts = parse_cgroup_mounts(&mountinfo);
    let own = parse_own_cgroups(&own);
    let mut found = Hierarchies::default();
    for (mount, controllers) in &mounts {
        let Some(controllers) = controllers else {
            // cgroup2
            if let Some(path) = own.iter().find(|(c, _)| c.is_empty()).map(|(_, p)| p) {
                let base = join_cgroup(mount, path);
                found.v2 = v2_parent(&base);
            }
            continue;
        };
        for wanted in ["pids", "memory", "cpu"] {
            if !controllers.iter().any(|c| c == wanted) {
                continue;
            }
            let Some((_, path)) = own.iter().find(|(c, _)| c.split(',').any(|c| c == wanted))
            else {
                continue;
            };
            let base = join_cgroup(mount, path);
            if base.is_dir() {
                match wanted {
                    "pids" => found.pids_v1 = Some(base),
                    "memory" => found.memory_v1 = Some(base),
                    _ => found.cpu_v1 = Some(base),
                }
            }
        }
    }
    Ok(found)
}

fn join_cgroup(mount: &Path, path: &str) -> PathBuf {
    let mut base = mount.to_path_buf();
    for part in path
        .split('/')
        .filter(|p| !p.is_empty() && *p != "." && *p != "..")
    {
        base.push(part);
    }
    base
}

/// The cgroup mounts of a `mountinfo` text: (mount point, `Some(v1 controllers)` or `None` for
/// cgroup2). Malformed lines are skipped.
pub fn parse_cgroup_mounts(mountinfo: &str) -> Vec<(PathBuf, Option<Vec<String>>)> {
    let mut mounts = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let Some(point) = left.split(' ').nth(4) else {
            continue;
        };
        let mut right = right.split(' ');
        let (Some(fstype), Some(_source), Some(options)) =
            (right.next(), right.next(), right.next())
        else {
            continue;
        };
        let point = PathBuf::from(unescape_octal(point));
        match fstype {
            "cgroup2" => mounts.push((point, None)),
            "cgroup" => mounts.push((point, Some(options.split(',').map(str::to_owned).collect()))),
            _ => {}
        }
    }
    mounts
}

/// `mountinfo` writes space, tab, newline and backslash as `\ooo`.
fn unescape_octal(s: &str) -> std::ffi::OsString {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)))
            .map(|d| d.iter().fold(0u32, |n, b| n * 8 + u32::from(b - b'0')));
        match escaped.and_then(|n| u8::try_from(n).ok()) {
            Some(b) => {
                out.push(b);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    std::ffi::OsStr::from_bytes(&out).to_owned()
}

/// The lines of `/proc/self/cgroup`: (controllers, path); v2's line has no controllers.
pub fn parse_own_cgroups(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let _id = parts.next()?;
            let controllers = parts.next()?;
            let path = parts.next()?;
            path.starts_with('/')
                .then(|| (controllers.to_owned(), path.to_owned()))
        })
        .collect()
}

/// The v2 parent for the calls' cgroups, if it gives its children `pids` or `memory` (or can
/// be made to: module docs).
fn v2_parent(base: &Path) -> Option<(PathBuf, bool, bool)> {
    let words = |name: &str| -> Vec<String> {
        fs::read_to_string(base.join(name))
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    let available = words("cgroup.controllers");
    let wanted: Vec<&str> = ["pids", "memory", "cpu"]
        .into_iter()
        .filter(|c| available.iter().any(|a| a == c))
        .collect();
    if wanted.is_empty() {
        return None;
    }
    let delegated = |list: &[String]| {
        (
            list.iter().any(|c| c == "pids"),
            list.iter().any(|c| c == "memory"),
        )
    };
    let mut enabled = delegated(&words("cgroup.subtree_control"));
    if enabled == (false, false) {
        // Only a host alone in its cgroup moves itself (module docs).
        let procs = words("cgroup.procs");
        let me = std::process::id().to_string();
        if procs != [me.clone()] {
            return None;
        }
        let leaf = base.join("agent-exec-host");
        let made = fs::create_dir(&leaf).or_else(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                Ok(())
            } else {
                Err(e)
            }
        });
        if made
            .and_then(|()| fs::write(leaf.join("cgroup.procs"), &me))
            .is_err()
        {
            return None;
        }
        // One at a time: a controller the kernel will not delegate (`cpu` with a realtime
        // process in the subtree) must not cost the others.
        for controller in &wanted {
            let _ = fs::write(
                base.join("cgroup.subtree_control"),
                format!("+{controller}"),
            );
        }
        enabled = delegated(&words("cgroup.subtree_control"));
    }
    (enabled != (false, false)).then(|| (base.to_path_buf(), enabled.0, enabled.1))
}

/// This host's identity for the names of its calls' cgroups.
fn owner() -> (u32, u64) {
    let pid = std::process::id();
    (
        pid,
        proctree::ProcessId::of(pid).map_or(0, |id| id.start_time()),
    )
}

/// Removes the calls' cgroups in `parent` whose host is gone.
fn sweep(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((pid, start)) = name.to_str().and_then(parse_name) else {
            continue;
        };
        let alive = proctree::ProcessId::of(pid).is_some_and(|id| id.start_time() == start);
        if !alive {
            // A cgroup with processes in it refuses (EBUSY): left as it is.
            let _ = fs::remove_dir(entry.path());
        }
    }
}

/// `agent-exec.<pid>.<start>.<n>` → (pid, start).
pub fn parse_name(name: &str) -> Option<(u32, u64)> {
    let mut parts = name.strip_prefix(PREFIX)?.split('.');
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    let _n: u64 = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((pid, start))
}

/// One made cgroup: removed when the call's limits drop.
#[derive(Debug)]
struct Group {
    parent: OwnedFd,
    name: CString,
}

/// A counter the kernel keeps of one limit's hits, and what confirms a hit was this cgroup's own
/// limit and not an enclosing one's (a container's `pids.max`, a systemd `MemoryMax`, the whole
/// machine out of memory): v1 counts a fork refused by an ancestor in the task's own
/// `pids.events`, and `oom_kill` counts every kill of a member, whoever's limit caused it.
#[derive(Debug)]
struct Watch {
    limit: Limit,
    file: OwnedFd,
    key: &'static str,
    /// Any one of them confirms; none opened (a kernel without them): unconfirmed, counted as
    /// the call's own.
    confirm: Vec<(OwnedFd, Confirm)>,
}

/// How a [`Watch`]'s hit is confirmed as this cgroup's own.
#[derive(Debug, Clone, Copy)]
enum Confirm {
    /// The file holds one number that reached the call's limit (`pids.peak`).
    ReachedLimit,
    /// The file holds a byte count that reached the call's limit as the kernel keeps it, in
    /// whole pages (v1's `memory.max_usage_in_bytes`; its `failcnt` stays 0 when the memory +
    /// swap counter is the one that refused).
    ReachedLimitPages,
    /// The `key value` file counts the cgroup's own limit hits under `key` (`memory.events`
    /// `max`).
    Counted(&'static str),
}

/// The rlimits the command's first process sets, and the cgroups it joins (all prepared in the
/// parent; [`ChildLimits::apply`] only makes system calls).
#[derive(Debug, Default)]
pub(crate) struct ChildLimits {
    /// The file of each cgroup to join ([`Join`]), opened for writing, close-on-exec.
    join: Vec<OwnedFd>,
    rlimits: Vec<(Resource, u64)>,
    /// Limits of the command's own user namespace to write (`/proc/sys/user/…`, value), best
    /// effort: only where it has one (never the host's).
    namespace_limits: Vec<(CString, Vec<u8>)>,
}

impl ChildLimits {
    /// The descriptors the supervisor must leave open in the first process until the hook ran.
    pub(crate) fn fds(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.join.iter().map(AsFd::as_fd)
    }

    /// Joins the cgroups, then sets the rlimits (soft and hard: the command cannot raise them
    /// back; it holds no capability). Async-signal-safe: raw system calls on prepared data.
    pub(crate) fn apply(&self) -> Result<(), i32> {
        for fd in &self.join {
            // "0": the writer (v2: its process; v1 `tasks`: its one thread, the whole first
            // process), with everything it will start.
            rustix::io::write(fd, b"0").map_err(|e| e.raw_os_error())?;
        }
        for (path, value) in &self.namespace_limits {
            // Best effort: a kernel without the file, or one that refuses, leaves the host's
            // per-user limit as the only bound.
            if let Ok(fd) = rustix::fs::open(
                path.as_c_str(),
                OFlags::WRONLY | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                let _ = rustix::io::write(&fd, value);
            }
        }
        for &(resource, value) in &self.rlimits {
            let limit = Rlimit {
                current: Some(value),
                maximum: Some(value),
            };
            rustix::process::setrlimit(resource, limit).map_err(|e| e.raw_os_error())?;
        }
        Ok(())
    }
}

/// One call's limits, armed before the spawn: the cgroups made, what the child applies, and the
/// report of which mechanism holds each limit.
#[derive(Debug)]
pub(crate) struct Armed {
    groups: Vec<Group>,
    watches: Vec<Watch>,
    /// Filled while arming, then handed to the spawn.
    child: ChildLimits,
    pub(crate) report: LimitsReport,
    /// The temp dir's tmpfs as the command sees it ([`watch_tree`](Armed::watch_tree)).
    temp: Option<OwnedFd>,
    /// The command's own `/proc`, where only `RLIMIT_NPROC` holds the process limit.
    procs: Option<OwnedFd>,
}

/// What the sandbox can do for the limits of this call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Situation {
    /// The command runs in a user namespace of its own.
    pub(crate) own_user_namespace: bool,
    /// A tmpfs bounds the temp dir.
    pub(crate) bounded_temp: bool,
    /// A single program (`run`): `RLIMIT_DATA` is set even where a memory cgroup holds the
    /// tree, because programs such as GNU `sort` size their buffers from it (and from the
    /// machine's RAM otherwise, which the cgroup would then kill them for).
    pub(crate) single_program: bool,
}

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

impl Armed {
    /// Makes the call's cgroups (where this host may) and decides the rlimits, and returns what
    /// the command's first process applies. Never fails: what cannot be set up is reported as
    /// enforced another way, or not at all.
    pub(crate) fn arm(limits: &ResourceLimits, situation: Situation) -> (Armed, ChildLimits) {
        let found = hierarchies();
        let (pid, start) = owner();
        let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let name = format!("{PREFIX}{pid}.{start}.{n}");
        let mut armed = Armed {
            groups: Vec::new(),
            watches: Vec::new(),
            child: ChildLimits::default(),
            report: LimitsReport {
                limits: *limits,
                processes: Enforcer::NotEnforced,
                memory: Enforcer::NotEnforced,
                temp_dir: Enforcer::NotEnforced,
                open_files: Enforcer::NotEnforced,
            },
            temp: None,
            procs: None,
        };
        if let Some((parent, pids, memory)) = &found.v2 {
            if armed
                .make(
                    parent,
                    &name,
                    &v2_files(limits, *pids, *memory),
                    Join::Process,
                )
                .is_ok()
            {
                if *pids {
                    armed.report.processes = Enforcer::CgroupV2;
                }
                if *memory {
                    armed.report.memory = Enforcer::CgroupV2;
                }
            }
        }
        if armed.report.processes == Enforcer::NotEnforced {
            if let Some(parent) = &found.pids_v1 {
                if armed
                    .make(parent, &name, &pids_v1_files(limits), Join::Thread)
                    .is_ok()
                {
                    armed.report.processes = Enforcer::CgroupV1;
                }
            }
        }
        if armed.report.memory == Enforcer::NotEnforced {
            if let Some(parent) = &found.memory_v1 {
                if armed
                    .make(parent, &name, &memory_v1_files(limits), Join::Thread)
                    .is_ok()
                {
                    armed.report.memory = Enforcer::CgroupV1;
                }
            }
        }
        // Fairness only: a failure changes no limit (v2's `cpu`, where delegated, comes with
        // the v2 cgroup above).
        if let Some(parent) = &found.cpu_v1 {
            let _ = armed.make(parent, &name, &CgroupFiles::default(), Join::Thread);
        }
        armed.decide_rlimits(limits, situation);
        let child = std::mem::take(&mut armed.child);
        (armed, child)
    }

    fn decide_rlimits(&mut self, limits: &ResourceLimits, situation: Situation) {
        let mut wanted = vec![
            (Resource::Nofile, u64::from(limits.open_files.get())),
            (Resource::Core, 0),
        ];
        self.report.open_files = Enforcer::ProcessRlimit;
        if situation.own_user_namespace {
            self.child.namespace_limits = shared_per_user_limits();
        }
        if self.report.processes == Enforcer::NotEnforced && situation.own_user_namespace {
            wanted.push((Resource::Nproc, u64::from(limits.processes.get())));
            self.report.processes = Enforcer::UserNamespaceRlimit;
        }
        if self.report.memory == Enforcer::NotEnforced {
            wanted.push((Resource::Data, limits.memory.get()));
            self.report.memory = Enforcer::ProcessRlimit;
        } else if situation.single_program {
            wanted.push((Resource::Data, limits.memory.get()));
        }
        if situation.bounded_temp {
            self.report.temp_dir = Enforcer::Tmpfs;
        } else {
            wanted.push((Resource::Fsize, limits.temp_dir.get()));
            self.report.temp_dir = Enforcer::ProcessRlimit;
        }
        // Never above the hard limit the host has: only root may raise one, and a lower limit
        // already holds ours.
        self.child.rlimits = wanted
            .into_iter()
            .map(|(resource, value)| {
                let hard = rustix::process::getrlimit(resource).maximum;
                (resource, hard.map_or(value, |hard| hard.min(value)))
            })
            .collect();
        // The report names the values applied: a lower hard limit of the host's holds instead.
        for &(resource, applied) in &self.child.rlimits {
            let limits = &mut self.report.limits;
            let narrow = |v: u64| u32::try_from(v).ok().and_then(std::num::NonZeroU32::new);
            match resource {
                Resource::Nofile => {
                    if let Some(n) = narrow(applied) {
                        limits.open_files = limits.open_files.min(n);
                    }
                }
                Resource::Nproc if self.report.processes == Enforcer::UserNamespaceRlimit => {
                    if let Some(n) = narrow(applied) {
                        limits.processes = limits.processes.min(n);
                    }
                }
                Resource::Data if self.report.memory == Enforcer::ProcessRlimit => {
                    if let Some(n) = std::num::NonZeroU64::new(applied) {
                        limits.memory = limits.memory.min(n);
                    }
                }
                Resource::Fsize if self.report.temp_dir == Enforcer::ProcessRlimit => {
                    if let Some(n) = std::num::NonZeroU64::new(applied) {
                        limits.temp_dir = limits.temp_dir.min(n);
                    }
                }
                _ => {}
            }
        }
    }

    /// Makes `parent/name`, writes `files` (name, value, required) into it, opens its `join`
    /// file (see [`Join`]) and its counters to watch. On failure what was made is removed.
    fn make(
        &mut self,
        parent: &Path,
        name: &str,
        files: &CgroupFiles,
        join: Join,
    ) -> io::Result<()> {
        let parent = rustix::fs::open(
            parent,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let cname = CString::new(name).map_err(io::Error::other)?;
        rustix::fs::mkdirat(&parent, cname.as_c_str(), Mode::from_raw_mode(0o755))?;
        let group = Group {
            parent,
            name: cname,
        };
        let dir = match rustix::fs::openat(
            &group.parent,
            group.name.as_c_str(),
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        ) {
            Ok(dir) => dir,
            Err(e) => {
                group.remove();
                return Err(e.into());
            }
        };
        let set_up = (|| -> io::Result<(OwnedFd, Vec<Watch>)> {
            for (file, value, required) in &files.limits {
                match write_at(&dir, file, value) {
                    Ok(()) => {}
                    Err(e) if !required && e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            // Above the supervisor's plumbing (0-4, and what it moves there): the hook keeps it
            // open at its number.
            let procs =
                rustix::io::fcntl_dupfd_cloexec(open_at(&dir, join.file(), OFlags::WRONLY)?, 10)?;
            let mut watches = Vec::new();
            for (limit, file, key, confirm) in &files.watch {
                let file = open_at(&dir, file, OFlags::RDONLY)?;
                // A kernel without the confirming files (`pids.peak` is Linux 6.1+) leaves
                // the hit unconfirmed: counted as the call's own.
                let confirm = confirm
                    .iter()
                    .filter_map(|(name, how)| {
                        open_at(&dir, name, OFlags::RDONLY)
                            .ok()
                            .map(|fd| (fd, *how))
                    })
                    .collect();
                watches.push(Watch {
                    limit: *limit,
                    file,
                    key,
                    confirm,
                });
            }
            Ok((procs, watches))
        })();
        match set_up {
            Ok((procs, watches)) => {
                self.child.join.push(procs);
                self.watches.extend(watches);
                self.groups.push(group);
                Ok(())
            }
            Err(e) => {
                group.remove();
                Err(e)
            }
        }
    }

    /// Starts watching the running tree through `main` (its first process, alive): the temp
    /// dir's tmpfs `temp` as the command sees it (to tell a full one), and, where only
    /// `RLIMIT_NPROC` holds the process limit and the command has a `/proc` of its own, that
    /// `/proc` (forks fail once the tree stands at the limit). A sample each tick, so the second
    /// is best effort: a tree that keeps losing the processes whose forks failed may be found
    /// below the mark every time, and then runs on to its deadline, still held.
    pub(crate) fn watch_tree(&mut self, main: u32, temp: Option<&Path>, private_proc: bool) {
        if self.report.temp_dir == Enforcer::Tmpfs {
            self.temp = temp.and_then(|temp| open_temp_dir_of(main, temp));
        }
        if self.report.processes == Enforcer::UserNamespaceRlimit && private_proc {
            self.procs = open_proc_of(main);
        }
    }

    /// Stops watching the tree: its tmpfs goes with the last descriptor of it.
    pub(crate) fn unwatch(&mut self) {
        self.temp = None;
        self.procs = None;
    }

    /// The first limit hit seen: the kernel's counters, the command's `/proc` within 3 % of
    /// the process limit, a full temp dir.
    pub(crate) fn hit(&self) -> Option<LimitHit> {
        let hit = |limit| LimitHit {
            limit,
            value: self.report.limits.value(limit),
        };
        let processes = self.report.limits.value(Limit::Processes);
        // Within 3 % (at least 2): a tree held at its limit keeps losing the processes whose
        // forks failed, so a sample rarely finds it exactly there.
        let near = processes.saturating_sub((processes / 32).max(2));
        if self
            .procs
            .as_ref()
            .is_some_and(|fd| processes_in(fd) >= near)
        {
            return Some(hit(Limit::Processes));
        }
        let counted = self.watches.iter().find(|w| {
            let value = self.report.limits.value(w.limit);
            let own = w.confirm.is_empty()
                || w.confirm.iter().any(|(fd, how)| match how {
                    Confirm::ReachedLimit => read_number(fd) >= value,
                    Confirm::ReachedLimitPages => read_number(fd) >= value & !4095,
                    Confirm::Counted(key) => read_counter(fd, key) > 0,
                });
            read_counter(&w.file, w.key) > 0 && own
        });
        if let Some(w) = counted {
            return Some(hit(w.limit));
        }
        self.temp
            .as_ref()
            .filter(|fd| temp_dir_full(fd))
            .map(|_| hit(Limit::TempDir))
    }

    /// Whether `signal` (the main process's) is the kernel's answer to a file larger than the
    /// temp dir's limit where only `RLIMIT_FSIZE` bounds it.
    pub(crate) fn hit_by_signal(&self, signal: Option<i32>) -> Option<LimitHit> {
        (signal == Some(libc::SIGXFSZ) && self.report.temp_dir == Enforcer::ProcessRlimit).then(
            || LimitHit {
                limit: Limit::TempDir,
                value: self.report.limits.temp_dir.get(),
            },
        )
    }
}

impl Drop for Armed {
    /// Removes the call's cgroups: the tree is gone by now (its last processes may still be
    /// leaving the cgroup for a moment, hence the few retries; the sweep of a later host takes
    /// what is left).
    fn drop(&mut self) {
        for group in self.groups.drain(..) {
            group.remove();
        }
    }
}

impl Group {
    fn remove(self) {
        for attempt in 0..20 {
            match rustix::fs::unlinkat(
                &self.parent,
                self.name.as_c_str(),
                rustix::fs::AtFlags::REMOVEDIR,
            ) {
                Err(rustix::io::Errno::BUSY) if attempt < 19 => {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                _ => return,
            }
        }
    }
}

/// What one cgroup gets: limit files (name, value, whether it must exist) and counters to watch
/// How the command's first process joins a cgroup: it writes `0` (itself) into this file.
#[derive(Debug, Clone, Copy)]
enum Join {
    /// v2 `cgroup.procs`: the whole thread group. The kernel takes its global
    /// `cgroup_threadgroup_rwsem` for writing, which after an idle spell first waits for an RCU
    /// grace period.
    Process,
    /// v1 `tasks`: the writing thread alone — all of the first process, which is a single thread
    /// (a `CLONE_VM | CLONE_VFORK` child, not a thread of the host), so everything it starts is
    /// inside. A thread moving itself skips that global lock (kernel
    /// `cgroup_procs_write_start`: "If we migrate a single thread … we can skip the global
    /// lock"), so no grace period is waited for. Measured on this machine after 200 ms idle:
    /// 7–16 ms through `cgroup.procs`, 0.2 ms through `tasks` — the largest single cost of an
    /// MCP call that comes after the agent thought for a while. v2 refuses this
    /// across domains (`cgroup.threads`), so v2 keeps [`Join::Process`].
    Thread,
}

impl Join {
    fn file(self) -> &'static str {
        match self {
            Join::Process => "cgroup.procs",
            Join::Thread => "tasks",
        }
    }
}

/// (limit, file, key).
#[derive(Default)]
struct CgroupFiles {
    limits: Vec<(&'static str, String, bool)>,
    watch: Vec<WatchFile>,
}

/// (limit, counter file, key, what confirms a hit as the cgroup's own).
type WatchFile = (
    Limit,
    &'static str,
    &'static str,
    &'static [(&'static str, Confirm)],
);

const PIDS_WATCH: WatchFile = (
    Limit::Processes,
    "pids.events",
    "max",
    &[("pids.peak", Confirm::ReachedLimit)],
);

fn v2_files(limits: &ResourceLimits, pids: bool, memory: bool) -> CgroupFiles {
    let mut files = CgroupFiles {
        limits: Vec::new(),
        watch: Vec::new(),
    };
    if pids {
        files
            .limits
            .push(("pids.max", limits.processes.to_string(), true));
        files.watch.push(PIDS_WATCH);
    }
    if memory {
        files
            .limits
            .push(("memory.max", limits.memory.to_string(), true));
        // No swap: the limit is what the tree holds, not what it pushes onto the disk.
        files
            .limits
            .push(("memory.swap.max", "0".to_owned(), false));
        files
            .limits
            .push(("memory.oom.group", "1".to_owned(), false));
        files.watch.push((
            Limit::Memory,
            "memory.events",
            "oom_kill",
            &[("memory.events", Confirm::Counted("max"))],
        ));
    }
    files
}

fn pids_v1_files(limits: &ResourceLimits) -> CgroupFiles {
    CgroupFiles {
        limits: vec![("pids.max", limits.processes.to_string(), true)],
        watch: vec![PIDS_WATCH],
    }
}

fn memory_v1_files(limits: &ResourceLimits) -> CgroupFiles {
    let bytes = limits.memory.to_string();
    CgroupFiles {
        limits: vec![
            ("memory.limit_in_bytes", bytes.clone(), true),
            // Memory plus swap, where the kernel accounts swap: the same bound.
            ("memory.memsw.limit_in_bytes", bytes, false),
        ],
        watch: vec![(
            Limit::Memory,
            "memory.oom_control",
            "oom_kill",
            &[
                ("memory.max_usage_in_bytes", Confirm::ReachedLimitPages),
                (
                    "memory.memsw.max_usage_in_bytes",
                    Confirm::ReachedLimitPages,
                ),
            ],
        )],
    }
}

fn open_at(dir: &OwnedFd, name: &str, flags: OFlags) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        dir,
        name,
        flags | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )?)
}

fn write_at(dir: &OwnedFd, name: &str, value: &str) -> io::Result<()> {
    let fd = open_at(dir, name, OFlags::WRONLY)?;
    rustix::io::write(&fd, value.as_bytes())?;
    Ok(())
}

/// The value of `key` in a `key value` counter file, read from its start; 0 if unreadable.
fn read_counter(file: &OwnedFd, key: &str) -> u64 {
    let mut buf = [0u8; 512];
    let Ok(n) = rustix::io::pread(file, &mut buf, 0) else {
        return 0;
    };
    counter_value(&String::from_utf8_lossy(&buf[..n]), key)
}

/// The one number a file holds (`pids.peak`, `memory.failcnt`); 0 if unreadable.
fn read_number(file: &OwnedFd) -> u64 {
    let mut buf = [0u8; 64];
    let Ok(n) = rustix::io::pread(file, &mut buf, 0) else {
        return 0;
    };
    String::from_utf8_lossy(&buf[..n])
        .trim()
        .parse()
        .unwrap_or(0)
}

/// The value of `key` in `text` (`key value` lines); 0 when absent.
pub fn counter_value(text: &str, key: &str) -> u64 {
    text.lines()
        .filter_map(|line| line.split_once(' '))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Whether `fd` (an `O_PATH` descriptor of the call's temp dir as the command sees it) is a
/// tmpfs with no free block left: the temp dir is full (LIM-2).
// `f_type`'s C type differs between targets.
#[allow(clippy::useless_conversion)]
fn temp_dir_full(fd: &OwnedFd) -> bool {
    rustix::fs::fstatfs(fd).is_ok_and(|s| {
        i64::from(s.f_type) == i64::from(libc::TMPFS_MAGIC) && s.f_blocks > 0 && s.f_bavail == 0
    })
}

/// Opens the call's temp dir as the process `pid` (a live member of the call's tree) sees it —
/// in its mount namespace, where the tmpfs covers it — to watch how full it is. `None` when the
/// process is gone or the path is not a directory there.
fn open_temp_dir_of(pid: u32, temp: &Path) -> Option<OwnedFd> {
    let mut path = PathBuf::from(format!("/proc/{pid}/root"));
    path.push(temp.strip_prefix("/").ok()?);
    rustix::fs::open(
        &path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

/// Half of each per-user kernel budget the host's user shares with the call:
/// inotify instances and watches are counted per user at every user-namespace level, so a call
/// could take all of the host user's (128 instances by default: the user's IDE and file
/// watchers then fail). The call's own user namespace gets half of the host's value as its
/// limit, written by the command's first process while it still holds its capabilities there.
fn shared_per_user_limits() -> Vec<(CString, Vec<u8>)> {
    [
        (
            "/proc/sys/fs/inotify/max_user_instances",
            c"/proc/sys/user/max_inotify_instances",
        ),
        (
            "/proc/sys/fs/inotify/max_user_watches",
            c"/proc/sys/user/max_inotify_watches",
        ),
    ]
    .into_iter()
    .filter_map(|(host, own)| {
        let value: u64 = fs::read_to_string(host).ok()?.trim().parse().ok()?;
        Some((own.to_owned(), (value / 2).max(1).to_string().into_bytes()))
    })
    .collect()
}

/// The `/proc` the process `pid` (a live member of the call's tree) sees: its PID namespace's,
/// where the call's processes are all there is. `None` when it is gone.
fn open_proc_of(pid: u32) -> Option<OwnedFd> {
    rustix::fs::open(
        format!("/proc/{pid}/root/proc"),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

/// How many processes a PID namespace's `/proc` (`fd`) lists, its PID 1 (the supervisor, of
/// the same user in the same user namespace, so counted by `RLIMIT_NPROC` too) included.
/// Threads are not listed: a tree of threads reaches the limit unseen (forks still fail).
fn processes_in(fd: &OwnedFd) -> u64 {
    let Ok(dup) = rustix::fs::openat(
        fd,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return 0;
    };
    let Ok(mut dir) = rustix::fs::Dir::read_from(&dup) else {
        return 0;
    };
    let mut n = 0u64;
    while let Some(Ok(entry)) = dir.read() {
        if entry.file_name().to_bytes().iter().all(u8::is_ascii_digit) {
            n += 1;
        }
    }
    n
}

/// For `doctor`: how `limits` would be enforced for a shell-kind call here, found the way a
/// call finds it (its cgroups are made and removed again; nothing runs). `bounded_temp`: whether
/// the command would get a private mount namespace (and so the temp dir's tmpfs).
pub fn report_here(limits: &ResourceLimits, bounded_temp: bool) -> LimitsReport {
    let (armed, _child) = Armed::arm(
        limits,
        Situation {
            own_user_namespace: crate::linux::launch().own_user_namespace,
            bounded_temp,
            single_program: !bounded_temp,
        },
    );
    armed.report
}

/// For `doctor`: the cgroup hierarchies this host would use, in words.
pub fn describe() -> String {
    let found = hierarchies();
    let mut parts = Vec::new();
    match &found.v2 {
        Some((p, pids, memory)) => parts.push(format!(
            "cgroup v2 under {} (pids: {}, memory: {})",
            p.display(),
            if *pids { "yes" } else { "no" },
            if *memory { "yes" } else { "no" }
        )),
        None => parts.push("no delegated cgroup v2 subtree".to_owned()),
    }
    for (name, parent) in [("pids", &found.pids_v1), ("memory", &found.memory_v1)] {
        if let Some(p) = parent {
            let writable = rustix::fs::access(p, rustix::fs::Access::WRITE_OK).is_ok();
            parts.push(format!(
                "cgroup v1 {name} under {}{}",
                p.display(),
                if writable {
                    ""
                } else {
                    " (not writable: rlimits instead)"
                }
            ));
        }
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_mounts_are_found_with_their_controllers() {
        let text = "\
35 25 0:30 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 25 0:31 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
37 25 0:32 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
38 25 0:33 / /mnt/with\\040space rw - cgroup2 cgroup2 rw
39 25 0:34 / /proc rw - proc proc rw
garbage line";
        let mounts = parse_cgroup_mounts(text);
        assert_eq!(mounts.len(), 4);
        assert_eq!(mounts[0].0, Path::new("/sys/fs/cgroup/memory"));
        assert!(mounts[0].1.as_ref().unwrap().contains(&"memory".to_owned()));
        assert_eq!(mounts[2].1, None);
        assert_eq!(mounts[3].0, Path::new("/mnt/with space"));
    }

    #[test]
    fn own_cgroup_lines_give_controllers_and_paths() {
        let own = parse_own_cgroups("8:pids:/\n4:memory:/a/b\n0::/user.slice\nbad\n");
        assert_eq!(
            own,
            [
                ("pids".to_owned(), "/".to_owned()),
                ("memory".to_owned(), "/a/b".to_owned()),
                (String::new(), "/user.slice".to_owned())
            ]
        );
        assert_eq!(
            join_cgroup(Path::new("/sys/fs/cgroup/memory"), "/a/../b"),
            Path::new("/sys/fs/cgroup/memory/a/b")
        );
    }

    #[test]
    fn only_names_of_the_calls_own_shape_are_swept() {
        assert_eq!(parse_name("agent-exec.12.345.6"), Some((12, 345)));
        for other in [
            "agent-exec-host",
            "agent-exec.12.345",
            "agent-exec.12.345.6.7",
            "agent-exec.x.345.6",
            "user.slice",
        ] {
            assert_eq!(parse_name(other), None, "{other}");
        }
    }

    #[test]
    fn counters_are_read_by_key() {
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
        assert_eq!(counter_value(v1, "oom_kill"), 2);
        assert_eq!(counter_value("max 0\n", "max"), 0);
        assert_eq!(
            counter_value("low 0\nhigh 0\nmax 5\noom 1\n", "oom_kill"),
            0
        );
        assert_eq!(counter_value("max 17", "max"), 17);
    }
}
