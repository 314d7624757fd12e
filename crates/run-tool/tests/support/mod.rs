//! Helpers shared by this crate's integration tests: a mirror fixture with its lease. The generic
//! pieces (snapshots, markers, survivor scans, unprivileged re-runs, the capability skip) are
//! the workspace's `testkit`.
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

/// Whether the sandbox can run here; when not, it says why and the caller returns (or, where
/// `AGENT_EXEC_REQUIRE` names what is missing, the test fails).
pub use testkit::sandbox_available;
