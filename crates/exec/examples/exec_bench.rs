//! Benchmarks behind `cargo xtask bench spawn` and `cargo xtask bench drain`.
//!
//! `spawn [N]`: `/bin/true` through `exec::run` with the `command` spec, against a bare
//! `std::process::Command`, then against `bwrap --ro-bind / / --dev /dev --unshare-all
//! --die-with-parent true`, each pair alternating (and which side goes first alternating), N
//! rounds each; prints min/median/max and the ratios. It runs
//! twice: on a current-thread tokio runtime, which is what `agent-exec` uses, and on a
//! multi-thread runtime, where each wake-up of the awaiting thread crosses threads.
//! `drain [N]`: a child writing 1 GiB to stdout with a 64 KiB cap in truncate mode, against the
//! same child writing to `/dev/null`, and the same child piped into `cat > /dev/null`, all
//! through `exec::run`.
//! `ours [N]`: only `/bin/true` through `exec::run`, N rounds, on the current-thread runtime;
//! nothing else runs, so `perf record` sees only our spawn path. `bare [N]`: the same for the
//! bare `std::process::Command`, to profile against.

use std::error::Error;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use exec::{Job, Limits, OnCap, SandboxSpec, WorkDir};

fn job(scope: &Path, temp: &Path, script: Option<&str>) -> Result<Job, Box<dyn Error>> {
    let (program, args) = match script {
        None => ("/bin/true".into(), vec![]),
        Some(s) => ("/bin/sh".into(), vec!["-c".into(), s.into()]),
    };
    Ok(Job {
        program,
        args,
        workdir: WorkDir {
            lease: Arc::new(fsguard::RootLease::acquire(scope)?),
            rel: fsguard::RelPath::root(),
        },
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        sandbox: SandboxSpec::for_command(
            &fsguard::RootLease::acquire(scope)?,
            &fsguard::RootLease::acquire(temp)?,
            vec![],
        )?,
        limits: Limits {
            timeout: Duration::from_secs(120),
            stdout_cap: 64 * 1024,
            stderr_cap: 64 * 1024,
            on_cap: OnCap::Truncate,
        },
        merge_stderr: false,
    })
}

fn stats(name: &str, xs: &mut [Duration]) -> Duration {
    xs.sort();
    let median = xs[xs.len() / 2];
    println!(
        "  {name:<28} min {:>8.3} ms  median {:>8.3} ms  max {:>8.3} ms",
        xs[0].as_secs_f64() * 1e3,
        median.as_secs_f64() * 1e3,
        xs[xs.len() - 1].as_secs_f64() * 1e3
    );
    median
}

/// The median of `f(a[i], b[i])` (seconds in): each pair ran back to back, so a slow phase of
/// the machine moves both of its members and cancels out, where it moves one median more than
/// the other.
fn paired_median(a: &[Duration], b: &[Duration], f: impl Fn(f64, f64) -> f64) -> f64 {
    let mut xs: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(a, b)| f(a.as_secs_f64(), b.as_secs_f64()))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

async fn timed_exec(job: Job) -> Result<(Duration, exec::Outcome), Box<dyn Error>> {
    let (ctx, _cancel) = toolscope::CallContext::standalone();
    let start = Instant::now();
    let out = exec::run(job, &ctx).await?;
    Ok((start.elapsed(), out))
}

fn timed(cmd: &mut Command) -> Result<Duration, Box<dyn Error>> {
    let start = Instant::now();
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    let elapsed = start.elapsed();
    if !status.success() {
        return Err(format!("{cmd:?} failed: {status}").into());
    }
    Ok(elapsed)
}

async fn spawn(
    rounds: usize,
    scope: &Path,
    temp: &Path,
    runtime: &str,
) -> Result<(), Box<dyn Error>> {
    let have_bwrap = Path::new("/usr/bin/bwrap").exists();
    let bwrap = || {
        let mut c = Command::new("/usr/bin/bwrap");
        c.args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--unshare-all",
            "--die-with-parent",
            "true",
        ]);
        c
    };
    // Warm-up: page cache, the probe, the first namespace.
    timed_exec(job(scope, temp, None)?).await?;
    timed(&mut Command::new("/bin/true"))?;
    if have_bwrap {
        timed(&mut bwrap())?;
    }
    // Two pairings, each alternating which side goes first: bwrap's deferred teardown of its
    // namespaces (kernel workers, RCU) lands on whatever runs next and takes one of this
    // machine's two CPUs; in a three-way rotation ours, which followed bwrap, paid for it
    // (2.28 ms after bwrap against 1.59 ms after bare, same run). So ours and bare are timed
    // against each other, and ours and bwrap against each other, each pair in turn.
    let (mut ours, mut bare) = alternate(
        rounds,
        || true_in_sandbox(scope, temp),
        || timed(&mut Command::new("/bin/true")),
    )
    .await?;
    println!("spawn: /bin/true, {rounds} rounds, alternating, tokio {runtime} runtime");
    let paired = paired_median(&ours, &bare, |a, b| (a - b) * 1e3);
    let ours = stats("exec::run (command spec)", &mut ours);
    let bare = stats("bare std::process::Command", &mut bare);
    println!(
        "  overhead over bare: {:.3} ms (ratio {:.2}); median of the {rounds} paired \
         differences: {paired:.3} ms",
        (ours.as_secs_f64() - bare.as_secs_f64()) * 1e3,
        ours.as_secs_f64() / bare.as_secs_f64()
    );
    if !have_bwrap {
        println!("  bwrap: not installed (apt-get install bubblewrap), skipped");
        return Ok(());
    }
    let (mut ours, mut bw) = alternate(
        rounds,
        || true_in_sandbox(scope, temp),
        || timed(&mut bwrap()),
    )
    .await?;
    let paired = paired_median(&bw, &ours, |a, b| a / b);
    let ours = stats("exec::run, paired with bwrap", &mut ours);
    let bw = stats("bwrap --unshare-all", &mut bw);
    println!(
        "  bwrap / exec::run: {:.2}x; median of the {rounds} paired ratios: {paired:.2}x",
        bw.as_secs_f64() / ours.as_secs_f64()
    );
    Ok(())
}

/// `/bin/true` through `exec::run` with the `command` spec; its time.
async fn true_in_sandbox(scope: &Path, temp: &Path) -> Result<Duration, Box<dyn Error>> {
    let (t, out) = timed_exec(job(scope, temp, None)?).await?;
    if out.exit_code != Some(0) {
        return Err(format!("/bin/true failed in the sandbox: {out:?}").into());
    }
    Ok(t)
}

/// `rounds` pairs of `ours` and `other` back to back, which one goes first alternating; their
/// times in pair order.
async fn alternate<F: Future<Output = Result<Duration, Box<dyn Error>>>>(
    rounds: usize,
    mut ours: impl FnMut() -> F,
    mut other: impl FnMut() -> Result<Duration, Box<dyn Error>>,
) -> Result<(Vec<Duration>, Vec<Duration>), Box<dyn Error>> {
    let (mut a, mut b) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for round in 0..rounds {
        if round % 2 == 1 {
            b.push(other()?);
        }
        a.push(ours().await?);
        if round % 2 == 0 {
            b.push(other()?);
        }
    }
    Ok((a, b))
}

async fn ours(rounds: usize, scope: &Path, temp: &Path) -> Result<(), Box<dyn Error>> {
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        times.push(true_in_sandbox(scope, temp).await?);
    }
    println!("ours: /bin/true through exec::run, {rounds} rounds");
    stats("exec::run (command spec)", &mut times);
    Ok(())
}

fn bare(rounds: usize) -> Result<(), Box<dyn Error>> {
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        times.push(timed(&mut Command::new("/bin/true"))?);
    }
    println!("bare: /bin/true through std::process::Command, {rounds} rounds");
    stats("bare std::process::Command", &mut times);
    Ok(())
}

async fn drain(rounds: usize, scope: &Path, temp: &Path) -> Result<(), Box<dyn Error>> {
    let flood = "head -c 1073741824 /dev/zero";
    let quiet = "head -c 1073741824 /dev/zero > /dev/null";
    // The same writes into a pipe whose reader is `cat` (a reader that does nothing else):
    // what any pipe-based capture must pay for the child's small writes.
    let piped = "head -c 1073741824 /dev/zero | cat > /dev/null";
    let (mut capped, mut null, mut cat) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (t, out) = timed_exec(job(scope, temp, Some(flood))?).await?;
        if !out.stdout_truncated || out.stdout.len() != 64 * 1024 || out.exit_code != Some(0) {
            return Err(format!("the flood did not run to the end: {:?}", out.exit_code).into());
        }
        capped.push(t);
        let (t, out) = timed_exec(job(scope, temp, Some(quiet))?).await?;
        if out.exit_code != Some(0) {
            return Err("the /dev/null run failed".into());
        }
        null.push(t);
        let (t, out) = timed_exec(job(scope, temp, Some(piped))?).await?;
        if out.exit_code != Some(0) {
            return Err("the piped run failed".into());
        }
        cat.push(t);
    }
    println!("drain: 1 GiB to stdout, 64 KiB kept (truncate), {rounds} rounds, alternating");
    let a = stats("captured (64 KiB cap)", &mut capped);
    let b = stats("to /dev/null", &mut null);
    let c = stats("piped to cat (in sandbox)", &mut cat);
    println!(
        "  ratio (captured / dev-null, medians): {:.3}",
        a.as_secs_f64() / b.as_secs_f64()
    );
    println!(
        "  ratio (captured / piped to cat, medians): {:.3}",
        a.as_secs_f64() / c.as_secs_f64()
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(30);
    let dir = std::env::temp_dir().join(format!("exec-bench-{}", std::process::id()));
    let (scope, temp) = (dir.join("scope"), dir.join("tmp"));
    std::fs::create_dir_all(&scope)?;
    std::fs::create_dir_all(&temp)?;
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = match args.first().map(String::as_str) {
        Some("spawn") => current
            .block_on(spawn(rounds, &scope, &temp, "current-thread"))
            .and_then(|()| {
                tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()?
                    .block_on(spawn(rounds, &scope, &temp, "multi-thread"))
            }),
        Some("drain") => current.block_on(drain(rounds, &scope, &temp)),
        Some("ours") => current.block_on(ours(rounds, &scope, &temp)),
        Some("bare") => bare(rounds),
        _ => Err("usage: exec_bench spawn|drain|ours|bare [ROUNDS]".into()),
    };
    let _ = std::fs::remove_dir_all(&dir);
    result
}
