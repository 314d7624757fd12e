//! `agent-exec call run_command`'s questions on a real terminal: the binary runs
//! with a pseudo-terminal as its controlling terminal (driven by `tty_client.py`, Python's
//! standard library only) and its stdout on a pipe. A typed `y` runs the command, anything
//! else does not; the password is read with echo off, Ctrl-C cancels it, and the terminal's
//! modes are back as they were after every path.

use std::process::Command;

use serde_json::{Value, json};

use crate::util::{Fixture, s, sandbox_available};

const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/tty_client.py");

/// Runs `agent-exec call run_command` on a pty with `flags` and `args`, playing `script`.
fn on_terminal(f: &Fixture, flags: &[&str], args: &Value, script: Value) -> Option<Value> {
    if Command::new("python3")
        .arg("-c")
        .arg("import pty")
        .output()
        .is_err()
    {
        eprintln!("skipped: no python3 to drive a pseudo-terminal");
        return None;
    }
    let mut argv = vec![
        env!("CARGO_BIN_EXE_agent-exec").to_owned(),
        "--state-dir".into(),
        s(&f.state).into(),
        "call".into(),
        "run_command".into(),
        "--workspace".into(),
        s(&f.folder).into(),
    ];
    argv.extend(flags.iter().map(|f| f.to_string()));
    argv.extend(["--json".into(), args.to_string()]);
    let plan = json!({"argv": argv, "script": script});
    let out = Command::new("python3")
        .arg(CLIENT)
        .arg(plan.to_string())
        .current_dir(&f.folder)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the terminal driver failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_str(&stdout).unwrap())
}

fn line(out: &Value) -> Value {
    serde_json::from_str(out["stdout"].as_str().unwrap()).unwrap()
}

#[test]
fn a_typed_y_on_the_terminal_runs_the_command_and_anything_else_does_not() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    // TRUST-4: the terminal shows the question's one rendering, then asks.
    let script = json!([
        ["expect", "agent-exec: - run `touch yes.txt` in the sandbox"],
        ["expect", "agent-exec: Allow it? [y/N]"],
        ["send", "y\n"]
    ]);
    let Some(out) = on_terminal(&f, &[], &json!({"argv": ["touch", "yes.txt"]}), script) else {
        return;
    };
    assert_eq!(out["code"], 0, "{out}");
    assert_eq!(line(&out)["executed"], true, "{out}");
    assert!(f.folder.join("yes.txt").exists());
    for answer in ["n\n", "\n", "maybe\n"] {
        let script = json!([["expect", "[y/N]"], ["send", answer]]);
        let out = on_terminal(&f, &[], &json!({"argv": ["touch", "no.txt"]}), script).unwrap();
        assert_eq!(
            (&out["code"], &line(&out)["executed"]),
            (&json!(1), &json!(false)),
            "{out}"
        );
        assert!(!f.folder.join("no.txt").exists(), "{answer:?}");
    }
}

#[test]
fn the_password_is_typed_without_echo_and_ctrl_c_cancels_with_the_terminal_restored() {
    // RC-12 on a terminal: echo is off while the password is typed (the typed text never
    // appears), a wrong one asks again, Ctrl-C cancels the prompt — nothing runs — and echo
    // and the signal keys are back afterwards.
    let f = Fixture::new();
    let script = json!([
        ["expect", "attempt 1 of 3"],
        ["echo?"],
        ["send", "typed-but-wrong\n"],
        ["expect", "attempt 2 of 3"],
        ["echo?"],
        ["send", "\u{3}"],
        ["expect", "cancelled"],
    ]);
    let args = json!({"argv": ["touch", "outside.txt"], "sandbox": false});
    let Some(out) = on_terminal(&f, &["--yes"], &args, script) else {
        return;
    };
    assert_eq!(out["echo"], json!([false, false]), "{out}");
    assert_eq!(out["after"], json!({"echo": true, "isig": true}), "{out}");
    assert!(
        !out["tty"].as_str().unwrap().contains("typed-but-wrong"),
        "{out}"
    );
    assert_eq!(
        (&out["code"], &line(&out)["executed"]),
        (&json!(1), &json!(false)),
        "{out}"
    );
    assert!(!f.folder.join("outside.txt").exists());
}
