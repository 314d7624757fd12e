//! Per-command validation shared by argv and scripts (RC-2, RC-3, RC-4, RC-5, RC-11, RC-15).
//!
//! One function, [`Checker::command`], validates a command given by name and arguments, wherever
//! it was found: at the top of the argv, in a script, or behind a launcher. It returns whether
//! the command is a read-only allowlist hit (RC-9), or the refusal.
//!
//! Environment assignments (`NAME=v cmd`, a bare `NAME=v`, `export`, `env NAME=v cmd`) follow
//! one rule in three tiers: a variable that decides which program a name starts or injects code
//! into every program (`PATH`, `LD_*`, `DYLD_*`, `BASH_ENV`, `GCONV_PATH`, …) is refused; a
//! variable whose value is a command line (`GIT_EXTERNAL_DIFF`, `GIT_SSH_COMMAND`, `PAGER`, …)
//! has that command validated, and the command it applies to is read-only only when that one
//! is; a variable that makes a program read another configuration or load other code (`GIT_*`,
//! `TAR_OPTIONS`, `HOME`, `XDG_*`, `PYTHON*`, `NODE_OPTIONS`, …) is allowed but not read-only.
//! `export`/`declare` and `env NAME=v` are never read-only at all.

use std::cell::RefCell;

use crate::launch::{self, Plan};
use crate::model::{Context, Os, Refusal, RefuseCode};
use crate::policy::Policy;
use crate::readonly;
use crate::script::{self, Cmd, MAX_DEPTH, Word};
use crate::watch::Tracer;
use crate::words::is_bare_name;

/// Names that change user or privilege; only `['sudo', …]` at the top of an argv is accepted
/// (RC-11).
pub const SUDO_LIKE: &[&str] = &["sudo", "su", "doas", "pkexec", "run0", "runuser"];

/// Shells. `sh`, `bash` and `dash` scripts given with `-c` are parsed (RC-2); the others are
/// not, so a script for them is refused.
pub const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "rbash", "zsh", "ksh", "mksh", "pdksh", "ash", "yash", "posh", "fish",
    "csh", "tcsh", "nu", "elvish", "xonsh", "pwsh",
];

const PARSED_SHELLS: &[&str] = &["sh", "bash", "dash"];

/// Builtins that change what a later command name runs; refused in scripts.
const NAME_CHANGERS: &[&str] = &["alias", "unalias", "hash", "enable"];

/// Variables that decide which program a bare name starts or inject code into every program;
/// assigning them is refused (RC-2's bare-name rule would mean nothing otherwise).
fn is_dangerous_var(name: &str) -> bool {
    matches!(
        name,
        "PATH"
            | "BASH_ENV"
            | "ENV"
            | "SHELLOPTS"
            | "BASHOPTS"
            | "PS4"
            | "IFS"
            | "GLOBIGNORE"
            | "PROMPT_COMMAND"
            | "BASH_LOADABLES_PATH"
            | "EXECIGNORE"
            // glibc loads the modules named here into any program that converts a charset,
            // the same injection as LD_PRELOAD.
            | "GCONV_PATH"
    ) || name.starts_with("LD_")
        || name.starts_with("DYLD_")
        || name.starts_with("BASH_FUNC_")
}

/// Variables (besides [`COMMAND_VARS`]) that make a program read another configuration, load
/// other code or run another program (`GIT_DIR=evil git status` runs `evil/config`'s
/// `core.fsmonitor`; `TAR_OPTIONS=--checkpoint-action=exec=…`; `NODE_OPTIONS=--require …`).
/// Assigning one is allowed (`PYTHONPATH=src pytest` is everyday use) but the command is then not
/// read-only, so it asks under `safe` (RC-9). Matched on the upper-cased name, by prefix for a
/// tool's whole namespace; names outside this list (`X=1 ls`, `LANG=C sort`) keep a hit.
const STEERING_PREFIXES: &[&str] = &[
    "GIT_",
    "TAR_",
    "PYTHON",
    "NODE_",
    "NPM_CONFIG_",
    "YARN_",
    "PNPM_",
    "BUN_",
    "DENO_",
    "PERL",
    "RUBY",
    "GEM_",
    "BUNDLE_",
    "JAVA",
    "_JAVA_",
    "JDK_JAVA_",
    "MAVEN_",
    "GRADLE_",
    "CARGO_",
    "RUSTUP_",
    "RUSTC",
    "RUSTDOC",
    "GO",
    "PIP_",
    "UV_",
    "POETRY_",
    "CONDA",
    "COMPOSER",
    "DOTNET_",
    "MSBUILD",
    "HELM_",
    "TF_",
    "KUBE",
    "DOCKER_",
    "CONTAINERS_",
    "AWS_",
    "CLOUDSDK_",
    "AZURE_",
    "SSH_",
    "GNUPG",
    "GPG_",
    "LESS",
    "MAN",
    "XDG_",
    "XZ_",
    "ZSTD_",
    "BAT_",
    "RIPGREP_",
    "FZF_",
    "OPENSSL_",
    "GCONV_",
    "TERMINFO",
    // `PHPRC`, `PHP_INI_SCAN_DIR`; pipx; `APT_CONFIG`; groff's macro and font paths.
    "PHP",
    "PIPX_",
    "APT_",
    "GROFF_",
];

/// Single variables of the same kind as [`STEERING_PREFIXES`].
const STEERING_VARS: &[&str] = &[
    "HOME",
    "ZDOTDIR",
    "INPUTRC",
    "SHELL",
    "LOCPATH",
    "NLSPATH",
    "HOSTALIASES",
    "GZIP",
    "BZIP",
    "BZIP2",
    "GREP_OPTIONS",
    "CLASSPATH",
    "CC",
    "CXX",
    "CPP",
    "LD",
    "AR",
    "MAKEFLAGS",
    "MFLAGS",
    "MAKEFILES",
    "EMACSLOADPATH",
    "VIMINIT",
    "EXINIT",
    "MYVIMRC",
    "WGETRC",
    "CURL_HOME",
    "SQLITE_HISTORY",
    "PSQLRC",
    "MYSQL_HOME",
    // zgrep runs `${GREP-grep}`; man, git and zless run `$PAGER`.
    "GREP",
    "PAGER",
];

/// Variables that keep a hit although their prefix is listed: they only tune output or take
/// away a capability.
const STEERING_EXCEPTIONS: &[&str] = &["GIT_OPTIONAL_LOCKS", "GIT_TERMINAL_PROMPT"];

fn is_steering_var(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if STEERING_EXCEPTIONS.contains(&upper.as_str()) {
        return false;
    }
    STEERING_VARS.contains(&upper.as_str())
        || STEERING_PREFIXES.iter().any(|p| upper.starts_with(p))
}

/// Variables whose value is a command line some program runs; the command in it is validated
/// like any other.
const COMMAND_VARS: &[&str] = &[
    "GIT_EXTERNAL_DIFF",
    "GIT_SSH_COMMAND",
    "GIT_SSH",
    "GIT_PAGER",
    "PAGER",
    "MANPAGER",
    "EDITOR",
    "VISUAL",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "SUDO_ASKPASS",
    "SSH_ASKPASS",
    "GIT_ASKPASS",
    "LESSOPEN",
    "LESSCLOSE",
    "GIT_PROXY_COMMAND",
    "RSYNC_RSH",
    "CVS_RSH",
    "BROWSER",
    "SYSTEMD_PAGER",
    "KUBECTL_EXTERNAL_DIFF",
];

/// Where a command was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// `argv[0]` itself.
    Top,
    /// A simple command of a script.
    Script,
    /// Started by a launcher (`env`, `xargs`, `find -exec`, …).
    Launched,
}

/// Validates commands for one decision.
#[derive(Debug)]
pub struct Checker<'a> {
    /// The merged configuration.
    pub policy: &'a Policy,
    /// The session.
    pub ctx: &'a Context,
    tracer: RefCell<Tracer>,
}

fn not_static(msg: String) -> Refusal {
    Refusal::new(RefuseCode::NotStatic, msg)
}

/// The refusal for `rm` where only the argv form is accepted (RC-4).
pub fn rm_in_script(place: Place) -> Refusal {
    let where_ = if place == Place::Script {
        "inside `sh -c`"
    } else {
        "behind another program"
    };
    Refusal::new(
        RefuseCode::RmInScript,
        format!(
            "`rm` {where_} is refused: run it as its own call, ['rm', '<path>', …], which moves \
             the files to the trash instead of deleting them"
        ),
    )
}

fn sudo_in_script(name: &str, place: Place) -> Refusal {
    let where_ = if place == Place::Script {
        "inside `sh -c`"
    } else {
        "behind another program"
    };
    Refusal::new(
        RefuseCode::SudoInScript,
        format!(
            "`{name}` {where_} is refused: use the argv form ['sudo', '<binary>', …] as its own \
             call (no sudo flags); it asks for confirmation and the system password"
        ),
    )
}

fn denied(name: &str) -> Refusal {
    Refusal::new(
        RefuseCode::Denied,
        format!(
            "`{name}` is on the denied command list and is never run; do the task another way \
             or ask the user to run it"
        ),
    )
}

/// The refusal for a watcher (RC-15).
pub fn watcher(why: &str) -> Refusal {
    Refusal::new(
        RefuseCode::Watcher,
        format!(
            "{why}. A file watcher never ends, and run_command waits for the end: start it with \
             background_command (set timeout_min), or run a one-shot build instead"
        ),
    )
}

impl<'a> Checker<'a> {
    /// A checker for one decision.
    pub fn new(policy: &'a Policy, ctx: &'a Context) -> Self {
        Checker {
            policy,
            ctx,
            tracer: RefCell::new(Tracer::new()),
        }
    }

    /// Parses and validates a script; `Ok(true)` when every command in it is read-only and it
    /// neither writes through a redirect nor defines a function.
    pub fn script(&self, text: &str, depth: usize) -> Result<bool, Refusal> {
        let parsed = script::parse(text, &self.ctx.home, depth)?;
        let mut ro = !parsed.functions && !parsed.writes;
        let workdir = &self.ctx.workdir;
        for w in &parsed.other_words {
            if let Some(v) = w.fixed() {
                let sensitive = crate::paths::candidate_paths(v, workdir, &self.ctx.home)
                    .iter()
                    .any(|p| self.policy.is_sensitive_in(p, self.ctx));
                if sensitive {
                    ro = false;
                }
            }
        }
        // After `cd`, a `git` finds the repository of another directory, which may be one the
        // agent made (a nested `.git/config`, or a bare layout) whose `core.fsmonitor` runs on
        // `git status`; only the working directory's own configuration is protected (RCS-3).
        let word_is = |c: &Cmd, names: &[&str]| {
            c.words
                .iter()
                .any(|w| w.fixed().is_some_and(|v| names.contains(&v)))
        };
        let moves = parsed.cmds.iter().any(|c| {
            c.words
                .first()
                .and_then(Word::fixed)
                .is_some_and(|v| matches!(v, "cd" | "pushd" | "popd"))
        });
        if moves && parsed.cmds.iter().any(|c| word_is(c, &["git"])) {
            ro = false;
        }
        for cmd in &parsed.cmds {
            // Every command is checked even after one is found not read-only.
            let cmd_ro = self.simple(cmd, depth)?;
            ro = ro && cmd_ro;
        }
        Ok(ro)
    }

    fn simple(&self, cmd: &Cmd, depth: usize) -> Result<bool, Refusal> {
        // A bare `HOME=evil` changes an exported variable for every later command, so an
        // assignment without a command counts as well as a prefix assignment.
        let mut ro = true;
        for (name, value) in &cmd.assigns {
            ro &= self.assignment(name, value, depth)?;
        }
        let Some((first, args)) = cmd.words.split_first() else {
            return Ok(ro);
        };
        let name = self.command_word(first)?;
        let cmd_ro = self.command(name, args, depth, Place::Script)?;
        Ok(ro && cmd_ro)
    }

    fn command_word<'w>(&self, w: &'w Word) -> Result<&'w str, Refusal> {
        match (&w.value, w.plain) {
            (Some(v), true) if is_bare_name(v) => Ok(v),
            (None, _) => Err(not_static(format!(
                "the command word `{}` is computed when the script runs ($( ), backticks, \
                 variables), so it cannot be checked; write the command name itself",
                w.raw
            ))),
            (Some(v), _) if v.contains('/') => Err(not_static(format!(
                "the command word `{}` is a path; write the bare command name (it is found \
                 through PATH)",
                w.raw
            ))),
            (Some(_), _) => Err(not_static(format!(
                "the command word `{}` is quoted, escaped or not a plain name; write the bare \
                 command name without quotes or backslashes",
                w.raw
            ))),
        }
    }

    /// Validates an assignment (`NAME=value`) made by a script, `env`, `export` and the like.
    /// `Ok(false)` when the assignment makes the command it applies to not read-only: a
    /// [`COMMAND_VARS`] value that is not itself read-only, or a steering variable
    /// ([`is_steering_var`]). The variables of [`is_dangerous_var`] are refused.
    fn assignment(&self, name: &str, value: &Word, depth: usize) -> Result<bool, Refusal> {
        if is_dangerous_var(name) {
            return Err(Refusal::new(
                RefuseCode::EnvironmentDenied,
                format!(
                    "setting `{name}` is refused: it would change which program a command name \
                     starts or inject code into it; run the command with the default environment"
                ),
            ));
        }
        if COMMAND_VARS.contains(&name) {
            let Some(v) = value.fixed() else {
                return Err(not_static(format!(
                    "`{name}` names a command that a program will run, and its value is computed \
                     at run time; write it out"
                )));
            };
            let line = v.trim_start_matches('|');
            let words: Vec<Word> = line.split_whitespace().map(Word::literal).collect();
            return match words.split_first() {
                Some((first, rest)) => {
                    let cmd = self.command_word(first)?;
                    self.command(cmd, rest, depth + 1, Place::Launched)
                }
                None => Ok(true),
            };
        }
        Ok(!is_steering_var(name))
    }

    /// Validates `name args` found at `place`. `Ok(true)` for a read-only allowlist hit.
    pub fn command(
        &self,
        name: &str,
        args: &[Word],
        depth: usize,
        place: Place,
    ) -> Result<bool, Refusal> {
        if depth > MAX_DEPTH {
            return Err(Refusal::new(
                RefuseCode::ScriptUnparsable,
                format!("commands nest deeper than {MAX_DEPTH} levels; flatten the command"),
            ));
        }
        if place != Place::Top {
            if name == "rm" {
                return Err(rm_in_script(place));
            }
            if SUDO_LIKE.contains(&name) {
                return Err(sudo_in_script(name, place));
            }
            if name == "cd" {
                // RC-3: `cd` is how a script changes directory; harmless on its own.
                return Ok(true);
            }
        }
        if name == "open" && self.ctx.os == Os::MacOs {
            return Err(open_refusal());
        }
        if self.policy.is_denied(name) {
            return Err(denied(name));
        }
        if NAME_CHANGERS.contains(&name) {
            return Err(Refusal::new(
                RefuseCode::Denied,
                format!(
                    "`{name}` changes what a command name runs, so later commands could not be \
                     checked; call the command directly"
                ),
            ));
        }
        let fixed: Vec<&str> = args
            .iter()
            .map(|a| a.value.as_deref().unwrap_or(""))
            .collect();
        if self.ctx.watchers_allowed {
            // background_command: a watcher is what it is for (BG-2).
        } else if let Some(why) = crate::watch::direct(name, &fixed) {
            return Err(watcher(&why));
        } else if matches!(name, "npm" | "pnpm" | "yarn" | "bun") {
            let hit =
                self.tracer
                    .borrow_mut()
                    .package(name, &fixed, &self.ctx.workdir, &self.ctx.home);
            if let Some(why) = hit {
                return Err(watcher(&why));
            }
        }
        match name {
            "eval" => {
                let mut parts = Vec::with_capacity(args.len());
                for a in args {
                    parts.push(a.fixed().ok_or_else(|| {
                        not_static(format!(
                            "`eval` is given `{}`, which is computed at run time; write the \
                             commands out instead of building them",
                            a.raw
                        ))
                    })?);
                }
                // `eval` builds its script at run time; even a read-only one is not matched.
                self.script(&parts.join(" "), depth + 1)?;
                return Ok(false);
            }
            "trap" => {
                if let [action, _, ..] = args {
                    let Some(text) = action.fixed() else {
                        return Err(not_static(format!(
                            "the `trap` action `{}` is computed at run time; write it out",
                            action.raw
                        )));
                    };
                    if !text.starts_with('-') {
                        self.script(text, depth + 1)?;
                    }
                }
                return Ok(false);
            }
            "source" | "." => return Ok(false),
            "export" | "declare" | "typeset" | "local" | "readonly" => {
                for a in args {
                    // A computed value (`PATH=.:$PATH`) still has a static name before `=`.
                    let v = a.value.as_deref().unwrap_or(&a.raw);
                    if matches!(name, "declare" | "typeset" | "local")
                        && v.starts_with('-')
                        && v.contains('n')
                    {
                        return Err(Refusal::new(
                            RefuseCode::EnvironmentDenied,
                            "`declare -n` makes a name refer to another variable, which hides \
                             what is assigned; assign variables directly",
                        ));
                    }
                    match v.split_once('=') {
                        Some((n, val)) => {
                            let mut w = Word::literal(val);
                            if a.value.is_none() {
                                w.value = None;
                            }
                            self.assignment(n, &w, depth)?;
                        }
                        None if is_dangerous_var(v) => {
                            self.assignment(v, &Word::literal(""), depth)?;
                        }
                        None => {}
                    }
                }
                return Ok(false);
            }
            "read" | "mapfile" | "readarray" | "getopts" | "printf" => {
                if let Some(v) = fixed.iter().find(|v| is_dangerous_var(v)) {
                    return Err(Refusal::new(
                        RefuseCode::EnvironmentDenied,
                        format!("`{name}` would assign `{v}`; use another variable name"),
                    ));
                }
            }
            _ => {}
        }
        if SHELLS.contains(&name) {
            return self.shell(name, args, depth);
        }
        match launch::plan(name, args)? {
            Plan::NotLauncher => {}
            Plan::Query => return Ok(true),
            Plan::Inner {
                ranges,
                passes_ro,
                assigns,
            } => {
                for (n, v) in &assigns {
                    self.assignment(n, v, depth)?;
                }
                let mut ro = passes_ro;
                for r in ranges {
                    let target = &args[r.start];
                    let tname = self.launched_name(name, target)?;
                    let inner_ro =
                        self.command(tname, &args[r.start + 1..r.end], depth + 1, Place::Launched)?;
                    ro = ro && inner_ro;
                }
                if name == "find" {
                    return Ok(false);
                }
                return Ok(ro);
            }
            Plan::Opaque => {
                self.opaque(name, args, place)?;
                return Ok(false);
            }
        }
        Ok(readonly::is_hit(self.policy, self.ctx, name, args))
    }

    fn launched_name<'w>(&self, launcher: &str, w: &'w Word) -> Result<&'w str, Refusal> {
        match w.fixed() {
            // Plain as in a script's own command word: no quotes or escapes (RC-2).
            Some(v) if is_bare_name(v) && w.plain => Ok(v),
            Some(v) if is_bare_name(v) => Err(not_static(format!(
                "`{launcher}` starts `{}`, which is quoted or escaped; write the bare command \
                 name",
                w.raw
            ))),
            Some(v) => {
                let base = v.rsplit('/').next().unwrap_or(v);
                if base == "rm" {
                    return Err(rm_in_script(Place::Launched));
                }
                if SUDO_LIKE.contains(&base) {
                    return Err(sudo_in_script(base, Place::Launched));
                }
                Err(not_static(format!(
                    "`{launcher}` starts `{v}`, which is not a bare command name; name the \
                     program bare (it is found through PATH)"
                )))
            }
            None => Err(not_static(format!(
                "`{launcher}` starts `{}`, which is computed at run time, so it cannot be \
                 checked; write the command name itself",
                w.raw
            ))),
        }
    }

    /// A launcher whose options we do not parse: every argument that names a refused program
    /// refuses the call.
    fn opaque(&self, name: &str, args: &[Word], place: Place) -> Result<(), Refusal> {
        for a in args {
            let Some(v) = a.fixed() else {
                return Err(not_static(format!(
                    "`{name}` starts another program and is given `{}`, which is computed at \
                     run time; write it out",
                    a.raw
                )));
            };
            let base = v.rsplit('/').next().unwrap_or(v);
            if base == "rm" {
                return Err(rm_in_script(Place::Launched));
            }
            if SUDO_LIKE.contains(&base) {
                return Err(sudo_in_script(base, Place::Launched));
            }
            if self.policy.is_denied(base) {
                return Err(denied(base));
            }
            if SHELLS.contains(&base) || NAME_CHANGERS.contains(&base) || base == "eval" {
                return Err(Refusal::new(
                    RefuseCode::ShellUnsupported,
                    format!(
                        "`{name}` would start `{base}`, whose commands cannot be checked through \
                         `{name}`; run the command without `{name}`"
                    ),
                ));
            }
        }
        let _ = place;
        Ok(())
    }

    /// `sh`/`bash`/`dash` with `-c`: the script is parsed and checked (RC-2). A shell running a
    /// script file runs it inside the sandbox unchecked (not read-only). A shell that would
    /// read its commands from standard input, or another shell given `-c`, is refused.
    fn shell(&self, name: &str, args: &[Word], depth: usize) -> Result<bool, Refusal> {
        match shell_script_position(args)? {
            ShellArgs::Script(pos) => {
                if !PARSED_SHELLS.contains(&name) {
                    return Err(Refusal::new(
                        RefuseCode::ShellUnsupported,
                        format!(
                            "only sh and bash scripts are parsed and checked; write the script \
                             for ['bash', '-c', '<script>'] instead of `{name} -c`"
                        ),
                    ));
                }
                let Some(w) = args.get(pos) else {
                    return Err(Refusal::new(
                        RefuseCode::ArgumentsInvalid,
                        format!("`{name} -c` needs a script after `-c`"),
                    ));
                };
                let Some(text) = w.value.as_deref() else {
                    return Err(not_static(format!(
                        "the script given to `{name} -c` is computed at run time (`{}`), so it \
                         cannot be checked; write the script out",
                        w.raw
                    )));
                };
                self.script(text, depth + 1)
            }
            ShellArgs::File => Ok(false),
            ShellArgs::Info => Ok(true),
            ShellArgs::Stdin => Err(Refusal::new(
                RefuseCode::ShellUnsupported,
                format!(
                    "`{name}` without `-c` or a script file reads its commands from standard \
                     input, where they cannot be checked; pass the script as ['{}', '-c', \
                     '<script>']",
                    if PARSED_SHELLS.contains(&name) {
                        name
                    } else {
                        "bash"
                    }
                ),
            )),
        }
    }
}

/// What a shell's arguments ask it to run.
#[derive(Debug, PartialEq, Eq)]
pub enum ShellArgs {
    /// `-c`: the script is the argument at this index.
    Script(usize),
    /// A script file operand.
    File,
    /// `--version`/`--help`.
    Info,
    /// Commands from standard input.
    Stdin,
}

/// Finds where a shell's script is (POSIX `sh` and bash invocation syntax).
pub fn shell_script_position(args: &[Word]) -> Result<ShellArgs, Refusal> {
    let mut i = 0;
    let mut c_mode = false;
    while i < args.len() {
        let Some(a) = args[i].fixed() else {
            return Err(not_static(format!(
                "a shell option `{}` is computed at run time; write it out",
                args[i].raw
            )));
        };
        if a == "--" || a == "-" {
            i += 1;
            break;
        }
        if matches!(a, "--version" | "--help") {
            return Ok(ShellArgs::Info);
        }
        if matches!(a, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            i += 2;
            continue;
        }
        if a.starts_with("--") {
            i += 1;
            continue;
        }
        if (a.starts_with('-') || a.starts_with('+')) && a.len() > 1 {
            if a.contains('c') {
                c_mode = true;
            }
            if a.contains('s') && !c_mode {
                return Ok(ShellArgs::Stdin);
            }
            i += 1;
            continue;
        }
        break;
    }
    if c_mode {
        return Ok(ShellArgs::Script(i));
    }
    if i < args.len() {
        Ok(ShellArgs::File)
    } else {
        Ok(ShellArgs::Stdin)
    }
}

/// The refusal for `open` on macOS (RC-5).
pub fn open_refusal() -> Refusal {
    Refusal::new(
        RefuseCode::Open,
        "`open` is refused on macOS: the sandbox cannot reach the service that launches apps. \
         Use the open_file tool instead",
    )
}
