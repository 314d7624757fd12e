//! Refusal texts carry the pointers of seed 001, labels read as the seed says, and the CLI line
//! and the user config behave as documented.

// Helpers outside #[test] fns may unwrap too: a panic is a test failure, which is what we want.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use argv_policy::{
    Context, Decision, Gate, Mode, Os, Policy, RefuseCode, RunCommandArgs, check_json_line, decide,
    decision_json_line, find_mask_token, mask,
};

fn ctx() -> Context {
    let mut c = Context::new("/home/u/proj", "/home/u");
    c.os = Os::Linux;
    c
}

fn message(argv: &[&str]) -> (RefuseCode, String) {
    match decide(
        &RunCommandArgs::new(argv.iter().copied()),
        &Policy::defaults(Mode::Safe),
        &ctx(),
    ) {
        Decision::Refuse { code, message } => (code, message),
        d => panic!("{argv:?} should be refused, got {d:?}"),
    }
}

#[test]
fn cd_suggests_absolute_paths_or_a_cd_inside_sh_c() {
    let (_, m) = message(&["cd", "src"]);
    assert!(m.contains("absolute paths"), "{m}");
    assert!(m.contains("['sh', '-c', 'cd <dir> && <command>']"), "{m}");
}

#[test]
fn metacharacters_point_to_sh_c() {
    let (_, m) = message(&["ls", "*.rs"]);
    assert!(m.contains("['sh', '-c', '<script>']"), "{m}");
    assert!(m.contains("`*`"), "{m}");
}

#[test]
fn rm_and_sudo_in_scripts_point_to_the_argv_form() {
    let (_, m) = message(&["sh", "-c", "rm -rf x"]);
    assert!(
        m.contains("['rm', '<path>', …]") && m.contains("trash"),
        "{m}"
    );
    let (_, m) = message(&["sh", "-c", "sudo ls"]);
    assert!(m.contains("['sudo', '<binary>', …]"), "{m}");
}

#[test]
fn open_on_macos_points_to_open_file() {
    let mut c = ctx();
    c.os = Os::MacOs;
    let d = decide(
        &RunCommandArgs::new(["open", "."]),
        &Policy::defaults(Mode::Auto),
        &c,
    );
    let Decision::Refuse { message, .. } = d else {
        panic!("{d:?}")
    };
    assert!(message.contains("open_file"), "{message}");
}

#[test]
fn watchers_point_to_background_command_or_a_one_shot_build() {
    let (_, m) = message(&["tsc", "--watch"]);
    assert!(
        m.contains("background_command") && m.contains("timeout_min"),
        "{m}"
    );
    assert!(m.contains("one-shot build"), "{m}");
}

#[test]
fn a_mask_token_is_refused_as_invalid_and_suggests_reading_the_key_in_the_same_call() {
    let (code, m) = message(&["curl", "-H", "X-Key: [secret:2]"]);
    assert_eq!(code, RefuseCode::MaskedSecret);
    assert!(m.starts_with("[Invalid]"), "{m}");
    assert!(m.contains("set -a; . ./.env; set +a"), "{m}");
}

#[test]
fn sudo_is_labelled_with_the_command() {
    let d = decide(
        &RunCommandArgs::new(["sudo", "apt-get", "install", "-y", "jq"]),
        &Policy::defaults(Mode::AllowAll),
        &ctx(),
    );
    let Decision::Run { gate, sudo, .. } = d else {
        panic!("{d:?}")
    };
    assert!(sudo);
    assert_eq!(gate, Gate::Password("sudo: apt-get install -y jq".into()));
}

#[test]
fn masking_replaces_each_secret_with_a_stable_token() {
    let secrets = vec!["abc".to_owned(), "abcdef".to_owned(), String::new()];
    assert_eq!(
        mask("x abcdef y abc z", &secrets),
        "x [secret:2] y [secret:1] z"
    );
    assert_eq!(mask("abcabc", &secrets), "[secret:1][secret:1]");
    assert_eq!(mask("nothing", &secrets), "nothing");
    assert_eq!(mask("", &secrets), "");
    assert_eq!(mask("日本abc語", &secrets), "日本[secret:1]語");
    // The masked output is recognised when it comes back in an argv.
    assert_eq!(
        find_mask_token(&mask("k=abc", &secrets)),
        Some("[secret:1]")
    );
    assert_eq!(find_mask_token("[secret:] [secret:x] [secret:7"), None);
}

#[test]
fn the_cli_line_has_the_fields_of_the_interface() {
    let p = Policy::defaults(Mode::Safe);
    let line = check_json_line(r#"{"argv": ["git", "status"]}"#, &p, &ctx());
    assert_eq!(
        line,
        r#"{"decision": "run", "via": "direct", "gate": "none", "parallel": true, "code": null, "message": null, "label": null, "trash": [], "sudo": false}"#
    );
    let line = check_json_line(r#"{"argv": ["sh", "-c", "ls | wc -l"]}"#, &p, &ctx());
    assert!(line.contains(r#""via": "shell""#), "{line}");
    let line = check_json_line(r#"{"argv": ["cd", "x"]}"#, &p, &ctx());
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["decision"], "refuse");
    assert_eq!(v["code"], "RUN_COMMAND_CD");
    assert!(v["via"].is_null() && v["gate"].is_null());
    let line = check_json_line(r#"{"argv": "ls"}"#, &p, &ctx());
    assert!(line.contains("RUN_COMMAND_ARGUMENTS_INVALID"), "{line}");
    let line = check_json_line(r#"{"argv": ["ls"], "yolo": true}"#, &p, &ctx());
    assert!(line.contains("RUN_COMMAND_ARGUMENTS_INVALID"), "{line}");
    let d = decide(
        &RunCommandArgs::new(["rm", "a"]),
        &Policy::defaults(Mode::Auto),
        &ctx(),
    );
    let line = decision_json_line(&d);
    assert!(line.contains(r#""trash": ["/home/u/proj/a"]"#), "{line}");
}

#[test]
fn user_config_extends_the_allowlist_and_the_denied_list() {
    let p = Policy::load(
        Mode::Safe,
        Some(
            r#"{"read_only_command": ["make -n"], "denied_command": ["terraform"],
                 "sensitive_path": ["private/"]}"#,
        ),
    )
    .unwrap();
    let run = |argv: &[&str]| decide(&RunCommandArgs::new(argv.iter().copied()), &p, &ctx());
    assert!(matches!(
        run(&["make", "-n"]),
        Decision::Run { parallel: true, .. }
    ));
    assert_eq!(
        run(&["terraform", "apply"]).code(),
        Some(RefuseCode::Denied)
    );
    assert_eq!(
        run(&["sh", "-c", "ls && terraform plan"]).code(),
        Some(RefuseCode::Denied)
    );
    assert!(matches!(
        run(&["cat", "private/a"]),
        Decision::Run {
            gate: Gate::Confirm(_),
            ..
        }
    ));
    let err = Policy::load(Mode::Safe, Some(r#"{"denied_command": ["a b"]}"#)).unwrap_err();
    assert!(err.to_string().contains("bare command name"), "{err}");
}

#[test]
fn every_code_has_a_distinct_stable_string() {
    let mut seen = std::collections::BTreeSet::new();
    for c in RefuseCode::ALL {
        assert!(c.as_str().starts_with("RUN_COMMAND_"));
        assert!(seen.insert(c.as_str()), "{c} twice");
    }
}

/// Found by the `sh_script` fuzz target: brush-parser unwraps an I/O number that does not fit
/// `i32` (`99999999999999999999>f`). The parser's panic is caught and the script refused, with
/// the advice every unparsable script gets, never a crash of the host.
#[test]
fn a_redirection_fd_too_large_for_the_parser_is_refused_as_unparsable() {
    for script in [
        "echo x 99999999999999999999> /tmp/f",
        "cat 2147483648<in",
        "ls; echo \"$HOME\" 99999999999999999999>&2",
    ] {
        let (code, m) = message(&["sh", "-c", script]);
        assert_eq!(code, RefuseCode::ScriptUnparsable, "{script}: {m}");
        assert!(m.contains("nothing was run"), "{script}: {m}");
    }
}

/// Found by the `sh_script` fuzz target as a timeout: brush-parser's grammar takes time
/// exponential in how many constructs are left open (52 unclosed `(` would take years, 22
/// unclosed `case` took 12 s), so a script nesting more than `MAX_NESTING` compound commands
/// is refused before the grammar runs. What is inside quotes, comments, here-documents and
/// arithmetic is text, not nesting; a `case` pattern's `)` closes nothing.
#[test]
fn a_script_nesting_too_many_open_constructs_is_refused_before_parsing() {
    let over = argv_policy::MAX_NESTING + 1;
    for script in [
        format!("{} wc -l", "(".repeat(52)),
        format!("{}wc -l", "( ".repeat(over)),
        "case x in a) ".repeat(over),
        "( case x in a) ".repeat(over),
        format!("{}ls", "if true; then ".repeat(over)),
        format!("{}ls{}", "{ ".repeat(over), "; }".repeat(over)),
    ] {
        let (code, m) = message(&["sh", "-c", &script]);
        assert_eq!(code, RefuseCode::ScriptUnparsable, "{script}: {m}");
        assert!(m.contains("compound commands"), "{script}: {m}");
        assert!(m.contains("nothing was run"), "{script}: {m}");
    }
    let n = argv_policy::MAX_NESTING;
    let deep_but_closed = format!("{}ls{}", "( ".repeat(n), " )".repeat(n));
    for script in [
        deep_but_closed.as_str(),
        "echo '((((((((((((((((((((((((('",
        "echo \"((((((((((((((((((((((((((\"",
        "ls # ((((((((((((((((((((((((((",
        "echo if if if if if if if if if if if if if if if if",
        "cat <<E\n((((((((((((((((((((((((((\nE",
    ] {
        let d = decide(
            &RunCommandArgs::new(["sh", "-c", script]),
            &Policy::defaults(Mode::Safe),
            &ctx(),
        );
        assert!(
            !matches!(&d, Decision::Refuse { message, .. } if message.contains("compound commands")),
            "{script}: {d:?}"
        );
    }
}

/// Found by the `sh_script` fuzz target: brush-parser's tokenizer grew to 2.7 GB on this 74-byte
/// script (here-documents among carriage returns). Any `\r` is refused before tokenizing.
#[test]
fn a_script_with_a_carriage_return_is_refused_before_the_tokenizer_can_blow_up() {
    let oom =
        "0do stb\u{1d}&&YY[````eU<<<<<<<<<><<<<<\r\r git=status; ecCFE\" > /F\"\r<<<<< <><<> ";
    for script in [oom, "ls\r\n", "echo a\rb"] {
        let (code, m) = message(&["sh", "-c", script]);
        assert_eq!(code, RefuseCode::ScriptUnparsable, "{script:?}: {m}");
        assert!(m.contains("carriage return"), "{script:?}: {m}");
    }
    let d = decide(
        &RunCommandArgs::new(["sh", "-c", "cat <<E\nx\nE\nls"]),
        &Policy::defaults(Mode::Safe),
        &ctx(),
    );
    assert!(
        !matches!(&d, Decision::Refuse { message, .. } if message.contains("carriage")),
        "{d:?}"
    );
}
