//! Paths re-resolved after validation (issue 14, item 3): while a thread swaps a directory of
//! the folder (or of the mirror) for a symlink to an outside directory and back with
//! `renameat2(RENAME_EXCHANGE)`, thousands of times a second, the copy, the write-back and the
//! refresh never open, read, write or chmod anything outside. Every open walks from a pinned
//! descriptor with `O_NOFOLLOW`, so the symlink is refused whenever it is in place; an inotify
//! watch on the outside tree proves that not one access reached it over many attempts.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use fsguard::{Mirror, remove_tree};

use crate::util::Fixture;
use testkit::{Swapper, Watch};

/// Attempts per test: each races one whole copy, write-back or refresh against the swapper.
const ATTEMPTS: usize = 200;

/// Every file's content below `root`, for asserting that no outside byte arrived.
fn contents(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for e in fs::read_dir(&dir).unwrap().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                dirs.push(e.path());
            } else if t.is_file() {
                out.push(fs::read_to_string(e.path()).unwrap());
            }
        }
    }
    out
}

fn outside_tree(fx: &Fixture) {
    fx.put("outside/secret.txt", "SECRET");
    fx.put("outside/inside.txt", "SECRET");
    fx.put("outside/deeper/more.txt", "SECRET");
    fx.chmod("outside", 0o755);
}

#[test]
fn mirror_copy_never_reads_outside_when_a_directory_is_swapped_for_a_symlink() {
    let fx = Fixture::new();
    fx.put("src/sub/inside.txt", "inside");
    fx.put("src/sub/deeper/more.txt", "more");
    fx.put("src/top.txt", "top");
    outside_tree(&fx);
    symlink(fx.join("outside"), fx.join("src/swap")).unwrap();
    let watch = Watch::tree(&fx.join("outside"));
    let swapper = Swapper::new(fx.join("src").join("sub"), fx.join("src").join("swap"))
        .remake_as_link_to(fx.join("outside"))
        .start();
    let mut copied = 0;
    for i in 0..ATTEMPTS {
        let dest = fx.join(&format!("m{i}"));
        // A swap in the middle of the walk may fail the copy; it must never copy outside bytes.
        if let Ok(m) = Mirror::create(fx.join("src"), &dest) {
            copied += 1;
            let got = contents(&dest);
            assert!(!got.iter().any(|c| c.contains("SECRET")), "{got:?}");
            drop(m);
            remove_tree(&dest).unwrap();
        }
    }
    let swaps = swapper.stop();
    assert!(swaps > 0 && copied > 0, "swaps {swaps}, copies {copied}");
    watch.assert_none(&format!("after {swaps} swaps"));
}

#[test]
fn write_back_never_writes_outside_when_a_directory_is_swapped_for_a_symlink() {
    let fx = Fixture::new();
    fx.put("src/sub/f.txt", "old");
    outside_tree(&fx);
    symlink(fx.join("outside"), fx.join("src/swap")).unwrap();
    let watch = Watch::tree(&fx.join("outside"));
    let mut swaps = 0;
    for i in 0..ATTEMPTS {
        // The mirror is taken while nothing swaps; the race is the write-back alone.
        let dest = fx.join(&format!("m{i}"));
        let mut m = Mirror::create(fx.join("src"), &dest).unwrap();
        fs::write(dest.join("sub/f.txt"), "new").unwrap();
        fs::write(dest.join("sub/added.txt"), "added").unwrap();
        fs::write(dest.join("sub/inside.txt"), "added").unwrap();
        let swapper = Swapper::new(fx.join("src").join("sub"), fx.join("src").join("swap"))
            .remake_as_link_to(fx.join("outside"))
            .start();
        // Applied, or a conflict where the symlink was in place: either way not outside.
        let _ = m.finalize();
        swaps += swapper.stop();
        if fs::symlink_metadata(fx.join("src/sub"))
            .unwrap()
            .file_type()
            .is_symlink()
        {
            rustix::fs::renameat_with(
                rustix::fs::CWD,
                fx.join("src/sub"),
                rustix::fs::CWD,
                fx.join("src/swap"),
                rustix::fs::RenameFlags::EXCHANGE,
            )
            .unwrap();
        }
        fx.put("src/sub/f.txt", "old");
        for extra in ["added.txt", "inside.txt"] {
            let _ = fs::remove_file(fx.join("src/sub").join(extra));
        }
        drop(m);
        remove_tree(&dest).unwrap();
    }
    assert!(swaps > 0);
    watch.assert_none(&format!("after {swaps} swaps"));
    assert_eq!(fx.read("outside/secret.txt"), "SECRET");
    assert_eq!(fx.read("outside/inside.txt"), "SECRET");
    assert!(!fx.join("outside/f.txt").exists() && !fx.join("outside/added.txt").exists());
}

/// The refresh prunes the mirror and makes its directories `0700` on the way (a failed turn
/// may have left one unreadable). Here a directory of the mirror trades places with a symlink
/// to an outside directory: the chmod goes through a descriptor opened `O_NOFOLLOW`, never
/// through the name, so the outside directory keeps its mode.
#[test]
fn refresh_never_chmods_outside_when_a_mirror_directory_is_swapped_for_a_symlink() {
    let fx = Fixture::new();
    fx.put("src/d/f.txt", "f");
    fx.put("src/d/e/g.txt", "g");
    outside_tree(&fx);
    let mirror = fx.join("mirror");
    Mirror::create(fx.join("src"), &mirror)
        .unwrap()
        .save_record()
        .unwrap();
    let watch = Watch::tree(&fx.join("outside"));
    let swapper = Swapper::new(mirror.join("d"), mirror.join("swap"))
        .remake_as_link_to(fx.join("outside"))
        .start();
    let mut refreshed = 0;
    for _ in 0..ATTEMPTS {
        match Mirror::refresh(fx.join("src"), &mirror) {
            Ok(m) => {
                refreshed += 1;
                m.save_record().unwrap();
            }
            // A swap in the middle may fail the refresh (the mirror is then removed); the next
            // attempt creates it again, which races the swapper too.
            Err(_) => {
                let _ = remove_tree(&mirror);
            }
        }
    }
    let swaps = swapper.stop();
    assert!(
        swaps > 0 && refreshed > 0,
        "swaps {swaps}, refreshes {refreshed}"
    );
    watch.assert_none(&format!("after {swaps} swaps"));
    let mode = fs::metadata(fx.join("outside"))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o755);
}
