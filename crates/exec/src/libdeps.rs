//! The files the dynamic loader opens to start one ELF program: its interpreter (`PT_INTERP`) and
//! the transitive closure of its `DT_NEEDED` libraries, resolved the way glibc's loader resolves
//! them on a multiarch Debian system.
//!
//! Why: the `run` sandbox must let `/usr/bin/mawk` start without granting all of `/usr` (RUN-7).
//! Reading the ELF headers tells exactly which files the loader will open.
//! Refuses to know: `DT_RPATH`/`DT_RUNPATH` with `$ORIGIN`, `LD_LIBRARY_PATH` (the environment is
//! cleared), `dlopen` at run time. A library it cannot find is an error, not a guess: the sandbox
//! would otherwise fail at run time with a confusing loader message.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use linux_sandbox::{ElfClass, ElfError};

/// The directories glibc searches when neither the cache nor a run path names the library,
/// plus the multiarch directories from Debian's `/etc/ld.so.conf.d`.
const SEARCH_DIRS: &[&str] = &[
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];

/// Why the loader's files could not be determined.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LibDepsError {
    /// The program or a library could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a 64-bit ELF object this module understands.
    #[error("{path} is not a 64-bit ELF program or library: {reason}")]
    NotElf {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        reason: String,
    },
    /// A `DT_NEEDED` library is in none of the search directories.
    #[error("{program} needs {library}, which is in none of {SEARCH_DIRS:?}")]
    Missing {
        /// The file that needs it.
        program: PathBuf,
        /// The library's name as written in the ELF file.
        library: String,
    },
}

/// What identifies one version of a file: a package upgrade that replaces the program or a
/// library changes at least one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime: m.mtime(),
        mtime_nsec: m.mtime_nsec(),
    })
}

/// One cached answer: the stamps of the program and of every file in the answer.
type Cached = (Vec<(PathBuf, Stamp)>, Arc<BTreeSet<PathBuf>>);

static CACHE: LazyLock<Mutex<HashMap<PathBuf, Cached>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// [`loader_files`], remembered per program while the program and every file of the answer are
/// unchanged (a few `stat`s instead of re-reading the ELF headers of libc on every run).
pub fn loader_files_cached(program: &Path) -> Result<Arc<BTreeSet<PathBuf>>, LibDepsError> {
    let fresh = |stamps: &[(PathBuf, Stamp)]| stamps.iter().all(|(p, s)| stamp(p) == Some(*s));
    if let Ok(cache) = CACHE.lock() {
        if let Some((stamps, files)) = cache.get(program) {
            if fresh(stamps) {
                return Ok(files.clone());
            }
        }
    }
    let files = Arc::new(loader_files(program)?);
    let stamps: Option<Vec<(PathBuf, Stamp)>> = std::iter::once(program)
        .chain(files.iter().map(PathBuf::as_path))
        .map(|p| stamp(p).map(|s| (p.to_path_buf(), s)))
        .collect();
    if let (Some(stamps), Ok(mut cache)) = (stamps, CACHE.lock()) {
        cache.insert(program.to_path_buf(), (stamps, files.clone()));
    }
    Ok(files)
}

/// The interpreter and every library `program` needs, canonicalized (symlinks resolved, since
/// Landlock rules attach to the inode behind a path). Does not include `program` itself.
pub fn loader_files(program: &Path) -> Result<BTreeSet<PathBuf>, LibDepsError> {
    let mut out = BTreeSet::new();
    let mut pending = vec![program.to_path_buf()];
    let mut seen = BTreeSet::new();
    while let Some(file) = pending.pop() {
        if !seen.insert(file.clone()) {
            continue;
        }
        let (interp, needed) = parse(&file)?;
        if let Some(interp) = interp {
            let interp = canonical(&interp)?;
            out.insert(interp);
        }
        for name in needed {
            let found = SEARCH_DIRS
                .iter()
                .map(|dir| Path::new(dir).join(&name))
                .find(|candidate| candidate.is_file())
                .ok_or_else(|| LibDepsError::Missing {
                    program: file.clone(),
                    library: name.to_string_lossy().into_owned(),
                })?;
            let found = canonical(&found)?;
            out.insert(found.clone());
            pending.push(found);
        }
    }
    Ok(out)
}

fn canonical(path: &Path) -> Result<PathBuf, LibDepsError> {
    path.canonicalize().map_err(|source| LibDepsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// `(PT_INTERP, DT_NEEDED names)` of one 64-bit ELF file, through `linux_sandbox`'s ELF reader
/// (the one the sandbox uses for interpreters; it reads only the header ranges it needs: libc
/// is ~2 MB and this runs on every `agent-exec call run`, each a fresh process). 32-bit files
/// are refused as before: the search directories hold 64-bit libraries only.
fn parse(path: &Path) -> Result<(Option<PathBuf>, Vec<OsString>), LibDepsError> {
    let not_elf = |reason: String| LibDepsError::NotElf {
        path: path.to_path_buf(),
        reason,
    };
    let load = linux_sandbox::elf_load(path).map_err(|e| match e {
        ElfError::Read(source) => LibDepsError::Read {
            path: path.to_path_buf(),
            source,
        },
        other => not_elf(other.to_string()),
    })?;
    if load.class != ElfClass::Elf64 {
        return Err(not_elf("a 32-bit ELF file".to_owned()));
    }
    Ok((load.interpreter, load.needed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mawk_needs_the_loader_libc_and_libm() {
        let Ok(awk) = Path::new("/usr/bin/awk").canonicalize() else {
            eprintln!("skipped: no /usr/bin/awk on this machine");
            return;
        };
        let files = loader_files(&awk).unwrap();
        let names: Vec<String> = files
            .iter()
            .filter_map(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().any(|n| n.starts_with("ld-linux")), "{names:?}");
        assert!(names.iter().any(|n| n == "libc.so.6"), "{names:?}");
        assert!(files.iter().all(|p| p.is_absolute() && p.is_file()));
        assert!(!files.contains(&awk));
    }

    #[test]
    fn the_cache_answers_like_a_fresh_read_and_notices_a_replaced_program() {
        let Ok(wc) = Path::new("/usr/bin/wc").canonicalize() else {
            eprintln!("skipped: no /usr/bin/wc on this machine");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("prog");
        std::fs::copy(&wc, &copy).unwrap();
        let first = loader_files_cached(&copy).unwrap();
        assert_eq!(*first, loader_files(&copy).unwrap());
        assert!(Arc::ptr_eq(&first, &loader_files_cached(&copy).unwrap()));
        // Replace the program with a different one: the cached answer must not be reused.
        let ls = Path::new("/bin/ls").canonicalize().unwrap();
        std::fs::remove_file(&copy).unwrap();
        std::fs::copy(&ls, &copy).unwrap();
        let second = loader_files_cached(&copy).unwrap();
        assert!(!Arc::ptr_eq(&first, &second));
        assert_eq!(*second, loader_files(&copy).unwrap());
    }

    #[test]
    fn a_text_file_is_not_elf() {
        let err = loader_files(Path::new("/etc/hostname")).unwrap_err();
        assert!(matches!(err, LibDepsError::NotElf { .. }), "{err}");
    }
}
