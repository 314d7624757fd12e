//! TRUST-4 through `run_command` itself: the question the host's asker gets names everything a
//! yes grants, `check` reports that very question, and a call too long to show is not asked.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use common::{args, call, fixture};
use run_command_tool::{Asker, Checked, Confirmation, Mode, PasswordReply, Policy, Question};

/// Records every question's kind and text, and says no to all of them.
#[derive(Default)]
struct Recorder {
    asked: Mutex<Vec<(&'static str, String)>>,
}

impl Asker for Recorder {
    fn confirm<'a>(
        &'a self,
        q: &'a Question,
    ) -> Pin<Box<dyn Future<Output = Confirmation> + Send + 'a>> {
        self.asked
            .lock()
            .unwrap()
            .push(("confirm", q.text().to_owned()));
        Box::pin(async { Confirmation::No })
    }

    fn password<'a>(
        &'a self,
        q: &'a Question,
    ) -> Pin<Box<dyn Future<Output = PasswordReply> + Send + 'a>> {
        self.asked
            .lock()
            .unwrap()
            .push(("password", q.text().to_owned()));
        Box::pin(async { PasswordReply::Cancelled })
    }
}

fn checked(a: run_command_tool::RunCommandArgs, f: &common::Fixture, mode: Mode) -> Checked {
    run_command_tool::check(
        a,
        &f.proj,
        &Policy::load(mode, None).unwrap(),
        &run_command_tool::RunCommandOptions::for_home(&f.home),
    )
}

fn confirmation(c: &Checked) -> (&'static str, String) {
    match c {
        Checked::Run {
            gate, confirmation, ..
        } => (gate, confirmation.clone().unwrap_or_default()),
        other => panic!("refused: {other:?}"),
    }
}

#[tokio::test]
async fn trust_4_the_question_names_the_write_paths_and_the_network_and_check_shows_it() {
    let f = fixture();
    let out = f.home.join("outdir");
    std::fs::create_dir(&out).unwrap();
    let mut a = args(&["sh", "wp.sh"]);
    a.write_paths = vec![out.to_string_lossy().into_owned()];
    a.network = true;
    let asker = Recorder::default();
    let result = call(a.clone(), &f.proj, &f.home, Mode::Auto, &asker)
        .await
        .unwrap();
    assert!(!result.executed);
    let asked = asker.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let (kind, text) = &asked[0];
    assert_eq!(*kind, "confirm");
    assert!(text.contains("\n- run `sh wp.sh` in the sandbox"), "{text}");
    assert!(
        text.contains(&format!(
            "\n- write to `{}` during this call",
            out.display()
        )),
        "{text}"
    );
    assert!(
        text.contains("\n- network: the command can reach any host on the internet"),
        "{text}"
    );
    // `check --mode auto` reports the same gate and the same text.
    assert_eq!(
        confirmation(&checked(a, &f, Mode::Auto)),
        ("confirm", text.clone())
    );
}

#[tokio::test]
async fn trust_4_leaving_the_sandbox_says_it_runs_files_the_agent_changed() {
    let f = fixture();
    let mut a = args(&["sh", "build.sh"]);
    a.sandbox = false;
    let asker = Recorder::default();
    call(a.clone(), &f.proj, &f.home, Mode::AllowAll, &asker)
        .await
        .unwrap();
    let asked = asker.asked.lock().unwrap().clone();
    let (kind, text) = &asked[0];
    assert_eq!(*kind, "password");
    assert!(
        text.contains(
            "\n- run `sh build.sh` outside the sandbox with your full rights (sandbox: false): \
             nothing confines it, and it runs files the agent changed this session as you"
        ),
        "{text}"
    );
    assert_eq!(
        confirmation(&checked(a, &f, Mode::AllowAll)),
        ("password", text.clone())
    );
}

#[tokio::test]
async fn trust_4_each_command_of_a_script_is_in_the_question() {
    let f = fixture();
    let asker = Recorder::default();
    let a = args(&["sh", "-c", "ls | wc -l > n.txt"]);
    call(a, &f.proj, &f.home, Mode::Safe, &asker).await.unwrap();
    let asked = asker.asked.lock().unwrap().clone();
    assert!(
        asked[0].1.ends_with(
            "\n- run `sh -c 'ls | wc -l > n.txt'` in the sandbox\
             \n  the script runs each of:\
             \n  - `ls`\
             \n  - `wc -l`\
             \n  - and writes files through redirections"
        ),
        "{asked:?}"
    );
    assert!(!f.proj.join("n.txt").exists());
}

#[tokio::test]
async fn trust_4_an_argv_too_long_to_show_is_not_asked_and_not_run() {
    let f = fixture();
    let name = "n".repeat(run_command_tool::MAX_ASKED_CHARS);
    let asker = Recorder::default();
    let err = call(
        args(&["touch", &name]),
        &f.proj,
        &f.home,
        Mode::Safe,
        &asker,
    )
    .await
    .unwrap_err();
    assert_eq!(err.code().as_str(), "RUN_COMMAND_ARGUMENTS_INVALID");
    assert!(
        err.message()
            .contains("more than the 16384 a confirmation shows"),
        "{}",
        err.message()
    );
    assert!(asker.asked.lock().unwrap().is_empty());
}

#[tokio::test]
async fn trust_4_a_write_path_outside_home_says_why_the_password_is_asked() {
    let f = fixture();
    let mut a = args(&["touch", "x"]);
    a.write_paths = vec![f.outside.to_string_lossy().into_owned()];
    let asker = Recorder::default();
    call(a, &f.proj, &f.home, Mode::AllowAll, &asker)
        .await
        .unwrap();
    let asked = asker.asked.lock().unwrap().clone();
    let (kind, text) = &asked[0];
    assert_eq!(*kind, "password");
    assert_eq!(
        text.lines().next(),
        Some(
            "a write path outside your home, or where your programs read configuration or \
             code, needs your password"
        )
    );
    assert!(
        text.contains(&format!(
            "\n- write to `{}` during this call",
            f.outside.display()
        )),
        "{text}"
    );
}
