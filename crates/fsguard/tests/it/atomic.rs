//! `atomic_write`: the entry is replaced, the old inode never rewritten (FILE-2).

use std::fs;
use std::os::unix::fs::{MetadataExt, symlink};

use fsguard::{OpenError, RelPath, WriteError, atomic_write};

use crate::util::Fixture;

fn rel(s: &str) -> RelPath {
    RelPath::new(s).unwrap()
}

#[test]
fn a_hard_linked_originals_other_names_keep_the_old_content() {
    let fx = Fixture::new();
    fx.put("a.txt", "old");
    fs::hard_link(fx.join("a.txt"), fx.join("other-name")).unwrap();
    let old_ino = fs::metadata(fx.join("a.txt")).unwrap().ino();
    atomic_write(fx.root_fd(), &rel("a.txt"), b"new").unwrap();
    assert_eq!(fx.read("a.txt"), "new");
    assert_eq!(fx.read("other-name"), "old");
    assert_ne!(fs::metadata(fx.join("a.txt")).unwrap().ino(), old_ino);
    assert_eq!(fs::metadata(fx.join("other-name")).unwrap().nlink(), 1);
}

#[test]
fn the_old_files_mode_is_kept_and_no_temp_file_is_left() {
    let fx = Fixture::new();
    fx.put("d/script.sh", "echo 1");
    fx.chmod("d/script.sh", 0o750);
    atomic_write(fx.root_fd(), &rel("d/script.sh"), b"echo 2").unwrap();
    assert_eq!(fx.mode("d/script.sh"), 0o750);
    atomic_write(fx.root_fd(), &rel("d/new.txt"), b"n").unwrap();
    assert_eq!(fx.listing(), ["d/", "d/new.txt", "d/script.sh"]);
}

#[test]
fn a_symlink_target_or_parent_is_refused_and_nothing_changes() {
    let fx = Fixture::new();
    fx.put("outside/f", "keep");
    fx.put("in/", "");
    symlink(fx.join("outside/f"), fx.join("in/link")).unwrap();
    symlink(fx.join("outside"), fx.join("in/dirlink")).unwrap();
    let root = fs::File::open(fx.join("in")).unwrap();
    let err = atomic_write(&root, &rel("link"), b"x").unwrap_err();
    assert!(matches!(err, WriteError::NotARegularFile { .. }), "{err:?}");
    let err = atomic_write(&root, &rel("dirlink/f"), b"x").unwrap_err();
    assert!(
        matches!(err, WriteError::Open(OpenError::Symlink { .. })),
        "{err:?}"
    );
    assert_eq!(fx.read("outside/f"), "keep");
    assert!(
        fx.listing().iter().all(|e| !e.contains(".tmp")),
        "{:?}",
        fx.listing()
    );
    assert_eq!(fx.listing().len(), 5);
}

#[test]
fn a_directory_target_and_the_root_are_refused() {
    let fx = Fixture::new();
    fx.put("d/", "");
    assert!(matches!(
        atomic_write(fx.root_fd(), &rel("d"), b"x"),
        Err(WriteError::NotARegularFile { .. })
    ));
    assert!(atomic_write(fx.root_fd(), &RelPath::root(), b"x").is_err());
    assert_eq!(fx.listing(), ["d/"]);
}
