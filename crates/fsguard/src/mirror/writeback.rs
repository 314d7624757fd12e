//! The write-back journal: a write-back cut short (SIGKILL, crash, power loss) is finished by
//! the next process that finds it (RUN-16).
//!
//! # Why finish, not undo
//!
//! A write-back runs only after a successful agent turn (RUN-11): its content is the work the
//! turn was run to produce. The process that dies mid-way is the host, not the agent's
//! judgement, and the mirror that held the work may be gone. Undoing would throw away work
//! that nothing can recreate, and the agent, whose call got no answer, would redo it against a
//! folder it cannot tell apart from one where nothing ran. Finishing gives the folder the state
//! the turn would have left; the report says it happened. So the journal has one commit
//! point: before it, nothing in the folder has been renamed and recovery removes what was
//! staged (the old generation stays); after it, every new file is durable beside its target
//! and recovery finishes (the new generation).
//!
//! # The protocol
//!
//! 1. **Plan.** The journal (`<state>/writeback/<id>.journal`) lists every change with the
//!    names of the files it will make in the folder and, for a file it replaces or deletes,
//!    that file's recorded identity. It is written under a temporary name, `flock`ed,
//!    `fsync`ed, then renamed into place and the directory `fsync`ed: a journal a recoverer
//!    can see is complete, and its lock is held from before it was visible.
//! 2. **Stage.** New directories are made; each new file is written under its planned name
//!    beside its target and `fsync`ed; then each directory holding one is `fsync`ed.
//! 3. **Commit.** The staged files' identities (device, inode) and a `commit` line are
//!    appended and the journal `fsync`ed. Only now is anything renamed.
//! 4. **Rename and settle** as the `settle` module describes, then **clear**: the journal is
//!    removed and its directory `fsync`ed.
//!
//! # Recovery
//!
//! A journal whose lock can be taken belongs to a process that is gone (the kernel drops an
//! `flock` with the last descriptor, so with the process). Without its commit line, each
//! planned staged file that exists is removed and each directory it made is removed if empty.
//! With it, each entry is finished **only where the folder still holds what the journal
//! recorded** (the old file with every recorded field, ctime included, or nothing where a new
//! file goes); an entry whose path the user changed since is left as the user left it, and
//! its staged file removed. Every outcome is reported ([`Recovered`]).
//!
//! # Our names in the folder
//!
//! Every file a journaled write-back makes in the folder is named
//! `.agent-exec-wb-<journal id>-<n>.tmp` ([`STAGED_PREFIX`]): the new content before it is
//! renamed in, and the replaced or deleted file while it waits to be verified. Recovery only
//! ever removes a name its journal lists; [`pending_write_backs`] lists those that exist.

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FlockOperation, Mode, RenameFlags};

use super::{BaselineEntry, open_rel_dir};
use crate::sys::{self, Kind, Meta};

/// The start of the name of every file a journaled write-back makes in the user's folder.
pub const STAGED_PREFIX: &str = ".agent-exec-wb-";

/// A journal's file name ends so; while it is being written, with [`TEMP_SUFFIX`] after.
const JOURNAL_SUFFIX: &str = ".journal";
/// The suffix of a journal not yet published (swept when unlocked).
const TEMP_SUFFIX: &str = ".tmp";
const HEADER: &str = "agent-exec write-back journal v1";

/// What a replaced or deleted file was when the write-back vetted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Recorded {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) size: u64,
    pub(crate) mode: u32,
    pub(crate) nlink: u64,
    pub(crate) mtime: (i64, u32),
    pub(crate) ctime: (i64, u32),
}

impl Recorded {
    pub(crate) fn of(b: &BaselineEntry) -> Recorded {
        Recorded {
            dev: b.dev,
            ino: b.ino,
            size: b.size,
            mode: b.mode,
            nlink: b.nlink,
            mtime: b.mtime,
            ctime: b.ctime,
        }
    }

    /// `m` is this file, untouched: every field, the ctime included.
    fn is(&self, m: &Meta) -> bool {
        self.moved(m) && m.ctime == self.ctime
    }

    /// `m` is this file, untouched but for the ctime a rename of it moved.
    fn moved(&self, m: &Meta) -> bool {
        m.kind != Kind::Dir
            && (m.dev, m.ino, m.size, m.mode, m.nlink, m.mtime)
                == (
                    self.dev, self.ino, self.size, self.mode, self.nlink, self.mtime,
                )
    }
}

/// One change of a write-back, as the journal plans it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// A directory the mirror added, made while staging.
    MakeDir { path: PathBuf, mode: u32 },
    /// A new file, staged as `staged` beside `path`.
    Add { path: PathBuf, staged: String },
    /// A file replaced by the one staged as `staged`, which then holds the old one.
    Replace {
        path: PathBuf,
        staged: String,
        old: Recorded,
    },
    /// A file deleted: moved to `aside`, verified, removed.
    Delete {
        path: PathBuf,
        aside: String,
        old: Recorded,
    },
    /// A directory the mirror deleted.
    RemoveDir { path: PathBuf },
}

impl Entry {
    pub(crate) fn path(&self) -> &Path {
        match self {
            Entry::MakeDir { path, .. }
            | Entry::Add { path, .. }
            | Entry::Replace { path, .. }
            | Entry::Delete { path, .. }
            | Entry::RemoveDir { path } => path,
        }
    }

    /// The name this entry makes in the folder, if any.
    pub(crate) fn our_name(&self) -> Option<&str> {
        match self {
            Entry::Add { staged, .. } | Entry::Replace { staged, .. } => Some(staged),
            Entry::Delete { aside, .. } => Some(aside),
            _ => None,
        }
    }
}

/// A write-back's plan: the folder (path and identity) and its entries in the order they run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) folder: PathBuf,
    pub(crate) folder_id: (u64, u64),
    pub(crate) entries: Vec<Entry>,
}

/// A journal as read back: its plan and, once committed, each staged file's identity by entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub(crate) plan: Plan,
    pub(crate) committed: Option<Vec<(usize, u64, u64)>>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn path_field(p: &Path) -> String {
    hex(p.as_os_str().as_bytes())
}

fn recorded_fields(r: &Recorded) -> String {
    format!(
        "{} {} {} {} {} {} {} {} {}",
        r.dev, r.ino, r.size, r.mode, r.nlink, r.mtime.0, r.mtime.1, r.ctime.0, r.ctime.1
    )
}

/// The plan as the journal's text: one line per entry, paths as hex (any bytes but NUL may be
/// in a name), and a last line that counts the entries.
pub(crate) fn encode_plan(plan: &Plan) -> String {
    let mut out = format!(
        "{HEADER}\nfolder {} {} {}\n",
        path_field(&plan.folder),
        plan.folder_id.0,
        plan.folder_id.1
    );
    for e in &plan.entries {
        let line = match e {
            Entry::MakeDir { path, mode } => format!("mkdir {} {mode}", path_field(path)),
            Entry::Add { path, staged } => format!("add {} {staged}", path_field(path)),
            Entry::Replace { path, staged, old } => format!(
                "replace {} {staged} {}",
                path_field(path),
                recorded_fields(old)
            ),
            Entry::Delete { path, aside, old } => {
                format!(
                    "delete {} {aside} {}",
                    path_field(path),
                    recorded_fields(old)
                )
            }
            Entry::RemoveDir { path } => format!("rmdir {}", path_field(path)),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(&format!("plan {}\n", plan.entries.len()));
    out
}

/// The commit record appended once every staged file is durable.
pub(crate) fn encode_commit(staged: &[(usize, u64, u64)]) -> String {
    let mut out = String::new();
    for (i, dev, ino) in staged {
        out.push_str(&format!("staged {i} {dev} {ino}\n"));
    }
    out.push_str(&format!("commit {}\n", staged.len()));
    out
}

/// Reads a journal back. A plan that is not whole is an error (a published journal always is:
/// it is written before it is renamed into place); a commit record that is not whole — cut
/// off mid-append — counts as no commit.
pub(crate) fn parse(text: &str) -> Result<Parsed, String> {
    let mut lines = text.split_inclusive('\n');
    let mut next = || -> Option<&str> { lines.next().and_then(|l| l.strip_suffix('\n')) };
    if next() != Some(HEADER) {
        return Err("not a write-back journal (unknown first line)".into());
    }
    let folder_line = next().ok_or("no folder line")?;
    let f: Vec<&str> = folder_line.split(' ').collect();
    let (folder, folder_id) = match f.as_slice() {
        ["folder", p, dev, ino] => (path_of(p)?, (num(dev)?, num(ino)?)),
        _ => return Err(format!("bad folder line `{folder_line}`")),
    };
    let mut entries = Vec::new();
    loop {
        let line = next().ok_or("the plan is cut short")?;
        let w: Vec<&str> = line.split(' ').collect();
        let entry = match w.as_slice() {
            ["plan", n] => {
                if num(n)? != entries.len() as u64 {
                    return Err("the plan's count does not match its entries".into());
                }
                break;
            }
            ["mkdir", p, mode] => Entry::MakeDir {
                path: path_of(p)?,
                mode: u32::try_from(num(mode)?).map_err(|e| e.to_string())?,
            },
            ["add", p, staged] => Entry::Add {
                path: path_of(p)?,
                staged: our_name(staged)?,
            },
            ["replace", p, staged, rest @ ..] => Entry::Replace {
                path: path_of(p)?,
                staged: our_name(staged)?,
                old: recorded_of(rest)?,
            },
            ["delete", p, aside, rest @ ..] => Entry::Delete {
                path: path_of(p)?,
                aside: our_name(aside)?,
                old: recorded_of(rest)?,
            },
            ["rmdir", p] => Entry::RemoveDir { path: path_of(p)? },
            _ => return Err(format!("bad plan line `{line}`")),
        };
        entries.push(entry);
    }
    let plan = Plan {
        folder,
        folder_id,
        entries,
    };
    let mut staged = Vec::new();
    let committed = loop {
        let Some(line) = next() else { break None };
        let w: Vec<&str> = line.split(' ').collect();
        match w.as_slice() {
            ["staged", i, dev, ino] => {
                let i = usize::try_from(num(i)?).map_err(|e| e.to_string())?;
                if i >= plan.entries.len() {
                    return Err(format!("staged entry {i} is not in the plan"));
                }
                staged.push((i, num(dev)?, num(ino)?));
            }
            ["commit", n] if num(n).ok() == Some(staged.len() as u64) => break Some(staged),
            _ => break None,
        }
    };
    Ok(Parsed { plan, committed })
}

fn num(s: &str) -> Result<u64, String> {
    s.parse().map_err(|_| format!("`{s}` is not a number"))
}

fn inum(s: &str) -> Result<i64, String> {
    s.parse().map_err(|_| format!("`{s}` is not a number"))
}

fn path_of(s: &str) -> Result<PathBuf, String> {
    let bytes = unhex(s).ok_or_else(|| format!("`{s}` is not a hex path"))?;
    if bytes.is_empty() || bytes.contains(&0) {
        return Err("an empty path or a NUL in a path".into());
    }
    Ok(PathBuf::from(OsStr::from_bytes(&bytes)))
}

/// A name the journal may make and remove: ours by its prefix, one plain component.
fn our_name(s: &str) -> Result<String, String> {
    if s.starts_with(STAGED_PREFIX) && !s.contains('/') && s.ends_with(TEMP_SUFFIX) {
        Ok(s.to_owned())
    } else {
        Err(format!("`{s}` is not a write-back file name"))
    }
}

fn recorded_of(w: &[&str]) -> Result<Recorded, String> {
    let [dev, ino, size, mode, nlink, ms, mn, cs, cn] = w else {
        return Err("a recorded file needs nine fields".into());
    };
    let small = |s: &str| u32::try_from(num(s)?).map_err(|e| e.to_string());
    Ok(Recorded {
        dev: num(dev)?,
        ino: num(ino)?,
        size: num(size)?,
        mode: small(mode)?,
        nlink: num(nlink)?,
        mtime: (inum(ms)?, small(mn)?),
        ctime: (inum(cs)?, small(cn)?),
    })
}

/// An id unique on this machine for the life of a directory that names things by it: this
/// process, the time and a counter (a journal's; the host's session directories').
pub fn unique_id() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{}-{nanos:x}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The `n`-th name journal `id` makes in the folder.
pub(crate) fn staged_name(id: &str, n: usize) -> String {
    format!("{STAGED_PREFIX}{id}-{n}{TEMP_SUFFIX}")
}

fn open_dir(dir: &Path) -> io::Result<File> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::NOFOLLOW).bits() as i32)
        .open(dir)
}

/// A published journal, locked for as long as this value lives.
#[derive(Debug)]
pub(crate) struct JournalFile {
    file: File,
    dir: File,
    name: String,
}

impl JournalFile {
    /// Step 1 of the protocol: the plan, durable and locked, under `dir/<id>.journal`.
    pub(crate) fn publish(dir: &Path, id: &str, plan: &Plan) -> io::Result<JournalFile> {
        let dir_fd = open_dir(dir)?;
        let name = format!("{id}{JOURNAL_SUFFIX}");
        let temp = format!("{name}{TEMP_SUFFIX}");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(dir.join(&temp))?;
        let written = (|| {
            rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive)?;
            file.write_all(encode_plan(plan).as_bytes())?;
            file.sync_all()?;
            rustix::fs::renameat_with(
                &dir_fd,
                temp.as_str(),
                &dir_fd,
                name.as_str(),
                RenameFlags::NOREPLACE,
            )?;
            rustix::fs::fsync(&dir_fd)?;
            Ok::<_, io::Error>(())
        })();
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&dir_fd, temp.as_str(), AtFlags::empty());
            return Err(e);
        }
        Ok(JournalFile {
            file,
            dir: dir_fd,
            name,
        })
    }

    /// Step 3: the staged files' identities and the commit line, durable.
    pub(crate) fn commit(&mut self, staged: &[(usize, u64, u64)]) -> io::Result<()> {
        self.file.seek(SeekFrom::End(0))?;
        self.file.write_all(encode_commit(staged).as_bytes())?;
        self.file.sync_data()
    }

    /// The last step: the journal is gone, durably, and its lock with it.
    pub(crate) fn clear(self) -> io::Result<()> {
        rustix::fs::unlinkat(&self.dir, self.name.as_str(), AtFlags::empty())?;
        rustix::fs::fsync(&self.dir)?;
        Ok(())
    }
}

/// What the next process did with a write-back it found cut short (RUN-16).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Recovered {
    /// The folder the write-back was writing to.
    pub folder: PathBuf,
    /// `true`: the write-back had committed and was finished; `false`: it had not, and what it
    /// had staged was removed (the folder is as before that write-back).
    pub finished: bool,
    /// The paths finished (or, for `finished: false`, the staged files removed), in order.
    pub done: Vec<PathBuf>,
    /// The paths left as they are, and why (the user changed them after the crash, or an
    /// error).
    pub left: Vec<(PathBuf, String)>,
}

impl std::fmt::Display for Recovered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.finished {
            write!(
                f,
                "a write-back to {} was cut short (the process died); it was finished: {} \
                 change(s) completed",
                self.folder.display(),
                self.done.len()
            )?;
        } else {
            write!(
                f,
                "a write-back to {} was cut short before it changed anything; its {} staged \
                 file(s) were removed and the folder is as before it",
                self.folder.display(),
                self.done.len()
            )?;
        }
        for (path, why) in &self.left {
            write!(f, "; {} left as it is: {why}", path.display())?;
        }
        Ok(())
    }
}

/// A write-back journal found in the state directory (`agent-exec status`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingWriteBack {
    /// The journal file.
    pub journal: PathBuf,
    /// The folder it writes to.
    pub folder: PathBuf,
    /// A live process holds it (a write-back in progress); otherwise the next use of the folder
    /// or start of `agent-exec` recovers it.
    pub in_progress: bool,
    /// Its files in the folder that exist now ([`STAGED_PREFIX`]).
    pub temp_files: Vec<PathBuf>,
}

/// The journals in `dir` (with those being written), by name.
fn journal_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Opens `dir/name` and takes its lock without waiting; `None` when a live process holds it,
/// or it is gone (a recoverer removed it).
fn take_unlocked(dir: &Path, name: &str) -> Option<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(dir.join(name))
        .ok()?;
    rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive).ok()?;
    // Another recoverer may have finished and removed it between our open and our lock.
    let meta = sys::fstat(&file).ok()?;
    (meta.nlink > 0).then_some(file)
}

/// Lists the write-back journals in `dir` (the state directory's `writeback/`) and the files
/// of ours each left in its folder.
pub fn pending_write_backs(dir: &Path) -> Vec<PendingWriteBack> {
    let mut out = Vec::new();
    for name in journal_names(dir) {
        if !name.ends_with(JOURNAL_SUFFIX) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(dir.join(&name)) else {
            continue;
        };
        let Ok(parsed) = parse(&text) else { continue };
        let in_progress = take_unlocked(dir, &name).is_none();
        let temp_files = parsed
            .plan
            .entries
            .iter()
            .filter_map(|e| {
                let ours = e.our_name()?;
                let path = parsed
                    .plan
                    .folder
                    .join(e.path().parent().unwrap_or(Path::new("")))
                    .join(ours);
                std::fs::symlink_metadata(&path).is_ok().then_some(path)
            })
            .collect();
        out.push(PendingWriteBack {
            journal: dir.join(&name),
            folder: parsed.plan.folder,
            in_progress,
            temp_files,
        });
    }
    out
}

/// Finishes or undoes every write-back journal in `dir` whose process is gone (module docs),
/// and removes journals that were never published. Returns what was done, one [`Recovered`]
/// per journal. A journal that cannot be read is left where it is and reported.
pub fn recover_write_backs(dir: &Path) -> Vec<Recovered> {
    let mut out = Vec::new();
    for name in journal_names(dir) {
        if name.ends_with(&format!("{JOURNAL_SUFFIX}{TEMP_SUFFIX}")) {
            // Never published, so nothing was staged from it: removed once its writer is gone.
            if take_unlocked(dir, &name).is_some() {
                let _ = std::fs::remove_file(dir.join(&name));
            }
            continue;
        }
        if !name.ends_with(JOURNAL_SUFFIX) {
            continue;
        }
        let Some(mut file) = take_unlocked(dir, &name) else {
            continue;
        };
        let mut text = String::new();
        let parsed = file
            .read_to_string(&mut text)
            .map_err(|e| e.to_string())
            .and_then(|_| parse(&text));
        let parsed = match parsed {
            Ok(p) => p,
            Err(e) => {
                out.push(Recovered {
                    folder: dir.join(&name),
                    finished: false,
                    done: Vec::new(),
                    left: vec![(
                        dir.join(&name),
                        format!("the journal cannot be read ({e}); it is left for a person"),
                    )],
                });
                continue;
            }
        };
        let report = recover(&parsed);
        // Done with it, whatever each entry came to: the report says what was left.
        let _ = std::fs::remove_file(dir.join(&name));
        if let Ok(d) = open_dir(dir) {
            let _ = rustix::fs::fsync(&d);
        }
        drop(file);
        out.push(report);
    }
    out
}

/// Recovery of one journal.
fn recover(parsed: &Parsed) -> Recovered {
    let plan = &parsed.plan;
    let mut report = Recovered {
        folder: plan.folder.clone(),
        finished: parsed.committed.is_some(),
        done: Vec::new(),
        left: Vec::new(),
    };
    let root = match open_dir_nofollow(&plan.folder) {
        Ok(fd) => fd,
        Err(e) => {
            report.left.push((
                plan.folder.clone(),
                format!("the folder cannot be opened ({e}); nothing was changed"),
            ));
            return report;
        }
    };
    let same_folder = sys::fstat(&root).is_ok_and(|m| (m.dev, m.ino) == plan.folder_id);
    if !same_folder {
        report.left.push((
            plan.folder.clone(),
            "the folder is no longer the directory that was written to; nothing was changed".into(),
        ));
        return report;
    }
    match &parsed.committed {
        None => undo(plan, root.as_fd(), &mut report),
        Some(staged) => {
            let mut ids = vec![None; plan.entries.len()];
            for &(i, dev, ino) in staged {
                ids[i] = Some((dev, ino));
            }
            for (entry, id) in plan.entries.iter().zip(ids) {
                match finish(root.as_fd(), entry, id) {
                    Ok(Some(())) => report.done.push(entry.path().to_path_buf()),
                    Ok(None) => {}
                    Err(why) => report.left.push((entry.path().to_path_buf(), why)),
                }
            }
        }
    }
    report
}

fn open_dir_nofollow(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        rustix::fs::OFlags::RDONLY
            | rustix::fs::OFlags::DIRECTORY
            | rustix::fs::OFlags::NOFOLLOW
            | rustix::fs::OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Before the commit nothing was renamed: remove what was staged, then the directories made
/// for it (deepest first), where empty.
fn undo(plan: &Plan, root: BorrowedFd<'_>, report: &mut Recovered) {
    for e in &plan.entries {
        let Some(ours) = e.our_name() else { continue };
        let Ok((parent, _)) = parent_of(root, e.path()) else {
            continue;
        };
        if rustix::fs::unlinkat(&parent, ours, AtFlags::empty()).is_ok() {
            report.done.push(e.path().to_path_buf());
        }
    }
    for e in plan.entries.iter().rev() {
        if let Entry::MakeDir { path, .. } = e
            && let Ok((parent, name)) = parent_of(root, path)
        {
            let _ = rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR);
        }
    }
}

fn parent_of<'p>(root: BorrowedFd<'_>, path: &'p Path) -> io::Result<(OwnedFd, &'p OsStr)> {
    super::open_rel_parent(root, path)
}

const CHANGED: &str = "it changed after the write-back was cut short; the user's version stays";

/// Finishes one committed entry where the folder still holds what the journal recorded.
/// `Ok(Some(()))`: finished now; `Ok(None)`: nothing to do (done before the crash);
/// `Err`: left, and why.
fn finish(
    root: BorrowedFd<'_>,
    entry: &Entry,
    id: Option<(u64, u64)>,
) -> Result<Option<()>, String> {
    let (parent, name) = match parent_of(root, entry.path()) {
        Ok(p) => p,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return match entry {
                Entry::RemoveDir { .. } | Entry::Delete { .. } => Ok(None),
                _ => Err("its directory is gone".into()),
            };
        }
        Err(e) => return Err(format!("its directory cannot be opened: {e}")),
    };
    let dir = parent.as_fd();
    let at = |n: &str| sys::stat_at(dir, n).ok();
    let err = |e: rustix::io::Errno| e.to_string();
    let now = sys::stat_at(dir, name).ok();
    let holds = |m: &Option<Meta>, id: (u64, u64)| m.is_some_and(|m| (m.dev, m.ino) == id);
    match entry {
        Entry::MakeDir { mode, .. } => match now {
            Some(m) if m.kind == Kind::Dir => Ok(None),
            Some(_) => Err(CHANGED.into()),
            None => {
                rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o700)).map_err(err)?;
                sys::chmod_dir_child(dir, name, sys::perm(*mode)).map_err(|e| e.to_string())?;
                Ok(Some(()))
            }
        },
        Entry::RemoveDir { .. } => match now {
            None => Ok(None),
            Some(m) if m.kind == Kind::Dir => {
                match rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
                    Ok(()) => Ok(Some(())),
                    Err(rustix::io::Errno::NOTEMPTY | rustix::io::Errno::EXIST) => {
                        Err("it is not empty: the user added to it".into())
                    }
                    Err(e) => Err(err(e)),
                }
            }
            Some(_) => Err(CHANGED.into()),
        },
        Entry::Add { staged, .. } => {
            let Some(id) = id else {
                let _ = rustix::fs::unlinkat(dir, staged.as_str(), AtFlags::empty());
                return Err("it was not staged".into());
            };
            if holds(&now, id) {
                return Ok(None);
            }
            let staged_ok = holds(&at(staged), id);
            if now.is_none() && staged_ok {
                rustix::fs::renameat_with(dir, staged.as_str(), dir, name, RenameFlags::NOREPLACE)
                    .map_err(err)?;
                rustix::fs::fsync(dir).map_err(err)?;
                return Ok(Some(()));
            }
            if staged_ok {
                let _ = rustix::fs::unlinkat(dir, staged.as_str(), AtFlags::empty());
            }
            Err(CHANGED.into())
        }
        Entry::Replace { staged, old, .. } => {
            let Some(id) = id else {
                let _ = rustix::fs::unlinkat(dir, staged.as_str(), AtFlags::empty());
                return Err("it was not staged".into());
            };
            let aside = at(staged);
            if holds(&now, id) {
                // Swapped in before the crash: the old file waits at the staged name.
                return match aside {
                    None => Ok(None),
                    Some(m) if old.moved(&m) => {
                        rustix::fs::unlinkat(dir, staged.as_str(), AtFlags::empty())
                            .map_err(err)?;
                        Ok(Some(()))
                    }
                    Some(_) => Err(format!(
                        "its earlier version changed after it was replaced and is kept at {}",
                        entry.path().with_file_name(staged).display()
                    )),
                };
            }
            let staged_ok = holds(&aside, id);
            if now.is_some_and(|m| old.is(&m)) && staged_ok {
                rustix::fs::renameat_with(dir, staged.as_str(), dir, name, RenameFlags::EXCHANGE)
                    .map_err(err)?;
                rustix::fs::fsync(dir).map_err(err)?;
                if at(staged).is_some_and(|m| old.moved(&m)) {
                    rustix::fs::unlinkat(dir, staged.as_str(), AtFlags::empty()).map_err(err)?;
                }
                return Ok(Some(()));
            }
            if staged_ok {
                let _ = rustix::fs::unlinkat(dir, staged.as_str(), AtFlags::empty());
            }
            Err(CHANGED.into())
        }
        Entry::Delete { aside, old, .. } => {
            let set_aside = at(aside);
            match now {
                None => match set_aside {
                    None => Ok(None),
                    Some(m) if old.moved(&m) => {
                        rustix::fs::unlinkat(dir, aside.as_str(), AtFlags::empty()).map_err(err)?;
                        Ok(Some(()))
                    }
                    Some(_) => {
                        // Changed while set aside: it goes back (never over anything).
                        rustix::fs::renameat_with(
                            dir,
                            aside.as_str(),
                            dir,
                            name,
                            RenameFlags::NOREPLACE,
                        )
                        .map_err(err)?;
                        Err(CHANGED.into())
                    }
                },
                Some(m) if old.is(&m) && set_aside.is_none() => {
                    rustix::fs::unlinkat(dir, name, AtFlags::empty()).map_err(err)?;
                    Ok(Some(()))
                }
                Some(_) => {
                    if set_aside.is_some_and(|m| old.moved(&m)) {
                        let _ = rustix::fs::unlinkat(dir, aside.as_str(), AtFlags::empty());
                    }
                    Err(CHANGED.into())
                }
            }
        }
    }
}

/// The journal of one write-back in progress: its plan, what was staged, and its lock. Dropped
/// without [`Journaled::clear`] (a panic), it still removes what it staged and was not used,
/// and clears the journal: in-process, the write-back's own report is the truth.
#[derive(Debug)]
pub(crate) struct Journaled {
    pub(crate) plan: Plan,
    /// For each entry: the staged file's directory and identity, once staged.
    pub(crate) staged: Vec<Option<(std::sync::Arc<OwnedFd>, Meta)>>,
    file: Option<JournalFile>,
}

impl Journaled {
    pub(crate) fn publish(dir: &Path, id: &str, plan: Plan) -> io::Result<Journaled> {
        let file = JournalFile::publish(dir, id, &plan)?;
        let n = plan.entries.len();
        Ok(Journaled {
            plan,
            staged: vec![None; n],
            file: Some(file),
        })
    }

    /// Step 3; the caller has `fsync`ed the staged files' directories.
    pub(crate) fn commit(&mut self) -> io::Result<()> {
        let ids: Vec<(usize, u64, u64)> = self
            .staged
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|(_, m)| (i, m.dev, m.ino)))
            .collect();
        match self.file.as_mut() {
            Some(f) => f.commit(&ids),
            None => Ok(()),
        }
    }

    /// Removes every staged file that was never renamed in (its name still holds it), then
    /// the journal.
    pub(crate) fn clear(mut self) -> io::Result<()> {
        self.remove_unused();
        match self.file.take() {
            Some(f) => f.clear(),
            None => Ok(()),
        }
    }

    fn remove_unused(&mut self) {
        for (entry, staged) in self.plan.entries.iter().zip(&self.staged) {
            let (Some(name), Some((dir, meta))) = (entry.our_name(), staged) else {
                continue;
            };
            if sys::stat_at(dir.as_fd(), name).is_ok_and(|m| (m.dev, m.ino) == (meta.dev, meta.ino))
            {
                let _ = rustix::fs::unlinkat(dir.as_fd(), name, AtFlags::empty());
            }
        }
    }
}

impl Drop for Journaled {
    fn drop(&mut self) {
        if let Some(f) = self.file.take() {
            self.remove_unused();
            let _ = f.clear();
        }
    }
}

/// A journaled write-back between its commit and its clear: the journal, and which change
/// (by its index in the write-back's list) is which entry.
#[derive(Debug)]
pub(super) struct Staging {
    journal: Journaled,
    entry_of: Vec<Option<usize>>,
    /// The mirror copy each staged file was read from, by entry.
    copies: Vec<Option<Meta>>,
    /// Why a change's file could not be staged, by entry.
    failed: Vec<Option<String>>,
}

/// What [`Staging::file`] knows of a change's new file.
pub(super) enum StagedFile<'a> {
    /// Not journaled: the caller writes it as before.
    No,
    /// Staged under this name, from this mirror copy.
    Yes(&'a str, Meta),
    /// Staging failed: the change is this conflict.
    Failed(String),
}

impl Staging {
    /// The staged file of change `index`.
    pub(super) fn file(&self, index: usize) -> StagedFile<'_> {
        let Some(e) = self.entry_of.get(index).copied().flatten() else {
            return StagedFile::No;
        };
        if let Some(why) = &self.failed[e] {
            return StagedFile::Failed(why.clone());
        }
        match (self.journal.plan.entries[e].our_name(), self.copies[e]) {
            (Some(name), Some(copy)) => StagedFile::Yes(name, copy),
            _ => StagedFile::No,
        }
    }

    /// The planned set-aside name of deletion `index`.
    pub(super) fn aside(&self, index: usize) -> Option<&str> {
        let e = self.entry_of.get(index).copied().flatten()?;
        match &self.journal.plan.entries[e] {
            Entry::Delete { aside, .. } => Some(aside),
            _ => None,
        }
    }

    /// Whether change `index` is a directory staging made.
    pub(super) fn made_dir(&self, index: usize) -> bool {
        self.entry_of
            .get(index)
            .copied()
            .flatten()
            .is_some_and(|e| {
                matches!(self.journal.plan.entries[e], Entry::MakeDir { .. })
                    && self.journal.staged[e].is_some()
            })
    }

    /// The last step: unused staged files and the journal go.
    pub(super) fn clear(self) -> io::Result<()> {
        self.journal.clear()
    }
}

impl super::Mirror {
    /// Steps 1 to 3 of the protocol for the changes about to be applied (`order`, skipping
    /// those with a verdict already): plan, publish, stage, commit. An error here leaves the
    /// folder untouched (what was staged is removed).
    pub(super) fn stage(
        &self,
        journals: &Path,
        changes: &[super::Change],
        verdict: &[Option<super::ConflictReason>],
        order: &[usize],
    ) -> Result<Staging, super::MirrorError> {
        use super::{ChangeKind, EntryKind};
        let id = unique_id();
        let mut entries = Vec::new();
        let mut entry_of = vec![None; changes.len()];
        for &i in order {
            if verdict[i].is_some() {
                continue;
            }
            let c = &changes[i];
            let path = c.path.clone();
            let n = entries.len();
            let base = self.baseline.get(&c.path);
            let entry = match (c.kind, c.entry) {
                (ChangeKind::Deleted, EntryKind::Dir) => Entry::RemoveDir { path },
                (ChangeKind::Deleted, _) => match base {
                    Some(b) => Entry::Delete {
                        path,
                        aside: staged_name(&id, n),
                        old: Recorded::of(b),
                    },
                    None => continue,
                },
                (ChangeKind::Added, EntryKind::Dir) => Entry::MakeDir {
                    mode: self.mirror_meta(&c.path)?.mode,
                    path,
                },
                (ChangeKind::Modified, EntryKind::Dir) => continue,
                (ChangeKind::Modified, _) => match base {
                    Some(b) => Entry::Replace {
                        path,
                        staged: staged_name(&id, n),
                        old: Recorded::of(b),
                    },
                    None => continue,
                },
                (ChangeKind::Added, _) => Entry::Add {
                    path,
                    staged: staged_name(&id, n),
                },
            };
            entry_of[i] = Some(n);
            entries.push(entry);
        }
        let folder = self.source.path().to_path_buf();
        let folder_id = sys::fstat(self.source.as_fd())
            .map(|m| (m.dev, m.ino))
            .map_err(super::io_err("stat", &folder))?;
        let plan = Plan {
            folder,
            folder_id,
            entries,
        };
        let journal =
            Journaled::publish(journals, &id, plan).map_err(|e| super::MirrorError::Io {
                op: "record the write-back journal in",
                path: journals.to_path_buf(),
                source: e,
            })?;
        let n = journal.plan.entries.len();
        let mut staging = Staging {
            journal,
            entry_of,
            copies: vec![None; n],
            failed: vec![None; n],
        };
        let mut dirs: Vec<std::sync::Arc<OwnedFd>> = Vec::new();
        for e in 0..n {
            let entry = staging.journal.plan.entries[e].clone();
            let staged = self.stage_entry(&entry);
            match staged {
                Ok(None) => {}
                Ok(Some((dir, meta, copy))) => {
                    let dir = std::sync::Arc::new(dir);
                    dirs.push(dir.clone());
                    staging.journal.staged[e] = Some((dir, meta));
                    staging.copies[e] = copy;
                }
                Err(why) => staging.failed[e] = Some(why),
            }
        }
        // The staged files' names (and the directories made) are durable before the commit.
        for d in &dirs {
            rustix::fs::fsync(d.as_fd()).map_err(|e| super::MirrorError::Io {
                op: "fsync",
                path: self.source.path().to_path_buf(),
                source: e.into(),
            })?;
        }
        staging
            .journal
            .commit()
            .map_err(|e| super::MirrorError::Io {
                op: "commit the write-back journal in",
                path: journals.to_path_buf(),
                source: e,
            })?;
        Ok(staging)
    }

    /// Step 2 for one entry: a directory made, or a file staged beside its target. Returns
    /// the directory `fsync`ed before the commit, the staged file's metadata (for a directory
    /// made, the directory's) and the mirror copy it was read from.
    #[allow(clippy::type_complexity)]
    fn stage_entry(&self, entry: &Entry) -> Result<Option<(OwnedFd, Meta, Option<Meta>)>, String> {
        let rel = entry.path();
        let Some(name) = rel.file_name() else {
            return Ok(None);
        };
        let parent = match open_rel_dir(self.source.as_fd(), rel.parent().unwrap_or(Path::new("")))
        {
            Ok(fd) => fd,
            // The apply step finds the same and reports it as the change's conflict.
            Err(_) => return Ok(None),
        };
        match entry {
            Entry::MakeDir { .. } => {
                match rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(0o700)) {
                    Ok(()) => {}
                    Err(rustix::io::Errno::EXIST) => return Ok(None),
                    Err(e) => return Err(format!("could not create the directory: {e}")),
                }
                let meta = sys::stat_at(parent.as_fd(), name).map_err(|e| e.to_string())?;
                Ok(Some((parent, meta, None)))
            }
            Entry::Add { staged, .. } | Entry::Replace { staged, .. } => {
                let (mut from, copy) = self.mirror_file(rel).map_err(|e| e.to_string())?;
                let old = sys::stat_at(parent.as_fd(), name).ok();
                let meta = crate::atomic::stage_file(
                    parent.as_fd(),
                    staged,
                    old.as_ref(),
                    copy.mode,
                    &mut from,
                )
                .map_err(|e| format!("could not stage the new file beside it: {e}"))?;
                Ok(Some((parent, meta, Some(copy))))
            }
            Entry::Delete { .. } | Entry::RemoveDir { .. } => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    fn recorded() -> impl Strategy<Value = Recorded> {
        (
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            0u32..0o10000,
            any::<u64>(),
            (any::<i64>(), 0u32..1_000_000_000),
            (any::<i64>(), 0u32..1_000_000_000),
        )
            .prop_map(|(dev, ino, size, mode, nlink, mtime, ctime)| Recorded {
                dev,
                ino,
                size,
                mode,
                nlink,
                mtime,
                ctime,
            })
    }

    fn rel() -> impl Strategy<Value = PathBuf> {
        proptest::collection::vec(proptest::collection::vec(1u8..=255, 1..8), 1..4).prop_map(
            |parts| {
                let mut p = PathBuf::new();
                for part in parts {
                    let part: Vec<u8> = part
                        .into_iter()
                        .map(|b| if b == b'/' { b'x' } else { b })
                        .collect();
                    p.push(OsStr::from_bytes(&part));
                }
                p
            },
        )
    }

    fn entry() -> impl Strategy<Value = Entry> {
        let name = (0usize..1000).prop_map(|n| staged_name("1-2-3", n));
        prop_oneof![
            (rel(), 0u32..0o10000).prop_map(|(path, mode)| Entry::MakeDir { path, mode }),
            (rel(), name.clone()).prop_map(|(path, staged)| Entry::Add { path, staged }),
            (rel(), name.clone(), recorded()).prop_map(|(path, staged, old)| Entry::Replace {
                path,
                staged,
                old
            }),
            (rel(), name, recorded()).prop_map(|(path, aside, old)| Entry::Delete {
                path,
                aside,
                old
            }),
            rel().prop_map(|path| Entry::RemoveDir { path }),
        ]
    }

    proptest! {
        #[test]
        fn a_journal_reads_back_as_written_and_a_cut_commit_is_no_commit(
            folder in rel(),
            entries in proptest::collection::vec(entry(), 0..12),
            ids in proptest::collection::vec((any::<u64>(), any::<u64>()), 0..12),
            cut in any::<proptest::sample::Index>(),
        ) {
            let plan = Plan { folder: Path::new("/").join(folder), folder_id: (1, 2), entries };
            let text = encode_plan(&plan);
            prop_assert_eq!(parse(&text).unwrap(), Parsed { plan: plan.clone(), committed: None });
            let staged: Vec<(usize, u64, u64)> = if plan.entries.is_empty() {
                Vec::new()
            } else {
                ids.iter().enumerate().map(|(i, &(d, n))| (i % plan.entries.len(), d, n)).collect()
            };
            let commit = encode_commit(&staged);
            let whole = format!("{text}{commit}");
            prop_assert_eq!(
                parse(&whole).unwrap(),
                Parsed { plan: plan.clone(), committed: Some(staged) }
            );
            // An append cut anywhere before its last newline is no commit.
            let at = text.len() + cut.index(commit.len());
            prop_assert_eq!(parse(&whole[..at]).unwrap().committed, None);
            // A plan cut anywhere is an error, never a shorter plan.
            let at = cut.index(text.len());
            prop_assert!(parse(&text[..at]).is_err());
        }

        #[test]
        fn any_text_is_parsed_or_refused_without_panic(text in ".{0,400}") {
            let _ = parse(&text);
        }
    }

    /// Stages a write-back of `m` and "dies" after its commit: the journal's lock goes, the
    /// journal and the staged files stay.
    fn die_after_commit(m: &super::super::Mirror, journals: &Path) {
        let changes = m.changes().unwrap();
        let verdict = vec![None; changes.len()];
        let order: Vec<usize> = (0..changes.len()).collect();
        let mut staging = m.stage(journals, &changes, &verdict, &order).unwrap();
        drop(staging.journal.file.take());
    }

    /// A temp dir with the folder `f` made, and where the mirror `m` and journals `j` go.
    fn dirs() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let folder = tmp.path().join("f");
        std::fs::create_dir(&folder).unwrap();
        let (mirror, journals) = (tmp.path().join("m"), tmp.path().join("j"));
        (tmp, folder, mirror, journals)
    }

    fn ours_in(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|n| n.starts_with(STAGED_PREFIX))
            .collect()
    }

    #[test]
    fn recovery_finishes_a_committed_write_back_but_never_over_a_later_edit() {
        // RUN-16.
        let (_tmp, folder, mirror, journals) = dirs();
        for name in ["a.txt", "b.txt", "gone.txt"] {
            std::fs::write(folder.join(name), "old").unwrap();
        }
        let m = super::super::Mirror::create(&folder, &mirror).unwrap();
        std::fs::write(mirror.join("a.txt"), "new a").unwrap();
        std::fs::write(mirror.join("b.txt"), "new b").unwrap();
        std::fs::remove_file(mirror.join("gone.txt")).unwrap();
        std::fs::create_dir(mirror.join("d")).unwrap();
        std::fs::write(mirror.join("d/c.txt"), "new c").unwrap();
        die_after_commit(&m, &journals);
        assert_eq!(pending_write_backs(&journals)[0].temp_files.len(), 3);
        assert!(!pending_write_backs(&journals)[0].in_progress);
        // The user saves b.txt after the crash: that save stays.
        std::fs::write(folder.join("b.txt"), "user's b").unwrap();

        let done = recover_write_backs(&journals);
        assert_eq!(done.len(), 1);
        assert!(done[0].finished);
        assert_eq!(
            done[0].left,
            vec![(PathBuf::from("b.txt"), CHANGED.to_owned())]
        );
        let read = |p: &str| std::fs::read_to_string(folder.join(p)).unwrap();
        assert_eq!(
            (read("a.txt"), read("b.txt"), read("d/c.txt")),
            ("new a".into(), "user's b".into(), "new c".into())
        );
        assert!(!folder.join("gone.txt").exists());
        assert!(ours_in(&folder).is_empty() && ours_in(&folder.join("d")).is_empty());
        assert!(std::fs::read_dir(&journals).unwrap().next().is_none());
        assert!(recover_write_backs(&journals).is_empty());
    }

    #[test]
    fn recovery_undoes_a_write_back_that_died_before_its_commit() {
        // RUN-16.
        let (_tmp, folder, mirror, journals) = dirs();
        std::fs::write(folder.join("a.txt"), "old").unwrap();
        let m = super::super::Mirror::create(&folder, &mirror).unwrap();
        std::fs::write(mirror.join("a.txt"), "new a").unwrap();
        std::fs::create_dir(mirror.join("d")).unwrap();
        std::fs::write(mirror.join("d/c.txt"), "new c").unwrap();
        let changes = m.changes().unwrap();
        let order: Vec<usize> = (0..changes.len()).collect();
        let mut staging = m
            .stage(&journals, &changes, &vec![None; changes.len()], &order)
            .unwrap();
        // Dies before the commit line: cut it off, then drop the lock.
        let file = staging.journal.file.take().unwrap();
        let path = journals.join(&file.name);
        let text = std::fs::read_to_string(&path).unwrap();
        let cut = text.find("\nstaged ").unwrap() + 1;
        std::fs::write(&path, &text[..cut]).unwrap();
        drop(file);

        let done = recover_write_backs(&journals);
        assert_eq!(done.len(), 1);
        assert!(!done[0].finished && done[0].left.is_empty());
        assert_eq!(
            std::fs::read_to_string(folder.join("a.txt")).unwrap(),
            "old"
        );
        assert!(!folder.join("d").exists());
        assert!(ours_in(&folder).is_empty());
    }

    #[test]
    fn a_journaled_write_back_leaves_no_journal_and_no_file_of_ours() {
        // RUN-16, RUN-11.
        let (_tmp, folder, mirror, journals) = dirs();
        std::fs::write(folder.join("a.txt"), "old").unwrap();
        std::fs::write(folder.join("gone.txt"), "old").unwrap();
        let mut m = super::super::Mirror::create(&folder, &mirror).unwrap();
        std::fs::write(mirror.join("a.txt"), "new a").unwrap();
        std::fs::remove_file(mirror.join("gone.txt")).unwrap();
        std::fs::create_dir(mirror.join("d")).unwrap();
        std::fs::write(mirror.join("d/c.txt"), "new c").unwrap();
        let report = m.finalize_journaled(&journals).unwrap();
        assert_eq!(report.applied.len(), 4, "{report:?}");
        assert!(report.conflicts.is_empty());
        assert_eq!(
            std::fs::read_to_string(folder.join("d/c.txt")).unwrap(),
            "new c"
        );
        assert!(ours_in(&folder).is_empty() && ours_in(&folder.join("d")).is_empty());
        assert!(std::fs::read_dir(&journals).unwrap().next().is_none());
    }

    #[test]
    fn a_name_outside_our_pattern_is_refused() {
        let text = format!(
            "{HEADER}\nfolder {} 1 2\nadd {} notes.txt\nplan 1\n",
            hex(b"/f"),
            hex(b"a")
        );
        assert_eq!(
            parse(&text).unwrap_err(),
            "`notes.txt` is not a write-back file name"
        );
    }
}
