//! The trash directory `rm` (RC-4) moves a file to must be the user's own (finding
//! 6): another user may plant `/dev/shm/.Trash-1001 -> /dev/shm/evtrash` (mode 777) and read
//! what uid 1001 "removes" there.
//!
//! **Owns:** working out, as the `trash` crate does (freedesktop trash spec), which trash
//! directory a file goes to — the home trash when the file lies on the home trash's mount,
//! else `$topdir/.Trash/$uid` (when it exists in a `.Trash` directory) or
//! `$topdir/.Trash-$uid` (or the home trash when that cannot be made) — and checking it: not
//! a symbolic link, owned by the user, and for a per-volume trash mode 0700 (created 0700
//! when missing, so the crate never makes it 0755).
//! **Refuses to know:** the move itself (the `trash` crate, module `rm`).

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The mount points of `/proc/mounts`, longest first.
fn mount_points() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut out: Vec<PathBuf> = text
        .lines()
        .filter_map(|l| l.split(' ').nth(1))
        .map(|d| PathBuf::from(unescape_mount(d)))
        .collect();
    out.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
    out
}

/// `/proc/mounts` writes a space as `\040` (octal escapes).
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            out.push(u8::try_from(v).unwrap_or(b'?'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn topdir<'a>(path: &Path, mounts: &'a [PathBuf]) -> &'a Path {
    mounts
        .iter()
        .map(PathBuf::as_path)
        .find(|m| path.starts_with(m))
        .unwrap_or(Path::new("/"))
}

/// The home trash as the `trash` crate names it.
fn home_trash() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("Trash"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share/Trash"))
}

/// The longest existing ancestor of `p` (the trash crate places a missing home trash by it).
fn existing_ancestor(p: &Path) -> PathBuf {
    let mut cur = p;
    loop {
        if let Ok(c) = std::fs::canonicalize(cur) {
            return c;
        }
        match cur.parent() {
            Some(parent) => cur = parent,
            None => return PathBuf::from("/"),
        }
    }
}

/// Checks (and creates 0700 when missing) the trash directory `real` will be moved to.
/// `Err` is the message for the user.
pub(crate) fn check(real: &Path) -> Result<(), String> {
    check_for(real, rustix::process::getuid().as_raw())
}

fn check_for(real: &Path, uid: u32) -> Result<(), String> {
    let mounts = mount_points();
    let top = topdir(real, &mounts);
    let home = home_trash();
    if let Some(home) = &home {
        let home_top = topdir(&existing_ancestor(home), &mounts);
        if top == home_top {
            return check_dir(home, uid, false);
        }
    }
    // The crate takes `$topdir/.Trash/$uid` when it exists in a `.Trash` directory (links
    // followed), else `$topdir/.Trash-$uid`, making that one when missing.
    let shared_user = top.join(".Trash").join(uid.to_string());
    if top.join(".Trash").is_dir() && shared_user.is_dir() {
        return check_dir(&shared_user, uid, true);
    }
    let dir = top.join(format!(".Trash-{uid}"));
    if std::fs::symlink_metadata(&dir).is_err() {
        // Made here with 0700 (the crate would use the umask's 0755). Where it cannot be
        // made (a read-only volume root), the crate falls back to the home trash.
        if std::fs::DirBuilder::new().mode(0o700).create(&dir).is_err() {
            return match &home {
                Some(home) => check_dir(home, uid, false),
                None => Ok(()),
            };
        }
    }
    check_dir(&dir, uid, true)
}

fn check_dir(dir: &Path, uid: u32, per_volume: bool) -> Result<(), String> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        // A missing home trash is made by the crate inside the user's own home.
        Err(_) if !per_volume => return Ok(()),
        Err(e) => {
            return Err(format!(
                "the trash directory {} for this file cannot be made ({e}), so nothing was \
                 moved; ask the user to remove the file",
                dir.display()
            ));
        }
    };
    let why = if meta.file_type().is_symlink() {
        Some("is a symbolic link (possibly planted by another user)")
    } else if !meta.is_dir() {
        Some("is not a directory")
    } else if meta.uid() != uid {
        Some("belongs to another user")
    } else if per_volume && meta.mode() & 0o777 != 0o700 {
        Some("is readable or writable by other users (mode is not 0700)")
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(format!(
            "the trash directory {} {why}, so rm moved nothing there (others could read or \
             replace what goes in); the user should check and remove that directory, or \
             delete the file themselves",
            dir.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_per_volume_trash_planted_as_a_link_is_refused() {
        // /dev/shm/.Trash-$uid -> a directory of another user's.
        let shm = Path::new("/dev/shm");
        let mounts = mount_points();
        let home_top = home_trash().map(|h| topdir(&existing_ancestor(&h), &mounts).to_owned());
        if topdir(shm, &mounts) != shm || home_top.as_deref() == Some(shm) {
            eprintln!("SKIP: /dev/shm is not a volume of its own here");
            return;
        }
        let uid = 3_999_000_000 + std::process::id() % 1000;
        let planted = shm.join(format!(".Trash-{uid}"));
        let evil = tempfile::tempdir_in(shm).unwrap();
        std::os::unix::fs::symlink(evil.path(), &planted).unwrap();
        let file = tempfile::NamedTempFile::new_in(shm).unwrap();
        let r = check_for(file.path(), uid);
        std::fs::remove_file(&planted).unwrap();
        let e = r.unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
    }

    #[test]
    fn mount_escapes_are_read() {
        assert_eq!(unescape_mount("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape_mount("/x\\"), "/x\\");
    }

    #[test]
    fn a_linked_or_open_trash_is_refused_and_a_private_one_passes() {
        let t = tempfile::tempdir().unwrap();
        let uid = rustix::process::getuid().as_raw();
        let root = t.path();
        let good = root.join("good");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&good)
            .unwrap();
        assert!(check_dir(&good, uid, true).is_ok());
        let open = root.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(check_dir(&open, uid, true).unwrap_err().contains("0700"));
        std::os::unix::fs::symlink(&good, root.join("link")).unwrap();
        assert!(
            check_dir(&root.join("link"), uid, true)
                .unwrap_err()
                .contains("symbolic link")
        );
        assert!(
            check_dir(&good, uid + 1, false)
                .unwrap_err()
                .contains("another user")
        );
        assert!(check_dir(&root.join("missing"), uid, false).is_ok());
    }
}
