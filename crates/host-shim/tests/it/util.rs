//! Test helpers: a fixture folder with a state directory, a host with a granted plugin, the
//! `agent-exec` binary runner, and the survivor check every process-starting test ends with.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use host_shim::{AgentConfig, Host, PluginRecord, StateStore};
use serde_json::{Value, json};
use toolscope::{Capability, FolderGrant};

pub const PLUGIN: &str = "notes";

/// A temp dir holding `folder/` (the user's folder) and `state/`.
pub struct Fixture {
    pub tmp: tempfile::TempDir,
    pub folder: PathBuf,
    pub state: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let folder = base.join("folder");
        std::fs::create_dir(&folder).unwrap();
        let state = base.join("state");
        Fixture { tmp, folder, state }
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let p = self.folder.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(p, content).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.folder.join(rel)).unwrap()
    }

    pub fn store(&self) -> StateStore {
        StateStore::open(&self.state).unwrap()
    }

    /// A host whose state holds `notes`, fully granted (exec too) with the folder.
    pub fn host(&self) -> Host {
        let host = Host::open(self.store(), "alice".into()).unwrap();
        let folder = self.folder.clone();
        host.update_grants(|g| {
            let mut record = PluginRecord::fully_granted("notes@1", &[Capability::TerminalExec]);
            record.folder_grants.insert(FolderGrant { path: folder });
            g.plugins.insert(PLUGIN.parse().unwrap(), record);
            Ok(())
        })
        .unwrap();
        host
    }

    pub fn config(&self, kind: &str, tools: &[&str]) -> AgentConfig {
        let tools: Vec<Value> = tools.iter().map(|t| json!({"ref": t})).collect();
        let workspace = if kind == "app-private" {
            json!({"kind": kind})
        } else {
            json!({"kind": kind, "path": self.folder})
        };
        AgentConfig::from_value(&json!({
            "schemaVersion": 2,
            "systemPrompt": "test",
            "tools": tools,
            "workspace": workspace,
            "memory": "session",
            "mode": "yolo",
        }))
        .unwrap()
    }
}

/// PIDs of live processes whose working directory is under `dir` (our tools' processes run in a
/// workspace or mirror under the fixture). Zombies count as gone: proctree's reading of
/// `/proc/<pid>/stat` decides, the one parser the workspace has.
pub fn survivors(dir: &Path) -> Vec<u32> {
    let me = std::process::id();
    let table = proctree::ProcessTable::read().unwrap();
    table
        .entries()
        .iter()
        .filter(|e| e.state == proctree::ProcessState::Alive && e.id.pid() != me)
        .map(|e| e.id.pid())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(dir))
        })
        .collect()
}

pub fn assert_no_survivors(dir: &Path) {
    // The tools reap before they return; allow the kernel a moment to finish tearing down.
    for _ in 0..50 {
        if survivors(dir).is_empty() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!(
        "processes survived under {}: {:?}",
        dir.display(),
        survivors(dir)
    );
}

/// Whether the exec sandbox can run here; when not, it says why and the caller returns (or,
/// where `AGENT_EXEC_REQUIRE` names what is missing, the test fails).
pub use testkit::sandbox_available;

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
