//! The wire types of `run`: what the model sends ([`AgentRunArguments`]) and what it gets back
//! ([`AgentRunOutput`]), with the exact camelCase names of its description (RUN-14,
//! docs/requirements.md "Interfaces").
//!
//! Unknown fields are refused (`deny_unknown_fields`): a misspelt `cwdrelative` must not
//! silently run in `.`. `program` is a plain string on the wire, not an enum, so an unknown
//! program gets its own stable code (`AGENT_EXEC_PROGRAM_UNSUPPORTED`, RUN-1) instead of a
//! generic parse error; the JSON Schema still lists the four names.

use exec::denials::{Cause, DeniedAccess as A};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolscope::{ErrorCode, ToolError};

/// The arguments of one `run` call.
///
/// ```
/// let args: run_tool::AgentRunArguments =
///     serde_json::from_str(r#"{"program":"awk","args":["-f","summary.awk","input.csv"]}"#).unwrap();
/// assert_eq!(args.program, "awk");
/// assert_eq!(args.cwd_relative, None); // `.`
/// assert_eq!(args.timeout_ms, None); // 10 000 ms
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentRunArguments {
    /// One of `awk`, `wc`, `sort`, `diff` (RUN-1).
    #[schemars(extend("enum" = ["awk", "wc", "sort", "diff"]))]
    pub program: String,
    /// Options, then files relative to `cwdRelative` (RUN-2, RUN-3). At most 64 items, each at
    /// most 4096 bytes, at most 16 KiB in total. An item that starts with `-` is always an
    /// option; name a file whose name starts with `-` as `./-name`.
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub args: Vec<String>,
    /// The working directory, relative to the mirror; default `.` (RUN-4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd_relative: Option<String>,
    /// Time limit in milliseconds, 1–30000; default 10000 (RUN-5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 30000))]
    pub timeout_ms: Option<u64>,
}

impl AgentRunArguments {
    /// Parses the arguments from JSON; any shape error (unknown field, wrong type, missing
    /// `program`) is `AGENT_EXEC_ARGUMENTS_INVALID` with serde's description of it.
    ///
    /// ```
    /// use run_tool::AgentRunArguments;
    /// let err = AgentRunArguments::from_json(serde_json::json!({"program": "wc", "cwd": "."}))
    ///     .unwrap_err();
    /// assert_eq!(err.code(), toolscope::ErrorCode::ExecArgumentsInvalid);
    /// ```
    pub fn from_json(value: serde_json::Value) -> Result<Self, ToolError> {
        // serde also reads a struct from a JSON array (`["wc"]`); the wire form is an object.
        if !value.is_object() {
            return Err(ToolError::new(
                ErrorCode::ExecArgumentsInvalid,
                "the run arguments must be a JSON object with `program` and optionally `args`, \
                 `cwdRelative`, `timeoutMs`",
            ));
        }
        serde_json::from_value(value).map_err(|e| {
            ToolError::new(
                ErrorCode::ExecArgumentsInvalid,
                format!(
                    "the run arguments do not match the schema: {e}; send an object with \
                     `program` and optionally `args`, `cwdRelative`, `timeoutMs`"
                ),
            )
        })
    }

    /// The JSON Schema of the arguments (for tool listings such as MCP's `inputSchema`).
    pub fn json_schema() -> schemars::Schema {
        schemars::schema_for!(AgentRunArguments)
    }
}

/// The result of a successful `run` (RUN-12). A failed run is a [`ToolError`] instead; for
/// `AGENT_EXEC_FAILED` its details carry the same fields as this struct.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentRunOutput {
    /// The program's name as asked for (`awk`, `wc`, `sort` or `diff`).
    pub program: String,
    /// Its exit code: 0, or 1 for `diff` when the files differ.
    pub exit_code: i32,
    /// Standard output, at most 64 KiB (bytes that are not UTF-8 become U+FFFD).
    pub stdout: String,
    /// Standard error, at most 64 KiB.
    pub stderr: String,
    /// Always `false` on success: passing a cap fails the run with `AGENT_EXEC_OUTPUT_LIMIT`
    /// (RUN-9). Kept because RUN-12 names it.
    pub truncated: bool,
    /// Accesses the sandbox refused that the output names, with why and what to do
    /// (LIVE-4); absent when there is none. A failed run carries the same list in its error's
    /// details (`denials`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denials: Vec<Denial>,
}

/// One access the sandbox refused (LIVE-4), derived from the policy itself; the roots of
/// `run` are the workspace's mirror and the call's temp dir.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Denial {
    /// The path, absolute (a relative one the output named is taken against `cwdRelative`).
    pub path: String,
    /// What was refused.
    pub access: DeniedAccess,
    /// Why the sandbox refuses it.
    pub reason: String,
    /// What to do instead.
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

/// Reason and remedy of a denial, in `run`'s terms (LIVE-4): its roots are the workspace's
/// mirror and the call's temp dir, and it executes one program.
fn words(cause: Cause, access: A) -> (&'static str, &'static str) {
    match cause {
        Cause::NotTheProgram => (
            "run executes its one program and nothing else",
            "run one program per call; use the command tool for pipelines and other programs",
        ),
        Cause::DotGit => (
            "`.git` is not part of the mirror run works on",
            "never accessible from run; use the command tool for git",
        ),
        Cause::Hidden => (
            "agent-exec's own state directory (grants, mirrors, locks)",
            "never accessible from a command",
        ),
        _ if matches!(access, A::Write | A::Create) => (
            "outside the mirror of the workspace and the call's temp dir",
            "write inside the workspace (run works on its mirror) or the call's temp dir",
        ),
        Cause::SystemSecret => (
            "a system file that only root or a group may read",
            "not part of the system runtime: only world-readable system files are",
        ),
        _ => (
            "outside the mirror of the workspace and the program's own files",
            "copy what the program needs into the workspace, or use the command tool with an \
             extraPaths entry (the user confirms it)",
        ),
    }
}

impl AgentRunOutput {
    /// The JSON Schema of the result.
    pub fn json_schema() -> schemars::Schema {
        schemars::schema_for!(AgentRunOutput)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_use_the_exact_camel_case_names() {
        let args = AgentRunArguments {
            program: "wc".into(),
            args: vec!["-l".into(), "a.csv".into()],
            cwd_relative: Some("data".into()),
            timeout_ms: Some(500),
        };
        assert_eq!(
            serde_json::to_value(&args).unwrap(),
            json!({"program": "wc", "args": ["-l", "a.csv"], "cwdRelative": "data", "timeoutMs": 500})
        );
    }

    #[test]
    fn output_uses_the_exact_camel_case_names() {
        let out = AgentRunOutput {
            program: "diff".into(),
            exit_code: 1,
            stdout: "x".into(),
            stderr: String::new(),
            truncated: false,
            denials: Vec::new(),
        };
        assert_eq!(
            serde_json::to_value(&out).unwrap(),
            json!({"program": "diff", "exitCode": 1, "stdout": "x", "stderr": "", "truncated": false})
        );
        let denied = AgentRunOutput {
            denials: vec![Denial {
                path: "/etc/shadow".into(),
                access: DeniedAccess::Read,
                reason: "r".into(),
                remedy: "m".into(),
            }],
            ..out
        };
        assert_eq!(
            serde_json::to_value(&denied).unwrap()["denials"],
            json!([{"path": "/etc/shadow", "access": "read", "reason": "r", "remedy": "m"}])
        );
    }

    #[test]
    fn denial_words_speak_of_the_mirror_and_the_one_program() {
        assert!(words(Cause::Outside, A::Read).0.contains("mirror"));
        assert!(words(Cause::Outside, A::Create).1.contains("mirror"));
        assert!(
            words(Cause::ReadOnly { system: true }, A::Write)
                .1
                .contains("mirror")
        );
        assert!(
            words(Cause::NotTheProgram, A::Execute)
                .1
                .contains("command tool")
        );
        assert_eq!(
            words(Cause::SystemSecret, A::Read).1,
            "not part of the system runtime: only world-readable system files are"
        );
    }

    #[test]
    fn unknown_fields_are_refused_as_invalid_arguments() {
        for value in [
            json!({"program": "wc", "cwd": "."}),
            json!({"program": "wc", "timeout_ms": 5}),
            json!({"program": "wc", "args": "-l a"}),
            json!({"args": ["a"]}),
            json!({"program": "wc", "timeoutMs": -1}),
            json!({"program": "wc", "timeoutMs": 1.5}),
            json!(["wc"]),
        ] {
            let err = AgentRunArguments::from_json(value.clone()).expect_err(&value.to_string());
            assert_eq!(err.code(), ErrorCode::ExecArgumentsInvalid, "{value}");
        }
    }

    #[test]
    fn schema_lists_the_programs_and_refuses_additional_properties() {
        let schema = serde_json::to_value(AgentRunArguments::json_schema()).unwrap();
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(
            schema["properties"]["program"]["enum"],
            json!(["awk", "wc", "sort", "diff"])
        );
        assert_eq!(schema["properties"]["timeoutMs"]["maximum"], json!(30000));
        assert_eq!(schema["required"], json!(["program"]));
        let out = serde_json::to_value(AgentRunOutput::json_schema()).unwrap();
        let mut names: Vec<&str> = out["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "denials",
                "exitCode",
                "program",
                "stderr",
                "stdout",
                "truncated"
            ]
        );
    }
}
