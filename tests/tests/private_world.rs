//! The command's own world (LIVE-2): a private `/proc` of its PID
//! namespace and a private `/dev/shm`, through `exec::run` with the `command` spec. Both
//! directions: what works (`ps`, `/proc/self`, Python's multiprocessing and shared memory) and
//! what stays out of reach (the host's processes, the supervisor that is PID 1, the host's and
//! another call's shared memory). Run as root, then again as uid 65534 by
//! `every_test_also_holds_unprivileged`.
#![cfg(target_os = "linux")]
// Helpers outside #[test] fns unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use exec::SandboxSpec;
use fsguard::RootLease;
use testkit::Capability;

const UNPRIVILEGED_ENV: &str = "AGENT_EXEC_PRIVATE_WORLD_UNPRIVILEGED";

mod common;
use common::{Call, show, text};

/// The sandbox `exec` builds for a `command` call on this machine, as its report says.
fn enforcement() -> Option<linux_sandbox::Enforcement> {
    if !testkit::sandbox_available() {
        return None;
    }
    let call = Call::new("agent-exec-world");
    let spec = SandboxSpec::for_command(
        &RootLease::acquire(&call.scope).unwrap(),
        &RootLease::acquire(&call.temp).unwrap(),
        vec![],
    )
    .unwrap();
    let policy = exec::linux::policy(&spec).unwrap();
    match (policy.prepare(), common::shell_refusal()) {
        (Ok(prepared), None) => Some(prepared.enforcement()),
        // This level refuses shells (`cargo xtask matrix`): the refusal is the result.
        (Err(e), Some(reason)) if e.is_unavailable() && e.to_string().contains(&reason) => {
            eprintln!("{} a command's world: {e}", common::REFUSED_MARK);
            None
        }
        (result, reason) => panic!("prepare: {result:?}, expected refusal: {reason:?}"),
    }
}

/// The layers a command's private view (its `/dev/shm`, its root of the grants) is made of:
/// where `AGENT_EXEC_REQUIRE` names one this machine lacks, a test that needs the view fails
/// instead of skipping. A private `/proc` needs a PID namespace with its own `proc`
/// too.
const PRIVATE_WORLD: &[Capability] = &[
    Capability::Landlock,
    Capability::Seccomp,
    Capability::MountNamespaces,
];

/// Whether the command gets a private `/proc`; says loudly why not.
fn private_proc() -> bool {
    let needed = [
        PRIVATE_WORLD,
        &[Capability::PidNamespace, Capability::PrivateProc],
    ]
    .concat();
    let ok = testkit::require(&needed) && enforcement().is_some_and(|e| e.private_proc());
    if !ok {
        eprintln!(
            "skipped: no private /proc here (no PID or mount namespace): {}",
            linux_sandbox::probe()
        );
    }
    ok
}

/// Whether the command gets a private `/dev/shm`; says loudly why not.
fn private_shm() -> bool {
    let ok = testkit::require(PRIVATE_WORLD) && enforcement().is_some_and(|e| e.private_shm());
    if !ok {
        eprintln!(
            "skipped: no private /dev/shm here (no mount namespace): {}",
            linux_sandbox::probe()
        );
    }
    ok
}

/// A process outside every sandbox whose argv and environment carry `secret`.
struct Outsider {
    child: std::process::Child,
}

impl Outsider {
    fn start(secret: &str) -> Outsider {
        // One process (killed by `Drop`, nothing left holding the test's output): python
        // takes the extra words as its own argv.
        let child = Command::new("/usr/bin/python3")
            .args(["-c", "import time; time.sleep(100)"])
            .arg(format!("{secret}-argv"))
            .arg(testkit::marker())
            .env("AGENT_EXEC_SECRET", format!("{secret}-environ"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        Outsider { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Outsider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---- /proc -------------------------------------------------------------------------------------

#[tokio::test]
async fn ps_pgrep_top_and_proc_self_show_only_the_calls_own_processes() {
    if !private_proc() {
        return;
    }
    let call = Call::new("agent-exec-world");
    let outsider = Outsider::start("WORLDSECRET");
    let out = call
        // Waits for the background child to have become `sleep` (under load `ps` could see it
        // still as the forked `sh`).
        .sh("sleep 30 & \
             until [ \"$(cat /proc/$!/comm 2>/dev/null)\" = sleep ]; do :; done; \
             echo PS; ps -e -o pid=,comm= ; \
             echo PGREP; pgrep -x sleep; \
             echo STATUS; grep '^Name:' /proc/self/status; \
             echo TOP; top -bn1 >/dev/null && echo top-ok; \
             echo LS; ls /proc | grep '^[0-9]' | sort -n | tr '\\n' ' '; echo; \
             kill $!")
        .await;
    let stdout = text(&out.stdout);
    assert_eq!(out.exit_code, Some(0), "{}", show(&out));
    let markers = ["PS", "PGREP", "STATUS", "TOP", "LS"];
    let section = |name: &str| {
        let mut lines = stdout.lines().skip_while(|l| *l != name).skip(1);
        let mut body = String::new();
        for line in lines.by_ref().take_while(|l| !markers.contains(l)) {
            body.push_str(line);
            body.push('\n');
        }
        body
    };
    let ps = section("PS");
    let names: Vec<&str> = ps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    // The shell, its sleep and ps itself: nothing of the host, not the supervisor.
    assert!(
        names.contains(&"sh") && names.contains(&"sleep"),
        "{}",
        show(&out)
    );
    assert!(names.contains(&"ps"), "{}", show(&out));
    assert!(
        names.len() <= 4,
        "more than the call's own processes: {}",
        show(&out)
    );
    assert!(
        !stdout.contains(" 1 "),
        "the supervisor (PID 1) is listed: {}",
        show(&out)
    );
    assert_eq!(section("PGREP").lines().count(), 1, "{}", show(&out));
    assert_eq!(section("STATUS").trim(), "Name:\tgrep", "{}", show(&out));
    assert!(stdout.contains("top-ok"), "{}", show(&out));
    let listed: Vec<u32> = section("LS")
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(!listed.contains(&1), "{}", show(&out));
    assert!(!listed.contains(&outsider.pid()), "{}", show(&out));
    assert!(!stdout.contains("WORLDSECRET"), "{}", show(&out));
}

#[tokio::test]
async fn no_host_process_argv_or_environment_is_visible() {
    if !private_proc() {
        return;
    }
    let call = Call::new("agent-exec-world");
    let outsider = Outsider::start("HOSTSECRET");
    let pid = outsider.pid();
    let out = call
        .sh(&format!(
            "cat /proc/*/cmdline /proc/*/environ 2>/dev/null | tr '\\0' ' '; \
             cat /proc/{pid}/cmdline /proc/{pid}/environ 2>/dev/null | tr '\\0' ' '; \
             ps -e -o args= ; ps eww -e 2>/dev/null; echo end"
        ))
        .await;
    let stdout = text(&out.stdout);
    assert!(stdout.ends_with("end\n"), "{}", show(&out));
    assert!(!stdout.contains("HOSTSECRET"), "{}", show(&out));
    // The host's test binary (argv of the supervisor, whose memory it shares) is not named.
    assert!(!stdout.contains("private_world"), "{}", show(&out));
    // The secret was there to find.
    assert!(!testkit::alive_with("HOSTSECRET").is_empty());
}

/// Review 5: a root host's command runs as uid 0 without capabilities, which still reads the
/// root-only (0400) tables of a fresh `proc` as their owner: the kernel heap's layout, every
/// CPU's timers, every user's keys. They read empty; the command's own files still work.
#[tokio::test]
async fn the_machine_wide_root_only_proc_tables_read_empty() {
    if !private_proc() {
        return;
    }
    let call = Call::new("agent-exec-world");
    let out = call
        .sh(concat!(
            "for f in slabinfo vmallocinfo pagetypeinfo timer_list keys key-users; do ",
            r#"[ -e /proc/$f ] && printf '%s=%s\n' $f "$(head -c 20 /proc/$f 2>/dev/null | wc -c)"; "#,
            "done; grep -c ^Name: /proc/self/status; echo end",
        ))
        .await;
    let stdout = text(&out.stdout);
    assert!(stdout.ends_with("1\nend\n"), "{}", show(&out));
    for line in stdout.lines().filter(|l| l.contains('=')) {
        assert!(line.ends_with("=0"), "{line}: {}", show(&out));
    }
    // The host has them (as root, to read): there was something to hide.
    if testkit::is_root() {
        assert!(std::fs::read_to_string("/proc/slabinfo").is_ok_and(|t| !t.is_empty()));
        assert!(stdout.contains("slabinfo=0"), "{}", show(&out));
    }
}

#[tokio::test]
async fn the_supervisor_pid_1_is_out_of_reach() {
    if !private_proc() {
        return;
    }
    let call = Call::new("agent-exec-world");
    // Each attempt prints its exit status; reading anything of PID 1 would print it.
    let mut script = String::new();
    for (i, attempt) in [
        "ls -d /proc/1",
        "cat /proc/1/environ",
        "cat /proc/1/cmdline",
        "cat /proc/1/maps",
        "cat /proc/1/status",
        "ls /proc/1/fd",
        "ls /proc/1/root/",
        "ls /proc/1/cwd/",
        "readlink /proc/1/exe",
        "/usr/bin/python3 -c \"open('/proc/1/mem','rb').read(1)\"",
        "/usr/bin/python3 -c \"import os; os.kill(1, 0)\"",
    ]
    .iter()
    .enumerate()
    {
        script.push_str(&format!("{attempt}; echo \"rc=$? #{i}\"; "));
    }
    let out = call.sh(&script).await;
    let stdout = text(&out.stdout);
    for line in stdout.lines().filter(|l| l.starts_with("rc=")) {
        // kill(1, 0) is allowed by the kernel for a parent it can signal: only its answer
        // matters (EPERM from the signal scope); every other attempt must fail.
        if line.ends_with("#10") {
            continue;
        }
        assert!(!line.starts_with("rc=0"), "{line}: {}", show(&out));
    }
    assert_eq!(stdout.lines().filter(|l| l.starts_with("rc=")).count(), 11);
    assert!(!stdout.contains("private_world"), "{}", show(&out));
    assert!(!stdout.contains("PATH="), "{}", show(&out));
}

#[tokio::test]
async fn process_substitution_and_dev_stdin_reach_the_calls_own_descriptors() {
    if !private_proc() {
        return;
    }
    let call = Call::new("agent-exec-world");
    let out = call
        .sh(
            "/bin/bash -c 'diff <(echo same) <(echo same) && echo diff-ok'; \
             echo piped | cat /dev/stdin; echo err >/dev/stderr",
        )
        .await;
    assert_eq!(text(&out.stdout), "diff-ok\npiped\n", "{}", show(&out));
    assert_eq!(text(&out.stderr), "err\n", "{}", show(&out));
}

// ---- /dev/shm ----------------------------------------------------------------------------------

#[tokio::test]
async fn python_shared_memory_works_across_processes() {
    if !private_shm() {
        return;
    }
    let call = Call::new("agent-exec-world");
    let out = call
        .python(
            "import multiprocessing as mp\n\
             from multiprocessing import shared_memory\n\
             def fill(name):\n    s = shared_memory.SharedMemory(name=name)\n    s.buf[:5] = b'hello'\n    s.close()\n\
             if __name__ == '__main__':\n\
             \x20   shm = shared_memory.SharedMemory(create=True, size=1 << 20)\n\
             \x20   p = mp.Process(target=fill, args=(shm.name,)); p.start(); p.join()\n\
             \x20   print('shm', bytes(shm.buf[:5]).decode())\n\
             \x20   shm.close(); shm.unlink()\n",
        )
        .await;
    assert_eq!(out.exit_code, Some(0), "{}", show(&out));
    assert_eq!(text(&out.stdout), "shm hello\n", "{}", show(&out));
}

/// glibc's `sem_open` (2.36) writes a temporary file in `/dev/shm` and `link(2)`s it to the
/// semaphore's name; `multiprocessing`'s `SemLock` (and with it `Pool`, `Queue`, `Lock`) needs
/// it. The supervisor's link broker makes exactly that link (LIVE-2).
#[tokio::test]
async fn python_semaphores_locks_queues_and_pools_work_through_the_shm_link_broker() {
    // glibc's `sem_open` links `/dev/shm/sem.XXXXXX` to `/dev/shm/sem.NAME`: the one link the
    // supervisor makes for the command (LIVE-2).
    if !private_shm() {
        return;
    }
    let call = Call::new("agent-exec-world");
    let out = call
        .python(
            "import multiprocessing as mp\n\
             def sq(x): return x * x\n\
             if __name__ == '__main__':\n\
             \x20   s = mp.Semaphore(2); s.acquire(); s.release(); print('semaphore ok')\n\
             \x20   l = mp.Lock()\n\
             \x20   with l: print('lock ok')\n\
             \x20   q = mp.Queue(); q.put(41); print('queue', q.get() + 1)\n\
             \x20   with mp.Pool(2) as p: print('pool', sum(p.map(sq, range(10))))\n",
        )
        .await;
    assert_eq!(
        text(&out.stdout),
        "semaphore ok\nlock ok\nqueue 42\npool 285\n",
        "{}",
        show(&out)
    );
    assert_eq!(out.exit_code, Some(0), "{}", show(&out));
}

/// Files beneath `dir` with more than one name.
fn hard_linked_beneath(dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = std::fs::symlink_metadata(entry.path()).unwrap();
        if meta.is_dir() {
            found.extend(hard_linked_beneath(&entry.path()));
        } else if meta.nlink() > 1 {
            found.push(entry.path());
        }
    }
    found
}

#[tokio::test]
async fn every_hard_link_but_two_names_directly_in_the_private_dev_shm_is_refused() {
    // CMD-9 stays: the broker links `/dev/shm/<name>` to `/dev/shm/<name>` only, resolved in
    // the call's own tmpfs, and answers everything else EPERM as the filter did before.
    if !private_shm() {
        return;
    }
    let call = Call::new("agent-exec-world");
    let out = call
        .python(
            r#"import os, ctypes
S = os.getcwd(); T = os.environ['TMPDIR']
libc = ctypes.CDLL(None, use_errno=True)
def linkat(od, o, nd, n, fl):
    if libc.linkat(od, o, nd, n, fl) != 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
def attempt(label, f):
    try:
        f(); print(label, 'ok')
    except OSError as e:
        print(label, e.errno)
for p in [S + '/a', T + '/a', '/dev/shm/t']:
    open(p, 'w').close()
# Landlock refuses symbolic links in /dev/shm (no MAKE_SYM); the broker would not resolve
# one anyway: a name with a slash is refused before anything is looked up.
attempt('symlink-in-shm', lambda: os.symlink(S, '/dev/shm/d'))
dfd = os.open('/dev/shm', os.O_RDONLY | os.O_DIRECTORY)
attempt('workspace', lambda: os.link('a', 'b'))
attempt('workspace-absolute', lambda: os.link(S + '/a', S + '/b'))
attempt('temp', lambda: os.link(T + '/a', T + '/b'))
attempt('shm-to-workspace', lambda: os.link('/dev/shm/t', S + '/c'))
attempt('workspace-to-shm', lambda: os.link(S + '/a', '/dev/shm/c'))
attempt('dotdot', lambda: os.link('/dev/shm/../shm/t', '/dev/shm/x'))
attempt('dotdot-name', lambda: os.link('/dev/shm/t', '/dev/shm/..'))
attempt('through-symlink', lambda: os.link('/dev/shm/d/a', '/dev/shm/y'))
attempt('into-symlink', lambda: os.link('/dev/shm/t', '/dev/shm/d/e'))
attempt('relative-dirfd', lambda: os.link('t', 'r', src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False))
attempt('dirfd-follow', lambda: os.link('t', 'r', src_dir_fd=dfd, dst_dir_fd=dfd))
attempt('symlink-follow', lambda: linkat(-100, b'/dev/shm/t', -100, b'/dev/shm/f', 0x400))
attempt('empty-path', lambda: linkat(os.open('/dev/shm/t', os.O_RDONLY), b'', -100, b'/dev/shm/g', 0x1000))
attempt('too-long', lambda: os.link('/dev/shm/t', '/dev/shm/' + 'n' * 256))
attempt('shm', lambda: os.link('/dev/shm/t', '/dev/shm/u'))
attempt('shm-linkat', lambda: os.link('/dev/shm/t', '/dev/shm/v', follow_symlinks=False))
attempt('shm-exists', lambda: os.link('/dev/shm/t', '/dev/shm/u'))
print('t names', os.stat('/dev/shm/t').st_nlink)
print('a names', os.stat(S + '/a').st_nlink, os.stat(T + '/a').st_nlink)
def listeners():
    found = []
    for f in os.listdir('/proc/self/fd'):
        try:
            if 'seccomp' in os.readlink('/proc/self/fd/' + f): found.append(f)
        except OSError:
            pass
    return found
print('listener', listeners() if os.path.isdir('/proc/self/fd') else [])
"#,
        )
        .await;
    let eperm = libc::EPERM;
    let want = format!(
        "symlink-in-shm {}\nworkspace {eperm}\nworkspace-absolute {eperm}\ntemp {eperm}\nshm-to-workspace {eperm}\n\
         workspace-to-shm {eperm}\ndotdot {eperm}\ndotdot-name {eperm}\n\
         through-symlink {eperm}\ninto-symlink {eperm}\nrelative-dirfd {eperm}\n\
         dirfd-follow {eperm}\nsymlink-follow {eperm}\nempty-path {eperm}\ntoo-long {eperm}\n\
         shm ok\nshm-linkat ok\nshm-exists {}\nt names 3\na names 1 1\nlistener []\n",
        libc::EACCES,
        libc::EEXIST
    );
    assert_eq!(text(&out.stdout), want, "{}", show(&out));
    for dir in [&call.scope, &call.temp] {
        assert_eq!(hard_linked_beneath(dir), Vec::<PathBuf>::new());
    }
}

#[tokio::test]
async fn the_hosts_dev_shm_is_not_visible_and_nothing_leaks_into_it() {
    if !private_shm() {
        return;
    }
    let call = Call::new("agent-exec-world");
    let host = PathBuf::from(format!("/dev/shm/agent-exec-host-{}", testkit::marker()));
    std::fs::write(&host, "HOSTSHM\n").unwrap();
    let name = host.file_name().unwrap().to_string_lossy().into_owned();
    let out = call
        .sh(&format!(
            "ls -A /dev/shm; cat /dev/shm/{name}; echo x > /dev/shm/{name}; \
             echo inside > /dev/shm/made-inside && cat /dev/shm/made-inside; echo end"
        ))
        .await;
    let stdout = text(&out.stdout);
    assert_eq!(stdout, "inside\nend\n", "{}", show(&out));
    assert_eq!(std::fs::read_to_string(&host).unwrap(), "HOSTSHM\n");
    assert!(!Path::new("/dev/shm/made-inside").exists());
    std::fs::remove_file(&host).unwrap();
}

#[tokio::test]
async fn another_concurrent_calls_shared_memory_is_not_visible() {
    if !private_shm() {
        return;
    }
    let (first, second) = (Call::new("agent-exec-world"), Call::new("agent-exec-world"));
    let ready = first.scope.join("ready");
    let done = first.scope.join("done");
    let holder = first.sh(
        "echo CALLSECRET > /dev/shm/agent-exec-call-object && touch ready; \
         i=0; while [ ! -e done ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; \
         cat /dev/shm/agent-exec-call-object",
    );
    let prober = async {
        while !ready.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let out = second
            .sh("ls -A /dev/shm; cat /dev/shm/agent-exec-call-object; echo end")
            .await;
        std::fs::write(&done, "").unwrap();
        out
    };
    let (held, probed) = tokio::join!(holder, prober);
    assert_eq!(text(&held.stdout), "CALLSECRET\n", "{}", show(&held));
    assert_eq!(text(&probed.stdout), "end\n", "{}", show(&probed));
    assert!(!Path::new("/dev/shm/agent-exec-call-object").exists());
}

// ---- unix sockets -------------------------------------------------------------

/// Whether the command's view is a new root of the grants only, where `AF_UNIX` is allowed.
fn private_root() -> bool {
    let ok = testkit::require(PRIVATE_WORLD) && enforcement().is_some_and(|e| e.private_root());
    if !ok {
        eprintln!(
            "skipped: no root of the grants only here, so AF_UNIX stays refused: {}",
            linux_sandbox::probe()
        );
    }
    ok
}

/// A python snippet that connects to `address` (a path, or `\0name` for an abstract socket)
/// and prints `connected`, or the errno it got.
fn connect_script(address: &str) -> String {
    format!(
        "import socket\n\
         try:\n    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
         except OSError as e:\n    print('socket refused', e.errno); raise SystemExit\n\
         print('socket made')\n\
         try:\n    s.connect({address:?}.replace('\\\\0', '\\0', 1))\n    print('connected')\n\
         except OSError as e:\n    print('refused', e.errno)\n"
    )
}

/// `wanted` where a shell may make unix sockets; below Landlock ABI 6 (no abstract-socket
/// scope) `socket(AF_UNIX)` itself is refused, a stronger refusal that the report names.
fn refused_or(wanted: String, out: &exec::Outcome) -> String {
    if common::unix_sockets_here() {
        return wanted;
    }
    assert!(
        out.enforcement.contains("unix sockets refused"),
        "{}",
        show(out)
    );
    format!("socket refused {}\n", libc::EPERM)
}

#[tokio::test]
async fn a_unix_socket_server_and_client_and_a_multiprocessing_manager_work() {
    if !private_root() {
        return;
    }
    let call = Call::new("agent-exec-world");
    if !common::unix_sockets_here() {
        // Impossible at this level (LIVE-2 needs the abstract-socket scope): the documented
        // refusal instead.
        let out = call.python(&connect_script("server.sock")).await;
        assert_eq!(text(&out.stdout), refused_or(String::new(), &out));
        eprintln!(
            "{} unix sockets below Landlock ABI 6: {}",
            common::REFUSED_MARK,
            out.enforcement
        );
        return;
    }
    let out = call
        .python(
            "import os, socket, threading, multiprocessing as mp\n\
             def serve(path):\n\
             \x20   srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
             \x20   srv.bind(path); srv.listen(1)\n\
             \x20   def answer():\n        c, _ = srv.accept(); c.sendall(c.recv(16).upper()); c.close()\n\
             \x20   t = threading.Thread(target=answer); t.start()\n\
             \x20   cl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); cl.connect(path)\n\
             \x20   cl.sendall(b'ping'); print(cl.recv(16).decode()); t.join(); srv.close()\n\
             if __name__ == '__main__':\n\
             \x20   serve('server.sock')\n\
             \x20   serve(os.path.join(os.environ['TMPDIR'], 'temp.sock'))\n\
             \x20   a, b = socket.socketpair(); a.sendall(b'pair'); print(b.recv(4).decode())\n\
             \x20   with mp.Manager() as m:\n        d = m.dict(); d['k'] = 42; print('manager', d['k'])\n",
        )
        .await;
    assert_eq!(out.exit_code, Some(0), "{}", show(&out));
    assert_eq!(
        text(&out.stdout),
        "PING\nPING\npair\nmanager 42\n",
        "{}",
        show(&out)
    );
}

// ---- pseudo-terminals (devices) -----------------------------------------------------

/// A command opens pseudo-terminals of its own (`script`, Python's `pty`) in a private `devpts`
/// and sees none of the host's: `/dev/pts` holds only `ptmx` and what it opened. Changing a
/// terminal's line discipline (`TIOCSETD`, which loads kernel modules) stays refused, and one call
/// holds at most 64 terminals (the machine-wide pool is shared by every call and container).
#[tokio::test]
async fn a_command_opens_its_own_pseudo_terminals_and_sees_none_of_the_hosts() {
    if !private_root() {
        return;
    }
    // A terminal of the host's, open while the call runs.
    let host = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/ptmx")
        .ok();
    let call = Call::new("agent-exec-world");
    let out = call
        .python(
            "import os, pty\n\
             print('before', sorted(os.listdir('/dev/pts')))\n\
             pid, fd = pty.fork()\n\
             if pid == 0:\n\
             \x20   os.write(1, b'in-pty ' + os.ttyname(0).encode() + b'\\n')\n\
             \x20   os._exit(0)\n\
             data = b''\n\
             while True:\n\
             \x20   try:\n        chunk = os.read(fd, 100)\n    except OSError:\n        break\n\
             \x20   if not chunk:\n        break\n\
             \x20   data += chunk\n\
             os.waitpid(pid, 0)\n\
             print(data.decode().strip())\n\
             import fcntl, struct\n\
             m, _s = os.openpty()\n\
             try:\n    fcntl.ioctl(m, 0x5423, struct.pack('i', 0))\n    print('TIOCSETD allowed')\n\
             except OSError as e:\n    print('TIOCSETD refused', e.errno)\n\
             # The terminals held: pty.fork's, openpty's above, and these.\n\
             held = []\n\
             try:\n    while len(held) < 1000:\n        held.append(os.openpty())\n\
             except OSError:\n    pass\n\
             print('at most', len(held) + 2)\n",
        )
        .await;
    drop(host);
    assert_eq!(out.exit_code, Some(0), "{}", show(&out));
    assert_eq!(
        text(&out.stdout),
        "before ['ptmx']\nin-pty /dev/pts/0\nTIOCSETD refused 1\nat most 64\n",
        "{}",
        show(&out)
    );
    if std::path::Path::new("/usr/bin/script").exists() {
        let out = call.sh("script -qc 'tty; echo script-ran' /dev/null").await;
        assert!(text(&out.stdout).contains("script-ran"), "{}", show(&out));
        assert!(text(&out.stdout).contains("/dev/pts/0"), "{}", show(&out));
    }
}

#[tokio::test]
async fn a_unix_listener_outside_the_grants_is_not_reachable() {
    if !private_root() {
        return;
    }
    let call = Call::new("agent-exec-world");
    // As a tmux or an ssh-agent socket: a fresh directory under /tmp that no grant holds.
    let outside = tempfile::Builder::new()
        .prefix("agent-exec-host-sockets")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(
        outside.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let path = outside.path().join("default");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let out = call
        .python(&connect_script(&path.display().to_string()))
        .await;
    assert_eq!(
        text(&out.stdout),
        refused_or(format!("socket made\nrefused {}\n", libc::ENOENT), &out),
        "{}",
        show(&out)
    );
    assert_eq!(
        listener.accept().unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
}

#[tokio::test]
async fn the_hosts_system_sockets_and_runtime_directories_are_not_in_the_view() {
    if !private_root() {
        return;
    }
    let call = Call::new("agent-exec-world");
    let mut script = String::new();
    // `/var` holds the command's own `/var/tmp` (NET-2) and nothing else of the host's.
    script.push_str("ls -A /var 2>/dev/null | grep -vx tmp | sed 's/^/present in \\/var: /'; ");
    for dir in [
        "/run",
        "/var/run",
        "/var/lib",
        "/home",
        "/root",
        "/tmp/.X11-unix",
        "/run/user",
    ] {
        script.push_str(&format!("[ -e {dir} ] && echo 'present {dir}'; "));
    }
    let mut tried = Vec::new();
    for socket in [
        "/run/dbus/system_bus_socket",
        "/var/run/dbus/system_bus_socket",
        "/run/docker.sock",
        "/var/run/docker.sock",
        "/run/systemd/private",
        "/run/systemd/journal/socket",
        "/dev/log",
    ] {
        if Path::new(socket).exists() {
            tried.push(socket);
            script.push_str(&format!(
                "/usr/bin/python3 -c \"import socket; socket.socket(socket.AF_UNIX).connect('{socket}')\" \
                 2>/dev/null && echo 'connected {socket}'; "
            ));
        }
    }
    eprintln!("host sockets present and tried: {tried:?}");
    script.push_str("echo end");
    let out = call.sh(&script).await;
    assert_eq!(text(&out.stdout), "end\n", "{}", show(&out));
}

#[tokio::test]
async fn an_abstract_socket_of_the_host_is_refused_by_the_landlock_scope() {
    if !private_root() {
        return;
    }
    use std::os::linux::net::SocketAddrExt;
    let call = Call::new("agent-exec-world");
    let name = format!("agent-exec-world-{}", testkit::marker());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    let out = call.python(&connect_script(&format!("\\0{name}"))).await;
    // The socket is made (AF_UNIX is allowed here); connecting out is what the scope refuses.
    // In a private network namespace (NET-1) the host's abstract names are not even there:
    // abstract unix sockets are named per network namespace, so nobody listens.
    let errno = if out.enforcement.contains("a private loopback network") {
        libc::ECONNREFUSED
    } else {
        libc::EPERM
    };
    assert_eq!(
        text(&out.stdout),
        refused_or(format!("socket made\nrefused {errno}\n"), &out),
        "{}",
        show(&out)
    );
    assert_eq!(
        listener.accept().unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
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
