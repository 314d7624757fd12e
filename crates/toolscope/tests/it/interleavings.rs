//! Property test over random interleavings of call / duplicate / revoke / restore / switch /
//! turn end / late call: no body runs twice for one callId of one turn, no turn runs more than
//! 32 bodies, and no work holding an old-generation lease is alive when the new account is
//! published (TS-1, TS-2, TS-3, CMD-12).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::task::JoinSet;
use toolscope::{Accounts, CallContext, ErrorCode, MAX_CALLS_PER_TURN, ToolError, ToolScope};

use crate::common::{PLUGIN, exec_tool, granted_authority, restore, revoke, within};

#[derive(Clone, Copy, Debug)]
enum Body {
    /// Awaits up to `ms`, or cancellation.
    Async { ms: u8 },
    /// Takes a lease into a blocking thread that works up to `ms`, and `ms / 2` more after it
    /// sees cancellation; the async side returns at once on cancellation.
    Blocking { ms: u8 },
}

#[derive(Clone, Debug)]
enum Op {
    /// A call in the current turn. A small id space makes duplicates and budget overruns common;
    /// `variant` changes the arguments, so some duplicates are conflicting reuses.
    Call {
        id: u8,
        variant: u8,
        body: Body,
    },
    /// A call in the very first turn, long after it may have ended or been retired.
    LateCall {
        id: u8,
    },
    Revoke,
    Restore,
    Switch,
    EndTurn,
    Pause {
        ms: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let body = prop_oneof![
        (0u8..12).prop_map(|ms| Body::Async { ms }),
        (0u8..12).prop_map(|ms| Body::Blocking { ms }),
    ];
    prop_oneof![
        8 => (0u8..40, 0u8..2, body).prop_map(|(id, variant, body)| Op::Call { id, variant, body }),
        1 => (0u8..40).prop_map(|id| Op::LateCall { id }),
        1 => Just(Op::Revoke),
        1 => Just(Op::Restore),
        1 => Just(Op::Switch),
        1 => Just(Op::EndTurn),
        3 => (0u8..5).prop_map(|ms| Op::Pause { ms }),
    ]
}

/// What the bodies did.
#[derive(Default)]
struct Tally {
    /// Bodies run per (turn, callId).
    runs: HashMap<(u64, u8), usize>,
    /// Bodies run per turn.
    per_turn: HashMap<u64, usize>,
    /// Work alive per generation number, counted up before a lease-holding piece of work
    /// starts and down just before its lease is dropped.
    alive: HashMap<u64, usize>,
}

type Shared = Arc<Mutex<Tally>>;

fn enter(tally: &Shared, generation: u64) {
    *tally.lock().unwrap().alive.entry(generation).or_default() += 1;
}

fn leave(tally: &Shared, generation: u64) {
    *tally.lock().unwrap().alive.entry(generation).or_default() -= 1;
}

async fn run_body(
    ctx: CallContext,
    body: Body,
    turn: u64,
    id: u8,
    tally: Shared,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
) -> Result<Value, ToolError> {
    let generation = ctx.generation().number();
    enter(&tally, generation);
    {
        let mut t = tally.lock().unwrap();
        *t.runs.entry((turn, id)).or_default() += 1;
        *t.per_turn.entry(turn).or_default() += 1;
    }
    let ms = match body {
        Body::Async { ms } | Body::Blocking { ms } => u64::from(ms),
    };
    if let Body::Blocking { .. } = body {
        match ctx.lease() {
            Ok(lease) => {
                enter(&tally, generation);
                let (ctx2, tally2) = (ctx.clone(), tally.clone());
                threads.lock().unwrap().push(std::thread::spawn(move || {
                    let until = Instant::now() + Duration::from_millis(ms);
                    while !ctx2.is_cancelled() && Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    if ctx2.is_cancelled() {
                        std::thread::sleep(Duration::from_millis(ms / 2));
                    }
                    leave(&tally2, generation);
                    drop(lease);
                }));
            }
            Err(err) => {
                leave(&tally, generation);
                return Err(err);
            }
        }
    }
    let outcome = tokio::select! {
        reason = ctx.cancelled() => Err(reason.to_error()),
        () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(json!(id)),
    };
    leave(&tally, generation);
    outcome
}

fn allowed_error(err: &ToolError) -> bool {
    matches!(
        err.code(),
        ErrorCode::PermissionDenied
            | ErrorCode::BudgetExhausted
            | ErrorCode::AccountRetired
            | ErrorCode::CallIdReused
            | ErrorCode::ExecCancelled
            | ErrorCode::ExecScopeRequired
    )
}

async fn play(ops: Vec<Op>) -> Vec<String> {
    let authority = granted_authority();
    let accounts = Arc::new(Accounts::new("account-0".into()));
    let tally: Shared = Arc::default();
    let threads: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
    let mut tasks = JoinSet::new();
    let mut turns: Vec<ToolScope> = Vec::new();
    let begin = |accounts: &Accounts| {
        accounts
            .current()
            .begin_turn(authority.clone(), PLUGIN.parse().unwrap())
            .ok()
    };
    let mut current: Option<(u64, ToolScope)> = begin(&accounts).map(|s| (0, s));
    if let Some((_, s)) = &current {
        turns.push(s.clone());
    }
    let mut switches = 0;

    for op in ops {
        match op {
            Op::Call { id, variant, body } => {
                let Some((turn, scope)) = current.clone() else {
                    let err = ToolScope::require(None).unwrap_err();
                    assert_eq!(err.code(), ErrorCode::ExecScopeRequired);
                    continue;
                };
                let (tally, threads) = (tally.clone(), threads.clone());
                tasks.spawn(async move {
                    let args = json!({ "variant": variant });
                    let outcome = scope
                        .call(&format!("id-{id}"), &exec_tool(), &args, |ctx| {
                            run_body(ctx, body, turn, id, tally.clone(), threads)
                        })
                        .await;
                    match outcome {
                        Ok(value) if value == json!(id) => None,
                        Err(err) if allowed_error(&err) => None,
                        other => Some(format!("call id-{id}: unexpected outcome {other:?}")),
                    }
                });
            }
            Op::LateCall { id } => {
                let Some(first) = turns.first().cloned() else {
                    continue;
                };
                let retired = first.generation().is_retired();
                let ended = first.is_ended();
                tasks.spawn(async move {
                    let outcome = first
                        .call(
                            &format!("late-{id}"),
                            &exec_tool(),
                            &Value::Null,
                            |_| async { Ok(json!("late")) },
                        )
                        .await;
                    let code = outcome.as_ref().err().map(ToolError::code);
                    if retired && code != Some(ErrorCode::AccountRetired) {
                        Some(format!("late call in a retired generation got {outcome:?}"))
                    } else if ended
                        // A switch still in flight may retire the generation meanwhile.
                        && !matches!(
                            code,
                            Some(ErrorCode::ExecScopeRequired | ErrorCode::AccountRetired)
                        )
                    {
                        Some(format!("late call in an ended turn got {outcome:?}"))
                    } else {
                        None
                    }
                });
            }
            Op::Revoke => revoke(&authority),
            Op::Restore => restore(&authority),
            Op::Switch => {
                switches += 1;
                let (accounts, tally) = (accounts.clone(), tally.clone());
                tasks.spawn(async move {
                    let new = accounts.switch(format!("account-{switches}").into()).await;
                    let old = new.number() - 1;
                    let alive = tally.lock().unwrap().alive.get(&old).copied().unwrap_or(0);
                    (alive != 0).then(|| {
                        format!(
                            "generation {} published while {alive} old work alive",
                            new.number()
                        )
                    })
                });
            }
            Op::EndTurn => {
                if let Some((_, scope)) = current.take() {
                    scope.end_turn();
                }
                current = begin(&accounts).map(|s| (turns.len() as u64, s));
                if let Some((_, s)) = &current {
                    turns.push(s.clone());
                }
            }
            Op::Pause { ms } => tokio::time::sleep(Duration::from_millis(u64::from(ms))).await,
        }
    }

    // Wind down: end the turn, wait for every call, retire the last generation (which waits for
    // every lease), then join every thread.
    if let Some((_, scope)) = current.take() {
        scope.end_turn();
    }
    let mut violations: Vec<String> = within("every call and switch", tasks.join_all())
        .await
        .into_iter()
        .flatten()
        .collect();
    let last = within("the final switch", accounts.switch("final".into())).await;
    let handles: Vec<_> = threads.lock().unwrap().drain(..).collect();
    for handle in handles {
        handle.join().unwrap();
    }

    let tally = tally.lock().unwrap();
    for ((turn, id), n) in &tally.runs {
        if *n > 1 {
            violations.push(format!("turn {turn} ran id-{id} {n} times"));
        }
    }
    for (turn, n) in &tally.per_turn {
        if *n > MAX_CALLS_PER_TURN {
            violations.push(format!("turn {turn} ran {n} bodies"));
        }
    }
    for (generation, n) in &tally.alive {
        if *n != 0 {
            violations.push(format!("generation {generation} still has {n} work alive"));
        }
    }
    for scope in &turns {
        if scope.admitted() > MAX_CALLS_PER_TURN {
            violations.push(format!("a turn admitted {}", scope.admitted()));
        }
        if scope.generation().live_leases() != 0 {
            violations.push("a retired generation kept a lease".to_owned());
        }
    }
    assert!(!last.is_retired());
    violations
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_interleavings_keep_every_gate_invariant(ops in proptest::collection::vec(op(), 1..80)) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let violations = runtime.block_on(play(ops));
        prop_assert!(violations.is_empty(), "{violations:#?}");
    }
}
