//! `run_command` through the library (issue 18): where it may run, the host's asker at its
//! gate, the typed success behind `CallAnswer::is_success`, and one state per session.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use host_shim::{
    Asker, CallOptions, Confirmation, Host, KeepMirror, PasswordReply, Question, Registry,
    RunCommandMode, RunCommandSetup, ToolName, run_command_policy,
};
use serde_json::json;

use crate::util::{Fixture, PLUGIN, assert_no_survivors, sandbox_available};

/// Answers every confirmation with `answer`, counting the questions; never gives a password.
struct Counting {
    answer: Confirmation,
    asked: AtomicUsize,
    labels: std::sync::Mutex<Vec<String>>,
}

impl Counting {
    fn new(answer: Confirmation) -> Arc<Counting> {
        Arc::new(Counting {
            answer,
            asked: AtomicUsize::new(0),
            labels: std::sync::Mutex::new(Vec::new()),
        })
    }
}

impl Asker for Counting {
    fn confirm<'a>(
        &'a self,
        q: &'a Question,
    ) -> Pin<Box<dyn Future<Output = Confirmation> + Send + 'a>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.labels.lock().unwrap().push(q.label.clone());
        Box::pin(async move { self.answer })
    }

    fn password<'a>(
        &'a self,
        _q: &'a Question,
    ) -> Pin<Box<dyn Future<Output = PasswordReply> + Send + 'a>> {
        Box::pin(async { PasswordReply::CannotAsk })
    }
}

fn host_with(f: &Fixture, asker: Arc<Counting>, mode: RunCommandMode) -> Host {
    // The fixture's grants (persisted), then a host on this registry that loads them.
    drop(f.host());
    let policy = run_command_policy(None, Some(mode)).unwrap();
    let registry = Registry::default().with_run_command(RunCommandSetup::new(policy, asker));
    Host::with_registry(f.store(), "alice".into(), registry).unwrap()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn run_command_runs_only_in_a_direct_workspace() {
    let f = Fixture::new();
    for (kind, ok) in [("direct", true), ("mounted", false), ("app-private", false)] {
        let config = f.config(kind, &["run_command"]);
        let why = config.unrunnable(ToolName::RunCommand);
        assert_eq!(why.is_none(), ok, "{kind}: {why:?}");
        if let Some(why) = why {
            assert_eq!(
                why.to_string(),
                format!("run_command needs a direct workspace, this one is {kind}")
            );
            let err = why.error();
            assert_eq!(err.code().as_str(), "AGENT_PERMISSION_DENIED");
            assert!(
                err.message().contains("workspace.kind \"direct\""),
                "{err:?}"
            );
        }
    }
    assert!(ToolName::RunCommand.is_exec());
    assert_eq!(
        ToolName::from_name("run_command"),
        Some(ToolName::RunCommand)
    );
}

#[test]
fn the_hosts_asker_answers_the_gate_and_the_typed_result_decides_success() {
    // Issue 18: a declined confirmation is a result (ok, not executed, not a success); a yes
    // runs it; a non-zero exit is a result that is not a success either.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let rt = rt();
    let call = |host: &Host, argv: serde_json::Value| {
        let session = host
            .session(
                PLUGIN.parse().unwrap(),
                f.config("direct", &["run_command"]),
            )
            .unwrap();
        rt.block_on(session.one_call(
            "c1",
            ToolName::RunCommand,
            json!({"argv": argv}),
            &CallOptions::default(),
            KeepMirror::WhenNeeded,
            std::future::pending(),
        ))
    };

    let no = Counting::new(Confirmation::No);
    let host = host_with(&f, Arc::clone(&no), RunCommandMode::Safe);
    let answer = call(&host, json!(["touch", "declined.txt"]));
    let line = answer.to_line();
    assert!(answer.is_ok() && !answer.is_success(), "{line}");
    assert_eq!(
        (&line["executed"], &line["status"]),
        (&json!(false), &json!("notExecuted"))
    );
    assert!(line["message"].as_str().unwrap().len() > 10, "{line}");
    assert_eq!(*no.labels.lock().unwrap(), ["touch declined.txt"]);
    assert!(!f.folder.join("declined.txt").exists());

    let yes = Counting::new(Confirmation::Yes);
    let host = host_with(&f, Arc::clone(&yes), RunCommandMode::Safe);
    let answer = call(&host, json!(["touch", "made.txt"]));
    assert!(answer.is_success(), "{}", answer.to_line());
    assert!(f.folder.join("made.txt").exists());
    // An allowlist hit asks nothing (RC-9).
    let answer = call(&host, json!(["ls"]));
    assert!(answer.is_success(), "{}", answer.to_line());
    assert_eq!(yes.asked.load(Ordering::SeqCst), 1);
    // A command that fails is a result, not a success.
    let answer = call(&host, json!(["sh", "-c", "exit 3"]));
    let line = answer.to_line();
    assert!(answer.is_ok() && !answer.is_success(), "{line}");
    assert_eq!(line["exitCode"], 3, "{line}");
    assert_no_survivors(&f.folder);
}

#[test]
fn the_default_registry_cannot_ask_so_nothing_gated_runs() {
    let f = Fixture::new();
    let session = f.session("direct", &["run_command"]);
    let answer = rt().block_on(session.one_call(
        "c1",
        ToolName::RunCommand,
        json!({"argv": ["touch", "x.txt"]}),
        &CallOptions::default(),
        KeepMirror::WhenNeeded,
        std::future::pending(),
    ));
    let line = answer.to_line();
    assert!(!answer.is_success(), "{line}");
    assert_eq!(line["executed"], false, "{line}");
    assert!(!f.folder.join("x.txt").exists());
}

#[test]
fn run_command_arguments_are_checked_with_the_run_command_codes() {
    let f = Fixture::new();
    let session = f.session("direct", &["run_command"]);
    for (args, code) in [
        (
            json!({"argv": ["ls"], "shell": true}),
            "RUN_COMMAND_ARGUMENTS_INVALID",
        ),
        (json!({"argv": "ls"}), "RUN_COMMAND_ARGUMENTS_INVALID"),
        (json!({"argv": ["cd", "/"]}), "RUN_COMMAND_CD"),
    ] {
        let answer = rt().block_on(session.one_call(
            "c1",
            ToolName::RunCommand,
            args.clone(),
            &CallOptions::default(),
            KeepMirror::WhenNeeded,
            std::future::pending(),
        ));
        let line = answer.to_line();
        assert_eq!(
            (&line["ok"], &line["code"]),
            (&json!(false), &json!(code)),
            "{args}: {line}"
        );
    }
}
