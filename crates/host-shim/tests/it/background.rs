//! `background_command` through the library (issue 19): refused without a delivery target
//! (BG-7), started, followed with `background_status` and `read` of its `logPath` (BG-6),
//! cancelled with `background_cancel`; stopped by a revoked grant (TS-3) and by the session's
//! end; and `read` of any other path outside the workspace stays refused.

use std::sync::Arc;
use std::time::Duration;

use host_shim::background::Event;
use host_shim::{
    CallOptions, Capability, ErrorCode, Host, KeepMirror, Registry, RunCommandMode,
    RunCommandSetup, ToolName, run_command_policy,
};
use serde_json::{Value, json};

use crate::util::{Fixture, PLUGIN, assert_no_survivors, sandbox_available};

fn host(f: &Fixture) -> Host {
    drop(f.host());
    let policy = run_command_policy(None, Some(RunCommandMode::Auto)).unwrap();
    let registry = Registry::default().with_run_command(RunCommandSetup::new(
        policy,
        Arc::new(host_shim::DenyAllAsker),
    ));
    Host::with_registry(f.store(), "alice".into(), registry).unwrap()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn session(f: &Fixture, host: &Host) -> host_shim::Session {
    host.session(
        PLUGIN.parse().unwrap(),
        f.config("direct", &["read", "background_command"]),
    )
    .unwrap()
}

async fn call(
    s: &host_shim::Session,
    id: &str,
    tool: ToolName,
    args: Value,
) -> host_shim::CallAnswer {
    s.one_call(
        id,
        tool,
        args,
        &CallOptions::default(),
        KeepMirror::WhenNeeded,
        std::future::pending(),
    )
    .await
}

#[test]
fn without_a_delivery_target_background_command_is_refused() {
    let f = Fixture::new();
    let host = host(&f);
    let s = session(&f, &host);
    let answer = rt().block_on(call(
        &s,
        "c1",
        ToolName::BackgroundCommand,
        json!({"argv": ["sleep", "1"]}),
    ));
    let line = answer.to_line();
    assert_eq!(line["code"], "BACKGROUND_COMMAND_NO_DELIVERY", "{line}");
    assert!(line["message"].as_str().unwrap().contains("agent-exec mcp"));
    for tool in [ToolName::BackgroundStatus, ToolName::BackgroundCancel] {
        let args = if tool == ToolName::BackgroundCancel {
            json!({"taskId": "bg-1"})
        } else {
            json!({})
        };
        let line = rt().block_on(call(&s, "c2", tool, args)).to_line();
        assert_eq!(line["code"], "BACKGROUND_COMMAND_NO_DELIVERY", "{line}");
    }
}

#[test]
fn a_task_is_followed_through_status_and_its_log_and_cancelled_with_no_survivors() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let host = host(&f);
    let s = session(&f, &host);
    rt().block_on(async {
        let mut events = s.background_events(|_| {}).unwrap();
        assert!(s.background_events(|_| {}).is_err(), "one delivery target");
        let script = "echo first-line; echo 'error: not yet'; sleep 3600";
        let answer = call(
            &s,
            "c1",
            ToolName::BackgroundCommand,
            json!({"argv": ["sh", "-c", script], "objective": "watch it"}),
        )
        .await;
        let line = answer.to_line();
        assert!(answer.is_success(), "{line}");
        let id = line["taskId"].as_str().unwrap().to_owned();
        let log = line["logPath"].as_str().unwrap().to_owned();
        assert!(log.starts_with(f.state.to_str().unwrap()), "{log}");
        assert!(matches!(events.next().await, Some(Event::Started { .. })));

        // BG-6: read the log by the path returned, once the output is there.
        let mut content = String::new();
        for _ in 0..100 {
            let read = call(&s, "r", ToolName::Read, json!({"path": log}))
                .await
                .to_line();
            content = read["content"].as_str().unwrap_or_default().to_owned();
            if content.contains("error: not yet") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(content, "first-line\nerror: not yet\n");
        // Nothing else outside the workspace is readable that way.
        let state_file = f.state.join("state.json");
        let other = call(
            &s,
            "r2",
            ToolName::Read,
            json!({"path": state_file.to_str().unwrap()}),
        )
        .await
        .to_line();
        assert_eq!(other["ok"], false, "{other}");
        for other_spelling in [
            format!("{log}/"),
            log.replacen("/background/", "/background/./", 1),
        ] {
            let other = call(&s, "r5", ToolName::Read, json!({"path": other_spelling}))
                .await
                .to_line();
            assert_eq!(other["ok"], false, "only the exact logPath: {other}");
        }
        let sibling = format!("{}x", log);
        let other = call(&s, "r3", ToolName::Read, json!({"path": sibling}))
            .await
            .to_line();
        assert_eq!(other["ok"], false, "{other}");

        let status = call(&s, "s1", ToolName::BackgroundStatus, json!({"taskId": id}))
            .await
            .to_line();
        assert_eq!(status["tasks"][0]["state"], "running", "{status}");
        assert!(
            status["latestOutput"]
                .as_str()
                .unwrap()
                .contains("first-line")
        );
        let list = call(&s, "s2", ToolName::BackgroundStatus, json!({}))
            .await
            .to_line();
        assert_eq!(list["tasks"].as_array().unwrap().len(), 1, "{list}");

        let cancelled = call(&s, "x1", ToolName::BackgroundCancel, json!({"taskId": id}))
            .await
            .to_line();
        assert_eq!(cancelled["state"], "ended", "{cancelled}");
        assert_no_survivors(&f.folder);
        assert!(!std::path::Path::new(&log).exists());
        let gone = call(&s, "r4", ToolName::Read, json!({"path": log}))
            .await
            .to_line();
        assert_eq!(
            gone["ok"], false,
            "a log is unreadable once its task ended: {gone}"
        );
        let mut end = None;
        while let Ok(Some(e)) = tokio::time::timeout(Duration::from_secs(5), events.next()).await {
            if let Event::Finished { outcome, .. } = e {
                end = Some(outcome);
                break;
            }
        }
        let end = end.unwrap();
        assert_eq!(
            serde_json::to_value(end.status).unwrap(),
            json!("cancelled")
        );
        let bad = call(&s, "x2", ToolName::BackgroundCancel, json!({"taskId": 7}))
            .await
            .to_line();
        assert_eq!(bad["code"], ErrorCode::ExecArgumentsInvalid.as_str());
        s.end_background().await;
    });
}

#[test]
fn a_revoked_grant_stops_a_running_task_and_the_session_end_stops_the_rest() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let host = host(&f);
    let s = session(&f, &host);
    rt().block_on(async {
        let mut events = s.background_events(|_| {}).unwrap();
        let first = call(
            &s,
            "c1",
            ToolName::BackgroundCommand,
            json!({"argv": ["sleep", "3600"]}),
        )
        .await
        .to_line();
        let first_id = first["taskId"].as_str().unwrap().to_owned();
        host.update_grants(|g| {
            g.plugins
                .get_mut(&PLUGIN.parse().unwrap())
                .unwrap()
                .user_allowed
                .remove(&Capability::TerminalExec);
            Ok(())
        })
        .unwrap();
        let mut end = None;
        while let Ok(Some(e)) = tokio::time::timeout(Duration::from_secs(10), events.next()).await {
            if let Event::Finished {
                task_id, outcome, ..
            } = e
            {
                assert_eq!(task_id, first_id);
                end = Some(outcome);
                break;
            }
        }
        let end = end.expect("the revocation stops the task");
        assert!(
            end.error
                .as_deref()
                .unwrap_or("")
                .contains("AGENT_PERMISSION_DENIED"),
            "{end:?}"
        );
        assert_no_survivors(&f.folder);
        // Granted again: a new task, then the session's end stops it and removes its directory.
        host.update_grants(|g| {
            g.plugins
                .get_mut(&PLUGIN.parse().unwrap())
                .unwrap()
                .user_allowed
                .insert(Capability::TerminalExec);
            Ok(())
        })
        .unwrap();
        let second = call(
            &s,
            "c2",
            ToolName::BackgroundCommand,
            json!({"argv": ["sleep", "3600"]}),
        )
        .await
        .to_line();
        assert_eq!(second["executed"], true, "{second}");
        s.end_background().await;
        assert_no_survivors(&f.folder);
        let sessions = f.state.join("sessions");
        let left: Vec<_> = std::fs::read_dir(&sessions)
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{left:?}");
    });
}

#[test]
fn the_logs_of_a_host_that_died_are_swept_when_a_session_starts_its_events() {
    let f = Fixture::new();
    let host = host(&f);
    let sessions = f.state.join("sessions");
    // A dead host's session (its lock free), a live one (its lock held — in any PID
    // namespace, whatever its name says), and one being made (no lock file yet).
    let dead = sessions.join("1-1a2b-0");
    let live = sessions.join(format!("{}-1a2b-9", std::process::id()));
    let making = sessions.join("2-1a2b-0");
    for d in [&dead, &live, &making] {
        std::fs::create_dir_all(d.join("background")).unwrap();
        std::fs::write(d.join("background/bg-1.log"), "old output\n").unwrap();
    }
    std::fs::write(dead.join(".lock"), "").unwrap();
    let held = std::fs::File::create(live.join(".lock")).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let s = session(&f, &host);
    let _events = s.background_events(|_| {}).unwrap();
    assert!(!dead.exists(), "a dead host's logs go");
    assert!(
        live.join("background/bg-1.log").exists(),
        "a live session's stay"
    );
    assert!(
        making.join("background/bg-1.log").exists(),
        "one being made stays"
    );
    drop(held);
}

#[test]
fn background_command_runs_only_in_a_direct_workspace() {
    let f = Fixture::new();
    for kind in ["mounted", "app-private"] {
        let config = f.config(kind, &["background_command"]);
        let why = config.unrunnable(ToolName::BackgroundCommand).unwrap();
        assert_eq!(
            why.to_string(),
            format!("background_command needs a direct workspace, this one is {kind}")
        );
        assert_eq!(why.error().code(), ErrorCode::PermissionDenied);
    }
    let direct = f.config("direct", &["background_command"]);
    assert!(direct.unrunnable(ToolName::BackgroundCommand).is_none());
    assert!(direct.offers(ToolName::BackgroundStatus) && direct.offers(ToolName::BackgroundCancel));
    assert!(
        !f.config("direct", &["read"])
            .offers(ToolName::BackgroundStatus)
    );
}
