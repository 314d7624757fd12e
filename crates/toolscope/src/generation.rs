//! Account generations and their leases (CMD-12).
//!
//! Each signed-in account is one [`Generation`]. [`Accounts::switch`] retires the current one —
//! late turns and new calls are refused, everything awaiting it (in-flight calls, pending
//! approvals) is cancelled — and publishes the next account only once every
//! [`GenerationLease`] of the old generation is released. Leases are what make "truly ended"
//! observable: a blocking thread keeps its lease until its work is over, so cancelling an async
//! wait on it does not let the switch through early.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::authority::Authority;
use crate::context::{CancelReason, Canceller};
use crate::error::{ErrorCode, ToolError};
use crate::grants::PluginId;
use crate::scope::ToolScope;

/// A signed-in account.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AccountId(pub String);

impl fmt::Display for AccountId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for AccountId {
    fn from(s: &str) -> Self {
        AccountId(s.to_owned())
    }
}

impl From<String> for AccountId {
    fn from(s: String) -> Self {
        AccountId(s)
    }
}

/// Retirement and the live-lease count change together under the watch's lock, so a lease can
/// never be taken after retirement has been observed by the switch.
#[derive(Clone, Copy, Debug, Default)]
struct LeaseState {
    retired: bool,
    leases: usize,
}

#[derive(Debug)]
struct GenerationInner {
    account: AccountId,
    number: u64,
    state: watch::Sender<LeaseState>,
    canceller: Arc<Canceller>,
}

/// One account's generation: the parent of its turns and calls. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Generation {
    inner: Arc<GenerationInner>,
}

impl Generation {
    fn new(account: AccountId, number: u64) -> Self {
        Generation {
            inner: Arc::new(GenerationInner {
                account,
                number,
                state: watch::Sender::new(LeaseState::default()),
                canceller: Canceller::root(),
            }),
        }
    }

    /// A generation owned by no [`Accounts`], for standalone call contexts.
    pub(crate) fn detached() -> Self {
        Generation::new(AccountId("standalone".to_owned()), 0)
    }

    pub(crate) fn canceller(&self) -> &Arc<Canceller> {
        &self.inner.canceller
    }

    /// The account.
    pub fn account(&self) -> &AccountId {
        &self.inner.account
    }

    /// Its number: 1 for the first account of an [`Accounts`], then one more per switch.
    pub fn number(&self) -> u64 {
        self.inner.number
    }

    /// True once a switch retired it.
    pub fn is_retired(&self) -> bool {
        self.inner.state.borrow().retired
    }

    /// Resolves once the generation is retired: what a pending approval prompt awaits so that a
    /// switch cancels it (CMD-12).
    pub async fn retired(&self) {
        self.inner.canceller.cancelled().await;
    }

    /// How many leases are alive now.
    pub fn live_leases(&self) -> usize {
        self.inner.state.borrow().leases
    }

    /// Takes a lease, or `AGENT_ACCOUNT_RETIRED` if the generation is retired.
    pub fn lease(&self) -> Result<GenerationLease, ToolError> {
        let mut taken = false;
        // Returning false skips waking receivers: only "count reached zero" interests them.
        self.inner.state.send_if_modified(|s| {
            if !s.retired {
                s.leases += 1;
                taken = true;
            }
            false
        });
        if taken {
            Ok(GenerationLease {
                generation: Arc::clone(&self.inner),
            })
        } else {
            Err(retired_error(&self.inner.account))
        }
    }

    /// Starts a turn of this generation for `plugin`: the turn's [`ToolScope`]. Refused with
    /// `AGENT_ACCOUNT_RETIRED` for a late turn of a retired generation (CMD-12).
    pub fn begin_turn(
        &self,
        authority: Arc<dyn Authority>,
        plugin: PluginId,
    ) -> Result<ToolScope, ToolError> {
        if self.is_retired() {
            return Err(retired_error(&self.inner.account));
        }
        Ok(ToolScope::new(self.clone(), authority, plugin))
    }

    /// Retires: no new leases or turns, then every turn, call and approval of this generation is
    /// cancelled with [`CancelReason::AccountSwitched`].
    fn retire(&self) {
        self.inner.state.send_modify(|s| s.retired = true);
        self.inner.canceller.cancel(CancelReason::AccountSwitched);
    }

    /// Resolves once no lease is alive. After [`retire`](Self::retire) the count only falls, so
    /// zero stays zero.
    async fn all_leases_released(&self) {
        let mut rx = self.inner.state.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = rx.wait_for(|s| s.leases == 0).await;
    }
}

pub(crate) fn retired_error(account: &AccountId) -> ToolError {
    ToolError::new(
        ErrorCode::AccountRetired,
        format!(
            "account {account} was switched away, so its turns and calls are refused; start a \
             new turn under the current account"
        ),
    )
}

/// Keeps an account generation from being replaced while work for it is still going on
/// (CMD-12). Released on drop, from any thread.
///
/// ```
/// let (ctx, _cancel) = toolscope::CallContext::standalone();
/// let lease = ctx.lease().unwrap();
/// std::thread::spawn(move || {
///     let _lease = lease; // held until this blocking work has truly ended
/// }).join().unwrap();
/// ```
#[derive(Debug)]
pub struct GenerationLease {
    generation: Arc<GenerationInner>,
}

impl GenerationLease {
    /// The number of the generation the lease holds.
    pub fn generation_number(&self) -> u64 {
        self.generation.number
    }
}

impl Drop for GenerationLease {
    fn drop(&mut self) {
        self.generation.state.send_if_modified(|s| {
            s.leases = s.leases.saturating_sub(1);
            s.leases == 0
        });
    }
}

/// The account generations of one host: which account is current, and switching it (CMD-12).
///
/// ```
/// use std::sync::Arc;
/// use toolscope::{Accounts, ErrorCode, MemoryAuthority};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let accounts = Accounts::new("alice".into());
/// let old = accounts.current();
/// let authority = Arc::new(MemoryAuthority::default());
/// let turn = old.begin_turn(authority.clone(), "notes".parse().unwrap()).unwrap();
///
/// let new = accounts.switch("bob".into()).await;
/// assert_eq!(new.account().0, "bob");
/// assert!(old.is_retired() && turn.is_ended());
/// let late = old.begin_turn(authority, "notes".parse().unwrap()).unwrap_err();
/// assert_eq!(late.code(), ErrorCode::AccountRetired);
/// # });
/// ```
#[derive(Debug)]
pub struct Accounts {
    current: Mutex<Generation>,
    /// Serialises switches, so each waits for the previous one to publish.
    switching: tokio::sync::Mutex<()>,
}

impl Accounts {
    /// Starts with `account` as generation 1.
    pub fn new(account: AccountId) -> Self {
        Accounts {
            current: Mutex::new(Generation::new(account, 1)),
            switching: tokio::sync::Mutex::new(()),
        }
    }

    /// The current generation. While a switch waits for leases this is the old, retired one,
    /// so new turns are refused rather than started under either account.
    pub fn current(&self) -> Generation {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Retires the current generation, waits until every lease of it is released, then
    /// publishes `account` as the next generation and returns it.
    ///
    /// Waits as long as a lease is held: a body or thread that ignores cancellation keeps the
    /// switch waiting, by design (CMD-12 prefers that to publishing early). If this future is
    /// dropped while waiting, the old generation stays retired and nothing is published until
    /// `switch` is called again.
    pub async fn switch(&self, account: AccountId) -> Generation {
        let _one_at_a_time = self.switching.lock().await;
        let old = self.current();
        old.retire();
        old.all_leases_released().await;
        let next = Generation::new(account, old.number() + 1);
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = next.clone();
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retired_generation_refuses_new_leases_and_turns() {
        let accounts = Accounts::new("a".into());
        let generation = accounts.current();
        assert_eq!(generation.number(), 1);
        generation.retire();
        assert_eq!(
            generation.lease().unwrap_err().code(),
            ErrorCode::AccountRetired
        );
        assert_eq!(generation.live_leases(), 0);
    }

    #[test]
    fn leases_count_up_and_down() {
        let generation = Generation::detached();
        let a = generation.lease().unwrap();
        let b = generation.lease().unwrap();
        assert_eq!(generation.live_leases(), 2);
        assert_eq!(a.generation_number(), 0);
        drop(a);
        drop(b);
        assert_eq!(generation.live_leases(), 0);
    }

    #[tokio::test]
    async fn switch_numbers_generations_and_retires_the_old_one() {
        let accounts = Accounts::new("a".into());
        let first = accounts.current();
        let second = accounts.switch("b".into()).await;
        assert!(first.is_retired());
        assert!(!second.is_retired());
        assert_eq!(second.number(), 2);
        assert_eq!(accounts.current().account(), &AccountId::from("b"));
        // `retired()` resolves for the old generation (a pending approval wakes up).
        first.retired().await;
    }
}
