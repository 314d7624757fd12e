//! macOS Seatbelt profiles as a typed DSL: build, render, parse and evaluate SBPL anywhere.
//!
//! **Owns:** the SBPL syntax tree ([`Profile`], [`Rule`], [`Operation`], [`Filter`], [`Value`]),
//! a renderer that passes every user path as a `(param "KEY")` with its value in a separate
//! `-D KEY=VALUE` argument — never spliced into profile text (invariant 6) — a parser for
//! everything the renderer emits, an evaluator that answers "would this profile allow operation X
//! on path P" so profiles are tested on Linux, and the two profiles the tools use
//! ([`ProfileSpec::run`], RUN-6/RUN-7; [`ProfileSpec::command`], CMD-2/CMD-9/CMD-10) and the
//! `run_command` one ([`ArgvProfileInput`], RCS-1/RCS-2/RCS-3, RC-7). Launching
//! `/usr/bin/sandbox-exec` (`BoundProfile::command`, compiled only on macOS) is the only
//! macOS-only code.
//!
//! For profiles other teams write — TinyScheme programs such as Chromium's, operation lists such
//! as Codex's — [`sbpl`] reads the whole SBPL syntax, evaluates its Scheme layer with `-D`
//! parameters under a step budget, and decides accesses with the rule, position and parameters
//! that decided, or says "not modelled"; `cargo run -p seatbelt --example sbpl -- check FILE`
//! and `… decide FILE OP OBJECT` put that in front of people. The typed [`Profile`] below stays
//! the narrow language our own tools render.
//!
//! **Refuses to know:** tools, their arguments, `exec`'s `SandboxSpec` (exec translates it into a
//! [`ProfileSpec`]), processes other than the one it launches, and the file system: paths are
//! validated lexically and never touched.
//!
//! **Is a model:** the evaluator encodes Seatbelt's documented and observed semantics (sources in
//! [`eval`]); only `tests/macos.rs`, run on a Mac, compares it with the kernel.
//!
//! # Example
//!
//! ```
//! use seatbelt::{Decision, Operation, ProfileSpec};
//!
//! // The `run` tool: awk may read and write the mirror and its temp dir, nothing else.
//! let spec = ProfileSpec::run("/usr/bin/awk", "/Users/alice/mirror", "/tmp/run-1");
//! let bound = spec.build()?;
//!
//! // User paths travel as parameters, not as profile text.
//! assert!(bound.text().contains(r#"(subpath (param "READ_WRITE_0"))"#));
//! assert!(!bound.text().contains("alice"));
//! assert_eq!(bound.params().get("READ_WRITE_1"), Some("/private/tmp/run-1"));
//!
//! // The evaluator answers for any path.
//! let decide = |op, path| bound.decide(op, path);
//! assert_eq!(decide(Operation::FileWriteData, "/Users/alice/mirror/out.txt")?, Decision::Allow);
//! assert_eq!(decide(Operation::FileReadData, "/Users/alice/mirror/.GIT/config")?, Decision::Deny);
//! assert_eq!(decide(Operation::FileReadData, "/Users/alice/.ssh/id_rsa")?, Decision::Deny);
//! assert_eq!(decide(Operation::FileLink, "/Users/alice/mirror/link")?, Decision::Deny);
//!
//! // Rendered text parses back to the same profile.
//! assert_eq!(&seatbelt::Profile::parse(&bound.text())?, bound.profile());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Not verified without a Mac
//!
//! Assumptions taken from public profiles and guides, to be confirmed by `tests/macos.rs`:
//! `file-link` is its own operation (not under `file-write*`) checked on `link(2)`; the `prefix`
//! filter's spelling; that SBPL's reader accepts `\xHH` escapes and ends `#"…"` at the first `"`;
//! the Cryptex and dyld-cache paths, `/private/var/select/sh`, and that the sysctl list is enough
//! for `awk`, `wc`, `sort`, `diff` and `/bin/sh`; whether programs need `file-read-metadata` on
//! the ancestors of a root (not granted); and that Seatbelt matches the case the kernel reports.
//!
//! # Grammar (what the renderer emits and [`Profile::parse`] accepts; [`sbpl`] reads more)
//!
//! ```text
//! profile := "(version 1)" "(deny default)" rule*
//! rule    := "(" ("allow" | "deny") operation+ filter* ")"
//! filter  := "(" ("literal" | "subpath" | "prefix" | "sysctl-name" | "sysctl-name-prefix"
//!                 | "global-name") value ")"
//!          | "(regex #\"" pattern "\")" | "(vnode-type" TYPE ")" | "(target" TARGET ")"
//!          | "(require-all" filter* ")" | "(require-any" filter* ")" | "(require-not" filter ")"
//! value   := string | "(param" string ")"
//! ```

#![deny(missing_docs)]

mod ast;
pub mod eval;
mod explain;
mod parse;
mod pattern;
mod profiles;
mod render;
pub mod sbpl;

pub use ast::{
    Action, Filter, Operation, Profile, Rule, Target, Value, VnodeType, literal, param, prefix,
    subpath,
};
pub use eval::{Decision, EvalError, ParamError, Params, Request, Verdict};
pub use explain::{Denial, Explanation, FileAccess, Grantor};
pub use parse::{ParseError, ParseErrorKind};
pub use pattern::{Pattern, PatternError};
pub use profiles::{
    ArgvProfileInput, BoundProfile, DOT_GIT_PATTERN, DotGit, Network, PROGRAM_DIRECTORIES,
    Processes, ProfileSpec, SANDBOX_EXEC, SYSCTL_NAMES, SYSCTL_PREFIXES, SYSTEM_LIBRARIES,
    SpecError,
};
