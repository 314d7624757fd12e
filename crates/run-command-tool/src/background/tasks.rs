//! A session's background tasks (BG-1…BG-9): the table, the limit, the groups, each task's
//! driver and reporter, and the event stream.
//!
//! **Owns:** admission (the same [`crate::run::admit`] as `run_command`, watchers allowed;
//! the BG-8 limit checked before any question is asked and held from then on), the log file's
//! life (made 0600 with `O_EXCL|O_NOFOLLOW` in a 0700 directory, removed when the task ends),
//! the driver (the run with a tap into the monitor and the log; the monitor's deadlines; the
//! account switch and the host's stop condition), the reporter (the decision model, masking,
//! the events in order), and the groups (BG-9).
//! **Refuses to know:** the rules of the monitor (module `monitor`), what the host does with
//! an event, and the front ends.

use std::collections::{BTreeMap, HashMap};
use std::fs::{DirBuilder, OpenOptions};
use std::future::Future;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use fsguard::RootLease;
use tokio::sync::{Notify, mpsc, watch};
use toolscope::{CallContext, CancelHandle, CancelReason, ErrorCode, ToolError};

use super::args::BackgroundArgs;
use super::events::{
    BackgroundStarted, Check, DecisionModel, Delivery, Event, Final, Leg, Origin, Report, TaskInfo,
    TaskState,
};
use super::log::LogWriter;
use super::monitor::{FINAL_BYTES, Hit, Monitor};
use crate::ask::Asker;
use crate::run::{Admission, Admit, admit, execute, mask_text};
use crate::{Policy, RunCommandOptions, RunCommandState, Status};

/// How long the decision model may take over one report before it goes out unchecked.
pub const MODEL_TIMEOUT: Duration = Duration::from_secs(20);
/// Ended tasks kept for `status` once their group is gone (the earliest-ended are forgotten
/// first; legs of an open group are always kept).
const ENDED_KEPT: usize = 256;
/// Reports kept per task for its group's completion (the oldest go first; the count of those
/// dropped is kept): bounds the host's memory whatever a task prints.
const REPORTS_KEPT: usize = 20;

/// The default `MAX_BACKGROUND_TASKS` (BG-8): half the CPU cores, at least 3.
pub fn max_background_tasks() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    (cores / 2).max(3)
}

/// Counts what else the host runs in the background for this session (background
/// sub-agents), which shares [`BackgroundConfig::max_tasks`] with the tasks (BG-8).
pub type OthersCount = Arc<dyn Fn() -> usize + Send + Sync>;

/// A condition of the host's that stops a task when it resolves (a revoked grant, …), with the
/// reason the task ends with.
pub type StopWhen = Pin<Box<dyn Future<Output = CancelReason> + Send>>;

/// How a session runs its background tasks.
#[derive(Clone)]
pub struct BackgroundConfig {
    /// The session's log directory (`…/sessions/<session>/background`), made 0700 when missing.
    pub log_dir: PathBuf,
    /// At most this many at once, the host's others included (BG-8).
    pub max_tasks: usize,
    /// The host's other background work that counts against `max_tasks`.
    pub others: Option<OthersCount>,
    /// Filters harmless reports (BG-5); `None`: every hit is reported.
    pub model: Option<Arc<dyn DecisionModel>>,
}

impl BackgroundConfig {
    /// Logs in `log_dir`, [`max_background_tasks`], nothing else counted, no decision model.
    pub fn new(log_dir: impl Into<PathBuf>) -> BackgroundConfig {
        BackgroundConfig {
            log_dir: log_dir.into(),
            max_tasks: max_background_tasks(),
            others: None,
            model: None,
        }
    }
}

impl std::fmt::Debug for BackgroundConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundConfig")
            .field("log_dir", &self.log_dir)
            .field("max_tasks", &self.max_tasks)
            .field("model", &self.model.is_some())
            .finish_non_exhaustive()
    }
}

/// The session's events, in order per task. Dropping it leaves the tasks nobody to report to:
/// they are stopped, and new ones are refused (BG-7).
#[derive(Debug)]
pub struct EventStream {
    rx: mpsc::UnboundedReceiver<Event>,
    _stop: StopOnDrop,
}

impl EventStream {
    /// The next event; `None` once the [`BackgroundTasks`] and every task are gone.
    pub async fn next(&mut self) -> Option<Event> {
        self.rx.recv().await
    }

    /// An event if one is waiting.
    pub fn try_next(&mut self) -> Option<Event> {
        self.rx.try_recv().ok()
    }
}

/// Stops every task when the stream goes (nobody would hear about them).
#[derive(Debug)]
struct StopOnDrop(std::sync::Weak<Inner>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(inner) = self.0.upgrade() {
            inner.cancel_all(CancelReason::Requested);
        }
    }
}

/// Where the origin of a new task is (BG-9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OriginState {
    /// The originating task runs: reports go into it until
    /// [`BackgroundTasks::origin_ended`].
    Running,
    /// It has already ended (a one-call front end such as an MCP `tools/call`): every event
    /// is held for the group's completion.
    Ended,
}

/// A session's background tasks. Cheap to clone (one table). When the [`EventStream`] goes,
/// every task is stopped; [`BackgroundTasks::shutdown`] stops them and waits.
#[derive(Clone, Debug)]
pub struct BackgroundTasks {
    inner: Arc<Inner>,
}

struct Inner {
    config: BackgroundConfig,
    events: mpsc::UnboundedSender<Event>,
    table: Mutex<Table>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Table {
    tasks: BTreeMap<u64, Entry>,
    ends: u64,
    groups: HashMap<Origin, Group>,
    /// Starts between their limit check and their entry.
    reserved: usize,
}

struct Entry {
    id: String,
    label: String,
    objective: Option<String>,
    next: Option<String>,
    origin: Origin,
    timeout_min: u32,
    started: Instant,
    log_path: PathBuf,
    shared: Arc<Shared>,
    cancel: CancelHandle,
    done: watch::Receiver<bool>,
    reports: Vec<Report>,
    /// Reports beyond [`REPORTS_KEPT`] that were dropped from `reports` (the oldest).
    reports_dropped: u32,
    outcome: Option<Final>,
    /// When it ended, in the session's order of ends (the ended-task bound forgets the
    /// earliest first).
    ended_seq: u64,
}

#[derive(Default)]
struct Group {
    legs: Vec<u64>,
    origin_ended: bool,
    /// An event of the group was held (the origin had ended): its completion is raised.
    held: bool,
}

/// What the tap, the driver and `status` share.
struct Shared {
    live: Mutex<Live>,
    wake: Notify,
    /// The session's secrets: everything shown of the output is masked with them (RC-14).
    state: Arc<RunCommandState>,
}

struct Live {
    monitor: Monitor,
    log: Option<LogWriter>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one start needs from the host besides the arguments.
pub struct Launch<'a> {
    /// The working directory (the turn's `direct` folder).
    pub workdir: Arc<RootLease>,
    /// The rules.
    pub policy: &'a Policy,
    /// Who answers the gates.
    pub asker: &'a dyn Asker,
    /// The session's run_command state (secrets; the RC-9 lock is not taken: a background
    /// task runs beside the session's calls and is counted by BG-8 instead).
    pub state: Arc<RunCommandState>,
    /// This machine's options; their `timeout` is not used (see `time_limit`).
    pub options: RunCommandOptions,
    /// The host's own bound on a task's time where shorter than its `timeout_min`.
    pub time_limit: Option<Duration>,
    /// Who started it.
    pub origin: Origin,
    /// Whether that origin still runs.
    pub origin_state: OriginState,
    /// The host's stop condition (a revoked grant), if any.
    pub stop_when: Option<StopWhen>,
}

impl std::fmt::Debug for Launch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("workdir", &self.workdir.path())
            .field("origin", &self.origin)
            .field("origin_state", &self.origin_state)
            .finish_non_exhaustive()
    }
}

impl BackgroundTasks {
    /// An empty table and the stream its events arrive on.
    pub fn new(config: BackgroundConfig) -> (BackgroundTasks, EventStream) {
        let (tx, rx) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            config,
            events: tx,
            table: Mutex::new(Table::default()),
            next_id: AtomicU64::new(1),
        });
        let stream = EventStream {
            rx,
            _stop: StopOnDrop(Arc::downgrade(&inner)),
        };
        (BackgroundTasks { inner }, stream)
    }

    /// Starts one task (BG-1): refused when nobody hears about it (BG-7) or the session is
    /// full (BG-8); then decided, re-checked and gated exactly as `run_command` (watchers
    /// allowed, RC-15); then started and answered at once. `ctx` is the starting call's: it
    /// cancels the gate's questions; the task itself runs in its own context on the call's
    /// account generation, so an account switch stops it (CMD-12).
    ///
    /// # Errors
    /// `BACKGROUND_COMMAND_NO_DELIVERY`, `BACKGROUND_COMMAND_LIMIT`, every error of
    /// `run_command`'s admission, `AGENT_EXEC_IO_FAILED` when the log cannot be made.
    pub async fn start(
        &self,
        args: BackgroundArgs,
        launch: Launch<'_>,
        ctx: &CallContext,
    ) -> Result<BackgroundStarted, ToolError> {
        ctx.check()?;
        let inner = &self.inner;
        if inner.events.is_closed() {
            return Err(no_delivery());
        }
        let slot = inner.reserve()?;
        let Launch {
            workdir,
            policy,
            asker,
            state,
            mut options,
            time_limit,
            origin,
            origin_state,
            stop_when,
        } = launch;
        // The session's logs are the host's state: no sandboxed command sees them, whatever the
        // host passed (the log directory need not exist yet: it is hidden when the task runs).
        // (Not again inside a hidden path: the state directory usually is one.)
        if !options
            .hidden
            .iter()
            .any(|h| inner.config.log_dir.starts_with(h))
        {
            options.hidden.push(inner.config.log_dir.clone());
        }
        // timeout_min, or the host's own bound where that is shorter.
        let asked = Duration::from_secs(u64::from(args.timeout_min) * 60);
        options.timeout = time_limit.map_or(asked, |l| l.min(asked));
        let how = Admit {
            watchers_allowed: true,
        };
        let admitted = match admit(
            args.command.clone(),
            &workdir,
            policy,
            asker,
            &state,
            &options,
            how,
            ctx,
        )
        .await?
        {
            Admission::NotExecuted(out) => {
                return Ok(BackgroundStarted {
                    executed: false,
                    task_id: None,
                    label: mask_text(&state, &out.label),
                    log_path: None,
                    timeout_min: None,
                    message: out
                        .message
                        .map_or_else(String::new, |m| mask_text(&state, &m)),
                });
            }
            Admission::Run(a) => a,
        };
        let label = mask_text(&state, &admitted.label);
        // RC-14: the agent's own notes are shown back too (status, events, the group).
        let objective = args.objective.as_deref().map(|t| mask_text(&state, t));
        let next = args.next.as_deref().map(|t| mask_text(&state, t));
        let key = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let id = format!("bg-{key}");
        let (log_path, file) = open_log(&inner.config.log_dir, &id)?;
        let shared = Arc::new(Shared {
            live: Mutex::new(Live {
                monitor: Monitor::new(args.keywords.clone()),
                log: Some(LogWriter::new(file)),
            }),
            wake: Notify::new(),
            state: Arc::clone(&state),
        });
        let (task_ctx, cancel) = CallContext::outliving(&id, ctx.generation().clone());
        let (done_tx, done_rx) = watch::channel(false);
        let entry = Entry {
            id: id.clone(),
            label: label.clone(),
            objective,
            next,
            origin: origin.clone(),
            timeout_min: args.timeout_min,
            started: Instant::now(),
            log_path: log_path.clone(),
            shared: Arc::clone(&shared),
            cancel: cancel.clone(),
            done: done_rx,
            reports: Vec::new(),
            reports_dropped: 0,
            outcome: None,
            ended_seq: 0,
        };
        let info = {
            let mut table = lock(&inner.table);
            table.tasks.insert(key, entry);
            let group = table.groups.entry(origin.clone()).or_default();
            group.legs.push(key);
            if origin_state == OriginState::Ended {
                group.origin_ended = true;
            }
            // The entry holds the place now.
            table.reserved = table.reserved.saturating_sub(1);
            std::mem::forget(slot);
            info_of(&table.tasks[&key])
        };
        let _ = inner.events.send(Event::Started { task: info });
        let driver = Driver {
            inner: Arc::clone(inner),
            key,
            shared,
            state,
            options,
            timeout_min: args.timeout_min,
            cancel,
            stop_when,
        };
        tokio::spawn(async move {
            driver.run(*admitted, workdir, task_ctx).await;
            let _ = done_tx.send(true);
        });
        Ok(BackgroundStarted {
            executed: true,
            task_id: Some(id.clone()),
            label,
            log_path: Some(log_path.to_string_lossy().into_owned()),
            timeout_min: Some(args.timeout_min),
            message: format!(
                "{id} runs in the background (stopped after {} min). Its output is appended to \
                 logPath while it runs: when asked about progress, read the tail of that file \
                 first. Reports arrive as events: output lines with a keyword ({}), and the \
                 end.",
                args.timeout_min,
                args.keywords().join(", ")
            ),
        })
    }

    /// Every task still known (running ones and recently ended ones), in start order.
    pub fn list(&self) -> Vec<TaskInfo> {
        let table = lock(&self.inner.table);
        table.tasks.values().map(info_of).collect()
    }

    /// One task, with its latest output (at most 8 KiB, masked) while it runs.
    ///
    /// # Errors
    /// `BACKGROUND_COMMAND_UNKNOWN_TASK`.
    pub fn status(&self, task_id: &str) -> Result<(TaskInfo, String), ToolError> {
        let table = lock(&self.inner.table);
        let entry = find(&table, task_id)?;
        let info = info_of(entry);
        let latest = match &entry.outcome {
            Some(done) => done.output.clone(),
            None => {
                let raw = lock(&entry.shared.live)
                    .monitor
                    .tail(super::monitor::REPORT_BYTES);
                mask_text(&entry.shared.state, &raw)
            }
        };
        Ok((info, latest))
    }

    /// Stops one task (one leg alone, BG-9) and waits until nothing it started is alive; its
    /// [`Event::Finished`] says `cancelled`. Stopping an ended task is no error.
    ///
    /// # Errors
    /// `BACKGROUND_COMMAND_UNKNOWN_TASK`.
    pub async fn cancel(&self, task_id: &str) -> Result<TaskInfo, ToolError> {
        let (cancel, mut done) = {
            let table = lock(&self.inner.table);
            let entry = find(&table, task_id)?;
            (entry.cancel.clone(), entry.done.clone())
        };
        let before = {
            let table = lock(&self.inner.table);
            let entry = find(&table, task_id)?;
            info_of(entry)
        };
        cancel.cancel(CancelReason::Requested);
        let _ = done.wait_for(|d| *d).await;
        let table = lock(&self.inner.table);
        Ok(match find(&table, task_id) {
            Ok(entry) => info_of(entry),
            // Forgotten already (the ended-task bound): it has ended all the same.
            Err(_) => TaskInfo {
                state: TaskState::Ended,
                ..before
            },
        })
    }

    /// The originating task ended (BG-9): its groups whose legs are all done complete now,
    /// the others once their last leg ends.
    pub fn origin_ended(&self, origin_task: &str) {
        let mut table = lock(&self.inner.table);
        let origins: Vec<Origin> = table
            .groups
            .keys()
            .filter(|o| o.task == origin_task)
            .cloned()
            .collect();
        for origin in origins {
            if let Some(g) = table.groups.get_mut(&origin) {
                g.origin_ended = true;
            }
            self.inner.complete_if_done(&mut table, &origin);
        }
    }

    /// The originating task was paused or cancelled (BG-9): every leg it started is stopped,
    /// and this returns once nothing they started is alive.
    pub async fn stop_origin(&self, origin_task: &str) {
        let waits = {
            let table = lock(&self.inner.table);
            table
                .tasks
                .values()
                .filter(|e| e.origin.task == origin_task && e.outcome.is_none())
                .map(|e| {
                    e.cancel.cancel(CancelReason::Requested);
                    e.done.clone()
                })
                .collect::<Vec<_>>()
        };
        for mut done in waits {
            let _ = done.wait_for(|d| *d).await;
        }
    }

    /// Session end or account switch (CMD-12): stops every task and waits until nothing any of
    /// them started is alive.
    pub async fn shutdown(&self, reason: CancelReason) {
        let waits = {
            let table = lock(&self.inner.table);
            table
                .tasks
                .values()
                .map(|e| {
                    e.cancel.cancel(reason.clone());
                    e.done.clone()
                })
                .collect::<Vec<_>>()
        };
        for mut done in waits {
            let _ = done.wait_for(|d| *d).await;
        }
    }

    /// True when `path` is, byte for byte, the log of one of the running tasks (what a host's
    /// `read` may open outside the workspace, BG-6; no other spelling of it).
    pub fn is_running_log(&self, path: &Path) -> bool {
        lock(&self.inner.table)
            .tasks
            .values()
            .any(|e| e.outcome.is_none() && e.log_path.as_os_str() == path.as_os_str())
    }

    /// Tasks running now (BG-8 counts these).
    pub fn running(&self) -> usize {
        lock(&self.inner.table)
            .tasks
            .values()
            .filter(|e| e.outcome.is_none())
            .count()
    }
}

/// A reserved place under the BG-8 limit, given back when dropped (a start that failed);
/// forgotten once the task's entry holds the place.
struct Slot<'a>(&'a Inner);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut table = lock(&self.0.table);
        table.reserved = table.reserved.saturating_sub(1);
    }
}

impl Inner {
    fn reserve(&self) -> Result<Slot<'_>, ToolError> {
        let others = self.config.others.as_ref().map_or(0, |f| f());
        let mut table = lock(&self.table);
        let running: Vec<&Entry> = table
            .tasks
            .values()
            .filter(|e| e.outcome.is_none())
            .collect();
        let busy = running.len() + table.reserved + others;
        if busy >= self.config.max_tasks {
            let names: Vec<String> = running
                .iter()
                .map(|e| format!("{} ({})", e.id, e.label))
                .collect();
            let also = if others > 0 {
                format!(" and {others} other background job(s) of the host")
            } else {
                String::new()
            };
            return Err(ToolError::new(
                ErrorCode::BackgroundLimit,
                format!(
                    "this session already runs {busy} background tasks, its limit \
                     (MAX_BACKGROUND_TASKS = {}): {}{also}. Wait for one to finish or cancel \
                     one, then start this again",
                    self.config.max_tasks,
                    if names.is_empty() {
                        "none of them started here".to_owned()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        }
        table.reserved += 1;
        Ok(Slot(self))
    }

    fn cancel_all(&self, reason: CancelReason) {
        for e in lock(&self.table).tasks.values() {
            e.cancel.cancel(reason.clone());
        }
    }

    fn delivery(table: &mut Table, origin: &Origin) -> Delivery {
        match table.groups.get_mut(origin) {
            Some(g) if g.origin_ended => {
                g.held = true;
                Delivery::Held
            }
            _ => Delivery::IntoOrigin,
        }
    }

    fn report(&self, key: u64, report: Report) {
        let mut table = lock(&self.table);
        let Some(entry) = table.tasks.get_mut(&key) else {
            return;
        };
        entry.reports.push(report.clone());
        if entry.reports.len() > REPORTS_KEPT {
            entry.reports.remove(0);
            entry.reports_dropped += 1;
        }
        let (task_id, origin) = (entry.id.clone(), entry.origin.clone());
        let delivery = Self::delivery(&mut table, &origin);
        let _ = self.events.send(Event::Report {
            task_id,
            origin,
            delivery,
            report,
        });
    }

    fn finish(&self, key: u64, outcome: Final) {
        let mut table = lock(&self.table);
        let Some(entry) = table.tasks.get_mut(&key) else {
            return;
        };
        if entry.outcome.is_some() {
            // Told once.
            return;
        }
        entry.outcome = Some(outcome.clone());
        table.ends += 1;
        let seq = table.ends;
        let Some(entry) = table.tasks.get_mut(&key) else {
            return;
        };
        entry.ended_seq = seq;
        let (task_id, origin) = (entry.id.clone(), entry.origin.clone());
        let delivery = Self::delivery(&mut table, &origin);
        let _ = self.events.send(Event::Finished {
            task_id,
            origin: origin.clone(),
            delivery,
            outcome,
        });
        self.complete_if_done(&mut table, &origin);
        // Bounded memory: the earliest-ended tasks whose group is gone are forgotten first (a
        // leg of an open group is kept for the group's completion).
        let mut ended: Vec<(u64, u64)> = table
            .tasks
            .iter()
            .filter(|(_, e)| e.outcome.is_some() && !table.groups.contains_key(&e.origin))
            .map(|(k, e)| (e.ended_seq, *k))
            .collect();
        if ended.len() > ENDED_KEPT {
            ended.sort_unstable();
            for (_, k) in &ended[..ended.len() - ENDED_KEPT] {
                table.tasks.remove(k);
            }
        }
    }

    /// BG-9: once the origin has ended and every leg is done, a group that held anything
    /// is raised as one [`Event::GroupCompleted`]; the group is then gone.
    fn complete_if_done(&self, table: &mut Table, origin: &Origin) {
        let Some(group) = table.groups.get(origin) else {
            return;
        };
        let all_done = group
            .legs
            .iter()
            .all(|k| table.tasks.get(k).is_none_or(|e| e.outcome.is_some()));
        if !(group.origin_ended && all_done) {
            return;
        }
        let Some(group) = table.groups.remove(origin) else {
            return;
        };
        if !group.held {
            // Everything went into the running origin already.
            return;
        }
        let legs = group
            .legs
            .iter()
            .map(|k| match table.tasks.get(k) {
                Some(e) => Leg {
                    task_id: e.id.clone(),
                    label: e.label.clone(),
                    objective: e.objective.clone(),
                    next: e.next.clone(),
                    reports: e.reports.clone(),
                    outcome: e.outcome.clone().unwrap_or_else(lost_outcome),
                },
                None => Leg {
                    task_id: format!("bg-{k}"),
                    label: String::new(),
                    objective: None,
                    next: None,
                    reports: Vec::new(),
                    outcome: lost_outcome(),
                },
            })
            .collect();
        let _ = self.events.send(Event::GroupCompleted {
            origin: origin.clone(),
            legs,
        });
    }
}

fn lost_outcome() -> Final {
    Final {
        status: None,
        exit_code: None,
        output: String::new(),
        truncated: false,
        descendants_stopped: 0,
        message: None,
        error: Some("the task's record was dropped before its group completed".into()),
        git: gitstage::Report::default(),
        executable_changes: Vec::new(),
    }
}

fn find<'a>(table: &'a Table, task_id: &str) -> Result<&'a Entry, ToolError> {
    table
        .tasks
        .values()
        .find(|e| e.id == task_id)
        .ok_or_else(|| {
            let known: Vec<&str> = table.tasks.values().map(|e| e.id.as_str()).collect();
            let shown: String = task_id.chars().take(80).collect();
            ToolError::new(
                ErrorCode::BackgroundUnknownTask,
                format!(
                    "this session has no background task {shown:?}; its tasks are: {}",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            )
        })
}

fn info_of(e: &Entry) -> TaskInfo {
    let live = lock(&e.shared.live);
    TaskInfo {
        task_id: e.id.clone(),
        label: e.label.clone(),
        objective: e.objective.clone(),
        next: e.next.clone(),
        origin: e.origin.clone(),
        state: if e.outcome.is_some() {
            TaskState::Ended
        } else {
            TaskState::Running
        },
        timeout_min: e.timeout_min,
        running_secs: e.started.elapsed().as_secs(),
        log_path: e.log_path.to_string_lossy().into_owned(),
        output_bytes: live.monitor.total_bytes(),
        log_bytes: live.log.as_ref().map_or(0, LogWriter::written),
        reports: u32::try_from(e.reports.len()).unwrap_or(u32::MAX),
    }
}

fn no_delivery() -> ToolError {
    ToolError::new(
        ErrorCode::BackgroundNoDelivery,
        "background_command reports while its command runs and when it ends, and nobody would \
         hear those reports here (a one-shot call). Run it through the MCP server \
         (`agent-exec mcp --workspace DIR`) or a host that drains the library's event stream, \
         or use run_command for a command that ends",
    )
}

/// The log file of `id` in `dir` (BG-6): the directory made 0700 where missing, the file new
/// (`O_EXCL`, never through a link), 0600.
fn open_log(dir: &Path, id: &str) -> Result<(PathBuf, std::fs::File), ToolError> {
    let io = |what: &str, e: std::io::Error| {
        ToolError::new(
            ErrorCode::ExecIoFailed,
            format!("cannot {what} the background log in {}: {e}", dir.display()),
        )
    };
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io("make the directory of", e))?;
    let path = dir.join(format!("{id}.log"));
    let file = OpenOptions::new()
        .append(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| io("create", e))?;
    Ok((path, file))
}

/// One task's run.
struct Driver {
    inner: Arc<Inner>,
    key: u64,
    shared: Arc<Shared>,
    state: Arc<RunCommandState>,
    options: RunCommandOptions,
    timeout_min: u32,
    cancel: CancelHandle,
    stop_when: Option<StopWhen>,
}

/// What the driver hands its reporter, in order.
enum Msg {
    Hit(Hit),
    End(Box<Final>),
}

impl Driver {
    async fn run(
        mut self,
        admitted: crate::run::Admitted,
        workdir: Arc<RootLease>,
        ctx: CallContext,
    ) {
        let (to_reporter, from_driver) = mpsc::unbounded_channel();
        let reporter = tokio::spawn(reporter(
            Arc::clone(&self.inner),
            self.key,
            Arc::clone(&self.state),
            from_driver,
        ));
        let tap: exec::Tap = {
            let shared = Arc::clone(&self.shared);
            let state = Arc::clone(&self.state);
            Arc::new(move |bytes: &[u8]| {
                let mut live = lock(&shared.live);
                live.monitor.feed(Instant::now(), bytes);
                let failed = match &mut live.log {
                    Some(log) => log.write(bytes, &|l| mask_text(&state, l)).is_err(),
                    None => false,
                };
                if failed {
                    // A full disk must not stop the command; the monitor and reports go on.
                    live.log = None;
                }
                drop(live);
                shared.wake.notify_one();
            })
        };
        let generation = ctx.generation().clone();
        let run = execute(
            admitted,
            workdir,
            &self.state,
            &self.options,
            Some(tap),
            &ctx,
        );
        tokio::pin!(run);
        let mut stop_when = self.stop_when.take();
        let mut switched = false;
        let result = loop {
            let wake = lock(&self.shared.live).monitor.next_wake();
            let sleep = async {
                match wake {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            let stop = async {
                match stop_when.as_mut() {
                    Some(f) => f.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = &mut run => break r,
                () = self.shared.wake.notified() => {}
                () = sleep => {
                    let hit = lock(&self.shared.live).monitor.poll(Instant::now());
                    if let Some(hit) = hit {
                        let _ = to_reporter.send(Msg::Hit(hit));
                    }
                }
                () = generation.retired(), if !switched => {
                    switched = true;
                    self.cancel.cancel(CancelReason::AccountSwitched);
                }
                reason = stop => {
                    stop_when = None;
                    self.cancel.cancel(reason);
                }
            }
        };
        let (tail, total, log_failed) = {
            let mut live = lock(&self.shared.live);
            live.monitor.end_of_output(Instant::now());
            let state = Arc::clone(&self.state);
            let log_failed = match &mut live.log {
                Some(log) => log.flush(&|l| mask_text(&state, l)).is_err(),
                None => true,
            };
            // Closed now: nothing writes it any more.
            live.log = None;
            // Hits the end cut short are in the final report's output.
            let _ = live.monitor.take_pending();
            let tail = live.monitor.tail(FINAL_BYTES);
            live.monitor.release();
            (tail, live.monitor.total_bytes(), log_failed)
        };
        // BG-6: the log goes when the task ends, before its end is told (its output is in the
        // final report).
        let path = lock(&self.inner.table)
            .tasks
            .get(&self.key)
            .map(|e| e.log_path.clone());
        if let Some(path) = path {
            let _ = std::fs::remove_file(path);
        }
        let outcome = self.outcome(result, &tail, total, log_failed);
        let _ = to_reporter.send(Msg::End(Box::new(outcome.clone())));
        drop(to_reporter);
        if reporter.await.is_err() {
            // The reporter died before telling the end: tell it here, so the task ends.
            self.inner.finish(self.key, outcome);
        }
    }

    fn outcome(
        &self,
        result: Result<crate::RunCommandOutput, ToolError>,
        tail: &str,
        total: u64,
        log_failed: bool,
    ) -> Final {
        let output = mask_text(&self.state, tail);
        let truncated = total > tail.len() as u64;
        let log_note = log_failed
            .then(|| "the log file could not be written to the end (is the disk full?)".to_owned());
        match result {
            Ok(out) => {
                let timeout = (out.status == Status::TimedOut).then(|| {
                    let asked = Duration::from_secs(u64::from(self.timeout_min) * 60);
                    if self.options.timeout < asked {
                        format!(
                            "stopped after the host's limit of {} s (shorter than timeout_min = \
                             {} min) with everything it started; split the work",
                            self.options.timeout.as_secs(),
                            self.timeout_min
                        )
                    } else {
                        format!(
                            "stopped after timeout_min = {} min with everything it started; \
                             give a larger timeout_min (at most 60) or split the work",
                            self.timeout_min
                        )
                    }
                });
                let message = [timeout, out.message, out.hint, log_note]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>();
                Final {
                    status: Some(out.status),
                    exit_code: out.exit_code,
                    output: if out.executed && out.status != Status::NotExecuted {
                        output
                    } else {
                        out.output
                    },
                    truncated,
                    descendants_stopped: out.descendants_stopped,
                    message: (!message.is_empty()).then(|| message.join(". ")),
                    error: None,
                    git: out.git,
                    executable_changes: out.executable_changes,
                }
            }
            Err(e) => Final {
                status: None,
                exit_code: None,
                output,
                truncated,
                descendants_stopped: 0,
                message: log_note,
                error: Some(format!(
                    "{}: {}",
                    e.code().as_str(),
                    mask_text(&self.state, e.message())
                )),
                git: gitstage::Report::default(),
                executable_changes: Vec::new(),
            },
        }
    }
}

/// Turns hits into reports (masked, checked by the decision model) and sends them and the end
/// in order; the model's wait never holds up the command's output.
async fn reporter(
    inner: Arc<Inner>,
    key: u64,
    state: Arc<RunCommandState>,
    mut from_driver: mpsc::UnboundedReceiver<Msg>,
) {
    let model = inner.config.model.clone();
    let mut last: Option<Report> = None;
    while let Some(msg) = from_driver.recv().await {
        match msg {
            Msg::Hit(hit) => {
                let mut report = Report {
                    keyword: hit.keyword,
                    line: mask_text(&state, &hit.line),
                    hits: hit.hits,
                    output: mask_text(&state, &hit.output),
                    check: Check::None,
                };
                if let Some(model) = &model {
                    // On its own task: a model that panics is a failed check, not a task that
                    // never ends (its BG-8 place and its end event would be lost).
                    let check = {
                        let (model, r, l) = (Arc::clone(model), report.clone(), last.clone());
                        tokio::spawn(async move { model.worth_reporting(&r, l.as_ref()).await })
                    };
                    let abort = check.abort_handle();
                    let verdict = tokio::time::timeout(MODEL_TIMEOUT, check).await;
                    report.check = match verdict {
                        Ok(Ok(Ok(true))) => Check::Passed,
                        Ok(Ok(Ok(false))) => continue,
                        Ok(Ok(Err(reason))) => Check::Failed {
                            reason: format!("the decision model failed ({reason}); unchecked"),
                        },
                        Ok(Err(_)) => Check::Failed {
                            reason: "the decision model failed (it panicked); unchecked".into(),
                        },
                        Err(_) => {
                            abort.abort();
                            Check::Failed {
                                reason: format!(
                                    "the decision model did not answer within {} s; unchecked",
                                    MODEL_TIMEOUT.as_secs()
                                ),
                            }
                        }
                    };
                }
                inner.report(key, report.clone());
                last = Some(report);
            }
            Msg::End(outcome) => inner.finish(key, *outcome),
        }
    }
}
