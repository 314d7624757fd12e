//! The `/proc` parsers: `/proc/<pid>/stat` and owned temp-dir names (proctree).
//!
//! The `/proc` parsers: `/proc/<pid>/stat` (proctree's `identity::parse_stat`, compiled here
//! from its source file, as it is crate-private and allocation-free on purpose) and the owned
//! temp-dir names (`proctree::parse_owned_name`, names anyone can create in `/tmp`).
//!
//! Properties: never a panic; a stat line built around *any* command name — the one field a
//! process chooses itself, with spaces, parentheses and fake fields in it — parses to exactly
//! the fields the kernel wrote (a process cannot spoof its parent, group or start time through
//! its name); a raw line that parses names the PID written before the `(`; an owned name that
//! parses starts with its stem.
#![no_main]

#[allow(dead_code)]
#[path = "../../crates/proctree/src/identity.rs"]
mod identity;

use identity::{ProcessState, parse_stat};
use libfuzzer_sys::fuzz_target;

fn take_u64(data: &mut &[u8], bytes: usize) -> u64 {
    let n = bytes.min(data.len());
    let (head, rest) = data.split_at(n);
    *data = rest;
    head.iter().fold(0u64, |v, b| v << 8 | u64::from(*b))
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, mut rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => {
            if let Some(stat) = parse_stat(rest) {
                let open = rest
                    .iter()
                    .position(|&b| b == b'(')
                    .expect("parsed: has a `(`");
                let digits = std::str::from_utf8(&rest[..open]).expect("digits are ASCII");
                assert_eq!(digits.trim_matches(' ').parse::<u32>().ok(), Some(stat.pid));
            }
        }
        1 => {
            let pid = take_u64(&mut rest, 4) as u32;
            let ppid = take_u64(&mut rest, 4) as u32;
            let pgid = take_u64(&mut rest, 4) as u32;
            let threads = take_u64(&mut rest, 2) as u32;
            let start = take_u64(&mut rest, 8);
            let letter = *b"RSDZTtWXxKPI"
                .get(take_u64(&mut rest, 1) as usize % 12)
                .unwrap_or(&b'R');
            let comm = rest;
            let mut line = format!("{pid} (").into_bytes();
            line.extend_from_slice(comm);
            line.extend_from_slice(
                format!(
                    ") {} {ppid} {pgid} 0 0 -1 4194560 10 0 0 0 1 2 0 0 20 0 {threads} 0 {start} \
                     1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
                    letter as char
                )
                .as_bytes(),
            );
            let stat = parse_stat(&line).unwrap_or_else(|| {
                panic!(
                    "a kernel-shaped line is refused: {:?}",
                    String::from_utf8_lossy(&line)
                )
            });
            let dead = matches!(letter, b'X' | b'x') || (letter == b'Z' && threads <= 1);
            let state = if dead {
                ProcessState::Dead
            } else {
                ProcessState::Alive
            };
            assert_eq!(
                (
                    stat.pid,
                    stat.ppid,
                    stat.pgid,
                    stat.threads,
                    stat.start_time,
                    stat.state
                ),
                (pid, ppid, pgid, threads, start, state),
                "the name {comm:?} changed what was read"
            );
        }
        _ => {
            let Ok(name) = std::str::from_utf8(rest) else {
                return;
            };
            if let Some((stem, owner)) = proctree::parse_owned_name(name) {
                assert!(!stem.is_empty());
                assert!(name.starts_with(&format!("{stem}-")), "{name:?} → {stem:?}");
                let _ = owner.pid();
            }
        }
    }
});
