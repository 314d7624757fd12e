//! CMD-12: an account switch retires the old generation, cancels what runs under it, and
//! publishes the new account only after every lease of the old one is released.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::oneshot;
use toolscope::{Accounts, ErrorCode};

use crate::common::{exec_tool, granted_authority, new_turn, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switch_waits_for_a_blocking_thread_that_holds_its_lease_after_cancellation() {
    // CMD-12: "the new account is not published merely because an async wait was cancelled".
    const KEEPS_WORKING: Duration = Duration::from_millis(300);
    let authority = granted_authority();
    let accounts = Arc::new(Accounts::new("alice".into()));
    let scope = new_turn(&accounts, &authority);
    let released_at = Arc::new(Mutex::new(None::<Instant>));
    let (started_tx, started_rx) = oneshot::channel();
    let thread = Arc::new(Mutex::new(None));

    let call = {
        let (released_at, thread) = (released_at.clone(), thread.clone());
        tokio::spawn(async move {
            let outcome = scope
                .call("block", &exec_tool(), &Value::Null, |ctx| async move {
                    let lease = ctx.lease()?;
                    let ctx2 = ctx.clone();
                    *thread.lock().unwrap() = Some(std::thread::spawn(move || {
                        while !ctx2.is_cancelled() {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        // The blocking work does not stop at once (e.g. waiting for a child).
                        std::thread::sleep(KEEPS_WORKING);
                        *released_at.lock().unwrap() = Some(Instant::now());
                        drop(lease);
                    }));
                    let _ = started_tx.send(());
                    // The async side gives up as soon as it is told to.
                    Err(ctx.cancelled().await.to_error())
                })
                .await;
            (outcome, Instant::now())
        })
    };
    started_rx.await.unwrap();
    let old = accounts.current();
    let new = within("the switch", accounts.switch("bob".into())).await;
    let published_at = Instant::now();

    let (outcome, async_done_at) = call.await.unwrap();
    let err = outcome.unwrap_err();
    assert_eq!(err.code(), ErrorCode::ExecCancelled);
    assert!(err.message().contains("account was switched"), "{err}");
    let released_at = released_at
        .lock()
        .unwrap()
        .expect("the thread released its lease");
    assert!(async_done_at < released_at, "the async side ended first");
    assert!(
        released_at <= published_at,
        "published only after the release"
    );
    assert_eq!(old.live_leases(), 0);
    assert_eq!(new.account().0, "bob");
    assert_eq!(accounts.current().number(), 2);
    let handle = thread.lock().unwrap().take().unwrap();
    handle.join().unwrap();
}

#[tokio::test]
async fn late_turns_and_calls_of_a_retired_generation_are_refused() {
    // CMD-12
    let authority = granted_authority();
    let accounts = Accounts::new("alice".into());
    let old_generation = accounts.current();
    let old_turn = new_turn(&accounts, &authority);
    accounts.switch("bob".into()).await;

    let late_turn = old_generation
        .begin_turn(authority.clone(), crate::common::PLUGIN.parse().unwrap())
        .unwrap_err();
    assert_eq!(late_turn.code(), ErrorCode::AccountRetired);
    let late_call = old_turn
        .call("c", &exec_tool(), &Value::Null, |_| async {
            unreachable!()
        })
        .await
        .unwrap_err();
    assert_eq!(late_call.code(), ErrorCode::AccountRetired);
    assert_eq!(
        old_generation.lease().unwrap_err().code(),
        ErrorCode::AccountRetired
    );
    // The new generation works.
    let turn = new_turn(&accounts, &authority);
    assert_eq!(
        turn.call("c", &exec_tool(), &Value::Null, |_| async {
            Ok(Value::Bool(true))
        })
        .await,
        Ok(Value::Bool(true))
    );
}

#[tokio::test]
async fn a_pending_approval_is_cancelled_by_the_switch() {
    // CMD-12: approvals wait on the call (or the generation) and wake on retirement.
    let authority = granted_authority();
    let accounts = Arc::new(Accounts::new("alice".into()));
    let scope = new_turn(&accounts, &authority);
    let (asked_tx, asked_rx) = oneshot::channel();
    let call = tokio::spawn(async move {
        scope
            .call("approve", &exec_tool(), &Value::Null, |ctx| async move {
                let _ = asked_tx.send(());
                let never_answered = std::future::pending::<bool>();
                tokio::select! {
                    reason = ctx.cancelled() => Err(reason.to_error()),
                    _ = never_answered => unreachable!(),
                }
            })
            .await
    });
    let generation = accounts.current();
    let waiter = tokio::spawn(async move { generation.retired().await });
    asked_rx.await.unwrap();
    within("the switch", accounts.switch("bob".into())).await;
    let err = within("the approval's cancellation", call)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ExecCancelled);
    within("the generation's retirement", waiter).await.unwrap();
}

#[tokio::test]
async fn new_turns_during_a_switch_are_refused_under_either_account() {
    let authority = granted_authority();
    let accounts = Arc::new(Accounts::new("alice".into()));
    let (ctx_tx, ctx_rx) = oneshot::channel();
    let scope = new_turn(&accounts, &authority);
    let hold = tokio::spawn(async move {
        scope
            .call("hold", &exec_tool(), &Value::Null, |ctx| async move {
                let lease = ctx.lease()?;
                let _ = ctx_tx.send(lease);
                Err(ctx.cancelled().await.to_error())
            })
            .await
    });
    let lease = ctx_rx.await.unwrap();
    let switching = {
        let accounts = accounts.clone();
        tokio::spawn(async move { accounts.switch("bob".into()).await })
    };
    within("the held call's cancellation", hold)
        .await
        .unwrap()
        .unwrap_err();
    // The switch is waiting for `lease`: the current generation is the retired one.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!switching.is_finished());
    let during = accounts
        .current()
        .begin_turn(authority.clone(), crate::common::PLUGIN.parse().unwrap())
        .unwrap_err();
    assert_eq!(during.code(), ErrorCode::AccountRetired);
    drop(lease);
    let new = within("the switch", switching).await.unwrap();
    assert_eq!(new.account().0, "bob");
    assert!(!new.is_retired(), "the new generation starts live");
}
