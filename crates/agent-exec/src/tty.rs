//! The CLI's answers: to `command`'s extra-path questions (CMD-3), a `y/N` on `/dev/tty`; to
//! `run_command`'s confirmations and passwords ([`TtyAsker`]), the terminal, `--yes` and
//! `--password-fd N`. A `run_command` question shows [`Question::text`] as it is, each line
//! marked `agent-exec: ` (TRUST-4): this module renders none of the agent's text itself.
//!
//! An approval counts for one call. A pending question is abandoned when the call is cancelled
//! (the tool drops the future; CMD-12), and a caller with no terminal is refused, never assumed
//! to agree.

use std::future::Future;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use host_shim::{Approval, Approver, Asker, Confirmation, Password, PasswordReply, Question};

/// Asks the person at the terminal, on `/dev/tty` (not stdin, which carries the arguments),
/// whether this call may use an extra path. No controlling terminal → no.
///
/// A question still open when the call is cancelled stays on the terminal until answered; its
/// answer is then ignored.
#[derive(Clone, Copy, Debug, Default)]
pub struct TtyApprover;

fn ask_tty(path: &Path, write: bool) -> bool {
    let Ok(tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return false;
    };
    let access = if write { "read and write" } else { "read" };
    // `{:?}` escapes control characters: a path cannot write to the terminal what it likes.
    let prompt = format!(
        "agent-exec: allow this command to {access} {:?} for this call only? [y/N] ",
        path.as_os_str()
    );
    if (&tty).write_all(prompt.as_bytes()).is_err() {
        return false;
    }
    let mut line = String::new();
    if BufReader::new(&tty).take_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim(), "y" | "Y" | "yes" | "Yes" | "YES")
}

/// `BufRead::read_line` with a bound, so a terminal cannot feed an endless line.
trait TakeLine {
    fn take_line(&mut self, line: &mut String) -> std::io::Result<usize>;
}

impl<R: BufRead> TakeLine for R {
    fn take_line(&mut self, line: &mut String) -> std::io::Result<usize> {
        use std::io::Read;
        self.take(256).read_line(line)
    }
}

impl Approver for TtyApprover {
    fn approve_extra_path<'a>(&'a self, path: &'a Path, write: bool) -> Approval<'a> {
        let path: PathBuf = path.to_path_buf();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || ask_tty(&path, write))
                .await
                .unwrap_or(false)
        })
    }
}

/// The CLI's [`Asker`] for `run_command`: confirmations as the question's text and
/// `Allow it? [y/N]` on `/dev/tty` (or yes without asking under `--yes`), passwords from `--password-fd N` (one line
/// per attempt) or typed on `/dev/tty` with echo off. No terminal and no flag → `CannotAsk`:
/// the call comes back not executed, never assumed to be a yes.
///
/// The terminal's modes are restored on every path: the guard puts them back when the read
/// ends, fails or panics, and the terminal's own signal keys are off while the password is
/// typed, so Ctrl-C (and Ctrl-\, Ctrl-Z) arrive as input, cancel the prompt and never kill
/// the process with echo left off.
#[derive(Debug)]
pub struct TtyAsker {
    /// `--yes`: every confirmation is a yes (passwords are still asked).
    yes: bool,
    /// `--password-fd N`, taken over by the process; one line per attempt.
    password_fd: Option<Arc<Mutex<std::fs::File>>>,
}

impl TtyAsker {
    /// An asker that asks on the terminal, confirms everything when `yes`, and reads passwords
    /// from `password_fd` when given.
    pub fn new(yes: bool, password_fd: Option<std::fs::File>) -> TtyAsker {
        TtyAsker {
            yes,
            password_fd: password_fd.map(|f| Arc::new(Mutex::new(f))),
        }
    }
}

/// The longest password line read; a longer one is refused (cancelled), not cut.
const MAX_PASSWORD_BYTES: usize = 1024;

/// `q`'s text, each line marked as ours, then `ask`: the one rendering every channel shows
/// (TRUST-4), whose agent text is escaped already, so it cannot drive the terminal.
fn prompt(q: &Question, ask: &str) -> String {
    let mut out = String::new();
    for line in q.text().lines() {
        out.push_str("agent-exec: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push_str("agent-exec: ");
    out.push_str(ask);
    out
}

/// The terminal's confirmation prompt for `q`.
pub(crate) fn confirm_prompt(q: &Question) -> String {
    prompt(q, "Allow it? [y/N] ")
}

/// The terminal's password prompt for `q`.
fn password_prompt(q: &Question) -> String {
    prompt(
        q,
        &format!(
            "system password to allow it (attempt {} of 3; Ctrl-C cancels): ",
            q.attempt
        ),
    )
}

fn open_tty() -> Option<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .ok()
}

fn confirm_on_tty(q: &Question) -> Confirmation {
    let Some(tty) = open_tty() else {
        return Confirmation::CannotAsk;
    };
    if (&tty).write_all(confirm_prompt(q).as_bytes()).is_err() {
        return Confirmation::CannotAsk;
    }
    let mut line = String::new();
    match BufReader::new(&tty).take_line(&mut line) {
        Err(_) | Ok(0) => Confirmation::CannotAsk,
        Ok(_) if matches!(line.trim(), "y" | "Y" | "yes" | "Yes" | "YES") => Confirmation::Yes,
        Ok(_) => Confirmation::No,
    }
}

/// Where a secret line comes from: a descriptor a script writes lines to, or a terminal in
/// non-canonical mode, whose editing keys this reader handles itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Lines,
    Terminal,
}

/// One line from `from`, read a byte at a time (so nothing of the next attempt's line is
/// consumed), without its `\n` (and `\r`). `None` at end of input before any byte, for a line
/// over [`MAX_PASSWORD_BYTES`], for one that is not UTF-8, and from a terminal for Ctrl-C,
/// Ctrl-\, Ctrl-Z (signals are off while the password is typed) and Ctrl-D on an empty line;
/// there Enter ends the line, Backspace erases a byte and Ctrl-U the whole line.
fn read_secret_line(mut from: impl Read, source: Source) -> Option<String> {
    // Allocated once at its bound, so no reallocation leaves a copy of the password behind.
    let mut bytes = Vec::with_capacity(MAX_PASSWORD_BYTES + 1);
    let mut byte = [0u8; 1];
    let terminal = source == Source::Terminal;
    let complete = loop {
        match from.read(&mut byte) {
            Ok(0) => break !bytes.is_empty(),
            Ok(_) if byte[0] == b'\n' || (terminal && byte[0] == b'\r') => break true,
            Ok(_) if terminal && matches!(byte[0], 0x03 | 0x1c | 0x1a) => break false,
            Ok(_) if terminal && byte[0] == 0x04 && bytes.is_empty() => break false,
            Ok(_) if terminal && matches!(byte[0], 0x7f | 0x08) => {
                if let Some(last) = bytes.last_mut() {
                    *last = 0;
                }
                bytes.pop();
            }
            Ok(_) if terminal && byte[0] == 0x15 => {
                bytes.fill(0);
                bytes.clear();
            }
            Ok(_) if bytes.len() == MAX_PASSWORD_BYTES => break false,
            Ok(_) => bytes.push(byte[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break false,
        }
    };
    if bytes.last() == Some(&b'\r') {
        bytes.pop();
    }
    if !complete {
        bytes.fill(0);
        return None;
    }
    match String::from_utf8(bytes) {
        Ok(text) => Some(text),
        Err(e) => {
            let mut bytes = e.into_bytes();
            bytes.fill(0);
            None
        }
    }
}

/// Puts the terminal's saved modes back when dropped.
struct RestoreModes<'a> {
    tty: &'a std::fs::File,
    saved: rustix::termios::Termios,
}

impl Drop for RestoreModes<'_> {
    fn drop(&mut self) {
        let _ = rustix::termios::tcsetattr(
            self.tty,
            rustix::termios::OptionalActions::Now,
            &self.saved,
        );
    }
}

fn password_on_tty(q: &Question) -> PasswordReply {
    use rustix::termios::{LocalModes, OptionalActions, SpecialCodeIndex, tcgetattr, tcsetattr};
    let Some(tty) = open_tty() else {
        return PasswordReply::CannotAsk;
    };
    let Ok(saved) = tcgetattr(&tty) else {
        // Not a terminal we can turn echo off on: a password is never typed visibly.
        return PasswordReply::CannotAsk;
    };
    let prompt = password_prompt(q);
    // No echo; no signal keys (Ctrl-C arrives as a byte and cancels, so the process is never
    // killed with echo off); byte by byte (the line editing is the reader's), so Ctrl-C
    // cancels at once instead of waiting in the line for Enter.
    let mut quiet = saved.clone();
    quiet
        .local_modes
        .remove(LocalModes::ECHO | LocalModes::ISIG | LocalModes::ICANON);
    quiet.special_codes[SpecialCodeIndex::VMIN] = 1;
    quiet.special_codes[SpecialCodeIndex::VTIME] = 0;
    let restore = RestoreModes { tty: &tty, saved };
    if tcsetattr(&tty, OptionalActions::Flush, &quiet).is_err()
        || (&tty).write_all(prompt.as_bytes()).is_err()
    {
        return PasswordReply::CannotAsk;
    }
    let line = read_secret_line(&tty, Source::Terminal);
    drop(restore);
    match line {
        Some(text) => {
            let _ = (&tty).write_all(b"\n");
            PasswordReply::Given(Password::new(text))
        }
        None => {
            let _ = (&tty).write_all(b"\nagent-exec: cancelled\n");
            PasswordReply::Cancelled
        }
    }
}

impl Asker for TtyAsker {
    fn confirm<'a>(
        &'a self,
        q: &'a Question,
    ) -> Pin<Box<dyn Future<Output = Confirmation> + Send + 'a>> {
        Box::pin(async move {
            if self.yes {
                return Confirmation::Yes;
            }
            let q = q.clone();
            tokio::task::spawn_blocking(move || confirm_on_tty(&q))
                .await
                .unwrap_or(Confirmation::CannotAsk)
        })
    }

    fn password<'a>(
        &'a self,
        q: &'a Question,
    ) -> Pin<Box<dyn Future<Output = PasswordReply> + Send + 'a>> {
        Box::pin(async move {
            let q = q.clone();
            let fd = self.password_fd.clone();
            tokio::task::spawn_blocking(move || match fd {
                // No more lines from the script: nothing more to try.
                Some(fd) => {
                    let file = fd.lock().unwrap_or_else(PoisonError::into_inner);
                    match read_secret_line(&*file, Source::Lines) {
                        Some(text) => PasswordReply::Given(Password::new(text)),
                        None => PasswordReply::Cancelled,
                    }
                }
                None => password_on_tty(&q),
            })
            .await
            .unwrap_or(PasswordReply::CannotAsk)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_line_is_read_up_to_its_newline_and_no_further() {
        let input: &[u8] = b"first\r\nsecond\nlast";
        let mut from = input;
        let lines = Source::Lines;
        assert_eq!(read_secret_line(&mut from, lines).as_deref(), Some("first"));
        assert_eq!(
            read_secret_line(&mut from, lines).as_deref(),
            Some("second")
        );
        assert_eq!(read_secret_line(&mut from, lines).as_deref(), Some("last"));
        assert_eq!(read_secret_line(&mut from, lines), None);
    }

    #[test]
    fn ctrl_c_an_endless_line_and_bad_utf8_cancel_the_prompt() {
        let (term, lines) = (Source::Terminal, Source::Lines);
        assert_eq!(read_secret_line(&b"abc\x03def\n"[..], term), None);
        assert_eq!(read_secret_line(&b"\x04"[..], term), None);
        assert_eq!(
            read_secret_line(&b"abc\x03def\n"[..], lines).as_deref(),
            Some("abc\u{3}def")
        );
        let long = vec![b'a'; MAX_PASSWORD_BYTES + 1];
        assert_eq!(read_secret_line(&long[..], lines), None);
        let exact = [vec![b'a'; MAX_PASSWORD_BYTES], b"\n".to_vec()].concat();
        assert_eq!(
            read_secret_line(&exact[..], lines).map(|s| s.len()),
            Some(MAX_PASSWORD_BYTES)
        );
        assert_eq!(read_secret_line(&b"\xff\xfe\n"[..], lines), None);
    }

    #[test]
    fn on_a_terminal_enter_backspace_and_ctrl_u_edit_the_line() {
        let term = Source::Terminal;
        assert_eq!(read_secret_line(&b"pw\r"[..], term).as_deref(), Some("pw"));
        assert_eq!(
            read_secret_line(&b"pxx\x7f\x7fw\n"[..], term).as_deref(),
            Some("pw")
        );
        assert_eq!(
            read_secret_line(&b"\x7fpw\n"[..], term).as_deref(),
            Some("pw")
        );
        assert_eq!(
            read_secret_line(&b"junk\x15pw\n"[..], term).as_deref(),
            Some("pw")
        );
    }

    proptest::proptest! {
        /// Whatever a script writes, each line comes back exactly (without its end of line),
        /// and nothing of the next line is consumed.
        #[test]
        fn every_line_from_a_descriptor_comes_back_exactly(
            lines in proptest::collection::vec("[^\r\n]{0,40}", 1..5)
        ) {
            let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
            let mut from = text.as_bytes();
            for line in &lines {
                let got = read_secret_line(&mut from, Source::Lines);
                proptest::prop_assert_eq!(got.as_deref(), Some(line.as_str()));
            }
            proptest::prop_assert_eq!(read_secret_line(&mut from, Source::Lines), None);
        }

        /// On a terminal, any typing that holds Ctrl-C before Enter is a cancel.
        #[test]
        fn ctrl_c_anywhere_before_enter_cancels(
            before in "[a-z]{0,20}", after in "[a-z]{0,20}"
        ) {
            let typed = format!("{before}\u{3}{after}\r");
            proptest::prop_assert_eq!(read_secret_line(typed.as_bytes(), Source::Terminal), None);
        }
    }

    #[test]
    fn trust_4_an_argv_cannot_write_control_characters_to_the_terminal() {
        let grants = host_shim::Granted::new().with(host_shim::Grant::Run {
            argv: vec!["rm".into(), "\u{1b}[2Jx\n\u{202e}".into()],
            scripts: Vec::new(),
            place: host_shim::Place::Sandbox,
        });
        let q = Question::new("rm", "the policy asks", &grants).unwrap();
        assert_eq!(
            confirm_prompt(&q),
            "agent-exec: the policy asks\n\
             agent-exec: A yes allows:\n\
             agent-exec: - run `rm '\\x1b[2Jx\\n\\u{202e}'` in the sandbox\n\
             agent-exec: Allow it? [y/N] "
        );
        assert!(password_prompt(&q.attempt(2)).ends_with(
            "in the sandbox\nagent-exec: system password to allow it (attempt 2 of 3; \
                 Ctrl-C cancels): "
        ));
    }
}
