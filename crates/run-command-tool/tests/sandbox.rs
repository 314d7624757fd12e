//! run_command's sandbox end to end (RCS-1…RCS-3, RC-7, RC-14, RC-6, RC-9): what a command
//! may and may not read and write, the network switch, masking, the limit, the lock, and no
//! survivors. When the suite runs as root, `every_test_also_holds_unprivileged` re-runs it as
//! uid 65534.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Scripted, args, call, call_with, fixture};
use run_command_tool::{Confirmation, DenyAllAsker, Mode, RunCommandState, Status};

#[tokio::test(flavor = "multi_thread")]
async fn a_direct_command_runs_with_stdout_and_stderr_merged() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    let out = call(
        args(&["sh", "-c", "echo one; echo two >&2; echo three"]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
    )
    .await
    .unwrap();
    assert!(out.is_success(), "{out:?}");
    assert_eq!(out.output, "one\ntwo\nthree\n");
    assert!(out.executed && !out.truncated);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_decision_is_an_error_with_its_run_command_code() {
    let f = fixture();
    let err = call(
        args(&["cd", "/"]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
    )
    .await
    .unwrap_err();
    assert_eq!(err.code().as_str(), "RUN_COMMAND_CD");
    let err = call(
        args(&["cat", "*.txt"]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
    )
    .await
    .unwrap_err();
    assert_eq!(err.code().as_str(), "RUN_COMMAND_METACHARACTERS");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_confirmation_that_cannot_be_asked_runs_nothing() {
    let f = fixture();
    let out = call(
        args(&["touch", "made"]),
        &f.proj,
        &f.home,
        Mode::Safe,
        &DenyAllAsker,
    )
    .await
    .unwrap();
    assert!(!out.executed);
    assert_eq!(out.status, Status::NotExecuted);
    assert!(out.message.as_deref().unwrap().contains("--yes"), "{out:?}");
    assert!(!f.proj.join("made").exists());
    let no = Scripted::new(Confirmation::No, Vec::new());
    let out = call(args(&["touch", "made"]), &f.proj, &f.home, Mode::Safe, &no)
        .await
        .unwrap();
    assert!(!out.executed && !f.proj.join("made").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_confirmed_command_writes_in_the_working_directory() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    let yes = Scripted::yes();
    let out = call(args(&["touch", "made"]), &f.proj, &f.home, Mode::Safe, &yes)
        .await
        .unwrap();
    assert!(out.is_success(), "{out:?}");
    assert!(f.proj.join("made").exists());
    assert_eq!(yes.confirms.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn private_files_in_home_are_unreadable_and_home_is_read_only() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    std::fs::write(f.home.join("notes.txt"), "READABLE-NOTES\n").unwrap();
    let script = format!(
        "cat {h}/.ssh/id_rsa; cat {h}/.netrc; cat {h}/notes.txt; echo evil >> {h}/.bashrc; \
         touch {h}/new-file; echo done",
        h = f.home.display()
    );
    let out = call(
        args(&["sh", "-c", &script]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
    )
    .await
    .unwrap();
    assert!(out.executed, "{out:?}");
    assert!(!out.output.contains("PLANTED-SSH-SECRET"), "{}", out.output);
    assert!(!out.output.contains("PLANTED-NETRC"), "{}", out.output);
    assert!(out.output.contains("READABLE-NOTES"), "{}", out.output);
    assert_eq!(
        std::fs::read_to_string(f.home.join(".bashrc")).unwrap(),
        "# rc\n"
    );
    assert!(!f.home.join("new-file").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn private_locations_the_user_makes_while_the_command_runs_stay_unreadable() {
    // Review round 2: a private location missing at the start (`gh auth login`, a first trash)
    // must still be kept out when it appears mid-call, also where nothing private existed in
    // its directory before.
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    std::fs::create_dir_all(f.home.join(".config/other")).unwrap();
    std::fs::create_dir_all(f.home.join(".local/share")).unwrap();
    std::fs::write(f.home.join(".config/other/settings"), "READABLE-SETTINGS\n").unwrap();
    let script = format!(
        "touch ready; i=0; while [ ! -e go ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; \
         cat {h}/.config/gh/hosts.yml; cat {h}/.local/share/Trash/files/x; \
         cat {h}/.config/other/settings; echo done",
        h = f.home.display()
    );
    let (home, proj) = (f.home.clone(), f.proj.clone());
    let host = std::thread::spawn(move || {
        for _ in 0..400 {
            if proj.join("ready").exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        std::fs::create_dir_all(home.join(".config/gh")).unwrap();
        std::fs::write(home.join(".config/gh/hosts.yml"), "MIDCALL-GH-TOKEN\n").unwrap();
        std::fs::create_dir_all(home.join(".local/share/Trash/files")).unwrap();
        std::fs::write(home.join(".local/share/Trash/files/x"), "MIDCALL-TRASHED\n").unwrap();
        std::fs::write(proj.join("go"), "").unwrap();
    });
    let out = call(
        args(&["sh", "-c", &script]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
    )
    .await
    .unwrap();
    host.join().unwrap();
    assert!(out.executed, "{out:?}");
    assert!(out.output.contains("done"), "{}", out.output);
    assert!(!out.output.contains("MIDCALL-GH-TOKEN"), "{}", out.output);
    assert!(!out.output.contains("MIDCALL-TRASHED"), "{}", out.output);
    assert!(out.output.contains("READABLE-SETTINGS"), "{}", out.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn git_hooks_and_config_cannot_be_planted_from_inside() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    std::fs::create_dir_all(f.proj.join(".git")).unwrap();
    std::fs::write(f.proj.join(".git/config"), "[core]\n").unwrap();
    let out = call(
        args(&[
            "sh",
            "-c",
            "echo 'touch /tmp/pwned' > .git/hooks/pre-commit; echo x >> .git/config; \
             echo '[submodule]' > .gitmodules; echo ok > file; echo done",
        ]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
    )
    .await
    .unwrap();
    assert!(out.executed, "{out:?}");
    assert!(
        f.proj.join(".git/hooks").is_dir(),
        "hooks made to protect it"
    );
    assert!(
        !f.proj.join(".git/hooks/pre-commit").exists(),
        "{}",
        out.output
    );
    assert_eq!(
        std::fs::read_to_string(f.proj.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.proj.join("file")).unwrap(),
        "ok\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_outside_home_needs_write_paths_and_the_password() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    let target = f.outside.join("f");
    let t = target.to_string_lossy().into_owned();
    let out = call(
        args(&["touch", &t]),
        &f.proj,
        &f.home,
        Mode::AllowAll,
        &DenyAllAsker,
    )
    .await
    .unwrap();
    assert!(out.executed && !out.is_success(), "{out:?}");
    assert!(!target.exists());
    assert!(
        out.hint.as_deref().unwrap_or("").contains("write_paths"),
        "{out:?}"
    );
    // With write_paths outside $HOME the password is asked even under allow-all; a host that
    // cannot ask runs nothing.
    let mut a = args(&["touch", &t]);
    a.write_paths = vec![f.outside.to_string_lossy().into_owned()];
    let out = call(a, &f.proj, &f.home, Mode::AllowAll, &DenyAllAsker)
        .await
        .unwrap();
    assert!(!out.executed, "{out:?}");
    assert!(!target.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn write_paths_in_home_is_writable_after_confirmation() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    let data = f.home.join("data");
    std::fs::create_dir(&data).unwrap();
    let t = data.join("f").to_string_lossy().into_owned();
    let mut a = args(&["touch", &t]);
    a.write_paths = vec![data.to_string_lossy().into_owned()];
    let yes = Scripted::yes();
    let out = call(a.clone(), &f.proj, &f.home, Mode::Auto, &yes)
        .await
        .unwrap();
    assert!(out.is_success(), "{out:?}");
    assert!(data.join("f").exists());
    assert_eq!(yes.confirms.load(std::sync::atomic::Ordering::SeqCst), 1);
    // A write path that is a private location is refused.
    let mut a = args(&["true"]);
    a.write_paths = vec![f.home.join(".ssh").to_string_lossy().into_owned()];
    let err = call(a, &f.proj, &f.home, Mode::Auto, &yes)
        .await
        .unwrap_err();
    assert_eq!(err.code(), toolscope::ErrorCode::ExecPathInvalid);
    // So is the host's own state directory.
    let state_dir = f.home.join("agent-state");
    std::fs::create_dir(&state_dir).unwrap();
    let mut a = args(&["true"]);
    a.write_paths = vec![state_dir.to_string_lossy().into_owned()];
    let err = call_with(
        a,
        &f.proj,
        &f.home,
        Mode::Auto,
        &yes,
        &RunCommandState::default(),
        |o| o.hidden = vec![state_dir.clone()],
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), toolscope::ErrorCode::ExecPathInvalid);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_working_directory_may_not_be_home() {
    let f = fixture();
    let err = call(args(&["true"]), &f.home, &f.home, Mode::Auto, &DenyAllAsker)
        .await
        .unwrap_err();
    assert_eq!(err.code(), toolscope::ErrorCode::ExecPathInvalid);
    assert!(err.message().contains("project directory"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_network_is_off_unless_asked_for() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accept = std::thread::spawn(move || {
        let _ = listener.accept();
    });
    let py = format!(
        "import socket; socket.create_connection(('127.0.0.1', {port}), 5); print('connected')"
    );
    let out = call(
        args(&["python3", "-c", &py]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
    )
    .await
    .unwrap();
    assert!(out.executed && !out.is_success(), "{out:?}");
    assert!(!out.output.contains("connected"));
    let hint = out.hint.as_deref().unwrap_or("");
    assert!(hint.contains("\"network\": true"), "{out:?}");
    // In its own network namespace the connection is refused by its own loopback (NET-1):
    // the hint says so, rather than that the network is off.
    if out.sandbox.contains("a private loopback network") {
        assert!(
            hint.starts_with("nothing listened on the command's own loopback"),
            "{out:?}"
        );
    } else {
        assert!(hint.contains("could not reach the network"), "{out:?}");
    }
    let mut a = args(&["python3", "-c", &py]);
    a.network = true;
    let out = call(a, &f.proj, &f.home, Mode::Auto, &DenyAllAsker)
        .await
        .unwrap();
    assert!(out.is_success(), "{out:?}");
    assert!(out.output.contains("connected"));
    accept.join().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_in_output_are_masked_and_a_mask_token_is_refused_next() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    let token = format!("ghp_{}", "A1b2C3d4E5".repeat(4));
    let state = RunCommandState::default();
    let out = call_with(
        args(&["sh", "-c", &format!("echo token={token}")]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
        &state,
        |_| {},
    )
    .await
    .unwrap();
    assert!(!out.output.contains(&token), "{}", out.output);
    assert!(out.output.contains("[secret:"), "{}", out.output);
    let masked = out.output.trim().trim_start_matches("token=").to_owned();
    let err = call_with(
        args(&["echo", &masked]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
        &state,
        |_| {},
    )
    .await
    .unwrap_err();
    assert_eq!(err.code().as_str(), "RUN_COMMAND_MASKED_SECRET");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_limit_stops_the_whole_tree_and_nothing_survives() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    let marker = testkit::marker();
    let out = call_with(
        args(&[
            "sh",
            "-c",
            &format!("sleep {marker} & sleep {marker}; echo never"),
        ]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
        &RunCommandState::default(),
        |o| o.timeout = Duration::from_millis(500),
    )
    .await
    .unwrap();
    assert_eq!(out.status, Status::TimedOut, "{out:?}");
    assert_eq!(out.exit_code, None);
    assert!(testkit::alive_with(&marker).is_empty());
    // A background child of a command that ends is stopped too.
    let marker = testkit::marker();
    let out = call(
        args(&["sh", "-c", &format!("sleep {marker} & echo started")]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
    )
    .await
    .unwrap();
    assert!(out.is_success(), "{out:?}");
    assert_eq!(out.descendants_stopped, 1);
    assert!(testkit::alive_with(&marker).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn large_output_keeps_head_and_tail_with_a_marker() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    let out = call(
        args(&[
            "python3",
            "-c",
            "import sys\nprint('FIRST')\nsys.stdout.write('x' * 2000000 + '\\n')\nprint('LAST')",
        ]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
    )
    .await
    .unwrap();
    assert!(out.is_success() && out.truncated, "{}", out.output.len());
    assert!(out.output.starts_with("FIRST\n"));
    assert!(out.output.ends_with("LAST\n"));
    assert!(out.output.contains(" bytes omitted …]"));
    assert!(out.output.len() < run_command_tool::OUTPUT_CAP + 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn commands_that_are_not_allowlist_hits_run_one_at_a_time() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    let state = RunCommandState::default();
    // Each takes a directory as a lock for a while; overlapping runs would find it taken.
    let script = "mkdir lock || exit 3; sleep 0.3; rmdir lock";
    let a = call_with(
        args(&["sh", "-c", script]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
        &state,
        |_| {},
    );
    let b = call_with(
        args(&["sh", "-c", script]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
        &state,
        |_| {},
    );
    let (a, b) = tokio::join!(a, b);
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(a.is_success() && b.is_success(), "{a:?} {b:?}");
}

#[test]
fn every_test_also_holds_unprivileged() {
    if !testkit::is_root() {
        return;
    }
    let text = testkit::run_as_nobody(&["--skip", "every_test_also_holds_unprivileged"], &[]);
    assert!(text.contains("test result: ok"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_the_call_stops_the_whole_tree() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    let marker = testkit::marker();
    let lease = std::sync::Arc::new(fsguard::RootLease::acquire(&f.proj).unwrap());
    let policy = run_command_tool::Policy::load(Mode::Auto, None).unwrap();
    let options = run_command_tool::RunCommandOptions::for_home(&f.home);
    let state = RunCommandState::default();
    let (ctx, cancel) = toolscope::CallContext::standalone();
    let script = format!("sleep {marker} & sleep {marker}");
    // Cancel once both sleeps run (never on a clock alone); a run that ends first is
    // reported as it is.
    let run = run_command_tool::run_command(
        args(&["sh", "-c", &script]),
        lease,
        &policy,
        &DenyAllAsker,
        &state,
        &options,
        &ctx,
    );
    tokio::pin!(run);
    let out = loop {
        tokio::select! {
            out = &mut run => break out.unwrap(),
            () = tokio::time::sleep(Duration::from_millis(20)) => {
                if testkit::alive_with(&marker).len() >= 2 {
                    cancel.cancel(toolscope::CancelReason::Requested);
                }
            }
        }
    };
    assert_eq!(out.status, Status::Cancelled, "{out:?}");
    assert!(testkit::alive_with(&marker).is_empty());
}

/// A host's hidden directory inside another hidden one (its log directory inside its state
/// directory) is hidden with it; the command still runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_hidden_path_inside_another_is_hidden_with_it_and_the_command_runs() {
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    let state_dir = f.home.join("agent-state");
    let inner = state_dir.join("sessions/s1");
    std::fs::create_dir_all(&inner).unwrap();
    std::fs::write(inner.join("bg-1.log"), "PLANTED-LOG\n").unwrap();
    let out = call_with(
        args(&[
            "sh",
            "-c",
            "cat ../agent-state/sessions/s1/bg-1.log; echo ran",
        ]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
        &RunCommandState::default(),
        |o| o.hidden = vec![state_dir.clone(), inner.clone()],
    )
    .await
    .unwrap();
    assert!(out.output.contains("ran"), "{out:?}");
    assert!(!out.output.contains("PLANTED-LOG"), "{out:?}");
}
