//! The hard-linked files of `run_command`'s writable roots, kept read-only (TRUST-3).
//!
//! **Owns:** the scan of the working directory and the `write_paths` for regular files with
//! more than one link (uv and pnpm hard-link their stores into projects, `git clone` of a local
//! path its objects), and the choice of read-only binds that cover them
//! ([`fsguard::read_only_cover`], at most [`fsguard::READ_ONLY_BINDS`]). A write to one then fails in the
//! sandbox with a denial naming it and the remedy, instead of changing every other project
//! that shares the inode. **Refuses:** to scan the toolchains' caches (a store's own files are
//! the other names; the caches are the sandbox's to keep), and to run a call whose links only
//! its whole root could cover (`AGENT_EXEC_PATH_INVALID`, with the remedy).

use std::path::PathBuf;
use std::sync::Arc;

use fsguard::{RootLease, ScanOptions};
use toolscope::{ErrorCode, ToolError};

/// The paths to keep read-only: every hard-linked file of `workdir` and of `write_paths`, or
/// the directories holding them where there are more than the binds allow.
pub(crate) async fn frozen(
    workdir: &Arc<RootLease>,
    write_paths: &[PathBuf],
) -> Result<Vec<PathBuf>, ToolError> {
    let workdir = Arc::clone(workdir);
    let write_paths = write_paths.to_vec();
    tokio::task::spawn_blocking(move || {
        let options = ScanOptions::new().cross_mounts(true);
        let mut found: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
        let report = fsguard::scan_hard_links_in(&workdir, &options).map_err(scan_error)?;
        found.push((
            workdir.path().to_path_buf(),
            report.links.into_iter().map(|l| l.path).collect(),
        ));
        for root in &write_paths {
            let links = if root.is_dir() {
                fsguard::scan_hard_links(&[root], &options)
                    .map_err(scan_error)?
                    .links
                    .into_iter()
                    .map(|l| l.path)
                    .collect()
            } else if std::fs::symlink_metadata(root)
                .is_ok_and(|m| std::os::unix::fs::MetadataExt::nlink(&m) > 1)
            {
                vec![root.clone()]
            } else {
                Vec::new()
            };
            found.push((root.clone(), links));
        }
        cover(found)
    })
    .await
    .map_err(|e| {
        ToolError::new(
            ErrorCode::ExecIoFailed,
            format!("the hard-link scan failed: {e}"),
        )
    })?
}

/// The binds for each root's links (`fsguard::read_only_cover_roots`), or the call's refusal.
fn cover(found: Vec<(PathBuf, Vec<PathBuf>)>) -> Result<Vec<PathBuf>, ToolError> {
    fsguard::read_only_cover_roots(&found).map_err(|e| {
        let count: usize = found.iter().map(|(_, l)| l.len()).sum();
        let shown: Vec<String> = found
            .iter()
            .flat_map(|(_, l)| l)
            .take(20)
            .map(|p| p.display().to_string())
            .collect();
        ToolError::new(
            ErrorCode::ExecPathInvalid,
            format!(
                "{e}, too many to keep read-only one by one, so nothing ran. A hard link is \
                 another name of a file elsewhere (a package store's, another clone's): replace \
                 them with copies (uv `--link-mode=copy`, pnpm `package-import-method=copy`, \
                 `git clone --no-hardlinks`)"
            ),
        )
        .with_detail("hardLinks", shown)
        .with_detail("hardLinkCount", count)
    })
}

fn scan_error(e: fsguard::ScanError) -> ToolError {
    ToolError::new(
        ErrorCode::ExecPathInvalid,
        format!(
            "{e}; the hard-link scan of the writable directories could not finish, so nothing \
             ran: make the directory readable or work elsewhere"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_only_the_root_could_cover_refuse_the_call() {
        let a = PathBuf::from("/a");
        let many: Vec<PathBuf> = (0..=fsguard::READ_ONLY_BINDS)
            .map(|i| a.join(format!("f{i}")))
            .collect();
        let e = cover(vec![(a, many)]).unwrap_err();
        assert_eq!(e.code(), ErrorCode::ExecPathInvalid);
        assert_eq!(e.details()["hardLinkCount"], fsguard::READ_ONLY_BINDS + 1);
        assert!(e.message().contains("--link-mode=copy"), "{e}");
    }
}
