//! Fixtures shared by the run_command suites: a temp home with a project, a scripted asker,
//! and a helper that calls `run_command`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use run_command_tool::{
    Asker, Confirmation, Mode, Password, PasswordReply, Policy, Question, RunCommandArgs,
    RunCommandOptions, RunCommandOutput, RunCommandState,
};

/// A fake home with a project inside it, under a temp dir (plus `outside/` beside the home).
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
    pub proj: PathBuf,
    pub outside: PathBuf,
}

pub fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let home = base.join("home");
    let proj = home.join("proj");
    let outside = base.join("outside");
    for d in [&proj, &outside, &home.join(".ssh"), &home.join(".cache")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(home.join(".ssh/id_rsa"), "PLANTED-SSH-SECRET\n").unwrap();
    std::fs::write(home.join(".netrc"), "machine m password PLANTED-NETRC\n").unwrap();
    std::fs::write(home.join(".bashrc"), "# rc\n").unwrap();
    Fixture {
        dir,
        home,
        proj,
        outside,
    }
}

/// What a scripted password prompt answers.
#[derive(Clone, Debug)]
pub enum Reply {
    Given(String),
    Cancelled,
    CannotAsk,
}

/// An asker with scripted answers, counting the questions.
pub struct Scripted {
    pub confirm: Confirmation,
    pub passwords: Mutex<VecDeque<Reply>>,
    pub confirms: AtomicUsize,
    pub prompts: AtomicUsize,
    pub labels: Mutex<Vec<String>>,
}

impl Scripted {
    pub fn new(confirm: Confirmation, passwords: Vec<Reply>) -> Self {
        Scripted {
            confirm,
            passwords: Mutex::new(passwords.into()),
            confirms: AtomicUsize::new(0),
            prompts: AtomicUsize::new(0),
            labels: Mutex::new(Vec::new()),
        }
    }
    pub fn yes() -> Self {
        Scripted::new(Confirmation::Yes, Vec::new())
    }
}

impl Asker for Scripted {
    fn confirm<'a>(
        &'a self,
        q: &'a Question,
    ) -> Pin<Box<dyn Future<Output = Confirmation> + Send + 'a>> {
        self.confirms.fetch_add(1, Ordering::SeqCst);
        self.labels.lock().unwrap().push(q.label.clone());
        let c = self.confirm;
        Box::pin(async move { c })
    }

    fn password<'a>(
        &'a self,
        q: &'a Question,
    ) -> Pin<Box<dyn Future<Output = PasswordReply> + Send + 'a>> {
        self.prompts.fetch_add(1, Ordering::SeqCst);
        self.labels.lock().unwrap().push(q.label.clone());
        let next = self.passwords.lock().unwrap().pop_front();
        Box::pin(async move {
            match next {
                Some(Reply::Given(p)) => PasswordReply::Given(Password::new(p)),
                Some(Reply::Cancelled) => PasswordReply::Cancelled,
                Some(Reply::CannotAsk) | None => PasswordReply::CannotAsk,
            }
        })
    }
}

/// A suite's `every_test_also_holds_unprivileged` (`own`, its name): as root, runs every other
/// test of this binary again as uid 65534 and asserts they passed; otherwise nothing.
pub fn rerun_suite_unprivileged(own: &str) {
    if !testkit::is_root() {
        return;
    }
    let text = testkit::run_as_nobody(&["--skip", own], &[]);
    assert!(
        text.is_empty() || text.contains("test result: ok"),
        "{text}"
    );
}

/// Writes `text` to `path`, making its parent directories.
pub fn plant(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

pub fn args(argv: &[&str]) -> RunCommandArgs {
    RunCommandArgs::new(argv.iter().copied())
}

pub async fn call(
    args: RunCommandArgs,
    workdir: &Path,
    home: &Path,
    mode: Mode,
    asker: &dyn Asker,
) -> Result<RunCommandOutput, toolscope::ToolError> {
    let state = RunCommandState::default();
    call_with(args, workdir, home, mode, asker, &state, |_| {}).await
}

pub async fn call_with(
    args: RunCommandArgs,
    workdir: &Path,
    home: &Path,
    mode: Mode,
    asker: &dyn Asker,
    state: &RunCommandState,
    tweak: impl FnOnce(&mut RunCommandOptions),
) -> Result<RunCommandOutput, toolscope::ToolError> {
    let lease = Arc::new(fsguard::RootLease::acquire(workdir).unwrap());
    let policy = Policy::load(mode, None).unwrap();
    let mut options = RunCommandOptions::for_home(home);
    tweak(&mut options);
    let (ctx, _cancel) = toolscope::CallContext::standalone();
    run_command_tool::run_command(args, lease, &policy, asker, state, &options, &ctx).await
}
