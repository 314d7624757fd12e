//! The one `fsguard::OpenError → ErrorCode` mapping the tools share: `run`,
//! `command` and the file tools all open workspace paths through `fsguard` and must answer a
//! failed open with the same code. It lives here because this is the lowest crate that knows
//! both `fsguard`'s errors and `toolscope`'s codes, and every tool crate depends on it.

use fsguard::OpenError;
use toolscope::ErrorCode;

/// The code for a workspace path that could not be opened: `AGENT_EXEC_IO_FAILED` only for a
/// system call that failed for a reason of the machine's (`OpenError::Io`: EIO, EMFILE,
/// ENOMEM, …), which a retry may cure; `AGENT_EXEC_PATH_INVALID` for everything about the path
/// itself — a symbolic link, a missing component, a component of the wrong type, and a
/// permission the operating system refused.
///
/// Permission denied is a path error, not an I/O failure: the mode bits, the owner or a
/// security module refuse *this path*, and will refuse it again on every retry; what the agent
/// must do is what `PATH_INVALID` tells it — name another path, or ask the user to change the
/// permissions — not try again.
/// Every tool answers the same code for the same failure.
///
/// ```
/// use std::path::PathBuf;
///
/// let denied = fsguard::OpenError::PermissionDenied { component: PathBuf::from("locked.txt") };
/// assert_eq!(exec::open_error_code(&denied), toolscope::ErrorCode::ExecPathInvalid);
/// ```
pub fn open_error_code(err: &OpenError) -> ErrorCode {
    match err {
        OpenError::Io { .. } => ErrorCode::ExecIoFailed,
        _ => ErrorCode::ExecPathInvalid,
    }
}
