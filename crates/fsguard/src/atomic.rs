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
    let (tmp_name, tmp) =
        create_temp(dir, final_mode.is_some()).map_err(|e| io_err("create temp", e))?;
    let cleanup = |err: WriteError| {
        // Best effort: the temp name is ours (created with O_EXCL), so removing it is safe.
        let _ = rustix::fs::unlinkat(dir, tmp_name.as_str(), AtFlags::empty());
        err
    };
    let mut file = File::from(tmp);
    if let Some(m) = final_mode {
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
    };
    written.map_err(|e| cleanup(io_err("write", e)))?;
    file.sync_all().map_err(|e| cleanup(io_err("fsync", e)))?;
    drop(file);
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

/// Creates a fresh temporary file in `dir` with `O_EXCL`. Its name does not derive from the
/// target's, so a 255-byte target name still fits. `private` creates it `0600` (the caller sets
/// the final mode after); otherwise `0666` minus the umask, as any new file gets.
fn create_temp(dir: BorrowedFd<'_>, private: bool) -> io::Result<(String, OwnedFd)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mode = Mode::from_raw_mode(if private { 0o600 } else { 0o666 });
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let pid = std::process::id();
    let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(".fsguard-{pid}-{n}-{nanos:08x}.tmp");
        match rustix::fs::openat(dir, name.as_str(), flags, mode) {
            Ok(fd) => return Ok((name, fd)),
            Err(e) if e == rustix::io::Errno::EXIST => last = e.into(),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last)
}
