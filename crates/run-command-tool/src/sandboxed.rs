//! A decided, gated command inside the run_command sandbox (RCS-1…RCS-3, RC-2, RC-6, RC-7).
//!
//! **Owns:** the grants (working directory and call temp dir read-write, `$HOME` read, the
//! existing caches and the approved `write_paths` read-write), `hidden` and `protected`, the
//! network switch, the program (resolved on the sandbox's `PATH` after the decision), the
//! environment (module `env`), and turning `exec`'s [`Outcome`](exec::Outcome) into the result
//! with its denials. **Refuses to know:** gates (done before), masking and hints (module `run`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use argv_policy::{Policy, RunCommandArgs, Via};
use exec::{Access, End, ExecError, Grant, Job, Limits, Network, OnCap, SandboxSpec, WorkDir};
use fsguard::RootLease;
use toolscope::{CallContext, CancelReason, ErrorCode, ToolError};

use crate::env::{self, Readable};
use crate::gitguard::{self, Guarded, Snapshot};
use crate::roots::{self, WritePath};
use crate::types::{Denial, OUTPUT_CAP, RunCommandOptions, Status};

/// The prefix of every call's temp dir under the system temp dir (the host's orphan sweep
/// knows it).
pub const TEMP_PREFIX: &str = "agent-exec-rc-";

/// stderr is merged into stdout; its own cap only bounds what a merge failure could leave.
const STDERR_CAP: usize = 4096;

/// What ran and how it ended, before masking.
#[derive(Debug)]
pub(crate) struct Ran {
    pub(crate) output: String,
    pub(crate) exit_code: Option<i32>,
    pub(crate) status: Status,
    pub(crate) truncated: bool,
    pub(crate) descendants_stopped: usize,
    pub(crate) denials: Vec<Denial>,
    pub(crate) sandbox: String,
    /// The limit the command hit, explained (LIM-2).
    pub(crate) limit: Option<String>,
    /// It ran in a private network namespace with only its own loopback (NET-1).
    pub(crate) own_loopback: bool,
}

/// The program to start, found on the sandbox's `PATH` (a bare name) or taken against the
/// working directory (a path). Not canonicalised: multi-call binaries (rustup's proxies
/// `cargo` → `rustup`, busybox) choose what to be by the name they are started as.
pub(crate) fn resolve_program(
    name: &str,
    path: &[PathBuf],
    workdir: &Path,
) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let p = roots::normalize(workdir, Path::new(name));
        return if executable(&p) {
            Ok(p)
        } else {
            Err(format!(
                "{} is not an executable file; check the path",
                p.display()
            ))
        };
    }
    path.iter()
        .map(|d| d.join(name))
        .find(|p| executable(p))
        .ok_or_else(|| {
            format!(
                "`{name}` was not found on the sandbox's PATH ({}); install it, or name it by \
                 its absolute path",
                std::env::join_paths(path)
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default()
            )
        })
}

/// Everything the sandboxed run needs, checked before the gate (nothing changed yet).
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
    pub(crate) path: Vec<PathBuf>,
    pub(crate) write_paths: Vec<WritePath>,
    pub(crate) private: Vec<PathBuf>,
    pub(crate) network: bool,
    /// What of `$HOME` the command reads: all of it but `private` (`None`), or only these
    /// locations (with network, TRUST-6).
    pub(crate) home_view: Option<Vec<PathBuf>>,
    /// The toolchains' caches the command changes through a private view (TRUST-3).
    pub(crate) caches: Vec<PathBuf>,
}

/// Checks the roots and resolves the program; `Ok(Err(message))` when the program does not
/// exist (a not-executed result, like a shell's `command not found`). `env` is the host's
/// environment (a later entry of a name wins): its `PATH` and relocation variables.
pub(crate) fn prepare(
    args: &RunCommandArgs,
    via: &Via,
    workdir: &Path,
    home: &Path,
    policy: &Policy,
    host_hidden: &[PathBuf],
    env: &[(String, String)],
) -> Result<Result<Prepared, String>, ToolError> {
    roots::refuse_home_root(workdir, home, "the working directory")?;
    // TRUST-6: the private list, also where the host's environment relocates it.
    let mut private: Vec<PathBuf> = policy.private_paths_in(home, env);
    // Neither a private location nor the host's own state may become writable.
    let never: Vec<PathBuf> = private
        .iter()
        .cloned()
        .chain(host_hidden.iter().map(|h| roots::canonical(h)))
        .collect();
    // A hidden location as the working directory would be replaced by an empty one inside the
    // sandbox (exec then reports a swapped path): say what is wrong instead.
    if let Some(p) = never.iter().find(|p| workdir.starts_with(p)) {
        return Err(ToolError::new(
            ErrorCode::ExecPathInvalid,
            format!(
                "the working directory {} is or lies inside the private location {} (keys, \
                 tokens, histories, or the host's own state), which run_command never shows to \
                 a command; a private location cannot be the working directory: pick the \
                 project directory",
                workdir.display(),
                p.display()
            ),
        ));
    }
    let argv = &args.argv;
    let network = args.network;
    let host_path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone());
    let path_dirs = roots::path_dirs(
        std::ffi::OsStr::new(host_path.as_deref().unwrap_or("")),
        home,
    );
    let write_paths = roots::write_paths(&args.write_paths, workdir, home, &never, &path_dirs)?;
    // TRUST-3: a command changes a cache only in its private view, which would cover a working
    // directory or a write path inside it; a root holding a cache (`~/go` holds
    // `~/go/pkg/mod`, even before it exists) would let the command write the cache itself,
    // around its view. Either is refused, saying why.
    let all_caches = policy.cache_paths_in(home, env);
    let inside_cache = |p: &Path| {
        all_caches.iter().find(|c| {
            let c = roots::canonical(c);
            p.starts_with(&c) || c.starts_with(p)
        })
    };
    for (what, path) in std::iter::once(("the working directory", workdir)).chain(
        write_paths
            .iter()
            .map(|w| ("the write path", w.path.as_path())),
    ) {
        if let Some(cache) = inside_cache(path) {
            return Err(ToolError::new(
                ErrorCode::ExecPathInvalid,
                format!(
                    "{what} {} is, holds or lies in the toolchains' cache {}, which a command \
                     only changes in a private copy (the user's caches never change); work in \
                     a project directory instead",
                    path.display(),
                    cache.display()
                ),
            ));
        }
    }
    // TRUST-6: other projects' `.env` files are hidden too. The walk leaves out what the call
    // may write (a hidden file there would need a mount cover) and what is hidden already.
    let skip: Vec<PathBuf> = never
        .iter()
        .cloned()
        .chain(all_caches.iter().cloned())
        .chain(write_paths.iter().map(|w| w.path.clone()))
        .collect();
    private.extend(crate::envfiles::other_projects_env_files(home, workdir, &skip).files);
    for w in &write_paths {
        if let Some(f) = roots::missing_startup_files(&w.path, home) {
            return Err(ToolError::new(
                ErrorCode::ExecPathInvalid,
                format!(
                    "write_paths entry {} would let the command create the shell startup file \
                     {}, which runs in every later shell; name a narrower directory",
                    w.path.display(),
                    f.display()
                ),
            ));
        }
    }
    // TRUST-6: with network, every readable byte could leave: `$HOME` narrows to the
    // toolchains' homes and settings, and the caches to the toolchains' own folders.
    let (home_view, caches) = if network {
        (
            Some(policy.network_home_paths(home, env)),
            policy.network_cache_paths(home, env),
        )
    } else {
        (None, all_caches)
    };
    let readable = Readable {
        home,
        workdir,
        private: &private,
        allowed: home_view.as_deref(),
    };
    let path = env::sandbox_path(host_path.as_deref(), &readable);
    // A script runs in the shell the decision validated it for: `sh` is /bin/sh, `bash` is
    // found like any program.
    let first = match via {
        Via::Shell(_) if argv[0] == "sh" => "/bin/sh",
        _ => argv[0].as_str(),
    };
    let program = match resolve_program(first, &path, workdir) {
        Ok(p) => p,
        Err(message) => return Ok(Err(message)),
    };
    Ok(Ok(Prepared {
        program,
        args: argv[1..].to_vec(),
        path,
        write_paths,
        private,
        network,
        home_view,
        caches,
    }))
}

/// Runs the prepared command in the sandbox, then the git guard (module `gitguard`).
pub(crate) async fn run(
    prepared: Prepared,
    workdir: Arc<RootLease>,
    home: &Path,
    session_views: &Arc<exec::SessionViews>,
    options: &RunCommandOptions,
    tap: Option<exec::Tap>,
    ctx: &CallContext,
) -> Result<(Ran, Guarded), ToolError> {
    let work = workdir.path().to_path_buf();
    let temp = exec::CallTemp::create(TEMP_PREFIX, &work)
        .map_err(|e| ToolError::new(ErrorCode::ExecIoFailed, e.to_string()))?;
    let describe = |e: exec::SpecError| {
        ToolError::new(
            ErrorCode::ExecIoFailed,
            format!("cannot describe the sandbox: {e}"),
        )
    };
    let mut grants = vec![
        Grant::leased(&workdir, Access::ReadWrite).map_err(describe)?,
        Grant::leased(temp.lease(), Access::ReadWrite).map_err(describe)?,
    ];
    // $HOME is read (its toolchains live there) except the hidden private locations; with
    // network, only the allowed locations that exist (TRUST-6).
    match &prepared.home_view {
        None => {
            if let Ok(fd) = roots::pin(home) {
                grants.push(Grant::pinned(home, Arc::new(fd), Access::Read));
            }
        }
        Some(allowed) => {
            for (path, fd) in roots::existing(allowed) {
                grants.push(Grant::pinned(path, Arc::new(fd), Access::Read));
            }
        }
    }
    let mut writable: Vec<PathBuf> = vec![work.clone()];
    // TRUST-3: each cache writable through a private view (`exec::SessionViews`).
    let mut caches = Vec::new();
    for (path, fd) in roots::caches(&prepared.caches) {
        writable.push(path.clone());
        caches.push(path.clone());
        grants.push(Grant::pinned(path, Arc::new(fd), Access::ReadWrite));
    }
    for w in &prepared.write_paths {
        writable.push(w.path.clone());
        grants.push(Grant::pinned(
            w.path.clone(),
            Arc::clone(&w.fd),
            Access::ReadWrite,
        ));
    }
    let network = if prepared.network {
        Network::All
    } else {
        Network::None
    };
    let mut sandbox = SandboxSpec::for_argv(grants, network);
    // Its size is bounded like `command`'s (LIM-1).
    sandbox.temp_dir = Some(temp.lease().path().to_path_buf());
    // Every private location, whether it exists or not: one that is missing now still splits
    // its existing ancestors' Landlock rules (linux-sandbox's `split`), so a `~/.config/gh` the
    // user makes while the command runs (`gh auth login`) is not granted.
    sandbox.hidden = prepared
        .private
        .iter()
        .chain(&options.hidden)
        .cloned()
        .collect();
    // The session's kept views where no other call of the session holds them, else the call's
    // own (TRUST-3). Not kept where the system temp dir lies in $HOME: every session's
    // commands read $HOME, so another session could read and plant files in them.
    let fresh = temp.root().join(CACHE_VIEWS);
    let temp_in_home = roots::canonical(&std::env::temp_dir()).starts_with(home);
    let views = if temp_in_home {
        exec::CacheViews::create(&caches, &fresh)
    } else {
        session_views.lease(&caches, &sandbox.hidden, &fresh)
    }
    .map_err(|e| {
        ToolError::new(
            ErrorCode::ExecIoFailed,
            format!("cannot make the caches' private views in the temp dir: {e}"),
        )
    })?;
    let protected_roots = writable.clone();
    let home_owned = home.to_path_buf();
    let host_protected = options.protected.clone();
    // The caches' own repositories (cargo's git checkouts) are the toolchains' to update: they
    // are checked after the run, not made read-only.
    let repo_roots: Vec<PathBuf> = std::iter::once(work.clone())
        .chain(prepared.write_paths.iter().map(|w| w.path.clone()))
        .collect();
    // The guard walks the roots a person works in: the working directory and the write_paths.
    // Not the toolchains' caches: the repositories there (cargo's git checkouts and databases)
    // are driven by the toolchains through libgit2 or `git -C` of their own, never by a person
    // or a shell prompt, and walking `~/.cargo/registry` + `~/.cache` twice per call cost about
    // 110 ms of a 130 ms call here (`cargo xtask bench call`). Nor the call's temp dir, which
    // is removed at the end of the call, whatever it holds.
    let guard_roots = repo_roots.clone();
    let roots_for_snapshot = guard_roots.clone();
    let (protected, before) = tokio::task::spawn_blocking(move || {
        let mut p = roots::protected(&protected_roots, &home_owned, &host_protected);
        // Taken after `protected` made the missing `.git/hooks` directories.
        let before = Snapshot::take(&roots_for_snapshot, gitguard::ENTRY_BUDGET);
        p.extend(gitguard::protected_paths(&before, &repo_roots));
        p.sort();
        p.dedup();
        (p, before)
    })
    .await
    .map_err(|e| ToolError::new(ErrorCode::ExecIoFailed, format!("git guard: {e}")))?;
    // TRUST-1: every git directory of the roots a person works in through a private copy for
    // the whole call, applied afterwards from an allowlist. What lies inside one needs no
    // read-only bind of its own (it would find the copy, not the file it pinned).
    let stage_roots = guard_roots.clone();
    let stage_base = temp.root().join(GIT_STAGE);
    let stage = tokio::task::spawn_blocking(move || {
        let roots: Vec<&Path> = stage_roots.iter().map(PathBuf::as_path).collect();
        gitstage::Stage::for_roots(&roots, &stage_base, &autorun)
    })
    .await
    .map_err(|e| gitstage::StageError::Io(std::io::Error::other(e)))
    .and_then(|r| r)
    .map_err(stage_error)?;
    sandbox.protected = protected
        .into_iter()
        .filter(|p| !stage.dirs().iter().any(|d| p.starts_with(d.path())))
        .chain(stage.protect())
        .collect();
    sandbox.protected.sort();
    sandbox.protected.dedup();
    // TRUST-1: what the stage found, by identity: a directory swapped for a link since then
    // refuses the run instead of leaving the one found unprotected.
    sandbox.found_at = stage.found().to_vec();
    // TRUST-3: a file with another name elsewhere (a store's, another clone's) is read-only.
    let linked_roots: Vec<PathBuf> = prepared
        .write_paths
        .iter()
        .map(|w| w.path.clone())
        .collect();
    sandbox.frozen = crate::links::frozen(&workdir, &linked_roots).await?;
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
    // Declared before the run: if this call is dropped mid-run, the run (and with it the
    // command's tree) is dropped first, then this guard checks the roots.
    let pending = gitguard::Pending::new(before, guard_roots);

    let readable = Readable {
        home,
        workdir: &work,
        private: &prepared.private,
        allowed: prepared.home_view.as_deref(),
    };
    let host: Vec<(String, String)> = std::env::vars().collect();
    let tmpdir = temp
        .home_and_tmpdir()
        .into_iter()
        .find(|(k, _)| k == "TMPDIR")
        .map(|(_, v)| PathBuf::from(v))
        .unwrap_or_else(|| temp.root().join("tmp"));
    let env = env::build(
        &host,
        &prepared.path,
        home,
        &tmpdir,
        &readable,
        &options.env,
    );
    let explain = (sandbox.clone(), work.clone());
    let hidden = sandbox.hidden.clone();
    let job = Job {
        program: prepared.program.clone(),
        args: prepared.args.iter().map(Into::into).collect(),
        workdir: WorkDir {
            lease: workdir,
            rel: fsguard::RelPath::root(),
        },
        env,
        sandbox,
        limits: Limits {
            timeout: options.timeout,
            stdout_cap: OUTPUT_CAP,
            stderr_cap: STDERR_CAP,
            on_cap: OnCap::HeadAndTail,
        },
        merge_stderr: true,
    };
    let outcome = match tap {
        Some(tap) => temp.scope(exec::run_tapped(job, tap, ctx)).await,
        None => temp.scope(exec::run(job, ctx)).await,
    }
    .map_err(exec_error);
    // Nothing the command started is alive now (exec stops the whole tree before returning):
    // the allowed git changes first, then the guard looks at what the roots hold.
    let read_only = outcome
        .as_ref()
        .map(|o| o.staged_read_only.clone())
        .unwrap_or_default();
    let cache_report = views.report(
        &read_only
            .iter()
            .map(|(dir, _)| dir.clone())
            .collect::<Vec<_>>(),
        &hidden,
    );
    let guard = tokio::task::spawn_blocking(move || {
        let git = stage.apply(&read_only, &autorun);
        Guarded {
            git,
            caches: cache_report,
            ..pending.finish()
        }
    })
    .await
    .unwrap_or_default();
    // With network, a read refused below `$HOME` is the narrowed view's (TRUST-6).
    let narrowed = prepared.home_view.is_some().then(|| home.to_path_buf());
    let denials = match &outcome {
        Ok(out) => denials(explain, out, narrowed).await,
        Err(_) => Vec::new(),
    };
    let _ = tokio::task::spawn_blocking(move || temp.remove()).await;
    let outcome = outcome.map_err(|e| match guard.message() {
        Some(m) => ToolError::new(e.code(), format!("{}; {m}", e.message())),
        None => e,
    })?;
    Ok((interpret(outcome, denials)?, guard))
}

/// The name of the caches' private views in the call's temp dir.
const CACHE_VIEWS: &str = "cache-views";

/// The name of the git directories' staging area in the call's temp dir.
const GIT_STAGE: &str = "git-stage";

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

pub(crate) fn exec_error(e: ExecError) -> ToolError {
    match e {
        ExecError::Cancelled(reason) => reason.to_error(),
        other => ToolError::new(other.code(), other.to_string()),
    }
}

/// LIVE-4: the accesses the output names that the policy refused, worded for run_command.
/// `narrowed`: the home a call with network reads only the allowlist of (TRUST-6).
async fn denials(
    (sandbox, cwd): (SandboxSpec, PathBuf),
    out: &exec::Outcome,
    narrowed: Option<PathBuf>,
) -> Vec<Denial> {
    let mentions = exec::denials::scan_output(&out.stdout, &out.stderr);
    if mentions.is_empty() {
        return Vec::new();
    }
    let view = out.view();
    tokio::task::spawn_blocking(move || exec::denials::explain(&sandbox, &cwd, view, &mentions))
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|d| word(d, narrowed.as_deref()))
        .collect()
}

/// A denial in run_command's terms (RC-13's remedies). `narrowed`: the home a call with
/// network reads only the allowlist of (TRUST-6), which explains a read there no other cause
/// does.
pub(crate) fn word(d: exec::denials::Denial, narrowed: Option<&Path>) -> Denial {
    use exec::denials::{Cause, DeniedAccess as A};
    let writing = matches!(d.access, A::Write | A::Create);
    let (reason, remedy) = d.cause.common_words().unwrap_or(match d.cause {
        Cause::Hidden => (
            "a private location (keys, tokens, histories) or the host's own state",
            "never readable or writable from run_command; if the command needs a credential, \
             report that to the user",
        ),
        Cause::SystemSecret => (
            "a system file that only root or a group may read",
            "use argv sudo (['sudo', '<binary>', …], asks for the password) if the user agrees",
        ),
        Cause::ReadOnly { .. } if writing => (
            "a read-only location (the system, $HOME, or a protected file such as .git/hooks \
             or a shell startup file)",
            "write inside the working directory, or name the directory in write_paths (the \
             user confirms; outside $HOME or in a dot-directory, ~/bin or a PATH directory, the \
             password)",
        ),
        _ if writing => (
            "outside the writable roots (the working directory, the call's temp dir, the \
             toolchains' caches through a private copy, write_paths)",
            "write inside the working directory, or name the directory in write_paths (the \
             user confirms; outside $HOME or in a dot-directory, ~/bin or a PATH directory, the \
             password)",
        ),
        _ if narrowed.is_some_and(|home| d.path.starts_with(home)) => (
            "outside what a call with network reads of $HOME: the toolchains' homes and \
             caches, the PATH directories and git's and the package managers' settings \
             (`agent-exec doctor` lists them)",
            "read it in a call without network (nothing of $HOME but the private locations is \
             hidden there), or copy what the command needs into the working directory",
        ),
        _ if d.access == A::Execute => (
            "not executable in the sandbox",
            "run it from the working directory, $HOME or the system, or through its \
             interpreter",
        ),
        _ => (
            "outside the working directory, $HOME and the system runtime",
            "name it in write_paths (which also makes it readable), or ask for sandbox: false \
             as a last resort",
        ),
    });
    Denial {
        path: d.path.to_string_lossy().into_owned(),
        access: d.access.as_str(),
        reason: reason.to_owned(),
        remedy: remedy.to_owned(),
    }
}

/// The outcome as the model sees it (before masking).
fn interpret(out: exec::Outcome, denials: Vec<Denial>) -> Result<Ran, ToolError> {
    let status = match &out.end {
        End::Cancelled(reason @ CancelReason::Revoked(_)) => return Err(reason.to_error()),
        End::Cancelled(CancelReason::Deadline) | End::TimedOut => Status::TimedOut,
        End::Cancelled(_) => Status::Cancelled,
        End::LeaseLost => {
            return Err(ToolError::new(
                ErrorCode::ExecCancelled,
                "the working directory was replaced or moved while the command ran, so \
                 everything it started was stopped; changes already made stay. Start a new \
                 session on the current folder",
            ));
        }
        End::LimitExceeded(_) => Status::LimitExceeded,
        End::Exited | End::OutputLimit if out.exit_code.is_some() => Status::Exited,
        End::Exited | End::OutputLimit => Status::Signaled,
    };
    let limit = match &out.end {
        End::LimitExceeded(hit) => Some(hit.explain()),
        _ => None,
    };
    let mut bytes = out.stdout;
    // Merged: stderr is empty, unless the platform could not merge.
    bytes.extend_from_slice(&out.stderr);
    let output = crate::capture::render(&bytes, out.stdout_head_len, out.stdout_omitted);
    Ok(Ran {
        output,
        exit_code: if status == Status::Exited {
            out.exit_code
        } else {
            None
        },
        status,
        truncated: out.stdout_omitted > 0 || out.stdout_truncated || out.stderr_truncated,
        descendants_stopped: out.descendants_stopped,
        denials,
        sandbox: format!("{}; {}", out.enforcement, out.limits),
        limit,
        own_loopback: out.private_loopback,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_name_is_found_on_the_path_and_a_missing_one_is_reported() {
        let path = vec![PathBuf::from("/usr/bin"), PathBuf::from("/bin")];
        let p = resolve_program("sh", &path, Path::new("/")).unwrap();
        assert!(p.is_absolute() && p.ends_with("sh"));
        let e = resolve_program("no-such-program-xyz", &path, Path::new("/")).unwrap_err();
        assert!(e.contains("not found on the sandbox's PATH"), "{e}");
        assert!(resolve_program("./nope", &path, Path::new("/tmp")).is_err());
    }

    #[test]
    fn a_timeout_is_timed_out_without_exit_code() {
        let mut out = exec::Outcome::default();
        out.end = End::TimedOut;
        let r = interpret(out, Vec::new()).unwrap();
        assert_eq!((r.status, r.exit_code), (Status::TimedOut, None));
    }
}
