//! Grants as plain data: the plugin manifest, the platform's approval, the user's consent and
//! folder grants, and the one pure function that decides whether a tool may run (PERM-1, PERM-2,
//! PERM-3, TS-5).
//!
//! Nothing here watches or caches: [`crate::Authority`] implementations call [`Grants::check`]
//! (or their own logic) every time the gate asks, which is what makes re-checks real.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::capability::Capability;
use crate::error::{ErrorCode, ToolError};

/// The installed plugin (agent) a turn runs for: an id that can only hold a valid one.
///
/// Valid means usable as one directory name on every platform the host runs on, because the
/// plugin's private folder is `private/<id>`: 1 to 64 ASCII letters, digits, `.`, `_` or `-`,
/// not starting with `.` (so never `.`, `..` or a hidden name, never a `/`). Construction goes
/// through [`PluginId::parse`] (or `TryFrom`/`FromStr`), and deserialisation through the same
/// check, so a state file with a bad id does not load.
///
/// ```
/// use toolscope::PluginId;
/// let id = PluginId::parse("com.example.notes").unwrap();
/// assert_eq!(id.as_str(), "com.example.notes");
/// assert!(PluginId::parse("../etc").is_err());
/// assert!(serde_json::from_str::<PluginId>(r#"".hidden""#).is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PluginId(String);

/// Why a text is not a [`PluginId`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "plugin id {id:?} is not valid; use 1 to 64 letters, digits, `.`, `_` or `-`, not starting with `.`"
)]
pub struct PluginIdError {
    id: String,
}

impl PluginIdError {
    /// The refused text.
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// Longest plugin id, in bytes.
const MAX_PLUGIN_ID_LEN: usize = 64;

impl PluginId {
    /// `id` as a plugin id, if it is a valid one (see [`PluginId`]).
    ///
    /// # Errors
    /// [`PluginIdError`] naming the refused text.
    pub fn parse(id: &str) -> Result<PluginId, PluginIdError> {
        Self::valid(id)
            .then(|| PluginId(id.to_owned()))
            .ok_or_else(|| PluginIdError { id: id.to_owned() })
    }

    fn valid(id: &str) -> bool {
        !id.is_empty()
            && id.len() <= MAX_PLUGIN_ID_LEN
            && !id.starts_with('.')
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PluginId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for PluginId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for PluginId {
    type Err = PluginIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PluginId::parse(s)
    }
}

impl TryFrom<&str> for PluginId {
    type Error = PluginIdError;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        PluginId::parse(s)
    }
}

impl TryFrom<String> for PluginId {
    type Error = PluginIdError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        if PluginId::valid(&s) {
            Ok(PluginId(s))
        } else {
            Err(PluginIdError { id: s })
        }
    }
}

impl From<PluginId> for String {
    fn from(id: PluginId) -> String {
        id.0
    }
}

/// The parts of a plugin manifest the gate reads.
///
/// Capabilities stay text here: a manifest may declare capabilities this host does not know, and
/// that must not make the whole manifest unreadable. Only exact text matches count.
///
/// ```
/// let manifest: toolscope::PluginManifest = serde_json::from_str(r#"{
///     "package": "com.example.notes@1.4.0",
///     "requires": { "hostCapabilities": ["local.terminal.exec@1"] },
///     "permissions": ["local.terminal.exec@1", "system.notifications@1"]
/// }"#).unwrap();
/// assert!(manifest.declares(toolscope::Capability::TerminalExec));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginManifest {
    /// The current package identity (name and version or digest; opaque to this crate). The
    /// platform's approval is only valid for this exact package (PERM-2).
    pub package: String,
    /// `requires`.
    #[serde(default)]
    pub requires: Requires,
    /// `permissions`.
    #[serde(default)]
    pub permissions: Vec<String>,
}

/// The manifest's `requires` object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requires {
    /// `requires.hostCapabilities`.
    #[serde(rename = "hostCapabilities", default)]
    pub host_capabilities: Vec<String>,
}

impl PluginManifest {
    /// True when `capability` is declared in both `requires.hostCapabilities` and `permissions`
    /// (PERM-2).
    pub fn declares(&self, capability: Capability) -> bool {
        self.missing_declaration(capability).is_none()
    }

    /// The first list that lacks `capability`, if any.
    fn missing_declaration(&self, capability: Capability) -> Option<&'static str> {
        let listed = |list: &[String]| list.iter().any(|c| c == capability.as_str());
        if !listed(&self.requires.host_capabilities) {
            Some("requires.hostCapabilities")
        } else if !listed(&self.permissions) {
            Some("permissions")
        } else {
            None
        }
    }
}

/// The platform's approval of capabilities for one package (PERM-2).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlatformApproval {
    /// The package the platform reviewed; an approval of another package (an older version)
    /// approves nothing.
    pub package: String,
    /// The approved capabilities.
    pub capabilities: BTreeSet<Capability>,
}

/// A folder the user picked and granted through `system.folder-pick@1` (PERM-3, PERM-5): the
/// plugin's directory-grant record. The gate does not re-check the folder-pick capability itself;
/// the record is the evidence that the pick happened.
///
/// Paths are compared as given, byte for byte: this crate never touches the file system, so the
/// host passes the path exactly as its grant record holds it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FolderGrant {
    /// The granted folder.
    pub path: PathBuf,
}

/// Everything the host holds about one plugin's permissions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginRecord {
    /// The installed manifest.
    pub manifest: PluginManifest,
    /// The plugin holds the current Agent service approval (PERM-1).
    pub service_approved: bool,
    /// The user consented to the plugin (PERM-1).
    pub user_consent: bool,
    /// The platform's capability approval, if any (PERM-2).
    pub platform_approval: Option<PlatformApproval>,
    /// Capabilities the user explicitly allowed (PERM-2).
    pub user_allowed: BTreeSet<Capability>,
    /// Folders the user granted (PERM-3).
    pub folder_grants: BTreeSet<FolderGrant>,
}

impl PluginRecord {
    /// A record in which `capabilities` are declared, approved for the package and allowed by
    /// the user, with service approval and consent given: the happy path hosts and tests start
    /// from, then take pieces away.
    pub fn fully_granted(package: &str, capabilities: &[Capability]) -> Self {
        let names: Vec<String> = capabilities.iter().map(|c| c.as_str().to_owned()).collect();
        PluginRecord {
            manifest: PluginManifest {
                package: package.to_owned(),
                requires: Requires {
                    host_capabilities: names.clone(),
                },
                permissions: names,
            },
            service_approved: true,
            user_consent: true,
            platform_approval: Some(PlatformApproval {
                package: package.to_owned(),
                capabilities: capabilities.iter().copied().collect(),
            }),
            user_allowed: capabilities.iter().copied().collect(),
            folder_grants: BTreeSet::new(),
        }
    }
}

/// Every plugin's record: the state an in-memory authority holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grants {
    /// Records by plugin.
    pub plugins: BTreeMap<PluginId, PluginRecord>,
}

/// A tool as the gate sees it: a name and what it needs to run.
///
/// ```
/// use toolscope::{Capability, Tool};
/// // TS-5: both exec tools need `local.terminal.exec@1`; `run` also needs its folder grant.
/// let run = Tool::new("run").requires(Capability::TerminalExec).requires_folder("/home/u/notes");
/// assert_eq!(run.name(), "run");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tool {
    name: String,
    capabilities: BTreeSet<Capability>,
    folders: BTreeSet<PathBuf>,
}

impl Tool {
    /// A tool that needs only the plugin's service approval and the user's consent (PERM-1).
    pub fn new(name: impl Into<String>) -> Self {
        Tool {
            name: name.into(),
            capabilities: BTreeSet::new(),
            folders: BTreeSet::new(),
        }
    }

    /// Also needs `capability` declared, platform-approved and user-allowed (PERM-2).
    #[must_use]
    pub fn requires(mut self, capability: Capability) -> Self {
        self.capabilities.insert(capability);
        self
    }

    /// Also needs a folder grant for exactly `path` (PERM-3).
    #[must_use]
    pub fn requires_folder(mut self, path: impl Into<PathBuf>) -> Self {
        self.folders.insert(path.into());
        self
    }

    /// The tool's name (its `ref`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The capabilities it needs.
    pub fn capabilities(&self) -> impl Iterator<Item = Capability> + '_ {
        self.capabilities.iter().copied()
    }

    /// The folders it needs granted.
    pub fn folders(&self) -> impl Iterator<Item = &std::path::Path> + '_ {
        self.folders.iter().map(PathBuf::as_path)
    }
}

/// Why a tool may not run now. Each message says what to do instead; converted to
/// `AGENT_PERMISSION_DENIED` by `From<Denial> for ToolError`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Denial {
    /// The host knows no such plugin.
    #[error("plugin {plugin} is not installed on this host; install it before calling its tools")]
    UnknownPlugin {
        /// The plugin.
        plugin: PluginId,
    },
    /// PERM-1: no current Agent service approval.
    #[error(
        "plugin {plugin} does not hold the current Agent service approval; have the platform \
         approve it, then call again"
    )]
    ServiceNotApproved {
        /// The plugin.
        plugin: PluginId,
    },
    /// PERM-1: the user has not consented to the plugin (or withdrew consent).
    #[error(
        "the user has not consented to plugin {plugin}; ask the user to consent in the host, \
         then call again"
    )]
    NoUserConsent {
        /// The plugin.
        plugin: PluginId,
    },
    /// PERM-2: the manifest lacks the capability in one of its two lists.
    #[error(
        "plugin {plugin} does not declare {capability} in {list}; declare it in both \
         requires.hostCapabilities and permissions and reinstall the plugin"
    )]
    CapabilityNotDeclared {
        /// The plugin.
        plugin: PluginId,
        /// The capability.
        capability: Capability,
        /// `requires.hostCapabilities` or `permissions`.
        list: &'static str,
    },
    /// PERM-2: the platform has not approved the capability for the current package.
    #[error(
        "the platform has not approved {capability} for package {package} of plugin {plugin}; \
         submit this package version for approval, then call again"
    )]
    CapabilityNotApproved {
        /// The plugin.
        plugin: PluginId,
        /// The capability.
        capability: Capability,
        /// The current package.
        package: String,
    },
    /// PERM-2: the user has not explicitly allowed the capability (or took it back).
    #[error(
        "the user has not allowed {capability} for plugin {plugin}; ask the user to allow it \
         in the host, then call again"
    )]
    CapabilityNotAllowed {
        /// The plugin.
        plugin: PluginId,
        /// The capability.
        capability: Capability,
    },
    /// PERM-3: no folder grant for the path (or it was revoked).
    #[error(
        "plugin {plugin} holds no folder grant for {path}; ask the user to pick and grant the \
         folder through system.folder-pick@1, then call again"
    )]
    FolderNotGranted {
        /// The plugin.
        plugin: PluginId,
        /// The folder.
        path: PathBuf,
    },
    /// The authority stopped reporting changes, so a revocation could go unseen: fail closed.
    #[error(
        "the permission authority is no longer reachable, so revocations cannot be watched; \
         restart the turn once the host's authority is back"
    )]
    AuthorityUnavailable,
}

impl From<Denial> for ToolError {
    fn from(denial: Denial) -> Self {
        ToolError::new(ErrorCode::PermissionDenied, denial.to_string())
    }
}

impl Grants {
    /// May `plugin` run `tool` now? Checks, in order: the record exists, service approval and
    /// consent (PERM-1), then per capability both manifest lists, the platform's approval of the
    /// current package and the user's allowance (PERM-2, TS-5), then folder grants (PERM-3).
    ///
    /// ```
    /// use toolscope::{Capability, Denial, Grants, PluginRecord, Tool};
    /// let mut grants = Grants::default();
    /// let mut record = PluginRecord::fully_granted("pkg@1", &[Capability::TerminalExec]);
    /// record.user_allowed.clear();
    /// grants.plugins.insert("notes".parse().unwrap(), record);
    /// let exec = Tool::new("command").requires(Capability::TerminalExec);
    /// assert!(matches!(
    ///     grants.check(&"notes".parse().unwrap(), &exec),
    ///     Err(Denial::CapabilityNotAllowed { .. })
    /// ));
    /// ```
    pub fn check(&self, plugin: &PluginId, tool: &Tool) -> Result<(), Denial> {
        let plugin_id = || plugin.clone();
        let record = self
            .plugins
            .get(plugin)
            .ok_or_else(|| Denial::UnknownPlugin {
                plugin: plugin_id(),
            })?;
        if !record.service_approved {
            return Err(Denial::ServiceNotApproved {
                plugin: plugin_id(),
            });
        }
        if !record.user_consent {
            return Err(Denial::NoUserConsent {
                plugin: plugin_id(),
            });
        }
        for capability in tool.capabilities() {
            if let Some(list) = record.manifest.missing_declaration(capability) {
                return Err(Denial::CapabilityNotDeclared {
                    plugin: plugin_id(),
                    capability,
                    list,
                });
            }
            let approved = record.platform_approval.as_ref().is_some_and(|a| {
                a.package == record.manifest.package && a.capabilities.contains(&capability)
            });
            if !approved {
                return Err(Denial::CapabilityNotApproved {
                    plugin: plugin_id(),
                    capability,
                    package: record.manifest.package.clone(),
                });
            }
            if !record.user_allowed.contains(&capability) {
                return Err(Denial::CapabilityNotAllowed {
                    plugin: plugin_id(),
                    capability,
                });
            }
        }
        for path in tool.folders() {
            if !record.folder_grants.iter().any(|g| g.path == path) {
                return Err(Denial::FolderNotGranted {
                    plugin: plugin_id(),
                    path: path.to_path_buf(),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule, written out the slow way, for the property tests to compare against.
    fn names_one_folder(id: &str) -> bool {
        (1..=64).contains(&id.len())
            && !id.starts_with('.')
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    }

    proptest::proptest! {
        #[test]
        fn a_plugin_id_parses_exactly_when_it_names_one_folder(id in "\\PC{0,70}|[a-zA-Z0-9._/-]{0,70}") {
            let parsed = PluginId::parse(&id);
            proptest::prop_assert_eq!(parsed.is_ok(), names_one_folder(&id), "{:?}", id);
            if let Ok(parsed) = parsed {
                proptest::prop_assert_eq!(parsed.as_str(), id.as_str());
                proptest::prop_assert_eq!(PluginId::try_from(id.clone()), Ok(parsed.clone()));
                let json = serde_json::to_string(&parsed).unwrap();
                proptest::prop_assert_eq!(json.clone(), serde_json::to_string(&id).unwrap());
                proptest::prop_assert_eq!(serde_json::from_str::<PluginId>(&json).unwrap(), parsed);
            } else {
                let json = serde_json::to_string(&id).unwrap();
                proptest::prop_assert!(serde_json::from_str::<PluginId>(&json).is_err());
            }
        }
    }

    #[test]
    fn plugin_ids_that_cannot_name_a_folder_are_refused() {
        for bad in [
            "",
            ".hidden",
            "a/b",
            "..",
            "x y",
            "caf\u{e9}",
            &"a".repeat(65),
        ] {
            let err = PluginId::parse(bad).unwrap_err();
            assert_eq!(err.id(), bad);
        }
        for good in ["notes", "com.example.notes", "a_b-c.1", &"a".repeat(64)] {
            assert_eq!(PluginId::parse(good).unwrap().as_str(), good);
        }
    }

    #[test]
    fn a_grants_file_with_a_bad_plugin_id_does_not_load() {
        let bad = r#"{"plugins": {"../x": {}}}"#;
        let err = serde_json::from_str::<Grants>(bad).unwrap_err();
        assert!(
            err.to_string().contains("plugin id \"../x\" is not valid"),
            "{err}"
        );
    }

    const PLUGIN: &str = "notes";
    const FOLDER: &str = "/home/u/notes";

    fn exec_tool() -> Tool {
        Tool::new("run")
            .requires(Capability::TerminalExec)
            .requires_folder(FOLDER)
    }

    fn granted() -> PluginRecord {
        let mut record = PluginRecord::fully_granted("pkg@2", &[Capability::TerminalExec]);
        record.folder_grants.insert(FolderGrant {
            path: FOLDER.into(),
        });
        record
    }

    /// One case: take something away from a fully granted record, expect this denial (or none).
    fn check(change: impl FnOnce(&mut PluginRecord), expected: Option<&str>) {
        let mut record = granted();
        change(&mut record);
        let mut grants = Grants::default();
        grants.plugins.insert(PLUGIN.parse().unwrap(), record);
        let got = grants.check(&PLUGIN.parse().unwrap(), &exec_tool());
        let got_name = got.as_ref().err().map(|d| {
            let debug = format!("{d:?}");
            debug
                .split([' ', '{'])
                .next()
                .unwrap_or_default()
                .to_owned()
        });
        assert_eq!(got_name.as_deref(), expected, "{got:?}");
        if let Err(denial) = got {
            let err = ToolError::from(denial);
            assert_eq!(err.code(), ErrorCode::PermissionDenied);
            assert!(
                err.message().contains("; "),
                "message says what to do: {err}"
            );
        }
    }

    #[test]
    fn exec_tool_runs_only_with_every_grant_in_place() {
        // PERM-1, PERM-2, PERM-3, TS-5.
        check(|_| {}, None);
        check(|r| r.service_approved = false, Some("ServiceNotApproved"));
        check(|r| r.user_consent = false, Some("NoUserConsent"));
        check(
            |r| r.manifest.requires.host_capabilities.clear(),
            Some("CapabilityNotDeclared"),
        );
        check(
            |r| r.manifest.permissions.clear(),
            Some("CapabilityNotDeclared"),
        );
        check(
            |r| r.platform_approval = None,
            Some("CapabilityNotApproved"),
        );
        check(
            |r| {
                // The platform approved an older package; the current one is not approved.
                r.manifest.package = "pkg@3".into();
            },
            Some("CapabilityNotApproved"),
        );
        check(
            |r| {
                if let Some(a) = r.platform_approval.as_mut() {
                    a.capabilities.clear();
                }
            },
            Some("CapabilityNotApproved"),
        );
        check(|r| r.user_allowed.clear(), Some("CapabilityNotAllowed"));
        check(|r| r.folder_grants.clear(), Some("FolderNotGranted"));
        check(
            |r| {
                r.folder_grants.clear();
                r.folder_grants.insert(FolderGrant {
                    path: "/home/u/notes/".into(),
                });
            },
            None, // PathBuf equality ignores a trailing separator.
        );
        check(
            |r| {
                r.folder_grants.clear();
                r.folder_grants.insert(FolderGrant {
                    path: "/home/u".into(),
                });
            },
            Some("FolderNotGranted"),
        );
    }

    #[test]
    fn declaring_in_only_one_list_names_the_missing_list() {
        let mut record = granted();
        record.manifest.permissions = vec!["system.folder-pick@1".into()];
        assert_eq!(
            record
                .manifest
                .missing_declaration(Capability::TerminalExec),
            Some("permissions")
        );
        assert!(!record.manifest.declares(Capability::TerminalExec));
    }

    #[test]
    fn unknown_plugin_is_denied() {
        let grants = Grants::default();
        assert_eq!(
            grants.check(&PLUGIN.parse().unwrap(), &Tool::new("read")),
            Err(Denial::UnknownPlugin {
                plugin: PLUGIN.parse().unwrap()
            })
        );
    }

    #[test]
    fn a_tool_without_capabilities_still_needs_service_approval_and_consent() {
        let mut grants = Grants::default();
        let record = PluginRecord {
            service_approved: true,
            ..PluginRecord::default()
        };
        grants.plugins.insert(PLUGIN.parse().unwrap(), record);
        assert!(matches!(
            grants.check(&PLUGIN.parse().unwrap(), &Tool::new("read")),
            Err(Denial::NoUserConsent { .. })
        ));
    }

    #[test]
    fn grants_round_trip_through_json_for_persistence() {
        let mut grants = Grants::default();
        grants.plugins.insert(PLUGIN.parse().unwrap(), granted());
        let json = serde_json::to_value(&grants).unwrap();
        let record = &json["plugins"][PLUGIN];
        assert_eq!(
            record["userAllowed"],
            serde_json::json!(["local.terminal.exec@1"])
        );
        assert_eq!(
            record["folderGrants"],
            serde_json::json!([{"path": FOLDER}])
        );
        assert_eq!(record["serviceApproved"], true);
        assert_eq!(serde_json::from_value::<Grants>(json).unwrap(), grants);
    }

    #[test]
    fn manifest_json_uses_the_seed_field_names() {
        let manifest: PluginManifest = serde_json::from_value(serde_json::json!({
            "package": "p@1",
            "requires": {"hostCapabilities": ["local.terminal.exec@1", "x.unknown@7"]},
            "permissions": ["local.terminal.exec@1"],
        }))
        .unwrap();
        assert!(manifest.declares(Capability::TerminalExec));
        assert!(!manifest.declares(Capability::FolderPick));
    }
}
