//! `agent-exec`: one tool call from a shell (`call`), the tools served to an MCP client (`mcp`),
//! a `run_command` decision without running anything (`check`), the machine's sandbox facts
//! (`doctor`), and the user's grants (`grant`, `revoke`, `status`).
//!
//! `call` prints exactly one JSON object on one line on stdout — the tool's result with
//! `"ok": true` merged in, or the error object — and exits 0 when `ok` is true, 1 when false, 2
//! for usage errors. A single `call` is a one-call turn.
//!
//! Without `--plugin`, the call is made by the person at the terminal: the shell user is the
//! host's user and the `--workspace` they typed is their folder pick (nothing is persisted for
//! it). With `--plugin ID` the call is made for an installed plugin and only with the grants the
//! state directory holds for it; a `revoke` in another shell stops it while it runs (TS-3).
//!
//! `mcp` speaks MCP on stdin/stdout until the client hangs up; its diagnostics go to stderr
//! only (stdout is the protocol). How requests map to sessions and turns: `host_shim::McpServer`.
//!
//! `check run_command` prints argv-policy's decision as one JSON line and exits 0 for `run`, 1 for
//! `refuse`, 2 for usage errors; nothing is run and no file is touched.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use host_shim::{
    AgentConfig, CallOptions, Capability, ErrorCode, FolderGrant, Host, HostError,
    PlatformApproval, PluginId, PluginManifest, PluginRecord, StateError, StateStore, ToolError,
    ToolName, TtyApprover, WorkspaceKind, check_plugin_id, local_user_record,
};
use serde_json::{Value, json};

/// The plugin id of the person at the terminal (never persisted).
const LOCAL_USER: &str = "local-user";

/// The most bytes of tool arguments read from `--json` or stdin.
const MAX_ARGS_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Parser, Debug)]
#[command(
    name = "agent-exec",
    version,
    about = "Scoped tools for AI agents: one call from a shell, an MCP server, and the user's grants.",
    after_help = "Disk bounds (issue 15):\n  \
        AGENT_EXEC_KEPT_MIRRORS       mirrors kept for diagnosis at most (default 5)\n  \
        AGENT_EXEC_KEPT_MIRROR_BYTES  bytes in all of them at most (default 536870912, 512 MiB)\n  \
        AGENT_EXEC_CONCURRENT_COPIES  temporary copies of one workspace at once, beside its\n                                \
        persistent mirror (default 3); further turns wait for a free one\n\
        Kept mirrors are listed by `agent-exec status`; the oldest go first."
)]
struct Cli {
    /// The state directory (grants, mirrors, private folders). Default: $AGENT_EXEC_STATE_DIR,
    /// else $XDG_STATE_HOME/agent-exec, else ~/.local/state/agent-exec.
    #[arg(long, global = true, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Make one tool call (a one-call turn) and print its JSON result on one line.
    Call(CallArgs),
    /// Serve the tools to an MCP client over stdio (one turn per tools/call).
    Mcp(McpArgs),
    /// Print a tool's decision on some arguments as one JSON line, without running anything.
    Check {
        #[command(subcommand)]
        what: CheckWhat,
    },
    /// Print, as JSON, which sandbox features this machine has and the cleanup mode.
    Doctor,
    /// Give a plugin something: install it, approve, consent, allow, or grant a folder.
    Grant {
        #[command(subcommand)]
        what: Change,
    },
    /// Take something back; calls of the plugin that are running are stopped.
    Revoke {
        #[command(subcommand)]
        what: Change,
    },
    /// Print the persisted grants and the mirrors kept for diagnosis (path, size, when, why)
    /// as JSON. Kept mirrors are bounded: at most $AGENT_EXEC_KEPT_MIRRORS (default 5) and
    /// $AGENT_EXEC_KEPT_MIRROR_BYTES bytes (default 512 MiB), oldest removed first.
    Status {
        /// Only this plugin.
        #[arg(long)]
        plugin: Option<String>,
    },
    /// Print a JSON Schema: the agent configuration, or a tool's arguments.
    Schema {
        /// Which schema.
        #[arg(value_enum)]
        of: SchemaOf,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum SchemaOf {
    Config,
    Read,
    Write,
    Edit,
    Grep,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ToolArg {
    Read,
    Write,
    Edit,
    Grep,
    Run,
    Command,
}

impl ToolArg {
    fn name(self) -> ToolName {
        match self {
            ToolArg::Read => ToolName::Read,
            ToolArg::Write => ToolName::Write,
            ToolArg::Edit => ToolName::Edit,
            ToolArg::Grep => ToolName::Grep,
            ToolArg::Run => ToolName::Run,
            ToolArg::Command => ToolName::Command,
        }
    }
}

#[derive(Args, Debug)]
struct CallArgs {
    /// The tool.
    #[arg(value_enum)]
    tool: ToolArg,
    /// The folder to work in. `run` works on a mirror of it, written back only if the call
    /// succeeds; the other tools work in it directly.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// The tool's arguments as a JSON object; read from stdin when absent.
    #[arg(long, value_name = "ARGS")]
    json: Option<String>,
    /// The call's callId (default "cli-1").
    #[arg(long, value_name = "ID", default_value = "cli-1")]
    call_id: String,
    /// Call for this installed plugin, with its persisted grants, instead of as the local user.
    #[arg(long, value_name = "ID")]
    plugin: Option<String>,
    /// An agent configuration (schema version 2) to take the workspace kind and tools from.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Approve this extra path for this call (`command`'s extraPaths; repeatable).
    #[arg(long, value_name = "PATH")]
    approve_extra_path: Vec<PathBuf>,
    /// Keep a `mounted` workspace's mirror after a successful call and print where it is.
    #[arg(long)]
    keep_mirror: bool,
    /// Let `command` use your own toolchains: read + execute of ~/.cargo/bin, ~/.rustup,
    /// ~/.nvm/versions, ~/.pyenv, ~/.local/bin, ~/go/bin, ~/.sdkman/candidates … where they
    /// exist, on PATH, never their credential files (~/.cargo/credentials.toml, ~/.npmrc, …).
    #[arg(long)]
    toolchains: bool,
}

#[derive(Args, Debug)]
struct McpArgs {
    /// The folder to work in. Without --config: `run` works on a mirror of it (written back
    /// after each successful call), the other tools in it directly.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// An agent configuration (schema version 2): serve exactly its tools and workspace.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Serve for this installed plugin, with its persisted grants, instead of as the local user.
    #[arg(long, value_name = "ID")]
    plugin: Option<String>,
    /// Let `command` use your own toolchains (as `call --toolchains`).
    #[arg(long)]
    toolchains: bool,
}

#[derive(Subcommand, Debug)]
enum CheckWhat {
    /// The `run_command` decision: `{"decision": "run"|"refuse", "via", "gate", …}`.
    #[command(name = "run_command", alias = "run-command")]
    RunCommand(CheckArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ModeArg {
    Safe,
    Auto,
    AllowAll,
}

#[derive(Args, Debug)]
struct CheckArgs {
    /// The working directory the command would run in.
    #[arg(long, value_name = "DIR")]
    workspace: PathBuf,
    /// The approval mode; overrides the config file's `mode` (default: the file's, else safe).
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// The user's run_command configuration (JSON: denied_command, read_only_command,
    /// sensitive_path, mode), merged with the shipped lists.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The tool's arguments as a JSON object, e.g. '{"argv": ["git", "status"]}'; read from
    /// stdin when absent.
    #[arg(long, value_name = "ARGS")]
    json: Option<String>,
}

#[derive(Subcommand, Debug)]
enum Change {
    /// Install (grant) or uninstall (revoke) a plugin. Installing needs --manifest or --package.
    Plugin {
        /// The plugin id.
        id: String,
        /// The plugin's manifest (JSON: package, requires.hostCapabilities, permissions).
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
        /// Instead of a manifest: the package identity …
        #[arg(long, value_name = "PKG", conflicts_with = "manifest")]
        package: Option<String>,
        /// … and each capability it declares in both lists.
        #[arg(long, value_name = "CAP", requires = "package")]
        declare: Vec<String>,
    },
    /// The Agent service approval (PERM-1).
    Service {
        /// The plugin id.
        id: String,
    },
    /// The user's consent to the plugin (PERM-1).
    Consent {
        /// The plugin id.
        id: String,
    },
    /// The platform's approval of a capability for the plugin's current package (PERM-2).
    Approve {
        /// The plugin id.
        id: String,
        /// The capability, e.g. local.terminal.exec@1.
        capability: String,
    },
    /// The user's explicit allowance of a capability (PERM-2).
    Allow {
        /// The plugin id.
        id: String,
        /// The capability, e.g. local.terminal.exec@1.
        capability: String,
    },
    /// A folder picked through system.folder-pick@1 (PERM-3).
    Folder {
        /// The plugin id.
        id: String,
        /// The folder.
        dir: PathBuf,
    },
    /// Everything the plugin's manifest declares: service approval, consent, and each declared
    /// capability approved and allowed (revoke: all of those taken back; folders stay).
    All {
        /// The plugin id.
        id: String,
    },
}

fn print_line(value: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

fn fail(err: &ToolError) -> ExitCode {
    print_line(&serde_json::to_value(err).unwrap_or_else(|_| json!({"ok": false})));
    ExitCode::from(1)
}

fn usage(message: &str) -> ExitCode {
    eprintln!("agent-exec: {message}");
    ExitCode::from(2)
}

fn state_error(e: &StateError) -> ToolError {
    let code = match e {
        StateError::BadPluginId { .. } | StateError::Refused(_) => ErrorCode::ExecArgumentsInvalid,
        _ => ErrorCode::ExecIoFailed,
    };
    ToolError::new(code, e.to_string())
}

fn host_error(e: &HostError) -> ToolError {
    match e {
        HostError::State(s) => state_error(s),
        HostError::UnknownPlugin(_) | HostError::NotGranted(_) => {
            ToolError::new(ErrorCode::PermissionDenied, e.to_string())
        }
        HostError::Unpinnable { .. } => ToolError::new(ErrorCode::ExecPathInvalid, e.to_string()),
        _ => ToolError::new(ErrorCode::ExecArgumentsInvalid, e.to_string()),
    }
}

fn open_store(cli_dir: Option<&Path>) -> Result<StateStore, StateError> {
    let store = match cli_dir {
        Some(dir) => StateStore::open(dir)?,
        None => StateStore::open(StateStore::default_dir()?)?,
    };
    // Issue 15 §4: the bounds on mirrors kept for diagnosis (defaults in KeptLimits).
    let mut limits = store.kept_limits();
    if let Some(n) = env_number("AGENT_EXEC_KEPT_MIRRORS")? {
        limits.max_count = usize::try_from(n).unwrap_or(usize::MAX);
    }
    if let Some(n) = env_number("AGENT_EXEC_KEPT_MIRROR_BYTES")? {
        limits.max_bytes = n;
    }
    let mut store = store.with_kept_limits(limits);
    // Issue 15 §4: temporary full copies of one workspace at once (DEFAULT_CONCURRENT_COPIES).
    if let Some(n) = env_number("AGENT_EXEC_CONCURRENT_COPIES")? {
        store = store.with_concurrent_copies(usize::try_from(n).unwrap_or(usize::MAX));
    }
    Ok(store)
}

/// A non-negative whole number from the environment, if the variable is set.
fn env_number(name: &str) -> Result<Option<u64>, StateError> {
    let Some(text) = std::env::var_os(name) else {
        return Ok(None);
    };
    text.to_str()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| {
            StateError::Refused(format!(
                "{name} is {text:?}, not a whole number; set it to e.g. 5, or unset it for the default"
            ))
        })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Issue 15 §4: a SIGTERM, SIGINT or SIGHUP mid-call leaves no temp dir or per-call mirror.
    // Before any thread starts (they inherit the mask); on failure the signals keep their
    // default action, and the supervisors and the next start's sweep still clean up.
    #[cfg(target_os = "linux")]
    if matches!(cli.command, Command::Call(_) | Command::Mcp(_))
        && let Err(e) = proctree::remove_call_dirs_on_signals()
    {
        eprintln!("agent-exec: cannot watch for signals ({e}); continuing");
    }
    // The shell's system runtime set (an `/etc` walk) builds while the call is validated and
    // its state read, instead of before the spawn (issue 16). After the signal mask above.
    #[cfg(target_os = "linux")]
    if matches!(&cli.command, Command::Call(c) if matches!(c.tool, ToolArg::Command))
        || matches!(cli.command, Command::Mcp(_))
    {
        exec::sysset::warm();
    }
    match cli.command {
        Command::Doctor => {
            print_line(&host_shim::doctor::report());
            ExitCode::SUCCESS
        }
        Command::Schema { of } => {
            let schema = match of {
                SchemaOf::Config => AgentConfig::json_schema(),
                SchemaOf::Read => schema_of(ToolName::Read),
                SchemaOf::Write => schema_of(ToolName::Write),
                SchemaOf::Edit => schema_of(ToolName::Edit),
                SchemaOf::Grep => schema_of(ToolName::Grep),
            };
            println!(
                "{}",
                serde_json::to_string_pretty(&schema).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Command::Call(args) => call(cli.state_dir.as_deref(), args),
        Command::Mcp(args) => mcp(cli.state_dir.as_deref(), args),
        Command::Check {
            what: CheckWhat::RunCommand(args),
        } => check_run_command(args),
        Command::Grant { what } => change(cli.state_dir.as_deref(), what, true),
        Command::Revoke { what } => change(cli.state_dir.as_deref(), what, false),
        Command::Status { plugin } => status(cli.state_dir.as_deref(), plugin.as_deref()),
    }
}

fn schema_of(tool: ToolName) -> Value {
    host_shim::Registry::default()
        .get(tool)
        .map(|h| h.input_schema())
        .unwrap_or(Value::Null)
}

/// The arguments' text: `--json`, else stdin (bounded).
fn read_args_text(json: Option<String>) -> Result<String, ToolError> {
    let text = match json {
        Some(t) => t,
        None => {
            let mut buf = String::new();
            std::io::stdin()
                .take(MAX_ARGS_BYTES + 1)
                .read_to_string(&mut buf)
                .map_err(|e| {
                    ToolError::new(
                        ErrorCode::ExecArgumentsInvalid,
                        format!(
                            "could not read the arguments from stdin ({e}); pass them with --json"
                        ),
                    )
                })?;
            buf
        }
    };
    if text.len() as u64 > MAX_ARGS_BYTES {
        return Err(ToolError::new(
            ErrorCode::ExecArgumentsInvalid,
            "the arguments are over 4 MiB; send less",
        ));
    }
    Ok(text)
}

fn read_args(json: Option<String>) -> Result<Value, ToolError> {
    let text = read_args_text(json)?;
    let value: Value = serde_json::from_str(&text).map_err(|e| {
        ToolError::new(
            ErrorCode::ExecArgumentsInvalid,
            format!("the arguments are not valid JSON ({e}); pass one JSON object, e.g. --json '{{\"path\": \"a.txt\"}}'"),
        )
    })?;
    if !value.is_object() {
        return Err(ToolError::new(
            ErrorCode::ExecArgumentsInvalid,
            "the arguments must be a JSON object; pass e.g. --json '{\"path\": \"a.txt\"}'",
        ));
    }
    Ok(value)
}

fn canonical_dir(dir: &Path) -> Result<PathBuf, ToolError> {
    // A link the agent could re-point (in a directory it may write, such as a writable extra
    // path that is the workspace's parent) would move the next call's workspace anywhere
    // (issue 14); extra paths refuse links the same way.
    if let Some(link) = host_shim::replaceable_link(dir) {
        return Err(ToolError::new(
            ErrorCode::ExecPathInvalid,
            format!(
                "--workspace {} goes through the symbolic link {}, in a directory you can write, \
                 which a command could re-point; give the real path of the folder",
                dir.display(),
                link.display()
            ),
        ));
    }
    let path = std::fs::canonicalize(dir).map_err(|e| {
        ToolError::new(
            ErrorCode::ExecPathInvalid,
            format!(
                "--workspace {}: {e}; give an existing folder",
                dir.display()
            ),
        )
    })?;
    if !path.is_dir() {
        return Err(ToolError::new(
            ErrorCode::ExecPathInvalid,
            format!(
                "--workspace {} is not a folder; give a folder",
                dir.display()
            ),
        ));
    }
    Ok(path)
}

/// The configuration a call runs under: the given file, or one made for this call (the tool
/// alone, `mounted` for `run`, `direct` otherwise, mode yolo).
fn call_config(args: &CallArgs, workspace: Option<&Path>) -> Result<AgentConfig, ToolError> {
    let config = match &args.config {
        Some(file) => read_config(file)?,
        None => {
            let tool = args.tool.name();
            let kind = if tool == ToolName::Run {
                WorkspaceKind::Mounted
            } else {
                WorkspaceKind::Direct
            };
            generated_config(&[tool], kind, workspace)?
        }
    };
    check_same_workspace(workspace, &config)?;
    Ok(config)
}

/// The agent configuration in `file`.
fn read_config(file: &Path) -> Result<AgentConfig, ToolError> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        ToolError::new(
            ErrorCode::ExecArgumentsInvalid,
            format!(
                "--config {}: {e}; give a readable agent configuration file",
                file.display()
            ),
        )
    })?;
    AgentConfig::parse(&text).map_err(|e| {
        ToolError::new(
            ErrorCode::ExecArgumentsInvalid,
            format!("--config {}: {e}", file.display()),
        )
    })
}

/// A configuration made for the command line: `tools` in a `kind` workspace on `workspace`,
/// mode yolo.
fn generated_config(
    tools: &[ToolName],
    kind: WorkspaceKind,
    workspace: Option<&Path>,
) -> Result<AgentConfig, ToolError> {
    let refs: Vec<Value> = tools.iter().map(|t| json!({"ref": t.as_str()})).collect();
    AgentConfig::from_value(&json!({
        "schemaVersion": 2,
        "systemPrompt": "",
        "tools": refs,
        "workspace": {"kind": kind.as_str(), "path": workspace},
        "memory": "session",
        "mode": "yolo",
    }))
    .map_err(|e| ToolError::new(ErrorCode::ExecArgumentsInvalid, e.to_string()))
}

/// `--workspace` and the configuration's `workspace.path`, when both are given, name one folder.
fn check_same_workspace(workspace: Option<&Path>, config: &AgentConfig) -> Result<(), ToolError> {
    if let (Some(ws), Some(path)) = (workspace, &config.workspace.path)
        && ws != path
    {
        return Err(ToolError::new(
            ErrorCode::ExecPathInvalid,
            format!(
                "--workspace is {} but the configuration's workspace.path is {}; give the \
                     same folder (or leave --workspace out)",
                ws.display(),
                path.display()
            ),
        ));
    }
    Ok(())
}

fn call(state_dir: Option<&Path>, args: CallArgs) -> ExitCode {
    if args.workspace.is_none() && args.config.is_none() {
        return usage("call needs --workspace DIR (or --config FILE); see agent-exec call --help");
    }
    let tool_args = match read_args(args.json.clone()) {
        Ok(v) => v,
        Err(e) => return fail(&e),
    };
    let workspace = match args.workspace.as_deref().map(canonical_dir).transpose() {
        Ok(w) => w,
        Err(e) => return fail(&e),
    };
    let config = match call_config(&args, workspace.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let store = match open_store(state_dir) {
        Ok(s) => s,
        Err(e) => return fail(&state_error(&e)),
    };
    // Extra paths: the --approve-extra-path list first, then a y/N on /dev/tty (CMD-3).
    let registry = host_shim::Registry::with_approver(std::sync::Arc::new(TtyApprover));
    let host = match Host::with_registry(store, "local".into(), registry) {
        Ok(h) => h,
        Err(e) => return fail(&host_error(&e)),
    };
    let runtime = match runtime() {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let (code, line) = runtime.block_on(async move {
        host.watch_state();
        let plugin = match calling_plugin(&host, args.plugin.as_deref(), &config) {
            Ok(p) => p,
            Err(e) => return (1, serde_json::to_value(state_error(&e)).unwrap_or_default()),
        };
        let session = match host.session(plugin, config) {
            Ok(s) => s,
            Err(e) => return (1, serde_json::to_value(host_error(&e)).unwrap_or_default()),
        };
        let turn = match session.begin_turn() {
            Ok(t) => t,
            Err(e) => return (1, serde_json::to_value(&e).unwrap_or_default()),
        };
        let options = CallOptions {
            approved_extra_paths: args.approve_extra_path.clone(),
            toolchains: args.toolchains,
        };
        let result = turn
            .call(&args.call_id, args.tool.name().as_str(), tool_args, &options)
            .await;
        let report = turn.finish(result.is_ok(), args.keep_mirror);
        if let Some(mirror) = &report.mirror {
            if mirror.kept {
                eprintln!("agent-exec: the mirror is kept at {}", mirror.path.display());
            }
            if !mirror.conflicts.is_empty() {
                eprintln!(
                    "agent-exec: {} path(s) were not written back to the folder; see \"mirror\".\"conflicts\" for why",
                    mirror.conflicts.len()
                );
            }
        }
        let line = host_shim::turn_line(result, &report);
        let code = u8::from(!host_shim::line_is_ok(&line));
        (code, line)
    });
    print_line(&line);
    ExitCode::from(code)
}

/// The plugin calls are made for: `--plugin`, else the person at the terminal, whose one folder
/// pick is the configuration's folder (none for `app-private`), held in memory only.
fn calling_plugin(
    host: &Host,
    plugin: Option<&str>,
    config: &AgentConfig,
) -> Result<PluginId, StateError> {
    if let Some(p) = plugin {
        return check_plugin_id(p);
    }
    let folder = config.workspace.path.clone().unwrap_or_default();
    let mut record = local_user_record(&folder);
    if config.workspace.kind == WorkspaceKind::AppPrivate {
        record.folder_grants.clear();
    }
    let local = check_plugin_id(LOCAL_USER)?;
    host.insert_memory_record(local.clone(), record);
    Ok(local)
}

fn runtime() -> Result<tokio::runtime::Runtime, ToolError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            ToolError::new(
                ErrorCode::ExecIoFailed,
                format!("could not start the runtime: {e}"),
            )
        })
}

/// `agent-exec mcp`: stdout is the protocol, so every complaint goes to stderr.
fn mcp(state_dir: Option<&Path>, args: McpArgs) -> ExitCode {
    if args.workspace.is_none() && args.config.is_none() {
        return usage("mcp needs --workspace DIR (or --config FILE); see agent-exec mcp --help");
    }
    let complain = |e: &ToolError| {
        eprintln!("agent-exec mcp: {} ({})", e.message(), e.code());
        ExitCode::from(1)
    };
    let workspace = match args.workspace.as_deref().map(canonical_dir).transpose() {
        Ok(w) => w,
        Err(e) => return complain(&e),
    };
    // Without a configuration: the tools on the workspace kinds `call` uses for each — `run` on
    // a mirror, the others on the folder itself (see host_shim::McpServer).
    let configs = match &args.config {
        Some(file) => read_config(file)
            .and_then(|c| check_same_workspace(workspace.as_deref(), &c).map(|()| vec![c])),
        None => generated_config(
            &[
                ToolName::Read,
                ToolName::Write,
                ToolName::Edit,
                ToolName::Grep,
                ToolName::Command,
            ],
            WorkspaceKind::Direct,
            workspace.as_deref(),
        )
        .and_then(|direct| {
            let mounted = generated_config(
                &[ToolName::Run],
                WorkspaceKind::Mounted,
                workspace.as_deref(),
            )?;
            Ok(vec![direct, mounted])
        }),
    };
    let configs = match configs {
        Ok(c) => c,
        Err(e) => return complain(&e),
    };
    if let Some(Err(e)) = args.plugin.as_deref().map(check_plugin_id) {
        return complain(&state_error(&e));
    }
    let host = match open_store(state_dir)
        .map_err(|e| state_error(&e))
        .and_then(|store| Host::open(store, "local".into()).map_err(|e| host_error(&e)))
    {
        Ok(h) => h,
        Err(e) => return complain(&e),
    };
    let runtime = match runtime() {
        Ok(r) => r,
        Err(e) => return complain(&e),
    };
    let code = runtime.block_on(async {
        host.watch_state();
        let mut server = host_shim::McpServer::new("agent-exec").with_call_options(CallOptions {
            toolchains: args.toolchains,
            ..CallOptions::default()
        });
        for config in configs {
            let plugin = match calling_plugin(&host, args.plugin.as_deref(), &config) {
                Ok(p) => p,
                Err(e) => return complain(&state_error(&e)),
            };
            let session = match host.session(plugin, config) {
                Ok(s) => s,
                Err(e) => return complain(&host_error(&e)),
            };
            for line in server.add_session(&session) {
                eprintln!("agent-exec mcp: {line}");
            }
        }
        let tools = server.tools();
        if tools.is_empty() {
            eprintln!(
                "agent-exec mcp: no tool to serve; list tools in the configuration's \"tools\" \
                 that its workspace and mode allow"
            );
            return ExitCode::from(1);
        }
        let names: Vec<&str> = tools.iter().map(|t| t.as_str()).collect();
        eprintln!("agent-exec mcp: serving {} on stdio", names.join(", "));
        match server.serve_stdio().await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("agent-exec mcp: {e}");
                ExitCode::from(1)
            }
        }
    });
    // The server returned after every call ended (answered, or stopped because the client
    // stopped reading); its stdin reader may still block in a read on a thread of its own, which
    // the exit ends. Nothing of ours is left to wait for.
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    code
}

/// `agent-exec check run_command`: argv-policy's decision, one JSON line, nothing run.
fn check_run_command(args: CheckArgs) -> ExitCode {
    let workdir = match canonical_dir(&args.workspace) {
        Ok(w) => w,
        Err(e) => return usage(e.message()),
    };
    let home = match std::env::var_os("HOME").map(PathBuf::from) {
        Some(h) if h.is_absolute() => h,
        _ => return usage("HOME is not set to an absolute path; set HOME to your home folder"),
    };
    let user_json = match &args.config {
        Some(file) => match std::fs::read_to_string(file) {
            Ok(text) => Some(text),
            Err(e) => {
                return usage(&format!(
                    "--config {}: {e}; give a readable run_command configuration file",
                    file.display()
                ));
            }
        },
        None => None,
    };
    let policy = match argv_policy::Policy::load(argv_policy::Mode::Safe, user_json.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            let name = args.config.as_deref().unwrap_or(Path::new("")).display();
            return usage(&format!("--config {name}: {e}"));
        }
    };
    // An explicit --mode wins over the file's `mode`, which wins over the default (safe).
    let policy = match args.mode {
        Some(ModeArg::Safe) => policy.with_mode(argv_policy::Mode::Safe),
        Some(ModeArg::Auto) => policy.with_mode(argv_policy::Mode::Auto),
        Some(ModeArg::AllowAll) => policy.with_mode(argv_policy::Mode::AllowAll),
        None => policy,
    };
    let text = match read_args_text(args.json) {
        Ok(t) => t,
        Err(e) => return usage(e.message()),
    };
    let ctx = argv_policy::Context::new(workdir, home);
    let line = argv_policy::check_json_line(&text, &policy, &ctx);
    let run = serde_json::from_str::<Value>(&line)
        .is_ok_and(|v| v["decision"] == Value::String("run".into()));
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    ExitCode::from(if run { 0 } else { 1 })
}

fn parse_capability(text: &str) -> Result<Capability, StateError> {
    text.parse::<Capability>()
        .map_err(|e| StateError::Refused(e.to_string()))
}

fn canonical_folder(dir: &Path) -> Result<PathBuf, StateError> {
    let path = std::fs::canonicalize(dir).map_err(|e| {
        StateError::Refused(format!(
            "folder {}: {e}; give an existing folder",
            dir.display()
        ))
    })?;
    if !path.is_dir() {
        return Err(StateError::Refused(format!(
            "{} is not a folder; give a folder",
            dir.display()
        )));
    }
    Ok(path)
}

fn read_manifest(file: &Path) -> Result<PluginManifest, StateError> {
    let text = std::fs::read(file).map_err(|e| {
        StateError::Refused(format!(
            "manifest {}: {e}; give a readable JSON file",
            file.display()
        ))
    })?;
    serde_json::from_slice(&text).map_err(|e| {
        StateError::Refused(format!(
            "manifest {} is not a plugin manifest ({e}); write {{\"package\": …, \"requires\": {{\"hostCapabilities\": […]}}, \"permissions\": […]}}",
            file.display()
        ))
    })
}

fn change(state_dir: Option<&Path>, what: Change, grant: bool) -> ExitCode {
    match apply_change(state_dir, what, grant) {
        Ok(line) => {
            print_line(&line);
            ExitCode::SUCCESS
        }
        Err(e) => fail(&state_error(&e)),
    }
}

fn missing(id: &str) -> StateError {
    StateError::Refused(format!(
        "plugin {id} is not installed; install it first with `agent-exec grant plugin {id} --manifest <FILE>`"
    ))
}

fn apply_change(state_dir: Option<&Path>, what: Change, grant: bool) -> Result<Value, StateError> {
    let store = open_store(state_dir)?;
    // Validate everything that does not need the state before taking the lock.
    let (id, action) = match &what {
        Change::Plugin { id, .. } => (id, "plugin"),
        Change::Service { id } => (id, "service"),
        Change::Consent { id } => (id, "consent"),
        Change::Approve { id, .. } => (id, "approve"),
        Change::Allow { id, .. } => (id, "allow"),
        Change::Folder { id, .. } => (id, "folder"),
        Change::All { id } => (id, "all"),
    };
    let plugin_id = check_plugin_id(id)?;
    if id == LOCAL_USER {
        return Err(StateError::Refused(format!(
            "{LOCAL_USER} is the person at the terminal and holds no persisted grants; choose another plugin id"
        )));
    }
    let mut detail = json!({});
    let manifest = match &what {
        Change::Plugin {
            manifest: Some(file),
            ..
        } if grant => Some(read_manifest(file)?),
        Change::Plugin {
            package: Some(p),
            declare,
            ..
        } if grant => {
            for c in declare {
                parse_capability(c)?;
            }
            Some(PluginManifest {
                package: p.clone(),
                requires: host_shim::Requires {
                    host_capabilities: declare.clone(),
                },
                permissions: declare.clone(),
            })
        }
        Change::Plugin { .. } if grant => {
            return Err(StateError::Refused(
                "installing a plugin needs --manifest FILE or --package PKG [--declare CAP]..."
                    .into(),
            ));
        }
        _ => None,
    };
    let capability = match &what {
        Change::Approve { capability, .. } | Change::Allow { capability, .. } => {
            Some(parse_capability(capability)?)
        }
        _ => None,
    };
    let folder = match &what {
        Change::Folder { dir, .. } if grant => Some(canonical_folder(dir)?),
        Change::Folder { dir, .. } => {
            Some(std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone()))
        }
        _ => None,
    };
    if let Some(f) = &folder {
        detail = json!({"folder": f});
    }
    if let Some(c) = capability {
        detail = json!({"capability": c});
    }
    store.update(|state| {
        let plugins = &mut state.grants.plugins;
        if let Some(manifest) = manifest {
            let record = plugins
                .entry(plugin_id.clone())
                .or_insert_with(PluginRecord::default);
            record.manifest = manifest;
            return Ok(());
        }
        if matches!(what, Change::Plugin { .. }) {
            return match plugins.remove(&plugin_id) {
                Some(_) => Ok(()),
                None => Err(missing(id)),
            };
        }
        let record = plugins.get_mut(&plugin_id).ok_or_else(|| missing(id))?;
        match &what {
            Change::Service { .. } => record.service_approved = grant,
            Change::Consent { .. } => record.user_consent = grant,
            Change::Approve { .. } => {
                let cap = capability.ok_or_else(|| StateError::Refused("no capability".into()))?;
                if grant {
                    let package = record.manifest.package.clone();
                    let approval =
                        record
                            .platform_approval
                            .get_or_insert_with(|| PlatformApproval {
                                package: package.clone(),
                                capabilities: Default::default(),
                            });
                    if approval.package != package {
                        // An approval of an older package approves nothing (PERM-2): start over.
                        approval.package = package;
                        approval.capabilities.clear();
                    }
                    approval.capabilities.insert(cap);
                } else if let Some(a) = record.platform_approval.as_mut() {
                    a.capabilities.remove(&cap);
                }
            }
            Change::Allow { .. } => {
                let cap = capability.ok_or_else(|| StateError::Refused("no capability".into()))?;
                if grant {
                    record.user_allowed.insert(cap);
                } else {
                    record.user_allowed.remove(&cap);
                }
            }
            Change::Folder { .. } => {
                let path = folder.clone().unwrap_or_default();
                if grant {
                    record.folder_grants.insert(FolderGrant { path });
                } else if !record
                    .folder_grants
                    .remove(&FolderGrant { path: path.clone() })
                {
                    return Err(StateError::Refused(format!(
                        "plugin {id} holds no grant for {}; `agent-exec status` lists its folders",
                        path.display()
                    )));
                }
            }
            Change::All { .. } => {
                record.service_approved = grant;
                record.user_consent = grant;
                let declared: Vec<Capability> = Capability::ALL
                    .iter()
                    .copied()
                    .filter(|c| record.manifest.declares(*c))
                    .collect();
                if grant {
                    record.platform_approval = Some(PlatformApproval {
                        package: record.manifest.package.clone(),
                        capabilities: declared.iter().copied().collect(),
                    });
                    record.user_allowed.extend(declared);
                } else {
                    record.platform_approval = None;
                    record.user_allowed.clear();
                }
            }
            Change::Plugin { .. } => {}
        }
        Ok(())
    })?;
    let mut line = json!({
        "ok": true,
        "action": if grant { "grant" } else { "revoke" },
        "what": action,
        "plugin": id,
    });
    if let (Value::Object(map), Value::Object(extra)) = (&mut line, detail) {
        map.extend(extra);
    }
    Ok(line)
}

fn status(state_dir: Option<&Path>, plugin: Option<&str>) -> ExitCode {
    let result = open_store(state_dir).and_then(|store| {
        let state = store.load()?;
        let mut plugins = serde_json::to_value(&state.grants.plugins).unwrap_or_default();
        if let (Some(id), Value::Object(map)) = (plugin, &mut plugins) {
            map.retain(|k, _| k == id);
        }
        // Issue 15 §4: what the state directory holds besides grants.
        Ok(json!({
            "ok": true,
            "stateDir": store.dir(),
            "plugins": plugins,
            "keptMirrors": store.kept_mirrors(),
            "keptMirrorLimits": store.kept_limits(),
        }))
    });
    match result {
        Ok(line) => {
            print_line(&line);
            ExitCode::SUCCESS
        }
        Err(e) => fail(&state_error(&e)),
    }
}
