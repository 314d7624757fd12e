//! Host state: grants persisted and reloaded (PERM-1…PERM-3), written atomically, refused when
//! corrupt, and followed by a running host (TS-3 across processes).

use std::time::{Duration, Instant};

use host_shim::{Host, StateStore};
use toolscope::{Authority, Capability, Tool};

use crate::util::{Fixture, PLUGIN};

#[test]
fn grants_are_persisted_and_reloaded() {
    let f = Fixture::new();
    let host = f.host();
    drop(host);
    let reopened = Host::open(f.store(), "alice".into()).unwrap();
    let grants = reopened.authority().snapshot();
    let record = &grants.plugins[&PLUGIN.parse().unwrap()];
    assert!(record.service_approved && record.user_consent);
    assert!(record.user_allowed.contains(&Capability::TerminalExec));
    assert_eq!(record.folder_grants.iter().next().unwrap().path, f.folder);
    let exec = Tool::new("run")
        .requires(Capability::TerminalExec)
        .requires_folder(&f.folder);
    reopened
        .authority()
        .check(&PLUGIN.parse().unwrap(), &exec)
        .unwrap();
    // The file is the documented JSON shape.
    let text = std::fs::read_to_string(f.state.join("state.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(
        v["grants"]["plugins"][PLUGIN]["userAllowed"],
        serde_json::json!(["local.terminal.exec@1"])
    );
}

#[test]
fn a_failed_update_writes_nothing() {
    let f = Fixture::new();
    let host = f.host();
    let before = std::fs::read(f.state.join("state.json")).unwrap();
    let err = host
        .update_grants(|g| {
            g.plugins.clear();
            Err::<(), _>(host_shim::StateError::Refused("no".into()))
        })
        .unwrap_err();
    assert!(err.to_string().contains("no"));
    assert_eq!(std::fs::read(f.state.join("state.json")).unwrap(), before);
    assert!(
        host.authority()
            .snapshot()
            .plugins
            .contains_key(&PLUGIN.parse().unwrap())
    );
}

#[test]
fn a_corrupt_state_file_is_refused_with_what_to_do() {
    let f = Fixture::new();
    let store = f.store();
    std::fs::write(
        f.state.join("state.json"),
        "{\"version\": 1, \"grants\": {\"plugins\": {}}, \"extra\": 1}",
    )
    .unwrap();
    let err = store.load().unwrap_err();
    assert!(err.to_string().contains("move it away"), "{err}");
    std::fs::write(
        f.state.join("state.json"),
        "{\"version\": 9, \"grants\": {\"plugins\": {}}}",
    )
    .unwrap();
    assert!(store.load().is_err());
    std::fs::write(f.state.join("state.json"), "{\"version\": 1, \"grants\": {\"plugins\": {\"../x\": {\"manifest\": {\"package\": \"p\"}, \"serviceApproved\": true, \"userConsent\": true, \"platformApproval\": null, \"userAllowed\": [], \"folderGrants\": []}}}}").unwrap();
    assert!(store.load().unwrap_err().to_string().contains("not valid"));
}

#[test]
fn a_running_host_follows_changes_made_by_another_process() {
    // TS-3 across processes: `agent-exec revoke` writes the file; the host's watch sees it.
    let f = Fixture::new();
    let host = f.host();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        host.watch_state();
        let mut rx = host.authority().watch();
        rx.mark_unchanged();
        // Another writer: a separate store on the same directory.
        let other = StateStore::open(&f.state).unwrap();
        let start = Instant::now();
        other
            .update(|s| {
                s.grants
                    .plugins
                    .get_mut(&PLUGIN.parse().unwrap())
                    .unwrap()
                    .user_consent = false;
                Ok(())
            })
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), rx.changed())
            .await
            .unwrap()
            .unwrap();
        eprintln!("state change seen after {:?}", start.elapsed());
        assert!(!host.authority().snapshot().plugins[&PLUGIN.parse().unwrap()].user_consent);
        assert!(
            host.authority()
                .check(&PLUGIN.parse().unwrap(), &Tool::new("read"))
                .is_err()
        );
    });
}

#[test]
fn plugin_ids_that_cannot_name_a_folder_are_refused() {
    for bad in ["", ".hidden", "a/b", "..", "x y", &"a".repeat(65)] {
        assert!(host_shim::check_plugin_id(bad).is_err(), "{bad:?}");
    }
    for good in ["notes", "com.example.notes", "a_b-c.1"] {
        host_shim::check_plugin_id(good).unwrap();
    }
}

/// Issue 15 review: a state directory (or its `mirrors/`) another user owns or may write is
/// refused — grants are read from it and call dirs swept in it — with what to do instead.
#[test]
fn a_state_dir_others_may_write_or_own_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let open = |p: &std::path::Path| {
        host_shim::StateStore::open(p)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = open(&shared).unwrap_err();
    assert!(err.contains("writable by group or others"), "{err}");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(open(&shared), Ok(()));
    std::fs::create_dir(shared.join("mirrors")).unwrap();
    std::fs::set_permissions(
        shared.join("mirrors"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    let err = open(&shared).unwrap_err();
    assert!(err.contains("mirrors"), "{err}");
    if rustix::process::geteuid().is_root() {
        let theirs = tmp.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65533), Some(65533)).unwrap();
        let err = open(&theirs).unwrap_err();
        assert!(err.contains("belongs to uid 65533"), "{err}");
    }
}

#[test]
fn a_kept_mirror_record_whose_mirror_is_gone_is_removed_when_the_next_is_kept() {
    // Issue's orphaned `.kept.json` records: a record outlives its mirror only until the next
    // mirror is kept.
    let f = Fixture::new();
    let store = f.store();
    let mirrors = store.mirrors_dir().unwrap();
    std::fs::write(mirrors.join("gone-kept-1-2-3.kept.json"), "{}").unwrap();
    let kept = mirrors.join("ws-kept-1796000000000-1-0");
    std::fs::create_dir(&kept).unwrap();
    std::fs::write(kept.join("a.txt"), "x").unwrap();
    store.record_kept_mirror(&kept, &f.folder, host_shim::KeptWhy::Failed);
    assert!(!mirrors.join("gone-kept-1-2-3.kept.json").exists());
    assert!(mirrors.join("ws-kept-1796000000000-1-0.kept.json").exists());
    assert_eq!(store.kept_mirrors().len(), 1);
}

#[test]
fn a_dead_session_s_background_logs_are_removed_at_the_next_start_and_a_live_one_s_stay() {
    // Issue's `kill -9` of `agent-exec mcp`: its logs go at the next start, not at some later
    // session's first background task.
    let f = Fixture::new();
    let store = f.store();
    let sessions = store.dir().join("sessions");
    for name in ["dead", "live"] {
        std::fs::create_dir_all(sessions.join(name).join("background")).unwrap();
        std::fs::write(sessions.join(name).join("background/bg-1.log"), "out").unwrap();
        std::fs::write(sessions.join(name).join(".lock"), "").unwrap();
    }
    let held = std::fs::File::open(sessions.join("live/.lock")).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();
    drop(Host::open(store, "alice".into()).unwrap());
    assert!(!sessions.join("dead").exists());
    assert!(sessions.join("live/background/bg-1.log").exists());
}
