//! RUN-16: a host killed (`SIGKILL`) at any moment of a `run` write-back leaves a folder the
//! next call finds whole — all of one generation or all of the next — and no file of ours in
//! it; the same for `grant`/`revoke` and the state directory. invariant 7.
//!
//! The moment of each kill is chosen, not timed: the test waits until the write-back's journal
//! appears (even rounds: staging has begun) or holds its commit line (odd rounds: the renames
//! have begun), then sleeps a per-round delay from a fixed sequence before the `SIGKILL`.
//! Where a kill lands only changes which generation the folder holds; every assertion holds
//! for each. The counts are printed, not asserted.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::disk::names;
use crate::util::{Fixture, agent_exec, assert_no_survivors, declare_notes, s, sandbox_available};

const FILES: usize = 40;
const LINES: usize = 2000;
const ROUNDS: usize = 48;

/// Reads the generation from `f00.txt` and writes the next one into every file.
const NEXT_GENERATION: &str = "NR == 1 { g = $1 + 1 }\nEND { for (i = 0; i < 40; i++) { f = sprintf(\"f%02d.txt\", i); for (j = 0; j < 2000; j++) print g, j > f; close(f) } }\n";

fn generation(g: u64) -> String {
    (0..LINES).map(|j| format!("{g} {j}\n")).collect()
}

/// The one generation every file holds; panics when they differ.
fn whole_generation(f: &Fixture) -> u64 {
    let first = f.read("f00.txt");
    let g: u64 = first.split(' ').next().unwrap().parse().unwrap();
    for i in 0..FILES {
        let rel = format!("f{i:02}.txt");
        assert_eq!(
            f.read(&rel),
            generation(g),
            "{rel} is not of generation {g}: the folder is half one write-back, half another"
        );
    }
    g
}

/// No file of ours in the folder, no journal left in the state directory.
fn assert_nothing_of_ours(f: &Fixture) {
    let ours: Vec<String> = names(&f.folder)
        .into_iter()
        .filter(|n| n.starts_with(".agent-exec-wb-") || n.starts_with(".fsguard-"))
        .collect();
    assert!(ours.is_empty(), "left in the folder: {ours:?}");
    let journals = names(&f.state.join("writeback"));
    assert!(journals.is_empty(), "left in writeback/: {journals:?}");
}

/// A delay from a fixed sequence spread over 0–15 ms: the rounds' kills land at many points.
fn delay(round: usize) -> Duration {
    Duration::from_micros(((round * 7919) % 61) as u64 * 250)
}

fn kill9(child: &mut Child) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    child.wait().unwrap();
}

/// Starts the next-generation `run`; returns once its write-back's journal exists — with its
/// commit line, when `committed` — (`true`, still running) or the call has ended (`false`).
fn start_write_back(f: &Fixture, committed: bool) -> (Child, bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(["--state-dir", s(&f.state), "call", "run", "--workspace"])
        .arg(&f.folder)
        .args([
            "--json",
            r#"{"program": "awk", "args": ["-f", "gen.awk", "f00.txt"]}"#,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let journals = f.state.join("writeback");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen = names(&journals).iter().any(|n| {
            n.ends_with(".journal")
                && (!committed
                    || std::fs::read_to_string(journals.join(n))
                        .is_ok_and(|t| t.contains("\ncommit ")))
        });
        if seen {
            return (child, true);
        }
        if child.try_wait().unwrap().is_some() {
            return (child, false);
        }
        assert!(Instant::now() < deadline, "the run never wrote back");
        std::thread::sleep(Duration::from_micros(100));
    }
}

#[test]
fn a_host_killed_at_any_moment_of_a_write_back_leaves_the_folder_whole_after_the_next_call() {
    // RUN-16, RUN-11.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    for i in 0..FILES {
        f.write(&format!("f{i:02}.txt"), generation(0));
    }
    f.write("gen.awk", NEXT_GENERATION);
    let mut g = 0;
    let (mut killed, mut finished, mut undone, mut completed, mut mixed) = (0, 0, 0, 0, 0);
    for round in 0..ROUNDS {
        let (mut child, running) = start_write_back(&f, round % 2 == 1);
        if running {
            std::thread::sleep(delay(round));
            kill9(&mut child);
            killed += 1;
            let heads: std::collections::BTreeSet<String> = (0..FILES)
                .map(|i| {
                    f.read(&format!("f{i:02}.txt"))
                        .split(' ')
                        .next()
                        .unwrap()
                        .to_owned()
                })
                .collect();
            mixed += usize::from(heads.len() > 1);
        } else {
            completed += 1;
        }
        // A call on the folder: it finishes (or undoes) what the dead host left, and says so.
        let after = agent_exec(
            &[
                "--state-dir",
                s(&f.state),
                "call",
                "run",
                "--workspace",
                s(&f.folder),
                "--json",
                r#"{"program": "wc", "args": ["-l", "f00.txt"]}"#,
            ],
            None,
        );
        assert_eq!(after.code, 0, "{} {}", after.stdout, after.stderr);
        for line in after.json["recovered"].as_array().into_iter().flatten() {
            let line = line.as_str().unwrap();
            assert!(line.contains(s(&f.folder)), "{line}");
            if line.contains("it was finished") {
                finished += 1;
            } else {
                assert!(line.contains("before it changed anything"), "{line}");
                undone += 1;
            }
        }
        let now = whole_generation(&f);
        assert!(now == g || now == g + 1, "generation {now} after {g}");
        g = now;
        assert_nothing_of_ours(&f);
    }
    eprintln!(
        "{ROUNDS} rounds: {killed} killed mid-write-back ({finished} finished by the next call, \
         {undone} undone before their commit, the rest done before the kill landed; \
         {mixed} left the folder half old, half new until that call), {completed} ended before \
         the trigger; generation {g} at the end"
    );
    let status = agent_exec(&["--state-dir", s(&f.state), "status"], None);
    assert_eq!(status.json["writeBacks"], json!([]));
    assert_no_survivors(f.folder.parent().unwrap());
}

#[test]
fn grant_and_revoke_killed_at_any_moment_leave_a_valid_state_and_no_temp_file() {
    // RUN-16 (the state directory's own temp files), PERM-1.
    let f = Fixture::new();
    declare_notes(&f);
    let mut state_temps_swept = 0;
    for round in 0..ROUNDS {
        let verb = if round % 2 == 0 { "grant" } else { "revoke" };
        let mut child = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
            .args(["--state-dir", s(&f.state), verb, "folder", "notes"])
            .arg(&f.folder)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay(round));
        kill9(&mut child);
        state_temps_swept += names(&f.state)
            .iter()
            .filter(|n| n.starts_with(".fsguard-"))
            .count();
        // The next change of the state finds the dead writer's temp file and removes it.
        declare_notes(&f);
        let left: Vec<String> = names(&f.state)
            .into_iter()
            .filter(|n| n.starts_with(".fsguard-"))
            .collect();
        assert!(left.is_empty(), "left in the state directory: {left:?}");
        let state: serde_json::Value =
            serde_json::from_slice(&std::fs::read(f.state.join("state.json")).unwrap()).unwrap();
        assert_eq!(state["version"], 1);
    }
    eprintln!("{ROUNDS} kills of grant/revoke: {state_temps_swept} temp file(s) found and swept");
}

/// The names of ours in `dir`.
fn ours_in(dir: &std::path::Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| n.starts_with(".fsguard-") || n.starts_with(".agent-exec-wb-"))
        .collect()
}

#[test]
fn a_server_killed_during_writes_and_edits_leaves_no_temp_file_after_the_next_call() {
    // SPEC FILE-2; the temporary files of a killed `write` or `edit` (fsguard's temps).
    let f = Fixture::new();
    f.write("sub/keep.txt", "the user's\n");
    let big = "x".repeat(1000 * 1024);
    let (mut caught, mut rounds) = (0, 0);
    for round in 0..40 {
        let mut server = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
            .args(["--state-dir", s(&f.state), "mcp", "--workspace"])
            .arg(&f.folder)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut input = server.stdin.take().unwrap();
        let mut lines = vec![
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "kill", "version": "0"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ];
        for i in 0..6 {
            let file = format!("sub/f{}.txt", i % 3);
            let (name, arguments) = if i % 2 == 0 {
                ("write", json!({"path": file, "content": big}))
            } else {
                (
                    "edit",
                    json!({"path": file, "old_string": "xxxx", "new_string": "yyyy"}),
                )
            };
            lines.push(
                json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}),
            );
        }
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::io::Write::write_all(&mut input, text.as_bytes()).unwrap();
        // The kill lands when a temporary file of ours is in the folder, or after a delay.
        let start = Instant::now();
        while start.elapsed() < delay(round) + Duration::from_millis(300) {
            if !ours_in(&f.folder.join("sub")).is_empty() {
                caught += 1;
                break;
            }
            if start.elapsed() > delay(round) * 4 {
                break;
            }
        }
        kill9(&mut server);
        drop(input);
        rounds += 1;
        let after = crate::util::call(&f, "read", json!({"path": "sub/keep.txt"}));
        assert_eq!(after.code, 0, "{} {}", after.stdout, after.stderr);
        let left = ours_in(&f.folder.join("sub"));
        assert!(
            left.is_empty(),
            "round {round}: left after the next call: {left:?}"
        );
    }
    eprintln!(
        "{rounds} kills during writes and edits, {caught} with a temporary file of ours in the \
         folder at the kill; none left after the next call"
    );
    assert_eq!(f.read("sub/keep.txt"), "the user's\n");
    assert_no_survivors(f.folder.parent().unwrap());
}
