//! Why a policy allows or denies one access: [`Policy::explain`], the policy's own answer to
//! "may the program read (write, execute) this path, and which rule decides?" (LIVE-4).
//!
//! **Owns:** replaying the policy's path rules the way Landlock applies them — a rule is bound
//! to the inode its path resolved to, and an access is allowed when a rule on the file or on
//! one of its ancestor directories grants it — plus the policy's hidden paths, the single
//! program of a `run` policy and the interpreters [`Policy::prepare`] adds for executables.
//!
//! **Refuses:** to guess. Whenever the answer is not the one the policy would give, it says
//! [`Explanation::Unknown`] and callers must claim nothing:
//! - a relative path (the program's working directory is the caller's to apply), a `..` after a
//!   component that was not looked up (missing, or outside what may be looked up, below), a
//!   path of more than [`MAX_COMPONENTS`] components, or of more than 40 symbolic links or 256
//!   components walked with their targets;
//! - the program's own views: `/proc` (`/proc/self`, `/proc/<pid>`), `/dev/fd`,
//!   `/dev/stdin|stdout|stderr`, `/dev/shm`, `/dev/pts`. The host's files there are not the
//!   program's (looked up by the host, `/dev/fd/2` is the host's own stderr), so the host
//!   never looks them up;
//! - once the explainer has made [`MAX_LOOKUPS`] file system lookups: hostile output naming
//!   deep paths costs the host a bounded amount of work per explainer, and the rest is unknown.
//!
//! **Never an oracle.** The host runs with more than the program: on a root host it keeps the
//! capabilities the program lost (`CAP_DAC_OVERRIDE` reads through a `0700` directory of
//! another user), and its view has the hidden paths the program's view covers. So nothing an
//! answer says may depend on a fact the program could not observe itself — not whether a file
//! exists, not its mode, not where a link points:
//! - **Lexical outside the grants.** A lookup (`lstat`, `readlink`) of `dir/name` is made only
//!   when `dir` is at or beneath a directory the policy grants, or `dir/name` is on the way to
//!   a rule's path (`/bin` of `/bin/sh`, `/home/u` of `/home/u/work`), or `dir` is a system
//!   area (the directory of system grants, `/etc` of `/etc/passwd`): places whose entries the
//!   program itself can look up. Everything past the first component that may not be looked
//!   up is taken as written: a path lexically outside every rule is answered from the rules
//!   alone (outside), whatever is there on the host.
//! - **The program's permissions, not the host's.** Each lookup is made only if the directory's
//!   mode lets the host's uid and groups *without capabilities* search it — the credentials
//!   the sandboxed program runs with (same ids, no capabilities). Where it does not, the rest
//!   of the path is taken as written too.
//! - **Hidden paths answer the same for every name.** A path at or under a hidden directory
//!   (and not under a grant inside it) is [`Denial::Hidden`] (or outside, when no grant covers
//!   the hidden directory) without a lookup: the program sees an empty directory there, and
//!   whether the host has a file of that name must not show.
//!
//! **How paths are resolved.** Component by component, as the kernel does for `open` and
//! `execve` (symbolic links followed, `..` after a looked-up directory goes to its parent),
//! as far as lookups may go (above), and each looked-up directory is compared by device and
//! inode with the rules' files — never by the text of the path. So a symbolic link inside a
//! grant that points outside is outside, and one on the way to a grant that points into it is
//! inside. A missing file is answered by its nearest existing directory (creating needs
//! `WRITE` there). What is taken as written can only be covered by no rule (it is outside
//! every grant's tree), which is the answer; a link there into a grant is not seen, and a
//! `Permission denied` on it would be called outside: the price of not looking.
//!
//! **Assumptions.** The program sees the host's file system under the same names (true of the
//! private mount view of `isolate`, which only covers hidden paths and remounts read-only), and
//! nothing changed between the program's access and the explanation. A change in between can
//! only make the answer stale, which is why callers explain right after the program ends and
//! before its temp dir goes. One such change is known and answered on purpose: beneath a
//! read-only grant split around hidden paths (module `split`), an entry made during the call is
//! refused by Landlock; a hidden one is [`Denial::Hidden`] by its name, as any name there, but
//! an ordinary one (`~/new-file`) is answered as its grant allows, since what existed at
//! `prepare` is not known here, so no denial is claimed for it.

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
    /// A write to a path that stays read-only beneath a writable grant ([`Policy::protect`]:
    /// `.git/hooks`, `.git/config`, RCS-3).
    Protected {
        /// The protected path (canonical).
        protected: PathBuf,
    },
    /// A write to a file kept read-only for what it is ([`Policy::freeze`]: a hard link into a
    /// package store or another clone, TRUST-3).
    Frozen {
        /// The frozen file, or the directory holding it (canonical).
        frozen: PathBuf,
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

/// A path with more components than this is not explained (`Unknown`): no tool names one, and
/// each component may cost a lookup.
pub(crate) const MAX_COMPONENTS: usize = 64;

/// File system lookups one [`Explainer`] makes at most (`lstat`, `readlink`); past them every
/// answer is `Unknown`. A command's output names at most a few dozen paths, each of a few
/// components, asked about one or two accesses.
pub(crate) const MAX_LOOKUPS: usize = 512;

/// Symbolic links followed for one path at most (the kernel's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// Components walked for one path at most, links' targets included.
const MAX_STEPS: usize = 4 * MAX_COMPONENTS;

/// The program's own views (module docs): never looked up on the host.
const PRIVATE_VIEWS: &[&str] = &[
    "/proc",
    "/dev/fd",
    "/dev/stdin",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/shm",
    "/dev/pts",
];

/// A hidden directory as the explainer compares it (by name: it is never looked into).
#[derive(Debug, Clone)]
struct Hidden {
    /// The path as the policy names it, and canonical.
    names: Vec<PathBuf>,
    /// Whether a grant covers it (else it hides nothing: it is outside like its neighbours).
    covered: bool,
    /// Canonical grants inside it, or it: those stay visible (`Policy::hide`).
    inner: Vec<PathBuf>,
}

/// The host's ids, as the sandboxed program has them (without the capabilities).
#[derive(Debug, Clone)]
struct Creds {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
}

impl Creds {
    fn current() -> Creds {
        // SAFETY: no arguments, cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let mut groups = vec![0 as libc::gid_t; 256];
        // SAFETY: the buffer holds `groups.len()` ids; the call writes at most that many.
        let n = unsafe { libc::getgroups(groups.len() as libc::c_int, groups.as_mut_ptr()) };
        groups.truncate(usize::try_from(n).unwrap_or(0));
        Creds { uid, gid, groups }
    }

    /// Whether a process with these ids and no capabilities may search a directory of this
    /// owner and mode (ACLs aside: the owner, group or other bits, whichever class applies).
    fn may_search(&self, m: &std::fs::Metadata) -> bool {
        let mode = m.mode();
        if m.uid() == self.uid {
            mode & 0o100 != 0
        } else if m.gid() == self.gid || self.groups.contains(&m.gid()) {
            mode & 0o010 != 0
        } else {
            mode & 0o001 != 0
        }
    }
}

/// A policy's rules resolved once, to explain many accesses (a command's output can name up
/// to a few dozen paths). Built by [`Policy::explainer`]; it makes at most 512 lookups in
/// all (module docs of `explain`).
#[derive(Debug, Clone)]
pub struct Explainer {
    grants: Vec<Grant>,
    /// Canonical paths of the directory grants: what is beneath them may be looked up.
    dir_grants: Vec<PathBuf>,
    /// Rules' paths as named and canonical (interpreters too): the way to them may be looked up.
    rule_paths: Vec<PathBuf>,
    hidden: Vec<Hidden>,
    /// Protected paths, as named and canonical ([`Policy::protect`]).
    protected: Vec<PathBuf>,
    /// Frozen paths, as named and canonical ([`Policy::freeze`]).
    frozen: Vec<PathBuf>,
    /// Canonical parents (other than `/`) of the system grants: `/etc` of `/etc/passwd`.
    system_areas: Vec<PathBuf>,
    program: Option<PathBuf>,
    creds: Creds,
    lookups: std::cell::Cell<usize>,
}

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

    /// The rules resolved once, for several [`explain`](Explainer::explain) calls. Looks up the
    /// policy's own paths (the host's and the user's choice, not the program's).
    pub fn explainer(&self) -> Explainer {
        let mut grants = Vec::with_capacity(self.rules.len() + 2);
        let mut system_areas = Vec::new();
        let mut dir_grants = Vec::new();
        let mut rule_paths = Vec::new();
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
            let canonical = canonical_of(&rule.path, dev, ino).or_else(|| {
                let fd = rule.fd.as_ref()?;
                let link = std::fs::read_link(format!(
                    "/proc/self/fd/{}",
                    std::os::fd::AsRawFd::as_raw_fd(&**fd)
                ))
                .ok()?;
                canonical_of(&link, dev, ino)
            });
            ways_to(&rule.path, &mut rule_paths);
            if let Some(c) = &canonical {
                rule_paths.push(c.clone());
                if is_dir {
                    dir_grants.push(c.clone());
                }
            }
            if rule.system {
                if let Some(parent) = canonical
                    .as_ref()
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
        // Interpreters and the program are file grants found by path: the way to them too.
        for g in &grants {
            if !rule_paths.contains(&g.path) {
                ways_to(&g.path, &mut rule_paths);
            }
        }
        rule_paths.sort();
        rule_paths.dedup();
        let hidden = self
            .hidden
            .iter()
            .map(|h| {
                let mut names = vec![h.clone()];
                names.extend(std::fs::canonicalize(h).ok().filter(|c| c != h));
                let under = |g: &PathBuf, h: &PathBuf| g.starts_with(h);
                let inner: Vec<PathBuf> = dir_grants
                    .iter()
                    .chain(rule_paths.iter())
                    .filter(|g| names.iter().any(|h| under(g, h)))
                    .cloned()
                    .collect();
                let covered = dir_grants
                    .iter()
                    .any(|g| names.iter().any(|h| h.starts_with(g) && h != g));
                Hidden {
                    names,
                    covered,
                    inner,
                }
            })
            .collect();
        let mut protected = Vec::new();
        for p in &self.protected {
            protected.push(p.clone());
            protected.extend(std::fs::canonicalize(p).ok().filter(|c| c != p));
        }
        let mut frozen = Vec::new();
        for p in &self.frozen {
            frozen.push(p.clone());
            frozen.extend(std::fs::canonicalize(p).ok().filter(|c| c != p));
        }
        Explainer {
            grants,
            dir_grants,
            rule_paths,
            hidden,
            protected,
            frozen,
            system_areas,
            program,
            creds: Creds::current(),
            lookups: std::cell::Cell::new(0),
        }
    }
}

/// `path` canonical, if it still names the inode `(dev, ino)`.
fn canonical_of(path: &Path, dev: u64, ino: u64) -> Option<PathBuf> {
    let c = std::fs::canonicalize(path).ok()?;
    let m = std::fs::metadata(&c).ok()?;
    ((m.dev(), m.ino()) == (dev, ino)).then_some(c)
}

/// Adds the paths the kernel's walk to the policy's own `path` goes through: `path` itself and,
/// at each symbolic link, the path with the link replaced by its target (so `/lib64/ld.so`,
/// `/usr/lib64/ld.so`, … up to the canonical path). Their ancestors are what the program
/// looks up to reach the grant, and what [`Explainer::resolve`] may look up.
fn ways_to(path: &Path, out: &mut Vec<PathBuf>) {
    out.push(path.to_path_buf());
    let mut pending: std::collections::VecDeque<std::ffi::OsString> =
        std::collections::VecDeque::new();
    if push_front(&mut pending, path).is_err() {
        return;
    }
    let mut current = PathBuf::from("/");
    let mut links = 0;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            current.pop();
            continue;
        }
        let entry = current.join(&name);
        match std::fs::symlink_metadata(&entry) {
            Ok(m) if m.file_type().is_symlink() => {
                links += 1;
                let Ok(target) = std::fs::read_link(&entry) else {
                    return;
                };
                if links > MAX_LINKS {
                    return;
                }
                if target.is_absolute() {
                    current = PathBuf::from("/");
                }
                if push_front(&mut pending, &target).is_err() {
                    return;
                }
                let mut way = current.clone();
                way.extend(pending.iter());
                out.push(way);
            }
            Ok(_) => current = entry,
            Err(_) => return,
        }
    }
    out.push(current);
}

/// A path resolved as far as the program could look it up (module docs).
struct Resolved {
    /// The path: looked up as far as `looked`, as written past it.
    path: PathBuf,
    /// Inodes of the looked-up directories and file on the way, innermost first.
    chain: Vec<(u64, u64)>,
    /// The file itself, when it was looked up and exists: whether a directory, its mode.
    target: Option<(bool, u32)>,
}

/// Where a resolution ends.
enum Walk {
    Resolved(Resolved),
    /// At or under a hidden directory (the index in `hidden`).
    Hidden(usize),
}

/// How far lookups went.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Every component so far was looked up and is a directory.
    Looked,
    /// A component was missing: the rest is as written, beneath the last looked-up directory.
    Missing,
    /// A component may not be looked up (module docs): the rest is as written.
    Unlooked,
}

impl Explainer {
    /// How many lookups (`lstat`, `readlink`) this explainer made so far: at most 512, past
    /// which every answer is [`Explanation::Unknown`].
    pub fn lookups(&self) -> usize {
        self.lookups.get()
    }

    /// Counts one lookup; `false` once the budget is spent.
    fn spend(&self) -> bool {
        let n = self.lookups.get();
        if n >= MAX_LOOKUPS {
            return false;
        }
        self.lookups.set(n + 1);
        true
    }

    /// What the policy says about `access` to the absolute `path`; see [`Policy::explain`].
    pub fn explain(&self, path: &Path, access: Access) -> Explanation {
        if access.is_empty() {
            return Explanation::Unknown("no access was asked about");
        }
        let r = match self.resolve(path) {
            Ok(Walk::Resolved(r)) => r,
            Ok(Walk::Hidden(i)) => {
                let h = &self.hidden[i];
                return Explanation::Denied(if h.covered {
                    Denial::Hidden {
                        hidden: h.names[0].clone(),
                    }
                } else {
                    Denial::Outside {
                        system_area: None,
                        world_readable: None,
                    }
                });
            }
            Err(why) => return Explanation::Unknown(why),
        };
        let is_file = r.target.is_some_and(|(dir, _)| !dir);

        let mut granted = Access::empty();
        let mut nearest: Option<&Grant> = None;
        for id in &r.chain {
            for g in self.grants.iter().filter(|g| (g.dev, g.ino) == *id) {
                granted |= g.access;
                if nearest.is_none() {
                    nearest = Some(g);
                }
            }
        }
        // Landlock's EXECUTE grant includes reading the file (the kernel reads what it runs).
        let effective = if is_file && granted.contains(Access::EXECUTE) {
            granted | Access::READ
        } else {
            granted
        };
        if access.contains(Access::WRITE) {
            // Writable by its grant, read-only by its own bind (a rename or a removal of it or
            // of a directory above it fails with EBUSY, which is not a permission error).
            if let Some(p) = self.protected.iter().find(|p| r.path.starts_with(p)) {
                return Explanation::Denied(Denial::Protected {
                    protected: p.clone(),
                });
            }
            if let Some(p) = self.frozen.iter().find(|p| r.path.starts_with(p)) {
                return Explanation::Denied(Denial::Frozen { frozen: p.clone() });
            }
        }
        if effective.contains(access) {
            if let Some(g) = nearest {
                return Explanation::Allowed {
                    rule: g.path.clone(),
                    system: g.system,
                };
            }
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
            .filter(|a| r.path.starts_with(a))
            .max_by_key(|a| a.components().count())
            .cloned();
        Explanation::Denied(Denial::Outside {
            system_area,
            world_readable: r.target.map(|(_, mode)| mode & 0o004 != 0),
        })
    }

    /// Whether the program may look up `dir/name` itself, as far as the policy tells
    /// (module docs); its permissions are asked separately.
    fn may_look(&self, dir: &Path, entry: &Path) -> bool {
        self.dir_grants.iter().any(|g| dir.starts_with(g))
            || self.rule_paths.iter().any(|r| r.starts_with(entry))
            || self.system_areas.iter().any(|a| a == dir)
    }

    /// The hidden directory `path` is at or under, unless under a grant inside it.
    fn hidden_at(&self, path: &Path) -> Option<usize> {
        self.hidden.iter().position(|h| {
            h.names.iter().any(|n| path.starts_with(n))
                && !h.inner.iter().any(|g| path.starts_with(g))
        })
    }

    /// Resolves `path` component by component, looking up only what the program could
    /// (module docs), within the lookup budget.
    fn resolve(&self, path: &Path) -> Result<Walk, &'static str> {
        if !path.is_absolute() {
            return Err("the path is relative");
        }
        let mut pending: std::collections::VecDeque<std::ffi::OsString> =
            std::collections::VecDeque::new();
        push_front(&mut pending, path)?;
        let root = self.lookup_root()?;
        // The resolved path so far, each component with its inode and metadata once looked up.
        let mut current = PathBuf::from("/");
        let mut steps: Vec<Option<std::fs::Metadata>> = vec![Some(root)];
        let mut state = State::Looked;
        let mut links = 0usize;
        let mut walked = 0usize;
        while let Some(name) = pending.pop_front() {
            walked += 1;
            if walked > MAX_STEPS {
                return Err("the path has too many components, links' targets included");
            }
            if name == ".." {
                if state != State::Looked {
                    return Err("the path has `..` after a component that was not looked up");
                }
                if steps.len() > 1 {
                    steps.pop();
                    current.pop();
                }
                continue;
            }
            let entry = current.join(&name);
            if PRIVATE_VIEWS.iter().any(|v| entry.starts_with(v)) {
                return Err("the program has its own view there");
            }
            if let Some(i) = self.hidden_at(&entry) {
                return Ok(Walk::Hidden(i));
            }
            let parent = steps.last().and_then(Option::as_ref);
            let looked_up = match (state, parent) {
                (State::Looked, Some(dir))
                    if self.may_look(&current, &entry) && self.creds.may_search(dir) =>
                {
                    if !self.spend() {
                        return Err("the explainer's lookups are spent");
                    }
                    match std::fs::symlink_metadata(&entry) {
                        Ok(m) => Some(m),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                            state = State::Missing;
                            None
                        }
                        Err(_) => return Err("the host cannot look the path up"),
                    }
                }
                (State::Looked, _) => {
                    state = State::Unlooked;
                    None
                }
                _ => None,
            };
            match looked_up {
                Some(m) if m.file_type().is_symlink() => {
                    links += 1;
                    if links > MAX_LINKS || !self.spend() {
                        return Err("too many symbolic links or lookups");
                    }
                    let target = std::fs::read_link(&entry)
                        .map_err(|_| "the host cannot read a symbolic link of the path")?;
                    if target.is_absolute() {
                        steps.truncate(1);
                        current = PathBuf::from("/");
                    }
                    push_front(&mut pending, &target)?;
                }
                Some(m) => {
                    if !m.is_dir() && !pending.is_empty() {
                        return Err("a file of the path is not a directory");
                    }
                    steps.push(Some(m));
                    current = entry;
                }
                None => {
                    steps.push(None);
                    current = entry;
                }
            }
        }
        let target = match (state, steps.last()) {
            (State::Looked, Some(Some(m))) if steps.len() > 1 => Some((m.is_dir(), m.mode())),
            _ => None,
        };
        let chain = steps
            .iter()
            .rev()
            .filter_map(|s| s.as_ref().map(|m| (m.dev(), m.ino())))
            .collect();
        Ok(Walk::Resolved(Resolved {
            path: current,
            chain,
            target,
        }))
    }

    /// `/`, which every program looks up.
    fn lookup_root(&self) -> Result<std::fs::Metadata, &'static str> {
        if !self.spend() {
            return Err("the explainer's lookups are spent");
        }
        std::fs::metadata("/").map_err(|_| "the host cannot look up `/`")
    }
}

/// Puts the components of `path` before `pending` (a link's target before the rest of the
/// path), refusing more than [`MAX_COMPONENTS`] in all.
fn push_front(
    pending: &mut std::collections::VecDeque<std::ffi::OsString>,
    path: &Path,
) -> Result<(), &'static str> {
    // Counted before anything is copied: a hostile path may have thousands.
    if path.components().count() + pending.len() > MAX_COMPONENTS + 1 {
        return Err("the path has too many components");
    }
    let names: Vec<std::ffi::OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some("..".into()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    if names.len() + pending.len() > MAX_COMPONENTS {
        return Err("the path has too many components");
    }
    for n in names.into_iter().rev() {
        pending.push_front(n);
    }
    Ok(())
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
        // Its mode is not looked at: no grant's tree holds it (module docs).
        assert_eq!(
            denied(p.explain(&secret, Access::READ)),
            Denial::Outside {
                system_area: None,
                world_readable: None
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
    fn a_private_path_made_after_prepare_or_replaced_is_explained_as_hidden() {
        // The read grant is split around hidden paths, so a `~/.docker` the
        // host makes during the call, or a `~/.netrc` it replaces by rename, is refused by
        // Landlock; the explanation is by name, whatever exists when it is asked.
        let t = tree();
        let ro = t.path().join("ro");
        let p = Policy::new()
            .allow(&ro, Access::READ | Access::EXECUTE)
            .hide(ro.join(".docker"))
            .hide(ro.join(".netrc"));
        std::fs::create_dir(ro.join(".docker")).unwrap();
        std::fs::write(ro.join(".docker/config.json"), "x").unwrap();
        std::fs::write(ro.join(".netrc"), "x").unwrap();
        for (path, hidden) in [
            (ro.join(".docker/config.json"), ro.join(".docker")),
            (ro.join(".netrc"), ro.join(".netrc")),
        ] {
            assert_eq!(
                denied(p.explain(&path, Access::READ)),
                Denial::Hidden { hidden }
            );
        }
    }

    #[test]
    fn a_write_to_a_frozen_file_is_named_and_reading_it_is_allowed() {
        let t = tree();
        let p = policy(t.path()).freeze(t.path().join("work/a.txt"));
        assert_eq!(
            denied(p.explain(t.path().join("work/a.txt"), Access::WRITE)),
            Denial::Frozen {
                frozen: t.path().join("work/a.txt")
            }
        );
        assert!(matches!(
            p.explain(t.path().join("work/a.txt"), Access::READ),
            Explanation::Allowed { .. }
        ));
    }

    #[test]
    fn a_write_to_a_protected_path_is_named_and_reading_it_is_allowed() {
        let t = tree();
        let p = policy(t.path()).protect(t.path().join("work/sub"));
        for path in ["work/sub", "work/sub/new-hook"] {
            assert_eq!(
                denied(p.explain(t.path().join(path), Access::WRITE)),
                Denial::Protected {
                    protected: t.path().join("work/sub")
                },
                "{path}"
            );
        }
        assert!(matches!(
            p.explain(t.path().join("work/sub/x"), Access::READ),
            Explanation::Allowed { .. }
        ));
        assert!(matches!(
            p.explain(t.path().join("work/a.txt"), Access::WRITE),
            Explanation::Allowed { .. }
        ));
    }

    #[test]
    fn a_symlink_into_a_grant_is_allowed_and_one_out_of_a_grant_is_denied() {
        let t = tree();
        let p = policy(t.path());
        // On the way to a grant → inside: the kernel reaches the granted directory.
        symlink(t.path().join("work"), t.path().join("work-link")).unwrap();
        let q = Policy::new().allow(t.path().join("work-link"), Access::READ);
        for path in ["work-link/a.txt", "work/a.txt"] {
            assert!(
                matches!(
                    q.explain(t.path().join(path), Access::READ),
                    Explanation::Allowed { .. }
                ),
                "{path}"
            );
        }
        // Outside every grant's tree a link is not looked at (module docs: the price of not
        // being an oracle): the name is answered as written.
        symlink(t.path().join("work/a.txt"), t.path().join("out/in-link")).unwrap();
        assert!(matches!(
            denied(p.explain(t.path().join("out/in-link"), Access::READ)),
            Denial::Outside { .. }
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
        // `..` after a link is resolved the kernel's way: `work/to-ro/..` is `t`, not `work`.
        symlink(t.path().join("ro"), t.path().join("work/to-ro")).unwrap();
        assert!(matches!(
            denied(p.explain(t.path().join("work/to-ro/../ro/lib.txt"), Access::WRITE)),
            Denial::NotGranted { .. }
        ));
        // … but not after a directory outside the grants, which is not looked up.
        assert!(matches!(
            p.explain(t.path().join("work/up/../ro/lib.txt"), Access::WRITE),
            Explanation::Unknown(_)
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
        for path in ["/dev/fd/2", "/dev/stderr", "/proc/self/fd/3", "/dev/pts/0"] {
            assert!(
                matches!(p.explain(path, Access::WRITE), Explanation::Unknown(_)),
                "{path}"
            );
        }
        assert!(matches!(
            p.explain(t.path().join("work/a.txt"), Access::empty()),
            Explanation::Unknown(_)
        ));
    }

    #[test]
    fn a_dangling_link_is_its_target_as_written() {
        let t = tree();
        let p = policy(t.path());
        // The kernel creates the target of a dangling link, outside here.
        symlink(t.path().join("nowhere/x"), t.path().join("work/dangling")).unwrap();
        assert!(matches!(
            denied(p.explain(t.path().join("work/dangling"), Access::WRITE)),
            Denial::Outside { .. }
        ));
        // Into the workspace: allowed.
        symlink(t.path().join("work/new"), t.path().join("work/to-new")).unwrap();
        assert!(matches!(
            p.explain(t.path().join("work/to-new"), Access::WRITE),
            Explanation::Allowed { .. }
        ));
    }

    /// Every answer about `dir/exists` and `dir/missing` for each access, paths aside.
    fn answers(p: &Policy, dir: &Path) -> [Vec<Explanation>; 2] {
        ["exists", "missing"].map(|name| {
            [Access::READ, Access::WRITE, Access::EXECUTE]
                .into_iter()
                .map(|a| match p.explain(dir.join(name), a) {
                    // Which rule allows is the same either way; compare the kind.
                    e @ (Explanation::Allowed { .. } | Explanation::Denied(_)) => e,
                    Explanation::Unknown(_) => Explanation::Unknown(""),
                })
                .collect()
        })
    }

    #[test]
    fn outside_the_grants_existence_and_modes_do_not_show() {
        // The host (root) sees into a 0700 directory the program cannot.
        let t = tree();
        let p = policy(t.path());
        let priv_dir = t.path().join("out/priv");
        std::fs::create_dir(&priv_dir).unwrap();
        std::fs::write(priv_dir.join("exists"), "x").unwrap();
        std::fs::set_permissions(
            priv_dir.join("exists"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::set_permissions(&priv_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let [exists, missing] = answers(&p, &priv_dir);
        assert_eq!(exists, missing);
        // The mode of the file is not read either: no world_readable.
        assert_eq!(
            denied(p.explain(priv_dir.join("exists"), Access::READ)),
            Denial::Outside {
                system_area: None,
                world_readable: None
            }
        );
    }

    #[test]
    fn inside_a_grant_lookups_need_the_programs_own_search_permission() {
        // Inside a grant: a root host reads through another user's 0700
        // directory; the program (same uid, no capabilities) cannot, so neither may the answer.
        let t = tree();
        let p = policy(t.path());
        let priv_dir = t.path().join("work/priv");
        std::fs::create_dir(&priv_dir).unwrap();
        symlink(t.path().join("out/secret"), priv_dir.join("exists")).unwrap();
        // SAFETY: no arguments, cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        if !root || std::os::unix::fs::chown(&priv_dir, Some(65534), Some(65534)).is_err() {
            eprintln!("skipped: not root, cannot give a directory to another user");
            return;
        }
        std::fs::set_permissions(&priv_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let [exists, missing] = answers(&p, &priv_dir);
        assert_eq!(exists, missing);
        assert!(matches!(
            p.explain(priv_dir.join("exists"), Access::READ),
            Explanation::Allowed { .. }
        ));
    }

    #[test]
    fn under_a_hidden_directory_every_name_answers_the_same() {
        // Which state files exist must not show.
        let t = tree();
        std::fs::write(t.path().join("work/.state/grants.json"), "{}").unwrap();
        let p = policy(t.path());
        let [exists, missing] = ["grants.json", "nothere"].map(|name| {
            [Access::READ, Access::WRITE, Access::EXECUTE]
                .map(|a| p.explain(t.path().join("work/.state").join(name), a))
        });
        assert_eq!(exists, missing);
        assert_eq!(
            denied(exists[1].clone()),
            Denial::Hidden {
                hidden: t.path().join("work/.state")
            }
        );
        // Nothing under it was looked up: the walk stops at its name.
        let e = p.explainer();
        let _ = e.explain(&t.path().join("work/.state/grants.json"), Access::READ);
        let to_state = e.lookups();
        let _ = e.explain(&t.path().join("work/sub"), Access::READ);
        assert!(to_state < e.lookups(), "{to_state} {}", e.lookups());
        // Reached through a link in the workspace: the same.
        symlink(t.path().join("work/.state"), t.path().join("work/st")).unwrap();
        assert!(matches!(
            denied(p.explain(t.path().join("work/st/nothere"), Access::READ)),
            Denial::Hidden { .. }
        ));
    }

    #[test]
    fn deep_paths_cost_bounded_lookups() {
        // A deep tree in a writable grant, named by many lines.
        let t = tree();
        let p = policy(t.path());
        let mut deep = t.path().join("work");
        for _ in 0..(MAX_COMPONENTS - deep.components().count()) {
            deep.push("a");
        }
        std::fs::create_dir_all(&deep).unwrap();
        let e = p.explainer();
        // The deepest path that is explained at all is, with its lookups.
        assert!(matches!(
            e.explain(&deep.join("f"), Access::WRITE),
            Explanation::Allowed { .. }
        ));
        assert!(e.lookups() <= MAX_COMPONENTS + 1, "{}", e.lookups());
        // One more component is not explained, and costs nothing.
        let before = e.lookups();
        assert!(matches!(
            e.explain(&deep.join("a/f"), Access::WRITE),
            Explanation::Unknown(_)
        ));
        assert_eq!(e.lookups(), before);
        // Many such paths: the budget ends the work, the rest is unknown.
        for i in 0..64 {
            for a in [Access::READ, Access::WRITE, Access::EXECUTE] {
                let _ = e.explain(&deep.join(format!("{i:02}")), a);
            }
        }
        assert_eq!(e.lookups(), MAX_LOOKUPS);
        assert!(matches!(
            e.explain(&t.path().join("work/a.txt"), Access::READ),
            Explanation::Unknown(_)
        ));
        // A link loop ends too.
        symlink(t.path().join("work/loop"), t.path().join("work/loop")).unwrap();
        let f = p.explainer();
        assert!(matches!(
            f.explain(&t.path().join("work/loop"), Access::READ),
            Explanation::Unknown(_)
        ));
        assert!(f.lookups() <= MAX_STEPS + MAX_LINKS + 1, "{}", f.lookups());
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
