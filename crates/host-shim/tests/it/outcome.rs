//! The line of a one-call turn (issue 15, item 5): `ok` is true only when the tool succeeded
//! and everything it changed reached the folder; a write-back that did not fully happen is
//! `ok: false` with `AGENT_EXEC_WRITE_BACK_INCOMPLETE`, the result's fields and the `mirror`
//! report kept (RUN-11, RUN-12 as refined in `host_shim::CallAnswer`'s module).

use std::os::unix::fs::FileTypeExt;
use std::path::PathBuf;

use host_shim::{
    CallAnswer, CallOptions, ConflictReport, KeepMirror, MirrorReport, TurnEnd, TurnReport,
    WorkspaceKind,
};
use serde_json::{Value, json};
use toolscope::{ErrorCode, ToolError};

use crate::util::{Fixture, PLUGIN};

/// The answer's line; its typed verdict and the line's `"ok"` must agree.
fn turn_line(result: Result<Value, ToolError>, report: &TurnReport) -> Value {
    let answer = CallAnswer::new(result, report.clone());
    let line = answer.to_line();
    assert_eq!(answer.is_ok(), line_is_ok(&line), "{line}");
    line
}

fn line_is_ok(line: &Value) -> bool {
    line["ok"] == json!(true)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A mounted turn that writes `a.txt` and `b.txt`; `user` edits `a.txt` in the folder before
/// the turn ends when set. Returns the one-call line.
fn mounted_turn(user_edits: bool) -> (Fixture, Value) {
    let f = Fixture::new();
    f.write("a.txt", "one\n");
    f.write("b.txt", "b\n");
    let host = f.host();
    let s = host
        .session(PLUGIN.parse().unwrap(), f.config("mounted", &["write"]))
        .unwrap();
    let line = rt().block_on(async {
        let turn = s.begin_turn().unwrap();
        let opts = CallOptions::default();
        let result = turn
            .call(
                "1",
                "write",
                json!({"path": "a.txt", "content": "agent\n"}),
                &opts,
            )
            .await;
        turn.call(
            "2",
            "write",
            json!({"path": "b.txt", "content": "agent b\n"}),
            &opts,
        )
        .await
        .unwrap();
        if user_edits {
            f.write("a.txt", "user\n");
        }
        let report = turn.finish(TurnEnd::of(&result), KeepMirror::WhenNeeded);
        turn_line(result, &report)
    });
    (f, line)
}

#[test]
fn a_conflicting_write_back_makes_the_line_not_ok_and_keeps_the_result() {
    let (f, line) = mounted_turn(true);
    assert!(!line_is_ok(&line), "{line}");
    assert_eq!(line["code"], "AGENT_EXEC_WRITE_BACK_INCOMPLETE");
    let message = line["message"].as_str().unwrap();
    assert!(message.contains("1 of its 2 change(s)"), "{message}");
    assert!(message.contains("a.txt"), "{message}");
    assert!(message.contains("kept in the mirror at"), "{message}");
    assert_eq!(line["mirror"]["conflicts"][0]["path"], "a.txt");
    assert_eq!(line["mirror"]["applied"], json!(["b.txt"]));
    // The tool's own result is still there (the write tool answers with the path it wrote).
    assert!(line.as_object().unwrap().len() > 4, "{line}");
    assert_eq!(f.read("a.txt"), "user\n");
}

#[test]
fn a_complete_write_back_is_ok() {
    let (f, line) = mounted_turn(false);
    assert!(line_is_ok(&line), "{line}");
    assert!(line.get("code").is_none(), "{line}");
    assert_eq!(line["mirror"]["writtenBack"], true);
    assert_eq!(f.read("a.txt"), "agent\n");
}

fn report(mirror: MirrorReport) -> TurnReport {
    TurnReport {
        workspace: WorkspaceKind::Mounted,
        mirror: Some(mirror),
        recovered: Vec::new(),
    }
}

fn mirror() -> MirrorReport {
    MirrorReport {
        path: PathBuf::from("/state/mirrors/m1"),
        kept: false,
        written_back: false,
        write_back_ran: true,
        applied: vec![],
        conflicts: vec![],
        error: None,
    }
}

#[test]
fn a_write_back_that_could_not_run_is_not_ok_and_says_why() {
    let mut m = mirror();
    m.write_back_ran = false;
    m.kept = true;
    m.error = Some("write-back failed: the folder was replaced".into());
    let line = turn_line(Ok(json!({"exitCode": 0, "stdout": "3\n"})), &report(m));
    assert!(!line_is_ok(&line));
    assert_eq!(line["code"], ErrorCode::ExecWriteBackIncomplete.as_str());
    let message = line["message"].as_str().unwrap();
    assert!(message.contains("the folder was replaced"), "{message}");
    assert!(message.contains("/state/mirrors/m1"), "{message}");
    assert_eq!(line["exitCode"], 0);
    assert_eq!(line["stdout"], "3\n");
}

#[test]
fn a_result_cannot_smuggle_ok_code_or_message_past_the_rule() {
    let mut m = mirror();
    m.conflicts = vec![ConflictReport {
        path: "x".into(),
        reason: "changed in the folder during the turn".into(),
    }];
    m.kept = true;
    let line = turn_line(
        Ok(json!({"ok": true, "code": "NONE", "message": "fine", "exitCode": 0})),
        &report(m),
    );
    assert!(!line_is_ok(&line));
    assert_eq!(line["code"], "AGENT_EXEC_WRITE_BACK_INCOMPLETE");
    assert_ne!(line["message"], "fine");
    // A successful line keeps a result's message (run_command's "why nothing ran"), never its
    // code.
    let line = turn_line(
        Ok(json!({"ok": false, "code": "NONE", "message": "not executed: …", "executed": false})),
        &TurnReport {
            workspace: WorkspaceKind::Direct,
            mirror: None,
            recovered: Vec::new(),
        },
    );
    assert!(line_is_ok(&line), "{line}");
    assert_eq!(
        (&line["code"], &line["message"], &line["executed"]),
        (&Value::Null, &json!("not executed: …"), &json!(false)),
        "{line}"
    );
}

#[test]
fn a_write_back_with_nothing_to_write_is_ok_and_errors_keep_their_code() {
    let line = turn_line(Ok(json!({"exitCode": 0})), &report(mirror()));
    assert!(line_is_ok(&line), "{line}");
    let err = ToolError::new(ErrorCode::ExecFailed, "exit 2; read stderr");
    let mut m = mirror();
    m.write_back_ran = false;
    m.kept = true;
    let line = turn_line(Err(err), &report(m));
    assert_eq!(line["code"], "AGENT_EXEC_FAILED");
    assert_eq!(line["mirror"]["kept"], true);
}

/// Issue 15, item 5: a name the mirror skipped is "not mirrored: a FIFO", not "does not exist",
/// both when `run` is asked to read it and when the agent's write to that name is not written
/// back.
#[test]
fn a_fifo_the_mirror_skipped_is_named_as_such_when_read_and_when_written() {
    if !crate::util::sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("a.txt", "one\n");
    std::process::Command::new("mkfifo")
        .arg(f.folder.join("pipe"))
        .status()
        .unwrap();
    let host = f.host();
    let s = host
        .session(
            PLUGIN.parse().unwrap(),
            f.config("mounted", &["run", "write"]),
        )
        .unwrap();
    let (read, line) = rt().block_on(async {
        let turn = s.begin_turn().unwrap();
        let opts = CallOptions::default();
        let read = turn
            .call(
                "1",
                "run",
                json!({"program": "wc", "args": ["-l", "pipe"]}),
                &opts,
            )
            .await
            .unwrap_err();
        let result = turn
            .call(
                "2",
                "write",
                json!({"path": "pipe", "content": "agent\n"}),
                &opts,
            )
            .await;
        let report = turn.finish(TurnEnd::of(&result), KeepMirror::WhenNeeded);
        (read, turn_line(result, &report))
    });
    assert_eq!(read.code(), ErrorCode::ExecPathInvalid);
    assert!(read.message().contains("is a FIFO"), "{}", read.message());
    assert!(
        !read.message().contains("does not exist"),
        "{}",
        read.message()
    );
    assert_eq!(read.details()["notMirrored"], "a FIFO");
    assert!(!line_is_ok(&line), "{line}");
    let reason = line["mirror"]["conflicts"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("a FIFO at pipe"), "{reason}");
    assert!(
        std::fs::symlink_metadata(f.folder.join("pipe"))
            .unwrap()
            .file_type()
            .is_fifo(),
        "the FIFO is left as it is"
    );
}

/// `write a.txt <content>` as a one-call turn of `s`, cancelled when `cancelled` completes.
fn write_in_one_call(
    s: &host_shim::Session,
    id: &str,
    content: &str,
    cancelled: impl std::future::Future<Output = ()>,
) -> CallAnswer {
    let args = json!({"path": "a.txt", "content": content});
    let options = CallOptions::default();
    let call = s.one_call(
        id,
        host_shim::ToolName::Write,
        args,
        &options,
        KeepMirror::WhenNeeded,
        cancelled,
    );
    rt().block_on(call)
}

#[test]
fn one_call_is_a_whole_turn_whose_typed_answer_decides_ok() {
    let f = Fixture::new();
    f.write("a.txt", "one\n");
    let s = f.session("mounted", &["write"]);
    let answer = write_in_one_call(&s, "1", "agent\n", std::future::pending());
    assert!(answer.is_ok(), "{}", answer.to_line());
    assert_eq!(answer.to_line()["ok"], true);
    assert!(answer.report().mirror.as_ref().unwrap().written_back);
    assert_eq!(
        f.read("a.txt"),
        "agent\n",
        "written back when the turn ended"
    );
    // Cancelled before it ran: the turn ends as failed, nothing is written back.
    let answer = write_in_one_call(&s, "2", "never\n", std::future::ready(()));
    assert!(!answer.is_ok());
    assert_eq!(answer.to_line()["code"], "AGENT_EXEC_CANCELLED");
    assert_eq!(f.read("a.txt"), "agent\n");
}
