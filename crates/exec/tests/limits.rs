//! The per-call resource limits hold the machine (LIM-1, LIM-2; issue 20): a fork bomb, a
//! 20 GiB allocation, a 10 GiB write into the temp dir and 100 000 open files are each
//! contained, the run ends with [`End::LimitExceeded`] naming the limit where the kernel counts
//! the hit, a concurrent call still answers, and nothing survives. Run as root (cgroup v1 here)
//! and again as uid 65534 (rlimits in the call's user namespace, the temp dir's tmpfs) by
//! `every_test_also_holds_unprivileged`.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::num::{NonZeroU32, NonZeroU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

use exec::{End, Job, Limit, Limits, OnCap, ResourceLimits, SandboxSpec, WorkDir};
use fsguard::{RelPath, RootLease};
use testkit::{marker, sandbox_available};
use toolscope::CallContext;

const UNPRIVILEGED_ENV: &str = "AGENT_EXEC_LIMITS_UNPRIVILEGED";
const MIB: u64 = 1 << 20;

mod common;
use common::{Fixture, fixture};

/// Small limits, so that each test reaches them in a moment.
fn small() -> ResourceLimits {
    ResourceLimits {
        processes: NonZeroU32::new(64).unwrap(),
        memory: NonZeroU64::new(256 * MIB).unwrap(),
        temp_dir: NonZeroU64::new(32 * MIB).unwrap(),
        open_files: NonZeroU32::new(512).unwrap(),
    }
}

fn job(f: &Fixture, script: &str, resources: ResourceLimits, timeout: Duration) -> Job {
    let mut sandbox = SandboxSpec::for_command(
        &RootLease::acquire(&f.work).unwrap(),
        &RootLease::acquire(&f.temp).unwrap(),
        vec![],
    )
    .unwrap();
    sandbox.resources = resources;
    Job {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        workdir: WorkDir {
            lease: Arc::new(RootLease::acquire(&f.work).unwrap()),
            rel: RelPath::root(),
        },
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("HOME".into(), f.temp.join("home").into_os_string()),
            ("TMPDIR".into(), f.temp.join("tmp").into_os_string()),
        ],
        sandbox,
        limits: Limits {
            timeout,
            stdout_cap: 64 * 1024,
            stderr_cap: 64 * 1024,
            on_cap: OnCap::Truncate,
        },
        merge_stderr: false,
    }
}

async fn run(job: Job) -> exec::Outcome {
    let (ctx, _cancel) = CallContext::standalone();
    exec::run(job, &ctx).await.unwrap()
}

/// Whether the kernel counts hits of `limit` here (a cgroup holds it), so the run must end
/// with `LimitExceeded`; elsewhere the limit still holds but the call ends another way.
fn counted(out: &exec::Outcome, limit: &str) -> bool {
    out.limits
        .split("; ")
        .any(|part| part.contains(limit) && part.contains("cgroup"))
}

fn assert_none_alive(marker: &str) {
    let alive = testkit::alive_with(marker);
    assert!(alive.is_empty(), "survivors: {alive:?}");
}

/// A concurrent call answers while `load` runs (LIM-2: the host stays responsive); returns how
/// long it took, which the test prints (never asserts on: house rule 6).
async fn echo_while(f: &Fixture, load: Job) -> (exec::Outcome, Duration) {
    let loaded = tokio::spawn(run(load));
    tokio::time::sleep(Duration::from_millis(700)).await;
    let start = Instant::now();
    let echo = run(job(
        f,
        "echo still here",
        ResourceLimits::for_command(),
        Duration::from_secs(60),
    ))
    .await;
    let took = start.elapsed();
    assert_eq!(String::from_utf8_lossy(&echo.stdout), "still here\n");
    (loaded.await.unwrap(), took)
}

#[tokio::test]
async fn a_fork_bomb_is_held_at_the_process_limit_and_stopped() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    let m = marker();
    let script = format!("b() {{ sleep {m} & b | b & }}; b; wait");
    let (out, took) = echo_while(&f, job(&f, &script, small(), Duration::from_secs(6))).await;
    eprintln!("echo during the bomb: {took:?}; {}", out.limits);
    // Counted by the cgroup as root. Where `RLIMIT_NPROC` in the call's user namespace holds
    // it, a sample of the command's own /proc sees it only when it finds the tree near the
    // limit (processes whose forks failed keep leaving): a hit, or the deadline.
    let hit = matches!(out.end, End::LimitExceeded(hit) if hit.limit == Limit::Processes);
    if counted(&out, "processes") {
        assert!(hit, "{:?}", out.end);
    } else {
        assert!(
            out.limits
                .contains("processes 64: rlimit in the call's user namespace"),
            "{}",
            out.limits
        );
        assert!(hit || out.end == End::TimedOut, "{:?}", out.end);
    }
    assert!(String::from_utf8_lossy(&out.stderr).contains("fork"));
    assert_none_alive(&m);
}

/// The first process joins each v1 cgroup through `tasks` (itself, one thread: no global lock,
/// issue 21); what it and its children start is inside all the same.
/// A limit below its minimum (`exec::limits::MIN_MEMORY`, …) would fail as something else
/// — one byte of memory made the shell "exit 127", eight files a refused set-up — so nothing
/// starts and the error names the limit (rule 5).
#[tokio::test]
async fn a_limit_below_its_minimum_is_refused_before_anything_starts() {
    let f = fixture();
    let m = marker();
    for (resources, says) in [
        (
            ResourceLimits {
                memory: NonZeroU64::new(1).unwrap(),
                ..small()
            },
            "a memory of 1 bytes",
        ),
        (
            ResourceLimits {
                open_files: NonZeroU32::new(8).unwrap(),
                ..small()
            },
            "openFiles=8",
        ),
    ] {
        let script = format!("echo {m} > started");
        let (ctx, _cancel) = CallContext::standalone();
        let e = exec::run(job(&f, &script, resources, Duration::from_secs(5)), &ctx)
            .await
            .unwrap_err();
        assert_eq!(e.code(), toolscope::ErrorCode::ExecSandboxUnavailable);
        assert!(e.to_string().contains(says), "{e}");
        assert!(!f.work.join("started").exists());
    }
    assert_none_alive(&m);
}

#[tokio::test]
async fn every_process_of_a_call_is_in_the_calls_cgroups() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    let m = marker();
    let script = format!(
        "cat /proc/self/cgroup; (sleep {m} & cat /proc/self/cgroup; kill $!) | cat; \
         sh -c 'cat /proc/self/cgroup' & wait"
    );
    let out = run(job(&f, &script, small(), Duration::from_secs(30))).await;
    assert_eq!(out.end, End::Exited, "{:?}", out.end);
    let text = String::from_utf8_lossy(&out.stdout);
    for (limit, controller) in [("processes", "pids"), ("memory", "memory")] {
        if !counted(&out, limit) {
            eprintln!("{limit}: not a cgroup here ({}), skipped", out.limits);
            continue;
        }
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| {
                l.split(':')
                    .nth(1)
                    .is_some_and(|c| c.split(',').any(|c| c == controller))
            })
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        for line in lines {
            assert!(
                line.contains("/agent-exec."),
                "{controller}: {line}\n{text}"
            );
        }
    }
    assert_none_alive(&m);
}

#[tokio::test]
async fn a_20_gib_allocation_is_held_at_the_memory_limit() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    let m = marker();
    // `head` of 20 GiB into a shell variable's worth of memory: awk holds every byte.
    let script =
        format!("sleep {m} & python3 -c 'b = bytearray(20 * 1024**3); print(len(b))'; echo rc=$?");
    let (out, took) = echo_while(&f, job(&f, &script, small(), Duration::from_secs(60))).await;
    eprintln!("echo during the allocation: {took:?}; {}", out.limits);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("21474836480"), "the allocation succeeded");
    if counted(&out, "memory") {
        assert!(
            matches!(out.end, End::LimitExceeded(hit) if hit.limit == Limit::Memory && hit.value == 256 * MIB),
            "{:?}",
            out.end
        );
        assert_eq!(hit_text(&out), "memory: 256 MiB");
    } else {
        // Per process (RLIMIT_DATA): Python gets MemoryError at once.
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("MemoryError"),
            "{out:?}"
        );
    }
    assert_none_alive(&m);
}

fn hit_text(out: &exec::Outcome) -> String {
    match &out.end {
        End::LimitExceeded(hit) => hit.to_string(),
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn a_10_gib_write_into_the_temp_dir_fills_only_its_limit() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    let m = marker();
    let script = format!(
        "sleep {m} & head -c 10G /dev/zero > \"$TMPDIR/big\"; echo rc=$?; \
         wc -c < \"$TMPDIR/big\""
    );
    let out = run(job(&f, &script, small(), Duration::from_secs(60))).await;
    eprintln!("{}; {:?}", out.limits, out.end);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let written: u64 = stdout
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0);
    assert!(written <= 32 * MIB, "wrote {written} bytes: {stdout}");
    if out.limits.contains("tempDir 32 MiB: tmpfs") {
        assert!(stdout.contains("rc=1"), "{stdout}");
        assert_eq!(hit_text(&out), "tempDir: 32 MiB");
    } else {
        // RLIMIT_FSIZE: SIGXFSZ ends `head`.
        assert!(!stdout.contains("rc=0"), "{stdout}");
    }
    // Nothing of it reached the host's temp dir.
    let host_bytes: u64 = walk_size(&f.temp);
    assert!(
        host_bytes <= 32 * MIB,
        "{host_bytes} bytes in the host's temp dir"
    );
    assert_none_alive(&m);
}

fn walk_size(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            walk_size(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

#[tokio::test]
async fn a_hundred_thousand_open_files_stop_at_the_descriptor_limit() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    std::fs::write(f.work.join("a.txt"), "x").unwrap();
    let script = "python3 -c '
fs = []
try:
    for i in range(100000):
        fs.append(open(\"a.txt\"))
except OSError as e:
    print(len(fs), e.errno)
'";
    let out = run(job(&f, script, small(), Duration::from_secs(60))).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let opened: u32 = stdout
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(u32::MAX);
    assert!(opened < 512, "{stdout}");
    assert!(
        stdout.trim_end().ends_with(" 24"),
        "EMFILE expected: {stdout}"
    );
    assert_eq!(out.exit_code, Some(0));
    assert!(out.limits.contains("openFiles 512: rlimit per process"));
}

#[tokio::test]
async fn ordinary_work_runs_under_the_default_limits_and_the_report_names_them() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    // A parallel job well below the limits: 32 processes, some memory, a file in TMPDIR.
    let script = "for i in $(seq 32); do (head -c 1000000 /dev/urandom | wc -c > \"$TMPDIR/$i\") & done; \
                  wait; cat \"$TMPDIR\"/* | wc -l; python3 -c 'b = bytearray(64 * 1024**2); print(len(b))'";
    let out = run(job(
        &f,
        script,
        ResourceLimits::for_command(),
        Duration::from_secs(60),
    ))
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.end,
        End::Exited,
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout, "32\n67108864\n");
    assert!(out.limits.starts_with("limits "), "{}", out.limits);
    let report = &out.limits;
    for name in ["processes 1024", "memory ", "tempDir ", "openFiles "] {
        assert!(report.contains(name), "{report}");
    }
}

/// `run`'s one program gets `RLIMIT_DATA` even under a memory cgroup: GNU `sort` sizes its
/// buffer from it (else from the machine's RAM, and the cgroup kills it) and spills the rest
/// into its temp dir. Found by the attack on issue 20: `sort` of a 333 MB file was killed.
#[tokio::test]
async fn sort_of_a_file_larger_than_runs_memory_limit_spills_and_succeeds() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    let data: String = (0..3_000_000u32).rev().map(|n| format!("{n}\n")).collect();
    std::fs::write(f.work.join("data.txt"), &data).unwrap();
    let sort = std::path::Path::new("/usr/bin/sort")
        .canonicalize()
        .unwrap();
    let mut sandbox = SandboxSpec::for_run(
        &sort,
        &RootLease::acquire(&f.work).unwrap(),
        &RootLease::acquire(&f.temp).unwrap(),
    )
    .unwrap();
    // Smaller than the file (about 21 MB): the tree must not hold it all.
    sandbox.resources.memory = NonZeroU64::new(16 * MIB).unwrap();
    let job = Job {
        program: sort,
        args: vec![
            "-n".into(),
            "-o".into(),
            "sorted.txt".into(),
            "data.txt".into(),
        ],
        workdir: WorkDir {
            lease: Arc::new(RootLease::acquire(&f.work).unwrap()),
            rel: RelPath::root(),
        },
        env: vec![("TMPDIR".into(), f.temp.join("tmp").into_os_string())],
        sandbox,
        limits: Limits {
            timeout: Duration::from_secs(60),
            stdout_cap: 64 * 1024,
            stderr_cap: 64 * 1024,
            on_cap: OnCap::Kill,
        },
        merge_stderr: false,
    };
    let out = run(job).await;
    assert_eq!(
        (out.end.clone(), out.exit_code),
        (End::Exited, Some(0)),
        "{} {}",
        String::from_utf8_lossy(&out.stderr),
        out.limits
    );
    let sorted = std::fs::read_to_string(f.work.join("sorted.txt")).unwrap();
    assert_eq!(sorted.len(), data.len());
    assert!(sorted.starts_with("0\n1\n2\n"));
}

#[test]
fn every_test_also_holds_unprivileged() {
    testkit::rerun_suite_as_nobody(UNPRIVILEGED_ENV, "every_test_also_holds_unprivileged", 1);
}

#[tokio::test]
async fn dev_shm_is_no_larger_than_the_temp_dir_and_empty_files_are_bounded_too() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    let script = "head -c 64M /dev/zero > /dev/shm/x; echo shm=$?; rm -f /dev/shm/x; \
                  cd \"$TMPDIR\" && i=0; while [ $i -lt 20000 ] && printf '' 2>/dev/null > f$i; do i=$((i+1)); done; echo files=$i";
    let out = run(job(&f, script, small(), Duration::from_secs(60))).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.limits.contains("tempDir 32 MiB: tmpfs") {
        eprintln!("skipped: no private mount namespace here ({})", out.limits);
        return;
    }
    assert!(stdout.contains("shm=1"), "64 MiB fit in /dev/shm: {stdout}");
    let files: u32 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("files="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "{stdout} {:?} {}",
                out.end,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    // One inode per 16 KiB, at least 4096 (the root directory takes one).
    assert!((4000..=4096).contains(&files), "{stdout}");
}

#[tokio::test]
async fn a_call_in_its_own_user_namespace_takes_at_most_half_the_hosts_inotify_instances() {
    if !sandbox_available() {
        return;
    }
    if !exec::linux::launch().own_user_namespace {
        eprintln!("skipped: no user namespace of the call's own here (a root host shares root's)");
        return;
    }
    let host: u64 = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let f = fixture();
    let script = "python3 -c 'import ctypes; l = ctypes.CDLL(None); \
                  print(sum(1 for _ in range(100000) if l.inotify_init1(0) >= 0))'";
    let out = run(job(&f, script, small(), Duration::from_secs(60))).await;
    let got: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(got >= 1 && got <= host / 2, "{got} of the host's {host}");
}
