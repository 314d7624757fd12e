//! End to end: `/bin/sh -c` really runs under the sandbox through `command_tool::command`
//! (CMD-1, CMD-2, CMD-3, CMD-5, CMD-6, CMD-8, CMD-13). Each test skips loudly when the machine
//! cannot sandbox; each one that starts background processes marks them `sleep 100.<digits>`
//! and checks that none survived (house rule 4).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod support;

use std::path::PathBuf;
use std::time::Duration;

use command_tool::{Approver, CommandArguments, CommandOutput, DenyAll, Status};
use serde_json::{Value, json};
use support::{Fixture, Recorder, alive_with, marker, sandbox_available};
use toolscope::{CallContext, CancelReason, ErrorCode, ToolError};

async fn call_with(
    f: &Fixture,
    args: Value,
    approver: &dyn Approver,
) -> Result<CommandOutput, ToolError> {
    let (ctx, _h) = CallContext::standalone();
    let args = CommandArguments::from_json(args).unwrap();
    command_tool::command(args, f.lease.clone(), approver, &ctx).await
}

async fn call(f: &Fixture, command: &str) -> CommandOutput {
    call_with(f, json!({"command": command}), &DenyAll)
        .await
        .unwrap()
}

#[tokio::test]
async fn exit_code_stdout_and_stderr_are_returned_as_a_result() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let out = call(&f, "echo hi; echo oops >&2; exit 3").await;
    assert!(out.sandbox.contains("enforced (Landlock ABI"), "{out:?}");
    assert_eq!(
        out,
        CommandOutput {
            stdout: "hi\n".into(),
            stderr: "oops\n".into(),
            exit_code: Some(3),
            status: Status::Exited,
            truncated: false,
            partial_execution: false,
            descendants_stopped: 0,
            sandbox: out.sandbox.clone(),
            limit_exceeded: None,
            denials: Vec::new(),
            git: gitstage::Report::default(),
            executable_changes: Vec::new(),
            caches: exec::CacheReport::default(),
        }
    );
    assert!(out.sandbox.contains("limits "), "{out:?}");
}

#[tokio::test]
async fn the_main_job_pipeline_runs_in_the_cwd() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("data/a.csv", "1\n2\n3\n");
    f.write("data/b.csv", "1\n");
    let out = call_with(
        &f,
        json!({"command": "wc -l *.csv | sort -n", "cwd": "data"}),
        &DenyAll,
    )
    .await
    .unwrap();
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().map(str::trim).collect();
    assert_eq!(lines, ["1 b.csv", "3 a.csv", "4 total"]);
}

#[tokio::test]
async fn environment_is_exactly_cmd_13() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let out = call(&f, "env; echo \"stdin: $(cat | wc -c)\"").await;
    let mut vars: Vec<(&str, &str)> = out
        .stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| !["PWD", "SHLVL", "_", "OLDPWD"].contains(k))
        .collect();
    vars.sort_unstable();
    let names: Vec<&str> = vars.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        names,
        ["HOME", "LANG", "LC_ALL", "PATH", "TERM", "TMPDIR"],
        "{}",
        out.stdout
    );
    let get = |k: &str| vars.iter().find(|(n, _)| *n == k).unwrap().1;
    assert_eq!(get("PATH"), "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin");
    assert_eq!(get("LANG"), "C.UTF-8");
    assert_eq!(get("TERM"), "dumb");
    let home = PathBuf::from(get("HOME"));
    assert!(home.ends_with("home") && !home.starts_with(&f.scope));
    assert_eq!(
        PathBuf::from(get("TMPDIR")),
        home.parent().unwrap().join("tmp")
    );
    assert!(
        out.stdout.contains("stdin: 0"),
        "stdin reads see EOF: {}",
        out.stdout
    );
    assert!(
        !home.parent().unwrap().exists(),
        "the call's temp dir is removed"
    );
}

#[tokio::test]
async fn home_and_tmpdir_are_writable_and_removed_even_when_locked() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let out = call(
        &f,
        "echo x > \"$HOME/f\" && mkdir \"$TMPDIR/d\" && touch \"$TMPDIR/d/f\" && chmod 000 \"$TMPDIR/d\" && echo \"$TMPDIR\"",
    )
    .await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    let tmp = PathBuf::from(out.stdout.trim());
    assert!(
        !tmp.parent().unwrap().exists(),
        "left behind: {}",
        tmp.display()
    );
}

#[tokio::test]
async fn stdout_flood_keeps_64_kib_and_the_command_finishes() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let out = call(&f, "head -c 300000 /dev/zero | tr '\\0' x; echo done >&2").await;
    assert_eq!(out.stdout.len(), 64 * 1024);
    assert!(out.stdout.bytes().all(|b| b == b'x'));
    assert_eq!(out.stderr, "done\n");
    assert!(out.truncated);
    assert_eq!(
        (out.status, out.exit_code, out.partial_execution),
        (Status::Exited, Some(0), false)
    );
}

#[tokio::test]
async fn timeout_stops_the_shell_and_its_descendants() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let m = marker();
    let run = call_with(
        &f,
        json!({"command": format!("sleep {m} & sleep {m} & echo started; wait"), "timeoutMs": 400}),
        &DenyAll,
    );
    let probe = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        alive_with(&m).len()
    };
    let (out, running) = tokio::join!(run, probe);
    let out = out.unwrap();
    // The shell's own command line carries the marker too: sh + 2 sleeps.
    assert_eq!(running, 3);
    assert_eq!(out.status, Status::TimedOut);
    assert_eq!(out.exit_code, None);
    assert!(out.partial_execution);
    assert_eq!(out.descendants_stopped, 2);
    assert_eq!(out.stdout, "started\n");
    assert!(alive_with(&m).is_empty(), "survivors: {:?}", alive_with(&m));
}

#[tokio::test]
async fn background_jobs_are_stopped_when_the_shell_exits() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let m = marker();
    let out = call(&f, &format!("sleep {m} & setsid sleep {m} & echo left")).await;
    assert_eq!((out.status, out.exit_code), (Status::Exited, Some(0)));
    assert!(!out.partial_execution);
    assert_eq!(out.stdout, "left\n");
    assert!(out.descendants_stopped >= 1, "{out:?}");
    assert!(alive_with(&m).is_empty(), "survivors: {:?}", alive_with(&m));
}

#[tokio::test]
async fn cancellation_returns_a_cancelled_partial_result() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let m = marker();
    let (ctx, handle) = CallContext::standalone();
    let args =
        CommandArguments::from_json(json!({"command": format!("echo begun; sleep {m}")})).unwrap();
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let running = alive_with(&m).len();
        handle.cancel(CancelReason::Requested);
        running
    };
    let (out, running) = tokio::join!(
        command_tool::command(args, f.lease.clone(), &DenyAll, &ctx),
        cancel
    );
    let out = out.unwrap();
    assert_eq!(running, 2, "sh and sleep were running when cancelled");
    assert_eq!(
        (out.status, out.exit_code, out.partial_execution),
        (Status::Cancelled, None, true)
    );
    assert_eq!(out.stdout, "begun\n");
    assert!(alive_with(&m).is_empty());
}

#[tokio::test]
async fn a_revocation_while_running_is_the_permission_error() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let m = marker();
    let (ctx, handle) = CallContext::standalone();
    let args = CommandArguments::from_json(json!({"command": format!("sleep {m}")})).unwrap();
    let revoke = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        handle.cancel(CancelReason::Revoked(
            toolscope::Denial::AuthorityUnavailable,
        ));
    };
    let (out, ()) = tokio::join!(
        command_tool::command(args, f.lease.clone(), &DenyAll, &ctx),
        revoke
    );
    assert_eq!(out.unwrap_err().code(), ErrorCode::PermissionDenied);
    assert!(alive_with(&m).is_empty());
}

#[tokio::test]
async fn a_work_root_replaced_while_sleep_runs_cancels_the_call() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let m = marker();
    let scope = f.scope.clone();
    let moved = f.dir.path().join("moved");
    let swap = async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        std::fs::rename(&scope, &moved).unwrap();
        std::fs::create_dir(&scope).unwrap();
    };
    let (out, ()) = tokio::join!(
        call_with(
            &f,
            json!({"command": format!("echo before; sleep {m}")}),
            &DenyAll
        ),
        swap
    );
    let err = out.unwrap_err();
    assert_eq!(err.code(), ErrorCode::ExecCancelled, "{err}");
    assert_eq!(err.details()["status"], json!("cancelled"));
    assert_eq!(err.details()["partialExecution"], json!(true));
    assert_eq!(err.details()["stdout"], json!("before\n"));
    assert!(alive_with(&m).is_empty(), "survivors: {:?}", alive_with(&m));
}

#[tokio::test]
async fn a_shell_killed_by_a_signal_is_signaled() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let out = call(&f, "kill -9 $$").await;
    assert_eq!(
        (out.status, out.exit_code, out.partial_execution),
        (Status::Signaled, None, false)
    );
}

#[tokio::test]
async fn extra_paths_are_read_only_or_writable_as_approved() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.outside("ro/in.txt", "read me\n");
    f.outside("rw/keep.txt", "k\n");
    let ro = f.outside_dir().join("ro");
    let rw = f.outside_dir().join("rw");
    let approver = Recorder::allowing(&[&ro, &rw]);
    let script = format!(
        "cat '{ro}/in.txt'; echo new > '{ro}/new.txt' 2>/dev/null || echo ro-denied; \
         echo written > '{rw}/out.txt' && echo rw-ok",
        ro = ro.display(),
        rw = rw.display()
    );
    let out = call_with(
        &f,
        json!({"command": script, "extraPaths": [
            {"path": ro.display().to_string()},
            {"path": rw.display().to_string(), "write": true}
        ]}),
        &approver,
    )
    .await
    .unwrap();
    assert_eq!(out.stdout, "read me\nro-denied\nrw-ok\n", "{out:?}");
    assert!(!ro.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(rw.join("out.txt")).unwrap(),
        "written\n"
    );
    assert_eq!(approver.asked(), [(ro, false), (rw, true)]);
}

#[tokio::test]
async fn outside_the_scope_is_denied_and_hard_links_cannot_be_made() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("a.txt", "a\n");
    let secret = f.outside("secret.txt", "secret\n");
    let script = format!(
        "cat '{s}' 2>/dev/null || echo read-denied; echo x > '{d}/new.txt' 2>/dev/null || echo write-denied; \
         ln a.txt b.txt 2>/dev/null || echo link-denied; ls ~root >/dev/null 2>&1 || echo home-denied; \
         echo in > inside.txt && echo inside-ok",
        s = secret.display(),
        d = f.outside_dir().display()
    );
    let out = call(&f, &script).await;
    assert_eq!(
        out.stdout, "read-denied\nwrite-denied\nlink-denied\nhome-denied\ninside-ok\n",
        "{out:?}"
    );
    assert!(!f.outside_dir().join("new.txt").exists());
    assert!(!f.scope.join("b.txt").exists());
    assert!(f.scope.join("inside.txt").exists());
}

#[tokio::test]
async fn a_host_passes_named_variables_through_and_nothing_else() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let (ctx, _h) = CallContext::standalone();
    let args = CommandArguments::from_json(json!({"command": "echo \"$GREETING|$PATH\""})).unwrap();
    let options = command_tool::CommandOptions::default().env("GREETING", "hello there");
    let out = command_tool::command_with(args, f.lease.clone(), &DenyAll, &ctx, &options)
        .await
        .unwrap();
    assert_eq!(
        out.stdout,
        "hello there|/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin\n"
    );
}

#[tokio::test]
async fn a_single_file_can_be_granted_read_only_or_writable() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let ro = f.outside("ro.txt", "ro\n");
    let rw = f.outside("rw.txt", "rw\n");
    let approver = Recorder::allowing(&[&ro, &rw]);
    let script = format!(
        "cat '{ro}' '{rw}'; echo more >> '{ro}' 2>/dev/null || echo ro-denied; echo more >> '{rw}' && echo rw-ok; \
         cat '{dir}/other.txt' 2>/dev/null || echo sibling-denied",
        ro = ro.display(),
        rw = rw.display(),
        dir = f.outside_dir().display()
    );
    f.outside("other.txt", "no\n");
    let out = call_with(
        &f,
        json!({"command": script, "extraPaths": [
            {"path": ro.display().to_string()},
            {"path": rw.display().to_string(), "write": true}
        ]}),
        &approver,
    )
    .await
    .unwrap();
    assert_eq!(
        out.stdout, "ro\nrw\nro-denied\nrw-ok\nsibling-denied\n",
        "{out:?}"
    );
    assert_eq!(std::fs::read_to_string(&ro).unwrap(), "ro\n");
    assert_eq!(std::fs::read_to_string(&rw).unwrap(), "rw\nmore\n");
}

#[tokio::test]
async fn the_calls_home_and_temp_dir_are_private_to_its_user() {
    // HOME lives in the call's temp dir; other local users must not look inside.
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let out = call(&f, "stat -c %a \"$HOME/..\" \"$HOME\" \"$TMPDIR\"").await;
    assert_eq!(out.stdout, "700\n700\n700\n", "{out:?}");
}

/// The system headers, OpenSSL's configuration and the helpers of
/// programs under /usr/local are part of the runtime a shell command sees, so a C compile, a
/// TLS client's start and a locally built git's `commit` work — while `/etc/ssl/private` and
/// `/etc/shadow` stay unreadable (the escape suite holds the rest).
#[tokio::test]
async fn a_c_compile_openssl_config_and_git_commit_work_and_private_keys_stay_private() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write(
        "m.c",
        "#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n",
    );
    if std::path::Path::new("/usr/bin/cc").exists() {
        let out = call(&f, "cc -O2 -c m.c -o m.o && echo compiled").await;
        assert_eq!(out.stdout, "compiled\n", "{out:?}");
    } else {
        eprintln!("skipped: no C compiler at /usr/bin/cc");
    }
    if std::path::Path::new("/etc/ssl/openssl.cnf").exists() {
        let out = call(&f, "cat /etc/ssl/openssl.cnf >/dev/null && echo read").await;
        assert_eq!(out.stdout, "read\n", "{out:?}");
    }
    if which_git() {
        let out = call(
            &f,
            "git init -q repo && cd repo && echo x > f && git add f && \
             git -c user.name=a -c user.email=a@example.com commit -qm first && echo committed",
        )
        .await;
        assert_eq!(out.stdout, "committed\n", "{out:?}");
        assert!(!out.stderr.contains("cannot exec"), "{out:?}");
    } else {
        eprintln!("skipped: git is not installed");
    }
    let out = call(
        &f,
        "ls /etc/ssl/private >/dev/null 2>&1 && echo listed; cat /etc/shadow >/dev/null 2>&1 && echo read; true",
    )
    .await;
    assert_eq!(out.stdout, "", "{out:?}");
}

fn which_git() -> bool {
    ["/usr/bin/git", "/usr/local/bin/git"]
        .iter()
        .any(|p| std::path::Path::new(p).exists())
}

/// An approved read-only extra path runs its programs (`~/.cargo` runs `cargo`) and
/// stays unwritable.
#[tokio::test]
async fn a_read_only_extra_path_runs_its_programs_and_stays_read_only() {
    use std::os::unix::fs::PermissionsExt;
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let tool = f.outside("tools/bin/tool", "#!/bin/sh\necho tool-ran\n");
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tools = f.outside_dir().join("tools");
    let approver = Recorder::allowing(&[&tools]);
    let script = format!(
        "'{tools}/bin/tool'; echo x > '{tools}/bin/new' 2>/dev/null || echo ro-denied",
        tools = tools.display()
    );
    let out = call_with(
        &f,
        json!({"command": script, "extraPaths": [{"path": tools.display().to_string()}]}),
        &approver,
    )
    .await
    .unwrap();
    assert_eq!(out.stdout, "tool-ran\nro-denied\n", "{out:?}");
    assert!(!tools.join("bin/new").exists());
}

/// LIVE-3: with the host's opt-in, the user's toolchain homes are on `PATH`,
/// run, and are named by their variables; the credential files beside them stay unreadable,
/// the toolchains unwritable. Without the opt-in none of it is there.
#[tokio::test]
async fn opted_in_toolchains_run_and_their_credentials_stay_private() {
    use std::os::unix::fs::PermissionsExt;
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let home = f.outside_dir().join("home");
    let cargo = f.outside(
        "home/.cargo/bin/cargo",
        "#!/bin/sh\necho cargo-ran \"$CARGO_HOME\"\n",
    );
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    f.outside("home/.cargo/credentials.toml", "CARGO-TOKEN-SECRET");
    f.outside(
        "home/.rustup/settings.toml",
        "default_toolchain = \"stable\"\n",
    );
    f.outside("home/.npmrc", "NPM-TOKEN-SECRET");
    f.outside("home/.ssh/id_rsa", "SSH-KEY-SECRET");
    let node = f.outside(
        "home/.nvm/versions/node/v20.11.0/bin/node",
        "#!/bin/sh\necho node20\n",
    );
    std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755)).unwrap();
    let old = f.outside(
        "home/.nvm/versions/node/v9.1.0/bin/node",
        "#!/bin/sh\necho node9\n",
    );
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).unwrap();
    let h = home.display();
    let script = format!(
        "cargo; node; cat \"$RUSTUP_HOME/settings.toml\"; \
         cat '{h}/.cargo/credentials.toml' '{h}/.npmrc' '{h}/.ssh/id_rsa' 2>/dev/null; \
         echo x > '{h}/.cargo/bin/new' 2>/dev/null || echo ro-denied"
    );
    let run = |options: command_tool::CommandOptions| {
        let script = script.clone();
        let lease = f.lease.clone();
        async move {
            let (ctx, _h) = CallContext::standalone();
            let args = CommandArguments::from_json(json!({ "command": script })).unwrap();
            command_tool::command_with(args, lease, &DenyAll, &ctx, &options)
                .await
                .unwrap()
        }
    };
    let out = run(command_tool::CommandOptions::default().toolchains(&home)).await;
    assert_eq!(
        out.stdout,
        format!("cargo-ran {h}/.cargo\nnode20\ndefault_toolchain = \"stable\"\nro-denied\n"),
        "{out:?}"
    );
    for secret in ["CARGO-TOKEN", "NPM-TOKEN", "SSH-KEY"] {
        assert!(!out.stdout.contains(secret), "{secret} leaked: {out:?}");
    }
    assert!(!home.join(".cargo/bin/new").exists());

    let without = run(command_tool::CommandOptions::default()).await;
    assert!(!without.stdout.contains("cargo-ran"), "{without:?}");
    assert!(!without.stdout.contains("node20"), "{without:?}");
    assert!(without.stdout.ends_with("ro-denied\n"), "{without:?}");
}

/// An approved read-only extra path that is a script names its interpreter
/// with a `#!` line the command may have written; that line grants nothing (it once granted
/// whatever it named, `/` included).
#[tokio::test]
async fn a_scripts_shebang_in_an_extra_path_grants_nothing() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let secret_dir = f.outside_dir().join("secret");
    f.outside("secret/key", "SHEBANG-SECRET");
    let script = f.outside("tools/run.sh", format!("#!{}\n", secret_dir.display()));
    let chained = f.outside("tools/one.sh", format!("#!{}/key\n", secret_dir.display()));
    let approver = Recorder::allowing(&[&script, &chained]);
    let out = call_with(
        &f,
        json!({
            "command": format!("cat '{}/key' || echo denied", secret_dir.display()),
            "extraPaths": [{"path": script.display().to_string()}, {"path": chained.display().to_string()}]
        }),
        &approver,
    )
    .await
    .unwrap();
    assert!(!out.stdout.contains("SHEBANG-SECRET"), "{out:?}");
    assert!(out.stdout.contains("denied"), "{out:?}");
}

/// An approved extra path may hold another program's listening socket (the
/// user's `/tmp` holds tmux's), which a command could reach (a re-addressed `socketpair`
/// datagram end, a socket passed from another call): such a path is refused before anything
/// runs, read-only or not, and so are the places where programs keep their sockets.
#[tokio::test]
async fn an_extra_path_holding_a_unix_socket_is_refused_and_the_socket_never_reached() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let dir = f.outside_dir().join("sockets");
    std::fs::create_dir_all(dir.join("deep")).unwrap();
    let path = dir.join("deep/s.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    for write in [false, true] {
        let approver = Recorder::allowing(&[&dir]);
        let err = call_with(
            &f,
            json!({"command": "echo ran", "extraPaths": [{"path": dir.display().to_string(), "write": write}]}),
            &approver,
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), ErrorCode::ExecPathInvalid, "{err:?}");
        assert!(err.message().contains("unix socket"), "{err:?}");
        assert!(
            listener.accept().is_err(),
            "the host's listener was reached"
        );
    }
    for shared in ["/tmp", "/run", "/dev"] {
        let approver = Recorder::allowing(&[std::path::Path::new(shared)]);
        let err = call_with(
            &f,
            json!({"command": "echo ran", "extraPaths": [{"path": shared}]}),
            &approver,
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), ErrorCode::ExecPathInvalid, "{shared}: {err:?}");
    }
}
