//! Host state on disk: every plugin's manifest, platform approval, user consent and folder
//! grants (PERM-1, PERM-2, PERM-3), as one JSON file in a state directory.
//!
//! Writes are read-modify-write under an exclusive `flock` on `state.lock`, and the new file
//! replaces the old one atomically through `fsguard::atomic_write` (FILE-2's rule applied to our
//! own file), so a reader sees the old state or the new one, never half of either. A running
//! host notices changes made by another process (`agent-exec revoke` in another shell) by
//! polling the file's identity ([`StateWatch`]) and pushes them into its
//! [`toolscope::MemoryAuthority`], whose watch re-checks every call in flight (TS-3).

use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fsguard::{RelPath, RootLease};
use serde::{Deserialize, Serialize};
use toolscope::{Grants, MemoryAuthority, PluginId};

/// The state file's name inside the state directory.
pub const STATE_FILE: &str = "state.json";

/// The current state file format.
pub const STATE_VERSION: u32 = 1;

/// How often a [`StateWatch`] looks at the state file. A revocation made by another process
/// reaches running calls within about this long (the issue asks for 100 ms end to end).
pub const WATCH_INTERVAL: Duration = Duration::from_millis(20);

/// Everything the host persists.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostState {
    /// The file format, [`STATE_VERSION`].
    pub version: u32,
    /// Every plugin's record.
    pub grants: Grants,
}

/// Why the state could not be read or written. Each message says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The state directory is not usable.
    #[error("state directory {}: {source}; pass --state-dir (or set AGENT_EXEC_STATE_DIR) to a writable directory", path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
    /// No state directory could be chosen.
    #[error("no state directory: HOME is not set; pass --state-dir or set AGENT_EXEC_STATE_DIR")]
    NoDefaultDir,
    /// The state file is not valid.
    #[error("state file {} is not valid ({reason}); fix it by hand or move it away to start over", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The state file could not be read or written.
    #[error("state file {}: {source}; {}", path.display(), io_remedy(source))]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
    /// A plugin id that cannot name a private folder.
    #[error(transparent)]
    BadPluginId(#[from] toolscope::PluginIdError),
    /// The change refers to something the state does not have.
    #[error("{0}")]
    Refused(String),
    /// The state directory's path goes through a symbolic link that this user could re-point.
    #[error(
        "the state directory {} is reached through the symbolic link {}, in a directory you can \
         write: a sandboxed command working there could re-point it at a forged state; pass \
         --state-dir (or set AGENT_EXEC_STATE_DIR) to the real path",
        path.display(),
        link.display()
    )]
    ReplaceableLink {
        /// The state directory as given.
        path: PathBuf,
        /// The link.
        link: PathBuf,
    },
}

/// What to do about a state file's I/O error, by its cause: a full disk is not a permission.
fn io_remedy(err: &io::Error) -> &'static str {
    match err.kind() {
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
            "the state directory's disk is full: free space there (`agent-exec status` lists \
             the kept mirrors, which may be removed) or pass another --state-dir"
        }
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
            "check the state directory's permissions"
        }
        _ => "check the state directory's disk and permissions",
    }
}

impl StateError {
    /// The stable code a front end reports this error with: a refused change or plugin id is
    /// the caller's to fix (`AGENT_EXEC_ARGUMENTS_INVALID`); a state directory or file that
    /// cannot be used is the machine's (`AGENT_EXEC_IO_FAILED`).
    pub fn code(&self) -> toolscope::ErrorCode {
        match self {
            StateError::BadPluginId { .. } | StateError::Refused(_) => {
                toolscope::ErrorCode::ExecArgumentsInvalid
            }
            _ => toolscope::ErrorCode::ExecIoFailed,
        }
    }

    /// This error as a tool error (its [`StateError::code`] and message).
    pub fn to_tool_error(&self) -> toolscope::ToolError {
        toolscope::ToolError::new(self.code(), self.to_string())
    }
}

/// The first component of `path` that is a symbolic link someone other than root could
/// re-point, if any: whoever may change the directory holding a link (its owner can always
/// `chmod u+w` it; a writable ancestor lets it be renamed aside and rebuilt) can re-point it,
/// and with it what `path` names the next time it is looked up (a sandboxed command
/// working in `$HOME` could re-point the state directory at a forged one). A link passes only when
/// the caller is not root, the link and every directory above it are owned by root, and none of
/// those directories is writable by group or others (`/home` → `/usr/home` on some systems);
/// for a root caller every link is refused, since root's commands write where root may.
pub fn replaceable_link(path: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(path)
    };
    let root_caller = rustix::process::geteuid().is_root();
    let fixed_dir =
        |dir: &Path| fs::symlink_metadata(dir).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0);
    let mut walked = PathBuf::new();
    for component in absolute.components() {
        walked.push(component);
        let Ok(meta) = fs::symlink_metadata(&walked) else {
            continue;
        };
        if !meta.file_type().is_symlink() {
            continue;
        }
        let ancestors_fixed = walked.ancestors().skip(1).all(fixed_dir);
        if root_caller || meta.uid() != 0 || !ancestors_fixed {
            return Some(walked);
        }
    }
    None
}

/// The state directory and the operations on its files.
///
/// ```
/// use host_shim::StateStore;
/// use toolscope::{Capability, PluginRecord};
/// let dir = tempfile::tempdir().unwrap();
/// let store = StateStore::open(dir.path()).unwrap();
/// store.update(|s| {
///     s.grants.plugins.insert("notes".parse().unwrap(), PluginRecord::fully_granted("notes@1", &[Capability::TerminalExec]));
///     Ok(())
/// }).unwrap();
/// assert!(store.load().unwrap().grants.plugins.contains_key(&"notes".parse().unwrap()));
/// ```
#[derive(Debug, Clone)]
pub struct StateStore {
    dir: PathBuf,
    kept: KeptLimits,
    copies: usize,
}

/// How many temporary full copies of one workspace may exist at once, beside its persistent
/// mirror (20 concurrent `run` calls on a 100 MB folder would take 2 GB of copies).
/// A `mounted` turn that finds the persistent mirror busy and every slot taken makes its copy
/// at its first call, when a slot is free (it waits; the slots are `flock`s in the state
/// directory, so the bound holds across processes). So at most `1 + DEFAULT_CONCURRENT_COPIES`
/// copies of one folder exist at once. The CLI takes it from `AGENT_EXEC_CONCURRENT_COPIES`;
/// a host sets it with [`StateStore::with_concurrent_copies`].
pub const DEFAULT_CONCURRENT_COPIES: usize = 3;

/// How many mirrors kept for diagnosis (RUN-11: failed runs that changed the mirror, runs with
/// conflicts or a failed write-back, `--keep-mirror`) the state directory holds at most, and
/// how many bytes of file content they may hold together. Each is a full copy of
/// a workspace, so without a bound ten failing runs on a 100 MB folder took 1 GB. When a new
/// one is kept, the oldest are removed until both bounds hold again; the one just kept is
/// never removed (its path is in the turn's report), so it alone may exceed `max_bytes`.
///
/// The CLI takes them from `AGENT_EXEC_KEPT_MIRRORS` and `AGENT_EXEC_KEPT_MIRROR_BYTES`; a host
/// sets them with [`StateStore::with_kept_limits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptLimits {
    /// The most kept mirrors (default 5).
    pub max_count: usize,
    /// The most bytes of file content in all of them (default 512 MiB).
    pub max_bytes: u64,
}

impl Default for KeptLimits {
    fn default() -> Self {
        KeptLimits {
            max_count: 5,
            max_bytes: 512 * 1024 * 1024,
        }
    }
}

/// Why a mirror was kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum KeptWhy {
    /// The turn failed and its run changed the mirror (RUN-11: kept for diagnosis).
    Failed,
    /// Write-back left paths alone because the folder changed too; the mirror holds the work.
    Conflicts,
    /// Write-back could not run or finish.
    WriteBackError,
    /// The host asked (`--keep-mirror`).
    Asked,
    /// Kept by an older agent-exec that did not say.
    Unknown,
}

/// One kept mirror, as `agent-exec status` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptMirror {
    /// Where it is.
    pub path: PathBuf,
    /// Bytes of file content in it.
    pub bytes: u64,
    /// When it was kept, in milliseconds since the Unix epoch.
    pub kept_at_ms: u64,
    /// Why.
    pub why: KeptWhy,
    /// The workspace folder it mirrors (empty when unknown).
    pub folder: PathBuf,
}

/// The part of a temporary (per-call) mirror's name before its owner: `<plugin>-call-<pid>-…`.
/// Only Linux records the owner (proctree) and sweeps orphans by it.
#[cfg(target_os = "linux")]
pub(crate) const CALL_MIRROR_MARK: &str = "-call-";

/// The suffix of a kept mirror's record, beside it in `mirrors/`.
const KEPT_RECORD: &str = ".kept.json";

/// Whether `name` is a kept mirror's: `<stem>-kept-<ms>-<pid>-<n>`.
fn is_kept_name(name: &str) -> bool {
    let mut parts = name.rsplitn(4, '-');
    let numeric =
        |s: Option<&str>| s.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
    numeric(parts.next())
        && numeric(parts.next())
        && numeric(parts.next())
        && parts.next().is_some_and(|stem| stem.ends_with("-kept"))
}

/// Bytes of file content below `path`, never following a link.
fn tree_bytes(path: &Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() {
                total = total.saturating_add(meta.len());
            }
        }
    }
    total
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Removes what hosts that died left behind: per-call mirrors in `mirrors/` and
/// the tools' temp dirs (`agent-exec-cmd-*`, `agent-exec-run-*`, `agent-exec-rc-*`) under the
/// system temp dir, each only when its name records an owner (PID and start time) that is no longer
/// alive, it is a directory of our uid, and by fd-relative removal that never follows a link.
/// Kept mirrors and the persistent ones are never touched here.
pub(crate) fn sweep_orphans(store: &StateStore) {
    #[cfg(target_os = "linux")]
    {
        let mirrors = store.dir.join("mirrors");
        let mark = CALL_MIRROR_MARK.trim_end_matches('-');
        if mirrors.is_dir() {
            let _ = proctree::sweep_orphans(&mirrors, |stem| stem.ends_with(mark));
        }
        let tools = [
            run_tool::TEMP_PREFIX,
            command_tool::TEMP_PREFIX,
            run_command_tool::TEMP_PREFIX,
        ];
        let _ = proctree::sweep_orphans(&std::env::temp_dir(), |stem| {
            // `agent-exec-command`: the longer stem older versions gave a command's temp dir.
            stem == "agent-exec-command" || tools.iter().any(|p| p.strip_suffix('-') == Some(stem))
        });
    }
    #[cfg(not(target_os = "linux"))]
    let _ = store;
}

/// Removes each kept mirror's record (`<name>.kept.json`) whose mirror is gone: a process that
/// died between removing a mirror and its record left it. The caller holds `kept.lock`, under
/// which records are written and removed.
fn remove_orphan_records(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(mirror) = name.to_str().and_then(|n| n.strip_suffix(KEPT_RECORD)) else {
            continue;
        };
        if fs::symlink_metadata(dir.join(mirror)).is_err() {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Bytes free for this user on the file system holding `dir`; `None` when it cannot be asked.
pub(crate) fn free_bytes(dir: &Path) -> Option<u64> {
    let st = rustix::fs::statvfs(dir).ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Opens (making it, mode 0600, never through a link) the lock file `path` and takes its
/// exclusive `flock`, waiting; the lock goes with the returned file.
fn lock_exclusive(path: &Path) -> io::Result<fs::File> {
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc_o_nofollow())
        .open(path)?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)?;
    Ok(lock)
}

/// Removes the state directory's own temporary files: `.fsguard-<pid>-<n>-<nanos>.tmp`, the
/// name `fsguard::atomic_write` gives the new `state.json` before its rename. Every such write
/// holds `state.lock`, and so does the caller: any such file now belongs to a writer that died
/// (a `grant` or `revoke` killed mid-write). Regular files only, never through a link.
fn sweep_state_temps(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let ours = name.starts_with(".fsguard-") && name.ends_with(".tmp");
        if ours && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// `id` as a [`PluginId`] (usable as a directory name: app-private folders live at
/// `private/<id>`; the rule is `PluginId`'s), or this crate's error for a bad one.
pub fn check_plugin_id(id: &str) -> Result<PluginId, StateError> {
    Ok(PluginId::parse(id)?)
}

/// A state directory (and its `mirrors/`) must be a directory of this user that nobody else
/// may write: grants are read from it and call dirs swept in it, so another user who could
/// plant a `state.json` or swap `mirrors` for a symlink would decide both.
fn only_ours(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::symlink_metadata(path)?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_dir() {
        return Err(io::Error::other("is not a directory"));
    }
    if meta.uid() != me {
        return Err(io::Error::other(format!(
            "belongs to uid {}, not to this user (uid {me}); another user's directory could hold \
             grants or links planted for you",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(io::Error::other(format!(
            "is writable by group or others (mode {:o}); make it `chmod 700`",
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

impl StateStore {
    /// The default state directory: `$AGENT_EXEC_STATE_DIR`, else `$XDG_STATE_HOME/agent-exec`,
    /// else `$HOME/.local/state/agent-exec`.
    pub fn default_dir() -> Result<PathBuf, StateError> {
        let non_empty = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        if let Some(dir) = non_empty("AGENT_EXEC_STATE_DIR") {
            return Ok(dir);
        }
        if let Some(dir) = non_empty("XDG_STATE_HOME") {
            return Ok(dir.join("agent-exec"));
        }
        non_empty("HOME")
            .map(|h| h.join(".local/state/agent-exec"))
            .ok_or(StateError::NoDefaultDir)
    }

    /// Opens (creating, mode 0700) the state directory `dir`.
    pub fn open(dir: impl AsRef<Path>) -> Result<StateStore, StateError> {
        let given = dir.as_ref();
        let dir_err = |source| StateError::Dir {
            path: given.to_path_buf(),
            source,
        };
        if let Some(link) = replaceable_link(given) {
            return Err(StateError::ReplaceableLink {
                path: given.to_path_buf(),
                link,
            });
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(given)
            .map_err(dir_err)?;
        let dir = fs::canonicalize(given).map_err(dir_err)?;
        only_ours(&dir).map_err(dir_err)?;
        match fs::symlink_metadata(dir.join("mirrors")) {
            Ok(_) => only_ours(&dir.join("mirrors")).map_err(|source| StateError::Dir {
                path: dir.join("mirrors"),
                source,
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(dir_err(e)),
        }
        Ok(StateStore {
            dir,
            kept: KeptLimits::default(),
            copies: DEFAULT_CONCURRENT_COPIES,
        })
    }

    /// The same store with another bound on temporary copies of one workspace
    /// ([`DEFAULT_CONCURRENT_COPIES`]); 0 makes every turn wait for the persistent mirror.
    #[must_use]
    pub fn with_concurrent_copies(mut self, copies: usize) -> StateStore {
        self.copies = copies;
        self
    }

    /// The bound on temporary copies of one workspace at once.
    pub fn concurrent_copies(&self) -> usize {
        self.copies
    }

    /// The same store with other bounds on kept mirrors.
    #[must_use]
    pub fn with_kept_limits(mut self, limits: KeptLimits) -> StateStore {
        self.kept = limits;
        self
    }

    /// The bounds on kept mirrors.
    pub fn kept_limits(&self) -> KeptLimits {
        self.kept
    }

    /// The kept mirrors, oldest first.
    pub fn kept_mirrors(&self) -> Vec<KeptMirror> {
        let dir = self.dir.join("mirrors");
        let Ok(entries) = fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut kept = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(text) = name.to_str().filter(|n| is_kept_name(n)) else {
                continue;
            };
            let path = dir.join(text);
            let Ok(meta) = path.symlink_metadata() else {
                continue;
            };
            if !meta.is_dir() {
                continue;
            }
            let record = fs::read(dir.join(format!("{text}{KEPT_RECORD}")))
                .ok()
                .and_then(|t| serde_json::from_slice::<KeptMirror>(&t).ok());
            kept.push(match record {
                Some(r) => KeptMirror { path, ..r },
                None => KeptMirror {
                    bytes: tree_bytes(&path),
                    kept_at_ms: u64::try_from(meta.mtime())
                        .unwrap_or(0)
                        .saturating_mul(1000),
                    why: KeptWhy::Unknown,
                    folder: PathBuf::new(),
                    path,
                },
            });
        }
        kept.sort_by(|a, b| (a.kept_at_ms, &a.path).cmp(&(b.kept_at_ms, &b.path)));
        kept
    }

    /// Records the mirror just kept at `path` (its size, when, why) and then drops the oldest
    /// kept mirrors until the [`KeptLimits`] hold, never `path` itself. Under an exclusive lock
    /// on `mirrors/kept.lock`, so concurrent hosts never both count the same budget.
    /// Best effort: a failure leaves more on disk, never less.
    pub fn record_kept_mirror(&self, path: &Path, folder: &Path, why: KeptWhy) {
        let dir = self.dir.join("mirrors");
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            return;
        };
        let Ok(lock) = lock_exclusive(&dir.join("kept.lock")) else {
            return;
        };
        let record = KeptMirror {
            path: path.to_path_buf(),
            bytes: tree_bytes(path),
            kept_at_ms: now_ms(),
            why,
            folder: folder.to_path_buf(),
        };
        if let Ok(text) = serde_json::to_vec(&record) {
            let _ = fs::write(dir.join(format!("{name}{KEPT_RECORD}")), text);
        }
        // The next mirror of this folder needs about as much room as the one just kept: kept
        // mirrors may not take it (a full state disk would fail every later `run`).
        let room_for_next = record.bytes;
        let mut kept = self.kept_mirrors();
        let mut count = kept.len();
        let mut bytes: u64 = kept.iter().map(|k| k.bytes).sum();
        for old in kept.drain(..) {
            let crowded = free_bytes(&dir).is_some_and(|free| free < room_for_next);
            if count <= self.kept.max_count && bytes <= self.kept.max_bytes && !crowded {
                break;
            }
            if old.path == path {
                continue;
            }
            if fsguard::remove_tree(&old.path).is_ok() {
                if let Some(n) = old.path.file_name().and_then(|n| n.to_str()) {
                    let _ = fs::remove_file(dir.join(format!("{n}{KEPT_RECORD}")));
                }
                count -= 1;
                bytes = bytes.saturating_sub(old.bytes);
            }
        }
        remove_orphan_records(&dir);
        drop(lock);
    }

    /// Removes the oldest kept mirror of `folder` (under `mirrors/kept.lock`), to make room for
    /// a new mirror of it; returns what was removed, `None` when it has none left.
    pub fn drop_oldest_kept_of(&self, folder: &Path) -> Option<KeptMirror> {
        let dir = self.dir.join("mirrors");
        let _lock = lock_exclusive(&dir.join("kept.lock")).ok()?;
        let oldest = self
            .kept_mirrors()
            .into_iter()
            .find(|k| k.folder == folder)?;
        fsguard::remove_tree(&oldest.path).ok()?;
        if let Some(n) = oldest.path.file_name().and_then(|n| n.to_str()) {
            let _ = fs::remove_file(dir.join(format!("{n}{KEPT_RECORD}")));
        }
        Some(oldest)
    }

    /// The state directory (absolute, canonical).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes the temporary files of state writes that died before their rename (see
    /// `sweep_state_temps`), under the state lock.
    pub fn sweep_temp_files(&self) {
        if let Ok(_lock) = lock_exclusive(&self.dir.join("state.lock")) {
            sweep_state_temps(&self.dir);
        }
    }

    /// Where write-back journals live (RUN-16: `fsguard::recover_write_backs`).
    pub fn writeback_dir(&self) -> PathBuf {
        self.dir.join("writeback")
    }

    /// Where each process that writes in folders records them, so that the temporary files a
    /// killed `write`, `edit` or write-back left there are found (`fsguard::sweep_temp_files`).
    pub fn temp_records_dir(&self) -> PathBuf {
        self.dir.join("temps")
    }

    /// The `.fsguard-*.tmp` files that processes now gone left in folders (`agent-exec
    /// status`); the next start of `agent-exec` removes them.
    pub fn orphaned_temp_files(&self) -> Vec<PathBuf> {
        fsguard::orphaned_temp_files(&self.temp_records_dir())
    }

    /// The write-backs in progress or cut short, with the files of ours each has in its folder
    /// (`agent-exec status`, RUN-16).
    pub fn write_backs(&self) -> Vec<fsguard::PendingWriteBack> {
        fsguard::pending_write_backs(&self.writeback_dir())
    }

    fn file(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// Reads the state; a missing file is the empty state.
    pub fn load(&self) -> Result<HostState, StateError> {
        let path = self.file();
        let text = match fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(HostState {
                    version: STATE_VERSION,
                    grants: Grants::default(),
                });
            }
            Err(source) => return Err(StateError::Io { path, source }),
        };
        let state: HostState = serde_json::from_slice(&text).map_err(|e| StateError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        if state.version != STATE_VERSION {
            return Err(StateError::Corrupt {
                path,
                reason: format!(
                    "version {} is not the {STATE_VERSION} this agent-exec reads",
                    state.version
                ),
            });
        }
        // Every plugin id in it is valid: `PluginId` deserialises only through its check.
        Ok(state)
    }

    /// Changes the state under the lock and writes it back atomically; returns what `change`
    /// returned. Nothing is written when `change` fails.
    pub fn update<R>(
        &self,
        change: impl FnOnce(&mut HostState) -> Result<R, StateError>,
    ) -> Result<R, StateError> {
        let lock_path = self.dir.join("state.lock");
        let lock = lock_exclusive(&lock_path).map_err(|source| StateError::Io {
            path: lock_path.clone(),
            source,
        })?;
        sweep_state_temps(&self.dir);
        let mut state = self.load()?;
        let out = change(&mut state)?;
        state.version = STATE_VERSION;
        let mut text = serde_json::to_vec_pretty(&state).map_err(|e| StateError::Corrupt {
            path: self.file(),
            reason: e.to_string(),
        })?;
        text.push(b'\n');
        let dir = RootLease::acquire(&self.dir).map_err(|e| StateError::Io {
            path: self.dir.clone(),
            source: io::Error::other(e.to_string()),
        })?;
        let name = RelPath::new(STATE_FILE).map_err(|e| StateError::Io {
            path: self.file(),
            source: io::Error::other(e.to_string()),
        })?;
        fsguard::atomic_write(&dir, &name, &text).map_err(|e| StateError::Io {
            path: self.file(),
            source: match e {
                // The system's error as it is: its kind says what to do (`io_remedy`).
                fsguard::WriteError::Io { source, .. } => source,
                other => io::Error::other(other.to_string()),
            },
        })?;
        drop(lock);
        Ok(out)
    }

    /// The identity of the state file now: changes whenever it is replaced.
    fn stamp(&self) -> Option<(u64, u64, i64, i64, u64)> {
        fs::symlink_metadata(self.file())
            .ok()
            .map(|m| (m.dev(), m.ino(), m.mtime(), m.mtime_nsec(), m.size()))
    }

    /// The plugin's private folder (`private/<id>`, mode 0700), created if missing.
    pub fn private_dir(&self, plugin: &PluginId) -> Result<PathBuf, StateError> {
        // A `PluginId` is always one plain directory name.
        let path = self.dir.join("private").join(plugin.as_str());
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&path)
            .map_err(|source| StateError::Dir {
                path: path.clone(),
                source,
            })?;
        Ok(path)
    }

    /// Where mounted workspaces' mirrors are made (`mirrors/`, mode 0700), created if missing.
    pub fn mirrors_dir(&self) -> Result<PathBuf, StateError> {
        let path = self.dir.join("mirrors");
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&path)
            .map_err(|source| StateError::Dir {
                path: path.clone(),
                source,
            })?;
        Ok(path)
    }
}

/// `O_NOFOLLOW`, so a symlink planted as `state.lock` is not followed.
fn libc_o_nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// Keeps a [`MemoryAuthority`] in step with the state file: a background task that polls the
/// file every [`WATCH_INTERVAL`] and, when it was replaced, loads it and updates the authority
/// (whose watch then re-checks every call in flight). Stops when dropped.
///
/// A state file that cannot be read while the host runs fails closed: the authority is emptied,
/// so every call is refused until the file is valid again.
#[derive(Debug)]
pub struct StateWatch {
    task: tokio::task::JoinHandle<()>,
}

impl StateWatch {
    /// Starts watching; `overlay` is applied after every load (e.g. to add a plugin record the
    /// host keeps only in memory). Must be called inside a tokio runtime.
    pub fn spawn(
        store: StateStore,
        authority: Arc<MemoryAuthority>,
        overlay: impl Fn(&mut Grants) + Send + 'static,
    ) -> StateWatch {
        // Stamp, then load: a change made after the stamp is seen by the first tick; one made
        // before it is in what we load now. Either way nothing between the host's first load and
        // the watch goes unseen.
        let mut seen = store.stamp();
        let grants = store.load().map(|s| s.grants).unwrap_or_default();
        authority.update(|g| {
            *g = grants;
            overlay(g);
        });
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(WATCH_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let now = store.stamp();
                if now == seen {
                    continue;
                }
                seen = now;
                let grants = store.load().map(|s| s.grants).unwrap_or_default();
                authority.update(|g| {
                    *g = grants;
                    overlay(g);
                });
            }
        });
        StateWatch { task }
    }
}

impl Drop for StateWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
