//! The `background_command` soak: one host process, one [`BackgroundTasks`]
//! session, N tasks running at all times for M minutes with mixed lifetimes and behaviours —
//! quick ones, sleepers, chatty ones whose `error:` lines fire reports, ones the soak cancels
//! mid-run, ones stopped by a short time limit, ones writing 5 MB, watchers, failing ones.
//! Every 10 s it samples its own open fds, threads and RSS; at the end it shuts the session
//! down and checks that nothing it started is alive, no log file is left (nor held open once
//! removed), and that fds, threads and RSS did not grow between the warm-up sample (60 s, or
//! 1/6 of a short run) and the end: fds and threads by at most 2 (the lowest of the 20 s from
//! each, since tasks that are starting or ending hold a dozen fds for a moment), RSS by at most
//! 20 %; after the shutdown, threads as before the first task (+2) and fds as before plus what
//! stayed unchanged all run (the sandbox's pins, opened at the first start).
//!
//! `cargo run --release -p run-command-tool --example background_soak -- --minutes M --tasks N [--json]`
//! (or `cargo xtask soak`). Exit status 1 on growth, a survivor, a leftover log, a task that
//! could not start, an outcome other than the one its kind expects, a task that is no leg of a
//! completed group, or a removed log file still held open after the shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a measuring tool: a failure is a crash

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use run_command_tool::background::{
    BackgroundArgs, BackgroundConfig, BackgroundTasks, Event, Final, Launch, Origin, OriginState,
};
use run_command_tool::{DenyAllAsker, Mode, Policy, RunCommandOptions, RunCommandState, Status};
use toolscope::{CallContext, CancelReason};

/// What a task does, and so how it must end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// `echo ok`: exits 0 at once.
    Quick,
    /// `sleep 1–20 s` (bare argv, or inside `sh -c` with output around it): exits 0.
    Sleeper,
    /// `seq` bursts with `error:` lines and pauses: keyword reports fire; exits 0.
    Chatty,
    /// `sleep 60` cancelled by the soak after 1–5 s (a child in the background too).
    Cancelled,
    /// `sleep 60` (with a background child) under a 2 s time limit: times out.
    TimeLimit,
    /// 5 MB of `x` on one line, then a line more: exits 0.
    BigOutput,
    /// `echo serving --watch; sleep 5` (a watcher, allowed here, RC-15): exits 0.
    Watcher,
    /// `error:` on stderr and exit 3.
    Failing,
}

/// The order kinds are started in, round and round (quick ones and sleepers most often).
const CYCLE: [Kind; 12] = [
    Kind::Quick,
    Kind::Sleeper,
    Kind::Chatty,
    Kind::Cancelled,
    Kind::Quick,
    Kind::TimeLimit,
    Kind::BigOutput,
    Kind::Watcher,
    Kind::Sleeper,
    Kind::Failing,
    Kind::Quick,
    Kind::Sleeper,
];

/// Legs per group: every `GROUP` starts share one origin, so groups complete all the time.
const GROUP: u64 = 5;
/// Origin task names rotate over this many (each group is a new turn of one of them).
const ORIGIN_NAMES: u64 = 4;
/// How often the host samples itself.
const SAMPLE_EVERY: Duration = Duration::from_secs(10);
/// Slack for fds and threads between the warm-up sample and the end.
const SLACK: i64 = 2;
/// Descriptors the host makes once, at its first tasks, and keeps (one pipe and three sockets:
/// the runtime's and proctree's own), which change while tasks also use pipes and sockets and
/// so are not "unchanged all run": measured the same after 272 tasks (1 min) and after 2650
/// (10 min), so they do not grow with the run.
const ONCE_FDS: i64 = 4;
/// RSS may grow by at most this fraction.
const RSS_GROWTH: f64 = 0.20;

/// Tiny xorshift: sleep lengths and cancel delays vary without a dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One look at the host process.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at_s: u64,
    fds: i64,
    threads: i64,
    rss_kb: i64,
    running: usize,
}

fn sample(start: Instant, running: usize) -> Sample {
    let fds = std::fs::read_dir("/proc/self/fd").map_or(-1, |d| d.count() as i64);
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1)
    };
    Sample {
        at_s: start.elapsed().as_secs(),
        fds,
        threads: field("Threads:"),
        rss_kb: field("VmRSS:"),
        running,
    }
}

/// Everything counted while the soak runs.
#[derive(Default)]
struct Counts {
    started_by_kind: BTreeMap<String, u64>,
    start_failures: BTreeMap<String, u64>,
    failure_examples: Vec<String>,
    events: BTreeMap<&'static str, u64>,
    reports_by_kind: BTreeMap<String, u64>,
    unexpected: Vec<String>,
    unexpected_count: u64,
    cancels_sent: u64,
    legs_completed: u64,
    finished_at_shutdown: u64,
}

/// The command for task number `n` of `kind`, carrying `marker` (the survivor scan's key) in
/// every process that could outlive its shell, and the time limit it runs under.
fn command(kind: Kind, marker: &str, rng: &mut Rng) -> (Vec<String>, Option<Duration>) {
    let sh = |script: String| vec!["sh".into(), "-c".into(), script, format!("soak{marker}")];
    match kind {
        Kind::Quick => (sh("echo ok".into()), None),
        Kind::Sleeper => {
            let secs = 1 + rng.below(20);
            if rng.below(2) == 0 {
                (vec!["sleep".into(), format!("{secs}.{marker}")], None)
            } else {
                (
                    sh(format!("echo start; sleep {secs}.{marker}; echo end")),
                    None,
                )
            }
        }
        Kind::Chatty => (
            sh(format!(
                "for i in 1 2 3; do seq 1 4000; echo \"error: burst $i failed\"; \
                 sleep 2.{marker}; done; echo quiet"
            )),
            None,
        ),
        Kind::Cancelled => (sh(format!("sleep 60.{marker} & sleep 60.{marker}")), None),
        Kind::TimeLimit => (
            sh(format!("sleep 60.{marker} & sleep 60.{marker}")),
            Some(Duration::from_secs(2)),
        ),
        Kind::BigOutput => (
            sh("head -c 5000000 /dev/zero | tr '\\0' x; echo; echo big-done".into()),
            None,
        ),
        Kind::Watcher => (sh(format!("echo serving --watch; sleep 5.{marker}")), None),
        Kind::Failing => (sh("echo 'error: it broke' >&2; exit 3".into()), None),
    }
}

/// Whether `outcome` is how a task of `kind` must end (before the shutdown).
fn expected(kind: Kind, outcome: &Final) -> bool {
    let exited = |code| outcome.status == Some(Status::Exited) && outcome.exit_code == Some(code);
    match kind {
        Kind::Quick => exited(0) && outcome.output.contains("ok"),
        Kind::Sleeper | Kind::Chatty | Kind::Watcher => exited(0),
        Kind::BigOutput => exited(0) && outcome.output.contains("big-done"),
        Kind::Failing => exited(3),
        Kind::Cancelled => outcome.status == Some(Status::Cancelled),
        Kind::TimeLimit => outcome.status == Some(Status::TimedOut),
    }
}

struct Host {
    tasks: BackgroundTasks,
    policy: Policy,
    state: Arc<RunCommandState>,
    home: PathBuf,
    proj: PathBuf,
    pid: u32,
    n: u64,
    rng: Rng,
    markers: Vec<String>,
    kinds: HashMap<String, Kind>,
    /// Every task id started, with its kind (to name the kind of a leaked log descriptor).
    ever: HashMap<String, Kind>,
    cancels: Vec<(Instant, String)>,
    counts: Counts,
}

impl Host {
    /// Starts tasks until `want` run (at most `want` attempts, so a start that keeps failing
    /// is counted, not spun on).
    async fn refill(&mut self, want: usize) {
        for _ in 0..want {
            if self.tasks.running() >= want {
                return;
            }
            self.start_one().await;
        }
    }

    async fn start_one(&mut self) {
        let n = self.n;
        self.n += 1;
        let kind = CYCLE[(n % CYCLE.len() as u64) as usize];
        let marker = format!("{}{n:06}", self.pid);
        let (argv, time_limit) = command(kind, &marker, &mut self.rng);
        self.markers.push(marker);
        let group = n / GROUP;
        let launch = Launch {
            workdir: Arc::new(fsguard::RootLease::acquire(&self.proj).unwrap()),
            policy: &self.policy,
            asker: &DenyAllAsker,
            state: Arc::clone(&self.state),
            options: RunCommandOptions::for_home(&self.home),
            time_limit,
            origin: Origin {
                task: format!("origin-{}", group % ORIGIN_NAMES),
                turn: format!("turn-{group}"),
            },
            origin_state: OriginState::Ended,
            stop_when: None,
        };
        let (ctx, _handle) = CallContext::standalone();
        let result = self
            .tasks
            .start(BackgroundArgs::new(argv.clone()), launch, &ctx)
            .await;
        let name = format!("{kind:?}");
        let failure = match result {
            Ok(started) if started.executed => match started.task_id {
                Some(id) => {
                    *self.counts.started_by_kind.entry(name).or_default() += 1;
                    if kind == Kind::Cancelled {
                        let after = Duration::from_millis(1000 + self.rng.below(4000));
                        self.cancels.push((Instant::now() + after, id.clone()));
                    }
                    self.ever.insert(id.clone(), kind);
                    self.kinds.insert(id, kind);
                    return;
                }
                None => ("NO_TASK_ID".to_owned(), started.message),
            },
            Ok(started) => ("NOT_EXECUTED".to_owned(), started.message),
            Err(e) => (e.code().as_str().to_owned(), e.message().to_owned()),
        };
        *self
            .counts
            .start_failures
            .entry(failure.0.clone())
            .or_default() += 1;
        if self.counts.failure_examples.len() < 5 {
            let line = format!("{name} {argv:?}: {} — {}", failure.0, failure.1);
            eprintln!("soak: a task failed to start: {line}");
            self.counts.failure_examples.push(line);
        }
    }

    /// Sends the cancels that are due (each in its own task: `cancel` waits for the tree).
    fn cancel_due(&mut self) {
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = self.cancels.drain(..).partition(|(t, _)| *t <= now);
        self.cancels = later;
        for (_, id) in due {
            self.counts.cancels_sent += 1;
            let tasks = self.tasks.clone();
            tokio::spawn(async move {
                // Already ended (it cannot, a 60 s sleep) or unknown: the outcome check says so.
                let _ = tasks.cancel(&id).await;
            });
        }
    }

    fn event(&mut self, e: Event, shutting_down: bool) {
        let kind_name = match &e {
            Event::Started { .. } => "started",
            Event::Report { .. } => "report",
            Event::Finished { .. } => "finished",
            Event::GroupCompleted { .. } => "groupCompleted",
        };
        *self.counts.events.entry(kind_name).or_default() += 1;
        match e {
            Event::Report { task_id, .. } => {
                let k = self
                    .kinds
                    .get(&task_id)
                    .map_or("?".into(), |k| format!("{k:?}"));
                *self.counts.reports_by_kind.entry(k).or_default() += 1;
            }
            Event::Finished {
                task_id, outcome, ..
            } => {
                let Some(kind) = self.kinds.remove(&task_id) else {
                    self.note_unexpected(format!("{task_id}: finished but never started here"));
                    return;
                };
                if shutting_down {
                    self.counts.finished_at_shutdown += 1;
                } else if !expected(kind, &outcome) {
                    let mut output = outcome.output.clone();
                    output.truncate(200);
                    self.note_unexpected(format!(
                        "{task_id} ({kind:?}): status {:?} exit {:?} error {:?} message {:?} output {output:?}",
                        outcome.status, outcome.exit_code, outcome.error, outcome.message
                    ));
                }
            }
            Event::GroupCompleted { legs, .. } => self.counts.legs_completed += legs.len() as u64,
            Event::Started { .. } => {}
        }
    }

    fn note_unexpected(&mut self, line: String) {
        self.counts.unexpected_count += 1;
        if self.counts.unexpected.len() < 10 {
            eprintln!("soak: unexpected outcome: {line}");
            self.counts.unexpected.push(line);
        }
    }
}

fn print_sample(s: &Sample, c: &Counts, started: u64) {
    let failed: u64 = c.start_failures.values().sum();
    let ev = |k| c.events.get(k).copied().unwrap_or(0);
    println!(
        "t={:>4}s fds={:>4} threads={:>3} rss={:>7} kB running={:>3} started={started} \
         start-failures={failed} events: started={} report={} finished={} groupCompleted={}",
        s.at_s,
        s.fds,
        s.threads,
        s.rss_kb,
        s.running,
        ev("started"),
        ev("report"),
        ev("finished"),
        ev("groupCompleted"),
    );
}

/// Our open descriptors by what they point at (numbers → `N`, the soak's temp dir → `<tmp>`).
fn fd_census(tmp: &Path) -> BTreeMap<String, u64> {
    let tmp = tmp.display().to_string();
    let mut census = BTreeMap::new();
    for e in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let target = std::fs::read_link(e.path()).map_or_else(
            |_| "?".to_owned(),
            |t| t.display().to_string().replace(&tmp, "<tmp>"),
        );
        let mut key = String::new();
        for c in target.chars() {
            if c.is_ascii_digit() {
                if !key.ends_with('N') {
                    key.push('N');
                }
            } else {
                key.push(c);
            }
        }
        *census.entry(key).or_default() += 1;
    }
    census
}

/// Our threads by name (`/proc/self/task/*/comm`): which pool a change of the count is in.
fn thread_census() -> BTreeMap<String, u64> {
    let mut census = BTreeMap::new();
    for e in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        *census.entry(comm.trim().to_owned()).or_default() += 1;
    }
    census
}

/// The task ids of log files we still hold open although they were removed, by kind.
fn leaked_logs(ever: &HashMap<String, Kind>) -> BTreeMap<String, u64> {
    let mut by_kind = BTreeMap::new();
    for e in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        let target = target.display().to_string();
        let Some(name) = target.strip_suffix(".log (deleted)") else {
            continue;
        };
        let id = name.rsplit('/').next().unwrap_or(name);
        let kind = ever.get(id).map_or("?".to_owned(), |k| format!("{k:?}"));
        *by_kind.entry(kind).or_default() += 1;
    }
    by_kind
}

/// PIDs (other than ours) whose command line carries one of `markers`, or whose parent is us.
fn survivors(markers: &[String]) -> Vec<String> {
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // `pid (comm) state ppid …`; comm may hold spaces, so split after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(me) || markers.iter().any(|m| text.contains(m.as_str())) {
            found.push(format!("{pid}: {}", text.trim()));
        }
    }
    found
}

fn logs_left(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir).map_or(Vec::new(), |rd| {
        rd.flatten()
            .map(|e| e.path().display().to_string())
            .collect()
    })
}

#[tokio::main]
async fn main() {
    let mut minutes = 10.0_f64;
    let mut want = 20_usize;
    let mut json = false;
    let mut argv = std::env::args().skip(1);
    while let Some(a) = argv.next() {
        match a.as_str() {
            "--minutes" => {
                minutes = argv
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--minutes M")
            }
            "--tasks" => want = argv.next().and_then(|v| v.parse().ok()).expect("--tasks N"),
            "--json" => json = true,
            other => panic!("unknown argument {other:?}; use --minutes M --tasks N [--json]"),
        }
    }
    let total = Duration::from_secs_f64(minutes * 60.0);
    let warm_up = Duration::from_secs(60).min(total / 6);

    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let home = base.join("home");
    let proj = home.join("proj");
    for d in [&proj, &home.join(".cache")] {
        std::fs::create_dir_all(d).unwrap();
    }
    let log_dir = base.join("state/sessions/soak/background");
    let mut config = BackgroundConfig::new(&log_dir);
    config.max_tasks = want;
    let (tasks, mut events) = BackgroundTasks::new(config);
    let pid = std::process::id();
    let mut host = Host {
        tasks,
        policy: Policy::load(Mode::Auto, None).unwrap(),
        state: Arc::default(),
        home,
        proj,
        pid,
        n: 0,
        rng: Rng(u64::from(pid).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
        markers: Vec::new(),
        kinds: HashMap::new(),
        ever: HashMap::new(),
        cancels: Vec::new(),
        counts: Counts::default(),
    };
    println!(
        "soak: {minutes} min, {want} tasks, warm-up sample at {} s, host pid {pid}, sandbox {}",
        warm_up.as_secs(),
        if testkit::sandbox_available() {
            "available"
        } else {
            "UNAVAILABLE (starts will fail)"
        }
    );

    // Before any task: what the host holds with the session made (the policy's pins, the
    // runtime's workers). After the shutdown it must hold no more.
    let before = sample(Instant::now(), 0);
    let start = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut next_sample = start + SAMPLE_EVERY;
    let mut census_warm = None;
    let mut threads_warm = BTreeMap::new();
    loop {
        tokio::select! {
            e = events.next() => match e {
                Some(e) => host.event(e, false),
                None => {
                    eprintln!("soak: the event stream closed while the session runs");
                    break;
                }
            },
            _ = tick.tick() => {
                host.cancel_due();
                host.refill(want).await;
                if start.elapsed() >= total {
                    break;
                }
                if Instant::now() >= next_sample {
                    next_sample += SAMPLE_EVERY;
                    // Sampled with every slot filled, so the samples compare like with like.
                    let s = sample(start, host.tasks.running());
                    print_sample(&s, &host.counts, host.n);
                    if census_warm.is_none() && s.at_s >= warm_up.as_secs() {
                        census_warm = Some(fd_census(&base));
                        threads_warm = thread_census();
                    }
                    samples.push(s);
                }
            }
        }
    }
    let last_loaded = sample(start, host.tasks.running());
    print_sample(&last_loaded, &host.counts, host.n);
    let census_end = fd_census(&base);
    let threads_end = thread_census();
    let leaked_end = leaked_logs(&host.ever);

    // The end: shut down, then drain until every task's end was told.
    host.tasks.shutdown(CancelReason::Requested).await;
    let drain_until = Instant::now() + Duration::from_secs(10);
    while !host.kinds.is_empty() && Instant::now() < drain_until {
        match tokio::time::timeout(Duration::from_millis(500), events.next()).await {
            Ok(Some(e)) => host.event(e, true),
            Ok(None) => break,
            Err(_) => {}
        }
    }
    while let Some(e) = events.try_next() {
        host.event(e, true);
    }
    let not_finished = host.kinds.len();
    // Let the runtime's idle blocking threads retire (tokio keeps them 10 s) before the
    // after-shutdown look.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let after = sample(start, host.tasks.running());
    let census_after = fd_census(&base);
    let threads_after = thread_census();
    let leaked = leaked_logs(&host.ever);
    let alive = survivors(&host.markers);
    let left = logs_left(&log_dir);

    let warm = samples
        .iter()
        .find(|s| s.at_s >= warm_up.as_secs())
        .copied()
        .unwrap_or(last_loaded);
    let max = |f: fn(&Sample) -> i64| {
        samples
            .iter()
            .chain([&last_loaded])
            .map(f)
            .max()
            .unwrap_or(-1)
    };
    let rss_growth = (last_loaded.rss_kb - warm.rss_kb) as f64 / warm.rss_kb.max(1) as f64;
    let mut problems = Vec::new();
    // Under load a sample also counts the descriptors and threads of tasks that are just
    // starting or ending (a dozen fds each), so the loaded comparison takes the lowest of three
    // samples (20 s) from the warm-up and at the end: what the tasks add comes and goes, a
    // leak only rises.
    let window = |from: u64, f: fn(&Sample) -> i64| {
        samples
            .iter()
            .chain([&last_loaded])
            .filter(|s| s.at_s >= from && s.at_s <= from + 20)
            .map(f)
            .min()
            .unwrap_or(-1)
    };
    let end_from = last_loaded.at_s.saturating_sub(20);
    for (name, f) in [
        ("fds", (|s: &Sample| s.fds) as fn(&Sample) -> i64),
        ("threads", |s: &Sample| s.threads),
    ] {
        let (w, l) = (window(warm.at_s, f), window(end_from, f));
        if l > w + SLACK {
            problems.push(format!(
                "{name} grew: lowest {w} in the 20 s from the warm-up, lowest {l} in the last 20 s"
            ));
        }
    }
    if after.threads > before.threads + SLACK {
        problems.push(format!(
            "threads after shutdown {} > {} before the first task",
            after.threads, before.threads
        ));
    }
    if rss_growth > RSS_GROWTH {
        problems.push(format!(
            "RSS grew {:.1} %: {} kB after warm-up, {} kB at the end",
            rss_growth * 100.0,
            warm.rss_kb,
            last_loaded.rss_kb
        ));
    }
    if !alive.is_empty() {
        problems.push(format!("{} survivor(s): {alive:?}", alive.len()));
    }
    // The files are gone, but a removed log still held open keeps its descriptor and its
    // disk blocks (BG-6: the log goes when the task ends).
    let still_open: u64 = leaked.values().sum();
    if still_open > 0 {
        problems.push(format!(
            "{still_open} removed log file(s) still open after shutdown, by task kind: {leaked:?}"
        ));
    }
    if !left.is_empty() {
        problems.push(format!("{} log file(s) left: {left:?}", left.len()));
    }
    let failed: u64 = host.counts.start_failures.values().sum();
    if failed > 0 {
        problems.push(format!(
            "{failed} task(s) failed to start: {:?}; e.g. {:?}",
            host.counts.start_failures, host.counts.failure_examples
        ));
    }
    if host.counts.unexpected_count > 0 {
        problems.push(format!(
            "{} unexpected outcome(s), e.g. {:?}",
            host.counts.unexpected_count, host.counts.unexpected
        ));
    }
    if not_finished > 0 {
        problems.push(format!(
            "{not_finished} task(s) never reported their end after shutdown"
        ));
    }
    // Legs of one origin start over time, so a group may complete more than once; but every
    // task must be a leg of exactly one completed group.
    if host.counts.legs_completed != host.n - failed {
        problems.push(format!(
            "{} task(s) started, {} leg(s) in completed groups",
            host.n - failed,
            host.counts.legs_completed
        ));
    }

    println!();
    println!(
        "{:<10} {:>12} {:>12} {:>12} {:>12} {:>16}",
        "", "before start", "after warm-up", "end (loaded)", "max", "after shutdown"
    );
    println!(
        "{:<10} {:>12} {:>12} {:>12} {:>12} {:>16}",
        "fds",
        before.fds,
        warm.fds,
        last_loaded.fds,
        max(|s| s.fds),
        after.fds
    );
    println!(
        "{:<10} {:>12} {:>12} {:>12} {:>12} {:>16}",
        "threads",
        before.threads,
        warm.threads,
        last_loaded.threads,
        max(|s| s.threads),
        after.threads
    );
    println!(
        "{:<10} {:>12} {:>12} {:>12} {:>12} {:>16}",
        "rss kB",
        before.rss_kb,
        warm.rss_kb,
        last_loaded.rss_kb,
        max(|s| s.rss_kb),
        after.rss_kb
    );
    println!(
        "(warm-up sample at t={} s, end at t={} s; {} tasks started, {} cancels sent, \
         {} ended by the shutdown; survivors {}, logs left {})",
        warm.at_s,
        last_loaded.at_s,
        host.n,
        host.counts.cancels_sent,
        host.counts.finished_at_shutdown,
        alive.len(),
        left.len()
    );
    // The descriptors whose count changed between the three looks (the constant ones —
    // the policy's and the runtime's — say nothing about a leak), and the rest in one sum.
    let census_warm = census_warm.unwrap_or_default();
    let mut keys: Vec<&String> = census_warm
        .keys()
        .chain(census_end.keys())
        .chain(census_after.keys())
        .collect();
    keys.sort();
    keys.dedup();
    let n = |c: &BTreeMap<String, u64>, k: &str| c.get(k).copied().unwrap_or(0);
    // A removed file held open is never a pin, even when its count stood still (the table
    // keeps the last ended tasks, so a leak through it stops growing once the table is full).
    let (changing, constant): (Vec<&String>, Vec<&String>) = keys.into_iter().partition(|k| {
        k.ends_with("(deleted)")
            || n(&census_warm, k) != n(&census_end, k)
            || n(&census_end, k) != n(&census_after, k)
    });
    let fd_changes: BTreeMap<&String, [u64; 3]> = changing
        .iter()
        .map(|k| {
            let k = *k;
            (
                k,
                [n(&census_warm, k), n(&census_end, k), n(&census_after, k)],
            )
        })
        .collect();
    let constant_fds: u64 = constant.iter().map(|k| n(&census_after, k)).sum();
    // After the shutdown the host may hold what it held before the first task and what it
    // opened once and kept unchanged all run (the sandbox's pins, opened at the first start);
    // anything more stayed behind from tasks (beyond the few it makes once, ONCE_FDS).
    let allowed = (constant_fds as i64).max(before.fds) + ONCE_FDS + SLACK;
    if after.fds > allowed {
        problems.push(format!(
            "fds after shutdown {}: more than the {allowed} held before the first task or \
             unchanged all run",
            after.fds
        ));
    }
    println!();
    println!(
        "open descriptors that changed, or of removed files (after warm-up / end / after shutdown):"
    );
    for (k, [w, e, a]) in &fd_changes {
        println!("  {w:>5} {e:>5} {a:>5}  {k}");
    }
    println!(
        "  ({constant_fds} more, constant: the policy's pins of /etc, /usr…, the runtime's); \
         removed logs still open, by task kind: end {leaked_end:?}, after shutdown {leaked:?}"
    );
    println!(
        "threads by name: after warm-up {threads_warm:?}, end {threads_end:?}, after shutdown \
         {threads_after:?}"
    );
    let verdict = if problems.is_empty() { "PASS" } else { "FAIL" };
    for p in &problems {
        println!("soak: FAIL: {p}");
    }
    println!("soak: {verdict}");

    if json {
        let s = |s: &Sample| serde_json::json!({"atS": s.at_s, "fds": s.fds, "threads": s.threads, "rssKb": s.rss_kb, "running": s.running});
        let summary = serde_json::json!({
            "verdict": verdict,
            "minutes": minutes,
            "tasks": want,
            "started": host.n,
            "startedByKind": host.counts.started_by_kind,
            "startFailures": host.counts.start_failures,
            "events": host.counts.events,
            "reportsByKind": host.counts.reports_by_kind,
            "cancelsSent": host.counts.cancels_sent,
            "legsInCompletedGroups": host.counts.legs_completed,
            "endedByShutdown": host.counts.finished_at_shutdown,
            "unexpectedOutcomes": host.counts.unexpected_count,
            "beforeStart": s(&before),
            "warmUp": s(&warm),
            "end": s(&last_loaded),
            "afterShutdown": s(&after),
            "max": {"fds": max(|s| s.fds), "threads": max(|s| s.threads), "rssKb": max(|s| s.rss_kb)},
            "rssGrowthPct": (rss_growth * 1000.0).round() / 10.0,
            "survivors": alive,
            "logsLeft": left,
            "problems": problems,
            "fdsThatChanged": fd_changes,
            "fdsConstant": constant_fds,
            "threadsByName": {"warmUp": threads_warm, "end": threads_end, "afterShutdown": threads_after},
            "removedLogsStillOpen": {"end": leaked_end, "afterShutdown": leaked},
        });
        println!("{summary}");
    }
    drop(host);
    drop(dir);
    if verdict == "FAIL" {
        std::process::exit(1);
    }
}
