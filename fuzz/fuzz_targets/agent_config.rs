//! The agent configuration's JSON text (`host_shim::AgentConfig::parse`).
//!
//! An agent configuration's JSON text → `host_shim::AgentConfig::parse`: never a panic, every
//! refusal names a field and a fix, and an accepted configuration serialises to JSON that
//! parses back to the same configuration (what the host writes, it reads).
#![no_main]

use host_shim::AgentConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let config = match AgentConfig::parse(text) {
        Ok(config) => config,
        Err(e) => {
            assert!(
                !e.to_string().trim().is_empty(),
                "a refusal without a message"
            );
            return;
        }
    };
    let written = serde_json::to_string(&config).expect("a configuration serialises");
    let again = AgentConfig::parse(&written)
        .unwrap_or_else(|e| panic!("the host's own rendering is refused: {e}\n{written}"));
    assert_eq!(
        again, config,
        "write then read changed the configuration: {written}"
    );
});
