//! Hard links in the folder (issue 14, item 1; CMD-9 and FILE-1's rule applied to what `run`
//! reads): a regular file with more than one link refuses the mirror — checked on the
//! descriptor the copy reads — the refusal names every such file and says what to do, and no
//! mirror is left behind for a later call to use.

use std::fs;
use std::path::Path;
use std::time::Duration;

use fsguard::{EntryKind, Mirror, MirrorError, MirrorOptions, record_path};

use crate::util::{Fixture, listing};

/// The refused paths and link counts, or the unexpected result.
fn refused(result: Result<Mirror, MirrorError>) -> (Vec<(String, u64)>, String) {
    match result {
        Err(err @ MirrorError::HardLinked { .. }) => {
            let MirrorError::HardLinked { links } = &err else {
                unreachable!()
            };
            let got = links
                .iter()
                .map(|l| (l.path.display().to_string(), l.links))
                .collect();
            (got, err.to_string())
        }
        Err(other) => panic!("not a hard-link refusal: {other:?}"),
        Ok(m) => panic!("mirrored: {:?}", listing(m.mirror_path())),
    }
}

fn gone(p: &Path) -> bool {
    fs::symlink_metadata(p).is_err()
}

#[test]
fn mirror_refuses_a_hard_linked_file_and_leaves_no_mirror() {
    let fx = Fixture::new();
    fx.put("src/ok.txt", "ok");
    fx.put("src/p.awk", "{ print }");
    let secret = fx.put("outside/secret", "SECRET");
    fx.put("src/sub/", "");
    fs::hard_link(&secret, fx.join("src/sub/hl")).unwrap();
    // Both names inside the folder are refused too: the rule is the link count (CMD-9).
    fs::hard_link(fx.join("src/ok.txt"), fx.join("src/ok-again.txt")).unwrap();
    let (links, message) = refused(Mirror::create(fx.join("src"), fx.join("mirror")));
    assert_eq!(
        links,
        [
            ("ok-again.txt".to_owned(), 2),
            ("ok.txt".to_owned(), 2),
            ("sub/hl".to_owned(), 2)
        ]
    );
    assert!(message.starts_with("3 hard-linked file(s) in the folder: `ok-again.txt` (2 links), `ok.txt` (2 links), `sub/hl` (2 links). A hard link may be another name of a file outside the workspace"), "{message}");
    assert!(
        message.contains(
            "replace each with a copy (e.g. `cp --remove-destination f f.copy && mv f.copy f`) \
             or remove the extra name"
        ),
        "{message}"
    );
    assert!(gone(&fx.join("mirror")), "{:?}", fx.listing());
    assert_eq!(fx.read("outside/secret"), "SECRET");
}

#[test]
fn the_refusal_names_twenty_hard_links_and_counts_the_rest() {
    let fx = Fixture::new();
    let target = fx.put("outside/t", "t");
    fx.put("src/", "");
    for i in 0..25 {
        fs::hard_link(&target, fx.join(&format!("src/alias-{i:02}"))).unwrap();
    }
    let (links, message) = refused(Mirror::create(fx.join("src"), fx.join("mirror")));
    assert_eq!(links.len(), 25);
    assert!(links.iter().all(|(_, n)| *n == 26), "{links:?}");
    assert!(message.starts_with("25 hard-linked file(s)"), "{message}");
    assert!(
        message.contains("`alias-19` (26 links), and 5 more."),
        "{message}"
    );
    assert!(!message.contains("alias-20"), "{message}");
    assert!(gone(&fx.join("mirror")));
}

/// A later turn's refresh applies the same rule, to a new name and to a file the mirror would
/// have kept (it gained an outside name since); the half-refreshed mirror and its record are
/// gone. Once the user replaces the links, the next turn mirrors again.
#[test]
fn refresh_refuses_a_hard_link_made_since_the_last_turn_and_removes_the_mirror() {
    let fx = Fixture::new();
    fx.put("src/kept.txt", "kept");
    fx.put("src/other.txt", "other");
    let secret = fx.put("outside/secret", "SECRET");
    let settled = MirrorOptions::new().racy_window(Duration::ZERO);
    fx.settle_clock();
    let m = Mirror::create_with(fx.join("src"), fx.join("mirror"), &settled).unwrap();
    m.save_record().unwrap();
    drop(m);
    fs::hard_link(&secret, fx.join("src/new-hl")).unwrap();
    fs::hard_link(fx.join("src/kept.txt"), fx.join("outside/alias")).unwrap();
    fx.settle_clock();
    let (links, _) = refused(Mirror::refresh_with(
        fx.join("src"),
        fx.join("mirror"),
        &settled,
    ));
    assert_eq!(
        links,
        [("kept.txt".to_owned(), 2), ("new-hl".to_owned(), 2)]
    );
    assert!(gone(&fx.join("mirror")), "{:?}", fx.listing());
    assert!(gone(&record_path(&fx.join("mirror")).unwrap()));

    fs::remove_file(fx.join("outside/alias")).unwrap();
    fs::remove_file(fx.join("src/new-hl")).unwrap();
    let m = Mirror::refresh(fx.join("src"), fx.join("mirror")).unwrap();
    assert_eq!(listing(m.mirror_path()), ["kept.txt", "other.txt"]);
    assert_eq!(fx.read("mirror/kept.txt"), "kept");
}

/// Liveness: an ordinary folder — files, directories, a symlink and a FIFO (recorded, not
/// copied) — mirrors and refreshes as before, every copied file recorded with one link.
#[test]
fn an_ordinary_folder_without_hard_links_still_mirrors() {
    let fx = Fixture::new();
    fx.put("src/a.txt", "a");
    fx.put("src/sub/b.csv", "1,2\n");
    fx.put("src/empty/", "");
    std::os::unix::fs::symlink("/etc/passwd", fx.join("src/link")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        fx.join("src/fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let m = Mirror::create(fx.join("src"), fx.join("mirror")).unwrap();
    assert_eq!(
        listing(m.mirror_path()),
        ["a.txt", "empty/", "sub/", "sub/b.csv"]
    );
    let mut files = m.baseline().values().filter(|b| b.kind == EntryKind::File);
    assert!(files.clone().count() == 2 && files.all(|b| b.nlink == 1));
    m.save_record().unwrap();
    drop(m);
    let m = Mirror::refresh(fx.join("src"), fx.join("mirror")).unwrap();
    assert_eq!(fx.read("mirror/sub/b.csv"), "1,2\n");
    assert!(m.changes().unwrap().is_empty());
}
