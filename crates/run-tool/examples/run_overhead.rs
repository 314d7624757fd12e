//! Overhead of `run` against the bare program, same machine, same run (docs/architecture.md,
//! "Benchmarks"):
//! `wc -l` on a 200 MB file through `run_tool::run` (validation, private temp dir, sandbox,
//! supervisor, capture) against `/usr/bin/wc -l` started directly. Prints medians and the
//! ratio (target: at most 1.1x).
//!
//! `cargo run --release -p run-tool --example run_overhead [-- <MB> <rounds>]`
#![allow(clippy::unwrap_used, clippy::expect_used)] // a measuring tool: a failure is a crash

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut argv = std::env::args().skip(1);
    let mb: usize = argv.next().map_or(200, |s| s.parse().unwrap());
    let rounds: usize = argv.next().map_or(7, |s| s.parse().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let mirror = dir.path().join("mirror");
    std::fs::create_dir(&mirror).unwrap();
    let mirror = mirror.canonicalize().unwrap();
    {
        let line = b"2024-01-01,some text in a csv column,12345,more,fields\n";
        let mut f = std::io::BufWriter::new(std::fs::File::create(mirror.join("big.csv")).unwrap());
        let mut written = 0;
        while written < mb * 1_000_000 {
            f.write_all(line).unwrap();
            written += line.len();
        }
    }
    let lease = Arc::new(fsguard::RootLease::acquire(&mirror).unwrap());
    let wc = std::path::Path::new("/usr/bin/wc");
    let (mut bare, mut tool) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        let out = std::process::Command::new(wc)
            .args(["-l", "big.csv"])
            .current_dir(&mirror)
            .env_clear()
            .env("LC_ALL", "C")
            .output()
            .unwrap();
        bare.push(t.elapsed());
        let expected = String::from_utf8(out.stdout).unwrap();

        let args = run_tool::AgentRunArguments {
            program: "wc".into(),
            args: vec!["-l".into(), "big.csv".into()],
            cwd_relative: None,
            timeout_ms: Some(30_000),
        };
        let (ctx, _h) = toolscope::CallContext::standalone();
        let t = Instant::now();
        let out = run_tool::run(args, lease.clone(), &ctx).await.unwrap();
        tool.push(t.elapsed());
        assert_eq!(out.stdout, expected);
    }
    let (b, r) = (median(bare), median(tool));
    println!(
        "wc -l on {mb} MB, median of {rounds}: bare {:.1} ms, run tool {:.1} ms, ratio {:.3}x (overhead {:.1} ms)",
        b.as_secs_f64() * 1e3,
        r.as_secs_f64() * 1e3,
        r.as_secs_f64() / b.as_secs_f64(),
        (r.as_secs_f64() - b.as_secs_f64()) * 1e3
    );
}
