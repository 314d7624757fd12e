//! `run_command` (RC-*, RCS-*) as a registered tool: what the host gives `run_command_tool`
//! for each call — the turn's folder, the host's [`Policy`] (mode and the user's run_command
//! configuration), the host's [`Asker`], the session's [`RunCommandState`](run_command_tool::RunCommandState) and the
//! [`RunCommandOptions`] of this machine.
//!
//! **Owns:** the one reading of the user's run_command configuration file that both
//! `agent-exec check run_command` and the tool use ([`run_command_policy`]), and what a host
//! passes: `home` is the user's `$HOME` at the call, `hidden` the host's state directory (as
//! for `command`), `protected` the host's own configuration files that exist (RCS-3). The
//! session's state (the RC-9 lock, the secrets masked so far) is one per `Session`
//! (`crate::Session`), shared by its turns.
//!
//! **Refuses to know:** the decision, the gates, the sandbox (the tool's), and how a question
//! reaches the user (the host's asker; the default one cannot ask, so nothing gated runs).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use run_command_tool::{
    Asker, Checked, DenyAllAsker, Mode, Policy, RunCommandArgs, RunCommandOptions,
};
use serde_json::Value;
use toolscope::{ErrorCode, ToolError};

use crate::config::ToolName;
use crate::registry::{ToolEnv, ToolFuture, ToolHandler, to_value};

/// How this host runs `run_command`: its rules and who answers its questions.
///
/// ```
/// use std::sync::Arc;
/// use host_shim::{Registry, RunCommandMode, RunCommandSetup, run_command_policy};
/// let policy = run_command_policy(None, Some(RunCommandMode::Auto)).unwrap();
/// let registry = Registry::default()
///     .with_run_command(RunCommandSetup::new(policy, Arc::new(host_shim::DenyAllAsker)));
/// assert!(registry.get(host_shim::ToolName::RunCommand).is_some());
/// ```
#[derive(Clone)]
pub struct RunCommandSetup {
    /// The decision's rules: the mode (`safe`, `auto`, `allow-all`) and the user's lists.
    pub policy: Policy,
    /// Asks the user for confirmations and passwords; [`DenyAllAsker`] cannot ask (every
    /// gated call comes back not executed).
    pub asker: Arc<dyn Asker>,
    /// The host's own configuration files (the agent configuration, the run_command
    /// configuration): read-only even inside a writable root (RCS-3). Missing ones are left out
    /// at each call.
    pub protected: Vec<PathBuf>,
}

impl RunCommandSetup {
    /// `policy` with `asker`, protecting nothing beyond the tool's own list.
    pub fn new(policy: Policy, asker: Arc<dyn Asker>) -> RunCommandSetup {
        RunCommandSetup {
            policy,
            asker,
            protected: Vec::new(),
        }
    }

    /// Also keeps `path` (a host configuration file) read-only (RCS-3).
    #[must_use]
    pub fn protect(mut self, path: impl Into<PathBuf>) -> RunCommandSetup {
        self.protected.push(path.into());
        self
    }
}

impl RunCommandSetup {
    /// The options of one call: `$HOME`, `hidden` (the host's state directory) and the host's
    /// configuration files that exist now, read-only (RCS-3).
    pub(crate) fn options(&self, hidden: &[PathBuf]) -> Result<RunCommandOptions, ToolError> {
        let mut options = RunCommandOptions::for_home(home()?);
        options.hidden = hidden.to_vec();
        options.protected = self
            .protected
            .iter()
            .filter(|p| p.exists())
            .cloned()
            .collect();
        Ok(options)
    }
}

impl RunCommandSetup {
    /// What `args` would do in `workdir`, for `agent-exec check run_command`: the call's own
    /// planning with this setup, stopped before the gate, so the gate reported is the one the
    /// call asks and `confirmation` the text it shows (TRUST-4). Nothing is asked or run.
    ///
    /// # Errors
    /// `AGENT_EXEC_ARGUMENTS_INVALID` when `$HOME` is not an absolute path.
    pub fn check(&self, args: RunCommandArgs, workdir: &Path) -> Result<Checked, ToolError> {
        let options = self.options(&[])?;
        Ok(run_command_tool::check(
            args,
            workdir,
            &self.policy,
            &options,
        ))
    }
}

impl Default for RunCommandSetup {
    /// Mode `safe`, the shipped lists, and no way to ask: only read-only allowlist hits run.
    fn default() -> Self {
        RunCommandSetup::new(Policy::defaults(Mode::Safe), Arc::new(DenyAllAsker))
    }
}

/// A tool's [`RunCommandSetup`]: the host's, or the default one built at its first use. The
/// default parses the shipped lists (about 0.6 ms), which a process that never runs
/// `run_command` — `agent-exec call command` — should not pay for; the registry's
/// `run_command` and `background_command` share the one built.
#[derive(Debug, Clone)]
pub(crate) enum Setup {
    Given(RunCommandSetup),
    Default,
}

impl Setup {
    pub(crate) fn get(&self) -> &RunCommandSetup {
        static DEFAULT: std::sync::LazyLock<RunCommandSetup> =
            std::sync::LazyLock::new(RunCommandSetup::default);
        match self {
            Setup::Given(setup) => setup,
            Setup::Default => &DEFAULT,
        }
    }
}

impl fmt::Debug for RunCommandSetup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunCommandSetup")
            .field("mode", &self.policy.mode)
            .field("protected", &self.protected)
            .finish_non_exhaustive()
    }
}

/// The run_command rules a host uses: the shipped lists merged with the user's configuration
/// file (`file`: JSON with `denied_command`, `read_only_command`, `sensitive_path`,
/// `private_path`, `mode`), with `mode` — when given — over the file's, over `safe`. A file
/// that cannot be read or is not a valid configuration is an `AGENT_EXEC_ARGUMENTS_INVALID`
/// naming it.
pub fn run_command_policy(file: Option<&Path>, mode: Option<Mode>) -> Result<Policy, ToolError> {
    let invalid = |message: String| ToolError::new(ErrorCode::ExecArgumentsInvalid, message);
    let user_json = match file {
        Some(file) => Some(std::fs::read_to_string(file).map_err(|e| {
            invalid(format!(
                "{}: {e}; give a readable run_command configuration file",
                file.display()
            ))
        })?),
        None => None,
    };
    let policy = Policy::load(Mode::Safe, user_json.as_deref()).map_err(|e| {
        let name = file.unwrap_or(Path::new("")).display();
        invalid(format!("{name}: {e}"))
    })?;
    Ok(match mode {
        Some(mode) => policy.with_mode(mode),
        None => policy,
    })
}

/// The registered `run_command`.
#[derive(Debug)]
pub(crate) struct RunCommandTool {
    pub(crate) setup: Setup,
}

/// The user's home directory for run_command's sandbox and rules: `$HOME`, absolute.
fn home() -> Result<PathBuf, ToolError> {
    match std::env::var_os("HOME").map(PathBuf::from) {
        Some(home) if home.is_absolute() => Ok(home),
        _ => Err(ToolError::new(
            ErrorCode::ExecArgumentsInvalid,
            "run_command needs the user's home directory (its sandbox reads it and writes its \
             caches), but HOME is not set to an absolute path; set HOME and call again",
        )),
    }
}

impl ToolHandler for RunCommandTool {
    fn name(&self) -> ToolName {
        ToolName::RunCommand
    }

    fn input_schema(&self) -> Value {
        run_command_tool::input_schema()
    }

    fn call<'a>(&'a self, args: Value, env: ToolEnv<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let args = RunCommandArgs::from_json(&args.to_string()).map_err(|refusal| {
                let code = refusal
                    .code
                    .as_str()
                    .parse::<ErrorCode>()
                    .unwrap_or(ErrorCode::RunCommandArgumentsInvalid);
                ToolError::new(code, refusal.message)
            })?;
            let options = self.setup.get().options(env.hidden)?;
            let out = run_command_tool::run_command(
                args,
                env.root,
                &self.setup.get().policy,
                &*self.setup.get().asker,
                env.run_command,
                &options,
                &env.ctx,
            )
            .await?;
            env.verdict.record(out.is_success());
            to_value(&out)
        })
    }
}
