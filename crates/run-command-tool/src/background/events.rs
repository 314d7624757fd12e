//! What a session's background tasks tell the host (BG-3…BG-5, BG-9): the [`Event`]s of the
//! stream, the start result, a task's [`TaskInfo`], and the host's hooks ([`DecisionModel`],
//! [`Origin`]).
//!
//! **Owns:** the shapes (serialised camelCase, the event's kind in `event`). **Refuses to
//! know:** how an event reaches anyone (the host drains [`super::EventStream`]; the MCP server
//! turns each into a notification).

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;

use crate::Status;

/// Who started a task: the originating agent task and the turn of it that made the call (BG-9).
/// Legs with the same `task` and `turn` are one group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Origin {
    /// The originating agent task (the host's id). While it runs or is pending, reports go
    /// into it; [`super::BackgroundTasks::origin_ended`] says it ended.
    pub task: String,
    /// The turn of that task that started the legs.
    pub turn: String,
}

/// Where an event belongs (BG-9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Delivery {
    /// The originating task runs or is pending: give it to that task.
    IntoOrigin,
    /// The originating task has ended: the event is collected into the group's
    /// [`Event::GroupCompleted`], which the host raises as a new task (the event itself may be
    /// shown to the user meanwhile).
    Held,
}

/// How a report was checked (BG-5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "check")]
pub enum Check {
    /// The host has no decision model: every hit is reported.
    None,
    /// The decision model found it worth reporting.
    Passed,
    /// The decision model failed: the report goes out unchecked.
    Failed {
        /// What went wrong.
        reason: String,
    },
}

/// One keyword report (BG-4), masked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The keyword of the first hit (lowercase).
    pub keyword: String,
    /// The line it was found in (at most 500 bytes).
    pub line: String,
    /// How many hit lines this report stands for.
    pub hits: u32,
    /// The latest output, at most 8 KiB.
    pub output: String,
    /// How it was checked.
    #[serde(flatten)]
    pub check: Check,
}

/// How a task ended (BG-3), masked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Final {
    /// Exited, signaled, timedOut or cancelled; `None` when it could not run (see `error`).
    pub status: Option<Status>,
    /// The exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The last 31 KiB of the output.
    pub output: String,
    /// Output before `output` was dropped from this report (the log had all of it).
    pub truncated: bool,
    /// Processes stopped besides the main one.
    pub descendants_stopped: usize,
    /// What the agent should know (the timeout, quarantined git files, …).
    pub message: Option<String>,
    /// The error that stopped it, `CODE: message`.
    pub error: Option<String>,
    /// What of the git directories' private copies was applied and refused, and what the task
    /// made that was moved aside (TRUST-1, TRUST-2), as a `run_command` result says it.
    #[serde(skip_serializing_if = "gitstage::Report::is_empty")]
    pub git: gitstage::Report,
    /// Files of the writable roots the task made or changed that a user may run later.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub executable_changes: Vec<String>,
}

/// One leg of a completed group (BG-9).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Leg {
    /// The task id.
    pub task_id: String,
    /// The command as the user saw it.
    pub label: String,
    /// Its `objective`.
    pub objective: Option<String>,
    /// Its `next`.
    pub next: Option<String>,
    /// Every report it made.
    pub reports: Vec<Report>,
    /// How it ended.
    pub outcome: Final,
}

/// What a session's background tasks tell the host, in order per task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "event")]
pub enum Event {
    /// A task started.
    Started {
        /// What it is.
        task: TaskInfo,
    },
    /// A keyword hit while the task runs on (BG-4).
    #[serde(rename_all = "camelCase")]
    Report {
        /// The task id.
        task_id: String,
        /// Who started it.
        origin: Origin,
        /// Where it belongs.
        delivery: Delivery,
        /// The report.
        report: Report,
    },
    /// The task ended (exited, timed out, cancelled, or failed).
    #[serde(rename_all = "camelCase")]
    Finished {
        /// The task id.
        task_id: String,
        /// Who started it.
        origin: Origin,
        /// Where it belongs.
        delivery: Delivery,
        /// How it ended.
        outcome: Final,
    },
    /// The originating task has ended and every leg of its group is done: the host raises a
    /// new task with each leg's `objective`, `next` and reports (BG-9).
    #[serde(rename_all = "camelCase")]
    GroupCompleted {
        /// The group's origin.
        origin: Origin,
        /// Every leg, in start order.
        legs: Vec<Leg>,
    },
}

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TaskState {
    /// Still running.
    Running,
    /// Ended (its [`Event::Finished`] says how).
    Ended,
}

/// A task as `list` and `status` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskInfo {
    /// The id (`bg-N`, unique in the session).
    pub task_id: String,
    /// The command as the user saw it (masked).
    pub label: String,
    /// Its `objective`.
    pub objective: Option<String>,
    /// Its `next`.
    pub next: Option<String>,
    /// Who started it.
    pub origin: Origin,
    /// Running or ended.
    pub state: TaskState,
    /// Its `timeout_min`.
    pub timeout_min: u32,
    /// Seconds since it started.
    pub running_secs: u64,
    /// The log that holds its output while it runs (BG-6).
    pub log_path: String,
    /// Bytes of output so far.
    pub output_bytes: u64,
    /// Bytes its log holds (lines are written masked and whole; at most 64 MiB).
    pub log_bytes: u64,
    /// Reports made so far.
    pub reports: u32,
}

/// What `background_command` answers at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackgroundStarted {
    /// False when a gate said no or the program is missing: then only `label` and `message`.
    pub executed: bool,
    /// The task id.
    pub task_id: Option<String>,
    /// The command as the user saw it.
    pub label: String,
    /// The log file to read the tail of when asked about progress (BG-6).
    pub log_path: Option<String>,
    /// Its `timeout_min`.
    pub timeout_min: Option<u32>,
    /// What the agent should know.
    pub message: String,
}

/// The host's decision model (BG-5): says whether a keyword report is worth the agent's turn —
/// filtering harmless hits (`0 errors`, `no errors found`) and repeats of the last report.
pub trait DecisionModel: Send + Sync {
    /// `Ok(true)`: report it; `Ok(false)`: harmless, drop it; `Err`: the check failed, and the
    /// report goes out unchecked, saying so. `last` is the task's previous report.
    fn worth_reporting<'a>(
        &'a self,
        report: &'a Report,
        last: Option<&'a Report>,
    ) -> Pin<Box<dyn Future<Output = Result<bool, String>> + Send + 'a>>;
}
