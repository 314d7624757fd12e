//! `agent-exec doctor`: which sandbox features this machine has and which process-cleanup mode
//! will be used, as JSON. Facts only, from `linux_sandbox::probe()` and
//! `proctree::pid_namespace_available()`; nothing is guessed.

use serde_json::{Value, json};

/// The doctor report.
///
/// ```
/// let report = host_shim::doctor::report();
/// assert!(report["platform"].is_string());
/// assert!(report["sandbox"]["enforced"].is_boolean());
/// ```
#[cfg(target_os = "linux")]
pub fn report() -> Value {
    use linux_sandbox::LandlockSupport;
    let probe = linux_sandbox::probe();
    let landlock = match probe.landlock() {
        LandlockSupport::Available { abi } => json!({
            "available": true,
            "kernelAbi": abi,
            "usedAbi": probe.landlock_abi(),
        }),
        LandlockSupport::NotEnabled => json!({
            "available": false,
            "reason": "built in but not enabled; add landlock to the lsm= boot parameter",
        }),
        _ => json!({
            "available": false,
            "reason": "not available; needs Linux 5.13+ with Landlock",
        }),
    };
    let pid_ns = proctree::pid_namespace_available();
    json!({
        "ok": true,
        "platform": "linux",
        "landlock": landlock,
        "seccomp": probe.seccomp(),
        "userNamespaces": probe.user_namespaces(),
        "sandbox": {
            "enforced": probe.can_sandbox(),
            "summary": probe.to_string(),
        },
        "cleanup": {
            "mode": if pid_ns { "pid-namespace" } else { "subreaper" },
            "pidNamespace": pid_ns,
        },
    })
}

/// The doctor report.
#[cfg(not(target_os = "linux"))]
pub fn report() -> Value {
    json!({
        "ok": true,
        "platform": std::env::consts::OS,
        "sandbox": {
            "enforced": false,
            "summary": "this agent-exec build enforces on Linux only; exec tools return AGENT_EXEC_UNSUPPORTED here",
        },
    })
}
