//! `agent-exec check run_command`: what a call would do, without asking or running anything.
//!
//! **Owns:** the report ([`Checked`]) and its one JSON line. The gate in it is the one the call
//! asks, in every mode: the report comes from the same planning as the call (module `run`:
//! argv-policy's decision, then the executor's re-checks of `rm`'s paths, `write_paths`,
//! `sudo` and `sandbox: false`), and its `confirmation` is the text the user would be shown
//! (TRUST-4). **Refuses to know:** how the line is printed, and the exit codes (the binary's).

use std::path::Path;

use argv_policy::{Gate, Policy, RunCommandArgs, Via};
use serde_json::{Value, json};
use toolscope::{CallContext, ErrorCode, ToolError};

use crate::run::{Admit, Planning};
use crate::state::RunCommandState;
use crate::types::RunCommandOptions;

/// What a `run_command` call would do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Checked {
    /// Refused before any question: nothing would run.
    Refuse {
        /// The stable error code (`RUN_COMMAND_*`, `AGENT_EXEC_*`).
        code: ErrorCode,
        /// What was wrong and what to send instead.
        message: String,
    },
    /// Allowed behind its gate.
    Run {
        /// Directly or through the parsed script.
        shell: bool,
        /// `none`, `confirm` or `password`.
        gate: &'static str,
        /// A read-only allowlist hit (RC-9).
        parallel: bool,
        /// The gate's label.
        label: Option<String>,
        /// The paths `rm` moves to the trash.
        trash: Vec<String>,
        /// Runs through `sudo` (RC-11).
        sudo: bool,
        /// What the user is asked, as every channel shows it (TRUST-4); `None` without a gate.
        confirmation: Option<String>,
        /// Why it would come back not executed without asking (its program is missing).
        message: Option<String>,
    },
}

impl Checked {
    /// True when the call is allowed (behind its gate).
    pub fn is_run(&self) -> bool {
        matches!(self, Checked::Run { .. })
    }

    /// The one JSON line, keys in this order: `decision` (`run`|`refuse`), `via`
    /// (`direct`|`shell`), `gate` (`none`|`confirm`|`password`), `parallel`, `code`, `message`,
    /// `label`, `trash`, `sudo`, `confirmation` (the text the user is asked, or `null`).
    pub fn json_line(&self) -> String {
        let value = match self {
            Checked::Refuse { code, message } => json!({
                "decision": "refuse", "via": null, "gate": null, "parallel": false,
                "code": code.as_str(), "message": message, "label": null, "trash": [],
                "sudo": false, "confirmation": null,
            }),
            Checked::Run {
                shell,
                gate,
                parallel,
                label,
                trash,
                sudo,
                confirmation,
                message,
            } => json!({
                "decision": "run", "via": if *shell { "shell" } else { "direct" }, "gate": gate,
                "parallel": parallel, "code": null, "message": message, "label": label,
                "trash": trash, "sudo": sudo, "confirmation": confirmation,
            }),
        };
        let keys = [
            "decision",
            "via",
            "gate",
            "parallel",
            "code",
            "message",
            "label",
            "trash",
            "sudo",
            "confirmation",
        ];
        let fields: Vec<String> = keys
            .iter()
            .map(|k| {
                format!(
                    "{}: {}",
                    Value::from(*k),
                    value.get(*k).unwrap_or(&Value::Null)
                )
            })
            .collect();
        format!("{{{}}}", fields.join(", "))
    }
}

/// What `args` would do in `workdir` under `policy` and `options`: the same planning as the
/// call, stopped before the gate. Reads the file system (`rm`'s paths, `write_paths`, the
/// program on the sandbox's `PATH`); changes nothing and runs nothing.
///
/// ```no_run
/// use run_command_tool::{Mode, Policy, RunCommandArgs, RunCommandOptions};
/// let mut args = RunCommandArgs::new(["sh", "wp.sh"]);
/// args.write_paths = vec!["/home/me/.local/bin".into()];
/// let checked = run_command_tool::check(
///     args,
///     std::path::Path::new("/home/me/project"),
///     &Policy::defaults(Mode::Auto),
///     &RunCommandOptions::for_home("/home/me"),
/// );
/// println!("{}", checked.json_line());
/// ```
pub fn check(
    args: RunCommandArgs,
    workdir: &Path,
    policy: &Policy,
    options: &RunCommandOptions,
) -> Checked {
    match plan(args, workdir, policy, options) {
        Ok(checked) => checked,
        Err(e) => Checked::Refuse {
            code: e.code(),
            message: e.message().to_owned(),
        },
    }
}

fn plan(
    args: RunCommandArgs,
    workdir: &Path,
    policy: &Policy,
    options: &RunCommandOptions,
) -> Result<Checked, ToolError> {
    let lease = fsguard::RootLease::acquire(workdir).map_err(|e| {
        ToolError::new(
            ErrorCode::ExecPathInvalid,
            format!("the working directory cannot be used: {e}"),
        )
    })?;
    let state = RunCommandState::default();
    let (ctx, _cancel) = CallContext::standalone();
    let how = Admit {
        watchers_allowed: false,
    };
    Ok(
        match crate::run::plan(args, &lease, policy, &state, options, how, &ctx)? {
            Planning::NotExecuted(out) => Checked::Run {
                shell: false,
                gate: Gate::None.kind(),
                parallel: false,
                label: None,
                trash: Vec::new(),
                sudo: false,
                confirmation: None,
                message: out.message,
            },
            Planning::Gated(planned) => Checked::Run {
                shell: matches!(planned.via, Via::Shell(_)),
                gate: planned.gate.kind(),
                parallel: planned.parallel,
                label: planned.ask.question().map(|q| q.label.clone()),
                trash: planned
                    .trash
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect(),
                sudo: planned.sudo,
                confirmation: planned.ask.question().map(|q| q.text().to_owned()),
                message: None,
            },
        },
    )
}
