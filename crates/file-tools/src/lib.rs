//! The file tools `read`, `write`, `edit` and `grep` (FILE-1…FILE-3): what an agent uses to look
//! at and change the text files of one workspace, with every path opened from the workspace
//! root's pinned descriptor.
//!
//! **Owns:** the four tools' arguments and results (the JSON wire types, [`ReadArguments`] …
//! [`GrepOutput`], and their JSON Schemas), their validation (house rule: validate, then act),
//! their bounds ([`MAX_FILE_BYTES`], [`MAX_GREP_RESULTS`], …), the walk of `grep` with ripgrep's
//! ignore rules, the directories `write` makes for a new file, and the directories no tool may
//! touch ([`Hidden`]: the host's own state inside a workspace).
//!
//! **Refuses to know:** grants, turns and sessions (the host's, which calls [`FileTool::run`]
//! inside a turn's gate); where the root came from (a mirror or the user's folder); any program
//! — these tools run none, so they need no sandbox: their confinement is `fsguard`'s
//! descriptor-relative walk. From `exec` they take one thing, the `OpenError → ErrorCode`
//! mapping all tools share ([`exec::open_error_code`]).
//!
//! # Example
//!
//! A write into a directory that does not exist yet makes it, inside the workspace only:
//!
//! ```
//! use file_tools::{FileTool, Hidden};
//! use serde_json::json;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let root = fsguard::RootLease::acquire(dir.path()).unwrap();
//! let args = json!({"path": "notes/today.txt", "content": "milk\n"});
//! let out = FileTool::Write.run(&root, args, &Hidden::default()).unwrap();
//! assert_eq!(out["bytesWritten"], 5);
//!
//! let found = FileTool::Grep.run(&root, json!({"pattern": "mil"}), &Hidden::default()).unwrap();
//! assert_eq!(found["matches"][0]["path"], "notes/today.txt");
//!
//! // `.git` is never made nor written, in any case.
//! let err = FileTool::Write
//!     .run(&root, json!({"path": ".GIT/hooks/x", "content": ""}), &Hidden::default())
//!     .unwrap_err();
//! assert_eq!(err.code(), toolscope::ErrorCode::ExecPathInvalid);
//! ```
#![deny(missing_docs)]

mod files;
mod parents;

use fsguard::{RelPath, RootLease};
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
    /// directory is refused before anything opens (and `grep` passes over them), then the tool
    /// runs. The result is the tool's output as JSON.
    pub fn run(self, root: &RootLease, args: Value, hidden: &Hidden) -> Result<Value, ToolError> {
        let name = self.as_str();
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
            FileTool::Write => files::to_value(&write(root, files::parse_args(name, args)?)?),
            FileTool::Edit => files::to_value(&edit(root, files::parse_args(name, args)?)?),
            FileTool::Grep => {
                files::to_value(&grep_hiding(root, files::parse_args(name, args)?, hidden)?)
            }
        }
    }
}
