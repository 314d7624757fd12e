//! Execution of a validated `run` through `exec` (RUN-6…RUN-12), and the mapping of its
//! [`exec::Outcome`] to the public result.

use std::ffi::OsString;

use std::sync::Arc;

use exec::{End, ExecError, Job, Limits, OnCap, SandboxSpec, WorkDir};
use fsguard::RootLease;
use toolscope::{CallContext, ErrorCode, ToolError};

use crate::types::{AgentRunArguments, AgentRunOutput, Denial};
use crate::validate::{Program, ValidatedRun, validate};

/// Bytes of stdout and of stderr a run may produce; one more fails it (RUN-9).
pub const OUTPUT_CAP: usize = 64 * 1024;

/// Runs one `run` call: [`validate`] first (nothing is created or started when it refuses),
/// then the fixed program in its deny-default sandbox (RUN-6, RUN-7) with the environment of
/// RUN-8, in `cwdRelative` under the mirror.
///
/// `mirror` is the mirror root the host made with `fsguard::Mirror` and pinned for the turn.
/// The run's private `HOME` and `TMPDIR` live in a fresh directory under
/// [`std::env::temp_dir`] (outside the mirror, mode 0700), removed when the run ends. Output is
/// never written to files by the tool (RUN-9); what the program writes into the mirror stays
/// there even when the run fails (RUN-11) — writing back is the host's business.
///
/// # Errors
/// Every refusal of [`validate`]; `AGENT_EXEC_SANDBOX_UNAVAILABLE` / `AGENT_EXEC_UNSUPPORTED`
/// when the sandbox cannot be applied (nothing runs, RUN-6); `AGENT_EXEC_TIMEOUT`;
/// `AGENT_EXEC_OUTPUT_LIMIT` (the program was stopped at the first byte past 64 KiB);
/// `AGENT_EXEC_CANCELLED` (or the permission error of a revocation) when the call was cancelled
/// or the mirror was replaced (RUN-10, CMD-8); `AGENT_EXEC_FAILED` for a non-zero exit other
/// than diff's 1, with `program`, `exitCode`, `stdout`, `stderr` and `truncated` as details
/// (RUN-12); `AGENT_EXEC_IO_FAILED` when the tool itself could not do its part.
pub async fn run(
    args: AgentRunArguments,
    mirror: Arc<RootLease>,
    ctx: &CallContext,
) -> Result<AgentRunOutput, ToolError> {
    ctx.check()?;
    let validated = validate(&args, &mirror)?;
    mirror
        .verify()
        .map_err(|e| ToolError::new(ErrorCode::ExecCancelled, format!("{e}; nothing ran")))?;
    // RUN-7, RUN-8: the run's own `HOME` and `TMPDIR`, outside the mirror.
    let temp =
        exec::CallTemp::create(TEMP_PREFIX, mirror.path()).map_err(|e| io_failed(e.to_string()))?;
    // Both roots are granted on their leases' descriptors, never looked up again.
    let sandbox = SandboxSpec::for_run(validated.executable(), &mirror, temp.lease())
        .map_err(|e| io_failed(format!("cannot describe the sandbox: {e}")))?;
    // Kept to explain the program's permission errors afterwards (LIVE-4).
    let explain = (
        sandbox.clone(),
        mirror.path().join(validated.cwd().as_path()),
    );
    let job = Job {
        program: validated.executable().to_path_buf(),
        args: validated.argv().to_vec(),
        workdir: WorkDir {
            lease: mirror,
            rel: validated.cwd().clone(),
        },
        env: run_env(&temp),
        sandbox,
        limits: Limits {
            timeout: validated.timeout(),
            stdout_cap: OUTPUT_CAP,
            stderr_cap: OUTPUT_CAP,
            on_cap: OnCap::Kill,
        },
        merge_stderr: false,
    };
    let outcome = temp.scope(exec::run(job, ctx)).await.map_err(exec_error);
    // Before the temp dir goes: a path in it is explained by the directory it was in.
    let denials = match &outcome {
        Ok(out) => denials(explain, out),
        Err(_) => Vec::new(),
    };
    // The temp dir goes whatever happened; its removal is best effort (a leftover is private,
    // 0700, and under the system's temp dir).
    temp.remove();
    interpret(&validated, outcome?, denials)
}

fn io_failed(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::ExecIoFailed, message)
}

/// The public error for a job that did not run (or could not be supervised).
pub(crate) fn exec_error(e: ExecError) -> ToolError {
    match e {
        ExecError::Cancelled(reason) => reason.to_error(),
        other => ToolError::new(other.code(), other.to_string()),
    }
}

/// The prefix of every run's temp dir under [`std::env::temp_dir`] (the host's orphan sweep
/// knows it).
pub const TEMP_PREFIX: &str = "agent-exec-run-";

/// RUN-8: nothing inherited; `PATH` fixed and empty, private `HOME` and `TMPDIR`, `LC_ALL=C`.
fn run_env(temp: &exec::CallTemp) -> Vec<(OsString, OsString)> {
    let mut env = vec![("PATH".into(), OsString::new())];
    env.extend(temp.home_and_tmpdir());
    env.push(("LC_ALL".into(), "C".into()));
    env
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// RUN-9, RUN-10, RUN-12: what the outcome means for the caller.
/// LIVE-4: the accesses the output names that the sandbox's policy refused. The scan touches
/// nothing; only a permission error makes the policy look at files (a few `stat`s each, done
/// here like the temp dir's removal: this crate has no blocking pool of its own).
fn denials((sandbox, cwd): (SandboxSpec, std::path::PathBuf), out: &exec::Outcome) -> Vec<Denial> {
    let mentions = exec::denials::scan_output(&out.stdout, &out.stderr);
    let view = out.view();
    exec::denials::explain(&sandbox, &cwd, view, &mentions)
        .into_iter()
        .map(Into::into)
        .collect()
}

fn interpret(
    run: &ValidatedRun,
    out: exec::Outcome,
    denials: Vec<Denial>,
) -> Result<AgentRunOutput, ToolError> {
    let name = run.program().name();
    let stopped = match &out.end {
        End::Exited => None,
        End::Cancelled(reason) => Some(reason.to_error()),
        End::TimedOut => Some(
            ToolError::new(
                ErrorCode::ExecTimeout,
                format!(
                    "{name} ran longer than timeoutMs ({} ms) and was stopped; raise timeoutMs \
                     (at most 30000) or give it less input",
                    run.timeout_ms()
                ),
            )
            .with_detail("timeoutMs", run.timeout_ms()),
        ),
        End::OutputLimit => {
            let stream = if out.stdout_truncated {
                "stdout"
            } else {
                "stderr"
            };
            Some(
                ToolError::new(
                    ErrorCode::ExecOutputLimit,
                    format!(
                        "{name} wrote more than {OUTPUT_CAP} bytes to {stream}, so it was \
                         stopped; produce less output (count or summarise instead of printing \
                         everything, or write the result to a file from an awk script)"
                    ),
                )
                .with_detail("stream", stream),
            )
        }
        End::LimitExceeded(hit) => Some(
            ToolError::new(
                ErrorCode::ExecLimitExceeded,
                format!(
                    "{name} hit its {hit} limit, so it was stopped; {}",
                    hit.advice()
                ),
            )
            .with_detail("limit", hit.limit.name())
            .with_detail("value", hit.value),
        ),
        End::LeaseLost => Some(ToolError::new(
            ErrorCode::ExecCancelled,
            format!(
                "the mirror directory was replaced while {name} ran, so it was stopped; start a \
                 new turn"
            ),
        )),
    };
    if let Some(err) = stopped {
        return Err(err);
    }
    let success = match out.exit_code {
        Some(0) => true,
        // RUN-3, RUN-12: diff's 1 means "the files differ", a result, not a failure.
        Some(1) => run.program() == Program::Diff,
        _ => false,
    };
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    match (success, out.exit_code) {
        (true, Some(exit_code)) => Ok(AgentRunOutput {
            program: name.to_owned(),
            exit_code,
            stdout,
            stderr,
            truncated: false,
            denials,
        }),
        (_, Some(code)) => Err(ToolError::new(
            ErrorCode::ExecFailed,
            format!("{name} exited with status {code}; read stderr for why and fix the input"),
        )
        .with_detail("program", name)
        .with_detail("exitCode", code)
        .with_detail("stdout", stdout)
        .with_detail("stderr", stderr)
        .with_detail("truncated", false)
        .with_denials(&denials)),
        (_, None) => {
            let signal = out.signal.unwrap_or(0);
            Err(ToolError::new(
                ErrorCode::ExecFailed,
                format!(
                    "{name} was ended by signal {signal}; the sandbox allows no other process, \
                     network or files outside the mirror, so do not ask for them"
                ),
            )
            .with_detail("program", name)
            .with_detail("exitCode", serde_json::Value::Null)
            .with_detail("signal", signal)
            .with_detail("stdout", stdout)
            .with_detail("stderr", stderr)
            .with_detail("truncated", false)
            .with_denials(&denials))
        }
    }
}

/// The failed run's details carry the result's `denials` field, absent when empty (LIVE-4).
trait WithDenials {
    fn with_denials(self, denials: &[Denial]) -> Self;
}

impl WithDenials for ToolError {
    fn with_denials(self, denials: &[Denial]) -> Self {
        if denials.is_empty() {
            return self;
        }
        match serde_json::to_value(denials) {
            Ok(value) => self.with_detail("denials", value),
            Err(_) => self,
        }
    }
}
