//! Matching a command against the read-only allowlist (RC-9).
//!
//! A rule is the executable plus at most two following arguments. Before matching, a tool's
//! global options that do not change what the command does are set aside (`git -C .`,
//! `git --no-pager`, `kubectl -n ns`, …); a global option that can make the tool run something
//! or read a configuration the agent may have written (`git -c core.pager=…`, `git --git-dir`,
//! `git -C other`, `kubectl --kubeconfig`, `docker --config`) cancels the match. A rule of the
//! executable and a version flag (`gcc -v`) matches only exactly. After a rule matches, any flag
//! below that writes a file or runs a program cancels it (long flags also by their getopt
//! abbreviations), and so does a form that writes (`git branch NAME`, `tar -tf host:file`,
//! `sysctl a=b`, a compressor option beyond listing), any argument that names a sensitive path,
//! any argument not known before the run (a variable, a glob), and a working directory that is
//! itself sensitive.

use std::path::{Path, PathBuf};

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
        ],
        &["--namespace"],
        // `-C` only to the working directory itself: another directory may hold a nested
        // repository whose `.git/config` the agent wrote (see `git_dir_is_default`).
        &["-C"],
        // `-c core.pager=…`, `core.fsmonitor`, `diff.external`: configuration can run programs.
        // `--git-dir`, `--work-tree` (and `--bare`, which makes the working directory's own
        // `config` the repository's) choose a repository whose configuration is not protected.
        &[
            "--git-dir",
            "--work-tree",
            "--bare",
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
        &[],
        // A config directory names CLI plugin directories (`docker compose` is a plugin).
        &["--config"],
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
        &[],
        // A kubeconfig's `users[].exec` is a credential plugin: a program kubectl runs.
        &["--kubeconfig"],
    ),
    (
        "helm",
        &["--debug"],
        &["-n", "--namespace", "--kube-context"],
        &[],
        &["--kubeconfig"],
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
    ("sdiff", &["-o"]),
    // `-R` re-runs tree in every directory with `-o 00Tree.html`.
    ("tree", &["-o", "-R"]),
    (
        "man",
        &[
            "-P",
            "-H",
            "--html",
            "-C",
            "--config-file",
            "-X",
            "--gxditview",
        ],
    ),
    ("info", &["-o", "--dribble"]),
    ("xmllint", &["--shell"]),
    ("dos2unix", &["-n", "--newfile", "-o", "--oldfile"]),
    // binutils load a shared object given by `--plugin`.
    ("nm", &["--plugin"]),
    (
        "lipo",
        &[
            "-output",
            "-create",
            "-remove",
            "-replace",
            "-extract",
            "-extract_family",
            "-thin",
        ],
    ),
    ("ss", &["-K", "--kill", "-D", "--diag"]),
    ("blkid", &["-c", "--cache-file"]),
    ("hostname", &["-F", "--file", "-b", "--boot"]),
    // rpm macros run shell commands: `%(cmd)`.
    (
        "rpm",
        &[
            "--eval", "-E", "--define", "-D", "--macros", "--rcfile", "--pipe", "--load",
        ],
    ),
    (
        "nix-env",
        &[
            "-f",
            "--file",
            "-i",
            "-e",
            "-u",
            "--install",
            "--uninstall",
            "--upgrade",
            "--set",
            "--option",
        ],
    ),
    ("helm", &["--post-renderer"]),
    ("npm audit", &["fix"]),
    ("pnpm audit", &["--fix"]),
    ("git ls-remote", &["-u", "--upload-pack"]),
    ("git help", &["-w", "--web"]),
    (
        "ip",
        &[
            "add", "del", "delete", "change", "replace", "set", "flush", "append", "prepend",
            "save", "restore", "exec", "monitor", "-batch",
        ],
    ),
    ("fd", &["-x", "-X", "--exec-batch"]),
    ("fdfind", &["-x", "-X", "--exec-batch"]),
    ("rg", &["--pre", "--pre-glob"]),
    ("yq", &["-i", "--inplace"]),
    ("xxd", &["-r", "--revert"]),
    ("file", &["-C", "--compile"]),
    ("date", &["-s", "--set"]),
    (
        "sysctl",
        &["-w", "--write", "-p", "--load", "--system", "-f"],
    ),
    ("gofmt", &["-w"]),
    ("prettier", &["-w"]),
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
            "--checkpoint-action",
            "--info-script",
            "-F",
            "--new-volume-script",
            "--rsh-command",
            "--rmt-command",
            "--index-file",
            "--volno-file",
            "-g",
            "--listed-incremental",
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
const MAX_OPERANDS: &[(&str, usize)] = &[
    ("uniq", 1),
    ("xxd", 1),
    ("ptx", 1),
    ("hostname", 0),
    ("ifconfig", 0),
];

/// Rules of the executable and one of these flags are version or information queries: they
/// match only exactly, because the flag means something else beside other arguments
/// (`gcc -v m.c -o X` compiles verbosely, `ruby -v x.rb` runs `x.rb`, `javac -version X.java`
/// compiles).
const EXACT_QUERIES: &[&str] = &[
    "--version",
    "-version",
    "-v",
    "-V",
    "-vV",
    "--info",
    "--list-sdks",
    "--list-runtimes",
    "--show-sdk-path",
    "--print-architecture",
    "-p",
    "-m",
];

/// Go's flag package: `-name`, `--name`, `-name=value`; these build or run programs.
const GO_WRITE_FLAGS: &[&str] = &[
    "w", "u", "toolexec", "exec", "export", "compiled", "overlay",
];

/// Options of a compressor (`gzip -l`, `xz -l`) and of its `cat` form that only list or print;
/// any other option (`-d`, `-z`, `-k`, `-f`, `-o`, `--rm` …) may write files.
const COMPRESSORS: &[(&str, &str, &[&str])] = &[
    (
        "gzip",
        "lvqr",
        &["--list", "--verbose", "--quiet", "--recursive"],
    ),
    (
        "xz",
        "lvq",
        &["--list", "--verbose", "--quiet", "--robot", "--no-warn"],
    ),
    ("zcat", "fqv", &["--force", "--quiet", "--verbose"]),
    (
        "bzcat",
        "fqvs",
        &["--force", "--quiet", "--verbose", "--small"],
    ),
    ("xzcat", "fqv", &["--force", "--quiet", "--verbose"]),
    ("lz4cat", "qv", &["--quiet", "--verbose"]),
    ("zstdcat", "qv", &["--quiet", "--verbose"]),
];

/// Options of `git branch` that put it in list mode, where operands are patterns; without one,
/// an operand is the name of a branch to create (`git branch -v NAME`).
const GIT_BRANCH_LIST: &[&str] = &[
    "-l",
    "--list",
    "--contains",
    "--no-contains",
    "--merged",
    "--no-merged",
    "--points-at",
    "--show-current",
];

/// `git branch` options whose value is the next argument.
const GIT_BRANCH_VALUED: &[&str] = &[
    "--contains",
    "--no-contains",
    "--merged",
    "--no-merged",
    "--points-at",
    "--sort",
    "--format",
];

/// Checks that no table above expresses: `true` when `tool`'s arguments write or run a program.
/// `rest` is what follows the global options (its first element the subcommand).
fn writes_by_form(tool: &str, rest: &[String], all: &[String]) -> bool {
    let key = |a: &str| a.split_once('=').map_or(a, |(k, _)| k).to_owned();
    match tool {
        "git" if rest.first().map(String::as_str) == Some("branch") => {
            let args = &rest[1..];
            if args
                .iter()
                .any(|a| GIT_BRANCH_LIST.contains(&key(a).as_str()))
            {
                return false;
            }
            let mut i = 0;
            while i < args.len() {
                let a = args[i].as_str();
                if a == "--" {
                    return i + 1 < args.len();
                }
                if !a.starts_with('-') {
                    return true;
                }
                i += if GIT_BRANCH_VALUED.contains(&a) { 2 } else { 1 };
            }
            false
        }
        // `host:file` is a remote archive, reached by running rsh (`--force-local` says no).
        "tar" => {
            !all.iter().any(|a| a == "--force-local")
                && all.iter().any(|a| !a.starts_with('-') && a.contains(':'))
        }
        // Linux and BSD sysctl both set `name=value`.
        "sysctl" => all.iter().any(|a| !a.starts_with('-') && a.contains('=')),
        // `--print KIND=PATH` writes the answer to PATH.
        "rustc" => all.iter().enumerate().any(|(i, a)| {
            a.strip_prefix("--print=").is_some_and(|v| v.contains('='))
                || a == "--print" && all.get(i + 1).is_some_and(|v| v.contains('='))
        }),
        "go" => all.iter().any(|a| {
            a.strip_prefix("--")
                .or_else(|| a.strip_prefix('-'))
                .is_some_and(|f| GO_WRITE_FLAGS.contains(&f.split_once('=').map_or(f, |(k, _)| k)))
        }),
        // `ip -b FILE` runs the commands in FILE (`-br` is `-brief`, so not in the table).
        "ip" => all.iter().any(|a| a == "-b" || a == "-force"),
        // `npm fund NAME` opens the package's funding page in a browser.
        "npm" if rest.first().map(String::as_str) == Some("fund") => {
            rest[1..].iter().any(|a| !a.starts_with('-'))
        }
        _ => match COMPRESSORS.iter().find(|(t, _, _)| *t == tool) {
            Some((_, short, long)) => all.iter().any(|a| {
                if a.starts_with("--") {
                    !long.contains(&a.as_str())
                } else if let Some(c) = a.strip_prefix('-') {
                    c.is_empty() || !c.chars().all(|l| short.contains(l))
                } else {
                    false
                }
            }),
            None => false,
        },
    }
}

/// `true` when `git`'s `-C` values all lead to the working directory itself: another directory
/// may hold a repository (nested, or bare) whose configuration the agent wrote and that the
/// sandbox does not protect, and its `core.fsmonitor` runs on `git status`.
fn git_dir_is_default(paths: &[String], workdir: &Path) -> bool {
    let mut here = workdir.to_path_buf();
    for p in paths {
        here = normalize(&here, Path::new(p));
    }
    here == workdir
}

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
                return long_matches(arg, f);
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

/// `true` when the long option `arg` (`--name` or `--name=value`) is `flag` as getopt_long and
/// git's parse-options read it: the exact name, or any abbreviation of at least one letter after
/// `--` (getopt_long, argp and parse-options accept any unambiguous prefix, so `--o=F` may be
/// `--output=F`). An ambiguous abbreviation is refused by the program, so counting it as the flag
/// only costs a confirmation.
fn long_matches(arg: &str, flag: &str) -> bool {
    let Some(key) = arg.strip_prefix("--") else {
        return false;
    };
    let key = key.split_once('=').map_or(key, |(k, _)| k);
    let full = &flag[2..];
    key == full || !key.is_empty() && full.starts_with(key)
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
    if policy.is_sensitive_in(&workdir, ctx) {
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
        let exact = t.len() == 2 && EXACT_QUERIES.contains(&t[1].as_str());
        t[0] == lookup
            && rest.len() >= t.len() - 1
            && (!exact || rest.len() == 1)
            && t[1..].iter().zip(rest).all(|(a, b)| a == b)
    });
    if !matched {
        return false;
    }
    if lookup == "git" && !git_dir_is_default(&paths, &workdir) {
        return false;
    }
    let sub = rest.first().map(String::as_str);
    if fixed.iter().any(|a| write_flag(lookup, sub, a)) || writes_by_form(lookup, rest, &fixed) {
        return false;
    }
    if let Some((_, max)) = MAX_OPERANDS.iter().find(|(t, _)| *t == lookup) {
        // Every argument after `--` is an operand, even one starting with `-` (`uniq b -- -out`).
        let (before, after) = match fixed.iter().position(|a| a == "--") {
            Some(i) => (&fixed[..i], fixed.len() - i - 1),
            None => (&fixed[..], 0),
        };
        let operands = before.iter().filter(|a| !a.starts_with('-')).count() + after;
        if operands > *max {
            return false;
        }
    }
    let sensitive = fixed
        .iter()
        .chain(paths.iter())
        .flat_map(|a| candidate_paths(a, &workdir, &ctx.home))
        .any(|p: PathBuf| policy.is_sensitive_in(&p, ctx));
    !sensitive
}
