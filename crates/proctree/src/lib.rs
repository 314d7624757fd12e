//! Nothing a command starts survives it (not implemented yet).
//!
//! Will own: `ProcessId` (PID + start time), a tracker that records every descendant of a command
//! (process-group expansion only while an identity-checked member anchors the group), a
//! supervisor that is a child subreaper or PID 1 of a PID namespace, and freeze-rescan-kill with
//! identity re-checked before each signal, counting what it stopped. SPEC: CMD-6, CMD-7, RUN-10.
//!
//! Will refuse to know: sandboxes, tools, output capture.
