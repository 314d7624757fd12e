//! Extra-path approvals for `command` (CMD-3): the paths pre-approved for one call, then the
//! host's own [`Approver`] (the `agent-exec` binary's asks on `/dev/tty`; this crate knows no
//! terminal).
//!
//! An approval counts for one call. A pending question is abandoned when the call is cancelled
//! (the tool drops the future; CMD-12).

use std::fmt;
use std::path::Path;

use command_tool::{Approval, Approver, PreApproved};

/// Pre-approved paths first (`--approve-extra-path`, `CallOptions::approved_extra_paths`), then
/// the host's approver.
pub(crate) struct CallApprover<'a> {
    pub(crate) pre: PreApproved,
    pub(crate) host: &'a dyn Approver,
}

impl Approver for CallApprover<'_> {
    fn approve_extra_path<'a>(&'a self, path: &'a Path, write: bool) -> Approval<'a> {
        Box::pin(async move {
            self.pre.approve_extra_path(path, write).await
                || self.host.approve_extra_path(path, write).await
        })
    }
}

/// Wraps any approver for `Debug`.
pub(crate) struct DebugApprover(pub(crate) std::sync::Arc<dyn Approver>);

impl fmt::Debug for DebugApprover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Approver")
    }
}
