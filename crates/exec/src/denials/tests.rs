//! Tests of the denials scanner (one `check` per error shape, property tests: never panics,
//! bounded) and of `find` against real Linux policies: only what the policy denies is reported,
//! a DAC error on an allowed path never is.

use super::*;
use proptest::prelude::*;

/// `(path, verb)` of the one mention `line` yields, or `None`.
fn one(line: &str) -> Option<(String, Option<Verb>)> {
    let found = scan(line);
    assert!(found.len() <= 1, "{line}: {found:?}");
    found.into_iter().next().map(|m| (m.path, m.verb))
}

fn check(line: &str, path: &str, verb: Option<Verb>) {
    assert_eq!(one(line), Some((path.to_owned(), verb)), "{line}");
}

#[test]
fn the_scanner_reads_each_common_shape() {
    use Verb::*;
    check(
        "sh: 1: cannot create /etc/x: Permission denied",
        "/etc/x",
        Some(Create),
    );
    check(
        "cat: /home/u/.ssh/id_rsa: Permission denied",
        "/home/u/.ssh/id_rsa",
        Some(Read),
    );
    check(
        "ls: cannot open directory '/root': Permission denied",
        "/root",
        Some(Read),
    );
    check(
        "touch: cannot touch '/usr/x': Permission denied",
        "/usr/x",
        Some(Create),
    );
    check(
        "mkdir: cannot create directory '/opt/new': Permission denied",
        "/opt/new",
        Some(Create),
    );
    check(
        "PermissionError: [Errno 13] Permission denied: '/etc/shadow'",
        "/etc/shadow",
        None,
    );
    check(
        "PermissionError: [Errno 1] Operation not permitted: \"/srv/a'b\"",
        "/srv/a'b",
        None,
    );
    check(
        "Error: EACCES: permission denied, open '/home/u/.npmrc'",
        "/home/u/.npmrc",
        None,
    );
    check(
        "Error: EACCES: permission denied, mkdir '/opt/n'",
        "/opt/n",
        Some(Create),
    );
    check(
        "[Error: EACCES: permission denied, scandir '/root']",
        "/root",
        Some(Read),
    );
    check(
        "Error: EPERM: operation not permitted, unlink '/u/f'",
        "/u/f",
        Some(Remove),
    );
    check(
        "rm: cannot remove '/usr/bin/x': Permission denied",
        "/usr/bin/x",
        Some(Remove),
    );
    check(
        "cc1: fatal error: /usr/include/stdc-predef.h: Permission denied",
        "/usr/include/stdc-predef.h",
        Some(Read),
    );
    check(
        "40F7:error:8000000D:system library:BIO_new_file:Permission denied:../crypto/bio/bss_file.c:67:calling fopen(/etc/ssl/openssl.cnf, rb)",
        "/etc/ssl/openssl.cnf",
        Some(Read),
    );
    check(
        "fatal: could not open '/home/u/.gitconfig' for reading: Permission denied",
        "/home/u/.gitconfig",
        Some(Read),
    );
    check(
        "error: could not lock config file /home/u/.gitconfig: Permission denied",
        "/home/u/.gitconfig",
        None,
    );
    check(
        "chmod: changing permissions of '/w/f': Operation not permitted",
        "/w/f",
        None,
    );
    check(
        "sh: 1: ./build.sh: Permission denied",
        "./build.sh",
        Some(Execute),
    );
    check("mytool: /srv/x: Permission denied", "/srv/x", None);
    check(
        "bash: line 1: /opt/tool: Permission denied",
        "/opt/tool",
        Some(Execute),
    );
    check(
        "mawk: cannot open \"/root/x\" for output (Permission denied)",
        "/root/x",
        Some(Write),
    );
    check(
        "mawk: cannot open /etc/shadow (Permission denied)",
        "/etc/shadow",
        Some(Read),
    );
    check(
        "wc: /etc/shadow: Permission denied",
        "/etc/shadow",
        Some(Read),
    );
    check(
        "sort: cannot read: /etc/shadow: Permission denied",
        "/etc/shadow",
        Some(Read),
    );
    check(
        "diff: /etc/shadow: Permission denied",
        "/etc/shadow",
        Some(Read),
    );
    check(
        "mkdir: cannot create directory ‘/root/x’: Permission denied",
        "/root/x",
        Some(Create),
    );
    check(
        "/usr/bin/ld: cannot open output file /root/m: Permission denied",
        "/root/m",
        Some(Write),
    );
    let rofs = scan("touch: cannot touch '/etc/x': Read-only file system");
    assert!(rofs[0].read_only_fs, "{rofs:?}");
}

#[test]
fn a_path_merely_mentioned_or_an_unclear_line_is_not_taken() {
    for line in [
        "cat: /etc/shadow: No such file or directory",
        "reading /home/u/.ssh/id_rsa",
        "Permission denied",
        "permission denied, please try again",
        "sh: 1: a b c: Permission denied",
        "touch: cannot touch 'it'\\''s': Permission denied",
        "PermissionError: [Errno 13] Permission denied: 'a\\'b'",
        "",
    ] {
        assert_eq!(one(line), None, "{line}");
    }
}

#[test]
fn mentions_are_deduplicated_and_capped() {
    let same = "cat: /x: Permission denied\n".repeat(10);
    assert_eq!(scan(&same).len(), 1);
    let many: String = (0..1000)
        .map(|i| format!("cat: /x{i}: Permission denied\n"))
        .collect();
    assert_eq!(scan(&many).len(), MAX_MENTIONS);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_scanner_never_panics_and_stays_bounded(text in "(?s).{0,400}") {
        let found = scan(&text);
        prop_assert!(found.len() <= MAX_MENTIONS);
        for m in &found {
            prop_assert!(!m.path.is_empty() && m.path.len() <= MAX_PATH);
        }
    }

    #[test]
    fn shaped_noise_never_panics(
        parts in proptest::collection::vec(
            prop_oneof![
                Just(": ".to_owned()), Just("'".to_owned()), Just("\"".to_owned()),
                Just("Permission denied".to_owned()), Just("permission denied, ".to_owned()),
                Just("Read-only file system".to_owned()), Just("fopen(".to_owned()),
                Just(", r".to_owned()), Just(")".to_owned()), Just("spawn ".to_owned()),
                Just("EACCES".to_owned()), Just("\\".to_owned()), Just("\n".to_owned()),
                Just("cannot create ".to_owned()), Just("/x".to_owned()), Just("é".to_owned()),
                "[a-z/ ]{0,6}",
            ],
            0..40,
        )
    ) {
        let text: String = parts.concat();
        let found = scan(&text);
        prop_assert!(found.len() <= MAX_MENTIONS);
    }

    #[test]
    fn a_plain_cat_line_yields_its_path(path in "/[a-zA-Z0-9._-]{1,20}(/[a-zA-Z0-9._-]{1,20}){0,4}") {
        let line = format!("cat: {path}: Permission denied");
        prop_assert_eq!(one(&line), Some((path, Some(Verb::Read))));
    }
}

#[test]
fn scanning_a_large_output_is_linear_enough_to_finish() {
    // 128 KiB of marker-dense text: a quadratic scanner would not finish in a test's lifetime.
    let text = "x: Permission denied: 'Permission denied: ".repeat(3200);
    let _ = scan(&text);
    let one_line = format!("{}: Permission denied", "a".repeat(128 * 1024));
    assert!(scan(&one_line).is_empty(), "longer than PATH_MAX");
}

#[test]
fn relative_paths_resolve_against_the_cwd_unless_they_climb() {
    let cwd = Path::new("/w/sub");
    assert_eq!(absolute(cwd, "a/b"), Some(PathBuf::from("/w/sub/a/b")));
    assert_eq!(absolute(cwd, "./a"), Some(PathBuf::from("/w/sub/a")));
    assert_eq!(absolute(cwd, "/etc/x"), Some(PathBuf::from("/etc/x")));
    assert_eq!(absolute(cwd, "../x"), None);
    assert_eq!(absolute(cwd, "~/.ssh/id_rsa"), None);
}

#[test]
fn the_seatbelt_answer_becomes_the_same_causes() {
    let mut spec = seatbelt::ProfileSpec::command("/Users/u/work", "/private/tmp/call");
    spec.read_only.push("/Users/u/.cargo".into());
    let bound = spec.build().unwrap();
    let why = |p: &str, a| seatbelt_why(&bound, p, a);
    assert_eq!(
        why("/Users/u/.ssh/id_rsa", DeniedAccess::Read),
        Some(Cause::Outside)
    );
    assert_eq!(why("/Users/u/work/a.c", DeniedAccess::Write), None);
    assert_eq!(
        why("/Users/u/.cargo/config.toml", DeniedAccess::Write),
        Some(Cause::ReadOnly { system: false })
    );
    assert_eq!(
        why("/usr/bin/x", DeniedAccess::Create),
        Some(Cause::ReadOnly { system: true })
    );
    assert_eq!(why("/usr/bin/env", DeniedAccess::Execute), None);
    let run = seatbelt::ProfileSpec::run("/usr/bin/awk", "/Users/u/m", "/private/tmp/r")
        .build()
        .unwrap();
    assert_eq!(
        seatbelt_why(&run, "/Users/u/m/.git/config", DeniedAccess::Read),
        Some(Cause::DotGit)
    );
    assert_eq!(
        seatbelt_why(&run, "/bin/sh", DeniedAccess::Execute),
        Some(Cause::NotTheProgram)
    );
    // Never guess: an unresolved path is no answer.
    assert_eq!(seatbelt_why(&bound, "work/a", DeniedAccess::Read), None);
}

#[cfg(target_os = "linux")]
mod linux {
    use super::*;
    use crate::spec::{Access, Grant};
    use fsguard::RootLease;
    use std::os::unix::fs::PermissionsExt;

    struct Call {
        _dir: tempfile::TempDir,
        base: PathBuf,
        spec: SandboxSpec,
    }

    fn call() -> Call {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        for d in ["ws/.state", "tmp", "ro", "home/.ssh"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("home/.ssh/id_rsa"), "k").unwrap();
        std::fs::write(base.join("ro/tool"), "t").unwrap();
        std::fs::write(base.join("ws/locked"), "l").unwrap();
        std::fs::set_permissions(
            base.join("ws/locked"),
            std::fs::Permissions::from_mode(0o000),
        )
        .unwrap();
        let ws = RootLease::acquire(base.join("ws")).unwrap();
        let tmp = RootLease::acquire(base.join("tmp")).unwrap();
        let spec = SandboxSpec::for_command(
            &ws,
            &tmp,
            vec![Grant::open(&base.join("ro"), Access::Read).unwrap()],
        )
        .unwrap()
        .hide(base.join("ws/.state"));
        Call {
            _dir: dir,
            base,
            spec,
        }
    }

    fn denials(c: &Call, stderr: &str) -> Vec<Denial> {
        find(&c.spec, &c.base.join("ws"), b"", stderr.as_bytes())
    }

    #[test]
    fn a_read_outside_the_scope_is_one_denial_outside() {
        let c = call();
        let key = c.base.join("home/.ssh/id_rsa");
        let d = denials(&c, &format!("cat: {}: Permission denied\n", key.display()));
        assert_eq!(
            d,
            [Denial {
                path: key,
                access: DeniedAccess::Read,
                cause: Cause::Outside,
            }]
        );
    }

    #[test]
    fn a_dac_error_inside_the_workspace_is_not_the_sandboxs() {
        let c = call();
        // `locked` is mode 000: a non-root user's `cat` fails, the policy allows it.
        for line in [
            "cat: locked: Permission denied",
            &format!(
                "cat: {}: Permission denied",
                c.base.join("ws/locked").display()
            ),
            &format!(
                "sh: 1: cannot create {}/new: Permission denied",
                c.base.join("tmp").display()
            ),
            // An unknown tool: read, write, execute asked in order; `locked` has no x bit.
            &format!(
                "mytool: {}: Permission denied",
                c.base.join("ws/locked").display()
            ),
        ] {
            assert_eq!(denials(&c, line), [], "{line}");
        }
    }

    #[test]
    fn writes_creation_execution_and_hidden_paths_get_their_own_causes() {
        let c = call();
        let ro = c.base.join("ro/tool");
        let d = denials(
            &c,
            &format!("sh: 1: cannot create {}: Permission denied", ro.display()),
        );
        assert_eq!(d.len(), 1, "{d:?}");
        // The file exists: creating over it is a write.
        assert_eq!(
            (d[0].access, d[0].cause),
            (DeniedAccess::Write, Cause::ReadOnly { system: false })
        );

        let new = c.base.join("home/new");
        let d = denials(
            &c,
            &format!("touch: cannot touch '{}': Permission denied", new.display()),
        );
        assert_eq!(
            (d[0].access, d[0].cause),
            (DeniedAccess::Create, Cause::Outside)
        );

        // A script in the workspace: readable and writable, not executable (read, write,
        // execute asked in order).
        std::fs::write(c.base.join("ws/run.sh"), "#!/bin/sh\n").unwrap();
        let d = denials(&c, "sh: 1: ./run.sh: Permission denied");
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            (d[0].access, d[0].cause),
            (DeniedAccess::Execute, Cause::ReadOnly { system: false })
        );
        assert_eq!(d[0].path, c.base.join("ws/run.sh"));

        let state = c.base.join("ws/.state/grants");
        let d = denials(&c, &format!("cat: {}: Permission denied", state.display()));
        assert_eq!(d[0].cause, Cause::Hidden);
    }

    #[test]
    fn a_system_secret_is_named_as_one() {
        if !Path::new("/etc/shadow").exists() {
            eprintln!("skipped: no /etc/shadow on this machine");
            return;
        }
        let c = call();
        let d = denials(&c, "cat: /etc/shadow: Permission denied");
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            (d[0].access, d[0].cause),
            (DeniedAccess::Read, Cause::SystemSecret)
        );
        // Readable system files are not denials.
        assert_eq!(denials(&c, "cat: /etc/passwd: Permission denied"), []);
        assert_eq!(denials(&c, "cat: /usr/bin/env: Permission denied"), []);
    }

    #[test]
    fn denials_are_capped_and_each_path_once() {
        let c = call();
        let mut out = String::new();
        for i in 0..40 {
            let p = c.base.join(format!("home/f{i}"));
            std::fs::write(&p, "x").unwrap();
            out.push_str(&format!("cat: {}: Permission denied\n", p.display()));
            out.push_str(&format!("cat: {}: Permission denied\n", p.display()));
        }
        assert_eq!(denials(&c, &out).len(), MAX_DENIALS);
    }
}

#[test]
fn lines_are_found_in_order_across_markers_and_line_ends() {
    let text = "a\nrm: cannot remove '/r': Operation not permitted\r\nok\n\
                cat: /c: Permission denied\ntouch: cannot touch '/t': Read-only file system";
    let paths: Vec<String> = scan(text).into_iter().map(|m| m.path).collect();
    assert_eq!(paths, ["/r", "/c", "/t"]);
}
