//! The host: grants (persisted, watched), account generations, sessions and turns with their
//! workspaces (PERM-*, TS-*, CMD-12, RUN-11).
//!
//! A [`Session`] is one plugin with one validated [`AgentConfig`]. A [`Turn`] owns one
//! [`ToolScope`] (callId dedup, 32-call budget) and the workspace handle for its duration:
//! `mounted` → a [`Mirror`] refreshed (or made) at turn start, persistent per plugin and folder;
//! `app-private` → the plugin's private folder under the state directory, also leased.
//! [`Turn::finish`] ends the scope and, for `mounted`, writes the mirror back after a successful
//! turn (conflicts reported, nothing overwritten) or keeps it for diagnosis after a failed one.
//!
//! Disk: a turn's own (temporary) mirror is a `proctree::CallDir`: named for its
//! owner so a later host sweeps it if this one dies, removed by the supervisor of the turn's
//! command (after its tree) if the host dies mid-call; [`Host::open`] sweeps what dead hosts
//! left; kept mirrors and concurrent copies of one workspace are bounded by the
//! [`StateStore`]'s limits.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use fsguard::{ConflictReason, Mirror, RootLease};
use serde::Serialize;
use serde_json::Value;
use toolscope::{
    AccountId, Accounts, Authority, Capability, ErrorCode, Generation, Grants, MemoryAuthority,
    PluginId, PluginRecord, Tool, ToolError, ToolScope,
};

use crate::config::{AgentConfig, ConfigError, ToolName, WorkspaceKind};
use crate::outcome::CallAnswer;
use crate::registry::{CallOptions, NotCopiedLookup, ProgramVerdict, Registry, ToolEnv};
use crate::state::{KeptWhy, StateError, StateStore, StateWatch};
use run_command_tool::background::{self, BackgroundConfig, BackgroundTasks};

/// Why a host, session or turn could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The state directory or file.
    #[error(transparent)]
    State(#[from] StateError),
    /// The agent configuration.
    #[error("agent configuration: {0}")]
    Config(#[from] ConfigError),
    /// The configuration's workspace is not one of the plugin's folder grants (PERM-5).
    #[error("{0}")]
    NotGranted(ConfigError),
    /// The plugin is not installed.
    #[error(
        "plugin {0} is not installed; install it with `agent-exec grant plugin {0} --manifest <FILE>`"
    )]
    UnknownPlugin(PluginId),
    /// The workspace folder is reached through a symbolic link that someone other than root
    /// could re-point.
    #[error(
        "the workspace folder {} is reached through the symbolic link {}, which a command or \
         another user could re-point at another folder; give the folder's real path",
        folder.display(),
        link.display()
    )]
    Unpinnable {
        /// The folder as configured.
        folder: PathBuf,
        /// The link.
        link: PathBuf,
    },
}

impl HostError {
    /// This error as a tool error with its stable code: a missing plugin or folder grant is
    /// `AGENT_PERMISSION_DENIED`, a folder through a re-pointable link
    /// `AGENT_EXEC_PATH_INVALID`, a bad configuration `AGENT_EXEC_ARGUMENTS_INVALID`, and the
    /// state's errors keep [`StateError::code`].
    pub fn to_tool_error(&self) -> ToolError {
        let code = match self {
            HostError::State(s) => return s.to_tool_error(),
            HostError::UnknownPlugin(_) | HostError::NotGranted(_) => ErrorCode::PermissionDenied,
            HostError::Unpinnable { .. } => ErrorCode::ExecPathInvalid,
            HostError::Config(_) => ErrorCode::ExecArgumentsInvalid,
        };
        ToolError::new(code, self.to_string())
    }
}

/// In-memory plugin records layered over the persisted ones (e.g. the CLI's local user).
type Overlay = Arc<Mutex<BTreeMap<PluginId, PluginRecord>>>;

fn apply_overlay(overlay: &Overlay, grants: &mut Grants) {
    let extra = overlay.lock().unwrap_or_else(PoisonError::into_inner);
    for (id, record) in extra.iter() {
        grants.plugins.insert(id.clone(), record.clone());
    }
}

#[derive(Debug)]
struct HostInner {
    store: StateStore,
    authority: Arc<MemoryAuthority>,
    accounts: Accounts,
    registry: Registry,
    overlay: Overlay,
    watch: Mutex<Option<StateWatch>>,
    /// Write-backs this host found cut short and finished or undid (RUN-16), until a turn on
    /// their folder reports them.
    recovered: Mutex<Vec<fsguard::Recovered>>,
}

/// What a host embeds: the state, the authority every call is checked against, the account
/// generations and the tool registry. Cheap to clone.
///
/// ```
/// use host_shim::{AgentConfig, Host, StateStore};
/// use toolscope::{Capability, FolderGrant, PluginRecord};
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let tmp = tempfile::tempdir().unwrap();
/// let folder = tmp.path().join("notes");
/// std::fs::create_dir(&folder).unwrap();
/// std::fs::write(folder.join("a.txt"), "one\ntwo\n").unwrap();
///
/// let host = Host::open(StateStore::open(tmp.path().join("state")).unwrap(), "alice".into()).unwrap();
/// host.update_grants(|g| {
///     let mut record = PluginRecord::fully_granted("notes@1", &[]);
///     record.folder_grants.insert(FolderGrant { path: folder.clone() });
///     g.plugins.insert("notes".parse().unwrap(), record);
///     Ok(())
/// }).unwrap();
///
/// let config = AgentConfig::parse(&format!(r#"{{"schemaVersion": 2, "systemPrompt": "",
///     "tools": [{{"ref": "read"}}], "memory": "session",
///     "workspace": {{"kind": "direct", "path": {:?}}}}}"#, folder)).unwrap();
/// let session = host.session("notes".parse().unwrap(), config).unwrap();
/// let turn = session.begin_turn().unwrap();
/// let out = turn.call("c1", "read", serde_json::json!({"path": "a.txt"}), &Default::default()).await.unwrap();
/// assert_eq!(out["totalLines"], 2);
/// turn.finish(host_shim::TurnEnd::Succeeded, Default::default());
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct Host {
    inner: Arc<HostInner>,
}

impl Host {
    /// Opens the host on `store`, signed in as `account`, with the default [`Registry`].
    pub fn open(store: StateStore, account: AccountId) -> Result<Host, HostError> {
        Host::with_registry(store, account, Registry::default())
    }

    /// Like [`open`](Host::open) with a registry of the host's choosing.
    pub fn with_registry(
        store: StateStore,
        account: AccountId,
        registry: Registry,
    ) -> Result<Host, HostError> {
        let state = store.load()?;
        // What hosts that died left behind (their temp dirs and per-call mirrors;
        // never a live owner's) goes before this one adds its own.
        crate::state::sweep_orphans(&store);
        store.sweep_temp_files();
        // Background logs of sessions whose host died (SIGKILL, a crash) go at this start, not
        // only when another session starts background work.
        sweep_dead_sessions(&store.dir().join("sessions"), "");
        // RUN-16: a write-back a dead host left half done is finished (or, before its commit,
        // undone) at the next start.
        let recovered = fsguard::recover_write_backs(&store.writeback_dir());
        // A `write`, `edit` or write-back killed between its temporary file and the rename
        // left that file in the folder; the dead process's record names the directory.
        let temps = store.temp_records_dir();
        fsguard::sweep_temp_files(&temps);
        fsguard::record_temp_files_in(&temps);
        Ok(Host {
            inner: Arc::new(HostInner {
                store,
                authority: Arc::new(MemoryAuthority::new(state.grants)),
                accounts: Accounts::new(account),
                registry,
                overlay: Arc::default(),
                watch: Mutex::new(None),
                recovered: Mutex::new(recovered),
            }),
        })
    }

    /// The reports of write-backs this host finished or undid (RUN-16) that no turn on their
    /// folder has reported yet, as sentences; they are reported once, here or by such a turn.
    pub fn take_recovered(&self) -> Vec<String> {
        std::mem::take(
            &mut *self
                .inner
                .recovered
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
        .iter()
        .map(ToString::to_string)
        .collect()
    }

    /// Recovers every write-back whose host is gone (RUN-16) and hands over the reports of
    /// those to `folder`, this host's earlier ones included, as the sentences a turn reports.
    fn recovered_for(&self, folder: &Path) -> Vec<String> {
        let found = fsguard::recover_write_backs(&self.inner.store.writeback_dir());
        let mut all = self
            .inner
            .recovered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        all.extend(found);
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut *all)
            .into_iter()
            .partition(|r| r.folder == folder);
        *all = rest;
        mine.iter().map(ToString::to_string).collect()
    }

    /// Starts following the state file, so grants changed by another process (e.g.
    /// `agent-exec revoke`) reach this host's running calls (TS-3). Needs a tokio runtime.
    /// Idempotent.
    pub fn watch_state(&self) {
        let mut watch = self
            .inner
            .watch
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if watch.is_none() {
            let overlay = Arc::clone(&self.inner.overlay);
            *watch = Some(StateWatch::spawn(
                self.inner.store.clone(),
                Arc::clone(&self.inner.authority),
                move |g| apply_overlay(&overlay, g),
            ));
        }
    }

    /// Adds a plugin record held only in memory (never written to the state file), e.g. the
    /// CLI's local user, whose folder pick is the `--workspace` the user typed.
    pub fn insert_memory_record(&self, plugin: PluginId, record: PluginRecord) {
        self.inner
            .overlay
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(plugin, record);
        let overlay = Arc::clone(&self.inner.overlay);
        self.inner.authority.update(|g| apply_overlay(&overlay, g));
    }

    /// Changes the persisted grants (atomically, under the state lock) and then the authority,
    /// whose watch re-checks every running call: a revocation made here cancels them (TS-3).
    pub fn update_grants<R>(
        &self,
        change: impl FnOnce(&mut Grants) -> Result<R, StateError>,
    ) -> Result<R, HostError> {
        let (out, grants) = self.inner.store.update(|s| {
            let out = change(&mut s.grants)?;
            Ok((out, s.grants.clone()))
        })?;
        let overlay = Arc::clone(&self.inner.overlay);
        self.inner.authority.update(|g| {
            *g = grants;
            apply_overlay(&overlay, g);
        });
        Ok(out)
    }

    /// The authority every call is checked against.
    pub fn authority(&self) -> &Arc<MemoryAuthority> {
        &self.inner.authority
    }

    /// The state store.
    pub fn store(&self) -> &StateStore {
        &self.inner.store
    }

    /// The tool registry.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// The current account generation.
    pub fn generation(&self) -> Generation {
        self.inner.accounts.current()
    }

    /// Switches the signed-in account (CMD-12): the old generation's turns are refused, its
    /// calls and pending approvals cancelled, and `account` is published only once every
    /// blocking execution of the old one has truly ended.
    pub async fn switch_account(&self, account: AccountId) -> Generation {
        self.inner.accounts.switch(account).await
    }

    /// Opens a session of `plugin` with `config`: the plugin must be installed and a
    /// `mounted`/`direct` workspace path must be one of its folder grants (PERM-5).
    pub fn session(&self, plugin: PluginId, config: AgentConfig) -> Result<Session, HostError> {
        let grants = self.inner.authority.snapshot();
        let record = grants
            .plugins
            .get(&plugin)
            .ok_or_else(|| HostError::UnknownPlugin(plugin.clone()))?;
        config
            .check_grants(&plugin, record)
            .map_err(HostError::NotGranted)?;
        let folder = match config.workspace.kind {
            WorkspaceKind::AppPrivate => self.inner.store.private_dir(&plugin)?,
            _ => config.workspace.path.clone().unwrap_or_default(),
        };
        // The folder is pinned for the whole session: a path through a link someone
        // could re-point is refused, and every turn checks that the path still names the
        // directory it named now (a long-running MCP server looks it up once per turn).
        if let Some(link) = crate::state::replaceable_link(&folder) {
            return Err(HostError::Unpinnable { folder, link });
        }
        // A folder missing now is pinned by the first turn that finds it.
        let pinned = Arc::new(OnceLock::new());
        if let Ok(lease) = RootLease::acquire(&folder) {
            let _ = pinned.set(lease.id());
        }
        Ok(Session {
            host: self.clone(),
            plugin,
            config,
            folder,
            pinned,
            run_command: Arc::default(),
            background: Arc::default(),
            id: Arc::from(session_id().as_str()),
            warm: Arc::default(),
        })
    }
}

/// A session's background tasks and the lock that marks its directory as in use.
#[derive(Debug)]
struct SessionBackground {
    tasks: BackgroundTasks,
    _lock: std::fs::File,
    /// The session directory as a call directory: removed when the session goes, and by
    /// agent-exec's signal handler when the host is stopped by SIGTERM, SIGINT or SIGHUP
    /// (after SIGKILL the next session's sweep takes it).
    _dir: Option<CallDir>,
}

/// The lock file in each session directory.
const SESSION_LOCK: &str = ".lock";

/// Makes `dir` (0700) and takes its lock (exclusive, for the session's life).
fn session_lock(dir: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    try_lock(&dir.join(SESSION_LOCK))?
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::WouldBlock))
}

/// Removes the session directories (background logs) that no live session holds: their lock
/// can be taken, so the host that made them is gone (SIGKILL, a crash) — in any PID namespace.
/// A directory without its lock file is left alone (a session being made right now).
fn sweep_dead_sessions(sessions: &Path, own: &str) {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(entries) = std::fs::read_dir(sessions) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_str() == Some(own) {
            continue;
        }
        let Ok(lock) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(entry.path().join(SESSION_LOCK))
        else {
            continue;
        };
        if rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok() {
            // `remove_dir_all` does not follow symbolic links inside.
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A session id unique on this machine for the life of the state directory: the process,
/// the time and a counter (the name of the session's background log directory).
fn session_id() -> String {
    fsguard::unique_id()
}

fn folder_lease_error(e: fsguard::LeaseError) -> ToolError {
    ToolError::new(
        ErrorCode::ExecPathInvalid,
        format!("the workspace folder cannot be used: {e}; pick an existing folder"),
    )
}

/// One plugin working with one configuration.
#[derive(Clone, Debug)]
pub struct Session {
    host: Host,
    plugin: PluginId,
    config: AgentConfig,
    folder: PathBuf,
    /// The folder's identity when the session began (or when a turn first found it); every
    /// turn's lease, and the source of every mirror, must match it.
    pinned: Arc<OnceLock<fsguard::FileId>>,
    /// `run_command`'s per-session state (the RC-9 lock, the secrets seen so far), shared by
    /// every turn and clone of this session.
    run_command: Arc<run_command_tool::RunCommandState>,
    /// The session's background tasks, made when a front end takes their event stream (BG-7).
    background: Arc<OnceLock<SessionBackground>>,
    /// Unique on this machine: names the session's directory under the state directory.
    id: Arc<str>,
    /// The workspace's persistent mirror between turns, for a long-lived front end.
    warm: Arc<WarmMirror>,
}

/// The persistent mirror a long-lived session keeps between turns ([`Session::keep_mirror_warm`]),
/// with its change journals, so the next turn brings it up to date at the cost of what changed
/// ([`Mirror::refresh_journaled`]).
#[derive(Debug, Default)]
struct WarmMirror {
    keep: std::sync::atomic::AtomicBool,
    mirror: Mutex<Option<Mirror>>,
}

static MIRROR_COUNTER: AtomicU64 = AtomicU64::new(0);

fn io_failed(what: impl std::fmt::Display) -> ToolError {
    ToolError::new(ErrorCode::ExecIoFailed, what.to_string())
}

impl Session {
    /// For a front end that serves many turns in one process: the workspace's persistent
    /// mirror stays in memory between turns with change journals of the folder and the
    /// mirror, and each turn looks only at what changed since the last one; whenever the
    /// journals know they cannot vouch (fsguard's `Mirror::refresh_journaled`), the turn walks
    /// everything as a one-shot call does.
    ///
    /// **Not safe for folders others change in ways inotify does not hear, and not used by
    /// `agent-exec mcp`**. Missed: a write or `chmod` through a hard link
    /// to a folder file made outside the folder (no event in the folder's directories; the
    /// turn serves the old content and applies output derived from it, where the walk would
    /// refuse the linked file); edits by another machine or below a FUSE, NFS or SMB mount;
    /// mounts made or removed inside the folder (an unmounted tree's files are still served);
    /// and watches of directories moved out of the folder are never removed. Until the
    /// journal covers these (file watches or a `statfs` allow-list, a `mountinfo` poll,
    /// watches dropped with their trees), only a host that knows its folder is a local
    /// directory changed through its own names should call this.
    pub fn keep_mirror_warm(&self) {
        self.warm.keep.store(true, Ordering::Relaxed);
    }

    /// The session's background events (BG-*): the delivery target without which
    /// `background_command` is refused (BG-7). Makes the session's tasks, with their logs in
    /// `<state>/sessions/<session>/background`; `config` may change the limit, count the host's
    /// other background work (BG-8) or set a decision model (BG-5). Dropping the stream stops
    /// the tasks.
    ///
    /// # Errors
    /// `AGENT_EXEC_ARGUMENTS_INVALID` when the stream was taken before (one delivery target
    /// per session).
    pub fn background_events(
        &self,
        config: impl FnOnce(&mut BackgroundConfig),
    ) -> Result<background::EventStream, ToolError> {
        let taken = || {
            ToolError::new(
                ErrorCode::ExecArgumentsInvalid,
                "this session's background events were taken already: one front end delivers \
                 them; keep that stream",
            )
        };
        if self.background.get().is_some() {
            return Err(taken());
        }
        let sessions = self.host.inner.store.dir().join("sessions");
        let session_dir = sessions.join(&*self.id);
        // The session's lock, held for its life: what tells a live session from a dead one's
        // leftovers (a PID would not: another PID namespace, or a PID used again).
        let lock = session_lock(&session_dir).map_err(|e| {
            io_failed(format!(
                "cannot make the session directory {}: {e}",
                session_dir.display()
            ))
        })?;
        sweep_dead_sessions(&sessions, &self.id);
        let mut c = BackgroundConfig::new(session_dir.join("background"));
        config(&mut c);
        let (tasks, events) = BackgroundTasks::new(c);
        let dir = adopt_call_dir(&session_dir);
        self.background
            .set(SessionBackground {
                tasks,
                _lock: lock,
                _dir: dir,
            })
            .map_err(|_| taken())?;
        Ok(events)
    }

    /// The session's background tasks (list, status, cancel, `origin_ended`, `stop_origin`),
    /// once [`Session::background_events`] made them.
    pub fn background(&self) -> Option<&BackgroundTasks> {
        self.background.get().map(|b| &b.tasks)
    }

    /// Session end (CMD-12 semantics): stops every background task and waits until nothing
    /// they started is alive; their log directory is removed.
    pub async fn end_background(&self) {
        if let Some(b) = self.background.get() {
            b.tasks.shutdown(toolscope::CancelReason::Requested).await;
            let dir = self.host.inner.store.dir().join("sessions").join(&*self.id);
            let _ = std::fs::remove_dir(dir.join("background"));
            let _ = std::fs::remove_file(dir.join(SESSION_LOCK));
            let _ = std::fs::remove_dir(dir);
        }
    }

    /// The plugin.
    pub fn plugin(&self) -> &PluginId {
        &self.plugin
    }

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The folder the workspace works on (the granted folder, or the private folder).
    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// The host this session belongs to.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// No tool may reach the host's own state (grants, mirrors, locks). A folder
    /// that is the state directory or lies inside it is refused; a `mounted` folder that
    /// contains it is refused too (its mirror would copy the state and write-back change it);
    /// a `direct` folder that contains it is served with the state directory hidden: the
    /// sandbox covers it for `command`, the file tools refuse it ([`Session::hidden`]).
    ///
    /// Compared by the kernel's names of the opened directories (not the configured text: on
    /// a case-insensitive filesystem `.LOCAL/state` is the same directory).
    fn check_state_dir(&self, folder: &Path, lease: &RootLease) -> Result<(), ToolError> {
        let given = self.host.inner.store.dir();
        let state = RootLease::acquire(given)
            .ok()
            .and_then(|l| fsguard::kernel_path(std::os::fd::AsFd::as_fd(&l)))
            .unwrap_or_else(|| given.to_path_buf());
        let state = state.as_path();
        let folder = fsguard::kernel_path(std::os::fd::AsFd::as_fd(lease))
            .or_else(|| std::fs::canonicalize(folder).ok())
            .unwrap_or_else(|| folder.to_path_buf());
        let refuse = |why: String| Err(ToolError::new(ErrorCode::ExecPathInvalid, why));
        if folder.starts_with(state) {
            return refuse(format!(
                "the workspace folder {} is agent-exec's own state directory {} or inside it \
                 (grants, mirrors, locks), which no tool may read or change; pick another folder",
                folder.display(),
                state.display()
            ));
        }
        if state.starts_with(&folder) && self.config.workspace.kind == WorkspaceKind::Mounted {
            return refuse(format!(
                "the workspace folder {} contains agent-exec's state directory {}: its mirror \
                 would copy the host's grants and mirrors, and writing back would change them; \
                 pick a folder that does not contain it, or move the state directory \
                 (--state-dir, AGENT_EXEC_STATE_DIR)",
                folder.display(),
                state.display()
            ));
        }
        Ok(())
    }

    fn folder_gate(&self) -> Option<&Path> {
        match self.config.workspace.kind {
            WorkspaceKind::AppPrivate => None,
            _ => Some(&self.folder),
        }
    }

    /// One call as a whole turn — what `agent-exec call` and each MCP `tools/call` are: a
    /// fresh turn ([`Session::begin_turn`]), the call, and the turn's end with the write-back
    /// for a successful `mounted` one (RUN-11), folded into one [`CallAnswer`].
    ///
    /// When `cancelled` completes first the call is dropped, which stops the tool's process
    /// tree (RUN-10, CMD-6), and the turn ends as failed with `AGENT_EXEC_CANCELLED`
    /// (`std::future::pending()` for a call nobody cancels). A call refused or stopped for a
    /// permission while the state file cannot be read reports the state file instead: the
    /// state watch empties the grants when the file turns invalid (fail closed), which the gate
    /// reports as a missing plugin or a revoked permission.
    pub async fn one_call(
        &self,
        call_id: &str,
        tool: ToolName,
        args: Value,
        options: &CallOptions,
        keep: KeepMirror,
        cancelled: impl std::future::Future<Output = ()>,
    ) -> CallAnswer {
        // The descriptors the call needs are there, or it is refused before anything starts;
        // a step that still meets EMFILE says so, not what it was doing.
        let begun = crate::descriptors::admit().and_then(|admission| {
            self.begin_turn()
                .map(|turn| (admission, turn))
                .map_err(crate::descriptors::remap)
        });
        let (_admission, turn) = match begun {
            Ok(t) => t,
            Err(e) => {
                let report = TurnReport {
                    workspace: self.config.workspace.kind,
                    mirror: None,
                    recovered: Vec::new(),
                };
                return CallAnswer::new(Err(self.unless_state_invalid(e)), report);
            }
        };
        let verdict = ProgramVerdict::default();
        let result = tokio::select! {
            r = turn.call_with(call_id, tool.as_str(), args, options, &verdict) => r,
            () = cancelled => Err(ToolError::new(
                ErrorCode::ExecCancelled,
                "the caller cancelled this call; send it again if it is still wanted",
            )),
        };
        let result = result.map_err(crate::descriptors::remap);
        let report = turn.finish(TurnEnd::of(&result), keep);
        CallAnswer::new(result.map_err(|e| self.unless_state_invalid(e)), report)
            .with_program_success(verdict.succeeded())
    }

    /// `err`, or — when it is a permission refusal and the state file cannot be read — the
    /// state file's error, which is the cause ([`Session::one_call`]).
    fn unless_state_invalid(&self, err: ToolError) -> ToolError {
        if err.code() != ErrorCode::PermissionDenied {
            return err;
        }
        match self.host.inner.store.load() {
            Ok(_) => err,
            Err(e) => ToolError::new(
                e.code(),
                format!("{e}; no call can run until it is (this one was refused or stopped)"),
            ),
        }
    }

    /// Starts a turn: a new [`ToolScope`] under the current account generation (refused with
    /// `AGENT_ACCOUNT_RETIRED` for a retired one, CMD-12) and the workspace. A `mounted`
    /// workspace is copied only after the folder grant is confirmed — here, or, when the
    /// workspace already has its [`StateStore::concurrent_copies`] temporary copies besides
    /// the persistent mirror, at the turn's first call, once a copy slot is free
    /// (this never blocks: the wait is in the async call).
    pub fn begin_turn(&self) -> Result<Turn, ToolError> {
        let host = &self.host.inner;
        let authority: Arc<dyn Authority> = host.authority.clone();
        let scope = host
            .accounts
            .current()
            .begin_turn(Arc::clone(&authority), self.plugin.clone())?;
        let folder_lease = self.checked_folder(&authority)?;
        // RUN-16: the folder's unfinished write-backs are finished before anything reads it.
        let recovered = self.host.recovered_for(&self.folder);
        let mut queued_at = PathBuf::new();
        let ws = match self.config.workspace.kind {
            WorkspaceKind::Mounted => {
                let dir = host.store.mirrors_dir().map_err(io_failed)?;
                // At most so many full copies of one workspace at once; without
                // a free one, the turn makes its copy at its first call, when one is free.
                let ws = match self.copy_right(&dir) {
                    Some(right) => Some(self.mount(&dir, right)?),
                    None => None,
                };
                queued_at = dir;
                ws
            }
            // `direct`: the lease just checked against the pin; `app-private`: the host's own.
            _ => Some(Workspace::folder(match folder_lease {
                Some(root) => root,
                None => RootLease::acquire(&self.folder).map_err(folder_lease_error)?,
            })),
        };
        static TURNS: AtomicU64 = AtomicU64::new(1);
        Ok(Turn {
            session: self.clone(),
            scope,
            ws: tokio::sync::OnceCell::new_with(ws),
            queued_at,
            id: TURNS.fetch_add(1, Ordering::Relaxed),
            recovered,
        })
    }

    /// The granted folder, looked up now and checked against the session's pin and the state
    /// directory (`None` for `app-private`).
    fn checked_folder(
        &self,
        authority: &Arc<dyn Authority>,
    ) -> Result<Option<RootLease>, ToolError> {
        let Some(folder) = self.folder_gate() else {
            return Ok(None);
        };
        authority.check(&self.plugin, &Tool::new("turn").requires_folder(folder))?;
        let lease = self.pinned_folder()?;
        self.check_state_dir(folder, &lease)?;
        Ok(Some(lease))
    }

    /// The right to hold a full copy of the workspace now, without waiting: its persistent
    /// mirror, else one of [`StateStore::concurrent_copies`] temporary slots (an exclusive
    /// `flock` on `<name>.copy-<i>.lock`, so the bound holds across processes too). `None`
    /// when all are taken. Lock files that cannot be used do not stop the turn: it copies
    /// without a slot, as before the bound.
    fn copy_right(&self, dir: &Path) -> Option<CopyRight> {
        if let Some(persistent) = PersistentMirror::lock(dir, self) {
            return Some(CopyRight::Persistent(persistent));
        }
        let name = workspace_mirror_name(self);
        for i in 0..self.host.inner.store.concurrent_copies() {
            match try_lock(&dir.join(format!("{name}.copy-{i}.lock"))) {
                Ok(Some(file)) => return Some(CopyRight::Temporary(Some(file))),
                Ok(None) => {}
                Err(_) => return Some(CopyRight::Temporary(None)),
            }
        }
        None
    }

    /// The workspace's copy for a turn, under `right`.
    fn mount(&self, dir: &Path, right: CopyRight) -> Result<Workspace, ToolError> {
        let (mirror, persistent, call_dir, slot) = match right {
            CopyRight::Persistent(p) => {
                let store = &self.host.inner.store;
                (
                    p.take(store, &self.folder, &self.warm)?,
                    Some(p),
                    None,
                    None,
                )
            }
            CopyRight::Temporary(slot) => {
                let (mirror, call_dir) = self.temporary_mirror(dir)?;
                (mirror, None, call_dir, slot)
            }
        };
        // The mirror looked the folder up once more: it must have copied the pinned
        // directory, or its run would read, and its write-back change, another one.
        if self
            .pinned
            .get()
            .is_some_and(|&pinned| mirror.source_id() != pinned)
        {
            // A copy of the wrong folder is useless: gone (the next turn copies afresh).
            let _ = fsguard::remove_tree(mirror.mirror_path());
            return Err(ToolError::new(
                ErrorCode::ExecPathInvalid,
                format!(
                    "the workspace folder {} was replaced while it was mirrored; \
                     nothing ran. Start a new session on the folder you mean",
                    self.folder.display()
                ),
            ));
        }
        let root = RootLease::acquire(mirror.mirror_path()).map_err(folder_lease_error)?;
        Ok(Workspace {
            root: Arc::new(root),
            mirror: Mutex::new(Some(mirror)),
            persistent,
            call_dir: call_dir.map(Arc::new),
            _slot: slot,
        })
    }

    /// Waits (without blocking the runtime) until a copy of the workspace may be made, then
    /// makes it. Time has passed since the turn began, so the grant and the folder are checked
    /// again first.
    async fn mount_when_free(&self, dir: &Path) -> Result<Workspace, ToolError> {
        loop {
            if let Some(right) = self.copy_right(dir) {
                let authority: Arc<dyn Authority> = self.host.inner.authority.clone();
                self.checked_folder(&authority)?;
                return self.mount(dir, right);
            }
            tokio::time::sleep(COPY_POLL).await;
        }
    }

    /// The folder, looked up now: it must still be the directory the session pinned
    /// (CMD-8), so a path that now leads elsewhere (an ancestor swapped for a link) is never
    /// followed. A folder that was missing when the session began is checked for re-pointable
    /// links again and pinned by this lookup.
    fn pinned_folder(&self) -> Result<RootLease, ToolError> {
        let unpinned = self.pinned.get().is_none();
        if let Some(link) = unpinned
            .then(|| crate::state::replaceable_link(&self.folder))
            .flatten()
        {
            return Err(ToolError::new(
                ErrorCode::ExecPathInvalid,
                HostError::Unpinnable {
                    folder: self.folder.clone(),
                    link,
                }
                .to_string(),
            ));
        }
        let now = RootLease::acquire(&self.folder).map_err(folder_lease_error)?;
        let pinned = *self.pinned.get_or_init(|| now.id());
        if now.id() != pinned {
            return Err(ToolError::new(
                ErrorCode::ExecPathInvalid,
                format!(
                    "the workspace folder {} is no longer the directory this session began with \
                     (it was moved or replaced, device:inode {} then, {} now); start a new \
                     session on the folder you mean",
                    self.folder.display(),
                    pinned,
                    now.id()
                ),
            ));
        }
        Ok(now)
    }

    /// A mirror of its own for this turn (another turn holds the workspace's persistent one):
    /// a unique directory, created from scratch, removed or kept by [`Turn::finish`].
    ///
    /// Its name records this process (PID and start time, `<plugin>-call-<pid>-<start>-<n>`)
    /// so a later host sweeps it if this one dies while copying; once made, it is a
    /// [`CallDir`] that the supervisor of the turn's command removes if the host dies while
    /// that command runs.
    fn temporary_mirror(&self, dir: &Path) -> Result<(Mirror, Option<CallDir>), ToolError> {
        let dest = dir.join(temporary_mirror_name(&self.plugin));
        // A caught signal waits until the copy is a CallDir it can remove.
        let _whole = defer_signal_exit();
        let mirror = with_room(&self.host.inner.store, &self.folder, || {
            Mirror::create(&self.folder, &dest).inspect_err(|_| {
                // A half-made mirror is ours and useless; remove it.
                let _ = fsguard::remove_tree(&dest);
            })
        })?;
        Ok((mirror, adopt_call_dir(&dest)))
    }
}

/// Makes a mirror of `folder` with `make` (which removes its half-made copy on failure). When
/// the state directory's disk is full, the folder's kept mirrors go, oldest first, until the
/// copy fits; when none is left, the error names every kept mirror, its size and
/// `agent-exec status`, so the user can see what takes the room.
fn with_room(
    store: &StateStore,
    folder: &Path,
    mut make: impl FnMut() -> Result<Mirror, fsguard::MirrorError>,
) -> Result<Mirror, ToolError> {
    loop {
        match make() {
            Ok(mirror) => return Ok(mirror),
            Err(e) if out_of_space(&e) => {
                if store.drop_oldest_kept_of(folder).is_none() {
                    return Err(no_room(store, &e));
                }
            }
            Err(e) => return Err(run_tool::mirror_error(e)),
        }
    }
}

fn out_of_space(e: &fsguard::MirrorError) -> bool {
    const ENOSPC: i32 = 28;
    matches!(e, fsguard::MirrorError::Io { source, .. }
        if source.raw_os_error() == Some(ENOSPC) || source.kind() == std::io::ErrorKind::StorageFull)
}

/// The error of a mirror that does not fit even without this folder's kept mirrors.
fn no_room(store: &StateStore, e: &fsguard::MirrorError) -> ToolError {
    let kept = store.kept_mirrors();
    let listed = if kept.is_empty() {
        "it holds no kept mirrors".to_owned()
    } else {
        let each: Vec<String> = kept
            .iter()
            .map(|k| format!("{} ({} bytes)", k.path.display(), k.bytes))
            .collect();
        format!(
            "its kept mirrors take {} bytes: {}",
            kept.iter().map(|k| k.bytes).sum::<u64>(),
            each.join(", ")
        )
    };
    let free = crate::state::free_bytes(store.dir())
        .map_or_else(|| "unknown".to_owned(), |b| b.to_string());
    ToolError::new(
        ErrorCode::ExecIoFailed,
        format!(
            "could not mirror the workspace: {e}. The state directory {} has {free} bytes free \
             and {listed}. Remove the kept mirrors you no longer need (`agent-exec status` lists \
             them) or free space on its disk; nothing ran",
            store.dir().display()
        ),
    )
}

/// `<prefix>-<ms since epoch>-<pid>-<n>`: unique among this state directory's mirrors.
fn unique_name(prefix: &str) -> String {
    let n = MIRROR_COUNTER.fetch_add(1, Ordering::Relaxed);
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{prefix}-{stamp}-{}-{n}", std::process::id())
}

/// The name of a turn's own mirror, recording its owner (see [`Session::temporary_mirror`]).
fn temporary_mirror_name(plugin: &PluginId) -> String {
    #[cfg(target_os = "linux")]
    return proctree::owned_name(&format!("{plugin}{}", crate::state::CALL_MIRROR_MARK));
    #[cfg(not(target_os = "linux"))]
    unique_name(plugin.as_ref())
}

#[cfg(target_os = "linux")]
use proctree::CallDir;
/// Elsewhere a per-call directory is only removed by its turn.
#[cfg(not(target_os = "linux"))]
#[derive(Debug)]
struct CallDir;

fn adopt_call_dir(path: &Path) -> Option<CallDir> {
    #[cfg(target_os = "linux")]
    return CallDir::adopt(path).ok();
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        None
    }
}

/// See `proctree::defer_signal_exit`; elsewhere signals are not caught, so nothing waits.
fn defer_signal_exit() -> impl Drop {
    #[cfg(target_os = "linux")]
    return proctree::defer_signal_exit();
    #[cfg(not(target_os = "linux"))]
    {
        struct Nothing;
        impl Drop for Nothing {
            fn drop(&mut self) {}
        }
        Nothing
    }
}

fn keep_call_dir(dir: &CallDir) {
    #[cfg(target_os = "linux")]
    dir.keep();
    #[cfg(not(target_os = "linux"))]
    let _ = dir;
}

async fn remove_if_host_dies<F: std::future::Future>(dir: &Arc<CallDir>, fut: F) -> F::Output {
    #[cfg(target_os = "linux")]
    return proctree::remove_if_host_dies(Arc::clone(dir), fut).await;
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dir;
        fut.await
    }
}

/// `<plugin>-ws-<digest of the folder's path>`: the persistent mirror's name, and the stem of
/// the workspace's lock files.
fn workspace_mirror_name(session: &Session) -> String {
    let digest = blake3::hash(session.folder.as_os_str().as_encoded_bytes());
    let hex: String = digest.as_bytes()[..12]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{}-ws-{hex}", session.plugin)
}

/// An exclusive `flock` on the lock file `path` (made if missing, mode 0600, never through a
/// link), without waiting: `Ok(None)` when another holder has it.
fn try_lock(path: &Path) -> std::io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)?;
    let lock = rustix::fs::FlockOperation::NonBlockingLockExclusive;
    Ok(rustix::fs::flock(&file, lock).is_ok().then_some(file))
}

/// How often a turn waiting for a copy slot looks again.
const COPY_POLL: std::time::Duration = std::time::Duration::from_millis(25);

/// The right to hold one full copy of a workspace.
enum CopyRight {
    /// Its persistent mirror (locked).
    Persistent(PersistentMirror),
    /// A temporary mirror, holding one of the bounded slots (`None`: lock files unusable).
    Temporary(Option<std::fs::File>),
}

/// A turn's workspace once it has one: the root its tools work in and, for `mounted`, the
/// mirror and what it holds.
#[derive(Debug)]
struct Workspace {
    root: Arc<RootLease>,
    mirror: Mutex<Option<Mirror>>,
    /// The workspace's persistent mirror this turn holds, if it got the lock.
    persistent: Option<PersistentMirror>,
    /// For a temporary mirror: the same directory as a [`CallDir`], handed to the supervisor
    /// of every command of the turn (removed after its tree if the host dies), and removed
    /// when the turn is dropped without being finished.
    call_dir: Option<Arc<CallDir>>,
    /// For a temporary mirror: its copy slot, free again when the turn ends.
    _slot: Option<std::fs::File>,
}

impl Workspace {
    /// A workspace that is the folder itself (`direct`, `app-private`).
    fn folder(root: RootLease) -> Workspace {
        Workspace {
            root: Arc::new(root),
            mirror: Mutex::new(None),
            persistent: None,
            call_dir: None,
            _slot: None,
        }
    }
}

/// The persistent mirror of one (plugin, workspace folder) under the state directory's
/// `mirrors/`, held for one turn by an exclusive `flock` on `<name>.lock` (RUN-11).
///
/// Copying the whole folder at every turn costs time in proportion to its size; the
/// persistent mirror is instead refreshed ([`Mirror::refresh`]): only files whose folder or
/// mirror side changed since they were copied are copied again, and everything the folder
/// lacks is removed, so each turn still starts from an exact copy. fsguard keeps the per-file
/// record beside the mirror (`<name>.mirror-record`), outside what the turn's tools can reach.
/// A mirror kept for diagnosis (failed turn, conflicts, `--keep-mirror`) is renamed aside to
/// a unique name, so the path reported stays as the turn left it and the next turn starts
/// from a fresh copy. A second turn on the same workspace while one holds the lock gets a
/// temporary mirror of its own — at most [`StateStore::concurrent_copies`] of them at once
/// — and a turn that finds every slot taken makes its copy when one is free.
#[derive(Debug)]
struct PersistentMirror {
    /// The locked `<name>.lock`; the lock goes when this is dropped (or the process exits).
    _lock: std::fs::File,
    dir: PathBuf,
    name: String,
}

impl PersistentMirror {
    /// Takes the workspace's lock without waiting; `None` when another turn holds it or the
    /// lock file cannot be used (then a temporary mirror does the job).
    fn lock(dir: &Path, session: &Session) -> Option<PersistentMirror> {
        let name = workspace_mirror_name(session);
        let file = try_lock(&dir.join(format!("{name}.lock"))).ok()??;
        Some(PersistentMirror {
            _lock: file,
            dir: dir.to_path_buf(),
            name,
        })
    }

    fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }

    /// The mirror for this turn: the persistent one refreshed, or — when that fails — removed
    /// and created anew. Its record is saved for the next turn.
    fn take(
        &self,
        store: &StateStore,
        folder: &Path,
        warm: &WarmMirror,
    ) -> Result<Mirror, ToolError> {
        let dest = self.path();
        let journaling = if warm.keep.load(Ordering::Relaxed) {
            fsguard::Journaling::Both
        } else {
            fsguard::Journaling::Mirror
        };
        let options = fsguard::MirrorOptions::new().journaling(journaling);
        let kept = warm
            .mirror
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .filter(|m| m.mirror_path() == dest && m.source_path() == folder);
        let refreshed = match kept {
            Some(kept) => kept.refresh_journaled(),
            None => Mirror::refresh_with(folder, &dest, &options),
        };
        let mirror = match refreshed {
            Ok(m) => m,
            Err(_) => {
                let _ = fsguard::remove_mirror(&dest);
                with_room(store, folder, || {
                    Mirror::create_with(folder, &dest, &options).inspect_err(|_| {
                        let _ = fsguard::remove_mirror(&dest);
                    })
                })?
            }
        };
        // Without a record the next turn copies everything: slower, never wrong.
        let _ = mirror.save_record();
        Ok(mirror)
    }

    /// Moves the mirror aside to a unique name (kept for the user) and forgets its record, so
    /// the next turn starts from a fresh copy. Returns the new path.
    fn set_aside(&self) -> Result<PathBuf, String> {
        let from = self.path();
        let to = self.dir.join(unique_name(&format!("{}-kept", self.name)));
        fsguard::set_mirror_aside(&from, &to)
            .map(|()| to)
            .map_err(|e| format!("could not move the kept mirror aside: {e}"))
    }
}

/// One agent turn: its [`ToolScope`] and its workspace.
#[derive(Debug)]
pub struct Turn {
    session: Session,
    scope: ToolScope,
    /// Set at the start, or — for a `mounted` turn that found every copy slot taken — at its
    /// first call.
    ws: tokio::sync::OnceCell<Workspace>,
    /// For `mounted`: the mirrors directory (where a queued turn's copy will be made).
    queued_at: PathBuf,
    /// Unique in this process: the origin of the background tasks the turn starts (BG-9).
    id: u64,
    /// What the recovery of the folder's cut-short write-backs did at the turn's start (RUN-16).
    recovered: Vec<String>,
}

/// How a turn ended, for [`Turn::finish`]: only a turn that succeeded is written back (RUN-11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TurnEnd {
    /// The agent's work is to reach the folder.
    Succeeded,
    /// It is not: a `mounted` mirror is kept for diagnosis instead of written back.
    Failed,
}

impl TurnEnd {
    /// `Succeeded` for an `Ok` call result, `Failed` for an error: a one-call turn's end.
    pub fn of<T, E>(result: &Result<T, E>) -> TurnEnd {
        if result.is_ok() {
            TurnEnd::Succeeded
        } else {
            TurnEnd::Failed
        }
    }
}

/// Whether [`Turn::finish`] leaves a `mounted` turn's mirror on disk when RUN-11 would remove it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeepMirror {
    /// Kept only when it holds something the folder does not: after a failed turn, a conflict
    /// or a write-back error.
    #[default]
    WhenNeeded,
    /// Kept (and reported) in every case, e.g. for the user to look at (`--keep-mirror`).
    Always,
}

/// What a finished turn did with its workspace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnReport {
    /// The workspace kind.
    pub workspace: WorkspaceKind,
    /// For `mounted`: the mirror's fate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror: Option<MirrorReport>,
    /// Write-backs to the folder that a dead process left cut short, finished or undone at
    /// this turn's start (RUN-16), one sentence each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recovered: Vec<String>,
}

/// What happened to a `mounted` turn's mirror (RUN-11).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MirrorReport {
    /// The mirror's path.
    pub path: PathBuf,
    /// True when the mirror was left on disk (failed turn, conflicts, an error, or asked to).
    pub kept: bool,
    /// True when the write-back put at least one path into the folder (`applied`); a
    /// write-back with nothing to write leaves it false.
    pub written_back: bool,
    /// True when the turn succeeded and the write-back ran to its end (whatever it wrote).
    #[serde(skip)]
    pub write_back_ran: bool,
    /// Paths written back into the folder.
    pub applied: Vec<String>,
    /// Paths not written back because the folder changed too (the user's version is kept).
    pub conflicts: Vec<ConflictReport>,
    /// Why write-back could not run, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One path the write-back left alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConflictReport {
    /// The path, relative to the folder.
    pub path: String,
    /// Why.
    pub reason: String,
}

fn reason_text(reason: &ConflictReason, mirror: &Mirror, path: &Path) -> String {
    match reason {
        ConflictReason::NotMirrored => match mirror.not_copied(path) {
            Some((at, what)) => format!(
                "not mirrored: the folder has {what} at {}, which the mirror does not copy and \
                 write-back never replaces",
                at.display()
            ),
            None => "not mirrored (symlink, special or unreadable)".into(),
        },
        ConflictReason::Failed { error } => {
            format!("could not be written back ({error}); the folder's version is left as it was")
        }
        ConflictReason::KeptAside { at } => format!(
            "changed in the folder while it was written back; the folder's earlier version is \
             kept at {}",
            at.display()
        ),
        ConflictReason::ChangedInSource => "changed in the folder during the turn".into(),
        ConflictReason::DeletedInSource => "deleted from the folder during the turn".into(),
        ConflictReason::CreatedInSource => "created in the folder during the turn".into(),
        ConflictReason::UnsafePath => "path not safe to write".into(),
        ConflictReason::UnsupportedType => "not a regular file or directory".into(),
        ConflictReason::ForbiddenName => "forbidden name (.git)".into(),
        ConflictReason::Dependent { on } => format!("depends on conflicting {}", on.display()),
        other => format!("{other:?}"),
    }
}

impl Turn {
    /// The turn's scope.
    pub fn scope(&self) -> &ToolScope {
        &self.scope
    }

    /// The session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The root tools work in: the mirror for `mounted`, otherwise the folder.
    ///
    /// A `mounted` turn that is still waiting for a copy slot (at most
    /// [`StateStore::concurrent_copies`] temporary copies of one workspace at once) has no
    /// mirror yet: its root is then the mirrors directory, until its first call makes one.
    pub fn root(&self) -> &Path {
        self.ws
            .get()
            .map_or(self.queued_at.as_path(), |w| w.root.path())
    }

    /// Makes one tool call through the turn's [`ToolScope`].
    ///
    /// Before the gate, and without using budget: the tool must exist and be offered by the
    /// configuration (PERM-4, `AGENT_PERMISSION_DENIED`); the exec tools need mode `yolo`
    /// (`AGENT_EXEC_YOLO_REQUIRED`), `run` a `mounted` workspace (PERM-3), `command` a
    /// `direct` or `app-private` one (CMD-1) and `run_command` a `direct` one. Then the gate: dedup, budget, and the grants —
    /// service approval and consent for every tool, `local.terminal.exec@1` for the exec tools
    /// (TS-5), the folder grant for `mounted` and `direct` workspaces — checked before and
    /// watched during the call (TS-3). A `mounted` turn still queued for a copy slot waits for
    /// one first, then checks the folder grant again and makes its mirror.
    pub async fn call(
        &self,
        call_id: &str,
        tool: &str,
        args: Value,
        options: &CallOptions,
    ) -> Result<Value, ToolError> {
        self.call_with(call_id, tool, args, options, &ProgramVerdict::default())
            .await
    }

    /// [`Turn::call`], with `verdict` receiving the tool's typed word on what it ran (for a
    /// call that joined an earlier one with the same callId, nothing is recorded).
    pub async fn call_with(
        &self,
        call_id: &str,
        tool: &str,
        args: Value,
        options: &CallOptions,
        verdict: &ProgramVerdict,
    ) -> Result<Value, ToolError> {
        let name = ToolName::from_name(tool).ok_or_else(|| {
            ToolError::new(
                ErrorCode::ExecArgumentsInvalid,
                format!(
                    "there is no tool {tool:?}; the tools are read, write, edit, grep, run, \
                     command, run_command, background_command, background_status and \
                     background_cancel"
                ),
            )
        })?;
        let config = &self.session.config;
        if !config.offers(name) {
            return Err(ToolError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "this agent's configuration does not offer {name}; add {{\"ref\": \"{name}\"}} \
                     to its tools"
                ),
            ));
        }
        if let Some(why) = config.unrunnable(name) {
            return Err(why.error());
        }
        let kind = config.workspace.kind;
        let mut gate = Tool::new(name.as_str());
        if name.is_exec() {
            gate = gate.requires(Capability::TerminalExec);
        }
        if let Some(folder) = self.session.folder_gate() {
            gate = gate.requires_folder(folder);
        }
        let handler = self
            .session
            .host
            .inner
            .registry
            .get(name)
            .ok_or_else(|| {
                ToolError::new(
                    ErrorCode::ExecUnsupported,
                    format!("this host has no {name} tool registered"),
                )
            })?
            .clone();
        // A queued `mounted` turn makes its copy now, once one of the bounded slots is free.
        let ws = self
            .ws
            .get_or_try_init(|| self.session.mount_when_free(&self.queued_at))
            .await?;
        let root = Arc::clone(&ws.root);
        let call_args = args.clone();
        let hidden = [self.session.host.inner.store.dir().to_path_buf()];
        let not_copied = |rel: &Path| {
            ws.mirror
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .and_then(|m| m.not_copied(rel))
        };
        // BG-9: a host's running agent task, or this turn as an origin that has ended.
        let (origin, origin_state) = match &options.background_origin {
            Some(o) => (o.clone(), background::OriginState::Running),
            None => {
                let turn = format!("turn-{}", self.id);
                (
                    background::Origin {
                        task: turn.clone(),
                        turn,
                    },
                    background::OriginState::Ended,
                )
            }
        };
        // TS-3 for work that outlives the call: a background task stops when the grants this
        // call needed are revoked.
        let stop_when = {
            let authority = Arc::clone(&self.session.host.inner.authority);
            let plugin = self.session.plugin.clone();
            let tool = gate.clone();
            move || -> background::StopWhen {
                let (authority, plugin, tool) =
                    (Arc::clone(&authority), plugin.clone(), tool.clone());
                Box::pin(async move {
                    let mut revisions = authority.watch();
                    loop {
                        revisions.mark_unchanged();
                        if let Err(denial) = authority.check(&plugin, &tool) {
                            return toolscope::CancelReason::Revoked(denial);
                        }
                        if revisions.changed().await.is_err() {
                            return toolscope::CancelReason::Revoked(
                                toolscope::Denial::AuthorityUnavailable,
                            );
                        }
                    }
                })
            }
        };
        let call = self.scope.call(call_id, &gate, &args, |ctx| async move {
            handler
                .call(
                    call_args,
                    ToolEnv {
                        ctx,
                        root,
                        kind,
                        options,
                        hidden: &hidden,
                        not_copied: NotCopiedLookup(&not_copied),
                        run_command: &self.session.run_command,
                        verdict,
                        background: crate::background_tools::BackgroundEnv {
                            tasks: self.session.background.get().map(|b| &b.tasks),
                            state: &self.session.run_command,
                            origin,
                            origin_state,
                            stop_when: &stop_when,
                        },
                    },
                )
                .await
        });
        match &ws.call_dir {
            Some(dir) => remove_if_host_dies(dir, call).await,
            None => call.await,
        }
    }

    /// Ends the turn: the scope takes no more calls (running ones are cancelled). For a
    /// `mounted` workspace, a successful turn writes the mirror back with the conflict check and
    /// removes it (unless [`KeepMirror::Always`], or a conflict left work only the mirror holds); a
    /// failed turn keeps it for diagnosis (RUN-11). The report says where it is. The
    /// workspace's persistent mirror is not removed but left for the next turn to refresh
    /// (`kept: false`); one kept for the user is first renamed aside (`<…>-kept-<ms>-<pid>-<n>`),
    /// and that path reported. Kept mirrors are bounded ([`crate::KeptLimits`]: the oldest go
    /// first, never the one just kept) and listed by `agent-exec status`.
    pub fn finish(self, end: TurnEnd, keep: KeepMirror) -> TurnReport {
        let success = end == TurnEnd::Succeeded;
        let keep_mirror = keep == KeepMirror::Always;
        self.scope.end_turn();
        let kind = self.session.config.workspace.kind;
        let ws = self.ws.into_inner();
        let mirror = ws.as_ref().and_then(|ws| {
            ws.mirror
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
        });
        let (Some(ws), Some(mut mirror)) = (ws, mirror) else {
            return TurnReport {
                workspace: kind,
                mirror: None,
                recovered: self.recovered,
            };
        };
        let mut report = MirrorReport {
            path: mirror.mirror_path().to_path_buf(),
            kept: true,
            written_back: false,
            write_back_ran: false,
            applied: Vec::new(),
            conflicts: Vec::new(),
            error: None,
        };
        if success {
            // A caught signal waits: replaced files sit aside in the user's folder until the
            // write-back verified them (fsguard's `settle`); cut there, they would stay.
            let whole = defer_signal_exit();
            // RUN-16: journaled, so a host killed in the middle leaves a write-back the next
            // start or turn on the folder finishes.
            let journals = self.session.host.inner.store.writeback_dir();
            let finalized = mirror.finalize_journaled(&journals);
            drop(whole);
            match finalized {
                Ok(done) => {
                    report.write_back_ran = true;
                    report.written_back = !done.applied.is_empty();
                    report.applied = done
                        .applied
                        .iter()
                        .map(|c| c.path.to_string_lossy().into_owned())
                        .collect();
                    report.conflicts = done
                        .conflicts
                        .iter()
                        .map(|c| ConflictReport {
                            path: c.change.path.to_string_lossy().into_owned(),
                            reason: reason_text(&c.reason, &mirror, &c.change.path),
                        })
                        .collect();
                }
                Err(e) => report.error = Some(format!("write-back failed: {e}")),
            }
        }
        // A failed turn keeps its mirror for diagnosis (RUN-11) — unless nothing in it changed
        // (the call was refused before it ran), when there is nothing to look at.
        let unchanged = !success && mirror.changes().is_ok_and(|c| c.is_empty());
        let remove = !keep_mirror
            && report.conflicts.is_empty()
            && report.error.is_none()
            && (success || unchanged);
        let kept_why = (!remove).then(|| {
            if keep_mirror {
                KeptWhy::Asked
            } else if report.error.is_some() {
                KeptWhy::WriteBackError
            } else if !report.conflicts.is_empty() {
                KeptWhy::Conflicts
            } else {
                KeptWhy::Failed
            }
        });
        let mut set_aside = false;
        match (&ws.persistent, remove) {
            // Kept in place for the next turn, which refreshes it: not left for the user.
            (Some(_), true) => {
                report.kept = false;
                if let Err(e) = mirror.save_record() {
                    report.error = Some(format!("could not record the mirror: {e}"));
                }
                // A long-lived session keeps it, journals and all, for its next turn.
                let warm = &self.session.warm;
                if warm.keep.load(Ordering::Relaxed) && report.error.is_none() {
                    *warm.mirror.lock().unwrap_or_else(PoisonError::into_inner) = Some(mirror);
                }
            }
            (Some(persistent), false) => {
                drop(mirror);
                match persistent.set_aside() {
                    Ok(path) => {
                        report.path = path;
                        set_aside = true;
                    }
                    Err(e) => report.error = Some(e),
                }
            }
            (None, true) => {
                let path = report.path.clone();
                drop(mirror);
                match fsguard::remove_tree(&path) {
                    Ok(()) => report.kept = false,
                    Err(e) => report.error = Some(format!("could not remove the mirror: {e}")),
                }
            }
            (None, false) => {
                drop(mirror);
                // Kept on purpose: no longer a per-call directory that a sweep or a dying
                // host's supervisor may remove, so it takes a kept name.
                if let Some(dir) = &ws.call_dir {
                    keep_call_dir(dir);
                }
                let dir = report
                    .path
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_default();
                let to = dir.join(unique_name(&format!("{}-kept", self.session.plugin)));
                match std::fs::rename(&report.path, &to) {
                    Ok(()) => {
                        report.path = to;
                        set_aside = true;
                    }
                    Err(e) => {
                        report.error = Some(format!("could not move the kept mirror aside: {e}"))
                    }
                }
            }
        }
        if let Some(why) = kept_why.filter(|_| set_aside) {
            // Kept mirrors are bounded (count and bytes, oldest dropped first)
            // and listed by `agent-exec status`.
            let store = &self.session.host.inner.store;
            store.record_kept_mirror(&report.path, &self.session.folder, why);
        }
        TurnReport {
            workspace: kind,
            mirror: Some(report),
            recovered: self.recovered,
        }
    }
}
