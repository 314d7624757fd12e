//! Single-link file access on one descriptor (FILE-1) and text classification (FILE-3).

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::path::PathBuf;

use crate::lease::FileId;
use crate::relpath::{OpenError, RelPath};
use crate::sys::{self, Meta};

/// The size above which a file is not read as text (FILE-3): 1 MiB.
pub const MAX_TEXT_BYTES: u64 = 1024 * 1024;

/// Why a checked open or read refused (FILE-1).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// Walking to the file failed (symlink, missing, not a regular file, denied…).
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The file has more than one name; reading or editing it could reach outside the scope.
    #[error("`{}` has {links} hard links; only files with exactly one link are accessible, copy it to a new file first", path.display())]
    HardLinked {
        /// The path as given.
        path: PathBuf,
        /// Its link count.
        links: u64,
    },
    /// The file is larger than the caller's limit.
    #[error("`{}` is {size} bytes, over the limit of {limit}", path.display())]
    TooLarge {
        /// The path as given.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The limit it passed.
        limit: u64,
    },
    /// Its link count, size or timestamps changed while it was being read.
    #[error("`{}` changed while it was being read; try again once it is quiet", path.display())]
    Changed {
        /// The path as given.
        path: PathBuf,
    },
    /// A read or `fstat` failed.
    #[error("cannot read `{}`: {source}", path.display())]
    Io {
        /// The path as given.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
}

/// A regular file with exactly one link, open for reading, and the state it had when opened.
#[derive(Debug)]
pub struct CheckedFile {
    file: File,
    path: PathBuf,
    meta: Meta,
}

/// Opens `path` under `root` (no symlink on the way, see [`RelPath::open_file_at`]) and checks,
/// with `fstat` on the very descriptor that will be read, that it is a regular file with exactly
/// one link (FILE-1).
///
/// ```
/// use fsguard::{open_checked, CheckError, RelPath};
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("a.txt"), "hi").unwrap();
/// std::fs::hard_link(dir.path().join("a.txt"), dir.path().join("b.txt")).unwrap();
/// let root = std::fs::File::open(dir.path()).unwrap();
///
/// let err = open_checked(&root, &RelPath::new("a.txt").unwrap()).unwrap_err();
/// assert!(matches!(err, CheckError::HardLinked { links: 2, .. }));
/// ```
pub fn open_checked(root: impl AsFd, path: &RelPath) -> Result<CheckedFile, CheckError> {
    let file = path.open_file_at(root)?;
    let shown = path.as_path().to_path_buf();
    let meta = sys::fstat(&file).map_err(|source| CheckError::Io {
        path: shown.clone(),
        source,
    })?;
    if meta.nlink != 1 {
        return Err(CheckError::HardLinked {
            path: shown,
            links: meta.nlink,
        });
    }
    Ok(CheckedFile {
        file,
        path: shown,
        meta,
    })
}

/// [`open_checked`], read at most `limit` bytes, then [`CheckedFile::read_to_end`]'s re-check.
///
/// ```
/// use fsguard::{read_checked, RelPath};
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("a.txt"), "hello").unwrap();
/// let root = std::fs::File::open(dir.path()).unwrap();
/// let bytes = read_checked(&root, &RelPath::new("a.txt").unwrap(), 1024).unwrap();
/// assert_eq!(bytes, b"hello");
/// ```
pub fn read_checked(root: impl AsFd, path: &RelPath, limit: u64) -> Result<Vec<u8>, CheckError> {
    open_checked(root, path)?.read_to_end(limit)
}

impl CheckedFile {
    /// The size `fstat` reported at open time.
    pub fn size(&self) -> u64 {
        self.meta.size
    }

    /// The permission bits (`0o7777`) at open time.
    pub fn mode(&self) -> u32 {
        self.meta.mode
    }

    /// The file's identity.
    pub fn id(&self) -> FileId {
        FileId {
            dev: self.meta.dev,
            ino: self.meta.ino,
        }
    }

    /// Reads the whole file, refusing one over `limit` bytes, then `fstat`s the same descriptor
    /// again: the link count must still be 1 and size, mtime and ctime unchanged (FILE-1), so a
    /// hard link made or content swapped during the read is caught.
    pub fn read_to_end(mut self, limit: u64) -> Result<Vec<u8>, CheckError> {
        if self.meta.size > limit {
            return Err(CheckError::TooLarge {
                path: self.path,
                size: self.meta.size,
                limit,
            });
        }
        let expected = usize::try_from(self.meta.size).unwrap_or(usize::MAX);
        let mut buf = Vec::with_capacity(expected);
        // One byte past the limit tells a file that grew since the fstat from one that did not.
        (&mut self.file)
            .take(limit.saturating_add(1))
            .read_to_end(&mut buf)
            .map_err(|source| CheckError::Io {
                path: self.path.clone(),
                source,
            })?;
        let after = sys::fstat(&self.file).map_err(|source| CheckError::Io {
            path: self.path.clone(),
            source,
        })?;
        if after.nlink != 1 {
            return Err(CheckError::HardLinked {
                path: self.path,
                links: after.nlink,
            });
        }
        let unchanged = after.size == self.meta.size
            && after.mtime == self.meta.mtime
            && after.ctime == self.meta.ctime
            && buf.len() as u64 == self.meta.size;
        if !unchanged {
            return Err(CheckError::Changed { path: self.path });
        }
        Ok(buf)
    }

    /// The open file, for callers that read it their own way; they lose the after-read check.
    pub fn into_file(self) -> File {
        self.file
    }
}

/// What a text search makes of a file (FILE-3).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TextFile {
    /// Valid UTF-8 without NUL bytes, at most [`MAX_TEXT_BYTES`].
    Text(String),
    /// Larger than [`MAX_TEXT_BYTES`]: passed over, the search reports `truncated`.
    TooLarge {
        /// Its size in bytes.
        size: u64,
    },
    /// Not readable (permission denied): passed over, the search reports `truncated`.
    Denied,
    /// Contains a NUL byte or is not UTF-8: outside text search, skipped without truncation.
    Binary,
}

impl TextFile {
    /// Classifies bytes already read (FILE-3). The size limit applies here too.
    ///
    /// ```
    /// use fsguard::TextFile;
    /// assert_eq!(TextFile::classify(b"a\n".to_vec()), TextFile::Text("a\n".into()));
    /// assert_eq!(TextFile::classify(b"a\0b".to_vec()), TextFile::Binary);
    /// assert_eq!(TextFile::classify(vec![0xff]), TextFile::Binary);
    /// ```
    pub fn classify(bytes: Vec<u8>) -> TextFile {
        if bytes.len() as u64 > MAX_TEXT_BYTES {
            return TextFile::TooLarge {
                size: bytes.len() as u64,
            };
        }
        if bytes.contains(&0) {
            return TextFile::Binary;
        }
        match String::from_utf8(bytes) {
            Ok(s) => TextFile::Text(s),
            Err(_) => TextFile::Binary,
        }
    }

    /// True when passing over this file must make a search report `truncated: true` (FILE-3):
    /// a skipped large or unreadable file is not "no match".
    pub fn marks_truncation(&self) -> bool {
        matches!(self, TextFile::TooLarge { .. } | TextFile::Denied)
    }
}

/// Reads `path` under `root` with the single-link checks of [`read_checked`] and classifies it
/// (FILE-3). Permission denied on the file or a directory on the way is [`TextFile::Denied`], a
/// file over 1 MiB is [`TextFile::TooLarge`] (not read); every other refusal is an error.
///
/// ```
/// use fsguard::{read_text, RelPath, TextFile};
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("big"), vec![b'a'; 2 << 20]).unwrap();
/// let root = std::fs::File::open(dir.path()).unwrap();
/// let got = read_text(&root, &RelPath::new("big").unwrap()).unwrap();
/// assert!(got.marks_truncation());
/// ```
pub fn read_text(root: impl AsFd, path: &RelPath) -> Result<TextFile, CheckError> {
    let file = match open_checked(root, path) {
        Ok(f) => f,
        Err(CheckError::Open(OpenError::PermissionDenied { .. })) => return Ok(TextFile::Denied),
        Err(e) => return Err(e),
    };
    match file.read_to_end(MAX_TEXT_BYTES) {
        Ok(bytes) => Ok(TextFile::classify(bytes)),
        Err(CheckError::TooLarge { size, .. }) => Ok(TextFile::TooLarge { size }),
        Err(e) => Err(e),
    }
}
