//! Helpers shared by this crate's integration tests: a mirror fixture with its lease, and the
//! sandbox probe. The generic pieces (snapshots, markers, survivor scans, unprivileged re-runs)
//! are the workspace's `testkit`.
// Test helpers: a failed setup step is a test failure, so they unwrap (clippy.toml exempts
// only `#[test]` functions themselves).
#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use fsguard::RootLease;
pub use testkit::{alive_with, marker, rerun_unprivileged};

/// A temp dir holding `mirror/` (the leased root) and room beside it; `write`, `outside`,
/// `outside_dir`, `snapshot` and `dir` come from [`testkit::TempTree`].
pub struct Fixture {
    tree: testkit::TempTree,
    pub mirror: PathBuf,
    pub lease: Arc<RootLease>,
}

impl Fixture {
    pub fn new() -> Fixture {
        let tree = testkit::TempTree::new("mirror");
        let lease = Arc::new(RootLease::acquire(&tree.root).unwrap());
        Fixture {
            mirror: tree.root.clone(),
            tree,
            lease,
        }
    }
}

impl std::ops::Deref for Fixture {
    type Target = testkit::TempTree;
    fn deref(&self) -> &testkit::TempTree {
        &self.tree
    }
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
