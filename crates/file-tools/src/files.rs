//! The file tools' bodies: `read`, `write`, `edit` and `grep` (FILE-1, FILE-2, FILE-3), inside
//! one workspace root pinned by a [`RootLease`].
//!
//! Every path is a [`RelPath`] (no absolute path, no `..`, no `.git` in any case) opened relative
//! to the pinned root's fd without following any symlink (RUN-4's rules). Reads go through
//! `fsguard`'s single-link checks on one fd, before and after (FILE-1); writes replace the entry
//! atomically (FILE-2). `grep` walks from the root's fd too — directories, files and ignore
//! files alike, never a path string — takes its ignore rules from ripgrep's `ignore`
//! crate, and matches with `regex`.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use fsguard::{AutoRun, CheckError, OpenError, RelPath, RootLease, TextFile, WriteError};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::overrides::Override;
use rustix::fs::FileType;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolscope::{ErrorCode, ToolError};

/// The largest file `edit` accepts, `write` produces and `read` holds whole: 1 MiB, the same
/// bound as `grep` (FILE-3), so every file these tools write can be read back. `read` streams a
/// larger file and returns the window asked for.
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
    /// The file, relative to the workspace root. Missing directories on the way are created
    /// inside the workspace (never through a symbolic link, never `.git`). Configuration that
    /// other programs run by themselves (`.claude/`, `.vscode/`, `.envrc`, `.cargo/config.toml`,
    /// a repository's `config`, …) is refused: ask the user to change it.
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
    /// The file, relative to the workspace root. Configuration that other programs run by
    /// themselves is refused, as for write.
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
    /// True when the search passed over a file or line it could not search (unreadable,
    /// hard-linked, a line over 1 MiB) or stopped at `maxResults`: no match is then not proof of
    /// absence (FILE-3).
    pub truncated: bool,
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::ExecArgumentsInvalid, message)
}

/// Parses a tool's JSON arguments into its typed struct; any schema break is
/// `AGENT_EXEC_ARGUMENTS_INVALID` with serde's description of it.
pub(crate) fn parse_args<T: for<'de> Deserialize<'de>>(
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
pub(crate) fn to_value<T: Serialize>(out: &T) -> Result<serde_json::Value, ToolError> {
    serde_json::to_value(out)
        .map_err(|e| ToolError::new(ErrorCode::ExecIoFailed, format!("result encoding: {e}")))
}

/// Directories beneath the workspace root that no file tool may read or change: the host's own
/// state directory inside a workspace of `$HOME`. Held as paths relative to the
/// root *and* as identities (device, inode): a relative path naming one is refused by its text,
/// and every directory a tool would pass through is also compared by identity, so another
/// spelling of the same directory (a case-insensitive filesystem: `.LOCAL/state`) is refused
/// too.
#[derive(Debug, Clone, Default)]
pub struct Hidden {
    rels: Vec<PathBuf>,
    /// `st_dev` keeps its platform type (`u64` on Linux, `i32` on macOS): compared, never
    /// converted.
    ids: Vec<(rustix::fs::Dev, u64)>,
}

impl Hidden {
    /// The directories of `dirs` that lie strictly beneath `root` (both compared canonical).
    pub fn beneath(root: &Path, dirs: &[PathBuf]) -> Hidden {
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let root = canon(root);
        let mut hidden = Hidden::default();
        for dir in dirs {
            let dir = canon(dir);
            let Ok(rel) = dir.strip_prefix(&root) else {
                continue;
            };
            if rel.as_os_str().is_empty() {
                continue;
            }
            hidden.rels.push(rel.to_path_buf());
            if let Ok(stat) = rustix::fs::stat(&dir) {
                hidden.ids.push((stat.st_dev, stat.st_ino));
            }
        }
        hidden
    }

    fn covers(&self, rel: &RelPath) -> bool {
        self.rels.iter().any(|h| rel.as_path().starts_with(h))
    }

    /// Whether the directory `fd` is one of them.
    fn is(&self, fd: BorrowedFd<'_>) -> bool {
        !self.ids.is_empty()
            && rustix::fs::fstat(fd).is_ok_and(|st| self.ids.contains(&(st.st_dev, st.st_ino)))
    }

    /// Refuses `rel` when it is a hidden directory or lies inside one: by its text, then by
    /// the identity of every existing directory on the way from `root`.
    pub(crate) fn refuse(
        &self,
        root: &RootLease,
        field: &str,
        rel: &RelPath,
    ) -> Result<(), ToolError> {
        let refused = || {
            Err(ToolError::new(
                ErrorCode::ExecPathInvalid,
                format!(
                    "{field} {:?} is inside agent-exec's own state directory (grants, mirrors, \
                     locks), which no tool may read or change; work elsewhere in the workspace",
                    rel.as_path()
                ),
            ))
        };
        if self.covers(rel) {
            return refused();
        }
        if self.ids.is_empty() {
            return Ok(());
        }
        let mut prefix = PathBuf::new();
        for component in rel.as_path().components() {
            prefix.push(component);
            let Ok(step) = RelPath::new(prefix.to_string_lossy().as_ref()) else {
                break;
            };
            match step.open_dir_at(root) {
                Ok(dir) if self.is(dir.as_fd()) => return refused(),
                Ok(_) => {}
                // Not there (yet) or not a directory: nothing below can be hidden.
                Err(_) => break,
            }
        }
        Ok(())
    }
}

fn rel_path(field: &str, s: &str) -> Result<RelPath, ToolError> {
    RelPath::new(s)
        .map_err(|e| ToolError::new(ErrorCode::ExecPathInvalid, format!("{field} {s:?}: {e}")))
}

/// [`rel_path`] of a file for `read`, `write` and `edit`: a trailing `/` names a directory
/// (the kernel answers `ENOTDIR` for a file so named), which `write` would otherwise have made a
/// file of.
fn file_path(field: &str, s: &str) -> Result<RelPath, ToolError> {
    if s.ends_with('/') {
        return Err(ToolError::new(
            ErrorCode::ExecPathInvalid,
            format!(
                "{field} {s:?} ends with `/`, so it names a directory; name the file, e.g. \
                 \"{}/name.txt\"",
                s.trim_end_matches('/')
            ),
        ));
    }
    rel_path(field, s)
}

/// A failed open as the tools answer it; the code is the one mapping all tools share
/// ([`exec::open_error_code`]: only a failing system call is `IO_FAILED`).
pub(crate) fn open_error(err: OpenError) -> ToolError {
    let code = exec::open_error_code(&err);
    let message = match err {
        OpenError::Io { .. } => err.to_string(),
        OpenError::PermissionDenied { .. } => format!(
            "{err}: the operating system refuses this path; name another one, or ask the user \
             to change its permissions"
        ),
        _ => format!("{err}; name a regular file inside the workspace"),
    };
    ToolError::new(code, message)
}

fn check_error(err: CheckError) -> ToolError {
    match err {
        CheckError::Open(e) => open_error(e),
        // FILE-1: a file with another name elsewhere may be someone else's file.
        CheckError::HardLinked { .. } => {
            ToolError::new(ErrorCode::ExecPathInvalid, err.to_string())
        }
        CheckError::TooLarge { .. } => invalid(format!(
            "{err}; edit and write handle files up to 1 MiB; read reads a larger one in parts \
             (offset and limit)"
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
        // As `exec::open_error_code`: a permission the system refuses is about the path.
        WriteError::Io { ref source, .. }
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            ToolError::new(
                ErrorCode::ExecPathInvalid,
                format!(
                    "{err}; the system does not let this user write there: choose a path you may \
                     write, or ask the user to change its permissions"
                ),
            )
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
        _ => Err(not_text(path)),
    }
}

fn not_text(path: &RelPath) -> ToolError {
    invalid(format!(
        "`{path}` is binary or not UTF-8 text; the file tools handle text files only"
    ))
}

/// `read` of a file over [`MAX_FILE_BYTES`]: streamed, never held whole. Every line is counted
/// (for `totalLines`), and only those of the window are kept, each checked to be text (UTF-8,
/// no NUL). A line longer than [`MAX_READ_CONTENT_BYTES`] is read in pieces and never held
/// whole either: it ends the window (`truncated`).
fn read_large(
    file: fsguard::CheckedFile,
    path: &RelPath,
    offset: u64,
    limit: u64,
) -> Result<ReadOutput, ToolError> {
    use std::io::{BufRead, Read};
    let mut reader = std::io::BufReader::new(file.into_file());
    let io = |e: std::io::Error| ToolError::new(ErrorCode::ExecIoFailed, format!("`{path}`: {e}"));
    let (mut total, mut returned, mut full) = (0u64, 0u64, false);
    let mut content = String::new();
    let mut piece = Vec::new();
    // Whether the bytes read next continue a line already counted.
    let mut within_line = false;
    loop {
        piece.clear();
        let cap = MAX_READ_CONTENT_BYTES as u64 + 1;
        let n = (&mut reader)
            .take(cap)
            .read_until(b'\n', &mut piece)
            .map_err(io)?;
        if n == 0 {
            break;
        }
        let ends_line = piece.last() == Some(&b'\n');
        if !within_line {
            if total >= offset && !full {
                // Whole: ended by a newline, or by the end of the file before the cap.
                let whole = ends_line || (n as u64) < cap;
                if whole && returned < limit && content.len() + n <= MAX_READ_CONTENT_BYTES {
                    let text = std::str::from_utf8(&piece)
                        .ok()
                        .filter(|t| !t.contains('\0'))
                        .ok_or_else(|| not_text(path))?;
                    content.push_str(text);
                    returned += 1;
                } else {
                    full = true;
                }
            }
            total += 1;
        }
        within_line = !ends_line;
    }
    Ok(ReadOutput {
        content,
        total_lines: total,
        truncated: offset.saturating_add(returned) < total,
    })
}

/// `read {path, offset?, limit?}` → `{content, totalLines, truncated}`.
pub fn read(root: &RootLease, args: ReadArguments) -> Result<ReadOutput, ToolError> {
    let path = file_path("path", &args.path)?;
    let offset = args.offset.unwrap_or(0);
    let limit = args.limit.unwrap_or(DEFAULT_READ_LINES);
    if limit == 0 {
        return Err(invalid(
            "limit is 0; ask for at least 1 line, or leave limit out",
        ));
    }
    root.verify().map_err(lease_error)?;
    let file = fsguard::open_checked(root, &path).map_err(check_error)?;
    if file.size() > MAX_FILE_BYTES {
        return read_large(file, &path, offset, limit);
    }
    let text = match TextFile::classify(file.read_to_end(MAX_FILE_BYTES).map_err(check_error)?) {
        TextFile::Text(text) => text,
        _ => return Err(not_text(&path)),
    };
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
/// Missing parent directories are made first, each by this tool from the directory before it
/// (`mkdirat` on a descriptor opened without following links), and removed again when the write
/// fails; a parent that is a symbolic link or a file is refused (`AGENT_EXEC_PATH_INVALID`),
/// and `.git` never gets that far ([`RelPath`] refuses it in any case). A path on the default
/// [`AutoRun`] list is refused before anything is made (`AGENT_EXEC_PATH_PROTECTED`, TRUST-2);
/// a host that extends the list or passes confirmations calls
/// [`FileTool::run`](crate::FileTool::run).
pub fn write(root: &RootLease, args: WriteArguments) -> Result<WriteOutput, ToolError> {
    write_guarded(root, args, &AutoRun::default(), &[])
}

/// [`write()`] refusing the paths of `autorun` other than `confirmed`.
pub(crate) fn write_guarded(
    root: &RootLease,
    args: WriteArguments,
    autorun: &AutoRun,
    confirmed: &[RelPath],
) -> Result<WriteOutput, ToolError> {
    let path = file_path("path", &args.path)?;
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
    crate::protected::refuse(root, &path, autorun, confirmed)?;
    let made = crate::parents::make(root, &path)?;
    if let Err(e) = fsguard::atomic_write(root, &path, args.content.as_bytes()) {
        // Nothing half-made: the directories this call created go again (those still empty).
        made.undo();
        return Err(write_error(e));
    }
    Ok(WriteOutput { bytes_written: len })
}

/// `edit {path, oldString, newString, replaceAll?}` → `{replacements}`. A path on the default
/// [`AutoRun`] list is refused before it is read, as for [`write()`].
pub fn edit(root: &RootLease, args: EditArguments) -> Result<EditOutput, ToolError> {
    edit_guarded(root, args, &AutoRun::default(), &[])
}

/// [`edit()`] refusing the paths of `autorun` other than `confirmed`.
pub(crate) fn edit_guarded(
    root: &RootLease,
    args: EditArguments,
    autorun: &AutoRun,
    confirmed: &[RelPath],
) -> Result<EditOutput, ToolError> {
    let path = file_path("path", &args.path)?;
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
    crate::protected::refuse(root, &path, autorun, confirmed)?;
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

fn is_git_component(name: &OsStr) -> bool {
    // Same rule as RelPath's; asking RelPath keeps it one rule.
    RelPath::new(name).is_err_and(|e| matches!(e, fsguard::RelPathError::GitDir { .. }))
}

/// `grep {pattern, path?, glob?, maxResults?}` → `{matches, truncated}` (FILE-3).
///
/// Walks `path` with `.gitignore`/`.ignore` rules of the workspace (never of folders above it,
/// never `.git/info/exclude`), hidden files included, `.git` in any case excluded, symlinks not
/// followed. Files over 1 MiB are searched a line at a time; unreadable or hard-linked files,
/// and lines over 1 MiB, set `truncated`; binary and non-UTF-8 files are skipped without it.
///
/// The walk is our own, from the pinned root's descriptor: every directory, file and ignore
/// file is opened relative to its parent's fd with `O_NOFOLLOW`, so a directory
/// swapped for a symlink after it was listed is refused, not entered, and the workspace path is
/// never resolved again. ripgrep's `ignore` crate supplies only the rule matchers, which work on
/// path text (the root's path joined with the names walked) and touch no file; its own walker
/// opens paths by name. The rules are the ones its walker applied with our options: the glob
/// first, then `.ignore` before `.gitignore`, the deepest file with a matching rule deciding
/// each. An ignore file that is a symlink, hard-linked, unreadable or over 1 MiB is not used.
pub fn grep(root: &RootLease, args: GrepArguments) -> Result<GrepOutput, ToolError> {
    grep_hiding(root, args, &Hidden::default())
}

/// [`grep`] that never enters a [`Hidden`] directory (a start inside one is refused).
pub fn grep_hiding(
    root: &RootLease,
    args: GrepArguments,
    hidden: &Hidden,
) -> Result<GrepOutput, ToolError> {
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
    hidden.refuse(root, "path", &start)?;
    // Path text for the rule matchers only; nothing is opened by it.
    let walk_root = root.path().join(start.as_path());
    let glob = match &args.glob {
        Some(glob) => {
            let mut over = ignore::overrides::OverrideBuilder::new(&walk_root);
            over.add(glob)
                .map_err(|e| invalid(format!("glob {glob:?} is not valid: {e}")))?;
            Some(
                over.build()
                    .map_err(|e| invalid(format!("glob {glob:?} is not valid: {e}")))?,
            )
        }
        None => None,
    };
    root.verify().map_err(lease_error)?;
    let mut search = Search {
        regex,
        max,
        hidden,
        files: 0,
        out: GrepOutput {
            matches: Vec::new(),
            truncated: false,
        },
    };
    match start.open_dir_at(root) {
        Ok(dir) => search.walk(dir, start, walk_root, glob.as_ref()),
        Err(OpenError::NotADirectory { .. }) => {
            // A file named directly is searched whatever the glob and ignore files say.
            fsguard::open_checked(root, &start).map_err(check_error)?;
            search.file(root.as_fd(), &start, &start);
        }
        Err(e) => return Err(open_error(e)),
    }
    Ok(search.out)
}

/// One `grep` in progress.
struct Search<'h> {
    regex: regex::Regex,
    max: u64,
    hidden: &'h Hidden,
    files: usize,
    out: GrepOutput,
}

/// A directory on the walk's current path: its fd, its path from the workspace root, its
/// path text for the matchers, its ignore files, and the entries still to visit.
struct Frame {
    dir: OwnedFd,
    rel: RelPath,
    text: PathBuf,
    ignore: Gitignore,
    gitignore: Gitignore,
    entries: std::vec::IntoIter<(OsString, FileType)>,
}

impl Search<'_> {
    /// Visits every entry below `dir` (the start, opened from the root's fd) depth first, in
    /// path order, holding directory fds only along the current path.
    fn walk(&mut self, dir: OwnedFd, rel: RelPath, text: PathBuf, glob: Option<&Override>) {
        let mut stack: Vec<Frame> = Vec::new();
        if let Some(frame) = self.frame(dir, rel, text) {
            stack.push(frame);
        }
        loop {
            let Some(top) = stack.last_mut() else {
                return;
            };
            let Some((name, kind)) = top.entries.next() else {
                stack.pop();
                continue;
            };
            if is_git_component(&name)
                || !matches!(kind, FileType::Directory | FileType::RegularFile)
            {
                continue;
            }
            let is_dir = kind == FileType::Directory;
            let top = &stack[stack.len() - 1];
            let text = top.text.join(&name);
            if ignored(&stack, glob, &text, is_dir) {
                continue;
            }
            let Ok(one) = RelPath::new(&name) else {
                continue;
            };
            let Ok(rel) = top.rel.join(&name) else {
                // Past the longest path a RelPath holds: passed over, so say so.
                self.out.truncated = true;
                continue;
            };
            // The host's own state is not the workspace's content: not searched, and not a
            // truncation either.
            if self.hidden.covers(&rel) {
                continue;
            }
            if is_dir {
                match one.open_dir_at(&top.dir) {
                    // Another name of a hidden directory (a case-insensitive filesystem).
                    Ok(fd) if self.hidden.is(fd.as_fd()) => {}
                    Ok(fd) => {
                        if let Some(frame) = self.frame(fd, rel, text) {
                            stack.push(frame);
                        }
                    }
                    // Gone, or swapped for a symlink since it was listed: not followed, like
                    // a symlink that was there all along.
                    Err(OpenError::NotFound { .. } | OpenError::Symlink { .. }) => {}
                    Err(_) => self.out.truncated = true,
                }
                continue;
            }
            self.files += 1;
            if self.files > MAX_GREP_FILES {
                self.out.truncated = true;
                return;
            }
            if !self.file(top.dir.as_fd(), &one, &rel) {
                return;
            }
        }
    }

    /// Lists `dir` and reads its ignore files; `None` (and `truncated`) when it cannot be
    /// listed: part of the tree went unsearched.
    fn frame(&mut self, dir: OwnedFd, rel: RelPath, text: PathBuf) -> Option<Frame> {
        let Some(entries) = list_dir(&dir) else {
            self.out.truncated = true;
            return None;
        };
        let has = |name: &str| entries.iter().any(|(n, _)| n == name);
        let ignore = ignore_file(&dir, &text, ".ignore", has(".ignore"));
        let gitignore = ignore_file(&dir, &text, ".gitignore", has(".gitignore"));
        Some(Frame {
            dir,
            rel,
            text,
            ignore,
            gitignore,
            entries: entries.into_iter(),
        })
    }

    /// `file` for a file over 1 MiB: streamed a line at a time. A line that is not
    /// text (NUL, not UTF-8) makes it binary: its matches are taken back and it is passed over,
    /// as a small binary file is. A line longer than 1 MiB is passed over (`truncated`).
    fn large_file(&mut self, dir: BorrowedFd<'_>, name: &RelPath, rel: &RelPath) -> bool {
        use std::io::{BufRead, Read};
        let Ok(file) = fsguard::open_checked(dir, name) else {
            self.out.truncated = true;
            return true;
        };
        let mut reader = std::io::BufReader::new(file.into_file());
        let shown = display_path(rel.as_path());
        let first = self.out.matches.len();
        let cap = MAX_FILE_BYTES + 1;
        let (mut n, mut within_line) = (0u64, false);
        let mut piece = Vec::new();
        loop {
            piece.clear();
            let Ok(read) = (&mut reader).take(cap).read_until(b'\n', &mut piece) else {
                self.out.truncated = true;
                return true;
            };
            if read == 0 {
                return true;
            }
            let ends_line = piece.last() == Some(&b'\n');
            let starts_line = !within_line;
            within_line = !ends_line;
            if !starts_line {
                continue;
            }
            n += 1;
            if !ends_line && read as u64 == cap {
                self.out.truncated = true;
                continue;
            }
            let Some(line) = std::str::from_utf8(&piece)
                .ok()
                .filter(|l| !l.contains('\0'))
            else {
                self.out.matches.truncate(first);
                return true;
            };
            if !self.line(&shown, n, line) {
                return false;
            }
        }
    }

    /// Searches the file `name` in `dir` (shown as `rel`); false once `maxResults` is reached.
    fn file(&mut self, dir: BorrowedFd<'_>, name: &RelPath, rel: &RelPath) -> bool {
        let text = match fsguard::read_text(dir, name) {
            Ok(TextFile::Text(t)) => t,
            // Over 1 MiB: searched line by line, never held whole.
            Ok(TextFile::TooLarge { .. }) => return self.large_file(dir, name, rel),
            Ok(t) => {
                // Too large or denied: passed over, so say so. Binary or not UTF-8: outside
                // text search, not truncation.
                self.out.truncated |= t.marks_truncation();
                return true;
            }
            // Gone since it was listed: nothing was passed over.
            Err(CheckError::Open(OpenError::NotFound { .. })) => return true,
            // Hard-linked, changed while read, swapped for a symlink: passed over.
            Err(_) => {
                self.out.truncated = true;
                return true;
            }
        };
        let shown = display_path(rel.as_path());
        for (n, line) in text.split_inclusive('\n').enumerate() {
            if !self.line(&shown, n as u64 + 1, line) {
                return false;
            }
        }
        true
    }

    /// Matches line `n` of the file shown as `shown`; false once `maxResults` is reached.
    fn line(&mut self, shown: &str, n: u64, line: &str) -> bool {
        if self.regex.is_match(line.strip_suffix('\n').unwrap_or(line)) {
            if self.out.matches.len() as u64 == self.max {
                self.out.truncated = true;
                return false;
            }
            self.out.matches.push(GrepMatch {
                path: shown.to_owned(),
                line: n,
                text: cut_line(line),
            });
        }
        true
    }
}

/// Whether the rules skip the entry at path text `text`: the glob decides first (a file it
/// does not match is skipped, a directory it does not match is left to the ignore files), then
/// the deepest `.ignore` with a matching rule, then the deepest `.gitignore`.
fn ignored(stack: &[Frame], glob: Option<&Override>, text: &Path, is_dir: bool) -> bool {
    if let Some(glob) = glob {
        let m = glob.matched(text, is_dir);
        if !m.is_none() {
            return m.is_ignore();
        }
    }
    let mut by_ignore = ignore::Match::None;
    let mut by_gitignore = ignore::Match::None;
    for frame in stack.iter().rev() {
        if by_ignore.is_none() {
            by_ignore = frame.ignore.matched(text, is_dir);
        }
        if by_gitignore.is_none() {
            by_gitignore = frame.gitignore.matched(text, is_dir);
        }
    }
    by_ignore.or(by_gitignore).is_ignore()
}

/// The names and types of `dir`'s entries, sorted; a `DT_UNKNOWN` entry is `lstat`-ed
/// relative to `dir`. `None` when the directory cannot be read.
pub(crate) fn list_dir(dir: &OwnedFd) -> Option<Vec<(OsString, FileType)>> {
    let mut reader = rustix::fs::Dir::read_from(dir).ok()?;
    let mut out = Vec::new();
    while let Some(entry) = reader.read() {
        let entry = entry.ok()?;
        let name = entry.file_name();
        if matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => {
                match rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => FileType::from_raw_mode(st.st_mode),
                    Err(_) => continue,
                }
            }
            kind => kind,
        };
        out.push((OsStr::from_bytes(name.to_bytes()).to_os_string(), kind));
    }
    out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Some(out)
}

/// The rules of the ignore file `name` in `dir` (path text `text`), read like any file here:
/// from the directory's fd, no symlink, one link, at most 1 MiB. Lines are taken as
/// `.gitignore` files are (a leading BOM dropped, reading stopped at the first line that is not
/// UTF-8, a bad rule skipped); a file that cannot be used counts as absent.
fn ignore_file(dir: &OwnedFd, text: &Path, name: &str, present: bool) -> Gitignore {
    if !present {
        return Gitignore::empty();
    }
    let Ok(rel) = RelPath::new(name) else {
        return Gitignore::empty();
    };
    let Ok(bytes) = fsguard::read_checked(dir, &rel, fsguard::MAX_TEXT_BYTES) else {
        return Gitignore::empty();
    };
    let mut builder = GitignoreBuilder::new(text);
    let from = text.join(name);
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        let Ok(line) = std::str::from_utf8(line) else {
            break;
        };
        let line = line.strip_suffix('\r').unwrap_or(line);
        let line = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        let _ = builder.add_line(Some(from.clone()), line);
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

fn display_path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}
