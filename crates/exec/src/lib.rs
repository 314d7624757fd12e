//! The one runner both exec tools share: a program, its sandbox, its bounds, one [`Outcome`].
//!
//! **Owns:** the platform-neutral [`SandboxSpec`] (the user's roots, the program kind, the
//! network switch) and its translation per platform — Landlock + seccomp on Linux (the system
//! locations a program needs are added here: [`linux`], a shell's by rule in `sysset` —
//! LIVE-1), a Seatbelt profile input on macOS
//! (module `macos`); spawning under `proctree`'s supervisor with the sandbox applied between the
//! child's `clone` and `exec`; bounded capture of stdout and stderr (cap-and-kill, cap-and-truncate or
//! head-and-tail, every byte drained; stderr optionally merged into stdout in order); the
//! deadline; the per-call resource limits ([`limits`]: processes, memory, temp dir, open
//! files — LIM-1, LIM-2); cancellation through `toolscope`'s [`CallContext`]; root-lease
//! ticks; the final stop of the whole process tree; and which permission errors in a program's
//! output the sandbox caused ([`denials`], LIVE-4). RUN-6…RUN-10, CMD-2, CMD-5,
//! CMD-6, CMD-8, CMD-10; invariants 2, 4, 5, 6.
//!
//! **Refuses to know:** which tool is calling, argument whitelists, JSON, approvals. It never
//! runs anything unsandboxed: no provider → [`ExecError::Unsupported`], a provider that cannot
//! be applied → [`ExecError::SandboxUnavailable`].
//!
//! # Example
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use std::{path::Path, sync::Arc, time::Duration};
//! use exec::{Job, Limits, OnCap, SandboxSpec, WorkDir};
//!
//! let lease = Arc::new(fsguard::RootLease::acquire("/home/me/project")?);
//! let sandbox = SandboxSpec::for_run(
//!     Path::new("/usr/bin/wc"),
//!     &lease,
//!     &fsguard::RootLease::acquire("/tmp/run-1")?,
//! )?;
//! let job = Job {
//!     program: "/usr/bin/wc".into(),
//!     args: vec!["-l".into(), "data.csv".into()],
//!     workdir: WorkDir { lease, rel: fsguard::RelPath::root() },
//!     env: vec![("LC_ALL".into(), "C".into())],
//!     // Roots are granted on the leases' descriptors, never looked up by path again.
//!     sandbox,
//!     limits: Limits {
//!         timeout: Duration::from_secs(10),
//!         stdout_cap: 64 * 1024,
//!         stderr_cap: 64 * 1024,
//!         on_cap: OnCap::Kill,
//!     },
//!     merge_stderr: false,
//! };
//! let (ctx, _cancel) = toolscope::CallContext::standalone();
//! let outcome = exec::run(job, &ctx).await?;
//! println!("exit {:?}: {}", outcome.exit_code, String::from_utf8_lossy(&outcome.stdout));
//! # Ok(()) }
//! ```
//!
//! Dependencies: `linux-sandbox`'s ELF reader (the `object` crate) gives the files the loader of
//! a `run` program opens (so the sandbox need not grant all of `/usr`); `tokio` + `tokio-util`
//! for the async wait and cancellation; `rustix` for pipes and `poll`.
#![deny(missing_docs)]

pub mod blocking;
mod calltemp;
mod capture;
#[cfg(target_os = "linux")]
mod cgroup;
pub mod denials;
mod job;
mod kept_views;
#[cfg(target_os = "linux")]
mod libdeps;
pub mod limits;
#[cfg(target_os = "linux")]
pub mod linux;
// Compiled everywhere so the macOS seam is type-checked and tested on Linux; only the macOS
// runner calls it.
#[cfg_attr(
    not(target_os = "macos"),
    allow(
        dead_code,
        reason = "only macos_run calls it; built here to be checked"
    )
)]
mod macos;
#[cfg(target_os = "macos")]
mod macos_run;
mod open_error;
mod run;
mod spec;
#[cfg(target_os = "linux")]
pub mod sysset;
mod views;

#[cfg(target_os = "linux")]
mod backend;

pub use calltemp::{CallTemp, CallTempError};

/// For the fuzz targets (`fuzz/fuzz_targets/resource_limits.rs`): the cgroup text parsers, which
/// read `/proc/self/mountinfo`, `/proc/self/cgroup`, cgroup names anyone with write access to a
/// hierarchy can make, and counter files. Not an API.
#[cfg(target_os = "linux")]
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::cgroup::{counter_value, parse_cgroup_mounts, parse_name, parse_own_cgroups};
}
#[cfg(target_os = "linux")]
pub use cgroup::{describe as describe_limit_mechanisms, report_here as limits_report_here};
pub use job::{End, ExecError, Job, LEASE_TICK, Limits, OnCap, Outcome, WorkDir};
#[cfg(target_os = "linux")]
pub use kept_views::kept_here;
pub use kept_views::{KeptView, SessionViews};
pub use limits::{Enforcer, Limit, LimitHit, LimitsReport, LimitsStatus, ResourceLimits};
pub use open_error::open_error_code;
pub use run::{Tap, run, run_tapped};
pub use spec::{Access, Grant, Network, Program, SandboxSpec, SpecError, Staged};
pub use toolscope::CallContext;
pub use views::{CacheReport, CacheViews};
