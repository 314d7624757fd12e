//! What the git directories' private copies cost (TRUST-1), whole processes against baselines
//! in the same run, rounds alternating so drift hits every column alike; wall time and the CPU
//! time of the process tree (user + system, from `getrusage(RUSAGE_CHILDREN)`):
//!
//! 1. `git status --short` on a committed 50 000-file repository: through `agent-exec call
//!    command` (the repository's git directory staged: found by the walk, seen through its
//!    overlay, nothing to apply) against the host's bare `git status`;
//! 2. `agent-exec call command true` in that repository against the same call in an empty
//!    workspace: the per-call cost of the walk, the stage and the check after the call;
//! 3. `git clone` of that repository (a bare copy inside the workspace, so it is staged too)
//!    through `agent-exec call command` against the host's bare `git clone`.
//!
//! ```text
//! cargo build --release -p agent-exec
//! cargo run --release -p agent-exec --example git_bench -- target/release/agent-exec [files] [rounds]
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)] // a measuring tool: a failure is a crash

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The children's CPU time (user + system) so far.
fn children_cpu() -> Duration {
    // SAFETY: all-zero is a valid rusage; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let tv = |t: libc::timeval| {
        Duration::new(
            u64::try_from(t.tv_sec).unwrap_or(0),
            u32::try_from(t.tv_usec).unwrap_or(0) * 1000,
        )
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Runs `cmd` to completion; panics unless it succeeded. Wall and CPU time.
fn timed(cmd: &mut Command) -> (Duration, Duration) {
    let cpu = children_cpu();
    let t = Instant::now();
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    let wall = t.elapsed();
    assert!(
        out.status.success() && !String::from_utf8_lossy(&out.stdout).contains("\"ok\":false"),
        "{cmd:?} failed: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (wall, children_cpu() - cpu)
}

struct Column {
    name: &'static str,
    wall: Vec<Duration>,
    cpu: Vec<Duration>,
}

impl Column {
    fn new(name: &'static str) -> Column {
        Column {
            name,
            wall: Vec::new(),
            cpu: Vec::new(),
        }
    }

    fn push(&mut self, (wall, cpu): (Duration, Duration)) {
        self.wall.push(wall);
        self.cpu.push(cpu);
    }

    fn median(v: &[Duration]) -> Duration {
        let mut v = v.to_vec();
        v.sort_unstable();
        v[v.len() / 2]
    }

    fn print(&self) {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "  {:<56} wall median {:>9.2} ms  cpu median {:>9.2} ms  (n={})",
            self.name,
            ms(Self::median(&self.wall)),
            ms(Self::median(&self.cpu)),
            self.wall.len()
        );
    }
}

fn ratio(a: &Column, b: &Column) {
    let r = |x: &[Duration], y: &[Duration]| {
        Column::median(x).as_secs_f64() / Column::median(y).as_secs_f64().max(1e-9)
    };
    println!(
        "  {} / {}: wall {:.2}x, cpu {:.2}x",
        a.name,
        b.name,
        r(&a.wall, &b.wall),
        r(&a.cpu, &b.cpu)
    );
}

fn git(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.current_dir(dir)
        .args(["-c", "user.name=B", "-c", "user.email=b@example.org"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null");
    c
}

fn call(agent_exec: &Path, state: &Path, workspace: &Path, script: &str) -> Command {
    let mut c = Command::new(agent_exec);
    c.arg("--state-dir")
        .arg(state)
        .args(["call", "command", "--workspace"])
        .arg(workspace)
        .arg("--json")
        .arg(serde_json::json!({"command": script, "timeoutMs": 300_000}).to_string());
    c
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let agent_exec = Path::new(
        args.get(1)
            .expect("usage: git_bench AGENT_EXEC [files] [rounds]"),
    );
    let files: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let rounds: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(11);
    let base = tempfile::tempdir().unwrap();
    let base = base.path().canonicalize().unwrap();
    let state = base.join("state");
    let repo = base.join("repo");
    let empty = base.join("empty");
    for d in [&state, &repo, &empty] {
        std::fs::create_dir_all(d).unwrap();
    }
    eprintln!("making a committed repository of {files} files …");
    for i in 0..files {
        let dir = repo.join(format!("d{:03}", i % 500));
        if i < 500 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        std::fs::write(dir.join(format!("f{i}.txt")), format!("{i}\n")).unwrap();
    }
    for step in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &["commit", "-q", "-m", "files"],
        &["clone", "-q", "--no-local", "--bare", ".", "src.git"],
    ] {
        assert!(git(&repo).args(step).status().unwrap().success());
    }
    std::fs::write(repo.join(".git/info/exclude"), "src.git\ndst\n").unwrap();

    let mut status_call = Column::new("call command 'git status' (50k files, staged)");
    let mut status_bare = Column::new("git status (host, bare)");
    let mut true_repo = Column::new("call command true (in that repository)");
    let mut true_empty = Column::new("call command true (empty workspace)");
    for _ in 0..rounds {
        status_call.push(timed(&mut call(
            agent_exec,
            &state,
            &repo,
            "git status --short",
        )));
        status_bare.push(timed(
            git(&repo).args(["status", "--short"]).stdout(Stdio::null()),
        ));
        true_repo.push(timed(&mut call(agent_exec, &state, &repo, "true")));
        true_empty.push(timed(&mut call(agent_exec, &state, &empty, "true")));
    }
    println!("git status of a {files}-file repository ({rounds} alternating rounds):");
    for c in [&status_call, &status_bare, &true_repo, &true_empty] {
        c.print();
    }
    ratio(&status_call, &status_bare);
    ratio(&true_repo, &true_empty);

    let clone_rounds = rounds.div_ceil(2);
    let mut clone_call = Column::new("call command 'git clone' (source staged)");
    let mut clone_bare = Column::new("git clone (host, bare)");
    for _ in 0..clone_rounds {
        let _ = std::fs::remove_dir_all(repo.join("dst"));
        clone_call.push(timed(&mut call(
            agent_exec,
            &state,
            &repo,
            "git clone -q --no-hardlinks src.git dst",
        )));
        std::fs::remove_dir_all(repo.join("dst")).unwrap();
        clone_bare.push(timed(git(&repo).args([
            "clone",
            "-q",
            "--no-hardlinks",
            "src.git",
            "dst",
        ])));
    }
    println!("git clone of that repository ({clone_rounds} alternating rounds):");
    clone_call.print();
    clone_bare.print();
    ratio(&clone_call, &clone_bare);
}
