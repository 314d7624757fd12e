//! Property tests of `command_tool::validate` (CMD-3, CMD-4): for any arguments it never
//! panics, refuses only with the validation codes, changes nothing, and every extra path it
//! accepts is absolute, normalised, existing, free of symbolic links and `.git`, and outside the
//! scope.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod support;

use std::path::{Path, PathBuf};

use command_tool::{CommandArguments, ExtraPath};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use support::Fixture;
use toolscope::ErrorCode;

fn fixture() -> Fixture {
    let f = Fixture::new();
    f.write("sub/a.txt", "a\n");
    f.outside("ro/f.txt", "x\n");
    f.outside("rw/g.txt", "x\n");
    std::os::unix::fs::symlink(f.outside_dir().join("ro"), f.outside_dir().join("link")).unwrap();
    std::os::unix::fs::symlink("sub", f.scope.join("slink")).unwrap();
    f
}

fn path_text(out: String, scope: String) -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "ro", "rw", "link", "f.txt", "g.txt", ".", "..", ".git", ".GIT", "", "missing", "sub",
    ]);
    prop_oneof![
        3 => (
            prop::sample::select(vec![out.clone(), scope, "/".to_owned(), String::new(), "rel".to_owned()]),
            prop::collection::vec(pieces, 0..3),
        )
            .prop_map(|(base, parts)| {
                let mut s = base;
                for p in parts {
                    s.push('/');
                    s.push_str(p);
                }
                s
            }),
        1 => any::<String>(),
        1 => Just(out),
    ]
}

#[test]
fn validate_accepts_only_safe_extra_paths_and_never_panics() {
    let f = fixture();
    let before = f.snapshot();
    let out = f.outside_dir().display().to_string();
    let scope = f.scope.display().to_string();
    let strategy = (
        prop_oneof![
            Just("true".to_owned()),
            Just(String::new()),
            any::<String>()
        ],
        prop::option::of(prop::sample::select(vec![
            ".",
            "sub",
            "slink",
            "..",
            "/tmp",
            ".git",
            "sub/a.txt",
        ])),
        prop::collection::vec((path_text(out, scope), any::<bool>()), 0..4),
        prop::option::of(prop_oneof![Just(0u64), 1u64..=300_000, any::<u64>()]),
    );
    let accepted = std::sync::atomic::AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config::with_cases(2000));
    runner
        .run(&strategy, |(command, cwd, extra, timeout)| {
            let args = CommandArguments {
                command,
                cwd: cwd.map(str::to_owned),
                extra_paths: extra
                    .into_iter()
                    .map(|(path, write)| ExtraPath { path, write })
                    .collect(),
                timeout_ms: timeout,
            };
            match command_tool::validate(&args, &f.lease) {
                Err(e) => prop_assert!(
                    matches!(
                        e.code(),
                        ErrorCode::ExecArgumentsInvalid | ErrorCode::ExecPathInvalid
                    ),
                    "{args:?}: {e}"
                ),
                Ok(v) => {
                    accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    prop_assert!(!v.command().trim().is_empty());
                    prop_assert!((1..=300_000).contains(&v.timeout_ms()));
                    prop_assert_eq!(v.extra_paths().len(), args.extra_paths.len());
                    for e in v.extra_paths() {
                        let p = e.path();
                        prop_assert!(p.is_absolute() && p != Path::new("/"));
                        prop_assert!(!p.starts_with(&f.scope), "{p:?} is in the scope");
                        let mut walked = PathBuf::from("/");
                        for c in p.components().skip(1) {
                            let name = c.as_os_str().to_string_lossy().to_ascii_lowercase();
                            prop_assert!(name != ".." && name != "." && name != ".git", "{p:?}");
                            walked.push(c);
                            let meta = std::fs::symlink_metadata(&walked).unwrap();
                            prop_assert!(!meta.file_type().is_symlink(), "{p:?}");
                        }
                        prop_assert_eq!(e.is_dir(), p.is_dir());
                    }
                }
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(f.snapshot(), before);
    let accepted = accepted.into_inner();
    eprintln!("accepted {accepted} of 2000");
    assert!(accepted >= 20, "only {accepted} accepted");
}
