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
    /// The session's directory and this slot's place in it.
    base: PathBuf,
    index: usize,
    /// Bumped each time the view starts again empty: a new directory, never one emptied in
    /// place (what a command made unreadable or too deep might survive that).
    generation: u64,
    /// A call holds it now.
    busy: bool,
    /// What the user's cache held at each path the view holds, as of the last call's end;
    /// `None`: unknown, start again empty.
    seen: Option<Vec<(PathBuf, Original)>>,
}

impl Slot {
    fn dir(&self) -> PathBuf {
        self.base
            .join(format!("{}-{}", self.index, self.generation))
    }

    /// Starts the view again empty: a new directory, the old one removed as far as it can be
    /// (what stays goes with the session's directory).
    fn renew(&mut self) {
        let old = self.dir();
        self.generation += 1;
        remove(&old);
    }
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
    /// When the call took it: an original changed since then is the user's newer version.
    since: (i64, i64),
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
        let one = |inner: &mut Inner, i: usize, cache: &PathBuf| -> std::io::Result<View> {
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
                        base,
                        index: n,
                        generation: 0,
                        busy: false,
                        seen: Some(Vec::new()),
                    });
                    Some(n)
                }
            };
            Ok(match slot {
                Some(n) => {
                    let s = &mut inner.slots[n];
                    let since = now();
                    prepare(s, hidden);
                    let view = View::make(cache, &s.dir())?;
                    // For `agent-exec status` (`kept_here`); never through a link.
                    {
                        use std::io::Write;
                        use std::os::unix::fs::OpenOptionsExt;
                        std::fs::OpenOptions::new()
                            .write(true)
                            .create(true)
                            .truncate(true)
                            .custom_flags(libc::O_NOFOLLOW)
                            .open(s.dir().join(CACHE_FILE))?
                            .write_all(cache.as_os_str().as_encoded_bytes())?;
                    }
                    s.busy = true;
                    view.held(Held {
                        session: Arc::clone(self),
                        slot: n,
                        since,
                    })
                }
                None => View::make(cache, &fresh.join(i.to_string()))?,
            })
        };
        let mut failed = None;
        for (i, cache) in caches.iter().enumerate() {
            match one(&mut inner, i, cache) {
                Ok(view) => views.push(view),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        drop(inner);
        // On a failure the views already taken go back to the session (`CacheViews`' drop,
        // which takes the lock released above).
        let views = CacheViews::from_views(views);
        match failed {
            Some(e) => Err(e),
            None => Ok(views),
        }
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
                Step::Go
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
    /// Gives the view back: records what the user's cache holds at each path the view holds,
    /// dropping what the user changed while the call ran (bounded: past it the view starts
    /// again empty next time).
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
        let whole = record(
            upper,
            &slot.cache,
            self.since,
            &mut seen,
            &mut budget,
            &mut bytes,
        );
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

/// Makes the kept view fit for the next call (module docs): checked where it can be, else a
/// new, empty one.
fn prepare(slot: &mut Slot, hidden: &[PathBuf]) {
    let upper = slot.dir().join("upper");
    let fine = match slot.seen.take() {
        None => false,
        Some(_) if std::fs::symlink_metadata(&upper).is_err() => true,
        Some(seen) => {
            // A command may have made the view's root unreadable (`chmod 000` on the cache):
            // given back through a descriptor of the directory itself, never a link.
            #[cfg(target_os = "linux")]
            if let Ok(fd) = rustix::fs::open(
                &upper,
                rustix::fs::OFlags::PATH
                    | rustix::fs::OFlags::NOFOLLOW
                    | rustix::fs::OFlags::DIRECTORY,
                rustix::fs::Mode::empty(),
            ) {
                let at = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
                let _ = rustix::fs::chmod(at.as_str(), rustix::fs::Mode::from_raw_mode(0o700));
            }
            for (rel, was) in seen {
                if original(&slot.cache.join(&rel)) != was {
                    remove_beneath(&upper, &rel);
                }
            }
            let mut budget = CHECK_BUDGET;
            unhide(&upper, &slot.cache, &mut budget)
        }
    };
    if !fine {
        slot.renew();
    }
    let upper = slot.dir().join("upper");
    for h in hidden {
        if let Ok(rel) = h.strip_prefix(&slot.cache) {
            remove_beneath(&upper, rel);
        }
    }
}

/// Removes what stands at `rel` beneath `root`, following no link: a link or a file on the way
/// goes itself (nothing can lie beneath it). Nothing there is fine.
fn remove_beneath(root: &Path, rel: &Path) {
    let names: Vec<&std::ffi::OsStr> = rel
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    if names.len() != rel.components().count() || names.is_empty() {
        return;
    }
    let mut at = root.to_path_buf();
    for (i, name) in names.iter().enumerate() {
        at.push(name);
        match std::fs::symlink_metadata(&at) {
            Err(_) => return,
            Ok(m) if i + 1 < names.len() && m.is_dir() => {}
            Ok(_) => {
                remove(&at);
                return;
            }
        }
    }
}

/// Seconds and nanoseconds since the epoch, a little before now: a file's times come from the
/// kernel's coarse clock, up to a tick behind, and a change just after the lease must still
/// count as after it.
fn now() -> (i64, i64) {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .saturating_sub(std::time::Duration::from_millis(10));
    (
        i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        i64::from(d.subsec_nanos()),
    )
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

/// What a walk does after visiting an entry.
enum Step {
    /// Go on (into it, if it is a directory).
    Go,
    /// Go on beside it: it is gone.
    Skip,
    /// Stop: the walk failed.
    Stop,
}

/// Calls `visit` on each entry beneath `dir` (a directory before what it holds; no link
/// followed); `false` when `visit` said stop, the bound cut the walk short or a directory
/// could not be read.
fn walk(
    dir: &Path,
    budget: &mut usize,
    visit: &mut dyn FnMut(&Path, &std::fs::Metadata) -> Step,
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
        match visit(&path, &meta) {
            Step::Stop => return false,
            Step::Skip => {}
            Step::Go => {
                if meta.is_dir() && !walk(&path, budget, visit) {
                    return false;
                }
            }
        }
    }
    true
}

/// Adds each entry but directories beneath `upper` with what the cache holds at its path, and
/// their sizes to `bytes`; an entry whose original changed since `since` (the user's update
/// while the call ran) is dropped instead. `false` when the walk was cut short.
fn record(
    upper: &Path,
    cache: &Path,
    since: (i64, i64),
    seen: &mut Vec<(PathBuf, Original)>,
    budget: &mut usize,
    bytes: &mut u64,
) -> bool {
    walk(upper, budget, &mut |path, meta| {
        if meta.is_dir() {
            return Step::Go;
        }
        let Ok(rel) = path.strip_prefix(upper) else {
            return Step::Stop;
        };
        let now = original(&cache.join(rel));
        if now.is_some_and(|o| (o.4, o.5) >= since) {
            remove(path);
            return Step::Skip;
        }
        *bytes = bytes.saturating_add(meta.len());
        seen.push((rel.to_path_buf(), now));
        Step::Go
    })
}

/// Deletes the whiteouts beneath `upper` and the attributes that make a directory opaque or
/// redirected, and drops a directory where the user's cache now holds something else;
/// `false` when the walk was cut short or something could not be undone.
fn unhide(upper: &Path, cache: &Path, budget: &mut usize) -> bool {
    plain(upper)
        && walk(upper, budget, &mut |path, meta| {
            let rel = path.strip_prefix(upper).unwrap_or(path);
            if meta.is_dir() {
                if std::fs::symlink_metadata(cache.join(rel)).is_ok_and(|m| !m.is_dir()) {
                    remove(path);
                    Step::Skip
                } else if plain(path) {
                    Step::Go
                } else {
                    Step::Stop
                }
            } else if meta.file_type().is_char_device() && meta.rdev() == 0 {
                // overlayfs's whiteout: a removal in the view.
                if std::fs::remove_file(path).is_ok() {
                    Step::Skip
                } else {
                    Step::Stop
                }
            } else {
                Step::Go
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

/// Whether a call holds each kept view, by cache.
#[cfg(test)]
fn busy(session: &SessionViews) -> std::collections::HashMap<PathBuf, bool> {
    let inner = session.inner.lock().unwrap_or_else(PoisonError::into_inner);
    inner
        .slots
        .iter()
        .map(|s| (s.cache.clone(), s.busy))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lease of `cache` in `session` and the upper of its one view.
    fn take(
        session: &Arc<SessionViews>,
        cache: &Path,
        hidden: &[PathBuf],
        fresh: &Path,
    ) -> (CacheViews, PathBuf) {
        let views = session
            .lease(&[cache.to_path_buf()], hidden, fresh)
            .unwrap();
        let upper = views.staged().next().unwrap().upper;
        (views, upper)
    }

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
        let (first, upper) = take(&session, &cache, &[], &t.path().join("f1"));
        write(&upper.join("crate/lib.rs"), "fetched");
        // Held: another call at once gets its own.
        let (second, other) = take(&session, &cache, &[], &t.path().join("f2"));
        assert_ne!(other, upper);
        assert!(other.starts_with(t.path().join("f2")));
        assert!(busy(&session)[&cache]);
        drop(second);
        drop(first);
        assert!(!busy(&session)[&cache]);
        let (_third, again) = take(&session, &cache, &[], &t.path().join("f3"));
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
        // Older than the lease by more than the clock's margin.
        std::thread::sleep(std::time::Duration::from_millis(30));
        let session = Arc::new(SessionViews::default());
        let (views, upper) = take(&session, &cache, &[], t.path());
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
        let (views, upper) = take(&session, &cache, &[], t.path());
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
        let (views, upper) = take(&session, &cache, &[], t.path());
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
        let (views, upper) = take(&session, &cache, &[], t.path());
        write(&upper.join("small"), "kept?");
        // Sparse: its length counts, not its blocks.
        let big = std::fs::File::create(upper.join("big")).unwrap();
        big.set_len(KEPT_BYTES + 1).unwrap();
        drop(views);
        let (views, again) = take(&session, &cache, &[], t.path());
        assert_eq!(std::fs::read_dir(&again).unwrap().count(), 0);
        assert!(!upper.exists(), "the old view is removed");
        drop(views);
    }

    #[test]
    fn a_link_on_a_hidden_path_s_way_is_removed_never_followed() {
        let t = tempfile::tempdir().unwrap();
        let cache = t.path().join("cache");
        let victim = t.path().join("victim");
        write(&victim.join("token"), "precious");
        write(&victim.join("stored_tokens/sub/f"), "d");
        std::fs::create_dir_all(&cache).unwrap();
        let session = Arc::new(SessionViews::default());
        let (views, upper) = take(&session, &cache, &[], t.path());
        // What a command leaves in its view: the hidden paths' directory as a link.
        std::os::unix::fs::symlink(&victim, upper.join("huggingface")).unwrap();
        drop(views);
        let hidden = [
            cache.join("huggingface/token"),
            cache.join("huggingface/stored_tokens"),
        ];
        let (views, upper) = take(&session, &cache, &hidden, t.path());
        assert!(std::fs::symlink_metadata(upper.join("huggingface")).is_err());
        assert_eq!(
            std::fs::read_to_string(victim.join("token")).unwrap(),
            "precious"
        );
        assert!(victim.join("stored_tokens/sub/f").exists());
        drop(views);
    }

    #[test]
    fn an_unreadable_view_root_starts_the_next_call_from_a_new_empty_view() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let cache = t.path().join("cache");
        write(&cache.join("src/lib.rs"), "user v1");
        let session = Arc::new(SessionViews::default());
        let (views, upper) = take(&session, &cache, &[], t.path());
        write(&upper.join("src/lib.rs"), "agent old");
        std::fs::set_permissions(upper.join("src"), std::fs::Permissions::from_mode(0o000))
            .unwrap();
        std::fs::set_permissions(&upper, std::fs::Permissions::from_mode(0o000)).unwrap();
        drop(views);
        write(&cache.join("src/lib.rs"), "user v2, newer");
        let (views, now) = take(&session, &cache, &[], t.path());
        // Root reads it anyway: then the stale file must be gone by the check instead.
        assert!(
            std::fs::read_to_string(now.join("src/lib.rs")).is_err(),
            "the stale copy survived"
        );
        drop(views);
    }

    #[test]
    fn what_the_user_changed_while_the_call_ran_and_a_directory_over_a_new_file_go() {
        let t = tempfile::tempdir().unwrap();
        let cache = t.path().join("cache");
        write(&cache.join("index/serde"), "user v1");
        let session = Arc::new(SessionViews::default());
        let (views, upper) = take(&session, &cache, &[], t.path());
        write(&upper.join("index/serde"), "agent v1");
        std::fs::create_dir_all(upper.join("index/tokio/x")).unwrap();
        // The user updates while the call runs.
        std::thread::sleep(std::time::Duration::from_millis(20));
        write(&cache.join("index/serde"), "user v2");
        drop(views);
        assert!(!upper.join("index/serde").exists());
        // Between the calls the user makes a file where the view holds a directory.
        write(&cache.join("index/tokio"), "user file");
        let (views, upper) = take(&session, &cache, &[], t.path());
        assert!(!upper.join("index/tokio").exists());
        drop(views);
    }

    #[test]
    fn a_lease_that_fails_part_way_gives_back_the_views_it_took() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let session = Arc::new(SessionViews::default());
        let (held_b, _) = take(&session, &b, &[], t.path());
        // `b` is held, so its view would be a fresh one in `fresh`, which cannot be made.
        let fresh = t.path().join("not-a-dir");
        std::fs::write(&fresh, "").unwrap();
        assert!(session.lease(&[a.clone(), b.clone()], &[], &fresh).is_err());
        assert!(!busy(&session)[&a], "the view of `a` stayed taken");
        drop(held_b);
    }

    #[test]
    fn dropping_the_session_removes_its_views() {
        let t = tempfile::tempdir().unwrap();
        let cache = t.path().join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        let session = Arc::new(SessionViews::default());
        let (views, upper) = take(&session, &cache, &[], t.path());
        write(&upper.join("x/y"), "z");
        drop(views);
        assert!(upper.exists());
        drop(session);
        assert!(!upper.exists());
    }
}
