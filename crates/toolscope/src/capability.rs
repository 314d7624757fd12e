//! Host capabilities named `name@version` (PERM-2, PERM-3).
//!
//! Only capabilities this crate knows are representable: an unknown name or version is an error,
//! never a value that some later check might treat as "close enough".

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

/// A host capability a plugin can declare and a user or platform can approve.
///
/// ```
/// use toolscope::Capability;
/// let cap: Capability = "local.terminal.exec@1".parse().unwrap();
/// assert_eq!(cap, Capability::TerminalExec);
/// assert_eq!(cap.to_string(), "local.terminal.exec@1");
/// assert!("local.terminal.exec@2".parse::<Capability>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Capability {
    /// `local.terminal.exec@1`: both exec tools need it (TS-5, PERM-2).
    TerminalExec,
    /// `system.folder-pick@1`: the user picks and grants a folder (PERM-3).
    FolderPick,
}

impl Capability {
    /// Every known capability.
    pub const ALL: &'static [Capability] = &[Capability::TerminalExec, Capability::FolderPick];

    /// The exact `name@version` text.
    pub const fn as_str(self) -> &'static str {
        match self {
            Capability::TerminalExec => "local.terminal.exec@1",
            Capability::FolderPick => "system.folder-pick@1",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a capability string was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CapabilityError {
    /// Not of the form `name@version` (lowercase dotted name, decimal version without leading
    /// zeros).
    #[error(
        "capability {input:?} is not of the form name@version (e.g. \"local.terminal.exec@1\"); \
         write the name in lowercase, then @, then the version number"
    )]
    Malformed {
        /// The refused text.
        input: String,
    },
    /// Well formed, but not a capability this host offers.
    #[error(
        "capability {input:?} is not one this host offers; use one of: local.terminal.exec@1, \
         system.folder-pick@1"
    )]
    Unknown {
        /// The refused text.
        input: String,
    },
}

fn is_well_formed(s: &str) -> bool {
    let Some((name, version)) = s.split_once('@') else {
        return false;
    };
    let name_ok = !name.is_empty()
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        });
    let version_ok = !version.is_empty()
        && version.bytes().all(|b| b.is_ascii_digit())
        && !(version.len() > 1 && version.starts_with('0'));
    name_ok && version_ok
}

impl FromStr for Capability {
    type Err = CapabilityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if !is_well_formed(s) {
            return Err(CapabilityError::Malformed {
                input: s.to_owned(),
            });
        }
        Capability::ALL
            .iter()
            .copied()
            .find(|cap| cap.as_str() == s)
            .ok_or_else(|| CapabilityError::Unknown {
                input: s.to_owned(),
            })
    }
}

impl Serialize for Capability {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Capability {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(input: &str, expected: Result<Capability, &str>) {
        let got = input.parse::<Capability>();
        match (got, expected) {
            (Ok(cap), Ok(want)) => assert_eq!(cap, want, "{input:?}"),
            (Err(CapabilityError::Malformed { .. }), Err("malformed")) => {}
            (Err(CapabilityError::Unknown { .. }), Err("unknown")) => {}
            (got, want) => panic!("{input:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn capability_strings_parse_to_known_values_or_a_stable_error() {
        check("local.terminal.exec@1", Ok(Capability::TerminalExec));
        check("system.folder-pick@1", Ok(Capability::FolderPick));
        check("local.terminal.exec@2", Err("unknown"));
        check("local.terminal.shell@1", Err("unknown"));
        check("a@1", Err("unknown"));
        check("local.terminal.exec", Err("malformed"));
        check("local.terminal.exec@", Err("malformed"));
        check("@1", Err("malformed"));
        check("local.terminal.exec@01", Err("malformed"));
        check("local.terminal.exec@1@1", Err("malformed"));
        check("Local.Terminal.Exec@1", Err("malformed"));
        check("local..exec@1", Err("malformed"));
        check(" local.terminal.exec@1", Err("malformed"));
        check("local.terminal.exec@1 ", Err("malformed"));
        check("local.terminal.exec@-1", Err("malformed"));
        check("", Err("malformed"));
    }

    #[test]
    fn capability_serialises_as_its_string() {
        assert_eq!(
            serde_json::to_string(&Capability::FolderPick).unwrap(),
            r#""system.folder-pick@1""#
        );
        assert!(serde_json::from_str::<Capability>(r#""local.terminal.exec@9""#).is_err());
    }

    proptest! {
        #[test]
        fn parser_accepts_exactly_the_known_strings(s in "\\PC{0,40}") {
            let known = Capability::ALL.iter().any(|c| c.as_str() == s);
            prop_assert_eq!(s.parse::<Capability>().is_ok(), known);
        }

        #[test]
        fn well_formed_strings_are_known_or_unknown_never_malformed(
            name in "[a-z0-9-]{1,8}(\\.[a-z0-9-]{1,8}){0,3}",
            version in "0|[1-9][0-9]{0,4}",
        ) {
            let s = format!("{name}@{version}");
            match s.parse::<Capability>() {
                Ok(cap) => prop_assert_eq!(cap.as_str(), s.as_str()),
                Err(CapabilityError::Unknown { input }) => prop_assert_eq!(input, s),
                Err(other) => prop_assert!(false, "{s:?} reported as {other:?}"),
            }
        }
    }
}
