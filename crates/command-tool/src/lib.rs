//! The `command` tool: one `/bin/sh -c` command line in a `direct` or `app-private` work
//! scope, under a deny-default sandbox. CMD-1…CMD-11, CMD-13; invariant 1.
//!
//! **Owns:** the wire types [`CommandArguments`] / [`CommandOutput`] (exact camelCase names,
//! unknown fields refused, JSON Schemas) and [`Status`]; argument validation ([`validate`]);
//! the [`Approver`] trait through which the host asks the user about each extra path, once,
//! for this call (CMD-3); the hard-link pre-scan of the scope and of every writable extra path
//! (CMD-9; on Linux each linked file is kept read-only in the sandbox instead of refusing the
//! call, TRUST-3); the call's private temp dir and minimal environment (CMD-13); and the meaning of an
//! [`exec::Outcome`]: `status`, `truncated`, `partialExecution`, `descendantsStopped` (CMD-5,
//! CMD-6).
//!
//! **Refuses to know:** other tools, the host, accounts and grants (the caller's `ToolScope`
//! runs first, TS-*), how a question reaches the user (the [`Approver`] implementation's), and
//! how the sandbox is built per platform (`exec`'s).
//!
//! **Environment (CMD-13).** Exactly: `PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin`
//! (the program directories the sandbox makes readable), `HOME` and `TMPDIR` in the call's own
//! temp dir (under the system temp dir, outside the scope, mode 0700, removed afterwards),
//! `LANG=LC_ALL=C.UTF-8`, `TERM=dumb`, plus only the variables a host names in
//! [`CommandOptions`]. Nothing of the host's otherwise (no tokens, no `SSH_AUTH_SOCK`).
//! Standard input is closed.
//!
//! **The user's toolchains (LIVE-3).** Only when the host opts in
//! ([`CommandOptions::toolchains`], `agent-exec call --toolchains`): the toolchain homes of
//! listed below that exist under the user's home directory are granted read + execute
//! (`~/.cargo/{bin,registry,git,config.toml}`, `~/.rustup`, `~/.nvm/versions`, `~/.pyenv`'s
//! versions and shims, `~/.local/{bin,lib}`, `~/go/{bin,pkg/mod}`, `~/.sdkman/candidates`,
//! `~/.bun/bin`, `~/.deno/bin`, `~/.volta`), their program directories go in front of `PATH`
//! (the newest nvm/SDKMAN version first), and `CARGO_HOME`, `RUSTUP_HOME`, `PYENV_ROOT`,
//! `GOPATH`, `VOLTA_HOME` point at them. Nothing is writable but the caches the toolchains fill
//! as they build (`~/.cargo/registry`, `~/.cargo/git`, `~/go/pkg/mod`), seen through a private
//! copy-on-write view for the call (TRUST-3): offline builds unpack into the view, the user's
//! caches never change, and `caches` in the result counts what the view held. No grant is, contains or lies inside a location of
//! [`CREDENTIALS`] (`~/.ssh`, `~/.cargo/credentials.toml`, `~/.npmrc`, `~/.pypirc`,
//! `~/.config`, …) or the home directory itself, compared on canonical paths. A hard link
//! placed inside a toolchain home by the user is not scanned for (read-only grants never
//! are, CMD-9).
//!
//! **Pinned paths.** The work root and every extra path are opened once, when they
//! are validated (extra paths with `openat2(RESOLVE_NO_SYMLINKS)`, the root and the temp dir
//! as `RootLease`s); the hard-link scan and the sandbox rules use those descriptors, never the
//! path looked up again. A path swapped for a symbolic link after validation grants nothing
//! new; where the sandbox must look a path up again in the command's own mount namespace, it
//! checks device and inode and refuses the call (`AGENT_EXEC_PATH_INVALID`) if they changed.
//!
//! **Limits.** This is not isolation from other native processes of the same user: one could
//! hard-link an outside file into the scope while a command runs; the pre-scan is not a
//! continuous guarantee (CMD-11). The sandbox forbids the command itself from creating hard
//! links. Names and metadata outside the scope are not secret: `stat`, `ls -l` of a known
//! path and `inotify_add_watch` reach outside files (Landlock governs neither lookups nor
//! watches), so a command can learn that `~/.ssh/id_rsa` exists, its size and its times, though
//! never read or change it. Where the machine cannot make a private mount namespace, the
//! mode, owner and times of the user's own files outside the writable paths can also be changed
//! (the result's `sandbox` field and `agent-exec doctor` say `METADATA_OUTSIDE`). A hidden
//! directory (the host's state) is covered at its canonical path: a bind mount of it elsewhere
//! inside a grant (something only root can make) stays readable, never writable. Set-id mode
//! bits are refused by system call, which cannot tell a directory from a file, so `chmod g+s
//! dir` and `mkdir -m 2755` fail too (plain `mkdir` in a set-group-ID directory still inherits
//! the bit).
//!
//! # Example
//! ```no_run
//! # async fn example() -> Result<(), toolscope::ToolError> {
//! use std::sync::Arc;
//! use command_tool::{CommandArguments, PreApproved};
//!
//! let scope = Arc::new(fsguard::RootLease::acquire("/home/me/project").unwrap());
//! let args = CommandArguments::from_json(serde_json::json!({
//!     "command": "wc -l *.csv | sort -n",
//!     "extraPaths": [{"path": "/home/me/reference", "write": false}]
//! }))?;
//! let approver = PreApproved::new(["/home/me/reference"]);
//! let (ctx, _cancel) = toolscope::CallContext::standalone();
//! let out = command_tool::command(args, scope, &approver, &ctx).await?;
//! println!("{:?} {}", out.status, out.stdout);
//! # Ok(()) }
//! ```
//!
//! Dependencies beyond the workspace's own crates: `serde`/`serde_json`/`schemars` for the wire
//! types, `tempfile` for the private temp dir.
#![deny(missing_docs)]

mod approve;
mod run;
mod sockets;
mod toolchains;
mod types;
mod validate;

pub use approve::{Approval, Approver, DenyAll, PreApproved};
pub use run::{CommandOptions, HARD_LINKS_SHOWN, OUTPUT_CAP, TEMP_PREFIX, command, command_with};
pub use toolchains::CREDENTIALS;
pub use types::{CommandArguments, CommandOutput, Denial, DeniedAccess, ExtraPath, Status};
pub use validate::{
    DEFAULT_TIMEOUT_MS, Extra, MAX_COMMAND_BYTES, MAX_EXTRA_PATHS, MAX_TIMEOUT_MS,
    ValidatedCommand, validate,
};
