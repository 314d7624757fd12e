//! Why a policy allows or denies one access: [`Policy::explain`], the policy's own answer to
//! "may the program read (write, execute) this path, and which rule decides?" (SPEC LIVE-4).
//!
//! **Owns:** replaying the policy's path rules the way Landlock applies them — a rule is bound
//! to the inode its path resolved to, and an access is allowed when a rule on the file or on
//! one of its ancestor directories grants it — against the host's file system *now*, plus the
//! policy's hidden paths, the single program of a `run` policy and the interpreters
//! [`Policy::prepare`] adds for executables.
//!
//! **Refuses:** to guess. Whenever the answer is not the one the policy would give, it says
//! [`Explanation::Unknown`] and callers must claim nothing:
//! - a relative path (the program's working directory is the caller's to apply), a path whose
//!   `..` or missing components cannot be resolved, a dangling symbolic link (the kernel would
//!   create its target, wherever that is), a path the host itself cannot resolve;
//! - pseudo file systems the sandbox may replace in the program's own mount view (`/proc`,
//!   `/dev/shm`, `/dev/pts`): the host's inodes there are not the program's.
//!
//! **How paths are resolved.** The path is resolved on the host with symbolic links followed
//! (`realpath`), as the kernel resolves it for `open` and `execve`, and each directory of the
//! *resolved* path is compared by device and inode with the rules' files — never by the text of
//! the path. So a symbolic link inside a grant that points outside is outside, and one outside
//! that points into a grant is inside: the answer is about the file the kernel would reach, not
//! the name that led there. A missing file is answered by its nearest existing directory
//! (creating needs `WRITE` there; a file that existed when the program failed and is gone now
//! was covered by the same directories).
//!
//! **Assumptions.** The program sees the host's file system under the same names (true of the
//! private mount view of `isolate`, which only covers hidden paths and remounts read-only), and
//! nothing changed between the program's access and the explanation. A change in between can
//! only make the answer stale, which is why callers explain right after the program ends and
//! before its temp dir goes.

use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use crate::interp;
use crate::policy::{Access, Policy, Spawn};

/// What the policy says about one access to one path.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Explanation {
    /// The policy allows it; `rule` is the nearest grant that does (the file's own, or its
    /// closest directory's).
    Allowed {
        /// The grant's path as the policy names it.
        rule: PathBuf,
        /// Whether the grant is a fixed system location ([`Policy::allow_system`]).
        system: bool,
    },
    /// The policy denies it, and why.
    Denied(Denial),
    /// The policy's answer cannot be told from here (see the module docs); claim nothing.
    Unknown(&'static str),
}

/// Why the policy denies an access.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Denial {
    /// A grant covers the path but gives other rights only (writing beneath a read-only grant,
    /// executing from a read-write one).
    NotGranted {
        /// The nearest covering grant.
        rule: PathBuf,
        /// Whether it is a fixed system location.
        system: bool,
        /// The rights all covering grants give together.
        granted: Access,
    },
    /// The path lies in a hidden directory (the host's own state, [`Policy::hide`]).
    Hidden {
        /// The hidden directory.
        hidden: PathBuf,
    },
    /// No grant covers the path.
    Outside {
        /// The nearest directory above the path that holds system grants (`/etc` for
        /// `/etc/shadow`: the system runtime takes some of its entries, not this one); `None`
        /// when the path is nowhere near the system runtime (`/home/u/.ssh/id_rsa`).
        system_area: Option<PathBuf>,
        /// Whether the file's mode lets every user read it; `None` for a missing file.
        world_readable: Option<bool>,
    },
    /// A single-program policy executes its program (and its loader) only.
    NotTheProgram {
        /// The one executable.
        program: PathBuf,
    },
}

/// One grant as the explainer compares it: the inode its path resolves to now.
#[derive(Debug, Clone)]
struct Grant {
    dev: u64,
    ino: u64,
    access: Access,
    path: PathBuf,
    system: bool,
}

/// A policy's rules resolved once, to explain many accesses (a command's output can name up
/// to a few dozen paths). Built by [`Policy::explainer`].
#[derive(Debug, Clone)]
pub struct Explainer {
    grants: Vec<Grant>,
    hidden: Vec<(u64, u64, PathBuf)>,
    /// Canonical parents (other than `/`) of the system grants: `/etc` of `/etc/passwd`.
    system_areas: Vec<PathBuf>,
    program: Option<PathBuf>,
}

/// Pseudo file systems the sandbox may replace in the program's view (module docs).
const PRIVATE_VIEWS: &[&str] = &["/proc", "/dev/shm", "/dev/pts"];

impl Policy {
    /// What this policy says about `access` to the absolute `path` (see the module docs of
    /// `explain` for how the path is resolved). `access` asks for all of its rights together.
    ///
    /// ```
    /// use linux_sandbox::{Access, Explanation, Policy};
    ///
    /// let policy = Policy::new().allow_system("/usr", Access::READ | Access::EXECUTE);
    /// assert!(matches!(
    ///     policy.explain("/usr/bin/env", Access::READ),
    ///     Explanation::Allowed { system: true, .. }
    /// ));
    /// assert!(matches!(policy.explain("/usr/bin/env", Access::WRITE), Explanation::Denied(_)));
    /// assert!(matches!(policy.explain("usr/bin", Access::READ), Explanation::Unknown(_)));
    /// ```
    pub fn explain(&self, path: impl AsRef<Path>, access: Access) -> Explanation {
        self.explainer().explain(path.as_ref(), access)
    }

    /// The rules resolved once, for several [`explain`](Explainer::explain) calls.
    pub fn explainer(&self) -> Explainer {
        let mut grants = Vec::with_capacity(self.rules.len() + 2);
        let mut system_areas = Vec::new();
        for rule in &self.rules {
            let id = match &rule.fd {
                Some(fd) => rustix::fs::fstat(&**fd)
                    .ok()
                    .map(|s| (s.st_dev, s.st_ino, is_dir_mode(s.st_mode))),
                None => std::fs::metadata(&rule.path)
                    .ok()
                    .map(|m| (m.dev(), m.ino(), m.is_dir())),
            };
            let Some((dev, ino, is_dir)) = id else {
                continue;
            };
            grants.push(Grant {
                dev,
                ino,
                access: rule.access,
                path: rule.path.clone(),
                system: rule.system,
            });
            if rule.system {
                if let Some(parent) = std::fs::canonicalize(&rule.path)
                    .ok()
                    .and_then(|c| c.parent().map(Path::to_path_buf))
                    .filter(|p| p.parent().is_some())
                {
                    if !system_areas.contains(&parent) {
                        system_areas.push(parent);
                    }
                }
            }
            // `prepare` grants the interpreters of executable files (ELF loader, `#!` line).
            if rule.access.contains(Access::EXECUTE) && !is_dir {
                interpreters(&rule.path, &mut grants);
            }
        }
        let program = match &self.spawn {
            Spawn::Denied { program } => {
                if let Ok(m) = std::fs::metadata(program) {
                    grants.push(Grant {
                        dev: m.dev(),
                        ino: m.ino(),
                        access: Access::READ | Access::EXECUTE,
                        path: program.clone(),
                        system: false,
                    });
                    interpreters(program, &mut grants);
                }
                Some(program.clone())
            }
            Spawn::Allowed => None,
        };
        let hidden = self
            .hidden
            .iter()
            .filter_map(|h| {
                let m = std::fs::metadata(h).ok()?;
                Some((m.dev(), m.ino(), h.clone()))
            })
            .collect();
        Explainer {
            grants,
            hidden,
            system_areas,
            program,
        }
    }
}

impl Explainer {
    /// What the policy says about `access` to the absolute `path`; see [`Policy::explain`].
    pub fn explain(&self, path: &Path, access: Access) -> Explanation {
        if access.is_empty() {
            return Explanation::Unknown("no access was asked about");
        }
        let (resolved, exists) = match resolve(path) {
            Ok(r) => r,
            Err(why) => return Explanation::Unknown(why),
        };
        // The directories Landlock walks for this access, innermost first, as inodes.
        let mut chain = Vec::new();
        for dir in resolved.ancestors() {
            match std::fs::metadata(dir) {
                Ok(m) => chain.push((m.dev(), m.ino())),
                Err(_) => return Explanation::Unknown("a directory of the path cannot be read"),
            }
        }
        let target = if exists {
            std::fs::metadata(&resolved).ok()
        } else {
            None
        };
        let is_file = target.as_ref().is_some_and(|m| !m.is_dir());

        let mut granted = Access::empty();
        let mut nearest: Option<&Grant> = None;
        let mut first_rule_at = None;
        for (depth, id) in chain.iter().enumerate() {
            for g in self.grants.iter().filter(|g| (g.dev, g.ino) == *id) {
                granted |= g.access;
                if nearest.is_none() {
                    nearest = Some(g);
                    first_rule_at = Some(depth);
                }
            }
        }
        // Hidden beneath a grant: a hidden directory nearer than every covering grant. Landlock
        // would allow it; the private mount view covers it (`isolate`).
        let hidden_at = chain.iter().enumerate().find_map(|(depth, id)| {
            self.hidden
                .iter()
                .find(|(dev, ino, _)| (*dev, *ino) == *id)
                .map(|(_, _, p)| (depth, p))
        });
        if let (Some((h, hidden)), Some(r)) = (hidden_at, first_rule_at) {
            if h < r {
                return Explanation::Denied(Denial::Hidden {
                    hidden: hidden.clone(),
                });
            }
        }
        // Landlock's EXECUTE grant includes reading the file (the kernel reads what it runs).
        let effective = if is_file && granted.contains(Access::EXECUTE) {
            granted | Access::READ
        } else {
            granted
        };
        if effective.contains(access) {
            if let Some(g) = nearest {
                return Explanation::Allowed {
                    rule: g.path.clone(),
                    system: g.system,
                };
            }
        }
        if PRIVATE_VIEWS
            .iter()
            .any(|v| resolved.starts_with(v) || path.starts_with(v))
        {
            return Explanation::Unknown("the sandbox may give the program its own view there");
        }
        if access.contains(Access::EXECUTE) {
            if let Some(program) = &self.program {
                return Explanation::Denied(Denial::NotTheProgram {
                    program: program.clone(),
                });
            }
        }
        if let Some(g) = nearest {
            return Explanation::Denied(Denial::NotGranted {
                rule: g.path.clone(),
                system: g.system,
                granted: effective,
            });
        }
        let system_area = self
            .system_areas
            .iter()
            .filter(|a| resolved.starts_with(a))
            .max_by_key(|a| a.components().count())
            .cloned();
        Explanation::Denied(Denial::Outside {
            system_area,
            world_readable: target.map(|m| m.mode() & 0o004 != 0),
        })
    }
}

/// The path the kernel reaches, symbolic links followed: the file itself (`true`) or, for a
/// missing file, its nearest existing directory (`false`). Refuses what it cannot resolve the
/// kernel's way.
fn resolve(path: &Path) -> Result<(PathBuf, bool), &'static str> {
    if !path.is_absolute() {
        return Err("the path is relative");
    }
    let mut current = path;
    let mut missing = 0usize;
    loop {
        match std::fs::canonicalize(current) {
            Ok(resolved) => return Ok((resolved, missing == 0)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A name that exists but does not resolve is a dangling link (or a loop).
                if std::fs::symlink_metadata(current).is_ok() {
                    return Err("the path is a dangling symbolic link");
                }
                if !matches!(current.components().next_back(), Some(Component::Normal(_))) {
                    return Err("the path has `.` or `..` after a missing directory");
                }
                match current.parent() {
                    Some(parent) => current = parent,
                    None => return Err("the path does not resolve"),
                }
                missing += 1;
            }
            Err(_) => return Err("the host cannot resolve the path"),
        }
    }
}

/// Adds the interpreter chain `execve(program)` opens, as `prepare` grants it.
fn interpreters(program: &Path, out: &mut Vec<Grant>) {
    let mut current = program.to_path_buf();
    // The kernel follows at most 4 levels of interpreters (BINPRM_MAX_RECURSION).
    for _ in 0..4 {
        let Ok(Some(next)) = interp::interpreter(&current) else {
            return;
        };
        let Ok(m) = std::fs::metadata(&next) else {
            return;
        };
        out.push(Grant {
            dev: m.dev(),
            ino: m.ino(),
            access: Access::READ | Access::EXECUTE,
            path: next.clone(),
            system: false,
        });
        current = next;
    }
}

fn is_dir_mode(mode: u32) -> bool {
    mode & libc::S_IFMT == libc::S_IFDIR
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        for d in ["work/sub", "ro", "out", "work/.state"] {
            std::fs::create_dir_all(t.path().join(d)).unwrap();
        }
        for f in ["work/a.txt", "ro/lib.txt", "out/secret"] {
            std::fs::write(t.path().join(f), "x").unwrap();
        }
        t
    }

    fn policy(t: &Path) -> Policy {
        Policy::new()
            .allow_system("/usr", Access::READ | Access::EXECUTE)
            .allow_system("/etc/passwd", Access::READ)
            .allow(t.join("work"), Access::READ | Access::WRITE)
            .allow(t.join("ro"), Access::READ | Access::EXECUTE)
            .hide(t.join("work/.state"))
    }

    fn denied(e: Explanation) -> Denial {
        match e {
            Explanation::Denied(d) => d,
            other => panic!("expected a denial, got {other:?}"),
        }
    }

    #[test]
    fn a_grant_allows_what_it_grants_and_names_itself() {
        let t = tree();
        let p = policy(t.path());
        for access in [Access::READ, Access::WRITE] {
            assert_eq!(
                p.explain(t.path().join("work/a.txt"), access),
                Explanation::Allowed {
                    rule: t.path().join("work"),
                    system: false
                }
            );
        }
        // A new file is created in a writable directory.
        assert!(matches!(
            p.explain(t.path().join("work/sub/new.txt"), Access::WRITE),
            Explanation::Allowed { .. }
        ));
        // A read-write grant does not execute.
        assert!(matches!(
            denied(p.explain(t.path().join("work/a.txt"), Access::EXECUTE)),
            Denial::NotGranted { system: false, .. }
        ));
    }

    #[test]
    fn a_read_only_grant_refuses_writes_and_creation() {
        let t = tree();
        let p = policy(t.path());
        for path in ["ro/lib.txt", "ro/new.txt"] {
            assert_eq!(
                denied(p.explain(t.path().join(path), Access::WRITE)),
                Denial::NotGranted {
                    rule: t.path().join("ro"),
                    system: false,
                    granted: Access::READ | Access::EXECUTE
                },
                "{path}"
            );
        }
    }

    #[test]
    fn system_locations_are_allowed_read_only_and_their_neighbours_are_near_the_system() {
        let t = tree();
        let p = policy(t.path());
        assert!(matches!(
            p.explain("/usr/bin/env", Access::EXECUTE),
            Explanation::Allowed { system: true, .. }
        ));
        assert!(matches!(
            denied(p.explain("/usr/bin/env", Access::WRITE)),
            Denial::NotGranted { system: true, .. }
        ));
        assert!(matches!(
            p.explain("/etc/passwd", Access::READ),
            Explanation::Allowed { system: true, .. }
        ));
        // /etc/shadow: a neighbour of a system grant, readable by root only.
        if Path::new("/etc/shadow").exists() {
            assert_eq!(
                denied(p.explain("/etc/shadow", Access::READ)),
                Denial::Outside {
                    system_area: Some("/etc".into()),
                    world_readable: Some(false)
                }
            );
        }
        // Creating a file in /etc: its directory is not granted.
        assert!(matches!(
            denied(p.explain("/etc/agent-exec-new", Access::WRITE)),
            Denial::Outside {
                world_readable: None,
                ..
            }
        ));
    }

    #[test]
    fn a_path_outside_every_grant_is_outside_and_not_near_the_system() {
        let t = tree();
        let p = policy(t.path());
        let secret = t.path().join("out/secret");
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            denied(p.explain(&secret, Access::READ)),
            Denial::Outside {
                system_area: None,
                world_readable: Some(false)
            }
        );
        // Listing the directory that holds a grant is not granted by it.
        assert!(matches!(
            denied(p.explain(t.path(), Access::READ)),
            Denial::Outside { .. }
        ));
    }

    #[test]
    fn a_hidden_directory_beneath_a_grant_is_hidden() {
        let t = tree();
        let p = policy(t.path());
        assert_eq!(
            denied(p.explain(t.path().join("work/.state/grants"), Access::READ)),
            Denial::Hidden {
                hidden: t.path().join("work/.state")
            }
        );
        // Without a grant above it, a hidden path is just outside.
        let q = Policy::new().hide(t.path().join("work/.state"));
        assert!(matches!(
            denied(q.explain(t.path().join("work/.state"), Access::READ)),
            Denial::Outside { .. }
        ));
    }

    #[test]
    fn a_symlink_into_a_grant_is_allowed_and_one_out_of_a_grant_is_denied() {
        let t = tree();
        let p = policy(t.path());
        // Outside → inside: the kernel reaches the granted file.
        symlink(t.path().join("work/a.txt"), t.path().join("out/in-link")).unwrap();
        assert!(matches!(
            p.explain(t.path().join("out/in-link"), Access::READ),
            Explanation::Allowed { .. }
        ));
        // Inside → outside: the name is in the workspace, the file is not.
        symlink(t.path().join("out/secret"), t.path().join("work/out-link")).unwrap();
        assert!(matches!(
            denied(p.explain(t.path().join("work/out-link"), Access::READ)),
            Denial::Outside { .. }
        ));
        // A directory link: `work/up/secret` is `out/secret`.
        symlink(t.path().join("out"), t.path().join("work/up")).unwrap();
        assert!(matches!(
            denied(p.explain(t.path().join("work/up/secret"), Access::WRITE)),
            Denial::Outside { .. }
        ));
        // `..` after a link is resolved the kernel's way: `work/up/..` is `t`, not `work`.
        assert!(matches!(
            denied(p.explain(t.path().join("work/up/../ro/lib.txt"), Access::WRITE)),
            Denial::NotGranted { .. }
        ));
    }

    #[test]
    fn what_cannot_be_told_is_unknown() {
        let t = tree();
        let p = policy(t.path());
        for (path, why) in [
            (PathBuf::from("work/a.txt"), "relative"),
            (
                t.path().join("out/missing/../secret"),
                "dot-dot after missing",
            ),
            (PathBuf::from("/proc/1/environ"), "private view"),
            (PathBuf::from("/dev/shm/sem.x"), "private view"),
        ] {
            assert!(
                matches!(p.explain(&path, Access::READ), Explanation::Unknown(_)),
                "{why}: {:?}",
                p.explain(&path, Access::READ)
            );
        }
        // A dangling link: the kernel would create its target, wherever that is.
        symlink(t.path().join("nowhere/x"), t.path().join("work/dangling")).unwrap();
        assert!(matches!(
            p.explain(t.path().join("work/dangling"), Access::WRITE),
            Explanation::Unknown(_)
        ));
        assert!(matches!(
            p.explain(t.path().join("work/a.txt"), Access::empty()),
            Explanation::Unknown(_)
        ));
    }

    #[test]
    fn a_single_program_policy_executes_its_program_and_loader_only() {
        let Some(sh) = ["/usr/bin/dash", "/bin/dash", "/usr/bin/bash"]
            .into_iter()
            .find(|p| Path::new(p).exists())
        else {
            eprintln!("skipped: no dash or bash to stand in for a program");
            return;
        };
        let t = tree();
        let p = Policy::single_program(sh).allow(t.path().join("work"), Access::READ);
        assert!(matches!(
            p.explain(sh, Access::EXECUTE),
            Explanation::Allowed { .. }
        ));
        // Its ELF loader is executable too (prepare adds it), so no denial is claimed there.
        if let Ok(Some(loader)) = interp::interpreter(Path::new(sh)) {
            assert!(matches!(
                p.explain(&loader, Access::EXECUTE),
                Explanation::Allowed { .. }
            ));
        }
        assert!(matches!(
            denied(p.explain(t.path().join("work/a.txt"), Access::EXECUTE)),
            Denial::NotTheProgram { .. }
        ));
    }
}
