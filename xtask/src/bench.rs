//! `cargo xtask bench`: whole-process benchmarks against a baseline measured in the same run,
//! reported as medians and a ratio (house rule 6). Tests never assert on speed; neither does this:
//! it prints figures for a human to judge against the issue's target.
//!
//! Runs of the candidate and the baseline alternate, so a noisy neighbour slows both alike.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::workspace_root;

/// A benchmark: what runs it with the arguments after its name.
pub(crate) type Benchmark = fn(&[String]) -> Result<(), String>;

/// Every benchmark `cargo xtask bench NAME` runs. One table, so tidy can check that the docs
/// name only benchmarks that exist.
pub(crate) const BENCHMARKS: &[(&str, Benchmark)] = &[
    ("scan", scan),
    // Spawn medians on a noisy 2-CPU machine move by ~0.3 ms at 30 rounds and settle at a few
    // hundred (~7 s for both runtimes).
    ("spawn", |args| exec_bench("spawn", 300, args)),
    ("drain", |args| exec_bench("drain", 5, args)),
    ("stop", stop),
    ("call", call),
    ("git", git),
    ("links", links),
    ("micro", micro),
    ("soak", crate::bench_soak::run),
];

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let names: Vec<&str> = BENCHMARKS.iter().map(|(name, _)| *name).collect();
    let Some(which) = args.first() else {
        return Err(format!("name a benchmark: {}", names.join(", ")));
    };
    match BENCHMARKS.iter().find(|(name, _)| name == which) {
        Some((_, bench)) => bench(&args[1..]),
        None => Err(format!(
            "unknown benchmark `{which}`; available: {}",
            names.join(", ")
        )),
    }
}

/// `spawn` or `drain`: exec's example, `rounds` by default.
fn exec_bench(which: &str, default: usize, args: &[String]) -> Result<(), String> {
    let rounds = flag(args, "--runs", default)?;
    example(
        "exec",
        "exec_bench",
        &[which.to_owned(), rounds.to_string()],
    )
}

fn call(args: &[String]) -> Result<(), String> {
    let rounds = flag(args, "--runs", 21)?;
    let mb = flag(args, "--mb", 200)?;
    let agent_exec = release_agent_exec()?;
    example(
        "agent-exec",
        "call_bench",
        &[
            agent_exec.display().to_string(),
            mb.to_string(),
            rounds.to_string(),
        ],
    )
}

/// The git directories' private copies (TRUST-1): `git status` on a 50 000-file repository
/// and `git clone` of it through `call command`, against the host's bare git.
fn git(args: &[String]) -> Result<(), String> {
    let rounds = flag(args, "--runs", 11)?;
    let files = flag(args, "--files", 50_000)?;
    let agent_exec = release_agent_exec()?;
    example(
        "agent-exec",
        "git_bench",
        &[
            agent_exec.display().to_string(),
            files.to_string(),
            rounds.to_string(),
        ],
    )
}

/// Hard-linked files kept read-only (TRUST-3): `call command` in a pnpm-style tree of 50 000
/// files all linked into a store outside it (the scan, the cover and its binds), against the
/// same tree without links (the scan only).
fn links(args: &[String]) -> Result<(), String> {
    let runs = flag(args, "--runs", 11)?;
    let files = flag(args, "--files", 50_000)?;
    let agent_exec = release_agent_exec()?;
    let root = std::env::temp_dir().join(format!("agent-exec-bench-links-{files}"));
    let marker = root.join(".complete");
    let io = |e: std::io::Error| format!("building the bench tree under {}: {e}", root.display());
    if !marker.exists() {
        let _ = fs::remove_dir_all(&root);
        for i in 0..files {
            let (pkg, n) = (i / 50, i % 50);
            let rel = format!("node_modules/.pnpm/p{pkg}@1.0.0/node_modules/p{pkg}/f{n}.js");
            let store = root.join("store").join(format!("{i}"));
            if n == 0 {
                for tree in ["linked", "plain"] {
                    let dir = root.join(tree).join(&rel);
                    fs::create_dir_all(dir.parent().unwrap_or(&root)).map_err(io)?;
                }
                fs::create_dir_all(root.join("store")).map_err(io)?;
            }
            fs::write(&store, b"module.exports = 1;\n").map_err(io)?;
            fs::hard_link(&store, root.join("linked").join(&rel)).map_err(io)?;
            fs::write(root.join("plain").join(&rel), b"module.exports = 1;\n").map_err(io)?;
        }
        fs::write(&marker, b"").map_err(io)?;
    }
    let run_in = |tree: &str| {
        let mut c = Command::new(&agent_exec);
        c.args(["call", "command", "--workspace"])
            .arg(root.join(tree))
            .args(["--json", r#"{"command":"true"}"#]);
        c
    };
    compare(
        &format!("call command `true` in {files} hard-linked files vs the same files unlinked"),
        runs,
        &mut || run_in("linked"),
        &mut || run_in("plain"),
    )?;
    Ok(())
}

/// Builds `agent-exec` in release mode and returns the path of its binary.
fn release_agent_exec() -> Result<PathBuf, String> {
    let status = cargo()
        .args(["build", "--release", "-p", "agent-exec"])
        .status()
        .map_err(|e| format!("cannot start cargo: {e}"))?;
    if !status.success() {
        return Err("building agent-exec failed".to_owned());
    }
    Ok(target_dir().join("release").join("agent-exec"))
}

fn stop(args: &[String]) -> Result<(), String> {
    let runs = flag(args, "--runs", 7)?;
    for mode in ["subreaper", "pid-namespace"] {
        example(
            "proctree",
            "stop_bench",
            &[runs.to_string(), mode.to_owned()],
        )?;
    }
    Ok(())
}

/// Reads `--name value` from `args`, or `default`.
pub(crate) fn flag(args: &[String], name: &str, default: usize) -> Result<usize, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .filter(|v| *v > 0)
            .ok_or_else(|| format!("{name} needs a positive number, e.g. `{name} 10`")),
    }
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(workspace_root());
    cmd
}

/// Builds an example in release mode and returns the path of its binary.
fn release_example(package: &str, example: &str) -> Result<PathBuf, String> {
    let status = cargo()
        .args(["build", "--release", "-p", package, "--example", example])
        .status()
        .map_err(|e| format!("cannot start cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building example {package}/{example} failed"));
    }
    Ok(target_dir().join("release").join("examples").join(example))
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// Builds `package`'s example in release mode and runs it with `args`, its output shown as is
/// (benchmarks that time inside one process, alternating candidate and baseline).
fn example(package: &str, name: &str, args: &[String]) -> Result<(), String> {
    let binary = release_example(package, name)?;
    let status = Command::new(&binary)
        .args(args)
        .status()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{name} {args:?} failed ({status})"))
    }
}

/// One timed run of a whole process; its stdout is read in full (as a user of it would).
fn time_once(cmd: &mut Command) -> Result<(Duration, Vec<u8>), String> {
    let start = Instant::now();
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    let elapsed = start.elapsed();
    if !out.status.success() {
        return Err(format!("{cmd:?} failed: {}", out.status));
    }
    Ok((elapsed, out.stdout))
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// Times `candidate` and `baseline` alternately `runs` times after one warm-up each, prints
/// min/median/max of both and the ratio of medians (candidate / baseline).
fn compare(
    label: &str,
    runs: usize,
    candidate: &mut dyn FnMut() -> Command,
    baseline: &mut dyn FnMut() -> Command,
) -> Result<f64, String> {
    time_once(&mut candidate())?;
    time_once(&mut baseline())?;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        a.push(time_once(&mut candidate())?.0);
        b.push(time_once(&mut baseline())?.0);
    }
    let show = |name: &str, xs: &[Duration]| {
        let min = xs.iter().min().copied().unwrap_or_default();
        let max = xs.iter().max().copied().unwrap_or_default();
        println!(
            "  {name:<10} min {:>9.2} ms  median {:>9.2} ms  max {:>9.2} ms",
            min.as_secs_f64() * 1e3,
            median(xs.to_vec()).as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3
        );
    };
    println!("{label} ({runs} runs each, alternating):");
    show("candidate", &a);
    show("baseline", &b);
    let ratio = median(a).as_secs_f64() / median(b).as_secs_f64();
    println!("  ratio (candidate / baseline, medians): {ratio:.3}");
    Ok(ratio)
}

/// A tree of `files` regular files in 100-file directories, two levels deep, where every
/// 2 000th file has a second name in another directory. Reused across runs if already built.
fn scan_tree(files: usize) -> Result<(PathBuf, usize), String> {
    let root = std::env::temp_dir().join(format!("agent-exec-bench-scan-{files}"));
    let marker = root.join(".complete");
    let linked = files.div_ceil(2000);
    if marker.exists() {
        return Ok((root, linked * 2));
    }
    let _ = fs::remove_dir_all(&root);
    let io = |e: std::io::Error| format!("building the bench tree under {}: {e}", root.display());
    for i in 0..files {
        let dir = root.join(format!("d{:03}/e{:03}", i / 10_000, (i / 100) % 100));
        if i % 100 == 0 {
            fs::create_dir_all(&dir).map_err(io)?;
        }
        let file = dir.join(format!("f{i:06}.txt"));
        fs::write(&file, b"x\n").map_err(io)?;
        if i % 2000 == 0 {
            let links = root.join("links");
            fs::create_dir_all(&links).map_err(io)?;
            fs::hard_link(&file, links.join(format!("l{i:06}"))).map_err(io)?;
        }
    }
    fs::write(&marker, b"").map_err(io)?;
    Ok((root, linked * 2))
}

fn sorted_lines(bytes: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(bytes)
        .lines()
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

fn scan(args: &[String]) -> Result<(), String> {
    let files = flag(args, "--files", 100_000)?;
    let runs = flag(args, "--runs", 10)?;
    let (root, expected) = scan_tree(files)?;
    let scanner = release_example("fsguard", "scan_links")?;
    let root_arg: &Path = &root;
    let mut candidate = || {
        let mut c = Command::new(&scanner);
        c.arg(root_arg);
        c
    };
    let mut baseline = || {
        let mut c = Command::new("find");
        c.arg(root_arg).args(["-type", "f", "-links", "+1"]);
        c
    };
    // The figures mean nothing unless both find the same files.
    let ours = sorted_lines(&time_once(&mut candidate())?.1);
    let theirs = sorted_lines(&time_once(&mut baseline())?.1);
    if ours != theirs || ours.len() != expected {
        return Err(format!(
            "scan_links and find disagree (or miss links): {} vs {} paths, expected {expected}",
            ours.len(),
            theirs.len()
        ));
    }
    println!(
        "tree: {} ({files} files, {expected} with link count > 1); both tools agree",
        root.display()
    );
    compare(
        "fsguard::scan_hard_links (scan_links) vs find -type f -links +1",
        runs,
        &mut candidate,
        &mut baseline,
    )?;
    Ok(())
}

/// One criterion benchmark target whose group holds a baseline and the candidates measured
/// against it (house rule 9: a ratio in the same run, not a figure alone).
struct Micro {
    package: &'static str,
    bench: &'static str,
    group: &'static str,
    baseline: &'static str,
    candidates: &'static [&'static str],
}

const MICRO: &[Micro] = &[
    // `decide` against parsing the same tool arguments from JSON, which every call does first.
    Micro {
        package: "argv-policy",
        bench: "decide",
        group: "decide",
        baseline: "args_from_json",
        candidates: &["allowlist_hit", "script", "refusal"],
    },
    // The evaluator against building the profile it evaluates (what every macOS call does).
    Micro {
        package: "seatbelt",
        bench: "eval",
        group: "sbpl",
        baseline: "build_command_profile",
        candidates: &["decide_inside", "decide_outside", "parse_rendered"],
    },
];

/// `bench micro`: runs each criterion target (briefly unless told otherwise: the machine is
/// shared), then prints each candidate's median against its group's baseline.
fn micro(args: &[String]) -> Result<(), String> {
    let short = ["--warm-up-time", "1", "--measurement-time", "2"].map(str::to_owned);
    let criterion_args = if args.is_empty() { &short[..] } else { args };
    for m in MICRO {
        let status = cargo()
            .args(["bench", "-p", m.package, "--bench", m.bench, "--"])
            .args(criterion_args)
            .status()
            .map_err(|e| format!("cannot start cargo: {e}"))?;
        if !status.success() {
            return Err(format!(
                "cargo bench -p {} --bench {} failed",
                m.package, m.bench
            ));
        }
    }
    for m in MICRO {
        let base = criterion_median(m.group, m.baseline)?;
        println!(
            "{}/{} (baseline {}: median {:.0} ns):",
            m.package, m.group, m.baseline, base
        );
        for candidate in m.candidates {
            let ns = criterion_median(m.group, candidate)?;
            println!(
                "  {candidate:<16} median {ns:>10.0} ns  ratio {:.3}",
                ns / base
            );
        }
    }
    Ok(())
}

/// The median (ns) criterion saved for `group/function` in this run.
fn criterion_median(group: &str, function: &str) -> Result<f64, String> {
    let path = target_dir()
        .join("criterion")
        .join(group)
        .join(function)
        .join("new/estimates.json");
    let text = fs::read_to_string(&path)
        .map_err(|e| format!("criterion wrote no {}: {e}", path.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not criterion's JSON: {e}", path.display()))?;
    json["median"]["point_estimate"]
        .as_f64()
        .ok_or_else(|| format!("{} has no median", path.display()))
}
