//! The `run_command` tool of seed 001: argv-policy's decision carried out. RC-1…RC-14,
//! RCS-1…RCS-3; invariants 1–7.
//!
//! **Owns:** the [`Asker`] through which a host asks the user (confirmations and passwords,
//! CannotAsk never being a yes); checking a password with the system (PAM service
//! `agent-exec`, `sudo -S -v`); the run_command sandbox (module docs below); `rm` → the trash
//! after re-checking every path on the file system; `sudo -n` and `sandbox: false` outside the
//! sandbox; hints (RC-13); masking (RC-14); the RC-9 lock ([`RunCommandState`]); the result
//! ([`RunCommandOutput`]).
//!
//! **Refuses to know:** the rules (argv-policy's `decide` says what runs and behind which gate),
//! how a question reaches the user (the host's `Asker`), other tools, and the front ends.
//!
//! **What a question shows (TRUST-4).** Every [`Question`] carries one text, rendered from
//! the call's [`Granted`] (each simple command, every write path, the network, leaving the
//! sandbox), with the agent's text escaped; every channel shows that text as it is. A call too
//! long to show is not asked (`RUN_COMMAND_ARGUMENTS_INVALID`). [`check`] reports the gate the
//! call asks and that text, from the same planning as the call.
//!
//! **Gates and passwords (RC-4, RC-10, RC-11, RC-12).** A confirmation goes to [`Asker::confirm`];
//! a password to [`Asker::password`], at most three times, each answer checked by the system: PAM
//! service `agent-exec` for `sandbox: false`, `write_paths` outside `$HOME` or where a host program
//! reads configuration or code (TRUST-5: a dot-directory, `~/bin`, the host's `PATH`, a directory
//! holding another repository) and `rm` outside `$HOME` (a host may install
//! `/etc/pam.d/agent-exec`; without it PAM uses its `other` service, on Debian the login password),
//! `sudo -S -v` for sudo (root: PAM). PAM is opened at run time (`libpam.so.0`): where it is
//! missing the gate answers "cannot verify the password on this machine" and nothing runs. The
//! password is never stored, logged or put in a message, and is zeroized when dropped. No mode and
//! no allow rule skips a password gate: the executor re-derives the minimum gate itself (sudo,
//! `sandbox: false`, `write_paths` outside `$HOME`, `rm` of a path whose REAL location is outside
//! `$HOME`).
//!
//! **The sandbox (RCS-1…RCS-3).** `exec::SandboxSpec::for_argv` with: the working directory and the
//! call's temp dir read-write; `$HOME` read-only; the toolchains' cache directories of
//! `Policy::cache_paths` that exist as real directories through a private copy-on-write view for
//! the call (TRUST-3, `exec::CacheViews`: the user's caches never change, `caches` in the result
//! counts what the view held); files with another hard link in the working directory and the
//! `write_paths` read-only (TRUST-3, module `links`); approved `write_paths`
//! read-write (pinned with `openat2(RESOLVE_NO_SYMLINKS)`; one that is `$HOME`, holds it, or is,
//! holds or lies in a private location is refused, and so is one that would let a missing shell
//! startup file be created). Hidden: `Policy::private_paths_in` (the private list, also where the
//! host's environment relocates it), other projects' `.env` files found by a bounded walk
//! ([`other_projects_env_files`], TRUST-6) and the host's [`RunCommandOptions::hidden`]. Protected
//! (read-only inside a writable root): `.git/hooks`, `.git/config` and `.gitmodules` of each
//! writable root and of `.git` entries up to two levels below it (a bounded scan of 20 000 entries;
//! a `.git` file is protected itself), the shell startup files a writable root holds, and
//! [`RunCommandOptions::protected`]; and, found by the git guard's walk at every depth of the
//! working directory and the `write_paths` (module `gitguard`), each existing git directory's
//! `hooks`, `config`, `config.worktree`, `commondir`, `modules` (whole) and `info/attributes`, each
//! `.git` file and the git directory it names when that lies in a writable root, and each
//! `.gitmodules`. Where a repository has `.git` but no `.git/hooks`, the empty `hooks` directory is
//! created first (git would create it too) so that it can be bound read-only. A working directory
//! that is `$HOME` or contains it is refused: pick the project directory; so is one that is or lies
//! in a private location. The network is lifted entirely iff `network: true`. Standard input is
//! closed.
//!
//! **The git guard.** A call never leaves behind git metadata that makes git run a
//! program. Before the run, a snapshot of the roots a person works in (the working directory
//! and the `write_paths`; not the toolchains' caches, whose repositories only the toolchains
//! drive, nor the call's temp dir, which is removed; every depth, directories only, at most
//! 500 000 entries) records each git directory's hook entries, `config`, `config.worktree`,
//! `commondir`, the `.git` files and the `.gitmodules`; after the command's whole tree has
//! ended, a second snapshot is compared with it, and what is new or changed and can run a
//! program (a hook not named `*.sample`, a `commondir`, config with a new program-running key
//! from module `gitguard`'s list, a `.git` file pointing outside the roots) is renamed to
//! `<name>.agent-exec-quarantined` with its execute bits off, listed in
//! [`RunCommandOutput::quarantined`] and explained in `message`. `git init`, `git add` and
//! `git commit` quarantine nothing. A budget that ran out is said in `message`.
//!
//! **Environment.** Exactly: `PATH` = the host's `PATH` entries the sandbox can read (under
//! `/usr`, `/bin`, `/sbin`, `/lib`, `/opt`, `$HOME` outside its private locations, or the
//! working directory), else `/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin`; `HOME` = the real
//! home; `USER`, `LOGNAME` (the host's); `LANG`, `LC_ALL` (the host's, else `C.UTF-8`);
//! `TERM=dumb`; `TMPDIR` = the call's temp dir; the toolchain variables `CARGO_HOME`,
//! `RUSTUP_HOME`, `RUSTUP_TOOLCHAIN`, `GOPATH`, `GOROOT`, `GOBIN`, `JAVA_HOME`, `NVM_DIR`,
//! `NVM_BIN`, `NVM_INC`, `PYENV_ROOT`, `PYENV_VERSION`, `VIRTUAL_ENV`, `CONDA_PREFIX`,
//! `CONDA_DEFAULT_ENV`, `npm_config_cache`, `npm_config_prefix`, `PNPM_HOME`, `BUN_INSTALL`,
//! `DENO_DIR`, `GEM_HOME`, `GEM_PATH`, `SDKMAN_DIR`, `VOLTA_HOME`, `GRADLE_USER_HOME`,
//! `MAVEN_HOME` when the host has them and they point into readable places (the version names
//! when they hold no `/`); the TLS trust variables (`SSL_CERT_FILE`, `SSL_CERT_DIR`,
//! `NODE_EXTRA_CA_CERTS`, `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`, `PIP_CERT`, `GIT_SSL_CAINFO`,
//! `CARGO_HTTP_CAINFO`, `NIX_SSL_CERT_FILE`) when they name the system's trust stores
//! (`/etc/ssl`, `/etc/pki`, `/etc/ca-certificates`) or a readable place; then
//! [`RunCommandOptions::env`]. Never a variable whose name looks secret (argv-policy's rule).
//! With `network: true` "readable" is the narrowed home view (TRUST-6).
//!
//! **The program (RC-2).** `Via::Direct`: `argv[0]` is looked up on that `PATH` after the
//! decision (a name with `/` is taken against the working directory) and that absolute path is
//! executed — not canonicalised, because multi-call binaries (rustup's `cargo` proxy, busybox)
//! choose what to be by the name they are started as. `Via::Shell`: `sh` is `/bin/sh`, `bash` is
//! looked up like any program, with exactly the arguments (and so the script) the decision
//! validated.
//!
//! **Output.** stdout and stderr merged in order; at most [`OUTPUT_CAP`] (256 KiB) kept: the
//! first and the last 128 KiB, with the line `[… N bytes omitted …]` at the seam and `truncated`
//! set; the word cut by the seam on each side (up to 200 bytes) is dropped, so a secret cut in
//! two leaves no recognisable half. Masked (RC-14) are the output, the `label` and the
//! `message`: the session's secrets grow with the values of secret-looking host
//! variables and with the secrets by form the output holds (`argv_policy::secrets_in`); the next
//! decision refuses an argv holding a mask token. Time limit [`RUN_COMMAND_TIMEOUT`] (30 min) or
//! the host's; cancellation through the `CallContext`; nothing the command started survives it.
//!
//! **Outside the sandbox.** `sudo`: `sudo -n -- <binary> …` (the binary from the system's program
//! directories), output bounded the same way, the time limit; cancel → SIGTERM to sudo (which
//! forwards it), SIGKILL after 2 s; `sudo -K` after. `sudo rm` really deletes. `sandbox: false`:
//! the user's own environment and rights under proctree's supervisor (the whole tree stopped at
//! the end); `network` and `write_paths` mean nothing and the result says so.
//!
//! **rm (RC-4).** Each path is re-checked on the file system: its parent resolved component by
//! component (links followed), the final name not followed (a link is trashed, not its target);
//! the REAL location's gate (working directory: none under `auto`; elsewhere in `$HOME`: a
//! confirmation; outside: the password) applies when stronger than the decision's. A real
//! path that is or holds repository metadata (`.git`, anything in it, `.gitmodules`, a bare
//! repository), a shell startup file or a host-protected path is refused
//! (`RUN_COMMAND_RM_INVALID`): the user deletes those. The trash directory must be the user's
//! own: the home trash not a symbolic link and owned by the user; a per-volume
//! `$topdir/.Trash-$uid` (or `.Trash/$uid`) not a link, owned by the user, mode 0700 (made 0700
//! when missing); otherwise that path is not moved and `rm` says why. Missing
//! paths are `rm`'s error unless `-f`; a directory needs `-r`. The result lists `trashed`
//! `[{path, restoreFrom}]`. Limit: the trash crate moves by path, so a parent swapped again
//! between this check and the move is not caught.
//!
//! **Hints (RC-13).** When the command failed: the denials `exec::denials` derived from the
//! policy first, keywords of the output only where none explains it; in the seed's order
//! (network, a write, a system target, else report and stop).
//!
//! Dependencies beyond the workspace: `zeroize` (passwords), `libloading` (PAM at run time),
//! `trash` (rm), `libc` (the PAM conversation's buffers, `getpwuid_r`), `serde`/`serde_json`.
//!
//! # Example
//! ```no_run
//! # async fn example() -> Result<(), toolscope::ToolError> {
//! use std::sync::Arc;
//! use run_command_tool::{DenyAllAsker, Mode, Policy, RunCommandArgs, RunCommandOptions,
//!                        RunCommandState};
//!
//! let lease = Arc::new(fsguard::RootLease::acquire("/home/me/project").unwrap());
//! let policy = Policy::load(Mode::Auto, None).unwrap();
//! let state = RunCommandState::default();
//! let options = RunCommandOptions::for_home("/home/me");
//! let (ctx, _cancel) = toolscope::CallContext::standalone();
//! let out = run_command_tool::run_command(
//!     RunCommandArgs::new(["cargo", "test", "--offline"]),
//!     lease, &policy, &DenyAllAsker, &state, &options, &ctx,
//! ).await?;
//! println!("{} (exit {:?})", out.output, out.exit_code);
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod ask;
pub mod background;
mod capture;
mod check;
mod env;
mod envfiles;
mod gate;
mod gitguard;
mod hint;
mod links;
mod outside;
mod render;
mod rm;
mod roots;
mod run;
mod sandboxed;
mod state;
#[cfg(any(target_os = "linux", target_os = "freebsd"))]
mod trashdir;
mod types;
mod verify;

pub use argv_policy::{Mode, Policy, RunCommandArgs};
pub use ask::{Asker, Confirmation, DenyAllAsker, Password, PasswordReply, Question};
pub use check::{Checked, check};
pub use envfiles::{
    ENV_FILES_MAX, ENV_WALK_DEPTH, ENV_WALK_ENTRIES, EnvFiles, other_projects_env_files,
};
pub use exec::CacheReport;
pub use gitguard::Quarantined;
pub use render::{
    FRAGMENT_CHARS, Grant, Granted, HEAD_CHARS, MAX_ASKED_CHARS, MAX_TEXT_CHARS, Network, Place,
    TAIL_CHARS, TooLong,
};
pub use run::run_command;
pub use sandboxed::TEMP_PREFIX;
pub use state::RunCommandState;
pub use types::{
    Denial, OUTPUT_CAP, RUN_COMMAND_TIMEOUT, RunCommandOptions, RunCommandOutput, Status, Trashed,
    input_schema,
};
