//! `CallTemp`: a call's own directory under the system temp dir, holding the sandboxed
//! process's `HOME` and `TMPDIR` — one mechanism for `run` (RUN-7, RUN-8) and `command` (CMD-2,
//! CMD-13).
//!
//! Owns: making it (mode 0700, `home/` and `tmp/` inside, 0700 too), refusing one that overlaps
//! the work root (it is granted read-write: inside a mirror it would be written back), pinning
//! it, keeping it in the supervisor's care while the command runs, and removing it.
//!
//! On Linux it is a [`proctree::CallDir`]: named for its owner (PID, start time, PID
//! namespace) so a later host sweeps it if this one dies where no supervisor runs, and handed
//! to the supervisor, which removes it after the tree if the host dies mid-call.
//! Elsewhere it is a plain temp dir.

use std::ffi::OsString;
use std::future::Future;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
#[cfg(target_os = "linux")]
use std::sync::Arc;

use fsguard::RootLease;

#[cfg(target_os = "linux")]
type Handle = Arc<proctree::CallDir>;
#[cfg(not(target_os = "linux"))]
type Handle = tempfile::TempDir;

/// Why a [`CallTemp`] could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallTempError {
    /// A step failed: `create`, `resolve`, `protect`, `pin` or `fill`.
    #[error("cannot {step} the call's private temp dir (its HOME and TMPDIR): {source}")]
    Io {
        /// The step.
        step: &'static str,
        /// The system's error.
        source: std::io::Error,
    },
    /// The system temp dir lies in the work root or holds it.
    #[error("the system temp dir {temp} overlaps {work}; point TMPDIR elsewhere")]
    Overlaps {
        /// The call's temp dir.
        temp: String,
        /// The work root.
        work: String,
    },
}

/// A call's private directory (module docs).
pub struct CallTemp {
    dir: Handle,
    root: PathBuf,
    /// Pinned right after it was made: the sandbox grants this, not the path.
    lease: RootLease,
}

impl std::fmt::Debug for CallTemp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallTemp")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl CallTemp {
    /// Makes `<temp dir>/<prefix>…` with `home/` and `tmp/`, refusing one that overlaps `work`.
    ///
    /// # Errors
    /// [`CallTempError`]; nothing is left behind.
    pub fn create(prefix: &str, work: &Path) -> Result<CallTemp, CallTempError> {
        let io = |step| move |source| CallTempError::Io { step, source };
        #[cfg(target_os = "linux")]
        let dir = proctree::CallDir::create(&std::env::temp_dir(), prefix)
            .map(Arc::new)
            .map_err(io("create"))?;
        #[cfg(not(target_os = "linux"))]
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(std::env::temp_dir())
            .map_err(io("create"))?;
        let root = dir.path().canonicalize().map_err(io("resolve"))?;
        let work = work.canonicalize().unwrap_or_else(|_| work.to_path_buf());
        if root.starts_with(&work) || work.starts_with(&root) {
            return Err(CallTempError::Overlaps {
                temp: root.display().to_string(),
                work: work.display().to_string(),
            });
        }
        // Only the call's user may look inside (`HOME` lives here); the makers use
        // 0700, and this says so rather than trusting them.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700))
            .map_err(io("protect"))?;
        let lease = RootLease::acquire(&root).map_err(|e| CallTempError::Io {
            step: "pin",
            source: std::io::Error::other(e),
        })?;
        for sub in ["home", "tmp"] {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(root.join(sub))
                .map_err(io("fill"))?;
        }
        Ok(CallTemp { dir, root, lease })
    }

    /// The directory, canonical.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Its pin, for the sandbox's grant.
    pub fn lease(&self) -> &RootLease {
        &self.lease
    }

    /// `HOME` and `TMPDIR` for the command's environment.
    pub fn home_and_tmpdir(&self) -> [(OsString, OsString); 2] {
        [
            ("HOME".into(), self.root.join("home").into_os_string()),
            ("TMPDIR".into(), self.root.join("tmp").into_os_string()),
        ]
    }

    /// `fut` (the command) with this directory in the supervisor's care should the host die.
    pub fn scope<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> {
        #[cfg(target_os = "linux")]
        return proctree::remove_if_host_dies(Arc::clone(&self.dir), fut);
        #[cfg(not(target_os = "linux"))]
        fut
    }

    /// Removes the directory, also when the command left directories without write or search
    /// permission in it (`chmod 000 $TMPDIR/d` would otherwise make the removal fail). Best
    /// effort: a leftover is private (0700) and swept at the next start (Linux).
    pub fn remove(self) {
        let dir = self.dir;
        #[cfg(target_os = "linux")]
        let _ = dir.remove();
        #[cfg(not(target_os = "linux"))]
        {
            let path = dir.keep();
            if std::fs::remove_dir_all(&path).is_ok() {
                return;
            }
            open_up(&path);
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// Gives the owner full access to every directory below `dir` (never following a link): a
/// directory the command made, or copied with a cache's read-only mode, can then be removed.
pub(crate) fn open_up(dir: &Path) {
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            open_up(&entry.path());
        }
    }
}
