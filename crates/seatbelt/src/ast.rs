//! The typed SBPL syntax tree: a deny-default [`Profile`] of [`Rule`]s, each an [`Action`] on
//! some [`Operation`]s under [`Filter`]s whose strings are [`Value`]s (text or `(param "KEY")`).
//!
//! Only deny-default, version-1 profiles exist in this type: there is no way to build
//! `(allow default)` (deny by default: RUN-6, CMD-2).

use std::collections::BTreeSet;

use crate::pattern::Pattern;

/// A Seatbelt profile: `(version 1)`, `(deny default)`, then `rules` in order.
///
/// Order matters: for a given operation the last matching rule decides (see [`crate::eval`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Profile {
    /// The rules after `(deny default)`, in source order.
    pub rules: Vec<Rule>,
}

/// `(allow …)` or `(deny …)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// `allow`.
    Allow,
    /// `deny`.
    Deny,
}

/// One rule: `(action op… filter…)`.
///
/// `filters` are alternatives, as in SBPL: the rule applies when *any* of them matches, and to
/// everything when there is none. Use [`Filter::RequireAll`] for a conjunction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Allow or deny.
    pub action: Action,
    /// The operations the rule covers; never empty in a rendered profile.
    pub operations: Vec<Operation>,
    /// Alternatives; empty means unconditional.
    pub filters: Vec<Filter>,
}

impl Rule {
    /// `(allow ops…)` with no filter yet.
    pub fn allow(operations: impl IntoIterator<Item = Operation>) -> Rule {
        Rule {
            action: Action::Allow,
            operations: operations.into_iter().collect(),
            filters: Vec::new(),
        }
    }

    /// `(deny ops…)` with no filter yet.
    pub fn deny(operations: impl IntoIterator<Item = Operation>) -> Rule {
        Rule {
            action: Action::Deny,
            operations: operations.into_iter().collect(),
            filters: Vec::new(),
        }
    }

    /// Adds one alternative filter.
    #[must_use]
    pub fn filter(mut self, filter: Filter) -> Rule {
        self.filters.push(filter);
        self
    }

    /// Adds several alternative filters.
    #[must_use]
    pub fn filters(mut self, filters: impl IntoIterator<Item = Filter>) -> Rule {
        self.filters.extend(filters);
        self
    }
}

impl Profile {
    /// An empty deny-default profile.
    pub fn new() -> Profile {
        Profile::default()
    }

    /// Appends a rule (builder style).
    #[must_use]
    pub fn rule(mut self, rule: Rule) -> Profile {
        self.rules.push(rule);
        self
    }

    /// Every parameter key the profile reads with `(param "KEY")`, sorted.
    pub fn parameters(&self) -> BTreeSet<&str> {
        fn walk<'a>(f: &'a Filter, out: &mut BTreeSet<&'a str>) {
            match f {
                Filter::Literal(v)
                | Filter::Subpath(v)
                | Filter::Prefix(v)
                | Filter::SysctlName(v)
                | Filter::SysctlNamePrefix(v)
                | Filter::GlobalName(v) => {
                    if let Value::Param(k) = v {
                        out.insert(k);
                    }
                }
                Filter::RequireAll(fs) | Filter::RequireAny(fs) => {
                    fs.iter().for_each(|f| walk(f, out))
                }
                Filter::RequireNot(f) => walk(f, out),
                Filter::Regex(_) | Filter::VnodeType(_) | Filter::Target(_) => {}
            }
        }
        let mut out = BTreeSet::new();
        for rule in &self.rules {
            rule.filters.iter().for_each(|f| walk(f, &mut out));
        }
        out
    }
}

/// A string argument: text written into the profile, or a `(param "KEY")` reference whose value
/// travels separately as `-D KEY=VALUE` (invariant 6: user paths only ever take this form).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Value {
    /// Text spliced into the profile (escaped). Only for constants such as `/usr/lib`.
    Text(String),
    /// `(param "KEY")`.
    Param(String),
}

impl Value {
    /// `(param "KEY")`.
    pub fn param(key: &str) -> Value {
        Value::Param(key.to_owned())
    }
}

/// Constants convert implicitly; a runtime `String` (which could be a user path) does not, so
/// splicing one takes a visible `Value::Text(…)`.
impl From<&'static str> for Value {
    fn from(text: &'static str) -> Value {
        Value::Text(text.to_owned())
    }
}

/// The filters our profiles use. Path filters match the kernel's resolved path of the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// `(literal V)`: the path is exactly V.
    Literal(Value),
    /// `(subpath V)`: the path is V or lies below it (component-wise).
    Subpath(Value),
    /// `(prefix V)`: the path string starts with V (not component-wise).
    Prefix(Value),
    /// `(regex #"…")`: the pattern matches somewhere in the path.
    Regex(Pattern),
    /// `(vnode-type T)`.
    VnodeType(VnodeType),
    /// `(require-all f…)`: every filter matches (true when empty).
    RequireAll(Vec<Filter>),
    /// `(require-any f…)`: some filter matches (false when empty).
    RequireAny(Vec<Filter>),
    /// `(require-not f)`.
    RequireNot(Box<Filter>),
    /// `(target T)`: the process a `signal`/`process-info*` operation is aimed at.
    Target(Target),
    /// `(sysctl-name V)`.
    SysctlName(Value),
    /// `(sysctl-name-prefix V)`.
    SysctlNamePrefix(Value),
    /// `(global-name V)`: a Mach service name for `mach-lookup`.
    GlobalName(Value),
}

/// `(literal V)`.
pub fn literal(v: impl Into<Value>) -> Filter {
    Filter::Literal(v.into())
}

/// `(subpath V)`.
pub fn subpath(v: impl Into<Value>) -> Filter {
    Filter::Subpath(v.into())
}

/// `(prefix V)`.
pub fn prefix(v: impl Into<Value>) -> Filter {
    Filter::Prefix(v.into())
}

/// `(param "KEY")`, for use inside a path filter: `subpath(param("SCOPE"))`.
pub fn param(key: &str) -> Value {
    Value::param(key)
}

/// The type of the file object an operation touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VnodeType {
    /// `REGULAR-FILE`.
    RegularFile,
    /// `DIRECTORY`.
    Directory,
    /// `SYMLINK`.
    Symlink,
    /// `CHARACTER-DEVICE`.
    CharacterDevice,
    /// `BLOCK-DEVICE`.
    BlockDevice,
    /// `FIFO`.
    Fifo,
    /// `SOCKET`.
    Socket,
}

impl VnodeType {
    /// Every variant, for tests and the parser.
    pub const ALL: [VnodeType; 7] = [
        VnodeType::RegularFile,
        VnodeType::Directory,
        VnodeType::Symlink,
        VnodeType::CharacterDevice,
        VnodeType::BlockDevice,
        VnodeType::Fifo,
        VnodeType::Socket,
    ];

    /// The SBPL spelling.
    pub fn name(self) -> &'static str {
        match self {
            VnodeType::RegularFile => "REGULAR-FILE",
            VnodeType::Directory => "DIRECTORY",
            VnodeType::Symlink => "SYMLINK",
            VnodeType::CharacterDevice => "CHARACTER-DEVICE",
            VnodeType::BlockDevice => "BLOCK-DEVICE",
            VnodeType::Fifo => "FIFO",
            VnodeType::Socket => "SOCKET",
        }
    }
}

/// How the target of `signal` / `process-info*` relates to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// `self`: the calling process.
    SelfProcess,
    /// `same-sandbox`: any process running under the same sandbox instance (CMD-2: the command's
    /// own tree, never the host).
    SameSandbox,
    /// `children`: the caller's children.
    Children,
}

impl Target {
    /// Every variant.
    pub const ALL: [Target; 3] = [Target::SelfProcess, Target::SameSandbox, Target::Children];

    /// The SBPL spelling.
    pub fn name(self) -> &'static str {
        match self {
            Target::SelfProcess => "self",
            Target::SameSandbox => "same-sandbox",
            Target::Children => "children",
        }
    }
}

macro_rules! operations {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, parent = $parent:expr; )*) => {
        /// The SBPL operations this crate knows. Names ending in `*` are wildcards covering a
        /// family (see [`Operation::covers`]); the hierarchy follows Apple's operation table as
        /// documented in fG!'s "Apple Sandbox Guide" and visible in Chromium's and Codex's
        /// profiles.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Operation {
            $( $(#[$doc])* $variant, )*
        }

        impl Operation {
            /// Every operation, in declaration order.
            pub const ALL: &'static [Operation] = &[ $( Operation::$variant, )* ];

            /// The SBPL spelling, e.g. `file-read*`.
            pub fn name(self) -> &'static str {
                match self { $( Operation::$variant => $name, )* }
            }

            /// The wildcard directly above this operation, if any.
            pub fn parent(self) -> Option<Operation> {
                match self { $( Operation::$variant => $parent, )* }
            }
        }
    };
}

operations! {
    /// `file*`: every file operation.
    FileAll = "file*", parent = None;
    /// `file-read*`.
    FileReadAll = "file-read*", parent = Some(Operation::FileAll);
    /// `file-read-data`: read contents, list a directory.
    FileReadData = "file-read-data", parent = Some(Operation::FileReadAll);
    /// `file-read-metadata`: `stat`, `readlink`.
    FileReadMetadata = "file-read-metadata", parent = Some(Operation::FileReadAll);
    /// `file-read-xattr`.
    FileReadXattr = "file-read-xattr", parent = Some(Operation::FileReadAll);
    /// `file-write*`.
    FileWriteAll = "file-write*", parent = Some(Operation::FileAll);
    /// `file-write-data`.
    FileWriteData = "file-write-data", parent = Some(Operation::FileWriteAll);
    /// `file-write-create`.
    FileWriteCreate = "file-write-create", parent = Some(Operation::FileWriteAll);
    /// `file-write-unlink`.
    FileWriteUnlink = "file-write-unlink", parent = Some(Operation::FileWriteAll);
    /// `file-write-mode`.
    FileWriteMode = "file-write-mode", parent = Some(Operation::FileWriteAll);
    /// `file-write-owner`.
    FileWriteOwner = "file-write-owner", parent = Some(Operation::FileWriteAll);
    /// `file-write-times`.
    FileWriteTimes = "file-write-times", parent = Some(Operation::FileWriteAll);
    /// `file-write-xattr`.
    FileWriteXattr = "file-write-xattr", parent = Some(Operation::FileWriteAll);
    /// `file-write-flags`.
    FileWriteFlags = "file-write-flags", parent = Some(Operation::FileWriteAll);
    /// `file-link`: creating a hard link. Not under `file-write*`, so allowing writes does not
    /// allow it (CMD-9).
    FileLink = "file-link", parent = Some(Operation::FileAll);
    /// `file-map-executable`: `mmap` with `PROT_EXEC` (dyld loading a library).
    FileMapExecutable = "file-map-executable", parent = Some(Operation::FileAll);
    /// `file-ioctl`.
    FileIoctl = "file-ioctl", parent = Some(Operation::FileAll);
    /// `process-exec`.
    ProcessExec = "process-exec", parent = None;
    /// `process-fork`.
    ProcessFork = "process-fork", parent = None;
    /// `process-info*`.
    ProcessInfoAll = "process-info*", parent = None;
    /// `process-info-pidinfo`.
    ProcessInfoPidinfo = "process-info-pidinfo", parent = Some(Operation::ProcessInfoAll);
    /// `process-info-listpids`.
    ProcessInfoListpids = "process-info-listpids", parent = Some(Operation::ProcessInfoAll);
    /// `signal`.
    Signal = "signal", parent = None;
    /// `sysctl-read`.
    SysctlRead = "sysctl-read", parent = None;
    /// `mach-lookup`.
    MachLookup = "mach-lookup", parent = None;
    /// `network*`.
    NetworkAll = "network*", parent = None;
    /// `network-outbound`.
    NetworkOutbound = "network-outbound", parent = Some(Operation::NetworkAll);
    /// `network-inbound`.
    NetworkInbound = "network-inbound", parent = Some(Operation::NetworkAll);
    /// `network-bind`.
    NetworkBind = "network-bind", parent = Some(Operation::NetworkAll);
    /// `system-socket`.
    SystemSocket = "system-socket", parent = None;
    /// `ipc-posix-shm*`.
    IpcPosixShmAll = "ipc-posix-shm*", parent = None;
    /// `ipc-posix-shm-read-data`.
    IpcPosixShmReadData = "ipc-posix-shm-read-data", parent = Some(Operation::IpcPosixShmAll);
    /// `ipc-posix-shm-write-data`.
    IpcPosixShmWriteData = "ipc-posix-shm-write-data", parent = Some(Operation::IpcPosixShmAll);
    /// `ipc-posix-shm-write-create`.
    IpcPosixShmWriteCreate = "ipc-posix-shm-write-create", parent = Some(Operation::IpcPosixShmAll);
    /// `ipc-posix-sem`.
    IpcPosixSem = "ipc-posix-sem", parent = None;
}

impl Operation {
    /// Whether this is a wildcard (`…*`) naming a family rather than one kernel check.
    pub fn is_wildcard(self) -> bool {
        self.name().ends_with('*')
    }

    /// Whether a rule naming `self` applies to the concrete operation `op`: equal, or `self` is a
    /// wildcard above `op`.
    pub fn covers(self, op: Operation) -> bool {
        let mut cur = Some(op);
        while let Some(o) = cur {
            if o == self {
                return true;
            }
            cur = o.parent();
        }
        false
    }

    /// Looks an operation up by its SBPL spelling.
    pub fn from_name(name: &str) -> Option<Operation> {
        Operation::ALL.iter().copied().find(|op| op.name() == name)
    }
}
