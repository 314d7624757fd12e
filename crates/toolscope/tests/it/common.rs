//! Shared fixtures: a granted plugin, its exec tool, revoking and restoring its permission.

use std::sync::Arc;

use toolscope::{
    Accounts, Capability, FolderGrant, MemoryAuthority, PluginRecord, Tool, ToolScope,
};

pub const PLUGIN: &str = "notes";
pub const FOLDER: &str = "/home/user/notes";

/// `run` as TS-5 and PERM-3 describe it: terminal exec plus the mounted folder's grant.
pub fn exec_tool() -> Tool {
    Tool::new("run")
        .requires(Capability::TerminalExec)
        .requires_folder(FOLDER)
}

pub fn granted_authority() -> Arc<MemoryAuthority> {
    let authority = Arc::new(MemoryAuthority::default());
    restore(&authority);
    authority
}

/// Every grant the exec tool needs is in place.
pub fn restore(authority: &MemoryAuthority) {
    authority.update(|g| {
        let mut record = PluginRecord::fully_granted("notes@1.0.0", &[Capability::TerminalExec]);
        record.folder_grants.insert(FolderGrant {
            path: FOLDER.into(),
        });
        g.plugins.insert(PLUGIN.parse().unwrap(), record);
    });
}

/// The user takes back `local.terminal.exec@1` (PERM-2).
pub fn revoke(authority: &MemoryAuthority) {
    authority.update(|g| {
        if let Some(record) = g.plugins.get_mut(&PLUGIN.parse().unwrap()) {
            record.user_allowed.clear();
        }
    });
}

pub fn new_turn(accounts: &Accounts, authority: &Arc<MemoryAuthority>) -> ToolScope {
    accounts
        .current()
        .begin_turn(authority.clone(), PLUGIN.parse().unwrap())
        .expect("current generation takes turns")
}

/// Awaits `fut`, failing the test (instead of hanging it) if the gate never delivers: a
/// cancellation that does not arrive is a bug to report, not a stuck CI job.
pub async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(10), fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within 10 s"))
}
