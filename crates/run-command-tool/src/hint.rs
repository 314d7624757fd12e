//! Hints (RC-13): when a sandboxed command failed on a permission, the next step in the seed's
//! order — connection/auth → `network: true`; a write → a path in the working directory or
//! `write_paths`; a system socket, device, service or root-owned target → `sandbox: false` or
//! argv sudo; else report what was blocked and stop.
//!
//! **Owns:** the order and the words. The denial explanations (`exec::denials`, derived from
//! the policy itself) decide first; keywords in the output only where no denial explains it.

use crate::types::Denial;

/// Output that says a connection or name lookup failed.
const NETWORK_WORDS: &[&str] = &[
    "could not resolve host",
    "temporary failure in name resolution",
    "name or service not known",
    "network is unreachable",
    "failed to connect",
    "could not connect",
    "connection refused",
    "getaddrinfo",
    "eai_again",
    "enetunreach",
    "econnrefused",
    "failed to fetch",
    "unable to access 'http",
    "no address associated with hostname",
    "failed to establish a new connection",
];

/// Output that names a system socket, device or service.
const SYSTEM_WORDS: &[&str] = &[
    "docker.sock",
    "/var/run/",
    "/run/",
    "/dev/",
    "systemctl",
    "dbus",
    "are you root",
    "must be root",
    "requires root",
    "superuser",
];

/// Words that, next to a permission error, say the refused thing was a socket or a
/// connection (the sandbox refuses `socket()` itself without `network: true`).
const SOCKET_WORDS: &[&str] = &["socket", "connect", "http", "dns", "resolve", "ssl", "tls"];

/// Output that says something was not permitted.
const PERMISSION_WORDS: &[&str] = &[
    "permission denied",
    "operation not permitted",
    "read-only file system",
    "eacces",
    "eperm",
    "erofs",
];

/// The hint for a failed sandboxed command, if it failed on a permission.
pub(crate) fn hint(
    failed: bool,
    output: &str,
    denials: &[Denial],
    network: bool,
) -> Option<String> {
    if !failed {
        return None;
    }
    let lower = output.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    // A refused socket that is a system one (docker.sock, /run/…) is not the network's.
    let system_socket = has(PERMISSION_WORDS) && has(SYSTEM_WORDS);
    let refused_socket = has(PERMISSION_WORDS) && has(SOCKET_WORDS) && !system_socket;
    if !network && (has(NETWORK_WORDS) || refused_socket) {
        return Some(
            "the command could not reach the network, which is off by default: send the same \
             call with \"network\": true (if the failure is an authentication error instead, \
             report the missing credentials to the user)"
                .into(),
        );
    }
    if let Some(d) = denials
        .iter()
        .find(|d| d.access == "write" || d.access == "create")
    {
        return Some(format!(
            "writing {} was refused: write inside the working directory instead, or send the \
             call again with its directory in \"write_paths\" (the user confirms; outside $HOME \
             or where programs read configuration or code — a dot-directory, ~/bin, a PATH \
             directory — it needs the password)",
            d.path
        ));
    }
    if let Some(d) = denials.first() {
        return Some(format!(
            "{} access to {} was refused ({}): {}",
            d.access, d.path, d.reason, d.remedy
        ));
    }
    if !has(PERMISSION_WORDS) {
        return None;
    }
    if has(SYSTEM_WORDS) {
        return Some(
            "the command needs a system socket, device, service or root-owned file: if the user \
             agrees, run it as [\"sudo\", \"<binary>\", …] or with \"sandbox\": false (both ask \
             for the password)"
                .into(),
        );
    }
    Some(
        "the command was refused a permission the sandbox cannot grant: report what was blocked \
         to the user and stop"
            .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial(access: &'static str) -> Denial {
        Denial {
            path: "/srv/x".into(),
            access,
            reason: "r".into(),
            remedy: "m".into(),
        }
    }

    #[test]
    fn hints_follow_the_seed_order() {
        assert_eq!(hint(false, "permission denied", &[], false), None);
        assert!(
            hint(true, "curl: (6) Could not resolve host: x", &[], false)
                .unwrap()
                .contains("\"network\": true")
        );
        assert_eq!(
            hint(true, "curl: (6) Could not resolve host: x", &[], true),
            None
        );
        assert!(
            hint(true, "touch: Permission denied", &[denial("write")], false)
                .unwrap()
                .contains("write_paths")
        );
        assert!(
            hint(
                true,
                "dial unix /var/run/docker.sock: connect: permission denied",
                &[],
                false
            )
            .unwrap()
            .contains("sandbox")
        );
        assert!(
            hint(true, "x: Operation not permitted", &[], false)
                .unwrap()
                .contains("report")
        );
        assert_eq!(hint(true, "error: test failed", &[], false), None);
        // Python's socket() refused by the sandbox: the network first.
        let py = "File \"/usr/lib/python3.11/socket.py\", line 232\nPermissionError: [Errno 1] \
                  Operation not permitted";
        assert!(
            hint(true, py, &[], false)
                .unwrap()
                .contains("\"network\": true")
        );
    }
}
