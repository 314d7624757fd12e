//! The git guard (RCS-3, RC-4): a `run_command` call never leaves behind git
//! metadata that makes git run a program, however the command got it there.
//!
//! **Owns:** finding git directories in the writable roots (every depth: `.git` directories,
//! the git directory a `.git` file or link names when it lies in a root, bare-looking
//! directories holding `HEAD` with `objects`/`refs`/`commondir`, `modules/**` and
//! `worktrees/*` inside them), the snapshot of what in them can make git run a program (the
//! `hooks` entries and those of a `core.hooksPath` directory inside the roots, `config`,
//! `config.worktree` and the files they include, `commondir`, `.gitmodules`), the comparison
//! after the command's tree has ended, and the quarantine: what is new or changed and can run
//! a program is renamed to `<name>.agent-exec-quarantined` (never deleted), its execute bits
//! stripped. Also: which of `rm`'s real paths are repository metadata (refused: the user
//! deletes those), and the extra read-only paths of existing repositories.
//! **Refuses to know:** how the command ran (module `sandboxed`) and what the result says
//! beyond the list it returns.
//!
//! The walk reads directories only (`read_dir` = `getdents`, the entry type from `d_type`;
//! one `lstat` per git metadata file, none per ordinary file) and stops after
//! [`ENTRY_BUDGET`] entries per snapshot; the result then says that deeper trees were not
//! checked.
//!
//! **Dangerous config keys** (a new or changed `config`/`config.worktree` holding a new entry
//! of one of these is quarantined): `core.hooksPath`, `core.fsmonitor`, `core.sshCommand`,
//! `core.pager`, `core.editor`, `core.askPass`, `core.gitProxy`,
//! `core.alternateRefsCommand`, `sequence.editor`, `diff.external`, `diff.*.textconv`,
//! `diff.*.command`, `difftool.*.cmd`, `mergetool.*.cmd`, `interactive.diffFilter`,
//! `filter.*.clean|smudge|process`, `merge.*.driver`, `alias.*` starting with `!`,
//! `include.path`, `includeIf.*.path`, `credential.helper`, `credential.*.helper`,
//! `gpg.program`, `gpg.*.program`, `gpg.ssh.defaultKeyCommand`, `uploadpack.packObjectsHook`,
//! `protocol.*.allow` (it lets an `ext::` url run a command), `remote.*.uploadpack`,
//! `remote.*.receivepack`, `web.browser`, `browser.*.cmd|path`, `pager.*`,
//! `man.*.cmd|path`, `man.viewer`, `instaweb.*`, `sendemail.*cmd`, `trailer.*.command|cmd`,
//! `submodule.*.update` starting with `!`. In `.gitmodules`: `submodule.*.update` starting
//! with `!` and a `url` of the `ext::` transport. Not on the list: `core.worktree` (it runs
//! nothing, and `git submodule` writes it into `modules/*/config`).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Directory entries one snapshot reads at most (over all writable roots).
pub(crate) const ENTRY_BUDGET: usize = 500_000;

/// The file type bits of `st_mode` and two of its values (the same numbers on Linux and
/// macOS, where `libc`'s are `u16`).
const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;
const S_IFLNK: u32 = 0o120_000;

/// The suffix a quarantined file gets.
pub(crate) const QUARANTINE_SUFFIX: &str = ".agent-exec-quarantined";

/// One file the guard moved aside after the command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Quarantined {
    /// Where it was (git would have used it there).
    pub path: String,
    /// Where it is now (renamed in place, execute bits stripped); `None` when it could not be
    /// moved (then `why` says so and the user must look at it).
    pub moved_to: Option<String>,
    /// Why it can make git run a program.
    pub why: String,
}

/// The identity of a file as far as "did it change" goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    ino: u64,
    dev: u64,
    mtime: i64,
    mtime_ns: i64,
    mode: u32,
    size: u64,
}

impl FileId {
    fn of(p: &Path) -> Option<FileId> {
        let m = std::fs::symlink_metadata(p).ok()?;
        Some(FileId {
            ino: m.ino(),
            dev: m.dev(),
            mtime: m.mtime(),
            mtime_ns: m.mtime_nsec(),
            mode: m.mode(),
            size: m.size(),
        })
    }
}

/// One entry of a hooks directory: its identity, and its content when it is a small file (a
/// hook rewritten with the same content, as husky's install does, is no change).
#[derive(Debug, Clone, PartialEq, Eq)]
struct HookState {
    id: FileId,
    content: Option<Vec<u8>>,
}

impl HookState {
    fn of(p: &Path) -> Option<HookState> {
        let id = FileId::of(p)?;
        let regular = id.mode & S_IFMT == S_IFREG;
        let content = (regular && id.size <= 1 << 20)
            .then(|| read_small(p, 1 << 20))
            .flatten();
        Some(HookState { id, content })
    }

    fn same_as(&self, other: &HookState) -> bool {
        self.id == other.id
            || (self.content.is_some()
                && self.content == other.content
                && self.id.mode == other.id.mode)
    }
}

/// A config-like file: its identity and the dangerous entries it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ConfigState {
    id: FileId,
    dangerous: BTreeSet<String>,
}

/// What can make git run a program in one git directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct GitDirState {
    hooks_dir: Option<FileId>,
    hooks: BTreeMap<PathBuf, HookState>,
    configs: BTreeMap<PathBuf, ConfigState>,
    commondir: Option<FileId>,
    /// The git directory a `worktrees/<name>` entry belongs to (its `commondir` may name it).
    parent_git: Option<PathBuf>,
}

/// Git metadata of the writable roots at one moment.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    roots: Vec<PathBuf>,
    gitdirs: BTreeMap<PathBuf, GitDirState>,
    /// `.git` files and links: identity and the target they name (canonical, if it exists).
    pointers: BTreeMap<PathBuf, (FileId, Option<PathBuf>)>,
    gitmodules: BTreeMap<PathBuf, ConfigState>,
    /// The entry budget ran out: what lies beyond was not looked at.
    pub(crate) incomplete: bool,
    /// The roots not looked through to their end (the one the budget ran out in, and after).
    unchecked: Vec<PathBuf>,
}

impl Snapshot {
    /// Walks `roots` in order (every depth, at most `budget` entries in all).
    pub(crate) fn take(roots: &[PathBuf], budget: usize) -> Snapshot {
        let mut s = Snapshot {
            roots: roots.to_vec(),
            ..Snapshot::default()
        };
        let mut left = budget;
        for (i, root) in roots.iter().enumerate() {
            if !s.walk(root, &mut left) || s.incomplete {
                s.incomplete = true;
                s.unchecked = roots[i..].to_vec();
                break;
            }
        }
        s
    }

    /// One root's tree; `false` when the budget ran out.
    fn walk(&mut self, root: &Path, left: &mut usize) -> bool {
        let mut stack: Vec<PathBuf> = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut names: BTreeSet<std::ffi::OsString> = BTreeSet::new();
            let mut subdirs = Vec::new();
            for entry in entries.flatten() {
                if *left == 0 {
                    return false;
                }
                *left -= 1;
                let name = entry.file_name();
                let Ok(ty) = entry.file_type() else { continue };
                let path = entry.path();
                if name == ".git" {
                    if ty.is_dir() {
                        self.add_gitdir(&path, None, left);
                    } else {
                        self.add_pointer(&path, left);
                    }
                    continue;
                }
                if name == ".gitmodules" && ty.is_file() {
                    if let Some(c) = config_state(&path, modules_danger) {
                        self.gitmodules.insert(path.clone(), c);
                    }
                }
                if ty.is_dir() {
                    subdirs.push(path);
                }
                names.insert(name);
            }
            // A bare repository (git treats a directory with HEAD, objects and refs as one,
            // and a user may `cd` into it): checked like `.git`, not walked as a tree.
            let bare = names.contains(OsStr::new("HEAD"))
                && (names.contains(OsStr::new("objects"))
                    || names.contains(OsStr::new("refs"))
                    || names.contains(OsStr::new("commondir")));
            if bare {
                self.add_gitdir(&dir, None, left);
                continue;
            }
            stack.extend(subdirs.into_iter().rev());
        }
        true
    }

    fn inside_roots(&self, p: &Path) -> bool {
        self.roots.iter().any(|r| p.starts_with(r))
    }

    fn add_pointer(&mut self, path: &Path, left: &mut usize) {
        let Some(id) = FileId::of(path) else { return };
        let target = pointer_target(path);
        self.pointers
            .insert(path.to_path_buf(), (id, target.clone()));
        if let Some(t) = target {
            if self.inside_roots(&t) && !self.gitdirs.contains_key(&t) {
                self.add_gitdir(&t, None, left);
            }
        }
    }

    fn add_gitdir(&mut self, git: &Path, parent_git: Option<PathBuf>, left: &mut usize) {
        if self.gitdirs.contains_key(git) {
            return;
        }
        let mut st = GitDirState {
            parent_git,
            ..GitDirState::default()
        };
        let hooks = git.join("hooks");
        st.hooks_dir = FileId::of(&hooks);
        read_hooks(&hooks, &mut st, left);
        // The config files, and the files they include (`include.path`, `includeIf.*.path`)
        // when those lie in a writable root: rewriting an included file is rewriting the config.
        let mut pending: Vec<PathBuf> = vec![git.join("config"), git.join("config.worktree")];
        while let Some(p) = pending.pop() {
            if st.configs.contains_key(&p) || st.configs.len() > 16 {
                continue;
            }
            let Some(c) = config_state(&p, config_danger) else {
                continue;
            };
            let base = p.parent().map(Path::to_path_buf).unwrap_or_default();
            for entry in &c.dangerous {
                let Some((key, value)) = entry.split_once('=') else {
                    continue;
                };
                let include = key == "include.path"
                    || (key.starts_with("includeif.") && key.ends_with(".path"));
                if include && !value.starts_with('~') {
                    let target = crate::roots::normalize(&base, Path::new(value));
                    if self.inside_roots(&target) {
                        pending.push(target);
                    }
                }
            }
            st.configs.insert(p, c);
        }
        // `core.hooksPath` naming a directory in a writable root (husky's `.husky/_`): its
        // entries are hooks as well.
        let worktree = if git.file_name() == Some(OsStr::new(".git")) {
            git.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            git.to_path_buf()
        };
        let hook_dirs: Vec<PathBuf> = st
            .configs
            .values()
            .flat_map(|c| c.dangerous.iter())
            .filter_map(|e| e.strip_prefix("core.hookspath="))
            .filter(|v| !v.starts_with('~'))
            .map(|v| crate::roots::normalize(&worktree, Path::new(v)))
            .filter(|d| self.inside_roots(d))
            .collect();
        for d in hook_dirs {
            read_hooks(&d, &mut st, left);
        }
        st.commondir = FileId::of(&git.join("commondir"));
        self.gitdirs.insert(git.to_path_buf(), st);
        // Submodules' git directories (names may hold `/`, so nested), and linked worktrees.
        let mut stack = vec![git.join("modules")];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            let mut is_git = false;
            let mut subs = Vec::new();
            for e in entries.flatten() {
                if *left == 0 {
                    self.incomplete = true;
                    return;
                }
                *left -= 1;
                let n = e.file_name();
                if n == "HEAD" || n == "config" || n == "hooks" {
                    is_git = true;
                }
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    subs.push(e.path());
                }
            }
            if d != git.join("modules") && is_git {
                self.add_gitdir(&d, None, left);
            } else {
                stack.extend(subs);
            }
        }
        if let Ok(entries) = std::fs::read_dir(git.join("worktrees")) {
            for e in entries.flatten() {
                *left = left.saturating_sub(1);
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    self.add_gitdir(&e.path(), Some(git.to_path_buf()), left);
                }
            }
        }
    }

    /// What is new or changed in `after` (taken when nothing of the command was alive) and can
    /// make git run a program.
    pub(crate) fn findings(&self, after: &Snapshot) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        for (git, now) in &after.gitdirs {
            let before = self.gitdirs.get(git);
            if let Some(id) = now.hooks_dir {
                let was = before.and_then(|b| b.hooks_dir);
                let is_link = id.mode & S_IFMT == S_IFLNK;
                if is_link && was != Some(id) {
                    out.push((
                        git.join("hooks"),
                        "a hooks directory that is a symbolic link (git runs what it points \
                         at)"
                        .to_owned(),
                    ));
                }
            }
            for (p, h) in &now.hooks {
                let name = p.file_name().unwrap_or_default().to_string_lossy();
                if name.ends_with(".sample") || name.ends_with(QUARANTINE_SUFFIX) {
                    continue;
                }
                if !before
                    .and_then(|b| b.hooks.get(p))
                    .is_some_and(|old| old.same_as(h))
                {
                    out.push((
                        p.clone(),
                        "a git hook (git runs it on commit, checkout, push, …)".to_owned(),
                    ));
                }
            }
            for (p, c) in &now.configs {
                let old = before.and_then(|b| b.configs.get(p));
                if old.map(|o| o.id) == Some(c.id) {
                    continue;
                }
                let new: Vec<&String> = c
                    .dangerous
                    .iter()
                    .filter(|k| !old.is_some_and(|o| o.dangerous.contains(*k)))
                    .collect();
                if let Some(first) = new.first() {
                    out.push((
                        p.clone(),
                        format!(
                            "git config that makes git run a program ({})",
                            key_of(first)
                        ),
                    ));
                }
            }
            if let Some(id) = now.commondir {
                let changed = before.and_then(|b| b.commondir) != Some(id);
                let path = git.join("commondir");
                // `git worktree add` writes `worktrees/<name>/commondir` naming its own
                // repository: that one is expected.
                let expected = now
                    .parent_git
                    .as_ref()
                    .is_some_and(|parent| commondir_target(git).is_some_and(|t| &t == parent));
                if changed && !expected {
                    out.push((
                        path,
                        "a commondir file (it points git at another directory's config and \
                         hooks)"
                            .to_owned(),
                    ));
                }
            }
        }
        for (p, (id, target)) in &after.pointers {
            let old = self.pointers.get(p);
            if old.map(|o| o.0) == Some(*id) {
                continue;
            }
            let outside = target.as_ref().is_none_or(|t| !after.inside_roots(t));
            if outside {
                out.push((
                    p.clone(),
                    "a .git file or link pointing git at a directory outside the writable \
                     roots (its hooks and config were not checked)"
                        .to_owned(),
                ));
            }
        }
        for (p, c) in &after.gitmodules {
            let old = self.gitmodules.get(p);
            if old.map(|o| o.id) == Some(c.id) {
                continue;
            }
            if let Some(k) = c
                .dangerous
                .iter()
                .find(|k| !old.is_some_and(|o| o.dangerous.contains(*k)))
            {
                out.push((
                    p.clone(),
                    format!(".gitmodules that makes git run a program ({})", key_of(k)),
                ));
            }
        }
        out.sort();
        out.dedup_by(|a, b| a.0 == b.0);
        out
    }
}

/// The entries of a hooks directory (not followed when it is a link).
fn read_hooks(dir: &Path, st: &mut GitDirState, left: &mut usize) {
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        *left = left.saturating_sub(1);
        let p = e.path();
        if let Some(h) = HookState::of(&p) {
            st.hooks.insert(p, h);
        }
    }
}

/// The content of a regular file of at most `max` bytes, opened without following a link and
/// without blocking (a FIFO left behind named `config` must not hang the guard).
fn read_small(p: &Path, max: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(p)
        .ok()?;
    let m = f.metadata().ok()?;
    if !m.is_file() || m.len() > max {
        return None;
    }
    let mut out = Vec::new();
    f.by_ref().take(max).read_to_end(&mut out).ok()?;
    Some(out)
}

fn key_of(entry: &str) -> &str {
    entry.split_once('=').map_or(entry, |(k, _)| k)
}

/// The canonical target a `.git` file (`gitdir: …`) or link names, when it exists.
fn pointer_target(path: &Path) -> Option<PathBuf> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let base = path.parent()?;
    if meta.file_type().is_symlink() {
        return std::fs::canonicalize(path).ok();
    }
    if !meta.is_file() || meta.len() > 4096 {
        return None;
    }
    let text = String::from_utf8(read_small(path, 4096)?).ok()?;
    let line = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    std::fs::canonicalize(base.join(line)).ok()
}

fn commondir_target(git: &Path) -> Option<PathBuf> {
    let p = git.join("commondir");
    if std::fs::symlink_metadata(&p).ok()?.len() > 4096 {
        return None;
    }
    let text = String::from_utf8(read_small(&p, 4096)?).ok()?;
    std::fs::canonicalize(git.join(text.trim_end_matches(['\n', '\r']))).ok()
}

fn config_state(p: &Path, danger: fn(&Entry) -> bool) -> Option<ConfigState> {
    let meta = std::fs::symlink_metadata(p).ok()?;
    let id = FileId::of(p)?;
    let mut dangerous = BTreeSet::new();
    if meta.file_type().is_symlink() {
        // A linked config may change under us without its own inode changing: its every
        // state counts as dangerous.
        dangerous.insert(format!(
            "symbolic link={}",
            std::fs::read_link(p).unwrap_or_default().display()
        ));
    } else if meta.is_file() {
        // Git reads config files whole; so does the guard, up to 4 MiB (larger is suspicious).
        if meta.len() > 4 << 20 {
            dangerous.insert("oversized config=".to_owned());
        } else if let Some(bytes) = read_small(p, 4 << 20) {
            let text = String::from_utf8_lossy(&bytes);
            for e in parse_config(&text) {
                if danger(&e) {
                    dangerous.insert(format!("{}={}", e.key(), e.value));
                }
            }
        }
    }
    Some(ConfigState { id, dangerous })
}

/// One `key = value` of git config text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Lower-cased.
    pub(crate) section: String,
    /// As written (git compares subsections case-sensitively).
    pub(crate) sub: Option<String>,
    /// Lower-cased.
    pub(crate) name: String,
    pub(crate) value: String,
}

impl Entry {
    fn key(&self) -> String {
        match &self.sub {
            Some(s) => format!("{}.{}.{}", self.section, s, self.name),
            None => format!("{}.{}", self.section, self.name),
        }
    }
}

/// Git config syntax, as far as keys go: `[section]`, `[section "sub"]`, the old
/// `[section.sub]`, case-insensitive section and key names, `#`/`;` comments, quoted values,
/// `\` continuation lines, a bare key (a boolean true). Never panics; malformed lines are
/// skipped (git would refuse the file, so they run nothing).
pub(crate) fn parse_config(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut sub: Option<String> = None;
    // git skips a UTF-8 byte-order mark at the start of a config file, and so must we: the
    // header after it is a real one to git.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut rest = line.trim_start();
        // Section headers, possibly followed by a key on the same line.
        while let Some(after) = rest.strip_prefix('[') {
            let Some(close) = find_header_end(after) else {
                rest = "";
                break;
            };
            let header = &after[..close];
            rest = after[close + 1..].trim_start();
            if let Some(q) = header.find('"') {
                section = header[..q].trim().to_ascii_lowercase();
                let inner = header[q + 1..].trim_end();
                let inner = inner.strip_suffix('"').unwrap_or(inner);
                sub = Some(inner.replace("\\\"", "\"").replace("\\\\", "\\"));
            } else if let Some((s, b)) = header.split_once('.') {
                section = s.trim().to_ascii_lowercase();
                sub = Some(b.trim().to_ascii_lowercase());
            } else {
                section = header.trim().to_ascii_lowercase();
                sub = None;
            }
        }
        if rest.is_empty() || rest.starts_with('#') || rest.starts_with(';') {
            continue;
        }
        let (name, raw) = match rest.find('=') {
            Some(i) => (&rest[..i], Some(rest[i + 1..].to_owned())),
            None => (rest, None),
        };
        let name = name.trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            continue;
        }
        let mut value = String::new();
        if let Some(mut raw) = raw {
            loop {
                let (v, continues) = parse_value(&raw);
                value.push_str(&v);
                if !continues {
                    break;
                }
                match lines.next() {
                    Some(next) => raw = next.to_owned(),
                    None => break,
                }
            }
        } else {
            value.push_str("true");
        }
        out.push(Entry {
            section: section.clone(),
            sub: sub.clone(),
            name: name.to_ascii_lowercase(),
            value: value.trim().to_owned(),
        });
    }
    out
}

fn find_header_end(s: &str) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            ']' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

/// One line's value: quotes removed, escapes read, a comment cut; `true` when a `\` at its
/// end continues it on the next line.
fn parse_value(raw: &str) -> (String, bool) {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                None => return (out, true),
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
            },
            '#' | ';' if !quoted => break,
            o => out.push(o),
        }
    }
    (out, false)
}

/// The documented list (module docs) for `config` and `config.worktree`.
pub(crate) fn config_danger(e: &Entry) -> bool {
    let sub = e.sub.is_some();
    let n = e.name.as_str();
    let bang = e.value.trim_start().starts_with('!');
    match e.section.as_str() {
        "core" => matches!(
            n,
            "hookspath"
                | "fsmonitor"
                | "sshcommand"
                | "pager"
                | "editor"
                | "askpass"
                | "gitproxy"
                | "alternaterefscommand"
        ),
        "sequence" => n == "editor",
        "diff" => (!sub && n == "external") || (sub && matches!(n, "textconv" | "command")),
        "difftool" | "mergetool" => n == "cmd",
        "interactive" => n == "difffilter",
        "filter" => sub && matches!(n, "clean" | "smudge" | "process"),
        "merge" => sub && n == "driver",
        "alias" => bang,
        "include" => n == "path",
        "includeif" => n == "path",
        "credential" => n == "helper",
        "gpg" => n == "program" || n == "defaultkeycommand",
        "uploadpack" => n == "packobjectshook",
        "protocol" => n == "allow",
        "remote" => matches!(n, "uploadpack" | "receivepack"),
        "web" => n == "browser",
        "browser" => matches!(n, "cmd" | "path"),
        "pager" => true,
        "man" => matches!(n, "cmd" | "path" | "viewer"),
        "instaweb" => true,
        "sendemail" => n.ends_with("cmd"),
        "trailer" => matches!(n, "command" | "cmd"),
        "submodule" => n == "update" && bang,
        _ => false,
    }
}

/// What in `.gitmodules` can run a program.
pub(crate) fn modules_danger(e: &Entry) -> bool {
    e.section == "submodule"
        && ((e.name == "update" && e.value.trim_start().starts_with('!'))
            || (e.name == "url"
                && e.value
                    .trim_start()
                    .to_ascii_lowercase()
                    .starts_with("ext::")))
}

/// Moves each finding aside: `<name>.agent-exec-quarantined` (a free name), execute bits off,
/// each reached from its root in `roots` without following a link (`gitstage::move_aside`).
pub(crate) fn quarantine(roots: &[PathBuf], findings: Vec<(PathBuf, String)>) -> Vec<Quarantined> {
    findings
        .into_iter()
        .map(|(path, why)| {
            let dest = gitstage::move_aside(roots, &path);
            Quarantined {
                path: path.to_string_lossy().into_owned(),
                moved_to: dest.map(|d| d.to_string_lossy().into_owned()),
                why,
            }
        })
        .collect()
}

/// What the guard did after one run.
#[derive(Debug, Default)]
pub(crate) struct Guarded {
    pub(crate) quarantined: Vec<Quarantined>,
    /// The roots a snapshot's entry budget did not cover to their end (empty: all checked).
    pub(crate) unchecked: Vec<PathBuf>,
    /// What of the git directories' private copies was applied and refused (TRUST-1).
    pub(crate) git: gitstage::Report,
    /// What the command wrote to its private views of the caches (TRUST-3), dropped with the
    /// call's temp dir.
    pub(crate) caches: crate::CacheReport,
}

impl Guarded {
    /// The sentence for the result's `message`, if there is anything to say.
    pub(crate) fn message(&self) -> Option<String> {
        message(&self.quarantined, &self.unchecked)
    }
}

/// After the command's tree has ended: the second snapshot, compared with `before`, and the
/// quarantine of what it found.
pub(crate) fn after_run(before: &Snapshot, roots: &[PathBuf]) -> Guarded {
    let after = Snapshot::take(roots, ENTRY_BUDGET);
    let mut unchecked = before.unchecked.clone();
    unchecked.extend(after.unchecked.iter().cloned());
    unchecked.sort();
    unchecked.dedup();
    Guarded {
        quarantined: quarantine(roots, before.findings(&after)),
        unchecked,
        ..Guarded::default()
    }
}

/// The guard between its two snapshots. [`Pending::finish`] runs the second one; a call
/// dropped before that (its host gave up on it while the command ran) still gets it, when the
/// command's tree has been stopped by the drop of the run, with nobody left to tell.
#[derive(Debug)]
pub(crate) struct Pending {
    before: Option<Snapshot>,
    roots: Vec<PathBuf>,
}

impl Pending {
    pub(crate) fn new(before: Snapshot, roots: Vec<PathBuf>) -> Pending {
        Pending {
            before: Some(before),
            roots,
        }
    }

    /// The second snapshot and the quarantine (blocking: run it off the async threads).
    pub(crate) fn finish(mut self) -> Guarded {
        match self.before.take() {
            Some(before) => after_run(&before, &self.roots),
            None => Guarded::default(),
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(before) = self.before.take() {
            let _ = after_run(&before, &self.roots);
        }
    }
}

/// The message part of the result for `quarantined` (empty when nothing was).
pub(crate) fn message(q: &[Quarantined], unchecked: &[PathBuf]) -> Option<String> {
    let mut parts = Vec::new();
    if !q.is_empty() {
        let list: Vec<String> = q
            .iter()
            .map(|x| match &x.moved_to {
                Some(to) => format!("{} → {} ({})", x.path, to, x.why),
                None => format!("{} (could not be moved; {}: remove it)", x.path, x.why),
            })
            .collect();
        parts.push(format!(
            "the command left git metadata that would make git run a program outside the \
             sandbox; it was quarantined (renamed, never deleted): {}. Agent: never create git \
             hooks, commondir files or program-running git config (core.hooksPath, \
             core.fsmonitor, aliases with !, filters, …). User: inspect the quarantined files; \
             rename one back only if you trust it",
            list.join("; ")
        ));
    }
    if !unchecked.is_empty() {
        let roots: Vec<String> = unchecked.iter().map(|p| p.display().to_string()).collect();
        parts.push(format!(
            "the git guard read only the first {ENTRY_BUDGET} directory entries of the \
             writable roots: git hooks or config left deeper in {} were not checked (do not \
             run git there before looking)",
            roots.join(", ")
        ));
    }
    (!parts.is_empty()).then(|| parts.join(". "))
}

/// Whether `real` (an `rm` target, its parent resolved) is repository metadata or holds some:
/// a `.git` file or directory, anything below a `.git`, `.gitmodules`, or a directory that
/// contains one of them (looked for up to `budget` entries; a directory too large to look
/// through counts as holding one).
pub(crate) fn holds_git_metadata(real: &Path, is_dir: bool, budget: usize) -> Option<String> {
    if real
        .components()
        .any(|c| c.as_os_str() == ".git" || c.as_os_str() == ".gitmodules")
    {
        return Some(format!("{} is repository metadata", real.display()));
    }
    if !is_dir {
        return None;
    }
    let mut left = budget;
    let mut stack = vec![real.to_path_buf()];
    let mut names_seen = BTreeSet::new();
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        names_seen.clear();
        for e in entries.flatten() {
            if left == 0 {
                return Some(format!(
                    "it holds more than {budget} entries, too many to make sure no repository \
                     is among them"
                ));
            }
            left -= 1;
            let n = e.file_name();
            if n == ".git" || n == ".gitmodules" {
                return Some(format!("it holds {}", e.path().display()));
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
            names_seen.insert(n);
        }
        if names_seen.contains(OsStr::new("HEAD"))
            && (names_seen.contains(OsStr::new("objects"))
                || names_seen.contains(OsStr::new("refs")))
        {
            return Some(format!("it holds the bare repository {}", d.display()));
        }
    }
    None
}

/// `rm` (RC-4) of a real path that is or holds repository metadata, a shell startup file of
/// `home` or a host-protected path is refused: the user deletes those themselves (a repository
/// moved to the readable trash could come back with hooks planted).
pub(crate) fn refuse_rm(
    real: &Path,
    is_dir: bool,
    home: &Path,
    protected: &[PathBuf],
) -> Result<(), toolscope::ToolError> {
    let startup = argv_policy::SHELL_STARTUP_FILES
        .iter()
        .map(|f| home.join(f));
    let hit = startup
        .chain(protected.iter().cloned())
        .find(|p| p.starts_with(real))
        .map(|p| format!("{} is protected", p.display()))
        .or_else(|| holds_git_metadata(real, is_dir, RM_SCAN_BUDGET));
    match hit {
        None => Ok(()),
        Some(p) => Err(toolscope::ToolError::new(
            toolscope::ErrorCode::RunCommandRmInvalid,
            format!(
                "rm will not move {} to the trash: {p}. A run_command call never deletes \
                 repository metadata (.git, .gitmodules) or a protected file; remove the other \
                 paths on their own, and let the user delete repository metadata themselves",
                real.display(),
            ),
        )),
    }
}

/// Entries `rm`'s look through a directory reads at most (beyond: refused as if it held a
/// repository).
const RM_SCAN_BUDGET: usize = 100_000;

/// The read-only paths of existing repositories beyond `roots::protected`'s (RCS-3): every
/// git directory of `snapshot` (all depths, `.git` files' targets inside the roots,
/// submodules', linked worktrees'), its `hooks`, `config`, `config.worktree`, `commondir`,
/// `modules` (whole) and `info/attributes` where they exist, the files its config includes
/// that lie in `roots`, each `.git` file and each `.gitmodules`.
pub(crate) fn protected_paths(snapshot: &Snapshot, roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let inside = |p: &Path| roots.iter().any(|r| p.starts_with(r));
    for (git, st) in snapshot.gitdirs.iter().filter(|(g, _)| inside(g)) {
        out.extend(st.configs.keys().filter(|p| inside(p)).cloned());
        // A `core.hooksPath` directory stays writable (husky's install rewrites it): the
        // guard compares its files' content after the run.
        for name in [
            "hooks",
            "config",
            "config.worktree",
            "commondir",
            "modules",
            "info/attributes",
        ] {
            out.push(git.join(name));
        }
    }
    out.extend(snapshot.pointers.keys().filter(|p| inside(p)).cloned());
    out.extend(snapshot.gitmodules.keys().filter(|p| inside(p)).cloned());
    out.retain(|p| std::fs::symlink_metadata(p).is_ok());
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::os::unix::fs::PermissionsExt;

    fn keys(text: &str) -> Vec<String> {
        parse_config(text).iter().map(Entry::key).collect()
    }

    #[test]
    fn a_byte_order_mark_before_the_first_section_is_skipped_as_git_skips_it() {
        assert_eq!(
            keys("\u{feff}[core]\n\tfsmonitor = x\n"),
            ["core.fsmonitor"]
        );
    }

    #[test]
    fn config_sections_subsections_and_continuations_are_read() {
        let t = "[core]\n\tfsMonitor = /x/evil\n[diff \"Foo\"]\n textconv = a \\\n b\n\
                 [Alias]\n st = !sh -c x ; comment\n[includeIf.gitdir:/x]\npath=p\n\
                 [core] hooksPath\n";
        let e = parse_config(t);
        assert_eq!(
            keys(t),
            [
                "core.fsmonitor",
                "diff.Foo.textconv",
                "alias.st",
                "includeif.gitdir:/x.path",
                "core.hookspath"
            ]
        );
        assert_eq!(e[1].value, "a  b");
        assert_eq!(e[2].value, "!sh -c x");
        assert!(e.iter().all(config_danger));
    }

    #[test]
    fn harmless_config_is_not_dangerous() {
        let t = "[core]\n repositoryformatversion = 0\n filemode = true\n bare = false\n\
                 [user]\n name = A\n[alias]\n st = status\n[remote \"origin\"]\n url = x\n";
        assert!(!parse_config(t).iter().any(config_danger));
    }

    proptest! {
        #[test]
        fn any_config_text_parses_without_panicking(s in "\\PC*") {
            let _ = parse_config(&s);
        }

        #[test]
        fn config_made_of_brackets_quotes_and_escapes_never_panics(
            s in "[\\[\\]\"\\\\=#; a-zA-Z.\\n\\t]{0,200}"
        ) {
            for e in parse_config(&s) {
                let _ = config_danger(&e);
                let _ = modules_danger(&e);
            }
        }
    }

    fn git(args: &[&str], dir: &Path) -> bool {
        std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    #[test]
    fn git_init_adds_nothing_to_quarantine_but_planted_hooks_and_config_are() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let before = Snapshot::take(std::slice::from_ref(&root), ENTRY_BUDGET);
        if !git(&["init", "-q", "a/b/c/d"], &root) {
            eprintln!("SKIP: git not available");
            return;
        }
        let after = Snapshot::take(std::slice::from_ref(&root), ENTRY_BUDGET);
        assert!(
            before.findings(&after).is_empty(),
            "{:?}",
            before.findings(&after)
        );
        let g = root.join("a/b/c/d/.git");
        std::fs::write(g.join("hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::write(g.join("commondir"), "../../evil\n").unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(g.join("config"))
            .unwrap();
        let mut c = std::fs::read_to_string(g.join("config")).unwrap();
        c.push_str("[core]\n\tfsmonitor = /tmp/x\n");
        std::fs::write(g.join("config"), c).unwrap();
        std::fs::create_dir_all(g.join("modules/m/hooks")).unwrap();
        std::fs::write(g.join("modules/m/hooks/post-checkout"), "x").unwrap();
        let later = Snapshot::take(std::slice::from_ref(&root), ENTRY_BUDGET);
        let f: Vec<PathBuf> = after.findings(&later).into_iter().map(|x| x.0).collect();
        for p in [
            g.join("hooks/pre-commit"),
            g.join("commondir"),
            g.join("config"),
            g.join("modules/m/hooks/post-checkout"),
        ] {
            assert!(f.contains(&p), "{p:?} not in {f:?}");
        }
        let q = quarantine(std::slice::from_ref(&root), after.findings(&later));
        assert_eq!(q.len(), f.len());
        assert!(!g.join("hooks/pre-commit").exists());
        let moved = g.join("hooks/pre-commit.agent-exec-quarantined");
        assert_eq!(
            std::fs::metadata(&moved).unwrap().permissions().mode() & 0o111,
            0
        );
    }

    #[test]
    fn a_git_file_is_followed_into_the_roots() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let before = Snapshot::take(std::slice::from_ref(&root), ENTRY_BUDGET);
        std::fs::create_dir_all(root.join("evil/hooks")).unwrap();
        std::fs::write(root.join("evil/hooks/pre-commit"), "x").unwrap();
        std::fs::create_dir_all(root.join("w")).unwrap();
        std::fs::write(root.join("w/.git"), "gitdir: ../evil\n").unwrap();
        let after = Snapshot::take(std::slice::from_ref(&root), ENTRY_BUDGET);
        let f: Vec<PathBuf> = before.findings(&after).into_iter().map(|x| x.0).collect();
        assert_eq!(f, [root.join("evil/hooks/pre-commit")]);
        let p = protected_paths(&after, std::slice::from_ref(&root));
        assert!(p.contains(&root.join("w/.git")), "{p:?}");
        assert!(p.contains(&root.join("evil/hooks")), "{p:?}");
    }

    #[test]
    fn a_file_the_config_includes_is_checked_and_protected_too() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(
            root.join(".git/config"),
            "[include]\n path = ../shared.cfg\n",
        )
        .unwrap();
        std::fs::write(root.join("shared.cfg"), "[user]\n name = a\n").unwrap();
        let before = Snapshot::take(std::slice::from_ref(&root), ENTRY_BUDGET);
        let p = protected_paths(&before, std::slice::from_ref(&root));
        assert!(p.contains(&root.join("shared.cfg")), "{p:?}");
        std::fs::write(root.join("shared.cfg"), "[core]\n pager = evil\n").unwrap();
        let after = Snapshot::take(std::slice::from_ref(&root), ENTRY_BUDGET);
        let f: Vec<PathBuf> = before.findings(&after).into_iter().map(|x| x.0).collect();
        assert_eq!(f, [root.join("shared.cfg")]);
    }

    #[test]
    fn a_hooks_path_in_the_worktree_is_watched_and_the_same_content_is_no_change() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(root.join(".husky/_")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n hooksPath = .husky/_\n").unwrap();
        std::fs::write(root.join(".husky/_/pre-commit"), "#!/bin/sh\nlint\n").unwrap();
        let before = Snapshot::take(std::slice::from_ref(&root), ENTRY_BUDGET);
        // Rewritten with the same content (a new inode): no change.
        std::fs::remove_file(root.join(".husky/_/pre-commit")).unwrap();
        std::fs::write(root.join(".husky/_/pre-commit"), "#!/bin/sh\nlint\n").unwrap();
        let same = Snapshot::take(std::slice::from_ref(&root), ENTRY_BUDGET);
        assert!(before.findings(&same).is_empty());
        std::fs::write(root.join(".husky/_/pre-commit"), "#!/bin/sh\nevil\n").unwrap();
        std::fs::write(root.join(".husky/_/pre-push"), "x").unwrap();
        let after = Snapshot::take(std::slice::from_ref(&root), ENTRY_BUDGET);
        let f: Vec<PathBuf> = before.findings(&after).into_iter().map(|x| x.0).collect();
        assert_eq!(
            f,
            [
                root.join(".husky/_/pre-commit"),
                root.join(".husky/_/pre-push")
            ]
        );
    }

    #[test]
    fn a_gitmodules_running_a_program_and_a_bare_repo_hook_are_found() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let before = Snapshot::take(std::slice::from_ref(&root), ENTRY_BUDGET);
        std::fs::write(
            root.join(".gitmodules"),
            "[submodule \"m\"]\n\tpath = m\n\turl = ext::sh -c evil\n",
        )
        .unwrap();
        for d in ["bare.git/objects", "bare.git/refs", "bare.git/hooks"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("bare.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(root.join("bare.git/hooks/post-update"), "x").unwrap();
        let after = Snapshot::take(std::slice::from_ref(&root), ENTRY_BUDGET);
        let f: Vec<PathBuf> = before.findings(&after).into_iter().map(|x| x.0).collect();
        assert_eq!(
            f,
            [
                root.join(".gitmodules"),
                root.join("bare.git/hooks/post-update")
            ]
        );
        let harmless = "[submodule \"m\"]\n\tpath = m\n\turl = https://x/y.git\n";
        assert!(!parse_config(harmless).iter().any(modules_danger));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_fifo_named_like_git_metadata_does_not_hang_the_guard() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        for name in [
            ".git/config",
            ".git/commondir",
            ".git/hooks/pre-commit",
            ".gitmodules",
        ] {
            rustix::fs::mkfifoat(rustix::fs::CWD, root.join(name), 0o600.into()).unwrap();
        }
        std::fs::create_dir_all(root.join("w")).unwrap();
        rustix::fs::mkfifoat(rustix::fs::CWD, root.join("w/.git"), 0o600.into()).unwrap();
        let s = Snapshot::take(std::slice::from_ref(&root), ENTRY_BUDGET);
        let f = Snapshot::default().findings(&s);
        assert!(
            f.iter().any(|x| x.0 == root.join(".git/hooks/pre-commit")),
            "{f:?}"
        );
    }

    #[test]
    fn a_budget_that_runs_out_is_reported() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        for i in 0..10 {
            std::fs::write(root.join(format!("f{i}")), "").unwrap();
        }
        let s = Snapshot::take(std::slice::from_ref(&root), 5);
        assert!(s.incomplete);
        assert_eq!(s.unchecked, std::slice::from_ref(&root));
        assert!(message(&[], &s.unchecked).unwrap().contains("500000"));
        assert!(!Snapshot::take(&[root], 100).incomplete);
    }

    #[test]
    fn rm_targets_holding_repository_metadata_are_found() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("p/q/.git/hooks")).unwrap();
        std::fs::write(root.join("notes"), "").unwrap();
        assert!(holds_git_metadata(&root.join("p"), true, 1000).is_some());
        assert!(holds_git_metadata(&root.join("p/q/.git/hooks"), true, 1000).is_some());
        assert!(holds_git_metadata(&root.join("x/.gitmodules"), false, 1000).is_some());
        assert!(holds_git_metadata(&root.join("notes"), false, 1000).is_none());
        std::fs::create_dir_all(root.join("plain/d")).unwrap();
        assert!(holds_git_metadata(&root.join("plain"), true, 1000).is_none());
    }
}
