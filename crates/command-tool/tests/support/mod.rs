//! Helpers shared by this crate's integration tests: a scope fixture with its lease. The generic
//! pieces (snapshots, markers, survivor scans, unprivileged re-runs, the capability skip) are
//! the workspace's `testkit`.
// Test helpers: a failed setup step is a test failure, so they unwrap (clippy.toml exempts
// only `#[test]` functions themselves).
#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fsguard::RootLease;
pub use testkit::{alive_with, marker, rerun_unprivileged};

/// A temp dir holding `scope/` (the leased root) and room beside it; `write`, `outside`,
/// `outside_dir`, `snapshot` and `dir` come from [`testkit::TempTree`].
pub struct Fixture {
    tree: testkit::TempTree,
    pub scope: PathBuf,
    pub lease: Arc<RootLease>,
}

impl Fixture {
    pub fn new() -> Fixture {
        let tree = testkit::TempTree::new("scope");
        let lease = Arc::new(RootLease::acquire(&tree.root).unwrap());
        Fixture {
            scope: tree.root.clone(),
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

/// An approver that records what it was asked and answers from a fixed list.
#[derive(Debug, Default)]
pub struct Recorder {
    pub asked: std::sync::Mutex<Vec<(PathBuf, bool)>>,
    pub allow: Vec<PathBuf>,
}

impl Recorder {
    pub fn allowing(paths: &[&Path]) -> Recorder {
        Recorder {
            asked: Default::default(),
            allow: paths.iter().map(|p| p.to_path_buf()).collect(),
        }
    }

    pub fn asked(&self) -> Vec<(PathBuf, bool)> {
        self.asked.lock().unwrap().clone()
    }
}

impl command_tool::Approver for Recorder {
    fn approve_extra_path<'a>(&'a self, path: &'a Path, write: bool) -> command_tool::Approval<'a> {
        self.asked.lock().unwrap().push((path.to_path_buf(), write));
        let yes = self.allow.iter().any(|p| p == path);
        Box::pin(async move { yes })
    }
}
