//! The confirmation text (`run_command_tool::Granted::text`, TRUST-4).
//!
//! Any argv (NUL-separated, its scripts parsed as argv-policy parses them), write path and
//! trash path: never a panic, the same text twice, and a text that holds no control, format,
//! separator or invisible character but its own line breaks, whose every line after the first
//! two is one this renderer starts (`- ` or two spaces) — so nothing the agent sends forges a
//! line or hides one.
#![no_main]

use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;
use run_command_tool::{Grant, Granted, Place};

mod common;

/// True for a character a channel must never receive from the agent (std's own tables).
fn forbidden(c: char) -> bool {
    let shown = format!("{:?}", format!("a{c}"));
    let plain = shown == format!("\"a{c}\"") || matches!(c, '"' | '\\');
    !plain || matches!(c, '\u{115f}' | '\u{1160}' | '\u{3164}' | '\u{ffa0}' | '\u{2800}')
}

fuzz_target!(|data: &[u8]| {
    common::let_argv_policy_catch_parser_panics();
    let text = String::from_utf8_lossy(data);
    let mut parts: Vec<String> = text.split('\0').map(str::to_owned).collect();
    let path = PathBuf::from(parts.pop().unwrap_or_default());
    let argv = if parts.is_empty() { vec!["sh".to_owned()] } else { parts };
    let scripts = argv_policy::shown_scripts(&argv, Path::new("/home/u"));
    let granted = Granted::new()
        .with(Grant::Run {
            argv,
            scripts,
            place: Place::Sandbox,
        })
        .with(Grant::Write(path.clone()))
        .with(Grant::Trash(vec![path]));
    let first = granted.text("why");
    assert_eq!(first, granted.text("why"), "not deterministic");
    let Ok(shown) = first else { return };
    for c in shown.chars() {
        assert!(c == '\n' || !forbidden(c), "{c:?} in {shown:?}");
    }
    for line in shown.lines().skip(2) {
        assert!(line.starts_with("- ") || line.starts_with("  "), "{line:?}");
    }
});
