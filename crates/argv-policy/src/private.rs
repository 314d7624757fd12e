//! The private locations under `$HOME`, the toolchains' cache directories and the shell startup
//! files (RCS-1, RCS-2, RCS-3, RC-9): one list shared by the decision and the sandbox, so the
//! two never disagree about what is private.
//!
//! **Owns**: the shipped list `data/home_private.json` (each entry says what it protects), the
//! user's additions (config key `"private_path": ["~/.mytokens", …]`), the writable cache
//! directories and [`SHELL_STARTUP_FILES`].
//!
//! **Refuses to know**: how a sandbox enforces them (Landlock and mount namespaces on Linux,
//! Seatbelt on macOS) and whether a path exists. Everything here is lexical.
//!
//! Every private path is also a sensitive path for RC-9: an argument naming one (or anything
//! below it) cancels a read-only match, as a sensitive pattern does. The comparison ignores
//! ASCII case, so `~/.SSH/id_rsa` (the same file on macOS's case-insensitive volumes) counts too.
//!
//! ```
//! use std::path::Path;
//! use argv_policy::{Mode, Policy};
//! let policy = Policy::load(Mode::Safe, Some(r#"{"private_path": ["~/.mytokens"]}"#)).unwrap();
//! let private = policy.private_paths(Path::new("/home/u"));
//! assert!(private.contains(&Path::new("/home/u/.ssh").to_path_buf()));
//! assert!(private.contains(&Path::new("/home/u/.mytokens").to_path_buf()));
//! assert!(policy.cache_paths(Path::new("/home/u")).contains(&Path::new("/home/u/.cache").to_path_buf()));
//! ```

use std::path::{Component, Path, PathBuf};

use serde::Deserialize;

use crate::paths::normalize;
use crate::policy::Policy;

/// The shipped private locations (RCS-1), relative to `$HOME`, each with what it protects.
pub const SHIPPED_PRIVATE: &str = include_str!("../data/home_private.json");

/// Shell startup files, relative to `$HOME` (RCS-3): a command that appends to one runs again
/// later in every shell the user opens, outside any sandbox, so they stay read-only even where
/// they lie inside a writable root. `.inputrc` is here because readline key bindings can run
/// shell commands; `.ssh/rc` is private already (not readable at all).
pub const SHELL_STARTUP_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".bash_aliases",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".config/fish/config.fish",
    ".config/fish/conf.d",
    ".config/fish/functions",
    ".cshrc",
    ".tcshrc",
    ".login",
    ".logout",
    ".kshrc",
    ".mkshrc",
    ".inputrc",
    ".xprofile",
    ".xinitrc",
    ".xsession",
    ".pam_environment",
    ".config/environment.d",
    ".config/autostart",
    ".config/systemd/user",
    "Library/LaunchAgents",
];

/// The toolchains' cache directories, relative to `$HOME`, writable in the run_command sandbox
/// (RCS-2) so builds can fetch and cache dependencies. None is or contains a private location
/// (a test pins that): `~/.m2` and `~/.gradle` themselves are not here because
/// `settings.xml`/`gradle.properties` hold credentials; `~/.cargo` is not because of
/// `credentials.toml` (and `~/.cargo/bin` would let a build plant programs the user runs later).
const CACHE_DIRECTORIES: &[&str] = &[
    ".cache",
    ".cargo/registry",
    ".cargo/git",
    ".rustup/downloads",
    ".rustup/tmp",
    ".npm",
    ".node-gyp",
    ".yarn/cache",
    ".yarn/berry/cache",
    ".pnpm-store",
    ".local/share/pnpm/store",
    ".bun/install/cache",
    ".deno",
    ".m2/repository",
    ".gradle/caches",
    ".gradle/wrapper",
    ".gradle/daemon",
    ".gradle/native",
    ".ivy2/cache",
    ".sbt/boot",
    ".coursier",
    "go/pkg/mod",
    ".nuget/packages",
    ".pub-cache",
    ".cpanm",
    ".stack",
    ".cabal/packages",
    ".ccache",
    ".mix",
    ".hex",
    ".conan2/p",
    ".platformio/.cache",
    ".local/share/virtualenv",
    ".julia/compiled",
    ".julia/packages",
    ".julia/artifacts",
    "Library/Caches",
];

#[derive(Deserialize)]
struct Shipped {
    entries: Vec<ShippedEntry>,
}

#[derive(Deserialize)]
struct ShippedEntry {
    path: String,
    // Read by humans and pinned non-empty by a test; the sandbox only needs the path.
    #[allow(dead_code)]
    protects: String,
}

/// One private location relative to `$HOME`, with its components lower-cased once (so the
/// RC-9 check per argument compares strings instead of re-parsing paths).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    rel: PathBuf,
    lower: Vec<String>,
}

impl Entry {
    fn new(rel: PathBuf) -> Entry {
        let lower = lower_components(&rel);
        Entry { rel, lower }
    }
}

/// The normal components of `path`, ASCII-lower-cased.
fn lower_components(path: &Path) -> Vec<String> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// The shipped private locations, relative to `$HOME`. The file is part of the crate and pinned
/// by `shipped_private_list_parses_and_every_entry_says_what_it_protects`.
pub(crate) fn shipped() -> Vec<Entry> {
    match serde_json::from_str::<Shipped>(SHIPPED_PRIVATE) {
        Ok(s) => s
            .entries
            .into_iter()
            .filter_map(|e| relative(&e.path).ok().map(Entry::new))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Validates a home-relative path: non-empty, only normal components (no `.`, `..`, root), no
/// glob character (the list names locations, not patterns; globs are for `sensitive_path`).
fn relative(text: &str) -> Result<PathBuf, &'static str> {
    if text.is_empty() || text.chars().all(|c| c == '/') {
        return Err(
            "it names $HOME itself; name a file or directory inside it, e.g. \"~/.mytokens\"",
        );
    }
    if text.contains('\0') {
        return Err("it contains a NUL byte; write the path as it is on disk");
    }
    if text
        .chars()
        .any(|c| matches!(c, '*' | '?' | '[' | ']' | '{' | '}'))
    {
        return Err(
            "it contains a glob character; private_path names one file or directory, e.g. \
             \"~/.config/mytool\" (everything below a directory is private too); for a pattern \
             such as \"*.pem\" use sensitive_path",
        );
    }
    let mut out = PathBuf::new();
    for comp in Path::new(text).components() {
        match comp {
            Component::Normal(c) => out.push(c),
            Component::CurDir => {
                return Err(
                    "it contains a `.` component; write the path without it, e.g. \"~/.mytokens\"",
                );
            }
            Component::ParentDir => {
                return Err(
                    "it contains `..`; private_path names a location inside $HOME, written \
                     without `..`, e.g. \"~/.mytokens\"",
                );
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(
                    "write it relative to $HOME, starting with \"~/\", e.g. \"~/.mytokens\"",
                );
            }
        }
    }
    if out.as_os_str().is_empty() {
        return Err(
            "it names $HOME itself; name a file or directory inside it, e.g. \"~/.mytokens\"",
        );
    }
    Ok(out)
}

/// Parses one user `private_path` entry: `~/` then a relative path without `..`, `.` or globs.
pub(crate) fn parse_user_entry(text: &str) -> Result<PathBuf, &'static str> {
    let Some(rest) = text.strip_prefix("~/") else {
        return Err(
            "an entry starts with \"~/\" and names a location inside $HOME, e.g. \"~/.mytokens\"; \
             for a path elsewhere use sensitive_path",
        );
    };
    relative(rest)
}

/// `path` without the leading `dir` (compared ASCII-case-insensitively), if it lies below it.
fn strip_prefix_ignoring_case<'p>(path: &'p Path, dir: &Path) -> Option<&'p Path> {
    let mut p = path.components();
    for d in dir.components() {
        match p.next() {
            Some(c) if c.as_os_str().eq_ignore_ascii_case(d.as_os_str()) => {}
            _ => return None,
        }
    }
    Some(p.as_path())
}

/// `true` when one of `a`, `b` is or lies below the other (exact components).
fn overlaps(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

impl Policy {
    /// Absolute paths under `home` of every credential and private-data location (RCS-1): the
    /// shipped list plus the user's `private_path` entries, in that order, without duplicates.
    /// `home` is normalised lexically (made absolute, `.`/`..` folded), so every path returned
    /// lies below it. Each is a file or a directory; nothing says which, nor whether it exists.
    pub fn private_paths(&self, home: &Path) -> Vec<PathBuf> {
        let home = normalize(Path::new("/"), home);
        self.private.iter().map(|e| home.join(&e.rel)).collect()
    }

    /// Absolute paths under `home` of the toolchains' cache directories, writable in the
    /// run_command sandbox (RCS-2). A cache directory that is, contains or lies in a private
    /// path (the user's included) is left out: privacy wins over a warm cache.
    pub fn cache_paths(&self, home: &Path) -> Vec<PathBuf> {
        let home = normalize(Path::new("/"), home);
        let private = self.private_paths(&home);
        CACHE_DIRECTORIES
            .iter()
            .map(|rel| home.join(rel))
            .filter(|c| !private.iter().any(|p| overlaps(c, p)))
            .collect()
    }

    /// `true` when the normalised absolute `path` is a private location under `home` or lies
    /// below one (ASCII case ignored).
    pub fn is_private(&self, path: &Path, home: &Path) -> bool {
        let home = normalize(Path::new("/"), home);
        let Some(below) = strip_prefix_ignoring_case(path, &home) else {
            return false;
        };
        let below = lower_components(below);
        self.private.iter().any(|e| {
            e.lower.len() <= below.len() && e.lower.iter().zip(&below).all(|(a, b)| a == b)
        })
    }

    /// A sensitive path for RC-9: a shipped or user sensitive pattern, or a private location.
    pub(crate) fn is_sensitive_at(&self, path: &Path, home: &Path) -> bool {
        self.is_sensitive(path) || self.is_private(path, home)
    }

    /// Adds a user `private_path` entry (`~/.mytokens`).
    pub fn add_private(&mut self, text: &str) -> Result<(), crate::ConfigError> {
        let rel = parse_user_entry(text.trim()).map_err(|why| crate::ConfigError::Entry {
            list: "private_path",
            entry: text.to_owned(),
            why,
        })?;
        if !self.private.iter().any(|e| e.rel == rel) {
            self.private.push(Entry::new(rel));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Context, Decision, Gate, Mode, RunCommandArgs, decide};
    use proptest::prelude::*;

    const HOME: &str = "/home/u";

    #[test]
    fn shipped_private_list_parses_and_every_entry_says_what_it_protects() {
        let s: Shipped = serde_json::from_str(SHIPPED_PRIVATE).unwrap();
        for e in &s.entries {
            assert!(!e.protects.trim().is_empty(), "{} says nothing", e.path);
            relative(&e.path).unwrap_or_else(|why| panic!("{}: {why}", e.path));
        }
        let mut seen = std::collections::BTreeSet::new();
        for e in &s.entries {
            assert!(seen.insert(&e.path), "{} is listed twice", e.path);
        }
        assert_eq!(shipped().len(), s.entries.len());
    }

    #[test]
    fn the_issue_s_private_locations_are_all_listed() {
        let p = Policy::defaults(Mode::Safe);
        let list = p.private_paths(Path::new(HOME));
        for rel in [
            ".ssh",
            ".gnupg",
            ".aws",
            ".azure",
            ".kube",
            ".docker",
            ".config/gcloud",
            ".config/gh",
            ".config/hub",
            ".config/op",
            ".1password",
            ".password-store",
            ".local/share/keyrings",
            ".terraform.d",
            ".vault-token",
            ".oci",
            ".netrc",
            ".git-credentials",
            ".config/git/credentials",
            ".npmrc",
            ".yarnrc.yml",
            ".pypirc",
            ".gem/credentials",
            ".cargo/credentials",
            ".cargo/credentials.toml",
            ".m2/settings.xml",
            ".gradle/gradle.properties",
            ".mozilla",
            ".thunderbird",
            ".config/google-chrome",
            ".config/chromium",
            ".config/BraveSoftware",
            ".config/microsoft-edge",
            ".local/share/fish/fish_history",
            ".bash_history",
            ".zsh_history",
            ".python_history",
            ".node_repl_history",
            ".psql_history",
            ".mysql_history",
            ".sqlite_history",
            ".lesshst",
            ".pgpass",
            ".my.cnf",
            ".boto",
            ".s3cfg",
            ".dockercfg",
            "Mail",
            ".mail",
            ".local/share/evolution",
            ".config/evolution",
            ".pki",
            ".config/rclone",
            ".config/doctl",
            ".config/heroku",
            ".netlify",
            ".config/netlify",
            ".config/Bitwarden",
            ".config/keybase",
            "Library/Keychains",
            "Library/Cookies",
            "Library/Application Support/Google/Chrome",
            "Library/Mail",
            "Library/Messages",
            "Library/Application Support/Firefox",
            "Library/Safari",
        ] {
            assert!(
                list.contains(&Path::new(HOME).join(rel)),
                "{rel} is missing"
            );
        }
    }

    #[test]
    fn every_private_path_is_a_sensitive_path() {
        let p = Policy::defaults(Mode::Safe);
        let home = Path::new(HOME);
        for path in p.private_paths(home) {
            assert!(p.is_sensitive_at(&path, home), "{}", path.display());
            assert!(
                p.is_sensitive_at(&path.join("x"), home),
                "{}/x",
                path.display()
            );
        }
        assert!(!p.is_sensitive_at(Path::new("/home/u/proj/src/main.rs"), home));
        assert!(p.is_sensitive_at(Path::new("/home/u/.SSH/id_rsa"), home));
    }

    #[test]
    fn naming_a_private_path_cancels_a_read_only_match() {
        let p = Policy::load(Mode::Safe, Some(r#"{"private_path": ["~/.mytokens"]}"#)).unwrap();
        let ctx = Context::new("/home/u/proj", HOME);
        let hit = |argv: &[&str]| {
            matches!(
                decide(&RunCommandArgs::new(argv.iter().copied()), &p, &ctx),
                Decision::Run {
                    gate: Gate::None,
                    parallel: true,
                    ..
                }
            )
        };
        assert!(hit(&["git", "log", "README.md"]));
        assert!(hit(&["cat", "README.md"]));
        for path in p.private_paths(Path::new(HOME)) {
            let s = path.to_str().unwrap();
            assert!(!hit(&["git", "log", s]), "git log {s}");
            assert!(!hit(&["cat", s]), "cat {s}");
            assert!(!hit(&["sh", "-c", &format!("cat '{s}'")]), "sh -c cat {s}");
        }
        assert!(!hit(&["git", "log", "/home/u/.ssh/id_rsa"]));
        assert!(!hit(&["cat", "/home/u/.aws/credentials"]));
        assert!(!hit(&["cat", "/home/u/.mytokens/a"]));
        assert!(!hit(&["cat", "../.mytokens"]));
        assert!(!hit(&["cat", "--", "/home/u/Library/Messages/chat.db"]));
    }

    #[test]
    fn no_cache_path_is_contains_or_lies_in_a_private_path() {
        let p = Policy::defaults(Mode::Safe);
        let home = Path::new(HOME);
        let caches = p.cache_paths(home);
        assert_eq!(
            caches.len(),
            CACHE_DIRECTORIES.len(),
            "a shipped cache overlaps"
        );
        for c in &caches {
            assert!(c.starts_with(home) && c != home);
            for priv_ in p.private_paths(home) {
                assert!(
                    !overlaps(c, &priv_),
                    "{} / {}",
                    c.display(),
                    priv_.display()
                );
            }
            assert!(!p.is_sensitive_at(c, home), "{} is sensitive", c.display());
        }
        for want in [
            ".cache",
            ".cargo/registry",
            ".cargo/git",
            ".npm",
            ".m2/repository",
            "go/pkg/mod",
            ".gradle/caches",
            ".gradle/wrapper",
            ".yarn/cache",
            ".pnpm-store",
            ".local/share/pnpm/store",
            ".bun/install/cache",
            ".rustup/downloads",
            ".rustup/tmp",
        ] {
            assert!(caches.contains(&home.join(want)), "{want}");
        }
        for not in [".m2", ".gradle", ".cargo", ".cargo/bin", ".rustup"] {
            assert!(!caches.contains(&home.join(not)), "{not}");
        }
    }

    #[test]
    fn a_user_private_path_inside_a_cache_removes_that_cache() {
        let p = Policy::load(Mode::Safe, Some(r#"{"private_path": ["~/.cache/tok"]}"#)).unwrap();
        let caches = p.cache_paths(Path::new(HOME));
        assert!(!caches.contains(&PathBuf::from("/home/u/.cache")));
        assert!(caches.contains(&PathBuf::from("/home/u/.npm")));
    }

    #[test]
    fn private_path_config_round_trip_and_refusals() {
        let p = Policy::load(
            Mode::Safe,
            Some(
                r#"{"private_path": ["~/.mytokens", "~/work/secrets/", "~/.ssh", "~/.mytokens"]}"#,
            ),
        )
        .unwrap();
        let list = p.private_paths(Path::new("/home/u/"));
        let n = list.iter().filter(|x| x.ends_with(".mytokens")).count();
        assert_eq!(n, 1, "duplicates are merged");
        assert_eq!(list.iter().filter(|x| x.ends_with(".ssh")).count(), 1);
        assert!(list.contains(&PathBuf::from("/home/u/work/secrets")));
        assert_eq!(
            list.len(),
            Policy::defaults(Mode::Safe)
                .private_paths(Path::new(HOME))
                .len()
                + 2
        );
        for (bad, says) in [
            ("/etc/x", "~/"),
            (".mytokens", "~/"),
            ("~", "~/"),
            ("~/", "$HOME itself"),
            ("~//", "$HOME itself"),
            ("~/../other/.ssh", ".."),
            ("~/a/../../b", ".."),
            ("~/./a", "`.`"),
            ("~/*.key", "glob"),
            ("~/.config/[ab]", "glob"),
            ("", "~/"),
        ] {
            let mut q = Policy::defaults(Mode::Safe);
            let before = q.private_paths(Path::new(HOME)).len();
            let json = serde_json::json!({"mode": "auto", "private_path": ["~/.ok", bad]});
            let err = q.merge_user_json(&json.to_string()).unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.contains("private_path") && msg.contains(says),
                "{bad:?}: {msg}"
            );
            assert!(
                msg.contains("e.g.") || msg.contains("use "),
                "{bad:?}: {msg}"
            );
            assert_eq!(
                q.private_paths(Path::new(HOME)).len(),
                before,
                "nothing merged"
            );
            assert_eq!(q.mode, Mode::Safe);
        }
        let err = Policy::load(Mode::Safe, Some(r#"{"private_path": "~/.x"}"#)).unwrap_err();
        assert!(err.to_string().contains("private_path"));
    }

    #[test]
    fn shell_startup_files_are_relative_and_not_private() {
        let p = Policy::defaults(Mode::Safe);
        for f in SHELL_STARTUP_FILES {
            relative(f).unwrap();
            assert!(
                !p.is_private(&Path::new(HOME).join(f), Path::new(HOME)),
                "{f}"
            );
        }
    }

    proptest! {
        #[test]
        fn any_accepted_private_path_lies_under_home(
            entry in "(~/)?[a-zA-Z0-9._ /*?\\[-]{0,24}",
            home in "/[a-z]{1,6}(/[a-z.]{1,6}){0,2}/?",
        ) {
            let mut p = Policy::defaults(Mode::Safe);
            if p.add_private(&entry).is_ok() {
                let home_n = normalize(Path::new("/"), Path::new(&home));
                let rel = parse_user_entry(entry.trim()).unwrap();
                let list = p.private_paths(Path::new(&home));
                prop_assert!(list.contains(&home_n.join(&rel)));
                for path in list {
                    prop_assert!(path.starts_with(&home_n) && path != home_n, "{}", path.display());
                    prop_assert!(!path.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)));
                    prop_assert!(p.is_private(&path, Path::new(&home)));
                }
            }
        }
    }
}
