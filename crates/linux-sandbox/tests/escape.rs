//! Escape attempts and liveness checks against real processes started through
//! `std::process::Command` with [`PreparedSandbox::install`]. Each attempt asserts that it
//! failed, that nothing changed outside, and that no sandboxed process survived. When run as
//! root, `every_test_also_holds_unprivileged` re-runs the whole binary as `nobody`.
//! RUN-6, RUN-7, CMD-2, CMD-9, CMD-10; issue 4 linux-sandbox.

// Helpers outside #[test] fns may unwrap too: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::process::Command;

use linux_sandbox::{Access, EnforcementStatus, Network, Policy, probe};
use support::*;

// ---------------------------------------------------------------------------------------------
// Files

#[test]
fn system_file_replaced_by_rename_is_granted_on_its_new_inode() {
    if !sandbox_available() {
        return;
    }
    // Stands in for /etc/ld.so.cache, which ldconfig replaces by renaming a new file over it.
    let s = Scratch::new();
    let file = s.outside.join("ld.so.cache");
    std::fs::write(&file, "first\n").unwrap();
    let policy = s.command_policy().allow_system(&file, Access::READ);
    let file_arg = file.to_str().unwrap();
    let out = s.run(&policy, "/bin/cat", &[file_arg]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "first\n");

    let next = s.outside.join("ld.so.cache~");
    std::fs::write(&next, "second\n").unwrap();
    std::fs::rename(&next, &file).unwrap();
    // A stale cached descriptor would grant the old, now unlinked inode: cat would get EACCES.
    let out = s.run(&policy, "/bin/cat", &[file_arg]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "second\n");
}

#[test]
fn system_symlink_re_pointed_grants_the_new_target_and_not_the_old() {
    if !sandbox_available() {
        return;
    }
    // Stands in for /etc/localtime, a symbolic link into /usr/share/zoneinfo.
    let s = Scratch::new();
    let (old, new) = (s.outside.join("Berlin"), s.outside.join("Tokyo"));
    std::fs::write(&old, "CET\n").unwrap();
    std::fs::write(&new, "JST\n").unwrap();
    let link = s.outside.join("localtime");
    std::os::unix::fs::symlink(&old, &link).unwrap();
    let policy = s.command_policy().allow_system(&link, Access::READ);
    let (link_arg, old_arg) = (link.to_str().unwrap(), old.to_str().unwrap());
    assert_eq!(
        String::from_utf8_lossy(&s.run(&policy, "/bin/cat", &[link_arg]).stdout),
        "CET\n"
    );

    let temp = s.outside.join("localtime~");
    std::os::unix::fs::symlink(&new, &temp).unwrap();
    std::fs::rename(&temp, &link).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&s.run(&policy, "/bin/cat", &[link_arg]).stdout),
        "JST\n"
    );
    let out = s.run(&policy, "/bin/cat", &[old_arg]);
    assert!(!out.status.success(), "the old target is still granted");
}

#[test]
fn system_path_that_disappears_is_skipped_and_comes_back_when_recreated() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let file = s.outside.join("timezone");
    std::fs::write(&file, "Etc/UTC\n").unwrap();
    let policy = s.command_policy().allow_system(&file, Access::READ);
    let file_arg = file.to_str().unwrap();
    assert!(s.run(&policy, "/bin/cat", &[file_arg]).status.success());
    std::fs::remove_file(&file).unwrap();
    policy.prepare().unwrap();
    std::fs::write(&file, "Europe/Paris\n").unwrap();
    let out = s.run(&policy, "/bin/cat", &[file_arg]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Europe/Paris\n");
}

#[test]
fn reading_etc_shadow_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let out = s.sh("cat /etc/shadow");
    assert_denied(&out);
    assert!(!stdout(&out).contains("root:"), "{}", stdout(&out));
}

#[test]
fn reading_a_secret_outside_the_allowed_paths_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let secret = s.outside.join("secret");
    let out = s.run(&s.command_policy(), "/bin/cat", &[secret.to_str().unwrap()]);
    assert_denied(&out);
    assert!(!stdout(&out).contains("TOP-SECRET"));
    let out = s.python(&format!("print(open({:?}).read())", secret));
    assert_denied(&out);
    assert!(!stdout(&out).contains("TOP-SECRET"));
}

#[test]
fn writing_outside_through_an_absolute_path_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let before = snapshot(&s.outside);
    let target = s.outside.join("new");
    let out = s.sh(&format!("echo ESCAPED > '{}'", target.display()));
    assert_denied(&out);
    let out = s.sh(&format!(
        "echo ESCAPED >> '{}'",
        s.outside.join("secret").display()
    ));
    assert_denied(&out);
    assert_eq!(snapshot(&s.outside), before);
}

#[test]
fn writing_outside_through_dot_dot_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let before = snapshot(&s.outside);
    let out = s.sh("echo ESCAPED > ../outside/new && echo ESCAPED");
    assert_denied(&out);
    let out = s.sh("mkdir ../outside/dir && echo ESCAPED");
    assert_denied(&out);
    assert_eq!(snapshot(&s.outside), before);
}

#[test]
fn writing_outside_through_a_symlink_made_inside_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let before = snapshot(&s.outside);
    let out = s.sh(&format!(
        "ln -s '{}' link && echo ESCAPED >> link/secret",
        s.outside.display()
    ));
    assert_denied(&out);
    // The symlink itself was allowed (inside the work dir); following it was not.
    assert!(s.work.join("link").is_symlink());
    let out = s.sh("cat link/secret");
    assert_denied(&out);
    assert!(!stdout(&out).contains("TOP-SECRET"));
    assert_eq!(snapshot(&s.outside), before);
}

#[test]
fn writing_outside_through_proc_self_root_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let before = snapshot(&s.outside);
    let out = s.sh(&format!(
        "echo ESCAPED > /proc/self/root{}/new",
        s.outside.display()
    ));
    assert_denied(&out);
    // Even with /proc readable, the magic link resolves to a path Landlock checks.
    let policy = s.command_policy().allow("/proc", Access::READ);
    let out = s.run(
        &policy,
        SH,
        &[
            "-c",
            &format!("echo ESCAPED > /proc/self/root{}/new", s.outside.display()),
        ],
    );
    assert_denied(&out);
    assert_eq!(snapshot(&s.outside), before);
}

#[test]
fn writing_outside_through_proc_self_cwd_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let before = snapshot(&s.outside);
    // The command starts with its cwd outside the granted paths: the cwd is no boundary
    // (RUN-11), Landlock is.
    let policy = s.command_policy().allow("/proc", Access::READ);
    let out = s.run_in(
        &policy,
        &s.outside,
        SH,
        &["-c", "echo ESCAPED > /proc/self/cwd/new"],
    );
    assert_denied(&out);
    let out = s.run_in(&policy, &s.outside, SH, &["-c", "echo ESCAPED > new2"]);
    assert_denied(&out);
    assert_eq!(snapshot(&s.outside), before);
}

#[test]
fn reopening_a_read_only_file_for_writing_through_dev_fd_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let before = snapshot(&s.outside);
    let policy = s
        .command_policy()
        .allow(&s.outside, Access::READ)
        .allow("/proc", Access::READ)
        .allow("/dev/fd", Access::READ);
    let script = format!(
        "exec 3< '{}' && cat <&3 >/dev/null && echo ESCAPED >> /dev/fd/3",
        s.outside.join("secret").display()
    );
    let out = s.run(&policy, SH, &["-c", &script]);
    assert_denied(&out);
    let script = format!(
        "exec 3< '{}' && echo ESCAPED >> /proc/self/fd/3",
        s.outside.join("secret").display()
    );
    let out = s.run(&policy, SH, &["-c", &script]);
    assert_denied(&out);
    assert_eq!(snapshot(&s.outside), before);
}

#[test]
fn hard_links_are_denied_even_inside_one_allowed_directory() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    std::fs::write(s.work.join("a"), "data").unwrap();
    let before_outside = snapshot(&s.outside);
    for script in [
        "ln a b && echo ESCAPED",
        "cp -l a c && echo ESCAPED",
        &format!(
            "ln '{}' d && echo ESCAPED",
            s.outside.join("secret").display()
        ),
    ] {
        assert_denied(&s.sh(script));
    }
    let out = s.python("import os\nos.link('a', 'e')\nprint('ESCAPED')");
    assert_denied(&out);
    assert!(stderr(&out).contains("PermissionError"), "{}", stderr(&out));
    for name in ["b", "c", "d", "e"] {
        assert!(!s.work.join(name).exists(), "{name} was created");
    }
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(s.work.join("a")).unwrap().nlink(), 1);
    assert_eq!(snapshot(&s.outside), before_outside);
}

#[test]
fn renaming_an_outside_file_in_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let before = snapshot(&s.outside);
    let secret = s.outside.join("secret");
    let out = s.sh(&format!("mv '{}' stolen && echo ESCAPED", secret.display()));
    assert_denied(&out);
    let out = s.python(&format!(
        "import os\nos.rename({:?}, 'stolen2')\nprint('ESCAPED')",
        secret
    ));
    assert_denied(&out);
    assert!(!s.work.join("stolen").exists());
    assert!(!s.work.join("stolen2").exists());
    assert_eq!(snapshot(&s.outside), before);
}

#[test]
fn truncating_a_read_only_file_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let before = snapshot(&s.outside);
    let policy = s.command_policy().allow(&s.outside, Access::READ);
    let out = s.run(
        &policy,
        PYTHON,
        &[
            "-c",
            &format!(
                "import os\nos.truncate({:?}, 0)\nprint('ESCAPED')",
                s.outside.join("secret")
            ),
        ],
    );
    assert_denied(&out);
    assert_eq!(snapshot(&s.outside), before);
}

// ---------------------------------------------------------------------------------------------
// Network, signals, other processes

#[test]
fn tcp_connect_to_a_loopback_listener_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let out = s.python(&format!(
        "import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)\nprint('ESCAPED')"
    ));
    assert_denied(&out);
    assert_eq!(
        listener.accept().map(|_| ()).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
}

#[test]
fn udp_send_to_a_loopback_listener_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_nonblocking(true).unwrap();
    let port = socket.local_addr().unwrap().port();
    let out = s.python(&format!(
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.sendto(b'ESCAPED', ('127.0.0.1', {port}))\nprint('sent')"
    ));
    // A shell's policy gets a private network namespace where the machine allows one (NET-1):
    // the datagram then goes to the command's own loopback, where nothing listens; otherwise
    // the socket is refused. Either way nothing arrives here.
    assert!(
        !out.status.success() || stdout(&out) == "sent\n",
        "{}",
        stderr(&out)
    );
    std::thread::sleep(std::time::Duration::from_millis(100));
    let mut buf = [0u8; 64];
    assert_eq!(
        socket.recv(&mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
}

#[test]
fn network_all_policy_reaches_the_loopback_listener() {
    // The positive control for the two tests above: the same attempt succeeds with network.
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let policy = s.command_policy().network(Network::All);
    let out = s.run(
        &policy,
        PYTHON,
        &[
            "-c",
            &format!(
                "import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)\nprint('connected')"
            ),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "connected\n");
}

fn abstract_listener(name: &str) -> UnixListener {
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    listener
}

fn connect_abstract_script(name: &str) -> String {
    format!(
        "import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
         s.connect('\\0{name}')\nprint('ESCAPED')"
    )
}

#[test]
fn connecting_to_an_outside_abstract_unix_socket_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let name = format!("linux-sandbox-test-{}", std::process::id());
    let listener = abstract_listener(&name);
    // Without network: refused (seccomp refuses AF_UNIX sockets below Landlock ABI 9).
    let out = s.python(&connect_abstract_script(&name));
    assert_denied(&out);
    // With network the Landlock abstract-socket scope (ABI >= 6) is what refuses it.
    if probe().landlock_abi().unwrap_or(0) >= 6 {
        let policy = s.command_policy().network(Network::All);
        let out = s.run(&policy, PYTHON, &["-c", &connect_abstract_script(&name)]);
        assert_denied(&out);
    } else {
        eprintln!("skipped the scope half: Landlock ABI < 6 has no abstract-socket scope");
    }
    assert_eq!(
        listener.accept().map(|_| ()).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
}

/// A process the test starts outside the sandbox, killed and reaped on drop.
struct Victim(std::process::Child);

impl Victim {
    fn start() -> Victim {
        Victim(Command::new("/bin/sleep").arg("60").spawn().unwrap())
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
    fn is_alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn signalling_a_process_outside_the_sandbox_is_denied() {
    if !sandbox_available() {
        return;
    }
    if probe().landlock_abi().unwrap_or(0) < 6 {
        eprintln!("skipped: Landlock ABI < 6 has no signal scope (reported as a gap)");
        return;
    }
    let s = Scratch::new();
    let mut victim = Victim::start();
    let out = s.sh(&format!("kill -KILL {} && echo ESCAPED", victim.pid()));
    assert_denied(&out);
    let out = s.python(&format!(
        "import os, signal\nos.kill({}, signal.SIGTERM)\nprint('ESCAPED')",
        victim.pid()
    ));
    assert_denied(&out);
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(victim.is_alive());
}

#[test]
fn ptrace_of_a_sibling_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let mut victim = Victim::start();
    // PTRACE_ATTACH = 16. ctypes calls libc's ptrace directly.
    let out = s.python(&format!(
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n\
         r = libc.ptrace(16, {}, 0, 0)\n\
         print('errno', ctypes.get_errno())\n\
         if r == 0: print('ESCAPED')\nraise SystemExit(0 if r == 0 else 1)",
        victim.pid()
    ));
    assert_denied(&out);
    assert!(stdout(&out).contains(&format!("errno {}", libc::EPERM)));
    assert!(victim.is_alive());
}

#[test]
fn io_uring_setup_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let out = s.python(&format!(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n\
         params = ctypes.create_string_buffer(120)\n\
         fd = libc.syscall({}, 4, params)\n\
         print('errno', ctypes.get_errno())\n\
         if fd >= 0: print('ESCAPED')\nraise SystemExit(0 if fd >= 0 else 1)",
        libc::SYS_io_uring_setup
    ));
    assert_denied(&out);
    assert!(stdout(&out).contains(&format!("errno {}", libc::EPERM)));
}

#[test]
fn mount_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    std::fs::create_dir(s.work.join("m")).unwrap();
    let out = s.sh("mount -t tmpfs tmpfs m && echo ESCAPED");
    if out.status.success() {
        // Do not leave a mount behind even when the test fails.
        let _ = Command::new("/bin/umount").arg(s.work.join("m")).status();
    }
    assert_denied(&out);
}

#[test]
fn unshare_into_a_user_namespace_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let out = s.sh("unshare -r /bin/true && echo ESCAPED");
    assert_denied(&out);
    let out = s.sh("unshare -U /bin/true && echo ESCAPED");
    assert_denied(&out);
}

#[test]
fn terminal_injection_ioctl_is_denied() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    // TIOCSTI on stdin (/dev/null here): without the filter the kernel answers ENOTTY; the
    // filter answers EPERM before the kernel looks at the fd.
    let out = s.python(&format!(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n\
         c = ctypes.c_char(b'x')\nr = libc.ioctl(0, {}, ctypes.byref(c))\n\
         print('errno', ctypes.get_errno())\nraise SystemExit(0 if r == 0 else 1)",
        libc::TIOCSTI
    ));
    assert_denied(&out);
    assert!(stdout(&out).contains(&format!("errno {}", libc::EPERM)));
}

// ---------------------------------------------------------------------------------------------
// No spawn (the `run` tool)

/// A single-program policy for `program` with the system libraries readable.
fn single_program_policy(s: &Scratch, program: &str) -> Policy {
    let mut policy = Policy::single_program(program);
    for dir in ["/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib"] {
        policy = policy.allow_if_exists(dir, Access::READ);
    }
    policy
        .allow_if_exists("/etc/ld.so.cache", Access::READ)
        .allow("/dev/null", Access::READ | Access::WRITE)
        .allow(&s.work, Access::READ | Access::WRITE)
}

#[test]
fn no_spawn_shell_cannot_fork_or_exec_ls() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    std::fs::write(s.work.join("marker-file"), "").unwrap();
    let policy = single_program_policy(&s, SH);
    let out = s.run(&policy, SH, &["-c", "ls; echo ESCAPED-after-ls"]);
    assert!(!stdout(&out).contains("marker-file"), "ls ran");
    // The shell itself runs; it is the fork that fails.
    assert!(
        stderr(&out).to_lowercase().contains("fork"),
        "{}",
        stderr(&out)
    );
    // Exec in place (no fork) is stopped by Landlock: only the one program is executable.
    let out = s.run(&policy, SH, &["-c", "exec /bin/ls"]);
    assert_denied(&out);
    assert!(!stdout(&out).contains("marker-file"));
}

#[test]
fn no_spawn_awk_system_and_pipes_run_nothing() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let policy = single_program_policy(&s, "/usr/bin/awk");
    let out = s.run(
        &policy,
        "/usr/bin/awk",
        &["BEGIN { r = system(\"echo x > made-by-system\"); print \"r=\" r }"],
    );
    assert!(!s.work.join("made-by-system").exists());
    assert!(!stdout(&out).contains("r=0"), "{}", stdout(&out));
    let out = s.run(
        &policy,
        "/usr/bin/awk",
        &["BEGIN { \"echo ESCAPED\" | getline line; print line }"],
    );
    assert!(!stdout(&out).contains("ESCAPED"));
}

#[test]
fn no_spawn_still_runs_a_multi_threaded_program() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    // Python reads its standard library under /usr/lib; grant /usr/lib read-only.
    let python = std::fs::canonicalize(PYTHON).unwrap();
    let policy = single_program_policy(&s, python.to_str().unwrap());
    let out = s.run(
        &policy,
        python.to_str().unwrap(),
        &[
            "-c",
            "import threading\nout = []\n\
             ts = [threading.Thread(target=out.append, args=(i,)) for i in range(8)]\n\
             [t.start() for t in ts]\n[t.join() for t in ts]\nprint(sorted(out))\n\
             import os\ntry:\n    os.fork()\n    print('forked')\nexcept OSError as e:\n    print('fork:', e.errno)",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!("[0, 1, 2, 3, 4, 5, 6, 7]\nfork: {}\n", libc::EPERM)
    );
}

// ---------------------------------------------------------------------------------------------
// Liveness

#[test]
fn liveness_ls_cat_awk_python_and_git_work_in_the_allowed_dir() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    std::fs::write(s.work.join("input.txt"), "b 2\na 1\n").unwrap();
    let policy = s.command_policy();

    let out = s.run(&policy, "/bin/ls", &["-a"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), ".\n..\ninput.txt\n");

    let out = s.run(&policy, "/bin/cat", &["input.txt"]);
    assert_eq!(stdout(&out), "b 2\na 1\n");

    let out = s.run(
        &policy,
        "/usr/bin/awk",
        &["{ s += $2 } END { print s }", "input.txt"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "3\n");

    let out = s.python("print(open('input.txt').read().split()[1])");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "2\n");

    let out = s.sh("echo made > new.txt && cat new.txt && rm new.txt && mkdir d && rmdir d");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "made\n");

    let out = s.sh("git init -q repo && cd repo && echo x > f && git status --porcelain");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "?? f\n");
}

#[test]
fn liveness_single_program_awk_through_its_alternatives_symlink() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    std::fs::write(s.work.join("in"), "1\n2\n3\n").unwrap();
    std::fs::write(
        s.work.join("prog.awk"),
        "{ s += $1 } END { print s > \"out\" }\n",
    )
    .unwrap();
    let policy = single_program_policy(&s, "/usr/bin/awk");
    let out = s.run(&policy, "/usr/bin/awk", &["-f", "prog.awk", "in"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // An awk script may write regular files inside the mirror (RUN-9).
    assert_eq!(std::fs::read_to_string(s.work.join("out")).unwrap(), "6\n");
}

#[test]
fn enforcement_is_full_on_a_kernel_with_landlock_abi_6() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let enforcement = s.command_policy().prepare().unwrap().enforcement();
    eprintln!("{enforcement}");
    // Full needs the scopes (ABI 6) and, for metadata, a private mount namespace (issue 14),
    // which a plain fork gets only as root.
    if probe().landlock_abi().unwrap_or(0) >= 6 && namespaces_for_a_plain_fork() {
        assert_eq!(enforcement.status(), EnforcementStatus::FullyEnforced);
    } else {
        assert_eq!(enforcement.status(), EnforcementStatus::PartiallyEnforced);
    }
}

#[test]
fn every_landlock_abi_denies_outside_writes_and_keeps_liveness() {
    // Each older kernel, emulated with `limit_landlock_abi`.
    if !sandbox_available() {
        return;
    }
    let kernel = probe().landlock_abi().unwrap_or(0);
    for abi in 1..=kernel {
        let s = Scratch::new();
        let before = snapshot(&s.outside);
        let policy = s.command_policy().limit_landlock_abi(abi);
        let enforcement = policy.prepare().unwrap().enforcement();
        assert_eq!(enforcement.landlock_abi(), abi);
        let target = s.outside.join("new");
        let out = s.run(
            &policy,
            SH,
            &["-c", &format!("echo ESCAPED > '{}'", target.display())],
        );
        assert_denied(&out);
        let out = s.run(&policy, SH, &["-c", "echo a > a && ln a b && echo ESCAPED"]);
        assert_denied(&out);
        let out = s.run(
            &policy,
            SH,
            &["-c", "mkdir sub && echo ok > sub/f && mv sub/f g && cat g"],
        );
        assert!(out.status.success(), "ABI {abi}: {}", stderr(&out));
        assert_eq!(stdout(&out), "ok\n", "ABI {abi}");
        assert_eq!(snapshot(&s.outside), before, "ABI {abi}");
    }
}

// ---------------------------------------------------------------------------------------------
// Root and unprivileged

#[test]
fn every_test_also_holds_unprivileged() {
    if std::env::var_os(UNPRIVILEGED_ENV).is_some() || !is_root() {
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

// ---------------------------------------------------------------------------------------------
// Issue 14: private namespaces, and the fallback where there are none

/// Whether a process started by `std::process::Command` (no user namespace of its own) gets
/// private namespaces here: only as root.
fn namespaces_for_a_plain_fork() -> bool {
    probe().private_namespaces_for(linux_sandbox::Launch::default())
}

/// [`namespaces_for_a_plain_fork`], saying why a test that needs them skips. A kernel without
/// them fails the test where `AGENT_EXEC_REQUIRE` names mountns; not being root only skips it
/// (the root run covers it).
fn namespaces_for_a_plain_fork_or_skip() -> bool {
    if !testkit::require(&[testkit::Capability::MountNamespaces]) {
        return false;
    }
    let ok = namespaces_for_a_plain_fork();
    if !ok {
        eprintln!(
            "skipped: a plain fork gets no private namespaces here (not root): {}",
            probe()
        );
    }
    ok
}

#[test]
fn without_private_namespaces_the_report_names_the_metadata_gap() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let enforcement = s
        .command_policy()
        .private_namespaces(false)
        .prepare()
        .unwrap()
        .enforcement();
    assert!(!enforcement.private_namespaces());
    assert!(
        enforcement
            .gaps()
            .contains(linux_sandbox::Gaps::METADATA_OUTSIDE)
    );
    assert_eq!(enforcement.status(), EnforcementStatus::PartiallyEnforced);
    assert!(
        enforcement.to_string().contains("METADATA_OUTSIDE"),
        "{enforcement}"
    );
    let with = s.command_policy().prepare().unwrap().enforcement();
    assert_eq!(with.private_namespaces(), namespaces_for_a_plain_fork());
}

#[test]
fn without_private_namespaces_a_hidden_path_inside_a_grant_is_refused() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let state = s.work.join("state");
    std::fs::create_dir(&state).unwrap();
    let err = s
        .command_policy()
        .hide(&state)
        .private_namespaces(false)
        .prepare()
        .unwrap_err();
    assert!(
        matches!(err, linux_sandbox::SandboxError::CannotHide { .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("grant a directory that does not contain"),
        "{err}"
    );
    // Outside every grant there is nothing to hide, and nothing is refused.
    s.command_policy()
        .hide(&s.outside)
        .private_namespaces(false)
        .prepare()
        .unwrap();
}

#[test]
fn without_private_namespaces_host_ipc_is_refused_by_seccomp() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let policy = s.command_policy().private_namespaces(false);
    let out = s.run(
        &policy,
        PYTHON,
        &[
            "-c",
            "import ctypes\n\
             l = ctypes.CDLL(None, use_errno=True)\n\
             print(l.shmget(0, 4096, 0o1600), ctypes.get_errno())\n\
             print(l.msgget(0, 0o1600), ctypes.get_errno())\n\
             print(l.semget(0, 1, 0o1600), ctypes.get_errno())\n\
             print(l.mq_unlink(b'/x'), ctypes.get_errno())\n",
        ],
    );
    // glibc's mq_unlink reports the kernel's EPERM as EACCES.
    assert_eq!(stdout(&out), "-1 1\n-1 1\n-1 1\n-1 13\n");
}

#[test]
fn with_private_namespaces_the_view_outside_the_writable_paths_is_read_only() {
    if !sandbox_available() {
        return;
    }
    if !namespaces_for_a_plain_fork_or_skip() {
        return;
    }
    let s = Scratch::new();
    let secret = s.outside.join("secret");
    let before = std::fs::metadata(&secret).unwrap();
    // /usr/bin/env is 0755 already: even a failed sandbox would change nothing there.
    let out = s.sh(&format!(
        "chmod 777 '{0}'; touch '{0}'; chmod 755 /usr/bin/env; echo in > inside; \
         chmod 600 inside; stat -c %a inside",
        secret.display()
    ));
    // A granted system path is in the view, read-only; the outside file is read-only in the
    // host's tree or, in a new root of the grants only (issue 16), not there at all.
    let err = stderr(&out);
    assert!(
        err.contains("chmod: changing permissions of '/usr/bin/env': Read-only file system"),
        "{err}"
    );
    assert!(
        err.matches("Read-only file system").count() == 3
            || err.matches("No such file or directory").count() == 2,
        "{err}"
    );
    assert_eq!(stdout(&out), "600\n");
    let after = std::fs::metadata(&secret).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        (before.mode(), before.mtime(), before.mtime_nsec()),
        (after.mode(), after.mtime(), after.mtime_nsec())
    );
}

#[test]
fn with_private_namespaces_a_hidden_directory_is_empty_and_its_parents_stay_put() {
    if !sandbox_available() {
        return;
    }
    if !namespaces_for_a_plain_fork_or_skip() {
        return;
    }
    let s = Scratch::new();
    let state = s.work.join("a/b/state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("grants"), "G\n").unwrap();
    let policy = s.command_policy().hide(&state);
    let out = s.run(
        &policy,
        SH,
        &[
            "-c",
            "ls -A a/b/state; cat a/b/state/grants; mv a a2; mv a/b a/c; mv a/b/state a/x; \
             touch a/b/new; ls a/b",
        ],
    );
    assert_eq!(stdout(&out), "new\nstate\n", "{}", stderr(&out));
    assert!(!stdout(&out).contains('G'));
    assert_eq!(
        std::fs::read_to_string(state.join("grants")).unwrap(),
        "G\n"
    );
}

// ---- run_command (RCS-2, RCS-3): hidden files, protected paths ------------------------------

/// A home granted read-only with a writable working directory inside it, as `run_command`'s
/// spec has it: `outside/home` (read), `outside/home/w` (read + write).
struct Home {
    home: std::path::PathBuf,
    w: std::path::PathBuf,
}

fn home_in(s: &Scratch) -> Home {
    let home = s.outside.join("home");
    let w = home.join("w");
    std::fs::create_dir_all(w.join("sub")).unwrap();
    std::fs::write(home.join(".netrc"), "machine x password NETRC-SECRET\n").unwrap();
    std::fs::write(home.join("notes"), "NOTES\n").unwrap();
    std::fs::write(w.join("sub/.env"), "TOKEN=ENV-SECRET\n").unwrap();
    std::fs::write(w.join("sub/readme"), "README\n").unwrap();
    Home { home, w }
}

fn home_policy(h: &Home) -> Policy {
    command_policy_without_work()
        .allow(&h.home, Access::READ | Access::EXECUTE)
        .allow(&h.w, Access::READ | Access::WRITE | Access::EXECUTE)
}

#[test]
fn a_hidden_file_reads_empty_and_cannot_be_written_moved_or_replaced() {
    if !sandbox_available() || !namespaces_for_a_plain_fork_or_skip() {
        return;
    }
    let s = Scratch::new();
    let h = home_in(&s);
    let policy = home_policy(&h)
        .hide(h.home.join(".netrc"))
        .hide(h.w.join("sub/.env"))
        .hide(h.home.join("no-such-file"));
    let script = format!(
        "cd '{home}'; \
         echo \"netrc=[$(cat .netrc)] env=[$(cat w/sub/.env)]\"; cat notes w/sub/readme; \
         echo ESCAPED >> .netrc; echo ESCAPED >> w/sub/.env; \
         mv w/sub/.env w/sub/moved; rm -f w/sub/.env; mv w/sub w/sub2; \
         echo FORGED > w/sub/forged && mv w/sub/forged w/sub/.env; \
         ln -sf /etc/passwd w/sub/.env; chmod 666 w/sub/.env; \
         ls -A /dev/pts | grep -c agent-exec; echo fine > w/sub/new && cat w/sub/new",
        home = h.home.display()
    );
    let out = s.run(&policy, SH, &["-c", &script]);
    let text = stdout(&out);
    assert!(
        text.starts_with("netrc=[] env=[]\nNOTES\nREADME\n"),
        "{text}{}",
        stderr(&out)
    );
    assert!(text.ends_with("\n0\nfine\n"), "{text}{}", stderr(&out));
    assert!(!text.contains("SECRET"));
    let err = stderr(&out);
    // Writing: the empty file is read-only (mode and mount); moving, removing, replacing: it
    // and its directory are mount points.
    assert_eq!(err.matches("Permission denied").count(), 2, "{err}");
    assert!(err.contains("Read-only file system"), "{err}");
    assert_eq!(err.matches("busy").count(), 5, "{err}");
    // Nothing changed on the host but the one file the command may write.
    assert_eq!(
        std::fs::read_to_string(h.w.join("sub/.env")).unwrap(),
        "TOKEN=ENV-SECRET\n"
    );
    assert_eq!(
        std::fs::read_to_string(h.home.join(".netrc")).unwrap(),
        "machine x password NETRC-SECRET\n"
    );
    assert!(!h.w.join("sub/moved").exists() && !h.w.join("sub2").exists());
    assert!(!h.w.join("sub/forged").exists() || !text.contains("FORGED"));
}

#[test]
fn a_private_path_made_after_prepare_is_unreadable_by_landlock_alone() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let h = home_in(&s);
    std::fs::remove_file(h.home.join(".netrc")).unwrap();
    // No mount namespace: an existing hidden path inside a grant would be refused, a missing
    // one splits the grant (issue 18 review 5), so Landlock itself keeps it out.
    let sandbox = home_policy(&h)
        .hide(h.home.join(".docker"))
        .hide(h.home.join(".netrc"))
        .private_namespaces(false)
        .prepare()
        .unwrap();
    std::fs::create_dir(h.home.join(".docker")).unwrap();
    std::fs::write(h.home.join(".docker/config.json"), "DOCKER-SECRET\n").unwrap();
    std::fs::write(h.home.join(".netrc"), "NETRC-SECRET\n").unwrap();
    // The price: an ordinary entry made in a split directory after `prepare` is not granted
    // either (the next call's `prepare` grants it).
    std::fs::write(h.home.join("later"), "LATER\n").unwrap();
    std::fs::write(h.w.join("sub/later"), "W-LATER\n").unwrap();
    let mut command = Command::new(SH);
    command
        .args([
            "-c",
            "cat .docker/config.json; cat .netrc; cat later; cat notes w/sub/readme w/sub/later; \
             ls -A | sort | tr '\\n' ' '",
        ])
        .current_dir(&h.home)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null());
    sandbox.install(&mut command);
    let out = command.output().unwrap();
    let (text, err) = (stdout(&out), stderr(&out));
    assert!(!text.contains("SECRET"), "{text}");
    assert_eq!(
        text, "NOTES\nREADME\nW-LATER\n.docker .netrc later notes w ",
        "{err}"
    );
    assert_eq!(err.matches("Permission denied").count(), 3, "{err}");
}

/// The call's temp dir of [`home_policy`]'s command, beneath its writable `w`: bounded, so
/// the shell's view may get its own `/tmp` (NET-2).
fn with_temp_dir(h: &Home, policy: Policy) -> Policy {
    let temp = h.w.join("call");
    std::fs::create_dir_all(temp.join("home")).unwrap();
    std::fs::create_dir_all(temp.join("tmp")).unwrap();
    policy.bounded_temp_dir(temp.canonicalize().unwrap(), 16 << 20)
}

/// A file of the host's `/tmp` for one test, removed on drop, with the names a command would
/// write beside it in `/tmp` and `/var/tmp` (removed too, should they leak).
struct HostTmpFile(String);

impl HostTmpFile {
    fn new(test: &str) -> HostTmpFile {
        let name = format!("linux-sandbox-{test}-{}", std::process::id());
        std::fs::write(std::path::Path::new("/tmp").join(&name), "HOST-TMP\n").unwrap();
        HostTmpFile(name)
    }

    fn leaked(&self) -> Vec<std::path::PathBuf> {
        ["/tmp", "/var/tmp"]
            .iter()
            .map(|d| std::path::Path::new(d).join(format!("{}.new", self.0)))
            .filter(|p| p.exists())
            .collect()
    }
}

impl Drop for HostTmpFile {
    fn drop(&mut self) {
        for dir in ["/tmp", "/var/tmp"] {
            let dir = std::path::Path::new(dir);
            let _ = std::fs::remove_file(dir.join(&self.0));
            let _ = std::fs::remove_file(dir.join(format!("{}.new", self.0)));
        }
    }
}

/// NET-2: a shell's `/tmp` and `/var/tmp` are its own tmpfs, and the grants bound beneath the
/// private `/tmp` (this scratch lies in the host's) keep exactly their own rights although
/// Landlock's rule on that tmpfs covers them too: the read-only home stays read-only and
/// creates nothing, the writable `w` stays writable, nothing reaches the host's `/tmp`.
#[test]
fn a_private_tmp_leaves_the_grants_beneath_it_their_own_rights() {
    if !sandbox_available() || !namespaces_for_a_plain_fork_or_skip() {
        return;
    }
    let s = Scratch::new();
    let h = home_in(&s);
    let host = HostTmpFile::new("own-tmp");
    let name = &host.0;
    let policy = with_temp_dir(&h, home_policy(&h));
    let enforcement = policy.prepare().unwrap().enforcement();
    assert!(enforcement.private_tmp(), "{enforcement}");
    assert!(
        enforcement.to_string().contains("a private /tmp"),
        "{enforcement}"
    );
    let script = format!(
        "cat /tmp/{name}; ls -A /tmp | grep -c {name}; \
         echo own > /tmp/{name}.new && cat /tmp/{name}.new; \
         echo var > /var/tmp/{name}.new && cat /var/tmp/{name}.new; \
         cat '{home}/notes'; echo x >> '{home}/notes'; touch '{home}/made'; mkdir '{home}/d'; \
         echo w > '{w}/made' && cat '{w}/made'",
        home = h.home.display(),
        w = h.w.display()
    );
    let out = s.run(&policy, SH, &["-c", &script]);
    assert_eq!(stdout(&out), "0\nown\nvar\nNOTES\nw\n", "{}", stderr(&out));
    assert_eq!(host.leaked(), Vec::<std::path::PathBuf>::new());
    assert_eq!(
        stderr(&out).matches("Read-only file system").count(),
        3,
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(h.home.join("notes")).unwrap(),
        "NOTES\n"
    );
    assert!(!h.home.join("made").exists() && !h.home.join("d").exists());
    assert_eq!(std::fs::read_to_string(h.w.join("made")).unwrap(), "w\n");
}

/// NET-2's limit: a read-only grant beneath `/tmp` that is split around hidden paths relies on
/// no Landlock rule above it, so the view keeps a read-only `/tmp`, and a private location
/// made in it after `prepare` stays unreadable in the private world too.
#[test]
fn a_split_grant_beneath_tmp_keeps_tmp_read_only_and_new_private_paths_unreadable() {
    if !sandbox_available() || !namespaces_for_a_plain_fork_or_skip() {
        return;
    }
    let s = Scratch::new();
    let h = home_in(&s);
    let host = HostTmpFile::new("split-tmp");
    let name = &host.0;
    let policy = with_temp_dir(&h, home_policy(&h)).hide(h.home.join(".docker"));
    let enforcement = policy.prepare().unwrap().enforcement();
    assert!(!enforcement.private_tmp(), "{enforcement}");
    assert!(
        enforcement.to_string().contains("/tmp read-only"),
        "{enforcement}"
    );
    let sandbox = policy.prepare().unwrap();
    // Made after `prepare`, as a user's `docker login` during the call would.
    std::fs::create_dir(h.home.join(".docker")).unwrap();
    std::fs::write(h.home.join(".docker/config.json"), "DOCKER-SECRET\n").unwrap();
    let script =
        format!("cat .docker/config.json; cat notes; echo own > /tmp/{name}.new; echo done");
    let out = s.run_prepared(sandbox, &h.home, SH, &["-c", &script]);
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(text, "NOTES\ndone\n", "{err}");
    assert!(err.contains("Permission denied"), "{err}");
    assert!(err.contains("Read-only file system"), "{err}");
    assert_eq!(host.leaked(), Vec::<std::path::PathBuf>::new());
}

/// NET-2's limit: a read-only grant beneath `/tmp` without execute would gain it from the
/// private `/tmp`'s rule (a read-only bind refuses writes, not execution), so the view keeps a
/// read-only `/tmp`.
#[test]
fn a_grant_beneath_tmp_without_execute_keeps_tmp_read_only() {
    if !sandbox_available() || !namespaces_for_a_plain_fork_or_skip() {
        return;
    }
    let s = Scratch::new();
    let h = home_in(&s);
    let policy = with_temp_dir(
        &h,
        command_policy_without_work()
            .allow(&h.home, Access::READ)
            .allow(&h.w, Access::READ | Access::WRITE | Access::EXECUTE),
    );
    let enforcement = policy.prepare().unwrap().enforcement();
    assert!(!enforcement.private_tmp(), "{enforcement}");
    // The same grant with execute: its own `/tmp`.
    let policy = with_temp_dir(&h, home_policy(&h));
    assert!(policy.prepare().unwrap().enforcement().private_tmp());
}

#[test]
fn a_hidden_file_is_refused_where_the_view_is_the_hosts_tree() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    std::fs::write(s.work.join(".netrc"), "x").unwrap();
    let err = s
        .command_policy()
        .hide(s.work.join(".netrc"))
        .private_namespaces(false)
        .prepare()
        .unwrap_err();
    assert!(
        matches!(err, linux_sandbox::SandboxError::CannotHide { .. }),
        "{err}"
    );
    if !namespaces_for_a_plain_fork_or_skip() {
        return;
    }
    // A single program keeps the host's tree (RUN-7): no place for an empty file there.
    let err = Policy::single_program("/bin/cat")
        .allow_system("/usr", Access::READ)
        .allow(&s.work, Access::READ | Access::WRITE)
        .hide(s.work.join(".netrc"))
        .prepare()
        .unwrap_err();
    assert!(
        matches!(err, linux_sandbox::SandboxError::CannotHideFile { .. }),
        "{err}"
    );
}

/// A repository in the writable working directory with its hooks, config and `.gitmodules`
/// protected (RCS-3).
fn protected_repo(s: &Scratch) -> (std::path::PathBuf, Policy) {
    let repo = s.work.join("repo");
    std::fs::create_dir_all(repo.join(".git/hooks")).unwrap();
    std::fs::write(repo.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(repo.join(".git/hooks/README"), "hooks\n").unwrap();
    std::fs::write(repo.join(".gitmodules"), "").unwrap();
    let policy = s
        .command_policy()
        .protect(repo.join(".git/hooks"))
        .protect(repo.join(".git/config"))
        .protect(repo.join(".gitmodules"))
        .protect(repo.join(".git/missing"));
    (repo, policy)
}

#[test]
fn protected_paths_in_a_writable_grant_cannot_be_changed_moved_or_replaced() {
    if !sandbox_available() || !namespaces_for_a_plain_fork_or_skip() {
        return;
    }
    let s = Scratch::new();
    let (repo, policy) = protected_repo(&s);
    let before = snapshot(&repo);
    let out = s.run(
        &policy,
        SH,
        &[
            "-c",
            "cd repo; echo ESCAPED >> .git/config; echo ESCAPED > .git/hooks/pre-commit; \
             rm -rf .git/hooks; rm -f .git/config; mv .git .git2; \
             mv ../repo ../repo2; echo ESCAPED > .gitmodules; mv .gitmodules gm; \
             chmod 777 .git/hooks/README; touch .git/config; \
             echo '[x]' > c2 && mv c2 .git/config; \
             mkdir -p .git2/hooks && echo ESCAPED > .git2/hooks/pre-commit && mv .git2 .git; \
             echo live > .git/HEAD.new && mv .git/HEAD.new .git/HEAD2 && cat .git/HEAD2; \
             echo ok > file && cat file",
        ],
    );
    assert_eq!(stdout(&out), "live\nok\n", "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("Read-only file system"), "{err}");
    assert!(err.contains("busy"), "{err}");
    // What the command could do beside the protected paths: make files, and move its own
    // `.git2` into `.git` (which stays put).
    let mut after = snapshot(&repo);
    for made in ["file", ".git/HEAD2", "c2"] {
        assert!(after.remove(&repo.join(made)).is_some(), "{made} missing");
    }
    after.retain(|p, _| !p.starts_with(repo.join(".git/.git2")) && *p != repo.join(".git"));
    let mut before = before;
    before.remove(&repo.join(".git"));
    assert_eq!(after, before);
    assert!(!repo.join(".git/hooks/pre-commit").exists());
}

#[test]
fn a_protected_path_reached_through_symbolic_links_keeps_the_links_in_place() {
    if !sandbox_available() || !namespaces_for_a_plain_fork_or_skip() {
        return;
    }
    let s = Scratch::new();
    let repo = s.work.join("repo");
    std::fs::create_dir_all(s.work.join("gitdir/hooks")).unwrap();
    std::fs::create_dir_all(&repo).unwrap();
    std::os::unix::fs::symlink("../gitdir", repo.join(".git")).unwrap();
    std::fs::write(s.work.join("modules"), "M\n").unwrap();
    std::os::unix::fs::symlink("../modules", repo.join(".gitmodules")).unwrap();
    let policy = s
        .command_policy()
        .protect(repo.join(".git/hooks"))
        .protect(repo.join(".gitmodules"));
    let out = s.run(
        &policy,
        SH,
        &[
            "-c",
            "cd repo; rm .git; mv .git g2; ln -sfn /tmp .git; \
             rm .gitmodules; echo ESCAPED > .gitmodules; mv ../modules ../m2; \
             echo ESCAPED > .git/hooks/pre-commit; mv ../gitdir ../g3; \
             readlink .git .gitmodules",
        ],
    );
    assert_eq!(stdout(&out), "../gitdir\n../modules\n", "{}", stderr(&out));
    assert!(!s.work.join("gitdir/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(s.work.join("modules")).unwrap(),
        "M\n"
    );
}

#[test]
fn protected_paths_in_a_writable_grant_are_refused_without_private_namespaces() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let (_repo, policy) = protected_repo(&s);
    let err = policy.private_namespaces(false).prepare().unwrap_err();
    assert!(
        matches!(err, linux_sandbox::SandboxError::CannotProtect { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("nothing ran"), "{err}");
    // Outside every writable grant a protected path is read-only anyway: nothing refused.
    s.command_policy()
        .protect(s.outside.join("secret"))
        .private_namespaces(false)
        .prepare()
        .unwrap();
}

#[test]
fn git_commits_in_a_repository_whose_hooks_and_config_are_protected() {
    if !sandbox_available() || !namespaces_for_a_plain_fork_or_skip() {
        return;
    }
    let git = ["/usr/bin/git", "/usr/local/bin/git"]
        .into_iter()
        .find(|g| std::path::Path::new(g).exists());
    let Some(git) = git else {
        eprintln!("skipped: no git");
        return;
    };
    let s = Scratch::new();
    let repo = s.work.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let host_git = |args: &[&str]| {
        let out = Command::new(git)
            .args(args)
            .current_dir(&repo)
            .env("HOME", &s.work)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    host_git(&["init", "-q"]);
    let config = std::fs::read(repo.join(".git/config")).unwrap();
    let policy = s
        .command_policy()
        .protect(repo.join(".git/hooks"))
        .protect(repo.join(".git/config"));
    let script = format!(
        "set -e; export GIT_CONFIG_NOSYSTEM=1; cd repo; echo one > a; {git} add a; \
         {git} -c user.name=T -c user.email=t@example.com commit -q -m one; \
         {git} log --format=%s; \
         if {git} init -q 2>/dev/null; then echo REINIT; fi; \
         if {git} config core.hooksPath /tmp 2>/dev/null; then echo CONFIGURED; fi; \
         echo two > a; {git} -c user.name=T -c user.email=t@example.com commit -q -am two; \
         {git} log --format=%s"
    );
    let out = s.run(&policy, SH, &["-c", &script]);
    assert_eq!(stdout(&out), "one\ntwo\none\n", "{}", stderr(&out));
    assert!(out.status.success());
    assert_eq!(std::fs::read(repo.join(".git/config")).unwrap(), config);
    // The refused re-init and `git config` cleaned up after themselves.
    assert!(!repo.join(".git/config.lock").exists());
}

// ---- issue 16 part 3: unix sockets only where the view is a root of the grants only ---------

/// Makes a unix socket, binds it in the working directory, connects a second one to it.
const UNIX_ROUND_TRIP: &str = "import socket\n\
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
    s.bind('rt.sock'); s.listen(1)\n\
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); c.connect('rt.sock')\n\
    print('round trip')";

#[test]
fn unix_sockets_work_only_where_the_view_holds_nothing_but_the_grants() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    // Without private namespaces the view is the host's, with its sockets: refused below
    // Landlock ABI 9.
    let host_view = s.command_policy().private_namespaces(false);
    let prepared = host_view.prepare().unwrap();
    assert!(!prepared.enforcement().private_root());
    let out = s.run(&host_view, PYTHON, &["-c", UNIX_ROUND_TRIP]);
    if probe().landlock_abi().unwrap_or(0) < 9 {
        assert_denied(&out);
    }
    if !namespaces_for_a_plain_fork_or_skip() {
        return;
    }
    let policy = s.command_policy();
    let enforcement = policy.prepare().unwrap().enforcement();
    assert!(enforcement.private_root(), "{enforcement}");
    let out = s.run(&policy, PYTHON, &["-c", UNIX_ROUND_TRIP]);
    assert_eq!(stdout(&out), "round trip\n", "{}", stderr(&out));
    // A single program (RUN-7) keeps the host's read-only view and no unix socket.
    let single = Policy::single_program(PYTHON)
        .allow_system("/usr", Access::READ)
        .allow_system("/etc/ld.so.cache", Access::READ);
    assert!(!single.prepare().unwrap().enforcement().private_root());
}

/// Issue 18: the network does not open unix sockets where the grants may hold another
/// program's (a granted home: gpg-agent's, Docker Desktop's); where the view holds none, they
/// work with the network as without it.
#[test]
fn the_network_makes_no_unix_socket_where_a_grant_may_hold_another_programs() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let agent = s.work.join("agent.sock");
    let host = UnixListener::bind(&agent).unwrap();
    host.set_nonblocking(true).unwrap();
    let script = format!(
        "import socket\n\
         a, b = socket.socketpair(); a.send(b'x'); assert b.recv(1) == b'x'\n\
         print('pair works', flush=True)\n\
         socket.socket(socket.AF_UNIX).connect({:?})\n\
         print('ESCAPED')",
        agent.to_str().unwrap()
    );
    let policy = s
        .command_policy()
        .network(Network::All)
        .unix_sockets_in_view(false);
    assert!(
        !policy.prepare().unwrap().enforcement().unix_sockets()
            || probe().landlock_abi().unwrap_or(0) >= 9
    );
    let out = s.run(&policy, PYTHON, &["-c", &script]);
    if probe().landlock_abi().unwrap_or(0) < 9 {
        assert_denied(&out);
        assert_eq!(stdout(&out), "pair works\n");
        assert!(stderr(&out).contains("PermissionError"), "{}", stderr(&out));
    }
    assert_eq!(
        host.accept().map(|_| ()).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    if !namespaces_for_a_plain_fork_or_skip() {
        return;
    }
    let policy = s.command_policy().network(Network::All);
    let out = s.run(&policy, PYTHON, &["-c", UNIX_ROUND_TRIP]);
    assert_eq!(stdout(&out), "round trip\n", "{}", stderr(&out));
}

/// Issue 16 review 5: where unix sockets are refused (the view holds the host's), `socketpair`
/// still gives a command a connected pair (pipes, asyncio, multiprocessing use one), but not a
/// datagram pair: its `sendto` names any pathname socket of the host, which Landlock below
/// ABI 9 does not check.
#[test]
fn a_datagram_pair_cannot_reach_a_host_socket_where_unix_sockets_are_refused() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let at = s.outside.join("host.sock");
    let host = std::os::unix::net::UnixDatagram::bind(&at).unwrap();
    host.set_nonblocking(true).unwrap();
    let script = format!(
        "import socket\n\
         a, b = socket.socketpair(); a.send(b'x'); assert b.recv(1) == b'x'\n\
         print('stream pair works', flush=True)\n\
         d, _ = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
         d.sendto(b'ESCAPED', {at:?})\n\
         print('ESCAPED')",
        at = at.display().to_string()
    );
    let host_view = s.command_policy().private_namespaces(false);
    let out = s.run(&host_view, PYTHON, &["-c", &script]);
    if probe().landlock_abi().unwrap_or(0) < 9 {
        assert_denied(&out);
        assert_eq!(stdout(&out), "stream pair works\n", "{}", stderr(&out));
    }
    let mut buf = [0u8; 16];
    assert_eq!(
        host.recv(&mut buf).map(|_| ()).unwrap_err().kind(),
        ErrorKind::WouldBlock,
        "the host socket received a datagram"
    );
}

// ---------------------------------------------------------------------------------------------
// Staged directories (TRUST-1): a private copy, decided by name for the whole run

/// A repository in the work dir whose `.git` is staged: upper and work directories outside.
fn staged_repo(s: &Scratch) -> (std::path::PathBuf, std::path::PathBuf, Policy) {
    let repo = s.work.join("repo");
    std::fs::create_dir_all(repo.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(repo.join(".git/objects/ab")).unwrap();
    std::fs::write(repo.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
    std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let stage = s.outside.join("stage");
    std::fs::create_dir_all(stage.join("u")).unwrap();
    std::fs::create_dir_all(stage.join("w")).unwrap();
    let policy = s.command_policy().stage(
        repo.join(".git"),
        stage.join("u"),
        stage.join("w"),
        vec![repo.join(".git/objects")],
    );
    (repo, stage, policy)
}

#[test]
fn a_staged_directory_keeps_every_new_or_changed_name_out_of_the_real_one() {
    // TRUST-1 — a new name (`commondir`, a hook), a rename over `config` and a write
    // into a file all land in the private copy; the directory cannot be moved away.
    if !sandbox_available() || !namespaces_for_a_plain_fork_or_skip() {
        return;
    }
    let s = Scratch::new();
    let (repo, stage, policy) = staged_repo(&s);
    let before = snapshot(&repo.join(".git"));
    let out = s.run(
        &policy,
        SH,
        &[
            "-c",
            "cd repo; printf '[core]\\n\\tfsmonitor = touch /tmp/x\\n' > c.lock && \
             mv c.lock .git/config; echo /elsewhere > .git/commondir; \
             echo ESCAPED > .git/hooks/post-checkout; chmod +x .git/hooks/post-checkout; \
             echo ESCAPED >> .git/HEAD; mv .git .git2; \
             echo blob > .git/objects/ab/cdef; \
             grep -c fsmonitor .git/config; cat .git/commondir",
        ],
    );
    // The command sees its own changes.
    assert_eq!(stdout(&out), "1\n/elsewhere\n", "{}", stderr(&out));
    assert!(stderr(&out).contains("busy"), "{}", stderr(&out));
    // The real directory holds what it held, plus the object written through.
    let mut after = snapshot(&repo.join(".git"));
    assert!(
        after.remove(&repo.join(".git/objects/ab/cdef")).is_some(),
        "the object did not reach the real objects directory"
    );
    assert_eq!(after, before);
    // The changes wait in the upper directory for the caller to judge.
    let upper = stage.join("u");
    assert!(
        std::fs::read_to_string(upper.join("config"))
            .unwrap()
            .contains("fsmonitor")
    );
    assert!(upper.join("commondir").exists());
    assert!(upper.join("hooks/post-checkout").exists());
    assert!(!upper.join("objects/ab/cdef").exists());
}

#[test]
fn a_staged_directory_lets_the_command_work_as_usual() {
    // TRUST-1, LIVE-1 — liveness twin: create, rename, remove and list in the copy.
    if !sandbox_available() || !namespaces_for_a_plain_fork_or_skip() {
        return;
    }
    let s = Scratch::new();
    let (_repo, stage, policy) = staged_repo(&s);
    let out = s.run(
        &policy,
        SH,
        &[
            "-c",
            "cd repo/.git && echo x > index.lock && mv index.lock index && \
             mkdir -p refs/heads && echo abc > refs/heads/main && rm HEAD && \
             echo 'ref: refs/heads/next' > HEAD && cat HEAD index refs/heads/main && \
             ls hooks objects",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "ref: refs/heads/next\nx\nabc\nhooks:\n\nobjects:\nab\n"
    );
    assert!(stage.join("u/index").exists());
}
