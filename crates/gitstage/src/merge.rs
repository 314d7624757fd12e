//! Applying a git directory's private copy (the overlay's upper directory) to the real one,
//! after the command's whole tree has ended: each entry classified by [`crate::allow`],
//! state installed by write-and-rename beneath the git directory's descriptor (no symbolic
//! link followed), deletions (overlayfs whiteouts) applied, `config` key by key through the
//! system's git on a private copy written back under git's own lock (`config.lock`), and
//! everything else refused and reported. Every read and write of the real directory goes
//! through the descriptor the stage opened, never its path. A top-level file, loose ref or
//! reflog the host changed during the call (its git ran meanwhile) is a conflict: the host's
//! stays.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};

use crate::allow::{self, PathKind};
use crate::beneath;
use crate::config::{Git, Locked};
use crate::{Applied, Baseline, Refused, Report};

/// The most bytes of one config file read for the comparison.
const CONFIG_MAX: u64 = 1 << 20;

/// The suffix of the temporary file a state file is written to before it is renamed into
/// place, beside it in the git directory.
const TEMP_SUFFIX: &str = ".agent-exec-merge";

/// One staged git directory to apply.
pub(crate) struct Merge<'a> {
    /// The real git directory's path, as the report names it.
    pub(crate) real: &'a Path,
    /// The real git directory as the stage found it: everything read and written beneath it.
    pub(crate) dir: &'a crate::PinnedDir,
    pub(crate) upper: &'a Path,
    pub(crate) baseline: &'a Baseline,
    pub(crate) git: Option<&'a Git>,
    /// A private directory for temporary files (the baseline config, listed by git).
    pub(crate) scratch: &'a Path,
    /// The call's writable roots and the git directories staged in them: a local repository a
    /// remote may name must be one of these, or lie outside every root.
    pub(crate) roots: &'a [PathBuf],
    pub(crate) staged: &'a [PathBuf],
    pub(crate) report: &'a mut Report,
}

impl Merge<'_> {
    pub(crate) fn run(mut self) {
        let real = match self.dir.0.try_clone() {
            Ok(fd) => fd,
            Err(e) => {
                self.refuse(
                    self.real.to_owned(),
                    String::new(),
                    format!("cannot open it: {e}"),
                );
                return;
            }
        };
        self.walk(&real, "");
    }

    fn refuse(&mut self, path: PathBuf, what: String, why: String) {
        self.report.refused.push(Refused {
            path: path.display().to_string(),
            what,
            why,
        });
    }

    /// Applies the upper directory's `rel` (a directory of the copy) onto `real_dir`, the real
    /// directory of the same name (opened beneath the git directory).
    fn walk(&mut self, real_dir: &OwnedFd, rel: &str) {
        let upper_dir = self.upper.join(rel);
        let Ok(entries) = std::fs::read_dir(&upper_dir) else {
            return;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        // Refs before the names that point at them (`HEAD` last).
        entries.sort_by_key(|e| e.file_name() == "HEAD");
        for entry in entries {
            let name = entry.file_name();
            let Some(name) = name.to_str().map(str::to_owned) else {
                self.refuse(
                    self.real.join(rel).join(entry.file_name()),
                    String::new(),
                    "a name git does not write".to_owned(),
                );
                continue;
            };
            let child_rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            let kind = meta.file_type();
            let whiteout = kind.is_char_device() && meta.rdev() == 0;
            let class = allow::classify(&child_rel, kind.is_dir());
            if whiteout {
                self.delete(real_dir, &name, &child_rel, &class);
            } else if kind.is_dir() {
                self.dir(real_dir, &name, &child_rel, &class, &entry.path());
            } else if kind.is_file() {
                self.file(real_dir, &name, &child_rel, &class, &entry.path());
            } else {
                self.refuse(
                    self.real.join(&child_rel),
                    String::new(),
                    "a link or special file; git writes none".to_owned(),
                );
            }
        }
    }

    fn dir(&mut self, real_dir: &OwnedFd, name: &str, rel: &str, class: &PathKind, upper: &Path) {
        if let PathKind::Refused(why) = class {
            self.refuse_tree(rel, upper, why);
            return;
        }
        let _ = rustix::fs::mkdirat(real_dir, name, Mode::from_raw_mode(0o755));
        let child = match open_dir(Some(real_dir), Path::new(name)) {
            Ok(fd) => fd,
            Err(e) => {
                self.refuse(
                    self.real.join(rel),
                    String::new(),
                    format!("cannot open it: {e}"),
                );
                return;
            }
        };
        // A directory removed and made again: what the copy does not hold is gone.
        if opaque(upper) {
            self.clear_missing(&child, rel, upper);
        }
        self.walk(&child, rel);
    }

    /// A refused directory of the copy: each file in it that is not the real one's and not an
    /// inert hook template is reported (nothing is applied).
    fn refuse_tree(&mut self, rel: &str, upper: &Path, why: &str) {
        let mut stack = vec![(upper.to_owned(), rel.to_owned())];
        while let Some((dir, rel)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let child = format!("{rel}/{}", e.file_name().to_string_lossy());
                match e.file_type() {
                    Ok(t) if t.is_dir() => stack.push((e.path(), child)),
                    _ if inert_sample(&child) || self.same_file(&child, &e.path()) => {}
                    _ => self.refuse(self.real.join(&child), String::new(), why.to_owned()),
                }
            }
        }
    }

    fn clear_missing(&mut self, real_dir: &OwnedFd, rel: &str, upper: &Path) {
        for (name, kind) in beneath::entries(real_dir.as_fd()) {
            let Ok(name) = String::from_utf8(name) else {
                continue;
            };
            if upper.join(&name).symlink_metadata().is_ok() {
                continue;
            }
            let name = name.as_str();
            let child_rel = format!("{rel}/{name}");
            let is_dir = kind == Some(rustix::fs::FileType::Directory);
            let class = allow::classify(&child_rel, is_dir);
            self.delete(real_dir, name, &child_rel, &class);
        }
    }

    fn delete(&mut self, real_dir: &OwnedFd, name: &str, rel: &str, class: &PathKind) {
        match class {
            // A lock may be the host's own git at work: never removed from here.
            PathKind::Lock => return,
            PathKind::State | PathKind::Todo | PathKind::Strategy => {}
            // A removed worktree's metadata (`git worktree remove`, `prune`).
            PathKind::Dir if rel.starts_with("worktrees/") => {}
            // A submodule's whole git directory (its unpushed objects): the user removes it.
            PathKind::Dir => {
                self.refuse(
                    self.real.join(rel),
                    "removed".to_owned(),
                    "a git directory of its own; remove it by hand".to_owned(),
                );
                return;
            }
            PathKind::Refused(why) => {
                self.refuse(self.real.join(rel), "removed".to_owned(), (*why).to_owned());
                return;
            }
            PathKind::Config | PathKind::WorktreeCommondir | PathKind::WorktreeGitdir => {
                self.refuse(
                    self.real.join(rel),
                    "removed".to_owned(),
                    "git reads it; remove it by hand".to_owned(),
                );
                return;
            }
        }
        if self.conflicts(rel) {
            return;
        }
        let path = self.real.join(rel);
        // A git directory's own state directory (`rebase-merge`) is shallow.
        let removed =
            beneath::remove_tree(real_dir.as_fd(), name.as_ref(), 16).map_err(|e| e.to_string());
        match removed {
            Ok(()) => self.applied(rel, "removed".to_owned()),
            Err(e) => self.refuse(
                path,
                "removed".to_owned(),
                format!("could not remove it: {e}"),
            ),
        }
    }

    fn file(&mut self, real_dir: &OwnedFd, name: &str, rel: &str, class: &PathKind, upper: &Path) {
        match class {
            PathKind::Lock => {}
            PathKind::State => self.install(real_dir, name, rel, upper),
            PathKind::WorktreeCommondir => {
                let content = read_small(upper).unwrap_or_default();
                if allow::worktree_commondir_allowed(&content) {
                    self.install(real_dir, name, rel, upper);
                } else if !self.same_file(rel, upper) {
                    self.refuse(
                        self.real.join(rel),
                        String::from_utf8_lossy(&content).trim().to_owned(),
                        "a worktree's commondir must name this repository (../..)".to_owned(),
                    );
                }
            }
            PathKind::WorktreeGitdir => {
                let content = read_small(upper).unwrap_or_default();
                let text = String::from_utf8_lossy(&content);
                let named = Path::new(text.trim_end_matches(['\n', '\r']));
                // `git worktree repair` writes a `.git` file where this points: only a `.git`
                // inside the roots, named absolutely and plainly.
                let plain = named.is_absolute()
                    && named.file_name().is_some_and(|n| n == ".git")
                    && named.components().all(|c| {
                        matches!(
                            c,
                            std::path::Component::RootDir | std::path::Component::Normal(_)
                        )
                    });
                let inside = plain && {
                    let resolved = resolve_as_far_as_it_exists(named);
                    self.roots.iter().any(|r| resolved.starts_with(r))
                };
                if inside {
                    self.install(real_dir, name, rel, upper);
                } else if !self.same_file(rel, upper) {
                    self.refuse(
                        self.real.join(rel),
                        text.trim().escape_debug().to_string(),
                        "a worktree's gitdir must name a .git inside the workspace (git worktree \
                         repair writes there)"
                            .to_owned(),
                    );
                }
            }
            PathKind::Config => self.config(real_dir, rel, upper),
            PathKind::Strategy => {
                let bounded = read_bounded(upper);
                let content = bounded.clone().unwrap_or_default();
                let allowed = match (name, self.git) {
                    // Config syntax (a key may share its section's line): read by git itself.
                    ("opts", Some(git)) => git.list(upper).is_ok_and(|list| {
                        list.iter().all(|(k, v)| {
                            k != "options.strategy"
                                || allow::strategy_allowed(
                                    "strategy",
                                    v.as_deref().unwrap_or("").as_bytes(),
                                )
                        })
                    }),
                    ("opts", None) => false,
                    _ => bounded.is_some_and(|c| allow::strategy_allowed(name, &c)),
                };
                if allowed {
                    self.install(real_dir, name, rel, upper);
                } else if !self.same_file(rel, upper) {
                    self.refuse(
                        self.real.join(rel),
                        String::from_utf8_lossy(&content)
                            .trim()
                            .escape_debug()
                            .to_string(),
                        "a merge strategy that is not one of git's own: git would run it"
                            .to_owned(),
                    );
                }
            }
            PathKind::Todo => {
                // A list too long to read whole is refused: what is not read is not checked.
                let content = read_bounded(upper);
                if content
                    .as_deref()
                    .is_some_and(|c| !allow::todo_runs_a_command(c))
                {
                    self.install(real_dir, name, rel, upper);
                } else if !self.same_file(rel, upper) {
                    self.refuse(
                        self.real.join(rel),
                        String::new(),
                        "an exec step runs a command when the user continues".to_owned(),
                    );
                }
            }
            PathKind::Dir => {}
            // git runs a hook by its exact name; its templates' `*.sample` files never run.
            PathKind::Refused(_) if inert_sample(rel) => {}
            PathKind::Refused(why) => {
                if !self.same_file(rel, upper) {
                    self.refuse(self.real.join(rel), String::new(), (*why).to_owned());
                }
            }
        }
    }

    /// Whether the copy's file holds what the real one holds (copied up, not changed).
    fn same_file(&self, rel: &str, upper: &Path) -> bool {
        let real = beneath::read(self.dir.0.as_fd(), Path::new(rel), CONFIG_MAX * 64);
        match (read_small(upper), real) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        }
    }

    /// A file the host changed while the command ran (a top-level file, a loose ref or a
    /// reflog; one absent at the start must still be absent): the host's stays.
    fn conflicts(&mut self, rel: &str) -> bool {
        let tracked = !rel.contains('/') || rel.starts_with("refs/") || rel.starts_with("logs/");
        if !tracked {
            return false;
        }
        let at_start = self.baseline.files.get(rel).copied().flatten();
        if at_start.is_none() && self.baseline.refs_incomplete && rel.contains('/') {
            return false;
        }
        let now = crate::FileStamp::at(self.dir.0.as_fd(), Path::new(rel));
        if at_start == now {
            return false;
        }
        self.report
            .conflicts
            .push(self.real.join(rel).display().to_string());
        true
    }

    fn install(&mut self, real_dir: &OwnedFd, name: &str, rel: &str, upper: &Path) {
        if self.same_file(rel, upper) {
            return;
        }
        // An index (wherever it lies): every path it names must be one git may check out.
        if let Some(why) = refused_index(upper) {
            self.refuse(self.real.join(rel), String::new(), why);
            return;
        }
        if self.conflicts(rel) {
            return;
        }
        match copy_into(real_dir, name, upper) {
            Ok(()) => self.applied(rel, "written".to_owned()),
            Err(e) => self.refuse(
                self.real.join(rel),
                String::new(),
                format!("could not write it: {e}"),
            ),
        }
    }

    fn applied(&mut self, rel: &str, change: String) {
        self.report.applied.push(Applied {
            path: self.real.join(rel).display().to_string(),
            change,
        });
    }

    /// `config`: each key whose values the command changed, applied when allowed, refused
    /// (named with its values) otherwise; keys the host changed meanwhile keep the host's.
    fn config(&mut self, real_dir: &OwnedFd, rel: &str, upper: &Path) {
        let real = self.real.join(rel);
        let Some(git) = self.git else {
            if !self.same_file(rel, upper) {
                self.refuse(
                    real,
                    String::new(),
                    "no system git to apply config changes with".to_owned(),
                );
            }
            return;
        };
        let before = match self.baseline.configs.get(rel) {
            Some(Some(text)) => match list_text(git, text, self.scratch) {
                Ok(list) => list,
                Err(e) => {
                    self.refuse(real, String::new(), e);
                    return;
                }
            },
            // No config at the start (a new submodule's): every key is a change.
            _ => Vec::new(),
        };
        let after = match git.list(upper) {
            Ok(list) => list,
            Err(e) => {
                self.refuse(real, String::new(), e);
                return;
            }
        };
        // A submodule's git directory: how far below the superproject's work tree it lies
        // (`.git/modules/sub/config` → 3), which bounds its `core.worktree`.
        let module = rel
            .starts_with("modules/")
            .then(|| 1 + rel.split('/').count().saturating_sub(1));
        let changed = changed_keys(&before, &after);
        if changed.is_empty() {
            return;
        }
        // Changed the way git changes it, beneath the descriptor the stage found.
        let edit = match Locked::take(real_dir.as_fd(), self.scratch) {
            Ok(edit) => edit,
            Err(e) => {
                self.refuse(real, String::new(), format!("not changed: {e}"));
                return;
            }
        };
        let now = git.list(edit.copy()).unwrap_or_default();
        // Where a confirmed change is written later: this directory, not its path.
        let pinned = real_dir
            .try_clone()
            .ok()
            .map(|fd| crate::PinnedDir(std::sync::Arc::new(fd)));
        let mut applied = Vec::new();
        for (key, values) in changed {
            let shown = show_values(&key, &values);
            let plain: Vec<String> = values
                .iter()
                .map(|v| v.clone().unwrap_or_default())
                .collect();
            // A submodule's work tree, followed through every link, must lie in this
            // repository's work tree (a link there could lead git's checkout anywhere).
            let worktree_escapes = key == "core.worktree"
                && plain.iter().any(|v| {
                    let config_dir = real.parent().unwrap_or(self.real);
                    let work_tree = self.real.parent().unwrap_or(self.real);
                    !resolves_inside(&config_dir.join(v), work_tree)
                });
            let was: Vec<Option<String>> = values_of(&before, &key);
            let config_existed = matches!(self.baseline.configs.get(rel), Some(Some(_)));
            let value_refused = worktree_escapes
                || (config_existed && allow::repository_format_key(&key))
                || self.repoints_a_remote(&key, &was)
                || self.names_a_repository_the_command_could_have_made(&key, &plain, &after);
            if value_refused || !allow::key_allowed(&key, &plain, module) {
                if let Some(dir) = &pinned {
                    self.report.refused_keys.push(crate::KeyChange {
                        config: real.clone(),
                        dir: dir.clone(),
                        key: key.clone(),
                        values: values.clone(),
                        shown: shown.clone(),
                    });
                }
                self.refuse(
                    real.clone(),
                    shown,
                    "git runs programs or reads paths this key names; only the user sets it"
                        .to_owned(),
                );
                continue;
            }
            let is: Vec<Option<String>> = values_of(&now, &key);
            if was != is {
                self.report
                    .conflicts
                    .push(format!("{} ({key})", real.display()));
                continue;
            }
            match git.replace(edit.copy(), &key, &values) {
                Ok(()) => applied.push(shown),
                Err(e) => self.refuse(real.clone(), shown, format!("git could not set it: {e}")),
            }
        }
        if applied.is_empty() {
            return;
        }
        match edit.commit() {
            Ok(()) => {
                for shown in applied {
                    self.applied(rel, shown);
                }
            }
            Err(e) => {
                for shown in applied {
                    self.refuse(real.clone(), shown, format!("could not write it: {e}"));
                }
            }
        }
    }
}

/// Why the file at `path` may not be applied when it is a git index (`DIRC`) naming a path
/// git must never check out (`.git/config`), or one git could not read.
fn refused_index(path: &Path) -> Option<String> {
    let mut file = beneath::open_regular(path)?;
    let mut magic = [0u8; 4];
    if file.read_exact(&mut magic).is_err() || &magic != b"DIRC" {
        return None;
    }
    let mut bytes = magic.to_vec();
    if file.read_to_end(&mut bytes).is_err() {
        return Some("an index that could not be read".to_owned());
    }
    match crate::index::check(&bytes) {
        Ok(()) => None,
        Err(crate::index::IndexError::Malformed) => {
            Some("an index git could not read either".to_owned())
        }
        Err(crate::index::IndexError::Path(p)) => Some(format!(
            "the index names {}, a path git never checks out (inside a git directory, or \
             outside the work tree); `git checkout` would write it",
            p.escape_debug()
        )),
    }
}

/// Whether `path`, every link on the way followed, lies inside `root`: its longest existing
/// ancestor is resolved (what does not exist yet can hold no link).
fn resolves_inside(path: &Path, root: &Path) -> bool {
    let Ok(root) = root.canonicalize() else {
        return false;
    };
    let mut rest = Vec::new();
    let mut at = path.to_path_buf();
    loop {
        if let Ok(real) = at.canonicalize() {
            let mut full = real;
            for part in rest.iter().rev() {
                full.push(part);
            }
            // What is left may not climb out either.
            let climbs = rest.iter().any(|p: &std::ffi::OsString| p == "..");
            return !climbs && full.starts_with(&root);
        }
        let Some(name) = at.file_name().map(std::ffi::OsStr::to_os_string) else {
            return false;
        };
        rest.push(name);
        if !at.pop() {
            return false;
        }
    }
}

/// A hook template git copies into every new repository (`hooks/pre-commit.sample`).
fn inert_sample(rel: &str) -> bool {
    rel.ends_with(".sample") && rel.split('/').rev().nth(1) == Some("hooks")
}

impl Merge<'_> {
    /// An existing remote's URL changed: every later push and fetch would go elsewhere (a new
    /// remote, `git remote add`, is not this).
    fn repoints_a_remote(&self, key: &str, was: &[Option<String>]) -> bool {
        key.starts_with("remote.") && key.ends_with(".url") && !was.is_empty()
    }

    /// A remote, a branch's remote or a submodule URL that names a repository on this machine
    /// in any way but the one the check can follow exactly: git appends `.git` and `/.git` to a
    /// path as written, expands `~`, decodes `%` escapes in `file://` URLs and resolves a
    /// relative path against whatever directory it runs in, and `git push` runs the target's
    /// hooks. So a local path is allowed only when it is absolute and plain (no `~`, `%`, `.`,
    /// `..` or empty component) and names, exactly, a git directory staged for this call (whose
    /// hooks the command could not change) or a place outside every root (the user's own). A
    /// branch's remote may be `.` or the exact name of a remote that has a URL.
    fn names_a_repository_the_command_could_have_made(
        &self,
        key: &str,
        values: &[String],
        after: &[(String, Option<String>)],
    ) -> bool {
        let branch_remote = key.starts_with("branch.")
            && (key.ends_with(".remote") || key.ends_with(".pushremote"));
        let url =
            (key.starts_with("remote.") || key.starts_with("submodule.")) && key.ends_with(".url");
        if !branch_remote && !url {
            return false;
        }
        values.iter().any(|v| {
            if branch_remote {
                let named_url = format!("remote.{v}.url");
                if v == "." || after.iter().any(|(k, _)| *k == named_url) {
                    return false;
                }
            }
            let Some(path) = allow::local_path(v) else {
                return false;
            };
            !self.plain_path_to_a_known_repository(v, path)
        })
    }

    /// Whether the local path `path` (of the value `written`) is absolute and plain, and names
    /// exactly a staged git directory or a place outside every root.
    fn plain_path_to_a_known_repository(&self, written: &str, path: &str) -> bool {
        use std::path::Component;
        let p = Path::new(path);
        let plain = !written.starts_with("file:")
            && p.is_absolute()
            && !path.contains(['~', '%'])
            && !path.contains("//")
            && p.components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        if !plain {
            return false;
        }
        let inside = |q: &Path| {
            let resolved = resolve_as_far_as_it_exists(q);
            self.roots.iter().any(|r| resolved.starts_with(r))
        };
        // git tries `<path>/.git`, `<path>`, `<path>.git/.git` and `<path>.git`.
        let suffixed = PathBuf::from(format!("{path}.git"));
        if !inside(p) {
            return !inside(&suffixed);
        }
        let resolved = resolve_as_far_as_it_exists(p);
        self.staged.contains(&resolved)
    }
}

/// `path` with its longest existing ancestor resolved by the kernel and the rest appended,
/// `.` dropped and `..` taken lexically.
fn resolve_as_far_as_it_exists(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path.to_path_buf();
    let mut base = loop {
        if let Ok(real) = at.canonicalize() {
            break real;
        }
        match at.file_name() {
            Some(name) => rest.push(name.to_os_string()),
            None => {
                // Ends in `..` or `.`: keep it for the lexical pass below.
                if let Some(last) = at.components().next_back() {
                    rest.push(last.as_os_str().to_os_string());
                }
            }
        }
        if !at.pop() {
            break PathBuf::from("/");
        }
    };
    for part in rest.iter().rev() {
        if part == ".." {
            base.pop();
        } else if part != "." {
            base.push(part);
        }
    }
    base
}

/// The keys whose ordered values differ, with the new values (empty: removed).
fn changed_keys(
    before: &[(String, Option<String>)],
    after: &[(String, Option<String>)],
) -> Vec<(String, Vec<Option<String>>)> {
    let mut keys: Vec<&String> = before.iter().chain(after).map(|(k, _)| k).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| {
            let b = values_of(before, k);
            let a = values_of(after, k);
            (a != b).then(|| (k.clone(), a))
        })
        .collect()
}

fn values_of(list: &[(String, Option<String>)], key: &str) -> Vec<Option<String>> {
    list.iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .collect()
}

fn show_values(key: &str, values: &[Option<String>]) -> String {
    if values.is_empty() {
        return format!("{key} (removed)");
    }
    let shown: Vec<String> = values
        .iter()
        .map(|v| v.as_deref().unwrap_or("true").escape_debug().to_string())
        .collect();
    format!("{key}={}", shown.join(", "))
}

/// Lists a config held in memory (the baseline) through a file in `scratch`.
fn list_text(
    git: &Git,
    text: &[u8],
    scratch: &Path,
) -> Result<Vec<(String, Option<String>)>, String> {
    let file = scratch.join("baseline-config");
    std::fs::write(&file, text).map_err(|e| format!("cannot write a temporary file: {e}"))?;
    let listed = git.list(&file);
    let _ = std::fs::remove_file(&file);
    listed
}

/// overlayfs marks a directory that replaced a removed one as opaque.
fn opaque(dir: &Path) -> bool {
    let mut buf = [0u8; 2];
    ["user.overlay.opaque", "trusted.overlay.opaque"]
        .iter()
        .any(|name| matches!(rustix::fs::lgetxattr(dir, *name, &mut buf), Ok(1) if buf[0] == b'y'))
}

/// The whole of a file a check reads, or `None` past [`CONFIG_MAX`] (never a prefix).
fn read_bounded(path: &Path) -> Option<Vec<u8>> {
    let len = path.symlink_metadata().ok()?.len();
    if len > CONFIG_MAX {
        return None;
    }
    let bytes = beneath::read_path(path, CONFIG_MAX + 1)?;
    (bytes.len() as u64 <= CONFIG_MAX).then_some(bytes)
}

fn read_small(path: &Path) -> Option<Vec<u8>> {
    beneath::read_path(path, CONFIG_MAX * 64)
}

/// `path` opened as a directory beneath `at` (or absolute), following no symbolic link.
fn open_dir(at: Option<&OwnedFd>, path: &Path) -> rustix::io::Result<OwnedFd> {
    let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY;
    match at {
        Some(dir) => rustix::fs::openat(dir, path, flags, Mode::empty()),
        None => rustix::fs::open(path, flags, Mode::empty()),
    }
}

/// Writes `from`'s content to `name` in `dir`: a temporary name beside it, then a rename over
/// it. Mode 0644 (state is never executable).
fn copy_into(dir: &OwnedFd, name: &str, from: &Path) -> std::io::Result<()> {
    let temp = format!("{name}{TEMP_SUFFIX}");
    let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
    let fd = rustix::fs::openat(
        dir,
        temp.as_str(),
        OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::from_raw_mode(0o644),
    )?;
    let mut out = File::from(fd);
    let copied = File::open(from).and_then(|mut src| std::io::copy(&mut src, &mut out));
    let synced = copied.and_then(|_| out.sync_data());
    if let Err(e) = synced {
        let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
        return Err(e);
    }
    rustix::fs::renameat(dir, temp.as_str(), dir.as_fd(), name).map_err(|e| {
        let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
        std::io::Error::from(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_keys_compare_ordered_values() {
        let e = |k: &str, v: &str| (k.to_owned(), Some(v.to_owned()));
        let before = vec![e("core.bare", "false"), e("remote.o.fetch", "a")];
        let after = vec![
            e("core.bare", "false"),
            e("remote.o.fetch", "a"),
            e("remote.o.fetch", "b"),
            e("core.fsmonitor", "x"),
        ];
        let changed = changed_keys(&before, &after);
        assert_eq!(
            changed,
            vec![
                ("core.fsmonitor".to_owned(), vec![Some("x".to_owned())]),
                (
                    "remote.o.fetch".to_owned(),
                    vec![Some("a".to_owned()), Some("b".to_owned())]
                ),
            ]
        );
        assert_eq!(
            changed_keys(&after, &before)[0].1,
            Vec::<Option<String>>::new()
        );
    }
}
