//! Linux: `/proc` for identity and parent links, pidfds for signals, and a supervisor that is a
//! child subreaper or PID 1 of a PID namespace.

mod calldir;
mod links;
mod remove;
mod scanner;
mod supervisor;
mod sys;
mod tree;
mod walk;
mod wire;

pub use calldir::{
    CallDir, DeferSignalExit, RemovedIfHostDies, SIGNAL_EXIT_WAIT, defer_signal_exit, owned_name,
    parse_owned_name, remove_call_dirs_on_signals, remove_idle_call_dirs, remove_if_host_dies,
    sweep_orphans,
};
pub(crate) use sys::read_stat;
pub use tree::{
    Command, DEFAULT_SCAN_INTERVAL, Mode, ProcessTree, Signal, SignalOutcome, SpawnError,
    StopError, StopReport, pid_namespace_available, signal, user_namespace_in_use,
};
