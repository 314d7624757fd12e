//! Kept mirrors on a small state disk: they leave room for the next mirror, a `run` that does
//! not fit drops its own folder's kept mirrors first, and one that still does not fit names
//! what takes the room. The state directory is a 800 KiB tmpfs in a user and mount namespace
//! of its own (`unshare -Urm`). RUN-11; the interface rule: a message says what to do.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::util::{Fixture, assert_no_survivors, s, sandbox_available};

/// Runs `calls` (each `agent-exec` argument lists after `--state-dir <state>`) in one shell
/// whose state directory is a fresh 800 KiB tmpfs; their stdout lines, or `None` when this
/// machine cannot make the namespace.
fn on_small_state_disk(f: &Fixture, calls: &[Vec<&str>]) -> Option<Vec<Value>> {
    let bin = env!("CARGO_BIN_EXE_agent-exec");
    let mut script = format!(
        "mount -t tmpfs -o size=800k,mode=700 tmpfs '{}' || exit 99\n",
        s(&f.state)
    );
    for call in calls {
        let args: Vec<String> = call.iter().map(|a| format!("'{a}'")).collect();
        script.push_str(&format!(
            "'{bin}' --state-dir '{}' {} 2>/dev/null\n",
            s(&f.state),
            args.join(" ")
        ));
    }
    std::fs::create_dir_all(&f.state).unwrap();
    let out = Command::new("unshare")
        .args(["-Urm", "sh", "-c", &script])
        .output()
        .ok()?;
    if out.status.code() == Some(99) || (!out.status.success() && out.stdout.is_empty()) {
        eprintln!(
            "skipped: cannot mount a tmpfs in a user namespace here: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    let text = String::from_utf8(out.stdout).unwrap();
    Some(
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    )
}

fn run<'a>(folder: &'a Path, json: &'static str) -> Vec<&'a str> {
    vec!["call", "run", "--workspace", s(folder), "--json", json]
}

const FAILING: &str = r#"{"program": "awk", "args": ["-f", "bad.awk", "in.txt"]}"#;
const COUNT: &str = r#"{"program": "wc", "args": ["-l", "in.txt"]}"#;

fn random(n: usize) -> Vec<u8> {
    // Incompressible is not needed (tmpfs does not compress); distinct bytes are enough.
    (0..n).map(|i| (i * 7919 % 251) as u8).collect()
}

#[test]
fn kept_mirrors_leave_room_for_the_next_run_and_a_run_that_cannot_fit_names_them() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("big.bin", random(300_000));
    f.write("in.txt", "a\n");
    f.write("bad.awk", "{ print > \"diag.txt\" } END { exit 3 }\n");
    let other = f.folder.parent().unwrap().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("big.bin"), random(450_000)).unwrap();
    std::fs::write(other.join("in.txt"), "b\n").unwrap();

    let calls = vec![
        run(&f.folder, FAILING),
        run(&f.folder, FAILING),
        run(&f.folder, FAILING),
        run(&f.folder, COUNT),
        run(&other, COUNT),
        vec!["status"],
    ];
    let Some(lines) = on_small_state_disk(&f, &calls) else {
        return;
    };
    assert_eq!(lines.len(), calls.len(), "{lines:?}");
    // Three failed runs, each kept, and each later run still found room for its mirror.
    for line in &lines[..3] {
        assert_eq!(line["code"], "AGENT_EXEC_FAILED", "{line}");
        assert_eq!(line["mirror"]["kept"], true, "{line}");
    }
    assert_eq!(lines[3]["ok"], true, "{}", lines[3]);
    // The other folder's copy fits only without what is kept: the message names it.
    let message = lines[4]["message"].as_str().unwrap();
    assert_eq!(lines[4]["code"], "AGENT_EXEC_IO_FAILED", "{}", lines[4]);
    assert!(message.contains("No space left on device"), "{message}");
    assert!(message.contains("its kept mirrors take"), "{message}");
    assert!(
        message.contains("`agent-exec status` lists them"),
        "{message}"
    );
    let kept = lines[5]["keptMirrors"].as_array().unwrap();
    assert!(!kept.is_empty());
    for k in kept {
        assert!(message.contains(k["path"].as_str().unwrap()), "{message}");
    }
    assert_no_survivors(f.folder.parent().unwrap());
}

#[test]
fn a_grant_on_a_full_state_disk_says_the_disk_is_full_not_permissions() {
    let f = Fixture::new();
    let bin = env!("CARGO_BIN_EXE_agent-exec");
    let state = s(&f.state);
    let script = format!(
        "mount -t tmpfs -o size=64k,mode=700 tmpfs '{state}' || exit 99\n\
         '{bin}' --state-dir '{state}' grant plugin notes --package notes@1 \
         --declare local.terminal.exec@1 2>/dev/null\n\
         head -c 1048576 /dev/zero > '{state}/fill' 2>/dev/null\n\
         '{bin}' --state-dir '{state}' grant all notes 2>/dev/null\n"
    );
    std::fs::create_dir_all(&f.state).unwrap();
    let Ok(out) = Command::new("unshare")
        .args(["-Urm", "sh", "-c", &script])
        .output()
    else {
        eprintln!("skipped: no unshare here");
        return;
    };
    if out.status.code() == Some(99) {
        eprintln!(
            "skipped: cannot mount a tmpfs in a user namespace here: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["ok"], true, "{}", lines[0]);
    assert_eq!(lines[1]["code"], "AGENT_EXEC_IO_FAILED", "{}", lines[1]);
    let message = lines[1]["message"].as_str().unwrap();
    assert!(message.contains("No space left on device"), "{message}");
    assert!(message.contains("disk is full"), "{message}");
    assert!(!message.contains("permissions"), "{message}");
}
