//! The file tools `read`, `write`, `edit` and `grep` (FILE-1…FILE-3): what an agent uses to look
//! at and change the text files of one workspace, with every path opened from the workspace
//! root's pinned descriptor.
//!
//! **Owns:** the four tools' arguments and results (the JSON wire types, [`ReadArguments`] …
//! [`GrepOutput`], and their JSON Schemas), their validation (house rule: validate, then act),
//! their bounds ([`MAX_FILE_BYTES`], [`MAX_GREP_RESULTS`], …), the walk of `grep` with ripgrep's
//! ignore rules, the directories `write` makes for a new file, the directories no tool may
//! touch ([`Hidden`]: the host's own state inside a workspace), and the refusal of auto-run
//! configuration: `write` and `edit` never change a path on `fsguard`'s [`AutoRun`] list
//! (`.claude/`, `.mcp.json`, `.cargo/config.toml`, a bare repository's `HEAD` and `config`, …;
//! `AGENT_EXEC_PATH_PROTECTED`, TRUST-1, TRUST-2) unless the host passes it as confirmed
//! ([`FileToolOptions`]). `read` and `grep` still read them.
//!
//! **Refuses to know:** grants, turns and sessions (the host's, which calls [`FileTool::run`]
//! inside a turn's gate); how a user confirms a protected path (the host asks; these tools
//! only take the answer); where the root came from (a mirror or the user's folder); any program
//! — these tools run none, so they need no sandbox: their confinement is `fsguard`'s
//! descriptor-relative walk. From `exec` they take one thing, the `OpenError → ErrorCode`
//! mapping all tools share ([`exec::open_error_code`]).
//!
//! # Example
//!
//! A write into a directory that does not exist yet makes it, inside the workspace only:
//!
//! ```
//! use file_tools::{FileTool, FileToolOptions};
//! use serde_json::json;
//! use toolscope::ErrorCode;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let root = fsguard::RootLease::acquire(dir.path()).unwrap();
//! let options = FileToolOptions::default();
//! let args = json!({"path": "notes/today.txt", "content": "milk\n"});
//! let out = FileTool::Write.run(&root, args, &options).unwrap();
//! assert_eq!(out["bytesWritten"], 5);
//!
//! let found = FileTool::Grep.run(&root, json!({"pattern": "mil"}), &options).unwrap();
//! assert_eq!(found["matches"][0]["path"], "notes/today.txt");
//!
//! // `.git` is never made nor written, in any case.
//! let err = FileTool::Write
//!     .run(&root, json!({"path": ".GIT/hooks/x", "content": ""}), &options)
//!     .unwrap_err();
//! assert_eq!(err.code(), ErrorCode::ExecPathInvalid);
//!
//! // Nor is configuration a host obeys by itself, unless the user confirmed that file.
//! let hook = json!({"path": ".claude/settings.json", "content": "{}"});
//! let err = FileTool::Write.run(&root, hook.clone(), &options).unwrap_err();
//! assert_eq!(err.code(), ErrorCode::ExecPathProtected);
//! assert!(!dir.path().join(".claude").exists());
//! let confirmed = FileToolOptions {
//!     confirmed: vec![fsguard::RelPath::new(".claude/settings.json").unwrap()],
//!     ..FileToolOptions::default()
//! };
//! assert!(FileTool::Write.run(&root, hook, &confirmed).is_ok());
//! ```
#![deny(missing_docs)]

mod files;
mod parents;
mod protected;

use fsguard::{AutoRun, RelPath, RootLease};
use serde_json::Value;
use toolscope::ToolError;

pub use files::{
    DEFAULT_GREP_RESULTS, DEFAULT_READ_LINES, EditArguments, EditOutput, GrepArguments, GrepMatch,
    GrepOutput, Hidden, MAX_FILE_BYTES, MAX_GREP_FILES, MAX_GREP_LINE_BYTES, MAX_GREP_RESULTS,
    MAX_PATTERN_BYTES, MAX_READ_CONTENT_BYTES, ReadArguments, ReadOutput, WriteArguments,
    WriteOutput, edit, grep, grep_hiding, read, write,
};

/// One of the four file tools, for a host that dispatches by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileTool {
    /// `read {path, offset?, limit?}` → `{content, totalLines, truncated}` (FILE-1).
    Read,
    /// `write {path, content}` → `{bytesWritten}` (FILE-2).
    Write,
    /// `edit {path, oldString, newString, replaceAll?}` → `{replacements}`.
    Edit,
    /// `grep {pattern, path?, glob?, maxResults?}` → `{matches, truncated}` (FILE-3).
    Grep,
}

fn schema_of<T: schemars::JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null)
}

impl FileTool {
    /// The tool's name (an agent configuration's `ref`).
    pub const fn as_str(self) -> &'static str {
        match self {
            FileTool::Read => "read",
            FileTool::Write => "write",
            FileTool::Edit => "edit",
            FileTool::Grep => "grep",
        }
    }

    /// The JSON Schema of the tool's arguments.
    pub fn input_schema(self) -> Value {
        match self {
            FileTool::Read => schema_of::<ReadArguments>(),
            FileTool::Write => schema_of::<WriteArguments>(),
            FileTool::Edit => schema_of::<EditArguments>(),
            FileTool::Grep => schema_of::<GrepArguments>(),
        }
    }

    /// Runs one call on JSON arguments, synchronously: the arguments are parsed against the
    /// schema (`AGENT_EXEC_ARGUMENTS_INVALID` on any break), a `path` inside a [`Hidden`]
    /// directory is refused before anything opens (and `grep` passes over them), `write` and
    /// `edit` refuse a path on the [`AutoRun`] list that is not confirmed, then the tool runs.
    /// The result is the tool's output as JSON.
    pub fn run(
        self,
        root: &RootLease,
        args: Value,
        options: &FileToolOptions,
    ) -> Result<Value, ToolError> {
        let name = self.as_str();
        let FileToolOptions {
            hidden,
            autorun,
            confirmed,
        } = options;
        // read, write and edit name one `path`; refuse it before anything opens.
        let named = matches!(self, FileTool::Read | FileTool::Write | FileTool::Edit)
            .then(|| args.get("path").and_then(Value::as_str))
            .flatten()
            .and_then(|path| RelPath::new(path).ok());
        if let Some(rel) = named {
            hidden.refuse(root, "path", &rel)?;
        }
        match self {
            FileTool::Read => files::to_value(&read(root, files::parse_args(name, args)?)?),
            FileTool::Write => files::to_value(&files::write_guarded(
                root,
                files::parse_args(name, args)?,
                autorun,
                confirmed,
            )?),
            FileTool::Edit => files::to_value(&files::edit_guarded(
                root,
                files::parse_args(name, args)?,
                autorun,
                confirmed,
            )?),
            FileTool::Grep => {
                files::to_value(&grep_hiding(root, files::parse_args(name, args)?, hidden)?)
            }
        }
    }
}

/// What a host passes to every [`FileTool::run`] besides the arguments. The default hides
/// nothing, refuses the default [`AutoRun`] list and has no confirmation.
#[derive(Clone, Debug, Default)]
pub struct FileToolOptions {
    /// Directories no tool may read or change (the host's own state).
    pub hidden: Hidden,
    /// The auto-run configuration `write` and `edit` refuse (TRUST-1, TRUST-2): the default
    /// list, plus what the host adds to it.
    pub autorun: AutoRun,
    /// Protected paths the user confirmed a change of, after the host showed them the file by
    /// this exact path: `write` and `edit` of these go ahead. Nothing else is confirmed: not
    /// another spelling, not another file beneath the same directory.
    pub confirmed: Vec<RelPath>,
}
