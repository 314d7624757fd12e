//! The evaluator's semantics, one behaviour per test, data-driven through `check`: last match
//! wins, wildcards, each filter kind, and the errors `sandbox-exec` would raise. These pin the
//! model described in `seatbelt::eval`; only `tests/macos.rs` on a Mac compares it with the kernel.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use seatbelt::{Decision, EvalError, Operation as Op, Params, Profile, Request, Target, VnodeType};

fn profile(rules: &str) -> Profile {
    Profile::parse(&format!("(version 1)\n(deny default)\n{rules}")).unwrap()
}

fn params(pairs: &[(&str, &str)]) -> Params {
    let mut p = Params::new();
    for (k, v) in pairs {
        p.insert(k, v).unwrap();
    }
    p
}

/// Decides a file request under `rules` and compares with `expect`.
fn check(rules: &str, op: Op, path: &str, expect: Decision) {
    let got = profile(rules).decide(op, path, &Params::new()).unwrap();
    assert_eq!(got, expect, "{} {path} under\n{rules}", op.name());
}

fn check_request(rules: &str, req: Request<'_>, expect: Decision) {
    let got = profile(rules)
        .evaluate(&req, &Params::new())
        .unwrap()
        .decision;
    assert_eq!(got, expect, "{req:?} under\n{rules}");
}

use Decision::{Allow, Deny};

#[test]
fn nothing_matches_so_deny_default_decides() {
    let p = profile("");
    let v = p
        .evaluate(
            &Request::file(Op::FileReadData, "/etc/passwd"),
            &Params::new(),
        )
        .unwrap();
    assert_eq!((v.decision, v.rule), (Deny, None));
}

#[test]
fn last_matching_rule_wins_in_either_order() {
    let narrow_deny_last =
        r#"(allow file-read* (subpath "/a")) (deny file-read* (literal "/a/b"))"#;
    check(narrow_deny_last, Op::FileReadData, "/a/b", Deny);
    check(narrow_deny_last, Op::FileReadData, "/a/c", Allow);
    let broad_allow_last =
        r#"(deny file-read* (literal "/a/b")) (allow file-read* (subpath "/a"))"#;
    check(broad_allow_last, Op::FileReadData, "/a/b", Allow);
    let v = profile(narrow_deny_last)
        .evaluate(&Request::file(Op::FileReadData, "/a/b"), &Params::new())
        .unwrap();
    assert_eq!(v.rule, Some(1));
}

#[test]
fn wildcards_cover_their_family_and_nothing_else() {
    let rules = r#"(allow file-read* (subpath "/a"))"#;
    check(rules, Op::FileReadData, "/a/x", Allow);
    check(rules, Op::FileReadMetadata, "/a/x", Allow);
    check(rules, Op::FileReadXattr, "/a/x", Allow);
    check(rules, Op::FileWriteData, "/a/x", Deny);
    check(rules, Op::FileMapExecutable, "/a/x", Deny);
    check_request(
        "(allow network*)",
        Request::bare(Op::NetworkOutbound),
        Allow,
    );
    check_request("(allow network*)", Request::bare(Op::SystemSocket), Deny);
    check_request(
        "(allow process-info*)",
        Request::bare(Op::ProcessInfoPidinfo),
        Allow,
    );
    check_request(
        "(allow ipc-posix-shm*)",
        Request::bare(Op::IpcPosixShmWriteData),
        Allow,
    );
}

#[test]
fn file_write_wildcard_does_not_cover_file_link_but_file_star_does() {
    // CMD-9: allowing writes must not allow hard links.
    check(
        r#"(allow file-write* (subpath "/s"))"#,
        Op::FileLink,
        "/s/l",
        Deny,
    );
    check(
        r#"(allow file-write* (subpath "/s"))"#,
        Op::FileWriteCreate,
        "/s/l",
        Allow,
    );
    check(
        r#"(allow file* (subpath "/s"))"#,
        Op::FileLink,
        "/s/l",
        Allow,
    );
    check(
        r#"(allow file* (subpath "/s")) (deny file-link)"#,
        Op::FileLink,
        "/s/l",
        Deny,
    );
}

#[test]
fn several_filters_in_a_rule_are_alternatives_and_none_means_always() {
    let rules = r#"(allow file-read-data (literal "/x") (literal "/y"))"#;
    check(rules, Op::FileReadData, "/x", Allow);
    check(rules, Op::FileReadData, "/y", Allow);
    check(rules, Op::FileReadData, "/z", Deny);
    check(
        "(allow file-read-data)",
        Op::FileReadData,
        "/anything",
        Allow,
    );
}

#[test]
fn literal_is_exact() {
    let rules = r#"(allow file-read-data (literal "/a/b"))"#;
    check(rules, Op::FileReadData, "/a/b", Allow);
    check(rules, Op::FileReadData, "/a/b/c", Deny);
    check(rules, Op::FileReadData, "/a/bc", Deny);
    check(rules, Op::FileReadData, "/a", Deny);
}

#[test]
fn subpath_is_the_path_and_below_component_wise() {
    let rules = r#"(allow file-read-data (subpath "/a/b"))"#;
    check(rules, Op::FileReadData, "/a/b", Allow);
    check(rules, Op::FileReadData, "/a/b/c/d", Allow);
    check(rules, Op::FileReadData, "/a/bc", Deny);
    check(rules, Op::FileReadData, "/a", Deny);
    check(
        r#"(allow file-read-data (subpath "/a/b/"))"#,
        Op::FileReadData,
        "/a/b/c",
        Allow,
    );
    check(
        r#"(allow file-read-data (subpath "/"))"#,
        Op::FileReadData,
        "/x/y",
        Allow,
    );
}

#[test]
fn prefix_is_a_plain_string_prefix() {
    let rules = r#"(allow file-read-data (prefix "/a/b"))"#;
    check(rules, Op::FileReadData, "/a/bc", Allow);
    check(rules, Op::FileReadData, "/a/b/c", Allow);
    check(rules, Op::FileReadData, "/a/c", Deny);
}

#[test]
fn regex_is_an_unanchored_search_on_the_path() {
    let rules = r#"(allow file-read-data) (deny file-read-data (regex #"/\.[Gg][Ii][Tt](/|$)"))"#;
    check(rules, Op::FileReadData, "/w/.git", Deny);
    check(rules, Op::FileReadData, "/w/.GIT/config", Deny);
    check(rules, Op::FileReadData, "/w/x/.gIt/objects/ab", Deny);
    check(rules, Op::FileReadData, "/w/.gitignore", Allow);
    check(
        rules,
        Op::FileReadData,
        "/w/.github/workflows/ci.yml",
        Allow,
    );
    check(
        r#"(allow file-read-data (regex #"^/a$"))"#,
        Op::FileReadData,
        "/a/b",
        Deny,
    );
}

#[test]
fn require_all_any_not_combine_filters() {
    let rules = r#"(allow file-write-data (require-all (subpath "/s") (require-not (literal "/s/ro")) (require-any (vnode-type REGULAR-FILE) (vnode-type FIFO))))"#;
    let file = |p| Request::file(Op::FileWriteData, p).with_vnode_type(VnodeType::RegularFile);
    check_request(rules, file("/s/a"), Allow);
    check_request(rules, file("/s/ro"), Deny);
    check_request(rules, file("/t/a"), Deny);
    check_request(
        rules,
        Request::file(Op::FileWriteData, "/s/a").with_vnode_type(VnodeType::Directory),
        Deny,
    );
    check_request(rules, Request::file(Op::FileWriteData, "/s/a"), Deny);
    check_request(
        "(allow file-read-data (require-all))",
        Request::file(Op::FileReadData, "/x"),
        Allow,
    );
    check_request(
        "(allow file-read-data (require-any))",
        Request::file(Op::FileReadData, "/x"),
        Deny,
    );
}

#[test]
fn target_filters_match_the_relations_the_target_has() {
    let rules = "(allow signal (target same-sandbox))";
    check_request(
        rules,
        Request::process(Op::Signal, &[Target::SameSandbox, Target::Children]),
        Allow,
    );
    check_request(
        rules,
        Request::process(Op::Signal, &[Target::Children]),
        Deny,
    );
    check_request(rules, Request::process(Op::Signal, &[]), Deny);
}

#[test]
fn name_filters_match_only_their_kind_of_request() {
    let rules = r#"(allow sysctl-read (sysctl-name "hw.ncpu") (sysctl-name-prefix "hw.optional."))
                   (allow mach-lookup (global-name "com.apple.x"))"#;
    check_request(rules, Request::sysctl("hw.ncpu"), Allow);
    check_request(rules, Request::sysctl("hw.optional.avx2_0"), Allow);
    check_request(rules, Request::sysctl("hw.ncpu2"), Deny);
    check_request(rules, Request::sysctl("kern.hostname"), Deny);
    check_request(rules, Request::mach_lookup("com.apple.x"), Allow);
    check_request(rules, Request::mach_lookup("com.apple.y"), Deny);
    // A file request carries no sysctl name, so the sysctl filter does not match it.
    check(
        r#"(allow file-read-data (sysctl-name "hw.ncpu"))"#,
        Op::FileReadData,
        "/hw.ncpu",
        Deny,
    );
}

#[test]
fn parameters_are_substituted_and_a_missing_one_is_an_error() {
    let p = profile(r#"(allow file-read-data (subpath (param "ROOT")))"#);
    let with = params(&[("ROOT", "/r")]);
    assert_eq!(p.decide(Op::FileReadData, "/r/x", &with).unwrap(), Allow);
    assert_eq!(p.decide(Op::FileReadData, "/q/x", &with).unwrap(), Deny);
    assert_eq!(
        p.decide(Op::FileReadData, "/r/x", &Params::new()),
        Err(EvalError::MissingParam("ROOT".into()))
    );
    // Even a rule that does not concern the request: sandbox-exec rejects the whole profile.
    let p = profile(r#"(allow network-outbound (literal (param "ROOT")))"#);
    assert_eq!(
        p.decide(Op::FileReadData, "/x", &Params::new()),
        Err(EvalError::MissingParam("ROOT".into()))
    );
}

#[test]
fn query_paths_resolve_the_private_symlinks_but_profile_values_do_not() {
    let rules = r#"(allow file-read-data (subpath "/private/tmp/w"))"#;
    check(rules, Op::FileReadData, "/tmp/w/x", Allow);
    check(rules, Op::FileReadData, "/private/tmp/w/x", Allow);
    check(rules, Op::FileReadData, "//private//tmp/w/x/", Allow);
    // A profile naming the symlink never matches: the kernel reports /private/tmp/….
    check(
        r#"(allow file-read-data (subpath "/tmp/w"))"#,
        Op::FileReadData,
        "/tmp/w/x",
        Deny,
    );
}

#[test]
fn malformed_questions_are_errors_not_guesses() {
    let p = profile(r#"(allow file-read-data (subpath "/a"))"#);
    let none = Params::new();
    assert_eq!(
        p.decide(Op::FileReadAll, "/a", &none),
        Err(EvalError::WildcardOperation("file-read*"))
    );
    assert_eq!(
        p.decide(Op::FileReadData, "a/b", &none),
        Err(EvalError::QueryPath("a/b".into()))
    );
    assert_eq!(
        p.decide(Op::FileReadData, "/a/../etc", &none),
        Err(EvalError::QueryPath("/a/../etc".into()))
    );
    let relative = profile(r#"(allow file-read-data (subpath "a"))"#);
    assert_eq!(
        relative.decide(Op::FileReadData, "/a", &none),
        Err(EvalError::RelativeValue("a".into()))
    );
}

#[test]
fn parameter_keys_and_values_are_validated() {
    let mut p = Params::new();
    assert!(p.insert("lower", "/x").is_err());
    assert!(p.insert("A=B", "/x").is_err());
    assert!(p.insert("", "/x").is_err());
    assert!(p.insert("1A", "/x").is_err());
    assert!(p.insert("A", "/x\0y").is_err());
    p.insert("A_1", "/x=y").unwrap();
    assert!(p.insert("A_1", "/z").is_err());
    assert_eq!(p.to_args(), vec!["-D", "A_1=/x=y"]);
}
