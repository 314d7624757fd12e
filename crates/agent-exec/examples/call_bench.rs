//! Whole-process cost of `agent-exec call` against baselines in the same run (docs/architecture.md,
//! "Benchmarks"), rounds alternating so drift hits every column alike:
//!
//! 1. `agent-exec call command` running `true`, against
//!    `bwrap --ro-bind / / --dev /dev --unshare-all --die-with-parent sh -c true` (if bwrap is
//!    installed) and bare `sh -c true`; and `agent-exec call run_command` running `["true"]`
//!    (`--mode allow-all`, so no gate waits for an answer), against that `command`
//!    and bare `true`, reported as ratios;
//! 2. `tools/call` of `command` running `true` over one `agent-exec mcp` server's stdio, timed
//!    by this process as a client from writing the request to reading its reply, against the
//!    same client spawning `sh -c true` itself and waiting for it (the MCP ratio; no
//!    interpreter start-up inside the timing);
//! 3. `agent-exec call run` with `wc -l` on a generated file (200 MB by default), against bare
//!    `wc -l` on it (target: at most 1.1x). `run` is a one-call turn on a `mounted`
//!    workspace, so this includes mirroring the folder and the write-back check (RUN-11).
//!
//! 3. `agent-exec call run` on a generated 50 000-file `node_modules`-like tree, warm, against
//!    `find` stat-ing every file (target: at most 2.5x), and a long-lived server's turn after
//!    one change (the journaled refresh) against a full refresh.
//!
//! Prints min/median/max per column and the ratios of the medians. What `cargo xtask bench call`
//! would run:
//!
//! ```text
//! cargo build --release -p agent-exec
//! cargo run --release -p agent-exec --example call_bench -- target/release/agent-exec [MB] [rounds]
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)] // a measuring tool: a failure is a crash

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `cmd` to completion with its output captured; panics unless it succeeded.
fn timed(cmd: &mut Command) -> (Duration, String) {
    let t = Instant::now();
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    let elapsed = t.elapsed();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (elapsed, String::from_utf8_lossy(&out.stdout).into_owned())
}

struct Column {
    name: &'static str,
    samples: Vec<Duration>,
}

impl Column {
    fn new(name: &'static str) -> Column {
        Column {
            name,
            samples: Vec::new(),
        }
    }

    fn sorted(&self) -> Vec<Duration> {
        let mut v = self.samples.clone();
        v.sort_unstable();
        v
    }

    fn median(&self) -> Duration {
        let v = self.sorted();
        v[v.len() / 2]
    }

    fn print(&self) {
        let v = self.sorted();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "  {:<58} min {:>9.2} ms  median {:>9.2} ms  max {:>9.2} ms  (n={})",
            self.name,
            ms(v[0]),
            ms(v[v.len() / 2]),
            ms(v[v.len() - 1]),
            v.len()
        );
    }
}

fn ratio(a: &Column, b: &Column) {
    println!(
        "  ratio {} / {} = {:.2}x",
        a.name,
        b.name,
        a.median().as_secs_f64() / b.median().as_secs_f64()
    );
}

fn find(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.exists())
}

/// Section 2: one `agent-exec mcp` server, driven over its stdio.
struct Mcp {
    server: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Mcp {
    fn start(agent_exec: &Path, state: &Path, workspace: &Path) -> Mcp {
        let mut server = Command::new(agent_exec)
            .arg("--state-dir")
            .arg(state)
            .args(["mcp", "--workspace"])
            .arg(workspace)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = server.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(server.stdout.take().unwrap());
        let mut mcp = Mcp {
            server,
            stdin,
            stdout,
            next: 1,
        };
        let (_, init) = mcp.request(
            "initialize",
            r#"{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"call_bench","version":"0"}}"#,
        );
        assert!(init.contains("agent-exec"), "{init}");
        mcp.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        mcp
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends one request; the time to its reply (notifications in between skipped) and the reply.
    fn request(&mut self, method: &str, params: &str) -> (Duration, String) {
        use std::io::BufRead;
        let id = self.next;
        self.next += 1;
        let start = Instant::now();
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
        ));
        let wanted = format!(r#""id":{id}"#);
        loop {
            let mut reply = String::new();
            assert!(
                self.stdout.read_line(&mut reply).unwrap() > 0,
                "the server ended"
            );
            if reply.contains(&wanted) {
                return (start.elapsed(), reply);
            }
        }
    }

    /// Closing stdin ends an MCP session; the server exits.
    fn close(self) {
        let Mcp {
            mut server, stdin, ..
        } = self;
        drop(stdin);
        assert!(server.wait().unwrap().success());
    }
}

/// Section 2: the MCP round trip of `command true` against a bare spawn by the same client.
fn mcp_round_trip(agent_exec: &Path, state: &Path, workspace: &Path, sh: &Path, rounds: usize) {
    let mut mcp = Mcp::start(agent_exec, state, workspace);
    let call = r#"{"name":"command","arguments":{"command":"true"}}"#;
    let mut tools_call = Column::new("MCP tools/call command {\"command\":\"true\"}");
    let mut spawn = Column::new("the same client: spawn sh -c true, wait");
    // Warm-up: the server's first call walks /etc and probes the kernel.
    mcp.request("tools/call", call);
    for _ in 0..rounds.max(30) {
        let (d, reply) = mcp.request("tools/call", call);
        assert!(reply.contains(r#"\"exitCode\":0"#), "{reply}");
        tools_call.samples.push(d);
        let t = Instant::now();
        let status = Command::new(sh).args(["-c", "true"]).status().unwrap();
        assert!(status.success());
        spawn.samples.push(t.elapsed());
    }
    // An agent thinks between calls: the same call after the server sat idle. (A root host on
    // cgroup v1 then pays the kernel's grace period for the first move into the call's cgroup:
    // exec's cgroup module docs.)
    let mut after_idle = Column::new("  the same call after 200 ms idle");
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(200));
        let (d, reply) = mcp.request("tools/call", call);
        assert!(reply.contains(r#"\"exitCode\":0"#), "{reply}");
        after_idle.samples.push(d);
    }
    mcp.close();
    println!("MCP (target <= 1.5x):");
    tools_call.print();
    spawn.print();
    ratio(&tools_call, &spawn);
    after_idle.print();
    ratio(&after_idle, &spawn);
}

fn main() {
    let mut argv = std::env::args().skip(1);
    let Some(agent_exec) = argv.next().map(PathBuf::from) else {
        eprintln!(
            "usage: call_bench <path to a release-built agent-exec> [MB, default 200] [rounds, default 15]"
        );
        std::process::exit(2);
    };
    let agent_exec = agent_exec.canonicalize().unwrap();
    let mb: usize = argv.next().map_or(200, |s| s.parse().unwrap());
    let rounds: usize = argv.next().map_or(15, |s| s.parse().unwrap());

    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let state = base.join("state");
    let empty = base.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let big = base.join("big");
    std::fs::create_dir(&big).unwrap();
    {
        let line = b"2024-01-01,some text in a csv column,12345,more,fields\n";
        let mut f = std::io::BufWriter::new(std::fs::File::create(big.join("big.csv")).unwrap());
        let mut written = 0;
        while written < mb * 1_000_000 {
            f.write_all(line).unwrap();
            written += line.len();
        }
        f.flush().unwrap();
    }
    // A file changed within fsguard's racy window of the mirror's snapshot is hashed on every
    // call; a user's data file is usually older than that. Wait it out so the rounds measure
    // the common case, not the first seconds after the fixture was written.
    std::thread::sleep(fsguard::RACY_WINDOW + std::time::Duration::from_millis(200));
    let sh = find(&["/bin/sh", "/usr/bin/sh"]).unwrap();
    let wc = find(&["/usr/bin/wc", "/bin/wc"]).unwrap();
    let bwrap = find(&["/usr/bin/bwrap", "/bin/bwrap"]);
    let true_bin = find(&["/usr/bin/true", "/bin/true"]).unwrap();

    let call = |tool: &str, workspace: &Path, json: &str| {
        let mut cmd = Command::new(&agent_exec);
        cmd.arg("--state-dir")
            .arg(&state)
            .args(["call", tool, "--workspace"])
            .arg(workspace)
            .args(["--json", json]);
        cmd
    };

    println!(
        "call_bench: {} ; {rounds} rounds, alternating; {mb} MB file",
        agent_exec.display()
    );

    // 1. One `true`, whole process each.
    let mut command = Column::new("agent-exec call command {\"command\":\"true\"}");
    let mut bw = Column::new("bwrap --ro-bind / / --dev /dev --unshare-all sh -c true");
    let mut bare_sh = Column::new("sh -c true");
    let rc_json = r#"{"argv":["true"]}"#;
    let run_command_call = || {
        let mut cmd = call("run_command", &empty, rc_json);
        cmd.args(["--mode", "allow-all"]);
        cmd
    };
    let mut run_command = Column::new("agent-exec call run_command {\"argv\":[\"true\"]}");
    let mut bare_true = Column::new("true");
    // Warm-up: page cache, the state directory, the loader.
    timed(&mut call("command", &empty, r#"{"command":"true"}"#));
    timed(&mut run_command_call());
    for _ in 0..rounds {
        let (d, out) = timed(&mut run_command_call());
        assert!(out.contains("\"executed\":true"), "{out}");
        run_command.samples.push(d);
        let (d, _) = timed(&mut Command::new(&true_bin));
        bare_true.samples.push(d);
        let (d, out) = timed(&mut call("command", &empty, r#"{"command":"true"}"#));
        assert!(out.contains("\"ok\":true"), "{out}");
        command.samples.push(d);
        if let Some(bwrap) = &bwrap {
            let (d, _) = timed(
                Command::new(bwrap)
                    .args(["--ro-bind", "/", "/", "--dev", "/dev", "--unshare-all"])
                    .args(["--die-with-parent"])
                    .arg(&sh)
                    .args(["-c", "true"]),
            );
            bw.samples.push(d);
        }
        let (d, _) = timed(Command::new(&sh).args(["-c", "true"]));
        bare_sh.samples.push(d);
    }
    println!("command:");
    command.print();
    if bwrap.is_some() {
        bw.print();
    } else {
        println!("  bwrap: not installed (apt-get install bubblewrap), column skipped");
    }
    bare_sh.print();
    if bwrap.is_some() {
        ratio(&command, &bw);
    }
    ratio(&command, &bare_sh);
    println!("run_command:");
    run_command.print();
    bare_true.print();
    ratio(&run_command, &command);
    ratio(&run_command, &bare_true);

    mcp_round_trip(&agent_exec, &state, &empty, &sh, rounds);

    // 3. wc -l on the big file, whole process each.
    let run_json = r#"{"program":"wc","args":["-l","big.csv"]}"#;
    let mut run = Column::new("agent-exec call run wc -l big.csv (mirror + write-back)");
    let mut bare_wc = Column::new("wc -l big.csv");
    // Where `run`'s time goes: the turn's mirror alone, as the host does it for a workspace's
    // persistent mirror (refresh from the previous turn's record, finalize with its change
    // scan, record saved), in process; and, for comparison, a full copy from scratch.
    let mut mirror_only =
        Column::new("  of which fsguard::Mirror refresh + finalize + save_record");
    let mut full_copy = Column::new("  (a full Mirror create + finalize + remove, for comparison)");
    let wc_rounds = rounds.clamp(1, 7);
    timed(Command::new(&wc).args(["-l", "big.csv"]).current_dir(&big));
    let kept = base.join("bench-persistent-mirror");
    fsguard::Mirror::create(&big, &kept)
        .unwrap()
        .save_record()
        .unwrap();
    for _ in 0..wc_rounds {
        let (d, out) = timed(&mut call("run", &big, run_json));
        assert!(out.contains("\"ok\":true"), "{out}");
        run.samples.push(d);
        let (d, _) = timed(
            Command::new(&wc)
                .args(["-l", "big.csv"])
                .current_dir(&big)
                .env_clear()
                .env("LC_ALL", "C"),
        );
        bare_wc.samples.push(d);
        let t = Instant::now();
        let mut mirror = fsguard::Mirror::refresh(&big, &kept).unwrap();
        mirror.finalize().unwrap();
        mirror.save_record().unwrap();
        drop(mirror);
        mirror_only.samples.push(t.elapsed());
        let dest = base.join("bench-mirror");
        let t = Instant::now();
        let mut mirror = fsguard::Mirror::create(&big, &dest).unwrap();
        mirror.finalize().unwrap();
        drop(mirror);
        std::fs::remove_dir_all(&dest).unwrap();
        full_copy.samples.push(t.elapsed());
    }
    println!("run (target <= 1.1x):");
    run.print();
    bare_wc.print();
    mirror_only.print();
    full_copy.print();
    ratio(&run, &bare_wc);
    let rest = run.median().saturating_sub(mirror_only.median());
    println!(
        "  without the mirror: ({} - mirror) / {} = {:.2}x",
        run.name,
        bare_wc.name,
        rest.as_secs_f64() / bare_wc.median().as_secs_f64()
    );

    large_workspace(&agent_exec, &base, rounds);
}

/// `run` on a large workspace. Builds a `node_modules`-like tree (500 packages of
/// 100 small files: 50 000 files, ~200 MB, and `data.txt`), then, alternating, a warm
/// `agent-exec call run wc -l data.txt` (its persistent mirror refreshed: the target is at
/// most 2.5x) against `find TREE -type f -printf '%s %T@\n'` (one stat per file: the least a
/// metadata check can do); and, in process, the turn a long-lived server makes after an idle
/// period in which one file changed (`Mirror::refresh_journaled` + finalize + record, the
/// change journals kept between turns), against a full refresh of the same mirror.
fn large_workspace(agent_exec: &Path, base: &Path, rounds: usize) {
    let tree = base.join("node_modules-like");
    let blob: Vec<u8> = b"module.exports = function () { return 42; };\n"
        .iter()
        .copied()
        .cycle()
        .take(4000)
        .collect();
    for p in 0..500 {
        let pkg = tree.join("node_modules").join(format!("pkg-{p:03}"));
        std::fs::create_dir_all(pkg.join("lib")).unwrap();
        for f in 0..100 {
            let dir = if f < 20 { pkg.clone() } else { pkg.join("lib") };
            std::fs::write(dir.join(format!("file-{f:03}.js")), &blob).unwrap();
        }
    }
    std::fs::write(tree.join("data.txt"), "a\nb\nc\n").unwrap();
    // Files younger than the racy window are hashed at every call; a workspace's are older.
    std::thread::sleep(fsguard::RACY_WINDOW + std::time::Duration::from_millis(200));
    let state = base.join("state-large");
    let run_json = r#"{"program":"wc","args":["-l","data.txt"]}"#;
    let call = || {
        let mut cmd = Command::new(agent_exec);
        cmd.arg("--state-dir")
            .arg(&state)
            .args(["call", "run", "--workspace"])
            .arg(&tree)
            .args(["--json", run_json]);
        cmd
    };
    let find = find(&["/usr/bin/find", "/bin/find"]).unwrap();
    let find_cmd = || {
        let mut cmd = Command::new(&find);
        cmd.arg(&tree).args(["-type", "f", "-printf", "%s %T@\n"]);
        cmd
    };
    let mut warm = Column::new("agent-exec call run wc -l data.txt (warm, 50 000 files)");
    let mut walk = Column::new("find TREE -type f -printf '%s %T@\\n'");
    // The first call copies the tree; the second finds its files older than the racy window.
    timed(&mut call());
    timed(&mut find_cmd());
    let (_, out) = timed(&mut call());
    assert!(out.contains("\"ok\":true"), "{out}");
    for _ in 0..rounds.clamp(3, 11) {
        let (d, out) = timed(&mut call());
        assert!(out.contains("\"ok\":true"), "{out}");
        warm.samples.push(d);
        let (d, _) = timed(&mut find_cmd());
        walk.samples.push(d);
    }
    println!("run on a 50 000-file workspace (target <= 2.5x):");
    warm.print();
    walk.print();
    ratio(&warm, &walk);

    // A long-lived host's turn after an idle period, one file changed: with the folder journal
    // (`Session::keep_mirror_warm`, which `agent-exec mcp` does not use: it misses what inotify
    // cannot hear) and with the walk the shipped server does.
    let kept = base.join("bench-journaled-mirror");
    let options = fsguard::MirrorOptions::new().journaling(fsguard::Journaling::Both);
    let mut mirror = fsguard::Mirror::create_with(&tree, &kept, &options).unwrap();
    mirror.finalize().unwrap();
    mirror.save_record().unwrap();
    let mut journaled = Column::new("  turn after one change, folder journal (opt-in host)");
    let mut full = Column::new("  the same turn by the walk (agent-exec mcp)");
    let changed = tree.join("node_modules/pkg-123/lib/file-045.js");
    let change = |i: usize| {
        std::fs::write(&changed, format!("{i:04}{}", "x".repeat(3996))).unwrap();
    };
    // Warm-up: the creating walk's own copies are all in the mirror's journal once.
    mirror = mirror.refresh_journaled().unwrap();
    mirror.finalize().unwrap();
    mirror.save_record().unwrap();
    let turns = rounds.clamp(3, 11);
    for i in 0..turns {
        change(i);
        let t = Instant::now();
        mirror = mirror.refresh_journaled().unwrap();
        mirror.finalize().unwrap();
        mirror.save_record().unwrap();
        journaled.samples.push(t.elapsed());
    }
    drop(mirror);
    for i in 0..turns {
        change(turns + i);
        let t = Instant::now();
        let mut other = fsguard::Mirror::refresh_with(&tree, &kept, &options).unwrap();
        other.finalize().unwrap();
        other.save_record().unwrap();
        full.samples.push(t.elapsed());
    }
    journaled.print();
    full.print();
    ratio(&journaled, &full);
}
