//! Rendering a [`Profile`] as SBPL text.
//!
//! The output is deterministic (golden files compare it byte for byte) and is exactly the
//! language [`crate::parse`] reads back, so `parse(render(p)) == p` for every profile.
//!
//! Strings are written as Scheme string literals: `\\` and `\"` escaped, `\n`, `\t`, `\r` by name,
//! other control characters as `\xHH` (two hex digits, the form TinyScheme's reader — from which
//! SBPL's is derived — accepts), everything else (including non-ASCII) as UTF-8. Regex patterns
//! are written as `#"…"` raw strings; [`Pattern`](crate::Pattern) guarantees they hold no `"` and
//! no control character.

use std::fmt::Write as _;

use crate::ast::{Action, Filter, Profile, Rule, Value};

impl Profile {
    /// The SBPL text: `(version 1)`, `(deny default)`, then one form per rule.
    pub fn render(&self) -> String {
        let mut out = String::from("(version 1)\n(deny default)\n");
        for rule in &self.rules {
            render_rule(rule, &mut out);
        }
        out
    }
}

fn render_rule(rule: &Rule, out: &mut String) {
    out.push('(');
    out.push_str(match rule.action {
        Action::Allow => "allow",
        Action::Deny => "deny",
    });
    for op in &rule.operations {
        out.push(' ');
        out.push_str(op.name());
    }
    match rule.filters.as_slice() {
        [] => {}
        [one] => {
            out.push(' ');
            render_filter(one, out);
        }
        many => {
            for f in many {
                out.push_str("\n    ");
                render_filter(f, out);
            }
        }
    }
    out.push_str(")\n");
}

fn render_filter(filter: &Filter, out: &mut String) {
    let (head, value) = match filter {
        Filter::Literal(v) => ("literal", v),
        Filter::Subpath(v) => ("subpath", v),
        Filter::Prefix(v) => ("prefix", v),
        Filter::SysctlName(v) => ("sysctl-name", v),
        Filter::SysctlNamePrefix(v) => ("sysctl-name-prefix", v),
        Filter::GlobalName(v) => ("global-name", v),
        Filter::Regex(p) => {
            let _ = write!(out, "(regex #\"{}\")", p.as_str());
            return;
        }
        Filter::VnodeType(t) => {
            let _ = write!(out, "(vnode-type {})", t.name());
            return;
        }
        Filter::Target(t) => {
            let _ = write!(out, "(target {})", t.name());
            return;
        }
        Filter::RequireAll(fs) | Filter::RequireAny(fs) => {
            out.push_str(if matches!(filter, Filter::RequireAll(_)) {
                "(require-all"
            } else {
                "(require-any"
            });
            for f in fs {
                out.push(' ');
                render_filter(f, out);
            }
            out.push(')');
            return;
        }
        Filter::RequireNot(f) => {
            out.push_str("(require-not ");
            render_filter(f, out);
            out.push(')');
            return;
        }
    };
    out.push('(');
    out.push_str(head);
    out.push(' ');
    render_value(value, out);
    out.push(')');
}

fn render_value(value: &Value, out: &mut String) {
    match value {
        Value::Text(s) => quote(s, out),
        Value::Param(k) => {
            out.push_str("(param ");
            quote(k, out);
            out.push(')');
        }
    }
}

/// Writes `s` as an escaped Scheme string literal.
pub(crate) fn quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
