//! Our temporary files in a user's folder, and the record that finds them after a crash.
//!
//! [`atomic_write`](crate::atomic_write) and the write-back stage new content beside its
//! target as `.fsguard-<pid>-<n>-<nanos>.tmp` and set replaced files aside under such names.
//! A journaled write-back names its files `.agent-exec-wb-<id>-<n>.tmp` instead
//! ([`STAGED_PREFIX`](crate::STAGED_PREFIX)). [`is_temp_name`] knows both patterns: a mirror
//! never copies such a file and a write-back never writes one.
//!
//! A process killed between creating a `.fsguard-*` file and renaming it leaves the file in
//! the folder, and the folder may be any directory of the user's. So a process that installs
//! a record ([`record_temp_files_in`]) notes each directory before its first temporary file
//! there: the directory's device, inode and path, appended to `<record dir>/<pid>.dirs`. The
//! process holds that file under `flock` for its whole life, and the kernel drops the lock
//! with the process. A record whose lock can be taken therefore belongs to no live process of
//! ours. [`sweep_temp_files`] then removes, in each directory it names that is still the same
//! directory, the regular files of our uid named `.fsguard-<pid>-*.tmp` for the record's PID,
//! and then the record. [`orphaned_temp_files`] lists the same files without removing them.
//!
//! A PID reused by a later process of ours opens the same record and holds its lock: the dead
//! process's files then wait until the later one has ended too, and are never taken for its.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};

use rustix::fs::{AtFlags, FlockOperation, OFlags};

use crate::mirror::STAGED_PREFIX;

/// The start of the name [`atomic_write`](crate::atomic_write) gives its temporary files.
pub(crate) const TEMP_PREFIX: &str = ".fsguard-";
const TEMP_SUFFIX: &str = ".tmp";
const RECORD_SUFFIX: &str = ".dirs";

/// True for a name of ours: `.fsguard-*.tmp` or `.agent-exec-wb-*.tmp`.
#[must_use]
pub fn is_temp_name(name: &OsStr) -> bool {
    let name = name.as_bytes();
    (name.starts_with(TEMP_PREFIX.as_bytes()) || name.starts_with(STAGED_PREFIX.as_bytes()))
        && name.ends_with(TEMP_SUFFIX.as_bytes())
}

/// This process's record: where it goes, and once the first directory was noted, the locked
/// file and the directories noted in it.
struct Record {
    dir: PathBuf,
    file: Option<File>,
    noted: HashSet<(u64, u64)>,
}

static RECORD: OnceLock<Mutex<Record>> = OnceLock::new();

/// From now on, notes every directory where this process makes a temporary file in
/// `dir/<pid>.dirs`, held under `flock` until the process ends. The record is made with the
/// first temporary file (and `dir`, `0700`, with it): a process that writes nothing leaves
/// nothing. Only the first call of a process counts.
pub fn record_temp_files_in(dir: &Path) {
    let _ = RECORD.set(Mutex::new(Record {
        dir: dir.to_path_buf(),
        file: None,
        noted: HashSet::new(),
    }));
}

/// Makes (or, for a PID reused, joins) this process's record in `dir` and locks it.
fn open_record(dir: &Path) -> io::Result<File> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let path = dir.join(format!("{}{RECORD_SUFFIX}", std::process::id()));
    loop {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(OFlags::NOFOLLOW.bits() as i32)
            .open(&path)?;
        rustix::fs::flock(&file, FlockOperation::LockExclusive)?;
        // A sweep may have removed the record between the open and the lock: lock the file
        // that is at the name.
        let held = file.metadata()?;
        match std::fs::symlink_metadata(&path) {
            Ok(now) if (now.dev(), now.ino()) == (held.dev(), held.ino()) => return Ok(file),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
}

/// Notes `dir` in this process's record before a temporary file is made in it. Without a
/// record, or when the directory cannot be named or the record written, nothing is noted:
/// the write goes on, and only a crash during it would leave its file unswept.
pub(crate) fn note(dir: BorrowedFd<'_>) {
    let Some(record) = RECORD.get() else { return };
    let Ok(stat) = rustix::fs::fstat(dir) else {
        return;
    };
    let meta = crate::sys::meta_of(&stat);
    let id = (meta.dev, meta.ino);
    let mut record = record.lock().unwrap_or_else(PoisonError::into_inner);
    if record.noted.contains(&id) {
        return;
    }
    let Ok(path) = std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd())) else {
        return;
    };
    if !path.is_absolute() {
        return;
    }
    if record.file.is_none() {
        record.file = open_record(&record.dir).ok();
    }
    let line = format!("{} {} {}\n", id.0, id.1, hex(path.as_os_str().as_bytes()));
    if let Some(mut file) = record.file.as_ref()
        && file.write_all(line.as_bytes()).is_ok()
    {
        record.noted.insert(id);
    }
}

/// What one record of a process that is gone names.
struct Orphans {
    /// The record, locked by the caller.
    record: (PathBuf, File),
    /// Our temporary files, each in a directory the record named.
    files: Vec<PathBuf>,
}

/// Each unlocked record in `dir` with the temporary files it names that still exist.
fn orphans(dir: &Path) -> Vec<Orphans> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_suffix(RECORD_SUFFIX))
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let path = entry.path();
        let Ok(mut file) = OpenOptions::new()
            .read(true)
            .custom_flags(OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
        else {
            continue;
        };
        if rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
            continue;
        }
        let mut text = String::new();
        if file.read_to_string(&mut text).is_err() {
            continue;
        }
        let prefix = format!("{TEMP_PREFIX}{pid}-");
        let files = text
            .lines()
            .filter_map(parse_line)
            .flat_map(|(id, folder)| temp_files_in(&folder, id, &prefix))
            .collect();
        out.push(Orphans {
            record: (path, file),
            files,
        });
    }
    out
}

/// The regular files of our uid in `folder` (if it is still the directory `id`) whose names
/// start with `prefix` and end with `.tmp`.
fn temp_files_in(folder: &Path, id: (u64, u64), prefix: &str) -> Vec<PathBuf> {
    let Ok(dir) = rustix::fs::open(
        folder,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) else {
        return Vec::new();
    };
    let Ok(stat) = rustix::fs::fstat(&dir) else {
        return Vec::new();
    };
    let meta = crate::sys::meta_of(&stat);
    if (meta.dev, meta.ino) != id {
        return Vec::new();
    }
    let me = rustix::process::geteuid().as_raw();
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let bytes = name.as_bytes();
            bytes.starts_with(prefix.as_bytes())
                && bytes.ends_with(TEMP_SUFFIX.as_bytes())
                && rustix::fs::statat(dir.as_fd(), name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|m| {
                        rustix::fs::FileType::from_raw_mode(m.st_mode)
                            == rustix::fs::FileType::RegularFile
                            && m.st_uid == me
                    })
        })
        .map(|e| folder.join(e.file_name()))
        .collect()
}

/// The temporary files that processes now gone left, as the records in `dir` name them.
#[must_use]
pub fn orphaned_temp_files(dir: &Path) -> Vec<PathBuf> {
    orphans(dir).into_iter().flat_map(|o| o.files).collect()
}

/// Removes the temporary files that processes now gone left, and their records. Returns the
/// files removed. Files of a live process, or of a PID that a live process of ours holds now,
/// are never touched.
pub fn sweep_temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for Orphans {
        record: (path, _lock),
        files,
    } in orphans(dir)
    {
        for file in files {
            match std::fs::remove_file(&file) {
                Ok(()) => removed.push(file),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                // Left for the next sweep, which finds it through the same record.
                Err(_) => continue,
            }
        }
        // Removed under the lock (`_lock`), so a process that reuses the PID and opens the
        // record meanwhile sees the name gone and makes a new one.
        let _ = std::fs::remove_file(&path);
    }
    removed
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `<dev> <ino> <hex path>` as the directory's identity and path.
fn parse_line(line: &str) -> Option<((u64, u64), PathBuf)> {
    let mut parts = line.split(' ');
    let dev = parts.next()?.parse().ok()?;
    let ino = parts.next()?.parse().ok()?;
    let hexed = parts.next()?;
    if hexed.len() % 2 != 0 || parts.next().is_some() {
        return None;
    }
    let bytes = (0..hexed.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hexed.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some(((dev, ino), PathBuf::from(OsStr::from_bytes(&bytes))))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn our_names_are_known_and_the_users_are_not() {
        for ours in [".fsguard-12-0-1a2b.tmp", ".agent-exec-wb-3f-7.tmp"] {
            assert!(is_temp_name(OsStr::new(ours)), "{ours}");
        }
        for theirs in [
            ".fsguard-12",
            "fsguard-1.tmp",
            "a.tmp",
            ".agent-exec-wb-1.txt",
        ] {
            assert!(!is_temp_name(OsStr::new(theirs)), "{theirs}");
        }
    }

    #[test]
    fn a_record_line_round_trips_any_path() {
        let path = Path::new("/home/b o/\n\u{e9}");
        let line = format!("7 9 {}", hex(path.as_os_str().as_bytes()));
        assert_eq!(parse_line(&line), Some(((7, 9), path.to_path_buf())));
        assert_eq!(parse_line("7 9 0"), None);
        assert_eq!(parse_line("7 x 00"), None);
    }

    /// The PID of a process that has exited.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    /// A temp dir with an empty `temps/` for records and a `folder/`.
    fn layout() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let records = tmp.path().join("temps");
        let folder = tmp.path().join("folder");
        std::fs::create_dir_all(&records).unwrap();
        std::fs::create_dir(&folder).unwrap();
        (tmp, records, folder)
    }

    #[test]
    fn a_dead_processs_temp_files_are_swept_and_a_live_ones_kept() {
        let (_tmp, records, folder) = layout();
        let meta = std::fs::metadata(&folder).unwrap();
        let line = format!(
            "{} {} {}\n",
            meta.dev(),
            meta.ino(),
            hex(folder.as_os_str().as_bytes())
        );
        let dead = dead_pid();
        std::fs::write(records.join(format!("{dead}.dirs")), &line).unwrap();
        // A live process's: this test holds the lock of the record `1.dirs`.
        let live = File::create(records.join("1.dirs")).unwrap();
        (&live).write_all(line.as_bytes()).unwrap();
        rustix::fs::flock(&live, FlockOperation::LockExclusive).unwrap();
        let orphan = folder.join(format!(".fsguard-{dead}-0-1f.tmp"));
        let kept = [
            folder.join(".fsguard-1-0-1f.tmp"),
            folder.join(format!(".fsguard-{dead}0-0-1f.tmp")),
            folder.join(format!("fsguard-{dead}-0-1f.tmp")),
            folder.join("notes.txt"),
        ];
        for f in kept.iter().chain([&orphan]) {
            std::fs::write(f, "x").unwrap();
        }
        // A directory and a link with an orphan's name are not ours to remove.
        std::fs::create_dir(folder.join(format!(".fsguard-{dead}-1-1f.tmp"))).unwrap();

        assert_eq!(orphaned_temp_files(&records), std::slice::from_ref(&orphan));
        assert!(orphan.exists(), "listing removes nothing");
        assert_eq!(sweep_temp_files(&records), std::slice::from_ref(&orphan));
        assert!(!orphan.exists());
        for f in &kept {
            assert!(f.exists(), "{}", f.display());
        }
        assert!(folder.join(format!(".fsguard-{dead}-1-1f.tmp")).is_dir());
        assert!(!records.join(format!("{dead}.dirs")).exists());
        assert!(records.join("1.dirs").exists());
        assert_eq!(sweep_temp_files(&records), Vec::<PathBuf>::new());
    }

    #[test]
    fn a_record_that_names_a_replaced_directory_sweeps_nothing_there() {
        let (_tmp, records, folder) = layout();
        let meta = std::fs::metadata(&folder).unwrap();
        let dead = dead_pid();
        let line = format!(
            "{} {} {}\n",
            meta.dev(),
            meta.ino() + 1,
            hex(folder.as_os_str().as_bytes())
        );
        std::fs::write(records.join(format!("{dead}.dirs")), line).unwrap();
        let temp = folder.join(format!(".fsguard-{dead}-0-1f.tmp"));
        std::fs::write(&temp, "x").unwrap();
        assert_eq!(sweep_temp_files(&records), Vec::<PathBuf>::new());
        assert!(temp.exists());
    }
}
