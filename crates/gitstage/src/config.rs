//! Reading and changing a git config file through the host's own `git`, so that every quoting,
//! continuation and subsection rule is git's: `git config --file F --list -z --no-includes`
//! to read, `--unset-all` and `--add` to change. A real config is never named to git by path:
//! git edits a private copy, written back under `config.lock` through the directory's
//! descriptor ([`Locked`]).
//!
//! The `git` run here is the system's (`/usr/bin`, `/bin`, `/usr/local/bin`), never one found on
//! a `PATH` or in a workspace; it runs with an empty environment but for what makes it read
//! nothing else (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`, no `HOME`), in `/`, and
//! reads or writes only the named file: `--list --file` runs no program a config names.

use std::io::{Read, Write};
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

/// The system's git.
#[derive(Debug, Clone)]
pub(crate) struct Git {
    program: PathBuf,
}

/// Where the system's git may be.
const CANDIDATES: &[&str] = &["/usr/bin/git", "/bin/git", "/usr/local/bin/git"];

impl Git {
    /// The first system git that exists, if any.
    pub(crate) fn find() -> Option<Git> {
        CANDIDATES
            .iter()
            .map(Path::new)
            .find(|p| p.is_file())
            .map(|p| Git {
                program: p.to_owned(),
            })
    }

    fn command(&self, file: &Path) -> Command {
        let mut c = Command::new(&self.program);
        c.env_clear()
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("LC_ALL", "C")
            .env("PATH", "/usr/bin:/bin")
            .current_dir("/")
            .stdin(Stdio::null())
            .arg("config")
            .arg("--file")
            .arg(file);
        c
    }

    /// Every entry of `file`, in order: (key, value); a key without `=` has the value `None`.
    /// git reads a private copy: `file` itself is read here, as a regular file only, without
    /// blocking and without following a final link (a FIFO named `config` must not hang the
    /// server, nor git).
    pub(crate) fn list(&self, file: &Path) -> Result<Vec<(String, Option<String>)>, String> {
        let bytes = crate::beneath::read_path(file, EDIT_MAX + 1)
            .ok_or("it is not a regular file that can be read")?;
        if bytes.len() as u64 > EDIT_MAX {
            return Err(format!("it is larger than {EDIT_MAX} bytes"));
        }
        let scratch = Scratch::new().map_err(|e| format!("cannot make a temporary copy: {e}"))?;
        let copy = scratch.join("config");
        std::fs::write(&copy, &bytes).map_err(|e| format!("cannot make a temporary copy: {e}"))?;
        let out = self
            .command(&copy)
            .args(["--no-includes", "--list", "-z"])
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.program.display()))?;
        if !out.status.success() {
            return Err(format!(
                "git cannot read it as config: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(parse_list(&out.stdout))
    }

    /// Makes `key` hold exactly `values` in `file`, in order.
    pub(crate) fn replace(
        &self,
        file: &Path,
        key: &str,
        values: &[Option<String>],
    ) -> Result<(), String> {
        let unset = self
            .command(file)
            .args(["--unset-all", key])
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.program.display()))?;
        // 5: the key was not there.
        if !unset.status.success() && unset.status.code() != Some(5) {
            return Err(String::from_utf8_lossy(&unset.stderr).trim().to_owned());
        }
        for value in values {
            let mut c = self.command(file);
            c.arg("--add").arg(key);
            // A key without `=` is boolean true; `--add` needs a value.
            c.arg(value.as_deref().unwrap_or("true"));
            let out = c
                .stderr(Stdio::piped())
                .output()
                .map_err(|e| format!("cannot run {}: {e}", self.program.display()))?;
            if !out.status.success() {
                return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
            }
        }
        Ok(())
    }
}

/// A config file being changed the way git changes one, through its directory's descriptor:
/// `config.lock` made exclusively beside it (a host's git at work holds it: the change waits
/// for none and is refused), the current content copied to a private file the system's git
/// edits, then the result written to the lock and renamed over `config`. Dropped without
/// [`Locked::commit`], the lock is removed and `config` is as it was.
pub(crate) struct Locked<'d> {
    dir: BorrowedFd<'d>,
    lock: Option<std::fs::File>,
    copy: PathBuf,
}

const CONFIG: &str = "config";
const CONFIG_LOCK: &str = "config.lock";

/// The most bytes of a config file copied for an edit.
const EDIT_MAX: u64 = 16 << 20;

impl<'d> Locked<'d> {
    /// Locks `config` in `dir` and copies it (empty when it does not exist) into `scratch`.
    pub(crate) fn take(dir: BorrowedFd<'d>, scratch: &Path) -> Result<Locked<'d>, String> {
        let current = match rustix::fs::openat(
            dir,
            CONFIG,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        ) {
            Ok(fd) => Some(std::fs::File::from(fd)),
            Err(Errno::NOENT) => None,
            Err(Errno::LOOP) => {
                return Err("it is a symbolic link; git's own config never is".into());
            }
            Err(e) => return Err(format!("cannot open it: {e}")),
        };
        let read_write =
            Mode::RUSR | Mode::WUSR | Mode::RGRP | Mode::WGRP | Mode::ROTH | Mode::WOTH;
        let mode = match &current {
            Some(file) => {
                let st = rustix::fs::fstat(file).map_err(|e| format!("cannot read it: {e}"))?;
                if rustix::fs::FileType::from_raw_mode(st.st_mode)
                    != rustix::fs::FileType::RegularFile
                {
                    return Err("it is not a regular file".into());
                }
                Mode::from_raw_mode(st.st_mode) & read_write
            }
            None => Mode::RUSR | Mode::WUSR | Mode::RGRP | Mode::ROTH,
        };
        let lock = rustix::fs::openat(
            dir,
            CONFIG_LOCK,
            OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            mode,
        )
        .map_err(|e| match e {
            Errno::EXIST => {
                "config.lock exists: a git of the host is changing it; its change stays".to_owned()
            }
            e => format!("cannot lock it: {e}"),
        })?;
        let locked = Locked {
            dir,
            lock: Some(std::fs::File::from(lock)),
            copy: scratch.join("config-edit"),
        };
        let mut bytes = Vec::new();
        if let Some(file) = current {
            file.take(EDIT_MAX + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| format!("cannot read it: {e}"))?;
            if bytes.len() as u64 > EDIT_MAX {
                return Err(format!("it is larger than {EDIT_MAX} bytes"));
            }
        }
        std::fs::write(&locked.copy, &bytes)
            .map_err(|e| format!("cannot write a temporary copy: {e}"))?;
        Ok(locked)
    }

    /// The private copy to edit.
    pub(crate) fn copy(&self) -> &Path {
        &self.copy
    }

    /// Writes the edited copy over `config`.
    pub(crate) fn commit(mut self) -> Result<(), String> {
        let mut lock = self.lock.take().ok_or("no lock")?;
        let edited = std::fs::read(&self.copy).map_err(|e| format!("cannot read the edit: {e}"));
        let written = edited.and_then(|bytes| {
            lock.write_all(&bytes)
                .and_then(|()| lock.sync_data())
                .map_err(|e| format!("cannot write it: {e}"))
        });
        let renamed = written.and_then(|()| {
            rustix::fs::renameat(self.dir, CONFIG_LOCK, self.dir, CONFIG)
                .map_err(|e| format!("cannot replace it: {e}"))
        });
        if renamed.is_err() {
            let _ = rustix::fs::unlinkat(self.dir, CONFIG_LOCK, AtFlags::empty());
        }
        let _ = std::fs::remove_file(&self.copy);
        renamed
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        if self.lock.take().is_some() {
            let _ = rustix::fs::unlinkat(self.dir, CONFIG_LOCK, AtFlags::empty());
        }
        let _ = std::fs::remove_file(&self.copy);
    }
}

/// A private directory (mode 0700) in the system's temp dir for one edit, removed when
/// dropped.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new() -> std::io::Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("gitstage-{}-{n}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Scratch(path))
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `core.hooksPath` values the host's own git reads for every repository: from the
/// user's global config (`$GIT_CONFIG_GLOBAL`, else `~/.gitconfig` and
/// `$XDG_CONFIG_HOME/git/config`) and the system's (`/etc/gitconfig`, unless
/// `GIT_CONFIG_NOSYSTEM`). Their includes are not followed.
pub(crate) fn hooks_paths_of_host(git: &Git) -> Vec<String> {
    hooks_paths_of(git, &|name| std::env::var_os(name))
}

/// [`hooks_paths_of_host`] with the environment `env`.
fn hooks_paths_of(git: &Git, env: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Vec<String> {
    let var = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mut files = Vec::new();
    if let Some(global) = var("GIT_CONFIG_GLOBAL") {
        files.push(global);
    } else {
        if let Some(home) = var("HOME") {
            files.push(home.join(".gitconfig"));
            files.push(home.join(".config/git/config"));
        }
        if let Some(xdg) = var("XDG_CONFIG_HOME") {
            files.push(xdg.join("git/config"));
        }
    }
    if var("GIT_CONFIG_NOSYSTEM").is_none() {
        files.push(PathBuf::from("/etc/gitconfig"));
    }
    files.sort();
    files.dedup();
    let mut out = Vec::new();
    for file in files {
        let names_it = crate::beneath::read_path(&file, EDIT_MAX)
            .is_some_and(|t| t.to_ascii_lowercase().windows(9).any(|w| w == b"hookspath"));
        if !names_it {
            continue;
        }
        if let Ok(list) = git.list(&file) {
            out.extend(
                list.into_iter()
                    .filter(|(key, _)| key == "core.hookspath")
                    .filter_map(|(_, value)| value),
            );
        }
    }
    out
}

/// `--list -z` output: entries end in NUL; the key and value are split by the first newline,
/// and a key alone has no value.
fn parse_list(bytes: &[u8]) -> Vec<(String, Option<String>)> {
    bytes
        .split(|&b| b == 0)
        .filter(|e| !e.is_empty())
        .map(|entry| {
            let text = String::from_utf8_lossy(entry);
            match text.split_once('\n') {
                Some((k, v)) => (k.to_owned(), Some(v.to_owned())),
                None => (text.into_owned(), None),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_splits_keys_from_values_at_the_first_newline() {
        let got = parse_list(b"core.bare\nfalse\0remote.o.url\nhttps://x\ny\0flag\0");
        assert_eq!(
            got,
            vec![
                ("core.bare".to_owned(), Some("false".to_owned())),
                ("remote.o.url".to_owned(), Some("https://x\ny".to_owned())),
                ("flag".to_owned(), None),
            ]
        );
    }

    #[test]
    fn the_users_global_hooks_path_is_read_and_the_system_one_only_when_asked() {
        let Some(git) = Git::find() else {
            eprintln!("skipped: no system git");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join(".gitconfig"), "[core]\n\thooksPath = .githooks\n").unwrap();
        let env = |name: &str| match name {
            "HOME" => Some(home.clone().into_os_string()),
            "GIT_CONFIG_NOSYSTEM" => Some("1".into()),
            _ => None,
        };
        assert_eq!(hooks_paths_of(&git, &env), vec![".githooks".to_owned()]);
        let elsewhere = dir.path().join("global");
        std::fs::write(&elsewhere, "[core]\n\thookspath = /x/hooks\n").unwrap();
        let env = |name: &str| match name {
            "GIT_CONFIG_GLOBAL" => Some(elsewhere.clone().into_os_string()),
            "GIT_CONFIG_NOSYSTEM" => Some("1".into()),
            _ => None,
        };
        assert_eq!(hooks_paths_of(&git, &env), vec!["/x/hooks".to_owned()]);
    }

    #[test]
    fn keys_round_trip_through_the_system_git() {
        let Some(git) = Git::find() else {
            eprintln!("skipped: no system git");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config");
        std::fs::write(
            &file,
            "[core]\n\tbare = false\n[include]\n\tpath = /nonexistent\n",
        )
        .unwrap();
        git.replace(
            &file,
            "remote.origin.url",
            &[Some("https://example.org/a b.git".to_owned())],
        )
        .unwrap();
        git.replace(&file, "core.bare", &[Some("true".to_owned())])
            .unwrap();
        let listed = git.list(&file).unwrap();
        assert!(listed.contains(&(
            "remote.origin.url".to_owned(),
            Some("https://example.org/a b.git".to_owned())
        )));
        assert!(listed.contains(&("core.bare".to_owned(), Some("true".to_owned()))));
        assert_eq!(listed.iter().filter(|(k, _)| k == "core.bare").count(), 1);
        std::fs::write(&file, "[broken\n").unwrap();
        assert!(git.list(&file).is_err());
    }
}
