//! macOS: process identity from `proc_pidinfo(PROC_PIDTBSDINFO)` (libproc). Compiled only on
//! macOS; kept minimal so it is obviously correct without a Mac to build it on. The macOS stop
//! sequence (stop, rescan, kill with identity checks) uses the same [`Tracker`](crate::Tracker).

use crate::identity::ProcessId;

/// `struct proc_bsdinfo` from `<sys/proc_info.h>`, as `libc` declares it.
fn bsdinfo(pid: u32) -> Option<libc::proc_bsdinfo> {
    let pid = libc::c_int::try_from(pid).ok()?;
    let size = libc::c_int::try_from(std::mem::size_of::<libc::proc_bsdinfo>()).ok()?;
    // SAFETY: a zeroed plain-data struct is a valid value to pass for the kernel to fill.
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    // SAFETY: the buffer is exactly `size` bytes and lives across the call.
    let n =
        unsafe { libc::proc_pidinfo(pid, libc::PROC_PIDTBSDINFO, 0, (&raw mut info).cast(), size) };
    (n == size).then_some(info)
}

impl ProcessId {
    /// The identity of the live process `pid` now: its start time is
    /// `pbi_start_tvsec * 1_000_000 + pbi_start_tvusec`; `None` when there is no such process.
    #[must_use]
    pub fn of(pid: u32) -> Option<Self> {
        let info = bsdinfo(pid)?;
        let start = info
            .pbi_start_tvsec
            .checked_mul(1_000_000)?
            .checked_add(info.pbi_start_tvusec)?;
        Some(Self::new(pid, start))
    }
}
