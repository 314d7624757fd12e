//! The resource limits' parsers (LIM-1): the host's `AGENT_EXEC_LIMITS` value
//! (`exec::ResourceLimits::with_overrides`) and the cgroup texts exec reads (`mountinfo`,
//! `/proc/self/cgroup`, the names of call cgroups it sweeps, counter files).
//!
//! Properties: never a panic; an accepted overrides text gives limits whose own rendering reads
//! back to the same limits; a sweep name parses only in its exact shape, and the shape made from
//! any numbers parses back to them; every own-cgroup path is absolute.
#![no_main]

use exec::ResourceLimits;
use exec::fuzzing::{counter_value, parse_cgroup_mounts, parse_name, parse_own_cgroups};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match mode % 4 {
        0 => {
            let base = ResourceLimits::for_run();
            if let Ok(limits) = base.with_overrides(&text) {
                let again = base
                    .with_overrides(&limits.to_overrides())
                    .expect("a rendering reads back");
                assert_eq!(again, limits);
            }
        }
        1 => {
            for (_, controllers) in parse_cgroup_mounts(&text) {
                // A v1 mount always names its options; cgroup2 has none.
                assert!(controllers.is_none_or(|c| !c.is_empty()));
            }
            for (_, path) in parse_own_cgroups(&text) {
                assert!(path.starts_with('/'), "{path:?}");
            }
        }
        2 => {
            if let Some((pid, start)) = parse_name(&text) {
                assert!(text.starts_with("agent-exec."), "{text:?}");
                let made = format!("agent-exec.{pid}.{start}.0");
                assert_eq!(parse_name(&made), Some((pid, start)));
            }
        }
        _ => {
            let key = text.split_whitespace().next().unwrap_or("max");
            let _ = counter_value(&text, key);
        }
    }
});
