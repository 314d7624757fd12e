//! `package.json` watcher resolution (argv-policy, RC-15) for `npm run fz`.
//!
//! `package.json` watcher resolution (RC-15): `npm run fz` decided in a directory whose
//! `package.json` is the input (written into a temp dir made and removed for each input:
//! libFuzzer ends the process with `exit`, which would leave a temp dir kept for the whole
//! process behind; nothing else is touched). Properties: never a panic and always an end (scripts that name each other in
//! cycles, deep chains, scripts inside `sh -c` inside scripts, all bounded by
//! `MAX_SCRIPT_LEVELS` and the traced set); the same decision twice; and when the input is a
//! JSON object, giving it a `prefz` script that is a watcher (`nodemon`) makes the call refused
//! as a watcher, whatever else the scripts say.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use argv_policy::{Context, Decision, Mode, Policy, RefuseCode, RunCommandArgs, decide};
use libfuzzer_sys::fuzz_target;

mod common;
use serde_json::Value;

fn policy() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY.get_or_init(|| Policy::load(Mode::Safe, None).expect("the built-in policy loads"))
}

fn decide_with(package_json: &[u8]) -> Decision {
    let dir = tempfile::tempdir().expect("a temp dir");
    let work: PathBuf = dir.path().join("work");
    std::fs::create_dir(&work).expect("the work dir");
    std::fs::write(work.join("package.json"), package_json).expect("package.json written");
    let ctx = Context::new(&work, work.join("home"));
    let args = RunCommandArgs::new(["npm", "run", "fz"]);
    let first = decide(&args, policy(), &ctx);
    assert_eq!(first, decide(&args, policy(), &ctx), "not deterministic");
    first
}

fuzz_target!(|data: &[u8]| {
    common::let_argv_policy_catch_parser_panics();
    decide_with(data);
    let Ok(Value::Object(mut pkg)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let scripts = pkg
        .entry("scripts")
        .and_modify(|s| {
            if !s.is_object() {
                *s = Value::Object(Default::default());
            }
        })
        .or_insert_with(|| Value::Object(Default::default()));
    scripts
        .as_object_mut()
        .expect("made an object")
        .insert("prefz".into(), Value::from("nodemon"));
    let text = serde_json::to_vec(&pkg).expect("serialises");
    let d = decide_with(&text);
    assert_eq!(
        d.code(),
        Some(RefuseCode::Watcher),
        "a `prefz: nodemon` script was not seen: {d:?}\n{}",
        String::from_utf8_lossy(&text)
    );
});
