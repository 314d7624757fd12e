//! Every refusal of `command` (CMD-3, CMD-4, CMD-8, CMD-9) through the public entry point: each
//! returns its stable code before anything runs — the fixture (scope and the paths beside it)
//! is byte-identical afterwards and the command, which would create `ran`, never started.
//! invariant 1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod support;

use std::path::Path;

use command_tool::{CommandArguments, DenyAll};
use serde_json::{Value, json};
use support::{Fixture, Recorder};
use toolscope::{CallContext, CancelReason, ErrorCode, ToolError};

const RUN: &str = "touch ran; touch \"$HOME/../../ran-outside\"";

fn fixture() -> Fixture {
    let f = Fixture::new();
    f.write("a.txt", "a\n");
    f.write("sub/b.txt", "b\n");
    f.write(".GIT/x", "git\n");
    std::os::unix::fs::symlink("sub", f.scope.join("linkdir")).unwrap();
    f.outside("ro/file.txt", "outside\n");
    f.outside("rw/file.txt", "outside\n");
    std::os::unix::fs::symlink(f.outside_dir().join("ro"), f.outside_dir().join("link")).unwrap();
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        f.outside_dir().join("fifo"),
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    f
}

/// `{{OUT}}` in the JSON text becomes the fixture's outside directory, `{{SCOPE}}` the scope.
fn args_for(f: &Fixture, template: &Value) -> Value {
    let text = template
        .to_string()
        .replace("{{OUT}}", &f.outside_dir().display().to_string())
        .replace("{{SCOPE}}", &f.scope.display().to_string());
    serde_json::from_str(&text).unwrap()
}

async fn refused(f: &Fixture, template: Value, approver: &dyn command_tool::Approver) -> ToolError {
    let before = f.snapshot();
    let args = args_for(f, &template);
    let (ctx, _h) = CallContext::standalone();
    let result = match CommandArguments::from_json(args.clone()) {
        Ok(parsed) => command_tool::command(parsed, f.lease.clone(), approver, &ctx).await,
        Err(e) => Err(e),
    };
    let err = result.expect_err(&format!("{args} must be refused"));
    assert!(!err.message().is_empty());
    assert_eq!(f.snapshot(), before, "{args} changed the files");
    assert!(!f.scope.join("ran").exists(), "{args} ran the command");
    err
}

/// Refused with `code`, and the approver was never asked (validation comes first).
async fn check(template: Value, code: ErrorCode) {
    let f = fixture();
    let approver = Recorder::allowing(&[]);
    let err = refused(&f, template.clone(), &approver).await;
    assert_eq!(err.code(), code, "{template}: {err}");
    assert!(
        approver.asked().is_empty(),
        "{template}: asked {:?}",
        approver.asked()
    );
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
    // CMD-4: shape and limits
    unknown_field_is_refused: json!({"command": RUN, "cwdRelative": "."}) => ExecArgumentsInvalid;
    unknown_extra_path_field_is_refused: json!({"command": RUN, "extraPaths": [{"path": "{{OUT}}/ro", "writable": true}]}) => ExecArgumentsInvalid;
    empty_command_is_refused: json!({"command": ""}) => ExecArgumentsInvalid;
    blank_command_is_refused: json!({"command": " \n\t"}) => ExecArgumentsInvalid;
    command_with_nul_is_refused: json!({"command": "touch ran\u{0}x"}) => ExecArgumentsInvalid;
    zero_timeout_is_refused: json!({"command": RUN, "timeoutMs": 0}) => ExecArgumentsInvalid;
    timeout_over_five_minutes_is_refused: json!({"command": RUN, "timeoutMs": 300_001}) => ExecArgumentsInvalid;
    // cwd (validated like RUN-4)
    absolute_cwd_is_refused: json!({"command": RUN, "cwd": "/tmp"}) => ExecPathInvalid;
    parent_cwd_is_refused: json!({"command": RUN, "cwd": ".."}) => ExecPathInvalid;
    git_cwd_in_any_case_is_refused: json!({"command": RUN, "cwd": ".GIT"}) => ExecPathInvalid;
    symlinked_cwd_is_refused: json!({"command": RUN, "cwd": "linkdir"}) => ExecPathInvalid;
    missing_cwd_is_refused: json!({"command": RUN, "cwd": "nope"}) => ExecPathInvalid;
    file_as_cwd_is_refused: json!({"command": RUN, "cwd": "a.txt"}) => ExecPathInvalid;
    // CMD-3: extra paths
    relative_extra_path_is_refused: json!({"command": RUN, "extraPaths": [{"path": "outside/ro"}]}) => ExecPathInvalid;
    missing_extra_path_is_refused: json!({"command": RUN, "extraPaths": [{"path": "{{OUT}}/nope"}]}) => ExecPathInvalid;
    extra_path_through_a_symlink_is_refused: json!({"command": RUN, "extraPaths": [{"path": "{{OUT}}/link/file.txt"}]}) => ExecPathInvalid;
    extra_path_that_is_a_symlink_is_refused: json!({"command": RUN, "extraPaths": [{"path": "{{OUT}}/link"}]}) => ExecPathInvalid;
    extra_path_with_parent_component_is_refused: json!({"command": RUN, "extraPaths": [{"path": "{{OUT}}/ro/../rw"}]}) => ExecPathInvalid;
    extra_path_inside_the_scope_is_refused: json!({"command": RUN, "extraPaths": [{"path": "{{SCOPE}}/sub", "write": true}]}) => ExecPathInvalid;
    extra_path_equal_to_the_scope_is_refused: json!({"command": RUN, "extraPaths": [{"path": "{{SCOPE}}"}]}) => ExecPathInvalid;
    root_as_extra_path_is_refused: json!({"command": RUN, "extraPaths": [{"path": "/"}]}) => ExecPathInvalid;
    fifo_as_extra_path_is_refused: json!({"command": RUN, "extraPaths": [{"path": "{{OUT}}/fifo"}]}) => ExecPathInvalid;
    git_extra_path_is_refused: json!({"command": RUN, "extraPaths": [{"path": "{{OUT}}/.Git/config"}]}) => ExecPathInvalid;
    duplicate_extra_path_is_refused: json!({"command": RUN, "extraPaths": [{"path": "{{OUT}}/ro"}, {"path": "{{OUT}}//ro/", "write": true}]}) => ExecArgumentsInvalid;
}

#[tokio::test]
async fn command_over_64_kib_is_refused() {
    let long = format!("{RUN}; #{}", "x".repeat(64 * 1024));
    check(json!({"command": long}), ErrorCode::ExecArgumentsInvalid).await;
}

#[tokio::test]
async fn seventeen_extra_paths_are_refused() {
    let paths: Vec<Value> = (0..17).map(|_| json!({"path": "{{OUT}}/ro"})).collect();
    check(
        json!({"command": RUN, "extraPaths": paths}),
        ErrorCode::ExecArgumentsInvalid,
    )
    .await;
}

#[tokio::test]
async fn unapproved_extra_path_is_a_permission_error_naming_it() {
    let f = fixture();
    let approver = Recorder::allowing(&[]);
    let err = refused(
        &f,
        json!({"command": RUN, "extraPaths": [{"path": "{{OUT}}/ro", "write": false}]}),
        &approver,
    )
    .await;
    let path = f.outside_dir().join("ro");
    assert_eq!(err.code(), ErrorCode::PermissionDenied, "{err}");
    assert!(err.message().contains(&path.display().to_string()), "{err}");
    assert_eq!(err.details()["path"], json!(path.display().to_string()));
    assert_eq!(approver.asked(), [(path, false)]);
}

#[tokio::test]
async fn a_non_interactive_host_refuses_every_extra_path() {
    let f = fixture();
    let err = refused(
        &f,
        json!({"command": RUN, "extraPaths": [{"path": "{{OUT}}/rw", "write": true}]}),
        &DenyAll,
    )
    .await;
    assert_eq!(err.code(), ErrorCode::PermissionDenied);
}

#[tokio::test]
async fn one_refused_path_among_approved_ones_stops_the_call() {
    let f = fixture();
    let ro = f.outside_dir().join("ro");
    let approver = Recorder::allowing(&[&ro]);
    let err = refused(
        &f,
        json!({"command": RUN, "extraPaths": [{"path": "{{OUT}}/ro"}, {"path": "{{OUT}}/rw", "write": true}]}),
        &approver,
    )
    .await;
    assert_eq!(err.code(), ErrorCode::PermissionDenied);
    assert!(err.message().contains("rw"), "{err}");
    assert_eq!(approver.asked().len(), 2);
}

/// Hard links on Linux (TRUST-3, CMD-9): the call runs, each linked file read-only.
#[cfg(target_os = "linux")]
async fn ran(
    f: &Fixture,
    template: Value,
    approver: &dyn command_tool::Approver,
) -> Option<command_tool::CommandOutput> {
    if !support::sandbox_available() {
        return None;
    }
    let (ctx, _h) = CallContext::standalone();
    let args = CommandArguments::from_json(args_for(f, &template)).unwrap();
    match command_tool::command(args, f.lease.clone(), approver, &ctx).await {
        Ok(out) => Some(out),
        // Without a private mount namespace nothing can keep them read-only: refused, saying
        // how to replace them.
        Err(e)
            if e.message()
                .contains("cannot make a private mount namespace") =>
        {
            assert!(e.message().contains("--link-mode=copy"), "{e}");
            eprintln!("skipped: no private mount namespace here; the call was refused: {e}");
            None
        }
        Err(e) if e.code() == ErrorCode::ExecSandboxUnavailable => {
            eprintln!("skipped: no shell can be contained here: {e}");
            None
        }
        Err(e) => panic!("the call failed: {e}"),
    }
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_hard_link_in_the_scope_is_read_only_and_its_other_name_never_changes() {
    let f = fixture();
    let outside = f.outside_dir().join("rw/file.txt");
    let before = std::fs::read(&outside).unwrap();
    std::fs::hard_link(&outside, f.scope.join("alias.txt")).unwrap();
    let Some(out) = ran(
        &f,
        json!({"command": "cat alias.txt >/dev/null && echo read-ok; \
                            echo evil >> alias.txt || echo write-denied; \
                            cp /dev/null alias.txt || echo cp-denied; \
                            rm -f alias.txt || echo rm-denied; \
                            echo new > fresh.txt && echo other-ok"}),
        &DenyAll,
    )
    .await
    else {
        return;
    };
    assert_eq!(
        out.stdout, "read-ok\nwrite-denied\ncp-denied\nrm-denied\nother-ok\n",
        "{out:?}"
    );
    assert_eq!(std::fs::read(&outside).unwrap(), before);
    let denial = out
        .denials
        .iter()
        .find(|d| d.path.ends_with("alias.txt"))
        .unwrap_or_else(|| panic!("no denial names alias.txt: {out:?}"));
    assert!(denial.reason.contains("hard link"), "{denial:?}");
    assert!(denial.remedy.contains("--link-mode=copy"), "{denial:?}");
}

/// A call pins the directories of its linked files: another call in the same folder, racing
/// this one's scan, could otherwise move a linked file where the scan had already looked.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_directories_above_a_hard_linked_file_cannot_be_moved() {
    let f = fixture();
    let outside = f.outside_dir().join("rw/file.txt");
    std::fs::create_dir_all(f.scope.join("r1/deep")).unwrap();
    std::fs::create_dir_all(f.scope.join("r2")).unwrap();
    std::fs::hard_link(&outside, f.scope.join("r1/deep/X")).unwrap();
    let Some(out) = ran(
        &f,
        json!({"command": "mv r1 r3 || echo r1-pinned; mv r1/deep r2/ || echo deep-pinned; \
                            mv r2 r4 && echo r2-free"}),
        &DenyAll,
    )
    .await
    else {
        return;
    };
    assert_eq!(out.stdout, "r1-pinned\ndeep-pinned\nr2-free\n", "{out:?}");
    assert!(f.scope.join("r1/deep/X").exists());
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn many_hard_links_are_kept_read_only_through_their_directory() {
    let f = fixture();
    let target = f.outside_dir().join("rw/file.txt");
    let before = std::fs::read(&target).unwrap();
    // A pnpm-style tree: more linked files than binds, in package directories.
    for p in 0..20 {
        for i in 0..10 {
            let dir = f
                .scope
                .join(format!("node_modules/.pnpm/p{p}@1/node_modules/p{p}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::hard_link(&target, dir.join(format!("f{i}.js"))).unwrap();
        }
    }
    let Some(out) = ran(
        &f,
        json!({"command": "cat node_modules/.pnpm/p3@1/node_modules/p3/f4.js >/dev/null && echo read-ok; \
                            echo x >> node_modules/.pnpm/p3@1/node_modules/p3/f4.js || echo write-denied; \
                            mkdir -p node_modules/.cache && echo c > node_modules/.cache/x && echo cache-ok"}),
        &DenyAll,
    )
    .await
    else {
        return;
    };
    assert_eq!(out.stdout, "read-ok\nwrite-denied\ncache-ok\n", "{out:?}");
    assert_eq!(std::fs::read(&target).unwrap(), before);
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_hard_link_in_a_writable_extra_directory_is_read_only() {
    let f = fixture();
    let original = f.outside_dir().join("ro/file.txt");
    let before = std::fs::read(&original).unwrap();
    std::fs::hard_link(&original, f.outside_dir().join("rw/ro-link.txt")).unwrap();
    let rw = f.outside_dir().join("rw");
    let approver = Recorder::allowing(&[&rw]);
    let Some(out) = ran(
        &f,
        json!({"command": "echo x >> {{OUT}}/rw/ro-link.txt || echo write-denied; echo y > {{OUT}}/rw/new.txt && echo new-ok",
               "extraPaths": [{"path": "{{OUT}}/rw", "write": true}]}),
        &approver,
    )
    .await
    else {
        return;
    };
    assert_eq!(out.stdout, "write-denied\nnew-ok\n", "{out:?}");
    assert_eq!(std::fs::read(&original).unwrap(), before);
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn hard_links_too_spread_to_keep_read_only_refuse_the_call_and_count_all() {
    let f = fixture();
    let target = f.outside_dir().join("rw/file.txt");
    for i in 0..130 {
        std::fs::hard_link(&target, f.scope.join(format!("alias-{i:03}.txt"))).unwrap();
    }
    let err = refused(&f, json!({"command": RUN}), &DenyAll).await;
    assert_eq!(err.code(), ErrorCode::ExecPathInvalid);
    assert_eq!(err.details()["hardLinkCount"], json!(130));
    assert_eq!(err.details()["hardLinks"].as_array().unwrap().len(), 20);
    assert!(err.message().contains("and 110 more"), "{err}");
    assert!(err.message().contains("--link-mode=copy"), "{err}");
}

#[cfg(not(target_os = "linux"))]
#[tokio::test]
async fn hard_link_in_the_scope_is_refused_before_anyone_is_asked() {
    let f = fixture();
    let outside = f.outside_dir().join("rw/file.txt");
    std::fs::hard_link(&outside, f.scope.join("alias.txt")).unwrap();
    let approver = Recorder::allowing(&[&f.outside_dir().join("ro")]);
    let err = refused(
        &f,
        json!({"command": RUN, "extraPaths": [{"path": "{{OUT}}/ro"}]}),
        &approver,
    )
    .await;
    assert_eq!(err.code(), ErrorCode::ExecPathInvalid, "{err}");
    assert!(err.message().contains("alias.txt"), "{err}");
    assert_eq!(err.details()["hardLinkCount"], json!(1));
    assert!(approver.asked().is_empty());
}

#[cfg(not(target_os = "linux"))]
#[tokio::test]
async fn hard_link_refusal_lists_at_most_twenty_paths_and_counts_all() {
    let f = fixture();
    let target = f.outside_dir().join("rw/file.txt");
    for i in 0..25 {
        std::fs::hard_link(&target, f.scope.join(format!("alias-{i:02}.txt"))).unwrap();
    }
    let err = refused(&f, json!({"command": RUN}), &DenyAll).await;
    assert_eq!(err.code(), ErrorCode::ExecPathInvalid);
    assert_eq!(err.details()["hardLinkCount"], json!(25));
    assert_eq!(err.details()["hardLinks"].as_array().unwrap().len(), 20);
    assert!(err.message().contains("and 5 more"), "{err}");
    assert!(err.message().contains("alias-19.txt") && !err.message().contains("alias-20.txt"));
}

#[cfg(not(target_os = "linux"))]
#[tokio::test]
async fn hard_link_in_a_writable_extra_directory_is_refused() {
    let f = fixture();
    std::fs::hard_link(
        f.outside_dir().join("ro/file.txt"),
        f.outside_dir().join("rw/ro-link.txt"),
    )
    .unwrap();
    let rw = f.outside_dir().join("rw");
    let approver = Recorder::allowing(&[&rw]);
    let err = refused(
        &f,
        json!({"command": RUN, "extraPaths": [{"path": "{{OUT}}/rw", "write": true}]}),
        &approver,
    )
    .await;
    assert_eq!(err.code(), ErrorCode::ExecPathInvalid, "{err}");
    assert!(err.message().contains("ro-link.txt"), "{err}");
    assert!(approver.asked().is_empty());
}

#[cfg(not(target_os = "linux"))]
#[tokio::test]
async fn hard_linked_writable_extra_file_is_refused() {
    let f = fixture();
    std::fs::hard_link(
        f.outside_dir().join("rw/file.txt"),
        f.outside_dir().join("other.txt"),
    )
    .unwrap();
    let file = f.outside_dir().join("rw/file.txt");
    let approver = Recorder::allowing(&[&file]);
    let err = refused(
        &f,
        json!({"command": RUN, "extraPaths": [{"path": "{{OUT}}/rw/file.txt", "write": true}]}),
        &approver,
    )
    .await;
    assert_eq!(err.code(), ErrorCode::ExecPathInvalid, "{err}");
}

#[tokio::test]
async fn a_cancelled_call_runs_nothing() {
    let f = fixture();
    let before = f.snapshot();
    let (ctx, handle) = CallContext::standalone();
    handle.cancel(CancelReason::TurnEnded);
    let args = CommandArguments::from_json(json!({"command": RUN})).unwrap();
    let err = command_tool::command(args, f.lease.clone(), &DenyAll, &ctx)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ExecCancelled);
    assert_eq!(f.snapshot(), before);
}

/// An approver that never answers, like a user who walked away from the prompt.
struct Never;

impl command_tool::Approver for Never {
    fn approve_extra_path<'a>(&'a self, _: &'a Path, _: bool) -> command_tool::Approval<'a> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn cancelling_a_pending_approval_ends_the_call_without_running() {
    let f = fixture();
    let before = f.snapshot();
    let (ctx, handle) = CallContext::standalone();
    let args = CommandArguments::from_json(args_for(
        &f,
        &json!({"command": RUN, "extraPaths": [{"path": "{{OUT}}/ro"}]}),
    ))
    .unwrap();
    let cancel = async {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        handle.cancel(CancelReason::AccountSwitched);
    };
    let (result, ()) = tokio::join!(
        command_tool::command(args, f.lease.clone(), &Never, &ctx),
        cancel
    );
    assert_eq!(result.unwrap_err().code(), ErrorCode::ExecCancelled);
    assert_eq!(f.snapshot(), before);
    assert!(!f.scope.join("ran").exists());
}

#[tokio::test]
async fn a_replaced_work_root_runs_nothing() {
    let f = fixture();
    std::fs::rename(&f.scope, f.dir.path().join("moved")).unwrap();
    std::fs::create_dir(&f.scope).unwrap();
    let before = f.snapshot();
    let (ctx, _h) = CallContext::standalone();
    let args = CommandArguments::from_json(json!({"command": RUN})).unwrap();
    let err = command_tool::command(args, f.lease.clone(), &DenyAll, &ctx)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ExecCancelled, "{err}");
    assert_eq!(f.snapshot(), before);
    assert!(!f.dir.path().join("moved/ran").exists());
}

#[tokio::test]
async fn unreadable_directory_in_the_scope_fails_the_hard_link_scan_closed() {
    if support::rerun_unprivileged(
        "unreadable_directory_in_the_scope_fails_the_hard_link_scan_closed",
    ) {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    std::fs::create_dir(f.scope.join("locked")).unwrap();
    std::fs::set_permissions(
        f.scope.join("locked"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    let err = refused(&f, json!({"command": RUN}), &DenyAll).await;
    assert_eq!(err.code(), ErrorCode::ExecPathInvalid, "{err}");
    assert!(err.message().contains("locked"), "{err}");
    std::fs::set_permissions(
        f.scope.join("locked"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
}

#[tokio::test]
async fn a_host_cannot_replace_the_fixed_variables() {
    let f = fixture();
    let before = f.snapshot();
    for (name, value) in [
        ("PATH", "/tmp"),
        ("HOME", "/root"),
        ("1X", "v"),
        ("A-B", "v"),
        ("", "v"),
        ("OK", "a\0b"),
    ] {
        let (ctx, _h) = CallContext::standalone();
        let args = CommandArguments::from_json(json!({"command": RUN})).unwrap();
        let options = command_tool::CommandOptions::default().env(name, value);
        let err = command_tool::command_with(args, f.lease.clone(), &DenyAll, &ctx, &options)
            .await
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::ExecArgumentsInvalid, "{name}");
    }
    assert_eq!(f.snapshot(), before);
    assert!(!f.scope.join("ran").exists());
}
