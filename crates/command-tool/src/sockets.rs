//! Unix sockets of other programs inside an extra path: refused before
//! anything runs.
//!
//! **Why.** Landlock below ABI 9 does not govern `connect` or `sendto` on a pathname socket,
//! and a datagram end of `socketpair` (always allowed) can be re-addressed to any socket it can
//! name; a socket passed from another call can connect anywhere it can name. So whatever socket
//! lies inside a granted path is reachable from the command, whatever its access level: tmux's
//! socket in `/tmp` is a shell outside the sandbox, ssh-agent's signs with the user's keys. The
//! command's own view (a root of the grants only) keeps every other socket of the host out;
//! an extra path the user approves brings in the sockets it holds.
//!
//! **Owns:** the refusal of an extra path that is or contains a place where programs keep
//! their sockets ([`SHARED_SOCKET_PLACES`], `$XDG_RUNTIME_DIR`, the directory of
//! `$SSH_AUTH_SOCK`, `~/.gnupg`, `~/.ssh`), and of one that holds a socket now (a walk that
//! never follows a link, of at most [`MAX_ENTRIES`] entries).
//!
//! **Limits (documented, as CMD-11's).** A program that binds a new socket inside an approved
//! path while the command runs, or a socket beyond the first [`MAX_ENTRIES`] entries of a large
//! tree, is not refused; there the command still cannot make a unix socket itself (`socket` is
//! refused whenever an extra path is approved), but a datagram end of `socketpair` re-addressed
//! with `sendto`, or a socket passed in by another call running at the same time, can reach it.
//! The workspace and the toolchain homes are not walked (the workspace is the user's project; a
//! toolchain home holds programs). A workspace that is or contains one of those places (a home
//! directory picked as the workspace holds `~/.gnupg` and `~/.ssh`) is not refused, but its
//! command gets no unix socket ([`socket_place_in`]).

use std::path::{Path, PathBuf};

use toolscope::{ErrorCode, ToolError};

use crate::validate::Extra;

/// Directories where programs of the machine keep their sockets (tmux, X11, ssh-agent, D-Bus,
/// systemd, Docker): an extra path that is one of them or contains one is refused.
pub(crate) const SHARED_SOCKET_PLACES: &[&str] = &["/tmp", "/var/tmp", "/run", "/var/run", "/dev"];

/// Entries walked per extra path at most.
pub(crate) const MAX_ENTRIES: usize = 20_000;

/// The place of other programs' sockets that `dir` (canonical) is or contains, if any: the
/// workspace's check (a home directory chosen as the workspace holds `~/.gnupg` and `~/.ssh`).
/// No walk: it runs on every call, and a project tree may be large.
pub(crate) fn socket_place_in(dir: &Path) -> Option<PathBuf> {
    socket_places().into_iter().find(|p| p.starts_with(dir))
}

/// [`SHARED_SOCKET_PLACES`], `$XDG_RUNTIME_DIR`, `~/.gnupg`, `~/.ssh` and the directory of
/// `$SSH_AUTH_SOCK`, canonical where they exist.
fn socket_places() -> Vec<PathBuf> {
    let mut places: Vec<PathBuf> = SHARED_SOCKET_PLACES.iter().map(PathBuf::from).collect();
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        places.push(dir.into());
    }
    if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        // gpg-agent's and a user ssh-agent's sockets.
        places.push(Path::new(&home).join(".gnupg"));
        places.push(Path::new(&home).join(".ssh"));
    }
    if let Some(sock) = std::env::var_os("SSH_AUTH_SOCK").filter(|d| !d.is_empty()) {
        if let Some(dir) = Path::new(&sock).parent() {
            places.push(dir.to_path_buf());
        }
    }
    places
        .into_iter()
        .map(|p| p.canonicalize().unwrap_or(p))
        .collect()
}

/// Refuses the first extra path that is or holds a place of other programs' sockets.
pub(crate) fn refuse_socket_places(extra: &[Extra]) -> Result<(), ToolError> {
    let places = socket_places();
    for e in extra {
        use std::os::fd::AsFd;
        // The kernel's name for the descriptor pinned at validation, not the text looked up
        // again (as `refuse_hidden`).
        let name = match e.pin() {
            crate::validate::Pin::Dir(lease) => fsguard::kernel_path(lease.as_fd()),
            crate::validate::Pin::File(fd) => fsguard::kernel_path(fd.as_fd()),
        }
        .or_else(|| e.path().canonicalize().ok())
        .unwrap_or_else(|| e.path().to_path_buf());
        if let Some(place) = places.iter().find(|p| p.starts_with(&name)) {
            return Err(refusal(
                e.path(),
                format!(
                    "{} holds other programs' unix sockets ({}: tmux, ssh-agent, X11, D-Bus \
                     keep theirs there), which a command could connect to; approve a folder \
                     inside it that holds your files instead",
                    e.path().display(),
                    place.display()
                ),
            ));
        }
        match find_socket(&name) {
            Found::None => {}
            Found::Socket(at) => {
                return Err(refusal(
                    e.path(),
                    format!(
                        "{} holds a unix socket ({}), which a command could connect to; approve \
                         a folder without sockets",
                        e.path().display(),
                        at.display()
                    ),
                ));
            }
            // A toolchain-sized tree (`~/.rustup` has 100 000 entries) is not walked through:
            // the command still makes no unix socket of its own there (`Policy::
            // unix_sockets_in_view`), which leaves the limits in the module docs.
            Found::TooLarge => {}
        }
    }
    Ok(())
}

fn refusal(path: &Path, message: String) -> ToolError {
    ToolError::new(
        ErrorCode::ExecPathInvalid,
        format!("extra path refused: {message}; the command did not run"),
    )
    .with_detail("path", path.to_string_lossy().into_owned())
}

enum Found {
    None,
    Socket(PathBuf),
    TooLarge,
}

/// A socket at or below `root`, never following a link.
fn find_socket(root: &Path) -> Found {
    use std::os::unix::fs::FileTypeExt;
    let mut stack = vec![root.to_path_buf()];
    let mut seen = 0usize;
    while let Some(path) = stack.pop() {
        seen += 1;
        if seen > MAX_ENTRIES {
            return Found::TooLarge;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let kind = meta.file_type();
        if kind.is_socket() {
            return Found::Socket(path);
        }
        if kind.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                stack.extend(entries.filter_map(Result::ok).map(|e| e.path()));
            }
        }
    }
    Found::None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_holding_a_socket_place_is_named_and_a_project_is_not() {
        assert_eq!(socket_place_in(Path::new("/")), Some(PathBuf::from("/tmp")));
        let tmp = Path::new("/tmp").canonicalize().unwrap();
        assert!(socket_place_in(&tmp).is_some());
        let project = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        assert_eq!(
            socket_place_in(&project.path().canonicalize().unwrap()),
            None
        );
    }

    #[test]
    fn a_socket_deep_inside_is_found_and_a_link_to_one_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        assert!(matches!(find_socket(dir.path()), Found::None));
        let other = tempfile::tempdir().unwrap();
        let _l = std::os::unix::net::UnixListener::bind(other.path().join("s")).unwrap();
        std::os::unix::fs::symlink(other.path(), deep.join("link")).unwrap();
        assert!(matches!(find_socket(dir.path()), Found::None));
        let _m = std::os::unix::net::UnixListener::bind(deep.join("s")).unwrap();
        assert!(matches!(find_socket(dir.path()), Found::Socket(p) if p == deep.join("s")));
    }
}
