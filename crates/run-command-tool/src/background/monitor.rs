//! The keyword monitor of a background task (BG-3, BG-4): which output lines are hits, when a
//! report is due, and the tails a report carries.
//!
//! **Owns:** the keywords (defaults and the validated override), line splitting over any chunking,
//! the timing rule (quiet 2 s, at most 10 s after the first pending hit, at most one report per
//! 30 s with the hits in between coalesced, never dropped), and the bounded memory of the output
//! (a ring of the last [`FINAL_BYTES`] plus the current line piece, ≤ [`REPORT_BYTES`]).
//!
//! **Refuses to know:** clocks, timers, processes and I/O. `now` is always a parameter, so the
//! timing rules are tested with offsets from one `Instant` and never by sleeping; the caller
//! (the task's reader loop) sleeps until [`Monitor::next_wake`] and calls [`Monitor::poll`].
//! Whether a hit is harmless (BG-5) is the decision model's question, not this module's.
//!
//! Matching is ASCII case-insensitive substring search over the raw bytes: output is often not
//! valid UTF-8 (progress bars, binary noise), and the keywords that matter are ASCII. A keyword
//! with non-ASCII letters matches them exactly as given.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// BG-4: output must have been quiet this long before a report goes out.
pub(crate) const QUIET: Duration = Duration::from_secs(2);
/// BG-4: a report waits at most this long after the (first pending) hit when output never goes quiet.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(10);
/// BG-4: at most one report per this period per task.
pub(crate) const MIN_GAP: Duration = Duration::from_secs(30);
/// BG-4: the latest output a report carries.
pub(crate) const REPORT_BYTES: usize = 8 * 1024;
/// BG-3: the tail the final report keeps.
pub(crate) const FINAL_BYTES: usize = 31 * 1024;
/// BG-4's default keywords (seed 001, `background_command`).
pub const DEFAULT_KEYWORDS: &[&str] = &[
    "error",
    "err!",
    "fail",
    "fatal",
    "panic",
    "exception",
    "traceback",
    "segmentation fault",
    "core dumped",
    "out of memory",
    "permission denied",
    "command not found",
    "no such file",
];

/// At most this many keywords in an override.
const MAX_KEYWORDS: usize = 32;
/// Each keyword is at most this many bytes after trimming.
const MAX_KEYWORD_BYTES: usize = 100;
/// A hit line in a report is cut to this many bytes (plus "…" where it was cut).
const LINE_BYTES: usize = 500;
/// When a hit line is cut and its keyword lies past [`LINE_BYTES`], the excerpt starts this many
/// bytes before the keyword, so the reader sees the keyword and what led to it.
const LINE_CONTEXT: usize = 100;

/// Validated keywords (BG-4 override): 1…32, each 1…100 bytes after trimming, no control
/// characters, stored ASCII-lowercased and de-duplicated (first occurrence kept).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Keywords(Vec<String>);

impl Keywords {
    /// BG-4's defaults.
    pub(crate) fn defaults() -> Keywords {
        Keywords(DEFAULT_KEYWORDS.iter().map(|k| (*k).to_owned()).collect())
    }

    /// `None` → the defaults; otherwise the override, validated. An error says what to do instead.
    pub(crate) fn parse(given: Option<&[String]>) -> Result<Keywords, String> {
        let Some(given) = given else {
            return Ok(Keywords::defaults());
        };
        if given.is_empty() {
            // A task with no keywords would never report: that is never what the caller meant.
            return Err(
                "keywords is empty: a task without keywords would never report; omit \
                        keywords to use the defaults, or list the words to watch for"
                    .to_owned(),
            );
        }
        if given.len() > MAX_KEYWORDS {
            return Err(format!(
                "keywords has {} entries; at most {MAX_KEYWORDS} are allowed: keep the ones that \
                 matter most, or omit keywords to use the defaults",
                given.len()
            ));
        }
        let mut out: Vec<String> = Vec::with_capacity(given.len());
        for (i, raw) in given.iter().enumerate() {
            let n = i + 1;
            // Control characters first: a keyword "a\nb" can never match inside one line, and
            // trimming would otherwise hide a leading or trailing one.
            if raw.chars().any(char::is_control) {
                return Err(format!(
                    "keyword {n} contains a control character (a newline, tab, escape…); keywords \
                     are matched within one output line: remove the control character"
                ));
            }
            let word = raw.trim();
            if word.is_empty() {
                return Err(format!(
                    "keyword {n} is blank: remove it, or omit keywords to use the defaults"
                ));
            }
            if word.len() > MAX_KEYWORD_BYTES {
                return Err(format!(
                    "keyword {n} is {} bytes; at most {MAX_KEYWORD_BYTES} are allowed: use a \
                     shorter, distinctive part of the line to watch for",
                    word.len()
                ));
            }
            let word = word.to_ascii_lowercase();
            if !out.contains(&word) {
                out.push(word);
            }
        }
        Ok(Keywords(out))
    }

    /// The keywords, lowercase, in the order given.
    pub(crate) fn as_slice(&self) -> &[String] {
        &self.0
    }

    /// The length in bytes of the longest keyword (≥ 1: a keyword is never empty).
    fn longest(&self) -> usize {
        self.0.iter().map(String::len).max().unwrap_or(1).max(1)
    }

    /// The earliest keyword in `hay` (ties: the keyword listed first): its index and byte offset.
    fn find(&self, hay: &[u8]) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize)> = None;
        for (k, word) in self.0.iter().enumerate() {
            let word = word.as_bytes();
            if word.len() > hay.len() {
                continue;
            }
            // Only look where this keyword could still beat the best match so far.
            let limit = best.map_or(hay.len(), |(_, at)| (at + word.len()).min(hay.len()));
            let at = hay[..limit]
                .windows(word.len())
                .position(|w| w.eq_ignore_ascii_case(word));
            if let Some(at) = at {
                if best.is_none_or(|(_, b)| at < b) {
                    best = Some((k, at));
                }
            }
        }
        best
    }
}

/// One report the monitor says is due.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hit {
    /// The first keyword found in the first pending hit line (lowercase).
    pub(crate) keyword: String,
    /// That line, lossy UTF-8, at most 500 bytes cut at a char boundary, "…" where it was cut.
    /// When the keyword lies past the first 500 bytes, the excerpt starts 100 bytes before it
    /// (with a leading "…"), so the keyword is always shown.
    pub(crate) line: String,
    /// How many hit lines were coalesced into this report.
    pub(crate) hits: u32,
    /// The latest output, at most [`REPORT_BYTES`] (see [`Monitor::tail`]).
    pub(crate) output: String,
}

/// The hits waiting for a report.
#[derive(Debug)]
struct Pending {
    keyword: String,
    line: String,
    hits: u32,
    first_seen: Instant,
}

/// The keyword monitor of one task: feed it output with the time it arrived, ask it when to wake
/// and whether a report is due.
#[derive(Debug)]
pub(crate) struct Monitor {
    keywords: Keywords,
    /// Bytes the current line keeps from one scanned piece to the next, so a keyword that spans
    /// the cut is still found: one less than the longest keyword.
    overlap: usize,
    /// The last `FINAL_BYTES + 1` bytes of output: the extra byte tells whether a full
    /// `FINAL_BYTES` window starts at a line start.
    ring: VecDeque<u8>,
    /// The current line (or, for a line longer than `REPORT_BYTES`, its current piece).
    line: Vec<u8>,
    /// The current line was already counted as a hit: its later pieces are not checked again.
    line_hit: bool,
    pending: Option<Pending>,
    last_output: Option<Instant>,
    last_report: Option<Instant>,
    total: u64,
}

impl Monitor {
    /// A monitor watching for `keywords`.
    pub(crate) fn new(keywords: Keywords) -> Monitor {
        let overlap = keywords.longest() - 1;
        Monitor {
            keywords,
            overlap,
            ring: VecDeque::with_capacity(FINAL_BYTES + 1),
            line: Vec::with_capacity(REPORT_BYTES),
            line_hit: false,
            pending: None,
            last_output: None,
            last_report: None,
            total: 0,
        }
    }

    /// Output bytes arrived at `now`. Any chunking works: a keyword split over two chunks, or a
    /// "\r\n", is still found. A line is checked once, when its '\n' arrives; a line longer than
    /// [`REPORT_BYTES`] without '\n' is checked in pieces that overlap by the longest keyword
    /// (minus one byte), and counts as one hit line however many of its pieces hold keywords.
    pub(crate) fn feed(&mut self, now: Instant, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.total = self.total.saturating_add(bytes.len() as u64);
        self.last_output = Some(now);
        self.push_ring(bytes);
        let mut rest = bytes;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.append(now, &rest[..i]);
            self.end_line(now);
            rest = &rest[i + 1..];
        }
        self.append(now, rest);
    }

    /// The output ended (EOF): a trailing partial line is checked now.
    pub(crate) fn end_of_output(&mut self, now: Instant) {
        if !self.line.is_empty() {
            self.end_line(now);
        }
    }

    /// When [`Monitor::poll`] next has something to do (`None`: nothing pending).
    pub(crate) fn next_wake(&self) -> Option<Instant> {
        let pending = self.pending.as_ref()?;
        let last_output = self.last_output.unwrap_or(pending.first_seen);
        let mut due = after(last_output, QUIET).min(after(pending.first_seen, MAX_WAIT));
        if let Some(report) = self.last_report {
            due = due.max(after(report, MIN_GAP));
        }
        Some(due)
    }

    /// A report due at `now`, if any: with a pending hit first seen at h and the last output at o,
    /// due at min(o + QUIET, h + MAX_WAIT), never earlier than the last report + MIN_GAP (hits in
    /// that gap stay pending and are coalesced). After a report, nothing is pending.
    pub(crate) fn poll(&mut self, now: Instant) -> Option<Hit> {
        if now < self.next_wake()? {
            return None;
        }
        let hit = self.take_pending()?;
        self.last_report = Some(now);
        Some(hit)
    }

    /// The hits still pending, reported now whatever the timing (the final report: the task
    /// ended before the quiet period). Does not count as a report for [`MIN_GAP`].
    pub(crate) fn take_pending(&mut self) -> Option<Hit> {
        let pending = self.pending.take()?;
        Some(Hit {
            keyword: pending.keyword,
            line: pending.line,
            hits: pending.hits,
            output: self.tail(REPORT_BYTES),
        })
    }

    /// The last `max` bytes of all output so far, as text: lossy UTF-8 that never splits a char
    /// (an incomplete char at the end, still arriving, is left out), starting after a '\n' when
    /// the window starts inside a line and a later '\n' lies in it. At most `max` bytes (and at
    /// most [`FINAL_BYTES`] of output are kept).
    pub(crate) fn tail(&self, max: usize) -> String {
        let len = self.ring.len();
        let n = max.min(len);
        let start = len - n;
        let window: Vec<u8> = self.ring.range(start..).copied().collect();
        let at_line_start = if start > 0 {
            self.ring[start - 1] == b'\n'
        } else {
            self.total == len as u64
        };
        let mut from = 0;
        if !at_line_start {
            // No half first line; but when the only '\n' ends the window (one long line), keep
            // the end of that line rather than nothing.
            match window.iter().position(|&b| b == b'\n') {
                Some(i) if i + 1 < window.len() => from = i + 1,
                _ => {
                    // The window starts inside the line: not inside a word (RC-14).
                    from = start_after_cut_mid(&window);
                    while from < window.len() && window[from] & 0xC0 == 0x80 {
                        from += 1;
                    }
                }
            }
        }
        let to = complete_utf8_end(&window[from..]) + from;
        let text = String::from_utf8_lossy(&window[from..to]);
        // Invalid bytes become U+FFFD (3 bytes each): keep the promise of at most `max` bytes.
        if text.len() <= max {
            return text.into_owned();
        }
        let cut = ceil_char_boundary(&text, text.len() - max);
        text[cut..].to_owned()
    }

    /// The output ended and its tails were taken: the buffers go (an ended task is kept for
    /// its group and `status`, and must not hold 31 KiB each); the count of bytes stays.
    pub(crate) fn release(&mut self) {
        self.ring = VecDeque::new();
        self.line = Vec::new();
        self.pending = None;
    }

    /// Bytes seen in total.
    pub(crate) fn total_bytes(&self) -> u64 {
        self.total
    }

    fn push_ring(&mut self, bytes: &[u8]) {
        let cap = FINAL_BYTES + 1;
        let bytes = &bytes[bytes.len().saturating_sub(cap)..];
        let excess = (self.ring.len() + bytes.len()).saturating_sub(cap);
        self.ring.drain(..excess);
        self.ring.extend(bytes);
    }

    /// Appends bytes without '\n' to the current line, checking full pieces as they fill.
    fn append(&mut self, now: Instant, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let room = REPORT_BYTES - self.line.len();
            if room == 0 {
                self.check_line(now);
                // Keep the overlap (only needed while the line has no hit yet).
                let keep = if self.line_hit { 0 } else { self.overlap };
                let drop = self.line.len() - keep;
                self.line.drain(..drop);
                continue;
            }
            let take = room.min(bytes.len());
            self.line.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
    }

    fn end_line(&mut self, now: Instant) {
        self.check_line(now);
        self.line.clear();
        self.line_hit = false;
    }

    fn check_line(&mut self, now: Instant) {
        if self.line_hit {
            return;
        }
        let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
        let Some((k, at)) = self.keywords.find(line) else {
            return;
        };
        self.line_hit = true;
        match &mut self.pending {
            Some(pending) => pending.hits = pending.hits.saturating_add(1),
            None => {
                let keyword = self.keywords.0[k].clone();
                let line = excerpt(line, at, keyword.len());
                self.pending = Some(Pending {
                    keyword,
                    line,
                    hits: 1,
                    first_seen: now,
                });
            }
        }
    }
}

/// How far a cut looks for the end of the word it fell into (as `run_command`'s seam).
pub(super) const WORD_SEARCH: usize = 200;

/// Where text may start after a cut just before `window[0]` (RC-14): past the word the cut
/// fell into (up to [`WORD_SEARCH`] bytes), so no tail of a secret — `hijABC…` of a token,
/// `ssword=…` of a pair whose key was cut — is shown without the part that makes it
/// recognisable.
pub(super) fn start_after_cut_mid(window: &[u8]) -> usize {
    if window.first().is_some_and(u8::is_ascii_whitespace) {
        return 0;
    }
    let limit = window.len().min(WORD_SEARCH);
    match window[..limit].iter().position(u8::is_ascii_whitespace) {
        Some(i) => i + 1,
        None => limit,
    }
}

/// Where text may end before a cut at `at` of `b`: before the word the cut fell into (up to
/// [`WORD_SEARCH`] bytes back; a longer word loses that much).
pub(super) fn end_before_cut(b: &[u8], at: usize) -> usize {
    if at >= b.len() || b[at].is_ascii_whitespace() {
        return at;
    }
    word_start_before(b, at).unwrap_or(at.saturating_sub(WORD_SEARCH))
}

/// The start of the word that `b[..at]` ends in: `at` when it ends in whitespace (or is
/// empty), else just after the last whitespace within [`WORD_SEARCH`] bytes; `None` for a
/// longer word.
pub(super) fn word_start_before(b: &[u8], at: usize) -> Option<usize> {
    if at == 0 || b[at - 1].is_ascii_whitespace() {
        return Some(at);
    }
    let limit = at.saturating_sub(WORD_SEARCH);
    b[limit..at]
        .iter()
        .rposition(u8::is_ascii_whitespace)
        .map(|i| limit + i + 1)
}

/// `t + d`, or `t` in the (theoretical) case the sum does not fit an `Instant`.
fn after(t: Instant, d: Duration) -> Instant {
    t.checked_add(d).unwrap_or(t)
}

/// The length of `b` without an incomplete UTF-8 sequence at its end.
pub(super) fn complete_utf8_end(b: &[u8]) -> usize {
    let n = b.len();
    for back in 1..=n.min(4) {
        let c = b[n - back];
        if c & 0xC0 == 0x80 {
            continue;
        }
        let need = match c {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if need > back { n - back } else { n };
    }
    n
}

/// The smallest char boundary of `s` at or after `i`.
fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i.min(s.len())
}

/// The largest char boundary of `s` at or before `i`.
fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The hit line for a report: at most [`LINE_BYTES`] of it, showing the keyword at byte `at`.
fn excerpt(line: &[u8], at: usize, keyword_len: usize) -> String {
    let mut start = if at + keyword_len > LINE_BYTES {
        at.saturating_sub(LINE_CONTEXT)
    } else {
        0
    };
    let mut end = (start + LINE_BYTES).min(line.len());
    // Never inside a word at either cut (RC-14: no recognisable half of a secret).
    if start > 0 {
        start = start_after_cut_mid(&line[start..]) + start;
        start = start.min(at);
    }
    if end < line.len() {
        end = end_before_cut(line, end).max(at + keyword_len).max(start);
    }
    // Cut on char starts, so that no half char turns into U+FFFD at either end.
    for _ in 0..3 {
        if start > 0 && start < line.len() && line[start] & 0xC0 == 0x80 {
            start += 1;
        }
        if end < line.len() && end > start && line[end] & 0xC0 == 0x80 {
            end -= 1;
        }
    }
    let text = String::from_utf8_lossy(&line[start..end]);
    // Invalid bytes become U+FFFD (3 bytes each): keep the promise of at most LINE_BYTES.
    let to = floor_char_boundary(&text, LINE_BYTES);
    let mut out = String::with_capacity(to + 6);
    if start > 0 {
        out.push('…');
    }
    out.push_str(&text[..to]);
    if end < line.len() || to < text.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A clock under the test's control: a base instant plus offsets in milliseconds.
    struct Clock(Instant);
    impl Clock {
        fn new() -> Clock {
            Clock(Instant::now())
        }
        fn at(&self, ms: u64) -> Instant {
            self.0 + Duration::from_millis(ms)
        }
    }

    fn monitor() -> Monitor {
        Monitor::new(Keywords::defaults())
    }

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_hit_is_reported_once_output_is_quiet_for_two_seconds() {
        let c = Clock::new();
        let mut m = monitor();
        m.feed(c.at(0), b"compiling\nerror: mismatched types\n");
        assert_eq!(m.next_wake(), Some(c.at(2000)));
        assert_eq!(m.poll(c.at(1999)), None);
        let hit = m.poll(c.at(2000)).expect("due after 2 s of quiet");
        assert_eq!(hit.keyword, "error");
        assert_eq!(hit.line, "error: mismatched types");
        assert_eq!(hit.hits, 1);
        assert_eq!(hit.output, "compiling\nerror: mismatched types\n");
        assert_eq!(m.next_wake(), None, "nothing pending after a report");
        assert_eq!(m.poll(c.at(60_000)), None);
    }

    #[test]
    fn output_after_a_hit_pushes_the_report_back_until_output_is_quiet() {
        let c = Clock::new();
        let mut m = monitor();
        m.feed(c.at(0), b"FAIL test_a\n");
        m.feed(c.at(1500), b"running test_b\n");
        assert_eq!(m.poll(c.at(2000)), None);
        assert_eq!(m.next_wake(), Some(c.at(3500)));
        let hit = m.poll(c.at(3500)).unwrap();
        assert_eq!(hit.keyword, "fail");
        assert!(hit.output.ends_with("running test_b\n"));
    }

    #[test]
    fn a_hit_is_reported_ten_seconds_after_it_when_output_never_goes_quiet() {
        let c = Clock::new();
        let mut m = monitor();
        m.feed(c.at(0), b"panic: index out of range\n");
        for t in (500..=9500).step_by(500) {
            m.feed(c.at(t), b"tick\n");
            assert_eq!(m.poll(c.at(t)), None, "not due at {t} ms");
        }
        assert_eq!(m.next_wake(), Some(c.at(10_000)));
        m.feed(c.at(10_000), b"tick\n");
        let hit = m.poll(c.at(10_000)).expect("the 10 s cap");
        assert_eq!(hit.keyword, "panic");
    }

    #[test]
    fn hits_within_thirty_seconds_of_a_report_wait_and_are_coalesced_not_dropped() {
        let c = Clock::new();
        let mut m = monitor();
        m.feed(c.at(0), b"error one\n");
        assert!(m.poll(c.at(2000)).is_some());
        // A report at 2 s; a hit at 7 s (5 s after it) and another at 20 s.
        m.feed(c.at(7000), b"fatal two\n");
        assert_eq!(
            m.poll(c.at(9000)),
            None,
            "quiet, but within 30 s of the report"
        );
        assert_eq!(
            m.poll(c.at(17_000)),
            None,
            "past the 10 s cap, still within 30 s"
        );
        m.feed(c.at(20_000), b"error three\nlatest line\n");
        assert_eq!(m.next_wake(), Some(c.at(32_000)));
        assert_eq!(m.poll(c.at(31_999)), None);
        let hit = m
            .poll(c.at(32_000))
            .expect("due 30 s after the last report");
        assert_eq!(hit.hits, 2, "both hits of the gap in one report");
        assert_eq!(hit.keyword, "fatal", "the first pending hit's keyword");
        assert_eq!(hit.line, "fatal two");
        assert!(
            hit.output.ends_with("error three\nlatest line\n"),
            "the later output"
        );
        // The next gap starts at this report.
        m.feed(c.at(33_000), b"error four\n");
        assert_eq!(m.next_wake(), Some(c.at(62_000)));
    }

    #[test]
    fn output_without_a_keyword_never_reports() {
        let c = Clock::new();
        let mut m = monitor();
        m.feed(c.at(0), b"Compiling foo v0.1.0\nFinished dev profile\n");
        m.end_of_output(c.at(100));
        assert_eq!(m.next_wake(), None);
        assert_eq!(m.poll(c.at(100_000)), None);
        assert_eq!(m.take_pending(), None);
    }

    #[test]
    fn a_keyword_split_across_chunks_is_found_once() {
        let c = Clock::new();
        let mut m = monitor();
        m.feed(c.at(0), b"Traceb");
        m.feed(c.at(10), b"ack (most recent call last):");
        assert_eq!(
            m.next_wake(),
            None,
            "a line is checked when its newline arrives"
        );
        m.feed(c.at(20), b"\n");
        let hit = m.poll(c.at(2020)).unwrap();
        assert_eq!((hit.keyword.as_str(), hit.hits), ("traceback", 1));
        assert_eq!(hit.line, "Traceback (most recent call last):");
    }

    #[test]
    fn every_chunking_of_crlf_output_gives_the_same_hits_and_lines_without_cr() {
        let text = b"ok\r\nSegmentation Fault (core dumped)\r\nfine\nPermission denied\nno errors";
        for size in 1..text.len() {
            let c = Clock::new();
            let mut m = monitor();
            for chunk in text.chunks(size) {
                m.feed(c.at(0), chunk);
            }
            m.end_of_output(c.at(0));
            let hit = m.take_pending().unwrap();
            assert_eq!(hit.hits, 3, "chunks of {size}");
            assert_eq!(hit.keyword, "segmentation fault");
            assert_eq!(
                hit.line, "Segmentation Fault (core dumped)",
                "no trailing \\r"
            );
        }
    }

    #[test]
    fn keywords_match_case_insensitively() {
        let c = Clock::new();
        let keywords = Keywords::parse(Some(&words(&["Listening ON"]))).unwrap();
        let mut m = Monitor::new(keywords);
        m.feed(c.at(0), b"server LISTENING on :3000\n");
        let hit = m.poll(c.at(2000)).unwrap();
        assert_eq!(hit.keyword, "listening on");
        let mut d = monitor();
        d.feed(c.at(0), b"ERR! code E404\n");
        assert_eq!(d.poll(c.at(2000)).unwrap().keyword, "err!");
    }

    #[test]
    fn the_earliest_keyword_in_the_line_names_the_hit() {
        let c = Clock::new();
        let mut m = monitor();
        m.feed(c.at(0), b"test foo ... FAILED: error in setup\n");
        assert_eq!(m.take_pending().unwrap().keyword, "fail");
    }

    #[test]
    fn a_keyword_at_the_end_of_a_line_longer_than_eight_kib_is_found_once() {
        let c = Clock::new();
        for len in [
            REPORT_BYTES - 3,
            REPORT_BYTES,
            REPORT_BYTES + 1,
            3 * REPORT_BYTES + 7,
        ] {
            for chunk in [1, 7, 4096, 100_000] {
                let mut m = monitor();
                let mut line = vec![b'x'; len];
                line.extend_from_slice(b"Out Of Memory\n");
                for piece in line.chunks(chunk) {
                    m.feed(c.at(0), piece);
                }
                let hit = m
                    .take_pending()
                    .unwrap_or_else(|| panic!("len {len} chunk {chunk}"));
                assert_eq!(hit.hits, 1);
                assert_eq!(hit.keyword, "out of memory");
                assert!(
                    hit.line.contains("Out Of Memory"),
                    "the excerpt shows the keyword"
                );
                assert!(hit.line.len() <= LINE_BYTES + 2 * '…'.len_utf8());
            }
        }
    }

    #[test]
    fn a_keyword_straddling_a_piece_cut_of_a_long_line_is_found_and_counted_once() {
        let c = Clock::new();
        for shift in 0..20 {
            let mut m = monitor();
            // "segmentation fault" (the longest default) across the cut at REPORT_BYTES.
            let mut line = vec![b'.'; REPORT_BYTES - shift];
            line.extend_from_slice(b"segmentation fault, error, error");
            line.extend_from_slice(&vec![b'.'; 3 * REPORT_BYTES]);
            line.extend_from_slice(b"error again\n");
            m.feed(c.at(0), &line);
            let hit = m.take_pending().unwrap();
            assert_eq!(hit.hits, 1, "one line, one hit (shift {shift})");
            assert_eq!(hit.keyword, "segmentation fault", "shift {shift}");
        }
    }

    #[test]
    fn a_trailing_partial_line_is_checked_at_end_of_output() {
        let c = Clock::new();
        let mut m = monitor();
        m.feed(c.at(0), b"done\nfatal: not a git repository");
        assert_eq!(m.next_wake(), None);
        m.end_of_output(c.at(50));
        let hit = m.take_pending().expect("the partial line at EOF");
        assert_eq!(hit.line, "fatal: not a git repository");
    }

    #[test]
    fn take_pending_gives_the_hits_the_task_ended_with_before_the_quiet_period() {
        let c = Clock::new();
        let mut m = monitor();
        m.feed(c.at(0), b"error: a\nerror: b\n");
        let hit = m.take_pending().unwrap();
        assert_eq!(hit.hits, 2);
        assert_eq!(m.take_pending(), None);
        assert_eq!(m.poll(c.at(5000)), None);
    }

    #[test]
    fn a_long_hit_line_is_cut_to_five_hundred_bytes_at_a_char_boundary() {
        let c = Clock::new();
        let mut m = monitor();
        let mut line = String::from("error ");
        line.push_str(&"é".repeat(400));
        line.push('\n');
        m.feed(c.at(0), line.as_bytes());
        let hit = m.take_pending().unwrap();
        assert!(hit.line.starts_with("error é"));
        assert!(hit.line.ends_with('…'));
        let body = hit.line.trim_end_matches('…');
        // The cut end falls inside a word (no whitespace): up to 200 bytes of it are dropped.
        assert!(body.len() <= LINE_BYTES && body.len() >= LINE_BYTES - WORD_SEARCH - 1);
        assert!(!hit.line.contains('\u{FFFD}'));
    }

    fn lines_of_64(n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..n {
            let mut line = format!("{i:06} ").into_bytes();
            line.resize(63, b'x');
            line.push(b'\n');
            out.extend_from_slice(&line);
        }
        out
    }

    #[test]
    fn the_report_and_final_tails_are_exactly_eight_and_thirty_one_kib_on_line_starts() {
        let c = Clock::new();
        let mut m = monitor();
        let all = lines_of_64(2000);
        for chunk in all.chunks(999) {
            m.feed(c.at(0), chunk);
        }
        assert_eq!(m.total_bytes(), all.len() as u64);
        let report = m.tail(REPORT_BYTES);
        assert_eq!(report.len(), REPORT_BYTES);
        assert_eq!(report.as_bytes(), &all[all.len() - REPORT_BYTES..]);
        let last = m.tail(FINAL_BYTES);
        assert_eq!(last.len(), FINAL_BYTES);
        assert_eq!(last.as_bytes(), &all[all.len() - FINAL_BYTES..]);
        assert!(last.starts_with(&format!("{:06} ", 2000 - FINAL_BYTES / 64)));
    }

    #[test]
    fn a_tail_that_would_start_inside_a_line_starts_after_its_newline() {
        let c = Clock::new();
        let mut m = monitor();
        let mut all = Vec::new();
        for i in 0..400 {
            let mut line = format!("{i:04} ").into_bytes();
            line.resize(99, b'y');
            line.push(b'\n');
            all.extend_from_slice(&line);
        }
        m.feed(c.at(0), &all);
        // 40 000 bytes; the 8192-byte window starts inside a line → the next whole line.
        let report = m.tail(REPORT_BYTES);
        assert_eq!(report.len(), 8100);
        assert!(report.starts_with("0319 "));
        let last = m.tail(FINAL_BYTES);
        assert_eq!(last.len(), 31_700);
        assert!(last.starts_with("0083 "));
    }

    #[test]
    fn tails_never_split_a_char() {
        let c = Clock::new();
        let mut m = monitor();
        // No newline at all, 2- and 3-byte chars, and a char still arriving at the end.
        let text = "é€".repeat(10_000);
        m.feed(c.at(0), text.as_bytes());
        m.feed(c.at(0), &"€".as_bytes()[..2]);
        for max in [REPORT_BYTES, FINAL_BYTES, 1, 2, 3, 4, 5, 100] {
            let tail = m.tail(max);
            assert!(tail.len() <= max, "max {max}");
            // One word, cut at the window's start: up to 200 bytes of it are dropped (RC-14).
            assert!(
                tail.len() + WORD_SEARCH + 5 >= max || tail.is_empty(),
                "max {max}: cut only to a boundary and the cut word"
            );
            assert!(!tail.contains('\u{FFFD}'), "max {max}");
            assert!(
                tail.ends_with('€') || tail.is_empty(),
                "the half char is left out"
            );
        }
    }

    #[test]
    fn no_cut_leaves_the_tail_or_the_head_of_a_token() {
        let c = Clock::new();
        let token = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
        // One long line: the tail's window and the hit line's excerpt both cut the token.
        let mut line = format!("x{token}");
        line.push_str(&" zz".repeat(3000));
        let mut m = monitor();
        m.feed(c.at(0), line.as_bytes());
        for max in 9_000 - 30..9_000 {
            let tail = m.tail(max);
            assert!(
                !tail.contains("hijABC") && !tail.contains("012345 "),
                "{max}: {tail:.60}"
            );
        }
        let mut m = monitor();
        let long = format!("error {} {token} end\n", "w".repeat(470));
        m.feed(c.at(0), long.as_bytes());
        let hit = m.take_pending().unwrap();
        assert!(!hit.line.contains("ghp_0"), "{}", hit.line);
    }

    #[test]
    fn a_tail_of_short_output_is_all_of_it() {
        let c = Clock::new();
        let mut m = monitor();
        m.feed(c.at(0), b"partial first line, no newline yet");
        assert_eq!(m.tail(REPORT_BYTES), "partial first line, no newline yet");
        // The window "ine yet" starts inside a word: that word is dropped (RC-14).
        assert_eq!(m.tail(7), "yet");
    }

    #[test]
    fn invalid_utf8_is_replaced_and_tails_stay_within_their_size() {
        let c = Clock::new();
        let mut m = monitor();
        m.feed(c.at(0), &vec![0xFF; 2 * FINAL_BYTES]);
        let tail = m.tail(REPORT_BYTES);
        assert!(tail.len() <= REPORT_BYTES);
        assert!(tail.chars().all(|ch| ch == '\u{FFFD}'));
    }

    #[test]
    fn memory_stays_bounded_whatever_the_output() {
        let c = Clock::new();
        let mut m = monitor();
        let chunk = vec![b'z'; 1 << 20];
        for _ in 0..8 {
            m.feed(c.at(0), &chunk);
        }
        m.feed(c.at(0), b"\nerror\n");
        assert!(m.ring.len() <= FINAL_BYTES + 1);
        assert!(m.line.capacity() <= 2 * REPORT_BYTES);
        assert_eq!(m.total_bytes(), 8 * (1 << 20) + 7);
        assert_eq!(m.take_pending().unwrap().hits, 1);
    }

    #[test]
    fn keywords_default_when_none_are_given() {
        assert_eq!(Keywords::parse(None).unwrap(), Keywords::defaults());
        assert_eq!(
            Keywords::defaults().as_slice().len(),
            DEFAULT_KEYWORDS.len()
        );
    }

    #[test]
    fn keywords_are_trimmed_lowercased_and_deduplicated() {
        let k =
            Keywords::parse(Some(&words(&["  Ready ", "READY", "Compiled!", "ready"]))).unwrap();
        assert_eq!(k.as_slice(), ["ready", "compiled!"]);
    }

    #[test]
    fn an_empty_keyword_list_is_refused_pointing_to_the_defaults() {
        let err = Keywords::parse(Some(&[])).unwrap_err();
        assert!(
            err.contains("never report") && err.contains("omit keywords"),
            "{err}"
        );
    }

    #[test]
    fn more_than_thirty_two_keywords_are_refused() {
        let many: Vec<String> = (0..33).map(|i| format!("k{i}")).collect();
        let err = Keywords::parse(Some(&many)).unwrap_err();
        assert!(err.contains("33") && err.contains("at most 32"), "{err}");
        assert!(Keywords::parse(Some(&many[..32])).is_ok());
    }

    #[test]
    fn a_blank_keyword_is_refused() {
        let err = Keywords::parse(Some(&words(&["ok", "   "]))).unwrap_err();
        assert!(err.contains("keyword 2 is blank"), "{err}");
        assert!(Keywords::parse(Some(&words(&[""]))).is_err());
    }

    #[test]
    fn a_keyword_over_one_hundred_bytes_is_refused() {
        let err = Keywords::parse(Some(&["a".repeat(101)])).unwrap_err();
        assert!(
            err.contains("101 bytes") && err.contains("at most 100"),
            "{err}"
        );
        assert!(Keywords::parse(Some(&[format!("  {}  ", "a".repeat(100))])).is_ok());
    }

    #[test]
    fn a_keyword_with_a_control_character_is_refused() {
        for bad in ["a\nb", "tab\there", "esc\u{1b}[31m", "trailing\n", "\u{85}"] {
            let err = Keywords::parse(Some(&words(&[bad]))).unwrap_err();
            assert!(err.contains("control character"), "{bad:?}: {err}");
        }
    }

    proptest! {
        #[test]
        fn keywords_parse_never_panics_and_what_it_accepts_is_clean(
            given in proptest::collection::vec(".{0,120}", 0..40)
        ) {
            if let Ok(k) = Keywords::parse(Some(&given)) {
                let list = k.as_slice();
                prop_assert!(!list.is_empty() && list.len() <= 32);
                for w in list {
                    prop_assert_eq!(w, &w.to_ascii_lowercase());
                    prop_assert_eq!(w.as_str(), w.trim());
                    prop_assert!(!w.is_empty() && w.len() <= 100);
                    prop_assert!(!w.chars().any(char::is_control));
                }
                let mut sorted = list.to_vec();
                sorted.sort();
                sorted.dedup();
                prop_assert_eq!(sorted.len(), list.len());
            }
        }

        #[test]
        fn any_chunking_finds_the_same_hits_as_one_chunk(
            text in "([a-z ]{0,30}(error|FAIL|x)?\r?\n){0,20}[a-z]{0,10}",
            cuts in proptest::collection::vec(1usize..17, 0..50)
        ) {
            let c = Clock::new();
            let mut whole = monitor();
            whole.feed(c.at(0), text.as_bytes());
            whole.end_of_output(c.at(0));
            let mut parts = monitor();
            let mut rest = text.as_bytes();
            for cut in cuts {
                let cut = cut.min(rest.len());
                parts.feed(c.at(0), &rest[..cut]);
                rest = &rest[cut..];
            }
            parts.feed(c.at(0), rest);
            parts.end_of_output(c.at(0));
            prop_assert_eq!(whole.take_pending(), parts.take_pending());
            prop_assert_eq!(whole.tail(REPORT_BYTES), parts.tail(REPORT_BYTES));
        }
    }
}
