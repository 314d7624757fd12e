//! TS-3 / PERM-2: authorization is watched while a body runs; a revocation reaches it in
//! ≤ 100 ms. The latency is measured and printed (`--nocapture`); the assertion bounds are
//! generous on purpose (house rule 6), the 100 ms applies to the median.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};
use toolscope::{
    Accounts, Authority, CancelReason, Denial, ErrorCode, MemoryAuthority, PluginId, Tool,
};

use crate::common::{exec_tool, granted_authority, new_turn, restore, revoke, within};

const SAMPLES: usize = 41;

fn median(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (samples[samples.len() / 2], samples[samples.len() - 1])
}

/// How a body notices cancellation.
#[derive(Clone, Copy, Debug)]
enum Observer {
    /// `select!` on `ctx.cancelled()`, as an async runner does.
    Awaiting,
    /// A blocking thread polling `ctx.is_cancelled()` every millisecond.
    Polling,
}

/// One revocation: returns the time from the grant change to the body seeing it.
async fn one_revocation(
    accounts: &Accounts,
    authority: &Arc<MemoryAuthority>,
    how: Observer,
) -> Duration {
    restore(authority);
    let scope = new_turn(accounts, authority);
    let (started_tx, started_rx) = oneshot::channel();
    let (seen_tx, seen_rx) = oneshot::channel::<(Instant, Option<CancelReason>)>();
    let call = tokio::spawn(async move {
        scope
            .call("c", &exec_tool(), &Value::Null, |ctx| async move {
                let _ = started_tx.send(());
                match how {
                    Observer::Awaiting => {
                        let reason = ctx.cancelled().await;
                        let _ = seen_tx.send((Instant::now(), Some(reason.clone())));
                        Err(reason.to_error())
                    }
                    Observer::Polling => {
                        let ctx2 = ctx.clone();
                        let lease = ctx.lease()?;
                        let worker = tokio::task::spawn_blocking(move || {
                            let _lease = lease;
                            while !ctx2.is_cancelled() {
                                std::thread::sleep(Duration::from_millis(1));
                            }
                            let _ = seen_tx.send((Instant::now(), ctx2.reason()));
                        });
                        let _ = worker.await;
                        Err(ctx.reason().unwrap_or(CancelReason::Requested).to_error())
                    }
                }
            })
            .await
    });
    started_rx.await.unwrap();
    let revoked_at = Instant::now();
    revoke(authority);
    let (seen_at, reason) = within("the revocation reaching the body", seen_rx)
        .await
        .unwrap();
    assert!(
        matches!(
            reason,
            Some(CancelReason::Revoked(Denial::CapabilityNotAllowed { .. }))
        ),
        "{reason:?}"
    );
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(err.code(), ErrorCode::PermissionDenied);
    seen_at - revoked_at
}

async fn measure(how: Observer) {
    let authority = granted_authority();
    let accounts = Accounts::new("alice".into());
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        samples.push(one_revocation(&accounts, &authority, how).await);
    }
    let (median, max) = median(samples);
    eprintln!("revocation latency ({how:?}): median {median:?}, max {max:?}, {SAMPLES} samples");
    assert!(median <= Duration::from_millis(100), "median {median:?}");
    assert!(max <= Duration::from_secs(2), "max {max:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_reaches_an_awaiting_body_within_100ms() {
    // TS-3, PERM-2
    measure(Observer::Awaiting).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_reaches_a_polling_blocking_thread_within_100ms() {
    // TS-3, PERM-2
    measure(Observer::Polling).await;
}

#[tokio::test]
async fn an_unrelated_grant_change_does_not_cancel_a_running_call() {
    let authority = granted_authority();
    let accounts = Accounts::new("alice".into());
    let scope = new_turn(&accounts, &authority);
    let call = {
        let scope = scope.clone();
        tokio::spawn(async move {
            scope
                .call("c", &exec_tool(), &Value::Null, |ctx| async move {
                    tokio::select! {
                        reason = ctx.cancelled() => Err(reason.to_error()),
                        () = tokio::time::sleep(Duration::from_millis(100)) => Ok(json!("done")),
                    }
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    authority.update(|g| {
        g.plugins
            .insert("someone-else".parse().unwrap(), Default::default());
    });
    assert_eq!(call.await.unwrap(), Ok(json!("done")));
}

#[tokio::test]
async fn a_revoked_folder_grant_cancels_the_call() {
    // PERM-3 via TS-3: the workspace grant is part of the authorization.
    let authority = granted_authority();
    let accounts = Accounts::new("alice".into());
    let scope = new_turn(&accounts, &authority);
    let call = tokio::spawn(async move {
        scope
            .call("c", &exec_tool(), &Value::Null, |ctx| async move {
                Err(ctx.cancelled().await.to_error())
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    authority.update(|g| {
        if let Some(r) = g.plugins.get_mut(&crate::common::PLUGIN.parse().unwrap()) {
            r.folder_grants.clear();
        }
    });
    let err = within("the folder revocation", call)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::PermissionDenied);
    assert!(err.message().contains("folder"), "{err}");
}

/// An authority whose change feed dies while a call runs.
#[derive(Debug)]
struct Vanishing {
    grants: MemoryAuthority,
    feed: std::sync::Mutex<Option<watch::Sender<u64>>>,
}

impl Authority for Vanishing {
    fn check(&self, plugin: &PluginId, tool: &Tool) -> Result<(), Denial> {
        self.grants.check(plugin, tool)
    }
    fn watch(&self) -> watch::Receiver<u64> {
        match self.feed.lock().unwrap().as_ref() {
            Some(tx) => tx.subscribe(),
            None => watch::channel(0).1,
        }
    }
}

#[tokio::test]
async fn a_vanished_authority_feed_fails_closed() {
    let grants = MemoryAuthority::default();
    restore(&grants);
    let authority = Arc::new(Vanishing {
        grants,
        feed: std::sync::Mutex::new(Some(watch::Sender::new(0))),
    });
    let accounts = Accounts::new("alice".into());
    let scope = accounts
        .current()
        .begin_turn(authority.clone(), crate::common::PLUGIN.parse().unwrap())
        .unwrap();
    let call = tokio::spawn(async move {
        scope
            .call("c", &exec_tool(), &Value::Null, |ctx| async move {
                Err(ctx.cancelled().await.to_error())
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    authority.feed.lock().unwrap().take();
    let err = within("failing closed", call).await.unwrap().unwrap_err();
    assert_eq!(err.code(), ErrorCode::PermissionDenied);
    assert!(err.message().contains("no longer reachable"), "{err}");
}

#[tokio::test]
async fn a_body_that_ignores_revocation_still_returns_the_permission_error() {
    // TS-3: fail closed; output produced after the revocation does not reach the agent.
    let authority = granted_authority();
    let accounts = Accounts::new("alice".into());
    let scope = new_turn(&accounts, &authority);
    let call = tokio::spawn(async move {
        scope
            .call("c", &exec_tool(), &Value::Null, |ctx| async move {
                ctx.cancelled().await;
                Ok(json!({"stdout": "read after the revocation"}))
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    revoke(&authority);
    let err = within("the revocation", call).await.unwrap().unwrap_err();
    assert_eq!(err.code(), ErrorCode::PermissionDenied);
}
