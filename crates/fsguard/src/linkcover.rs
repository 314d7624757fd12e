//! Which paths keep a root's hard-linked files read-only within a budget of binds (TRUST-3).
//!
//! **Owns:** the choice of paths: every hard-linked file itself while they fit the budget;
//! above it, their directories, the deepest first, until the set fits. The budget counts each
//! chosen path and each directory between the root and it, since the sandbox binds those too
//! (pinned, so no other call moves a linked file away while this one looks). A directory chosen
//! keeps everything beneath it read-only (files that are not links too): the price of a bound
//! on the number of mounts a sandbox makes. **Refuses:** the root itself, which would make the
//! whole root read-only; a set that cannot fit without it is an error the caller reports.
//! Lexical: it touches no file.
//!
//! ```
//! use std::path::{Path, PathBuf};
//! let root = Path::new("/w");
//! let links: Vec<PathBuf> = (0..3).map(|i| root.join(format!("nm/.pnpm/p{i}/index.js"))).collect();
//! assert_eq!(fsguard::read_only_cover(root, &links, 8).unwrap().len(), 3);
//! assert_eq!(fsguard::read_only_cover(root, &links, 2).unwrap(), vec![root.join("nm/.pnpm")]);
//! ```

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// The read-only binds one call may spend on its hard-linked files, all roots together (the
/// sandbox makes at most 256 mounts in all).
pub const READ_ONLY_BINDS: usize = 128;

/// [`read_only_cover`] for several roots (each with its hard-linked files), the
/// [`READ_ONLY_BINDS`] shared evenly between them. A root that is itself a hard-linked file
/// (a writable single-file grant) is covered by itself.
///
/// # Errors
/// The first root whose links only the root itself could cover within its share.
pub fn read_only_cover_roots(
    found: &[(PathBuf, Vec<PathBuf>)],
) -> Result<Vec<PathBuf>, CoverError> {
    let budget = READ_ONLY_BINDS / found.len().max(1);
    let mut cover = Vec::new();
    for (root, links) in found {
        if links.is_empty() {
            continue;
        }
        if links.len() == 1 && links[0] == *root {
            cover.push(root.clone());
            continue;
        }
        cover.extend(read_only_cover(root, links, budget)?);
    }
    Ok(cover)
}

/// The hard-linked files of a root cannot be kept read-only in fewer than `budget` paths
/// without making the root itself read-only.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{files} hard-linked file(s) in {} are spread over more than {budget} of its top-level \
     entries",
    root.display()
)]
pub struct CoverError {
    /// The root scanned.
    pub root: PathBuf,
    /// How many hard-linked files it holds.
    pub files: usize,
    /// The most paths the cover could use.
    pub budget: usize,
}

/// The paths whose read-only binds keep every one of `links` (absolute paths beneath `root`;
/// others are ignored) read-only, they and the directories between `root` and them at most
/// `budget` in all: the files themselves if they fit, else the directories holding them,
/// lifted deepest first. Sorted, none beneath another.
///
/// # Errors
/// [`CoverError`] when only `root` itself would cover them within the budget.
pub fn read_only_cover(
    root: &Path,
    links: &[PathBuf],
    budget: usize,
) -> Result<Vec<PathBuf>, CoverError> {
    let mut set: BTreeSet<Vec<Component<'_>>> = links
        .iter()
        .filter_map(|p| p.strip_prefix(root).ok())
        .map(|rel| {
            rel.components()
                .filter(|c| matches!(c, Component::Normal(_)))
                .collect::<Vec<_>>()
        })
        .filter(|c| !c.is_empty())
        .collect();
    let files = set.len();
    loop {
        prune_nested(&mut set);
        if cost(&set) <= budget {
            return Ok(set
                .into_iter()
                .map(|c| root.join(c.iter().collect::<PathBuf>()))
                .collect());
        }
        let deepest = set.iter().map(Vec::len).max().unwrap_or(0);
        if deepest <= 1 {
            return Err(CoverError {
                root: root.to_path_buf(),
                files,
                budget,
            });
        }
        set = set
            .into_iter()
            .map(|mut c| {
                if c.len() == deepest {
                    c.pop();
                }
                c
            })
            .collect();
    }
}

/// The binds `set` costs: each entry and each directory between the root and it, once.
fn cost(set: &BTreeSet<Vec<Component<'_>>>) -> usize {
    let mut dirs: BTreeSet<&[Component<'_>]> = BTreeSet::new();
    for c in set {
        for n in 1..c.len() {
            dirs.insert(&c[..n]);
        }
    }
    set.len() + dirs.len()
}

/// Drops every entry beneath another. The set is sorted and holds no duplicate, so an entry's
/// descendants follow it at once: comparing with the last entry kept is enough (linear).
fn prune_nested(set: &mut BTreeSet<Vec<Component<'_>>>) {
    let mut kept: Vec<Vec<Component<'_>>> = Vec::with_capacity(set.len());
    for c in std::mem::take(set) {
        if !kept.last().is_some_and(|k| c.starts_with(k)) {
            kept.push(c);
        }
    }
    set.extend(kept);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn paths(root: &Path, rels: &[&str]) -> Vec<PathBuf> {
        rels.iter().map(|r| root.join(r)).collect()
    }

    #[test]
    fn files_within_the_budget_are_covered_one_by_one() {
        let root = Path::new("/w");
        let links = paths(root, &["a/x", "b/y", "z"]);
        // Three files and the two directories above them.
        assert_eq!(read_only_cover(root, &links, 5).unwrap(), {
            let mut l = links.clone();
            l.sort();
            l
        });
    }

    #[test]
    fn above_the_budget_the_deepest_are_lifted_first() {
        let root = Path::new("/w");
        let links = paths(
            root,
            &[
                "node_modules/.pnpm/a@1/node_modules/a/index.js",
                "node_modules/.pnpm/a@1/node_modules/a/lib/x.js",
                "node_modules/.pnpm/b@1/node_modules/b/index.js",
                "keep.txt",
            ],
        );
        // Three paths and the six directories above them.
        let cover = read_only_cover(root, &links, 9).unwrap();
        assert_eq!(
            cover,
            paths(
                root,
                &[
                    "keep.txt",
                    "node_modules/.pnpm/a@1/node_modules/a",
                    "node_modules/.pnpm/b@1/node_modules/b",
                ]
            )
        );
    }

    #[test]
    fn roots_share_the_binds_evenly_and_a_linked_file_grant_covers_itself() {
        let (a, b, f) = (
            PathBuf::from("/a"),
            PathBuf::from("/b"),
            PathBuf::from("/f"),
        );
        let many: Vec<PathBuf> = (0..READ_ONLY_BINDS)
            .map(|i| a.join(format!("d/f{i}")))
            .collect();
        let found = vec![
            (a.clone(), many),
            (b.clone(), vec![b.join("x")]),
            (f.clone(), vec![f.clone()]),
        ];
        assert_eq!(
            read_only_cover_roots(&found).unwrap(),
            vec![a.join("d"), b.join("x"), f]
        );
        let top: Vec<PathBuf> = (0..=READ_ONLY_BINDS)
            .map(|i| a.join(format!("f{i}")))
            .collect();
        assert!(read_only_cover_roots(&[(a, top)]).is_err());
    }

    #[test]
    fn the_root_itself_is_never_chosen() {
        let root = Path::new("/w");
        let links = paths(root, &["a", "b", "c"]);
        let e = read_only_cover(root, &links, 2).unwrap_err();
        assert_eq!((e.files, e.budget), (3, 2));
    }

    #[test]
    fn paths_outside_the_root_are_ignored() {
        let root = Path::new("/w");
        let links = vec![PathBuf::from("/elsewhere/x"), root.join("in")];
        assert_eq!(
            read_only_cover(root, &links, 1).unwrap(),
            vec![root.join("in")]
        );
    }

    proptest! {
        /// Whatever the links, the cover fits the budget, holds no nesting, never names the
        /// root, and every link lies at or beneath one of its paths.
        #[test]
        fn the_cover_covers_every_link_within_the_budget(
            rels in proptest::collection::vec("[abc]{1,2}(/[abc]{1,2}){0,4}", 0..60),
            budget in 1usize..12,
        ) {
            let root = Path::new("/w");
            let links: Vec<PathBuf> = rels.iter().map(|r| root.join(r)).collect();
            if let Ok(cover) = read_only_cover(root, &links, budget) {
                prop_assert!(cover.len() <= budget);
                for l in &links {
                    prop_assert!(cover.iter().any(|c| l.starts_with(c)));
                }
                for (i, a) in cover.iter().enumerate() {
                    prop_assert!(a != root);
                    for b in &cover[i + 1..] {
                        prop_assert!(!a.starts_with(b) && !b.starts_with(a));
                    }
                }
            }
        }
    }
}
