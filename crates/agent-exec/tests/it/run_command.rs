//! `agent-exec call run_command` end to end (issue 18): the gates as the person at a terminal
//! meets them — an allowlist hit runs without asking, anything else needs a yes (`--yes`, the
//! terminal) unless the mode says otherwise, no terminal and no flag is a not-executed result
//! (never an assumed yes), refusals carry their `RUN_COMMAND_*` code, `--password-fd` takes
//! only descriptors it may read a password from — and nothing outlives a call.
//!
//! Every call here runs in a new session (`setsid`), so `/dev/tty` cannot be opened: what a
//! call from a script, a CI job or an agent's own shell gets.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::util::{Fixture, assert_no_survivors, s, sandbox_available};

/// What a call printed and how it exited.
#[derive(Debug)]
struct Call {
    code: i32,
    line: Value,
    stderr: String,
}

/// `agent-exec call run_command --workspace <folder> <flags> --json <args>`, without a
/// controlling terminal, `stdin` fed to it.
fn call(f: &Fixture, flags: &[&str], args: &Value, stdin: &str) -> Call {
    let json = args.to_string();
    let mut all = vec![
        "--state-dir",
        s(&f.state),
        "call",
        "run_command",
        "--workspace",
        s(&f.folder),
    ];
    all.extend_from_slice(flags);
    all.extend_from_slice(&["--json", &json]);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent-exec"));
    cmd.args(&all)
        .current_dir(&f.folder)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: `setsid` is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| rustix::process::setsid().map(drop).map_err(Into::into));
    }
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let code = out.status.code().unwrap_or(-1);
    let line = if stdout.is_empty() {
        Value::Null
    } else {
        assert_eq!(
            stdout.matches('\n').count(),
            1,
            "{all:?}: {stdout}\n{stderr}"
        );
        serde_json::from_str(&stdout).unwrap()
    };
    // Exit 0 exactly when the command ran and exited 0 (CallAnswer::is_success).
    if code != 2 {
        let success = line["ok"] == json!(true)
            && line["executed"] == json!(true)
            && line["status"] == "exited"
            && line["exitCode"] == 0;
        assert_eq!(success, code == 0, "{all:?}: {stdout}\n{stderr}");
    }
    Call { code, line, stderr }
}

/// A file beside the folder (not in it), e.g. a run_command configuration.
fn outside_file(f: &Fixture, name: &str, text: &str) -> std::path::PathBuf {
    let path = f.tmp.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn not_executed(c: &Call) {
    assert_eq!(
        (
            c.code,
            &c.line["ok"],
            &c.line["executed"],
            &c.line["status"]
        ),
        (1, &json!(true), &json!(false), &json!("notExecuted")),
        "{c:?}"
    );
}

#[test]
fn an_allowlist_hit_runs_without_asking() {
    // RC-9: a read-only allowlist hit skips the confirmation, even in safe mode and without a
    // terminal.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("listed.txt", "x");
    let c = call(&f, &[], &json!({"argv": ["ls"]}), "");
    assert_eq!(c.code, 0, "{c:?}");
    assert_eq!(c.line["executed"], true, "{c:?}");
    assert!(
        c.line["output"].as_str().unwrap().contains("listed.txt"),
        "{c:?}"
    );
    assert_eq!(c.line["label"], "ls", "{c:?}");
}

#[test]
fn safe_without_a_terminal_or_yes_runs_nothing_and_says_how_to_run_it() {
    // Issue 18: a caller with no way to answer gets a not-executed result, never a yes.
    let f = Fixture::new();
    for flags in [&[][..], &["--mode", "safe"][..]] {
        let c = call(&f, flags, &json!({"argv": ["touch", "made.txt"]}), "");
        not_executed(&c);
        assert_eq!(c.line["label"], "touch made.txt", "{c:?}");
        assert!(!f.folder.join("made.txt").exists());
    }
}

#[test]
fn yes_answers_the_confirmation_and_the_command_runs() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let c = call(&f, &["--yes"], &json!({"argv": ["touch", "made.txt"]}), "");
    assert_eq!((c.code, &c.line["executed"]), (0, &json!(true)), "{c:?}");
    assert!(f.folder.join("made.txt").exists());
}

#[test]
fn allow_all_and_auto_run_a_local_command_without_asking() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    for (mode, file) in [("allow-all", "a.txt"), ("auto", "b.txt")] {
        let c = call(&f, &["--mode", mode], &json!({"argv": ["touch", file]}), "");
        assert_eq!(
            (c.code, &c.line["executed"]),
            (0, &json!(true)),
            "{mode}: {c:?}"
        );
        assert!(f.folder.join(file).exists(), "{mode}");
    }
}

#[test]
fn the_policy_file_mode_applies_and_mode_overrides_it() {
    // The same rules `check run_command` reads: the file's mode, --mode over it.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let policy = outside_file(&f, "policy.json", r#"{"mode": "allow-all"}"#);
    let c = call(
        &f,
        &["--policy", s(&policy)],
        &json!({"argv": ["touch", "p.txt"]}),
        "",
    );
    assert_eq!((c.code, &c.line["executed"]), (0, &json!(true)), "{c:?}");
    let c = call(
        &f,
        &["--policy", s(&policy), "--mode", "safe"],
        &json!({"argv": ["touch", "q.txt"]}),
        "",
    );
    not_executed(&c);
    assert!(!f.folder.join("q.txt").exists());
    // A broken file is refused before anything runs.
    let bad = outside_file(&f, "bad.json", r#"{"mode": "yolo"}"#);
    let c = call(
        &f,
        &["--policy", s(&bad)],
        &json!({"argv": ["touch", "r.txt"]}),
        "",
    );
    assert_eq!((c.code, &c.line["ok"]), (1, &json!(false)), "{c:?}");
    assert_eq!(c.line["code"], "AGENT_EXEC_ARGUMENTS_INVALID", "{c:?}");
    assert!(
        c.line["message"].as_str().unwrap().contains("bad.json"),
        "{c:?}"
    );
    assert!(!f.folder.join("r.txt").exists());
}

#[test]
fn a_refusal_prints_its_run_command_code_and_runs_nothing() {
    let f = Fixture::new();
    for (argv, code) in [
        (json!(["cd", "/"]), "RUN_COMMAND_CD"),
        (
            json!(["touch", "x", "&&", "touch", "y"]),
            "RUN_COMMAND_METACHARACTERS",
        ),
        (json!([]), "RUN_COMMAND_ARGUMENTS_INVALID"),
    ] {
        let c = call(&f, &["--mode", "allow-all"], &json!({"argv": argv}), "");
        assert_eq!(
            (c.code, &c.line["ok"], &c.line["code"]),
            (1, &json!(false), &json!(code)),
            "{argv}: {c:?}"
        );
        assert!(c.line["message"].as_str().unwrap().len() > 20, "{c:?}");
    }
    let c = call(&f, &[], &json!({"argv": ["ls"], "shell": true}), "");
    assert_eq!(c.line["code"], "RUN_COMMAND_ARGUMENTS_INVALID", "{c:?}");
    assert!(!f.folder.join("x").exists() && !f.folder.join("y").exists());
}

#[test]
fn password_fd_refuses_the_outputs_stdin_holding_the_arguments_and_closed_descriptors() {
    let f = Fixture::new();
    let args = json!({"argv": ["touch", "x"]}).to_string();
    for (flags, says) in [
        (vec!["--password-fd", "1"], "is an output"),
        (vec!["--password-fd", "2"], "is an output"),
        (vec!["--password-fd", "57"], "is not open"),
    ] {
        let c = call(&f, &flags, &json!({"argv": ["touch", "x"]}), "");
        // A usage error of `call`: exit 2, the message on stderr and in its one JSON line.
        assert_eq!(
            (c.code, c.line["code"].as_str()),
            (2, Some("AGENT_EXEC_ARGUMENTS_INVALID")),
            "{flags:?}: {c:?}"
        );
        assert!(c.stderr.contains(says), "{flags:?}: {c:?}");
    }
    // Without --json stdin is the arguments: it cannot be the password too.
    let out = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args([
            "--state-dir",
            s(&f.state),
            "call",
            "run_command",
            "--workspace",
            s(&f.folder),
        ])
        .args(["--password-fd", "0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("carries the arguments"),
        "{args}"
    );
    assert!(!f.folder.join("x").exists());
}

#[test]
fn a_password_gate_without_a_terminal_or_a_password_fd_runs_nothing() {
    // RC-12: `sandbox: false` needs the password on every call; --yes does not give one, and
    // there is no terminal to type it on.
    let f = Fixture::new();
    let c = call(
        &f,
        &["--yes", "--mode", "allow-all"],
        &json!({"argv": ["touch", "outside.txt"], "sandbox": false}),
        "",
    );
    not_executed(&c);
    assert!(!f.folder.join("outside.txt").exists());
}

#[test]
fn a_wrong_password_from_the_fd_three_times_runs_nothing() {
    // RC-12: three wrong answers end the call; the password comes one line per attempt from
    // --password-fd (here stdin, with the arguments in --json). Whoever the user is (root
    // here too: PAM checks root's password), a random line is not their password.
    let f = Fixture::new();
    let c = call(
        &f,
        &["--yes", "--password-fd", "0"],
        &json!({"argv": ["touch", "outside.txt"], "sandbox": false}),
        "not-the-password-1\nnot-the-password-2\nnot-the-password-3\n",
    );
    not_executed(&c);
    assert!(!f.folder.join("outside.txt").exists());
    assert!(!c.stderr.contains("not-the-password"), "{c:?}");
    assert!(!c.line.to_string().contains("not-the-password"), "{c:?}");
}

#[test]
fn sandbox_false_with_the_right_password_from_the_fd_runs_and_a_wrong_one_does_not() {
    // RC-12 with the system's own check (PAM), as the test user of `.ci/run`: the password on
    // every call, one line per attempt from --password-fd; a wrong one three times runs
    // nothing; the password is never printed.
    if testkit::rerun_as_test_user(
        "run_command::sandbox_false_with_the_right_password_from_the_fd_runs_and_a_wrong_one_does_not",
    ) {
        return;
    }
    let user = testkit::as_test_user().unwrap();
    let f = Fixture::new();
    let args = json!({"argv": ["touch", "outside.txt"], "sandbox": false});
    let wrong = "wrong-1\nwrong-2\nwrong-3\n";
    let c = call(&f, &["--yes", "--password-fd", "0"], &args, wrong);
    not_executed(&c);
    assert!(!f.folder.join("outside.txt").exists());
    // Wrong twice, then right: the third attempt runs it.
    let typed = format!("wrong-1\nwrong-2\n{}\n", user.password);
    let c = call(&f, &["--yes", "--password-fd", "0"], &args, &typed);
    assert_eq!((c.code, &c.line["executed"]), (0, &json!(true)), "{c:?}");
    assert!(f.folder.join("outside.txt").exists());
    assert!(!c.line.to_string().contains(&user.password), "{c:?}");
    assert!(!c.stderr.contains(&user.password), "{c:?}");
}

#[test]
fn nothing_a_run_command_call_starts_outlives_it() {
    // Issue 18 / house rule 4: a background child of the command is stopped with it.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let marker = testkit::marker();
    let script = format!("sleep {marker} & echo started");
    let c = call(&f, &["--yes"], &json!({"argv": ["sh", "-c", script]}), "");
    assert_eq!((c.code, &c.line["executed"]), (0, &json!(true)), "{c:?}");
    assert!(
        c.line["output"].as_str().unwrap().contains("started"),
        "{c:?}"
    );
    assert!(testkit::alive_with(&marker).is_empty(), "{marker} survived");
    assert_no_survivors(&f.folder);
}

/// TRUST-3: an MCP session keeps its caches' views for its next call — what one call fetched
/// the next finds — `agent-exec status` lists them while the session lasts, the user's cache
/// never changes, and nothing of the views is left once the session ends.
#[test]
fn an_mcp_session_keeps_its_cache_views_lists_them_in_status_and_removes_them_at_the_end() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let home = tempfile::tempdir().unwrap();
    let home = home.path().canonicalize().unwrap();
    let npm = home.join(".npm");
    std::fs::create_dir_all(&npm).unwrap();
    std::fs::write(npm.join("index"), "user\n").unwrap();
    let args = [
        "--state-dir",
        s(&f.state),
        "mcp",
        "--workspace",
        s(&f.folder),
        "--mode",
        "allow-all",
    ];
    let mut raw = crate::mcp::Raw::start_with_env(&args, &f.folder, &[("HOME", home.as_path())]);
    let sh = |id: u64, script: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "run_command", "arguments": {"argv": ["sh", "-c", script]}}})
    };
    raw.send(sh(1, "echo FETCHED > ~/.npm/pkg && echo done"));
    let first = crate::mcp::result_of(&raw.recv()["result"]);
    assert_eq!(first["caches"]["kept"], true, "{first}");
    raw.send(sh(2, "cat ~/.npm/pkg"));
    let second = crate::mcp::result_of(&raw.recv()["result"]);
    assert!(
        second["output"].as_str().unwrap().contains("FETCHED"),
        "{second}"
    );
    let line = crate::util::agent_exec(&["--state-dir", s(&f.state), "status"], None).json;
    let listed: Vec<&Value> = line["keptCacheViews"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["cache"] == json!(npm))
        .collect();
    assert_eq!(listed.len(), 1, "{line}");
    assert_eq!(listed[0]["pid"], raw.pid(), "{line}");
    assert_eq!(listed[0]["ownerAlive"], true, "{line}");
    assert_eq!(listed[0]["entries"], 1, "{line}");
    let pid = raw.pid();
    raw.close_stdin();
    assert!(raw.finish().success());
    assert_eq!(
        std::fs::read_dir(&npm).unwrap().count(),
        1,
        "the cache changed"
    );
    let line = crate::util::agent_exec(&["--state-dir", s(&f.state), "status"], None).json;
    assert!(
        !line["keptCacheViews"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["pid"] == pid),
        "{line}"
    );
    assert_no_survivors(&f.folder);
}

/// TRUST-3: where the system temp dir lies in `$HOME`, which every session's
/// commands read, a session keeps no view for its next call: each call's view is its own.
#[test]
fn with_the_temp_dir_in_home_no_cache_view_is_kept_across_calls() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let home = tempfile::tempdir().unwrap();
    let home = home.path().canonicalize().unwrap();
    let tmp = home.join("tmp");
    std::fs::create_dir_all(home.join(".npm")).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let args = [
        "--state-dir",
        s(&f.state),
        "mcp",
        "--workspace",
        s(&f.folder),
        "--mode",
        "allow-all",
    ];
    let mut raw = crate::mcp::Raw::start_with_env(
        &args,
        &f.folder,
        &[("HOME", home.as_path()), ("TMPDIR", tmp.as_path())],
    );
    let sh = |id: u64, script: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "run_command", "arguments": {"argv": ["sh", "-c", script]}}})
    };
    raw.send(sh(1, "echo FETCHED > ~/.npm/pkg && echo done"));
    let first = crate::mcp::result_of(&raw.recv()["result"]);
    assert!(
        first["output"].as_str().unwrap().contains("done"),
        "{first}"
    );
    assert_ne!(first["caches"]["kept"], true, "{first}");
    raw.send(sh(2, "cat ~/.npm/pkg; echo end"));
    let second = crate::mcp::result_of(&raw.recv()["result"]);
    assert!(
        !second["output"].as_str().unwrap().contains("FETCHED"),
        "{second}"
    );
    raw.close_stdin();
    assert!(raw.finish().success());
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "left in the temp dir"
    );
    assert_no_survivors(&f.folder);
}
