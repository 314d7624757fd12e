//! End-to-end tests of the `run_command` mechanics of `exec` on Linux (issue 18, section B):
//! the [`SandboxSpec::for_argv`] view of a home (read-only, its private paths hidden, the
//! working directory and caches writable inside it), protected paths (RCS-3), stderr merged
//! into stdout in order, head-and-tail capture (RC-13), and the network switch (RC-7). When the
//! suite runs as root, `every_test_also_holds_unprivileged` re-runs it as uid 65534.
#![cfg(target_os = "linux")]
// Test helpers outside #[test] fns unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use exec::{Access, End, Grant, Job, Limits, Network, OnCap, Outcome, SandboxSpec, WorkDir};
use fsguard::{RelPath, RootLease};
use testkit::sandbox_available;
use toolscope::CallContext;

/// A home as `run_command` sees it: `home` read-only with `.ssh/` and `.netrc` hidden,
/// `home/proj` (the working directory) and `home/.cache` writable, a call temp dir writable,
/// and `other` (another user's home) not granted at all.
struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
    proj: PathBuf,
    temp: PathBuf,
    other: PathBuf,
}

fn home() -> Home {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let home = base.join("home");
    let proj = home.join("proj");
    let temp = base.join("tmp");
    let other = base.join("other");
    for d in [
        &proj,
        &home.join(".cache"),
        &home.join(".ssh"),
        &temp,
        &other,
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(home.join(".ssh/id_ed25519"), "SSH-SECRET\n").unwrap();
    std::fs::write(home.join(".netrc"), "machine m password NETRC-SECRET\n").unwrap();
    std::fs::write(home.join("notes"), "NOTES\n").unwrap();
    std::fs::write(other.join("secret"), "OTHER-SECRET\n").unwrap();
    Home {
        _dir: dir,
        home,
        proj,
        temp,
        other,
    }
}

impl Home {
    fn spec(&self, network: Network) -> SandboxSpec {
        let grants = vec![
            Grant::open(&self.proj, Access::ReadWrite).unwrap(),
            Grant::open(&self.temp, Access::ReadWrite).unwrap(),
            Grant::open(&self.home, Access::Read).unwrap(),
            Grant::open(&self.home.join(".cache"), Access::ReadWrite).unwrap(),
        ];
        let mut spec = SandboxSpec::for_argv(grants, network);
        spec.hidden = vec![
            self.home.join(".ssh"),
            self.home.join(".netrc"),
            // Missing private paths are ignored.
            self.home.join(".aws"),
            self.home.join(".git-credentials"),
        ];
        spec
    }

    fn job(&self, program: &str, args: &[&str], sandbox: SandboxSpec, limits: Limits) -> Job {
        Job {
            program: program.into(),
            args: args.iter().map(Into::into).collect(),
            workdir: WorkDir {
                lease: Arc::new(RootLease::acquire(&self.proj).unwrap()),
                rel: RelPath::root(),
            },
            env: vec![
                ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
                ("HOME".into(), self.home.clone().into()),
                ("TMPDIR".into(), self.temp.clone().into()),
                ("LC_ALL".into(), "C".into()),
            ],
            sandbox,
            limits,
            merge_stderr: false,
        }
    }

    async fn sh(&self, script: &str, sandbox: SandboxSpec) -> Outcome {
        run(self.job("/bin/sh", &["-c", script], sandbox, limits(OnCap::Truncate))).await
    }
}

fn limits(on_cap: OnCap) -> Limits {
    Limits {
        timeout: Duration::from_secs(60),
        stdout_cap: 64 * 1024,
        stderr_cap: 64 * 1024,
        on_cap,
    }
}

async fn run(job: Job) -> Outcome {
    let (ctx, _cancel) = CallContext::standalone();
    let out = exec::run(job, &ctx).await.unwrap();
    eprintln!(
        "exit {:?} end {:?}\nstdout: {}\nstderr: {}\nenforcement: {}",
        out.exit_code,
        out.end,
        String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(4096)]),
        String::from_utf8_lossy(&out.stderr),
        out.enforcement
    );
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Whether this machine gives the command its own mount namespace (and so a view of the
/// grants only); where it does not, hidden paths inside a grant are refused instead.
fn private_view(out: &Outcome) -> bool {
    out.view_is_grants_only
}

#[tokio::test]
async fn the_argv_spec_reads_home_writes_the_workdir_and_caches_and_hides_private_paths() {
    if !sandbox_available() {
        return;
    }
    let h = home();
    let script = format!(
        "cat ~/notes; echo \"netrc=[$(cat ~/.netrc)] ssh=[$(ls -A ~/.ssh)]\"; \
         cat ~/.ssh/id_ed25519; \
         echo built > out && cat out; echo c > ~/.cache/c && cat ~/.cache/c; \
         echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"; \
         echo ESCAPED > ~/evil; echo ESCAPED >> ~/.netrc; echo ESCAPED > ~/.ssh/key; \
         mv ~/.netrc ~/proj/n; mv ~/.ssh ~/proj/s; \
         cat '{other}/secret'; ls /root; cat /etc/shadow; ls /home",
        other = h.other.display()
    );
    let out = h.sh(&script, h.spec(Network::None)).await;
    let stdout = text(&out.stdout);
    assert!(out.finished(), "{out:?}");
    assert_eq!(
        stdout,
        "NOTES\nnetrc=[] ssh=[]\nbuilt\nc\nt\n",
        "{}",
        text(&out.stderr)
    );
    for secret in ["SSH-SECRET", "NETRC-SECRET", "OTHER-SECRET", "root:"] {
        assert!(!stdout.contains(secret), "{secret}");
    }
    assert!(private_view(&out), "{}", out.enforcement);
    // Another user's home and /root are not in the view at all.
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("{}/secret: No such file", h.other.display())),
        "{err}"
    );
    assert!(err.contains("'/root': No such file"), "{err}");
    // Nothing changed on the host but what the command may write: `mv` across mounts copied
    // what it saw (the empty covers) into the working directory, then failed to remove them.
    assert!(!h.home.join("evil").exists() && !h.home.join(".ssh/key").exists());
    assert_eq!(std::fs::read(h.proj.join("n")).unwrap_or_default(), b"");
    assert!(!h.proj.join("s/id_ed25519").exists());
    assert!(h.home.join(".ssh/id_ed25519").exists());
    assert_eq!(
        std::fs::read_to_string(h.home.join(".netrc")).unwrap(),
        "machine m password NETRC-SECRET\n"
    );
    assert_eq!(
        std::fs::read_to_string(h.proj.join("out")).unwrap(),
        "built\n"
    );
    assert_eq!(
        std::fs::read_to_string(h.home.join(".cache/c")).unwrap(),
        "c\n"
    );
}

/// Runs `before` in the command, then lets the host do `host` while the command waits (a
/// handshake through the working directory: `ready` from the command, `go` from the host,
/// never a sleep that would race), then runs `after`. The spec also hides `~/.docker` and
/// `~/.config/gh`, which do not exist when the call starts.
async fn mid_call(
    h: &Home,
    before: &str,
    host: impl FnOnce() + Send + 'static,
    after: &str,
) -> Outcome {
    let mut spec = h.spec(Network::None);
    spec.hidden.push(h.home.join(".docker"));
    spec.hidden.push(h.home.join(".config/gh"));
    let (ready, go) = (h.proj.join("ready"), h.proj.join("go"));
    let waiter = std::thread::spawn(move || {
        // Bounded: a command that never got there fails the test below, not this thread.
        for _ in 0..6000 {
            if ready.exists() {
                host();
                std::fs::write(&go, "").unwrap();
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let script = format!(
        "{before}; : > ready; i=0; \
         while [ ! -e go ] && [ $i -lt 6000 ]; do sleep 0.01; i=$((i+1)); done; {after}"
    );
    let out = h.sh(&script, spec).await;
    waiter.join().unwrap();
    assert!(h.proj.join("go").exists(), "the host never acted");
    out
}

#[tokio::test]
async fn a_private_directory_the_host_makes_mid_call_is_unreadable() {
    if !sandbox_available() {
        return;
    }
    let h = home();
    std::fs::create_dir_all(h.home.join(".config/other")).unwrap();
    std::fs::write(h.home.join(".config/other/rc"), "OTHER-RC\n").unwrap();
    let (home, docker) = (h.home.clone(), h.home.join(".docker"));
    let out = mid_call(
        &h,
        "ls ~/.docker ~/.config/gh 2>&1 | grep -c 'No such file'",
        move || {
            std::fs::create_dir_all(docker.join("sub")).unwrap();
            std::fs::write(docker.join("config.json"), "DOCKER-SECRET\n").unwrap();
            std::fs::write(docker.join("sub/token"), "DOCKER-SECRET\n").unwrap();
            std::fs::create_dir_all(home.join(".config/gh")).unwrap();
            std::fs::write(home.join(".config/gh/hosts.yml"), "GH-SECRET\n").unwrap();
            std::fs::write(home.join(".git-credentials"), "CRED-SECRET\n").unwrap();
        },
        "cat ~/.docker/config.json ~/.docker/sub/token ~/.config/gh/hosts.yml \
         ~/.git-credentials; cat ~/.config/other/rc ~/notes",
    )
    .await;
    let (stdout, err) = (text(&out.stdout), text(&out.stderr));
    assert!(out.finished(), "{out:?}");
    assert!(!stdout.contains("SECRET"), "{stdout}");
    // Both missing at the start; the rest of `.config` and of the home reads as before.
    assert_eq!(stdout, "2\nOTHER-RC\nNOTES\n", "{err}");
    assert_eq!(err.matches("Permission denied").count(), 4, "{err}");
}

#[tokio::test]
async fn a_private_file_the_host_replaces_by_rename_mid_call_is_unreadable() {
    if !sandbox_available() {
        return;
    }
    let h = home();
    let home = h.home.clone();
    let out = mid_call(
        &h,
        "echo \"netrc=[$(cat ~/.netrc)]\"",
        move || {
            // As git's credential store and every atomic save rewrite a file.
            std::fs::write(home.join(".netrc.tmp"), "NEW-SECRET\n").unwrap();
            std::fs::rename(home.join(".netrc.tmp"), home.join(".netrc")).unwrap();
        },
        "cat ~/.netrc; cat ~/notes",
    )
    .await;
    let (stdout, err) = (text(&out.stdout), text(&out.stderr));
    assert!(!stdout.contains("SECRET"), "{stdout}");
    // Before: the empty cover; after: refused (the cover went with the old file).
    assert_eq!(stdout, "netrc=[]\nNOTES\n", "{err}");
    assert_eq!(err.matches("Permission denied").count(), 1, "{err}");
}

#[tokio::test]
async fn an_ordinary_file_the_host_makes_mid_call_in_a_project_of_the_home_is_readable() {
    if !sandbox_available() {
        return;
    }
    let h = home();
    let x = h.home.join("projects/x");
    std::fs::create_dir_all(&x).unwrap();
    std::fs::write(x.join("old"), "OLD\n").unwrap();
    let made = x.clone();
    let out = mid_call(
        &h,
        "cat ~/projects/x/old; ls -A ~ | sort | tr '\\n' ' '; echo",
        move || {
            std::fs::create_dir_all(made.join("new-dir")).unwrap();
            std::fs::write(made.join("new-dir/new"), "NEW\n").unwrap();
            std::fs::write(made.join("new"), "NEW\n").unwrap();
        },
        "cat ~/projects/x/new ~/projects/x/new-dir/new",
    )
    .await;
    let (stdout, err) = (text(&out.stdout), text(&out.stderr));
    assert!(out.finished(), "{out:?}");
    assert_eq!(
        stdout, "OLD\n.cache .netrc .ssh notes proj projects \nNEW\nNEW\n",
        "{err}"
    );
}

#[tokio::test]
async fn a_home_with_thousands_of_entries_reads_as_before() {
    if !sandbox_available() {
        return;
    }
    let h = home();
    for i in 0..3000 {
        std::fs::write(h.home.join(format!("f{i:04}")), format!("{i}\n")).unwrap();
    }
    std::fs::create_dir_all(h.home.join("d/e")).unwrap();
    std::fs::write(h.home.join("d/e/deep"), "DEEP\n").unwrap();
    std::os::unix::fs::symlink(h.home.join(".ssh"), h.home.join("ssh-link")).unwrap();
    let out = h
        .sh(
            "ls ~ | wc -l; cat ~/f0000 ~/f2999 ~/d/e/deep; cat ~/ssh-link/id_ed25519",
            h.spec(Network::None),
        )
        .await;
    let (stdout, err) = (text(&out.stdout), text(&out.stderr));
    assert!(out.finished(), "{out:?}");
    // 3000 files, d, notes, proj, ssh-link; the link leads to the covered `.ssh`.
    assert_eq!(stdout, "3004\n0\n2999\nDEEP\n", "{err}");
    assert!(!stdout.contains("SSH-SECRET"));
}

#[tokio::test]
async fn protected_paths_in_the_workdir_stay_read_only_and_git_still_commits() {
    if !sandbox_available() {
        return;
    }
    let Some(git) = ["/usr/bin/git", "/usr/local/bin/git"]
        .into_iter()
        .find(|g| Path::new(g).exists())
    else {
        eprintln!("skipped: no git");
        return;
    };
    let h = home();
    let init = std::process::Command::new(git)
        .args(["init", "-q"])
        .current_dir(&h.proj)
        .env("HOME", &h.home)
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    std::fs::create_dir_all(h.proj.join(".git/hooks")).unwrap();
    std::fs::write(h.proj.join(".gitmodules"), "").unwrap();
    let config = std::fs::read(h.proj.join(".git/config")).unwrap();
    let mut spec = h.spec(Network::None);
    spec.protected = vec![
        h.proj.join(".git/hooks"),
        h.proj.join(".git/config"),
        h.proj.join(".gitmodules"),
        h.home.join(".bashrc"),
    ];
    let script = format!(
        "export GIT_CONFIG_NOSYSTEM=1; \
         echo ESCAPED >> .git/config; echo ESCAPED > .git/hooks/pre-commit; rm -rf .git/hooks; \
         mv .git .git2; mkdir -p .git2/hooks; echo ESCAPED > .gitmodules; \
         echo one > a && {git} add a && \
         {git} -c user.name=T -c user.email=t@example.com commit -q -m one && \
         {git} log --format=%s; \
         if {git} init -q 2>/dev/null; then echo REINIT; fi"
    );
    let out = h.sh(&script, spec).await;
    assert!(out.view_is_grants_only, "{}", out.enforcement);
    assert_eq!(text(&out.stdout), "one\n", "{}", text(&out.stderr));
    assert_eq!(std::fs::read(h.proj.join(".git/config")).unwrap(), config);
    // The refused re-init cleaned up after itself.
    assert!(!h.proj.join(".git/config.lock").exists());
    assert!(!h.proj.join(".git/hooks/pre-commit").exists());
    // `.git` stayed where it was; the `.git2` the command made is its own empty directory.
    assert!(h.proj.join(".git/hooks").is_dir() && !h.proj.join(".git2/config").exists());
    assert_eq!(std::fs::read(h.proj.join(".gitmodules")).unwrap(), b"");
}

#[tokio::test]
async fn merged_stderr_arrives_in_the_order_it_was_written() {
    if !sandbox_available() {
        return;
    }
    let h = home();
    for _ in 0..20 {
        let mut job = h.job(
            "/bin/sh",
            &["-c", "echo a; echo b >&2; echo c; echo d >&2"],
            h.spec(Network::None),
            limits(OnCap::Truncate),
        );
        job.merge_stderr = true;
        let out = run(job).await;
        assert_eq!(text(&out.stdout), "a\nb\nc\nd\n");
        assert!(out.stderr.is_empty());
        assert_eq!(out.stdout_head_len, out.stdout.len());
    }
}

#[tokio::test]
async fn head_and_tail_keeps_the_first_and_last_lines_of_ten_megabytes() {
    if !sandbox_available() {
        return;
    }
    let h = home();
    // 10 MB of numbered lines, the first and last recognisable, and one stderr line merged in.
    let script = "echo FIRST; echo to-stderr >&2; seq 1 1450000; echo LAST";
    let mut job = h.job(
        "/bin/sh",
        &["-c", script],
        h.spec(Network::None),
        Limits {
            stdout_cap: 20_000,
            ..limits(OnCap::HeadAndTail)
        },
    );
    job.merge_stderr = true;
    let out = run(job).await;
    assert_eq!(out.end, End::Exited, "the command runs to its end");
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.stdout.len(), 20_000);
    assert_eq!(out.stdout_head_len, 10_000);
    let head = text(&out.stdout[..out.stdout_head_len]);
    let tail = text(&out.stdout[out.stdout_head_len..]);
    assert!(head.starts_with("FIRST\nto-stderr\n1\n2\n3\n"), "{head}");
    assert!(tail.ends_with("1449999\n1450000\nLAST\n"), "{tail}");
    assert!(out.stdout_truncated);
    // Every byte between them was counted: FIRST, to-stderr, the numbers, LAST.
    let total: u64 = 6
        + 10
        + (1..=1_450_000u64)
            .map(|n| n.to_string().len() as u64 + 1)
            .sum::<u64>()
        + 5;
    assert_eq!(out.stdout_omitted, total - 20_000);
}

/// A background task's log and monitor see every byte in order, stderr merged, far past the
/// cap the outcome keeps (BG-6: the log is the whole output).
#[tokio::test]
async fn a_tap_sees_every_byte_in_order_past_the_cap() {
    if !sandbox_available() {
        return;
    }
    let h = home();
    let script = "echo FIRST; echo to-stderr >&2; seq 1 200000; echo LAST";
    let job = h.job(
        "/bin/sh",
        &["-c", script],
        h.spec(Network::None),
        Limits {
            stdout_cap: 4_000,
            ..limits(OnCap::Truncate)
        },
    );
    let seen = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let sink = Arc::clone(&seen);
    let tap: exec::Tap =
        Arc::new(move |bytes: &[u8]| sink.lock().unwrap().extend_from_slice(bytes));
    let (ctx, _cancel) = CallContext::standalone();
    let out = exec::run_tapped(job, tap, &ctx).await.unwrap();
    assert_eq!(out.exit_code, Some(0));
    let mut want = String::from("FIRST\nto-stderr\n");
    for n in 1..=200_000 {
        want.push_str(&format!("{n}\n"));
    }
    want.push_str("LAST\n");
    let seen = seen.lock().unwrap();
    assert!(
        *seen == want.as_bytes(),
        "the tap saw {} of {} bytes",
        seen.len(),
        want.len()
    );
    // The outcome still keeps only its head and tail.
    assert_eq!(out.stdout.len(), 4_000);
    assert!(out.stderr.is_empty());
}

/// A TCP listener and a UDP socket of the host's network namespace on 127.0.0.1, and a Python
/// program that reaches both and resolves `localhost`.
/// The host's listeners, kept open while the command runs.
type Listeners = (
    std::net::TcpListener,
    std::net::UdpSocket,
    std::os::unix::net::UnixListener,
);

fn network_probe(h: &Home) -> (Listeners, String) {
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    // A host program's socket in the granted home (gpg-agent's, Docker Desktop's): never
    // reached, with or without the network.
    let agent = h.home.join("agent.sock");
    let unix = std::os::unix::net::UnixListener::bind(&agent).unwrap();
    let script = format!(
        "import socket\n\
         def attempt(name, f):\n\
         \x20   try:\n\
         \x20       f(); print(name, 'ok')\n\
         \x20   except OSError as e:\n\
         \x20       print(name, 'refused', e.errno)\n\
         attempt('tcp', lambda: socket.create_connection(('127.0.0.1', {tcp}), timeout=10).sendall(b'hi'))\n\
         attempt('udp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'hi', ('127.0.0.1', {udp})))\n\
         attempt('dns', lambda: socket.getaddrinfo('localhost', 80))\n\
         attempt('unix', lambda: socket.socket(socket.AF_UNIX).connect({agent:?}))\n\
         attempt('pair', lambda: (lambda p: (p[0].send(b'x'), p[1].recv(1)))(socket.socketpair()))\n",
        agent = agent.to_str().unwrap(),
        tcp = tcp.local_addr().unwrap().port(),
        udp = udp.local_addr().unwrap().port(),
    );
    ((tcp, udp, unix), script)
}

fn python() -> Option<&'static str> {
    let found = ["/usr/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    if found.is_none() {
        eprintln!("skipped: no /usr/bin/python3");
    }
    found
}

#[tokio::test]
async fn network_all_reaches_the_hosts_loopback_by_tcp_and_udp_and_resolves_names() {
    if !sandbox_available() {
        return;
    }
    let Some(python) = python() else { return };
    let h = home();
    let ((tcp, udp, _unix), script) = network_probe(&h);
    tcp.set_nonblocking(true).unwrap();
    udp.set_nonblocking(true).unwrap();
    let out = run(h.job(
        python,
        &["-c", &script],
        h.spec(Network::All),
        limits(OnCap::Truncate),
    ))
    .await;
    assert_eq!(
        text(&out.stdout),
        "tcp ok\nudp ok\ndns ok\nunix refused 1\npair ok\n",
        "{}",
        text(&out.stderr)
    );
    // What was sent arrived in the host's namespace.
    let (mut conn, _) = tcp.accept().unwrap();
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut conn, &mut got).unwrap();
    assert_eq!(got, b"hi");
    let mut buf = [0u8; 8];
    let (n, _) = udp.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"hi");
    // The resolver's files are in the view.
    let out = h
        .sh(
            "cat /etc/hosts /etc/resolv.conf /etc/nsswitch.conf >/dev/null && ls /etc/ssl/certs | head -1",
            h.spec(Network::All),
        )
        .await;
    assert_eq!(out.exit_code, Some(0), "{}", text(&out.stderr));
}

#[tokio::test]
async fn network_none_refuses_tcp_udp_and_reaches_no_listener() {
    if !sandbox_available() {
        return;
    }
    let Some(python) = python() else { return };
    let h = home();
    let ((tcp, udp, _unix), script) = network_probe(&h);
    tcp.set_nonblocking(true).unwrap();
    udp.set_nonblocking(true).unwrap();
    let out = run(h.job(
        python,
        &["-c", &script],
        h.spec(Network::None),
        limits(OnCap::Truncate),
    ))
    .await;
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{stdout}{}", text(&out.stderr));
    assert!(lines[0].starts_with("tcp refused"), "{stdout}");
    // In a private network namespace (NET-1) the datagram goes to the command's own loopback,
    // where nothing listens: sent, and never received below.
    let loopback = out.enforcement.contains("a private loopback network");
    assert!(
        lines[1].starts_with("udp refused") || (loopback && lines[1] == "udp ok"),
        "{stdout}"
    );
    assert_eq!(&lines[3..], ["unix refused 1", "pair ok"], "{stdout}");
    // Nothing arrived.
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(tcp.accept().is_err());
    assert!(udp.recv_from(&mut [0u8; 8]).is_err());
}

/// Every test above also passes as an unprivileged user: when the suite runs as root, this
/// re-runs the whole binary as uid 65534; in that run it does nothing.
#[test]
fn every_test_also_holds_unprivileged() {
    const NESTED: &str = "EXEC_RUN_COMMAND_UNPRIVILEGED_RUN";
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
