//! `agent-exec mcp` driven with raw bytes: every request gets exactly one reply —
//! malformed, invalid UTF-8, too deep, too long, out of lifecycle, wrong params, duplicate ids,
//! a last line without a newline — stderr stays human-readable, a client that stops reading
//! stops the work, a client that reads slowly cannot grow the server, and a corrupt state file
//! is reported as one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp::{Raw, has_process_with_arg, result_of, wait_for_no_process, wait_for_process};
use crate::util::{
    Fixture, agent_exec, assert_no_survivors, grant_notes_everything, s, sandbox_available,
};

fn args(f: &Fixture) -> Vec<&str> {
    vec![
        "--state-dir",
        s(&f.state),
        "mcp",
        "--workspace",
        s(&f.folder),
    ]
}

/// A `tools/call` of `command` that sleeps until stopped; `marker` (a unique number) finds its
/// process in `/proc`.
fn sleeping(id: u64, marker: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "command",
        "arguments": {"command": format!("sleep {marker}"), "timeoutMs": 300000}}})
}

/// A `tools/call` of `write`.
fn writing(id: u64, path: &str, content: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "write", "arguments": {"path": path, "content": content}}})
}

/// The JSON-RPC error of `reply`, checked to answer `id`: (code, message).
fn error_of(reply: &Value, id: Value) -> (i64, String) {
    assert_eq!(reply["id"], id, "{reply}");
    assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
    let code = reply["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {reply}"));
    (code, reply["error"]["message"].as_str().unwrap().to_owned())
}

/// What stderr may hold: the one line that says what is served.
fn assert_quiet_stderr(stderr: &str) {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "stderr: {stderr}");
    assert!(
        lines[0].starts_with("agent-exec mcp: serving "),
        "stderr: {stderr}"
    );
}

#[test]
fn every_malformed_line_gets_one_error_reply_with_its_id_when_readable() {
    let f = Fixture::new();
    f.write("a.txt", "x\n");
    let mut raw = Raw::start(&args(&f), &f.folder);
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{{"name":"read","arguments":{{"x":{}0{}}}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let cases: Vec<(Vec<u8>, Value, i64, &str)> = vec![
        (
            br#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"#.to_vec(),
            json!(10),
            -32700,
            "not valid JSON",
        ),
        (b"not json".to_vec(), Value::Null, -32700, "not valid JSON"),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/call\",\"params\":{\"name\":\"read\",\"arguments\":{\"path\":\"a\xff.txt\"}}}".to_vec(),
            json!(11),
            -32700,
            "not valid UTF-8",
        ),
        (deep.into_bytes(), json!(12), -32600, "203 levels deep; at most 127"),
        (
            br#"{"jsonrpc":"2.0","id":13,"method":"tools/call","params":"xx"}"#.to_vec(),
            json!(13),
            -32602,
            "tools/call params must be an object",
        ),
        (
            br#"{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":5}}"#.to_vec(),
            json!(14),
            -32602,
            "tools/call params.name must be a string",
        ),
        (
            br#"{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"read","arguments":[1,2]}}"#.to_vec(),
            json!(15),
            -32602,
            "tools/call params.arguments must be an object",
        ),
        (
            br#"{"jsonrpc":"2.0","id":16,"method":"tools/call"}"#.to_vec(),
            json!(16),
            -32602,
            "tools/call needs params",
        ),
        (
            br#"{"jsonrpc":"2.0","id":"s17","method":"tools/call","params":{"arguments":{}}}"#.to_vec(),
            json!("s17"),
            -32602,
            "tools/call params.name is missing",
        ),
        (
            br#"{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"rm"}}"#.to_vec(),
            json!(18),
            -32602,
            "this server has no tool \"rm\"; it serves read",
        ),
        (
            br#"{"jsonrpc":"2.0","id":19,"method":"resources/list"}"#.to_vec(),
            json!(19),
            -32601,
            "Method not found: \"resources/list\"",
        ),
        (
            br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.to_vec(),
            Value::Null,
            -32600,
            "\"id\" must be a string or an integer, not null",
        ),
        (
            br#"[{"jsonrpc":"2.0","id":20,"method":"ping"}]"#.to_vec(),
            Value::Null,
            -32600,
            "batch",
        ),
        (
            br#"{"jsonrpc":"2.0","id":21,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{}}}"#.to_vec(),
            json!(21),
            -32600,
            "initialize was already answered",
        ),
    ];
    for (line, id, code, says) in &cases {
        let mut bytes = line.clone();
        bytes.push(b'\n');
        raw.send_raw(&bytes);
        let (got, message) = error_of(&raw.recv(), id.clone());
        assert_eq!(got, *code, "{message}");
        assert!(message.contains(says), "{message}");
    }
    // Notifications, responses and blank lines are never answered; the next request is.
    raw.send_raw(
        b"\n  \r\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\",\"params\":5}\n",
    );
    raw.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":77,\"result\":{}}\n");
    raw.send(json!({"jsonrpc": "2.0", "id": 22, "method": "tools/call",
        "params": {"name": "read", "arguments": {"path": "a.txt"}}}));
    let reply = raw.recv();
    assert_eq!(reply["id"], 22, "{reply}");
    assert_eq!(result_of(&reply["result"])["content"], "x\n");
    let (status, stderr) = raw.finish_with_stderr();
    assert!(status.success(), "{status}");
    assert_quiet_stderr(&stderr);
}

#[test]
fn requests_before_initialize_and_initialize_without_params_get_json_rpc_errors() {
    let f = Fixture::new();
    let mut raw = Raw::spawn(&args(&f), &f.folder);
    raw.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let (code, message) = error_of(&raw.recv(), json!(1));
    assert_eq!(code, -32600);
    assert!(
        message.contains("tools/list before initialize; send initialize first"),
        "{message}"
    );
    raw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "read", "arguments": {"path": "a.txt"}}}));
    assert_eq!(error_of(&raw.recv(), json!(2)).0, -32600);
    // ping is allowed before initialize (MCP lifecycle).
    raw.send(json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    assert_eq!(raw.recv(), json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
    for (params, says) in [
        (
            None,
            "initialize needs params {\"protocolVersion\", \"capabilities\", \"clientInfo\"}",
        ),
        (Some(json!("x")), "initialize params must be an object"),
        (
            Some(json!({"capabilities": {}, "clientInfo": {}})),
            "initialize params.protocolVersion is missing",
        ),
        (
            Some(json!({"protocolVersion": 2025, "capabilities": {}, "clientInfo": {}})),
            "params.protocolVersion must be a string",
        ),
        (
            Some(json!({"protocolVersion": "2025-06-18", "clientInfo": {}})),
            "initialize params.capabilities is missing",
        ),
        (
            Some(json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": []})),
            "initialize params.clientInfo must be an object, not an array",
        ),
    ] {
        let mut msg = json!({"jsonrpc": "2.0", "id": 4, "method": "initialize"});
        if let Some(p) = params {
            msg["params"] = p;
        }
        raw.send(msg);
        let (code, message) = error_of(&raw.recv(), json!(4));
        assert_eq!(code, -32602, "{message}");
        assert!(message.starts_with("Invalid params: "), "{message}");
        assert!(message.contains(says), "{message}");
    }
    // A version we do not speak is answered with the newest we do (the spec's rule).
    raw.send(json!({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {
        "protocolVersion": "2099-01-01", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}));
    let init = raw.recv();
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    // Logging: the background tasks' events (the `mcp` module docs).
    assert_eq!(
        init["result"]["capabilities"],
        json!({"tools": {}, "logging": {}}),
        "{init}"
    );
    raw.send(json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}));
    // read, write, edit, grep, run, command, run_command and the three background tools.
    assert_eq!(raw.recv()["result"]["tools"].as_array().unwrap().len(), 10);
    let (status, stderr) = raw.finish_with_stderr();
    assert!(status.success(), "{status}");
    assert_quiet_stderr(&stderr);
}

#[test]
fn a_line_over_16_mib_is_answered_with_its_id_and_the_connection_keeps_serving() {
    let f = Fixture::new();
    let mut raw = Raw::start(&args(&f), &f.folder);
    let mut line = br#"{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"write","arguments":{"path":"big.txt","content":""#.to_vec();
    line.resize(16 * 1024 * 1024 + 100, b'a');
    line.extend_from_slice(b"\"}}}\n");
    // The reply comes while the line is still being sent: write from another thread.
    let mut stdin = raw.take_stdin();
    let writer = std::thread::spawn(move || {
        std::io::Write::write_all(&mut stdin, &line).unwrap();
        stdin
    });
    let (code, message) = error_of(&raw.recv(), json!(31));
    assert_eq!(code, -32600);
    assert!(message.contains("longer than 16777216 bytes"), "{message}");
    raw.give_stdin(writer.join().unwrap());
    raw.send(json!({"jsonrpc": "2.0", "id": 32, "method": "ping"}));
    assert_eq!(raw.recv()["id"], 32);
    assert!(raw.finish().success());
    assert!(
        !f.folder.join("big.txt").exists(),
        "the skipped request ran"
    );
}

#[test]
fn a_final_line_without_newline_is_served_and_answered_before_exit() {
    let f = Fixture::new();
    let mut raw = Raw::start(&args(&f), &f.folder);
    raw.send_raw(
        br#"{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"write","arguments":{"path":"last.txt","content":"ran"}}}"#,
    );
    raw.close_stdin();
    let reply = raw.recv();
    assert_eq!(reply["id"], 41, "{reply}");
    assert_eq!(result_of(&reply["result"])["ok"], true, "{reply}");
    assert!(raw.finish().success());
    assert_eq!(f.read("last.txt"), "ran");
}

#[test]
fn end_of_input_waits_for_the_running_call_and_answers_it() {
    // Closing stdin ends the session, not the calls already sent.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let mut raw = Raw::start(&args(&f), &f.folder);
    raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "command", "arguments": {"command": "sleep 0.5; echo done"}}}),
    );
    raw.close_stdin();
    let reply = raw.recv();
    assert_eq!(reply["id"], 1, "{reply}");
    assert_eq!(result_of(&reply["result"])["stdout"], "done\n", "{reply}");
    assert!(raw.finish().success());
    assert_no_survivors(&f.folder);
}

#[test]
fn a_duplicate_in_flight_id_is_refused_and_runs_nothing_while_the_first_gets_its_reply() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let mut raw = Raw::start(&args(&f), &f.folder);
    let call = |command: &str| {
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "command", "arguments": {"command": command}}})
    };
    raw.send(call("sleep 1; echo first > first.txt; echo first"));
    raw.send(call("echo second > second.txt"));
    raw.send(writing(5, "third.txt", "third"));
    for _ in 0..2 {
        let (code, message) = error_of(&raw.recv(), json!(5));
        assert_eq!(code, -32600, "{message}");
        assert!(message.contains("id 5 is still in flight"), "{message}");
    }
    let reply = raw.recv();
    assert_eq!(reply["id"], 5, "{reply}");
    assert_eq!(result_of(&reply["result"])["stdout"], "first\n", "{reply}");
    // Answered, the id may be used again.
    raw.send(json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}));
    assert_eq!(raw.recv()["result"], json!({}));
    assert!(raw.finish().success());
    assert_eq!(f.read("first.txt"), "first\n");
    assert!(!f.folder.join("second.txt").exists(), "the duplicate ran");
    assert!(!f.folder.join("third.txt").exists(), "the duplicate ran");
    assert_no_survivors(&f.folder);
}

#[test]
fn a_client_that_stops_reading_stops_the_running_calls_and_nothing_more_starts() {
    // CMD-6, RUN-10; invariant 4. Only stdout is closed: stdin stays open.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let mut raw = Raw::start(&args(&f), &f.folder);
    let marker = "141.421";
    for id in 1..=3 {
        raw.send(sleeping(id, marker));
    }
    wait_for_process(marker);
    raw.stop_reading();
    wait_for_no_process(marker);
    // The server is stopping or gone; a request now must not run.
    raw.try_send(&writing(9, "late.txt", "late"));
    let status = raw.wait();
    assert!(status.success(), "{status}");
    assert!(
        !f.folder.join("late.txt").exists(),
        "a call started after the hang-up"
    );
    assert_no_survivors(&f.folder);
}

#[test]
fn the_33rd_call_in_flight_is_refused_as_busy_and_runs_nothing() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let mut raw = Raw::start(&args(&f), &f.folder);
    let marker = "173.205";
    for id in 1..=32 {
        raw.send(sleeping(id, marker));
    }
    raw.send(writing(33, "busy.txt", "x"));
    let (code, message) = error_of(&raw.recv(), json!(33));
    assert_eq!(code, -32000, "{message}");
    assert!(
        message.contains("already runs 32 tools/call requests; nothing was started"),
        "{message}"
    );
    assert!(!f.folder.join("busy.txt").exists());
    // Cancelled calls get no reply and free their slots once stopped.
    for id in 1..=32 {
        raw.send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "test"}}),
        );
    }
    wait_for_no_process(marker);
    raw.send(json!({"jsonrpc": "2.0", "id": 34, "method": "ping"}));
    assert_eq!(raw.recv()["id"], 34);
    assert!(raw.finish().success());
    assert_no_survivors(&f.folder);
}

/// The server's peak resident memory so far, in KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_client_that_does_not_read_cannot_grow_the_server() {
    // Calls each printing 64 KiB of control characters, nothing read. Holding every reply
    // would take ~470 KB each (141 MB at this N, 473 MB at 1000), so the server stops
    // reading once 4 MiB of replies wait, and each request is answered exactly once when the
    // client finally reads.
    if !sandbox_available() {
        return;
    }
    const N: u64 = 300;
    let f = Fixture::new();
    let mut raw = Raw::start(&args(&f), &f.folder);
    // Padded with a shell comment so that the requests are more than the pipe to the server
    // holds: whether it stops reading shows.
    let command: &'static str = format!(
        "head -c 65536 /dev/zero | tr '\\0' '\\1' # {}",
        "p".repeat(2048)
    )
    .leak();
    let mut stdin = raw.take_stdin();
    let sent = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&sent);
    let writer = std::thread::spawn(move || {
        for id in 1..=N {
            let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "command", "arguments": {"command": command}}});
            std::io::Write::write_all(&mut stdin, format!("{msg}\n").as_bytes()).unwrap();
            counter.fetch_add(1, Ordering::SeqCst);
        }
        stdin
    });
    // Let the server go as far as it goes: until no request is taken and no call runs for a
    // second (the sandbox's `sh -c` carries the command as its argument).
    let deadline = Instant::now() + Raw::PATIENCE;
    let mut quiet_since = (u64::MAX, Instant::now());
    while Instant::now() < deadline {
        let now = sent.load(Ordering::SeqCst);
        if now != quiet_since.0 || has_process_with_arg(command) {
            quiet_since = (now, Instant::now());
        } else if quiet_since.1.elapsed() > Duration::from_secs(1) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let peak = peak_rss_kib(raw.pid());
    assert!(
        quiet_since.0 < N,
        "the server took all {N} requests while nobody read a reply"
    );
    let mut seen = vec![0u32; N as usize + 1];
    let mut ran = 0;
    for _ in 0..N {
        let reply = raw.recv();
        seen[reply["id"].as_u64().unwrap() as usize] += 1;
        if reply.get("result").is_some() {
            let out = result_of(&reply["result"]);
            assert_eq!(out["ok"], true, "{out}");
            // The output once, as text, and whole (the drain keeps what is in the pipe when
            // its grace ends: before, under load, 16 KiB of it came back as complete).
            let stdout = out["stdout"].as_str().unwrap();
            assert_eq!(stdout.len(), 65536, "{out}");
            assert!(stdout.bytes().all(|b| b == 1));
            ran += 1;
        } else {
            assert_eq!(reply["error"]["code"], -32000, "{reply}");
        }
    }
    raw.give_stdin(writer.join().unwrap());
    assert!(
        seen[1..].iter().all(|&n| n == 1),
        "a request was not answered exactly once"
    );
    assert!(ran >= 32, "only {ran} calls ran");
    assert!(peak < 100 * 1024, "the server grew to {peak} KiB");
    assert!(raw.finish().success());
    assert_no_survivors(&f.folder);
}

#[test]
fn a_corrupt_state_file_is_reported_as_invalid_with_the_code_the_cli_uses() {
    // Not "plugin notes is not installed" / "a permission was revoked".
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("a.txt", "x\n");
    grant_notes_everything(&f);
    let mut args = args(&f);
    args.extend(["--plugin", "notes"]);
    let mut raw = Raw::start(&args, &f.folder);
    let marker = "223.606";
    raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "command", "arguments": {"command": format!("sleep {marker}")}}}),
    );
    wait_for_process(marker);
    std::fs::write(f.state.join("state.json"), "{ not json").unwrap();
    let cli = agent_exec(
        &[
            "--state-dir",
            s(&f.state),
            "call",
            "read",
            "--plugin",
            "notes",
            "--workspace",
            s(&f.folder),
            "--json",
            r#"{"path": "a.txt"}"#,
        ],
        None,
    );
    assert_eq!(cli.json["code"], "AGENT_EXEC_IO_FAILED", "{}", cli.stdout);
    let cli_says = cli.json["message"].as_str().unwrap();
    let prefix = &cli_says[..cli_says.find(" is not valid").unwrap() + " is not valid".len()];
    // The call in flight, and a later one.
    let reply = raw.recv();
    assert_eq!(reply["id"], 1, "{reply}");
    raw.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "read", "arguments": {"path": "a.txt"}}}),
    );
    let later = raw.recv();
    for reply in [reply, later] {
        assert_eq!(reply["result"]["isError"], true, "{reply}");
        let err = result_of(&reply["result"]);
        assert_eq!(err["code"], cli.json["code"], "{err}");
        let message = err["message"].as_str().unwrap();
        assert!(message.starts_with(prefix), "{message} / {cli_says}");
    }
    assert!(!has_process_with_arg(marker), "sleep survived");
    assert!(raw.finish().success());
    assert_no_survivors(f.folder.parent().unwrap());
}
