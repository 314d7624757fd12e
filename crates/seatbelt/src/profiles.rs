//! The two profiles the tools need, built from a small platform-neutral [`ProfileSpec`].
//!
//! `exec` translates its `SandboxSpec` into a `ProfileSpec`; this crate does not know `exec`
//! (it is a leaf). Every path in a spec becomes a `(param "KEY")` plus a `-D KEY=VALUE` argument,
//! never profile text (invariant 6). Fixed system locations are constants in this file.
//!
//! Rule order follows last-match-wins: broad allows first, the `.git` and `file-link` denies
//! last, so no later allow can reopen them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::ast::{Action, Filter, Operation as Op, Profile, Rule, Target, literal, param, subpath};
use crate::eval::{Decision, EvalError, ParamError, Params, Request, Verdict, resolve_query_path};
use crate::pattern::{Pattern, PatternError};

/// The absolute path of the launcher; never looked up on `PATH` (RUN-6).
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// System library locations both profiles may read and map executable (RUN-7, CMD-2):
/// dyld, libSystem and the frameworks, and the dyld shared cache — in `/System/Library/dyld` on
/// macOS 11–12 and in the OS cryptex (`/System/Cryptexes/OS`, physically under
/// `/System/Volumes/Preboot/Cryptexes/OS`) since macOS 13.
pub const SYSTEM_LIBRARIES: &[&str] = &[
    "/usr/lib",
    "/System/Library/Frameworks",
    "/System/Library/PrivateFrameworks",
    "/System/Library/dyld",
    "/System/Cryptexes/OS",
    "/System/Volumes/Preboot/Cryptexes/OS",
];

/// Program and library trees the `command` profile may read, map and execute (CMD-10, LIVE-1):
/// the system's; the Command Line Tools and Xcode's developer directory (compilers, SDK headers
/// and stubs); Homebrew's prefixes (`/opt/homebrew` on Apple silicon, `/usr/local` on Intel) and
/// MacPorts' (`/opt/local`), their program and library directories only. Seed 000: never all of
/// `/usr` as such, never a package manager's `etc` (user configuration), `var` (service data:
/// databases, logs) or Homebrew's own `Library` (taps). Fixed system paths, so literals in the
/// profile; a user's path only ever travels as a parameter.
pub const PROGRAM_DIRECTORIES: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr/bin",
    "/usr/sbin",
    "/usr/libexec",
    "/Library/Developer/CommandLineTools",
    "/Applications/Xcode.app/Contents/Developer",
    "/opt/homebrew/bin",
    "/opt/homebrew/sbin",
    "/opt/homebrew/lib",
    "/opt/homebrew/libexec",
    "/opt/homebrew/opt",
    "/opt/homebrew/Cellar",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/usr/local/lib",
    "/usr/local/libexec",
    "/usr/local/opt",
    "/usr/local/Cellar",
    "/opt/local/bin",
    "/opt/local/sbin",
    "/opt/local/lib",
    "/opt/local/libexec",
];

/// Header and shared-data trees the `command` profile may read but not execute from: the
/// system's `/usr/share` (zoneinfo, terminfo, locales) and each package manager's `include` and
/// `share`, as `/usr/share` and `/usr/include` on Linux.
const DATA_DIRECTORIES: &[&str] = &[
    "/usr/share",
    "/opt/homebrew/include",
    "/opt/homebrew/share",
    "/usr/local/include",
    "/usr/local/share",
    "/opt/local/include",
    "/opt/local/share",
];

/// Single files the `command` profile reads: `/bin/sh` on macOS is a shim that reads the
/// `/private/var/select/sh` link to pick its shell, and the `/usr/bin` developer-tool shims read
/// the `xcode-select` links.
const COMMAND_SELECT_LINKS: &[&str] = &[
    "/private/var/select/sh",
    "/private/var/select/developer_dir",
    "/private/var/db/xcode_select_link",
];

/// `sysctl` names libSystem reads while starting and sizing buffers (CPU count and type, page
/// and memory size, OS version, `ARG_MAX`). Taken from the lists Chromium and Codex allow; the
/// two prefixes cover CPU-feature probes by the string routines.
pub const SYSCTL_NAMES: &[&str] = &[
    "hw.activecpu",
    "hw.byteorder",
    "hw.cachelinesize_compat",
    "hw.cpufamily",
    "hw.cputype",
    "hw.logicalcpu_max",
    "hw.machine",
    "hw.memsize",
    "hw.ncpu",
    "hw.pagesize",
    "hw.pagesize_compat",
    "hw.physicalcpu_max",
    "kern.argmax",
    "kern.maxfilesperproc",
    "kern.osproductversion",
    "kern.osrelease",
    "kern.ostype",
    "kern.osvariant_status",
    "kern.osversion",
    "kern.secure_kernel",
    "kern.usrstack64",
    "kern.version",
    "sysctl.proc_cputype",
];

/// `sysctl` name prefixes allowed with [`SYSCTL_NAMES`].
pub const SYSCTL_PREFIXES: &[&str] = &["hw.optional.", "hw.perflevel"];

/// `.git` as a path component in any letter case: APFS is usually case-insensitive, so `.GIT`
/// opens the same directory (RUN-4, RUN-7).
pub const DOT_GIT_PATTERN: &str = r"/\.[Gg][Ii][Tt](/|$)";

/// What the sandboxed process may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Processes {
    /// The `run` profile (RUN-6, RUN-7): `process-exec` of exactly this executable, no
    /// `process-fork`, and only [`SYSTEM_LIBRARIES`] besides the granted roots.
    OnlyProgram(PathBuf),
    /// The `command` profile (CMD-2, CMD-10): `process-fork` allowed, `process-exec` of anything in
    /// [`PROGRAM_DIRECTORIES`], a read-write root or a read-only one (an approved toolchain);
    /// the header and data trees (`/usr/share`, each package manager's `include` and `share`)
    /// read-only; `signal` and `process-info*` only inside the same sandbox.
    Spawn,
}

/// Whether the process may use the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// No sockets beyond what `(deny default)` leaves (RUN-7, CMD-2).
    Denied,
    /// Outbound and inbound networking plus the DNS and certificate lookups clients need (RC-7).
    Allowed,
}

/// Whether `.git` (any letter case) is hidden.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DotGit {
    /// Every file operation and exec on a `.git` path component is denied (RUN-7).
    Denied,
    /// `.git` is treated like any other path.
    Allowed,
}

/// A platform-neutral description of one sandbox, from which the profile is built.
///
/// Paths must be absolute, `.`/`..`-free and valid UTF-8 (macOS file systems store UTF-8 names);
/// `/tmp`, `/var`, `/etc` are rewritten to their `/private/…` targets because Seatbelt matches
/// resolved paths. Callers should pass canonicalized paths; this is the lexical safety net.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileSpec {
    /// What may be executed.
    pub processes: Processes,
    /// Roots readable and writable with everything below them (scope or mirror, temp, writable
    /// extra paths).
    pub read_write: Vec<PathBuf>,
    /// Roots readable with everything below them (read-only extra paths).
    pub read_only: Vec<PathBuf>,
    /// Network access.
    pub network: Network,
    /// `.git` protection.
    pub dot_git: DotGit,
}

/// Why a spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// A path is relative.
    #[error("{0:?} is not absolute; pass the canonical absolute path")]
    NotAbsolute(PathBuf),
    /// A path has `.` or `..` components.
    #[error("{0:?} has `.` or `..` components; pass the canonical path")]
    NotCanonical(PathBuf),
    /// A path is not UTF-8 (or holds NUL), so it cannot travel as a `-D` value.
    #[error("{0:?} is not valid UTF-8 without NUL; macOS paths are UTF-8, pass the real path")]
    NotUtf8(PathBuf),
    /// `/` itself was granted.
    #[error("granting the whole file system `/` is refused; grant the directories the task needs")]
    WholeFileSystem,
    /// A parameter could not be set.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// A built-in pattern failed to compile (a bug in this crate, reported rather than panicking).
    #[error(transparent)]
    Pattern(#[from] PatternError),
}

impl ProfileSpec {
    /// The `run` tool's sandbox (RUN-6, RUN-7): `program` only, read-write `mirror` and `temp`,
    /// no network, `.git` denied.
    pub fn run(
        program: impl Into<PathBuf>,
        mirror: impl Into<PathBuf>,
        temp: impl Into<PathBuf>,
    ) -> ProfileSpec {
        ProfileSpec {
            processes: Processes::OnlyProgram(program.into()),
            read_write: vec![mirror.into(), temp.into()],
            read_only: Vec::new(),
            network: Network::Denied,
            dot_git: DotGit::Denied,
        }
    }

    /// The `command` tool's sandbox (CMD-2): spawning allowed, read-write `scope` and `temp`, no
    /// network; extra paths are added to `read_write`/`read_only` once approved (CMD-3).
    pub fn command(scope: impl Into<PathBuf>, temp: impl Into<PathBuf>) -> ProfileSpec {
        ProfileSpec {
            processes: Processes::Spawn,
            read_write: vec![scope.into(), temp.into()],
            read_only: Vec::new(),
            network: Network::Denied,
            dot_git: DotGit::Allowed,
        }
    }

    /// Validates every path, then builds the profile and its parameters.
    pub fn build(&self) -> Result<BoundProfile, SpecError> {
        self.build_with_denies(&[], &[])
    }

    /// [`ProfileSpec::build`] plus the run_command profile's denies, after every allow:
    /// `private` paths neither read, written nor executed (a writable root lying inside one is
    /// opened again), `protected` paths never written and the directories between a writable
    /// root and a protected path never removed or renamed (see [`ArgvProfileInput`], which
    /// calls this). For `exec`'s translation of a `SandboxSpec` whose `hidden` and `protected`
    /// lists are set.
    pub fn build_with_denies(
        &self,
        private: &[PathBuf],
        protected: &[PathBuf],
    ) -> Result<BoundProfile, SpecError> {
        // Validate everything before building anything (house rule 2).
        let private = private
            .iter()
            .map(|p| canonical(p))
            .collect::<Result<Vec<_>, _>>()?;
        let protected = protected
            .iter()
            .map(|p| canonical(p))
            .collect::<Result<Vec<_>, _>>()?;
        let program = match &self.processes {
            Processes::OnlyProgram(p) => Some(canonical(p)?),
            Processes::Spawn => None,
        };
        let rw = self
            .read_write
            .iter()
            .map(|p| root(p))
            .collect::<Result<Vec<_>, _>>()?;
        let ro = self
            .read_only
            .iter()
            .map(|p| root(p))
            .collect::<Result<Vec<_>, _>>()?;

        let mut params = Params::new();
        let mut rw_filters = Vec::new();
        for (i, p) in rw.iter().enumerate() {
            let key = format!("READ_WRITE_{i}");
            params.insert(&key, p)?;
            rw_filters.push(subpath(param(&key)));
        }
        let mut ro_filters = Vec::new();
        for (i, p) in ro.iter().enumerate() {
            let key = format!("READ_ONLY_{i}");
            params.insert(&key, p)?;
            ro_filters.push(subpath(param(&key)));
        }
        let libraries = || SYSTEM_LIBRARIES.iter().map(|d| subpath(*d));
        let programs = || PROGRAM_DIRECTORIES.iter().map(|d| subpath(*d));

        let mut profile = Profile::new();
        match &program {
            Some(program) => {
                params.insert("PROGRAM", program)?;
                profile = profile
                    .rule(Rule::allow([Op::ProcessExec]).filter(literal(param("PROGRAM"))))
                    .rule(
                        Rule::allow([Op::FileReadAll, Op::FileMapExecutable])
                            .filter(literal(param("PROGRAM"))),
                    )
                    .rule(
                        Rule::allow([Op::FileReadAll, Op::FileMapExecutable]).filters(libraries()),
                    )
                    .rule(Rule::allow([Op::Signal]).filter(Filter::Target(Target::SelfProcess)));
            }
            None => {
                profile = profile
                    .rule(Rule::allow([Op::ProcessFork]))
                    .rule(
                        Rule::allow([Op::ProcessExec])
                            .filters(programs())
                            .filters(rw_filters.iter().cloned())
                            // An approved read-only extra path runs its tools (`~/.cargo`
                            // runs `cargo`), as on Linux.
                            .filters(ro_filters.iter().cloned()),
                    )
                    .rule(
                        Rule::allow([Op::FileReadAll, Op::FileMapExecutable])
                            .filters(libraries())
                            .filters(programs()),
                    )
                    .rule(
                        Rule::allow([Op::FileReadAll])
                            .filters(DATA_DIRECTORIES.iter().map(|d| subpath(*d))),
                    )
                    .rule(
                        Rule::allow([Op::FileReadAll])
                            .filters(COMMAND_SELECT_LINKS.iter().map(|l| literal(*l))),
                    )
                    .rule(
                        Rule::allow([Op::Signal, Op::ProcessInfoAll])
                            .filter(Filter::Target(Target::SameSandbox)),
                    )
                    .rule(Rule::allow([Op::MachLookup]).filter(Filter::GlobalName(
                        "com.apple.system.opendirectoryd.libinfo".into(),
                    )));
            }
        }
        profile = profile
            .rule(
                Rule::allow([Op::FileReadData, Op::FileReadMetadata, Op::FileWriteData])
                    .filter(literal("/dev/null")),
            )
            .rule(
                Rule::allow([Op::FileReadAll])
                    .filters(["/dev/zero", "/dev/random", "/dev/urandom"].map(literal)),
            )
            .rule(
                Rule::allow([Op::SysctlRead])
                    .filters(SYSCTL_NAMES.iter().map(|n| Filter::SysctlName((*n).into())))
                    .filters(
                        SYSCTL_PREFIXES
                            .iter()
                            .map(|n| Filter::SysctlNamePrefix((*n).into())),
                    ),
            );
        if !rw_filters.is_empty() {
            let ops = match program {
                Some(_) => vec![Op::FileReadAll, Op::FileWriteAll],
                // Programs built in the scope load their own libraries (CMD-2 "read/write the
                // scope" includes running what was built there).
                None => vec![Op::FileReadAll, Op::FileWriteAll, Op::FileMapExecutable],
            };
            profile = profile.rule(Rule {
                action: Action::Allow,
                operations: ops,
                filters: rw_filters,
            });
        }
        if !ro_filters.is_empty() {
            let ops = match program {
                Some(_) => vec![Op::FileReadAll],
                // What runs from there loads its own libraries too.
                None => vec![Op::FileReadAll, Op::FileMapExecutable],
            };
            profile = profile.rule(Rule {
                action: Action::Allow,
                operations: ops,
                filters: ro_filters,
            });
        }
        if self.network == Network::Allowed {
            profile = profile
                .rule(Rule::allow([Op::NetworkAll, Op::SystemSocket]))
                .rule(
                    Rule::allow([Op::MachLookup]).filters(
                        [
                            "com.apple.dnssd.service",
                            "com.apple.SystemConfiguration.configd",
                            "com.apple.SystemConfiguration.DNSConfiguration",
                            "com.apple.trustd.agent",
                        ]
                        .map(|n| Filter::GlobalName(n.into())),
                    ),
                )
                .rule(Rule::allow([Op::FileReadAll]).filters([
                    literal("/private/etc/hosts"),
                    literal("/private/etc/resolv.conf"),
                    literal("/private/var/run/resolv.conf"),
                    subpath("/private/etc/ssl"),
                ]));
        }
        if self.dot_git == DotGit::Denied {
            let pattern = Pattern::new(DOT_GIT_PATTERN)?;
            profile = profile
                .rule(Rule::deny([Op::FileAll, Op::ProcessExec]).filter(Filter::Regex(pattern)));
        }
        if !private.is_empty() {
            // RCS-1: deny after allow, so a private location inside `$HOME` (read-only) or a
            // writable root is closed whatever allowed it. `subpath` for files too: it matches
            // the file itself, and still matches if a directory is made there; the builder never
            // looks at the file system to tell files from directories.
            let mut filters = Vec::new();
            for (i, p) in private.iter().enumerate() {
                let key = format!("PRIVATE_{i}");
                params.insert(&key, p)?;
                filters.push(subpath(param(&key)));
            }
            profile = profile.rule(Rule {
                action: Action::Deny,
                operations: vec![Op::FileAll, Op::ProcessExec],
                filters,
            });
            // A writable root granted inside a private location (a confirmed write_paths entry
            // such as `~/.ssh/known_hosts`, RC-10, or a working directory there) is the user's
            // explicit choice: it is opened again, after the deny.
            let reopened: Vec<Filter> = rw
                .iter()
                .enumerate()
                .filter(|(_, r)| private.iter().any(|p| within(r, p)))
                .map(|(i, _)| subpath(param(&format!("READ_WRITE_{i}"))))
                .collect();
            if !reopened.is_empty() {
                profile = profile.rule(Rule {
                    action: Action::Allow,
                    operations: vec![Op::FileReadAll, Op::FileWriteAll, Op::FileMapExecutable],
                    filters: reopened,
                });
            }
        }
        if !protected.is_empty() {
            // RCS-3: never written, even inside a writable root, whatever allowed it above.
            let mut filters = Vec::new();
            let mut ancestors: Vec<String> = Vec::new();
            for (i, p) in protected.iter().enumerate() {
                let key = format!("PROTECTED_{i}");
                params.insert(&key, p)?;
                filters.push(subpath(param(&key)));
                // The directories between a writable root and the protected path cannot be
                // removed or renamed (which would move the protected path away and let a new one
                // be made in its place, `.git` → `.git.old`, then a fresh `.git/hooks`).
                // Creating them stays allowed, so `git init` works where `.git` is missing.
                for r in rw.iter().filter(|r| within(p, r) && *r != p) {
                    let mut dir = parent(p);
                    while let Some(d) = dir {
                        if !within(d, r) || d == r.as_str() {
                            break;
                        }
                        if !ancestors.iter().any(|a| a == d) {
                            ancestors.push(d.to_owned());
                        }
                        dir = parent(d);
                    }
                }
            }
            profile = profile.rule(Rule {
                action: Action::Deny,
                operations: vec![Op::FileWriteAll],
                filters,
            });
            if !ancestors.is_empty() {
                let mut filters = Vec::new();
                for (i, a) in ancestors.iter().enumerate() {
                    let key = format!("PROTECTED_PARENT_{i}");
                    params.insert(&key, a)?;
                    filters.push(literal(param(&key)));
                }
                profile = profile.rule(Rule {
                    action: Action::Deny,
                    operations: vec![Op::FileWriteUnlink],
                    filters,
                });
            }
        }
        // CMD-9: no new hard links anywhere, whatever was allowed above. `file-link` is not under
        // `file-write*`, so this is belt and braces over `(deny default)`.
        profile = profile.rule(Rule::deny([Op::FileLink]));
        Ok(BoundProfile { profile, params })
    }
}

/// The `run_command` tool's sandbox (RCS-1, RCS-2, RCS-3, RC-7, RC-10): what the caller
/// (`exec`'s macOS translation) knows about one call. [`ArgvProfileInput::build`] makes the
/// profile:
///
/// - **processes** as the `command` profile: `process-fork` allowed, `process-exec` of the
///   system's program directories, the writable roots and `$HOME` (the user's toolchains live
///   there: `~/.cargo/bin`, `~/.nvm`, `~/.pyenv`); the system runtime read as `command`'s;
/// - **read** `$HOME` except `private`, **read and write** `workdir`, `temp`, `caches` and
///   `write_paths`;
/// - **private** locations neither read, written nor executed (deny after allow), unless a
///   writable root lies inside one (then that root is opened again: the user chose it);
/// - **protected** paths never written, even inside a writable root, and the directories
///   between a writable root and a protected path never removed or renamed;
/// - **network** only with [`Network::Allowed`]; no hard links anywhere (CMD-9).
///
/// Every path travels as a `(param …)`; all must be absolute and `.`/`..`-free. `private` and
/// `protected` may name paths that do not exist (yet): the rules match path text.
///
/// ```
/// use seatbelt::{ArgvProfileInput, Decision, Network, Operation};
///
/// let mut input = ArgvProfileInput::new("/Users/u/proj", "/private/tmp/call-1", "/Users/u");
/// input.caches.push("/Users/u/.cache".into());
/// input.private.push("/Users/u/.ssh".into());
/// input.protected.push("/Users/u/proj/.git/hooks".into());
/// let bound = input.build()?;
/// let decide = |op, path| bound.decide(op, path);
/// assert_eq!(decide(Operation::FileReadData, "/Users/u/.zshrc")?, Decision::Allow);
/// assert_eq!(decide(Operation::FileReadData, "/Users/u/.ssh/id_ed25519")?, Decision::Deny);
/// assert_eq!(decide(Operation::FileWriteData, "/Users/u/.cache/pip/x")?, Decision::Allow);
/// assert_eq!(decide(Operation::FileWriteCreate, "/Users/u/proj/.git/hooks/pre-commit")?, Decision::Deny);
/// assert!(!bound.text().contains("/Users/u"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgvProfileInput {
    /// The working directory: read, write, execute.
    pub workdir: PathBuf,
    /// The call's temp directory: read, write, execute.
    pub temp: PathBuf,
    /// `$HOME`: read and execute, except `private`.
    pub home: PathBuf,
    /// The toolchains' cache directories (`argv_policy::Policy::cache_paths`): read, write.
    pub caches: Vec<PathBuf>,
    /// The call's confirmed `write_paths` (RC-10): read, write.
    pub write_paths: Vec<PathBuf>,
    /// Credential and private-data locations (`argv_policy::Policy::private_paths`): no access.
    pub private: Vec<PathBuf>,
    /// Paths never written even inside a writable root (`.git/hooks`, `.git/config`,
    /// `.gitmodules`, shell startup files, the host's config).
    pub protected: Vec<PathBuf>,
    /// Network access (RC-7).
    pub network: Network,
}

impl ArgvProfileInput {
    /// A call in `workdir` with its `temp` directory under `home`: no caches, write paths,
    /// private or protected paths yet, no network.
    pub fn new(
        workdir: impl Into<PathBuf>,
        temp: impl Into<PathBuf>,
        home: impl Into<PathBuf>,
    ) -> ArgvProfileInput {
        ArgvProfileInput {
            workdir: workdir.into(),
            temp: temp.into(),
            home: home.into(),
            caches: Vec::new(),
            write_paths: Vec::new(),
            private: Vec::new(),
            protected: Vec::new(),
            network: Network::Denied,
        }
    }

    /// The [`ProfileSpec`] of the allows: `READ_WRITE_0` the working directory, `READ_WRITE_1`
    /// the temp directory, then the caches, then the write paths; `READ_ONLY_0` `$HOME`.
    pub fn spec(&self) -> ProfileSpec {
        let mut read_write = vec![self.workdir.clone(), self.temp.clone()];
        read_write.extend(self.caches.iter().cloned());
        read_write.extend(self.write_paths.iter().cloned());
        ProfileSpec {
            processes: Processes::Spawn,
            read_write,
            read_only: vec![self.home.clone()],
            network: self.network,
            dot_git: DotGit::Allowed,
        }
    }

    /// Validates every path, then builds the profile and its parameters (`PRIVATE_<n>`,
    /// `PROTECTED_<n>` and `PROTECTED_PARENT_<n>` besides the spec's roots).
    pub fn build(&self) -> Result<BoundProfile, SpecError> {
        self.spec()
            .build_with_denies(&self.private, &self.protected)
    }
}

/// A profile together with the values of its parameters: what `sandbox-exec` needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundProfile {
    profile: Profile,
    params: Params,
}

impl BoundProfile {
    /// Pairs a profile with parameter values; every `(param …)` it reads must be present.
    pub fn new(profile: Profile, params: Params) -> Result<BoundProfile, EvalError> {
        if let Some(missing) = profile
            .parameters()
            .into_iter()
            .find(|k| params.get(k).is_none())
        {
            return Err(EvalError::MissingParam(missing.to_owned()));
        }
        Ok(BoundProfile { profile, params })
    }

    /// The profile.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The parameter values.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The SBPL text for `sandbox-exec -p`.
    pub fn text(&self) -> String {
        self.profile.render()
    }

    /// Would `operation` on `path` be allowed? See [`crate::eval`] for what this models.
    pub fn decide(&self, operation: Op, path: &str) -> Result<Decision, EvalError> {
        self.profile.decide(operation, path, &self.params)
    }

    /// Decides any request and names the deciding rule.
    pub fn evaluate(&self, request: &Request<'_>) -> Result<Verdict, EvalError> {
        self.profile.evaluate(request, &self.params)
    }

    /// The arguments after [`SANDBOX_EXEC`]: `-p <profile> -D KEY=VALUE… -- <program> <args…>`.
    /// `program` must be absolute: nothing is ever looked up on `PATH` (RUN-6).
    pub fn sandbox_exec_args(
        &self,
        program: &Path,
        args: &[OsString],
    ) -> Result<Vec<OsString>, SpecError> {
        if !program.is_absolute() {
            return Err(SpecError::NotAbsolute(program.to_owned()));
        }
        let mut out = vec![OsString::from("-p"), OsString::from(self.text())];
        out.extend(self.params.to_args());
        out.push(OsString::from("--"));
        out.push(program.as_os_str().to_owned());
        out.extend(args.iter().cloned());
        Ok(out)
    }

    /// A `Command` running `program args` under this profile via `/usr/bin/sandbox-exec`.
    /// Environment, stdio and process group are the caller's (`exec`'s) to set.
    #[cfg(target_os = "macos")]
    pub fn command(
        &self,
        program: &Path,
        args: &[OsString],
    ) -> Result<std::process::Command, SpecError> {
        let mut cmd = std::process::Command::new(SANDBOX_EXEC);
        cmd.args(self.sandbox_exec_args(program, args)?);
        Ok(cmd)
    }
}

/// `true` when the canonical `path` is `dir` or lies below it (whole components).
fn within(path: &str, dir: &str) -> bool {
    path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/') || dir == "/")
}

/// The parent of a canonical path (`None` for `/`).
fn parent(path: &str) -> Option<&str> {
    match path.rfind('/') {
        Some(0) if path.len() > 1 => Some("/"),
        Some(i) if i > 0 => Some(&path[..i]),
        _ => None,
    }
}

/// `path` as the UTF-8 string the kernel would report, or why it cannot be one.
fn canonical(path: &Path) -> Result<String, SpecError> {
    let s = path
        .to_str()
        .filter(|s| !s.contains('\0'))
        .ok_or_else(|| SpecError::NotUtf8(path.to_owned()))?;
    if !path.is_absolute() {
        return Err(SpecError::NotAbsolute(path.to_owned()));
    }
    resolve_query_path(s).ok_or_else(|| SpecError::NotCanonical(path.to_owned()))
}

/// A granted root: canonical and not `/` itself.
fn root(path: &Path) -> Result<String, SpecError> {
    let s = canonical(path)?;
    if s == "/" {
        Err(SpecError::WholeFileSystem)
    } else {
        Ok(s)
    }
}
