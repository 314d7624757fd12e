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
#[cfg(not(target_os = "linux"))]
pub(crate) fn check(real: &Path) -> Result<(), String> {
    check_for(real, rustix::process::getuid().as_raw()).map(|_| ())
}

/// The trash directory `real` goes to, checked, and whether it is a per-volume one.
fn check_for(real: &Path, uid: u32) -> Result<(PathBuf, bool), String> {
    let mounts = mount_points();
    let top = topdir(real, &mounts);
    let home = home_trash();
    if let Some(home) = &home {
        let home_top = topdir(&existing_ancestor(home), &mounts);
        if top == home_top {
            return check_dir(home, uid, false).map(|()| (home.clone(), false));
        }
    }
    // `$topdir/.Trash/$uid` when it exists in a `.Trash` directory (links followed, as the
    // spec's sticky shared trash is), else `$topdir/.Trash-$uid`, made when missing.
    let shared_user = top.join(".Trash").join(uid.to_string());
    if top.join(".Trash").is_dir() && shared_user.is_dir() {
        return check_dir(&shared_user, uid, true).map(|()| (shared_user, true));
    }
    let dir = top.join(format!(".Trash-{uid}"));
    if std::fs::symlink_metadata(&dir).is_err() {
        // Made here with 0700. Where it cannot be made (a read-only volume root), the home
        // trash is used instead.
        if std::fs::DirBuilder::new().mode(0o700).create(&dir).is_err() {
            return match &home {
                Some(home) => check_dir(home, uid, false).map(|()| (home.clone(), false)),
                None => Err(
                    "there is no trash directory for this file (no $HOME); nothing \
                             was moved; ask the user to remove the file"
                        .to_owned(),
                ),
            };
        }
    }
    check_dir(&dir, uid, true).map(|()| (dir, true))
}

/// Moves the entry `real` (found by `rm`'s check as the file with device and inode `id`) into
/// its trash directory, through descriptors: the parent is opened again with no link on its
/// way and the entry must still be the one checked; the trash's `files` and `info` are opened
/// without following a link and must be the user's; the `.trashinfo` is made exclusively
/// first, then the entry is renamed beside it, never over another name and never across file
/// systems (no copy: a copy would follow links the command planted). A per-volume trash inside
/// `workdir` takes only entries of the working directory (`entry_in_workdir`): what goes
/// there stays within the command's reach. Returns where the entry now is.
#[cfg(target_os = "linux")]
pub(crate) fn move_to_trash(
    real: &Path,
    id: (u64, u64),
    workdir: &Path,
    entry_in_workdir: bool,
) -> Result<PathBuf, String> {
    let uid = rustix::process::getuid().as_raw();
    let (dir, per_volume) = check_for(real, uid)?;
    move_into(&dir, per_volume, real, id, workdir, entry_in_workdir)
}

/// [`move_to_trash`] into the trash directory `dir`.
#[cfg(target_os = "linux")]
fn move_into(
    dir: &Path,
    per_volume: bool,
    real: &Path,
    id: (u64, u64),
    workdir: &Path,
    entry_in_workdir: bool,
) -> Result<PathBuf, String> {
    use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags, ResolveFlags};
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;
    let uid = rustix::process::getuid().as_raw();
    if per_volume && dir.starts_with(workdir) && !entry_in_workdir {
        return Err(format!(
            "its trash directory {} lies in the working directory, where the command could \
             change what goes in; nothing was moved; ask the user to remove the file",
            dir.display()
        ));
    }
    if !per_volume {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
    }
    let dir_flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY;
    let not_moved = |what: &str, e: rustix::io::Errno| {
        format!("cannot open {what} ({e}), so nothing was moved; ask the user to remove the file")
    };
    let trash = rustix::fs::open(dir, dir_flags, Mode::empty())
        .map_err(|e| not_moved(&format!("the trash directory {}", dir.display()), e))?;
    let owned = |fd: &std::os::fd::OwnedFd, what: &str| -> Result<rustix::fs::Stat, String> {
        let st = rustix::fs::fstat(fd).map_err(|e| not_moved(what, e))?;
        if st.st_uid != uid || (per_volume && st.st_mode & 0o777 != 0o700) {
            return Err(format!(
                "{what} belongs to another user or is open to others, so rm moved nothing \
                 there; the user should check it, or delete the file themselves"
            ));
        }
        Ok(st)
    };
    owned(&trash, &format!("the trash directory {}", dir.display()))?;
    let sub = |name: &str| -> Result<std::os::fd::OwnedFd, String> {
        let _ = rustix::fs::mkdirat(&trash, name, Mode::from_raw_mode(0o700));
        let what = format!("the trash's {name} directory in {}", dir.display());
        let fd = rustix::fs::openat(&trash, name, dir_flags, Mode::empty())
            .map_err(|e| not_moved(&what, e))?;
        owned(&fd, &what)?;
        Ok(fd)
    };
    let files = sub("files")?;
    let info = sub("info")?;
    let changed = || {
        format!(
            "{} changed after it was checked (moved, or a link now on its way), so nothing was \
             moved; run rm again",
            real.display()
        )
    };
    let (Some(parent), Some(name)) = (real.parent(), real.file_name()) else {
        return Err(changed());
    };
    let parent = rustix::fs::openat2(
        rustix::fs::CWD,
        parent,
        dir_flags,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|_| changed())?;
    let st = rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW).map_err(|_| changed())?;
    if (st.st_dev, st.st_ino) != id {
        return Err(changed());
    }
    let files_dev = rustix::fs::fstat(&files)
        .map_err(|e| not_moved("the trash", e))?
        .st_dev;
    if files_dev != st.st_dev {
        return Err(format!(
            "{} is on another file system than its trash {}, so nothing was moved (a copy \
             could follow links); ask the user to remove the file",
            real.display(),
            dir.display()
        ));
    }
    let when = chrono::Local::now().format("%Y-%m-%dT%H:%M:%S").to_string();
    let record = format!(
        "[Trash Info]\nPath={}\nDeletionDate={when}\n",
        percent_encoded(real.as_os_str().as_bytes())
    );
    for n in 0..TRASH_NAMES_MAX {
        let mut trashed = name.to_os_string();
        if n > 0 {
            trashed.push(format!(".{n}"));
        }
        let mut info_name = trashed.clone();
        info_name.push(".trashinfo");
        let info_file = match rustix::fs::openat(
            &info,
            &*info_name,
            OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::EXIST) => continue,
            Err(e) => return Err(not_moved("the trash's info directory", e)),
        };
        let written = std::fs::File::from(info_file).write_all(record.as_bytes());
        let moved = written
            .map_err(|e| format!("cannot record it in the trash ({e}); nothing was moved"))
            .and_then(|()| {
                match rustix::fs::renameat_with(
                    &parent,
                    name,
                    &files,
                    &*trashed,
                    RenameFlags::NOREPLACE,
                ) {
                    Ok(()) => Ok(true),
                    Err(rustix::io::Errno::EXIST) => Ok(false),
                    Err(e) => Err(format!("cannot move it to the trash: {e}")),
                }
            });
        match moved {
            Ok(true) => return Ok(dir.join("files").join(trashed)),
            other => {
                let _ = rustix::fs::unlinkat(&info, &*info_name, AtFlags::empty());
                other?;
            }
        }
    }
    Err("the trash holds too many entries of this name; nothing was moved".to_owned())
}

/// The most `.N` names tried for one trashed entry.
#[cfg(target_os = "linux")]
const TRASH_NAMES_MAX: usize = 10_000;

/// A path as a `.trashinfo` records it: URL-escaped bytes (the freedesktop trash spec).
#[cfg(target_os = "linux")]
fn percent_encoded(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
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
        let r = check_for(file.path(), uid).map(|_| ());
        std::fs::remove_file(&planted).unwrap();
        let e = r.unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
    }

    /// A workspace with `d/lib.rs`, a victim directory with its own `lib.rs`, and a private
    /// trash directory.
    #[cfg(target_os = "linux")]
    fn trash_setup() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().canonicalize().unwrap();
        let (work, victim, trash) = (base.join("work"), base.join("victim"), base.join("trash"));
        std::fs::create_dir_all(work.join("d")).unwrap();
        std::fs::write(work.join("d/lib.rs"), "mine").unwrap();
        std::fs::create_dir_all(&victim).unwrap();
        std::fs::write(victim.join("lib.rs"), "the user's cache").unwrap();
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&trash)
            .unwrap();
        (t, work, victim, trash)
    }

    #[cfg(target_os = "linux")]
    fn id(p: &Path) -> (u64, u64) {
        let m = std::fs::symlink_metadata(p).unwrap();
        (m.dev(), m.ino())
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_parent_swapped_for_a_link_after_the_check_moves_nothing() {
        let (_t, work, victim, trash) = trash_setup();
        let real = work.join("d/lib.rs");
        let checked = id(&real);
        std::fs::rename(work.join("d"), work.join("d.old")).unwrap();
        std::os::unix::fs::symlink(&victim, work.join("d")).unwrap();
        let e = move_into(&trash, true, &real, checked, &work, true).unwrap_err();
        assert!(e.contains("changed after it was checked"), "{e}");
        assert_eq!(
            std::fs::read_to_string(victim.join("lib.rs")).unwrap(),
            "the user's cache"
        );
        // The same file swapped in under the checked path (a rename, no link): not the one
        // checked either.
        std::fs::remove_file(work.join("d")).unwrap();
        std::fs::create_dir(work.join("d")).unwrap();
        std::fs::write(work.join("d/lib.rs"), "other").unwrap();
        let e = move_into(&trash, true, &real, checked, &work, true).unwrap_err();
        assert!(e.contains("changed after it was checked"), "{e}");
        assert!(work.join("d/lib.rs").exists());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_trash_whose_files_is_a_link_receives_nothing() {
        let (_t, work, victim, trash) = trash_setup();
        std::os::unix::fs::symlink(&victim, trash.join("files")).unwrap();
        let real = work.join("d/lib.rs");
        let e = move_into(&trash, true, &real, id(&real), &work, true).unwrap_err();
        assert!(e.contains("nothing was moved"), "{e}");
        assert!(real.exists());
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 1);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_trash_in_the_working_directory_takes_only_its_entries() {
        let (_t, work, _victim, _trash) = trash_setup();
        let trash = work.join(".Trash-x");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&trash)
            .unwrap();
        let outside = work.parent().unwrap().join("victim/lib.rs");
        let e = move_into(&trash, true, &outside, id(&outside), &work, false).unwrap_err();
        assert!(e.contains("lies in the working directory"), "{e}");
        assert!(outside.exists());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_entry_goes_to_files_beside_its_trashinfo_under_a_free_name() {
        let (_t, work, _victim, trash) = trash_setup();
        let real = work.join("d/lib.rs");
        let first = move_into(&trash, false, &real, id(&real), &work, true).unwrap();
        assert_eq!(first, trash.join("files/lib.rs"));
        std::fs::write(&real, "again").unwrap();
        let second = move_into(&trash, false, &real, id(&real), &work, true).unwrap();
        assert_eq!(second, trash.join("files/lib.rs.1"));
        assert_eq!(std::fs::read_to_string(&second).unwrap(), "again");
        let info = std::fs::read_to_string(trash.join("info/lib.rs.1.trashinfo")).unwrap();
        assert!(info.starts_with("[Trash Info]\nPath=/"), "{info}");
        assert!(info.contains("/work/d/lib.rs\nDeletionDate="), "{info}");
        assert!(!real.exists());
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
