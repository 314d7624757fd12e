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
