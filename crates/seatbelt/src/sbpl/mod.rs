//! Real-world SBPL in, explained decisions out: read the profiles other teams already have
//! (Chromium's TinyScheme programs, Codex's operation lists, Apple's own), expand them with their
//! `-D KEY=VALUE` parameters, and answer "would this allow OP on X?" with the rule that decided.
//!
//! **Owns:** three stages, each usable alone — the reader ([`read`]: text → [`Datum`] trees with
//! line/column), the Scheme layer ([`expand`]: trees + parameters → [`Policy`], bounded by
//! [`Limits`]), and the decision ([`Policy::decide`]: a [`Query`] → [`Decided`]); plus the
//! [`OPERATIONS`] and filter catalog.
//!
//! **Refuses:** to guess. A decision that rests on something not modelled is
//! [`Outcome::NotModelled`] naming the rule and filter; `import` is refused (the imported file is
//! on the Mac); input beyond [`Limits`] is an error. It never touches the file system, and is a
//! model like [`crate::eval`] — not yet compared with a Mac (`tests/macos.rs`).
//!
//! This layer is separate from the typed [`crate::Profile`] our own tools render: that one stays
//! the narrow, deny-default language with user paths as parameters (invariant 6); this
//! one reads everything.
//!
//! # Example
//!
//! ```
//! use std::collections::BTreeMap;
//! use seatbelt::sbpl::{expand, Limits, Outcome, Query};
//!
//! let text = r#"
//! (version 1)
//! (define (home p) (string-append (param "HOME") p))
//! (deny default (with no-log))
//! (allow file-read* (subpath (home "/src")))
//! (if (string=? (param "NET") "on")
//!     (allow network-outbound (remote tcp "*:443")))
//! "#;
//! let params = BTreeMap::from([("HOME".into(), "/Users/ann".into()), ("NET".into(), "on".into())]);
//! let policy = expand(text, &params, &Limits::default())?;
//! assert_eq!(policy.rules.len(), 3);
//!
//! let d = policy.decide(&Query::parse("file-read-data", "/Users/ann/src/a.c")?, &params);
//! assert_eq!(d.outcome, Outcome::Allow);
//! assert_eq!(d.rule.unwrap().pos.line, 5);
//! assert_eq!(d.params.get("HOME"), Some(&Some("/Users/ann".to_owned())));
//!
//! let d = policy.decide(&Query::parse("file-write-data", "/Users/ann/src/a.c")?, &params);
//! assert_eq!(d.outcome, Outcome::Deny);
//! assert_eq!(d.rule.unwrap().modifiers[0].name, "no-log");
//!
//! let d = policy.decide(&Query::parse("network-outbound", "tcp:example.com:443")?, &params);
//! assert_eq!((d.outcome, d.rule.unwrap().params.contains("NET")), (Outcome::Allow, true));
//!
//! let d = policy.decide(&Query::parse("iokit-open", "-")?, &params);
//! assert_eq!(d.outcome, Outcome::Deny); // unmodelled, but no rule covers it: the default
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What is modelled
//!
//! | Operations (and the wildcards above them) | Object of a query | Filters that decide |
//! |---|---|---|
//! | `file*`: `file-read*` (`file-read-data`, `file-read-metadata`, `file-read-xattr`), `file-write*` (`file-write-acl`, `file-write-create`, `file-write-data`, `file-write-flags`, `file-write-mode`, `file-write-owner`, `file-write-setugid`, `file-write-times`, `file-write-unlink`, `file-write-xattr`), `file-chroot`, `file-clone`, `file-ioctl`, `file-link`, `file-map-executable`, `file-mknod`, `file-mount`, `file-mount-update`, `file-revoke`, `file-search`, `file-test-existence`, `file-unmount` | path | `literal`, `path`, `subpath`, `prefix`, `regex`, `vnode-type` (when the query gives the type) |
//! | `process-exec*`: `process-exec`, `process-exec-interpreter` | path | the same |
//! | `process-fork` | nothing | unconditional rules only |
//! | `signal`, `process-info*` (`process-info-codesignature`, `process-info-dirtycontrol`, `process-info-ledger`, `process-info-listpids`, `process-info-pidfdinfo`, `process-info-pidfileportinfo`, `process-info-pidinfo`, `process-info-rusage`, `process-info-setcontrol`) | `self`, `child`, `same-sandbox`, `other` | `target` with `self`, `children`, `same-sandbox` |
//! | `network*`: `network-outbound`, `network-inbound`, `network-bind` | `[tcp:\|udp:]HOST:PORT` or a socket path | `remote`/`local` with `ip`, `ip4`, `ip6`, `tcp*`, `udp*`, `unix-socket`; `path-literal`, `path-prefix`, `path-regex` and the path filters on socket paths |
//! | `sysctl*`: `sysctl-read`, `sysctl-write` | sysctl name | `sysctl-name`, `sysctl-name-prefix`, `sysctl-name-regex` |
//! | `mach-lookup` | global service name | `global-name`, `global-name-prefix`, `global-name-regex`, `local-name` (never a global lookup) |
//! | every operation | — | `require-all`, `require-any`, `require-not` (three-valued) |
//!
//! **Recognised only** (they parse and evaluate; a decision that needs them is "not modelled",
//! and only unconditional rules or the default decide them): the other [`OPERATIONS`] —
//! `appleevent-send`, `authorization-right-obtain`, `boot-arg-set`, `darwin-notification-post`,
//! `device*`, `distributed-notification-post`, `dynamic-code-generation`,
//! `file-issue-extension`, `fs-snapshot*`, `generic-issue-extension`, `hid-control`, `iokit*`,
//! `ipc*` (`ipc-posix*`, `ipc-posix-sem*`, `ipc-posix-shm*`, `ipc-sysv*`), `job-creation`,
//! `load-unsigned-code`, `lsopen`, `mach*` other than `mach-lookup` (`mach-host*`, `mach-priv*`,
//! `mach-task*`, `mach-register`, …), `nvram*`, `opendirectory-user-modify`, `process*` other
//! than the above (`process-codesigning*`), `pseudo-tty`, `socket-ioctl`, `socket-option*`,
//! `syscall*`, `system*` (`system-socket`, `system-fsctl`, `system-kext*`, …),
//! `user-preference*` — and the filters in [`RECOGNISED_FILTERS`] (`extension`,
//! `iokit-registry-entry-class`, `iokit-user-client-class`, `ipc-posix-name`,
//! `preference-domain`, `xpc-service-name`, `socket-domain`, `syscall-number`, …).
//!
//! The semantics of each modelled row and their public sources are in [`decide`]; the Scheme
//! forms and theirs in [`scheme`]; the reader syntax in [`reader`].

use std::collections::BTreeMap;
use std::fmt;

pub mod catalog;
pub mod cli;
pub mod decide;
pub mod policy;
pub mod reader;
pub mod scheme;

pub use catalog::{MODELLED_FILTERS, OPERATIONS, ObjectKind, RECOGNISED_FILTERS};
pub use decide::{Decided, Object, Outcome, Protocol, Query, Relation};
pub use policy::{Arg, FilterValue, Modifier, Policy, PolicyRule};
pub use reader::{Datum, DatumKind};

/// A 1-based line and column (in characters) in the profile text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    /// Line, from 1.
    pub line: u32,
    /// Column, from 1, counted in characters.
    pub column: u32,
}

impl Pos {
    /// Line 1, column 1.
    pub const START: Pos = Pos { line: 1, column: 1 };
}

/// Bounds on untrusted input. The defaults read every public profile with a wide margin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The largest profile text, in bytes.
    pub max_text: usize,
    /// The deepest list nesting the reader accepts.
    pub max_depth: usize,
    /// The deepest evaluation nesting (calls inside calls).
    pub max_eval_depth: usize,
    /// Evaluation steps (one per form evaluated, more for long strings).
    pub max_steps: u64,
    /// The longest string or symbol, in bytes, read or built.
    pub max_string: usize,
    /// The most rules a profile may expand to.
    pub max_rules: usize,
    /// The most scopes (function calls, `let`s) alive at once.
    pub max_frames: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_text: 4 << 20,
            max_depth: 256,
            max_eval_depth: 128,
            max_steps: 2_000_000,
            max_string: 64 << 10,
            max_rules: 100_000,
            max_frames: 100_000,
        }
    }
}

/// Why a profile was refused: where, a stable kind, and what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {}, column {}: {} ({})", pos.line, pos.column, message, kind.code())]
pub struct SbplError {
    /// Where.
    pub pos: Pos,
    /// The stable kind.
    pub kind: SbplErrorKind,
    /// What was wrong and what to write instead.
    pub message: String,
}

impl SbplError {
    pub(crate) fn new(pos: Pos, kind: SbplErrorKind, message: String) -> SbplError {
        SbplError { pos, kind, message }
    }
}

/// The kinds of refusal. [`SbplErrorKind::code`] is stable for scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SbplErrorKind {
    /// The text is not well-formed.
    Syntax,
    /// Nesting beyond [`Limits::max_depth`] or [`Limits::max_eval_depth`].
    TooDeep,
    /// Beyond a size limit (text, string, rule count).
    TooLarge,
    /// Beyond [`Limits::max_steps`].
    StepBudget,
    /// A symbol with no definition.
    Unbound,
    /// A value of the wrong type.
    Type,
    /// The wrong number of arguments.
    Arity,
    /// A special form with the wrong shape.
    BadForm,
    /// A value `sandbox-exec` would refuse (a relative path, a host other than `*`/`localhost`).
    BadValue,
    /// An operation name not in [`OPERATIONS`].
    UnknownOperation,
    /// A form this crate does not support (`import`, `(version 2)`).
    Unsupported,
}

impl SbplErrorKind {
    /// A stable code such as `sbpl-syntax`.
    pub fn code(self) -> &'static str {
        match self {
            SbplErrorKind::Syntax => "sbpl-syntax",
            SbplErrorKind::TooDeep => "sbpl-too-deep",
            SbplErrorKind::TooLarge => "sbpl-too-large",
            SbplErrorKind::StepBudget => "sbpl-step-budget",
            SbplErrorKind::Unbound => "sbpl-unbound",
            SbplErrorKind::Type => "sbpl-type",
            SbplErrorKind::Arity => "sbpl-arity",
            SbplErrorKind::BadForm => "sbpl-bad-form",
            SbplErrorKind::BadValue => "sbpl-bad-value",
            SbplErrorKind::UnknownOperation => "sbpl-unknown-operation",
            SbplErrorKind::Unsupported => "sbpl-unsupported",
        }
    }
}

impl fmt::Display for SbplErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// Reads `text` into its top-level forms.
pub fn read(text: &str, limits: &Limits) -> Result<Vec<Datum>, SbplError> {
    reader::read(text, limits)
}

/// Reads and evaluates `text` with `params` (the `-D KEY=VALUE` definitions).
pub fn expand(
    text: &str,
    params: &BTreeMap<String, String>,
    limits: &Limits,
) -> Result<Policy, SbplError> {
    let forms = reader::read(text, limits)?;
    scheme::evaluate(&forms, params, limits)
}
