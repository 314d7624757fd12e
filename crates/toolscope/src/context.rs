//! `CallContext`: what a running tool body holds — a cancellation token with its reason, and the
//! way to take an account-generation lease (TS-3, RUN-10, CMD-12).
//!
//! Cancellation is a tree: a generation's token is the parent of its turns' tokens, which are the
//! parents of their calls' tokens. Cancelling a parent reaches every call synchronously (no task
//! has to be polled for an account switch or a turn end to land); the reason is looked up along
//! the chain, nearest first.

use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;

use crate::error::{ErrorCode, ToolError};
use crate::generation::{Generation, GenerationLease};
use crate::grants::Denial;

/// Why a call was cancelled. Tools turn it into their result with [`CancelReason::to_error`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelReason {
    /// Someone asked: the user pressed stop, the host cancelled the call, or the caller stopped
    /// waiting for it (its future was dropped).
    Requested,
    /// A grant the call needs was revoked while it ran (TS-3).
    Revoked(Denial),
    /// The account was switched; the call's generation is retired (CMD-12).
    AccountSwitched,
    /// The call's turn ended.
    TurnEnded,
    /// The call's deadline passed (set by whoever enforces one, e.g. a host-wide limit).
    Deadline,
}

impl CancelReason {
    /// The public error a tool returns for this reason: `AGENT_PERMISSION_DENIED` for a
    /// revocation, `AGENT_EXEC_TIMEOUT` for a deadline, `AGENT_EXEC_CANCELLED` otherwise (TS-3,
    /// RUN-10).
    ///
    /// ```
    /// use toolscope::{CancelReason, ErrorCode};
    /// assert_eq!(CancelReason::Deadline.to_error().code(), ErrorCode::ExecTimeout);
    /// assert_eq!(CancelReason::TurnEnded.to_error().code(), ErrorCode::ExecCancelled);
    /// ```
    pub fn to_error(&self) -> ToolError {
        match self {
            CancelReason::Requested => ToolError::new(
                ErrorCode::ExecCancelled,
                "the call was cancelled before it finished and its processes were stopped; \
                 call again with a new callId if the work is still wanted",
            ),
            CancelReason::Revoked(denial) => ToolError::new(
                ErrorCode::PermissionDenied,
                format!("a permission was revoked while the call ran, so it was stopped: {denial}"),
            ),
            CancelReason::AccountSwitched => ToolError::new(
                ErrorCode::ExecCancelled,
                "the account was switched while the call ran, so it was stopped; start a new \
                 turn under the current account",
            ),
            CancelReason::TurnEnded => ToolError::new(
                ErrorCode::ExecCancelled,
                "the turn ended while the call ran, so it was stopped; make the call in a new turn",
            ),
            CancelReason::Deadline => ToolError::new(
                ErrorCode::ExecTimeout,
                "the call passed its deadline and was stopped; allow more time or split the work",
            ),
        }
    }
}

/// One node of the cancellation tree.
#[derive(Debug)]
pub(crate) struct Canceller {
    token: CancellationToken,
    reason: OnceLock<CancelReason>,
    parent: Option<Arc<Canceller>>,
}

impl Canceller {
    pub(crate) fn root() -> Arc<Self> {
        Arc::new(Canceller {
            token: CancellationToken::new(),
            reason: OnceLock::new(),
            parent: None,
        })
    }

    /// A node cancelled whenever `self` is (at once, if `self` already is).
    pub(crate) fn child(self: &Arc<Self>) -> Arc<Self> {
        Arc::new(Canceller {
            token: self.token.child_token(),
            reason: OnceLock::new(),
            parent: Some(Arc::clone(self)),
        })
    }

    /// Cancels with `reason`; false if this node was already cancelled (the first reason wins).
    pub(crate) fn cancel(&self, reason: CancelReason) -> bool {
        if self.token.is_cancelled() {
            return false;
        }
        // The reason is stored before the token fires, so whoever wakes on the token finds it.
        let first = self.reason.set(reason).is_ok();
        self.token.cancel();
        first
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    pub(crate) fn reason(&self) -> Option<CancelReason> {
        if !self.token.is_cancelled() {
            return None;
        }
        let mut node = Some(self);
        while let Some(n) = node {
            if let Some(reason) = n.reason.get() {
                return Some(reason.clone());
            }
            node = n.parent.as_deref();
        }
        // Unreachable by construction (every cancel stores a reason first); fail closed anyway.
        Some(CancelReason::Requested)
    }

    pub(crate) async fn cancelled(&self) -> CancelReason {
        self.token.cancelled().await;
        self.reason().unwrap_or(CancelReason::Requested)
    }
}

/// The context a tool body runs in: cancellation (awaitable and pollable), its reason, and
/// account-generation leases. Cheap to clone; clones share one token.
///
/// The gate cancels it on explicit cancel, revocation, account switch and turn end. A body
/// `select!`s on [`cancelled`](CallContext::cancelled) while it awaits, a blocking thread polls
/// [`is_cancelled`](CallContext::is_cancelled), and either maps the
/// [`CancelReason`] with [`CancelReason::to_error`].
///
/// ```
/// use std::time::Duration;
/// use toolscope::{CallContext, CancelReason, ErrorCode};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let (ctx, handle) = CallContext::standalone();
/// let work = async {
///     tokio::select! {
///         reason = ctx.cancelled() => Err(reason.to_error()),
///         () = tokio::time::sleep(Duration::from_secs(60)) => Ok("done"),
///     }
/// };
/// handle.cancel(CancelReason::Deadline);
/// assert_eq!(work.await.unwrap_err().code(), ErrorCode::ExecTimeout);
/// assert!(ctx.is_cancelled());
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct CallContext {
    call_id: Arc<str>,
    canceller: Arc<Canceller>,
    generation: Generation,
}

/// Cancels one [`CallContext`] (and every clone of it). Cheap to clone.
#[derive(Clone, Debug)]
pub struct CancelHandle {
    canceller: Arc<Canceller>,
}

impl CancelHandle {
    /// Cancels with `reason`. Returns false if the context was already cancelled; the first
    /// reason stays.
    pub fn cancel(&self, reason: CancelReason) -> bool {
        self.canceller.cancel(reason)
    }

    /// True once the context is cancelled, by this handle or otherwise.
    pub fn is_cancelled(&self) -> bool {
        self.canceller.is_cancelled()
    }
}

impl CallContext {
    pub(crate) fn new(call_id: &str, canceller: Arc<Canceller>, generation: Generation) -> Self {
        CallContext {
            call_id: Arc::from(call_id),
            canceller,
            generation,
        }
    }

    /// A context outside any ToolScope, with the only handle that cancels it. For tests and for
    /// hosts that drive cancellation themselves (e.g. a runner used on its own). It has its own
    /// account generation, so [`lease`](CallContext::lease) works and nothing else waits on it.
    /// Its call id is `"standalone"`.
    pub fn standalone() -> (CallContext, CancelHandle) {
        let canceller = Canceller::root();
        let ctx = CallContext::new("standalone", Arc::clone(&canceller), Generation::detached());
        (ctx, CancelHandle { canceller })
    }

    /// A context for work a call starts that outlives the call (a background task, BG-1): no
    /// child of a turn, so the turn's end does not cancel it, but of `generation`, whose leases
    /// it hands out — so an account switch waits for it. Whoever holds the handle must cancel it
    /// with [`CancelReason::AccountSwitched`] once `generation` is retired (CMD-12): nothing
    /// else will.
    pub fn outliving(call_id: &str, generation: Generation) -> (CallContext, CancelHandle) {
        let canceller = Canceller::root();
        let ctx = CallContext::new(call_id, Arc::clone(&canceller), generation);
        (ctx, CancelHandle { canceller })
    }

    /// The call's `callId`.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// True once the call is cancelled. Cheap (one atomic load); fine to poll from a blocking
    /// thread.
    pub fn is_cancelled(&self) -> bool {
        self.canceller.is_cancelled()
    }

    /// Why the call was cancelled, or `None` while it is not.
    pub fn reason(&self) -> Option<CancelReason> {
        self.canceller.reason()
    }

    /// Resolves (with the reason) once the call is cancelled; at once if it already is.
    /// Cancel-safe: drop it and call again freely.
    pub async fn cancelled(&self) -> CancelReason {
        self.canceller.cancelled().await
    }

    /// `Err` with the reason's public error if the call is cancelled: a one-line check before
    /// each step that starts something.
    pub fn check(&self) -> Result<(), ToolError> {
        match self.reason() {
            Some(reason) => Err(reason.to_error()),
            None => Ok(()),
        }
    }

    /// A lease on the call's account generation. Hold it in every thread that keeps working for
    /// the call (e.g. a blocking wait on a child process) until that work has truly ended: the
    /// next account is not published while one is alive (CMD-12). Refused with
    /// `AGENT_ACCOUNT_RETIRED` once the generation is retired — start no new work then.
    pub fn lease(&self) -> Result<GenerationLease, ToolError> {
        self.generation.lease()
    }

    /// The account generation the call belongs to.
    pub fn generation(&self) -> &Generation {
        &self.generation
    }

    pub(crate) fn cancel(&self, reason: CancelReason) -> bool {
        self.canceller.cancel(reason)
    }

    pub(crate) fn handle(&self) -> CancelHandle {
        CancelHandle {
            canceller: Arc::clone(&self.canceller),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_cancel_reason_wins() {
        let (ctx, handle) = CallContext::standalone();
        assert_eq!(ctx.reason(), None);
        assert!(ctx.check().is_ok());
        assert!(handle.cancel(CancelReason::TurnEnded));
        assert!(!handle.cancel(CancelReason::Deadline));
        assert_eq!(ctx.reason(), Some(CancelReason::TurnEnded));
        assert_eq!(ctx.check().unwrap_err().code(), ErrorCode::ExecCancelled);
    }

    #[test]
    fn a_parent_cancel_reaches_the_child_with_the_parents_reason() {
        let root = Canceller::root();
        let child = root.child();
        assert!(root.cancel(CancelReason::AccountSwitched));
        assert!(child.is_cancelled());
        assert_eq!(child.reason(), Some(CancelReason::AccountSwitched));
        // A child made after the parent was cancelled is born cancelled.
        let late = root.child();
        assert_eq!(late.reason(), Some(CancelReason::AccountSwitched));
        assert!(!late.cancel(CancelReason::Deadline));
    }

    #[test]
    fn a_child_cancel_does_not_reach_the_parent() {
        let root = Canceller::root();
        let child = root.child();
        child.cancel(CancelReason::Requested);
        assert!(!root.is_cancelled());
        assert_eq!(root.reason(), None);
    }

    #[test]
    fn every_reason_maps_to_its_public_error() {
        let revoked = CancelReason::Revoked(Denial::AuthorityUnavailable);
        for (reason, code) in [
            (CancelReason::Requested, ErrorCode::ExecCancelled),
            (revoked, ErrorCode::PermissionDenied),
            (CancelReason::AccountSwitched, ErrorCode::ExecCancelled),
            (CancelReason::TurnEnded, ErrorCode::ExecCancelled),
            (CancelReason::Deadline, ErrorCode::ExecTimeout),
        ] {
            let err = reason.to_error();
            assert_eq!(err.code(), code, "{reason:?}");
            assert!(err.message().contains(';') || err.message().contains(':'));
        }
    }

    #[tokio::test]
    async fn cancelled_resolves_at_once_when_already_cancelled() {
        let (ctx, handle) = CallContext::standalone();
        handle.cancel(CancelReason::Requested);
        assert_eq!(ctx.cancelled().await, CancelReason::Requested);
        assert_eq!(ctx.call_id(), "standalone");
    }

    #[test]
    fn a_standalone_context_can_take_a_lease() {
        let (ctx, _handle) = CallContext::standalone();
        let lease = ctx.lease().unwrap();
        assert_eq!(ctx.generation().live_leases(), 1);
        drop(lease);
        assert_eq!(ctx.generation().live_leases(), 0);
    }
}
