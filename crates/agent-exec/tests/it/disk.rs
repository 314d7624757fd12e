//! Nothing accumulates on disk. A host killed mid-call (SIGTERM, SIGINT, SIGHUP,
//! SIGKILL) leaves no temp dir, no per-call mirror and no process; what a dead host left is
//! swept at the next start; kept mirrors are bounded and listed. RUN-10, RUN-11, CMD-6;
//! invariant 4.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use rustix::process::Signal;

use crate::util::{Fixture, assert_no_survivors, s, sandbox_available, survivors};

/// The awk script that keeps a run busy until its timeout (30 s, RUN-5) or a signal.
const LOOP_AWK: &str = "BEGIN { while (1) { } }\n";

fn wait_until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The tools' temp dirs in `tmp`.
fn temp_dirs(tmp: &Path) -> Vec<String> {
    names(tmp)
        .into_iter()
        .filter(|n| n.starts_with("agent-exec-"))
        .collect()
}

/// Per-call mirrors in the state directory (not the persistent one, its record and lock).
fn call_mirrors(state: &Path) -> Vec<String> {
    names(&state.join("mirrors"))
        .into_iter()
        .filter(|n| n.contains("-call-"))
        .collect()
}

/// A fixture with a private system temp dir, so only this test's temp dirs are looked at.
fn fixture() -> (Fixture, PathBuf) {
    let f = Fixture::new();
    f.write("a.txt", "one\ntwo\n");
    f.write("loop.awk", LOOP_AWK);
    let tmp = f.folder.parent().unwrap().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    (f, tmp)
}

/// `agent-exec --state-dir <fixture's> <args>` with `tmp` as the system temp dir.
fn agent_exec_cmd(f: &Fixture, tmp: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent-exec"));
    cmd.arg("--state-dir")
        .arg(&f.state)
        .args(args)
        .env("TMPDIR", tmp);
    cmd
}

fn agent_exec_bg(f: &Fixture, tmp: &Path, args: &[&str]) -> Child {
    agent_exec_cmd(f, tmp, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn run_loop_args(f: &Fixture) -> Vec<String> {
    vec![
        "call".into(),
        "run".into(),
        "--workspace".into(),
        s(&f.folder).into(),
        "--json".into(),
        json!({"program": "awk", "args": ["-f", "loop.awk", "a.txt"], "timeoutMs": 30000})
            .to_string(),
    ]
}

fn kill(child: &mut Child, sig: Signal) {
    use std::os::unix::process::ExitStatusExt;
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, sig).unwrap();
    let status = child.wait().unwrap();
    // The host still dies of the signal (after removing what no supervisor holds).
    assert_eq!(status.signal(), Some(sig.as_raw()), "{status:?}");
}

/// After the host died: no process of the call, no temp dir, no per-call mirror. The
/// supervisor does the removal after its tree is gone, so give it a moment.
fn assert_nothing_left(f: &Fixture, tmp: &Path, sig: Signal) {
    let base = f.folder.parent().unwrap();
    wait_until(&format!("no survivor after {sig:?}"), 30, || {
        survivors(base).is_empty()
    });
    wait_until(&format!("no temp dir after {sig:?}"), 30, || {
        let left = temp_dirs(tmp);
        left.is_empty() || {
            eprintln!("left in {}: {left:?}", tmp.display());
            false
        }
    });
    wait_until(&format!("no per-call mirror after {sig:?}"), 30, || {
        let left = call_mirrors(&f.state);
        left.is_empty() || {
            eprintln!("left in mirrors/: {left:?}");
            false
        }
    });
    assert_no_survivors(base);
}

const SIGNALS: [Signal; 4] = [Signal::TERM, Signal::INT, Signal::HUP, Signal::KILL];

/// For each signal, on a fresh fixture: `start` starts hosts and returns once they are
/// mid-call; each gets the signal; then nothing of theirs may be left.
fn after_each_signal(start: impl Fn(&Fixture, &Path) -> Vec<Child>) {
    if !sandbox_available() {
        return;
    }
    for sig in SIGNALS {
        let (f, tmp) = fixture();
        for mut host in start(&f, &tmp) {
            kill(&mut host, sig);
        }
        assert_nothing_left(&f, &tmp, sig);
    }
}

#[test]
fn a_signal_to_call_mid_run_leaves_no_temp_dir_no_call_mirror_and_no_process() {
    after_each_signal(|f, tmp| {
        let args = run_loop_args(f);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // Two calls on one folder: the first holds the persistent mirror, the second makes a
        // copy of its own (the per-call mirror the issue found left behind).
        let first = agent_exec_bg(f, tmp, &args);
        wait_until("the first run started", 30, || temp_dirs(tmp).len() == 1);
        let second = agent_exec_bg(f, tmp, &args);
        wait_until("both awks run", 30, || {
            temp_dirs(tmp).len() == 2
                && call_mirrors(&f.state).len() == 1
                && survivors(f.folder.parent().unwrap()).len() >= 2
        });
        vec![first, second]
    });
}

#[test]
fn a_signal_to_call_mid_command_leaves_no_temp_dir_and_no_process() {
    after_each_signal(|f, tmp| {
        // A locked directory in the temp dir: its removal must open it up first (where the
        // temp dir is the host's directory; where a tmpfs covers it, LIM-1, nothing of it
        // reaches the host's at all). `started` in the workspace says it was written.
        let cmd = json!({"command": "mkdir -p \"$TMPDIR/d\" && head -c 100000 /dev/zero > \"$TMPDIR/d/big\" && chmod 500 \"$TMPDIR/d\" && touch started && sleep 1000"}).to_string();
        let args = [
            "call",
            "command",
            "--workspace",
            s(&f.folder),
            "--json",
            &cmd,
        ];
        let call = agent_exec_bg(f, tmp, &args);
        wait_until("the command wrote its temp file", 30, || {
            !temp_dirs(tmp).is_empty() && f.folder.join("started").exists()
        });
        vec![call]
    });
}

#[test]
fn a_signal_to_mcp_mid_calls_leaves_no_temp_dir_no_call_mirror_and_no_process() {
    after_each_signal(|f, tmp| {
        let mut mcp = agent_exec_bg(f, tmp, &["mcp", "--workspace", s(&f.folder)]);
        let mut stdin = mcp.stdin.take().unwrap();
        let mut send = |msg: Value| {
            writeln!(stdin, "{msg}").unwrap();
            stdin.flush().unwrap();
        };
        send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "disk-test", "version": "0"}}}),
        );
        send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let run =
            json!({"program": "awk", "args": ["-f", "loop.awk", "a.txt"], "timeoutMs": 30000});
        for id in 1..=3 {
            send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "run", "arguments": run}}));
        }
        send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "command", "arguments": {"command": "sleep 1000"}}}));
        // Running, not merely prepared: a host that dies before it spawned leaves its temp
        // dir to the next start's sweep (what_a_dead_host_left_is_swept_at_the_next_start…).
        wait_until("three runs and a command run", 60, || {
            temp_dirs(tmp).len() == 4
                && call_mirrors(&f.state).len() == 2
                && survivors(f.folder.parent().unwrap()).len() >= 4
        });
        // Still open: the signal, not the client hanging up, ends the server.
        mcp.stdin = Some(stdin);
        vec![mcp]
    });
}

/// `agent-exec-run-<pid>-<start>-<n>` for a process that has exited.
fn dead_owner_name(stem: &str) -> String {
    let mut child = Command::new("/bin/true").spawn().unwrap();
    let pid = child.id();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let start: u64 = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(19))
        .and_then(|t| t.parse().ok())
        .unwrap_or(1);
    child.wait().unwrap();
    format!("{stem}-{pid}-{start}-1")
}

#[test]
fn what_a_dead_host_left_is_swept_at_the_next_start_and_a_live_owners_is_not() {
    let (f, tmp) = fixture();
    let outside = f.folder.parent().unwrap().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("precious"), "keep").unwrap();
    let mirrors = f.state.join("mirrors");
    std::fs::create_dir_all(&mirrors).unwrap();
    // Left by a dead host: a run's temp dir, a command's, a run_command's, a per-call mirror.
    let run_dir = tmp.join(dead_owner_name("agent-exec-run"));
    std::fs::create_dir_all(run_dir.join("tmp/x")).unwrap();
    std::os::unix::fs::symlink(&outside, run_dir.join("tmp/x/link")).unwrap();
    let cmd_dir = tmp.join(dead_owner_name("agent-exec-cmd"));
    std::fs::create_dir(&cmd_dir).unwrap();
    let rc_dir = tmp.join(dead_owner_name("agent-exec-rc"));
    std::fs::create_dir_all(rc_dir.join("home")).unwrap();
    let mirror = mirrors.join(dead_owner_name("local-user-call"));
    std::fs::create_dir(&mirror).unwrap();
    std::fs::write(mirror.join("a.txt"), "copy").unwrap();
    // Not to be touched: a live owner's (this test's own process), a link with an orphan's
    // name, a kept mirror, an old-style name without an owner.
    let me = std::process::id();
    let stat = std::fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
    let start = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(19)
        .unwrap();
    let live = tmp.join(format!("agent-exec-run-{me}-{start}-5"));
    std::fs::create_dir(&live).unwrap();
    let link = tmp.join(dead_owner_name("agent-exec-cmd"));
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let kept = mirrors.join("local-user-kept-1-2-3");
    std::fs::create_dir(&kept).unwrap();
    let old = tmp.join("agent-exec-run-AbC123");
    std::fs::create_dir(&old).unwrap();

    let read = ["call", "read", "--workspace", s(&f.folder)];
    let out = agent_exec_cmd(&f, &tmp, &read)
        .args(["--json", r#"{"path": "a.txt"}"#])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!run_dir.exists() && !cmd_dir.exists() && !mirror.exists());
    assert!(
        !rc_dir.exists(),
        "a run_command temp dir of a dead host is swept"
    );
    assert!(live.is_dir() && kept.is_dir() && old.is_dir());
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    assert_eq!(
        std::fs::read_to_string(outside.join("precious")).unwrap(),
        "keep"
    );
}

/// `agent-exec <args>` with `env`, its exit code and JSON line.
fn agent_exec_env(f: &Fixture, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, Value) {
    let tmp = f.folder.parent().unwrap().join("tmp");
    let mut cmd = agent_exec_cmd(f, &tmp, args);
    cmd.envs(env.iter().copied());
    let out = cmd.output().unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), json)
}

fn failing_run(f: &Fixture, env: &[(&str, &str)]) -> Value {
    let args = json!({"program": "awk", "args": ["-f", "fail.awk", "a.txt"]}).to_string();
    let run = ["call", "run", "--workspace", s(&f.folder), "--json", &args];
    let (code, out) = agent_exec_env(f, &run, env);
    assert_eq!(code, Some(1), "{out}");
    out
}

fn status(f: &Fixture, env: &[(&str, &str)]) -> Value {
    let (code, out) = agent_exec_env(f, &["status"], env);
    assert_eq!(code, Some(0), "{out}");
    out
}

/// A fixture whose `fail.awk` leaves a diagnosis in the mirror and fails (RUN-11 keeps it);
/// `None` where the sandbox cannot run.
fn failing_fixture() -> Option<Fixture> {
    if !sandbox_available() {
        return None;
    }
    let (f, _tmp) = fixture();
    f.write("fail.awk", FAIL_AWK);
    Some(f)
}

const FAIL_AWK: &str = "BEGIN { print \"diagnosis\" > \"out.txt\"; exit 1 }\n";

fn kept_dirs(f: &Fixture) -> Vec<String> {
    names(&f.state.join("mirrors"))
        .into_iter()
        .filter(|n| n.contains("-kept-") && !n.ends_with(".json"))
        .collect()
}

#[test]
fn kept_mirrors_are_bounded_by_count_oldest_dropped_first_and_listed_in_status() {
    // RUN-11 keeps a failed run's mirror for diagnosis; the host bounds how many.
    let Some(f) = failing_fixture() else {
        return;
    };
    let env = [("AGENT_EXEC_KEPT_MIRRORS", "3")];
    let mut paths = Vec::new();
    for _ in 0..6 {
        let out = failing_run(&f, &env);
        assert_eq!(out["mirror"]["kept"], true, "{out}");
        paths.push(PathBuf::from(out["mirror"]["path"].as_str().unwrap()));
    }
    assert_eq!(kept_dirs(&f).len(), 3, "{:?}", kept_dirs(&f));
    for (i, p) in paths.iter().enumerate() {
        assert_eq!(p.exists(), i >= 3, "run {i}: {}", p.display());
    }
    let st = status(&f, &env);
    let listed: Vec<PathBuf> = st["keptMirrors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| PathBuf::from(k["path"].as_str().unwrap()))
        .collect();
    assert_eq!(listed, paths[3..].to_vec(), "{st}");
    for k in st["keptMirrors"].as_array().unwrap() {
        assert_eq!(k["why"], "failed", "{k}");
        assert_eq!(k["folder"], json!(f.folder), "{k}");
        // a.txt, fail.awk, loop.awk and the diagnosis the run wrote.
        assert_eq!(
            k["bytes"],
            (8 + FAIL_AWK.len() + LOOP_AWK.len() + 10) as u64,
            "{k}"
        );
        assert!(k["keptAtMs"].as_u64().unwrap() > 0, "{k}");
    }
    assert_eq!(st["keptMirrorLimits"]["maxCount"], 3, "{st}");
    assert_no_survivors(f.folder.parent().unwrap());
}

#[test]
fn kept_mirrors_are_bounded_by_bytes_and_the_newest_is_always_kept() {
    let Some(f) = failing_fixture() else {
        return;
    };
    f.write("big.bin", vec![7u8; 10_000]);
    // Room for one and a half: each new one pushes the older out; one alone over the bound
    // would still be kept (its path is in the report).
    let env = [("AGENT_EXEC_KEPT_MIRROR_BYTES", "15000")];
    let mut last = PathBuf::new();
    for _ in 0..3 {
        let out = failing_run(&f, &env);
        last = PathBuf::from(out["mirror"]["path"].as_str().unwrap());
        assert_eq!(kept_dirs(&f).len(), 1, "{:?}", kept_dirs(&f));
        assert!(last.is_dir());
    }
    let tiny = [("AGENT_EXEC_KEPT_MIRROR_BYTES", "1")];
    let out = failing_run(&f, &tiny);
    let newest = PathBuf::from(out["mirror"]["path"].as_str().unwrap());
    assert!(newest.is_dir() && !last.exists());
    assert_eq!(kept_dirs(&f).len(), 1);
    assert_no_survivors(f.folder.parent().unwrap());
}

#[test]
fn a_kept_mirror_bound_that_is_not_a_number_is_refused_with_what_to_do() {
    let (f, _tmp) = fixture();
    let (code, json) = agent_exec_env(&f, &["status"], &[("AGENT_EXEC_KEPT_MIRRORS", "many")]);
    assert_eq!(code, Some(1));
    assert_eq!(json["code"], "AGENT_EXEC_ARGUMENTS_INVALID", "{json}");
    let message = json["message"].as_str().unwrap();
    assert!(message.contains("AGENT_EXEC_KEPT_MIRRORS"), "{json}");
}

/// Full copies of the workspace in `mirrors/`: the persistent one, temporary and kept ones.
fn copies(state: &Path) -> usize {
    names(&state.join("mirrors"))
        .into_iter()
        .filter(|n| state.join("mirrors").join(n).is_dir())
        .count()
}

#[test]
fn concurrent_run_processes_on_one_workspace_never_hold_more_copies_than_the_bound() {
    // The same bound across processes: the slots are locks in the state directory.
    if !sandbox_available() {
        return;
    }
    let (f, tmp) = fixture();
    f.write("busy.awk", "BEGIN { for (i = 0; i < 300000; i++) { } }\n");
    let args = json!({"program": "awk", "args": ["-f", "busy.awk", "a.txt"]}).to_string();
    let run = ["call", "run", "--workspace", s(&f.folder), "--json", &args];
    let mut calls: Vec<Child> = (0..12)
        .map(|_| {
            let mut cmd = agent_exec_cmd(&f, &tmp, &run);
            // Piped for the failure message; a call's line and stderr fit in a pipe's buffer.
            cmd.env("AGENT_EXEC_CONCURRENT_COPIES", "2")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    let mut most = 0;
    let mut failed = Vec::new();
    while !calls.is_empty() {
        most = most.max(copies(&f.state));
        calls.retain_mut(|c| match c.try_wait().unwrap() {
            Some(status) => {
                if !status.success() {
                    let mut said = String::new();
                    let _ = std::io::Read::read_to_string(c.stdout.as_mut().unwrap(), &mut said);
                    let _ = std::io::Read::read_to_string(c.stderr.as_mut().unwrap(), &mut said);
                    failed.push(format!("{status}: {said}"));
                }
                false
            }
            None => true,
        });
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(failed.is_empty(), "calls failed: {failed:#?}");
    assert!(
        most <= 3,
        "{most} copies at once; the bound is 1 persistent + 2"
    );
    assert_eq!(call_mirrors(&f.state), Vec::<String>::new());
    assert_no_survivors(f.folder.parent().unwrap());
}

#[test]
fn the_disk_bounds_and_their_defaults_are_documented_in_help() {
    let out = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let kept = host_shim::KeptLimits::default();
    for line in [
        format!(
            "AGENT_EXEC_KEPT_MIRRORS       mirrors kept for diagnosis at most (default {})",
            kept.max_count
        ),
        format!(
            "AGENT_EXEC_KEPT_MIRROR_BYTES  bytes in all of them at most (default {},",
            kept.max_bytes
        ),
        format!(
            "persistent mirror (default {}); further turns wait",
            host_shim::DEFAULT_CONCURRENT_COPIES
        ),
    ] {
        assert!(help.contains(&line), "{line:?} not in:\n{help}");
    }
}

#[test]
fn nothing_accumulates_also_for_an_unprivileged_user() {
    // As root the supervisor makes no user namespace and every file is root's; as nobody the
    // removal after a signal runs in one, the sweep meets only its own uid's files, and the
    // copy slots are nobody's locks.
    if !testkit::is_root() || std::env::var_os("AGENT_EXEC_DISK_UNPRIVILEGED").is_some() {
        eprintln!("not root, or already the unprivileged run");
        return;
    }
    let tests = [
        "disk::a_signal_to_call_mid_run_leaves_no_temp_dir_no_call_mirror_and_no_process",
        "disk::a_signal_to_call_mid_command_leaves_no_temp_dir_and_no_process",
        "disk::what_a_dead_host_left_is_swept_at_the_next_start_and_a_live_owners_is_not",
        "disk::kept_mirrors_are_bounded_by_count_oldest_dropped_first_and_listed_in_status",
        "disk::concurrent_run_processes_on_one_workspace_never_hold_more_copies_than_the_bound",
    ];
    let mut args = vec!["--exact", "--test-threads=1"];
    args.extend(tests);
    let out = testkit::run_as_nobody(&args, &[("AGENT_EXEC_DISK_UNPRIVILEGED", "1")]);
    assert!(
        out.is_empty() || out.contains(&format!("{} passed", tests.len())),
        "{out}"
    );
}

/// A caught signal during the write-back waits for it to end
/// (`proctree::defer_signal_exit`), so the user's folder is never left with the replaced
/// originals set aside as `.fsguard-*.tmp`, and every file holds the agent's version.
#[test]
fn a_signal_during_write_back_lets_it_finish_and_leaves_nothing_aside() {
    if !sandbox_available() {
        return;
    }
    const FILES: usize = 600;
    for sig in [Signal::TERM, Signal::INT, Signal::HUP] {
        let (f, tmp) = fixture();
        for i in 0..FILES {
            f.write(&format!("f{i:04}.txt"), "orig\n");
        }
        f.write(
            "all.awk",
            format!(
                "BEGIN {{ for (i = 0; i < {FILES}; i++) {{ f = sprintf(\"f%04d.txt\", i); \
                 print \"agent\" > f; close(f) }} }}\n"
            ),
        );
        let args = [
            "call",
            "run",
            "--workspace",
            s(&f.folder),
            "--json",
            &json!({"program": "awk", "args": ["-f", "all.awk", "all.awk"]}).to_string(),
        ];
        let mut child = agent_exec_bg(&f, &tmp, &args);
        // The write-back has begun: some file holds the agent's version.
        wait_until("the write-back begins", 60, || {
            (0..FILES)
                .step_by(7)
                .any(|i| f.read(&format!("f{i:04}.txt")) == "agent\n")
        });
        {
            use std::os::unix::process::ExitStatusExt;
            let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
            rustix::process::kill_process(pid, sig).unwrap();
            let status = child.wait().unwrap();
            // Dies of the signal once the write-back is done, or, when the call finished its
            // last steps first, ends as it would have.
            assert!(
                status.signal() == Some(sig.as_raw()) || status.success(),
                "{sig:?}: {status:?}"
            );
        }
        let aside: Vec<String> = names(&f.folder)
            .into_iter()
            .filter(|n| n.starts_with(".fsguard-"))
            .collect();
        assert!(aside.is_empty(), "{sig:?} left {aside:?} in the folder");
        let orig = (0..FILES)
            .filter(|i| f.read(&format!("f{i:04}.txt")) != "agent\n")
            .count();
        assert_eq!(orig, 0, "{sig:?}: the write-back was cut short");
        assert_nothing_left(&f, &tmp, sig);
    }
}

#[test]
fn a_temp_file_a_killed_write_left_is_listed_by_status_and_swept_at_the_next_start() {
    let (f, mut raw) = crate::descriptors::server();
    raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "write", "arguments": {"path": "sub/b.txt", "content": "b\n"}}}),
    );
    let reply = crate::mcp::result_of(&raw.recv()["result"]);
    assert_eq!(reply["ok"], json!(true), "{reply}");
    let pid = raw.pid();
    let server = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::kill_process(server, Signal::KILL).unwrap();
    raw.wait();
    // What a write killed between its temporary file and the rename leaves beside the
    // target; beside it, a look-alike of another PID's and a user's file.
    let left = f.folder.join(format!("sub/.fsguard-{pid}-0-0000beef.tmp"));
    std::fs::write(&left, "half").unwrap();
    let other = f.folder.join(format!("sub/.fsguard-{pid}9-0-0.tmp"));
    std::fs::write(&other, "not the dead process's").unwrap();

    let status = crate::util::agent_exec(&["--state-dir", s(&f.state), "status"], None);
    assert_eq!(status.json["tempFiles"], json!([left]), "{}", status.stdout);
    assert!(left.exists(), "status removes nothing");

    let read = crate::util::call(&f, "read", json!({"path": "a.txt"}));
    assert_eq!(read.code, 0, "{}", read.stdout);
    assert!(
        !left.exists(),
        "the next start removes the dead write's file"
    );
    assert!(
        other.exists(),
        "a name of another PID is not the dead process's"
    );
    assert_eq!(f.read("sub/b.txt"), "b\n");
    let status = crate::util::agent_exec(&["--state-dir", s(&f.state), "status"], None);
    assert_eq!(status.json["tempFiles"], json!([]), "{}", status.stdout);
}
