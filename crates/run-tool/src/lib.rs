//! The `run` tool: `awk`, `wc`, `sort` and `diff` on the files of a mirrored workspace, under a
//! deny-default sandbox. RUN-1…RUN-15; invariant 1 (validate, then act).
//!
//! **Owns:** the wire types [`AgentRunArguments`] and [`AgentRunOutput`] (exact camelCase
//! names, unknown fields refused, JSON Schemas); the argument whitelist of RUN-3 and the limits
//! of RUN-2, RUN-4 and RUN-5 ([`validate`]); the fixed program paths ([`Program`]); the run's
//! private temp dir and environment (RUN-8); and the meaning of an [`exec::Outcome`] for the
//! caller (RUN-9, RUN-10, RUN-12), including a mirror that could not be taken
//! ([`mirror_error`]: a hard-linked file in the folder is `AGENT_EXEC_PATH_INVALID`).
//!
//! **Refuses to know:** other tools, the host, accounts and grants (the caller's `ToolScope`
//! gate runs first, TS-*), how the mirror was made or is written back (RUN-11 is the host's),
//! and how the sandbox is built on each platform (`exec`'s).
//!
//! **Validate, then act.** [`run`] calls [`validate`] before it creates or starts anything:
//! every refusal returns with the mirror untouched and no process started. Validation opens
//! every path through the mirror's [`fsguard::RootLease`] one component at a time without
//! following symbolic links; the sandbox is still the boundary (a file swapped for a symlink
//! after validation leads nowhere outside the mirror: the kernel refuses it).
//!
//! **File operands.** An item of `args` that starts with `-` is always an option, so only the
//! whitelisted options pass and `-` (stdin) or `--help` are refused. A file whose name starts
//! with `-` is written `./-name` by the caller and reaches the program as `./-name` after `--`;
//! awk operands containing `=` are passed as `./name` too (awk would read `x=1` as an
//! assignment).
//!
//! # Example
//! ```no_run
//! # async fn example() -> Result<(), toolscope::ToolError> {
//! use std::sync::Arc;
//! use run_tool::AgentRunArguments;
//!
//! // The host made and pinned the mirror of the user's folder for this turn.
//! let mirror = Arc::new(fsguard::RootLease::acquire("/tmp/mirror-of-project").unwrap());
//! let args = AgentRunArguments::from_json(serde_json::json!({
//!     "program": "wc", "args": ["-l", "data.csv"]
//! }))?;
//! let (ctx, _cancel) = toolscope::CallContext::standalone();
//! let out = run_tool::run(args, mirror, &ctx).await?;
//! assert_eq!(out.exit_code, 0);
//! println!("{}", out.stdout); // "3 data.csv\n"
//! # Ok(()) }
//! ```
//!
//! Dependencies beyond the workspace's own crates: `serde`/`serde_json`/`schemars` for the wire
//! types, `tempfile` for the private temp dir.
#![deny(missing_docs)]

mod mirror;
mod run;
mod types;
mod validate;

pub use mirror::mirror_error;
pub use run::{OUTPUT_CAP, TEMP_PREFIX, run};
pub use types::{AgentRunArguments, AgentRunOutput, Denial, DeniedAccess};
pub use validate::{
    DEFAULT_TIMEOUT_MS, MAX_ARG_BYTES, MAX_ARGS, MAX_TIMEOUT_MS, MAX_TOTAL_ARG_BYTES, PATH_DETAIL,
    Program, ValidatedRun, validate,
};
