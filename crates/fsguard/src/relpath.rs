//! `RelPath`: a relative path from untrusted input, validated once and opened component by
//! component (RUN-4).

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::sys::{self, Kind};

/// The longest path [`RelPath::new`] accepts, in bytes (Linux `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;
/// The longest single component [`RelPath::new`] accepts, in bytes (Linux `NAME_MAX`).
pub const MAX_COMPONENT_BYTES: usize = 255;

/// A validated relative path: no absolute prefix, no `..`, no NUL, no `.git` in any letter case,
/// at most [`MAX_COMPONENT_BYTES`] per component and [`MAX_PATH_BYTES`] in all (RUN-4).
///
/// The only way to get one is [`RelPath::new`], so holding a `RelPath` proves it was checked.
/// `.` components and repeated or trailing slashes are dropped; `.` alone names the root itself.
/// Names that are not UTF-8 are kept byte for byte (`OsStr`), never lossily converted.
///
/// Validation is about the text; symbolic links are refused later, at the moment of use, by
/// [`open_dir_at`](RelPath::open_dir_at) and [`open_file_at`](RelPath::open_file_at), which walk
/// one component at a time with `O_NOFOLLOW` so there is no check-then-use window.
///
/// ```
/// use fsguard::RelPath;
///
/// let p = RelPath::new("src/./lib.rs").unwrap();
/// assert_eq!(p.as_path(), std::path::Path::new("src/lib.rs"));
/// assert!(RelPath::new("../etc/passwd").is_err());
/// assert!(RelPath::new("sub/.GiT/config").is_err());
/// assert!(RelPath::new(".").unwrap().is_root());
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelPath {
    /// Normalised: components joined by single `/`; empty for the root.
    inner: OsString,
}

/// Why a string is not a [`RelPath`]. Each variant names the offending component.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RelPathError {
    /// The input was empty.
    #[error("the path is empty; give a path relative to the root, or `.` for the root itself")]
    Empty,
    /// The input contained a NUL byte.
    #[error("the path contains a NUL byte at byte {position}; remove it")]
    Nul {
        /// Byte offset of the first NUL.
        position: usize,
    },
    /// The input started with `/`.
    #[error("`{}` is absolute; give a path relative to the root", Path::new(path).display())]
    Absolute {
        /// The input as given.
        path: OsString,
    },
    /// A `..` component.
    #[error(
        "component {index} is `..`; paths may not leave the root, name the file from the root instead"
    )]
    ParentDir {
        /// Zero-based index of the component among the input's `/`-separated parts.
        index: usize,
    },
    /// A `.git` component, in any letter case.
    #[error("component `{}` is a Git directory; `.git` is never accessible, in any letter case", Path::new(component).display())]
    GitDir {
        /// The component as given.
        component: OsString,
    },
    /// A component longer than [`MAX_COMPONENT_BYTES`].
    #[error("a component is {len} bytes long (it starts `{}`); the limit is {MAX_COMPONENT_BYTES}", Path::new(prefix).display())]
    ComponentTooLong {
        /// The component's length in bytes.
        len: usize,
        /// Its first 32 bytes, to recognise it by.
        prefix: OsString,
    },
    /// The whole input is longer than [`MAX_PATH_BYTES`].
    #[error("the path is {len} bytes long; the limit is {MAX_PATH_BYTES}")]
    TooLong {
        /// The input's length in bytes.
        len: usize,
    },
}

/// Why [`RelPath::open_dir_at`] or [`RelPath::open_file_at`] refused. `component` is the path
/// from the root up to and including the component where the walk stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// A component is a symbolic link; links are never followed (RUN-4).
    #[error("`{}` is a symbolic link; symbolic links are never followed, name the target's real path", component.display())]
    Symlink {
        /// The path up to the link.
        component: PathBuf,
    },
    /// A component that must be a directory is something else.
    #[error("`{}` is not a directory", component.display())]
    NotADirectory {
        /// The path up to the offending component.
        component: PathBuf,
    },
    /// The final component is not a regular file (a directory, FIFO, device, socket).
    #[error("`{}` is not a regular file", component.display())]
    NotARegularFile {
        /// The whole path.
        component: PathBuf,
    },
    /// A component does not exist.
    #[error("`{}` does not exist", component.display())]
    NotFound {
        /// The path up to the missing component.
        component: PathBuf,
    },
    /// The operating system refused access.
    #[error("permission denied at `{}`", component.display())]
    PermissionDenied {
        /// The path up to the component that could not be opened.
        component: PathBuf,
    },
    /// Any other system call failure.
    #[error("cannot open `{}`: {source}", component.display())]
    Io {
        /// The path up to the component that could not be opened.
        component: PathBuf,
        /// The system's error.
        source: io::Error,
    },
}

impl OpenError {
    /// The path from the root up to the component where the walk stopped.
    pub fn component(&self) -> &Path {
        match self {
            OpenError::Symlink { component }
            | OpenError::NotADirectory { component }
            | OpenError::NotARegularFile { component }
            | OpenError::NotFound { component }
            | OpenError::PermissionDenied { component }
            | OpenError::Io { component, .. } => component,
        }
    }

    /// Classifies a failed `openat(dir, name, O_NOFOLLOW…)`. `ELOOP` and `ENOTDIR` are ambiguous
    /// between "is a symlink" and "is a file", so the entry is looked at (without following)
    /// only to word the error; the refusal itself has already happened.
    pub(crate) fn classify(
        err: io::Error,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        component: PathBuf,
    ) -> OpenError {
        use rustix::io::Errno;
        if sys::is_errno(&err, Errno::LOOP) || sys::is_errno(&err, Errno::NOTDIR) {
            return match sys::stat_at(dir, name) {
                Ok(m) if m.kind == Kind::Symlink => OpenError::Symlink { component },
                _ => OpenError::NotADirectory { component },
            };
        }
        match err.kind() {
            io::ErrorKind::NotFound => OpenError::NotFound { component },
            io::ErrorKind::PermissionDenied => OpenError::PermissionDenied { component },
            _ => OpenError::Io {
                component,
                source: err,
            },
        }
    }
}

/// True for `.git` in any letter case, also when disguised the ways other file systems fold
/// names (see [`fold_name`]; Git itself refuses `.g\u{200c}it` and `.git.` too).
pub(crate) fn is_git_name(name: &[u8]) -> bool {
    fold_name(name) == b".git"
}

/// A name as the file systems that hosts share a workspace with compare it: ASCII letters in
/// lower case, the zero-width code points HFS+ ignores removed, and trailing dots and spaces
/// dropped as NTFS drops them (one character is always kept). The two code points whose case
/// fold is an ASCII letter (APFS folds KELVIN SIGN to `k` and LONG S to `s`) become that
/// letter. Bytes that are not UTF-8 are kept as they are, lower-cased where ASCII.
pub(crate) fn fold_name(name: &[u8]) -> Vec<u8> {
    let mut folded: Vec<u8> = Vec::with_capacity(name.len());
    match std::str::from_utf8(name) {
        Ok(s) => {
            for c in s.chars() {
                let c = match c {
                    '\u{212a}' => 'k',
                    '\u{17f}' => 's',
                    c => c,
                };
                let ignorable = matches!(c,
                    '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}');
                if !ignorable {
                    let mut tmp = [0u8; 4];
                    folded.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
                }
            }
        }
        Err(_) => folded.extend_from_slice(name),
    }
    while let Some(b'.' | b' ') = folded.last() {
        if folded.len() <= 1 {
            break;
        }
        folded.pop();
    }
    folded.make_ascii_lowercase();
    folded
}

impl RelPath {
    /// Validates `input` (see the type's documentation for the rules).
    pub fn new(input: impl AsRef<OsStr>) -> Result<RelPath, RelPathError> {
        let bytes = input.as_ref().as_bytes();
        if bytes.is_empty() {
            return Err(RelPathError::Empty);
        }
        if let Some(position) = bytes.iter().position(|b| *b == 0) {
            return Err(RelPathError::Nul { position });
        }
        if bytes.len() > MAX_PATH_BYTES {
            return Err(RelPathError::TooLong { len: bytes.len() });
        }
        if bytes[0] == b'/' {
            return Err(RelPathError::Absolute {
                path: input.as_ref().to_os_string(),
            });
        }
        let mut inner = Vec::with_capacity(bytes.len());
        for (index, comp) in bytes.split(|b| *b == b'/').enumerate() {
            if comp.is_empty() || comp == b"." {
                continue;
            }
            if comp == b".." {
                return Err(RelPathError::ParentDir { index });
            }
            if comp.len() > MAX_COMPONENT_BYTES {
                return Err(RelPathError::ComponentTooLong {
                    len: comp.len(),
                    prefix: OsString::from_vec(comp[..32].to_vec()),
                });
            }
            if is_git_name(comp) {
                return Err(RelPathError::GitDir {
                    component: OsString::from_vec(comp.to_vec()),
                });
            }
            if !inner.is_empty() {
                inner.push(b'/');
            }
            inner.extend_from_slice(comp);
        }
        Ok(RelPath {
            inner: OsString::from_vec(inner),
        })
    }

    /// The root itself (`.`).
    pub fn root() -> RelPath {
        RelPath {
            inner: OsString::new(),
        }
    }

    /// True when this path names the root itself (it was `.` or only `.` components).
    pub fn is_root(&self) -> bool {
        self.inner.is_empty()
    }

    /// The normalised path; `.` for the root.
    pub fn as_path(&self) -> &Path {
        if self.is_root() {
            Path::new(".")
        } else {
            Path::new(&self.inner)
        }
    }

    /// The components, each a non-empty name that is neither `.`, `..` nor `.git`.
    pub fn components(&self) -> impl DoubleEndedIterator<Item = &OsStr> + '_ {
        self.inner
            .as_bytes()
            .split(|b| *b == b'/')
            .filter(|c| !c.is_empty())
            .map(OsStr::from_bytes)
    }

    /// The last component, or `None` for the root.
    pub fn file_name(&self) -> Option<&OsStr> {
        self.components().next_back()
    }

    /// The path without its last component (the root for a one-component path), or `None` for
    /// the root.
    pub fn parent(&self) -> Option<RelPath> {
        let bytes = self.inner.as_bytes();
        if bytes.is_empty() {
            return None;
        }
        let cut = bytes.iter().rposition(|b| *b == b'/').unwrap_or(0);
        Some(RelPath {
            inner: OsString::from_vec(bytes[..cut].to_vec()),
        })
    }

    /// `self/name`, validated like [`RelPath::new`] validates a component.
    pub fn join(&self, name: impl AsRef<OsStr>) -> Result<RelPath, RelPathError> {
        let mut joined = self.inner.clone();
        if !joined.is_empty() {
            joined.push("/");
        }
        joined.push(name.as_ref());
        RelPath::new(if joined.is_empty() {
            OsStr::new(".")
        } else {
            &joined
        })
    }

    /// Walks to the parent directory of the last component, returning its fd (opened for
    /// reading, so it can be listed and `fsync`ed) and the last component.
    pub(crate) fn open_parent_at(
        &self,
        root: BorrowedFd<'_>,
    ) -> Result<(OwnedFd, &OsStr), OpenError> {
        let name = self.file_name().ok_or_else(|| OpenError::NotARegularFile {
            component: PathBuf::from("."),
        })?;
        let parent = self.parent().unwrap_or_else(RelPath::root);
        Ok((parent.open_dir_at(root)?, name))
    }

    /// Opens this path as a directory under `root`, one component at a time, never following a
    /// symbolic link (RUN-4). Intermediate directories need only search permission; the result
    /// is opened for reading (`O_RDONLY | O_DIRECTORY`). The root (`.`) re-opens `root` itself.
    ///
    /// ```
    /// use fsguard::RelPath;
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
    /// std::os::unix::fs::symlink("/etc", dir.path().join("a/link")).unwrap();
    /// let root = std::fs::File::open(dir.path()).unwrap();
    ///
    /// assert!(RelPath::new("a/b").unwrap().open_dir_at(&root).is_ok());
    /// let err = RelPath::new("a/link").unwrap().open_dir_at(&root).unwrap_err();
    /// assert!(matches!(err, fsguard::OpenError::Symlink { .. }));
    /// ```
    pub fn open_dir_at(&self, root: impl AsFd) -> Result<OwnedFd, OpenError> {
        let root = root.as_fd();
        let mut walked = PathBuf::new();
        let mut cur: Option<OwnedFd> = None;
        let mut comps = self.components().peekable();
        while let Some(name) = comps.next() {
            walked.push(name);
            let base = cur.as_ref().map_or(root, |fd| fd.as_fd());
            let opened = if comps.peek().is_some() {
                sys::open_dir_walk(base, name)
            } else {
                sys::open_dir_child(base, name)
            };
            match opened {
                Ok(fd) => cur = Some(fd),
                Err(e) => return Err(OpenError::classify(e, base, name, walked)),
            }
        }
        match cur {
            Some(fd) => Ok(fd),
            None => sys::reopen_dir(root)
                .map_err(|e| OpenError::classify(e, root, OsStr::new("."), PathBuf::from("."))),
        }
    }

    /// Opens this path as a regular file for reading under `root`, one component at a time,
    /// never following a symbolic link (RUN-4). A FIFO, device, socket or directory is refused
    /// without blocking on it.
    pub fn open_file_at(&self, root: impl AsFd) -> Result<File, OpenError> {
        let (dir, name) = self.open_parent_at(root.as_fd())?;
        let component = self.as_path().to_path_buf();
        let fd = sys::open_file_child(dir.as_fd(), name)
            .map_err(|e| OpenError::classify(e, dir.as_fd(), name, component.clone()))?;
        let meta = sys::fstat(&fd).map_err(|source| OpenError::Io {
            component: component.clone(),
            source,
        })?;
        if meta.kind != Kind::File {
            return Err(OpenError::NotARegularFile { component });
        }
        sys::set_blocking(fd.as_fd()).map_err(|source| OpenError::Io { component, source })?;
        Ok(File::from(fd))
    }
}

impl fmt::Debug for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_path(), f)
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.as_path().display(), f)
    }
}

impl AsRef<Path> for RelPath {
    fn as_ref(&self) -> &Path {
        self.as_path()
    }
}

impl TryFrom<&str> for RelPath {
    type Error = RelPathError;
    fn try_from(s: &str) -> Result<RelPath, RelPathError> {
        RelPath::new(s)
    }
}

impl TryFrom<&Path> for RelPath {
    type Error = RelPathError;
    fn try_from(p: &Path) -> Result<RelPath, RelPathError> {
        RelPath::new(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expect: &str) {
        let got = match RelPath::new(input) {
            Ok(p) => format!("ok {}", p.as_path().display()),
            Err(e) => format!("err {e:?}"),
        };
        assert_eq!(got, expect, "input {input:?}");
    }

    #[test]
    fn validation_table() {
        check("a", "ok a");
        check("a/b/c.txt", "ok a/b/c.txt");
        check("./a//b/", "ok a/b");
        check(".", "ok .");
        check("./.", "ok .");
        check(".gitignore", "ok .gitignore");
        check(".github/x", "ok .github/x");
        check("a/.git2", "ok a/.git2");
        check("", "err Empty");
        check("/etc/passwd", "err Absolute { path: \"/etc/passwd\" }");
        check("a/../b", "err ParentDir { index: 1 }");
        check("..", "err ParentDir { index: 0 }");
        check("a/\0b", "err Nul { position: 2 }");
        check(".git", "err GitDir { component: \".git\" }");
        check("x/.GIT/config", "err GitDir { component: \".GIT\" }");
        check("x/.Git", "err GitDir { component: \".Git\" }");
        check(".git.", "err GitDir { component: \".git.\" }");
        check(".git ", "err GitDir { component: \".git \" }");
        check(
            ".g\u{200c}it",
            "err GitDir { component: \".g\\u{200c}it\" }",
        );
    }

    #[test]
    fn ten_thousand_components_are_refused_as_too_long() {
        let input = "a/".repeat(10_000);
        assert_eq!(
            RelPath::new(&input),
            Err(RelPathError::TooLong { len: 20_000 })
        );
    }

    #[test]
    fn component_of_256_bytes_is_refused_and_255_accepted() {
        assert!(RelPath::new("x".repeat(255)).is_ok());
        let err = RelPath::new(format!("a/{}", "y".repeat(256))).unwrap_err();
        assert!(matches!(
            err,
            RelPathError::ComponentTooLong { len: 256, .. }
        ));
    }

    #[test]
    fn non_utf8_names_are_kept_byte_for_byte() {
        let raw = OsStr::from_bytes(b"dir/\xff\xfe.txt");
        let p = RelPath::new(raw).unwrap();
        assert_eq!(p.as_path().as_os_str().as_bytes(), b"dir/\xff\xfe.txt");
        assert_eq!(p.file_name().unwrap().as_bytes(), b"\xff\xfe.txt");
    }

    #[test]
    fn parent_and_file_name_split_the_last_component() {
        let p = RelPath::new("a/b/c").unwrap();
        assert_eq!(p.parent().unwrap().as_path(), Path::new("a/b"));
        assert_eq!(p.file_name().unwrap(), "c");
        let one = RelPath::new("c").unwrap();
        assert!(one.parent().unwrap().is_root());
        assert!(RelPath::root().parent().is_none());
    }

    #[test]
    fn join_validates_the_new_component() {
        let p = RelPath::new("a").unwrap();
        assert_eq!(p.join("b").unwrap().as_path(), Path::new("a/b"));
        assert!(p.join(".GIT").is_err());
        assert!(p.join("..").is_err());
    }
}
