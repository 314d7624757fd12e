//! The wire side of `run_command`: the host's [`RunCommandOptions`], the result
//! [`RunCommandOutput`] (camelCase JSON), its [`Status`], [`Trashed`] and [`Denial`] items, and
//! the arguments' [`input_schema`].
//!
//! **Owns:** field names and their meaning; the bounds ([`RUN_COMMAND_TIMEOUT`],
//! [`OUTPUT_CAP`]). **Refuses to know:** how the values are produced (module `run`).

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

/// The per-call time limit (RC-6): 30 minutes; a host may lower it in [`RunCommandOptions`].
pub const RUN_COMMAND_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Bytes of merged output kept: the first half and the last half of it, with a marker line
/// `[… N bytes omitted …]` between them when more was written (a build's last error survives).
pub const OUTPUT_CAP: usize = 256 * 1024;

/// What the host tells the executor about the machine and the session.
#[derive(Debug, Clone)]
pub struct RunCommandOptions {
    /// The user's `$HOME` (absolute): read-only in the sandbox except its private locations,
    /// which are hidden; the base of `~/` rules.
    pub home: PathBuf,
    /// Host directories or files no command may see (e.g. agent-exec's own state).
    pub hidden: Vec<PathBuf>,
    /// Host paths that stay read-only even inside a writable root (e.g. the host's config).
    pub protected: Vec<PathBuf>,
    /// The call's time limit; default [`RUN_COMMAND_TIMEOUT`].
    pub timeout: Duration,
    /// Extra environment variables the host passes through by name (never a secret: such a
    /// value is also added to the session's masked secrets).
    pub env: Vec<(String, String)>,
}

impl RunCommandOptions {
    /// Options for a user whose home is `home`, with nothing hidden or protected beyond the
    /// defaults, the 30-minute limit and no extra environment.
    pub fn for_home(home: impl Into<PathBuf>) -> Self {
        RunCommandOptions {
            home: home.into(),
            hidden: Vec::new(),
            protected: Vec::new(),
            timeout: RUN_COMMAND_TIMEOUT,
            env: Vec::new(),
        }
    }
}

/// Why the call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Status {
    /// The command exited on its own; `exitCode` is its status.
    Exited,
    /// The command was ended by a signal it did not get from us; `exitCode` is `null`.
    Signaled,
    /// The time limit passed; everything it started was stopped.
    TimedOut,
    /// The call was cancelled; everything it started was stopped.
    Cancelled,
    /// The command hit a resource limit (processes, memory, temp dir; LIM-2); everything it
    /// started was stopped. `hint` names the limit and what to do.
    LimitExceeded,
    /// Nothing ran: declined, no way to ask, wrong password three times, or no way to check a
    /// password on this machine. `message` says how to run it instead.
    NotExecuted,
}

/// One path `rm` moved to the trash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Trashed {
    /// The path as it was.
    pub path: String,
    /// Where the trash keeps it (restore by moving it back), when the platform says.
    pub restore_from: Option<String>,
}

/// One access the sandbox refused that the output names (from `exec::denials`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Denial {
    /// The path, absolute.
    pub path: String,
    /// `read`, `write`, `create` or `execute`.
    pub access: &'static str,
    /// Why the sandbox refuses it.
    pub reason: String,
    /// What to do instead, in `run_command`'s terms (`write_paths`, `network`, …).
    pub remedy: String,
}

/// The result of one `run_command` call (JSON in camelCase). A non-zero exit is a result, not
/// an error; so is a call that was not executed (`executed: false`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunCommandOutput {
    /// stdout and stderr merged in order, bounded ([`OUTPUT_CAP`]) and masked (RC-14).
    pub output: String,
    /// The exit code when `status` is `exited`.
    pub exit_code: Option<i32>,
    /// Why the call ended.
    pub status: Status,
    /// Output was omitted between the head and the tail.
    pub truncated: bool,
    /// Processes other than the command still alive at its end, stopped.
    pub descendants_stopped: usize,
    /// Accesses the sandbox refused that the output names.
    pub denials: Vec<Denial>,
    /// The next step when the command failed on a permission (RC-13).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The command as shown to the user (the gate's label, or the argv).
    pub label: String,
    /// Whether anything ran.
    pub executed: bool,
    /// For `rm`: what went to the trash and where it can be restored from.
    pub trashed: Vec<Trashed>,
    /// What the sandbox enforced, in words (`none` for `sudo` and `sandbox: false`).
    pub sandbox: String,
    /// Git metadata the command left that would make git run a program (a hook, a
    /// `commondir`, program-running config), moved aside after the run (the git guard).
    pub quarantined: Vec<crate::gitguard::Quarantined>,
    /// What the command changed in git directories (TRUST-1): it worked on a private copy of
    /// each repository's git directory; afterwards refs, index, objects and allowed config
    /// keys were applied, and anything that makes git run a program was refused and is listed.
    /// Absent when the command changed nothing there.
    #[serde(skip_serializing_if = "gitstage::Report::is_empty")]
    pub git: gitstage::Report,
    /// Files of the working directory or a `write_paths` entry the command made or changed
    /// that someone may run later: an execute bit, or a build or package file (`Makefile`,
    /// `build.rs`, `package.json`, `*.sh`, …), for a host to show before they are run outside
    /// the sandbox. Absent when there is none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub executable_changes: Vec<String>,
    /// What the command wrote to the toolchains' caches (TRUST-3): a private view of each, kept
    /// for the session's next call; the user's caches never change. Absent when it wrote
    /// nothing there.
    #[serde(skip_serializing_if = "crate::CacheReport::is_empty")]
    pub caches: crate::CacheReport,
    /// Why nothing ran and how to run it instead, or what an option meant here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl RunCommandOutput {
    /// Executed, exited by itself with status 0.
    pub fn is_success(&self) -> bool {
        self.executed && self.status == Status::Exited && self.exit_code == Some(0)
    }

    /// A call that ran nothing, with the message saying why and what to do instead.
    pub(crate) fn not_executed(label: String, message: String) -> Self {
        RunCommandOutput {
            output: String::new(),
            exit_code: None,
            status: Status::NotExecuted,
            truncated: false,
            descendants_stopped: 0,
            denials: Vec::new(),
            hint: None,
            label,
            caches: crate::CacheReport::default(),
            executed: false,
            trashed: Vec::new(),
            quarantined: Vec::new(),
            git: gitstage::Report::default(),
            executable_changes: Vec::new(),
            sandbox: "none".into(),
            message: Some(message),
        }
    }
}

/// The JSON Schema of the arguments (`argv`, `network`, `write_paths`, `sandbox`; the exact
/// snake_case names of seed 001, unknown fields refused), for tool listings such as MCP's
/// `inputSchema`.
pub fn input_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "RunCommandArgs",
        "type": "object",
        "properties": {
            "argv": {
                "description": "The program and its arguments, one element each; never a shell \
                                line. For pipes or redirections send [\"sh\", \"-c\", \"…\"].",
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1
            },
            "network": {
                "description": "Allow network access for this call (default false).",
                "type": "boolean",
                "default": false
            },
            "write_paths": {
                "description": "Extra writable paths: inside $HOME after the user's \
                                confirmation, outside it after the system password.",
                "type": "array",
                "items": {"type": "string"},
                "default": []
            },
            "sandbox": {
                "description": "false runs outside the sandbox after the system password \
                                (default true).",
                "type": "boolean",
                "default": true
            }
        },
        "required": ["argv"],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_uses_the_contract_names() {
        let out = RunCommandOutput::not_executed("git push".into(), "m".into());
        let v = serde_json::to_value(&out).unwrap();
        for key in [
            "output",
            "exitCode",
            "status",
            "truncated",
            "descendantsStopped",
            "denials",
            "label",
            "executed",
            "trashed",
            "quarantined",
            "sandbox",
            "message",
        ] {
            assert!(v.get(key).is_some(), "{key} missing in {v}");
        }
        assert!(v.get("hint").is_none());
        assert_eq!(v["status"], "notExecuted");
        assert!(!out.is_success());
    }

    #[test]
    fn schema_names_the_seed_arguments() {
        let s = input_schema();
        assert_eq!(s["required"], json!(["argv"]));
        assert_eq!(s["additionalProperties"], json!(false));
        let mut keys: Vec<_> = s["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        keys.sort();
        assert_eq!(keys, ["argv", "network", "sandbox", "write_paths"]);
    }

    #[test]
    fn trashed_item_is_camel_case() {
        let t = Trashed {
            path: "/w/a".into(),
            restore_from: Some("/h/.local/share/Trash/files/a".into()),
        };
        assert_eq!(
            serde_json::to_value(&t).unwrap(),
            json!({"path": "/w/a", "restoreFrom": "/h/.local/share/Trash/files/a"})
        );
    }
}
