//! The SBPL reader: text → [`Datum`] trees that keep the line and column of every node.
//!
//! **Owns:** the whole reader syntax SBPL profiles are written in — `;` line comments and nested
//! `#| … |#` block comments, strings with the escapes TinyScheme reads (`\\ \" \n \t \r \xHH`),
//! `#"…"` regex literals (raw: no escapes, end at the first `"`), symbols, `'x` quotes, integers
//! and the booleans `#t`/`#f`/`#true`/`#false` — and the inverse, [`Datum`]'s `Display`, which
//! writes text this reader reads back to an equal tree.
//!
//! **Refuses:** quasiquote (`` ` `` `,`), characters (`#\a`), vectors, non-integer numbers and
//! other `#` syntax, with a [`SbplErrorKind::Syntax`] naming what to write instead; input larger
//! than [`Limits::max_text`] and lists nested deeper than [`Limits::max_depth`]. The reader is
//! a loop with an explicit stack, so `((((…` 100 000 deep is an error, not a stack overflow.

use std::fmt;

use super::{Limits, Pos, SbplError, SbplErrorKind};

/// One node of the syntax tree. Equality compares the shape and the text, not the positions.
#[derive(Debug, Clone)]
pub struct Datum {
    /// Where the node starts (its first character).
    pub pos: Pos,
    /// What it is.
    pub kind: DatumKind,
}

impl PartialEq for Datum {
    fn eq(&self, other: &Datum) -> bool {
        self.kind == other.kind
    }
}

impl Eq for Datum {}

/// The kinds of node the reader produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatumKind {
    /// `( … )`.
    List(Vec<Datum>),
    /// A symbol such as `allow`, `file-read*` or `string=?`.
    Symbol(String),
    /// A `"…"` string, escapes decoded.
    Str(String),
    /// A `#"…"` regex literal, as written (it is a string to the Scheme layer).
    Regex(String),
    /// An integer.
    Int(i64),
    /// `#t` or `#f`.
    Bool(bool),
    /// `'x`: the same as `(quote x)`.
    Quote(Box<Datum>),
}

impl Datum {
    /// The symbol's name, if this is one.
    pub fn as_symbol(&self) -> Option<&str> {
        match &self.kind {
            DatumKind::Symbol(s) => Some(s),
            _ => None,
        }
    }
}

/// Whether `s` is written as a symbol by `Display` and read back as the same symbol.
pub fn is_symbol_text(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(['#', '\''])
        && s.chars().all(|c| !c.is_whitespace() && !is_delimiter(c))
        && classify_atom(s).is_none()
}

fn is_delimiter(c: char) -> bool {
    matches!(c, '(' | ')' | '"' | ';' | '\'' | '`' | ',')
}

/// An atom that is not a symbol: a number, or an error for number-like text we do not read.
fn classify_atom(s: &str) -> Option<Result<DatumKind, &'static str>> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() {
        return None; // `+`, `-`: symbols.
    }
    if digits.bytes().all(|b| b.is_ascii_digit()) {
        return Some(
            s.parse::<i64>()
                .map(DatumKind::Int)
                .map_err(|_| "integer out of range; numbers are 64-bit"),
        );
    }
    let numeric = digits.starts_with(|c: char| c.is_ascii_digit())
        || (digits.starts_with('.') && digits[1..].starts_with(|c: char| c.is_ascii_digit()));
    if numeric {
        return Some(Err(
            "only integers are read; write the number without a fraction or exponent",
        ));
    }
    None
}

impl fmt::Display for Datum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            DatumKind::List(items) => {
                f.write_str("(")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str(")")
            }
            DatumKind::Symbol(s) => f.write_str(s),
            DatumKind::Str(s) => {
                let mut out = String::new();
                crate::render::quote(s, &mut out);
                f.write_str(&out)
            }
            DatumKind::Regex(s) => write!(f, "#\"{s}\""),
            DatumKind::Int(n) => write!(f, "{n}"),
            DatumKind::Bool(b) => f.write_str(if *b { "#t" } else { "#f" }),
            DatumKind::Quote(d) => write!(f, "'{d}"),
        }
    }
}

enum Frame {
    List(Pos, Vec<Datum>),
    Quote(Pos),
}

struct Reader<'a> {
    text: &'a str,
    at: usize,
    line: u32,
    column: u32,
}

/// Reads every top-level form of `text`.
pub fn read(text: &str, limits: &Limits) -> Result<Vec<Datum>, SbplError> {
    if text.len() > limits.max_text {
        return Err(SbplError::new(
            Pos::START,
            SbplErrorKind::TooLarge,
            format!(
                "the profile is {} bytes; at most {} are read — split it or raise Limits::max_text",
                text.len(),
                limits.max_text
            ),
        ));
    }
    let mut r = Reader {
        text,
        at: 0,
        line: 1,
        column: 1,
    };
    let mut top = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    loop {
        r.skip_space()?;
        let pos = r.pos();
        let Some(c) = r.peek() else {
            return match stack.last() {
                None => Ok(top),
                Some(Frame::List(p, _)) => Err(syntax(*p, "this `(` is never closed; add a `)`")),
                Some(Frame::Quote(p)) => Err(syntax(*p, "`'` needs something to quote")),
            };
        };
        let done = match c {
            '(' => {
                if stack.len() >= limits.max_depth {
                    return Err(SbplError::new(
                        pos,
                        SbplErrorKind::TooDeep,
                        format!(
                            "lists nest deeper than {} levels; flatten the profile",
                            limits.max_depth
                        ),
                    ));
                }
                r.bump();
                stack.push(Frame::List(pos, Vec::new()));
                continue;
            }
            ')' => {
                r.bump();
                match stack.pop() {
                    Some(Frame::List(p, items)) => Datum {
                        pos: p,
                        kind: DatumKind::List(items),
                    },
                    Some(Frame::Quote(_)) => {
                        return Err(syntax(pos, "`'` needs something to quote before `)`"));
                    }
                    None => return Err(syntax(pos, "unbalanced `)`; remove it")),
                }
            }
            '\'' => {
                if stack.len() >= limits.max_depth {
                    return Err(SbplError::new(
                        pos,
                        SbplErrorKind::TooDeep,
                        format!("quotes nest deeper than {} levels", limits.max_depth),
                    ));
                }
                r.bump();
                stack.push(Frame::Quote(pos));
                continue;
            }
            '`' | ',' => {
                return Err(syntax(
                    pos,
                    "quasiquote (` and ,) is not supported; build the list with `list`",
                ));
            }
            '"' => {
                r.bump();
                let s = r.string(pos, limits)?;
                Datum {
                    pos,
                    kind: DatumKind::Str(s),
                }
            }
            '#' if r.rest().starts_with("#\"") => {
                r.bump();
                r.bump();
                let s = r.raw(pos, limits)?;
                Datum {
                    pos,
                    kind: DatumKind::Regex(s),
                }
            }
            _ => r.atom(pos, limits)?,
        };
        // Close the quotes waiting for this datum, then hand it to its list.
        let mut datum = done;
        while let Some(Frame::Quote(p)) = stack.last() {
            datum = Datum {
                pos: *p,
                kind: DatumKind::Quote(Box::new(datum)),
            };
            stack.pop();
        }
        match stack.last_mut() {
            Some(Frame::List(_, items)) => items.push(datum),
            _ => top.push(datum),
        }
    }
}

fn syntax(pos: Pos, message: &str) -> SbplError {
    SbplError::new(pos, SbplErrorKind::Syntax, message.to_owned())
}

impl Reader<'_> {
    fn rest(&self) -> &str {
        self.text.get(self.at..).unwrap_or("")
    }

    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            column: self.column,
        }
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += c.len_utf8();
        if c == '\n' {
            self.line = self.line.saturating_add(1);
            self.column = 1;
        } else {
            self.column = self.column.saturating_add(1);
        }
        Some(c)
    }

    fn skip_space(&mut self) -> Result<(), SbplError> {
        loop {
            match self.peek() {
                Some(';') => {
                    while let Some(c) = self.bump() {
                        if c == '\n' {
                            break;
                        }
                    }
                }
                Some(c) if c.is_whitespace() => {
                    self.bump();
                }
                Some('#') if self.rest().starts_with("#|") => self.block_comment()?,
                _ => return Ok(()),
            }
        }
    }

    /// `#| … |#`, nested as in R7RS.
    fn block_comment(&mut self) -> Result<(), SbplError> {
        let start = self.pos();
        self.bump();
        self.bump();
        let mut depth = 1usize;
        while depth > 0 {
            if self.rest().starts_with("|#") {
                self.bump();
                self.bump();
                depth -= 1;
            } else if self.rest().starts_with("#|") {
                self.bump();
                self.bump();
                depth += 1;
            } else if self.bump().is_none() {
                return Err(syntax(start, "this `#|` comment is never closed; add `|#`"));
            }
        }
        Ok(())
    }

    fn string(&mut self, start: Pos, limits: &Limits) -> Result<String, SbplError> {
        let mut s = String::new();
        loop {
            if s.len() > limits.max_string {
                return Err(too_long(start, limits));
            }
            let at = self.pos();
            match self.bump() {
                None => return Err(syntax(start, "this string is never closed; add a `\"`")),
                Some('"') => return Ok(s),
                Some('\\') => {
                    let next = self.bump();
                    match unescape(next, self.rest()) {
                        Ok((c, used)) => {
                            // `used` bytes are ASCII hex digits: one column each.
                            for _ in 0..used {
                                self.bump();
                            }
                            s.push(c);
                        }
                        Err(message) => return Err(syntax(at, message)),
                    }
                }
                Some(c) => s.push(c),
            }
        }
    }

    fn raw(&mut self, start: Pos, limits: &Limits) -> Result<String, SbplError> {
        let mut s = String::new();
        loop {
            if s.len() > limits.max_string {
                return Err(too_long(start, limits));
            }
            match self.bump() {
                None => {
                    return Err(syntax(
                        start,
                        "this `#\"` regex is never closed; add a `\"`",
                    ));
                }
                Some('"') => return Ok(s),
                Some(c) => s.push(c),
            }
        }
    }

    fn atom(&mut self, pos: Pos, limits: &Limits) -> Result<Datum, SbplError> {
        let from = self.at;
        while let Some(c) = self.peek() {
            if c.is_whitespace() || is_delimiter(c) {
                break;
            }
            self.bump();
        }
        let text = self.text.get(from..self.at).unwrap_or("");
        if text.len() > limits.max_string {
            return Err(too_long(pos, limits));
        }
        let kind = match text {
            "#t" | "#true" => DatumKind::Bool(true),
            "#f" | "#false" => DatumKind::Bool(false),
            t if t.starts_with('#') => {
                return Err(syntax(
                    pos,
                    "unknown `#` syntax; SBPL reads #t, #f, #\"regex\" and #| comments |#",
                ));
            }
            t => match classify_atom(t) {
                Some(Ok(kind)) => kind,
                Some(Err(message)) => return Err(syntax(pos, message)),
                None => DatumKind::Symbol(t.to_owned()),
            },
        };
        Ok(Datum { pos, kind })
    }
}

/// Decodes a string escape: `next` is the character after the `\`, `rest` the text after it.
/// Returns the character and how many bytes of `rest` it also used (the two hex digits of
/// `\xHH`). Shared with [`crate::Profile::parse`], so both readers agree on every escape.
pub(crate) fn unescape(next: Option<char>, rest: &str) -> Result<(char, usize), &'static str> {
    Ok(match next {
        Some('\\') => ('\\', 0),
        Some('"') => ('"', 0),
        Some('n') => ('\n', 0),
        Some('t') => ('\t', 0),
        Some('r') => ('\r', 0),
        Some('x') => {
            let byte = rest
                .get(..2)
                .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .filter(u8::is_ascii)
                .ok_or("`\\x` takes two hex digits of an ASCII byte")?;
            (char::from(byte), 2)
        }
        _ => return Err("unknown escape; use \\\\ \\\" \\n \\t \\r or \\xHH"),
    })
}

fn too_long(pos: Pos, limits: &Limits) -> SbplError {
    SbplError::new(
        pos,
        SbplErrorKind::TooLarge,
        format!(
            "a string or symbol longer than {} bytes; shorten it",
            limits.max_string
        ),
    )
}
