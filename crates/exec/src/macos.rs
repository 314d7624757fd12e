//! The macOS translation: a [`SandboxSpec`] becomes a `seatbelt::ProfileSpec`.
//!
//! Portable on purpose, so it is tested on Linux; the system locations (libraries, program
//! directories, sysctls) are the `seatbelt` crate's, not ours. On macOS, [`crate::run`] launches
//! `/usr/bin/sandbox-exec` with this profile (the `macos_run` module).

use std::path::PathBuf;

use seatbelt::{BoundProfile, DotGit, Network as SbNetwork, Processes, ProfileSpec, SpecError};

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

/// The bound Seatbelt profile for `spec`: [`profile_spec`] plus its `hidden` paths denied
/// altogether and its `protected` paths never written, after every allow (RCS-2, RCS-3). A
/// hidden path inside a writable grant is passed as protected too, which keeps the directories
/// between the grant and it from being removed or renamed: Seatbelt matches paths, so moving
/// a parent away would otherwise take the path out from under its deny.
pub fn bound_profile(spec: &SandboxSpec) -> Result<BoundProfile, SpecError> {
    // No overlay here: a staged directory is protected (read-only) instead.
    let mut protected: Vec<PathBuf> = spec.protected.clone();
    protected.extend(spec.frozen.iter().cloned());
    protected.extend(spec.staged.iter().map(|s| s.dir.clone()));
    for hidden in &spec.hidden {
        let in_writable = spec
            .grants
            .iter()
            .any(|g| g.access == Access::ReadWrite && hidden.starts_with(&g.path));
        if in_writable && !protected.contains(hidden) {
            protected.push(hidden.clone());
        }
    }
    profile_spec(spec).build_with_denies(&spec.hidden, &protected)
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
            frozen: vec![],
            staged: Vec::new(),
            found_at: Vec::new(),
            unix_sockets: true,
            resources: crate::ResourceLimits::for_command(),
            temp_dir: None,
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
    fn the_argv_spec_hides_private_paths_and_protects_repository_files() {
        let mut spec = SandboxSpec::for_argv(
            vec![
                grant("/Users/u/proj", Access::ReadWrite),
                grant("/private/tmp/call", Access::ReadWrite),
                grant("/Users/u", Access::Read),
                grant("/Users/u/.cache", Access::ReadWrite),
            ],
            Network::None,
        );
        spec.hidden = vec![
            PathBuf::from("/Users/u/.ssh"),
            PathBuf::from("/Users/u/.netrc"),
            PathBuf::from("/Users/u/proj/sub/.env"),
        ];
        spec.protected = vec![
            PathBuf::from("/Users/u/proj/.git/hooks"),
            PathBuf::from("/Users/u/proj/.git/config"),
        ];
        let bound = bound_profile(&spec).unwrap();
        let decide = |op, path: &str| bound.decide(op, path).unwrap();
        use Decision::{Allow, Deny};
        for (op, path, want) in [
            (Operation::FileReadData, "/Users/u/notes", Allow),
            (Operation::FileReadData, "/Users/u/.ssh/id_ed25519", Deny),
            (Operation::FileReadData, "/Users/u/.netrc", Deny),
            (Operation::FileReadData, "/Users/u/proj/sub/.env", Deny),
            (Operation::FileWriteData, "/Users/u/proj/out", Allow),
            (Operation::FileWriteData, "/Users/u/.cache/x", Allow),
            (Operation::FileWriteData, "/Users/u/evil", Deny),
            (Operation::FileWriteData, "/Users/u/proj/.git/config", Deny),
            (
                Operation::FileWriteCreate,
                "/Users/u/proj/.git/hooks/pre-commit",
                Deny,
            ),
            (Operation::FileReadData, "/Users/u/proj/.git/config", Allow),
            (Operation::FileWriteData, "/Users/u/proj/.git/index", Allow),
            // Neither a protected path's nor a hidden one's directories move away.
            (Operation::FileWriteUnlink, "/Users/u/proj/.git", Deny),
            (Operation::FileWriteUnlink, "/Users/u/proj/sub", Deny),
            (Operation::FileWriteUnlink, "/Users/u/proj/other", Allow),
        ] {
            assert_eq!(decide(op, path), want, "{op:?} {path}");
        }
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
            frozen: vec![],
            staged: Vec::new(),
            found_at: Vec::new(),
            unix_sockets: true,
            resources: crate::ResourceLimits::for_command(),
            temp_dir: None,
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
        // An approved read-only toolchain runs (`~/.cargo/bin/cargo`), as on Linux.
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
