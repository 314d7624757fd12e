//! "Validate, then act" (invariant 1) for `command`: CMD-4's inputs and CMD-3's extra
//! paths, checked before anything is asked, created or started.

use std::os::fd::OwnedFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fsguard::{RelPath, RootLease};
use toolscope::{ErrorCode, ToolError};

use crate::types::CommandArguments;

/// The longest `command`, in bytes. Linux refuses a single argument over 128 KiB
/// (`MAX_ARG_STRLEN`); half of that keeps the refusal ours, with a clear message.
pub const MAX_COMMAND_BYTES: usize = 64 * 1024;
/// `timeoutMs` when the call gives none (CMD-4).
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// The largest `timeoutMs` (CMD-4).
pub const MAX_TIMEOUT_MS: u64 = 300_000;
/// At most this many `extraPaths`: each one is a question to the user (CMD-3).
pub const MAX_EXTRA_PATHS: usize = 16;

/// One extra path that passed validation: absolute, normalised, existing, without a symbolic
/// link in any component, a directory or a regular file, not inside the work scope — and
/// opened then, so everything after validation (the hard-link scan, the sandbox rule) uses the
/// file validated, never the path looked up again.
#[derive(Clone, Debug)]
pub struct Extra {
    path: PathBuf,
    write: bool,
    pin: Pin,
}

/// What an extra path named when it was validated.
#[derive(Clone, Debug)]
pub(crate) enum Pin {
    /// A directory, pinned like the work root.
    Dir(Arc<RootLease>),
    /// A regular file (an `O_PATH` descriptor).
    File(Arc<OwnedFd>),
}

impl Extra {
    /// The normalised absolute path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the command may write beneath it.
    pub fn write(&self) -> bool {
        self.write
    }

    /// Whether it is a directory (else a regular file).
    pub fn is_dir(&self) -> bool {
        matches!(self.pin, Pin::Dir(_))
    }

    /// What the path named when it was validated.
    pub(crate) fn pin(&self) -> &Pin {
        &self.pin
    }
}

/// A `command` call that passed every check: only [`validate`] makes one.
#[derive(Clone, Debug)]
pub struct ValidatedCommand {
    command: String,
    cwd: RelPath,
    extra: Vec<Extra>,
    timeout_ms: u64,
}

impl ValidatedCommand {
    /// The command line for `/bin/sh -c`.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// The working directory, relative to the work root.
    pub fn cwd(&self) -> &RelPath {
        &self.cwd
    }

    /// The extra paths, in the order given.
    pub fn extra_paths(&self) -> &[Extra] {
        &self.extra
    }

    /// The time limit.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// The time limit in milliseconds.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::ExecArgumentsInvalid, message)
}

fn bad_path(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::ExecPathInvalid, message)
}

/// Checks `args` and opens the working directory through `scope`, asking nothing, creating
/// nothing and starting nothing.
///
/// - `command`: not blank, no NUL byte, at most [`MAX_COMMAND_BYTES`]
///   (`AGENT_EXEC_ARGUMENTS_INVALID`).
/// - `timeoutMs`: 1–300000, default 30000 (`AGENT_EXEC_ARGUMENTS_INVALID`).
/// - `cwd`: a [`RelPath`] opened through the lease without following symbolic links
///   (`AGENT_EXEC_PATH_INVALID`). `.git` in any letter case is refused as a `cwd`, like every
///   path the tools take from the model; this is consistency, not isolation — the sandbox grants
///   the whole scope and the command itself can `cd .git`.
/// - `extraPaths`: at most [`MAX_EXTRA_PATHS`], no duplicates (`AGENT_EXEC_ARGUMENTS_INVALID`);
///   each absolute, without `..` or `.git`, existing, no symbolic link in any component, a
///   directory or a regular file, not `/`, not inside the scope (`AGENT_EXEC_PATH_INVALID`).
///   A path that *contains* the scope is allowed: the user is asked about it like any other.
pub fn validate(args: &CommandArguments, scope: &RootLease) -> Result<ValidatedCommand, ToolError> {
    if args.command.trim().is_empty() {
        return Err(invalid(
            "`command` is empty; give one command line for /bin/sh -c",
        ));
    }
    if args.command.contains('\0') {
        return Err(invalid(
            "`command` contains a NUL byte, which no program argument can carry; remove it",
        ));
    }
    if args.command.len() > MAX_COMMAND_BYTES {
        return Err(invalid(format!(
            "`command` is {} bytes; the limit is {MAX_COMMAND_BYTES}: put long scripts in a file \
             in the workspace and run that",
            args.command.len()
        )));
    }
    let timeout_ms = match args.timeout_ms {
        None => DEFAULT_TIMEOUT_MS,
        Some(ms @ 1..=MAX_TIMEOUT_MS) => ms,
        Some(ms) => {
            return Err(invalid(format!(
                "timeoutMs {ms} is out of range; give 1 to {MAX_TIMEOUT_MS} milliseconds, or \
                 leave it out for {DEFAULT_TIMEOUT_MS}"
            )));
        }
    };

    let cwd_input = args.cwd.as_deref().unwrap_or(".");
    let cwd = RelPath::new(cwd_input)
        .map_err(|e| bad_path(format!("cwd `{cwd_input}` is refused: {e}")))?;
    scope.open_dir(&cwd).map_err(|e| {
        ToolError::new(
            exec::open_error_code(&e),
            format!(
                "cwd `{cwd_input}` cannot be used: {e}; name an existing directory in the workspace"
            ),
        )
    })?;

    if args.extra_paths.len() > MAX_EXTRA_PATHS {
        return Err(invalid(format!(
            "extraPaths has {} items; the limit is {MAX_EXTRA_PATHS}: ask for a common parent \
             directory instead",
            args.extra_paths.len()
        )));
    }
    let mut extra: Vec<Extra> = Vec::with_capacity(args.extra_paths.len());
    if !args.extra_paths.is_empty() {
        let scope_real = scope.path().canonicalize().map_err(|e| {
            ToolError::new(
                ErrorCode::ExecIoFailed,
                format!(
                    "cannot resolve the work root {}: {e}",
                    scope.path().display()
                ),
            )
        })?;
        for item in &args.extra_paths {
            let checked = extra_path(&item.path, item.write, &scope_real)?;
            if extra.iter().any(|e| e.path == checked.path) {
                return Err(invalid(format!(
                    "extraPaths names {} twice; list each path once (with `write: true` if it \
                     must be writable)",
                    checked.path.display()
                )));
            }
            extra.push(checked);
        }
    }
    Ok(ValidatedCommand {
        command: args.command.clone(),
        cwd,
        extra,
        timeout_ms,
    })
}

/// CMD-3: one extra path.
fn extra_path(input: &str, write: bool, scope_real: &Path) -> Result<Extra, ToolError> {
    let shown = input.escape_debug();
    let Some(rest) = input.strip_prefix('/') else {
        return Err(bad_path(format!(
            "extra path `{shown}` is not absolute; give the full path from `/`"
        )));
    };
    if rest.trim_matches('/').is_empty() || rest.split('/').all(|c| c.is_empty() || c == ".") {
        return Err(bad_path(
            "extra path `/` would expose the whole file system; name the directory the command needs",
        ));
    }
    // `RelPath` refuses `..`, `.git` in any case, NUL and over-long names, and normalises.
    let rel = RelPath::new(rest)
        .map_err(|e| bad_path(format!("extra path `{shown}` is refused: {e}")))?;
    let path = Path::new("/").join(rel.as_path());

    // Walk from `/`, refusing a symbolic link in any component, to say which one; then open
    // the path once more without following any link (`openat2` RESOLVE_NO_SYMLINKS) and keep
    // that descriptor: the sandbox rule is made on it, so a component swapped for a link
    // after this point changes nothing.
    let mut walked = PathBuf::from("/");
    let mut last = None;
    for comp in path.components() {
        let Component::Normal(name) = comp else {
            continue;
        };
        walked.push(name);
        let meta = std::fs::symlink_metadata(&walked).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                bad_path(format!(
                    "extra path `{shown}` does not exist ({} is missing); name an existing path",
                    walked.display()
                ))
            } else {
                bad_path(format!(
                    "extra path `{shown}` cannot be checked at {}: {e}",
                    walked.display()
                ))
            }
        })?;
        let ft = meta.file_type();
        if ft.is_symlink() {
            return Err(bad_path(format!(
                "extra path `{shown}` goes through the symbolic link {}; name the real path",
                walked.display()
            )));
        }
        last = Some(ft);
    }
    let kind_is_dir = match last {
        Some(ft) if ft.is_dir() => true,
        Some(ft) if ft.is_file() => false,
        Some(ft) => {
            let what = if ft.is_fifo() {
                "a FIFO"
            } else if ft.is_socket() {
                "a socket"
            } else {
                "a device"
            };
            return Err(bad_path(format!(
                "extra path `{shown}` is {what}; only directories and regular files can be granted"
            )));
        }
        None => return Err(bad_path(format!("extra path `{shown}` names nothing"))),
    };
    if path.starts_with(scope_real) {
        return Err(bad_path(format!(
            "extra path `{shown}` is inside the work scope, which the command can already use; \
             refer to it relative to the work root instead"
        )));
    }
    // The system temp dir holds every call's private directory and the sessions' kept cache
    // views (other sessions' too): a writable grant holding it would hand them over.
    let temp = std::env::temp_dir()
        .canonicalize()
        .unwrap_or_else(|_| std::env::temp_dir());
    if write && temp.starts_with(&path) {
        return Err(bad_path(format!(
            "extra path `{shown}` is or contains the system temp dir {}, where other calls and \
             sessions keep their private directories; grant a directory inside it (a new one \
             of the command's own) or elsewhere",
            temp.display()
        )));
    }
    let pin = pin(&path, kind_is_dir).map_err(|e| {
        bad_path(format!(
            "extra path `{shown}` changed while it was checked ({e}); name a path that nothing \
             else is renaming"
        ))
    })?;
    Ok(Extra { path, write, pin })
}

/// Opens the validated `path` without following any symbolic link, checks it is still the
/// kind validated, and pins it.
fn pin(path: &Path, is_dir: bool) -> std::io::Result<Pin> {
    use rustix::fs::{FileType, Mode, OFlags};
    #[cfg(target_os = "linux")]
    let fd = rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        rustix::fs::ResolveFlags::NO_SYMLINKS | rustix::fs::ResolveFlags::NO_MAGICLINKS,
    )?;
    // Elsewhere (macOS): the last component not followed; the walk above refused links on the
    // way, and Seatbelt grants by path anyway.
    #[cfg(not(target_os = "linux"))]
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let stat = rustix::fs::fstat(&fd)?;
    let kind = FileType::from_raw_mode(stat.st_mode);
    let changed = || std::io::Error::other("it is no longer the file that was checked");
    if is_dir {
        if kind != FileType::Directory {
            return Err(changed());
        }
        // The lease opens the last component without following it; it must be the directory
        // just opened without following any.
        let lease = RootLease::acquire(path).map_err(std::io::Error::other)?;
        let id = lease.id();
        #[allow(clippy::unnecessary_cast)] // `st_dev` is not u64 on every platform
        if (id.dev, id.ino) != (stat.st_dev as u64, stat.st_ino as u64) {
            return Err(changed());
        }
        Ok(Pin::Dir(Arc::new(lease)))
    } else if kind == FileType::RegularFile {
        Ok(Pin::File(Arc::new(fd)))
    } else {
        Err(changed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_path_is_normalised() {
        let e = extra_path("/usr//share/./doc/", false, Path::new("/nonexistent-scope")).unwrap();
        assert_eq!(e.path(), Path::new("/usr/share/doc"));
        assert!(e.is_dir());
        assert!(!e.write());
    }

    #[test]
    fn extra_path_refusals_are_path_invalid() {
        for bad in [
            "relative/dir",
            "",
            "/",
            "//",
            "/./",
            "/usr/../etc",
            "/tmp/.GIT",
            "/nonexistent-agent-exec-path",
            "/dev/null",
        ] {
            let err = extra_path(bad, false, Path::new("/nonexistent-scope")).unwrap_err();
            assert_eq!(err.code(), ErrorCode::ExecPathInvalid, "{bad}: {err}");
        }
    }

    #[test]
    fn a_writable_extra_path_holding_the_system_temp_dir_is_refused() {
        let temp = std::env::temp_dir().canonicalize().unwrap();
        let scope = Path::new("/nonexistent-scope");
        let shown = temp.display().to_string();
        let e = extra_path(&shown, true, scope).unwrap_err();
        assert!(e.message().contains("system temp dir"), "{}", e.message());
        // Read-only, it hands nothing over.
        assert!(extra_path(&shown, false, scope).is_ok());
    }

    #[test]
    fn extra_path_inside_the_scope_is_refused_but_a_parent_is_not() {
        let err = extra_path("/usr/share/doc", true, Path::new("/usr/share")).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ExecPathInvalid);
        let err = extra_path("/usr/share", true, Path::new("/usr/share")).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ExecPathInvalid);
        assert!(extra_path("/usr", false, Path::new("/usr/share")).is_ok());
    }
}
