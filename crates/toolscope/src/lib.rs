//! The policy gate every tool call passes, before it runs and while it runs.
//!
//! **Owns:** the stable error codes and the failed-call JSON ([`ErrorCode`], [`ToolError`];
//! RUN-13); host capabilities ([`Capability`], `local.terminal.exec@1`, `system.folder-pick@1`);
//! grants as data — plugin manifest, platform approval, user consent, folder grants ([`Grants`];
//! PERM-1, PERM-2, TS-5); the [`Authority`] trait that answers "may this call run now" and
//! watches for changes, with an in-memory [`MemoryAuthority`]; [`ToolScope`], one per turn —
//! `callId` dedup (TS-1), the 32-call budget (TS-2), authorization before and during each call
//! (TS-3), the scope requirement (TS-4); [`CallContext`], the cancellation a tool body awaits or
//! polls; and account generations with [`GenerationLease`] (CMD-12).
//!
//! **Refuses to know:** how a tool runs or what its arguments mean (they are opaque JSON,
//! compared only for dedup), any sandbox, processes, the file system (folder grants are compared
//! as paths, never opened), and where grants are stored.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use serde_json::json;
//! use toolscope::{Accounts, Capability, ErrorCode, MemoryAuthority, PluginRecord, Tool};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // The host's grants: the plugin declared, got approved for and was allowed terminal exec.
//! let authority = Arc::new(MemoryAuthority::default());
//! authority.update(|g| {
//!     g.plugins.insert("notes".parse().unwrap(), PluginRecord::fully_granted("notes@1.0.0", &[Capability::TerminalExec]));
//! });
//! let accounts = Accounts::new("alice".into());
//! let turn = accounts.current().begin_turn(authority.clone(), "notes".parse().unwrap()).unwrap();
//! let command = Tool::new("command").requires(Capability::TerminalExec); // TS-5
//!
//! // A call whose body waits for cancellation, while the user takes the permission back.
//! let args = json!({"command": "sleep 60"});
//! let call = turn.call("c1", &command, &args, |ctx| async move {
//!     tokio::select! {
//!         reason = ctx.cancelled() => Err(reason.to_error()),
//!         () = tokio::time::sleep(Duration::from_secs(60)) => Ok(json!({"exitCode": 0})),
//!     }
//! });
//! let revoke = async {
//!     tokio::time::sleep(Duration::from_millis(10)).await;
//!     authority.update(|g| { g.plugins.get_mut(&"notes".parse().unwrap()).unwrap().user_allowed.clear(); });
//! };
//! let (outcome, ()) = tokio::join!(call, revoke);
//! assert_eq!(outcome.unwrap_err().code(), ErrorCode::PermissionDenied); // TS-3
//! # });
//! ```
#![deny(missing_docs)]

mod authority;
mod capability;
mod context;
mod error;
mod generation;
mod grants;
mod scope;

pub use authority::{Authority, MemoryAuthority};
pub use capability::{Capability, CapabilityError};
pub use context::{CallContext, CancelHandle, CancelReason};
pub use error::{ErrorCode, ToolError, UnknownErrorCode};
pub use generation::{AccountId, Accounts, Generation, GenerationLease};
pub use grants::{
    Denial, FolderGrant, Grants, PlatformApproval, PluginId, PluginIdError, PluginManifest,
    PluginRecord, Requires, Tool,
};
pub use scope::{MAX_CALL_ID_BYTES, MAX_CALLS_PER_TURN, ToolScope};
