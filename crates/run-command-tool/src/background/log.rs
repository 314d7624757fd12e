//! The log file of a background task (BG-6): output appended while the task runs, masked line
//! by line, capped at [`LOG_CAP`].
//!
//! **Owns:** cutting output into lines over any chunking, holding a partial line (≤ 8 KiB) until
//! its '\n', masking each line through the caller's closure, replacing a PEM private key spread
//! over lines with one `[private key masked]` line, and the size cap.
//!
//! **Refuses to know:** where the file lives and how it is opened (the caller opens it
//! `O_APPEND|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC`, mode 0600, in a 0700 directory, and removes it
//! when the task ends), and what a secret looks like on one line (the closure: argv-policy's
//! rules, learnt into the session). A PEM key is the one secret no one-line rule sees whole.
//!
//! Text is lossy UTF-8 (the closure takes `&str`): invalid bytes are written as U+FFFD; a char
//! cut by the 8 KiB piece limit waits for the next piece. A line's trailing '\r' is kept but not
//! shown to the closure. A key whose END line never comes masks the rest of the log: the safe
//! side. After [`LOG_CAP`] the writer only drops output; [`LogWriter::written`] counts the notice.

use std::fs::File;
use std::io::Write;

use super::monitor::complete_utf8_end;

/// BG-6: the log stops growing here; the task keeps running and is still monitored.
pub(crate) const LOG_CAP: u64 = 64 * 1024 * 1024;
/// A partial line longer than this is written as it is (masked) instead of being held.
const HOLD_BYTES: usize = 8 * 1024;
/// What a PEM private key (all its lines, BEGIN to END) becomes in the log.
const KEY_MASKED: &str = "[private key masked]\n";
/// The last line of a log that reached [`LOG_CAP`].
const STOPPED: &str = "[log stopped at 64 MiB; the task keeps running and is still monitored]\n";
/// How much of a line already written in pieces is remembered, so that a BEGIN/END marker cut
/// by a flush is still recognised when the line completes (the markers are short).
const MARKER_MEMORY: usize = 128;

/// Writes a task's output to its open log file, masked line by line.
#[derive(Debug)]
pub(crate) struct LogWriter {
    file: File,
    cap: u64,
    /// The partial line not written yet (≤ HOLD_BYTES).
    held: Vec<u8>,
    /// The end of the part of the current line already written (flushed or over HOLD_BYTES).
    written_part: Vec<u8>,
    /// Inside a PEM private key: lines are dropped until its END line.
    in_key: bool,
    written: u64,
    /// The last byte written was '\n' (or nothing was written): the stop notice starts a line.
    at_line_start: bool,
    stopped: bool,
}

impl LogWriter {
    /// A writer appending to `file`, capped at [`LOG_CAP`].
    pub(crate) fn new(file: File) -> LogWriter {
        LogWriter::with_cap(file, LOG_CAP)
    }

    /// A writer with another cap (tests reach the cap without writing 64 MiB).
    fn with_cap(file: File, cap: u64) -> LogWriter {
        LogWriter {
            file,
            cap,
            held: Vec::new(),
            written_part: Vec::new(),
            in_key: false,
            written: 0,
            at_line_start: true,
            stopped: false,
        }
    }

    /// Writes output: complete lines masked through `mask` (one line, without its '\n'); a
    /// partial line is held until its '\n', until it is longer than 8 KiB (then written as it is,
    /// masked), or until [`LogWriter::flush`]. Every line from a `-----BEGIN … PRIVATE KEY-----`
    /// line to its `-----END … PRIVATE KEY-----` line is written as one `[private key masked]`.
    pub(crate) fn write(
        &mut self,
        bytes: &[u8],
        mask: &dyn Fn(&str) -> String,
    ) -> std::io::Result<()> {
        let mut rest = bytes;
        while !rest.is_empty() {
            if self.stopped {
                return Ok(());
            }
            match rest.iter().position(|&b| b == b'\n') {
                Some(i) if self.held.len() + i <= HOLD_BYTES => {
                    self.held.extend_from_slice(&rest[..i]);
                    rest = &rest[i + 1..];
                    self.emit(true, mask)?;
                }
                _ => {
                    let room = HOLD_BYTES - self.held.len();
                    if rest.len() <= room {
                        self.held.extend_from_slice(rest);
                        return Ok(());
                    }
                    // Fill to HOLD_BYTES, then the piece goes out as it is; the line goes on.
                    // A char cut by the fill waits for the next piece (no U+FFFD in the middle).
                    self.held.extend_from_slice(&rest[..room]);
                    rest = &rest[room..];
                    // Each piece is masked alone, so none may end inside a word: a secret cut
                    // in two would match no rule and join again in the file (RC-14). The word
                    // waits for the next piece (a word longer than 200 bytes is cut anyway).
                    let mut cut = complete_utf8_end(&self.held);
                    let next_is_word = if cut < self.held.len() {
                        true
                    } else {
                        rest.first().is_some_and(|b| !b.is_ascii_whitespace())
                    };
                    if next_is_word {
                        // A word of more than 200 bytes is cut anyway.
                        if let Some(word) = super::monitor::word_start_before(&self.held, cut) {
                            cut = word;
                        }
                    }
                    let carry = self.held.split_off(cut);
                    self.emit(false, mask)?;
                    if !self.stopped {
                        self.held = carry;
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes a held partial line (at the end of output, or when output has been quiet).
    pub(crate) fn flush(&mut self, mask: &dyn Fn(&str) -> String) -> std::io::Result<()> {
        if self.held.is_empty() || self.stopped {
            return Ok(());
        }
        self.emit(false, mask)
    }

    /// Bytes written to the file so far.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// Writes the held bytes, masked: a whole line when `line_end`, else a piece of one.
    fn emit(&mut self, line_end: bool, mask: &dyn Fn(&str) -> String) -> std::io::Result<()> {
        let held = std::mem::take(&mut self.held);
        // Look for the markers in the whole line seen so far, not only in this piece.
        let mut seen = std::mem::take(&mut self.written_part);
        seen.extend_from_slice(&held);
        let seen_text = String::from_utf8_lossy(&seen);
        let begins = find_marker(&seen_text, "-----BEGIN ");
        let ends = find_marker(&seen_text, "-----END ");
        let out: Option<String> = if self.in_key {
            if ends.is_some() && line_end {
                self.in_key = false;
            }
            None
        } else if let Some(b) = begins {
            // A key on one line (BEGIN … END) or the first line of one: either way one notice;
            // only a complete line that also holds the END marker closes the key at once.
            let closed = line_end && ends.is_some_and(|e| e > b);
            self.in_key = !closed;
            Some(KEY_MASKED.to_owned())
        } else {
            let text = String::from_utf8_lossy(&held);
            let mut masked = mask(text.trim_end_matches('\r'));
            if text.ends_with('\r') {
                masked.push('\r');
            }
            if line_end {
                masked.push('\n');
            }
            Some(masked)
        };
        if line_end {
            self.written_part.clear();
        } else {
            let keep = seen.len().saturating_sub(MARKER_MEMORY);
            seen.drain(..keep);
            self.written_part = seen;
        }
        match out {
            Some(text) => self.put(text.as_bytes()),
            None => Ok(()),
        }
    }

    /// Appends to the file unless that would pass the cap; then the stop notice, once.
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.stopped || bytes.is_empty() {
            return Ok(());
        }
        if self.written.saturating_add(bytes.len() as u64) > self.cap {
            self.stopped = true;
            self.held.clear();
            self.written_part.clear();
            let mut notice = String::new();
            if !self.at_line_start {
                notice.push('\n');
            }
            notice.push_str(STOPPED);
            self.file.write_all(notice.as_bytes())?;
            self.written = self.written.saturating_add(notice.len() as u64);
            return Ok(());
        }
        self.file.write_all(bytes)?;
        self.written = self.written.saturating_add(bytes.len() as u64);
        self.at_line_start = bytes.ends_with(b"\n");
        Ok(())
    }
}

/// Where a PEM private-key marker (`-----BEGIN ` or `-----END `, then `… PRIVATE KEY-----`)
/// starts in `text`.
fn find_marker(text: &str, start: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(start) {
        let at = from + i;
        let rest = &text[at + start.len()..];
        // The label is short ("RSA PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "OPENSSH PRIVATE KEY").
        if let Some(j) = rest.find("-----") {
            if rest[..j].ends_with("PRIVATE KEY") && j <= 64 {
                return Some(at);
            }
        }
        from = at + start.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log writer on a fresh temp file, and a way to read what it wrote.
    struct Log {
        file: tempfile::NamedTempFile,
        writer: LogWriter,
    }

    impl Log {
        fn new() -> Log {
            Log::with_cap(LOG_CAP)
        }
        fn with_cap(cap: u64) -> Log {
            let file = tempfile::NamedTempFile::new().unwrap();
            let handle = file.reopen().unwrap();
            Log {
                file,
                writer: LogWriter::with_cap(handle, cap),
            }
        }
        fn text(&self) -> String {
            String::from_utf8(std::fs::read(self.file.path()).unwrap()).unwrap()
        }
    }

    fn upper(line: &str) -> String {
        line.replace("hunter2", "[masked]")
    }

    fn same(line: &str) -> String {
        line.to_owned()
    }

    const KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\n\
                       b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n\
                       QyNTUxOQAAACDzSecretSecretSecretSecretSecretSecretSecretAAAA\n\
                       -----END OPENSSH PRIVATE KEY-----\n";

    #[test]
    fn complete_lines_are_written_through_the_mask() {
        let mut log = Log::new();
        log.writer
            .write(b"login ok\npassword=hunter2\n", &upper)
            .unwrap();
        assert_eq!(log.text(), "login ok\npassword=[masked]\n");
        assert_eq!(log.writer.written(), log.text().len() as u64);
    }

    #[test]
    fn the_mask_sees_whole_lines_however_the_output_is_chunked() {
        let input = b"a hunter2 b\r\nc hunter2\n";
        for size in 1..input.len() {
            let mut log = Log::new();
            for chunk in input.chunks(size) {
                log.writer.write(chunk, &upper).unwrap();
            }
            assert_eq!(
                log.text(),
                "a [masked] b\r\nc [masked]\n",
                "chunks of {size}"
            );
        }
    }

    #[test]
    fn a_partial_line_is_held_until_its_newline_or_a_flush() {
        let mut log = Log::new();
        log.writer.write(b"done\nprogress 45", &upper).unwrap();
        assert_eq!(log.text(), "done\n", "the partial line is held");
        log.writer.write(b"% hunter2", &upper).unwrap();
        assert_eq!(log.text(), "done\n");
        log.writer.flush(&upper).unwrap();
        assert_eq!(log.text(), "done\nprogress 45% [masked]");
        log.writer.write(b" more\n", &upper).unwrap();
        assert_eq!(log.text(), "done\nprogress 45% [masked] more\n");
        log.writer.flush(&upper).unwrap();
        assert_eq!(log.writer.written(), log.text().len() as u64);
    }

    #[test]
    fn a_partial_line_longer_than_eight_kib_is_written_without_waiting() {
        let mut log = Log::new();
        let long = vec![b'q'; HOLD_BYTES + 10];
        log.writer.write(&long, &same).unwrap();
        assert_eq!(log.text().len(), HOLD_BYTES, "8 KiB written, the rest held");
        assert!(log.writer.held.len() <= HOLD_BYTES);
        log.writer.write(b"\n", &same).unwrap();
        assert_eq!(log.text().len(), HOLD_BYTES + 11);
    }

    #[test]
    fn a_secret_at_a_piece_cut_of_a_long_line_is_masked_whole() {
        // 8190 bytes, then a token over the 8 KiB cut: the piece ends before the token's word.
        let token = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
        let mask = |l: &str| l.replace(token, "[secret:1]");
        let mut log = Log::new();
        let mut line = "a ".repeat(4095).into_bytes();
        line.extend_from_slice(format!("{token} tail\n").as_bytes());
        log.writer.write(&line, &mask).unwrap();
        let text = log.text();
        assert!(!text.contains("ghp_0"), "{}", &text[text.len() - 80..]);
        assert!(
            text.ends_with("[secret:1] tail\n"),
            "{}",
            &text[text.len() - 80..]
        );
    }

    #[test]
    fn a_long_line_written_in_pieces_never_splits_a_char() {
        let mut log = Log::new();
        let line = format!("a{}\n", "é€".repeat(5000));
        log.writer.write(line.as_bytes(), &same).unwrap();
        assert_eq!(log.text(), line, "pieces join into the same text");
    }

    #[test]
    fn a_pem_private_key_spread_over_lines_is_never_written() {
        let input = format!("before\n{KEY}after hunter2\n");
        for size in [1, 2, 3, 5, 13, 64, 1000] {
            let mut log = Log::new();
            for chunk in input.as_bytes().chunks(size) {
                log.writer.write(chunk, &upper).unwrap();
            }
            let text = log.text();
            assert_eq!(
                text, "before\n[private key masked]\nafter [masked]\n",
                "chunks of {size}"
            );
        }
    }

    #[test]
    fn a_pem_key_is_masked_even_when_a_flush_cuts_its_begin_line() {
        let mut log = Log::new();
        log.writer.write(b"-----BEGIN RSA PRI", &same).unwrap();
        log.writer.flush(&same).unwrap();
        log.writer
            .write(
                b"VATE KEY-----\nMIIEsecretsecret\n-----END RSA PRIVATE KEY-----\nok\n",
                &same,
            )
            .unwrap();
        let text = log.text();
        assert!(!text.contains("MIIEsecret"), "{text}");
        assert!(text.ends_with("[private key masked]\nok\n"), "{text}");
    }

    #[test]
    fn each_key_gives_one_masked_line_and_other_begin_blocks_are_kept() {
        let mut log = Log::new();
        let input = format!(
            "{KEY}-----BEGIN CERTIFICATE-----\nMIIcert\n-----END CERTIFICATE-----\n{KEY}\
             key: -----BEGIN PRIVATE KEY-----MIIone-line-----END PRIVATE KEY----- done\nlast\n"
        );
        log.writer.write(input.as_bytes(), &same).unwrap();
        assert_eq!(
            log.text(),
            "[private key masked]\n-----BEGIN CERTIFICATE-----\nMIIcert\n\
             -----END CERTIFICATE-----\n[private key masked]\n[private key masked]\nlast\n"
        );
    }

    #[test]
    fn a_key_that_never_ends_masks_the_rest_of_the_log() {
        let mut log = Log::new();
        log.writer
            .write(b"-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\nsecret", &same)
            .unwrap();
        log.writer.flush(&same).unwrap();
        assert_eq!(log.text(), "[private key masked]\n");
    }

    #[test]
    fn the_log_stops_at_its_cap_with_one_notice_line() {
        let mut log = Log::with_cap(100);
        for i in 0..50 {
            log.writer
                .write(format!("line {i:03}\n").as_bytes(), &same)
                .unwrap();
        }
        let text = log.text();
        assert!(text.ends_with(STOPPED), "{text}");
        assert_eq!(text.matches("[log stopped").count(), 1);
        assert_eq!(
            text.len() - STOPPED.len(),
            99,
            "eleven whole 9-byte lines fit in 100"
        );
        assert_eq!(log.writer.written(), text.len() as u64);
        log.writer.write(b"more\n", &same).unwrap();
        log.writer.flush(&same).unwrap();
        assert_eq!(log.text(), text, "nothing after the notice");
    }

    #[test]
    fn the_stop_notice_starts_its_own_line_after_a_flushed_partial_line() {
        let mut log = Log::with_cap(10);
        log.writer.write(b"12345", &same).unwrap();
        log.writer.flush(&same).unwrap();
        log.writer.write(b"6789012345\n", &same).unwrap();
        assert_eq!(log.text(), format!("12345\n{STOPPED}"));
    }

    proptest::proptest! {
        #[test]
        fn no_chunking_or_flushing_lets_a_key_line_through(
            cuts in proptest::collection::vec((1usize..40, proptest::bool::ANY), 0..60)
        ) {
            let input = format!("x\r\n{KEY}y\n{KEY}");
            let mut log = Log::new();
            let mut rest = input.as_bytes();
            for (cut, flush) in cuts {
                let cut = cut.min(rest.len());
                log.writer.write(&rest[..cut], &same).unwrap();
                if flush {
                    log.writer.flush(&same).unwrap();
                }
                rest = &rest[cut..];
            }
            log.writer.write(rest, &same).unwrap();
            log.writer.flush(&same).unwrap();
            let text = log.text();
            proptest::prop_assert!(!text.contains("Secret") && !text.contains("b3Blbn"), "{}", text);
            proptest::prop_assert!(text.contains("[private key masked]\n"));
            proptest::prop_assert_eq!(log.writer.written(), text.len() as u64);
        }
    }

    #[test]
    fn the_real_cap_is_sixty_four_mib() {
        assert_eq!(LOG_CAP, 64 * 1024 * 1024);
        let file = tempfile::tempfile().unwrap();
        assert_eq!(LogWriter::new(file).cap, LOG_CAP);
    }
}
