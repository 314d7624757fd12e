//! `agent-exec mcp` end to end: a real MCP client nobody here wrote (the Python `mcp` package
//! from PyPI, driven by `mcp_client.py`) lists the tools with their schemas and calls `read`,
//! `run` and `command`; raw JSON-RPC lines pin cancellation (no survivors) and the CLI's refusals.
//!
//! The Python client comes from `$AGENT_EXEC_MCP_PYTHON`, else `<target>/mcp-venv/bin/python`
//! (`.ci/run` makes it: `python3 -m venv target/mcp-venv && target/mcp-venv/bin/pip install mcp`),
//! else the test makes that venv itself; when `mcp` still cannot be imported it skips loudly.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{
    Fixture, agent_exec, assert_no_survivors, grant, grant_notes_everything, s, sandbox_available,
};

const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/mcp_client.py");

/// The cargo target directory (`<target>/<profile>/agent-exec`).
pub(crate) fn target_dir() -> PathBuf {
    let exe = Path::new(env!("CARGO_BIN_EXE_agent-exec"));
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

fn imports_mcp(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import mcp.client.stdio"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `cmd` to completion within `limit`, killing it past that.
fn run_bounded(cmd: &mut Command, limit: Duration) -> bool {
    let Ok(mut child) = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn() else {
        return false;
    };
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.success(),
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(100)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
        }
    }
}

/// A Python that imports the `mcp` package, installing it into `<target>/mcp-venv` if needed.
pub(crate) fn mcp_python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AGENT_EXEC_MCP_PYTHON") {
        let p = PathBuf::from(p);
        if imports_mcp(&p) {
            return Some(p);
        }
        eprintln!(
            "skipped: AGENT_EXEC_MCP_PYTHON={} cannot import mcp",
            p.display()
        );
        return None;
    }
    let venv = target_dir().join("mcp-venv");
    let python = venv.join("bin/python");
    if imports_mcp(&python) {
        return Some(python);
    }
    let made = run_bounded(
        Command::new("python3").args(["-m", "venv", s(&venv)]),
        Duration::from_secs(120),
    ) && run_bounded(
        Command::new(venv.join("bin/pip")).args(["install", "-q", "mcp"]),
        Duration::from_secs(300),
    );
    if made && imports_mcp(&python) {
        return Some(python);
    }
    eprintln!(
        "skipped: the Python MCP client is not available: could not make {} with `pip install \
         mcp` (needs python3 with venv and PyPI); install it, or point AGENT_EXEC_MCP_PYTHON at \
         a python that imports mcp",
        venv.display()
    );
    None
}

/// Runs the Python client against `agent-exec <args>` (cwd: the fixture's folder, so a server
/// that lingered would count as a survivor) and returns what it printed.
fn python_client(python: &Path, cwd: &Path, args: &[&str], calls: Value) -> Value {
    python_client_answering(python, cwd, args, calls, Value::Null)
}

/// [`python_client`] with a client that declares elicitation and answers the server's
/// elicitations in order from `elicitation` (`"accept"`, `"accept-no"`, `"decline"`,
/// `"cancel"`); `null` declares no elicitation capability.
fn python_client_answering(
    python: &Path,
    cwd: &Path,
    args: &[&str],
    calls: Value,
    elicitation: Value,
) -> Value {
    let plan = json!({
        "command": env!("CARGO_BIN_EXE_agent-exec"),
        "args": args,
        "calls": calls,
        "elicitation": elicitation,
    });
    let out = Command::new(python)
        .arg(CLIENT)
        .arg(plan.to_string())
        .current_dir(cwd)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the MCP client failed: {}\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\nstderr: {stderr}"))
}

/// The tool's JSON result as the agent reads it: the one text block, the output carried once
/// (no `structuredContent` copy; see host_shim::McpServer).
pub(crate) fn result_of(call: &Value) -> Value {
    let text = call["content"][0]["text"].as_str().unwrap();
    let value: Value = serde_json::from_str(text).unwrap();
    assert_eq!(call["content"].as_array().unwrap().len(), 1, "{call}");
    assert_eq!(call.get("structuredContent"), None, "{call}");
    value
}

#[test]
fn python_mcp_client_lists_the_tools_and_calls_read_run_and_command() {
    // PERM-4 (the tools offered), RUN-11 (run's mirror written back per call), CMD-1,
    // CMD-3 (no approval channel: extra paths refused), TS-1 (callId per request).
    if !sandbox_available() {
        return;
    }
    let Some(python) = mcp_python() else {
        return;
    };
    let f = Fixture::new();
    f.write("b.csv", "x\ny\n");
    f.write("a.csv", "1\n2\n3\n");
    f.write(
        "prog.awk",
        "{ n += $1 } END { print n > \"sum.txt\"; print n }\n",
    );
    let calls = json!([
        ["read", {"path": "a.csv"}],
        ["run", {"program": "awk", "args": ["-f", "prog.awk", "a.csv"]}],
        ["command", {"command": "wc -l *.csv | sort -n"}],
        ["read", {"path": "sum.txt"}],
        ["read", {"path": "../etc/passwd"}],
        ["run", {"program": "sh", "args": ["-c", "true"]}],
        ["command", {"command": "cat /etc/hostname", "extraPaths": [{"path": "/etc", "write": false}]}],
    ]);
    let args = [
        "--state-dir",
        s(&f.state),
        "mcp",
        "--workspace",
        s(&f.folder),
    ];
    let out = python_client(&python, &f.folder, &args, calls);

    assert_eq!(out["serverInfo"]["name"], "agent-exec");
    let tools = out["tools"].as_object().unwrap();
    let mut names: Vec<&str> = tools.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "background_cancel",
            "background_command",
            "background_status",
            "command",
            "edit",
            "grep",
            "read",
            "run",
            "run_command",
            "write"
        ]
    );
    let registry = host_shim::Registry::default();
    for (name, tool) in tools {
        let handler = registry
            .get(host_shim::ToolName::from_name(name).unwrap())
            .unwrap();
        assert_eq!(tool["inputSchema"], handler.input_schema(), "{name}");
        assert_eq!(tool["inputSchema"]["type"], "object", "{name}");
        assert!(tool["description"].as_str().unwrap().len() > 40, "{name}");
    }

    let calls = out["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 7);
    // read: the file tool's result with ok merged in.
    assert_eq!(calls[0]["isError"], false);
    assert_eq!(
        result_of(&calls[0]),
        json!({"ok": true, "content": "1\n2\n3\n", "totalLines": 3, "truncated": false})
    );
    // run: awk on the mirror, whose new file is written back after the successful call.
    assert_eq!(calls[1]["isError"], false, "{}", calls[1]);
    let run = result_of(&calls[1]);
    assert_eq!(run["ok"], true);
    assert_eq!(run["program"], "awk");
    assert_eq!(run["stdout"], "6\n");
    assert_eq!(run["mirror"]["writtenBack"], true);
    assert_eq!(run["mirror"]["kept"], false);
    assert_eq!(run["mirror"]["applied"], json!(["sum.txt"]));
    assert_eq!(f.read("sum.txt"), "6\n");
    // command: a shell pipeline in the folder.
    assert_eq!(calls[2]["isError"], false, "{}", calls[2]);
    let command = result_of(&calls[2]);
    assert_eq!(command["stdout"], " 2 b.csv\n 3 a.csv\n 5 total\n");
    assert_eq!(command["status"], "exited");
    assert_eq!(command["exitCode"], 0);
    // The written-back file is there for the next call.
    assert_eq!(result_of(&calls[3])["content"], "6\n");
    // Failures are MCP tool errors carrying the error object.
    for (i, code) in [
        (4, "AGENT_EXEC_PATH_INVALID"),
        (5, "AGENT_EXEC_PROGRAM_UNSUPPORTED"),
        (6, "AGENT_PERMISSION_DENIED"),
    ] {
        assert_eq!(calls[i]["isError"], true, "{}", calls[i]);
        let err = result_of(&calls[i]);
        assert_eq!(err["ok"], false, "{err}");
        assert_eq!(err["code"], code, "{err}");
        assert!(err["message"].as_str().unwrap().len() > 20, "{err}");
    }
    // No mirror kept for diagnosis: a refused run ran nothing, a successful one was written
    // back. Only the workspace's persistent mirror (with its lock and record) remains.
    let mirrors = f.state.join("mirrors");
    let left: Vec<_> = std::fs::read_dir(&mirrors)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.len() <= 3, "mirrors left: {left:?}");
    assert!(
        left.iter().all(|p| !p.to_string_lossy().contains("-kept-")),
        "mirrors left: {left:?}"
    );
    // The whole fixture: the folder, and the mirrors `run` worked in.
    assert_no_survivors(f.folder.parent().unwrap());
}

/// A raw MCP session over the binary's stdio: bytes and JSON-RPC lines, no SDK. Replies are
/// awaited for at most [`Raw::PATIENCE`] (a liveness bound, so a missing reply fails the test
/// instead of hanging it); stderr is collected.
pub(crate) struct Raw {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: Option<std::process::ChildStdout>,
    buf: Vec<u8>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Raw {
    pub(crate) const PATIENCE: Duration = Duration::from_secs(120);

    /// The server, not initialized yet.
    pub(crate) fn spawn(args: &[&str], cwd: &Path) -> Raw {
        Raw::spawn_with_env(args, cwd, &[])
    }

    /// [`Raw::spawn`] with these environment variables set (e.g. a temporary `HOME`).
    pub(crate) fn spawn_with_env(args: &[&str], cwd: &Path, env: &[(&str, &Path)]) -> Raw {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
            .args(args)
            .envs(env.iter().copied())
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut text);
            text
        });
        Raw {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            child,
            buf: Vec::new(),
            stderr: Some(stderr),
        }
    }

    /// The server, after the MCP handshake.
    pub(crate) fn start(args: &[&str], cwd: &Path) -> Raw {
        Raw::start_with_env(args, cwd, &[])
    }

    /// [`Raw::start`] with these environment variables set.
    pub(crate) fn start_with_env(args: &[&str], cwd: &Path, env: &[(&str, &Path)]) -> Raw {
        let mut raw = Raw::spawn_with_env(args, cwd, env);
        raw.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "0"}}}),
        );
        let init = raw.recv();
        assert_eq!(init["id"], 0, "{init}");
        assert_eq!(init["result"]["serverInfo"]["name"], "agent-exec", "{init}");
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        raw
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn send(&mut self, msg: Value) {
        self.send_raw(format!("{msg}\n").as_bytes());
    }

    pub(crate) fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// Sends `msg` if the server still reads (a write to a server that is gone fails
    /// quietly).
    pub(crate) fn try_send(&mut self, msg: &Value) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = stdin.write_all(format!("{msg}\n").as_bytes());
            let _ = stdin.flush();
        }
    }

    /// Stdin, to write from another thread (the server may stop reading while replies wait).
    pub(crate) fn take_stdin(&mut self) -> std::process::ChildStdin {
        self.stdin.take().unwrap()
    }

    pub(crate) fn give_stdin(&mut self, stdin: std::process::ChildStdin) {
        self.stdin = Some(stdin);
    }

    /// Ends the input: the server answers what it read, then exits.
    pub(crate) fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// The next reply line, parsed.
    pub(crate) fn recv(&mut self) -> Value {
        let line = self.recv_line();
        serde_json::from_slice(&line)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&line)))
    }

    pub(crate) fn recv_line(&mut self) -> Vec<u8> {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let deadline = Instant::now() + Raw::PATIENCE;
        loop {
            if let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                let line = self.buf.drain(..=end).collect::<Vec<u8>>();
                return line[..end].to_vec();
            }
            let stdout = self.stdout.as_mut().unwrap();
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no reply within {:?}", Raw::PATIENCE);
            let timeout = Timespec {
                tv_sec: left.as_secs() as i64,
                tv_nsec: 0,
            };
            let mut fds = [PollFd::new(&*stdout, PollFlags::IN)];
            if poll(&mut fds, Some(&timeout)).unwrap() == 0 {
                continue;
            }
            let mut chunk = [0u8; 65536];
            let n = std::io::Read::read(stdout, &mut chunk).unwrap();
            assert!(n > 0, "the server closed stdout while a reply was awaited");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Closes stdin and waits for the server to exit; its status and stderr.
    pub(crate) fn finish_with_stderr(mut self) -> (std::process::ExitStatus, String) {
        drop(self.stdin.take());
        let status = self.wait();
        let stderr = self.stderr.take().unwrap().join().unwrap();
        (status, stderr)
    }

    /// Closes stdin and waits for the server to exit.
    pub(crate) fn finish(self) -> std::process::ExitStatus {
        self.finish_with_stderr().0
    }

    /// Closes stdout only: the client stops reading, as a client that died or gave up does.
    pub(crate) fn stop_reading(&mut self) {
        drop(self.stdout.take());
    }

    /// Waits (within [`Raw::PATIENCE`]) for the server to exit.
    pub(crate) fn wait(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Raw::PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the server did not exit within {:?}", Raw::PATIENCE);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

pub(crate) fn has_process_with_arg(needle: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == needle.as_bytes()))
    })
}

/// Waits (within [`Raw::PATIENCE`]) until a process with `marker` among its arguments runs.
pub(crate) fn wait_for_process(marker: &str) {
    let deadline = Instant::now() + Raw::PATIENCE;
    while !has_process_with_arg(marker) {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (within [`Raw::PATIENCE`]) until no process with `marker` among its arguments runs.
pub(crate) fn wait_for_no_process(marker: &str) {
    let deadline = Instant::now() + Raw::PATIENCE;
    while has_process_with_arg(marker) {
        assert!(
            Instant::now() < deadline,
            "processes with {marker} survived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn cancelling_a_running_call_stops_its_processes_and_the_server_keeps_serving() {
    // CMD-6, RUN-10: notifications/cancelled drops the call, which stops the tree.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("a.txt", "x\n");
    let args = [
        "--state-dir",
        s(&f.state),
        "mcp",
        "--workspace",
        s(&f.folder),
    ];
    let mut raw = Raw::start(&args, &f.folder);
    // A unique sleep length marks this test's processes in /proc.
    let marker = "271.828";
    raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "command", "arguments": {"command": format!("sleep {marker} & sleep {marker}")}}}),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !has_process_with_arg(marker) {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    raw.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "test"}}),
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while has_process_with_arg(marker) {
        assert!(
            Instant::now() < deadline,
            "the cancelled command's processes survived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The server still answers, and the cancelled request got no response before this one.
    raw.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "read", "arguments": {"path": "a.txt"}}}),
    );
    let reply = raw.recv();
    assert_eq!(reply["id"], 2, "{reply}");
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    assert_eq!(result_of(&reply["result"])["content"], "x\n");
    // An unknown tool is a protocol error, not a tool result.
    raw.send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "rm", "arguments": {}}}),
    );
    let reply = raw.recv();
    assert_eq!(reply["id"], 3, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no tool \"rm\""),
        "{reply}"
    );
    assert!(raw.finish().success());
    assert_no_survivors(&f.folder);
}

#[test]
fn hanging_up_during_a_call_stops_its_processes() {
    // CMD-6, RUN-10: a client that goes away (both pipes closed) ends every call in the
    // connection; nothing outlives the server.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let args = [
        "--state-dir",
        s(&f.state),
        "mcp",
        "--workspace",
        s(&f.folder),
    ];
    let mut raw = Raw::start(&args, &f.folder);
    let marker = "314.159";
    raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "command", "arguments": {"command": format!("sleep {marker}"), "timeoutMs": 300000}}}),
    );
    wait_for_process(marker);
    raw.stop_reading();
    let status = raw.finish();
    assert!(status.success(), "{status}");
    assert!(!has_process_with_arg(marker), "sleep survived the server");
    assert_no_survivors(&f.folder);
}

#[test]
fn a_configuration_serves_only_the_tools_its_workspace_can_run() {
    // PERM-4, PERM-3, CMD-1: run needs mounted; the reason goes to stderr, stdout stays
    // the protocol channel (empty here: the client hangs up before the handshake).
    let f = Fixture::new();
    let config = json!({
        "schemaVersion": 2, "systemPrompt": "notes",
        "tools": [{"ref": "read"}, {"ref": "run"}, {"ref": "command"}, {"ref": "run_command"}],
        "workspace": {"kind": "direct", "path": f.folder},
        "memory": "session", "mode": "yolo",
    });
    let file = f.tmp.path().join("agent.json");
    std::fs::write(&file, config.to_string()).unwrap();
    // The client hangs up before the handshake: nothing to answer, a clean exit.
    let out = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(["--state-dir", s(&f.state), "mcp", "--config", s(&file)])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert!(
        stderr.contains("run is not served: run needs a mounted workspace, this one is direct"),
        "{stderr}"
    );
    assert!(
        stderr.contains("serving read, command, run_command on stdio"),
        "{stderr}"
    );
    assert!(out.status.success(), "{}: {stderr}", out.status);
    // In a mounted workspace run_command is not served, and says why.
    let config = json!({
        "schemaVersion": 2, "systemPrompt": "notes",
        "tools": [{"ref": "run"}, {"ref": "run_command"}],
        "workspace": {"kind": "mounted", "path": f.folder},
        "memory": "session", "mode": "yolo",
    });
    std::fs::write(&file, config.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(["--state-dir", s(&f.state), "mcp", "--config", s(&file)])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "run_command is not served: run_command needs a direct workspace, this one is mounted"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("serving run on stdio"), "{stderr}");
}

#[test]
fn python_mcp_client_confirms_run_command_by_elicitation_accept_runs_decline_does_not() {
    // Confirmations go to an MCP client that declared elicitation; only `accept`
    // with `run: true` runs; an allowlist hit (RC-9) asks nothing.
    if !sandbox_available() {
        return;
    }
    let Some(python) = mcp_python() else {
        return;
    };
    let f = Fixture::new();
    let calls = json!([
        ["run_command", {"argv": ["touch", "accepted.txt"]}],
        ["run_command", {"argv": ["touch", "declined.txt"]}],
        ["run_command", {"argv": ["touch", "unticked.txt"]}],
        ["run_command", {"argv": ["touch", "cancelled.txt"]}],
        ["run_command", {"argv": ["ls"]}],
    ]);
    let args = [
        "--state-dir",
        s(&f.state),
        "mcp",
        "--workspace",
        s(&f.folder),
    ];
    let answers = json!(["accept", "decline", "accept-no", "cancel"]);
    let out = python_client_answering(&python, &f.folder, &args, calls, answers);
    let asked = out["elicitations"].as_array().unwrap();
    assert_eq!(asked.len(), 4, "{out}");
    for (question, label) in asked
        .iter()
        .zip(["accepted", "declined", "unticked", "cancelled"])
    {
        let message = question["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("touch {label}.txt")),
            "{question}"
        );
        assert_eq!(
            question["requestedSchema"]["required"],
            json!(["run"]),
            "{question}"
        );
    }
    let results: Vec<Value> = out["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(result_of)
        .collect();
    assert_eq!(results[0]["executed"], true, "{}", results[0]);
    assert!(f.folder.join("accepted.txt").exists());
    for (i, file) in [
        (1, "declined.txt"),
        (2, "unticked.txt"),
        (3, "cancelled.txt"),
    ] {
        assert_eq!(
            (
                &results[i]["ok"],
                &results[i]["executed"],
                &results[i]["status"]
            ),
            (&json!(true), &json!(false), &json!("notExecuted")),
            "{}",
            results[i]
        );
        assert!(!f.folder.join(file).exists(), "{file}");
    }
    assert_eq!(results[4]["executed"], true, "{}", results[4]);
    assert!(
        results[4]["output"]
            .as_str()
            .unwrap()
            .contains("accepted.txt")
    );
    assert_no_survivors(&f.folder);
}

#[test]
fn python_mcp_client_without_elicitation_gets_not_executed_and_is_never_asked() {
    let Some(python) = mcp_python() else {
        return;
    };
    let f = Fixture::new();
    let calls = json!([["run_command", {"argv": ["touch", "made.txt"]}]]);
    let args = [
        "--state-dir",
        s(&f.state),
        "mcp",
        "--workspace",
        s(&f.folder),
    ];
    let out = python_client(&python, &f.folder, &args, calls);
    assert_eq!(out["elicitations"], json!([]), "{out}");
    let result = result_of(&out["calls"][0]);
    assert_eq!(
        (&result["ok"], &result["executed"], &result["status"]),
        (&json!(true), &json!(false), &json!("notExecuted")),
        "{result}"
    );
    assert!(!f.folder.join("made.txt").exists());
}

#[test]
fn over_mcp_a_password_is_never_asked_and_the_call_says_where_to_run_it() {
    // RC-12 and the MCP spec: no secret is collected by a form; the call is not executed and
    // its message points to `agent-exec call run_command` in a terminal.
    let Some(python) = mcp_python() else {
        return;
    };
    let f = Fixture::new();
    let calls = json!([
        ["run_command", {"argv": ["touch", "unsandboxed.txt"], "sandbox": false}],
    ]);
    let args = [
        "--state-dir",
        s(&f.state),
        "mcp",
        "--workspace",
        s(&f.folder),
        "--mode",
        "allow-all",
    ];
    let answers = json!(["accept", "accept", "accept"]);
    let out = python_client_answering(&python, &f.folder, &args, calls, answers);
    for question in out["elicitations"].as_array().unwrap() {
        let fields = question["requestedSchema"]["properties"]
            .as_object()
            .unwrap();
        assert_eq!(fields.keys().collect::<Vec<_>>(), ["run"], "{question}");
    }
    let result = result_of(&out["calls"][0]);
    assert_eq!(
        (&result["executed"], &result["status"]),
        (&json!(false), &json!("notExecuted")),
        "{result}"
    );
    let message = result["message"].as_str().unwrap_or_default();
    assert!(message.contains("agent-exec call run_command"), "{result}");
    assert!(message.contains("password"), "{result}");
    // The advice is the MCP server's own: a client cannot pass the command line's flags.
    assert!(message.contains("never collected over MCP"), "{result}");
    assert!(!message.contains("--password-fd"), "{result}");
    // One sentence: a source line once joined without `\` put runs of spaces in it.
    assert!(!message.contains("  "), "{result}");
    assert!(!f.folder.join("unsandboxed.txt").exists());
}

#[test]
fn cancelling_a_run_command_call_withdraws_its_elicitation_and_runs_nothing() {
    // A pending elicitation belongs to its tools/call; cancelled, the server tells
    // the client to drop the question, a late answer runs nothing, and the call gets no reply.
    let f = Fixture::new();
    let mut raw = Raw::spawn(
        &[
            "--state-dir",
            s(&f.state),
            "mcp",
            "--workspace",
            s(&f.folder),
        ],
        &f.folder,
    );
    raw.send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "raw-test", "version": "0"}}}),
    );
    assert_eq!(raw.recv()["id"], 0);
    raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    raw.send(
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "run_command", "arguments": {"argv": ["touch", "late.txt"]}}}),
    );
    let question = raw.recv();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let asked = question["id"].clone();
    raw.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7}}),
    );
    let withdrawn = raw.recv();
    assert_eq!(
        (&withdrawn["method"], &withdrawn["params"]["requestId"]),
        (&json!("notifications/cancelled"), &asked),
        "{withdrawn}"
    );
    raw.send(
        json!({"jsonrpc": "2.0", "id": asked, "result": {"action": "accept",
        "content": {"run": true}}}),
    );
    raw.send(json!({"jsonrpc": "2.0", "id": 8, "method": "ping"}));
    assert_eq!(raw.recv(), json!({"jsonrpc": "2.0", "id": 8, "result": {}}));
    assert!(raw.finish().success());
    assert!(!f.folder.join("late.txt").exists());
}

#[test]
fn a_pending_confirmation_does_not_hold_up_a_read_only_call_of_the_same_session() {
    // RC-9 in the MCP server: allowlist hits run while another call of the connection waits
    // for the user's answer; the answer then runs the first.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("seen.txt", "x");
    let mut raw = Raw::spawn(
        &[
            "--state-dir",
            s(&f.state),
            "mcp",
            "--workspace",
            s(&f.folder),
        ],
        &f.folder,
    );
    raw.send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "raw-test", "version": "0"}}}),
    );
    assert_eq!(raw.recv()["id"], 0);
    raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "run_command", "arguments": {"argv": ["touch", "after.txt"]}}}),
    );
    let question = raw.recv();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    raw.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "run_command", "arguments": {"argv": ["ls"]}}}),
    );
    let listed = raw.recv();
    assert_eq!(listed["id"], 2, "{listed}");
    let result = result_of(&listed["result"]);
    assert!(
        result["output"].as_str().unwrap().contains("seen.txt"),
        "{result}"
    );
    assert!(!f.folder.join("after.txt").exists());
    raw.send(
        json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept",
        "content": {"run": true}}}),
    );
    let done = raw.recv();
    assert_eq!(done["id"], 1, "{done}");
    assert_eq!(result_of(&done["result"])["executed"], true, "{done}");
    assert!(f.folder.join("after.txt").exists());
    assert!(raw.finish().success());
    assert_no_survivors(&f.folder);
}

#[test]
fn mcp_refusals_go_to_stderr_with_exit_1_or_2() {
    // Usage errors exit 2; a plugin that is not installed, 1; stdout stays empty either way.
    let f = Fixture::new();
    let out = agent_exec(&["--state-dir", s(&f.state), "mcp"], None);
    assert_eq!((out.code, out.stdout.as_str()), (2, ""));
    assert!(
        out.stderr.contains("mcp needs --workspace"),
        "{}",
        out.stderr
    );
    let out = agent_exec(
        &[
            "--state-dir",
            s(&f.state),
            "mcp",
            "--workspace",
            s(&f.folder),
            "--plugin",
            "ghost",
        ],
        None,
    );
    assert_eq!((out.code, out.stdout.as_str()), (1, ""));
    assert!(
        out.stderr.contains("plugin ghost is not installed"),
        "{}",
        out.stderr
    );
    let out = agent_exec(
        &[
            "--state-dir",
            s(&f.state),
            "mcp",
            "--workspace",
            s(&f.folder.join("missing")),
        ],
        None,
    );
    assert_eq!((out.code, out.stdout.as_str()), (1, ""));
    assert!(
        out.stderr.contains("give an existing folder"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_revocation_from_another_process_reaches_a_plugins_mcp_call() {
    // TS-3, TS-5 over MCP: `--plugin` serves with the persisted grants only, and
    // `agent-exec revoke` in another process cancels the running call, which answers with the
    // permission error as a tool error; its processes are gone.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("a.txt", "x\n");
    grant_notes_everything(&f);
    let args = [
        "--state-dir",
        s(&f.state),
        "mcp",
        "--workspace",
        s(&f.folder),
        "--plugin",
        "notes",
    ];
    let mut raw = Raw::start(&args, &f.folder);
    raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "read", "arguments": {"path": "a.txt"}}}),
    );
    let reply = raw.recv();
    assert_eq!(result_of(&reply["result"])["content"], "x\n", "{reply}");
    let marker = "161.803";
    raw.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "command", "arguments": {"command": format!("sleep {marker}")}}}),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !has_process_with_arg(marker) {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    grant(&f, &["revoke", "allow", "notes", "local.terminal.exec@1"]);
    let reply = raw.recv();
    assert_eq!(reply["id"], 2, "{reply}");
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    let err = &result_of(&reply["result"]);
    assert_eq!(err["code"], "AGENT_PERMISSION_DENIED", "{reply}");
    assert!(
        !has_process_with_arg(marker),
        "sleep survived the revocation"
    );
    // Later calls of the exec tools are refused before anything runs; read still works.
    raw.send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "command", "arguments": {"command": "true"}}}),
    );
    let reply = raw.recv();
    assert_eq!(
        result_of(&reply["result"])["code"],
        "AGENT_PERMISSION_DENIED",
        "{reply}"
    );
    assert!(raw.finish().success());
    assert_no_survivors(f.folder.parent().unwrap());
}
