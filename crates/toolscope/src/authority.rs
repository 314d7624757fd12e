//! The `Authority` trait: "may this call run now", plus a watch that fires when the answer may
//! have changed (TS-3, PERM-2 "re-checked before and during every run").

use std::fmt;
use std::sync::{Mutex, PoisonError};

use tokio::sync::watch;

use crate::grants::{Denial, Grants, PluginId, Tool};

/// Answers whether a plugin may run a tool now, and tells the gate when to ask again.
///
/// The gate calls [`check`](Authority::check) before a body starts and again every time the
/// [`watch`](Authority::watch) receiver sees a new value while the body runs; the first
/// [`Denial`] cancels the call. A change notification means only "ask again": it may fire for
/// changes that do not matter to a given call.
///
/// Notifications coalesce: a revocation undone before the gate re-checks (both within one
/// scheduler tick) may go unseen. An authority that must stop calls on every revocation, however
/// brief, keeps the denial in force until it has been observed.
///
/// Fail closed: if every sender of the watch is dropped, the gate can no longer see
/// revocations and cancels running calls with [`Denial::AuthorityUnavailable`]. Keep the sender
/// alive as long as the authority is in use.
pub trait Authority: Send + Sync + fmt::Debug {
    /// May `plugin` run `tool` now?
    fn check(&self, plugin: &PluginId, tool: &Tool) -> Result<(), Denial>;

    /// A receiver whose value changes whenever an answer of [`check`](Authority::check) may
    /// have changed. The value itself (a revision number) carries no meaning.
    fn watch(&self) -> watch::Receiver<u64>;
}

/// An in-memory [`Authority`] over [`Grants`], for hosts that hold permissions in memory and for
/// tests.
///
/// ```
/// use toolscope::{Authority, Capability, MemoryAuthority, PluginRecord, Tool};
/// let authority = MemoryAuthority::default();
/// authority.update(|g| {
///     g.plugins.insert("notes".parse().unwrap(), PluginRecord::fully_granted("pkg@1", &[Capability::TerminalExec]));
/// });
/// let exec = Tool::new("command").requires(Capability::TerminalExec);
/// assert!(authority.check(&"notes".parse().unwrap(), &exec).is_ok());
///
/// // The user takes the permission back; every running call of the plugin is re-checked.
/// authority.update(|g| {
///     if let Some(r) = g.plugins.get_mut(&"notes".parse().unwrap()) { r.user_allowed.clear(); }
/// });
/// assert!(authority.check(&"notes".parse().unwrap(), &exec).is_err());
/// ```
#[derive(Debug)]
pub struct MemoryAuthority {
    grants: Mutex<Grants>,
    revision: watch::Sender<u64>,
}

impl Default for MemoryAuthority {
    fn default() -> Self {
        MemoryAuthority::new(Grants::default())
    }
}

impl MemoryAuthority {
    /// An authority holding `grants`.
    pub fn new(grants: Grants) -> Self {
        MemoryAuthority {
            grants: Mutex::new(grants),
            revision: watch::Sender::new(0),
        }
    }

    /// Changes the grants and notifies every watcher, even if `change` changed nothing.
    pub fn update(&self, change: impl FnOnce(&mut Grants)) {
        {
            // A panic in another `update` closure leaves plain data behind, still a valid
            // `Grants`; keep serving rather than turning every later check into a panic.
            let mut grants = self.grants.lock().unwrap_or_else(PoisonError::into_inner);
            change(&mut grants);
        }
        // Notify after the lock is released, so a woken re-check sees the new state.
        self.revision.send_modify(|r| *r = r.wrapping_add(1));
    }

    /// A copy of the current grants.
    pub fn snapshot(&self) -> Grants {
        self.grants
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Authority for MemoryAuthority {
    fn check(&self, plugin: &PluginId, tool: &Tool) -> Result<(), Denial> {
        self.grants
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .check(plugin, tool)
    }

    fn watch(&self) -> watch::Receiver<u64> {
        self.revision.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Capability;
    use crate::grants::PluginRecord;

    #[test]
    fn update_notifies_watchers_after_the_change_is_visible() {
        let authority = MemoryAuthority::default();
        let mut rx = authority.watch();
        assert!(!rx.has_changed().unwrap());
        authority.update(|g| {
            g.plugins.insert(
                "p".parse().unwrap(),
                PluginRecord::fully_granted("k", &[Capability::TerminalExec]),
            );
        });
        assert!(rx.has_changed().unwrap());
        rx.mark_unchanged();
        assert!(
            authority
                .check(&"p".parse().unwrap(), &Tool::new("t"))
                .is_ok()
        );
        assert_eq!(authority.snapshot().plugins.len(), 1);
    }
}
