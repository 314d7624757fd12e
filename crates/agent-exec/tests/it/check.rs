//! `agent-exec check run_command` end to end through the binary: one JSON
//! line with argv-policy's decision, exit 0 for run and 1 for refuse, 2 for usage errors, and
//! nothing run — the workspace is byte-identical afterwards.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::util::Fixture;

fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                out.insert(p.clone(), Vec::new());
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Runs `agent-exec check run_command --workspace <folder> <extra…> --json <args>` with HOME set
/// to the fixture's temp dir; returns (exit code, the parsed line or Null, stderr).
fn check(f: &Fixture, extra: &[&str], args: &str) -> (i32, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(["check", "run_command", "--workspace"])
        .arg(&f.folder)
        .args(extra)
        .args(["--json", args])
        .env("HOME", f.folder.parent().unwrap())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let code = out.status.code().unwrap();
    let line = if stdout.is_empty() {
        Value::Null
    } else {
        assert_eq!(stdout.matches('\n').count(), 1, "one line: {stdout}");
        serde_json::from_str(&stdout).unwrap()
    };
    (code, line, stderr)
}

fn fixture() -> Fixture {
    let f = Fixture::new();
    f.write("notes.txt", "keep me\n");
    f.write("src/main.c", "int main(void) { return 0; }\n");
    f
}

#[test]
fn check_run_command_prints_the_decision_and_runs_nothing() {
    // RC-2, RC-4, RC-9, RC-15 through the CLI; invariant 1 (nothing runs).
    let f = fixture();
    let before = snapshot(&f.folder);
    // (mode args, arguments, exit code, expected subset of the line)
    let cases: &[(&[&str], &str, i32, Value)] = &[
        (
            &[],
            r#"{"argv": ["git", "status"]}"#,
            0,
            json!({"decision": "run", "via": "direct", "gate": "none", "parallel": true}),
        ),
        (
            &[],
            r#"{"argv": ["touch", "created.txt"]}"#,
            0,
            json!({"decision": "run", "via": "direct", "gate": "confirm", "parallel": false}),
        ),
        (
            &["--mode", "auto"],
            r#"{"argv": ["touch", "created.txt"]}"#,
            0,
            json!({"decision": "run", "gate": "none"}),
        ),
        (
            &["--mode", "auto"],
            r#"{"argv": ["sh", "-c", "ls | wc -l > count.txt"]}"#,
            0,
            json!({"decision": "run", "via": "shell", "gate": "none"}),
        ),
        (
            &["--mode", "auto"],
            r#"{"argv": ["rm", "notes.txt"]}"#,
            0,
            json!({"decision": "run", "gate": "none", "sudo": false}),
        ),
        (
            &[],
            r#"{"argv": ["sh", "-c", "ls | env rm notes.txt"]}"#,
            1,
            json!({"decision": "refuse"}),
        ),
        (
            &["--mode", "allow-all"],
            r#"{"argv": ["ls", "|", "wc"]}"#,
            1,
            json!({"decision": "refuse"}),
        ),
        (
            &[],
            r#"{"argv": ["cd", "src"]}"#,
            1,
            json!({"decision": "refuse"}),
        ),
        (
            &[],
            r#"{"argv": ["npx", "tsc", "--watch"]}"#,
            1,
            json!({"decision": "refuse"}),
        ),
        (&[], r#"{"argv": "ls"}"#, 1, json!({"decision": "refuse"})),
        (&[], "not json", 1, json!({"decision": "refuse"})),
    ];
    for (extra, args, code, expected) in cases {
        let (got_code, line, stderr) = check(&f, extra, args);
        assert_eq!(got_code, *code, "{args} {extra:?}: {line} {stderr}");
        for (k, v) in expected.as_object().unwrap() {
            assert_eq!(&line[k], v, "{args} {extra:?}: {k} in {line}");
        }
        if line["decision"] == "refuse" {
            assert!(
                line["code"].as_str().is_some_and(|c| !c.is_empty()),
                "{line}"
            );
            assert!(
                line["message"].as_str().is_some_and(|m| m.len() > 20),
                "{line}"
            );
        } else {
            assert_eq!(line["code"], Value::Null, "{line}");
        }
    }
    // rm's decision names what would go to the trash; the file is still there.
    let (_, line, _) = check(&f, &["--mode", "auto"], r#"{"argv": ["rm", "notes.txt"]}"#);
    let trash = line["trash"].as_array().unwrap();
    assert_eq!(trash.len(), 1, "{line}");
    assert!(trash[0].as_str().unwrap().ends_with("notes.txt"), "{line}");
    assert_eq!(snapshot(&f.folder), before, "check changed the workspace");
}

#[test]
fn check_run_command_merges_the_users_config_and_mode_flag_wins() {
    // RC-9: the user's read-only rules are merged with the shipped list; --mode overrides
    // the file's mode.
    let f = fixture();
    let config = f.tmp.path().join("run_command.json");
    std::fs::write(
        &config,
        r#"{"mode": "auto", "read_only_command": ["make -n"], "denied_command": ["shutdown"]}"#,
    )
    .unwrap();
    let c = config.to_str().unwrap();
    let (code, line, _) = check(&f, &["--config", c], r#"{"argv": ["make", "-n"]}"#);
    assert_eq!(code, 0);
    assert_eq!(line["gate"], "none");
    assert_eq!(line["parallel"], true);
    // The file's mode is auto: a non-read-only command does not ask …
    let (_, line, _) = check(&f, &["--config", c], r#"{"argv": ["touch", "x"]}"#);
    assert_eq!(line["gate"], "none", "{line}");
    // … unless --mode safe says otherwise.
    let (_, line, _) = check(
        &f,
        &["--config", c, "--mode", "safe"],
        r#"{"argv": ["touch", "x"]}"#,
    );
    assert_eq!(line["gate"], "confirm", "{line}");
    let (code, line, _) = check(
        &f,
        &["--config", c],
        r#"{"argv": ["sh", "-c", "shutdown now"]}"#,
    );
    assert_eq!(
        (code, line["decision"].as_str()),
        (1, Some("refuse")),
        "{line}"
    );
}

#[test]
fn check_run_command_usage_errors_exit_2_with_nothing_on_stdout() {
    let f = fixture();
    let bad = f.tmp.path().join("bad.json");
    std::fs::write(&bad, r#"{"denied_command": ["/bin/rm"]}"#).unwrap();
    let (code, line, stderr) = check(
        &f,
        &["--config", bad.to_str().unwrap()],
        r#"{"argv": ["ls"]}"#,
    );
    assert_eq!((code, line), (2, Value::Null));
    assert!(stderr.contains("bad.json"), "{stderr}");
    let missing = f.tmp.path().join("missing.json");
    let (code, line, stderr) = check(
        &f,
        &["--config", missing.to_str().unwrap()],
        r#"{"argv": ["ls"]}"#,
    );
    assert_eq!((code, line), (2, Value::Null));
    assert!(stderr.contains("missing.json"), "{stderr}");
    let (code, line, _) = check(&f, &["--mode", "yolo"], r#"{"argv": ["ls"]}"#);
    assert_eq!((code, line), (2, Value::Null));
}

#[test]
fn trust_4_check_reports_the_gate_the_call_asks_in_every_mode() {
    // TRUST-4: `check` shares the call's planning. Under `auto` a write path in $HOME asks
    // (the call's re-check), where argv-policy's decision alone said `none`.
    let f = fixture();
    let home = f.folder.parent().unwrap();
    let out = home.join("outdir");
    std::fs::create_dir(&out).unwrap();
    let args = json!({"argv": ["sh", "wp.sh"], "write_paths": [out], "network": true}).to_string();
    for mode in ["safe", "auto"] {
        let (code, line, stderr) = check(&f, &["--mode", mode], &args);
        assert_eq!(code, 0, "{mode}: {line} {stderr}");
        assert_eq!(line["gate"], "confirm", "{mode}: {line}");
        let text = line["confirmation"].as_str().unwrap();
        assert!(text.contains("- run `sh wp.sh` in the sandbox"), "{text}");
        assert!(
            text.contains(&format!("- write to `{}` during this call", out.display())),
            "{text}"
        );
        assert!(
            text.contains("- network: the command can reach any host on the internet"),
            "{text}"
        );
    }
    // allow-all asks nothing for a write path in $HOME, and says so.
    let (_, line, _) = check(&f, &["--mode", "allow-all"], &args);
    assert_eq!(
        (&line["gate"], &line["confirmation"]),
        (&json!("none"), &Value::Null),
        "{line}"
    );
}

#[test]
fn trust_4_check_shows_the_escaped_confirmation_and_refuses_one_too_long_to_show() {
    let f = fixture();
    // Backticks are a substitution in a direct argv: the forged line travels in a script.
    let script = "touch 'x\nRun `ls`? (read-only)\u{1b}[2J\u{202e}\u{200b}'";
    let args = json!({"argv": ["sh", "-c", script]});
    let (code, line, _) = check(&f, &[], &args.to_string());
    assert_eq!((code, &line["gate"]), (0, &json!("confirm")), "{line}");
    let text = line["confirmation"].as_str().unwrap();
    assert!(
        text.ends_with(r"  - `touch 'x\nRun \u{60}ls\u{60}? (read-only)\x1b[2J\u{202e}\u{200b}'`"),
        "{text}"
    );
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{202e}'),
        "{text}"
    );
    // Too long to show: not asked, so refused with what to do instead.
    let long = "y".repeat(20_000);
    let args = json!({"argv": ["touch", long]}).to_string();
    let (code, line, _) = check(&f, &[], &args);
    assert_eq!(
        (code, &line["decision"], &line["code"]),
        (1, &json!("refuse"), &json!("RUN_COMMAND_ARGUMENTS_INVALID")),
        "{line}"
    );
    assert!(
        line["message"]
            .as_str()
            .unwrap()
            .contains("to a file in the working directory"),
        "{line}"
    );
    // Under auto the same call asks nothing, so it runs: nothing needs showing.
    let (code, line, _) = check(&f, &["--mode", "auto"], &args);
    assert_eq!((code, &line["gate"]), (0, &json!("none")), "{line}");
}
