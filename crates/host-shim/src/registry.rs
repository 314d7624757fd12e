//! The tool registry: each tool the host offers, by name, with its input schema, what the gate
//! must check for it, and the body that runs it.
//!
//! A tool is a [`ToolHandler`]; the file tools come from `file-tools`, `run`, `command` and
//! `run_command` from their own crates, and each plugs in the same way.

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use fsguard::{NotCopied, RootLease};
use serde::Serialize;
use serde_json::Value;
use toolscope::{CallContext, ErrorCode, ToolError};

use crate::approve::{CallApprover, DebugApprover};
use crate::background_tools::{BackgroundCancelTool, BackgroundCommandTool, BackgroundStatusTool};
use crate::config::{ToolName, WorkspaceKind};
use crate::run_command::{RunCommandSetup, RunCommandTool, Setup};

/// The boxed future a handler returns.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send + 'a>>;

/// What a tool body gets besides its arguments.
#[derive(Debug)]
pub struct ToolEnv<'a> {
    /// The call's context: cancellation, revocation, account-generation lease.
    pub ctx: CallContext,
    /// The turn's workspace root: the mirror for `mounted`, the folder for `direct`, the
    /// private folder for `app-private`; pinned for the turn (CMD-8).
    pub root: Arc<RootLease>,
    /// The workspace kind.
    pub kind: WorkspaceKind,
    /// Per-call options from the host (pre-approved extra paths).
    pub options: &'a CallOptions,
    /// Directories no sandboxed command may read or change, even inside the workspace or an
    /// extra path: the host's state directory (grants, mirrors, locks, configuration).
    pub hidden: &'a [PathBuf],
    /// For `mounted`: what the folder has at a workspace path the mirror did not copy (the path
    /// or the nearest skipped ancestor, and what it is), so a tool can say "not mirrored: a
    /// FIFO" rather than "does not exist". Always `None` for other workspaces.
    pub not_copied: NotCopiedLookup<'a>,
    /// The session's `run_command` state: the RC-9 lock (allowlist hits of the session run in
    /// parallel, every other call alone) and the secrets masked so far (RC-14). One per
    /// [`Session`](crate::Session), shared by all its turns.
    pub run_command: &'a run_command_tool::RunCommandState,
    /// Where a tool whose result can report a failed program records whether it succeeded
    /// (`run_command`: `RunCommandOutput::is_success`), so the front ends' exit codes come
    /// from the typed result ([`CallAnswer::is_success`](crate::CallAnswer::is_success)).
    pub verdict: &'a ProgramVerdict,
    /// The session's background tasks and the origin of a task this call starts (BG-*).
    pub background: crate::background_tools::BackgroundEnv<'a>,
}

/// A tool's typed word on what it ran, beside its JSON result ([`ToolEnv::verdict`]): unset
/// (the tools whose result is itself the success, or that run nothing) counts as success.
#[derive(Debug, Default)]
pub struct ProgramVerdict(std::sync::OnceLock<bool>);

impl ProgramVerdict {
    /// Records whether the program succeeded; the first record counts.
    pub fn record(&self, success: bool) {
        let _ = self.0.set(success);
    }

    /// False only when a tool recorded a failure.
    pub fn succeeded(&self) -> bool {
        self.0.get().copied().unwrap_or(true)
    }
}

/// [`ToolEnv::not_copied`]: a lookup into the turn's mirror, if it has one.
#[derive(Clone, Copy)]
pub struct NotCopiedLookup<'a>(pub &'a (dyn Fn(&Path) -> Option<(PathBuf, NotCopied)> + Sync));

impl NotCopiedLookup<'_> {
    /// The skipped path (`rel` or its nearest skipped ancestor) and what the folder has there.
    pub fn get(&self, rel: &Path) -> Option<(PathBuf, NotCopied)> {
        (self.0)(rel)
    }
}

impl fmt::Debug for NotCopiedLookup<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NotCopiedLookup")
    }
}

/// Per-call options a host passes along with the arguments.
#[derive(Clone, Debug, Default)]
pub struct CallOptions {
    /// Extra paths the user approved for this call ahead of time (`--approve-extra-path`,
    /// CMD-3). Any other extra path is refused unless the host's approver says yes.
    pub approved_extra_paths: Vec<PathBuf>,
    /// `command` also gets the user's own toolchains (`--toolchains`, LIVE-3): read + execute
    /// of the toolchain homes under `$HOME` (`~/.cargo/bin`, `~/.rustup`, `~/.nvm/versions`, …,
    /// see `command_tool`'s crate docs), never their credential files. Off by default; never
    /// for `run`.
    pub toolchains: bool,
    /// The agent task that makes this call, still running (BG-9): a `background_command` it
    /// starts reports into it until the host calls
    /// [`Session::background`](crate::Session::background)`.origin_ended`. `None` (the
    /// front ends): the call's turn is the origin, ended once the call returns, so every
    /// event is held for the group's completion.
    pub background_origin: Option<run_command_tool::background::Origin>,
}

/// One tool.
pub trait ToolHandler: Send + Sync + fmt::Debug {
    /// Its name (the configuration's `ref`).
    fn name(&self) -> ToolName;

    /// The JSON Schema of its arguments.
    fn input_schema(&self) -> Value;

    /// Runs one call. Validates `args` before doing anything (invariant 1).
    fn call<'a>(&'a self, args: Value, env: ToolEnv<'a>) -> ToolFuture<'a>;
}

/// The tools of one host, by name.
#[derive(Clone, Debug)]
pub struct Registry {
    tools: Vec<Arc<dyn ToolHandler>>,
}

impl Default for Registry {
    /// The file tools, plus `run`, `command` and `run_command` as linked into this build.
    /// `command`'s approver approves nothing; `run_command` has mode `safe`, the shipped lists
    /// and an asker that cannot ask ([`RunCommandSetup::default`]).
    fn default() -> Self {
        Registry {
            tools: vec![
                Arc::new(FileTool(ToolName::Read, file_tools::FileTool::Read)),
                Arc::new(FileTool(ToolName::Write, file_tools::FileTool::Write)),
                Arc::new(FileTool(ToolName::Edit, file_tools::FileTool::Edit)),
                Arc::new(FileTool(ToolName::Grep, file_tools::FileTool::Grep)),
                Arc::new(RunTool),
                Arc::new(CommandTool {
                    approver: DebugApprover(Arc::new(command_tool::DenyAll)),
                }),
                Arc::new(RunCommandTool {
                    setup: Setup::Default,
                }),
                Arc::new(BackgroundCommandTool {
                    setup: Setup::Default,
                }),
                Arc::new(BackgroundStatusTool),
                Arc::new(BackgroundCancelTool),
            ],
        }
    }
}

impl Registry {
    /// The default tools, with `approver` answering `command`'s extra-path questions that the
    /// call's pre-approvals do not cover (CMD-3). The default approver approves nothing.
    pub fn with_approver(approver: Arc<dyn command_tool::Approver>) -> Self {
        let mut registry = Registry::default();
        registry.register(Arc::new(CommandTool {
            approver: DebugApprover(approver),
        }));
        registry
    }

    /// These tools with `run_command` run by `setup`: the host's policy (mode and the user's
    /// lists), the asker for its confirmations and passwords, and the host's configuration
    /// files to keep read-only.
    #[must_use]
    pub fn with_run_command(mut self, setup: RunCommandSetup) -> Self {
        // background_command runs what run_command would, by the same rules and asker.
        self.register(Arc::new(BackgroundCommandTool {
            setup: Setup::Given(setup.clone()),
        }));
        self.register(Arc::new(RunCommandTool {
            setup: Setup::Given(setup),
        }));
        self
    }

    /// Replaces (or adds) the handler for its tool name.
    pub fn register(&mut self, handler: Arc<dyn ToolHandler>) {
        let name = handler.name();
        self.tools.retain(|t| t.name() != name);
        self.tools.push(handler);
    }

    /// The handler for `name`.
    pub fn get(&self, name: ToolName) -> Option<&Arc<dyn ToolHandler>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// Every handler.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn ToolHandler>> {
        self.tools.iter()
    }
}

/// A file tool from `file-tools`, under its name here. Runs on a blocking thread holding the
/// call's account-generation lease, so an account switch waits for it to truly finish (CMD-12).
#[derive(Debug)]
struct FileTool(ToolName, file_tools::FileTool);

/// A tool's result as JSON (cannot fail for these plain structs; an error would still be
/// reported, not panic).
pub(crate) fn to_value<T: Serialize>(out: &T) -> Result<Value, ToolError> {
    serde_json::to_value(out)
        .map_err(|e| ToolError::new(ErrorCode::ExecIoFailed, format!("result encoding: {e}")))
}

impl ToolHandler for FileTool {
    fn name(&self) -> ToolName {
        self.0
    }

    fn input_schema(&self) -> Value {
        self.1.input_schema()
    }

    fn call<'a>(&'a self, args: Value, env: ToolEnv<'a>) -> ToolFuture<'a> {
        let FileTool(tool, body) = *self;
        Box::pin(async move {
            env.ctx.check()?;
            let lease = env.ctx.lease()?;
            let mut args = args;
            let mut root = Arc::clone(&env.root);
            // BG-6: `read` of a running background task's log, by the exact path it returned.
            if tool == ToolName::Read {
                let log = args
                    .get("path")
                    .and_then(Value::as_str)
                    .and_then(|p| crate::background_tools::running_log(env.background.tasks, p));
                if let Some((dir, name)) = log {
                    root = Arc::new(RootLease::acquire(&dir).map_err(|e| {
                        ToolError::new(
                            ErrorCode::ExecIoFailed,
                            format!("the background log directory cannot be opened: {e}"),
                        )
                    })?);
                    args["path"] = Value::String(name);
                }
            }
            // No confirmations: the host asks none for file tools, so auto-run configuration
            // stays refused (TRUST-2).
            let options = file_tools::FileToolOptions {
                hidden: file_tools::Hidden::beneath(root.path(), env.hidden),
                ..file_tools::FileToolOptions::default()
            };
            let work = exec::blocking::off_async(move || {
                let _lease = lease;
                body.run(&root, args, &options)
            });
            work.await.map_err(|e| {
                ToolError::new(
                    ErrorCode::ExecIoFailed,
                    format!("the {tool} tool stopped unexpectedly ({e}); try again"),
                )
            })?
        })
    }
}

/// `run` (RUN-*), from `run-tool`: on the turn's mirror, which the host made at turn start and
/// writes back only after a successful turn (RUN-11).
#[derive(Debug)]
struct RunTool;

impl ToolHandler for RunTool {
    fn name(&self) -> ToolName {
        ToolName::Run
    }

    fn input_schema(&self) -> Value {
        serde_json::to_value(run_tool::AgentRunArguments::json_schema()).unwrap_or(Value::Null)
    }

    fn call<'a>(&'a self, args: Value, env: ToolEnv<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let args = run_tool::AgentRunArguments::from_json(args)?;
            let out = run_tool::run(args, env.root, &env.ctx)
                .await
                .map_err(|e| explain_not_copied(e, env.not_copied))?;
            to_value(&out)
        })
    }
}

/// A path refusal of `run` for a path the mirror skipped becomes what happened: the folder has a
/// FIFO (socket, symlink, unreadable entry) there, which the mirror does not copy — not "does
/// not exist".
fn explain_not_copied(err: ToolError, not_copied: NotCopiedLookup<'_>) -> ToolError {
    if err.code() != ErrorCode::ExecPathInvalid {
        return err;
    }
    let Some(path) = err
        .details()
        .get(run_tool::PATH_DETAIL)
        .and_then(Value::as_str)
    else {
        return err;
    };
    let Some((at, what)) = not_copied.get(Path::new(path)) else {
        return err;
    };
    ToolError::new(
        ErrorCode::ExecPathInvalid,
        format!(
            "`{path}` is not in the mirror: in the folder `{}` is {what}, and `run` works on a \
             copy holding only regular files and directories (symbolic links are never \
             followed); use the command tool in a direct workspace if you need it",
            at.display()
        ),
    )
    .with_detail(run_tool::PATH_DETAIL, path.to_owned())
    .with_detail("notMirrored", what.to_string())
}

/// `command` (CMD-*), from `command-tool`: `/bin/sh -c` in the turn's `direct` or `app-private`
/// root. Extra paths are approved by the call's pre-approvals, then the host's approver.
#[derive(Debug)]
struct CommandTool {
    approver: DebugApprover,
}

impl ToolHandler for CommandTool {
    fn name(&self) -> ToolName {
        ToolName::Command
    }

    fn input_schema(&self) -> Value {
        serde_json::to_value(command_tool::CommandArguments::json_schema()).unwrap_or(Value::Null)
    }

    fn call<'a>(&'a self, args: Value, env: ToolEnv<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let args = command_tool::CommandArguments::from_json(args)?;
            let approver = CallApprover {
                pre: command_tool::PreApproved::new(env.options.approved_extra_paths.clone()),
                host: &*self.approver.0,
            };
            let mut options = command_tool::CommandOptions::default();
            if env.options.toolchains {
                let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) else {
                    return Err(ToolError::new(
                        ErrorCode::ExecArgumentsInvalid,
                        "the host asked for the user's toolchains, but HOME is not set, so \
                         there is no home directory to find them in; set HOME or drop \
                         --toolchains",
                    ));
                };
                options = options.toolchains(home);
            }
            for dir in env.hidden {
                options = options.hide(dir.clone());
            }
            let out =
                command_tool::command_with(args, env.root, &approver, &env.ctx, &options).await?;
            to_value(&out)
        })
    }
}
