//! Agent configuration, schema version 2 (PERM-4, PERM-5): parsing, validation with errors that
//! name the field and the fix, and the check against the plugin's folder grants.
//!
//! Validation walks the JSON by hand rather than trusting serde's messages: serde reports
//! "unknown field at line 3 column 7", while a host needs `tools[2].ref: "shell" is not a tool
//! this host offers; use one of …`. The typed structs still derive `Deserialize` (with
//! `deny_unknown_fields`) and `JsonSchema`, and a test keeps the two in agreement.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Component, Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toolscope::{ErrorCode, PluginId, PluginRecord, ToolError};

/// The only schema version this host reads.
pub const SCHEMA_VERSION: u32 = 2;

/// The longest `systemPrompt` accepted, in bytes.
pub const MAX_SYSTEM_PROMPT_BYTES: usize = 64 * 1024;

/// A validated agent configuration (PERM-5).
///
/// ```
/// use host_shim::{AgentConfig, ToolName, WorkspaceKind};
/// let config = AgentConfig::parse(r#"{
///     "schemaVersion": 2,
///     "systemPrompt": "Work on the text files in the granted folder.",
///     "tools": [{"ref": "read"}, {"ref": "write"}, {"ref": "run"}],
///     "workspace": {"kind": "mounted", "path": "/home/u/notes"},
///     "memory": "session",
///     "mode": "yolo"
/// }"#).unwrap();
/// assert!(config.offers(ToolName::Run));
/// assert_eq!(config.workspace.kind, WorkspaceKind::Mounted);
///
/// let err = AgentConfig::parse(r#"{"schemaVersion": 1}"#).unwrap_err();
/// assert_eq!(err.field(), "schemaVersion");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "Agent configuration v2")]
pub struct AgentConfig {
    /// Always 2.
    #[schemars(range(min = 2, max = 2))]
    pub schema_version: u32,
    /// The agent's system prompt.
    #[schemars(length(max = 65536))]
    pub system_prompt: String,
    /// The tools offered to the agent, each by its `ref` (PERM-4).
    pub tools: Vec<ToolRef>,
    /// Where the agent works.
    pub workspace: WorkspaceConfig,
    /// How long the agent remembers: only `session`.
    pub memory: Memory,
    /// `yolo` lets the exec tools run (PERM-3, CMD-1); omitted, only the file tools work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// The agent runtime; omitted follows the host's global default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
}

/// One entry of `tools`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolRef {
    /// The tool's name.
    #[serde(rename = "ref")]
    pub tool: ToolName,
}

/// Why a configuration cannot run a tool it may offer ([`AgentConfig::unrunnable`]). Its
/// `Display` is the short reason a tool list gives; [`Unrunnable::error`] the refusal of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unrunnable {
    /// `run` and `command` run only in mode `yolo`.
    NeedsYolo(ToolName),
    /// `run` works on a mirror, so only in a `mounted` workspace (PERM-3); this is the kind.
    RunNeedsMounted(WorkspaceKind),
    /// `command` works in the folder itself: not in a `mounted` workspace (CMD-1).
    CommandNeedsUnmounted,
    /// `run_command` works in the user's folder itself, only in a `direct` workspace
    /// (RC-1); this is the kind. Not `mounted` (its changes would wait for a write-back the
    /// tool does not have), not `app-private` (that folder lies in the host's state directory,
    /// which run_command's sandbox hides).
    RunCommandNeedsDirect(WorkspaceKind),
    /// `background_command` runs what `run_command` would, so in a `direct` workspace only;
    /// this is the kind.
    BackgroundCommandNeedsDirect(WorkspaceKind),
}

impl Unrunnable {
    /// The call's refusal: `AGENT_EXEC_YOLO_REQUIRED` for the mode, `AGENT_PERMISSION_DENIED`
    /// for the workspace kind, each saying what to configure instead.
    pub fn error(self) -> ToolError {
        match self {
            Unrunnable::NeedsYolo(tool) => ToolError::new(
                ErrorCode::ExecYoloRequired,
                format!(
                    "{tool} runs only in mode yolo; set \"mode\": \"yolo\" in the agent configuration"
                ),
            ),
            Unrunnable::RunNeedsMounted(kind) => ToolError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "run works only in a mounted workspace (a mirror of a granted folder), this \
                     one is {kind}; configure workspace.kind \"mounted\", or use command"
                ),
            ),
            Unrunnable::CommandNeedsUnmounted => ToolError::new(
                ErrorCode::PermissionDenied,
                "command works only in a direct or app-private workspace, this one is mounted; \
                 configure workspace.kind \"direct\", or use run",
            ),
            Unrunnable::RunCommandNeedsDirect(kind) => ToolError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "run_command works only in a direct workspace (the user's folder itself), \
                     this one is {kind}; configure workspace.kind \"direct\""
                ),
            ),
            Unrunnable::BackgroundCommandNeedsDirect(kind) => ToolError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "background_command works only in a direct workspace (the user's folder \
                     itself), this one is {kind}; configure workspace.kind \"direct\""
                ),
            ),
        }
    }
}

impl fmt::Display for Unrunnable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unrunnable::NeedsYolo(tool) => write!(f, "{tool} needs \"mode\": \"yolo\""),
            Unrunnable::RunNeedsMounted(kind) => {
                write!(f, "run needs a mounted workspace, this one is {kind}")
            }
            Unrunnable::CommandNeedsUnmounted => {
                f.write_str("command needs a direct or app-private workspace, this one is mounted")
            }
            Unrunnable::RunCommandNeedsDirect(kind) => {
                write!(
                    f,
                    "run_command needs a direct workspace, this one is {kind}"
                )
            }
            Unrunnable::BackgroundCommandNeedsDirect(kind) => {
                write!(
                    f,
                    "background_command needs a direct workspace, this one is {kind}"
                )
            }
        }
    }
}

/// A tool this host offers.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ToolName {
    /// `read`: text of a file in the workspace (FILE-1).
    Read,
    /// `write`: replace a file atomically (FILE-2).
    Write,
    /// `edit`: replace a string in a file (FILE-1, FILE-2).
    Edit,
    /// `grep`: search text files (FILE-3).
    Grep,
    /// `run`: awk, wc, sort, diff on the mirror (RUN-*).
    Run,
    /// `command`: `/bin/sh -c` in the workspace (CMD-*).
    Command,
    /// `run_command`: an argv with the confirmation and password gates of seed 001 (RC-*),
    /// in the run_command sandbox (RCS-*).
    #[serde(rename = "run_command")]
    RunCommand,
    /// `background_command`: `run_command`'s checks for a job that outlives the call —
    /// watchers, dev servers, long suites — with keyword reports and a completion event
    /// (BG-*). Needs a front end that delivers events (the MCP server, a library host).
    #[serde(rename = "background_command")]
    BackgroundCommand,
    /// `background_status`: the session's background tasks, or one with its latest output.
    /// Offered wherever `background_command` is.
    #[serde(rename = "background_status")]
    BackgroundStatus,
    /// `background_cancel`: stops one background task (one leg alone, BG-9). Offered
    /// wherever `background_command` is.
    #[serde(rename = "background_cancel")]
    BackgroundCancel,
}

impl ToolName {
    /// Every tool, in the order they are listed.
    pub const ALL: &'static [ToolName] = &[
        ToolName::Read,
        ToolName::Write,
        ToolName::Edit,
        ToolName::Grep,
        ToolName::Run,
        ToolName::Command,
        ToolName::RunCommand,
        ToolName::BackgroundCommand,
        ToolName::BackgroundStatus,
        ToolName::BackgroundCancel,
    ];

    /// The `ref` text.
    pub const fn as_str(self) -> &'static str {
        match self {
            ToolName::Read => "read",
            ToolName::Write => "write",
            ToolName::Edit => "edit",
            ToolName::Grep => "grep",
            ToolName::Run => "run",
            ToolName::Command => "command",
            ToolName::RunCommand => "run_command",
            ToolName::BackgroundCommand => "background_command",
            ToolName::BackgroundStatus => "background_status",
            ToolName::BackgroundCancel => "background_cancel",
        }
    }

    /// The tool named `name`, if this host offers one.
    pub fn from_name(name: &str) -> Option<ToolName> {
        ToolName::ALL.iter().copied().find(|t| t.as_str() == name)
    }

    /// What the tool does, its arguments and its result, in the words an agent reads in a tool
    /// list (MCP's `description`).
    pub const fn description(self) -> &'static str {
        match self {
            ToolName::Read => {
                "Read a text file of the workspace. Arguments {path, offset?, limit?} (offset and \
                 limit in lines); result {content, totalLines, truncated}. Symlinks and hard-linked \
                 files are refused."
            }
            ToolName::Write => {
                "Create or replace a file of the workspace atomically, making missing directories \
                 on the way. Arguments {path, content}; result {bytesWritten}."
            }
            ToolName::Edit => {
                "Replace text in a file of the workspace. Arguments {path, oldString, newString, \
                 replaceAll?}; without replaceAll the old string must occur exactly once. Result \
                 {replacements}."
            }
            ToolName::Grep => {
                "Search the workspace's text files with a regular expression. Arguments {pattern, \
                 path?, glob?, maxResults?}; result {matches: [{path, line, text}], truncated}. \
                 truncated: true means some file was too large or unreadable, not that nothing \
                 matched."
            }
            ToolName::Run => {
                "Run awk (-f script file), wc, sort or diff on files of the workspace, in a \
                 deny-default sandbox on a mirror of it that is written back when the call \
                 succeeds. Arguments {program, args, cwdRelative?, timeoutMs?}; result {program, \
                 exitCode, stdout, stderr, truncated, denials?}. denials lists each access the \
                 sandbox refused ({path, access, reason, remedy})."
            }
            ToolName::Command => {
                "Run one /bin/sh -c command line in the workspace, in a deny-default sandbox (the \
                 workspace and a private temp dir are writable). Arguments {command, cwd?, \
                 extraPaths?, timeoutMs?}; result {stdout, stderr, exitCode, status, truncated, \
                 partialExecution, descendantsStopped, denials?}. denials lists each access the \
                 sandbox refused ({path, access, reason, remedy}): act on its remedy rather than \
                 retrying. extraPaths need the user's approval per call."
            }
            ToolName::RunCommand => {
                "Run one program with its arguments in the workspace folder, in a sandbox: reads \
                 the system, the workspace and your home except its credential and private \
                 locations; writes the workspace, a private temp dir and the toolchains' caches; \
                 no network. argv is executed directly, never through a shell: use ['sh', '-c', \
                 '…'] for pipes, redirections and globs. Arguments {argv, network?, write_paths?, \
                 sandbox?}: network: true lifts the network for the call, write_paths makes more \
                 paths writable, sandbox: false runs outside the sandbox (both after the user's \
                 confirmation or system password). Commands that are not read-only may ask the \
                 user first; rm moves to the trash. Result {output (stdout and stderr merged, head \
                 and tail kept, secrets masked), exitCode, status, truncated, descendantsStopped, \
                 denials, hint?, label, executed, trashed, sandbox, message?}: executed: false \
                 means nothing ran (declined, no way to ask) and message says how to run it \
                 instead; act on hint and denials rather than retrying. File watchers, dev \
                 servers and jobs likely past 5 minutes belong in background_command."
            }
            ToolName::BackgroundCommand => {
                "Start a long job in the background — a file watcher or dev server (only here), \
                 a test suite or build past 5 minutes, or anything the user asks to run in the \
                 background — with run_command's arguments, checks, sandbox and confirmations. \
                 Arguments {argv, network?, write_paths?, sandbox?, objective?, next?, \
                 timeout_min? (1-60, default 60), keywords? (replace the defaults error, err!, \
                 fail, fatal, panic, exception, traceback, …), group? (legs with the same group \
                 complete together)}. Answers at once {executed, taskId, label, logPath, \
                 timeoutMin, message}; reports follow as events: an output line with a keyword \
                 (the latest output, once quiet for 2 s, at most one per 30 s), the end (the \
                 last 31 KiB), and the group's completion with objective, next and all reports. \
                 When asked about progress, read the tail of logPath with read first."
            }
            ToolName::BackgroundStatus => {
                "List this session's background tasks, or one task with its latest output. \
                 Arguments {taskId?}; result {tasks: [{taskId, label, state, runningSecs, \
                 logPath, outputBytes, reports, …}], latestOutput?}."
            }
            ToolName::BackgroundCancel => {
                "Stop one background task and everything it started. Arguments {taskId}; \
                 result the task as background_status shows it; its end event says cancelled."
            }
        }
    }

    /// True for `run`, `command` and `run_command`, which need `local.terminal.exec@1` (TS-5)
    /// and mode `yolo`.
    pub const fn is_exec(self) -> bool {
        matches!(
            self,
            ToolName::Run | ToolName::Command | ToolName::RunCommand | ToolName::BackgroundCommand
        )
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `workspace`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// The kind of workspace.
    pub kind: WorkspaceKind,
    /// The folder, exactly as the plugin's folder grant records it; required for `mounted` and
    /// `direct`, absent for `app-private` (the host chooses that folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
}

/// How the agent reaches its folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WorkspaceKind {
    /// A private copy made at turn start, written back after a successful turn (RUN-11).
    Mounted,
    /// The granted folder itself, pinned by a lease for the turn (CMD-8).
    Direct,
    /// A per-plugin private folder under the host's state directory.
    AppPrivate,
}

impl WorkspaceKind {
    /// The configuration text.
    pub const fn as_str(self) -> &'static str {
        match self {
            WorkspaceKind::Mounted => "mounted",
            WorkspaceKind::Direct => "direct",
            WorkspaceKind::AppPrivate => "app-private",
        }
    }
}

impl fmt::Display for WorkspaceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `memory`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Memory {
    /// Remembered for the session only.
    Session,
}

/// `mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The agent acts without per-step confirmation; required by `run`, `command` and
    /// `run_command` (whose own gates still apply: the host's run_command mode `safe`, `auto`
    /// or `allow-all` decides its confirmations, and nothing skips a password).
    Yolo,
}

/// `runtime`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    /// `pi`.
    Pi,
    /// `dsh`.
    Dsh,
    /// `codex`.
    Codex,
}

/// A refused configuration: which field, what is wrong with it, and what to do instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}; {fix}")]
pub struct ConfigError {
    field: String,
    problem: String,
    fix: String,
}

impl ConfigError {
    fn new(field: impl Into<String>, problem: impl Into<String>, fix: impl Into<String>) -> Self {
        ConfigError {
            field: field.into(),
            problem: problem.into(),
            fix: fix.into(),
        }
    }

    /// The field's path, e.g. `tools[2].ref`; `(document)` for the whole text.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What is wrong.
    pub fn problem(&self) -> &str {
        &self.problem
    }

    /// What to do instead.
    pub fn fix(&self) -> &str {
        &self.fix
    }
}

const FIELDS: &[&str] = &[
    "schemaVersion",
    "systemPrompt",
    "tools",
    "workspace",
    "memory",
    "mode",
    "runtime",
];

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn expect_object<'a>(
    field: &str,
    v: &'a Value,
    fix: &str,
) -> Result<&'a Map<String, Value>, ConfigError> {
    v.as_object()
        .ok_or_else(|| ConfigError::new(field, format!("is {}, not an object", kind_name(v)), fix))
}

fn refuse_unknown(
    prefix: &str,
    map: &Map<String, Value>,
    known: &[&str],
) -> Result<(), ConfigError> {
    if let Some(key) = map.keys().find(|k| !known.contains(&k.as_str())) {
        let field = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        return Err(ConfigError::new(
            field,
            "is not a field of agent configuration v2",
            format!("remove it (the fields here are: {})", known.join(", ")),
        ));
    }
    Ok(())
}

fn required<'a>(
    map: &'a Map<String, Value>,
    field: &str,
    fix: &str,
) -> Result<&'a Value, ConfigError> {
    map.get(field)
        .ok_or_else(|| ConfigError::new(field, "is missing", fix))
}

/// A string value out of a closed set; `null` is refused like any other wrong type, so that
/// "omit the field" stays the only way to ask for a default.
fn one_of<'a>(
    field: &str,
    v: &'a Value,
    allowed: &[&str],
    fix: &str,
) -> Result<&'a str, ConfigError> {
    match v.as_str() {
        Some(s) if allowed.contains(&s) => Ok(s),
        Some(s) => Err(ConfigError::new(
            field,
            format!("{s:?} is not one of {}", quoted(allowed)),
            fix,
        )),
        None => Err(ConfigError::new(
            field,
            format!("is {}, not a string", kind_name(v)),
            fix,
        )),
    }
}

fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks a workspace path's shape: absolute, normalised, no NUL. Placeholder text (like the
/// seed's "用户已通过面板授权的路径") fails here, being relative.
fn check_workspace_path(field: &str, s: &str) -> Result<PathBuf, ConfigError> {
    let fix = "write the absolute path of a folder this plugin was granted through \
               system.folder-pick@1 (`agent-exec status` lists the grants)";
    if s.is_empty() {
        return Err(ConfigError::new(field, "is empty", fix));
    }
    if s.contains('\0') {
        return Err(ConfigError::new(field, "contains a NUL byte", fix));
    }
    let path = Path::new(s);
    if !path.is_absolute() {
        return Err(ConfigError::new(
            field,
            format!("{s:?} is not an absolute path (placeholder text is not a folder)"),
            fix,
        ));
    }
    if path
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(ConfigError::new(
            field,
            format!("{s:?} contains `.` or `..`"),
            "write the folder's path without `.` or `..` components, exactly as granted",
        ));
    }
    Ok(path.to_path_buf())
}

impl AgentConfig {
    /// Parses and validates a configuration's JSON text. Does not look at grants; see
    /// [`AgentConfig::check_grants`].
    pub fn parse(text: &str) -> Result<AgentConfig, ConfigError> {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            ConfigError::new(
                "(document)",
                format!("is not valid JSON ({e})"),
                "write the configuration as one JSON object",
            )
        })?;
        AgentConfig::from_value(&value)
    }

    /// Validates an already parsed JSON value.
    pub fn from_value(value: &Value) -> Result<AgentConfig, ConfigError> {
        let top = expect_object(
            "(document)",
            value,
            "write the configuration as one JSON object",
        )?;
        refuse_unknown("", top, FIELDS)?;

        let version_fix = "write \"schemaVersion\": 2 and the fields of version 2";
        let version = required(top, "schemaVersion", version_fix)?;
        if version.as_u64() != Some(u64::from(SCHEMA_VERSION)) {
            return Err(ConfigError::new(
                "schemaVersion",
                format!("is {version}, but this host reads only version 2"),
                version_fix,
            ));
        }

        let prompt_fix = "write the agent's instructions as a string (\"\" for none)";
        let prompt = required(top, "systemPrompt", prompt_fix)?;
        let prompt = prompt.as_str().ok_or_else(|| {
            ConfigError::new(
                "systemPrompt",
                format!("is {}, not a string", kind_name(prompt)),
                prompt_fix,
            )
        })?;
        if prompt.len() > MAX_SYSTEM_PROMPT_BYTES {
            return Err(ConfigError::new(
                "systemPrompt",
                format!(
                    "is {} bytes, over the limit of {MAX_SYSTEM_PROMPT_BYTES}",
                    prompt.len()
                ),
                "shorten it",
            ));
        }

        let tools = parse_tools(required(
            top,
            "tools",
            "list the tools to offer, e.g. \"tools\": [{\"ref\": \"read\"}]",
        )?)?;
        let workspace = parse_workspace(required(
            top,
            "workspace",
            "add \"workspace\": {\"kind\": \"mounted\", \"path\": \"<granted folder>\"}",
        )?)?;

        let memory_fix = "write \"memory\": \"session\"";
        one_of(
            "memory",
            required(top, "memory", memory_fix)?,
            &["session"],
            memory_fix,
        )?;

        let mode = match top.get("mode") {
            None => None,
            Some(v) => {
                one_of(
                    "mode",
                    v,
                    &["yolo"],
                    "write \"mode\": \"yolo\" to allow run and command, or leave mode out to \
                     offer only the file tools",
                )?;
                Some(Mode::Yolo)
            }
        };
        let runtime = match top.get("runtime") {
            None => None,
            Some(v) => Some(
                match one_of(
                    "runtime",
                    v,
                    &["pi", "dsh", "codex"],
                    "write one of \"pi\", \"dsh\", \"codex\", or leave runtime out to follow the \
                     global default",
                )? {
                    "pi" => Runtime::Pi,
                    "dsh" => Runtime::Dsh,
                    _ => Runtime::Codex,
                },
            ),
        };

        let config = AgentConfig {
            schema_version: SCHEMA_VERSION,
            system_prompt: prompt.to_owned(),
            tools,
            workspace,
            memory: Memory::Session,
            mode,
            runtime,
        };
        // The typed structs must accept whatever the walk accepted; if they ever disagree, the
        // configuration is refused rather than half-read.
        match serde_json::from_value::<AgentConfig>(value.clone()) {
            Ok(typed) if typed == config => Ok(config),
            _ => Err(ConfigError::new(
                "(document)",
                "was accepted by the validator but not by the typed schema",
                "report this as a bug in host-shim, with the configuration",
            )),
        }
    }

    /// True when `tools` lists `tool` (PERM-4).
    pub fn offers(&self, tool: ToolName) -> bool {
        // The background tasks' status and cancel come with the tool that starts them.
        let tool = match tool {
            ToolName::BackgroundStatus | ToolName::BackgroundCancel => ToolName::BackgroundCommand,
            other => other,
        };
        self.tools.iter().any(|t| t.tool == tool)
    }

    /// True when `mode` is `yolo`.
    pub fn is_yolo(&self) -> bool {
        self.mode == Some(Mode::Yolo)
    }

    /// Why this configuration cannot run `tool`, if it cannot: the exec tools need mode
    /// `yolo`, `run` a `mounted` workspace (PERM-3), `command` a `direct` or `app-private`
    /// one (CMD-1) and `run_command` a `direct` one ([`Unrunnable::RunCommandNeedsDirect`]
    /// says why). Whether `tools` lists it is [`AgentConfig::offers`]. The one copy of these
    /// rules: [`Turn::call`](crate::Turn::call) refuses with [`Unrunnable::error`], and a front
    /// end that lists tools (an MCP server) leaves them out saying [`Unrunnable`]'s `Display`.
    pub fn unrunnable(&self, tool: ToolName) -> Option<Unrunnable> {
        let kind = self.workspace.kind;
        if tool.is_exec() && !self.is_yolo() {
            return Some(Unrunnable::NeedsYolo(tool));
        }
        match (tool, kind) {
            (ToolName::Run, WorkspaceKind::Mounted) => None,
            (ToolName::Run, kind) => Some(Unrunnable::RunNeedsMounted(kind)),
            (ToolName::Command, WorkspaceKind::Mounted) => Some(Unrunnable::CommandNeedsUnmounted),
            (ToolName::RunCommand, WorkspaceKind::Direct) => None,
            (ToolName::RunCommand, kind) => Some(Unrunnable::RunCommandNeedsDirect(kind)),
            (ToolName::BackgroundCommand, WorkspaceKind::Direct) => None,
            (ToolName::BackgroundCommand, kind) => {
                Some(Unrunnable::BackgroundCommandNeedsDirect(kind))
            }
            _ => None,
        }
    }

    /// Checks the workspace path against `plugin`'s folder grants (PERM-5): a `mounted` or
    /// `direct` path must be exactly one of them.
    pub fn check_grants(
        &self,
        plugin: &PluginId,
        record: &PluginRecord,
    ) -> Result<(), ConfigError> {
        let Some(path) = &self.workspace.path else {
            return Ok(());
        };
        if record.folder_grants.iter().any(|g| g.path == *path) {
            return Ok(());
        }
        Err(ConfigError::new(
            "workspace.path",
            format!(
                "{} is not one of plugin {plugin}'s folder grants",
                path.display()
            ),
            format!(
                "have the user pick and grant it (`agent-exec grant folder {plugin} <DIR>`), \
                 then write the path exactly as `agent-exec status` shows it"
            ),
        ))
    }

    /// The JSON Schema of this configuration (published as `schema/agent-config.v2.json`).
    pub fn json_schema() -> Value {
        serde_json::to_value(schemars::schema_for!(AgentConfig)).unwrap_or(Value::Null)
    }
}

fn parse_tools(v: &Value) -> Result<Vec<ToolRef>, ConfigError> {
    let fix = "write a list like [{\"ref\": \"read\"}, {\"ref\": \"run\"}]";
    let list = v.as_array().ok_or_else(|| {
        ConfigError::new("tools", format!("is {}, not an array", kind_name(v)), fix)
    })?;
    let names: Vec<&str> = ToolName::ALL.iter().map(|t| t.as_str()).collect();
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let field = format!("tools[{i}]");
        let entry = expect_object(&field, item, "write each tool as {\"ref\": \"<name>\"}")?;
        refuse_unknown(&field, entry, &["ref"])?;
        let ref_field = format!("{field}.ref");
        let name = one_of(
            &ref_field,
            required(entry, "ref", "write each tool as {\"ref\": \"<name>\"}")
                .map_err(|e| ConfigError::new(ref_field.clone(), e.problem, e.fix))?,
            &names,
            &format!(
                "use one of the tools this host offers: {}",
                names.join(", ")
            ),
        )?;
        let tool = ToolName::from_name(name).ok_or_else(|| {
            ConfigError::new(&ref_field, "is unknown", "use a tool this host offers")
        })?;
        if !seen.insert(tool) {
            return Err(ConfigError::new(
                ref_field,
                format!("{name:?} is listed twice"),
                "list each tool once",
            ));
        }
        out.push(ToolRef { tool });
    }
    Ok(out)
}

fn parse_workspace(v: &Value) -> Result<WorkspaceConfig, ConfigError> {
    let map = expect_object(
        "workspace",
        v,
        "write {\"kind\": \"mounted\", \"path\": \"<granted folder>\"}",
    )?;
    refuse_unknown("workspace", map, &["kind", "path"])?;
    let kind_fix = "write \"kind\": one of \"mounted\", \"direct\", \"app-private\"";
    let kind = required(map, "kind", kind_fix)
        .map_err(|e| ConfigError::new("workspace.kind", e.problem, e.fix))?;
    let kind = match one_of(
        "workspace.kind",
        kind,
        &["mounted", "direct", "app-private"],
        kind_fix,
    )? {
        "mounted" => WorkspaceKind::Mounted,
        "direct" => WorkspaceKind::Direct,
        _ => WorkspaceKind::AppPrivate,
    };
    let path = match (kind, map.get("path")) {
        (WorkspaceKind::AppPrivate, None) => None,
        (WorkspaceKind::AppPrivate, Some(_)) => {
            return Err(ConfigError::new(
                "workspace.path",
                "is given for an app-private workspace",
                "remove it: the host keeps each plugin's private folder in its state directory",
            ));
        }
        (_, None) => {
            return Err(ConfigError::new(
                "workspace.path",
                format!("is missing, and a {kind} workspace needs its folder"),
                "write the absolute path of a folder this plugin was granted",
            ));
        }
        (_, Some(p)) => {
            let s = p.as_str().ok_or_else(|| {
                ConfigError::new(
                    "workspace.path",
                    format!("is {}, not a string", kind_name(p)),
                    "write the folder's absolute path as a string",
                )
            })?;
            Some(check_workspace_path("workspace.path", s)?)
        }
    };
    Ok(WorkspaceConfig { kind, path })
}
