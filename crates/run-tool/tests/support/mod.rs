//! Helpers shared by the integration tests: a mirror fixture, a byte-exact snapshot of a tree,
//! process markers and the sandbox probe.
// Test helpers: a failed setup step is a test failure, so they unwrap (clippy.toml exempts
// only `#[test]` functions themselves).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use fsguard::RootLease;

/// A temp dir holding `mirror/` (the leased root) and room beside it.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub mirror: PathBuf,
    pub lease: Arc<RootLease>,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let mirror = dir.path().join("mirror");
        std::fs::create_dir(&mirror).unwrap();
        let mirror = mirror.canonicalize().unwrap();
        let lease = Arc::new(RootLease::acquire(&mirror).unwrap());
        Fixture { dir, mirror, lease }
    }

    /// Writes `contents` to `rel` under the mirror, creating parents.
    pub fn write(&self, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.mirror.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, contents).unwrap();
        path
    }

    pub fn snapshot(&self) -> Snapshot {
        snapshot(self.dir.path())
    }
}

/// Every entry below a root: kind, mode, size, mtime, and content or link target.
pub type Snapshot = BTreeMap<PathBuf, (String, u32, u64, i64, i64, Vec<u8>)>;

pub fn snapshot(root: &Path) -> Snapshot {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        // A directory or file the test made unreadable is recorded as such (its metadata still
        // counts), so tests that run unprivileged can snapshot too.
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let ft = meta.file_type();
            let (kind, content) = if ft.is_symlink() {
                (
                    "link",
                    std::fs::read_link(&path)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                )
            } else if ft.is_dir() {
                stack.push(path.clone());
                ("dir", Vec::new())
            } else if ft.is_file() {
                (
                    "file",
                    std::fs::read(&path).unwrap_or_else(|_| b"<unreadable>".to_vec()),
                )
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

/// A marker no other process on the machine carries.
pub fn marker() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "100.{}{:04}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Processes whose command line contains `marker`.
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

/// Whether this machine can sandbox; prints why not.
pub fn sandbox_available() -> bool {
    #[cfg(target_os = "linux")]
    {
        let probe = linux_sandbox::probe();
        if !probe.can_sandbox() {
            eprintln!("skipped: this kernel cannot sandbox: {probe}");
        }
        probe.can_sandbox()
    }
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!("skipped: end-to-end runs are tested on Linux");
        false
    }
}

/// For a test whose outcome differs for root (root reads files whatever their mode): when we
/// are root, runs `test` again in a copy of this test binary as `nobody` through `setpriv`,
/// asserts it passed, and returns true (the caller then returns). When we are not root,
/// returns false and the caller runs its body here.
pub fn rerun_unprivileged(test: &str) -> bool {
    if !rustix::process::geteuid().is_root() {
        return false;
    }
    let setpriv = Path::new("/usr/bin/setpriv");
    if !setpriv.exists() {
        eprintln!("skipped: running as root and no setpriv to re-run {test} unprivileged");
        return true;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let exe = dir.path().join("test-binary");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = std::process::Command::new(setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env_clear()
        .env("HOME", dir.path())
        .env("TMPDIR", dir.path())
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("re-ran {test} as nobody:\n{text}");
    assert!(out.status.success(), "{test} failed as nobody:\n{text}");
    assert!(
        text.contains("1 passed"),
        "{test} did not run as nobody:\n{text}"
    );
    true
}
