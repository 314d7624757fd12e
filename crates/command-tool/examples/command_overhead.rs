//! Overhead of `command` against a bare shell, same machine, same run (docs/architecture.md,
//! "Benchmarks"):
//! `true` through `command_tool::command` (validation, hard-link scan of an empty scope,
//! private temp dir, sandbox, supervisor, capture, cleanup) against `/bin/sh -c true` started
//! directly. Prints medians and the difference.
//!
//! `cargo run --release -p command-tool --example command_overhead [-- <rounds>]`
#![allow(clippy::unwrap_used, clippy::expect_used)] // a measuring tool: a failure is a crash

use std::sync::Arc;
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let rounds: usize = std::env::args().nth(1).map_or(51, |s| s.parse().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let scope = dir.path().join("scope");
    std::fs::create_dir(&scope).unwrap();
    let lease = Arc::new(fsguard::RootLease::acquire(scope.canonicalize().unwrap()).unwrap());
    let (mut bare, mut tool) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        let status = std::process::Command::new("/bin/sh")
            .args(["-c", "true"])
            .status()
            .unwrap();
        bare.push(t.elapsed());
        assert!(status.success());

        let args = command_tool::CommandArguments {
            command: "true".into(),
            ..Default::default()
        };
        let (ctx, _h) = toolscope::CallContext::standalone();
        let t = Instant::now();
        let out = command_tool::command(args, lease.clone(), &command_tool::DenyAll, &ctx)
            .await
            .unwrap();
        tool.push(t.elapsed());
        assert_eq!(out.exit_code, Some(0));
    }
    let (b, c) = (median(bare), median(tool));
    println!(
        "true, median of {rounds}: bare sh -c {:.2} ms, command tool {:.2} ms (+{:.2} ms)",
        b.as_secs_f64() * 1e3,
        c.as_secs_f64() * 1e3,
        (c.as_secs_f64() - b.as_secs_f64()) * 1e3
    );
}
