//! Parsing `sh -c` scripts with `brush-parser` and flattening them into the simple commands they
//! can run (RC-2).
//!
//! The walk visits every simple command: inside `&&`, `||`, `;`, `|`, `&`, subshells, brace
//! groups, `if`/`for`/`while`/`until`/`case`, function bodies, coprocesses, process
//! substitutions, `$( )` and backticks (in words, assignments, redirect targets, here-strings
//! and expanding here-documents). Anything the parser does not accept fully is refused, and so
//! is a command substitution hidden where this walk does not reach (inside `${…}` or `$((…))`):
//! fail closed. So is a script nesting more than [`MAX_NESTING`] compound commands, before the
//! grammar runs: brush's backtracking on unclosed constructs is exponential.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use brush_parser::ast;
use brush_parser::word::{self, TildeExpr, WordPiece, WordPieceWithSource};

use crate::model::{Refusal, RefuseCode};

/// The largest script we parse; bigger ones are refused so a call cannot make us spend
/// unbounded time before anything runs.
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;

/// How deep `$( )` inside `$( )`, nested `sh -c`, `eval` and `trap` may go.
pub const MAX_DEPTH: usize = 8;

/// How deep compound commands may nest (subshells, `{ }`, `case`, `if`, loops), as `nesting`
/// counts them. brush-parser's grammar backtracks through every way to read a construct that
/// is not closed, in time exponential in how many are open: 24 unclosed `(` took 7 s, 22
/// unclosed `case` 12 s, and 52 `(` would take years (found by the `sh_script` fuzz target).
/// At 12 the worst case is a few milliseconds; real scripts nest a handful.
pub const MAX_NESTING: usize = 12;

/// How deep compound commands nest in brush-parser's own tokens of a script, never less than
/// its grammar would nest them: quotes, comments, here-documents, `$( )` and `$(( ))` are
/// inside word tokens already. An opener (`(`, `{`, `case`, `if`, `while`, `until`, `for`,
/// `select`) counts where a command name may stand; a closer (`)`, `}`, `esac`, `fi`, `done`) ends only the
/// innermost construct of its own kind, so a `case` pattern's `)` ends nothing.
fn nesting(tokens: &[brush_parser::Token]) -> usize {
    #[derive(Clone, Copy, PartialEq)]
    enum Open {
        Paren,
        Brace,
        Case,
        If,
        Loop,
    }
    let mut stack: Vec<Open> = Vec::new();
    let mut most = 0;
    // Whether the next word may be a command name, where the grammar reads reserved words:
    // after an operator, a reserved word that starts a command, or an assignment. Erring
    // towards `true` only over-counts.
    let mut command_position = true;
    for token in tokens {
        let text = token.to_str();
        let (opens, closes) = match token {
            brush_parser::Token::Operator(..) => {
                (text.matches('(').count(), text.matches(')').count())
            }
            brush_parser::Token::Word(..) => (0, 0),
        };
        for _ in 0..opens {
            stack.push(Open::Paren);
        }
        for _ in 0..closes {
            if stack.last() == Some(&Open::Paren) {
                stack.pop();
            }
        }
        let word = matches!(token, brush_parser::Token::Word(..));
        let (push, pop) = match text {
            _ if !word || !command_position => (None, None),
            "{" => (Some(Open::Brace), None),
            "}" => (None, Some(Open::Brace)),
            "case" => (Some(Open::Case), None),
            "esac" => (None, Some(Open::Case)),
            "if" => (Some(Open::If), None),
            "fi" => (None, Some(Open::If)),
            "while" | "until" | "for" | "select" => (Some(Open::Loop), None),
            "done" => (None, Some(Open::Loop)),
            _ => (None, None),
        };
        if let Some(open) = push {
            stack.push(open);
        }
        if pop.is_some() && stack.last() == pop.as_ref() {
            stack.pop();
        }
        let starts_command = matches!(
            text,
            "{" | "}"
                | "!"
                | "if"
                | "then"
                | "else"
                | "elif"
                | "fi"
                | "while"
                | "until"
                | "do"
                | "done"
                | "esac"
                | "time"
        );
        command_position = !word || (command_position && (text.contains('=') || starts_command));
        most = most.max(stack.len());
    }
    most
}

/// A shell word as far as it can be known before running anything.
#[derive(Debug, Clone)]
pub struct Word {
    /// As written.
    pub raw: String,
    /// The value when it involves no expansion at run time (quotes removed, `~` → `$HOME`).
    pub value: Option<String>,
    /// Best-effort rendering for path checks: static parts, `$HOME`/`~` as the home directory,
    /// other expansions as NUL.
    pub view: String,
    /// One unquoted, unescaped text piece (the only shape a command word may have).
    pub plain: bool,
    /// Unquoted glob or brace characters: the shell will expand it into other words.
    pub pattern: bool,
}

impl Word {
    /// A literal argv element: static, never globbed.
    pub fn literal(s: &str) -> Word {
        Word {
            raw: s.to_owned(),
            value: Some(s.to_owned()),
            view: s.to_owned(),
            plain: true,
            pattern: false,
        }
    }

    /// The static value when it is also free of glob characters.
    pub fn fixed(&self) -> Option<&str> {
        if self.pattern {
            None
        } else {
            self.value.as_deref()
        }
    }
}

/// One simple command of a script.
#[derive(Debug, Clone, Default)]
pub struct Cmd {
    /// `NAME=value` before the command word (or alone).
    pub assigns: Vec<(String, Word)>,
    /// The command word and its arguments.
    pub words: Vec<Word>,
}

/// A flattened script.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// Every simple command, in source order, substitutions included.
    pub cmds: Vec<Cmd>,
    /// The script defines a function (its name may shadow an allowlisted command).
    pub functions: bool,
    /// A redirect writes a file other than `/dev/null`, `/dev/stdout`, `/dev/stderr`.
    pub writes: bool,
    /// Files read through `<` and words that are not arguments (for-lists, case subjects).
    pub other_words: Vec<Word>,
}

fn unparsable(why: impl Into<String>) -> Refusal {
    Refusal::new(
        RefuseCode::ScriptUnparsable,
        format!(
            "{}; nothing was run. Write the script in plain POSIX/bash syntax, or split it into \
             separate run_command calls.",
            why.into()
        ),
    )
}

fn options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions::default()
}

/// Parses and flattens `text`. `home` is what `~` expands to.
pub fn parse(text: &str, home: &Path, depth: usize) -> Result<Script, Refusal> {
    let mut s = Script::default();
    Walker { home, out: &mut s }.source(text, depth)?;
    Ok(s)
}

struct Walker<'a> {
    home: &'a Path,
    out: &'a mut Script,
}

fn parse_program(text: &str) -> Result<ast::Program, Refusal> {
    // brush-parser allows `unwrap` internally; a panic on hostile input must become a refusal,
    // never a crash of the host (house rule 5).
    // brush-parser's tokenizer allocated without bound (2.7 GB from 74 bytes, found by the
    // `sh_script` fuzz target) on here-documents among carriage returns. A `\r` is an ordinary
    // character to `sh`, so a script with one is a Windows line end that would fail anyway.
    if text.contains('\r') {
        return Err(unparsable(
            "the script holds a carriage return (\\r, a Windows line end); end its lines with \\n \
             only",
        ));
    }
    let opts = options();
    let tokens = catch_unwind(AssertUnwindSafe(|| {
        brush_parser::uncached_tokenize_str(text, &opts.tokenizer_options())
    }));
    let tokens = match tokens {
        Ok(Ok(tokens)) => tokens,
        Ok(Err(e)) => return Err(unparsable(format!("the script does not parse ({e})"))),
        Err(_) => return Err(unparsable("the script parser failed on this input")),
    };
    // Before the grammar runs: its time is exponential in the nesting of unclosed constructs.
    let nested = nesting(&tokens);
    if nested > MAX_NESTING {
        return Err(unparsable(format!(
            "the script nests {nested} compound commands (subshells, `{{ }}`, `case`, `if`, \
             loops) inside each other, more than the {MAX_NESTING} this tool parses; close each \
             one, or nest less deeply"
        )));
    }
    let result = catch_unwind(AssertUnwindSafe(|| {
        brush_parser::parse_tokens(&tokens, &opts)
    }));
    match result {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(e)) => Err(unparsable(format!("the script does not parse ({e})"))),
        Err(_) => Err(unparsable("the script parser failed on this input")),
    }
}

fn parse_word(raw: &str, heredoc: bool) -> Result<Vec<WordPieceWithSource>, Refusal> {
    let opts = options();
    let result = catch_unwind(AssertUnwindSafe(|| {
        if heredoc {
            word::parse_heredoc(raw, &opts)
        } else {
            word::parse(raw, &opts)
        }
    }));
    match result {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(e)) => Err(unparsable(format!("the word {raw:?} does not parse ({e})"))),
        Err(_) => Err(unparsable(format!("the word parser failed on {raw:?}"))),
    }
}

/// Text inside backquotes: `\$`, `` \` `` and `\\` lose their backslash before the inner
/// script is parsed (POSIX 2.6.3).
fn unescape_backquoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(&n) = chars.peek() {
                if matches!(n, '$' | '`' | '\\') {
                    out.push(n);
                    chars.next();
                    continue;
                }
            }
        }
        out.push(c);
    }
    out
}

const DEV_SINKS: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr"];

impl Walker<'_> {
    fn source(&mut self, text: &str, depth: usize) -> Result<(), Refusal> {
        if depth > MAX_DEPTH {
            return Err(unparsable(format!(
                "command substitutions and nested scripts go deeper than {MAX_DEPTH} levels"
            )));
        }
        if text.len() > MAX_SCRIPT_BYTES {
            return Err(unparsable(format!(
                "the script is {} bytes, more than the {MAX_SCRIPT_BYTES} this tool parses",
                text.len()
            )));
        }
        let program = parse_program(text)?;
        for cc in &program.complete_commands {
            self.list(cc, depth)?;
        }
        Ok(())
    }

    fn list(&mut self, l: &ast::CompoundList, depth: usize) -> Result<(), Refusal> {
        for item in &l.0 {
            let ao = &item.0;
            self.pipeline(&ao.first, depth)?;
            for next in &ao.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p, depth)?,
                }
            }
        }
        Ok(())
    }

    fn pipeline(&mut self, p: &ast::Pipeline, depth: usize) -> Result<(), Refusal> {
        for c in &p.seq {
            self.command(c, depth)?;
        }
        Ok(())
    }

    fn redirects(&mut self, r: Option<&ast::RedirectList>, depth: usize) -> Result<(), Refusal> {
        if let Some(r) = r {
            for io in &r.0 {
                self.redirect(io, depth)?;
            }
        }
        Ok(())
    }

    fn command(&mut self, c: &ast::Command, depth: usize) -> Result<(), Refusal> {
        match c {
            ast::Command::Simple(sc) => self.simple(sc, depth),
            ast::Command::Compound(cc, r) => {
                self.compound(cc, depth)?;
                self.redirects(r.as_ref(), depth)
            }
            ast::Command::Function(f) => {
                self.out.functions = true;
                self.compound(&f.body.0, depth)?;
                self.redirects(f.body.1.as_ref(), depth)
            }
            ast::Command::ExtendedTest(t, r) => {
                self.ext_test(&t.expr, depth)?;
                self.redirects(r.as_ref(), depth)
            }
        }
    }

    fn ext_test(&mut self, e: &ast::ExtendedTestExpr, depth: usize) -> Result<(), Refusal> {
        match e {
            ast::ExtendedTestExpr::And(a, b) | ast::ExtendedTestExpr::Or(a, b) => {
                self.ext_test(a, depth)?;
                self.ext_test(b, depth)
            }
            ast::ExtendedTestExpr::Not(a) | ast::ExtendedTestExpr::Parenthesized(a) => {
                self.ext_test(a, depth)
            }
            ast::ExtendedTestExpr::UnaryTest(_, w) => {
                let w = self.word(&w.value, depth)?;
                self.out.other_words.push(w);
                Ok(())
            }
            ast::ExtendedTestExpr::BinaryTest(_, a, b) => {
                for w in [a, b] {
                    let w = self.word(&w.value, depth)?;
                    self.out.other_words.push(w);
                }
                Ok(())
            }
        }
    }

    fn arith(&mut self, text: &str) -> Result<(), Refusal> {
        if text.contains("$(") || text.contains('`') {
            return Err(unparsable(
                "a command substitution inside an arithmetic expression is not checked; assign \
                 its output to a variable first",
            ));
        }
        Ok(())
    }

    fn compound(&mut self, cc: &ast::CompoundCommand, depth: usize) -> Result<(), Refusal> {
        match cc {
            ast::CompoundCommand::Arithmetic(a) => self.arith(&a.expr.value),
            ast::CompoundCommand::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arith(&e.value)?;
                }
                self.list(&f.body.list, depth)
            }
            ast::CompoundCommand::BraceGroup(b) => self.list(&b.list, depth),
            ast::CompoundCommand::Subshell(s) => self.list(&s.list, depth),
            ast::CompoundCommand::ForClause(f) => {
                for w in f.values.iter().flatten() {
                    let w = self.word(&w.value, depth)?;
                    self.out.other_words.push(w);
                }
                self.list(&f.body.list, depth)
            }
            ast::CompoundCommand::CaseClause(c) => {
                let w = self.word(&c.value.value, depth)?;
                self.out.other_words.push(w);
                for item in &c.cases {
                    for p in &item.patterns {
                        self.word(&p.value, depth)?;
                    }
                    if let Some(l) = &item.cmd {
                        self.list(l, depth)?;
                    }
                }
                Ok(())
            }
            ast::CompoundCommand::IfClause(i) => {
                self.list(&i.condition, depth)?;
                self.list(&i.then, depth)?;
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.list(c, depth)?;
                    }
                    self.list(&e.body, depth)?;
                }
                Ok(())
            }
            ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
                self.list(&w.0, depth)?;
                self.list(&w.1.list, depth)
            }
            ast::CompoundCommand::Coprocess(c) => self.command(&c.body, depth),
        }
    }

    fn redirect(&mut self, io: &ast::IoRedirect, depth: usize) -> Result<(), Refusal> {
        match io {
            ast::IoRedirect::File(_, kind, target) => {
                let writes = matches!(
                    kind,
                    ast::IoFileRedirectKind::Write
                        | ast::IoFileRedirectKind::Append
                        | ast::IoFileRedirectKind::ReadAndWrite
                        | ast::IoFileRedirectKind::Clobber
                );
                match target {
                    ast::IoFileRedirectTarget::Filename(w) => {
                        let w = self.word(&w.value, depth)?;
                        let sink = w.fixed().is_some_and(|v| DEV_SINKS.contains(&v));
                        let dup = matches!(
                            kind,
                            ast::IoFileRedirectKind::DuplicateOutput
                                | ast::IoFileRedirectKind::DuplicateInput
                        ) && w
                            .fixed()
                            .is_some_and(|v| v == "-" || v.chars().all(|c| c.is_ascii_digit()));
                        if (writes || matches!(kind, ast::IoFileRedirectKind::DuplicateOutput))
                            && !sink
                            && !dup
                        {
                            self.out.writes = true;
                        }
                        self.out.other_words.push(w);
                    }
                    ast::IoFileRedirectTarget::Fd(_) => {}
                    ast::IoFileRedirectTarget::ProcessSubstitution(_, sub) => {
                        self.list(&sub.list, depth)?;
                    }
                    ast::IoFileRedirectTarget::Duplicate(w) => {
                        let w = self.word(&w.value, depth)?;
                        let fd = w
                            .fixed()
                            .is_some_and(|v| v == "-" || v.chars().all(|c| c.is_ascii_digit()));
                        if !fd {
                            // `>&$x` or `>&file`: bash opens a file for writing.
                            self.out.writes = true;
                        }
                    }
                }
                Ok(())
            }
            ast::IoRedirect::HereDocument(_, hd) => {
                if hd.requires_expansion {
                    let pieces = parse_word(&hd.doc.value, true)?;
                    let mut scratch = self.blank(&hd.doc.value);
                    self.pieces(&pieces, false, &mut scratch, depth)?;
                }
                Ok(())
            }
            ast::IoRedirect::HereString(_, w) => {
                self.word(&w.value, depth)?;
                Ok(())
            }
            ast::IoRedirect::OutputAndError(w, _) => {
                let w = self.word(&w.value, depth)?;
                if !w.fixed().is_some_and(|v| DEV_SINKS.contains(&v)) {
                    self.out.writes = true;
                }
                Ok(())
            }
        }
    }

    fn simple(&mut self, sc: &ast::SimpleCommand, depth: usize) -> Result<(), Refusal> {
        let mut cmd = Cmd::default();
        // Substitutions inside the command's own words run before it; they are pushed first
        // by `word`, which is the order the shell runs them in.
        let mut items: Vec<&ast::CommandPrefixOrSuffixItem> = Vec::new();
        if let Some(p) = &sc.prefix {
            items.extend(p.0.iter());
        }
        let prefix_len = items.len();
        if let Some(s) = &sc.suffix {
            items.extend(s.0.iter());
        }
        let mut word_seen = false;
        for (i, item) in items.iter().enumerate() {
            if i == prefix_len {
                if let Some(w) = &sc.word_or_name {
                    let w = self.word(&w.value, depth)?;
                    cmd.words.push(w);
                    word_seen = true;
                }
            }
            match item {
                ast::CommandPrefixOrSuffixItem::IoRedirect(io) => self.redirect(io, depth)?,
                ast::CommandPrefixOrSuffixItem::Word(w) => {
                    let w = self.word(&w.value, depth)?;
                    cmd.words.push(w);
                }
                ast::CommandPrefixOrSuffixItem::AssignmentWord(a, w) => {
                    if i >= prefix_len {
                        // `export A=b`, `declare A=b`: an argument of the builtin.
                        let w = self.word(&w.value, depth)?;
                        cmd.words.push(w);
                        continue;
                    }
                    let name = match &a.name {
                        ast::AssignmentName::VariableName(n) => n.clone(),
                        ast::AssignmentName::ArrayElementName(n, idx) => {
                            self.arith(idx)?;
                            n.clone()
                        }
                    };
                    let value = match &a.value {
                        ast::AssignmentValue::Scalar(v) => self.word(&v.value, depth)?,
                        ast::AssignmentValue::Array(vs) => {
                            for (k, v) in vs {
                                if let Some(k) = k {
                                    self.word(&k.value, depth)?;
                                }
                                self.word(&v.value, depth)?;
                            }
                            let mut w = self.blank("(…)");
                            w.value = None;
                            w.view = "\0".into();
                            w
                        }
                    };
                    cmd.assigns.push((name, value));
                }
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => {
                    self.list(&sub.list, depth)?;
                    let mut w = self.blank("<(…)");
                    w.value = None;
                    w.view = "\0".into();
                    cmd.words.push(w);
                }
            }
        }
        if !word_seen {
            if let Some(w) = &sc.word_or_name {
                let w = self.word(&w.value, depth)?;
                cmd.words.insert(0, w);
            }
        }
        self.out.cmds.push(cmd);
        Ok(())
    }

    fn blank(&self, raw: &str) -> Word {
        Word {
            raw: raw.to_owned(),
            value: Some(String::new()),
            view: String::new(),
            plain: false,
            pattern: false,
        }
    }

    /// Converts a raw word, walking every command substitution inside it.
    fn word(&mut self, raw: &str, depth: usize) -> Result<Word, Refusal> {
        let pieces = parse_word(raw, false)?;
        let mut w = self.blank(raw);
        w.plain = matches!(pieces.as_slice(), [p] if matches!(p.piece, WordPiece::Text(_)));
        self.pieces(&pieces, false, &mut w, depth)?;
        Ok(w)
    }

    fn pieces(
        &mut self,
        pieces: &[WordPieceWithSource],
        quoted: bool,
        w: &mut Word,
        depth: usize,
    ) -> Result<(), Refusal> {
        for p in pieces {
            match &p.piece {
                WordPiece::Text(s) => {
                    if !quoted && is_pattern(s) {
                        w.pattern = true;
                    }
                    push(w, s);
                }
                WordPiece::SingleQuotedText(s) => push(w, s),
                WordPiece::AnsiCQuotedText(s) => {
                    w.value = None;
                    w.view.push_str(s);
                }
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(inner, true, w, depth)?;
                }
                WordPiece::TildeExpansion(TildeExpr::Home) => {
                    let home = self.home.to_string_lossy().into_owned();
                    push(w, &home);
                }
                WordPiece::TildeExpansion(_) => {
                    w.value = None;
                    w.view.push('\0');
                }
                WordPiece::ParameterExpansion(expr) => {
                    let text = format!("{expr:?}");
                    if text.contains("$(") || text.contains('`') {
                        return Err(unparsable(
                            "a command substitution inside ${…} is not checked; assign its \
                             output to a variable first",
                        ));
                    }
                    w.value = None;
                    let is_home = matches!(
                        expr,
                        word::ParameterExpr::Parameter {
                            parameter: word::Parameter::Named(n),
                            indirect: false,
                        } if n == "HOME"
                    );
                    if is_home {
                        w.view.push_str(&self.home.to_string_lossy());
                    } else {
                        w.view.push('\0');
                    }
                }
                WordPiece::CommandSubstitution(s) => {
                    w.value = None;
                    w.view.push('\0');
                    self.source(s, depth + 1)?;
                }
                WordPiece::BackquotedCommandSubstitution(s) => {
                    w.value = None;
                    w.view.push('\0');
                    self.source(&unescape_backquoted(s), depth + 1)?;
                }
                WordPiece::EscapeSequence(s) => {
                    let rest = s.strip_prefix('\\').unwrap_or(s);
                    if rest != "\n" {
                        push(w, rest);
                    }
                }
                WordPiece::ArithmeticExpression(e) => {
                    self.arith(&e.value)?;
                    w.value = None;
                    w.view.push('\0');
                }
            }
        }
        Ok(())
    }
}

fn push(w: &mut Word, s: &str) {
    if let Some(v) = &mut w.value {
        v.push_str(s);
    }
    w.view.push_str(s);
}

/// Unquoted text the shell would expand into other words: a glob (`*`, `?`, `[`), an extended
/// glob (`(`), or a brace expansion (`{a,b}`, `{1..3}`; a lone `{}` is literal in bash).
fn is_pattern(s: &str) -> bool {
    if s.contains(['*', '?', '[', '(']) {
        return true;
    }
    match (s.find('{'), s.rfind('}')) {
        (Some(open), Some(close)) if open < close => {
            let inner = &s[open + 1..close];
            inner.contains(',') || inner.contains("..")
        }
        _ => false,
    }
}
