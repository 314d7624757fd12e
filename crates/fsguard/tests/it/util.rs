//! Fixture helpers: a unique temp dir with a tree built from one-line specs, and a listing of
//! it for failure messages.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A temporary directory that lists its contents when a test fails with it in hand.
pub struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture {
            dir: tempfile::Builder::new()
                .prefix("fsguard-it-")
                .tempdir()
                .unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn join(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Creates `rel`: a directory if it ends with `/`, else a file with `contents`.
    pub fn put(&self, rel: &str, contents: &str) -> PathBuf {
        let p = self.join(rel.trim_end_matches('/'));
        if rel.ends_with('/') {
            fs::create_dir_all(&p).unwrap();
        } else {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, contents).unwrap();
        }
        p
    }

    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.join(rel)).unwrap()
    }

    pub fn chmod(&self, rel: &str, mode: u32) {
        fs::set_permissions(self.join(rel), fs::Permissions::from_mode(mode)).unwrap();
    }

    pub fn mode(&self, rel: &str) -> u32 {
        fs::symlink_metadata(self.join(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    pub fn root_fd(&self) -> fs::File {
        fs::File::open(self.path()).unwrap()
    }

    /// Waits until the file system's clock has moved past the ctime of every entry in the
    /// fixture, so that any later change to one of them gets a later ctime: the promise a zero
    /// racy window rests on (see `MirrorOptions::racy_window`). Reads the clock as the ctime
    /// of a probe file outside `src/` that is chmod-ed to its own mode.
    pub fn settle_clock(&self) {
        use std::os::unix::fs::MetadataExt;
        fn latest(p: &Path, max: &mut (i64, i64)) {
            let m = fs::symlink_metadata(p).unwrap();
            *max = (*max).max((m.ctime(), m.ctime_nsec()));
            if m.is_dir() {
                for e in fs::read_dir(p).unwrap() {
                    latest(&e.unwrap().path(), max);
                }
            }
        }
        let mut max = (i64::MIN, 0);
        latest(self.path(), &mut max);
        let probe = self.join(".clock");
        fs::write(&probe, "").unwrap();
        for _ in 0..5000 {
            fs::set_permissions(&probe, fs::Permissions::from_mode(0o644)).unwrap();
            let m = fs::metadata(&probe).unwrap();
            if (m.ctime(), m.ctime_nsec()) > max {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("the file system's clock did not move past {max:?} in 5 s");
    }

    /// Every entry below the root, relative, sorted; for assertions and failure messages.
    pub fn listing(&self) -> Vec<String> {
        listing(self.path())
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // Tests chmod directories to 000; give them back so TempDir can delete the tree.
        restore_perms(self.dir.path());
        if std::thread::panicking() {
            eprintln!(
                "fixture {}:\n  {}",
                self.path().display(),
                self.listing().join("\n  ")
            );
        }
    }
}

fn restore_perms(p: &Path) {
    if let Ok(meta) = fs::symlink_metadata(p) {
        if meta.is_dir() {
            let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o755));
            if let Ok(rd) = fs::read_dir(p) {
                for e in rd.flatten() {
                    restore_perms(&e.path());
                }
            }
        }
    }
}

pub fn listing(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                out.push(format!("{rel}/"));
                stack.push(p);
            } else if ft.is_symlink() {
                out.push(format!("{rel} -> {}", fs::read_link(&p).unwrap().display()));
            } else {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}
