//! Test helpers: a fixture folder with a state directory, a host with a granted plugin, and
//! the survivor check every process-starting test ends with. The `agent-exec` binary's tests
//! use this file too (`crates/agent-exec/tests/it/util.rs`), with the binary runner beside it.

use std::path::{Path, PathBuf};

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

    /// A session of `notes` on [`Fixture::host`] with [`Fixture::config`].
    pub fn session(&self, kind: &str, tools: &[&str]) -> host_shim::Session {
        self.host()
            .session(PLUGIN.parse().unwrap(), self.config(kind, tools))
            .unwrap()
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
/// workspace or mirror under the fixture). Zombies count as gone.
pub fn survivors(dir: &Path) -> Vec<u32> {
    let me = std::process::id();
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cwd) = std::fs::read_link(entry.path().join("cwd")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(true);
        if cwd.starts_with(dir) && !zombie {
            out.push(pid);
        }
    }
    out
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

/// Whether the exec sandbox can run here; when not, the caller prints why and returns.
pub fn sandbox_available() -> bool {
    let report = host_shim::doctor::report();
    let ok = report["sandbox"]["enforced"] == json!(true);
    if !ok {
        eprintln!("skipped: the sandbox is not available here: {report}");
    }
    ok
}
