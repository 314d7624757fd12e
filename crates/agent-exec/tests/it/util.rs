//! The `agent-exec` binary runner and the grants made through it, beside the library tests'
//! fixture and survivor check (shared, not copied: `crates/host-shim/tests/it/util.rs`).

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

// The binary's tests use the fixture's folder and state only, not its in-process host.
#[allow(dead_code)]
#[path = "../../../host-shim/tests/it/util.rs"]
mod shared;

pub use shared::{Fixture, assert_no_survivors, sandbox_available, survivors};

pub struct Output {
    pub code: i32,
    pub json: Value,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the built `agent-exec` with `args`, feeding `stdin`; stdout must be exactly one JSON
/// line (or empty for usage errors).
pub fn agent_exec(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent-exec"));
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        let mut input = child.stdin.take().unwrap();
        if let Some(s) = stdin {
            input.write_all(s.as_bytes()).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let code = out.status.code().unwrap_or(-1);
    let json = if stdout.is_empty() {
        Value::Null
    } else {
        assert_eq!(
            stdout.matches('\n').count(),
            1,
            "exactly one line on stdout for {args:?}: {stdout}\nstderr: {stderr}"
        );
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}) for {args:?}: {stdout}"))
    };
    if code != 2 {
        assert_eq!(
            json["ok"] == json!(true),
            code == 0,
            "{args:?}: {stdout} {stderr}"
        );
    }
    Output {
        code,
        json,
        stdout,
        stderr,
    }
}

/// `agent-exec call <tool>` on the fixture's folder and state with `args`.
pub fn call(f: &Fixture, tool: &str, args: Value) -> Output {
    agent_exec(
        &[
            "--state-dir",
            s(&f.state),
            "call",
            tool,
            "--workspace",
            s(&f.folder),
            "--json",
            &args.to_string(),
        ],
        None,
    )
}

/// Does the three grants that let plugin `notes` run tools in the fixture's folder: declared
/// and approved with `local.terminal.exec@1`, everything allowed, the folder granted.
pub fn grant_notes_everything(f: &Fixture) {
    declare_notes(f);
    grant(f, &["grant", "all", "notes"]);
    grant(f, &["grant", "folder", "notes", s(&f.folder)]);
}

/// The first of those grants: plugin `notes` declared and approved with
/// `local.terminal.exec@1`.
pub fn declare_notes(f: &Fixture) {
    grant(
        f,
        &[
            "grant",
            "plugin",
            "notes",
            "--package",
            "notes@1",
            "--declare",
            "local.terminal.exec@1",
        ],
    );
}

/// `agent-exec --state-dir <fixture state> <args>`, which must succeed; its JSON.
pub fn grant(f: &Fixture, args: &[&str]) -> Value {
    let mut all = vec!["--state-dir", s(&f.state)];
    all.extend_from_slice(args);
    let out = agent_exec(&all, None);
    assert_eq!(out.code, 0, "{args:?}: {} {}", out.stdout, out.stderr);
    out.json
}

/// A path as the `&str` argument the CLI takes (fixture paths are UTF-8).
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}
