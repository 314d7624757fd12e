//! The user's own toolchains, when the host opts in (LIVE-3): read + execute of the
//! known toolchain homes that exist under the user's home directory, the variables that point
//! the tools at them, and never a credential file.
//!
//! **Owns:** the table of toolchain homes ([`HOMES`]), what each one grants (a few directories
//! and configuration files, never the home's top level when it holds credentials: `~/.cargo`
//! itself holds `credentials.toml`, so only `~/.cargo/bin`, `registry`, `git` and `config.toml`
//! are granted), the `PATH` entries and variables it adds, and the refusal of any grant that
//! would contain a credential location ([`CREDENTIALS`]) or the home directory itself.
//!
//! **Refuses to know:** how the host learns that the user opted in (a CLI flag, a config field),
//! and `run`: a mirror's single program never gets toolchains.
//!
//! Every grant is read-only — the sandbox makes read-only roots executable — but the caches a
//! toolchain fills as it builds (`~/.cargo/registry`, `~/.cargo/git`, `~/go/pkg/mod`), which the
//! command sees through a private copy-on-write view for the call (TRUST-3, `exec::CacheViews`):
//! `cargo build --offline` unpacks crates into its view, and the user's caches never change. The paths are fixed names under the home
//! directory the host passes, canonicalized on the host (a toolchain home may be a link, e.g.
//! into `/opt`) and then opened without following links, like an extra path.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use exec::{Access, Grant};

/// One toolchain home.
struct Home {
    /// Paths under the home directory granted read + execute, where they exist.
    grants: &'static [&'static str],
    /// Directories put in front of `PATH`, where they exist. A `*` component stands for every
    /// entry of that directory (sorted, newest-looking version first).
    path: &'static [&'static str],
    /// Variables set to a path under the home directory, where that path exists.
    env: &'static [(&'static str, &'static str)],
    /// Caches under the home directory the tool writes as it builds, where they exist: read and
    /// written through a private view for the call, never changed.
    caches: &'static [&'static str],
}

/// The toolchain homes `--toolchains` adds, in `PATH` order.
const HOMES: &[Home] = &[
    // Rust (rustup, cargo).
    Home {
        // Not `.cargo/config.toml`: it may hold `[registry] token`.
        grants: &[".rustup", ".cargo/bin"],
        path: &[".cargo/bin"],
        env: &[("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")],
        caches: &[".cargo/registry", ".cargo/git"],
    },
    // Node (nvm).
    Home {
        // Not a version's `etc/npmrc`: npm's global config, where `_authToken` goes.
        grants: &[
            ".nvm/versions/node/*/bin",
            ".nvm/versions/node/*/lib",
            ".nvm/versions/node/*/include",
            ".nvm/versions/node/*/share",
        ],
        path: &[".nvm/versions/node/*/bin"],
        env: &[],
        caches: &[],
    },
    // Node (volta).
    Home {
        grants: &[".volta/bin", ".volta/tools"],
        path: &[".volta/bin"],
        env: &[("VOLTA_HOME", ".volta")],
        caches: &[],
    },
    // Python (pyenv).
    Home {
        // A version's programs and libraries, not its top level (a `pip.conf` there may name
        // an index with credentials).
        grants: &[
            ".pyenv/versions/*/bin",
            ".pyenv/versions/*/lib",
            ".pyenv/versions/*/include",
            ".pyenv/versions/*/share",
            ".pyenv/shims",
            ".pyenv/bin",
            ".pyenv/libexec",
            ".pyenv/version",
        ],
        path: &[".pyenv/shims", ".pyenv/bin"],
        env: &[("PYENV_ROOT", ".pyenv")],
        caches: &[],
    },
    // user-installed programs (pip --user, pipx).
    Home {
        grants: &[".local/bin", ".local/lib"],
        path: &[".local/bin"],
        env: &[],
        caches: &[],
    },
    // Go.
    Home {
        grants: &["go/bin"],
        path: &["go/bin"],
        env: &[("GOPATH", "go")],
        caches: &["go/pkg/mod"],
    },
    // SDKMAN (Java, Gradle, Maven, Kotlin).
    Home {
        // A JDK whole (its `conf` holds java.security, no credentials); of other candidates
        // only programs and libraries: Maven's `conf/settings.xml` may hold server passwords.
        grants: &[
            ".sdkman/candidates/java/*",
            ".sdkman/candidates/*/*/bin",
            ".sdkman/candidates/*/*/lib",
            ".sdkman/candidates/*/*/boot",
            ".sdkman/candidates/*/*/libexec",
        ],
        path: &[".sdkman/candidates/*/current/bin"],
        env: &[],
        caches: &[],
    },
    // Bun.
    Home {
        grants: &[".bun/bin"],
        path: &[".bun/bin"],
        env: &[],
        caches: &[],
    },
    // Deno.
    Home {
        grants: &[".deno/bin"],
        path: &[".deno/bin"],
        env: &[],
        caches: &[],
    },
];

/// Credential and private-data locations under the home directory: no toolchain grant may be
/// one of them or contain one (checked on canonical paths, so a toolchain home linked to `~`
/// grants nothing).
pub const CREDENTIALS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".config",
    ".netrc",
    ".npmrc",
    ".yarnrc",
    ".pypirc",
    ".git-credentials",
    ".gitconfig",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".local/share",
    ".password-store",
    ".bash_history",
    ".zsh_history",
];

/// At most this many toolchain grants per call (each is a Landlock rule, and a bind in the
/// command's view): the newest versions first, the rest left out.
const MAX_GRANTS: usize = 48;

/// What the toolchains add to one call.
#[derive(Debug, Default)]
pub(crate) struct Resolved {
    /// Read + execute grants.
    pub grants: Vec<Grant>,
    /// `PATH` entries, in order, before the system's.
    pub path: Vec<PathBuf>,
    /// Variables (`CARGO_HOME`, `RUSTUP_HOME`, …).
    pub env: Vec<(OsString, OsString)>,
    /// The caches among `grants` (read + write), each to be seen through a private view.
    pub caches: Vec<PathBuf>,
}

/// The toolchains under `home` that exist, minus anything in `hidden` (the host's state) or
/// touching a credential location. A toolchain home that cannot be opened is left out, not an
/// error: the command runs with what there is, as without `--toolchains`.
/// Every toolchain cache under `home`, existing or not (TRUST-3): a writable root may neither
/// be, hold nor lie in one.
pub(crate) fn caches_under(home: &Path) -> Vec<PathBuf> {
    HOMES
        .iter()
        .flat_map(|h| h.caches.iter())
        .map(|c| home.join(c))
        .collect()
}

pub(crate) fn resolve(home: &Path, hidden: &[PathBuf]) -> Resolved {
    let Ok(home) = home.canonicalize() else {
        return Resolved::default();
    };
    let credentials: Vec<PathBuf> = CREDENTIALS
        .iter()
        .map(|c| {
            let p = home.join(c);
            p.canonicalize().unwrap_or(p)
        })
        .collect();
    let hidden: Vec<PathBuf> = hidden
        .iter()
        .map(|h| h.canonicalize().unwrap_or_else(|_| h.clone()))
        .collect();
    let safe = |p: &Path| {
        !home.starts_with(p)
            && !credentials
                .iter()
                .any(|c| c.starts_with(p) || p.starts_with(c))
            && !hidden.iter().any(|h| h.starts_with(p) || p.starts_with(h))
    };
    let mut out = Resolved::default();
    for tool in HOMES {
        for pattern in tool.grants {
            for path in expand(&home, pattern) {
                // Opened without following any link (`Grant::open`): a command that could
                // write in the home directory (a workspace there, a dotfiles repository) could
                // otherwise re-point `~/.local/lib` at `/etc/ssl/private` or `/proc` for the
                // next call. A toolchain home reached through a link is left
                // out.
                if out.grants.len() >= MAX_GRANTS
                    || !safe(&path)
                    || out.grants.iter().any(|g| g.path == path)
                {
                    continue;
                }
                if let Ok(grant) = Grant::open(&path, Access::Read) {
                    out.grants.push(grant);
                }
            }
        }
        for pattern in tool.caches {
            for path in expand(&home, pattern) {
                if out.grants.len() >= MAX_GRANTS
                    || !safe(&path)
                    || out.grants.iter().any(|g| g.path == path)
                {
                    continue;
                }
                if let Ok(grant) = Grant::open(&path, Access::ReadWrite) {
                    out.grants.push(grant);
                    out.caches.push(path);
                }
            }
        }
        let granted = |p: &Path| {
            p.canonicalize()
                .is_ok_and(|c| out.grants.iter().any(|g| c.starts_with(&g.path)))
        };
        for pattern in tool.path {
            for dir in expand(&home, pattern) {
                if dir.is_dir() && granted(&dir) && !out.path.contains(&dir) {
                    out.path.push(dir);
                }
            }
        }
        for (name, rel) in tool.env {
            let value = home.join(rel);
            if value.exists() {
                out.env.push(((*name).into(), value.into_os_string()));
            }
        }
    }
    out
}

/// `pattern` under `home`, with each `*` component standing for every entry there, highest
/// version first (`v20.11.0` before `v18.19.0`; numeric runs compare as numbers).
fn expand(home: &Path, pattern: &str) -> Vec<PathBuf> {
    let mut found = vec![home.to_path_buf()];
    for component in pattern.split('/') {
        if component == "*" {
            let mut next = Vec::new();
            for dir in &found {
                let Ok(entries) = std::fs::read_dir(dir) else {
                    continue;
                };
                let mut names: Vec<OsString> = entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name())
                    .filter(|n| !n.to_string_lossy().starts_with('.'))
                    .collect();
                names.sort_by_key(|n| std::cmp::Reverse(version_key(n)));
                next.extend(names.into_iter().map(|n| dir.join(n)));
            }
            found = next;
        } else {
            for dir in &mut found {
                dir.push(component);
            }
        }
    }
    found
}

/// A sort key that orders `v9.1` before `v10.0`: the name split into text and numbers.
fn version_key(name: &OsString) -> Vec<(String, u64)> {
    let name = name.to_string_lossy();
    let mut key = Vec::new();
    let mut text = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            let mut n: u64 = c.to_digit(10).map_or(0, u64::from);
            while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                n = n.saturating_mul(10).saturating_add(u64::from(d));
                chars.next();
            }
            key.push((std::mem::take(&mut text), n));
        } else {
            text.push(c);
        }
    }
    key.push((text, 0));
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_versions_sort_first() {
        let mut names: Vec<OsString> = ["v9.1.0", "v18.19.0", "v20.11.0", "v20.2.0"]
            .iter()
            .map(OsString::from)
            .collect();
        names.sort_by_key(|n| std::cmp::Reverse(version_key(n)));
        assert_eq!(names, ["v20.11.0", "v20.2.0", "v18.19.0", "v9.1.0"]);
    }

    #[test]
    fn a_toolchain_home_linked_to_the_home_directory_grants_nothing() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir(home.path().join(".ssh")).unwrap();
        std::os::unix::fs::symlink(home.path(), home.path().join(".rustup")).unwrap();
        std::os::unix::fs::symlink(home.path().join(".ssh"), home.path().join(".local")).unwrap();
        let resolved = resolve(home.path(), &[]);
        assert!(resolved.grants.is_empty(), "{:?}", resolved.grants);
    }

    #[test]
    fn a_toolchain_directory_re_pointed_by_a_link_is_left_out() {
        let home = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".local")).unwrap();
        std::fs::create_dir_all(home.path().join(".cargo")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), home.path().join(".local/lib")).unwrap();
        std::os::unix::fs::symlink("/etc", home.path().join(".cargo/registry")).unwrap();
        let version = home.path().join(".pyenv/version");
        std::fs::create_dir_all(home.path().join(".pyenv")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join("x"), &version).unwrap();
        let resolved = resolve(home.path(), &[]);
        assert!(resolved.grants.is_empty(), "{:?}", resolved.grants);
    }

    #[test]
    fn a_versions_global_npmrc_and_cargo_config_are_not_granted() {
        let home = tempfile::tempdir().unwrap();
        for dir in [
            ".nvm/versions/node/v20.1.0/bin",
            ".nvm/versions/node/v20.1.0/etc",
        ] {
            std::fs::create_dir_all(home.path().join(dir)).unwrap();
        }
        std::fs::create_dir_all(home.path().join(".cargo/bin")).unwrap();
        std::fs::write(home.path().join(".cargo/config.toml"), "token").unwrap();
        let resolved = resolve(home.path(), &[]);
        let home = home.path().canonicalize().unwrap();
        let granted: Vec<&Path> = resolved.grants.iter().map(|g| g.path.as_path()).collect();
        assert_eq!(
            granted,
            [
                home.join(".cargo/bin"),
                home.join(".nvm/versions/node/v20.1.0/bin")
            ]
        );
    }

    #[test]
    fn only_the_cargo_subdirectories_are_granted_never_its_credentials() {
        let home = tempfile::tempdir().unwrap();
        for dir in [".cargo/bin", ".cargo/registry", ".rustup/toolchains"] {
            std::fs::create_dir_all(home.path().join(dir)).unwrap();
        }
        std::fs::write(home.path().join(".cargo/credentials.toml"), "token").unwrap();
        let resolved = resolve(home.path(), &[]);
        let home = home.path().canonicalize().unwrap();
        let granted: Vec<&Path> = resolved.grants.iter().map(|g| g.path.as_path()).collect();
        assert_eq!(
            granted,
            [
                home.join(".rustup"),
                home.join(".cargo/bin"),
                home.join(".cargo/registry")
            ]
        );
        assert_eq!(resolved.path, [home.join(".cargo/bin")]);
        assert!(resolved.env.iter().any(|(k, _)| k == "CARGO_HOME"));
    }
}
