//! TRUST-3 in `run_command`: a file with another name elsewhere (uv's and pnpm's stores hard-link
//! into projects, a local clone its objects) is read-only in the sandbox, and the call still runs.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{args, call, fixture};
use run_command_tool::{DenyAllAsker, Mode, RunCommandOutput};

/// The call through the sandbox, or `None` (said) where this machine has none to give.
async fn ran(f: &common::Fixture, script: &str) -> Option<RunCommandOutput> {
    if !testkit::sandbox_available() {
        return None;
    }
    match call(
        args(&["sh", "-c", script]),
        &f.proj,
        &f.home,
        Mode::AllowAll,
        &DenyAllAsker,
    )
    .await
    {
        Ok(out) => Some(out),
        Err(e) if e.code().as_str() == "AGENT_EXEC_SANDBOX_UNAVAILABLE" => {
            eprintln!("skipped: no contained shell here: {e}");
            None
        }
        Err(e)
            if e.message()
                .contains("cannot make a private mount namespace") =>
        {
            assert!(e.message().contains("--link-mode=copy"), "{e}");
            eprintln!("skipped: no private mount namespace here; the call was refused: {e}");
            None
        }
        Err(e) => panic!("the call failed: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_uv_style_package_file_linked_from_the_cache_is_read_only_and_the_cache_never_changes() {
    let f = fixture();
    let cached = f.home.join(".cache/uv/archive-v0/abc/pkg/__init__.py");
    std::fs::create_dir_all(cached.parent().unwrap()).unwrap();
    std::fs::write(&cached, "VALUE = 1\n").unwrap();
    let installed = f
        .proj
        .join(".venv/lib/python3.11/site-packages/pkg/__init__.py");
    std::fs::create_dir_all(installed.parent().unwrap()).unwrap();
    std::fs::hard_link(&cached, &installed).unwrap();
    let Some(out) = ran(
        &f,
        "P=.venv/lib/python3.11/site-packages/pkg/__init__.py; cat $P; \
         echo 'import os' >> $P || echo write-denied; \
         cp /dev/null $P || echo truncate-denied; \
         echo built > out.txt && echo work-ok",
    )
    .await
    else {
        return;
    };
    assert!(out.executed, "{out:?}");
    assert!(out.output.contains("VALUE = 1"), "{out:?}");
    assert!(out.output.contains("write-denied"), "{out:?}");
    assert!(out.output.contains("truncate-denied"), "{out:?}");
    assert!(out.output.contains("work-ok"), "{out:?}");
    assert_eq!(std::fs::read_to_string(&cached).unwrap(), "VALUE = 1\n");
    let denial = out
        .denials
        .iter()
        .find(|d| d.path == installed.display().to_string())
        .unwrap_or_else(|| panic!("no denial names the linked file: {out:?}"));
    assert!(denial.reason.contains("hard link"), "{denial:?}");
    assert!(denial.remedy.contains("--link-mode=copy"), "{denial:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pnpm_style_tree_with_more_links_than_binds_stays_read_only_and_the_rest_writable() {
    let f = fixture();
    let store = f.outside.join("store");
    std::fs::create_dir_all(&store).unwrap();
    for p in 0..30 {
        let dir = f
            .proj
            .join(format!("node_modules/.pnpm/p{p}@1.0.0/node_modules/p{p}"));
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..8 {
            let original = store.join(format!("{p}-{i}"));
            std::fs::write(&original, "module.exports = 1\n").unwrap();
            std::fs::hard_link(&original, dir.join(format!("f{i}.js"))).unwrap();
        }
    }
    let Some(out) = ran(
        &f,
        "F=node_modules/.pnpm/p7@1.0.0/node_modules/p7/f3.js; cat $F; \
         echo x >> $F || echo write-denied; \
         mkdir -p node_modules/.cache dist && echo c > node_modules/.cache/x && \
         echo d > dist/index.js && echo build-ok",
    )
    .await
    else {
        return;
    };
    assert!(out.output.contains("module.exports = 1"), "{out:?}");
    assert!(out.output.contains("write-denied"), "{out:?}");
    assert!(out.output.contains("build-ok"), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(store.join("7-3")).unwrap(),
        "module.exports = 1\n"
    );
    assert!(f.proj.join("dist/index.js").exists());
}
