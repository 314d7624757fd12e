//! The evaluator checked against the real kernel: each case runs a probe under
//! `/usr/bin/sandbox-exec` with a shipped profile and compares the outcome with what
//! `BoundProfile::decide` predicts. This is the only place the model meets Seatbelt; it runs on
//! macOS (`cargo test -p seatbelt --test macos`, meant for `cargo xtask macos`) and prints
//! `skipped: not macOS` elsewhere. It compiles everywhere, so it cannot rot on Linux CI.
//!
//! Every probe runs in its own process group, and each case checks that the group is empty
//! afterwards (house rule 4).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use seatbelt::{
    ArgvProfileInput, BoundProfile, Decision, Operation as Op, ProfileSpec, SANDBOX_EXEC,
};

fn skip_unless_macos() -> bool {
    if !cfg!(target_os = "macos") {
        eprintln!(
            "skipped: not macOS (Seatbelt exists only there; the evaluator tests cover Linux)"
        );
        return true;
    }
    if !Path::new(SANDBOX_EXEC).exists() {
        eprintln!("skipped: {SANDBOX_EXEC} is missing on this Mac");
        return true;
    }
    false
}

/// A fresh directory, canonicalized (on macOS the temp dir lives behind the `/var` symlink).
fn fresh_dir(tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = std::env::temp_dir().join(format!("seatbelt-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

/// Runs `program args` under `bound`; true when it exited 0. Checks nothing outlived it.
fn probe(bound: &BoundProfile, program: &str, args: &[&str]) -> bool {
    let args: Vec<_> = args.iter().map(Into::into).collect();
    let mut cmd = Command::new(SANDBOX_EXEC);
    cmd.args(bound.sandbox_exec_args(Path::new(program), &args).unwrap())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let child = cmd.spawn().unwrap();
    let pgid = child.id();
    let out = child.wait_with_output().unwrap();
    // `pgrep -g` exits 1 exactly when the group is empty (0: members found, 2: usage error).
    let members = Command::new("/usr/bin/pgrep")
        .args(["-g", &pgid.to_string()])
        .output()
        .unwrap();
    assert_eq!(
        members.status.code(),
        Some(1),
        "process group {pgid} after the probe: {members:?}"
    );
    if !out.status.success() {
        eprintln!(
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    out.status.success()
}

fn agree(bound: &BoundProfile, op: Op, path: &Path, program: &str, args: &[&str]) {
    let predicted = bound.decide(op, path.to_str().unwrap()).unwrap();
    let actual = if probe(bound, program, args) {
        Decision::Allow
    } else {
        Decision::Deny
    };
    assert_eq!(
        actual,
        predicted,
        "{} on {}: the kernel and the model disagree",
        op.name(),
        path.display()
    );
}

#[test]
fn run_profile_decisions_match_the_kernel() {
    if skip_unless_macos() {
        return;
    }
    let base = fresh_dir("run");
    let (mirror, temp, outside) = (base.join("mirror"), base.join("temp"), base.join("outside"));
    for d in [&mirror, &temp, &outside, &mirror.join(".git")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(mirror.join("in.txt"), "a b\n").unwrap();
    std::fs::write(mirror.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(outside.join("secret.txt"), "s\n").unwrap();
    let bound = ProfileSpec::run("/usr/bin/wc", &mirror, &temp)
        .build()
        .unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_owned();

    let inside = mirror.join("in.txt");
    agree(
        &bound,
        Op::FileReadData,
        &inside,
        "/usr/bin/wc",
        &["-l", &s(&inside)],
    );
    let secret = outside.join("secret.txt");
    agree(
        &bound,
        Op::FileReadData,
        &secret,
        "/usr/bin/wc",
        &["-l", &s(&secret)],
    );
    // On a case-insensitive volume `.GIT/config` opens `.git/config`; either way it is denied.
    let upper = mirror.join(".GIT/config");
    agree(
        &bound,
        Op::FileReadData,
        &upper,
        "/usr/bin/wc",
        &["-l", &s(&upper)],
    );
    // Only the one program may be executed.
    agree(
        &bound,
        Op::ProcessExec,
        Path::new("/bin/cat"),
        "/bin/cat",
        &[&s(&inside)],
    );
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn command_profile_decisions_match_the_kernel() {
    if skip_unless_macos() {
        return;
    }
    let base = fresh_dir("cmd");
    let (scope, temp) = (base.join("scope"), base.join("temp"));
    for d in [&scope, &temp] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(scope.join("a.txt"), "a\n").unwrap();
    let bound = ProfileSpec::command(&scope, &temp).build().unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_owned();

    let new = scope.join("new.txt");
    agree(
        &bound,
        Op::FileWriteCreate,
        &new,
        "/usr/bin/touch",
        &[&s(&new)],
    );
    let link = scope.join("link.txt");
    agree(
        &bound,
        Op::FileLink,
        &link,
        "/bin/ln",
        &[&s(&scope.join("a.txt")), &s(&link)],
    );
    agree(
        &bound,
        Op::FileReadData,
        Path::new("/usr/lib"),
        "/bin/ls",
        &["/usr/lib"],
    );
    agree(
        &bound,
        Op::FileReadData,
        Path::new("/usr/share"),
        "/bin/ls",
        &["/usr/share"],
    );
    let outside = base.join("outside.txt");
    std::fs::write(&outside, "o\n").unwrap();
    agree(
        &bound,
        Op::FileReadData,
        &outside,
        "/bin/cat",
        &[&s(&outside)],
    );
    // A shell and its children work inside the scope (fork + exec of /bin tools).
    // The path travels as "$1", never as shell text (house rule 3).
    let t = s(&temp.join("t"));
    let script = r#"/bin/echo hi > "$1" && /bin/cat "$1""#;
    assert!(probe(&bound, "/bin/sh", &["-c", script, "sh", &t]));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn run_command_profile_decisions_match_the_kernel() {
    if skip_unless_macos() {
        return;
    }
    let base = fresh_dir("argv");
    let (home, temp) = (base.join("home"), base.join("temp"));
    let work = home.join("proj");
    for d in [
        &home.join(".ssh"),
        &home.join(".cache"),
        &work.join(".git/hooks"),
        &temp,
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(home.join(".ssh/id_ed25519"), "k\n").unwrap();
    std::fs::write(home.join(".profile"), "p\n").unwrap();
    let mut input = ArgvProfileInput::new(&work, &temp, &home);
    input.caches.push(home.join(".cache"));
    input.private.push(home.join(".ssh"));
    input.protected.push(work.join(".git/hooks"));
    let bound = input.build().unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_owned();

    let key = home.join(".ssh/id_ed25519");
    agree(&bound, Op::FileReadData, &key, "/bin/cat", &[&s(&key)]);
    let profile = home.join(".profile");
    agree(
        &bound,
        Op::FileReadData,
        &profile,
        "/bin/cat",
        &[&s(&profile)],
    );
    let cached = home.join(".cache/x");
    agree(
        &bound,
        Op::FileWriteCreate,
        &cached,
        "/usr/bin/touch",
        &[&s(&cached)],
    );
    let hook = work.join(".git/hooks/pre-commit");
    agree(
        &bound,
        Op::FileWriteCreate,
        &hook,
        "/usr/bin/touch",
        &[&s(&hook)],
    );
    // The model says renaming `.git` away is a `file-write-unlink` on it; this checks that the
    // kernel asks for that operation on a rename's source.
    let git = work.join(".git");
    agree(
        &bound,
        Op::FileWriteUnlink,
        &git,
        "/bin/mv",
        &[&s(&git), &s(&work.join(".git-old"))],
    );
    let _ = std::fs::remove_dir_all(&base);
}
