//! Gates with a real password (RC-10, RC-11, RC-12, RC-4): every mode × gate kind with a
//! scripted asker, the password checked by the system (PAM, `sudo -S -v`) as the test user of
//! `.ci/run` (`testkit::rerun_as_test_user`); rm → trash with the real location's gate.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{Reply, Scripted, args, call, fixture};
use run_command_tool::{Confirmation, DenyAllAsker, Mode, Status};

const MODES: [Mode; 3] = [Mode::Safe, Mode::Auto, Mode::AllowAll];

/// One gate kind per argv: none (an allowlist hit), confirm (`safe` asks for everything that
/// is not read-only), password (`sandbox: false`).
#[tokio::test(flavor = "multi_thread")]
async fn every_mode_and_gate_kind_with_the_system_password() {
    if testkit::rerun_as_test_user("every_mode_and_gate_kind_with_the_system_password") {
        return;
    }
    let user = testkit::as_test_user().unwrap();
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    for mode in MODES {
        // none: an allowlist hit runs without a question.
        let asker = Scripted::new(Confirmation::No, Vec::new());
        let out = call(args(&["ls"]), &f.proj, &f.home, mode, &asker)
            .await
            .unwrap();
        assert!(out.is_success(), "{mode:?} {out:?}");
        assert_eq!(asker.confirms.load(Ordering::SeqCst), 0);

        // confirm (safe) or none (auto, allow-all): `touch`.
        let asker = Scripted::new(Confirmation::CannotAsk, Vec::new());
        let out = call(args(&["touch", "t"]), &f.proj, &f.home, mode, &asker)
            .await
            .unwrap();
        assert_eq!(out.executed, mode != Mode::Safe, "{mode:?} {out:?}");

        // password: sandbox: false, under every mode.
        let mut unsandboxed = args(&["id", "-u"]);
        unsandboxed.sandbox = false;
        let right = Scripted::new(Confirmation::Yes, vec![Reply::Given(user.password.clone())]);
        let out = call(unsandboxed.clone(), &f.proj, &f.home, mode, &right)
            .await
            .unwrap();
        assert!(out.is_success(), "{mode:?} {out:?}");
        assert_eq!(out.output.trim(), user.uid.to_string());
        let wrong = Scripted::new(
            Confirmation::Yes,
            vec![
                Reply::Given("wrong-1".into()),
                Reply::Given("wrong-2".into()),
                Reply::Given("wrong-3".into()),
                Reply::Given(user.password.clone()),
            ],
        );
        let out = call(unsandboxed.clone(), &f.proj, &f.home, mode, &wrong)
            .await
            .unwrap();
        assert!(!out.executed, "{mode:?} {out:?}");
        assert_eq!(wrong.prompts.load(Ordering::SeqCst), 3, "three attempts");
        assert!(out.message.unwrap().contains("wrong 3 times"));
        // The whole tree of an unsandboxed command is stopped at its end too.
        let marker = testkit::marker();
        let mut bg = args(&["sh", "-c", &format!("sleep {marker} & echo started")]);
        bg.sandbox = false;
        bg.network = true;
        let right = Scripted::new(Confirmation::Yes, vec![Reply::Given(user.password.clone())]);
        let out = call(bg, &f.proj, &f.home, mode, &right).await.unwrap();
        assert!(out.is_success(), "{out:?}");
        assert_eq!(out.descendants_stopped, 1, "{out:?}");
        assert!(out.message.unwrap().contains("ignored"));
        assert!(testkit::alive_with(&marker).is_empty());
        for reply in [Reply::CannotAsk, Reply::Cancelled] {
            let asker = Scripted::new(Confirmation::Yes, vec![reply]);
            let out = call(unsandboxed.clone(), &f.proj, &f.home, mode, &asker)
                .await
                .unwrap();
            assert!(
                !out.executed && out.status == Status::NotExecuted,
                "{out:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sudo_asks_confirmation_and_password_every_time() {
    if testkit::rerun_as_test_user("sudo_asks_confirmation_and_password_every_time") {
        return;
    }
    let user = testkit::as_test_user().unwrap();
    let f = fixture();
    for _ in 0..2 {
        let asker = Scripted::new(Confirmation::Yes, vec![Reply::Given(user.password.clone())]);
        let out = call(
            args(&["sudo", "id", "-u"]),
            &f.proj,
            &f.home,
            Mode::Auto,
            &asker,
        )
        .await
        .unwrap();
        assert!(out.is_success(), "{out:?}");
        assert_eq!(out.output.trim(), "0");
        assert_eq!(asker.confirms.load(Ordering::SeqCst), 1);
        assert_eq!(
            asker.prompts.load(Ordering::SeqCst),
            1,
            "the password every call"
        );
        assert!(asker.labels.lock().unwrap()[0].starts_with("sudo: id"));
    }
    // Wrong three times: sudo never runs.
    let wrong = Scripted::new(
        Confirmation::Yes,
        vec![
            Reply::Given("x1".into()),
            Reply::Given("x2".into()),
            Reply::Given("x3".into()),
        ],
    );
    let out = call(
        args(&["sudo", "true"]),
        &f.proj,
        &f.home,
        Mode::AllowAll,
        &wrong,
    )
    .await
    .unwrap();
    assert!(!out.executed, "{out:?}");
    // sudo rm really deletes.
    let victim = f.proj.join("victim");
    std::fs::write(&victim, "x").unwrap();
    let asker = Scripted::new(Confirmation::Yes, vec![Reply::Given(user.password.clone())]);
    let v = victim.to_string_lossy().into_owned();
    let out = call(
        args(&["sudo", "rm", &v]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &asker,
    )
    .await
    .unwrap();
    assert!(out.is_success(), "{out:?}");
    assert!(!victim.exists());
    assert!(out.trashed.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_declined_or_unaskable_sudo_runs_nothing() {
    let f = fixture();
    let out = call(
        args(&["sudo", "true"]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
    )
    .await
    .unwrap();
    assert!(!out.executed);
    assert!(out.label.starts_with("sudo: true"));
}

#[tokio::test(flavor = "multi_thread")]
async fn rm_moves_files_in_the_working_directory_to_the_trash() {
    if testkit::rerun_as_test_user("rm_moves_files_in_the_working_directory_to_the_trash") {
        return;
    }
    let f = fixture();
    let file = f.proj.join("junk.txt");
    std::fs::write(&file, "junk").unwrap();
    let out = call(
        args(&["rm", "junk.txt"]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
    )
    .await
    .unwrap();
    assert!(out.is_success(), "{out:?}");
    assert!(!file.exists());
    assert_eq!(out.trashed.len(), 1);
    assert_eq!(out.trashed[0].path, file.to_string_lossy());
    let from = out.trashed[0]
        .restore_from
        .as_ref()
        .expect("the trash says where it is");
    {
        assert_eq!(std::fs::read_to_string(from).unwrap(), "junk");
        let _ = std::fs::remove_file(from);
    }
    // A missing path is rm's error unless -f.
    let out = call(
        args(&["rm", "nope"]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
    )
    .await
    .unwrap();
    assert_eq!(out.exit_code, Some(1));
    assert!(out.output.contains("No such file"));
    let out = call(
        args(&["rm", "-f", "nope"]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &DenyAllAsker,
    )
    .await
    .unwrap();
    assert!(out.is_success(), "{out:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn rm_through_a_symlinked_parent_gets_the_gate_of_where_it_really_points() {
    let f = fixture();
    let target = f.outside.join("precious");
    std::fs::write(&target, "keep").unwrap();
    // Lexically inside the working directory (the decision's view): `sub/precious`.
    std::os::unix::fs::symlink(&f.outside, f.proj.join("sub")).unwrap();
    let asker = Scripted::new(Confirmation::Yes, vec![Reply::CannotAsk]);
    let out = call(
        args(&["rm", "sub/precious"]),
        &f.proj,
        &f.home,
        Mode::Auto,
        &asker,
    )
    .await
    .unwrap();
    assert!(!out.executed, "{out:?}");
    assert_eq!(
        asker.prompts.load(Ordering::SeqCst),
        1,
        "the password was asked"
    );
    assert!(out.label.contains("outside $HOME"), "{}", out.label);
    assert!(target.exists());
    // Elsewhere in $HOME: a confirmation even under auto.
    let in_home = f.home.join("old.txt");
    std::fs::write(&in_home, "x").unwrap();
    let p = in_home.to_string_lossy().into_owned();
    let asker = Scripted::new(Confirmation::No, Vec::new());
    let out = call(args(&["rm", &p]), &f.proj, &f.home, Mode::Auto, &asker)
        .await
        .unwrap();
    assert!(!out.executed);
    assert_eq!(asker.confirms.load(Ordering::SeqCst), 1);
    assert!(in_home.exists());
    // Outside $HOME directly: the password under allow-all too.
    let o = target.to_string_lossy().into_owned();
    let out = call(
        args(&["rm", &o]),
        &f.proj,
        &f.home,
        Mode::AllowAll,
        &DenyAllAsker,
    )
    .await
    .unwrap();
    assert!(!out.executed);
    assert!(target.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_right_password_opens_write_paths_and_rm_outside_home() {
    if testkit::rerun_as_test_user("the_right_password_opens_write_paths_and_rm_outside_home") {
        return;
    }
    let user = testkit::as_test_user().unwrap();
    if !testkit::sandbox_available() {
        return;
    }
    let f = fixture();
    // write_paths outside $HOME: the password, even under allow-all, then writable.
    let t = f.outside.join("made").to_string_lossy().into_owned();
    let mut a = args(&["touch", &t]);
    a.write_paths = vec![f.outside.to_string_lossy().into_owned()];
    let asker = Scripted::new(Confirmation::Yes, vec![Reply::Given(user.password.clone())]);
    let out = call(a, &f.proj, &f.home, Mode::AllowAll, &asker)
        .await
        .unwrap();
    assert!(out.is_success(), "{out:?}");
    assert!(f.outside.join("made").exists());
    assert_eq!(asker.prompts.load(Ordering::SeqCst), 1);
    // rm outside $HOME: the password, then the trash.
    let asker = Scripted::new(Confirmation::Yes, vec![Reply::Given(user.password.clone())]);
    let out = call(args(&["rm", &t]), &f.proj, &f.home, Mode::Auto, &asker)
        .await
        .unwrap();
    assert!(out.is_success(), "{out:?}");
    assert!(!f.outside.join("made").exists());
    assert_eq!(out.trashed.len(), 1);
    if let Some(from) = &out.trashed[0].restore_from {
        let _ = std::fs::remove_file(from);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_sudo_command_stops_it() {
    if testkit::rerun_as_test_user("cancelling_a_sudo_command_stops_it") {
        return;
    }
    let user = testkit::as_test_user().unwrap();
    let f = fixture();
    let marker = testkit::marker();
    let lease = std::sync::Arc::new(fsguard::RootLease::acquire(&f.proj).unwrap());
    let policy = run_command_tool::Policy::load(Mode::Auto, None).unwrap();
    let options = run_command_tool::RunCommandOptions::for_home(&f.home);
    let state = run_command_tool::RunCommandState::default();
    let (ctx, cancel) = toolscope::CallContext::standalone();
    let asker = Scripted::new(Confirmation::Yes, vec![Reply::Given(user.password.clone())]);
    // Cancel once both sleeps run (never on a clock alone); a run that ends first is
    // reported as it is.
    let run = run_command_tool::run_command(
        args(&["sudo", "sleep", &marker]),
        lease,
        &policy,
        &asker,
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
    // sudo forwarded SIGTERM to the root sleep.
    for _ in 0..100 {
        if testkit::alive_with(&marker).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(testkit::alive_with(&marker).is_empty());
}
