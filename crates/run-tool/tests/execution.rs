//! End to end: awk, wc, sort and diff really run under the sandbox through `run_tool::run`
//! (RUN-6…RUN-12). Each test skips loudly when the machine cannot sandbox, and each one that
//! starts a process checks that none survived (house rule 4): awk scripts carry a unique
//! `100.<digits>` marker in their file name, which is in awk's command line.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod support;

use std::time::Duration;

use run_tool::{AgentRunArguments, AgentRunOutput};
use serde_json::{Value, json};
use support::{Fixture, alive_with, marker, sandbox_available};
use toolscope::{CallContext, CancelReason, ErrorCode, ToolError};

async fn call(f: &Fixture, args: Value) -> Result<AgentRunOutput, ToolError> {
    let (ctx, _h) = CallContext::standalone();
    run_tool::run(
        AgentRunArguments::from_json(args).unwrap(),
        f.lease.clone(),
        &ctx,
    )
    .await
}

/// Writes an awk script whose name carries a fresh marker; returns (name, marker).
fn script(f: &Fixture, body: &str) -> (String, String) {
    let m = marker();
    let name = format!("s-{m}.awk");
    f.write(&name, body);
    (name, m)
}

#[tokio::test]
async fn wc_counts_lines_of_a_file_in_the_mirror() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("data.csv", "a\nb\nc\n");
    let out = call(&f, json!({"program": "wc", "args": ["-l", "data.csv"]}))
        .await
        .unwrap();
    assert_eq!(
        out,
        AgentRunOutput {
            program: "wc".into(),
            exit_code: 0,
            stdout: "3 data.csv\n".into(),
            stderr: String::new(),
            truncated: false,
            denials: Vec::new(),
        }
    );
}

#[tokio::test]
async fn files_named_like_options_reach_the_program_as_files() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("--help", "one\n");
    f.write("-n", "one\ntwo\n");
    let out = call(
        &f,
        json!({"program": "wc", "args": ["-l", "./--help", "./-n"]}),
    )
    .await
    .unwrap();
    assert_eq!(out.stdout, " 1 ./--help\n 2 ./-n\n 3 total\n");
    let out = call(&f, json!({"program": "sort", "args": ["-r", "./-n"]}))
        .await
        .unwrap();
    assert_eq!(out.stdout, "two\none\n");
}

#[tokio::test]
async fn awk_reads_an_operand_with_equals_as_a_file() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("x=1", "line\n");
    let (s, _) = script(
        &f,
        "{ print FILENAME \": \" $0 } END { print \"x is\", x + 0 }\n",
    );
    let out = call(&f, json!({"program": "awk", "args": ["-f", s, "x=1"]}))
        .await
        .unwrap();
    assert_eq!(out.stdout, "./x=1: line\nx is 0\n");
}

#[tokio::test]
async fn sort_orders_numerically_in_reverse_and_uniquely() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("sub/n.txt", "10\n9\n100\n9\n");
    let out = call(
        &f,
        json!({"program": "sort", "args": ["-n", "-r", "-u", "n.txt"], "cwdRelative": "sub"}),
    )
    .await
    .unwrap();
    assert_eq!(out.stdout, "100\n10\n9\n");
}

#[tokio::test]
async fn diff_exit_one_is_a_success_and_zero_means_equal() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("a", "1\n2\n");
    f.write("b", "1\n3\n");
    let out = call(&f, json!({"program": "diff", "args": ["-u", "a", "b"]}))
        .await
        .unwrap();
    assert_eq!(out.exit_code, 1);
    assert!(out.stdout.contains("-2\n+3\n"), "{}", out.stdout);
    let out = call(&f, json!({"program": "diff", "args": ["-q", "a", "a"]}))
        .await
        .unwrap();
    assert_eq!(out.exit_code, 0);
    assert_eq!(out.stdout, "");
}

#[tokio::test]
async fn awk_may_write_regular_files_inside_the_mirror() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("in.txt", "a\nb\n");
    let (s, _) = script(&f, "{ n++ } END { print n > \"out/count.txt\" }\n");
    std::fs::create_dir(f.mirror.join("out")).unwrap();
    let out = call(&f, json!({"program": "awk", "args": ["-f", s, "in.txt"]}))
        .await
        .unwrap();
    assert_eq!(out.stdout, "");
    assert_eq!(
        std::fs::read_to_string(f.mirror.join("out/count.txt")).unwrap(),
        "2\n"
    );
}

#[tokio::test]
async fn non_zero_exit_is_failed_with_the_bounded_output() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("in.txt", "a\n");
    let (s, m) = script(
        &f,
        "{ print \"seen \" $0; print \"bad\" > \"/dev/stderr\"; exit 3 }\n",
    );
    let err = call(&f, json!({"program": "awk", "args": ["-f", s, "in.txt"]}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ExecFailed, "{err}");
    let d = err.details();
    assert_eq!(d["exitCode"], json!(3));
    assert_eq!(d["program"], json!("awk"));
    assert_eq!(d["stdout"], json!("seen a\n"));
    assert_eq!(d["truncated"], json!(false));
    assert!(alive_with(&m).is_empty());
}

#[tokio::test]
async fn stdout_past_64_kib_kills_the_program_with_output_limit() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("in.txt", "a\n");
    let (s, m) = script(&f, "BEGIN { while (1) print \"0123456789abcdef\" }\n");
    let err = call(&f, json!({"program": "awk", "args": ["-f", s, "in.txt"]}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ExecOutputLimit, "{err}");
    assert_eq!(err.details()["stream"], json!("stdout"));
    assert!(alive_with(&m).is_empty(), "survivors: {:?}", alive_with(&m));
}

#[tokio::test]
async fn stderr_past_64_kib_also_fails_with_output_limit() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("in.txt", "a\n");
    let (s, m) = script(
        &f,
        "BEGIN { while (1) print \"0123456789abcdef\" > \"/dev/stderr\" }\n",
    );
    let err = call(&f, json!({"program": "awk", "args": ["-f", s, "in.txt"]}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ExecOutputLimit, "{err}");
    assert_eq!(err.details()["stream"], json!("stderr"));
    assert!(alive_with(&m).is_empty());
}

#[tokio::test]
async fn output_of_exactly_64_kib_is_kept_whole() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let line = format!("{}\n", "x".repeat(1023));
    f.write("big.txt", line.repeat(64));
    let out = call(&f, json!({"program": "sort", "args": ["big.txt"]}))
        .await
        .unwrap();
    assert_eq!(out.stdout.len(), 64 * 1024);
    assert!(!out.truncated);
}

#[tokio::test]
async fn timeout_stops_the_program() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("in.txt", "a\n");
    let (s, m) = script(&f, "BEGIN { while (1) {} }\n");
    let err = call(
        &f,
        json!({"program": "awk", "args": ["-f", s, "in.txt"], "timeoutMs": 300}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ExecTimeout, "{err}");
    assert_eq!(err.details()["timeoutMs"], json!(300));
    assert!(alive_with(&m).is_empty(), "survivors: {:?}", alive_with(&m));
}

#[tokio::test]
async fn cancellation_stops_the_program_and_says_cancelled() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("in.txt", "a\n");
    let (s, m) = script(&f, "BEGIN { while (1) {} }\n");
    let (ctx, handle) = CallContext::standalone();
    let args = AgentRunArguments::from_json(json!({"program": "awk", "args": ["-f", s, "in.txt"]}))
        .unwrap();
    let canceller = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let running = alive_with(&m).len();
        handle.cancel(CancelReason::Requested);
        running
    };
    let (result, running) = tokio::join!(run_tool::run(args, f.lease.clone(), &ctx), canceller);
    assert_eq!(running, 1, "awk was running when cancelled");
    assert_eq!(result.unwrap_err().code(), ErrorCode::ExecCancelled);
    assert!(alive_with(&m).is_empty(), "survivors: {:?}", alive_with(&m));
}

#[tokio::test]
async fn dropping_the_call_stops_the_program() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("in.txt", "a\n");
    let (s, m) = script(&f, "BEGIN { while (1) {} }\n");
    let dropped = tokio::time::timeout(
        Duration::from_millis(300),
        call(&f, json!({"program": "awk", "args": ["-f", s, "in.txt"]})),
    )
    .await;
    assert!(dropped.is_err(), "the run was still going when dropped");
    assert!(alive_with(&m).is_empty(), "survivors: {:?}", alive_with(&m));
}

#[tokio::test]
async fn environment_is_exactly_run_8_with_a_private_home_outside_the_mirror() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("in.txt", "a\n");
    let (s, _) = script(
        &f,
        "BEGIN { for (k in ENVIRON) n++; print n; print ENVIRON[\"PATH\"] \"|\" ENVIRON[\"LC_ALL\"]; \
         print ENVIRON[\"HOME\"]; print ENVIRON[\"TMPDIR\"]; r = (getline line < \"-\"); print \"stdin \" r }\n",
    );
    let stdout = call(&f, json!({"program": "awk", "args": ["-f", s, "in.txt"]}))
        .await
        .unwrap()
        .stdout;
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"4"), "{stdout}");
    assert_eq!(lines[1], "|C");
    let home = std::path::Path::new(lines[2]);
    let tmp = std::path::Path::new(lines[3]);
    assert!(home.is_absolute() && home.ends_with("home"), "{stdout}");
    assert!(tmp.ends_with("tmp") && tmp.parent() == home.parent());
    assert!(!home.starts_with(&f.mirror));
    assert_eq!(lines[4], "stdin 0", "stdin reads see EOF");
    assert!(
        !home.parent().unwrap().exists(),
        "the private temp dir is removed afterwards"
    );
}

#[tokio::test]
async fn the_sandbox_denies_other_processes_outside_files_and_the_network() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("in.txt", "a\n");
    let outside = f.dir.path().join("outside.txt");
    std::fs::write(&outside, "secret\n").unwrap();
    // Paths are data in the script file, never in a profile (invariant 6).
    let (s, m) = script(
        &f,
        &format!(
            "BEGIN {{\n\
             r = system(\"/usr/bin/touch made\"); print \"system \" (r == 0)\n\
             r = (getline l < \"/etc/shadow\"); print \"shadow \" r\n\
             r = (getline l < \"{out}\"); print \"outside \" r\n\
             r = (getline l < \"/etc/passwd\"); print \"passwd \" r\n\
             print \"x\" > \"{dir}/written.txt\"\n\
             print \"done\"\n\
             }}\n",
            out = outside.display(),
            dir = f.dir.path().display()
        ),
    );
    let result = call(&f, json!({"program": "awk", "args": ["-f", s, "in.txt"]})).await;
    let stdout = match &result {
        Ok(out) => out.stdout.clone(),
        Err(e) => e.details()["stdout"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    };
    assert!(
        !f.mirror.join("made").exists(),
        "system() started a process: {stdout}"
    );
    assert!(stdout.contains("shadow -1"), "{stdout}");
    assert!(stdout.contains("outside -1"), "{stdout}");
    assert!(stdout.contains("passwd -1"), "{stdout}");
    assert!(!f.dir.path().join("written.txt").exists(), "{result:?}");
    assert!(alive_with(&m).is_empty());
}
