//! Property tests: a script whose command word is not static is never allowed,
//! wherever in the script it stands; and no input, however malformed, makes `decide` panic.
//! RC-2 for a direct argv: arguments without shell characters always pass it, and an
//! element that is shell syntax, or a glob where `cat` expects a path, is always refused.

// Helpers outside #[test] fns may unwrap too: a panic is a test failure, which is what we want.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use argv_policy::{Context, Decision, Mode, Policy, RefuseCode, RunCommandArgs, decide};
use proptest::prelude::*;

fn ctx() -> Context {
    Context::new("/home/u/proj", "/home/u")
}

/// Command words that are not a static bare name.
fn non_static_word() -> impl Strategy<Value = String> {
    let name = prop::sample::select(vec!["ls", "rm", "git", "cat", "sudo", "echo", "x"]);
    (name, 0..14usize).prop_map(|(n, form)| match form {
        0 => format!("$(echo {n})"),
        1 => format!("`echo {n}`"),
        2 => "$CMD".to_owned(),
        3 => "${CMD}".to_owned(),
        4 => format!("\"{n}\""),
        5 => format!("'{n}'"),
        6 => format!("\\{n}"),
        7 => format!("/bin/{n}"),
        8 => format!("./{n}"),
        9 => format!("{n}*"),
        10 => format!("{{{n},x}}"),
        11 => format!("~/{n}"),
        12 => format!("$'{n}'"),
        _ => format!("\"${{P}}{n}\""),
    })
}

/// Places a command line somewhere a shell would run it.
fn placed(cmd: String) -> impl Strategy<Value = String> {
    (0..12usize).prop_map(move |place| match place {
        0 => cmd.clone(),
        1 => format!("ls; {cmd}"),
        2 => format!("ls && {cmd}"),
        3 => format!("ls | {cmd}"),
        4 => format!("echo $({cmd})"),
        5 => format!("({cmd})"),
        6 => format!("if true; then {cmd}; fi"),
        7 => format!("f() {{ {cmd}; }}"),
        8 => format!("env {cmd}"),
        9 => format!("ls | xargs {cmd}"),
        10 => format!("for i in 1; do {cmd}; done"),
        _ => format!("bash -c '{}'", cmd.replace('\'', "'\\''")),
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_non_static_command_word_is_never_allowed(
        script in non_static_word()
            .prop_flat_map(|w| placed(format!("{w} arg")))
    ) {
        for mode in [Mode::Safe, Mode::Auto, Mode::AllowAll] {
            let d = decide(
                &RunCommandArgs::new(["sh", "-c", script.as_str()]),
                &Policy::defaults(mode),
                &ctx(),
            );
            prop_assert!(matches!(d, Decision::Refuse { .. }), "{script:?} under {mode:?}: {d:?}");
        }
    }

    #[test]
    fn random_scripts_never_panic(script in "[a-z $`'\"\\\\|&;<>(){}\\[\\]*?~#=!\n-]{0,80}") {
        let _ = decide(
            &RunCommandArgs::new(["sh", "-c", script.as_str()]),
            &Policy::defaults(Mode::Safe),
            &ctx(),
        );
    }

    #[test]
    fn arbitrary_unicode_scripts_never_panic(script in any::<String>()) {
        let _ = decide(
            &RunCommandArgs::new(["bash", "-c", script.as_str()]),
            &Policy::defaults(Mode::Auto),
            &ctx(),
        );
    }

    #[test]
    fn random_argvs_never_panic(argv in prop::collection::vec(any::<String>(), 0..6)) {
        let _ = decide(&RunCommandArgs::new(argv), &Policy::defaults(Mode::Safe), &ctx());
    }

    #[test]
    fn a_refusal_always_says_what_to_do(argv in prop::collection::vec("[a-z~*|;-]{0,6}", 1..4)) {
        let d = decide(&RunCommandArgs::new(argv), &Policy::defaults(Mode::Safe), &ctx());
        if let Decision::Refuse { message, .. } = d {
            prop_assert!(message.len() > 20, "{message}");
        }
    }

    #[test]
    fn argvs_of_the_programs_that_read_code_never_panic(
        program in prop::sample::select(vec![
            "awk", "sed", "grep", "rg", "jq", "yq", "find", "git", "python3", "node", "perl",
            "curl", "kubectl", "test", "env", "xargs", "timeout", "sudo", "npx", "fd",
        ]),
        args in prop::collection::vec("[a-z.$`'\"|&;<>(){}\\[\\]*?~#=! -]{0,8}", 0..8),
    ) {
        let mut argv = vec![program.to_owned()];
        argv.extend(args);
        let _ = decide(&RunCommandArgs::new(argv), &Policy::defaults(Mode::Safe), &ctx());
    }

    #[test]
    fn arguments_without_shell_characters_pass_rc_2(
        program in prop::sample::select(vec![
            "cat", "ls", "make", "cargo", "awk", "grep", "find", "git", "python3", "env", "npx",
        ]),
        args in prop::collection::vec("[A-Za-z0-9._/=:,+@%-]{1,10}", 0..6),
    ) {
        let mut argv = vec![program.to_owned()];
        argv.extend(args);
        let d = decide(&RunCommandArgs::new(argv.clone()), &Policy::defaults(Mode::Safe), &ctx());
        prop_assert_ne!(d.code(), Some(RefuseCode::Metacharacters), "{:?}: {:?}", argv, d);
    }

    #[test]
    fn shell_syntax_or_a_path_glob_is_always_refused(
        program in prop::sample::select(vec!["cat", "ls", "cp", "echo", "make", "wc", "touch"]),
        before in prop::collection::vec("[a-z0-9._/]{1,8}", 0..3),
        after in prop::collection::vec("[a-z0-9._/]{1,8}", 0..3),
        bad in prop::sample::select(vec![
            "|", "||", "&&", ";", "&", ">", ">>", "<", "2>&1", "&>", "|&", ">out", "2>/dev/null",
            "~", "~/x", "$(id)", "`id`", "${HOME}", "$HOME", "*.txt", "src/*.rs", "a?.log",
            "f[0-9]", "a.{c,h}",
        ]),
    ) {
        let mut argv = vec![program.to_owned()];
        argv.extend(before);
        argv.push(bad.to_owned());
        argv.extend(after);
        let d = decide(&RunCommandArgs::new(argv.clone()), &Policy::defaults(Mode::Safe), &ctx());
        prop_assert_eq!(d.code(), Some(RefuseCode::Metacharacters), "{:?}: {:?}", argv, d);
        if let Decision::Refuse { message, .. } = d {
            prop_assert!(message.contains("['sh', '-c', '<script>']"), "{}", message);
        }
    }
}
