//! Which interpreter the kernel opens when it executes a file: the `PT_INTERP` of an ELF
//! executable (`/lib64/ld-linux-x86-64.so.2`) or the `#!` line of a script.
//!
//! Why this matters: the kernel opens that interpreter with `open_exec()`, the same way as the
//! program itself, so Landlock requires `EXECUTE` (and `READ_FILE`) on it too; a policy that
//! grants only the program gets `EACCES` from `execve`. Shared libraries are different: `ld.so`
//! opens them with a plain `open()` and maps them with `mmap(PROT_EXEC)`, which Landlock does
//! not check, so they need only `READ_FILE`.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// `PT_INTERP` from the ELF specification.
const PT_INTERP: u32 = 3;
/// Longest interpreter path we accept (the kernel's `BINPRM_BUF_SIZE` bounds `#!` lines too).
const MAX_INTERP_LEN: usize = 4096;

/// The interpreter `execve(path)` opens, if any. Files that are neither ELF nor `#!` scripts
/// return `None` (the kernel would refuse to execute them with `ENOEXEC`).
pub(crate) fn interpreter(path: &Path) -> io::Result<Option<PathBuf>> {
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking, and only a regular file is read: a FIFO or a device at the path must not
    // hang or feed the host (issue 16 review). The kernel executes nothing else anyway.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Ok(None);
    }
    let mut head = [0u8; 256];
    let n = read_at_most(&file, &mut head, 0)?;
    let head = &head[..n];
    if let Some(rest) = head.strip_prefix(b"#!") {
        return Ok(shebang(rest));
    }
    if head.len() >= 52 && head.starts_with(b"\x7fELF") {
        return elf_interp(&file, head);
    }
    Ok(None)
}

fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

fn shebang(rest: &[u8]) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let line = rest.split(|&b| b == b'\n').next()?;
    let word = line
        .split(|&b| b == b' ' || b == b'\t')
        .find(|w| !w.is_empty())?;
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(word)))
}

fn elf_interp(file: &File, head: &[u8]) -> io::Result<Option<PathBuf>> {
    use std::os::unix::ffi::OsStrExt;
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed ELF header");
    let class64 = match head[4] {
        1 => false,
        2 => true,
        _ => return Err(bad()),
    };
    let little = match head[5] {
        1 => true,
        2 => false,
        _ => return Err(bad()),
    };
    let u16_at = |b: &[u8], at: usize| -> Option<u64> {
        let raw: [u8; 2] = b.get(at..at + 2)?.try_into().ok()?;
        Some(u64::from(if little {
            u16::from_le_bytes(raw)
        } else {
            u16::from_be_bytes(raw)
        }))
    };
    let u32_at = |b: &[u8], at: usize| -> Option<u64> {
        let raw: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
        Some(u64::from(if little {
            u32::from_le_bytes(raw)
        } else {
            u32::from_be_bytes(raw)
        }))
    };
    let u64_at = |b: &[u8], at: usize| -> Option<u64> {
        let raw: [u8; 8] = b.get(at..at + 8)?.try_into().ok()?;
        Some(if little {
            u64::from_le_bytes(raw)
        } else {
            u64::from_be_bytes(raw)
        })
    };
    // e_phoff, e_phentsize, e_phnum; p_type, p_offset, p_filesz (ELF spec, both classes).
    let (phoff, phentsize, phnum) = if class64 {
        (u64_at(head, 32), u16_at(head, 54), u16_at(head, 56))
    } else {
        (u32_at(head, 28), u16_at(head, 42), u16_at(head, 44))
    };
    let (phoff, phentsize, phnum) = match (phoff, phentsize, phnum) {
        (Some(a), Some(b), Some(c)) if b >= if class64 { 56 } else { 32 } => (a, b, c),
        _ => return Err(bad()),
    };
    let mut entry = vec![0u8; usize::try_from(phentsize).map_err(|_| bad())?];
    for index in 0..phnum {
        let at = phoff.checked_add(index * phentsize).ok_or_else(bad)?;
        if read_at_most(file, &mut entry, at)? < entry.len() {
            return Err(bad());
        }
        if u32_at(&entry, 0) != Some(u64::from(PT_INTERP)) {
            continue;
        }
        let (offset, size) = if class64 {
            (u64_at(&entry, 8), u64_at(&entry, 32))
        } else {
            (u32_at(&entry, 4), u32_at(&entry, 16))
        };
        let (offset, size) = match (offset, size) {
            (Some(o), Some(s)) => (o, usize::try_from(s).map_err(|_| bad())?),
            _ => return Err(bad()),
        };
        if size == 0 || size > MAX_INTERP_LEN {
            return Err(bad());
        }
        let mut name = vec![0u8; size];
        if read_at_most(file, &mut name, offset)? < size {
            return Err(bad());
        }
        let end = name.iter().position(|&b| b == 0).unwrap_or(size);
        return Ok(Some(PathBuf::from(std::ffi::OsStr::from_bytes(
            &name[..end],
        ))));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_elf_names_its_loader() {
        let interp = interpreter(Path::new("/bin/sh")).unwrap().unwrap();
        assert!(
            interp.to_string_lossy().contains("ld-"),
            "unexpected interpreter {interp:?}"
        );
    }

    #[test]
    fn shebang_script_names_its_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        std::fs::write(&script, "#!/bin/sh -e\necho hi\n").unwrap();
        assert_eq!(
            interpreter(&script).unwrap(),
            Some(PathBuf::from("/bin/sh"))
        );
    }

    #[test]
    fn plain_text_has_no_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t");
        std::fs::write(&file, "hello").unwrap();
        assert_eq!(interpreter(&file).unwrap(), None);
    }

    #[test]
    fn truncated_elf_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("e");
        let mut bytes = b"\x7fELF\x02\x01".to_vec();
        bytes.resize(64, 0);
        bytes[32] = 0xff; // e_phoff far past the end
        bytes[54] = 56; // e_phentsize
        bytes[56] = 1; // e_phnum
        std::fs::write(&file, bytes).unwrap();
        assert!(interpreter(&file).is_err());
    }
}
