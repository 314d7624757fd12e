//! Call directories: removed by the supervisor after the tree when the host dies, swept when
//! their owner is gone, never followed through a link (CMD-6, RUN-10;
//! invariant 4: nothing outlives a call, files included).
#![cfg(target_os = "linux")]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proctree::{CallDir, Command, Mode, ProcessId};

fn modes() -> Vec<Mode> {
    let mut m = vec![Mode::Subreaper];
    // Says why PID-namespace mode is skipped, or fails where `AGENT_EXEC_REQUIRE` names pidns.
    if testkit::require(&[testkit::Capability::PidNamespace]) {
        m.push(Mode::PidNamespace);
    }
    m
}

/// Polls a future to completion on this thread (the futures here never wait on I/O).
fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Helper "test": with `PROCTREE_CALLDIR_HOST=<marker>` and `PROCTREE_CALLDIR_PARENT=<dir>`
/// this process acts as a host: it makes a call directory, starts a command that keeps
/// writing into it (spawned inside the directory's `remove_if_host_dies` scope), prints the
/// directory's path and waits to be killed.
#[test]
fn helper_host_with_a_call_dir() {
    let (Ok(m), Ok(parent)) = (
        std::env::var("PROCTREE_CALLDIR_HOST"),
        std::env::var("PROCTREE_CALLDIR_PARENT"),
    ) else {
        return;
    };
    let mode = match std::env::var("PROCTREE_TEST_MODE").as_deref() {
        Ok("pid-namespace") => Mode::PidNamespace,
        _ => Mode::Subreaper,
    };
    let dir = Arc::new(CallDir::create(Path::new(&parent), "proctree-test-").unwrap());
    let script = format!(
        "mkdir -p \"$D/deep/er\"; chmod 500 \"$D/deep\"; \
         while :; do echo x > \"$D/f.$$\"; sleep 0.01; done & sleep {m} & wait"
    );
    let tree = block_on(proctree::remove_if_host_dies(Arc::clone(&dir), async {
        Command::new("/bin/sh")
            .args(["-c", &script])
            .env("PATH", "/usr/bin:/bin")
            .env("D", dir.path())
            .mode(mode)
            .spawn()
            .unwrap()
    }));
    println!("DIR {}", dir.path().display());
    std::thread::sleep(Duration::from_secs(100));
    drop(tree);
}

#[test]
fn the_call_dir_of_a_host_killed_mid_command_is_removed_after_its_tree() {
    for mode in modes() {
        let parent = tempfile::tempdir().unwrap();
        let m = testkit::marker();
        let mut host = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "helper_host_with_a_call_dir",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("PROCTREE_CALLDIR_HOST", &m)
            .env("PROCTREE_CALLDIR_PARENT", parent.path())
            .env("PROCTREE_TEST_MODE", mode.to_string())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let entries = || -> Vec<PathBuf> {
            std::fs::read_dir(parent.path())
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .collect()
        };
        // The command is writing into the directory.
        wait_until("the command writes into its call dir", || {
            entries().first().is_some_and(|d| {
                std::fs::read_dir(d).is_ok_and(|mut r| {
                    r.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("f.")))
                })
            }) && !testkit::alive_with(&m).is_empty()
        });
        host.kill().unwrap(); // SIGKILL: no destructor runs in the host
        host.wait().unwrap();
        wait_until("no process of the call survives", || {
            testkit::alive_with(&m).is_empty()
        });
        wait_until("the call dir is gone", || entries().is_empty());
        assert_eq!(entries(), Vec::<PathBuf>::new(), "{mode}");
    }
}

#[test]
fn the_call_dir_of_a_killed_host_is_removed_also_when_the_host_is_unprivileged() {
    // As root the supervisor makes no user namespace; as nobody it removes the directory from
    // inside one (our uid mapped), which must work the same.
    if !testkit::rerun_unprivileged(
        "the_call_dir_of_a_host_killed_mid_command_is_removed_after_its_tree",
    ) {
        eprintln!("not root: the test above already ran unprivileged");
    }
}

#[test]
fn a_call_dir_is_removed_when_dropped_also_when_its_insides_were_locked() {
    let parent = tempfile::tempdir().unwrap();
    let dir = CallDir::create(parent.path(), "agent-exec-run-").unwrap();
    let path = dir.path().to_path_buf();
    let name = path.file_name().unwrap().to_str().unwrap().to_owned();
    let (stem, owner) = proctree::parse_owned_name(&name).unwrap();
    assert_eq!(stem, "agent-exec-run");
    assert_eq!(Some(owner), ProcessId::of(std::process::id()));
    std::fs::create_dir_all(path.join("a/b/c")).unwrap();
    std::fs::write(path.join("a/b/c/f"), "x").unwrap();
    std::fs::set_permissions(path.join("a/b"), std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::set_permissions(path.join("a"), std::fs::Permissions::from_mode(0o500)).unwrap();
    // Deeper than the supervisor keeps descriptors for at once is still removed by the host.
    let mut deep = path.join("deep");
    for _ in 0..40 {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    drop(dir);
    assert!(!path.exists(), "{} is still there", path.display());
}

#[test]
fn a_tree_deeper_than_the_descriptors_held_at_once_is_removed_whole() {
    let parent = tempfile::tempdir().unwrap();
    let dir = CallDir::create(parent.path(), "agent-exec-run-").unwrap();
    let path = dir.path().to_path_buf();
    // What a command can make in its temp dir: levels past what one walk keeps open.
    let mut deep = path.join("deep");
    for _ in 0..1500 {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("planted"), "x").unwrap();
    drop(dir);
    assert!(!path.exists(), "{} is still there", path.display());
    assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 0);
}

#[test]
fn the_sweep_removes_only_dirs_whose_owner_is_gone_and_never_follows_links() {
    let parent = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("precious"), "keep").unwrap();
    // A finished process: its PID and start time name nobody alive.
    let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
    let gone = ProcessId::of(child.id()).unwrap_or(ProcessId::new(child.id(), 1));
    child.wait().unwrap();
    let dead = |stem: &str| format!("{stem}-{}-{}-7", gone.pid(), gone.start_time());
    // A PID reused: the PID of this (live) process with another start time.
    let me = ProcessId::of(std::process::id()).unwrap();
    let reused = format!(
        "agent-exec-run-{}-{}-9",
        me.pid(),
        me.start_time().wrapping_add(1)
    );
    let orphan = parent.path().join(dead("agent-exec-run"));
    std::fs::create_dir_all(orphan.join("sub")).unwrap();
    std::os::unix::fs::symlink(outside.path(), orphan.join("sub/link")).unwrap();
    std::fs::create_dir(parent.path().join(&reused)).unwrap();
    // A live owner's dir, a link with an orphan's name, a stem not asked for, an old name.
    let live = CallDir::create(parent.path(), "agent-exec-run-").unwrap();
    let link = parent.path().join(dead("agent-exec-command"));
    std::os::unix::fs::symlink(outside.path(), &link).unwrap();
    let other = parent.path().join(dead("someone-else"));
    std::fs::create_dir(&other).unwrap();
    let old = parent.path().join("agent-exec-run-AbC123");
    std::fs::create_dir(&old).unwrap();

    let mut removed = proctree::sweep_orphans(parent.path(), |stem| {
        stem == "agent-exec-run" || stem == "agent-exec-command"
    })
    .unwrap();
    removed.sort();
    let mut want = vec![orphan.clone(), parent.path().join(&reused)];
    want.sort();
    assert_eq!(removed, want);
    assert!(live.path().is_dir(), "a live owner's dir was removed");
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    assert!(other.is_dir() && old.is_dir());
    assert_eq!(
        std::fs::read_to_string(outside.path().join("precious")).unwrap(),
        "keep"
    );
}

#[test]
fn the_sweep_leaves_another_users_dirs_alone() {
    if !testkit::is_root() {
        eprintln!("skipped: making a directory owned by another uid needs root");
        return;
    }
    let parent = tempfile::tempdir().unwrap();
    let theirs = parent.path().join("agent-exec-run-4194999-1-1");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let removed = proctree::sweep_orphans(parent.path(), |_| true).unwrap();
    assert!(removed.is_empty(), "{removed:?}");
    assert!(theirs.is_dir());
}

#[test]
fn a_signal_handler_removes_only_the_call_dirs_no_supervisor_holds() {
    // In a process of its own: the handler removes every idle call dir of its process, which
    // here would include the other tests'.
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_idle_call_dirs",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PROCTREE_IDLE_CALL_DIRS", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("1 passed"), "{out:?}");
}

/// Helper "test" for the one above (with `PROCTREE_IDLE_CALL_DIRS` set): what
/// `remove_call_dirs_on_signals` does before the host dies of the signal. A directory whose
/// command still runs is left to that command's supervisor (tree first, files after).
#[test]
fn helper_idle_call_dirs() {
    if std::env::var_os("PROCTREE_IDLE_CALL_DIRS").is_none() {
        return;
    }
    let parent = tempfile::tempdir().unwrap();
    let idle = CallDir::create(parent.path(), "agent-exec-run-").unwrap();
    let kept = CallDir::create(parent.path(), "agent-exec-run-").unwrap();
    kept.keep();
    let busy = Arc::new(CallDir::create(parent.path(), "agent-exec-command-").unwrap());
    let mut tree = Command::new("/bin/sleep")
        .args(["100"])
        .remove_if_host_dies(Arc::clone(&busy))
        .spawn()
        .unwrap();
    let removed = proctree::remove_idle_call_dirs();
    assert!(removed >= 1, "{removed}");
    assert!(!idle.path().exists(), "an idle call dir was left");
    assert!(kept.path().is_dir(), "a kept call dir was removed");
    assert!(
        busy.path().is_dir(),
        "a running command's call dir was removed"
    );
    // A host that lives on stops its tree; the supervisor leaves the directory to it.
    tree.stop().unwrap();
    drop(tree);
    assert!(busy.path().is_dir());
    proctree::remove_idle_call_dirs();
    assert!(!busy.path().exists(), "idle once its supervisor was reaped");
    std::fs::remove_dir(kept.path()).unwrap();
}

/// Helper "test": with `PROCTREE_SWEEP_PARENT` set (run as nobody by the test below), makes an
/// orphan of its own there and sweeps: only its own goes.
#[test]
fn helper_sweep_as_nobody() {
    let Ok(parent) = std::env::var("PROCTREE_SWEEP_PARENT") else {
        return;
    };
    // PIDs above the kernel's limit (4194304) never name a live process.
    let mine = Path::new(&parent).join("agent-exec-run-4194998-1-1");
    std::fs::create_dir(&mine).unwrap();
    let removed = proctree::sweep_orphans(Path::new(&parent), |_| true).unwrap();
    assert_eq!(removed, vec![mine]);
}

#[test]
fn as_an_unprivileged_user_the_sweep_removes_its_own_orphans_and_never_another_users() {
    if !testkit::is_root() {
        eprintln!("skipped: needs root to prepare another user's directory");
        return;
    }
    // A shared, sticky, world-writable parent, as /tmp is.
    let parent = tempfile::tempdir().unwrap();
    std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let roots = parent.path().join("agent-exec-run-4194999-1-1");
    std::fs::create_dir(&roots).unwrap();
    std::fs::write(roots.join("f"), "root's").unwrap();
    testkit::run_as_nobody(
        &[
            "--exact",
            "helper_sweep_as_nobody",
            "--nocapture",
            "--test-threads=1",
        ],
        &[("PROCTREE_SWEEP_PARENT", parent.path().to_str().unwrap())],
    );
    assert_eq!(std::fs::read_to_string(roots.join("f")).unwrap(), "root's");
}

/// A host in another PID namespace (a container sharing /tmp) has PIDs that
/// mean nothing here; its live call dirs must not be taken for orphans.
#[test]
fn the_sweep_leaves_dirs_of_owners_in_another_pid_namespace() {
    let parent = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
    let gone = ProcessId::of(child.id()).unwrap_or(ProcessId::new(child.id(), 1));
    child.wait().unwrap();
    // Namespace inode 1 is never a PID namespace of this host.
    let foreign = parent.path().join(format!(
        "agent-exec-run-{}-{}-p1-7",
        gone.pid(),
        gone.start_time()
    ));
    std::fs::create_dir(&foreign).unwrap();
    let ours = CallDir::create(parent.path(), "agent-exec-run-").unwrap();
    let name = ours
        .path()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(name.contains("-p"), "{name} records the namespace");
    let removed = proctree::sweep_orphans(parent.path(), |_| true).unwrap();
    assert!(removed.is_empty(), "{removed:?}");
    assert!(foreign.is_dir());
}

/// Helper "test": with `PROCTREE_CHMOD_RACE` set (run as nobody by the test below), sweeps
/// orphans whose locked directory `a` is swapped, over and over, with `b`, a symlink to a decoy
/// outside; returns through a panic if the decoy's mode ever changed.
#[test]
fn helper_chmod_race_as_nobody() {
    let Ok(base) = std::env::var("PROCTREE_CHMOD_RACE") else {
        return;
    };
    let base = Path::new(&base);
    let decoy = base.join("decoy");
    std::fs::write(&decoy, "outside").unwrap();
    std::fs::set_permissions(&decoy, std::fs::Permissions::from_mode(0o640)).unwrap();
    let parent = base.join("parent");
    std::fs::create_dir(&parent).unwrap();
    for attempt in 0..3000 {
        // PIDs above the kernel's limit (4194304) never name a live process.
        let orphan = parent.join(format!("agent-exec-run-4194990-1-{attempt}"));
        std::fs::create_dir_all(orphan.join("a")).unwrap();
        std::fs::write(orphan.join("a/x"), "x").unwrap();
        std::fs::set_permissions(orphan.join("a"), std::fs::Permissions::from_mode(0o000)).unwrap();
        std::os::unix::fs::symlink(&decoy, orphan.join("b")).unwrap();
        let swapper = testkit::Swapper::new(orphan.join("a"), orphan.join("b")).start();
        let _ = proctree::sweep_orphans(&parent, |_| true);
        swapper.stop();
        let mode = std::fs::metadata(&decoy).unwrap().permissions().mode() & 0o7777;
        assert_eq!(
            mode, 0o640,
            "attempt {attempt}: the sweep chmod-ed the decoy outside"
        );
        // What the race left is removed without it.
        let _ = proctree::sweep_orphans(&parent, |_| true);
    }
}

/// The removal's chmod of a directory it may not enter goes through a
/// descriptor of that directory, never its name again, so a symlink swapped in meanwhile is
/// never followed to chmod a file outside. Only an unprivileged remover chmods (root enters
/// mode-000 directories as it is), so this runs as nobody. With the name-based `fchmodat` of
/// before, the decoy was chmod-ed within about 500 of the 3000 attempts.
#[test]
fn a_sweep_never_chmods_through_a_symlink_swapped_in_for_a_locked_directory() {
    if !testkit::is_root() {
        eprintln!("skipped: needs root to run the race as an unprivileged user");
        return;
    }
    let base = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(base.path(), Some(65534), Some(65534)).unwrap();
    testkit::run_as_nobody(
        &[
            "--exact",
            "helper_chmod_race_as_nobody",
            "--nocapture",
            "--test-threads=1",
        ],
        &[("PROCTREE_CHMOD_RACE", base.path().to_str().unwrap())],
    );
}
