//! Parsing SBPL text back into a [`Profile`]: everything the renderer emits, and nothing the AST
//! cannot hold (no `define`, no `import`, no `(allow default)`, no unknown operation or filter).
//! Profiles written by others go through [`crate::sbpl`] instead, which reads them all.
//!
//! Two stages: a reader turns text into S-expressions (strings with the renderer's escapes, `#"…"`
//! raw strings, atoms, lists, `;` comments), then each form is checked into the typed AST. Bad
//! input is a [`ParseError`] with a line and column, never a panic; nesting is capped so hostile
//! input cannot overflow the stack.

use crate::ast::{Action, Filter, Operation, Profile, Rule, Target, Value, VnodeType};
use crate::pattern::{Pattern, PatternError};

/// Lists nest at most this deep (a rule is 2 levels; `require-*` adds one each).
const MAX_DEPTH: usize = 64;

/// Where parsing stopped and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SBPL line {line}, column {column}: {kind}")]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What was wrong.
    pub kind: ParseErrorKind,
}

/// The reasons a profile text is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The text is not well-formed S-expressions.
    #[error("{0}")]
    Syntax(&'static str),
    /// A well-formed form this crate does not model.
    #[error(
        "{what} `{name}` is outside the typed profile language (the forms the renderer emits); read other profiles with seatbelt::sbpl::expand"
    )]
    Unsupported {
        /// What kind of thing (operation, filter, form …).
        what: &'static str,
        /// Its spelling.
        name: String,
    },
    /// A form with the wrong shape, e.g. `(literal)` or `(version 2)`.
    #[error("expected {0}")]
    Expected(&'static str),
    /// A `regex` pattern outside the supported subset.
    #[error(transparent)]
    Pattern(#[from] PatternError),
}

#[derive(Debug)]
enum Sx {
    Atom(String, usize),
    Str(String, usize),
    Raw(String, usize),
    List(Vec<Sx>, usize),
}

impl Sx {
    fn pos(&self) -> usize {
        match self {
            Sx::Atom(_, p) | Sx::Str(_, p) | Sx::Raw(_, p) | Sx::List(_, p) => *p,
        }
    }
}

impl Profile {
    /// Parses SBPL text produced by [`Profile::render`] (comments and whitespace are free).
    pub fn parse(text: &str) -> Result<Profile, ParseError> {
        let fail = |pos: usize, kind: ParseErrorKind| {
            let before = &text[..pos.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            ParseError { line, column, kind }
        };
        let forms = Reader { text, pos: 0 }
            .forms()
            .map_err(|(p, k)| fail(p, k))?;
        to_profile(forms).map_err(|(p, k)| fail(p, k))
    }
}

type Res<T> = Result<T, (usize, ParseErrorKind)>;

struct Reader<'a> {
    text: &'a str,
    pos: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn skip_space(&mut self) {
        while let Some(c) = self.peek() {
            if c == ';' {
                while let Some(c) = self.bump() {
                    if c == '\n' {
                        break;
                    }
                }
            } else if c.is_whitespace() {
                self.bump();
            } else {
                break;
            }
        }
    }

    fn forms(mut self) -> Res<Vec<Sx>> {
        let mut out = Vec::new();
        loop {
            self.skip_space();
            match self.peek() {
                None => return Ok(out),
                Some(')') => return Err((self.pos, ParseErrorKind::Syntax("unbalanced `)`"))),
                Some(_) => out.push(self.form(0)?),
            }
        }
    }

    fn form(&mut self, depth: usize) -> Res<Sx> {
        let start = self.pos;
        match self.peek() {
            Some('(') => {
                if depth >= MAX_DEPTH {
                    return Err((start, ParseErrorKind::Syntax("lists nested too deeply")));
                }
                self.bump();
                let mut items = Vec::new();
                loop {
                    self.skip_space();
                    match self.peek() {
                        None => return Err((start, ParseErrorKind::Syntax("unclosed `(`"))),
                        Some(')') => {
                            self.bump();
                            return Ok(Sx::List(items, start));
                        }
                        Some(_) => items.push(self.form(depth + 1)?),
                    }
                }
            }
            Some('"') => {
                self.bump();
                self.string(start).map(|s| Sx::Str(s, start))
            }
            Some('#') if self.text[self.pos..].starts_with("#\"") => {
                self.pos += 2;
                let rest = &self.text[self.pos..];
                let Some(end) = rest.find('"') else {
                    return Err((start, ParseErrorKind::Syntax("unterminated `#\"` string")));
                };
                let raw = rest[..end].to_owned();
                self.pos += end + 1;
                Ok(Sx::Raw(raw, start))
            }
            _ => {
                while let Some(c) = self.peek() {
                    if c.is_whitespace() || matches!(c, '(' | ')' | '"' | ';') {
                        break;
                    }
                    self.bump();
                }
                Ok(Sx::Atom(self.text[start..self.pos].to_owned(), start))
            }
        }
    }

    fn string(&mut self, start: usize) -> Res<String> {
        let mut s = String::new();
        loop {
            let at = self.pos;
            match self.bump() {
                None => return Err((start, ParseErrorKind::Syntax("unterminated string"))),
                Some('"') => return Ok(s),
                Some('\\') => {
                    let next = self.bump();
                    let rest = self.text.get(self.pos..).unwrap_or("");
                    match crate::sbpl::reader::unescape(next, rest) {
                        Ok((c, used)) => {
                            self.pos += used;
                            s.push(c);
                        }
                        Err(message) => return Err((at, ParseErrorKind::Syntax(message))),
                    }
                }
                Some(c) => s.push(c),
            }
        }
    }
}

fn to_profile(forms: Vec<Sx>) -> Res<Profile> {
    let mut forms = forms.into_iter();
    match forms.next() {
        Some(Sx::List(items, _)) if matches!(items.as_slice(), [Sx::Atom(v, _), Sx::Atom(n, _)] if v == "version" && n == "1") =>
            {}
        Some(other) => return Err((other.pos(), ParseErrorKind::Expected("`(version 1)` first"))),
        None => return Err((0, ParseErrorKind::Expected("`(version 1)` first"))),
    }
    match forms.next() {
        Some(Sx::List(items, _)) if matches!(items.as_slice(), [Sx::Atom(d, _), Sx::Atom(x, _)] if d == "deny" && x == "default") =>
            {}
        Some(other) => {
            return Err((
                other.pos(),
                ParseErrorKind::Expected(
                    "`(deny default)` second; only deny-default profiles are supported",
                ),
            ));
        }
        None => return Err((0, ParseErrorKind::Expected("`(deny default)` second"))),
    }
    let mut rules = Vec::new();
    for form in forms {
        rules.push(to_rule(form)?);
    }
    Ok(Profile { rules })
}

fn to_rule(form: Sx) -> Res<Rule> {
    let Sx::List(items, pos) = form else {
        return Err((
            form.pos(),
            ParseErrorKind::Expected("a rule `(allow …)` or `(deny …)`"),
        ));
    };
    let mut items = items.into_iter();
    let action = match items.next() {
        Some(Sx::Atom(a, _)) if a == "allow" => Action::Allow,
        Some(Sx::Atom(a, _)) if a == "deny" => Action::Deny,
        Some(Sx::Atom(a, p)) => {
            return Err((
                p,
                ParseErrorKind::Unsupported {
                    what: "form",
                    name: a,
                },
            ));
        }
        _ => {
            return Err((
                pos,
                ParseErrorKind::Expected("a rule `(allow …)` or `(deny …)`"),
            ));
        }
    };
    let mut operations = Vec::new();
    let mut filters = Vec::new();
    for item in items {
        match item {
            Sx::Atom(name, p) if filters.is_empty() => {
                if name == "default" {
                    return Err((
                        p,
                        ParseErrorKind::Expected("`default` only in the `(deny default)` line"),
                    ));
                }
                match Operation::from_name(&name) {
                    Some(op) => operations.push(op),
                    None => {
                        return Err((
                            p,
                            ParseErrorKind::Unsupported {
                                what: "operation",
                                name,
                            },
                        ));
                    }
                }
            }
            Sx::List(..) => filters.push(to_filter(item)?),
            other => {
                return Err((
                    other.pos(),
                    ParseErrorKind::Expected("operations, then filters"),
                ));
            }
        }
    }
    if operations.is_empty() {
        return Err((
            pos,
            ParseErrorKind::Expected("at least one operation in a rule"),
        ));
    }
    Ok(Rule {
        action,
        operations,
        filters,
    })
}

fn to_filter(form: Sx) -> Res<Filter> {
    let Sx::List(items, pos) = form else {
        return Err((form.pos(), ParseErrorKind::Expected("a filter `(name …)`")));
    };
    let mut items = items.into_iter();
    let (head, head_pos) = match items.next() {
        Some(Sx::Atom(h, p)) => (h, p),
        _ => return Err((pos, ParseErrorKind::Expected("a filter `(name …)`"))),
    };
    let args: Vec<Sx> = items.collect();
    let one = |args: Vec<Sx>| -> Res<Sx> {
        let mut it = args.into_iter();
        match (it.next(), it.next()) {
            (Some(a), None) => Ok(a),
            _ => Err((pos, ParseErrorKind::Expected("exactly one argument"))),
        }
    };
    Ok(match head.as_str() {
        "literal" => Filter::Literal(to_value(one(args)?)?),
        "subpath" => Filter::Subpath(to_value(one(args)?)?),
        "prefix" => Filter::Prefix(to_value(one(args)?)?),
        "sysctl-name" => Filter::SysctlName(to_value(one(args)?)?),
        "sysctl-name-prefix" => Filter::SysctlNamePrefix(to_value(one(args)?)?),
        "global-name" => Filter::GlobalName(to_value(one(args)?)?),
        "regex" => match one(args)? {
            Sx::Raw(s, p) | Sx::Str(s, p) => {
                Filter::Regex(Pattern::new(&s).map_err(|e| (p, e.into()))?)
            }
            other => return Err((other.pos(), ParseErrorKind::Expected("a `#\"…\"` pattern"))),
        },
        "vnode-type" => match one(args)? {
            Sx::Atom(s, p) => match VnodeType::ALL.iter().find(|t| t.name() == s) {
                Some(t) => Filter::VnodeType(*t),
                None => {
                    return Err((
                        p,
                        ParseErrorKind::Unsupported {
                            what: "vnode type",
                            name: s,
                        },
                    ));
                }
            },
            other => {
                return Err((
                    other.pos(),
                    ParseErrorKind::Expected("a vnode type such as REGULAR-FILE"),
                ));
            }
        },
        "target" => match one(args)? {
            Sx::Atom(s, p) => match Target::ALL.iter().find(|t| t.name() == s) {
                Some(t) => Filter::Target(*t),
                None => {
                    return Err((
                        p,
                        ParseErrorKind::Unsupported {
                            what: "target",
                            name: s,
                        },
                    ));
                }
            },
            other => {
                return Err((
                    other.pos(),
                    ParseErrorKind::Expected("a target such as same-sandbox"),
                ));
            }
        },
        "require-all" | "require-any" => {
            let fs = args.into_iter().map(to_filter).collect::<Res<Vec<_>>>()?;
            if head == "require-all" {
                Filter::RequireAll(fs)
            } else {
                Filter::RequireAny(fs)
            }
        }
        "require-not" => Filter::RequireNot(Box::new(to_filter(one(args)?)?)),
        _ => {
            return Err((
                head_pos,
                ParseErrorKind::Unsupported {
                    what: "filter",
                    name: head,
                },
            ));
        }
    })
}

fn to_value(sx: Sx) -> Res<Value> {
    match sx {
        Sx::Str(s, _) => Ok(Value::Text(s)),
        Sx::List(items, p) => {
            let mut it = items.into_iter();
            match (it.next(), it.next(), it.next()) {
                (Some(Sx::Atom(h, _)), Some(Sx::Str(k, _)), None) if h == "param" => {
                    Ok(Value::Param(k))
                }
                _ => Err((p, ParseErrorKind::Expected("a string or `(param \"KEY\")`"))),
            }
        }
        other => Err((
            other.pos(),
            ParseErrorKind::Expected("a string or `(param \"KEY\")`"),
        )),
    }
}
