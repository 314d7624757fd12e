//! Launchers: programs whose arguments name another program to start.
//!
//! A *known* launcher has its options parsed from its manual, so the command it starts is found
//! exactly and validated as if it stood alone (`env rm x` is `rm`). An option we do not know is
//! refused rather than guessed: guessing wrong (`timeout -s KILL 5 rm x`, with `-s` unknown,
//! would make `5` the command) would let the real command through unseen. An *opaque* launcher
//! (`strace`, `chroot`, `unshare`, …) has options too varied to parse; any of its arguments that
//! names a refused program refuses the call.

use std::ops::Range;

use crate::model::{Refusal, RefuseCode};
use crate::script::Word;

/// How a command starts others.
#[derive(Debug)]
pub enum Plan {
    /// It starts nothing given in its arguments.
    NotLauncher,
    /// A launcher invoked so that it starts nothing (`command -v x`, `env` alone).
    Query,
    /// The commands it starts: each range of the arguments is one command line.
    Inner {
        /// Argument ranges, each starting at a command word.
        ranges: Vec<Range<usize>>,
        /// Whether a read-only inner command keeps the whole call read-only.
        passes_ro: bool,
        /// `NAME=value` arguments (of `env`), to be checked like shell assignments.
        assigns: Vec<(String, Word)>,
    },
    /// Starts a command found somewhere in its arguments, with options we do not parse.
    Opaque,
}

struct Spec {
    name: &'static str,
    flags: &'static [&'static str],
    valued: &'static [&'static str],
    /// Short options whose value may be attached (`-oL`, `-n5`).
    attached: &'static [char],
    /// Options after which the launcher starts nothing.
    query: &'static [&'static str],
    /// Options that make the launcher write a file (cancel read-only).
    writes: &'static [&'static str],
    /// Operands before the command (`timeout DURATION`).
    operands: usize,
    passes_ro: bool,
}

const SPECS: &[Spec] = &[
    Spec {
        name: "env",
        flags: &[
            "-i",
            "--ignore-environment",
            "-0",
            "--null",
            "-v",
            "--debug",
            "-",
        ],
        valued: &["-u", "--unset", "-C", "--chdir"],
        attached: &['u', 'C'],
        query: &[],
        writes: &[],
        operands: 0,
        passes_ro: true,
    },
    Spec {
        name: "command",
        flags: &["-p"],
        valued: &[],
        attached: &[],
        query: &["-v", "-V", "-pv", "-pV"],
        writes: &[],
        operands: 0,
        passes_ro: true,
    },
    Spec {
        name: "builtin",
        flags: &[],
        valued: &[],
        attached: &[],
        query: &[],
        writes: &[],
        operands: 0,
        passes_ro: true,
    },
    Spec {
        name: "exec",
        flags: &["-c", "-l", "-cl", "-lc"],
        valued: &["-a"],
        attached: &[],
        query: &[],
        writes: &[],
        operands: 0,
        passes_ro: true,
    },
    Spec {
        name: "nice",
        flags: &[],
        valued: &["-n", "--adjustment"],
        attached: &['n'],
        query: &[],
        writes: &[],
        operands: 0,
        passes_ro: true,
    },
    Spec {
        name: "nohup",
        flags: &[],
        valued: &[],
        attached: &[],
        query: &["--help", "--version"],
        writes: &[],
        operands: 0,
        passes_ro: false,
    },
    Spec {
        name: "timeout",
        flags: &[
            "--preserve-status",
            "--foreground",
            "-v",
            "--verbose",
            "-f",
            "-p",
        ],
        valued: &["-s", "--signal", "-k", "--kill-after"],
        attached: &['s', 'k'],
        query: &["--help", "--version"],
        writes: &[],
        operands: 1,
        passes_ro: true,
    },
    Spec {
        name: "time",
        flags: &[
            "-p",
            "-v",
            "--verbose",
            "-a",
            "--append",
            "-q",
            "--quiet",
            "--portability",
        ],
        valued: &["-f", "--format", "-o", "--output"],
        attached: &[],
        query: &["--help", "--version"],
        writes: &["-o", "--output"],
        operands: 0,
        passes_ro: true,
    },
    Spec {
        name: "stdbuf",
        flags: &[],
        valued: &["-i", "-o", "-e", "--input", "--output", "--error"],
        attached: &['i', 'o', 'e'],
        query: &["--help", "--version"],
        writes: &[],
        operands: 0,
        passes_ro: true,
    },
    Spec {
        name: "setsid",
        flags: &["-c", "--ctty", "-f", "--fork", "-w", "--wait"],
        valued: &[],
        attached: &[],
        query: &["--help", "--version"],
        writes: &[],
        operands: 0,
        passes_ro: false,
    },
    Spec {
        name: "xargs",
        flags: &[
            "-0",
            "--null",
            "-r",
            "--no-run-if-empty",
            "-t",
            "--verbose",
            "-p",
            "--interactive",
            "-x",
            "--exit",
            "-o",
            "--open-tty",
        ],
        valued: &[
            "-a",
            "--arg-file",
            "-d",
            "--delimiter",
            "-E",
            "--eof",
            "-I",
            "-L",
            "--max-lines",
            "-n",
            "--max-args",
            "-P",
            "--max-procs",
            "-s",
            "--max-chars",
            "--process-slot-var",
        ],
        attached: &['a', 'd', 'E', 'e', 'I', 'i', 'L', 'l', 'n', 'P', 's'],
        query: &["--help", "--version", "--show-limits"],
        writes: &[],
        operands: 0,
        passes_ro: true,
    },
    Spec {
        name: "ionice",
        flags: &["-t", "--ignore"],
        valued: &["-c", "--class", "-n", "--classdata"],
        attached: &['c', 'n'],
        query: &["--help", "--version"],
        writes: &[],
        operands: 0,
        passes_ro: true,
    },
    Spec {
        name: "busybox",
        flags: &[],
        valued: &[],
        attached: &[],
        query: &["--help", "--list", "--list-full"],
        writes: &[],
        operands: 0,
        passes_ro: true,
    },
    Spec {
        name: "toybox",
        flags: &[],
        valued: &[],
        attached: &[],
        query: &["--help", "--version"],
        writes: &[],
        operands: 0,
        passes_ro: true,
    },
    Spec {
        name: "npx",
        flags: &[
            "-y",
            "--yes",
            "--no",
            "-q",
            "--quiet",
            "--no-install",
            "--ignore-existing",
        ],
        valued: &["-p", "--package"],
        attached: &[],
        query: &["--help", "--version", "-v"],
        writes: &[],
        operands: 0,
        passes_ro: false,
    },
    Spec {
        name: "pnpx",
        flags: &["-y", "--yes"],
        valued: &["-p", "--package"],
        attached: &[],
        query: &["--help", "--version"],
        writes: &[],
        operands: 0,
        passes_ro: false,
    },
    Spec {
        name: "bunx",
        flags: &["--bun", "--silent"],
        valued: &["-p", "--package"],
        attached: &[],
        query: &["--help", "--version"],
        writes: &[],
        operands: 0,
        passes_ro: false,
    },
];

/// Programs that start a command named somewhere in their arguments, with options too varied
/// to parse here. Their arguments are scanned instead (see [`Plan::Opaque`]).
pub const OPAQUE: &[&str] = &[
    "chrt",
    "taskset",
    "unshare",
    "nsenter",
    "chroot",
    "prlimit",
    "numactl",
    "strace",
    "ltrace",
    "valgrind",
    "gdb",
    "lldb",
    "perf",
    "script",
    "sg",
    "firejail",
    "bwrap",
    "systemd-run",
    "systemd-inhibit",
    "caffeinate",
    "setarch",
    "linux32",
    "linux64",
    "unbuffer",
    "rlwrap",
    "tini",
    "dumb-init",
    "proxychains",
    "proxychains4",
    "torsocks",
    "catchsegv",
    "faketime",
    "fakeroot",
    "fakechroot",
    "ssh-agent",
    "dbus-run-session",
    "xvfb-run",
    "parallel",
    "sem",
    "flock",
    "daemonize",
    "start-stop-daemon",
    "su-exec",
    "gosu",
    "setpriv",
    "capsh",
    "ts",
    "chpst",
    "softlimit",
    "envdir",
    "setuidgid",
    "sandbox-exec",
    "arch",
    "watch",
    "entr",
    "watchexec",
];

/// The launcher plan for `name` with `args`.
pub fn plan(name: &str, args: &[Word]) -> Result<Plan, Refusal> {
    if name == "find" {
        return Ok(find_plan(args));
    }
    if name == "arch" && args.is_empty() {
        return Ok(Plan::NotLauncher);
    }
    if OPAQUE.contains(&name) {
        return Ok(Plan::Opaque);
    }
    let Some(spec) = SPECS.iter().find(|s| s.name == name) else {
        return Ok(Plan::NotLauncher);
    };
    let mut i = 0;
    let mut passes_ro = spec.passes_ro;
    while i < args.len() {
        let a = static_arg(name, &args[i])?;
        if a == "--" {
            i += 1;
            break;
        }
        if spec.query.contains(&a) {
            return Ok(Plan::Query);
        }
        let is_option = a.starts_with('-') && a.len() > 1 || name == "env" && a == "-";
        if !is_option {
            break;
        }
        if spec
            .writes
            .iter()
            .any(|w| a == *w || a.starts_with(&format!("{w}=")))
        {
            passes_ro = false;
        }
        if spec.flags.contains(&a) {
            i += 1;
            continue;
        }
        if spec.valued.contains(&a) {
            i += 2;
            continue;
        }
        if let Some((long, _)) = a.split_once('=') {
            if long.starts_with("--") && spec.valued.contains(&long) {
                i += 1;
                continue;
            }
        }
        let mut chars = a.chars();
        chars.next();
        if let Some(c) = chars.next() {
            if a.len() > 2 && !a.starts_with("--") && spec.attached.contains(&c) {
                i += 1;
                continue;
            }
        }
        if name == "nice" && a[1..].chars().all(|c| c.is_ascii_digit()) {
            i += 1;
            continue;
        }
        return Err(Refusal::new(
            RefuseCode::NotStatic,
            format!(
                "`{name}` is given the option `{a}`, which this tool does not know, so it \
                 cannot tell which command `{name}` starts; drop the option or run the command \
                 directly"
            ),
        ));
    }
    for _ in 0..spec.operands {
        if i < args.len() {
            static_arg(name, &args[i])?;
            i += 1;
        }
    }
    let mut assigns = Vec::new();
    if name == "env" {
        while i < args.len() {
            let a = static_arg(name, &args[i])?;
            match a.split_once('=') {
                Some((n, v)) if is_var_name(n) => {
                    assigns.push((n.to_owned(), Word::literal(v)));
                    passes_ro = false;
                    i += 1;
                }
                _ => break,
            }
        }
    }
    if i >= args.len() {
        return Ok(Plan::Query);
    }
    Ok(Plan::Inner {
        ranges: std::iter::once(i..args.len()).collect(),
        passes_ro,
        assigns,
    })
}

/// `find … -exec cmd … ;` (also `-execdir`, `-ok`, `-okdir`, ended by `;` or `+`).
fn find_plan(args: &[Word]) -> Plan {
    let mut ranges = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].value.as_deref().unwrap_or("");
        if matches!(a, "-exec" | "-execdir" | "-ok" | "-okdir") {
            let start = i + 1;
            let mut j = start;
            while j < args.len() && !matches!(args[j].value.as_deref(), Some(";" | "+")) {
                j += 1;
            }
            if j > start {
                ranges.push(start..j);
            }
            i = j + 1;
        } else {
            i += 1;
        }
    }
    if ranges.is_empty() {
        Plan::NotLauncher
    } else {
        Plan::Inner {
            ranges,
            passes_ro: false,
            assigns: Vec::new(),
        }
    }
}

fn static_arg<'a>(name: &str, w: &'a Word) -> Result<&'a str, Refusal> {
    w.fixed().ok_or_else(|| {
        Refusal::new(
            RefuseCode::NotStatic,
            format!(
                "`{name}` is given `{}`, which is computed at run time, so the command it \
                 starts cannot be checked; write its options and the command name out",
                w.raw
            ),
        )
    })
}

/// A shell variable name.
pub fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
