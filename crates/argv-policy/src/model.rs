//! The values `decide` reads and returns: arguments, context, decision, refusal codes, and the
//! decision as one line of JSON.

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::json;

/// The arguments of one `run_command` call, with the exact snake_case names of RC-1.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunCommandArgs {
    /// The program and its arguments; never a shell line (RC-1, RC-2).
    pub argv: Vec<String>,
    /// Network access for this call (RC-7); never read-only.
    #[serde(default)]
    pub network: bool,
    /// Extra writable paths; outside `$HOME` they need the system password (RC-10).
    #[serde(default)]
    pub write_paths: Vec<String>,
    /// `false` runs outside the sandbox after the system password (RC-12).
    #[serde(default = "default_true")]
    pub sandbox: bool,
}

fn default_true() -> bool {
    true
}

impl RunCommandArgs {
    /// Arguments for `argv` with every option at its default (sandboxed, no network).
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        RunCommandArgs {
            argv: argv.into_iter().map(Into::into).collect(),
            network: false,
            write_paths: Vec::new(),
            sandbox: true,
        }
    }

    /// Parses the tool's JSON arguments; unknown fields and wrong types are refused with
    /// [`RefuseCode::ArgumentsInvalid`].
    pub fn from_json(text: &str) -> Result<Self, Refusal> {
        serde_json::from_str(text).map_err(|e| {
            Refusal::new(
                RefuseCode::ArgumentsInvalid,
                format!(
                    "the arguments are not valid run_command JSON ({e}); send an object like \
                     {{\"argv\": [\"git\", \"status\"], \"network\": false, \"write_paths\": [], \
                     \"sandbox\": true}}"
                ),
            )
        })
    }
}

/// The platform the command would run on; only macOS changes a rule (RC-5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Os {
    /// Linux.
    Linux,
    /// macOS: `open` is refused with a pointer to `open_file` (RC-5).
    MacOs,
    /// Anything else.
    Other,
}

impl Os {
    /// The OS this crate was compiled for.
    pub fn current() -> Os {
        if cfg!(target_os = "macos") {
            Os::MacOs
        } else if cfg!(target_os = "linux") {
            Os::Linux
        } else {
            Os::Other
        }
    }
}

/// What `decide` knows about the session: where it runs, whose home it is, which secrets it
/// has seen (RC-14).
#[derive(Debug, Clone)]
pub struct Context {
    /// The working directory the user chose (absolute).
    pub workdir: PathBuf,
    /// The user's `$HOME` (absolute).
    pub home: PathBuf,
    /// The platform.
    pub os: Os,
    /// Secrets known to the session, masked as `[secret:N]` (N = index + 1) in results.
    pub secrets: Vec<String>,
    /// The call is `background_command`'s, the one place a file watcher may run (RC-15, BG-2):
    /// watchers are then not refused. False for `run_command`.
    pub watchers_allowed: bool,
    /// Private locations the host resolved beyond the policy's list (TRUST-6: where the host's
    /// relocation variables move them, [`Policy::private_paths_in`](crate::Policy::private_paths_in)).
    /// Sensitive for RC-9 like the list, so the decision and the sandbox agree. Empty by default.
    pub private: Vec<PathBuf>,
}

impl Context {
    /// A context for `workdir` and `home` on this OS, with no secrets.
    pub fn new(workdir: impl Into<PathBuf>, home: impl Into<PathBuf>) -> Self {
        Context {
            workdir: workdir.into(),
            home: home.into(),
            os: Os::current(),
            secrets: Vec::new(),
            watchers_allowed: false,
            private: Vec::new(),
        }
    }
}

/// How the command is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// `execve(argv)` with no shell in between (RC-2).
    Direct,
    /// `['sh'|'bash', '-c', script, …]`: the script was parsed and every command in it passed.
    Shell(String),
}

/// What must happen before the command starts. Ordered: a stronger gate compares greater.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Gate {
    /// Run at once.
    None,
    /// Ask the user, showing the label.
    Confirm(String),
    /// Ask for the system password, showing the label (RC-4, RC-10, RC-11, RC-12).
    Password(String),
}

impl Gate {
    fn rank(&self) -> u8 {
        match self {
            Gate::None => 0,
            Gate::Confirm(_) => 1,
            Gate::Password(_) => 2,
        }
    }

    /// The stronger of two gates; on a tie the first is kept (its label came first).
    pub fn max(self, other: Gate) -> Gate {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }

    /// `none`, `confirm` or `password`.
    pub fn kind(&self) -> &'static str {
        match self {
            Gate::None => "none",
            Gate::Confirm(_) => "confirm",
            Gate::Password(_) => "password",
        }
    }

    /// The label shown with the prompt, if any.
    pub fn label(&self) -> Option<&str> {
        match self {
            Gate::None => None,
            Gate::Confirm(l) | Gate::Password(l) => Some(l),
        }
    }
}

/// The decision for one call. Nothing has run when it is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Do not run; the message says what to do instead.
    Refuse {
        /// Stable code.
        code: RefuseCode,
        /// What was wrong and what to send instead.
        message: String,
    },
    /// Run after the gate.
    Run {
        /// Directly or through the parsed script.
        via: Via,
        /// What must happen first.
        gate: Gate,
        /// `true` only for read-only allowlist hits (RC-9): they may run alongside others.
        parallel: bool,
        /// For `['rm', …]`: the absolute, normalised paths to move to the trash (RC-4).
        trash: Vec<PathBuf>,
        /// For `['sudo', …]`: run outside the sandbox as `sudo -n …` (RC-11).
        sudo: bool,
    },
}

impl Decision {
    pub(crate) fn refuse(r: Refusal) -> Decision {
        Decision::Refuse {
            code: r.code,
            message: r.message,
        }
    }

    /// The code, when refused.
    pub fn code(&self) -> Option<RefuseCode> {
        match self {
            Decision::Refuse { code, .. } => Some(*code),
            Decision::Run { .. } => None,
        }
    }
}

/// A refusal: a stable code and a message that says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Stable code.
    pub code: RefuseCode,
    /// Human-readable explanation with the alternative.
    pub message: String,
}

impl Refusal {
    pub(crate) fn new(code: RefuseCode, message: impl Into<String>) -> Self {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for Refusal {}

/// Why a call was refused. Serialised as the `RUN_COMMAND_*` strings of [`RefuseCode::as_str`],
/// which are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefuseCode {
    /// `RUN_COMMAND_ARGUMENTS_INVALID`: empty argv, an empty program, a NUL byte, bad JSON.
    ArgumentsInvalid,
    /// `RUN_COMMAND_METACHARACTERS`: a shell metacharacter outside `sh -c` (RC-2).
    Metacharacters,
    /// `RUN_COMMAND_SCRIPT_UNPARSABLE`: the `sh -c` script did not parse fully, or uses a
    /// construct whose commands cannot be seen (RC-2).
    ScriptUnparsable,
    /// `RUN_COMMAND_NOT_STATIC`: a command word is computed, quoted, escaped or a path (RC-2).
    NotStatic,
    /// `RUN_COMMAND_DENIED`: the program is on the denied list (RC-2, RC-11).
    Denied,
    /// `RUN_COMMAND_CD`: `['cd', …]` (RC-3).
    Cd,
    /// `RUN_COMMAND_OPEN`: `open` on macOS (RC-5).
    Open,
    /// `RUN_COMMAND_RM_IN_SCRIPT`: `rm` inside a script or behind a launcher (RC-4).
    RmInScript,
    /// `RUN_COMMAND_RM_INVALID`: `['rm', …]` without paths, or of `/`, `$HOME`, the workdir.
    RmInvalid,
    /// `RUN_COMMAND_SUDO_IN_SCRIPT`: `sudo`/`su` inside a script or behind a launcher (RC-11).
    SudoInScript,
    /// `RUN_COMMAND_SUDO_INVALID`: `['sudo', …]` with flags, a nested sudo, a path (RC-11).
    SudoInvalid,
    /// `RUN_COMMAND_WATCHER`: a file watcher, which never ends (RC-15).
    Watcher,
    /// `RUN_COMMAND_MASKED_SECRET`: the argv holds a mask token `[secret:N]` (RC-14).
    MaskedSecret,
    /// `RUN_COMMAND_ENVIRONMENT_DENIED`: an assignment to `PATH`, `LD_PRELOAD`, `BASH_ENV`, …
    /// that would change which program a bare name starts (RC-2).
    EnvironmentDenied,
    /// `RUN_COMMAND_SHELL_UNSUPPORTED`: a shell other than `sh`/`bash` given a script, or a
    /// shell fed its script on standard input (RC-2).
    ShellUnsupported,
    /// `RUN_COMMAND_WRITE_PATH_INVALID`: a `write_paths` entry that is empty or `/` (RC-10).
    WritePathInvalid,
}

impl RefuseCode {
    /// Every code, in declaration order.
    pub const ALL: &'static [RefuseCode] = &[
        RefuseCode::ArgumentsInvalid,
        RefuseCode::Metacharacters,
        RefuseCode::ScriptUnparsable,
        RefuseCode::NotStatic,
        RefuseCode::Denied,
        RefuseCode::Cd,
        RefuseCode::Open,
        RefuseCode::RmInScript,
        RefuseCode::RmInvalid,
        RefuseCode::SudoInScript,
        RefuseCode::SudoInvalid,
        RefuseCode::Watcher,
        RefuseCode::MaskedSecret,
        RefuseCode::EnvironmentDenied,
        RefuseCode::ShellUnsupported,
        RefuseCode::WritePathInvalid,
    ];

    /// The stable string.
    pub fn as_str(self) -> &'static str {
        match self {
            RefuseCode::ArgumentsInvalid => "RUN_COMMAND_ARGUMENTS_INVALID",
            RefuseCode::Metacharacters => "RUN_COMMAND_METACHARACTERS",
            RefuseCode::ScriptUnparsable => "RUN_COMMAND_SCRIPT_UNPARSABLE",
            RefuseCode::NotStatic => "RUN_COMMAND_NOT_STATIC",
            RefuseCode::Denied => "RUN_COMMAND_DENIED",
            RefuseCode::Cd => "RUN_COMMAND_CD",
            RefuseCode::Open => "RUN_COMMAND_OPEN",
            RefuseCode::RmInScript => "RUN_COMMAND_RM_IN_SCRIPT",
            RefuseCode::RmInvalid => "RUN_COMMAND_RM_INVALID",
            RefuseCode::SudoInScript => "RUN_COMMAND_SUDO_IN_SCRIPT",
            RefuseCode::SudoInvalid => "RUN_COMMAND_SUDO_INVALID",
            RefuseCode::Watcher => "RUN_COMMAND_WATCHER",
            RefuseCode::MaskedSecret => "RUN_COMMAND_MASKED_SECRET",
            RefuseCode::EnvironmentDenied => "RUN_COMMAND_ENVIRONMENT_DENIED",
            RefuseCode::ShellUnsupported => "RUN_COMMAND_SHELL_UNSUPPORTED",
            RefuseCode::WritePathInvalid => "RUN_COMMAND_WRITE_PATH_INVALID",
        }
    }
}

impl fmt::Display for RefuseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The decision as one JSON line (the first nine keys of `agent-exec check run_command`'s line,
/// whose gate also holds the executor's re-checks).
///
/// The six fields of the issue come first: `decision` (`run`|`refuse`), `via` (`direct`|`shell`,
/// `null` when refused), `gate` (`none`|`confirm`|`password`, `null` when refused), `parallel`,
/// `code` and `message` (`null` when run). Three additions follow: `label` (the gate's prompt),
/// `trash` (paths `rm` moves to the trash) and `sudo`.
pub fn decision_json_line(decision: &Decision) -> String {
    let value = match decision {
        Decision::Refuse { code, message } => json!({
            "decision": "refuse",
            "via": null,
            "gate": null,
            "parallel": false,
            "code": code.as_str(),
            "message": message,
            "label": null,
            "trash": [],
            "sudo": false,
        }),
        Decision::Run {
            via,
            gate,
            parallel,
            trash,
            sudo,
        } => json!({
            "decision": "run",
            "via": match via { Via::Direct => "direct", Via::Shell(_) => "shell" },
            "gate": gate.kind(),
            "parallel": parallel,
            "code": null,
            "message": null,
            "label": gate.label(),
            "trash": trash.iter().map(|p| p.to_string_lossy().into_owned()).collect::<Vec<_>>(),
            "sudo": sudo,
        }),
    };
    // serde_json keeps insertion order only with `preserve_order`; we write the keys ourselves
    // so the line reads in the documented order whatever features are unified in the build.
    let keys = [
        "decision", "via", "gate", "parallel", "code", "message", "label", "trash", "sudo",
    ];
    let mut out = String::from("{");
    for (i, key) in keys.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&serde_json::Value::from(*key).to_string());
        out.push_str(": ");
        out.push_str(&value.get(*key).cloned().unwrap_or_default().to_string());
    }
    out.push('}');
    out
}
