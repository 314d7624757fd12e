//! The wire types of `command` (CMD-4, CMD-5) with the exact camelCase names.
//! Unknown fields are refused everywhere, including inside `extraPaths` items: a misspelt
//! `writable` must not silently become a read-only grant the model did not mean, nor the
//! reverse.

use exec::denials::{Cause, DeniedAccess as A};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolscope::{ErrorCode, ToolError};

/// The arguments of one `command` call (CMD-4).
///
/// ```
/// let args: command_tool::CommandArguments =
///     serde_json::from_str(r#"{"command":"wc -l *.csv | sort -n"}"#).unwrap();
/// assert_eq!(args.cwd, None); // the work root
/// assert!(args.extra_paths.is_empty());
/// assert_eq!(args.timeout_ms, None); // 30 000 ms
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandArguments {
    /// One command line for `/bin/sh -c` (CMD-1); at most 65 536 bytes, no NUL.
    pub command: String,
    /// The working directory relative to the work root; default `.`. No absolute path, `..`,
    /// symbolic link or `.git` in any letter case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Paths outside the work scope the command needs; the user confirms each one for this
    /// call (CMD-3). At most 16.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub extra_paths: Vec<ExtraPath>,
    /// Time limit in milliseconds, 1–300000; default 30000 (CMD-4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 300000))]
    pub timeout_ms: Option<u64>,
}

/// One path outside the scope (CMD-3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtraPath {
    /// Absolute, existing, no symbolic link in any component, outside the work scope.
    pub path: String,
    /// Whether the command may write beneath it; default `false` (read only).
    #[serde(default)]
    pub write: bool,
}

impl CommandArguments {
    /// Parses the arguments from a JSON object; any shape error (unknown field, wrong type,
    /// missing `command`, not an object) is `AGENT_EXEC_ARGUMENTS_INVALID`.
    ///
    /// ```
    /// use command_tool::CommandArguments;
    /// let err = CommandArguments::from_json(serde_json::json!({"command": "ls", "cwdRelative": "."}))
    ///     .unwrap_err();
    /// assert_eq!(err.code(), toolscope::ErrorCode::ExecArgumentsInvalid);
    /// ```
    pub fn from_json(value: serde_json::Value) -> Result<Self, ToolError> {
        // serde also reads a struct from a JSON array; the wire form is an object.
        if !value.is_object() {
            return Err(ToolError::new(
                ErrorCode::ExecArgumentsInvalid,
                "the command arguments must be a JSON object with `command` and optionally \
                 `cwd`, `extraPaths`, `timeoutMs`",
            ));
        }
        serde_json::from_value(value).map_err(|e| {
            ToolError::new(
                ErrorCode::ExecArgumentsInvalid,
                format!(
                    "the command arguments do not match the schema: {e}; send an object with \
                     `command` and optionally `cwd`, `extraPaths` ([{{\"path\", \"write\"}}]), \
                     `timeoutMs`"
                ),
            )
        })
    }

    /// The JSON Schema of the arguments (for tool listings such as MCP's `inputSchema`).
    pub fn json_schema() -> schemars::Schema {
        schemars::schema_for!(CommandArguments)
    }
}

/// Why the command's run ended (CMD-5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Status {
    /// The shell exited on its own; `exitCode` is its status (0 = success).
    Exited,
    /// The shell was ended by a signal it did not get from us (e.g. `kill -9 $$`, or the
    /// sandbox refusing a system call with `SIGSYS`); `exitCode` is `null`.
    Signaled,
    /// `timeoutMs` passed; everything the command started was stopped. `exitCode` is `null`.
    TimedOut,
    /// The call was cancelled (by request, turn end or account switch) while the command ran;
    /// everything it started was stopped. `exitCode` is `null`.
    Cancelled,
    /// The command hit a resource limit (processes, memory, temp dir size; LIM-2); everything
    /// it started was stopped. `limitExceeded` says which and what to do. `exitCode` is `null`.
    LimitExceeded,
}

/// The result of a `command` call (CMD-5). A non-zero exit is a result, not an error: the
/// model reads `exitCode` and `stderr`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandOutput {
    /// The first 64 KiB of standard output (bytes that are not UTF-8 become U+FFFD).
    pub stdout: String,
    /// The first 64 KiB of standard error.
    pub stderr: String,
    /// The shell's exit code when `status` is `exited`, else `null`.
    pub exit_code: Option<i32>,
    /// Why the run ended.
    pub status: Status,
    /// Either stream passed 64 KiB; the command kept running and the rest was read and
    /// dropped.
    pub truncated: bool,
    /// The command was stopped before it finished (timed out or cancelled), so some of its
    /// work may be done and some not; file changes already made stay.
    pub partial_execution: bool,
    /// Processes other than the shell that were still alive when the command ended and were
    /// stopped (CMD-6): background jobs, including ones that left with `setsid`.
    pub descendants_stopped: usize,
    /// What the sandbox enforced on this machine, in words: the Landlock ABI, whether the
    /// command had private mount and IPC namespaces, and any protection that is missing here
    /// (a field of ours, beyond the tool's original description).
    pub sandbox: String,
    /// With `status: limitExceeded`: the limit, its value, what to do and the stable code
    /// (`AGENT_EXEC_LIMIT_EXCEEDED`), in one sentence. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_exceeded: Option<String>,
    /// Accesses the sandbox refused that the output names (`Permission denied` on a path the
    /// policy denies), with why and what to do (LIVE-4). Absent when there is none: a
    /// permission error the policy did not cause (a file's own mode) is not listed. At most 16.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denials: Vec<Denial>,
    /// What the command changed in git directories (TRUST-1): it worked on a private copy of
    /// each repository's git directory; afterwards its refs, index, objects and allowed config
    /// keys were applied, and anything that makes git run a program (hooks, `core.fsmonitor`,
    /// `core.hooksPath`, `commondir`, …) was refused and is listed here. Absent when the
    /// command changed nothing there.
    #[serde(default, skip_serializing_if = "gitstage::Report::is_empty")]
    pub git: gitstage::Report,
    /// Files of the workspace (or a writable extra path) the command made or changed that
    /// someone may run later: an execute bit, or a build or package file (`Makefile`,
    /// `build.rs`, `package.json`, `*.sh`, …), so a host can show them before the user runs
    /// them outside the sandbox. Absent when there is none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub executable_changes: Vec<String>,
    /// What the command wrote to the toolchains' caches `--toolchains` lets it use (TRUST-3):
    /// a private view of each for this call; the user's caches never change. Absent when it
    /// wrote nothing there.
    #[serde(default, skip_serializing_if = "exec::CacheReport::is_empty")]
    pub caches: exec::CacheReport,
}

/// One access the sandbox refused (LIVE-4), derived from the policy itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Denial {
    /// The path, absolute (a relative one the output named is taken against `cwd`).
    pub path: String,
    /// What was refused.
    pub access: DeniedAccess,
    /// Why the sandbox refuses it, e.g. "outside the work scope and the system runtime".
    pub reason: String,
    /// What to do instead, e.g. "add it as an extraPaths entry (the user confirms it)".
    pub remedy: String,
}

/// The access a [`Denial`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum DeniedAccess {
    /// Reading a file or listing a directory.
    Read,
    /// Writing (opening for writing, which may create a missing file) or removing a file.
    Write,
    /// Creating a file or directory.
    Create,
    /// Executing a file.
    Execute,
}

impl From<exec::denials::Denial> for Denial {
    fn from(d: exec::denials::Denial) -> Denial {
        let (reason, remedy) = words(d.cause, d.access);
        Denial {
            path: d.path.to_string_lossy().into_owned(),
            access: match d.access {
                A::Read => DeniedAccess::Read,
                A::Write => DeniedAccess::Write,
                A::Create => DeniedAccess::Create,
                A::Execute => DeniedAccess::Execute,
            },
            reason: reason.to_owned(),
            remedy: remedy.to_owned(),
        }
    }
}

/// Reason and remedy of a denial, in `command`'s terms (LIVE-4): its roots are the workspace,
/// the call's temp dir and the approved extra paths; the system runtime is read-only.
fn words(cause: Cause, access: A) -> (&'static str, &'static str) {
    const WRITE_REMEDY: &str = "write inside the workspace or the call's temp dir, or ask the \
                                user for a writable extraPaths entry";
    const EXTRA: &str = "add it as an extraPaths entry (the user confirms it)";
    let writing = matches!(access, A::Write | A::Create);
    if let Some(words) = cause.common_words() {
        return words;
    }
    match cause {
        Cause::Hidden => (
            "agent-exec's own state directory (grants, mirrors, locks)",
            "never accessible from a command",
        ),
        Cause::SystemSecret => (
            "a system file that only root or a group may read",
            "not part of the system runtime: only world-readable system files are",
        ),
        Cause::ReadOnly { system } if access == A::Execute => (
            if system {
                "a system location that is readable but not executable"
            } else {
                "the workspace, the call's temp dir and writable extra paths hold data, not \
                 programs: nothing in them is executed"
            },
            "run a script through its interpreter (`sh x.sh`, `python3 x.py`), or ask the user \
             for a read-only extraPaths entry, whose programs run",
        ),
        _ if access == A::Execute => (
            "outside the work scope and the system runtime",
            "ask the user for a read-only extraPaths entry (read-only extra paths run their \
             programs)",
        ),
        Cause::ReadOnly { system: true } => ("a read-only system location", WRITE_REMEDY),
        Cause::ReadOnly { system: false } => ("a read-only extra path", WRITE_REMEDY),
        _ if writing => (
            "outside the writable roots (the workspace, the call's temp dir, writable extra \
             paths)",
            WRITE_REMEDY,
        ),
        Cause::NotSystemRuntime => (
            "a system location that is not part of the system runtime",
            EXTRA,
        ),
        // Outside, and what only `run` meets (its one program, `.git` on a Mac's mirror).
        _ => ("outside the work scope and the system runtime", EXTRA),
    }
}

impl CommandOutput {
    /// The JSON Schema of the result.
    pub fn json_schema() -> schemars::Schema {
        schemars::schema_for!(CommandOutput)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_use_the_exact_camel_case_names() {
        let args = CommandArguments {
            command: "ls".into(),
            cwd: Some("src".into()),
            extra_paths: vec![ExtraPath {
                path: "/data".into(),
                write: true,
            }],
            timeout_ms: Some(1000),
        };
        assert_eq!(
            serde_json::to_value(&args).unwrap(),
            json!({"command": "ls", "cwd": "src", "extraPaths": [{"path": "/data", "write": true}], "timeoutMs": 1000})
        );
        let parsed =
            CommandArguments::from_json(json!({"command": "ls", "extraPaths": [{"path": "/d"}]}))
                .unwrap();
        assert!(!parsed.extra_paths[0].write, "write defaults to false");
    }

    #[test]
    fn output_uses_the_exact_names_and_status_strings() {
        let out = CommandOutput {
            stdout: "a".into(),
            stderr: String::new(),
            exit_code: None,
            status: Status::TimedOut,
            truncated: false,
            partial_execution: true,
            descendants_stopped: 2,
            sandbox: "fully enforced".into(),
            limit_exceeded: None,
            denials: Vec::new(),
            git: gitstage::Report::default(),
            executable_changes: Vec::new(),
            caches: exec::CacheReport::default(),
        };
        // No denial: no `denials` field; no limit hit: no `limitExceeded`.
        assert_eq!(
            serde_json::to_value(&out).unwrap(),
            json!({"stdout": "a", "stderr": "", "exitCode": null, "status": "timedOut",
                   "truncated": false, "partialExecution": true, "descendantsStopped": 2,
                   "sandbox": "fully enforced"})
        );
        let denied = CommandOutput {
            denials: vec![Denial {
                path: "/home/u/.ssh/id_rsa".into(),
                access: DeniedAccess::Read,
                reason: "outside the work scope and the system runtime".into(),
                remedy: "add it as an extraPaths entry (the user confirms it)".into(),
            }],
            ..out
        };
        let value = serde_json::to_value(&denied).unwrap();
        assert_eq!(
            value["denials"],
            json!([{"path": "/home/u/.ssh/id_rsa", "access": "read",
                    "reason": "outside the work scope and the system runtime",
                    "remedy": "add it as an extraPaths entry (the user confirms it)"}])
        );
        assert_eq!(
            serde_json::from_value::<CommandOutput>(value).unwrap(),
            denied
        );
        let names: Vec<String> = [
            Status::Exited,
            Status::Signaled,
            Status::TimedOut,
            Status::Cancelled,
            Status::LimitExceeded,
        ]
        .iter()
        .map(|s| {
            serde_json::to_value(s)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
        assert_eq!(
            names,
            [
                "exited",
                "signaled",
                "timedOut",
                "cancelled",
                "limitExceeded"
            ]
        );
    }

    #[test]
    fn denial_words_follow_live_4() {
        let w = |cause, access| words(cause, access);
        assert_eq!(
            w(Cause::Outside, A::Read),
            (
                "outside the work scope and the system runtime",
                "add it as an extraPaths entry (the user confirms it)"
            )
        );
        let write = "write inside the workspace or the call's temp dir, or ask the user for a \
                     writable extraPaths entry";
        for cause in [
            Cause::Outside,
            Cause::NotSystemRuntime,
            Cause::ReadOnly { system: true },
            Cause::ReadOnly { system: false },
        ] {
            for access in [A::Write, A::Create] {
                assert_eq!(w(cause, access).1, write, "{cause:?} {access:?}");
            }
        }
        assert_eq!(
            w(Cause::Hidden, A::Read).1,
            "never accessible from a command"
        );
        assert_eq!(
            w(Cause::SystemSecret, A::Read).1,
            "not part of the system runtime: only world-readable system files are"
        );
        assert!(
            w(Cause::ReadOnly { system: false }, A::Execute)
                .1
                .contains("interpreter")
        );
    }

    #[test]
    fn malformed_arguments_are_invalid_arguments() {
        for value in [
            json!({"command": "ls", "cwdRelative": "."}),
            json!({"command": "ls", "extraPaths": [{"path": "/d", "writable": true}]}),
            json!({"command": "ls", "extraPaths": [{"write": true}]}),
            json!({"command": "ls", "extraPaths": "/d"}),
            json!({"command": "ls", "timeoutMs": -5}),
            json!({"command": ["ls"]}),
            json!({"cwd": "."}),
            json!(["ls"]),
            json!("ls"),
        ] {
            let err = CommandArguments::from_json(value.clone()).expect_err(&value.to_string());
            assert_eq!(err.code(), ErrorCode::ExecArgumentsInvalid, "{value}");
        }
    }

    #[test]
    fn schema_refuses_additional_properties_and_bounds_the_timeout() {
        let schema = serde_json::to_value(CommandArguments::json_schema()).unwrap();
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(schema["properties"]["timeoutMs"]["maximum"], json!(300000));
        assert_eq!(schema["required"], json!(["command"]));
        let out = serde_json::to_value(CommandOutput::json_schema()).unwrap();
        assert_eq!(out["additionalProperties"], json!(false));
    }
}
