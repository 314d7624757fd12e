//! Denials the agent can act on (LIVE-4): which of the paths a command's
//! output names with a permission error the *sandbox* refused, what access, why, and what to do.
//!
//! **Owns:** a bounded scanner for the error shapes common tools print ([`scan`]: coreutils,
//! dash, Python, Node, gcc, OpenSSL's `fopen(…)`, git), and the translation of the policy's own
//! answer — `linux_sandbox::Policy::explain` on Linux, `seatbelt::BoundProfile::explain` on
//! macOS — into a [`Denial`] with its [`Cause`]; the tools word the cause for the agent (a
//! reason and a remedy in their own terms: `command`'s roots are the workspace and extra paths,
//! `run`'s the mirror), but for the causes that name no root ([`Cause::common_words`]).
//!
//! **Refuses:** to claim a denial the policy would not make. A path is reported only when the
//! policy, asked about that access to that path, says *denied*; a `Permission denied` on a path
//! the policy allows (the file's own mode, a DAC error) is not the sandbox's and is not reported,
//! and whatever the policy cannot tell (a relative path with `..`, `..` after a directory not
//! looked up, `/proc`) is left out. It never changes the outcome: exit codes, output and status
//! are the caller's.
//!
//! **A view of the grants only.** Where the command ran in Linux's private root (only its
//! grants and the system runtime are in its file system), a path outside them is not refused
//! but absent: the program prints `No such file or directory`. Those lines are taken too, for
//! that view only ([`View::GrantsOnly`]), and answered from the rules alone, so whether the
//! host has such a file never shows.
//!
//! **Never an oracle.** The denials are made by the host, which may see more than the program
//! (a root host's capabilities, the hidden state directories), and the agent reads them. So
//! nothing in a denial depends on a fact the sandboxed program could not observe itself:
//! - the access is the line's own word (`cannot touch` is `create`, `for writing` is `write`,
//!   `sh: 1: x` is `execute`), or the first of read, write denied for a line that says nothing —
//!   never what the host finds at the path (whether the file exists, its x bit);
//! - the program's own views are never explained: `/proc/…` (`/proc/self`, `/proc/<pid>`),
//!   `/dev/fd/N` (the program's descriptor, not the host's), `/dev/stdin|stdout|stderr`;
//! - the policy's answer follows the same rule (`linux_sandbox`'s `explain` module docs): the
//!   host looks a path up only where the program could (inside the grants, on the way to a
//!   rule, in a system area, with the program's own search permission and no capabilities) and
//!   takes the rest as written, and a path under a hidden directory is "hidden" whatever is
//!   there. On macOS `resolve_for_seatbelt` follows links only in `/`, on the way to the
//!   profile's roots and in directories the profile lets the program list.
//!
//! **Bounds:** the scanner finds the lines holding a marker with one substring search per
//! marker over the whole output (linear), reads at most 256 of them, keeps at most
//! [`MAX_MENTIONS`] mentions and paths of at most 4096 bytes, and [`find`] returns at most
//! [`MAX_DENIALS`] denials, in output order (stderr first), each `(path, access)` once. The
//! explanation of one call makes at most 512 file system lookups (`lstat`, `readlink`) in all,
//! of paths of at most 64 components; past that a mention is unknown (not reported), so
//! hostile output (a deep tree named by every line) costs the host bounded work.
//!
//! Not done: Landlock's audit records (ABI 7 logs a denial as an `AUDIT_LANDLOCK_ACCESS`
//! record naming the path, read by root through the audit netlink socket's log group). They
//! would name denials a tool does not print, but: denials after `execve` are logged only when
//! `landlock_restrict_self` is passed `LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON` (our sandbox is
//! applied before `exec`, in `linux-sandbox`'s child code, owned elsewhere), the records must be
//! matched to the call through its Landlock domain id, and it needs root, `CAP_AUDIT_READ` and
//! an enabled audit subsystem. The policy-derived answer here works for every user.

use std::path::{Path, PathBuf};

use crate::spec::SandboxSpec;

/// At most this many denials are reported for one call.
pub const MAX_DENIALS: usize = 16;

/// At most this many mentions are taken from one call's output.
pub const MAX_MENTIONS: usize = 64;

/// At most this many lines with a marker are read: a flood of one repeated error costs no more
/// than this.
const MAX_LINES: usize = 4 * MAX_MENTIONS;

/// Longest path the scanner takes (Linux's `PATH_MAX`).
const MAX_PATH: usize = 4096;

/// The access the sandbox refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeniedAccess {
    /// Reading a file or listing a directory.
    Read,
    /// Writing, truncating or removing a file: a line that says it opened the file for writing
    /// (`for writing`, `for output`), which creates a missing one too. Which of write and
    /// create is the line's word, never the host's look at the path (module docs).
    Write,
    /// Creating a file or directory: a line that says so (`cannot create`, `cannot touch`,
    /// `mkdir`), whether or not the file existed.
    Create,
    /// Executing a file.
    Execute,
}

impl DeniedAccess {
    /// The wire spelling: `read`, `write`, `create`, `execute`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeniedAccess::Read => "read",
            DeniedAccess::Write => "write",
            DeniedAccess::Create => "create",
            DeniedAccess::Execute => "execute",
        }
    }
}

/// One access the sandbox refused, as the agent sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The path as the output named it (made absolute against the command's working directory).
    pub path: PathBuf,
    /// What was refused.
    pub access: DeniedAccess,
    /// Why the policy refuses it.
    pub cause: Cause,
}

/// What an output line says was attempted, where it says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// Reading or listing (`cannot open directory`, `for reading`, `fopen(…, r)`, `scandir`).
    Read,
    /// Writing an existing file (`for writing`, `fopen(…, w)`).
    Write,
    /// Creating (`cannot create`, `cannot touch`, `mkdir`).
    Create,
    /// Removing (`cannot remove`, `unlink`, `rmdir`): a write in the parent directory.
    Remove,
    /// Executing (`cannot execute`, `spawn … EACCES`).
    Execute,
}

/// One path an output line names with a permission error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    /// The path as printed (unquoted).
    pub path: String,
    /// What the line says was attempted, if it says.
    pub verb: Option<Verb>,
    /// The error was `EROFS` (`Read-only file system`): some kind of write.
    pub read_only_fs: bool,
    /// The error was `ENOENT` (`No such file or directory`). In a view that holds only the
    /// grants (Linux's private root) a path outside them is simply not there, so this is how
    /// the sandbox refuses it; such a mention is explained only for that view, and only from
    /// the rules (never by looking whether the host has the file).
    pub missing: bool,
    /// The error was `EOVERFLOW` (`Value too large for defined data type`): changing a file
    /// in a directory seen through a private view (a toolchain's cache) whose owner the
    /// command's user namespace does not map, so the view cannot copy it.
    pub overflow: bool,
}

/// Error texts of `EACCES`, `EPERM` and `EROFS` (the private mount view is read-only outside
/// the writable roots, so a write there can fail with `EROFS` before Landlock is asked),
/// `ENOENT` and `EOVERFLOW` (a cache's view that cannot copy a file of an unmapped owner).
const MARKERS: &[(&str, Kind)] = &[
    ("Permission denied", Kind::Denied),
    ("permission denied", Kind::Denied),
    ("Operation not permitted", Kind::Denied),
    ("operation not permitted", Kind::Denied),
    ("Read-only file system", Kind::ReadOnlyFs),
    ("read-only file system", Kind::ReadOnlyFs),
    ("No such file or directory", Kind::Missing),
    ("no such file or directory", Kind::Missing),
    // dash: `cannot create /x/y: Directory nonexistent`.
    ("Directory nonexistent", Kind::Missing),
    ("Value too large for defined data type", Kind::Overflow),
    ("value too large for defined data type", Kind::Overflow),
];

/// Which error a marker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Denied,
    ReadOnlyFs,
    Missing,
    Overflow,
}

/// The paths `text` names with a permission error, in order, each `(path, verb)` once, at most
/// [`MAX_MENTIONS`]. Never panics; linear in `text`.
pub fn scan(text: &str) -> Vec<Mention> {
    let mut out: Vec<Mention> = Vec::new();
    for (start, end) in marked_lines(text).into_iter().take(MAX_LINES) {
        if out.len() >= MAX_MENTIONS {
            break;
        }
        let Some(m) = scan_line(&text[start..end]) else {
            continue;
        };
        // A path with control or bidirectional-override characters is not repeated to the
        // agent (or a user reading its remedy): an escape sequence or U+202E in a denial could
        // restyle or spoof the path a remedy asks the user to approve.
        if m.path.is_empty() || m.path.len() > MAX_PATH || m.path.chars().any(unsafe_char) {
            continue;
        }
        if !out.iter().any(|o| o.path == m.path && o.verb == m.verb) {
            out.push(m);
        }
    }
    out
}

/// Control characters (C0, DEL, C1) and the Unicode bidirectional controls.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}')
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// The `(start, end)` of each line holding a marker, in order. Why not every line: most output
/// has none, and a substring search over the whole text per needle is several times faster than
/// asking each line. Each needle's search resumes after the line it found, and looks back for
/// the line's start no further than the previous line it found, so every byte is read a
/// bounded number of times.
fn marked_lines(text: &str) -> Vec<(usize, usize)> {
    // The markers without their first letter, which is either case.
    const NEEDLES: [&str; 6] = [
        "ermission denied",
        "peration not permitted",
        "ead-only file system",
        "o such file or directory",
        "irectory nonexistent",
        "alue too large for defined data type",
    ];
    let mut lines = Vec::new();
    for needle in NEEDLES {
        let mut from = 0;
        while let Some(i) = text[from..].find(needle).map(|i| from + i) {
            let start = text[from..i].rfind('\n').map_or(from, |j| from + j + 1);
            let end = text[i..].find('\n').map_or(text.len(), |j| i + j);
            lines.push((start, end));
            // Bounded: enough lines for every mention, whatever the duplicates.
            if lines.len() >= MAX_LINES {
                break;
            }
            from = end;
        }
    }
    lines.sort_unstable();
    lines.dedup();
    lines
}

fn scan_line(line: &str) -> Option<Mention> {
    let (at, marker, kind) = MARKERS
        .iter()
        .filter_map(|(m, rofs)| line.find(m).map(|i| (i, *m, *rofs)))
        .min_by_key(|(i, _, _)| *i)?;
    let before = &line[..at];
    let after = &line[at + marker.len()..];
    let lower_before = before.to_ascii_lowercase();

    // OpenSSL: `…:Permission denied:…:calling fopen(/etc/ssl/openssl.cnf, rb)`.
    if let Some(i) = line.find("fopen(") {
        let rest = &line[i + "fopen(".len()..];
        let end = rest.find([',', ')'])?;
        let mode = rest[end..].trim_start_matches([',', ' ']);
        let verb = if rest.as_bytes().get(end) == Some(&b',') {
            match mode.bytes().next() {
                Some(b'r') => Some(Verb::Read),
                Some(b'w' | b'a') => Some(Verb::Write),
                _ => None,
            }
        } else {
            None
        };
        return Some(mention(&rest[..end], verb, kind));
    }
    // Node: `EACCES: permission denied, open '/x'`; `Error: spawn /x EACCES`.
    if let Some(rest) = after.strip_prefix(", ") {
        let (call, quoted) = rest.split_once(' ')?;
        let verb = match call {
            "mkdir" => Some(Verb::Create),
            "scandir" | "opendir" | "stat" | "lstat" | "access" => Some(Verb::Read),
            "unlink" | "rmdir" => Some(Verb::Remove),
            _ => None,
        };
        // `[Error: …, scandir '/x']` in an inspected error: the first quoted string.
        return Some(mention(&unquote_prefix(quoted)?, verb, kind));
    }
    // Python: `PermissionError: [Errno 13] Permission denied: '/x'`.
    if let Some(rest) = after.strip_prefix(": ") {
        if rest.starts_with(['\'', '"']) {
            let path = unquote(rest.trim_end())?;
            let verb = if lower_before.contains("mkdir") {
                Some(Verb::Create)
            } else {
                None
            };
            return Some(mention(&path, verb, kind));
        }
    }
    if let Some(i) = line.find("spawn ") {
        if line.contains("EACCES") || line.contains("EPERM") {
            let rest = &line[i + "spawn ".len()..];
            let path = rest.split(' ').next()?;
            return Some(mention(path, Some(Verb::Execute), kind));
        }
    }
    // The `prog: [what ]path: error` family: coreutils, dash, gcc, git.
    // … or `prog: what path (error)` (mawk: `cannot open "/x" for output (Permission denied)`).
    let head = before
        .strip_suffix(": ")
        .or_else(|| before.strip_suffix(':'))
        .or_else(|| before.strip_suffix(" (").filter(|_| after.starts_with(')')))?;
    let segment = match head.rfind(": ") {
        Some(i) => &head[i + 2..],
        None => head,
    };
    let is_open = |c: char| QUOTES.iter().any(|(o, _)| *o == c);
    let path = if segment.contains(is_open) {
        let start = segment.find(is_open)?;
        unquote_prefix(&segment[start..])?
    } else if let Some(rest) = segment
        .strip_prefix("cannot create ")
        .filter(|_| verb_of_program(line) == Some(Verb::Execute))
    {
        // dash's own redirection: `sh: 1: cannot create x/y: …`, the rest of the segment
        // whatever it holds (a relative path, spaces).
        rest.to_owned()
    } else if !segment.contains(char::is_whitespace) {
        segment.to_owned()
    } else {
        // `cannot create /x`, `could not lock config file /x`: the last word, if a path.
        let last = segment.rsplit(' ').next()?;
        if !last.starts_with('/') {
            return None;
        }
        last.to_owned()
    };
    let verb = verb_of(&lower_before).or_else(|| verb_of_program(line));
    Some(mention(&path, verb, kind))
}

fn verb_of(lower: &str) -> Option<Verb> {
    const TABLE: &[(&str, Verb)] = &[
        ("cannot create directory", Verb::Create),
        ("cannot create", Verb::Create),
        ("cannot touch", Verb::Create),
        ("cannot make directory", Verb::Create),
        ("cannot remove", Verb::Remove),
        ("cannot execute", Verb::Execute),
        ("cannot exec", Verb::Execute),
        ("for writing", Verb::Write),
        ("for output", Verb::Write),
        ("output file", Verb::Write),
        ("for reading", Verb::Read),
        ("cannot open directory", Verb::Read),
        ("cannot read", Verb::Read),
        ("cannot open", Verb::Read),
        ("can't open", Verb::Read),
        ("could not open", Verb::Read),
    ];
    TABLE
        .iter()
        .find(|(words, _)| lower.contains(words))
        .map(|(_, v)| *v)
}

/// What a line that does not say it was doing is doing, from the program that prints it:
/// `cat: x: Permission denied` is a read, `sh: 1: ./x: Permission denied` an exec. Without it,
/// a DAC error on a file the policy lets `cat` read would be taken for a refused execute.
fn verb_of_program(line: &str) -> Option<Verb> {
    const READERS: &[&str] = &[
        "cat",
        "head",
        "tail",
        "less",
        "more",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "wc",
        "sort",
        "uniq",
        "cut",
        "diff",
        "cmp",
        "md5sum",
        "sha1sum",
        "sha256sum",
        "file",
        "od",
        "xxd",
        "hexdump",
        "awk",
        "mawk",
        "gawk",
        "ls",
        "find",
        "du",
        "cc1",
        "cc1plus",
        "gcc",
        "g++",
        "cc",
        "c++",
        "clang",
        "javac",
        "java",
        "python",
        "python3",
        "node",
        "perl",
        "ruby",
    ];
    const SHELLS: &[&str] = &["sh", "dash", "bash", "zsh", "env", "xargs", "make", "nohup"];
    let program = line.split(':').next()?.trim();
    let program = program.rsplit('/').next()?;
    if READERS.contains(&program) {
        Some(Verb::Read)
    } else if SHELLS.contains(&program) {
        Some(Verb::Execute)
    } else {
        None
    }
}

fn mention(path: &str, verb: Option<Verb>, kind: Kind) -> Mention {
    let read_only_fs = kind == Kind::ReadOnlyFs;
    let missing = kind == Kind::Missing;
    Mention {
        missing,
        overflow: kind == Kind::Overflow,
        path: path.to_owned(),
        verb,
        read_only_fs,
    }
}

/// A string that is exactly one quoted path (`'…'` or `"…"`).
fn unquote(s: &str) -> Option<String> {
    let inner = unquote_prefix(s)?;
    let quotes = s.chars().next().map_or(0, char::len_utf8) * 2;
    (inner.len() + quotes == s.len()).then_some(inner)
}

/// Opening quotes and their closing ones: ASCII, and the typographic ones coreutils' `quote()`
/// prints in a UTF-8 locale (`mkdir: cannot create directory ‘/x’`).
const QUOTES: [(char, char); 4] = [
    ('\'', '\''),
    ('"', '"'),
    ('\u{2018}', '\u{2019}'),
    ('\u{201c}', '\u{201d}'),
];

/// The quoted string at the start of `s`. Escapes (`\'`, coreutils' `'\''`) are refused rather
/// than decoded: a wrong decoding would name another path.
fn unquote_prefix(s: &str) -> Option<String> {
    let open = s.chars().next()?;
    let (_, close) = QUOTES.iter().find(|(o, _)| *o == open)?;
    let rest = &s[open.len_utf8()..];
    let end = rest.find(*close)?;
    let inner = &rest[..end];
    if inner.contains('\\') || rest[end + close.len_utf8()..].starts_with('\\') {
        return None;
    }
    Some(inner.to_owned())
}

/// Why the policy refuses, independent of the platform; the tools word it for the agent (a
/// reason and a remedy in their own terms: this crate does not know them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Cause {
    /// No grant covers the path.
    Outside,
    /// Next to the system runtime's files but not one of them, and only root or a group may
    /// read it (`/etc/shadow`).
    SystemSecret,
    /// Next to the system runtime's files but not one of them.
    NotSystemRuntime,
    /// Covered by a grant that does not give this access.
    ReadOnly {
        /// Whether the grant is a system location (else the user's read-only extra path, or a
        /// read-write root asked to execute).
        system: bool,
    },
    /// The host's own state directory, or a private path (RCS-2).
    Hidden,
    /// A path kept read-only inside a writable root (RCS-3: `.git/hooks`, `.git/config`).
    Protected,
    /// A file with more than one link beneath a writable root, kept read-only so its other
    /// names (a package store's, another clone's) never change (TRUST-3).
    HardLinked,
    /// A file in a directory seen through a private view (a toolchain's cache) that belongs to
    /// a user the command's user namespace does not map (left by `sudo npm`): the view cannot
    /// copy it to change it (TRUST-3).
    ForeignOwner,
    /// A write in an entry of `/tmp` or `/var/tmp` that holds no grant, where they are
    /// read-only: the host's (no private root), or a private root whose grants beneath `/tmp`
    /// keep it from having a `/tmp` of its own (NET-2).
    ReadOnlyTmp,
    /// `.git` in the `run` mirror (macOS).
    DotGit,
    /// `run` executes its one program only.
    NotTheProgram,
}

impl Cause {
    /// Reason and remedy of a cause whose words name none of a tool's roots, so every tool
    /// says them alike; `None` for the causes each tool words in its own terms.
    pub fn common_words(self) -> Option<(&'static str, &'static str)> {
        match self {
            Cause::HardLinked => Some((
                "a file with another name elsewhere (a hard link into a package store such as \
                 pnpm's or uv's, or a local clone's objects): writing it would change every \
                 other name, so it is read-only",
                "write the result to another file; to make it writable, the user replaces the \
                 link with a copy outside the sandbox or reinstalls with copies: uv \
                 `--link-mode=copy`, pnpm `package-import-method=copy`, `git clone \
                 --no-hardlinks`",
            )),
            Cause::ForeignOwner => Some((
                "a file in a toolchain's cache that belongs to another user (left by `sudo \
                 npm`, `sudo pip`, …): the command's private copy of the cache cannot take it \
                 to change it",
                "ask the user to give the cache back to their own account (`sudo chown -R \
                 \"$USER\" <the cache>`), or leave that file as it is",
            )),
            Cause::ReadOnlyTmp => Some((
                "/tmp and /var/tmp are read-only for this command: they are the host's, or a \
                 folder it reads lies beneath /tmp and the command's own /tmp would widen what \
                 it may do there",
                "write temporary files to $TMPDIR, the call's own temp dir (`mktemp` without a \
                 directory, Python's tempfile and most tools use it; Java needs \
                 `-Djava.io.tmpdir=$TMPDIR`)",
            )),
            _ => None,
        }
    }
}

/// The denials among the permission errors `stderr` and `stdout` name, for a program that ran
/// under `spec` in `cwd`: [`scan_output`] then [`explain`]. Call it right after the program
/// ended, before its temp dir is removed (a missing file is explained by its nearest existing
/// directory). At most 512 lookups are made (module docs).
pub fn find(
    spec: &SandboxSpec,
    cwd: &Path,
    view: View,
    stdout: &[u8],
    stderr: &[u8],
) -> Vec<Denial> {
    explain(spec, cwd, view, &scan_output(stdout, stderr))
}

/// What the program saw of the file system, which decides what a `No such file or directory`
/// means ([`Outcome::view_is_grants_only`](crate::Outcome::view_is_grants_only)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The host's tree (read-only or not): a missing path is missing.
    Host,
    /// Only the grants and the system runtime: a path outside them is not there.
    GrantsOnly,
    /// As [`GrantsOnly`](View::GrantsOnly), with `/tmp` and `/var/tmp` the program's own
    /// (NET-2): a path there that no grant covers was its own, allowed or missing as its own
    /// files made it, never refused.
    GrantsAndOwnTmp,
}

/// The program's own temp directories in [`View::GrantsAndOwnTmp`], read-only elsewhere.
const OWN_TMP: [&str; 2] = ["/tmp", "/var/tmp"];

/// The mentions of a program's output, stderr first, at most [`MAX_MENTIONS`]. Touches no
/// file: a caller may run it inline and move [`explain`] (which looks at the file system) off
/// an async thread only when something was found.
pub fn scan_output(stdout: &[u8], stderr: &[u8]) -> Vec<Mention> {
    let mut mentions = scan(&String::from_utf8_lossy(stderr));
    if mentions.len() < MAX_MENTIONS {
        for m in scan(&String::from_utf8_lossy(stdout)) {
            if mentions.len() >= MAX_MENTIONS {
                break;
            }
            if !mentions.contains(&m) {
                mentions.push(m);
            }
        }
    }
    mentions
}

/// The mentions the policy of `spec` denies, as [`Denial`]s (at most [`MAX_DENIALS`], each
/// `(path, access)` once); relative paths are taken against `cwd`.
pub fn explain(spec: &SandboxSpec, cwd: &Path, view: View, mentions: &[Mention]) -> Vec<Denial> {
    let mentions: Vec<Mention> = mentions
        .iter()
        .filter(|m| !m.missing || view != View::Host)
        .cloned()
        .collect();
    if mentions.is_empty() {
        return Vec::new();
    }
    let Some(judge) = Judge::new(spec) else {
        return Vec::new();
    };
    judged(&judge, cwd, view, &mentions)
}

/// [`explain`] with the judge given (tests count its lookups).
fn judged(judge: &Judge, cwd: &Path, view: View, mentions: &[Mention]) -> Vec<Denial> {
    let mut out: Vec<Denial> = Vec::new();
    for m in mentions {
        if out.len() >= MAX_DENIALS {
            break;
        }
        let Some(path) = absolute(cwd, &m.path) else {
            continue;
        };
        if m.overflow {
            // Only a view's copy-up says this for the sandbox's sake; elsewhere it is the
            // program's own (a file too large for a 32-bit reader).
            let viewed = judge.staged.iter().any(|d| path.starts_with(d));
            if viewed && !out.iter().any(|d| d.path == path) {
                out.push(Denial {
                    path,
                    access: DeniedAccess::Write,
                    cause: Cause::ForeignOwner,
                });
            }
            continue;
        }
        if view == View::GrantsAndOwnTmp && in_own_tmp(&path, &judge.grants) {
            continue;
        }
        let Some((access, mut why)) = judge.first_denied(&path, m) else {
            continue;
        };
        let writing = matches!(access, DeniedAccess::Write | DeniedAccess::Create);
        if writing && why == Cause::Outside && in_own_tmp(&path, &judge.grants) {
            why = Cause::ReadOnlyTmp;
        }
        // A missing path is the sandbox's doing only where the view lacks it: outside every
        // grant, or hidden. A read-only grant does not make a path vanish.
        if m.missing && matches!(why, Cause::ReadOnly { .. }) {
            continue;
        }
        if out.iter().any(|d| d.path == path && d.access == access) {
            continue;
        }
        out.push(Denial {
            path,
            access,
            cause: why,
        });
    }
    out
}

/// Whether `path` lies in `/tmp` or `/var/tmp` away from the grants: in an entry of it that
/// holds no grant. In [`View::GrantsAndOwnTmp`] that is the program's own tmpfs, which the
/// host's `/tmp` says nothing about (so it is not looked up); elsewhere the temp area a write
/// was refused in ([`Cause::ReadOnlyTmp`]). An entry that holds grants shows the host's paths
/// as the view has them (only the grants).
fn in_own_tmp(path: &Path, grants: &[PathBuf]) -> bool {
    OWN_TMP.iter().any(|tmp| {
        let Ok(rest) = path.strip_prefix(tmp) else {
            return false;
        };
        let Some(top) = rest.components().next() else {
            return false;
        };
        let entry = Path::new(tmp).join(top);
        !grants.iter().any(|g| g.starts_with(&entry))
    })
}

/// `path` made absolute against `cwd`; `None` for a relative path with `..` (the command may
/// have changed directory, so where it points cannot be told) or `~`.
fn absolute(cwd: &Path, path: &str) -> Option<PathBuf> {
    let p = Path::new(path);
    if p.is_absolute() {
        return Some(p.to_path_buf());
    }
    if path.starts_with('~') || p.components().any(|c| c == std::path::Component::ParentDir) {
        return None;
    }
    // `.` changes nothing, even after a link: dropped so the path reads as the agent wrote it.
    Some(
        cwd.join(p)
            .components()
            .filter(|c| *c != std::path::Component::CurDir)
            .collect(),
    )
}

/// The order accesses are asked in when the line does not say which (LIVE-4). Not execute: a
/// line that does not say it ran something is not taken for a refused exec (a file's own mode
/// fails an exec first, and the host does not look at modes for the agent; module docs).
const UNSAID: [DeniedAccess; 2] = [DeniedAccess::Read, DeniedAccess::Write];

/// Paths of the program's own views: `/dev/fd/2` is the program's stderr, not the host's
/// (module docs). Never explained, on either platform.
fn own_view(path: &Path) -> bool {
    const VIEWS: [&str; 5] = [
        "/proc",
        "/dev/fd",
        "/dev/stdin",
        "/dev/stdout",
        "/dev/stderr",
    ];
    VIEWS.iter().any(|v| path.starts_with(v))
}

/// The policy of one call, asked about accesses.
struct Judge {
    #[cfg(target_os = "linux")]
    explainer: linux_sandbox::Explainer,
    #[cfg(not(target_os = "linux"))]
    bound: seatbelt::BoundProfile,
    /// Lookups the Seatbelt resolution made ([`MAX_LOOKUPS`] at most; Linux counts its own).
    #[cfg_attr(target_os = "linux", allow(dead_code))]
    lookups: std::cell::Cell<usize>,
    /// The directories the command saw through a private view.
    staged: Vec<PathBuf>,
    /// The paths of the spec's grants, as it names them.
    grants: Vec<PathBuf>,
}

impl Judge {
    #[cfg(target_os = "linux")]
    fn new(spec: &SandboxSpec) -> Option<Judge> {
        let policy = crate::linux::policy(spec).ok()?;
        Some(Judge {
            explainer: policy.explainer(),
            lookups: std::cell::Cell::new(0),
            staged: spec.staged.iter().map(|s| s.dir.clone()).collect(),
            grants: spec.grants.iter().map(|g| g.path.clone()).collect(),
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn new(spec: &SandboxSpec) -> Option<Judge> {
        let bound = crate::macos::profile_spec(spec).build().ok()?;
        Some(Judge {
            bound,
            lookups: std::cell::Cell::new(0),
            staged: spec.staged.iter().map(|s| s.dir.clone()).collect(),
            grants: spec.grants.iter().map(|g| g.path.clone()).collect(),
        })
    }

    /// The first access of the mention that the policy denies, and why. The access is the
    /// line's own word (or the first of [`UNSAID`] denied), never what the host finds at the
    /// path: whether `touch x` met an existing `x` is not the host's to tell (module docs).
    fn first_denied(&self, path: &Path, m: &Mention) -> Option<(DeniedAccess, Cause)> {
        if own_view(path) {
            return None;
        }
        let asked: &[DeniedAccess] = match (m.verb, m.read_only_fs) {
            (Some(Verb::Read), _) => &[DeniedAccess::Read],
            (Some(Verb::Write), _) => &[DeniedAccess::Write],
            (Some(Verb::Create), _) => &[DeniedAccess::Create],
            (Some(Verb::Remove), _) => {
                // Removing is a write in the parent directory.
                let parent = path.parent()?;
                return self
                    .why(parent, DeniedAccess::Create)
                    .map(|w| (DeniedAccess::Write, w));
            }
            (Some(Verb::Execute), _) => &[DeniedAccess::Execute],
            (None, true) => &[DeniedAccess::Write],
            (None, false) => &UNSAID,
        };
        asked
            .iter()
            .find_map(|access| self.why(path, *access).map(|why| (*access, why)))
    }

    /// Why the policy denies `access` to `path`; `None` when it allows it or cannot tell.
    #[cfg(target_os = "linux")]
    fn why(&self, path: &Path, access: DeniedAccess) -> Option<Cause> {
        use linux_sandbox::{Access, Denial as D, Explanation};
        let rights = match access {
            DeniedAccess::Read => Access::READ,
            DeniedAccess::Write | DeniedAccess::Create => Access::WRITE,
            DeniedAccess::Execute => Access::EXECUTE,
        };
        match self.explainer.explain(path, rights) {
            Explanation::Denied(d) => Some(match d {
                D::Hidden { .. } => Cause::Hidden,
                D::Protected { .. } => Cause::Protected,
                D::Frozen { .. } => Cause::HardLinked,
                D::NotTheProgram { .. } => Cause::NotTheProgram,
                D::NotGranted { system, .. } if access != DeniedAccess::Read => {
                    Cause::ReadOnly { system }
                }
                D::Outside {
                    system_area: Some(_),
                    world_readable,
                } => {
                    if access == DeniedAccess::Read && world_readable == Some(false) {
                        Cause::SystemSecret
                    } else {
                        Cause::NotSystemRuntime
                    }
                }
                _ => Cause::Outside,
            }),
            _ => None,
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn why(&self, path: &Path, access: DeniedAccess) -> Option<Cause> {
        let resolved = resolve_for_seatbelt(&self.bound, path, &self.lookups)?;
        seatbelt_why(&self.bound, &resolved, access)
    }

    /// Lookups made for this call so far.
    #[cfg(test)]
    fn lookups(&self) -> usize {
        #[cfg(target_os = "linux")]
        return self.explainer.lookups();
        #[cfg(not(target_os = "linux"))]
        return self.lookups.get();
    }
}

/// Lookups one call makes at most: the Seatbelt resolution here, `linux_sandbox`'s explainer on
/// Linux (its own `MAX_LOOKUPS`, the same number: a test compares them).
#[cfg_attr(target_os = "linux", allow(dead_code))]
const MAX_LOOKUPS: usize = 512;

/// A path with more components is not explained (as `linux_sandbox::MAX_COMPONENTS`).
#[cfg_attr(target_os = "linux", allow(dead_code))]
const MAX_COMPONENTS: usize = 64;

/// The path Seatbelt matches, resolved the way the program could resolve it itself (module
/// docs): symbolic links are followed only where the program may list the directory (the
/// profile allows reading it), on the way to a root of the profile and in `/` (`/tmp` →
/// `/private/tmp`); the rest is kept as written. `None` (claim nothing) for `..` after a
/// component not looked up, more than [`MAX_COMPONENTS`] components or 40 links, or once
/// `lookups` reached [`MAX_LOOKUPS`].
#[cfg_attr(target_os = "linux", allow(dead_code))]
fn resolve_for_seatbelt(
    bound: &seatbelt::BoundProfile,
    path: &Path,
    lookups: &std::cell::Cell<usize>,
) -> Option<String> {
    use std::collections::VecDeque;
    use std::ffi::OsString;
    use std::path::Component;
    fn push_front(pending: &mut VecDeque<OsString>, path: &Path) -> Option<()> {
        // Counted before anything is copied: a hostile path may have thousands.
        if path.components().count() + pending.len() > MAX_COMPONENTS + 1 {
            return None;
        }
        let names: Vec<OsString> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_owned()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect();
        (names.len() + pending.len() <= MAX_COMPONENTS).then_some(())?;
        for n in names.into_iter().rev() {
            pending.push_front(n);
        }
        Some(())
    }
    let spend = || {
        let n = lookups.get();
        (n < MAX_LOOKUPS).then(|| lookups.set(n + 1))
    };
    if !path.is_absolute() {
        return None;
    }
    let roots: Vec<&str> = bound.params().iter().map(|(_, v)| v).collect();
    let mut pending = VecDeque::new();
    push_front(&mut pending, path)?;
    let mut current = PathBuf::from("/");
    let mut looking = true;
    let (mut links, mut walked) = (0usize, 0usize);
    while let Some(name) = pending.pop_front() {
        walked += 1;
        if walked > 4 * MAX_COMPONENTS {
            return None;
        }
        if name == ".." {
            if !looking {
                return None;
            }
            current.pop();
            continue;
        }
        let entry = current.join(&name);
        let may_look = looking
            && (current == Path::new("/")
                || roots.iter().any(|r| Path::new(r).starts_with(&entry))
                || current.to_str().is_some_and(|dir| {
                    matches!(
                        bound.explain(dir, seatbelt::FileAccess::Read),
                        seatbelt::Explanation::Allowed(_)
                    )
                }));
        if !may_look {
            looking = false;
            current = entry;
            continue;
        }
        spend()?;
        match std::fs::symlink_metadata(&entry) {
            Ok(m) if m.file_type().is_symlink() => {
                links += 1;
                if links > 40 {
                    return None;
                }
                spend()?;
                let target = std::fs::read_link(&entry).ok()?;
                if target.is_absolute() {
                    current = PathBuf::from("/");
                }
                push_front(&mut pending, &target)?;
            }
            Ok(_) => current = entry,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                looking = false;
                current = entry;
            }
            Err(_) => return None,
        }
    }
    current.to_str().map(str::to_owned)
}

/// The Seatbelt evaluator's answer as a [`Cause`] (portable: tested on Linux with a model
/// profile).
#[cfg_attr(target_os = "linux", allow(dead_code))]
fn seatbelt_why(bound: &seatbelt::BoundProfile, path: &str, access: DeniedAccess) -> Option<Cause> {
    use seatbelt::{Denial as D, Explanation, FileAccess, Grantor};
    let asked = match access {
        DeniedAccess::Read => FileAccess::Read,
        DeniedAccess::Write => FileAccess::Write,
        DeniedAccess::Create => FileAccess::Create,
        DeniedAccess::Execute => FileAccess::Execute,
    };
    match bound.explain(path, asked) {
        Explanation::Denied(d) => Some(match d {
            D::Outside => Cause::Outside,
            D::DotGit => Cause::DotGit,
            D::NotTheProgram => Cause::NotTheProgram,
            D::ReadOnly(Grantor::System) => Cause::ReadOnly { system: true },
            D::ReadOnly(_) => Cause::ReadOnly { system: false },
            _ => return None,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
