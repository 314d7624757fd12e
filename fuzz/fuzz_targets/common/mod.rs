//! What several targets share: letting the panics argv-policy catches by design stay caught.
//!
//! argv-policy runs brush-parser (the `sh -c` parser) inside `catch_unwind`, because brush
//! unwraps internally (e.g. an I/O number too large for `i32`, `99999999999>x`) and a panic on
//! hostile input must become a refusal (`RUN_COMMAND_SCRIPT_UNPARSABLE`), not a crash.
//! libFuzzer's panic hook aborts on *every* panic, before any `catch_unwind` sees it, so such a
//! target would report the handled case as a crash. This hook lets a panic raised inside
//! brush-parser unwind to argv-policy's `catch_unwind`; every other panic still aborts, and a
//! brush panic that argv-policy did *not* catch still reaches libfuzzer-sys's own
//! `catch_unwind`, which aborts too.

use std::sync::Once;

pub fn let_argv_policy_catch_parser_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let fuzzer_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_parser = info
                .location()
                .is_some_and(|l| l.file().contains("/brush-parser-"));
            if !in_parser {
                fuzzer_hook(info);
            }
        }));
    });
}
