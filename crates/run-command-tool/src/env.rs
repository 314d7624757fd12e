//! The environment of a sandboxed `run_command` (documented in the crate docs).
//!
//! **Owns:** the exact list, and that no secret-looking variable is ever passed (RC-14).
//! **Refuses to know:** where the values come from beyond the host's environment and the
//! [`RunCommandOptions`](crate::RunCommandOptions).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Directories a program may live in that the sandbox's system runtime covers.
const SYSTEM_PREFIXES: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/opt"];

/// The fallback `PATH` when none of the host's entries is usable.
pub(crate) const SYSTEM_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

/// Toolchain variables passed when their value points into a readable place (or, for the
/// ones that name a version, holds no `/`).
pub(crate) const TOOLCHAIN_VARS: &[&str] = &[
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOPATH",
    "GOROOT",
    "GOBIN",
    "JAVA_HOME",
    "NVM_DIR",
    "NVM_BIN",
    "NVM_INC",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "npm_config_cache",
    "npm_config_prefix",
    "PNPM_HOME",
    "BUN_INSTALL",
    "DENO_DIR",
    "GEM_HOME",
    "GEM_PATH",
    "SDKMAN_DIR",
    "VOLTA_HOME",
    "GRADLE_USER_HOME",
    "MAVEN_HOME",
];

/// Where a machine keeps the certificate authorities it trusts: readable in every sandbox (the
/// system runtime set holds them), and public.
const TRUST_STORES: &[&str] = &["/etc/ssl", "/etc/pki", "/etc/ca-certificates"];

/// The TLS trust variables: passed when they name a file or directory of the system's trust
/// stores or another readable place, so a `network: true` install behind a TLS-inspecting
/// proxy trusts what the user's own tools trust. They name certificates, never keys.
const TRUST_VARS: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PIP_CERT",
    "GIT_SSL_CAINFO",
    "CARGO_HTTP_CAINFO",
    "NIX_SSL_CERT_FILE",
];

/// Variables naming a version or an environment, not a path.
const NAME_VARS: &[&str] = &["RUSTUP_TOOLCHAIN", "PYENV_VERSION", "CONDA_DEFAULT_ENV"];

/// Whether `name` looks like it holds a secret (argv-policy's rule, asked with a long dummy
/// value so the length rule does not decide).
pub(crate) fn secret_name(name: &str) -> bool {
    !argv_policy::secret_env_values([(name, "0123456789abcdef")]).is_empty()
}

/// What the sandbox lets a command read: the system runtime, the working directory, `$HOME`
/// outside its private and hidden locations.
pub(crate) struct Readable<'a> {
    pub(crate) home: &'a Path,
    pub(crate) workdir: &'a Path,
    pub(crate) private: &'a [PathBuf],
    /// What of `home` is readable: all of it but `private` (`None`), or only these locations
    /// (a call with network, TRUST-6).
    pub(crate) allowed: Option<&'a [PathBuf]>,
}

impl Readable<'_> {
    pub(crate) fn covers(&self, p: &Path) -> bool {
        if !p.is_absolute() {
            return false;
        }
        if self.private.iter().any(|x| p.starts_with(x)) {
            return false;
        }
        let in_home = match self.allowed {
            None => p.starts_with(self.home),
            Some(allowed) => allowed.iter().any(|a| p.starts_with(a)),
        };
        SYSTEM_PREFIXES.iter().any(|s| p.starts_with(s)) || in_home || p.starts_with(self.workdir)
    }
}

/// The `PATH` entries of `host_path` the sandbox can read, in order; the system directories
/// when none is left.
pub(crate) fn sandbox_path(host_path: Option<&str>, readable: &Readable<'_>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for entry in host_path.unwrap_or("").split(':') {
        let p = PathBuf::from(entry);
        if readable.covers(&p) && p.is_dir() && !out.contains(&p) {
            out.push(p);
        }
    }
    if out.is_empty() {
        out = SYSTEM_PATH.split(':').map(PathBuf::from).collect();
    }
    out
}

/// The whole environment: PATH, HOME, USER/LOGNAME, LANG/LC_ALL, TERM, TMPDIR, the toolchain
/// variables that point into readable places, then the host's `extra`; no secret-looking name.
pub(crate) fn build(
    host: &[(String, String)],
    path: &[PathBuf],
    home: &Path,
    tmpdir: &Path,
    readable: &Readable<'_>,
    extra: &[(String, String)],
) -> Vec<(OsString, OsString)> {
    let get = |k: &str| host.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let joined = std::env::join_paths(path).unwrap_or_else(|_| SYSTEM_PATH.into());
    let mut env: Vec<(OsString, OsString)> = vec![
        ("PATH".into(), joined),
        ("HOME".into(), home.into()),
        ("TERM".into(), "dumb".into()),
        ("TMPDIR".into(), tmpdir.into()),
    ];
    for k in ["USER", "LOGNAME"] {
        if let Some(v) = get(k) {
            env.push((k.into(), v.into()));
        }
    }
    for k in ["LANG", "LC_ALL"] {
        env.push((k.into(), get(k).unwrap_or("C.UTF-8").into()));
    }
    for k in TOOLCHAIN_VARS {
        let Some(v) = get(k) else { continue };
        let ok = if NAME_VARS.contains(k) {
            !v.contains('/')
        } else {
            v.split(':').all(|p| readable.covers(Path::new(p)))
        };
        if ok {
            env.push(((*k).into(), v.into()));
        }
    }
    for k in TRUST_VARS {
        let Some(v) = get(k) else { continue };
        let p = Path::new(v);
        // Only what a program may use from the host: no `..` on the way out of a store.
        let plain = p
            .components()
            .all(|c| !matches!(c, std::path::Component::ParentDir));
        if plain && (TRUST_STORES.iter().any(|s| p.starts_with(s)) || readable.covers(p)) {
            env.push(((*k).into(), v.into()));
        }
    }
    for (k, v) in extra {
        if secret_name(k) || env.iter().any(|(n, _)| n == k.as_str()) {
            continue;
        }
        env.push((k.into(), v.into()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable<'a>(private: &'a [PathBuf]) -> Readable<'a> {
        Readable {
            home: Path::new("/home/u"),
            workdir: Path::new("/home/u/p"),
            private,
            allowed: None,
        }
    }

    #[test]
    fn path_keeps_readable_entries_only() {
        let private = [PathBuf::from("/home/u/.ssh")];
        let r = readable(&private);
        assert!(r.covers(Path::new("/usr/bin")));
        assert!(r.covers(Path::new("/home/u/.cargo/bin")));
        assert!(!r.covers(Path::new("/home/u/.ssh/bin")));
        assert!(!r.covers(Path::new("/srv/bin")));
        assert!(!r.covers(Path::new("relative")));
        let p = sandbox_path(Some("/srv/x:/nonexistent"), &r);
        assert_eq!(
            p,
            SYSTEM_PATH
                .split(':')
                .map(PathBuf::from)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn no_secret_looking_variable_is_passed() {
        let private = [];
        let r = readable(&private);
        let host = vec![
            ("USER".to_string(), "u".to_string()),
            (
                "GITHUB_TOKEN".to_string(),
                "ghp_aaaaaaaaaaaaaaaa".to_string(),
            ),
            ("CARGO_HOME".to_string(), "/home/u/.cargo".to_string()),
            ("GOROOT".to_string(), "/srv/go".to_string()),
            ("RUSTUP_TOOLCHAIN".to_string(), "stable".to_string()),
        ];
        let extra = vec![
            ("MY_API_KEY".to_string(), "x".to_string()),
            ("GIT_AUTHOR_NAME".to_string(), "A".to_string()),
        ];
        let env = build(
            &host,
            &[PathBuf::from("/usr/bin")],
            Path::new("/home/u"),
            Path::new("/tmp/t"),
            &r,
            &extra,
        );
        let names: Vec<String> = env
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        for want in [
            "PATH",
            "HOME",
            "TERM",
            "TMPDIR",
            "USER",
            "LANG",
            "LC_ALL",
            "CARGO_HOME",
            "RUSTUP_TOOLCHAIN",
            "GIT_AUTHOR_NAME",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
        }
        for never in ["GITHUB_TOKEN", "MY_API_KEY", "GOROOT"] {
            assert!(!names.iter().any(|n| n == never), "{never} passed");
        }
    }

    #[test]
    fn tls_trust_variables_pass_only_into_trust_stores_or_readable_places() {
        let private = [PathBuf::from("/home/u/.ssh")];
        let r = readable(&private);
        let host: Vec<(String, String)> = [
            ("NODE_EXTRA_CA_CERTS", "/etc/ssl/certs/ca-certificates.crt"),
            ("SSL_CERT_DIR", "/etc/pki/tls/certs"),
            ("REQUESTS_CA_BUNDLE", "/home/u/corp/ca.pem"),
            ("PIP_CERT", "/home/u/.ssh/id_rsa"),
            ("CURL_CA_BUNDLE", "/etc/ssl/../shadow"),
            ("GIT_SSL_CAINFO", "/srv/secret/ca.pem"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let env = build(&host, &[], Path::new("/home/u"), Path::new("/t"), &r, &[]);
        let names: Vec<String> = env
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        for want in ["NODE_EXTRA_CA_CERTS", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE"] {
            assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
        }
        for never in ["PIP_CERT", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"] {
            assert!(!names.iter().any(|n| n == never), "{never} passed");
        }
    }
}
