//! RC-2 for a direct argv: which elements are data and which show that the caller expected a
//! shell.
//!
//! **Owns**: the rule below and the table of programs that read program text or patterns
//! themselves. **Refuses to know**: `sh -c` scripts (the script parser checks those) and what
//! any argument means beyond its form.
//!
//! RC-2 exists to catch an agent that expects a shell where there is none: an argv runs
//! directly, so `*.txt` reaches `cat` as those five characters. Characters a shell would read
//! are not wrong in themselves: `["python3", "-c", "print(1)"]` or `["grep", "-E", "a|b", "f"]`
//! are exactly what the program wants. So an element is refused (`RUN_COMMAND_METACHARACTERS`,
//! with the `sh -c` advice) only when its *form* says "shell":
//!
//! 1. **shell syntax**: the element is wholly an operator (`|`, `||`, `&`, `&&`, `;`, `;;`,
//!    `|&`, `(`, `)`), starts with a redirection (`>`, `>>`, `<`, `2>&1`, `&>`, `>file`,
//!    `2>/dev/null`, `<<EOF`), or starts with `|`, `;`, `&&`, `||` or ends with `|`, `&&`,
//!    `||` (`"ls|"`, `"|wc"`);
//! 2. **a leading `~`** (`~`, `~/x`, `~user`): only a shell expands it;
//! 3. **a substitution**: `$(`, a backtick, `${`, `$'`, `$"` or `$NAME`/`$1`/`$?`-style
//!    parameters (not after a `\`);
//! 4. **a glob where a path goes**: `*`, `?`, a bracket class such as `[0-9]` or a brace list
//!    such as `{c,h}` in an *operand* (not an option) of a program that does not match patterns
//!    itself. An operand with whitespace is text, not a path, and a URL (`://`) is not a glob.
//!
//! Where a program reads its own program text or patterns, those elements are data: rules 1–4
//! do not apply to program text (rule 1–3 still apply to patterns such as `find -name '*.rs'`,
//! only the glob rule is lifted). The table ([`TAKES`]) names them:
//! - program text: `awk`'s program and `-F`/`-v` values, `sed`'s script and `-e`, the pattern
//!   of `grep`/`egrep`/`fgrep`/`rg`/`ag`/`ack`/`fd`/`pgrep` and their `-e`/`--regexp` (and
//!   rg's `-g`/`--glob`/`-r`), `jq`/`yq`'s filter and `--arg`/`--argjson` values, the `-c` of
//!   `python*`, the `-e`/`-p` of `node`, `bun`, `perl`, `ruby`, `lua`, `Rscript`, `julia`,
//!   `php -r`, `psql -c`, `mysql -e`, `curl`'s `-d`/`-H`/`-w` data, `git`'s `-m`/`-S`/`-G`/
//!   `--grep`, the format/query/filter/template values of `docker`, `kubectl`, `gh`, `aws`,
//!   `gcloud`, `az`, and for every program the value after `--include`, `--exclude`,
//!   `--exclude-dir`, `--ignore`, `--hide`, `--glob`, `--iglob`, `--filter`, `--format`,
//!   `--query`, `--template`, `--jq` given as a separate element;
//! - patterns: `find`'s `-name`/`-iname`/`-path`/`-ipath`/`-wholename`/`-lname` operands (and
//!   `-regex`/`-printf` as program text; its lone `(`, `)`, `!` are operators), every operand of
//!   `git` (pathspecs are git's own globs: `git ls-files '*.rs'`), `curl` (URL globbing),
//!   `locate`, and the linters that expand globs themselves (`prettier`, `eslint`, `stylelint`,
//!   `mocha`, `markdownlint`, `cspell`); `test`/`[`'s lone `(`, `)`, `!`.
//!
//! Options (`-x`, `--name=value`) are never glob-checked: `--include=*.rs` is the program's
//! pattern. Launchers are seen through (`env`, `timeout`, `xargs`, `npx`, `find -exec`,
//! `sudo`): the started command is classified by its own program. Arguments of a shell
//! (`["sh", "-c", script, arg…]`, `["bash", "file.sh", arg…]`) keep the strict check of every
//! [`crate::METACHARACTERS`] character: a script may use them unquoted, where the shell would
//! expand them out of the checker's sight. Misclassifying in the generous direction is harmless
//! for safety (the program receives literal characters; sensitive paths are checked separately),
//! so the table is short and errs toward data.

use crate::check::SHELLS;
use crate::launch::{self, Plan};
use crate::script::Word;

/// Why an element was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// Wholly shell syntax (an operator or a redirection).
    Syntax,
    /// A leading `~`.
    Tilde,
    /// A substitution; the text that starts it (`$(`, `` ` ``, `$HOME`…).
    Substitution(String),
    /// A glob in a path operand; the character.
    Glob(char),
    /// A metacharacter in a shell's argument (the strict check).
    Meta(char),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Program text the program reads itself: unchecked.
    Code,
    /// A pattern the program matches itself: no glob check.
    Pattern,
    /// An operand that may be a path: every check.
    Operand,
    /// An option: no glob check.
    Opt,
    /// An argument of a shell: every metacharacter refused.
    Strict,
}

/// A program that reads program text or patterns itself.
struct Takes {
    names: &'static [&'static str],
    /// Options whose next element is program text (or a pattern, data of the program).
    code: &'static [&'static str],
    /// Options whose next two elements are program text (`jq --arg name value`).
    code2: &'static [&'static str],
    /// Other options that take the next element as their value.
    valued: &'static [&'static str],
    /// Options that supply the program text, so no operand is program text.
    supplies: &'static [&'static str],
    /// How many leading operands are program text.
    program_operands: usize,
    /// Every other operand is a pattern the program matches itself.
    operand_patterns: bool,
}

const NONE: &[&str] = &[];

/// The programs that read program text or patterns themselves (see the module docs).
const TAKES: &[Takes] = &[
    Takes {
        names: &["awk", "gawk", "mawk", "nawk"],
        code: &[
            "-F",
            "-v",
            "--field-separator",
            "--assign",
            "-e",
            "--source",
        ],
        code2: NONE,
        valued: &["-f", "--file", "-i", "--include", "-l", "--load"],
        supplies: &["-f", "--file", "-e", "--source"],
        program_operands: 1,
        operand_patterns: false,
    },
    Takes {
        names: &["sed", "gsed"],
        code: &["-e", "--expression"],
        code2: NONE,
        valued: &["-f", "--file", "-l", "--line-length"],
        supplies: &["-e", "--expression", "-f", "--file"],
        program_operands: 1,
        operand_patterns: false,
    },
    Takes {
        names: &[
            "grep",
            "egrep",
            "fgrep",
            "zgrep",
            "zegrep",
            "zfgrep",
            "ggrep",
            "pcregrep",
            "pcre2grep",
        ],
        code: &["-e", "--regexp"],
        code2: NONE,
        valued: &[
            "-f",
            "--file",
            "-m",
            "--max-count",
            "-A",
            "-B",
            "-C",
            "--label",
            "-d",
            "-D",
            "--exclude-from",
        ],
        supplies: &["-e", "--regexp", "-f", "--file"],
        program_operands: 1,
        operand_patterns: false,
    },
    Takes {
        names: &["rg"],
        code: &[
            "-e",
            "--regexp",
            "-g",
            "--glob",
            "--iglob",
            "-r",
            "--replace",
            "--type-add",
            "--pre-glob",
        ],
        code2: NONE,
        valued: &[
            "-f",
            "--file",
            "-m",
            "--max-count",
            "-A",
            "-B",
            "-C",
            "-t",
            "--type",
            "-T",
            "--type-not",
            "-j",
            "--threads",
            "-M",
            "--max-columns",
            "-d",
            "--max-depth",
            "--max-filesize",
            "--path-separator",
            "--pre",
            "-E",
            "--encoding",
            "--sort",
            "--sortr",
            "--context-separator",
            "--field-match-separator",
        ],
        supplies: &["-e", "--regexp", "-f", "--file", "--files", "--type-list"],
        program_operands: 1,
        operand_patterns: false,
    },
    Takes {
        names: &["ag", "ack", "ack-grep", "pgrep", "pkill", "fd", "fdfind"],
        code: &[
            "-G",
            "--file-search-regex",
            "--ignore",
            "-E",
            "--exclude",
            "--match",
        ],
        code2: NONE,
        valued: &[
            "-A",
            "-B",
            "-C",
            "-m",
            "-u",
            "-U",
            "-g",
            "-P",
            "-s",
            "-t",
            "--type",
            "-d",
            "--max-depth",
            "--min-depth",
            "-S",
            "--size",
            "-j",
            "--threads",
            "-c",
            "--color",
            "--base-directory",
            "--changed-within",
            "--changed-before",
            "-o",
            "--owner",
        ],
        supplies: NONE,
        program_operands: 1,
        operand_patterns: false,
    },
    Takes {
        names: &["jq", "gojq", "jaq"],
        code: &["--args", "--jsonargs"],
        code2: &["--arg", "--argjson"],
        valued: &["-L", "--indent", "-f", "--from-file"],
        supplies: &["-f", "--from-file"],
        program_operands: 1,
        operand_patterns: false,
    },
    Takes {
        names: &["yq"],
        code: &["--expression"],
        code2: &["--arg"],
        valued: &[
            "-o",
            "--output-format",
            "-p",
            "--input-format",
            "-I",
            "--indent",
            "--from-file",
        ],
        supplies: &["--from-file"],
        program_operands: 1,
        operand_patterns: false,
    },
    Takes {
        names: &["node", "nodejs", "bun", "deno"],
        code: &["-e", "--eval", "-p", "--print"],
        code2: NONE,
        valued: &[
            "-r",
            "--require",
            "--import",
            "--loader",
            "-C",
            "--conditions",
        ],
        supplies: NONE,
        program_operands: 0,
        operand_patterns: false,
    },
    Takes {
        names: &["perl", "ruby", "lua", "luajit", "Rscript", "osascript"],
        code: &["-e", "-E"],
        code2: NONE,
        valued: &["-I", "-M", "-r", "-l"],
        supplies: NONE,
        program_operands: 0,
        operand_patterns: false,
    },
    Takes {
        names: &["julia"],
        code: &["-e", "--eval", "-E", "--print"],
        code2: NONE,
        valued: &["-L", "--load", "-t", "--threads", "--project"],
        supplies: NONE,
        program_operands: 0,
        operand_patterns: false,
    },
    Takes {
        names: &["php"],
        code: &["-r", "-R", "-B", "-E"],
        code2: NONE,
        valued: &["-c", "-d", "-f", "-z"],
        supplies: NONE,
        program_operands: 0,
        operand_patterns: false,
    },
    Takes {
        names: &["psql", "duckdb", "clickhouse-client", "sqlcmd"],
        code: &["-c", "--command", "-q", "--query", "-Q"],
        code2: NONE,
        valued: &[
            "-d",
            "--dbname",
            "-h",
            "--host",
            "-p",
            "--port",
            "-U",
            "--username",
            "-f",
        ],
        supplies: NONE,
        program_operands: 0,
        operand_patterns: false,
    },
    Takes {
        names: &["mysql", "mariadb"],
        code: &["-e", "--execute"],
        code2: NONE,
        valued: &[
            "-h",
            "--host",
            "-P",
            "--port",
            "-u",
            "--user",
            "-D",
            "--database",
        ],
        supplies: NONE,
        program_operands: 0,
        operand_patterns: false,
    },
    Takes {
        names: &["git"],
        code: &[
            "-m",
            "--message",
            "-S",
            "-G",
            "--grep",
            "--author",
            "--committer",
            "--pretty",
            "--format",
            "-e",
        ],
        code2: NONE,
        valued: &["-C", "-c", "--git-dir", "--work-tree", "-n", "--max-count"],
        supplies: NONE,
        program_operands: 0,
        operand_patterns: true,
    },
    Takes {
        names: &["curl"],
        code: &[
            "-d",
            "--data",
            "--data-raw",
            "--data-binary",
            "--data-urlencode",
            "--json",
            "-H",
            "--header",
            "-F",
            "--form",
            "--form-string",
            "-w",
            "--write-out",
            "-X",
            "--request",
        ],
        code2: NONE,
        valued: &[
            "-o",
            "--output",
            "-u",
            "--user",
            "-A",
            "--user-agent",
            "-e",
            "--referer",
        ],
        supplies: NONE,
        program_operands: 0,
        operand_patterns: true,
    },
    Takes {
        names: &[
            "locate",
            "plocate",
            "mlocate",
            "prettier",
            "eslint",
            "stylelint",
            "mocha",
            "markdownlint",
            "markdownlint-cli2",
            "cspell",
        ],
        code: NONE,
        code2: NONE,
        valued: NONE,
        supplies: NONE,
        program_operands: 0,
        operand_patterns: true,
    },
    Takes {
        names: &[
            "docker", "podman", "kubectl", "oc", "helm", "gh", "aws", "gcloud", "az",
        ],
        code: &[
            "-o",
            "--output",
            "-f",
            "--filter",
            "--filters",
            "-l",
            "--selector",
            "--field-selector",
            "--jq",
            "-q",
            "-t",
            "--template",
            "--query",
            "-b",
            "--body",
            "--title",
            "--search",
            "--raw-field",
            "--field",
        ],
        code2: NONE,
        valued: &[
            "-n",
            "--namespace",
            "--context",
            "-R",
            "--repo",
            "--region",
            "--profile",
        ],
        supplies: NONE,
        program_operands: 0,
        operand_patterns: false,
    },
];

/// Options whose separate value is a pattern or a format for any program (`--include '*.rs'`).
const PATTERN_VALUED: &[&str] = &[
    "--include",
    "--exclude",
    "--exclude-dir",
    "--ignore",
    "--hide",
    "--glob",
    "--iglob",
    "--filter",
    "--format",
    "--query",
    "--template",
    "--jq",
];

/// The `find` primaries whose operand is a pattern, and those whose operand is program text.
const FIND_PATTERN: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-lname",
    "-ilname",
];
const FIND_CODE: &[&str] = &["-regex", "-iregex", "-printf", "-fprintf", "-fprint0"];

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// The first element of `argv` whose form shows that the caller expected a shell, with why.
/// `skip` lists the elements that are `sh -c` scripts (checked by the script parser).
pub(crate) fn first_problem(argv: &[String], skip: &[usize]) -> Option<(usize, Problem)> {
    let mut kinds = vec![Kind::Operand; argv.len()];
    classify(argv, &mut kinds);
    argv.iter()
        .zip(&kinds)
        .enumerate()
        .filter(|(i, _)| !skip.contains(i))
        .find_map(|(i, (a, k))| problem(a, *k).map(|p| (i, p)))
}

/// Classifies the elements of one command line (`args[0]` the program).
fn classify(args: &[String], kinds: &mut [Kind]) {
    let Some((first, rest)) = args.split_first() else {
        return;
    };
    kinds[0] = Kind::Operand;
    let name = basename(first);
    if SHELLS.contains(&name) {
        kinds[1..].fill(Kind::Strict);
        return;
    }
    if name == "sudo" {
        classify(rest, &mut kinds[1..]);
        return;
    }
    program_kinds(name, rest, &mut kinds[1..]);
    let words: Vec<Word> = rest.iter().map(|a| Word::literal(a)).collect();
    if let Ok(Plan::Inner { ranges, .. }) = launch::plan(name, &words) {
        for r in ranges {
            if r.start < r.end && r.end <= rest.len() {
                classify(&rest[r.clone()], &mut kinds[1 + r.start..1 + r.end]);
            }
        }
    }
}

fn is_option(a: &str) -> bool {
    a.starts_with('-') && a.len() > 1
}

/// Kinds of a program's arguments from its [`Takes`] entry, `find`'s primaries, or the default
/// (options and operands).
fn program_kinds(name: &str, args: &[String], kinds: &mut [Kind]) {
    if name == "find" {
        return find_kinds(args, kinds);
    }
    if matches!(name, "test" | "[") {
        for (a, k) in args.iter().zip(kinds.iter_mut()) {
            *k = if matches!(a.as_str(), "(" | ")" | "!") {
                Kind::Code
            } else if is_option(a) {
                Kind::Opt
            } else {
                Kind::Operand
            };
        }
        return;
    }
    let python = name.starts_with("python") || name.starts_with("pypy");
    let takes = TAKES.iter().find(|t| t.names.contains(&name));
    let (code, code2, valued, supplies, program_operands, operand_patterns) = match takes {
        Some(t) => (
            t.code,
            t.code2,
            t.valued,
            t.supplies,
            t.program_operands,
            t.operand_patterns,
        ),
        None if python => (&["-c"][..], NONE, &["-m", "-W", "-X"][..], NONE, 0, false),
        None => (NONE, NONE, NONE, NONE, 0, false),
    };
    // `git grep` reads a pattern like grep (its file operands are pathspecs, git's globs).
    if name == "git" {
        if let Some(g) = git_subcommand(args).filter(|g| args[*g] == "grep") {
            for (i, a) in args[..=g].iter().enumerate() {
                kinds[i] = if is_option(a) {
                    Kind::Opt
                } else {
                    Kind::Pattern
                };
            }
            program_kinds("grep", &args[g + 1..], &mut kinds[g + 1..]);
            for k in &mut kinds[g + 1..] {
                if *k == Kind::Operand {
                    *k = Kind::Pattern;
                }
            }
            return;
        }
    }
    let mut supplied = false;
    let mut operands = 0usize;
    let mut after_dashes = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if !after_dashes && a == "--" {
            kinds[i] = Kind::Opt;
            after_dashes = true;
            i += 1;
            continue;
        }
        if !after_dashes && is_option(a) {
            kinds[i] = Kind::Opt;
            let long = a.split_once('=').map_or(a, |(l, _)| l);
            let short = |set: &[&str]| -> bool {
                // `-ne` (perl), `-uc` (python): a cluster of letters ending in the option.
                !a.starts_with("--")
                    && a.len() > 2
                    && a[1..].chars().all(|c| c.is_ascii_alphabetic())
                    && set.iter().any(|o| o.len() == 2 && a.ends_with(&o[1..]))
            };
            let attached = |set: &[&str]| -> bool {
                // `-F,`, `-vx=1`, `--eval=code`: the value is in the element.
                (a.starts_with("--") && a.contains('=') && set.contains(&long))
                    || (!a.starts_with("--")
                        && a.len() > 2
                        && set.iter().any(|o| o.len() == 2 && a.starts_with(o)))
            };
            if supplies.contains(&long) || short(supplies) || attached(supplies) {
                supplied = true;
            }
            if code.contains(&a) || PATTERN_VALUED.contains(&a) || short(code) {
                if let Some(k) = kinds.get_mut(i + 1) {
                    *k = Kind::Code;
                }
                i += 2;
                continue;
            }
            if code2.contains(&a) {
                for k in kinds.iter_mut().skip(i + 1).take(2) {
                    *k = Kind::Code;
                }
                i += 3;
                continue;
            }
            if attached(code) {
                kinds[i] = Kind::Code;
                i += 1;
                continue;
            }
            if valued.contains(&a) {
                if let Some(k) = kinds.get_mut(i + 1) {
                    *k = if operand_patterns {
                        Kind::Pattern
                    } else {
                        Kind::Operand
                    };
                }
                i += 2;
                continue;
            }
            i += 1;
            continue;
        }
        kinds[i] = if !supplied && operands < program_operands {
            Kind::Code
        } else if operand_patterns {
            Kind::Pattern
        } else {
            Kind::Operand
        };
        if name == "yq" && operands == 0 && matches!(a, "e" | "eval" | "ea" | "eval-all") {
            // The subcommand; the filter follows.
            operands = 0;
            kinds[i] = Kind::Operand;
            i += 1;
            if let Some(k) = kinds.get_mut(i) {
                if !supplied {
                    *k = Kind::Code;
                    operands = 1;
                    i += 1;
                }
            }
            continue;
        }
        operands += 1;
        i += 1;
    }
}

/// The index of git's subcommand: the first operand after the global options.
fn git_subcommand(args: &[String]) -> Option<usize> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if matches!(a, "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace") {
            i += 2;
        } else if is_option(a) {
            i += 1;
        } else {
            return Some(i);
        }
    }
    None
}

fn find_kinds(args: &[String], kinds: &mut [Kind]) {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if matches!(a, "(" | ")" | "!" | ",") {
            kinds[i] = Kind::Code;
        } else if is_option(a) {
            kinds[i] = Kind::Opt;
            let next = if FIND_PATTERN.contains(&a) {
                Some(Kind::Pattern)
            } else if FIND_CODE.contains(&a) {
                Some(Kind::Code)
            } else {
                None
            };
            if let Some(k) = next {
                // `-fprintf FILE FORMAT`: the file is an operand, the format program text.
                let at = if a == "-fprintf" { i + 2 } else { i + 1 };
                if let Some(slot) = kinds.get_mut(at) {
                    *slot = k;
                }
                i = at + 1;
                continue;
            }
        } else {
            kinds[i] = Kind::Operand;
        }
        i += 1;
    }
}

/// The problem with one element of a given kind, if any.
fn problem(a: &str, kind: Kind) -> Option<Problem> {
    match kind {
        Kind::Code => None,
        Kind::Strict => a
            .chars()
            .find(|c| crate::words::is_metachar(*c))
            .map(Problem::Meta),
        Kind::Pattern | Kind::Operand | Kind::Opt => {
            if kind != Kind::Opt && is_syntax(a) {
                return Some(Problem::Syntax);
            }
            if a.starts_with('~') {
                return Some(Problem::Tilde);
            }
            if let Some(s) = substitution(a) {
                return Some(Problem::Substitution(s));
            }
            if kind == Kind::Operand {
                return glob(a).map(Problem::Glob);
            }
            None
        }
    }
}

/// Wholly shell syntax: an operator, a redirection, or a word glued to a pipe or list operator.
fn is_syntax(a: &str) -> bool {
    if matches!(a, "|" | "||" | "&" | "&&" | ";" | ";;" | "|&" | "(" | ")") {
        return true;
    }
    let after_fd = a.trim_start_matches(|c: char| c.is_ascii_digit());
    if after_fd.starts_with('>') || after_fd.starts_with('<') || after_fd.starts_with("&>") {
        return true;
    }
    a.starts_with('|')
        || a.starts_with(';')
        || a.starts_with("&&")
        || a.ends_with('|') && !a.ends_with("\\|")
        || a.ends_with("&&")
}

/// The start of a shell substitution in `a`, if any: `$(`, a backtick, `${`, `$'`, `$"` or a
/// parameter (`$NAME`, `$1`, `$?`, `$$`, `$@`, `$*`, `$#`, `$!`, `$-`), not after a `\`.
fn substitution(a: &str) -> Option<String> {
    let bytes = a.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let escaped = i > 0 && bytes[i - 1] == b'\\';
        if b == b'`' && !escaped {
            return Some("`".to_owned());
        }
        if b != b'$' || escaped {
            continue;
        }
        let Some(&n) = bytes.get(i + 1) else {
            continue;
        };
        if n == b'(' || n == b'{' || n == b'\'' || n == b'"' {
            return Some(format!("${}", n as char));
        }
        if n.is_ascii_alphabetic() || n == b'_' {
            let end = bytes[i + 1..]
                .iter()
                .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
                .map_or(bytes.len(), |p| i + 1 + p);
            return Some(a[i..end].to_owned());
        }
        if n.is_ascii_digit() || b"?$@*#!-".contains(&n) {
            return Some(format!("${}", n as char));
        }
    }
    None
}

/// The glob character of a path operand, if any: `*`, `?`, a bracket class (`[0-9]`, `[!a]`)
/// or a brace list (`{c,h}`, `{1..3}`). Text with whitespace and URLs are not paths.
fn glob(a: &str) -> Option<char> {
    if a.chars().any(char::is_whitespace) || a.contains("://") {
        return None;
    }
    if let Some(c) = a.chars().find(|c| matches!(c, '*' | '?')) {
        return Some(c);
    }
    let class = |c: char| c.is_ascii_alphanumeric() || matches!(c, '!' | '^' | '-' | '_' | '.');
    if let Some(open) = a.find('[') {
        if let Some(len) = a[open + 1..].find(']') {
            let inner = &a[open + 1..open + 1 + len];
            if !inner.is_empty() && inner.chars().all(class) {
                return Some('[');
            }
        }
    }
    if let Some(open) = a.find('{') {
        if let Some(len) = a[open + 1..].find('}') {
            let inner = &a[open + 1..open + 1 + len];
            let list = |c: char| class(c) || matches!(c, ',' | '/');
            if (inner.contains(',') || inner.contains("..")) && inner.chars().all(list) {
                return Some('{');
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    fn first(a: &[&str]) -> Option<(usize, Problem)> {
        first_problem(&argv(a), &[])
    }

    #[test]
    fn program_text_and_patterns_are_data() {
        for a in [
            &["python3", "-c", "print(1)"][..],
            &["python3.12", "-uc", "import sys; print(sys.argv[1:])", "a"],
            &["node", "-e", "console.log(1+1)"],
            &["node", "--eval=console.log(`x`)"],
            &["awk", "{print $1}", "f"],
            &["awk", "-F", "|", "-v", "x=$y", "{print $(NF-1)}", "f"],
            &["awk", "-F|", "{print $1}"],
            &["grep", "-E", "a|b", "f"],
            &["grep", "-n", "-e", "x*", "-e", "$this->y", "src"],
            &["grep", "-m", "5", "a.*b", "f"],
            &["rg", "-g", "*.rs", "fn .*\\(", "src"],
            &["jq", ".[] | .name", "x.json"],
            &[
                "jq",
                "--arg",
                "v",
                "$x",
                "--argjson",
                "o",
                "{\"a\":[1,2]}",
                ".a",
                "f",
            ],
            &["yq", "eval", ".a[0]", "f.yaml"],
            &["find", ".", "-name", "*.rs"],
            &[
                "find", ".", "(", "-name", "*.c", "-o", "-iname", "*.H", ")", "!", "-path", "./t/*",
            ],
            &["find", ".", "-regex", ".*\\.rs$", "-printf", "%p (%s)\n"],
            &["git", "log", "--format=%h (%an)"],
            &["git", "ls-files", "*.rs"],
            &["git", "log", "-S", "$x", "--", "src/*.rs"],
            &["git", "commit", "-m", "fix: a|b (x) $5 *really*"],
            &["git", "grep", "-n", "$this", "--", "*.php"],
            &["git", "show", "HEAD~1:src/a.rs"],
            &["perl", "-ne", "print if /x$/", "f"],
            &["ruby", "-e", "puts `ls`"],
            &[
                "curl",
                "-d",
                "{\"a\":[1]}",
                "-H",
                "X: $y",
                "https://x/?a=[1-3]&b=*",
            ],
            &["kubectl", "get", "pods", "-o", "jsonpath={.items[*].name}"],
            &["npx", "prettier", "--check", "src/**/*.ts"],
            &["env", "A=1", "timeout", "5", "grep", "-E", "a|b", "f"],
            &["xargs", "-0", "grep", "x.*y"],
            &["sudo", "grep", "-E", "a|b", "/etc/x"],
            &["ls", "--hide=*.o", "--ignore", "*.d"],
            &[
                "echo", "a b*", "c,d", "e=f", "{}", "x!y", "#z", "a|b", "a(b)", "a~b", "x\ny",
            ],
            &["test", "(", "-f", "x", ")", "!", "-d", "y"],
            &["printf", "%s\\n", "$"],
            &["grep", "-c", "\\$HOME", "f"],
        ] {
            assert_eq!(first(a), None, "{a:?}");
        }
    }

    #[test]
    fn shell_forms_are_refused() {
        for (a, i, p) in [
            (&["ls", "|", "wc"][..], 1, Problem::Syntax),
            (&["make", "&&", "make", "test"], 1, Problem::Syntax),
            (&["echo", "hi", ">", "f"], 2, Problem::Syntax),
            (&["cmd", "2>&1"], 1, Problem::Syntax),
            (&["cmd", "2>/dev/null"], 1, Problem::Syntax),
            (&["cmd", ">out"], 1, Problem::Syntax),
            (&["cmd", "&>log"], 1, Problem::Syntax),
            (&["cat", "<<EOF"], 1, Problem::Syntax),
            (&["ls", "|wc"], 1, Problem::Syntax),
            (&["ls", ";", "pwd"], 1, Problem::Syntax),
            (&["sleep", "1", "&"], 2, Problem::Syntax),
            (&["cat", "~/x"], 1, Problem::Tilde),
            (&["ls", "~"], 1, Problem::Tilde),
            (&["echo", "$(id)"], 1, Problem::Substitution("$(".into())),
            (&["echo", "`id`"], 1, Problem::Substitution("`".into())),
            (&["echo", "${HOME}"], 1, Problem::Substitution("${".into())),
            (
                &["echo", "$HOME/x"],
                1,
                Problem::Substitution("$HOME".into()),
            ),
            (
                &["echo", "--dir=$PWD"],
                1,
                Problem::Substitution("$PWD".into()),
            ),
            (&["cat", "*.txt"], 1, Problem::Glob('*')),
            (&["rm", "*.log"], 1, Problem::Glob('*')),
            (&["ls", "src/*.rs"], 1, Problem::Glob('*')),
            (&["cat", "file?.txt"], 1, Problem::Glob('?')),
            (&["cat", "log[0-9]"], 1, Problem::Glob('[')),
            (&["cp", "a.{c,h}", "d"], 1, Problem::Glob('{')),
            (&["grep", "x", "*.txt"], 2, Problem::Glob('*')),
            (&["awk", "{print}", "*.csv"], 2, Problem::Glob('*')),
            (&["find", "*.d", "-name", "x"], 1, Problem::Glob('*')),
            (&["find", ".", "-name", "~x"], 3, Problem::Tilde),
            (
                &["find", ".", "-exec", "cat", "*.x", ";"],
                4,
                Problem::Glob('*'),
            ),
            (
                &["find", ".", "-exec", "grep", "x", "{}", ";"],
                6,
                Problem::Syntax,
            ),
            (&["git", "log", "|", "wc"], 2, Problem::Syntax),
            (&["git", "-C", "~/p", "log"], 2, Problem::Tilde),
            (
                &["env", "timeout", "5", "cat", "*.txt"],
                4,
                Problem::Glob('*'),
            ),
            (
                &["python3", "x.py", "$(id)"],
                2,
                Problem::Substitution("$(".into()),
            ),
            (&["*.sh"], 0, Problem::Glob('*')),
            (&["sh", "-c", "ls", "x|y"], 3, Problem::Meta('|')),
            (&["bash", "run.sh", "a(b"], 2, Problem::Meta('(')),
            (&["env", "sh", "-c", "ls", "a b*"], 4, Problem::Meta('*')),
        ] {
            let skip: Vec<usize> = if a.contains(&"-c") && a.contains(&"sh") {
                vec![a.iter().position(|x| *x == "-c").unwrap() + 1]
            } else {
                Vec::new()
            };
            assert_eq!(first_problem(&argv(a), &skip), Some((i, p)), "{a:?}");
        }
    }

    #[test]
    fn substitutions_are_found_where_a_shell_would_expand_them() {
        assert_eq!(substitution("a$"), None);
        assert_eq!(substitution("a$|b"), None);
        assert_eq!(substitution("\\$x"), None);
        assert_eq!(substitution("$1"), Some("$1".into()));
        assert_eq!(substitution("x$?"), Some("$?".into()));
        assert_eq!(substitution("$'\\n'"), Some("$'".into()));
        assert_eq!(substitution("a${b}"), Some("${".into()));
        assert_eq!(substitution("é$é"), None);
    }

    #[test]
    fn globs_need_a_path_like_operand() {
        assert_eq!(glob("a*b"), Some('*'));
        assert_eq!(glob("[1,2]"), None, "JSON-like data");
        assert_eq!(glob("{\"a\":1,\"b\":2}"), None, "JSON");
        assert_eq!(glob("{}"), None);
        assert_eq!(glob("x[1]"), Some('['));
        assert_eq!(glob("f{1..3}"), Some('{'));
        assert_eq!(glob("what is * here"), None);
        assert_eq!(glob("https://x/?q=1"), None);
        assert_eq!(glob("[unclosed"), None);
    }
}
