//! The file tools `read`, `write`, `edit` and `grep` (FILE-1, FILE-2, FILE-3), inside one
//! workspace root pinned by a [`RootLease`].
//!
//! Every path is a [`RelPath`] (no absolute path, no `..`, no `.git` in any case) opened relative
//! to the pinned root's fd without following any symlink (RUN-4's rules). Reads go through
//! `fsguard`'s single-link checks on one fd, before and after (FILE-1); writes replace the entry
//! atomically (FILE-2). `grep` walks with ripgrep's `ignore` crate for names only — each file's
//! content is read through the same checked, fd-relative open — and matches with `regex`.

use std::path::Path;

use fsguard::{CheckError, OpenError, RelPath, RootLease, TextFile, WriteError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolscope::{ErrorCode, ToolError};

/// The largest file `read` and `edit` accept and `write` produces: 1 MiB, the same bound as
/// `grep` (FILE-3), so every file these tools write can be read back.
pub const MAX_FILE_BYTES: u64 = fsguard::MAX_TEXT_BYTES;

/// Lines `read` returns when `limit` is not given.
pub const DEFAULT_READ_LINES: u64 = 2000;

/// The most bytes of `content` one `read` returns; more lines are left for the next `offset`.
pub const MAX_READ_CONTENT_BYTES: usize = 256 * 1024;

/// Matches `grep` returns when `maxResults` is not given, and the most it ever returns.
pub const DEFAULT_GREP_RESULTS: u64 = 100;
/// See [`DEFAULT_GREP_RESULTS`].
pub const MAX_GREP_RESULTS: u64 = 1000;

/// A matched line's `text` is cut to this many bytes (on a character boundary).
pub const MAX_GREP_LINE_BYTES: usize = 1000;

/// `grep` looks at no more than this many files; past it the result is `truncated`.
pub const MAX_GREP_FILES: usize = 100_000;

/// The longest `pattern` accepted, in bytes.
pub const MAX_PATTERN_BYTES: usize = 4096;

/// `read` arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadArguments {
    /// The file, relative to the workspace root.
    pub path: String,
    /// Lines to skip from the start (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Lines to return at most (default 2000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

/// `read` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadOutput {
    /// The requested lines, each with its line ending.
    pub content: String,
    /// How many lines the file has.
    pub total_lines: u64,
    /// True when lines after the returned ones exist (read on with a larger `offset`).
    pub truncated: bool,
}

/// `write` arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteArguments {
    /// The file, relative to the workspace root; its directory must exist.
    pub path: String,
    /// The whole new content.
    pub content: String,
}

/// `write` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteOutput {
    /// Bytes written.
    pub bytes_written: u64,
}

/// `edit` arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditArguments {
    /// The file, relative to the workspace root.
    pub path: String,
    /// The exact text to replace; without `replaceAll` it must occur exactly once.
    pub old_string: String,
    /// The replacement.
    pub new_string: String,
    /// Replace every occurrence (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_all: Option<bool>,
}

/// `edit` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditOutput {
    /// How many occurrences were replaced.
    pub replacements: u64,
}

/// `grep` arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrepArguments {
    /// A regular expression (Rust `regex` syntax), matched against each line.
    pub pattern: String,
    /// A file or directory to search, relative to the workspace root (default: the root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Only files whose path matches this glob (gitignore syntax, e.g. `*.csv`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<String>,
    /// At most this many matches (default 100, at most 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_results: Option<u64>,
}

/// One `grep` match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrepMatch {
    /// The file, relative to the workspace root.
    pub path: String,
    /// The line number, from 1.
    pub line: u64,
    /// The line's text without its line ending (cut at 1000 bytes).
    pub text: String,
}

/// `grep` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrepOutput {
    /// The matches, in walk order.
    pub matches: Vec<GrepMatch>,
    /// True when the search passed over a file it could not search (over 1 MiB, unreadable,
    /// hard-linked) or stopped at `maxResults`: no match is then not proof of absence (FILE-3).
    pub truncated: bool,
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::ExecArgumentsInvalid, message)
}

/// Parses a tool's JSON arguments into its typed struct; any schema break is
/// `AGENT_EXEC_ARGUMENTS_INVALID` with serde's description of it.
pub fn parse_args<T: for<'de> Deserialize<'de>>(
    tool: &str,
    args: serde_json::Value,
) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| {
        invalid(format!(
            "the {tool} arguments do not match its schema ({e}); send exactly the documented \
             camelCase fields"
        ))
    })
}

/// Serialises a tool result (cannot fail for these plain structs; an error would still be
/// reported, not panic).
pub fn to_value<T: Serialize>(out: &T) -> Result<serde_json::Value, ToolError> {
    serde_json::to_value(out)
        .map_err(|e| ToolError::new(ErrorCode::ExecIoFailed, format!("result encoding: {e}")))
}

fn rel_path(field: &str, s: &str) -> Result<RelPath, ToolError> {
    RelPath::new(s)
        .map_err(|e| ToolError::new(ErrorCode::ExecPathInvalid, format!("{field} {s:?}: {e}")))
}

fn open_error(err: OpenError) -> ToolError {
    match err {
        OpenError::PermissionDenied { .. } | OpenError::Io { .. } => {
            ToolError::new(ErrorCode::ExecIoFailed, err.to_string())
        }
        _ => ToolError::new(
            ErrorCode::ExecPathInvalid,
            format!("{err}; name a regular file inside the workspace"),
        ),
    }
}

fn check_error(err: CheckError) -> ToolError {
    match err {
        CheckError::Open(e) => open_error(e),
        // FILE-1: a file with another name elsewhere may be someone else's file.
        CheckError::HardLinked { .. } => {
            ToolError::new(ErrorCode::ExecPathInvalid, err.to_string())
        }
        CheckError::TooLarge { .. } => invalid(format!(
            "{err}; the file tools handle files up to 1 MiB, use grep to find the lines you need"
        )),
        _ => ToolError::new(ErrorCode::ExecIoFailed, err.to_string()),
    }
}

fn write_error(err: WriteError) -> ToolError {
    match err {
        WriteError::Open(e) => open_error(e),
        WriteError::NotARegularFile { .. } | WriteError::AlreadyExists { .. } => {
            ToolError::new(ErrorCode::ExecPathInvalid, err.to_string())
        }
        _ => ToolError::new(ErrorCode::ExecIoFailed, err.to_string()),
    }
}

/// Reads a checked text file: single link before and after (FILE-1), at most 1 MiB, UTF-8.
fn read_text_file(
    root: &RootLease,
    path: &RelPath,
) -> Result<(String, fsguard::FileId), ToolError> {
    let file = fsguard::open_checked(root, path).map_err(check_error)?;
    let id = file.id();
    let bytes = file.read_to_end(MAX_FILE_BYTES).map_err(check_error)?;
    match TextFile::classify(bytes) {
        TextFile::Text(text) => Ok((text, id)),
        _ => Err(invalid(format!(
            "`{path}` is binary or not UTF-8 text; the file tools handle text files only"
        ))),
    }
}

/// `read {path, offset?, limit?}` → `{content, totalLines, truncated}`.
pub fn read(root: &RootLease, args: ReadArguments) -> Result<ReadOutput, ToolError> {
    let path = rel_path("path", &args.path)?;
    let offset = args.offset.unwrap_or(0);
    let limit = args.limit.unwrap_or(DEFAULT_READ_LINES);
    if limit == 0 {
        return Err(invalid(
            "limit is 0; ask for at least 1 line, or leave limit out",
        ));
    }
    root.verify().map_err(lease_error)?;
    let (text, _) = read_text_file(root, &path)?;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let total = lines.len() as u64;
    let mut content = String::new();
    let mut returned = 0u64;
    for line in lines
        .iter()
        .skip(usize::try_from(offset).unwrap_or(usize::MAX))
    {
        if returned == limit || content.len() + line.len() > MAX_READ_CONTENT_BYTES {
            break;
        }
        content.push_str(line);
        returned += 1;
    }
    Ok(ReadOutput {
        content,
        total_lines: total,
        truncated: offset.saturating_add(returned) < total,
    })
}

/// `write {path, content}` → `{bytesWritten}`; the entry is replaced atomically (FILE-2).
pub fn write(root: &RootLease, args: WriteArguments) -> Result<WriteOutput, ToolError> {
    let path = rel_path("path", &args.path)?;
    if path.is_root() {
        return Err(ToolError::new(
            ErrorCode::ExecPathInvalid,
            "path names the workspace root; name a file inside it",
        ));
    }
    let len = args.content.len() as u64;
    if len > MAX_FILE_BYTES {
        return Err(invalid(format!(
            "content is {len} bytes, over the 1 MiB limit of the file tools; write smaller files"
        )));
    }
    root.verify().map_err(lease_error)?;
    fsguard::atomic_write(root, &path, args.content.as_bytes()).map_err(write_error)?;
    Ok(WriteOutput { bytes_written: len })
}

/// `edit {path, oldString, newString, replaceAll?}` → `{replacements}`.
pub fn edit(root: &RootLease, args: EditArguments) -> Result<EditOutput, ToolError> {
    let path = rel_path("path", &args.path)?;
    if args.old_string.is_empty() {
        return Err(invalid(
            "oldString is empty; give the exact text to replace (use write for a new file)",
        ));
    }
    if args.old_string == args.new_string {
        return Err(invalid(
            "oldString and newString are the same; nothing would change",
        ));
    }
    root.verify().map_err(lease_error)?;
    let (text, id) = read_text_file(root, &path)?;
    let count = text.matches(&args.old_string).count() as u64;
    let all = args.replace_all.unwrap_or(false);
    if count == 0 {
        return Err(invalid(format!(
            "oldString was not found in `{path}`; read the file and copy the text exactly"
        )));
    }
    if count > 1 && !all {
        return Err(invalid(format!(
            "oldString occurs {count} times in `{path}`; add surrounding text so it occurs once, \
             or set replaceAll to true"
        )));
    }
    let new_text = text.replace(&args.old_string, &args.new_string);
    if new_text.len() as u64 > MAX_FILE_BYTES {
        return Err(invalid(
            "the edited file would be over 1 MiB; make a smaller edit",
        ));
    }
    // The file must still be the one we read (same inode, still one link): otherwise a swap
    // between read and write could replace a file we never looked at.
    let again = fsguard::open_checked(root, &path).map_err(check_error)?;
    if again.id() != id {
        return Err(ToolError::new(
            ErrorCode::ExecIoFailed,
            format!("`{path}` was replaced while being edited; read it again and retry"),
        ));
    }
    fsguard::atomic_write(root, &path, new_text.as_bytes()).map_err(write_error)?;
    Ok(EditOutput {
        replacements: if all { count } else { 1 },
    })
}

fn lease_error(err: fsguard::LeaseError) -> ToolError {
    ToolError::new(
        ErrorCode::ExecCancelled,
        format!(
            "the workspace folder was moved or replaced during the turn ({err}); start a new turn on the folder"
        ),
    )
}

fn cut_line(line: &str) -> String {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.len() <= MAX_GREP_LINE_BYTES {
        return line.to_owned();
    }
    let mut end = MAX_GREP_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_owned()
}

fn is_git_component(name: &std::ffi::OsStr) -> bool {
    // Same rule as RelPath's; asking RelPath keeps it one rule.
    RelPath::new(name).is_err_and(|e| matches!(e, fsguard::RelPathError::GitDir { .. }))
}

/// `grep {pattern, path?, glob?, maxResults?}` → `{matches, truncated}` (FILE-3).
///
/// Walks `path` with `.gitignore`/`.ignore` rules of the workspace (never of folders above it,
/// never `.git/info/exclude`), hidden files included, `.git` in any case excluded, symlinks not
/// followed. Files over 1 MiB, unreadable or hard-linked set `truncated`; binary and non-UTF-8
/// files are skipped without it.
pub fn grep(root: &RootLease, args: GrepArguments) -> Result<GrepOutput, ToolError> {
    if args.pattern.len() > MAX_PATTERN_BYTES {
        return Err(invalid(format!(
            "pattern is {} bytes, over {MAX_PATTERN_BYTES}; use a shorter pattern",
            args.pattern.len()
        )));
    }
    let regex = regex::RegexBuilder::new(&args.pattern)
        .size_limit(1 << 22)
        .build()
        .map_err(|e| invalid(format!("pattern is not a valid regular expression: {e}")))?;
    let max = args.max_results.unwrap_or(DEFAULT_GREP_RESULTS);
    if max == 0 || max > MAX_GREP_RESULTS {
        return Err(invalid(format!(
            "maxResults is {max}; use 1 to {MAX_GREP_RESULTS}"
        )));
    }
    let start = rel_path("path", args.path.as_deref().unwrap_or("."))?;
    root.verify().map_err(lease_error)?;
    // Validate the start on the pinned fd first: no symlink component, exists.
    let start_is_dir = match start.open_dir_at(root) {
        Ok(_) => true,
        Err(OpenError::NotADirectory { .. }) => {
            fsguard::open_checked(root, &start).map_err(check_error)?;
            false
        }
        Err(e) => return Err(open_error(e)),
    };
    let base = root.path().to_path_buf();
    let walk_root = base.join(start.as_path());
    let mut builder = ignore::WalkBuilder::new(&walk_root);
    builder
        .standard_filters(false)
        .hidden(false)
        .ignore(true)
        .git_ignore(true)
        .require_git(false)
        .parents(false)
        .git_global(false)
        .git_exclude(false)
        .follow_links(false)
        .sort_by_file_path(|a, b| a.cmp(b))
        .filter_entry(|e| !is_git_component(e.file_name()));
    if let Some(glob) = &args.glob {
        let mut over = ignore::overrides::OverrideBuilder::new(&walk_root);
        over.add(glob)
            .map_err(|e| invalid(format!("glob {glob:?} is not valid: {e}")))?;
        let over = over
            .build()
            .map_err(|e| invalid(format!("glob {glob:?} is not valid: {e}")))?;
        builder.overrides(over);
    }
    let mut out = GrepOutput {
        matches: Vec::new(),
        truncated: false,
    };
    let mut files = 0usize;
    for entry in builder.build() {
        let entry = match entry {
            Ok(e) => e,
            // An unreadable directory or ignore file: part of the tree went unsearched.
            Err(_) => {
                out.truncated = true;
                continue;
            }
        };
        let is_file = entry.file_type().is_some_and(|t| t.is_file());
        if !is_file {
            continue;
        }
        files += 1;
        if files > MAX_GREP_FILES {
            out.truncated = true;
            break;
        }
        let Ok(below) = entry.path().strip_prefix(&base) else {
            out.truncated = true;
            continue;
        };
        let rel = match RelPath::new(below) {
            Ok(r) => r,
            Err(_) => continue, // .git inside a name the filter already skipped
        };
        let text = match fsguard::read_text(root, &rel) {
            Ok(TextFile::Text(t)) => t,
            Ok(t) if t.marks_truncation() => {
                out.truncated = true;
                continue;
            }
            Ok(_) => continue, // binary or not UTF-8: outside text search, not truncation
            // Hard-linked, changed while read, or gone: passed over, so say so.
            Err(CheckError::Open(OpenError::NotFound { .. })) => continue,
            Err(_) => {
                out.truncated = true;
                continue;
            }
        };
        let shown = display_path(rel.as_path());
        for (n, line) in text.split_inclusive('\n').enumerate() {
            if regex.is_match(line.strip_suffix('\n').unwrap_or(line)) {
                if out.matches.len() as u64 == max {
                    out.truncated = true;
                    return Ok(out);
                }
                out.matches.push(GrepMatch {
                    path: shown.clone(),
                    line: n as u64 + 1,
                    text: cut_line(line),
                });
            }
        }
        if !start_is_dir {
            break;
        }
    }
    Ok(out)
}

fn display_path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}
