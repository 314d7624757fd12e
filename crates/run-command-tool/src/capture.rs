//! Bounded output: the first and last halves of [`OUTPUT_CAP`](crate::OUTPUT_CAP) with the
//! marker `[… N bytes omitted …]` at the seam (a build's last error survives), for the
//! sandbox's output (`exec`'s `OnCap::HeadAndTail`) and for the runs outside it.
//!
//! **Owns:** the marker's text and the head/tail buffer. **Refuses to know:** processes.

use std::collections::VecDeque;

/// The seam marker, on a line of its own.
pub(crate) fn marker(omitted: u64) -> String {
    format!("\n[… {omitted} bytes omitted …]\n")
}

/// `bytes` (head then tail) as text with the marker after `head_len` when `omitted > 0`.
pub(crate) fn render(bytes: &[u8], head_len: usize, omitted: u64) -> String {
    if omitted == 0 {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let cut = head_len.min(bytes.len());
    // A secret cut at the seam is no longer recognisable by its form (RC-14): the word on
    // each side of the seam (up to the nearest whitespace, at most SEAM_WORD bytes) goes.
    let head = &bytes[..cut];
    let tail = &bytes[cut..];
    let head_keep = head
        .iter()
        .rev()
        .take(SEAM_WORD)
        .position(u8::is_ascii_whitespace)
        .map_or(head.len().saturating_sub(SEAM_WORD), |n| head.len() - n);
    let tail_skip = tail
        .iter()
        .take(SEAM_WORD)
        .position(u8::is_ascii_whitespace)
        .unwrap_or(tail.len().min(SEAM_WORD));
    let mut s = String::from_utf8_lossy(&head[..head_keep]).into_owned();
    s.push_str(&marker(
        omitted + (head.len() - head_keep) as u64 + tail_skip as u64,
    ));
    s.push_str(&String::from_utf8_lossy(&tail[tail_skip..]));
    s
}

/// At most this many bytes of a word cut by the seam are dropped on each side.
const SEAM_WORD: usize = 200;

/// Keeps the first `cap / 2` and the last `cap / 2` bytes written, counting the rest.
#[derive(Debug)]
pub(crate) struct HeadTail {
    half: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    omitted: u64,
}

impl HeadTail {
    pub(crate) fn new(cap: usize) -> Self {
        HeadTail {
            half: cap / 2,
            head: Vec::new(),
            tail: VecDeque::new(),
            omitted: 0,
        }
    }

    pub(crate) fn push(&mut self, mut data: &[u8]) {
        if self.head.len() < self.half {
            let n = (self.half - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        for &b in data {
            if self.tail.len() == self.half {
                self.tail.pop_front();
                self.omitted += 1;
            }
            self.tail.push_back(b);
        }
    }

    /// The text with the marker, and whether anything was omitted.
    pub(crate) fn finish(self) -> (String, bool) {
        let head_len = self.head.len();
        let mut bytes = self.head;
        bytes.extend(self.tail);
        (render(&bytes, head_len, self.omitted), self.omitted > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn small_output_is_whole_and_large_keeps_head_and_tail() {
        let mut h = HeadTail::new(8);
        h.push(b"abc");
        assert_eq!(h.finish(), ("abc".to_string(), false));
        let mut h = HeadTail::new(8);
        h.push(b"0123456789");
        h.push(b"XYZ");
        let (s, t) = h.finish();
        assert!(t);
        // The words cut by the seam go too (they could be parts of a secret).
        assert_eq!(s, "\n[… 13 bytes omitted …]\n");
        let mut h = HeadTail::new(16);
        h.push(b"ab cdefghij klmnopqrs tu");
        let (s, _) = h.finish();
        assert_eq!(s, "ab \n[… 18 bytes omitted …]\n tu");
    }

    #[test]
    fn a_token_cut_at_the_seam_leaves_no_fragment() {
        let token = format!("ghp_{}", "A".repeat(36));
        let mut h = HeadTail::new(26);
        h.push(format!("aa {token} ").as_bytes());
        h.push(&[b'z'; 100]);
        h.push(format!(" {token} bb").as_bytes());
        let (s, truncated) = h.finish();
        assert!(truncated);
        assert!(!s.contains('A') && !s.contains("ghp"), "{s}");
        assert!(s.starts_with("aa \n[…") && s.ends_with("…]\n bb"), "{s}");
    }

    proptest! {
        #[test]
        fn head_and_tail_account_for_every_byte(chunks in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..50), 0..20), cap in 2usize..64) {
            let mut h = HeadTail::new(cap);
            let all: Vec<u8> = chunks.concat();
            for c in &chunks { h.push(c); }
            let kept = h.head.len() + h.tail.len();
            prop_assert_eq!(kept as u64 + h.omitted, all.len() as u64);
            prop_assert_eq!(&h.head[..], &all[..h.head.len()]);
            let tail: Vec<u8> = h.tail.iter().copied().collect();
            prop_assert_eq!(&tail[..], &all[all.len() - tail.len()..]);
        }
    }
}
