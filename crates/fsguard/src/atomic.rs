//! `atomic_write`: replace a directory entry, never rewrite a file in place (FILE-2).

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};

use crate::relpath::{OpenError, RelPath};
use crate::sys::{self, Kind};

/// Why [`atomic_write`] refused or failed. On every error the temporary file is removed and the
/// target is untouched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// Walking to the parent directory failed (symlink on the way, missing, denied…).
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The target exists and is not a regular file (directory, symlink, FIFO…).
    #[error("`{}` exists and is not a regular file; only regular files are replaced", path.display())]
    NotARegularFile {
        /// The target path.
        path: PathBuf,
    },
    /// The target disappeared before it could be replaced.
    #[error("`{}` no longer exists", path.display())]
    Missing {
        /// The target path.
        path: PathBuf,
    },
    /// The target exists and the write was asked to create a new file only.
    #[error("`{}` already exists", path.display())]
    AlreadyExists {
        /// The target path.
        path: PathBuf,
    },
    /// A step of the write failed.
    #[error("cannot write `{}` ({step}): {source}", path.display())]
    Io {
        /// The target path.
        path: PathBuf,
        /// Which step: `create temp`, `write`, `fsync`, `rename`, `fsync dir`…
        step: &'static str,
        /// The system's error.
        source: io::Error,
    },
}

/// What [`write_entry`] writes into the temporary file.
pub(crate) enum Contents<'a> {
    /// These bytes.
    Bytes(&'a [u8]),
    /// The rest of this file, copied by `std::io::copy` (on Linux `copy_file_range`: in the
    /// kernel, a reflink where the file system can), so a large file never sits in memory.
    CopyOf(&'a mut File),
    /// A file already staged under this name in the same directory, written, `fsync`ed and
    /// given its mode (the write-back's journaled staging): it only has to be renamed in.
    Staged(&'a str),
}

/// Whether [`write_entry`] may replace an existing entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Replace {
    /// `renameat` over an existing regular file (or create).
    Allow,
    /// `renameat2(RENAME_NOREPLACE)`: fail if anything appeared at the name.
    Never,
}

/// Writes `contents` to `path` under `root` atomically (FILE-2): a temporary file is created in
/// the same directory (`O_EXCL`, the old file's permission bits, or the umask's default for a new
/// file), written, `fsync`ed, renamed over the name with `renameat`, and the directory `fsync`ed.
///
/// The old inode is never written to, so when the target had other hard links, those names keep
/// the old content. A symlink, directory or other non-regular target is refused.
///
/// ```
/// use fsguard::{atomic_write, RelPath};
/// let dir = tempfile::tempdir().unwrap();
/// let root = std::fs::File::open(dir.path()).unwrap();
/// atomic_write(&root, &RelPath::new("notes.txt").unwrap(), b"v1").unwrap();
/// atomic_write(&root, &RelPath::new("notes.txt").unwrap(), b"v2").unwrap();
/// assert_eq!(std::fs::read(dir.path().join("notes.txt")).unwrap(), b"v2");
/// ```
pub fn atomic_write(root: impl AsFd, path: &RelPath, contents: &[u8]) -> Result<(), WriteError> {
    let (dir, name) = path.open_parent_at(root.as_fd())?;
    write_entry(
        dir.as_fd(),
        name,
        Contents::Bytes(contents),
        None,
        Replace::Allow,
        path.as_path().to_path_buf(),
    )
}

/// The temp-file-and-rename core shared by [`atomic_write`] and the mirror's write-back.
/// `mode` overrides the permission bits; `None` keeps the old file's (or the umask default).
pub(crate) fn write_entry(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    contents: Contents<'_>,
    mode: Option<u32>,
    replace: Replace,
    shown: PathBuf,
) -> Result<(), WriteError> {
    let io_err = |step: &'static str, source: io::Error| WriteError::Io {
        path: shown.clone(),
        step,
        source,
    };
    let old = match sys::stat_at(dir, name) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err("stat target", e)),
    };
    if let Some(old) = old {
        if replace == Replace::Never {
            return Err(WriteError::AlreadyExists { path: shown });
        }
        if old.kind != Kind::File {
            return Err(WriteError::NotARegularFile { path: shown });
        }
    }
    // Set-id bits are not carried over: new content is not the program that was granted them.
    let final_mode = mode.or(old.map(|m| m.mode)).map(|m| m & 0o1777);
    let tmp_name = fill_temp(dir, old.as_ref(), final_mode, contents, &io_err)?;
    let cleanup = |err: WriteError| {
        // Best effort: the temp name is ours (created with O_EXCL), so removing it is safe.
        let _ = rustix::fs::unlinkat(dir, tmp_name.as_str(), AtFlags::empty());
        err
    };
    let renamed = match replace {
        Replace::Allow => rustix::fs::renameat(dir, tmp_name.as_str(), dir, name),
        Replace::Never => {
            rustix::fs::renameat_with(dir, tmp_name.as_str(), dir, name, RenameFlags::NOREPLACE)
        }
    };
    if let Err(e) = renamed {
        let err = if e == rustix::io::Errno::EXIST {
            WriteError::AlreadyExists {
                path: shown.clone(),
            }
        } else {
            io_err("rename", e.into())
        };
        return Err(cleanup(err));
    }
    // The rename is durable only once the directory itself is on disk.
    rustix::fs::fsync(dir).map_err(|e| io_err("fsync dir", e.into()))?;
    Ok(())
}

/// Creates a temporary file in `dir` holding `contents` with `mode` (the old file's owner kept
/// where the process may), `fsync`ed; returns its name. On error nothing is left behind.
fn fill_temp(
    dir: BorrowedFd<'_>,
    old: Option<&sys::Meta>,
    mode: Option<u32>,
    contents: Contents<'_>,
    io_err: &dyn Fn(&'static str, io::Error) -> WriteError,
) -> Result<String, WriteError> {
    if let Contents::Staged(name) = contents {
        return Ok(name.to_owned());
    }
    let (tmp_name, tmp) =
        create_temp(dir, mode.is_some(), None).map_err(|e| io_err("create temp", e))?;
    let cleanup = |err: WriteError| {
        // Best effort: the temp name is ours (created with O_EXCL), so removing it is safe.
        let _ = rustix::fs::unlinkat(dir, tmp_name.as_str(), AtFlags::empty());
        err
    };
    let mut file = File::from(tmp);
    if let Some(m) = mode {
        rustix::fs::fchmod(&file, crate::sys::perm(m))
            .map_err(|e| cleanup(io_err("chmod temp", e.into())))?;
    }
    if let Some(o) = old {
        // Keep the owner when we can (running as root on a user's file); EPERM just leaves it ours.
        let _ = rustix::fs::fchown(
            &file,
            Some(rustix::fs::Uid::from_raw(o.uid)),
            Some(rustix::fs::Gid::from_raw(o.gid)),
        );
    }
    let written = match contents {
        Contents::Bytes(bytes) => file.write_all(bytes),
        Contents::CopyOf(from) => io::copy(from, &mut file).map(|_| ()),
        Contents::Staged(_) => Ok(()),
    };
    written.map_err(|e| cleanup(io_err("write", e)))?;
    file.sync_all().map_err(|e| cleanup(io_err("fsync", e)))?;
    Ok(tmp_name)
}

/// A file put in place by [`exchange_entry`].
#[derive(Debug)]
pub(crate) struct Exchanged {
    /// The name in the same directory that now holds the file that was replaced; `None` where
    /// the file system cannot exchange two names and a plain rename replaced it (the old file
    /// is gone and cannot be verified).
    pub(crate) aside: Option<String>,
    /// The new file's metadata as it went in.
    pub(crate) new: sys::Meta,
    /// The replaced file's metadata right after the exchange (whose rename moved its ctime).
    pub(crate) old: Option<sys::Meta>,
}

/// Replaces the regular file `name` in `dir` with a new one holding `contents`, keeping the
/// replaced file under a fresh name beside it instead of unlinking it: `renameat2(
/// RENAME_EXCHANGE)` swaps the two names in one step, so the caller can check what it really
/// replaced — the file it vetted, unchanged — and swap back if not. Nothing is deleted here;
/// the caller removes the set-aside file once it is satisfied (the mirror's write-back).
///
/// `mode` as for [`write_entry`]. The target must exist and be a regular file; where the file
/// system does not support exchanging names (`EINVAL`), it falls back to replacing the name
/// with `renameat` and reports no set-aside file.
pub(crate) fn exchange_entry(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    contents: Contents<'_>,
    mode: Option<u32>,
    shown: PathBuf,
) -> Result<Exchanged, WriteError> {
    let io_err = |step: &'static str, source: io::Error| WriteError::Io {
        path: shown.clone(),
        step,
        source,
    };
    let old = match sys::stat_at(dir, name) {
        Ok(m) if m.kind == Kind::File => m,
        Ok(_) => return Err(WriteError::NotARegularFile { path: shown }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(WriteError::Missing { path: shown });
        }
        Err(e) => return Err(io_err("stat target", e)),
    };
    let final_mode = mode.unwrap_or(old.mode) & 0o1777;
    let tmp_name = fill_temp(dir, Some(&old), Some(final_mode), contents, &io_err)?;
    let cleanup = |err: WriteError| {
        let _ = rustix::fs::unlinkat(dir, tmp_name.as_str(), AtFlags::empty());
        err
    };
    let new = sys::stat_at(dir, tmp_name.as_str()).map_err(|e| cleanup(io_err("stat temp", e)))?;
    let exchanged =
        rustix::fs::renameat_with(dir, tmp_name.as_str(), dir, name, RenameFlags::EXCHANGE);
    let (aside, old) = match exchanged {
        Ok(()) => {
            // The temp name now holds what was at `name`; read right away, so the caller can
            // tell a later change to it from the ctime the exchange itself set.
            let old = sys::stat_at(dir, tmp_name.as_str()).ok();
            (Some(tmp_name), old)
        }
        Err(rustix::io::Errno::INVAL) => {
            rustix::fs::renameat(dir, tmp_name.as_str(), dir, name)
                .map_err(|e| cleanup(io_err("rename", e.into())))?;
            (None, None)
        }
        Err(rustix::io::Errno::NOENT) => return Err(cleanup(WriteError::Missing { path: shown })),
        Err(e) => return Err(cleanup(io_err("exchange", e.into()))),
    };
    // The exchange is durable only once the directory itself is on disk.
    rustix::fs::fsync(dir).map_err(|e| io_err("fsync dir", e.into()))?;
    Ok(Exchanged { aside, new, old })
}

/// Stages `contents` in `dir` under `name` (created with `O_EXCL`, never over anything) with
/// `mode` and the old file's owner where the process may, `fsync`ed; returns its metadata. On
/// error nothing is left behind. The write-back's journal names the file before it exists.
pub(crate) fn stage_file(
    dir: BorrowedFd<'_>,
    name: &str,
    old: Option<&sys::Meta>,
    mode: u32,
    from: &mut File,
) -> io::Result<sys::Meta> {
    let (_, fd) = create_temp(dir, true, Some(name))?;
    let staged = (|| {
        let mut file = File::from(fd);
        rustix::fs::fchmod(&file, crate::sys::perm(mode & 0o1777))?;
        if let Some(o) = old {
            // As in `fill_temp`: EPERM just leaves the file ours.
            let _ = rustix::fs::fchown(
                &file,
                Some(rustix::fs::Uid::from_raw(o.uid)),
                Some(rustix::fs::Gid::from_raw(o.gid)),
            );
        }
        io::copy(from, &mut file)?;
        file.sync_all()?;
        sys::fstat(&file)
    })();
    if staged.is_err() {
        let _ = rustix::fs::unlinkat(dir, name, AtFlags::empty());
    }
    staged
}

/// Creates a fresh temporary file in `dir` with `O_EXCL`: named `fixed`, or else a fresh name
/// that does not derive from the target's, so a 255-byte target name still fits. `private`
/// creates it `0600` (the caller sets the final mode after); otherwise `0666` minus the umask,
/// as any new file gets.
fn create_temp(
    dir: BorrowedFd<'_>,
    private: bool,
    fixed: Option<&str>,
) -> io::Result<(String, OwnedFd)> {
    let mode = Mode::from_raw_mode(if private { 0o600 } else { 0o666 });
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    if let Some(name) = fixed {
        let fd = rustix::fs::openat(dir, name, flags, mode)?;
        return Ok((name.to_owned(), fd));
    }
    crate::temps::note(dir);
    let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
    for _ in 0..16 {
        let name = temp_name();
        match rustix::fs::openat(dir, name.as_str(), flags, mode) {
            Ok(fd) => return Ok((name, fd)),
            Err(e) if e == rustix::io::Errno::EXIST => last = e.into(),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last)
}

/// A fresh name for a temporary or set-aside file: `.fsguard-<pid>-<n>-<nanos>.tmp`, unlikely to
/// exist; callers still create or rename with `O_EXCL` / `RENAME_NOREPLACE` and retry.
fn temp_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{}{}-{n}-{nanos:08x}.tmp",
        crate::temps::TEMP_PREFIX,
        std::process::id()
    )
}

/// Renames `name` in `dir` to a fresh name beside it (never over an existing entry) and returns
/// that name with the moved entry's metadata right after the move: a deletion that can still
/// be undone until the caller has checked what it moved. `planned` is the name a write-back
/// journal chose for it; it is used as it is, once.
pub(crate) fn move_aside(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    planned: Option<&str>,
) -> io::Result<(String, sys::Meta)> {
    if planned.is_none() {
        crate::temps::note(dir);
    }
    let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
    let tries = if planned.is_some() { 1 } else { 16 };
    for _ in 0..tries {
        let aside = planned.map_or_else(temp_name, str::to_owned);
        match rustix::fs::renameat_with(dir, name, dir, aside.as_str(), RenameFlags::NOREPLACE) {
            Ok(()) => {
                let meta = sys::stat_at(dir, aside.as_str())?;
                return Ok((aside, meta));
            }
            Err(e) if e == rustix::io::Errno::EXIST => last = e.into(),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last)
}
