//! Nothing a command starts survives it, and nothing else is ever signalled.
//!
//! **Owns:** process identity ([`ProcessId`]: PID + start time), the [`Tracker`] that decides
//! which processes belong to a command (parent links, and process-group expansion only while
//! an identity-checked member anchors the group), and on Linux the [`Command`] /
//! [`ProcessTree`] pair: a supervisor that is a child subreaper or PID 1 of a PID namespace,
//! and [`ProcessTree::stop`], which freezes, rescans, kills and reaps with identity re-checked
//! on a pidfd before every signal, and counts exactly what it stopped.
//! Also on Linux: [`CallDir`], a directory that belongs to one call and goes with it however
//! the host ends — removed by its owner, by the supervisor after the tree when the host dies
//! (even by SIGKILL), or by a later host's [`sweep_orphans`] (its name records its owner's PID
//! and start time).
//! Also on Linux, when asked ([`Command::link_broker`]): the command's hard-link broker, which
//! answers seccomp notifications for `link`/`linkat` by linking two single names inside the
//! call's private `/dev/shm` and refuses every other link (LIVE-2, CMD-9).
//! CMD-6, CMD-7 (with its \[beyond\] clause), RUN-10; invariants 3 and 4.
//!
//! **Refuses to know:** sandboxes (the caller passes an async-signal-safe `pre_exec` hook),
//! tools, output capture, deadlines and async runtimes (the caller awaits
//! [`ProcessTree::status_fd`] however it likes).
//!
//! # Architecture
//! The host is typically multi-threaded, so the supervisor is started with `clone(2)` and then
//! runs only async-signal-safe code (raw system calls, stack buffers) for its whole life;
//! everything it needs is built before the clone. It never steals the host's `waitpid`: it
//! reaps the command's processes itself and reports the main process's status over a socket. When the host dies,
//! even by SIGKILL, the socket reaches EOF and the supervisor kills and reaps the whole tree
//! before it exits. The tracking rules live in [`Tracker`], free of system calls, and are
//! tested on random process tables.
//!
//! # Example
//! ```
//! # #[cfg(target_os = "linux")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use proctree::Command;
//!
//! let mut tree = Command::new("/bin/sh")
//!     .args(["-c", "sleep 100 & sleep 100 & wait"])
//!     .env("PATH", "/usr/bin:/bin")
//!     .spawn()?;
//! // ... the command runs; on timeout, cancellation or drop:
//! # let mut seen = 0;
//! # while seen < 3 { seen += tree.scan()?.len(); std::thread::sleep(std::time::Duration::from_millis(5)); }
//! let report = tree.stop()?;
//! assert_eq!(report.descendants_stopped, 2); // the two sleeps; the shell is the main process
//! assert!(report.main_stopped);
//! println!("stopped in {:?} ({} mode)", report.elapsed, report.mode);
//! # Ok(()) }
//! # #[cfg(not(target_os = "linux"))]
//! # fn main() {}
//! ```
#![deny(missing_docs)]

mod identity;
mod table;
mod tracker;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "macos")]
mod macos;

pub use identity::{ProcessId, ProcessState};
#[cfg(target_os = "linux")]
pub use linux::{
    CallDir, DeferSignalExit, RemovedIfHostDies, SIGNAL_EXIT_WAIT, defer_signal_exit, owned_name,
    parse_owned_name, remove_call_dirs_on_signals, remove_idle_call_dirs, remove_if_host_dies,
    sweep_orphans,
};
#[cfg(target_os = "linux")]
pub use linux::{
    Command, DEFAULT_SCAN_INTERVAL, Mode, ProcessTree, Signal, SignalOutcome, SpawnError,
    StopError, StopReport, pid_namespace_available, signal, user_namespace_in_use,
};
pub use table::{ProcessEntry, ProcessTable};
pub use tracker::Tracker;
