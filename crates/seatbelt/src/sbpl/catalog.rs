//! The names SBPL profiles use: every operation and filter found in the public profiles this
//! crate was written against, each marked modelled (the evaluator decides it) or recognised
//! only (it parses and evaluates, and a decision that depends on it is "not modelled").
//!
//! Sources of the names: fG!'s "Apple Sandbox Guide v1.0" operation table, the profiles Apple
//! ships in `/System/Library/Sandbox/Profiles`, Chromium's `sandbox/policy/mac/*.sb`, Codex's
//! `seatbelt_base_policy.sbpl`, and the operation list `sandbox-exec` prints for an unknown name.
//! None of those profiles is copied here; only the names are.
//!
//! A name ending in `*` is a wildcard: it covers every operation whose name starts with the part
//! before the `*` (`file-read*` covers `file-read-data`; `file*` covers `file-link`, which
//! `file-write*` does not).

/// What a modelled operation is aimed at, and so which filters can decide it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ObjectKind {
    /// A file path: `literal`, `path`, `subpath`, `prefix`, `regex`, `vnode-type`.
    Path,
    /// Nothing: only filter-less rules decide (`process-fork`).
    Nothing,
    /// A process, by its relation to the caller: `target`.
    Process,
    /// A network address or a Unix socket path: `remote`, `local`, path filters.
    Network,
    /// A sysctl name: `sysctl-name`, `sysctl-name-prefix`, `sysctl-name-regex`.
    Sysctl,
    /// A Mach service name: `global-name`, `global-name-prefix`, `global-name-regex`.
    MachService,
}

/// `(name, object)`: `Some` for the modelled operations. Wildcards are listed with the object of
/// their members (or `None` when the family mixes kinds).
pub const OPERATIONS: &[(&str, Option<ObjectKind>)] = {
    use ObjectKind::{
        MachService as M, Network as N, Nothing as X, Path as P, Process as T, Sysctl as S,
    };
    &[
        ("appleevent-send", None),
        ("authorization-right-obtain", None),
        ("boot-arg-set", None),
        ("darwin-notification-post", None),
        ("device*", None),
        ("device-camera", None),
        ("device-microphone", None),
        ("distributed-notification-post", None),
        ("dynamic-code-generation", None),
        ("file*", Some(P)),
        ("file-chroot", Some(P)),
        ("file-clone", Some(P)),
        ("file-ioctl", Some(P)),
        ("file-issue-extension", None),
        ("file-link", Some(P)),
        ("file-map-executable", Some(P)),
        ("file-mknod", Some(P)),
        ("file-mount", Some(P)),
        ("file-mount-update", Some(P)),
        ("file-read*", Some(P)),
        ("file-read-data", Some(P)),
        ("file-read-metadata", Some(P)),
        ("file-read-xattr", Some(P)),
        ("file-revoke", Some(P)),
        ("file-search", Some(P)),
        ("file-test-existence", Some(P)),
        ("file-unmount", Some(P)),
        ("file-write*", Some(P)),
        ("file-write-acl", Some(P)),
        ("file-write-create", Some(P)),
        ("file-write-data", Some(P)),
        ("file-write-flags", Some(P)),
        ("file-write-mode", Some(P)),
        ("file-write-owner", Some(P)),
        ("file-write-setugid", Some(P)),
        ("file-write-times", Some(P)),
        ("file-write-unlink", Some(P)),
        ("file-write-xattr", Some(P)),
        ("fs-snapshot*", None),
        ("fs-snapshot-create", None),
        ("fs-snapshot-delete", None),
        ("fs-snapshot-mount", None),
        ("fs-snapshot-revert", None),
        ("generic-issue-extension", None),
        ("hid-control", None),
        ("iokit*", None),
        ("iokit-get-properties", None),
        ("iokit-issue-extension", None),
        ("iokit-open", None),
        ("iokit-open-service", None),
        ("iokit-open-user-client", None),
        ("iokit-set-properties", None),
        ("ipc*", None),
        ("ipc-posix*", None),
        ("ipc-posix-issue-extension", None),
        ("ipc-posix-sem", None),
        ("ipc-posix-sem*", None),
        ("ipc-posix-sem-create", None),
        ("ipc-posix-sem-open", None),
        ("ipc-posix-sem-post", None),
        ("ipc-posix-sem-unlink", None),
        ("ipc-posix-sem-wait", None),
        ("ipc-posix-shm", None),
        ("ipc-posix-shm*", None),
        ("ipc-posix-shm-read*", None),
        ("ipc-posix-shm-read-data", None),
        ("ipc-posix-shm-read-metadata", None),
        ("ipc-posix-shm-write*", None),
        ("ipc-posix-shm-write-create", None),
        ("ipc-posix-shm-write-data", None),
        ("ipc-posix-shm-write-unlink", None),
        ("ipc-sysv*", None),
        ("ipc-sysv-msg", None),
        ("ipc-sysv-sem", None),
        ("ipc-sysv-shm", None),
        ("job-creation", None),
        ("load-unsigned-code", None),
        ("lsopen", None),
        ("mach*", None),
        ("mach-bootstrap", None),
        ("mach-cross-domain-lookup", None),
        ("mach-derive-port", None),
        ("mach-host*", None),
        ("mach-host-exception-port-set", None),
        ("mach-host-special-port-set", None),
        ("mach-issue-extension", None),
        ("mach-kernel-endpoint", None),
        ("mach-lookup", Some(M)),
        ("mach-message-send", None),
        ("mach-per-user-lookup", None),
        ("mach-priv*", None),
        ("mach-priv-host-port", None),
        ("mach-priv-task-port", None),
        ("mach-register", None),
        ("mach-task*", None),
        ("mach-task-inspect", None),
        ("mach-task-name", None),
        ("mach-task-read", None),
        ("mach-task-special-port*", None),
        ("mach-task-special-port-get", None),
        ("mach-task-special-port-set", None),
        ("network*", Some(N)),
        ("network-bind", Some(N)),
        ("network-inbound", Some(N)),
        ("network-outbound", Some(N)),
        ("nvram*", None),
        ("nvram-delete", None),
        ("nvram-get", None),
        ("nvram-set", None),
        ("opendirectory-user-modify", None),
        ("process*", None),
        ("process-codesigning*", None),
        ("process-codesigning-status-get", None),
        ("process-codesigning-status-set", None),
        ("process-exec*", Some(P)),
        ("process-exec", Some(P)),
        ("process-exec-interpreter", Some(P)),
        ("process-fork", Some(X)),
        ("process-info*", Some(T)),
        ("process-info-codesignature", Some(T)),
        ("process-info-dirtycontrol", Some(T)),
        ("process-info-listpids", Some(T)),
        ("process-info-ledger", Some(T)),
        ("process-info-pidfdinfo", Some(T)),
        ("process-info-pidfileportinfo", Some(T)),
        ("process-info-pidinfo", Some(T)),
        ("process-info-rusage", Some(T)),
        ("process-info-setcontrol", Some(T)),
        ("pseudo-tty", None),
        ("signal", Some(T)),
        ("socket-ioctl", None),
        ("socket-option*", None),
        ("socket-option-get", None),
        ("socket-option-set", None),
        ("syscall*", None),
        ("syscall-mach", None),
        ("syscall-mig", None),
        ("syscall-unix", None),
        ("sysctl*", Some(S)),
        ("sysctl-read", Some(S)),
        ("sysctl-write", Some(S)),
        ("system*", None),
        ("system-acct", None),
        ("system-audit", None),
        ("system-chud", None),
        ("system-debug", None),
        ("system-fsctl", None),
        ("system-info", None),
        ("system-kext*", None),
        ("system-kext-load", None),
        ("system-kext-query", None),
        ("system-kext-unload", None),
        ("system-mac-label", None),
        ("system-memorystatus-control", None),
        ("system-necp-client-action", None),
        ("system-nfssvc", None),
        ("system-package-check", None),
        ("system-privilege", None),
        ("system-reboot", None),
        ("system-sched", None),
        ("system-set-time", None),
        ("system-socket", None),
        ("system-suspend-resume", None),
        ("system-swap", None),
        ("user-preference*", None),
        ("user-preference-read", None),
        ("user-preference-write", None),
    ]
};

/// Filters the evaluator decides.
pub const MODELLED_FILTERS: &[&str] = &[
    "literal",
    "path",
    "subpath",
    "prefix",
    "regex",
    "path-literal",
    "path-prefix",
    "path-regex",
    "vnode-type",
    "require-all",
    "require-any",
    "require-not",
    "target",
    "sysctl-name",
    "sysctl-name-prefix",
    "sysctl-name-regex",
    "global-name",
    "global-name-prefix",
    "global-name-regex",
    "local-name",
    "remote",
    "local",
];

/// Filters that parse and evaluate but never decide: a rule that needs one to match is "not
/// modelled" for the request.
pub const RECOGNISED_FILTERS: &[&str] = &[
    "appleevent-destination",
    "control-name",
    "debug-mode",
    "device-conforms-to",
    "device-major",
    "device-minor",
    "entitlement-is-present",
    "entitlement-is-bool-true",
    "extension",
    "extension-class",
    "file-attribute",
    "file-mode",
    "fsctl-command",
    "info-type",
    "iokit-connection",
    "iokit-property",
    "iokit-registry-entry-class",
    "iokit-user-client-class",
    "ioctl-command",
    "ipc-posix-name",
    "ipc-posix-name-prefix",
    "ipc-posix-name-regex",
    "kernel-mig-routine",
    "kext-bundle-id",
    "local-name-prefix",
    "local-name-regex",
    "machtrap-number",
    "mount-relative-path",
    "mount-relative-regex",
    "notification-name",
    "preference-domain",
    "process-attribute",
    "process-path",
    "require-entitlement",
    "right-name",
    "semaphore-owner",
    "signing-identifier",
    "socket-domain",
    "socket-protocol",
    "socket-type",
    "storage-class",
    "syscall-number",
    "system-attribute",
    "uid",
    "xattr",
    "xattr-prefix",
    "xattr-regex",
    "xpc-service-name",
    "xpc-service-name-prefix",
    "xpc-service-name-regex",
];

/// The catalog entry of an operation name.
pub fn operation(name: &str) -> Option<(&'static str, Option<ObjectKind>)> {
    OPERATIONS.iter().copied().find(|(n, _)| *n == name)
}

/// The catalog spelling of a filter name, if recognised.
pub fn filter(name: &str) -> Option<&'static str> {
    MODELLED_FILTERS
        .iter()
        .chain(RECOGNISED_FILTERS)
        .copied()
        .find(|n| *n == name)
}

/// Whether the filter is decided by the evaluator.
pub fn filter_is_modelled(name: &str) -> bool {
    MODELLED_FILTERS.contains(&name)
}

/// Whether a rule naming `rule_op` applies to the concrete operation `op`.
pub fn covers(rule_op: &str, op: &str) -> bool {
    match rule_op.strip_suffix('*') {
        Some(stem) => op.starts_with(stem),
        None => rule_op == op,
    }
}

/// The catalog operation closest to `name` (edit distance at most 3), for "did you mean".
pub fn suggest(name: &str) -> Option<&'static str> {
    OPERATIONS
        .iter()
        .map(|(n, _)| (distance(name, n), *n))
        .filter(|(d, _)| *d <= 3)
        .min()
        .map(|(_, n)| n)
}

/// The filter, operation or `extra` name closest to `name`, for "did you mean".
pub fn suggest_name(name: &str, extra: &[&'static str]) -> Option<&'static str> {
    OPERATIONS
        .iter()
        .map(|(n, _)| *n)
        .chain(MODELLED_FILTERS.iter().copied())
        .chain(RECOGNISED_FILTERS.iter().copied())
        .chain(extra.iter().copied())
        .map(|n| (distance(name, n), n))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, n)| n)
}

/// Levenshtein distance over characters; names are short, so the quadratic table is fine.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}
