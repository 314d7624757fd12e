//! Change journals (issue 21): a mirror kept between turns is brought up to date from what its
//! journals saw, and a turn's changes are read from the mirror's journal; every change is seen
//! — deep inside the tree, by renames of directories, during an idle period — and a journal
//! that cannot vouch (overflow, another process) makes the walk happen instead. Each case
//! ends with the mirror compared byte for byte with the folder, or with the exact changes.

use std::fs;
use std::path::Path;
use std::time::Duration;

use fsguard::{ChangeKind, Journaling, Mirror, MirrorOptions};

use crate::refresh::{baseline_of, fresh_tree, tree};
use crate::util::Fixture;

fn settled(journaling: Journaling) -> MirrorOptions {
    MirrorOptions::new()
        .racy_window(Duration::ZERO)
        .journaling(journaling)
}

/// 20 packages of 10 files four directories deep, and a few directories to move and remove.
fn node_modules_like(fx: &Fixture) {
    for p in 0..20 {
        for f in 0..10 {
            fx.put(&format!("src/pkg-{p}/lib/deep/er/file-{f}.js"), "x = 1;\n");
        }
    }
    fx.put("src/top.txt", "top");
    fx.put("src/moved/inner/a.txt", "a");
    fx.put("src/gone/b.txt", "b");
    fx.settle_clock();
}

/// Whether the mirror at `dst` is exactly the folder, and its baseline what a fresh copy
/// records.
fn assert_exact(fx: &Fixture, m: &Mirror, dst: &Path) {
    assert_eq!(
        tree(dst),
        tree(&fx.join("src")),
        "mirror differs from the folder"
    );
    let (_, base) = fresh_tree(fx);
    assert_eq!(baseline_of(m), base, "baseline differs from a fresh copy's");
    assert!(m.changes().unwrap().is_empty());
}

#[test]
fn a_journaled_refresh_sees_every_change_made_between_turns() {
    let fx = Fixture::new();
    node_modules_like(&fx);
    let dst = fx.join("mirror");
    let mut m = Mirror::create_with(fx.join("src"), &dst, &settled(Journaling::Both)).unwrap();
    m.finalize().unwrap();
    m.save_record().unwrap();
    assert!(m.journals_vouch());

    // The idle period: the user's edits, deep and by renames; and someone writing into the
    // mirror outside any turn.
    fs::write(fx.join("src/pkg-3/lib/deep/er/file-4.js"), "y = 2;\n").unwrap();
    fx.put("src/pkg-7/lib/deep/er/new.js", "new");
    fs::remove_file(fx.join("src/pkg-9/lib/deep/er/file-0.js")).unwrap();
    fs::rename(fx.join("src/moved"), fx.join("src/moved-to")).unwrap();
    fs::rename(fx.join("src/pkg-5/lib"), fx.join("src/pkg-6/lib2")).unwrap();
    fs::remove_dir_all(fx.join("src/gone")).unwrap();
    fx.put("src/fresh/dir/c.txt", "c");
    fx.chmod("src/top.txt", 0o600);
    fx.chmod("src/pkg-8/lib", 0o500);
    fs::write(dst.join("pkg-1/lib/deep/er/file-1.js"), "z = 3;\n").unwrap();
    fs::remove_file(dst.join("pkg-2/lib/deep/er/file-2.js")).unwrap();
    fs::write(dst.join("pkg-2/stray.txt"), "stray").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(m.journals_vouch(), "nothing here is beyond the journals");

    let mut m = m.refresh_journaled().unwrap();
    assert_exact(&fx, &m, &dst);

    // The next turn's write-back works from the refreshed baseline.
    fs::write(dst.join("pkg-4/agent.txt"), "agent").unwrap();
    let report = m.finalize().unwrap();
    assert!(report.conflicts.is_empty(), "{report:?}");
    assert_eq!(fx.read("src/pkg-4/agent.txt"), "agent");
    m.save_record().unwrap();
    fx.chmod("src/pkg-8/lib", 0o755);
    let mut m = m.refresh_journaled().unwrap();
    assert_exact(&fx, &m, &dst);
    m.save_record().unwrap();

    // Another process takes the mirror in between (it refreshes and records it itself): the
    // record is no longer this mirror's, so the next refresh walks everything.
    fx.put("src/pkg-0/lib/other-process.txt", "o");
    let other = Mirror::refresh_with(fx.join("src"), &dst, &settled(Journaling::Mirror)).unwrap();
    other.save_record().unwrap();
    drop(other);
    fs::write(dst.join("pkg-0/lib/deep/er/file-0.js"), "w = 4;\n").unwrap();
    fx.put("src/after.txt", "after");
    m = m.refresh_journaled().unwrap();
    assert_exact(&fx, &m, &dst);
}

/// The largest number of events the kernel queues for one inotify instance.
fn max_queued_events() -> Option<usize> {
    fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[test]
fn the_mirror_journal_sees_a_turns_changes_and_gives_up_when_events_were_dropped() {
    let Some(max) = max_queued_events() else {
        eprintln!("SKIP: /proc/sys/fs/inotify/max_queued_events unreadable: no inotify here");
        return;
    };
    let fx = Fixture::new();
    node_modules_like(&fx);
    let dst = fx.join("mirror");
    Mirror::create_with(fx.join("src"), &dst, &settled(Journaling::Mirror))
        .unwrap()
        .save_record()
        .unwrap();
    let m = Mirror::refresh_with(fx.join("src"), &dst, &settled(Journaling::Mirror)).unwrap();
    assert!(m.journals_vouch());

    // The turn: an edit deep down (same size), a renamed directory, a new one, a deletion and
    // a chmod.
    fs::write(dst.join("pkg-3/lib/deep/er/file-4.js"), "y = 2;\n").unwrap();
    fs::rename(dst.join("moved"), dst.join("moved-to")).unwrap();
    fs::create_dir_all(dst.join("pkg-1/lib/deep/new")).unwrap();
    fs::write(dst.join("pkg-1/lib/deep/new/n.txt"), "n").unwrap();
    fs::remove_file(dst.join("gone/b.txt")).unwrap();
    fs::set_permissions(
        dst.join("top.txt"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let expected = [
        ("gone/b.txt", ChangeKind::Deleted),
        ("moved", ChangeKind::Deleted),
        ("moved-to", ChangeKind::Added),
        ("moved-to/inner", ChangeKind::Added),
        ("moved-to/inner/a.txt", ChangeKind::Added),
        ("moved/inner", ChangeKind::Deleted),
        ("moved/inner/a.txt", ChangeKind::Deleted),
        ("pkg-1/lib/deep/new", ChangeKind::Added),
        ("pkg-1/lib/deep/new/n.txt", ChangeKind::Added),
        ("pkg-3/lib/deep/er/file-4.js", ChangeKind::Modified),
        ("top.txt", ChangeKind::Modified),
    ];
    let listed = |m: &Mirror| -> Vec<(String, ChangeKind)> {
        let mut got: Vec<(String, ChangeKind)> = m
            .changes()
            .unwrap()
            .into_iter()
            .map(|c| (c.path.display().to_string(), c.kind))
            .collect();
        got.sort();
        got
    };
    let mut want: Vec<(String, ChangeKind)> =
        expected.iter().map(|(p, k)| (p.to_string(), *k)).collect();
    want.sort();
    assert_eq!(listed(&m), want);
    assert!(m.journals_vouch(), "the journal answered");

    // More events than the kernel queues: it drops some, and says so.
    for i in 0..=max {
        fs::write(dst.join(format!("spam-{i}")), "s").unwrap();
    }
    for i in 0..=max {
        fs::remove_file(dst.join(format!("spam-{i}"))).unwrap();
    }
    assert!(
        !m.journals_vouch(),
        "an overflow leaves the journal unable to vouch"
    );
    assert_eq!(listed(&m), want, "the walk finds the same changes");
}
