//! Changes to a plugin's persisted grants, with every grant rule in one place: what
//! `agent-exec grant` and `revoke` do, and what a host's own settings screen does through
//! [`Host::update_grants`](crate::Host::update_grants) or [`StateStore::update`].
//!
//! The rules a bare edit of [`PluginRecord`] would miss:
//!
//! - An approval of an older package approves nothing (PERM-2): approving a capability for a
//!   plugin whose approval names another package starts the approval over for the current
//!   package instead of adding to the old one.
//! - [`Permission::Declared`] grants exactly what the manifest declares (service approval,
//!   consent, each declared capability approved for the current package and allowed); revoking
//!   it takes all of those back and leaves the folder grants.
//! - Revoking a folder the plugin does not hold is refused (a typo must not look like a
//!   successful revocation); every other change needs the plugin installed.

use std::collections::BTreeMap;
use std::path::PathBuf;

use toolscope::{
    Capability, FolderGrant, Grants, PlatformApproval, PluginId, PluginManifest, PluginRecord,
};

use crate::state::StateError;

/// Something a plugin can be granted, and later have revoked.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Permission {
    /// The Agent service approval (PERM-1).
    ServiceApproval,
    /// The user's consent to the plugin (PERM-1).
    UserConsent,
    /// The platform's approval of a capability for the plugin's current package (PERM-2).
    PlatformApproval(Capability),
    /// The user's explicit allowance of a capability (PERM-2).
    UserAllowance(Capability),
    /// A folder the user picked through `system.folder-pick@1` (PERM-3); the caller gives its
    /// canonical path.
    Folder(PathBuf),
    /// Everything the manifest declares: service approval, consent, and each declared
    /// capability approved and allowed. Revoked: all of those; folders stay.
    Declared,
}

/// One change to the grants of one plugin.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GrantChange {
    /// Install the plugin with this manifest, or replace the manifest of an installed one
    /// (its grants stay; an approval of the old package then approves nothing, PERM-2).
    Install(PluginManifest),
    /// Uninstall the plugin: its record and every grant in it go.
    Uninstall,
    /// Grant a permission to an installed plugin.
    Grant(Permission),
    /// Revoke a permission of an installed plugin.
    Revoke(Permission),
}

fn not_installed(id: &PluginId) -> StateError {
    StateError::Refused(format!(
        "plugin {id} is not installed; install it first with `agent-exec grant plugin {id} --manifest <FILE>`"
    ))
}

fn installed<'a>(
    plugins: &'a mut BTreeMap<PluginId, PluginRecord>,
    plugin: &PluginId,
) -> Result<&'a mut PluginRecord, StateError> {
    plugins.get_mut(plugin).ok_or_else(|| not_installed(plugin))
}

impl GrantChange {
    /// Applies the change to `plugin`'s record in `grants`. Refused, leaving `grants` as it
    /// was: any change but [`GrantChange::Install`] of a plugin that is not installed, and the
    /// revocation of a folder it does not hold.
    ///
    /// ```
    /// use host_shim::{GrantChange, Permission};
    /// use toolscope::{Capability, Grants, PluginManifest, Requires};
    ///
    /// let cap = Capability::TerminalExec;
    /// let manifest = |package: &str| PluginManifest {
    ///     package: package.into(),
    ///     requires: Requires { host_capabilities: vec![cap.to_string()] },
    ///     permissions: vec![cap.to_string()],
    /// };
    /// let mut grants = Grants::default();
    /// let id: toolscope::PluginId = "notes".parse().unwrap();
    /// GrantChange::Install(manifest("notes@1")).apply(&mut grants, &id).unwrap();
    /// GrantChange::Grant(Permission::PlatformApproval(cap)).apply(&mut grants, &id).unwrap();
    /// // An update of the package: the old approval approves nothing, approving starts over.
    /// GrantChange::Install(manifest("notes@2")).apply(&mut grants, &id).unwrap();
    /// GrantChange::Grant(Permission::PlatformApproval(cap)).apply(&mut grants, &id).unwrap();
    /// let approval = grants.plugins[&id].platform_approval.clone().unwrap();
    /// assert_eq!(approval.package, "notes@2");
    /// ```
    pub fn apply(&self, grants: &mut Grants, plugin: &PluginId) -> Result<(), StateError> {
        let plugins = &mut grants.plugins;
        match self {
            GrantChange::Install(manifest) => {
                plugins.entry(plugin.clone()).or_default().manifest = manifest.clone();
                Ok(())
            }
            GrantChange::Uninstall => match plugins.remove(plugin) {
                Some(_) => Ok(()),
                None => Err(not_installed(plugin)),
            },
            GrantChange::Grant(permission) => {
                grant(installed(plugins, plugin)?, permission);
                Ok(())
            }
            GrantChange::Revoke(permission) => {
                revoke(installed(plugins, plugin)?, permission, plugin)
            }
        }
    }
}

fn grant(record: &mut PluginRecord, permission: &Permission) {
    match permission {
        Permission::ServiceApproval => record.service_approved = true,
        Permission::UserConsent => record.user_consent = true,
        Permission::PlatformApproval(cap) => {
            let package = &record.manifest.package;
            match &mut record.platform_approval {
                // PERM-2: an approval of an older package approves nothing; start over.
                Some(approval) if approval.package == *package => {
                    approval.capabilities.insert(*cap);
                }
                slot => {
                    *slot = Some(PlatformApproval {
                        package: package.clone(),
                        capabilities: [*cap].into_iter().collect(),
                    });
                }
            }
        }
        Permission::UserAllowance(cap) => {
            record.user_allowed.insert(*cap);
        }
        Permission::Folder(path) => {
            record
                .folder_grants
                .insert(FolderGrant { path: path.clone() });
        }
        Permission::Declared => {
            let declared = declared(record);
            record.service_approved = true;
            record.user_consent = true;
            record.platform_approval = Some(PlatformApproval {
                package: record.manifest.package.clone(),
                capabilities: declared.iter().copied().collect(),
            });
            record.user_allowed.extend(declared);
        }
    }
}

fn revoke(
    record: &mut PluginRecord,
    permission: &Permission,
    plugin: &PluginId,
) -> Result<(), StateError> {
    match permission {
        Permission::ServiceApproval => record.service_approved = false,
        Permission::UserConsent => record.user_consent = false,
        Permission::PlatformApproval(cap) => {
            if let Some(approval) = record.platform_approval.as_mut() {
                approval.capabilities.remove(cap);
            }
        }
        Permission::UserAllowance(cap) => {
            record.user_allowed.remove(cap);
        }
        Permission::Folder(path) => {
            if !record
                .folder_grants
                .remove(&FolderGrant { path: path.clone() })
            {
                return Err(StateError::Refused(format!(
                    "plugin {plugin} holds no grant for {}; `agent-exec status` lists its folders",
                    path.display()
                )));
            }
        }
        Permission::Declared => {
            record.service_approved = false;
            record.user_consent = false;
            record.platform_approval = None;
            record.user_allowed.clear();
        }
    }
    Ok(())
}

/// The capabilities `record`'s manifest declares, in [`Capability::ALL`]'s order.
fn declared(record: &PluginRecord) -> Vec<Capability> {
    Capability::ALL
        .iter()
        .copied()
        .filter(|c| record.manifest.declares(*c))
        .collect()
}
