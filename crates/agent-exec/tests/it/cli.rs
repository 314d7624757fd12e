//! `agent-exec` end to end through the built binary: one JSON line, exit 0/1/2, the file tools,
//! `run` with mirror write-back, `grant`/`revoke`/`status`, and a revocation from another
//! process stopping a running call (TS-3).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::util::{
    Fixture, agent_exec, assert_no_survivors, call, declare_notes, grant, grant_notes_everything,
    s, sandbox_available, survivors,
};

#[test]
fn call_prints_one_json_line_with_ok_merged_in() {
    let f = Fixture::new();
    f.write("data.csv", "a,b\n1,2\n");
    let out = call(&f, "read", json!({"path": "data.csv"}));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.json,
        json!({"ok": true, "content": "a,b\n1,2\n", "totalLines": 2, "truncated": false})
    );
    let out = call(
        &f,
        "write",
        json!({"path": "new.txt", "content": "hello\n"}),
    );
    assert_eq!(out.json, json!({"ok": true, "bytesWritten": 6}));
    assert_eq!(f.read("new.txt"), "hello\n");
    let out = call(
        &f,
        "edit",
        json!({"path": "new.txt", "oldString": "hello", "newString": "bye"}),
    );
    assert_eq!(out.json, json!({"ok": true, "replacements": 1}));
    let out = call(&f, "grep", json!({"pattern": "^1,"}));
    assert_eq!(
        out.json,
        json!({"ok": true, "matches": [{"path": "data.csv", "line": 2, "text": "1,2"}], "truncated": false})
    );
}

#[test]
fn call_write_makes_missing_directories_and_refuses_a_link_out_of_the_workspace() {
    // `write` of `sub/new.txt` makes `sub/` inside the workspace, never through a
    // symbolic link (the rule itself is tested in crates/file-tools).
    let f = Fixture::new();
    let out = call(
        &f,
        "write",
        json!({"path": "sub/deeper/new.txt", "content": "hello\n"}),
    );
    assert_eq!(out.json, json!({"ok": true, "bytesWritten": 6}));
    assert_eq!(f.read("sub/deeper/new.txt"), "hello\n");
    let outside = f.folder.with_extension("outside");
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, f.folder.join("link")).unwrap();
    let out = call(
        &f,
        "write",
        json!({"path": "link/new/x.txt", "content": "x"}),
    );
    assert_eq!(out.code, 1);
    assert_eq!(
        out.json["code"], "AGENT_EXEC_PATH_INVALID",
        "{}",
        out.stdout
    );
    assert!(std::fs::read_dir(&outside).unwrap().next().is_none());
}

#[test]
fn arguments_come_from_stdin_when_json_is_absent() {
    let f = Fixture::new();
    f.write("a.txt", "x\n");
    let out = agent_exec(
        &[
            "--state-dir",
            s(&f.state),
            "call",
            "read",
            "--workspace",
            s(&f.folder),
            "--call-id",
            "c-7",
        ],
        Some("{\"path\": \"a.txt\"}"),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json["content"], "x\n");
}

#[test]
fn failures_exit_1_with_the_error_object_and_usage_errors_exit_2() {
    let f = Fixture::new();
    f.write("a.txt", "x\n");
    for (tool, args, code) in [
        (
            "read",
            "{\"path\": \"../etc/passwd\"}",
            "AGENT_EXEC_PATH_INVALID",
        ),
        (
            "read",
            "{\"path\": \"a.txt\", \"extra\": 1}",
            "AGENT_EXEC_ARGUMENTS_INVALID",
        ),
        ("read", "not json", "AGENT_EXEC_ARGUMENTS_INVALID"),
        ("read", "[\"a.txt\"]", "AGENT_EXEC_ARGUMENTS_INVALID"),
        (
            "write",
            "{\"path\": \".GIT/x\", \"content\": \"\"}",
            "AGENT_EXEC_PATH_INVALID",
        ),
    ] {
        let out = agent_exec(
            &[
                "--state-dir",
                s(&f.state),
                "call",
                tool,
                "--workspace",
                s(&f.folder),
                "--json",
                args,
            ],
            None,
        );
        assert_eq!(out.code, 1, "{args}");
        assert_eq!(out.json["ok"], false);
        assert_eq!(out.json["code"], code, "{args}: {}", out.stdout);
        assert!(out.json["message"].as_str().unwrap().len() > 20);
    }
    let missing = f.tmp.path().join("nope");
    let out = agent_exec(
        &[
            "--state-dir",
            s(&f.state),
            "call",
            "read",
            "--workspace",
            s(&missing),
            "--json",
            "{}",
        ],
        None,
    );
    assert_eq!(
        (out.code, out.json["code"].as_str()),
        (1, Some("AGENT_EXEC_PATH_INVALID"))
    );
    // A usage error of `call` is also its one JSON line on stdout; other commands print none.
    for args in [
        vec!["call", "bash", "--workspace", s(&f.folder), "--json", "{}"],
        vec!["call", "read", "--json", "{}"],
        vec!["call"],
    ] {
        let out = agent_exec(&args, None);
        assert_eq!(out.code, 2, "{args:?}");
        assert_eq!(out.json["ok"], false, "{args:?}");
        assert_eq!(out.json["code"], "AGENT_EXEC_ARGUMENTS_INVALID", "{args:?}");
        // stderr's first line, clap's or ours, begins the JSON line's message.
        let message = out.json["message"].as_str().unwrap();
        let first = out.stderr.lines().next().unwrap();
        let first = first
            .strip_prefix("error: ")
            .or_else(|| first.strip_prefix("agent-exec: "))
            .unwrap();
        assert!(
            message.starts_with(first),
            "{args:?}: {message} / {}",
            out.stderr
        );
    }
    let out = agent_exec(&["frobnicate"], None);
    assert_eq!((out.code, out.stdout.as_str()), (2, ""));
    assert_eq!(f.read("a.txt"), "x\n");
}

#[test]
fn doctor_prints_the_sandbox_facts_as_json() {
    let out = agent_exec(&["doctor"], None);
    assert_eq!(out.code, 0);
    assert!(out.json["sandbox"]["enforced"].is_boolean());
    if cfg!(target_os = "linux") {
        let mode = out.json["cleanup"]["mode"].as_str().unwrap();
        assert!(mode == "pid-namespace" || mode == "subreaper", "{mode}");
        assert!(out.json["seccomp"].is_boolean());
        // Which protections this machine gives, the rule the sandbox applies.
        let protections = &out.json["sandbox"]["protections"];
        let namespaces = linux_sandbox::probe().private_namespaces_for(linux_sandbox::Launch {
            own_user_namespace: proctree::user_namespace_in_use(),
            own_pid_namespace: proctree::pid_namespace_available(),
        });
        assert_eq!(
            protections["privateNamespaces"],
            json!(namespaces),
            "{protections}"
        );
        let metadata = protections["metadataOutsideWritablePaths"]
            .as_str()
            .unwrap();
        assert_eq!(metadata.starts_with("protected"), namespaces, "{metadata}");
    }
}

/// A parent that ignores SIGCHLD hands that on through `execve`; the kernel then reaps a child
/// whose exit signal is SIGCHLD by itself. The probes' children have none, so the facts are the
/// same (else every probe would read ECHILD as "not available").
#[test]
fn the_kernel_facts_are_the_same_when_the_parent_ignores_sigchld() {
    if !cfg!(target_os = "linux") {
        return;
    }
    let ignoring = Command::new("python3")
        .args([
            "-c",
            "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); \
             os.execv(sys.argv[1], sys.argv[1:])",
            env!("CARGO_BIN_EXE_agent-exec"),
            "doctor",
        ])
        .stderr(Stdio::inherit())
        .output();
    let Ok(ignoring) = ignoring else {
        eprintln!("skipped: python3 is not installed (it sets SIGCHLD to ignored before exec)");
        return;
    };
    let ignoring: serde_json::Value = serde_json::from_slice(&ignoring.stdout).unwrap();
    let normal = agent_exec(&["doctor"], None);
    assert_eq!(ignoring["cleanup"], normal.json["cleanup"]);
    assert_eq!(
        ignoring["sandbox"]["summary"], normal.json["sandbox"]["summary"],
        "{}",
        ignoring["sandbox"]["summary"]
    );
    assert_eq!(ignoring["userNamespaces"], normal.json["userNamespaces"]);
}

#[test]
fn run_writes_the_mirror_back_after_success_and_keeps_it_after_failure() {
    // RUN-11 through `agent-exec call run` (a one-call turn).
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("in.txt", "b\na\n");
    f.write("ok.awk", "{ print > \"out.txt\" }\n");
    f.write("bad.awk", "{ print > \"diag.txt\" } END { exit 3 }\n");
    let out = call(
        &f,
        "run",
        json!({"program": "awk", "args": ["-f", "ok.awk", "in.txt"]}),
    );
    assert_eq!(out.code, 0, "{} {}", out.stdout, out.stderr);
    assert_eq!(out.json["exitCode"], 0);
    assert_eq!(out.json["mirror"]["applied"], json!(["out.txt"]));
    assert_eq!(out.json["mirror"]["writtenBack"], true);
    assert_eq!(out.json["mirror"]["kept"], false);
    assert_eq!(f.read("out.txt"), "b\na\n");

    // A success that changed nothing wrote nothing back, and says so.
    let out = call(
        &f,
        "run",
        json!({"program": "wc", "args": ["-l", "in.txt"]}),
    );
    assert_eq!(out.code, 0, "{} {}", out.stdout, out.stderr);
    assert_eq!(out.json["mirror"]["applied"], json!([]));
    assert_eq!(out.json["mirror"]["writtenBack"], false);

    let out = call(
        &f,
        "run",
        json!({"program": "awk", "args": ["-f", "bad.awk", "in.txt"]}),
    );
    assert_eq!(out.code, 1);
    assert_eq!(out.json["code"], "AGENT_EXEC_FAILED");
    assert_eq!(out.json["exitCode"], 3);
    assert_eq!(out.json["mirror"]["kept"], true);
    assert_eq!(out.json["mirror"]["writtenBack"], false);
    assert!(
        !f.folder.join("diag.txt").exists(),
        "nothing written back after a failure"
    );
    let kept = Path::new(out.json["mirror"]["path"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(kept.join("diag.txt")).unwrap(),
        "b\na\n"
    );
    assert!(out.stderr.contains("mirror is kept at"), "{}", out.stderr);

    let out = agent_exec(
        &[
            "--state-dir",
            s(&f.state),
            "call",
            "run",
            "--workspace",
            s(&f.folder),
            "--keep-mirror",
            "--json",
            r#"{"program": "wc", "args": ["-l", "in.txt"]}"#,
        ],
        None,
    );
    assert_eq!(out.code, 0);
    assert_eq!(out.json["stdout"], "2 in.txt\n");
    assert_eq!(out.json["mirror"]["kept"], true);
    assert!(Path::new(out.json["mirror"]["path"].as_str().unwrap()).is_dir());

    // A refusal keeps no mirror for diagnosis: nothing ran, nothing to look at. The
    // workspace's persistent mirror stays for the next call, an exact copy of the folder.
    let out = call(&f, "run", json!({"program": "sh", "args": ["-c", "true"]}));
    assert_eq!(out.json["code"], "AGENT_EXEC_PROGRAM_UNSUPPORTED");
    assert_eq!(out.json["mirror"]["kept"], false);
    let persistent = Path::new(out.json["mirror"]["path"].as_str().unwrap());
    assert!(
        !persistent.join("diag.txt").exists(),
        "the failed call's mirror is not reused"
    );
    assert_eq!(
        std::fs::read_to_string(persistent.join("out.txt")).unwrap(),
        "b\na\n"
    );
    assert_no_survivors(f.tmp.path());
}

fn plugin_call(f: &Fixture, tool: &str, args: &str) -> crate::util::Output {
    agent_exec(
        &[
            "--state-dir",
            s(&f.state),
            "call",
            tool,
            "--plugin",
            "notes",
            "--workspace",
            s(&f.folder),
            "--json",
            args,
        ],
        None,
    )
}

#[test]
fn grant_revoke_and_status_drive_what_a_plugin_may_do() {
    // PERM-1, PERM-2, PERM-3, TS-5.
    let f = Fixture::new();
    f.write("a.txt", "x\n");
    let read = r#"{"path": "a.txt"}"#;
    let out = plugin_call(&f, "read", read);
    assert_eq!(
        out.json["code"], "AGENT_PERMISSION_DENIED",
        "{}",
        out.stdout
    );
    declare_notes(&f);
    let out = plugin_call(&f, "read", read);
    assert!(
        out.json["message"].as_str().unwrap().contains("folder"),
        "{}",
        out.stdout
    );
    grant(&f, &["grant", "folder", "notes", s(&f.folder)]);
    let out = plugin_call(&f, "read", read);
    assert!(
        out.json["message"]
            .as_str()
            .unwrap()
            .contains("Agent service approval"),
        "{}",
        out.stdout
    );
    grant(&f, &["grant", "service", "notes"]);
    grant(&f, &["grant", "consent", "notes"]);
    assert_eq!(plugin_call(&f, "read", read).code, 0);
    // run needs local.terminal.exec@1 approved by the platform and allowed by the user (TS-5).
    let wc = r#"{"program": "wc", "args": ["a.txt"]}"#;
    let out = plugin_call(&f, "run", wc);
    assert!(
        out.json["message"]
            .as_str()
            .unwrap()
            .contains("platform has not approved"),
        "{}",
        out.stdout
    );
    grant(&f, &["grant", "approve", "notes", "local.terminal.exec@1"]);
    let out = plugin_call(&f, "run", wc);
    assert!(
        out.json["message"]
            .as_str()
            .unwrap()
            .contains("has not allowed"),
        "{}",
        out.stdout
    );
    grant(&f, &["grant", "allow", "notes", "local.terminal.exec@1"]);
    let status = grant(&f, &["status", "--plugin", "notes"]);
    let record = &status["plugins"]["notes"];
    assert_eq!(record["userAllowed"], json!(["local.terminal.exec@1"]));
    assert_eq!(record["folderGrants"], json!([{"path": f.folder}]));
    if sandbox_available() {
        assert_eq!(plugin_call(&f, "run", wc).code, 0);
    }
    grant(&f, &["revoke", "consent", "notes"]);
    assert_eq!(
        plugin_call(&f, "read", read).json["code"],
        "AGENT_PERMISSION_DENIED"
    );
    grant(&f, &["grant", "all", "notes"]);
    assert_eq!(plugin_call(&f, "read", read).code, 0);
    grant(&f, &["revoke", "folder", "notes", s(&f.folder)]);
    assert_eq!(
        plugin_call(&f, "read", read).json["code"],
        "AGENT_PERMISSION_DENIED"
    );
    grant(&f, &["revoke", "plugin", "notes"]);
    assert_eq!(grant(&f, &["status"])["plugins"], json!({}));
    // Bad input is refused with a reason and changes nothing.
    for args in [
        vec!["grant", "allow", "notes", "local.terminal.exec@1"],
        vec!["grant", "plugin", "../x", "--package", "p"],
        vec!["grant", "plugin", "local-user", "--package", "p"],
        vec![
            "grant",
            "plugin",
            "p2",
            "--package",
            "p",
            "--declare",
            "local.terminal.exec@2",
        ],
        vec!["grant", "plugin", "p3"],
    ] {
        let mut all = vec!["--state-dir", s(&f.state)];
        all.extend_from_slice(&args);
        let out = agent_exec(&all, None);
        assert_eq!(out.code, 1, "{args:?}: {}", out.stdout);
        assert_eq!(out.json["ok"], false);
    }
    assert_eq!(grant(&f, &["status"])["plugins"], json!({}));
}

#[test]
fn revoke_from_another_process_stops_a_running_call_with_no_survivors() {
    // TS-3 across processes: the state watch of the running `agent-exec call`.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("spin.awk", "BEGIN { while (1) { } }\n");
    f.write("in.txt", "x\n");
    grant_notes_everything(&f);
    let args = r#"{"program": "awk", "args": ["-f", "spin.awk", "in.txt"], "timeoutMs": 30000}"#;
    let child = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args([
            "--state-dir",
            s(&f.state),
            "call",
            "run",
            "--plugin",
            "notes",
            "--workspace",
            s(&f.folder),
            "--json",
            args,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until awk runs (a process working in the mirror under the state dir).
    let mirrors = f.state.join("mirrors");
    let deadline = Instant::now() + Duration::from_secs(20);
    while survivors(&mirrors).is_empty() {
        assert!(Instant::now() < deadline, "awk never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let revoked = Instant::now();
    grant(&f, &["revoke", "allow", "notes", "local.terminal.exec@1"]);
    let out = child.wait_with_output().unwrap();
    eprintln!(
        "call ended {:?} after the revoke command started",
        revoked.elapsed()
    );
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(line["code"], "AGENT_PERMISSION_DENIED", "{line}");
    assert!(
        line["message"].as_str().unwrap().contains("revoked"),
        "{line}"
    );
    assert_no_survivors(f.tmp.path());
}

#[test]
fn the_readme_main_job_runs_command_in_the_demo_folder() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("a.csv", "1\n2\n3\n");
    f.write("b.csv", "1\n");
    let out = call(&f, "command", json!({"command": "wc -l *.csv | sort -n"}));
    assert_eq!(out.code, 0, "{} {}", out.stdout, out.stderr);
    assert_eq!(out.json["stdout"], "1 b.csv\n3 a.csv\n4 total\n");
    assert_eq!(out.json["status"], "exited");
    assert!(
        out.json.get("mirror").is_none(),
        "command works in the folder itself"
    );
    assert_no_survivors(f.tmp.path());
}

#[test]
fn an_extra_path_needs_approval_and_a_non_interactive_caller_is_refused() {
    // CMD-3: without --approve-extra-path and without a terminal, the call does not run.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let outside = f.tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("x.txt"), "outside\n").unwrap();
    let args = json!({
        "command": "touch ran && cat \"$0\"/x.txt",
        "extraPaths": [{"path": outside, "write": false}],
    });
    // `setsid` leaves the controlling terminal behind: /dev/tty cannot be opened.
    let out = Command::new("setsid")
        .args([
            "-w",
            env!("CARGO_BIN_EXE_agent-exec"),
            "--state-dir",
            s(&f.state),
            "call",
            "command",
            "--workspace",
            s(&f.folder),
            "--json",
            &args.to_string(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{line}");
    assert_eq!(line["code"], "AGENT_PERMISSION_DENIED");
    assert!(
        line["message"].as_str().unwrap().contains(s(&outside)),
        "{line}"
    );
    assert!(
        !f.folder.join("ran").exists(),
        "refused before anything ran"
    );

    let approved = json!({
        "command": format!("cat {}/x.txt", s(&outside)),
        "extraPaths": [{"path": outside, "write": false}],
    });
    let out = agent_exec(
        &[
            "--state-dir",
            s(&f.state),
            "call",
            "command",
            "--workspace",
            s(&f.folder),
            "--approve-extra-path",
            s(&outside),
            "--json",
            &approved.to_string(),
        ],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert_eq!(out.json["stdout"], "outside\n");
    assert_no_survivors(f.tmp.path());
}

// ---- the host's state directory is out of every tool's reach -------------------------------

/// A fixture whose state directory lives inside the workspace folder (`--workspace $HOME` with
/// the default `~/.local/state/agent-exec`).
fn state_inside_the_folder() -> (Fixture, std::path::PathBuf) {
    let f = Fixture::new();
    let state = f.folder.join(".local/state/agent-exec");
    std::fs::create_dir_all(&state).unwrap();
    host_shim::StateStore::open(&state).unwrap();
    // Something of the host's that a forged write would replace.
    std::fs::write(state.join("state.json.note"), "HOST STATE\n").unwrap();
    (f, state)
}

fn call_in(
    state: &Path,
    folder: &Path,
    tool: &str,
    args: serde_json::Value,
) -> crate::util::Output {
    agent_exec(
        &[
            "--state-dir",
            s(state),
            "call",
            tool,
            "--workspace",
            s(folder),
            "--json",
            &args.to_string(),
        ],
        None,
    )
}

#[test]
fn file_tools_refuse_the_state_directory_inside_the_workspace() {
    let (f, state) = state_inside_the_folder();
    f.write("notes.txt", "STATE lives elsewhere\n");
    for (tool, args) in [
        (
            "read",
            json!({"path": ".local/state/agent-exec/state.json.note"}),
        ),
        (
            "write",
            json!({"path": ".local/state/agent-exec/state.json", "content": "{}"}),
        ),
        (
            "edit",
            json!({"path": ".local/state/agent-exec/state.json.note", "oldString": "HOST", "newString": "EVIL"}),
        ),
        (
            "grep",
            json!({"pattern": "STATE", "path": ".local/state/agent-exec"}),
        ),
    ] {
        let out = call_in(&state, &f.folder, tool, args);
        assert_eq!(
            out.json["code"], "AGENT_EXEC_PATH_INVALID",
            "{tool}: {}",
            out.stdout
        );
        assert!(
            out.json["message"]
                .as_str()
                .unwrap()
                .contains("state directory")
        );
    }
    // grep from the root passes over it: only the workspace's own file matches.
    let out = call_in(&state, &f.folder, "grep", json!({"pattern": "STATE"}));
    assert_eq!(out.code, 0, "{}", out.stdout);
    let files: Vec<&str> = out.json["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["notes.txt"], "{}", out.stdout);
    assert_eq!(
        std::fs::read_to_string(state.join("state.json.note")).unwrap(),
        "HOST STATE\n"
    );
}

#[test]
fn run_refuses_a_folder_that_contains_the_state_directory() {
    let (f, state) = state_inside_the_folder();
    f.write(
        "p.awk",
        "BEGIN { print \"forged\" > \".local/state/agent-exec/state.json\" }\n",
    );
    f.write("in", "x\n");
    let out = call_in(
        &state,
        &f.folder,
        "run",
        json!({"program": "awk", "args": ["-f", "p.awk", "in"]}),
    );
    assert_eq!(
        out.json["code"], "AGENT_EXEC_PATH_INVALID",
        "{}",
        out.stdout
    );
    assert!(
        out.json["message"]
            .as_str()
            .unwrap()
            .contains("state directory")
    );
    assert!(
        !state.join("state.json").exists()
            || !f
                .read(".local/state/agent-exec/state.json")
                .contains("forged")
    );
}

#[test]
fn a_workspace_that_is_the_state_directory_or_inside_it_is_refused() {
    let (_f, state) = state_inside_the_folder();
    let inner = state.join("private");
    std::fs::create_dir_all(&inner).unwrap();
    for folder in [&state, &inner] {
        let out = call_in(
            &state,
            folder,
            "command",
            json!({"command": "cat state.json"}),
        );
        assert_eq!(
            out.json["code"], "AGENT_EXEC_PATH_INVALID",
            "{}",
            out.stdout
        );
        let out = call_in(&state, folder, "read", json!({"path": "state.json.note"}));
        assert_eq!(
            out.json["code"], "AGENT_EXEC_PATH_INVALID",
            "{}",
            out.stdout
        );
    }
}

#[test]
fn an_extra_path_inside_the_state_directory_is_refused() {
    if !sandbox_available() {
        return;
    }
    let (f, state) = state_inside_the_folder();
    let other = Fixture::new();
    let note = state.join("state.json.note");
    let out = agent_exec(
        &[
            "--state-dir",
            s(&state),
            "call",
            "command",
            "--workspace",
            s(&other.folder),
            "--approve-extra-path",
            s(&note),
            "--json",
            &json!({"command": format!("cat '{}'", note.display()),
                    "extraPaths": [{"path": s(&note), "write": true}]})
            .to_string(),
        ],
        None,
    );
    assert_eq!(
        out.json["code"], "AGENT_EXEC_PATH_INVALID",
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("HOST STATE"));
    drop(f);
}

#[test]
fn a_state_directory_reached_through_a_link_the_user_can_repoint_is_refused() {
    let f = Fixture::new();
    let real = f.folder.join(".local-real");
    std::fs::create_dir_all(real.join("state")).unwrap();
    std::os::unix::fs::symlink(".local-real", f.folder.join(".local")).unwrap();
    let state = f.folder.join(".local/state/agent-exec");
    assert_refused_for_a_link(&agent_exec(&["--state-dir", s(&state), "status"], None));
}

/// The call failed, and says it is because of a symbolic link.
fn assert_refused_for_a_link(out: &crate::util::Output) {
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        out.json["message"]
            .as_str()
            .unwrap_or_default()
            .contains("symbolic link"),
        "{} {}",
        out.stdout,
        out.stderr
    );
}

#[test]
fn a_workspace_reached_through_a_link_the_agent_could_repoint_is_refused() {
    let f = Fixture::new();
    let victim = Fixture::new();
    std::fs::write(victim.folder.join("secret"), "VICTIM\n").unwrap();
    let link = f.folder.join("ws");
    std::os::unix::fs::symlink(&victim.folder, &link).unwrap();
    let out = call_in(&f.state, &link, "read", json!({"path": "secret"}));
    assert_eq!(
        out.json["code"], "AGENT_EXEC_PATH_INVALID",
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("VICTIM"));
}

#[test]
fn state_directory_protections_also_hold_unprivileged() {
    if !testkit::is_root() || std::env::var_os("AGENT_EXEC_CLI_UNPRIVILEGED").is_some() {
        eprintln!("not root, or already the unprivileged run");
        return;
    }
    let tests = [
        "cli::file_tools_refuse_the_state_directory_inside_the_workspace",
        "cli::run_refuses_a_folder_that_contains_the_state_directory",
        "cli::a_workspace_that_is_the_state_directory_or_inside_it_is_refused",
        "cli::an_extra_path_inside_the_state_directory_is_refused",
        "cli::a_state_directory_reached_through_a_link_the_user_can_repoint_is_refused",
        "cli::a_workspace_reached_through_a_link_the_agent_could_repoint_is_refused",
        "cli::a_link_in_a_read_only_directory_its_user_owns_is_refused_too",
    ];
    let mut args = vec!["--exact", "--test-threads=1"];
    args.extend(tests);
    let out = testkit::run_as_nobody(&args, &[("AGENT_EXEC_CLI_UNPRIVILEGED", "1")]);
    assert!(
        out.is_empty() || out.contains(&format!("{} passed", tests.len())),
        "{out}"
    );
}

#[test]
fn a_link_in_a_read_only_directory_its_user_owns_is_refused_too() {
    // The owner of a 0555 directory can `chmod u+w` it and re-point the link inside.
    let f = Fixture::new();
    let links = f.folder.join("links");
    std::fs::create_dir(&links).unwrap();
    let real = f.folder.join("real-state");
    std::fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, links.join("state")).unwrap();
    let mode = |m| std::os::unix::fs::PermissionsExt::from_mode(m);
    std::fs::set_permissions(&links, mode(0o555)).unwrap();
    let out = agent_exec(&["--state-dir", s(&links.join("state")), "status"], None);
    std::fs::set_permissions(&links, mode(0o755)).unwrap();
    assert_refused_for_a_link(&out);
}

#[test]
fn file_tools_refuse_another_name_of_the_state_directory() {
    // Identity, not text: a bind mount stands in for a case-insensitive filesystem's other
    // spelling (`.LOCAL/state`). Made in a private mount namespace of the test's own.
    if !testkit::is_root() || !Path::new("/usr/bin/unshare").exists() {
        eprintln!(
            "skipped: needs root and unshare(1) to bind-mount an alias in a private namespace"
        );
        return;
    }
    let (f, state) = state_inside_the_folder();
    let alias = f.folder.join("ALIAS");
    std::fs::create_dir(&alias).unwrap();
    let read = json!({"path": "ALIAS/state.json.note"}).to_string();
    let grep = json!({"pattern": "HOST"}).to_string();
    let script = format!(
        "mount --bind '{st}' '{al}' && for a in '{read}' ; do \
           '{bin}' --state-dir '{st}' call read --workspace '{ws}' --json \"$a\"; echo; done; \
         '{bin}' --state-dir '{st}' call grep --workspace '{ws}' --json '{grep}'",
        st = state.display(),
        al = alias.display(),
        ws = f.folder.display(),
        bin = env!("CARGO_BIN_EXE_agent-exec"),
    );
    let out = std::process::Command::new("/usr/bin/unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("AGENT_EXEC_PATH_INVALID"),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("HOST STATE"), "{stdout}");
}
