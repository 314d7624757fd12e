//! `sbpl`: what would this Seatbelt profile allow? Answered off the Mac.
//!
//! ```text
//! cargo run -p seatbelt --example sbpl -- check FILE [-D KEY=VALUE]... [--rules]
//! cargo run -p seatbelt --example sbpl -- decide FILE [-D KEY=VALUE]... [--type VNODE] OP OBJECT
//! ```
//!
//! Exit codes: 0 allowed / parsed, 1 denied, 2 error, 3 not modelled. The command itself is
//! [`seatbelt::sbpl::cli`]; this only forwards the arguments and prints.

use std::io::Write as _;
use std::process::ExitCode;

fn main() -> ExitCode {
    let run = seatbelt::sbpl::cli::run(std::env::args().skip(1).collect());
    // A closed pipe (`… | head`) is not worth a panic.
    let _ = std::io::stdout().write_all(run.stdout.as_bytes());
    let _ = std::io::stderr().write_all(run.stderr.as_bytes());
    ExitCode::from(run.code)
}
