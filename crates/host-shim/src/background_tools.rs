//! `background_command`, `background_status` and `background_cancel` as registered tools
//! (BG-1…BG-9): what the host gives `run_command_tool::background` for each call.
//!
//! **Owns:** the session's tasks ([`BackgroundEnv`]): made when a front end takes the session's
//! event stream ([`Session::background_events`](crate::Session::background_events)) — the
//! delivery target of BG-7; without it `background_command` is refused
//! (`BACKGROUND_COMMAND_NO_DELIVERY`: `agent-exec call` is one-shot and nobody would hear the
//! reports). The log directory `<state>/sessions/<session>/background` (inside the host's state
//! directory, which every sandbox hides); the origin of a call (the host's
//! [`CallOptions::background_origin`](crate::CallOptions::background_origin), a running agent
//! task; otherwise the call's turn, or its `group`, as an origin that has already ended, so
//! events are held for the group's completion); a revocation of the tool's grants stops the
//! task (TS-3), as an account switch does (CMD-12).
//!
//! **The log and `read` (BG-6).** The `read` tool takes, besides workspace paths, exactly the
//! `logPath` of one of the session's running tasks (an absolute path it returned): the file is
//! opened in the log directory like any workspace file (no link, one hard link). No other
//! path outside the workspace is readable, and a log is unreadable once its task ended (it is
//! deleted then; its tail is in the end event).
//!
//! **Refuses to know:** the tasks' rules (the tool crate's) and how events reach a user (the
//! front end drains the stream).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use run_command_tool::background::{
    BackgroundArgs, BackgroundTasks, Launch, Origin, OriginState, StopWhen, TaskInfo,
};
use serde::Serialize;
use serde_json::{Value, json};
use toolscope::{ErrorCode, ToolError};

use crate::config::ToolName;
use crate::registry::{ToolEnv, ToolFuture, ToolHandler, to_value};
use crate::run_command::Setup;

/// What a background tool gets for one call.
pub struct BackgroundEnv<'a> {
    /// The session's tasks, once a front end took its event stream.
    pub tasks: Option<&'a BackgroundTasks>,
    /// The session's run_command state (secrets), shared with the tasks.
    pub state: &'a Arc<run_command_tool::RunCommandState>,
    /// The origin of a task this call starts, unless its `group` names one.
    pub origin: Origin,
    /// Whether that origin still runs.
    pub origin_state: OriginState,
    /// A fresh stop condition for a task this call starts: the tool's grants revoked.
    pub stop_when: &'a (dyn Fn() -> StopWhen + Send + Sync),
}

impl fmt::Debug for BackgroundEnv<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackgroundEnv")
            .field("tasks", &self.tasks.is_some())
            .field("origin", &self.origin)
            .field("origin_state", &self.origin_state)
            .finish_non_exhaustive()
    }
}

fn no_delivery() -> ToolError {
    ToolError::new(
        ErrorCode::BackgroundNoDelivery,
        "background_command reports while its command runs and when it ends, and this front \
         end has nobody to report to (`agent-exec call` is one-shot). Start it through the MCP \
         server (`agent-exec mcp --workspace DIR`) or a host that drains the session's events \
         (Session::background_events), or use run_command for a command that ends",
    )
}

fn tasks<'a>(env: &ToolEnv<'a>) -> Result<&'a BackgroundTasks, ToolError> {
    env.background.tasks.ok_or_else(no_delivery)
}

/// The registered `background_command`, with run_command's setup (policy, asker, protected).
#[derive(Debug)]
pub(crate) struct BackgroundCommandTool {
    pub(crate) setup: Setup,
}

impl ToolHandler for BackgroundCommandTool {
    fn name(&self) -> ToolName {
        ToolName::BackgroundCommand
    }

    fn input_schema(&self) -> Value {
        run_command_tool::background::background_input_schema()
    }

    fn call<'a>(&'a self, args: Value, env: ToolEnv<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let args = BackgroundArgs::from_json(&args)?;
            let tasks = tasks(&env)?;
            let options = self.setup.get().options(env.hidden)?;
            let origin = match &args.group {
                // A named group is its own origin, which has ended once its call returned.
                Some(g) if env.background.origin_state == OriginState::Ended => Origin {
                    task: format!("group:{g}"),
                    turn: format!("group:{g}"),
                },
                _ => env.background.origin.clone(),
            };
            let launch = Launch {
                workdir: env.root,
                policy: &self.setup.get().policy,
                asker: &*self.setup.get().asker,
                state: Arc::clone(env.background.state),
                options,
                time_limit: None,
                origin,
                origin_state: env.background.origin_state,
                stop_when: Some((env.background.stop_when)()),
            };
            let started = tasks.start(args, launch, &env.ctx).await?;
            env.verdict.record(started.executed);
            to_value(&started)
        })
    }
}

/// `background_status`.
#[derive(Debug)]
pub(crate) struct BackgroundStatusTool;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusOutput {
    tasks: Vec<TaskInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    latest_output: Option<String>,
}

fn task_id(args: &Value, required: bool) -> Result<Option<String>, ToolError> {
    let bad = || {
        ToolError::new(
            ErrorCode::ExecArgumentsInvalid,
            "send {\"taskId\": \"bg-N\"} with an id background_command returned (or {} for \
             background_status's list)",
        )
    };
    let Value::Object(map) = args else {
        return Err(bad());
    };
    if map.keys().any(|k| k != "taskId") {
        return Err(bad());
    }
    match map.get("taskId") {
        Some(Value::String(id)) => Ok(Some(id.clone())),
        None if !required => Ok(None),
        _ => Err(bad()),
    }
}

impl ToolHandler for BackgroundStatusTool {
    fn name(&self) -> ToolName {
        ToolName::BackgroundStatus
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"taskId": {"type": "string", "description": "One task (bg-N); \
                            omit for all of this session's tasks."}},
            "additionalProperties": false
        })
    }

    fn call<'a>(&'a self, args: Value, env: ToolEnv<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let id = task_id(&args, false)?;
            let tasks = tasks(&env)?;
            let out = match id {
                Some(id) => {
                    let (info, latest) = tasks.status(&id)?;
                    StatusOutput {
                        tasks: vec![info],
                        latest_output: Some(latest),
                    }
                }
                None => StatusOutput {
                    tasks: tasks.list(),
                    latest_output: None,
                },
            };
            to_value(&out)
        })
    }
}

/// `background_cancel`.
#[derive(Debug)]
pub(crate) struct BackgroundCancelTool;

impl ToolHandler for BackgroundCancelTool {
    fn name(&self) -> ToolName {
        ToolName::BackgroundCancel
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"taskId": {"type": "string", "description": "The task (bg-N)."}},
            "required": ["taskId"],
            "additionalProperties": false
        })
    }

    fn call<'a>(&'a self, args: Value, env: ToolEnv<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let id = task_id(&args, true)?.unwrap_or_default();
            let tasks = tasks(&env)?;
            let info = tokio::select! {
                r = tasks.cancel(&id) => r?,
                reason = env.ctx.cancelled() => return Err(reason.to_error()),
            };
            to_value(&info)
        })
    }
}

/// The log file of one of the session's running tasks that `path` names exactly, as (its
/// directory, its file name) — what `read` may open outside the workspace (BG-6).
pub(crate) fn running_log(
    tasks: Option<&BackgroundTasks>,
    path: &str,
) -> Option<(PathBuf, String)> {
    let p = Path::new(path);
    if !p.is_absolute() || !tasks?.is_running_log(p) {
        return None;
    }
    Some((
        p.parent()?.to_path_buf(),
        p.file_name()?.to_string_lossy().into_owned(),
    ))
}
