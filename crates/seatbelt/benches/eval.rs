//! The SBPL evaluator in process (`cargo xtask bench micro`): deciding a path under the
//! `command` profile, inside and outside its grants, and parsing the rendered profile back,
//! each against building that profile from its spec, the step every macOS call takes. xtask
//! prints each median's ratio to the baseline's.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use seatbelt::{Decision, Operation, Profile, ProfileSpec};

const SCOPE: &str = "/Users/alice/project";
const TEMP: &str = "/tmp/command-1";

fn sbpl(c: &mut Criterion) {
    let spec = ProfileSpec::command(SCOPE, TEMP);
    let Ok(bound) = spec.build() else {
        panic!("the command profile builds");
    };
    let text = bound.text();
    let inside = format!("{SCOPE}/src/deep/er/main.rs");
    let outside = "/Users/alice/.ssh/id_ed25519";
    // The figures mean nothing unless the evaluator answers as the profile says.
    assert_eq!(
        bound.decide(Operation::FileWriteData, &inside).ok(),
        Some(Decision::Allow)
    );
    assert_eq!(
        bound.decide(Operation::FileReadData, outside).ok(),
        Some(Decision::Deny)
    );

    let mut group = c.benchmark_group("sbpl");
    group.bench_function("build_command_profile", |b| {
        b.iter(|| black_box(&spec).build().is_ok())
    });
    group.bench_function("decide_inside", |b| {
        b.iter(|| bound.decide(Operation::FileWriteData, black_box(&inside)))
    });
    group.bench_function("decide_outside", |b| {
        b.iter(|| bound.decide(Operation::FileReadData, black_box(outside)))
    });
    group.bench_function("parse_rendered", |b| {
        b.iter(|| Profile::parse(black_box(&text)).is_ok())
    });
    group.finish();
}

criterion_group!(benches, sbpl);
criterion_main!(benches);
