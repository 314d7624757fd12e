//! macOS Seatbelt profiles as a typed DSL (not implemented yet).
//!
//! Will own: the SBPL abstract syntax (`Profile`, `Rule`, `Operation`, `Filter`), a renderer that
//! passes every user path as a `-D KEY=VALUE` parameter (never spliced into profile text), a
//! parser for everything the renderer emits, and an evaluator that answers "would this profile
//! allow operation X on path P" so profiles are tested on Linux. The `sandbox-exec` launcher is
//! the only macOS-only code. SPEC: RUN-6, RUN-7, CMD-2, CMD-9, CMD-10.
//!
//! Will refuse to know: tools, arguments, processes other than the one it launches.
