//! The host side: [`Command`] builds and validates what to run, [`ProcessTree`] is the running
//! command under its supervisor, and [`ProcessTree::stop`] ends all of it (CMD-6, CMD-7,
//! RUN-10; invariants 3 and 4).

use std::collections::HashSet;
use std::ffi::{CString, OsStr, OsString};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::calldir::{CallDir, TreeHold};
use super::scanner::{self, Shared};
use super::supervisor::{self, Cwd, Plan, PreExec, Stacks};
use super::sys::{self, Pin};
use super::walk::{Adopt, Seen, Walk};
use super::wire::{Message, RECORD, Stage, WireError};
use crate::identity::{ProcessId, ProcessState};
use crate::table::ProcessTable;
use crate::tracker::Tracker;

/// How the supervisor keeps the command's tree together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// The supervisor is a child subreaper: orphans re-parent to it, and it kills them all
    /// before it exits, also when the host dies.
    Subreaper,
    /// The supervisor is PID 1 of a new PID namespace (inside a new user namespace when the
    /// host is not root), and a subreaper too; when it exits the kernel kills everything left
    /// in the namespace. Chosen when the kernel allows it.
    PidNamespace,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Subreaper => "subreaper",
            Mode::PidNamespace => "pid-namespace",
        })
    }
}

/// Why a command was not started. Nothing runs when one of these is returned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// The program was not given as an absolute path.
    #[error(
        "program {program:?} is not an absolute path; give the full path of the binary \
         (programs are never looked up on PATH)"
    )]
    ProgramNotAbsolute {
        /// What was given.
        program: PathBuf,
    },
    /// A program path, argument, environment entry or directory contained a NUL byte.
    #[error("{what} contains a NUL byte, which no program can receive; remove it")]
    NulByte {
        /// Which input.
        what: &'static str,
    },
    /// An environment variable name was empty or contained `=`.
    #[error("environment variable name {name:?} is empty or contains '='; use a plain name")]
    BadEnvName {
        /// The name given.
        name: OsString,
    },
    /// The requested [`Mode`] cannot be set up on this system.
    #[error(
        "process-tree mode {mode} is not available here (the kernel refused the namespaces); \
         leave the mode unset to use the best available one"
    )]
    ModeUnavailable {
        /// The mode asked for.
        mode: Mode,
    },
    /// A descriptor passed to [`Command::keep_fd`] has a number the supervisor needs itself.
    #[error(
        "descriptor {fd} cannot be kept for the pre-exec hook: numbers 0-4 are the command's \
         plumbing; duplicate it above 9 (F_DUPFD_CLOEXEC) first"
    )]
    KeepFdTooLow {
        /// The descriptor number.
        fd: RawFd,
    },
    /// The working directory could not be entered.
    #[error("cannot enter the working directory: {source}; pass an existing directory")]
    CurrentDir {
        /// The error from `chdir`/`fchdir`.
        source: io::Error,
    },
    /// The caller's pre-exec hook (the sandbox) failed; the program did not run.
    #[error("the pre-exec hook failed with code {code}; the program was not started")]
    PreExec {
        /// The code the hook returned.
        code: i32,
    },
    /// `execve` failed.
    #[error("cannot execute the program: {source}; check the path and its permissions")]
    Exec {
        /// The error from `execve`.
        source: io::Error,
    },
    /// Setting up the supervisor or the command's process failed.
    #[error("cannot set up the supervisor ({what}): {source}")]
    Setup {
        /// The step that failed.
        what: &'static str,
        /// The system error.
        source: io::Error,
    },
}

/// Why [`ProcessTree::stop`] could not complete.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StopError {
    /// The process table could not be read (is `/proc` mounted and visible?).
    #[error("cannot read the process table: {source}; /proc must be mounted and readable")]
    ProcessTable {
        /// The error.
        source: io::Error,
    },
    /// A system call failed while stopping.
    #[error("stopping failed ({what}): {source}")]
    Io {
        /// The step that failed.
        what: &'static str,
        /// The error.
        source: io::Error,
    },
}

/// What [`ProcessTree::stop`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StopReport {
    /// The mode the tree ran in.
    pub mode: Mode,
    /// Tracked descendants other than the main process that were alive and that we stopped
    /// (zombies and processes that had already exited are not counted). CMD-5/CMD-6's
    /// `descendantsStopped`.
    pub descendants_stopped: usize,
    /// Whether the main process was still running and was stopped by us.
    pub main_stopped: bool,
    /// The main process's wait status, if the supervisor reaped it.
    pub main_status: Option<ExitStatus>,
    /// Processes we were not permitted to signal (e.g. a setuid program in the tree).
    pub refused: Vec<ProcessId>,
    /// From the stop request until the supervisor had reaped everything and exited.
    pub elapsed: Duration,
}

/// What to run and how: the builder for a [`ProcessTree`].
///
/// The environment is exactly what [`env`](Self::env) adds (empty means empty); stdin, stdout
/// and stderr default to `/dev/null`; the working directory defaults to the host's.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut tree = proctree::Command::new("/bin/sh")
///     .args(["-c", "sleep 100 & sleep 100 & wait"])
///     .env("PATH", "/usr/bin:/bin")
///     .spawn()?;
/// let report = tree.stop()?;
/// assert_eq!(report.descendants_stopped, 2);
/// # Ok(()) }
/// ```
pub struct Command {
    program: PathBuf,
    argv: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    cwd: CwdSpec,
    stdin: Option<OwnedFd>,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
    pre_exec: Option<PreExec>,
    keep_fds: Vec<RawFd>,
    mode: Option<Mode>,
    scan_interval: Option<Duration>,
    call_dirs: Vec<Arc<CallDir>>,
    link_broker: Option<OwnedFd>,
}

enum CwdSpec {
    Inherit,
    Fd(OwnedFd),
    Path(PathBuf),
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Command")
            .field("program", &self.program)
            .field("argv", &self.argv)
            .field("env_len", &self.env.len())
            .field("pre_exec", &self.pre_exec.is_some())
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// The default interval of the background scan that records descendants while the command
/// runs (CMD-7: parent links observed while the command runs, plus a final scan at stop).
pub const DEFAULT_SCAN_INTERVAL: Duration = Duration::from_millis(100);

impl Command {
    /// A command running `program` (an absolute path; never looked up on `PATH`, RUN-6) with
    /// `argv[0]` set to that path.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        let program = program.into();
        Self {
            argv: vec![program.clone().into_os_string()],
            program,
            env: Vec::new(),
            cwd: CwdSpec::Inherit,
            stdin: None,
            stdout: None,
            stderr: None,
            pre_exec: None,
            keep_fds: Vec::new(),
            call_dirs: Vec::new(),
            link_broker: None,
            mode: None,
            scan_interval: Some(DEFAULT_SCAN_INTERVAL),
        }
    }

    /// Sets `argv[0]`.
    #[must_use]
    pub fn arg0(mut self, arg0: impl AsRef<OsStr>) -> Self {
        if let Some(first) = self.argv.first_mut() {
            *first = arg0.as_ref().to_owned();
        }
        self
    }

    /// Appends arguments after `argv[0]`.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.argv
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Adds one environment variable. The environment starts empty and holds exactly what is
    /// added here (RUN-8, CMD-13).
    #[must_use]
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Runs in the directory an open descriptor names (no path is re-resolved; CMD-8).
    #[must_use]
    pub fn current_dir_fd(mut self, dir: OwnedFd) -> Self {
        self.cwd = CwdSpec::Fd(dir);
        self
    }

    /// Runs in the directory at `path`.
    #[must_use]
    pub fn current_dir(mut self, path: impl Into<PathBuf>) -> Self {
        self.cwd = CwdSpec::Path(path.into());
        self
    }

    /// Standard input (for EOF: the read end of a closed pipe). Default `/dev/null`.
    #[must_use]
    pub fn stdin(mut self, fd: OwnedFd) -> Self {
        self.stdin = Some(fd);
        self
    }

    /// Standard output, e.g. the write end of a pipe the caller drains. Default `/dev/null`.
    /// The supervisor closes its copy once the command runs, so EOF means every process
    /// holding it has exited or closed it.
    #[must_use]
    pub fn stdout(mut self, fd: OwnedFd) -> Self {
        self.stdout = Some(fd);
        self
    }

    /// Standard error, as [`stdout`](Self::stdout).
    #[must_use]
    pub fn stderr(mut self, fd: OwnedFd) -> Self {
        self.stderr = Some(fd);
        self
    }

    /// Forces a [`Mode`]; unset, the PID namespace is used when the kernel allows it and the
    /// subreaper otherwise ([`ProcessTree::mode`] tells which ran).
    #[must_use]
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// How often descendants are recorded while the command runs; `None` records only at
    /// [`ProcessTree::scan`] and at stop (complete on Linux all the same: the supervisor keeps
    /// every orphan below it).
    #[must_use]
    pub fn scan_interval(mut self, interval: Option<Duration>) -> Self {
        self.scan_interval = interval;
        self
    }

    /// Keeps descriptor `fd` open, at the same number, in the command's process until the
    /// [`pre_exec`](Self::pre_exec) hook has run — e.g. the Landlock ruleset the hook applies.
    /// The supervisor closes every other inherited descriptor. Mark it close-on-exec so the
    /// program itself does not inherit it. It must be above 4 (the numbers the supervisor uses
    /// for its own plumbing) and stay open until [`spawn`](Self::spawn) returns.
    #[must_use]
    pub fn keep_fd(mut self, fd: BorrowedFd<'_>) -> Self {
        self.keep_fds.push(fd.as_raw_fd());
        self
    }

    /// Has the supervisor remove `dir` if the host dies while the command runs — after it has
    /// killed and reaped the whole tree. Directories in scope of a
    /// [`remove_if_host_dies`](crate::remove_if_host_dies) future being polled are added
    /// too; at most four in all (the rest are left to the host and to
    /// [`sweep_orphans`](crate::sweep_orphans)).
    #[must_use]
    pub fn remove_if_host_dies(mut self, dir: Arc<CallDir>) -> Self {
        self.call_dirs.push(dir);
        self
    }

    /// Makes the supervisor the command's hard-link broker (LIVE-2): `channel` is one
    /// end of a unix socket pair whose other end the [`pre_exec`](Self::pre_exec) hook holds.
    /// Before `execve` the hook sends over it, in one message with `SCM_RIGHTS`, a seccomp
    /// listener (`SECCOMP_FILTER_FLAG_NEW_LISTENER`, for a filter that returns
    /// `SECCOMP_RET_USER_NOTIF` for `link` and `linkat`) and an `O_PATH` descriptor of the
    /// command's private `/dev/shm` (a tmpfs). The supervisor then answers each such call: it
    /// links `/dev/shm/<name>` to `/dev/shm/<name>` itself, both single names inside that
    /// directory, and refuses everything else with `EPERM`. The program never holds the
    /// listener. A hook that sends nothing leaves the broker off.
    #[must_use]
    pub fn link_broker(mut self, channel: OwnedFd) -> Self {
        self.link_broker = Some(channel);
        self
    }

    /// A hook run in the command's process after fork and before `execve`, e.g. to apply a
    /// Landlock ruleset and a seccomp filter. `Err(code)` aborts the spawn with
    /// [`SpawnError::PreExec`].
    ///
    /// # Safety
    /// The hook runs in a posix_spawn-style child (`CLONE_VM | CLONE_VFORK`) that shares the
    /// host's memory until `execve`: it must be async-signal-safe (no allocation, no locks, no
    /// `std::fs`, no panics), as for `std::os::unix::process::CommandExt::pre_exec`, and it
    /// should not touch thread-local storage — glibc's system-call wrappers write `errno`
    /// there on failure; raw system calls (the `syscalls` crate) do not.
    #[must_use]
    pub unsafe fn pre_exec(
        mut self,
        hook: impl Fn() -> Result<(), i32> + Send + Sync + 'static,
    ) -> Self {
        self.pre_exec = Some(Box::new(hook));
        self
    }

    /// Validates everything, then starts the supervisor and the command under it, and returns
    /// once the program was executed (or failed to be).
    ///
    /// # Errors
    /// Invalid input (nothing runs), an unavailable forced mode, or a failure to set up, enter
    /// the directory, run the hook or execute the program.
    pub fn spawn(self) -> Result<ProcessTree, SpawnError> {
        // Validate, then act: every check that can fail on input happens before the fork.
        if !self.program.is_absolute() {
            return Err(SpawnError::ProgramNotAbsolute {
                program: self.program,
            });
        }
        let cstr =
            |s: &OsStr, what| CString::new(s.as_bytes()).map_err(|_| SpawnError::NulByte { what });
        let program = cstr(self.program.as_os_str(), "the program path")?;
        let argv = self
            .argv
            .iter()
            .map(|a| cstr(a, "an argument"))
            .collect::<Result<Vec<_>, _>>()?;
        let mut envp = Vec::with_capacity(self.env.len());
        for (k, v) in &self.env {
            if k.is_empty() || k.as_bytes().contains(&b'=') {
                return Err(SpawnError::BadEnvName { name: k.clone() });
            }
            let mut kv = k.clone();
            kv.push("=");
            kv.push(v);
            envp.push(cstr(&kv, "an environment variable")?);
        }
        let cwd = match self.cwd {
            CwdSpec::Inherit => Cwd::Inherit,
            CwdSpec::Fd(fd) => Cwd::Fd(fd),
            CwdSpec::Path(p) => Cwd::Path(cstr(p.as_os_str(), "the working directory")?),
        };
        let mut keep_fds = self.keep_fds;
        keep_fds.sort_unstable();
        keep_fds.dedup();
        if let Some(&fd) = keep_fds.iter().find(|&&fd| fd <= supervisor::CWD_FD) {
            return Err(SpawnError::KeepFdTooLow { fd });
        }
        // The call directories' parents, above the supervisor's fixed numbers (its tidy
        // moves its plumbing onto 0-4) and close-on-exec (the program never sees them).
        let mut call_dirs = Vec::new();
        // Counted from before the clone until the supervisor is reaped (the tree's drop, or
        // the end of a failed spawn): a signal handler leaves these to the supervisor.
        let mut holds = Vec::new();
        let mut dirs = self.call_dirs;
        dirs.extend(super::calldir::in_scope());
        for dir in dirs.iter().take(supervisor::MAX_CALL_DIRS) {
            let (parent, name, id) = dir.parts();
            // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a descriptor the directory keeps open.
            let moved = unsafe {
                libc::fcntl(
                    parent.as_raw_fd(),
                    libc::F_DUPFD_CLOEXEC,
                    supervisor::CWD_FD + 1,
                )
            };
            if moved < 0 {
                return Err(SpawnError::Setup {
                    what: "hold a call directory",
                    source: io::Error::last_os_error(),
                });
            }
            // SAFETY: a fresh descriptor nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(moved) };
            call_dirs.push((fd, name.clone(), id));
            holds.push(TreeHold::new(dir));
        }
        // The broker's channel, like the call directories: above the fixed numbers,
        // close-on-exec.
        let link_broker = match self.link_broker {
            None => None,
            Some(channel) => {
                // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a descriptor we own.
                let moved = unsafe {
                    libc::fcntl(
                        channel.as_raw_fd(),
                        libc::F_DUPFD_CLOEXEC,
                        supervisor::CWD_FD + 1,
                    )
                };
                if moved < 0 {
                    return Err(SpawnError::Setup {
                        what: "hold the link broker's channel",
                        source: io::Error::last_os_error(),
                    });
                }
                // SAFETY: a fresh descriptor nothing else owns.
                Some(unsafe { OwnedFd::from_raw_fd(moved) })
            }
        };
        let mut survive_fds = keep_fds.clone();
        survive_fds.extend(call_dirs.iter().map(|(fd, _, _)| fd.as_raw_fd()));
        survive_fds.extend(link_broker.as_ref().map(|fd| fd.as_raw_fd()));
        survive_fds.sort_unstable();
        survive_fds.dedup();
        let (mode, flags, id_maps) = choose_mode(self.mode)?;
        let null = || -> Result<OwnedFd, SpawnError> {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")
                .map(OwnedFd::from)
                .map_err(|source| SpawnError::Setup {
                    what: "open /dev/null",
                    source,
                })
        };
        let stacks = Stacks::new().map_err(|source| SpawnError::Setup {
            what: "map the supervisor's stacks",
            source,
        })?;
        let mut plan = Box::new(Plan {
            program,
            argv,
            envp,
            argv_ptrs: Vec::new(),
            envp_ptrs: Vec::new(),
            cwd,
            stdin: match self.stdin {
                Some(fd) => fd,
                None => null()?,
            },
            stdout: match self.stdout {
                Some(fd) => fd,
                None => null()?,
            },
            stderr: match self.stderr {
                Some(fd) => fd,
                None => null()?,
            },
            pre_exec: self.pre_exec,
            keep_fds,
            call_dirs,
            survive_fds,
            id_maps,
            main_stack: stacks.main_top(),
            link_broker,
        });
        plan.seal();
        let (host_end, sup_end) = socketpair().map_err(|source| SpawnError::Setup {
            what: "socketpair",
            source,
        })?;
        let start = Box::new(supervisor::Start {
            plan: &*plan,
            chan: sup_end.as_raw_fd(),
        });

        // Shared memory only where a PID namespace holds the tree (see the supervisor's module
        // documentation: an OOM kill of the host takes a CLONE_VM supervisor with it).
        let share_memory = mode == Mode::PidNamespace;
        // SAFETY: `plan` and `start` are boxed (they do not move) and live until the handshake
        // below has ended, by which time the supervisor no longer reads them; `stacks` lives in
        // the returned tree until the supervisor is reaped (or forever).
        let pid = unsafe {
            supervisor::clone_supervisor(&start, stacks.supervisor_top(), flags, share_memory)
        }
        .map_err(|source| SpawnError::Setup {
            what: "clone",
            source,
        })?;
        // The host keeps no copy of the supervisor's channel end.
        drop(sup_end);
        let mut stacks = stacks;
        let sup_pid = pid.unsigned_abs();
        let mut buf = Vec::new();
        let supervisor = match sys::read_stat(sup_pid, &mut buf) {
            Some(s) => ProcessId::new(sup_pid, s.start_time),
            None => ProcessId::new(sup_pid, 0),
        };
        let mut channel = Channel {
            fd: host_end,
            pending: Vec::new(),
            eof: false,
        };
        let report = channel.next_blocking();
        // The supervisor has reported (or is gone): it reads neither again, and the host keeps
        // no copy of the command's stdio.
        drop(start);
        drop(plan);
        match report {
            Ok(Some(Ok(Message::Started { pid, start_time }))) => {
                let _ = sys::set_nonblocking(channel.fd.as_fd());
                let main = ProcessId::new(pid, start_time);
                let shared = Arc::new(Shared::new(Tracker::new(supervisor)));
                if let Some(every) = self.scan_interval {
                    scanner::register(&shared, every);
                }
                Ok(ProcessTree {
                    mode,
                    supervisor,
                    main,
                    channel,
                    main_status: None,
                    late: None,
                    shared,
                    report: None,
                    _call_dirs: holds,
                    stacks,
                })
            }
            other => {
                // The supervisor reports, sweeps and exits; collect it so no zombie remains.
                let _ = channel.drain_blocking(Duration::from_secs(30));
                if wait_for(pid, 0).is_none() {
                    stacks.keep_forever();
                }
                Err(match other {
                    Ok(Some(Ok(Message::Failed { errno, stage }))) => {
                        let source = io::Error::from_raw_os_error(errno);
                        match stage {
                            Stage::Cwd => SpawnError::CurrentDir { source },
                            Stage::PreExec => SpawnError::PreExec { code: errno },
                            Stage::Exec => SpawnError::Exec { source },
                            Stage::IdMap => SpawnError::Setup {
                                what: "user namespace id maps",
                                source,
                            },
                            Stage::Setup => SpawnError::Setup {
                                what: "supervisor",
                                source,
                            },
                        }
                    }
                    Ok(Some(Err(e))) => SpawnError::Setup {
                        what: "reading the supervisor's report",
                        source: io::Error::new(io::ErrorKind::InvalidData, e),
                    },
                    Ok(_) => SpawnError::Setup {
                        what: "supervisor ended before the program started",
                        source: io::Error::from(io::ErrorKind::UnexpectedEof),
                    },
                    Err(source) => SpawnError::Setup {
                        what: "reading the supervisor's report",
                        source,
                    },
                })
            }
        }
    }
}

/// The identity-preserving wrapper of `socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC)`.
fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair fills the two-element array.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned two fresh descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Reaps our direct child `pid` (the supervisor, or a probe with `__WALL`: it has no exit
/// signal), and only it: the host's other children and
/// their `waitpid` callers are never disturbed.
fn wait_for(pid: libc::pid_t, options: libc::c_int) -> Option<ExitStatus> {
    loop {
        let mut status = 0;
        // SAFETY: waitpid on one specific child, status into a local.
        let r = unsafe { libc::waitpid(pid, &mut status, options) };
        if r == pid {
            return Some(ExitStatus::from_raw(status));
        }
        if r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}

type IdMaps = Option<(Vec<u8>, Vec<u8>)>;

/// The clone flags for the PID-namespace mode, probed once per process: a throwaway child is
/// cloned with them, sharing memory as the real supervisor will (and writes its id maps); if
/// that works, the real supervisor will too.
fn pid_namespace_flags() -> Option<(libc::c_int, bool)> {
    static PROBE: OnceLock<Option<(libc::c_int, bool)>> = OnceLock::new();
    *PROBE.get_or_init(|| {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let mut candidates = Vec::new();
        if root {
            candidates.push((libc::CLONE_NEWPID, false));
        }
        candidates.push((libc::CLONE_NEWPID | libc::CLONE_NEWUSER, true));
        let mut stacks = Stacks::new().ok()?;
        let found = candidates.into_iter().find(|&(flags, userns)| {
            let maps = if userns { id_maps() } else { None };
            // SAFETY: the probe runs on `stacks` and reads `maps`; both outlive it because it
            // is reaped right here (or the stacks are kept forever).
            match unsafe { supervisor::clone_probe(maps.as_ref(), stacks.main_top(), flags) } {
                Ok(pid) => match wait_for(pid, libc::__WALL) {
                    Some(status) => status.success(),
                    None => {
                        stacks.keep_forever();
                        false
                    }
                },
                Err(_) => false,
            }
        });
        drop(stacks);
        found
    })
}

/// Whether [`Mode::PidNamespace`] can be used here (probed once, then cached).
#[must_use]
pub fn pid_namespace_available() -> bool {
    pid_namespace_flags().is_some()
}

/// Whether a command spawned in the default mode runs inside a user namespace of its own (the
/// PID-namespace mode of a host that is not root). There the command's process holds every
/// capability *of that namespace* until it `exec`s, so a pre-exec hook may make mount and IPC
/// namespaces; a root host's command may anyway.
#[must_use]
pub fn user_namespace_in_use() -> bool {
    pid_namespace_flags().is_some_and(|(_, userns)| userns)
}

fn id_maps() -> IdMaps {
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    Some((
        format!("{uid} {uid} 1\n").into_bytes(),
        format!("{gid} {gid} 1\n").into_bytes(),
    ))
}

fn choose_mode(requested: Option<Mode>) -> Result<(Mode, libc::c_int, IdMaps), SpawnError> {
    match (requested, pid_namespace_flags()) {
        (Some(Mode::Subreaper), _) | (None, None) => Ok((Mode::Subreaper, 0, None)),
        (Some(Mode::PidNamespace) | None, Some((flags, userns))) => Ok((
            Mode::PidNamespace,
            flags,
            if userns { id_maps() } else { None },
        )),
        (Some(mode), None) => Err(SpawnError::ModeUnavailable { mode }),
    }
}

/// The host's end of the supervisor channel, with its partly read records.
#[derive(Debug)]
struct Channel {
    fd: OwnedFd,
    pending: Vec<u8>,
    eof: bool,
}

impl Channel {
    /// Reads what is available without blocking (the descriptor is non-blocking after the
    /// handshake).
    fn fill(&mut self) -> io::Result<()> {
        let mut buf = [0u8; 256];
        loop {
            // SAFETY: reading into a stack buffer.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                let n = usize::try_from(n).unwrap_or(0);
                self.pending.extend_from_slice(buf.get(..n).unwrap_or(&[]));
                if n < buf.len() {
                    return Ok(());
                }
                continue;
            }
            if n == 0 {
                self.eof = true;
                return Ok(());
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(()),
                // The supervisor left with our stop request unread (it had finished on its
                // own): everything it sent was read before this error, so this is its EOF.
                io::ErrorKind::ConnectionReset => {
                    self.eof = true;
                    return Ok(());
                }
                _ => {
                    // A broken channel means the supervisor is gone: treat as EOF.
                    self.eof = true;
                    return Err(e);
                }
            }
        }
    }

    /// The next whole record, decoded; a malformed one is returned as its error (and consumed,
    /// records have a fixed size) for the caller to decide.
    fn pop(&mut self) -> Option<Result<Message, WireError>> {
        let rec: [u8; RECORD] = self.pending.get(..RECORD)?.try_into().ok()?;
        self.pending.drain(..RECORD);
        Some(Message::decode(&rec))
    }

    /// The next record, waiting for it; `None` at EOF.
    fn next_blocking(&mut self) -> io::Result<Option<Result<Message, WireError>>> {
        loop {
            if let Some(r) = self.pop() {
                return Ok(Some(r));
            }
            if self.eof {
                return Ok(None);
            }
            sys::poll_in(self.fd.as_fd(), -1)?;
            self.fill()?;
        }
    }

    /// Every record until EOF or `timeout`.
    fn drain_blocking(&mut self, timeout: Duration) -> io::Result<Vec<Result<Message, WireError>>> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        loop {
            while let Some(r) = self.pop() {
                out.push(r);
            }
            if self.eof {
                return Ok(out);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(out);
            }
            let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1);
            sys::poll_in(self.fd.as_fd(), ms)?;
            self.fill()?;
        }
    }
}

/// Sends `sig` to a walked process: through its pidfd, or, without one, by PID right after
/// re-reading its identity (a window of one system call).
fn signal_seen(seen: &Seen, sig: libc::c_int, buf: &mut Vec<u8>) -> io::Result<()> {
    if let Some(fd) = &seen.fd {
        return sys::pidfd_send_signal(fd.as_fd(), sig);
    }
    let same = sys::read_stat(seen.id.pid(), buf)
        .is_some_and(|s| s.start_time == seen.id.start_time() && s.state == ProcessState::Alive);
    let pid = libc::pid_t::try_from(seen.id.pid()).map_err(io::Error::other)?;
    if !same {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    // SAFETY: kill with integers, right after the identity check.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A command running under its supervisor. Dropping it stops everything (as [`stop`]).
///
/// [`stop`]: ProcessTree::stop
#[derive(Debug)]
pub struct ProcessTree {
    mode: Mode,
    supervisor: ProcessId,
    main: ProcessId,
    channel: Channel,
    main_status: Option<ExitStatus>,
    late: Option<usize>,
    shared: Arc<Shared>,
    report: Option<StopReport>,
    /// The call directories its supervisor holds; released after it was reaped (fields drop
    /// after `Drop::drop` stopped it).
    _call_dirs: Vec<TreeHold>,
    /// Declared last: dropped after `Drop::drop` has stopped and reaped the supervisor.
    stacks: Stacks,
}

impl ProcessTree {
    /// The mode that is running.
    #[must_use]
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The command's main process (host PID namespace).
    #[must_use]
    pub fn main(&self) -> ProcessId {
        self.main
    }

    /// The supervisor process (never counted, never signalled by [`stop`](Self::stop)).
    #[must_use]
    pub fn supervisor(&self) -> ProcessId {
        self.supervisor
    }

    /// A descriptor that becomes readable when the supervisor has news (the main process
    /// exited, or the supervisor ended). Await it (e.g. with tokio's `AsyncFd` on a
    /// `try_clone_to_owned` copy), then call [`try_main_status`](Self::try_main_status).
    /// Never read it directly. Call `try_main_status` once *before* the first wait too: the
    /// spawn handshake may already have read the exit record of a command that ended at once,
    /// and then this descriptor does not become readable again.
    #[must_use]
    pub fn status_fd(&self) -> BorrowedFd<'_> {
        self.channel.fd.as_fd()
    }

    fn absorb(&mut self) -> io::Result<()> {
        let r = self.channel.fill();
        while let Some(message) = self.channel.pop() {
            self.apply(message);
        }
        r
    }

    /// Takes in one report. After the start only the exit and the farewell matter; a
    /// malformed record is skipped, as one of an unknown kind always was: nothing is guessed
    /// from its bytes.
    fn apply(&mut self, message: Result<Message, WireError>) {
        match message {
            Ok(Message::MainExited { status }) => {
                self.main_status = Some(ExitStatus::from_raw(status));
            }
            Ok(Message::Done { killed }) => {
                self.late = Some(usize::try_from(killed).unwrap_or(usize::MAX));
            }
            Ok(Message::Started { .. } | Message::Failed { .. }) | Err(_) => {}
        }
    }

    /// The main process's exit status if it has exited, without blocking. Descendants may
    /// still run (e.g. a grandchild holding stdout open); [`stop`](Self::stop) ends them.
    ///
    /// # Errors
    /// When the channel to the supervisor fails.
    pub fn try_main_status(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.main_status.is_none() && !self.channel.eof {
            self.absorb()?;
        }
        Ok(self.main_status)
    }

    /// Blocks until the main process exits and returns its status.
    ///
    /// # Errors
    /// When the supervisor ended without reporting it (it was killed from outside).
    pub fn wait_main(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(s) = self.try_main_status()? {
                return Ok(s);
            }
            if self.channel.eof {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the supervisor ended without reporting the main process's status",
                ));
            }
            sys::poll_in(self.channel.fd.as_fd(), -1)?;
        }
    }

    /// Whether the supervisor has reported that the main process exited and nothing it
    /// started is left (it reaped everything and is exiting). Then [`stop`](Self::stop) only
    /// collects the supervisor: no freezing, no walk, no round trip. Never blocks.
    pub fn settled(&mut self) -> bool {
        if self.late.is_none() && !self.channel.eof {
            let _ = self.absorb();
        }
        self.late.is_some()
    }

    /// Records the current descendants now and returns the identities seen for the first time
    /// (the periodic scan does the same in the background).
    ///
    /// # Errors
    /// When `/proc` cannot be read.
    pub fn scan(&self) -> io::Result<Vec<ProcessId>> {
        scanner::scan_into(&self.shared)
    }

    /// Stops everything the command started: freeze (SIGSTOP) every tracked process, rescan
    /// until no new descendant appears, SIGKILL, and wait until the supervisor has reaped them
    /// all and exited. Identity is re-verified on a pidfd before every signal, so a recycled
    /// PID is never signalled (CMD-7). Calling it again returns the first report.
    ///
    /// # Errors
    /// When `/proc` cannot be read. The supervisor is still told to stop (and kills what is
    /// left), so nothing survives even then.
    pub fn stop(&mut self) -> Result<StopReport, StopError> {
        if let Some(report) = &self.report {
            return Ok(report.clone());
        }
        let started = Instant::now();
        if self.settled() {
            // The supervisor saw the main process exit with nothing left below it and is
            // leaving on its own: there is nothing to freeze, walk or kill.
            self.shared.close();
            self.finish_supervisor();
            let report = StopReport {
                mode: self.mode,
                descendants_stopped: self.late.unwrap_or(0),
                main_stopped: false,
                main_status: self.main_status,
                refused: Vec::new(),
                elapsed: started.elapsed(),
            };
            self.report = Some(report.clone());
            return Ok(report);
        }
        let frozen = self.freeze_and_kill();
        // Whatever happened above, the supervisor now kills anything left and reaps all.
        self.finish_supervisor();
        let (frozen, refused, main_stopped) = frozen?;
        let report = StopReport {
            mode: self.mode,
            descendants_stopped: frozen + self.late.unwrap_or(0),
            main_stopped,
            main_status: self.main_status,
            refused,
            elapsed: started.elapsed(),
        };
        self.report = Some(report.clone());
        Ok(report)
    }

    /// Returns (descendants frozen and killed, refused, main stopped).
    fn freeze_and_kill(&mut self) -> Result<(usize, Vec<ProcessId>, bool), StopError> {
        // The background scanner checks this flag before and after every walk.
        self.shared.close();
        let mut tracker = self
            .shared
            .lock()
            .map_err(|source| StopError::Io {
                what: "tracker lock",
                source,
            })?
            .clone();
        if !sys::children_files_exist() {
            return self.freeze_by_scan(tracker);
        }
        let root = tracker.root();
        let main = self.main;
        let mut walk = Walk::default();
        let mut frozen: Vec<ProcessId> = Vec::new();
        let mut refused = Vec::new();
        let mut counted = 0usize;
        let mut main_stopped = false;
        let mut buf = Vec::new();
        // Walk, freezing each process as it is reached (before its own children are read), and
        // walk again until a settled round freezes nothing new (see `walk` for why that
        // closes the set).
        for _round in 0..10_000 {
            let first_new = frozen.len();
            let unsettled = walk
                .round(root, &mut |parent, child| {
                    if !tracker.adopt(parent, &child.entry(parent.pid())) {
                        return Adopt::No;
                    }
                    if child.state != ProcessState::Alive {
                        return Adopt::Yes { still: true };
                    }
                    match signal_seen(child, libc::SIGSTOP, &mut buf) {
                        Ok(()) => {
                            frozen.push(child.id);
                            Adopt::Yes { still: true }
                        }
                        Err(e) => {
                            if e.raw_os_error() == Some(libc::EPERM) {
                                refused.push(child.id);
                            }
                            Adopt::Yes { still: false }
                        }
                    }
                })
                .map_err(|source| StopError::ProcessTable { source })?;
            // Count what was alive when the stop signal reached it: a pidfd that does not poll
            // readable after the signal names a process that has not exited, so we stopped it;
            // one that exited on its own since its state was read is not counted.
            let new = frozen.get(first_new..).unwrap_or(&[]);
            let mut polls: Vec<libc::pollfd> = new
                .iter()
                .map(|id| libc::pollfd {
                    fd: pinned_by(&walk, *id).map_or(-1, |fd| fd.as_raw_fd()),
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            sys::poll_now(&mut polls);
            for (id, p) in new.iter().zip(&polls) {
                if p.revents != 0 {
                    continue;
                }
                if *id == main {
                    main_stopped = true;
                } else {
                    counted += 1;
                }
            }
            if new.is_empty() && !unsettled {
                break;
            }
        }
        // Children first: a child killed while its parent is still frozen becomes the parent's
        // zombie without waking anyone, and the parent's death then hands the supervisor all of
        // them at once instead of one wake-up per child.
        for id in frozen.iter().rev() {
            if let Some(seen) = walk.seen.get(&id.pid()).filter(|s| s.id == *id) {
                // A pidfd names exactly the process it was opened for (CMD-7).
                let _ = signal_seen(seen, libc::SIGKILL, &mut buf);
            }
        }
        // Wait for each to exit, so the supervisor's final sweep finds only corpses (and does
        // not count them a second time).
        let fds: Vec<BorrowedFd<'_>> = frozen
            .iter()
            .filter_map(|id| pinned_by(&walk, *id))
            .collect();
        sys::wait_exited(&fds, Duration::from_secs(10));
        let deadline = Instant::now() + Duration::from_secs(10);
        let unpinned = frozen.iter().filter(|id| pinned_by(&walk, **id).is_none());
        for id in unpinned {
            while Instant::now() < deadline
                && sys::read_stat(id.pid(), &mut buf).is_some_and(|s| {
                    s.start_time == id.start_time() && s.state == ProcessState::Alive
                })
            {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok((counted, refused, main_stopped))
    }

    /// [`freeze_and_kill`](Self::freeze_and_kill) where the kernel has no children files:
    /// scan all of `/proc` each round and let the Tracker expand process groups.
    fn freeze_by_scan(
        &mut self,
        mut tracker: Tracker,
    ) -> Result<(usize, Vec<ProcessId>, bool), StopError> {
        let mut decided: HashSet<ProcessId> = HashSet::new();
        let mut frozen: Vec<Frozen> = Vec::new();
        let mut refused = Vec::new();
        let mut counted = 0usize;
        let mut main_stopped = false;
        let mut buf = Vec::new();
        // Freeze and rescan until a round finds nothing new. A frozen process cannot fork, and
        // the kernel restarts a fork that a stop signal interrupts, so the set closes.
        for _round in 0..10_000 {
            let table =
                ProcessTable::read().map_err(|source| StopError::ProcessTable { source })?;
            tracker.observe(&table, &mut scanner::still_same);
            let fresh: Vec<ProcessId> = tracker
                .tracked()
                .filter(|id| !decided.contains(id))
                .collect();
            let mut progress = false;
            for id in fresh {
                decided.insert(id);
                let Some(f) = Frozen::freeze(id, &mut buf, &mut refused) else {
                    continue;
                };
                progress = true;
                if id == self.main {
                    main_stopped = true;
                } else {
                    counted += 1;
                }
                frozen.push(f);
            }
            if !progress {
                break;
            }
        }
        for f in &frozen {
            f.kill(&mut buf);
        }
        // Wait for each to exit, so the supervisor's final sweep finds only corpses (and does
        // not count them a second time).
        let fds: Vec<BorrowedFd<'_>> = frozen
            .iter()
            .filter_map(|f| f.fd.as_ref().map(|fd| fd.as_fd()))
            .collect();
        sys::wait_exited(&fds, Duration::from_secs(10));
        let deadline = Instant::now() + Duration::from_secs(10);
        for f in frozen.iter().filter(|f| f.fd.is_none()) {
            while Instant::now() < deadline
                && sys::read_stat(f.id.pid(), &mut buf).is_some_and(|s| {
                    s.start_time == f.id.start_time() && s.state == ProcessState::Alive
                })
            {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok((counted, refused, main_stopped))
    }

    fn finish_supervisor(&mut self) {
        if !self.channel.eof {
            // After `Message::Done` the supervisor is leaving on its own: only collect it.
            if self.late.is_none() {
                // SAFETY: send on our socket; MSG_NOSIGNAL keeps a vanished peer from raising
                // SIGPIPE in the host.
                unsafe {
                    libc::send(
                        self.channel.fd.as_raw_fd(),
                        b"S".as_ptr().cast(),
                        1,
                        libc::MSG_NOSIGNAL,
                    );
                }
            }
            if let Ok(records) = self.channel.drain_blocking(Duration::from_secs(60)) {
                for message in records {
                    self.apply(message);
                }
            }
        }
        let reaped = libc::pid_t::try_from(self.supervisor.pid())
            .ok()
            .and_then(|pid| wait_for(pid, 0))
            .is_some();
        if !reaped {
            // Somebody else reaped it, or waiting failed: it may still run on our stacks.
            self.stacks.keep_forever();
        }
    }
}

/// The walk's pidfd for exactly `id`, if it still holds one.
fn pinned_by(walk: &Walk, id: ProcessId) -> Option<BorrowedFd<'_>> {
    walk.seen
        .get(&id.pid())
        .filter(|s| s.id == id)
        .and_then(|s| s.fd.as_ref())
        .map(|fd| fd.as_fd())
}

impl Drop for ProcessTree {
    fn drop(&mut self) {
        if self.report.is_none() {
            let _ = self.stop();
        }
    }
}

/// A tracked process we froze, pinned by a pidfd where one could be opened.
struct Frozen {
    id: ProcessId,
    fd: Option<OwnedFd>,
}

impl Frozen {
    /// Pins `id`, re-verifies it and sends SIGSTOP; `None` when it is gone, dead, changed
    /// identity, or refused the signal (then it is added to `refused`).
    fn freeze(id: ProcessId, buf: &mut Vec<u8>, refused: &mut Vec<ProcessId>) -> Option<Self> {
        match sys::pin(id, buf) {
            Ok(Pin::Pinned(p)) => {
                if p.state != ProcessState::Alive {
                    return None;
                }
                match sys::pidfd_send_signal(p.fd.as_fd(), libc::SIGSTOP) {
                    Ok(()) => Some(Self { id, fd: Some(p.fd) }),
                    Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                        refused.push(id);
                        None
                    }
                    Err(_) => None,
                }
            }
            Ok(Pin::Gone | Pin::IdentityChanged) => None,
            // No pidfd (e.g. out of descriptors): verify the identity and signal by PID at
            // once; the window is one system call wide.
            Err(_) => {
                let s = sys::read_stat(id.pid(), buf)?;
                if s.start_time != id.start_time() || s.state != ProcessState::Alive {
                    return None;
                }
                let pid = libc::pid_t::try_from(id.pid()).ok()?;
                // SAFETY: kill with integers.
                if unsafe { libc::kill(pid, libc::SIGSTOP) } == 0 {
                    Some(Self { id, fd: None })
                } else {
                    None
                }
            }
        }
    }

    fn kill(&self, buf: &mut Vec<u8>) {
        match &self.fd {
            Some(fd) => {
                let _ = sys::pidfd_send_signal(fd.as_fd(), libc::SIGKILL);
            }
            None => {
                let same = sys::read_stat(self.id.pid(), buf)
                    .is_some_and(|s| s.start_time == self.id.start_time());
                if let (true, Ok(pid)) = (same, libc::pid_t::try_from(self.id.pid())) {
                    // SAFETY: kill with integers, right after the identity check.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
    }
}

/// A signal [`signal`] can send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signal {
    /// SIGTERM: ask to end.
    Terminate,
    /// SIGKILL.
    Kill,
    /// SIGSTOP: freeze.
    Stop,
    /// SIGCONT: thaw.
    Continue,
}

/// What became of a [`signal`] request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignalOutcome {
    /// The signal was delivered to exactly that process.
    Sent,
    /// No process has that PID any more (or it already exited).
    Gone,
    /// The PID now names a different process; nothing was sent (CMD-7).
    IdentityChanged,
}

/// Sends `sig` to the process `id` names, and only to it: the PID is pinned with a pidfd and
/// its start time re-checked first.
///
/// # Errors
/// When the signal is not permitted or a system call fails.
pub fn signal(id: ProcessId, sig: Signal) -> io::Result<SignalOutcome> {
    let signo = match sig {
        Signal::Terminate => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
        Signal::Stop => libc::SIGSTOP,
        Signal::Continue => libc::SIGCONT,
    };
    let mut buf = Vec::new();
    match sys::pin(id, &mut buf)? {
        Pin::Gone => Ok(SignalOutcome::Gone),
        Pin::IdentityChanged => Ok(SignalOutcome::IdentityChanged),
        Pin::Pinned(p) if p.state != ProcessState::Alive => Ok(SignalOutcome::Gone),
        Pin::Pinned(p) => match sys::pidfd_send_signal(p.fd.as_fd(), signo) {
            Ok(()) => Ok(SignalOutcome::Sent),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(SignalOutcome::Gone),
            Err(e) => Err(e),
        },
    }
}

impl ProcessId {
    /// The identity of the live process `pid` now, read from `/proc/<pid>/stat`; `None` when
    /// there is no such process.
    #[must_use]
    pub fn of(pid: u32) -> Option<Self> {
        let mut buf = Vec::new();
        sys::read_stat(pid, &mut buf).map(|s| Self::new(pid, s.start_time))
    }
}
