//! `scan_hard_links`: every regular file with more than one link under some roots (CMD-9).
//!
//! A parallel walk on the crate's worker pool (`pool.rs`): worker threads share one stack of
//! directories still to read; each reads a
//! directory with `getdents64` through its own fd and `fstatat`s entries relative to it, so no
//! path is ever re-resolved from the root and no symlink is followed. `d_type` lets directories,
//! symlinks and special files go by without a `stat`; only regular files (whose link count is
//! the point) and `DT_UNKNOWN` entries are `stat`ed. A directory that cannot be read makes the
//! whole scan fail, listing every such directory: an incomplete scan is never reported clean.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};

use crate::lease::{FileId, RootLease};
use crate::sys::{self, Kind, Meta};

/// How [`scan_hard_links`] walks. Build with [`ScanOptions::new`] and the setters.
///
/// ```
/// let options = fsguard::ScanOptions::new().cross_mounts(true).threads(4);
/// # let _ = options;
/// ```
#[derive(Clone, Debug, Default)]
pub struct ScanOptions {
    cross_mounts: bool,
    threads: usize,
}

impl ScanOptions {
    /// Defaults: stay on each root's mount, one thread per available CPU.
    pub fn new() -> ScanOptions {
        ScanOptions::default()
    }

    /// Whether to descend into directories that are mount points below a root. Off by default;
    /// the skipped mount points are listed in [`ScanReport::skipped_mounts`] so a caller can
    /// refuse them instead of trusting them.
    pub fn cross_mounts(mut self, yes: bool) -> ScanOptions {
        self.cross_mounts = yes;
        self
    }

    /// Number of worker threads; `0` (the default) means one per core, at most eight (the
    /// mirror's walks' count), started only once the walk outgrows the caller's first jobs.
    pub fn threads(mut self, n: usize) -> ScanOptions {
        self.threads = n;
        self
    }
}

/// A regular file with more than one link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HardLink {
    /// The root as given, joined with the path below it.
    pub path: PathBuf,
    /// Its link count when it was seen.
    pub links: u64,
    /// Its identity, so several names of the same file can be grouped.
    pub id: FileId,
}

/// What a complete scan found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScanReport {
    /// Every regular file with link count > 1, sorted by path.
    pub links: Vec<HardLink>,
    /// Mount points below a root that were not entered (empty with `cross_mounts(true)`).
    pub skipped_mounts: Vec<PathBuf>,
}

/// One directory that could not be read.
#[derive(Debug)]
pub struct ScanFailure {
    /// The directory.
    pub path: PathBuf,
    /// The system's error.
    pub source: io::Error,
}

/// Why a scan produced no report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScanError {
    /// A root is missing, not a directory, or a symbolic link.
    #[error("scan root `{}` {problem}; give an existing directory (not a symbolic link)", path.display())]
    BadRoot {
        /// The root as given.
        path: PathBuf,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A root could not be opened for another reason.
    #[error("cannot open scan root `{}`: {source}", path.display())]
    RootIo {
        /// The root as given.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
    /// Some directories could not be read, so the scan is incomplete and fails closed.
    #[error("the hard-link scan is incomplete, {} could not be read: {}; make them readable or leave them out of the scope", plural(failures.len()), list(failures))]
    Incomplete {
        /// Every directory that could not be read, sorted by path.
        failures: Vec<ScanFailure>,
    },
}

fn plural(n: usize) -> String {
    if n == 1 {
        "1 directory".to_owned()
    } else {
        format!("{n} directories")
    }
}

fn list(failures: &[ScanFailure]) -> String {
    const SHOWN: usize = 10;
    let mut out: Vec<String> = failures
        .iter()
        .take(SHOWN)
        .map(|f| format!("`{}` ({})", f.path.display(), f.source))
        .collect();
    if failures.len() > SHOWN {
        out.push(format!("and {} more", failures.len() - SHOWN));
    }
    out.join(", ")
}

/// Finds every regular file with link count > 1 under `roots` (CMD-9), never following a
/// symbolic link and, unless [`ScanOptions::cross_mounts`], not entering other mounts.
///
/// Files that vanish while the scan runs are not reported (they no longer have any name there);
/// a directory that cannot be read fails the scan with [`ScanError::Incomplete`].
///
/// ```
/// use fsguard::{scan_hard_links, ScanOptions};
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::create_dir(dir.path().join("sub")).unwrap();
/// std::fs::write(dir.path().join("sub/a"), "x").unwrap();
/// std::fs::hard_link(dir.path().join("sub/a"), dir.path().join("b")).unwrap();
///
/// let report = scan_hard_links(&[dir.path()], &ScanOptions::new()).unwrap();
/// let paths: Vec<_> = report.links.iter().map(|l| l.path.clone()).collect();
/// assert_eq!(paths, [dir.path().join("b"), dir.path().join("sub/a")]);
/// ```
pub fn scan_hard_links<P: AsRef<Path>>(
    roots: &[P],
    options: &ScanOptions,
) -> Result<ScanReport, ScanError> {
    let mut opened = Vec::with_capacity(roots.len());
    for root in roots {
        let path = root.as_ref();
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| root_error(path, e))?;
        opened.push((fd, path.to_path_buf()));
    }
    scan_fds(opened, options)
}

/// [`scan_hard_links`] over a pinned root: the walk starts from the lease's own fd, so a
/// directory swapped in at the same path is not what gets scanned (CMD-8, CMD-9).
pub fn scan_hard_links_in(
    lease: &RootLease,
    options: &ScanOptions,
) -> Result<ScanReport, ScanError> {
    let fd = sys::reopen_dir(lease.as_fd()).map_err(|source| ScanError::RootIo {
        path: lease.path().to_path_buf(),
        source,
    })?;
    scan_fds(vec![(fd, lease.path().to_path_buf())], options)
}

fn root_error(path: &Path, e: rustix::io::Errno) -> ScanError {
    use rustix::io::Errno;
    let problem = match e {
        Errno::NOENT => "does not exist",
        // `O_DIRECTORY | O_NOFOLLOW` on a symlink says ENOTDIR (or ELOOP): look to word it.
        Errno::NOTDIR | Errno::LOOP => match rustix::fs::lstat(path) {
            Ok(st)
                if rustix::fs::FileType::from_raw_mode(st.st_mode)
                    == rustix::fs::FileType::Symlink =>
            {
                "is a symbolic link"
            }
            _ => "is not a directory",
        },
        Errno::ACCESS => {
            return ScanError::Incomplete {
                failures: vec![ScanFailure {
                    path: path.to_path_buf(),
                    source: e.into(),
                }],
            };
        }
        _ => {
            return ScanError::RootIo {
                path: path.to_path_buf(),
                source: e.into(),
            };
        }
    };
    ScanError::BadRoot {
        path: path.to_path_buf(),
        problem,
    }
}

/// A directory waiting to be read.
struct Job {
    source: Source,
    path: PathBuf,
    /// The mount the directory must be on (the root's), when mounts are not crossed.
    mount: u64,
}

enum Source {
    /// A root, already open.
    Open(OwnedFd),
    /// A child of a directory still held open by its siblings' jobs; opened when taken, so
    /// the number of open fds stays near the walk's depth, not its width.
    Child(Arc<OwnedFd>),
}

/// What every worker reads.
struct Shared {
    cross_mounts: bool,
}

#[derive(Default)]
struct Found {
    links: Vec<HardLink>,
    failures: Vec<ScanFailure>,
    skipped_mounts: Vec<PathBuf>,
}

fn scan_fds(
    roots: Vec<(OwnedFd, PathBuf)>,
    options: &ScanOptions,
) -> Result<ScanReport, ScanError> {
    let mut jobs = Vec::with_capacity(roots.len());
    for (fd, path) in roots {
        let meta = sys::fstat(&fd).map_err(|source| ScanError::RootIo {
            path: path.clone(),
            source,
        })?;
        let mount = sys::mount_id(fd.as_fd(), meta.dev);
        jobs.push(Job {
            source: Source::Open(fd),
            path,
            mount,
        });
    }
    let threads = match options.threads {
        0 => crate::mirror::walk_threads(),
        n => n,
    };
    let shared = Shared {
        cross_mounts: options.cross_mounts,
    };
    let parts = crate::pool::run(threads, jobs, |job, children, local: &mut Local| {
        read_dir(&shared, job, &mut local.buf, children, &mut local.found);
        Ok::<(), std::convert::Infallible>(())
    });
    let mut found = Found::default();
    for part in parts.unwrap_or_else(|never| match never {}) {
        found.links.extend(part.found.links);
        found.failures.extend(part.found.failures);
        found.skipped_mounts.extend(part.found.skipped_mounts);
    }
    if !found.failures.is_empty() {
        found.failures.sort_by(|a, b| a.path.cmp(&b.path));
        return Err(ScanError::Incomplete {
            failures: found.failures,
        });
    }
    found.links.sort_by(|a, b| a.path.cmp(&b.path));
    // Overlapping roots see the same file twice.
    found.links.dedup_by(|a, b| a.path == b.path);
    found.skipped_mounts.sort();
    Ok(ScanReport {
        links: found.links,
        skipped_mounts: found.skipped_mounts,
    })
}

/// One worker's own: what it found and its directory-reading buffer.
#[derive(Default)]
struct Local {
    found: Found,
    buf: Vec<u8>,
}

fn read_dir(
    shared: &Shared,
    job: Job,
    buf: &mut Vec<u8>,
    children: &mut Vec<Job>,
    found: &mut Found,
) {
    let Job {
        source,
        path,
        mount,
    } = job;
    let fd = match source {
        Source::Open(fd) => fd,
        Source::Child(parent) => {
            let name = path.file_name().unwrap_or_default();
            match sys::open_dir_child(parent.as_fd(), name) {
                Ok(fd) => fd,
                Err(e) => return vanished_or_failed(e, parent.as_fd(), path, found),
            }
        }
    };
    if !shared.cross_mounts {
        let dev = match sys::fstat(&fd) {
            Ok(m) => m.dev,
            Err(source) => {
                found.failures.push(ScanFailure { path, source });
                return;
            }
        };
        if sys::mount_id(fd.as_fd(), dev) != mount {
            found.skipped_mounts.push(path);
            return;
        }
    }
    let fd = Arc::new(fd);
    let dir = fd.as_fd();
    let mut failed: Option<io::Error> = None;
    let listed = sys::for_each_entry(dir, buf, |name, kind| {
        match kind {
            Some(Kind::Dir) => children.push(Job {
                source: Source::Child(Arc::clone(&fd)),
                path: path.join(std::ffi::OsStr::from_bytes(name.to_bytes())),
                mount,
            }),
            Some(Kind::File) | None => match sys::stat_at(dir, name) {
                Ok(meta) => on_stat(&fd, &path, mount, name, meta, children, found),
                // Removed since it was listed: it has no name here any more.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    failed.get_or_insert(e);
                }
            },
            Some(Kind::Symlink | Kind::Other) => {}
        }
        Ok(())
    });
    match listed {
        // The directory was removed while being listed: nothing in it has a name any more.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            failed.get_or_insert(e);
        }
        Ok(()) => {}
    }
    if let Some(source) = failed {
        found.failures.push(ScanFailure { path, source });
    }
}

fn on_stat(
    fd: &Arc<OwnedFd>,
    dir_path: &Path,
    mount: u64,
    name: &CStr,
    meta: Meta,
    children: &mut Vec<Job>,
    found: &mut Found,
) {
    let path = || dir_path.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
    match meta.kind {
        Kind::File if meta.nlink > 1 => found.links.push(HardLink {
            path: path(),
            links: meta.nlink,
            id: FileId {
                dev: meta.dev,
                ino: meta.ino,
            },
        }),
        // `DT_UNKNOWN` (or replaced since listing) turned out to be a directory.
        Kind::Dir => children.push(Job {
            source: Source::Child(Arc::clone(fd)),
            path: path(),
            mount,
        }),
        _ => {}
    }
}

/// A directory that could not be opened: gone (not an error), turned into a symlink or file
/// since it was listed (looked at again without following), or unreadable (a failure).
fn vanished_or_failed(e: io::Error, parent: BorrowedFd<'_>, path: PathBuf, found: &mut Found) {
    use rustix::io::Errno;
    if e.kind() == io::ErrorKind::NotFound {
        return;
    }
    if sys::is_errno(&e, Errno::LOOP) || sys::is_errno(&e, Errno::NOTDIR) {
        // Replaced by a symlink (never followed) or by a file, which may be a hard link.
        let name = path.file_name().unwrap_or_default();
        if let Ok(meta) = sys::stat_at(parent, name) {
            if meta.kind == Kind::File && meta.nlink > 1 {
                found.links.push(HardLink {
                    path,
                    links: meta.nlink,
                    id: FileId {
                        dev: meta.dev,
                        ino: meta.ino,
                    },
                });
            }
        }
        return;
    }
    found.failures.push(ScanFailure { path, source: e });
}
