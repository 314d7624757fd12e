//! `RootLease`: the work root pinned by device and inode (CMD-8).

use std::fs;
use std::os::unix::fs::symlink;

use fsguard::{LeaseError, RelPath, RootLease};

use crate::util::Fixture;

#[test]
fn an_untouched_root_verifies() {
    let fx = Fixture::new();
    let lease = RootLease::acquire(fx.path()).unwrap();
    lease.verify().unwrap();
    lease.verify().unwrap();
}

#[test]
fn a_root_renamed_away_is_missing() {
    let fx = Fixture::new();
    let root = fx.put("work/", "");
    let lease = RootLease::acquire(&root).unwrap();
    fs::rename(&root, fx.join("moved")).unwrap();
    assert!(matches!(lease.verify(), Err(LeaseError::Missing { .. })));
}

#[test]
fn a_root_replaced_by_another_directory_is_refused() {
    let fx = Fixture::new();
    let root = fx.put("work/", "");
    fx.put("work/original", "o");
    let lease = RootLease::acquire(&root).unwrap();
    fs::rename(&root, fx.join("moved")).unwrap();
    fx.put("work/impostor", "i");
    let err = lease.verify().unwrap_err();
    assert!(matches!(err, LeaseError::Replaced { .. }), "{err:?}");
    assert!(err.to_string().contains("was replaced"));
    // Everything the lease opens still comes from the pinned directory, never the new one.
    assert!(lease.open_file(&RelPath::new("original").unwrap()).is_ok());
    assert!(lease.open_file(&RelPath::new("impostor").unwrap()).is_err());
}

#[test]
fn a_root_replaced_by_a_symlink_to_itself_is_refused() {
    let fx = Fixture::new();
    let root = fx.put("work/", "");
    let lease = RootLease::acquire(&root).unwrap();
    fs::rename(&root, fx.join("moved")).unwrap();
    symlink(fx.join("moved"), &root).unwrap();
    assert!(matches!(lease.verify(), Err(LeaseError::Symlink { .. })));
}

#[test]
fn bad_roots_are_refused_with_a_reason() {
    let fx = Fixture::new();
    fx.put("file", "x");
    fx.put("dir/", "");
    symlink(fx.join("dir"), fx.join("link")).unwrap();
    assert!(matches!(
        RootLease::acquire("relative/path"),
        Err(LeaseError::NotAbsolute { .. })
    ));
    assert!(matches!(
        RootLease::acquire(fx.join("file")),
        Err(LeaseError::NotADirectory { .. })
    ));
    assert!(matches!(
        RootLease::acquire(fx.join("link")),
        Err(LeaseError::Symlink { .. })
    ));
    assert!(matches!(
        RootLease::acquire(fx.join("nope")),
        Err(LeaseError::Missing { .. })
    ));
}
