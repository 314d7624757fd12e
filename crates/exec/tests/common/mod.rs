//! What the `exec` integration suites share: a work root and a call temp dir (with its `home`
//! and `tmp`, as `CallTemp` makes them) in a fresh temp dir.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;

pub struct Fixture {
    _dir: tempfile::TempDir,
    pub work: PathBuf,
    pub temp: PathBuf,
}

pub fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let temp = dir.path().join("tmp");
    std::fs::create_dir(&work).unwrap();
    std::fs::create_dir_all(temp.join("home")).unwrap();
    std::fs::create_dir_all(temp.join("tmp")).unwrap();
    Fixture {
        work: work.canonicalize().unwrap(),
        temp: temp.canonicalize().unwrap(),
        _dir: dir,
    }
}
