//! The answer of a one-call turn (`agent-exec call`, one MCP `tools/call`): the tool's result
//! or error with the `mounted` workspace's write-back folded in, and the one rule that decides
//! `ok` (issue 15, item 5).
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
//! itself reads the same facts from [`TurnReport`].

use serde_json::{Map, Value, json};
use toolscope::{ErrorCode, ToolError};

use crate::host::{MirrorReport, TurnReport};

/// How many conflicting paths the message names before it says "and N more".
const NAMED_CONFLICTS: usize = 3;

/// Why a successful call's write-back did not fully happen, as the message the agent reads;
/// `None` when everything that changed reached the folder.
pub fn write_back_shortfall(mirror: &MirrorReport) -> Option<String> {
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
    if !mirror.written_back {
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

/// The line of a one-call turn: `{"ok": true, …result, "mirror": …}`, or the error object, or —
/// when the tool succeeded but its write-back did not fully happen — `ok: false` with
/// `AGENT_EXEC_WRITE_BACK_INCOMPLETE` and the result's fields kept (module docs).
pub fn turn_line(result: Result<Value, ToolError>, report: &TurnReport) -> Value {
    let mirror = report.mirror.as_ref();
    let mut line = match result {
        Ok(value) => {
            let fields = match value {
                Value::Object(map) => map,
                other => Map::from_iter([("result".to_owned(), other)]),
            };
            let mut out = Map::new();
            match mirror.and_then(write_back_shortfall) {
                None => {
                    out.insert("ok".into(), Value::Bool(true));
                }
                Some(message) => {
                    out.insert("ok".into(), Value::Bool(false));
                    out.insert(
                        "code".into(),
                        json!(ErrorCode::ExecWriteBackIncomplete.as_str()),
                    );
                    out.insert("message".into(), Value::String(message));
                }
            }
            for (k, v) in fields {
                if !matches!(k.as_str(), "ok" | "code" | "message") {
                    out.insert(k, v);
                }
            }
            Value::Object(out)
        }
        Err(e) => serde_json::to_value(&e)
            .unwrap_or_else(|_| json!({"ok": false, "code": e.code(), "message": e.message()})),
    };
    if let (Some(mirror), Value::Object(map)) = (mirror, &mut line) {
        map.insert(
            "mirror".into(),
            serde_json::to_value(mirror).unwrap_or_default(),
        );
    }
    line
}

/// Whether `line` (from [`turn_line`]) reports success.
pub fn line_is_ok(line: &Value) -> bool {
    line["ok"] == Value::Bool(true)
}
