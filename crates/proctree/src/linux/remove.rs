//! Removing a directory tree relative to a directory descriptor, with raw system calls and
//! stack buffers only, so the supervisor can run it after the host died (async-signal-safe: no
//! allocation, no locks, no `errno`), and the host can run the very same code.
//!
//! Why it is safe in a world-writable parent such as `/tmp`:
//! - every directory is opened with `O_NOFOLLOW | O_DIRECTORY` relative to the descriptor of
//!   its parent, so a symbolic link planted anywhere is removed as a link, never followed;
//! - the top directory is identified by device and inode recorded when it was made, and checked
//!   on the opened descriptor before anything below it is touched and again before the final
//!   `rmdir`, so a directory renamed into its place is left alone;
//! - the depth is bounded ([`MAX_DEPTH`] descriptors at once); what lies deeper moves up
//!   beside the top's entries (renamed within the tree, never replacing anything) and is
//!   removed from there; what cannot be removed is left (and counted as not clean) instead of
//!   looping.
//!
//! Directories the command made unwritable or unsearchable (`chmod 000`) are given back to the
//! owner (`0700`) once, then retried: the tree is ours, the command's modes are not a reason to
//! keep it.

use std::ffi::CStr;
use std::os::fd::RawFd;

use libc::c_int;
use syscalls::{Sysno, syscall};

use super::supervisor::{Sys, close, openat, sys};

/// The most directories open at once during a removal: deeper levels are left in place.
pub(crate) const MAX_DEPTH: usize = 256;
/// Directories that could not be emptied, remembered so a rescan of their parent skips them.
const MAX_STUCK: usize = 256;
/// A name's bytes with its NUL (`NAME_MAX` is 255).
const NAME_BYTES: usize = 256;

/// Device and inode of a directory, as recorded when it was made.
pub(crate) type DirId = (u64, u64);

/// `statx` on `dir` (with `name`, not following a final link; `c""` for the descriptor itself).
/// Returns (id, uid, mode).
pub(crate) fn stat_at(dir: RawFd, name: &CStr) -> Sys<(DirId, u32, u32)> {
    // SAFETY: a zeroed plain-data struct is a valid buffer for the kernel to fill.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let flags = libc::AT_SYMLINK_NOFOLLOW
        | if name.is_empty() {
            libc::AT_EMPTY_PATH
        } else {
            0
        };
    // SAFETY: a NUL-terminated path and a live, writable statx buffer.
    sys(unsafe {
        syscall!(
            Sysno::statx,
            dir,
            name.as_ptr(),
            flags,
            libc::STATX_TYPE | libc::STATX_MODE | libc::STATX_INO | libc::STATX_UID,
            &mut st as *mut libc::statx
        )
    })?;
    let dev = (u64::from(st.stx_dev_major) << 32) | u64::from(st.stx_dev_minor);
    Ok(((dev, st.stx_ino), st.stx_uid, u32::from(st.stx_mode)))
}

fn is_dir(mode: u32) -> bool {
    mode & libc::S_IFMT == libc::S_IFDIR
}

fn unlinkat(dir: RawFd, name: &CStr, flags: c_int) -> Sys<()> {
    // SAFETY: a NUL-terminated name relative to our descriptor.
    sys(unsafe { syscall!(Sysno::unlinkat, dir, name.as_ptr(), flags) }).map(|_| ())
}

fn open_dir(dir: RawFd, name: &CStr) -> Sys<RawFd> {
    openat(
        dir,
        name,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
    )
}

fn fchmod_owner(fd: RawFd) {
    // SAFETY: plain integers.
    let _ = unsafe { syscall!(Sysno::fchmod, fd, 0o700usize) };
}

/// Removes the directory `name` in `parent` and everything below it. With `expect`, only if
/// `name` still is that directory (checked before and after emptying it). `Ok(())` when it is
/// gone; `ENOENT` when there was nothing to remove.
pub(crate) fn remove_tree_at(parent: RawFd, name: &CStr, expect: Option<DirId>) -> Sys<()> {
    let top = match open_dir(parent, name) {
        Ok(fd) => fd,
        // Unsearchable (`chmod 000` on the top): give it back to its owner, then open it.
        Err(libc::EACCES) if chmod_dir_at(parent, name, expect) => open_dir(parent, name)?,
        Err(e) => return Err(e),
    };
    if let Some(want) = expect {
        if stat_at(top, c"").map(|(id, _, _)| id) != Ok(want) {
            close(top);
            return Err(libc::ESTALE);
        }
    }
    empty_tree(top);
    close(top);
    if let Some(want) = expect {
        if stat_at(parent, name).map(|(id, _, _)| id) != Ok(want) {
            return Err(libc::ESTALE);
        }
    }
    unlinkat(parent, name, libc::AT_REMOVEDIR)
}

/// What one pass over a directory found.
#[allow(
    clippy::large_enum_variant,
    reason = "no allocation here (the supervisor runs this after the host died): the name stays on the stack"
)]
enum Pass {
    /// A subdirectory that is not empty, opened, and its name (NUL-terminated): empty it first.
    Descend(RawFd, [u8; NAME_BYTES]),
    /// Every entry was handled; `clean` when all of them are gone.
    Done { clean: bool },
}

/// Empties the tree below `top` (which stays open and is not removed). Returns whether it is
/// empty now.
fn empty_tree(top: RawFd) -> bool {
    let mut stack = [-1 as RawFd; MAX_DEPTH];
    let mut unclean = [false; MAX_DEPTH];
    let mut depth = 0usize;
    if let Some(slot) = stack.get_mut(0) {
        *slot = top;
    }
    let mut stuck = [0u64; MAX_STUCK];
    let mut n_stuck = 0usize;
    loop {
        let cur = stack.get(depth).copied().unwrap_or(-1);
        match pass(cur, stuck.get(..n_stuck).unwrap_or(&[])) {
            Pass::Descend(child, _) if depth.wrapping_add(1) < MAX_DEPTH => {
                depth = depth.wrapping_add(1);
                if let Some(slot) = stack.get_mut(depth) {
                    *slot = child;
                }
                if let Some(u) = unclean.get_mut(depth) {
                    *u = false;
                }
            }
            Pass::Descend(child, name) => {
                // Too deep to hold every level open: the subtree moves up beside the top's
                // entries (a directory of ours, renamed within the tree being removed), where a
                // later pass over the top reaches it with the levels it needs.
                let ino = stat_at(child, c"").map_or(0, |((_, ino), _, _)| ino);
                close(child);
                if move_up(cur, &name, top, ino) {
                    continue;
                }
                // It cannot move: leave it, and make its parent skip it.
                if !remember(&mut stuck, &mut n_stuck, ino) {
                    unwind(&stack, depth);
                    return false;
                }
                if let Some(u) = unclean.get_mut(depth) {
                    *u = true;
                }
            }
            Pass::Done { clean } => {
                let clean = clean && !unclean.get(depth).copied().unwrap_or(true);
                if depth == 0 {
                    return clean;
                }
                if !clean {
                    let ino = stat_at(cur, c"").map_or(0, |((_, ino), _, _)| ino);
                    if !remember(&mut stuck, &mut n_stuck, ino) {
                        unwind(&stack, depth);
                        return false;
                    }
                    if let Some(u) = unclean.get_mut(depth.wrapping_sub(1)) {
                        *u = true;
                    }
                }
                close(cur);
                depth = depth.wrapping_sub(1);
            }
        }
    }
}

/// Renames the entry `name` (NUL-terminated in its buffer) of `dir` to `.deep-<ino>` in `top`,
/// never replacing anything; whether it moved.
fn move_up(dir: RawFd, name: &[u8; NAME_BYTES], top: RawFd, ino: u64) -> bool {
    let Ok(from) = CStr::from_bytes_until_nul(name) else {
        return false;
    };
    let mut to = [0u8; 32];
    let prefix = b".deep-";
    let mut len = 0usize;
    for &b in prefix {
        if let Some(slot) = to.get_mut(len) {
            *slot = b;
        }
        len = len.wrapping_add(1);
    }
    let mut digits = [0u8; 20];
    let mut n = 0usize;
    let mut rest = ino;
    loop {
        if let Some(slot) = digits.get_mut(n) {
            // The remainder is below 10: a digit.
            *slot = b'0'.wrapping_add(u8::try_from(rest % 10).unwrap_or(0));
        }
        n = n.wrapping_add(1);
        rest /= 10;
        if rest == 0 || n >= digits.len() {
            break;
        }
    }
    for i in (0..n).rev() {
        if let (Some(slot), Some(&d)) = (to.get_mut(len), digits.get(i)) {
            *slot = d;
        }
        len = len.wrapping_add(1);
    }
    // SAFETY: both names are NUL-terminated buffers that outlive the call; plain descriptors.
    sys(unsafe {
        syscall!(
            Sysno::renameat2,
            dir,
            from.as_ptr(),
            top,
            to.as_ptr(),
            libc::RENAME_NOREPLACE
        )
    })
    .is_ok()
}

fn remember(stuck: &mut [u64; MAX_STUCK], n: &mut usize, ino: u64) -> bool {
    match stuck.get_mut(*n) {
        Some(slot) => {
            *slot = ino;
            *n = n.wrapping_add(1);
            true
        }
        None => false,
    }
}

/// Closes every descriptor above the top (which the caller owns).
fn unwind(stack: &[RawFd; MAX_DEPTH], depth: usize) {
    for &fd in stack.get(1..=depth).unwrap_or(&[]) {
        close(fd);
    }
}

/// One pass over `dir` from its first entry: unlinks files and links, removes empty
/// directories, and returns the first non-empty subdirectory (not in `stuck`) opened.
fn pass(dir: RawFd, stuck: &[u64]) -> Pass {
    // SAFETY: plain integers; rewinds our own directory descriptor.
    if sys(unsafe { syscall!(Sysno::lseek, dir, 0usize, libc::SEEK_SET) }).is_err() {
        return Pass::Done { clean: false };
    }
    let mut clean = true;
    let mut opened_up = false;
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: a live, writable buffer of that length.
        let n = match sys(unsafe { syscall!(Sysno::getdents64, dir, buf.as_mut_ptr(), buf.len()) })
        {
            Ok(0) => return Pass::Done { clean },
            Ok(n) => n,
            Err(libc::EINTR) => continue,
            Err(_) => return Pass::Done { clean: false },
        };
        let mut at = 0usize;
        while at < n {
            // struct linux_dirent64: u64 d_ino, i64 d_off, u16 d_reclen, u8 d_type, name.
            let Some(head) = buf.get(at..at.wrapping_add(19)) else {
                return Pass::Done { clean: false };
            };
            let mut ino = [0u8; 8];
            let mut len = [0u8; 2];
            ino.copy_from_slice(head.get(0..8).unwrap_or(&[0; 8]));
            len.copy_from_slice(head.get(16..18).unwrap_or(&[0; 2]));
            let ino = u64::from_ne_bytes(ino);
            let reclen = usize::from(u16::from_ne_bytes(len));
            let d_type = head.get(18).copied().unwrap_or(libc::DT_UNKNOWN);
            let Some(record) = buf.get(at..at.wrapping_add(reclen)) else {
                return Pass::Done { clean: false };
            };
            if reclen == 0 {
                return Pass::Done { clean: false };
            }
            at = at.wrapping_add(reclen);
            let Some(name) = record
                .get(19..)
                .and_then(|raw| CStr::from_bytes_until_nul(raw).ok())
            else {
                continue;
            };
            if name == c"." || name == c".." || stuck.contains(&ino) {
                if stuck.contains(&ino) {
                    clean = false;
                }
                continue;
            }
            match remove_entry(dir, name, d_type, &mut opened_up) {
                Entry::Gone => {}
                Entry::Left => clean = false,
                Entry::Descend(child) => {
                    let mut kept = [0u8; NAME_BYTES];
                    let bytes = name.to_bytes_with_nul();
                    if let Some(slot) = kept.get_mut(..bytes.len()) {
                        slot.copy_from_slice(bytes);
                    }
                    return Pass::Descend(child, kept);
                }
            }
        }
    }
}

enum Entry {
    Gone,
    Left,
    Descend(RawFd),
}

fn remove_entry(dir: RawFd, name: &CStr, d_type: u8, opened_up: &mut bool) -> Entry {
    let mut as_dir = d_type == libc::DT_DIR;
    for _ in 0..3 {
        let flags = if as_dir { libc::AT_REMOVEDIR } else { 0 };
        match unlinkat(dir, name, flags) {
            Ok(()) | Err(libc::ENOENT) => return Entry::Gone,
            // Linux says EISDIR for `unlink` of a directory (d_type was unknown).
            Err(libc::EISDIR) if !as_dir => as_dir = true,
            Err(libc::ENOTEMPTY | libc::EEXIST) => return descend(dir, name),
            Err(libc::EACCES | libc::EPERM) if !*opened_up => {
                // Our directory was made unwritable: give it back to its owner once.
                fchmod_owner(dir);
                *opened_up = true;
            }
            Err(_) => return Entry::Left,
        }
    }
    Entry::Left
}

/// Opens the non-empty subdirectory `name` to empty it; an unsearchable one (`chmod 000`) is
/// first handed back to its owner.
fn descend(dir: RawFd, name: &CStr) -> Entry {
    match open_dir(dir, name) {
        Ok(child) => Entry::Descend(child),
        Err(libc::EACCES) if chmod_dir_at(dir, name, None) => {
            open_dir(dir, name).map_or(Entry::Left, Entry::Descend)
        }
        Err(_) => Entry::Left,
    }
}

/// `chmod 0700` of the directory `name` in `dir`, only if it is a directory (and, with
/// `expect`, that one) when looked at without following a link. `fchmodat` itself follows a
/// final link, so the look comes first; only the owner can swap the entry in between, and the
/// owner may chmod its own files anyway.
fn chmod_dir_at(dir: RawFd, name: &CStr, expect: Option<DirId>) -> bool {
    // The name is pinned first — `O_PATH | O_NOFOLLOW | O_DIRECTORY` needs no permission on a
    // mode-000 directory and refuses a symlink — and the chmod goes through that descriptor,
    // never through the name again: `fchmodat` follows a final symlink, and a process of the
    // same user (the sandboxed command's leftover) could swap one in between a check and it
    // (a sweep would then chmod a file outside).
    let Ok(fd) = openat(
        dir,
        name,
        libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_CLOEXEC,
    ) else {
        return false;
    };
    let fits = stat_at(fd, c"")
        .is_ok_and(|(id, _, mode)| is_dir(mode) && expect.is_none_or(|want| want == id));
    // `fchmod` refuses an O_PATH descriptor; its /proc/self/fd link names exactly the opened
    // directory, whatever the name points to by now.
    let mut buf = [0u8; 64];
    let done = fits
        && super::supervisor::c_path(&mut buf, b"/proc/self/fd/", fd as u64, b"").is_some_and(
            |path| {
                // SAFETY: a NUL-terminated absolute path.
                sys(unsafe { syscall!(Sysno::fchmodat, libc::AT_FDCWD, path.as_ptr(), 0o700usize) })
                    .is_ok()
            },
        );
    close(fd);
    done
}
