//! Matching a command against the read-only allowlist (RC-9, issue 9 rule 4).
//!
//! A rule is the executable plus at most two following arguments. Before matching, a tool's
//! global options that do not change what the command does are set aside (`git -C dir`,
//! `git --no-pager`, `kubectl -n ns`, …); a global option that can make the tool run something
//! (`git -c core.pager=…`) cancels the match. After a rule matches, any flag below that writes
//! a file or runs a program cancels it, and so does any argument that names a sensitive path,
//! any argument not known before the run (a variable, a glob), and a working directory that is
//! itself sensitive.

use std::path::PathBuf;

use crate::model::Context;
use crate::paths::{candidate_paths, normalize};
use crate::policy::Policy;
use crate::script::Word;

/// Global options set aside before matching, per tool: (tool, flags, options with a value,
/// options whose value is a path (checked for sensitivity), options that cancel the match).
type GlobalOpts = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);

const GLOBAL_OPTS: &[GlobalOpts] = &[
    (
        "git",
        &[
            "--no-pager",
            "-P",
            "--no-optional-locks",
            "--literal-pathspecs",
            "--glob-pathspecs",
            "--noglob-pathspecs",
            "--icase-pathspecs",
            "--no-replace-objects",
            "--bare",
        ],
        &["--namespace"],
        &["-C", "--git-dir", "--work-tree"],
        // `-c core.pager=…`, `core.fsmonitor`, `diff.external`: configuration can run programs.
        &[
            "-c",
            "--config-env",
            "--exec-path",
            "--super-prefix",
            "-p",
            "--paginate",
        ],
    ),
    (
        "docker",
        &["-D", "--debug", "--tls", "--tlsverify"],
        &["--context", "-c", "--host", "-H", "--log-level", "-l"],
        &["--config"],
        &[],
    ),
    (
        "podman",
        &[],
        &["--connection", "-c", "--url", "--log-level"],
        &[],
        &[],
    ),
    (
        "kubectl",
        &[],
        &[
            "-n",
            "--namespace",
            "--context",
            "--cluster",
            "--user",
            "-s",
            "--server",
            "--request-timeout",
        ],
        &["--kubeconfig"],
        &[],
    ),
    (
        "helm",
        &["--debug"],
        &["-n", "--namespace", "--kube-context"],
        &["--kubeconfig"],
        &[],
    ),
    (
        "npm",
        &["-s", "--silent", "-q", "--quiet"],
        &[],
        &["--prefix"],
        &[],
    ),
    ("pnpm", &["-s", "--silent"], &[], &["-C", "--dir"], &[]),
    ("yarn", &["-s", "--silent"], &[], &["--cwd"], &[]),
    (
        "cargo",
        &[
            "-q",
            "--quiet",
            "-v",
            "--verbose",
            "--frozen",
            "--locked",
            "--offline",
        ],
        &["--color"],
        &[],
        &["--config", "-Z"],
    ),
];

/// Flags that write a file or run a program, per tool (`*` for every tool; `tool sub` for one
/// subcommand, where a bare word such as `drop` is a sub-subcommand that writes). A flag of one dash
/// and one letter also matches inside a cluster (`-ni` has `-i`); a long flag also matches its
/// `--flag=value` form.
const WRITE_FLAGS: &[(&str, &[&str])] = &[
    (
        "*",
        &[
            "--output",
            "--output-file",
            "--output-dir",
            "--exec",
            "--in-place",
            "--write",
            "--delete",
            "--pager",
            "--open-files-in-pager",
            "--report-file",
            "--out",
        ],
    ),
    (
        "find",
        &[
            "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf",
            "-fls",
        ],
    ),
    ("sort", &["-o", "--compress-program"]),
    ("shuf", &["-o"]),
    ("iconv", &["-o"]),
    ("tree", &["-o"]),
    ("fd", &["-x", "-X", "--exec-batch"]),
    ("fdfind", &["-x", "-X", "--exec-batch"]),
    ("rg", &["--pre", "--pre-glob"]),
    ("yq", &["-i", "--inplace"]),
    ("xxd", &["-r", "--revert"]),
    ("file", &["-C", "--compile"]),
    ("date", &["-s", "--set"]),
    ("sysctl", &["-w", "--write"]),
    ("gofmt", &["-w"]),
    ("prettier", &["-w"]),
    ("go", &["-w", "-u"]),
    (
        "git branch",
        &[
            "-d",
            "-D",
            "-m",
            "-M",
            "-c",
            "-C",
            "-f",
            "-u",
            "--delete",
            "--move",
            "--copy",
            "--force",
            "--set-upstream-to",
            "--unset-upstream",
            "--edit-description",
            "--create-reflog",
            "--track",
            "--no-track",
        ],
    ),
    (
        "git tag",
        &[
            "-d",
            "-a",
            "-s",
            "-u",
            "-f",
            "-m",
            "-F",
            "--delete",
            "--annotate",
            "--sign",
            "--force",
            "--message",
            "--file",
        ],
    ),
    (
        "git config",
        &[
            "-e",
            "--add",
            "--unset",
            "--unset-all",
            "--replace-all",
            "--rename-section",
            "--remove-section",
            "--edit",
        ],
    ),
    ("git grep", &["-O", "--open-files-in-pager"]),
    ("git fsck", &["--lost-found"]),
    (
        "git remote",
        &[
            "add",
            "remove",
            "rm",
            "rename",
            "set-url",
            "set-head",
            "set-branches",
            "prune",
            "update",
        ],
    ),
    (
        "git stash",
        &[
            "drop", "pop", "apply", "clear", "push", "save", "store", "create",
        ],
    ),
    (
        "git notes",
        &["add", "append", "copy", "edit", "merge", "prune", "remove"],
    ),
    (
        "git worktree",
        &["add", "move", "remove", "prune", "lock", "unlock", "repair"],
    ),
    (
        "git submodule",
        &[
            "update",
            "init",
            "deinit",
            "add",
            "sync",
            "set-url",
            "set-branch",
        ],
    ),
    ("git", &["--ext-diff"]),
    (
        "tar",
        &[
            "-x",
            "-c",
            "-r",
            "-u",
            "-A",
            "--extract",
            "--create",
            "--append",
            "--update",
            "--to-command",
            "--use-compress-program",
            "-I",
            "--get",
            "--concatenate",
        ],
    ),
    ("unzip", &["-o", "-d"]),
    ("top", &["-w"]),
    (
        "dpkg",
        &[
            "-i",
            "-r",
            "-P",
            "--install",
            "--remove",
            "--purge",
            "--configure",
            "--set-selections",
        ],
    ),
    (
        "rpm",
        &[
            "-i",
            "-U",
            "-e",
            "-F",
            "--install",
            "--upgrade",
            "--erase",
            "--freshen",
        ],
    ),
    (
        "pacman",
        &[
            "-S",
            "-R",
            "-U",
            "-D",
            "--sync",
            "--remove",
            "--upgrade",
            "--database",
        ],
    ),
];

/// Tools whose operands past the first are files they write (`uniq IN OUT`, `xxd IN OUT`,
/// `ptx IN OUT`), and tools that change a setting when given any operand (`hostname NAME`).
const MAX_OPERANDS: &[(&str, usize)] = &[("uniq", 1), ("xxd", 1), ("ptx", 1), ("hostname", 0)];

fn write_flag(tool: &str, sub: Option<&str>, arg: &str) -> bool {
    WRITE_FLAGS
        .iter()
        .filter(|(t, _)| match t.split_once(' ') {
            Some((t, s)) => t == tool && sub == Some(s),
            None => *t == "*" || *t == tool,
        })
        .flat_map(|(_, flags)| flags.iter())
        .any(|f| {
            if arg == *f {
                return true;
            }
            if f.starts_with("--") {
                return arg.starts_with(&format!("{f}="));
            }
            // `-x` inside a short cluster such as `-nx`; `tar xf` style clusters have no dash.
            let letter = f.strip_prefix('-').filter(|l| l.len() == 1);
            match letter {
                Some(l) => {
                    let cluster = arg.strip_prefix('-').filter(|r| !r.starts_with('-'));
                    let bare_tar = tool == "tar" && !arg.starts_with('-');
                    cluster.is_some_and(|c| c.contains(l))
                        || bare_tar
                            && arg.chars().all(|c| c.is_ascii_alphabetic())
                            && arg.contains(l)
                }
                None => false,
            }
        })
}

/// Sets aside `name`'s global options; `None` when one of them cancels the match. Returns the
/// remaining arguments and the paths named by path-valued options.
fn normalize_globals<'a>(name: &str, args: &'a [String]) -> Option<(&'a [String], Vec<String>)> {
    let Some((_, flags, valued, pathy, cancel)) = GLOBAL_OPTS.iter().find(|g| g.0 == name) else {
        return Some((args, Vec::new()));
    };
    let mut paths = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if name == "cargo" && a.starts_with('+') {
            i += 1;
            continue;
        }
        if !a.starts_with('-') || a == "--" {
            break;
        }
        let (key, inline) = match a.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k, Some(v)),
            _ => (a, None),
        };
        if cancel.contains(&key) {
            return None;
        }
        if flags.contains(&key) {
            i += 1;
        } else if valued.contains(&key) || pathy.contains(&key) {
            let value = match inline {
                Some(v) => {
                    i += 1;
                    v.to_owned()
                }
                None => {
                    let v = args.get(i + 1)?.clone();
                    i += 2;
                    v
                }
            };
            if pathy.contains(&key) {
                paths.push(value);
            }
        } else {
            // An option we do not know: stop setting aside; the rule must then match as
            // written, which it will not, so the call is not read-only. Fail closed.
            break;
        }
    }
    Some((&args[i..], paths))
}

/// `true` when `name args` is a read-only allowlist hit under `policy` (RC-9).
pub fn is_hit(policy: &Policy, ctx: &Context, name: &str, args: &[Word]) -> bool {
    let workdir = normalize(&ctx.home, &ctx.workdir);
    if policy.is_sensitive_at(&workdir, &ctx.home) {
        return false;
    }
    let mut fixed = Vec::with_capacity(args.len());
    for a in args {
        match a.fixed() {
            Some(v) => fixed.push(v.to_owned()),
            None => return false,
        }
    }
    let lookup = if name == "[" { "test" } else { name };
    let Some((rest, paths)) = normalize_globals(lookup, &fixed) else {
        return false;
    };
    let matched = policy.read_only_rules().any(|rule| {
        let t = rule.tokens();
        t[0] == lookup && rest.len() >= t.len() - 1 && t[1..].iter().zip(rest).all(|(a, b)| a == b)
    });
    if !matched {
        return false;
    }
    let sub = rest.first().map(String::as_str);
    if fixed.iter().any(|a| write_flag(lookup, sub, a)) {
        return false;
    }
    if let Some((_, max)) = MAX_OPERANDS.iter().find(|(t, _)| *t == lookup) {
        let operands = fixed.iter().filter(|a| !a.starts_with('-')).count();
        if operands > *max {
            return false;
        }
    }
    let sensitive = fixed
        .iter()
        .chain(paths.iter())
        .flat_map(|a| candidate_paths(a, &workdir, &ctx.home))
        .any(|p: PathBuf| policy.is_sensitive_at(&p, &ctx.home));
    !sensitive
}
