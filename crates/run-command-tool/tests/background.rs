//! `background_command` with real processes (BG-1…BG-9, RC-15): start at once, keyword
//! reports while the command runs on, the end, cancel, the timeout, the limit, the origin
//! rule, groups, the decision model, masking, the account switch. Every test checks that no
//! process survived and no log file was left. (The monitor's timing rules are pinned with a
//! controllable clock in module `monitor`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use common::{Fixture, Scripted, fixture};
use run_command_tool::background::{
    BackgroundArgs, BackgroundConfig, BackgroundTasks, Check, DecisionModel, Delivery, Event,
    EventStream, Launch, Origin, OriginState, Report,
};
use run_command_tool::{DenyAllAsker, Mode, Policy, RunCommandOptions, RunCommandState, Status};
use toolscope::{CallContext, ErrorCode};

struct Bench {
    fx: Fixture,
    logs: PathBuf,
    tasks: BackgroundTasks,
    events: EventStream,
    policy: Policy,
    state: Arc<RunCommandState>,
}

fn bench(config: impl FnOnce(&mut BackgroundConfig)) -> Bench {
    let fx = fixture();
    // Inside the home, which the sandbox reads: only the library's own hiding keeps them private.
    let logs = fx.home.join("state/sessions/s1/background");
    let mut c = BackgroundConfig::new(&logs);
    config(&mut c);
    let (tasks, events) = BackgroundTasks::new(c);
    Bench {
        fx,
        logs,
        tasks,
        events,
        policy: Policy::load(Mode::Auto, None).unwrap(),
        state: Arc::default(),
    }
}

fn origin(task: &str) -> Origin {
    Origin {
        task: task.into(),
        turn: "t1".into(),
    }
}

impl Bench {
    fn launch(&self, origin: Origin, state: OriginState) -> Launch<'_> {
        Launch {
            workdir: Arc::new(fsguard::RootLease::acquire(&self.fx.proj).unwrap()),
            policy: &self.policy,
            asker: &DenyAllAsker,
            state: Arc::clone(&self.state),
            options: RunCommandOptions::for_home(&self.fx.home),
            time_limit: None,
            origin,
            origin_state: state,
            stop_when: None,
        }
    }

    async fn start_sh(&self, script: &str, o: Origin, s: OriginState) -> String {
        let (ctx, _c) = CallContext::standalone();
        let started = self
            .tasks
            .start(
                BackgroundArgs::new(["sh", "-c", script]),
                self.launch(o, s),
                &ctx,
            )
            .await
            .unwrap();
        assert!(started.executed, "{started:?}");
        started.task_id.unwrap()
    }

    /// The next event within `secs`.
    async fn next(&mut self, secs: u64) -> Event {
        tokio::time::timeout(Duration::from_secs(secs), self.events.next())
            .await
            .expect("an event in time")
            .expect("the stream is open")
    }

    /// Events until `task_id` finished (inclusive).
    async fn until_finished(&mut self, task_id: &str, secs: u64) -> Vec<Event> {
        let mut seen = Vec::new();
        loop {
            let e = self.next(secs).await;
            let done = matches!(&e, Event::Finished { task_id: t, .. } if t == task_id);
            seen.push(e);
            if done {
                return seen;
            }
        }
    }

    fn logs_left(&self) -> Vec<PathBuf> {
        match std::fs::read_dir(&self.logs) {
            Ok(rd) => rd.flatten().map(|e| e.path()).collect(),
            Err(_) => Vec::new(),
        }
    }
}

fn sandbox() -> bool {
    testkit::require(&[testkit::Capability::Landlock, testkit::Capability::Seccomp])
}

/// Waits (up to 2 s) until at least `n` processes carry `marker`.
async fn wait_alive(marker: &str, n: usize) {
    for _ in 0..100 {
        if testkit::alive_with(marker).len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn finished(events: &[Event]) -> &run_command_tool::background::Final {
    events
        .iter()
        .find_map(|e| match e {
            Event::Finished { outcome, .. } => Some(outcome),
            _ => None,
        })
        .unwrap()
}

fn reports(events: &[Event]) -> Vec<&Report> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Report { report, .. } => Some(report),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_task_answers_at_once_reports_a_keyword_while_it_runs_and_reports_its_end() {
    if !sandbox() {
        return;
    }
    let mut b = bench(|_| {});
    let marker = testkit::marker();
    let script = format!(
        "echo building; echo 'error: the build broke'; sleep {marker}; echo still-going; \
         sleep 1; echo done"
    );
    let script = script.replace(&marker, "2.5");
    let (ctx, _c) = CallContext::standalone();
    let started = b
        .tasks
        .start(
            BackgroundArgs::new(["sh", "-c", &script]),
            b.launch(origin("o1"), OriginState::Running),
            &ctx,
        )
        .await
        .unwrap();
    let id = started.task_id.clone().unwrap();
    let log = PathBuf::from(started.log_path.clone().unwrap());
    assert!(log.starts_with(&b.logs), "{log:?}");
    assert!(
        started.message.contains("read the tail"),
        "{}",
        started.message
    );
    assert!(matches!(b.next(5).await, Event::Started { .. }));
    // The log fills while it runs.
    let mut content = String::new();
    for _ in 0..50 {
        content = std::fs::read_to_string(&log).unwrap_or_default();
        if content.contains("error: the build broke") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        content.contains("building\nerror: the build broke\n"),
        "{content:?}"
    );
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&log).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let events = b.until_finished(&id, 20).await;
    let r = reports(&events);
    assert_eq!(r.len(), 1, "{events:?}");
    assert_eq!(r[0].keyword, "error");
    assert!(r[0].line.contains("the build broke"));
    assert!(r[0].output.contains("building"), "{:?}", r[0].output);
    assert_eq!(r[0].check, Check::None);
    // The report came while it ran on: the end's output is after it.
    let end = finished(&events);
    assert_eq!((end.status, end.exit_code), (Some(Status::Exited), Some(0)));
    assert!(
        end.output.ends_with("still-going\ndone\n"),
        "{:?}",
        end.output
    );
    for e in &events {
        if let Event::Report { delivery, .. } | Event::Finished { delivery, .. } = e {
            assert_eq!(*delivery, Delivery::IntoOrigin);
        }
    }
    assert!(!log.exists(), "BG-6: the log goes when the task ends");
    assert!(b.logs_left().is_empty());
}

#[tokio::test]
async fn cancel_stops_the_whole_tree_and_says_cancelled() {
    if !sandbox() {
        return;
    }
    let mut b = bench(|_| {});
    let marker = testkit::marker();
    let id = b
        .start_sh(
            &format!("sleep {marker} & sleep {marker}; echo never"),
            origin("o1"),
            OriginState::Running,
        )
        .await;
    wait_alive(&marker, 2).await;
    assert!(testkit::alive_with(&marker).len() >= 2);
    let info = b.tasks.cancel(&id).await.unwrap();
    assert_eq!(info.state, run_command_tool::background::TaskState::Ended);
    assert!(testkit::alive_with(&marker).is_empty(), "no survivors");
    let events = b.until_finished(&id, 5).await;
    let end = finished(&events);
    assert_eq!(end.status, Some(Status::Cancelled));
    assert!(!end.output.contains("never"));
    assert!(b.logs_left().is_empty());
    let unknown = b.tasks.cancel("bg-999").await.unwrap_err();
    assert_eq!(unknown.code(), ErrorCode::BackgroundUnknownTask);
    assert!(unknown.message().contains(&id), "{}", unknown.message());
}

#[tokio::test]
async fn the_time_limit_stops_the_tree_and_reports_the_timeout_with_the_tail() {
    if !sandbox() {
        return;
    }
    let mut b = bench(|_| {});
    let marker = testkit::marker();
    let (ctx, _c) = CallContext::standalone();
    let mut launch = b.launch(origin("o1"), OriginState::Running);
    launch.time_limit = Some(Duration::from_millis(1500));
    // 40 KiB of output, then a wait: the final report keeps the last 31 KiB.
    let script = format!("seq 1 8000; sleep {marker} & sleep {marker}");
    let started = b
        .tasks
        .start(BackgroundArgs::new(["sh", "-c", &script]), launch, &ctx)
        .await
        .unwrap();
    let id = started.task_id.unwrap();
    let events = b.until_finished(&id, 20).await;
    let end = finished(&events);
    assert_eq!(end.status, Some(Status::TimedOut));
    assert!(
        end.message.as_deref().unwrap().contains("timeout_min"),
        "{end:?}"
    );
    assert!(
        end.output.len() <= 31 * 1024 && end.output.len() > 30 * 1024,
        "{}",
        end.output.len()
    );
    assert!(end.output.ends_with("7999\n8000\n"));
    assert!(end.truncated);
    assert!(testkit::alive_with(&marker).is_empty(), "no survivors");
    assert!(b.logs_left().is_empty());
}

#[tokio::test]
async fn the_limit_refuses_the_next_start_naming_the_running_tasks() {
    if !sandbox() {
        return;
    }
    let others = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&others);
    let b = bench(|c| {
        c.max_tasks = 2;
        c.others = Some(Arc::new(move || {
            counted.load(std::sync::atomic::Ordering::SeqCst)
        }));
    });
    let marker = testkit::marker();
    let first = b
        .start_sh(
            &format!("sleep {marker}"),
            origin("o1"),
            OriginState::Running,
        )
        .await;
    // A background sub-agent of the host takes the second place (BG-8, shared).
    others.store(1, std::sync::atomic::Ordering::SeqCst);
    let (ctx, _c) = CallContext::standalone();
    let refused = b
        .tasks
        .start(
            BackgroundArgs::new(["sleep", &marker]),
            b.launch(origin("o1"), OriginState::Running),
            &ctx,
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code(), ErrorCode::BackgroundLimit);
    assert!(refused.message().contains(&first), "{}", refused.message());
    assert!(
        refused.message().contains("1 other background job"),
        "{}",
        refused.message()
    );
    others.store(0, std::sync::atomic::Ordering::SeqCst);
    let second = b
        .start_sh(
            &format!("sleep {marker}"),
            origin("o1"),
            OriginState::Running,
        )
        .await;
    assert_eq!(b.tasks.running(), 2);
    b.tasks.cancel(&first).await.unwrap();
    b.tasks.cancel(&second).await.unwrap();
    assert!(testkit::alive_with(&marker).is_empty());
    assert!(b.logs_left().is_empty());
}

#[tokio::test]
async fn without_an_event_stream_nothing_starts() {
    let b = bench(|_| {});
    let Bench { tasks, events, .. } = b;
    drop(events);
    let fx = fixture();
    let policy = Policy::load(Mode::Auto, None).unwrap();
    let (ctx, _c) = CallContext::standalone();
    let launch = Launch {
        workdir: Arc::new(fsguard::RootLease::acquire(&fx.proj).unwrap()),
        policy: &policy,
        asker: &DenyAllAsker,
        state: Arc::default(),
        options: RunCommandOptions::for_home(&fx.home),
        time_limit: None,
        origin: origin("o1"),
        origin_state: OriginState::Running,
        stop_when: None,
    };
    let e = tasks
        .start(BackgroundArgs::new(["true"]), launch, &ctx)
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::BackgroundNoDelivery);
    assert!(e.message().contains("agent-exec mcp"), "{}", e.message());
}

#[tokio::test]
async fn a_watcher_run_command_refuses_starts_here() {
    if !sandbox() {
        return;
    }
    let mut b = bench(|_| {});
    let refused = common::call(
        common::args(&["sh", "-c", "echo serving --watch"]),
        &b.fx.proj,
        &b.fx.home,
        Mode::Auto,
        &DenyAllAsker,
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code(), ErrorCode::RunCommandWatcher);
    let id = b
        .start_sh("echo serving --watch", origin("o1"), OriginState::Running)
        .await;
    let events = b.until_finished(&id, 10).await;
    assert!(finished(&events).output.contains("serving --watch"));
    assert!(b.logs_left().is_empty());
}

#[tokio::test]
async fn the_gates_and_the_rules_of_run_command_apply() {
    let mut b = bench(|_| {});
    b.policy = Policy::load(Mode::Safe, None).unwrap();
    let (ctx, _c) = CallContext::standalone();
    // Not on the allowlist, safe mode, nobody to ask: not executed, no task, no log.
    let out = b
        .tasks
        .start(
            BackgroundArgs::new(["touch", "made"]),
            b.launch(origin("o1"), OriginState::Running),
            &ctx,
        )
        .await
        .unwrap();
    assert!(!out.executed && out.task_id.is_none(), "{out:?}");
    assert!(!b.fx.proj.join("made").exists());
    // A refused decision is the same error as run_command's.
    let e = b
        .tasks
        .start(
            BackgroundArgs::new(["cd", "/"]),
            b.launch(origin("o1"), OriginState::Running),
            &ctx,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::RunCommandCd);
    assert!(b.logs_left().is_empty());
    assert!(
        b.events.try_next().is_none(),
        "nothing started, nothing said"
    );
    // With a yes, it runs sandboxed: the private home stays unreadable.
    let yes = Scripted::yes();
    let mut launch = b.launch(origin("o1"), OriginState::Running);
    launch.asker = &yes;
    let started = b
        .tasks
        .start(
            BackgroundArgs::new(["sh", "-c", "touch made; cat ../.ssh/id_rsa"]),
            launch,
            &ctx,
        )
        .await
        .unwrap();
    let id = started.task_id.unwrap();
    let events = b.until_finished(&id, 10).await;
    assert!(b.fx.proj.join("made").exists());
    let end = finished(&events);
    assert!(!end.output.contains("PLANTED-SSH-SECRET"), "{end:?}");
    assert_ne!(end.exit_code, Some(0));
    assert!(b.logs_left().is_empty());
}

#[tokio::test]
async fn secrets_are_masked_in_reports_the_end_and_the_log() {
    if !sandbox() {
        return;
    }
    let mut b = bench(|_| {});
    let token = format!("ghp_{}", "A1b2C3d4E5".repeat(4).get(..36).unwrap());
    let script = format!(
        "echo \"error: token {token} rejected\"; sleep 2.5; echo '-----BEGIN RSA PRIVATE KEY-----'; \
         echo MIIEpAIBAAKCAQEAsecretbody; echo '-----END RSA PRIVATE KEY-----'; sleep 0.5"
    );
    let (ctx, _c) = CallContext::standalone();
    let started = b
        .tasks
        .start(
            {
                let mut a = BackgroundArgs::new(["sh", "-c", &script]);
                a.objective = Some(format!("deploy with {token}"));
                a.next = Some(format!("then use {token}"));
                a
            },
            b.launch(origin("o1"), OriginState::Running),
            &ctx,
        )
        .await
        .unwrap();
    let id = started.task_id.unwrap();
    let log = PathBuf::from(started.log_path.unwrap());
    let mut logged = String::new();
    let events = {
        let mut seen = Vec::new();
        loop {
            if let Ok(text) = std::fs::read_to_string(&log) {
                logged = text;
            }
            let e = b.next(10).await;
            let done = matches!(&e, Event::Finished { task_id, .. } if *task_id == id);
            seen.push(e);
            if done {
                break seen;
            }
        }
    };
    let listed = serde_json::to_string(&b.tasks.list()).unwrap();
    assert!(
        !listed.contains(&token) && listed.contains("deploy with"),
        "{listed}"
    );
    let all = serde_json::to_string(&events).unwrap();
    assert!(!all.contains(&token), "{all}");
    assert!(!all.contains("MIIEpAIBAAKCAQEAsecretbody"), "{all}");
    assert!(!logged.contains(&token), "{logged}");
    assert!(!logged.contains("MIIEpAIBAAKCAQEAsecretbody"), "{logged}");
    assert!(logged.contains("rejected"), "{logged}");
    assert!(b.logs_left().is_empty());
}

#[tokio::test]
async fn the_status_of_a_running_task_is_masked_and_its_logs_are_hidden_from_commands() {
    if !sandbox() {
        return;
    }
    let mut b = bench(|_| {});
    let token = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let id = b
        .start_sh(
            &format!("echo token={token}; sleep 30"),
            origin("o1"),
            OriginState::Running,
        )
        .await;
    let mut latest = String::new();
    for _ in 0..100 {
        latest = b.tasks.status(&id).unwrap().1;
        if latest.contains("token=") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    assert!(
        latest.contains("token=") && !latest.contains(token),
        "{latest}"
    );
    // Another task cannot list or read the session's logs (the library hides them itself).
    let peek = b
        .start_sh(
            &format!("ls {0}; cat {0}/*.log", b.logs.display()),
            origin("o1"),
            OriginState::Running,
        )
        .await;
    let events = b.until_finished(&peek, 10).await;
    let end = finished(&events);
    assert!(!end.output.contains("token"), "{end:?}");
    assert!(!end.output.contains(&format!("{id}.log")), "{end:?}");
    b.tasks.cancel(&id).await.unwrap();
    assert!(b.logs_left().is_empty());
}

/// Panics on every report.
struct Panicking;

impl DecisionModel for Panicking {
    fn worth_reporting<'a>(
        &'a self,
        _report: &'a Report,
        _last: Option<&'a Report>,
    ) -> Pin<Box<dyn Future<Output = Result<bool, String>> + Send + 'a>> {
        Box::pin(async { panic!("the model broke") })
    }
}

#[tokio::test]
async fn a_panicking_decision_model_is_a_failed_check_and_the_task_still_ends() {
    if !sandbox() {
        return;
    }
    let mut b = bench(|c| c.model = Some(Arc::new(Panicking)));
    let id = b
        .start_sh(
            "echo 'error: x'; sleep 2.5",
            origin("o1"),
            OriginState::Running,
        )
        .await;
    let events = b.until_finished(&id, 15).await;
    let r = reports(&events);
    assert_eq!(r.len(), 1, "{events:?}");
    assert!(matches!(&r[0].check, Check::Failed { reason } if reason.contains("panicked")));
    assert_eq!(b.tasks.running(), 0);
    assert!(b.logs_left().is_empty());
}

/// Drops reports whose line says "0 errors"; fails on lines with "model-breaks".
struct Model;

impl DecisionModel for Model {
    fn worth_reporting<'a>(
        &'a self,
        report: &'a Report,
        _last: Option<&'a Report>,
    ) -> Pin<Box<dyn Future<Output = Result<bool, String>> + Send + 'a>> {
        Box::pin(async move {
            if report.line.contains("model-breaks") {
                return Err("the model is offline".into());
            }
            Ok(!report.line.contains("0 errors"))
        })
    }
}

#[tokio::test]
async fn a_decision_model_drops_harmless_hits_and_a_failed_check_goes_out_unchecked() {
    if !sandbox() {
        return;
    }
    let mut b = bench(|c| c.model = Some(Arc::new(Model)));
    let harmless = b
        .start_sh(
            "echo 'compiled: 0 errors'; sleep 2.5",
            origin("o1"),
            OriginState::Running,
        )
        .await;
    let events = b.until_finished(&harmless, 15).await;
    assert!(reports(&events).is_empty(), "{events:?}");
    let broken = b
        .start_sh(
            "echo 'error model-breaks'; sleep 2.5",
            origin("o1"),
            OriginState::Running,
        )
        .await;
    let events = b.until_finished(&broken, 15).await;
    let r = reports(&events);
    assert_eq!(r.len(), 1, "{events:?}");
    assert!(matches!(&r[0].check, Check::Failed { reason } if reason.contains("offline")));
    let real = b
        .start_sh(
            "echo 'fatal: disk'; sleep 2.5",
            origin("o1"),
            OriginState::Running,
        )
        .await;
    let events = b.until_finished(&real, 15).await;
    assert_eq!(reports(&events)[0].check, Check::Passed);
    assert!(b.logs_left().is_empty());
}

#[tokio::test]
async fn legs_of_an_ended_origin_complete_as_one_group_with_objective_next_and_reports() {
    if !sandbox() {
        return;
    }
    let mut b = bench(|_| {});
    let o = origin("o-ended");
    let (ctx, _c) = CallContext::standalone();
    let mut ids = Vec::new();
    for (script, objective) in [
        ("echo 'FAIL: test_a'; sleep 2.5", "tests pass"),
        ("sleep 1; echo built", "the build works"),
    ] {
        let mut args = BackgroundArgs::new(["sh", "-c", script]);
        args.objective = Some(objective.into());
        args.next = Some("tell the user".into());
        let s = b
            .tasks
            .start(args, b.launch(o.clone(), OriginState::Ended), &ctx)
            .await
            .unwrap();
        ids.push(s.task_id.unwrap());
    }
    let mut group = None;
    for _ in 0..10 {
        match b.next(15).await {
            Event::GroupCompleted { origin, legs } => {
                group = Some((origin, legs));
                break;
            }
            Event::Report { delivery, .. } | Event::Finished { delivery, .. } => {
                assert_eq!(delivery, Delivery::Held);
            }
            Event::Started { .. } => {}
        }
    }
    let (origin, legs) = group.expect("one group completion");
    assert_eq!(origin, o);
    assert_eq!(legs.len(), 2);
    assert_eq!(legs[0].task_id, ids[0]);
    assert_eq!(legs[0].objective.as_deref(), Some("tests pass"));
    assert_eq!(legs[0].next.as_deref(), Some("tell the user"));
    assert_eq!(legs[0].reports.len(), 1);
    assert_eq!(legs[0].reports[0].keyword, "fail");
    assert!(legs[1].outcome.output.contains("built"));
    assert!(b.events.try_next().is_none(), "exactly one completion");
    assert!(b.logs_left().is_empty());
}

#[tokio::test]
async fn a_running_origin_gets_its_legs_events_and_stopping_it_stops_its_legs_only() {
    if !sandbox() {
        return;
    }
    let mut b = bench(|_| {});
    let marker = testkit::marker();
    let quick = b
        .start_sh("echo ok", origin("o-run"), OriginState::Running)
        .await;
    let events = b.until_finished(&quick, 10).await;
    assert!(events.iter().all(|e| !matches!(
        e,
        Event::Finished {
            delivery: Delivery::Held,
            ..
        }
    )));
    // Everything went into the running origin: its end raises nothing.
    b.tasks.origin_ended("o-run");
    let a = b
        .start_sh(
            &format!("sleep {marker}"),
            origin("o-stop"),
            OriginState::Running,
        )
        .await;
    let c = b
        .start_sh(
            &format!("sleep {marker}"),
            origin("o-stop"),
            OriginState::Running,
        )
        .await;
    let marker2 = testkit::marker();
    let other = b
        .start_sh(
            &format!("sleep {marker2}"),
            origin("o-other"),
            OriginState::Running,
        )
        .await;
    wait_alive(&marker, 2).await;
    wait_alive(&marker2, 1).await;
    b.tasks.stop_origin("o-stop").await;
    assert!(
        testkit::alive_with(&marker).is_empty(),
        "its legs are stopped"
    );
    assert!(
        !testkit::alive_with(&marker2).is_empty(),
        "the other origin's leg runs on"
    );
    let (info, _) = b.tasks.status(&other).unwrap();
    assert_eq!(info.state, run_command_tool::background::TaskState::Running);
    for id in [&a, &c] {
        let (info, _) = b.tasks.status(id).unwrap();
        assert_eq!(info.state, run_command_tool::background::TaskState::Ended);
    }
    b.tasks.shutdown(toolscope::CancelReason::Requested).await;
    assert!(testkit::alive_with(&marker2).is_empty());
    assert!(b.logs_left().is_empty());
    let mut saw_group = false;
    while let Some(e) = b.events.try_next() {
        saw_group |= matches!(e, Event::GroupCompleted { .. });
    }
    assert!(!saw_group, "no origin ended with held events");
}

#[tokio::test]
async fn an_account_switch_stops_every_task_before_the_next_account_starts() {
    if !sandbox() {
        return;
    }
    let b = bench(|_| {});
    let accounts = toolscope::Accounts::new("alice".into());
    let (ctx, _c) = CallContext::outliving("call-1", accounts.current());
    let marker = testkit::marker();
    let started = b
        .tasks
        .start(
            BackgroundArgs::new(["sh", "-c", &format!("sleep {marker} & sleep {marker}")]),
            b.launch(origin("o1"), OriginState::Running),
            &ctx,
        )
        .await
        .unwrap();
    let id = started.task_id.unwrap();
    wait_alive(&marker, 2).await;
    tokio::time::timeout(Duration::from_secs(10), accounts.switch("bob".into()))
        .await
        .expect("the switch completes once the task is stopped");
    assert!(
        testkit::alive_with(&marker).is_empty(),
        "no survivors at the switch"
    );
    let logs = b.logs.clone();
    let mut events = b.events;
    let mut end = None;
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_secs(5), events.next()).await {
        if let Event::Finished {
            task_id, outcome, ..
        } = e
        {
            assert_eq!(task_id, id);
            end = Some(outcome);
            break;
        }
    }
    assert_eq!(end.unwrap().status, Some(Status::Cancelled));
    assert!(
        std::fs::read_dir(&logs).unwrap().next().is_none(),
        "no log left"
    );
}

#[test]
fn status_of_an_unknown_task_names_the_known_ones() {
    let b = bench(|_| {});
    let e = b.tasks.status("bg-1").unwrap_err();
    assert_eq!(e.code(), ErrorCode::BackgroundUnknownTask);
    assert!(e.message().contains("none"), "{}", e.message());
    let _ = Path::new("");
}

/// Every test above also passes as an unprivileged user: when the suite runs as root, this
/// re-runs the whole binary as uid 65534; in that run it does nothing.
#[test]
fn every_test_also_holds_unprivileged() {
    const NESTED: &str = "RUN_COMMAND_BACKGROUND_UNPRIVILEGED_RUN";
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

#[tokio::test]
async fn what_a_task_made_that_host_programs_obey_is_moved_aside_and_said_at_its_end() {
    if !sandbox() {
        return;
    }
    let mut b = bench(|_| {});
    let id = b
        .start_sh(
            "git init -q n && git -C n config core.fsmonitor 'touch /tmp/x' && \
             printf '#!/bin/sh\\n' > run.sh && chmod +x run.sh",
            origin("o1"),
            OriginState::Running,
        )
        .await;
    let events = b.until_finished(&id, 30).await;
    let end = finished(&events);
    assert_eq!(end.status, Some(Status::Exited), "{end:?}");
    assert!(
        end.git
            .quarantined
            .iter()
            .any(|q| q.path.ends_with("n/.git/config") && q.moved_to.is_some()),
        "{end:?}"
    );
    assert!(
        end.executable_changes.iter().any(|p| p.ends_with("run.sh")),
        "{end:?}"
    );
}
