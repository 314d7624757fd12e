//! Test harness: unique work and outside directories, a `command`-like policy, running a
//! program under a prepared sandbox, snapshots that prove nothing changed outside, and the
//! check that no sandboxed process survived.

// Test helpers: a panic is a test failure with a backtrace (clippy.toml exempts only #[test] fns).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use linux_sandbox::{Access, Policy, PreparedSandbox};

/// Env var the unprivileged re-run sets, so it does not recurse.
pub const UNPRIVILEGED_ENV: &str = "LINUX_SANDBOX_TEST_UNPRIVILEGED";
/// Env var every sandboxed child carries, to find survivors.
const MARKER_ENV: &str = "LINUX_SANDBOX_TEST_MARKER";

/// The executables the suite uses (absolute, never looked up on PATH).
pub const SH: &str = "/bin/sh";
pub const PYTHON: &str = "/usr/bin/python3";

/// Whether this kernel can sandbox; when not, it says why and the caller returns (or, where
/// `AGENT_EXEC_REQUIRE` names what is missing, the test fails).
pub use testkit::sandbox_available;

/// A scratch area: `work` is granted read-write, `outside` is not granted at all.
pub struct Scratch {
    _root: tempfile::TempDir,
    pub work: PathBuf,
    pub outside: PathBuf,
    marker: String,
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

impl Scratch {
    pub fn new() -> Scratch {
        let root = tempfile::Builder::new()
            .prefix("linux-sandbox-test")
            .tempdir()
            .unwrap();
        let work = root.path().join("work");
        let outside = root.path().join("outside");
        std::fs::create_dir(&work).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret"), "TOP-SECRET-7f3a\n").unwrap();
        let marker = format!(
            "{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        Scratch {
            _root: root,
            work,
            outside,
            marker,
        }
    }

    /// The `command`-tool-like policy of issue 4 (exec item 5) over this scratch's work dir.
    pub fn command_policy(&self) -> Policy {
        command_policy_without_work().allow(&self.work, Access::READ | Access::WRITE)
    }

    /// Runs `program args…` in `cwd` under `policy`; panics if the sandbox cannot be applied.
    pub fn run_in(&self, policy: &Policy, cwd: &Path, program: &str, args: &[&str]) -> Output {
        self.run_prepared(policy.prepare().unwrap(), cwd, program, args)
    }

    /// [`run_in`](Scratch::run_in) under a sandbox prepared already (what changes between
    /// `prepare` and the run is what the test is about).
    pub fn run_prepared(
        &self,
        sandbox: PreparedSandbox,
        cwd: &Path,
        program: &str,
        args: &[&str],
    ) -> Output {
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(cwd)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &self.work)
            .env("TMPDIR", &self.work)
            .env("LC_ALL", "C")
            .env(MARKER_ENV, &self.marker)
            .stdin(Stdio::null())
            .process_group(0);
        sandbox.install(&mut command);
        let output = command.output().unwrap();
        eprintln!(
            "$ {program} {args:?}\n  exit: {:?}\n  stdout: {}\n  stderr: {}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        self.assert_no_survivors();
        output
    }

    pub fn run(&self, policy: &Policy, program: &str, args: &[&str]) -> Output {
        self.run_in(policy, &self.work, program, args)
    }

    pub fn sh(&self, script: &str) -> Output {
        self.run(&self.command_policy(), SH, &["-c", script])
    }

    pub fn python(&self, code: &str) -> Output {
        self.run(&self.command_policy(), PYTHON, &["-c", code])
    }

    /// Every process that carries this scratch's marker has ended (CMD-7 [beyond]: no
    /// process started by a command survives). A process that left the group with `setsid`
    /// still carries the marker in its environment.
    pub fn assert_no_survivors(&self) {
        let needle = format!("{MARKER_ENV}={}", self.marker);
        let mut survivors = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
                continue;
            };
            if environ
                .split(|&b| b == 0)
                .any(|var| var == needle.as_bytes())
            {
                survivors.push(pid);
            }
        }
        assert!(
            survivors.is_empty(),
            "sandboxed processes survived: {survivors:?}"
        );
    }
}

/// System program and library directories (read + execute), shared data and the `/etc` files
/// programs need (read), the usual device files. All through `allow_system`, so every test
/// after the first runs on cached descriptors, as a long-lived host does.
pub fn command_policy_without_work() -> Policy {
    let mut policy = Policy::new();
    for dir in [
        "/bin",
        "/usr/bin",
        "/usr/local/bin",
        "/lib",
        "/lib64",
        "/usr/lib",
        "/usr/lib64",
        "/usr/libexec",
        "/usr/local/lib",
        "/usr/local/libexec",
    ] {
        policy = policy.allow_system(dir, Access::READ | Access::EXECUTE);
    }
    for path in [
        "/usr/share",
        "/usr/local/share",
        "/etc/ld.so.cache",
        "/etc/passwd",
        "/etc/group",
        "/etc/nsswitch.conf",
        "/etc/localtime",
        "/etc/alternatives",
        "/etc/ssl/certs",
        "/dev/urandom",
        "/dev/zero",
    ] {
        policy = policy.allow_system(path, Access::READ);
    }
    policy.allow_system("/dev/null", Access::READ | Access::WRITE)
}

/// Names, contents and link counts of everything under `dir`, to prove nothing changed.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u64)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).unwrap().flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
                out.insert(path, (Vec::new(), meta.nlink()));
            } else if meta.is_file() {
                out.insert(path.clone(), (std::fs::read(&path).unwrap(), meta.nlink()));
            } else {
                out.insert(path, (b"<special>".to_vec(), meta.nlink()));
            }
        }
    }
    out
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The attempt failed (non-zero exit) and printed no sign of success.
pub fn assert_denied(output: &Output) {
    assert!(
        !output.status.success(),
        "attempt succeeded: {}{}",
        stdout(output),
        stderr(output)
    );
    assert!(
        !stdout(output).contains("ESCAPED"),
        "attempt reported success: {}",
        stdout(output)
    );
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}
