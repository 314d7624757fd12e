//! The answer of a one-call turn (`agent-exec call`, one MCP `tools/call`): the tool's result
//! or error with the `mounted` workspace's write-back folded in, and the one rule that decides
//! `ok`.
//!
//! # When `ok` is true
//!
//! For a `mounted` workspace the call's work reaches the user's folder only through the
//! write-back that ends the turn (RUN-11). An agent that checks `ok` must be able to believe
//! its edits landed, so `ok: true` needs both: the tool succeeded (RUN-12) **and** the
//! write-back did all it had to — it ran, failed at nothing, and left no conflict. Otherwise
//! the line is `ok: false` with `AGENT_EXEC_WRITE_BACK_INCOMPLETE`, a message saying what did
//! not land and where the agent's version is, and still every field of the tool's result
//! (`exitCode`, `stdout`, …) and the `mirror` report, so nothing the run produced is hidden.
//! A write-back with nothing to write is complete. A failed tool call keeps its own error
//! code (the mirror is kept for diagnosis and not written back, as RUN-11 says).
//!
//! This refines RUN-12's "success returns …" for the one-call front ends: the program's
//! success alone no longer makes the line `ok`. A host that embeds [`Turn`](crate::Turn)
//! itself reads the same facts from [`TurnReport`], or builds a [`CallAnswer`] from its last
//! call's result and the report.

use serde_json::{Map, Value, json};
use toolscope::{ErrorCode, ToolError};

use crate::host::{MirrorReport, TurnReport};

/// How many conflicting paths the message names before it says "and N more".
const NAMED_CONFLICTS: usize = 3;

/// Why a successful call's write-back did not fully happen, as the message the agent reads;
/// `None` when everything that changed reached the folder.
fn write_back_shortfall(mirror: &MirrorReport) -> Option<String> {
    let kept = if mirror.kept {
        format!(
            "; the agent's version is kept in the mirror at {}",
            mirror.path.display()
        )
    } else {
        String::new()
    };
    if let Some(error) = &mirror.error {
        let applied = if mirror.applied.is_empty() {
            String::new()
        } else {
            format!(
                " ({} path(s) were written before it stopped)",
                mirror.applied.len()
            )
        };
        return Some(format!(
            "the run succeeded, but its changes were not all written back to the folder: \
             {error}{applied}{kept}; fix the cause and run again, or copy what is needed from \
             the mirror"
        ));
    }
    if !mirror.write_back_ran {
        return Some(format!(
            "the run succeeded, but its changes were not written back to the folder{kept}; \
             run again"
        ));
    }
    if mirror.conflicts.is_empty() {
        return None;
    }
    let mut named: Vec<String> = mirror
        .conflicts
        .iter()
        .take(NAMED_CONFLICTS)
        .map(|c| format!("{} ({})", c.path, c.reason))
        .collect();
    if mirror.conflicts.len() > NAMED_CONFLICTS {
        named.push(format!(
            "and {} more",
            mirror.conflicts.len() - NAMED_CONFLICTS
        ));
    }
    Some(format!(
        "the run succeeded, but {} of its {} change(s) were not written back to the folder: {}; \
         the folder's entries there are left as they are{kept}; read the folder again and redo \
         those edits if they are still wanted (see \"mirror\".\"conflicts\")",
        mirror.conflicts.len(),
        mirror.conflicts.len() + mirror.applied.len(),
        named.join(", ")
    ))
}

/// The answer of a one-call turn ([`Session::one_call`](crate::Session::one_call)), or of the
/// last call of any turn: what the call returned and what the turn's end did with the
/// workspace. Whether it is a success is decided here, once, from the typed parts
/// ([`CallAnswer::is_ok`]); [`CallAnswer::to_line`] is the JSON a front end prints or sends.
#[derive(Clone, Debug)]
pub struct CallAnswer {
    verdict: Verdict,
    report: TurnReport,
    /// The tool's typed word on the program it ran ([`ProgramVerdict`](crate::ProgramVerdict)).
    program_success: bool,
}

/// What the call came to, with the write-back folded in (module docs).
#[derive(Clone, Debug)]
enum Verdict {
    /// The tool succeeded and everything it changed reached the folder.
    Done(Value),
    /// The tool succeeded but its write-back did not fully happen: its result, and why.
    WriteBackIncomplete { result: Value, message: String },
    /// The tool failed (or was refused, or cancelled).
    Failed(ToolError),
}

impl CallAnswer {
    /// The answer of a call that returned `result` in a turn that ended with `report`.
    pub fn new(result: Result<Value, ToolError>, report: TurnReport) -> CallAnswer {
        let verdict = match result {
            Err(e) => Verdict::Failed(e),
            Ok(result) => match report.mirror.as_ref().and_then(write_back_shortfall) {
                None => Verdict::Done(result),
                Some(message) => Verdict::WriteBackIncomplete { result, message },
            },
        };
        CallAnswer {
            verdict,
            report,
            program_success: true,
        }
    }

    /// The same answer, with whether the program the tool ran succeeded (`run_command`:
    /// `RunCommandOutput::is_success`; a command that was not executed or exited non-zero is
    /// a result, `ok: true`, but not a success).
    #[must_use]
    pub fn with_program_success(mut self, success: bool) -> CallAnswer {
        self.program_success = success;
        self
    }

    /// [`is_ok`](CallAnswer::is_ok), and the program the tool ran (if it records one)
    /// succeeded: `agent-exec call`'s exit code 0.
    pub fn is_success(&self) -> bool {
        self.is_ok() && self.program_success
    }

    /// True when the tool succeeded and, for `mounted`, its write-back did all it had to: the
    /// line's `"ok"`, and `agent-exec call`'s exit code 0.
    pub fn is_ok(&self) -> bool {
        matches!(self.verdict, Verdict::Done(_))
    }

    /// What the turn's end did with its workspace.
    pub fn report(&self) -> &TurnReport {
        &self.report
    }

    /// The line: `{"ok": true, …result, "mirror": …}` (a result's own `ok` and `code` never
    /// pass; its `message` does when the line has none), or the error object, or — when the tool
    /// succeeded but its write-back did not fully happen — `ok: false` with
    /// `AGENT_EXEC_WRITE_BACK_INCOMPLETE` and the result's fields kept (module docs).
    pub fn to_line(&self) -> Value {
        let fields = |value: &Value| match value {
            Value::Object(map) => map.clone(),
            other => Map::from_iter([("result".to_owned(), other.clone())]),
        };
        let (head, result) = match &self.verdict {
            Verdict::Done(result) => (json!({"ok": true}), Some(result)),
            Verdict::WriteBackIncomplete { result, message } => (
                json!({
                    "ok": false,
                    "code": ErrorCode::ExecWriteBackIncomplete.as_str(),
                    "message": message,
                }),
                Some(result),
            ),
            Verdict::Failed(e) => (
                serde_json::to_value(e).unwrap_or_else(
                    |_| json!({"ok": false, "code": e.code(), "message": e.message()}),
                ),
                None,
            ),
        };
        let mut line = match head {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        // `ok` and `code` are the rule's alone; a result's `message` (run_command's "why
        // nothing ran") is kept unless the head has its own.
        for (k, v) in result.map(fields).unwrap_or_default() {
            if !matches!(k.as_str(), "ok" | "code") && !line.contains_key(&k) {
                line.insert(k, v);
            }
        }
        if let Some(mirror) = &self.report.mirror {
            line.insert(
                "mirror".into(),
                serde_json::to_value(mirror).unwrap_or_default(),
            );
        }
        if !self.report.recovered.is_empty() {
            line.insert("recovered".into(), json!(self.report.recovered));
        }
        Value::Object(line)
    }
}
