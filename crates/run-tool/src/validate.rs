//! "Validate, then act" (invariant 1): every rule of RUN-1…RUN-5 is checked here, with
//! the files opened through the mirror's lease, before anything is created or started.
//!
//! The output is a [`ValidatedRun`]: the fixed program (resolved to its real file), the exact
//! argv it will get, the working directory and the time limit. Nothing in it comes from the
//! model unchecked: options are copied only from the whitelist, file operands only after
//! `fsguard::RelPath` accepted them and the lease opened them as regular files.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fsguard::{OpenError, RelPath, RelPathError, RootLease};
use toolscope::{ErrorCode, ToolError};

use crate::types::AgentRunArguments;

/// At most this many items in `args` (RUN-2).
pub const MAX_ARGS: usize = 64;
/// Each item of `args` is at most this many bytes (RUN-2).
pub const MAX_ARG_BYTES: usize = 4096;
/// All items of `args` together are at most this many bytes (RUN-2).
pub const MAX_TOTAL_ARG_BYTES: usize = 16 * 1024;
/// `timeoutMs` when the call gives none (RUN-5).
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// The largest `timeoutMs` (RUN-5).
pub const MAX_TIMEOUT_MS: u64 = 30_000;

/// The four programs of `run` (RUN-1). More arrive only as another provider with its own
/// sandbox policy, never by widening this list (RUN-15).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Program {
    /// `awk -f <script> <file>…` (mawk on Debian).
    Awk,
    /// `wc [-c] [-l] [-m] [-w] <file>…`.
    Wc,
    /// `sort [-r] [-n] [-u] <file>…`.
    Sort,
    /// `diff [-u] [-q] <file> <file>`.
    Diff,
}

impl Program {
    /// Every program, in RUN-1's order.
    pub const ALL: [Program; 4] = [Program::Awk, Program::Wc, Program::Sort, Program::Diff];

    /// The program's name on the wire.
    pub const fn name(self) -> &'static str {
        match self {
            Program::Awk => "awk",
            Program::Wc => "wc",
            Program::Sort => "sort",
            Program::Diff => "diff",
        }
    }

    /// The fixed absolute path it is started from (RUN-6: never looked up on `PATH`). The real
    /// file behind it (`/usr/bin/awk` is an alternatives symlink to `mawk` on Debian) is what
    /// runs and what the sandbox allows.
    pub fn fixed_path(self) -> &'static Path {
        Path::new(match self {
            Program::Awk => "/usr/bin/awk",
            Program::Wc => "/usr/bin/wc",
            Program::Sort => "/usr/bin/sort",
            Program::Diff => "/usr/bin/diff",
        })
    }

    /// The program called `name`, if it is one of the four (exact, lower case).
    pub fn from_name(name: &str) -> Option<Program> {
        Program::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The options it accepts (RUN-3); `awk`'s only option, `-f`, takes the script and is
    /// handled on its own.
    fn options(self) -> &'static [&'static str] {
        match self {
            Program::Awk => &[],
            Program::Wc => &["-c", "-l", "-m", "-w"],
            Program::Sort => &["-r", "-n", "-u"],
            Program::Diff => &["-u", "-q"],
        }
    }
}

/// A `run` call that passed every check: only [`validate`] makes one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidatedRun {
    program: Program,
    executable: PathBuf,
    argv: Vec<OsString>,
    cwd: RelPath,
    timeout_ms: u64,
}

impl ValidatedRun {
    /// Which program.
    pub fn program(&self) -> Program {
        self.program
    }

    /// The real file that will run (absolute, symlinks resolved).
    pub fn executable(&self) -> &Path {
        &self.executable
    }

    /// The arguments after `argv[0]`, exactly as the program will get them: whitelisted options,
    /// `--`, then the file operands, each written so the program can only read it as a file
    /// (see [`validate`]).
    pub fn argv(&self) -> &[OsString] {
        &self.argv
    }

    /// The working directory, relative to the mirror.
    pub fn cwd(&self) -> &RelPath {
        &self.cwd
    }

    /// The time limit.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// The time limit in milliseconds, as the call gave it (or the default).
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::ExecArgumentsInvalid, message)
}

fn rel_error(what: &str, input: &str, e: &RelPathError) -> ToolError {
    ToolError::new(
        ErrorCode::ExecPathInvalid,
        format!("{what} `{input}` is refused: {e}"),
    )
}

/// The detail of a path refusal that names the refused path relative to the workspace root,
/// so a host that knows the mirror can say what the folder has there (`fsguard`'s
/// `Mirror::not_copied`: "a FIFO" rather than "does not exist").
pub const PATH_DETAIL: &str = "path";

fn open_error(what: &str, input: &str, full: &RelPath, e: &OpenError) -> ToolError {
    ToolError::new(
        exec::open_error_code(e),
        format!("{what} `{input}` cannot be used: {e}; name an existing item inside the mirror"),
    )
    .with_detail(PATH_DETAIL, full.as_path().to_string_lossy().into_owned())
}

/// The shape of the arguments before any path is looked at.
struct Shape<'a> {
    options: Vec<&'a str>,
    script: Option<&'a str>,
    operands: Vec<&'a str>,
}

/// Checks `args` against RUN-1…RUN-5 and opens every path through `mirror`, starting nothing
/// and changing nothing.
///
/// Order: the program (RUN-1, `AGENT_EXEC_PROGRAM_UNSUPPORTED`), the sizes of `args` (RUN-2),
/// `timeoutMs` (RUN-5), the whitelist (RUN-3) — all `AGENT_EXEC_ARGUMENTS_INVALID` — then the
/// working directory and each file (RUN-4, `AGENT_EXEC_PATH_INVALID`): validated as a
/// [`RelPath`] (no absolute path, no `..`, no `.git` in any case) and opened through the lease
/// one component at a time without following symbolic links, as a directory or a regular file.
///
/// An item of `args` that starts with `-` is always read as an option — so `-` (standard input,
/// which is closed) and `--help` are refused — and options come before the files. A file whose
/// name starts with `-` is named `./-name`; it reaches the program as `./-name`, after `--`, so
/// it can only be read as a file. For `awk` an operand containing `=` is also passed as
/// `./name`, because awk reads `x=1` as a variable assignment, not a file.
pub fn validate(args: &AgentRunArguments, mirror: &RootLease) -> Result<ValidatedRun, ToolError> {
    let program = Program::from_name(&args.program).ok_or_else(|| {
        ToolError::new(
            ErrorCode::ExecProgramUnsupported,
            format!(
                "program `{}` is not available; run offers only awk, wc, sort and diff (use the \
                 command tool in a direct workspace for anything else)",
                args.program.escape_debug()
            ),
        )
    })?;
    check_sizes(&args.args)?;
    let timeout_ms = match args.timeout_ms {
        None => DEFAULT_TIMEOUT_MS,
        Some(ms @ 1..=MAX_TIMEOUT_MS) => ms,
        Some(ms) => {
            return Err(invalid(format!(
                "timeoutMs {ms} is out of range; give 1 to {MAX_TIMEOUT_MS} milliseconds, or \
                 leave it out for {DEFAULT_TIMEOUT_MS}"
            )));
        }
    };
    let shape = shape(program, &args.args)?;

    let cwd_input = args.cwd_relative.as_deref().unwrap_or(".");
    let cwd = RelPath::new(cwd_input).map_err(|e| rel_error("cwdRelative", cwd_input, &e))?;
    mirror
        .open_dir(&cwd)
        .map_err(|e| open_error("cwdRelative", cwd_input, &cwd, &e))?;

    let mut argv: Vec<OsString> = shape.options.iter().map(OsString::from).collect();
    if let Some(script) = shape.script {
        argv.push("-f".into());
        argv.push(operand(program, script, &cwd, mirror, "the awk script")?);
    }
    argv.push("--".into());
    for input in &shape.operands {
        argv.push(operand(program, input, &cwd, mirror, "file")?);
    }

    let executable = program.fixed_path().canonicalize().map_err(|e| {
        ToolError::new(
            ErrorCode::ExecProgramUnsupported,
            format!(
                "{} is not usable on this machine ({e}); install it or use another program",
                program.fixed_path().display()
            ),
        )
    })?;
    Ok(ValidatedRun {
        program,
        executable,
        argv,
        cwd,
        timeout_ms,
    })
}

/// RUN-2: at most 64 items, each at most 4096 bytes, at most 16 KiB together.
fn check_sizes(args: &[String]) -> Result<(), ToolError> {
    if args.len() > MAX_ARGS {
        return Err(invalid(format!(
            "args has {} items; the limit is {MAX_ARGS}, so split the work over several calls",
            args.len()
        )));
    }
    if let Some((i, long)) = args
        .iter()
        .enumerate()
        .find(|(_, a)| a.len() > MAX_ARG_BYTES)
    {
        return Err(invalid(format!(
            "args[{i}] is {} bytes; the limit is {MAX_ARG_BYTES} per item",
            long.len()
        )));
    }
    let total: usize = args.iter().map(String::len).sum();
    if total > MAX_TOTAL_ARG_BYTES {
        return Err(invalid(format!(
            "args total {total} bytes; the limit is {MAX_TOTAL_ARG_BYTES}, so split the work \
             over several calls"
        )));
    }
    Ok(())
}

/// RUN-3: options from the program's whitelist first, then files.
fn shape(program: Program, args: &[String]) -> Result<Shape<'_>, ToolError> {
    let mut shape = Shape {
        options: Vec::new(),
        script: None,
        operands: Vec::new(),
    };
    let mut rest = args.iter().map(String::as_str);
    if program == Program::Awk {
        match rest.next() {
            Some("-f") => {}
            Some(first) if !first.starts_with('-') => {
                return Err(invalid(format!(
                    "awk takes no inline program text (got `{}`); write the program to a file \
                     in the mirror and pass [\"-f\", \"script.awk\", \"input.txt\"]",
                    first.escape_debug()
                )));
            }
            _ => {
                return Err(invalid(
                    "awk accepts exactly [\"-f\", <script file>, <input file>…]; no other \
                     option (such as -v or -F) is allowed; set variables inside the script",
                ));
            }
        }
        let script = rest.next().ok_or_else(|| {
            invalid("`-f` needs a script file: [\"-f\", \"script.awk\", \"input.txt\"]")
        })?;
        if script.starts_with('-') {
            return Err(invalid(format!(
                "the awk script `{}` starts with `-`; standard input is closed, and a file \
                 whose name starts with `-` is written `./-name`",
                script.escape_debug()
            )));
        }
        shape.script = Some(script);
    }
    for arg in rest {
        if arg == "-" {
            return Err(invalid(
                "`-` (standard input) is not available: stdin is closed; name a file in the mirror",
            ));
        }
        if arg.starts_with('-') {
            if !shape.operands.is_empty() {
                return Err(invalid(format!(
                    "`{}` comes after the files; options go first, and a file whose name \
                     starts with `-` is written `./-name`",
                    arg.escape_debug()
                )));
            }
            if !program.options().contains(&arg) {
                return Err(invalid(format!(
                    "{} does not accept `{}`; {}",
                    program.name(),
                    arg.escape_debug(),
                    allowed(program)
                )));
            }
            shape.options.push(arg);
        } else {
            shape.operands.push(arg);
        }
    }
    match (program, shape.operands.len()) {
        (Program::Awk, 0) => Err(invalid(
            "awk needs at least one input file after the script (stdin is closed): \
             [\"-f\", \"script.awk\", \"input.txt\"]",
        )),
        (Program::Wc | Program::Sort, 0) => Err(invalid(format!(
            "{} needs at least one file (stdin is closed); {}",
            program.name(),
            allowed(program)
        ))),
        (Program::Diff, n) if n != 2 => Err(invalid(format!(
            "diff compares exactly two files, got {n}; {}",
            allowed(program)
        ))),
        _ => Ok(shape),
    }
}

fn allowed(program: Program) -> &'static str {
    match program {
        Program::Awk => "allowed: -f <script file>, then one or more files",
        Program::Wc => "allowed: -c, -l, -m, -w (each separately), then one or more files",
        Program::Sort => {
            "allowed: -r, -n, -u (each separately), then one or more files; the result goes \
             to stdout only"
        }
        Program::Diff => "allowed: -u, -q, then exactly two files (no directories)",
    }
}

/// Validates one file operand (relative to `cwd`), opens it through the lease as a regular
/// file, and returns the argv item that names it.
fn operand(
    program: Program,
    input: &str,
    cwd: &RelPath,
    mirror: &RootLease,
    what: &str,
) -> Result<OsString, ToolError> {
    let rel = RelPath::new(input).map_err(|e| rel_error(what, input, &e))?;
    let full = cwd
        .join(rel.as_path())
        .map_err(|e| rel_error(what, input, &e))?;
    mirror
        .open_file(&full)
        .map_err(|e| open_error(what, input, &full, &e))?;
    let text = rel.as_path().as_os_str();
    let bytes = text.as_encoded_bytes();
    // RUN-3: a file must reach the program as a file. `--` already ends the options; `./`
    // also covers a program that permutes arguments or reads `x=1` as an assignment (awk).
    let needs_dot =
        bytes.first() == Some(&b'-') || (program == Program::Awk && bytes.contains(&b'='));
    if needs_dot {
        let mut out = OsString::from("./");
        out.push(text);
        Ok(out)
    } else {
        Ok(text.to_os_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Parts = (Vec<String>, Option<String>, Vec<String>);

    fn shape_of(program: Program, args: &[&str]) -> Result<Parts, ErrorCode> {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        shape(program, &args)
            .map(|s| {
                (
                    s.options.iter().map(|o| (*o).to_owned()).collect(),
                    s.script.map(str::to_owned),
                    s.operands.iter().map(|o| (*o).to_owned()).collect(),
                )
            })
            .map_err(|e| e.code())
    }

    #[test]
    fn whitelist_accepts_the_seed_examples() {
        assert!(shape_of(Program::Awk, &["-f", "summary.awk", "input.csv"]).is_ok());
        assert!(shape_of(Program::Wc, &["-c", "-l", "-m", "-w", "a"]).is_ok());
        assert!(shape_of(Program::Wc, &["a", "b"]).is_ok());
        assert!(shape_of(Program::Sort, &["-r", "-n", "-u", "a", "b"]).is_ok());
        assert!(shape_of(Program::Diff, &["-u", "-q", "a", "b"]).is_ok());
    }

    #[test]
    fn whitelist_refusals_are_invalid_arguments() {
        let bad: &[(Program, &[&str])] = &[
            (Program::Awk, &["{print}", "a"]),
            (Program::Awk, &["-v", "x=1", "-f", "s.awk", "a"]),
            (Program::Awk, &["-f", "s.awk"]),
            (Program::Awk, &["-f"]),
            (Program::Awk, &["-f", "-", "a"]),
            (Program::Awk, &["-f", "s.awk", "-f", "t.awk", "a"]),
            (Program::Awk, &["-F,", "-f", "s.awk", "a"]),
            (Program::Awk, &[]),
            (Program::Wc, &["-L", "a"]),
            (Program::Wc, &["-lw", "a"]),
            (Program::Wc, &[]),
            (Program::Wc, &["-l"]),
            (Program::Wc, &["a", "-l"]),
            (Program::Wc, &["--help"]),
            (Program::Wc, &["--", "a"]),
            (Program::Wc, &["-", "a"]),
            (Program::Sort, &["-o", "out", "a"]),
            (Program::Sort, &["--compress-program=sh", "a"]),
            (Program::Sort, &["-k1", "a"]),
            (Program::Diff, &["a"]),
            (Program::Diff, &["a", "b", "c"]),
            (Program::Diff, &["-r", "a", "b"]),
            (Program::Diff, &["a", "-"]),
        ];
        for (program, args) in bad {
            assert_eq!(
                shape_of(*program, args),
                Err(ErrorCode::ExecArgumentsInvalid),
                "{program:?} {args:?}"
            );
        }
    }

    #[test]
    fn sizes_are_bounded_per_item_count_and_total() {
        let ok = vec!["a".repeat(MAX_ARG_BYTES); 4];
        assert!(check_sizes(&ok).is_ok());
        let mut too_much = ok.clone();
        too_much.push("b".into());
        assert_eq!(
            check_sizes(&too_much).unwrap_err().code(),
            ErrorCode::ExecArgumentsInvalid
        );
        assert!(check_sizes(&vec!["a".to_owned(); MAX_ARGS]).is_ok());
        assert!(check_sizes(&vec!["a".to_owned(); MAX_ARGS + 1]).is_err());
        assert!(check_sizes(&["x".repeat(MAX_ARG_BYTES + 1)]).is_err());
    }

    #[test]
    fn program_names_are_exact() {
        assert_eq!(Program::from_name("awk"), Some(Program::Awk));
        for name in ["AWK", "mawk", "/usr/bin/awk", " wc", "sh", ""] {
            assert_eq!(Program::from_name(name), None, "{name}");
        }
    }
}
