//! [`Mirror::refresh`]: bring a mirror left by an earlier turn back to an exact copy of the
//! folder, copying only what may differ (RUN-11).
//!
//! **What is persisted, and where.** Re-deriving "this copy is still the folder's file" from the
//! two trees alone would need their contents compared, which costs as much as a copy. So
//! [`Mirror::save_record`] writes, for every copied file, the folder's metadata when it was
//! copied and the copy's metadata right after (with whether the mirror's clock vouched for
//! it, module docs of `mirror`), to `<mirror>.mirror-record` in the mirror's *parent*: outside
//! the mirror, so a command working in the mirror cannot edit it. The file ends with a BLAKE3
//! of its body and names the identities (device, inode) of both roots; a missing, short,
//! corrupt or foreign record makes `refresh` delete the mirror and [`create`](Mirror::create)
//! it anew. `refresh` deletes the record before it touches the mirror, so a crash half-way
//! leaves no record and the next refresh starts from scratch.
//!
//! **When a copy is kept.** A mirror file is kept, not copied, only when (1) the folder's file
//! has exactly the recorded metadata (type, device, inode, size, mode, mtime, ctime: the ctime
//! argument of the module docs says its content is then what was copied), (2) it was not
//! racily clean when copied (no hash recorded) and is not recent now, and (3) the copy has
//! exactly its recorded post-copy metadata and that record was trusted (the mirror's clock was
//! seen past its ctime, so any write to it since moved the ctime). Everything else is copied
//! again.
//!
//! **Pruning on the way.** The copy walk lists each mirror directory beside the folder's and
//! removes every entry the folder does not have as the same type (file or directory) —
//! whatever it is, `.git` in any case included — never following a symlink. A kept directory
//! is made owner-`rwx` if it is not (a failed turn may have left one unreadable) and gets the
//! folder's mode back at the end, as `create` does; one that has it already is left alone.
//!
//! **Journaled refresh.** [`Mirror::refresh_journaled`] (a mirror a long-lived process kept,
//! with [`Journaling::Both`](super::Journaling::Both)) runs the same walk over only the
//! subtrees its change journals name, after forgetting what it recorded there (and offering
//! that back as the record, so an unchanged file is still kept). It trusts its in-memory state
//! only while the record file beside the mirror is the one it last wrote, and it does not
//! delete the record first: a record older than the mirror is safe (a changed copy no longer
//! matches it and is copied again), and [`Mirror::save_record`] writes nothing when nothing
//! recorded changed and the file is still its own.
//!
//! **Cost.** A kept file costs one `statx` on each side and no open: the folder's side with
//! `AT_STATX_FORCE_SYNC` (a network file system asks its server, as the `open` a copy makes
//! would), the mirror's plain. Each directory costs a listing and an open on each side. The
//! record is read into a hash map by path, and nothing is compared as a `Path` on the way
//! (the walk's results are sorted once, by bytes).

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::hash::BuildHasherDefault;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode};

use super::{CopyStamp, EntryKind, Mirror, MirrorError, MirrorOptions, Time, Trust, io_err};
use crate::lease::{FileId, LeaseError, RootLease};
use crate::sys::{self, Kind, Meta};

const MAGIC: &[u8] = b"fsguard mirror record 1\n";

/// One copied file as recorded: the folder's metadata when copied, and the copy's after.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Recorded {
    src: Stamp,
    /// The folder's file was racily clean when copied: its metadata proves nothing.
    hashed: bool,
    copy: Stamp,
    trusted: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mode: u32,
    mtime: Time,
    ctime: Time,
}

impl Stamp {
    fn equals(&self, m: &Meta) -> bool {
        m.kind == Kind::File
            && m.dev == self.dev
            && m.ino == self.ino
            && m.size == self.size
            && m.mode == self.mode
            && m.mtime == self.mtime
            && m.ctime == self.ctime
    }
}

/// What the copy walk of a refresh may keep: the record's bytes, and where each path's entry
/// starts in them, by a hash of the path's bytes (the record's paths are the normalized ones
/// the walks build). Nothing is allocated per entry; an entry is parsed when it is looked up.
/// Two paths with the same hash are both left out, so both are copied again: a collision
/// costs a copy, never a wrong reuse (the path's bytes are compared on every lookup too).
#[derive(Debug, Default)]
pub(super) struct Reuse {
    /// The whole record, checksum included.
    bytes: Vec<u8>,
    at: HashMap<u64, usize, BuildHasherDefault<Prehashed>>,
    /// How many files it records.
    count: usize,
}

/// The entry of a path both of whose records share a hash: not used.
const COLLIDED: usize = usize::MAX;

/// A hash of a path's bytes, eight at a time (a multiply-rotate mix; not keyed: a collision
/// an adversary arranges only costs a copy): the key of [`Reuse`]'s index.
fn path_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut chunks = bytes.chunks_exact(8);
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    for c in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(word))
            .wrapping_mul(K)
            .rotate_left(29);
    }
    let mut word = [0u8; 8];
    word[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = (h ^ u64::from_le_bytes(word)).wrapping_mul(K);
    h ^ (h >> 32)
}

/// A hasher for keys that are hashes already.
#[derive(Default)]
struct Prehashed(u64);

impl std::hash::Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = path_hash(bytes) ^ self.0.rotate_left(5);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl Reuse {
    /// How many files the record names.
    pub(super) fn len(&self) -> usize {
        self.count
    }

    /// The record of `rel`, if there is exactly one.
    fn get(&self, rel: &Path) -> Option<Recorded> {
        let key = rel.as_os_str().as_bytes();
        let at = *self.at.get(&path_hash(key))?;
        let mut r = Reader(self.bytes.get(at..)?);
        let (path, rec) = r.entry()?;
        (path == key).then_some(rec)
    }

    /// The copy's stamp when the mirror's file at `name` may stand for the folder's file
    /// (`meta`, fstat-ed from the open descriptor, not recent) without copying it.
    pub(super) fn reusable(
        &self,
        rel: &Path,
        meta: &Meta,
        dst_dir: BorrowedFd<'_>,
        name: &OsStr,
    ) -> Option<CopyStamp> {
        let rec = self.get(rel)?;
        if rec.hashed || !rec.trusted || !rec.src.equals(meta) {
            return None;
        }
        let now = sys::stat_at(dst_dir, name).ok()?;
        if !rec.copy.equals(&now) {
            return None;
        }
        Some(CopyStamp {
            dev: now.dev,
            ino: now.ino,
            size: now.size,
            mode: now.mode,
            mtime: now.mtime,
            ctime: now.ctime,
            trust: Trust::Trusted,
            hash: None,
        })
    }
}

/// Removes the entry `name` in `dir` whatever it is, a directory with everything below it;
/// never follows a symlink. Missing is fine.
pub(super) fn remove_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let meta = match sys::stat_at(dir, name) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if meta.kind == Kind::Dir {
        // Owner may always chmod: make it listable and writable before emptying it (never
        // through a symlink swapped in since the stat).
        sys::chmod_dir_child(dir, name, Mode::from_raw_mode(0o700))?;
        let sub = sys::open_dir_child(dir, name)?;
        for child in names(sub.as_fd())? {
            remove_at(sub.as_fd(), &child)?;
        }
        drop(sub);
        match rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    } else {
        match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

fn names(dir: BorrowedFd<'_>) -> io::Result<Vec<OsString>> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    sys::for_each_entry(dir, &mut buf, |name, _| {
        out.push(OsStr::from_bytes(name.to_bytes()).to_os_string());
        Ok(())
    })?;
    Ok(out)
}

/// Where [`Mirror::save_record`] keeps the record of the mirror at `mirror`: beside it, in its
/// parent, named `<mirror's name>.mirror-record`.
pub fn record_path(mirror: &Path) -> Option<PathBuf> {
    let name = mirror.file_name()?;
    let mut file = name.to_os_string();
    file.push(".mirror-record");
    Some(mirror.with_file_name(file))
}

struct Record {
    source: FileId,
    mirror: FileId,
    files: Reuse,
}

/// What [`put_stamp`] writes: three `u64`, a `u32`, two times of an `i64` and a `u32`.
const STAMP_BYTES: usize = 3 * 8 + 4 + 2 * (8 + 4);

fn put_stamp(out: &mut Vec<u8>, s: &Stamp) {
    for v in [s.dev, s.ino, s.size] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&s.mode.to_le_bytes());
    for (sec, nsec) in [s.mtime, s.ctime] {
        out.extend_from_slice(&sec.to_le_bytes());
        out.extend_from_slice(&nsec.to_le_bytes());
    }
}

/// The record of `files` for the two roots.
fn encode<'p>(
    source: FileId,
    mirror: FileId,
    files: impl Iterator<Item = (&'p Path, Recorded)>,
) -> Vec<u8> {
    // About what an entry takes (a path, two stamps): one allocation, no regrowth copies.
    let entries = files.size_hint().1.unwrap_or(0);
    let mut out = Vec::with_capacity(MAGIC.len() + 72 + entries.saturating_mul(160));
    out.extend_from_slice(MAGIC);
    for id in [source, mirror] {
        out.extend_from_slice(&id.dev.to_le_bytes());
        out.extend_from_slice(&id.ino.to_le_bytes());
    }
    let count_at = out.len();
    out.extend_from_slice(&0u64.to_le_bytes());
    let mut count = 0u64;
    for (path, r) in files {
        count += 1;
        let bytes = path.as_os_str().as_bytes();
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(bytes);
        put_stamp(&mut out, &r.src);
        put_stamp(&mut out, &r.copy);
        out.push(u8::from(r.hashed) | (u8::from(r.trusted) << 1));
    }
    out[count_at..count_at + 8].copy_from_slice(&count.to_le_bytes());
    let sum = blake3::hash(&out);
    out.extend_from_slice(sum.as_bytes());
    out
}

/// A cursor over a record's bytes; every read fails on a short buffer.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    /// One file's entry: its path and its record. The path is not checked: it is only ever
    /// compared with a path the walk built (relative, normal, no `.git`), so one that is not
    /// such a path matches nothing and is never used.
    fn entry(&mut self) -> Option<(&'a [u8], Recorded)> {
        let len = usize::try_from(self.u64()?).ok()?;
        let path = self.take(len)?;
        let src = self.stamp()?;
        let copy = self.stamp()?;
        let flags = self.take(1)?[0];
        Some((
            path,
            Recorded {
                src,
                hashed: flags & 1 != 0,
                copy,
                trusted: flags & 2 != 0,
            },
        ))
    }

    fn stamp(&mut self) -> Option<Stamp> {
        Some(Stamp {
            dev: self.u64()?,
            ino: self.u64()?,
            size: self.u64()?,
            mode: self.u32()?,
            mtime: (self.i64()?, self.u32()?),
            ctime: (self.i64()?, self.u32()?),
        })
    }
}

/// `None` for anything but a complete, intact record.
fn decode(bytes: Vec<u8>) -> Option<Record> {
    let body_len = bytes.len().checked_sub(32)?;
    let (body, sum) = bytes.split_at(body_len);
    if blake3::hash(body).as_bytes() != sum {
        return None;
    }
    let mut r = Reader(body);
    if r.take(MAGIC.len())? != MAGIC {
        return None;
    }
    let source = FileId {
        dev: r.u64()?,
        ino: r.u64()?,
    };
    let mirror = FileId {
        dev: r.u64()?,
        ino: r.u64()?,
    };
    let count = r.u64()?;
    let mut at = HashMap::with_capacity_and_hasher(
        usize::try_from(count.min(1 << 20)).ok()?,
        BuildHasherDefault::<Prehashed>::default(),
    );
    for _ in 0..count {
        let offset = body_len - r.0.len();
        let len = usize::try_from(r.u64()?).ok()?;
        let path = r.take(len)?;
        // Two stamps and the flags, read when looked up.
        r.take(2 * STAMP_BYTES + 1)?;
        at.entry(path_hash(path))
            .and_modify(|o| *o = COLLIDED)
            .or_insert(offset);
    }
    if !r.0.is_empty() {
        return None;
    }
    let count = usize::try_from(count).ok()?;
    Some(Record {
        source,
        mirror,
        files: Reuse { bytes, at, count },
    })
}

/// What the record says of a copied file: its baseline and its copy's stamp.
fn recorded(base: &super::BaselineEntry, copy: &CopyStamp) -> Recorded {
    Recorded {
        src: Stamp {
            dev: base.dev,
            ino: base.ino,
            size: base.size,
            mode: base.mode,
            mtime: base.mtime,
            ctime: base.ctime,
        },
        hashed: base.hash.is_some(),
        copy: stamp_of_copy(copy),
        trusted: copy.trust == Trust::Trusted,
    }
}

fn stamp_of_copy(c: &CopyStamp) -> Stamp {
    Stamp {
        dev: c.dev,
        ino: c.ino,
        size: c.size,
        mode: c.mode,
        mtime: c.mtime,
        ctime: c.ctime,
    }
}

impl Mirror {
    /// [`refresh_with`](Mirror::refresh_with) with the default [`MirrorOptions`].
    pub fn refresh(
        source: impl AsRef<Path>,
        existing: impl AsRef<Path>,
    ) -> Result<Mirror, MirrorError> {
        Mirror::refresh_with(source, existing, &MirrorOptions::new())
    }

    /// Brings the mirror directory `existing` (absolute; left by an earlier [`create`] or
    /// `refresh` of the same folder whose [`save_record`](Mirror::save_record) ran) back to an
    /// exact copy of `source` and records a fresh baseline, exactly as [`create`] would: the
    /// result's [`changes`](Mirror::changes) and [`finalize`](Mirror::finalize) behave the same.
    /// Only files that may differ are copied (see the `refresh` module docs); what the folder
    /// lacks is removed, whatever it is. Without a usable record — missing, corrupt, written
    /// for another folder or directory — the mirror is removed and created anew; when
    /// `existing` does not exist it is created. When the copy fails (a hard-linked file in the
    /// folder, [`MirrorError::HardLinked`], or an I/O error) the half-refreshed mirror is
    /// removed before the error is returned; its record is already gone.
    ///
    /// [`create`]: Mirror::create
    pub fn refresh_with(
        source: impl AsRef<Path>,
        existing: impl AsRef<Path>,
        options: &MirrorOptions,
    ) -> Result<Mirror, MirrorError> {
        let dst = existing.as_ref();
        if !dst.is_absolute() {
            return Err(LeaseError::NotAbsolute {
                path: dst.to_path_buf(),
            }
            .into());
        }
        let Some(record_file) = record_path(dst) else {
            return Err(io_err("refresh", dst)(io::Error::from(
                io::ErrorKind::InvalidInput,
            )));
        };
        let record = fs::read(&record_file).ok().and_then(decode);
        match fs::remove_file(&record_file) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("remove", &record_file)(e)),
        }
        let source_lease = RootLease::acquire(source.as_ref())?;
        match fs::symlink_metadata(dst) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Mirror::create_with(source.as_ref(), dst, options);
            }
            Err(e) => return Err(io_err("stat", dst)(e)),
            Ok(m) if !m.is_dir() => {
                return Err(MirrorError::DestinationExists {
                    path: dst.to_path_buf(),
                });
            }
            Ok(_) => {}
        }
        let mirror = RootLease::acquire(dst)?;
        let record = record.filter(|r| r.source == source_lease.id() && r.mirror == mirror.id());
        let Some(record) = record else {
            drop(mirror);
            remove_tree(dst)?;
            return Mirror::create_with(source.as_ref(), dst, options);
        };
        let mut reuse = record.files;
        let mut this = Mirror {
            source: source_lease,
            mirror,
            baseline: BTreeMap::new(),
            copies: BTreeMap::new(),
            options: options.clone(),
            journals: super::Journals::default(),
            record: None,
            saved: Saved::default(),
        };
        let refreshed = (|| {
            let root = sys::reopen_dir(this.mirror.as_fd()).map_err(io_err("open", dst))?;
            rustix::fs::fchmod(&root, Mode::from_raw_mode(0o700))
                .map_err(|e| io_err("chmod", dst)(e.into()))?;
            drop(root);
            // One walk of both trees: what the folder lacks is removed as each directory is
            // listed (the copy walk's refresh mode), the rest kept or copied.
            let kept = this.copy_all_with(Some(&reuse))?;
            // Every recorded file kept and nothing else copied: the record read is exactly
            // the one `save_record` would write now.
            if kept == reuse.len() && kept == this.copies.len() {
                this.record = Some(std::mem::take(&mut reuse.bytes));
            }
            this.settle_copies()
        })();
        match refreshed {
            Ok(()) => Ok(this),
            Err(e) => Err(this.discard(e)),
        }
    }

    /// Brings a mirror this process kept since its last turn (made or refreshed with
    /// [`Journaling::Both`](super::Journaling::Both), finalized, its record saved) back to an
    /// exact copy of the folder, looking only at the paths its two change journals name —
    /// what changed in the folder or in the mirror since the last walk or journaled refresh
    /// (module docs of `mirror`, "Change journals"). The result is what
    /// [`refresh`](Mirror::refresh) would make, at a cost in proportion to the changes.
    ///
    /// Whenever the journals cannot vouch — none was kept, the kernel dropped events, a watch
    /// failed or went away, either root was replaced, the record beside the mirror is not the
    /// one this mirror last wrote (another process took the mirror in between), or so much
    /// changed that one walk is cheaper — it does exactly what `refresh` does instead.
    ///
    /// # Errors
    /// As [`refresh`](Mirror::refresh); the half-refreshed mirror is removed.
    pub fn refresh_journaled(mut self) -> Result<Mirror, MirrorError> {
        match self.refresh_in_place() {
            Ok(true) => Ok(self),
            Ok(false) => {
                let source = self.source.path().to_path_buf();
                let mirror = self.mirror.path().to_path_buf();
                let options = self.options.clone();
                drop(self);
                Mirror::refresh_with(source, mirror, &options)
            }
            Err(e) => Err(self.discard(e)),
        }
    }

    /// The journaled refresh; `false` when the journals cannot vouch (nothing was changed).
    fn refresh_in_place(&mut self) -> Result<bool, MirrorError> {
        let record_file = record_path(self.mirror.path());
        if self.source.verify().is_err()
            || self.mirror.verify().is_err()
            || !record_file.is_some_and(|r| self.saved.is_ours(&r))
        {
            return Ok(false);
        }
        let (Some(source), Some(mirror)) = (&self.journals.source, &self.journals.mirror) else {
            return Ok(false);
        };
        // Taken: what happens from here on is collected for the next turn.
        let (Some(mut roots), Some(more)) = (source.take(), mirror.take()) else {
            return Ok(false);
        };
        roots.extend(more);
        let roots = super::outermost(roots);
        if roots.is_empty() {
            return Ok(true);
        }
        if roots.iter().any(|r| r.as_os_str().is_empty())
            || roots.len() > (self.baseline.len() / 8).max(64)
        {
            return Ok(false);
        }
        // What the roots cover is forgotten, and offered back to the walk as a record: a file
        // whose both sides still match it is kept, as in a full refresh.
        let mut forgotten = Vec::new();
        for root in &roots {
            let under = |p: &PathBuf| p.starts_with(root);
            let paths: Vec<PathBuf> = self
                .baseline
                .range::<Path, _>((
                    std::ops::Bound::Included(root.as_path()),
                    std::ops::Bound::Unbounded,
                ))
                .map(|(p, _)| p)
                .take_while(|p| under(p))
                .cloned()
                .collect();
            for path in paths {
                let base = self.baseline.remove(&path);
                let copy = self.copies.remove(&path);
                if let (Some(base), Some(copy)) = (base, copy) {
                    if base.kind == EntryKind::File {
                        forgotten.push((path, recorded(&base, &copy)));
                    }
                }
            }
        }
        self.record = None;
        self.saved.changed();
        let reuse = decode(encode(
            self.source.id(),
            self.mirror.id(),
            forgotten.iter().map(|(p, r)| (p.as_path(), r.clone())),
        ))
        .map(|r| r.files)
        .unwrap_or_default();
        let mut copied = super::copy::Copied::default();
        let modes = |p: &Path| self.baseline.get(p).map(|b| b.mode);
        let Some(jobs) = super::copy::subtree_jobs(
            self.source.as_fd(),
            self.mirror.as_fd(),
            &roots,
            modes,
            &mut copied,
        )?
        else {
            return Ok(false);
        };
        let since = super::recent_since(self.options.racy_window);
        let copied = super::copy::walk(
            jobs,
            copied,
            self.mirror.id(),
            since,
            Some(&reuse),
            &self.journals,
        )?;
        let mut entries = copied.entries;
        super::sort_in_path_order(&mut entries);
        let (baseline, copies) = super::split_entries(entries);
        self.baseline.extend(baseline);
        self.copies.extend(copies);
        super::set_dir_modes(self.mirror.as_fd(), copied.dir_modes)?;
        self.settle_copies()?;
        Ok(true)
    }

    /// Writes the record a later [`refresh`](Mirror::refresh) needs (every copied file's
    /// folder-side and mirror-side metadata) to [`record_path`] of the mirror, atomically.
    /// Call it after `create`, `refresh` or `finalize`; a record older than the mirror's
    /// last change is still safe (a changed copy no longer matches it and is copied again).
    pub fn save_record(&self) -> Result<PathBuf, MirrorError> {
        let dst = self.mirror.path();
        let Some(path) = record_path(dst) else {
            return Err(io_err("record", dst)(io::Error::from(
                io::ErrorKind::InvalidInput,
            )));
        };
        if self.saved.is_current(&path) {
            return Ok(path);
        }
        // A mirror kept warm between turns leaves its own, older record in place: still safe
        // (a changed copy no longer matches it), and rewriting it would cost the whole
        // record at every turn. A process that takes the mirror next copies what changed.
        if self.options.journaling == super::Journaling::Both && self.saved.is_ours(&path) {
            return Ok(path);
        }
        // Debug builds (every test) check the shortcut against what it saves.
        if let (Some(bytes), false) = (&self.record, cfg!(debug_assertions)) {
            return self.saved.wrote(write_record(&path, bytes));
        }
        // The copies and the baseline are both in path order: one merge, no lookups.
        let mut baseline = self.baseline.iter().peekable();
        let files = self.copies.iter().filter_map(|(rel, copy)| {
            while baseline
                .next_if(|(p, _)| p.as_path() < rel.as_path())
                .is_some()
            {}
            let (_, base) = baseline.next_if(|(p, _)| *p == rel)?;
            (base.kind == EntryKind::File).then(|| (rel.as_path(), recorded(base, copy)))
        });
        let bytes = encode(self.source.id(), self.mirror.id(), files);
        if let Some(kept) = &self.record {
            assert!(
                *kept == bytes,
                "a refresh that kept everything read another record"
            );
        }
        self.saved.wrote(write_record(&path, &bytes))
    }
}

/// The record file's identity and times as this mirror last wrote it (see `Mirror::saved`).
#[derive(Debug, Default)]
pub(super) struct Saved {
    /// `None` until written; then what `stat` said right after.
    file: std::sync::Mutex<Option<Meta>>,
    /// Something recorded changed since it was written.
    changed: std::sync::atomic::AtomicBool,
}

impl Saved {
    pub(super) fn changed(&self) {
        self.changed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the record at `path` is the one last written and nothing changed since.
    fn is_current(&self, path: &Path) -> bool {
        self.is_ours(path) && !self.changed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the record at `path` is the file this mirror last wrote, untouched.
    pub(super) fn is_ours(&self, path: &Path) -> bool {
        let file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(ours) = file.as_ref() else {
            return false;
        };
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return false;
        };
        let Ok(dir) = fs::File::open(dir) else {
            return false;
        };
        sys::stat_at(dir.as_fd(), name).is_ok_and(|now| now == *ours)
    }

    fn wrote(&self, written: Result<PathBuf, MirrorError>) -> Result<PathBuf, MirrorError> {
        let path = written?;
        let meta = path.parent().zip(path.file_name()).and_then(|(dir, name)| {
            let dir = fs::File::open(dir).ok()?;
            sys::stat_at(dir.as_fd(), name).ok()
        });
        *self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = meta;
        self.changed
            .store(false, std::sync::atomic::Ordering::Relaxed);
        Ok(path)
    }
}

/// Writes `bytes` to the record file `path` atomically (a temporary beside it, renamed).
fn write_record(path: &Path, bytes: &[u8]) -> Result<PathBuf, MirrorError> {
    let mut tmp = path.as_os_str().to_os_string();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, bytes).map_err(io_err("write", &tmp))?;
    fs::rename(&tmp, path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io_err("write", path)(e)
    })?;
    Ok(path.to_path_buf())
}

/// Removes the mirror at `path` (absolute) and the record [`Mirror::save_record`] keeps beside
/// it: the record first, so whatever happens to the tree, no later
/// [`refresh`](Mirror::refresh) is offered a record of a mirror that is gone. The tree is
/// removed as [`remove_tree`] does.
///
/// # Errors
/// [`MirrorError::Io`] when the record exists but cannot be removed, or the tree cannot.
pub fn remove_mirror(path: &Path) -> Result<(), MirrorError> {
    forget_record(path)?;
    remove_tree(path)
}

/// Moves the mirror at `from` to `to` (same file system) to keep it for the user, and forgets
/// its record, so the next turn at `from` starts from a fresh copy. A record that cannot be
/// removed does not stop the move: it is harmless, since a refresh only trusts a record whose
/// mirror has the recorded identity, and the kept mirror has moved away.
///
/// # Errors
/// [`MirrorError::Io`] when the rename fails.
pub fn set_mirror_aside(from: &Path, to: &Path) -> Result<(), MirrorError> {
    let _ = forget_record(from);
    fs::rename(from, to).map_err(io_err("rename", from))
}

/// Removes the record of the mirror at `mirror`, if there is one.
fn forget_record(mirror: &Path) -> Result<(), MirrorError> {
    let Some(record) = record_path(mirror) else {
        return Ok(());
    };
    match fs::remove_file(&record) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err("remove", &record)(e)),
        _ => Ok(()),
    }
}

/// Removes the directory tree at `path` (absolute), never following a symlink, whatever modes
/// a failed turn left on it.
pub fn remove_tree(path: &Path) -> Result<(), MirrorError> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io_err("remove", path)(io::Error::from(
            io::ErrorKind::InvalidInput,
        )));
    };
    let dir = fs::File::open(parent).map_err(io_err("open", parent))?;
    remove_at(dir.as_fd(), name).map_err(io_err("remove", path))
}
