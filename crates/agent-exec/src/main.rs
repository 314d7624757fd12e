//! `agent-exec`: one tool call from a shell (`call`), the tools served to an MCP client (`mcp`),
//! a `run_command` decision without running anything (`check`), the machine's sandbox facts
//! (`doctor`), and the user's grants (`grant`, `revoke`, `status`).
//!
//! `call` prints exactly one JSON object on one line on stdout — the tool's result with
//! `"ok": true` merged in, or the error object — and exits 0 when `ok` is true, 1 when false, 2
//! for usage errors. A single `call` is a one-call turn. For `run_command` the exit code is 0
//! only when the command ran and exited 0 (`CallAnswer::is_success`, from the typed
//! `RunCommandOutput::is_success`): a command not executed (declined, no way to ask) or exiting
//! non-zero is a result (`ok: true`, `executed`, `exitCode`) and exit code 1.
//!
//! `run_command`'s questions: confirmations are asked on `/dev/tty`
//! (`Run <label>? [y/N]`) unless `--yes`; passwords are read from `--password-fd N` (one line
//! per attempt) or typed on `/dev/tty` with echo off. Without a terminal and without the flag
//! the call is not executed — never an assumed yes. `--password-fd` refuses 1 and 2 (the
//! outputs) and refuses 0 unless `--json` carries the arguments (stdin would otherwise be
//! them); the descriptor is taken over first thing (close-on-exec, so no command inherits it).
//!
//! Without `--plugin`, the call is made by the person at the terminal: the shell user is the
//! host's user and the `--workspace` they typed is their folder pick (nothing is persisted for
//! it). With `--plugin ID` the call is made for an installed plugin and only with the grants the
//! state directory holds for it; a `revoke` in another shell stops it while it runs (TS-3).
//!
//! `mcp` speaks MCP on stdin/stdout until the client hangs up; its diagnostics go to stderr
//! only (stdout is the protocol). How requests map to sessions and turns, and how background
//! tasks report and end with the connection: [`mod@mcp`]'s docs.
//!
//! This crate alone knows argv, JSON-RPC and terminals; every rule it applies — the grant
//! rules, the one-call turn, which tool runs in which workspace and mode — is `host_shim`'s,
//! so a host that embeds the library gets the same behaviour.
//!
//! `check run_command` prints what the call would do as one JSON line — the call's own planning
//! stopped before its gate, so the gate is the one the call asks and `confirmation` the text it
//! shows (TRUST-4) — and exits 0 for `run`, 1 for `refuse`, 2 for usage errors; nothing is
//! asked or run and no file is touched.

mod mcp;
mod tty;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::builder::TypedValueParser;
use clap::{Args, Parser, Subcommand, ValueEnum};
use host_shim::{
    AgentConfig, CallOptions, Capability, ErrorCode, FolderGrant, GrantChange, Host, KeepMirror,
    Permission, PluginId, PluginManifest, PluginRecord, StateError, StateStore, ToolError,
    ToolName, WorkspaceKind, check_plugin_id,
};
use serde_json::{Value, json};

use crate::tty::{TtyApprover, TtyAsker};

/// The plugin id of the person at the terminal (never persisted).
const LOCAL_USER: &str = "local-user";

/// The most bytes of tool arguments read from `--json` or stdin.
const MAX_ARGS_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Parser, Debug)]
#[command(
    name = "agent-exec",
    version,
    about = "Scoped tools for AI agents: one call from a shell, an MCP server, and the user's grants.",
    after_help = "Disk bounds:\n  \
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
    /// Serve the tools to an MCP client over stdio (one turn per tools/call); background
    /// tasks report by MCP log notifications and end with the connection.
    Mcp(McpArgs),
    /// Print a tool's decision on some arguments as one JSON line, without running anything.
    Check {
        #[command(subcommand)]
        what: CheckWhat,
    },
    /// Print, as JSON, which sandbox features this machine has, the cleanup mode, and
    /// run_command's read and write sets in your home.
    Doctor {
        /// The run_command configuration whose private_path entries the sets include.
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
    },
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
    #[value(name = "run_command")]
    RunCommand,
}

/// A tool name on the command line: the library's names, so the CLI lists no copy of them.
fn tool_name() -> impl TypedValueParser<Value = ToolName> {
    clap::builder::PossibleValuesParser::new(ToolName::ALL.iter().map(|t| t.as_str()))
        .try_map(|name| ToolName::from_name(&name).ok_or("not a tool"))
}

#[derive(Args, Debug)]
struct CallArgs {
    /// The tool.
    #[arg(value_parser = tool_name())]
    tool: ToolName,
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
    #[command(flatten)]
    run_command: RunCommandFlags,
    /// run_command: answer every confirmation yes (passwords are still asked).
    #[arg(long)]
    yes: bool,
    /// run_command: read the system password from this file descriptor, one line per attempt
    /// (not 1 or 2; 0 only with --json), e.g. `--password-fd 3 3<<<"$PW"`. Without it the
    /// password is typed on the terminal.
    #[arg(long, value_name = "N")]
    password_fd: Option<u16>,
}

/// How `run_command` decides, for `call` and `mcp` (the same rules `check run_command` uses).
#[derive(Args, Debug)]
struct RunCommandFlags {
    /// run_command's approval mode: safe (confirm all but read-only commands), auto (confirm
    /// network calls and rm outside the folder) or allow-all; overrides the --policy file's
    /// `mode` (default: the file's, else safe). Passwords are never skipped.
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// run_command's user configuration (JSON: denied_command, read_only_command,
    /// sensitive_path, private_path, mode), merged with the shipped lists; kept read-only for
    /// the commands it runs.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
}

impl RunCommandFlags {
    /// The host's run_command setup with `asker`: the rules, and the host's configuration
    /// files (`policy`, the agent configuration) kept read-only (RCS-3).
    fn setup(
        &self,
        asker: std::sync::Arc<dyn host_shim::Asker>,
        agent_config: Option<&Path>,
    ) -> Result<host_shim::RunCommandSetup, ToolError> {
        let policy = host_shim::run_command_policy(self.policy.as_deref(), self.mode.map(mode_of))
            .map_err(|e| ToolError::new(e.code(), format!("--policy {}", e.message())))?;
        let mut setup = host_shim::RunCommandSetup::new(policy, asker);
        for file in self.policy.iter().map(PathBuf::as_path).chain(agent_config) {
            setup =
                setup.protect(std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf()));
        }
        Ok(setup)
    }
}

fn mode_of(mode: ModeArg) -> host_shim::RunCommandMode {
    match mode {
        ModeArg::Safe => host_shim::RunCommandMode::Safe,
        ModeArg::Auto => host_shim::RunCommandMode::Auto,
        ModeArg::AllowAll => host_shim::RunCommandMode::AllowAll,
    }
}

#[derive(Args, Debug)]
struct McpArgs {
    /// The folder to work in. Without --config: `run` works on a mirror of it (written back
    /// after each successful call), the other tools in it directly; `background_command`,
    /// `background_status` and `background_cancel` are served, each task's events sent as
    /// `notifications/message` (logger agent-exec/background), every task stopped when the
    /// client disconnects.
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
    /// run_command's confirmations go to the client by MCP elicitation when it supports it
    /// (else the call is not executed); passwords are never asked over MCP.
    #[command(flatten)]
    run_command: RunCommandFlags,
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
    /// sensitive_path, private_path, mode), merged with the shipped lists (also --policy, as
    /// for `call` and `mcp`).
    #[arg(long, value_name = "FILE", alias = "policy")]
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

/// Prints `err` as the call's one line; a step that failed for want of descriptors (whichever
/// step: the state file, the runtime, the call) says so, naming the limit.
fn fail(err: &ToolError) -> ExitCode {
    let err = host_shim::descriptor_failure(err.clone());
    print_line(&serde_json::to_value(&err).unwrap_or_else(|_| json!({"ok": false})));
    ExitCode::from(1)
}

/// A usage error: the message on stderr, exit status 2; for `call`, whose stdout is always one
/// JSON line, also that line (`AGENT_EXEC_ARGUMENTS_INVALID`), so a caller that reads only
/// stdout learns why.
fn usage(message: &str) -> ExitCode {
    eprintln!("agent-exec: {message}");
    usage_line(message)
}

/// [`usage`] for an error already printed on stderr: the JSON line alone, for `call`.
fn usage_line(message: &str) -> ExitCode {
    if is_call(&std::env::args_os().collect::<Vec<_>>()) {
        print_line(&json!({
            "ok": false,
            "code": ErrorCode::ExecArgumentsInvalid.as_str(),
            "message": message,
        }));
    }
    ExitCode::from(2)
}

/// Whether the command line's subcommand is `call` (its first word that is neither an option
/// nor `--state-dir`'s value).
fn is_call(args: &[std::ffi::OsString]) -> bool {
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        if arg == "--state-dir" {
            rest.next();
        } else if !arg.to_string_lossy().starts_with('-') {
            return arg == "call";
        }
    }
    false
}

fn open_store(cli_dir: Option<&Path>) -> Result<StateStore, StateError> {
    let store = match cli_dir {
        Some(dir) => StateStore::open(dir)?,
        None => StateStore::open(StateStore::default_dir()?)?,
    };
    // The bounds on mirrors kept for diagnosis (defaults in KeptLimits).
    let mut limits = store.kept_limits();
    if let Some(n) = env_number("AGENT_EXEC_KEPT_MIRRORS")? {
        limits.max_count = usize::try_from(n).unwrap_or(usize::MAX);
    }
    if let Some(n) = env_number("AGENT_EXEC_KEPT_MIRROR_BYTES")? {
        limits.max_bytes = n;
    }
    let mut store = store.with_kept_limits(limits);
    // Temporary full copies of one workspace at once (DEFAULT_CONCURRENT_COPIES).
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
    fit_address_space_limit();
    if let Err(e) = host_shim::memory_to_start() {
        eprintln!("agent-exec: {} ({})", e.message(), e.code());
        return ExitCode::from(1);
    }
    // Read from the raw arguments before clap parses them (a few hundred microseconds), so a
    // shell call's warm-up starts that much sooner; what the parse finds decides
    // only where this guess was silent.
    #[cfg(target_os = "linux")]
    let early = early_plan(&std::env::args_os().collect::<Vec<_>>());
    #[cfg(target_os = "linux")]
    if let Some(what) = &early {
        start(what);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // `--help` and `--version` print and succeed, as clap does.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let _ = e.print();
            // clap's text up to its usage block, on one line.
            let text = e.to_string();
            let message: Vec<&str> = text
                .lines()
                .map(str::trim)
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .filter(|l| !l.is_empty())
                .collect();
            let message = message.join(" ");
            let message = message.strip_prefix("error: ").unwrap_or(&message);
            return usage_line(&format!("{message}; see agent-exec call --help"));
        }
    };
    // Before anything else of ours can open a descriptor that would take the number N.
    let password_file = match &cli.command {
        Command::Call(c) => match c.password_fd.map(|n| take_password_fd(n, c.json.is_some())) {
            Some(Err(message)) => return usage(&message),
            Some(Ok(file)) => Some(file),
            None => None,
        },
        _ => None,
    };
    #[cfg(target_os = "linux")]
    if early.is_none() {
        start(&Start::of(&cli.command));
    }
    match cli.command {
        Command::Doctor { policy } => {
            match host_shim::run_command_policy(policy.as_deref(), None) {
                Ok(policy) => {
                    print_line(&host_shim::doctor::report_with(&policy));
                    ExitCode::SUCCESS
                }
                Err(e) => usage(&format!("--policy {}", e.message())),
            }
        }
        Command::Schema { of } => {
            let schema = match of {
                SchemaOf::Config => AgentConfig::json_schema(),
                SchemaOf::Read => schema_of(ToolName::Read),
                SchemaOf::Write => schema_of(ToolName::Write),
                SchemaOf::Edit => schema_of(ToolName::Edit),
                SchemaOf::Grep => schema_of(ToolName::Grep),
                SchemaOf::RunCommand => schema_of(ToolName::RunCommand),
            };
            println!(
                "{}",
                serde_json::to_string_pretty(&schema).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Command::Call(args) => call(cli.state_dir.as_deref(), args, password_file),
        Command::Mcp(args) => mcp(cli.state_dir.as_deref(), args),
        Command::Check {
            what: CheckWhat::RunCommand(args),
        } => check_run_command(args),
        Command::Grant { what } => change(cli.state_dir.as_deref(), what, Direction::Grant),
        Command::Revoke { what } => change(cli.state_dir.as_deref(), what, Direction::Revoke),
        Command::Status { plugin } => status(cli.state_dir.as_deref(), plugin.as_deref()),
    }
}

/// What a process starts before its subcommand runs: the signal watch of a call or a server,
/// and the warm-up of a shell call's sandbox.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Start {
    /// `call` or `mcp`: a SIGTERM, SIGINT or SIGHUP mid-call leaves no temp dir or mirror.
    signals: bool,
    /// A `command`/`run_command` call or a server: the system runtime set and the kernel
    /// probes, built beside the call's own start-up.
    warm: bool,
}

#[cfg(target_os = "linux")]
impl Start {
    fn of(command: &Command) -> Start {
        match command {
            Command::Call(c) => Start {
                signals: true,
                warm: matches!(c.tool, ToolName::Command | ToolName::RunCommand),
            },
            Command::Mcp(_) => Start {
                signals: true,
                warm: true,
            },
            _ => Start {
                signals: false,
                warm: false,
            },
        }
    }
}

/// Starts what `what` names. The signal watch comes first, before any thread starts
/// (threads inherit the mask); on failure the signals keep their default action, and the
/// supervisors and the next start's sweep still clean up. The shell's system runtime
/// set (an `/etc` walk) builds while the call is validated and its state read.
#[cfg(target_os = "linux")]
fn start(what: &Start) {
    if what.signals
        && let Err(e) = proctree::remove_call_dirs_on_signals()
    {
        eprintln!("agent-exec: cannot watch for signals ({e}); continuing");
    }
    if what.warm {
        exec::sysset::warm();
    }
}

/// What to [`start`] for the subcommand the raw arguments plainly name — `[--state-dir DIR]
/// call …` or `[--state-dir DIR] mcp …`; `None` for anything else, left to the parse.
/// A `call` warms when any later argument is `command` or `run_command`: a guess that is wrong
/// (a directory of that name) costs one needless walk, never a missed one, and every `call` is
/// a call whatever its arguments. Never with `--password-fd` anywhere: that descriptor is taken
/// over before anything of ours opens one that could take its number.
#[cfg(target_os = "linux")]
fn early_plan(args: &[std::ffi::OsString]) -> Option<Start> {
    if args
        .iter()
        .any(|a| a.as_encoded_bytes().starts_with(b"--password-fd"))
    {
        return None;
    }
    let mut rest = args.iter().skip(1);
    let sub = loop {
        let arg = rest.next()?;
        if arg == "--state-dir" {
            rest.next()?;
        } else if !arg.as_encoded_bytes().starts_with(b"--state-dir=") {
            break arg;
        }
    };
    let what = if sub == "call" {
        Start {
            signals: true,
            warm: rest.any(|a| a == "command" || a == "run_command"),
        }
    } else if sub == "mcp" {
        Start {
            signals: true,
            warm: true,
        }
    } else {
        return None;
    };
    Some(what)
}

/// `--password-fd N` taken over by this process (module docs: which numbers are refused).
fn take_password_fd(n: u16, args_in_json: bool) -> Result<std::fs::File, String> {
    use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};
    match n {
        1 | 2 => {
            return Err(format!(
                "--password-fd {n} is an output of agent-exec (1 is the JSON line, 2 the \
                 diagnostics); give a descriptor opened for reading, e.g. --password-fd 3 3<FILE"
            ));
        }
        0 if !args_in_json => {
            return Err(
                "--password-fd 0 is stdin, which carries the arguments when --json is \
                        absent; pass the arguments with --json, or the password on another \
                        descriptor (--password-fd 3 3<FILE)"
                    .into(),
            );
        }
        _ => {}
    }
    let n = i32::from(n);
    // SAFETY: only borrowed for the one `fcntl` that tells whether `n` is open at all.
    let borrowed = unsafe { BorrowedFd::borrow_raw(n) };
    if rustix::io::fcntl_getfd(borrowed).is_err() {
        return Err(format!(
            "--password-fd {n} is not open; open it for reading, e.g. --password-fd {n} {n}<FILE"
        ));
    }
    // SAFETY: `n` is open (checked above) and was handed to this process for the password:
    // it was open before the process opened anything of its own (this runs right after the
    // command line is parsed), so nothing else here owns it; from now on the `File` does.
    let owned = unsafe { OwnedFd::from_raw_fd(n) };
    // No command the call runs inherits it.
    rustix::io::fcntl_setfd(&owned, rustix::io::FdFlags::CLOEXEC)
        .map_err(|e| format!("--password-fd {n}: {e}"))?;
    Ok(std::fs::File::from(owned))
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
    // else. Extra paths refuse links the same way.
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
        None => generated_config(&[args.tool], generated_kind(args.tool), workspace)?,
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

/// The workspace kind the command line gives `tool` without a configuration: `run` works on a
/// mirror (`mounted`), every other tool in the folder itself (`direct`); `call` and `mcp` agree.
fn generated_kind(tool: ToolName) -> WorkspaceKind {
    if tool == ToolName::Run {
        WorkspaceKind::Mounted
    } else {
        WorkspaceKind::Direct
    }
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

fn call(state_dir: Option<&Path>, args: CallArgs, password: Option<std::fs::File>) -> ExitCode {
    if args.workspace.is_none() && args.config.is_none() {
        return usage("call needs --workspace DIR (or --config FILE); see agent-exec call --help");
    }
    // One call, then exit: its blocking work runs on this thread (exec::blocking).
    #[cfg(target_os = "linux")]
    exec::blocking::one_call_process();
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
        Err(e) => return fail(&e.to_tool_error()),
    };
    // run_command's questions: --yes, --password-fd, else /dev/tty.
    let asker = std::sync::Arc::new(TtyAsker::new(args.yes, password));
    // Only the tools that use it pay for building run_command's rules (~0.4 ms: the shipped
    // lists parsed and merged); flags for it are validated whatever the tool.
    let uses_run_command = matches!(
        args.tool,
        ToolName::RunCommand
            | ToolName::BackgroundCommand
            | ToolName::BackgroundStatus
            | ToolName::BackgroundCancel
    ) || args.run_command.policy.is_some()
        || args.run_command.mode.is_some();
    // Extra paths: the --approve-extra-path list first, then a y/N on /dev/tty (CMD-3).
    let mut registry = host_shim::Registry::with_approver(std::sync::Arc::new(TtyApprover));
    if uses_run_command {
        match args.run_command.setup(asker, args.config.as_deref()) {
            Ok(setup) => registry = registry.with_run_command(setup),
            Err(e) => return fail(&e),
        }
    }
    let host = match Host::with_registry(store, "local".into(), registry) {
        Ok(h) => h,
        Err(e) => return fail(&e.to_tool_error()),
    };
    let runtime = match runtime() {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let reporter = host.clone();
    let answer = runtime.block_on(async move {
        host.watch_state();
        let plugin = calling_plugin(&host, args.plugin.as_deref(), &config)
            .map_err(|e| e.to_tool_error())?;
        let session = host
            .session(plugin, config)
            .map_err(|e| e.to_tool_error())?;
        let options = CallOptions {
            approved_extra_paths: args.approve_extra_path.clone(),
            toolchains: args.toolchains,
            ..CallOptions::default()
        };
        let keep = if args.keep_mirror {
            KeepMirror::Always
        } else {
            KeepMirror::WhenNeeded
        };
        let answer = session
            .one_call(
                &args.call_id,
                args.tool,
                tool_args,
                &options,
                keep,
                std::future::pending(),
            )
            .await;
        Ok::<_, ToolError>(answer)
    });
    // RUN-16: write-backs to other folders that this start found cut short and finished.
    for recovered in reporter.take_recovered() {
        eprintln!("agent-exec: {recovered}");
    }
    let answer = match answer {
        Ok(a) => a,
        Err(e) => return fail(&e),
    };
    if let Some(mirror) = &answer.report().mirror {
        if mirror.kept {
            eprintln!(
                "agent-exec: the mirror is kept at {}",
                mirror.path.display()
            );
        }
        if !mirror.conflicts.is_empty() {
            eprintln!(
                "agent-exec: {} path(s) were not written back to the folder; see \"mirror\".\"conflicts\" for why",
                mirror.conflicts.len()
            );
        }
    }
    print_line(&answer.to_line());
    if answer.is_success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The plugin calls are made for: `--plugin`, else the person at the terminal, whose one folder
/// pick is the configuration's folder (none for `app-private`), held in memory only.
fn calling_plugin(
    host: &Host,
    plugin: Option<&str>,
    config: &AgentConfig,
) -> Result<PluginId, StateError> {
    if let Some(p) = plugin {
        // The reserved id is the person at the terminal, never a record of the state file
        // (which someone could have edited to hold one), in any letter case.
        if p.eq_ignore_ascii_case(LOCAL_USER) {
            return Err(StateError::Refused(format!(
                "{LOCAL_USER} is the person at the terminal; leave out --plugin to call as them"
            )));
        }
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

/// The record of the person at the terminal: the shell user is the host's user, and typing
/// `--workspace DIR` is the folder pick. Holds the Agent approvals and `local.terminal.exec@1`
/// (the user runs `agent-exec` themself), and exactly one folder grant. Nothing of it is
/// persisted.
fn local_user_record(folder: &Path) -> PluginRecord {
    let mut record = PluginRecord::fully_granted("agent-exec-cli", &[Capability::TerminalExec]);
    record.folder_grants.insert(FolderGrant {
        path: folder.to_path_buf(),
    });
    record
}

fn runtime() -> Result<tokio::runtime::Runtime, ToolError> {
    host_shim::descriptors_to_start()?;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            host_shim::descriptor_failure(ToolError::new(
                ErrorCode::ExecIoFailed,
                format!("could not start the runtime: {e}"),
            ))
        })
}

/// Under an address-space limit (`ulimit -v`), glibc reserves 64 MiB of it for each thread's
/// malloc arena: the threads of a few calls use the limit up before any call runs out of
/// memory (an idle server mapped 366 MiB with them, 104 MiB with two). Two arenas serve this
/// process's threads, and the limit is left to the calls, which are admitted against it.
/// Runs first in `main`, before any thread starts.
fn fit_address_space_limit() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if rustix::process::getrlimit(rustix::process::Resource::As)
        .current
        .is_some()
    {
        // SAFETY: mallopt only sets a parameter of glibc's allocator, and no other thread
        // exists yet to allocate meanwhile.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

/// Why the server could not go on, with what to do where the cause is the address-space
/// limit: a thread that cannot be started (`EAGAIN`) or memory that cannot be mapped.
fn mcp_failure(e: &mcp::McpError) -> String {
    let limit = rustix::process::getrlimit(rustix::process::Resource::As).current;
    let mcp::McpError::Io(io) = e;
    let short = matches!(
        io.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::OutOfMemory
    );
    match limit {
        Some(limit) if short => format!(
            "{e}: its address-space limit (`ulimit -v`, {} MiB) is too low to start the \
             connection's threads; start agent-exec with a higher limit (`ulimit -v \
             unlimited`, or {} MiB more)",
            limit >> 20,
            host_shim::MEMORY_PER_CALL >> 20
        ),
        _ => e.to_string(),
    }
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
        None => [WorkspaceKind::Direct, WorkspaceKind::Mounted]
            .into_iter()
            .map(|kind| {
                let tools: Vec<ToolName> = ToolName::ALL
                    .iter()
                    .copied()
                    .filter(|t| generated_kind(*t) == kind)
                    .collect();
                generated_config(&tools, kind, workspace.as_deref())
            })
            .collect(),
    };
    let configs = match configs {
        Ok(c) => c,
        Err(e) => return complain(&e),
    };
    if let Some(Err(e)) = args.plugin.as_deref().map(check_plugin_id) {
        return complain(&e.to_tool_error());
    }
    let server = mcp::McpServer::new("agent-exec").with_call_options(CallOptions {
        toolchains: args.toolchains,
        ..CallOptions::default()
    });
    // run_command's confirmations by elicitation, never a password.
    let setup = match args
        .run_command
        .setup(server.asker(), args.config.as_deref())
    {
        Ok(s) => s,
        Err(e) => return complain(&e),
    };
    let registry = host_shim::Registry::default().with_run_command(setup);
    let host = match open_store(state_dir)
        .map_err(|e| e.to_tool_error())
        .and_then(|store| {
            Host::with_registry(store, "local".into(), registry).map_err(|e| e.to_tool_error())
        }) {
        Ok(h) => h,
        Err(e) => return complain(&e),
    };
    let runtime = match runtime() {
        Ok(r) => r,
        Err(e) => return complain(&e),
    };
    let code = runtime.block_on(async {
        host.watch_state();
        let mut server = server;
        for config in configs {
            let plugin = match calling_plugin(&host, args.plugin.as_deref(), &config) {
                Ok(p) => p,
                Err(e) => return complain(&e.to_tool_error()),
            };
            let session = match host.session(plugin, config) {
                Ok(s) => s,
                Err(e) => return complain(&e.to_tool_error()),
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
                eprintln!("agent-exec mcp: {}", mcp_failure(&e));
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

/// `agent-exec check run_command`: what the call would do, one JSON line, nothing run.
fn check_run_command(args: CheckArgs) -> ExitCode {
    let workdir = match canonical_dir(&args.workspace) {
        Ok(w) => w,
        Err(e) => return usage(e.message()),
    };
    if !std::env::var_os("HOME").is_some_and(|h| Path::new(&h).is_absolute()) {
        return usage("HOME is not set to an absolute path; set HOME to your home folder");
    }
    // An explicit --mode wins over the file's `mode`, which wins over the default (safe): the
    // same rules `call run_command` runs with.
    let policy = match host_shim::run_command_policy(args.config.as_deref(), args.mode.map(mode_of))
    {
        Ok(p) => p,
        Err(e) => return usage(&format!("--config {}", e.message())),
    };
    let text = match read_args_text(args.json) {
        Ok(t) => t,
        Err(e) => return usage(e.message()),
    };
    // The call's own setup and planning (TRUST-4: the gate reported is the one the call asks,
    // in every mode). Arguments that do not parse are a refusal line too; the exit code comes
    // from the typed report, not from the printed line.
    let mut setup =
        host_shim::RunCommandSetup::new(policy, std::sync::Arc::new(host_shim::DenyAllAsker));
    if let Some(file) = &args.config {
        setup = setup.protect(std::fs::canonicalize(file).unwrap_or_else(|_| file.clone()));
    }
    let checked = match argv_policy::RunCommandArgs::from_json(&text) {
        Ok(call) => setup.check(call, &workdir),
        Err(refusal) => Err(ToolError::new(
            refusal
                .code
                .as_str()
                .parse()
                .unwrap_or(ErrorCode::RunCommandArgumentsInvalid),
            refusal.message,
        )),
    };
    let checked = checked.unwrap_or_else(|e| host_shim::Checked::Refuse {
        code: e.code(),
        message: e.message().to_owned(),
    });
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", checked.json_line());
    let _ = out.flush();
    if checked.is_run() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
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

/// `grant` or `revoke`: which of the two subcommands a [`Change`] came with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Grant,
    Revoke,
}

fn change(state_dir: Option<&Path>, what: Change, direction: Direction) -> ExitCode {
    match apply_change(state_dir, what, direction) {
        Ok(line) => {
            print_line(&line);
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e.to_tool_error()),
    }
}

/// The library's [`GrantChange`] a subcommand asks for, with the plugin id, the subcommand's
/// name and the detail its line reports. Everything that can be checked without the state —
/// the id, the manifest, the capability, the folder — is checked here, before the lock.
fn grant_change(
    what: Change,
    direction: Direction,
) -> Result<(String, &'static str, GrantChange, Value), StateError> {
    let grant = direction == Direction::Grant;
    let either = |permission: Permission| match direction {
        Direction::Grant => GrantChange::Grant(permission),
        Direction::Revoke => GrantChange::Revoke(permission),
    };
    Ok(match what {
        Change::Plugin { id, .. } if !grant => (id, "plugin", GrantChange::Uninstall, json!({})),
        Change::Plugin {
            id,
            manifest: Some(file),
            ..
        } => {
            let manifest = read_manifest(&file)?;
            (id, "plugin", GrantChange::Install(manifest), json!({}))
        }
        Change::Plugin {
            id,
            package: Some(package),
            declare,
            ..
        } => {
            for c in &declare {
                parse_capability(c)?;
            }
            let manifest = PluginManifest {
                package,
                requires: host_shim::Requires {
                    host_capabilities: declare.clone(),
                },
                permissions: declare,
            };
            (id, "plugin", GrantChange::Install(manifest), json!({}))
        }
        Change::Plugin { .. } => {
            return Err(StateError::Refused(
                "installing a plugin needs --manifest FILE or --package PKG [--declare CAP]..."
                    .into(),
            ));
        }
        Change::Service { id } => (
            id,
            "service",
            either(Permission::ServiceApproval),
            json!({}),
        ),
        Change::Consent { id } => (id, "consent", either(Permission::UserConsent), json!({})),
        Change::Approve { id, capability } => {
            let cap = parse_capability(&capability)?;
            let detail = json!({"capability": cap});
            (
                id,
                "approve",
                either(Permission::PlatformApproval(cap)),
                detail,
            )
        }
        Change::Allow { id, capability } => {
            let cap = parse_capability(&capability)?;
            let detail = json!({"capability": cap});
            (id, "allow", either(Permission::UserAllowance(cap)), detail)
        }
        Change::Folder { id, dir } => {
            // A folder granted must exist; one revoked may be gone already.
            let folder = if grant {
                canonical_folder(&dir)?
            } else {
                std::fs::canonicalize(&dir).unwrap_or(dir)
            };
            let detail = json!({"folder": folder});
            (id, "folder", either(Permission::Folder(folder)), detail)
        }
        Change::All { id } => (id, "all", either(Permission::Declared), json!({})),
    })
}

fn apply_change(
    state_dir: Option<&Path>,
    what: Change,
    direction: Direction,
) -> Result<Value, StateError> {
    let store = open_store(state_dir)?;
    let id = match &what {
        Change::Plugin { id, .. }
        | Change::Service { id }
        | Change::Consent { id }
        | Change::Approve { id, .. }
        | Change::Allow { id, .. }
        | Change::Folder { id, .. }
        | Change::All { id } => id.clone(),
    };
    let plugin = check_plugin_id(&id)?;
    if id.eq_ignore_ascii_case(LOCAL_USER) {
        return Err(StateError::Refused(format!(
            "{LOCAL_USER} is the person at the terminal and holds no persisted grants; choose another plugin id"
        )));
    }
    let (id, action, change, detail) = grant_change(what, direction)?;
    store.update(|state| change.apply(&mut state.grants, &plugin))?;
    let mut line = json!({
        "ok": true,
        "action": match direction {
            Direction::Grant => "grant",
            Direction::Revoke => "revoke",
        },
        "what": action,
        "plugin": id,
    });
    if let (Value::Object(map), Value::Object(extra)) = (&mut line, detail) {
        map.extend(extra);
    }
    Ok(line)
}

/// The caches' views kept by this user's sessions on this machine (Linux; none elsewhere).
fn kept_cache_views() -> Value {
    #[cfg(target_os = "linux")]
    let views = serde_json::to_value(exec::kept_here()).unwrap_or_default();
    #[cfg(not(target_os = "linux"))]
    let views = json!([]);
    views
}

fn status(state_dir: Option<&Path>, plugin: Option<&str>) -> ExitCode {
    let result = open_store(state_dir).and_then(|store| {
        let state = store.load()?;
        let mut plugins = serde_json::to_value(&state.grants.plugins).unwrap_or_default();
        if let (Some(id), Value::Object(map)) = (plugin, &mut plugins) {
            map.retain(|k, _| k == id);
        }
        // What the state directory holds besides grants.
        Ok(json!({
            "ok": true,
            "stateDir": store.dir(),
            "plugins": plugins,
            "keptMirrors": store.kept_mirrors(),
            "keptMirrorLimits": store.kept_limits(),
            // TRUST-3: the caches' views the sessions of this user keep for their next call.
            "keptCacheViews": kept_cache_views(),
            // RUN-16: write-backs in progress or cut short, with our files in their folders.
            "writeBacks": store
                .write_backs()
                .iter()
                .map(|w| json!({
                    "journal": w.journal,
                    "folder": w.folder,
                    "inProgress": w.in_progress,
                    "tempFiles": w.temp_files,
                }))
                .collect::<Vec<_>>(),
            // Temporary files a killed `write`, `edit` or write-back left in folders; the
            // next start of `agent-exec` removes them.
            "tempFiles": store.orphaned_temp_files(),
        }))
    });
    match result {
        Ok(line) => {
            print_line(&line);
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e.to_tool_error()),
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use clap::Parser;
    use proptest::prelude::*;

    fn plan(args: &[&str]) -> Option<Start> {
        let args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
        early_plan(&args)
    }

    fn os(args: &[&str]) -> Vec<std::ffi::OsString> {
        args.iter().map(Into::into).collect()
    }

    #[test]
    fn a_usage_error_is_a_call_s_when_call_is_the_subcommand() {
        assert!(is_call(&os(&["ae", "call"])));
        assert!(is_call(&os(&["ae", "--state-dir", "call", "call", "bash"])));
        assert!(!is_call(&os(&["ae", "--state-dir", "call", "mcp"])));
        assert!(!is_call(&os(&["ae", "frobnicate", "call"])));
        assert!(!is_call(&os(&["ae"])));
    }

    proptest! {
        #[test]
        fn options_before_the_subcommand_do_not_decide_it(
            flags in proptest::collection::vec("-[a-z-]{1,12}", 0..4),
            sub in "[a-z]{1,8}",
        ) {
            let mut args = vec!["ae".to_owned()];
            args.extend(flags.into_iter().filter(|f| f != "--state-dir"));
            args.push(sub.clone());
            let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
            prop_assert_eq!(is_call(&args), sub == "call");
        }
    }

    #[test]
    fn a_shell_call_and_a_server_are_started_before_the_parse() {
        let warm = Some(Start {
            signals: true,
            warm: true,
        });
        assert_eq!(plan(&["ae", "call", "--workspace", ".", "command"]), warm);
        assert_eq!(plan(&["ae", "--state-dir", "call", "mcp"]), warm);
        assert_eq!(plan(&["ae", "--state-dir=/s", "call", "run_command"]), warm);
        assert_eq!(
            plan(&["ae", "call", "--workspace", ".", "read"]),
            Some(Start {
                signals: true,
                warm: false
            })
        );
        assert_eq!(plan(&["ae", "doctor"]), None);
        assert_eq!(plan(&["ae", "--state-dir", "mcp", "status"]), None);
        assert_eq!(plan(&["ae"]), None);
    }

    #[test]
    fn a_password_descriptor_waits_for_the_parse() {
        assert_eq!(
            plan(&[
                "ae",
                "call",
                "--password-fd",
                "5",
                "--workspace",
                ".",
                "command"
            ]),
            None
        );
        assert_eq!(plan(&["ae", "call", "--password-fd=5", "command"]), None);
    }

    proptest! {
        /// Wherever the early plan speaks, it starts what the parse would (a needless warm-up
        /// is allowed; a missed one or a signal watch the parse would not start is not).
        #[test]
        fn the_early_plan_never_contradicts_the_parse(
            words in proptest::collection::vec(
                proptest::sample::select(vec![
                    "call", "mcp", "doctor", "status", "command", "run_command", "read",
                    "run", "--state-dir", "--state-dir=/s", "--workspace", ".", "--json",
                    "{}", "--password-fd", "5", "-h", "x",
                ]),
                0..7,
            )
        ) {
            let mut args = vec!["agent-exec"];
            args.extend(words.iter().copied());
            if let Some(early) = plan(&args)
                && let Ok(cli) = Cli::try_parse_from(&args)
            {
                let parsed = Start::of(&cli.command);
                prop_assert_eq!(early.signals, parsed.signals, "{:?}", args);
                prop_assert!(early.warm || !parsed.warm, "{:?}", args);
            }
        }
    }
}
