//! The process-wide cache behind [`Policy::allow_system`](crate::Policy::allow_system): for each
//! fixed system location, its open `O_PATH` descriptor (or the fact that it is missing), kept
//! across calls until something changes what the path names.
//!
//! **Owns**: the descriptors, and knowing when they went stale. Every directory in which the
//! path's resolution looks up a name (symbolic links followed hop by hop, so `/etc/localtime`
//! also watches `/usr/share/zoneinfo/Etc`) carries an inotify watch for entries created,
//! deleted or renamed; `/proc/self/mountinfo` polls as changed after any mount or unmount in our
//! mount namespace. Each [`SystemPaths::lookup`] batch starts by reading both without blocking,
//! and any change at all empties the cache: the next lookups open afresh. A quiet system costs
//! one `read` and one `poll` per `prepare` instead of a `stat` per location (the spawn
//! cost: ~40 `stat`s, ~100 µs of every `command` call).
//!
//! The watching starts with a process's second `prepare`, not its first: closing an inotify
//! instance that has watches waits for a grace period of the kernel's (SRCU), ~5 ms at every
//! exit here, which a one-call process (`agent-exec call`) would pay for nothing. Until then,
//! and wherever inotify cannot be had (no instances left, a watch refused), the paths are
//! revalidated on every lookup with one `stat` (same device, inode and type as the held
//! descriptor), as before this cache watched anything.
//!
//! An entry is never used after the `prepare` that follows a change: the event is queued
//! before the changing system call returns, and every batch of lookups reads the queue first.
//! That matters beyond liveness (the new `/etc/ld.so.cache` must be readable by the next
//! command): a directory moved away keeps its grant on everything beneath it, so a stale entry
//! could grant what lands there later. Only directories on local filesystems are trusted to
//! queue every change (`statfs`: ext2/3/4, XFS, Btrfs, F2FS, bcachefs, ZFS, tmpfs, ramfs,
//! overlayfs, squashfs, proc, sysfs); on NFS, CIFS, 9p or FUSE another client's change queues
//! nothing, and paths through them are revalidated by `stat` on every lookup. A host whose
//! mount table changes often (container runtimes) empties the cache as often.
//!
//! **Refuses**: user paths. Nothing but the callers' fixed lists enters it, because it keeps a
//! descriptor and a few watches per location for the life of the process.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use rustix::fs::FileType;

use crate::error::SandboxError;
use crate::sandbox::{FileId, open_path};

/// The cache every `prepare` in this process shares.
static SHARED: LazyLock<Mutex<SystemPaths>> = LazyLock::new(|| Mutex::new(SystemPaths::new()));

/// Locks the shared cache and brings it up to date (see [`SystemPaths::refresh`]). A lock
/// poisoned by a panic elsewhere costs the whole cache, watches included, never the lookup.
pub(crate) fn shared() -> MutexGuard<'static, SystemPaths> {
    let mut guard = shared_as_is();
    guard.refresh();
    guard
}

/// Locks the shared cache as it is, without [`SystemPaths::refresh`]: for a `prepare` reading
/// back what its own lookups just cached. A refresh there would count as the process's second
/// `prepare` — starting the watches (and their ~5 ms at exit) and emptying the cache that the
/// descriptors in hand came from.
pub(crate) fn shared_as_is() -> MutexGuard<'static, SystemPaths> {
    SHARED.lock().unwrap_or_else(|poisoned| {
        SHARED.clear_poison();
        let mut guard = poisoned.into_inner();
        *guard = SystemPaths::new();
        guard
    })
}

/// One location's cached state.
#[derive(Debug)]
enum Entry {
    /// The path named this file when it was opened. `watched`: every directory of its
    /// resolution is watched, so no event since means it still does; otherwise `stat` it.
    Present {
        fd: Arc<OwnedFd>,
        id: FileId,
        watched: bool,
        /// Opened with no symbolic link on the way (see [`open_direct`]): the path is the file's
        /// canonical path and its directories are all its resolution passes.
        direct: bool,
    },
    /// The path named nothing, and the directories where it would appear are watched.
    Missing,
}

/// System locations → their descriptors; see the module documentation.
#[derive(Debug)]
pub(crate) struct SystemPaths {
    entries: HashMap<PathBuf, Entry>,
    watch: Watching,
}

/// Whether changes are watched.
#[derive(Debug)]
enum Watching {
    /// Not yet: no `prepare` has come after the first (see the module documentation).
    NotYet,
    /// Watched.
    Active(Watch),
    /// Never: this kernel has no inotify (or a test asked for the fallback). A refusal for
    /// want of resources (instances, descriptors, memory) leaves it `NotYet`, to try again.
    Unavailable,
}

/// The change detector, and which directories it watched since the last change.
#[derive(Debug)]
struct Watch {
    changes: crate::watch::ChangeWatch,
    /// Directories whose watch was placed since the last change: a change to them would have
    /// emptied the cache.
    dirs: HashSet<PathBuf>,
}

impl Watch {
    /// The detector, or what watching becomes without it.
    fn start() -> Watching {
        match crate::watch::ChangeWatch::start() {
            Ok(changes) => Watching::Active(Watch {
                changes,
                dirs: HashSet::new(),
            }),
            Err(crate::watch::NoWatch::Transient) => Watching::NotYet,
            Err(crate::watch::NoWatch::Unavailable) => Watching::Unavailable,
        }
    }

    /// Whether anything changed since the last call (see `ChangeWatch::changed`).
    fn changed(&mut self) -> bool {
        self.changes.changed()
    }

    /// Puts watches on every directory `path`'s resolution looks a name up in, and checks that
    /// the resolution did not move while they were being added. `true`: from now on, any change
    /// to what `path` names queues an event (or changes the mount table).
    fn cover(&mut self, path: &Path) -> bool {
        for _ in 0..3 {
            let Ok(dirs) = resolution_dirs(path) else {
                return false;
            };
            let mut added = false;
            for dir in &dirs {
                if self.dirs.contains(dir) {
                    continue;
                }
                if !self.changes.watch_dir(dir, crate::watch::Also::Nothing) {
                    return false;
                }
                self.dirs.insert(dir.clone());
                added = true;
            }
            if !added {
                // Every directory was watched before this resolution ran: a change since would
                // have queued an event.
                return true;
            }
            // New watches went in after the resolution: resolve again under them.
        }
        false
    }
}

impl SystemPaths {
    fn new() -> SystemPaths {
        SystemPaths {
            entries: HashMap::new(),
            watch: Watching::NotYet,
        }
    }

    /// A cache that never watches: every lookup revalidates with `stat` (tests of the fallback).
    #[cfg(test)]
    pub(crate) fn unwatched() -> SystemPaths {
        SystemPaths {
            entries: HashMap::new(),
            watch: Watching::Unavailable,
        }
    }

    /// A cache that watches from its first lookup (tests of the watching).
    #[cfg(test)]
    pub(crate) fn watched() -> SystemPaths {
        SystemPaths {
            entries: HashMap::new(),
            watch: Watch::start(),
        }
    }

    /// Called before each batch of lookups. Starts watching at the second batch (the entries
    /// made unwatched are dropped, to be opened again under watches); afterwards drops every
    /// entry if anything changed since the last refresh. The record of watched directories
    /// goes too then: a watched directory may have been replaced, and its watch stays on the
    /// old inode (re-adding a watch to a directory that has one is harmless).
    pub(crate) fn refresh(&mut self) {
        match &mut self.watch {
            Watching::NotYet if !self.entries.is_empty() => {
                self.watch = Watch::start();
                if matches!(self.watch, Watching::Active(_)) {
                    self.entries.clear();
                }
            }
            Watching::Active(watch) => {
                if watch.changed() {
                    self.entries.clear();
                    watch.dirs.clear();
                }
            }
            Watching::NotYet | Watching::Unavailable => {}
        }
    }

    /// The descriptor for system location `path`, and which file it is; `None` if the path
    /// names nothing now.
    pub(crate) fn lookup(
        &mut self,
        path: &Path,
    ) -> Result<Option<(Arc<OwnedFd>, FileId)>, SandboxError> {
        match self.entries.get(path) {
            Some(Entry::Missing) => return Ok(None),
            Some(Entry::Present {
                fd,
                id,
                watched: true,
                ..
            }) => return Ok(Some((Arc::clone(fd), *id))),
            Some(Entry::Present {
                fd,
                id,
                watched: false,
                ..
            }) => match rustix::fs::stat(path) {
                // Same device and inode as the descriptor we hold: the inode cannot have been
                // freed and its number reused while we hold it.
                Ok(stat) if FileId::of(&stat) == *id => {
                    return Ok(Some((Arc::clone(fd), *id)));
                }
                Ok(_) => {}
                Err(e) if e == rustix::io::Errno::NOENT => {}
                Err(e) => {
                    return Err(SandboxError::OpenPath {
                        path: path.to_owned(),
                        source: e.into(),
                    });
                }
            },
            None => {}
        }
        // Watches first, then the open: a change after the watches are in queues an event that
        // the next refresh sees, so the entry cannot outlive what it describes.
        let watched = match &mut self.watch {
            Watching::Active(w) => w.cover(path),
            Watching::NotYet | Watching::Unavailable => false,
        };
        match open_direct(path)? {
            Some((fd, id, direct)) => {
                let fd = Arc::new(fd);
                self.entries.insert(
                    path.to_owned(),
                    Entry::Present {
                        fd: Arc::clone(&fd),
                        id,
                        watched,
                        direct,
                    },
                );
                Ok(Some((fd, id)))
            }
            None => {
                if watched {
                    self.entries.insert(path.to_owned(), Entry::Missing);
                } else {
                    self.entries.remove(path);
                }
                Ok(None)
            }
        }
    }

    /// The descriptor cached for `path`, if any (tests; the new root's walks, keyed on it).
    pub(crate) fn cached(&self, path: &Path) -> Option<Arc<OwnedFd>> {
        match self.entries.get(path) {
            Some(Entry::Present { fd, .. }) => Some(Arc::clone(fd)),
            _ => None,
        }
    }

    /// Whether `path`'s cached descriptor was opened with no symbolic link on the way, so
    /// `path` itself is the file's canonical path (no `/proc/self/fd` read, no walk: a
    /// one-call process makes ~170 system grants).
    pub(crate) fn direct(&self, path: &Path) -> bool {
        matches!(
            self.entries.get(path),
            Some(Entry::Present { direct: true, .. })
        )
    }
}

/// Opens `path` (`O_PATH`) as [`open_path`] does, first refusing every symbolic link on the way
/// (`openat2` with `RESOLVE_NO_SYMLINKS`, Linux 5.6): when that succeeds and the path is
/// lexically normal (no `.` or `..`), the path is its canonical path (`true`). A link on the
/// way (`ELOOP`), or a kernel or container without `openat2` (`ENOSYS`, `EPERM` from a seccomp
/// filter), opens it the ordinary way, following links (`false`).
pub(crate) fn open_direct(path: &Path) -> Result<Option<(OwnedFd, FileId, bool)>, SandboxError> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let normal = path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if normal {
        match rustix::fs::openat2(
            rustix::fs::CWD,
            path,
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS,
        ) {
            Ok(fd) => {
                let stat = rustix::fs::fstat(&fd).map_err(|e| SandboxError::OpenPath {
                    path: path.to_owned(),
                    source: e.into(),
                })?;
                return Ok(Some((fd, FileId::of(&stat), true)));
            }
            Err(e) if e == rustix::io::Errno::NOENT => return Ok(None),
            Err(_) => {}
        }
    }
    Ok(open_path(path, true)?.map(|(fd, id)| (fd, id, false)))
}

/// The most symbolic links one resolution follows, as the kernel's `MAXSYMLINKS`.
const MAX_LINKS: usize = 40;

/// The directories in which resolving `path` (absolute; every symbolic link followed, as
/// `open` does) looks up a name, in order, without repeats. A change to what `path` names must
/// create, delete or rename an entry in one of them, or change a mount. Stops at the first
/// name that does not exist: its directory is where it would appear.
pub(crate) fn resolution_dirs(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    fn components(path: &Path) -> impl Iterator<Item = OsString> + '_ {
        path.components().filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_owned()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
    }
    if !path.is_absolute() {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    // `current` never contains a symbolic link or `..`, so its lexical parent is its real one.
    let mut current = PathBuf::from("/");
    let mut pending: VecDeque<OsString> = components(path).collect();
    let mut links = 0;
    while let Some(name) = pending.pop_front() {
        if name.as_bytes() == b".." {
            current.pop();
            continue;
        }
        if !dirs.contains(&current) {
            dirs.push(current.clone());
        }
        let next = current.join(&name);
        let stat = match rustix::fs::lstat(&next) {
            Ok(stat) => stat,
            Err(rustix::io::Errno::NOENT) => break,
            Err(e) => return Err(e.into()),
        };
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Symlink => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(rustix::io::Errno::LOOP.into());
                }
                let target = std::fs::read_link(&next)?;
                if target.is_absolute() {
                    current = PathBuf::from("/");
                }
                for part in components(&target).collect::<Vec<_>>().into_iter().rev() {
                    pending.push_front(part);
                }
            }
            FileType::Directory => current = next,
            // A file in the middle: the open fails with ENOTDIR; nothing further to watch.
            _ if !pending.is_empty() => break,
            _ => current = next,
        }
    }
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn only_a_normal_path_without_links_is_opened_direct() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("real/sub")).unwrap();
        std::os::unix::fs::symlink("real", base.join("alias")).unwrap();
        let direct = |p: PathBuf| open_direct(&p).unwrap().map(|(_, _, d)| d);
        assert_eq!(direct(base.join("real/sub")), Some(true));
        // A link on the way, or a name the text does not say canonically: opened all the
        // same, following the link, but not direct.
        assert_eq!(direct(base.join("alias/sub")), Some(false));
        assert_eq!(direct(base.join("real/sub/..")), Some(false));
        // `Path::components` drops an inner `.`: rebuilt, the text is canonical.
        assert_eq!(direct(base.join("real/./sub")), Some(true));
        assert_eq!(direct(base.join("missing")), None);
        // The same file either way.
        let (_, a, _) = open_direct(&base.join("real/sub")).unwrap().unwrap();
        let (_, b, _) = open_direct(&base.join("alias/sub")).unwrap().unwrap();
        assert_eq!(a, b);
    }

    /// Whether `dir` (the test's temp directory) is watchable; says why not when it is not.
    fn watchable(dir: &Path) -> bool {
        let ok = crate::watch::on_local_filesystem(dir);
        if !ok {
            eprintln!("skipped: {dir:?} is not on a local filesystem, so it is never watched");
        }
        ok
    }

    /// The inode `path` names now, and the one `cache` hands out for it.
    fn now_and_cached(cache: &mut SystemPaths, path: &Path) -> (Option<u64>, Option<u64>) {
        cache.refresh();
        let now = rustix::fs::stat(path).ok().map(|s| s.st_ino);
        let held = cache
            .lookup(path)
            .unwrap()
            .map(|(fd, _)| rustix::fs::fstat(&*fd).unwrap().st_ino);
        (now, held)
    }

    /// Whether two lookups in a row hand out the same descriptor. Other tests create files in
    /// the temp directory, which the cache watches too, and any event rightly empties it; so
    /// a few tries, one of which must see no event between its two lookups.
    fn reused(cache: &mut SystemPaths, path: &Path) -> bool {
        (0..5).any(|_| {
            cache.refresh();
            let first = cache.lookup(path).unwrap().unwrap().0;
            cache.refresh();
            let second = cache.lookup(path).unwrap().unwrap().0;
            Arc::ptr_eq(&first, &second)
        })
    }

    /// Replacements the cache must notice, each checked with inotify and with the `stat`
    /// fallback: a file renamed over, a re-pointed link, a directory in the middle of the path
    /// swapped for another, a missing path created, a present one deleted.
    fn follows_every_replacement(mut cache: SystemPaths) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("etc/sub")).unwrap();
        std::fs::create_dir(root.join("zone")).unwrap();
        let file = root.join("etc/sub/ld.so.cache");
        std::fs::write(&file, "1").unwrap();
        let (now, held) = now_and_cached(&mut cache, &file);
        assert_eq!(held, now);
        assert!(reused(&mut cache, &file), "reopened while unchanged");

        // Renamed over (ldconfig).
        std::fs::write(root.join("etc/sub/new"), "2").unwrap();
        std::fs::rename(root.join("etc/sub/new"), &file).unwrap();
        let (now, held) = now_and_cached(&mut cache, &file);
        assert_eq!(held, now, "file renamed over");

        // The directory in the middle swapped.
        std::fs::rename(root.join("etc/sub"), root.join("etc/old")).unwrap();
        std::fs::create_dir(root.join("etc/sub")).unwrap();
        std::fs::write(&file, "3").unwrap();
        let (now, held) = now_and_cached(&mut cache, &file);
        assert_eq!(held, now, "parent directory replaced");

        // A link re-pointed, one hop away from the path.
        let (a, b) = (root.join("zone/A"), root.join("zone/B"));
        std::fs::write(&a, "a").unwrap();
        std::fs::write(&b, "b").unwrap();
        std::os::unix::fs::symlink(root.join("zone/current"), root.join("etc/localtime")).unwrap();
        std::os::unix::fs::symlink(&a, root.join("zone/current")).unwrap();
        let link = root.join("etc/localtime");
        let (now, held) = now_and_cached(&mut cache, &link);
        assert_eq!(held, now);
        std::os::unix::fs::symlink(&b, root.join("zone/next")).unwrap();
        std::fs::rename(root.join("zone/next"), root.join("zone/current")).unwrap();
        let (now, held) = now_and_cached(&mut cache, &link);
        assert_eq!(held, now, "second link re-pointed");

        // Missing, then created; present, then deleted.
        let late = root.join("etc/python3.11");
        assert_eq!(now_and_cached(&mut cache, &late), (None, None));
        std::fs::create_dir(&late).unwrap();
        let (now, held) = now_and_cached(&mut cache, &late);
        assert!(now.is_some());
        assert_eq!(held, now, "created after it was missing");
        std::fs::remove_dir(&late).unwrap();
        assert_eq!(now_and_cached(&mut cache, &late), (None, None));
    }

    #[test]
    fn watched_cache_follows_every_replacement() {
        let cache = SystemPaths::watched();
        assert!(
            matches!(cache.watch, Watching::Active(_)),
            "no inotify here: the fallback test covers this"
        );
        follows_every_replacement(cache);
    }

    #[test]
    fn watching_starts_with_the_second_batch_of_lookups() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::canonicalize(dir.path()).unwrap().join("group");
        std::fs::write(&file, "g").unwrap();
        if !watchable(dir.path()) {
            return;
        }
        let mut cache = SystemPaths::new();
        cache.refresh();
        assert!(cache.lookup(&file).unwrap().is_some());
        assert!(
            matches!(cache.watch, Watching::NotYet),
            "a one-call process never watches"
        );
        assert!(matches!(
            cache.entries.get(&file),
            Some(Entry::Present { watched: false, .. })
        ));
        cache.refresh();
        assert!(cache.lookup(&file).unwrap().is_some());
        assert!(matches!(cache.watch, Watching::Active(_)));
        assert!(matches!(
            cache.entries.get(&file),
            Some(Entry::Present { watched: true, .. })
        ));
        follows_every_replacement(cache);
    }

    #[test]
    fn a_replaced_directory_loses_its_old_watch() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        if !watchable(&root) {
            return;
        }
        std::fs::create_dir(root.join("etc")).unwrap();
        let file = root.join("etc/localtime");
        std::fs::write(&file, "1").unwrap();
        let mut cache = SystemPaths::watched();
        let (now, held) = now_and_cached(&mut cache, &file);
        assert_eq!(held, now);
        let wd = |cache: &SystemPaths| match &cache.watch {
            Watching::Active(w) => w.changes.held(&root.join("etc")).unwrap(),
            _ => panic!("not watching"),
        };
        let old = wd(&cache);
        std::fs::rename(root.join("etc"), root.join("etc.old")).unwrap();
        std::fs::create_dir(root.join("etc")).unwrap();
        std::fs::write(&file, "2").unwrap();
        let (now, held) = now_and_cached(&mut cache, &file);
        assert_eq!(held, now);
        let new = wd(&cache);
        assert_ne!(old, new);
        let Watching::Active(w) = &cache.watch else {
            unreachable!()
        };
        assert_eq!(
            rustix::fs::inotify::remove_watch(w.changes.inotify(), old),
            Err(rustix::io::Errno::INVAL),
            "the old directory's watch is still there"
        );
    }

    #[test]
    fn a_path_through_a_filesystem_not_known_to_be_local_is_revalidated_by_stat() {
        // devpts, cgroup2, cgroup v1: real local filesystems, but not in the list, so they
        // stand in for NFS and FUSE here.
        let candidates = [
            "/dev/pts/ptmx",
            "/sys/fs/cgroup/cgroup.controllers",
            "/sys/fs/cgroup/memory/memory.stat",
        ];
        let Some(path) = candidates.iter().map(Path::new).find(|p| {
            p.exists()
                && p.parent()
                    .is_some_and(|dir| !crate::watch::on_local_filesystem(dir))
        }) else {
            eprintln!("skipped: none of {candidates:?} is on a filesystem outside the list");
            return;
        };
        let mut cache = SystemPaths::watched();
        cache.refresh();
        assert!(cache.lookup(path).unwrap().is_some());
        assert!(matches!(
            cache.entries.get(path),
            Some(Entry::Present { watched: false, .. })
        ));
    }

    #[test]
    fn unwatched_cache_follows_every_replacement_by_stat() {
        follows_every_replacement(SystemPaths::unwatched());
    }

    #[test]
    fn watched_entries_are_trusted_and_missing_paths_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let file = root.join("passwd");
        std::fs::write(&file, "x").unwrap();
        if !watchable(&root) {
            return;
        }
        let mut cache = SystemPaths::watched();
        cache.refresh();
        assert!(cache.lookup(&file).unwrap().is_some());
        // Watched: later lookups take the entry as it is, with no system call.
        match cache.entries.get(&file) {
            Some(Entry::Present { watched, .. }) => assert!(*watched),
            other => panic!("{other:?}"),
        }
        let missing = root.join("absent");
        assert!(cache.lookup(&missing).unwrap().is_none());
        assert!(matches!(cache.entries.get(&missing), Some(Entry::Missing)));
    }

    /// The body of `mount_over_a_system_path_is_noticed`, which runs it in a private mount
    /// namespace: a mount over a directory of the path, and its removal, are both noticed.
    /// Anywhere else it returns at once.
    #[test]
    fn mount_over_inner() {
        if std::env::var_os("SYSCACHE_MOUNT_TEST").is_none() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("etc")).unwrap();
        let file = root.join("etc/ld.so.cache");
        std::fs::write(&file, "x").unwrap();
        let mut cache = SystemPaths::watched();
        let (now, held) = now_and_cached(&mut cache, &file);
        assert_eq!(held, now);
        let target = std::ffi::CString::new(root.join("etc").as_os_str().as_bytes()).unwrap();
        // SAFETY: valid C strings; a tmpfs in our private mount namespace.
        let r = unsafe {
            libc::mount(
                c"none".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        assert_eq!(r, 0, "mount: {}", std::io::Error::last_os_error());
        assert_eq!(
            now_and_cached(&mut cache, &file),
            (None, None),
            "mounted over"
        );
        std::fs::write(&file, "y").unwrap();
        let (now, held) = now_and_cached(&mut cache, &file);
        assert_eq!(held, now, "a file on the mounted tmpfs");
        // Lazily: the cache holds a descriptor on the tmpfs.
        // SAFETY: a valid C string.
        let r = unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        assert_eq!(r, 0, "umount: {}", std::io::Error::last_os_error());
        let (now, held) = now_and_cached(&mut cache, &file);
        assert_eq!(held, now, "unmounted again");
        println!("mount test ran");
    }

    #[test]
    fn mount_over_a_system_path_is_noticed() {
        // A private mount namespace: `unshare -m` as root, with a user namespace otherwise.
        let root = rustix::process::geteuid().is_root();
        let mut unshare = std::process::Command::new("unshare");
        if root {
            unshare.args(["--mount", "--propagation", "private"]);
        } else {
            unshare.args([
                "--user",
                "--map-root-user",
                "--mount",
                "--propagation",
                "private",
            ]);
        }
        let out = unshare
            .arg(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "syscache::tests::mount_over_inner",
                "--nocapture",
            ])
            .env("SYSCACHE_MOUNT_TEST", "1")
            .output();
        let out = match out {
            Ok(out) => out,
            Err(e) => {
                eprintln!("skipped: cannot run unshare: {e}");
                return;
            }
        };
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() && text.contains("unshare failed") {
            eprintln!("skipped: no private mount namespace here: {text}");
            return;
        }
        assert!(
            text.contains("mount test ran") && out.status.success(),
            "{text}"
        );
    }

    #[test]
    fn resolution_dirs_follow_links_hop_by_hop() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("share/zone/Etc")).unwrap();
        std::fs::write(root.join("share/zone/Etc/UTC"), "utc").unwrap();
        std::fs::create_dir(root.join("etc")).unwrap();
        std::fs::create_dir(root.join("alt")).unwrap();
        // etc/localtime -> ../alt/tz (relative) -> <root>/share/zone/Etc/UTC (absolute)
        std::os::unix::fs::symlink("../alt/tz", root.join("etc/localtime")).unwrap();
        std::os::unix::fs::symlink(root.join("share/zone/Etc/UTC"), root.join("alt/tz")).unwrap();
        let dirs = resolution_dirs(&root.join("etc/localtime")).unwrap();
        for expected in [
            root.join("etc"),
            root.join("alt"),
            root.join("share"),
            root.join("share/zone"),
            root.join("share/zone/Etc"),
        ] {
            assert!(dirs.contains(&expected), "{expected:?} not in {dirs:?}");
        }
        assert!(dirs.contains(&PathBuf::from("/")));
        assert!(!dirs.contains(&root.join("share/zone/Etc/UTC")), "{dirs:?}");
    }

    #[test]
    fn resolution_of_a_missing_path_stops_where_it_would_appear() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let dirs = resolution_dirs(&root.join("absent/deeper/file")).unwrap();
        assert_eq!(dirs.last(), Some(&root));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Wherever a path leads through a random tree of directories and links (relative,
        /// absolute, chained, `..`), the directory holding its final target is watched.
        #[test]
        fn resolution_dirs_contain_the_real_parent(
            links in proptest::collection::vec((0usize..4, 0usize..8, proptest::bool::ANY), 0..6),
            walk in proptest::collection::vec(0usize..7, 1..6),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let root = std::fs::canonicalize(dir.path()).unwrap();
            let dirs = ["a", "a/b", "c", "c/d"];
            for d in dirs {
                std::fs::create_dir_all(root.join(d)).unwrap();
            }
            std::fs::write(root.join("a/b/f"), "f").unwrap();
            let targets = ["a", "a/b", "c", "c/d", "a/b/f", "l0", "a/l1", "missing"];
            for (i, (at, to, absolute)) in links.iter().enumerate() {
                let name = root.join(dirs[*at]).join(format!("l{i}"));
                let target = if *absolute {
                    root.join(targets[*to])
                } else {
                    // Relative to the link's directory: climb to `root` first.
                    let depth = dirs[*at].matches('/').count() + 1;
                    PathBuf::from("../".repeat(depth)).join(targets[*to])
                };
                let _ = std::os::unix::fs::symlink(target, name);
            }
            let names = ["a", "b", "c", "d", "f", "l0", ".."];
            let mut path = root.clone();
            for step in &walk {
                path.push(names[*step]);
            }
            let found = resolution_dirs(&path);
            if let Ok(real) = std::fs::canonicalize(&path) {
                let found = found.unwrap();
                let parent = real.parent().unwrap_or(Path::new("/"));
                proptest::prop_assert!(found.iter().any(|d| d == parent), "{path:?} -> {real:?}: {found:?}");
            }
        }
    }

    #[test]
    fn resolution_of_a_link_loop_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::os::unix::fs::symlink(root.join("b"), root.join("a")).unwrap();
        std::os::unix::fs::symlink(root.join("a"), root.join("b")).unwrap();
        assert!(resolution_dirs(&root.join("a")).is_err());
        assert!(resolution_dirs(Path::new("relative")).is_err());
    }
}
