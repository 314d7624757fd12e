//! A hard-linked file in the user's folder refuses `run`. The report:
//! `ln /tmp/out/secret WS/hl`, then `run` with `awk -f p.awk hl` printed the outside secret,
//! while `command` (CMD-9) and the file tools (FILE-1) refuse hard links. The mirror the host
//! takes at turn start now applies the same single-link rule, and [`run_tool::mirror_error`]
//! makes its refusal `AGENT_EXEC_PATH_INVALID`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod support;

use std::sync::Arc;

use fsguard::{Mirror, RootLease};
use run_tool::{AgentRunArguments, AgentRunOutput};
use serde_json::{Value, json};
use support::{alive_with, marker, sandbox_available};
use testkit::TempTree;
use toolscope::{CallContext, ErrorCode, ToolError};

/// What the host does at turn start: mirror the folder beside it, errors as `run` reports them.
fn take_mirror(tree: &TempTree) -> Result<Mirror, ToolError> {
    Mirror::create(&tree.root, tree.dir.path().join("mirror")).map_err(run_tool::mirror_error)
}

async fn call(mirror: &Mirror, args: Value) -> Result<AgentRunOutput, ToolError> {
    let lease = Arc::new(RootLease::acquire(mirror.mirror_path()).unwrap());
    let (ctx, _h) = CallContext::standalone();
    run_tool::run(AgentRunArguments::from_json(args).unwrap(), lease, &ctx).await
}

/// An awk script whose name carries a fresh marker, so a survivor would be found; returns
/// (name, marker).
fn script(tree: &TempTree, body: &str) -> (String, String) {
    let m = marker();
    let name = format!("p-{m}.awk");
    tree.write(&name, body);
    (name, m)
}

#[tokio::test]
async fn run_refuses_a_hard_linked_file_in_the_folder() {
    let tree = TempTree::new("folder");
    tree.write("p.awk", "{ print }\n");
    tree.write("data.txt", "mine\n");
    let secret = tree.outside("secret", "SECRET\n");
    std::fs::hard_link(&secret, tree.root.join("hl")).unwrap();
    let before = tree.snapshot();
    let err = take_mirror(&tree).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ExecPathInvalid, "{err}");
    assert!(
        err.message().starts_with(
            "1 hard-linked file(s) in the folder: `hl` (2 links). A hard link may be another \
             name of a file outside the workspace, so the folder was not mirrored and nothing \
             ran; replace each with a copy (e.g. `cp --remove-destination f f.copy && mv f.copy \
             f`) or remove the extra name"
        ),
        "{err}"
    );
    assert_eq!(err.details()["hardLinks"], json!(["hl"]));
    assert_eq!(err.details()["hardLinkCount"], json!(1));
    // Nothing half-written: no mirror beside the folder, the folder and the secret untouched.
    assert_eq!(tree.snapshot(), before);
}

/// Liveness, and the way out the message names: once the extra name is replaced by a copy,
/// the folder mirrors and awk reads the folder's own file.
#[tokio::test]
async fn a_hard_link_replaced_by_a_copy_as_the_refusal_says_mirrors_and_runs() {
    if !sandbox_available() {
        return;
    }
    let tree = TempTree::new("folder");
    let secret = tree.outside("secret", "outside\n");
    std::fs::hard_link(&secret, tree.root.join("hl")).unwrap();
    assert!(take_mirror(&tree).is_err());
    // `cp --remove-destination hl hl.copy && mv hl.copy hl`.
    std::fs::copy(tree.root.join("hl"), tree.root.join("hl.copy")).unwrap();
    std::fs::rename(tree.root.join("hl.copy"), tree.root.join("hl")).unwrap();
    std::fs::write(tree.root.join("hl"), "now the folder's own\n").unwrap();
    let (s, m) = script(&tree, "{ print FILENAME \": \" $0 }\n");
    let mirror = take_mirror(&tree).unwrap();
    let out = call(&mirror, json!({"program": "awk", "args": ["-f", s, "hl"]}))
        .await
        .unwrap();
    assert_eq!(out.stdout, "hl: now the folder's own\n");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "outside\n");
    assert!(alive_with(&m).is_empty());
}

/// Liveness: an ordinary folder (files, a subdirectory) still mirrors, runs awk and wc on the
/// mirror, and finalizes with nothing to write back.
#[tokio::test]
async fn an_ordinary_folder_still_mirrors_and_runs() {
    if !sandbox_available() {
        return;
    }
    let tree = TempTree::new("folder");
    tree.write("data.csv", "a,1\nb,2\n");
    tree.write("sub/notes.txt", "x\ny\n");
    let (s, m) = script(&tree, "BEGIN { FS = \",\" } { s += $2 } END { print s }\n");
    let mut mirror = take_mirror(&tree).unwrap();
    let out = call(
        &mirror,
        json!({"program": "awk", "args": ["-f", s, "data.csv"]}),
    )
    .await
    .unwrap();
    assert_eq!(out.stdout, "3\n");
    let out = call(
        &mirror,
        json!({"program": "wc", "args": ["-l", "notes.txt"], "cwdRelative": "sub"}),
    )
    .await
    .unwrap();
    assert_eq!(out.stdout, "2 notes.txt\n");
    let report = mirror.finalize().unwrap();
    assert!(
        report.applied.is_empty() && report.conflicts.is_empty(),
        "{report:?}"
    );
    assert!(alive_with(&m).is_empty());
}
