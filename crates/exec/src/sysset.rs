//! The system runtime set of a shell command (`command`, CMD-10, LIVE-1): which system locations
//! it may read, and which of them run programs, derived by rule from what the operating system
//! itself publishes — never a hand list of the files one toolchain happens to need.
//!
//! **Owns** the rules, their evaluation on a live file system, and a process-wide cache of the
//! result that is invalidated when anything the rules looked at changes.
//!
//! **Refuses** user paths (workspaces, extra paths, temp dirs: `linux.rs` grants those on their
//! descriptors), `/proc`, `/sys` and devices (fixed lists in `linux.rs`), and everything a package
//! manager keeps as data or configuration: `/usr/local/etc`, `/usr/local/var`, `/var/lib`, `/var`
//! as a whole, home directories. Seed 000: the system's program and library directories, not the
//! whole of `/usr` as such.
//!
//! # The rules
//!
//! 1. **Program and library trees** (read + execute): `/bin`, `/sbin`, `/usr/{bin,sbin,libexec}`,
//!    every `lib*` directory of `/`, `/usr` and `/usr/local` that exists (`lib`, `lib32`,
//!    `lib64`, `libx32`, …), `/usr/local/{bin,sbin,libexec}`, and `/usr/share` +
//!    `/usr/local/share`: Debian installs architecture-independent programs there and links them
//!    from `/usr/bin` (`mvn` → `/usr/share/maven/bin/mvn`, `pg_dump` →
//!    `/usr/share/postgresql-common/pg_wrapper`), and a link is executed where it leads.
//! 2. **Header and source trees** (read only): `/usr/include`, `/usr/local/include`, `/usr/src`.
//! 3. **`/opt` package trees** (read + execute): `/opt/<pkg>` where the directory is owned by
//!    root, writable by nobody else, readable and searchable by everyone, and holds a `bin`
//!    directory — the FHS layout of an add-on package. A tree a user owns or may write is the
//!    user's data, not the system's.
//! 4. **`/etc`** (read only), see [`etc_set`]: each entry any local user may read (a file with
//!    `o+r`, a directory with `o+rx`), descending only into directories that hold an entry that is
//!    not, so a fully world-readable subtree is one rule. Never an entry only its owner or a group
//!    may read (`shadow`, `gshadow`, `sudoers`, `ssh_host_*_key`, `ssl/private`), even for a root
//!    host (which would otherwise read them as their owner). Never a device, fifo or socket. Never
//!    the world-readable secrets of [`ETC_DENIED`], under their names or any other (a hard link,
//!    a bind mount, the directory a denied name links to: the same device and inode). Each entry
//!    is judged by the descriptor it is granted on, opened beneath its directory without
//!    following a link, so a file renamed onto a judged name is never the one granted. Symbolic
//!    links get no rule of their own: Landlock grants the inode a path leads to, so a link works
//!    exactly when its target is in this set by these same rules (`/etc/os-release` →
//!    `/usr/lib/os-release` does, `/etc/sgml/catalog` → `/var/lib/…` does not). `ls /etc` itself
//!    fails where `/etc` holds a secret: the directory is not granted, only its entries.
//! 5. **`/etc/alternatives` targets**: no rule of their own. Each alternative is a link (granted
//!    as links are, rule 4) that runs where it leads, so a target in the trees of rules 1–3
//!    (`/usr/lib/jvm/…/bin/java`, an `/opt` package's `bin`) works and one elsewhere (a home
//!    directory) does not. Judging each target by its owner instead would cost a `readlink` per
//!    alternative (~400 on Debian) on every cold start, for targets no distribution installs.
//!
//! Inside a granted program tree every file is readable (the distribution ships no secrets in
//! `/usr`; a root host reads even its rare non-world-readable files, such as
//! `/usr/share/polkit-1/rules.d`).
//!
//! # The cache
//!
//! Landlock has no deny rules, so the `/etc` rule is an enumerated allow set, and enumerating it
//! costs an `open` + `fstat` (+ `close` unless granted) per entry that is not a link and four calls
//! per directory (Debian 12 here: 1 193 entries, 757 of them links, 135 directories). [`current`]
//! keeps the result for the process. From its second call on, an inotify watch (`IN_ATTRIB`,
//! `IN_CREATE`, `IN_DELETE`, `IN_MOVED_*`, `IN_DELETE_SELF`, `IN_MOVE_SELF`) is placed on every
//! directory the rules read *before* it is read — `/`, `/usr`, `/usr/local`, `/opt`, and every
//! directory of `/etc` walked — so a change after the read queues an event; `IN_ATTRIB` on a
//! directory reports `chmod` of its entries, which a directory's mtime does not.
//! `/proc/self/mountinfo` polls as changed after a mount. Each call reads the queue and polls
//! first; anything at all rebuilds the set. The first call does not watch (closing an
//! inotify instance with watches waits ~5 ms for the kernel's grace period, which a one-call
//! process would pay for nothing, as in `linux_sandbox`'s syscache). Where inotify cannot be had,
//! or a directory lies on a filesystem that another machine may change (NFS, FUSE, …: no event),
//! every call rebuilds the set.
//!
//! The `/etc` rules are made on the walk's own descriptors ([`EtcSet::files`]); the program
//! trees' on `linux_sandbox`'s syscache's, which follows replacements of each location on its
//! own.
//!
//! # What it cannot see (only root changes `/etc`)
//! - A file created later inside a collapsed subtree (one rule for a fully world-readable
//!   directory) is readable by a command already running — a new 0600 file in `/etc/apt` while a
//!   long build runs. A new call sees it and splits the subtree.
//! - Any rule holds for a command already running: an entry judged public and then renamed onto
//!   a denied name (`machine-id`, `wpa_supplicant/`) stays readable to it.
//! - A server re-checks the mode of every file it grants by rule on each call (a `chmod`
//!   through a hard link from outside `/etc` queues no event here), but not of the files inside
//!   a collapsed subtree: one of them made private through an outside name stays granted until
//!   something else changes.
//! - The deny list's devices and inodes are read when the walk starts: a root that moves a
//!   directory onto a denied path while the walk runs can have it judged by its mode alone.
//! - Bind mounts inside `/etc`: a directory bound elsewhere in `/etc` without its submounts
//!   looks fully world-readable and is collapsed, and the rule on its inode reaches what is
//!   mounted beneath the original (`ssl/private` would be readable that way); a bind
//!   of `/etc` into itself likewise. Distributions and containers mount single files there
//!   (`hosts`, `resolv.conf`), which are judged as files.

use std::collections::HashSet;
use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use linux_sandbox::SystemFile;
use rustix::fs::{AtFlags, FileType};

/// Named `/etc` entries (relative to `/etc`) that are withheld although world-readable, each with
/// why: secrets that distributions, images or common guides leave readable by everyone. Short on
/// purpose: the mode rule does the work; this list covers where the mode lies.
pub const ETC_DENIED: &[(&str, &str)] = &[
    (
        "machine-id",
        "the host's unique identifier; machine-id(5): confidential, never exposed to untrusted code",
    ),
    (
        "fstab",
        "world-readable by design, and where CIFS/NFS mounts keep `password=` options",
    ),
    (
        "netplan",
        "Ubuntu wrote Wi-Fi passphrases into world-readable /etc/netplan/*.yaml (netplan now warns)",
    ),
    (
        "wpa_supplicant",
        "Wi-Fi passphrases; images and guides create wpa_supplicant.conf world-readable",
    ),
    (
        "openvpn",
        "VPN keys and credentials, usually copied in with a umask that leaves them world-readable",
    ),
    (
        "pki/tls/private",
        "Fedora and RHEL ship the private-key directory world-readable (0755)",
    ),
];

/// Deepest `/etc` directory level walked; anything deeper is withheld (no distribution nests
/// that deep; a loop of bind mounts would otherwise walk forever).
const MAX_DEPTH: usize = 24;

/// One program, library, header or data tree of the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    /// The location as the rule names it (`/lib64`, which may be a link to `/usr/lib64`).
    pub path: PathBuf,
    /// Whether programs run from it (read + execute), or it is read only.
    pub execute: bool,
}

/// Why an `/etc` entry is not in the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Withheld {
    /// Its mode does not let "other" read it (a directory: read and search it).
    NotWorldReadable,
    /// Named in [`ETC_DENIED`], with the reason given there.
    Denied(&'static str),
    /// A device, fifo or socket.
    SpecialFile,
    /// A symbolic link whose target is outside the set (or that leads nowhere).
    LinkOutside(Option<PathBuf>),
    /// A directory that could not be read, or lies deeper than anything a distribution ships.
    Unreadable,
}

impl Withheld {
    /// A short, stable name for the reason (doctor output).
    pub fn label(&self) -> &'static str {
        match self {
            Withheld::NotWorldReadable => "not world-readable",
            Withheld::Denied(_) => "world-readable secret (named deny list)",
            Withheld::SpecialFile => "device, fifo or socket",
            Withheld::LinkOutside(_) => "symbolic link leading outside the system set",
            Withheld::Unreadable => "directory not readable",
        }
    }
}

/// The `/etc` part of the set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EtcSet {
    /// One read rule each, sorted; a directory here is granted with everything beneath it.
    pub allowed: Vec<PathBuf>,
    /// The file of each of [`allowed`](EtcSet::allowed), at the same index, as the walk
    /// opened and judged it: the rule is made on this descriptor, never on the path again.
    pub files: Vec<SystemFile>,
    /// Entries not granted (and everything beneath a withheld directory), with why.
    pub withheld: Vec<(PathBuf, Withheld)>,
    /// Every symbolic link found (none gets a rule: each reaches what its target's rules
    /// allow). Judged only on request ([`SystemSet::judged`], [`etc_set`]): a `realpath` each,
    /// which no call needs.
    pub links: Vec<PathBuf>,
    /// Of [`links`](EtcSet::links), once judged: how many lead into the set (those leading out
    /// are in `withheld`).
    pub links_in_set: usize,
    /// Unix sockets found anywhere in `/etc`, withheld directories included (a root host's
    /// command may pass a directory only its owner may search). The command's own root binds
    /// `/etc` whole and Landlock below ABI 9 does not check `connect`, so where this is not
    /// empty the command gets no unix socket at all. A directory too deep
    /// or too large to search counts as holding one.
    pub sockets: Vec<PathBuf>,
}

/// The resolved system runtime set of a shell command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SystemSet {
    /// Program, library, header and data trees (rules 1–3), each name once (a link such as
    /// `/bin` → `usr/bin` is listed beside its target).
    pub trees: Vec<Tree>,
    /// `/etc` (rule 4; rule 5 is in it).
    pub etc: EtcSet,
}

/// The system runtime set of this machine, from the process-wide cache (see the module
/// documentation for when it is rebuilt).
pub fn current() -> Arc<SystemSet> {
    shared().get()
}

/// Starts building [`current`]'s set on a thread of its own and returns at once, so a process
/// that is about to run a shell command (the CLI's `call command`, an MCP server) overlaps the
/// `/etc` walk — about a thousand system calls — with its other start-up work instead of paying
/// it before the first spawn. A later [`current`] waits for that build rather than repeating it.
///
/// The warm build is not a call: the first [`current`] after it takes it as the process's first,
/// unwatched build, so a one-call process walks `/etc` once and places no watch.
///
/// A second thread meanwhile runs the kernel probes the spawn waits for otherwise (Landlock,
/// seccomp, and the namespace probes: throwaway children, once per process), so a one-call
/// process pays neither in sequence before its command starts.
pub fn warm() {
    let _ = std::thread::Builder::new()
        .name("sysset-warm".into())
        .spawn(|| shared().prime());
    #[cfg(target_os = "linux")]
    let _ = std::thread::Builder::new()
        .name("probe-warm".into())
        .spawn(|| {
            let _ = linux_sandbox::probe();
            let _ = proctree::pid_namespace_available();
        });
}

fn shared() -> std::sync::MutexGuard<'static, Cache> {
    SHARED.lock().unwrap_or_else(|poisoned| {
        SHARED.clear_poison();
        let mut guard = poisoned.into_inner();
        *guard = Cache::new(PathBuf::from("/"));
        guard
    })
}

/// How long a [`warm`] build may wait for the first call and still serve it. A one-call process
/// takes it within a few milliseconds; an MCP server's first call may come hours later, when
/// the `/etc` it saw may hold a new secret. A longer window would let a file changed in it
/// be served from the stale set: so no longer
/// than a one-call process's own build would be before its spawn.
const PRIMED_FOR: std::time::Duration = std::time::Duration::from_millis(50);

/// Whether every `/etc` file of `set` still has the mode it was judged by (one `fstat` each
/// on the held descriptors, ~150 here). The directory watches do not hear a `chmod` through
/// another name: a hard link from outside `/etc` changes the file and queues its event in the
/// other directory (an MCP server would keep granting a file made 0600 that
/// way).
fn still_as_judged(set: &SystemSet) -> bool {
    set.etc.files.iter().all(SystemFile::unchanged)
}

static SHARED: LazyLock<Mutex<Cache>> = LazyLock::new(|| Mutex::new(Cache::new("/".into())));

/// The set of the file system below `base` ("/" for the real one; a fake tree in tests), kept
/// until something it was built from changes.
#[derive(Debug)]
pub struct Cache {
    base: PathBuf,
    set: Option<Arc<SystemSet>>,
    /// Whether every directory `set` was built from was watched before it was read.
    vouched: bool,
    /// When `set` was [`prime`](Cache::prime)d, while no call has taken it yet.
    primed: Option<std::time::Instant>,
    watch: Watching,
}

#[derive(Debug)]
enum Watching {
    /// Not yet (the first build of a process is not watched), or a transient failure.
    NotYet,
    Active(Watcher),
    /// No inotify here: every call rebuilds.
    Unavailable,
}

impl Cache {
    /// A cache for the tree below `base` that starts watching at its second [`get`](Cache::get).
    pub fn new(base: PathBuf) -> Cache {
        Cache {
            base,
            set: None,
            vouched: false,
            primed: None,
            watch: Watching::NotYet,
        }
    }

    /// A cache that watches from its first build (tests of the invalidation).
    pub fn watched(base: PathBuf) -> Cache {
        Cache {
            watch: Watcher::start(),
            ..Cache::new(base)
        }
    }

    /// Builds the first set ahead of the first call, unwatched, for that call to take
    /// ([`warm`]); does nothing once a set exists.
    pub fn prime(&mut self) {
        if self.set.is_none() {
            self.set = Some(Arc::new(resolve(&self.base, &mut |_| {})));
            self.primed = Some(std::time::Instant::now());
        }
    }

    /// The set, rebuilt if anything it was built from may have changed.
    pub fn get(&mut self) -> Arc<SystemSet> {
        if let Some(primed) = self.primed.take() {
            if primed.elapsed() <= PRIMED_FOR
                && let Some(set) = &self.set
            {
                // The first call, moments after the build: as its own unwatched build would
                // be.
                return Arc::clone(set);
            }
            // Older (a server idle since it started): nothing vouches for it.
            self.set = None;
        }
        match &mut self.watch {
            Watching::NotYet if self.set.is_some() => self.watch = Watcher::start(),
            Watching::Active(w) => {
                if w.changed() {
                    self.vouched = false;
                }
            }
            Watching::NotYet | Watching::Unavailable => self.vouched = false,
        }
        if let (Some(set), true) = (&self.set, self.vouched) {
            if still_as_judged(set) {
                return Arc::clone(set);
            }
        }
        let (set, vouched) = match &mut self.watch {
            Watching::Active(w) => {
                let mut all = true;
                let set = resolve(&self.base, &mut |dir| all &= w.cover(dir));
                (set, all)
            }
            _ => (resolve(&self.base, &mut |_| {}), false),
        };
        let set = Arc::new(set);
        self.set = Some(Arc::clone(&set));
        // The first, unwatched build serves the first call; a watcher vouches for later ones.
        self.vouched = vouched;
        set
    }
}

/// The change detector (`linux_sandbox::watch`): directories watched for names and, since a
/// `chmod` of `/etc/x` does not change `/etc`'s times, for their entries' modes and owners.
#[derive(Debug)]
struct Watcher(linux_sandbox::watch::ChangeWatch);

impl Watcher {
    fn start() -> Watching {
        use linux_sandbox::watch::{ChangeWatch, NoWatch};
        match ChangeWatch::start() {
            Ok(w) => Watching::Active(Watcher(w)),
            Err(NoWatch::Transient) => Watching::NotYet,
            Err(NoWatch::Unavailable) => Watching::Unavailable,
        }
    }

    /// Whether anything changed since the last call (events read and dropped; errors count).
    fn changed(&mut self) -> bool {
        self.0.changed()
    }

    /// Watches `dir` (before it is read). `false`: a change to it might queue no event.
    fn cover(&mut self, dir: &Path) -> bool {
        self.0
            .watch_dir(dir, linux_sandbox::watch::Also::Attributes)
    }
}

/// Evaluates the rules on the file system below `base`, calling `watch` on every directory just
/// before it is read.
pub fn resolve(base: &Path, watch: &mut dyn FnMut(&Path)) -> SystemSet {
    let at = |rel: &str| base.join(rel);
    let mut trees: Vec<Tree> = Vec::new();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut push = |trees: &mut Vec<Tree>, path: PathBuf, execute: bool| {
        // `/lib` → `usr/lib` on a merged-/usr system: both names are kept, because the
        // command's own view is built from the names (the link `/bin` must exist there for
        // `/bin/sh` to run); the sandbox makes one rule for one inode.
        // A directory, through any links (one `stat`; `canonicalize` would cost a `readlink`
        // per component).
        if path.is_dir() && seen.insert(path.clone()) {
            trees.push(Tree { path, execute });
        }
    };
    for rel in ["usr/bin", "usr/sbin", "usr/libexec", "bin", "sbin"] {
        push(&mut trees, at(rel), true);
    }
    for dir in [at("usr"), at("usr/local"), base.to_path_buf()] {
        watch(&dir);
        for lib in lib_dirs(&dir) {
            push(&mut trees, lib, true);
        }
    }
    for rel in [
        "usr/local/bin",
        "usr/local/sbin",
        "usr/local/libexec",
        "usr/share",
        "usr/local/share",
    ] {
        push(&mut trees, at(rel), true);
    }
    for rel in ["usr/include", "usr/local/include", "usr/src"] {
        push(&mut trees, at(rel), false);
    }
    let opt = at("opt");
    watch(&opt);
    for pkg in opt_packages(&opt) {
        push(&mut trees, pkg, true);
    }
    let etc_root = at("etc");
    let etc = walk_etc(&etc_root, watch);
    SystemSet { trees, etc }
}

impl SystemSet {
    /// This set with its `/etc` links judged: those leading outside the set listed in
    /// `etc.withheld` as [`Withheld::LinkOutside`], the others counted (doctor, tests).
    pub fn judged(&self) -> SystemSet {
        let mut out = self.clone();
        let mut in_set: HashSet<PathBuf> = self
            .trees
            .iter()
            .filter_map(|t| std::fs::canonicalize(&t.path).ok())
            .collect();
        in_set.extend(
            self.etc
                .allowed
                .iter()
                .filter_map(|p| std::fs::canonicalize(p).ok()),
        );
        judge_links(&mut out.etc, &in_set);
        out
    }
}

/// The `/etc` rule on the tree at `root`, unwatched; see the module documentation, rule 4.
/// Symbolic links are judged against the real system's program trees and this tree's own
/// entries.
///
/// ```
/// let set = exec::sysset::etc_set(std::path::Path::new("/etc"));
/// assert!(!set.allowed.iter().any(|p| p.ends_with("shadow")));
/// ```
pub fn etc_set(root: &Path) -> EtcSet {
    let system = current();
    let mut in_set: HashSet<PathBuf> = system
        .trees
        .iter()
        .filter_map(|t| std::fs::canonicalize(&t.path).ok())
        .collect();
    let mut etc = walk_etc(root, &mut |_| {});
    in_set.extend(
        etc.allowed
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok()),
    );
    judge_links(&mut etc, &in_set);
    etc
}

/// Pending symbolic links found by the walk, judged once the whole set is known.
#[derive(Debug, Default)]
struct Walk {
    set: EtcSet,
    links: Vec<PathBuf>,
    /// [`list_dir`]'s buffer, one for the whole walk.
    buf: Vec<u8>,
    /// [`denied_files`].
    denied: Vec<((u64, u64), &'static str)>,
}

fn walk_etc(root: &Path, watch: &mut dyn FnMut(&Path)) -> EtcSet {
    let mut walk = Walk::default();
    let top = CString::new(root.as_os_str().as_bytes()).unwrap_or_default();
    match SystemFile::open_beneath(rustix::fs::CWD, &top, true) {
        Ok(etc) if world_readable_dir(etc.mode()) => {
            walk.denied = denied_files(etc.fd());
            let mut children = Vec::new();
            if walk_dir(&etc, root, "", 0, watch, &mut walk, &mut children) {
                children = vec![(root.to_path_buf(), etc)];
            }
            children.sort_by(|a, b| a.0.cmp(&b.0));
            (walk.set.allowed, walk.set.files) = children.into_iter().unzip();
        }
        Ok(_) => walk
            .set
            .withheld
            .push((root.to_path_buf(), Withheld::NotWorldReadable)),
        Err(_) => {}
    }
    walk.set.withheld.sort_by(|a, b| a.0.cmp(&b.0));
    walk.links.sort();
    walk.set.links = walk.links;
    walk.set
}

/// The files [`ETC_DENIED`] names, by device and inode, each with why: the same file under
/// any other name — a hard link, a bind mount, the directory a denied name links to — is
/// withheld as the name is (`ln /etc/machine-id /etc/x` would make
/// `machine-id` readable, since Landlock grants the inode).
fn denied_files(etc: BorrowedFd<'_>) -> Vec<((u64, u64), &'static str)> {
    let mut out = Vec::new();
    for (name, why) in ETC_DENIED {
        let Ok(name) = CString::new(*name) else {
            continue;
        };
        // Following links: a denied name that is a link denies what it leads to.
        let Ok(st) = rustix::fs::statat(etc, &name, AtFlags::empty()) else {
            continue;
        };
        out.push(((st.st_dev, st.st_ino), *why));
        // And everything beneath a denied directory: a file in `openvpn/` linked or bound
        // elsewhere in `/etc` is the same secret.
        // Opened as the name leads, links followed, as for its own inode above.
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory
            && let Ok(dir) = rustix::fs::openat(
                etc,
                &name,
                rustix::fs::OFlags::RDONLY
                    | rustix::fs::OFlags::DIRECTORY
                    | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )
        {
            inodes_beneath(dir.as_fd(), why, &mut out);
        }
    }
    out
}

/// Adds the device and inode of everything beneath `top` (at most [`SOCKET_SEARCH_ENTRIES`]
/// entries and [`MAX_DEPTH`] levels: deny lists name small directories) to `out`.
fn inodes_beneath(
    top: BorrowedFd<'_>,
    why: &'static str,
    out: &mut Vec<((u64, u64), &'static str)>,
) {
    let mut budget = SOCKET_SEARCH_ENTRIES;
    let mut buf = Vec::new();
    let mut pending: Vec<(Option<SystemFile>, usize)> = vec![(None, 0)];
    while let Some((dir, depth)) = pending.pop() {
        let fd = dir.as_ref().map_or(top, SystemFile::fd);
        let Some(names) = list_dir(fd, &mut buf) else {
            continue;
        };
        for (name, kind) in names {
            if budget == 0 {
                return;
            }
            budget -= 1;
            let directory = kind == FileType::Directory && depth < MAX_DEPTH;
            if let Ok(file) = SystemFile::open_beneath(fd, &name, directory) {
                out.push((file.dev_ino(), why));
                if directory {
                    pending.push((Some(file), depth + 1));
                }
            }
        }
    }
}

/// Walks `dir` (its path `path`, relative name `rel` below the `/etc` root), a directory opened
/// beneath its parent without following a link. Returns whether everything beneath is in the
/// set (then the caller grants `dir` as one rule); otherwise `allowed` holds the rules for what
/// is.
///
/// Every entry that is not a link is opened beneath `dir` (`O_NOFOLLOW`; `O_PATH` unless it is
/// a directory, which is opened to be listed) and judged by that descriptor's `fstat`; the rule
/// is made on the same descriptor ([`Policy::allow_system_file`]), so a file renamed onto a
/// judged name before the sandbox is prepared is never the one granted (swapping a secret and
/// a public file in a loop would otherwise read the secret in most calls). No path
/// is resolved twice, and `prepare` opens none of these again.
///
/// [`Policy::allow_system_file`]: linux_sandbox::Policy::allow_system_file
fn walk_dir(
    dir: &SystemFile,
    path: &Path,
    rel: &str,
    depth: usize,
    watch: &mut dyn FnMut(&Path),
    walk: &mut Walk,
    allowed: &mut Vec<(PathBuf, SystemFile)>,
) -> bool {
    watch(path);
    let Some(mut names) = list_dir(dir.fd(), &mut walk.buf) else {
        walk.set
            .withheld
            .push((path.to_path_buf(), Withheld::Unreadable));
        return false;
    };
    let mut all = true;
    names.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, kind) in names {
        let child = path.join(OsStr::from_bytes(name.to_bytes()));
        let child_rel = match name.to_str() {
            Ok(n) if rel.is_empty() => n.to_owned(),
            Ok(n) => format!("{rel}/{n}"),
            // Not UTF-8: no deny-list entry can match it, but it is judged by its mode all
            // the same.
            Err(_) => String::new(),
        };
        // A link needs no `open`: the directory entry's type says so (most of `/etc` is links:
        // the alternatives and the rc*.d and systemd wants directories).
        let named = ETC_DENIED
            .iter()
            .find(|(n, _)| *n == child_rel)
            .map(|(_, why)| *why);
        if kind == FileType::Symlink && named.is_none() {
            walk.links.push(child);
            continue;
        }
        let opened = match SystemFile::open_beneath(dir.fd(), &name, kind == FileType::Directory) {
            // Of unknown type, it may be a directory: opened again to be listed.
            Ok(file) if kind != FileType::Directory && file.is_dir() => {
                SystemFile::open_beneath(file.fd(), c".", true)
            }
            other => other,
        };
        let denied = named.or_else(|| {
            let id = opened.as_ref().ok()?.dev_ino();
            walk.denied
                .iter()
                .find(|(d, _)| *d == id)
                .map(|(_, why)| *why)
        });
        if let Some(why) = denied {
            // A denied directory may hold a socket; a denied file is none (and watching a
            // file would fail, leaving the set unvouched: rebuilt on every call).
            if opened.as_ref().is_ok_and(|f| f.is_dir()) {
                find_sockets(&child, depth + 1, watch, walk);
            }
            walk.set.withheld.push((child, Withheld::Denied(why)));
            all = false;
            continue;
        }
        let Ok(file) = opened else {
            // Gone since the listing, turned into a link (`O_NOFOLLOW`), or unreadable.
            walk.set.withheld.push((child, Withheld::Unreadable));
            all = false;
            continue;
        };
        let mode = file.mode();
        match FileType::from_raw_mode(mode) {
            // No rule: the link works exactly when its target is in the set.
            FileType::Symlink => walk.links.push(child),
            FileType::RegularFile => {
                if mode & 0o004 != 0 {
                    allowed.push((child, file));
                } else {
                    walk.set.withheld.push((child, Withheld::NotWorldReadable));
                    all = false;
                }
            }
            FileType::Directory => {
                if !world_readable_dir(mode) {
                    find_sockets(&child, depth + 1, watch, walk);
                    walk.set.withheld.push((child, Withheld::NotWorldReadable));
                    all = false;
                    continue;
                }
                if depth + 1 > MAX_DEPTH {
                    walk.set.withheld.push((child, Withheld::Unreadable));
                    all = false;
                    continue;
                }
                let mut below = Vec::new();
                if walk_dir(
                    &file,
                    &child,
                    &child_rel,
                    depth + 1,
                    watch,
                    walk,
                    &mut below,
                ) {
                    allowed.push((child, file));
                } else {
                    allowed.extend(below);
                    all = false;
                }
            }
            kind => {
                if kind == FileType::Socket {
                    walk.set.sockets.push(child.clone());
                }
                walk.set.withheld.push((child, Withheld::SpecialFile));
                all = false;
            }
        }
    }
    all
}

/// The entries of the directory open as `dir` (`.` and `..` left out), with the type the
/// directory records for each (`Unknown` where it records none), read into `buf`. `None` where
/// it cannot be read.
fn list_dir(dir: BorrowedFd<'_>, buf: &mut Vec<u8>) -> Option<Vec<(CString, FileType)>> {
    if buf.capacity() < LIST_BUFFER {
        buf.reserve(LIST_BUFFER);
    }
    let mut names = Vec::new();
    let mut entries = rustix::fs::RawDir::new(dir, buf.spare_capacity_mut());
    while let Some(entry) = entries.next() {
        // An error mid-listing (`EINVAL` would mean one entry larger than the buffer, which
        // no name of at most 255 bytes is) leaves the directory unread: withheld.
        let entry = entry.ok()?;
        let bytes = entry.file_name().to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        names.push((entry.file_name().to_owned(), entry.file_type()));
    }
    Some(names)
}

/// Bytes of directory entries read by one `getdents64` of the walk.
const LIST_BUFFER: usize = 32 * 1024;

/// Entries [`find_sockets`] reads in one withheld directory tree before it gives up and counts
/// the tree as holding a socket.
const SOCKET_SEARCH_ENTRIES: usize = 20_000;

/// Adds the unix sockets beneath `dir`, a directory the rules withhold (so not walked), to
/// `walk.set.sockets`; watched like every directory read.
fn find_sockets(dir: &Path, depth: usize, watch: &mut dyn FnMut(&Path), walk: &mut Walk) {
    let mut budget = SOCKET_SEARCH_ENTRIES;
    let mut pending = vec![(dir.to_path_buf(), depth)];
    while let Some((dir, depth)) = pending.pop() {
        if depth > MAX_DEPTH {
            walk.set.sockets.push(dir);
            continue;
        }
        watch(&dir);
        // Unreadable to the host: as unreadable to its command, which has the host's uid.
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            if budget == 0 {
                walk.set.sockets.push(dir.clone());
                return;
            }
            budget -= 1;
            match entry.file_type() {
                Ok(t) if t.is_socket() => walk.set.sockets.push(entry.path()),
                Ok(t) if t.is_dir() => pending.push((entry.path(), depth + 1)),
                _ => {}
            }
        }
    }
}

fn world_readable_dir(mode: u32) -> bool {
    mode & 0o005 == 0o005
}

/// Judges `etc.links` against the canonical roots of the set: a link whose target lies beneath
/// one of them is counted, one leading elsewhere (or nowhere) is withheld with its target.
fn judge_links(etc: &mut EtcSet, in_set: &HashSet<PathBuf>) {
    etc.links_in_set = 0;
    etc.withheld
        .retain(|(_, why)| !matches!(why, Withheld::LinkOutside(_)));
    for link in &etc.links {
        match std::fs::canonicalize(link) {
            Ok(target) if target.ancestors().any(|a| in_set.contains(a)) => {
                etc.links_in_set += 1;
            }
            Ok(target) => etc
                .withheld
                .push((link.clone(), Withheld::LinkOutside(Some(target)))),
            Err(_) => etc
                .withheld
                .push((link.clone(), Withheld::LinkOutside(None))),
        }
    }
    etc.withheld.sort_by(|a, b| a.0.cmp(&b.0));
}

/// The `lib*` directories in `dir` (symbolic links to directories included: `/lib64` →
/// `usr/lib64`), sorted.
fn lib_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("lib")))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

/// Rule 3: `/opt/<pkg>` trees owned by root, writable by no one else, open to everyone, with a
/// `bin` directory.
fn opt_packages(opt: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(opt) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.metadata().is_ok_and(|m| {
                m.is_dir() && m.uid() == 0 && m.mode() & 0o022 == 0 && world_readable_dir(m.mode())
            })
        })
        .map(|e| e.path())
        .filter(|p| std::fs::symlink_metadata(p.join("bin")).is_ok_and(|m| m.is_dir()))
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn file(path: &Path, mode: u32) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x\n").unwrap();
        chmod(path, mode);
    }

    fn dir(path: &Path, mode: u32) {
        std::fs::create_dir_all(path).unwrap();
        chmod(path, mode);
    }

    /// A fake `/etc` shaped like Debian's, with the secrets a real one holds, chmod'ed as
    /// there. Never the real `/etc`: tests do not modify the host.
    fn fake_etc() -> (tempfile::TempDir, PathBuf) {
        let base = tempfile::tempdir().unwrap();
        let etc = base.path().canonicalize().unwrap().join("etc");
        dir(&etc, 0o755);
        file(&etc.join("passwd"), 0o644);
        file(&etc.join("shadow"), 0o640);
        file(&etc.join("gshadow"), 0o600);
        file(&etc.join("sudoers"), 0o440);
        file(&etc.join("machine-id"), 0o444);
        file(&etc.join("ssh/ssh_config"), 0o644);
        file(&etc.join("ssh/ssh_host_ed25519_key"), 0o600);
        file(&etc.join("ssh/ssh_host_ed25519_key.pub"), 0o644);
        file(&etc.join("ssl/certs/ca.pem"), 0o644);
        file(&etc.join("ssl/openssl.cnf"), 0o644);
        file(&etc.join("ssl/private/snakeoil.key"), 0o640);
        chmod(&etc.join("ssl/private"), 0o710);
        file(&etc.join("java/security/java.security"), 0o644);
        file(&etc.join("java/jvm.cfg"), 0o644);
        file(&etc.join("pki/tls/private/server.key"), 0o644);
        file(&etc.join("pki/tls/certs/ca.pem"), 0o644);
        symlink("/usr/bin", etc.join("link-into-usr")).unwrap();
        symlink("passwd", etc.join("link-to-passwd")).unwrap();
        symlink("shadow", etc.join("link-to-shadow")).unwrap();
        symlink(base.path().join("home"), etc.join("link-outside")).unwrap();
        symlink("/root/.ssh/id_rsa", etc.join("java/link-to-root")).unwrap();
        (base, etc)
    }

    fn allowed(set: &EtcSet, etc: &Path, rel: &str) -> bool {
        set.allowed.contains(&etc.join(rel))
    }

    fn withheld(set: &EtcSet, etc: &Path, rel: &str) -> Option<Withheld> {
        set.withheld
            .iter()
            .find(|(p, _)| *p == etc.join(rel))
            .map(|(_, w)| w.clone())
    }

    /// A denied file under another name — a hard link, the directory a
    /// denied name links to — is not granted: Landlock grants the inode, so the denied name
    /// itself would open.
    #[test]
    fn a_denied_file_under_another_name_is_withheld_as_the_name_is() {
        let (_base, etc) = fake_etc();
        std::fs::hard_link(etc.join("machine-id"), etc.join("id-alias")).unwrap();
        file(&etc.join("ovpn-real/client.key"), 0o644);
        symlink("ovpn-real", etc.join("openvpn")).unwrap();
        let set = walk_etc(&etc, &mut |_| {});
        for rel in ["machine-id", "id-alias", "openvpn", "ovpn-real"] {
            assert!(
                matches!(withheld(&set, &etc, rel), Some(Withheld::Denied(_))),
                "{rel}: {set:#?}"
            );
        }
        assert!(
            !set.allowed
                .iter()
                .any(|p| p.starts_with(etc.join("ovpn-real"))),
            "{set:#?}"
        );
    }

    /// A file inside a denied directory, linked elsewhere in
    /// `/etc`, leaves both names unreadable.
    #[test]
    fn a_file_inside_a_denied_directory_is_withheld_under_another_name() {
        let (_base, etc) = fake_etc();
        file(&etc.join("openvpn/client/k.key"), 0o644);
        std::fs::hard_link(etc.join("openvpn/client/k.key"), etc.join("k-alias")).unwrap();
        let set = walk_etc(&etc, &mut |_| {});
        assert!(
            matches!(withheld(&set, &etc, "k-alias"), Some(Withheld::Denied(_))),
            "{set:#?}"
        );
        assert!(!allowed(&set, &etc, "k-alias"));
    }

    /// A denied name that is a link to a directory denies what is inside it too, under any
    /// name (indexing the contents only through `O_NOFOLLOW` would miss them: a
    /// link refuses it).
    #[test]
    fn a_file_inside_the_directory_a_denied_link_leads_to_is_withheld_under_another_name() {
        let (_base, etc) = fake_etc();
        file(&etc.join("ovpn-real/client.key"), 0o644);
        symlink("ovpn-real", etc.join("openvpn")).unwrap();
        std::fs::hard_link(etc.join("ovpn-real/client.key"), etc.join("k-alias")).unwrap();
        let set = walk_etc(&etc, &mut |_| {});
        assert!(
            matches!(withheld(&set, &etc, "k-alias"), Some(Withheld::Denied(_))),
            "{set:#?}"
        );
    }

    /// The rule is made on the file the walk judged: a secret renamed onto a judged name
    /// afterwards is not what the set holds (opening the path again at `prepare` would read it
    /// in most calls).
    #[test]
    fn the_set_holds_the_judged_files_not_what_their_names_lead_to_later() {
        let (_base, etc) = fake_etc();
        let set = walk_etc(&etc, &mut |_| {});
        let at = set
            .allowed
            .iter()
            .position(|p| *p == etc.join("passwd"))
            .unwrap();
        let judged = std::fs::metadata(etc.join("passwd")).unwrap();
        std::fs::rename(etc.join("gshadow"), etc.join("passwd")).unwrap();
        assert_eq!(set.files.len(), set.allowed.len());
        assert_eq!(set.files[at].dev_ino(), (judged.dev(), judged.ino()));
        let now = std::fs::metadata(etc.join("passwd")).unwrap();
        assert_ne!(set.files[at].dev_ino(), (now.dev(), now.ino()));
    }

    #[test]
    fn etc_grants_what_everyone_may_read_and_withholds_secrets_even_for_root() {
        let (_base, etc) = fake_etc();
        let set = etc_set(&etc);
        for rel in ["passwd", "ssh/ssh_config", "ssh/ssh_host_ed25519_key.pub"] {
            assert!(allowed(&set, &etc, rel), "{rel} not allowed: {set:#?}");
        }
        for rel in [
            "shadow",
            "gshadow",
            "sudoers",
            "ssh/ssh_host_ed25519_key",
            "ssl/private",
        ] {
            assert_eq!(
                withheld(&set, &etc, rel),
                Some(Withheld::NotWorldReadable),
                "{rel}"
            );
        }
        assert!(matches!(
            withheld(&set, &etc, "machine-id"),
            Some(Withheld::Denied(_))
        ));
        assert!(matches!(
            withheld(&set, &etc, "pki/tls/private"),
            Some(Withheld::Denied(_))
        ));
        assert!(!allowed(&set, &etc, "") && !set.allowed.contains(&etc));
    }

    #[test]
    fn a_fully_world_readable_subtree_is_one_rule() {
        let (_base, etc) = fake_etc();
        let set = etc_set(&etc);
        assert!(allowed(&set, &etc, "ssl/certs"), "{set:#?}");
        assert!(!allowed(&set, &etc, "ssl/certs/ca.pem"));
        assert!(allowed(&set, &etc, "pki/tls/certs"));
        // A link out of a subtree does not split it: links get no rule of their own.
        assert!(allowed(&set, &etc, "java"), "{set:#?}");
        // `ssl` holds `private`: descended into, its public entries granted one by one.
        assert!(!allowed(&set, &etc, "ssl"));
        assert!(allowed(&set, &etc, "ssl/openssl.cnf"));
    }

    #[test]
    fn a_whole_world_readable_etc_is_a_single_rule() {
        let base = tempfile::tempdir().unwrap();
        let etc = base.path().join("etc");
        file(&etc.join("a/b/c"), 0o644);
        chmod(&etc, 0o755);
        let set = etc_set(&etc);
        assert_eq!(set.allowed, vec![etc.clone()]);
        assert!(set.withheld.is_empty());
    }

    #[test]
    fn links_reach_only_targets_in_the_set_and_never_get_a_rule() {
        let (_base, etc) = fake_etc();
        let set = etc_set(&etc);
        for rel in [
            "link-into-usr",
            "link-to-passwd",
            "link-to-shadow",
            "link-outside",
        ] {
            assert!(!allowed(&set, &etc, rel), "{rel} got a rule");
        }
        assert!(matches!(
            withheld(&set, &etc, "link-to-shadow"),
            Some(Withheld::LinkOutside(Some(_)))
        ));
        assert!(matches!(
            withheld(&set, &etc, "link-outside"),
            Some(Withheld::LinkOutside(_))
        ));
        assert!(matches!(
            withheld(&set, &etc, "java/link-to-root"),
            Some(Withheld::LinkOutside(_))
        ));
        assert_eq!(set.links_in_set, 2, "{set:#?}");
    }

    #[test]
    fn a_fifo_in_etc_is_withheld() {
        let base = tempfile::tempdir().unwrap();
        let etc = base.path().join("etc");
        file(&etc.join("ok"), 0o644);
        rustix::fs::mknodat(
            rustix::fs::CWD,
            etc.join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o666),
            0,
        )
        .unwrap();
        chmod(&etc.join("fifo"), 0o666);
        let set = etc_set(&etc);
        assert_eq!(set.allowed, vec![etc.join("ok")]);
        assert_eq!(withheld(&set, &etc, "fifo"), Some(Withheld::SpecialFile));
    }

    /// A fake root with the trees of rule 1–3 and the prefixes they must leave out.
    fn fake_root() -> (tempfile::TempDir, PathBuf) {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().canonicalize().unwrap();
        for rel in [
            "usr/bin",
            "usr/lib",
            "usr/lib64",
            "usr/include",
            "usr/share",
            "usr/local/bin",
            "usr/local/lib",
            "usr/local/etc",
            "usr/local/var",
            "var/lib",
            "opt/pkg/bin",
            "opt/data/files",
        ] {
            dir(&root.join(rel), 0o755);
        }
        symlink("usr/lib", root.join("lib")).unwrap();
        symlink("usr/bin", root.join("bin")).unwrap();
        file(&root.join("etc/passwd"), 0o644);
        chmod(&root.join("etc"), 0o755);
        (base, root)
    }

    #[test]
    fn trees_follow_the_rule_and_leave_package_managers_data_out() {
        let (_base, root) = fake_root();
        let set = resolve(&root, &mut |_| {});
        let tree = |rel: &str| set.trees.iter().find(|t| t.path == root.join(rel)).cloned();
        assert_eq!(tree("usr/bin").map(|t| t.execute), Some(true));
        assert_eq!(tree("usr/lib64").map(|t| t.execute), Some(true));
        assert_eq!(tree("usr/local/lib").map(|t| t.execute), Some(true));
        assert_eq!(tree("usr/include").map(|t| t.execute), Some(false));
        // `/lib` → `usr/lib`: both names, each once (the command's view is built from names;
        // the sandbox makes one rule for the one directory).
        let libs = set
            .trees
            .iter()
            .filter(|t| t.path == root.join("lib") || t.path == root.join("usr/lib"))
            .count();
        assert_eq!(libs, 2, "{set:#?}");
        assert_eq!(tree("bin").map(|t| t.execute), Some(true));
        for rel in [
            "usr/local/etc",
            "usr/local/var",
            "var/lib",
            "var",
            "usr",
            "opt/data",
        ] {
            assert!(tree(rel).is_none(), "{rel} is in the set: {set:#?}");
        }
        // `/opt/<pkg>` with a `bin`: only where root owns it (a test as root made it).
        assert_eq!(
            tree("opt/pkg").is_some(),
            rustix::process::getuid().is_root()
        );
        assert_eq!(set.etc.allowed, vec![root.join("etc")]);
    }

    #[test]
    fn an_opt_tree_another_user_owns_is_not_a_system_package() {
        if !rustix::process::getuid().is_root() {
            eprintln!("skipped: needs root to give a directory to another user");
            return;
        }
        let (_base, root) = fake_root();
        let theirs = root.join("opt/theirs");
        dir(&theirs.join("bin"), 0o755);
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let writable = root.join("opt/writable");
        dir(&writable.join("bin"), 0o755);
        chmod(&writable, 0o777);
        let set = resolve(&root, &mut |_| {});
        assert!(set.trees.iter().any(|t| t.path == root.join("opt/pkg")));
        assert!(
            !set.trees
                .iter()
                .any(|t| t.path == theirs || t.path == writable)
        );
    }

    #[test]
    fn an_alternative_leading_outside_the_trees_reaches_nothing() {
        let (base, root) = fake_root();
        file(&base.path().join("tool"), 0o755);
        dir(&root.join("etc/alternatives"), 0o755);
        symlink(base.path().join("tool"), root.join("etc/alternatives/tool")).unwrap();
        symlink(root.join("usr/bin"), root.join("etc/alternatives/in-usr")).unwrap();
        let set = resolve(&root, &mut |_| {}).judged();
        // `etc` is one rule, the links get none: the tool is reached only through a tree.
        assert_eq!(set.etc.allowed, vec![root.join("etc")]);
        assert!(
            !set.trees
                .iter()
                .any(|t| base.path().join("tool").starts_with(&t.path))
        );
        assert_eq!(set.etc.links_in_set, 1, "{set:#?}");
        assert!(set.etc.withheld.iter().any(|(p, w)| {
            *p == root.join("etc/alternatives/tool") && matches!(w, Withheld::LinkOutside(_))
        }));
    }

    #[test]
    fn denied_and_withheld_entries_leave_the_set_vouched_for() {
        let (_base, root) = fake_root();
        // A denied file, a denied directory, a withheld directory with a subdirectory: each is
        // searched for sockets (the directories) and none may leave the set unwatched.
        file(&root.join("etc/machine-id"), 0o444);
        dir(&root.join("etc/openvpn/keys"), 0o755);
        dir(&root.join("etc/ssl/private/sub"), 0o700);
        chmod(&root.join("etc/ssl/private"), 0o700);
        let mut cache = Cache::watched(root.clone());
        let first = cache.get();
        assert!(
            Arc::ptr_eq(&first, &cache.get()),
            "rebuilt without a change: something the walk read is not watched"
        );
    }

    /// A `chmod` through a hard link from outside `/etc` queues
    /// its event in the other directory; the server stops granting the file anyway.
    #[test]
    fn a_chmod_through_a_name_outside_etc_changes_the_next_set() {
        let (base, root) = fake_root();
        file(&root.join("etc/secret"), 0o600);
        file(&root.join("etc/pub.conf"), 0o644);
        let outside = base.path().join("outside");
        std::fs::hard_link(root.join("etc/pub.conf"), &outside).unwrap();
        let mut cache = Cache::watched(root.clone());
        assert!(cache.get().etc.allowed.contains(&root.join("etc/pub.conf")));
        chmod(&outside, 0o600);
        let set = cache.get();
        assert!(
            !set.etc.allowed.contains(&root.join("etc/pub.conf")),
            "{set:#?}"
        );
        assert_eq!(
            withheld(&set.etc, &root.join("etc"), "pub.conf"),
            Some(Withheld::NotWorldReadable)
        );
    }

    #[test]
    fn a_chmod_in_etc_changes_the_next_set() {
        let (_base, root) = fake_root();
        file(&root.join("etc/conf.d/a.conf"), 0o644);
        file(&root.join("etc/conf.d/deep/b.conf"), 0o644);
        let mut cache = Cache::watched(root.clone());
        let first = cache.get();
        assert_eq!(first.etc.allowed, vec![root.join("etc")]);
        assert!(
            Arc::ptr_eq(&first, &cache.get()),
            "rebuilt without a change"
        );
        // A chmod changes no directory's mtime; IN_ATTRIB on the parent's watch sees it.
        chmod(&root.join("etc/conf.d/deep/b.conf"), 0o600);
        let second = cache.get();
        assert!(!second.etc.allowed.contains(&root.join("etc")));
        assert!(second.etc.allowed.contains(&root.join("etc/conf.d/a.conf")));
        assert!(
            !second
                .etc
                .allowed
                .contains(&root.join("etc/conf.d/deep/b.conf"))
        );
        assert_eq!(
            withheld(&second.etc, &root.join("etc"), "conf.d/deep/b.conf"),
            Some(Withheld::NotWorldReadable)
        );
        // And back: liveness.
        chmod(&root.join("etc/conf.d/deep/b.conf"), 0o644);
        assert_eq!(cache.get().etc.allowed, vec![root.join("etc")]);
    }

    #[test]
    fn a_secret_created_or_renamed_into_a_collapsed_subtree_splits_it() {
        let (_base, root) = fake_root();
        file(&root.join("etc/conf.d/a.conf"), 0o644);
        let mut cache = Cache::watched(root.clone());
        assert_eq!(cache.get().etc.allowed, vec![root.join("etc")]);
        file(&root.join("etc/staging"), 0o600);
        std::fs::rename(root.join("etc/staging"), root.join("etc/conf.d/key")).unwrap();
        let set = cache.get();
        assert!(!set.etc.allowed.contains(&root.join("etc")));
        assert!(!set.etc.allowed.contains(&root.join("etc/conf.d")));
        assert!(set.etc.allowed.contains(&root.join("etc/conf.d/a.conf")));
    }

    #[test]
    fn without_watches_every_call_sees_the_tree_as_it_is() {
        let (_base, root) = fake_root();
        file(&root.join("etc/conf.d/a.conf"), 0o644);
        let mut cache = Cache::new(root.clone());
        cache.watch = Watching::Unavailable;
        assert_eq!(cache.get().etc.allowed, vec![root.join("etc")]);
        chmod(&root.join("etc/conf.d/a.conf"), 0o640);
        assert!(!cache.get().etc.allowed.contains(&root.join("etc")));
    }

    #[test]
    fn a_primed_build_serves_the_first_call_unwatched() {
        let (_base, root) = fake_root();
        let mut cache = Cache::new(root.clone());
        cache.prime();
        let first = cache.get();
        assert!(matches!(cache.watch, Watching::NotYet));
        assert_eq!(first.etc.allowed, vec![root.join("etc")]);
        // The second call is a second call: it watches and sees the change.
        chmod(&root.join("etc/passwd"), 0o600);
        assert!(cache.get().etc.allowed.is_empty());
        assert!(matches!(cache.watch, Watching::Active(_)));
    }

    #[test]
    fn a_primed_build_too_old_for_the_first_call_is_rebuilt() {
        let (_base, root) = fake_root();
        let mut cache = Cache::new(root.clone());
        cache.prime();
        cache.primed = cache
            .primed
            .map(|t| t.checked_sub(PRIMED_FOR * 2).unwrap_or(t));
        chmod(&root.join("etc/passwd"), 0o600);
        assert!(cache.get().etc.allowed.is_empty());
    }

    #[test]
    fn a_socket_anywhere_in_etc_is_found_even_in_a_withheld_directory() {
        let (_base, root) = fake_root();
        let etc = root.join("etc");
        assert!(etc_set(&etc).sockets.is_empty());
        dir(&etc.join("private"), 0o700);
        dir(&etc.join("private/deeper"), 0o700);
        let at = etc.join("private/deeper/d.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&at).unwrap();
        assert_eq!(etc_set(&etc).sockets, vec![at.clone()]);
        dir(&etc.join("open"), 0o755);
        let open = etc.join("open/o.sock");
        let _other = std::os::unix::net::UnixListener::bind(&open).unwrap();
        let found = etc_set(&etc).sockets;
        assert!(found.contains(&at) && found.contains(&open), "{found:?}");
    }

    #[test]
    fn the_first_build_is_unwatched_and_the_second_call_watches() {
        let (_base, root) = fake_root();
        let mut cache = Cache::new(root.clone());
        cache.get();
        assert!(matches!(cache.watch, Watching::NotYet));
        chmod(&root.join("etc/passwd"), 0o600);
        // The second call starts watching and builds afresh under the watches.
        assert!(cache.get().etc.allowed.is_empty());
        assert!(matches!(cache.watch, Watching::Active(_)));
        chmod(&root.join("etc/passwd"), 0o644);
        assert_eq!(cache.get().etc.allowed, vec![root.join("etc")]);
    }

    #[test]
    fn the_real_etc_withholds_its_secrets() {
        let set = current();
        for secret in [
            "/etc/shadow",
            "/etc/gshadow",
            "/etc/sudoers",
            "/etc/ssl/private",
            "/etc/machine-id",
        ] {
            let secret = Path::new(secret);
            assert!(
                !set.etc.allowed.iter().any(|a| secret.starts_with(a)),
                "{secret:?} is covered by the set"
            );
        }
        assert!(!set.etc.allowed.iter().any(|a| a == Path::new("/etc")));
    }

    mod property {
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Node {
            File(u32),
            Dir(u32, Vec<(u8, Node)>),
            Link(u8),
        }

        fn node() -> impl Strategy<Value = Node> {
            let leaf = prop_oneof![
                4 => (0u32..0o1000).prop_map(Node::File),
                1 => (0u8..4).prop_map(Node::Link),
            ];
            leaf.prop_recursive(4, 40, 5, |inner| {
                (0u32..0o1000, prop::collection::vec((0u8..6, inner), 0..5))
                    .prop_map(|(m, kids)| Node::Dir(m, kids))
            })
        }

        const LINK_TARGETS: [&str; 4] = ["/usr/bin", "/root", "../x0", "/tmp"];
        // Two of the names are on the deny list (relative to the root).
        const NAMES: [&str; 6] = ["x0", "x1", "x2", "machine-id", "fstab", "x5"];

        fn build(path: &Path, node: &Node, dirs: &mut Vec<(PathBuf, u32)>) {
            match node {
                Node::File(mode) => {
                    std::fs::write(path, "x").unwrap();
                    chmod(path, 0o600 | mode);
                }
                Node::Link(t) => symlink(LINK_TARGETS[*t as usize], path).unwrap(),
                Node::Dir(mode, kids) => {
                    std::fs::create_dir(path).unwrap();
                    for (name, kid) in kids {
                        let p = path.join(NAMES[*name as usize]);
                        if std::fs::symlink_metadata(&p).is_err() {
                            build(&p, kid, dirs);
                        }
                    }
                    // The owner keeps rwx so an unprivileged run can walk and clean up.
                    dirs.push((path.to_path_buf(), 0o700 | mode));
                }
            }
        }

        /// Everything beneath `path`, links not followed.
        fn below(path: &Path, out: &mut Vec<PathBuf>) {
            out.push(path.to_path_buf());
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
                for e in std::fs::read_dir(path).unwrap() {
                    below(&e.unwrap().path(), out);
                }
            }
        }

        fn public(meta: &std::fs::Metadata) -> bool {
            let t = meta.file_type();
            t.is_symlink()
                || (t.is_file() && meta.mode() & 0o004 != 0)
                || (t.is_dir() && meta.mode() & 0o005 == 0o005)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]
            #[test]
            fn nothing_that_is_not_world_readable_is_ever_in_the_set(
                kids in prop::collection::vec((0u8..6, node()), 0..6),
                root_mode in 0u32..0o1000,
            ) {
                let base = tempfile::tempdir().unwrap();
                let etc = base.path().canonicalize().unwrap().join("etc");
                let mut dirs = Vec::new();
                build(&etc, &Node::Dir(root_mode, kids), &mut dirs);
                for (d, m) in &dirs {
                    chmod(d, *m);
                }
                let set = etc_set(&etc);
                for granted in &set.allowed {
                    let mut all = Vec::new();
                    below(granted, &mut all);
                    for p in all {
                        let meta = std::fs::symlink_metadata(&p).unwrap();
                        prop_assert!(public(&meta), "{p:?} ({:o}) is in the set", meta.mode());
                        let rel = p.strip_prefix(&etc).unwrap();
                        prop_assert!(
                            !ETC_DENIED.iter().any(|(n, _)| rel == Path::new(n)),
                            "{p:?} is denied by name but in the set"
                        );
                        prop_assert!(!meta.file_type().is_symlink() || p != *granted);
                    }
                }
                // Liveness: every public file whose directories are all public is covered.
                let mut all = Vec::new();
                below(&etc, &mut all);
                for p in all {
                    let rel = p.strip_prefix(&etc).unwrap();
                    let chain_public = p.ancestors().take_while(|a| a.starts_with(&etc)).all(|a| {
                        std::fs::symlink_metadata(a).is_ok_and(|m| public(&m))
                            && !ETC_DENIED.iter().any(|(n, _)| {
                                a.strip_prefix(&etc).is_ok_and(|r| r == Path::new(n))
                            })
                    });
                    let meta = std::fs::symlink_metadata(&p).unwrap();
                    if chain_public && meta.is_file() && !rel.as_os_str().is_empty() {
                        prop_assert!(
                            set.allowed.iter().any(|a| p.starts_with(a)),
                            "{p:?} is public but not in the set: {set:#?}"
                        );
                    }
                }
            }
        }
    }
}
