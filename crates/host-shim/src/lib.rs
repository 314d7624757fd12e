//! The host facade: what a host application embeds to give an agent scoped tools, and what the
//! `agent-exec` binary (`crates/agent-exec`: the CLI and the MCP server) is built on.
//!
//! **Owns:** agent configuration v2 ([`AgentConfig`]; PERM-4, PERM-5) with errors that name the
//! field and the fix, and its JSON Schema (`schema/agent-config.v2.json`); host state — plugins,
//! manifests, platform approvals, consents, folder grants — persisted atomically in a state
//! directory ([`StateStore`]) and followed while running ([`Host::watch_state`]), so a
//! revocation reaches calls in flight through `toolscope`'s watch (TS-3); account generations
//! ([`Host::switch_account`]; CMD-12); sessions and turns ([`Session`], [`Turn`]): one
//! `ToolScope` per turn (TS-1, TS-2), workspaces `mounted` (a mirror, written back after a
//! successful turn, kept after a failed one; RUN-11), `direct` (the folder under a lease; CMD-8)
//! and `app-private`; the tool registry ([`Registry`], [`ToolHandler`]) into which the file
//! tools (`file-tools`: `read`, `write`, `edit`, `grep`), `run`, `command` and `run_command`
//! (`run-command-tool`: with the host's [`RunCommandSetup`], one [`RunCommandState`] per
//! session) plug; every grant
//! rule ([`GrantChange`]: an approval of an older package approves nothing, PERM-2); the
//! mode and workspace rules of each tool ([`AgentConfig::unrunnable`]); and the one-call turn
//! both front ends make ([`Session::one_call`], its typed answer [`CallAnswer`]).
//!
//! **Refuses to know:** how a sandbox is built or a process stopped (the exec tools and their
//! crates do that); how a particular host shows prompts (it gets an approver); argv, JSON-RPC
//! and terminals (the `agent-exec` binary's). There is no API here that executes a program
//! outside the tools (RUN-14).
//!
//! # Example
//!
//! A host installs a plugin, the user grants it a folder, and an agent turn reads a file:
//!
//! ```
//! use host_shim::{AgentConfig, CallOptions, Host, KeepMirror, StateStore, TurnEnd};
//! use toolscope::{FolderGrant, PluginRecord};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let tmp = tempfile::tempdir().unwrap();
//! let folder = tmp.path().join("notes");
//! std::fs::create_dir(&folder).unwrap();
//! std::fs::write(folder.join("todo.txt"), "milk\neggs\n").unwrap();
//!
//! let host = Host::open(StateStore::open(tmp.path().join("state")).unwrap(), "alice".into()).unwrap();
//! host.watch_state(); // follow `agent-exec grant`/`revoke` made by other processes
//! host.update_grants(|g| {
//!     let mut record = PluginRecord::fully_granted("com.example.notes@1.0.0", &[]);
//!     record.folder_grants.insert(FolderGrant { path: folder.clone() });
//!     g.plugins.insert("notes".parse().unwrap(), record);
//!     Ok(())
//! }).unwrap();
//!
//! let config = AgentConfig::parse(&format!(r#"{{
//!     "schemaVersion": 2, "systemPrompt": "Keep the notes tidy.",
//!     "tools": [{{"ref": "read"}}, {{"ref": "edit"}}, {{"ref": "grep"}}],
//!     "workspace": {{"kind": "mounted", "path": {:?}}},
//!     "memory": "session", "mode": "yolo"
//! }}"#, folder)).unwrap();
//! let session = host.session("notes".parse().unwrap(), config).unwrap();
//!
//! let turn = session.begin_turn().unwrap(); // mounted: the folder is mirrored now
//! let args = serde_json::json!({"path": "todo.txt", "oldString": "milk", "newString": "oat milk"});
//! let out = turn.call("call-1", "edit", args, &CallOptions::default()).await.unwrap();
//! assert_eq!(out["replacements"], 1);
//! // Success: written back with the conflict check.
//! let report = turn.finish(TurnEnd::Succeeded, KeepMirror::WhenNeeded);
//! assert_eq!(report.mirror.unwrap().applied, vec!["todo.txt".to_string()]);
//! assert_eq!(std::fs::read_to_string(folder.join("todo.txt")).unwrap(), "oat milk\neggs\n");
//! # });
//! ```
#![deny(missing_docs)]

mod approve;
mod background_tools;
mod config;
mod descriptors;
pub mod doctor;
mod grants;
mod host;
mod memory;
mod outcome;
mod registry;
mod run_command;
mod state;

pub use background_tools::BackgroundEnv;
pub use config::{
    AgentConfig, ConfigError, MAX_SYSTEM_PROMPT_BYTES, Memory, Mode, Runtime, SCHEMA_VERSION,
    ToolName, ToolRef, Unrunnable, WorkspaceConfig, WorkspaceKind,
};
pub use descriptors::{PER_CALL as DESCRIPTORS_PER_CALL, descriptor_failure, descriptors_to_start};
pub use fsguard::PendingWriteBack;
pub use grants::{GrantChange, Permission};
pub use host::{
    ConflictReport, Host, HostError, KeepMirror, MirrorReport, Session, Turn, TurnEnd, TurnReport,
};
pub use memory::{PER_CALL as MEMORY_PER_CALL, memory_to_start};
pub use outcome::CallAnswer;
pub use registry::{
    CallOptions, NotCopiedLookup, ProgramVerdict, Registry, ToolEnv, ToolFuture, ToolHandler,
};
pub use run_command::{RunCommandSetup, run_command_policy};
pub use state::{DEFAULT_CONCURRENT_COPIES, KeptLimits, KeptMirror, KeptWhy};
pub use state::{
    HostState, STATE_FILE, STATE_VERSION, StateError, StateStore, StateWatch, WATCH_INTERVAL,
    check_plugin_id, replaceable_link,
};

/// The file tools' wire types (FILE-1…FILE-3), from `file-tools`.
pub use file_tools::{
    EditArguments, EditOutput, GrepArguments, GrepMatch, GrepOutput, ReadArguments, ReadOutput,
    WriteArguments, WriteOutput,
};

/// The `run` tool's wire types (RUN-14): what a host passes and gets back. There is no
/// plugin-direct exec API; `run` is reachable only as a tool call through a [`Turn`].
pub use run_tool::{AgentRunArguments, AgentRunOutput};

/// The `command` tool's wire types and the approver a host implements for its extra paths (CMD-3).
pub use command_tool::{
    Approval, Approver, CommandArguments, CommandOutput, DenyAll, ExtraPath, PreApproved, Status,
};

/// The `run_command` tool's wire types, its rules and the asker a host implements for its
/// confirmations and passwords (RC-*).
pub use run_command_tool::{
    Asker, Checked, Confirmation, DenyAllAsker, Grant, Granted, Mode as RunCommandMode, Network,
    Password, PasswordReply, Place, Policy, Question, RunCommandArgs, RunCommandOutput,
    RunCommandState,
};

/// `background_command`'s library: its events, tasks and the host's hooks (BG-*).
pub use run_command_tool::background;

/// The gate's types a host needs alongside this crate (re-exported so one dependency is enough).
pub use toolscope::{
    AccountId, Capability, ErrorCode, FolderGrant, Grants, PlatformApproval, PluginId,
    PluginManifest, PluginRecord, Requires, ToolError,
};
