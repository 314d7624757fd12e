//! One `command` call through `exec::run` for the private-world suites (`private_world.rs`,
//! `system_set.rs`): a scope and a temp dir in a fresh directory, the `command` spec, and the
//! survivor check every call makes (invariant 4).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use exec::{Job, Limits, OnCap, Outcome, SandboxSpec, WorkDir};
use fsguard::{RelPath, RootLease};
use toolscope::CallContext;

/// A scope and a temp dir for calls, beside each other in a fresh directory.
pub struct Call {
    pub base: tempfile::TempDir,
    pub scope: PathBuf,
    pub temp: PathBuf,
}

impl Call {
    /// A fresh directory named `prefix…` holding `scope/` and `tmp/`.
    pub fn new(prefix: &str) -> Call {
        let base = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
        let root = base.path().canonicalize().unwrap();
        let (scope, temp) = (root.join("scope"), root.join("tmp"));
        for dir in [&scope, &temp] {
            std::fs::create_dir_all(dir).unwrap();
        }
        Call { base, scope, temp }
    }

    /// Runs `script` with `/bin/sh -c` under the `command` spec; asserts it did not time out
    /// and no process survived.
    pub async fn sh(&self, script: &str) -> Outcome {
        let (ctx, _cancel) = CallContext::standalone();
        let out = exec::run(self.sh_job(script), &ctx).await.unwrap();
        assert_ne!(
            out.end,
            exec::End::TimedOut,
            "the call timed out: {}",
            show(&out)
        );
        let survivors = processes_in(self.base.path());
        assert!(survivors.is_empty(), "processes survived: {survivors:?}");
        out
    }

    /// The job [`Call::sh`] runs.
    pub fn sh_job(&self, script: &str) -> Job {
        Job {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            workdir: WorkDir {
                lease: Arc::new(RootLease::acquire(&self.scope).unwrap()),
                rel: RelPath::root(),
            },
            env: vec![
                ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
                ("HOME".into(), self.temp.clone().into()),
                ("TMPDIR".into(), self.temp.clone().into()),
                ("LC_ALL".into(), "C".into()),
            ],
            sandbox: SandboxSpec::for_command(
                &RootLease::acquire(&self.scope).unwrap(),
                &RootLease::acquire(&self.temp).unwrap(),
                vec![],
            )
            .unwrap(),
            limits: Limits {
                timeout: Duration::from_secs(60),
                stdout_cap: 256 * 1024,
                stderr_cap: 256 * 1024,
                on_cap: OnCap::Truncate,
            },
            merge_stderr: false,
        }
    }

    /// Writes `script` into the scope and runs it with python3.
    pub async fn python(&self, script: &str) -> Outcome {
        std::fs::write(self.scope.join("world.py"), script).unwrap();
        self.sh("/usr/bin/python3 world.py").await
    }
}

/// PIDs of processes whose working directory is beneath `base`.
pub fn processes_in(base: &Path) -> Vec<u32> {
    let base = base.canonicalize().unwrap();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if std::fs::read_link(entry.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(&base)) {
            found.push(pid);
        }
    }
    found
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An outcome as text, for assertion messages.
pub fn show(out: &Outcome) -> String {
    format!(
        "exit {:?}, signal {:?}\n--- stdout\n{}--- stderr\n{}--- {}",
        out.exit_code,
        out.signal,
        text(&out.stdout),
        text(&out.stderr),
        out.enforcement
    )
}

/// The line `cargo xtask matrix` counts for a test that its capability level cannot give and
/// that ended with the documented refusal instead.
pub const REFUSED_MARK: &str = "refused as expected:";

/// Why this capability level refuses every shell (`AGENT_EXEC_SANDBOX_UNAVAILABLE`): the
/// sandbox's own rule (`linux_sandbox::Availability::shell_refusal`) for the launch `exec`
/// uses; `None` where shells run.
pub fn shell_refusal() -> Option<String> {
    linux_sandbox::probe().shell_refusal(exec::linux::launch())
}

/// For a test whose calls are shells: where this level refuses them, runs one, asserts it is
/// refused with `AGENT_EXEC_SANDBOX_UNAVAILABLE` and the documented reason, prints
/// [`REFUSED_MARK`] and returns true (the caller returns). Nothing is skipped silently: the
/// refusal itself is what the test checks there.
pub async fn shell_refused_here(test: &str) -> bool {
    let Some(reason) = shell_refusal() else {
        return false;
    };
    let call = Call::new("agent-exec-refused");
    let (ctx, _cancel) = CallContext::standalone();
    match exec::run(call.sh_job("echo ran"), &ctx).await {
        Err(exec::ExecError::SandboxUnavailable(message)) => {
            assert!(message.contains(&reason), "{message}\nexpected: {reason}");
            eprintln!("{REFUSED_MARK} {test}: {message}");
        }
        other => panic!("this level should refuse a shell ({reason}), but: {other:?}"),
    }
    assert!(processes_in(call.base.path()).is_empty());
    true
}

/// Whether a shell here may make unix sockets (`Enforcement::unix_sockets`): Landlock's
/// abstract-socket scope (ABI 6) in a root of the grants, which every shell that runs has.
/// Below it `socket(AF_UNIX)` is refused and the report says "unix sockets refused".
pub fn unix_sockets_here() -> bool {
    linux_sandbox::probe().landlock_abi().unwrap_or(0) >= 6
}
