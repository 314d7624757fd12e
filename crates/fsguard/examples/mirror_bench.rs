//! `mirror_bench [ROUNDS] [FIXTURE_DIR] [big|small|writeback]`: times `Mirror::create`,
//! `finalize` (nothing changed, the common case of a read-only `run` call) and removing the
//! mirror, on (1) one 200 MB file and (2) 10 000 small files in 100 directories, with bare
//! `wc -l` on the big file as a yardstick measured in the same run; and (3) `finalize` writing
//! back a 200 MB file the mirror appended a line to (the folder's copy of it is then freshly
//! written, so (3)'s create hashes it: racily clean). Prints min / median / max per column.
//!
//! ```text
//! cargo run --release -p fsguard --example mirror_bench -- 7 /var/tmp/mirror-bench
//! cargo run --release -p fsguard --example mirror_bench -- 7 /dev/shm/mirror-bench small
//! ```
//!
//! On ext4, creating many files soon after deleting many is slow in the kernel itself
//! (`__ext4_new_inode` → `recently_deleted` scans the inode table for inodes freed in the last
//! minutes), so rounds of (2) after the first measure that, for any copier (`cp -r` too). A
//! tmpfs FIXTURE_DIR (`/dev/shm/…`) measures the mirror's own cost.
//!
//! The fixture is built once under FIXTURE_DIR (default: a fresh temp dir) and reused when it is
//! already there, so two builds of the crate can be compared against the same files by
//! alternating runs (A/B). After building it the bench waits a few seconds: the mirror hashes a
//! file modified within its racy window (see `src/mirror.rs`), and a fixture written a moment ago
//! would measure that instead of the common case of files older than a few seconds. Every read
//! is from the page cache (the fixture is read once before timing), so the figures are CPU and
//! page-cache costs, not disk.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const BIG_BYTES: usize = 200 * 1000 * 1000;
const SMALL_FILES: usize = 10_000;
const SMALL_DIRS: usize = 100;

struct Column {
    name: String,
    samples: Vec<Duration>,
}

impl Column {
    fn new(name: &str) -> Column {
        Column {
            name: name.to_owned(),
            samples: Vec::new(),
        }
    }

    fn median(&self) -> Duration {
        let mut s = self.samples.clone();
        s.sort();
        s.get(s.len() / 2).copied().unwrap_or_default()
    }

    fn print(&self) {
        let mut s = self.samples.clone();
        s.sort();
        let ms = |d: Option<&Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1e3);
        println!(
            "  {:<44} min {:>8.1} ms  median {:>8.1} ms  max {:>8.1} ms  (n={})",
            self.name,
            ms(s.first()),
            self.median().as_secs_f64() * 1e3,
            ms(s.last()),
            s.len()
        );
    }
}

fn build_big(dir: &Path) {
    let path = dir.join("big.csv");
    if fs::metadata(&path).is_ok_and(|m| m.len() as usize >= BIG_BYTES) {
        return;
    }
    fs::create_dir_all(dir).unwrap();
    let mut out = std::io::BufWriter::new(fs::File::create(&path).unwrap());
    let mut written = 0;
    let mut i = 0u64;
    while written < BIG_BYTES {
        let line = format!("{i},name-{i},{},{}\n", i * 7 % 1000, i % 13);
        out.write_all(line.as_bytes()).unwrap();
        written += line.len();
        i += 1;
    }
    out.flush().unwrap();
}

fn build_small(dir: &Path) {
    let done = dir.join(".complete");
    if done.exists() {
        return;
    }
    for d in 0..SMALL_DIRS {
        fs::create_dir_all(dir.join(format!("d{d:03}"))).unwrap();
    }
    for f in 0..SMALL_FILES {
        let body = format!("file {f}\n").repeat(1 + f % 100);
        fs::write(
            dir.join(format!("d{:03}/f{f:05}.txt", f % SMALL_DIRS)),
            body,
        )
        .unwrap();
    }
    // Not a `.git` name, so it is mirrored like the rest; one extra file is noise.
    fs::write(done, "").unwrap();
}

/// Reads every file once so each round starts from a warm page cache.
fn warm(dir: &Path) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            warm(&entry.path());
        } else {
            std::io::copy(
                &mut fs::File::open(entry.path()).unwrap(),
                &mut std::io::sink(),
            )
            .unwrap();
        }
    }
}

fn bench(label: &str, src: &Path, scratch: &Path, rounds: usize, wc: Option<&Path>) {
    let mut create = Column::new("create");
    let mut finalize = Column::new("finalize (nothing changed)");
    let mut remove = Column::new("remove_dir_all(mirror)");
    let mut total = Column::new("create + finalize + remove");
    let mut bare = Column::new("bare wc -l big.csv (yardstick)");
    for round in 0..rounds {
        let dest = scratch.join(format!("mirror-{round}"));
        let t0 = Instant::now();
        let mut mirror = fsguard::Mirror::create(src, &dest).unwrap();
        let t1 = Instant::now();
        let report = mirror.finalize().unwrap();
        let t2 = Instant::now();
        assert!(report.applied.is_empty() && report.conflicts.is_empty());
        drop(mirror);
        fs::remove_dir_all(&dest).unwrap();
        let t3 = Instant::now();
        create.samples.push(t1 - t0);
        finalize.samples.push(t2 - t1);
        remove.samples.push(t3 - t2);
        total.samples.push(t3 - t0);
        if let Some(wc) = wc {
            let t = Instant::now();
            let out = Command::new(wc)
                .args(["-l", "big.csv"])
                .current_dir(src)
                .env_clear()
                .env("LC_ALL", "C")
                .output()
                .unwrap();
            assert!(out.status.success());
            bare.samples.push(t.elapsed());
        }
    }
    println!("{label}:");
    create.print();
    finalize.print();
    remove.print();
    total.print();
    if wc.is_some() {
        bare.print();
        println!(
            "  ratio total / bare wc -l: {:.2}x",
            total.median().as_secs_f64() / bare.median().as_secs_f64()
        );
    }
}

/// (3): the mirror appends a line to the big file; finalize writes it back.
fn bench_writeback(src: &Path, scratch: &Path, rounds: usize) {
    let mut create = Column::new("create (file just written: hashed)");
    let mut finalize = Column::new("finalize writing back 200 MB");
    for round in 0..rounds {
        let dest = scratch.join(format!("wb-mirror-{round}"));
        let t0 = Instant::now();
        let mut mirror = fsguard::Mirror::create(src, &dest).unwrap();
        let t1 = Instant::now();
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(dest.join("big.csv"))
            .unwrap();
        f.write_all(b"one more line\n").unwrap();
        drop(f);
        let t2 = Instant::now();
        let report = mirror.finalize().unwrap();
        let t3 = Instant::now();
        assert_eq!(report.applied.len(), 1, "{report:?}");
        drop(mirror);
        fs::remove_dir_all(&dest).unwrap();
        create.samples.push(t1 - t0);
        finalize.samples.push(t3 - t2);
    }
    println!("(3) write-back of one modified 200 MB file:");
    create.print();
    finalize.print();
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(7, |r| r.parse().expect("ROUNDS"));
    let dir_arg = args.next();
    let only = args.next();
    let run = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let tmp;
    let base: PathBuf = match dir_arg {
        Some(dir) => PathBuf::from(dir),
        None => {
            tmp = tempfile::tempdir().unwrap();
            tmp.path().to_path_buf()
        }
    };
    let big = base.join("big");
    let small = base.join("small");
    let scratch = base.join("scratch");
    let fresh = !big.join("big.csv").exists() || !small.join(".complete").exists();
    build_big(&big);
    build_small(&small);
    if fresh {
        // Past the mirror's racy window, so the files count as settled (see the doc above).
        std::thread::sleep(Duration::from_secs(4));
    }
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch).unwrap();
    warm(&big);
    warm(&small);
    let wc = ["/usr/bin/wc", "/bin/wc"]
        .iter()
        .map(Path::new)
        .find(|p| p.exists());
    if run("big") {
        bench("(1) one 200 MB file", &big, &scratch, rounds, wc);
    }
    if only.as_deref() == Some("writeback") {
        let wb = base.join("writeback");
        fs::create_dir_all(&wb).unwrap();
        fs::copy(big.join("big.csv"), wb.join("big.csv")).unwrap();
        bench_writeback(&wb, &scratch, rounds);
    }
    if run("small") {
        bench(
            "(2) 10 000 small files in 100 directories",
            &small,
            &scratch,
            rounds,
            None,
        );
    }
    let _ = fs::remove_dir_all(&scratch);
}
