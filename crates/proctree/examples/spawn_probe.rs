//! Phase probe: `/bin/true` under the supervisor, timing `spawn`, `wait_main` and `stop`
//! separately, per mode and with or without the background scanner.
//!
//! Usage: `cargo run --release -p proctree --example spawn_probe -- [runs]`

#[cfg(target_os = "linux")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    use std::time::{Duration, Instant};

    let runs: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(50);
    let mut modes = vec![proctree::Mode::Subreaper];
    if proctree::pid_namespace_available() {
        modes.push(proctree::Mode::PidNamespace);
    }
    let configs: Vec<(proctree::Mode, Option<Duration>)> = modes
        .iter()
        .flat_map(|m| [(*m, Some(proctree::DEFAULT_SCAN_INTERVAL)), (*m, None)])
        .collect();
    let mut times = vec![[Vec::new(), Vec::new(), Vec::new(), Vec::new()]; configs.len()];
    for _ in 0..runs {
        // Alternate configurations so drift in machine load hits all alike.
        for (i, (mode, interval)) in configs.iter().enumerate() {
            let t0 = Instant::now();
            let mut tree = proctree::Command::new("/bin/true")
                .mode(*mode)
                .scan_interval(*interval)
                .spawn()?;
            let t1 = Instant::now();
            tree.wait_main()?;
            let t2 = Instant::now();
            tree.stop()?;
            let t3 = Instant::now();
            times[i][0].push(t1 - t0);
            times[i][1].push(t2 - t1);
            times[i][2].push(t3 - t2);
            times[i][3].push(t3 - t0);
        }
    }
    let med = |xs: &mut Vec<Duration>| {
        xs.sort();
        xs[xs.len() / 2].as_secs_f64() * 1e3
    };
    for (i, (mode, interval)) in configs.iter().enumerate() {
        let t = &mut times[i];
        println!(
            "{mode:<14} scanner={:<5} spawn {:.3} ms  wait {:.3} ms  stop {:.3} ms  total {:.3} ms",
            interval.is_some(),
            med(&mut t[0]),
            med(&mut t[1]),
            med(&mut t[2]),
            med(&mut t[3])
        );
    }
    let mut scans = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let table = proctree::ProcessTable::read()?;
        scans.push(t.elapsed());
        std::hint::black_box(table);
    }
    println!("full /proc scan {:.3} ms", med(&mut scans));
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("skipped: the probe needs Linux");
}
