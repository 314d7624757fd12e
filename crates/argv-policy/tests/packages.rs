//! Watcher detection through `package.json` scripts (RC-15): nearest file, pre/post scripts,
//! nesting up to four levels (the named script is level 1), cycles, and scripts inside `sh -c`.

// Helpers outside #[test] fns may unwrap too: a panic is a test failure, which is what we want.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use argv_policy::{Context, Decision, Mode, Policy, RefuseCode, RunCommandArgs, decide};
use serde_json::json;

fn project(scripts: serde_json::Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let pkg = json!({"name": "p", "version": "1.0.0", "scripts": scripts});
    std::fs::write(dir.path().join("package.json"), pkg.to_string()).unwrap();
    dir
}

fn decide_in(dir: &Path, argv: &[&str]) -> Decision {
    let ctx = Context::new(dir, dir.parent().unwrap());
    decide(
        &RunCommandArgs::new(argv.iter().copied()),
        &Policy::defaults(Mode::Auto),
        &ctx,
    )
}

#[track_caller]
fn assert_watcher(dir: &Path, argv: &[&str]) -> String {
    match decide_in(dir, argv) {
        Decision::Refuse { code, message } => {
            assert_eq!(code, RefuseCode::Watcher, "{argv:?}: {message}");
            assert!(message.contains("background_command"), "{message}");
            assert!(message.contains("timeout_min"), "{message}");
            message
        }
        d => panic!("{argv:?} should be refused as a watcher, got {d:?}"),
    }
}

#[track_caller]
fn assert_runs(dir: &Path, argv: &[&str]) {
    let d = decide_in(dir, argv);
    assert!(
        matches!(d, Decision::Run { .. }),
        "{argv:?} should run, got {d:?}"
    );
}

#[test]
fn a_script_that_runs_a_watcher_is_refused_by_every_package_manager() {
    let p =
        project(json!({"dev": "vite build --watch", "build": "tsc -p .", "start": "nodemon ."}));
    let msg = assert_watcher(p.path(), &["npm", "run", "dev"]);
    assert!(msg.contains("vite build --watch"), "{msg}");
    assert_watcher(p.path(), &["npm", "run-script", "dev"]);
    assert_watcher(p.path(), &["npm", "start"]);
    assert_watcher(p.path(), &["pnpm", "dev"]);
    assert_watcher(p.path(), &["pnpm", "run", "dev"]);
    assert_watcher(p.path(), &["yarn", "dev"]);
    assert_watcher(p.path(), &["yarn", "run", "dev"]);
    assert_watcher(p.path(), &["bun", "run", "dev"]);
    assert_watcher(p.path(), &["npm", "--silent", "run", "dev"]);
    assert_runs(p.path(), &["npm", "run", "build"]);
    assert_runs(p.path(), &["npm", "run", "missing"]);
    assert_runs(p.path(), &["npm", "install"]);
    assert_runs(p.path(), &["yarn", "install"]);
}

#[test]
fn scripts_inside_sh_c_and_launchers_are_resolved_too() {
    let p = project(json!({"dev": "tsc -w"}));
    assert_watcher(p.path(), &["sh", "-c", "npm ci && npm run dev"]);
    assert_watcher(p.path(), &["bash", "-c", "cd . && pnpm dev | tee log"]);
    assert_watcher(p.path(), &["env", "NODE_ENV=dev", "npm", "run", "dev"]);
    assert_watcher(p.path(), &["timeout", "60", "yarn", "dev"]);
}

#[test]
fn the_nearest_package_json_above_the_working_directory_is_used() {
    let p = project(json!({"dev": "chokidar 'src/**' -c make"}));
    let sub = p.path().join("packages/app");
    std::fs::create_dir_all(&sub).unwrap();
    assert_watcher(&sub, &["npm", "run", "dev"]);
    // A nearer package.json without the script hides the outer one, as npm does.
    std::fs::write(sub.join("package.json"), r#"{"scripts": {"dev": "tsc"}}"#).unwrap();
    assert_runs(&sub, &["npm", "run", "dev"]);
    // --prefix / -C / --cwd point at another package.
    assert_watcher(&sub, &["npm", "--prefix", "../..", "run", "dev"]);
    assert_watcher(&sub, &["pnpm", "-C", "../..", "dev"]);
    assert_watcher(&sub, &["yarn", "--cwd=../..", "dev"]);
}

#[test]
fn nested_scripts_are_followed_four_levels_and_no_further() {
    // Level 1 is the script named in the argv; its watcher four levels down is found.
    let p = project(json!({
        "a": "npm run b", "b": "npm run c", "c": "npm run d", "d": "tsc --watch",
    }));
    let msg = assert_watcher(p.path(), &["npm", "run", "a"]);
    assert!(msg.contains("`b`") && msg.contains("`d`"), "{msg}");
    // A watcher at level 5 is beyond the limit of seed 001 (4 since v1.1.2).
    let p = project(json!({
        "a": "npm run b", "b": "npm run c", "c": "npm run d", "d": "npm run e",
        "e": "tsc --watch",
    }));
    assert_runs(p.path(), &["npm", "run", "a"]);
    assert_watcher(p.path(), &["npm", "run", "b"]);
}

#[test]
fn cycles_end_because_each_script_is_traced_once() {
    let p = project(json!({"a": "npm run b && tsc", "b": "npm run a", "self": "npm run self"}));
    assert_runs(p.path(), &["npm", "run", "a"]);
    assert_runs(p.path(), &["npm", "run", "self"]);
    let p = project(json!({"a": "npm run b", "b": "npm run a && npm run w", "w": "nodemon"}));
    assert_watcher(p.path(), &["npm", "run", "a"]);
}

#[test]
fn pre_and_post_scripts_and_command_line_arguments_are_traced() {
    let p = project(json!({"predev": "nodemon x", "dev": "tsc"}));
    assert_watcher(p.path(), &["npm", "run", "dev"]);
    let p = project(json!({"dev": "concurrently \"tsc -w\" \"vite\""}));
    assert_watcher(p.path(), &["npm", "run", "dev"]);
    let p = project(json!({"dev": "sh -c 'webpack --watch'"}));
    assert_watcher(p.path(), &["npm", "run", "dev"]);
    let p = project(json!({"dev": "npx tsc -w"}));
    assert_watcher(p.path(), &["npm", "run", "dev"]);
    // A body the parser refuses is still searched word by word.
    let p = project(json!({"dev": "tsc --watch & (unclosed"}));
    assert_watcher(p.path(), &["npm", "run", "dev"]);
}

#[test]
fn an_unreadable_or_odd_package_json_is_not_a_watcher() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("package.json"), "not json").unwrap();
    assert_runs(dir.path(), &["npm", "run", "dev"]);
    std::fs::write(
        dir.path().join("package.json"),
        r#"{"scripts": {"dev": 5}}"#,
    )
    .unwrap();
    assert_runs(dir.path(), &["npm", "run", "dev"]);
    std::fs::write(dir.path().join("package.json"), r#"{"scripts": []}"#).unwrap();
    assert_runs(dir.path(), &["npm", "run", "dev"]);
}

/// RC-15, BG-2: background_command is the one place a watcher runs; everything else about the
/// decision stays (a denied command inside the script is still refused).
#[test]
fn watchers_run_where_background_command_allows_them_and_nowhere_else() {
    let dir = project(json!({"dev": "vite --watch", "bad": "sh -c 'su root'"}));
    let mut ctx = Context::new(dir.path(), dir.path().parent().unwrap());
    ctx.watchers_allowed = true;
    let policy = Policy::defaults(Mode::Auto);
    for argv in [
        &["npm", "run", "dev"][..],
        &["cargo", "watch", "-x", "test"],
        &["tsc", "--watch"],
        &["sh", "-c", "nodemon server.js"],
    ] {
        assert_watcher(dir.path(), argv);
        let d = decide(&RunCommandArgs::new(argv.iter().copied()), &policy, &ctx);
        assert!(matches!(d, Decision::Run { .. }), "{argv:?}: {d:?}");
    }
    let d = decide(&RunCommandArgs::new(["sh", "-c", "su root"]), &policy, &ctx);
    assert!(matches!(d, Decision::Refuse { .. }), "{d:?}");
}
