//! The private locations under `$HOME`, the toolchains' cache directories and the shell startup
//! files (RCS-1, RCS-2, RCS-3, RC-9): one list shared by the decision and the sandbox, so the
//! two never disagree about what is private.
//!
//! **Owns**: the shipped list `data/home_private.json` (each entry says what it protects), the
//! user's additions (config key `"private_path": ["~/.mytokens", …]`), the relocation variables
//! that move them ([`RELOCATIONS`]: `XDG_CONFIG_HOME`, `DOCKER_CONFIG`, `KUBECONFIG`, …,
//! TRUST-6), the writable cache directories and [`SHELL_STARTUP_FILES`].
//!
//! **Refuses to know**: how a sandbox enforces them (Landlock and mount namespaces on Linux,
//! Seatbelt on macOS), whether a path exists, and the process's own environment: the caller
//! passes the host's environment to [`Policy::private_paths_in`]. Everything here is lexical.
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

/// Shell startup files and the session's autostart places, relative to `$HOME` (RCS-3): what a
/// command appends to one runs again later in every shell or session the user opens, outside
/// any sandbox, so they stay read-only even where they lie inside a writable root. Files and
/// directories (`.config/fish/conf.d`, `.config/autostart`, `.config/systemd/user`,
/// `Library/LaunchAgents`: everything below is protected too). `.inputrc` is here because
/// readline key bindings can run shell commands; `.ssh/rc` is private already (not readable at
/// all).
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
/// `credentials.toml`. No directory of installed programs is here either (`~/.cargo/bin`,
/// `~/.deno/bin`, `~/.stack/programs`, `~/.mix/escripts`): a program planted there would run
/// later outside any sandbox. On macOS only the toolchains' own folders of `Library/Caches`
/// are writable, not the applications' caches beside them.
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
    ".cabal/packages",
    ".ccache",
    ".hex",
    ".conan2/p",
    ".platformio/.cache",
    ".local/share/virtualenv",
    ".julia/compiled",
    ".julia/packages",
    ".julia/artifacts",
    "Library/Caches/pip",
    "Library/Caches/pypoetry",
    "Library/Caches/go-build",
    "Library/Caches/Yarn",
    "Library/Caches/pnpm",
    "Library/Caches/deno",
    "Library/Caches/node-gyp",
    "Library/Caches/typescript",
    "Library/Caches/ms-playwright",
    "Library/Caches/Cypress",
    "Library/Caches/CocoaPods",
    "Library/Caches/org.swift.swiftpm",
    "Library/Caches/bazel",
    "Library/Caches/ccache",
];

/// The variables that move a toolchain's cache, and the directory below the value that is the
/// cache (empty: the value itself), TRUST-3.
pub const CACHE_VARS: &[(&str, &str)] = &[
    ("GOMODCACHE", ""),
    ("GOPATH", "pkg/mod"),
    ("GOCACHE", ""),
    ("CARGO_HOME", "registry"),
    ("CARGO_HOME", "git"),
    ("npm_config_cache", ""),
    ("NPM_CONFIG_CACHE", ""),
    ("YARN_CACHE_FOLDER", ""),
    ("PIP_CACHE_DIR", ""),
    ("UV_CACHE_DIR", ""),
    ("POETRY_CACHE_DIR", ""),
    ("GRADLE_USER_HOME", "caches"),
    ("GRADLE_USER_HOME", "wrapper"),
    ("PUB_CACHE", ""),
    ("NUGET_PACKAGES", ""),
    ("CCACHE_DIR", ""),
    ("SCCACHE_DIR", ""),
    ("XDG_CACHE_HOME", ""),
];

/// What a relocation variable's value names (TRUST-6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relocated {
    /// A directory, private whole (`DOCKER_CONFIG`, `GNUPGHOME`).
    Dir,
    /// A directory of which only these files are private (`CARGO_HOME`: `credentials.toml`).
    FilesIn(&'static [&'static str]),
    /// One file, or several separated by `:` (`KUBECONFIG`, `AWS_SHARED_CREDENTIALS_FILE`).
    Files,
    /// An XDG base directory standing in for this `$HOME`-relative prefix: every private
    /// location below the prefix is private below the value too (`XDG_CONFIG_HOME` moves
    /// `~/.config/gh` to `$XDG_CONFIG_HOME/gh`).
    Base(&'static str),
}

/// One host environment variable that moves a private location away from where the shipped
/// list names it (TRUST-6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Relocation {
    /// The variable's name, as the tools read it.
    pub var: &'static str,
    /// What its value names.
    pub names: Relocated,
    /// What the relocated location holds.
    pub protects: &'static str,
}

/// The relocation variables followed (TRUST-6). A value is resolved lexically: absolute, or
/// starting with `~/` (taken against `$HOME`), with `.` and `..` folded; a relative or empty
/// value is ignored, since it names a place relative to wherever a program runs. Only what
/// lands strictly below `$HOME` is added: the sandbox reads nothing else of the user's, and a
/// location that is `$HOME` itself (`DOCKER_CONFIG=$HOME`) is not hidden whole, which would
/// hide the toolchains too.
pub const RELOCATIONS: &[Relocation] = &[
    Relocation {
        var: "XDG_CONFIG_HOME",
        names: Relocated::Base(".config"),
        protects: "every listed location under ~/.config (gh, gcloud, rclone, …)",
    },
    Relocation {
        var: "XDG_DATA_HOME",
        names: Relocated::Base(".local/share"),
        protects: "every listed location under ~/.local/share (keyrings, histories, …)",
    },
    Relocation {
        var: "XDG_STATE_HOME",
        names: Relocated::Base(".local/state"),
        protects: "every listed location under ~/.local/state (editor histories)",
    },
    Relocation {
        var: "XDG_CACHE_HOME",
        names: Relocated::Base(".cache"),
        protects: "every listed location under ~/.cache (Hugging Face tokens)",
    },
    Relocation {
        var: "DOCKER_CONFIG",
        names: Relocated::Dir,
        protects: "Docker registry credentials (config.json)",
    },
    Relocation {
        var: "DOCKER_CERT_PATH",
        names: Relocated::Dir,
        protects: "Docker client TLS keys",
    },
    Relocation {
        var: "KUBECONFIG",
        names: Relocated::Files,
        protects: "Kubernetes cluster credentials",
    },
    Relocation {
        var: "GNUPGHOME",
        names: Relocated::Dir,
        protects: "GnuPG private keys",
    },
    Relocation {
        var: "PASSWORD_STORE_DIR",
        names: Relocated::Dir,
        protects: "pass's encrypted passwords",
    },
    Relocation {
        var: "CARGO_HOME",
        names: Relocated::FilesIn(&["credentials", "credentials.toml"]),
        protects: "crates.io tokens",
    },
    Relocation {
        var: "GRADLE_USER_HOME",
        names: Relocated::FilesIn(&["gradle.properties"]),
        protects: "Gradle repository and signing credentials",
    },
    Relocation {
        var: "AWS_SHARED_CREDENTIALS_FILE",
        names: Relocated::Files,
        protects: "AWS access keys",
    },
    Relocation {
        var: "AWS_CONFIG_FILE",
        names: Relocated::Files,
        protects: "AWS profiles and SSO settings",
    },
    Relocation {
        var: "AWS_WEB_IDENTITY_TOKEN_FILE",
        names: Relocated::Files,
        protects: "an AWS web identity token",
    },
    Relocation {
        var: "AZURE_CONFIG_DIR",
        names: Relocated::Dir,
        protects: "Azure CLI tokens",
    },
    Relocation {
        var: "CLOUDSDK_CONFIG",
        names: Relocated::Dir,
        protects: "Google Cloud SDK credentials",
    },
    Relocation {
        var: "GOOGLE_APPLICATION_CREDENTIALS",
        names: Relocated::Files,
        protects: "a Google service account key",
    },
    Relocation {
        var: "GH_CONFIG_DIR",
        names: Relocated::Dir,
        protects: "GitHub CLI tokens",
    },
    Relocation {
        var: "GLAB_CONFIG_DIR",
        names: Relocated::Dir,
        protects: "GitLab CLI tokens",
    },
    Relocation {
        var: "NPM_CONFIG_USERCONFIG",
        names: Relocated::Files,
        protects: "npm registry tokens",
    },
    Relocation {
        var: "npm_config_userconfig",
        names: Relocated::Files,
        protects: "npm registry tokens",
    },
    Relocation {
        var: "TF_CLI_CONFIG_FILE",
        names: Relocated::Files,
        protects: "Terraform Cloud tokens",
    },
    Relocation {
        var: "PULUMI_HOME",
        names: Relocated::Dir,
        protects: "Pulumi tokens",
    },
    Relocation {
        var: "MINIKUBE_HOME",
        names: Relocated::Dir,
        protects: "minikube cluster keys",
    },
    Relocation {
        var: "HF_HOME",
        names: Relocated::FilesIn(&["token", "stored_tokens"]),
        protects: "Hugging Face tokens",
    },
    Relocation {
        var: "HF_TOKEN_PATH",
        names: Relocated::Files,
        protects: "a Hugging Face token",
    },
    Relocation {
        var: "KAGGLE_CONFIG_DIR",
        names: Relocated::FilesIn(&["kaggle.json"]),
        protects: "the Kaggle API key",
    },
    Relocation {
        var: "CODEX_HOME",
        names: Relocated::FilesIn(&["auth.json"]),
        protects: "Codex CLI credentials",
    },
    Relocation {
        var: "CLAUDE_CONFIG_DIR",
        names: Relocated::FilesIn(&[".credentials.json"]),
        protects: "Claude Code credentials",
    },
    Relocation {
        var: "LLM_USER_PATH",
        names: Relocated::Dir,
        protects: "llm's API keys and prompt log",
    },
    Relocation {
        var: "COMPOSER_HOME",
        names: Relocated::FilesIn(&["auth.json"]),
        protects: "Composer registry tokens",
    },
    Relocation {
        var: "POETRY_CONFIG_DIR",
        names: Relocated::FilesIn(&["auth.toml"]),
        protects: "Poetry repository credentials",
    },
    Relocation {
        var: "BUNDLE_USER_CONFIG",
        names: Relocated::Files,
        protects: "Bundler gem source credentials",
    },
    Relocation {
        var: "PGPASSFILE",
        names: Relocated::Files,
        protects: "PostgreSQL passwords",
    },
    Relocation {
        var: "BOTO_CONFIG",
        names: Relocated::Files,
        protects: "boto / gsutil credentials",
    },
    Relocation {
        var: "RCLONE_CONFIG",
        names: Relocated::Files,
        protects: "rclone remotes' credentials",
    },
    Relocation {
        var: "OCI_CLI_CONFIG_FILE",
        names: Relocated::Files,
        protects: "Oracle Cloud CLI keys",
    },
    Relocation {
        var: "SOPS_AGE_KEY_FILE",
        names: Relocated::Files,
        protects: "sops age private keys",
    },
    Relocation {
        var: "SBT_CREDENTIALS",
        names: Relocated::Files,
        protects: "sbt repository credentials",
    },
    Relocation {
        var: "NETRC",
        names: Relocated::Files,
        protects: "netrc passwords",
    },
    Relocation {
        var: "PIP_CONFIG_FILE",
        names: Relocated::Files,
        protects: "pip index credentials",
    },
    Relocation {
        var: "CONDARC",
        names: Relocated::Files,
        protects: "conda channel credentials",
    },
    Relocation {
        var: "HISTFILE",
        names: Relocated::Files,
        protects: "the shell's history",
    },
    Relocation {
        var: "NODE_REPL_HISTORY",
        names: Relocated::Files,
        protects: "node's REPL history",
    },
    Relocation {
        var: "PYTHON_HISTORY",
        names: Relocated::Files,
        protects: "python's REPL history",
    },
    Relocation {
        var: "PSQL_HISTORY",
        names: Relocated::Files,
        protects: "psql's history",
    },
    Relocation {
        var: "MYSQL_HISTFILE",
        names: Relocated::Files,
        protects: "mysql's history",
    },
];

/// A relocation value resolved lexically: absolute, or `~/…` taken against `home`; `None` for
/// anything else.
pub(crate) fn resolve(value: &str, home: &Path) -> Option<PathBuf> {
    let path = if let Some(rest) = value.strip_prefix("~/") {
        home.join(rest)
    } else if value.starts_with('/') {
        PathBuf::from(value)
    } else {
        return None;
    };
    Some(normalize(Path::new("/"), &path))
}

/// `path` when it lies strictly below `home`.
pub(crate) fn below(path: PathBuf, home: &Path) -> Option<PathBuf> {
    (path.starts_with(home) && path != home).then_some(path)
}

/// The last value of `var` in `env` (later entries win, as when a host adds to its own).
pub(crate) fn lookup<'e>(env: &'e [(String, String)], var: &str) -> Option<&'e str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == var)
        .map(|(_, v)| v.as_str())
}

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
    /// From the shipped list: known to be a file or directory the sandbox hides inside a
    /// writable cache (see [`Policy::cache_paths`]).
    shipped: bool,
}

impl Entry {
    fn new(rel: PathBuf, shipped: bool) -> Entry {
        let lower = lower_components(&rel);
        Entry {
            rel,
            lower,
            shipped,
        }
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
            .filter_map(|e| relative(&e.path).ok().map(|r| Entry::new(r, true)))
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
#[cfg(test)]
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

    /// [`Policy::private_paths`] plus the locations the host's relocation variables move
    /// them to ([`RELOCATIONS`], TRUST-6), in that order, without duplicates. `env` is the
    /// host's environment (a later entry of a name wins); nothing is read from the process's
    /// own. Every path returned lies strictly below the normalised `home`.
    ///
    /// ```
    /// use std::path::Path;
    /// use argv_policy::{Mode, Policy};
    /// let policy = Policy::defaults(Mode::Safe);
    /// let env = [
    ///     ("DOCKER_CONFIG".to_owned(), "/home/u/cfg/docker".to_owned()),
    ///     ("XDG_CONFIG_HOME".to_owned(), "/home/u/cfg".to_owned()),
    ///     ("GNUPGHOME".to_owned(), "/srv/gnupg".to_owned()),
    /// ];
    /// let private = policy.private_paths_in(Path::new("/home/u"), &env);
    /// assert!(private.contains(&Path::new("/home/u/cfg/docker").to_path_buf()));
    /// assert!(private.contains(&Path::new("/home/u/cfg/gh").to_path_buf()));
    /// assert!(!private.iter().any(|p| p.starts_with("/srv")));
    /// ```
    pub fn private_paths_in(&self, home: &Path, env: &[(String, String)]) -> Vec<PathBuf> {
        let mut out = self.private_paths(home);
        out.extend(self.relocated_paths(home, env));
        out
    }

    /// The locations the host's relocation variables move private locations to
    /// ([`RELOCATIONS`], TRUST-6), without those [`Policy::private_paths`] lists already, each
    /// once. Every path returned lies strictly below the normalised `home`.
    pub fn relocated_paths(&self, home: &Path, env: &[(String, String)]) -> Vec<PathBuf> {
        let home = normalize(Path::new("/"), home);
        let mut out = Vec::new();
        for r in RELOCATIONS {
            let Some(value) = lookup(env, r.var).filter(|v| !v.is_empty()) else {
                continue;
            };
            let at = |one: &str| resolve(one, &home);
            match r.names {
                Relocated::Dir => out.extend(at(value).and_then(|p| below(p, &home))),
                Relocated::Files => out.extend(
                    value
                        .split(':')
                        .filter_map(|one| at(one).and_then(|p| below(p, &home))),
                ),
                Relocated::FilesIn(files) => {
                    if let Some(dir) = at(value) {
                        out.extend(files.iter().filter_map(|f| below(dir.join(f), &home)));
                    }
                }
                Relocated::Base(prefix) => {
                    if let Some(base) = at(value) {
                        out.extend(
                            self.private
                                .iter()
                                .filter_map(|e| e.rel.strip_prefix(prefix).ok())
                                .filter(|rest| !rest.as_os_str().is_empty())
                                .filter_map(|rest| below(base.join(rest), &home)),
                        );
                    }
                }
            }
        }
        let listed = self.private_paths(&home);
        let mut seen = std::collections::HashSet::new();
        out.retain(|p| !listed.contains(p) && seen.insert(p.clone()));
        out
    }

    /// Absolute paths under `home` of the toolchains' cache directories, writable in the
    /// run_command sandbox (RCS-2). A cache directory that is or lies in a private path is left
    /// out, and so is one that contains a private path of the user's: privacy wins over a warm
    /// cache. A shipped private path inside a cache (`.cache/huggingface/token`) leaves the cache
    /// writable: the sandbox hides that path inside the writable grant and protects the
    /// directories on its way (RCS-3), so the rest of `~/.cache` stays usable.
    pub fn cache_paths(&self, home: &Path) -> Vec<PathBuf> {
        let home = normalize(Path::new("/"), home);
        CACHE_DIRECTORIES
            .iter()
            .map(|rel| home.join(rel))
            .filter(|c| {
                !self.private.iter().any(|e| {
                    let p = home.join(&e.rel);
                    c.starts_with(&p) || !e.shipped && p.starts_with(c)
                })
            })
            .collect()
    }

    /// [`Policy::cache_paths`] plus the caches the host's environment moves ([`CACHE_VARS`]:
    /// `GOMODCACHE`, `npm_config_cache`, `$CARGO_HOME/registry`, …), each strictly below the
    /// normalised `home` and outside the private locations, without duplicates. `env` is the
    /// host's environment (a later entry of a name wins).
    ///
    /// ```
    /// use std::path::Path;
    /// use argv_policy::{Mode, Policy};
    /// let env = [("GOMODCACHE".to_owned(), "/home/u/gomod".to_owned())];
    /// let caches = Policy::defaults(Mode::Safe).cache_paths_in(Path::new("/home/u"), &env);
    /// assert!(caches.contains(&Path::new("/home/u/gomod").to_path_buf()));
    /// assert!(caches.contains(&Path::new("/home/u/go/pkg/mod").to_path_buf()));
    /// ```
    pub fn cache_paths_in(&self, home: &Path, env: &[(String, String)]) -> Vec<PathBuf> {
        let home = normalize(Path::new("/"), home);
        let mut out = self.cache_paths(&home);
        let private = self.private_paths_in(&home, env);
        for (var, below_it) in CACHE_VARS {
            let Some(base) = lookup(env, var).and_then(|v| resolve(v, &home)) else {
                continue;
            };
            let path = if below_it.is_empty() {
                base
            } else {
                base.join(below_it)
            };
            if let Some(p) = below(path, &home) {
                if !private
                    .iter()
                    .any(|x| p.starts_with(x) || x.starts_with(&p))
                    && !out.contains(&p)
                {
                    out.push(p);
                }
            }
        }
        out
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

    /// A sensitive path for RC-9 in `ctx`: [`Policy::is_sensitive_at`] under its home, or at
    /// or below one of the private locations the host resolved (`ctx.private`, ASCII case
    /// ignored).
    pub(crate) fn is_sensitive_in(&self, path: &Path, ctx: &crate::Context) -> bool {
        self.is_sensitive_at(path, &ctx.home)
            || ctx
                .private
                .iter()
                .any(|p| strip_prefix_ignoring_case(path, p).is_some())
    }

    /// Adds a user `private_path` entry (`~/.mytokens`).
    pub fn add_private(&mut self, text: &str) -> Result<(), crate::ConfigError> {
        let rel = parse_user_entry(text.trim()).map_err(|why| crate::ConfigError::Entry {
            list: "private_path",
            entry: text.to_owned(),
            why,
        })?;
        if !self.private.iter().any(|e| e.rel == rel) {
            self.private.push(Entry::new(rel, false));
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

    /// TRUST-6: credential files that would be readable if this list did not name them.
    #[test]
    fn trust_6_measured_credential_files_are_private() {
        let p = Policy::defaults(Mode::Safe);
        let home = Path::new(HOME);
        for rel in [
            ".config/filezilla/sitemanager.xml",
            ".config/filezilla/filezilla.xml",
            ".vnc/passwd",
            ".config/JetBrains/IntelliJIdea2024.1/c.kdbx",
            ".config/JetBrains/PyCharm2023.3/c.pwd",
            ".config/Code/User/globalStorage/state.vscdb",
            ".config/Cursor/User/globalStorage/state.vscdb",
            ".minikube/profiles/minikube/client.key",
            ".yarnrc",
            ".sbt/.credentials",
            ".nuget/NuGet/NuGet.Config",
            ".config/NuGet/NuGet.Config",
            ".config/io.datasette.llm/keys.json",
            ".config/openai/auth.json",
            ".codex/auth.json",
            ".claude/.credentials.json",
            ".gemini/oauth_creds.json",
            ".config/gh-copilot/config.yml",
            ".cargo/credentials.toml",
        ] {
            assert!(p.is_private(&home.join(rel), home), "{rel} is readable");
        }
        for rel in [
            ".config/Code/User/settings.json",
            ".vnc/xstartup.log",
            ".nuget/packages",
        ] {
            assert!(!p.is_private(&home.join(rel), home), "{rel} is hidden");
        }
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// TRUST-6: relocation variables resolved lexically; only what lands below `$HOME` counts.
    #[test]
    fn relocated_credentials_inside_home_are_private_too() {
        let p = Policy::defaults(Mode::Safe);
        let home = Path::new(HOME);
        let check = |pairs: &[(&str, &str)], want: &[&str], not: &[&str]| {
            let list = p.private_paths_in(home, &env(pairs));
            for w in want {
                assert!(list.contains(&PathBuf::from(w)), "{pairs:?}: {w} missing");
            }
            for n in not {
                assert!(
                    !list.iter().any(|x| x.starts_with(n)),
                    "{pairs:?}: {n} listed"
                );
            }
            for x in &list {
                assert!(x.starts_with(home) && x != home, "{}", x.display());
            }
        };
        check(
            &[("DOCKER_CONFIG", "/home/u/cfg/docker")],
            &["/home/u/cfg/docker"],
            &[],
        );
        check(&[("DOCKER_CONFIG", "~/d")], &["/home/u/d"], &[]);
        check(
            &[("DOCKER_CONFIG", "/home/u/a/../d/./e")],
            &["/home/u/d/e"],
            &[],
        );
        check(
            &[("DOCKER_CONFIG", "relative/docker")],
            &[],
            &["/home/u/relative"],
        );
        check(&[("DOCKER_CONFIG", "/etc/docker")], &[], &["/etc"]);
        check(&[("DOCKER_CONFIG", "/home/u/../v/d")], &[], &["/home/v"]);
        check(&[("GNUPGHOME", "/home/u")], &[], &[]);
        check(
            &[("GNUPGHOME", "/home/u/keys/gpg")],
            &["/home/u/keys/gpg"],
            &[],
        );
        check(
            &[(
                "KUBECONFIG",
                "/home/u/k/a.yaml::relative:/tmp/x:/home/u/k/b.yaml",
            )],
            &["/home/u/k/a.yaml", "/home/u/k/b.yaml"],
            &["/tmp", "/home/u/relative"],
        );
        check(
            &[("CARGO_HOME", "/home/u/tools/cargo")],
            &[
                "/home/u/tools/cargo/credentials.toml",
                "/home/u/tools/cargo/credentials",
            ],
            &["/home/u/tools/cargo/bin"],
        );
        check(&[("CARGO_HOME", "/opt/cargo")], &[], &["/opt"]);
        check(
            &[("XDG_CONFIG_HOME", "/home/u/conf")],
            &[
                "/home/u/conf/gh",
                "/home/u/conf/gcloud",
                "/home/u/conf/filezilla",
            ],
            &["/home/u/conf/fish"],
        );
        check(
            &[("XDG_DATA_HOME", "/home/u/data")],
            &["/home/u/data/keyrings", "/home/u/data/fish/fish_history"],
            &[],
        );
        check(
            &[("AWS_SHARED_CREDENTIALS_FILE", "/home/u/secrets/aws")],
            &["/home/u/secrets/aws"],
            &[],
        );
        // A later entry wins (the host's variables, then the ones it passes on).
        check(
            &[
                ("DOCKER_CONFIG", "/home/u/first"),
                ("DOCKER_CONFIG", "/home/u/second"),
            ],
            &["/home/u/second"],
            &["/home/u/first"],
        );
        assert_eq!(
            p.private_paths_in(home, &[]),
            p.private_paths(home),
            "no environment, the shipped and user list"
        );
    }

    /// TRUST-6, RC-9: a relocated credential the host resolved is a sensitive path, as the
    /// sandbox hides it.
    #[test]
    fn a_relocated_credential_cancels_a_read_only_match() {
        let p = Policy::defaults(Mode::Safe);
        let mut ctx = Context::new("/home/u/proj", HOME);
        let hit = |ctx: &Context, argv: &[&str]| {
            matches!(
                decide(&RunCommandArgs::new(argv.iter().copied()), &p, ctx),
                Decision::Run {
                    gate: Gate::None,
                    parallel: true,
                    ..
                }
            )
        };
        let cat = ["cat", "/home/u/cfg/docker/config.json"];
        let script = ["sh", "-c", "cat ~/cfg/docker/config.json"];
        assert!(
            hit(&ctx, &cat) && hit(&ctx, &script),
            "without the environment"
        );
        ctx.private = p.relocated_paths(
            Path::new(HOME),
            &env(&[("DOCKER_CONFIG", "/home/u/cfg/docker")]),
        );
        assert_eq!(ctx.private, vec![PathBuf::from("/home/u/cfg/docker")]);
        assert!(!hit(&ctx, &cat));
        assert!(!hit(&ctx, &script));
        assert!(!hit(&ctx, &["cat", "/home/u/CFG/Docker/config.json"]));
        assert!(hit(&ctx, &["cat", "/home/u/cfg/other.txt"]));
    }

    #[test]
    fn a_user_private_path_under_an_xdg_base_moves_with_it() {
        let p = Policy::load(
            Mode::Safe,
            Some(r#"{"private_path": ["~/.config/mytool"]}"#),
        )
        .unwrap();
        let list = p.private_paths_in(
            Path::new(HOME),
            &env(&[("XDG_CONFIG_HOME", "/home/u/.dotfiles/config")]),
        );
        assert!(list.contains(&PathBuf::from("/home/u/.dotfiles/config/mytool")));
    }

    #[test]
    fn every_relocation_says_what_it_protects_once() {
        let mut seen = std::collections::BTreeSet::new();
        for r in RELOCATIONS {
            assert!(!r.protects.trim().is_empty(), "{}", r.var);
            assert!(seen.insert(r.var), "{} twice", r.var);
            if let Relocated::Base(prefix) = r.names {
                assert!(
                    shipped().iter().any(|e| e.rel.starts_with(prefix)),
                    "{}: nothing listed under {prefix}",
                    r.var
                );
            }
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
        // The issue's forms: `~` is refused in a direct argv (RC-2) and expanded in a script.
        assert!(!hit(&["git", "log", "~/.ssh/id_rsa"]));
        assert!(!hit(&["cat", "~/.aws/credentials"]));
        assert!(!hit(&["sh", "-c", "git log ~/.ssh/id_rsa"]));
        assert!(!hit(&["sh", "-c", "cat ~/.aws/credentials"]));
        assert!(!hit(&["sh", "-c", "cat ~/.config/gh/hosts.yml"]));
        assert!(!hit(&["cat", "/home/u/.aws/credentials"]));
        assert!(!hit(&["cat", "/home/u/.mytokens/a"]));
        assert!(!hit(&["cat", "../.mytokens"]));
        assert!(!hit(&["cat", "--", "/home/u/Library/Messages/chat.db"]));
    }

    #[test]
    fn no_cache_path_is_or_lies_in_a_private_path_and_only_known_files_lie_in_one() {
        let p = Policy::defaults(Mode::Safe);
        let home = Path::new(HOME);
        let caches = p.cache_paths(home);
        assert_eq!(
            caches.len(),
            CACHE_DIRECTORIES.len(),
            "a shipped cache overlaps"
        );
        // The shipped private files the sandbox hides inside a writable cache.
        let inside = [
            home.join(".cache/huggingface/token"),
            home.join(".cache/huggingface/stored_tokens"),
            home.join(".hex/hex.config"),
        ];
        for c in &caches {
            assert!(c.starts_with(home) && c != home);
            for priv_ in p.private_paths(home) {
                assert!(
                    !overlaps(c, &priv_) || inside.contains(&priv_),
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
        for not in [
            ".m2",
            ".gradle",
            ".cargo",
            ".cargo/bin",
            ".rustup",
            ".deno",
            "go",
            "Library/Caches",
        ] {
            assert!(!caches.contains(&home.join(not)), "{not}");
        }
    }

    #[test]
    fn a_shipped_private_file_inside_a_cache_is_private_and_the_cache_stays_writable() {
        let p = Policy::defaults(Mode::Safe);
        let home = Path::new(HOME);
        assert!(p.cache_paths(home).contains(&home.join(".cache")));
        assert!(p.is_private(&home.join(".cache/huggingface/token"), home));
        assert!(!p.is_private(&home.join(".cache/huggingface/hub"), home));
        assert!(!p.is_private(&home.join(".cache"), home));
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
        fn every_relocated_private_path_lies_strictly_under_home(
            var in proptest::sample::select(RELOCATIONS.iter().map(|r| r.var).collect::<Vec<_>>()),
            value in "(~/|/|/home/u/)?[a-z.:/]{0,20}",
        ) {
            let p = Policy::defaults(Mode::Safe);
            let env = vec![(var.to_owned(), value)];
            for path in p.private_paths_in(Path::new(HOME), &env) {
                prop_assert!(path.starts_with(HOME) && path != Path::new(HOME), "{}", path.display());
                prop_assert!(!path.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)));
            }
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
