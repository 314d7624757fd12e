//! One `run_command` call end to end: decide, gate, lock, run (sandboxed, `sudo`, `sandbox:
//! false` or the trash), interpret, mask.
//!
//! **Owns:** the order of the steps (nothing starts and no file changes before the decision
//! and every gate passed, house rule 2) and the mapping of a refusal to its `RUN_COMMAND_*`
//! error. **Refuses to know:** the rules themselves (argv-policy's `decide`), how questions
//! reach the user (the [`Asker`]), and how the sandbox is built (`exec`).

use std::sync::Arc;

use argv_policy::{Context, Decision, Gate, Policy, RefuseCode, RunCommandArgs};
use fsguard::RootLease;
use toolscope::{CallContext, ErrorCode, ToolError};

use crate::ask::Asker;
use crate::gate::{self, Passed};
use crate::state::RunCommandState;
use crate::types::{RunCommandOptions, RunCommandOutput};
use crate::verify::{Pam, Sudo, Verifier};

/// Runs one `run_command` call.
///
/// In order:
/// 1. `argv_policy::decide` with the lease's path as the working directory, `options.home` and
///    the session's secrets; a refusal is `Err` with its `RUN_COMMAND_*` code and message.
/// 2. The gate: a confirmation through `asker.confirm`, a password through up to three
///    `asker.password` prompts, each checked by the system. An answer other than yes (or a
///    right password) is a result with `executed: false` and a message saying how to run it.
/// 3. The RC-9 lock: shared for allowlist hits (`parallel`), exclusive otherwise.
/// 4. The run, its result bounded and masked (RC-14); the secrets it revealed are kept in
///    `state` for the next decision.
///
/// # Errors
/// A refused decision (`RUN_COMMAND_*`), a cancelled call (`AGENT_EXEC_CANCELLED` or the
/// permission error of a revocation), `AGENT_EXEC_SANDBOX_UNAVAILABLE` /
/// `AGENT_EXEC_UNSUPPORTED` (nothing runs, never unsandboxed), `AGENT_EXEC_PATH_INVALID` for a
/// `write_paths` entry or an `rm` path the file system refuses, `AGENT_EXEC_IO_FAILED`.
pub async fn run_command(
    args: RunCommandArgs,
    workdir: Arc<RootLease>,
    policy: &Policy,
    asker: &dyn Asker,
    state: &RunCommandState,
    options: &RunCommandOptions,
    ctx: &CallContext,
) -> Result<RunCommandOutput, ToolError> {
    ctx.check()?;
    let mut context = Context::new(workdir.path(), &options.home);
    context.secrets = state.secrets();
    let decision = argv_policy::decide(&args, policy, &context);
    let (via, gate, parallel, trash, sudo) = match decision {
        Decision::Refuse { code, message } => return Err(refusal(code, message)),
        Decision::Run {
            via,
            gate,
            parallel,
            trash,
            sudo,
        } => (via, gate, parallel, trash, sudo),
    };
    let label = gate
        .label()
        .map(str::to_owned)
        .unwrap_or_else(|| argv_policy::display_argv(&args.argv));
    let _ = (via, trash, sudo);
    let passed = match &gate {
        Gate::None => Passed::Yes,
        Gate::Confirm(l) => {
            gate::confirm(asker, l, "the policy asks before this command", ctx).await?
        }
        Gate::Password(l) => {
            let verifier: &dyn Verifier = if sudo { &Sudo } else { &Pam };
            gate::password(asker, verifier, l, "this command needs your password", ctx).await?
        }
    };
    if let Passed::No(message) = passed {
        return Ok(RunCommandOutput::not_executed(label, message));
    }
    // RC-9: allowlist hits share the session, everything else runs alone (after its gate, so
    // a prompt never holds the lock).
    let _guard = if parallel {
        Lock::Shared(state.lock.read().await)
    } else {
        Lock::Alone(state.lock.write().await)
    };
    Err(ToolError::new(
        ErrorCode::ExecUnsupported,
        "run_command's executor is not built yet; nothing ran",
    ))
}

/// The RC-9 lock held while the command runs.
#[allow(dead_code, reason = "held for its drop")]
enum Lock<'a> {
    Shared(tokio::sync::RwLockReadGuard<'a, ()>),
    Alone(tokio::sync::RwLockWriteGuard<'a, ()>),
}

/// A refusal of the decision as the tool's error: the `RUN_COMMAND_*` string is the code.
pub(crate) fn refusal(code: RefuseCode, message: String) -> ToolError {
    // toolscope spells every RefuseCode string; a code argv-policy adds later and toolscope
    // does not know yet still refuses, as invalid arguments (a test pins that every one maps).
    let mapped = code
        .as_str()
        .parse::<ErrorCode>()
        .unwrap_or(ErrorCode::RunCommandArgumentsInvalid);
    ToolError::new(mapped, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refuse_code_is_a_toolscope_code_with_the_same_string() {
        for code in RefuseCode::ALL {
            let err = refusal(*code, "m".into());
            assert_eq!(err.code().as_str(), code.as_str());
        }
    }
}
