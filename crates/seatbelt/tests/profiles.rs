//! The `run` and `command` profiles under the evaluator: every rule exercised allowed and denied,
//! plus the attacks the issue names (`.GIT/config`, a hard link into the scope, `~/.ssh/id_rsa`,
//! `/opt/homebrew/etc` and `var` vs `include` and `share`, Xcode's compilers). RUN-6, RUN-7,
//! CMD-2, CMD-9, CMD-10.
//! The evaluator is a model (see `seatbelt::eval`); `tests/macos.rs` checks it on a Mac.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::path::PathBuf;

use Decision::{Allow, Deny};
use seatbelt::{
    BoundProfile, Decision, EvalError, Network, Operation as Op, Profile, ProfileSpec, Request,
    SpecError, Target,
};

const HOME: &str = "/Users/alice";
const MIRROR: &str = "/Users/alice/Library/Application Support/agent/mirror";
const SCOPE: &str = "/Users/alice/src/project";
const TEMP: &str = "/private/var/folders/xy/abc/T/call-1";

fn run() -> BoundProfile {
    ProfileSpec::run("/usr/bin/awk", MIRROR, TEMP)
        .build()
        .unwrap()
}

fn command() -> BoundProfile {
    let mut spec = ProfileSpec::command(SCOPE, TEMP);
    spec.read_write.push(format!("{HOME}/notes").into());
    spec.read_only.push(format!("{HOME}/datasets").into());
    spec.build().unwrap()
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

fn decide(bound: &BoundProfile, req: Request<'_>) -> Decision {
    bound.evaluate(&req).unwrap().decision
}

fn m(rel: &str) -> String {
    format!("{MIRROR}/{rel}")
}

fn s(rel: &str) -> String {
    format!("{SCOPE}/{rel}")
}

// ---------- run (RUN-6, RUN-7) ----------

#[test]
fn run_may_exec_only_its_one_program_and_never_fork() {
    let b = run();
    expect(
        &b,
        &[
            (Op::ProcessExec, "/usr/bin/awk", Allow),
            (Op::ProcessExec, "/usr/bin/wc", Deny),
            (Op::ProcessExec, "/bin/sh", Deny),
            (Op::ProcessExec, &m("script.sh"), Deny),
            (Op::ProcessExec, &format!("{TEMP}/a.out"), Deny),
        ],
    );
    assert_eq!(decide(&b, Request::bare(Op::ProcessFork)), Deny);
}

#[test]
fn run_reads_its_program_and_system_libraries_but_not_the_rest_of_usr() {
    expect(
        &run(),
        &[
            (Op::FileReadData, "/usr/bin/awk", Allow),
            (Op::FileMapExecutable, "/usr/lib/libSystem.B.dylib", Allow),
            (Op::FileReadData, "/usr/lib/dyld", Allow),
            (
                Op::FileMapExecutable,
                "/System/Library/Frameworks/CoreFoundation.framework/CoreFoundation",
                Allow,
            ),
            (
                Op::FileReadData,
                "/System/Library/PrivateFrameworks/X.framework/X",
                Allow,
            ),
            (
                Op::FileMapExecutable,
                "/System/Volumes/Preboot/Cryptexes/OS/System/Library/dyld/dyld_shared_cache_arm64e",
                Allow,
            ),
            (
                Op::FileMapExecutable,
                "/System/Cryptexes/OS/System/Library/dyld/dyld_shared_cache_x86_64",
                Allow,
            ),
            (Op::FileReadData, "/usr/share/zoneinfo/UTC", Deny),
            (Op::FileReadData, "/usr/bin/wc", Deny),
            (Op::FileReadData, "/bin/sh", Deny),
            (Op::FileReadData, "/opt/homebrew/bin/gawk", Deny),
            (Op::FileWriteData, "/usr/lib/libSystem.B.dylib", Deny),
            (Op::FileWriteData, "/usr/bin/awk", Deny),
        ],
    );
}

#[test]
fn run_reads_and_writes_the_mirror_and_temp_dir_only() {
    expect(
        &run(),
        &[
            (Op::FileReadData, &m("in.txt"), Allow),
            (Op::FileReadMetadata, MIRROR, Allow),
            (Op::FileWriteData, &m("out/result.csv"), Allow),
            (Op::FileWriteCreate, &m("new.txt"), Allow),
            (Op::FileWriteUnlink, &m("old.txt"), Allow),
            (Op::FileReadData, &format!("{TEMP}/sort.tmp"), Allow),
            (Op::FileWriteData, &format!("{TEMP}/sort.tmp"), Allow),
            // The same temp dir as the program sees it through the /var symlink.
            (Op::FileWriteData, "/var/folders/xy/abc/T/call-1/x", Allow),
            // Not executable code: awk has no business mapping files from the mirror.
            (Op::FileMapExecutable, &m("lib.dylib"), Deny),
            // Siblings, parents and lookalikes of the roots.
            (Op::FileReadData, &format!("{MIRROR}-other/x"), Deny),
            (
                Op::FileReadData,
                "/Users/alice/Library/Application Support/agent/other/x",
                Deny,
            ),
            (
                Op::FileReadData,
                "/private/var/folders/xy/abc/T/call-2/x",
                Deny,
            ),
            (Op::FileReadData, "/private/tmp/x", Deny),
            (Op::FileWriteData, "/tmp/x", Deny),
        ],
    );
}

#[test]
fn run_denies_dot_git_in_any_letter_case() {
    expect(
        &run(),
        &[
            (Op::FileReadData, &m(".git/config"), Deny),
            (Op::FileReadData, &m(".GIT/config"), Deny),
            (Op::FileWriteData, &m(".Git/HEAD"), Deny),
            (Op::FileWriteCreate, &m("sub/.gIT/hooks/pre-commit"), Deny),
            (Op::FileReadMetadata, &m(".git"), Deny),
            (Op::FileWriteUnlink, &m(".git"), Deny),
            (Op::ProcessExec, &m(".git/hooks/post-checkout"), Deny),
            (Op::FileReadData, &m(".gitignore"), Allow),
            (Op::FileReadData, &m(".github/ci.yml"), Allow),
            (Op::FileReadData, &m("x.git/y"), Allow),
        ],
    );
}

#[test]
fn run_and_command_refuse_every_hard_link_even_into_their_own_scope() {
    // CMD-9 / RUN-7: `link()` is checked as file-link, which no allow covers and a final deny
    // forbids — whether the new name or the linked file is inside the scope.
    for (b, root) in [(run(), MIRROR), (command(), SCOPE)] {
        expect(
            &b,
            &[
                (Op::FileLink, &format!("{root}/link-to-id_rsa"), Deny),
                (Op::FileLink, &format!("{root}/a.txt"), Deny),
                (Op::FileLink, "/Users/alice/.ssh/id_rsa", Deny),
                (Op::FileLink, &format!("{TEMP}/l"), Deny),
                // Ordinary creation in the same place is fine: only linking is refused.
                (Op::FileWriteCreate, &format!("{root}/a.txt"), Allow),
            ],
        );
        let v = b
            .evaluate(&Request::file(Op::FileLink, &format!("{root}/x")))
            .unwrap();
        assert_eq!(
            v.rule,
            Some(b.profile().rules.len() - 1),
            "the final (deny file-link) decides"
        );
    }
}

#[test]
fn an_existing_hard_link_in_the_scope_is_readable_by_path_which_is_why_it_is_refused_before_start()
{
    // Seatbelt decides by path: a link created before the call (or by another process, CMD-11)
    // is just a file in the scope. CMD-9's pre-start scan, not the profile, stops that.
    assert_eq!(
        run()
            .decide(Op::FileReadData, &m("hardlink-to-id_rsa"))
            .unwrap(),
        Allow
    );
    assert_eq!(
        command()
            .decide(Op::FileReadData, &s("hardlink-to-id_rsa"))
            .unwrap(),
        Allow
    );
}

#[test]
fn run_denies_home_secrets_other_directories_network_and_ipc() {
    let b = run();
    expect(
        &b,
        &[
            (Op::FileReadData, "/Users/alice/.ssh/id_rsa", Deny),
            (Op::FileReadMetadata, "/Users/alice/.ssh", Deny),
            (Op::FileReadData, HOME, Deny),
            (Op::FileReadData, "/Users/alice/.aws/credentials", Deny),
            (Op::FileReadData, "/etc/passwd", Deny),
            (Op::FileReadData, "/Library/Keychains/System.keychain", Deny),
            (Op::FileReadData, "/", Deny),
            (Op::FileWriteData, "/Users/alice/.zshrc", Deny),
        ],
    );
    for op in [
        Op::NetworkOutbound,
        Op::NetworkInbound,
        Op::NetworkBind,
        Op::SystemSocket,
        Op::IpcPosixSem,
    ] {
        assert_eq!(decide(&b, Request::bare(op)), Deny, "{}", op.name());
    }
    assert_eq!(
        decide(
            &b,
            Request::mach_lookup("com.apple.system.opendirectoryd.libinfo")
        ),
        Deny
    );
}

#[test]
fn run_may_signal_itself_only() {
    let b = run();
    assert_eq!(
        decide(
            &b,
            Request::process(Op::Signal, &[Target::SelfProcess, Target::SameSandbox])
        ),
        Allow
    );
    assert_eq!(
        decide(&b, Request::process(Op::Signal, &[Target::SameSandbox])),
        Deny
    );
    assert_eq!(decide(&b, Request::process(Op::Signal, &[])), Deny);
    assert_eq!(
        decide(
            &b,
            Request::process(Op::ProcessInfoPidinfo, &[Target::SelfProcess])
        ),
        Deny
    );
}

#[test]
fn both_profiles_allow_the_null_and_random_devices_narrowly() {
    for b in [run(), command()] {
        expect(
            &b,
            &[
                (Op::FileWriteData, "/dev/null", Allow),
                (Op::FileReadData, "/dev/null", Allow),
                (Op::FileReadData, "/dev/urandom", Allow),
                (Op::FileReadData, "/dev/random", Allow),
                (Op::FileReadData, "/dev/zero", Allow),
                (Op::FileWriteData, "/dev/urandom", Deny),
                (Op::FileIoctl, "/dev/null", Deny),
                (Op::FileWriteUnlink, "/dev/null", Deny),
                (Op::FileReadData, "/dev/disk0", Deny),
                (Op::FileReadData, "/dev/tty", Deny),
            ],
        );
    }
}

#[test]
fn both_profiles_read_only_the_sysctls_libc_needs() {
    for b in [run(), command()] {
        for name in [
            "hw.ncpu",
            "hw.pagesize",
            "hw.memsize",
            "kern.osrelease",
            "kern.argmax",
            "hw.optional.avx2_0",
            "hw.perflevel0.cpusperl2",
        ] {
            assert_eq!(decide(&b, Request::sysctl(name)), Allow, "{name}");
        }
        for name in [
            "kern.hostname",
            "kern.proc.all",
            "kern.bootargs",
            "security.mac.sandbox.sentinel",
            "hw.optionalx",
            "kern.uuid",
        ] {
            assert_eq!(decide(&b, Request::sysctl(name)), Deny, "{name}");
        }
    }
}

// ---------- command (CMD-2, CMD-9, CMD-10) ----------

#[test]
fn command_may_fork_and_exec_system_homebrew_macports_and_scope_programs() {
    let b = command();
    assert_eq!(decide(&b, Request::bare(Op::ProcessFork)), Allow);
    expect(
        &b,
        &[
            (Op::ProcessExec, "/bin/sh", Allow),
            (Op::ProcessExec, "/bin/bash", Allow),
            (Op::ProcessExec, "/usr/bin/git", Allow),
            (Op::ProcessExec, "/usr/libexec/path_helper", Allow),
            (
                Op::ProcessExec,
                "/Library/Developer/CommandLineTools/usr/bin/git",
                Allow,
            ),
            (Op::ProcessExec, "/opt/homebrew/bin/rg", Allow),
            (
                Op::ProcessExec,
                "/opt/homebrew/Cellar/ripgrep/14.1.0/bin/rg",
                Allow,
            ),
            (Op::ProcessExec, "/usr/local/bin/node", Allow),
            (
                Op::ProcessExec,
                "/usr/local/Cellar/node/22.0.0/bin/node",
                Allow,
            ),
            (Op::ProcessExec, "/opt/local/bin/port", Allow),
            (Op::ProcessExec, &s("target/debug/app"), Allow),
            (Op::ProcessExec, &format!("{TEMP}/build.sh"), Allow),
            (Op::ProcessExec, "/Users/alice/Downloads/evil", Deny),
            // A read-only extra path runs what it holds (an approved toolchain, issue 16).
            (Op::ProcessExec, "/Users/alice/datasets/run.sh", Allow),
            (
                Op::ProcessExec,
                "/Applications/Calculator.app/Contents/MacOS/Calculator",
                Deny,
            ),
            (Op::ProcessExec, "/usr/share/doc/x", Deny),
            (Op::ProcessExec, "/opt/homebrew/etc/x", Deny),
        ],
    );
}

#[test]
fn command_reads_program_header_and_data_trees_but_not_package_manager_config_or_data() {
    // CMD-10, LIVE-1, seed 000: program, library, header and data trees, never `etc` or `var`.
    expect(
        &command(),
        &[
            (Op::FileReadData, "/usr/lib/libz.dylib", Allow),
            (Op::FileMapExecutable, "/usr/lib/libz.dylib", Allow),
            (Op::FileReadData, "/usr/share/dict/words", Allow),
            (Op::FileReadData, "/usr/share/zoneinfo/UTC", Allow),
            (Op::FileMapExecutable, "/usr/share/zoneinfo/UTC", Deny),
            (Op::FileReadData, "/opt/homebrew/lib/libssl.dylib", Allow),
            (
                Op::FileMapExecutable,
                "/opt/homebrew/opt/openssl/lib/libssl.dylib",
                Allow,
            ),
            (
                Op::FileReadData,
                "/opt/homebrew/include/openssl/ssl.h",
                Allow,
            ),
            (Op::FileReadData, "/opt/homebrew/share/man/man1/rg.1", Allow),
            (Op::FileReadData, "/usr/local/include/zlib.h", Allow),
            (Op::FileReadData, "/opt/local/include/zlib.h", Allow),
            (Op::FileReadData, "/opt/local/share/x", Allow),
            (
                Op::FileReadData,
                "/opt/homebrew/etc/openssl@3/cert.pem",
                Deny,
            ),
            (
                Op::FileReadData,
                "/opt/homebrew/var/postgres/pg_hba.conf",
                Deny,
            ),
            (
                Op::FileReadData,
                "/opt/homebrew/var/homebrew/linked/x",
                Deny,
            ),
            (Op::FileReadData, "/opt/homebrew/etc/my.cnf", Deny),
            (Op::FileReadData, "/opt/homebrew/Library/Taps/x", Deny),
            (Op::FileReadData, "/usr/local/etc/my.cnf", Deny),
            (Op::FileReadData, "/usr/local/var/x", Deny),
            (
                Op::FileReadData,
                "/opt/local/etc/macports/macports.conf",
                Deny,
            ),
            (Op::FileReadData, "/opt/local/var/macports/x", Deny),
            (Op::FileReadMetadata, "/private/var/select/sh", Allow),
            (Op::FileReadMetadata, "/var/select/sh", Allow),
            (Op::FileReadData, "/private/var/select", Deny),
            (Op::FileReadData, "/etc/hosts", Deny),
            (Op::FileReadData, "/Users/x/.ssh/id_rsa", Deny),
            (Op::FileReadData, "/Users/alice/.ssh/id_rsa", Deny),
        ],
    );
}

#[test]
fn command_runs_the_command_line_tools_and_xcode_compilers_with_their_sdks() {
    // Issue 16: `cc` works on a Mac with either developer directory.
    expect(
        &command(),
        &[
            (
                Op::ProcessExec,
                "/Library/Developer/CommandLineTools/usr/bin/clang",
                Allow,
            ),
            (
                Op::FileMapExecutable,
                "/Library/Developer/CommandLineTools/usr/lib/libclang.dylib",
                Allow,
            ),
            (
                Op::FileReadData,
                "/Library/Developer/CommandLineTools/SDKs/MacOSX.sdk/usr/include/stdio.h",
                Allow,
            ),
            (
                Op::ProcessExec,
                "/Applications/Xcode.app/Contents/Developer/Toolchains/XcodeDefault.xctoolchain/usr/bin/clang",
                Allow,
            ),
            (
                Op::FileReadData,
                "/Applications/Xcode.app/Contents/Developer/Platforms/MacOSX.platform/Developer/SDKs/MacOSX.sdk/usr/include/math.h",
                Allow,
            ),
            (
                Op::ProcessExec,
                "/Applications/Xcode.app/Contents/MacOS/Xcode",
                Deny,
            ),
            (Op::ProcessExec, "/opt/homebrew/libexec/x", Allow),
            (Op::ProcessExec, "/opt/local/libexec/x", Allow),
            (Op::ProcessExec, "/opt/local/sbin/x", Allow),
            (Op::ProcessExec, "/usr/local/libexec/git-core/git-x", Allow),
            (Op::ProcessExec, "/opt/homebrew/include/x", Deny),
            (Op::ProcessExec, "/opt/homebrew/share/x", Deny),
            (
                Op::FileWriteData,
                "/Library/Developer/CommandLineTools/usr/bin/clang",
                Deny,
            ),
            (Op::FileWriteCreate, "/opt/homebrew/include/x.h", Deny),
        ],
    );
}

#[test]
fn run_gets_none_of_the_command_trees() {
    // RUN-7: the `run` profile keeps to its program and the system libraries.
    expect(
        &run(),
        &[
            (
                Op::FileReadData,
                "/Library/Developer/CommandLineTools/usr/bin/clang",
                Deny,
            ),
            (
                Op::FileReadData,
                "/opt/homebrew/include/openssl/ssl.h",
                Deny,
            ),
            (Op::FileReadData, "/usr/share/zoneinfo/UTC", Deny),
        ],
    );
}

#[test]
fn command_system_directories_are_read_only() {
    expect(
        &command(),
        &[
            (Op::FileWriteData, "/usr/bin/git", Deny),
            (Op::FileWriteCreate, "/opt/homebrew/bin/git", Deny),
            (Op::FileWriteUnlink, "/usr/lib/libz.dylib", Deny),
            (
                Op::FileWriteData,
                "/opt/homebrew/Cellar/x/lib/y.dylib",
                Deny,
            ),
            (Op::FileWriteMode, "/bin/sh", Deny),
        ],
    );
}

#[test]
fn command_reads_and_writes_scope_temp_and_granted_extras_only() {
    expect(
        &command(),
        &[
            (Op::FileReadData, &s("src/main.rs"), Allow),
            (Op::FileWriteData, &s("src/main.rs"), Allow),
            (Op::FileWriteCreate, &s("target/x"), Allow),
            (
                Op::FileMapExecutable,
                &s("target/debug/libfoo.dylib"),
                Allow,
            ),
            (Op::FileWriteData, &format!("{TEMP}/x"), Allow),
            (Op::FileWriteData, "/Users/alice/notes/today.md", Allow),
            (Op::FileReadData, "/Users/alice/datasets/a.csv", Allow),
            (Op::FileWriteData, "/Users/alice/datasets/a.csv", Deny),
            (Op::FileWriteCreate, "/Users/alice/datasets/new", Deny),
            (Op::FileReadData, "/Users/alice/src/other/secret", Deny),
            (Op::FileReadData, "/Users/alice/src/project-old/x", Deny),
            (Op::FileReadData, "/Users/alice/.ssh/id_rsa", Deny),
            (Op::FileReadData, "/Users/alice/.gitconfig", Deny),
            (
                Op::FileReadData,
                "/Users/alice/Library/Keychains/login.keychain-db",
                Deny,
            ),
            (Op::FileWriteData, "/Users/alice/.zshrc", Deny),
            (Op::FileReadData, "/private/tmp/other", Deny),
        ],
    );
}

#[test]
fn command_leaves_dot_git_to_the_user_unlike_run() {
    // The `command` tool runs in the user's own workspace (CMD-1), where `git` is expected; only
    // `run`'s mirror hides `.git` (RUN-4, RUN-7).
    expect(
        &command(),
        &[
            (Op::FileWriteData, &s(".git/index"), Allow),
            (Op::FileReadData, &s(".GIT/config"), Allow),
        ],
    );
}

#[test]
fn command_signals_and_inspects_only_its_own_sandbox() {
    let b = command();
    for op in [Op::Signal, Op::ProcessInfoPidinfo, Op::ProcessInfoListpids] {
        assert_eq!(
            decide(&b, Request::process(op, &[Target::SameSandbox])),
            Allow,
            "{}",
            op.name()
        );
        assert_eq!(
            decide(&b, Request::process(op, &[Target::Children])),
            Deny,
            "{}",
            op.name()
        );
        assert_eq!(decide(&b, Request::process(op, &[])), Deny, "{}", op.name());
    }
}

#[test]
fn command_looks_up_user_info_but_no_other_mach_service() {
    let b = command();
    assert_eq!(
        decide(
            &b,
            Request::mach_lookup("com.apple.system.opendirectoryd.libinfo")
        ),
        Allow
    );
    for name in [
        "com.apple.SecurityServer",
        "com.apple.pasteboard.1",
        "com.apple.coreservices.launchservicesd",
    ] {
        assert_eq!(decide(&b, Request::mach_lookup(name)), Deny, "{name}");
    }
}

#[test]
fn network_is_denied_unless_the_spec_allows_it() {
    let b = command();
    for op in [
        Op::NetworkOutbound,
        Op::NetworkInbound,
        Op::NetworkBind,
        Op::SystemSocket,
    ] {
        assert_eq!(decide(&b, Request::bare(op)), Deny, "{}", op.name());
    }
    let mut spec = ProfileSpec::command(SCOPE, TEMP);
    spec.network = Network::Allowed;
    let net = spec.build().unwrap();
    for op in [
        Op::NetworkOutbound,
        Op::NetworkInbound,
        Op::NetworkBind,
        Op::SystemSocket,
    ] {
        assert_eq!(decide(&net, Request::bare(op)), Allow, "{}", op.name());
    }
    assert_eq!(
        decide(&net, Request::mach_lookup("com.apple.dnssd.service")),
        Allow
    );
    expect(
        &net,
        &[
            (Op::FileReadData, "/etc/hosts", Allow),
            (Op::FileReadData, "/private/etc/ssl/cert.pem", Allow),
            (Op::FileReadData, "/etc/passwd", Deny),
            (Op::FileReadData, "/Users/alice/.ssh/id_rsa", Deny),
            (Op::FileLink, &s("x"), Deny),
        ],
    );
}

// ---------- spec validation and launcher arguments ----------

#[test]
fn spec_paths_must_be_absolute_canonical_utf8_and_not_root() {
    let bad = |mirror: PathBuf| {
        ProfileSpec::run("/usr/bin/wc", mirror, TEMP)
            .build()
            .unwrap_err()
    };
    assert_eq!(
        bad("relative/mirror".into()),
        SpecError::NotAbsolute("relative/mirror".into())
    );
    assert_eq!(
        bad("/Users/a/../b".into()),
        SpecError::NotCanonical("/Users/a/../b".into())
    );
    assert_eq!(
        bad("/Users/./b".into()),
        SpecError::NotCanonical("/Users/./b".into())
    );
    assert_eq!(bad("/".into()), SpecError::WholeFileSystem);
    assert_eq!(bad("//".into()), SpecError::WholeFileSystem);
    assert_eq!(bad("/a\0b".into()), SpecError::NotUtf8("/a\0b".into()));
    {
        use std::os::unix::ffi::OsStringExt;
        let non_utf8 = PathBuf::from(OsString::from_vec(b"/Users/\xff".to_vec()));
        assert_eq!(bad(non_utf8.clone()), SpecError::NotUtf8(non_utf8));
    }
    let program = ProfileSpec::run("awk", MIRROR, TEMP).build().unwrap_err();
    assert_eq!(program, SpecError::NotAbsolute("awk".into()));
    assert!(
        SpecError::WholeFileSystem
            .to_string()
            .contains("grant the directories")
    );
}

#[test]
fn spec_rewrites_private_symlinks_so_roots_match_resolved_paths() {
    let b = ProfileSpec::run("/usr/bin/sort", MIRROR, "/tmp/run-9")
        .build()
        .unwrap();
    assert_eq!(b.params().get("READ_WRITE_1"), Some("/private/tmp/run-9"));
    assert_eq!(
        b.decide(Op::FileWriteData, "/private/tmp/run-9/x").unwrap(),
        Allow
    );
}

#[test]
fn hostile_paths_become_parameters_and_cannot_change_the_profile() {
    // invariant 6: a path crafted to look like SBPL stays data.
    let hostile = "/Users/x/\")) (allow default) (allow file-read* (subpath \"/\")) ;\n(\"";
    let b = ProfileSpec::run("/usr/bin/wc", hostile, TEMP)
        .build()
        .unwrap();
    assert!(!b.text().contains("allow default"));
    assert_eq!(b.params().get("READ_WRITE_0"), Some(hostile));
    assert_eq!(&Profile::parse(&b.text()).unwrap(), b.profile());
    assert_eq!(b.decide(Op::FileReadData, "/etc/passwd").unwrap(), Deny);
    assert_eq!(
        b.decide(Op::FileReadData, &format!("{hostile}/in.txt"))
            .unwrap(),
        Allow
    );
}

#[test]
fn sandbox_exec_arguments_put_profile_parameters_and_program_in_separate_argv_slots() {
    let b = run();
    let args = b
        .sandbox_exec_args("/usr/bin/awk".as_ref(), &["-f".into(), "s.awk".into()])
        .unwrap();
    let strs: Vec<&str> = args.iter().map(|a| a.to_str().unwrap()).collect();
    assert_eq!(strs[0], "-p");
    assert_eq!(strs[1], b.text());
    assert_eq!(
        &strs[2..8],
        [
            "-D",
            "PROGRAM=/usr/bin/awk",
            "-D",
            &format!("READ_WRITE_0={MIRROR}"),
            "-D",
            &format!("READ_WRITE_1={TEMP}"),
        ]
    );
    assert_eq!(&strs[8..], ["--", "/usr/bin/awk", "-f", "s.awk"]);
    assert_eq!(seatbelt::SANDBOX_EXEC, "/usr/bin/sandbox-exec");
    assert_eq!(
        b.sandbox_exec_args("awk".as_ref(), &[]),
        Err(SpecError::NotAbsolute("awk".into()))
    );
}

#[test]
fn a_bound_profile_refuses_missing_parameters() {
    let p =
        Profile::parse("(version 1)\n(deny default)\n(allow file-read* (subpath (param \"X\")))")
            .unwrap();
    assert_eq!(
        BoundProfile::new(p, seatbelt::Params::new()).unwrap_err(),
        EvalError::MissingParam("X".into())
    );
}
