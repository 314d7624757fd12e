//! Permission-denied directories and files. Root bypasses file permissions (DAC), so when the
//! suite runs as root each test here re-runs itself as `nobody` (uid 65534) through
//! `setpriv`, and fails if that run fails; without `setpriv` it skips loudly.

use std::fs;
use std::path::Path;
use std::process::Command;

use fsguard::{
    ConflictReason, EntryKind, Mirror, OpenError, RelPath, ScanError, ScanOptions, TextFile,
    read_text, scan_hard_links,
};

use crate::util::{Fixture, is_root};

/// Runs `body` as an unprivileged user: directly when not root, else by re-running this test
/// binary with `--exact name` under `setpriv`. Returns after checking no process survived.
fn as_unprivileged(name: &str, body: impl FnOnce()) {
    if !is_root() {
        return body();
    }
    if std::env::var_os("FSGUARD_UNPRIVILEGED_CHILD").is_some() {
        panic!("still root inside setpriv");
    }
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(setpriv) = setpriv else {
        eprintln!(
            "skipped: running as root and no setpriv to drop privileges; run this test as a normal user"
        );
        return;
    };
    // The test binary may sit under a directory nobody cannot enter: run a world-readable copy.
    let dir = tempfile::Builder::new()
        .prefix("fsguard-unpriv-")
        .tempdir()
        .unwrap();
    fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let exe = dir.path().join("it");
    fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = Command::new(setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&exe)
        .args([
            "--exact",
            &format!("unprivileged::{name}"),
            "--nocapture",
            "--test-threads=1",
        ])
        .env_clear()
        .env("HOME", "/tmp")
        .env("TMPDIR", "/tmp")
        .env("FSGUARD_UNPRIVILEGED_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "unprivileged re-run of {name} failed:\n{stdout}\n{stderr}"
    );
    // `output()` waited for the child; the test binary starts nothing else, so none survive.
    assert!(
        no_process_runs(&exe),
        "a process of {} survived",
        exe.display()
    );
}

fn no_process_runs(exe: &Path) -> bool {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .all(|e| fs::read_link(e.path().join("exe")).map_or(true, |p| p != exe))
}

#[test]
fn unreadable_directories_fail_the_scan_closed_and_are_listed() {
    as_unprivileged(
        "unreadable_directories_fail_the_scan_closed_and_are_listed",
        || {
            let fx = Fixture::new();
            fx.put("a/locked/inner/f", "x");
            fx.put("b/no-search/f", "x");
            fx.put("c/fine", "x");
            fx.chmod("a/locked", 0o000);
            fx.chmod("b/no-search", 0o444);
            let err = scan_hard_links(&[fx.path()], &ScanOptions::new()).unwrap_err();
            let ScanError::Incomplete { failures } = &err else {
                panic!("{err:?}")
            };
            let got: Vec<_> = failures
                .iter()
                .map(|f| f.path.strip_prefix(fx.path()).unwrap().to_path_buf())
                .collect();
            assert_eq!(got, [Path::new("a/locked"), Path::new("b/no-search")]);
            assert!(err.to_string().contains("a/locked"), "{err}");
            // An unreadable root is a failure too, never an empty report.
            fx.chmod("c", 0o000);
            assert!(matches!(
                scan_hard_links(&[fx.join("c")], &ScanOptions::new()),
                Err(ScanError::Incomplete { .. })
            ));
        },
    );
}

#[test]
fn unreadable_files_classify_as_denied() {
    as_unprivileged("unreadable_files_classify_as_denied", || {
        let fx = Fixture::new();
        fx.put("secret.txt", "s");
        fx.put("locked/inside.txt", "s");
        fx.chmod("secret.txt", 0o000);
        fx.chmod("locked", 0o000);
        let root = fx.root_fd();
        assert_eq!(
            read_text(&root, &RelPath::new("secret.txt").unwrap()).unwrap(),
            TextFile::Denied
        );
        assert_eq!(
            read_text(&root, &RelPath::new("locked/inside.txt").unwrap()).unwrap(),
            TextFile::Denied
        );
    });
}

#[test]
fn a_search_only_directory_can_be_walked_but_not_listed() {
    as_unprivileged(
        "a_search_only_directory_can_be_walked_but_not_listed",
        || {
            let fx = Fixture::new();
            fx.put("x/inner/f", "f");
            fx.chmod("x", 0o111);
            let root = fx.root_fd();
            assert!(RelPath::new("x/inner").unwrap().open_dir_at(&root).is_ok());
            let err = RelPath::new("x").unwrap().open_dir_at(&root).unwrap_err();
            assert!(matches!(err, OpenError::PermissionDenied { .. }), "{err:?}");
        },
    );
}

#[test]
fn unreadable_entries_are_recorded_not_copied_and_never_overwritten() {
    as_unprivileged(
        "unreadable_entries_are_recorded_not_copied_and_never_overwritten",
        || {
            let fx = Fixture::new();
            fx.put("src/ok", "ok");
            fx.put("src/secret", "s");
            fx.put("src/locked/f", "f");
            fx.chmod("src/secret", 0o000);
            fx.chmod("src/locked", 0o000);
            let mut m = Mirror::create(fx.join("src"), fx.join("mirror")).unwrap();
            assert_eq!(
                m.baseline()[Path::new("secret")].kind,
                EntryKind::Unreadable
            );
            assert_eq!(
                m.baseline()[Path::new("locked")].kind,
                EntryKind::Unreadable
            );
            assert_eq!(crate::util::listing(&fx.join("mirror")), ["ok"]);
            assert!(m.changes().unwrap().is_empty());
            fx.put("mirror/secret", "overwrite");
            let report = m.finalize().unwrap();
            assert_eq!(report.conflicts.len(), 1);
            assert_eq!(report.conflicts[0].reason, ConflictReason::NotMirrored);
            fx.chmod("src/secret", 0o600);
            assert_eq!(fx.read("src/secret"), "s");
        },
    );
}

/// Issue 14: the hard-link refusal as an ordinary user. A hard-linked file the user may read
/// refuses the mirror; one nobody may read is never opened, so its content cannot reach the
/// mirror: it is recorded as unreadable, like any unreadable file, and never replaced.
#[test]
fn hard_linked_files_refuse_the_mirror_unless_unreadable() {
    as_unprivileged(
        "hard_linked_files_refuse_the_mirror_unless_unreadable",
        || {
            let fx = Fixture::new();
            fx.put("src/ok", "ok");
            fx.put("outside/readable", "SECRET");
            fx.put("outside/locked", "SECRET");
            fs::hard_link(fx.join("outside/locked"), fx.join("src/locked-alias")).unwrap();
            fx.chmod("outside/locked", 0o000);
            let m = Mirror::create(fx.join("src"), fx.join("mirror")).unwrap();
            assert_eq!(
                m.baseline()[Path::new("locked-alias")].kind,
                EntryKind::Unreadable
            );
            assert_eq!(crate::util::listing(&fx.join("mirror")), ["ok"]);
            drop(m);
            fsguard::remove_tree(&fx.join("mirror")).unwrap();

            fs::hard_link(fx.join("outside/readable"), fx.join("src/alias")).unwrap();
            let err = Mirror::create(fx.join("src"), fx.join("mirror")).unwrap_err();
            let fsguard::MirrorError::HardLinked { links } = &err else {
                panic!("{err:?}")
            };
            assert_eq!(links.len(), 1);
            assert_eq!(links[0].path, Path::new("alias"));
            assert!(fs::symlink_metadata(fx.join("mirror")).is_err());
        },
    );
}

/// A failed turn can leave mirror directories their owner may not read (mode 000). The refresh
/// makes them `0700` through a descriptor opened without following symlinks — `O_PATH` for one
/// it may not open for reading, changed through `/proc/self/fd` — and then prunes or keeps them.
#[test]
fn refresh_resets_mirror_directories_their_owner_cannot_read() {
    as_unprivileged(
        "refresh_resets_mirror_directories_their_owner_cannot_read",
        || {
            let fx = Fixture::new();
            fx.put("src/d/f.txt", "f");
            let m = Mirror::create(fx.join("src"), fx.join("mirror")).unwrap();
            m.save_record().unwrap();
            drop(m);
            fx.put("mirror/junk/deep/x", "x");
            fx.chmod("mirror/junk/deep", 0o000);
            fx.chmod("mirror/junk", 0o000);
            fx.chmod("mirror/d", 0o000);
            let m = Mirror::refresh(fx.join("src"), fx.join("mirror")).unwrap();
            assert_eq!(crate::util::listing(&fx.join("mirror")), ["d/", "d/f.txt"]);
            assert_eq!(fx.read("mirror/d/f.txt"), "f");
            assert_eq!(fx.mode("mirror/d"), fx.mode("src/d"));
            assert!(m.changes().unwrap().is_empty());
        },
    );
}

/// Issue 15 (review finding F2): a write-back that cannot write one directory (made read-only
/// meanwhile) goes on with the rest and reports exactly what landed: the paths written are
/// `applied`, the refused one a `Failed` conflict with the folder's file untouched — not an
/// error that throws the whole report away while half of it is in the folder.
#[test]
fn a_write_back_that_fails_for_one_directory_reports_what_landed() {
    as_unprivileged(
        "a_write_back_that_fails_for_one_directory_reports_what_landed",
        || {
            let fx = Fixture::new();
            fx.put("src/d1/a", "orig");
            fx.put("src/d2/b", "orig");
            let mut m = Mirror::create(fx.join("src"), fx.join("mirror")).unwrap();
            fx.put("mirror/d1/a", "agent");
            fx.put("mirror/d2/b", "agent");
            fx.chmod("src/d2", 0o555);
            let report = m.finalize().unwrap();
            fx.chmod("src/d2", 0o755);
            let applied: Vec<_> = report.applied.iter().map(|c| c.path.clone()).collect();
            assert_eq!(applied, [Path::new("d1/a")]);
            assert_eq!(report.conflicts.len(), 1, "{report:?}");
            assert_eq!(report.conflicts[0].change.path, Path::new("d2/b"));
            assert!(
                matches!(&report.conflicts[0].reason, ConflictReason::Failed { error } if error.contains("denied")),
                "{report:?}"
            );
            assert_eq!(fx.read("src/d1/a"), "agent");
            assert_eq!(fx.read("src/d2/b"), "orig");
        },
    );
}
