//! The `run_command` profile ([`ArgvProfileInput`]) under the evaluator: `$HOME` readable except
//! its private locations, the working directory, temp dir, caches and write paths writable,
//! protected paths never written, network only when asked (RCS-1, RCS-2, RCS-3, RC-7,
//! RC-10). Every restriction is paired with the allowance next to it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use Decision::{Allow, Deny};
use proptest::prelude::*;
use seatbelt::{
    ArgvProfileInput, BoundProfile, Decision, Denial, Explanation, FileAccess, Network,
    Operation as Op, Profile, Request, SpecError,
};

const HOME: &str = "/Users/alice";
const WORK: &str = "/Users/alice/src/proj";
const TEMP: &str = "/private/var/folders/xy/abc/T/call-1";

fn h(rel: &str) -> String {
    format!("{HOME}/{rel}")
}

fn w(rel: &str) -> String {
    format!("{WORK}/{rel}")
}

fn input() -> ArgvProfileInput {
    let mut i = ArgvProfileInput::new(WORK, TEMP, HOME);
    for c in [".cache", ".cargo/registry", ".npm", ".m2/repository"] {
        i.caches.push(h(c).into());
    }
    for p in [
        ".ssh",
        ".aws",
        ".netrc",
        ".cargo/credentials.toml",
        ".m2/settings.xml",
        "Library/Keychains",
    ] {
        i.private.push(h(p).into());
    }
    for p in [".git/hooks", ".git/config", ".gitmodules"] {
        i.protected.push(w(p).into());
    }
    i.protected.push(h(".zshrc").into());
    i
}

fn build(i: &ArgvProfileInput) -> BoundProfile {
    i.build().unwrap()
}

/// Asserts each `(operation, path, expected)` and reports every mismatch at once.
fn expect(bound: &BoundProfile, cases: &[(Op, &str, Decision)]) {
    let bad: Vec<String> = cases
        .iter()
        .filter_map(|&(op, path, want)| {
            let got = bound.decide(op, path).unwrap();
            (got != want).then(|| format!("{} {path}: got {got:?}, want {want:?}", op.name()))
        })
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn home_is_readable_and_executable_but_not_writable() {
    expect(
        &build(&input()),
        &[
            (Op::FileReadData, &h(".zshrc"), Allow),
            (Op::FileReadData, &h(".gitconfig"), Allow),
            (Op::FileReadData, &h(".cargo/config.toml"), Allow),
            (Op::ProcessExec, &h(".cargo/bin/cargo"), Allow),
            (
                Op::FileMapExecutable,
                &h(".rustup/toolchains/x/lib/a.dylib"),
                Allow,
            ),
            (Op::FileWriteData, &h(".gitconfig"), Deny),
            (Op::FileWriteCreate, &h("new.txt"), Deny),
            (Op::FileWriteData, &h(".cargo/config.toml"), Deny),
            (Op::FileWriteUnlink, &h("notes.txt"), Deny),
        ],
    );
}

#[test]
fn a_private_file_under_home_is_denied_every_access() {
    let b = build(&input());
    for path in [
        h(".ssh/id_ed25519"),
        h(".ssh"),
        h(".aws/credentials"),
        h(".netrc"),
        h(".cargo/credentials.toml"),
        h(".m2/settings.xml"),
        h("Library/Keychains/login.keychain-db"),
    ] {
        for op in [
            Op::FileReadData,
            Op::FileReadMetadata,
            Op::FileWriteData,
            Op::FileWriteCreate,
            Op::FileWriteUnlink,
            Op::FileMapExecutable,
            Op::ProcessExec,
        ] {
            assert_eq!(b.decide(op, &path).unwrap(), Deny, "{} {path}", op.name());
        }
    }
    // Neighbours stay readable: `subpath` matches whole components.
    expect(
        &b,
        &[
            (Op::FileReadData, &h(".netrc.example"), Allow),
            (Op::FileReadData, &h(".sshrc"), Allow),
            (Op::FileReadData, &h(".m2/repository/a.jar"), Allow),
        ],
    );
    assert_eq!(
        b.explain(&h(".ssh/id_rsa"), FileAccess::Read),
        Explanation::Denied(Denial::Private)
    );
}

#[test]
fn caches_temp_and_the_working_directory_are_writable() {
    expect(
        &build(&input()),
        &[
            (Op::FileWriteCreate, &h(".cache/pip/wheels/x.whl"), Allow),
            (Op::FileWriteData, &h(".cargo/registry/index/x"), Allow),
            (Op::FileWriteUnlink, &h(".npm/_cacache/tmp/y"), Allow),
            (Op::FileWriteCreate, &h(".m2/repository/org/x.pom"), Allow),
            (Op::FileWriteCreate, &format!("{TEMP}/out"), Allow),
            (Op::FileWriteData, &w("src/main.rs"), Allow),
            (Op::FileWriteCreate, &w("target/debug/app"), Allow),
            (Op::ProcessExec, &w("target/debug/app"), Allow),
            (Op::FileWriteData, &w(".git/objects/ab/cdef"), Allow),
            (Op::FileWriteData, &w(".git/HEAD"), Allow),
            // Not the cache's parent.
            (Op::FileWriteCreate, &h(".cargo/bin/evil"), Deny),
            (Op::FileWriteCreate, &h(".m2/settings.xml"), Deny),
        ],
    );
}

#[test]
fn protected_paths_in_the_working_directory_are_never_written() {
    let b = build(&input());
    expect(
        &b,
        &[
            (Op::FileWriteCreate, &w(".git/hooks/pre-commit"), Deny),
            (Op::FileWriteData, &w(".git/hooks/post-checkout"), Deny),
            (Op::FileWriteUnlink, &w(".git/hooks"), Deny),
            (Op::FileWriteMode, &w(".git/hooks/pre-commit"), Deny),
            (Op::FileWriteData, &w(".git/config"), Deny),
            (Op::FileWriteCreate, &w(".gitmodules"), Deny),
            (Op::FileLink, &w(".git/hooks/x"), Deny),
            // The `.git` that holds them cannot be renamed away and replaced…
            (Op::FileWriteUnlink, &w(".git"), Deny),
            // …but can be made where it is missing, and read as usual.
            (Op::FileWriteCreate, &w(".git"), Allow),
            (Op::FileReadData, &w(".git/hooks/pre-commit"), Allow),
            (Op::FileReadData, &w(".git/config"), Allow),
            (Op::ProcessExec, &w(".git/hooks/pre-commit"), Allow),
            // A neighbour is not protected.
            (Op::FileWriteData, &w(".git/config.lock"), Allow),
            (Op::FileWriteData, &w("sub/.git/config"), Allow),
        ],
    );
    assert_eq!(
        b.explain(&w(".git/hooks/x"), FileAccess::Create),
        Explanation::Denied(Denial::Protected)
    );
}

#[test]
fn network_is_denied_unless_asked() {
    let ops = [
        Op::NetworkOutbound,
        Op::NetworkInbound,
        Op::NetworkBind,
        Op::SystemSocket,
    ];
    let b = build(&input());
    for op in ops {
        assert_eq!(
            b.evaluate(&Request::bare(op)).unwrap().decision,
            Deny,
            "{}",
            op.name()
        );
    }
    let mut i = input();
    i.network = Network::Allowed;
    let net = build(&i);
    for op in ops {
        assert_eq!(
            net.evaluate(&Request::bare(op)).unwrap().decision,
            Allow,
            "{}",
            op.name()
        );
    }
    expect(
        &net,
        &[
            (Op::FileReadData, "/etc/resolv.conf", Allow),
            (Op::FileReadData, &h(".ssh/id_rsa"), Deny),
            (Op::FileWriteData, &w(".git/hooks/x"), Deny),
        ],
    );
}

#[test]
fn processes_may_fork_and_run_the_system_s_and_the_user_s_programs() {
    let b = build(&input());
    assert_eq!(
        b.evaluate(&Request::bare(Op::ProcessFork))
            .unwrap()
            .decision,
        Allow
    );
    expect(
        &b,
        &[
            (Op::ProcessExec, "/bin/sh", Allow),
            (Op::ProcessExec, "/usr/bin/git", Allow),
            (Op::ProcessExec, "/opt/homebrew/bin/node", Allow),
            (Op::FileReadData, "/usr/lib/libSystem.B.dylib", Allow),
            (Op::FileReadData, "/usr/share/zoneinfo/UTC", Allow),
            (Op::ProcessExec, "/Users/bob/bin/x", Deny),
            (Op::FileReadData, "/Users/bob/notes.txt", Deny),
            (Op::FileReadData, "/private/var/root/.ssh/id_rsa", Deny),
            (Op::FileReadData, "/private/etc/master.passwd", Deny),
        ],
    );
}

#[test]
fn a_write_path_inside_a_private_location_is_the_user_s_choice() {
    let mut i = input();
    i.write_paths.push(h(".ssh/known_hosts").into());
    i.write_paths.push(h("notes").into());
    expect(
        &build(&i),
        &[
            (Op::FileWriteData, &h(".ssh/known_hosts"), Allow),
            (Op::FileReadData, &h(".ssh/known_hosts"), Allow),
            (Op::FileReadData, &h(".ssh/id_ed25519"), Deny),
            (Op::FileWriteCreate, &h("notes/a.md"), Allow),
            (Op::FileWriteCreate, &h("other/a.md"), Deny),
        ],
    );
}

#[test]
fn private_and_protected_paths_win_inside_a_working_directory_of_home() {
    let mut i = input();
    i.workdir = HOME.into();
    i.protected.push(h(".bashrc").into());
    expect(
        &build(&i),
        &[
            (Op::FileWriteCreate, &h("notes.txt"), Allow),
            (Op::FileReadData, &h(".ssh/id_rsa"), Deny),
            (Op::FileWriteCreate, &h(".ssh/authorized_keys"), Deny),
            (Op::FileWriteData, &h(".zshrc"), Deny),
            (Op::FileWriteData, &h(".bashrc"), Deny),
            (Op::FileWriteUnlink, &h(".bashrc"), Deny),
            (Op::FileReadData, &h(".bashrc"), Allow),
        ],
    );
}

#[test]
fn paths_travel_only_as_parameters_and_the_text_parses_back() {
    let b = build(&input());
    let text = b.text();
    assert!(
        !text.contains("alice") && !text.contains("call-1"),
        "{text}"
    );
    assert!(text.contains(r#"(subpath (param "PRIVATE_0"))"#), "{text}");
    assert!(
        text.contains(r#"(subpath (param "PROTECTED_0"))"#),
        "{text}"
    );
    assert!(
        text.contains(r#"(literal (param "PROTECTED_PARENT_0"))"#),
        "{text}"
    );
    assert_eq!(b.params().get("PRIVATE_0"), Some(h(".ssh").as_str()));
    assert_eq!(b.params().get("READ_ONLY_0"), Some(HOME));
    assert_eq!(b.params().get("READ_WRITE_0"), Some(WORK));
    assert_eq!(
        b.params().get("PROTECTED_PARENT_0"),
        Some(w(".git").as_str())
    );
    assert_eq!(&Profile::parse(&text).unwrap(), b.profile());
}

#[test]
fn bad_paths_are_refused_before_anything_is_built() {
    let mut i = input();
    i.private.push("relative/.ssh".into());
    assert!(matches!(i.build(), Err(SpecError::NotAbsolute(_))));
    let mut i = input();
    i.protected.push(format!("{WORK}/../x/.git/hooks").into());
    assert!(matches!(i.build(), Err(SpecError::NotCanonical(_))));
    let mut i = input();
    i.write_paths.push("/".into());
    assert!(matches!(i.build(), Err(SpecError::WholeFileSystem)));
    let mut i = input();
    i.temp = "/tmp/call".into();
    assert_eq!(
        build(&i).params().get("READ_WRITE_1"),
        Some("/private/tmp/call")
    );
}

#[test]
fn a_translated_spec_with_denies_builds_the_same_profile() {
    let i = input();
    let direct = build(&i);
    let translated = i
        .spec()
        .build_with_denies(&i.private, &i.protected)
        .unwrap();
    assert_eq!(direct, translated);
    // Without denies it is the command profile's shape: the private key is merely under a
    // read-only root.
    let plain = i.spec().build().unwrap();
    assert_eq!(
        plain.decide(Op::FileReadData, &h(".ssh/id_rsa")).unwrap(),
        Allow
    );
}

proptest! {
    #[test]
    fn nothing_below_a_private_path_is_readable_and_nothing_below_a_protected_one_writable(
        rel in "[a-z._-]{1,8}(/[a-z._-]{1,8}){0,3}",
        private in 0usize..6,
        protected in 0usize..4,
    ) {
        prop_assume!(!rel.split('/').any(|c| c == "." || c == ".."));
        let i = input();
        let b = build(&i);
        let p = format!("{}/{rel}", i.private[private].display());
        prop_assert_eq!(b.decide(Op::FileReadData, &p).unwrap(), Deny);
        prop_assert_eq!(b.decide(Op::FileWriteCreate, &p).unwrap(), Deny);
        let q = format!("{}/{rel}", i.protected[protected].display());
        prop_assert_eq!(b.decide(Op::FileWriteCreate, &q).unwrap(), Deny);
        prop_assert_eq!(b.decide(Op::FileWriteUnlink, &q).unwrap(), Deny);
    }
}
