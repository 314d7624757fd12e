//! The merged configuration `decide` applies: the shipped lists plus the user's JSON config
//! (`denied_command`, `read_only_command`, `sensitive_path`, `private_path`, `mode`; RC-2, RC-9,
//! RCS-1).

use std::collections::BTreeSet;
use std::fmt;

use serde::Deserialize;

use crate::paths::SensitivePattern;

/// The shipped read-only allowlist (RC-9), written from the tools' manuals; grouped by family.
pub const SHIPPED_READ_ONLY: &str = include_str!("../data/read_only_command.json");
/// The shipped denied list (RC-2).
pub const SHIPPED_DENIED: &str = include_str!("../data/denied_command.json");
/// The shipped sensitive paths.
pub const SHIPPED_SENSITIVE: &str = include_str!("../data/sensitive_path.json");

/// How much the user wants to be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Everything that is not a read-only allowlist hit asks first.
    Safe,
    /// Runs without asking, except where a rule demands a confirmation or the password.
    Auto,
    /// Like `auto`, and `rm` elsewhere in `$HOME` does not ask; passwords are still asked
    /// (RC-11, RC-12 say no rule skips them).
    AllowAll,
}

impl Mode {
    /// Parses `safe`, `auto` or `allow-all`.
    pub fn parse(text: &str) -> Option<Mode> {
        match text {
            "safe" => Some(Mode::Safe),
            "auto" => Some(Mode::Auto),
            "allow-all" => Some(Mode::AllowAll),
            _ => None,
        }
    }

    /// `safe`, `auto` or `allow-all`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Safe => "safe",
            Mode::Auto => "auto",
            Mode::AllowAll => "allow-all",
        }
    }
}

/// A user config that cannot be merged, with what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Not JSON, or a field of the wrong type.
    #[error(
        "the run_command config is not valid JSON of the expected shape ({0}); expected an object with optional \"mode\" (\"safe\" | \"auto\" | \"allow-all\"), \"denied_command\", \"read_only_command\", \"sensitive_path\" and \"private_path\" (arrays of strings)"
    )]
    Json(String),
    /// An entry that cannot be used as written.
    #[error("{list} entry {entry:?} is not usable: {why}")]
    Entry {
        /// Which list.
        list: &'static str,
        /// The entry as written.
        entry: String,
        /// What to change.
        why: &'static str,
    },
}

/// A read-only allowlist rule: the executable plus at most two following arguments (RC-9).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ReadOnlyRule(Vec<String>);

impl ReadOnlyRule {
    /// Parses `"git status"`-style text: 1–3 whitespace-separated tokens, the first a bare
    /// command name, none with a shell metacharacter.
    pub fn parse(text: &str) -> Result<ReadOnlyRule, &'static str> {
        let tokens: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        match tokens.len() {
            0 => return Err("it is empty; write a command name such as \"ls\""),
            1..=3 => {}
            _ => {
                return Err(
                    "a rule is the executable plus at most two arguments (RC-9), e.g. \"git log\"",
                );
            }
        }
        if !crate::words::is_bare_name(&tokens[0]) {
            return Err("the executable must be a bare command name, not a path");
        }
        if tokens
            .iter()
            .any(|t| t.chars().any(crate::words::is_metachar))
        {
            return Err("it contains a shell metacharacter");
        }
        Ok(ReadOnlyRule(tokens))
    }

    /// The tokens.
    pub fn tokens(&self) -> &[String] {
        &self.0
    }
}

impl fmt::Display for ReadOnlyRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(" "))
    }
}

/// The merged configuration.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The confirmation mode.
    pub mode: Mode,
    denied: BTreeSet<String>,
    read_only: BTreeSet<ReadOnlyRule>,
    sensitive: Vec<SensitivePattern>,
    /// The sensitive patterns that are one literal component name, looked up per component
    /// (most of the shipped list; matching each one in turn was most of an allowlisted decide).
    sensitive_names: BTreeSet<String>,
    /// Private locations relative to `$HOME` (RCS-1), shipped then the user's; see `private`.
    pub(crate) private: Vec<crate::private::Entry>,
}

#[derive(Deserialize)]
struct UserConfig {
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    denied_command: Vec<String>,
    #[serde(default)]
    read_only_command: Vec<String>,
    #[serde(default)]
    sensitive_path: Vec<String>,
    #[serde(default)]
    private_path: Vec<String>,
}

/// A shipped list is either an array of strings or an object whose values are arrays of
/// strings (groups, for review); keys starting with `//` are comments.
fn flatten_list(text: &str) -> Result<Vec<String>, ConfigError> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| ConfigError::Json(e.to_string()))?;
    let mut out = Vec::new();
    let mut push_array = |v: &serde_json::Value| -> Result<(), ConfigError> {
        let arr = v
            .as_array()
            .ok_or_else(|| ConfigError::Json("a group is not an array".into()))?;
        for item in arr {
            let s = item
                .as_str()
                .ok_or_else(|| ConfigError::Json("an entry is not a string".into()))?;
            out.push(s.to_owned());
        }
        Ok(())
    };
    match &value {
        serde_json::Value::Array(_) => push_array(&value)?,
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                if !k.starts_with("//") {
                    push_array(v)?;
                }
            }
        }
        _ => return Err(ConfigError::Json("expected an array or an object".into())),
    }
    Ok(out)
}

impl Policy {
    /// The shipped lists under `mode`.
    pub fn defaults(mode: Mode) -> Policy {
        let mut p = Policy {
            mode,
            denied: BTreeSet::new(),
            read_only: BTreeSet::new(),
            sensitive: Vec::new(),
            sensitive_names: BTreeSet::new(),
            private: crate::private::shipped(),
        };
        // The shipped files are part of the crate and pinned by tests
        // (`shipped_lists_parse_and_are_large_enough`), so an error here cannot reach a user;
        // should one slip through, the entry is skipped, which only makes the policy stricter
        // for read-only rules and is caught by the test for the other lists.
        for e in flatten_list(SHIPPED_DENIED).unwrap_or_default() {
            let _ = p.add_denied(&e);
        }
        for e in flatten_list(SHIPPED_READ_ONLY).unwrap_or_default() {
            let _ = p.add_read_only(&e);
        }
        for e in flatten_list(SHIPPED_SENSITIVE).unwrap_or_default() {
            let _ = p.add_sensitive(&e);
        }
        p
    }

    /// The shipped lists merged with the user's JSON config; `mode` from the config wins over
    /// `default_mode`.
    pub fn load(default_mode: Mode, user_json: Option<&str>) -> Result<Policy, ConfigError> {
        let mut p = Policy::defaults(default_mode);
        if let Some(json) = user_json {
            p.merge_user_json(json)?;
        }
        Ok(p)
    }

    /// Merges a user config (`config.json`'s `run_command` keys) into this policy. Lists are
    /// added to, never replaced: a user cannot remove a shipped denied name. Unknown keys are
    /// ignored (the file holds the rest of the application's settings too). Nothing is merged
    /// if any entry is invalid (validate, then act).
    pub fn merge_user_json(&mut self, json: &str) -> Result<(), ConfigError> {
        let cfg: UserConfig =
            serde_json::from_str(json).map_err(|e| ConfigError::Json(e.to_string()))?;
        let mut next = self.clone();
        if let Some(m) = cfg.mode {
            next.mode = Mode::parse(&m).ok_or(ConfigError::Entry {
                list: "mode",
                entry: m.clone(),
                why: "use \"safe\", \"auto\" or \"allow-all\"",
            })?;
        }
        for e in &cfg.denied_command {
            next.add_denied(e)?;
        }
        for e in &cfg.read_only_command {
            next.add_read_only(e)?;
        }
        for e in &cfg.sensitive_path {
            next.add_sensitive(e)?;
        }
        for e in &cfg.private_path {
            next.add_private(e)?;
        }
        *self = next;
        Ok(())
    }

    /// The same policy under another mode.
    pub fn with_mode(mut self, mode: Mode) -> Policy {
        self.mode = mode;
        self
    }

    /// Adds a denied command name.
    pub fn add_denied(&mut self, name: &str) -> Result<(), ConfigError> {
        let name = name.trim();
        if !crate::words::is_bare_name(name) {
            return Err(ConfigError::Entry {
                list: "denied_command",
                entry: name.to_owned(),
                why: "write a bare command name such as \"shutdown\"",
            });
        }
        self.denied.insert(name.to_owned());
        Ok(())
    }

    /// Adds a read-only rule (`"git status"`).
    pub fn add_read_only(&mut self, text: &str) -> Result<(), ConfigError> {
        let rule = ReadOnlyRule::parse(text).map_err(|why| ConfigError::Entry {
            list: "read_only_command",
            entry: text.to_owned(),
            why,
        })?;
        self.read_only.insert(rule);
        Ok(())
    }

    /// Adds a sensitive-path pattern (`.ssh/`, `id_*`, `*.pem`, `.config/gcloud/`).
    pub fn add_sensitive(&mut self, text: &str) -> Result<(), ConfigError> {
        let pat = SensitivePattern::parse(text.trim()).ok_or(ConfigError::Entry {
            list: "sensitive_path",
            entry: text.to_owned(),
            why: "write a name, a glob such as \"*.pem\", or a path piece such as \".ssh/\"",
        })?;
        if let Some(name) = pat.literal_name() {
            self.sensitive_names.insert(name.to_owned());
        } else if !self.sensitive.contains(&pat) {
            self.sensitive.push(pat);
        }
        Ok(())
    }

    /// `true` when `name` (a bare name or a path's last component) is denied.
    pub fn is_denied(&self, name: &str) -> bool {
        self.denied.contains(name)
    }

    /// The read-only rules.
    pub fn read_only_rules(&self) -> impl Iterator<Item = &ReadOnlyRule> {
        self.read_only.iter()
    }

    /// Number of read-only rules.
    pub fn read_only_len(&self) -> usize {
        self.read_only.len()
    }

    /// Number of denied names.
    pub fn denied_len(&self) -> usize {
        self.denied.len()
    }

    /// `true` when the normalised absolute `path` matches a sensitive pattern. The private
    /// locations under `$HOME` are sensitive too; [`Policy::is_private`] checks those (the
    /// decision asks both).
    pub fn is_sensitive(&self, path: &std::path::Path) -> bool {
        let comps = crate::paths::components(path);
        comps
            .iter()
            .any(|c| self.sensitive_names.contains(c.as_ref()))
            || self.sensitive.iter().any(|p| p.matches_components(&comps))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_lists_parse_and_are_large_enough() {
        for (name, text) in [
            ("read_only", SHIPPED_READ_ONLY),
            ("denied", SHIPPED_DENIED),
            ("sensitive", SHIPPED_SENSITIVE),
        ] {
            let entries = flatten_list(text).unwrap();
            let mut p = Policy::defaults(Mode::Safe);
            for e in &entries {
                match name {
                    "read_only" => p.add_read_only(e).unwrap(),
                    "denied" => p.add_denied(e).unwrap(),
                    _ => p.add_sensitive(e).unwrap(),
                }
            }
        }
        let p = Policy::defaults(Mode::Safe);
        assert!(p.read_only_len() >= 300, "{} rules", p.read_only_len());
        let n = flatten_list(SHIPPED_READ_ONLY).unwrap().len();
        assert_eq!(n, p.read_only_len(), "the shipped allowlist has duplicates");
    }

    #[test]
    fn the_name_set_answers_as_matching_every_pattern_would() {
        let p = Policy::defaults(Mode::Safe);
        let patterns: Vec<SensitivePattern> = flatten_list(SHIPPED_SENSITIVE)
            .unwrap()
            .iter()
            .filter_map(|e| SensitivePattern::parse(e))
            .collect();
        for path in [
            "/home/u/.netrc",
            "/home/u/proj/credentials",
            "/home/u/proj/src/main.rs",
            "/home/u/.ssh/config",
            "/etc/shadow",
            "/backup/etc/shadow",
            "/w/a.pem",
            "/w/.env.local",
            "/w/.env",
            "/w/x/.config/gcloud/a",
            "/home/u/Library/Application Support/Google/Chrome/x",
            "/",
        ] {
            let path = std::path::Path::new(path);
            let want = patterns.iter().any(|pat| pat.matches(path));
            assert_eq!(p.is_sensitive(path), want, "{}", path.display());
        }
    }

    #[test]
    fn user_config_adds_to_the_shipped_lists_and_sets_the_mode() {
        let mut p = Policy::defaults(Mode::Safe);
        let before = p.read_only_len();
        p.merge_user_json(
            r#"{"mode": "auto", "denied_command": ["terraform"], "read_only_command": ["make -n"],
                "sensitive_path": ["secrets/"], "theme": "dark"}"#,
        )
        .unwrap();
        assert_eq!(p.mode, Mode::Auto);
        assert!(p.is_denied("terraform"));
        assert_eq!(p.read_only_len(), before + 1);
        assert!(p.is_sensitive(std::path::Path::new("/w/secrets/a")));
    }

    #[test]
    fn invalid_user_entry_merges_nothing() {
        let mut p = Policy::defaults(Mode::Safe);
        let err = p
            .merge_user_json(r#"{"mode": "auto", "denied_command": ["/bin/x"]}"#)
            .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Entry {
                list: "denied_command",
                ..
            }
        ));
        assert_eq!(p.mode, Mode::Safe);
        let err = p.merge_user_json(r#"{"mode": "yolo"}"#).unwrap_err();
        assert!(err.to_string().contains("allow-all"));
        let err = p
            .merge_user_json(r#"{"read_only_command": ["a b c d"]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("two arguments"));
        assert!(p.merge_user_json("[").is_err());
    }
}
