//! `SandboxSpec`: what a command may touch, said once for every platform.
//!
//! A spec names the *user's* roots (the mirror or work scope, the call's temp dir, extra paths)
//! with an access level each, what kind of program runs (one fixed program that may not spawn,
//! or a shell that may), and whether the network is on. The system locations a program needs to
//! start — loader and libraries, program directories, `/etc` files — differ per platform, so
//! each backend adds its own: [`linux`](crate::linux) from ELF headers and a short list,
//! `seatbelt` from its profile constants. A spec holds paths as data, never profile or shell
//! text (DESIGN invariant 6).

use std::path::{Path, PathBuf};

/// How much of a root the command may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// Read files and list directories.
    Read,
    /// Read, create, modify, rename and delete beneath the root (never hard-link: CMD-9).
    ReadWrite,
}

/// Whether the command may use the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// No network (RUN-7, CMD-2).
    None,
    /// Unrestricted (reserved for argv-tools' `network: true`, RC-7).
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

/// One root and what may be done beneath it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// An absolute path; a directory covers everything beneath it.
    pub path: PathBuf,
    /// The access level.
    pub access: Access,
}

/// What a sandboxed command may touch. Build one with [`SandboxSpec::for_run`] or
/// [`SandboxSpec::for_command`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSpec {
    /// The program kind.
    pub program: Program,
    /// The user's roots and their access levels.
    pub grants: Vec<Grant>,
    /// Network access.
    pub network: Network,
}

/// Why a spec could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// A path that must be absolute was not.
    #[error("{0} is not an absolute path; pass the path from the root of the file system")]
    NotAbsolute(PathBuf),
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
    /// never looked up on `PATH`), read + write the mirror and the run's temp dir, no network,
    /// no other process.
    pub fn for_run(program: &Path, mirror: &Path, temp: &Path) -> Result<Self, SpecError> {
        Ok(SandboxSpec {
            program: Program::Single(absolute(program)?),
            grants: vec![
                Grant {
                    path: absolute(mirror)?,
                    access: Access::ReadWrite,
                },
                Grant {
                    path: absolute(temp)?,
                    access: Access::ReadWrite,
                },
            ],
            network: Network::None,
        })
    }

    /// The `command` tool's spec (CMD-2): read + write the work scope and the call's temp dir,
    /// each extra path as granted (`(path, writable)`, CMD-3), no network; the shell may start
    /// processes, which stay inside the same sandbox.
    pub fn for_command(
        scope: &Path,
        temp: &Path,
        extra: &[(PathBuf, bool)],
    ) -> Result<Self, SpecError> {
        let mut grants = vec![
            Grant {
                path: absolute(scope)?,
                access: Access::ReadWrite,
            },
            Grant {
                path: absolute(temp)?,
                access: Access::ReadWrite,
            },
        ];
        for (path, writable) in extra {
            grants.push(Grant {
                path: absolute(path)?,
                access: if *writable {
                    Access::ReadWrite
                } else {
                    Access::Read
                },
            });
        }
        Ok(SandboxSpec {
            program: Program::Shell,
            grants,
            network: Network::None,
        })
    }

    /// Whether the command may start other processes.
    pub fn may_spawn(&self) -> bool {
        matches!(self.program, Program::Shell)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_spec_rejects_a_relative_extra_path() {
        let err = SandboxSpec::for_command(
            Path::new("/w"),
            Path::new("/t"),
            &[(PathBuf::from("rel"), false)],
        )
        .unwrap_err();
        assert!(matches!(err, SpecError::NotAbsolute(_)));
    }

    #[test]
    fn extra_paths_get_the_access_they_were_granted() {
        let spec = SandboxSpec::for_command(
            Path::new("/w"),
            Path::new("/t"),
            &[(PathBuf::from("/ro"), false), (PathBuf::from("/rw"), true)],
        )
        .unwrap();
        let access = |p: &str| {
            spec.grants
                .iter()
                .find(|g| g.path == Path::new(p))
                .map(|g| g.access)
        };
        assert_eq!(access("/ro"), Some(Access::Read));
        assert_eq!(access("/rw"), Some(Access::ReadWrite));
        assert_eq!(access("/w"), Some(Access::ReadWrite));
        assert!(spec.may_spawn());
    }

    #[test]
    fn run_spec_is_one_program_without_spawn_or_network() {
        let spec = SandboxSpec::for_run(Path::new("/usr/bin/wc"), Path::new("/m"), Path::new("/t"))
            .unwrap();
        assert!(!spec.may_spawn());
        assert_eq!(spec.network, Network::None);
        assert_eq!(spec.grants.len(), 2);
        assert!(SandboxSpec::for_run(Path::new("wc"), Path::new("/m"), Path::new("/t")).is_err());
    }
}
