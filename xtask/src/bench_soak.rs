//! `cargo xtask bench soak [--calls N] [--concurrency C] [--uid U] [--agent-exec PATH]`: the MCP
//! soak. N mixed `tools/call` requests (default 10 000), C in flight at once
//! (default 16), through ONE `agent-exec mcp --workspace DIR` process over stdio, spoken to by
//! the small JSON-RPC client below (threads and `serde_json`; nothing else in the timing).
//!
//! **The mix** ([`MIX`], repeated in order): every tool the server lists — `read` (also of a
//! missing file), `write`, `edit`, `grep`, `run` (`wc`, `awk`, `sort`, `diff`), `command`
//! (one-liners that succeed, exit non-zero, pass the 64 KiB output cap, time out after 300 ms,
//! leave a `sleep` behind), `run_command` (read-only argv; argv that need a confirmation, which
//! this client answers by MCP elicitation — yes for `rc-yes-*` files and for `sudo`, whose
//! password is then never asked over MCP so it does not run; no for the rest; argv the policy
//! refuses: `cd`, a denied command, a watcher) and `background_command` / `background_status`
//! / `background_cancel` (short tasks; a long one cancelled at once). Every call has an
//! expected outcome: a tool error with the refusals' code, or a result with a field pinned
//! (`executed`, `status`, `truncated`, …). A reply that is not what was expected is a failure,
//! and a JSON-RPC error (a protocol error) always is; tool errors are counted by code.
//!
//! **Baseline and probe.** Before the run, the same mix at concurrency 1 (N/20 calls, 20 to
//! 300), so the throughput is a ratio measured on this machine in the same run
//! (docs/architecture.md, "Benchmarks"),
//! and C `command` calls of `sleep 0.5` sent at once: a server that ran calls one at a time
//! would take C × 0.5 s for them whatever the CPU, and a CPU-bound mix on a small machine gains
//! little from concurrency even when nothing serialises, so the probe is the figure that
//! answers "does the server run calls in parallel". The server's own CPU time during the run
//! says whether its one runtime thread is what bounds the throughput.
//!
//! **What is watched** — the server process's open descriptors (`/proc/PID/fd`; those of
//! `/etc` entries apart — the system runtime set's cache, which follows `/etc` and so grows
//! when another process adds a file there: checked to be at most one per entry `/etc` has and
//! none of a deleted file), threads,
//! zombie children, the call temp dirs under its `TMPDIR` (a directory of the soak's own, so
//! other users of `/tmp` do not count), the entries of its state directory (session logs,
//! mirrors and their records; not the persistent mirror's copy of the folder, and the copy
//! slots' lock files apart: one per slot ever used, at most 3), its resident
//! memory (`VmRSS`), and processes carrying this run's marker (every command's text and every
//! `sleep` argument carries it; `sleep` takes `S.<digits>`). Sampled at start, after the
//! baseline, after every tenth of the run and at the end, each checkpoint once the calls of that
//! tenth have been answered and the server has settled (background tasks ended, tokio's idle
//! blocking threads gone: they linger 10 s).
//!
//! **Tolerances** (a failure names the one it broke):
//! - descriptors, threads, zombies, temp dirs, state entries: no growth after warm-up — every
//!   checkpoint after the first tenth is at most that first one (zombies and temp dirs: zero);
//! - resident memory: at most 8 MiB above the first tenth's at the end. Not zero, because the
//!   session keeps its 256 most recently ended background tasks for `background_status` (this
//!   mix fills that after about 5 000 calls) and glibc keeps freed memory in its arenas, so RSS
//!   rises to a plateau rather than staying flat (measured: about 1.5 MiB from the first tenth
//!   to the end of 10 000 calls, flat over the last 3 000); a leak of 1 KiB per call is 9 MiB
//!   over 9 000 calls and fails. A short run is correspondingly less sensitive.
//! - no process with the marker at any checkpoint or after the server exited, the server's
//!   `TMPDIR` and session directories empty after it exited, and a clean exit once its stdin
//!   closed.
//!
//! `--uid U` runs the server as that user (root only; its gid from `/etc/passwd`, else U): the
//! soak's directories are given to it, its `HOME` is a private one. Not part of `cargo xtask
//! ci`: it takes minutes (`--calls 300` about two, most of it the eleven settles).

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::workspace_root;

/// How long one call may take before the soak gives up on it.
const REPLY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a checkpoint waits for the server to settle.
const SETTLE_LIMIT: Duration = Duration::from_secs(20);
/// tokio's blocking threads exit after 10 s idle; the reference sample waits this long without
/// change.
const IDLE_THREADS: Duration = Duration::from_secs(11);
/// The copy slots of one workspace (`AGENT_EXEC_CONCURRENT_COPIES`' default), each leaving its
/// lock file.
const MAX_COPY_LOCKS: usize = 3;
/// Resident memory allowed above the first tenth's at the end (module docs).
const RSS_TOLERANCE_KIB: u64 = 8 * 1024;

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let opts = Options::parse(args)?;
    let agent_exec = match &opts.agent_exec {
        Some(p) => p.clone(),
        None => build_agent_exec()?,
    };
    let marker = format!(
        "{:07}{:06}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_micros())
    );
    // Not the marker: the server's own command line names this directory.
    let base = std::env::temp_dir().join(format!("agent-exec-soak-p{}", std::process::id()));
    let dirs = Dirs::make(&base, opts.uid)?;
    let outcome = soak(&opts, &agent_exec, &dirs, &marker);
    match &outcome {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(&base);
        }
        Err(_) => eprintln!("xtask bench soak: kept {} for a look", base.display()),
    }
    outcome
}

struct Options {
    calls: usize,
    concurrency: usize,
    uid: Option<u32>,
    agent_exec: Option<PathBuf>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut opts = Options {
            calls: 10_000,
            concurrency: 16,
            uid: None,
            agent_exec: None,
        };
        let usage = "use --calls N --concurrency C [--uid U] [--agent-exec PATH]";
        let mut it = args.iter();
        while let Some(name) = it.next() {
            let value = it
                .next()
                .ok_or_else(|| format!("{name} needs a value; {usage}"))?;
            let number = || {
                value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("{name} needs a positive number, not `{value}`"))
            };
            match name.as_str() {
                "--calls" => opts.calls = number()?,
                "--concurrency" => opts.concurrency = number()?,
                "--uid" => {
                    opts.uid = Some(
                        u32::try_from(number()?).map_err(|_| format!("--uid {value}: too big"))?,
                    );
                }
                "--agent-exec" => {
                    // The server starts in the soak's workspace: a relative path would not do.
                    let path = std::fs::canonicalize(value)
                        .map_err(|e| format!("--agent-exec {value}: {e}"))?;
                    opts.agent_exec = Some(path);
                }
                _ => return Err(format!("unknown soak argument `{name}`; {usage}")),
            }
        }
        // The server refuses more than 32 calls at once (`-32000`): a soak above that would
        // measure refusals.
        if opts.concurrency > 32 {
            return Err("--concurrency is at most 32 (the server's MAX_IN_FLIGHT)".to_owned());
        }
        Ok(opts)
    }
}

fn build_agent_exec() -> Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .args(["build", "--release", "-p", "agent-exec"])
        .current_dir(workspace_root())
        .status()
        .map_err(|e| format!("cannot start cargo: {e}"))?;
    if !status.success() {
        return Err("building agent-exec failed".to_owned());
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from);
    Ok(target.join("release/agent-exec"))
}

/// The soak's own directories: the workspace, the server's state, `HOME` and `TMPDIR`.
struct Dirs {
    ws: PathBuf,
    state: PathBuf,
    home: PathBuf,
    tmp: PathBuf,
}

impl Dirs {
    fn make(base: &Path, uid: Option<u32>) -> Result<Dirs, String> {
        let dirs = Dirs {
            ws: base.join("ws"),
            state: base.join("state"),
            home: base.join("home"),
            tmp: base.join("tmp"),
        };
        let io = |what: &Path| {
            let what = what.display().to_string();
            move |e: std::io::Error| format!("cannot make {what}: {e}")
        };
        for d in [&dirs.ws, &dirs.state, &dirs.home, &dirs.tmp] {
            std::fs::create_dir_all(d).map_err(io(d))?;
        }
        let data: String = (0..200)
            .map(|i| format!("{},{}\n", ["north", "south", "east", "west"][i % 4], i))
            .collect();
        let other = data.replace("east", "centre");
        let numbers: String = (0..300)
            .map(|i| format!("{}\n", (i * 7919) % 1000))
            .collect();
        let mut files = vec![
            ("data.csv".to_owned(), data),
            ("other.csv".to_owned(), other),
            ("nums.txt".to_owned(), numbers),
            (
                "sum.awk".to_owned(),
                "BEGIN { FS = \",\" } { n += $2 } END { print n }\n".to_owned(),
            ),
        ];
        for i in 0..8 {
            files.push((
                format!("notes/n{i}.txt"),
                format!("note {i}\nthe north wind\nline three\n").repeat(20),
            ));
        }
        for w in 0..32 {
            files.push((format!("edit-{w}.txt"), "state=ping\n".to_owned()));
        }
        for (name, text) in files {
            let path = dirs.ws.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(io(parent))?;
            }
            std::fs::write(&path, text).map_err(io(&path))?;
        }
        if let Some(uid) = uid {
            let gid = primary_gid(uid).unwrap_or(uid);
            chown_tree(base, uid, gid)?;
        }
        Ok(dirs)
    }
}

/// `uid`'s primary group from `/etc/passwd`.
fn primary_gid(uid: u32) -> Option<u32> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.get(2)?.parse::<u32>().ok()? == uid)
            .then(|| fields.get(3)?.parse().ok())
            .flatten()
    })
}

fn chown_tree(path: &Path, uid: u32, gid: u32) -> Result<(), String> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
        .map_err(|e| format!("cannot give {} to uid {uid}: {e}", path.display()))?;
    if path.is_dir() && !path.is_symlink() {
        let entries =
            std::fs::read_dir(path).map_err(|e| format!("cannot list {}: {e}", path.display()))?;
        for entry in entries.flatten() {
            chown_tree(&entry.path(), uid, gid)?;
        }
    }
    Ok(())
}

/// What one call of the mix is.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Read,
    ReadMissing,
    Write,
    Edit,
    Grep,
    GrepGlob,
    Run(&'static str),
    CmdOk,
    CmdFail,
    CmdCap,
    CmdTimeout,
    CmdEscapee,
    RcReadOnly,
    RcList,
    RcConfirmYes,
    RcConfirmNo,
    RcSudo,
    RcRefused(&'static str),
    BgStart,
    BgStatus,
    BgCancel,
}

/// The mix, repeated in this order (about a quarter `command`, a quarter `run_command`).
const MIX: &[Kind] = &[
    Kind::Read,
    Kind::CmdOk,
    Kind::RcReadOnly,
    Kind::Write,
    Kind::Run("wc"),
    Kind::CmdFail,
    Kind::Edit,
    Kind::RcConfirmYes,
    Kind::Grep,
    Kind::CmdCap,
    Kind::RcRefused("cd"),
    Kind::BgStart,
    Kind::Read,
    Kind::Run("awk"),
    Kind::CmdOk,
    Kind::RcList,
    Kind::ReadMissing,
    Kind::CmdTimeout,
    Kind::RcConfirmNo,
    Kind::Write,
    Kind::Edit,
    Kind::GrepGlob,
    Kind::CmdEscapee,
    Kind::RcRefused("shutdown"),
    Kind::BgStatus,
    Kind::Run("sort"),
    Kind::Read,
    Kind::CmdOk,
    Kind::RcSudo,
    Kind::Write,
    Kind::Run("diff"),
    Kind::RcRefused("watch"),
    Kind::BgCancel,
    Kind::Edit,
    Kind::Grep,
    Kind::CmdOk,
    Kind::RcReadOnly,
    Kind::Read,
];

/// What a reply must be: a result (`isError: false`) whose field at `pointer` is `value`, or
/// a tool error with one of `codes`.
#[derive(Clone, Debug)]
enum Expect {
    Result(Option<(&'static str, Value)>),
    Error(&'static [&'static str]),
    /// A result, or (a background start beyond MAX_BACKGROUND_TASKS) this tool error.
    ResultOr(&'static str),
}

/// The tool error codes one expected reply may carry.
const PATH_INVALID: &[&str] = &["AGENT_EXEC_PATH_INVALID"];

/// One call: tool, arguments, what must come back.
fn call_of(
    kind: Kind,
    i: usize,
    worker: usize,
    toggle: bool,
    marker: &str,
) -> (&'static str, Value, Expect) {
    let ok = Expect::Result(None);
    let field = |p: &'static str, v: Value| Expect::Result(Some((p, v)));
    let command = |text: String, (p, v): (&'static str, Value)| {
        ("command", json!({ "command": text }), field(p, v))
    };
    let argv = |argv: Value, (p, v): (&'static str, Value)| {
        ("run_command", json!({ "argv": argv }), field(p, v))
    };
    match kind {
        Kind::Read => ("read", json!({"path": "data.csv", "limit": 50}), ok),
        Kind::ReadMissing => (
            "read",
            json!({"path": format!("missing-{}.txt", i % 7)}),
            Expect::Error(PATH_INVALID),
        ),
        Kind::Write => (
            "write",
            json!({"path": format!("out/w{}.txt", i % 32), "content": format!("call {i}\n").repeat(64)}),
            ok,
        ),
        Kind::Edit => {
            let (from, to) = if toggle {
                ("pong", "ping")
            } else {
                ("ping", "pong")
            };
            (
                "edit",
                json!({"path": format!("edit-{worker}.txt"), "oldString": format!("state={from}"),
                       "newString": format!("state={to}")}),
                ok,
            )
        }
        Kind::Grep => (
            "grep",
            json!({"pattern": "north", "path": "notes", "maxResults": 50}),
            ok,
        ),
        Kind::GrepGlob => (
            "grep",
            json!({"pattern": "^(east|west),1", "glob": "*.csv"}),
            ok,
        ),
        Kind::Run(program) => {
            let args = match program {
                "wc" => json!(["-l", "data.csv", "other.csv"]),
                "awk" => json!(["-f", "sum.awk", "data.csv"]),
                "sort" => json!(["-n", "nums.txt"]),
                _ => json!(["-q", "data.csv", "other.csv"]),
            };
            let want = if program == "diff" { 1 } else { 0 };
            (
                "run",
                json!({"program": program, "args": args}),
                field("/exitCode", json!(want)),
            )
        }
        Kind::CmdOk => command(
            format!(": {marker}; wc -l data.csv | sort -n; grep -c north data.csv"),
            ("/exitCode", json!(0)),
        ),
        Kind::CmdFail => command(
            format!(": {marker}; ls no-such-file"),
            ("/exitCode", json!(2)),
        ),
        Kind::CmdCap => command(
            format!(": {marker}; head -c 300000 /dev/zero | tr '\\0' x"),
            ("/truncated", json!(true)),
        ),
        Kind::CmdTimeout => (
            "command",
            json!({"command": format!("sleep 30.{marker}"), "timeoutMs": 300}),
            field("/status", json!("timedOut")),
        ),
        Kind::CmdEscapee => command(
            format!("sleep 60.{marker} & echo started"),
            ("/descendantsStopped", json!(1)),
        ),
        Kind::RcReadOnly => argv(json!(["wc", "-l", "data.csv"]), ("/exitCode", json!(0))),
        Kind::RcList => argv(json!(["ls", "-l", "notes"]), ("/exitCode", json!(0))),
        // Answered yes by the client (its label names an rc-yes file).
        Kind::RcConfirmYes => argv(
            json!(["touch", format!("rc-yes-{worker}.txt")]),
            ("/executed", json!(true)),
        ),
        Kind::RcConfirmNo => argv(json!(["touch", "rc-no.txt"]), ("/executed", json!(false))),
        // Confirmed by the client; the password is never asked over MCP: not executed.
        Kind::RcSudo => argv(json!(["sudo", "true"]), ("/executed", json!(false))),
        Kind::RcRefused(which) => {
            let (argv, code): (Value, &'static [&'static str]) = match which {
                "cd" => (json!(["cd", "/tmp"]), &["RUN_COMMAND_CD"]),
                "shutdown" => (json!(["shutdown", "now"]), &["RUN_COMMAND_DENIED"]),
                _ => (json!(["npx", "tsc", "--watch"]), &["RUN_COMMAND_WATCHER"]),
            };
            ("run_command", json!({"argv": argv}), Expect::Error(code))
        }
        Kind::BgStart => (
            "background_command",
            json!({"argv": ["sh", "-c", format!("echo soak error; sleep 0.2{marker}")],
                   "objective": "soak", "timeout_min": 1}),
            Expect::ResultOr("BACKGROUND_COMMAND_LIMIT"),
        ),
        Kind::BgStatus => ("background_status", json!({}), ok),
        // The start (a long sleep) is made by the caller; this is its cancel.
        Kind::BgCancel => ("background_cancel", json!({}), ok),
    }
}

/// How one reply went.
struct Done {
    tool: &'static str,
    latency: Duration,
    /// `ok`, a command's status, `notExecuted`, or the tool error's code.
    outcome: String,
    /// Why it was not what the mix expected (a protocol error included).
    unexpected: Option<String>,
    protocol_error: Option<i64>,
    result: Value,
}

/// The client's side of one connection: a writer shared by the callers, a reader thread that
/// hands each reply to the caller waiting for its id and answers the server's elicitations.
struct Client {
    /// `None` once closed (the server's end of input).
    stdin: Arc<Mutex<Option<ChildStdin>>>,
    pending: Arc<Mutex<HashMap<u64, mpsc::Sender<Value>>>>,
    next: AtomicU64,
    notices: Arc<Mutex<BTreeMap<String, u64>>>,
    reader: Mutex<Option<std::thread::JoinHandle<()>>>,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn send_line(stdin: &Mutex<Option<ChildStdin>>, message: &Value) -> std::io::Result<()> {
    let mut line = message.to_string().into_bytes();
    line.push(b'\n');
    let mut w = locked(stdin);
    let w = w.as_mut().ok_or(std::io::ErrorKind::BrokenPipe)?;
    w.write_all(&line)?;
    w.flush()
}

impl Client {
    fn start(child: &mut Child) -> Result<Client, String> {
        let stdin = child.stdin.take().ok_or("the server has no stdin")?;
        let stdout = child.stdout.take().ok_or("the server has no stdout")?;
        let client = Client {
            stdin: Arc::new(Mutex::new(Some(stdin))),
            pending: Arc::default(),
            next: AtomicU64::new(1),
            notices: Arc::default(),
            reader: Mutex::new(None),
        };
        let (writer, pending, notices) = (
            Arc::clone(&client.stdin),
            Arc::clone(&client.pending),
            Arc::clone(&client.notices),
        );
        let reader = std::thread::Builder::new()
            .name("soak-reader".into())
            .spawn(move || read_replies(BufReader::new(stdout), &writer, &pending, &notices))
            .map_err(|e| format!("cannot start the reader thread: {e}"))?;
        *locked(&client.reader) = Some(reader);
        let init = client.request(
            &json!({"jsonrpc": "2.0", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "xtask-bench-soak", "version": "0"}}}),
        )?;
        if init.1["result"]["serverInfo"]["name"] != "agent-exec" {
            return Err(format!("initialize answered {}", init.1));
        }
        send_line(
            &client.stdin,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .map_err(|e| format!("writing to the server: {e}"))?;
        Ok(client)
    }

    /// Sends `message` with a fresh id; its reply and how long it took.
    fn request(&self, message: &Value) -> Result<(Duration, Value), String> {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let mut message = message.clone();
        message["id"] = json!(id);
        let (tx, rx) = mpsc::channel();
        locked(&self.pending).insert(id, tx);
        let start = Instant::now();
        send_line(&self.stdin, &message).map_err(|e| format!("writing to the server: {e}"))?;
        let reply = rx
            .recv_timeout(REPLY_TIMEOUT)
            .map_err(|e| format!("no reply to request {id} ({e}): {message}"))?;
        Ok((start.elapsed(), reply))
    }

    fn call(&self, tool: &'static str, arguments: Value, expect: &Expect) -> Result<Done, String> {
        let (latency, reply) = self.request(&json!({"jsonrpc": "2.0", "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}))?;
        Ok(judge(tool, latency, &reply, expect))
    }

    /// Closes the server's stdin (MCP's end of a session) and waits for the reader to see the
    /// end of its output.
    fn close(&self) {
        drop(locked(&self.stdin).take());
        if let Some(reader) = locked(&self.reader).take() {
            let _ = reader.join();
        }
    }
}

fn read_replies(
    stdout: BufReader<std::process::ChildStdout>,
    writer: &Mutex<Option<ChildStdin>>,
    pending: &Mutex<HashMap<u64, mpsc::Sender<Value>>>,
    notices: &Mutex<BTreeMap<String, u64>>,
) {
    let count = |what: String| *locked(notices).entry(what).or_default() += 1;
    for line in stdout.lines() {
        let Ok(line) = line else { break };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            count(format!(
                "unparsable line: {}",
                line.chars().take(80).collect::<String>()
            ));
            continue;
        };
        let method = message["method"].as_str();
        match (method, message.get("id")) {
            (Some("elicitation/create"), Some(id)) => {
                // Yes for rc-yes files and for sudo (whose password is never asked over MCP).
                let label =
                    message["params"]["requestedSchema"]["properties"]["run"]["description"]
                        .as_str()
                        .unwrap_or_default();
                let yes = label.contains("rc-yes-") || label.starts_with("sudo:");
                count(format!(
                    "elicitation answered {}",
                    if yes { "yes" } else { "no" }
                ));
                let result = if yes {
                    json!({"action": "accept", "content": {"run": true}})
                } else {
                    json!({"action": "decline"})
                };
                let _ = send_line(
                    writer,
                    &json!({"jsonrpc": "2.0", "id": id, "result": result}),
                );
            }
            (Some(other), Some(id)) => {
                count(format!("server request {other}"));
                let _ = send_line(
                    writer,
                    &json!({"jsonrpc": "2.0", "id": id,
                            "error": {"code": -32601, "message": "not supported by the soak"}}),
                );
            }
            (Some(m), None) => {
                let event = message["params"]["data"]["event"].as_str().unwrap_or("");
                count(format!("{m} {event}").trim_end().to_owned());
            }
            (None, Some(id)) => {
                let waiting = id.as_u64().and_then(|id| locked(pending).remove(&id));
                match waiting {
                    Some(tx) => {
                        let _ = tx.send(message);
                    }
                    None => count(format!("reply nobody waits for: {line}")),
                }
            }
            (None, None) => count("message with neither id nor method".to_owned()),
        }
    }
    // The server is gone: nobody waits for a reply that cannot come.
    locked(pending).clear();
}

/// Classifies `reply` against `expect`.
fn judge(tool: &'static str, latency: Duration, reply: &Value, expect: &Expect) -> Done {
    let mut done = Done {
        tool,
        latency,
        outcome: String::new(),
        unexpected: None,
        protocol_error: None,
        result: Value::Null,
    };
    if let Some(error) = reply.get("error") {
        done.protocol_error = Some(error["code"].as_i64().unwrap_or(0));
        done.outcome = format!("protocol error {}", error["code"]);
        done.unexpected = Some(format!("protocol error: {reply}"));
        return done;
    }
    let is_error = reply["result"]["isError"] == json!(true);
    let text = reply["result"]["content"][0]["text"].as_str().unwrap_or("");
    let Ok(result) = serde_json::from_str::<Value>(text) else {
        done.outcome = "unreadable result".to_owned();
        done.unexpected = Some(format!("the result is not one JSON text block: {reply}"));
        return done;
    };
    done.outcome = if is_error {
        result["code"].as_str().unwrap_or("no code").to_owned()
    } else if result["executed"] == json!(false) {
        "notExecuted".to_owned()
    } else if let Some(status) = result["status"].as_str().filter(|_| tool == "command") {
        let truncated = if result["truncated"] == json!(true) {
            ",truncated"
        } else {
            ""
        };
        format!("{status}{truncated}")
    } else {
        "ok".to_owned()
    };
    let fits = match (expect, is_error) {
        (Expect::Result(None) | Expect::ResultOr(_), false) => true,
        (Expect::Result(Some((pointer, want))), false) => result.pointer(pointer) == Some(want),
        (Expect::Error(codes), true) => codes.contains(&done.outcome.as_str()),
        (Expect::ResultOr(code), true) => done.outcome == *code,
        _ => false,
    };
    if !fits {
        done.unexpected = Some(format!("expected {expect:?}, got {}", truncate(text, 600)));
    }
    done.result = result;
    done
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Everything the calls of the run left to report.
#[derive(Default)]
struct Tally {
    latencies: BTreeMap<&'static str, Vec<Duration>>,
    outcomes: BTreeMap<(&'static str, String), u64>,
    unexpected: Vec<String>,
    protocol_errors: BTreeMap<i64, u64>,
    calls: usize,
}

impl Tally {
    fn add(&mut self, done: Done) {
        self.calls += 1;
        self.latencies
            .entry(done.tool)
            .or_default()
            .push(done.latency);
        *self.outcomes.entry((done.tool, done.outcome)).or_default() += 1;
        if let Some(code) = done.protocol_error {
            *self.protocol_errors.entry(code).or_default() += 1;
        }
        if let Some(why) = done.unexpected {
            self.unexpected.push(format!("{}: {why}", done.tool));
        }
    }
}

/// The state one worker keeps between its calls: the toggle of its `edit-W.txt`.
struct Workers {
    toggles: Vec<AtomicBool>,
    /// The last background task started by the mix (for `background_status`).
    last_task: Mutex<Option<String>>,
}

/// Runs mix positions `range` with `concurrency` callers; returns the wall time.
fn run_calls(
    client: &Client,
    workers: &Workers,
    range: std::ops::Range<usize>,
    concurrency: usize,
    marker: &str,
    tally: &Mutex<Tally>,
) -> Duration {
    let next = AtomicUsize::new(range.start);
    let start = Instant::now();
    std::thread::scope(|s| {
        for w in 0..concurrency {
            let next = &next;
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= range.end {
                        return;
                    }
                    for done in one(client, workers, i, w, marker) {
                        locked(tally).add(done);
                    }
                }
            });
        }
    });
    start.elapsed()
}

/// Mix position `i` by worker `w`: one call, or for a cancel the start it cancels too.
fn one(client: &Client, workers: &Workers, i: usize, w: usize, marker: &str) -> Vec<Done> {
    let kind = MIX[i % MIX.len()];
    let failed = |tool: &'static str, why: String| Done {
        tool,
        latency: Duration::ZERO,
        outcome: "no reply".to_owned(),
        unexpected: Some(why),
        protocol_error: None,
        result: Value::Null,
    };
    let toggle = workers.toggles[w].load(Ordering::SeqCst);
    let (tool, mut arguments, expect) = call_of(kind, i, w, toggle, marker);
    let mut dones = Vec::new();
    match kind {
        Kind::BgCancel => {
            let start = Expect::ResultOr("BACKGROUND_COMMAND_LIMIT");
            let argv = json!({"argv": ["sleep", format!("30.{marker}")], "timeout_min": 1});
            match client.call("background_command", argv, &start) {
                Ok(started) => {
                    let id = started.result["taskId"].as_str().map(str::to_owned);
                    dones.push(started);
                    match id {
                        Some(id) => arguments = json!({"taskId": id}),
                        None => return dones,
                    }
                }
                Err(why) => return vec![failed("background_command", why)],
            }
        }
        Kind::BgStatus => {
            if let Some(id) = locked(&workers.last_task).clone() {
                arguments = json!({"taskId": id});
            }
        }
        _ => {}
    }
    match client.call(tool, arguments, &expect) {
        Ok(done) => {
            match kind {
                Kind::Edit if done.unexpected.is_none() => {
                    workers.toggles[w].store(!toggle, Ordering::SeqCst);
                }
                Kind::BgStart => {
                    if let Some(id) = done.result["taskId"].as_str() {
                        *locked(&workers.last_task) = Some(id.to_owned());
                    }
                }
                _ => {}
            }
            dones.push(done);
        }
        Err(why) => dones.push(failed(tool, why)),
    }
    dones
}

/// `concurrency` calls of `command` that each sleep 0.5 s, sent at once: how long until the
/// last reply came (a server that ran them one at a time takes `concurrency` × 0.5 s, whatever
/// the CPU), and the replies that were not a clean exit.
fn parallel_probe(client: &Client, concurrency: usize, marker: &str) -> (Duration, Vec<String>) {
    let start = Instant::now();
    let wrong = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..concurrency {
            s.spawn(|| {
                let args = json!({"command": format!("sleep 0.5{marker}")});
                let expect = Expect::Result(Some(("/exitCode", json!(0))));
                let why = match client.call("command", args, &expect) {
                    Ok(done) => done.unexpected,
                    Err(e) => Some(e),
                };
                if let Some(why) = why {
                    locked(&wrong).push(format!("parallel probe: {why}"));
                }
            });
        }
    });
    (
        start.elapsed(),
        wrong.into_inner().unwrap_or_else(PoisonError::into_inner),
    )
}

/// What the server holds at one moment (module docs).
#[derive(Clone, Debug, Default, PartialEq)]
struct Sample {
    /// Open descriptors but those of `/etc` entries.
    fds: usize,
    /// Descriptors of `/etc` entries: the system runtime set's cache (`exec::sysset`), one per
    /// entry any local user may read, which follows `/etc` by inotify — so it grows when
    /// someone adds such a file while the soak runs, and is checked against `/etc` itself.
    etc_fds: usize,
    /// Descriptors whose file was deleted (a cache that kept one would leak).
    deleted_fds: usize,
    threads: usize,
    zombies: usize,
    tmp: usize,
    state: usize,
    rss_kib: u64,
    marked: usize,
    /// The workspace's copy-slot lock files (`<mirror>.copy-<i>.lock`): one per slot ever
    /// used, at most `AGENT_EXEC_CONCURRENT_COPIES` (3), kept for the next turn.
    copy_locks: usize,
    /// What the descriptors and the state entries are, to name what grew.
    fd_targets: Vec<String>,
    state_paths: Vec<String>,
}

fn sample(pid: u32, dirs: &Dirs, marker: &str) -> Sample {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let status = std::fs::read_to_string(proc.join("status")).unwrap_or_default();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let (zombies, marked) = scan_proc(pid, marker);
    let mut fd_targets: Vec<String> = std::fs::read_dir(proc.join("fd"))
        .map(|d| {
            d.flatten()
                .map(|e| {
                    let target = std::fs::read_link(e.path()).unwrap_or_default();
                    target.display().to_string()
                })
                .collect()
        })
        .unwrap_or_default();
    fd_targets.sort();
    // Before the /etc ones go: a cached descriptor of a removed /etc file would be one.
    let deleted_fds = fd_targets
        .iter()
        .filter(|t| t.ends_with(" (deleted)"))
        .count();
    let etc_fds = fd_targets.len();
    fd_targets.retain(|t| Path::new(t).parent() != Some(Path::new("/etc")));
    let etc_fds = etc_fds - fd_targets.len();
    let mut state_paths = Vec::new();
    state_entries(&dirs.state, &mut state_paths);
    let copy_locks = state_paths.len();
    state_paths.retain(|p| !(p.contains(".copy-") && p.ends_with(".lock")));
    let copy_locks = copy_locks - state_paths.len();
    state_paths.sort();
    Sample {
        fds: fd_targets.len(),
        etc_fds,
        deleted_fds,
        threads: usize::try_from(field("Threads:")).unwrap_or(usize::MAX),
        zombies,
        tmp: count_dir(&dirs.tmp),
        state: state_paths.len(),
        rss_kib: field("VmRSS:"),
        marked,
        copy_locks,
        fd_targets,
        state_paths,
    }
}

/// The items of `now` that `then` does not have (as many times as they are extra).
fn extra(now: &[String], then: &[String]) -> Vec<String> {
    let mut left: Vec<&String> = then.iter().collect();
    let mut out = Vec::new();
    for item in now {
        match left.iter().position(|t| *t == item) {
            Some(at) => {
                left.swap_remove(at);
            }
            None => out.push(item.clone()),
        }
    }
    out
}

/// The CPU time `pid` itself used so far (user + system, all its threads, not its children),
/// in clock ticks of 1/100 s (Linux's `USER_HZ` on every architecture it supports).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the name: state is field 3, utime 14 and stime 15 (1-based) of the whole line.
    let rest: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, r)| r)
        .split_whitespace()
        .collect();
    let field = |i: usize| rest.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    field(11) + field(12)
}

fn count_dir(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

/// Entries under the state directory, but only the top level of `mirrors/` (the persistent
/// mirror's copy of the folder is the folder, not something a call left).
fn state_entries(dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() && !path.is_symlink() && !dir.ends_with("mirrors") {
            state_entries(&path, out);
        }
        out.push(path.display().to_string());
    }
}

/// (zombie children of `pid`, processes whose command line holds `marker`).
fn scan_proc(pid: u32, marker: &str) -> (usize, usize) {
    let (mut zombies, mut marked) = (0, 0);
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return (0, 0);
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // After the command name's closing parenthesis: state, ppid.
        let mut rest = stat
            .rsplit_once(')')
            .map_or("", |(_, r)| r)
            .split_whitespace();
        let (state, ppid) = (rest.next(), rest.next().and_then(|p| p.parse::<u32>().ok()));
        if state == Some("Z") && ppid == Some(pid) {
            zombies += 1;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(marker) {
            marked += 1;
        }
    }
    (zombies, marked)
}

/// Waits (at most [`SETTLE_LIMIT`]) until the server holds no more than `reference` — or, with
/// none, until it holds no call's temp dir, no marked process, and its thread count has not
/// changed for [`IDLE_THREADS`]. Returns the last sample.
fn settle(pid: u32, dirs: &Dirs, marker: &str, reference: Option<&Sample>) -> Sample {
    let deadline = Instant::now() + SETTLE_LIMIT;
    let mut steady = (sample(pid, dirs, marker), Instant::now());
    loop {
        let now = sample(pid, dirs, marker);
        let quiet = now.tmp == 0 && now.marked == 0 && now.zombies == 0;
        let done = match reference {
            Some(r) => {
                quiet && now.fds <= r.fds && now.threads <= r.threads && now.state <= r.state
            }
            None => quiet && steady.1.elapsed() >= IDLE_THREADS,
        };
        if done || Instant::now() >= deadline {
            return now;
        }
        if (now.fds, now.threads, now.state) != (steady.0.fds, steady.0.threads, steady.0.state)
            || !quiet
        {
            steady = (now, Instant::now());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)].as_secs_f64() * 1e3
}

fn soak(opts: &Options, agent_exec: &Path, dirs: &Dirs, marker: &str) -> Result<(), String> {
    let stderr_path = dirs.home.join("server.stderr");
    let stderr = std::fs::File::create(&stderr_path)
        .map_err(|e| format!("cannot make {}: {e}", stderr_path.display()))?;
    let mut cmd = Command::new(agent_exec);
    cmd.arg("--state-dir")
        .arg(&dirs.state)
        .arg("mcp")
        .arg("--workspace")
        .arg(&dirs.ws)
        .env("HOME", &dirs.home)
        .env("TMPDIR", &dirs.tmp)
        .current_dir(&dirs.ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr);
    if let Some(uid) = opts.uid {
        use std::os::unix::process::CommandExt;
        // std drops the supplementary groups when root sets the uid.
        cmd.gid(primary_gid(uid).unwrap_or(uid)).uid(uid);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", agent_exec.display()))?;
    let pid = child.id();
    let result = drive(opts, &mut child, dirs, marker);
    // Whatever happened, the server goes: closing stdin ends it (the reader saw its output
    // end); past that it is killed.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let mut failures = match result {
        Ok(failures) => failures,
        Err(e) => vec![e],
    };
    match status {
        Some(s) if s.success() => {}
        Some(s) => failures.push(format!("the server exited with {s}")),
        None => failures.push("the server did not exit within 30 s of its stdin closing".into()),
    }
    // Survivors: processes with the marker (their parents are gone; give init a moment).
    let gone = Instant::now() + Duration::from_secs(2);
    let mut survivors = scan_proc(pid, marker).1;
    while survivors > 0 && Instant::now() < gone {
        std::thread::sleep(Duration::from_millis(50));
        survivors = scan_proc(pid, marker).1;
    }
    let after = (
        count_dir(&dirs.tmp),
        count_dir(&dirs.state.join("sessions")),
    );
    println!(
        "after exit: {survivors} process(es) with the marker, {} temp dir(s), {} session dir(s)",
        after.0, after.1
    );
    if survivors > 0 {
        failures.push(format!(
            "{survivors} process(es) carrying marker {marker} survived"
        ));
    }
    if after != (0, 0) {
        failures.push(format!(
            "left after exit: {} entries in the server's TMPDIR, {} session directories",
            after.0, after.1
        ));
    }
    let stderr_text = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let lines: Vec<&str> = stderr_text.lines().collect();
    if lines.len() > 1 {
        println!("server stderr ({} lines):", lines.len());
        for l in lines.iter().take(20) {
            println!("  {l}");
        }
    }
    if failures.is_empty() {
        println!("soak: PASS");
        Ok(())
    } else {
        for f in &failures {
            println!("FAIL: {f}");
        }
        Err(format!(
            "the soak failed {} check(s) (FAIL lines above)",
            failures.len()
        ))
    }
}

/// The run itself: baseline, the tenths, the checks. Returns the failed checks.
fn drive(
    opts: &Options,
    child: &mut Child,
    dirs: &Dirs,
    marker: &str,
) -> Result<Vec<String>, String> {
    let pid = child.id();
    let client = Client::start(child)?;
    let uid = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("Uid:")
                .map(|v| v.split_whitespace().next().unwrap_or("?").to_owned())
        })
        .unwrap_or_default();
    println!(
        "soak: {} calls, {} in flight, through one `agent-exec mcp` (pid {pid}, uid {uid}); marker {marker}",
        opts.calls, opts.concurrency
    );
    let workers = Workers {
        toggles: (0..opts.concurrency)
            .map(|_| AtomicBool::new(false))
            .collect(),
        last_task: Mutex::new(None),
    };
    let mut samples: Vec<(String, usize, Sample)> = Vec::new();
    samples.push(("start".into(), 0, sample(pid, dirs, marker)));
    let probe = parallel_probe(&client, opts.concurrency, marker);

    // Baseline: the same mix, one call at a time.
    let base_calls = (opts.calls / 20).clamp(20, 300);
    let base_tally = Mutex::new(Tally::default());
    let base_time = run_calls(&client, &workers, 0..base_calls, 1, marker, &base_tally);
    let base_tally = base_tally
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    samples.push(("baseline".into(), 0, settle(pid, dirs, marker, None)));

    let tally = Mutex::new(Tally::default());
    let mut run_time = Duration::ZERO;
    let mut run_ticks = 0;
    let mut reference: Option<Sample> = None;
    let tenth = opts.calls.div_ceil(10);
    let mut done = 0;
    while done < opts.calls {
        let end = (done + tenth).min(opts.calls);
        // Mix positions continue after the baseline's, so every tenth sees the whole mix.
        let ticks = cpu_ticks(pid);
        run_time += run_calls(
            &client,
            &workers,
            base_calls + done..base_calls + end,
            opts.concurrency,
            marker,
            &tally,
        );
        run_ticks += cpu_ticks(pid) - ticks;
        done = end;
        let s = settle(pid, dirs, marker, reference.as_ref());
        let calls_now = locked(&tally).calls;
        println!(
            "  {:>3}%  {calls_now:>6} calls  fds {:>3}+{:>3} /etc  threads {:>3}  zombies {}  tmp {}  state {:>3}  rss {:>7} KiB  marked {}",
            done * 100 / opts.calls,
            s.fds,
            s.etc_fds,
            s.threads,
            s.zombies,
            s.tmp,
            s.state,
            s.rss_kib,
            s.marked
        );
        if reference.is_none() {
            reference = Some(s.clone());
        }
        samples.push((format!("{}%", done * 100 / opts.calls), calls_now, s));
    }
    let notices = locked(&client.notices).clone();
    let end_sample = samples.last().map(|s| s.2.clone()).unwrap_or_default();
    // Close the connection: the server answers what it read, ends its tasks and exits.
    client.close();
    let tally = tally.into_inner().unwrap_or_else(PoisonError::into_inner);
    report(
        opts,
        &base_tally,
        base_time,
        &tally,
        run_time,
        &notices,
        &samples,
    );
    println!(
        "parallel probe: {} × `sleep 0.5` (command) sent at once, all answered in {:.2} s \
         (one at a time would be {:.1} s)",
        opts.concurrency,
        probe.0.as_secs_f64(),
        opts.concurrency as f64 * 0.5
    );
    // Whether the server's one runtime thread is what bounds the throughput.
    println!(
        "server CPU during the run (its own threads, not the commands): {:.1} s in {:.1} s = {:.0}% of one core",
        run_ticks as f64 / 100.0,
        run_time.as_secs_f64(),
        run_ticks as f64 / run_time.as_secs_f64().max(1e-9)
    );
    let mut failures = checks(
        &base_tally,
        &tally,
        reference.as_ref(),
        &end_sample,
        &samples,
    );
    failures.extend(probe.1);
    Ok(failures)
}

fn report(
    opts: &Options,
    base: &Tally,
    base_time: Duration,
    tally: &Tally,
    run_time: Duration,
    notices: &BTreeMap<String, u64>,
    samples: &[(String, usize, Sample)],
) {
    let rate = |calls: usize, t: Duration| calls as f64 / t.as_secs_f64().max(1e-9);
    let all = |t: &Tally| {
        let mut v: Vec<Duration> = t.latencies.values().flatten().copied().collect();
        v.sort();
        v
    };
    let (base_all, run_all) = (all(base), all(tally));
    let base_rate = rate(base.calls, base_time);
    let run_rate = rate(tally.calls, run_time);
    println!(
        "baseline, 1 in flight: {} calls in {:.1} s = {base_rate:.1} calls/s (p50 {:.1} ms, p99 {:.1} ms)",
        base.calls,
        base_time.as_secs_f64(),
        percentile(&base_all, 0.5),
        percentile(&base_all, 0.99)
    );
    println!(
        "run, {} in flight: {} calls in {:.1} s = {run_rate:.1} calls/s; ratio to 1 in flight: {:.2}",
        opts.concurrency,
        tally.calls,
        run_time.as_secs_f64(),
        run_rate / base_rate.max(1e-9)
    );
    println!("latency (ms, request written → reply read):");
    println!(
        "  {:<20} {:>6} {:>9} {:>9} {:>9}",
        "tool", "calls", "p50", "p99", "max"
    );
    let mut rows: Vec<(&str, Vec<Duration>)> = tally
        .latencies
        .iter()
        .map(|(k, v)| (*k, v.clone()))
        .collect();
    rows.push(("all", run_all));
    for (tool, mut v) in rows {
        v.sort();
        println!(
            "  {tool:<20} {:>6} {:>9.1} {:>9.1} {:>9.1}",
            v.len(),
            percentile(&v, 0.5),
            percentile(&v, 0.99),
            percentile(&v, 1.0)
        );
    }
    println!("outcomes (tool errors by code; results as ok / notExecuted / a command's status):");
    for ((tool, outcome), n) in &tally.outcomes {
        println!("  {tool:<20} {outcome:<32} {n:>6}");
    }
    println!("server messages besides replies:");
    for (what, n) in notices {
        println!("  {what:<44} {n:>6}");
    }
    println!("server resources (after each checkpoint settled):");
    println!(
        "  {:<9} {:>6} {:>4} {:>8} {:>7} {:>7} {:>4} {:>5} {:>9} {:>6}",
        "at", "calls", "fds", "etc fds", "threads", "zombies", "tmp", "state", "rss KiB", "marked"
    );
    for (at, calls, s) in samples {
        println!(
            "  {at:<9} {calls:>6} {:>4} {:>8} {:>7} {:>7} {:>4} {:>5} {:>9} {:>6}",
            s.fds, s.etc_fds, s.threads, s.zombies, s.tmp, s.state, s.rss_kib, s.marked
        );
    }
}

/// The tolerances of the module docs; each broken one as a line.
fn checks(
    base: &Tally,
    tally: &Tally,
    reference: Option<&Sample>,
    end: &Sample,
    samples: &[(String, usize, Sample)],
) -> Vec<String> {
    let mut failures = Vec::new();
    for (what, t) in [("baseline", base), ("run", tally)] {
        if !t.protocol_errors.is_empty() {
            failures.push(format!(
                "{what}: protocol errors by code: {:?}",
                t.protocol_errors
            ));
        }
        if !t.unexpected.is_empty() {
            let examples: Vec<&String> = t.unexpected.iter().take(5).collect();
            failures.push(format!(
                "{what}: {} repl(ies) not as the mix expected, e.g.:\n    {}",
                t.unexpected.len(),
                examples
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("\n    ")
            ));
        }
    }
    let Some(r) = reference else {
        failures.push("no checkpoint was sampled".into());
        return failures;
    };
    for (at, _, s) in samples
        .iter()
        .skip_while(|(at, _, _)| at == "start" || at == "baseline")
    {
        let grew = [
            ("fds", s.fds, r.fds),
            ("threads", s.threads, r.threads),
            ("state entries", s.state, r.state),
        ];
        for (name, now, then) in grew {
            if now > then {
                let new = match name {
                    "fds" => extra(&s.fd_targets, &r.fd_targets),
                    "state entries" => extra(&s.state_paths, &r.state_paths),
                    _ => Vec::new(),
                };
                failures.push(format!(
                    "{name} grew after warm-up: {then} → {now} at {at}{}{}",
                    if new.is_empty() { "" } else { "; new: " },
                    new.join(", ")
                ));
            }
        }
        let etc_entries = count_dir(Path::new("/etc"));
        if s.etc_fds > etc_entries || s.deleted_fds > 0 {
            failures.push(format!(
                "at {at}: {} descriptors of /etc entries (/etc has {etc_entries}), {} of deleted files",
                s.etc_fds, s.deleted_fds
            ));
        }
        if s.copy_locks > MAX_COPY_LOCKS {
            failures.push(format!(
                "{} copy-slot locks at {at}; the slots are at most {MAX_COPY_LOCKS}",
                s.copy_locks
            ));
        }
        for (name, n) in [
            ("zombies", s.zombies),
            ("temp dirs", s.tmp),
            ("marked processes", s.marked),
        ] {
            if n > 0 {
                failures.push(format!("{n} {name} at {at} (the server had settled)"));
            }
        }
    }
    if end.rss_kib > r.rss_kib + RSS_TOLERANCE_KIB {
        failures.push(format!(
            "resident memory grew {} KiB after warm-up ({} → {} KiB; tolerance {RSS_TOLERANCE_KIB} KiB)",
            end.rss_kib - r.rss_kib,
            r.rss_kib,
            end.rss_kib
        ));
    }
    failures
}
