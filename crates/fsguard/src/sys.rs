//! The few `*at` system calls the crate is built on, with the flags fixed in one place.
//!
//! Every open here carries `O_NOFOLLOW | O_CLOEXEC`: a symbolic link is never followed (RUN-4)
//! and no descriptor leaks into a child a sibling thread spawns.

use std::ffi::{CStr, OsStr};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// A file's type as the crate cares about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

impl Kind {
    fn from_file_type(t: FileType) -> Option<Kind> {
        match t {
            FileType::RegularFile => Some(Kind::File),
            FileType::Directory => Some(Kind::Dir),
            FileType::Symlink => Some(Kind::Symlink),
            FileType::Unknown => None,
            _ => Some(Kind::Other),
        }
    }
}

/// The fields of `struct stat` the crate reads, widened to one type on every architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) kind: Kind,
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) nlink: u64,
    /// Permission bits only (`0o7777`).
    pub(crate) mode: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) size: u64,
    pub(crate) mtime: (i64, u32),
    pub(crate) ctime: (i64, u32),
}

/// Permission bits as rustix takes them: `mode_t` is `u32` on Linux but `u16` on macOS, and
/// our metadata keeps `u32` everywhere.
pub(crate) fn perm(bits: u32) -> rustix::fs::Mode {
    rustix::fs::Mode::from_raw_mode((bits & 0o7777) as _)
}

// The field types of `struct stat` differ between architectures (`st_nlink` is u32 on aarch64,
// u64 on x86_64); the casts widen losslessly on every 64-bit target and are no-ops on some.
#[allow(
    clippy::unnecessary_cast,
    clippy::cast_sign_loss,
    clippy::cast_possible_truncation
)]
pub(crate) fn meta_of(st: &rustix::fs::Stat) -> Meta {
    let raw_mode = st.st_mode as u32;
    Meta {
        kind: Kind::from_file_type(FileType::from_raw_mode(raw_mode as _)).unwrap_or(Kind::Other),
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
        nlink: st.st_nlink as u64,
        mode: raw_mode & 0o7777,
        uid: st.st_uid as u32,
        gid: st.st_gid as u32,
        size: if st.st_size < 0 { 0 } else { st.st_size as u64 },
        mtime: (st.st_mtime as i64, st.st_mtime_nsec as u32),
        ctime: (st.st_ctime as i64, st.st_ctime_nsec as u32),
    }
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`.
pub(crate) fn stat_at<P: rustix::path::Arg>(dir: BorrowedFd<'_>, name: P) -> io::Result<Meta> {
    Ok(meta_of(&rustix::fs::statat(
        dir,
        name,
        AtFlags::SYMLINK_NOFOLLOW,
    )?))
}

/// The metadata of `name` in `dir` (never following a symlink), for a walk that decides
/// "unchanged" without opening the file: `statx` with `AT_STATX_FORCE_SYNC`, which makes a
/// network file system (NFS, SMB, FUSE) fetch the attributes from the server instead of its
/// cache — what the `open` of close-to-open consistency does for a file that is opened — and
/// is a no-op on a local one. Elsewhere `fstatat(AT_SYMLINK_NOFOLLOW)`.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn stat_fresh(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Meta> {
    use rustix::fs::StatxFlags;
    let stx = rustix::fs::statx(
        dir,
        name,
        AtFlags::SYMLINK_NOFOLLOW | AtFlags::STATX_FORCE_SYNC,
        StatxFlags::BASIC_STATS,
    )?;
    // Every field compared below must be there: a file system that leaves one out is asked
    // again the ordinary way rather than trusted with a zero.
    let needed = StatxFlags::TYPE
        | StatxFlags::MODE
        | StatxFlags::NLINK
        | StatxFlags::INO
        | StatxFlags::SIZE
        | StatxFlags::MTIME
        | StatxFlags::CTIME;
    if stx.stx_mask & needed.bits() != needed.bits() {
        return stat_at(dir, name);
    }
    let raw_mode = u32::from(stx.stx_mode);
    let time = |t: rustix::fs::StatxTimestamp| (t.tv_sec, t.tv_nsec);
    Ok(Meta {
        kind: Kind::from_file_type(FileType::from_raw_mode(raw_mode as _)).unwrap_or(Kind::Other),
        dev: rustix::fs::makedev(stx.stx_dev_major, stx.stx_dev_minor),
        ino: stx.stx_ino,
        nlink: u64::from(stx.stx_nlink),
        mode: raw_mode & 0o7777,
        uid: stx.stx_uid,
        gid: stx.stx_gid,
        size: stx.stx_size,
        mtime: time(stx.stx_mtime),
        ctime: time(stx.stx_ctime),
    })
}

/// Portable fallback: `fstatat(AT_SYMLINK_NOFOLLOW)`.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn stat_fresh(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Meta> {
    stat_at(dir, name)
}

/// `fstat(fd)`.
pub(crate) fn fstat(fd: impl AsFd) -> io::Result<Meta> {
    Ok(meta_of(&rustix::fs::fstat(fd)?))
}

/// Opens the directory `name` inside `dir` for reading its entries; refuses a symlink.
pub(crate) fn open_dir_child<P: rustix::path::Arg>(
    dir: BorrowedFd<'_>,
    name: P,
) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Opens the directory `name` inside `dir` only to walk through it: `O_PATH` on Linux needs
/// search (`x`) permission alone, exactly like the kernel's own path walk.
pub(crate) fn open_dir_walk(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(dir, name, flags, Mode::empty())?)
}

/// Opens `name` inside `dir` for reading without following a symlink and without blocking on
/// a FIFO or claiming a terminal; the caller checks the type on the returned descriptor.
pub(crate) fn open_file_child<P: rustix::path::Arg>(
    dir: BorrowedFd<'_>,
    name: P,
) -> io::Result<OwnedFd> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    Ok(fd)
}

/// Sets the mode of the directory `name` inside `dir` without following a symbolic link: a
/// symlink swapped in at `name` is refused, never chmod-ed through. `fchmodat` cannot do it on
/// Linux (its `AT_SYMLINK_NOFOLLOW` needs `fchmodat2`, Linux 6.6), so the directory is opened
/// `O_NOFOLLOW | O_DIRECTORY` and changed with `fchmod` on that descriptor. A directory its
/// owner may not read (a mode a failed turn left) is opened `O_PATH` instead, which needs no
/// permission on it, and changed through its `/proc/self/fd` entry: that magic link names the
/// opened inode itself, not a path that could be re-resolved.
pub(crate) fn chmod_dir_child(dir: BorrowedFd<'_>, name: &OsStr, mode: Mode) -> io::Result<()> {
    match open_dir_child(dir, name) {
        Ok(fd) => Ok(rustix::fs::fchmod(&fd, mode)?),
        #[cfg(any(target_os = "linux", target_os = "android"))]
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            use std::os::fd::AsRawFd;
            let fd = open_dir_walk(dir, name)?;
            let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
            Ok(rustix::fs::chmod(path.as_str(), mode)?)
        }
        // Elsewhere (macOS) `fchmodat` honours `AT_SYMLINK_NOFOLLOW`.
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Ok(rustix::fs::chmodat(
            dir,
            name,
            mode,
            AtFlags::SYMLINK_NOFOLLOW,
        )?),
        Err(e) => Err(e),
    }
}

/// Clears `O_NONBLOCK` once the descriptor is known to be a regular file.
pub(crate) fn set_blocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    let flags = rustix::fs::fcntl_getfl(fd)?;
    rustix::fs::fcntl_setfl(fd, flags - OFlags::NONBLOCK)?;
    Ok(())
}

/// Re-opens `dir` itself (`"."`) for reading, so a walk that starts at the root has an fd it owns.
pub(crate) fn reopen_dir(dir: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    open_dir_child(dir, c".")
}

/// Calls `f(name, kind)` for every entry of the directory `fd` except `.` and `..`.
///
/// `kind` is `None` when the file system does not fill `d_type` (`DT_UNKNOWN`); the caller then
/// has to `stat`. `buf` is reused across calls so a walk allocates once per thread.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn for_each_entry(
    fd: BorrowedFd<'_>,
    buf: &mut Vec<u8>,
    mut f: impl FnMut(&CStr, Option<Kind>) -> io::Result<()>,
) -> io::Result<()> {
    const BUF_BYTES: usize = 32 * 1024;
    if buf.capacity() < BUF_BYTES {
        buf.reserve(BUF_BYTES);
    }
    let mut dir = rustix::fs::RawDir::new(fd, buf.spare_capacity_mut());
    while let Some(entry) = dir.next() {
        let entry = entry?;
        let name = entry.file_name();
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        f(name, Kind::from_file_type(entry.file_type()))?;
    }
    Ok(())
}

/// Portable fallback of the Linux `getdents64` loop above.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn for_each_entry(
    fd: BorrowedFd<'_>,
    _buf: &mut Vec<u8>,
    mut f: impl FnMut(&CStr, Option<Kind>) -> io::Result<()>,
) -> io::Result<()> {
    let mut dir = rustix::fs::Dir::read_from(fd)?;
    while let Some(entry) = dir.read() {
        let entry = entry?;
        let name = entry.file_name();
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        f(name, Kind::from_file_type(entry.file_type()))?;
    }
    Ok(())
}

/// An identifier of the mount a directory lives on: the mount id where `statx` reports one
/// (so a bind mount of the same file system still counts as a mount point), else `st_dev`.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn mount_id(fd: BorrowedFd<'_>, dev: u64) -> u64 {
    use rustix::fs::StatxFlags;
    match rustix::fs::statx(fd, c"", AtFlags::EMPTY_PATH, StatxFlags::MNT_ID) {
        Ok(stx) if stx.stx_mask & StatxFlags::MNT_ID.bits() != 0 => stx.stx_mnt_id,
        _ => dev,
    }
}

/// Portable fallback: the device number.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn mount_id(_fd: BorrowedFd<'_>, dev: u64) -> u64 {
    dev
}

/// Converts a rustix errno into `std::io::Error` for callers that speak std.
pub(crate) fn is_errno(err: &io::Error, errno: rustix::io::Errno) -> bool {
    err.raw_os_error() == Some(errno.raw_os_error())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The walks compare `stat_fresh` results with records taken by `fstat`: every field,
    /// the device number's encoding included, must come out the same.
    #[test]
    fn stat_fresh_reads_what_fstatat_reads() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("f"), "x").unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        std::os::unix::fs::symlink("f", tmp.path().join("l")).unwrap();
        let dir = std::fs::File::open(tmp.path()).unwrap();
        for name in ["f", "d", "l"] {
            let name = OsStr::new(name);
            assert_eq!(
                stat_fresh(dir.as_fd(), name).unwrap(),
                stat_at(dir.as_fd(), name).unwrap(),
                "{name:?}"
            );
        }
        assert_eq!(
            stat_fresh(dir.as_fd(), OsStr::new("missing"))
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
    }
}
