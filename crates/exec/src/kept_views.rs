//! A session's cache views, kept from one call to the next (TRUST-3): what one `run_command`
//! fetched into `~/.cargo/registry` or `~/.cache/pip` the session's next call still finds —
//! `cargo fetch` with network, then `cargo build --offline` without — while the user's caches
//! never change.
//!
//! **Owns:** one upper and work directory per cache for the session, in a directory of the
//! system temp dir named for this process ([`proctree::CallDir`]: removed when the session
//! ends, swept by the next session if this process died); which call holds each (one at a
//! time — an overlay's upper is never mounted twice; a second call at once gets a fresh view
//! of its own, as a call without a session does); and what a kept view may carry into the next
//! call. Before each call that takes it over:
//! - a file the view holds whose original in the user's cache changed since the view last saw
//!   it (a `cargo update` in the user's terminal) is dropped, so the user's version shows;
//! - no removal survives: overlayfs's whiteouts are deleted and opaque or redirected
//!   directories made plain again, so nothing the user adds to a cache later is hidden;
//! - what stands at a hidden path (the sandbox's shadows) is removed, so the next call's
//!   hidden set decides alone.
//!
//! Where the view could not be checked (the walk's bound, an error), or it holds more than a
//! call's temp dir may (4 GiB), it starts again empty: forgetting a fetch costs a download,
//! keeping a stale file could run old code.
//!
//! **Refuses to know:** how the overlay is made (linux-sandbox), which directories are caches,
//! what a session is (its owner holds one [`SessionViews`] for as long as the session lasts).

use std::os::unix::fs::{FileTypeExt, MetadataExt};

use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::views::{CacheViews, View};

/// The system temp dir's entries of this module start with this (and the owner's PID).
const PREFIX: &str = "agent-exec-views-";

/// At most this many entries of one view are checked before a call; past it the view starts
/// again empty.
const CHECK_BUDGET: usize = 100_000;

/// A kept view holding more than this (like a call's temp dir, LIM-1) starts again empty: a
/// session's fetches do not pile up in the system temp dir past what one call may write.
const KEPT_BYTES: u64 = 4 << 30;

/// Beside a view's upper and work directories: the path of the cache it shows.
const CACHE_FILE: &str = "cache";

/// The overlayfs attributes that make a directory hide or replace what is below it.
const HIDING_XATTRS: &[&str] = &[
    "user.overlay.opaque",
    "user.overlay.redirect",
    "trusted.overlay.opaque",
    "trusted.overlay.redirect",
];

/// What the user's cache held at a path when the view last saw it: `None` when nothing.
type Original = Option<(u64, u64, i64, i64, i64, i64, u64)>;

/// One cache's kept view.
#[derive(Debug)]
struct Slot {
    cache: PathBuf,
    dir: PathBuf,
    /// A call holds it now.
    busy: bool,
    /// What the user's cache held at each path the view holds, as of the last call's end;
    /// `None`: unknown, start again empty.
    seen: Option<Vec<(PathBuf, Original)>>,
}

#[derive(Debug, Default)]
struct Inner {
    #[cfg(target_os = "linux")]
    base: Option<proctree::CallDir>,
    #[cfg(not(target_os = "linux"))]
    base: Option<tempfile::TempDir>,
    slots: Vec<Slot>,
}

/// The kept views of one session (module docs). Dropping it removes them.
#[derive(Debug, Default)]
pub struct SessionViews {
    inner: Mutex<Inner>,
}

/// One kept view a call holds: given back to the session when the call's views go.
#[derive(Debug)]
pub(crate) struct Held {
    session: Arc<SessionViews>,
    slot: usize,
}

impl SessionViews {
    /// Views of `caches` for one call: the session's kept view of each cache no other call
    /// holds now, a fresh one under `fresh` (the call's own temp dir) for the rest. `hidden`
    /// are the call's hidden paths. A kept view is checked first (module docs).
    ///
    /// # Errors
    /// The directories cannot be made.
    pub fn lease(
        self: &Arc<Self>,
        caches: &[PathBuf],
        hidden: &[PathBuf],
        fresh: &Path,
    ) -> std::io::Result<CacheViews> {
        let mut views = Vec::with_capacity(caches.len());
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        for (i, cache) in caches.iter().enumerate() {
            let found = inner.slots.iter().position(|s| &s.cache == cache);
            let slot = match found {
                Some(n) if inner.slots[n].busy => None,
                Some(n) => Some(n),
                None => {
                    let base = match &inner.base {
                        Some(b) => b.path().to_path_buf(),
                        None => {
                            let made = make_base()?;
                            let path = made.path().to_path_buf();
                            inner.base = Some(made);
                            path
                        }
                    };
                    let n = inner.slots.len();
                    inner.slots.push(Slot {
                        cache: cache.clone(),
                        dir: base.join(n.to_string()),
                        busy: false,
                        seen: Some(Vec::new()),
                    });
                    Some(n)
                }
            };
            let view = match slot {
                Some(n) => {
                    let s = &mut inner.slots[n];
                    let view = View::make(cache, &s.dir)?;
                    // For `agent-exec status` (`kept_here`).
                    std::fs::write(s.dir.join(CACHE_FILE), cache.as_os_str().as_encoded_bytes())?;
                    prepare(s, &view.upper, hidden);
                    s.busy = true;
                    view.held(Held {
                        session: Arc::clone(self),
                        slot: n,
                    })
                }
                None => View::make(cache, &fresh.join(i.to_string()))?,
            };
            views.push(view);
        }
        Ok(CacheViews::from_views(views))
    }

    /// The caches the session keeps a view of, each with whether a call holds it now.
    pub fn kept(&self) -> Vec<(PathBuf, bool)> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .slots
            .iter()
            .map(|s| (s.cache.clone(), s.busy))
            .collect()
    }
}

/// One kept view as [`kept_here`] finds it on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptView {
    /// The cache it shows.
    pub cache: PathBuf,
    /// The process whose session keeps it.
    pub pid: u32,
    /// Whether that process still runs (a dead one's view is removed by the next session).
    pub owner_alive: bool,
    /// Files, links and removals it holds (bounded like the result's count).
    pub entries: usize,
    /// Bytes of the files it holds.
    pub bytes: u64,
}

/// The kept views of every session of this user on this machine, in the system temp dir.
#[cfg(target_os = "linux")]
pub fn kept_here() -> Vec<KeptView> {
    use std::os::unix::ffi::OsStringExt;
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    let stem = PREFIX.trim_end_matches('-');
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((found, owner)) = name.to_str().and_then(proctree::parse_owned_name) else {
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if found != stem || !meta.is_dir() || meta.uid() != me {
            continue;
        }
        let owner_alive = proctree::ProcessId::of(owner.pid()).is_some_and(|now| now == owner);
        let Ok(slots) = std::fs::read_dir(entry.path()) else {
            continue;
        };
        for slot in slots.flatten() {
            let Ok(cache) = std::fs::read(slot.path().join(CACHE_FILE)) else {
                continue;
            };
            let (mut entries, mut bytes) = (0, 0);
            let mut budget = CHECK_BUDGET;
            walk(&slot.path().join("upper"), &mut budget, &mut |_, m| {
                if !m.is_dir() {
                    entries += 1;
                    bytes += m.len();
                }
                true
            });
            out.push(KeptView {
                cache: PathBuf::from(std::ffi::OsString::from_vec(cache)),
                pid: owner.pid(),
                owner_alive,
                entries,
                bytes,
            });
        }
    }
    out.sort_by(|a, b| (a.pid, &a.cache).cmp(&(b.pid, &b.cache)));
    out
}

impl Held {
    /// Gives the view back: records what the user's cache holds at each path the view holds
    /// (bounded: past it the view starts again empty next time).
    pub(crate) fn release(self, upper: &Path) {
        let mut inner = self
            .session
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(slot) = inner.slots.get_mut(self.slot) else {
            return;
        };
        let mut seen = Vec::new();
        let mut budget = CHECK_BUDGET;
        let mut bytes = 0;
        let whole = record(upper, &slot.cache, &mut seen, &mut budget, &mut bytes);
        slot.seen = (whole && bytes <= KEPT_BYTES).then_some(seen);
        slot.busy = false;
    }
}

#[cfg(target_os = "linux")]
fn make_base() -> std::io::Result<proctree::CallDir> {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    // What a session of a process that died left: nobody else removes it.
    SWEPT.call_once(|| {
        let stem = PREFIX.trim_end_matches('-');
        let _ = proctree::sweep_orphans(&std::env::temp_dir(), |s| s == stem);
    });
    proctree::CallDir::create(&std::env::temp_dir(), PREFIX)
}

#[cfg(not(target_os = "linux"))]
fn make_base() -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(PREFIX)
        .tempdir_in(std::env::temp_dir())
}

/// Makes the kept view fit for the next call (module docs).
fn prepare(slot: &mut Slot, upper: &Path, hidden: &[PathBuf]) {
    match slot.seen.take() {
        None => empty(upper),
        Some(seen) => {
            for (rel, was) in seen {
                if original(&slot.cache.join(&rel)) != was {
                    remove(&upper.join(&rel));
                }
            }
            let mut budget = CHECK_BUDGET;
            if !unhide(upper, &mut budget) {
                empty(upper);
            }
        }
    }
    for h in hidden {
        if let Ok(rel) = h.strip_prefix(&slot.cache) {
            if !rel.as_os_str().is_empty() {
                remove(&upper.join(rel));
            }
        }
    }
}

/// What the user's cache holds at `path` now.
fn original(path: &Path) -> Original {
    std::fs::symlink_metadata(path).ok().map(|m| {
        (
            m.dev(),
            m.ino(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
            m.size(),
        )
    })
}

/// Calls `visit` on each entry beneath `dir` (a directory before what it holds; no link
/// followed); `false` when `visit` said stop, the bound cut the walk short or a directory
/// could not be read.
fn walk(
    dir: &Path,
    budget: &mut usize,
    visit: &mut dyn FnMut(&Path, &std::fs::Metadata) -> bool,
) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    for entry in entries {
        let Ok(entry) = entry else { return false };
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            return false;
        };
        if !visit(&path, &meta) || meta.is_dir() && !walk(&path, budget, visit) {
            return false;
        }
    }
    true
}

/// Adds each entry but directories beneath `upper` with what the cache holds at its path, and
/// their sizes to `bytes`; `false` when the walk was cut short.
fn record(
    upper: &Path,
    cache: &Path,
    seen: &mut Vec<(PathBuf, Original)>,
    budget: &mut usize,
    bytes: &mut u64,
) -> bool {
    walk(upper, budget, &mut |path, meta| {
        if !meta.is_dir() {
            *bytes = bytes.saturating_add(meta.len());
            if let Ok(rel) = path.strip_prefix(upper) {
                seen.push((rel.to_path_buf(), original(&cache.join(rel))));
            }
        }
        true
    })
}

/// Deletes the whiteouts beneath `dir` and the attributes that make a directory opaque or
/// redirected; `false` when the walk was cut short or something could not be undone.
fn unhide(dir: &Path, budget: &mut usize) -> bool {
    plain(dir)
        && walk(dir, budget, &mut |path, meta| {
            if meta.is_dir() {
                plain(path)
            } else if meta.file_type().is_char_device() && meta.rdev() == 0 {
                // overlayfs's whiteout: a removal in the view.
                std::fs::remove_file(path).is_ok()
            } else {
                true
            }
        })
}

/// Removes the attributes that make the directory `dir` opaque or redirected.
fn plain(dir: &Path) -> bool {
    HIDING_XATTRS
        .iter()
        .all(|name| match rustix::fs::lremovexattr(dir, *name) {
            Ok(()) | Err(rustix::io::Errno::NODATA) => true,
            // Attributes of that namespace cannot be there (no privilege to set them, or a
            // file system without them).
            Err(rustix::io::Errno::NOTSUP | rustix::io::Errno::PERM) => true,
            Err(_) => false,
        })
}

/// Removes whatever is at `path` (a file, a link, a whole directory); nothing there is fine.
fn remove(path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            crate::calltemp::open_up(path);
            let _ = std::fs::remove_dir_all(path);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(path);
        }
        Err(_) => {}
    }
}

/// Empties `dir`, keeping it.
fn empty(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        remove(&entry.path());
    }
}

/// Whether a call holds each kept view, by cache.
#[cfg(test)]
fn busy(session: &SessionViews) -> std::collections::HashMap<PathBuf, bool> {
    session.kept().into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_view_is_kept_for_the_next_call_and_a_concurrent_call_gets_a_fresh_one() {
        let t = tempfile::tempdir().unwrap();
        let cache = t.path().join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        let session = Arc::new(SessionViews::default());
        let first = session
            .lease(std::slice::from_ref(&cache), &[], &t.path().join("f1"))
            .unwrap();
        let upper = first.staged().next().unwrap().upper;
        write(&upper.join("crate/lib.rs"), "fetched");
        // Held: another call at once gets its own.
        let second = session
            .lease(std::slice::from_ref(&cache), &[], &t.path().join("f2"))
            .unwrap();
        let other = second.staged().next().unwrap().upper;
        assert_ne!(other, upper);
        assert!(other.starts_with(t.path().join("f2")));
        assert!(busy(&session)[&cache]);
        drop(second);
        drop(first);
        assert!(!busy(&session)[&cache]);
        let third = session
            .lease(std::slice::from_ref(&cache), &[], &t.path().join("f3"))
            .unwrap();
        let again = third.staged().next().unwrap().upper;
        assert_eq!(again, upper);
        assert_eq!(
            std::fs::read_to_string(again.join("crate/lib.rs")).unwrap(),
            "fetched"
        );
    }

    #[test]
    fn a_file_whose_original_changed_is_dropped_and_others_stay() {
        let t = tempfile::tempdir().unwrap();
        let cache = t.path().join("cache");
        write(&cache.join("a"), "user a");
        write(&cache.join("b"), "user b");
        let session = Arc::new(SessionViews::default());
        let views = session
            .lease(std::slice::from_ref(&cache), &[], t.path())
            .unwrap();
        let upper = views.staged().next().unwrap().upper;
        write(&upper.join("a"), "view a");
        write(&upper.join("b"), "view b");
        write(&upper.join("new"), "view new");
        drop(views);
        // The user updates `a` and adds `new` natively.
        std::thread::sleep(std::time::Duration::from_millis(20));
        write(&cache.join("a"), "user a, updated");
        write(&cache.join("new"), "user new");
        let views = session
            .lease(std::slice::from_ref(&cache), &[], t.path())
            .unwrap();
        assert!(!upper.join("a").exists());
        assert!(!upper.join("new").exists());
        assert_eq!(std::fs::read_to_string(upper.join("b")).unwrap(), "view b");
        drop(views);
    }

    #[test]
    fn whiteouts_opaque_marks_and_hidden_paths_do_not_survive_into_the_next_call() {
        let t = tempfile::tempdir().unwrap();
        let cache = t.path().join("cache");
        std::fs::create_dir_all(cache.join("d")).unwrap();
        let session = Arc::new(SessionViews::default());
        let views = session
            .lease(std::slice::from_ref(&cache), &[], t.path())
            .unwrap();
        let upper = views.staged().next().unwrap().upper;
        std::fs::create_dir_all(upper.join("d")).unwrap();
        write(&upper.join("token"), "");
        let opaque = rustix::fs::lsetxattr(
            upper.join("d").as_path(),
            "user.overlay.opaque",
            b"y",
            rustix::fs::XattrFlags::empty(),
        )
        .is_ok();
        // A whiteout needs mknod of a character device; where this test may not, skip that.
        let whiteout = rustix::fs::mknodat(
            rustix::fs::CWD,
            upper.join("gone").as_path(),
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .is_ok();
        drop(views);
        let views = session
            .lease(
                std::slice::from_ref(&cache),
                &[cache.join("token")],
                t.path(),
            )
            .unwrap();
        assert!(!upper.join("token").exists());
        if whiteout {
            assert!(std::fs::symlink_metadata(upper.join("gone")).is_err());
        }
        if opaque {
            let mut buf = [0u8; 8];
            assert!(
                rustix::fs::lgetxattr(upper.join("d").as_path(), "user.overlay.opaque", &mut buf)
                    .is_err()
            );
        }
        drop(views);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_kept_views_of_live_sessions_are_found_on_disk_with_their_cache() {
        let t = tempfile::tempdir().unwrap();
        let cache = t.path().join("listed-cache");
        std::fs::create_dir_all(&cache).unwrap();
        let session = Arc::new(SessionViews::default());
        let views = session
            .lease(std::slice::from_ref(&cache), &[], t.path())
            .unwrap();
        let upper = views.staged().next().unwrap().upper;
        write(&upper.join("a/b"), "12345");
        drop(views);
        let found: Vec<KeptView> = kept_here()
            .into_iter()
            .filter(|k| k.cache == cache)
            .collect();
        assert_eq!(
            found,
            vec![KeptView {
                cache: cache.clone(),
                pid: std::process::id(),
                owner_alive: true,
                entries: 1,
                bytes: 5,
            }]
        );
        drop(session);
        assert!(!kept_here().iter().any(|k| k.cache == cache));
    }

    #[test]
    fn a_view_grown_past_the_bound_starts_the_next_call_empty() {
        let t = tempfile::tempdir().unwrap();
        let cache = t.path().join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        let session = Arc::new(SessionViews::default());
        let views = session
            .lease(std::slice::from_ref(&cache), &[], t.path())
            .unwrap();
        let upper = views.staged().next().unwrap().upper;
        write(&upper.join("small"), "kept?");
        // Sparse: its length counts, not its blocks.
        let big = std::fs::File::create(upper.join("big")).unwrap();
        big.set_len(KEPT_BYTES + 1).unwrap();
        drop(views);
        let views = session
            .lease(std::slice::from_ref(&cache), &[], t.path())
            .unwrap();
        assert_eq!(std::fs::read_dir(&upper).unwrap().count(), 0);
        drop(views);
    }

    #[test]
    fn dropping_the_session_removes_its_views() {
        let t = tempfile::tempdir().unwrap();
        let cache = t.path().join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        let session = Arc::new(SessionViews::default());
        let views = session
            .lease(std::slice::from_ref(&cache), &[], t.path())
            .unwrap();
        let upper = views.staged().next().unwrap().upper;
        write(&upper.join("x/y"), "z");
        drop(views);
        assert!(upper.exists());
        drop(session);
        assert!(!upper.exists());
    }
}
