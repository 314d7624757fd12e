//! Why a bound profile allows or denies one file access: [`BoundProfile::explain`], the
//! evaluator's verdict ([`BoundProfile::evaluate`]) read back as "which rule, and what kind of
//! rule" (LIVE-4, the macOS side of `linux_sandbox::Policy::explain`).
//!
//! **Owns:** mapping an access kind to the operation Seatbelt checks (read → `file-read-data`,
//! write → `file-write-data`, create → `file-write-create`, execute → `process-exec`) and
//! naming the deciding rule: a granted root (by its parameter key), a system location, the
//! `.git` deny, a private or protected path of the run_command profile, `(deny default)`.
//!
//! **Refuses:** to touch the file system or resolve links (the caller passes the resolved path,
//! as for [`BoundProfile::decide`]), and to guess: a question the model cannot answer is
//! [`Explanation::Unknown`]. Like the evaluator it is a model, not yet compared with a Mac.
//! An answer depends on the profile and the path's text only, so it is no oracle of the file
//! system; a caller that resolves links first must do it only where the sandboxed program
//! could look itself (`exec::denials` follows links in `/`, on the way to the profile's roots
//! and in directories the profile lets the program list, and takes the rest as written).

use crate::ast::{Action, Filter, Operation, Profile, Rule, Value};
use crate::eval::{Decision, Request};
use crate::profiles::{BoundProfile, DOT_GIT_PATTERN};

/// The kind of file access to explain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileAccess {
    /// Read a file or list a directory (`file-read-data`).
    Read,
    /// Write an existing file (`file-write-data`).
    Write,
    /// Create a file (`file-write-create`).
    Create,
    /// Execute a file (`process-exec`).
    Execute,
}

impl FileAccess {
    fn operation(self) -> Operation {
        match self {
            FileAccess::Read => Operation::FileReadData,
            FileAccess::Write => Operation::FileWriteData,
            FileAccess::Create => Operation::FileWriteCreate,
            FileAccess::Execute => Operation::ProcessExec,
        }
    }
}

/// What kind of rule allows something.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Grantor {
    /// A root the profile takes as a parameter: `READ_WRITE_<n>`, `READ_ONLY_<n>` or `PROGRAM`.
    Root(String),
    /// A fixed location of the profile (system libraries, program directories, devices).
    System,
}

/// What the profile says about one access.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Explanation {
    /// Allowed by this kind of rule.
    Allowed(Grantor),
    /// Denied, and why.
    Denied(Denial),
    /// The model cannot answer (a relative or `..` path, a missing parameter); claim nothing.
    Unknown(String),
}

/// Why the profile denies an access.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Denial {
    /// The path is readable (by this rule) but not for this access: a read-only root or system
    /// location asked to write, a data root asked to execute.
    ReadOnly(Grantor),
    /// The `.git` deny of the `run` profile (RUN-7).
    DotGit,
    /// The profile executes its one program only (RUN-7).
    NotTheProgram,
    /// No rule allows anything on the path: `(deny default)`.
    Outside,
    /// A private location of the run_command profile (RCS-1): credentials or private data.
    Private,
    /// A protected path of the run_command profile (RCS-3), or a directory holding one: never
    /// written, even inside a writable root.
    Protected,
}

impl BoundProfile {
    /// What this profile says about `access` to the resolved absolute `path`.
    ///
    /// ```
    /// use seatbelt::{Denial, Explanation, FileAccess, Grantor, ProfileSpec};
    ///
    /// let bound = ProfileSpec::command("/Users/u/work", "/private/tmp/t").build()?;
    /// assert_eq!(
    ///     bound.explain("/Users/u/work/a.c", FileAccess::Write),
    ///     Explanation::Allowed(Grantor::Root("READ_WRITE_0".into()))
    /// );
    /// assert_eq!(
    ///     bound.explain("/Users/u/.ssh/id_rsa", FileAccess::Read),
    ///     Explanation::Denied(Denial::Outside)
    /// );
    /// # Ok::<(), seatbelt::SpecError>(())
    /// ```
    pub fn explain(&self, path: &str, access: FileAccess) -> Explanation {
        let request = Request::file(access.operation(), path);
        let verdict = match self.evaluate(&request) {
            Ok(v) => v,
            Err(e) => return Explanation::Unknown(e.to_string()),
        };
        let rule = verdict.rule.and_then(|i| self.profile().rules.get(i));
        match (verdict.decision, rule) {
            (Decision::Allow, Some(rule)) => {
                Explanation::Allowed(grantor(self, &rule.filters, &request))
            }
            // `(deny default)` cannot allow; kept total rather than panicking.
            (Decision::Allow, None) => Explanation::Allowed(Grantor::System),
            (Decision::Deny, Some(rule)) if rule.action == Action::Deny => {
                let dot_git = rule
                    .filters
                    .iter()
                    .any(|f| matches!(f, Filter::Regex(p) if p.as_str() == DOT_GIT_PATTERN));
                let keyed = |prefix: &str| {
                    rule.filters.iter().any(|f| {
                        matches!(f, Filter::Literal(Value::Param(k)) | Filter::Subpath(Value::Param(k))
                            if k.starts_with(prefix))
                    })
                };
                if dot_git {
                    Explanation::Denied(Denial::DotGit)
                } else if keyed("PRIVATE_") {
                    Explanation::Denied(Denial::Private)
                } else if keyed("PROTECTED_") {
                    Explanation::Denied(Denial::Protected)
                } else {
                    Explanation::Unknown(format!(
                        "denied by rule {} of the profile, which has no known meaning here",
                        verdict.rule.unwrap_or_default()
                    ))
                }
            }
            (Decision::Deny, _) => {
                if access == FileAccess::Execute && self.params().get("PROGRAM").is_some() {
                    return Explanation::Denied(Denial::NotTheProgram);
                }
                if access != FileAccess::Read {
                    if let Explanation::Allowed(by) = self.explain(path, FileAccess::Read) {
                        return Explanation::Denied(Denial::ReadOnly(by));
                    }
                }
                Explanation::Denied(Denial::Outside)
            }
        }
    }
}

/// The kind of the filter of `filters` that matched `request`: a root if it reads a parameter,
/// else a fixed location. Each filter is tried alone through the evaluator (a one-rule
/// profile), so the answer is the evaluator's own matching, not a second implementation.
fn grantor(bound: &BoundProfile, filters: &[Filter], request: &Request<'_>) -> Grantor {
    fn param(f: &Filter) -> Option<&str> {
        match f {
            Filter::Literal(Value::Param(k))
            | Filter::Subpath(Value::Param(k))
            | Filter::Prefix(Value::Param(k)) => Some(k),
            _ => None,
        }
    }
    let matched = filters.iter().find(|f| {
        let alone = Profile::new().rule(Rule::allow([request.operation]).filter((*f).clone()));
        alone
            .evaluate(request, bound.params())
            .is_ok_and(|v| v.decision == Decision::Allow)
    });
    match matched.and_then(param) {
        Some(k) => Grantor::Root(k.to_owned()),
        None => Grantor::System,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProfileSpec;

    fn command() -> BoundProfile {
        let mut spec = ProfileSpec::command("/Users/u/work", "/private/tmp/call");
        spec.read_only.push("/Users/u/.cargo".into());
        spec.build().unwrap()
    }

    #[test]
    fn roots_allow_and_are_named_by_their_parameter() {
        let b = command();
        let root = |k: &str| Explanation::Allowed(Grantor::Root(k.into()));
        assert_eq!(
            b.explain("/Users/u/work/src/a.c", FileAccess::Create),
            root("READ_WRITE_0")
        );
        assert_eq!(
            b.explain("/tmp/call/x", FileAccess::Write),
            root("READ_WRITE_1")
        );
        assert_eq!(
            b.explain("/Users/u/.cargo/bin/cargo", FileAccess::Read),
            root("READ_ONLY_0")
        );
    }

    #[test]
    fn a_read_only_root_and_system_locations_refuse_writes_as_read_only() {
        let b = command();
        assert_eq!(
            b.explain("/Users/u/.cargo/config.toml", FileAccess::Write),
            Explanation::Denied(Denial::ReadOnly(Grantor::Root("READ_ONLY_0".into())))
        );
        assert_eq!(
            b.explain("/usr/bin/env", FileAccess::Execute),
            Explanation::Allowed(Grantor::System)
        );
        assert_eq!(
            b.explain("/usr/bin/env", FileAccess::Create),
            Explanation::Denied(Denial::ReadOnly(Grantor::System))
        );
    }

    #[test]
    fn outside_every_rule_is_outside() {
        let b = command();
        for path in ["/Users/u/.ssh/id_rsa", "/etc/master.passwd", "/Users/u"] {
            assert_eq!(
                b.explain(path, FileAccess::Read),
                Explanation::Denied(Denial::Outside),
                "{path}"
            );
        }
    }

    #[test]
    fn the_run_profile_denies_git_and_other_programs() {
        let b = ProfileSpec::run("/usr/bin/awk", "/Users/u/mirror", "/private/tmp/run")
            .build()
            .unwrap();
        assert_eq!(
            b.explain("/Users/u/mirror/.GIT/config", FileAccess::Read),
            Explanation::Denied(Denial::DotGit)
        );
        assert_eq!(
            b.explain("/bin/sh", FileAccess::Execute),
            Explanation::Denied(Denial::NotTheProgram)
        );
        assert_eq!(
            b.explain("/usr/bin/awk", FileAccess::Execute),
            Explanation::Allowed(Grantor::Root("PROGRAM".into()))
        );
        assert_eq!(
            b.explain("/Users/u/notes.txt", FileAccess::Read),
            Explanation::Denied(Denial::Outside)
        );
    }

    #[test]
    fn an_unresolved_path_is_unknown() {
        let b = command();
        for path in ["work/a", "/Users/u/work/../.ssh/id_rsa"] {
            assert!(
                matches!(b.explain(path, FileAccess::Read), Explanation::Unknown(_)),
                "{path}"
            );
        }
    }
}
