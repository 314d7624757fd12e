//! A server at its descriptor limit (`ulimit -n`) refuses the calls it cannot serve with
//! `AGENT_EXEC_DESCRIPTORS_EXHAUSTED` and a message naming the limit and what a call needs;
//! never as a missing kernel feature or a state directory's permissions. The calls it admits
//! succeed. Under an address-space limit (`ulimit -v`) a call that would not fit is refused
//! the same way with `AGENT_EXEC_MEMORY_EXHAUSTED`, and the server answers every request.
//! Issue's interface rule: a message says what to do.

use serde_json::{Value, json};

use crate::mcp::{Raw, result_of};
use crate::util::{Fixture, assert_no_survivors, s, sandbox_available};

const CALLS: u64 = 32;

/// Sets the server's `RLIMIT_NOFILE` (soft and hard) to `n`, as `ulimit -n n` before its start
/// would, for every descriptor it opens from now on.
fn set_nofile(pid: u32, n: u64) {
    let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::prlimit(
        Some(pid),
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit {
            current: Some(n),
            maximum: Some(n),
        },
    )
    .unwrap();
}

/// `agent-exec mcp` on a fresh folder holding `a.txt`, after the handshake.
pub(crate) fn server() -> (Fixture, Raw) {
    let f = Fixture::new();
    f.write("a.txt", "one\ntwo\n");
    let raw = Raw::start(
        &[
            "--state-dir",
            s(&f.state),
            "mcp",
            "--workspace",
            s(&f.folder),
        ],
        &f.folder,
    );
    (f, raw)
}

fn calls_at_limit(limit: u64) -> (u64, u64) {
    let (f, mut raw) = server();
    set_nofile(raw.pid(), limit);
    for id in 1..=CALLS {
        let (name, arguments) = if id % 2 == 0 {
            ("command", json!({"command": "sleep 0.3; echo ok"}))
        } else {
            ("run", json!({"program": "wc", "args": ["-l", "a.txt"]}))
        };
        raw.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}));
    }
    let (mut ok, mut refused) = (0, 0);
    for _ in 1..=CALLS {
        let reply = raw.recv();
        let line: Value = result_of(&reply["result"]);
        if line["ok"] == json!(true) {
            ok += 1;
            continue;
        }
        let message = line["message"].as_str().unwrap_or_default();
        assert_eq!(line["code"], "AGENT_EXEC_DESCRIPTORS_EXHAUSTED", "{line}");
        assert!(
            message.contains(&format!("it may have {limit} open (`ulimit -n`)")),
            "{message}"
        );
        assert!(
            message.contains(&format!(
                "a call needs about {}",
                host_shim::DESCRIPTORS_PER_CALL
            )),
            "{message}"
        );
        assert!(!message.contains("seccomp"), "{message}");
        assert!(!message.contains("permissions"), "{message}");
        refused += 1;
    }
    assert!(raw.finish().success());
    assert_no_survivors(f.folder.parent().unwrap());
    (ok, refused)
}

#[test]
fn at_ulimit_128_and_512_calls_are_served_or_refused_with_the_limit_named() {
    if !sandbox_available() {
        return;
    }
    for limit in [128, 512] {
        let (ok, refused) = calls_at_limit(limit);
        eprintln!("ulimit -n {limit}: {CALLS} calls in flight, {ok} served, {refused} refused");
        assert_eq!(ok + refused, CALLS);
    }
}

/// The address space process `pid` maps now, in bytes.
fn mapped(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmSize:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

fn set_address_space(pid: u32, limit: Option<u64>) {
    let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::prlimit(
        Some(pid),
        rustix::process::Resource::As,
        rustix::process::Rlimit {
            current: limit,
            maximum: None,
        },
    )
    .unwrap();
}

#[test]
fn near_its_address_space_limit_a_server_refuses_calls_with_the_limit_named_and_lives_on() {
    if !sandbox_available() {
        return;
    }
    let (f, mut raw) = server();
    // Room for the server as it is and a little more, not for a call.
    let limit = mapped(raw.pid()) + (8 << 20);
    set_address_space(raw.pid(), Some(limit));
    let calls = [
        ("command", json!({"command": "echo ok"})),
        ("run", json!({"program": "wc", "args": ["-l", "a.txt"]})),
        ("read", json!({"path": "a.txt"})),
    ];
    for (id, (name, arguments)) in calls.iter().enumerate() {
        raw.send(
            json!({"jsonrpc": "2.0", "id": id + 1, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}),
        );
    }
    for _ in &calls {
        let line = result_of(&raw.recv()["result"]);
        assert_eq!(line["code"], "AGENT_EXEC_MEMORY_EXHAUSTED", "{line}");
        let message = line["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("it may map {} MiB (`ulimit -v`)", limit >> 20)),
            "{message}"
        );
        assert!(message.contains("a call needs about"), "{message}");
        assert!(!message.contains("seccomp"), "{message}");
    }
    // With the limit lifted the same server serves the next call.
    set_address_space(raw.pid(), None);
    raw.send(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "read", "arguments": {"path": "a.txt"}}}));
    let line = result_of(&raw.recv()["result"]);
    assert_eq!(line["ok"], true, "{line}");
    assert!(raw.finish().success());
    assert_no_survivors(f.folder.parent().unwrap());
}

#[test]
fn a_limit_too_low_to_start_is_named_not_a_panic() {
    let f = Fixture::new();
    f.write("a.txt", "one\n");
    for tool in ["read", "command"] {
        let out = std::process::Command::new("/bin/sh")
            .args(["-c", "ulimit -n 8 && exec \"$@\"", "sh"])
            .arg(env!("CARGO_BIN_EXE_agent-exec"))
            .args(["--state-dir", s(&f.state), "call", tool, "--workspace"])
            .arg(&f.folder)
            .args(["--json", r#"{"path": "a.txt", "command": "cat a.txt"}"#])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{tool}: {stderr}");
        assert_eq!(out.status.code(), Some(1), "{tool}: {stderr}");
        let line: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(line["code"], "AGENT_EXEC_DESCRIPTORS_EXHAUSTED", "{line}");
        let message = line["message"].as_str().unwrap();
        assert!(
            message.contains("it may have 8 open (`ulimit -n`)"),
            "{message}"
        );
    }
    assert_no_survivors(f.folder.parent().unwrap());
}
