//! `background_command` through `agent-exec mcp` (BG-1…BG-9):
//! a real MCP client (the Python `mcp` package, `mcp_background.py`) starts a watcher, reads its
//! log with `read`, hears its keyword report as a `notifications/message`, cancels it, sees a
//! group of two legs complete once, and leaves a sleeper running that the server stops; raw
//! JSON-RPC pins the end of the connection (stdin closed, stdout gone); the CLI's one-shot
//! `call` is refused (BG-7). Every test checks that no process survived, no log was left and the
//! session's directory under the state directory is gone.
//!
//! The server runs with a temporary `HOME` holding the workspace (run_command's sandbox refuses
//! a workspace that is `$HOME` or contains it) and `--mode auto`, so `sh -c` runs without a
//! confirmation nobody here could give.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp::{
    Raw, has_process_with_arg, mcp_python, result_of, wait_for_no_process, wait_for_process,
};
use crate::util::{Fixture, agent_exec, assert_no_survivors, s, sandbox_available};

const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/mcp_background.py");

/// `--state-dir <state> mcp --workspace <folder> --mode auto`.
fn server_args(f: &Fixture) -> Vec<&str> {
    vec![
        "--state-dir",
        s(&f.state),
        "mcp",
        "--workspace",
        s(&f.folder),
        "--mode",
        "auto",
    ]
}

/// The fixture's base directory: the server's `HOME`, holding the workspace and the state.
fn home(f: &Fixture) -> &Path {
    f.folder.parent().unwrap()
}

/// What is left under `<state>/sessions` (each session's directory, with its logs).
fn sessions_left(f: &Fixture) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(f.state.join("sessions"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// Waits (within [`Raw::PATIENCE`]) until nothing is left under `<state>/sessions`.
fn assert_no_sessions_left(f: &Fixture) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !sessions_left(f).is_empty() {
        assert!(
            Instant::now() < deadline,
            "session directories left: {:?}",
            sessions_left(f)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `notifications/message` params whose `data` is `data`.
fn notice_of<'a>(notices: &'a [Value], data: &Value) -> &'a Value {
    notices
        .iter()
        .find(|n| &n["data"] == data)
        .unwrap_or_else(|| panic!("no notice carries {data}"))
}

#[test]
fn python_mcp_client_hears_a_watchers_report_cancels_it_and_a_group_completes_once() {
    // BG-1 (answered at once), BG-4 (the report while it runs on), BG-6 (the log, readable by
    // `read` while it runs, gone after), BG-9 (one group completion), BG-7 (delivered by MCP
    // notifications), and the tasks end with the connection.
    if !sandbox_available() {
        return;
    }
    let Some(python) = mcp_python() else {
        return;
    };
    let f = Fixture::new();
    let (watch, leave) = (testkit::marker(), testkit::marker());
    let status_file = f.tmp.path().join("server-status");
    let errlog = f.tmp.path().join("server-stderr");
    // The server runs under a shell that records how it exited: a server the client had to
    // kill (it waits 2 s after closing stdin) leaves no status.
    let mut args = vec![
        "-c".to_owned(),
        "\"$0\" \"$@\"; echo $? > \"$AGENT_EXEC_TEST_STATUS\"".to_owned(),
        env!("CARGO_BIN_EXE_agent-exec").to_owned(),
    ];
    args.extend(server_args(&f).into_iter().map(str::to_owned));
    let plan = json!({
        "command": "/bin/sh",
        "args": args,
        "env": {
            "HOME": home(&f),
            "PATH": std::env::var("PATH").unwrap_or_default(),
            "AGENT_EXEC_TEST_STATUS": status_file,
        },
        "errlog": errlog,
        "watch": watch,
        "leave": leave,
        "patience": 60,
    });
    let out = Command::new(&python)
        .arg(CLIENT)
        .arg(plan.to_string())
        .current_dir(&f.folder)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let server_stderr = std::fs::read_to_string(&errlog).unwrap_or_default();
    assert!(
        out.status.success(),
        "the MCP client failed: {}\nstdout: {stdout}\nstderr: {stderr}\nserver: {server_stderr}",
        out.status
    );
    let out: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\nstderr: {stderr}"));
    let notices = out["notices"].as_array().unwrap();

    // The handshake: logging declared, the three tools served.
    assert_eq!(out["capabilities"]["logging"], json!({}), "{out}");
    for tool in [
        "background_command",
        "background_status",
        "background_cancel",
    ] {
        assert!(
            out["tools"].as_array().unwrap().contains(&json!(tool)),
            "{out}"
        );
    }
    for n in notices {
        assert_eq!(n["logger"], "agent-exec/background", "{n}");
    }

    // The watcher: answered while it runs, with its log path in the session's directory.
    let started = &out["watch_started"];
    assert_eq!(
        (&out["watch_started_error"], &started["executed"]),
        (&json!(false), &json!(true)),
        "{started}"
    );
    let task = started["taskId"].as_str().unwrap();
    let log = started["logPath"].as_str().unwrap();
    assert!(
        Path::new(log).starts_with(f.state.join("sessions")) && log.ends_with(".log"),
        "{log}"
    );
    assert_eq!(out["watch_ended_at_start"], false, "{out}");
    assert_eq!(out["log_existed"], true, "{out}");
    assert!(
        out["log_read"]["content"]
            .as_str()
            .unwrap()
            .contains("serving --watch"),
        "{out}"
    );
    // Its start, as a notice at level info, the event's JSON as data.
    let start = notices
        .iter()
        .find(|n| n["data"]["event"] == "started" && n["data"]["task"]["taskId"] == task)
        .unwrap_or_else(|| panic!("no started event: {notices:?}"));
    assert_eq!(start["level"], "info", "{start}");
    assert_eq!(start["data"]["task"]["logPath"], log, "{start}");
    assert_eq!(
        start["data"]["task"]["objective"], "watch the dev server",
        "{start}"
    );
    // The keyword report while it ran on: a warning.
    let report = &out["report"];
    assert_eq!(
        (&report["taskId"], &report["delivery"]),
        (&json!(task), &json!("held")),
        "{report}"
    );
    assert_eq!(report["report"]["keyword"], "error", "{report}");
    assert_eq!(report["report"]["check"], "none", "{report}");
    assert!(
        report["report"]["line"]
            .as_str()
            .unwrap()
            .contains("ERROR: broken"),
        "{report}"
    );
    assert_eq!(notice_of(notices, report)["level"], "warning");
    // Status while it runs.
    assert_eq!(out["status_error"], false, "{out}");
    assert_eq!(out["status"]["tasks"][0]["taskId"], task, "{out}");
    assert_eq!(out["status"]["tasks"][0]["state"], "running", "{out}");
    assert!(
        out["status"]["latestOutput"]
            .as_str()
            .unwrap()
            .contains("ERROR: broken"),
        "{out}"
    );
    assert_eq!(out["watch_alive_before_cancel"], true, "{out}");
    assert_eq!(out["log_exists_before_cancel"], true, "{out}");
    // Cancelled: its end is a notice, nothing of it is left, its log neither.
    assert_eq!(out["cancel_error"], false, "{out}");
    let finished = &out["finished"];
    assert_eq!(finished["outcome"]["status"], "cancelled", "{finished}");
    assert_eq!(notice_of(notices, finished)["level"], "notice");
    assert_eq!(out["watch_alive_after_finished"], false, "{out}");
    assert_eq!(out["log_exists_after_finished"], false, "{out}");
    assert_eq!(out["read_after_finished_error"], true, "{out}");

    // The group: both legs, one completion, with each leg's objective and next.
    for leg in out["legs"].as_array().unwrap() {
        assert_eq!(leg["executed"], true, "{leg}");
    }
    let completions: Vec<&Value> = notices
        .iter()
        .filter(|n| {
            n["data"]["event"] == "groupCompleted" && n["data"]["origin"]["task"] == "group:g1"
        })
        .collect();
    assert_eq!(completions.len(), 1, "{completions:?}");
    assert_eq!(completions[0]["level"], "info");
    let legs = completions[0]["data"]["legs"].as_array().unwrap();
    assert_eq!(legs.len(), 2, "{legs:?}");
    for (leg, (name, started)) in legs
        .iter()
        .zip(["a", "b"].iter().zip(out["legs"].as_array().unwrap()))
    {
        assert_eq!(leg["taskId"], started["taskId"], "{leg}");
        assert_eq!(leg["objective"], format!("leg {name}"), "{leg}");
        assert_eq!(leg["next"], format!("merge {name}"), "{leg}");
        assert_eq!(
            (&leg["outcome"]["status"], &leg["outcome"]["exitCode"]),
            (&json!("exited"), &json!(0)),
            "{leg}"
        );
    }
    assert!(
        legs[1]["outcome"]["output"]
            .as_str()
            .unwrap()
            .contains("FAIL b"),
        "{legs:?}"
    );

    // logging/setLevel warning: the sleeper's start (info) was not sent.
    let leave_task = &out["leave_started"]["taskId"];
    assert_eq!(out["leave_started"]["executed"], true, "{out}");
    assert!(
        !notices
            .iter()
            .any(|n| n["data"]["task"]["taskId"] == *leave_task
                || n["data"]["taskId"] == *leave_task),
        "{notices:?}"
    );

    // The client left with the sleeper running: the server stopped it, removed the session's
    // directory and exited 0 by itself, saying nothing but what it serves.
    wait_for_no_process(&leave);
    assert!(!has_process_with_arg(&watch));
    assert!(
        !Path::new(out["leave_log"].as_str().unwrap()).exists(),
        "{out}"
    );
    assert_no_sessions_left(&f);
    let status = std::fs::read_to_string(&status_file).unwrap_or_default();
    assert_eq!(status.trim(), "0", "server stderr: {server_stderr}");
    assert!(
        server_stderr
            .lines()
            .all(|l| l.starts_with("agent-exec mcp: serving ")),
        "{server_stderr}"
    );
    assert_no_survivors(home(&f));
}

/// Starts `sleep <marker>` with `background_command` over `raw`; its start result.
/// A server on `f` running one background sleeper with `marker`, and the sleeper's log path
/// (which exists).
fn server_with_sleeper(f: &Fixture, marker: &str) -> (Raw, String) {
    let mut raw = Raw::start_with_env(&server_args(f), &f.folder, &[("HOME", home(f))]);
    let started = start_sleeper(&mut raw, 1, marker);
    wait_for_process(marker);
    let log = started["logPath"].as_str().unwrap().to_owned();
    assert!(Path::new(&log).exists(), "{log}");
    (raw, log)
}

fn start_sleeper(raw: &mut Raw, id: u64, marker: &str) -> Value {
    raw.send(
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "background_command", "arguments": {"argv": ["sleep", marker]}}}),
    );
    // Notices may come first.
    loop {
        let m = raw.recv();
        if m["id"] == id {
            let started = result_of(&m["result"]);
            assert_eq!(started["executed"], true, "{started}");
            return started;
        }
        assert_eq!(m["method"], "notifications/message", "{m}");
    }
}

#[test]
fn closing_stdin_stops_the_background_tasks_and_the_server_exits_cleanly() {
    // Tasks live as long as the connection (invariant 4): end of input, every reply
    // written, then every task stopped and its log and the session's directory removed.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let marker = testkit::marker();
    let (raw, log) = server_with_sleeper(&f, &marker);
    let (status, stderr) = raw.finish_with_stderr();
    assert!(status.success(), "{status}: {stderr}");
    assert!(!has_process_with_arg(&marker), "sleep survived the server");
    assert!(!Path::new(&log).exists(), "{log}");
    assert_no_sessions_left(&f);
    assert_no_survivors(home(&f));
}

#[test]
fn a_client_that_stops_reading_ends_the_background_tasks_too() {
    // The hang-up (our stdout gone, noticed while nothing is written): nothing is read or
    // started any more, the tasks are stopped, and the server exits.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let marker = testkit::marker();
    let mut raw = Raw::start_with_env(&server_args(&f), &f.folder, &[("HOME", home(&f))]);
    start_sleeper(&mut raw, 1, &marker);
    wait_for_process(&marker);
    raw.stop_reading();
    let status = raw.wait();
    assert!(status.success(), "{status}");
    assert!(!has_process_with_arg(&marker), "sleep survived the server");
    assert_no_sessions_left(&f);
    assert_no_survivors(home(&f));
}

#[test]
fn background_events_are_logging_notifications_carrying_the_event_json() {
    // The wire shape without an SDK: `notifications/message`, no id, logger
    // agent-exec/background, data the event with its `event` field; a clean exit is `info`.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let mut raw = Raw::start_with_env(&server_args(&f), &f.folder, &[("HOME", home(&f))]);
    raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "background_command", "arguments": {"argv": ["true"]}}}),
    );
    let mut reply = None;
    let mut notices = Vec::new();
    while !notices
        .iter()
        .any(|n: &Value| n["params"]["data"]["event"] == "groupCompleted")
    {
        let m = raw.recv();
        if m.get("id").is_some() {
            reply = Some(m);
        } else {
            notices.push(m);
        }
    }
    let started = result_of(&reply.expect("the start's reply")["result"]);
    let task = started["taskId"].clone();
    let kinds: Vec<(&Value, &Value)> = notices
        .iter()
        .map(|n| {
            assert_eq!(n["method"], "notifications/message", "{n}");
            assert_eq!(n["params"]["logger"], "agent-exec/background", "{n}");
            (&n["params"]["data"]["event"], &n["params"]["level"])
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (&json!("started"), &json!("info")),
            (&json!("finished"), &json!("info")),
            (&json!("groupCompleted"), &json!("info")),
        ],
        "{notices:?}"
    );
    assert_eq!(notices[1]["params"]["data"]["taskId"], task);
    assert_eq!(
        notices[1]["params"]["data"]["outcome"]["exitCode"], 0,
        "{notices:?}"
    );
    // A failing command's end is an error.
    raw.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "background_command", "arguments": {"argv": ["false"]}}}),
    );
    let finished = loop {
        let m = raw.recv();
        if m["params"]["data"]["event"] == "finished" {
            break m;
        }
    };
    assert_eq!(finished["params"]["level"], "error", "{finished}");
    assert_eq!(finished["params"]["data"]["outcome"]["exitCode"], 1);
    let (status, stderr) = raw.finish_with_stderr();
    assert!(status.success(), "{status}: {stderr}");
    assert_no_sessions_left(&f);
    assert_no_survivors(home(&f));
}

#[test]
fn agent_exec_call_refuses_background_command_with_no_delivery() {
    // BG-7: a one-shot call has nobody to report to; refused before anything runs, pointing
    // to the MCP server.
    let f = Fixture::new();
    let marker = testkit::marker();
    let json = json!({"argv": ["sleep", marker]}).to_string();
    let out = agent_exec(
        &[
            "--state-dir",
            s(&f.state),
            "call",
            "background_command",
            "--workspace",
            s(&f.folder),
            "--json",
            &json,
        ],
        None,
    );
    assert_eq!(out.code, 1, "{} {}", out.stdout, out.stderr);
    assert_eq!(out.json["ok"], false, "{}", out.json);
    assert_eq!(
        out.json["code"], "BACKGROUND_COMMAND_NO_DELIVERY",
        "{}",
        out.json
    );
    assert!(
        out.json["message"]
            .as_str()
            .unwrap()
            .contains("agent-exec mcp"),
        "{}",
        out.json
    );
    assert!(!has_process_with_arg(&marker));
    assert_no_sessions_left(&f);
    assert_no_survivors(&f.folder);
}

#[test]
fn a_sigterm_of_the_server_stops_its_tasks_and_removes_the_session_directory() {
    // The signal handler removes the session's directory (a call directory) as it removes a
    // mirror; the supervisors stop the trees when the host is gone.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let marker = testkit::marker();
    let (mut raw, log) = server_with_sleeper(&f, &marker);
    let pid = rustix::process::Pid::from_raw(i32::try_from(raw.pid()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let _ = raw.wait();
    let deadline = Instant::now() + Duration::from_secs(5);
    while has_process_with_arg(&marker) {
        assert!(
            Instant::now() < deadline,
            "sleep survived the server's SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!Path::new(&log).exists(), "{log}");
    assert_no_sessions_left(&f);
}
