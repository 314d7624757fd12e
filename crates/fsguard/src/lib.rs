//! Paths and files for untrusted input: the file-system primitives every tool builds on.
//!
//! What this crate owns:
//!
//! - [`RelPath`]: a relative path from untrusted input, validated once (no absolute path, no
//!   `..`, no NUL, no `.git` in any letter case, bounded lengths) and opened component by
//!   component with `O_NOFOLLOW`, so a symlink anywhere on the way is refused at the moment of
//!   use (RUN-4).
//! - [`AutoRun`]: the one list of auto-run configuration names (`.claude/`, `.mcp.json`,
//!   `.cargo/config.toml`, a bare repository's `HEAD` and `config`, …) that host programs
//!   obey without the user running anything, and [`AutoRun::classify`], which says whether a
//!   path is one and why (TRUST-1, TRUST-2).
//! - [`RootLease`]: a work root pinned by device and inode through an open fd, re-verifiable
//!   (CMD-8).
//! - [`scan_hard_links`]: a parallel walk listing every regular file with more than one link;
//!   it fails closed on unreadable directories (CMD-9).
//! - [`open_checked`] / [`read_checked`]: single-link access checked on the descriptor that is
//!   read, before and after (FILE-1).
//! - [`atomic_write`]: temp file, `fsync`, `renameat`, `fsync` of the directory (FILE-2).
//! - [`TextFile`] / [`read_text`]: too large, denied, binary or text (FILE-3).
//! - [`is_temp_name`], [`record_temp_files_in`], [`sweep_temp_files`]: our temporary files'
//!   two name patterns, and the record through which a later process finds and removes those
//!   a killed process left in a folder.
//! - [`Mirror`]: a private copy of a folder, written back only where the folder still matches
//!   the baseline (RUN-11); a folder holding a hard-linked file is not mirrored at all (the
//!   rule of CMD-9 and FILE-1, checked on the descriptor each file is copied from). Change
//!   journals (inotify, [`Journaling`]) let a turn look only at what changed in the mirror,
//!   and a mirror a long-lived process keeps only at what changed on either side since its
//!   last turn; whenever a journal cannot vouch, the whole tree is walked.
//!
//! What it refuses to know: tools, sandboxes, processes, error codes of the agent protocol
//! (callers map these errors to `AGENT_EXEC_*`), and anything about who is asking. Every
//! refusal is an error value (one `#[non_exhaustive]` enum per operation) naming the offending
//! path component; nothing here panics on input.
//!
//! Linux is the tested platform; the code uses only POSIX `*at` calls except where marked.
//!
//! # Example
//!
//! ```
//! use fsguard::{atomic_write, read_checked, scan_hard_links, RelPath, RootLease, ScanOptions};
//!
//! let tmp = tempfile::tempdir().unwrap();
//! let lease = RootLease::acquire(tmp.path()).unwrap();
//!
//! // Untrusted input becomes a RelPath or an error that says what to do instead.
//! let err = RelPath::new("notes/../../etc/passwd").unwrap_err();
//! assert!(err.to_string().contains("may not leave the root"));
//!
//! std::fs::create_dir(tmp.path().join("notes")).unwrap();
//! let path = RelPath::new("notes/today.txt").unwrap();
//! atomic_write(&lease, &path, b"hello").unwrap();
//! assert_eq!(read_checked(&lease, &path, 1 << 20).unwrap(), b"hello");
//!
//! lease.verify().unwrap();
//! let report = scan_hard_links(&[tmp.path()], &ScanOptions::new()).unwrap();
//! assert!(report.links.is_empty());
//! ```
#![deny(missing_docs)]

mod atomic;
mod autorun;
mod checked;
mod lease;
mod linkcover;
mod mirror;
mod pool;
mod relpath;
mod scan;
mod sys;
mod temps;

pub use atomic::{WriteError, atomic_write};
pub use autorun::{
    AutoRun, AutoRunEntry, AutoRunKind, AutoRunWalker, Protected,
    matches_default as autorun_matches_default,
};
pub use checked::{
    CheckError, CheckedFile, MAX_TEXT_BYTES, TextFile, open_checked, read_checked, read_text,
};
pub use lease::{FileId, LeaseError, RootLease, kernel_path};
pub use linkcover::{CoverError, READ_ONLY_BINDS, read_only_cover, read_only_cover_roots};
pub use mirror::{
    BaselineEntry, Change, ChangeKind, Conflict, ConflictReason, EntryKind, FinalizeReport,
    Journaling, Mirror, MirrorError, MirrorOptions, NotCopied, PendingWriteBack, RACY_WINDOW,
    Recovered, STAGED_PREFIX, WRITE_BACK_SETTLE, pending_write_backs, record_path,
    recover_write_backs, remove_mirror, remove_tree, set_mirror_aside, unique_id,
};
pub use relpath::{MAX_COMPONENT_BYTES, MAX_PATH_BYTES, OpenError, RelPath, RelPathError};
pub use scan::{
    HardLink, ScanError, ScanFailure, ScanOptions, ScanReport, scan_hard_links, scan_hard_links_in,
};
pub use temps::{is_temp_name, orphaned_temp_files, record_temp_files_in, sweep_temp_files};
