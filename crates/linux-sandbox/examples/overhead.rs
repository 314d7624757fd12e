//! Measures what the sandbox adds to starting `/bin/true`, against a bare
//! `std::process::Command` in the same run (variants interleaved, so machine load hits all of
//! them alike), and prints the probe (what `agent-exec doctor` shows).
//! Run: `cargo run --release -p linux-sandbox --example overhead -- 300`.

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use linux_sandbox::{Access, Policy, probe};

/// The system paths of the `command` spec (a copy of `exec`'s lists, which this leaf cannot
/// depend on), so `prepare` is measured on the ~40 paths a real call grants.
const EXEC_DIRS: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr/bin",
    "/usr/sbin",
    "/usr/local/bin",
    "/lib",
    "/lib64",
    "/lib32",
    "/usr/lib",
    "/usr/lib64",
    "/usr/lib32",
    "/usr/libexec",
    "/usr/local/lib",
];
const READ: &[&str] = &[
    "/usr/share",
    "/usr/local/share",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ssl/certs",
    "/etc/ca-certificates",
    "/etc/alternatives",
    "/etc/mime.types",
    "/etc/gitconfig",
    "/etc/inputrc",
    "/etc/python3",
    "/etc/python3.11",
    "/dev/urandom",
    "/dev/random",
    "/proc/meminfo",
    "/proc/cpuinfo",
    "/proc/stat",
    "/sys/devices/system/cpu",
];
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// The `command` policy; `system` marks the fixed locations with [`Policy::allow_system`]
/// (cached descriptors) instead of [`Policy::allow_if_exists`] (opened on every call).
fn command_policy(work: &std::path::Path, system: bool) -> Policy {
    let grant = |policy: Policy, path: &str, access| {
        if system {
            policy.allow_system(path, access)
        } else {
            policy.allow_if_exists(path, access)
        }
    };
    let mut policy = Policy::new();
    for dir in EXEC_DIRS {
        policy = grant(policy, dir, Access::READ | Access::EXECUTE);
    }
    for path in READ {
        policy = grant(policy, path, Access::READ);
    }
    for dev in DEVICES {
        policy = grant(policy, dev, Access::READ | Access::WRITE);
    }
    policy.allow(work, Access::READ | Access::WRITE)
}

fn run(mut command: Command) {
    let status = command.status();
    assert!(status.is_ok_and(|s| s.success()));
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args().nth(1).map_or(Ok(200), |s| s.parse())?;
    println!("{}\n", probe());
    let work = std::env::temp_dir();
    let policy = command_policy(&work, true);
    let uncached = command_policy(&work, false);
    println!("{}", policy.prepare()?.enforcement());

    // A home granted read-only with private paths beneath it: the grant is
    // split into one rule per entry of the home and of `.config` (none of the private paths
    // exists, so no mount is needed and only Landlock's cost shows).
    let homes = tempfile_homes()?;
    let whole = |home: &std::path::Path| policy.clone().allow(home, Access::READ | Access::EXECUTE);
    let split = |home: &std::path::Path| {
        [".ssh", ".netrc", ".docker", ".config/gh", ".config/gcloud"]
            .iter()
            .fold(whole(home), |p, h| p.hide(home.join(h)))
    };
    let (small_whole, small_split) = (whole(&homes[0]), split(&homes[0]));
    let (big_whole, big_split) = (whole(&homes[1]), split(&homes[1]));

    let variants: [(&str, &dyn Fn()); 10] = [
        ("bare /bin/true (std uses vfork)", &|| {
            run(Command::new("/bin/true"))
        }),
        ("bare, fork path (empty pre_exec)", &|| {
            let mut command = Command::new("/bin/true");
            // SAFETY: an empty hook is async-signal-safe; it only makes std fork, not vfork.
            unsafe { command.pre_exec(|| Ok(())) };
            run(command);
        }),
        ("prepare(), allow_if_exists", &|| {
            uncached
                .prepare()
                .map(drop)
                .unwrap_or_else(|e| panic!("{e}"));
        }),
        ("prepare(), allow_system", &|| {
            policy.prepare().map(drop).unwrap_or_else(|e| panic!("{e}"));
        }),
        ("prepare + sandboxed spawn", &|| {
            let mut command = Command::new("/bin/true");
            let sandbox = policy.prepare().unwrap_or_else(|e| panic!("{e}"));
            sandbox.install(&mut command);
            run(command);
        }),
        ("prepare(), home of 200 whole", &|| {
            small_whole
                .prepare()
                .map(drop)
                .unwrap_or_else(|e| panic!("{e}"));
        }),
        ("prepare(), home of 200 split", &|| {
            small_split
                .prepare()
                .map(drop)
                .unwrap_or_else(|e| panic!("{e}"));
        }),
        ("prepare(), home of 2000 whole", &|| {
            big_whole
                .prepare()
                .map(drop)
                .unwrap_or_else(|e| panic!("{e}"));
        }),
        ("prepare(), home of 2000 split", &|| {
            big_split
                .prepare()
                .map(drop)
                .unwrap_or_else(|e| panic!("{e}"));
        }),
        ("prepare + spawn, home of 2000 split", &|| {
            let mut command = Command::new("/bin/true");
            let sandbox = big_split.prepare().unwrap_or_else(|e| panic!("{e}"));
            sandbox.install(&mut command);
            run(command);
        }),
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); variants.len()];
    for _ in 0..n {
        for (i, (_, f)) in variants.iter().enumerate() {
            let start = Instant::now();
            f();
            samples[i].push(start.elapsed());
        }
    }
    let medians: Vec<Duration> = samples
        .into_iter()
        .map(|mut s| {
            s.sort();
            s[s.len() / 2]
        })
        .collect();
    println!("median of {n}:");
    for ((name, _), median) in variants.iter().zip(&medians) {
        println!("  {name:34} {median:?}");
    }
    for (label, whole, split) in [
        ("200", medians[5], medians[6]),
        ("2000", medians[7], medians[8]),
    ] {
        println!(
            "home of {label} entries split around 5 private paths: +{:?} per prepare ({:.2}x)",
            split.saturating_sub(whole),
            split.as_secs_f64() / whole.as_secs_f64()
        );
    }
    let (bare, forked, sandboxed) = (medians[0], medians[1], medians[4]);
    println!(
        "overhead over bare: {:?} ({:.2}x); over the fork path: {:?} ({:.2}x)",
        sandboxed.saturating_sub(bare),
        sandboxed.as_secs_f64() / bare.as_secs_f64(),
        sandboxed.saturating_sub(forked),
        sandboxed.as_secs_f64() / forked.as_secs_f64()
    );
    Ok(())
}

/// Two homes under the temp dir: 200 and 2 000 entries (files and a few directories), each with
/// a `.config` of 50 entries. Left behind for the next run (same names).
fn tempfile_homes() -> std::io::Result<[std::path::PathBuf; 2]> {
    let base = std::env::temp_dir().join("linux-sandbox-overhead-homes");
    let make = |n: usize| -> std::io::Result<std::path::PathBuf> {
        let home = base.join(format!("home-{n}"));
        std::fs::create_dir_all(home.join(".config"))?;
        for i in 0..n {
            let entry = home.join(format!("e{i:05}"));
            if i % 10 == 0 {
                std::fs::create_dir_all(entry)?;
            } else {
                std::fs::write(entry, "")?;
            }
        }
        for i in 0..50 {
            std::fs::create_dir_all(home.join(format!(".config/c{i:03}")))?;
        }
        Ok(home)
    };
    Ok([make(200)?, make(2000)?])
}
