//! Test-only helpers shared by the workspace's integration tests (a dev-dependency, never a
//! normal one): a temp tree with a named root, a byte-exact snapshot of a tree, unique process
//! markers and a `/proc` scan for survivors (house rule 4), re-running a test as an
//! unprivileged user when the suite runs as root, and race fixtures (a [`Swapper`] exchanging
//! two names in a loop, an inotify [`Watch`] that proves nothing outside was touched), and the
//! one capability skip every suite uses ([`require`], [`sandbox_available`]): it prints why a
//! test skips, and fails the test instead when `AGENT_EXEC_REQUIRE` names what is missing; and
//! the test user with a known password for password gates ([`test_user`], [`run_as_test_user`]).
//!
//! Fixtures hand out paths, and each suite builds its own leases from them. The only workspace
//! crates it knows are the two leaves whose probes decide a capability skip (`linux-sandbox`,
//! `proctree`, on Linux), so a test skips exactly when the code it tests would refuse to run.
//!
//! ```
//! let tree = testkit::TempTree::new("scope");
//! tree.write("a/b.txt", "hello");
//! let before = tree.snapshot();
//! // ... run something that must not change the tree ...
//! assert_eq!(before, tree.snapshot());
//! ```
// Test helpers: a failed setup step is a test failure, so they unwrap (clippy.toml exempts
// only `#[test]` functions themselves).
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![deny(missing_docs)]

mod races;
mod require;
mod testuser;

pub use races::{Swapper, SwapperBuilder, Watch};
pub use require::{Capability, REQUIRE_VAR, require, sandbox_available};
pub use testuser::{
    TEST_PASSWORD_VAR, TEST_USER_VAR, TestUser, as_test_user, rerun_as_test_user, run_as_test_user,
    test_user,
};

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// `linux_sandbox::LANDLOCK_ABI_MAX_VAR`, named here too: testkit builds on every platform.
const LANDLOCK_ABI_MAX_VAR: &str = "AGENT_EXEC_LANDLOCK_ABI_MAX";

/// A temp dir holding one named, canonical root directory, with room beside it for things that
/// must stay outside.
#[derive(Debug)]
pub struct TempTree {
    /// The temp dir (removed on drop).
    pub dir: tempfile::TempDir,
    /// `<dir>/<name>`, canonicalized.
    pub root: PathBuf,
}

impl TempTree {
    /// A fresh temp dir with `<name>/` created inside it.
    pub fn new(name: &str) -> TempTree {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(name);
        std::fs::create_dir(&root).unwrap();
        let root = root.canonicalize().unwrap();
        TempTree { dir, root }
    }

    /// Writes `contents` to `rel` under the root, creating parents; returns the path.
    pub fn write(&self, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        write_file(&self.root.join(rel), contents)
    }

    /// Writes `contents` to `rel` under `<dir>/outside`, creating parents; returns the path.
    pub fn outside(&self, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        write_file(&self.outside_dir().join(rel), contents)
    }

    /// `<dir>/outside`, canonical (it may not exist yet).
    pub fn outside_dir(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap().join("outside")
    }

    /// A snapshot of the whole temp dir (the root and everything beside it).
    pub fn snapshot(&self) -> Snapshot {
        snapshot(self.dir.path())
    }
}

fn write_file(path: &Path, contents: impl AsRef<[u8]>) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, contents).unwrap();
    path.to_path_buf()
}

/// Every entry below a root: kind, mode, size, mtime (s, ns), and content or link target.
pub type Snapshot = BTreeMap<PathBuf, (String, u32, u64, i64, i64, Vec<u8>)>;

/// Snapshots everything below `root`. An entry the test made unreadable is recorded with its
/// metadata and `<unreadable>` content, so unprivileged runs can snapshot too.
pub fn snapshot(root: &Path) -> Snapshot {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let ft = meta.file_type();
            let (kind, content) = if ft.is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                ("link", target.into_os_string().into_encoded_bytes())
            } else if ft.is_dir() {
                stack.push(path.clone());
                ("dir", Vec::new())
            } else if ft.is_file() {
                let bytes = std::fs::read(&path).unwrap_or_else(|_| b"<unreadable>".to_vec());
                ("file", bytes)
            } else {
                ("other", Vec::new())
            };
            out.insert(
                path.strip_prefix(root).unwrap().to_path_buf(),
                (
                    kind.to_owned(),
                    meta.mode(),
                    meta.len(),
                    meta.mtime(),
                    meta.mtime_nsec(),
                    content,
                ),
            );
        }
    }
    out
}

/// A marker no other process on the machine carries, in a form `sleep` accepts
/// (`sleep 100.<digits>`; GNU sleep refuses an extra word and would exit at once).
pub fn marker() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "100.{}{:04}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// PIDs of processes whose command line contains `marker`.
pub fn alive_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if text.contains(marker) {
                found.push(pid);
            }
        }
    }
    found
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// For a test whose outcome differs for root (root reads files whatever their mode): when we
/// are root, runs `test` again in a copy of this test binary as uid 65534 through `setpriv`,
/// asserts it passed, and returns true (the caller then returns). When we are not root,
/// returns false and the caller runs its body here.
pub fn rerun_unprivileged(test: &str) -> bool {
    if !is_root() {
        return false;
    }
    let text = run_as_nobody(&["--exact", test, "--nocapture", "--test-threads=1"], &[]);
    assert!(
        text.contains("1 passed"),
        "{test} did not run as nobody:\n{text}"
    );
    true
}

/// A suite's `every_test_also_holds_unprivileged` (`skip`, its own name): when this is root and
/// not already that re-run (`env` unset), runs every other test of this binary again as uid
/// 65534 with `env` set, `threads` at a time, and asserts they passed. Otherwise does nothing.
pub fn rerun_suite_as_nobody(env: &str, skip: &str, threads: u32) {
    if std::env::var_os(env).is_some() || !is_root() {
        eprintln!("not root, or already the unprivileged run");
        return;
    }
    let threads = format!("--test-threads={threads}");
    let out = run_as_nobody(&[&threads, "--skip", skip], &[(env, "1")]);
    assert!(out.is_empty() || out.contains("test result: ok"), "{out}");
}

/// Runs this test binary again as uid 65534 with `args` (e.g. `--skip` the caller) and `env`,
/// asserts it passed, and returns its output. Skips loudly (empty output) without setpriv.
/// `AGENT_EXEC_REQUIRE` and `AGENT_EXEC_LANDLOCK_ABI_MAX` are passed on: a capability missing for the unprivileged user fails
/// there too instead of turning the re-run into a row of skips.
pub fn run_as_nobody(args: &[&str], env: &[(&str, &str)]) -> String {
    let setpriv = Path::new("/usr/bin/setpriv");
    if !setpriv.exists() {
        eprintln!("skipped: no /usr/bin/setpriv to re-run as an unprivileged user");
        return String::new();
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let exe = dir.path().join("test-binary");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = || {
        std::process::Command::new(setpriv)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&exe)
            .args(args)
            .env_clear()
            .env("HOME", dir.path())
            .env("TMPDIR", dir.path())
            .env("PATH", "/usr/bin:/bin")
            .env(REQUIRE_VAR, std::env::var(REQUIRE_VAR).unwrap_or_default())
            // The capability level `cargo xtask matrix` forces holds for the re-run too.
            .envs(std::env::var_os(LANDLOCK_ABI_MAX_VAR).map(|v| (LANDLOCK_ABI_MAX_VAR, v)))
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    // ETXTBSY: a process another test thread forked while the copy above was open for writing
    // holds that descriptor until it execs (close-on-exec closes it only then), and the kernel
    // refuses to execute a file open for writing. It clears within moments; retry, as Go's
    // os/exec does for the same race.
    let mut out = run();
    for attempt in 1..=20 {
        let busy = String::from_utf8_lossy(&out.stderr).contains("Text file busy");
        if out.status.success() || !busy {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20 * attempt));
        out = run();
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("re-ran as nobody ({args:?}):\n{text}");
    assert!(out.status.success(), "failed as nobody:\n{text}");
    text
}
