//! `sh -c` script validation (`argv_policy::decide` on `['sh', '-c', SCRIPT]`).
//!
//! `sh -c SCRIPT` through `argv_policy::decide` (brush-parser, then every simple command in the
//! script checked): never a panic, the same decision twice, a decision line that is JSON, a
//! refusal that says what to do instead — and a script whose first line is `rm -f x` is never
//! run, whatever follows it (RC-4: `rm` inside a script is refused; a newline ends a command,
//! so nothing after it can turn that `rm` into data).
#![no_main]

use std::sync::OnceLock;

use argv_policy::{Context, Decision, Mode, Policy, RunCommandArgs, decide, decision_json_line};
use libfuzzer_sys::fuzz_target;

mod common;

fn policy() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY.get_or_init(|| Policy::load(Mode::Safe, None).expect("the built-in policy loads"))
}

/// A work directory that does not exist: the decision reads only `package.json` files, and
/// there are none here.
fn context() -> Context {
    Context::new(
        "/nonexistent/agent-exec-fuzz/work",
        "/nonexistent/agent-exec-fuzz/home",
    )
}

fn check(script: &str) -> Decision {
    let args = RunCommandArgs::new(["sh", "-c", script]);
    let ctx = context();
    let first = decide(&args, policy(), &ctx);
    let second = decide(&args, policy(), &ctx);
    assert_eq!(first, second, "decide is not deterministic for {script:?}");
    let line = decision_json_line(&first);
    let json: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    assert!(json["decision"].is_string(), "{line}");
    if let Decision::Refuse { message, .. } = &first {
        assert!(
            !message.trim().is_empty(),
            "a refusal without a message: {line}"
        );
    }
    first
}

fuzz_target!(|data: &[u8]| {
    common::let_argv_policy_catch_parser_panics();
    let Ok(script) = std::str::from_utf8(data) else {
        return;
    };
    check(script);
    let with_rm = format!("rm -f x\n{script}");
    let d = check(&with_rm);
    assert!(
        matches!(d, Decision::Refuse { .. }),
        "a script starting with `rm -f x` would run: {with_rm:?} → {}",
        decision_json_line(&d)
    );
});
