//! Golden files for the two shipped profiles: the exact SBPL text and `-D` parameters that
//! `sandbox-exec` receives (Chromium's BPF DSL compares compiled policies the same way).
//! Regenerate with `UPDATE_GOLDEN=1 cargo test -p seatbelt --test golden` and review the diff.

// Test helpers may unwrap: a panic is a failed test with a message (clippy.toml exempts only
// `#[test]` bodies, not helpers).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use seatbelt::{BoundProfile, Network, Profile, ProfileSpec};

/// Example paths as `exec` would pass them on a Mac: canonical, with spaces and non-ASCII to show
/// they never reach the profile text.
const MIRROR: &str = "/Users/alice/Library/Application Support/agent/mirrors/Café \"q\" (1)";
const SCOPE: &str = "/Users/alice/src/project";
const TEMP: &str = "/private/var/folders/xy/abc123/T/agent-call-7";

fn run_profile() -> BoundProfile {
    ProfileSpec::run("/usr/bin/awk", MIRROR, TEMP)
        .build()
        .unwrap()
}

fn command_profile() -> BoundProfile {
    let mut spec = ProfileSpec::command(SCOPE, TEMP);
    spec.read_write.push("/Users/alice/notes".into());
    spec.read_only.push("/Users/alice/datasets".into());
    spec.build().unwrap()
}

fn command_profile_with_network() -> BoundProfile {
    let mut spec = ProfileSpec::command(SCOPE, TEMP);
    spec.network = Network::Allowed;
    spec.build().unwrap()
}

fn golden_text(bound: &BoundProfile) -> String {
    let mut out = bound.text();
    out.push_str(";\n; parameters (passed as -D KEY=VALUE, never part of the text above):\n");
    for (k, v) in bound.params().iter() {
        out.push_str(&format!("; {k}={v}\n"));
    }
    out
}

fn check(name: &str, bound: &BoundProfile) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    let actual = golden_text(bound);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    assert_eq!(
        actual,
        expected,
        "{} differs; if intended, regenerate with UPDATE_GOLDEN=1",
        path.display()
    );
    // The golden file itself (comments included) parses back to the same profile.
    assert_eq!(&Profile::parse(&expected).unwrap(), bound.profile());
}

#[test]
fn run_profile_matches_golden_file() {
    check("run.sb", &run_profile());
}

#[test]
fn command_profile_matches_golden_file() {
    check("command.sb", &command_profile());
}

#[test]
fn command_profile_with_network_matches_golden_file() {
    check("command-network.sb", &command_profile_with_network());
}

#[test]
fn user_paths_appear_only_as_parameters_never_in_profile_text() {
    // invariant 6.
    for bound in [
        run_profile(),
        command_profile(),
        command_profile_with_network(),
    ] {
        let text = bound.text();
        for (_, value) in bound.params().iter() {
            if value.starts_with("/usr/bin/") {
                continue; // the fixed program path is also a system path constant
            }
            assert!(
                !text.contains(value),
                "{value} was spliced into the profile"
            );
        }
        assert!(!text.contains("alice"));
        assert!(!text.contains("/private/var/folders"));
    }
}
