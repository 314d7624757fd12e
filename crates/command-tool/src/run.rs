//! One `command` call end to end: validate, lease check, hard-link pre-scan, approvals, the
//! sandboxed `/bin/sh -c` through `exec`, and the result (CMD-1…CMD-9, CMD-13).

use std::ffi::OsString;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use exec::{End, ExecError, Job, Limits, OnCap, SandboxSpec, WorkDir};
use fsguard::{RootLease, ScanError, ScanOptions, scan_hard_links_in};
use toolscope::{CallContext, CancelReason, ErrorCode, ToolError};

use crate::approve::Approver;
use crate::types::{CommandArguments, CommandOutput, Status};
use crate::validate::{Extra, Pin, validate};

/// Bytes of stdout and of stderr kept; the command keeps running past them (CMD-5).
pub const OUTPUT_CAP: usize = 64 * 1024;

/// At most this many hard-linked paths are named in a refusal's message (the count is exact).
pub const HARD_LINKS_SHOWN: usize = 20;

/// The shell. Fixed, never looked up on `PATH` (CMD-1).
const SHELL: &str = "/bin/sh";

/// `PATH` inside the sandbox: the program directories the sandbox lets the command read and
/// execute (CMD-10, CMD-13), and nothing from the host.
const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

/// Runs one `command` call.
///
/// In order (docs/architecture.md, "The path of one call"; nothing is asked, created or started
/// before the step that needs it):
/// 1. [`validate`] the arguments (`AGENT_EXEC_ARGUMENTS_INVALID`, `AGENT_EXEC_PATH_INVALID`).
/// 2. Verify the work-root lease (CMD-8): a replaced root is `AGENT_EXEC_CANCELLED`.
/// 3. Hard-link pre-scan (CMD-9, TRUST-3) of the scope and of every writable extra path: on
///    Linux each regular file with more than one link is kept read-only in the sandbox (a
///    write is a denial naming it and the remedy); elsewhere, or where they cannot be kept so,
///    any one refuses the call (`AGENT_EXEC_PATH_INVALID`, at most [`HARD_LINKS_SHOWN`] paths
///    in the message, all counted, the shown ones in `hardLinks`).
/// 4. Ask `approver` about each extra path (CMD-3); a "no" is `AGENT_PERMISSION_DENIED` naming
///    the path, and the call does not run. Cancelling the call stops the asking.
/// 5. After approvals, scan again (a prompt can take a while) and verify the lease again.
/// 6. Run `/bin/sh -c <command>` through `exec` in the sandbox of CMD-2 with the environment of
///    CMD-13, stdin closed, output capped in truncate mode; `exec` verifies the lease before
///    spawning, right after, every 200 ms, and before release.
///
/// A run that happened is a [`CommandOutput`] whatever its exit code, also when it timed out
/// or was cancelled (`status`, `partialExecution`). Exceptions: a revoked permission is the
/// public permission error (TS-3), and a replaced work root is `AGENT_EXEC_CANCELLED` with the
/// partial result in the error's details (CMD-8: a re-resolved path is never accepted).
///
/// # Errors
/// As listed above, plus `AGENT_EXEC_SANDBOX_UNAVAILABLE` / `AGENT_EXEC_UNSUPPORTED` (nothing
/// runs, never unsandboxed) and `AGENT_EXEC_IO_FAILED`.
pub async fn command(
    args: CommandArguments,
    scope: Arc<RootLease>,
    approver: &dyn Approver,
    ctx: &CallContext,
) -> Result<CommandOutput, ToolError> {
    command_with(args, scope, approver, ctx, &CommandOptions::default()).await
}

/// What the host (not the model) adds to a call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandOptions {
    /// Variables the host passes through explicitly (CMD-13), e.g. `("GIT_AUTHOR_NAME", …)`.
    /// Names are `[A-Za-z_][A-Za-z0-9_]*` and may not replace the fixed ones (`PATH`, `HOME`,
    /// `TMPDIR`, `LANG`, `LC_ALL`, `TERM`); values carry no NUL.
    pub env: Vec<(String, String)>,
    /// Directories the command must never read or change even inside the workspace or an
    /// extra path: the host's own state (grants, mirrors, locks, configuration).
    /// Hidden by the sandbox where it can be; otherwise a call whose grants contain one is
    /// refused (`AGENT_EXEC_PATH_INVALID`).
    pub hidden: Vec<PathBuf>,
    /// The user's home directory, when the host opts in to the user's own toolchains
    /// (`--toolchains`, LIVE-3): the toolchain homes that exist under it are granted read +
    /// execute, put on `PATH` and named by their variables (`CARGO_HOME`, `RUSTUP_HOME`, …);
    /// their credential files never are (module `toolchains`). Off (`None`) by default.
    pub toolchains: Option<PathBuf>,
}

impl CommandOptions {
    /// Adds one variable to pass through.
    #[must_use]
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Opts in to the user's own toolchains under `home` ([`toolchains`](CommandOptions::toolchains)).
    #[must_use]
    pub fn toolchains(mut self, home: impl Into<PathBuf>) -> Self {
        self.toolchains = Some(home.into());
        self
    }

    /// Adds a directory to [`hidden`](CommandOptions::hidden).
    #[must_use]
    pub fn hide(mut self, path: impl Into<PathBuf>) -> Self {
        self.hidden.push(path.into());
        self
    }

    fn check(&self) -> Result<(), ToolError> {
        for (name, value) in &self.env {
            let well_formed = name
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            let fixed = FIXED_ENV.contains(&name.as_str());
            if !well_formed || fixed || value.contains('\0') {
                return Err(ToolError::new(
                    ErrorCode::ExecArgumentsInvalid,
                    format!(
                        "the host passes environment variable {:?}, which is {}; pass names of \
                         letters, digits and `_` other than {FIXED_ENV:?}, with values without NUL",
                        name,
                        if fixed {
                            "one of the fixed ones"
                        } else {
                            "not a valid name or value"
                        }
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The variables every command gets and no host may replace (CMD-13).
const FIXED_ENV: [&str; 6] = ["PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TERM"];

/// [`command`] with host [`CommandOptions`] (the variables a host passes through, CMD-13).
///
/// # Errors
/// As [`command`]; a malformed or fixed variable name in `options` is
/// `AGENT_EXEC_ARGUMENTS_INVALID` before anything else happens.
pub async fn command_with(
    args: CommandArguments,
    scope: Arc<RootLease>,
    approver: &dyn Approver,
    ctx: &CallContext,
    options: &CommandOptions,
) -> Result<CommandOutput, ToolError> {
    ctx.check()?;
    options.check()?;
    let validated = validate(&args, &scope)?;
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
    refuse_user_stores(
        scope.path(),
        validated.extra_paths(),
        home.as_deref().map(Path::new),
    )?;
    refuse_hidden(validated.extra_paths(), &options.hidden)?;
    crate::sockets::refuse_socket_places(validated.extra_paths())?;
    verify_lease(&scope)?;
    let mut frozen = hard_link_scan(&scope, validated.extra_paths()).await?;

    if !validated.extra_paths().is_empty() {
        for extra in validated.extra_paths() {
            let approved = tokio::select! {
                yes = approver.approve_extra_path(extra.path(), extra.write()) => yes,
                reason = ctx.cancelled() => return Err(reason.to_error()),
            };
            if !approved {
                return Err(ToolError::new(
                    ErrorCode::PermissionDenied,
                    format!(
                        "the user did not allow {} ({}) for this call, so the command did not \
                         run; work inside the workspace or ask the user to approve the path",
                        extra.path().display(),
                        if extra.write() {
                            "read and write"
                        } else {
                            "read only"
                        }
                    ),
                )
                .with_detail("path", extra.path().to_string_lossy().into_owned()));
            }
        }
        ctx.check()?;
        verify_lease(&scope)?;
        frozen = hard_link_scan(&scope, validated.extra_paths()).await?;
    }

    // CMD-2, CMD-13: the call's own `HOME` and `TMPDIR`.
    let temp = exec::CallTemp::create(TEMP_PREFIX, scope.path())
        .map_err(|e| ToolError::new(ErrorCode::ExecIoFailed, e.to_string()))?;
    let describe = |e: exec::SpecError| {
        ToolError::new(
            ErrorCode::ExecIoFailed,
            format!("cannot describe the sandbox: {e}"),
        )
    };
    let mut extra = Vec::with_capacity(validated.extra_paths().len());
    for e in validated.extra_paths() {
        let access = if e.write() {
            exec::Access::ReadWrite
        } else {
            exec::Access::Read
        };
        extra.push(match e.pin() {
            Pin::Dir(lease) => exec::Grant::leased(lease, access).map_err(describe)?,
            Pin::File(fd) => exec::Grant::pinned(e.path(), Arc::clone(fd), access),
        });
    }
    // LIVE-3: the user's toolchains, read + execute, only when the host opted in.
    let toolchains = match &options.toolchains {
        Some(home) => {
            let home = home.clone();
            let hidden = options.hidden.clone();
            exec::blocking::off_async(move || crate::toolchains::resolve(&home, &hidden))
                .await
                .unwrap_or_default()
        }
        None => crate::toolchains::Resolved::default(),
    };
    extra.extend(toolchains.grants);
    // TRUST-3: the toolchains' caches through a private view for this call.
    let views = exec::CacheViews::create(&toolchains.caches, &temp.root().join(CACHE_VIEWS))
        .map_err(|e| {
            ToolError::new(
                ErrorCode::ExecIoFailed,
                format!("cannot make the caches' private views in the call's temp dir: {e}"),
            )
        })?;
    let approved_extra = !validated.extra_paths().is_empty();
    let mut sandbox = SandboxSpec::for_command(&scope, temp.lease(), extra).map_err(describe)?;
    // An approved extra path may hold another program's listening socket (the user's `/tmp`
    // holds tmux's and ssh-agent's; Landlock below ABI 9 does not govern `connect`): with one,
    // the command makes no unix sockets (`socketpair` still works). The workspace, the temp
    // dir and the toolchain homes are not such places.
    // A workspace that is or holds such a place (a home directory: `~/.gnupg`'s gpg-agent)
    // brings its sockets in too.
    let workspace_sockets = crate::sockets::socket_place_in(scope.path());
    sandbox.unix_sockets = !approved_extra && workspace_sockets.is_none();
    for path in &options.hidden {
        sandbox = sandbox.hide(path.clone());
    }
    sandbox.frozen = frozen;
    // TRUST-1: every git directory of the writable roots through a private copy for the whole
    // call, applied afterwards from an allowlist. The stage lives in the call's temp dir, which
    // the command's own tmpfs covers.
    let writable: Vec<PathBuf> = std::iter::once(scope.path().to_path_buf())
        .chain(
            validated
                .extra_paths()
                .iter()
                .filter(|e| e.write())
                .map(|e| e.path().to_path_buf()),
        )
        .collect();
    let stage_base = temp.root().join(GIT_STAGE);
    let stage = exec::blocking::off_async(move || {
        let roots: Vec<&Path> = writable.iter().map(PathBuf::as_path).collect();
        gitstage::Stage::for_roots(&roots, &stage_base, &autorun)
    })
    .await
    .map_err(|e| gitstage::StageError::Io(std::io::Error::other(e)))
    .and_then(|r| r)
    .map_err(stage_error)?;
    sandbox.protected.extend(stage.protect());
    // TRUST-1: what the stage found, by identity: a directory swapped for a link since then
    // refuses the run instead of leaving the one found unprotected.
    sandbox.found_at = stage.found().to_vec();
    sandbox.staged = stage
        .dirs()
        .iter()
        .map(|d| exec::Staged {
            dir: d.path().to_path_buf(),
            upper: d.upper().to_path_buf(),
            work: d.work().to_path_buf(),
            through: d.through().to_vec(),
        })
        .chain(views.staged())
        .collect();
    // Kept to explain the command's permission errors afterwards (LIVE-4).
    let explain = (
        sandbox.clone(),
        scope.path().join(validated.cwd().as_path()),
    );
    let hidden = sandbox.hidden.clone();
    let job = Job {
        program: SHELL.into(),
        args: vec!["-c".into(), validated.command().into()],
        workdir: WorkDir {
            lease: scope,
            rel: validated.cwd().clone(),
        },
        env: command_env(&temp, &toolchains.path)
            .into_iter()
            .chain(toolchains.env)
            .chain(options.env.iter().map(|(k, v)| (k.into(), v.into())))
            .collect(),
        sandbox,
        limits: Limits {
            timeout: validated.timeout(),
            stdout_cap: OUTPUT_CAP,
            stderr_cap: OUTPUT_CAP,
            on_cap: OnCap::Truncate,
        },
        merge_stderr: false,
    };
    let outcome = temp.scope(exec::run(job, ctx)).await.map_err(exec_error);
    // Before the temp dir goes: a path in it is explained by the directory it was in.
    let denials = match &outcome {
        Ok(out) => denials(explain, out).await,
        Err(_) => Vec::new(),
    };
    // The command's whole tree has ended: apply what of its git changes is allowed.
    let read_only = outcome
        .as_ref()
        .map(|o| o.staged_read_only.clone())
        .unwrap_or_default();
    let caches = views.report(
        &read_only
            .iter()
            .map(|(dir, _)| dir.clone())
            .collect::<Vec<_>>(),
        &hidden,
    );
    let git = exec::blocking::off_async(move || stage.apply(&read_only, &autorun))
        .await
        .unwrap_or_default();
    // Removing a large temp dir is file-system work: keep it off the async threads.
    let _ = exec::blocking::off_async(move || temp.remove()).await;
    let mut output = interpret(outcome?, denials, git)?;
    output.caches = caches;
    Ok(output)
}

/// The name of the git directories' staging area in the call's temp dir.
const GIT_STAGE: &str = "git-stage";

/// TRUST-3: a writable root (the workspace, a writable extra path) that is `$HOME` or holds it,
/// or that is, holds or lies in a toolchain cache, would let the command change startup files,
/// programs on `PATH` or the caches every later build runs from: refused before anything runs.
fn refuse_user_stores(
    workspace: &Path,
    extra: &[crate::Extra],
    home: Option<&Path>,
) -> Result<(), ToolError> {
    let Some(home) = home else {
        return Ok(());
    };
    let home = home.canonicalize().unwrap_or_else(|_| home.to_path_buf());
    let caches = crate::toolchains::caches_under(&home);
    let roots =
        std::iter::once(workspace).chain(extra.iter().filter(|e| e.write()).map(|e| e.path()));
    for root in roots {
        let refuse = |why: String| {
            Err(ToolError::new(
                ErrorCode::ExecPathInvalid,
                format!(
                    "{} {why}, so the command did not run; work in a project directory \
                     instead (caches are written through a private view with the host's \
                     toolchains option)",
                    root.display()
                ),
            )
            .with_detail("path", root.to_string_lossy().into_owned()))
        };
        if home.starts_with(root) {
            return refuse(format!(
                "is your home directory or holds it ({}): a command there could change your \
                 startup files and the programs on your PATH",
                home.display()
            ));
        }
        if let Some(cache) = caches
            .iter()
            .find(|c| c.starts_with(root) || root.starts_with(c))
        {
            return refuse(format!(
                "is, holds or lies in the toolchain cache {}, which every later build runs from",
                cache.display()
            ));
        }
    }
    Ok(())
}

/// The name of the caches' private views in the call's temp dir.
const CACHE_VIEWS: &str = "cache-views";

/// TRUST-1: a root in a git directory or too large to search is the caller's path to change;
/// a staging area that cannot be made is a fault of this machine. Nothing ran.
fn stage_error(e: gitstage::StageError) -> ToolError {
    let code = match e {
        gitstage::StageError::InGitDir { .. } | gitstage::StageError::TooLarge { .. } => {
            ErrorCode::ExecPathInvalid
        }
        _ => ErrorCode::ExecIoFailed,
    };
    ToolError::new(code, format!("{e}; nothing ran"))
}

/// TRUST-2: fsguard's default auto-run list, as the walk of the writable roots asks it.
fn autorun(parent: &Path, name: &std::ffi::OsStr, _is_dir: bool) -> bool {
    fsguard::autorun_matches_default(parent, name)
}

/// LIVE-4: the accesses the output names that the sandbox's policy refused. The scan is cheap
/// and touches nothing; only when it finds a permission error does the policy look at files,
/// off the async threads.
async fn denials(
    (sandbox, cwd): (SandboxSpec, PathBuf),
    out: &exec::Outcome,
) -> Vec<crate::types::Denial> {
    let mentions = exec::denials::scan_output(&out.stdout, &out.stderr);
    if mentions.is_empty() {
        return Vec::new();
    }
    let view = out.view();
    exec::blocking::off_async(move || exec::denials::explain(&sandbox, &cwd, view, &mentions))
        .await
        .unwrap_or_default()
        .into_iter()
        .map(Into::into)
        .collect()
}

/// An extra path that is a hidden directory or lies inside one (the host's state directory)
/// is refused: the sandbox hides a hidden directory *beneath* a grant, but a grant
/// on the directory itself would hand it over. Compared by the kernel's own names for the
/// pinned descriptors (`/proc/self/fd`), not the text the model wrote: on a case-insensitive
/// filesystem `.LOCAL/state` is the same directory.
fn refuse_hidden(extra: &[Extra], hidden: &[PathBuf]) -> Result<(), ToolError> {
    use std::os::fd::AsFd;
    // Where the kernel does not name descriptors (not Linux), the canonical path stands in.
    #[cfg(target_os = "linux")]
    let flags = rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC;
    #[cfg(not(target_os = "linux"))]
    let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC;
    let hidden: Vec<PathBuf> = hidden
        .iter()
        .filter_map(|h| {
            let fd = rustix::fs::open(h, flags, rustix::fs::Mode::empty()).ok()?;
            fsguard::kernel_path(fd.as_fd()).or_else(|| h.canonicalize().ok())
        })
        .collect();
    for e in extra {
        let name = match e.pin() {
            Pin::Dir(lease) => fsguard::kernel_path(lease.as_fd()),
            Pin::File(fd) => fsguard::kernel_path(fd.as_fd()),
        }
        .or_else(|| e.path().canonicalize().ok())
        .unwrap_or_else(|| e.path().to_path_buf());
        if let Some(h) = hidden.iter().find(|h| name.starts_with(h)) {
            return Err(ToolError::new(
                ErrorCode::ExecPathInvalid,
                format!(
                    "extra path {} is inside agent-exec's own state directory {} (grants, \
                     mirrors, locks), which no command may read or change; the command did not \
                     run",
                    e.path().display(),
                    h.display()
                ),
            )
            .with_detail("path", e.path().to_string_lossy().into_owned()));
        }
    }
    Ok(())
}

fn verify_lease(scope: &RootLease) -> Result<(), ToolError> {
    scope.verify().map_err(|e| {
        ToolError::new(
            ErrorCode::ExecCancelled,
            format!("{e}; the command did not run"),
        )
    })
}

fn exec_error(e: ExecError) -> ToolError {
    match e {
        ExecError::Cancelled(reason) => reason.to_error(),
        other => ToolError::new(other.code(), other.to_string()),
    }
}

fn scan_error(e: ScanError) -> ToolError {
    let code = match e {
        ScanError::RootIo { .. } => ErrorCode::ExecIoFailed,
        _ => ErrorCode::ExecPathInvalid,
    };
    ToolError::new(code, format!("{e}; the command did not run"))
}

/// CMD-9, TRUST-3: the hard-linked files (regular files with more than one link: a name
/// inside for an inode that may have a name outside) of the scope and of every writable extra
/// path. On Linux they are kept read-only in the sandbox, the paths to bind returned (the files
/// themselves, or above `fsguard::READ_ONLY_BINDS` their directories, `fsguard::read_only_cover`); a root
/// whose links only the root itself could cover refuses the call. Elsewhere any one refuses it
/// (`AGENT_EXEC_PATH_INVALID`, at most [`HARD_LINKS_SHOWN`] paths in the message, all counted,
/// the shown ones in `hardLinks`).
async fn hard_link_scan(
    scope: &Arc<RootLease>,
    extra: &[Extra],
) -> Result<Vec<PathBuf>, ToolError> {
    let scope = Arc::clone(scope);
    let writable: Vec<Extra> = extra.iter().filter(|e| e.write()).cloned().collect();
    let found =
        exec::blocking::off_async(move || -> Result<Vec<(PathBuf, Vec<PathBuf>)>, ToolError> {
            // Mounts below the scope are inside the sandbox's grant too, so they are scanned.
            let options = ScanOptions::new().cross_mounts(true);
            let paths = |report: fsguard::ScanReport| -> Vec<PathBuf> {
                report.links.into_iter().map(|l| l.path).collect()
            };
            let mut found = vec![(
                scope.path().to_path_buf(),
                paths(scan_hard_links_in(&scope, &options).map_err(scan_error)?),
            )];
            // Each extra path as it was validated (its pinned descriptor), never looked up again.
            for extra in &writable {
                let links = match extra.pin() {
                    Pin::Dir(lease) => {
                        paths(scan_hard_links_in(lease, &options).map_err(scan_error)?)
                    }
                    Pin::File(fd) => {
                        let meta = rustix::fs::fstat(&**fd).map_err(|e| {
                            ToolError::new(
                                ErrorCode::ExecPathInvalid,
                                format!(
                                    "cannot check {}: {e}; the command did not run",
                                    extra.path().display()
                                ),
                            )
                        })?;
                        if meta.st_nlink > 1 {
                            vec![extra.path().to_path_buf()]
                        } else {
                            Vec::new()
                        }
                    }
                };
                found.push((extra.path().to_path_buf(), links));
            }
            Ok(found)
        })
        .await
        .map_err(|e| {
            ToolError::new(
                ErrorCode::ExecIoFailed,
                format!("the hard-link scan failed: {e}"),
            )
        })??;
    if found.iter().all(|(_, links)| links.is_empty()) {
        return Ok(Vec::new());
    }
    let why = if cfg!(target_os = "linux") {
        match fsguard::read_only_cover_roots(&found) {
            Ok(frozen) => return Ok(frozen),
            Err(e) => {
                format!("{e}, too many to keep read-only one by one, so the command did not run")
            }
        }
    } else {
        "a hard link may be another name of a file outside the workspace, so the command did not \
         run"
        .to_owned()
    };
    let all: Vec<PathBuf> = found.into_iter().flat_map(|(_, links)| links).collect();
    Err(refuse_links(&all, &why))
}

/// The refusal of a call for its hard-linked files, `why` said after the list.
fn refuse_links(found: &[PathBuf], why: &str) -> ToolError {
    let shown: Vec<String> = found
        .iter()
        .take(HARD_LINKS_SHOWN)
        .map(|p| p.display().to_string())
        .collect();
    let more = found.len().saturating_sub(HARD_LINKS_SHOWN);
    let mut list = shown.join(", ");
    if more > 0 {
        list.push_str(&format!(" and {more} more"));
    }
    ToolError::new(
        ErrorCode::ExecPathInvalid,
        format!(
            "{} hard-linked file(s) where the command could write: {list}. {why}; replace each \
             with a copy (e.g. `cp --remove-destination f f.copy && mv f.copy f`; uv \
             `--link-mode=copy`, pnpm `package-import-method=copy`, `git clone --no-hardlinks`) \
             or remove the extra name",
            found.len()
        ),
    )
    .with_detail("hardLinks", shown)
    .with_detail("hardLinkCount", found.len())
}

/// The prefix of every call's temp dir under [`std::env::temp_dir`] (the host's orphan sweep
/// knows it).
pub const TEMP_PREFIX: &str = "agent-exec-cmd-";

/// CMD-13: a documented, minimal environment; nothing of the host's.
fn command_env(temp: &exec::CallTemp, toolchain_path: &[PathBuf]) -> Vec<(OsString, OsString)> {
    let mut path = OsString::new();
    for dir in toolchain_path {
        path.push(dir);
        path.push(":");
    }
    path.push(SANDBOX_PATH);
    let mut env = vec![("PATH".into(), path)];
    env.extend(temp.home_and_tmpdir());
    env.extend([
        ("LANG".into(), "C.UTF-8".into()),
        ("LC_ALL".into(), "C.UTF-8".into()),
        ("TERM".into(), "dumb".into()),
    ]);
    env
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// CMD-5, CMD-6, CMD-8: the outcome as the model sees it.
fn interpret(
    out: exec::Outcome,
    denials: Vec<crate::types::Denial>,
    mut git: gitstage::Report,
) -> Result<CommandOutput, ToolError> {
    let status = match &out.end {
        End::Cancelled(reason @ CancelReason::Revoked(_)) => return Err(reason.to_error()),
        End::Cancelled(CancelReason::Deadline) | End::TimedOut => Status::TimedOut,
        End::Cancelled(_) | End::LeaseLost => Status::Cancelled,
        End::LimitExceeded(_) => Status::LimitExceeded,
        // `command` truncates (CMD-5): a cap never stops it, so only the exit tells.
        End::Exited | End::OutputLimit if out.exit_code.is_some() => Status::Exited,
        End::Exited | End::OutputLimit => Status::Signaled,
    };
    let output = CommandOutput {
        stdout: text(&out.stdout),
        stderr: text(&out.stderr),
        exit_code: if status == Status::Exited {
            out.exit_code
        } else {
            None
        },
        status,
        truncated: out.stdout_truncated || out.stderr_truncated,
        partial_execution: matches!(
            status,
            Status::TimedOut | Status::Cancelled | Status::LimitExceeded
        ),
        descendants_stopped: out.descendants_stopped,
        sandbox: format!("{}; {}", out.enforcement, out.limits),
        limit_exceeded: match &out.end {
            End::LimitExceeded(hit) => Some(hit.explain()),
            _ => None,
        },
        denials,
        executable_changes: std::mem::take(&mut git.executable_changes),
        git,
        caches: exec::CacheReport::default(),
    };
    if out.end == End::LeaseLost {
        let mut err = ToolError::new(
            ErrorCode::ExecCancelled,
            "the work root was replaced or moved while the command ran, so everything it started \
             was stopped; changes already made stay. Start a new turn on the current folder",
        );
        if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(&output) {
            for (key, value) in fields {
                err = err.with_detail(key, value);
            }
        }
        err = err.with_detail("status", "cancelled").with_detail(
            "partialExecution",
            out.main_stopped || output.partial_execution,
        );
        return Err(err);
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_that_is_home_or_holds_or_lies_in_a_cache_is_refused() {
        let home = Path::new("/home/u");
        let refused = |ws: &str| {
            refuse_user_stores(Path::new(ws), &[], Some(home))
                .err()
                .map(|e| e.message().to_owned())
        };
        assert!(refused("/home/u").unwrap().contains("home directory"));
        assert!(refused("/home").unwrap().contains("home directory"));
        assert!(refused("/home/u/go").unwrap().contains("go/pkg/mod"));
        assert!(
            refused("/home/u/.cargo/registry/src/x")
                .unwrap()
                .contains(".cargo/registry")
        );
        assert_eq!(refused("/home/u/projects/p"), None);
        assert_eq!(refused("/srv/ws"), None);
    }

    #[test]
    fn exit_codes_are_results_not_errors() {
        let mut out = exec::Outcome::default();
        out.exit_code = Some(3);
        out.stdout = b"partial".to_vec();
        let r = interpret(out, Vec::new(), gitstage::Report::default()).unwrap();
        assert_eq!(r.status, Status::Exited);
        assert_eq!(r.exit_code, Some(3));
        assert!(!r.partial_execution);
    }

    #[test]
    fn timeout_and_cancellation_are_partial_with_no_exit_code() {
        let mut out = exec::Outcome::default();
        out.end = End::TimedOut;
        out.signal = Some(9);
        out.main_stopped = true;
        out.descendants_stopped = 2;
        let r = interpret(out, Vec::new(), gitstage::Report::default()).unwrap();
        assert_eq!(
            (r.status, r.exit_code, r.partial_execution),
            (Status::TimedOut, None, true)
        );
        assert_eq!(r.descendants_stopped, 2);

        let mut out = exec::Outcome::default();
        out.end = End::Cancelled(CancelReason::TurnEnded);
        let r = interpret(out, Vec::new(), gitstage::Report::default()).unwrap();
        assert_eq!((r.status, r.partial_execution), (Status::Cancelled, true));

        let mut out = exec::Outcome::default();
        out.end = End::Cancelled(CancelReason::Deadline);
        assert_eq!(
            interpret(out, Vec::new(), gitstage::Report::default())
                .unwrap()
                .status,
            Status::TimedOut
        );
    }

    #[test]
    fn a_revocation_is_the_public_permission_error() {
        let mut out = exec::Outcome::default();
        out.end = End::Cancelled(CancelReason::Revoked(
            toolscope::Denial::AuthorityUnavailable,
        ));
        let err = interpret(out, Vec::new(), gitstage::Report::default()).unwrap_err();
        assert_eq!(err.code(), ErrorCode::PermissionDenied);
    }

    #[test]
    fn a_lost_lease_is_cancelled_with_the_partial_result_in_details() {
        let mut out = exec::Outcome::default();
        out.end = End::LeaseLost;
        out.main_stopped = true;
        out.stdout = b"so far".to_vec();
        let err = interpret(out, Vec::new(), gitstage::Report::default()).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ExecCancelled);
        assert_eq!(err.details()["status"], "cancelled");
        assert_eq!(err.details()["stdout"], "so far");
        assert_eq!(err.details()["partialExecution"], true);
    }

    #[test]
    fn a_signal_without_exit_is_signaled() {
        let mut out = exec::Outcome::default();
        out.signal = Some(31);
        let r = interpret(out, Vec::new(), gitstage::Report::default()).unwrap();
        assert_eq!(
            (r.status, r.exit_code, r.partial_execution),
            (Status::Signaled, None, false)
        );
    }
}
