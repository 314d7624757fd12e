//! Reading and changing a git config file through the host's own `git`, so that every quoting,
//! continuation and subsection rule is git's: `git config --file F --list -z --no-includes`
//! to read, `--unset-all` and `--add` to change (git locks and renames the file itself).
//!
//! The `git` run here is the system's (`/usr/bin`, `/bin`, `/usr/local/bin`), never one found on
//! a `PATH` or in a workspace; it runs with an empty environment but for what makes it read
//! nothing else (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`, no `HOME`), in `/`, and
//! reads or writes only the named file: `--list --file` runs no program a config names.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
    pub(crate) fn list(&self, file: &Path) -> Result<Vec<(String, Option<String>)>, String> {
        let out = self
            .command(file)
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
