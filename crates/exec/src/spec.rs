//! `SandboxSpec`: what a command may touch, said once for every platform.
//!
//! A spec names the *user's* roots (the mirror or work scope, the call's temp dir, extra paths)
//! with an access level each, what kind of program runs (one fixed program that may not spawn,
//! or a shell that may), and whether the network is on. The system locations a program needs to
//! start — loader and libraries, program directories, `/etc` files — differ per platform, so
//! each backend adds its own: [`linux`](crate::linux) from ELF headers and a short list,
//! `seatbelt` from its profile constants. A spec holds paths as data, never profile or shell
//! text (invariant 6).

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fsguard::RootLease;

/// How much of a root the command may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// Read files, list directories and run the programs there (a read-only extra path holds
    /// an approved toolchain).
    Read,
    /// Read, create, modify, rename and delete beneath the root (never hard-link: CMD-9).
    ReadWrite,
}

/// Whether the command may use the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// No network (RUN-7, CMD-2).
    None,
    /// Unrestricted (reserved for argv-policy's `network: true`, RC-7).
    All,
}

/// What kind of program runs, which decides the system locations a backend adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// Exactly this program (absolute, symlinks resolved), which may start no other process
    /// (RUN-6, RUN-7): the backend adds only what its loader needs.
    Single(PathBuf),
    /// A shell and whatever system programs it starts (CMD-1, CMD-10): the backend adds the
    /// system's program and library directories read-only.
    Shell,
}

/// One root and what may be done beneath it: the file or directory a descriptor names,
/// opened when the root was validated (a root is never looked up by its path again,
/// so a path swapped for a symbolic link after validation changes nothing).
#[derive(Debug, Clone)]
pub struct Grant {
    /// The absolute path the root had when it was opened; names it in messages, and is what
    /// Seatbelt (path-based) is given on macOS.
    pub path: PathBuf,
    /// The access level.
    pub access: Access,
    /// The root itself.
    pub fd: Arc<OwnedFd>,
}

impl Grant {
    /// A grant on a descriptor the caller opened while validating `path`.
    pub fn pinned(path: impl Into<PathBuf>, fd: Arc<OwnedFd>, access: Access) -> Grant {
        Grant {
            path: path.into(),
            access,
            fd,
        }
    }

    /// A grant on the directory `lease` pins (its descriptor, duplicated).
    pub fn leased(lease: &RootLease, access: Access) -> Result<Grant, SpecError> {
        let fd = lease
            .as_fd()
            .try_clone_to_owned()
            .map_err(|source| SpecError::Open {
                path: lease.path().to_path_buf(),
                source,
            })?;
        Ok(Grant::pinned(lease.path(), Arc::new(fd), access))
    }

    /// Opens `path` now and grants on what it names. The path must be absolute and go through
    /// no symbolic link (pass the canonical path): a link anywhere on the way is refused
    /// (`ELOOP`), because whoever controls a link controls what the grant would name.
    pub fn open(path: &Path, access: Access) -> Result<Grant, SpecError> {
        use rustix::fs::{Mode, OFlags};
        let path = absolute(path)?;
        #[cfg(target_os = "linux")]
        let opened = rustix::fs::openat2(
            rustix::fs::CWD,
            &path,
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            rustix::fs::ResolveFlags::NO_SYMLINKS | rustix::fs::ResolveFlags::NO_MAGICLINKS,
        );
        #[cfg(not(target_os = "linux"))]
        let opened = rustix::fs::open(
            &path,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        );
        let fd = opened.map_err(|e| SpecError::Open {
            path: path.clone(),
            source: e.into(),
        })?;
        Ok(Grant::pinned(path, Arc::new(fd), access))
    }
}

/// What a sandboxed command may touch. Build one with [`SandboxSpec::for_run`] or
/// [`SandboxSpec::for_command`].
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// The program kind.
    pub program: Program,
    /// The user's roots and their access levels.
    pub grants: Vec<Grant>,
    /// Network access.
    pub network: Network,
    /// Paths the command must never see or change even where they lie beneath a root (the
    /// host's own state directory inside a workspace of `$HOME`; credential files
    /// and directories inside a granted `$HOME`, RCS-2): on Linux a directory is covered by an
    /// empty read-only directory and a file by an empty read-only file (reads find nothing,
    /// writes fail); where that cannot be done, the run is refused. Missing ones are ignored.
    pub hidden: Vec<PathBuf>,
    /// Paths (files or directories) that stay read-only even where they lie beneath a writable
    /// grant (RCS-3: `.git/hooks`, `.git/config`, shell startup files, the host's config);
    /// missing ones are ignored. On Linux a read-only bind of the path onto itself in the
    /// command's private mount namespace, the directories between the writable grant and it
    /// pinned so none can be renamed away and replaced; where no private mount namespace can
    /// be made and a protected path lies beneath a writable grant, the run is refused.
    pub protected: Vec<PathBuf>,
    /// Files with more than one link beneath a writable grant, or directories holding many of
    /// them (TRUST-3: a hard link into pnpm's or uv's store, a local clone's objects): read-only
    /// for what they are, so no other name of them changes through the command. On Linux a
    /// read-only bind of each (the directories above are not pinned: the inode matters, not
    /// the name); where no private mount namespace can be made the run is refused, as for a
    /// protected path. On macOS they are protected. A write is denied as
    /// [`Cause::HardLinked`](crate::denials::Cause::HardLinked).
    pub frozen: Vec<PathBuf>,
    /// Directories beneath a writable grant the command sees through a private copy
    /// (TRUST-1: a repository's git directory): whatever it creates, renames or writes there
    /// lands in the entry's `upper` directory, never in the directory, for the whole run; the
    /// caller applies what it accepts afterwards. On Linux an overlay in the command's private
    /// mount namespace; where it cannot be made the directory is read-only instead
    /// ([`Outcome::staged_read_only`](crate::Outcome::staged_read_only)), and where no private
    /// mount namespace can be made the run is refused, as for a protected path. On macOS the
    /// directory is protected (read-only).
    pub staged: Vec<Staged>,
    /// Where the caller found some of the paths of [`protected`](SandboxSpec::protected) and
    /// [`staged`](SandboxSpec::staged), by device and inode, each reached from its writable
    /// root without following a link. A path that resolves to another file when the sandbox is
    /// made (another process of the session swapped a directory on its way for a link) refuses
    /// the run: protecting or staging what the link leads to would leave the file found
    /// writable. Linux checks it; macOS's rules are paths.
    pub found_at: Vec<(PathBuf, (u64, u64))>,
    /// Whether unix sockets may be made where the platform can keep the host's out of reach
    /// (Linux: a view of the grants only). `false` when a grant may hold another program's
    /// listening socket (an approved extra path such as `/tmp`).
    pub unix_sockets: bool,
    /// The call's resource limits (LIM-1); the constructors set the tool's defaults.
    pub resources: crate::ResourceLimits,
    /// The call's temp dir (one of the writable grants, its `HOME` and `TMPDIR`), whose size
    /// [`resources`](SandboxSpec::resources) bounds; `None`: no temp dir to bound.
    pub temp_dir: Option<PathBuf>,
}

/// One directory of [`SandboxSpec::staged`]. `upper` and `work` are empty directories on one
/// filesystem, outside everything the command sees (the call's temp dir, which its own tmpfs
/// covers, holds them well); `through` are directories beneath `dir` that stay the real ones,
/// writable (a git directory's `objects`). All paths absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    /// The directory.
    pub dir: PathBuf,
    /// Where the command's changes land.
    pub upper: PathBuf,
    /// The overlay's scratch directory, beside `upper`.
    pub work: PathBuf,
    /// Directories beneath `dir` written through.
    pub through: Vec<PathBuf>,
}

/// Why a spec could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// A path that must be absolute was not.
    #[error("{0} is not an absolute path; pass the path from the root of the file system")]
    NotAbsolute(PathBuf),
    /// A root could not be opened.
    #[error("cannot open {}: {source}; pass an existing path", path.display())]
    Open {
        /// The path.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
}

fn absolute(path: &Path) -> Result<PathBuf, SpecError> {
    if path.is_absolute() {
        Ok(path.to_path_buf())
    } else {
        Err(SpecError::NotAbsolute(path.to_path_buf()))
    }
}

impl SandboxSpec {
    /// The `run` tool's spec (RUN-6, RUN-7): only `program` (already resolved to the real file,
    /// never looked up on `PATH`), read + write the mirror and the run's temp dir (both pinned
    /// by their leases), no network, no other process.
    pub fn for_run(
        program: &Path,
        mirror: &RootLease,
        temp: &RootLease,
    ) -> Result<Self, SpecError> {
        Ok(SandboxSpec {
            program: Program::Single(absolute(program)?),
            grants: vec![
                Grant::leased(mirror, Access::ReadWrite)?,
                Grant::leased(temp, Access::ReadWrite)?,
            ],
            network: Network::None,
            hidden: Vec::new(),
            protected: Vec::new(),
            frozen: Vec::new(),
            staged: Vec::new(),
            found_at: Vec::new(),
            unix_sockets: true,
            resources: crate::ResourceLimits::for_run(),
            temp_dir: Some(temp.path().to_path_buf()),
        })
    }

    /// The `command` tool's spec (CMD-2): read + write the work scope and the call's temp dir
    /// (both pinned by their leases), each extra path as granted (CMD-3), no network; the
    /// shell may start processes, which stay inside the same sandbox.
    pub fn for_command(
        scope: &RootLease,
        temp: &RootLease,
        extra: Vec<Grant>,
    ) -> Result<Self, SpecError> {
        let mut grants = vec![
            Grant::leased(scope, Access::ReadWrite)?,
            Grant::leased(temp, Access::ReadWrite)?,
        ];
        for grant in extra {
            absolute(&grant.path)?;
            grants.push(grant);
        }
        Ok(SandboxSpec {
            program: Program::Shell,
            grants,
            network: Network::None,
            hidden: Vec::new(),
            protected: Vec::new(),
            frozen: Vec::new(),
            staged: Vec::new(),
            found_at: Vec::new(),
            unix_sockets: true,
            resources: crate::ResourceLimits::for_command(),
            temp_dir: Some(temp.path().to_path_buf()),
        })
    }

    /// The `run_command` tool's spec (RC-7, RCS-2): a shell-kind program (it may start
    /// processes, which stay in the same sandbox) with exactly `grants` (the caller passes the
    /// working directory and the call's temp dir read + write, `$HOME` read, the caches and
    /// `write_paths` read + write), `network` as decided, no unix sockets. `hidden`,
    /// `protected` and `temp_dir` start empty: set the fields after.
    pub fn for_argv(grants: Vec<Grant>, network: Network) -> SandboxSpec {
        SandboxSpec {
            program: Program::Shell,
            grants,
            network,
            hidden: Vec::new(),
            protected: Vec::new(),
            frozen: Vec::new(),
            staged: Vec::new(),
            found_at: Vec::new(),
            unix_sockets: false,
            resources: crate::ResourceLimits::for_command(),
            temp_dir: None,
        }
    }

    /// Adds a path to [`hidden`](SandboxSpec::hidden).
    #[must_use]
    pub fn hide(mut self, path: impl Into<PathBuf>) -> Self {
        self.hidden.push(path.into());
        self
    }

    /// Whether the command may start other processes.
    pub fn may_spawn(&self) -> bool {
        matches!(self.program, Program::Shell)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs() -> (tempfile::TempDir, RootLease, RootLease) {
        let base = tempfile::tempdir().unwrap();
        for d in ["w", "t", "ro", "rw"] {
            std::fs::create_dir(base.path().join(d)).unwrap();
        }
        let w = RootLease::acquire(base.path().join("w")).unwrap();
        let t = RootLease::acquire(base.path().join("t")).unwrap();
        (base, w, t)
    }

    #[test]
    fn command_spec_rejects_a_relative_extra_path() {
        let (_base, w, t) = dirs();
        assert!(matches!(
            Grant::open(Path::new("rel"), Access::Read).unwrap_err(),
            SpecError::NotAbsolute(_)
        ));
        let fd = Arc::new(w.as_fd().try_clone_to_owned().unwrap());
        let err = SandboxSpec::for_command(&w, &t, vec![Grant::pinned("rel", fd, Access::Read)])
            .unwrap_err();
        assert!(matches!(err, SpecError::NotAbsolute(_)));
    }

    #[test]
    fn extra_paths_get_the_access_they_were_granted() {
        let (base, w, t) = dirs();
        let ro = base.path().join("ro");
        let rw = base.path().join("rw");
        let spec = SandboxSpec::for_command(
            &w,
            &t,
            vec![
                Grant::open(&ro, Access::Read).unwrap(),
                Grant::open(&rw, Access::ReadWrite).unwrap(),
            ],
        )
        .unwrap();
        let access = |p: &Path| spec.grants.iter().find(|g| g.path == p).map(|g| g.access);
        assert_eq!(access(&ro), Some(Access::Read));
        assert_eq!(access(&rw), Some(Access::ReadWrite));
        assert_eq!(access(w.path()), Some(Access::ReadWrite));
        assert!(spec.may_spawn());
        // A symbolic link on the way is refused.
        std::os::unix::fs::symlink(&rw, base.path().join("link")).unwrap();
        assert!(matches!(
            Grant::open(&base.path().join("link"), Access::Read),
            Err(SpecError::Open { .. })
        ));
    }

    #[test]
    fn a_leased_grant_names_the_leased_directory_even_after_the_path_is_swapped() {
        let (base, w, _t) = dirs();
        let grant = Grant::leased(&w, Access::ReadWrite).unwrap();
        // The path now names another directory; the grant still names the leased one.
        std::fs::rename(base.path().join("w"), base.path().join("gone")).unwrap();
        std::fs::rename(base.path().join("ro"), base.path().join("w")).unwrap();
        let held = rustix::fs::fstat(&*grant.fd).unwrap();
        let id = w.id();
        assert_eq!((held.st_dev, held.st_ino), (id.dev, id.ino));
    }

    #[test]
    fn argv_spec_is_a_shell_with_exactly_its_grants_and_no_unix_sockets() {
        let (base, w, _t) = dirs();
        let grants = vec![
            Grant::leased(&w, Access::ReadWrite).unwrap(),
            Grant::open(&base.path().join("ro"), Access::Read).unwrap(),
        ];
        for network in [Network::None, Network::All] {
            let spec = SandboxSpec::for_argv(grants.clone(), network);
            assert!(spec.may_spawn());
            assert_eq!(spec.network, network);
            assert!(!spec.unix_sockets);
            assert!(spec.hidden.is_empty() && spec.protected.is_empty());
            let paths: Vec<&Path> = spec.grants.iter().map(|g| g.path.as_path()).collect();
            assert_eq!(paths, [w.path(), base.path().join("ro").as_path()]);
        }
    }

    #[test]
    fn run_spec_is_one_program_without_spawn_or_network() {
        let (_base, m, t) = dirs();
        let spec = SandboxSpec::for_run(Path::new("/usr/bin/wc"), &m, &t).unwrap();
        assert!(!spec.may_spawn());
        assert_eq!(spec.network, Network::None);
        assert_eq!(spec.grants.len(), 2);
        assert!(SandboxSpec::for_run(Path::new("wc"), &m, &t).is_err());
    }
}
