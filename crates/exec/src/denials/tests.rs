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
    // (`No such file or directory` is scanned, and explained only for a view of the grants:
    // `a_missing_path_is_a_denial_only_in_a_view_of_the_grants_and_only_outside_them`.)
    for line in [
        "cat: /etc/shadow: file not found",
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

#[test]
fn the_seatbelt_resolution_looks_only_where_the_program_could() {
    // Issue 16 review 5 on macOS's side, on real files with the model profile: links are
    // followed inside the profile's readable roots, never outside them.
    use std::os::unix::fs::symlink;
    // Not under /tmp, which the profile names by its macOS target (/private/tmp): the build's
    // target directory, or /dev/shm for a user who cannot write there (the rerun as nobody).
    // (A checkout under /tmp, as CI's fresh clone, puts the target directory there too.)
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let t = [
        target.as_path(),
        Path::new("/dev/shm"),
        Path::new("/var/tmp"),
    ]
    .into_iter()
    .filter(|d| d.canonicalize().is_ok_and(|c| !c.starts_with("/tmp")))
    .find_map(|d| tempfile::tempdir_in(d).ok());
    let Some(t) = t else {
        eprintln!("skipped: no writable directory outside /tmp for the model profile's roots");
        return;
    };
    let base = t.path().canonicalize().unwrap();
    for d in ["ws", "tmp", "out/dir"] {
        std::fs::create_dir_all(base.join(d)).unwrap();
    }
    symlink(base.join("out/dir"), base.join("ws/link")).unwrap();
    symlink(base.join("ws"), base.join("out/in")).unwrap();
    let bound = seatbelt::ProfileSpec::command(
        base.join("ws").to_str().unwrap(),
        base.join("tmp").to_str().unwrap(),
    )
    .build()
    .unwrap();
    let lookups = std::cell::Cell::new(0);
    let resolve = |p: &Path| resolve_for_seatbelt(&bound, p, &lookups);
    let s = |p: PathBuf| p.to_str().unwrap().to_owned();
    // Inside a root: followed, to where the kernel goes.
    assert_eq!(
        resolve(&base.join("ws/link/f")),
        Some(s(base.join("out/dir/f")))
    );
    // Outside: as written, whatever is there.
    assert_eq!(
        resolve(&base.join("out/in/f")),
        Some(s(base.join("out/in/f")))
    );
    assert_eq!(resolve(&base.join("out/in/../x")), None);
    // Bounded: too many components, and a spent budget, are no answer.
    let deep: PathBuf = base.join("ws").join("a/".repeat(MAX_COMPONENTS));
    assert_eq!(resolve(&deep), None);
    lookups.set(MAX_LOOKUPS);
    assert_eq!(resolve(&base.join("ws/x")), None);
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
        denials_in(c, View::Host, stderr)
    }

    fn denials_in(c: &Call, view: View, stderr: &str) -> Vec<Denial> {
        find(&c.spec, &c.base.join("ws"), view, b"", stderr.as_bytes())
    }

    #[test]
    fn a_missing_path_is_a_denial_only_in_a_view_of_the_grants_and_only_outside_them() {
        let c = call();
        let outside = c.base.join("elsewhere/secret");
        let inside = c.base.join("ws/nothere");
        let stderr = format!(
            "cat: {}: No such file or directory\ncat: {}: No such file or directory\n",
            outside.display(),
            inside.display()
        );
        let host = find(
            &c.spec,
            &c.base.join("ws"),
            View::Host,
            b"",
            stderr.as_bytes(),
        );
        assert!(host.is_empty(), "{host:?}");
        let view = find(
            &c.spec,
            &c.base.join("ws"),
            View::GrantsOnly,
            b"",
            stderr.as_bytes(),
        );
        assert_eq!(view.len(), 1, "{view:?}");
        assert_eq!(view[0].path, outside);
        assert_eq!(view[0].access, DeniedAccess::Read);
        // The same answer whether or not the host has the file.
        std::fs::create_dir_all(outside.parent().unwrap()).unwrap();
        std::fs::write(&outside, "x").unwrap();
        let again = find(
            &c.spec,
            &c.base.join("ws"),
            View::GrantsOnly,
            b"",
            stderr.as_bytes(),
        );
        assert_eq!(again, view);
    }

    /// A write in a read-only `/tmp` is said as such (NET-2's fallback), and a write in the
    /// program's own `/tmp` is no denial at all.
    #[test]
    fn a_write_in_a_read_only_tmp_is_said_and_one_in_its_own_tmp_is_not_a_denial() {
        let c = call();
        let stderr = "touch: cannot touch '/tmp/agent-exec-denials-x': Read-only file system\n\
                      sh: 1: cannot create /var/tmp/agent-exec-denials-y: Read-only file system\n";
        for view in [View::Host, View::GrantsOnly] {
            let found = denials_in(&c, view, stderr);
            let said: Vec<_> = found
                .iter()
                .map(|d| (d.path.clone(), d.access, d.cause))
                .collect();
            assert_eq!(
                said,
                [
                    (
                        PathBuf::from("/tmp/agent-exec-denials-x"),
                        DeniedAccess::Create,
                        Cause::ReadOnlyTmp
                    ),
                    (
                        PathBuf::from("/var/tmp/agent-exec-denials-y"),
                        DeniedAccess::Create,
                        Cause::ReadOnlyTmp
                    ),
                ],
                "{view:?}"
            );
            assert!(
                Cause::ReadOnlyTmp
                    .common_words()
                    .unwrap()
                    .1
                    .contains("$TMPDIR")
            );
        }
        let own = denials_in(&c, View::GrantsAndOwnTmp, stderr);
        assert_eq!(own, []);
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
        // The line's word, whether the file exists or not (module docs).
        assert_eq!(
            (d[0].access, d[0].cause),
            (DeniedAccess::Create, Cause::ReadOnly { system: false })
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

        // A program outside the scope (a shell's writable roots run what they hold).
        let tool = c.base.join("home/tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        let d = denials(&c, &format!("sh: 1: {}: Permission denied", tool.display()));
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            (d[0].access, d[0].cause),
            (DeniedAccess::Execute, Cause::Outside)
        );
        // In the workspace the same line is the file's own mode: not the sandbox's.
        std::fs::write(c.base.join("ws/run.sh"), "#!/bin/sh\n").unwrap();
        assert_eq!(denials(&c, "sh: 1: ./run.sh: Permission denied"), []);

        let state = c.base.join("ws/.state/grants");
        let d = denials(&c, &format!("cat: {}: Permission denied", state.display()));
        assert_eq!(d[0].cause, Cause::Hidden);
    }

    /// `(access, cause)` of each line's denials, the paths left out.
    fn kinds(c: &Call, lines: &[String]) -> Vec<Vec<(DeniedAccess, Cause)>> {
        lines
            .iter()
            .map(|l| {
                denials(c, l)
                    .into_iter()
                    .map(|d| (d.access, d.cause))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn whether_a_file_exists_outside_the_grants_does_not_show() {
        // Issue 16 review 5a: a directory the program cannot search (another user's 0700 as
        // root; a 0700 one of ours otherwise, which no grant covers). The host could look.
        let c = call();
        let dir = c.base.join("home/priv");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("exists"), "x").unwrap();
        std::fs::set_permissions(dir.join("exists"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let _ = std::os::unix::fs::chown(&dir, Some(65534), Some(65534));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        for shape in [
            "touch: cannot touch '{}': Permission denied",
            "sh: 1: {}: Permission denied",
            "mytool: {}: Permission denied",
            "cat: {}: Permission denied",
        ] {
            let [exists, missing] = ["exists", "missing"]
                .map(|n| shape.replace("{}", &dir.join(n).display().to_string()));
            let k = kinds(&c, &[exists, missing]);
            assert_eq!(k[0], k[1], "{shape}");
            assert_eq!(k[0].len(), 1, "{shape}: {k:?}");
        }
    }

    #[test]
    fn whether_a_hidden_state_file_exists_does_not_show() {
        // Issue 16 review 5b: the program sees an empty directory at `.state`.
        let c = call();
        std::fs::write(c.base.join("ws/.state/grants.json"), "{}").unwrap();
        for shape in [
            "touch: cannot touch '{}': Permission denied",
            "mytool: {}: Permission denied",
            "sh: 1: {}: Permission denied",
        ] {
            let k = kinds(
                &c,
                &[
                    shape.replace("{}", ".state/grants.json"),
                    shape.replace("{}", ".state/nothere"),
                ],
            );
            assert_eq!(k[0], k[1], "{shape}");
            assert_eq!(k[0].len(), 1, "{shape}: {k:?}");
            assert_eq!(k[0][0].1, Cause::Hidden, "{shape}");
        }
    }

    #[test]
    fn the_programs_own_descriptors_and_proc_are_never_denials() {
        // Issue 16 review 5c: `/dev/fd/N` is the program's descriptor, not the host's.
        let c = call();
        let open = std::fs::File::open(c.base.join("home/.ssh/id_rsa")).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&open);
        for line in [
            format!("sh: 1: cannot create /dev/fd/{fd}: Permission denied"),
            format!("cat: /dev/fd/{fd}: Permission denied"),
            format!("cat: /proc/self/fd/{fd}: Permission denied"),
            format!(
                "cat: /proc/{}/fd/{fd}: Permission denied",
                std::process::id()
            ),
            "sh: 1: cannot create /dev/fd/2: Permission denied".to_owned(),
            "sh: 1: cannot create /dev/stderr: Permission denied".to_owned(),
            "cat: /proc/1/environ: Permission denied".to_owned(),
        ] {
            assert_eq!(denials(&c, &line), [], "{line}");
        }
    }

    #[test]
    fn hostile_deep_paths_cost_a_bounded_number_of_lookups() {
        // Issue 16 review 6: a deep tree the program made in its workspace, named by every
        // line the scanner takes. Counted in lookups, not time (house rule 6).
        let c = call();
        let ws = c.base.join("ws");
        let depths = [
            // Past the components bound: not explained, no lookup.
            2000usize,
            // Within it: each line costs its components, until the budget is spent.
            64 - ws.components().count(),
        ];
        for depth in depths {
            let mut deep = ws.clone();
            for _ in 0..depth {
                deep.push("a");
            }
            std::fs::create_dir_all(&deep).unwrap();
            let out: String = (0..MAX_MENTIONS)
                .map(|i| format!("foo: {}/{i:02}: Permission denied\n", deep.display()))
                .collect();
            let mentions = scan(&out);
            assert_eq!(mentions.len(), MAX_MENTIONS);
            let judge = Judge::new(&c.spec).unwrap();
            assert_eq!(judged(&judge, &ws, View::GrantsOnly, &mentions), []);
            let spent = judge.lookups();
            if depth > MAX_COMPONENTS {
                assert_eq!(spent, 0, "depth {depth}");
            } else {
                assert_eq!(spent, MAX_LOOKUPS, "depth {depth}");
            }
        }
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
    fn a_cache_file_its_view_cannot_copy_is_named_and_elsewhere_eoverflow_is_not() {
        let mut c = call();
        let cache = c.base.join("ro");
        c.spec.staged.push(crate::Staged {
            dir: cache.clone(),
            upper: c.base.join("up"),
            work: c.base.join("wk"),
            through: Vec::new(),
        });
        let line = format!(
            "OSError: [Errno 75] Value too large for defined data type: '{}'",
            cache.join("tool").display()
        );
        let d = denials(&c, &line);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            (d[0].path.clone(), d[0].access, d[0].cause),
            (cache.join("tool"), DeniedAccess::Write, Cause::ForeignOwner)
        );
        let elsewhere = format!(
            "cat: {}: Value too large for defined data type",
            c.base.join("ws/big").display()
        );
        assert_eq!(denials(&c, &elsewhere), []);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_write_to_a_hard_linked_file_is_named_with_its_own_cause() {
        let mut c = call();
        let file = c.base.join("ws/linked.txt");
        std::fs::write(&file, "x").unwrap();
        c.spec.frozen.push(file.clone());
        for line in [
            "cp: cannot create regular file 'linked.txt': Read-only file system".to_owned(),
            "sh: 1: cannot create linked.txt: Read-only file system".to_owned(),
            format!(
                "sh: 1: cannot create {}: Read-only file system",
                file.display()
            ),
        ] {
            let d = denials(&c, &line);
            assert_eq!(d.len(), 1, "{line}: {d:?}");
            assert_eq!(
                (d[0].path.clone(), d[0].cause),
                (file.clone(), Cause::HardLinked)
            );
        }
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

#[test]
fn a_path_with_control_or_bidi_characters_is_never_repeated() {
    for line in [
        "cat: /root/\u{1b}]0;x\u{7}: Permission denied",
        "cat: /root/\u{202e}txt.exe: Permission denied",
        "cat: /root/a\u{85}b: Permission denied",
    ] {
        assert_eq!(scan(line), Vec::new(), "{line:?}");
    }
    assert_eq!(scan("cat: /root/ok: Permission denied").len(), 1);
}

/// NET-2: in the program's own `/tmp`, an entry that holds no grant is its own tmpfs (never
/// explained from the host's); an entry that holds grants shows only them, as elsewhere.
#[test]
fn a_path_in_the_programs_own_tmp_away_from_the_grants_is_its_own() {
    let grants = [PathBuf::from("/tmp/ws/proj")];
    for own in ["/tmp/x.txt", "/tmp/d/e", "/var/tmp/a/b"] {
        assert!(in_own_tmp(Path::new(own), &grants), "{own}");
    }
    for host in [
        "/tmp/ws/other",
        "/tmp/ws/proj/f",
        "/tmp",
        "/tmpx/y",
        "/home/u/f",
    ] {
        assert!(!in_own_tmp(Path::new(host), &grants), "{host}");
    }
}
