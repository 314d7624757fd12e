//! Deciding one access against a [`Policy`]: allow, deny, or "not modelled" — with the rule that
//! decided, its position, the parameters it used and its modifiers.
//!
//! # Semantics, and their sources
//!
//! * **The last matching rule decides; `default` decides what none matches.** Rules are scanned
//!   from the end; the first whose operation covers the request and whose filters match decides.
//!   With no match the last `(allow|deny default)` decides; a profile without one gets "not
//!   modelled" (the crate does not guess the platform's fallback). Sources: the Apple Sandbox
//!   Guide v1.0 (fG!, 2011), Apple's `/System/Library/Sandbox/Profiles/*.sb` (narrow denies after
//!   broad allows), Chromium's `sandbox/policy/mac/*.sb` and Codex's `seatbelt_base_policy.sbpl`.
//! * **Three-valued filters.** Each filter is true, false or unknown (a filter or an object this
//!   model does not decide), combined as Kleene logic: `require-all` is false if any part is
//!   false, `require-any` true if any part is true, `require-not` flips true/false. Scanning
//!   passes over a rule whose match is unknown; the answer stands only if every such rule has the
//!   action of the rule that finally decides (then it does not matter whether they matched).
//!   Otherwise the answer is [`Outcome::NotModelled`], naming the rule and the filter.
//! * **Files** ([`ObjectKind::Path`], also `process-exec*`): the query path is resolved as the
//!   kernel reports it (`/tmp`, `/var`, `/etc` → `/private/…`, [`crate::eval`]); `literal` and
//!   `path` are equality, `subpath` component-wise containment, `prefix` a string prefix, `regex`
//!   an unanchored search in [`Pattern`]'s POSIX-ERE subset (a pattern outside it
//!   is unknown, not an error: Apple's dialect is undocumented). `vnode-type` is unknown unless
//!   the query names the type.
//! * **Processes** (`signal`, `process-info*`): the query names the target's relation (`self`,
//!   `child`, `same-sandbox`, `other`); `(target self|children|same-sandbox)` match by relation,
//!   a child and the caller itself being in the same sandbox (children inherit it — Apple
//!   Sandbox Guide, and Codex's comment "child processes inherit the policy of their parent").
//!   `others`, `pgrp` and `parent` are unknown. `process-fork` has no object.
//! * **Network** (`network-outbound`: the remote end; `network-bind`/`network-inbound`: the local
//!   end): `(remote|local ip|ip4|ip6|tcp…|udp… "HOST:PORT")` where HOST is `*` or `localhost`
//!   and PORT `*` or a number — the only forms `sandbox-exec` accepts (Apple Sandbox Guide,
//!   "network filters"); `localhost` is 127.0.0.0/8, `::1` and `localhost`. A Unix socket is a
//!   path: path filters match it directly (Chromium's `(allow network-outbound (literal
//!   "/private/var/run/syslog"))`) or inside `(remote unix-socket (path-literal …))` (Codex).
//!   A filter on the other end of the connection is unknown.
//! * **sysctl** (`sysctl-read`, `sysctl-write`): `sysctl-name` equality, `-prefix`, `-regex`.
//! * **Mach** (`mach-lookup`): the query is a global service name: `global-name` equality,
//!   `-prefix`, `-regex`; `local-name` never matches a global lookup.
//! * A modelled filter about an object the request does not carry (a `literal` on a
//!   `sysctl-read`) is false, as in [`crate::eval`]; on an unmodelled operation every filter is
//!   unknown, so only an unconditional rule or the default decides it.

use std::collections::BTreeMap;
use std::fmt;

use super::catalog::{self, ObjectKind};
use super::policy::{Arg, FilterValue, Policy, PolicyRule};
use crate::ast::Action;
use crate::eval::resolve_query_path;
use crate::pattern::Pattern;

/// The `vnode-type` values.
pub const VNODE_TYPES: &[&str] = &[
    "REGULAR-FILE",
    "DIRECTORY",
    "SYMLINK",
    "CHARACTER-DEVICE",
    "BLOCK-DEVICE",
    "FIFO",
    "SOCKET",
    "TTY",
];

/// The `target` values.
pub const TARGETS: &[&str] = &[
    "self",
    "same-sandbox",
    "children",
    "others",
    "pgrp",
    "parent",
];

const IP_KINDS: &[&str] = &[
    "ip", "ip4", "ip6", "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6",
];
const UNIX_KINDS: &[&str] = &["unix-socket", "unix"];

/// Checks the shape of `(remote …)`/`(local …)` arguments, as `sandbox-exec` would.
pub(super) fn check_address(name: &str, args: &[Arg]) -> Result<(), String> {
    let usage = format!(
        "`({name} KIND [ADDRESS])`: KIND is one of {} or unix-socket; ADDRESS is \"*:*\", \"localhost:PORT\" …",
        IP_KINDS.join(", ")
    );
    match args {
        [Arg::Symbol(k)] if IP_KINDS.contains(&k.as_str()) || UNIX_KINDS.contains(&k.as_str()) => {
            Ok(())
        }
        [Arg::Symbol(k), Arg::Str(addr)] if IP_KINDS.contains(&k.as_str()) => {
            parse_filter_address(addr).map(|_| ())
        }
        [Arg::Symbol(k), Arg::Filter(_)] if UNIX_KINDS.contains(&k.as_str()) => Ok(()),
        _ => Err(usage),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HostPattern {
    Any,
    Localhost,
}

fn parse_filter_address(addr: &str) -> Result<(HostPattern, Option<u16>), String> {
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err(format!(
            "network address {addr:?} is HOST:PORT, e.g. \"localhost:8080\" or \"*:443\""
        ));
    };
    let host = match host {
        "*" => HostPattern::Any,
        "localhost" => HostPattern::Localhost,
        _ => {
            return Err(format!(
                "network address {addr:?}: the host must be * or localhost (Seatbelt filters no other hosts)"
            ));
        }
    };
    let port = match port {
        "*" => None,
        p => Some(p.parse::<u16>().map_err(|_| {
            format!("network address {addr:?}: the port must be * or a number 0-65535")
        })?),
    };
    Ok((host, port))
}

/// A relation of a target process to the caller, for `signal` and `process-info*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Relation {
    /// The calling process itself.
    SelfProcess,
    /// A child of the caller (it inherits the sandbox).
    Child,
    /// Another process in the same sandbox.
    SameSandbox,
    /// A process outside the sandbox.
    Other,
}

/// A transport protocol of a network query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

/// What a query is aimed at.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Object {
    /// Nothing (`process-fork`, an unmodelled operation).
    Nothing,
    /// A file path (absolute; resolved as the kernel would).
    Path(String),
    /// A process.
    Process(Relation),
    /// An IP endpoint: `HOST:PORT`, optionally `tcp:`/`udp:` first.
    Ip {
        /// The protocol, when given.
        protocol: Option<Protocol>,
        /// Whether the host is this machine (`localhost`, 127.0.0.0/8, `::1`).
        local_host: bool,
        /// `Some(true)` for IPv4, `Some(false)` for IPv6, `None` for a name.
        v4: Option<bool>,
        /// The port.
        port: u16,
    },
    /// A sysctl or Mach service name.
    Name(String),
}

/// One access to decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// A concrete catalog operation.
    pub operation: &'static str,
    /// What it is aimed at.
    pub object: Object,
    /// The file type, for `vnode-type` filters.
    pub vnode_type: Option<&'static str>,
}

impl Query {
    /// Builds a query from the words a person types: `OP OBJECT`, where OBJECT is a path for
    /// file and exec operations, a name for `sysctl-*` and `mach-lookup`, `self`/`child`/
    /// `same-sandbox`/`other` for process operations, `[tcp:|udp:]HOST:PORT` or a socket path for
    /// network ones, and anything (e.g. `-`) for the rest.
    pub fn parse(operation: &str, object: &str) -> Result<Query, String> {
        let Some((op, kind)) = catalog::operation(operation) else {
            let hint = catalog::suggest(operation)
                .map(|n| format!(" (did you mean `{n}`?)"))
                .unwrap_or_default();
            return Err(format!(
                "`{operation}` is not a Seatbelt operation this crate knows{hint}"
            ));
        };
        if op.ends_with('*') {
            return Err(format!(
                "`{op}` is a wildcard; the kernel checks concrete operations — ask about one, e.g. {}",
                catalog::OPERATIONS
                    .iter()
                    .map(|(n, _)| *n)
                    .find(|n| !n.ends_with('*') && catalog::covers(op, n))
                    .unwrap_or("file-read-data")
            ));
        }
        let object = match kind {
            None | Some(ObjectKind::Nothing) => Object::Nothing,
            Some(ObjectKind::Path) => Object::Path(resolve(object)?),
            Some(ObjectKind::Sysctl | ObjectKind::MachService) => Object::Name(object.to_owned()),
            Some(ObjectKind::Process) => Object::Process(match object {
                "self" => Relation::SelfProcess,
                "child" | "children" => Relation::Child,
                "same-sandbox" => Relation::SameSandbox,
                "other" | "others" => Relation::Other,
                _ => {
                    return Err(format!(
                        "process target {object:?}: use self, child, same-sandbox or other"
                    ));
                }
            }),
            Some(ObjectKind::Network) => network_object(object)?,
        };
        Ok(Query {
            operation: op,
            object,
            vnode_type: None,
        })
    }

    /// The same query about a file of type `t` (a [`VNODE_TYPES`] name).
    pub fn with_vnode_type(mut self, t: &str) -> Result<Query, String> {
        self.vnode_type = Some(
            VNODE_TYPES
                .iter()
                .copied()
                .find(|n| *n == t)
                .ok_or_else(|| {
                    format!("vnode type {t:?}: use one of {}", VNODE_TYPES.join(", "))
                })?,
        );
        Ok(self)
    }
}

fn resolve(path: &str) -> Result<String, String> {
    resolve_query_path(path).ok_or_else(|| {
        format!("path {path:?} is not absolute and resolved; give the path the kernel would see")
    })
}

fn network_object(text: &str) -> Result<Object, String> {
    if text.starts_with('/') {
        return Ok(Object::Path(resolve(text)?));
    }
    let (protocol, rest) = match text.split_once(':') {
        Some(("tcp", rest)) => (Some(Protocol::Tcp), rest),
        Some(("udp", rest)) => (Some(Protocol::Udp), rest),
        _ => (None, text),
    };
    let usage = || {
        format!(
            "network address {text:?}: use [tcp:|udp:]HOST:PORT (e.g. tcp:localhost:8080, [::1]:53) or a socket path"
        )
    };
    let (host, port) = rest.rsplit_once(':').ok_or_else(usage)?;
    let port: u16 = port.parse().map_err(|_| usage())?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(usage());
    }
    let (local_host, v4) = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => (ip.is_loopback(), Some(ip.is_ipv4())),
        Err(_) => (host.eq_ignore_ascii_case("localhost"), None),
    };
    Ok(Object::Ip {
        protocol,
        local_host,
        v4,
        port,
    })
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Allowed.
    Allow,
    /// Denied.
    Deny,
    /// The model cannot say; the reason names the rule and filter it could not decide.
    NotModelled(String),
}

/// An answer and the rule behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided<'p> {
    /// Allow, deny or not modelled.
    pub outcome: Outcome,
    /// The deciding rule (for not modelled: the rule it could not decide, if any).
    pub rule: Option<&'p PolicyRule>,
    /// The parameters the rule used, with the values given.
    pub params: BTreeMap<String, Option<String>>,
    /// Rules passed over as unknown that did not change the answer (same action).
    pub unknown_passed: Vec<&'p PolicyRule>,
}

impl fmt::Display for Decided<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            Outcome::Allow => f.write_str("allow")?,
            Outcome::Deny => f.write_str("deny")?,
            Outcome::NotModelled(why) => write!(f, "not modelled: {why}")?,
        }
        if let Some(rule) = self.rule {
            write!(
                f,
                "\n  rule at line {}, column {}: {rule}",
                rule.pos.line, rule.pos.column
            )?;
            if let Some(from) = rule.called_from {
                write!(
                    f,
                    "\n  made by the form at line {}, column {}",
                    from.line, from.column
                )?;
            }
            for m in &rule.modifiers {
                write!(f, "\n  modifier: {m}")?;
            }
        }
        for (k, value) in &self.params {
            match value {
                Some(v) => write!(f, "\n  parameter {k} = {v:?}")?,
                None => write!(f, "\n  parameter {k} (not defined)")?,
            }
        }
        for r in &self.unknown_passed {
            write!(
                f,
                "\n  also applies perhaps (same answer either way): line {}: {r}",
                r.pos.line
            )?;
        }
        Ok(())
    }
}

/// Three-valued match.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tri {
    Yes,
    No,
    Unknown(String),
}

impl Policy {
    /// Decides `query`. `params` are the values the profile was evaluated with (for the
    /// explanation only).
    pub fn decide<'p>(&'p self, query: &Query, params: &BTreeMap<String, String>) -> Decided<'p> {
        let modelled = catalog::operation(query.operation).and_then(|(_, k)| k);
        let mut passed: Vec<(&PolicyRule, String)> = Vec::new();
        let mut decided: Option<&PolicyRule> = None;
        for (_, rule) in self.ordinary_rules().collect::<Vec<_>>().into_iter().rev() {
            if !rule
                .operations
                .iter()
                .any(|op| catalog::covers(op, query.operation))
            {
                continue;
            }
            let m = if rule.filters.is_empty() {
                Tri::Yes
            } else {
                any(rule.filters.iter().map(|f| matches(f, query, modelled)))
            };
            match m {
                Tri::Yes => {
                    decided = Some(rule);
                    break;
                }
                Tri::No => {}
                Tri::Unknown(why) => passed.push((rule, why)),
            }
        }
        let (rule, outcome) = match decided.or_else(|| self.default_rule().map(|(_, r)| r)) {
            Some(rule) => (
                Some(rule),
                match rule.action {
                    Action::Allow => Outcome::Allow,
                    Action::Deny => Outcome::Deny,
                },
            ),
            None => (
                None,
                Outcome::NotModelled(
                    "no rule matches and the profile states no (deny default)/(allow default)"
                        .into(),
                ),
            ),
        };
        let action = rule.map(|r| r.action);
        if let Some((bad, why)) = passed.iter().find(|(r, _)| Some(r.action) != action) {
            let mut d = Decided {
                outcome: Outcome::NotModelled(format!(
                    "the rule at line {}, column {} may match: {why}",
                    bad.pos.line, bad.pos.column
                )),
                rule: Some(bad),
                params: BTreeMap::new(),
                unknown_passed: Vec::new(),
            };
            d.params = used(bad, params);
            return d;
        }
        Decided {
            outcome,
            rule,
            params: rule.map(|r| used(r, params)).unwrap_or_default(),
            unknown_passed: passed.into_iter().map(|(r, _)| r).collect(),
        }
    }
}

fn used(rule: &PolicyRule, params: &BTreeMap<String, String>) -> BTreeMap<String, Option<String>> {
    rule.params
        .iter()
        .map(|k| (k.clone(), params.get(k).cloned()))
        .collect()
}

fn any(parts: impl Iterator<Item = Tri>) -> Tri {
    kleene(parts, true)
}

fn all(parts: impl Iterator<Item = Tri>) -> Tri {
    kleene(parts, false)
}

/// Kleene `or` (`decisive` true) or `and` (`decisive` false): a decisive part ends it, an
/// unknown part makes an otherwise indecisive result unknown.
fn kleene(parts: impl Iterator<Item = Tri>, decisive: bool) -> Tri {
    let mut unknown = None;
    for p in parts {
        match p {
            Tri::Yes if decisive => return Tri::Yes,
            Tri::No if !decisive => return Tri::No,
            Tri::Unknown(w) => unknown = unknown.or(Some(w)),
            _ => {}
        }
    }
    unknown.map_or(yes(!decisive), Tri::Unknown)
}

fn yes(b: bool) -> Tri {
    if b { Tri::Yes } else { Tri::No }
}

fn unknown(f: &FilterValue, why: &str) -> Tri {
    Tri::Unknown(format!("{f} (line {}) {why}", f.pos.line))
}

fn matches(f: &FilterValue, q: &Query, modelled: Option<ObjectKind>) -> Tri {
    match f.name {
        "require-all" => return all(f.nested().map(|x| matches(x, q, modelled))),
        "require-any" => return any(f.nested().map(|x| matches(x, q, modelled))),
        "require-not" => {
            return match f.nested().next().map(|x| matches(x, q, modelled)) {
                Some(Tri::Yes) => Tri::No,
                Some(Tri::No) => Tri::Yes,
                Some(u) => u,
                None => Tri::No,
            };
        }
        _ => {}
    }
    if !catalog::filter_is_modelled(f.name) {
        return unknown(f, "is recognised but not modelled");
    }
    if modelled.is_none() {
        return unknown(f, &format!("is not modelled for `{}`", q.operation));
    }
    let s = f.string_arg();
    match (f.name, &q.object) {
        ("literal" | "path" | "path-literal", Object::Path(p)) => yes(s == Some(p)),
        ("subpath", Object::Path(p)) => yes(s.is_some_and(|base| subpath(base, p))),
        ("prefix" | "path-prefix", Object::Path(p)) => yes(s.is_some_and(|x| p.starts_with(x))),
        ("regex" | "path-regex", Object::Path(p)) => regex(f, p),
        ("vnode-type", Object::Path(_)) => match q.vnode_type {
            Some(t) => yes(f.symbol_arg(0) == Some(t)),
            None => unknown(
                f,
                "depends on the file's type; give it (--type in the example)",
            ),
        },
        ("target", Object::Process(rel)) => match f.symbol_arg(0) {
            Some("self") => yes(*rel == Relation::SelfProcess),
            Some("children") => yes(*rel == Relation::Child),
            Some("same-sandbox") => yes(*rel != Relation::Other),
            _ => unknown(f, "names a relation this model does not decide"),
        },
        ("sysctl-name" | "global-name", Object::Name(n)) if sysctl_or_mach(f.name, q) => {
            yes(s == Some(n))
        }
        ("sysctl-name-prefix" | "global-name-prefix", Object::Name(n))
            if sysctl_or_mach(f.name, q) =>
        {
            yes(s.is_some_and(|x| n.starts_with(x)))
        }
        ("sysctl-name-regex" | "global-name-regex", Object::Name(n))
            if sysctl_or_mach(f.name, q) =>
        {
            regex(f, n)
        }
        ("remote" | "local", _) => address(f, q),
        _ => Tri::No,
    }
}

fn sysctl_or_mach(filter: &str, q: &Query) -> bool {
    let kind = catalog::operation(q.operation).and_then(|(_, k)| k);
    if filter.starts_with("sysctl") {
        kind == Some(ObjectKind::Sysctl)
    } else {
        kind == Some(ObjectKind::MachService)
    }
}

fn subpath(base: &str, p: &str) -> bool {
    let base = base.trim_end_matches('/');
    base.is_empty() || p == base || (p.starts_with(base) && p[base.len()..].starts_with('/'))
}

fn regex(f: &FilterValue, text: &str) -> Tri {
    match f.string_arg().map(Pattern::new) {
        Some(Ok(p)) => yes(p.is_match(text)),
        Some(Err(e)) => unknown(
            f,
            &format!("uses a regex outside the modelled subset ({e})"),
        ),
        None => Tri::No,
    }
}

fn address(f: &FilterValue, q: &Query) -> Tri {
    let our_end = if q.operation == "network-outbound" {
        "remote"
    } else {
        "local"
    };
    let Some(kind) = f.symbol_arg(0) else {
        return Tri::No;
    };
    if !q.operation.starts_with("network") {
        return Tri::No;
    }
    if f.name != our_end {
        return unknown(f, &format!("is about the other end of a `{}`", q.operation));
    }
    match &q.object {
        Object::Path(_) if UNIX_KINDS.contains(&kind) => match f.nested().next() {
            None => Tri::Yes,
            Some(inner) => matches(inner, q, Some(ObjectKind::Network)),
        },
        Object::Ip {
            protocol,
            local_host,
            v4,
            port,
        } if IP_KINDS.contains(&kind) => {
            let proto_ok = match (kind.trim_end_matches(['4', '6']), protocol) {
                ("ip", _) => Tri::Yes,
                (_, None) => {
                    return unknown(
                        f,
                        "depends on the protocol; write tcp:HOST:PORT or udp:HOST:PORT",
                    );
                }
                ("tcp", Some(p)) => yes(*p == Protocol::Tcp),
                (_, Some(p)) => yes(*p == Protocol::Udp),
            };
            let family_ok = match (kind.chars().last(), v4) {
                (Some('4'), Some(is4)) => yes(*is4),
                (Some('6'), Some(is4)) => yes(!*is4),
                (Some('4' | '6'), None) => {
                    return unknown(f, "depends on the address family; give an IP address");
                }
                _ => Tri::Yes,
            };
            let addr_ok = match f.args.get(1) {
                Some(Arg::Str(a)) => match parse_filter_address(a) {
                    Ok((host, want)) => yes((host == HostPattern::Any || *local_host)
                        && want.is_none_or(|w| w == *port)),
                    Err(_) => Tri::No,
                },
                _ => Tri::Yes,
            };
            all([proto_ok, family_ok, addr_ok].into_iter())
        }
        _ => Tri::No,
    }
}
