//! Capability skips that cannot hide a missing sandbox: a test that needs a kernel facility asks
//! [`require`] (or [`sandbox_available`]) and returns early when it answers `false`, after a loud
//! `skipped: …` line. When `AGENT_EXEC_REQUIRE` names the facility, the same test fails instead,
//! with the probe's reason, so a CI run on a machine without confinement cannot go green.
//!
//! `AGENT_EXEC_REQUIRE` is a comma-separated list of [`Capability`] names (`landlock,seccomp,
//! userns,pidns,mountns,proc,testuser`, and `fuzz`, which only `cargo xtask fuzz` reads); an
//! unknown name fails every test that asks, so a typo cannot quietly require nothing. Unset or
//! empty: nothing is required and missing facilities skip.
//!
//! The answers are the code under test's own probes (`linux_sandbox::probe`,
//! `proctree::pid_namespace_available`), not a second copy of them: a test skips exactly when
//! the code it tests would refuse to run.

use std::fmt;

/// The environment variable naming the capabilities whose absence fails a test.
pub const REQUIRE_VAR: &str = "AGENT_EXEC_REQUIRE";

/// A kernel facility a test may need, named as in `AGENT_EXEC_REQUIRE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// `landlock`: a Landlock ABI the sandbox uses (`linux_sandbox::Availability::landlock_abi`).
    Landlock,
    /// `seccomp`: seccomp filter mode (`Availability::seccomp`).
    Seccomp,
    /// `userns`: this process may create a user namespace (`Availability::user_namespaces`).
    UserNamespaces,
    /// `pidns`: proctree's PID-namespace supervisor mode (`proctree::pid_namespace_available`).
    PidNamespace,
    /// `mountns`: a command's private mount and IPC namespaces, the read-only view outside its
    /// writable grants (`Availability::private_namespaces`).
    MountNamespaces,
    /// `proc`: a fresh `proc` mounted in a PID namespace, a shell's private `/proc`
    /// (`Availability::private_proc`).
    PrivateProc,
    /// `testuser`: the test user of `.ci/run` (a known password and a sudoers entry):
    /// `AGENT_EXEC_TEST_USER` and `AGENT_EXEC_TEST_PASSWORD` are set, the user exists, this
    /// process is root (to switch to it) and `/usr/bin/setpriv` is there ([`crate::test_user`]).
    TestUser,
}

impl Capability {
    /// Every capability, in the order `AGENT_EXEC_REQUIRE` lists them in the docs.
    pub const ALL: [Capability; 7] = [
        Capability::Landlock,
        Capability::Seccomp,
        Capability::UserNamespaces,
        Capability::PidNamespace,
        Capability::MountNamespaces,
        Capability::PrivateProc,
        Capability::TestUser,
    ];

    /// The name `AGENT_EXEC_REQUIRE` uses.
    pub fn name(self) -> &'static str {
        match self {
            Capability::Landlock => "landlock",
            Capability::Seccomp => "seccomp",
            Capability::UserNamespaces => "userns",
            Capability::PidNamespace => "pidns",
            Capability::MountNamespaces => "mountns",
            Capability::PrivateProc => "proc",
            Capability::TestUser => "testuser",
        }
    }

    /// The capability called `name` (exact, lower case).
    pub fn from_name(name: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.name() == name)
    }

    /// `None` when this machine has it; otherwise why not, in the probe's words.
    fn missing(self) -> Option<String> {
        if self == Capability::TestUser {
            return crate::testuser::missing();
        }
        probe::missing(self)
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a test that needs every capability in `needed` should run here.
///
/// `true` when the machine has them all. Otherwise, when `AGENT_EXEC_REQUIRE` names a missing
/// one, panics with the reason (the test fails); else prints `skipped: …` with the reason and
/// returns `false` (the caller returns at once).
///
/// ```
/// use testkit::Capability;
/// if !testkit::require(&[Capability::Landlock, Capability::Seccomp]) {
///     return;
/// }
/// // ... run something under the sandbox ...
/// ```
///
/// # Panics
/// When a required capability is missing, or `AGENT_EXEC_REQUIRE` names no known capability.
pub fn require(needed: &[Capability]) -> bool {
    let setting = std::env::var(REQUIRE_VAR).unwrap_or_default();
    require_with(needed, &setting, Capability::missing)
}

/// [`require`] of what the sandbox itself needs to run a command at all (Landlock and seccomp:
/// what `linux_sandbox::Availability::can_sandbox` checks).
pub fn sandbox_available() -> bool {
    require(&[Capability::Landlock, Capability::Seccomp])
}

/// [`require`] with the setting and the probe given, so its rules are tested on any machine.
fn require_with(
    needed: &[Capability],
    setting: &str,
    missing: impl Fn(Capability) -> Option<String>,
) -> bool {
    let required = match parse_required(setting) {
        Ok(required) => required,
        Err(message) => panic!("{message}"),
    };
    match verdict(needed, &required, missing) {
        Verdict::Run => true,
        Verdict::Skip(reason) => {
            eprintln!("skipped: {reason}");
            false
        }
        Verdict::Fail(reason) => panic!("{reason}"),
    }
}

/// What [`require`] does for one test.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Run,
    /// The message after `skipped: `.
    Skip(String),
    /// The panic message.
    Fail(String),
}

/// Names in `AGENT_EXEC_REQUIRE` that tools other than the tests answer: `fuzz` (the nightly
/// toolchain and cargo-fuzz, checked by `cargo xtask fuzz`). The tests accept and ignore them.
const OTHER_REQUIREMENTS: &[&str] = &["fuzz"];

/// The capabilities `setting` (the value of `AGENT_EXEC_REQUIRE`) names: comma-separated,
/// spaces around a name ignored, empty entries and [`OTHER_REQUIREMENTS`] ignored.
fn parse_required(setting: &str) -> Result<Vec<Capability>, String> {
    let mut required = Vec::new();
    for name in setting
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty() && !OTHER_REQUIREMENTS.contains(n))
    {
        let Some(capability) = Capability::from_name(name) else {
            let known: Vec<&str> = Capability::ALL.iter().map(|c| c.name()).collect();
            return Err(format!(
                "{REQUIRE_VAR}={setting:?} names `{name}`, which is no capability the tests \
                 know; use a comma-separated list of {}",
                known.join(", ")
            ));
        };
        if !required.contains(&capability) {
            required.push(capability);
        }
    }
    Ok(required)
}

/// The first missing required capability fails the test; any other missing one skips it.
fn verdict(
    needed: &[Capability],
    required: &[Capability],
    missing: impl Fn(Capability) -> Option<String>,
) -> Verdict {
    let absent: Vec<(Capability, String)> = needed
        .iter()
        .filter_map(|&c| missing(c).map(|why| (c, why)))
        .collect();
    if let Some((capability, why)) = absent.iter().find(|(c, _)| required.contains(c)) {
        return Verdict::Fail(format!(
            "{REQUIRE_VAR} names `{capability}`, which this machine lacks, so this test fails \
             instead of skipping: {why}\n(run it where the kernel offers {capability}, or drop \
             `{capability}` from {REQUIRE_VAR} to let it skip)"
        ));
    }
    match absent.as_slice() {
        [] => Verdict::Run,
        [(capability, why), ..] => Verdict::Skip(format!(
            "needs `{capability}`, which this machine lacks ({REQUIRE_VAR}={capability} would \
             make this a failure): {why}"
        )),
    }
}

#[cfg(target_os = "linux")]
mod probe {
    use super::Capability;

    pub(super) fn missing(capability: Capability) -> Option<String> {
        let probe = linux_sandbox::probe();
        let present = match capability {
            Capability::Landlock => probe.landlock_abi().is_some(),
            Capability::Seccomp => probe.seccomp(),
            Capability::UserNamespaces => probe.user_namespaces(),
            Capability::MountNamespaces => probe.private_namespaces(),
            Capability::PrivateProc => probe.private_proc(),
            // Answered before the kernel probes (`Capability::missing`).
            Capability::TestUser => return crate::testuser::missing(),
            Capability::PidNamespace => {
                return (!proctree::pid_namespace_available()).then(|| {
                    "proctree cannot start its supervisor in a PID namespace here (the kernel \
                     refuses namespaces to this user)"
                        .to_owned()
                });
            }
        };
        // The probe's report names every layer with its reason (errno, boot parameter, kernel
        // version); the whole of it says more than the one line.
        (!present).then(|| format!("the sandbox probe says:\n{probe}"))
    }
}

#[cfg(not(target_os = "linux"))]
mod probe {
    use super::Capability;

    pub(super) fn missing(capability: Capability) -> Option<String> {
        Some(format!(
            "{capability} is a Linux facility and this is {}",
            std::env::consts::OS
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lacking(absent: &'static [Capability]) -> impl Fn(Capability) -> Option<String> {
        move |c| absent.contains(&c).then(|| format!("no {c} in this test"))
    }

    #[test]
    fn a_test_runs_when_every_capability_it_needs_is_present() {
        let verdict = verdict(
            &[Capability::Landlock, Capability::Seccomp],
            &Capability::ALL,
            lacking(&[Capability::PidNamespace]),
        );
        assert_eq!(verdict, Verdict::Run);
    }

    #[test]
    fn a_missing_capability_that_is_not_required_skips_with_the_reason() {
        let verdict = verdict(
            &[Capability::Landlock, Capability::Seccomp],
            &[Capability::Seccomp],
            lacking(&[Capability::Landlock]),
        );
        assert_eq!(
            verdict,
            Verdict::Skip(
                "needs `landlock`, which this machine lacks (AGENT_EXEC_REQUIRE=landlock would \
                 make this a failure): no landlock in this test"
                    .to_owned()
            )
        );
        assert!(!require_with(
            &[Capability::Landlock],
            "",
            lacking(&[Capability::Landlock])
        ));
    }

    #[test]
    fn a_missing_capability_that_is_required_fails_with_the_reason() {
        let verdict = verdict(
            &[Capability::Landlock, Capability::Seccomp],
            &[Capability::Seccomp],
            lacking(&[Capability::Landlock, Capability::Seccomp]),
        );
        let Verdict::Fail(message) = verdict else {
            panic!("expected a failure, got {verdict:?}");
        };
        assert!(
            message.starts_with(
                "AGENT_EXEC_REQUIRE names `seccomp`, which this machine lacks, so this test \
                 fails instead of skipping: no seccomp in this test\n"
            ),
            "{message}"
        );
    }

    #[test]
    #[should_panic(expected = "AGENT_EXEC_REQUIRE names `pidns`, which this machine lacks")]
    fn require_panics_when_a_required_capability_is_missing() {
        require_with(
            &[Capability::PidNamespace],
            "landlock, pidns",
            lacking(&[Capability::PidNamespace]),
        );
    }

    #[test]
    #[should_panic(expected = "names `landlok`, which is no capability the tests know")]
    fn an_unknown_name_in_the_setting_fails_instead_of_requiring_nothing() {
        require_with(&[Capability::Landlock], "landlok", lacking(&[]));
    }

    #[test]
    fn the_setting_is_a_comma_separated_list_of_names() {
        assert_eq!(parse_required(""), Ok(vec![]));
        assert_eq!(parse_required(" , "), Ok(vec![]));
        assert_eq!(
            parse_required("landlock, seccomp,userns,pidns,mountns,proc,testuser,landlock"),
            Ok(Capability::ALL.to_vec())
        );
        assert!(parse_required("Landlock").is_err());
        // `fuzz` is for `cargo xtask fuzz`, not a capability of the tests.
        assert_eq!(
            parse_required("landlock,fuzz"),
            Ok(vec![Capability::Landlock])
        );
    }

    #[test]
    fn every_capability_is_found_by_its_name() {
        for c in Capability::ALL {
            assert_eq!(Capability::from_name(c.name()), Some(c));
            assert_eq!(c.to_string(), c.name());
        }
    }
}
