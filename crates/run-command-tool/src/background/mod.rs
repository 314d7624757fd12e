//! `background_command` (seed 001's second tool; BG-1…BG-9, RC-15): `run_command`'s
//! arguments, checks, sandbox, gates and masking, for jobs that outlive the call — watchers,
//! dev servers, long test suites.
//!
//! **Owns:** a session's tasks ([`BackgroundTasks`]): the start (answered at once with a task
//! id and the log path), the BG-8 limit (half the CPU cores, at least 3, shared with the
//! host's other background work through [`BackgroundConfig::others`]), the timeout (BG-3:
//! 1–60 minutes, the whole tree stopped, the last 31 KiB in the final report), the keyword
//! monitor (BG-4, module `monitor`: a new line with a keyword → once output was quiet for
//! 2 s, at most 10 s after the hit, a report of the latest 8 KiB; at most one per 30 s, hits in
//! between coalesced), the decision model (BG-5, [`DecisionModel`]), the log (BG-6), the groups
//! (BG-9), and the [`EventStream`] the host drains.
//!
//! **The log (BG-6).** `<log_dir>/<task id>.log`, `log_dir` being the session's
//! `…/sessions/<session>/background` (the host picks it under its state directory), made 0700,
//! the file 0600, new (`O_EXCL`, never through a link); output is appended line by line,
//! masked as results are (RC-14; a PEM private key spread over lines is never written), at most
//! 64 MiB; removed when the task ends. The sandboxed commands never see it (the state directory
//! is hidden from them); the agent reads it with the host's `read` tool, which accepts exactly
//! the log paths of the session's running tasks (host-shim).
//!
//! **Not the RC-9 lock.** A background task runs beside the session's `run_command` calls: it
//! takes no part of the RC-9 lock (a 60-minute watcher would otherwise block every call); BG-8
//! bounds how many run.
//!
//! **Groups (BG-9).** Tasks with the same [`Origin`] (originating task and turn) are one group.
//! While the origin runs, events are [`Delivery::IntoOrigin`]; once it has ended
//! ([`BackgroundTasks::origin_ended`], or [`OriginState::Ended`] from the start for one-call
//! front ends), events are [`Delivery::Held`], and when every leg is done one
//! [`Event::GroupCompleted`] carries each leg's `objective`, `next`, reports and outcome — the
//! new task the host raises. [`BackgroundTasks::stop_origin`] (the origin paused or cancelled)
//! stops its legs; [`BackgroundTasks::cancel`] stops one leg alone.
//!
//! **Origin (BG-7).** No event stream, no task: a dropped [`EventStream`] stops the tasks and
//! refuses new ones (`BACKGROUND_COMMAND_NO_DELIVERY`); one-shot front ends refuse before that.
//!
//! **Stops.** Cancel, the timeout, the account switch (the task runs on the starting call's
//! account generation and is cancelled when it retires, CMD-12), the host's stop condition
//! ([`Launch::stop_when`], e.g. a revoked grant), session end ([`BackgroundTasks::shutdown`]):
//! each stops the whole tree, as everywhere (invariant 4).

mod args;
mod events;
pub(crate) mod log;
pub(crate) mod monitor;
mod tasks;

pub use args::{
    BackgroundArgs, MAX_GROUP_BYTES, MAX_NOTE_BYTES, MAX_TIMEOUT_MIN, background_input_schema,
};
pub use events::{
    BackgroundStarted, Check, DecisionModel, Delivery, Event, Final, Leg, Origin, Report, TaskInfo,
    TaskState,
};
pub use monitor::DEFAULT_KEYWORDS;
pub use tasks::{
    BackgroundConfig, BackgroundTasks, EventStream, Launch, MODEL_TIMEOUT, OriginState,
    OthersCount, StopWhen, max_background_tasks,
};
