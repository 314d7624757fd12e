//! Per-call resource limits (LIM-1, LIM-2): how many processes, how much memory (the whole
//! tree), how large the temp dir, how many open files — and how each was enforced.
//!
//! **Owns:** the limit values and their defaults, the report of which mechanism held each limit
//! ([`LimitsReport`]) and the name of a limit a call hit ([`LimitHit`]). The mechanisms live in
//! the platform code (Linux: module `cgroup` — cgroup v2 where a delegated subtree exists,
//! cgroup v1 `pids`/`memory` where the host may write them, rlimits otherwise; the temp dir's
//! tmpfs in `linux_sandbox`).
//!
//! **Refuses:** to weaken the sandbox for a limit. A limit that cannot be enforced here is
//! reported as such (`not enforced`), never faked; the sandbox itself is unaffected.
//!
//! # Defaults, and why
//! | limit | `command`, `run_command`, `background_command` | `run` |
//! |---|---|---|
//! | processes (threads count) | 1024 | 64 |
//! | memory, the whole tree | half the machine's RAM, at most 8 GiB | a quarter, 512 MiB … 2 GiB |
//! | temp dir (`HOME` and `TMPDIR`; the private `/dev/shm` is no larger) | a quarter of RAM, 256 MiB … 4 GiB | 2 GiB per file |
//! | open files per process | 65 536 | 1024 |
//!
//! 1024 processes is four times what `make -j` on a 64-core machine runs, and a fork bomb
//! stops there. Half the RAM leaves the user's desktop and the host alive when a call
//! misbehaves; 8 GiB is more than any test suite an agent runs needs. The temp dir is memory
//! (a tmpfs), so it is a part of the memory limit, not an addition. 65 536 files is what Java
//! build tools and file watchers ask for. A host changes any of them with
//! [`ResourceLimits`]'s fields (`SandboxSpec::resources`), down to the minimums
//! ([`MIN_MEMORY`], [`MIN_TEMP_DIR`], [`MIN_OPEN_FILES`]) below which a call would fail in a way
//! that names neither the limit nor the fix; a call with less is refused before anything starts.

use std::fmt;
use std::num::{NonZeroU32, NonZeroU64};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// The limits of one call. Zero is not a value any limit can take (the types say so): a call
/// that may not start its own process cannot run at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceLimits {
    /// Processes and threads alive at once in the call's tree, its first process included.
    pub processes: NonZeroU32,
    /// Bytes of memory the whole tree may use (resident memory, page cache it dirties, the
    /// temp dir's tmpfs, kernel memory charged to it).
    pub memory: NonZeroU64,
    /// Bytes the call's temp dir (its `HOME` and `TMPDIR`) may hold.
    pub temp_dir: NonZeroU64,
    /// Descriptors each process may hold open (`RLIMIT_NOFILE`, soft and hard).
    pub open_files: NonZeroU32,
}

/// The host's environment variable that changes the shell-kind defaults (module docs).
pub const LIMITS_ENV: &str = "AGENT_EXEC_LIMITS";

/// The least memory a call may be given: below it the first `execve` itself fails for want of
/// memory, and the command reports exit 127 ("not found") rather than a limit it hit.
pub const MIN_MEMORY: u64 = 16 * MIB;
/// The least temp dir a call may be given (a tmpfs smaller than this holds no useful file).
pub const MIN_TEMP_DIR: u64 = MIB;
/// The fewest open files a call may be given: the sandbox's own set-up in the first process
/// opens descriptors after the limit is set, and a shell needs its three, its pipes and
/// redirections besides.
pub const MIN_OPEN_FILES: u32 = 32;

impl ResourceLimits {
    /// The defaults of a shell-kind call (`command`, `run_command`, `background_command`): see
    /// the module documentation, changed by [`LIMITS_ENV`] where the host set it (a malformed
    /// value leaves the defaults here; [`host_overrides`] refuses the call).
    pub fn for_command() -> ResourceLimits {
        match host_overrides() {
            Ok(Some(limits)) => limits,
            _ => ResourceLimits::builtin_command(),
        }
    }

    /// The documented shell-kind defaults, before [`LIMITS_ENV`].
    pub fn builtin_command() -> ResourceLimits {
        let ram = total_ram();
        ResourceLimits {
            processes: nz32(1024),
            memory: nz64((ram / 2).clamp(256 * MIB, 8 * GIB)),
            temp_dir: nz64((ram / 4).clamp(256 * MIB, 4 * GIB)),
            open_files: nz32(65_536),
        }
    }

    /// `base` with the overrides of `text` (`name=value,…`; module docs) applied.
    ///
    /// # Errors
    /// [`LimitsError`] naming the first entry that is not `processes`, `memory`, `tempDir` or
    /// `openFiles` with a positive value in range.
    pub fn with_overrides(mut self, text: &str) -> Result<ResourceLimits, LimitsError> {
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = |why: &str| LimitsError(format!("{entry:?}: {why}"));
            let (name, value) = entry
                .split_once('=')
                .ok_or_else(|| bad("write name=value"))?;
            let (name, value) = (name.trim(), value.trim());
            match name {
                "processes" => self.processes = parse_count(value).map_err(|w| bad(&w))?,
                "openFiles" => self.open_files = parse_count(value).map_err(|w| bad(&w))?,
                "memory" => self.memory = parse_bytes(value).map_err(|w| bad(&w))?,
                "tempDir" => self.temp_dir = parse_bytes(value).map_err(|w| bad(&w))?,
                _ => {
                    return Err(bad(
                        "the names are processes, memory, tempDir and openFiles",
                    ));
                }
            }
            self.check().map_err(|w| bad(&w))?;
        }
        Ok(self)
    }

    /// Whether every limit is at least its minimum ([`MIN_MEMORY`], [`MIN_TEMP_DIR`],
    /// [`MIN_OPEN_FILES`]; one process is enough for a command that starts none): a smaller
    /// limit would make the call fail in a way that names neither the limit nor the fix.
    ///
    /// # Errors
    /// A sentence naming the first limit below its minimum and the minimum.
    pub fn check(&self) -> Result<(), String> {
        if self.memory.get() < MIN_MEMORY {
            return Err(format!(
                "a memory of {} is below the {} a call needs to start its first program",
                Bytes(self.memory.get()),
                Bytes(MIN_MEMORY)
            ));
        }
        if self.temp_dir.get() < MIN_TEMP_DIR {
            return Err(format!(
                "a tempDir of {} is below the minimum {}",
                Bytes(self.temp_dir.get()),
                Bytes(MIN_TEMP_DIR)
            ));
        }
        if self.open_files.get() < MIN_OPEN_FILES {
            return Err(format!(
                "openFiles={} is below the {MIN_OPEN_FILES} the sandbox's set-up and a shell need",
                self.open_files
            ));
        }
        Ok(())
    }

    /// The overrides text that gives these limits from any base: what
    /// [`with_overrides`](ResourceLimits::with_overrides) reads.
    pub fn to_overrides(&self) -> String {
        format!(
            "processes={},memory={},tempDir={},openFiles={}",
            self.processes, self.memory, self.temp_dir, self.open_files
        )
    }

    /// The stricter fixed limits of `run` (one program: awk, sort, wc, diff on the mirror):
    /// memory a quarter of the RAM, 512 MiB … 2 GiB (`sort` of a large file sizes its buffer
    /// from `RLIMIT_DATA`, set to this, and spills the rest into its temp dir), temp files of at
    /// most 2 GiB each.
    pub fn for_run() -> ResourceLimits {
        ResourceLimits {
            processes: nz32(64),
            memory: nz64((total_ram() / 4).clamp(512 * MIB, 2 * GIB)),
            temp_dir: nz64(2 * GIB),
            open_files: nz32(1024),
        }
    }

    /// The value of one limit, in its unit (a count or bytes).
    pub fn value(&self, limit: Limit) -> u64 {
        match limit {
            Limit::Processes => u64::from(self.processes.get()),
            Limit::Memory => self.memory.get(),
            Limit::TempDir => self.temp_dir.get(),
            Limit::OpenFiles => u64::from(self.open_files.get()),
        }
    }
}

/// A [`LIMITS_ENV`] value that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{LIMITS_ENV} is malformed at {0}; set it like \"processes=512,memory=2GiB,tempDir=1GiB,openFiles=4096\" \
     (any subset) or unset it"
)]
pub struct LimitsError(String);

/// The shell-kind limits as the host's [`LIMITS_ENV`] sets them: `Ok(None)` when it is unset,
/// read once per process.
///
/// # Errors
/// The parse error of a malformed value (the runner refuses shell-kind calls with it).
pub fn host_overrides() -> Result<Option<ResourceLimits>, LimitsError> {
    static READ: std::sync::OnceLock<Result<Option<ResourceLimits>, LimitsError>> =
        std::sync::OnceLock::new();
    READ.get_or_init(|| match std::env::var(LIMITS_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(LimitsError("a value that is not UTF-8".to_owned()))
        }
        Ok(text) => ResourceLimits::builtin_command()
            .with_overrides(&text)
            .map(Some),
    })
    .clone()
}

fn parse_count(value: &str) -> Result<NonZeroU32, String> {
    value
        .parse::<NonZeroU32>()
        .map_err(|_| format!("{value:?} is not a whole number from 1 to {}", u32::MAX))
}

fn parse_bytes(value: &str) -> Result<NonZeroU64, String> {
    let digits = value.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = value[digits.len()..].trim_start();
    let shift = match unit {
        "" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        "T" | "TiB" => 40,
        _ => return Err(format!("unit {unit:?}: use bytes, KiB, MiB, GiB or TiB")),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("{value:?} is not a size (e.g. 2GiB)"))?;
    let bytes = n
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{value:?} is too large"))?;
    NonZeroU64::new(bytes).ok_or_else(|| "a limit of 0 would let nothing run".to_owned())
}

fn nz32(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

fn nz64(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap_or(NonZeroU64::MIN)
}

/// The machine's RAM in bytes (0 if the kernel does not say).
fn total_ram() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: an all-zero sysinfo is a valid value of this plain C struct, filled by the
        // kernel.
        let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
        // SAFETY: a writable sysinfo.
        if unsafe { libc::sysinfo(&mut info) } == 0 {
            // `totalram` is a C `unsigned long`: 32 bits on some targets.
            #[allow(clippy::useless_conversion)]
            return u64::from(info.totalram).saturating_mul(u64::from(info.mem_unit.max(1)));
        }
        0
    }
    #[cfg(not(target_os = "linux"))]
    {
        8 * GIB
    }
}

/// One of the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// [`ResourceLimits::processes`].
    Processes,
    /// [`ResourceLimits::memory`].
    Memory,
    /// [`ResourceLimits::temp_dir`].
    TempDir,
    /// [`ResourceLimits::open_files`].
    OpenFiles,
}

impl Limit {
    /// The name results use: `processes`, `memory`, `tempDir`, `openFiles`.
    pub fn name(self) -> &'static str {
        match self {
            Limit::Processes => "processes",
            Limit::Memory => "memory",
            Limit::TempDir => "tempDir",
            Limit::OpenFiles => "openFiles",
        }
    }

    fn is_bytes(self) -> bool {
        matches!(self, Limit::Memory | Limit::TempDir)
    }
}

/// A limit a call hit, with the value it had: ends the run with
/// [`End::LimitExceeded`](crate::End::LimitExceeded) (LIM-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitHit {
    /// Which limit.
    pub limit: Limit,
    /// Its value (a count or bytes).
    pub value: u64,
}

impl LimitHit {
    /// The sentence results carry: what was hit, that the tree was stopped, what to do, and
    /// the stable code.
    pub fn explain(&self) -> String {
        format!(
            "the command hit its {} limit ({self}), so everything it started was stopped; {} \
             ({})",
            self.limit.name(),
            self.advice(),
            toolscope::ErrorCode::ExecLimitExceeded.as_str()
        )
    }

    /// What the agent should do about it, in one sentence.
    pub fn advice(&self) -> &'static str {
        match self.limit {
            Limit::Processes => {
                "start fewer processes at once (a lower -j, fewer workers) or ask the user to \
                 raise the limit"
            }
            Limit::Memory => {
                "use less memory (smaller inputs or batches, fewer parallel jobs) or ask the user \
                 to raise the limit"
            }
            Limit::TempDir => {
                "write large files into the workspace instead of HOME or TMPDIR, or ask the user \
                 to raise the limit"
            }
            Limit::OpenFiles => "close files you no longer need or open fewer at once",
        }
    }
}

impl fmt::Display for LimitHit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.limit.name())?;
        if self.limit.is_bytes() {
            write!(f, "{}", Bytes(self.value))
        } else {
            write!(f, "{}", self.value)
        }
    }
}

/// Bytes as people write them: `8 GiB`, `512 MiB`, `1000 bytes`.
struct Bytes(u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n >= GIB {
            let tenths = n.saturating_mul(10) / GIB;
            if n % GIB == 0 {
                write!(f, "{} GiB", n / GIB)
            } else {
                write!(f, "{}.{} GiB", tenths / 10, tenths % 10)
            }
        } else if n >= MIB {
            write!(f, "{} MiB", n / MIB)
        } else {
            write!(f, "{n} bytes")
        }
    }
}

/// How one limit was enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Enforcer {
    /// A cgroup v2 child of a delegated subtree: the whole tree, and a hit is seen.
    CgroupV2,
    /// A cgroup v1 `pids` or `memory` controller (a root host): the whole tree, and a hit is
    /// seen.
    CgroupV1,
    /// A tmpfs of that size (the temp dir).
    Tmpfs,
    /// `RLIMIT_NPROC` counted inside the call's own user namespace: the whole tree, but a hit
    /// cannot be seen from outside (forks fail with `EAGAIN`).
    UserNamespaceRlimit,
    /// A per-process rlimit (`RLIMIT_DATA` for memory, `RLIMIT_FSIZE` for the temp dir's
    /// files, `RLIMIT_NOFILE`): each process, not the tree.
    ProcessRlimit,
    /// Nothing on this machine could enforce it.
    NotEnforced,
}

impl Enforcer {
    fn name(self, limit: Limit) -> &'static str {
        match self {
            // RLIMIT_DATA counts private memory only: shared mappings, memfd and SysV shm are
            // not in it.
            Enforcer::ProcessRlimit if limit == Limit::Memory => {
                "rlimit per process, private memory only"
            }
            Enforcer::CgroupV2 => "cgroup v2",
            Enforcer::CgroupV1 => "cgroup v1",
            Enforcer::Tmpfs => "tmpfs",
            Enforcer::UserNamespaceRlimit => "rlimit in the call's user namespace",
            Enforcer::ProcessRlimit => "rlimit per process",
            Enforcer::NotEnforced => "not enforced",
        }
    }

    /// Whether this holds the limit as documented (the whole tree; the temp dir as a whole;
    /// open files are a per-process limit by definition).
    fn is_full(self, limit: Limit) -> bool {
        match self {
            Enforcer::CgroupV2 | Enforcer::CgroupV1 | Enforcer::Tmpfs => true,
            Enforcer::UserNamespaceRlimit => limit == Limit::Processes,
            Enforcer::ProcessRlimit => limit == Limit::OpenFiles,
            Enforcer::NotEnforced => false,
        }
    }
}

/// Which mechanism held each limit of one call (like the sandbox's enforcement report).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitsReport {
    /// The values.
    pub limits: ResourceLimits,
    /// How the process limit held.
    pub processes: Enforcer,
    /// How the memory limit held.
    pub memory: Enforcer,
    /// How the temp dir's size held.
    pub temp_dir: Enforcer,
    /// How the open-files limit held.
    pub open_files: Enforcer,
}

/// Fully, partially or not enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitsStatus {
    /// Every limit held as documented.
    Fully,
    /// Some held per process only, or not at all.
    Partially,
    /// None held.
    Not,
}

impl LimitsReport {
    fn each(&self) -> [(Limit, Enforcer); 4] {
        [
            (Limit::Processes, self.processes),
            (Limit::Memory, self.memory),
            (Limit::TempDir, self.temp_dir),
            (Limit::OpenFiles, self.open_files),
        ]
    }

    /// Fully, partially or not enforced.
    pub fn status(&self) -> LimitsStatus {
        let each = self.each();
        if each.iter().all(|(l, e)| e.is_full(*l)) {
            LimitsStatus::Fully
        } else if each.iter().all(|(_, e)| *e == Enforcer::NotEnforced) {
            LimitsStatus::Not
        } else {
            LimitsStatus::Partially
        }
    }
}

impl fmt::Display for LimitsReport {
    /// `limits fully enforced (processes 1024: cgroup v1; memory 8 GiB: cgroup v1; …)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = match self.status() {
            LimitsStatus::Fully => "fully",
            LimitsStatus::Partially => "partially",
            LimitsStatus::Not => "not",
        };
        write!(f, "limits {status} enforced (")?;
        for (i, (limit, enforcer)) in self.each().into_iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            let hit = LimitHit {
                limit,
                value: self.limits.value(limit),
            };
            write!(f, "{}", hit.to_string().replacen(": ", " ", 1))?;
            write!(f, ": {}", enforcer.name(limit))?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hit_names_the_limit_and_its_value_in_units_people_read() {
        let hit = |limit, value| LimitHit { limit, value }.to_string();
        assert_eq!(hit(Limit::Memory, 8 * GIB), "memory: 8 GiB");
        assert_eq!(hit(Limit::Memory, 3 * GIB / 2), "memory: 1.5 GiB");
        assert_eq!(hit(Limit::TempDir, 256 * MIB), "tempDir: 256 MiB");
        assert_eq!(hit(Limit::Processes, 1024), "processes: 1024");
        assert_eq!(hit(Limit::OpenFiles, 65_536), "openFiles: 65536");
    }

    #[test]
    fn defaults_stay_within_their_documented_bounds() {
        let c = ResourceLimits::for_command();
        assert_eq!(c.processes.get(), 1024);
        assert!(c.memory.get() <= 8 * GIB && c.memory.get() >= 256 * MIB);
        assert!(c.temp_dir.get() <= 4 * GIB && c.temp_dir.get() >= 256 * MIB);
        let r = ResourceLimits::for_run();
        assert!(r.processes < c.processes && r.open_files < c.open_files);
    }

    #[test]
    fn overrides_change_only_what_they_name_and_bad_ones_say_what_to_write() {
        let base = ResourceLimits::for_run();
        let l = base
            .with_overrides("processes=512, memory=2GiB,tempDir=100M")
            .unwrap();
        assert_eq!(l.processes.get(), 512);
        assert_eq!(l.memory.get(), 2 * GIB);
        assert_eq!(l.temp_dir.get(), 100 * MIB);
        assert_eq!(l.open_files, base.open_files);
        assert_eq!(base.with_overrides("").unwrap(), base);
        for bad in [
            "processes",
            "processes=0",
            "memory=0",
            "memory=2PB",
            "memory=99999999999T",
            "cpu=2",
            "openFiles=-1",
            "processes=1.5",
            "memory=1",
            "memory=15MiB",
            "tempDir=4KiB",
            "openFiles=8",
        ] {
            let e = base.with_overrides(bad).unwrap_err().to_string();
            assert!(
                e.contains(LIMITS_ENV) && e.contains("processes=512"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn a_limit_below_its_minimum_is_refused_with_the_minimum() {
        let base = ResourceLimits::builtin_command();
        for (text, says) in [
            ("memory=1", "a memory of 1 bytes is below the 16 MiB"),
            (
                "tempDir=1000",
                "a tempDir of 1000 bytes is below the minimum 1 MiB",
            ),
            ("openFiles=31", "openFiles=31 is below the 32"),
        ] {
            let e = base.with_overrides(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
        let least = format!(
            "processes=1,memory={MIN_MEMORY},tempDir={MIN_TEMP_DIR},openFiles={MIN_OPEN_FILES}"
        );
        assert!(base.with_overrides(&least).is_ok());
    }

    proptest::proptest! {
        #[test]
        fn overrides_round_trip(
            p in 1u32.., m in MIN_MEMORY.., t in MIN_TEMP_DIR.., f in MIN_OPEN_FILES..,
            base in proptest::sample::select(vec![ResourceLimits::for_run(), ResourceLimits::builtin_command()])
        ) {
            let want = ResourceLimits {
                processes: nz32(p),
                memory: nz64(m),
                temp_dir: nz64(t),
                open_files: nz32(f),
            };
            proptest::prop_assert_eq!(base.with_overrides(&want.to_overrides()).unwrap(), want);
        }

        #[test]
        fn overrides_never_panic(text in ".{0,64}") {
            let _ = ResourceLimits::for_run().with_overrides(&text);
        }
    }

    #[test]
    fn a_report_is_full_only_when_the_tree_limits_hold_for_the_tree() {
        let mut report = LimitsReport {
            limits: ResourceLimits {
                memory: nz64(GIB),
                ..ResourceLimits::for_run()
            },
            processes: Enforcer::CgroupV1,
            memory: Enforcer::CgroupV1,
            temp_dir: Enforcer::Tmpfs,
            open_files: Enforcer::ProcessRlimit,
        };
        assert_eq!(report.status(), LimitsStatus::Fully);
        report.memory = Enforcer::ProcessRlimit;
        assert_eq!(report.status(), LimitsStatus::Partially);
        assert!(
            report
                .to_string()
                .contains("memory 1 GiB: rlimit per process, private memory only"),
            "{report}"
        );
        report.processes = Enforcer::UserNamespaceRlimit;
        report.temp_dir = Enforcer::ProcessRlimit;
        assert_eq!(report.status(), LimitsStatus::Partially);
    }
}
