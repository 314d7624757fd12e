//! The `run_command` tool of seed 001: argv-policy's decision carried out. SPEC RC-1…RC-14,
//! RCS-1…RCS-3; DESIGN invariants 1–7.
//!
//! **Owns:** the [`Asker`] through which a host asks the user (confirmations and passwords,
//! CannotAsk never being a yes); checking a password with the system (PAM service
//! `agent-exec`, `sudo -S -v`); the run_command sandbox (module docs below); `rm` → the trash
//! after re-checking every path on the file system; `sudo -n` and `sandbox: false` outside the
//! sandbox; hints (RC-13); masking (RC-14); the RC-9 lock ([`RunCommandState`]); the result
//! ([`RunCommandOutput`]).
//!
//! **Refuses to know:** the rules (argv-policy's `decide` says what runs and behind which gate),
//! how a question reaches the user (the host's `Asker`), other tools, and the front ends.
//!
//! # Example
//! ```no_run
//! # async fn example() -> Result<(), toolscope::ToolError> {
//! use std::sync::Arc;
//! use run_command_tool::{DenyAllAsker, Mode, Policy, RunCommandArgs, RunCommandOptions,
//!                        RunCommandState};
//!
//! let lease = Arc::new(fsguard::RootLease::acquire("/home/me/project").unwrap());
//! let policy = Policy::load(Mode::Auto, None).unwrap();
//! let state = RunCommandState::default();
//! let options = RunCommandOptions::for_home("/home/me");
//! let (ctx, _cancel) = toolscope::CallContext::standalone();
//! let out = run_command_tool::run_command(
//!     RunCommandArgs::new(["cargo", "test", "--offline"]),
//!     lease, &policy, &DenyAllAsker, &state, &options, &ctx,
//! ).await?;
//! println!("{} (exit {:?})", out.output, out.exit_code);
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod ask;
mod capture;
mod env;
mod gate;
mod hint;
mod outside;
mod rm;
mod roots;
mod run;
mod sandboxed;
mod state;
mod types;
mod verify;

pub use argv_policy::{Mode, Policy, RunCommandArgs};
pub use ask::{Asker, Confirmation, DenyAllAsker, Password, PasswordReply, Question};
pub use run::run_command;
pub use state::RunCommandState;
pub use types::{
    Denial, OUTPUT_CAP, RUN_COMMAND_TIMEOUT, RunCommandOptions, RunCommandOutput, Status, Trashed,
    input_schema,
};
