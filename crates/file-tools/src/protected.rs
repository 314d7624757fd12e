//! Auto-run configuration stays the user's (TRUST-1, TRUST-2): `write` and `edit` refuse a
//! path on `fsguard`'s [`AutoRun`] list before they change anything, unless the host passed
//! that exact path as confirmed by the user.
//!
//! The decision is by name. For a path whose directories do not exist yet (`write` makes them)
//! the names alone decide, so `.claude/settings.json` is refused before `.claude/` is made.
//! The git-directory rule also needs the names already in the file's directory, listed from
//! the root's descriptor like every other open here.

use std::ffi::OsString;

use fsguard::{AutoRun, OpenError, RelPath, RootLease};
use toolscope::{ErrorCode, ToolError};

use crate::files::{list_dir, open_error};

/// Refuses `path` when it is on `autorun` and not in `confirmed`.
pub(crate) fn refuse(
    root: &RootLease,
    path: &RelPath,
    autorun: &AutoRun,
    confirmed: &[RelPath],
) -> Result<(), ToolError> {
    if confirmed.contains(path) {
        return Ok(());
    }
    let Some(hit) = autorun.classify(path, &siblings(root, path)?) else {
        return Ok(());
    };
    Err(ToolError::new(
        ErrorCode::ExecPathProtected,
        format!(
            "path {:?} is protected: {hit}, without anyone choosing to run it, so the file \
             tools never change it; ask the user to make this change, or, where run_command \
             is offered, make it through run_command, whose confirmation shows the user the \
             file",
            path.as_path()
        ),
    )
    .with_detail("protectedPath", hit.path().to_string_lossy().into_owned()))
}

/// The names in `path`'s directory now; none when it does not exist yet.
fn siblings(root: &RootLease, path: &RelPath) -> Result<Vec<OsString>, ToolError> {
    let parent = path.parent().unwrap_or_else(RelPath::root);
    match parent.open_dir_at(root) {
        Ok(dir) => match list_dir(&dir) {
            Some(entries) => Ok(entries.into_iter().map(|(name, _)| name).collect()),
            // Unlisted, it could be a git directory: fail closed.
            None => Err(ToolError::new(
                ErrorCode::ExecPathInvalid,
                format!(
                    "path {:?}: its directory cannot be listed, so the file tools cannot tell \
                     whether it is a git repository; ask the user to make its directory \
                     readable, or write elsewhere",
                    path.as_path()
                ),
            )),
        },
        // Made empty by `write` if at all; a link or a file on the way is refused by the walk
        // that writes. Either way the names alone decide.
        Err(
            OpenError::NotFound { .. }
            | OpenError::Symlink { .. }
            | OpenError::NotADirectory { .. },
        ) => Ok(Vec::new()),
        Err(e) => Err(open_error(e)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{EditArguments, ReadArguments, WriteArguments};

    fn fixture() -> (tempfile::TempDir, RootLease) {
        let dir = tempfile::tempdir().unwrap();
        let root = RootLease::acquire(dir.path()).unwrap();
        (dir, root)
    }

    fn write_args(path: &str) -> WriteArguments {
        serde_json::from_value(json!({"path": path, "content": "x\n"})).unwrap()
    }

    // TRUST-2
    #[test]
    fn typed_write_refuses_the_default_list_before_making_a_directory() {
        let (dir, root) = fixture();
        let err = crate::write(&root, write_args("a/.claude/settings.json")).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ExecPathProtected);
        assert_eq!(err.details()["protectedPath"], "a/.claude");
        assert!(!dir.path().join("a").exists());
    }

    // TRUST-2
    #[test]
    fn typed_edit_refuses_and_read_still_reads() {
        let (dir, root) = fixture();
        std::fs::write(dir.path().join(".npmrc"), "x = 1\n").unwrap();
        let args: EditArguments =
            serde_json::from_value(json!({"path": ".npmrc", "oldString": "1", "newString": "2"}))
                .unwrap();
        let err = crate::edit(&root, args).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ExecPathProtected);
        let read: ReadArguments = serde_json::from_value(json!({"path": ".npmrc"})).unwrap();
        assert_eq!(crate::read(&root, read).unwrap().content, "x = 1\n");
    }

    // TRUST-1
    #[test]
    fn the_directory_listing_decides_the_git_rule() {
        let (dir, root) = fixture();
        std::fs::create_dir_all(dir.path().join("r/objects")).unwrap();
        std::fs::write(dir.path().join("r/HEAD"), "ref: refs/heads/main\n").unwrap();
        let path = RelPath::new("r/config").unwrap();
        let err = refuse(&root, &path, &AutoRun::default(), &[]).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ExecPathProtected);
        assert!(err.message().contains("git repository"), "{err}");
        // The same name where no repository is, or confirmed, goes ahead.
        let plain = RelPath::new("s/config").unwrap();
        assert_eq!(refuse(&root, &plain, &AutoRun::default(), &[]), Ok(()));
        assert_eq!(
            refuse(
                &root,
                &path,
                &AutoRun::default(),
                std::slice::from_ref(&path)
            ),
            Ok(())
        );
    }
}
