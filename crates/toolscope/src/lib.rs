//! The policy gate every tool call passes (not implemented yet).
//!
//! Will own: capabilities (`local.terminal.exec@1`), grants and consents as data, the `Authority`
//! trait queried before and during a call, `ToolScope` (callId dedup, the 32-call budget per
//! turn), `CallContext` (cancellation, revocation watch, account-generation lease), and the stable
//! error codes with their JSON shape. SPEC: TS-1…TS-5, PERM-1, PERM-2, CMD-12, RUN-13.
//!
//! Will refuse to know: how a tool runs, any sandbox, any file system layout.
