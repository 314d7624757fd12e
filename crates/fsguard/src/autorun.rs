//! Auto-run configuration: the names host programs obey without the user choosing to run
//! anything (TRUST-2), and the pieces of a git directory in a work tree (TRUST-1).
//!
//! The user runs a project's `Makefile` or `build.rs` by choice. These files are different: an
//! editor, an agent host, a git hook manager or a package manager reads them and runs what they
//! name as soon as someone opens the folder, types `git status` or `yarn`. A tool that lets an
//! agent change them lets the agent run code on the host later. [`AutoRun`] is the one list of
//! such names; [`AutoRun::classify`] says whether a path is one, and why.
//!
//! What this module owns: the default list ([`AutoRun::DEFAULTS`], the table below), how a
//! name matches (below), and the git-directory shape. What it refuses to know: who asks, what
//! a caller does with a protected path (refuse it, ask the user, report it), and confirmations.
//! It opens nothing: the caller lists the directory when the git rule needs it, so the decision
//! is a pure function of the path and that listing.
//!
//! # How a name matches
//!
//! Every name is compared folded, as the file systems that hosts share a workspace with compare
//! names: ASCII letters in any case (and the KELVIN SIGN and LONG S that APFS folds to `k` and
//! `s`), the zero-width code points HFS+ ignores removed, trailing dots and spaces dropped
//! (NTFS). So `.Claude`, `.claude.` and `.MCP.JSON` match too.
//!
//! - A **directory** entry matches at any position in the path: everything beneath it is
//!   protected, and so is the name itself.
//! - A **file** entry matches the end of the path. It may have several components
//!   (`.cargo/config.toml`); then the last components must match them all.
//! - A **git metadata** entry matches the last component when the directory it goes into holds,
//!   counting the new name, `HEAD` and one of `objects`, `refs`, `config` or `commondir`: that
//!   directory is, or would become, a git directory (a bare repository, a worktree's or a
//!   submodule's git dir), whose `config` git obeys (`core.fsmonitor` runs on `git status`).
//!   Whichever file comes second, `HEAD` or `config`, is refused. `.git` itself never gets
//!   here: [`RelPath`] refuses it in any letter case.
//!
//! # The default list
//!
//! | kind | names | who obeys it |
//! |---|---|---|
//! | directory | `.claude` | Claude Code: hooks, MCP servers, settings |
//! | directory | `.cursor` | Cursor: hooks, MCP servers, rules |
//! | directory | `.vscode` | VS Code: tasks run on folder open, launch configurations |
//! | directory | `.idea` | JetBrains IDEs: run configurations, startup tasks |
//! | directory | `.codex` | Codex: configuration, MCP servers |
//! | directory | `.gemini` | Gemini CLI: settings, hooks, MCP servers |
//! | directory | `.agents` | agent hosts: shared skills and configuration |
//! | directory | `.husky` | husky: git hooks |
//! | directory | `.zed` | Zed: tasks and language servers |
//! | directory | `.devcontainer` | dev containers: lifecycle commands run on build and open |
//! | directory | `.opencode` | opencode: agents, commands, plugins |
//! | directory | `.continue`, `.amazonq`, `.kiro`, `.roo` | agent hosts: MCP servers, hooks |
//! | directory | `.mise` | mise: hooks and tasks run on entering the directory |
//! | directory | `.yarn/releases`, `.yarn/plugins` | Yarn: the `yarnPath` and plugins it runs |
//! | file | `.mcp.json` | agent hosts: MCP servers they start |
//! | file | `.yarnrc.yml`, `.yarnrc` | Yarn: `yarnPath`, the program every yarn command runs |
//! | file | `.npmrc` | npm: `script-shell`, `node-options`, registries |
//! | file | `.ripgreprc` | ripgrep: `--pre`, a program run on every file searched |
//! | file | `.envrc` | direnv: a shell script run on entering the directory |
//! | file | `.pre-commit-config.yaml` | pre-commit: git hooks |
//! | file | `lefthook.yml`, `.lefthook.yml`, `lefthook-local.yml` | Lefthook: git hooks |
//! | file | `lefthook.yaml`, `.lefthook.yaml`, `lefthook-local.yaml` | Lefthook: git hooks |
//! | file | `.gitmodules` | git: submodule urls and paths that clones check out |
//! | file | `.cargo/config.toml`, `.cargo/config` | Cargo: `rustc-wrapper`, runners, aliases |
//! | file | `rust-toolchain.toml`, `rust-toolchain` | rustup: a toolchain `path` every cargo runs |
//! | file | `opencode.json`, `opencode.jsonc` | opencode: MCP servers and commands |
//! | file | `.devcontainer.json` | dev containers: lifecycle commands run on build and open |
//! | file | `mise.toml`, `.mise.toml`, `mise.local.toml`, `.mise.local.toml`, `.config/mise.toml` | mise: hooks and tasks run on entering the directory |
//! | file | `.jj/repo/config.toml` | Jujutsu: diff, merge and fsmonitor programs |
//! | file | `.hg/hgrc` | Mercurial: hooks run on every hg command |
//! | git metadata | `HEAD`, `config`, `commondir`, `gitdir`, `config.worktree` | git |
//!
//! A host adds its own entries with [`Extend`]:
//!
//! ```
//! use fsguard::{AutoRun, AutoRunEntry, RelPath};
//!
//! let mut list = AutoRun::default();
//! list.extend([AutoRunEntry::dir(".fleet", "Fleet: run configurations")]);
//! let none: &[&str] = &[];
//!
//! let hit = list.classify(&RelPath::new(".fleet/run.json").unwrap(), none).unwrap();
//! assert_eq!(hit.path(), std::path::Path::new(".fleet"));
//! assert_eq!(hit.entry().why(), "Fleet: run configurations");
//!
//! let cargo = RelPath::new("tools/.Cargo/config.toml").unwrap();
//! assert!(list.classify(&cargo, none).is_some());
//! assert!(list.classify(&RelPath::new("config/app.yml").unwrap(), none).is_none());
//!
//! // A bare repository assembled file by file: `config` beside `HEAD` is refused.
//! let hit = list.classify(&RelPath::new("evil/config").unwrap(), &["HEAD", "objects"]).unwrap();
//! assert!(hit.to_string().contains("git repository"), "{hit}");
//! ```

use std::borrow::Cow;
use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::RelPath;
use crate::relpath::fold_name;

/// How an [`AutoRunEntry`] matches a path (module docs, "How a name matches").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AutoRunKind {
    /// A directory: protected at any position in the path, with everything beneath it.
    Dir,
    /// A file: the last component or components of the path.
    File,
    /// A file of a git directory: the last component, when its directory holds or would hold
    /// a git directory's shape.
    GitMetadata,
}

/// One name of the list and the program that obeys it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AutoRunEntry {
    kind: AutoRunKind,
    name: Cow<'static, str>,
    why: Cow<'static, str>,
}

impl AutoRunEntry {
    /// A directory entry; `why` says who obeys it, in a few words ("VS Code: tasks run on
    /// folder open").
    pub const fn dir(name: &'static str, why: &'static str) -> AutoRunEntry {
        AutoRunEntry::fixed(AutoRunKind::Dir, name, why)
    }

    /// A file entry; `name` may hold `/` (`.cargo/config.toml`).
    pub const fn file(name: &'static str, why: &'static str) -> AutoRunEntry {
        AutoRunEntry::fixed(AutoRunKind::File, name, why)
    }

    /// A git-metadata entry (a file name of a git directory, such as `config`).
    pub const fn git_metadata(name: &'static str, why: &'static str) -> AutoRunEntry {
        AutoRunEntry::fixed(AutoRunKind::GitMetadata, name, why)
    }

    const fn fixed(kind: AutoRunKind, name: &'static str, why: &'static str) -> AutoRunEntry {
        AutoRunEntry {
            kind,
            name: Cow::Borrowed(name),
            why: Cow::Borrowed(why),
        }
    }

    /// An entry from names known only at run time (a host's configuration). A name with no
    /// component (empty, or only `/`) matches nothing.
    pub fn new(
        kind: AutoRunKind,
        name: impl Into<Cow<'static, str>>,
        why: impl Into<Cow<'static, str>>,
    ) -> AutoRunEntry {
        AutoRunEntry {
            kind,
            name: name.into(),
            why: why.into(),
        }
    }

    /// How it matches.
    pub fn kind(&self) -> AutoRunKind {
        self.kind
    }

    /// The name as listed.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Who obeys it, in a few words.
    pub fn why(&self) -> &str {
        &self.why
    }

    /// The entry's components, folded; empty components dropped.
    fn folded(&self) -> Vec<Vec<u8>> {
        self.name
            .split('/')
            .filter(|c| !c.is_empty())
            .map(|c| fold_name(c.as_bytes()))
            .collect()
    }
}

/// A path [`AutoRun::classify`] found protected: the part of it that matched and the entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protected {
    path: PathBuf,
    entry: AutoRunEntry,
}

impl Protected {
    /// The part of the classified path the entry matched: `.claude` for
    /// `.claude/settings.json`, `sub/.cargo/config.toml`, or `evil/HEAD`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entry that matched.
    pub fn entry(&self) -> &AutoRunEntry {
        &self.entry
    }
}

impl fmt::Display for Protected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        let why = self.entry.why();
        match self.entry.kind {
            AutoRunKind::Dir | AutoRunKind::File => {
                write!(f, "`{path}` is configuration that runs programs ({why})")
            }
            AutoRunKind::GitMetadata => {
                write!(f, "`{path}` would make or change a git repository ({why})")
            }
        }
    }
}

/// The names, folded, that make a directory holding `HEAD` a git directory (git's
/// `is_git_directory`: `HEAD` with `objects` and `refs`, or with a `commondir` naming them;
/// `config` is counted too, since it is what runs programs).
const GIT_DIR_COMPANIONS: [&[u8]; 4] = [b"objects", b"refs", b"config", b"commondir"];

/// The auto-run list: [`AutoRun::DEFAULTS`], plus what a host adds with [`Extend`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoRun {
    entries: Vec<AutoRunEntry>,
}

impl Default for AutoRun {
    fn default() -> AutoRun {
        AutoRun {
            entries: AutoRun::DEFAULTS.to_vec(),
        }
    }
}

impl Extend<AutoRunEntry> for AutoRun {
    fn extend<I: IntoIterator<Item = AutoRunEntry>>(&mut self, entries: I) {
        self.entries.extend(entries);
    }
}

impl AutoRun {
    /// The default list (the table of the module docs).
    pub const DEFAULTS: &'static [AutoRunEntry] = &[
        AutoRunEntry::dir(
            ".claude",
            "Claude Code runs the hooks and MCP servers it names",
        ),
        AutoRunEntry::dir(".cursor", "Cursor runs the hooks and MCP servers it names"),
        AutoRunEntry::dir(".vscode", "VS Code runs its tasks when the folder opens"),
        AutoRunEntry::dir(".idea", "JetBrains IDEs run its startup tasks"),
        AutoRunEntry::dir(".codex", "Codex runs the MCP servers it names"),
        AutoRunEntry::dir(
            ".gemini",
            "Gemini CLI runs the hooks and MCP servers it names",
        ),
        AutoRunEntry::dir(".agents", "agent hosts load its skills and configuration"),
        AutoRunEntry::dir(".husky", "husky's git hooks run on every commit"),
        AutoRunEntry::dir(".zed", "Zed runs its tasks and language servers"),
        AutoRunEntry::dir(
            ".devcontainer",
            "dev containers run its lifecycle commands when built or opened",
        ),
        AutoRunEntry::dir(
            ".opencode",
            "opencode loads the agents, commands and plugins here",
        ),
        AutoRunEntry::dir(
            ".continue",
            "Continue starts the MCP servers its config names",
        ),
        AutoRunEntry::dir(".amazonq", "Amazon Q starts the MCP servers it names"),
        AutoRunEntry::dir(".kiro", "Kiro runs its hooks and MCP servers"),
        AutoRunEntry::dir(".roo", "Roo Code starts the MCP servers it names"),
        AutoRunEntry::dir(".mise", "mise runs its hooks on entering the directory"),
        AutoRunEntry::dir(
            ".yarn/releases",
            "every yarn command runs the yarnPath kept here",
        ),
        AutoRunEntry::dir(
            ".yarn/plugins",
            "every yarn command loads the plugins kept here",
        ),
        AutoRunEntry::file(".mcp.json", "agent hosts start the MCP servers it names"),
        AutoRunEntry::file(".yarnrc.yml", "every yarn command runs its yarnPath"),
        AutoRunEntry::file(".yarnrc", "every yarn command runs its yarn-path"),
        AutoRunEntry::file(".npmrc", "npm takes its script shell and node options"),
        AutoRunEntry::file(".ripgreprc", "ripgrep runs its --pre program on every file"),
        AutoRunEntry::file(".envrc", "direnv runs it on entering the directory"),
        AutoRunEntry::file(
            ".pre-commit-config.yaml",
            "pre-commit runs its hooks on every commit",
        ),
        AutoRunEntry::file("lefthook.yml", "Lefthook runs its hooks on every commit"),
        AutoRunEntry::file("lefthook.yaml", "Lefthook runs its hooks on every commit"),
        AutoRunEntry::file(".lefthook.yml", "Lefthook runs its hooks on every commit"),
        AutoRunEntry::file(".lefthook.yaml", "Lefthook runs its hooks on every commit"),
        AutoRunEntry::file(
            "lefthook-local.yml",
            "Lefthook runs its hooks on every commit",
        ),
        AutoRunEntry::file(
            "lefthook-local.yaml",
            "Lefthook runs its hooks on every commit",
        ),
        AutoRunEntry::file(
            ".gitmodules",
            "git clones and checks out the submodules it names",
        ),
        AutoRunEntry::file(
            ".cargo/config.toml",
            "every cargo command obeys its rustc-wrapper",
        ),
        AutoRunEntry::file(
            ".cargo/config",
            "every cargo command obeys its rustc-wrapper",
        ),
        AutoRunEntry::file(
            "rust-toolchain.toml",
            "rustup runs the toolchain it names for every cargo and rustc",
        ),
        AutoRunEntry::file(
            "rust-toolchain",
            "rustup runs the toolchain it names for every cargo and rustc",
        ),
        AutoRunEntry::file("opencode.json", "opencode starts the MCP servers it names"),
        AutoRunEntry::file("opencode.jsonc", "opencode starts the MCP servers it names"),
        AutoRunEntry::file(
            ".devcontainer.json",
            "dev containers run its lifecycle commands when built or opened",
        ),
        AutoRunEntry::file(
            "mise.local.toml",
            "mise runs its hooks on entering the directory",
        ),
        AutoRunEntry::file(
            ".mise.local.toml",
            "mise runs its hooks on entering the directory",
        ),
        AutoRunEntry::file(
            ".config/mise.toml",
            "mise runs its hooks on entering the directory",
        ),
        AutoRunEntry::file(
            ".jj/repo/config.toml",
            "Jujutsu runs the programs its config names (diff and merge tools, fsmonitor)",
        ),
        AutoRunEntry::file("mise.toml", "mise runs its hooks on entering the directory"),
        AutoRunEntry::file(
            ".mise.toml",
            "mise runs its hooks on entering the directory",
        ),
        AutoRunEntry::file(".hg/hgrc", "Mercurial runs its hooks on every hg command"),
        AutoRunEntry::git_metadata("HEAD", "git obeys a repository's metadata"),
        AutoRunEntry::git_metadata("config", "git runs its core.fsmonitor on git status"),
        AutoRunEntry::git_metadata("commondir", "git obeys a repository's metadata"),
        AutoRunEntry::git_metadata("gitdir", "git obeys a repository's metadata"),
        AutoRunEntry::git_metadata(
            "config.worktree",
            "git runs its core.fsmonitor on git status",
        ),
    ];

    /// The entries, the defaults first.
    pub fn entries(&self) -> &[AutoRunEntry] {
        &self.entries
    }

    /// Whether writing `path` would change auto-run configuration, and which entry says so.
    ///
    /// `siblings` are the names in `path`'s directory as it is now (empty when it does not
    /// exist yet); only git-metadata entries look at them. The first entry that matches, in
    /// list order, is returned.
    pub fn classify<S: AsRef<OsStr>>(&self, path: &RelPath, siblings: &[S]) -> Option<Protected> {
        let comps: Vec<Vec<u8>> = path.components().map(|c| fold_name(c.as_bytes())).collect();
        let last = comps.last()?;
        // Computed once, on the first git-metadata entry whose name is the last component.
        let mut git_shape: Option<bool> = None;
        for entry in &self.entries {
            let want = entry.folded();
            if want.is_empty() || want.len() > comps.len() {
                continue;
            }
            let end = match entry.kind {
                AutoRunKind::Dir => comps
                    .windows(want.len())
                    .position(|w| w == want.as_slice())
                    .map(|at| at + want.len()),
                AutoRunKind::File => comps.ends_with(&want).then_some(comps.len()),
                AutoRunKind::GitMetadata => {
                    let named = want.len() == 1 && want[0] == *last;
                    let shaped = named
                        && *git_shape.get_or_insert_with(|| holds_git_dir_shape(last, siblings));
                    shaped.then_some(comps.len())
                }
            };
            if let Some(end) = end {
                return Some(Protected {
                    path: path.components().take(end).collect(),
                    entry: entry.clone(),
                });
            }
        }
        None
    }
}

/// [`AutoRun::classify`] for a walk over a whole tree (TRUST-2 in a sandboxed command's
/// writable roots: what exists is kept read-only, what is new is moved aside): most entries of
/// a tree end in a name no entry of the list ends in, so that is checked first, folded the same
/// way, and only the rest is classified in full. Git-metadata entries never match here (a walk
/// passes no siblings; a git directory is the walker's own business).
#[derive(Clone, Debug)]
pub struct AutoRunWalker {
    list: AutoRun,
    last: std::collections::HashSet<Vec<u8>>,
}

impl AutoRunWalker {
    /// A walker over `list`.
    pub fn new(list: AutoRun) -> AutoRunWalker {
        let last = list
            .entries
            .iter()
            .filter(|e| e.kind != AutoRunKind::GitMetadata)
            .filter_map(|e| e.folded().pop())
            .collect();
        AutoRunWalker { list, last }
    }

    /// Whether the entry `name` of `parent` (relative to the walked root, empty for the root;
    /// its own ancestors were not matched) is auto-run configuration.
    pub fn matches(&self, parent: &Path, name: &OsStr) -> bool {
        let bytes = name.as_bytes();
        // Most names are plain ASCII without a trailing dot or space: their folded form is
        // their lower-case form, compared without allocating.
        let plain = bytes.is_ascii() && !matches!(bytes.last(), Some(b'.' | b' '));
        let candidate = if plain {
            self.last.iter().any(|l| l.eq_ignore_ascii_case(bytes))
        } else {
            self.last.contains(&fold_name(bytes))
        };
        if !candidate {
            return false;
        }
        let rel = parent.join(name);
        RelPath::new(&rel).is_ok_and(|rel| self.list.classify(&rel, &[] as &[&str]).is_some())
    }
}

/// [`AutoRunWalker::matches`] over the default list, made once per process: the classifier a
/// sandboxed tool hands its walk of the writable roots.
pub fn matches_default(parent: &Path, name: &OsStr) -> bool {
    static DEFAULT: std::sync::LazyLock<AutoRunWalker> =
        std::sync::LazyLock::new(|| AutoRunWalker::new(AutoRun::default()));
    DEFAULT.matches(parent, name)
}

/// True when a directory holding `siblings` and `added` (folded) holds `HEAD` and one of
/// [`GIT_DIR_COMPANIONS`].
fn holds_git_dir_shape<S: AsRef<OsStr>>(added: &[u8], siblings: &[S]) -> bool {
    let mut names: Vec<Vec<u8>> = siblings
        .iter()
        .map(|s| fold_name(s.as_ref().as_bytes()))
        .collect();
    names.push(added.to_vec());
    let has = |want: &[u8]| names.iter().any(|n| n.as_slice() == want);
    has(b"head") && GIT_DIR_COMPANIONS.iter().any(|c| has(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walker_matches_what_classify_matches_and_nothing_else() {
        let walker = AutoRunWalker::new(AutoRun::default());
        for hit in [
            ".claude",
            "sub/.vscode",
            ".MCP.json",
            "a/b/.envrc",
            "x/.cargo/config.toml",
            "lefthook.yml",
            ".clau\u{200c}de",
        ] {
            let hit = Path::new(hit);
            let (parent, name) = (hit.parent().unwrap(), hit.file_name().unwrap());
            assert!(walker.matches(parent, name), "{hit:?}");
        }
        for miss in [
            "src/main.rs",
            "config",
            "x/config.toml",
            "HEAD",
            "notes/.claude.md",
        ] {
            let miss = Path::new(miss);
            let (parent, name) = (miss.parent().unwrap(), miss.file_name().unwrap());
            assert!(!walker.matches(parent, name), "{miss:?}");
        }
    }
    use proptest::prelude::*;

    /// `path` classified with `siblings`: `None`, or the matched part and the entry's name.
    fn check(path: &str, siblings: &[&str], expect: Option<(&str, &str)>) {
        let list = AutoRun::default();
        let got = list.classify(&RelPath::new(path).unwrap(), siblings);
        let got = got.as_ref().map(|p| {
            (
                p.path().to_str().unwrap().to_owned(),
                p.entry().name().to_owned(),
            )
        });
        let expect = expect.map(|(p, n)| (p.to_owned(), n.to_owned()));
        assert_eq!(got, expect, "path {path:?}, siblings {siblings:?}");
    }

    #[test]
    fn agent_host_directories_are_protected_at_any_depth_in_any_case() {
        check(".claude/settings.json", &[], Some((".claude", ".claude")));
        check(
            "a/b/.VSCode/tasks.json",
            &[],
            Some(("a/b/.VSCode", ".vscode")),
        );
        check(".husky/pre-commit", &[], Some((".husky", ".husky")));
        check(
            ".opencode/agent/x.md",
            &[],
            Some((".opencode", ".opencode")),
        );
        check("sub/.kiro/hooks/h", &[], Some(("sub/.kiro", ".kiro")));
        check(
            ".devcontainer.json",
            &[],
            Some((".devcontainer.json", ".devcontainer.json")),
        );
        check(
            ".jj/repo/config.toml",
            &[],
            Some((".jj/repo/config.toml", ".jj/repo/config.toml")),
        );
        check(
            ".config/mise.toml",
            &[],
            Some((".config/mise.toml", ".config/mise.toml")),
        );
        check(".cursor", &[], Some((".cursor", ".cursor")));
        check(".idea/x/y/z.xml", &[], Some((".idea", ".idea")));
        check(".claude./hooks.json", &[], Some((".claude.", ".claude")));
        check(
            ".c\u{200c}laude/x",
            &[],
            Some((".c\u{200c}laude", ".claude")),
        );
        check(
            ".hu\u{17f}\u{212a}y/pre-commit",
            &[],
            Some((".hu\u{17f}\u{212a}y", ".husky")),
        );
    }

    #[test]
    fn tool_redirection_files_are_protected_as_the_last_component() {
        check(".mcp.json", &[], Some((".mcp.json", ".mcp.json")));
        check(
            "web/app/.Yarnrc.yml",
            &[],
            Some(("web/app/.Yarnrc.yml", ".yarnrc.yml")),
        );
        check("x/.envrc", &[], Some(("x/.envrc", ".envrc")));
        check("LEFTHOOK.YML", &[], Some(("LEFTHOOK.YML", "lefthook.yml")));
        check(".gitmodules", &[], Some((".gitmodules", ".gitmodules")));
        // A directory of such a name is nobody's configuration.
        check(".npmrc/notes.txt", &[], None);
        check(".envrc.example", &[], None);
    }

    #[test]
    fn cargo_config_matches_only_beneath_a_cargo_directory() {
        check(
            ".cargo/config.toml",
            &[],
            Some((".cargo/config.toml", ".cargo/config.toml")),
        );
        check(
            "a/.CARGO/Config",
            &[],
            Some(("a/.CARGO/Config", ".cargo/config")),
        );
        check("config.toml", &[], None);
        check("cargo/config.toml", &[], None);
        check(".cargo/registry/config.toml", &[], None);
        check(".cargo/credentials.toml", &[], None);
    }

    #[test]
    fn git_metadata_is_protected_only_in_a_git_directory_shape() {
        // HEAD first, then config: config is refused.
        check("evil/config", &["HEAD"], Some(("evil/config", "config")));
        // config first, then HEAD: HEAD is refused.
        check("evil/HEAD", &["config"], Some(("evil/HEAD", "HEAD")));
        check(
            "evil/head",
            &["objects", "refs"],
            Some(("evil/head", "HEAD")),
        );
        check(
            "wt/commondir",
            &["HEAD"],
            Some(("wt/commondir", "commondir")),
        );
        check(
            "wt/gitdir",
            &["HEAD", "commondir"],
            Some(("wt/gitdir", "gitdir")),
        );
        check("config", &["HEAD", "refs"], Some(("config", "config")));
        // Either piece alone, or beside ordinary files, is an ordinary file.
        check("evil/HEAD", &[], None);
        check("evil/config", &[], None);
        check("evil/HEAD", &["HEAD"], None);
        check("app/config", &["main.py", "objects.py"], None);
        check("notes/head", &["tail", "README.md"], None);
        check("evil/objects/ab/cd", &["HEAD", "config"], None);
    }

    #[test]
    fn an_entry_with_no_component_matches_nothing() {
        let mut list = AutoRun::default();
        list.extend([
            AutoRunEntry::new(AutoRunKind::Dir, "", "nothing"),
            AutoRunEntry::new(AutoRunKind::File, "//", "nothing"),
        ]);
        let none: &[&str] = &[];
        assert_eq!(list.classify(&RelPath::new("a/b").unwrap(), none), None);
        assert_eq!(list.classify(&RelPath::root(), none), None);
    }

    #[test]
    fn a_host_entry_is_matched_like_a_default_one() {
        let mut list = AutoRun::default();
        list.extend([AutoRunEntry::new(
            AutoRunKind::File,
            String::from("deno.json"),
            String::from("Deno: tasks"),
        )]);
        let hit = list
            .classify(&RelPath::new("app/Deno.json").unwrap(), &[] as &[&str])
            .unwrap();
        assert_eq!(hit.path(), Path::new("app/Deno.json"));
        assert_eq!(hit.entry().why(), "Deno: tasks");
        assert_eq!(
            hit.to_string(),
            "`app/Deno.json` is configuration that runs programs (Deno: tasks)"
        );
    }

    #[test]
    fn the_module_docs_table_lists_every_default_entry() {
        let table: Vec<&str> = include_str!("autorun.rs")
            .lines()
            .filter(|l| l.starts_with("//! | "))
            .collect();
        for entry in AutoRun::DEFAULTS {
            let name = format!("`{}`", entry.name());
            assert!(
                table.iter().any(|row| row.contains(&name)),
                "{name} is missing from the table of the module docs"
            );
        }
    }

    #[test]
    fn every_default_entry_says_why() {
        for entry in AutoRun::DEFAULTS {
            assert!(!entry.why().is_empty(), "{entry:?}");
            assert!(!entry.folded().is_empty(), "{entry:?}");
        }
    }

    /// Ordinary project paths: none of them is anyone's auto-run configuration.
    const ORDINARY: &[&str] = &[
        "src/main.rs",
        "config/app.yml",
        "README.md",
        "package.json",
        "Makefile",
        "docs/config",
        "notes/head",
        ".github/workflows/ci.yml",
        ".gitignore",
        "Cargo.toml",
        "tests/fixtures/.env",
    ];

    fn flip_case(s: &str, mask: u64) -> String {
        s.chars()
            .enumerate()
            .map(|(i, c)| {
                if mask >> (i % 64) & 1 == 1 {
                    c.to_ascii_uppercase()
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect()
    }

    proptest! {
        /// No change of ASCII letter case, anywhere in the path, escapes a match.
        #[test]
        fn case_changes_never_escape_a_match(
            index in 0..AutoRun::DEFAULTS.len(),
            prefix in "([a-z]{1,8}/){0,3}",
            mask in any::<u64>(),
        ) {
            let entry = &AutoRun::DEFAULTS[index];
            let (path, siblings): (String, &[&str]) = match entry.kind() {
                AutoRunKind::Dir => (format!("{prefix}{}/x.json", entry.name()), &[]),
                AutoRunKind::File => (format!("{prefix}{}", entry.name()), &[]),
                _ => (format!("{prefix}{}", entry.name()), &["HEAD", "config"]),
            };
            let path = RelPath::new(flip_case(&path, mask)).unwrap();
            let siblings: Vec<String> =
                siblings.iter().map(|s| flip_case(s, mask.rotate_left(7))).collect();
            let hit = AutoRun::default().classify(&path, &siblings);
            prop_assert!(hit.is_some(), "{path:?} escaped");
        }

        /// Ordinary paths stay ordinary in any case, at any depth, beside ordinary files.
        #[test]
        fn ordinary_project_paths_are_never_classified(
            index in 0..ORDINARY.len(),
            prefix in "([a-z]{1,8}/){0,3}",
            mask in any::<u64>(),
        ) {
            let path = RelPath::new(flip_case(&format!("{prefix}{}", ORDINARY[index]), mask))
                .unwrap();
            let siblings = ["main.rs", "lib.rs", "mod.rs", "tail"];
            prop_assert_eq!(AutoRun::default().classify(&path, &siblings), None);
        }

        /// Any input at all: classify answers, never panics.
        #[test]
        fn classify_never_panics(
            path in "[a-zA-Z./ \u{200c}\u{212a}]{1,40}",
            siblings in prop::collection::vec("[a-zA-Z.]{0,8}", 0..6),
        ) {
            if let Ok(path) = RelPath::new(&path) {
                let _ = AutoRun::default().classify(&path, &siblings);
            }
        }
    }
}
