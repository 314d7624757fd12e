//! The escape suite: each test tries one way out of the sandbox through `exec::run` and asserts
//! the attempt failed, nothing outside the scope changed, and no process it started is alive
//! (RUN-6, RUN-7, CMD-2, CMD-9, CMD-10; invariants 2, 4). Liveness tests show the
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

mod common;

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

    /// Every file outside the scope, with its content and metadata (mode, owner, times,
    /// extended attributes: Landlock does not govern metadata).
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
        let job = self.sh_job(script);
        self.run(job).await
    }

    /// The job [`World::sh`] runs.
    fn sh_job(&self, script: &str) -> Job {
        Job {
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
            merge_stderr: false,
        }
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
            merge_stderr: false,
        };
        self.run(job).await
    }

    async fn run(&self, job: Job) -> Outcome {
        let before = self.outside_state();
        let (ctx, _cancel) = CallContext::standalone();
        let out = exec::run(job, &ctx).await.unwrap();
        // No attack here takes long: a run that hit the deadline hid a hang or a stuck wait.
        assert_ne!(out.end, exec::End::TimedOut, "the run timed out: {out:?}");
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
    state.insert(dir.join("<meta>"), metadata(dir));
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            state.insert(path.clone(), b"<dir>".to_vec());
            collect(&path, state);
        } else {
            let mut record = std::fs::read(&path).unwrap_or_default();
            record.extend(metadata(&path));
            state.insert(path.clone(), record);
        }
    }
}

/// Mode, owner, modification time and extended attributes of `path` (not followed).
fn metadata(path: &Path) -> Vec<u8> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).unwrap();
    let mut record = format!(
        "|mode {:o} uid {} gid {} mtime {}.{}|",
        meta.mode(),
        meta.uid(),
        meta.gid(),
        meta.mtime(),
        meta.mtime_nsec()
    )
    .into_bytes();
    record.extend(xattrs(path));
    record
}

fn xattrs(path: &Path) -> Vec<u8> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let mut names = vec![0u8; 4096];
    // SAFETY: a C string and a writable buffer of that length.
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    if n <= 0 {
        return Vec::new();
    }
    names.truncate(n as usize);
    names
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

// Skips loudly, or fails where `AGENT_EXEC_REQUIRE` names what is missing.
use testkit::sandbox_available;

fn failed(out: &Outcome) -> bool {
    out.exit_code != Some(0)
}

// ---- reading what is not ours ---------------------------------------------------------------

#[tokio::test]
async fn reading_etc_shadow_is_denied() {
    if !sandbox_available() || common::shell_refused_here("reading_etc_shadow_is_denied").await {
        return;
    }
    let w = World::new();
    let out = w.sh("cat /etc/shadow").await;
    assert!(failed(&out), "{out:?}");
    assert!(out.stdout.is_empty());
}

#[tokio::test]
async fn reading_a_secret_in_the_home_directory_is_denied() {
    if !sandbox_available()
        || common::shell_refused_here("reading_a_secret_in_the_home_directory_is_denied").await
    {
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
    if !sandbox_available()
        || common::shell_refused_here("writing_outside_through_an_absolute_path_is_denied").await
    {
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
    if !sandbox_available()
        || common::shell_refused_here("writing_outside_through_dot_dot_is_denied").await
    {
        return;
    }
    let w = World::new();
    let out = w.sh("echo pwned > ../outside/victim.txt").await;
    assert!(failed(&out));
    // The test's directory lies in the host's `/tmp`: in the command's view it is a directory
    // of its own `/tmp` (NET-2), where a write may land, and never reaches the host's.
    w.sh("echo x > ../new.txt").await;
    assert!(!w.base.path().join("new.txt").exists());
}

#[tokio::test]
async fn writing_through_a_symlink_made_inside_the_scope_is_denied() {
    if !sandbox_available()
        || common::shell_refused_here("writing_through_a_symlink_made_inside_the_scope_is_denied")
            .await
    {
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
    if !sandbox_available()
        || common::shell_refused_here("writing_through_proc_self_root_and_cwd_is_denied").await
    {
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
    if !sandbox_available() || common::shell_refused_here("writing_through_dev_fd_is_denied").await
    {
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
    if !sandbox_available()
        || common::shell_refused_here("hard_linking_an_outside_file_in_is_denied").await
    {
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
    if !sandbox_available()
        || common::shell_refused_here("hard_linking_inside_the_scope_is_denied_too").await
    {
        return;
    }
    let w = World::new();
    let out = w.sh("ln data.txt twin").await;
    assert!(failed(&out));
    assert!(!w.scope.join("twin").exists());
}

#[tokio::test]
async fn renaming_an_outside_file_in_is_denied() {
    if !sandbox_available()
        || common::shell_refused_here("renaming_an_outside_file_in_is_denied").await
    {
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
    if !sandbox_available()
        || common::shell_refused_here("tcp_connect_to_a_loopback_listener_is_denied").await
    {
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
    if !sandbox_available()
        || common::shell_refused_here("udp_send_to_a_loopback_socket_is_denied").await
    {
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
    // In a private network namespace (NET-1) the datagram goes to the command's own loopback,
    // where nothing listens: the send succeeds and nothing arrives here. Without one the socket
    // is refused.
    let loopback = out.enforcement.contains("a private loopback network");
    assert!(loopback || failed(&out), "{out:?}");
    let mut buf = [0u8; 8];
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        socket.recv(&mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
}

/// NET-1: the host's listeners on `127.0.0.1` and `::1`, TCP and UDP, and its abstract unix
/// socket are out of reach of a command that has its own loopback, and one call's server is
/// out of reach of another call running at the same time.
#[tokio::test]
async fn the_hosts_loopback_and_another_calls_server_are_unreachable_from_a_private_loopback() {
    if !sandbox_available()
        || common::shell_refused_here(
            "the_hosts_loopback_and_another_calls_server_are_unreachable_from_a_private_loopback",
        )
        .await
    {
        return;
    }
    let w = World::new();
    let tcp4 = TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp6 = TcpListener::bind("[::1]:0").ok();
    let udp4 = UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp6 = UdpSocket::bind("[::1]:0").ok();
    let name = format!("agent-exec-net-{}", std::process::id());
    let abstract_addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let unix = UnixListener::bind_addr(&abstract_addr).unwrap();
    for l in [Some(&tcp4), tcp6.as_ref()].into_iter().flatten() {
        l.set_nonblocking(true).unwrap();
    }
    for u in [Some(&udp4), udp6.as_ref()].into_iter().flatten() {
        u.set_nonblocking(true).unwrap();
    }
    unix.set_nonblocking(true).unwrap();
    let port = |a: std::io::Result<std::net::SocketAddr>| a.map(|a| a.port()).unwrap_or(0);
    let script = format!(
        "import socket\n\
         def attempt(name, make, addr):\n\
         \x20   try:\n\
         \x20       s = make(); s.settimeout(2)\n\
         \x20       if s.type == socket.SOCK_DGRAM: s.sendto(b'x', addr); s.sendto(b'x', addr)\n\
         \x20       else: s.connect(addr); print(name, 'CONNECTED')\n\
         \x20   except OSError as e: print(name, 'refused', e.errno)\n\
         attempt('tcp4', lambda: socket.socket(socket.AF_INET), ('127.0.0.1', {}))\n\
         attempt('tcp6', lambda: socket.socket(socket.AF_INET6), ('::1', {}))\n\
         attempt('udp4', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM), ('127.0.0.1', {}))\n\
         attempt('udp6', lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM), ('::1', {}))\n\
         attempt('abstract', lambda: socket.socket(socket.AF_UNIX), '\\0{name}')\n\
         attempt('other', lambda: socket.socket(socket.AF_INET), ('127.0.0.1', int(open('port').read())))\n",
        port(tcp4.local_addr()),
        tcp6.as_ref().map_or(0, |l| port(l.local_addr())),
        port(udp4.local_addr()),
        udp6.as_ref().map_or(0, |u| port(u.local_addr())),
    );
    std::fs::write(w.scope.join("attack.py"), script).unwrap();
    // Another call's server: it writes its port, then serves until the attack is over.
    let server = w.sh_job(
        "exec /usr/bin/python3 -c \"import socket, time\n\
         s = socket.create_server(('127.0.0.1', 0)); open('port.tmp', 'w').write(str(s.getsockname()[1]))\n\
         import os; os.rename('port.tmp', 'port'); s.settimeout(5)\n\
         try: s.accept(); print('ACCEPTED')\n\
         except OSError: print('nobody came')\""
    );
    let (ctx, _cancel) = CallContext::standalone();
    let serving = tokio::spawn(async move { exec::run(server, &ctx).await.unwrap() });
    for _ in 0..200 {
        if w.scope.join("port").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Run beside the server, so not through `World::run` (which finds the server's process).
    let (ctx, _cancel) = CallContext::standalone();
    let out = exec::run(w.sh_job("/usr/bin/python3 attack.py"), &ctx)
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(stdout.contains("other refused"), "{out:?}");
    assert!(!stdout.contains("CONNECTED"), "{out:?}");
    let served = serving.await.unwrap();
    assert!(text(&served.stdout).contains("nobody came"), "{served:?}");
    for l in [Some(&tcp4), tcp6.as_ref()].into_iter().flatten() {
        assert_eq!(l.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
    }
    let mut buf = [0u8; 8];
    for u in [Some(&udp4), udp6.as_ref()].into_iter().flatten() {
        assert_eq!(u.recv(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
    }
    assert_eq!(unix.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
    let survivors = processes_in(w.base.path());
    assert!(survivors.is_empty(), "processes survived: {survivors:?}");
}

/// NET-1: in the private network namespace only route and socket-diagnostics netlink are
/// allowed; packet sockets, other netlink protocols (audit, uevents) and vsock (not
/// network-namespaced: it would reach the host's and the hypervisor's services) stay refused.
#[tokio::test]
async fn packet_vsock_and_other_netlink_sockets_stay_refused() {
    if !sandbox_available()
        || common::shell_refused_here("packet_vsock_and_other_netlink_sockets_stay_refused").await
    {
        return;
    }
    let w = World::new();
    let out = w
        .sh(
            "/usr/bin/python3 -c \"import socket\n\
             for fam, ty, proto in ((16, 3, 9), (16, 3, 15), (16, 3, 12), (17, 3, 0), (40, 1, 0)):\n\
             \x20   try: socket.socket(fam, ty, proto); print(fam, proto, 'MADE')\n\
             \x20   except OSError as e: print(fam, proto, e.errno)\"",
        )
        .await;
    let stdout = text(&out.stdout);
    assert_eq!(
        stdout, "16 9 1\n16 15 1\n16 12 1\n17 0 1\n40 0 1\n",
        "{out:?}"
    );
}

/// NET-2: the command's `/tmp` and `/var/tmp` are its own: a file of the host's `/tmp` is not
/// there, and what the command writes there never reaches the host's.
#[tokio::test]
async fn the_hosts_tmp_is_neither_readable_nor_writable() {
    if !sandbox_available()
        || common::shell_refused_here("the_hosts_tmp_is_neither_readable_nor_writable").await
    {
        return;
    }
    let w = World::new();
    let name = format!("agent-exec-host-tmp-{}", std::process::id());
    let host = Path::new("/tmp").join(&name);
    std::fs::write(&host, "host secret\n").unwrap();
    let out = w
        .sh(&format!(
            "cat /tmp/{name}; ls /tmp | grep -c {name}; echo mine > /tmp/{name}.new; \
             echo mine > /var/tmp/{name}.new; echo done"
        ))
        .await;
    let written = [
        Path::new("/tmp").join(format!("{name}.new")),
        Path::new("/var/tmp").join(format!("{name}.new")),
    ];
    let leaked: Vec<_> = written.iter().filter(|p| p.exists()).collect();
    for p in &written {
        let _ = std::fs::remove_file(p);
    }
    std::fs::remove_file(&host).unwrap();
    assert!(leaked.is_empty(), "written into the host's: {leaked:?}");
    let stdout = text(&out.stdout);
    assert!(!stdout.contains("host secret"), "{out:?}");
    assert!(stdout.starts_with("0\n"), "{out:?}");
}

#[tokio::test]
async fn connecting_to_an_abstract_unix_socket_is_denied() {
    if !sandbox_available()
        || common::shell_refused_here("connecting_to_an_abstract_unix_socket_is_denied").await
    {
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
    if !sandbox_available()
        || common::shell_refused_here("signalling_a_process_outside_the_sandbox_is_denied").await
    {
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
    if !sandbox_available() || common::shell_refused_here("ptrace_of_a_sibling_is_denied").await {
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
    if !sandbox_available() || common::shell_refused_here("io_uring_is_denied").await {
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
    if !sandbox_available() || common::shell_refused_here("mount_is_denied").await {
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
    if !sandbox_available()
        || common::shell_refused_here("unshare_into_a_user_namespace_is_denied").await
    {
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
    if !sandbox_available()
        || common::shell_refused_here("ordinary_programs_still_run_in_the_scope").await
    {
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
    if !sandbox_available()
        || common::shell_refused_here("git_init_and_status_run_in_the_scope").await
    {
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
    if !sandbox_available()
        || common::shell_refused_here("awk_may_write_a_file_in_the_mirror").await
    {
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

// ---- metadata outside the scope, set-id bits, the immutable flag ----------------------------

/// Whether this machine gives the command private namespaces (a read-only view outside the
/// writable roots): the rule exec applies, for the launch exec uses. The fallback is seccomp
/// alone and a reported gap.
fn private_namespaces() -> bool {
    let ok = linux_sandbox::probe().private_namespaces_for(exec::linux::launch());
    if !ok {
        eprintln!(
            "note: no private namespaces here; checking the seccomp fallback: {}",
            linux_sandbox::probe()
        );
    }
    ok
}

impl World {
    /// Writes `script` into the scope and runs it with python3 under the `command` spec.
    async fn python(&self, script: &str) -> Outcome {
        std::fs::write(self.scope.join("attack.py"), script).unwrap();
        self.sh("/usr/bin/python3 attack.py").await
    }
}

#[tokio::test]
async fn chmod_touch_chown_and_xattrs_on_an_outside_file_change_nothing() {
    if !sandbox_available()
        || common::shell_refused_here(
            "chmod_touch_chown_and_xattrs_on_an_outside_file_change_nothing",
        )
        .await
    {
        return;
    }
    let w = World::new();
    let t = w.outside.join("victim.txt").display().to_string();
    let d = w.outside.display().to_string();
    // `run` compares mode, owner, times and xattrs of every outside file before and after.
    let out = w
        .sh(&format!(
            "chmod 777 '{t}'; chmod 700 '{d}'; touch -d 2001-01-01 '{t}'; touch '{d}'; \
             chown $(id -u):$(id -g) '{t}'; \
             /usr/bin/python3 -c \"import os; os.setxattr('{t}', 'user.x', b'WRITTEN')\"; \
             /usr/bin/python3 -c \"import os; os.utime('{t}', (0, 0))\"; echo done"
        ))
        .await;
    assert_eq!(text(&out.stdout), "done\n", "{out:?}");
}

#[tokio::test]
async fn a_setuid_binary_cannot_be_made_outside_or_inside_the_scope() {
    if !sandbox_available()
        || common::shell_refused_here("a_setuid_binary_cannot_be_made_outside_or_inside_the_scope")
            .await
    {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let outside_id = w.outside.join("id");
    std::fs::copy("/usr/bin/id", &outside_id).unwrap();
    let o = outside_id.display();
    let out = w
        .sh(&format!(
            "chmod 4755 '{o}'; chmod u+s '{o}'; cp /bin/sh ./suid && chmod 4755 ./suid; \
             chmod g+s ./suid; \
             /usr/bin/python3 -c \"import os; os.close(os.open('made', os.O_CREAT|os.O_WRONLY, 0o4755))\"; \
             /usr/bin/python3 -c \"import os; os.mknod('node', 0o104755)\"; \
             ls -l suid made node 2>&1; true"
        ))
        .await;
    for name in ["suid", "made", "node"] {
        if let Ok(meta) = std::fs::metadata(w.scope.join(name)) {
            assert_eq!(
                meta.permissions().mode() & 0o6000,
                0,
                "{name} got a set-id bit: {out:?}"
            );
        }
    }
    assert!(
        w.scope.join("suid").exists(),
        "the copy itself works: {out:?}"
    );
}

#[tokio::test]
async fn the_immutable_flag_and_file_setattr_are_refused() {
    if !sandbox_available()
        || common::shell_refused_here("the_immutable_flag_and_file_setattr_are_refused").await
    {
        return;
    }
    let w = World::new();
    let out = w
        .python(
            "import ctypes, fcntl, struct, os\n\
             l = ctypes.CDLL(None, use_errno=True)\n\
             fd = os.open('data.txt', os.O_RDONLY)\n\
             for req in (0x40086602, 0x40046602):\n\
             \x20   try:\n\
             \x20       fcntl.ioctl(fd, req, struct.pack('l', 0x10))\n\
             \x20       print('setflags ok')\n\
             \x20   except OSError as e:\n\
             \x20       print('setflags', e.errno)\n\
             try:\n\
             \x20   fcntl.ioctl(fd, 0x401c5820, bytes(28))\n\
             \x20   print('fssetxattr ok')\n\
             except OSError as e:\n\
             \x20   print('fssetxattr', e.errno)\n\
             buf = ctypes.create_string_buffer(32)\n\
             r = l.syscall(469, -100, b'data.txt', buf, 24, 0)\n\
             print('file_setattr', r, ctypes.get_errno())\n",
        )
        .await;
    assert_eq!(
        text(&out.stdout),
        "setflags 1\nsetflags 1\nfssetxattr 1\nfile_setattr -1 1\n",
        "{out:?}"
    );
    // The file is not immutable: the host removes it.
    std::fs::remove_file(w.scope.join("data.txt")).unwrap();
}

#[tokio::test]
async fn chmod_touch_tar_and_cp_keep_working_inside_the_scope() {
    if !sandbox_available()
        || common::shell_refused_here("chmod_touch_tar_and_cp_keep_working_inside_the_scope").await
    {
        return;
    }
    let w = World::new();
    let out = w
        .sh(
            "chmod 600 data.txt && stat -c %a data.txt && touch -d 2001-01-01 data.txt && \
             date -r data.txt +%Y && mkdir d && echo x > d/f && chmod 750 d && chmod 640 d/f && \
             tar cf a.tar d && rm -r d && tar xpf a.tar && stat -c '%a %a' d d/f | head -1 && \
             stat -c %a d/f && cat d/f && cp -a d e && stat -c %a e/f && cp -p data.txt c.txt && \
             date -r c.txt +%Y && mkfifo p && ls p",
        )
        .await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(
        text(&out.stdout),
        "600\n2001\n750 750\n640\nx\n640\n2001\np\n",
        "{out:?}"
    );
}

#[tokio::test]
async fn no_inherited_descriptor_reaches_a_host_file_whose_metadata_could_change() {
    if !sandbox_available()
        || common::shell_refused_here(
            "no_inherited_descriptor_reaches_a_host_file_whose_metadata_could_change",
        )
        .await
    {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let w = World::new();
    let null_before = std::fs::metadata("/dev/null").unwrap();
    let out = w
        .sh(
            "stat -L -c %F /proc/self/fd/0; chmod 755 /proc/self/fd/0 2>/dev/null; \
             /usr/bin/python3 -c \"import os\nfor fd in (0, 1, 2):\n  try: os.fchmod(fd, 0o700)\n  except OSError: pass\"; \
             read line; echo read=$?",
        )
        .await;
    let null_after = std::fs::metadata("/dev/null").unwrap();
    if null_after.mode() != null_before.mode() {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(
            "/dev/null",
            std::fs::Permissions::from_mode(null_before.mode() & 0o7777),
        );
    }
    assert_eq!(
        null_after.mode(),
        null_before.mode(),
        "the host's /dev/null changed: {out:?}"
    );
    // Standard input is a pipe whose writer is gone: reads see EOF (RUN-8).
    assert_eq!(text(&out.stdout), "fifo\nread=1\n", "{out:?}");
}

// ---- the host's System V IPC and POSIX message queues ---------------------------------------

/// A shared-memory segment, a message queue with one message, a semaphore set and a POSIX
/// message queue of the host's, each 0600 and removed on drop.
struct HostIpc {
    key: i32,
    shm: i32,
    msq: i32,
    sem: i32,
    mq_name: std::ffi::CString,
}

impl HostIpc {
    fn new() -> HostIpc {
        let key = 0x5a00_0000 | (std::process::id() as i32 & 0xffff) << 4 | rand_nibble();
        // SAFETY: plain System V calls on our own new objects; buffers are locals.
        unsafe {
            let shm = libc::shmget(key, 4096, libc::IPC_CREAT | libc::IPC_EXCL | 0o600);
            assert!(shm >= 0, "shmget: {}", std::io::Error::last_os_error());
            let at = libc::shmat(shm, std::ptr::null(), 0);
            assert_ne!(at as isize, -1);
            std::ptr::copy_nonoverlapping(
                c"HOST-SECRET".as_ptr().cast::<u8>(),
                at.cast::<u8>(),
                12,
            );
            libc::shmdt(at);
            let msq = libc::msgget(key, libc::IPC_CREAT | libc::IPC_EXCL | 0o600);
            assert!(msq >= 0);
            #[repr(C)]
            struct Msg {
                kind: libc::c_long,
                text: [u8; 8],
            }
            let msg = Msg {
                kind: 1,
                text: *b"HOSTMSG\0",
            };
            assert_eq!(libc::msgsnd(msq, (&msg as *const Msg).cast(), 8, 0), 0);
            let sem = libc::semget(key, 1, libc::IPC_CREAT | libc::IPC_EXCL | 0o600);
            assert!(sem >= 0);
            let mq_name = std::ffi::CString::new(format!("/agent-exec-escape-{key:x}")).unwrap();
            let mq = libc::mq_open(
                mq_name.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                0o600,
                std::ptr::null_mut::<libc::mq_attr>(),
            );
            assert!(mq >= 0, "mq_open: {}", std::io::Error::last_os_error());
            libc::mq_close(mq);
            HostIpc {
                key,
                shm,
                msq,
                sem,
                mq_name,
            }
        }
    }

    fn message_is_still_queued(&self) -> bool {
        // SAFETY: a local msqid_ds.
        unsafe {
            let mut ds: libc::msqid_ds = std::mem::zeroed();
            libc::msgctl(self.msq, libc::IPC_STAT, &mut ds) == 0 && ds.msg_qnum == 1
        }
    }

    fn mq_exists(&self) -> bool {
        // SAFETY: a C string; the descriptor is closed at once.
        unsafe {
            let mq = libc::mq_open(self.mq_name.as_ptr(), libc::O_RDONLY);
            if mq >= 0 {
                libc::mq_close(mq);
            }
            mq >= 0
        }
    }
}

fn rand_nibble() -> i32 {
    (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        & 0xf) as i32
}

impl Drop for HostIpc {
    fn drop(&mut self) {
        // SAFETY: removing our own objects.
        unsafe {
            libc::shmctl(self.shm, libc::IPC_RMID, std::ptr::null_mut());
            libc::msgctl(self.msq, libc::IPC_RMID, std::ptr::null_mut());
            libc::semctl(self.sem, 0, libc::IPC_RMID);
            libc::mq_unlink(self.mq_name.as_ptr());
        }
    }
}

#[tokio::test]
async fn the_hosts_ipc_objects_are_out_of_reach_and_nothing_outlives_the_call() {
    if !sandbox_available()
        || common::shell_refused_here(
            "the_hosts_ipc_objects_are_out_of_reach_and_nothing_outlives_the_call",
        )
        .await
    {
        return;
    }
    let w = World::new();
    let host = HostIpc::new();
    let fresh_key = host.key ^ 0x0100_0000;
    let out = w
        .python(&format!(
            "import ctypes\n\
             l = ctypes.CDLL(None, use_errno=True)\n\
             l.shmat.restype = ctypes.c_void_p\n\
             print('shmget', l.shmget({key}, 0, 0))\n\
             p = l.shmat({shm}, None, 0)\n\
             print('shmat', -1 if p in (None, 2**64 - 1) else ctypes.string_at(p, 11))\n\
             buf = ctypes.create_string_buffer(16)\n\
             print('msgrcv', l.msgrcv({msq}, buf, 8, 0, 0o4000))\n\
             print('semget', l.semget({key}, 0, 0))\n\
             print('mq_unlink', l.mq_unlink(b'{mq}'))\n\
             made = l.shmget({fresh_key}, 4096, 0o1600)\n\
             print('made', made >= 0 or ctypes.get_errno())\n",
            key = host.key,
            shm = host.shm,
            msq = host.msq,
            mq = host.mq_name.to_str().unwrap(),
        ))
        .await;
    let stdout = text(&out.stdout);
    assert!(stdout.contains("shmget -1\n"), "{out:?}");
    assert!(stdout.contains("shmat -1\n"), "{out:?}");
    assert!(stdout.contains("msgrcv -1\n"), "{out:?}");
    assert!(stdout.contains("semget -1\n"), "{out:?}");
    assert!(stdout.contains("mq_unlink -1\n"), "{out:?}");
    assert!(!stdout.contains("HOST-SECRET"), "{out:?}");
    assert!(
        host.message_is_still_queued(),
        "the host's message was consumed"
    );
    assert!(host.mq_exists(), "the host's message queue was deleted");
    if private_namespaces() {
        // A private IPC namespace: the command may use IPC, and it dies with the call.
        assert!(stdout.contains("made True\n"), "{out:?}");
    }
    // SAFETY: a lookup of a key; nothing is created.
    let left = unsafe { libc::shmget(fresh_key, 0, 0) };
    assert_eq!(left, -1, "a segment made in the sandbox outlived the call");
}

// ---- capabilities, the supervisor, new system calls -----------------------------------------

#[tokio::test]
async fn the_command_holds_no_capability_at_all() {
    if !sandbox_available()
        || common::shell_refused_here("the_command_holds_no_capability_at_all").await
    {
        return;
    }
    let w = World::new();
    let out = w
        .python(
            "import ctypes\n\
             l = ctypes.CDLL(None, use_errno=True)\n\
             hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)\n\
             data = (ctypes.c_uint32 * 6)()\n\
             assert l.syscall(125, hdr, data) == 0\n\
             print('sets', list(data))\n\
             print('bounding', [c for c in range(64) if l.prctl(23, c, 0, 0, 0) == 1])\n\
             print('ambient', [c for c in range(64) if l.prctl(47, 1, c, 0, 0) == 1])\n",
        )
        .await;
    assert_eq!(
        text(&out.stdout),
        "sets [0, 0, 0, 0, 0, 0]\nbounding []\nambient []\n",
        "{out:?}"
    );
}

#[tokio::test]
async fn socket_ioctls_cannot_reconfigure_the_hosts_network() {
    if !sandbox_available()
        || common::shell_refused_here("socket_ioctls_cannot_reconfigure_the_hosts_network").await
    {
        return;
    }
    let w = World::new();
    let before = std::fs::read_to_string("/sys/class/net/lo/tx_queue_len").unwrap();
    let out = w
        .python(
            "import socket, fcntl, struct\n\
             a, b = socket.socketpair()\n\
             for name, req in (('txqlen', 0x8943), ('flags', 0x8914)):\n\
             \x20   try:\n\
             \x20       fcntl.ioctl(a, req, struct.pack('16si', b'lo', 1234))\n\
             \x20       print(name, 'ok')\n\
             \x20   except OSError as e:\n\
             \x20       print(name, e.errno)\n\
             try:\n\
             \x20   fcntl.ioctl(a, 0x894C, 0)\n\
             \x20   print('skns ok')\n\
             except OSError as e:\n\
             \x20   print('skns', e.errno)\n",
        )
        .await;
    assert_eq!(
        std::fs::read_to_string("/sys/class/net/lo/tx_queue_len").unwrap(),
        before
    );
    let stdout = text(&out.stdout);
    assert!(!stdout.contains(" ok"), "{out:?}");
    assert_eq!(stdout.lines().count(), 3, "{out:?}");
}

#[tokio::test]
async fn the_supervisor_cannot_be_limited_reniced_or_pinned_and_the_command_itself_can() {
    if !sandbox_available()
        || common::shell_refused_here(
            "the_supervisor_cannot_be_limited_reniced_or_pinned_and_the_command_itself_can",
        )
        .await
    {
        return;
    }
    let w = World::new();
    let out = w
        .python(
            "import os, resource, ctypes\n\
             l = ctypes.CDLL(None, use_errno=True)\n\
             def t(name, f):\n\
             \x20   try:\n\
             \x20       f()\n\
             \x20       print(name, 'ok')\n\
             \x20   except OSError as e:\n\
             \x20       print(name, e.errno)\n\
             t('prlimit', lambda: resource.prlimit(1, resource.RLIMIT_NOFILE, (5, 5)))\n\
             t('renice', lambda: os.setpriority(os.PRIO_PROCESS, 1, 19))\n\
             t('renice-user', lambda: os.setpriority(os.PRIO_USER, 0, 19))\n\
             t('affinity', lambda: os.sched_setaffinity(1, {0}))\n\
             t('sched', lambda: os.sched_setscheduler(1, os.SCHED_IDLE, os.sched_param(0)))\n\
             print('ioprio', l.syscall(251, 1, 1, (3 << 13) | 7), ctypes.get_errno())\n\
             print('ioprio-user', l.syscall(251, 3, 0, (3 << 13) | 7), ctypes.get_errno())\n\
             t('own-nice', lambda: os.setpriority(os.PRIO_PROCESS, 0, 5))\n\
             t('own-limit', lambda: resource.prlimit(0, resource.RLIMIT_NOFILE, (64, 64)))\n\
             t('own-affinity', lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))\n",
        )
        .await;
    assert_eq!(
        text(&out.stdout),
        "prlimit 1\nrenice 1\nrenice-user 1\naffinity 1\nsched 1\nioprio -1 1\n\
         ioprio-user -1 1\nown-nice ok\nown-limit ok\nown-affinity ok\n",
        "{out:?}"
    );
}

#[tokio::test]
async fn system_calls_newer_than_the_filter_are_enosys_and_new_mount_calls_eperm() {
    if !sandbox_available()
        || common::shell_refused_here(
            "system_calls_newer_than_the_filter_are_enosys_and_new_mount_calls_eperm",
        )
        .await
    {
        return;
    }
    let w = World::new();
    let out = w
        .python(
            "import ctypes\n\
             l = ctypes.CDLL(None, use_errno=True)\n\
             for nr in (467, 469, 470, 471, 500, 1000):\n\
             \x20   r = l.syscall(nr, 0, 0, 0, 0, 0)\n\
             \x20   print(nr, r, ctypes.get_errno())\n",
        )
        .await;
    assert_eq!(
        text(&out.stdout),
        "467 -1 1\n469 -1 1\n470 -1 38\n471 -1 38\n500 -1 38\n1000 -1 38\n",
        "{out:?}"
    );
}

// ---- paths re-resolved after validation ------------------------------------------------------

/// Swaps `a` and `b` with random 0-1 ms pauses: back to back, nearly every call would be
/// refused at its first lease check and the later windows (the sandbox's own lookups) never
/// tried.
fn swapper(a: &Path, b: &Path) -> testkit::Swapper {
    testkit::Swapper::new(a, b)
        .pause_up_to(Duration::from_millis(1))
        .start()
}

/// A race test makes at least this many attempts and goes on until this many calls really
/// ran under the swapper (an attempt that meets the link is refused at once and tries no later
/// window), within [`RACE_TIME`].
const RACE_ATTEMPTS: usize = 1000;
const RACE_RUNS: usize = 300;
const RACE_TIME: Duration = Duration::from_secs(60);

/// Whether a race test should try again.
fn race_goes_on(attempts: usize, ran: usize, started: std::time::Instant) -> bool {
    (attempts < RACE_ATTEMPTS || ran < RACE_RUNS) && started.elapsed() < RACE_TIME
}

#[tokio::test]
async fn an_extra_path_swapped_for_a_symlink_never_grants_its_target() {
    if !sandbox_available()
        || common::shell_refused_here("an_extra_path_swapped_for_a_symlink_never_grants_its_target")
            .await
    {
        return;
    }
    let w = World::new();
    let extra = w.base.path().canonicalize().unwrap().join("ref");
    std::fs::create_dir(&extra).unwrap();
    std::fs::write(extra.join("secret.txt"), "approved\n").unwrap();
    std::fs::write(w.outside.join("secret.txt"), "OUTSIDE SECRET\n").unwrap();
    let link = w.base.path().canonicalize().unwrap().join("ref-link");
    std::os::unix::fs::symlink(&w.outside, &link).unwrap();
    let swapper = swapper(&extra, &link);
    let (mut leaked, mut ran) = (0, 0);
    let (started, mut attempts) = (std::time::Instant::now(), 0);
    while race_goes_on(attempts, ran, started) {
        attempts += 1;
        // Validated (opened without following links) while the swapper runs: when `ref` is
        // the link at that moment the grant is refused, otherwise the real directory is pinned.
        let Ok(grant) = exec::Grant::open(&extra, exec::Access::Read) else {
            continue;
        };
        let script = format!("cat '{}/secret.txt'", extra.display());
        let mut job = w.sh_job(&script);
        job.sandbox.grants.push(grant);
        let (ctx, _cancel) = CallContext::standalone();
        if let Ok(out) = exec::run(job, &ctx).await {
            ran += 1;
            if text(&out.stdout).contains("OUTSIDE") {
                leaked += 1;
            }
        }
    }
    let swaps = swapper.stop();
    assert!(swaps > 0, "the swapper never swapped");
    eprintln!("{ran} of {attempts} attempts ran, {swaps} swaps");
    assert!(ran > 0, "no call ran: the race was never tried");
    let _ = std::fs::remove_file(&link);
    assert_eq!(leaked, 0, "{leaked} of {ran} calls read the outside secret");
}

#[tokio::test]
async fn a_scope_swapped_for_a_symlink_never_exposes_its_target() {
    if !sandbox_available()
        || common::shell_refused_here("a_scope_swapped_for_a_symlink_never_exposes_its_target")
            .await
    {
        return;
    }
    let w = World::new();
    std::fs::write(w.scope.join("secret.txt"), "scope\n").unwrap();
    std::fs::write(w.outside.join("secret.txt"), "OUTSIDE SECRET\n").unwrap();
    let link = w.base.path().canonicalize().unwrap().join("scope-link");
    std::os::unix::fs::symlink(&w.outside, &link).unwrap();
    let lease = Arc::new(RootLease::acquire(&w.scope).unwrap());
    let temp = RootLease::acquire(&w.temp).unwrap();
    let swapper = swapper(&w.scope, &link);
    let (mut leaked, mut ran) = (0, 0);
    let (started, mut attempts) = (std::time::Instant::now(), 0);
    while race_goes_on(attempts, ran, started) {
        attempts += 1;
        let job = Job {
            program: "/bin/sh".into(),
            args: vec![
                "-c".into(),
                format!("cat '{}/secret.txt'; cat secret.txt", w.scope.display()).into(),
            ],
            workdir: WorkDir {
                lease: Arc::clone(&lease),
                rel: RelPath::root(),
            },
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            sandbox: SandboxSpec::for_command(&lease, &temp, vec![]).unwrap(),
            limits: w.limits(),
            merge_stderr: false,
        };
        let (ctx, _cancel) = CallContext::standalone();
        match exec::run(job, &ctx).await {
            Ok(out) => {
                ran += 1;
                if text(&out.stdout).contains("OUTSIDE") {
                    leaked += 1;
                }
            }
            // A root that moved is "replaced" (the lease, or the sandbox's own identity check,
            // ESTALE), never "this machine cannot sandbox".
            Err(e) => assert_ne!(
                e.code(),
                toolscope::ErrorCode::ExecSandboxUnavailable,
                "a moved root was reported as: {e}"
            ),
        }
    }
    let swaps = swapper.stop();
    assert!(swaps > 0, "the swapper never swapped");
    eprintln!(
        "{ran} of {attempts} attempts ran (the others were refused: the root moved), {swaps} swaps"
    );
    assert!(ran > 0, "no call ran: the race was never tried");
    assert_eq!(leaked, 0, "{leaked} of {ran} calls read the outside secret");
    assert!(processes_in(w.base.path()).is_empty());
}

// ---- the host's state directory inside the scope -------------------------------------------

#[tokio::test]
async fn a_hidden_state_directory_in_the_scope_cannot_be_read_renamed_or_forged() {
    if !sandbox_available()
        || common::shell_refused_here(
            "a_hidden_state_directory_in_the_scope_cannot_be_read_renamed_or_forged",
        )
        .await
    {
        return;
    }
    let w = World::new();
    let state = w.scope.join(".local/state/agent-exec");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("state.json"), "GRANTS\n").unwrap();
    let script = "cat .local/state/agent-exec/state.json; ls -A .local/state/agent-exec; \
                  echo forged > .local/state/agent-exec/state.json; \
                  echo x > .local/state/agent-exec/new; \
                  mv .local/state/agent-exec .local/state/old; mv .local/state .local/s2; \
                  mv .local .l2; rm -rf .local; \
                  mkdir -p fake/state/agent-exec && echo forged > fake/state/agent-exec/state.json && \
                  mv -T fake .local; ls -A .local; echo end";
    let mut job = w.sh_job(script);
    job.sandbox = job.sandbox.hide(&state);
    let (ctx, _cancel) = CallContext::standalone();
    let result = exec::run(job, &ctx).await;
    assert_eq!(
        std::fs::read_to_string(state.join("state.json")).unwrap(),
        "GRANTS\n"
    );
    assert_eq!(std::fs::read_dir(&state).unwrap().count(), 1);
    match result {
        Ok(out) => {
            assert!(
                private_namespaces(),
                "ran without a private mount namespace"
            );
            let stdout = text(&out.stdout);
            assert!(!stdout.contains("GRANTS"), "{out:?}");
            assert!(stdout.ends_with("end\n"), "{out:?}");
        }
        Err(e) => {
            // Without a private mount namespace the call is refused, saying why.
            assert!(!private_namespaces(), "{e}");
            assert_eq!(e.code(), toolscope::ErrorCode::ExecPathInvalid, "{e}");
            assert!(e.to_string().contains("state directory"), "{e}");
        }
    }
    assert!(processes_in(w.base.path()).is_empty());
}

// ---- the host's cap on the Landlock ABI --------------------------------------------------------

const ABI_MAX_VAR: &str = linux_sandbox::LANDLOCK_ABI_MAX_VAR;
const MALFORMED_CAP: &str = "v3";

#[tokio::test]
async fn a_malformed_landlock_abi_cap_refuses_every_call_naming_the_variable() {
    let name = "a_malformed_landlock_abi_cap_refuses_every_call_naming_the_variable";
    match std::env::var(ABI_MAX_VAR) {
        Ok(value) if value == MALFORMED_CAP => {}
        Ok(value) => {
            eprintln!("{ABI_MAX_VAR}={value} is this run's level; checked where it is unset");
            return;
        }
        Err(_) => {
            if !sandbox_available() {
                return;
            }
            // The probe reads the environment once per process: a copy of this binary with a
            // malformed value checks the refusal.
            let out = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", name, "--nocapture", "--test-threads=1"])
                .env(ABI_MAX_VAR, MALFORMED_CAP)
                .output()
                .unwrap();
            let text = format!("{}{}", text(&out.stdout), text(&out.stderr));
            assert!(out.status.success() && text.contains("1 passed"), "{text}");
            return;
        }
    }
    let w = World::new();
    let (ctx, _cancel) = CallContext::standalone();
    let err = exec::run(w.sh_job("echo ran"), &ctx).await.unwrap_err();
    assert_eq!(
        err.code(),
        toolscope::ErrorCode::ExecSandboxUnavailable,
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&format!("{ABI_MAX_VAR}=\"{MALFORMED_CAP}\""))
            && message.contains("a number from 1 to 255"),
        "{message}"
    );
    assert!(processes_in(w.base.path()).is_empty());
    let report = linux_sandbox::probe().to_string();
    assert!(
        report.contains("sandbox: UNAVAILABLE") && report.contains(ABI_MAX_VAR),
        "{report}"
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
