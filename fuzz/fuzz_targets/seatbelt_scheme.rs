//! SBPL as other teams write it (`seatbelt::sbpl`: reader, Scheme layer, decisions).
//!
//! Any text → `sbpl::read` and `sbpl::expand` under a small step budget: never a panic, never a
//! stack overflow (deep nesting is an error), never a hang (the budget); what reads back from
//! `Datum`'s display is the same tree; what expands answers a few questions without panicking.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use seatbelt::sbpl::{self, Limits, Query};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Small enough that each input runs in milliseconds, large enough for real profiles.
    let limits = Limits {
        max_steps: 100_000,
        max_rules: 2_000,
        ..Limits::default()
    };
    if let Ok(forms) = sbpl::read(text, &limits) {
        let shown: String = forms.iter().map(|d| format!("{d}\n")).collect();
        match sbpl::read(&shown, &limits) {
            Ok(again) => assert_eq!(again, forms, "display then read changed the tree:\n{shown}"),
            Err(e) => panic!("the display of a read tree does not read: {e}\n{shown}"),
        }
    }
    let params: BTreeMap<String, String> = [
        ("HOME", "/Users/f"),
        ("ROOT", "/w"),
        ("OS_VERSION", "1400"),
        ("FLAG", "TRUE"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    let Ok(policy) = sbpl::expand(text, &params, &limits) else {
        return;
    };
    for (op, object) in [
        ("file-read-data", "/w/a"),
        ("file-write-create", "/Users/f/x"),
        ("process-exec", "/bin/sh"),
        ("signal", "child"),
        ("network-outbound", "tcp:localhost:80"),
        ("network-bind", "/tmp/s"),
        ("sysctl-read", "hw.ncpu"),
        ("mach-lookup", "com.example.a"),
        ("iokit-open", "-"),
    ] {
        let Ok(query) = Query::parse(op, object) else {
            panic!("the fixed query {op} {object} does not parse");
        };
        let decided = policy.decide(&query, &params);
        let _ = decided.to_string();
    }
});
