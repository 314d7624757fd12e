//! The toolchains' caches through a private copy-on-write view (TRUST-3): the caches
//! `run_command` writes (RCS-2) and those `command --toolchains` grants.
//!
//! **Owns:** for each existing cache directory (`Policy::cache_paths`: `~/.cargo/registry`,
//! `~/.npm`, `~/.cache`, …) an upper and a work directory, handed to the sandbox as a staged
//! directory: the command reads the user's cache as it is and whatever it writes, renames or
//! removes there lands in the upper, never in the cache, and nothing the command wrote is ever
//! seen by the user's own tools. A call's own views ([`CacheViews::create`], `command`) live in
//! its temp dir and go with it; a session's ([`crate::SessionViews`], `run_command`) are kept
//! for its next call. The result counts the entries the views hold and names the caches that
//! could only be read.
//!
//! **Refuses to know:** how the overlay is made (linux-sandbox's `stage`), which directories
//! are caches (the tools'), and what the toolchains keep in them. Where the overlay cannot be
//! made the cache is read-only instead (the sandbox's fallback): a build that must fetch fails
//! with a denial, the user's cache still unchanged.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// At most this many entries of one call's views are counted; past it the count says "at
/// least".
const COUNT_BUDGET: usize = 100_000;

/// One cache seen through a view.
#[derive(Debug)]
pub(crate) struct View {
    cache: PathBuf,
    pub(crate) upper: PathBuf,
    work: PathBuf,
    /// The session's kept view this is, given back when the call's views go.
    held: Option<crate::kept_views::Held>,
}

impl View {
    /// A view of `cache` with its upper and work directories (mode 0700) in `dir`.
    pub(crate) fn make(cache: &Path, dir: &Path) -> std::io::Result<View> {
        use std::os::unix::fs::DirBuilderExt;
        let (upper, work) = (dir.join("upper"), dir.join("work"));
        for d in [&upper, &work] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(d)?;
        }
        Ok(View {
            cache: cache.to_path_buf(),
            upper,
            work,
            held: None,
        })
    }

    /// This view as the session's kept one.
    pub(crate) fn held(self, held: crate::kept_views::Held) -> View {
        View {
            held: Some(held),
            ..self
        }
    }
}

/// The views of one call.
#[derive(Debug, Default)]
pub struct CacheViews {
    views: Vec<View>,
}

impl Drop for CacheViews {
    fn drop(&mut self) {
        for v in &mut self.views {
            if let Some(held) = v.held.take() {
                held.release(&v.upper);
            }
        }
    }
}

/// What the views hold after the call (JSON in camelCase), in the result as `caches`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CacheReport {
    /// Files and links the command wrote or made, and entries it removed, in the toolchains'
    /// caches, all held in private views (the call's, or the session's when `kept`): the
    /// user's caches never change.
    pub changed: usize,
    /// Whether `changed` stopped counting at its bound (100 000).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub more: bool,
    /// Caches no private view could be made for here: read-only to the command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only: Vec<String>,
    /// The views are the session's: its next call sees what this one left there (and
    /// `changed` counts what the session's calls left so far).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kept: bool,
}

impl CacheReport {
    /// Nothing to say: no change, every view made.
    pub fn is_empty(&self) -> bool {
        self.changed == 0 && self.read_only.is_empty()
    }
}

impl CacheViews {
    /// An upper and a work directory (mode 0700) under `base` for each of `caches`.
    ///
    /// # Errors
    /// The directories cannot be made.
    pub fn create(caches: &[PathBuf], base: &Path) -> std::io::Result<CacheViews> {
        let views = caches
            .iter()
            .enumerate()
            .map(|(i, cache)| View::make(cache, &base.join(i.to_string())))
            .collect::<std::io::Result<Vec<View>>>()?;
        Ok(CacheViews { views })
    }

    pub(crate) fn from_views(views: Vec<View>) -> CacheViews {
        CacheViews { views }
    }

    /// The views as the sandbox stages them.
    pub fn staged(&self) -> impl Iterator<Item = crate::Staged> + '_ {
        self.views.iter().map(|v| crate::Staged {
            dir: v.cache.clone(),
            upper: v.upper.clone(),
            work: v.work.clone(),
            through: Vec::new(),
        })
    }

    /// What the views hold once the command's tree has ended; `read_only` is the sandbox's
    /// list of staged directories it could only make read-only, `hidden` the call's hidden
    /// paths (the sandbox shadows those beneath a view with an empty file of mode 0, which is
    /// not the command's change).
    pub fn report(&self, read_only: &[PathBuf], hidden: &[PathBuf]) -> CacheReport {
        let mut report = CacheReport::default();
        let mut budget = COUNT_BUDGET;
        for v in &self.views {
            if read_only.contains(&v.cache) {
                report.read_only.push(v.cache.display().to_string());
                continue;
            }
            let shadows: Vec<PathBuf> = hidden
                .iter()
                .filter_map(|h| h.strip_prefix(&v.cache).ok())
                .map(|rel| v.upper.join(rel))
                .collect();
            report.changed += count(&v.upper, &shadows, &mut budget);
            report.kept |= v.held.is_some();
        }
        report.more = budget == 0;
        report
    }
}

/// Entries other than directories beneath `dir` (not following links): files written or
/// made, links, removals (overlayfs's whiteouts), at most `budget` looked at in all. The
/// sandbox's own shadows (`shadows`, while still empty files of mode 0 or whiteouts) are not the command's.
fn count(dir: &Path, shadows: &[PathBuf], budget: &mut usize) -> usize {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for entry in entries.flatten() {
        if *budget == 0 {
            break;
        }
        *budget -= 1;
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        let path = entry.path();
        // An empty file of mode 0 where the hidden path exists, a whiteout where it does not
        // (where the path first leaves the cache: at it or above it).
        let shadow = meta.is_file()
            && meta.len() == 0
            && meta.permissions().mode() & 0o7777 == 0
            && shadows.contains(&path)
            || meta.file_type().is_char_device()
                && meta.rdev() == 0
                && shadows.iter().any(|s| s.starts_with(&path));
        if meta.is_dir() {
            n += count(&path, shadows, budget);
        } else if !shadow {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cache_gets_its_own_private_upper_and_work() {
        let t = tempfile::tempdir().unwrap();
        let caches = vec![PathBuf::from("/h/.npm"), PathBuf::from("/h/.cache")];
        let views = CacheViews::create(&caches, &t.path().join("views")).unwrap();
        let staged: Vec<crate::Staged> = views.staged().collect();
        assert_eq!(staged.len(), 2);
        for s in &staged {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&s.upper).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
            assert!(s.work.is_dir() && s.through.is_empty());
            assert_eq!(s.upper.parent(), s.work.parent());
        }
    }

    #[test]
    fn the_report_counts_what_the_views_hold_and_names_read_only_caches() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let caches = vec![PathBuf::from("/h/.npm"), PathBuf::from("/h/.cache")];
        let views = CacheViews::create(&caches, t.path()).unwrap();
        let upper = &views.views[0].upper;
        std::fs::create_dir_all(upper.join("_cacache/index")).unwrap();
        std::fs::write(upper.join("_cacache/index/a"), "x").unwrap();
        std::fs::write(upper.join("_cacache/b"), "").unwrap();
        // A shadow of a hidden path is the sandbox's, not a change; the same file elsewhere is.
        for name in ["token", "other"] {
            std::fs::write(upper.join(name), "").unwrap();
            std::fs::set_permissions(upper.join(name), std::fs::Permissions::from_mode(0o000))
                .unwrap();
        }
        let report = views.report(
            &[PathBuf::from("/h/.cache")],
            &[PathBuf::from("/h/.npm/token")],
        );
        assert_eq!(
            report,
            CacheReport {
                changed: 3,
                more: false,
                read_only: vec!["/h/.cache".into()],
                kept: false,
            }
        );
        assert!(CacheViews::default().report(&[], &[]).is_empty());
    }
}
