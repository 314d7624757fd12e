//! The macOS translation: a [`SandboxSpec`] becomes a `seatbelt::ProfileSpec`.
//!
//! Portable on purpose, so it is tested on Linux; the system locations (libraries, program
//! directories, sysctls) are the `seatbelt` crate's, not ours. On macOS, [`crate::run`] launches
//! `/usr/bin/sandbox-exec` with this profile (the `macos_run` module).

use seatbelt::{DotGit, Network as SbNetwork, Processes, ProfileSpec};

use crate::spec::{Access, Network, Program, SandboxSpec};

/// The Seatbelt profile input for `spec`. `.git` is denied for a single program (`run`, whose
/// mirror never contains one, RUN-7) and allowed for a shell (`command` works in the user's own
/// folder, where `git` is expected).
pub fn profile_spec(spec: &SandboxSpec) -> ProfileSpec {
    let (processes, dot_git) = match &spec.program {
        Program::Single(program) => (Processes::OnlyProgram(program.clone()), DotGit::Denied),
        Program::Shell => (Processes::Spawn, DotGit::Allowed),
    };
    let mut read_write = Vec::new();
    let mut read_only = Vec::new();
    for grant in &spec.grants {
        match grant.access {
            Access::ReadWrite => read_write.push(grant.path.clone()),
            Access::Read => read_only.push(grant.path.clone()),
        }
    }
    ProfileSpec {
        processes,
        read_write,
        read_only,
        network: match spec.network {
            Network::None => SbNetwork::Denied,
            Network::All => SbNetwork::Allowed,
        },
        dot_git,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Grant;
    use seatbelt::{Decision, Operation};
    use std::path::PathBuf;
    use std::sync::Arc;

    /// A grant on a path that need not exist here (the profile is built from paths): any
    /// descriptor stands in for the one a Mac would hold.
    fn grant(path: &str, access: Access) -> Grant {
        let fd = std::fs::File::open("/").unwrap();
        Grant::pinned(PathBuf::from(path), Arc::new(fd.into()), access)
    }

    #[test]
    fn run_spec_becomes_a_profile_that_denies_fork_git_and_home() {
        let spec = SandboxSpec {
            program: Program::Single("/usr/bin/wc".into()),
            grants: vec![
                grant("/Users/u/mirror", Access::ReadWrite),
                grant("/private/tmp/run", Access::ReadWrite),
            ],
            network: Network::None,
            hidden: vec![],
            protected: vec![],
            unix_sockets: true,
        };
        let bound = profile_spec(&spec).build().unwrap();
        let decide = |op, path: &str| bound.decide(op, path).unwrap();
        assert_eq!(
            decide(Operation::FileWriteData, "/Users/u/mirror/out.txt"),
            Decision::Allow
        );
        assert_eq!(
            decide(Operation::FileReadData, "/Users/u/mirror/.GIT/config"),
            Decision::Deny
        );
        assert_eq!(
            decide(Operation::FileReadData, "/Users/u/.ssh/id_rsa"),
            Decision::Deny
        );
        assert_eq!(decide(Operation::ProcessExec, "/bin/sh"), Decision::Deny);
        assert_eq!(
            decide(Operation::ProcessExec, "/usr/bin/wc"),
            Decision::Allow
        );
    }

    #[test]
    fn read_only_extra_paths_are_not_writable() {
        let spec = SandboxSpec {
            program: Program::Shell,
            grants: vec![
                grant("/Users/u/work", Access::ReadWrite),
                grant("/private/tmp/c", Access::ReadWrite),
                grant("/Users/u/ref", Access::Read),
            ],
            network: Network::None,
            hidden: vec![],
            protected: vec![],
            unix_sockets: true,
        };
        let bound = profile_spec(&spec).build().unwrap();
        let decide = |op, path: &str| bound.decide(op, path).unwrap();
        assert_eq!(
            decide(Operation::FileReadData, "/Users/u/ref/a"),
            Decision::Allow
        );
        assert_eq!(
            decide(Operation::FileWriteData, "/Users/u/ref/a"),
            Decision::Deny
        );
        assert_eq!(
            decide(Operation::FileWriteData, "/Users/u/work/a"),
            Decision::Allow
        );
        // Issue 16: an approved read-only toolchain runs (`~/.cargo/bin/cargo`), as on Linux.
        assert_eq!(
            decide(Operation::ProcessExec, "/Users/u/ref/bin/cargo"),
            Decision::Allow
        );
        assert_eq!(
            decide(Operation::ProcessExec, "/Users/u/elsewhere/tool"),
            Decision::Deny
        );
    }
}
