//! `decide`: the whole `run_command` decision for one call.
//!
//! Order (validate, then act; the first failing step answers):
//! 1. the argv is well formed (non-empty, no NUL, bounded);
//! 2. no argument holds a mask token (RC-14);
//! 3. `cd` (RC-3) and macOS `open` (RC-5) get their own pointers;
//! 4. no element outside the script of a `sh -c`/`bash -c` shows that a shell was expected
//!    (RC-2: shell syntax, a leading `~`, a substitution, a glob where a path goes; see `shape`);
//! 5. `write_paths` are usable (RC-10);
//! 6. the argv forms: `rm` (RC-4), `sudo` (RC-11), and every other command, scripts included;
//! 7. the gate from the mode, the allowlist, `network`, `write_paths` and `sandbox`.

use std::path::{Path, PathBuf};

use crate::check::{self, Checker, Place, SHELLS, SUDO_LIKE, ShellArgs};
use crate::launch::{self, Plan};
use crate::model::{Context, Decision, Gate, Refusal, RefuseCode, RunCommandArgs, Via};
use crate::paths::{is_within, normalize};
use crate::policy::{Mode, Policy};
use crate::script::Word;
use crate::shape::Problem;

/// At most this many argv elements.
pub const MAX_ARGV: usize = 4096;
/// At most this many bytes in all argv elements together.
pub const MAX_ARGV_BYTES: usize = 1024 * 1024;

/// Decides what to do with one `run_command` call. Pure: reads only `package.json` files for
/// watcher detection (RC-15) and runs nothing.
///
/// RC-2 for a direct argv: characters a shell would read are data unless an element's *form*
/// shows that a shell was expected. `RUN_COMMAND_METACHARACTERS` (with the `sh -c` advice) is
/// the answer for an element that is wholly shell syntax (`|`, `&&`, `;`, `&`, `>`, `2>&1`,
/// `>file`, `<<EOF` …), starts with `~`, holds a substitution (`$(…)`, a backtick, `${…}`,
/// `$NAME`), or is a glob (`*`, `?`, `[0-9]`, `{c,h}`) in an operand of a program that does not
/// match patterns itself (`["cat", "*.txt"]`, `["rm", "*.log"]`). Program text and patterns a
/// program reads itself run directly: awk and sed programs, the patterns of grep, rg, fd and jq,
/// `python -c`, `node -e`, `perl -e`, `find -name`'s patterns, git's pathspecs, curl's URL
/// globs, options such as `--include=*.rs`. Launchers (`env`, `timeout`, `xargs`, `npx`,
/// `find -exec`, `sudo`) are seen through; arguments of a shell (`["sh", "-c", script, arg…]`)
/// may hold no [`crate::METACHARACTERS`] character at all.
///
/// ```
/// use argv_policy::{decide, Context, Mode, Policy, RefuseCode, RunCommandArgs};
/// let (ctx, policy) = (Context::new("/home/u/proj", "/home/u"), Policy::defaults(Mode::Auto));
/// let code = |argv: &[&str]| decide(&RunCommandArgs::new(argv.iter().copied()), &policy, &ctx).code();
/// assert_eq!(code(&["python3", "-c", "print(1)"]), None);
/// assert_eq!(code(&["grep", "-E", "a|b", "f"]), None);
/// assert_eq!(code(&["cat", "*.txt"]), Some(RefuseCode::Metacharacters));
/// assert_eq!(code(&["ls", "|", "wc"]), Some(RefuseCode::Metacharacters));
/// ```
///
/// ```
/// use argv_policy::{decide, Context, Decision, Gate, Mode, Policy, RunCommandArgs};
/// let ctx = Context::new("/home/u/proj", "/home/u");
/// let policy = Policy::defaults(Mode::Safe);
/// let d = decide(&RunCommandArgs::new(["git", "status"]), &policy, &ctx);
/// assert!(matches!(d, Decision::Run { gate: Gate::None, parallel: true, .. }));
/// ```
pub fn decide(args: &RunCommandArgs, policy: &Policy, ctx: &Context) -> Decision {
    match decide_inner(args, policy, ctx) {
        Ok(d) => d,
        Err(r) => Decision::refuse(r),
    }
}

fn invalid(msg: impl Into<String>) -> Refusal {
    Refusal::new(RefuseCode::ArgumentsInvalid, msg)
}

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// Renders an argv for a prompt label: elements with spaces or quotes are single-quoted.
pub fn display_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn decide_inner(
    args: &RunCommandArgs,
    policy: &Policy,
    ctx: &Context,
) -> Result<Decision, Refusal> {
    let argv = &args.argv;
    // 1. Shape.
    let Some(program) = argv.first() else {
        return Err(invalid(
            "argv is empty; send the program and its arguments, e.g. [\"git\", \"status\"]",
        ));
    };
    if program.is_empty() {
        return Err(invalid("argv[0] is empty; name the program to run"));
    }
    if argv.len() > MAX_ARGV || argv.iter().map(String::len).sum::<usize>() > MAX_ARGV_BYTES {
        return Err(invalid(format!(
            "argv is larger than {MAX_ARGV} elements or {MAX_ARGV_BYTES} bytes; pass large data \
             through a file"
        )));
    }
    if argv
        .iter()
        .chain(&args.write_paths)
        .any(|a| a.contains('\0'))
    {
        return Err(invalid(
            "an argument contains a NUL byte, which no program can receive",
        ));
    }
    if !ctx.workdir.is_absolute() || !ctx.home.is_absolute() {
        return Err(invalid(
            "the session's working directory and home must be absolute paths",
        ));
    }
    // 2. Mask tokens (RC-14).
    for a in argv.iter().chain(&args.write_paths) {
        if let Some(tok) = crate::mask::find_token(a) {
            return Err(Refusal::new(
                RefuseCode::MaskedSecret,
                format!(
                    "[Invalid] the argument holds the mask token {tok} from an earlier result, \
                     not the secret itself. Read the secret inside the same call instead, e.g. \
                     ['sh', '-c', 'set -a; . ./.env; set +a; curl …']"
                ),
            ));
        }
    }
    let name = basename(program);
    // 3. Own pointers.
    if name == "cd" {
        return Err(Refusal::new(
            RefuseCode::Cd,
            "`cd` is refused: the user sets the working directory. Pass absolute paths instead, \
             or use ['sh', '-c', 'cd <dir> && <command>']",
        ));
    }
    if name == "open" && ctx.os == crate::model::Os::MacOs {
        return Err(check::open_refusal());
    }
    // 4. Shell forms outside the scripts (RC-2; the rule is in `shape`).
    let words: Vec<Word> = argv.iter().map(|a| Word::literal(a)).collect();
    let scripts = script_positions(&words, 0);
    if let Some((i, problem)) = crate::shape::first_problem(argv, &scripts) {
        return Err(shape_refusal(i, &argv[i], &problem, name));
    }
    // 5. write_paths (RC-10).
    let home = normalize(Path::new("/"), &ctx.home);
    let workdir = normalize(&home, &ctx.workdir);
    let mut write_paths = Vec::new();
    for p in &args.write_paths {
        if p.is_empty() {
            return Err(Refusal::new(
                RefuseCode::WritePathInvalid,
                "a write_paths entry is empty; give the directory or file to write",
            ));
        }
        let n = normalize(&workdir, Path::new(p));
        if n == Path::new("/") {
            return Err(Refusal::new(
                RefuseCode::WritePathInvalid,
                "write_paths may not be `/`; name the directory that needs writing",
            ));
        }
        write_paths.push(n);
    }
    // 6. The command.
    let checker = Checker::new(policy, ctx);
    let mode = policy.mode;
    let label = display_argv(argv);
    let mut trash = Vec::new();
    let mut sudo = false;
    let mut gate = Gate::None;
    let read_only;
    if name == "rm" {
        if program != "rm" {
            return Err(Refusal::new(
                RefuseCode::RmInvalid,
                "write `rm` as a bare name, ['rm', '<path>', …]: it moves the files to the trash",
            ));
        }
        let (paths, g) = rm_plan(&argv[1..], &workdir, &home, policy, ctx)?;
        trash = paths;
        gate = g;
        read_only = false;
    } else if name == "sudo" {
        sudo_check(argv, program, &checker)?;
        sudo = true;
        gate = Gate::Password(format!("sudo: {}", display_argv(&argv[1..])));
        read_only = false;
    } else if SUDO_LIKE.contains(&name) {
        return Err(Refusal::new(
            RefuseCode::SudoInvalid,
            format!(
                "`{name}` is refused; for a command that needs root use ['sudo', '<binary>', …] \
                 (asks for the system password)"
            ),
        ));
    } else {
        let ro = checker.command(name, &words[1..], 0, Place::Top)?;
        // A program named by path is never an allowlist hit: the allowlist names programs
        // found through PATH.
        read_only = ro && !program.contains('/');
    }
    // 7. Gate.
    let plain = read_only && !args.network && args.write_paths.is_empty() && args.sandbox;
    if !plain && mode == Mode::Safe && trash.is_empty() && !sudo {
        gate = gate.max(Gate::Confirm(label.clone()));
    }
    for p in &write_paths {
        if !is_within(p, &home) {
            gate = gate.max(Gate::Password(format!(
                "write_paths: {} (outside $HOME)",
                p.display()
            )));
        } else if policy.is_sensitive_in(p, ctx) && mode != Mode::AllowAll {
            gate = gate.max(Gate::Confirm(format!(
                "write_paths: {} (sensitive)",
                p.display()
            )));
        }
    }
    if !args.sandbox {
        gate = gate.max(Gate::Password(format!("sandbox: false: {label}")));
    }
    let via = shell_via(argv);
    Ok(Decision::Run {
        via,
        parallel: plain && gate == Gate::None,
        gate,
        trash,
        sudo,
    })
}

/// The RC-2 refusal for element `i`, with the `sh -c` advice (for `rm`: literal paths).
fn shape_refusal(i: usize, a: &str, problem: &Problem, name: &str) -> Refusal {
    let what = match problem {
        Problem::Syntax => "is shell syntax (an operator or a redirection)".to_owned(),
        Problem::Tilde => "starts with `~`, which only a shell expands".to_owned(),
        Problem::Substitution(s) => format!("holds the shell substitution `{s}`"),
        Problem::Glob(c) => format!(
            "is a glob (`{c}`) where a path goes, and `{name}` does not expand patterns itself"
        ),
        Problem::Meta(c) => {
            let shown = if *c == '\n' {
                "newline".to_owned()
            } else {
                format!("`{c}`")
            };
            format!("contains the shell metacharacter {shown} in an argument of a shell")
        }
    };
    let msg = if name == "rm" {
        format!(
            "argv element {i} ({a:?}) {what}; rm takes literal paths: write each path out in \
             full (absolute, no `~`, no glob)"
        )
    } else {
        format!(
            "argv element {i} ({a:?}) {what}; an argv runs directly, without a shell. For \
             pipes, redirects, globs, `~` or substitutions use ['sh', '-c', '<script>'] (every \
             command in it is checked)"
        )
    };
    Refusal::new(RefuseCode::Metacharacters, msg)
}

/// `Via::Shell(script)` for `['sh'|'bash', …, '-c', script, …]`.
fn shell_via(argv: &[String]) -> Via {
    if !matches!(argv[0].as_str(), "sh" | "bash") {
        return Via::Direct;
    }
    let words: Vec<Word> = argv[1..].iter().map(|a| Word::literal(a)).collect();
    match check::shell_script_position(&words) {
        Ok(ShellArgs::Script(i)) => match argv.get(i + 1) {
            Some(s) => Via::Shell(s.clone()),
            None => Via::Direct,
        },
        _ => Via::Direct,
    }
}

/// One `sh -c`/`bash -c` script of an argv as a confirmation lists it (TRUST-4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownScript {
    /// The argv element that holds the script.
    pub index: usize,
    /// Each simple command the parser extracted, as written: its `NAME=value` assignments,
    /// then its words. Commands of substitutions come in the order the shell runs them.
    pub commands: Vec<Vec<String>>,
    /// A redirection writes a file other than `/dev/null`, `/dev/stdout` or `/dev/stderr`.
    pub writes: bool,
}

/// The scripts of `argv`, at the top or behind launchers (`env`, `timeout`, `xargs` …), each
/// with the simple commands [`decide`] checked in it. `home` is what `~` expands to. A script
/// that does not parse is left out: `decide` refuses the call anyway.
///
/// ```
/// let argv: Vec<String> = ["sh", "-c", "ls | wc -l > n.txt"].map(String::from).to_vec();
/// let shown = argv_policy::shown_scripts(&argv, std::path::Path::new("/home/u"));
/// assert_eq!(shown[0].index, 2);
/// assert_eq!(shown[0].commands, [vec!["ls"], vec!["wc", "-l"]]);
/// assert!(shown[0].writes);
/// ```
pub fn shown_scripts(argv: &[String], home: &Path) -> Vec<ShownScript> {
    let words: Vec<Word> = argv.iter().map(|a| Word::literal(a)).collect();
    script_positions(&words, 0)
        .into_iter()
        .filter_map(|index| {
            let script = crate::script::parse(argv.get(index)?, home, 0).ok()?;
            let commands = script
                .cmds
                .iter()
                .map(|c| {
                    c.assigns
                        .iter()
                        .map(|(name, value)| format!("{name}={}", value.raw))
                        .chain(c.words.iter().map(|w| w.raw.clone()))
                        .collect()
                })
                .collect();
            Some(ShownScript {
                index,
                commands,
                writes: script.writes,
            })
        })
        .collect()
}

/// Indices of `words` that are scripts of `sh -c`/`bash -c`, at the top or behind known
/// launchers; only these may hold metacharacters (RC-2).
fn script_positions(words: &[Word], offset: usize) -> Vec<usize> {
    let Some((first, rest)) = words.split_first() else {
        return Vec::new();
    };
    let Some(v) = first.value.as_deref() else {
        return Vec::new();
    };
    let name = basename(v);
    if SHELLS.contains(&name) {
        return match check::shell_script_position(rest) {
            Ok(ShellArgs::Script(i)) if i < rest.len() => vec![offset + 1 + i],
            _ => Vec::new(),
        };
    }
    match launch::plan(name, rest) {
        Ok(Plan::Inner { ranges, .. }) => ranges
            .into_iter()
            .flat_map(|r| script_positions(&rest[r.clone()], offset + 1 + r.start))
            .collect(),
        _ => Vec::new(),
    }
}

/// `['rm', …]`: the paths to move to the trash and the gate (RC-4).
fn rm_plan(
    args: &[String],
    workdir: &Path,
    home: &Path,
    policy: &Policy,
    ctx: &Context,
) -> Result<(Vec<PathBuf>, Gate), Refusal> {
    let mut paths = Vec::new();
    let mut options_done = false;
    for a in args {
        if !options_done && a == "--" {
            options_done = true;
            continue;
        }
        if !options_done && a.starts_with('-') && a.len() > 1 {
            // -r, -f, -i, -v, -d and their long forms change nothing for a move to the trash.
            continue;
        }
        paths.push(normalize(workdir, Path::new(a)));
    }
    if paths.is_empty() {
        return Err(Refusal::new(
            RefuseCode::RmInvalid,
            "rm was given no path; send ['rm', '<path>', …]",
        ));
    }
    let mode = policy.mode;
    let mut gate = Gate::None;
    let mut inside = Vec::new();
    let mut in_home = Vec::new();
    let mut outside = Vec::new();
    for p in &paths {
        if p == Path::new("/") || p == home || p == workdir || workdir.starts_with(p) {
            return Err(Refusal::new(
                RefuseCode::RmInvalid,
                format!(
                    "refusing to move {} to the trash: it is `/`, $HOME, the working directory \
                     or one of its parents; name the files inside it",
                    p.display()
                ),
            ));
        }
        if is_within(p, workdir) {
            inside.push(p);
        } else if is_within(p, home) {
            in_home.push(p);
        } else {
            outside.push(p);
        }
        if policy.is_sensitive_in(p, ctx) {
            gate = gate.max(Gate::Confirm(format!(
                "rm (move to trash, sensitive): {}",
                p.display()
            )));
        }
    }
    let list = |v: &[&PathBuf]| {
        v.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    if !outside.is_empty() {
        gate = gate.max(Gate::Password(format!(
            "rm (move to trash, outside $HOME): {}",
            list(&outside)
        )));
    }
    if !in_home.is_empty() && mode != Mode::AllowAll {
        gate = gate.max(Gate::Confirm(format!(
            "rm (move to trash, outside the working directory): {}",
            list(&in_home)
        )));
    }
    if !inside.is_empty() && mode == Mode::Safe {
        gate = gate.max(Gate::Confirm(format!(
            "rm (move to trash): {}",
            list(&inside)
        )));
    }
    Ok((paths, gate))
}

/// `['sudo', bin, …]` (RC-11): no sudo flags, no nested sudo/su, a bare name not denied, and
/// not a program that would start others unseen.
fn sudo_check(argv: &[String], program: &str, checker: &Checker<'_>) -> Result<(), Refusal> {
    let bad = |msg: String| Refusal::new(RefuseCode::SudoInvalid, msg);
    if program != "sudo" {
        return Err(bad(
            "write `sudo` as a bare name: ['sudo', '<binary>', …]".into()
        ));
    }
    let Some(target) = argv.get(1) else {
        return Err(bad("sudo needs a program: ['sudo', '<binary>', …]".into()));
    };
    if target.starts_with('-') {
        return Err(bad(format!(
            "sudo flags are not accepted (`{target}`); send ['sudo', '<binary>', …] and nothing \
             between sudo and the program"
        )));
    }
    if !crate::words::is_bare_name(target) {
        return Err(bad(format!(
            "the program after sudo must be a bare name, not `{target}`; e.g. ['sudo', \
             'apt-get', 'install', '-y', '<pkg>']"
        )));
    }
    if SUDO_LIKE.contains(&target.as_str()) {
        return Err(bad(format!(
            "nested `{target}` under sudo is refused; send ['sudo', '<binary>', …]"
        )));
    }
    if checker.policy.is_denied(target) {
        return Err(Refusal::new(
            RefuseCode::Denied,
            format!("`{target}` is on the denied command list and is never run, with sudo or not"),
        ));
    }
    let rest: Vec<Word> = argv[2..].iter().map(|a| Word::literal(a)).collect();
    let starts_others = SHELLS.contains(&target.as_str())
        || target == "eval"
        || !matches!(launch::plan(target, &rest), Ok(Plan::NotLauncher));
    if starts_others {
        return Err(bad(format!(
            "sudo starts one program directly; `{target}` would start others that cannot be \
             checked. Send ['sudo', '<binary>', …] for the program itself"
        )));
    }
    let fixed: Vec<&str> = argv[2..].iter().map(String::as_str).collect();
    let watcher = crate::watch::direct(target, &fixed);
    if let Some(why) = watcher.filter(|_| !checker.ctx.watchers_allowed) {
        return Err(check::watcher(&why));
    }
    Ok(())
}
