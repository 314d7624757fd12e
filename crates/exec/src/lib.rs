//! The shared runner (not implemented yet).
//!
//! Will own: a platform-neutral `SandboxSpec` translated to `linux-sandbox` or `seatbelt`, a `Job`
//! (absolute program, args, cwd under a root lease, explicit environment, closed stdin, limits),
//! spawn, bounded capture (cap-and-kill or cap-and-truncate), deadline, cancellation, lease ticks
//! and `proctree` cleanup, all folded into one `Outcome`. Dropping the future stops the tree.
//! SPEC: RUN-6…RUN-10, CMD-2, CMD-5, CMD-10.
//!
//! Will refuse to know: which tool is calling, argument whitelists, JSON.
