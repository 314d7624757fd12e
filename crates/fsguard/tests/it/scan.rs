//! `scan_hard_links`: hard-link fixtures, symlinks, bad roots, mounts, concurrency (CMD-9).

use std::fs;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use fsguard::{RootLease, ScanError, ScanOptions, scan_hard_links, scan_hard_links_in};

use crate::util::Fixture;

fn paths(fx: &Fixture, opts: &ScanOptions) -> Vec<String> {
    scan_hard_links(&[fx.path()], opts)
        .unwrap()
        .links
        .iter()
        .map(|l| {
            l.path
                .strip_prefix(fx.path())
                .unwrap()
                .display()
                .to_string()
        })
        .collect()
}

#[test]
fn every_name_of_a_hard_linked_file_is_reported_with_its_count() {
    let fx = Fixture::new();
    fx.put("a/b/c/one", "1");
    fx.put("a/two", "2");
    fx.put("single", "s");
    fs::hard_link(fx.join("a/b/c/one"), fx.join("one-again")).unwrap();
    fs::hard_link(fx.join("a/two"), fx.join("a/b/two-again")).unwrap();
    fs::hard_link(fx.join("a/two"), fx.join("a/b/c/two-thrice")).unwrap();
    let report = scan_hard_links(&[fx.path()], &ScanOptions::new()).unwrap();
    let got: Vec<(String, u64)> = report
        .links
        .iter()
        .map(|l| {
            (
                l.path
                    .strip_prefix(fx.path())
                    .unwrap()
                    .display()
                    .to_string(),
                l.links,
            )
        })
        .collect();
    let expect = [
        ("a/b/c/one", 2),
        ("a/b/c/two-thrice", 3),
        ("a/b/two-again", 3),
        ("a/two", 3),
        ("one-again", 2),
    ];
    assert_eq!(got, expect.map(|(p, n)| (p.to_owned(), n)));
    assert_eq!(report.links[1].id, report.links[3].id);
    assert!(report.skipped_mounts.is_empty());
}

#[test]
fn a_clean_tree_reports_nothing_and_one_thread_agrees_with_many() {
    let fx = Fixture::new();
    for i in 0..40 {
        fx.put(&format!("d{}/e{}/f{i}", i % 5, i % 3), "x");
    }
    fs::hard_link(fx.join("d0/e0/f0"), fx.join("d4/link")).unwrap();
    let one = paths(&fx, &ScanOptions::new().threads(1));
    let many = paths(&fx, &ScanOptions::new().threads(8));
    assert_eq!(one, ["d0/e0/f0", "d4/link"]);
    assert_eq!(one, many);
}

#[test]
fn symlinks_are_never_followed() {
    let fx = Fixture::new();
    fx.put("outside/a", "x");
    fs::hard_link(fx.join("outside/a"), fx.join("outside/b")).unwrap();
    fx.put("root/plain", "p");
    symlink(fx.join("outside"), fx.join("root/dirlink")).unwrap();
    symlink(fx.join("outside/a"), fx.join("root/filelink")).unwrap();
    symlink("loop2", fx.join("root/loop1")).unwrap();
    symlink("loop1", fx.join("root/loop2")).unwrap();
    let report = scan_hard_links(&[fx.join("root")], &ScanOptions::new()).unwrap();
    assert_eq!(report.links, []);
}

#[test]
fn bad_roots_fail_with_a_reason() {
    let fx = Fixture::new();
    fx.put("file", "x");
    symlink(fx.path(), fx.join("link")).unwrap();
    let problem = |p: PathBuf| match scan_hard_links(&[p], &ScanOptions::new()) {
        Err(ScanError::BadRoot { problem, .. }) => problem,
        other => panic!("{other:?}"),
    };
    assert_eq!(problem(fx.join("file")), "is not a directory");
    assert_eq!(problem(fx.join("missing")), "does not exist");
    assert_eq!(problem(fx.join("link")), "is a symbolic link");
}

#[test]
fn overlapping_roots_report_each_file_once() {
    let fx = Fixture::new();
    fx.put("a/b/f", "x");
    fs::hard_link(fx.join("a/b/f"), fx.join("a/g")).unwrap();
    let report = scan_hard_links(&[fx.join("a"), fx.join("a")], &ScanOptions::new()).unwrap();
    assert_eq!(report.links.len(), 2);
}

#[test]
fn a_deep_tree_is_scanned() {
    let fx = Fixture::new();
    // Deeper than PATH_MAX allows by path: built with relative mkdirs through fds.
    let mut dir = fs::File::open(fx.path()).unwrap();
    for _ in 0..600 {
        rustix::fs::mkdirat(
            &dir,
            "deeper-directory-name",
            rustix::fs::Mode::from_raw_mode(0o755),
        )
        .unwrap();
        dir = fs::File::from(
            rustix::fs::openat(
                &dir,
                "deeper-directory-name",
                rustix::fs::OFlags::RDONLY,
                rustix::fs::Mode::empty(),
            )
            .unwrap(),
        );
    }
    let f = rustix::fs::openat(
        &dir,
        "f",
        rustix::fs::OFlags::CREATE | rustix::fs::OFlags::WRONLY,
        rustix::fs::Mode::from_raw_mode(0o644),
    )
    .unwrap();
    drop(f);
    rustix::fs::linkat(&dir, "f", &dir, "g", rustix::fs::AtFlags::empty()).unwrap();
    let report = scan_hard_links(&[fx.path()], &ScanOptions::new()).unwrap();
    assert_eq!(report.links.len(), 2);
    assert!(report.links[0].path.as_os_str().len() > 600 * 22);
    // TempDir's recursive delete goes by path and would stop at PATH_MAX: unwind via fds.
    remove_deep(fs::File::open(fx.path()).unwrap());
}

fn remove_deep(dir: fs::File) {
    let name = "deeper-directory-name";
    if let Ok(child) = rustix::fs::openat(
        &dir,
        name,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    ) {
        remove_deep(fs::File::from(child));
        rustix::fs::unlinkat(&dir, name, rustix::fs::AtFlags::REMOVEDIR).unwrap();
    }
    let _ = rustix::fs::unlinkat(&dir, "f", rustix::fs::AtFlags::empty());
    let _ = rustix::fs::unlinkat(&dir, "g", rustix::fs::AtFlags::empty());
}

#[test]
fn files_and_directories_vanishing_mid_scan_never_break_it() {
    let fx = Fixture::new();
    fx.put("stable/a", "x");
    fs::hard_link(fx.join("stable/a"), fx.join("stable/b")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let stop = Arc::clone(&stop);
        let base = fx.join("churn");
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let d = base.join(format!("d{}", n % 7));
                let _ = fs::create_dir_all(d.join("sub"));
                let _ = fs::write(d.join("sub/f"), "x");
                let _ = fs::remove_dir_all(&d);
                n += 1;
            }
        })
    };
    for _ in 0..200 {
        let report = scan_hard_links(&[fx.path()], &ScanOptions::new()).unwrap();
        let names: Vec<_> = report
            .links
            .iter()
            .map(|l| l.path.file_name().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["a", "b"]);
    }
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();
}

#[test]
fn a_lease_scans_the_pinned_directory_not_a_replacement() {
    let fx = Fixture::new();
    fx.put("work/a", "x");
    fs::hard_link(fx.join("work/a"), fx.join("work/b")).unwrap();
    let lease = RootLease::acquire(fx.join("work")).unwrap();
    fs::rename(fx.join("work"), fx.join("moved")).unwrap();
    fx.put("work/clean", "c");
    let report = scan_hard_links_in(&lease, &ScanOptions::new()).unwrap();
    assert_eq!(report.links.len(), 2);
}

/// Mounts a tmpfs below the root (needs CAP_SYS_ADMIN; skipped loudly otherwise): the scan
/// does not enter it by default and lists it; with `cross_mounts(true)` it finds the link in it.
#[test]
fn mount_points_are_skipped_and_listed_unless_crossing_is_asked() {
    let fx = Fixture::new();
    let mnt = fx.put("root/mnt/", "");
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "fsguard-test", mnt.to_str().unwrap()])
        .output();
    match status {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            eprintln!(
                "skipped: cannot mount a tmpfs here ({})",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return;
        }
        Err(e) => {
            eprintln!("skipped: no mount command ({e})");
            return;
        }
    }
    let result = std::panic::catch_unwind(|| {
        fs::write(mnt.join("a"), "x").unwrap();
        fs::hard_link(mnt.join("a"), mnt.join("b")).unwrap();
        let report = scan_hard_links(&[fx.join("root")], &ScanOptions::new()).unwrap();
        assert_eq!(report.links, []);
        assert_eq!(report.skipped_mounts, std::slice::from_ref(&mnt));
        let report =
            scan_hard_links(&[fx.join("root")], &ScanOptions::new().cross_mounts(true)).unwrap();
        assert_eq!(report.links.len(), 2);
        assert!(report.skipped_mounts.is_empty());
    });
    let out = Command::new("umount").arg(&mnt).output().unwrap();
    assert!(
        out.status.success(),
        "umount failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `mount`/`umount` were waited for by `output()`; nothing they started outlives them.
    result.unwrap();
}
