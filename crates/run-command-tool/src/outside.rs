//! Commands outside the sandbox: `sudo -n` (RC-11) and `sandbox: false` (RC-12).
//!
//! **Owns:** finding `sudo`, running it (or the unsandboxed command) with bounded output, the
//! timeout and cancellation (SIGTERM, SIGKILL after 2 s), and `sudo -k` afterwards.
//! **Refuses to know:** the gate (module `gate`): nothing here runs before the password passed.

use std::path::PathBuf;

/// Where `sudo` is: a fixed system location, never looked up on a `PATH` a caller controls.
pub(crate) fn sudo_binary() -> Option<PathBuf> {
    ["/usr/bin/sudo", "/bin/sudo", "/usr/local/bin/sudo"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}
