//! One change detector for caches of the file system's fixed locations: an inotify instance
//! whose queue says "something watched changed", and the mount table, polled for `POLLPRI`.
//! The system-path cache here (`syscache`) and `exec`'s system runtime set both build on it.
//!
//! **Owns:** starting the detector (a transient refusal — no descriptors, no memory — is told
//! apart from a kernel without inotify), draining and reporting changes, and watching one
//! directory: only on a filesystem whose changes all come through this kernel (ext4, XFS,
//! Btrfs, tmpfs, overlayfs, proc … — not NFS or FUSE), and dropping the watch of an inode the
//! name no longer leads to.
//!
//! **Refuses to know:** what the caller caches, or which directories matter to it.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::inotify;
use rustix::fs::{Mode, OFlags};

/// `statfs` types of the filesystems whose directories are watched: changes to them can only
/// come through this kernel, which queues an event. Not network or FUSE filesystems.
const LOCAL_FILESYSTEMS: &[u64] = &[
    0xEF53,      // ext2, ext3, ext4
    0x5846_5342, // XFS
    0x9123_683E, // Btrfs
    0xF2F5_2010, // F2FS
    0xCA45_1A4E, // bcachefs
    0x2FC1_2FC1, // ZFS
    0x0102_1994, // tmpfs (and devtmpfs)
    0x8584_58F6, // ramfs
    0x794C_7630, // overlayfs
    0x7371_7368, // squashfs
    0x9FA0,      // proc
    0x6265_6572, // sysfs
];

/// Whether `dir` is on a filesystem in [`LOCAL_FILESYSTEMS`].
pub(crate) fn on_local_filesystem(dir: &Path) -> bool {
    rustix::fs::statfs(dir).is_ok_and(|fs| {
        // The field's width and sign differ by architecture; every magic fits 32 bits.
        #[allow(clippy::unnecessary_cast, clippy::cast_sign_loss)]
        let kind = (fs.f_type as u64) & 0xFFFF_FFFF;
        LOCAL_FILESYSTEMS.contains(&kind)
    })
}

/// What a directory's watch always reports: a name appearing, vanishing or moving in it, or the
/// directory itself going away. `IN_IGNORED` (watch removed, e.g. its filesystem unmounted) and
/// `IN_Q_OVERFLOW` arrive regardless of the mask.
const NAMES: inotify::WatchFlags = inotify::WatchFlags::CREATE
    .union(inotify::WatchFlags::DELETE)
    .union(inotify::WatchFlags::MOVED_FROM)
    .union(inotify::WatchFlags::MOVED_TO)
    .union(inotify::WatchFlags::DELETE_SELF)
    .union(inotify::WatchFlags::MOVE_SELF)
    .union(inotify::WatchFlags::ONLYDIR)
    .union(inotify::WatchFlags::DONT_FOLLOW);

/// What a directory's watch reports besides names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Also {
    /// Nothing more: a cache of what names lead to.
    Nothing,
    /// Mode and owner changes of the directory and of each entry in it (`IN_ATTRIB`): a cache
    /// of who may read what (a `chmod` of `/etc/x` does not change `/etc`'s times).
    Attributes,
}

/// Why [`ChangeWatch::start`] gave none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoWatch {
    /// For want of resources (descriptors, instances, memory): worth trying again later.
    Transient,
    /// This kernel has no inotify (or no `/proc`): never.
    Unavailable,
}

/// An inotify instance, the mount table, and the watches held, by directory.
#[derive(Debug)]
pub struct ChangeWatch {
    inotify: OwnedFd,
    /// `/proc/self/mountinfo`, polled for `POLLPRI` (mount table changed since last poll).
    mounts: OwnedFd,
    /// Every watch held, by directory, kept across changes: when a directory is replaced, the
    /// new one gets a new watch and the old one is removed (it would pin the old inode, count
    /// against the user's watch limit and keep reporting activity there).
    held: HashMap<PathBuf, i32>,
    /// Where queued events are read to (and dropped): allocated once.
    events: Box<[u8; 4096]>,
}

impl ChangeWatch {
    /// The detector, or why there is none.
    ///
    /// # Errors
    /// [`NoWatch`], telling a transient refusal from a permanent one.
    pub fn start() -> Result<ChangeWatch, NoWatch> {
        let why = |e: rustix::io::Errno| {
            use rustix::io::Errno;
            if [Errno::MFILE, Errno::NFILE, Errno::NOMEM, Errno::NOSPC].contains(&e) {
                NoWatch::Transient
            } else {
                NoWatch::Unavailable
            }
        };
        let inotify = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
            .map_err(why)?;
        let mounts = rustix::fs::open(
            "/proc/self/mountinfo",
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(why)?;
        Ok(ChangeWatch {
            inotify,
            mounts,
            held: HashMap::new(),
            events: Box::new([0; 4096]),
        })
    }

    /// Whether anything changed since the last call: events queued (read and discarded), or
    /// the mount table changed. Errors count as changes.
    pub fn changed(&mut self) -> bool {
        let mut changed = false;
        loop {
            match rustix::io::read(&self.inotify, &mut self.events[..]) {
                Ok(0) | Err(rustix::io::Errno::AGAIN) => break,
                Ok(_) => changed = true,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return true,
            }
        }
        use std::os::fd::{AsFd, AsRawFd};
        let mut pfd = libc::pollfd {
            fd: self.mounts.as_fd().as_raw_fd(),
            events: libc::POLLPRI,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        changed || n < 0 || pfd.revents & (libc::POLLPRI | libc::POLLERR) != 0
    }

    /// Watches `dir` for name changes and `also`. `false`: a change to it might queue no
    /// event (not a local filesystem, or no watch could be added).
    pub fn watch_dir(&mut self, dir: &Path, also: Also) -> bool {
        if !on_local_filesystem(dir) {
            return false;
        }
        let mask = match also {
            Also::Nothing => NAMES,
            Also::Attributes => NAMES.union(inotify::WatchFlags::ATTRIB),
        };
        let Ok(wd) = inotify::add_watch(&self.inotify, dir, mask) else {
            return false;
        };
        if let Some(old) = self.held.insert(dir.to_path_buf(), wd)
            && old != wd
            && !self.held.values().any(|&w| w == old)
        {
            // A new inode under this name: drop the old one's watch unless another name (a bind
            // mount) still leads to it. Its IN_IGNORED reports one more change; the caller's
            // next round finds the same watches and settles.
            let _ = inotify::remove_watch(&self.inotify, old);
        }
        true
    }

    /// The watch held on `dir` (tests of the replacement).
    #[cfg(test)]
    pub(crate) fn held(&self, dir: &Path) -> Option<i32> {
        self.held.get(dir).copied()
    }

    /// The inotify instance (tests of the replacement).
    #[cfg(test)]
    pub(crate) fn inotify(&self) -> &OwnedFd {
        &self.inotify
    }
}
