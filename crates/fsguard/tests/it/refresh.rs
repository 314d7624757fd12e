//! `Mirror::refresh`: an existing mirror brought back to an exact copy of the folder, copying
//! only what may differ, with the same baseline `create` records (RUN-11).

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;
use std::time::Duration;

use fsguard::{ChangeKind, Mirror, MirrorOptions, record_path};

use crate::util::Fixture;

fn settled() -> MirrorOptions {
    MirrorOptions::new().racy_window(Duration::ZERO)
}

/// Every entry below `root` with its kind, mode and content (or link target): byte for byte.
pub(crate) fn tree(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let m = fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode() & 0o7777;
            if m.is_dir() {
                out.push(format!("{rel}/ {mode:o}"));
                walk(root, &p, out);
            } else if m.file_type().is_symlink() {
                out.push(format!("{rel} -> {}", fs::read_link(&p).unwrap().display()));
            } else {
                out.push(format!("{rel} {mode:o} {:?}", fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// What a fresh `create` of the folder makes, for comparison (in `fresh/`, then removed).
pub(crate) fn fresh_tree(fx: &Fixture) -> (Vec<String>, Vec<BaseRow>) {
    let m = Mirror::create_with(fx.join("src"), fx.join("fresh"), &settled()).unwrap();
    let t = tree(&fx.join("fresh"));
    let base = baseline_of(&m);
    drop(m);
    fsguard::remove_tree(&fx.join("fresh")).unwrap();
    (t, base)
}

/// A baseline entry's path, kind, mode and inode.
pub(crate) type BaseRow = (String, fsguard::EntryKind, u32, u64);

pub(crate) fn baseline_of(m: &Mirror) -> Vec<BaseRow> {
    m.baseline()
        .iter()
        .map(|(p, b)| (p.display().to_string(), b.kind, b.mode, b.ino))
        .collect()
}

fn refresh(fx: &Fixture) -> Mirror {
    fx.settle_clock();
    let m = Mirror::refresh_with(fx.join("src"), fx.join("mirror"), &settled()).unwrap();
    m.save_record().unwrap();
    m
}

fn first(fx: &Fixture) -> Mirror {
    fx.settle_clock();
    let m = Mirror::create_with(fx.join("src"), fx.join("mirror"), &settled()).unwrap();
    m.save_record().unwrap();
    m
}

fn assert_exact(fx: &Fixture, m: &Mirror) {
    let (t, base) = fresh_tree(fx);
    assert_eq!(tree(&fx.join("mirror")), t);
    assert_eq!(baseline_of(m), base);
    assert!(m.changes().unwrap().is_empty(), "{:?}", m.changes());
}

/// Identity and change time: a file copied again gets a later ctime (the clock is settled
/// before every refresh), even where the file system hands the old inode number out again.
fn ino(p: &Path) -> (u64, i64, i64) {
    let m = fs::symlink_metadata(p).unwrap();
    (m.ino(), m.ctime(), m.ctime_nsec())
}

fn base_fixture() -> Fixture {
    let fx = Fixture::new();
    for (p, c) in [
        ("src/same.txt", "same"),
        ("src/edit.txt", "old"),
        ("src/gone.txt", "bye"),
        ("src/dir/inner.txt", "inner"),
        ("src/dir2file/x", "x"),
        ("src/file2dir", "f"),
        ("src/moded.txt", "m"),
        ("src/gonedir/a/b", "deep"),
    ] {
        fx.put(p, c);
    }
    fx
}

/// Edits, additions, deletions, type changes both ways and a chmod all reach the mirror; an
/// unchanged file is not copied again (same inode); the result equals a fresh `create`.
#[test]
fn refresh_follows_source_edits_adds_deletes_and_type_changes() {
    let fx = base_fixture();
    drop(first(&fx));
    let same_ino = ino(&fx.join("mirror/same.txt"));
    fx.put("src/edit.txt", "new and longer");
    fx.put("src/added/deep/n.txt", "n");
    fs::remove_file(fx.join("src/gone.txt")).unwrap();
    fs::remove_dir_all(fx.join("src/gonedir")).unwrap();
    fs::remove_dir_all(fx.join("src/dir2file")).unwrap();
    fx.put("src/dir2file", "now a file");
    fs::remove_file(fx.join("src/file2dir")).unwrap();
    fx.put("src/file2dir/y", "now a dir");
    fx.chmod("src/moded.txt", 0o600);
    symlink("/etc/passwd", fx.join("src/link")).unwrap();
    let m = refresh(&fx);
    assert_exact(&fx, &m);
    assert_eq!(
        ino(&fx.join("mirror/same.txt")),
        same_ino,
        "unchanged: kept"
    );
    assert!(
        !fx.join("mirror/link").exists() && fs::symlink_metadata(fx.join("mirror/link")).is_err()
    );
}

/// A failed turn's leftovers — edits, new files of any type, a `.git`, a deleted file, an
/// unreadable directory, a chmod-ed copy — are all reset to the folder.
#[test]
fn refresh_resets_a_mirror_a_failed_turn_left_modified() {
    let fx = base_fixture();
    fx.put("src/ro/f", "ro");
    fx.chmod("src/ro", 0o555);
    drop(first(&fx));
    let mir = |p: &str| fx.join("mirror").join(p);
    fs::write(mir("same.txt"), "agent wrote").unwrap();
    fs::remove_file(mir("edit.txt")).unwrap();
    fs::write(mir("new.txt"), "agent made").unwrap();
    fs::create_dir_all(mir("dir/.GIT/objects")).unwrap();
    fs::create_dir_all(mir("newdir/sub")).unwrap();
    symlink("/", mir("dir/escape")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        mir("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    fs::set_permissions(mir("moded.txt"), fs::Permissions::from_mode(0o777)).unwrap();
    fs::set_permissions(mir("dir"), fs::Permissions::from_mode(0o500)).unwrap();
    // Same size, content differs, mtime restored: the ctime still tells.
    let t = fs::metadata(mir("dir/inner.txt"))
        .unwrap()
        .modified()
        .unwrap();
    fs::set_permissions(mir("dir"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(mir("dir/inner.txt"), "INNER").unwrap();
    fs::File::options()
        .write(true)
        .open(mir("dir/inner.txt"))
        .unwrap()
        .set_modified(t)
        .unwrap();
    // Settled first: the clock helper cannot walk into an unreadable directory unprivileged.
    fx.settle_clock();
    fs::set_permissions(mir("newdir/sub"), fs::Permissions::from_mode(0o000)).unwrap();
    let m = Mirror::refresh_with(fx.join("src"), fx.join("mirror"), &settled()).unwrap();
    assert_exact(&fx, &m);
    assert_eq!(fx.read("mirror/dir/inner.txt"), "inner");
}

/// After a turn with a conflict (the folder edited, the mirror edited too) the next refresh
/// takes the folder's version.
#[test]
fn refresh_after_a_conflict_takes_the_folders_version() {
    let fx = base_fixture();
    let mut m = first(&fx);
    fs::write(fx.join("mirror/edit.txt"), "agent").unwrap();
    fs::write(fx.join("mirror/added.txt"), "agent added").unwrap();
    fx.put("src/edit.txt", "user");
    let report = m.finalize().unwrap();
    assert_eq!(report.conflicts.len(), 1, "{report:?}");
    assert_eq!(report.applied.len(), 1, "{report:?}");
    m.save_record().unwrap();
    drop(m);
    let m = refresh(&fx);
    assert_exact(&fx, &m);
    assert_eq!(fx.read("mirror/edit.txt"), "user");
    assert_eq!(fx.read("mirror/added.txt"), "agent added");
}

/// A refreshed mirror's finalize writes back like a created one's.
#[test]
fn a_refreshed_mirror_finalizes_like_a_created_one() {
    let fx = base_fixture();
    drop(first(&fx));
    fx.put("src/edit.txt", "between turns");
    let mut m = refresh(&fx);
    fs::write(fx.join("mirror/same.txt"), "agent").unwrap();
    fs::remove_file(fx.join("mirror/gone.txt")).unwrap();
    let changes = m.changes().unwrap();
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert!(changes.iter().any(|c| c.kind == ChangeKind::Deleted));
    let report = m.finalize().unwrap();
    assert!(report.conflicts.is_empty(), "{report:?}");
    assert_eq!(fx.read("src/same.txt"), "agent");
    assert!(!fx.join("src/gone.txt").exists());
    m.save_record().unwrap();
    drop(m);
    let m = refresh(&fx);
    assert_exact(&fx, &m);
}

/// Without a usable record — missing, corrupt, or written for another folder — refresh
/// starts over with a full copy, and still ends exact.
#[test]
fn a_missing_corrupt_or_foreign_record_means_a_full_copy() {
    let fx = base_fixture();
    fx.put("other/x", "other");
    for damage in 0..3 {
        drop(first(&fx));
        let same_ino = ino(&fx.join("mirror/same.txt"));
        let record = record_path(&fx.join("mirror")).unwrap();
        match damage {
            0 => fs::remove_file(&record).unwrap(),
            1 => {
                let mut b = fs::read(&record).unwrap();
                let n = b.len() / 2;
                b[n] ^= 1;
                fs::write(&record, b).unwrap();
            }
            _ => {
                let m = Mirror::create(fx.join("other"), fx.join("o-mirror")).unwrap();
                m.save_record().unwrap();
                fs::rename(record_path(&fx.join("o-mirror")).unwrap(), &record).unwrap();
                drop(m);
                fs::remove_dir_all(fx.join("o-mirror")).unwrap();
            }
        }
        // Planted in the mirror: must not survive a full re-create either.
        fs::write(fx.join("mirror/planted"), "x").unwrap();
        let m = refresh(&fx);
        assert_exact(&fx, &m);
        assert_ne!(
            ino(&fx.join("mirror/same.txt")),
            same_ino,
            "case {damage}: copied anew"
        );
        drop(m);
        fs::remove_dir_all(fx.join("mirror")).unwrap();
        fs::remove_file(record_path(&fx.join("mirror")).unwrap()).unwrap();
    }
}

/// The record lives beside the mirror, never in it; refresh consumes it before it starts, so
/// a refresh that fails half-way leaves none and the next one copies everything.
#[test]
fn the_record_is_outside_the_mirror_and_consumed_by_refresh() {
    let fx = base_fixture();
    let m = first(&fx);
    let record = record_path(&fx.join("mirror")).unwrap();
    assert_eq!(record.parent(), Some(fx.path()));
    assert!(record.is_file());
    drop(m);
    let m = Mirror::refresh_with(fx.join("src"), fx.join("mirror"), &settled()).unwrap();
    assert!(!record.exists());
    drop(m);
}

/// A missing mirror is simply created.
#[test]
fn refreshing_a_missing_mirror_creates_it() {
    let fx = base_fixture();
    let m = refresh(&fx);
    assert_exact(&fx, &m);
}

/// Issue 17: the record's place is fsguard's business; removing or keeping a mirror aside takes
/// its record with it, so no later refresh is offered the record of a mirror that moved.
#[test]
fn removing_or_setting_aside_a_mirror_takes_its_record_with_it() {
    let fx = Fixture::new();
    fx.put("src/a.txt", "a");
    let made = || {
        let m = Mirror::create_with(fx.join("src"), fx.join("mirror"), &settled()).unwrap();
        let record = m.save_record().unwrap();
        assert_eq!(Some(record.clone()), record_path(&fx.join("mirror")));
        record
    };

    let record = made();
    fsguard::remove_mirror(&fx.join("mirror")).unwrap();
    assert!(!record.exists() && !fx.join("mirror").exists());

    let record = made();
    fsguard::set_mirror_aside(&fx.join("mirror"), &fx.join("kept")).unwrap();
    assert!(!record.exists() && !fx.join("mirror").exists());
    assert_eq!(fx.read("kept/a.txt"), "a");

    // Nothing left there: removing it again is no error, as with `remove_tree`.
    fsguard::remove_mirror(&fx.join("mirror")).unwrap();
}
