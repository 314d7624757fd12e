//! `decide` in process (`cargo xtask bench micro`): a read-only allowlist hit, a parsed
//! `sh -c` pipeline and a refusal, each against reading the same tool arguments from JSON, the
//! step every `run_command` call takes before it. xtask prints each median's ratio to the
//! baseline's.

use std::hint::black_box;

use argv_policy::{Context, Decision, Mode, Policy, RunCommandArgs, decide};
use criterion::{Criterion, criterion_group, criterion_main};

fn decide_group(c: &mut Criterion) {
    let ctx = Context::new("/home/u/proj", "/home/u");
    let Ok(policy) = Policy::load(Mode::Safe, None) else {
        panic!("the built-in policy loads");
    };
    let json = r#"{"argv": ["git", "log", "-n", "3", "--oneline"]}"#;
    let hit = RunCommandArgs::new(["git", "log", "-n", "3", "--oneline"]);
    let script = RunCommandArgs::new(["sh", "-c", "ls -la src | grep -v target | sort | wc -l"]);
    let refusal = RunCommandArgs::new(["sh", "-c", "ls | env rm -rf x"]);
    // The figures mean nothing unless each case decides as named.
    assert!(matches!(decide(&hit, &policy, &ctx), Decision::Run { .. }));
    assert!(matches!(
        decide(&script, &policy, &ctx),
        Decision::Run { .. }
    ));
    assert!(matches!(
        decide(&refusal, &policy, &ctx),
        Decision::Refuse { .. }
    ));
    assert!(RunCommandArgs::from_json(json).is_ok());

    let mut group = c.benchmark_group("decide");
    group.bench_function("args_from_json", |b| {
        b.iter(|| RunCommandArgs::from_json(black_box(json)).is_ok())
    });
    group.bench_function("allowlist_hit", |b| {
        b.iter(|| decide(black_box(&hit), &policy, &ctx))
    });
    group.bench_function("script", |b| {
        b.iter(|| decide(black_box(&script), &policy, &ctx))
    });
    group.bench_function("refusal", |b| {
        b.iter(|| decide(black_box(&refusal), &policy, &ctx))
    });
    group.finish();
}

criterion_group!(benches, decide_group);
criterion_main!(benches);
