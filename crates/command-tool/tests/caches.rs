//! TRUST-3 in `command --toolchains`: the toolchains' caches (`~/.cargo/registry`, `~/.cargo/git`,
//! `~/go/pkg/mod`) are written through a private view for the call; the user's never change.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use command_tool::{CommandArguments, CommandOptions, DenyAll};
use serde_json::json;
use support::{Fixture, sandbox_available};
use toolscope::CallContext;

fn files(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if e.file_type().unwrap().is_dir() {
            out.extend(files(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn the_cargo_registry_is_written_in_the_calls_view_and_never_changes() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let home = tempfile::tempdir().unwrap();
    let home = home.path().canonicalize().unwrap();
    let krate = home.join(".cargo/registry/src/index.crates.io-1/cfg-if-1.0.5");
    std::fs::create_dir_all(&krate).unwrap();
    std::fs::write(krate.join("lib.rs"), "pub fn x() {}\n").unwrap();
    std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    let before = files(&home.join(".cargo"));
    let script = format!(
        "K={k}; echo 'fn main() {{}}' > $K/build.rs && cat $K/build.rs && \
         mkdir -p {r}/cache && echo crate > {r}/cache/x.crate && echo unpacked; \
         echo x > {b}/cargo || echo bin-read-only",
        k = krate.display(),
        r = home.join(".cargo/registry").display(),
        b = home.join(".cargo/bin").display(),
    );
    let (ctx, _h) = CallContext::standalone();
    let args = CommandArguments::from_json(json!({ "command": script })).unwrap();
    let options = CommandOptions::default().toolchains(&home);
    let out =
        match command_tool::command_with(args, f.lease.clone(), &DenyAll, &ctx, &options).await {
            Ok(out) => out,
            Err(e) if e.code() == toolscope::ErrorCode::ExecSandboxUnavailable => {
                eprintln!("skipped: no shell can be contained here: {e}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
    assert_eq!(
        out.stdout, "fn main() {}\nunpacked\nbin-read-only\n",
        "{out:?}"
    );
    assert_eq!(
        files(&home.join(".cargo")),
        before,
        "the user's ~/.cargo changed"
    );
    assert_eq!(out.caches.changed, 2, "{:?}", out.caches);
}

/// TRUST-3, CMD-9 on Linux: a local clone hard-links its objects to the source's; `command`
/// works in it (a commit) and the source's objects never change.
#[tokio::test]
async fn a_local_clone_with_hard_linked_objects_commits_and_the_source_never_changes() {
    let git_here = std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !sandbox_available() || !git_here {
        eprintln!("skipped: no sandbox or no git here");
        return;
    }
    let source = tempfile::tempdir().unwrap();
    let src = source.path().join("src");
    let git = |dir: &std::path::Path, args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    std::fs::create_dir_all(&src).unwrap();
    git(&src, &["init", "-q"]);
    std::fs::write(src.join("a.txt"), "one\n").unwrap();
    git(&src, &["add", "a.txt"]);
    git(&src, &["commit", "-qm", "one"]);
    let f = Fixture::new();
    git(
        &f.scope,
        &["clone", "-q", &src.display().to_string(), "clone"],
    );
    let objects_before = files(&src.join(".git/objects"));
    let (ctx, _h) = CallContext::standalone();
    let args = CommandArguments::from_json(json!({
        "command": "cd clone && echo two >> a.txt && \
                    git -c user.name=t -c user.email=t@t commit -qam two && git log --oneline | wc -l"
    }))
    .unwrap();
    let out = match command_tool::command(args, f.lease.clone(), &DenyAll, &ctx).await {
        Ok(out) => out,
        Err(e) if e.code() == toolscope::ErrorCode::ExecSandboxUnavailable => {
            eprintln!("skipped: no shell can be contained here: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.stdout.trim(), "2", "{out:?}");
    assert_eq!(files(&src.join(".git/objects")), objects_before);
}
