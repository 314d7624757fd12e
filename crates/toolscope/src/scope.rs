//! `ToolScope`: one per turn. callId dedup (TS-1), the 32-call budget (TS-2), authorization
//! before and during each call (TS-3), the scope requirement (TS-4).

use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio::sync::watch;

use crate::authority::Authority;
use crate::context::{CallContext, CancelHandle, CancelReason, Canceller};
use crate::error::{ErrorCode, ToolError};
use crate::generation::{Generation, GenerationLease, retired_error};
use crate::grants::{Denial, PluginId, Tool};

/// At most this many tool calls are admitted per turn (TS-2).
pub const MAX_CALLS_PER_TURN: usize = 32;

/// A `callId` is 1 to this many bytes long (TS-1).
pub const MAX_CALL_ID_BYTES: usize = 256;

/// What a call produces: the tool's JSON result, or its public error.
type Outcome = Result<Value, ToolError>;

/// The gate of one turn. Cheap to clone; clones are the same turn.
///
/// ```
/// use std::sync::Arc;
/// use serde_json::json;
/// use toolscope::{Accounts, Capability, MemoryAuthority, PluginRecord, Tool};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let authority = Arc::new(MemoryAuthority::default());
/// authority.update(|g| {
///     g.plugins.insert("notes".parse().unwrap(), PluginRecord::fully_granted("pkg@1", &[Capability::TerminalExec]));
/// });
/// let accounts = Accounts::new("alice".into());
/// let turn = accounts.current().begin_turn(authority, "notes".parse().unwrap()).unwrap();
///
/// let tool = Tool::new("command").requires(Capability::TerminalExec);
/// let args = json!({"command": "echo hi"});
/// let first = turn.call("call-1", &tool, &args, |ctx| async move {
///     ctx.check()?; // cancelled already? then start nothing
///     Ok(json!({"stdout": "hi\n"}))
/// }).await;
/// // The same callId again: the recorded result, the body does not run twice (TS-1).
/// let again = turn.call("call-1", &tool, &args, |_ctx| async { unreachable!() }).await;
/// assert_eq!(first, again);
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct ToolScope {
    inner: Arc<ScopeInner>,
}

#[derive(Debug)]
struct ScopeInner {
    authority: Arc<dyn Authority>,
    plugin: PluginId,
    generation: Generation,
    canceller: Arc<Canceller>,
    calls: Mutex<Calls>,
}

#[derive(Debug, Default)]
struct Calls {
    /// Admitted calls; counted under the same lock as the callId table, so a duplicate never
    /// costs budget and no two callers can both take the 32nd slot.
    admitted: usize,
    by_id: HashMap<String, Entry>,
}

#[derive(Debug)]
struct Entry {
    tool: String,
    args: Value,
    outcome: watch::Receiver<Option<Outcome>>,
    cancel: CancelHandle,
}

enum Admission {
    Join(watch::Receiver<Option<Outcome>>),
    Lead(Leader),
}

struct Leader {
    ctx: CallContext,
    publish: Publish,
}

/// Publishes the leader's outcome to joiners. If the leader's future is dropped before it
/// finished, `Drop` cancels the call and publishes that, so joiners never wait forever.
struct Publish {
    outcome: watch::Sender<Option<Outcome>>,
    cancel: CancelHandle,
    /// Held until the outcome is published: a switch waits for it (CMD-12).
    _lease: GenerationLease,
    done: bool,
}

impl Publish {
    fn finish(mut self, outcome: Outcome) {
        self.outcome.send_replace(Some(outcome));
        self.done = true;
    }
}

impl Drop for Publish {
    fn drop(&mut self) {
        if !self.done {
            self.cancel.cancel(CancelReason::Requested);
            self.outcome
                .send_replace(Some(Err(CancelReason::Requested.to_error())));
        }
    }
}

impl ToolScope {
    pub(crate) fn new(
        generation: Generation,
        authority: Arc<dyn Authority>,
        plugin: PluginId,
    ) -> Self {
        let canceller = generation.canceller().child();
        ToolScope {
            inner: Arc::new(ScopeInner {
                authority,
                plugin,
                generation,
                canceller,
                calls: Mutex::new(Calls::default()),
            }),
        }
    }

    /// The scope a call runs in, or `AGENT_EXEC_SCOPE_REQUIRED` when there is none (TS-4).
    ///
    /// ```
    /// use toolscope::{ErrorCode, ToolScope};
    /// let err = ToolScope::require(None).unwrap_err();
    /// assert_eq!(err.code(), ErrorCode::ExecScopeRequired);
    /// ```
    pub fn require(scope: Option<&ToolScope>) -> Result<&ToolScope, ToolError> {
        scope.ok_or_else(ToolError::scope_required)
    }

    /// The plugin this turn runs for.
    pub fn plugin(&self) -> &PluginId {
        &self.inner.plugin
    }

    /// The account generation this turn belongs to.
    pub fn generation(&self) -> &Generation {
        &self.inner.generation
    }

    /// How many calls this turn admitted (at most [`MAX_CALLS_PER_TURN`]).
    pub fn admitted(&self) -> usize {
        self.calls().admitted
    }

    /// Ends the turn: running calls are cancelled with [`CancelReason::TurnEnded`], new calls
    /// are refused with `AGENT_EXEC_SCOPE_REQUIRED`.
    pub fn end_turn(&self) {
        self.inner.canceller.cancel(CancelReason::TurnEnded);
    }

    /// True once the turn ended (or its generation was retired).
    pub fn is_ended(&self) -> bool {
        self.inner.canceller.is_cancelled()
    }

    /// Cancels the running call `call_id` with [`CancelReason::Requested`]. False if no such
    /// call is running.
    pub fn cancel(&self, call_id: &str) -> bool {
        let calls = self.calls();
        match calls.by_id.get(call_id) {
            Some(entry) if entry.outcome.borrow().is_none() => {
                entry.cancel.cancel(CancelReason::Requested)
            }
            _ => false,
        }
    }

    /// Runs `body` for `call_id` under the gate, at most once per `callId` in this turn.
    ///
    /// In order: the `callId` must be 1–256 bytes (`AGENT_CALL_ID_INVALID`); the generation must
    /// be current (`AGENT_ACCOUNT_RETIRED`) and the turn live (`AGENT_EXEC_SCOPE_REQUIRED`). A
    /// known `callId` with the same tool and arguments joins the running call or gets its
    /// recorded outcome; with anything different it is refused (`AGENT_CALL_ID_REUSED`). A new
    /// `callId` takes one of the turn's 32 slots (`AGENT_BUDGET_EXHAUSTED` when none is left) and
    /// an account-generation lease; then the authority is asked (`AGENT_PERMISSION_DENIED`), and
    /// only then does `body` start. While it runs, every authority change re-checks the grants
    /// and a denial cancels its [`CallContext`] with [`CancelReason::Revoked`].
    ///
    /// A call refused by the authority has used its slot, and its denial is the recorded
    /// outcome for its `callId`; a refusal before that (invalid id, budget, ended turn) records
    /// nothing.
    ///
    /// `body` decides what a cancelled call returns (usually [`CancelReason::to_error`]); the
    /// gate never drops a running body itself, so the body can stop its processes first. One
    /// exception fails closed: an `Ok` from a body whose grants were revoked becomes the
    /// revocation's `AGENT_PERMISSION_DENIED`.
    /// Dropping this future drops the body and cancels the call; joiners then get
    /// `AGENT_EXEC_CANCELLED`.
    pub async fn call<F, Fut>(&self, call_id: &str, tool: &Tool, args: &Value, body: F) -> Outcome
    where
        F: FnOnce(CallContext) -> Fut,
        Fut: Future<Output = Outcome>,
    {
        match self.admit(call_id, tool, args)? {
            Admission::Join(outcome) => join(outcome).await,
            Admission::Lead(Leader { ctx, publish }) => {
                let outcome = self.run(ctx, tool, body).await;
                publish.finish(outcome.clone());
                outcome
            }
        }
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, Calls> {
        // The table is consistent at every await-free step; a panic elsewhere cannot leave it
        // half-written, so a poisoned lock is still safe to use.
        self.inner
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn admit(&self, call_id: &str, tool: &Tool, args: &Value) -> Result<Admission, ToolError> {
        validate_call_id(call_id)?;
        if self.inner.generation.is_retired() {
            return Err(retired_error(self.inner.generation.account()));
        }
        if self.is_ended() {
            return Err(ToolError::new(
                ErrorCode::ExecScopeRequired,
                "this turn has ended, so its ToolScope takes no more calls; make the call in a \
                 new turn",
            ));
        }
        let mut calls = self.calls();
        if let Some(entry) = calls.by_id.get(call_id) {
            if entry.tool != tool.name() || entry.args != *args {
                return Err(ToolError::new(
                    ErrorCode::CallIdReused,
                    format!(
                        "callId {call_id:?} was already used in this turn for a different call; \
                         give every distinct call its own callId (repeat a callId only to retry \
                         the identical call)"
                    ),
                ));
            }
            return Ok(Admission::Join(entry.outcome.clone()));
        }
        if calls.admitted >= MAX_CALLS_PER_TURN {
            return Err(ToolError::new(
                ErrorCode::BudgetExhausted,
                format!(
                    "this turn already made its {MAX_CALLS_PER_TURN} tool calls, so this one did \
                     not run; finish the turn with what you have and continue in a new turn"
                ),
            ));
        }
        let lease = self.inner.generation.lease()?;
        calls.admitted += 1;
        // A child of the turn: born cancelled if the turn ended a moment ago, which `run` sees
        // before starting anything.
        let ctx = CallContext::new(
            call_id,
            self.inner.canceller.child(),
            self.inner.generation.clone(),
        );
        let (tx, rx) = watch::channel(None);
        calls.by_id.insert(
            call_id.to_owned(),
            Entry {
                tool: tool.name().to_owned(),
                args: args.clone(),
                outcome: rx,
                cancel: ctx.handle(),
            },
        );
        let publish = Publish {
            outcome: tx,
            cancel: ctx.handle(),
            _lease: lease,
            done: false,
        };
        Ok(Admission::Lead(Leader { ctx, publish }))
    }

    async fn run<F, Fut>(&self, ctx: CallContext, tool: &Tool, body: F) -> Outcome
    where
        F: FnOnce(CallContext) -> Fut,
        Fut: Future<Output = Outcome>,
    {
        let authority = &self.inner.authority;
        // Subscribe before checking, so a change between the check and the watch is not lost.
        let mut revisions = authority.watch();
        revisions.mark_unchanged();
        ctx.check()?;
        authority.check(&self.inner.plugin, tool)?;

        let mut body = pin!(body(ctx.clone()));
        let mut watch = pin!(async {
            loop {
                tokio::select! {
                    _ = ctx.cancelled() => return,
                    changed = revisions.changed() => {
                        let denial = match changed {
                            Ok(()) => match authority.check(&self.inner.plugin, tool) {
                                Ok(()) => continue,
                                Err(denial) => denial,
                            },
                            // No sender left: revocations could go unseen. Fail closed.
                            Err(_) => Denial::AuthorityUnavailable,
                        };
                        ctx.cancel(CancelReason::Revoked(denial));
                        return;
                    }
                }
            }
        });
        let outcome = tokio::select! {
            outcome = &mut body => outcome,
            // Cancelled (by the watch or otherwise): let the body stop its work and answer.
            () = &mut watch => body.await,
        };
        // Fail closed (TS-3): whatever a body produced after a grant was revoked is not handed
        // to the agent, even if the body ignored the cancellation.
        match (outcome, ctx.reason()) {
            (Ok(_), Some(reason @ CancelReason::Revoked(_))) => Err(reason.to_error()),
            (outcome, _) => outcome,
        }
    }
}

fn validate_call_id(call_id: &str) -> Result<(), ToolError> {
    if call_id.is_empty() || call_id.len() > MAX_CALL_ID_BYTES {
        return Err(ToolError::new(
            ErrorCode::CallIdInvalid,
            format!(
                "callId must be 1 to {MAX_CALL_ID_BYTES} bytes long, got {} bytes; send a short, \
                 unique id per call",
                call_id.len()
            ),
        ));
    }
    Ok(())
}

async fn join(mut outcome: watch::Receiver<Option<Outcome>>) -> Outcome {
    match outcome.wait_for(Option::is_some).await {
        Ok(published) => match &*published {
            Some(outcome) => outcome.clone(),
            None => Err(CancelReason::Requested.to_error()),
        },
        // The leader vanished without publishing (cannot happen: `Publish::drop` publishes).
        Err(_) => Err(CancelReason::Requested.to_error()),
    }
}
