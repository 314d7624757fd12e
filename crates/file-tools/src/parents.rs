//! The missing parent directories of a `write`: `write` of `sub/new.txt` makes
//! `sub/` when it is not there, as agents expect of a file tool.
//!
//! Why this is safe:
//!
//! - **Inside the scope only.** The path is a [`RelPath`] (no absolute path, no `..`, no `.git`
//!   in any case), and every directory is reached from the pinned root's descriptor one name at
//!   a time, each opened relative to the one before it with `O_NOFOLLOW | O_DIRECTORY`. A
//!   component that is a symbolic link is refused, never followed — also one that appears
//!   between our `mkdirat` and our open of what it made (the open then fails with `ELOOP`).
//! - **Made by the tool itself.** Each missing directory is created with `mkdirat` in the
//!   descriptor of its parent, never by a path string, so no lookup of the workspace path is
//!   repeated and no symbolic link on the way can redirect it.
//! - **Nothing half-made where avoidable.** The directories a call made are removed again, the
//!   deepest first, when the write then fails — each only if it is still empty (`rmdir`), so a
//!   directory someone else filled in the meantime stays with what they put there.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};

use fsguard::{OpenError, RelPath, RootLease};
use rustix::fs::{AtFlags, Mode};
use toolscope::{ErrorCode, ToolError};

/// The directories one call created, with the descriptor of the directory each is in (to
/// remove them again the same way they were made).
#[derive(Debug, Default)]
#[must_use = "a failed write removes what it made through `undo`"]
pub(crate) struct Made {
    created: Vec<(OwnedFd, OsString)>,
}

impl Made {
    /// Removes the directories this call made, deepest first, each only while still empty.
    pub(crate) fn undo(self) {
        for (parent, name) in self.created.into_iter().rev() {
            // Best effort: ENOTEMPTY means someone else's entry is inside now, and it stays.
            let _ = rustix::fs::unlinkat(&parent, name.as_os_str(), AtFlags::REMOVEDIR);
        }
    }
}

fn refused(path: &RelPath, err: &OpenError) -> ToolError {
    let why = match err {
        OpenError::Symlink { .. } => {
            "write makes missing directories only inside the workspace and never through a \
             symbolic link; name a path whose directories are real directories of the workspace"
        }
        OpenError::NotADirectory { .. } | OpenError::NotARegularFile { .. } => {
            "a directory on the way is something else; name a path whose directories are \
             directories"
        }
        OpenError::PermissionDenied { .. } => {
            "the system does not let this user open or make it: choose a path you may write, \
             or ask the user to change its permissions"
        }
        _ => "its directory cannot be opened or made; check that the path exists and retry",
    };
    ToolError::new(
        exec::open_error_code(err),
        format!("path {:?}: {err}; {why}", path.as_path()),
    )
}

/// A failed `mkdirat` of `name` on the way to `path`, with the code of the one mapping: a
/// permission the system refuses is about the path (`PATH_INVALID`), any other failure the
/// machine's (`IO_FAILED`).
fn mkdir_refused(path: &RelPath, name: &OsStr, e: rustix::io::Errno) -> ToolError {
    let source = std::io::Error::from(e);
    let component = std::path::PathBuf::from(name);
    let err = if source.kind() == std::io::ErrorKind::PermissionDenied {
        OpenError::PermissionDenied { component }
    } else {
        OpenError::Io { component, source }
    };
    ToolError::new(
        exec::open_error_code(&err),
        format!(
            "path {:?}: cannot make the directory {name:?} ({e}); name a path in a directory \
             you may write",
            path.as_path()
        ),
    )
}

/// Opens (or makes) each directory above `path`'s last name, from `root` down.
pub(crate) fn make(root: &RootLease, path: &RelPath) -> Result<Made, ToolError> {
    let mut made = Made::default();
    let Some(parent) = path.parent() else {
        return Ok(made);
    };
    // The directory the next name is looked up in; `None` is the root itself.
    let mut dir: Option<OwnedFd> = None;
    for name in parent.components() {
        let base = dir.as_ref().map_or(root.as_fd(), |fd| fd.as_fd());
        let one = RelPath::new(name).map_err(|e| {
            ToolError::new(
                ErrorCode::ExecPathInvalid,
                format!("path {:?}: {e}", path.as_path()),
            )
        })?;
        let opened = match one.open_dir_at(base) {
            Err(OpenError::NotFound { .. }) => {
                match rustix::fs::mkdirat(base, name, Mode::from_raw_mode(0o777)) {
                    // Made here (the umask decides its mode, as for any new directory); kept
                    // for `undo` with a descriptor of the directory it is in.
                    Ok(()) => {
                        let at = match &dir {
                            Some(fd) => fd.try_clone(),
                            None => root.as_fd().try_clone_to_owned(),
                        };
                        if let Ok(at) = at {
                            made.created.push((at, name.to_os_string()));
                        }
                    }
                    // Made by someone else meanwhile: opened (and checked) below like any.
                    Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => {
                        made.undo();
                        return Err(mkdir_refused(path, name, e));
                    }
                }
                one.open_dir_at(base)
            }
            other => other,
        };
        match opened {
            Ok(fd) => dir = Some(fd),
            Err(e) => {
                made.undo();
                return Err(refused(path, &e));
            }
        }
    }
    Ok(made)
}
