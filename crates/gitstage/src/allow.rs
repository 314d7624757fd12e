//! What of a git directory's private copy may be applied: names (relative to the git
//! directory) and config keys with their values. Pure functions; the whole policy is in this
//! file, documented in the crate docs' tables.
//!
//! **Owns:** the state a git operation writes and git only reads as data (refs, logs, the
//! index, `HEAD` and the operation files, objects), the config keys git itself writes for
//! ordinary work (identity, upstreams, remotes, submodules, what `init` and `clone` set), and
//! the URL forms a remote may have. **Refuses to know:** files, processes, the overlay.
//!
//! Everything else is refused: `hooks/`, `config.worktree`, `commondir` (but a new worktree's
//! `../..`), `info/attributes`, `branches/`, `remotes/`, symbolic links, and any config key not
//! listed (`core.fsmonitor`, `core.hooksPath`, `core.pager`, `core.sshCommand`,
//! `url.*.insteadOf`, `filter.*`, `diff.*.textconv`, `credential.*`, `alias.*`, `include*`,
//! `remote.*.pushurl`/`push`/`mirror` …). A remote's fetch refspec must land beneath
//! `refs/remotes/` or `refs/tags/`. Module `merge` adds what needs the repository to judge: an
//! existing remote's URL never changes, a local path a remote names must be a repository that
//! was staged or lies outside the roots (push runs its hooks), and an existing repository's
//! format (`core.repositoryformatversion`, `core.bare`, `extensions.*`) never changes.

/// Names directly in a git directory that git writes and reads as data only.
const STATE_FILES: &[&str] = &[
    "HEAD",
    "ORIG_HEAD",
    "FETCH_HEAD",
    "MERGE_HEAD",
    "MERGE_MSG",
    "MERGE_MODE",
    "MERGE_RR",
    "MERGE_AUTOSTASH",
    "AUTO_MERGE",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "REBASE_HEAD",
    "BISECT_LOG",
    "BISECT_START",
    "BISECT_TERMS",
    "BISECT_EXPECTED_REV",
    "BISECT_ANCESTORS_OK",
    "BISECT_NAMES",
    "BISECT_RUN",
    "BISECT_FIRST_PARENT",
    "BISECT_HEAD",
    "COMMIT_EDITMSG",
    "TAG_EDITMSG",
    "SQUASH_MSG",
    "NOTES_EDITMSG",
    "NOTES_MERGE_PARTIAL",
    "NOTES_MERGE_REF",
    "EDIT_DESCRIPTION",
    "index",
    "packed-refs",
    "shallow",
    "description",
    "gc.pid",
    "gc.log",
    "info/exclude",
    "info/refs",
    "info/sparse-checkout",
];

/// Directories directly in a git directory whose whole content is data to git.
const STATE_DIRS: &[&str] = &[
    "refs",
    "logs",
    "objects",
    "rebase-merge",
    "rebase-apply",
    "sequencer",
    "rr-cache",
    "lost-found",
    "reftable",
];

/// What one path inside a git directory's private copy is, for applying it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PathKind {
    /// Data git reads as data: applied as it is.
    State,
    /// A git directory's `config`: applied key by key ([`key_allowed`]).
    Config,
    /// A new worktree's `commondir`: applied only when it names the main git directory.
    WorktreeCommondir,
    /// A worktree's `gitdir` (where its `.git` file is): applied only when it names a `.git`
    /// inside the call's roots (`git worktree repair` writes there).
    WorktreeGitdir,
    /// A directory on the way to state (`modules/x`, `worktrees/y`, `refs/heads`).
    Dir,
    /// A lock file of an interrupted git: neither applied nor reported.
    Lock,
    /// A rebase's or a sequencer's list of steps: applied unless a step runs a command.
    Todo,
    /// A rebase's merge strategy or a sequencer's options: applied when every strategy named is
    /// one of git's own (git runs `git-merge-<strategy>`, a path if it holds `/`).
    Strategy,
    /// Anything else: refused, with why.
    Refused(&'static str),
}

/// The kind of `rel` (components separated by `/`, relative to a git directory).
pub(crate) fn classify(rel: &str, is_dir: bool) -> PathKind {
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    classify_parts(&parts, is_dir)
}

fn classify_parts(parts: &[&str], is_dir: bool) -> PathKind {
    let Some((&first, rest)) = parts.split_first() else {
        return PathKind::Dir;
    };
    if !is_dir && first.ends_with(".lock") && rest.is_empty() {
        return PathKind::Lock;
    }
    // A submodule's git directory lies somewhere beneath `modules/`: its name may hold `/`,
    // and a name such as `x/refs/y` makes every split of a path look like another git
    // directory's state. So no split is trusted; each name git obeys is decided by itself,
    // wherever it lies beneath `modules/`.
    if first == "modules" {
        return beneath_modules(rest, is_dir);
    }
    if first == "worktrees" {
        return match rest {
            [] => PathKind::Dir,
            [_name] if is_dir => PathKind::Dir,
            [_name, "commondir"] => PathKind::WorktreeCommondir,
            [_name, "gitdir"] => PathKind::WorktreeGitdir,
            [_name, "locked"] => PathKind::State,
            [_name, "config" | "config.worktree", ..] => {
                PathKind::Refused("a worktree's own config is read by git; change it by hand")
            }
            [_name, inner @ ..] => match classify_parts(inner, is_dir) {
                PathKind::Config => {
                    PathKind::Refused("a worktree's own config is read by git; change it by hand")
                }
                other => other,
            },
        };
    }
    if rest.is_empty() && first == "config" && !is_dir {
        return PathKind::Config;
    }
    let joined = parts.join("/");
    if !is_dir && STATE_FILES.contains(&joined.as_str()) {
        return PathKind::State;
    }
    if !is_dir && rest.is_empty() && first.starts_with("sharedindex.") {
        return PathKind::State;
    }
    if is_todo(parts) && !is_dir {
        return PathKind::Todo;
    }
    if is_strategy(parts) && !is_dir {
        return PathKind::Strategy;
    }
    if STATE_DIRS.contains(&first) {
        return PathKind::State;
    }
    if is_dir && first == "info" && rest.is_empty() {
        return PathKind::Dir;
    }
    PathKind::Refused(refusal(first))
}

/// Beneath `modules/`: refused where any component is `hooks`, or the name is `commondir`,
/// `config.worktree` or `info/attributes`; a `config` key by key; a list of steps by its
/// content; everything else is a submodule's data.
fn beneath_modules(rest: &[&str], is_dir: bool) -> PathKind {
    if rest.contains(&"hooks") {
        return PathKind::Refused("git runs hooks");
    }
    if is_dir {
        return PathKind::Dir;
    }
    match rest {
        [] => PathKind::Dir,
        [.., "commondir"] => PathKind::Refused(refusal("commondir")),
        [.., "config.worktree"] => PathKind::Refused(refusal("config.worktree")),
        [.., "info", "attributes"] => PathKind::Refused(refusal("info")),
        [.., "config"] => PathKind::Config,
        [.., last] if last.ends_with(".lock") => PathKind::Lock,
        _ if is_todo(rest) => PathKind::Todo,
        _ if is_strategy(rest) => PathKind::Strategy,
        // Legacy remote definitions (`remotes/<name>`, `branches/<name>`), not refs.
        [.., before, "remotes" | "branches", _] if *before != "refs" => {
            PathKind::Refused(refusal("remotes"))
        }
        ["remotes" | "branches", _] => PathKind::Refused(refusal("remotes")),
        _ => PathKind::State,
    }
}

/// A rebase's or a sequencer's list of steps, whose `exec` steps run commands when the user
/// continues.
fn is_todo(parts: &[&str]) -> bool {
    match parts {
        [.., last] if last.starts_with("git-rebase-todo") => true,
        [.., "sequencer", "todo"] => true,
        _ => false,
    }
}

/// A rebase's strategy files or a sequencer's options file.
fn is_strategy(parts: &[&str]) -> bool {
    matches!(
        parts,
        [
            ..,
            "rebase-merge" | "rebase-apply",
            "strategy" | "strategy_opts"
        ] | [.., "sequencer", "opts"]
    )
}

/// git's own merge strategies: the only names a staged strategy may hold.
const STRATEGIES: &[&str] = &["ort", "recursive", "resolve", "octopus", "ours", "subtree"];

/// Whether a strategy file names only git's own strategies: `strategy` holds one name,
/// `strategy_opts` options passed to it (`--ours`, `-X…`: no program), `sequencer/opts` config
/// lines whose `strategy` values are checked.
pub(crate) fn strategy_allowed(file: &str, content: &[u8]) -> bool {
    let text = String::from_utf8_lossy(content);
    if file == "strategy_opts" {
        return !text.contains('/');
    }
    if file == "strategy" {
        return STRATEGIES.contains(&text.trim());
    }
    // `sequencer/opts`: `strategy = NAME` lines, in any section.
    text.lines().all(|line| {
        let line = line.trim();
        match line.split_once('=') {
            Some((key, value)) if key.trim().eq_ignore_ascii_case("strategy") => {
                STRATEGIES.contains(&value.trim().trim_matches('"'))
            }
            _ => true,
        }
    })
}

/// Whether a list of steps runs a command (`exec`/`x`, or a `--exec` option of a step).
pub(crate) fn todo_runs_a_command(content: &[u8]) -> bool {
    String::from_utf8_lossy(content).lines().any(|line| {
        let line = line.trim_start();
        let word = line.split_whitespace().next().unwrap_or("");
        !line.starts_with('#') && (matches!(word, "exec" | "x") || line.contains("--exec"))
    })
}

/// Why a name that is not state is refused, in a few words.
fn refusal(first: &str) -> &'static str {
    match first {
        "hooks" => "git runs hooks",
        "commondir" => "it points git at another repository's config",
        "config.worktree" => "git reads it as config",
        "info" => "git reads it (attributes select filters that run programs)",
        "branches" | "remotes" => "git reads it to find remotes",
        _ => "git may read it; not a name git writes for ordinary work",
    }
}

/// Whether a new worktree's `commondir` names the main git directory (`../..`, as
/// `git worktree add` writes it).
pub(crate) fn worktree_commondir_allowed(content: &[u8]) -> bool {
    matches!(content.strip_suffix(b"\n").unwrap_or(content), b"../..")
}

/// Whether `key` (as `git config --list` prints it: section and variable lower-case, the
/// subsection as written) may be set to `values`. `in_module` is a submodule's git directory,
/// where `git submodule` writes `core.worktree`.
pub(crate) fn key_allowed(key: &str, values: &[String], module: Option<usize>) -> bool {
    let (section, rest) = key.split_once('.').unwrap_or((key, ""));
    let (sub, var) = match rest.rsplit_once('.') {
        Some((sub, var)) => (Some(sub), var),
        None => (None, rest),
    };
    match (section, sub, var) {
        ("user", None, "name" | "email") => true,
        // A remote may be named by its URL here.
        ("branch", Some(_), "remote" | "pushremote") => values.iter().all(|v| url_allowed(v)),
        ("branch", Some(_), "merge" | "rebase" | "description") => {
            values.iter().all(|v| !v.starts_with('-'))
        }
        ("remote", Some(_), "url") => values.iter().all(|v| url_allowed(v)),
        // Where fetched branches land: beneath refs/remotes/ or refs/tags/ only (a refspec
        // into refs/heads/ would overwrite the user's branches on every fetch).
        ("remote", Some(_), "fetch") => values.iter().all(|v| refspec_lands_in_remotes(v)),
        ("remote", Some(_), "tagopt" | "prune" | "skipdefaultupdate") => values
            .iter()
            .all(|v| !v.starts_with('-') || v == "--no-tags" || v == "--tags"),
        ("submodule", Some(_), "url") => values.iter().all(|v| url_allowed(v)),
        ("submodule", Some(_), "active" | "branch" | "shallow" | "ignore") => {
            values.iter().all(|v| !v.starts_with('!'))
        }
        // Pathspecs of the active submodules, and whether commands recurse into them.
        ("submodule", None, "active" | "recurse") => true,
        (
            "core",
            None,
            "repositoryformatversion"
            | "filemode"
            | "bare"
            | "logallrefupdates"
            | "ignorecase"
            | "precomposeunicode"
            | "symlinks"
            | "sparsecheckout"
            | "sparsecheckoutcone",
        ) => true,
        ("core", None, "worktree") => {
            module.is_some_and(|depth| values.iter().all(|v| worktree_inside(v, depth)))
        }
        ("extensions", None, "objectformat" | "refstorage") => true,
        ("lfs", None, "repositoryformatversion") => true,
        ("init", None, "defaultbranch") => true,
        ("pull", None, "rebase" | "ff") | ("push", None, "default" | "autosetupremote") => true,
        _ => false,
    }
}

/// A fetch refspec whose destination (if any) is a remote-tracking ref or a tag.
fn refspec_lands_in_remotes(spec: &str) -> bool {
    let spec = spec.strip_prefix('+').unwrap_or(spec);
    match spec.split_once(':') {
        None => !spec.starts_with('-'),
        Some((_, dst)) => {
            dst.is_empty() || dst.starts_with("refs/remotes/") || dst.starts_with("refs/tags/")
        }
    }
}

/// Whether a URL names a repository on this machine (a path, or `file://`): pushing there runs
/// that repository's hooks.
pub(crate) fn local_path(url: &str) -> Option<&str> {
    if let Some(path) = url.strip_prefix("file://") {
        return Some(path);
    }
    if url.contains("://") {
        return None;
    }
    // scp-like `[user@]host:path` has a `:` before any `/`.
    match (url.find(':'), url.find('/')) {
        (Some(colon), Some(slash)) if colon < slash => None,
        (Some(_), None) => None,
        _ => Some(url),
    }
}

/// Keys ordinary work never changes in a repository that already has them: the repository's
/// format (a change can make git read it as empty) and whether it is bare.
pub(crate) fn repository_format_key(key: &str) -> bool {
    matches!(key, "core.repositoryformatversion" | "core.bare") || key.starts_with("extensions.")
}

/// A remote URL git fetches from without running a program of the URL's choosing: `http(s)`,
/// `ssh`, `git` and `file` URLs, scp-like `host:path`, and local paths. Never a transport
/// helper (`ext::…` runs a command; `name::…` a `git-remote-name` program), never a leading
/// `-` (an option to ssh), never a control character.
pub(crate) fn url_allowed(url: &str) -> bool {
    if url.is_empty() || url.starts_with('-') || url.contains("::") {
        return false;
    }
    if url.chars().any(char::is_control) {
        return false;
    }
    let lower = url.to_ascii_lowercase();
    if let Some((scheme, _)) = lower.split_once("://") {
        return matches!(
            scheme,
            "https" | "http" | "ssh" | "git" | "file" | "git+ssh" | "ssh+git"
        );
    }
    // scp-like `[user@]host:path`, or a local path.
    true
}

/// A submodule's work tree as `git submodule` writes it into a git directory `depth`
/// components below the superproject's work tree (`.git/modules/sub`: 3): exactly `depth`
/// times `..`, then a path that climbs no further (`../../../sub`).
fn worktree_inside(path: &str, depth: usize) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let ups = parts.iter().take_while(|p| **p == "..").count();
    let rest = &parts[ups..];
    ups == depth
        && !rest.is_empty()
        && !path.chars().any(char::is_control)
        && rest
            .iter()
            .all(|p| !p.is_empty() && *p != "." && *p != "..")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn state_is_applied_and_what_runs_programs_is_refused() {
        for state in [
            "HEAD",
            "index",
            "packed-refs",
            "refs/heads/main",
            "refs/remotes/origin/HEAD",
            "logs/HEAD",
            "objects/ab/cdef",
            "rebase-merge/done",
            "modules/sub/HEAD",
            "modules/sub/refs/heads/main",
            "modules/a/b/index",
            "worktrees/wt/HEAD",
            "worktrees/wt/gitdir",
            "worktrees/wt/logs/HEAD",
            "info/exclude",
            "sharedindex.0123",
        ] {
            assert!(
                matches!(
                    classify(state, false),
                    PathKind::State | PathKind::WorktreeGitdir
                ),
                "{state}"
            );
        }
        for refused in [
            "hooks/pre-commit",
            "commondir",
            "config.worktree",
            "info/attributes",
            "remotes/origin",
            "branches/x",
            "worktrees/wt/config.worktree",
            "modules/sub/hooks/post-checkout",
            "modules/sub/commondir",
            "fsmonitor--daemon.ipc",
        ] {
            assert!(
                matches!(classify(refused, false), PathKind::Refused(_)),
                "{refused}"
            );
        }
        assert_eq!(classify("config", false), PathKind::Config);
        assert_eq!(classify("modules/sub/config", false), PathKind::Config);
        assert_eq!(
            classify("worktrees/wt/commondir", false),
            PathKind::WorktreeCommondir
        );
        assert_eq!(classify("index.lock", false), PathKind::Lock);
        // A submodule named so that a split looks like state: decided by the names themselves.
        for refused in [
            "modules/x/refs/y/hooks/post-checkout",
            "modules/x/refs/y/commondir",
            "modules/a/logs/b/info/attributes",
        ] {
            assert!(
                matches!(classify(refused, false), PathKind::Refused(_)),
                "{refused}"
            );
        }
        assert_eq!(classify("modules/x/refs/y/config", false), PathKind::Config);
        assert_eq!(
            classify("modules/x/objects/y/config", false),
            PathKind::Config
        );
        assert!(matches!(
            classify("modules/x/refs/hooks", true),
            PathKind::Refused(_)
        ));
        assert_eq!(
            classify("rebase-merge/git-rebase-todo", false),
            PathKind::Todo
        );
        assert_eq!(classify("sequencer/todo", false), PathKind::Todo);
        assert_eq!(
            classify("modules/s/rebase-merge/git-rebase-todo", false),
            PathKind::Todo
        );
        assert_eq!(classify("rebase-merge/strategy", false), PathKind::Strategy);
        assert_eq!(classify("sequencer/opts", false), PathKind::Strategy);
        assert!(strategy_allowed("strategy", b"ort\n"));
        assert!(!strategy_allowed("strategy", b"../evil\n"));
        assert!(strategy_allowed(
            "opts",
            b"[options]\n\tstrategy = recursive\n"
        ));
        assert!(!strategy_allowed(
            "opts",
            b"[options]\n\tstrategy = ../evil\n"
        ));
        assert!(matches!(
            classify("modules/s/remotes/origin", false),
            PathKind::Refused(_)
        ));
        assert_eq!(
            classify("modules/s/refs/remotes/origin/main", false),
            PathKind::State
        );
        assert!(todo_runs_a_command(b"pick 1 a\nexec touch x\n"));
        assert!(todo_runs_a_command(b"  x touch x\n"));
        assert!(!todo_runs_a_command(b"pick 1 a\n# exec x\nedit 2 b\n"));
        assert_eq!(classify("modules", true), PathKind::Dir);
        assert!(worktree_commondir_allowed(b"../..\n"));
        assert!(!worktree_commondir_allowed(b"/elsewhere\n"));
    }

    #[test]
    fn config_keys_git_writes_for_ordinary_work_are_allowed_and_program_keys_are_not() {
        let v = |s: &str| vec![s.to_owned()];
        for (key, value) in [
            ("user.email", "a@b.c"),
            ("branch.feature/x.remote", "origin"),
            ("branch.main.merge", "refs/heads/main"),
            ("remote.origin.url", "https://example.org/r.git"),
            ("remote.origin.url", "git@example.org:r.git"),
            ("remote.origin.url", "../other"),
            ("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
            ("submodule.lib.url", "ssh://git@example.org/lib"),
            ("submodule.lib.active", "true"),
            ("core.repositoryformatversion", "0"),
            ("core.bare", "false"),
        ] {
            assert!(key_allowed(key, &v(value), None), "{key}={value}");
        }
        for (key, value) in [
            ("core.fsmonitor", "touch /tmp/x"),
            ("core.hookspath", ".githooks"),
            ("core.pager", "sh -c x"),
            ("core.sshcommand", "x"),
            ("core.worktree", "/elsewhere"),
            ("url.https://evil/.insteadof", "https://example.org/"),
            ("filter.lfs.smudge", "x"),
            ("diff.pdf.textconv", "x"),
            ("credential.helper", "x"),
            ("alias.st", "!x"),
            ("include.path", "../team.gitconfig"),
            ("includeif.gitdir:/.path", "x"),
            ("remote.origin.url", "ext::sh -c x"),
            ("remote.origin.url", "fd::3"),
            ("remote.origin.url", "-oProxyCommand=x"),
            ("remote.origin.uploadpack", "x"),
            ("remote.origin.pushurl", "https://attacker.example/x.git"),
            ("remote.origin.push", ":refs/heads/keep"),
            ("remote.origin.mirror", "true"),
            ("remote.origin.fetch", "+refs/heads/*:refs/heads/*"),
            ("submodule.lib.update", "!x"),
            ("submodule.lib.url", "ext::x"),
            ("extensions.worktreeconfig", "true"),
        ] {
            assert!(!key_allowed(key, &v(value), None), "{key}={value}");
        }
        assert!(key_allowed("core.worktree", &v("../../../lib"), Some(3)));
        assert!(!key_allowed("core.worktree", &v("/tmp/x"), Some(3)));
        assert!(!key_allowed(
            "core.worktree",
            &v("../../../../victim"),
            Some(3)
        ));
        assert!(!key_allowed(
            "core.worktree",
            &v("../../../lib/../.."),
            Some(3)
        ));
        assert!(!key_allowed("core.worktree", &v("../../../lib"), None));
        for (key, value) in [
            ("branch.main.remote", "ext::sh -c x"),
            ("branch.main.pushremote", "fd::3"),
        ] {
            assert!(!key_allowed(key, &v(value), None), "{key}={value}");
        }
        assert!(key_allowed("branch.main.remote", &v("origin"), None));
        assert_eq!(local_path("../remote.git"), Some("../remote.git"));
        assert_eq!(local_path("file:///srv/r.git"), Some("/srv/r.git"));
        assert_eq!(local_path("git@example.org:r.git"), None);
        assert_eq!(local_path("https://example.org/r.git"), None);
        assert_eq!(local_path("origin"), Some("origin"));
    }

    proptest! {
        #[test]
        fn anything_beneath_hooks_is_refused_at_any_module_depth(
            modules in proptest::collection::vec("[a-z]{1,6}", 0..3),
            name in "[a-zA-Z0-9._-]{1,12}",
        ) {
            let mut rel = String::new();
            for m in &modules {
                rel.push_str("modules/");
                rel.push_str(m);
                rel.push('/');
            }
            rel.push_str("hooks/");
            rel.push_str(&name);
            let refused = matches!(classify(&rel, false), PathKind::Refused(_));
            prop_assert!(refused, "{}", rel);
        }

        #[test]
        fn beneath_modules_a_config_is_never_applied_as_data(
            name in proptest::collection::vec(
                prop_oneof!["[a-z]{1,4}", Just("refs".to_owned()), Just("objects".to_owned()),
                            Just("logs".to_owned()), Just("rebase-merge".to_owned())],
                1..5),
        ) {
            let rel = format!("modules/{}/config", name.join("/"));
            prop_assert_eq!(classify(&rel, false), PathKind::Config, "{}", rel);
        }

        #[test]
        fn a_transport_helper_url_is_never_allowed(
            helper in "[a-z]{1,8}",
            rest in "[ -~]{0,20}",
        ) {
            let url = format!("{helper}::{rest}");
            prop_assert!(!url_allowed(&url));
        }
    }
}
