//! Stop benchmark (`cargo xtask bench stop`): builds a tree of 500 processes — the main
//! shell, 100 `setsid -f` escapees and 399 background sleeps — waits until all run, then times
//! `ProcessTree::stop` from the request until the supervisor has reaped everything.
//!
//! Usage: `cargo run --release -p proctree --example stop_bench -- [runs] [subreaper|pid-namespace]`
//! Prints one `stop_us=… mode=…` line per run and a final `median_us=…` line. Target ≤ 100 ms.

#[cfg(target_os = "linux")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    use std::time::{Duration, Instant};

    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(5);
    let mode = match args.next().as_deref() {
        None => None,
        Some("subreaper") => Some(proctree::Mode::Subreaper),
        Some("pid-namespace") => Some(proctree::Mode::PidNamespace),
        Some(other) => {
            return Err(format!("unknown mode {other:?}; use subreaper or pid-namespace").into());
        }
    };
    let mut times = Vec::new();
    for run in 0..runs {
        let marker = format!("100.{}{run:03}", std::process::id());
        let script = format!(
            "for i in $(seq 100); do setsid -f sleep {marker}; done; \
             for i in $(seq 399); do sleep {marker} & done; wait"
        );
        let mut cmd = proctree::Command::new("/bin/sh")
            .args(["-c", &script])
            .env("PATH", "/usr/bin:/bin");
        if let Some(mode) = mode {
            cmd = cmd.mode(mode);
        }
        let mut tree = cmd.spawn()?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while count(&marker) < 499 {
            if Instant::now() > deadline {
                return Err("the tree did not build within 60 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let started = Instant::now();
        let report = tree.stop()?;
        let us = started.elapsed().as_micros();
        let left = count(&marker);
        println!(
            "stop_us={us} mode={} processes=500 descendants_stopped={} survivors={left}",
            report.mode, report.descendants_stopped
        );
        if left != 0 {
            return Err(format!("{left} processes survived").into());
        }
        times.push(us);
    }
    times.sort_unstable();
    if let Some(median) = times.get(times.len() / 2) {
        println!("median_us={median} runs={runs}");
    }
    Ok(())
}

/// Live sleeps carrying `marker` as an argument.
#[cfg(target_os = "linux")]
fn count(marker: &str) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|c| c.split(|b| *b == 0).any(|a| a == marker.as_bytes()))
        .count()
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("skipped: the stop benchmark needs Linux");
}
