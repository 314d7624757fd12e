//! The stable error codes (RUN-13, the gate's own, and `run_command`'s `RUN_COMMAND_*`) and the
//! failed-call JSON shape.
//!
//! A code is a promise to clients: its string never changes. That is why the strings live in one
//! table ([`ErrorCode::as_str`]) that both serde directions use, instead of per-variant
//! `#[serde(rename)]` attributes that could drift from `Display`.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A stable, public error code, serialised to its exact string (RUN-13).
///
/// The `AGENT_EXEC_*` codes are the exec tools' (RUN-13); the other `AGENT_*` codes are the
/// gate's own public agent errors, which the layer above a tool may return first
/// (TS-3). The `RUN_COMMAND_*` codes are the
/// `run_command` decision's refusals, spelt exactly as argv-policy's `RefuseCode` (RC-1…RC-15).
///
/// ```
/// use toolscope::ErrorCode;
/// assert_eq!(ErrorCode::ExecTimeout.as_str(), "AGENT_EXEC_TIMEOUT");
/// assert_eq!("AGENT_BUDGET_EXHAUSTED".parse(), Ok(ErrorCode::BudgetExhausted));
/// assert_eq!(serde_json::to_string(&ErrorCode::ExecCancelled).unwrap(), r#""AGENT_EXEC_CANCELLED""#);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `AGENT_EXEC_UNSUPPORTED`: no sandbox provider exists on this platform.
    ExecUnsupported,
    /// `AGENT_EXEC_YOLO_REQUIRED`: the workspace is not in mode `yolo` (PERM-3).
    ExecYoloRequired,
    /// `AGENT_EXEC_ARGUMENTS_INVALID`: the arguments break the tool's schema or whitelist.
    ExecArgumentsInvalid,
    /// `AGENT_EXEC_PROGRAM_UNSUPPORTED`: `run` was asked for a program outside its fixed set.
    ExecProgramUnsupported,
    /// `AGENT_EXEC_PATH_INVALID`: a path is absolute, has `..`, a symlink or `.git` (RUN-4).
    ExecPathInvalid,
    /// `AGENT_EXEC_PATH_PROTECTED`: the path is auto-run configuration or git metadata that host
    /// programs obey without the user running anything (TRUST-1, TRUST-2); only the user
    /// changes it, or confirms a change that names the file.
    ExecPathProtected,
    /// `AGENT_EXEC_SANDBOX_UNAVAILABLE`: the provider exists but cannot be applied now.
    ExecSandboxUnavailable,
    /// `AGENT_EXEC_TIMEOUT`: the call's deadline passed; its processes were stopped.
    ExecTimeout,
    /// `AGENT_EXEC_OUTPUT_LIMIT`: stdout or stderr passed its cap (RUN-9).
    ExecOutputLimit,
    /// `AGENT_EXEC_LIMIT_EXCEEDED`: the call hit one of its resource limits (processes,
    /// memory, temp dir size; LIM-2); its processes were stopped.
    ExecLimitExceeded,
    /// `AGENT_EXEC_CANCELLED`: the call was cancelled (by request, revocation, turn end or
    /// account switch); its processes were stopped.
    ExecCancelled,
    /// `AGENT_EXEC_IO_FAILED`: an I/O step of the tool itself failed.
    ExecIoFailed,
    /// `AGENT_EXEC_SCOPE_REQUIRED`: the call has no live ToolScope (TS-4), or its turn ended.
    ExecScopeRequired,
    /// `AGENT_EXEC_FAILED`: the program ran and exited unsuccessfully (RUN-12).
    ExecFailed,
    /// `AGENT_EXEC_WRITE_BACK_INCOMPLETE`: the program ran and succeeded, but its changes did
    /// not all reach the user's folder (a conflict with the user's own edits, or the write-back
    /// could not run); the result's `mirror` says which, and where the mirror is kept (RUN-11).
    ExecWriteBackIncomplete,
    /// `AGENT_EXEC_DESCRIPTORS_EXHAUSTED`: the process cannot open the file descriptors the
    /// call needs (its `ulimit -n`, or the system's table, is full); nothing ran. The message
    /// names the limit and the number a call needs.
    ExecDescriptorsExhausted,
    /// `AGENT_EXEC_MEMORY_EXHAUSTED`: the process cannot map the memory the call needs under
    /// its address-space limit (`ulimit -v`); nothing ran. The message names the limit and
    /// what a call needs.
    ExecMemoryExhausted,
    /// `AGENT_PERMISSION_DENIED`: service approval, consent, capability approval or a folder
    /// grant is missing or was revoked (TS-3, PERM-1, PERM-2).
    PermissionDenied,
    /// `AGENT_BUDGET_EXHAUSTED`: the turn already admitted its 32 tool calls (TS-2).
    BudgetExhausted,
    /// `AGENT_ACCOUNT_RETIRED`: the call belongs to an account generation that was switched
    /// away (CMD-12).
    AccountRetired,
    /// `AGENT_CALL_ID_INVALID`: the `callId` is empty or longer than 256 bytes (TS-1).
    CallIdInvalid,
    /// `AGENT_CALL_ID_REUSED`: the `callId` was already used in this turn for a different tool
    /// or different arguments (TS-1; a client bug, not a retry).
    CallIdReused,
    // The `run_command` decision's refusals (argv-policy's `RefuseCode`, same strings): the
    // executor returns them as they are so a client sees one code per reason, whichever front
    // end it uses.
    /// `RUN_COMMAND_ARGUMENTS_INVALID`: empty argv, an empty program, a NUL byte, bad JSON.
    RunCommandArgumentsInvalid,
    /// `RUN_COMMAND_METACHARACTERS`: an element that is shell syntax outside `sh -c` (RC-2).
    RunCommandMetacharacters,
    /// `RUN_COMMAND_SCRIPT_UNPARSABLE`: the `sh -c` script did not parse fully, or hides its commands (RC-2).
    RunCommandScriptUnparsable,
    /// `RUN_COMMAND_NOT_STATIC`: a command word is computed, quoted, escaped or a path (RC-2).
    RunCommandNotStatic,
    /// `RUN_COMMAND_DENIED`: the program is on the denied list (RC-2, RC-11).
    RunCommandDenied,
    /// `RUN_COMMAND_CD`: `['cd', …]` (RC-3).
    RunCommandCd,
    /// `RUN_COMMAND_OPEN`: `open` on macOS (RC-5).
    RunCommandOpen,
    /// `RUN_COMMAND_RM_IN_SCRIPT`: `rm` inside a script or behind a launcher (RC-4).
    RunCommandRmInScript,
    /// `RUN_COMMAND_RM_INVALID`: `['rm', …]` without paths, or of `/`, `$HOME`, the working directory (RC-4).
    RunCommandRmInvalid,
    /// `RUN_COMMAND_SUDO_IN_SCRIPT`: `sudo`/`su` inside a script or behind a launcher (RC-11).
    RunCommandSudoInScript,
    /// `RUN_COMMAND_SUDO_INVALID`: `['sudo', …]` with flags, a nested sudo, a path (RC-11).
    RunCommandSudoInvalid,
    /// `RUN_COMMAND_WATCHER`: a file watcher, which never ends (RC-15).
    RunCommandWatcher,
    /// `RUN_COMMAND_MASKED_SECRET`: the argv holds a mask token `[secret:N]` of an earlier result (RC-14).
    RunCommandMaskedSecret,
    /// `RUN_COMMAND_ENVIRONMENT_DENIED`: an assignment that would change which program a name starts (RC-2).
    RunCommandEnvironmentDenied,
    /// `RUN_COMMAND_SHELL_UNSUPPORTED`: a shell other than `sh`/`bash` given a script, or a script on stdin (RC-2).
    RunCommandShellUnsupported,
    /// `RUN_COMMAND_WRITE_PATH_INVALID`: a `write_paths` entry that cannot be granted (RC-10).
    RunCommandWritePathInvalid,
    /// `BACKGROUND_COMMAND_LIMIT`: the session already runs its `MAX_BACKGROUND_TASKS` (BG-8).
    BackgroundLimit,
    /// `BACKGROUND_COMMAND_NO_DELIVERY`: nobody would hear about the task (a one-shot front
    /// end, no event stream; BG-7).
    BackgroundNoDelivery,
    /// `BACKGROUND_COMMAND_UNKNOWN_TASK`: no task of this session has that id (any more).
    BackgroundUnknownTask,
}

impl ErrorCode {
    /// Every code, in declaration order.
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::ExecUnsupported,
        ErrorCode::ExecYoloRequired,
        ErrorCode::ExecArgumentsInvalid,
        ErrorCode::ExecProgramUnsupported,
        ErrorCode::ExecPathInvalid,
        ErrorCode::ExecPathProtected,
        ErrorCode::ExecSandboxUnavailable,
        ErrorCode::ExecTimeout,
        ErrorCode::ExecOutputLimit,
        ErrorCode::ExecLimitExceeded,
        ErrorCode::ExecCancelled,
        ErrorCode::ExecIoFailed,
        ErrorCode::ExecScopeRequired,
        ErrorCode::ExecFailed,
        ErrorCode::ExecWriteBackIncomplete,
        ErrorCode::ExecDescriptorsExhausted,
        ErrorCode::ExecMemoryExhausted,
        ErrorCode::PermissionDenied,
        ErrorCode::BudgetExhausted,
        ErrorCode::AccountRetired,
        ErrorCode::CallIdInvalid,
        ErrorCode::CallIdReused,
        ErrorCode::RunCommandArgumentsInvalid,
        ErrorCode::RunCommandMetacharacters,
        ErrorCode::RunCommandScriptUnparsable,
        ErrorCode::RunCommandNotStatic,
        ErrorCode::RunCommandDenied,
        ErrorCode::RunCommandCd,
        ErrorCode::RunCommandOpen,
        ErrorCode::RunCommandRmInScript,
        ErrorCode::RunCommandRmInvalid,
        ErrorCode::RunCommandSudoInScript,
        ErrorCode::RunCommandSudoInvalid,
        ErrorCode::RunCommandWatcher,
        ErrorCode::RunCommandMaskedSecret,
        ErrorCode::RunCommandEnvironmentDenied,
        ErrorCode::RunCommandShellUnsupported,
        ErrorCode::RunCommandWritePathInvalid,
        ErrorCode::BackgroundLimit,
        ErrorCode::BackgroundNoDelivery,
        ErrorCode::BackgroundUnknownTask,
    ];

    /// The exact wire string.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ExecUnsupported => "AGENT_EXEC_UNSUPPORTED",
            ErrorCode::ExecYoloRequired => "AGENT_EXEC_YOLO_REQUIRED",
            ErrorCode::ExecArgumentsInvalid => "AGENT_EXEC_ARGUMENTS_INVALID",
            ErrorCode::ExecProgramUnsupported => "AGENT_EXEC_PROGRAM_UNSUPPORTED",
            ErrorCode::ExecPathInvalid => "AGENT_EXEC_PATH_INVALID",
            ErrorCode::ExecPathProtected => "AGENT_EXEC_PATH_PROTECTED",
            ErrorCode::ExecSandboxUnavailable => "AGENT_EXEC_SANDBOX_UNAVAILABLE",
            ErrorCode::ExecTimeout => "AGENT_EXEC_TIMEOUT",
            ErrorCode::ExecOutputLimit => "AGENT_EXEC_OUTPUT_LIMIT",
            ErrorCode::ExecLimitExceeded => "AGENT_EXEC_LIMIT_EXCEEDED",
            ErrorCode::ExecCancelled => "AGENT_EXEC_CANCELLED",
            ErrorCode::ExecIoFailed => "AGENT_EXEC_IO_FAILED",
            ErrorCode::ExecScopeRequired => "AGENT_EXEC_SCOPE_REQUIRED",
            ErrorCode::ExecFailed => "AGENT_EXEC_FAILED",
            ErrorCode::ExecWriteBackIncomplete => "AGENT_EXEC_WRITE_BACK_INCOMPLETE",
            ErrorCode::ExecDescriptorsExhausted => "AGENT_EXEC_DESCRIPTORS_EXHAUSTED",
            ErrorCode::ExecMemoryExhausted => "AGENT_EXEC_MEMORY_EXHAUSTED",
            ErrorCode::PermissionDenied => "AGENT_PERMISSION_DENIED",
            ErrorCode::BudgetExhausted => "AGENT_BUDGET_EXHAUSTED",
            ErrorCode::AccountRetired => "AGENT_ACCOUNT_RETIRED",
            ErrorCode::CallIdInvalid => "AGENT_CALL_ID_INVALID",
            ErrorCode::CallIdReused => "AGENT_CALL_ID_REUSED",
            ErrorCode::RunCommandArgumentsInvalid => "RUN_COMMAND_ARGUMENTS_INVALID",
            ErrorCode::RunCommandMetacharacters => "RUN_COMMAND_METACHARACTERS",
            ErrorCode::RunCommandScriptUnparsable => "RUN_COMMAND_SCRIPT_UNPARSABLE",
            ErrorCode::RunCommandNotStatic => "RUN_COMMAND_NOT_STATIC",
            ErrorCode::RunCommandDenied => "RUN_COMMAND_DENIED",
            ErrorCode::RunCommandCd => "RUN_COMMAND_CD",
            ErrorCode::RunCommandOpen => "RUN_COMMAND_OPEN",
            ErrorCode::RunCommandRmInScript => "RUN_COMMAND_RM_IN_SCRIPT",
            ErrorCode::RunCommandRmInvalid => "RUN_COMMAND_RM_INVALID",
            ErrorCode::RunCommandSudoInScript => "RUN_COMMAND_SUDO_IN_SCRIPT",
            ErrorCode::RunCommandSudoInvalid => "RUN_COMMAND_SUDO_INVALID",
            ErrorCode::RunCommandWatcher => "RUN_COMMAND_WATCHER",
            ErrorCode::RunCommandMaskedSecret => "RUN_COMMAND_MASKED_SECRET",
            ErrorCode::RunCommandEnvironmentDenied => "RUN_COMMAND_ENVIRONMENT_DENIED",
            ErrorCode::RunCommandShellUnsupported => "RUN_COMMAND_SHELL_UNSUPPORTED",
            ErrorCode::RunCommandWritePathInvalid => "RUN_COMMAND_WRITE_PATH_INVALID",
            ErrorCode::BackgroundLimit => "BACKGROUND_COMMAND_LIMIT",
            ErrorCode::BackgroundNoDelivery => "BACKGROUND_COMMAND_NO_DELIVERY",
            ErrorCode::BackgroundUnknownTask => "BACKGROUND_COMMAND_UNKNOWN_TASK",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The string is not one of [`ErrorCode::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown error code {0:?}; expected one of the AGENT_* or RUN_COMMAND_* codes listed in ErrorCode::ALL"
)]
pub struct UnknownErrorCode(pub String);

impl FromStr for ErrorCode {
    type Err = UnknownErrorCode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ErrorCode::ALL
            .iter()
            .copied()
            .find(|code| code.as_str() == s)
            .ok_or_else(|| UnknownErrorCode(s.to_owned()))
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(de::Error::custom)
    }
}

/// A failed tool call: `{"ok": false, "code": "…", "message": "…", …details}`.
///
/// The message says what was wrong and what to do instead (docs/requirements.md,
/// "Interfaces"). Details are extra top-level fields a tool adds, e.g. the bounded output of `AGENT_EXEC_FAILED` (RUN-12); they
/// can never replace `ok`, `code` or `message`.
///
/// ```
/// use toolscope::{ErrorCode, ToolError};
/// let err = ToolError::new(ErrorCode::ExecTimeout, "the run took longer than timeoutMs; raise it (max 30000) or split the work")
///     .with_detail("timeoutMs", 100);
/// assert_eq!(
///     serde_json::to_string(&err).unwrap(),
///     r#"{"ok":false,"code":"AGENT_EXEC_TIMEOUT","message":"the run took longer than timeoutMs; raise it (max 30000) or split the work","timeoutMs":100}"#,
/// );
/// ```
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ToolError {
    code: ErrorCode,
    message: String,
    details: Map<String, Value>,
}

/// The keys the envelope owns; a detail with one of these names is dropped.
const RESERVED: [&str; 3] = ["ok", "code", "message"];

impl ToolError {
    /// A failed call with `code` and a message that says what to do instead.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            details: Map::new(),
        }
    }

    /// Adds a top-level field (e.g. `exitCode`, `stdout`). Keys `ok`, `code` and `message` belong
    /// to the envelope and are ignored, so a detail can never turn a failure into `ok: true`.
    #[must_use]
    pub fn with_detail(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        let key = key.into();
        if !RESERVED.contains(&key.as_str()) {
            self.details.insert(key, value.into());
        }
        self
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The human message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The extra top-level fields.
    pub fn details(&self) -> &Map<String, Value> {
        &self.details
    }

    /// `AGENT_EXEC_SCOPE_REQUIRED` for a call made outside any ToolScope (TS-4).
    pub fn scope_required() -> Self {
        ToolError::new(
            ErrorCode::ExecScopeRequired,
            "this tool call has no ToolScope context; make it from inside an agent turn, \
             which gives every call its scope",
        )
    }
}

impl Serialize for ToolError {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3 + self.details.len()))?;
        map.serialize_entry("ok", &false)?;
        map.serialize_entry("code", &self.code)?;
        map.serialize_entry("message", &self.message)?;
        for (key, value) in &self.details {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ToolError {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            ok: bool,
            code: ErrorCode,
            message: String,
            #[serde(flatten)]
            details: Map<String, Value>,
        }
        let wire = Wire::deserialize(deserializer)?;
        if wire.ok {
            return Err(de::Error::custom(
                "a ToolError has \"ok\": false; an \"ok\": true object is a result, not an error",
            ));
        }
        Ok(ToolError {
            code: wire.code,
            message: wire.message,
            details: wire.details,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RUN-13: the exact strings, written out independently of `as_str`.
    const EXPECTED: &[&str] = &[
        "AGENT_EXEC_UNSUPPORTED",
        "AGENT_EXEC_YOLO_REQUIRED",
        "AGENT_EXEC_ARGUMENTS_INVALID",
        "AGENT_EXEC_PROGRAM_UNSUPPORTED",
        "AGENT_EXEC_PATH_INVALID",
        "AGENT_EXEC_PATH_PROTECTED",
        "AGENT_EXEC_SANDBOX_UNAVAILABLE",
        "AGENT_EXEC_TIMEOUT",
        "AGENT_EXEC_OUTPUT_LIMIT",
        "AGENT_EXEC_LIMIT_EXCEEDED",
        "AGENT_EXEC_CANCELLED",
        "AGENT_EXEC_IO_FAILED",
        "AGENT_EXEC_SCOPE_REQUIRED",
        "AGENT_EXEC_FAILED",
        "AGENT_EXEC_WRITE_BACK_INCOMPLETE",
        "AGENT_EXEC_DESCRIPTORS_EXHAUSTED",
        "AGENT_EXEC_MEMORY_EXHAUSTED",
        "AGENT_PERMISSION_DENIED",
        "AGENT_BUDGET_EXHAUSTED",
        "AGENT_ACCOUNT_RETIRED",
        "AGENT_CALL_ID_INVALID",
        "AGENT_CALL_ID_REUSED",
        "RUN_COMMAND_ARGUMENTS_INVALID",
        "RUN_COMMAND_METACHARACTERS",
        "RUN_COMMAND_SCRIPT_UNPARSABLE",
        "RUN_COMMAND_NOT_STATIC",
        "RUN_COMMAND_DENIED",
        "RUN_COMMAND_CD",
        "RUN_COMMAND_OPEN",
        "RUN_COMMAND_RM_IN_SCRIPT",
        "RUN_COMMAND_RM_INVALID",
        "RUN_COMMAND_SUDO_IN_SCRIPT",
        "RUN_COMMAND_SUDO_INVALID",
        "RUN_COMMAND_WATCHER",
        "RUN_COMMAND_MASKED_SECRET",
        "RUN_COMMAND_ENVIRONMENT_DENIED",
        "RUN_COMMAND_SHELL_UNSUPPORTED",
        "RUN_COMMAND_WRITE_PATH_INVALID",
        "BACKGROUND_COMMAND_LIMIT",
        "BACKGROUND_COMMAND_NO_DELIVERY",
        "BACKGROUND_COMMAND_UNKNOWN_TASK",
    ];

    #[test]
    fn every_error_code_round_trips_through_json_to_its_exact_string() {
        assert_eq!(ErrorCode::ALL.len(), EXPECTED.len());
        for (code, expected) in ErrorCode::ALL.iter().zip(EXPECTED) {
            let json = serde_json::to_string(code).unwrap();
            assert_eq!(json, format!("\"{expected}\""));
            assert_eq!(serde_json::from_str::<ErrorCode>(&json).unwrap(), *code);
            assert_eq!(code.to_string(), *expected);
            assert_eq!(expected.parse::<ErrorCode>().unwrap(), *code);
        }
    }

    #[test]
    fn every_code_of_run_13_exists() {
        // RUN-13 lists these verbatim, plus AGENT_EXEC_FAILED.
        for s in [
            "AGENT_EXEC_UNSUPPORTED",
            "AGENT_EXEC_YOLO_REQUIRED",
            "AGENT_EXEC_ARGUMENTS_INVALID",
            "AGENT_EXEC_PROGRAM_UNSUPPORTED",
            "AGENT_EXEC_PATH_INVALID",
            "AGENT_EXEC_SANDBOX_UNAVAILABLE",
            "AGENT_EXEC_TIMEOUT",
            "AGENT_EXEC_OUTPUT_LIMIT",
            "AGENT_EXEC_CANCELLED",
            "AGENT_EXEC_IO_FAILED",
            "AGENT_EXEC_SCOPE_REQUIRED",
            "AGENT_EXEC_FAILED",
        ] {
            assert!(s.parse::<ErrorCode>().is_ok(), "{s} is missing");
        }
    }

    #[test]
    fn unknown_or_differently_cased_code_is_refused() {
        for s in [
            "",
            "agent_exec_timeout",
            "AGENT_EXEC_TIMEOUT ",
            "AGENT_EXEC",
        ] {
            assert_eq!(s.parse::<ErrorCode>(), Err(UnknownErrorCode(s.to_owned())));
            assert!(serde_json::from_value::<ErrorCode>(Value::from(s)).is_err());
        }
    }

    #[test]
    fn tool_error_serialises_to_the_spec_shape() {
        let err = ToolError::new(ErrorCode::PermissionDenied, "ask the user");
        assert_eq!(
            serde_json::to_value(&err).unwrap(),
            serde_json::json!({"ok": false, "code": "AGENT_PERMISSION_DENIED", "message": "ask the user"})
        );
        assert_eq!(
            serde_json::to_string(&err).unwrap(),
            r#"{"ok":false,"code":"AGENT_PERMISSION_DENIED","message":"ask the user"}"#
        );
    }

    #[test]
    fn tool_error_details_are_flattened_and_round_trip() {
        let err = ToolError::new(ErrorCode::ExecFailed, "exit 2; read stderr")
            .with_detail("exitCode", 2)
            .with_detail("stdout", "")
            .with_detail("truncated", false);
        let json = serde_json::to_value(&err).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"ok": false, "code": "AGENT_EXEC_FAILED", "message": "exit 2; read stderr",
                               "exitCode": 2, "stdout": "", "truncated": false})
        );
        assert_eq!(serde_json::from_value::<ToolError>(json).unwrap(), err);
    }

    #[test]
    fn a_detail_cannot_overwrite_the_envelope() {
        let err = ToolError::new(ErrorCode::ExecFailed, "m")
            .with_detail("ok", true)
            .with_detail("code", "AGENT_X")
            .with_detail("message", "other");
        assert!(err.details().is_empty());
        assert_eq!(
            serde_json::to_value(&err).unwrap(),
            serde_json::json!({"ok": false, "code": "AGENT_EXEC_FAILED", "message": "m"})
        );
    }

    #[test]
    fn an_ok_true_object_is_not_a_tool_error() {
        let json = serde_json::json!({"ok": true, "code": "AGENT_EXEC_FAILED", "message": "m"});
        assert!(serde_json::from_value::<ToolError>(json).is_err());
    }

    #[test]
    fn display_names_code_and_message() {
        let err = ToolError::scope_required();
        assert!(err.to_string().starts_with("AGENT_EXEC_SCOPE_REQUIRED: "));
    }
}
