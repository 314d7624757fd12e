//! Race fixtures: a thread that swaps two names back and forth with `renameat2(RENAME_EXCHANGE)`
//! (a directory and a symlink to an outside directory, say) while the code under test looks
//! them up, and an inotify [`Watch`] whose silence proves that nothing outside was touched.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// What a [`Swapper`] will do, before it starts.
#[derive(Debug, Clone)]
pub struct SwapperBuilder {
    a: PathBuf,
    b: PathBuf,
    pause: Duration,
    remake: Option<PathBuf>,
}

impl SwapperBuilder {
    /// After each exchange, sleep a pseudo-random time up to `max`. Back to back, the other
    /// thread's lookups mostly meet one of the two states (or, when an attempt that meets the
    /// link ends at once, nearly always the link).
    #[must_use]
    pub fn pause_up_to(mut self, max: Duration) -> Self {
        self.pause = max;
        self
    }

    /// When `b` is gone (the code under test removed it), make it again as a symlink to
    /// `target` before the next exchange.
    #[must_use]
    pub fn remake_as_link_to(mut self, target: impl Into<PathBuf>) -> Self {
        self.remake = Some(target.into());
        self
    }

    /// Starts the thread. Paths are resolved at each exchange, so their directory may be
    /// removed and made again meanwhile.
    pub fn start(self) -> Swapper {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let count = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&count);
        let handle = std::thread::spawn(move || {
            let (mut swaps, mut seed) = (0u64, 0x9e37_79b9_7f4a_7c15_u64);
            let max = u64::try_from(self.pause.as_micros()).unwrap_or(u64::MAX);
            while !flag.load(Ordering::Relaxed) {
                let done = rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &self.a,
                    rustix::fs::CWD,
                    &self.b,
                    rustix::fs::RenameFlags::EXCHANGE,
                );
                match done {
                    Ok(()) => {
                        swaps += 1;
                        counted.store(swaps, Ordering::Relaxed);
                    }
                    Err(_) => {
                        if let Some(target) = &self.remake {
                            if std::fs::symlink_metadata(&self.b).is_err() {
                                let _ = std::os::unix::fs::symlink(target, &self.b);
                            }
                        }
                        std::thread::yield_now();
                    }
                }
                if max > 0 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    std::thread::sleep(Duration::from_micros(seed % max));
                }
            }
            swaps
        });
        Swapper {
            stop,
            count,
            handle: Some(handle),
        }
    }
}

/// A thread exchanging two names until [`stop`](Swapper::stop)ped (or dropped).
///
/// ```
/// let tree = testkit::TempTree::new("root");
/// tree.write("sub/f", "inside");
/// std::os::unix::fs::symlink(tree.outside_dir(), tree.root.join("swap")).unwrap();
/// let swapper = testkit::Swapper::new(tree.root.join("sub"), tree.root.join("swap")).start();
/// std::thread::sleep(std::time::Duration::from_millis(5));
/// assert!(swapper.stop() > 0);
/// ```
#[derive(Debug)]
pub struct Swapper {
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU64>,
    handle: Option<JoinHandle<u64>>,
}

impl Swapper {
    /// A swapper of `a` and `b`, as fast as it can until configured otherwise.
    #[allow(clippy::new_ret_no_self)] // a builder: the thread starts in `start`
    pub fn new(a: impl Into<PathBuf>, b: impl Into<PathBuf>) -> SwapperBuilder {
        SwapperBuilder {
            a: a.into(),
            b: b.into(),
            pause: Duration::ZERO,
            remake: None,
        }
    }

    /// How many exchanges it made so far (a race test on a loaded machine goes on until the
    /// thread got to run at all).
    pub fn swaps(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Stops the thread; returns how many exchanges it made.
    pub fn stop(mut self) -> u64 {
        self.halt()
    }

    fn halt(&mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().map_or(0, |h| h.join().unwrap())
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Every inotify event on some directories and files from now on: an empty list proves that
/// nothing opened, listed, read, wrote, created, removed or chmod-ed them (a file watched
/// itself counts a read through another name of it, a hard link, too).
#[derive(Debug)]
pub struct Watch {
    fd: std::os::fd::OwnedFd,
}

impl Watch {
    /// Watches each of `paths` (not what lies below a directory).
    pub fn paths(paths: &[PathBuf]) -> Watch {
        let watch = Watch::empty();
        for p in paths {
            watch.add(p);
        }
        watch
    }

    /// Watches `root` and every directory below it.
    pub fn tree(root: &Path) -> Watch {
        let watch = Watch::empty();
        let mut dirs = vec![root.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            watch.add(&dir);
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                if e.file_type().unwrap().is_dir() {
                    dirs.push(e.path());
                }
            }
        }
        // Listing the directories above was itself seen by their watches: start clean.
        watch.events();
        watch
    }

    fn empty() -> Watch {
        use rustix::fs::inotify;
        Watch {
            fd: inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
                .unwrap(),
        }
    }

    fn add(&self, path: &Path) {
        use rustix::fs::inotify;
        inotify::add_watch(&self.fd, path, inotify::WatchFlags::ALL_EVENTS).unwrap();
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
