//! Every refusal of RUN-1…RUN-5, through the public `run` entry point: each
//! returns its stable code, and the workspace is byte-identical afterwards with nothing run
//! (the awk script in the fixture would create `ran` if it ever started). invariant 1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod support;

use serde_json::{Value, json};
use support::Fixture;
use toolscope::{CallContext, ErrorCode};

fn fixture() -> Fixture {
    let f = Fixture::new();
    f.write("a.txt", "1\n2\n");
    f.write("b.txt", "1\n3\n");
    f.write("c.txt", "c\n");
    f.write("s.awk", "BEGIN { print \"x\" > \"ran\" } { print }\n");
    f.write("--help", "not an option\n");
    f.write("sub/d.txt", "d\n");
    f.write(".GIT/x", "git\n");
    f.write("sub/.git/config", "git\n");
    std::os::unix::fs::symlink("a.txt", f.mirror.join("link.txt")).unwrap();
    std::os::unix::fs::symlink("sub", f.mirror.join("linkdir")).unwrap();
    std::os::unix::fs::symlink("/etc", f.mirror.join("etc")).unwrap();
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        f.mirror.join("fifo"),
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    f
}

/// Runs `args` and asserts the refusal `code` with nothing changed and nothing run.
async fn check(args: Value, code: ErrorCode) {
    check_in(&fixture(), args, code).await;
}

async fn check_in(f: &Fixture, args: Value, code: ErrorCode) {
    let before = f.snapshot();
    let (ctx, _h) = CallContext::standalone();
    let result = match run_tool::AgentRunArguments::from_json(args.clone()) {
        Ok(parsed) => run_tool::run(parsed, f.lease.clone(), &ctx).await,
        Err(e) => Err(e),
    };
    let err = result.expect_err(&format!("{args} must be refused"));
    assert_eq!(err.code(), code, "{args}: {err}");
    assert!(!err.message().is_empty());
    assert_eq!(f.snapshot(), before, "{args} changed the workspace");
    assert!(!f.mirror.join("ran").exists(), "{args} ran the program");
}

macro_rules! refusals {
    ($($name:ident: $args:expr => $code:ident;)*) => {$(
        #[tokio::test]
        async fn $name() {
            check($args, ErrorCode::$code).await;
        }
    )*};
}

refusals! {
    // RUN-1
    program_outside_the_four_is_unsupported: json!({"program": "sh", "args": ["-c", "true"]}) => ExecProgramUnsupported;
    program_given_as_a_path_is_unsupported: json!({"program": "/usr/bin/awk", "args": ["-f", "s.awk", "a.txt"]}) => ExecProgramUnsupported;
    program_in_upper_case_is_unsupported: json!({"program": "WC", "args": ["a.txt"]}) => ExecProgramUnsupported;
    // Shape (docs/requirements.md "Interfaces": unknown fields refused)
    unknown_field_is_refused: json!({"program": "wc", "args": ["a.txt"], "cwd": "."}) => ExecArgumentsInvalid;
    // RUN-3: awk
    inline_awk_program_text_is_refused: json!({"program": "awk", "args": ["{ print > \"ran\" }", "a.txt"]}) => ExecArgumentsInvalid;
    awk_script_outside_the_mirror_is_refused: json!({"program": "awk", "args": ["-f", "/etc/passwd", "a.txt"]}) => ExecPathInvalid;
    awk_variable_option_is_refused: json!({"program": "awk", "args": ["-v", "x=1", "-f", "s.awk", "a.txt"]}) => ExecArgumentsInvalid;
    awk_script_without_input_file_is_refused: json!({"program": "awk", "args": ["-f", "s.awk"]}) => ExecArgumentsInvalid;
    awk_script_from_stdin_is_refused: json!({"program": "awk", "args": ["-f", "-", "a.txt"]}) => ExecArgumentsInvalid;
    awk_field_separator_option_is_refused: json!({"program": "awk", "args": ["-F,", "-f", "s.awk", "a.txt"]}) => ExecArgumentsInvalid;
    awk_script_through_a_symlinked_directory_is_refused: json!({"program": "awk", "args": ["-f", "etc/passwd", "a.txt"]}) => ExecPathInvalid;
    // RUN-3: wc, sort, diff
    wc_max_line_length_is_refused: json!({"program": "wc", "args": ["-L", "a.txt"]}) => ExecArgumentsInvalid;
    wc_combined_flags_are_refused: json!({"program": "wc", "args": ["-lw", "a.txt"]}) => ExecArgumentsInvalid;
    wc_without_files_is_refused: json!({"program": "wc", "args": ["-l"]}) => ExecArgumentsInvalid;
    sort_output_file_is_refused: json!({"program": "sort", "args": ["-o", "out", "a.txt"]}) => ExecArgumentsInvalid;
    sort_compress_program_is_refused: json!({"program": "sort", "args": ["--compress-program=sh", "a.txt"]}) => ExecArgumentsInvalid;
    diff_with_one_file_is_refused: json!({"program": "diff", "args": ["a.txt"]}) => ExecArgumentsInvalid;
    diff_with_three_files_is_refused: json!({"program": "diff", "args": ["a.txt", "b.txt", "c.txt"]}) => ExecArgumentsInvalid;
    diff_recursive_is_refused: json!({"program": "diff", "args": ["-r", "a.txt", "b.txt"]}) => ExecArgumentsInvalid;
    diff_of_directories_is_refused: json!({"program": "diff", "args": ["sub", "sub"]}) => ExecPathInvalid;
    stdin_operand_is_refused: json!({"program": "wc", "args": ["-l", "-"]}) => ExecArgumentsInvalid;
    option_after_the_operands_is_refused: json!({"program": "wc", "args": ["a.txt", "-l"]}) => ExecArgumentsInvalid;
    file_named_like_an_option_is_refused_as_an_option: json!({"program": "wc", "args": ["--help"]}) => ExecArgumentsInvalid;
    double_dash_is_refused: json!({"program": "sort", "args": ["--", "a.txt"]}) => ExecArgumentsInvalid;
    // RUN-4: paths
    git_dir_in_any_case_is_refused: json!({"program": "wc", "args": [".GIT/x"]}) => ExecPathInvalid;
    nested_git_dir_is_refused: json!({"program": "wc", "args": ["sub/.git/config"]}) => ExecPathInvalid;
    parent_component_is_refused: json!({"program": "wc", "args": ["a/../b"]}) => ExecPathInvalid;
    leaving_the_mirror_is_refused: json!({"program": "wc", "args": ["../mirror/a.txt"]}) => ExecPathInvalid;
    absolute_file_is_refused: json!({"program": "wc", "args": ["/etc/passwd"]}) => ExecPathInvalid;
    symlinked_file_is_refused: json!({"program": "wc", "args": ["link.txt"]}) => ExecPathInvalid;
    file_under_a_symlinked_directory_is_refused: json!({"program": "wc", "args": ["linkdir/d.txt"]}) => ExecPathInvalid;
    missing_file_is_refused: json!({"program": "wc", "args": ["nope.txt"]}) => ExecPathInvalid;
    directory_as_file_is_refused: json!({"program": "wc", "args": ["sub"]}) => ExecPathInvalid;
    fifo_as_file_is_refused_without_blocking: json!({"program": "wc", "args": ["fifo"]}) => ExecPathInvalid;
    symlinked_cwd_is_refused: json!({"program": "wc", "args": ["d.txt"], "cwdRelative": "linkdir"}) => ExecPathInvalid;
    absolute_cwd_is_refused: json!({"program": "wc", "args": ["a.txt"], "cwdRelative": "/tmp"}) => ExecPathInvalid;
    parent_cwd_is_refused: json!({"program": "wc", "args": ["mirror/a.txt"], "cwdRelative": ".."}) => ExecPathInvalid;
    git_cwd_is_refused: json!({"program": "wc", "args": ["x"], "cwdRelative": ".git"}) => ExecPathInvalid;
    file_cwd_is_refused: json!({"program": "wc", "args": ["a.txt"], "cwdRelative": "a.txt"}) => ExecPathInvalid;
    operands_are_relative_to_the_cwd: json!({"program": "wc", "args": ["a.txt"], "cwdRelative": "sub"}) => ExecPathInvalid;
    // RUN-5
    zero_timeout_is_refused: json!({"program": "awk", "args": ["-f", "s.awk", "a.txt"], "timeoutMs": 0}) => ExecArgumentsInvalid;
    timeout_over_thirty_seconds_is_refused: json!({"program": "awk", "args": ["-f", "s.awk", "a.txt"], "timeoutMs": 30001}) => ExecArgumentsInvalid;
}

// RUN-2
#[tokio::test]
async fn sixty_five_args_are_refused() {
    let mut args = vec!["-l".to_owned(); 1];
    args.extend(std::iter::repeat_n("a.txt".to_owned(), 64));
    check(
        json!({"program": "wc", "args": args}),
        ErrorCode::ExecArgumentsInvalid,
    )
    .await;
}

#[tokio::test]
async fn one_arg_of_4097_bytes_is_refused() {
    let long = format!("{}.txt", "a".repeat(4093));
    assert_eq!(long.len(), 4097);
    check(
        json!({"program": "wc", "args": [long]}),
        ErrorCode::ExecArgumentsInvalid,
    )
    .await;
}

#[tokio::test]
async fn sixteen_kib_plus_one_in_total_is_refused() {
    let item = "a".repeat(4096);
    let args = [item.clone(), item.clone(), item.clone(), item, "b".into()];
    assert_eq!(args.iter().map(String::len).sum::<usize>(), 16_385);
    check(
        json!({"program": "wc", "args": args}),
        ErrorCode::ExecArgumentsInvalid,
    )
    .await;
}

#[tokio::test]
async fn a_cancelled_call_runs_nothing() {
    let f = fixture();
    let before = f.snapshot();
    let (ctx, handle) = CallContext::standalone();
    handle.cancel(toolscope::CancelReason::Requested);
    let args = run_tool::AgentRunArguments::from_json(
        json!({"program": "awk", "args": ["-f", "s.awk", "a.txt"]}),
    )
    .unwrap();
    let err = run_tool::run(args, f.lease.clone(), &ctx)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ExecCancelled);
    assert_eq!(f.snapshot(), before);
}

#[tokio::test]
async fn a_replaced_mirror_runs_nothing() {
    let f = fixture();
    std::fs::rename(&f.mirror, f.dir.path().join("moved")).unwrap();
    std::fs::create_dir(&f.mirror).unwrap();
    std::fs::write(f.mirror.join("a.txt"), "x\n").unwrap();
    std::fs::write(f.mirror.join("s.awk"), "BEGIN { print \"x\" > \"ran\" }\n").unwrap();
    let before = f.snapshot();
    let (ctx, _h) = CallContext::standalone();
    let args = run_tool::AgentRunArguments::from_json(
        json!({"program": "awk", "args": ["-f", "s.awk", "a.txt"]}),
    )
    .unwrap();
    // Validation goes through the pinned fd (the moved directory still has the files); the
    // lease check then refuses to run in the directory now at the path.
    let err = run_tool::run(args, f.lease.clone(), &ctx)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ExecCancelled, "{err}");
    assert_eq!(f.snapshot(), before);
    assert!(!f.dir.path().join("moved/ran").exists());
}

#[test]
fn validate_writes_file_operands_so_they_cannot_be_options_or_assignments() {
    let f = fixture();
    f.write("-x", "dash\n");
    f.write("k=v", "assign\n");
    let args = |program: &str, list: &[&str]| run_tool::AgentRunArguments {
        program: program.into(),
        args: list.iter().map(|s| (*s).to_owned()).collect(),
        ..Default::default()
    };
    let argv = |v: run_tool::ValidatedRun| -> Vec<String> {
        v.argv()
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect()
    };
    let v =
        run_tool::validate(&args("wc", &["-l", "./--help", "./-x", "a.txt"]), &f.lease).unwrap();
    assert_eq!(argv(v), ["-l", "--", "./--help", "./-x", "a.txt"]);
    let v = run_tool::validate(&args("awk", &["-f", "./s.awk", "k=v", "./-x"]), &f.lease).unwrap();
    assert_eq!(argv(v), ["-f", "s.awk", "--", "./k=v", "./-x"]);
    let v = run_tool::validate(&args("wc", &["k=v"]), &f.lease).unwrap();
    assert_eq!(argv(v), ["--", "k=v"]);
    let v = run_tool::validate(&args("diff", &["-u", "a.txt", "sub/../b.txt"]), &f.lease);
    assert_eq!(v.unwrap_err().code(), ErrorCode::ExecPathInvalid);
}

#[test]
fn validate_resolves_the_fixed_program_and_defaults() {
    let f = fixture();
    let v = run_tool::validate(
        &run_tool::AgentRunArguments {
            program: "awk".into(),
            args: vec!["-f".into(), "s.awk".into(), "a.txt".into()],
            ..Default::default()
        },
        &f.lease,
    )
    .unwrap();
    assert_eq!(v.program(), run_tool::Program::Awk);
    assert!(v.executable().is_absolute());
    assert_eq!(
        v.executable(),
        std::path::Path::new("/usr/bin/awk").canonicalize().unwrap()
    );
    assert!(v.cwd().is_root());
    assert_eq!(v.timeout_ms(), 10_000);
}

#[tokio::test]
async fn unreadable_file_is_refused_before_start() {
    if support::rerun_unprivileged("unreadable_file_is_refused_before_start") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    std::fs::set_permissions(
        f.mirror.join("c.txt"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    check_in(
        &f,
        json!({"program": "awk", "args": ["-f", "s.awk", "c.txt"]}),
        ErrorCode::ExecPathInvalid,
    )
    .await;
}
