//! The paths of a git index file (`DIRC`, versions 2 to 4), read to refuse one that names a
//! path git must never check out: one through a `.git` directory (`.git/config`,
//! `sub/.GIT/hooks/x`), or one that climbs (`..`) or is absolute. git refuses to *add* such
//! paths, but a command can write the index file itself, and the host's `git checkout -- .` or
//! `git restore .` would then write `.git/config` from it.
//!
//! **Owns:** the parse (bounded by the file's length; every count and length checked) and the
//! path rule. **Refuses to know:** object contents, extensions beyond skipping them.

/// Why an index was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IndexError {
    /// Not an index git could read, for either hash length.
    Malformed,
    /// A path it names that git must never check out.
    Path(String),
}

/// Checks every path `bytes` (a whole index file) names. `Ok` for an index whose paths are all
/// ordinary.
pub(crate) fn check(bytes: &[u8]) -> Result<(), IndexError> {
    // SHA-1 and SHA-256 repositories: the entry layout differs by the hash length, which only
    // the repository's config says. Every length that parses to the end must name ordinary
    // paths only, so an index made to read harmlessly one way cannot name `.git/config` the
    // other way.
    let mut parsed = false;
    for hash_len in [20, 32] {
        if let Ok(paths) = paths(bytes, hash_len) {
            parsed = true;
            for path in paths {
                if !ordinary(&path) {
                    return Err(IndexError::Path(
                        String::from_utf8_lossy(&path).into_owned(),
                    ));
                }
            }
        }
    }
    if parsed {
        Ok(())
    } else {
        Err(IndexError::Malformed)
    }
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

/// Every entry's path, or `Malformed` unless the file parses exactly to its checksum.
fn paths(bytes: &[u8], hash_len: usize) -> Result<Vec<Vec<u8>>, IndexError> {
    let bad = || IndexError::Malformed;
    if bytes.get(..4) != Some(b"DIRC") {
        return Err(bad());
    }
    let version = be32(bytes, 4).ok_or_else(bad)?;
    if !(2..=4).contains(&version) {
        return Err(bad());
    }
    let count = be32(bytes, 8).ok_or_else(bad)? as usize;
    let end = bytes.len().checked_sub(hash_len).ok_or_else(bad)?;
    let mut at: usize = 12;
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(count.min(1 << 20));
    let mut previous: Vec<u8> = Vec::new();
    for _ in 0..count {
        let start = at;
        // 40 bytes of stat data, the object id, 16 bits of flags.
        let flags_at = start.checked_add(40 + hash_len).ok_or_else(bad)?;
        let flags = be16(bytes, flags_at).ok_or_else(bad)?;
        at = flags_at + 2;
        if flags & 0x4000 != 0 {
            if version < 3 {
                return Err(bad());
            }
            at += 2;
        }
        let path = if version == 4 {
            let (strip, used) = varint(bytes.get(at..end).ok_or_else(bad)?).ok_or_else(bad)?;
            at += used;
            let keep = previous.len().checked_sub(strip).ok_or_else(bad)?;
            let nul = bytes
                .get(at..end)
                .ok_or_else(bad)?
                .iter()
                .position(|&b| b == 0);
            let nul = nul.ok_or_else(bad)?;
            let mut path = previous[..keep].to_vec();
            path.extend_from_slice(&bytes[at..at + nul]);
            at += nul + 1;
            path
        } else {
            let nul = bytes
                .get(at..end)
                .ok_or_else(bad)?
                .iter()
                .position(|&b| b == 0);
            let nul = nul.ok_or_else(bad)?;
            let path = bytes[at..at + nul].to_vec();
            // The entry is padded with 1 to 8 NULs to a multiple of 8 bytes.
            let len = at + nul - start;
            at = start + (len + 8) / 8 * 8;
            path
        };
        if at > end {
            return Err(bad());
        }
        previous.clone_from(&path);
        out.push(path);
    }
    // Extensions: a 4-byte signature and a 32-bit size each, up to the checksum.
    while at < end {
        let size = be32(bytes, at + 4).ok_or_else(bad)? as usize;
        at = at.checked_add(8 + size).ok_or_else(bad)?;
    }
    if at != end {
        return Err(bad());
    }
    Ok(out)
}

/// git's offset varint: `(strip, bytes used)`.
fn varint(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut value: usize = 0;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        if i > 0 {
            value = value.checked_add(1)?.checked_shl(7)?;
        }
        value |= usize::from(b & 0x7f);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// A path git may check out: relative, no empty, `.` or `..` component, and no component that
/// names a git directory on any filesystem a repository is shared with (`.git` in any case,
/// with trailing dots or spaces, with code points HFS+ ignores, or NTFS's short name `git~1`).
pub(crate) fn ordinary(path: &[u8]) -> bool {
    // A split index's entries that replace a shared entry carry no name; a sparse index's
    // directory entries end in `/`.
    if path.is_empty() {
        return true;
    }
    let path = path.strip_suffix(b"/").unwrap_or(path);
    !path.is_empty()
        && !path.starts_with(b"/")
        && path
            .split(|&b| b == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b".." && !names_git_dir(c))
}

fn names_git_dir(component: &[u8]) -> bool {
    let text = String::from_utf8_lossy(component);
    let folded: String = text
        .chars()
        .filter(
            |c| !matches!(*c as u32, 0x200B..=0x200F | 0x202A..=0x202E | 0x206A..=0x206F | 0xFEFF),
        )
        .collect::<String>()
        .trim_end_matches(['.', ' '])
        .to_ascii_lowercase();
    folded == ".git" || folded == "git~1"
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A version 2 index of `paths`, SHA-1.
    fn index_v2(paths: &[&[u8]]) -> Vec<u8> {
        let mut out = b"DIRC".to_vec();
        out.extend_from_slice(&2u32.to_be_bytes());
        out.extend_from_slice(&(paths.len() as u32).to_be_bytes());
        for p in paths {
            let start = out.len();
            out.extend_from_slice(&[0u8; 40]);
            out.extend_from_slice(&[0xab; 20]);
            out.extend_from_slice(&(p.len().min(0xfff) as u16).to_be_bytes());
            out.extend_from_slice(p);
            let len = out.len() - start;
            out.resize(start + (len + 8) / 8 * 8, 0);
        }
        out.extend_from_slice(&[0u8; 20]);
        out
    }

    #[test]
    fn ordinary_paths_pass_and_git_directory_paths_are_refused() {
        assert_eq!(check(&index_v2(&[b"README", b"src/main.rs"])), Ok(()));
        for bad in [
            &b".git/config"[..],
            b"sub/.GIT/hooks/post-checkout",
            b".git./config",
            b"a/../../x",
            b"/etc/passwd",
            b"GIT~1/config",
            ".g\u{200c}it/config".as_bytes(),
        ] {
            assert!(
                matches!(check(&index_v2(&[b"ok", bad])), Err(IndexError::Path(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(check(b"DIRC\0\0\0\x02"), Err(IndexError::Malformed));
        assert_eq!(check(b"not an index"), Err(IndexError::Malformed));
    }

    #[test]
    fn a_real_index_of_the_system_git_parses() {
        let git = std::path::Path::new("/usr/bin/git");
        if !git.exists() {
            eprintln!("skipped: no /usr/bin/git");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            assert!(
                std::process::Command::new(git)
                    .args(args)
                    .current_dir(dir.path())
                    .env("GIT_CONFIG_NOSYSTEM", "1")
                    .env("GIT_CONFIG_GLOBAL", "/dev/null")
                    .status()
                    .unwrap()
                    .success()
            );
        };
        run(&["init", "-q"]);
        std::fs::create_dir(dir.path().join("d")).unwrap();
        for name in ["a", "d/b", "d/c-with-a-longer-name.txt"] {
            std::fs::write(dir.path().join(name), name).unwrap();
        }
        run(&["add", "-A"]);
        let v2 = std::fs::read(dir.path().join(".git/index")).unwrap();
        assert_eq!(check(&v2), Ok(()));
        assert_eq!(paths(&v2, 20).unwrap().len(), 3);
        run(&["update-index", "--index-version", "4"]);
        let v4 = std::fs::read(dir.path().join(".git/index")).unwrap();
        assert_eq!(
            paths(&v4, 20).unwrap(),
            vec![
                b"a".to_vec(),
                b"d/b".to_vec(),
                b"d/c-with-a-longer-name.txt".to_vec()
            ]
        );
    }

    proptest! {
        #[test]
        fn any_bytes_are_judged_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = check(&bytes);
            let mut with_magic = b"DIRC\0\0\0\x02".to_vec();
            with_magic.extend_from_slice(&bytes);
            let _ = check(&with_magic);
        }

        #[test]
        fn every_written_path_is_read_back(
            names in proptest::collection::vec("[a-z]{1,8}(/[a-z]{1,8}){0,3}", 1..8),
        ) {
            let refs: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
            let read = paths(&index_v2(&refs), 20).unwrap();
            prop_assert_eq!(read, names.iter().map(|n| n.as_bytes().to_vec()).collect::<Vec<_>>());
        }
    }
}
