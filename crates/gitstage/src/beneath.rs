//! Directories held by descriptor, and paths beneath them walked one component at a time,
//! following no symbolic link: what the server reads and writes after a call lands in the
//! directory it found, even while another process of the session (a background task, in a
//! mount namespace of its own) swaps a parent directory for a link.
//!
//! A root is opened as the caller named it (the user chose it, links and all); below it, a
//! link anywhere on the way is an error (`ELOOP`, `ENOTDIR`), never followed.

use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

const DIR_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC)
    .union(OFlags::RDONLY);

/// The directory `rel` (relative, plain components only) beneath `at`, no link followed.
pub(crate) fn open_dir(at: BorrowedFd<'_>, rel: &Path) -> rustix::io::Result<OwnedFd> {
    let mut fd = rustix::fs::openat(at, ".", DIR_FLAGS, Mode::empty())?;
    for part in rel.components() {
        match part {
            Component::Normal(name) => {
                fd = rustix::fs::openat(&fd, name, DIR_FLAGS, Mode::empty())?
            }
            Component::CurDir => {}
            _ => return Err(Errno::INVAL),
        }
    }
    Ok(fd)
}

/// The root of `roots` that `path` lies in, the outermost one (a root inside another lies in a
/// directory the command could write), and `path` relative to it.
fn split_at_root<'p>(roots: &[PathBuf], path: &'p Path) -> Option<(PathBuf, &'p Path)> {
    roots
        .iter()
        .filter(|r| path.starts_with(r))
        .min_by_key(|r| r.components().count())
        .and_then(|r| Some((r.clone(), path.strip_prefix(r).ok()?)))
}

/// The directory `path`, opened from the root of `roots` it lies in without following a link
/// below that root. `ENOENT` when it lies in no root.
pub(crate) fn open_dir_in(roots: &[PathBuf], path: &Path) -> rustix::io::Result<OwnedFd> {
    let (root, rel) = split_at_root(roots, path).ok_or(Errno::NOENT)?;
    let root = rustix::fs::open(&root, OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    open_dir(root.as_fd(), rel)
}

/// The parent directory of `path` (opened as [`open_dir_in`] opens one) and `path`'s last
/// name.
pub(crate) fn open_parent_in<'p>(
    roots: &[PathBuf],
    path: &'p Path,
) -> rustix::io::Result<(OwnedFd, &'p OsStr)> {
    let name = path.file_name().ok_or(Errno::INVAL)?;
    let parent = path.parent().ok_or(Errno::INVAL)?;
    Ok((open_dir_in(roots, parent)?, name))
}

/// The device and inode of `path` as found from its root, no link followed below it (the
/// last component may be a file or a directory, never a link).
pub(crate) fn identity_in(roots: &[PathBuf], path: &Path) -> rustix::io::Result<(u64, u64)> {
    let (parent, name) = open_parent_in(roots, path)?;
    let stat = rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink {
        return Err(Errno::LOOP);
    }
    Ok(id_of(&stat))
}

/// A file's device and inode, in the width every platform's fits (`st_dev` is an `i32` on
/// macOS: compared, never used as a number).
#[allow(
    clippy::cast_sign_loss,
    clippy::useless_conversion,
    clippy::unnecessary_cast
)]
pub(crate) fn id_of(stat: &rustix::fs::Stat) -> (u64, u64) {
    (stat.st_dev as u64, stat.st_ino as u64)
}

/// `rel`'s parent directory beneath `at` and its last name.
pub(crate) fn parent_of<'r>(
    at: BorrowedFd<'_>,
    rel: &'r Path,
) -> rustix::io::Result<(OwnedFd, &'r OsStr)> {
    let name = rel.file_name().ok_or(Errno::INVAL)?;
    let parent = rel.parent().unwrap_or(Path::new(""));
    Ok((open_dir(at, parent)?, name))
}

/// The metadata of `rel` beneath `at`, no link followed on the way or at the end.
pub(crate) fn stat(at: BorrowedFd<'_>, rel: &Path) -> Option<rustix::fs::Stat> {
    let (parent, name) = parent_of(at, rel).ok()?;
    rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW).ok()
}

/// The regular file `rel` beneath `at` opened for reading, no link followed.
pub(crate) fn open_file(at: BorrowedFd<'_>, rel: &Path) -> Option<std::fs::File> {
    let (parent, name) = parent_of(at, rel).ok()?;
    // `NONBLOCK`: a FIFO planted here must not stall the server.
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = rustix::fs::openat(&parent, name, flags, Mode::empty()).ok()?;
    let stat = rustix::fs::fstat(&fd).ok()?;
    (FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile).then(|| fd.into())
}

/// The regular file at `path`, opened without blocking and without following a final link.
pub(crate) fn open_regular(path: &Path) -> Option<std::fs::File> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = rustix::fs::open(path, flags, Mode::empty()).ok()?;
    let stat = rustix::fs::fstat(&fd).ok()?;
    (FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile).then(|| fd.into())
}

/// At most `max` bytes of the regular file at `path`: opened without blocking (a FIFO left in
/// a repository must not hang the server) and without following a final link.
pub(crate) fn read_path(path: &Path, max: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    open_regular(path)?.take(max).read_to_end(&mut out).ok()?;
    Some(out)
}

/// At most `max` bytes of the regular file `rel` beneath `at`.
pub(crate) fn read(at: BorrowedFd<'_>, rel: &Path, max: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    open_file(at, rel)?.take(max).read_to_end(&mut out).ok()?;
    Some(out)
}

/// The entries of the directory `dir`: each name with its type (`None`: unknown).
pub(crate) fn entries(dir: BorrowedFd<'_>) -> Vec<(Vec<u8>, Option<FileType>)> {
    let Ok(fd) = rustix::fs::openat(dir, ".", DIR_FLAGS, Mode::empty()) else {
        return Vec::new();
    };
    let Ok(mut listing) = rustix::fs::Dir::new(fd) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    while let Some(Ok(entry)) = listing.read() {
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => {
                rustix::fs::statat(dir, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW)
                    .ok()
                    .map(|s| FileType::from_raw_mode(s.st_mode))
            }
            kind => Some(kind),
        };
        out.push((name.to_vec(), kind));
    }
    out
}

/// Removes the entry `name` of `dir` and, for a directory, everything beneath it, following
/// no link (at most `depth` levels: a git directory's state is shallow).
pub(crate) fn remove_tree(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    depth: usize,
) -> rustix::io::Result<()> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => return Ok(()),
        Err(Errno::ISDIR | Errno::PERM) => {}
        Err(e) => return Err(e),
    }
    if depth == 0 {
        return Err(Errno::NOTEMPTY);
    }
    let sub = rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty())?;
    for (child, _) in entries(sub.as_fd()) {
        remove_tree(sub.as_fd(), OsStr::from_bytes(&child), depth - 1)?;
    }
    match rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Clears the execute bits of `name` in `dir` and, for a directory, of every file beneath it
/// (no link followed; each file changed through its own descriptor).
pub(crate) fn strip_execute(dir: BorrowedFd<'_>, name: &OsStr, depth: usize) {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let Ok(fd) = rustix::fs::openat(dir, name, flags, Mode::empty()) else {
        return;
    };
    let Ok(stat) = rustix::fs::fstat(&fd) else {
        return;
    };
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Directory if depth > 0 => {
            for (child, _) in entries(fd.as_fd()) {
                strip_execute(fd.as_fd(), OsStr::from_bytes(&child), depth - 1);
            }
        }
        FileType::RegularFile if stat.st_mode & 0o111 != 0 => {
            let _ = rustix::fs::fchmod(&fd, Mode::from_raw_mode(stat.st_mode & 0o7666));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_below_the_root_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir_all(elsewhere.join("sub/.git")).unwrap();
        std::fs::create_dir_all(root.join("real/sub/.git")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, root.join("b")).unwrap();
        let roots = vec![root.clone()];
        assert!(open_dir_in(&roots, &root.join("real/sub/.git")).is_ok());
        assert!(open_dir_in(&roots, &root.join("b/sub/.git")).is_err());
        assert!(identity_in(&roots, &root.join("b/sub/.git")).is_err());
        assert!(identity_in(&roots, &root.join("b")).is_err());
        assert!(open_dir_in(&roots, &elsewhere.join("sub")).is_err());
    }

    #[test]
    fn a_tree_is_removed_without_following_its_links() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(tree.join("a/b")).unwrap();
        std::fs::write(tree.join("a/b/f"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("a/link")).unwrap();
        let at = rustix::fs::open(dir.path(), OFlags::DIRECTORY, Mode::empty()).unwrap();
        remove_tree(at.as_fd(), OsStr::new("tree"), 8).unwrap();
        assert!(!tree.exists());
        assert!(outside.join("keep").exists());
    }
}
