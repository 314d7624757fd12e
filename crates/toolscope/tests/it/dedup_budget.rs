//! TS-1 (callId dedup), TS-2 (32-call budget), TS-4 (scope required), callId rules.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::task::JoinSet;
use toolscope::{Accounts, ErrorCode, MAX_CALLS_PER_TURN, Tool, ToolScope};

use crate::common::{exec_tool, granted_authority, new_turn, revoke, within};

fn setup() -> (ToolScope, Arc<toolscope::MemoryAuthority>) {
    let authority = granted_authority();
    let accounts = Accounts::new("alice".into());
    (new_turn(&accounts, &authority), authority)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thousand_concurrent_duplicates_run_the_body_once_and_share_its_result() {
    // TS-1
    let (scope, _authority) = setup();
    let runs = Arc::new(AtomicUsize::new(0));
    let args = json!({"program": "wc", "args": ["-l", "a.txt"]});
    let mut tasks = JoinSet::new();
    for i in 0..1000u32 {
        let (scope, runs, args) = (scope.clone(), runs.clone(), args.clone());
        tasks.spawn(async move {
            scope
                .call("same-id", &exec_tool(), &args, |_ctx| async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    // Which caller led: every duplicate must report the same one.
                    Ok(json!({"leader": i}))
                })
                .await
        });
    }
    let outcomes: Vec<_> = tasks.join_all().await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(outcomes.len(), 1000);
    let first = outcomes[0].clone().expect("the call succeeds");
    assert!(outcomes.iter().all(|o| o.as_ref() == Ok(&first)));
    assert_eq!(scope.admitted(), 1, "duplicates cost no budget");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_hundred_concurrent_distinct_calls_exactly_32_run() {
    // TS-2
    let (scope, _authority) = setup();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for i in 0..100 {
        let (scope, runs) = (scope.clone(), runs.clone());
        tasks.spawn(async move {
            scope
                .call(
                    &format!("call-{i}"),
                    &exec_tool(),
                    &json!({}),
                    |_ctx| async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        Ok(json!(i))
                    },
                )
                .await
        });
    }
    let outcomes = tasks.join_all().await;
    let ok = outcomes.iter().filter(|o| o.is_ok()).count();
    let over_budget = outcomes
        .iter()
        .filter(|o| matches!(o, Err(e) if e.code() == ErrorCode::BudgetExhausted))
        .count();
    assert_eq!(runs.load(Ordering::SeqCst), MAX_CALLS_PER_TURN);
    assert_eq!((ok, over_budget), (32, 68));
    assert_eq!(scope.admitted(), 32);
}

#[tokio::test]
async fn the_33rd_call_runs_nothing_but_a_recorded_call_still_answers() {
    // TS-1, TS-2: dedup comes before the budget.
    let (scope, _authority) = setup();
    for i in 0..32 {
        let out = scope
            .call(&format!("c{i}"), &exec_tool(), &json!(i), |_| async move {
                Ok(json!(i))
            })
            .await;
        assert_eq!(out, Ok(json!(i)));
    }
    let ran = AtomicUsize::new(0);
    let err = scope
        .call("c32", &exec_tool(), &json!(32), |_| async {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok(Value::Null)
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::BudgetExhausted);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    let again = scope
        .call("c7", &exec_tool(), &json!(7), |_| async {
            unreachable!("recorded")
        })
        .await;
    assert_eq!(again, Ok(json!(7)));
}

#[tokio::test]
async fn same_call_id_with_different_arguments_or_tool_is_refused_and_runs_nothing() {
    // TS-1: a client bug, not a retry.
    let (scope, _authority) = setup();
    let first = scope
        .call("x", &exec_tool(), &json!({"a": 1, "b": 2}), |_| async {
            Ok(json!("one"))
        })
        .await;
    assert_eq!(first, Ok(json!("one")));
    // Key order does not make arguments different.
    let same = scope
        .call("x", &exec_tool(), &json!({"b": 2, "a": 1}), |_| async {
            unreachable!()
        })
        .await;
    assert_eq!(same, Ok(json!("one")));
    for (tool, args) in [
        (exec_tool(), json!({"a": 1, "b": 3})),
        (Tool::new("read"), json!({"a": 1, "b": 2})),
    ] {
        let err = scope
            .call("x", &tool, &args, |_| async { unreachable!("refused") })
            .await
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::CallIdReused);
    }
    assert_eq!(scope.admitted(), 1);
}

#[tokio::test]
async fn empty_or_over_long_call_id_is_refused_before_anything() {
    // TS-1: 1..=256 bytes, counted in bytes, not characters.
    let (scope, _authority) = setup();
    let run = |id: String| {
        let scope = scope.clone();
        async move {
            scope
                .call(&id, &exec_tool(), &Value::Null, |_| async {
                    Ok(json!("ran"))
                })
                .await
        }
    };
    for bad in [String::new(), "a".repeat(257), "é".repeat(129)] {
        let err = run(bad.clone()).await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::CallIdInvalid, "{} bytes", bad.len());
    }
    assert_eq!(scope.admitted(), 0);
    assert_eq!(run("a".repeat(256)).await, Ok(json!("ran")));
    assert_eq!(run("é".repeat(128)).await, Ok(json!("ran")));
}

#[test]
fn a_call_without_a_scope_gets_scope_required() {
    // TS-4
    let err = ToolScope::require(None).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ExecScopeRequired);
    assert_eq!(
        serde_json::to_value(&err).unwrap()["code"],
        "AGENT_EXEC_SCOPE_REQUIRED"
    );
}

#[tokio::test]
async fn denied_call_runs_nothing_and_its_denial_is_the_recorded_result() {
    // TS-3, PERM-2: checked before the body starts.
    let (scope, authority) = setup();
    revoke(&authority);
    let ran = AtomicUsize::new(0);
    for _ in 0..2 {
        let err = scope
            .call("d", &exec_tool(), &Value::Null, |_| async {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok(Value::Null)
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::PermissionDenied);
        assert!(err.message().contains("local.terminal.exec@1"), "{err}");
    }
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn ending_the_turn_cancels_running_calls_and_refuses_new_ones() {
    let (scope, _authority) = setup();
    let running = {
        let scope = scope.clone();
        tokio::spawn(async move {
            scope
                .call("long", &exec_tool(), &Value::Null, |ctx| async move {
                    Err(ctx.cancelled().await.to_error())
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    scope.end_turn();
    let err = within("the turn end", running).await.unwrap().unwrap_err();
    assert_eq!(err.code(), ErrorCode::ExecCancelled);
    assert!(err.message().contains("turn ended"), "{err}");
    for id in ["long", "new"] {
        let err = scope
            .call(id, &exec_tool(), &Value::Null, |_| async { unreachable!() })
            .await
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::ExecScopeRequired);
    }
}

#[tokio::test]
async fn cancelling_one_call_by_id_reaches_only_that_body() {
    let (scope, _authority) = setup();
    let wait = |id: &'static str| {
        let scope = scope.clone();
        tokio::spawn(async move {
            scope
                .call(id, &exec_tool(), &Value::Null, |ctx| async move {
                    tokio::select! {
                        reason = ctx.cancelled() => Err(reason.to_error()),
                        () = tokio::time::sleep(Duration::from_millis(200)) => Ok(json!("finished")),
                    }
                })
                .await
        })
    };
    let (a, b) = (wait("a"), wait("b"));
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(scope.cancel("a"));
    assert!(!scope.cancel("nope"));
    assert_eq!(
        within("the explicit cancel", a)
            .await
            .unwrap()
            .unwrap_err()
            .code(),
        ErrorCode::ExecCancelled
    );
    assert_eq!(b.await.unwrap(), Ok(json!("finished")));
    assert!(!scope.cancel("b"), "a finished call is not running");
}

#[tokio::test]
async fn dropping_the_leading_future_cancels_the_call_and_releases_its_joiners() {
    // RUN-10: a dropped call future stops the call; nobody waits forever.
    let (scope, _authority) = setup();
    let (seen_tx, seen_rx) = tokio::sync::oneshot::channel();
    let leader = {
        let scope = scope.clone();
        tokio::spawn(async move {
            scope
                .call("drop-me", &exec_tool(), &Value::Null, |ctx| async move {
                    let ctx2 = ctx.clone();
                    // Runs on after the body is dropped, like a blocking waiter would.
                    std::thread::spawn(move || {
                        while !ctx2.is_cancelled() {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        let _ = seen_tx.send(ctx2.reason());
                    });
                    std::future::pending().await
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let joiner = {
        let scope = scope.clone();
        tokio::spawn(async move {
            scope
                .call("drop-me", &exec_tool(), &Value::Null, |_| async {
                    unreachable!()
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    leader.abort();
    assert_eq!(
        within("the joiner's release", joiner)
            .await
            .unwrap()
            .unwrap_err()
            .code(),
        ErrorCode::ExecCancelled
    );
    assert_eq!(
        within("the body's cancellation", seen_rx).await.unwrap(),
        Some(toolscope::CancelReason::Requested)
    );
    assert_eq!(scope.generation().live_leases(), 0);
}
