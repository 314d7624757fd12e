//! Nothing a command starts survives `stop` (CMD-6, CMD-7 [beyond], RUN-10;
//! invariant 4), and `descendants_stopped` is exact.
//!
//! Every test marks its processes with a unique `sleep 100.<digits>` (a form GNU sleep accepts:
//! an extra word would make it exit at once and the test pass without testing anything),
//! checks that the expected number of them ran before the stop (so it can fail), and scans
//! `/proc` for survivors afterwards. Each case runs in every mode this host supports.
#![cfg(target_os = "linux")]
// Helpers outside `#[test]` fns panic on purpose: a failed helper is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use proctree::{Command, Mode, ProcessId, ProcessTree, Signal, SignalOutcome, SpawnError};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A fresh `100.<digits>` marker, unique across tests and concurrent test processes.
fn marker() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "100.{}{:03}{:09}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        nanos
    )
}

/// Live processes whose command line mentions `marker`: (pid, argv contains it exactly).
fn marked(marker: &str) -> Vec<(u32, bool)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| !r.trim_start().starts_with(['Z', 'X']))
            })
            .unwrap_or(false);
        let text = String::from_utf8_lossy(&cmdline);
        if alive && text.contains(marker) {
            let exact = cmdline.split(|b| *b == 0).any(|a| a == marker.as_bytes());
            out.push((pid, exact));
        }
    }
    out
}

/// Processes that carry `marker` as a whole argument (the sleepers).
fn sleepers(marker: &str) -> usize {
    marked(marker).iter().filter(|(_, exact)| *exact).count()
}

fn wait_for_sleepers(marker: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while sleepers(marker) != n {
        assert!(
            Instant::now() < deadline,
            "expected {n} sleepers marked {marker} before the stop, saw {:?}",
            marked(marker)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn assert_no_survivors(marker: &str) {
    let left = marked(marker);
    assert!(left.is_empty(), "processes survived the stop: {left:?}");
}

fn modes() -> Vec<Mode> {
    let mut m = vec![Mode::Subreaper];
    // Says why PID-namespace mode is skipped, or fails where `AGENT_EXEC_REQUIRE` names pidns.
    if testkit::require(&[testkit::Capability::PidNamespace]) {
        m.push(Mode::PidNamespace);
    }
    m
}

fn sh(script: &str, mode: Mode) -> ProcessTree {
    Command::new("/bin/sh")
        .args(["-c", script])
        .env("PATH", "/usr/bin:/bin")
        .mode(mode)
        .spawn()
        .unwrap()
}

/// Runs `script` (with `M` replaced by a fresh marker) in every mode, waits for `sleepers`
/// marked sleeps plus the main shell if `main_waits` (and for every short-lived intermediate
/// to be gone, so the count is exact), stops, and checks that none survived.
fn stop_case(
    script: &str,
    sleepers: usize,
    main_waits: bool,
    descendants: Option<usize>,
) -> Vec<proctree::StopReport> {
    let mut reports = Vec::new();
    for mode in modes() {
        let m = marker();
        let script = script.replace('M', &m);
        let mut tree = sh(&script, mode);
        assert_eq!(tree.mode(), mode);
        wait_for_sleepers(&m, sleepers);
        let total = sleepers + usize::from(main_waits);
        let deadline = Instant::now() + Duration::from_secs(30);
        while marked(&m).len() != total {
            assert!(
                Instant::now() < deadline,
                "did not settle: {:?}",
                marked(&m)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let report = tree.stop().unwrap();
        assert_no_survivors(&m);
        assert_eq!(report.mode, mode);
        if let Some(d) = descendants {
            assert_eq!(
                report.descendants_stopped, d,
                "{mode}: {script}: {report:?}"
            );
        }
        reports.push(report);
    }
    reports
}

#[test]
fn background_sleep_is_stopped_and_counted() {
    for r in stop_case("sleep M & wait", 1, true, Some(1)) {
        assert!(r.main_stopped);
    }
}

#[test]
fn two_background_sleeps_stopped_at_a_timeout_count_exactly_two() {
    stop_case("sleep M & sleep M & wait", 2, true, Some(2));
}

#[test]
fn orphan_left_behind_by_an_exited_main_is_stopped() {
    for mode in modes() {
        let m = marker();
        let mut tree = sh(&format!("sleep {m} &"), mode);
        let status = tree.wait_main().unwrap();
        assert_eq!(status.code(), Some(0));
        wait_for_sleepers(&m, 1);
        let report = tree.stop().unwrap();
        assert_no_survivors(&m);
        assert!(!report.main_stopped);
        assert_eq!(report.descendants_stopped, 1);
        assert_eq!(report.main_status.and_then(|s| s.code()), Some(0));
    }
}

#[test]
fn nohup_child_is_stopped() {
    stop_case("nohup sleep M >/dev/null 2>&1 &", 1, false, Some(1));
}

#[test]
fn setsid_child_is_stopped() {
    stop_case("setsid sleep M & wait", 1, true, Some(1));
}

#[test]
fn setsid_fork_escapee_is_stopped() {
    stop_case("setsid -f sleep M", 1, false, Some(1));
}

#[test]
fn double_fork_daemon_is_stopped() {
    stop_case("( (sleep M &) & )", 1, false, Some(1));
}

#[test]
fn python_fork_setsid_fork_daemon_is_stopped() {
    if !std::path::Path::new("/usr/bin/python3").exists() {
        eprintln!("skipped: /usr/bin/python3 is not installed");
        return;
    }
    // The intermediate processes `_exit` at once; the test waits until only the daemon is
    // left (every marked process but the sleep has exited) so the count is exact.
    let py = "import os\n\
              if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        \
              os.execv('/bin/sleep', ['sleep', 'M'])\n    os._exit(0)\n";
    for mode in modes() {
        let m = marker();
        let mut tree = Command::new("/usr/bin/python3")
            .args(["-c", &py.replace('M', &m)])
            .mode(mode)
            .spawn()
            .unwrap();
        assert_eq!(tree.wait_main().unwrap().code(), Some(0));
        let deadline = Instant::now() + Duration::from_secs(30);
        while marked(&m).len() != 1 || sleepers(&m) != 1 {
            assert!(
                Instant::now() < deadline,
                "daemon did not settle: {:?}",
                marked(&m)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let report = tree.stop().unwrap();
        assert_no_survivors(&m);
        assert_eq!(report.descendants_stopped, 1, "{mode}: {report:?}");
    }
}

#[test]
fn job_moved_to_its_own_process_group_is_stopped() {
    for mode in modes() {
        let m = marker();
        let mut tree = Command::new("/bin/bash")
            .args(["-c", &format!("set -m; sleep {m} & wait")])
            .env("PATH", "/usr/bin:/bin")
            .mode(mode)
            .spawn()
            .unwrap();
        wait_for_sleepers(&m, 1);
        let (pid, _) = *marked(&m).iter().find(|(_, exact)| *exact).unwrap();
        let pgid_of = |pid: u32| {
            let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            s.rsplit_once(')')
                .unwrap()
                .1
                .split_whitespace()
                .nth(2)
                .unwrap()
                .parse::<u32>()
                .unwrap()
        };
        assert_ne!(
            pgid_of(pid),
            pgid_of(tree.main().pid()),
            "{mode}: set -m should move the job"
        );
        let report = tree.stop().unwrap();
        assert_no_survivors(&m);
        assert_eq!(report.descendants_stopped, 1);
    }
}

/// The identity `spawn` reports for the main process is the program itself, as the host's
/// `/proc` sees it (PID and start time), in every mode: the supervisor reads it through a
/// pidfd after `execve`, also when it is PID 1 of a namespace whose PIDs differ from ours.
#[test]
fn main_identity_is_the_program_as_the_host_sees_it() {
    for mode in modes() {
        let m = marker();
        let mut tree = Command::new("/bin/sleep")
            .args([m.as_str()])
            .mode(mode)
            .spawn()
            .unwrap();
        let main = tree.main();
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", main.pid())).unwrap();
        assert_eq!(cmdline, format!("/bin/sleep\0{m}\0").into_bytes(), "{mode}");
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", main.pid())).unwrap();
        let start: u64 = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .nth(19)
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(main.start_time(), start, "{mode}");
        assert_ne!(main, tree.supervisor(), "{mode}");
        tree.stop().unwrap();
        assert_no_survivors(&m);
    }
}

#[test]
fn fork_storm_of_200_sleepers_is_stopped_and_counted() {
    stop_case(
        "for i in $(seq 200); do sleep M & done; wait",
        200,
        true,
        Some(200),
    );
}

#[test]
fn process_ignoring_sigterm_and_sighup_is_stopped() {
    stop_case("(trap '' TERM HUP; exec sleep M) & wait", 1, true, Some(1));
}

#[test]
fn child_that_execs_another_program_is_stopped() {
    stop_case("/bin/sh -c 'exec sleep M' & wait", 1, true, Some(1));
}

#[test]
fn chain_fifty_deep_is_stopped() {
    // Each level is a shell waiting for the next (no exec), so 50 shells plus one sleep
    // carry the marker; every one but the main shell is a descendant.
    let level =
        r#"if [ "$2" -gt 0 ]; then /bin/sh -c "$0" "$0" "$1" $(($2 - 1)); else sleep "$1"; fi"#;
    for mode in modes() {
        let m = marker();
        let mut tree = Command::new("/bin/sh")
            .args(["-c", level, level, &m, "49"])
            .env("PATH", "/usr/bin:/bin")
            .mode(mode)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while marked(&m).len() != 51 {
            assert!(
                Instant::now() < deadline,
                "chain did not build: {}",
                marked(&m).len()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let report = tree.stop().unwrap();
        assert_no_survivors(&m);
        assert_eq!(report.descendants_stopped, 50);
    }
}

#[test]
fn dropping_the_tree_stops_everything() {
    for mode in modes() {
        let m = marker();
        let tree = sh(&format!("setsid -f sleep {m}; sleep {m} & wait"), mode);
        wait_for_sleepers(&m, 2);
        drop(tree);
        assert_no_survivors(&m);
    }
}

#[test]
fn grandchild_holding_stdout_open_is_stopped_and_the_pipe_reaches_eof() {
    use std::io::Read;
    for mode in modes() {
        let m = marker();
        let (r, w) = pipe();
        let mut tree = Command::new("/bin/sh")
            .args(["-c", &format!("echo hi; setsid -f sleep {m}")])
            .env("PATH", "/usr/bin:/bin")
            .stdout(w)
            .mode(mode)
            .spawn()
            .unwrap();
        assert_eq!(tree.wait_main().unwrap().code(), Some(0));
        wait_for_sleepers(&m, 1);
        let report = tree.stop().unwrap();
        assert_eq!(report.descendants_stopped, 1);
        let mut out = String::new();
        std::fs::File::from(r).read_to_string(&mut out).unwrap();
        assert_eq!(out, "hi\n");
        assert_no_survivors(&m);
    }
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    use std::os::fd::FromRawFd;
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

#[test]
fn main_exit_status_is_reported_without_blocking_and_then_exactly() {
    for mode in modes() {
        let mut tree = sh("read x; exit 3", mode);
        // stdin is /dev/null, so `read` sees EOF at once; the shell exits with 3.
        let status = tree.wait_main().unwrap();
        assert_eq!(status.code(), Some(3));
        assert_eq!(
            tree.try_main_status().unwrap().and_then(|s| s.code()),
            Some(3)
        );
        let report = tree.stop().unwrap();
        assert_eq!(report.descendants_stopped, 0);
        assert!(!report.main_stopped);
    }
}

#[test]
fn running_main_has_no_status_yet() {
    let m = marker();
    let mut tree = sh(&format!("exec sleep {m}"), Mode::Subreaper);
    wait_for_sleepers(&m, 1);
    assert_eq!(tree.try_main_status().unwrap(), None);
    let report = tree.stop().unwrap();
    assert!(report.main_stopped);
    assert_eq!(
        report
            .main_status
            .and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)),
        Some(9)
    );
    assert_no_survivors(&m);
}

#[test]
fn environment_is_exactly_what_was_given() {
    use std::io::Read;
    let (r, w) = pipe();
    let mut tree = Command::new("/usr/bin/env")
        .env("ONLY", "this")
        .stdout(w)
        .spawn()
        .unwrap();
    tree.wait_main().unwrap();
    tree.stop().unwrap();
    let mut out = String::new();
    std::fs::File::from(r).read_to_string(&mut out).unwrap();
    assert_eq!(out, "ONLY=this\n");
}

#[test]
fn invalid_input_is_refused_before_anything_runs() {
    assert!(matches!(
        Command::new("sh").spawn(),
        Err(SpawnError::ProgramNotAbsolute { .. })
    ));
    assert!(matches!(
        Command::new("/bin/sh").args(["a\0b"]).spawn(),
        Err(SpawnError::NulByte { .. })
    ));
    assert!(matches!(
        Command::new("/bin/sh").env("A=B", "c").spawn(),
        Err(SpawnError::BadEnvName { .. })
    ));
    let err = Command::new("/nonexistent/program").spawn().unwrap_err();
    assert!(matches!(err, SpawnError::Exec { .. }), "{err:?}");
    assert!(err.to_string().contains("check the path"), "{err}");
    let err = Command::new("/bin/true")
        .current_dir("/nonexistent/dir")
        .spawn()
        .unwrap_err();
    assert!(matches!(err, SpawnError::CurrentDir { .. }), "{err:?}");
}

#[test]
fn failing_pre_exec_hook_means_the_program_never_runs() {
    let m = marker();
    // SAFETY: the hook only returns a value.
    let err = unsafe {
        Command::new("/bin/sleep")
            .args([&m])
            .pre_exec(|| Err(libc::EPERM))
    }
    .spawn()
    .unwrap_err();
    assert!(
        matches!(err, SpawnError::PreExec { code } if code == libc::EPERM),
        "{err:?}"
    );
    assert_no_survivors(&m);
}

#[test]
fn a_changed_start_time_stops_the_signal() {
    let mut child = std::process::Command::new("/bin/sleep")
        .arg("100")
        .spawn()
        .unwrap();
    let real = ProcessId::of(child.id()).unwrap();
    let impostor = ProcessId::new(real.pid(), real.start_time() + 1);
    assert_eq!(
        proctree::signal(impostor, Signal::Kill).unwrap(),
        SignalOutcome::IdentityChanged
    );
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the real process must not have been signalled"
    );
    assert_eq!(
        proctree::signal(real, Signal::Kill).unwrap(),
        SignalOutcome::Sent
    );
    child.wait().unwrap();
    assert_eq!(
        proctree::signal(real, Signal::Kill).unwrap(),
        SignalOutcome::Gone
    );
}

/// Helper "test": when `PROCTREE_TEST_HOST` is set, this process acts as a host that starts a
/// tree and then waits to be killed. Otherwise it does nothing.
#[test]
fn helper_host_holding_a_tree() {
    let Ok(m) = std::env::var("PROCTREE_TEST_HOST") else {
        return;
    };
    let mode = match std::env::var("PROCTREE_TEST_MODE").as_deref() {
        Ok("pid-namespace") => Mode::PidNamespace,
        _ => Mode::Subreaper,
    };
    let tree = sh(&format!("setsid -f sleep {m}; sleep {m} & wait"), mode);
    std::thread::sleep(Duration::from_secs(100));
    drop(tree);
}

#[test]
fn host_killed_with_sigkill_mid_command_still_stops_the_tree() {
    for mode in modes() {
        let m = marker();
        let mut host = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "helper_host_holding_a_tree",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("PROCTREE_TEST_HOST", &m)
            .env("PROCTREE_TEST_MODE", mode.to_string())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        wait_for_sleepers(&m, 2);
        host.kill().unwrap(); // SIGKILL: no destructor, no stop() runs in the host
        host.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !marked(&m).is_empty() {
            assert!(
                Instant::now() < deadline,
                "{mode}: survivors after host death: {:?}",
                marked(&m)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn a_kept_descriptor_below_five_is_refused_before_anything_runs() {
    use std::os::fd::BorrowedFd;
    // SAFETY: fd 2 (stderr) is open for the whole test.
    let stderr = unsafe { BorrowedFd::borrow_raw(2) };
    let err = proctree::Command::new("/bin/true")
        .keep_fd(stderr)
        .spawn()
        .unwrap_err();
    assert!(
        matches!(err, proctree::SpawnError::KeepFdTooLow { fd: 2 }),
        "{err}"
    );
}

#[test]
fn a_kept_descriptor_is_open_in_the_hook_and_closed_in_the_program() {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open("/etc/hostname").unwrap();
    // Above the plumbing numbers, close-on-exec like a Landlock ruleset.
    // SAFETY: F_DUPFD_CLOEXEC on an fd we own; the result is a new fd we take ownership of.
    let high = unsafe {
        let fd = libc::fcntl(file.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 20);
        assert!(fd >= 20);
        <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd)
    };
    let raw = high.as_raw_fd();
    let cmd = proctree::Command::new("/bin/sh")
        .args([
            "-c",
            &format!("test -e /proc/self/fd/{raw} && exit 3; exit 0"),
        ])
        .keep_fd(std::os::fd::AsFd::as_fd(&high));
    // SAFETY: fcntl(F_GETFD) is async-signal-safe; no allocation.
    let cmd = unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(raw, libc::F_GETFD) < 0 {
                Err(libc::EBADF)
            } else {
                Ok(())
            }
        })
    };
    let mut tree = cmd.spawn().unwrap();
    let status = tree.wait_main().unwrap();
    assert_eq!(status.code(), Some(0), "kept fd leaked into the program");
    tree.stop().unwrap();
}

/// When the main process exits and nothing it started is left, the
/// supervisor says so and leaves by itself, and `stop` only collects it.
#[test]
fn a_tree_that_empties_at_exit_settles_and_stops_without_killing() {
    for mode in modes() {
        let mut tree = Command::new("/bin/true").mode(mode).spawn().unwrap();
        assert!(tree.wait_main().unwrap().success());
        let deadline = Instant::now() + Duration::from_secs(10);
        while !tree.settled() {
            assert!(Instant::now() < deadline, "{mode}: never settled");
            std::thread::sleep(Duration::from_millis(1));
        }
        let report = tree.stop().unwrap();
        assert_eq!(report.descendants_stopped, 0, "{mode}: {report:?}");
        assert!(!report.main_stopped, "{mode}: {report:?}");
        assert!(report.main_status.is_some_and(|s| s.success()));
    }
}

/// A background child keeps the tree open: no "settled" while it lives, and `stop` still
/// finds and kills it.
#[test]
fn a_background_child_keeps_the_tree_unsettled_until_stopped() {
    for mode in modes() {
        let m = marker();
        let mut tree = sh(&format!("sleep {m} & exit 0"), mode);
        assert!(tree.wait_main().unwrap().success());
        wait_for_sleepers(&m, 1);
        std::thread::sleep(Duration::from_millis(100));
        assert!(!tree.settled(), "{mode}: settled with a live sleeper");
        let report = tree.stop().unwrap();
        assert_eq!(report.descendants_stopped, 1, "{mode}: {report:?}");
        assert_no_survivors(&m);
    }
}

/// The PID-namespace supervisor shares the host's memory (no page-table copy, no
/// copy-on-write faults in the host while a command runs); the subreaper one is a copy, so an
/// OOM kill of the host cannot take it down with the host before it sweeps (supervisor docs).
#[test]
fn only_the_pid_namespace_supervisor_shares_the_hosts_memory() {
    const KCMP_VM: libc::c_int = 1;
    for mode in modes() {
        let m = marker();
        let mut tree = sh(&format!("sleep {m}"), mode);
        wait_for_sleepers(&m, 1);
        let host = std::process::id() as libc::pid_t;
        let sup = tree.supervisor().pid() as libc::pid_t;
        // SAFETY: kcmp compares two processes' kernel objects; integer arguments only.
        let r = unsafe { libc::syscall(libc::SYS_kcmp, host, sup, KCMP_VM, 0, 0) };
        tree.stop().unwrap();
        assert_no_survivors(&m);
        if r < 0 {
            eprintln!(
                "skipped: kcmp refused ({}), cannot compare address spaces",
                std::io::Error::last_os_error()
            );
            return;
        }
        assert_eq!(r == 0, mode == Mode::PidNamespace, "{mode}: kcmp said {r}");
    }
}

/// The thread that spawned a tree may end before the command does: the supervisor never
/// touches that thread's memory (its stack or thread-local storage) after reporting.
#[test]
fn the_spawning_thread_may_exit_while_the_command_runs() {
    for mode in modes() {
        let m = marker();
        let script = format!("sleep {m} & wait; exit 3");
        let mut tree = std::thread::spawn(move || sh(&script, mode))
            .join()
            .unwrap();
        wait_for_sleepers(&m, 1);
        // Let the exited thread's stack be reused by new threads doing work.
        for _ in 0..4 {
            std::thread::spawn(|| std::hint::black_box(vec![7u8; 1 << 20]).len())
                .join()
                .unwrap();
        }
        let report = tree.stop().unwrap();
        assert_eq!(report.descendants_stopped, 1, "{mode}: {report:?}");
        assert!(report.main_stopped, "{mode}: {report:?}");
        assert_no_survivors(&m);
    }
}

/// Every test above also passes as an unprivileged user (then the PID-namespace mode
/// runs inside a new user namespace). When the suite runs as root, this re-runs the whole
/// binary as uid 65534; in that run it does nothing.
#[test]
fn every_test_also_holds_unprivileged() {
    const NESTED: &str = "PROCTREE_UNPRIVILEGED_RUN";
    if std::env::var_os(NESTED).is_some() || !testkit::is_root() {
        eprintln!("not root, or already the unprivileged run");
        return;
    }
    let out = testkit::run_as_nobody(
        &[
            "--skip",
            "every_test_also_holds_unprivileged",
            "--test-threads=2",
        ],
        &[(NESTED, "1")],
    );
    assert!(out.is_empty() || out.contains("test result: ok"), "{out}");
}

/// Threads of `marker`'s processes that still run: a zombie leader's other threads count.
fn running_threads(marker: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(tasks) = std::fs::read_dir(e.path().join("task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Ok(cmdline) = std::fs::read(t.path().join("cmdline")) else {
                continue;
            };
            let running = std::fs::read_to_string(t.path().join("stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')
                        .map(|(_, r)| !r.trim_start().starts_with(['Z', 'X']))
                })
                .unwrap_or(false);
            if running && String::from_utf8_lossy(&cmdline).contains(marker) {
                out.push(t.path().display().to_string());
            }
        }
    }
    out
}

/// A process whose main thread called `pthread_exit` shows its leader as
/// `Z` while its other threads run on. It was taken for dead, never signalled, and outlived
/// the stop (and the host). Now it is stopped like any live process.
#[test]
fn a_process_whose_main_thread_exited_while_others_run_is_stopped() {
    if !std::path::Path::new("/usr/bin/python3").exists() {
        eprintln!("skipped: /usr/bin/python3 is not installed");
        return;
    }
    // A worker thread sleeps; the main thread leaves with pthread_exit (ctypes).
    let py = "import ctypes, threading, time\n\
              threading.Thread(target=time.sleep, args=(1000,)).start()\n\
              ctypes.CDLL(None).pthread_exit(None)\n";
    for mode in modes() {
        let m = marker();
        let mut tree = Command::new("/usr/bin/python3")
            .args(["-c", py, &m])
            .mode(mode)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        // Running: the worker thread, with the leader already a zombie.
        while running_threads(&m).len() != 1 || !marked(&m).is_empty() {
            assert!(
                Instant::now() < deadline,
                "{mode}: no zombie leader with a running thread: {:?} {:?}",
                running_threads(&m),
                marked(&m)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        tree.stop().unwrap();
        let left = running_threads(&m);
        assert!(
            left.is_empty(),
            "{mode}: threads survived the stop: {left:?}"
        );
    }
}
