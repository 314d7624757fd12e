//! The Scheme layer SBPL profiles are written in: [`Datum`]s → a [`Policy`].
//!
//! **Owns:** the subset of TinyScheme (SBPL's interpreter, per the Apple Sandbox Guide) that
//! public profiles use, evaluated with the profile's `-D KEY=VALUE` parameters:
//!
//! * special forms `quote`/`'`, `define` (values and `(define (f a . rest) …)` functions),
//!   `set!`, `lambda`, `if`, `when`, `unless`, `cond` (with `else`), `begin`, `let` (also
//!   named), `let*`, `and`, `or`, and SBPL's own `version`, `allow`, `deny`, `debug`, `trace`;
//! * procedures `param`, `defined?`, `not`, `equal?`/`eq?`/`eqv?`, `string=?`, `string<?`,
//!   `string-append`, `string-length`, `substring`, `string->number`, `number->string`,
//!   `string->symbol`, `symbol->string`, `regex-quote`, `list`, `cons`, `car`, `cdr`, `append`,
//!   `length`, `null?`, `pair?`, `list?`, `string?`, `symbol?`, `number?`, `boolean?`,
//!   `procedure?`, `apply`, `map`, `for-each`, `= < > <= >=`, `+ - *`, and `_IO`/`_IOR`/`_IOW`/
//!   `_IOWR` (the ioctl-number macros of `fsctl-command`, kept symbolically);
//! * every catalog filter as a procedure returning a filter value (so `(define f subpath)` and
//!   `(defined? 'iokit-registry-entry-class)` behave as in Chromium's profiles), and `with`.
//!   Inside a filter, `with` and a rule, an unbound symbol is a constant (`CHARACTER-DEVICE`,
//!   `same-sandbox`, `SYS_read`), as SBPL's own bindings make it;
//! * operation names evaluate to themselves, so they can be stored and passed.
//!
//! Everything is evaluated at expansion time — expressions over constants and parameters fold
//! to their values, so the [`Policy`] holds plain rules.
//!
//! Sources of the semantics: R7RS for the Scheme forms; TinyScheme 1.41 for `#f` as the only
//! false value and `define` inside `when`/`begin` binding in the enclosing frame; Chromium's
//! `common.sb` for `(param K)` reading an undefined key as `#f` (its `param-defined?` is
//! `(string? (param str))`).
//!
//! **Refuses:** `import` (the imported file is not here: inline it), anything that could run
//! unboundedly. A profile is untrusted input: every evaluation costs a step, and so does every
//! 16 bytes of string built or copied and every node of a value converted, compared or cloned
//! (values share structure, copies do not); evaluation nesting is bounded
//! ([`Limits::max_eval_depth`]) and so is the nesting of values ([`Limits::max_depth`], so no
//! later recursion over them can overflow the stack); strings, rules and live scopes are capped
//! ([`Limits`]); frames live in an arena (no reference cycles) and are released when a call
//! returns unless a function closed over them; a value remembers at most 32 parameters and a
//! parameter name is at most 256 bytes. Every refusal is an [`SbplError`] with a stable kind and
//! the form's position.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use super::catalog;
use super::policy::{Arg, FilterValue, Modifier, Policy, PolicyRule};
use super::reader::{Datum, DatumKind};
use super::{Limits, Pos, SbplError, SbplErrorKind as K};
use crate::ast::Action;

/// The parameters a value was computed from: shared, cheap to clone, at most [`MAX_DEPS`].
type Deps = Option<Rc<BTreeSet<Rc<str>>>>;

/// A value remembers at most this many parameters (the first in order); explanations of
/// absurd profiles lose the rest rather than costing unbounded time and memory.
const MAX_DEPS: usize = 32;

/// Parameter names are at most this long (`sandbox-exec` keys are short words).
const MAX_PARAM_KEY: usize = 256;

#[derive(Clone)]
struct V<'a> {
    val: Val<'a>,
    /// The parameters this value was computed from.
    deps: Deps,
}

#[derive(Clone)]
enum Val<'a> {
    Unspec,
    Bool(bool),
    Int(i64),
    Str(Rc<str>),
    Sym(Rc<str>),
    /// Items, and the nesting depth (1 + the deepest item), bounded by [`Limits::max_depth`]
    /// so that comparing, converting or dropping a value never recurses deeper.
    List(Rc<Vec<V<'a>>>, usize),
    Lambda(Rc<Lambda<'a>>),
    Builtin(&'static str),
    /// A filter and its nesting depth (as for lists).
    Filter(Rc<FilterValue>, usize),
    /// A modifier and its nesting depth.
    Modifier(Rc<Modifier>, usize),
}

struct Lambda<'a> {
    params: Vec<String>,
    rest: Option<String>,
    body: &'a [Datum],
    env: usize,
}

struct Frame<'a> {
    vars: HashMap<String, V<'a>>,
    parent: Option<usize>,
}

const BUILTINS: &[&str] = &[
    "param",
    "defined?",
    "not",
    "equal?",
    "eq?",
    "eqv?",
    "string=?",
    "string<?",
    "string-append",
    "string-length",
    "substring",
    "string->number",
    "number->string",
    "string->symbol",
    "symbol->string",
    "regex-quote",
    "list",
    "cons",
    "car",
    "cdr",
    "append",
    "length",
    "null?",
    "pair?",
    "list?",
    "string?",
    "symbol?",
    "number?",
    "boolean?",
    "procedure?",
    "apply",
    "map",
    "for-each",
    "=",
    "<",
    ">",
    "<=",
    ">=",
    "+",
    "-",
    "*",
    "with",
    "_IO",
    "_IOR",
    "_IOW",
    "_IOWR",
];

const SPECIAL: &[&str] = &[
    "quote", "define", "set!", "lambda", "if", "when", "unless", "cond", "begin", "let", "let*",
    "and", "or", "version", "allow", "deny", "debug", "trace", "import",
];

type R<T> = Result<T, SbplError>;

fn v(val: Val<'_>) -> V<'_> {
    V { val, deps: None }
}

fn merge(a: &Deps, b: &Deps) -> Deps {
    match (a, b) {
        (None, x) | (x, None) => x.clone(),
        (Some(x), Some(y)) if Rc::ptr_eq(x, y) => a.clone(),
        (Some(x), Some(y)) if y.is_subset(x) => a.clone(),
        (Some(x), Some(y)) => Some(Rc::new(x.union(y).take(MAX_DEPS).cloned().collect())),
    }
}

fn deps_of<'a>(args: &[V<'a>]) -> Deps {
    args.iter().fold(None, |acc, a| merge(&acc, &a.deps))
}

fn names(d: &Deps) -> BTreeSet<String> {
    d.iter()
        .flat_map(|d| d.iter())
        .map(|k| k.to_string())
        .collect()
}

fn deps_len(d: &Deps) -> u64 {
    d.as_ref().map_or(0, |d| d.len() as u64)
}

/// Evaluates `forms` into a [`Policy`].
pub(super) fn evaluate(
    forms: &[Datum],
    params: &BTreeMap<String, String>,
    limits: &Limits,
) -> R<Policy> {
    let mut ev = Eval {
        params,
        limits,
        frames: vec![Frame {
            vars: HashMap::new(),
            parent: None,
        }],
        steps: 0,
        depth: 0,
        cond: Vec::new(),
        captured: 0,
        top: Pos::START,
        out: Policy::default(),
    };
    for form in forms {
        ev.top = form.pos;
        ev.eval(form, 0).map_err(|mut e| {
            // An error inside a function names the call that led there too.
            if e.pos.line != form.pos.line {
                e.message.push_str(&format!(
                    " (while evaluating the form at line {}, column {})",
                    form.pos.line, form.pos.column
                ));
            }
            e
        })?;
    }
    ev.out.steps = ev.steps;
    Ok(ev.out)
}

struct Eval<'a, 'p> {
    params: &'p BTreeMap<String, String>,
    limits: &'p Limits,
    frames: Vec<Frame<'a>>,
    steps: u64,
    depth: usize,
    /// The dependencies of the conditions the current form is evaluated under.
    cond: Vec<Deps>,
    /// The highest frame a function closed over (0: the global frame).
    captured: usize,
    top: Pos,
    out: Policy,
}

impl<'a> Eval<'a, '_> {
    fn charge(&mut self, steps: u64, pos: Pos) -> R<()> {
        self.steps = self.steps.saturating_add(steps);
        if self.steps > self.limits.max_steps {
            return Err(SbplError::new(
                pos,
                K::StepBudget,
                format!(
                    "evaluation took more than {} steps (a loop or runaway recursion?); simplify the profile or raise Limits::max_steps",
                    self.limits.max_steps
                ),
            ));
        }
        Ok(())
    }

    fn eval(&mut self, d: &'a Datum, env: usize) -> R<V<'a>> {
        self.charge(1, d.pos)?;
        if self.depth >= self.limits.max_eval_depth {
            return Err(SbplError::new(
                d.pos,
                K::TooDeep,
                format!(
                    "evaluation nests deeper than {} levels (deep recursion?); flatten the profile",
                    self.limits.max_eval_depth
                ),
            ));
        }
        self.depth += 1;
        let r = self.eval_inner(d, env);
        self.depth -= 1;
        r
    }

    /// Evaluates an argument of a filter, `with` or a rule: an unbound symbol is a constant.
    fn eval_lenient(&mut self, d: &'a Datum, env: usize) -> R<V<'a>> {
        if let DatumKind::Symbol(s) = &d.kind {
            self.charge(1, d.pos)?;
            if let Some(found) = self.lookup(s, env) {
                return Ok(found);
            }
            self.charge(s.len() as u64 / 16, d.pos)?;
            return Ok(v(Val::Sym(Rc::from(s.as_str()))));
        }
        self.eval(d, env)
    }

    fn eval_inner(&mut self, d: &'a Datum, env: usize) -> R<V<'a>> {
        match &d.kind {
            DatumKind::Int(n) => Ok(v(Val::Int(*n))),
            DatumKind::Bool(b) => Ok(v(Val::Bool(*b))),
            DatumKind::Str(s) | DatumKind::Regex(s) => {
                // A literal is copied each time it is evaluated: pay for the bytes.
                self.charge(s.len() as u64 / 16, d.pos)?;
                Ok(v(Val::Str(Rc::from(s.as_str()))))
            }
            DatumKind::Quote(x) => self.quote(x),
            DatumKind::Symbol(s) => {
                // Looking a name up hashes it: long names cost like long strings.
                self.charge(s.len() as u64 / 16, d.pos)?;
                self.lookup(s, env).ok_or_else(|| self.unbound(s, d.pos))
            }
            DatumKind::List(items) => {
                let Some((head, args)) = items.split_first() else {
                    return Ok(v(Val::List(Rc::new(Vec::new()), 1)));
                };
                if let Some(name) = head.as_symbol() {
                    if SPECIAL.contains(&name) && self.lookup_local(name, env).is_none() {
                        return self.special(name, d, args, env);
                    }
                }
                let f = self.eval(head, env)?;
                let lenient = matches!(&f.val, Val::Builtin(b) if *b == "with" || catalog::filter(b).is_some());
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(if lenient {
                        self.eval_lenient(a, env)?
                    } else {
                        self.eval(a, env)?
                    });
                }
                self.call(&f, vals, d.pos, env)
            }
        }
    }

    fn unbound(&self, s: &str, pos: Pos) -> SbplError {
        SbplError::new(
            pos,
            K::Unbound,
            format!(
                "`{s}` is not defined; define it before this line{}",
                catalog::suggest_name(s, BUILTINS)
                    .map(|n| format!(", or did you mean `{n}`?"))
                    .unwrap_or_else(|| ", or check the spelling".to_owned())
            ),
        )
    }

    fn quote(&mut self, d: &'a Datum) -> R<V<'a>> {
        let bytes = match &d.kind {
            DatumKind::Str(s) | DatumKind::Regex(s) | DatumKind::Symbol(s) => s.len(),
            _ => 0,
        };
        self.charge(1 + bytes as u64 / 16, d.pos)?;
        Ok(v(match &d.kind {
            DatumKind::Int(n) => Val::Int(*n),
            DatumKind::Bool(b) => Val::Bool(*b),
            DatumKind::Str(s) | DatumKind::Regex(s) => Val::Str(Rc::from(s.as_str())),
            DatumKind::Symbol(s) => Val::Sym(Rc::from(s.as_str())),
            DatumKind::Quote(x) => {
                let items = vec![v(Val::Sym(Rc::from("quote"))), self.quote(x)?];
                self.new_list(items, d.pos)?
            }
            DatumKind::List(items) => {
                let mut out = Vec::with_capacity(items.len());
                for i in items {
                    out.push(self.quote(i)?);
                }
                self.new_list(out, d.pos)?
            }
        }))
    }

    fn new_list(&self, items: Vec<V<'a>>, pos: Pos) -> R<Val<'a>> {
        let depth = self.nesting(&items, pos)?;
        Ok(Val::List(Rc::new(items), depth))
    }

    /// The nesting depth of a list, filter or modifier holding `items`: 1 + the deepest item.
    /// Bounded, so that converting, comparing, showing or dropping a value built by a loop
    /// (`(set! x (require-not x))` a million times) never recurses past [`Limits::max_depth`].
    fn nesting(&self, items: &[V<'a>], pos: Pos) -> R<usize> {
        let depth = 1 + items
            .iter()
            .map(|i| match i.val {
                Val::List(_, d) | Val::Filter(_, d) | Val::Modifier(_, d) => d,
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        if depth > self.limits.max_depth {
            return Err(SbplError::new(
                pos,
                K::TooDeep,
                format!(
                    "a value nested deeper than {} levels; flatten it",
                    self.limits.max_depth
                ),
            ));
        }
        Ok(depth)
    }

    fn lookup_local(&self, name: &str, env: usize) -> Option<V<'a>> {
        let mut cur = Some(env);
        while let Some(i) = cur {
            let frame = self.frames.get(i)?;
            if let Some(found) = frame.vars.get(name) {
                return Some(found.clone());
            }
            cur = frame.parent;
        }
        None
    }

    fn lookup(&self, name: &str, env: usize) -> Option<V<'a>> {
        if let Some(found) = self.lookup_local(name, env) {
            return Some(found);
        }
        if let Some(b) = BUILTINS.iter().copied().find(|b| *b == name) {
            return Some(v(Val::Builtin(b)));
        }
        if let Some(f) = catalog::filter(name) {
            return Some(v(Val::Builtin(f)));
        }
        if name == "default" || catalog::operation(name).is_some() {
            return Some(v(Val::Sym(Rc::from(name))));
        }
        None
    }

    fn bind(&mut self, env: usize, name: &str, value: V<'a>) {
        if let Some(frame) = self.frames.get_mut(env) {
            frame.vars.insert(name.to_owned(), value);
        }
    }

    /// A function closing over `env`; that frame (and so its ancestors) must now outlive calls.
    fn close(
        &mut self,
        params: Vec<String>,
        rest: Option<String>,
        body: &'a [Datum],
        env: usize,
    ) -> V<'a> {
        self.captured = self.captured.max(env);
        v(Val::Lambda(Rc::new(Lambda {
            params,
            rest,
            body,
            env,
        })))
    }

    /// Drops `frame` and every frame after it once the call or `let` that made it returns,
    /// unless a function closed over one of them: memory stays bounded by the nesting depth
    /// instead of growing with every call the step budget allows.
    fn release(&mut self, frame: usize) {
        if self.captured < frame {
            self.frames.truncate(frame);
        }
    }

    fn new_frame(&mut self, parent: usize, pos: Pos) -> R<usize> {
        if self.frames.len() >= self.limits.max_frames {
            return Err(SbplError::new(
                pos,
                K::TooLarge,
                format!(
                    "more than {} scopes alive at once (functions kept in a loop?); simplify the profile or raise Limits::max_frames",
                    self.limits.max_frames
                ),
            ));
        }
        self.frames.push(Frame {
            vars: HashMap::new(),
            parent: Some(parent),
        });
        Ok(self.frames.len() - 1)
    }

    fn body(&mut self, body: &'a [Datum], env: usize) -> R<V<'a>> {
        let mut last = v(Val::Unspec);
        for d in body {
            last = self.eval(d, env)?;
        }
        Ok(last)
    }

    /// Evaluates `body` under a condition whose value came from `deps`.
    fn under(&mut self, deps: Deps, body: &'a [Datum], env: usize) -> R<V<'a>> {
        self.cond.push(deps);
        let r = self.body(body, env);
        self.cond.pop();
        r
    }

    fn special(&mut self, name: &str, form: &'a Datum, args: &'a [Datum], env: usize) -> R<V<'a>> {
        let pos = form.pos;
        let shape = |what: &str| SbplError::new(pos, K::BadForm, format!("`{name}` {what}"));
        match name {
            "quote" => match args {
                [x] => self.quote(x),
                _ => Err(shape("takes one datum: (quote x) or 'x")),
            },
            "define" => match args {
                [target, rest @ ..] => match &target.kind {
                    DatumKind::Symbol(s) => {
                        let value = match rest {
                            [e] => self.eval(e, env)?,
                            [] => v(Val::Unspec),
                            _ => return Err(shape("takes a name and one value: (define x value)")),
                        };
                        self.bind(env, s, value);
                        Ok(v(Val::Unspec))
                    }
                    DatumKind::List(sig) => {
                        let Some((fname, params)) = sig.split_first() else {
                            return Err(shape("needs a name: (define (f arg …) body …)"));
                        };
                        let Some(fname) = fname.as_symbol() else {
                            return Err(shape("needs a symbol as the function name"));
                        };
                        let lambda = self.lambda(params, rest, env, pos)?;
                        self.bind(env, fname, lambda);
                        Ok(v(Val::Unspec))
                    }
                    _ => Err(shape("defines a symbol or (name arg …)")),
                },
                [] => Err(shape("needs a name")),
            },
            "set!" => match args {
                [target, e] => {
                    let Some(s) = target.as_symbol() else {
                        return Err(shape("sets a symbol: (set! x value)"));
                    };
                    let value = self.eval(e, env)?;
                    let mut cur = Some(env);
                    while let Some(i) = cur {
                        let Some(frame) = self.frames.get_mut(i) else {
                            break;
                        };
                        if let Some(slot) = frame.vars.get_mut(s) {
                            *slot = value;
                            return Ok(v(Val::Unspec));
                        }
                        cur = frame.parent;
                    }
                    Err(self.unbound(s, target.pos))
                }
                _ => Err(shape("takes a symbol and a value")),
            },
            "lambda" => match args {
                [params, body @ ..] => match &params.kind {
                    DatumKind::List(ps) => self.lambda(ps, body, env, pos),
                    DatumKind::Symbol(rest) => {
                        Ok(self.close(Vec::new(), Some(rest.clone()), body, env))
                    }
                    _ => Err(shape("takes a parameter list: (lambda (a b) body …)")),
                },
                [] => Err(shape("takes a parameter list and a body")),
            },
            "if" => {
                let (c, yes, no) = match args {
                    [c, yes] => (c, std::slice::from_ref(yes), &[][..]),
                    [c, yes, no] => (c, std::slice::from_ref(yes), std::slice::from_ref(no)),
                    _ => return Err(shape("takes a test, a then and an optional else")),
                };
                let test = self.eval(c, env)?;
                let branch = if truthy(&test) { yes } else { no };
                self.under(test.deps, branch, env)
            }
            "when" | "unless" => {
                let Some((c, body)) = args.split_first() else {
                    return Err(shape("takes a test and a body"));
                };
                let test = self.eval(c, env)?;
                if truthy(&test) == (name == "when") {
                    self.under(test.deps, body, env)
                } else {
                    Ok(v(Val::Unspec))
                }
            }
            "cond" => {
                let mut seen: Deps = None;
                for clause in args {
                    let DatumKind::List(parts) = &clause.kind else {
                        return Err(SbplError::new(
                            clause.pos,
                            K::BadForm,
                            "a `cond` clause is (test body …)".into(),
                        ));
                    };
                    let Some((test, body)) = parts.split_first() else {
                        return Err(SbplError::new(
                            clause.pos,
                            K::BadForm,
                            "an empty `cond` clause".into(),
                        ));
                    };
                    let hit = if test.as_symbol() == Some("else") {
                        v(Val::Bool(true))
                    } else {
                        self.eval(test, env)?
                    };
                    seen = merge(&seen, &hit.deps);
                    if truthy(&hit) {
                        if body.is_empty() {
                            return Ok(hit);
                        }
                        return self.under(seen, body, env);
                    }
                }
                Ok(v(Val::Unspec))
            }
            "begin" => self.body(args, env),
            "let" | "let*" => self.let_form(name, args, env, pos),
            "and" | "or" => {
                let mut last = v(Val::Bool(name == "and"));
                let mut deps: Deps = None;
                for a in args {
                    last = self.eval(a, env)?;
                    deps = merge(&deps, &last.deps);
                    if truthy(&last) != (name == "and") {
                        break;
                    }
                }
                last.deps = deps;
                Ok(last)
            }
            "version" => match args {
                [
                    Datum {
                        kind: DatumKind::Int(1),
                        ..
                    },
                ] => {
                    self.out.version = Some(1);
                    Ok(v(Val::Unspec))
                }
                _ => Err(SbplError::new(
                    pos,
                    K::Unsupported,
                    "only `(version 1)` exists; write (version 1)".into(),
                )),
            },
            "debug" | "trace" => {
                self.out.debug.push((form.to_string(), pos));
                Ok(v(Val::Unspec))
            }
            "import" => Err(SbplError::new(
                pos,
                K::Unsupported,
                format!(
                    "{form}: imported profiles live on the Mac, not here; paste the imported rules into the profile instead"
                ),
            )),
            _ => self.rule(name, args, env, pos),
        }
    }

    fn lambda(&mut self, params: &'a [Datum], body: &'a [Datum], env: usize, pos: Pos) -> R<V<'a>> {
        let mut names = Vec::new();
        let mut rest = None;
        let mut it = params.iter();
        while let Some(p) = it.next() {
            match p.as_symbol() {
                Some(".") => match (it.next().and_then(Datum::as_symbol), it.next()) {
                    (Some(r), None) => rest = Some(r.to_owned()),
                    _ => {
                        return Err(SbplError::new(
                            p.pos,
                            K::BadForm,
                            "after `.` comes exactly one rest-parameter name".into(),
                        ));
                    }
                },
                Some(s) => names.push(s.to_owned()),
                None => {
                    return Err(SbplError::new(
                        p.pos,
                        K::BadForm,
                        "parameters are symbols".into(),
                    ));
                }
            }
        }
        if body.is_empty() {
            return Err(SbplError::new(
                pos,
                K::BadForm,
                "a function needs a body".into(),
            ));
        }
        Ok(self.close(names, rest, body, env))
    }

    fn let_form(&mut self, name: &str, args: &'a [Datum], env: usize, pos: Pos) -> R<V<'a>> {
        let bad = |what: &str| SbplError::new(pos, K::BadForm, format!("`{name}` {what}"));
        // Named let: (let loop ((i 0)) body …) is a local function called at once.
        if let [
            Datum {
                kind: DatumKind::Symbol(loop_name),
                ..
            },
            bindings,
            body @ ..,
        ] = args
        {
            let DatumKind::List(bs) = &bindings.kind else {
                return Err(bad("takes a list of (name value) bindings"));
            };
            let mut params = Vec::new();
            let mut vals = Vec::new();
            for b in bs {
                let (n, e) = binding(b).ok_or_else(|| bad("bindings are (name value)"))?;
                params.push(n.to_owned());
                vals.push(self.eval(e, env)?);
            }
            if body.is_empty() {
                return Err(bad("needs a body"));
            }
            let frame = self.new_frame(env, pos)?;
            let f = self.close(params, None, body, frame);
            self.bind(frame, loop_name, f.clone());
            return self.call(&f, vals, pos, env);
        }
        let Some((bindings, body)) = args.split_first() else {
            return Err(bad("takes bindings and a body"));
        };
        let DatumKind::List(bs) = &bindings.kind else {
            return Err(bad("takes a list of (name value) bindings"));
        };
        let frame = self.new_frame(env, pos)?;
        for b in bs {
            let (n, e) = binding(b).ok_or_else(|| bad("bindings are (name value)"))?;
            let scope = if name == "let*" { frame } else { env };
            let value = self.eval(e, scope)?;
            self.bind(frame, n, value);
        }
        let out = self.body(body, frame)?;
        self.release(frame);
        Ok(out)
    }

    fn rule(&mut self, name: &str, args: &'a [Datum], env: usize, pos: Pos) -> R<V<'a>> {
        let action = if name == "allow" {
            Action::Allow
        } else {
            Action::Deny
        };
        let mut rule = PolicyRule {
            action,
            operations: Vec::new(),
            filters: Vec::new(),
            modifiers: Vec::new(),
            pos,
            called_from: (self.top != pos).then_some(self.top),
            params: BTreeSet::new(),
        };
        let mut deps: Deps = None;
        for a in args {
            let value = self.eval_lenient(a, env)?;
            deps = merge(&deps, &value.deps);
            self.add_to_rule(&mut rule, &value, a.pos)?;
        }
        if rule.operations.is_empty() {
            return Err(SbplError::new(
                pos,
                K::BadForm,
                format!(
                    "`({name} …)` names no operation; start it with one, e.g. ({name} file-read-data …)"
                ),
            ));
        }
        if rule.operations.contains(&"default")
            && (rule.operations.len() > 1 || !rule.filters.is_empty())
        {
            return Err(SbplError::new(
                pos,
                K::BadForm,
                format!(
                    "`default` stands alone: write ({name} default) with only (with …) modifiers"
                ),
            ));
        }
        for c in &self.cond {
            deps = merge(&deps, c);
        }
        self.charge(deps_len(&deps), pos)?;
        rule.params = names(&deps);
        for f in &rule.filters {
            rule.params.extend(f.params.iter().cloned());
        }
        if self.out.rules.len() >= self.limits.max_rules {
            return Err(SbplError::new(
                pos,
                K::TooLarge,
                format!(
                    "the profile makes more than {} rules; raise Limits::max_rules",
                    self.limits.max_rules
                ),
            ));
        }
        self.out.rules.push(rule);
        Ok(v(Val::Unspec))
    }

    fn add_to_rule(&mut self, rule: &mut PolicyRule, value: &V<'a>, pos: Pos) -> R<()> {
        match &value.val {
            Val::Sym(s) => {
                let op = if &**s == "default" {
                    "default"
                } else if let Some((op, _)) = catalog::operation(s) {
                    op
                } else {
                    let hint = catalog::suggest(s)
                        .map(|n| format!(" (did you mean `{n}`?)"))
                        .unwrap_or_default();
                    return Err(SbplError::new(
                        pos,
                        K::UnknownOperation,
                        format!(
                            "`{s}` is not a Seatbelt operation this crate knows{hint}; see seatbelt::sbpl::OPERATIONS"
                        ),
                    ));
                };
                rule.operations.push(op);
            }
            Val::Filter(f, _) => {
                self.charge(filter_size(f), pos)?;
                rule.filters.push((**f).clone());
            }
            Val::Modifier(m, _) => {
                self.charge(m.args.iter().map(arg_size).sum::<u64>(), pos)?;
                rule.modifiers.push((**m).clone());
            }
            Val::List(items, _) => {
                for i in items.iter() {
                    self.add_to_rule(rule, i, pos)?;
                }
            }
            _ => {
                return Err(self.type_error(
                    pos,
                    "a rule",
                    "an operation, a filter or (with …)",
                    value,
                ));
            }
        }
        Ok(())
    }

    /// `equal?`, one step per node compared (shared structure makes values large).
    fn equal(&mut self, a: &V<'a>, b: &V<'a>, pos: Pos) -> R<bool> {
        self.charge(1, pos)?;
        Ok(match (&a.val, &b.val) {
            (Val::Bool(x), Val::Bool(y)) => x == y,
            (Val::Int(x), Val::Int(y)) => x == y,
            (Val::Str(x), Val::Str(y)) | (Val::Sym(x), Val::Sym(y)) => x == y,
            (Val::List(x, _), Val::List(y, _)) => {
                if x.len() != y.len() {
                    return Ok(false);
                }
                for (p, q) in x.iter().zip(y.iter()) {
                    if !self.equal(p, q, pos)? {
                        return Ok(false);
                    }
                }
                true
            }
            (Val::Filter(x, _), Val::Filter(y, _)) => {
                self.charge(filter_size(x), pos)?;
                x == y
            }
            (Val::Builtin(x), Val::Builtin(y)) => x == y,
            (Val::Lambda(x), Val::Lambda(y)) => Rc::ptr_eq(x, y),
            (Val::Unspec, Val::Unspec) => true,
            _ => false,
        })
    }

    fn type_error(&self, pos: Pos, who: &str, want: &str, got: &V<'a>) -> SbplError {
        let missing: Vec<&Rc<str>> = got
            .deps
            .iter()
            .flat_map(|d| d.iter())
            .filter(|k| self.out.params_missing.contains(&***k))
            .collect();
        let hint = match missing.as_slice() {
            [] => String::new(),
            ks => format!(
                "; it comes from undefined parameter(s) {}: pass -D {}=VALUE",
                ks.iter()
                    .map(|k| format!("{k:?}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                ks[0]
            ),
        };
        SbplError::new(
            pos,
            K::Type,
            format!("{who} expects {want}, got {}{hint}", show(got)),
        )
    }

    fn call(&mut self, f: &V<'a>, args: Vec<V<'a>>, pos: Pos, env: usize) -> R<V<'a>> {
        match &f.val {
            Val::Lambda(l) => {
                let l = Rc::clone(l);
                let fixed = l.params.len();
                if args.len() < fixed || (l.rest.is_none() && args.len() > fixed) {
                    return Err(SbplError::new(
                        pos,
                        K::Arity,
                        format!(
                            "the function takes {fixed}{} argument(s), got {}",
                            if l.rest.is_some() { " or more" } else { "" },
                            args.len()
                        ),
                    ));
                }
                let frame = self.new_frame(l.env, pos)?;
                let mut it = args.into_iter();
                for p in &l.params {
                    if let Some(a) = it.next() {
                        self.bind(frame, p, a);
                    }
                }
                if let Some(rest) = &l.rest {
                    let list = v(self.new_list(it.collect(), pos)?);
                    self.bind(frame, rest, list);
                }
                let mut out = self.under(f.deps.clone(), l.body, frame)?;
                self.release(frame);
                out.deps = merge(&out.deps, &f.deps);
                Ok(out)
            }
            Val::Builtin(b @ ("apply" | "map" | "for-each")) => {
                self.higher_order(b, args, pos, env)
            }
            Val::Builtin(b) => self.builtin(b, args, pos, env),
            _ => Err(self.type_error(pos, "a call", "a procedure in the first position", f)),
        }
    }

    /// `apply`, `map`, `for-each`: the procedures that call back into the evaluator. Kept out of
    /// [`Eval::builtin`], whose frame is large, so recursion through them costs little stack.
    fn higher_order(&mut self, name: &str, args: Vec<V<'a>>, pos: Pos, env: usize) -> R<V<'a>> {
        match name {
            "apply" => {
                let Some((f, rest)) = args.split_first() else {
                    return Err(SbplError::new(
                        pos,
                        K::Arity,
                        "`apply` takes a procedure and a list".into(),
                    ));
                };
                let mut call_args: Vec<V<'a>> = Vec::new();
                if let Some((last, mid)) = rest.split_last() {
                    call_args.extend(mid.iter().cloned());
                    call_args.extend(self.list(last, name, pos)?.iter().cloned());
                }
                self.call(f, call_args, pos, env)
            }
            _ => {
                if args.len() != 2 {
                    return Err(SbplError::new(
                        pos,
                        K::Arity,
                        format!("`{name}` takes a procedure and a list"),
                    ));
                }
                let items = self.list(&args[1], name, pos)?;
                let mut out = Vec::with_capacity(items.len());
                for item in items.iter() {
                    out.push(self.call(&args[0], vec![item.clone()], pos, env)?);
                }
                let deps = deps_of(&args);
                Ok(V {
                    val: if name == "for-each" {
                        Val::Unspec
                    } else {
                        self.new_list(out, pos)?
                    },
                    deps,
                })
            }
        }
    }

    fn builtin(&mut self, name: &'static str, args: Vec<V<'a>>, pos: Pos, env: usize) -> R<V<'a>> {
        if let Some(filter) = catalog::filter(name) {
            return self.filter(filter, args, pos);
        }
        let deps = deps_of(&args);
        let arity = |n: usize| -> R<()> {
            if args.len() == n {
                Ok(())
            } else {
                Err(SbplError::new(
                    pos,
                    K::Arity,
                    format!("`{name}` takes {n} argument(s), got {}", args.len()),
                ))
            }
        };
        let with = |val: Val<'a>| V {
            val,
            deps: deps.clone(),
        };
        let val = match name {
            "param" => {
                arity(1)?;
                let key = self.string(&args[0], name, pos)?;
                if key.len() > MAX_PARAM_KEY {
                    return Err(SbplError::new(
                        pos,
                        K::BadValue,
                        format!(
                            "a parameter name longer than {MAX_PARAM_KEY} bytes; use a short KEY"
                        ),
                    ));
                }
                self.out.params_read.insert(key.to_string());
                let mut d: BTreeSet<Rc<str>> = deps.as_deref().cloned().unwrap_or_default();
                if d.len() < MAX_DEPS {
                    d.insert(Rc::clone(&key));
                }
                let val = match self.params.get(&*key) {
                    Some(value) => Val::Str(Rc::from(value.as_str())),
                    None => {
                        self.out.params_missing.insert(key.to_string());
                        Val::Bool(false)
                    }
                };
                return Ok(V {
                    val,
                    deps: Some(Rc::new(d)),
                });
            }
            "defined?" => {
                arity(1)?;
                match &args[0].val {
                    Val::Sym(s) => Val::Bool(self.lookup(s, env).is_some()),
                    _ => {
                        return Err(self.type_error(
                            pos,
                            "`defined?`",
                            "a quoted symbol such as 'iokit-open",
                            &args[0],
                        ));
                    }
                }
            }
            "not" => {
                arity(1)?;
                Val::Bool(!truthy(&args[0]))
            }
            "equal?" | "eq?" | "eqv?" => {
                arity(2)?;
                Val::Bool(self.equal(&args[0], &args[1], pos)?)
            }
            "string=?" | "string<?" => {
                arity(2)?;
                let a = self.string(&args[0], name, pos)?;
                let b = self.string(&args[1], name, pos)?;
                Val::Bool(if name == "string=?" { a == b } else { a < b })
            }
            "string-append" => {
                let mut s = String::new();
                for a in &args {
                    s.push_str(&self.string(a, name, pos)?);
                    if s.len() > self.limits.max_string {
                        return Err(SbplError::new(
                            pos,
                            K::TooLarge,
                            format!(
                                "`string-append` made a string longer than {} bytes",
                                self.limits.max_string
                            ),
                        ));
                    }
                }
                self.charge(s.len() as u64 / 16, pos)?;
                Val::Str(Rc::from(s))
            }
            "string-length" => {
                arity(1)?;
                let s = self.string(&args[0], name, pos)?;
                Val::Int(i64::try_from(s.chars().count()).unwrap_or(i64::MAX))
            }
            "substring" => {
                if !(2..=3).contains(&args.len()) {
                    return Err(SbplError::new(
                        pos,
                        K::Arity,
                        "`substring` takes a string, a start and an optional end".into(),
                    ));
                }
                let s = self.string(&args[0], name, pos)?;
                let chars: Vec<char> = s.chars().collect();
                self.charge(chars.len() as u64 / 16, pos)?;
                let start = self.index(&args[1], name, pos)?;
                let end = match args.get(2) {
                    Some(e) => self.index(e, name, pos)?,
                    None => chars.len(),
                };
                match chars.get(start..end) {
                    Some(part) => Val::Str(Rc::from(part.iter().collect::<String>())),
                    None => {
                        return Err(SbplError::new(
                            pos,
                            K::Type,
                            format!(
                                "`substring` range {start}..{end} is outside a string of length {}",
                                chars.len()
                            ),
                        ));
                    }
                }
            }
            "string->number" => {
                arity(1)?;
                let s = self.string(&args[0], name, pos)?;
                s.trim().parse::<i64>().map_or(Val::Bool(false), Val::Int)
            }
            "number->string" => {
                arity(1)?;
                Val::Str(Rc::from(self.int(&args[0], name, pos)?.to_string()))
            }
            "string->symbol" => {
                arity(1)?;
                Val::Sym(self.string(&args[0], name, pos)?)
            }
            "symbol->string" => {
                arity(1)?;
                match &args[0].val {
                    Val::Sym(s) => Val::Str(Rc::clone(s)),
                    _ => {
                        return Err(self.type_error(pos, "`symbol->string`", "a symbol", &args[0]));
                    }
                }
            }
            "regex-quote" => {
                arity(1)?;
                let s = self.string(&args[0], name, pos)?;
                let mut out = String::with_capacity(s.len() * 2);
                for c in s.chars() {
                    if "\\.*+?|()[]{}^$".contains(c) {
                        out.push('\\');
                    }
                    out.push(c);
                }
                self.charge(out.len() as u64 / 16, pos)?;
                Val::Str(Rc::from(out))
            }
            "list" => {
                self.charge(args.len() as u64 / 16, pos)?;
                let list = self.new_list(args, pos)?;
                return Ok(V { val: list, deps });
            }
            "cons" => {
                arity(2)?;
                let mut items = vec![args[0].clone()];
                items.extend(self.list(&args[1], name, pos)?.iter().cloned());
                self.charge(items.len() as u64 / 16, pos)?;
                self.new_list(items, pos)?
            }
            "car" | "cdr" => {
                arity(1)?;
                let items = self.list(&args[0], name, pos)?;
                match (name, items.split_first()) {
                    ("car", Some((first, _))) => {
                        return Ok(V {
                            val: first.val.clone(),
                            deps: merge(&first.deps, &deps),
                        });
                    }
                    ("cdr", Some((_, rest))) => self.new_list(rest.to_vec(), pos)?,
                    _ => {
                        return Err(SbplError::new(
                            pos,
                            K::Type,
                            format!("`{name}` of an empty list"),
                        ));
                    }
                }
            }
            "append" => {
                let mut items = Vec::new();
                for a in &args {
                    items.extend(self.list(a, name, pos)?.iter().cloned());
                }
                self.charge(items.len() as u64 / 16, pos)?;
                self.new_list(items, pos)?
            }
            "length" => {
                arity(1)?;
                Val::Int(i64::try_from(self.list(&args[0], name, pos)?.len()).unwrap_or(i64::MAX))
            }
            "null?" | "pair?" | "list?" | "string?" | "symbol?" | "number?" | "boolean?"
            | "procedure?" => {
                arity(1)?;
                let a = &args[0].val;
                Val::Bool(match name {
                    "null?" => matches!(a, Val::List(l, _) if l.is_empty()),
                    "pair?" => matches!(a, Val::List(l, _) if !l.is_empty()),
                    "list?" => matches!(a, Val::List(..)),
                    "string?" => matches!(a, Val::Str(_)),
                    "symbol?" => matches!(a, Val::Sym(_)),
                    "number?" => matches!(a, Val::Int(_)),
                    "boolean?" => matches!(a, Val::Bool(_)),
                    _ => matches!(a, Val::Lambda(_) | Val::Builtin(_)),
                })
            }
            "=" | "<" | ">" | "<=" | ">=" => {
                if args.len() < 2 {
                    return Err(SbplError::new(
                        pos,
                        K::Arity,
                        format!("`{name}` compares two or more numbers"),
                    ));
                }
                let mut ok = true;
                for w in args.windows(2) {
                    let (a, b) = (self.int(&w[0], name, pos)?, self.int(&w[1], name, pos)?);
                    ok &= match name {
                        "=" => a == b,
                        "<" => a < b,
                        ">" => a > b,
                        "<=" => a <= b,
                        _ => a >= b,
                    };
                }
                Val::Bool(ok)
            }
            "+" | "-" | "*" => {
                let mut nums = Vec::with_capacity(args.len());
                for a in &args {
                    nums.push(self.int(a, name, pos)?);
                }
                let overflow =
                    || SbplError::new(pos, K::Type, format!("`{name}` overflows 64-bit integers"));
                let n = match (name, nums.split_first()) {
                    ("-", Some((first, []))) => first.checked_neg().ok_or_else(overflow)?,
                    ("-", Some((first, rest))) => rest
                        .iter()
                        .try_fold(*first, |a, b| a.checked_sub(*b))
                        .ok_or_else(overflow)?,
                    ("-", None) => {
                        return Err(SbplError::new(
                            pos,
                            K::Arity,
                            "`-` takes at least one number".into(),
                        ));
                    }
                    ("+", _) => nums
                        .iter()
                        .try_fold(0i64, |a, b| a.checked_add(*b))
                        .ok_or_else(overflow)?,
                    _ => nums
                        .iter()
                        .try_fold(1i64, |a, b| a.checked_mul(*b))
                        .ok_or_else(overflow)?,
                };
                Val::Int(n)
            }
            "with" => {
                let Some((first, rest)) = args.split_first() else {
                    return Err(SbplError::new(pos, K::Arity, "`with` names a modifier: (with no-log), (with report), (with send-signal SIGKILL)".into()));
                };
                let Val::Sym(m) = &first.val else {
                    return Err(self.type_error(
                        pos,
                        "`with`",
                        "a modifier name such as no-log",
                        first,
                    ));
                };
                let depth = self.nesting(rest, pos)?;
                let mut margs = Vec::new();
                for a in rest {
                    margs.push(self.arg(a, pos)?);
                }
                let modifier = Modifier {
                    name: m.to_string(),
                    args: margs,
                    pos,
                };
                Val::Modifier(Rc::new(modifier), depth)
            }
            // `_IO`, `_IOR`, `_IOW`, `_IOWR`: kept as the call itself, for unmodelled filters.
            _ => {
                let mut items = vec![v(Val::Sym(Rc::from(name)))];
                items.extend(args);
                self.new_list(items, pos)?
            }
        };
        Ok(with(val))
    }

    fn string(&self, a: &V<'a>, who: &str, pos: Pos) -> R<Rc<str>> {
        match &a.val {
            Val::Str(s) => Ok(Rc::clone(s)),
            _ => Err(self.type_error(pos, &format!("`{who}`"), "a string", a)),
        }
    }

    fn int(&self, a: &V<'a>, who: &str, pos: Pos) -> R<i64> {
        match &a.val {
            Val::Int(n) => Ok(*n),
            _ => Err(self.type_error(pos, &format!("`{who}`"), "a number", a)),
        }
    }

    fn index(&self, a: &V<'a>, who: &str, pos: Pos) -> R<usize> {
        let n = self.int(a, who, pos)?;
        usize::try_from(n)
            .map_err(|_| self.type_error(pos, &format!("`{who}`"), "a non-negative index", a))
    }

    fn list(&self, a: &V<'a>, who: &str, pos: Pos) -> R<Rc<Vec<V<'a>>>> {
        match &a.val {
            Val::List(l, _) => Ok(Rc::clone(l)),
            _ => Err(self.type_error(pos, &format!("`{who}`"), "a list", a)),
        }
    }

    /// Converts a value into a filter argument, one step per node: values share structure
    /// (`(set! l (list l l))` doubles a list in one step), the converted tree does not.
    fn arg(&mut self, a: &V<'a>, pos: Pos) -> R<Arg> {
        self.charge(1, pos)?;
        Ok(match &a.val {
            Val::Str(s) => {
                self.charge(s.len() as u64 / 16, pos)?;
                Arg::Str(s.to_string())
            }
            Val::Sym(s) => Arg::Symbol(s.to_string()),
            Val::Int(n) => Arg::Int(*n),
            Val::Bool(b) => Arg::Bool(*b),
            Val::Filter(f, _) => {
                self.charge(filter_size(f), pos)?;
                Arg::Filter((**f).clone())
            }
            Val::List(items, _) => {
                let mut out = Vec::with_capacity(items.len());
                for i in items.iter() {
                    out.push(self.arg(i, pos)?);
                }
                Arg::List(out)
            }
            _ => {
                return Err(self.type_error(
                    pos,
                    "a filter",
                    "strings, symbols, numbers or filters",
                    a,
                ));
            }
        })
    }

    /// Builds a filter value, checking the shape of the modelled ones.
    fn filter(&mut self, name: &'static str, args: Vec<V<'a>>, pos: Pos) -> R<V<'a>> {
        let deps = deps_of(&args);
        let depth = self.nesting(&args, pos)?;
        let mut out = Vec::with_capacity(args.len());
        // `require-*` take filters; lists of filters (from `list`/`map`) are spliced in.
        for a in &args {
            match (&a.val, name.starts_with("require-")) {
                (Val::List(items, _), true) => {
                    for i in items.iter() {
                        out.push(self.arg(i, pos)?);
                    }
                }
                _ => out.push(self.arg(a, pos)?),
            }
        }
        let wrong = |want: &str| -> SbplError {
            let got = args.first().cloned().unwrap_or(v(Val::Unspec));
            self.type_error(pos, &format!("`({name} …)`"), want, &got)
        };
        match name {
            "literal" | "path" | "subpath" | "prefix" | "path-literal" | "path-prefix" => {
                match out.as_slice() {
                    [Arg::Str(s)] if s.starts_with('/') => {}
                    [Arg::Str(s)] => {
                        return Err(SbplError::new(
                            pos,
                            K::BadValue,
                            format!(
                                "`({name} {s:?})`: paths in profiles are absolute; write the full path starting with /"
                            ),
                        ));
                    }
                    _ => return Err(wrong("one absolute path string")),
                }
            }
            "regex" | "path-regex" | "sysctl-name" | "sysctl-name-prefix" | "sysctl-name-regex"
            | "global-name" | "global-name-prefix" | "global-name-regex" | "local-name"
                if !matches!(out.as_slice(), [Arg::Str(_)]) =>
            {
                return Err(wrong("one string"));
            }
            "vnode-type" | "target" => {
                let allowed = if name == "target" {
                    super::decide::TARGETS
                } else {
                    super::decide::VNODE_TYPES
                };
                if !matches!(out.as_slice(), [Arg::Symbol(t)] if allowed.contains(&t.as_str())) {
                    return Err(wrong(&format!("one of {}", allowed.join(", "))));
                }
            }
            "require-all" | "require-any" if !out.iter().all(|a| matches!(a, Arg::Filter(_))) => {
                return Err(wrong("filters"));
            }
            "require-not" if !matches!(out.as_slice(), [Arg::Filter(_)]) => {
                return Err(wrong("one filter"));
            }
            "remote" | "local" => super::decide::check_address(name, &out)
                .map_err(|m| SbplError::new(pos, K::BadValue, m))?,
            _ => {}
        }
        let value = FilterValue {
            name,
            args: out,
            pos,
            params: names(&deps),
        };
        Ok(V {
            val: Val::Filter(Rc::new(value), depth),
            deps,
        })
    }
}

fn binding(b: &Datum) -> Option<(&str, &Datum)> {
    match &b.kind {
        DatumKind::List(pair) => match pair.as_slice() {
            [n, e] => Some((n.as_symbol()?, e)),
            _ => None,
        },
        _ => None,
    }
}

fn truthy(x: &V<'_>) -> bool {
    !matches!(x.val, Val::Bool(false))
}

/// Nodes in a filter tree (strings count a node per 16 bytes, parameters one each): what
/// cloning or comparing it costs, in steps.
fn filter_size(f: &FilterValue) -> u64 {
    1 + f.params.len() as u64 + f.args.iter().map(arg_size).sum::<u64>()
}

fn arg_size(a: &Arg) -> u64 {
    match a {
        Arg::Filter(f) => filter_size(f),
        Arg::List(items) => 1 + items.iter().map(arg_size).sum::<u64>(),
        Arg::Str(s) => 1 + s.len() as u64 / 16,
        _ => 1,
    }
}

fn show(x: &V<'_>) -> String {
    let mut s = match &x.val {
        Val::Unspec => "no value".to_owned(),
        Val::Bool(b) => {
            if *b {
                "#t".to_owned()
            } else {
                "#f".to_owned()
            }
        }
        Val::Int(n) => n.to_string(),
        Val::Str(s) => format!("{s:?}"),
        Val::Sym(s) => format!("the symbol `{s}`"),
        Val::List(l, _) => format!("a list of {}", l.len()),
        Val::Lambda(_) => "a function".to_owned(),
        Val::Builtin(b) => format!("the procedure `{b}`"),
        Val::Filter(f, _) => format!("the filter {f}"),
        Val::Modifier(m, _) => format!("the modifier {m}"),
    };
    if s.len() > 120 {
        let cut = (0..=120)
            .rev()
            .find(|i| s.is_char_boundary(*i))
            .unwrap_or(0);
        s.truncate(cut);
        s.push('…');
    }
    s
}
