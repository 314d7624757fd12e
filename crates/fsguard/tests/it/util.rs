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
