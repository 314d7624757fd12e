//! End to end (LIVE-4): a `run` whose program fails on an access the sandbox refused
//! carries `denials` in its error's details, worded for `run` (its roots are the mirror); one
//! that succeeds has none. Runs here and, when we are root, again as uid 65534.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod support;

use run_tool::AgentRunArguments;
use serde_json::json;
use support::{Fixture, alive_with, marker, sandbox_available};
use toolscope::{CallContext, ErrorCode};

fn also_as_nobody(test: &str) {
    if testkit::is_root() {
        let text =
            testkit::run_as_nobody(&["--exact", test, "--nocapture", "--test-threads=1"], &[]);
        assert!(
            text.is_empty() || text.contains("1 passed"),
            "{test} as nobody:\n{text}"
        );
    }
}

#[tokio::test]
async fn awk_writing_outside_the_mirror_fails_with_one_denial_in_the_details() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let target = f.dir.path().join("escaped.txt");
    f.write("in.txt", "a\n");
    let m = marker();
    let name = format!("s-{m}.awk");
    f.write(
        &name,
        format!("BEGIN {{ print \"x\" > \"{}\" }}\n", target.display()),
    );
    let (ctx, _h) = CallContext::standalone();
    let args =
        AgentRunArguments::from_json(json!({"program": "awk", "args": ["-f", name, "in.txt"]}))
            .unwrap();
    let err = run_tool::run(args, f.lease.clone(), &ctx)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ExecFailed, "{err}");
    assert!(!target.exists());
    let denials = &err.details()["denials"];
    assert_eq!(
        denials.as_array().map(Vec::len),
        Some(1),
        "{:?}",
        err.details()
    );
    assert_eq!(denials[0]["path"], target.to_string_lossy().as_ref());
    // mawk's `cannot open "…" for output`: the line's word, whether or not the file exists
    // (the host does not look outside the grants, exec::denials module docs).
    assert_eq!(denials[0]["access"], "write");
    assert_eq!(
        denials[0]["reason"],
        "outside the mirror of the workspace and the call's temp dir"
    );
    assert!(alive_with(&m).is_empty());
    also_as_nobody("awk_writing_outside_the_mirror_fails_with_one_denial_in_the_details");
}

#[tokio::test]
async fn a_successful_run_has_no_denials() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("in.txt", "Permission denied\n");
    let (ctx, _h) = CallContext::standalone();
    let args =
        AgentRunArguments::from_json(json!({"program": "wc", "args": ["-l", "in.txt"]})).unwrap();
    let out = run_tool::run(args, f.lease.clone(), &ctx).await.unwrap();
    assert!(out.denials.is_empty(), "{out:?}");
    assert!(serde_json::to_value(&out).unwrap().get("denials").is_none());
    also_as_nobody("a_successful_run_has_no_denials");
}
