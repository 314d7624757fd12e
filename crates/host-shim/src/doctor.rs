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
    // What issue 14's protections come to here: the same rule `linux_sandbox::Policy::prepare`
    // applies (private namespaces where the kernel allows them and the command's process may
    // make them: as root, or inside the supervisor's own user namespace).
    let namespaces = probe.private_namespaces_for(linux_sandbox::Launch {
        own_user_namespace: proctree::user_namespace_in_use(),
        own_pid_namespace: pid_ns,
    });
    let protections = json!({
        "privateNamespaces": namespaces,
        "metadataOutsideWritablePaths": if namespaces {
            "protected: everything but the writable paths is a read-only view (chmod, chown, utimes, xattrs refused)"
        } else {
            "NOT protected: mode, owner and times of the user's own files outside the writable paths can change"
        },
        "hostIpc": if namespaces {
            "out of reach: private IPC namespace, gone with the call"
        } else {
            "refused by seccomp (System V IPC and POSIX message queues)"
        },
        "stateDirectory": if namespaces {
            "hidden inside workspaces and extra paths, its parents pinned"
        } else {
            "a workspace or extra path containing it is refused"
        },
        "setIdBitsXattrsImmutableFlag": "refused by seccomp",
        "capabilities": "all dropped (bounding, ambient, effective, permitted, inheritable)",
        "otherProcesses": if pid_ns {
            "limits, priorities and CPU affinity of PID 1 (the supervisor) refused; the rest of the PID namespace is the command's own"
        } else {
            "limits, priorities and CPU affinity of any process but the caller refused"
        },
        "unknownSystemCalls": "ENOSYS for every number newer than the filter knows",
        "pathsNotProtected": "stat and inotify on outside paths still reveal names and metadata (Landlock governs neither)",
    });
    json!({
        "ok": true,
        "platform": "linux",
        "landlock": landlock,
        "seccomp": probe.seccomp(),
        "userNamespaces": probe.user_namespaces(),
        "sandbox": {
            "enforced": probe.can_sandbox(),
            "summary": probe.to_string(),
            "protections": protections,
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
