//! The `sbpl` command for people who are not us (`cargo run -p seatbelt --example sbpl`):
//!
//! ```text
//! sbpl check FILE [-D KEY=VALUE]... [--rules]
//! sbpl decide FILE [-D KEY=VALUE]... [--type VNODE] OP OBJECT
//! ```
//!
//! `check` prints how many rules the profile expands to (`--rules`: each, with its line), or the
//! first error with its line and column. `decide` prints `allow`, `deny` or `not modelled: …`
//! and the rule that decided. OBJECT is a path (file and exec operations), a sysctl or Mach
//! service name, `self`/`child`/`same-sandbox`/`other` (signal, process-info*),
//! `[tcp:|udp:]HOST:PORT` or a socket path (network*), or `-` for operations without one.
//!
//! Exit codes: 0 allowed / parsed, 1 denied, 2 error (bad arguments, unreadable or refused
//! profile), 3 not modelled. The example binary only forwards its arguments and prints; the
//! command lives here so its tests run without starting a process.

use std::fmt::Write as _;

/// `writeln!` into the output `String` (which cannot fail).
macro_rules! say {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}
use super::{Limits, Outcome, Policy, Query, expand};
use crate::ast::Action;
use std::collections::BTreeMap;

const USAGE: &str = "usage: sbpl check FILE [-D KEY=VALUE]... [--rules]\n       sbpl decide FILE [-D KEY=VALUE]... [--type VNODE] OP OBJECT";

/// What a run printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// The exit code: 0 allowed/parsed, 1 denied, 2 error, 3 not modelled.
    pub code: u8,
    /// What goes to standard output.
    pub stdout: String,
    /// What goes to standard error.
    pub stderr: String,
}

/// Runs `sbpl ARGS…` (the arguments after the program name).
pub fn run(args: Vec<String>) -> Run {
    let mut out = String::new();
    match run_inner(args, &mut out) {
        Ok(code) => Run {
            code,
            stdout: out,
            stderr: String::new(),
        },
        Err(message) => Run {
            code: 2,
            stdout: out,
            stderr: format!("sbpl: {message}\n"),
        },
    }
}

struct Args {
    command: String,
    file: String,
    params: BTreeMap<String, String>,
    vnode_type: Option<String>,
    list_rules: bool,
    rest: Vec<String>,
}

fn parse_args(args: Vec<String>) -> Result<Args, String> {
    let mut it = args.into_iter();
    let command = it.next().ok_or(USAGE)?;
    if command != "check" && command != "decide" {
        return Err(format!("unknown command {command:?}\n{USAGE}"));
    }
    let file = it.next().ok_or(USAGE)?;
    let mut out = Args {
        command,
        file,
        params: BTreeMap::new(),
        vnode_type: None,
        list_rules: false,
        rest: Vec::new(),
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "-D" => {
                let def = it.next().ok_or("-D needs KEY=VALUE")?;
                add_param(&mut out.params, &def)?;
            }
            d if d.starts_with("-D") => add_param(&mut out.params, &d[2..])?,
            "--type" => out.vnode_type = Some(it.next().ok_or("--type needs a vnode type")?),
            "--rules" => out.list_rules = true,
            _ => out.rest.push(a),
        }
    }
    Ok(out)
}

fn add_param(params: &mut BTreeMap<String, String>, def: &str) -> Result<(), String> {
    let (k, v) = def
        .split_once('=')
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("-D {def:?}: write -D KEY=VALUE"))?;
    if params.insert(k.to_owned(), v.to_owned()).is_some() {
        return Err(format!("-D {k} is given twice; give each key once"));
    }
    Ok(())
}

/// `check`: what the profile expands to.
fn check(args: &Args, policy: &Policy, out: &mut String) {
    let allow = policy
        .rules
        .iter()
        .filter(|r| r.action == Action::Allow)
        .count();
    say!(
        out,
        "{}: parsed: {} rules ({allow} allow, {} deny)",
        args.file,
        policy.rules.len(),
        policy.rules.len() - allow
    );
    match policy.default_rule() {
        Some((_, r)) => say!(out, "default: {r} at line {}", r.pos.line),
        None => say!(out, "default: none stated"),
    }
    if !policy.params_read.is_empty() {
        let read: Vec<&str> = policy.params_read.iter().map(String::as_str).collect();
        say!(out, "parameters read: {}", read.join(", "));
    }
    if !policy.params_missing.is_empty() {
        let missing: Vec<&str> = policy.params_missing.iter().map(String::as_str).collect();
        say!(
            out,
            "parameters not defined (read as #f): {}",
            missing.join(", ")
        );
    }
    for (d, pos) in &policy.debug {
        say!(out, "line {}: {d}", pos.line);
    }
    if args.list_rules {
        for r in &policy.rules {
            say!(out, "{:>5}:{:<3} {r}", r.pos.line, r.pos.column);
        }
    }
}

fn run_inner(args: Vec<String>, out: &mut String) -> Result<u8, String> {
    let args = parse_args(args)?;
    // The question is checked before the profile, so a typo in it is reported as such.
    let query = if args.command == "decide" {
        let [op, object] = args.rest.as_slice() else {
            return Err(format!("decide needs OP and OBJECT\n{USAGE}"));
        };
        let query = Query::parse(op, object)?;
        Some(match &args.vnode_type {
            Some(t) => query.with_vnode_type(t)?,
            None => query,
        })
    } else if args.rest.is_empty() {
        None
    } else {
        return Err(format!("check takes no OP/OBJECT\n{USAGE}"));
    };
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| format!("cannot read {}: {e}", args.file))?;
    let policy = expand(&text, &args.params, &Limits::default()).map_err(|e| {
        format!(
            "{}:{}:{}: error[{}]: {}",
            args.file,
            e.pos.line,
            e.pos.column,
            e.kind.code(),
            e.message
        )
    })?;
    let Some(query) = query else {
        check(&args, &policy, out);
        return Ok(0);
    };
    let decided = policy.decide(&query, &args.params);
    say!(out, "{decided}");
    Ok(match decided.outcome {
        Outcome::Allow => 0,
        Outcome::Deny => 1,
        Outcome::NotModelled(_) => 3,
    })
}
