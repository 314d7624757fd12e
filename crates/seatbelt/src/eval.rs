//! The evaluator: "would this profile allow operation X on object Y?" — a model of Seatbelt that
//! lets profiles be tested on any OS, the way Chromium's BPF DSL tests run policies in an
//! emulator.
//!
//! # Semantics modelled, and their sources
//!
//! * **Deny by default, last matching rule wins.** Rules are scanned in order; the last one whose
//!   operation covers the request and whose filters match decides; if none does, `(deny default)`
//!   does. Sources: fG!'s "Apple Sandbox Guide v1.0" (reverse.put.as, 2011), the profiles Apple
//!   ships in `/System/Library/Sandbox/Profiles` (which put narrow denies after broad allows),
//!   Codex's `seatbelt_base_policy.sbpl` and Chromium's `sandbox/policy/mac/*.sb`, written the
//!   same way.
//! * **Operation wildcards.** `file-read*` covers `file-read-data`, `file-read-metadata`, …;
//!   `file*` covers every file operation; `file-link` is *not* under `file-write*`
//!   ([`Operation::covers`]). Source: the operation table in the Apple Sandbox Guide.
//! * **Several filters in one rule are alternatives**; `require-all`/`require-any`/`require-not`
//!   combine them. Same sources.
//! * **Path filters see the resolved path.** `literal` is string equality, `subpath` is the path or
//!   anything below it component-wise, `prefix` is a plain string prefix, `regex` is an unanchored
//!   POSIX-ERE search ([`Pattern`](crate::Pattern)). The kernel resolves symlinks first; the model
//!   applies macOS's three well-known ones (`/tmp`, `/var`, `/etc` → `/private/…`) to the query
//!   path, and never to values in the profile — so a profile that names `/tmp/x` does not match,
//!   as on a Mac. Matching is case-sensitive; APFS usually is not, which is why our deny rules
//!   use case-insensitive regexes (`.GIT`).
//! * A profile that reads an undefined `(param …)`, or names a relative path, is refused by
//!   `sandbox-exec` before anything runs; the model returns an [`EvalError`] instead of a guess.
//!
//! **This is a model, not yet verified on a Mac.** `tests/macos.rs` compares its answers with
//! `sandbox-exec` outcomes; it only runs on macOS (the intended home is `cargo xtask macos`) and
//! had not been run when this was written. On Linux the model is the specification the golden
//! profiles are tested against, not evidence of what the kernel does.

use std::collections::BTreeMap;
use std::ffi::OsString;

use crate::ast::{Action, Filter, Operation, Profile, Target, Value, VnodeType};

/// The values for `(param "KEY")`, passed to `sandbox-exec` as `-D KEY=VALUE`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params(BTreeMap<String, String>);

/// Why a parameter was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParamError {
    /// Keys are `[A-Z][A-Z0-9_]*`, at most 64 characters, so `-D KEY=VALUE` splits unambiguously.
    #[error(
        "parameter key {0:?} is invalid; use 1-64 characters of A-Z, 0-9 and _, starting with a letter"
    )]
    BadKey(String),
    /// An argv string cannot carry NUL.
    #[error("parameter {0} contains a NUL byte; pass a path without NUL")]
    Nul(String),
    /// Each key is set once.
    #[error("parameter {0} is already set; use a distinct key per value")]
    Duplicate(String),
}

impl Params {
    /// No parameters.
    pub fn new() -> Params {
        Params::default()
    }

    /// Sets `key` to `value` once.
    pub fn insert(&mut self, key: &str, value: &str) -> Result<(), ParamError> {
        let good_key = key.len() <= 64
            && key.starts_with(|c: char| c.is_ascii_uppercase())
            && key
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !good_key {
            return Err(ParamError::BadKey(key.to_owned()));
        }
        if value.contains('\0') {
            return Err(ParamError::Nul(key.to_owned()));
        }
        if self.0.contains_key(key) {
            return Err(ParamError::Duplicate(key.to_owned()));
        }
        self.0.insert(key.to_owned(), value.to_owned());
        Ok(())
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// `(key, value)` pairs in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The `sandbox-exec` arguments: `-D`, `KEY=VALUE`, … in key order. Each value is one argv
    /// element, so no shell ever sees it (invariant 6).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out = Vec::with_capacity(self.0.len() * 2);
        for (k, v) in &self.0 {
            out.push(OsString::from("-D"));
            out.push(OsString::from(format!("{k}={v}")));
        }
        out
    }
}

/// What a rule or the default decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// The operation is allowed.
    Allow,
    /// The operation is denied.
    Deny,
}

/// A decision and the index of the rule that made it (`None`: `(deny default)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Allow or deny.
    pub decision: Decision,
    /// Index into [`Profile::rules`] of the deciding rule.
    pub rule: Option<usize>,
}

/// One access to decide: a concrete operation and what it is aimed at. Filters about something
/// the request does not carry (a `sysctl-name` on a file request) do not match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// A concrete (non-wildcard) operation.
    pub operation: Operation,
    /// The absolute, resolved path of a file operation.
    pub path: Option<&'a str>,
    /// The file's type, when the question depends on it.
    pub vnode_type: Option<VnodeType>,
    /// The name read by `sysctl-read`.
    pub sysctl_name: Option<&'a str>,
    /// The Mach service named by `mach-lookup`.
    pub global_name: Option<&'a str>,
    /// Every relation the target process of `signal`/`process-info*` has to the caller.
    pub targets: &'a [Target],
}

impl<'a> Request<'a> {
    /// An operation with no object (`process-fork`, `network-outbound`, …).
    pub fn bare(operation: Operation) -> Request<'a> {
        Request {
            operation,
            path: None,
            vnode_type: None,
            sysctl_name: None,
            global_name: None,
            targets: &[],
        }
    }

    /// A file operation on `path`.
    pub fn file(operation: Operation, path: &'a str) -> Request<'a> {
        Request {
            path: Some(path),
            ..Request::bare(operation)
        }
    }

    /// `sysctl-read` of `name`.
    pub fn sysctl(name: &'a str) -> Request<'a> {
        Request {
            sysctl_name: Some(name),
            ..Request::bare(Operation::SysctlRead)
        }
    }

    /// `mach-lookup` of `name`.
    pub fn mach_lookup(name: &'a str) -> Request<'a> {
        Request {
            global_name: Some(name),
            ..Request::bare(Operation::MachLookup)
        }
    }

    /// A process operation (`signal`, `process-info-pidinfo`) on a target with these relations.
    pub fn process(operation: Operation, targets: &'a [Target]) -> Request<'a> {
        Request {
            targets,
            ..Request::bare(operation)
        }
    }

    /// The same request about a file of type `t`.
    #[must_use]
    pub fn with_vnode_type(self, t: VnodeType) -> Request<'a> {
        Request {
            vnode_type: Some(t),
            ..self
        }
    }
}

/// Why the model cannot answer; on a Mac each of these is a profile `sandbox-exec` refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// The profile reads a parameter that was not supplied.
    #[error("the profile reads (param {0:?}) but no value was given; pass it with Params::insert")]
    MissingParam(String),
    /// A request names a wildcard; the kernel only ever checks concrete operations.
    #[error("{0} is a wildcard; ask about a concrete operation such as file-read-data")]
    WildcardOperation(&'static str),
    /// The request path is not an absolute path without `.`/`..`.
    #[error("query path {0:?} is not absolute and resolved; give the path the kernel would see")]
    QueryPath(String),
    /// A path filter's value is not absolute (`sandbox-exec` rejects such a profile).
    #[error("path filter value {0:?} is not absolute; profiles must name absolute paths")]
    RelativeValue(String),
}

impl Profile {
    /// Would `operation` on `path` be allowed? The common case of [`Profile::evaluate`].
    pub fn decide(
        &self,
        operation: Operation,
        path: &str,
        params: &Params,
    ) -> Result<Decision, EvalError> {
        self.evaluate(&Request::file(operation, path), params)
            .map(|v| v.decision)
    }

    /// Decides `request` and says which rule decided.
    pub fn evaluate(&self, request: &Request<'_>, params: &Params) -> Result<Verdict, EvalError> {
        if request.operation.is_wildcard() {
            return Err(EvalError::WildcardOperation(request.operation.name()));
        }
        for key in self.parameters() {
            if params.get(key).is_none() {
                return Err(EvalError::MissingParam(key.to_owned()));
            }
        }
        let path = match request.path {
            Some(p) => {
                Some(resolve_query_path(p).ok_or_else(|| EvalError::QueryPath(p.to_owned()))?)
            }
            None => None,
        };
        let ctx = Ctx {
            request,
            path: path.as_deref(),
            params,
        };
        let mut verdict = Verdict {
            decision: Decision::Deny,
            rule: None,
        };
        for (i, rule) in self.rules.iter().enumerate() {
            if !rule
                .operations
                .iter()
                .any(|op| op.covers(request.operation))
            {
                continue;
            }
            let mut hit = rule.filters.is_empty();
            for f in &rule.filters {
                if ctx.matches(f)? {
                    hit = true;
                    break;
                }
            }
            if hit {
                let decision = match rule.action {
                    Action::Allow => Decision::Allow,
                    Action::Deny => Decision::Deny,
                };
                verdict = Verdict {
                    decision,
                    rule: Some(i),
                };
            }
        }
        Ok(verdict)
    }
}

struct Ctx<'a> {
    request: &'a Request<'a>,
    path: Option<&'a str>,
    params: &'a Params,
}

impl Ctx<'_> {
    fn value<'v>(&'v self, v: &'v Value) -> Result<&'v str, EvalError> {
        match v {
            Value::Text(s) => Ok(s),
            Value::Param(k) => self
                .params
                .get(k)
                .ok_or_else(|| EvalError::MissingParam(k.clone())),
        }
    }

    fn path_value<'v>(&'v self, v: &'v Value) -> Result<&'v str, EvalError> {
        let s = self.value(v)?;
        if s.starts_with('/') {
            Ok(s)
        } else {
            Err(EvalError::RelativeValue(s.to_owned()))
        }
    }

    fn matches(&self, filter: &Filter) -> Result<bool, EvalError> {
        let r = self.request;
        Ok(match filter {
            Filter::Literal(v) => {
                let want = self.path_value(v)?;
                self.path.is_some_and(|p| p == want)
            }
            Filter::Subpath(v) => {
                let base = self.path_value(v)?.trim_end_matches('/');
                self.path.is_some_and(|p| {
                    base.is_empty()
                        || p == base
                        || (p.starts_with(base) && p[base.len()..].starts_with('/'))
                })
            }
            Filter::Prefix(v) => {
                let want = self.path_value(v)?;
                self.path.is_some_and(|p| p.starts_with(want))
            }
            Filter::Regex(pattern) => self.path.is_some_and(|p| pattern.is_match(p)),
            Filter::VnodeType(t) => r.vnode_type == Some(*t),
            Filter::RequireAll(fs) => {
                for f in fs {
                    if !self.matches(f)? {
                        return Ok(false);
                    }
                }
                true
            }
            Filter::RequireAny(fs) => {
                for f in fs {
                    if self.matches(f)? {
                        return Ok(true);
                    }
                }
                false
            }
            Filter::RequireNot(f) => !self.matches(f)?,
            Filter::Target(t) => r.targets.contains(t),
            Filter::SysctlName(v) => {
                let want = self.value(v)?;
                r.sysctl_name.is_some_and(|n| n == want)
            }
            Filter::SysctlNamePrefix(v) => {
                let want = self.value(v)?;
                r.sysctl_name.is_some_and(|n| n.starts_with(want))
            }
            Filter::GlobalName(v) => {
                let want = self.value(v)?;
                r.global_name.is_some_and(|n| n == want)
            }
        })
    }
}

/// The path the kernel would report for an absolute, `.`/`..`-free `path`: repeated and trailing
/// slashes dropped, and macOS's `/tmp`, `/var`, `/etc` symlinks resolved to `/private/…`.
/// `None` when `path` is relative or has `.`/`..` components.
pub(crate) fn resolve_query_path(path: &str) -> Option<String> {
    let rest = path.strip_prefix('/')?;
    let mut parts: Vec<&str> = Vec::new();
    for part in rest.split('/') {
        match part {
            "" => {}
            "." | ".." => return None,
            p => parts.push(p),
        }
    }
    if let Some(first) = parts.first() {
        if matches!(*first, "tmp" | "var" | "etc") {
            parts.insert(0, "private");
        }
    }
    Some(format!("/{}", parts.join("/")))
}
