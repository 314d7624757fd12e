//! The grant rules of `GrantChange::apply`, the one function `agent-exec grant`/`revoke` and a
//! host's own settings use (PERM-1…PERM-3).

use std::path::PathBuf;

use host_shim::{GrantChange, Permission};
use toolscope::{Capability, Grants, PluginId, PluginManifest, Requires};

const CAP: Capability = Capability::TerminalExec;

fn manifest(package: &str) -> PluginManifest {
    PluginManifest {
        package: package.into(),
        requires: Requires {
            host_capabilities: vec![CAP.to_string()],
        },
        permissions: vec![CAP.to_string()],
    }
}

fn installed() -> (Grants, PluginId) {
    let mut grants = Grants::default();
    let id: PluginId = "notes".parse::<host_shim::PluginId>().unwrap();
    GrantChange::Install(manifest("notes@1"))
        .apply(&mut grants, &id)
        .unwrap();
    (grants, id)
}

#[test]
fn an_approval_of_an_older_package_approves_nothing_and_approving_starts_over() {
    let (mut grants, id) = installed();
    GrantChange::Grant(Permission::PlatformApproval(CAP))
        .apply(&mut grants, &id)
        .unwrap();
    GrantChange::Install(manifest("notes@2"))
        .apply(&mut grants, &id)
        .unwrap();
    let old = grants.plugins[&id].platform_approval.clone().unwrap();
    assert_eq!(
        old.package, "notes@1",
        "the old approval names the old package"
    );
    GrantChange::Grant(Permission::PlatformApproval(CAP))
        .apply(&mut grants, &id)
        .unwrap();
    let new = grants.plugins[&id].platform_approval.clone().unwrap();
    assert_eq!(new.package, "notes@2");
    assert_eq!(new.capabilities.into_iter().collect::<Vec<_>>(), [CAP]);
}

#[test]
fn everything_declared_is_granted_and_revoked_but_folders_stay() {
    let (mut grants, id) = installed();
    let folder = PathBuf::from("/srv/notes");
    for change in [
        GrantChange::Grant(Permission::Folder(folder.clone())),
        GrantChange::Grant(Permission::Declared),
    ] {
        change.apply(&mut grants, &id).unwrap();
    }
    let record = &grants.plugins[&id];
    assert!(record.service_approved && record.user_consent);
    assert!(record.user_allowed.contains(&CAP));
    assert_eq!(
        record.platform_approval.as_ref().unwrap().package,
        "notes@1"
    );
    GrantChange::Revoke(Permission::Declared)
        .apply(&mut grants, &id)
        .unwrap();
    let record = &grants.plugins[&id];
    assert!(!record.service_approved && !record.user_consent);
    assert!(record.user_allowed.is_empty() && record.platform_approval.is_none());
    assert_eq!(record.folder_grants.len(), 1, "folders stay");
}

#[test]
fn revoking_a_folder_the_plugin_does_not_hold_is_refused_and_changes_nothing() {
    let (mut grants, id) = installed();
    let before = grants.clone();
    let err = GrantChange::Revoke(Permission::Folder("/srv/typo".into()))
        .apply(&mut grants, &id)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("holds no grant for /srv/typo; `agent-exec status` lists its folders"),
        "{err}"
    );
    assert_eq!(grants, before);
}

#[test]
fn a_change_to_a_plugin_that_is_not_installed_is_refused_with_how_to_install_it() {
    let mut grants = Grants::default();
    let id: PluginId = "ghost".parse::<host_shim::PluginId>().unwrap();
    for change in [
        GrantChange::Uninstall,
        GrantChange::Grant(Permission::UserConsent),
        GrantChange::Revoke(Permission::UserAllowance(CAP)),
    ] {
        let err = change.apply(&mut grants, &id).unwrap_err();
        assert_eq!(
            err.code(),
            toolscope::ErrorCode::ExecArgumentsInvalid,
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("plugin ghost is not installed; install it first with `agent-exec grant plugin ghost"),
            "{err}"
        );
    }
    assert_eq!(grants, Grants::default());
}
