//! What a failure to take the mirror means for `run` (RUN-11, RUN-13).
//!
//! The host takes the mirror before `run` can start ([`fsguard::Mirror::create`] or
//! [`fsguard::Mirror::refresh`] at turn start); this crate says what that failure is on the
//! wire, so `run`'s error codes stay in one place.

use fsguard::MirrorError;
use toolscope::{ErrorCode, ToolError};

/// At most this many hard-linked paths travel in the `hardLinks` detail (the message names
/// as many; `hardLinkCount` counts all), as `command` reports them (CMD-9).
const HARD_LINKS_SHOWN: usize = 20;

/// The public error for a mirror that could not be taken.
///
/// A hard-linked file in the folder ([`MirrorError::HardLinked`]) is `AGENT_EXEC_PATH_INVALID`:
/// another name of it may be outside the workspace, so `run` refuses it exactly as `command`
/// (CMD-9) and the file tools (FILE-1) do. The message names the files (relative to the
/// folder) and says to replace each with a copy; the details carry `hardLinks` (at most 20
/// paths) and `hardLinkCount`. fsguard has already removed the half-made mirror. Anything
/// else is `AGENT_EXEC_IO_FAILED`.
///
/// ```
/// let tmp = tempfile::tempdir().unwrap();
/// let folder = tmp.path().join("folder");
/// std::fs::create_dir(&folder).unwrap();
/// std::fs::write(tmp.path().join("secret"), "s").unwrap();
/// std::fs::hard_link(tmp.path().join("secret"), folder.join("hl")).unwrap();
///
/// let err = fsguard::Mirror::create(&folder, tmp.path().join("mirror")).unwrap_err();
/// let err = run_tool::mirror_error(err);
/// assert_eq!(err.code(), toolscope::ErrorCode::ExecPathInvalid);
/// assert!(err.message().contains("`hl`"));
/// assert!(!tmp.path().join("mirror").exists());
/// ```
pub fn mirror_error(err: MirrorError) -> ToolError {
    match &err {
        MirrorError::HardLinked { links } => {
            let shown: Vec<String> = links
                .iter()
                .take(HARD_LINKS_SHOWN)
                .map(|l| l.path.display().to_string())
                .collect();
            ToolError::new(ErrorCode::ExecPathInvalid, err.to_string())
                .with_detail("hardLinks", shown)
                .with_detail("hardLinkCount", links.len())
        }
        _ => ToolError::new(
            ErrorCode::ExecIoFailed,
            format!("could not mirror the workspace: {err}"),
        ),
    }
}
