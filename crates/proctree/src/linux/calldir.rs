//! Directories that belong to one call of this process — its private temp dir, a per-call
//! copy of a workspace — and that must not outlive it, however the process ends.
//!
//! Three ways a [`CallDir`] goes:
//! 1. the call ends: its owner drops it (or calls [`CallDir::remove`]);
//! 2. the host dies mid-call, by any signal including SIGKILL: every command spawned while the
//!    directory was in scope ([`remove_if_host_dies`]) has a supervisor that outlives the host;
//!    on the host's EOF it kills and reaps the whole tree *first*, then removes the directory
//!    (the same place, and the same order, as the tree's own cleanup);
//! 3. the host died where no supervisor was running (while copying, say): the directory's
//!    name records its owner's PID **and start time** ([`owned_name`]), and the next host's
//!    [`sweep_orphans`] removes directories whose owner is gone. A PID reused by another
//!    process has another start time, so it never passes for the owner.
//!
//! Every removal is relative to a directory descriptor, never follows a symbolic link, and
//! touches only directories owned by our uid (see `remove.rs`), so a world-writable parent such
//! as `/tmp` cannot turn it against another file.

use std::cell::RefCell;
use std::ffi::{CString, OsStr};
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::task::{Context, Poll};

use super::remove::{DirId, remove_tree_at, stat_at};
use crate::identity::ProcessId;

/// A directory made (or adopted) by this process for one call; removed when dropped, by the
/// supervisor of a command run in its scope if the host dies, or by a later host's
/// [`sweep_orphans`].
#[derive(Debug)]
pub struct CallDir {
    path: PathBuf,
    held: Arc<Held>,
}

/// What removing a call directory needs, shared with the registry a signal handler reads.
#[derive(Debug)]
struct Held {
    parent: OwnedFd,
    name: CString,
    id: DirId,
    /// Set by [`CallDir::keep`]: the directory outlives its owner on purpose.
    kept: AtomicBool,
    /// Supervisors (not yet reaped) that hold it: they remove it after their tree if the
    /// host dies, so a signal handler must leave it to them.
    trees: AtomicUsize,
}

impl Held {
    fn remove(&self) -> io::Result<()> {
        if self.kept.load(Ordering::SeqCst) {
            return Ok(());
        }
        match remove_tree_at(self.parent.as_raw_fd(), &self.name, Some(self.id)) {
            Ok(()) | Err(libc::ENOENT) => Ok(()),
            Err(e) => Err(errno(e)),
        }
    }
}

/// Every live call directory of this process, for [`remove_call_dirs_on_signals`].
static LIVE: Mutex<Vec<Weak<Held>>> = Mutex::new(Vec::new());

/// Counts one supervisor holding a call directory, from before its clone until it was reaped.
#[derive(Debug)]
pub(crate) struct TreeHold(Arc<Held>);

impl TreeHold {
    pub(crate) fn new(dir: &CallDir) -> TreeHold {
        dir.held.trees.fetch_add(1, Ordering::SeqCst);
        TreeHold(Arc::clone(&dir.held))
    }
}

impl Drop for TreeHold {
    fn drop(&mut self) {
        self.0.trees.fetch_sub(1, Ordering::SeqCst);
    }
}

/// This process's identity, as recorded in the names of its directories.
fn owner() -> ProcessId {
    static OWNER: OnceLock<ProcessId> = OnceLock::new();
    *OWNER.get_or_init(|| {
        let pid = std::process::id();
        ProcessId::of(pid).unwrap_or(ProcessId::new(pid, 0))
    })
}

/// `<prefix><pid>-<start time>-<n>`: a name unique to this process and call, which records its
/// owner so a later [`sweep_orphans`] can tell whether the owner is still alive.
#[must_use]
pub fn owned_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // Seeded with the clock so names are not guessable in advance from the PID alone (a
    // squatter in /tmp then only costs a retry, see `CallDir::create`).
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos().into());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let me = owner();
    format!(
        "{prefix}{}-{}-p{}-{}",
        me.pid(),
        me.start_time(),
        pid_namespace(),
        // Short: a call's temp dir holds the command's unix sockets (Python's multiprocessing
        // puts them in TMPDIR), and a socket path has at most 107 bytes.
        ((seed & 0xF_FFFF) << 8) ^ n
    )
}

/// The inode of this process's PID namespace (`/proc/self/ns/pid`), 0 when unreadable. A PID
/// means something only inside its namespace: a host in a container and one outside it can
/// share `/tmp` and a state directory, and each would take the other's live owner for dead
/// — so an owner is judged only by a host of the same namespace.
fn pid_namespace() -> u64 {
    static NS: OnceLock<u64> = OnceLock::new();
    *NS.get_or_init(|| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino())
    })
}

/// Stem, owner and (for names that record it) the owner's PID namespace.
fn parse_owned(name: &str) -> Option<(&str, ProcessId, Option<u64>)> {
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mut parts = name.rsplitn(5, '-');
    let n = parts.next()?;
    let ns = parts.next()?;
    if let Some(ns) = ns.strip_prefix('p').filter(|d| numeric(d)) {
        let start = parts.next()?;
        let pid = parts.next()?;
        let stem = parts.next()?;
        if !(numeric(n) && numeric(start) && numeric(pid)) || stem.is_empty() {
            return None;
        }
        let owner = ProcessId::new(pid.parse().ok()?, start.parse().ok()?);
        return Some((stem, owner, Some(ns.parse().ok()?)));
    }
    // `<stem>-<pid>-<start>-<n>`, as names were made before the namespace was recorded.
    let mut parts = name.rsplitn(4, '-');
    let n = parts.next()?;
    let start = parts.next()?;
    let pid = parts.next()?;
    let stem = parts.next()?;
    if !(numeric(n) && numeric(start) && numeric(pid)) || stem.is_empty() {
        return None;
    }
    Some((
        stem,
        ProcessId::new(pid.parse().ok()?, start.parse().ok()?),
        None,
    ))
}

/// The stem and owner of a name made by [`owned_name`]: `("agent-exec-run", pid, start)` for
/// `agent-exec-run-<pid>-<start>-p<pid namespace>-<n>` (or the older name without the namespace).
#[must_use]
pub fn parse_owned_name(name: &str) -> Option<(&str, ProcessId)> {
    parse_owned(name).map(|(stem, owner, _)| (stem, owner))
}

fn open_parent(parent: &Path) -> io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(parent)
        .map(OwnedFd::from)
}

fn errno(e: libc::c_int) -> io::Error {
    io::Error::from_raw_os_error(e)
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

impl CallDir {
    /// Makes `<parent>/<prefix><pid>-<start>-p<pid namespace>-<n>` (mode 0700), owned by this
    /// process.
    ///
    /// # Errors
    /// When the directory cannot be made (a name already taken is retried with another).
    pub fn create(parent: &Path, prefix: &str) -> io::Result<CallDir> {
        let dir = open_parent(parent)?;
        let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
        for _ in 0..16 {
            let name = owned_name(prefix);
            let c = c_name(OsStr::new(&name))?;
            // SAFETY: a NUL-terminated name relative to our descriptor.
            let r = unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o700) };
            if r == 0 {
                return CallDir::open(parent.join(&name), dir, c);
            }
            last = io::Error::last_os_error();
            if last.kind() != io::ErrorKind::AlreadyExists {
                return Err(last);
            }
        }
        Err(last)
    }

    /// Takes charge of the existing directory `path`, which this process made (e.g. a copy of
    /// a workspace, named with [`owned_name`]).
    ///
    /// # Errors
    /// When `path` is not a directory owned by our uid.
    pub fn adopt(path: &Path) -> io::Result<CallDir> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        let dir = open_parent(parent)?;
        CallDir::open(path.to_path_buf(), dir, c_name(name)?)
    }

    fn open(path: PathBuf, parent: OwnedFd, name: CString) -> io::Result<CallDir> {
        let (id, uid, mode) = stat_at(parent.as_raw_fd(), &name).map_err(errno)?;
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if mode & libc::S_IFMT != libc::S_IFDIR || uid != me {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "not a directory of ours",
            ));
        }
        let held = Arc::new(Held {
            parent,
            name,
            id,
            kept: AtomicBool::new(false),
            trees: AtomicUsize::new(0),
        });
        let mut live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&held));
        Ok(CallDir { path, held })
    }

    /// The directory's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory and everything in it now (fd-relative, no link followed), unless
    /// it was [kept](CallDir::keep). Removing what is already gone succeeds.
    ///
    /// # Errors
    /// When something in it could not be removed.
    pub fn remove(&self) -> io::Result<()> {
        self.held.remove()
    }

    /// The directory outlives this handle: dropping it no longer removes it. (A supervisor
    /// that already holds it still removes it if the host dies before that command ended;
    /// keep a directory only once its commands are gone.)
    pub fn keep(&self) {
        self.held.kept.store(true, Ordering::SeqCst);
    }

    /// What a supervisor needs to remove it: the parent's descriptor, the name and identity.
    pub(crate) fn parts(&self) -> (&OwnedFd, &CString, DirId) {
        (&self.held.parent, &self.held.name, self.held.id)
    }
}

impl Drop for CallDir {
    fn drop(&mut self) {
        let _ = self.held.remove();
    }
}

/// Removes the directories in `parent` whose names [`owned_name`] made with a stem that
/// `wanted` accepts, whose owner process is gone, and that are directories owned by our uid.
/// A live owner's directory (same PID *and* start time), anything not ours, and symbolic links
/// are never touched. Returns the paths removed.
///
/// # Errors
/// When `parent` cannot be listed.
pub fn sweep_orphans(parent: &Path, wanted: impl Fn(&str) -> bool) -> io::Result<Vec<PathBuf>> {
    let dir = open_parent(parent)?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(parent)?.flatten() {
        let name = entry.file_name();
        let Some((stem, owner, ns)) = name.to_str().and_then(parse_owned) else {
            continue;
        };
        // An owner in another PID namespace cannot be judged from here: leave it.
        if ns.is_some_and(|ns| ns != pid_namespace()) {
            continue;
        }
        // Alive means the same PID with the same start time; a zombie still counts (its
        // supervisors may be at work), and so does this process.
        let alive = ProcessId::of(owner.pid()).is_some_and(|now| now == owner);
        if !wanted(stem) || alive {
            continue;
        }
        let Ok(c) = c_name(&name) else { continue };
        let Ok((id, uid, mode)) = stat_at(dir.as_raw_fd(), &c) else {
            continue;
        };
        if mode & libc::S_IFMT != libc::S_IFDIR || uid != me {
            continue;
        }
        if remove_tree_at(dir.as_raw_fd(), &c, Some(id)).is_ok() {
            removed.push(parent.join(&name));
        }
    }
    Ok(removed)
}

/// How long a caught SIGTERM, SIGINT or SIGHUP waits for [`DeferSignalExit`] sections to end
/// before the host removes its call directories and dies anyway. A second such signal ends the
/// wait at once.
pub const SIGNAL_EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Sections a caught signal waits for (see [`defer_signal_exit`]).
static DEFERRING: AtomicUsize = AtomicUsize::new(0);

/// Held while work runs that must not be cut in half by a caught signal: a copy
/// whose directory is not yet a [`CallDir`] (the signal would leave it behind), a write-back
/// whose replaced files still wait aside in the user's folder. While any is held, the signal
/// thread of [`remove_call_dirs_on_signals`] waits — at most [`SIGNAL_EXIT_WAIT`], or until a
/// second signal — then removes the idle call directories and dies of the signal. SIGKILL
/// cannot wait; the supervisor and the next start's sweep cover it.
#[derive(Debug)]
#[must_use = "the section ends when the guard is dropped"]
pub struct DeferSignalExit(());

/// Starts a section a caught signal waits for; it ends when the guard is dropped.
pub fn defer_signal_exit() -> DeferSignalExit {
    DEFERRING.fetch_add(1, Ordering::SeqCst);
    DeferSignalExit(())
}

impl Drop for DeferSignalExit {
    fn drop(&mut self) {
        DEFERRING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// After the first signal: waits while sections are deferring, up to the limit or a second
/// signal from `set`.
fn wait_for_deferred(set: &libc::sigset_t) {
    let deadline = std::time::Instant::now() + SIGNAL_EXIT_WAIT;
    while DEFERRING.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
        let step = libc::timespec {
            tv_sec: 0,
            tv_nsec: 20_000_000,
        };
        // SAFETY: waits up to `step` for a signal of `set` (blocked in every thread).
        if unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &step) } > 0 {
            return;
        }
    }
}

/// For a host binary: on SIGTERM, SIGINT or SIGHUP, first remove every call directory of this
/// process that no running supervisor holds (one still being filled, or whose command has
/// ended), then die of that signal as before — which closes every supervisor's channel, so each
/// kills and reaps its tree and only then removes the directories it holds (the
/// tree is stopped before its files go). Work inside a [`DeferSignalExit`] section is waited for
/// first. Blocks the three signals in the calling thread and
/// waits for them in a thread of its own, so call it first in `main`, before any other thread
/// starts (threads inherit the mask). Supervisors and commands get a clean mask of their own.
///
/// # Errors
/// When the signal mask cannot be changed or the thread cannot be started (nothing changed
/// then: the signals keep their default action).
pub fn remove_call_dirs_on_signals() -> io::Result<()> {
    // SAFETY: sigset operations on a local set.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        set
    };
    // SAFETY: blocks signals in this thread; `set` is a valid sigset.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    let started = std::thread::Builder::new()
        .name("call-dir-signals".into())
        .spawn(move || {
            let mut sig: libc::c_int = 0;
            // SAFETY: waits for one of the blocked signals in `set`.
            if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                return;
            }
            wait_for_deferred(&set);
            remove_idle_call_dirs();
            // Die of the signal, as without us: default action, unblocked in this thread.
            // SAFETY: plain signal calls on our own process and thread.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                let mut one: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut one);
                libc::sigaddset(&mut one, sig);
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
                libc::raise(sig);
            }
            std::process::exit(128 + sig);
        });
    if let Err(e) = started {
        // SAFETY: restores the mask blocked above.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
        return Err(e);
    }
    Ok(())
}

/// Removes every live call directory of this process that is not kept and that no
/// supervisor holds; returns how many it removed.
pub fn remove_idle_call_dirs() -> usize {
    let live: Vec<Arc<Held>> = LIVE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    live.iter()
        .filter(|h| h.trees.load(Ordering::SeqCst) == 0 && !h.kept.load(Ordering::SeqCst))
        .filter(|h| h.remove().is_ok())
        .count()
}

thread_local! {
    /// The directories in scope on this thread while a [`RemovedIfHostDies`] is being polled.
    static SCOPE: RefCell<Vec<Arc<CallDir>>> = const { RefCell::new(Vec::new()) };
}

/// The directories every command spawned right now (on this thread) hands its supervisor.
pub(crate) fn in_scope() -> Vec<Arc<CallDir>> {
    SCOPE.with(|s| s.borrow().clone())
}

/// Wraps `fut` so that every command spawned while it is polled — on whichever thread polls
/// it — has its supervisor remove `dir` if the host dies while that command runs: after the
/// supervisor has killed and reaped the whole tree. Scopes nest: a command
/// spawned inside two of them is given both directories.
///
/// This is how a tool hands its temp dir to the supervisor without every layer in between
/// passing it along: the spawn happens inside a `poll` of this future.
pub fn remove_if_host_dies<F: Future>(dir: Arc<CallDir>, fut: F) -> RemovedIfHostDies<F> {
    RemovedIfHostDies {
        dir,
        fut: Box::pin(fut),
    }
}

/// The future returned by [`remove_if_host_dies`].
#[derive(Debug)]
pub struct RemovedIfHostDies<F> {
    dir: Arc<CallDir>,
    fut: Pin<Box<F>>,
}

/// Pops what it pushed, also when the poll unwinds.
struct ScopeGuard(usize);

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        SCOPE.with(|s| s.borrow_mut().truncate(self.0));
    }
}

impl<F: Future> Future for RemovedIfHostDies<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let depth = SCOPE.with(|s| {
            let mut s = s.borrow_mut();
            s.push(Arc::clone(&this.dir));
            s.len() - 1
        });
        let _guard = ScopeGuard(depth);
        this.fut.as_mut().poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_names_record_this_process_and_parse_back() {
        let name = owned_name("agent-exec-run-");
        let (stem, owner) = parse_owned_name(&name).unwrap();
        assert_eq!(stem, "agent-exec-run");
        assert_eq!(owner, ProcessId::of(std::process::id()).unwrap());
        assert_ne!(owned_name("x-"), owned_name("x-"));
    }

    #[test]
    fn names_without_an_owner_are_not_parsed() {
        for name in [
            "agent-exec-run-AbC123",
            "local-user-ws-0123456789ab",
            "local-user-ws-0123-kept-1-2-x",
            "1-2-3",
            "a-1-2-",
            "a--2-3",
        ] {
            assert_eq!(parse_owned_name(name), None, "{name}");
        }
        assert_eq!(
            parse_owned_name("local-user-call-12-34-56"),
            Some(("local-user-call", ProcessId::new(12, 34)))
        );
    }
}
