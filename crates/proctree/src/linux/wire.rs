//! The supervisor's reports to the host: one typed [`Message`], one [`encode`](Message::encode)
//! and one [`decode`](Message::decode).
//!
//! A message travels as one fixed 16-byte record (kind: `u32`, then a `u32` and a `u64`, native
//! byte order, both ends are the same process image), so each is written with one `send` and
//! two writers never interleave. What the two values mean depends on the kind; that knowledge
//! lives here only, so a PID can no longer be read where an errno was written.
//!
//! Encoding runs in the supervisor and in the command's main process between `clone` and
//! `execve`: it is async-signal-safe — a stack array built from constant indices, no
//! allocation, no slice that could be out of range, no panic path. Decoding runs in the host and
//! treats the bytes as untrusted: an unknown kind, an unknown stage, a negative errno or a
//! non-zero unused field is a [`WireError`], never a panic, so `encode(decode(b)) == b` for
//! every record `decode` accepts.

/// Bytes of one record on the host channel.
pub(crate) const RECORD: usize = 16;

const KIND_STARTED: u32 = 1;
const KIND_FAILED: u32 = 2;
const KIND_MAIN_EXITED: u32 = 3;
const KIND_DONE: u32 = 4;

/// Where a spawn failed, carried by [`Message::Failed`]; each maps to one `SpawnError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Writing the user namespace's uid/gid maps.
    IdMap = 1,
    /// The supervisor's own setup (signals, reaper role, namespaces, the main process's clone).
    Setup = 2,
    /// Entering the working directory.
    Cwd = 3,
    /// The caller's pre-exec hook (the sandbox); the errno is the hook's code.
    PreExec = 4,
    /// `execve` itself.
    Exec = 5,
}

impl Stage {
    fn from_wire(value: u64) -> Option<Stage> {
        Some(match value {
            1 => Stage::IdMap,
            2 => Stage::Setup,
            3 => Stage::Cwd,
            4 => Stage::PreExec,
            5 => Stage::Exec,
            _ => return None,
        })
    }
}

/// One report from the supervisor (or, for [`Message::Failed`], from the main process through
/// the supervisor) to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Message {
    /// The main process runs: its host PID and start time (0 when `/proc` does not show it).
    Started { pid: u32, start_time: u64 },
    /// Spawning failed at `stage` with `errno` (never negative).
    Failed { errno: i32, stage: Stage },
    /// The main process exited with this raw wait status.
    MainExited { status: i32 },
    /// The supervisor killed `killed` processes the host had not, reaped everything and is
    /// exiting.
    Done { killed: u32 },
}

/// A record the host cannot read as a [`Message`]: the channel is not speaking our protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the supervisor sent a malformed record (kind {kind})")]
pub(crate) struct WireError {
    kind: u32,
}

impl Message {
    /// A failure report; a negative `errno` (no system call returns one) is sent as 0.
    pub(crate) const fn failed(errno: i32, stage: Stage) -> Message {
        Message::Failed {
            errno: if errno < 0 { 0 } else { errno },
            stage,
        }
    }

    /// The record for this message. Async-signal-safe: no allocation, no panic path.
    pub(crate) const fn encode(self) -> [u8; RECORD] {
        let (kind, a, b) = match self {
            Message::Started { pid, start_time } => (KIND_STARTED, pid, start_time),
            Message::Failed { errno, stage } => (KIND_FAILED, errno as u32, stage as u64),
            Message::MainExited { status } => (KIND_MAIN_EXITED, status as u32, 0),
            Message::Done { killed } => (KIND_DONE, killed, 0),
        };
        let k = kind.to_ne_bytes();
        let a = a.to_ne_bytes();
        let b = b.to_ne_bytes();
        [
            k[0], k[1], k[2], k[3], a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3], b[4], b[5],
            b[6], b[7],
        ]
    }

    /// Reads one record.
    ///
    /// # Errors
    /// [`WireError`] for a record no [`encode`](Self::encode) produces.
    pub(crate) fn decode(record: &[u8; RECORD]) -> Result<Message, WireError> {
        let [
            k0,
            k1,
            k2,
            k3,
            a0,
            a1,
            a2,
            a3,
            b0,
            b1,
            b2,
            b3,
            b4,
            b5,
            b6,
            b7,
        ] = *record;
        let kind = u32::from_ne_bytes([k0, k1, k2, k3]);
        let a = u32::from_ne_bytes([a0, a1, a2, a3]);
        let b = u64::from_ne_bytes([b0, b1, b2, b3, b4, b5, b6, b7]);
        let bad = WireError { kind };
        match kind {
            KIND_STARTED => Ok(Message::Started {
                pid: a,
                start_time: b,
            }),
            KIND_FAILED => Ok(Message::Failed {
                errno: i32::try_from(a).map_err(|_| bad)?,
                stage: Stage::from_wire(b).ok_or(bad)?,
            }),
            KIND_MAIN_EXITED if b == 0 => Ok(Message::MainExited {
                status: i32::from_ne_bytes(a.to_ne_bytes()),
            }),
            KIND_DONE if b == 0 => Ok(Message::Done { killed: a }),
            _ => Err(bad),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stage() -> impl Strategy<Value = Stage> {
        prop_oneof![
            Just(Stage::IdMap),
            Just(Stage::Setup),
            Just(Stage::Cwd),
            Just(Stage::PreExec),
            Just(Stage::Exec),
        ]
    }

    fn message() -> impl Strategy<Value = Message> {
        prop_oneof![
            (any::<u32>(), any::<u64>())
                .prop_map(|(pid, start_time)| Message::Started { pid, start_time }),
            (0..=i32::MAX, stage()).prop_map(|(errno, stage)| Message::Failed { errno, stage }),
            any::<i32>().prop_map(|status| Message::MainExited { status }),
            any::<u32>().prop_map(|killed| Message::Done { killed }),
        ]
    }

    proptest! {
        #[test]
        fn every_message_survives_encode_then_decode(m in message()) {
            prop_assert_eq!(Message::decode(&m.encode()), Ok(m));
        }

        #[test]
        fn any_record_decodes_to_an_error_or_re_encodes_to_the_same_bytes(
            record in any::<[u8; RECORD]>()
        ) {
            if let Ok(m) = Message::decode(&record) {
                prop_assert_eq!(m.encode(), record);
            }
        }
    }

    #[test]
    fn the_wire_layout_is_kind_then_a_then_b() {
        let r = Message::MainExited { status: 0xdead }.encode();
        assert_eq!(r[..4], 3u32.to_ne_bytes());
        assert_eq!(r[4..8], 0xdeadu32.to_ne_bytes());
        assert_eq!(r[8..], [0; 8]);
        let r = Message::Started {
            pid: 7,
            start_time: u64::MAX - 1,
        }
        .encode();
        assert_eq!(r[8..], (u64::MAX - 1).to_ne_bytes());
    }

    #[test]
    fn unknown_kinds_stages_and_stray_fields_are_errors() {
        let rec = |kind: u32, a: u32, b: u64| {
            let mut r = [0u8; RECORD];
            r[..4].copy_from_slice(&kind.to_ne_bytes());
            r[4..8].copy_from_slice(&a.to_ne_bytes());
            r[8..].copy_from_slice(&b.to_ne_bytes());
            r
        };
        assert!(Message::decode(&rec(0, 0, 0)).is_err());
        assert!(Message::decode(&rec(9, 1, 1)).is_err());
        assert!(Message::decode(&rec(KIND_FAILED, 1, 0)).is_err());
        assert!(Message::decode(&rec(KIND_FAILED, 1, 6)).is_err());
        assert!(Message::decode(&rec(KIND_FAILED, u32::MAX, 2)).is_err());
        assert!(Message::decode(&rec(KIND_MAIN_EXITED, 0, 1)).is_err());
        assert!(Message::decode(&rec(KIND_DONE, 3, 1)).is_err());
        assert_eq!(
            Message::decode(&rec(KIND_FAILED, 13, 4)),
            Ok(Message::Failed {
                errno: 13,
                stage: Stage::PreExec
            })
        );
    }

    #[test]
    fn a_negative_errno_is_sent_as_zero() {
        assert_eq!(
            Message::failed(-5, Stage::Exec),
            Message::Failed {
                errno: 0,
                stage: Stage::Exec
            }
        );
    }
}
