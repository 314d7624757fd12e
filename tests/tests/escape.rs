//! The escape suite: each test tries one way out of the sandbox through `exec::run` and asserts
//! the attempt failed, nothing outside the scope changed, and no process it started is alive
//! (SPEC RUN-6, RUN-7, CMD-2, CMD-9, CMD-10; DESIGN invariants 2, 4). Liveness tests show the
//! same specs still run real work. Run as root, then again as uid 65534 by
//! `every_test_also_holds_unprivileged`.
#![cfg(target_os = "linux")]
// Helpers outside #[test] fns unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use exec::{Job, Limits, OnCap, Outcome, SandboxSpec, WorkDir};
use fsguard::{RelPath, RootLease};
use toolscope::CallContext;

const UNPRIVILEGED_ENV: &str = "AGENT_EXEC_ESCAPE_UNPRIVILEGED";

/// A scope to work in, the call's temp dir, and things outside both: a fake home with a
/// secret and a directory of files an attack would like to change.
struct World {
    base: tempfile::TempDir,
    scope: PathBuf,
    temp: PathBuf,
    home: PathBuf,
    outside: PathBuf,
}

impl World {
    fn new() -> World {
        let base = tempfile::Builder::new()
            .prefix("agent-exec-escape")
            .tempdir()
            .unwrap();
        let root = base.path().canonicalize().unwrap();
        let scope = root.join("scope");
        let temp = root.join("tmp");
        let home = root.join("home");
        let outside = root.join("outside");
        for dir in [&scope, &temp, &home.join(".ssh"), &outside] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(home.join(".ssh/id_rsa"), "PRIVATE KEY\n").unwrap();
        std::fs::write(outside.join("victim.txt"), "original\n").unwrap();
        std::fs::write(scope.join("data.txt"), "one\ntwo\n").unwrap();
        World {
            base,
            scope,
            temp,
            home,
            outside,
        }
    }

    /// Every file outside the scope, with its content.
    fn outside_state(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut state = BTreeMap::new();
        for root in [&self.home, &self.outside] {
            collect(root, &mut state);
        }
        state
    }

    fn limits(&self) -> Limits {
        Limits {
            timeout: Duration::from_secs(20),
            stdout_cap: 64 * 1024,
            stderr_cap: 64 * 1024,
            on_cap: OnCap::Truncate,
        }
    }

    fn workdir(&self) -> WorkDir {
        WorkDir {
            lease: Arc::new(RootLease::acquire(&self.scope).unwrap()),
            rel: RelPath::root(),
        }
    }

    /// Runs `script` with `/bin/sh -c` under the `command` spec.
    async fn sh(&self, script: &str) -> Outcome {
        let job = Job {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            workdir: self.workdir(),
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("HOME".into(), self.temp.clone().into()),
                ("LC_ALL".into(), "C".into()),
            ],
            sandbox: SandboxSpec::for_command(
                &RootLease::acquire(&self.scope).unwrap(),
                &RootLease::acquire(&self.temp).unwrap(),
                vec![],
            )
            .unwrap(),
            limits: self.limits(),
        };
        self.run(job).await
    }

    /// Runs awk with `script` as its program file under the `run` spec.
    async fn awk(&self, script: &str) -> Outcome {
        std::fs::write(self.scope.join("s.awk"), script).unwrap();
        let awk = Path::new("/usr/bin/awk").canonicalize().unwrap();
        let job = Job {
            program: awk.clone(),
            args: vec!["-f".into(), "s.awk".into(), "data.txt".into()],
            workdir: self.workdir(),
            env: vec![("LC_ALL".into(), "C".into()), ("PATH".into(), "".into())],
            sandbox: SandboxSpec::for_run(
                &awk,
                &RootLease::acquire(&self.scope).unwrap(),
                &RootLease::acquire(&self.temp).unwrap(),
            )
            .unwrap(),
            limits: Limits {
                on_cap: OnCap::Kill,
                ..self.limits()
            },
        };
        self.run(job).await
    }

    async fn run(&self, job: Job) -> Outcome {
        let before = self.outside_state();
        let (ctx, _cancel) = CallContext::standalone();
        let out = exec::run(job, &ctx).await.unwrap();
        // No attack here takes long: a run that hit the deadline hid a hang or a stuck wait.
        assert!(!out.timed_out, "the run timed out: {out:?}");
        assert_eq!(
            before,
            self.outside_state(),
            "something outside changed: {out:?}"
        );
        let survivors = processes_in(self.base.path());
        assert!(
            survivors.is_empty(),
            "processes survived the call: {survivors:?}"
        );
        out
    }
}

fn collect(dir: &Path, state: &mut BTreeMap<PathBuf, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            state.insert(path.clone(), b"<dir>".to_vec());
            collect(&path, state);
        } else {
            state.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
        }
    }
}

/// PIDs of processes whose working directory is beneath `base` (every process a call starts
/// works in its scope, so this finds survivors without trusting the code under test).
fn processes_in(base: &Path) -> Vec<u32> {
    let base = base.canonicalize().unwrap();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cwd) = std::fs::read_link(entry.path().join("cwd")) {
            if cwd.starts_with(&base) {
                found.push(pid);
            }
        }
    }
    found
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn sandbox_available() -> bool {
    let ok = linux_sandbox::probe().can_sandbox();
    if !ok {
        eprintln!(
            "skipped: this machine cannot sandbox: {}",
            linux_sandbox::probe()
        );
    }
    ok
}

fn failed(out: &Outcome) -> bool {
    out.exit_code != Some(0)
}

// ---- reading what is not ours ---------------------------------------------------------------

#[tokio::test]
async fn reading_etc_shadow_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w.sh("cat /etc/shadow").await;
    assert!(failed(&out), "{out:?}");
    assert!(out.stdout.is_empty());
}

#[tokio::test]
async fn reading_a_secret_in_the_home_directory_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w
        .sh(&format!("cat '{}/.ssh/id_rsa'", w.home.display()))
        .await;
    assert!(failed(&out));
    assert!(!text(&out.stdout).contains("PRIVATE KEY"));
}

// ---- writing outside ---------------------------------------------------------------------------

#[tokio::test]
async fn writing_outside_through_an_absolute_path_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let target = w.outside.join("victim.txt");
    let out = w.sh(&format!("echo pwned > '{}'", target.display())).await;
    assert!(failed(&out));
    let out = w
        .sh(&format!("echo pwned > '{}/new.txt'", w.outside.display()))
        .await;
    assert!(failed(&out));
}

#[tokio::test]
async fn writing_outside_through_dot_dot_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w
        .sh("echo pwned > ../outside/victim.txt; echo x > ../new.txt")
        .await;
    assert!(failed(&out));
    assert!(!w.base.path().join("new.txt").exists());
}

#[tokio::test]
async fn writing_through_a_symlink_made_inside_the_scope_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w
        .sh(&format!(
            "ln -s '{}' link && echo pwned > link/victim.txt",
            w.outside.display()
        ))
        .await;
    assert!(failed(&out));
}

#[tokio::test]
async fn writing_through_proc_self_root_and_cwd_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w
        .sh(&format!(
            "echo pwned > /proc/self/root{}/victim.txt",
            w.outside.display()
        ))
        .await;
    assert!(failed(&out));
    let out = w
        .sh("echo pwned > /proc/self/cwd/../outside/victim.txt")
        .await;
    assert!(failed(&out));
}

#[tokio::test]
async fn writing_through_dev_fd_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let target = w.outside.join("victim.txt");
    // Opening the outside file is what Landlock refuses, whichever name reaches it.
    let out = w
        .sh(&format!(
            "exec 3<'{t}'; echo pwned > /dev/fd/3; echo pwned > /proc/self/fd/3",
            t = target.display()
        ))
        .await;
    assert!(failed(&out));
}

// ---- hard links and renames (CMD-9) ------------------------------------------------------------

#[tokio::test]
async fn hard_linking_an_outside_file_in_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let victim = w.outside.join("victim.txt");
    for script in [
        format!("ln '{}' here", victim.display()),
        format!("cp -l '{}' here", victim.display()),
        format!(
            "/usr/bin/python3 -c \"import os; os.link('{}', 'here')\"",
            victim.display()
        ),
    ] {
        let out = w.sh(&script).await;
        assert!(failed(&out), "{script}: {out:?}");
        assert!(!w.scope.join("here").exists(), "{script}");
    }
}

#[tokio::test]
async fn hard_linking_inside_the_scope_is_denied_too() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w.sh("ln data.txt twin").await;
    assert!(failed(&out));
    assert!(!w.scope.join("twin").exists());
}

#[tokio::test]
async fn renaming_an_outside_file_in_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w
        .sh(&format!("mv '{}/victim.txt' here", w.outside.display()))
        .await;
    assert!(failed(&out));
    assert!(!w.scope.join("here").exists());
}

// ---- network, sockets, signals, kernel interfaces -------------------------------------------

#[tokio::test]
async fn tcp_connect_to_a_loopback_listener_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let out = w
        .sh(&format!(
            "/usr/bin/python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\""
        ))
        .await;
    assert!(failed(&out));
    assert_eq!(listener.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
}

#[tokio::test]
async fn udp_send_to_a_loopback_socket_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_nonblocking(true).unwrap();
    let port = socket.local_addr().unwrap().port();
    let out = w
        .sh(&format!(
            "/usr/bin/python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('127.0.0.1', {port}))\""
        ))
        .await;
    assert!(failed(&out));
    let mut buf = [0u8; 8];
    assert_eq!(
        socket.recv(&mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
}

#[tokio::test]
async fn connecting_to_an_abstract_unix_socket_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let name = format!("agent-exec-escape-{}", std::process::id());
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    let out = w
        .sh(&format!(
            "/usr/bin/python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('\\0{name}')\""
        ))
        .await;
    assert!(failed(&out));
    assert_eq!(listener.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
}

#[tokio::test]
async fn signalling_a_process_outside_the_sandbox_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let mut outsider = Command::new("/bin/sleep").arg("100").spawn().unwrap();
    let out = w.sh(&format!("kill -KILL {}", outsider.id())).await;
    assert!(failed(&out));
    std::thread::sleep(Duration::from_millis(50));
    let still_running = outsider.try_wait().unwrap().is_none();
    outsider.kill().unwrap();
    outsider.wait().unwrap();
    assert!(
        still_running,
        "the sandboxed kill reached a process outside"
    );
}

#[tokio::test]
async fn ptrace_of_a_sibling_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w
        .sh(
            "sleep 30 & /usr/bin/python3 -c \"import ctypes,sys; l=ctypes.CDLL(None, use_errno=True); \
             r=l.ptrace(16, int(sys.argv[1]), 0, 0); print('ptrace', r, ctypes.get_errno())\" $!",
        )
        .await;
    assert!(text(&out.stdout).contains("ptrace -1 1"), "{out:?}");
}

#[tokio::test]
async fn io_uring_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w
        .sh(
            "/usr/bin/python3 -c \"import ctypes; l=ctypes.CDLL(None, use_errno=True); \
             p=ctypes.create_string_buffer(120); r=l.syscall(425, 8, p); print('uring', r, ctypes.get_errno())\"",
        )
        .await;
    assert!(text(&out.stdout).contains("uring -1 1"), "{out:?}");
}

#[tokio::test]
async fn mount_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w.sh("mkdir m && mount -t tmpfs none m").await;
    assert!(failed(&out));
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&w.scope.join("m").display().to_string()));
}

#[tokio::test]
async fn unshare_into_a_user_namespace_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w.sh("unshare -r /bin/true").await;
    assert!(failed(&out), "{out:?}");
}

// ---- the run spec: one program, no other process ---------------------------------------------

#[tokio::test]
async fn awk_system_starts_nothing() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w
        .awk("BEGIN { r = system(\"touch pwned\"); print \"r=\" r }")
        .await;
    assert!(!w.scope.join("pwned").exists());
    assert!(!text(&out.stdout).contains("r=0"), "{out:?}");
}

#[tokio::test]
async fn awk_command_getline_starts_nothing() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w
        .awk("BEGIN { \"touch pwned; echo ran\" | getline x; print \"x=\" x }")
        .await;
    assert!(!w.scope.join("pwned").exists());
    assert!(!text(&out.stdout).contains("x=ran"), "{out:?}");
}

#[tokio::test]
async fn awk_print_to_a_file_outside_the_mirror_is_denied() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let target = w.outside.join("awk.txt");
    let out = w
        .awk(&format!(
            "BEGIN {{ print \"x\" > \"{}\" }}",
            target.display()
        ))
        .await;
    assert!(!target.exists(), "{out:?}");
}

// ---- liveness: ordinary work still runs -------------------------------------------------------

#[tokio::test]
async fn ordinary_programs_still_run_in_the_scope() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w
        .sh("ls && cat data.txt && awk '{print NR\": \"$0}' data.txt && /usr/bin/python3 -c 'print(6*7)'")
        .await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(
        text(&out.stdout),
        "data.txt\none\ntwo\n1: one\n2: two\n42\n"
    );
}

#[tokio::test]
async fn git_init_and_status_run_in_the_scope() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w
        .sh("/usr/bin/git init -q && /usr/bin/git status --short")
        .await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(text(&out.stdout), "?? data.txt\n");
}

#[tokio::test]
async fn awk_may_write_a_file_in_the_mirror() {
    if !sandbox_available() {
        return;
    }
    let w = World::new();
    let out = w
        .awk("{ n++ } END { print n > \"count.txt\"; print \"done\" }")
        .await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(w.scope.join("count.txt")).unwrap(),
        "2\n"
    );
}

// ---- the same suite as an unprivileged user ---------------------------------------------------

#[test]
fn every_test_also_holds_unprivileged() {
    if std::env::var_os(UNPRIVILEGED_ENV).is_some() || !testkit::is_root() {
        eprintln!("not root, or already the unprivileged run");
        return;
    }
    let out = testkit::run_as_nobody(
        &[
            "--test-threads=2",
            "--skip",
            "every_test_also_holds_unprivileged",
        ],
        &[(UNPRIVILEGED_ENV, "1")],
    );
    assert!(out.is_empty() || out.contains("test result: ok"), "{out}");
}
