//! Property tests of `run_tool::validate` (RUN-1…RUN-5): for any arguments, it never panics,
//! refuses only with the validation codes, and what it accepts has the shape RUN-3 allows —
//! whitelisted options first, `--`, then operands that exist as regular files in the mirror and
//! that no program can read as an option or (awk) an assignment.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod support;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use run_tool::{AgentRunArguments, Program};
use support::Fixture;
use toolscope::ErrorCode;

fn fixture() -> Fixture {
    let f = Fixture::new();
    for name in [
        "a.txt",
        "b.txt",
        "-n",
        "--help",
        "x=1",
        "s.awk",
        "sub/c.txt",
        ".hidden",
    ] {
        f.write(name, "1\n");
    }
    std::os::unix::fs::symlink("a.txt", f.mirror.join("link")).unwrap();
    std::fs::create_dir(f.mirror.join("dir")).unwrap();
    f
}

/// Items that exercise every rule, mixed with arbitrary text.
fn item() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "-f", "-l", "-c", "-m", "-w", "-r", "-n", "-u", "-q", "-L", "-o", "-v", "-", "--",
            "--help", "./--help", "./-n", "a.txt", "b.txt", "./a.txt", "sub/c.txt", "sub//c.txt",
            "x=1", "s.awk", "link", "dir", ".", "..", "../a.txt", "/etc/passwd", ".git/x",
            ".GIT", "sub/../a.txt", "missing", ".hidden", "{print}",
        ])
        .prop_map(str::to_owned),
        1 => any::<String>(),
        1 => "[-./a-z=]{0,12}",
    ]
}

fn arguments() -> impl Strategy<Value = AgentRunArguments> {
    (
        prop::sample::select(vec!["awk", "wc", "sort", "diff", "sh", "AWK"]),
        prop::collection::vec(item(), 0..8),
        prop::option::of(prop::sample::select(vec![
            ".", "sub", "dir", "..", "link", "/", ".git",
        ])),
        prop::option::of(prop_oneof![
            Just(0u64),
            1u64..=30_000,
            Just(30_001),
            any::<u64>()
        ]),
    )
        .prop_map(|(program, args, cwd, timeout)| AgentRunArguments {
            program: program.to_owned(),
            args,
            cwd_relative: cwd.map(str::to_owned),
            timeout_ms: timeout,
        })
}

/// Calls built to be mostly valid, so the acceptance side of the property is exercised.
fn plausible() -> impl Strategy<Value = AgentRunArguments> {
    let files = || {
        prop::sample::select(vec![
            "a.txt",
            "b.txt",
            "./-n",
            "./--help",
            "x=1",
            "./x=1",
            "sub/c.txt",
            ".hidden",
            "./a.txt",
        ])
        .prop_map(str::to_owned)
    };
    (
        prop::sample::select(vec!["awk", "wc", "sort", "diff"]),
        prop::sample::subsequence(vec!["-c", "-l", "-m", "-w", "-r", "-n", "-u", "-q"], 0..3),
        prop::collection::vec(files(), 1..4),
        prop::option::of(item()),
    )
        .prop_map(|(program, options, mut operands, poison)| {
            let mut args: Vec<String> = Vec::new();
            match program {
                "awk" => args.extend(["-f".to_owned(), "s.awk".to_owned()]),
                "diff" => {
                    args.extend(
                        options
                            .iter()
                            .filter(|o| ["-u", "-q"].contains(o))
                            .map(|o| (*o).to_owned()),
                    );
                    operands.resize(2, "b.txt".to_owned());
                }
                _ => args.extend(options.iter().map(|o| (*o).to_owned())),
            }
            args.extend(operands);
            if let Some(p) = poison {
                args.push(p);
            }
            AgentRunArguments {
                program: program.to_owned(),
                args,
                ..Default::default()
            }
        })
}

#[test]
fn validate_accepts_only_the_whitelisted_shape_and_never_panics() {
    let f = fixture();
    let before = f.snapshot();
    let accepted = std::sync::atomic::AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config::with_cases(2000));
    runner
        .run(&prop_oneof![arguments(), plausible()], |args| {
            match run_tool::validate(&args, &f.lease) {
                Err(e) => {
                    prop_assert!(
                        matches!(
                            e.code(),
                            ErrorCode::ExecArgumentsInvalid
                                | ErrorCode::ExecPathInvalid
                                | ErrorCode::ExecProgramUnsupported
                        ),
                        "{args:?}: {e}"
                    );
                    prop_assert!(!e.message().is_empty());
                }
                Ok(v) => {
                    accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let program = Program::from_name(&args.program).unwrap();
                    prop_assert_eq!(v.program(), program);
                    let t = v.timeout_ms();
                    prop_assert!((1..=30_000).contains(&t));
                    let argv: Vec<String> = v
                        .argv()
                        .iter()
                        .map(|a| a.to_string_lossy().into_owned())
                        .collect();
                    let split = argv.iter().position(|a| a == "--").unwrap();
                    let (options, operands) = (&argv[..split], &argv[split + 1..]);
                    let mut opts = options.iter();
                    if program == Program::Awk {
                        prop_assert_eq!(opts.next().map(String::as_str), Some("-f"));
                        let script = opts.next().unwrap();
                        prop_assert!(!script.starts_with('-'));
                    }
                    let allowed: &[&str] = match program {
                        Program::Awk => &[],
                        Program::Wc => &["-c", "-l", "-m", "-w"],
                        Program::Sort => &["-r", "-n", "-u"],
                        Program::Diff => &["-u", "-q"],
                    };
                    for o in opts {
                        prop_assert!(allowed.contains(&o.as_str()), "{argv:?}");
                    }
                    match program {
                        Program::Diff => prop_assert_eq!(operands.len(), 2),
                        _ => prop_assert!(!operands.is_empty()),
                    }
                    let cwd = f.mirror.join(v.cwd().as_path());
                    for op in operands {
                        prop_assert!(!op.starts_with('-'), "{argv:?}");
                        if program == Program::Awk {
                            prop_assert!(!op.contains('=') || op.starts_with("./"), "{argv:?}");
                        }
                        let meta = std::fs::symlink_metadata(cwd.join(op)).unwrap();
                        prop_assert!(meta.is_file(), "{op} is not a regular file");
                        prop_assert!(!op.to_ascii_lowercase().contains(".git"));
                    }
                }
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(f.snapshot(), before, "validation changed the mirror");
    // The property is not vacuous: a fair share of the generated calls passes.
    let accepted = accepted.into_inner();
    eprintln!("accepted {accepted} of 2000");
    assert!(accepted >= 20, "only {accepted} accepted");
}
