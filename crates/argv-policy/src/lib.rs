//! The `run_command` decision: argv commands with confirmation gates (RC-1,
//! RC-2, RC-3, RC-4, RC-5, RC-7, RC-9, RC-10, RC-11, RC-12, RC-14, RC-15).
//!
//! **Owns**: the argv schema ([`RunCommandArgs`]), shell-metacharacter detection, `sh -c`/`bash -c`
//! script parsing (with `brush-parser`) and per-command validation of every simple command in
//! it, launchers seen through (`env`, `xargs`, `find -exec`, …), the denied list, the read-only
//! allowlist (`data/read_only_command.json`, written from the tools' manuals), sensitive paths,
//! the argv forms of `cd`, `open`, `rm` (→ trash), `sudo`, `sandbox: false` and `write_paths`,
//! watcher detection with `package.json` resolution, secret masking (by value and by form), the
//! private locations under `$HOME` and the writable caches shared with the sandbox ([`private`]),
//! and the user's JSON config.
//!
//! **Refuses to know**: how anything is run. [`decide`] is pure and deterministic (it reads
//! only `package.json` files, to find watchers); the sandbox, the trash, `sudo -n`, password
//! prompts and background tasks belong to the executor (the next issue) and to `host-shim`.
//! It does not know the `run` and `command` tools either.
//!
//! ```
//! use argv_policy::{decide, decision_json_line, Context, Decision, Gate, Mode, Policy,
//!                  RefuseCode, RunCommandArgs};
//!
//! let ctx = Context::new("/home/u/proj", "/home/u");
//! let policy = Policy::load(Mode::Safe, Some(r#"{"read_only_command": ["make -n"]}"#)).unwrap();
//!
//! // A read-only allowlist hit runs at once, in parallel with others (RC-9).
//! let d = decide(&RunCommandArgs::new(["git", "log", "-n", "3"]), &policy, &ctx);
//! assert!(matches!(d, Decision::Run { gate: Gate::None, parallel: true, .. }));
//!
//! // A script is parsed and every command in it checked: `rm` inside it is refused (RC-4).
//! let d = decide(&RunCommandArgs::new(["sh", "-c", "ls | env rm x"]), &policy, &ctx);
//! assert_eq!(d.code(), Some(RefuseCode::RmInScript));
//!
//! // The decision as one JSON line (`agent-exec check run_command` prints the executor's
//! // report, which adds its re-checks and the confirmation's text).
//! let d = decide(&RunCommandArgs::new(["cargo", "build"]), &policy, &ctx);
//! assert_eq!(
//!     decision_json_line(&d),
//!     r#"{"decision": "run", "via": "direct", "gate": "confirm", "parallel": false, "code": null, "message": null, "label": "cargo build", "trash": [], "sudo": false}"#
//! );
//! ```
//!
//! Error codes are the `RUN_COMMAND_*` strings of [`RefuseCode`]; every refusal's message says
//! what to send instead.
#![deny(missing_docs)]

mod check;
mod decide;
mod launch;
mod mask;
mod model;
pub mod network_home;
mod paths;
mod policy;
pub mod private;
mod readonly;
mod script;
mod shape;
mod watch;
mod words;

pub use decide::{MAX_ARGV, MAX_ARGV_BYTES, ShownScript, decide, display_argv, shown_scripts};
pub use mask::{find_token as find_mask_token, mask, mask_indexed, secret_env_values, secrets_in};
pub use model::{
    Context, Decision, Gate, Os, Refusal, RefuseCode, RunCommandArgs, Via, decision_json_line,
};
pub use policy::{ConfigError, Mode, Policy, ReadOnlyRule};
pub use private::SHELL_STARTUP_FILES;
pub use script::{MAX_DEPTH, MAX_NESTING, MAX_SCRIPT_BYTES};
pub use watch::MAX_SCRIPT_LEVELS;
pub use words::METACHARACTERS;

/// The decision alone for a CLI: parse the tool's JSON arguments, decide, and render the one
/// JSON line of [`decision_json_line`]. Bad JSON is a refusal line too. The gate is the
/// decision's; the executor's re-checks can raise it (`agent-exec check run_command` reports
/// those too).
pub fn check_json_line(args_json: &str, policy: &Policy, ctx: &Context) -> String {
    let decision = match RunCommandArgs::from_json(args_json) {
        Ok(args) => decide(&args, policy, ctx),
        Err(r) => Decision::Refuse {
            code: r.code,
            message: r.message,
        },
    };
    decision_json_line(&decision)
}
