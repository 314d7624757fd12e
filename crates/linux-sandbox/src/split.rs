//! Read grants split around hidden paths (finding 5): Landlock itself must not
//! grant what [`Policy::hide`](crate::Policy::hide) hides.
//!
//! **Owns:** for a read-only directory grant of the caller's that has hidden paths strictly
//! beneath it, the Landlock rules that replace the one rule on its root: the grant's root, and
//! each directory on the way from it to a hidden path ("split" directories), get `READ_DIR`
//! only (listing works); every other entry of a split directory gets the grant's rights,
//! recursively as usual; the hidden entries get nothing. Landlock binds a rule to the inode it
//! is made on, in the parent, so whatever is created in or renamed into a split directory
//! during the call has no rule and is unreadable: a `~/.docker` made mid-call, a `~/.netrc`
//! replaced by rename (git's credential store rewrites `~/.git-credentials` that way), while
//! the mounts of `isolate` still make the paths that exist read as empty. A hidden path that
//! does not exist splits its existing ancestors all the same, its missing part resolved the
//! way the kernel would (symbolic links followed as far as they lead).
//!
//! **Refuses:** to follow a symbolic link entry (it gets no rule: its target is granted only if
//! another rule grants it, as without the split), to split a writable grant (what the command
//! creates there must stay readable to it; a hidden path there keeps its mount cover, and the
//! directories above it are bound onto themselves, so the command cannot rename anything over
//! it: `EBUSY`), to split a system location, to cache anything (every `prepare` reads the
//! directories again, so a rule is never on a stale inode), and to make more than
//! [`MAX_SPLIT_RULES`] rules ([`SandboxError::TooManyEntries`]).
//!
//! **Costs:** per split directory one `open` and its entries read; per entry but a symbolic
//! link (by the listing's type) one `O_PATH` open without following links (no automount is
//! triggered), one `landlock_add_rule`, one `close`, and where the listing gives no type one
//! `statx` that asks a network file system for nothing (`AT_STATX_DONT_SYNC`); no descriptor
//! is kept. The kernel refuses directory rights on a file, so an entry replaced by another
//! kind since the listing is asked again. A mount point entry is granted on the root of what
//! is mounted there (the file the program reaches, since the new root clones the grant
//! recursively; only a directory mounts over a directory, a file over a file).
//!
//! **What a listing shows:** `READ_DIR` on a split directory covers everything beneath it, so
//! the *names* in a private directory created mid-call can be listed; no content can be read.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use landlock::{AccessFs, BitFlags};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, StatxFlags};

use crate::error::SandboxError;

/// The most Landlock rules the split grants of one policy may add together (a home of 2 000
/// entries and its `.config` of a few hundred need a fraction of it). Each rule costs the
/// kernel a little memory and the parent four system calls on every spawn; past this the
/// policy is refused rather than granted whole.
pub(crate) const MAX_SPLIT_RULES: usize = 16_384;

/// Hidden paths deeper than this beneath a grant are split at this depth (their deeper part is
/// inside a directory that gets no rule at all): it bounds the descriptors open at once.
const MAX_DEPTH: usize = 32;

/// The entries of one directory that lead to hidden paths, by name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Tree {
    children: BTreeMap<Vec<u8>, Tree>,
    /// The entry itself is hidden: no rule, no descent.
    hidden: bool,
}

impl Tree {
    /// Adds the hidden path `rel` (relative, normal components only).
    fn insert(&mut self, rel: &[&OsStr]) {
        let mut node = self;
        for (depth, name) in rel.iter().enumerate() {
            if node.hidden {
                return;
            }
            let child = node.children.entry(name.as_bytes().to_vec()).or_default();
            if depth + 1 == rel.len() || depth + 1 == MAX_DEPTH {
                child.hidden = true;
                child.children.clear();
                return;
            }
            node = child;
        }
    }

    /// The split for a grant at `grant` (canonical) given every hidden path as it resolves
    /// (`resolved`) and the writable grants (canonical): the hidden paths strictly beneath
    /// `grant`, but not those beneath a writable grant inside it (that grant's own rule covers
    /// them whole, so splitting would gain nothing). `None`: nothing to split.
    pub(crate) fn plan(grant: &Path, resolved: &[PathBuf], writable: &[PathBuf]) -> Option<Tree> {
        let mut tree = Tree::default();
        for hidden in resolved {
            let Ok(rel) = hidden.strip_prefix(grant) else {
                continue;
            };
            let inside_writable = writable
                .iter()
                .any(|w| w != grant && w.starts_with(grant) && hidden.starts_with(w));
            let names: Vec<&OsStr> = rel
                .components()
                .filter_map(|c| match c {
                    Component::Normal(n) => Some(n),
                    _ => None,
                })
                .collect();
            if names.is_empty() || inside_writable {
                continue;
            }
            tree.insert(&names);
        }
        (!tree.children.is_empty()).then_some(tree)
    }
}

/// Where `path` (absolute) leads as the kernel would resolve it now: symbolic links followed
/// (at most 40), and past the first missing component the rest taken as written (`..`
/// lexically). So a hidden `~/.docker` that is a dangling link to `projects/cfg` resolves to
/// `~/projects/cfg`, which splits `projects` too. `None` for a relative path or too many links.
pub(crate) fn resolve(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut pending: std::collections::VecDeque<PathBuf> = path
        .components()
        .filter(|c| !matches!(c, Component::RootDir | Component::CurDir))
        .map(|c| PathBuf::from(c.as_os_str()))
        .collect();
    let mut current = PathBuf::from("/");
    let mut links = 0;
    let mut missing = false;
    while let Some(name) = pending.pop_front() {
        if name.as_os_str() == ".." {
            current.pop();
            continue;
        }
        let next = current.join(&name);
        if missing {
            current = next;
            continue;
        }
        match std::fs::symlink_metadata(&next) {
            Ok(m) if m.file_type().is_symlink() => {
                links += 1;
                if links > 40 {
                    return None;
                }
                let target = std::fs::read_link(&next).ok()?;
                if target.is_absolute() {
                    current = PathBuf::from("/");
                }
                for c in target.components().rev() {
                    if !matches!(c, Component::RootDir | Component::CurDir) {
                        pending.push_front(PathBuf::from(c.as_os_str()));
                    }
                }
            }
            Ok(_) => current = next,
            // Missing, or not looked up by the host: the rest is as written.
            Err(_) => {
                missing = true;
                current = next;
            }
        }
    }
    Some(current)
}

/// The rights of a split grant: those of its entries (by kind) and those of the split
/// directories themselves (`READ_DIR`, if the grant reads at all).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rights {
    pub(crate) dir: BitFlags<AccessFs>,
    pub(crate) file: BitFlags<AccessFs>,
}

/// Adds the rules of a split grant: `READ_DIR` on `dir`, the grant's rights on every entry of
/// it but the hidden ones and the symbolic links, and the same again inside each entry that
/// leads to a hidden path. `path` names `dir` in errors; `budget` counts down the rules left.
pub(crate) fn add_rules(
    ruleset: &OwnedFd,
    dir: BorrowedFd<'_>,
    path: &Path,
    tree: &Tree,
    rights: Rights,
    budget: &mut usize,
) -> Result<(), SandboxError> {
    let open_error = |path: &Path, e: rustix::io::Errno| SandboxError::OpenPath {
        path: path.to_owned(),
        source: e.into(),
    };
    let split_rights = rights.dir & AccessFs::ReadDir;
    if !split_rights.is_empty() {
        spend(budget, path)?;
        crate::sandbox::add_path_rule(ruleset, dir, split_rights)?;
    }
    let listing = match rustix::fs::openat(
        dir,
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        // The host may not list it: neither may the program (same ids, no capabilities); its
        // entries stay without rules (closed, not opened).
        Err(rustix::io::Errno::ACCESS) => return Ok(()),
        Err(e) => return Err(open_error(path, e)),
    };
    let mut entries = rustix::fs::Dir::new(listing).map_err(|e| open_error(path, e))?;
    while let Some(entry) = entries.read() {
        let entry = entry.map_err(|e| open_error(path, e))?;
        let name = entry.file_name();
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let below = tree.children.get(bytes);
        // A link by the listing is not opened at all (a link made since into a file stays
        // without a rule: refused, never granted).
        if below.is_some_and(|t| t.hidden) || entry.file_type() == FileType::Symlink {
            continue;
        }
        let entry_path = || path.join(OsStr::from_bytes(bytes));
        let fd = match rustix::fs::openat(
            dir,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            // Gone since the listing: nothing to grant.
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(open_error(&entry_path(), e)),
        };
        let stat = || file_type(fd.as_fd()).map_err(|e| open_error(&entry_path(), e));
        // The listing's type where the file system gives one (one system call fewer per
        // entry; a mount point's type is the mounted root's, since only a directory mounts
        // over a directory and a file over a file); asked of the file itself where it does
        // not, and for the few entries that lead to a hidden path.
        let listed = entry.file_type();
        let kind = if below.is_none() && listed != FileType::Unknown {
            listed
        } else {
            stat()?
        };
        match (kind, below) {
            (FileType::Symlink, _) => {}
            (FileType::Directory, Some(below)) => {
                add_rules(ruleset, fd.as_fd(), &entry_path(), below, rights, budget)?;
            }
            (FileType::Directory, None) => {
                spend(budget, path)?;
                match crate::sandbox::add_path_rule(ruleset, fd.as_fd(), rights.dir) {
                    // Replaced by a file since the listing: directory rights do not apply to
                    // a file (EINVAL); what it is now gets what it may have.
                    Err(SandboxError::LandlockRule { source })
                        if source.raw_os_error() == Some(libc::EINVAL) =>
                    {
                        if !matches!(stat()?, FileType::Directory | FileType::Symlink) {
                            crate::sandbox::add_path_rule(ruleset, fd.as_fd(), rights.file)?;
                        }
                    }
                    other => other?,
                }
            }
            _ if !rights.file.is_empty() => {
                spend(budget, path)?;
                crate::sandbox::add_path_rule(ruleset, fd.as_fd(), rights.file)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The kind of the file `fd` names, without asking a network file system's server.
fn file_type(fd: BorrowedFd<'_>) -> Result<FileType, rustix::io::Errno> {
    match rustix::fs::statx(
        fd,
        c"",
        AtFlags::EMPTY_PATH | AtFlags::STATX_DONT_SYNC,
        StatxFlags::TYPE,
    ) {
        Ok(stx) => Ok(FileType::from_raw_mode(u32::from(stx.stx_mode))),
        Err(rustix::io::Errno::NOSYS) => {
            rustix::fs::fstat(fd).map(|st| FileType::from_raw_mode(st.st_mode))
        }
        Err(e) => Err(e),
    }
}

fn spend(budget: &mut usize, dir: &Path) -> Result<(), SandboxError> {
    match budget.checked_sub(1) {
        Some(left) => {
            *budget = left;
            Ok(())
        }
        None => Err(SandboxError::TooManyEntries {
            dir: dir.to_owned(),
            max: MAX_SPLIT_RULES,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(grant: &str, hidden: &[&str], writable: &[&str]) -> Option<Tree> {
        let hidden: Vec<PathBuf> = hidden.iter().map(PathBuf::from).collect();
        let writable: Vec<PathBuf> = writable.iter().map(PathBuf::from).collect();
        Tree::plan(Path::new(grant), &hidden, &writable)
    }

    fn names(t: &Tree) -> Vec<(String, bool)> {
        t.children
            .iter()
            .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.hidden))
            .collect()
    }

    #[test]
    fn only_hidden_paths_strictly_beneath_a_grant_and_outside_its_writable_grants_split_it() {
        let t = tree(
            "/h",
            &[
                "/h/.ssh",
                "/h/.config/gh",
                "/h/.config/gcloud",
                "/h/proj/.state",
                "/h",
                "/other/.ssh",
                "/hh/.ssh",
            ],
            &["/h/proj", "/h/.cache"],
        )
        .unwrap();
        assert_eq!(
            names(&t),
            [(".config".to_owned(), false), (".ssh".to_owned(), true)]
        );
        assert_eq!(
            names(&t.children[b".config".as_slice()]),
            [("gcloud".to_owned(), true), ("gh".to_owned(), true)]
        );
        assert_eq!(tree("/h", &["/h", "/x/y"], &[]), None);
    }

    #[test]
    fn a_hidden_directory_hides_whatever_hidden_path_lies_beneath_it() {
        let t = tree("/h", &["/h/.config/gh/hosts.yml", "/h/.config"], &[]).unwrap();
        assert_eq!(names(&t), [(".config".to_owned(), true)]);
        assert!(t.children[b".config".as_slice()].children.is_empty());
    }

    #[test]
    fn a_missing_path_resolves_through_the_links_that_exist() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir(base.join("projects")).unwrap();
        std::os::unix::fs::symlink("projects/cfg", base.join(".docker")).unwrap();
        assert_eq!(
            resolve(&base.join(".docker/config.json")).unwrap(),
            base.join("projects/cfg/config.json")
        );
        assert_eq!(
            resolve(&base.join("gone/../.aws")).unwrap(),
            base.join(".aws")
        );
        assert_eq!(resolve(Path::new("rel")), None);
    }

    #[test]
    fn past_the_bound_a_split_is_refused_naming_the_directory() {
        use landlock::{Access as _, Ruleset, RulesetAttr};
        if !testkit::sandbox_available() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        for name in ["a", "b", "c", ".ssh"] {
            std::fs::write(base.join(name), "").unwrap();
        }
        std::fs::create_dir(base.join("d")).unwrap();
        std::os::unix::fs::symlink("a", base.join("link")).unwrap();
        let tree = Tree::plan(&base, &[base.join(".ssh")], &[]).unwrap();
        let fd = rustix::fs::open(&base, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).unwrap();
        let abi = landlock::ABI::V1;
        let ruleset: Option<OwnedFd> = Ruleset::default()
            .handle_access(AccessFs::from_all(abi))
            .unwrap()
            .create()
            .unwrap()
            .into();
        let ruleset = ruleset.unwrap();
        let rights = Rights {
            dir: AccessFs::from_read(abi),
            file: AccessFs::from_read(abi) & AccessFs::from_file(abi),
        };
        // The directory itself, a, b, c and d: the link and the hidden file get no rule.
        let mut budget = 5;
        add_rules(&ruleset, fd.as_fd(), &base, &tree, rights, &mut budget).unwrap();
        assert_eq!(budget, 0);
        let mut budget = 4;
        let err = add_rules(&ruleset, fd.as_fd(), &base, &tree, rights, &mut budget).unwrap_err();
        assert!(
            matches!(&err, SandboxError::TooManyEntries { dir, max } if *dir == base && *max == MAX_SPLIT_RULES),
            "{err}"
        );
        assert!(err.to_string().contains("subdirectory"), "{err}");
    }

    proptest::proptest! {
        #[test]
        fn a_planned_tree_never_marks_an_ancestor_of_a_hidden_path_hidden_unless_it_is_one(
            paths in proptest::collection::vec(
                proptest::collection::vec("[a-c]{1,2}", 1..5), 0..8)
        ) {
            let hidden: Vec<PathBuf> = paths
                .iter()
                .map(|p| Path::new("/g").join(p.join("/")))
                .collect();
            let Some(t) = Tree::plan(Path::new("/g"), &hidden, &[]) else {
                proptest::prop_assert!(hidden.is_empty());
                return Ok(());
            };
            // Every hidden path ends at (or below) a hidden node of the tree.
            for p in &paths {
                let mut node = &t;
                let mut reached = false;
                for name in p {
                    let Some(next) = node.children.get(name.as_bytes()) else {
                        break;
                    };
                    if next.hidden {
                        reached = true;
                        break;
                    }
                    node = next;
                }
                proptest::prop_assert!(reached, "{p:?} not hidden in {t:?}");
            }
        }
    }
}
