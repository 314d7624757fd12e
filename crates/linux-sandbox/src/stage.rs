//! Staged directories: a directory beneath a writable grant that the program sees through a
//! private copy (TRUST-1). Every change the program makes there — a new name, a rename over an
//! existing one, a write into a file — lands in an *upper* directory the caller made outside
//! the program's view; the directory itself keeps what it held. The caller decides afterwards
//! what of the upper directory to apply (a git directory's refs and index, its config by an
//! allowlist of keys) and what to refuse.
//!
//! **Owns:** the request ([`StageRequest`], made by [`Policy::stage`](crate::Policy::stage)),
//! the report read after the spawn ([`Staging`], [`StageOutcome`]), and the child's half: an
//! overlay filesystem per staged directory (the directory as its lower layer, the caller's
//! upper and work directories), made in the child's mount namespace before the view is
//! entered, and attached over the directory once the view is in place; each *through*
//! directory beneath it (a git directory's `objects`, content-addressed and harmless to add
//! to) is bound from the real tree over the overlay's, writable, so large data does not go
//! through the copy.
//! **Refuses to know:** what the directories are (git's or anything else), what is applied
//! afterwards, and where the caller keeps the upper directories (they must be outside the
//! program's view: a private temp dir that a tmpfs covers, the host's state directory).
//!
//! Decided by name, for the whole call: no name made in a staged directory reaches the real
//! one while the program runs, whatever system call made it, because the program's view of
//! the directory is another filesystem. The directory itself is a mount point, so it cannot be
//! renamed away (`EBUSY`), and the directories between the writable grant and it are bound
//! onto themselves like a protected path's ([`Policy::protect`](crate::Policy::protect)).
//!
//! Where the child cannot make the overlay (a kernel without it, an upper directory on a
//! filesystem overlayfs refuses), the directory is bound read-only onto itself instead, and
//! the report says so with the kernel's errno: never silently writable. Without a private
//! mount namespace [`prepare`](crate::Policy::prepare) refuses a staged directory beneath a
//! writable grant, as it refuses a protected one.
//!
//! The layers are handed to overlayfs as `/proc/self/fd/N` of descriptors the child opened and
//! checked against the identities the parent pinned, never as the caller's path text: no
//! separator or escape in a path can change what the mount means.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

/// One directory to stage, as the caller asked for it.
#[derive(Debug, Clone)]
pub(crate) struct StageRequest {
    pub(crate) dir: PathBuf,
    pub(crate) upper: PathBuf,
    pub(crate) work: PathBuf,
    pub(crate) through: Vec<PathBuf>,
}

/// What became of one staged directory, as the child reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StageOutcome {
    /// The program saw the directory through its private copy.
    Private,
    /// The overlay could not be made; the directory was read-only instead. The kernel's errno.
    ReadOnly {
        /// The errno of the step that failed.
        errno: i32,
    },
    /// Not known: the program was not started, or its child did not share this process's
    /// memory to report back. Nothing of the directory was writable in either case.
    Unknown,
}

/// The child's report for each staged directory, readable once the program was started
/// ([`PreparedSandbox::staging`](crate::PreparedSandbox::staging)). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Staging {
    pub(crate) dirs: Arc<[(PathBuf, Arc<AtomicI32>)]>,
}

/// The cell's value for [`StageOutcome::Private`]; a negative value is `-errno`, 0 unknown.
pub(crate) const STAGED_PRIVATE: i32 = 1;

impl Staging {
    /// Each staged directory (canonical) and what became of it.
    pub fn outcomes(&self) -> Vec<(PathBuf, StageOutcome)> {
        self.dirs
            .iter()
            .map(|(dir, cell)| (dir.clone(), outcome_of(cell.load(Ordering::Acquire))))
            .collect()
    }

    /// Whether nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    /// What became of `dir` (canonical), if it was staged.
    pub fn outcome(&self, dir: &Path) -> Option<StageOutcome> {
        self.dirs
            .iter()
            .find(|(d, _)| d == dir)
            .map(|(_, cell)| outcome_of(cell.load(Ordering::Acquire)))
    }
}

fn outcome_of(value: i32) -> StageOutcome {
    match value {
        STAGED_PRIVATE => StageOutcome::Private,
        v if v < 0 => StageOutcome::ReadOnly { errno: -v },
        _ => StageOutcome::Unknown,
    }
}

/// `/proc/self/fd/` and the decimal digits of `fd`, NUL-terminated, in `buf`; made without
/// allocating (the child shares the host's memory).
pub(crate) fn fd_path(fd: i32, buf: &mut [u8; 32]) -> &std::ffi::CStr {
    const PREFIX: &[u8] = b"/proc/self/fd/";
    buf[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut digits = [0u8; 10];
    let mut n = u32::try_from(fd).unwrap_or(0);
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut at = PREFIX.len();
    for d in digits[..len].iter().rev() {
        buf[at] = *d;
        at += 1;
    }
    buf[at] = 0;
    // The prefix and the digits hold no NUL; the one written ends the string.
    std::ffi::CStr::from_bytes_until_nul(&buf[..=at]).unwrap_or(c"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_path_names_the_descriptor_in_decimal() {
        let mut buf = [0u8; 32];
        assert_eq!(fd_path(0, &mut buf), c"/proc/self/fd/0");
        assert_eq!(fd_path(7, &mut buf), c"/proc/self/fd/7");
        assert_eq!(fd_path(1234, &mut buf), c"/proc/self/fd/1234");
        assert_eq!(fd_path(i32::MAX, &mut buf), c"/proc/self/fd/2147483647");
    }

    #[test]
    fn the_report_reads_what_the_child_stored() {
        let cell = Arc::new(AtomicI32::new(0));
        let staging = Staging {
            dirs: Arc::from(vec![(PathBuf::from("/w/.git"), Arc::clone(&cell))]),
        };
        assert_eq!(
            staging.outcome(Path::new("/w/.git")),
            Some(StageOutcome::Unknown)
        );
        cell.store(STAGED_PRIVATE, Ordering::Release);
        assert_eq!(
            staging.outcome(Path::new("/w/.git")),
            Some(StageOutcome::Private)
        );
        cell.store(-libc::EINVAL, Ordering::Release);
        assert_eq!(
            staging.outcomes(),
            vec![(
                PathBuf::from("/w/.git"),
                StageOutcome::ReadOnly {
                    errno: libc::EINVAL
                }
            )]
        );
        assert_eq!(staging.outcome(Path::new("/elsewhere")), None);
    }
}
