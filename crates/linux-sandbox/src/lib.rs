//! Linux enforcement: Landlock + seccomp (not implemented yet).
//!
//! Will own: a small policy type (readable, writable and executable paths; network none/all; hard
//! links denied; may-spawn; signal and abstract-socket scopes), its translation into a Landlock
//! ruleset at the newest ABI the kernel offers with the enforcement status reported, a seccomp
//! filter (no `link`, no `io_uring`, no `ptrace`, no mounts or namespaces, no network sockets
//! other than `AF_UNIX`, optionally no fork), applied in the child between `fork` and `exec`, and
//! a cached availability probe. SPEC: RUN-6, RUN-7, CMD-2, CMD-9, CMD-10.
//!
//! Will refuse to know: tools, arguments, macOS, output capture.
