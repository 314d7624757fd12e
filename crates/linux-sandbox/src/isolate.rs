//! The program's own world, beyond Landlock and seccomp: a private mount
//! namespace whose view is read-only outside the writable grants — for a shell a new root
//! holding nothing but the grants, with its own `/proc` and `/dev/shm` — a private IPC
//! namespace, hidden host paths, and no capabilities.
//!
//! # Why a mount namespace
//! Landlock governs opening, creating, renaming and removing files, but not their metadata:
//! `chmod`, `chown`, `utimes`, extended attributes and `file_setattr` on a file outside the
//! grants pass it (a root command even made a set-user-ID copy of `id` outside the scope). A
//! read-only mount refuses every one of those with `EROFS`, whatever the call, so the whole
//! class is closed by one mechanism rather than by a list of system calls. And on Landlock
//! ABI < 9 nothing governs `connect()` on a *pathname* unix socket (a read-only mount does
//! not either): only a view without the host's sockets makes `AF_UNIX` safe to allow.
//!
//! # What the child does, in order ([`Isolation::enter`])
//! 1. `unshare(CLONE_NEWNS | CLONE_NEWIPC)`: the mount table is copied, the host's System V
//!    IPC objects and POSIX message queues are out of sight, and the IPC namespace dies with
//!    the call, so nothing the command makes there outlives it. A shell without network also
//!    gets `CLONE_NEWNET` in the same call (NET-1), and brings the new namespace's `lo` up
//!    (`loopback_up`): its own `127.0.0.1` and `::1`, no other interface, none of the host's
//!    listeners or abstract unix sockets (those are named per network namespace).
//! 2. Every mount becomes private, so nothing below propagates back to the host (a root
//!    host's mounts are shared). A shell's `proc` is made now (step 5 attaches it): in a user
//!    namespace the kernel makes one only while a fully visible `proc` is mounted.
//! 3. The view. For a shell ([`NewRoot`]): an empty tmpfs is attached over
//!    `/` and filled with the directories above each granted path, the symbolic links through
//!    which the policy named them (`/bin` → `usr/bin`, `/lib64` → `usr/lib64`, walked in the
//!    parent and cached with the system-path cache's descriptors), and a bind clone
//!    (`open_tree(OPEN_TREE_CLONE)`) of exactly each granted path at its own path, each
//!    looked up again by its canonical path (`openat2` with `RESOLVE_NO_SYMLINKS`) and checked
//!    to be the file the parent's descriptor names (device and inode). Read-only system
//!    grants beneath `/etc` bind the whole tree once (`WHOLE_SYSTEM_TREES`: one bind instead
//!    of ~150; Landlock still grants exactly the policy's paths); those beneath `/usr` are
//!    bound tree by tree, so `/usr/local/var` (a daemon's socket) is not in the view. The read-only
//!    binds and the new root's own directories turn read-only and `nosuid` in one
//!    `mount_setattr(AT_RECURSIVE)`, then the writable grants' clones are attached (`nosuid`,
//!    and `nodev` for directories), and the process `chroot`s into the new root (not
//!    `pivot_root` + `umount2(MNT_DETACH)`: detaching the host's tree waits for an RCU grace
//!    period on every spawn). The host's tree stays in the namespace beneath the new root,
//!    out of every path: `..` stops at the root, the program holds no descriptor into it, and
//!    `chroot`, mounts and `CAP_SYS_CHROOT` are gone. A read-only file replaced between the
//!    parent and the child (ldconfig) leaves its mount point empty; a writable grant must be
//!    the validated one (`ESTALE` otherwise: nothing runs). For a single program (RUN-7) the
//!    view is the host's tree as before: each writable grant is cloned, every mount of the
//!    view becomes read-only and `nosuid` in one call, the clones are attached over their
//!    grants.
//! 4. Directories between a writable grant and a hidden or protected path, and the symbolic
//!    links on the way to a protected path, are bound onto themselves (a mount point cannot be
//!    renamed or removed from inside: `EBUSY`; a link can be one). Then each protected path
//!    beneath a writable grant (RCS-3: `.git/hooks`, `.git/config`) is bound onto itself
//!    read-only, recursively (what is mounted beneath stays, read-only too). Then an empty
//!    read-only tmpfs covers each hidden directory, and an empty read-only regular file each
//!    hidden file (`~/.netrc`, RCS-2): one file, made in the new root's own `dev/pts` while the
//!    new root is still writable and cloned as a detached mount there (the kernel attaches no
//!    mount of an unlinked file, and the private `devpts` mounted over that directory in step 5
//!    takes its name out of the view); the first hidden file gets that mount, each next one a
//!    clone of it, attached by then. The host's tree (a single program's view) has no place
//!    for such a file, so a hidden file there is refused. The empty file gets a `READ_FILE`
//!    Landlock rule of its own here: where its directory is split around hidden paths (module
//!    `split`: no rule above it grants reading), it still reads as empty rather than refused.
//!    The covers hide what exists at `prepare`; what the host makes or renames into place
//!    later detaches a cover in this namespace (the kernel drops mounts on a dentry that is
//!    unlinked or renamed over in another namespace), and beneath a read-only grant Landlock
//!    refuses it instead (no rule binds the new inode).
//! 5. For a shell ([`World`], LIVE-2): the fresh `proc` of the command's PID
//!    namespace covers `/proc` (read-only, `nosuid,nodev,noexec`, `hidepid=ptraceable`) and a
//!    fresh, size-bounded tmpfs covers `/dev/shm` (mode 1777, `nosuid,nodev,noexec`); each
//!    gets its Landlock rule here, on the new mount's root (read; read, write, create and
//!    remove files), added to the prepared ruleset before `landlock_restrict_self`. The parent
//!    cannot make these rules: the inodes do not exist before the mounts.
//! 6. The working directory is entered again by its path and checked to be the same
//!    directory: the one inherited lies in the host's tree, beneath the clones; `..` from
//!    there would walk it. In a new root a working directory outside every grant becomes `/`.
//!
//! # Unix sockets
//! In a new root the only sockets a path reaches are the ones inside the grants: the
//! workspace, the call's temp dir, an approved extra path (a granted `$HOME` brings its
//! `~/.gnupg` agent sockets with it), and `/usr` and `/etc` (none, FHS). The host's `/run`,
//! `/var`, `/tmp`, `/home` and `/dev/log` are not in it. Abstract sockets have no path: the
//! Landlock scope (ABI 6) refuses connecting to one made outside the sandbox. Only where both
//! hold does seccomp allow `socket(AF_UNIX)` (see `sandbox`); elsewhere it refuses it below
//! Landlock ABI 9 and the enforcement report says so.
//!
//! # The private `/proc` and PID 1
//! The command runs as PID 2 of a PID namespace whose PID 1 is proctree's supervisor, which
//! shares the host's memory (`CLONE_VM`): its environment, argv, mappings, descriptors, root
//! and working directory are the host's. `hidepid=ptraceable` lists only the processes the
//! reader may ptrace, and Landlock refuses ptrace of every process outside the reader's own
//! domain (the supervisor, the host's processes), so `/proc/1` does not exist for the command,
//! nor does any process but its own: `ps -e` shows the call's processes only. Access to their
//! `environ`, `mem`, `maps`, `fd`, `root`, `cwd` goes through the same ptrace check, which the
//! command's own processes pass and nothing else does. The mount is read-only and the rule
//! grants reading only, so `/proc/sys`, `/proc/sysrq-trigger` and `/proc/self/mem` cannot be
//! written. What it still shows, as the host's `/proc` shows any local user: the kernel's
//! machine-wide tables (`meminfo`, `stat`, `cpuinfo`, `loadavg`, and `/proc/net` of the host's
//! network namespace, which names its sockets and connections). Without a PID namespace or a
//! mount namespace there is no private `/proc`: the host's stays denied but for the files the
//! policy grants (a shell's `meminfo`, `cpuinfo`, `stat`), and the enforcement report says so.
//!
//! # The private `/dev/shm`
//! POSIX shared memory (`shm_open`) and named semaphores are files in `/dev/shm`. Each call
//! gets an empty tmpfs there, bounded (see `sandbox::shm_size`), gone with the call's mount
//! namespace: the host's objects and another call's are never in it. Named semaphores need one
//! hard link: glibc's `sem_open` makes one by `link(2)`ing a temporary file to its name, and
//! the command may make no hard link (CMD-9). With a private `/dev/shm` and a supervisor
//! that takes the link broker (`PreparedSandbox::take_link_broker`), seccomp hands `link` and
//! `linkat` to the supervisor instead of refusing them ([`open_private_shm`] names the
//! directory it links in), which links two single names inside this tmpfs and refuses
//! everything else (proctree's `links` module): Python's `multiprocessing` locks, queues and
//! pools work (LIVE-2), and no hard link is ever made in the workspace, the temp dir
//! or a grant.
//!
//! Why paths are looked up again in the child at all: descriptors opened in the parent name
//! mounts of the host's namespace, which `open_tree` refuses to clone from another namespace.
//! Every lookup is checked against the identity the parent pinned; a path swapped in between
//! fails the spawn with `ESTALE` (nothing runs) instead of granting what it now names.
//!
//! # Capabilities ([`drop_capabilities`])
//! A root host's command would otherwise keep every capability (`capsh --print`: `=ep`), and
//! socket ioctls could reconfigure the host's network. The child empties its bounding and ambient
//! sets (where it holds `CAP_SETPCAP`) and its effective, permitted and inheritable sets.
//! With `no_new_privs` set just after, `execve` grants nothing back, not even to root.
//!
//! Everything here runs between the clone and `exec` in a child that may share the host's
//! memory: raw system calls only, on data built by [`Isolation::prepare`] in the parent, stack
//! buffers, no allocation, no `errno`.

use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, Weak};

use syscalls::{Sysno, syscall};

use crate::error::{ApplyError, ApplyStage, SandboxError};

/// At most this many mounts are made for one program (writable grants, bound directories,
/// protected and hidden paths together): the child keeps the writable grants' descriptors in a
/// stack array. A `run_command` view protects a repository's hooks and config and hides every
/// credential location of a home that exists (RCS-2, RCS-3): dozens, not hundreds.
pub(crate) const MAX_MOUNTS: usize = 256;

/// Which file a path names: device and inode, as `statx` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Ident {
    dev_major: u32,
    dev_minor: u32,
    ino: u64,
}

impl Ident {
    fn of(stx: &libc::statx) -> Ident {
        Ident {
            dev_major: stx.stx_dev_major,
            dev_minor: stx.stx_dev_minor,
            ino: stx.stx_ino,
        }
    }

    /// The identity of the file `fd` names (parent side).
    fn of_fd(fd: BorrowedFd<'_>) -> std::io::Result<Ident> {
        use std::os::fd::AsRawFd;
        statx_fd(fd.as_raw_fd()).map_err(std::io::Error::from_raw_os_error)
    }
}

impl From<crate::sandbox::FileId> for Ident {
    /// An `fstat` identity in `statx` terms (`st_dev` split into major and minor): the parent
    /// has it already for every rule it opened, the child compares `statx` results with it.
    fn from(id: crate::sandbox::FileId) -> Ident {
        Ident {
            dev_major: rustix::fs::major(id.dev),
            dev_minor: rustix::fs::minor(id.dev),
            ino: id.ino,
        }
    }
}

/// A path the child looks up again, and the file it must name.
#[derive(Debug)]
pub(crate) struct Target {
    path: CString,
    id: Ident,
}

/// A path to hide or protect as the parent found it: canonical, its identity, its kind.
#[derive(Debug, Clone)]
pub(crate) struct Covered {
    pub(crate) path: PathBuf,
    pub(crate) id: Ident,
    pub(crate) is_dir: bool,
}

impl Covered {
    /// The symbolic links passed on the way to `path` as the caller named it (their own
    /// locations, with no link before them): a protected path reached through `.git` → a
    /// directory elsewhere stays protected only if `.git` itself cannot be replaced.
    pub(crate) fn links_to(path: &Path) -> Vec<PathBuf> {
        PathView::walk(path)
            .links
            .into_iter()
            .map(|(at, _)| at)
            .collect()
    }
}

/// A directory to stage as the parent found it (module `stage`): the directory, the overlay's
/// upper and work directories, and the directories beneath it that stay the real ones.
#[derive(Debug)]
pub(crate) struct StagedDir {
    pub(crate) dir: Covered,
    pub(crate) upper: Covered,
    pub(crate) work: Covered,
    pub(crate) through: Vec<Covered>,
}

/// The most directories one policy stages, and the most `through` directories each: the child
/// keeps their detached mounts in stack arrays.
pub(crate) const MAX_STAGED: usize = 64;
pub(crate) const MAX_THROUGH: usize = 4;

/// A staged directory as the child makes it.
#[derive(Debug)]
struct StagePlan {
    dir: Target,
    upper: Target,
    work: Target,
    /// Each real directory beneath `dir`, and its name relative to `dir`.
    through: Vec<(Target, CString)>,
    /// What the child did ([`crate::stage::Staging`]).
    outcome: Arc<AtomicI32>,
    /// Whether hidden paths lie beneath `dir`: shadowed in `upper` by an empty file of mode 0,
    /// or a whiteout where they do not exist yet (overlayfs shows the upper's entry, never the
    /// lower's beneath it), so their covers are made only where the overlay is not (the
    /// read-only fallback shows the real paths).
    shadows: bool,
    /// Landlock rights of the grant that *is* `dir` (0: none), given again on the overlay's
    /// root: Landlock passes over a mount point when it walks up from the mount above it, so
    /// the grant's own rule, on the directory beneath the overlay, does not reach into it.
    rights: u64,
}

/// What the child does beyond Landlock and seccomp, prepared in the parent.
#[derive(Debug, Default)]
pub(crate) struct Isolation {
    /// Writable grants, outermost only (a grant beneath another is covered by its clone).
    writable: Vec<Target>,
    /// Directories bound onto themselves, shallowest first.
    pinned: Vec<Target>,
    /// Paths beneath a writable grant bound read-only onto themselves, shallowest first
    /// (RCS-3).
    protected: Vec<Target>,
    /// Directories seen through a private copy (module `stage`), shallowest first.
    staged: Vec<StagePlan>,
    /// Directories covered by an empty read-only tmpfs.
    hidden: Vec<Target>,
    /// Files (anything but a directory) covered by an empty read-only regular file, made in
    /// the new root ([`NewRoot::empty_file`]).
    hidden_files: Vec<Target>,
    /// The shell's own `/proc` and `/dev/shm` (LIVE-2); none for a single program.
    pub(crate) world: World,
    /// The view as a new root holding only the grants; `None`: the host's
    /// tree, read-only.
    pub(crate) root: Option<NewRoot>,
    /// Landlock rights (`READ_FILE`) on the empty file that covers hidden files, added in the
    /// child: where the directory of a hidden file is split (module `split`), nothing above
    /// the cover grants reading it, and it should read as empty rather than be refused.
    pub(crate) cover_rights: u64,
}

/// A new root for the view: an empty tmpfs holding bind clones of exactly
/// the granted paths at their own absolute paths, the directories above them, and the
/// symbolic links through which the policy named them (`/bin` → `usr/bin`). Planned in the
/// parent; every path is relative to the new root and NUL-terminated.
#[derive(Debug, Default)]
pub(crate) struct NewRoot {
    /// Directories to make, parents first (the ones above the binds, `proc`, `dev/shm`).
    dirs: Vec<CString>,
    /// Symbolic links to make: where, and the text the host's link holds.
    links: Vec<(CString, CString)>,
    /// The binds, read-only ones first, each group shallowest first.
    binds: Vec<Bind>,
    /// Where an empty regular file can be made whose read-only bind covers each hidden file: in
    /// the new root's own `dev/pts`, which the private `devpts` covers afterwards; `None` where
    /// the view has no such directory of its own.
    empty_file_at: Option<CString>,
    /// Make that file ([`Isolation::cover_files`]).
    empty_file: bool,
    /// The `size=` and `nr_inodes=` of the private tmpfs over `tmp` and `var/tmp` (NET-2) and
    /// the Landlock rights on each; `None`: the view has no writable `/tmp`.
    pub(crate) tmp: Option<((CString, CString), u64)>,
}

/// The new root's own temp directories (NET-2), relative to it: each a fresh tmpfs.
const PRIVATE_TMP: [&std::ffi::CStr; 2] = [c"tmp", c"var/tmp"];

/// One granted path bound into the new root.
#[derive(Debug)]
struct Bind {
    /// The host's path (absolute), looked up again in the child and checked.
    target: Target,
    /// The same path relative to the new root.
    at: CString,
    /// Whether its mount point is made (a file or a directory of the new root) or exists
    /// already inside an outer bind.
    make: Option<Kind>,
    writable: bool,
    is_dir: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
}

/// A granted path as the parent opened it, for [`NewRoot::plan`].
#[derive(Debug, Clone)]
pub(crate) struct Grant {
    /// Canonical.
    pub(crate) path: PathBuf,
    pub(crate) id: Ident,
    pub(crate) is_dir: bool,
    pub(crate) writable: bool,
    /// A fixed system location ([`Policy::allow_system`](crate::Policy::allow_system)).
    pub(crate) system: bool,
}

/// System trees bound whole when the policy grants anything read-only beneath them: one bind
/// instead of one per grant (a shell's set names ~150 `/etc` entries, and each bind costs the
/// child several mount calls on every spawn). What it adds to the view is never readable
/// (Landlock still grants exactly the policy's paths) nor writable (read-only). It could hold a
/// unix socket, which Landlock below ABI 9 does not check: the caller that allows unix sockets
/// in the view is the one that knows (exec's system set searches `/etc` for sockets and
/// refuses them where it finds one). Not `/usr`: its trees are bound one by one (a dozen
/// binds), since `/usr/local/var` and `/usr/local/etc` are where autoconf-prefix daemons keep
/// their sockets and are never part of the set.
const WHOLE_SYSTEM_TREES: [&str; 1] = ["/etc"];

/// How a path as a policy names it reaches its file: the symbolic links on the way (where,
/// and the text each holds) and the real directories passed. The new root makes them where
/// no bind provides them, so `/bin/sh` and `/lib64/ld-linux-x86-64.so.2` resolve as on the
/// host.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct PathView {
    links: Vec<(PathBuf, PathBuf)>,
    dirs: Vec<PathBuf>,
}

impl PathView {
    /// Walks `path` (absolute) on the host, following each link as `open` would (at most 40).
    pub(crate) fn walk(path: &Path) -> PathView {
        let mut view = PathView::default();
        let mut pending = path.to_path_buf();
        'restart: for _ in 0..40 {
            let mut prefix = PathBuf::from("/");
            let components: Vec<Component<'_>> = pending.components().collect();
            for (i, component) in components.iter().enumerate() {
                match component {
                    Component::Normal(name) => prefix.push(name),
                    Component::ParentDir => {
                        prefix.pop();
                        continue;
                    }
                    _ => continue,
                }
                let Ok(meta) = std::fs::symlink_metadata(&prefix) else {
                    return view;
                };
                if meta.file_type().is_symlink() {
                    let Ok(text) = std::fs::read_link(&prefix) else {
                        return view;
                    };
                    let mut next = prefix.parent().unwrap_or(Path::new("/")).join(&text);
                    for rest in &components[i + 1..] {
                        next.push(rest);
                    }
                    if !view.links.iter().any(|(l, _)| *l == prefix) {
                        view.links.push((prefix, text));
                    }
                    pending = next;
                    continue 'restart;
                }
                if meta.is_dir() && i + 1 < components.len() && !view.dirs.contains(&prefix) {
                    view.dirs.push(prefix.clone());
                }
            }
            return view;
        }
        view
    }

    /// [`PathView::walk`] of a path known to pass no symbolic link (opened with
    /// `RESOLVE_NO_SYMLINKS`, lexically normal): every name before the last is a directory, so
    /// the walk's answer follows from the text alone.
    pub(crate) fn direct(path: &Path) -> PathView {
        let mut view = PathView::default();
        let mut prefix = PathBuf::from("/");
        let names: Vec<&std::ffi::OsStr> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(name) => Some(name),
                _ => None,
            })
            .collect();
        for name in names.iter().take(names.len().saturating_sub(1)) {
            prefix.push(name);
            if !view.dirs.contains(&prefix) {
                view.dirs.push(prefix.clone());
            }
        }
        view
    }

    /// [`PathView::walk`] of a system location, cached while `fd` (the system-path cache's
    /// descriptor for it) is the one held: that cache drops a descriptor when anything along
    /// the path's resolution changes, links included. Weak references keep each allocation,
    /// so a new descriptor never matches an old entry.
    pub(crate) fn of_system(path: &Path, fd: &Arc<OwnedFd>) -> Arc<PathView> {
        static CACHE: Mutex<Vec<CachedView>> = Mutex::new(Vec::new());
        let mut cache = CACHE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((.., view)) = cache.iter().find(|(p, weak, _)| {
            std::ptr::eq(weak.as_ptr(), Arc::as_ptr(fd)) && p.as_os_str() == path.as_os_str()
        }) {
            return Arc::clone(view);
        }
        cache.retain(|(p, weak, _)| p.as_os_str() != path.as_os_str() && weak.strong_count() > 0);
        let view = Arc::new(PathView::walk(path));
        cache.push((path.to_owned(), Arc::downgrade(fd), Arc::clone(&view)));
        view
    }
}

/// A system location's walk, with the descriptor it was made for.
type CachedView = (PathBuf, Weak<OwnedFd>, Arc<PathView>);

/// [`canonical_path_of`] a system location's descriptor, cached while it is held (see
/// [`PathView::of_system`]).
pub(crate) fn canonical_path_of_system(fd: &Arc<OwnedFd>) -> std::io::Result<PathBuf> {
    static CACHE: Mutex<Vec<(Weak<OwnedFd>, PathBuf)>> = Mutex::new(Vec::new());
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, path)) = cache
        .iter()
        .find(|(weak, _)| std::ptr::eq(weak.as_ptr(), Arc::as_ptr(fd)))
    {
        return Ok(path.clone());
    }
    let path = canonical_path_of(fd.as_fd())?;
    cache.retain(|(weak, _)| weak.strong_count() > 0);
    cache.push((Arc::downgrade(fd), path.clone()));
    Ok(path)
}

/// `inner` strictly beneath `outer`, both canonical and absolute: a byte comparison.
fn beneath_bytes(inner: &Path, outer: &Path) -> bool {
    let (inner, outer) = (inner.as_os_str().as_bytes(), outer.as_os_str().as_bytes());
    inner.len() > outer.len()
        && inner.starts_with(outer)
        && (outer == b"/" || inner[outer.len()] == b'/')
}

/// Relative to the root, NUL-terminated.
fn rel(path: &Path) -> Result<CString, SandboxError> {
    c_path(path.strip_prefix("/").unwrap_or(path))
}

impl NewRoot {
    /// Plans the new root for `grants` (every path the policy grants, canonical), `given` (the
    /// paths as the policy named them, which may pass through symbolic links) and the mount
    /// points of the private `/proc` and `/dev/shm`. Grants beneath `/proc` are left out when
    /// the view gets its own `/proc`. `None` when there is nothing sensible to build (a grant
    /// of `/` itself: then the host's tree is the view anyway).
    pub(crate) fn plan(
        grants: &[Grant],
        given: &[&PathView],
        proc: bool,
        shm: bool,
        pts: bool,
    ) -> Result<Option<NewRoot>, SandboxError> {
        let mut whole: Vec<Grant> = Vec::new();
        for tree in WHOLE_SYSTEM_TREES {
            let tree = Path::new(tree);
            let beneath = |g: &Grant| {
                g.system && !g.writable && (g.path == tree || beneath_bytes(&g.path, tree))
            };
            if grants.iter().any(beneath) {
                whole.push(Grant {
                    path: tree.to_owned(),
                    id: ident_of_path(tree)?,
                    is_dir: true,
                    writable: false,
                    system: true,
                });
            }
        }
        let mut sorted: Vec<&Grant> = whole.iter().chain(grants).collect();
        sorted.sort_by_cached_key(|g| g.path.components().count());
        if sorted.iter().any(|g| g.path == Path::new("/")) {
            return Ok(None);
        }
        // (grant, writable, top-level)
        let mut chosen: Vec<(&Grant, bool, bool)> = Vec::new();
        for grant in sorted {
            if proc && grant.path.starts_with("/proc") {
                continue;
            }
            if let Some(same) = chosen
                .iter_mut()
                .find(|(g, ..)| g.path.as_os_str() == grant.path.as_os_str())
            {
                same.1 |= grant.writable;
                continue;
            }
            let outer = chosen
                .iter()
                .filter(|(g, ..)| g.is_dir && beneath_bytes(&grant.path, &g.path))
                .map(|&(_, writable, _)| writable)
                .fold(None, |acc: Option<bool>, w| Some(acc.unwrap_or(false) || w));
            match outer {
                None => chosen.push((grant, grant.writable, true)),
                // Writable beneath a read-only bind: its own writable clone over it.
                Some(false) if grant.writable => chosen.push((grant, true, false)),
                // Covered by the outer bind; Landlock tells the rights apart.
                Some(_) => {}
            }
        }
        // Paths are canonical and absolute here: byte comparisons suffice (and are what keeps
        // this cheap on every spawn).
        let bound = |path: &Path| {
            let path = path.as_os_str().as_bytes();
            chosen.iter().any(|(g, ..)| {
                let bind = g.path.as_os_str().as_bytes();
                path == bind
                    || (g.is_dir && path.starts_with(bind) && path.get(bind.len()) == Some(&b'/'))
            })
        };
        let mut dirs: Vec<PathBuf> = Vec::new();
        let mut seen: std::collections::HashSet<Vec<u8>> = std::collections::HashSet::new();
        let mut add_dir = |dirs: &mut Vec<PathBuf>, dir: &Path| {
            let bytes = dir.as_os_str().as_bytes();
            if bytes != b"/" && seen.insert(bytes.to_vec()) {
                dirs.push(dir.to_owned());
            }
        };
        for (grant, _, top) in &chosen {
            if *top {
                for dir in grant.path.ancestors().skip(1) {
                    add_dir(&mut dirs, dir);
                }
            }
        }
        if proc {
            add_dir(&mut dirs, Path::new("/proc"));
        }
        if shm {
            add_dir(&mut dirs, Path::new("/dev"));
            add_dir(&mut dirs, Path::new("/dev/shm"));
        }
        if pts {
            add_dir(&mut dirs, Path::new("/dev"));
            add_dir(&mut dirs, Path::new("/dev/pts"));
        }
        // The symbolic links on the way to each path as the policy named it, and the real
        // directories they pass, where no bind provides them.
        let mut links: Vec<(PathBuf, PathBuf)> = Vec::new();
        for view in given {
            for dir in &view.dirs {
                if !bound(dir) {
                    add_dir(&mut dirs, dir);
                }
            }
            for (link, text) in &view.links {
                if !bound(link) && !links.iter().any(|(l, _)| l.as_os_str() == link.as_os_str()) {
                    links.push((link.clone(), text.clone()));
                }
            }
        }
        // The links every Linux system has into `/proc` (bash's `<(…)` opens `/dev/fd/63`),
        // where the view has its own `/proc` to lead to.
        if proc {
            add_dir(&mut dirs, Path::new("/dev"));
            for (link, text) in [
                ("/dev/fd", "/proc/self/fd"),
                ("/dev/stdin", "/proc/self/fd/0"),
                ("/dev/stdout", "/proc/self/fd/1"),
                ("/dev/stderr", "/proc/self/fd/2"),
            ] {
                let link = PathBuf::from(link);
                if !bound(&link) && !links.iter().any(|(l, _)| *l == link) {
                    links.push((link, PathBuf::from(text)));
                }
            }
        }
        // The multiplexer of the private `devpts`, as `devpts(5)` describes for a new instance.
        if pts {
            let link = PathBuf::from("/dev/ptmx");
            if !bound(&link) && !links.iter().any(|(l, _)| *l == link) {
                links.push((link, PathBuf::from("pts/ptmx")));
            }
        }
        // A link and a directory at one place cannot both be made; the directory wins (it
        // holds binds), and the link's own target was followed above.
        links.retain(|(l, _)| !dirs.iter().any(|d| d.as_os_str() == l.as_os_str()));
        dirs.sort_by_cached_key(|d| d.components().count());

        let mut plan = NewRoot::default();
        if pts && !bound(Path::new("/dev/pts")) {
            plan.empty_file_at = Some(c"dev/pts/agent-exec-empty-file".to_owned());
        }
        for dir in &dirs {
            plan.dirs.push(rel(dir)?);
        }
        for (link, text) in &links {
            plan.links.push((rel(link)?, c_path(text)?));
        }
        for writable in [false, true] {
            for &(grant, w, top) in chosen.iter().filter(|(_, w, _)| *w == writable) {
                plan.binds.push(Bind {
                    target: Target {
                        path: c_path(&grant.path)?,
                        id: grant.id,
                    },
                    at: rel(&grant.path)?,
                    make: top.then_some(if grant.is_dir { Kind::Dir } else { Kind::File }),
                    writable: w,
                    is_dir: grant.is_dir,
                });
            }
        }
        Ok(Some(plan))
    }
}

/// The fresh `/proc` and `/dev/shm` of a shell's world, prepared in the parent: each is mounted
/// over the view's copy of the host's and gets a Landlock rule (made in the child, on the new
/// mount's root: the parent cannot name an inode of a mount that does not exist yet).
#[derive(Debug, Default)]
pub(crate) struct World {
    /// Landlock rights on the private `/proc` (read); `None`: no private `/proc`.
    pub(crate) proc_rights: Option<u64>,
    /// The `size=` and `nr_inodes=` of the private `/dev/shm` (NUL-terminated) and the
    /// Landlock rights on it (read, write, create and remove files); `None`: no private
    /// `/dev/shm`.
    pub(crate) shm: Option<((CString, CString), u64)>,
    /// Landlock rights on a private `devpts` instance at `/dev/pts` (`/dev/ptmx` a link to its
    /// `ptmx`), so a command can open a pseudo-terminal of its own (`script`, Python's `pty`)
    /// and sees no other; mounted only in a new root. `None`: none.
    pub(crate) pts: Option<u64>,
    /// Cover [`MASKED_PROC`] in the private `/proc` with `/dev/null`: the command runs as the
    /// host's root (no user namespace of its own), which reads those root-only tables as their
    /// owner although it holds no capability.
    pub(crate) mask_proc: bool,
    /// The call's temp dir (canonical path), the `size=` and `nr_inodes=` of the tmpfs that
    /// covers it and the Landlock rights on that tmpfs (LIM-1); `None`: not covered.
    pub(crate) temp: Option<(CString, (CString, CString), u64)>,
    /// A private network namespace whose only interface is `lo`, brought up (NET-1): the
    /// command's own `127.0.0.1` and `::1`, nothing of the host's network, and none of the
    /// host's abstract unix sockets (their names live in the network namespace).
    pub(crate) net: bool,
}

/// `/proc` files a root host's command would read as their owner (mode 0400, or listing what
/// root may see) that describe the whole machine, not the command: the kernel heap's layout
/// (`slabinfo`, `vmallocinfo`, `pagetypeinfo`) that heap exploits measure, every CPU's timers
/// (`timer_list`), the keys and key quotas of every user (`keys`, `key-users`), and the debug
/// tables some kernels add. Docker masks the same kind (`/proc/timer_list`, `/proc/keys`, …).
/// Each is covered by `/dev/null`, so reading it finds nothing; a name this kernel lacks is
/// skipped.
const MASKED_PROC: [&std::ffi::CStr; 9] = [
    c"/proc/slabinfo",
    c"/proc/vmallocinfo",
    c"/proc/pagetypeinfo",
    c"/proc/timer_list",
    c"/proc/keys",
    c"/proc/key-users",
    c"/proc/sched_debug",
    c"/proc/timer_stats",
    c"/proc/latency_stats",
];

/// Covers each of [`MASKED_PROC`] that exists with a bind of the view's `/dev/null`.
fn mask_proc_tables() -> Result<(), i32> {
    let null = open_no_symlinks(libc::AT_FDCWD, c"/dev/null".as_ptr().cast(), 0)?;
    let mut result = Ok(());
    for path in MASKED_PROC {
        let at = match open_no_symlinks(libc::AT_FDCWD, path.as_ptr().cast(), 0) {
            Ok(at) => at,
            Err(libc::ENOENT) => continue,
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        let covered = clone_tree(null, 0).and_then(|tree| {
            let r = attach(tree, at);
            close(tree);
            r
        });
        close(at);
        if let Err(e) = covered {
            result = Err(e);
            break;
        }
    }
    close(null);
    result
}

/// `path` (absolute) with its longest existing ancestor made canonical and the rest appended
/// as given: where a path that does not exist yet would be, as the kernel names its parent.
pub(crate) fn canonical_as_far_as_it_exists(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return rest.iter().rev().fold(real, |p, name| p.join(name));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The canonical path of the file `fd` names, as the kernel knows it now.
pub(crate) fn canonical_path_of(fd: BorrowedFd<'_>) -> std::io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    let text = link.as_os_str().as_bytes();
    if !link.is_absolute() || text.ends_with(b" (deleted)") {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{} no longer has a path", link.display()),
        ));
    }
    Ok(link)
}

/// A granted root as the parent sees it: its canonical path, identity and whether it is
/// writable.
#[derive(Debug, Clone)]
pub(crate) struct Root {
    pub(crate) path: PathBuf,
    pub(crate) id: Ident,
    pub(crate) writable: bool,
}

fn strictly_beneath(inner: &Path, outer: &Path) -> bool {
    inner != outer && inner.starts_with(outer)
}

fn c_path(path: &Path) -> Result<CString, SandboxError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| SandboxError::OpenPath {
        path: path.to_owned(),
        source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
    })
}

/// Opens `path` without following any symbolic link and returns its identity.
fn ident_of_path(path: &Path) -> Result<Ident, SandboxError> {
    let fd = rustix::fs::open(
        path,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| SandboxError::OpenPath {
        path: path.to_owned(),
        source: e.into(),
    })?;
    Ident::of_fd(fd.as_fd()).map_err(|source| SandboxError::OpenPath {
        path: path.to_owned(),
        source,
    })
}

impl Isolation {
    /// Plans the mounts for `roots` (every non-system grant), `hidden` and `protected`.
    ///
    /// `links` are the symbolic links on the way to the protected paths
    /// ([`Covered::links_to`]): each one beneath a writable grant is bound onto itself (a link
    /// can be a mount point), so it cannot be removed or replaced to lead elsewhere.
    pub(crate) fn prepare(
        roots: &[Root],
        hidden: &[Covered],
        protected: &[Covered],
        frozen: &[Covered],
        links: &[PathBuf],
    ) -> Result<Isolation, SandboxError> {
        let mut plan = Isolation::default();
        let writable: Vec<&Root> = roots.iter().filter(|r| r.writable).collect();
        let mut outermost: Vec<&Root> = Vec::new();
        for root in &writable {
            let covered = writable
                .iter()
                .any(|other| strictly_beneath(&root.path, &other.path));
            let duplicate = outermost.iter().any(|o| o.path == root.path);
            if !covered && !duplicate {
                outermost.push(root);
            }
        }
        for root in &outermost {
            plan.writable.push(Target {
                path: c_path(&root.path)?,
                id: root.id,
            });
        }
        let mut pinned: Vec<PathBuf> = Vec::new();
        for link in links {
            if outermost.iter().any(|r| strictly_beneath(link, &r.path)) {
                pin_above(&outermost, &mut pinned, link);
                if !pinned.contains(link) {
                    pinned.push(link.clone());
                }
            }
        }
        let mut protected_paths: Vec<&Covered> = Vec::new();
        for covered in protected {
            // Read-only already outside every writable grant (and not in the view outside
            // every grant).
            if !outermost.iter().any(|r| covered.path.starts_with(&r.path)) {
                continue;
            }
            if protected_paths.iter().any(|p| p.path == covered.path) {
                continue;
            }
            pin_above(&outermost, &mut pinned, &covered.path);
            protected_paths.push(covered);
        }
        // A frozen file's directories are pinned too: in this call's view moving them would
        // move the bind along, but another call in the same folder has a view of its own, and
        // a directory moved there during this call's scan could carry a linked file past it.
        for covered in frozen {
            if !outermost.iter().any(|r| covered.path.starts_with(&r.path))
                || protected_paths
                    .iter()
                    .any(|p| covered.path.starts_with(&p.path))
            {
                continue;
            }
            pin_above(&outermost, &mut pinned, &covered.path);
            protected_paths.push(covered);
        }
        protected_paths.sort_by_key(|p| p.path.components().count());
        for covered in protected_paths {
            plan.protected.push(Target {
                path: c_path(&covered.path)?,
                id: covered.id,
            });
        }
        for covered in hidden {
            if !roots
                .iter()
                .any(|r| strictly_beneath(&covered.path, &r.path))
            {
                continue;
            }
            pin_above(&outermost, &mut pinned, &covered.path);
            let target = Target {
                path: c_path(&covered.path)?,
                id: covered.id,
            };
            if covered.is_dir {
                plan.hidden.push(target);
            } else {
                plan.hidden_files.push(target);
            }
        }
        pinned.sort_by_key(|p| p.components().count());
        for dir in pinned {
            let id = ident_of_path(&dir)?;
            plan.pinned.push(Target {
                path: c_path(&dir)?,
                id,
            });
        }
        let mounts = plan.writable.len()
            + plan.pinned.len()
            + plan.protected.len()
            + plan.hidden.len()
            + plan.hidden_files.len();
        if mounts > MAX_MOUNTS {
            return Err(SandboxError::TooManyMounts {
                count: mounts,
                max: MAX_MOUNTS,
            });
        }
        Ok(plan)
    }

    /// Adds the staged directories beneath the writable grants among `roots`, pinning the
    /// directories between each grant and the staged directory like a protected path's.
    /// `missing`: the hidden paths that do not exist now (canonical as far as they exist),
    /// kept absent beneath a staged directory.
    pub(crate) fn with_staged(
        mut self,
        roots: &[Root],
        staged: Vec<StagedDir>,
        missing: &[PathBuf],
    ) -> Result<Isolation, SandboxError> {
        if staged.is_empty() {
            return Ok(self);
        }
        let writable: Vec<&Root> = roots.iter().filter(|r| r.writable).collect();
        let outermost: Vec<&Root> = writable
            .iter()
            .copied()
            .filter(|r| {
                !writable
                    .iter()
                    .any(|other| strictly_beneath(&r.path, &other.path))
            })
            .collect();
        let mut staged: Vec<StagedDir> = staged
            .into_iter()
            .filter(|s| outermost.iter().any(|r| s.dir.path.starts_with(&r.path)))
            .collect();
        staged.sort_by_key(|s| s.dir.path.components().count());
        staged.dedup_by(|a, b| a.dir.path == b.dir.path);
        if staged.len() > MAX_STAGED || staged.iter().any(|s| s.through.len() > MAX_THROUGH) {
            return Err(SandboxError::TooManyMounts {
                count: staged.len() + staged.iter().map(|s| s.through.len()).sum::<usize>(),
                max: MAX_STAGED,
            });
        }
        let mut pinned: Vec<PathBuf> = Vec::new();
        for s in &staged {
            pin_above(&outermost, &mut pinned, &s.dir.path);
        }
        pinned.sort_by_key(|p| p.components().count());
        for dir in pinned {
            let path = c_path(&dir)?;
            if self.pinned.iter().any(|t| t.path == path) {
                continue;
            }
            let id = ident_of_path(&dir)?;
            self.pinned.push(Target { path, id });
        }
        self.pinned
            .sort_by_key(|t| t.path.as_bytes().iter().filter(|&&b| b == b'/').count());
        for s in staged {
            // Hidden paths beneath it: shadowed in its upper (module docs of `StagePlan`). An
            // overlay's entries carry the overlay's device, so a cover there would not find
            // the identity it was planned with.
            let mut shadows = false;
            for target in self.hidden.iter().chain(&self.hidden_files) {
                let path = Path::new(std::ffi::OsStr::from_bytes(target.path.as_bytes()));
                if let Ok(rel) = path.strip_prefix(&s.dir.path) {
                    if !rel.as_os_str().is_empty() {
                        shadow(&s.upper.path, &s.dir.path, rel, true)?;
                        shadows = true;
                    }
                }
            }
            for path in missing {
                if let Ok(rel) = path.strip_prefix(&s.dir.path) {
                    if !rel.as_os_str().is_empty() {
                        shadow(&s.upper.path, &s.dir.path, rel, false)?;
                        shadows = true;
                    }
                }
            }
            let mut through = Vec::with_capacity(s.through.len());
            for t in &s.through {
                let rel = t.path.strip_prefix(&s.dir.path).unwrap_or(Path::new(""));
                through.push((
                    Target {
                        path: c_path(&t.path)?,
                        id: t.id,
                    },
                    c_path(rel)?,
                ));
            }
            self.staged.push(StagePlan {
                dir: Target {
                    path: c_path(&s.dir.path)?,
                    id: s.dir.id,
                },
                upper: Target {
                    path: c_path(&s.upper.path)?,
                    id: s.upper.id,
                },
                work: Target {
                    path: c_path(&s.work.path)?,
                    id: s.work.id,
                },
                through,
                outcome: Arc::new(AtomicI32::new(0)),
                shadows,
                rights: 0,
            });
        }
        let mounts = self.writable.len()
            + self.pinned.len()
            + self.protected.len()
            + self.hidden.len()
            + self.hidden_files.len()
            + self
                .staged
                .iter()
                .map(|s| 1 + s.through.len())
                .sum::<usize>();
        if mounts > MAX_MOUNTS {
            return Err(SandboxError::TooManyMounts {
                count: mounts,
                max: MAX_MOUNTS,
            });
        }
        Ok(self)
    }

    /// Whether any directory is staged.
    pub(crate) fn has_staged(&self) -> bool {
        !self.staged.is_empty()
    }

    /// Gives each staged directory that is itself a grant its grant's Landlock rights
    /// (`StagePlan::rights`): `rights` answers for a canonical path.
    pub(crate) fn give_staged_rights(&mut self, rights: impl Fn(&Path) -> u64) {
        for plan in &mut self.staged {
            plan.rights = rights(Path::new(std::ffi::OsStr::from_bytes(
                plan.dir.path.as_bytes(),
            )));
        }
    }

    /// The report of the staged directories, shared with the child that fills it in.
    pub(crate) fn staging(&self) -> crate::stage::Staging {
        crate::stage::Staging {
            dirs: self
                .staged
                .iter()
                .map(|s| {
                    (
                        PathBuf::from(std::ffi::OsStr::from_bytes(s.dir.path.as_bytes())),
                        Arc::clone(&s.outcome),
                    )
                })
                .collect(),
        }
    }

    /// Asks the new root for the empty file that covers hidden files, or refuses the policy
    /// where the view is the host's tree (which has no place for one the host would not see).
    pub(crate) fn cover_files(&mut self) -> Result<(), SandboxError> {
        let Some(first) = self.hidden_files.first() else {
            return Ok(());
        };
        match &mut self.root {
            Some(root) if root.empty_file_at.is_some() && self.world.pts.is_some() => {
                root.empty_file = true;
                Ok(())
            }
            _ => {
                let hidden = PathBuf::from(std::ffi::OsStr::from_bytes(first.path.as_bytes()));
                Err(SandboxError::CannotHideFile {
                    root: hidden.parent().unwrap_or(Path::new("/")).to_owned(),
                    hidden,
                })
            }
        }
    }

    /// Steps 1-6 of the module documentation, in the child. `ruleset` is the prepared Landlock
    /// ruleset, which gets the rules of the private `/proc` and `/dev/shm` (step 5).
    ///
    /// Async-signal-safe: raw system calls on memory prepared in the parent and the stack.
    pub(crate) fn enter(&self, ruleset: i32) -> Result<(), ApplyError> {
        let fail = |errno: i32| ApplyError {
            stage: ApplyStage::Namespaces,
            errno,
        };
        // The working directory before anything moves: its identity and its path.
        let mut cwd = [0u8; 4096];
        let cwd_id = statx_fd(libc::AT_FDCWD).map_err(fail)?;
        // SAFETY: a writable buffer of that length.
        let len =
            sys(unsafe { syscall!(Sysno::getcwd, cwd.as_mut_ptr(), cwd.len()) }).map_err(fail)?;
        // getcwd returns the length including the NUL; "(unreachable)…" is not absolute.
        if cwd.first() != Some(&b'/') || len == 0 {
            return Err(fail(libc::ESTALE));
        }

        enter_private_namespaces(self.world.net).map_err(fail)?;
        if self.world.net {
            loopback_up().map_err(fail)?;
        }
        // Made before the new root replaces the host's tree: in a user namespace the kernel
        // mounts a `proc` only where a fully visible one is mounted already
        // (`mount_too_revealing`, checked by `fsmount`).
        let proc = match self.world.proc_rights {
            Some(_) => private_proc().map(Some).map_err(fail)?,
            None => None,
        };

        // The staged directories' overlays, made while the host's paths still resolve (their
        // layers are looked up here); attached in `bind_and_cover`, once the view is in place.
        let mut overlays = [Overlay::NONE; MAX_STAGED];
        for (slot, plan) in overlays.iter_mut().zip(&self.staged) {
            *slot = make_overlay(plan);
        }

        // The new root's empty file (detached, read-only), when a hidden file needs it.
        let empty = if let Some(root) = &self.root {
            let empty = root.enter().map_err(fail)?;
            if let Some((_, rights)) = &root.tmp {
                for at in PRIVATE_TMP {
                    writable_tmp(at, ruleset, *rights).map_err(|e| {
                        close(empty);
                        fail(e)
                    })?;
                }
            }
            empty
        } else {
            self.read_only_host_view().map_err(fail)?;
            -1
        };
        let covered = self
            .bind_and_cover(empty, &overlays, ruleset)
            .and_then(|()| {
                if empty >= 0 && !self.hidden_files.is_empty() && self.cover_rights != 0 {
                    add_rule(ruleset, empty, self.cover_rights)
                } else {
                    Ok(())
                }
            });
        close(empty);
        covered.map_err(fail)?;

        // Step 5: after the view turned read-only, so that `/dev/shm` stays writable.
        if let (Some(mnt), Some(rights)) = (proc, self.world.proc_rights) {
            mount_private(Ok(mnt), c"/proc", ruleset, rights).map_err(fail)?;
            if self.world.mask_proc {
                mask_proc_tables().map_err(fail)?;
            }
        }
        if let Some((size, rights)) = &self.world.shm {
            mount_private(private_shm(size), c"/dev/shm", ruleset, *rights).map_err(fail)?;
        }
        if let Some((path, size, rights)) = &self.world.temp {
            mount_private(private_temp(size, b"0700\0"), path, ruleset, *rights)
                .and_then(|()| make_home_and_tmp(path))
                .map_err(fail)?;
        }
        // Only in a new root: there `/dev/ptmx` leads into this instance, and the host's
        // `/dev/pts` was never in the view.
        if let (Some(rights), true) = (self.world.pts, self.root.is_some()) {
            mount_private(private_pts(), c"/dev/pts", ruleset, rights).map_err(fail)?;
        }

        // Step 6. `cwd` holds a NUL-terminated canonical path. In a new root it may not exist
        // (a working directory outside every grant, where Landlock would refuse everything
        // anyway): the program starts in `/`, where `pivot_into` left it. Never in the old
        // tree: relative paths from there would reach the host's sockets.
        let at = match open_no_symlinks(libc::AT_FDCWD, cwd.as_ptr(), libc::O_DIRECTORY) {
            Err(libc::ENOENT) if self.root.is_some() => return Ok(()),
            other => other.map_err(|e| fail(replaced(e)))?,
        };
        let same = statx_fd(at).map(|id| id == cwd_id);
        // SAFETY: our descriptor.
        let entered = match same {
            Ok(true) => sys(unsafe { syscall!(Sysno::fchdir, at) }).map(drop),
            Ok(false) => Err(libc::ESTALE),
            Err(e) => Err(e),
        };
        close(at);
        entered.map_err(fail)
    }

    /// Step 4 of the module documentation: the pinned directories, then the protected paths
    /// (read-only binds onto themselves, recursive: a pinned directory or a hidden path beneath
    /// stays as it is), then the hidden directories and files. `empty` is the new root's empty
    /// file (a detached read-only mount), or -1.
    fn bind_and_cover(
        &self,
        empty: i32,
        overlays: &[Overlay; MAX_STAGED],
        ruleset: i32,
    ) -> Result<(), i32> {
        for target in &self.pinned {
            bind_onto_itself(target, 0)?;
        }
        let mut staged = Ok(());
        for (plan, overlay) in self.staged.iter().zip(overlays) {
            if staged.is_ok() {
                staged = attach_staged(plan, overlay, ruleset);
            }
        }
        for overlay in overlays.iter().take(self.staged.len()) {
            overlay.close();
        }
        staged?;
        for target in &self.protected {
            bind_onto_itself(
                target,
                libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
            )?;
        }
        for target in &self.hidden {
            if self.shadowed(target) {
                continue;
            }
            let at = open_checked(target)?;
            let covered = empty_read_only_tmpfs().and_then(|mnt| {
                let r = attach(mnt, at);
                close(mnt);
                r
            });
            close(at);
            covered?;
        }
        // The first hidden file gets the detached empty file itself; each next one a clone of
        // that mount, which is attached in this namespace by then (older kernels clone no
        // detached mount).
        let mut first = true;
        for target in &self.hidden_files {
            if self.shadowed(target) {
                continue;
            }
            if empty < 0 {
                return Err(libc::EINVAL);
            }
            let at = open_checked(target)?;
            let covered = if std::mem::take(&mut first) {
                attach(empty, at)
            } else {
                clone_tree(empty, HIDDEN_FILE_ATTRS).and_then(|mnt| {
                    let r = attach(mnt, at);
                    close(mnt);
                    r
                })
            };
            close(at);
            covered?;
        }
        Ok(())
    }

    /// Whether `target` lies beneath a staged directory whose overlay is attached and shadows
    /// it (`StagePlan::shadows`). Runs in the child: byte comparisons only.
    fn shadowed(&self, target: &Target) -> bool {
        self.staged.iter().any(|plan| {
            let dir = plan.dir.path.as_bytes();
            plan.shadows
                && plan.outcome.load(Ordering::Acquire) == crate::stage::STAGED_PRIVATE
                && target.path.as_bytes().len() > dir.len()
                && target.path.as_bytes().starts_with(dir)
                && target.path.as_bytes()[dir.len()] == b'/'
        })
    }

    /// Step 3 where the view is the host's tree.
    fn read_only_host_view(&self) -> Result<(), i32> {
        let mut trees = [(-1i32, -1i32); MAX_MOUNTS];
        let mut result = Ok(());
        for (slot, target) in trees.iter_mut().zip(&self.writable) {
            match open_checked(target).and_then(|at| {
                clone_tree(at, libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV)
                    .map(|tree| (at, tree))
                    .inspect_err(|_| close(at))
            }) {
                Ok(pair) => *slot = pair,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if result.is_ok() {
            result = set_attr(
                libc::AT_FDCWD,
                c"/",
                libc::AT_RECURSIVE,
                libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID,
            );
        }
        for &(at, tree) in trees.iter().take(self.writable.len()) {
            if at >= 0 && result.is_ok() {
                result = attach(tree, at);
            }
            close(at);
            close(tree);
        }
        result
    }

    /// Whether anything beyond the namespaces themselves is mounted.
    #[cfg(test)]
    pub(crate) fn mounts(&self) -> (usize, usize, usize) {
        (
            self.writable.len(),
            self.pinned.len(),
            self.hidden.len() + self.hidden_files.len(),
        )
    }
}

impl NewRoot {
    /// Whether `tmp` and `var/tmp` can be the view's own: no grant is one of them or `var`
    /// itself (a grant beneath them is bound over the fresh tmpfs instead).
    pub(crate) fn may_have_private_tmp(&self) -> bool {
        !self.binds.iter().any(|b| {
            let at = b.at.as_bytes();
            at == b"tmp" || at == b"var" || at == b"var/tmp"
        })
    }

    /// Step 3 where the view is a new root (child side). The new root is attached over `/`
    /// (a path lookup from our root still starts beneath it, in the host's tree, where every
    /// bind is cloned from), filled, made read-only, and becomes the root with
    /// `pivot_root(".", ".")`, after which the host's tree is detached: nothing of it is left
    /// in the namespace but the clones.
    ///
    /// Returns the detached, read-only mount of an empty regular file when
    /// [`empty_file`](NewRoot::empty_file) asks for one (-1 otherwise): made in the new root
    /// while it is still writable and unlinked at once, so it is nowhere in the view.
    fn enter(&self) -> Result<i32, i32> {
        let root = new_mount(
            c"tmpfs",
            &[(c"size", b"1m\0"), (c"mode", b"0755\0")],
            libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV | libc::MOUNT_ATTR_NOEXEC,
        )?;
        let mut empty = -1;
        let result = self.fill(root, &mut empty).and_then(|()| pivot_into(root));
        close(root);
        match result {
            Ok(()) => Ok(empty),
            Err(e) => {
                close(empty);
                Err(e)
            }
        }
    }

    fn fill(&self, root: i32, empty: &mut i32) -> Result<(), i32> {
        let slash = open_no_symlinks(libc::AT_FDCWD, c"/".as_ptr().cast(), libc::O_DIRECTORY)?;
        let attached = attach(root, slash);
        close(slash);
        attached?;
        // NET-2: before the directories above the grants, so that a grant beneath `/tmp` (the
        // call's own temp dir, an approved extra path) is bound over the fresh tmpfs.
        if let Some((size, _)) = &self.tmp {
            for dir in [c"tmp", c"var", c"var/tmp"] {
                // SAFETY: a NUL-terminated relative path beneath our descriptor.
                match sys(unsafe { syscall!(Sysno::mkdirat, root, dir.as_ptr(), 0o755) }) {
                    Ok(_) | Err(libc::EEXIST) => {}
                    Err(e) => return Err(e),
                }
            }
            for at in PRIVATE_TMP {
                let tmp = private_temp(size, b"1777\0")?;
                let attached = attach_at(tmp, root, at);
                close(tmp);
                attached?;
            }
        }
        for dir in &self.dirs {
            // SAFETY: a NUL-terminated relative path beneath our descriptor.
            match sys(unsafe { syscall!(Sysno::mkdirat, root, dir.as_ptr(), 0o755) }) {
                Ok(_) | Err(libc::EEXIST) => {}
                Err(e) => return Err(e),
            }
        }
        // After the directories: the file goes into the new root's own `dev/pts`.
        if let (true, Some(at)) = (self.empty_file, &self.empty_file_at) {
            *empty = empty_file(root, at)?;
        }
        for (link, text) in &self.links {
            // SAFETY: NUL-terminated strings; the link is made beneath our descriptor.
            sys(unsafe { syscall!(Sysno::symlinkat, text.as_ptr(), root, link.as_ptr()) })?;
        }
        for bind in &self.binds {
            match bind.make {
                Some(Kind::Dir) => {
                    // SAFETY: as above.
                    match sys(unsafe { syscall!(Sysno::mkdirat, root, bind.at.as_ptr(), 0o755) }) {
                        Ok(_) | Err(libc::EEXIST) => {}
                        Err(e) => return Err(e),
                    }
                }
                Some(Kind::File) => {
                    // SAFETY: as above; the new empty file is only a mount point.
                    sys(unsafe {
                        syscall!(
                            Sysno::mknodat,
                            root,
                            bind.at.as_ptr(),
                            libc::S_IFREG | 0o444,
                            0usize
                        )
                    })?;
                }
                None => {}
            }
        }
        let mut read_only = true;
        for bind in &self.binds {
            if bind.writable && read_only {
                // Every read-only bind and the new root's own directories in one call; the
                // writable clones come after, with their own attributes.
                set_attr(
                    root,
                    c"",
                    libc::AT_EMPTY_PATH | libc::AT_RECURSIVE,
                    libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID,
                )?;
                read_only = false;
            }
            let at = match open_checked(&bind.target) {
                Ok(at) => at,
                // A read-only system file replaced since the parent opened it (ldconfig renames
                // a new ld.so.cache into place): its mount point stays empty. Landlock's rule
                // is on the inode the parent opened, so binding the new one would grant nothing
                // and failing the call would be a flake. A writable grant must be the one
                // validated.
                Err(libc::ESTALE) if !bind.writable => continue,
                Err(e) => return Err(e),
            };
            // A writable directory is `nodev` like the clones of the host view; a writable file
            // grant is what it is (`/dev/null`).
            let attrs = match (bind.writable, bind.is_dir) {
                (true, true) => libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
                (true, false) => libc::MOUNT_ATTR_NOSUID,
                (false, _) => 0,
            };
            let tree = clone_tree(at, attrs);
            close(at);
            let tree = tree?;
            let attached = if bind.make.is_some() {
                // A mount point this function made in the new root, where nothing else can
                // make a link (no link is made at a canonical path): by path, one call.
                attach_at(tree, root, &bind.at)
            } else {
                // Inside an outer bind of the host's tree: looked up refusing links.
                open_no_symlinks(root, bind.at.as_ptr().cast(), 0).and_then(|point| {
                    let r = attach(tree, point);
                    close(point);
                    r
                })
            };
            close(tree);
            attached?;
        }
        if read_only {
            set_attr(
                root,
                c"",
                libc::AT_EMPTY_PATH | libc::AT_RECURSIVE,
                libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID,
            )?;
        }
        Ok(())
    }
}

/// An empty regular file made at `at` in the new root `root` (still writable), cloned as a
/// detached read-only mount. The file stays (the kernel attaches no mount of an unlinked
/// file), beneath the private `devpts` mounted over its directory later: the view holds no
/// name of it.
fn empty_file(root: i32, at: &std::ffi::CStr) -> Result<i32, i32> {
    // SAFETY: a NUL-terminated path beneath our descriptor; the file is only a bind source.
    sys(unsafe {
        syscall!(
            Sysno::mknodat,
            root,
            at.as_ptr(),
            libc::S_IFREG | 0o444,
            0usize
        )
    })?;
    let cloned = open_no_symlinks(root, at.as_ptr().cast(), 0).and_then(|at| {
        let tree = clone_tree(at, HIDDEN_FILE_ATTRS);
        close(at);
        tree
    });
    // SAFETY: as above.
    cloned
}

/// Adds to `pinned` the directories between the outermost writable grant above `path` and it:
/// a mount point cannot be renamed or removed (`EBUSY`), so none of them can be moved away and
/// replaced by a copy the command controls.
fn pin_above(outermost: &[&Root], pinned: &mut Vec<PathBuf>, path: &Path) {
    let Some(root) = outermost.iter().find(|r| strictly_beneath(path, &r.path)) else {
        return;
    };
    let mut dir = root.path.clone();
    let rest = path.strip_prefix(&root.path).unwrap_or(Path::new(""));
    let components: Vec<Component<'_>> = rest.components().collect();
    for component in components.iter().take(components.len().saturating_sub(1)) {
        dir.push(component);
        if !pinned.contains(&dir) {
            pinned.push(dir.clone());
        }
    }
}

/// A staged directory's detached mounts in the child: the overlay (or -1 with the errno that
/// kept it from being made) and the clones of its `through` directories.
#[derive(Debug, Clone, Copy)]
struct Overlay {
    mnt: i32,
    errno: i32,
    through: [i32; MAX_THROUGH],
}

impl Overlay {
    const NONE: Overlay = Overlay {
        mnt: -1,
        errno: libc::ENOSYS,
        through: [-1; MAX_THROUGH],
    };

    fn close(&self) {
        close(self.mnt);
        for fd in self.through {
            close(fd);
        }
    }
}

/// `FSCONFIG_SET_FLAG` (`<linux/mount.h>`).
const FSCONFIG_SET_FLAG: u32 = 0;

/// Makes `plan`'s overlay, detached, and clones its `through` directories (module `stage`).
/// The layers are this process's descriptors, named `/proc/self/fd/N`, each checked against
/// the identity the parent pinned. On failure the overlay is -1 and its errno kept: the
/// directory is then bound read-only instead.
fn make_overlay(plan: &StagePlan) -> Overlay {
    let mut overlay = Overlay::NONE;
    let made = (|| {
        let lower = open_checked(&plan.dir)?;
        let upper = open_checked(&plan.upper).inspect_err(|_| close(lower))?;
        let work = open_checked(&plan.work).inspect_err(|_| {
            close(lower);
            close(upper);
        })?;
        let (mut l, mut u, mut w) = ([0u8; 32], [0u8; 32], [0u8; 32]);
        let (l, u, w) = (
            crate::stage::fd_path(lower, &mut l),
            crate::stage::fd_path(upper, &mut u),
            crate::stage::fd_path(work, &mut w),
        );
        let attrs = libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV;
        // `lowerdir+` (Linux 6.8) takes one path and parses nothing in it; `lowerdir` splits
        // at `:`, which a `/proc/self/fd/N` does not hold. `userxattr` keeps overlayfs's own
        // attributes in the `user.` namespace, which a user namespace may write; a root host
        // whose upper filesystem lacks them is tried without.
        let mut result = Err(libc::EINVAL);
        'tries: for lower_key in [c"lowerdir+", c"lowerdir"] {
            for user in [true, false] {
                let options: [(&std::ffi::CStr, &[u8]); 3] = [
                    (lower_key, l.to_bytes_with_nul()),
                    (c"upperdir", u.to_bytes_with_nul()),
                    (c"workdir", w.to_bytes_with_nul()),
                ];
                let flags: &[&std::ffi::CStr] = if user { &[c"userxattr"] } else { &[] };
                result = new_mount_with_flags(c"overlay", &options, flags, attrs);
                if result.is_ok() {
                    break 'tries;
                }
            }
        }
        close(lower);
        close(upper);
        close(work);
        result
    })();
    match made {
        Ok(mnt) => overlay.mnt = mnt,
        Err(errno) => {
            overlay.errno = errno;
            return overlay;
        }
    }
    for (slot, (target, _)) in overlay.through.iter_mut().zip(&plan.through) {
        let cloned = open_checked(target).and_then(|at| {
            let tree = clone_tree(at, libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV);
            close(at);
            tree
        });
        match cloned {
            Ok(tree) => *slot = tree,
            Err(errno) => {
                overlay.close();
                return Overlay {
                    errno,
                    ..Overlay::NONE
                };
            }
        }
    }
    overlay
}

/// Attaches `overlay` over `plan`'s directory and its `through` clones over their places in
/// it; where the overlay could not be made, binds the directory read-only onto itself. Either
/// way the outcome is stored for the parent (the child shares its memory).
fn attach_staged(plan: &StagePlan, overlay: &Overlay, ruleset: i32) -> Result<(), i32> {
    if overlay.mnt < 0 {
        plan.outcome.store(-overlay.errno, Ordering::Release);
        return bind_onto_itself(
            &plan.dir,
            libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
        );
    }
    let at = open_checked(&plan.dir)?;
    let attached = attach(overlay.mnt, at);
    close(at);
    attached?;
    // The directory's path now leads into the overlay.
    let root = open_no_symlinks(
        libc::AT_FDCWD,
        plan.dir.path.as_ptr().cast(),
        libc::O_DIRECTORY,
    )?;
    let mut result = if plan.rights != 0 {
        add_rule(ruleset, root, plan.rights)
    } else {
        Ok(())
    };
    for ((_, rel), &tree) in plan.through.iter().zip(&overlay.through) {
        if result.is_err() {
            break;
        }
        result = open_no_symlinks(root, rel.as_ptr().cast(), libc::O_DIRECTORY).and_then(|at| {
            let r = attach(tree, at);
            close(at);
            r
        });
        if result.is_err() {
            break;
        }
    }
    close(root);
    result?;
    plan.outcome
        .store(crate::stage::STAGED_PRIVATE, Ordering::Release);
    Ok(())
}

/// What the overlay shows at `rel` beneath a staged directory: an empty file of mode 0 where
/// the hidden path exists now (as a cover shows it elsewhere), a whiteout where it does not, so
/// the path stays absent even when the real one appears while the command runs (a token the
/// user logs in to meanwhile). Made in `upper` (parents made private) relative to descriptors,
/// never through a link: a session's kept upper holds what earlier commands left there, and
/// this runs in the parent, with the host's rights, before any fork.
///
/// A whiteout goes where the path first leaves the staged directory `lower` as it is now (the
/// topmost missing component): inside a directory overlayfs merges with the lower one, where
/// a listing leaves it out, and covering whatever appears beneath it later. Where something
/// other than a directory stands on the way, the path cannot appear beneath it: nothing to do.
fn shadow(upper: &Path, lower: &Path, rel: &Path, exists: bool) -> Result<(), SandboxError> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    use rustix::io::Errno;
    let fail = |e: Errno| SandboxError::OpenPath {
        path: upper.join(rel),
        source: e.into(),
    };
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let private = Mode::from_raw_mode(0o700);
    let mut names = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(name) => names.push(name),
            // The hidden path lies strictly beneath the staged directory, as given.
            _ => return Err(fail(Errno::INVAL)),
        }
    }
    if !exists {
        let mut at = lower.to_path_buf();
        let mut keep = names.len();
        for (i, name) in names.iter().enumerate() {
            at.push(name);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.is_dir() => {}
                Ok(_) if i + 1 < names.len() => return Ok(()),
                _ => {
                    keep = i + 1;
                    break;
                }
            }
        }
        names.truncate(keep);
    }
    let Some((last, parents)) = names.split_last() else {
        return Ok(());
    };
    let mut dir = rustix::fs::open(upper, dir_flags, Mode::empty()).map_err(fail)?;
    for name in parents {
        match rustix::fs::mkdirat(&dir, *name, private) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(fail(e)),
        }
        dir = match rustix::fs::openat(&dir, *name, dir_flags, Mode::empty()) {
            Ok(next) => next,
            // A link or a file stands there: replaced by a directory, never followed.
            Err(Errno::LOOP | Errno::NOTDIR) => {
                rustix::fs::unlinkat(&dir, *name, AtFlags::empty()).map_err(fail)?;
                rustix::fs::mkdirat(&dir, *name, private).map_err(fail)?;
                rustix::fs::openat(&dir, *name, dir_flags, Mode::empty()).map_err(fail)?
            }
            Err(e) => return Err(fail(e)),
        };
    }
    let empty_file = || {
        rustix::fs::openat(
            &dir,
            *last,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map(drop)
    };
    let made = if exists {
        empty_file()
    } else {
        // A whiteout (a character device 0:0) is an unprivileged user's to make since Linux
        // 5.8; before, the empty file hides the path as well, only not as absent.
        match rustix::fs::mknodat(&dir, *last, FileType::CharacterDevice, Mode::empty(), 0) {
            Err(Errno::PERM) => empty_file(),
            other => other,
        }
    };
    match made {
        Ok(()) => Ok(()),
        // Made already (the same path hidden twice): only a shadow of ours may stand there.
        Err(Errno::EXIST) => {
            let st = rustix::fs::statat(&dir, *last, AtFlags::SYMLINK_NOFOLLOW).map_err(fail)?;
            let kind = FileType::from_raw_mode(st.st_mode);
            let ours =
                (kind == FileType::RegularFile && st.st_size == 0 && st.st_mode & 0o7777 == 0)
                    || (kind == FileType::CharacterDevice && st.st_rdev == 0);
            if ours {
                Ok(())
            } else {
                Err(fail(Errno::EXIST))
            }
        }
        Err(e) => Err(fail(e)),
    }
}

/// Binds `target` onto itself (recursively: what is mounted beneath stays), adding `set`.
fn bind_onto_itself(target: &Target, set: u64) -> Result<(), i32> {
    let at = open_checked(target)?;
    let bound = clone_tree(at, set).and_then(|tree| {
        let r = attach(tree, at);
        close(tree);
        r
    });
    close(at);
    bound
}

/// The attributes of the empty file that covers a hidden one: read-only, nothing to run, no
/// device, no set-id.
const HIDDEN_FILE_ATTRS: u64 = libc::MOUNT_ATTR_RDONLY
    | libc::MOUNT_ATTR_NOSUID
    | libc::MOUNT_ATTR_NODEV
    | libc::MOUNT_ATTR_NOEXEC;

/// Makes the mount `root` names (attached over the host's `/`) the process's root: `chroot`
/// into it. The host's tree stays in the namespace, beneath the new root's mount and out of
/// every path: `..` stops at a process's root, the command holds no descriptor into it and
/// no capability to leave a `chroot` (`CAP_SYS_CHROOT` is dropped, seccomp refuses `chroot`
/// and every mount call). Not `pivot_root` + `umount2(MNT_DETACH)`: detaching the host's
/// tree waits for an expedited RCU grace period, milliseconds on every spawn.
fn pivot_into(root: i32) -> Result<(), i32> {
    // SAFETY: our descriptor; NUL-terminated paths.
    sys(unsafe { syscall!(Sysno::fchdir, root) })?;
    // SAFETY: as above.
    sys(unsafe { syscall!(Sysno::chroot, c".".as_ptr()) })?;
    // SAFETY: as above.
    sys(unsafe { syscall!(Sysno::chdir, c"/".as_ptr()) }).map(drop)
}

/// Steps 1 and 2: new mount and IPC namespaces (and with `net` a network namespace: one
/// `unshare` for all), every mount private (a root host's mounts are shared: without this, the
/// mounts below would appear in the host's namespace too).
fn enter_private_namespaces(net: bool) -> Result<(), i32> {
    let net = if net { libc::CLONE_NEWNET } else { 0 };
    // SAFETY: plain flags.
    sys(unsafe { syscall!(Sysno::unshare, libc::CLONE_NEWNS | libc::CLONE_NEWIPC | net) })?;
    // SAFETY: NUL-terminated strings and null pointers, as mount(2) allows for a change of
    // propagation.
    sys(unsafe {
        syscall!(
            Sysno::mount,
            0usize,
            c"/".as_ptr(),
            0usize,
            libc::MS_REC | libc::MS_PRIVATE,
            0usize
        )
    })
    .map(drop)
}

/// `struct ifreq` (`<net/if.h>`) as `SIOCGIFFLAGS` and `SIOCSIFFLAGS` use it: the name, then
/// the flags at the start of the 24-byte union.
#[repr(C)]
struct InterfaceFlags {
    name: [u8; 16],
    flags: libc::c_short,
    rest: [u8; 22],
}

/// Brings up `lo` of the network namespace just made, by `ioctl` on a datagram socket of it
/// (two system calls, cheaper than a netlink exchange): the kernel then gives it `127.0.0.1/8`
/// and `::1` itself. Needs `CAP_NET_ADMIN` in the namespace's user namespace, which the child
/// holds until `drop_capabilities`.
fn loopback_up() -> Result<(), i32> {
    // SAFETY: plain arguments.
    let fd = fd_of(sys(unsafe {
        syscall!(
            Sysno::socket,
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0
        )
    }))?;
    let mut request = InterfaceFlags {
        name: [0; 16],
        flags: 0,
        rest: [0; 22],
    };
    request.name[..2].copy_from_slice(b"lo");
    let at = &mut request as *mut InterfaceFlags;
    // SAFETY: a live `struct ifreq` the kernel reads and writes.
    let result =
        sys(unsafe { syscall!(Sysno::ioctl, fd, libc::SIOCGIFFLAGS, at) }).and_then(|_| {
            request.flags |= libc::IFF_UP as libc::c_short;
            // SAFETY: as above.
            sys(unsafe { syscall!(Sysno::ioctl, fd, libc::SIOCSIFFLAGS, at) }).map(drop)
        });
    close(fd);
    result
}

/// Empties every capability set the process may empty; the effective, permitted and
/// inheritable ones always. Async-signal-safe.
pub(crate) fn drop_capabilities() -> Result<(), ApplyError> {
    let fail = |errno: i32| ApplyError {
        stage: ApplyStage::Capabilities,
        errno,
    };
    // The bounding set needs CAP_SETPCAP, which a root host's or a user namespace's process
    // has; without it there is nothing to drop that exec could grant (no_new_privs).
    for cap in 0..64usize {
        // SAFETY: integer arguments only.
        let r = unsafe {
            syscall!(
                Sysno::prctl,
                libc::PR_CAPBSET_DROP,
                cap,
                0usize,
                0usize,
                0usize
            )
        };
        if r == Err(syscalls::Errno::EINVAL) {
            break; // past the kernel's last capability
        }
    }
    // SAFETY: integer arguments only; EINVAL on kernels without ambient capabilities.
    let _ = unsafe {
        syscall!(
            Sysno::prctl,
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0usize,
            0usize,
            0usize
        )
    };
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: a valid v3 header and two data structs, read by the kernel only.
    sys(unsafe { syscall!(Sysno::capset, &header as *const Header, data.as_ptr()) })
        .map(drop)
        .map_err(fail)
}

/// `_LINUX_CAPABILITY_VERSION_3` (`<linux/capability.h>`).
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

// ---- raw system calls (async-signal-safe, no errno) -------------------------------------------

fn sys(r: Result<usize, syscalls::Errno>) -> Result<usize, i32> {
    r.map_err(|e| e.into_raw())
}

fn fd_of(r: Result<usize, i32>) -> Result<i32, i32> {
    r.and_then(|n| i32::try_from(n).map_err(|_| libc::EBADF))
}

fn close(fd: i32) {
    if fd >= 0 {
        // SAFETY: closing a descriptor number of ours.
        let _ = unsafe { syscall!(Sysno::close, fd) };
    }
}

fn statx_fd(fd: i32) -> Result<Ident, i32> {
    // SAFETY: an all-zero statx is a valid value of this plain C struct.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: an empty path with AT_EMPTY_PATH names `fd`; `stx` is writable.
    sys(unsafe {
        syscall!(
            Sysno::statx,
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_INO,
            &mut stx as *mut libc::statx
        )
    })?;
    Ok(Ident::of(&stx))
}

/// `struct open_how` (`<linux/openat2.h>`).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;

/// `openat2(dir, path, O_PATH | flags)` refusing every symbolic link on the way.
fn open_no_symlinks(dir: i32, path: *const u8, flags: i32) -> Result<i32, i32> {
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC | flags) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: a NUL-terminated path and a readable open_how of the size passed.
    fd_of(sys(unsafe {
        syscall!(
            Sysno::openat2,
            dir,
            path,
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>()
        )
    }))
}

/// A path that no longer leads where it did when the parent pinned it (swapped for a link,
/// moved away, replaced): one errno, `ESTALE`, so the caller can say "it was replaced".
fn replaced(errno: i32) -> i32 {
    match errno {
        libc::ELOOP | libc::ENOENT | libc::ENOTDIR | libc::EXDEV => libc::ESTALE,
        other => other,
    }
}

/// Opens `target` and checks it is the file the parent pinned. A target that is a symbolic
/// link (one on the way to a protected path, bound onto itself) is opened as the link.
fn open_checked(target: &Target) -> Result<i32, i32> {
    let at = open_no_symlinks(
        libc::AT_FDCWD,
        target.path.as_ptr().cast(),
        libc::O_NOFOLLOW,
    )
    .map_err(replaced)?;
    match statx_fd(at) {
        Ok(id) if id == target.id => Ok(at),
        Ok(_) => {
            close(at);
            Err(libc::ESTALE)
        }
        Err(e) => {
            close(at);
            Err(e)
        }
    }
}

/// `struct mount_attr` (`<linux/mount.h>`, `MOUNT_ATTR_SIZE_VER0`).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn set_attr(dir: i32, path: &std::ffi::CStr, flags: i32, set: u64) -> Result<(), i32> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a NUL-terminated path and a readable mount_attr of the size passed.
    sys(unsafe {
        syscall!(
            Sysno::mount_setattr,
            dir,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>()
        )
    })
    .map(drop)
}

/// `OPEN_TREE_CLONE` (`<linux/mount.h>`).
const OPEN_TREE_CLONE: i32 = 1;

/// A detached copy of the mount tree at `at` (with every mount beneath), with `set` added.
fn clone_tree(at: i32, set: u64) -> Result<i32, i32> {
    // SAFETY: an empty NUL-terminated path naming `at` (AT_EMPTY_PATH).
    let tree = fd_of(sys(unsafe {
        syscall!(
            Sysno::open_tree,
            at,
            c"".as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC | libc::AT_EMPTY_PATH | libc::AT_RECURSIVE
        )
    }))?;
    if set != 0 {
        if let Err(e) = set_attr(tree, c"", libc::AT_EMPTY_PATH | libc::AT_RECURSIVE, set) {
            close(tree);
            return Err(e);
        }
    }
    Ok(tree)
}

const MOVE_MOUNT_F_EMPTY_PATH: u32 = 0x04;
const MOVE_MOUNT_T_EMPTY_PATH: u32 = 0x40;

/// Attaches the detached mount `mnt` over the file `at` names.
fn attach(mnt: i32, at: i32) -> Result<(), i32> {
    // SAFETY: empty NUL-terminated paths naming both descriptors.
    sys(unsafe {
        syscall!(
            Sysno::move_mount,
            mnt,
            c"".as_ptr(),
            at,
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH
        )
    })
    .map(drop)
}

/// Attaches the detached mount `mnt` at `path` beneath the directory `dir` (not following a
/// final symbolic link: `move_mount` without `MOVE_MOUNT_T_SYMLINKS`).
fn attach_at(mnt: i32, dir: i32, path: &std::ffi::CStr) -> Result<(), i32> {
    // SAFETY: NUL-terminated paths; both descriptors are ours.
    sys(unsafe {
        syscall!(
            Sysno::move_mount,
            mnt,
            c"".as_ptr(),
            dir,
            path.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH
        )
    })
    .map(drop)
}

const FSOPEN_CLOEXEC: u32 = 1;
const FSCONFIG_CMD_CREATE: u32 = 6;
const FSMOUNT_CLOEXEC: u32 = 1;

/// A detached, empty tmpfs mount: read-only, no set-id, no devices, no execution.
fn empty_read_only_tmpfs() -> Result<i32, i32> {
    // SAFETY: a NUL-terminated filesystem name.
    let fs = fd_of(sys(unsafe {
        syscall!(Sysno::fsopen, c"tmpfs".as_ptr(), FSOPEN_CLOEXEC)
    }))?;
    // SAFETY: the create command takes no key or value.
    let created = sys(unsafe {
        syscall!(
            Sysno::fsconfig,
            fs,
            FSCONFIG_CMD_CREATE,
            0usize,
            0usize,
            0usize
        )
    });
    let mnt = created.and_then(|_| {
        let attrs = libc::MOUNT_ATTR_RDONLY
            | libc::MOUNT_ATTR_NOSUID
            | libc::MOUNT_ATTR_NODEV
            | libc::MOUNT_ATTR_NOEXEC;
        // SAFETY: integer arguments only.
        fd_of(sys(unsafe {
            syscall!(Sysno::fsmount, fs, FSMOUNT_CLOEXEC, attrs)
        }))
    });
    close(fs);
    mnt
}

const FSCONFIG_SET_STRING: u32 = 1;

/// A new filesystem of type `fstype` (NUL-terminated), configured with `options` (key, value)
/// and mounted detached with `attrs`.
fn new_mount(
    fstype: &std::ffi::CStr,
    options: &[(&std::ffi::CStr, &[u8])],
    attrs: u64,
) -> Result<i32, i32> {
    new_mount_with_flags(fstype, options, &[], attrs)
}

/// [`new_mount`] with flag options (keys without a value) set after the string ones.
fn new_mount_with_flags(
    fstype: &std::ffi::CStr,
    options: &[(&std::ffi::CStr, &[u8])],
    flags: &[&std::ffi::CStr],
    attrs: u64,
) -> Result<i32, i32> {
    // SAFETY: a NUL-terminated filesystem name.
    let fs = fd_of(sys(unsafe {
        syscall!(Sysno::fsopen, fstype.as_ptr(), FSOPEN_CLOEXEC)
    }))?;
    let mut configured = Ok(0);
    for (key, value) in options {
        // `value` must be NUL-terminated: the kernel reads a C string.
        if value.last() != Some(&0) {
            configured = Err(libc::EINVAL);
            break;
        }
        // SAFETY: NUL-terminated key and value, alive for the call.
        configured = sys(unsafe {
            syscall!(
                Sysno::fsconfig,
                fs,
                FSCONFIG_SET_STRING,
                key.as_ptr(),
                value.as_ptr(),
                0usize
            )
        });
        if configured.is_err() {
            break;
        }
    }
    for flag in flags {
        if configured.is_err() {
            break;
        }
        // SAFETY: a NUL-terminated key; a flag takes no value.
        configured = sys(unsafe {
            syscall!(
                Sysno::fsconfig,
                fs,
                FSCONFIG_SET_FLAG,
                flag.as_ptr(),
                0usize,
                0usize
            )
        });
    }
    let mnt = configured
        // SAFETY: the create command takes no key or value.
        .and_then(|_| {
            sys(unsafe {
                syscall!(
                    Sysno::fsconfig,
                    fs,
                    FSCONFIG_CMD_CREATE,
                    0usize,
                    0usize,
                    0usize
                )
            })
        })
        // SAFETY: integer arguments only.
        .and_then(|_| {
            fd_of(sys(unsafe {
                syscall!(Sysno::fsmount, fs, FSMOUNT_CLOEXEC, attrs)
            }))
        });
    close(fs);
    mnt
}

/// A fresh `proc` of the child's PID namespace, detached: read-only, no set-id, no devices,
/// no execution, and `hidepid=ptraceable`: a process the reader may not ptrace has no
/// `/proc/<pid>` at all. Landlock refuses ptrace of any process outside the command's own
/// domain, so the supervisor (PID 1, which shares the host's memory) is not even listed. Not
/// `hidepid=invisible`: that one shows every process to members of the `gid=` group, 0 by
/// default, which is a root host's command.
fn private_proc() -> Result<i32, i32> {
    new_mount(
        c"proc",
        &[(c"hidepid", b"ptraceable\0")],
        libc::MOUNT_ATTR_RDONLY
            | libc::MOUNT_ATTR_NOSUID
            | libc::MOUNT_ATTR_NODEV
            | libc::MOUNT_ATTR_NOEXEC,
    )
}

/// A fresh, empty tmpfs of at most `size` bytes and `nr_inodes` files, detached: mode 1777, no set-id, no devices, no
/// execution.
fn private_shm((size, inodes): &(CString, CString)) -> Result<i32, i32> {
    new_mount(
        c"tmpfs",
        &[
            (c"size", size.to_bytes_with_nul()),
            (c"nr_inodes", inodes.to_bytes_with_nul()),
            (c"mode", b"1777\0"),
        ],
        libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV | libc::MOUNT_ATTR_NOEXEC,
    )
}

/// A fresh, empty tmpfs of at most `size` bytes, detached, with the root's `mode`
/// (NUL-terminated): for the call's temp dir 0700 (its owner is the command's user), for the
/// view's `/tmp` and `/var/tmp` (NET-2) 1777 like the host's; no set-id, no devices; programs
/// built there run.
fn private_temp((size, inodes): &(CString, CString), mode: &[u8]) -> Result<i32, i32> {
    new_mount(
        c"tmpfs",
        &[
            (c"size", size.to_bytes_with_nul()),
            (c"nr_inodes", inodes.to_bytes_with_nul()),
            (c"mode", mode),
        ],
        libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
    )
}

/// The view's `/tmp` or `/var/tmp` (`at`, relative to the new root, which is the working
/// directory after `pivot_into`), made read-only with the rest of the root: writable again
/// (that mount only, not the grants bound beneath it) and granted `rights` by Landlock.
fn writable_tmp(at: &std::ffi::CStr, ruleset: i32, rights: u64) -> Result<(), i32> {
    let dir = open_no_symlinks(libc::AT_FDCWD, at.as_ptr().cast(), libc::O_DIRECTORY)?;
    let attr = MountAttr {
        attr_set: 0,
        attr_clr: libc::MOUNT_ATTR_RDONLY,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: our descriptor, an empty path and a readable mount_attr of the size passed.
    let result = sys(unsafe {
        syscall!(
            Sysno::mount_setattr,
            dir,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>()
        )
    })
    .and_then(|_| add_rule(ruleset, dir, rights));
    close(dir);
    result
}

/// The `home` and `tmp` directories of a call's temp dir (its `HOME` and `TMPDIR`), made
/// again inside the tmpfs that now covers it.
fn make_home_and_tmp(temp: &std::ffi::CStr) -> Result<(), i32> {
    let at = open_no_symlinks(libc::AT_FDCWD, temp.as_ptr().cast(), libc::O_DIRECTORY)?;
    let mut result = Ok(());
    for name in [c"home", c"tmp"] {
        // SAFETY: a NUL-terminated name and our descriptor.
        if let Err(e) = sys(unsafe { syscall!(Sysno::mkdirat, at, name.as_ptr(), 0o700) }) {
            result = Err(e);
            break;
        }
    }
    close(at);
    result
}

/// Pseudo-terminals one call may hold at once (`max=` of its `devpts`), NUL-terminated.
const MAX_PTYS: &[u8] = b"64\0";

/// A new `devpts` instance, detached: its terminals are the command's own, numbered from 0 and
/// invisible to the host's (a new instance since Linux 4.7); no set-id, no execution. Devices
/// must work on it, so not `nodev`. At most [`MAX_PTYS`] at once: every instance but the host's
/// first draws on one machine-wide pool (`kernel.pty.max` − `kernel.pty.reserve`, 3072 by
/// default), which one call could otherwise empty for every other call
/// and container.
fn private_pts() -> Result<i32, i32> {
    new_mount(
        c"devpts",
        &[
            (c"ptmxmode", b"0666\0"),
            (c"mode", b"0620\0"),
            (c"max", MAX_PTYS),
        ],
        libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NOEXEC,
    )
}

/// An `O_PATH` descriptor of the private `/dev/shm`, once [`Isolation::enter`] mounted it: the
/// directory the supervisor's link broker links in (LIVE-2; proctree's `links`).
pub(crate) fn open_private_shm() -> Result<i32, i32> {
    open_no_symlinks(
        libc::AT_FDCWD,
        c"/dev/shm".as_ptr().cast(),
        libc::O_PATH | libc::O_DIRECTORY,
    )
}

/// Sends two descriptors over the connected socket `sock` in one message (`SCM_RIGHTS`).
pub(crate) fn send_two_fds(sock: i32, fds: [i32; 2]) -> Result<(), i32> {
    #[repr(C)]
    struct TwoFds {
        hdr: libc::cmsghdr,
        fds: [i32; 2],
    }
    let byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_ptr().cast_mut().cast(),
        iov_len: 1,
    };
    // SAFETY: all-zero is a valid `cmsghdr` and `msghdr`.
    let mut control: TwoFds = unsafe { std::mem::zeroed() };
    control.hdr.cmsg_len = std::mem::size_of::<TwoFds>();
    control.hdr.cmsg_level = libc::SOL_SOCKET;
    control.hdr.cmsg_type = libc::SCM_RIGHTS;
    control.fds = fds;
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = (&mut control as *mut TwoFds).cast();
    msg.msg_controllen = std::mem::size_of::<TwoFds>();
    // SAFETY: `msg` names live buffers of the lengths it gives.
    sys(unsafe {
        syscall!(
            Sysno::sendmsg,
            sock,
            &msg as *const libc::msghdr,
            libc::MSG_NOSIGNAL
        )
    })
    .map(drop)
}

/// Closes a descriptor of the child's (async-signal-safe).
pub(crate) fn close_fd(fd: i32) {
    close(fd);
}

/// `struct landlock_path_beneath_attr` (`<linux/landlock.h>`, packed in the UAPI).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Attaches the detached mount `mnt` over the directory `path` (no symbolic link on the way)
/// and grants `rights` beneath its root in `ruleset`. The mount's descriptor names its root
/// (an `O_PATH` descriptor), which is what the rule is made on.
fn mount_private(
    mnt: Result<i32, i32>,
    path: &std::ffi::CStr,
    ruleset: i32,
    rights: u64,
) -> Result<(), i32> {
    let mnt = mnt?;
    let result = open_no_symlinks(libc::AT_FDCWD, path.as_ptr().cast(), libc::O_DIRECTORY)
        .map_err(replaced)
        .and_then(|at| {
            let r = attach(mnt, at);
            close(at);
            r
        })
        .and_then(|()| add_rule(ruleset, mnt, rights));
    close(mnt);
    result
}

/// Grants `rights` beneath the file `fd` names in `ruleset` (child side, raw system call).
fn add_rule(ruleset: i32, fd: i32, rights: u64) -> Result<(), i32> {
    let attr = PathBeneathAttr {
        allowed_access: rights,
        parent_fd: fd,
    };
    // SAFETY: a valid rule attribute read by the kernel only; both descriptors open.
    sys(unsafe {
        syscall!(
            Sysno::landlock_add_rule,
            ruleset,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0usize
        )
    })
    .map(drop)
}

/// `LANDLOCK_RULE_PATH_BENEATH`.
const LANDLOCK_RULE_PATH_BENEATH: usize = 1;

/// Whether a child of this process can make the namespaces and mounts [`Isolation::enter`]
/// makes: tried in a forked child (after its own user namespace, when not root). `Err` holds
/// the errno of the first step that failed.
pub(crate) fn probe_namespaces() -> Result<(), i32> {
    probe_forked(&probe_in_child)
}

/// Whether a child of this process that runs in a PID namespace of its own (as proctree's
/// supervisor makes one: after its own user namespace, when not root) can mount a fresh
/// `proc` there, and whether it can make a network namespace with `lo` up (NET-1): the
/// second answer. The kernel refuses the `proc` inside a user namespace where the host's
/// `/proc` is partly covered (`mount_too_revealing`: a container that masks `/proc/kcore`),
/// and a network namespace where `user.max_net_namespaces` is 0, so both are probed, not
/// assumed, in one child. `Err` holds the errno of the step that failed.
pub(crate) fn probe_private_proc_and_network() -> (Result<(), i32>, Result<(), i32>) {
    // Written by the child, which shares this memory; 0 is success, -1 not reached.
    let net = std::sync::atomic::AtomicI32::new(-1);
    let proc = probe_forked(&|uid, uid_map, gid_map, grandchild| {
        probe_in_child(uid, uid_map, gid_map, grandchild)?;
        // SAFETY: plain flags.
        let made = sys(unsafe { syscall!(Sysno::unshare, libc::CLONE_NEWNET) })
            .and_then(|_| loopback_up());
        net.store(
            made.err().unwrap_or(0),
            std::sync::atomic::Ordering::Relaxed,
        );
        // SAFETY: plain flags; the new PID namespace is for the children made below.
        sys(unsafe { syscall!(Sysno::unshare, libc::CLONE_NEWPID) })?;
        // The grandchild makes raw system calls only, on its own stack.
        grandchild.run(&|| {
            let fd = private_proc()?;
            close(fd);
            Ok(())
        })
    });
    let net = match net.load(std::sync::atomic::Ordering::Relaxed) {
        0 => Ok(()),
        -1 => Err(proc.err().unwrap_or(libc::ECHILD)),
        errno => Err(errno),
    };
    (proc, net)
}

/// A probe run in the child: given the uid, the uid and gid map lines, and a stack for a
/// grandchild of its own.
type ProbeBody<'a> = &'a dyn Fn(u32, &[u8], &[u8], &ProbeStack) -> Result<(), i32>;

/// Runs `body` in a child and returns what it returned (an errno fits an exit status).
///
/// The child shares this process's memory (`CLONE_VM | CLONE_VFORK`, posix_spawn-style) instead
/// of being a `fork`: a fork copies the page tables of the whole process and makes
/// every page copy-on-write, so each later write of the host's threads faults and flushes the
/// other CPUs' TLBs — measured as the largest share of a one-call process's CPU time. The
/// calling thread is suspended until the child exits, so the child may use its stack frame's
/// data; the child makes raw system calls only (no allocation, no locks).
fn probe_forked(body: ProbeBody) -> Result<(), i32> {
    // SAFETY: geteuid/getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let uid_map = format!("{uid} {uid} 1\n");
    let gid_map = format!("{gid} {gid} 1\n");
    let child = ProbeStack::new()?;
    let grandchild = ProbeStack::new()?;
    child.run(&|| body(uid, uid_map.as_bytes(), gid_map.as_bytes(), &grandchild))
}

/// A stack for a probe's child that shares this process's memory, with a guard page below it.
pub(crate) struct ProbeStack {
    base: *mut libc::c_void,
}

impl ProbeStack {
    /// Plenty for the probes' few frames of raw system calls; only touched pages cost memory.
    const SIZE: usize = 256 * 1024;
    const GUARD: usize = 4096;

    pub(crate) fn new() -> Result<ProbeStack, i32> {
        // SAFETY: a fresh anonymous mapping; nothing else refers to it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Self::SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(libc::ENOMEM);
        }
        // SAFETY: the lowest page of our own mapping.
        if unsafe { libc::mprotect(base, Self::GUARD, libc::PROT_NONE) } != 0 {
            // SAFETY: our own mapping, unused.
            unsafe { libc::munmap(base, Self::SIZE) };
            return Err(libc::ENOMEM);
        }
        Ok(ProbeStack { base })
    }

    /// Runs `body` in a child on this stack, sharing memory, and returns its errno (or `Ok`).
    /// The caller is suspended until the child has exited (`CLONE_VFORK`), so `body` may borrow
    /// from the caller's frame; it must make raw system calls only.
    pub(crate) fn run(&self, body: &dyn Fn() -> Result<(), i32>) -> Result<(), i32> {
        extern "C" fn entry(arg: *mut libc::c_void) -> libc::c_int {
            // SAFETY: `arg` is the `&dyn Fn` below, alive while the parent is suspended.
            let body = unsafe { &*(arg as *const &dyn Fn() -> Result<(), i32>) };
            match body() {
                Ok(()) => 0,
                Err(errno) => errno & 0xff,
            }
        }
        // SAFETY: the top of our own mapping, 16-byte aligned (the size is a page multiple).
        let top = unsafe { self.base.cast::<u8>().add(Self::SIZE) };
        // No exit signal (0, not SIGCHLD): a host started with SIGCHLD ignored (it survives
        // `execve`) would have the kernel reap a SIGCHLD child itself, and the probe would read
        // ECHILD as "the kernel refused". `wait_exit` waits with `__WALL`.
        // A clone refused for a moment (EAGAIN: the user's process count near its limit) is
        // tried again before the answer is cached for the process.
        let mut tries = 0;
        let pid = loop {
            // SAFETY: glibc's clone runs `entry` on the new stack and ends the child with the
            // exit system call when it returns; CLONE_VFORK keeps `body` and this stack alive
            // until then.
            let pid = unsafe {
                libc::clone(
                    entry,
                    top.cast(),
                    libc::CLONE_VM | libc::CLONE_VFORK,
                    (&body as *const &dyn Fn() -> Result<(), i32>)
                        .cast_mut()
                        .cast(),
                )
            };
            if pid >= 0 {
                break pid;
            }
            let errno = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EAGAIN);
            tries += 1;
            if errno != libc::EAGAIN || tries >= 5 {
                return Err(errno);
            }
            std::thread::sleep(std::time::Duration::from_millis(20 * tries));
        };
        wait_exit(pid)
    }
}

impl Drop for ProbeStack {
    fn drop(&mut self) {
        // SAFETY: our own mapping; every child that ran on it has exited (`run` waits).
        unsafe { libc::munmap(self.base, Self::SIZE) };
    }
}

/// Waits for the child `pid` and turns its exit status into the errno it carries.
fn wait_exit(pid: libc::pid_t) -> Result<(), i32> {
    let mut status = 0;
    loop {
        // SAFETY: our own child; a local status. `__WALL`: the child has no exit signal.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        if r == pid {
            break;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(libc::ECHILD);
        }
    }
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => Ok(()),
        (true, errno) => Err(errno),
        _ => Err(libc::ECHILD),
    }
}

fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> Result<(), i32> {
    // SAFETY: a NUL-terminated path.
    let fd = fd_of(sys(unsafe {
        syscall!(
            Sysno::openat,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC
        )
    }))?;
    // SAFETY: a live buffer of that length.
    let r = sys(unsafe { syscall!(Sysno::write, fd, bytes.as_ptr(), bytes.len()) });
    close(fd);
    match r {
        Ok(n) if n == bytes.len() => Ok(()),
        Ok(_) => Err(libc::EIO),
        Err(e) => Err(e),
    }
}

fn probe_in_child(
    uid: u32,
    uid_map: &[u8],
    gid_map: &[u8],
    _grandchild: &ProbeStack,
) -> Result<(), i32> {
    if uid != 0 {
        // SAFETY: plain flags.
        sys(unsafe { syscall!(Sysno::unshare, libc::CLONE_NEWUSER) })?;
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/uid_map", uid_map)?;
        write_file(c"/proc/self/gid_map", gid_map)?;
    }
    enter_private_namespaces(false)?;
    let root = open_no_symlinks(libc::AT_FDCWD, c"/".as_ptr().cast(), libc::O_DIRECTORY)?;
    let tree = clone_tree(root, libc::MOUNT_ATTR_NOSUID);
    close(root);
    close(tree?);
    set_attr(
        libc::AT_FDCWD,
        c"/",
        libc::AT_RECURSIVE,
        libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID,
    )?;
    close(empty_read_only_tmpfs()?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(path: &str, writable: bool) -> Root {
        Root {
            path: PathBuf::from(path),
            id: Ident {
                dev_major: 0,
                dev_minor: 0,
                ino: 1,
            },
            writable,
        }
    }

    #[test]
    fn an_fstat_identity_converts_to_the_statx_identity_of_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let fd = rustix::fs::open(
            dir.path(),
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        let stat = rustix::fs::fstat(&fd).unwrap();
        let from_fstat = Ident::from(crate::sandbox::FileId::of(&stat));
        assert_eq!(from_fstat, Ident::of_fd(fd.as_fd()).unwrap());
        let null = rustix::fs::stat("/dev/null").unwrap();
        let null_fd = rustix::fs::open(
            "/dev/null",
            rustix::fs::OFlags::PATH,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        assert_eq!(
            Ident::from(crate::sandbox::FileId::of(&null)),
            Ident::of_fd(null_fd.as_fd()).unwrap()
        );
    }

    #[test]
    fn only_outermost_writable_grants_are_mounted() {
        let plan = Isolation::prepare(
            &[
                root("/a", true),
                root("/a/b", true),
                root("/a", true),
                root("/c", false),
                root("/cd", true),
            ],
            &[],
            &[],
            &[],
            &[],
        )
        .unwrap();
        let paths: Vec<&std::ffi::CStr> = plan.writable.iter().map(|t| t.path.as_c_str()).collect();
        assert_eq!(paths, [c"/a", c"/cd"]);
    }

    #[test]
    fn a_hidden_path_outside_every_grant_or_containing_one_mounts_nothing() {
        let id = Ident {
            dev_major: 0,
            dev_minor: 0,
            ino: 2,
        };
        let plan = Isolation::prepare(
            &[root("/w/mirror", true)],
            &[
                covered("/w", id, true),
                covered("/w/mirror", id, true),
                covered("/x", id, false),
            ],
            &[],
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(plan.mounts(), (1, 0, 0));
    }

    #[test]
    fn directories_between_a_writable_grant_and_a_hidden_path_are_pinned() {
        let base = tempfile::tempdir().unwrap();
        let home = base.path().canonicalize().unwrap();
        let state = home.join(".local/state/agent-exec");
        std::fs::create_dir_all(&state).unwrap();
        let id = ident_of_path(&state).unwrap();
        let plan = Isolation::prepare(
            &[Root {
                path: home.clone(),
                id: ident_of_path(&home).unwrap(),
                writable: true,
            }],
            &[Covered {
                path: state.clone(),
                id,
                is_dir: true,
            }],
            &[],
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(
            paths(&plan.pinned),
            [home.join(".local"), home.join(".local/state")]
        );
        assert_eq!(plan.mounts(), (1, 2, 1));
    }

    fn covered(path: &str, id: Ident, is_dir: bool) -> Covered {
        Covered {
            path: PathBuf::from(path),
            id,
            is_dir,
        }
    }

    fn paths(targets: &[Target]) -> Vec<PathBuf> {
        targets
            .iter()
            .map(|t| PathBuf::from(std::ffi::OsStr::from_bytes(t.path.as_bytes())))
            .collect()
    }

    #[test]
    fn protected_paths_inside_a_writable_grant_are_bound_with_their_parents_pinned() {
        let base = tempfile::tempdir().unwrap();
        let home = base.path().canonicalize().unwrap();
        let work = home.join("work");
        std::fs::create_dir_all(work.join(".git/hooks")).unwrap();
        std::fs::write(work.join(".git/config"), "").unwrap();
        std::fs::write(home.join(".bashrc"), "").unwrap();
        let id = |p: &Path| ident_of_path(p).unwrap();
        let protect = |p: PathBuf, is_dir| Covered {
            id: id(&p),
            path: p,
            is_dir,
        };
        let plan = Isolation::prepare(
            &[
                Root {
                    path: home.clone(),
                    id: id(&home),
                    writable: false,
                },
                Root {
                    path: work.clone(),
                    id: id(&work),
                    writable: true,
                },
            ],
            &[],
            &[
                protect(work.join(".git/hooks"), true),
                protect(work.join(".git/config"), false),
                protect(work.join(".git/config"), false),
                // Read-only anyway: nothing to bind.
                protect(home.join(".bashrc"), false),
            ],
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(paths(&plan.pinned), [work.join(".git")]);
        assert_eq!(
            paths(&plan.protected),
            [work.join(".git/hooks"), work.join(".git/config")]
        );
    }

    #[test]
    fn a_shadow_replaces_a_link_on_its_way_and_never_follows_it() {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let t = tempfile::tempdir().unwrap();
        let upper = t.path().join("upper");
        let victim = t.path().join("victim");
        std::fs::create_dir_all(&upper).unwrap();
        std::fs::create_dir_all(&victim).unwrap();
        std::fs::write(victim.join("token"), "precious").unwrap();
        // A session's kept upper holds what an earlier command left there.
        std::os::unix::fs::symlink(&victim, upper.join("hf")).unwrap();
        let lower = t.path().join("lower");
        std::fs::create_dir_all(lower.join("hf")).unwrap();
        shadow(&upper, &lower, Path::new("hf/token"), true).unwrap();
        shadow(&upper, &lower, Path::new("hf/stored_tokens"), false).unwrap();
        // Missing from the lower higher up: the whiteout goes there, in a merged directory.
        shadow(&upper, &lower, Path::new("gone/deeper/token"), false).unwrap();
        assert!(std::fs::symlink_metadata(upper.join("gone/deeper")).is_err());
        let gone = std::fs::symlink_metadata(upper.join("gone")).unwrap();
        assert!(gone.file_type().is_char_device() || gone.is_file());
        assert_eq!(
            std::fs::read_to_string(victim.join("token")).unwrap(),
            "precious"
        );
        assert!(!victim.join("stored_tokens").exists());
        let hf = std::fs::symlink_metadata(upper.join("hf")).unwrap();
        assert!(hf.is_dir());
        let file = std::fs::symlink_metadata(upper.join("hf/token")).unwrap();
        assert!(file.is_file() && file.len() == 0 && file.mode() & 0o7777 == 0);
        let absent = std::fs::symlink_metadata(upper.join("hf/stored_tokens")).unwrap();
        assert!(
            absent.file_type().is_char_device() && absent.rdev() == 0
                || absent.is_file() && absent.len() == 0
        );
        // The same path again is fine; something else standing there is not.
        shadow(&upper, &lower, Path::new("hf/token"), true).unwrap();
        std::fs::write(upper.join("hf/other"), "x").unwrap();
        assert!(shadow(&upper, &lower, Path::new("hf/other"), true).is_err());
    }

    #[test]
    fn hidden_files_are_kept_apart_from_hidden_directories() {
        let base = tempfile::tempdir().unwrap();
        let home = base.path().canonicalize().unwrap();
        let work = home.join("w");
        std::fs::create_dir_all(work.join("a")).unwrap();
        let id = |p: &Path| ident_of_path(p).unwrap();
        let id2 = Ident {
            dev_major: 0,
            dev_minor: 0,
            ino: 2,
        };
        let plan = Isolation::prepare(
            &[
                Root {
                    path: home.clone(),
                    id: id(&home),
                    writable: false,
                },
                Root {
                    path: work.clone(),
                    id: id(&work),
                    writable: true,
                },
            ],
            &[
                Covered {
                    path: home.join(".ssh"),
                    id: id2,
                    is_dir: true,
                },
                Covered {
                    path: home.join(".netrc"),
                    id: id2,
                    is_dir: false,
                },
                Covered {
                    path: work.join("a/.env"),
                    id: id2,
                    is_dir: false,
                },
            ],
            &[],
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(paths(&plan.hidden), [home.join(".ssh")]);
        assert_eq!(
            paths(&plan.hidden_files),
            [home.join(".netrc"), work.join("a/.env")]
        );
        // The one directory between the writable grant and its hidden file; none in the
        // read-only home.
        assert_eq!(paths(&plan.pinned), [work.join("a")]);
        assert_eq!(plan.mounts(), (1, 1, 3));
    }

    fn grant(path: &str, is_dir: bool, writable: bool, system: bool) -> Grant {
        Grant {
            path: PathBuf::from(path),
            id: Ident {
                dev_major: 0,
                dev_minor: 0,
                ino: 1,
            },
            is_dir,
            writable,
            system,
        }
    }

    fn text(c: &std::ffi::CStr) -> &str {
        c.to_str().unwrap()
    }

    #[test]
    fn the_new_root_binds_outermost_grants_and_writable_ones_beneath_read_only_ones() {
        let view = PathView {
            links: vec![(PathBuf::from("/bin"), PathBuf::from("usr/bin"))],
            dirs: vec![PathBuf::from("/x")],
        };
        let plan = NewRoot::plan(
            &[
                grant("/w", true, true, false),
                grant("/w/ro", true, false, false),
                grant("/r/w", true, true, false),
                grant("/r", true, false, false),
                grant("/a/b/f", false, false, false),
                grant("/proc/meminfo", false, false, true),
            ],
            &[&view],
            true,
            true,
            false,
        )
        .unwrap()
        .unwrap();
        let binds: Vec<(&str, Option<Kind>, bool)> = plan
            .binds
            .iter()
            .map(|b| (text(&b.at), b.make, b.writable))
            .collect();
        assert_eq!(
            binds,
            [
                ("r", Some(Kind::Dir), false),
                ("a/b/f", Some(Kind::File), false),
                ("w", Some(Kind::Dir), true),
                ("r/w", None, true),
            ]
        );
        let dirs: Vec<&str> = plan.dirs.iter().map(|d| text(d)).collect();
        assert_eq!(dirs, ["a", "proc", "dev", "x", "a/b", "dev/shm"]);
        let links: Vec<(&str, &str)> = plan.links.iter().map(|(l, t)| (text(l), text(t))).collect();
        assert_eq!(
            links,
            [
                ("bin", "usr/bin"),
                ("dev/fd", "/proc/self/fd"),
                ("dev/stdin", "/proc/self/fd/0"),
                ("dev/stdout", "/proc/self/fd/1"),
                ("dev/stderr", "/proc/self/fd/2"),
            ]
        );
    }

    #[test]
    fn read_only_system_grants_bind_etc_once_and_each_usr_tree_alone() {
        let plan = NewRoot::plan(
            &[
                grant("/usr/bin", true, false, true),
                grant("/usr/share", true, false, true),
                grant("/etc/passwd", false, false, true),
                grant("/dev/null", false, true, true),
                // The caller's own path beneath /usr is bound as itself.
                grant("/usr/src/x", true, true, false),
            ],
            &[],
            false,
            false,
            true,
        )
        .unwrap()
        .unwrap();
        let binds: Vec<&str> = plan.binds.iter().map(|b| text(&b.at)).collect();
        // Not /usr whole: /usr/local/var (a daemon's socket) stays out of the view.
        assert_eq!(
            binds,
            ["etc", "usr/bin", "usr/share", "dev/null", "usr/src/x"]
        );
        // A grant of / itself: no new root (the host's tree is the view).
        assert!(
            NewRoot::plan(&[grant("/", true, false, false)], &[], false, false, false)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_walk_records_the_links_on_the_way_as_the_host_has_them() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("real/sub")).unwrap();
        std::os::unix::fs::symlink("real", base.join("alias")).unwrap();
        std::os::unix::fs::symlink(base.join("alias/sub"), base.join("abs")).unwrap();
        let view = PathView::walk(&base.join("abs/file"));
        assert_eq!(
            view.links,
            [
                (base.join("abs"), base.join("alias/sub")),
                (base.join("alias"), PathBuf::from("real")),
            ]
        );
        assert!(view.dirs.contains(&base.join("real/sub")), "{view:?}");
    }

    #[test]
    fn a_path_without_links_has_the_view_its_walk_finds() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("a/b/c")).unwrap();
        std::fs::write(base.join("a/b/c/file"), b"x").unwrap();
        for path in [
            base.join("a/b/c/file"),
            base.join("a/b/c"),
            base.clone(),
            PathBuf::from("/"),
            PathBuf::from("/usr/bin"),
        ] {
            assert_eq!(PathView::direct(&path), PathView::walk(&path), "{path:?}");
        }
    }
}
