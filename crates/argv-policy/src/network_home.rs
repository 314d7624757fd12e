//! What of `$HOME` a `run_command` with `network: true` may read (TRUST-6): the toolchain homes
//! and the tools' non-secret configuration, nothing else of the user's.
//!
//! Without network, `$HOME` minus the private set is readable: what a command reads has no way
//! out but the answer the host sees. With network every readable byte is a byte that can leave,
//! so the view narrows to what builds and installs read — the compilers' and package managers'
//! homes and caches, the programs on `PATH` below `$HOME`, git's and the package managers'
//! settings — and the user's documents, notes, other projects and application data stay out.
//!
//! **Owns**: the shipped allowlist [`NETWORK_HOME`], the variables that move a toolchain home
//! ([`TOOLCHAIN_HOMES`]), and the narrowing of the cache list to the allowlist.
//!
//! **Refuses to know**: how a sandbox grants the paths and whether they exist; like the private
//! list, everything here is lexical. The private list still wins inside an allowed directory
//! (`~/.cargo/credentials.toml` stays hidden while `~/.cargo` is read).

use std::path::{Path, PathBuf};

use crate::paths::normalize;
use crate::policy::Policy;
use crate::private::{below, lookup, resolve};

/// The shipped allowlist, relative to `$HOME`: each location with what reads it. A location
/// that is or lies in a private one is left out when the list is resolved
/// ([`Policy::network_home_paths`]).
pub const NETWORK_HOME: &[(&str, &str)] = &[
    // Compilers, interpreters and their package managers' homes.
    (
        ".cargo",
        "cargo's home: its registry, git checkouts, config and installed programs",
    ),
    (".rustup", "rustup's toolchains"),
    // Not GOPATH's `src`: other projects live there in the GOPATH layout.
    ("go/pkg", "Go's module cache"),
    ("go/bin", "programs go install made"),
    (".npm", "npm's cache"),
    (".nvm", "nvm's Node versions"),
    (".fnm", "fnm's Node versions"),
    (".local/share/fnm", "fnm's Node versions"),
    (".volta", "Volta's Node versions"),
    (".node-gyp", "node-gyp's headers"),
    (".yarn", "Yarn's cache and releases"),
    (".pnpm-store", "pnpm's store"),
    (".local/share/pnpm", "pnpm's store and programs"),
    (".bun", "Bun's home and cache"),
    (".deno", "Deno's home"),
    (".pyenv", "pyenv's Python versions"),
    (
        ".local/bin",
        "programs installed for the user (pip --user, pipx, uv tool)",
    ),
    (".local/lib", "Python's user site-packages"),
    (".local/share/uv", "uv's Python versions and tools"),
    (".local/share/pipx", "pipx's environments"),
    (".local/pipx", "pipx's environments"),
    (".local/share/virtualenv", "virtualenv's seed wheels"),
    (".local/share/mise", "mise's tool versions"),
    (".asdf", "asdf's tool versions"),
    (".tool-versions", "asdf's and mise's version pins"),
    (".rbenv", "rbenv's Ruby versions"),
    (".gem", "RubyGems' installed gems"),
    (".local/share/gem", "RubyGems' installed gems"),
    (".sdkman", "SDKMAN's JDKs and build tools"),
    (".jdks", "JDKs installed by IDEs"),
    (".m2/repository", "Maven's repository"),
    (".m2/wrapper", "the Maven wrapper's distributions"),
    (".gradle/caches", "Gradle's caches"),
    (".gradle/wrapper", "the Gradle wrapper's distributions"),
    (".gradle/native", "Gradle's native libraries"),
    (".gradle/jdks", "Gradle's toolchain JDKs"),
    (".gradle/daemon", "Gradle's daemon"),
    (".ivy2/cache", "Ivy's cache"),
    (".ivy2/local", "Ivy's local repository"),
    (".sbt/boot", "sbt's launcher"),
    (".coursier", "Coursier's cache"),
    (".dotnet", ".NET SDKs and tools"),
    (".nuget/packages", "NuGet's packages"),
    (".pub-cache", "Dart's and Flutter's packages"),
    (".cabal", "Cabal's packages"),
    (".ghcup", "GHCup's Haskell toolchains"),
    (".stack", "Stack's toolchains and packages"),
    (".opam", "opam's OCaml switches"),
    (".elan", "elan's Lean toolchains"),
    (".julia", "Julia's packages and artifacts"),
    (".nimble", "Nimble's packages"),
    (".mix", "Mix's archives"),
    (".hex", "Hex's packages"),
    (".cpanm", "cpanm's work directory"),
    (".conan2", "Conan's packages"),
    (".platformio", "PlatformIO's toolchains"),
    (".ccache", "ccache's cache"),
    (".swiftpm", "SwiftPM's configuration and cache"),
    // The toolchains' folders of the XDG cache, not the cache as a whole: browsers and
    // applications keep session data beside them.
    (".cache/pip", "pip's cache"),
    (".cache/uv", "uv's cache"),
    (".cache/pypoetry", "Poetry's cache and virtual environments"),
    (".cache/pre-commit", "pre-commit's hook environments"),
    (".cache/go-build", "Go's build cache"),
    (".cache/yarn", "Yarn's cache"),
    (".cache/pnpm", "pnpm's cache"),
    (".cache/deno", "Deno's cache"),
    (".cache/node-gyp", "node-gyp's headers"),
    (".cache/typescript", "TypeScript's type cache"),
    (".cache/ms-playwright", "Playwright's browsers"),
    (".cache/Cypress", "Cypress's binary"),
    (".cache/puppeteer", "Puppeteer's browsers"),
    (".cache/bazel", "Bazel's output base"),
    (".cache/bazelisk", "Bazelisk's Bazel versions"),
    (".cache/ccache", "ccache's cache"),
    (".cache/sccache", "sccache's cache"),
    (".cache/zig", "Zig's cache"),
    (".cache/coursier", "Coursier's cache"),
    (".cache/huggingface", "Hugging Face models and datasets"),
    (".cache/torch", "PyTorch's model cache"),
    (".cache/fontconfig", "fontconfig's cache"),
    ("Library/Caches/pip", "pip's cache"),
    ("Library/Caches/pypoetry", "Poetry's cache"),
    ("Library/Caches/go-build", "Go's build cache"),
    ("Library/Caches/Yarn", "Yarn's cache"),
    ("Library/Caches/pnpm", "pnpm's cache"),
    ("Library/Caches/deno", "Deno's cache"),
    ("Library/Caches/node-gyp", "node-gyp's headers"),
    ("Library/Caches/typescript", "TypeScript's type cache"),
    ("Library/Caches/ms-playwright", "Playwright's browsers"),
    ("Library/Caches/Cypress", "Cypress's binary"),
    ("Library/Caches/CocoaPods", "CocoaPods' cache"),
    ("Library/Caches/org.swift.swiftpm", "SwiftPM's cache"),
    ("Library/Caches/bazel", "Bazel's output base"),
    ("Library/Caches/ccache", "ccache's cache"),
    // The tools' own settings. Those made for secrets (`.npmrc`, `pip.conf`, `.yarnrc.yml`,
    // `~/.m2/settings.xml`, pnpm's `rc`) are private and stay out; mise's `config.toml`, whose
    // `[env]` often holds them, is not here. A token a user writes inline into one of these
    // (a URL in `.gitconfig`, a registry token in `.cargo/config.toml`) is readable with
    // network: the note in `doctor` says so.
    (".gitconfig", "git's settings"),
    (".config/git", "git's settings, ignore and attribute files"),
    (".gitignore_global", "git's global ignore file"),
    (".config/uv", "uv's settings"),
    (".config/pnpm", "pnpm's settings"),
    (".config/go", "Go's settings (go env -w)"),
    (".editorconfig", "editors' and formatters' settings"),
];

/// Variables that move a toolchain home (an absolute or `~/` directory, taken when it lies
/// strictly below `$HOME`), read with network like the location they replace.
pub const TOOLCHAIN_HOMES: &[&str] = &[
    "CARGO_HOME",
    "RUSTUP_HOME",
    "GOPATH",
    "GOMODCACHE",
    "GOCACHE",
    "NVM_DIR",
    "VOLTA_HOME",
    "FNM_DIR",
    "PNPM_HOME",
    "BUN_INSTALL",
    "DENO_DIR",
    "npm_config_cache",
    "NPM_CONFIG_CACHE",
    "YARN_CACHE_FOLDER",
    "PYENV_ROOT",
    "UV_CACHE_DIR",
    "UV_PYTHON_INSTALL_DIR",
    "UV_TOOL_DIR",
    "PIP_CACHE_DIR",
    "PIPX_HOME",
    "POETRY_CACHE_DIR",
    "RBENV_ROOT",
    "GEM_HOME",
    "SDKMAN_DIR",
    "GRADLE_USER_HOME",
    "ASDF_DATA_DIR",
    "MISE_DATA_DIR",
    "JULIA_DEPOT_PATH",
    "GHCUP_INSTALL_BASE_PREFIX",
    "STACK_ROOT",
    "OPAMROOT",
    "DOTNET_ROOT",
    "NUGET_PACKAGES",
    "PUB_CACHE",
    "CCACHE_DIR",
    "SCCACHE_DIR",
    "PLAYWRIGHT_BROWSERS_PATH",
];

/// The XDG base variables and the `$HOME`-relative prefix each stands in for: an allowlisted
/// location below the prefix is allowed below the variable's value too.
const XDG_BASES: &[(&str, &str)] = &[
    ("XDG_CACHE_HOME", ".cache"),
    ("XDG_CONFIG_HOME", ".config"),
    ("XDG_DATA_HOME", ".local/share"),
];

impl Policy {
    /// Absolute paths under `home` a `run_command` with `network: true` may read (TRUST-6):
    /// [`NETWORK_HOME`], the same locations where the XDG base variables move them, the
    /// directories [`TOOLCHAIN_HOMES`] name, and the `PATH` directories below `home` (a command
    /// runs the programs it finds there). `env` is the host's environment. A location that is
    /// or lies in a private one ([`Policy::private_paths_in`]) is left out, and so is `home`
    /// itself; one that lies in another listed location is folded into it. Sorted.
    ///
    /// ```
    /// use std::path::Path;
    /// use argv_policy::{Mode, Policy};
    /// let policy = Policy::defaults(Mode::Safe);
    /// let env = [
    ///     ("PATH".to_owned(), "/home/u/bin:/usr/bin".to_owned()),
    ///     ("CARGO_HOME".to_owned(), "/home/u/tools/cargo".to_owned()),
    /// ];
    /// let allowed = policy.network_home_paths(Path::new("/home/u"), &env);
    /// assert!(allowed.contains(&Path::new("/home/u/.rustup").to_path_buf()));
    /// assert!(allowed.contains(&Path::new("/home/u/bin").to_path_buf()));
    /// assert!(allowed.contains(&Path::new("/home/u/tools/cargo").to_path_buf()));
    /// assert!(!allowed.iter().any(|p| p.starts_with("/home/u/Documents")));
    /// assert!(!allowed.iter().any(|p| p.starts_with("/home/u/.ssh")));
    /// ```
    pub fn network_home_paths(&self, home: &Path, env: &[(String, String)]) -> Vec<PathBuf> {
        let home = normalize(Path::new("/"), home);
        let mut out: Vec<PathBuf> = NETWORK_HOME.iter().map(|(rel, _)| home.join(rel)).collect();
        for (var, prefix) in XDG_BASES {
            let Some(base) = lookup(env, var).and_then(|v| resolve(v, &home)) else {
                continue;
            };
            out.extend(
                NETWORK_HOME
                    .iter()
                    .filter_map(|(rel, _)| Path::new(rel).strip_prefix(prefix).ok())
                    .filter(|rest| !rest.as_os_str().is_empty())
                    .filter_map(|rest| below(base.join(rest), &home)),
            );
        }
        for var in TOOLCHAIN_HOMES {
            // JULIA_DEPOT_PATH and a few others may list several directories.
            let Some(value) = lookup(env, var) else {
                continue;
            };
            out.extend(
                value
                    .split(':')
                    .filter_map(|one| resolve(one, &home))
                    .filter_map(|p| below(p, &home)),
            );
        }
        if let Some(path) = lookup(env, "PATH") {
            out.extend(
                path.split(':')
                    .filter(|one| one.starts_with('/'))
                    .filter_map(|one| resolve(one, &home))
                    .filter_map(|p| below(p, &home)),
            );
        }
        let private = self.private_paths_in(&home, env);
        out.retain(|p| !private.iter().any(|x| p.starts_with(x)));
        fold(out)
    }

    /// The toolchains' caches ([`Policy::cache_paths`]) narrowed to the network view: a cache
    /// inside an allowed location stays, a wider one (`~/.cache`) gives way to the allowed
    /// locations inside it (`~/.cache/pip`, `~/.cache/uv`, …). Sorted.
    ///
    /// ```
    /// use std::path::Path;
    /// use argv_policy::{Mode, Policy};
    /// let policy = Policy::defaults(Mode::Safe);
    /// let caches = policy.network_cache_paths(Path::new("/home/u"), &[]);
    /// assert!(caches.contains(&Path::new("/home/u/.cache/pip").to_path_buf()));
    /// assert!(caches.contains(&Path::new("/home/u/.cargo/registry").to_path_buf()));
    /// assert!(!caches.contains(&Path::new("/home/u/.cache").to_path_buf()));
    /// ```
    pub fn network_cache_paths(&self, home: &Path, env: &[(String, String)]) -> Vec<PathBuf> {
        let allowed = self.network_home_paths(home, env);
        let mut out = Vec::new();
        for cache in self.cache_paths_in(home, env) {
            if allowed.iter().any(|a| cache.starts_with(a)) {
                out.push(cache);
            } else {
                out.extend(allowed.iter().filter(|a| a.starts_with(&cache)).cloned());
            }
        }
        fold(out)
    }
}

/// `paths` sorted, without duplicates and without any that lies in another.
fn fold(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort();
    paths.dedup();
    let mut out: Vec<PathBuf> = Vec::with_capacity(paths.len());
    for p in paths {
        // Sorted order puts a directory before everything below it.
        if !out.last().is_some_and(|last| p.starts_with(last)) {
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Mode;
    use proptest::prelude::*;

    const HOME: &str = "/home/u";

    fn allowed(env: &[(&str, &str)]) -> Vec<PathBuf> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Policy::defaults(Mode::Safe).network_home_paths(Path::new(HOME), &env)
    }

    #[test]
    fn every_entry_says_what_reads_it_and_is_relative() {
        for (rel, what) in NETWORK_HOME {
            assert!(!what.is_empty(), "{rel}");
            assert!(!rel.starts_with('/') && !rel.contains(".."), "{rel}");
        }
    }

    #[test]
    fn no_allowed_location_is_or_lies_in_a_private_one() {
        let policy = Policy::defaults(Mode::Safe);
        let private = policy.private_paths(Path::new(HOME));
        for p in allowed(&[]) {
            assert!(!private.iter().any(|x| p.starts_with(x)), "{}", p.display());
        }
    }

    #[test]
    fn every_cache_but_the_xdg_cache_lies_in_an_allowed_location() {
        let policy = Policy::defaults(Mode::Safe);
        let allowed = allowed(&[]);
        for cache in policy.cache_paths(Path::new(HOME)) {
            if cache == Path::new(HOME).join(".cache") {
                continue;
            }
            assert!(
                allowed.iter().any(|a| cache.starts_with(a)),
                "{}",
                cache.display()
            );
        }
    }

    #[test]
    fn the_xdg_cache_gives_way_to_the_toolchains_folders_in_it() {
        let caches = Policy::defaults(Mode::Safe).network_cache_paths(Path::new(HOME), &[]);
        assert!(!caches.contains(&PathBuf::from("/home/u/.cache")));
        assert!(caches.contains(&PathBuf::from("/home/u/.cache/uv")));
        assert!(
            !caches
                .iter()
                .any(|c| c.starts_with("/home/u/.cache/google-chrome"))
        );
    }

    #[test]
    fn relocated_toolchain_homes_and_xdg_bases_are_followed_only_below_home() {
        let a = allowed(&[
            ("XDG_CACHE_HOME", "/home/u/xc"),
            ("RUSTUP_HOME", "~/tc/rustup"),
            ("GOPATH", "/srv/go"),
            ("JULIA_DEPOT_PATH", "/home/u/jd1:/home/u/jd2"),
        ]);
        assert!(a.contains(&PathBuf::from("/home/u/xc/pip")));
        assert!(a.contains(&PathBuf::from("/home/u/tc/rustup")));
        assert!(a.contains(&PathBuf::from("/home/u/jd1")));
        assert!(a.contains(&PathBuf::from("/home/u/jd2")));
        assert!(!a.iter().any(|p| p.starts_with("/srv")));
    }

    #[test]
    fn home_itself_and_private_places_never_come_in_through_variables() {
        let a = allowed(&[
            (
                "PATH",
                "/home/u:/home/u/.ssh/bin:/home/u/./bin/..:relative/bin",
            ),
            ("CARGO_HOME", "/home/u/.aws"),
            ("GOPATH", "/home/u/.."),
        ]);
        assert!(!a.iter().any(|p| p == Path::new(HOME)));
        assert!(!a.iter().any(|p| p.starts_with("/home/u/.ssh")));
        assert!(!a.iter().any(|p| p.starts_with("/home/u/.aws")));
        assert!(!a.iter().any(|p| p.ends_with("relative/bin")));
    }

    #[test]
    fn documents_and_application_data_stay_out() {
        let a = allowed(&[("PATH", "/usr/bin")]);
        for out in [
            "/home/u/Documents",
            "/home/u/notes.txt",
            "/home/u/.config/Code/User/settings.json",
            "/home/u/.cache/google-chrome/Default",
            "/home/u/.local/share/Trash",
            "/home/u/other-project/src/main.rs",
        ] {
            assert!(!a.iter().any(|p| Path::new(out).starts_with(p)), "{out}");
        }
    }

    proptest! {
        #[test]
        fn whatever_the_environment_every_allowed_path_lies_strictly_below_home_outside_the_private_set(
            vars in proptest::collection::vec(
                (proptest::sample::select(vec!["PATH", "CARGO_HOME", "XDG_CACHE_HOME", "GOPATH",
                    "XDG_CONFIG_HOME", "DOCKER_CONFIG", "GNUPGHOME"]),
                 "(/home/u|~|/srv|/home)(/[.a-z]{0,5}){0,4}(:(/home/u|/tmp)(/[.a-z]{0,4}){0,3})?"),
                0..5)
        ) {
            let env: Vec<(String, String)> =
                vars.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            let policy = Policy::defaults(Mode::Safe);
            let private = policy.private_paths_in(Path::new(HOME), &env);
            let allowed = policy.network_home_paths(Path::new(HOME), &env);
            for p in &allowed {
                prop_assert!(p.starts_with(HOME) && p != Path::new(HOME), "{}", p.display());
                prop_assert!(!private.iter().any(|x| p.starts_with(x)), "{}", p.display());
            }
            for w in allowed.windows(2) {
                prop_assert!(!w[1].starts_with(&w[0]));
            }
        }
    }
}
