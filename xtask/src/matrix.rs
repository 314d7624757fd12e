//! `cargo xtask matrix [--full]`: the escape suite (`tests/tests/escape.rs` and
//! `private_world.rs`) and the liveness suite (`tests/tests/liveness.rs`) under each sandbox
//! capability level this project supports, each forced on this one machine
//! (invariants 2 and 4; the levels are described in docs/architecture.md, "Capability
//! matrix"):
//!
//! - a Landlock ABI from 1 to the kernel's, through `AGENT_EXEC_LANDLOCK_ABI_MAX` (it only
//!   lowers the ABI the sandbox uses);
//! - with user namespaces (this machine) or without: the suite runs inside a user namespace
//!   (ids 0…65535 mapped to themselves) whose `/proc/sys/user/max_user_namespaces` is 0, as on
//!   a hardened distribution or in most containers. Its root still makes PID and mount
//!   namespaces, as a real root host there does; an unprivileged user there makes none, so
//!   proctree runs in subreaper mode (no PID namespace) and the sandbox has no private
//!   namespaces — the weakest level;
//! - root, uid 65534, and the CI test user (`AGENT_EXEC_TEST_USER`) when it exists.
//!
//! The test binaries are built once (`cargo test --no-run --message-format=json` names them)
//! and copied with `agent-exec` into a directory every user can read; each level runs them with
//! its environment. `AGENT_EXEC_REQUIRE` is set to what the level must offer, so a facility
//! the level promises fails its tests when missing instead of skipping them, and the suites'
//! own "again as nobody" re-runs are turned off (the matrix has rows for that). A cell is
//! `pass` (with the tests refused as the level documents, and the skips, counted) or `FAIL`;
//! any FAIL makes the task fail.
//!
//! It refuses to run unless root: switching users and writing another user namespace's id maps
//! need it. It never changes this machine's own `max_user_namespaces` (other sessions share it):
//! only that of the user namespace it makes, which ends with the suite.

use std::ffi::CString;
use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use crate::workspace_root;

/// Who runs the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum User {
    Root,
    Nobody,
    /// `AGENT_EXEC_TEST_USER` (`.ci/run` makes it); its row is left out where it is absent.
    Tester,
}

/// One suite: the test binaries it runs and the variable that turns off its own re-run as
/// nobody.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Suite {
    Escape,
    Liveness,
}

impl Suite {
    fn name(self) -> &'static str {
        match self {
            Suite::Escape => "escape",
            Suite::Liveness => "liveness",
        }
    }

    /// `(test target, its "already unprivileged" variable)`.
    fn binaries(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Suite::Escape => &[
                ("escape", "AGENT_EXEC_ESCAPE_UNPRIVILEGED"),
                ("private_world", "AGENT_EXEC_PRIVATE_WORLD_UNPRIVILEGED"),
            ],
            Suite::Liveness => &[("liveness", "AGENT_EXEC_LIVENESS_UNPRIVILEGED")],
        }
    }
}

/// One capability level.
#[derive(Clone, Copy, Debug)]
struct Level {
    /// `AGENT_EXEC_LANDLOCK_ABI_MAX`; `None`: the kernel's.
    abi: Option<u8>,
    /// Whether the suite may make user namespaces.
    userns: bool,
    user: User,
}

impl Level {
    fn name(&self, kernel_abi: u8) -> String {
        let user = match self.user {
            User::Root => "root",
            User::Nobody => "nobody",
            User::Tester => "test user",
        };
        format!(
            "ABI {} {} {user}",
            self.abi.unwrap_or(kernel_abi),
            if self.userns { "userns" } else { "no-userns" }
        )
    }

    /// What the level must offer (`AGENT_EXEC_REQUIRE`): a missing one fails the tests that
    /// need it. Without user namespaces an unprivileged user has no PID or mount namespace.
    fn require(&self) -> &'static str {
        match (self.userns, self.user) {
            (false, User::Root) => "landlock,seccomp,pidns,mountns,proc",
            (false, _) => "landlock,seccomp",
            (true, _) => "landlock,seccomp,userns,pidns,mountns,proc",
        }
    }
}

/// The levels `cargo xtask matrix` runs, and which suites at each. The default is a subset that
/// keeps CI short (the `test` step already runs both suites at the kernel's level, root and
/// nobody): every weaker layer once for the escape suite, liveness where the namespaces go.
fn levels(full: bool, kernel_abi: u8) -> Vec<(Level, Vec<Suite>)> {
    let users = [User::Root, User::Nobody, User::Tester];
    let both = vec![Suite::Escape, Suite::Liveness];
    if full {
        let mut out = Vec::new();
        for userns in [true, false] {
            for abi in (1..=kernel_abi).rev() {
                for user in users {
                    let abi = (abi != kernel_abi).then_some(abi);
                    out.push((Level { abi, userns, user }, both.clone()));
                }
            }
        }
        return out;
    }
    let level = |abi: Option<u8>, userns, user| Level { abi, userns, user };
    let escape = || vec![Suite::Escape];
    vec![
        (level(None, true, User::Root), escape()),
        (level(Some(5), true, User::Root), escape()),
        (level(Some(3), true, User::Root), escape()),
        (level(Some(1), true, User::Root), escape()),
        (level(Some(1), true, User::Nobody), escape()),
        (level(None, false, User::Root), both.clone()),
        (level(None, false, User::Nobody), both),
        (level(Some(5), false, User::Nobody), escape()),
        (level(Some(1), false, User::Nobody), escape()),
    ]
}

/// `cargo xtask ci`'s step: the default subset. A developer's machine that is not root skips
/// it loudly; where `AGENT_EXEC_REQUIRE` is set (CI: `.ci/run`, as root) it must run.
pub(crate) fn ci() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let required = std::env::var("AGENT_EXEC_REQUIRE").is_ok_and(|v| !v.trim().is_empty());
    if !root && !required {
        println!(
            "xtask ci: skipped: `matrix` needs root (it switches users and writes id maps); \
             run `sudo cargo xtask matrix`, or let CI run it"
        );
        return Ok(());
    }
    run(&[])
}

/// The task.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let full = match args {
        [] => false,
        [flag] if flag == "--full" => true,
        _ => return Err(format!("usage: cargo xtask matrix [--full] (got {args:?})")),
    };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(
            "the matrix switches users and makes user namespaces with id maps, which \
                    needs root; run it as root (CI does)"
                .to_owned(),
        );
    }
    let kernel_abi = kernel_landlock_abi()?;
    let started = Instant::now();
    let bins = Binaries::build()?;
    let test_user = std::env::var("AGENT_EXEC_TEST_USER")
        .ok()
        .and_then(|name| user_ids(&name).map(|ids| (name, ids)));
    if test_user.is_none() {
        println!("matrix: no AGENT_EXEC_TEST_USER account here; its rows are left out");
    }
    let mut rows = Vec::new();
    let mut failed = false;
    for (level, suites) in levels(full, kernel_abi) {
        if level.user == User::Tester && test_user.is_none() {
            continue;
        }
        let mut cells = Vec::new();
        for suite in [Suite::Escape, Suite::Liveness] {
            if !suites.contains(&suite) {
                cells.push("-".to_owned());
                continue;
            }
            let t = Instant::now();
            let cell = run_suite(&bins, &level, suite, test_user.as_ref());
            let seconds = t.elapsed().as_secs();
            println!(
                "matrix: {:<26} {:<9} {} ({seconds} s)",
                level.name(kernel_abi),
                suite.name(),
                cell.summary()
            );
            if let Cell::Fail { output, .. } = &cell {
                println!("{output}");
                failed = true;
            }
            cells.push(cell.summary());
        }
        rows.push((level.name(kernel_abi), cells));
    }
    let mut table = format!(
        "\n{:<26} | {:<34} | {}\n",
        "level",
        Suite::Escape.name(),
        Suite::Liveness.name()
    );
    let _ = writeln!(table, "{}", "-".repeat(26 + 34 + 40));
    for (name, cells) in &rows {
        let _ = writeln!(table, "{name:<26} | {:<34} | {}", cells[0], cells[1]);
    }
    println!(
        "{table}\nmatrix: {} levels in {} s ({})",
        rows.len(),
        started.elapsed().as_secs(),
        if full { "--full" } else { "default subset" }
    );
    if failed {
        Err(
            "a level FAILed (its output is above); a broken escape test at a level is a \
             sandbox bug for kernels or hosts like it: fix it in linux-sandbox"
                .to_owned(),
        )
    } else {
        Ok(())
    }
}

/// The kernel's Landlock ABI, as the sandbox's own probe would see it uncapped.
fn kernel_landlock_abi() -> Result<u8, String> {
    // SAFETY: with a NULL attribute pointer, size 0 and the VERSION flag (1) the kernel only
    // returns the ABI number.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    u8::try_from(abi)
        .ok()
        .filter(|&abi| abi >= 1)
        .map(|abi| abi.min(10))
        .ok_or_else(|| {
            "this kernel has no Landlock, so no level can run (every call is refused with \
             AGENT_EXEC_SANDBOX_UNAVAILABLE); run the matrix on Linux 5.13+ with Landlock"
                .to_owned()
        })
}

/// The test binaries and `agent-exec`, copied where every user can read them.
struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    fn build() -> Result<Binaries, String> {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let root = workspace_root();
        println!("xtask matrix: cargo build -p agent-exec");
        let status = Command::new(&cargo)
            .args(["build", "-p", "agent-exec"])
            .current_dir(&root)
            .status()
            .map_err(|e| format!("cannot start cargo: {e}"))?;
        if !status.success() {
            return Err("cargo build -p agent-exec failed".to_owned());
        }
        let targets = ["escape", "private_world", "liveness"];
        let mut args = vec!["test", "-p", "tests", "--no-run", "--message-format=json"];
        for t in targets {
            args.extend(["--test", t]);
        }
        println!("xtask matrix: cargo {}", args.join(" "));
        let out = Command::new(&cargo)
            .args(&args)
            .current_dir(&root)
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot start cargo: {e}"))?;
        if !out.status.success() {
            return Err("building the test binaries failed".to_owned());
        }
        // Short: a workspace beneath TMPDIR must leave room for unix socket paths (108 bytes).
        let dir = PathBuf::from(format!("/tmp/aem-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        let bins = Binaries { dir };
        let mut found = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let name = msg["target"]["name"].as_str().unwrap_or_default();
            if let (true, Some(exe)) = (targets.contains(&name), msg["executable"].as_str()) {
                bins.copy(Path::new(exe), name)?;
                found.push(name.to_owned());
            }
        }
        if let Some(missing) = targets.iter().find(|t| !found.iter().any(|f| f == *t)) {
            return Err(format!("cargo named no test binary for `{missing}`"));
        }
        bins.copy(&root.join("target/debug/agent-exec"), "agent-exec")?;
        // Every level's user reads them and makes its temp files beside them.
        std::fs::set_permissions(&bins.dir, std::fs::Permissions::from_mode(0o1777))
            .map_err(|e| format!("cannot open {} to everyone: {e}", bins.dir.display()))?;
        Ok(bins)
    }

    fn copy(&self, from: &Path, name: &str) -> Result<(), String> {
        let to = self.dir.join(name);
        std::fs::copy(from, &to)
            .and_then(|_| std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)))
            .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Binaries {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What one suite did at one level.
enum Cell {
    Pass {
        passed: usize,
        refused: usize,
        skipped: usize,
    },
    Fail {
        failed: usize,
        output: String,
    },
}

impl Cell {
    fn summary(&self) -> String {
        match self {
            Cell::Pass {
                passed,
                refused,
                skipped,
            } => {
                let mut text = format!("pass {passed}");
                if *refused > 0 {
                    let _ = write!(text, ", {refused} refused(expected)");
                }
                if *skipped > 0 {
                    let _ = write!(text, ", {skipped} skipped");
                }
                text
            }
            Cell::Fail { failed, .. } => format!("FAIL ({failed} failed)"),
        }
    }
}

/// The line the liveness suite prints for a test the level cannot give, that ended with the
/// documented refusal (its table `REFUSED_AT`).
const REFUSED_MARK: &str = "refused as expected:";

fn run_suite(
    bins: &Binaries,
    level: &Level,
    suite: Suite,
    test_user: Option<&(String, (u32, u32))>,
) -> Cell {
    let (mut passed, mut failed, mut refused, mut skipped) = (0, 0, 0, 0);
    let mut output = String::new();
    for (target, unprivileged_var) in suite.binaries() {
        let home = bins.path("home");
        let _ = std::fs::create_dir_all(&home);
        let _ = std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o1777));
        let mut cmd = match level.user {
            User::Root => Command::new(bins.path(target)),
            User::Nobody => setpriv(&["--reuid=65534", "--regid=65534", "--clear-groups"]),
            User::Tester => {
                let (name, (uid, gid)) = test_user.cloned().unwrap_or_default();
                let mut cmd = setpriv(&[
                    &format!("--reuid={uid}"),
                    &format!("--regid={gid}"),
                    "--init-groups",
                ]);
                cmd.env("USER", &name).env("LOGNAME", &name);
                cmd
            }
        };
        if level.user != User::Root {
            cmd.arg(bins.path(target));
        }
        cmd.args(["--test-threads=2", "--nocapture"])
            .current_dir(workspace_root().join("tests"))
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &home)
            .env("TMPDIR", "/tmp")
            .env("AGENT_EXEC_BIN", bins.path("agent-exec"))
            .env("AGENT_EXEC_REQUIRE", level.require())
            .env(unprivileged_var, "1")
            .stdin(Stdio::null());
        for var in [
            "AGENT_EXEC_TEST_USER",
            "AGENT_EXEC_TEST_PASSWORD",
            "RUST_BACKTRACE",
        ] {
            if let Some(value) = std::env::var_os(var) {
                cmd.env(var, value);
            }
        }
        if let Some(abi) = level.abi {
            cmd.env("AGENT_EXEC_LANDLOCK_ABI_MAX", abi.to_string());
        }
        let out = if level.userns {
            cmd.output()
        } else {
            output_without_user_namespaces(cmd)
        };
        let out = match out {
            Ok(out) => out,
            Err(e) => {
                return Cell::Fail {
                    failed: 1,
                    output: format!("{target}: cannot start: {e}"),
                };
            }
        };
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        refused += text.matches(REFUSED_MARK).count();
        skipped += text.matches("skipped:").count();
        let (p, f) = test_counts(&text);
        passed += p;
        if !out.status.success() || f > 0 {
            failed += f.max(1);
            let _ = write!(
                output,
                "--- {target} at this level ({}):\n{}",
                out.status,
                failures(&text)
            );
        }
    }
    if failed > 0 {
        Cell::Fail { failed, output }
    } else {
        Cell::Pass {
            passed,
            refused,
            skipped,
        }
    }
}

fn setpriv(ids: &[&str]) -> Command {
    let mut cmd = Command::new("/usr/bin/setpriv");
    cmd.args(ids).arg("--");
    cmd
}

/// Passed and failed counts of libtest's `test result:` lines.
fn test_counts(text: &str) -> (usize, usize) {
    let mut counts = (0, 0);
    for line in text.lines().filter(|l| l.starts_with("test result:")) {
        let number = |word: &str| {
            line.split(';')
                .find(|part| part.contains(word))
                .and_then(|part| part.split_whitespace().rev().nth(1)?.parse::<usize>().ok())
                .unwrap_or(0)
        };
        counts.0 += number(" passed");
        counts.1 += number(" failed");
    }
    counts
}

/// libtest's failure report (from `failures:` on), or the whole output's last lines.
fn failures(text: &str) -> String {
    match text.find("\nfailures:\n") {
        Some(at) => text[at..].to_owned(),
        None => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(60)..].join("\n")
        }
    }
}

/// uid and gid of `name`, from `/etc/passwd`.
fn user_ids(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.first() == Some(&name) && fields.len() > 3)
            .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
            .flatten()
    })
}

/// The ids the user namespace of a no-userns level maps (to themselves): root, 65534 and any
/// ordinary account.
const MAPPED_IDS: u32 = 65536;

/// Runs `cmd` in a new user namespace (ids 0…65535 mapped to themselves, so its root is this
/// root and `setpriv` can switch to 65534 or the test user there) whose
/// `max_user_namespaces` is 0, so nothing in it can make another.
///
/// The child unshares in `pre_exec` and waits; a thread here writes its id maps (writing
/// another process's maps needs this namespace's `CAP_SETUID`, which the child no longer has
/// here) and lets it go on; the child then sets the limit, as root of its own namespace, and
/// execs. `pre_exec` code runs between fork and exec: raw system calls on memory made before
/// the fork only.
fn output_without_user_namespaces(mut cmd: Command) -> std::io::Result<Output> {
    let (ready_read, ready_write) = pipe()?;
    let (go_read, go_write) = pipe()?;
    let limit = CString::new("/proc/sys/user/max_user_namespaces").unwrap_or_default();
    let mapper = std::thread::spawn(move || -> std::io::Result<()> {
        let mut pid = [0u8; 4];
        read_exact(ready_read, &mut pid)?;
        let pid = i32::from_ne_bytes(pid);
        let map = format!("0 0 {MAPPED_IDS}\n");
        for file in ["uid_map", "gid_map"] {
            std::fs::write(format!("/proc/{pid}/{file}"), &map)?;
        }
        write_all(go_write, b"g")
    });
    // SAFETY: the closure makes raw system calls (unshare, getpid, read, write, open, close)
    // on stack memory and the C string made above; it allocates nothing and touches no lock.
    unsafe {
        cmd.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWUSER) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let pid = libc::getpid().to_ne_bytes();
            if libc::write(ready_write, pid.as_ptr().cast(), pid.len()) != 4 {
                return Err(std::io::Error::last_os_error());
            }
            let mut go = 0u8;
            if libc::read(go_read, (&mut go as *mut u8).cast(), 1) != 1 {
                return Err(std::io::Error::other("the id maps were not written"));
            }
            let fd = libc::open(limit.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 || libc::write(fd, b"0\n".as_ptr().cast(), 2) != 2 {
                return Err(std::io::Error::last_os_error());
            }
            libc::close(fd);
            Ok(())
        });
    }
    let out = cmd.output();
    // The child's ends are closed here once it ran or failed, so the mapper cannot hang on a
    // child that never unshared.
    for fd in [ready_write, go_read] {
        // SAFETY: our own descriptors from `pipe`, closed once.
        unsafe { libc::close(fd) };
    }
    let mapped = mapper
        .join()
        .map_err(|_| std::io::Error::other("the id-map thread panicked"))?;
    let out = out?;
    mapped.map_err(|e| std::io::Error::other(format!("writing the id maps: {e}")))?;
    Ok(out)
}

fn pipe() -> std::io::Result<(libc::c_int, libc::c_int)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid out-array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((fds[0], fds[1]))
}

fn read_exact(fd: libc::c_int, buf: &mut [u8]) -> std::io::Result<()> {
    // SAFETY: reads into a valid buffer of its length; `fd` is ours and closed once here.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    unsafe { libc::close(fd) };
    if usize::try_from(n).ok() == Some(buf.len()) {
        Ok(())
    } else {
        Err(std::io::Error::other(
            "the child never reached its user namespace",
        ))
    }
}

fn write_all(fd: libc::c_int, buf: &[u8]) -> std::io::Result<()> {
    // SAFETY: writes from a valid buffer of its length; `fd` is ours and closed once here.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    unsafe { libc::close(fd) };
    if usize::try_from(n).ok() == Some(buf.len()) {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtest_result_lines_are_summed() {
        let text = "test result: ok. 38 passed; 0 failed; 0 ignored\nfoo\n\
                    test result: FAILED. 3 passed; 2 failed; 1 ignored";
        assert_eq!(test_counts(text), (41, 2));
    }

    #[test]
    fn the_default_matrix_is_a_subset_of_the_full_one() {
        let full = levels(true, 7);
        assert_eq!(full.len(), 7 * 2 * 3);
        for (level, suites) in levels(false, 7) {
            assert!(
                full.iter().any(|(l, s)| l.name(7) == level.name(7)
                    && suites.iter().all(|suite| s.contains(suite))),
                "{}",
                level.name(7)
            );
        }
    }

    #[test]
    fn a_level_without_user_namespaces_requires_no_namespace_of_an_unprivileged_user() {
        let nobody = Level {
            abi: None,
            userns: false,
            user: User::Nobody,
        };
        assert_eq!(nobody.require(), "landlock,seccomp");
        let root = Level {
            user: User::Root,
            ..nobody
        };
        assert!(root.require().contains("pidns"));
        assert!(!root.require().contains("userns"));
    }
}
