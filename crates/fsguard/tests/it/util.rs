//! Fixture helpers: a unique temp dir with a tree built from one-line specs, and a listing of
//! it for failure messages.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A temporary directory that lists its contents when a test fails with it in hand.
pub struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture {
            dir: tempfile::Builder::new()
                .prefix("fsguard-it-")
                .tempdir()
                .unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn join(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Creates `rel`: a directory if it ends with `/`, else a file with `contents`.
    pub fn put(&self, rel: &str, contents: &str) -> PathBuf {
        let p = self.join(rel.trim_end_matches('/'));
        if rel.ends_with('/') {
            fs::create_dir_all(&p).unwrap();
        } else {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, contents).unwrap();
        }
        p
    }

    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.join(rel)).unwrap()
    }

    pub fn chmod(&self, rel: &str, mode: u32) {
        fs::set_permissions(self.join(rel), fs::Permissions::from_mode(mode)).unwrap();
    }

    pub fn mode(&self, rel: &str) -> u32 {
        fs::symlink_metadata(self.join(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    pub fn root_fd(&self) -> fs::File {
        fs::File::open(self.path()).unwrap()
    }

    /// Waits until the file system's clock has moved past the ctime of every entry in the
    /// fixture, so that any later change to one of them gets a later ctime: the promise a zero
    /// racy window rests on (see `MirrorOptions::racy_window`). Reads the clock as the ctime
    /// of a probe file outside `src/` that is chmod-ed to its own mode.
    pub fn settle_clock(&self) {
        use std::os::unix::fs::MetadataExt;
        fn latest(p: &Path, max: &mut (i64, i64)) {
            let m = fs::symlink_metadata(p).unwrap();
            *max = (*max).max((m.ctime(), m.ctime_nsec()));
            if m.is_dir() {
                for e in fs::read_dir(p).unwrap() {
                    latest(&e.unwrap().path(), max);
                }
            }
        }
        let mut max = (i64::MIN, 0);
        latest(self.path(), &mut max);
        let probe = self.join(".clock");
        fs::write(&probe, "").unwrap();
        for _ in 0..5000 {
            fs::set_permissions(&probe, fs::Permissions::from_mode(0o644)).unwrap();
            let m = fs::metadata(&probe).unwrap();
            if (m.ctime(), m.ctime_nsec()) > max {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("the file system's clock did not move past {max:?} in 5 s");
    }

    /// Every entry below the root, relative, sorted; for assertions and failure messages.
    pub fn listing(&self) -> Vec<String> {
        listing(self.path())
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // Tests chmod directories to 000; give them back so TempDir can delete the tree.
        restore_perms(self.dir.path());
        if std::thread::panicking() {
            eprintln!(
                "fixture {}:\n  {}",
                self.path().display(),
                self.listing().join("\n  ")
            );
        }
    }
}

fn restore_perms(p: &Path) {
    if let Ok(meta) = fs::symlink_metadata(p) {
        if meta.is_dir() {
            let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o755));
            if let Ok(rd) = fs::read_dir(p) {
                for e in rd.flatten() {
                    restore_perms(&e.path());
                }
            }
        }
    }
}

pub fn listing(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                out.push(format!("{rel}/"));
                stack.push(p);
            } else if ft.is_symlink() {
                out.push(format!("{rel} -> {}", fs::read_link(&p).unwrap().display()));
            } else {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Every inotify event on a directory and its entries from now on: an empty list proves that
/// nothing opened, listed, read, wrote, created, removed or chmod-ed anything there.
pub struct Watch {
    fd: std::os::fd::OwnedFd,
}

impl Watch {
    /// Watches `root` and every directory below it.
    pub fn new(root: &Path) -> Watch {
        use rustix::fs::inotify;
        let fd =
            inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).unwrap();
        let mut dirs = vec![root.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            inotify::add_watch(&fd, &dir, inotify::WatchFlags::ALL_EVENTS).unwrap();
            for e in fs::read_dir(&dir).unwrap().flatten() {
                if e.file_type().unwrap().is_dir() {
                    dirs.push(e.path());
                }
            }
        }
        // Reading the directories above was itself seen by their watches: start clean.
        let watch = Watch { fd };
        watch.events();
        watch
    }

    /// Fails with the first few events, if there were any.
    pub fn assert_none(&self, context: &str) {
        let events = self.events();
        assert!(
            events.is_empty(),
            "{context}: {} events outside, first: {:?}",
            events.len(),
            &events[..events.len().min(8)]
        );
    }

    /// The events since the last call, as `"<flags> <name>"`.
    pub fn events(&self) -> Vec<String> {
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
        let mut reader = rustix::fs::inotify::Reader::new(&self.fd, &mut buf);
        let mut out = Vec::new();
        loop {
            match reader.next() {
                Ok(e) => out.push(format!("{:?} {:?}", e.events(), e.file_name())),
                Err(rustix::io::Errno::AGAIN) => return out,
                Err(e) => panic!("inotify read: {e}"),
            }
        }
    }
}

/// A thread that swaps two entries of a directory back and forth with
/// `renameat2(RENAME_EXCHANGE)` as fast as it can — a directory and a symlink to an outside
/// directory, say — until stopped. When the exchange fails because `b` is gone (the code under
/// test removed it), `b` is made again as a symlink to `target`. Paths are resolved at each
/// exchange, so the directory may be removed and made again under it.
pub struct Swapper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<u64>>,
}

impl Swapper {
    pub fn start(dir: &Path, a: &str, b: &str, target: &Path) -> Swapper {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (a, b, target) = (dir.join(a), dir.join(b), target.to_path_buf());
        let flag = std::sync::Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !flag.load(Ordering::Relaxed) {
                let done = rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &a,
                    rustix::fs::CWD,
                    &b,
                    rustix::fs::RenameFlags::EXCHANGE,
                );
                match done {
                    Ok(()) => swaps += 1,
                    Err(_) => {
                        if fs::symlink_metadata(&b).is_err() {
                            let _ = std::os::unix::fs::symlink(&target, &b);
                        }
                        std::thread::yield_now();
                    }
                }
            }
            swaps
        });
        Swapper {
            stop,
            handle: Some(handle),
        }
    }

    /// Stops the thread; returns how many exchanges it made.
    pub fn stop(mut self) -> u64 {
        self.halt()
    }

    fn halt(&mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle.take().map_or(0, |h| h.join().unwrap())
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.halt();
    }
}
