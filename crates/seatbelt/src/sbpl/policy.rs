//! What a profile expands to: [`Policy`], its [`PolicyRule`]s with the [`FilterValue`]s and
//! [`Modifier`]s they carry, each with the source position of the form that made it and the
//! parameters that shaped it; and their SBPL-like `Display` for explanations.
//!
//! **Owns:** the data only. Building it is [`super::scheme`]'s job, deciding with it
//! [`super::decide`]'s. The text written by `Display` is for people (values of parameters appear
//! as their values); it is never handed to `sandbox-exec` — our own profiles go through
//! [`crate::Profile::render`], which keeps user paths as parameters (invariant 6).

use std::collections::BTreeSet;
use std::fmt;

use super::Pos;
use crate::ast::Action;

/// A profile after evaluation: its rules in source order and what else it declared.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// `(version N)`, if declared.
    pub version: Option<i64>,
    /// The rules, in the order the profile made them. `(allow default)`/`(deny default)` are
    /// rules whose only operation is `default`.
    pub rules: Vec<PolicyRule>,
    /// `(debug …)` and `(trace …)` declarations, as written.
    pub debug: Vec<(String, Pos)>,
    /// Every parameter the profile read with `(param "KEY")`, defined or not.
    pub params_read: BTreeSet<String>,
    /// The parameters it read that were not defined (each read as `#f`).
    pub params_missing: BTreeSet<String>,
    /// Evaluation steps used (against [`super::Limits::max_steps`]).
    pub steps: u64,
}

impl Policy {
    /// The rules other than `default` ones.
    pub fn ordinary_rules(&self) -> impl Iterator<Item = (usize, &PolicyRule)> {
        self.rules
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.is_default())
    }

    /// The last `(allow default)`/`(deny default)`, which decides what no rule matches.
    pub fn default_rule(&self) -> Option<(usize, &PolicyRule)> {
        self.rules
            .iter()
            .enumerate()
            .rev()
            .find(|(_, r)| r.is_default())
    }
}

/// One `(allow …)` or `(deny …)` as evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRule {
    /// Allow or deny.
    pub action: Action,
    /// Catalog operation names (wildcards kept), or `["default"]`.
    pub operations: Vec<&'static str>,
    /// Alternatives: the rule applies when any matches, to everything when there is none.
    pub filters: Vec<FilterValue>,
    /// `(with …)` modifiers, as written.
    pub modifiers: Vec<Modifier>,
    /// Where the `(allow …)`/`(deny …)` form is.
    pub pos: Pos,
    /// The top-level form that made the rule when it is another one (a call of a function that
    /// contains the rule, an `if`).
    pub called_from: Option<Pos>,
    /// The parameters the rule's filters were built from and the conditions it was made under.
    pub params: BTreeSet<String>,
}

impl PolicyRule {
    /// Whether this is `(allow default)`/`(deny default)`.
    pub fn is_default(&self) -> bool {
        self.operations == ["default"]
    }
}

/// A filter such as `(subpath "/usr/lib")`, its arguments evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterValue {
    /// The catalog spelling of the filter.
    pub name: &'static str,
    /// Its arguments.
    pub args: Vec<Arg>,
    /// Where the filter form is.
    pub pos: Pos,
    /// The parameters its arguments were built from.
    pub params: BTreeSet<String>,
}

/// An evaluated argument of a filter or modifier.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Arg {
    /// A string (or regex literal).
    Str(String),
    /// A symbol constant such as `CHARACTER-DEVICE` or `same-sandbox`.
    Symbol(String),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A nested filter.
    Filter(FilterValue),
    /// A list.
    List(Vec<Arg>),
}

/// `(with NAME ARG…)`: `no-log`, `report`, `send-signal SIGKILL`, `message "…"`, ….
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Modifier {
    /// The modifier's name.
    pub name: String,
    /// Its arguments.
    pub args: Vec<Arg>,
    /// Where the `(with …)` form is.
    pub pos: Pos,
}

impl FilterValue {
    /// The single string argument, if that is the filter's shape.
    pub fn string_arg(&self) -> Option<&str> {
        match self.args.as_slice() {
            [Arg::Str(s)] => Some(s),
            _ => None,
        }
    }

    /// The `n`th symbol argument.
    pub fn symbol_arg(&self, n: usize) -> Option<&str> {
        match self.args.get(n) {
            Some(Arg::Symbol(s)) => Some(s),
            _ => None,
        }
    }

    /// The nested filters (of `require-*`, `remote unix-socket`).
    pub fn nested(&self) -> impl Iterator<Item = &FilterValue> {
        self.args.iter().filter_map(|a| match a {
            Arg::Filter(f) => Some(f),
            _ => None,
        })
    }
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arg::Str(s) => {
                let mut out = String::new();
                crate::render::quote(s, &mut out);
                f.write_str(&out)
            }
            Arg::Symbol(s) => f.write_str(s),
            Arg::Int(n) => write!(f, "{n}"),
            Arg::Bool(b) => f.write_str(if *b { "#t" } else { "#f" }),
            Arg::Filter(x) => write!(f, "{x}"),
            Arg::List(items) => {
                f.write_str("(")?;
                write_spaced(f, items)?;
                f.write_str(")")
            }
        }
    }
}

fn write_spaced(f: &mut fmt::Formatter<'_>, items: &[impl fmt::Display]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(" ")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

/// `(head arg…)`.
fn write_form(f: &mut fmt::Formatter<'_>, head: &str, args: &[Arg]) -> fmt::Result {
    write!(f, "({head}")?;
    for a in args {
        write!(f, " {a}")?;
    }
    f.write_str(")")
}

impl fmt::Display for FilterValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Patterns read best as the `#"…"` literals they are usually written as.
        match self.args.as_slice() {
            [Arg::Str(p)] if self.name.ends_with("regex") && !p.contains(['"', '\n']) => {
                write!(f, "({} #\"{p}\")", self.name)
            }
            _ => write_form(f, self.name, &self.args),
        }
    }
}

impl fmt::Display for Modifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_form(f, &format!("with {}", self.name), &self.args)
    }
}

impl fmt::Display for PolicyRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.action {
            Action::Allow => "(allow ",
            Action::Deny => "(deny ",
        })?;
        write_spaced(f, &self.operations)?;
        for m in &self.modifiers {
            write!(f, " {m}")?;
        }
        for x in &self.filters {
            write!(f, " {x}")?;
        }
        f.write_str(")")
    }
}
