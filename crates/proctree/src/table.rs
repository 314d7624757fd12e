//! A snapshot of the process table: who is alive, who is whose parent, which group each is in.
//!
//! The [`Tracker`](crate::Tracker) decides from such snapshots alone, so its rules are tested on
//! tables made by hand as well as on `/proc`.

use crate::identity::{ProcessId, ProcessState};

/// One row of a [`ProcessTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessEntry {
    /// Who this is.
    pub id: ProcessId,
    /// The PID of its parent as the kernel reports it now (after any re-parenting).
    pub ppid: u32,
    /// Its process-group id.
    pub pgid: u32,
    /// Whether it still runs code.
    pub state: ProcessState,
}

/// A snapshot of processes: rows in no particular order, at most one per PID.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessTable {
    entries: Vec<ProcessEntry>,
}

impl ProcessTable {
    /// A table from rows; a later row for the same PID replaces an earlier one.
    #[must_use]
    pub fn from_entries(entries: impl IntoIterator<Item = ProcessEntry>) -> Self {
        let mut by_pid = std::collections::BTreeMap::new();
        for e in entries {
            by_pid.insert(e.id.pid(), e);
        }
        Self {
            entries: by_pid.into_values().collect(),
        }
    }

    /// The rows, sorted by PID.
    #[must_use]
    pub fn entries(&self) -> &[ProcessEntry] {
        &self.entries
    }

    /// The row for `pid`, if the snapshot has one.
    #[must_use]
    pub fn get(&self, pid: u32) -> Option<&ProcessEntry> {
        self.entries
            .binary_search_by_key(&pid, |e| e.id.pid())
            .ok()
            .and_then(|i| self.entries.get(i))
    }

    /// Whether the snapshot shows exactly this process (PID *and* start time).
    #[must_use]
    pub fn contains(&self, id: ProcessId) -> bool {
        self.get(id.pid()).is_some_and(|e| e.id == id)
    }

    /// Reads every process in `/proc`. A process that exits while the directory is read is
    /// simply absent; one whose `stat` cannot be parsed is skipped (it cannot be identified, so it
    /// is never signalled).
    ///
    /// # Errors
    /// When `/proc` itself cannot be listed (not mounted, or hidden by a sandbox).
    #[cfg(target_os = "linux")]
    pub fn read() -> std::io::Result<Self> {
        let mut entries = Vec::with_capacity(512);
        let mut buf = Vec::with_capacity(512);
        for dirent in std::fs::read_dir("/proc")? {
            let Ok(dirent) = dirent else { continue };
            let name = dirent.file_name();
            let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(stat) = crate::linux::read_stat(pid, &mut buf) {
                entries.push(ProcessEntry {
                    id: ProcessId::new(stat.pid, stat.start_time),
                    ppid: stat.ppid,
                    pgid: stat.pgid,
                    state: stat.state,
                });
            }
        }
        entries.sort_by_key(|e| e.id.pid());
        Ok(Self { entries })
    }
}
