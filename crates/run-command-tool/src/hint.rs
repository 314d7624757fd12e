//! Hints (RC-13): when a sandboxed command failed on a permission, the next step in the seed's
//! order — connection/auth → `network: true`; a write → a path in the working directory or
//! `write_paths`; a system socket, device, service or root-owned target → `sandbox: false` or
//! argv sudo; else report what was blocked and stop.
//!
//! **Owns:** the order and the words. The denial explanations (`exec::denials`, derived from
//! the policy itself) decide first; keywords in the output only where no denial explains it.

use crate::types::Denial;

/// Output that says a name lookup failed or no route led out: never the loopback's doing.
const NETWORK_WORDS: &[&str] = &[
    "could not resolve host",
    "temporary failure in name resolution",
    "name or service not known",
    "network is unreachable",
    "getaddrinfo",
    "eai_again",
    "enetunreach",
    "failed to fetch",
    "unable to access 'http",
    "no address associated with hostname",
];

/// Output that says a connection was refused (`ECONNREFUSED`). In a network namespace whose
/// only interface is `lo`, every other address is unreachable (`ENETUNREACH`), so a refusal
/// there comes from its own loopback.
const REFUSED_WORDS: &[&str] = &["connection refused", "econnrefused"];

/// Output that says a connection failed without saying why.
const CONNECT_WORDS: &[&str] = &[
    "failed to connect",
    "could not connect",
    "couldn't connect",
    "failed to establish a new connection",
];

/// Names of the loopback as tools print a refused connection to it.
const LOOPBACK_WORDS: &[&str] = &["localhost", "127.0.0.1", "[::1]", " ::1", "0.0.0.0"];

/// Where a sandboxed command's connections could go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// The host's network (`network: true`).
    Host,
    /// Its own loopback in a private network namespace, nothing else (NET-1): a connection
    /// refused on the loopback is its own, and no switch changes that.
    OwnLoopback,
    /// No inet socket at all (no private network namespace could be made).
    Nothing,
}

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
pub(crate) fn hint(failed: bool, output: &str, denials: &[Denial], reach: Reach) -> Option<String> {
    if !failed {
        return None;
    }
    let lower = output.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    // A refused socket that is a system one (docker.sock, /run/…) is not the network's.
    let system_socket = has(PERMISSION_WORDS) && has(SYSTEM_WORDS);
    let refused_socket = has(PERMISSION_WORDS) && has(SOCKET_WORDS) && !system_socket;
    // With its own loopback, a refused connection found nothing listening there: not the
    // network being off, though a server of the host's is on the host's loopback.
    let own_loopback_refused = reach == Reach::OwnLoopback
        && !has(NETWORK_WORDS)
        && (has(REFUSED_WORDS) || (has(CONNECT_WORDS) && has(LOOPBACK_WORDS)));
    if own_loopback_refused {
        return Some(
            "nothing listened on the command's own loopback: each call has a private \
             127.0.0.1 and ::1, so a server it connects to must run in the same command (start \
             it in the background there and wait until it listens, then the client); only a \
             server of the host's (one the user started) needs the same call with \
             \"network\": true"
                .into(),
        );
    }
    let failed_connection = has(NETWORK_WORDS) || has(REFUSED_WORDS) || has(CONNECT_WORDS);
    if reach != Reach::Host && (failed_connection || refused_socket) {
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
        assert_eq!(hint(false, "permission denied", &[], Reach::Nothing), None);
        assert!(
            hint(
                true,
                "curl: (6) Could not resolve host: x",
                &[],
                Reach::Nothing
            )
            .unwrap()
            .contains("\"network\": true")
        );
        assert_eq!(
            hint(
                true,
                "curl: (6) Could not resolve host: x",
                &[],
                Reach::Host
            ),
            None
        );
        assert!(
            hint(
                true,
                "touch: Permission denied",
                &[denial("write")],
                Reach::Nothing
            )
            .unwrap()
            .contains("write_paths")
        );
        assert!(
            hint(
                true,
                "dial unix /var/run/docker.sock: connect: permission denied",
                &[],
                Reach::Nothing
            )
            .unwrap()
            .contains("sandbox")
        );
        assert!(
            hint(true, "x: Operation not permitted", &[], Reach::Nothing)
                .unwrap()
                .contains("report")
        );
        assert_eq!(hint(true, "error: test failed", &[], Reach::Nothing), None);
        // A connection refused in a private network namespace was refused by its own
        // loopback: nothing listened there, which is not the network being off.
        for own in [
            "curl: (7) Failed to connect to localhost port 5173 after 0 ms: Couldn't connect to \
             server",
            "ConnectionRefusedError: [Errno 111] Connection refused",
            "Error: connect ECONNREFUSED 127.0.0.1:3000",
            "requests.exceptions.ConnectionError: HTTPConnectionPool(host='127.0.0.1', \
             port=8000): Max retries exceeded (Failed to establish a new connection)",
        ] {
            let h = hint(true, own, &[], Reach::OwnLoopback).unwrap();
            assert!(
                h.starts_with("nothing listened on the command's own loopback"),
                "{own}"
            );
            assert!(h.contains("\"network\": true"), "{h}");
            // Without a private loopback, the same refusal still points at the network.
            assert!(
                hint(true, own, &[], Reach::Nothing)
                    .unwrap()
                    .contains("send the same call with \"network\": true"),
                "{own}"
            );
        }
        // Past its own loopback nothing is reachable: a name lookup or another address.
        for out in [
            "curl: (6) Could not resolve host: example.com",
            "curl: (7) Failed to connect to 1.1.1.1 port 80 after 0 ms: Couldn't connect to server",
            "OSError: [Errno 101] Network is unreachable",
        ] {
            assert!(
                hint(true, out, &[], Reach::OwnLoopback)
                    .unwrap()
                    .contains("send the same call with \"network\": true"),
                "{out}"
            );
        }
        // Python's socket() refused by the sandbox: the network first.
        let py = "File \"/usr/lib/python3.11/socket.py\", line 232\nPermissionError: [Errno 1] \
                  Operation not permitted";
        assert!(
            hint(true, py, &[], Reach::Nothing)
                .unwrap()
                .contains("\"network\": true")
        );
    }
}
