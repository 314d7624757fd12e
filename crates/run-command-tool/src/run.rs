//! One `run_command` call end to end: decide, re-check, gate, lock, run (sandboxed, `sudo`,
//! `sandbox: false` or the trash), interpret, mask.
//!
//! **Owns:** the order of the steps (nothing starts and no file changes before the decision
//! and every gate passed, house rule 2), the re-checks the executor adds to the decision (the
//! real location of `rm`'s paths and of `write_paths`; a password gate is never skipped,
//! whatever the mode or rules), and the mapping of a refusal to its `RUN_COMMAND_*` error.
//! **Refuses to know:** the rules themselves (argv-policy's `decide`), how questions reach the
//! user (the [`Asker`]), and how the sandbox is built (`exec`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use argv_policy::{Context, Decision, Gate, Mode, Policy, RefuseCode, RunCommandArgs};
use fsguard::RootLease;
use toolscope::{CallContext, ErrorCode, ToolError};

use crate::ask::{Asker, Question};
use crate::gate::{self, Passed};
use crate::render::{Grant, Granted, Network, Place, TooLong};
use crate::sandboxed::{Prepared, Ran};
use crate::state::RunCommandState;
use crate::types::{RunCommandOptions, RunCommandOutput, Status};
use crate::verify::{Pam, Sudo, Verifier};

/// What kind of run the decision asked for, with what was checked before the gate.
enum Kind {
    Sandboxed(Box<Prepared>),
    Trash(crate::rm::Plan),
    Sudo,
    Unsandboxed,
}

/// Runs one `run_command` call.
///
/// In order:
/// 1. The session's secrets grow with the secret-looking variables of the host's environment
///    (RC-14); `argv_policy::decide` then sees them, with the lease's path as the working
///    directory and `options.home`. A refusal is `Err` with its `RUN_COMMAND_*` code.
/// 2. Re-checks that change nothing: `rm`'s paths resolved on the file system (the stronger
///    of the decision's gate and the real location's RC-4 gate applies), `write_paths` pinned
///    (outside `$HOME`, and inside it where a host program reads configuration or code, always
///    the password, TRUST-5; elsewhere in it a confirmation unless `allow-all`), the
///    program found on the sandbox's `PATH`; `sudo` and `sandbox: false` always the password.
/// 3. The gate: a confirmation through `asker.confirm`, a password through up to three
///    `asker.password` prompts, each checked by the system (sudo: a confirmation labelled
///    `sudo: <cmd>` first, except under `allow-all`). Any other answer is a result with
///    `executed: false` and a message saying how to run it.
/// 4. The RC-9 lock: shared for allowlist hits (`parallel`), exclusive otherwise.
/// 5. The run; its output bounded and masked; the secrets it revealed are kept in `state`.
///
/// # Errors
/// A refused decision (`RUN_COMMAND_*`), a cancelled call (`AGENT_EXEC_CANCELLED` or the
/// permission error of a revocation), `AGENT_EXEC_SANDBOX_UNAVAILABLE` /
/// `AGENT_EXEC_UNSUPPORTED` (nothing runs, never unsandboxed), `AGENT_EXEC_PATH_INVALID` for a
/// `write_paths` entry or a working directory the sandbox will not grant,
/// `AGENT_EXEC_IO_FAILED`.
pub async fn run_command(
    args: RunCommandArgs,
    workdir: Arc<RootLease>,
    policy: &Policy,
    asker: &dyn Asker,
    state: &RunCommandState,
    options: &RunCommandOptions,
    ctx: &CallContext,
) -> Result<RunCommandOutput, ToolError> {
    let mut out = run_unmasked(args, workdir, policy, asker, state, options, ctx).await?;
    // RC-14: the label and the message quote the argv, so they are masked like the output.
    out.label = mask_text(state, &out.label);
    out.message = out.message.as_deref().map(|m| mask_text(state, m));
    Ok(out)
}

/// `text` masked with the session's secrets and those it holds by form (RC-14).
pub(crate) fn mask_text(state: &RunCommandState, text: &str) -> String {
    state.mask(text)
}

/// [`run_command`] before its label and message are masked (the output is masked here).
async fn run_unmasked(
    args: RunCommandArgs,
    workdir: Arc<RootLease>,
    policy: &Policy,
    asker: &dyn Asker,
    state: &RunCommandState,
    options: &RunCommandOptions,
    ctx: &CallContext,
) -> Result<RunCommandOutput, ToolError> {
    let how = Admit {
        watchers_allowed: false,
    };
    match admit(args, &workdir, policy, asker, state, options, how, ctx).await? {
        Admission::NotExecuted(out) => Ok(*out),
        Admission::Run(admitted) => {
            // RC-9: allowlist hits share the session, everything else runs alone (after its
            // gate, so a prompt never holds the lock).
            let _guard = if admitted.parallel {
                Lock::Shared(state.lock.read().await)
            } else {
                Lock::Alone(state.lock.write().await)
            };
            let mut out = execute(*admitted, workdir, state, options, None, ctx).await?;
            confirm_git_keys(&mut out, asker, ctx).await;
            Ok(out)
        }
    }
}

/// The most refused git config changes and moved-aside auto-run files one call asks the user
/// about; the rest stay refused.
const GIT_KEYS_ASKED: usize = 8;

/// TRUST-1, TRUST-2: a git config change the allowlist refused (`core.hooksPath`, `alias.*`,
/// …) is applied, and auto-run configuration the command made (moved aside after the call) is
/// put back, only when the user confirms it, named in the question; never without asking, and
/// never in `command` (which has no one to ask).
async fn confirm_git_keys(out: &mut RunCommandOutput, asker: &dyn Asker, ctx: &CallContext) {
    let changes = std::mem::take(&mut out.git.refused_keys);
    let keepable: Vec<gitstage::Quarantined> = out
        .git
        .quarantined
        .iter()
        .filter(|q| q.user_may_keep)
        .cloned()
        .collect();
    // TRUST-2: auto-run configuration the command made, put back only on a yes naming it.
    for q in keepable.iter().take(GIT_KEYS_ASKED) {
        let label = format!("keep {}, which the command wrote", q.path.escape_debug());
        let reason = "editors, agent hosts and tools run what this file names when the folder \
                      is opened or used; keep it only if you asked for it";
        let grants = Granted::new().with(Grant::Keep(PathBuf::from(&q.path)));
        // A question too long to show is not asked: the file stays moved aside.
        let Ok(question) = Question::new(&label, reason, &grants) else {
            continue;
        };
        if let Ok(gate::Passed::Yes) = gate::confirm(asker, &question, ctx).await {
            if gitstage::restore(q).is_ok() {
                out.git.kept(q);
            }
        }
    }
    let asked = keepable.len().min(GIT_KEYS_ASKED);
    for change in changes.iter().take(GIT_KEYS_ASKED.saturating_sub(asked)) {
        let label = format!(
            "git config --file {} {}",
            change.config.display().to_string().escape_debug(),
            change.shown
        );
        let reason = "this git setting makes git run a program or read another file whenever \
                      the repository is used; allow it only if you asked for it";
        let grants = Granted::new().with(Grant::GitSetting {
            file: change.config.clone(),
            setting: change.shown.clone(),
        });
        let Ok(question) = Question::new(&label, reason, &grants) else {
            continue;
        };
        if let Ok(gate::Passed::Yes) = gate::confirm(asker, &question, ctx).await {
            // A key git could not set stays listed as refused.
            if gitstage::apply_key(change).is_ok() {
                out.git.confirmed(change);
            }
        }
    }
}

/// What differs between the tools that admit a call (`run_command`, `background_command`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Admit {
    /// File watchers are allowed (background_command, RC-15).
    pub(crate) watchers_allowed: bool,
}

/// A call that passed its decision, its re-checks and its gate: ready to run.
pub(crate) struct Admitted {
    args: RunCommandArgs,
    kind: Kind,
    pub(crate) label: String,
    /// A read-only allowlist hit (RC-9: may run beside others of the session).
    pub(crate) parallel: bool,
    work: PathBuf,
    home: PathBuf,
    /// One sudo call of this process at a time, from its check to its `sudo -k`.
    _sudo: Option<tokio::sync::MutexGuard<'static, ()>>,
}

/// What [`admit`] found.
pub(crate) enum Admission {
    Run(Box<Admitted>),
    /// Not run (a gate said no, the program is missing): the result to give as it is.
    NotExecuted(Box<RunCommandOutput>),
}

/// What [`plan`] found.
pub(crate) enum Planning {
    /// Before any question, the call cannot run (its program is missing): the result.
    NotExecuted(Box<RunCommandOutput>),
    /// The call and the gate it must pass.
    Gated(Box<Planned>),
}

/// A call that passed its decision and its re-checks, with the question its gate asks.
pub(crate) struct Planned {
    args: RunCommandArgs,
    kind: Kind,
    pub(crate) label: String,
    pub(crate) via: argv_policy::Via,
    pub(crate) gate: Gate,
    pub(crate) ask: Ask,
    pub(crate) parallel: bool,
    pub(crate) trash: Vec<PathBuf>,
    pub(crate) sudo: bool,
    mode: Mode,
    work: PathBuf,
    home: PathBuf,
}

/// What the gate asks, its question made before anything is asked (TRUST-4).
pub(crate) enum Ask {
    Nothing,
    Confirm(Question),
    Password(Question),
}

impl Ask {
    /// The question asked, if any.
    pub(crate) fn question(&self) -> Option<&Question> {
        match self {
            Ask::Nothing => None,
            Ask::Confirm(q) | Ask::Password(q) => Some(q),
        }
    }
}

/// Steps 1–3 of [`run_command`]: the decision, the re-checks, the gate. Nothing runs here and
/// no file changes (house rule 2).
#[allow(clippy::too_many_arguments, reason = "the call's parts, each used")]
pub(crate) async fn admit(
    args: RunCommandArgs,
    workdir: &RootLease,
    policy: &Policy,
    asker: &dyn Asker,
    state: &RunCommandState,
    options: &RunCommandOptions,
    how: Admit,
    ctx: &CallContext,
) -> Result<Admission, ToolError> {
    match plan(args, workdir, policy, state, options, how, ctx)? {
        Planning::NotExecuted(out) => Ok(Admission::NotExecuted(out)),
        Planning::Gated(planned) => ask(*planned, asker, ctx).await,
    }
}

/// Steps 1–2 of [`run_command`]: the decision and the re-checks, up to the question the gate
/// asks. [`admit`] and `agent-exec check` share it, so `check` reports exactly the gate the
/// call asks (TRUST-4). Nothing runs here and no file changes.
pub(crate) fn plan(
    args: RunCommandArgs,
    workdir: &RootLease,
    policy: &Policy,
    state: &RunCommandState,
    options: &RunCommandOptions,
    how: Admit,
    ctx: &CallContext,
) -> Result<Planning, ToolError> {
    ctx.check()?;
    let host_env: Vec<(String, String)> = std::env::vars().collect();
    state.learn(argv_policy::secret_env_values(
        host_env
            .iter()
            .chain(&options.env)
            .map(|(k, v)| (k.as_str(), v.as_str())),
    ));
    // The environment the host's programs see: its own, then the variables it passes on
    // (TRUST-5 reads its PATH, TRUST-6 its relocation variables).
    let env: Vec<(String, String)> = host_env.iter().chain(&options.env).cloned().collect();
    let work: PathBuf = workdir.path().to_path_buf();
    let home = crate::roots::canonical(&options.home);
    let mut context = Context::new(&work, &home);
    // RC-9 counts the relocated private locations as sensitive, as the sandbox hides them.
    context.private = policy.relocated_paths(&home, &env);
    context.secrets = state.secrets();
    context.watchers_allowed = how.watchers_allowed;
    let decision = argv_policy::decide(&args, policy, &context);
    let (via, decided, parallel, trash, sudo) = match decision {
        Decision::Refuse { code, message } => return Err(refusal(code, message)),
        Decision::Run {
            via,
            gate,
            parallel,
            trash,
            sudo,
        } => (via, gate, parallel, trash, sudo),
    };
    let shown = argv_policy::display_argv(&args.argv);
    let mode = policy.mode;
    let not_executed = |label: String, message: String| -> Result<Planning, ToolError> {
        Ok(Planning::NotExecuted(Box::new(
            RunCommandOutput::not_executed(label, message),
        )))
    };

    // 2. Re-checks (read only).
    let (kind, gate) = if !trash.is_empty() {
        let plan = crate::rm::plan(&args.argv, &trash, &work, &home, mode, &options.protected)?;
        let gate = decided.max(plan.gate.clone());
        (Kind::Trash(plan), gate)
    } else if sudo {
        let label = format!("sudo: {}", argv_policy::display_argv(&args.argv[1..]));
        (Kind::Sudo, decided.max(Gate::Password(label)))
    } else if !args.sandbox {
        let label = format!("sandbox: false: {shown}");
        (Kind::Unsandboxed, decided.max(Gate::Password(label)))
    } else {
        let prepared = match crate::sandboxed::prepare(
            &args,
            &via,
            &work,
            &home,
            policy,
            &options.hidden,
            &env,
        )? {
            Ok(p) => p,
            Err(message) => return not_executed(shown, message),
        };
        let mut gate = decided;
        for w in &prepared.write_paths {
            gate = if let crate::roots::WriteGate::Password(why) = &w.gate {
                gate.max(Gate::Password(format!(
                    "write_paths: {} ({})",
                    w.path.display(),
                    why.describe()
                )))
            } else if mode != Mode::AllowAll {
                gate.max(Gate::Confirm(format!(
                    "write_paths: {} (writable for this call)",
                    w.path.display()
                )))
            } else {
                gate
            };
        }
        (Kind::Sandboxed(Box::new(prepared)), gate)
    };
    let label = gate.label().map(str::to_owned).unwrap_or(shown);
    // TRUST-4: the question shows what a yes grants; a call too long to show is not asked.
    let question = || {
        let reason = reason_for(&kind, &gate);
        Question::new(&label, reason, &grants_of(&args, &kind, &home)).map_err(too_long)
    };
    let ask = match &gate {
        Gate::None => Ask::Nothing,
        Gate::Confirm(_) => Ask::Confirm(question()?),
        Gate::Password(_) => Ask::Password(question()?),
    };
    Ok(Planning::Gated(Box::new(Planned {
        args,
        kind,
        label,
        via,
        gate,
        ask,
        parallel,
        trash,
        sudo,
        mode,
        work,
        home,
    })))
}

/// Step 3 of [`run_command`]: the gate asks `planned`'s question.
async fn ask(
    planned: Planned,
    asker: &dyn Asker,
    ctx: &CallContext,
) -> Result<Admission, ToolError> {
    let Planned {
        args,
        kind,
        label,
        ask,
        parallel,
        mode,
        work,
        home,
        ..
    } = planned;
    let not_executed = |label: String, message: String| -> Result<Admission, ToolError> {
        Ok(Admission::NotExecuted(Box::new(
            RunCommandOutput::not_executed(label, message),
        )))
    };

    // 3. The gate (one sudo call of this process at a time, from its check to its `sudo -k`).
    let sudo_guard = match kind {
        Kind::Sudo => Some(tokio::select! {
            g = crate::outside::SUDO_ONE_AT_A_TIME.lock() => g,
            reason = ctx.cancelled() => return Err(reason.to_error()),
        }),
        _ => None,
    };
    if let (Kind::Sudo, Ask::Password(q)) = (&kind, &ask) {
        if mode != Mode::AllowAll {
            let passed = gate::confirm(asker, q, ctx).await?;
            if let Passed::No(message) = passed {
                return not_executed(label, message);
            }
        }
    }
    let passed = match &ask {
        Ask::Nothing => Passed::Yes,
        Ask::Confirm(q) => gate::confirm(asker, q, ctx).await?,
        Ask::Password(q) => {
            let verifier: &dyn Verifier = if matches!(kind, Kind::Sudo) {
                &Sudo
            } else {
                &Pam
            };
            gate::password(asker, verifier, q, ctx).await?
        }
    };
    if let Passed::No(message) = passed {
        if matches!(kind, Kind::Sudo) {
            crate::outside::forget_sudo().await;
        }
        return not_executed(label, message);
    }
    ctx.check()?;
    Ok(Admission::Run(Box::new(Admitted {
        args,
        kind,
        label,
        parallel,
        work,
        home,
        _sudo: sudo_guard,
    })))
}

/// Steps 4–5 of [`run_command`] after the RC-9 lock, which the caller holds or (background
/// tasks) does not: the run, its output bounded and masked, the secrets it revealed kept in
/// `state`. With `tap`, every byte of output is also streamed to it as it is read.
pub(crate) async fn execute(
    admitted: Admitted,
    workdir: Arc<RootLease>,
    state: &RunCommandState,
    options: &RunCommandOptions,
    tap: Option<exec::Tap>,
    ctx: &CallContext,
) -> Result<RunCommandOutput, ToolError> {
    let Admitted {
        args,
        kind,
        label,
        work,
        home,
        _sudo,
        ..
    } = admitted;
    let mut message = None;
    let mut trashed = Vec::new();
    let network = args.network;
    let sandboxed = matches!(kind, Kind::Sandboxed(_));
    let mut guarded = crate::gitguard::Guarded::default();
    let ran = match kind {
        Kind::Sandboxed(prepared) => {
            let (ran, g) =
                crate::sandboxed::run(*prepared, workdir, &home, &state.views, options, tap, ctx)
                    .await?;
            guarded = g;
            ran
        }
        Kind::Trash(plan) => {
            let (done, text, code) =
                tokio::task::spawn_blocking(move || crate::rm::carry_out(&plan))
                    .await
                    .map_err(|e| {
                        ToolError::new(ErrorCode::ExecIoFailed, format!("rm failed: {e}"))
                    })?;
            trashed = done;
            message = Some(
                "rm moves files to the trash (restore them from `restoreFrom`); \
                 ['sudo', 'rm', …] deletes for real"
                    .to_owned(),
            );
            if let Some(tap) = &tap {
                tap(text.as_bytes());
            }
            Ran {
                output: text,
                exit_code: Some(code),
                status: Status::Exited,
                truncated: false,
                descendants_stopped: 0,
                denials: Vec::new(),
                sandbox: "none (rm moves to the trash itself; nothing was started)".into(),
                limit: None,
                own_loopback: false,
            }
        }
        Kind::Sudo => crate::outside::sudo(&args.argv, &work, options.timeout, tap, ctx).await?,
        Kind::Unsandboxed => {
            if args.network || !args.write_paths.is_empty() {
                message = Some(
                    "sandbox: false ran with your full rights: network and write_paths were \
                     not needed and were ignored"
                        .to_owned(),
                );
            }
            // Direct or a validated `sh -c` script alike: the argv as decided.
            crate::outside::unsandboxed(&args.argv, &work, options.timeout, tap, ctx).await?
        }
    };

    // RC-14: secrets by form join the session's list; the output is masked with all of them.
    let output = state.mask(&ran.output);
    let failed = !(ran.status == Status::Exited && ran.exit_code == Some(0));
    let hint = if let Some(limit) = ran.limit {
        Some(limit)
    } else if sandboxed {
        let reach = match (network, ran.own_loopback) {
            (true, _) => crate::hint::Reach::Host,
            (false, true) => crate::hint::Reach::OwnLoopback,
            (false, false) => crate::hint::Reach::Nothing,
        };
        crate::hint::hint(failed, &output, &ran.denials, reach)
    } else {
        None
    };
    Ok(RunCommandOutput {
        output,
        exit_code: ran.exit_code,
        status: ran.status,
        truncated: ran.truncated,
        descendants_stopped: ran.descendants_stopped,
        denials: ran.denials,
        hint,
        label,
        executed: true,
        trashed,
        sandbox: ran.sandbox,
        message: join_messages(message, guarded.message()),
        quarantined: guarded.quarantined,
        executable_changes: std::mem::take(&mut guarded.git.executable_changes),
        git: guarded.git,
        caches: std::mem::take(&mut guarded.caches),
    })
}

fn join_messages(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(format!("{a}. {b}")),
        (a, b) => a.or(b),
    }
}

/// What a yes to `kind` grants (TRUST-4): each command where it runs, every write path, the
/// network, the paths moved to the trash.
fn grants_of(args: &RunCommandArgs, kind: &Kind, home: &Path) -> Granted {
    let run = |argv: &[String], place| Grant::Run {
        argv: argv.to_vec(),
        scripts: argv_policy::shown_scripts(argv, home),
        place,
    };
    match kind {
        Kind::Sandboxed(prepared) => {
            let mut grants = Granted::new().with(run(&args.argv, Place::Sandbox));
            for w in &prepared.write_paths {
                grants = grants.with(Grant::Write(w.path.clone()));
            }
            if args.network {
                grants = grants.with(Grant::Network(Network::Internet));
            }
            grants
        }
        Kind::Trash(plan) => Granted::new().with(Grant::Trash(
            plan.targets
                .iter()
                .map(|t| match t {
                    crate::rm::Target::Found { real, .. } => real.clone(),
                    crate::rm::Target::Missing(p) => p.clone(),
                })
                .collect(),
        )),
        Kind::Sudo => Granted::new().with(run(args.argv.get(1..).unwrap_or_default(), Place::Root)),
        Kind::Unsandboxed => Granted::new().with(run(&args.argv, Place::Unsandboxed)),
    }
}

/// A call too long to show is not asked (TRUST-4): nothing ran, and the message says what to
/// send instead.
fn too_long(e: TooLong) -> ToolError {
    ToolError::new(
        ErrorCode::RunCommandArgumentsInvalid,
        format!(
            "this call needs the user's confirmation, and it is {} characters long, more than \
             the {} a confirmation shows, so it was not asked and nothing ran. Write the \
             script or the data to a file in the working directory (the user can read it \
             there) and run that file, e.g. ['sh', 'job.sh'], or split the work into smaller \
             calls",
            e.chars, e.max
        ),
    )
}

/// Why the gate asks, on the question's first line.
fn reason_for(kind: &Kind, gate: &Gate) -> &'static str {
    let password = matches!(gate, Gate::Password(_));
    match kind {
        Kind::Sandboxed(_) if password => {
            "a write path outside your home, or where your programs read configuration or code, \
             needs your password"
        }
        Kind::Sandboxed(_) => "the policy asks before this command (or its write_paths)",
        Kind::Trash(_) if password => {
            "rm moves paths outside your home to the trash: your password"
        }
        Kind::Trash(_) => "rm moves these paths to the trash",
        Kind::Sudo => "sudo runs it as root outside the sandbox: your password",
        Kind::Unsandboxed => "sandbox: false runs it with your full rights: your password",
    }
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
