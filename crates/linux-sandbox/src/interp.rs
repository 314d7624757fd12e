//! Which interpreter the kernel opens when it executes a file: the `PT_INTERP` of an ELF
//! executable (`/lib64/ld-linux-x86-64.so.2`) or the `#!` line of a script; and, for callers
//! that grant a program's loader files ([`elf_load`]), the `DT_NEEDED` libraries of an ELF file.
//!
//! Why this matters: the kernel opens that interpreter with `open_exec()`, the same way as the
//! program itself, so Landlock requires `EXECUTE` (and `READ_FILE`) on it too; a policy that
//! grants only the program gets `EACCES` from `execve`. Shared libraries are different: `ld.so`
//! opens them with a plain `open()` and maps them with `mmap(PROT_EXEC)`, which Landlock does
//! not check, so they need only `READ_FILE`.
//!
//! This is the workspace's one ELF reader; the headers are parsed by the `object` crate.
//! Bounds, because a path may name a file somebody else wrote: the file is opened
//! non-blocking and read only if it is a regular file (a FIFO or a device at the path must not
//! hang or feed the host; the kernel executes nothing else anyway); at most 256 bytes decide
//! what kind of file it is; at most [`MAX_PROGRAM_HEADERS`] program headers and an interpreter
//! name of at most [`MAX_INTERP_LEN`] bytes are read; every other read is of a range the
//! headers name, checked against the file's length before anything is allocated for it
//! (`object`'s `ReadCache`), and only the ranges asked for are read, never the whole file.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use object::elf::{DT_NEEDED, FileHeader32, FileHeader64, PT_INTERP};
use object::read::elf::{FileHeader, ProgramHeader};
use object::{Endianness, ReadCache};

/// Longest interpreter path we accept (the kernel's `BINPRM_BUF_SIZE` bounds `#!` lines too).
pub(crate) const MAX_INTERP_LEN: usize = 4096;
/// Most program headers read from one file. Real programs have about a dozen; the bound keeps
/// a crafted header from making us read megabytes of them.
pub(crate) const MAX_PROGRAM_HEADERS: usize = 1024;

/// The interpreter `execve(path)` opens, if any. Files that are neither ELF nor `#!` scripts
/// return `None` (the kernel would refuse to execute them with `ENOEXEC`).
pub(crate) fn interpreter(path: &Path) -> io::Result<Option<PathBuf>> {
    let Some((file, kind)) = open(path)? else {
        return Ok(None);
    };
    match kind {
        Kind::Script(interp) => Ok(interp),
        Kind::Elf(class) => {
            let data = ReadCache::new(file);
            match class {
                ElfClass::Elf32 => elf_interp::<FileHeader32<Endianness>>(&data),
                ElfClass::Elf64 => elf_interp::<FileHeader64<Endianness>>(&data),
            }
            .map_err(malformed)
        }
    }
}

/// An ELF file's word size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElfClass {
    /// `ELFCLASS32`.
    Elf32,
    /// `ELFCLASS64`.
    Elf64,
}

/// What the dynamic loader reads from one ELF file to start it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ElfLoad {
    /// 32- or 64-bit.
    pub class: ElfClass,
    /// `PT_INTERP`: the loader the kernel opens, absent for a static program or a library.
    pub interpreter: Option<PathBuf>,
    /// `DT_NEEDED`, in file order: the library names the loader looks up.
    pub needed: Vec<OsString>,
}

/// Why [`elf_load`] has no answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ElfError {
    /// The file could not be opened or read.
    #[error("{0}")]
    Read(#[source] io::Error),
    /// The file is not a regular ELF file, or its headers are malformed.
    #[error("{0}")]
    NotElf(String),
}

/// The interpreter and the `DT_NEEDED` names of the ELF file at `path`, within the module's
/// bounds.
///
/// # Errors
/// [`ElfError::Read`] when the file cannot be opened or read; [`ElfError::NotElf`] when it is
/// not a regular file starting with the ELF magic or its headers do not parse.
pub fn elf_load(path: &Path) -> Result<ElfLoad, ElfError> {
    let not_elf = || ElfError::NotElf("not an ELF file".to_owned());
    let Some((file, Kind::Elf(class))) = open(path).map_err(ElfError::Read)? else {
        return Err(not_elf());
    };
    let data = ReadCache::new(file);
    let (interpreter, needed) = match class {
        ElfClass::Elf32 => elf_interp_and_needed::<FileHeader32<Endianness>>(&data),
        ElfClass::Elf64 => elf_interp_and_needed::<FileHeader64<Endianness>>(&data),
    }
    .map_err(|e| ElfError::NotElf(e.to_string()))?;
    Ok(ElfLoad {
        class,
        interpreter,
        needed,
    })
}

/// What the first bytes of a file say it is.
enum Kind {
    /// A `#!` script and the interpreter its line names (`None`: an empty line).
    Script(Option<PathBuf>),
    /// An ELF file.
    Elf(ElfClass),
}

/// Opens `path` within the module's bounds and classifies it; `None` for anything the kernel
/// would not execute through an interpreter (not a regular file, not ELF, not `#!`).
fn open(path: &Path) -> io::Result<Option<(File, Kind)>> {
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking, and only a regular file is read: a FIFO or a device at the path must not
    // hang or feed the host. The kernel executes nothing else anyway.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Ok(None);
    }
    let mut head = [0u8; 256];
    let n = read_at_most(&file, &mut head, 0)?;
    let head = head.get(..n).unwrap_or(&[]);
    let kind = if let Some(rest) = head.strip_prefix(b"#!") {
        Kind::Script(shebang(rest))
    } else if head.len() >= 52 && head.starts_with(b"\x7fELF") {
        // EI_CLASS; anything else is malformed, as the kernel sees it.
        match head.get(4) {
            Some(1) => Kind::Elf(ElfClass::Elf32),
            Some(2) => Kind::Elf(ElfClass::Elf64),
            _ => return Err(malformed("unknown ELF class")),
        }
    } else {
        return Ok(None);
    };
    Ok(Some((file, kind)))
}

fn malformed(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("malformed ELF header: {e}"),
    )
}

fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while let Some(rest) = buf.get_mut(done..).filter(|r| !r.is_empty()) {
        match file.read_at(rest, offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

fn shebang(rest: &[u8]) -> Option<PathBuf> {
    let line = rest.split(|&b| b == b'\n').next()?;
    let word = line
        .split(|&b| b == b' ' || b == b'\t')
        .find(|w| !w.is_empty())?;
    Some(PathBuf::from(OsStr::from_bytes(word)))
}

type Data<'a> = &'a ReadCache<File>;

/// What is wrong with an ELF file's headers, in words.
#[derive(Debug)]
struct Malformed(std::borrow::Cow<'static, str>);

impl From<object::Error> for Malformed {
    fn from(e: object::Error) -> Self {
        Malformed(e.to_string().into())
    }
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `PT_INTERP` of an ELF file of class `H`, its program headers bounded.
fn elf_interp<H: FileHeader<Endian = Endianness>>(
    data: Data<'_>,
) -> Result<Option<PathBuf>, Malformed> {
    let header = H::parse(data)?;
    let endian = header.endian()?;
    if usize::from(header.e_phnum(endian)) > MAX_PROGRAM_HEADERS {
        return Err(Malformed("too many program headers".into()));
    }
    for ph in header.program_headers(endian, data)? {
        if ph.p_type(endian) != PT_INTERP {
            continue;
        }
        let size: u64 = ph.p_filesz(endian).into();
        if size == 0 || size > MAX_INTERP_LEN as u64 {
            return Err(Malformed("interpreter name of implausible size".into()));
        }
        if let Some(name) = ph.interpreter(endian, data)? {
            // The kernel resolves a relative name against the caller's working directory, the
            // loader would not be the file we grant: only an absolute name is one we know
            // (`rel/ld.so` would resolve against the host's cwd).
            if name.first() != Some(&b'/') {
                return Err(Malformed(
                    "interpreter name that is not an absolute path".into(),
                ));
            }
            return Ok(Some(PathBuf::from(OsStr::from_bytes(name))));
        }
    }
    Ok(None)
}

/// [`elf_interp`] and the `DT_NEEDED` names (from the dynamic section, as `ld.so`'s own
/// tooling reads them).
fn elf_interp_and_needed<H: FileHeader<Endian = Endianness>>(
    data: Data<'_>,
) -> Result<(Option<PathBuf>, Vec<OsString>), Malformed> {
    let interp = elf_interp::<H>(data)?;
    let header = H::parse(data)?;
    let endian = header.endian()?;
    let sections = header.sections(endian, data)?;
    let dynamic = sections.dynamic_table(endian, data)?;
    let mut needed = Vec::new();
    for entry in dynamic.iter() {
        if entry.tag == DT_NEEDED {
            let name = dynamic.string(entry)?;
            // A library name is looked up in the search directories; one with a `/` would be
            // joined out of them (`../..`, `/abs`).
            if name.is_empty() || name.contains(&b'/') {
                return Err(Malformed(
                    "library name that is not a plain file name".into(),
                ));
            }
            needed.push(OsStr::from_bytes(name).to_owned());
        }
    }
    Ok((interp, needed))
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

    /// A copy of `/bin/sh` with `from` replaced by `to` (same length) wherever it occurs.
    fn patched_shell(dir: &Path, from: &[u8], to: &[u8]) -> Option<PathBuf> {
        assert_eq!(from.len(), to.len());
        let mut bytes = std::fs::read(std::fs::canonicalize("/bin/sh").ok()?).ok()?;
        let mut hit = false;
        let mut i = 0;
        while let Some(at) = bytes[i..].windows(from.len()).position(|w| w == from) {
            bytes[i + at..i + at + to.len()].copy_from_slice(to);
            i += at + to.len();
            hit = true;
        }
        if !hit {
            eprintln!("skipped: /bin/sh does not hold {from:?}");
            return None;
        }
        let file = dir.join("patched");
        std::fs::write(&file, bytes).ok()?;
        Some(file)
    }

    #[test]
    fn a_relative_interpreter_or_a_library_name_with_a_slash_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        if let Some(file) = patched_shell(dir.path(), b"/lib64/ld-linux", b"xlib64/ld-linux") {
            assert!(interpreter(&file).is_err());
            assert!(elf_load(&file).is_err());
        }
        if let Some(file) = patched_shell(dir.path(), b"libc.so.6\0", b"../c.so.6\0") {
            assert!(elf_load(&file).is_err());
        }
    }

    #[test]
    fn plain_text_has_no_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t");
        std::fs::write(&file, "hello").unwrap();
        assert_eq!(interpreter(&file).unwrap(), None);
    }

    #[test]
    fn truncated_elf_is_an_error_not_a_panic_and_not_elf_for_the_loader_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("e");
        let mut bytes = b"\x7fELF\x02\x01\x01".to_vec();
        bytes.resize(64, 0);
        bytes[32] = 0xff; // e_phoff far past the end
        bytes[54] = 56; // e_phentsize
        bytes[56] = 1; // e_phnum
        std::fs::write(&file, bytes).unwrap();
        assert!(interpreter(&file).is_err());
        assert!(matches!(elf_load(&file), Err(ElfError::NotElf(_))));
    }

    #[test]
    fn a_fifo_is_not_read_and_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RWXU,
            0,
        )
        .unwrap();
        assert_eq!(interpreter(&fifo).unwrap(), None);
        assert!(matches!(elf_load(&fifo), Err(ElfError::NotElf(_))));
    }

    #[test]
    fn a_program_names_its_loader_and_libc() {
        let load = elf_load(Path::new("/bin/sh")).unwrap();
        assert_eq!(
            load.interpreter,
            interpreter(Path::new("/bin/sh")).unwrap(),
            "one reader, one answer"
        );
        assert!(
            load.needed.iter().any(|n| n == "libc.so.6"),
            "{:?}",
            load.needed
        );
    }

    #[test]
    fn an_implausible_program_header_count_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("e");
        let mut bytes = b"\x7fELF\x02\x01\x01".to_vec();
        bytes.resize(64 + 56 * 1100, 0);
        bytes[16] = 2; // ET_EXEC
        bytes[18] = 62; // EM_X86_64
        bytes[20] = 1; // EV_CURRENT
        bytes[32] = 64; // e_phoff
        bytes[52] = 64; // e_ehsize
        bytes[54] = 56; // e_phentsize
        bytes[56..58].copy_from_slice(&1100u16.to_le_bytes()); // e_phnum
        std::fs::write(&file, bytes).unwrap();
        let err = interpreter(&file).unwrap_err();
        assert!(err.to_string().contains("too many"), "{err}");
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_after_the_elf_magic_are_an_answer_or_an_error_never_a_panic(
            tail in proptest::collection::vec(proptest::num::u8::ANY, 0..600)
        ) {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("e");
            let mut bytes = b"\x7fELF".to_vec();
            bytes.extend_from_slice(&tail);
            std::fs::write(&file, bytes).unwrap();
            let _ = interpreter(&file);
            let _ = elf_load(&file);
        }
    }
}
