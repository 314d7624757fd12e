//! The CLI's answer to `command`'s extra-path questions (CMD-3): a `y/N` on `/dev/tty`.
//!
//! An approval counts for one call. A pending question is abandoned when the call is cancelled
//! (the tool drops the future; CMD-12), and a caller with no terminal is refused, never assumed
//! to agree.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use host_shim::{Approval, Approver};

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
