//! `RootLease`: a work root pinned by device and inode through an open directory fd (CMD-8).

use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use crate::relpath::{OpenError, RelPath};
use crate::sys::{self, Kind};

/// A file's identity: the device it lives on and its inode number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

impl fmt::Display for FileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dev {} ino {}", self.dev, self.ino)
    }
}

/// A directory pinned for the length of a turn (CMD-8).
///
/// Acquiring opens the directory once and remembers its (device, inode). Everything the lease
/// hands out — [`open_dir`](RootLease::open_dir), [`open_file`](RootLease::open_file), the fd
/// itself through [`AsFd`] — is resolved relative to that open fd, never by re-resolving the
/// path, so a directory swapped in later is never silently used. [`verify`](RootLease::verify)
/// tells whether the path still names the pinned directory.
///
/// ```
/// use fsguard::RootLease;
/// let dir = tempfile::tempdir().unwrap();
/// let root = dir.path().join("work");
/// std::fs::create_dir(&root).unwrap();
///
/// let lease = RootLease::acquire(&root).unwrap();
/// lease.verify().unwrap();
///
/// std::fs::rename(&root, dir.path().join("elsewhere")).unwrap();
/// std::fs::create_dir(&root).unwrap();
/// assert!(lease.verify().is_err()); // same path, different directory
/// ```
pub struct RootLease {
    path: PathBuf,
    fd: OwnedFd,
    id: FileId,
}

/// Why a lease could not be taken or no longer holds.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// The root path is not absolute.
    #[error("`{}` is not an absolute path; give the work root as an absolute path", path.display())]
    NotAbsolute {
        /// The path as given.
        path: PathBuf,
    },
    /// The path's last component is a symbolic link.
    #[error("`{}` is a symbolic link; pass the directory's real path (resolve it first)", path.display())]
    Symlink {
        /// The root path.
        path: PathBuf,
    },
    /// The path names something that is not a directory.
    #[error("`{}` is not a directory", path.display())]
    NotADirectory {
        /// The root path.
        path: PathBuf,
    },
    /// The path no longer exists (renamed away or deleted).
    #[error("the work root `{}` is gone (renamed or deleted); start a new turn on the current folder", path.display())]
    Missing {
        /// The root path.
        path: PathBuf,
    },
    /// The path now names another directory than the pinned one.
    #[error("the work root `{}` was replaced ({expected} became {found}); start a new turn on the current folder", path.display())]
    Replaced {
        /// The root path.
        path: PathBuf,
        /// The pinned identity.
        expected: FileId,
        /// What the path names now.
        found: FileId,
    },
    /// A system call failed.
    #[error("cannot check the work root `{}`: {source}", path.display())]
    Io {
        /// The root path.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
}

impl RootLease {
    /// Opens `path` (absolute, a directory, not itself a symlink) and pins its identity.
    pub fn acquire(path: impl AsRef<Path>) -> Result<RootLease, LeaseError> {
        let path = path.as_ref().to_path_buf();
        if !path.is_absolute() {
            return Err(LeaseError::NotAbsolute { path });
        }
        let opened = rustix::fs::open(
            &path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        );
        let fd = match opened {
            Ok(fd) => fd,
            Err(e) => return Err(Self::open_error(path, e.into())),
        };
        let meta = sys::fstat(&fd).map_err(|source| LeaseError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(RootLease {
            path,
            fd,
            id: FileId {
                dev: meta.dev,
                ino: meta.ino,
            },
        })
    }

    fn open_error(path: PathBuf, err: io::Error) -> LeaseError {
        use rustix::io::Errno;
        if sys::is_errno(&err, Errno::LOOP) || sys::is_errno(&err, Errno::NOTDIR) {
            return match rustix::fs::lstat(&path) {
                Ok(st)
                    if rustix::fs::FileType::from_raw_mode(st.st_mode)
                        == rustix::fs::FileType::Symlink =>
                {
                    LeaseError::Symlink { path }
                }
                _ => LeaseError::NotADirectory { path },
            };
        }
        if err.kind() == io::ErrorKind::NotFound {
            return LeaseError::Missing { path };
        }
        LeaseError::Io { path, source: err }
    }

    /// Checks that the path still names the pinned directory: not renamed away, not replaced
    /// by another directory, not replaced by a symbolic link (CMD-8). A re-resolved path is
    /// never accepted in its place.
    pub fn verify(&self) -> Result<(), LeaseError> {
        let st = match rustix::fs::lstat(&self.path) {
            Ok(st) => st,
            Err(e) if e == rustix::io::Errno::NOENT => {
                return Err(LeaseError::Missing {
                    path: self.path.clone(),
                });
            }
            Err(e) => {
                return Err(LeaseError::Io {
                    path: self.path.clone(),
                    source: e.into(),
                });
            }
        };
        let found = sys::meta_of(&st);
        if found.kind == Kind::Symlink {
            return Err(LeaseError::Symlink {
                path: self.path.clone(),
            });
        }
        let found_id = FileId {
            dev: found.dev,
            ino: found.ino,
        };
        if found.kind != Kind::Dir || found_id != self.id {
            return Err(LeaseError::Replaced {
                path: self.path.clone(),
                expected: self.id,
                found: found_id,
            });
        }
        Ok(())
    }

    /// The root path as acquired.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The pinned identity.
    pub fn id(&self) -> FileId {
        self.id
    }

    /// Opens `rel` as a directory below the pinned root (see [`RelPath::open_dir_at`]).
    pub fn open_dir(&self, rel: &RelPath) -> Result<OwnedFd, OpenError> {
        rel.open_dir_at(&self.fd)
    }

    /// Opens `rel` as a regular file below the pinned root (see [`RelPath::open_file_at`]).
    pub fn open_file(&self, rel: &RelPath) -> Result<File, OpenError> {
        rel.open_file_at(&self.fd)
    }
}

impl AsFd for RootLease {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl fmt::Debug for RootLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RootLease")
            .field("path", &self.path)
            .field("id", &self.id)
            .finish()
    }
}

/// The kernel's own name for the file `fd` opens (`/proc/self/fd/N` on Linux): what the
/// descriptor names now, resolved by the kernel, so two spellings of one directory on a
/// case-insensitive filesystem, or a path through a symbolic link, come out the same. Compare
/// these, not text a caller wrote, to tell whether one path lies inside another.
/// `None` where the kernel gives no such name (not Linux, or a file that was removed).
pub fn kernel_path(fd: BorrowedFd<'_>) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    let removed = link.as_os_str().as_encoded_bytes().ends_with(b" (deleted)");
    (link.is_absolute() && !removed).then_some(link)
}
