//! The [`Approver`]: how a host asks the user about one extra path for one call (CMD-3).
//!
//! The tool only asks; how the question reaches the user (a dialog in the host's main window, a
//! `y/N` on `/dev/tty`, a `--approve-extra-path` flag) is the host's. An approval counts for this
//! call only: the tool asks again on the next call.

use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

/// A boxed future, so [`Approver`] stays usable as `&dyn Approver`.
pub type Approval<'a> = Pin<Box<dyn Future<Output = bool> + Send + 'a>>;

/// Asks the user whether this call may use `path` (read only, or also `write`).
///
/// Answer `true` only for an explicit yes. A host that cannot ask (no terminal, no window)
/// answers `false`: the call then does not run (CMD-3). The tool stops waiting when the call is
/// cancelled (CMD-12: pending approvals are cancelled), dropping the future.
pub trait Approver: Send + Sync {
    /// Whether the user allows `path` for this call; `write` says whether writing is asked for.
    fn approve_extra_path<'a>(&'a self, path: &'a Path, write: bool) -> Approval<'a>;
}

/// Approves nothing: the answer of a host that cannot ask anyone.
#[derive(Clone, Copy, Debug, Default)]
pub struct DenyAll;

impl Approver for DenyAll {
    fn approve_extra_path<'a>(&'a self, _path: &'a Path, _write: bool) -> Approval<'a> {
        Box::pin(async { false })
    }
}

/// Approves exactly the paths the user listed up front (e.g. `--approve-extra-path <PATH>`),
/// for reading and writing as the call asks; nothing else.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use command_tool::{Approver, PreApproved};
/// use std::path::Path;
/// let approver = PreApproved::new(["/data/in"]);
/// assert!(approver.approve_extra_path(Path::new("/data/in"), true).await);
/// assert!(!approver.approve_extra_path(Path::new("/data"), false).await);
/// # });
/// ```
#[derive(Clone, Default)]
pub struct PreApproved {
    paths: BTreeSet<PathBuf>,
}

impl PreApproved {
    /// Approves each of `paths` (compared component by component, so `/a//b/` equals `/a/b`).
    pub fn new<P: Into<PathBuf>>(paths: impl IntoIterator<Item = P>) -> Self {
        PreApproved {
            paths: paths
                .into_iter()
                .map(|p| p.into().components().collect())
                .collect(),
        }
    }
}

impl fmt::Debug for PreApproved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(&self.paths).finish()
    }
}

impl Approver for PreApproved {
    fn approve_extra_path<'a>(&'a self, path: &'a Path, _write: bool) -> Approval<'a> {
        let normal: PathBuf = path.components().collect();
        let yes = self.paths.contains(&normal);
        Box::pin(async move { yes })
    }
}
