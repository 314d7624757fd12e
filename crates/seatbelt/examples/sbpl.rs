//! `sbpl`: what would this Seatbelt profile allow? Answered off the Mac.
//!
//! ```text
//! cargo run -p seatbelt --example sbpl -- check FILE [-D KEY=VALUE]... [--rules]
//! cargo run -p seatbelt --example sbpl -- decide FILE [-D KEY=VALUE]... [--type VNODE] OP OBJECT
//! ```
//!
//! `check` prints how many rules the profile expands to (`--rules`: each, with its line), or the
//! first error with its line and column. `decide` prints `allow`, `deny` or `not modelled: …`
//! and the rule that decided. OBJECT is a path (file and exec operations), a sysctl or Mach
//! service name, `self`/`child`/`same-sandbox`/`other` (signal, process-info*),
//! `[tcp:|udp:]HOST:PORT` or a socket path (network*), or `-` for operations without one.
//!
//! Exit codes: 0 allowed / parsed, 1 denied, 2 error (bad arguments, unreadable or refused
//! profile), 3 not modelled. All the rules live in `seatbelt::sbpl`; this only parses and prints.

use std::collections::BTreeMap;
use std::process::ExitCode;

use seatbelt::sbpl::{Limits, Outcome, Query, expand};

const USAGE: &str = "usage: sbpl check FILE [-D KEY=VALUE]... [--rules]\n       sbpl decide FILE [-D KEY=VALUE]... [--type VNODE] OP OBJECT";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("sbpl: {message}");
            ExitCode::from(2)
        }
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

fn run(args: Vec<String>) -> Result<ExitCode, String> {
    let args = parse_args(args)?;
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| format!("cannot read {}: {e}", args.file))?;
    let policy = match expand(&text, &args.params, &Limits::default()) {
        Ok(p) => p,
        Err(e) => {
            println!(
                "{}:{}:{}: error[{}]: {}",
                args.file,
                e.pos.line,
                e.pos.column,
                e.kind.code(),
                e.message
            );
            return Ok(ExitCode::from(2));
        }
    };
    if args.command == "check" {
        if !args.rest.is_empty() {
            return Err(format!("check takes no OP/OBJECT\n{USAGE}"));
        }
        let allow = policy
            .rules
            .iter()
            .filter(|r| r.action == seatbelt::Action::Allow)
            .count();
        println!(
            "{}: parsed: {} rules ({allow} allow, {} deny)",
            args.file,
            policy.rules.len(),
            policy.rules.len() - allow
        );
        match policy.default_rule() {
            Some((_, r)) => println!("default: {r} at line {}", r.pos.line),
            None => println!("default: none stated"),
        }
        if !policy.params_read.is_empty() {
            let read: Vec<&str> = policy.params_read.iter().map(String::as_str).collect();
            println!("parameters read: {}", read.join(", "));
        }
        if !policy.params_missing.is_empty() {
            let missing: Vec<&str> = policy.params_missing.iter().map(String::as_str).collect();
            println!(
                "parameters not defined (read as #f): {}",
                missing.join(", ")
            );
        }
        for (d, pos) in &policy.debug {
            println!("line {}: {d}", pos.line);
        }
        if args.list_rules {
            for r in &policy.rules {
                println!("{:>5}:{:<3} {r}", r.pos.line, r.pos.column);
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let [op, object] = args.rest.as_slice() else {
        return Err(format!("decide needs OP and OBJECT\n{USAGE}"));
    };
    let mut query = Query::parse(op, object)?;
    if let Some(t) = &args.vnode_type {
        query = query.with_vnode_type(t)?;
    }
    let decided = policy.decide(&query, &args.params);
    println!("{decided}");
    Ok(ExitCode::from(match decided.outcome {
        Outcome::Allow => 0,
        Outcome::Deny => 1,
        Outcome::NotModelled(_) => 3,
    }))
}
