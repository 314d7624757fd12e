//! `(regex #"…")` patterns: a deliberately small POSIX-ERE subset with its own matcher.
//!
//! Seatbelt compiles `regex` filters with Apple's AppleMatch engine, whose exact dialect is not
//! documented. Rather than pretend a full regex engine agrees with it, this module accepts only
//! the constructs every POSIX ERE engine reads the same way, and rejects the rest with a message:
//! literals, `.`, bracket classes with ranges (`[gG]`, `[^/]`, `[a-z]`), groups, `|`, `*`, `+`,
//! `?`, the anchors `^` and `$`, and `\` followed by a punctuation character.
//! Rejected: `{m,n}` intervals, `\d`-style letter escapes, `[:alpha:]` classes, a backslash inside
//! a bracket (literal in POSIX, an escape elsewhere), empty alternatives, control characters, and
//! `"` (the renderer writes patterns as `#"…"` raw strings, which cannot contain a quote).
//!
//! Matching is a Pike VM (Thompson NFA simulation): linear in pattern × path, so a hostile
//! pattern cannot make the evaluator hang. Search is unanchored, as in SBPL, unless `^`/`$` say
//! otherwise.

use std::fmt;

/// A validated `regex` filter pattern. Equality is by source text.
#[derive(Clone)]
pub struct Pattern {
    source: String,
    program: Vec<Inst>,
}

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatternError {
    /// The construct at `offset` is outside the supported subset.
    #[error(
        "regex: {what} at byte {offset} is not supported; use literals, `.`, `[…]` classes, groups, `|`, `*`, `+`, `?`, `^`, `$` and `\\` before punctuation only"
    )]
    Unsupported {
        /// What was found.
        what: &'static str,
        /// Byte offset in the pattern.
        offset: usize,
    },
    /// The pattern is malformed (unbalanced group or bracket, dangling operator).
    #[error("regex: {what} at byte {offset}; fix the pattern")]
    Malformed {
        /// What is wrong.
        what: &'static str,
        /// Byte offset in the pattern.
        offset: usize,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Inst {
    Char(char),
    Any,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Split(usize, usize),
    Jmp(usize),
    AssertStart,
    AssertEnd,
    Match,
}

#[derive(Debug)]
enum Node {
    Char(char),
    Any,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Start,
    End,
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Star(Box<Node>),
    Plus(Box<Node>),
    Opt(Box<Node>),
}

/// Groups nest at most this deep, so parsing hostile input cannot overflow the stack.
const MAX_DEPTH: usize = 32;

impl Pattern {
    /// Validates `source` against the supported subset and compiles it.
    pub fn new(source: &str) -> Result<Pattern, PatternError> {
        let mut parser = ReParser {
            chars: source.char_indices().collect(),
            pos: 0,
            depth: 0,
        };
        let node = parser.alt()?;
        if let Some(&(offset, _)) = parser.chars.get(parser.pos) {
            return Err(PatternError::Malformed {
                what: "unbalanced `)`",
                offset,
            });
        }
        let mut program = Vec::new();
        compile(&node, &mut program);
        program.push(Inst::Match);
        Ok(Pattern {
            source: source.to_owned(),
            program,
        })
    }

    /// The pattern text as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the pattern matches anywhere in `text` (unanchored search, like SBPL).
    pub fn is_match(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        let n = self.program.len();
        let mut current: Vec<usize> = Vec::new();
        let mut next: Vec<usize> = Vec::new();
        let mut seen = vec![usize::MAX; n];
        for i in 0..=chars.len() {
            // A new thread starts at every position: unanchored search.
            self.add(&mut current, &mut seen, 0, i, chars.len());
            let mut k = 0;
            while k < current.len() {
                let pc = current[k];
                k += 1;
                let Some(&c) = chars.get(i) else {
                    if self.program[pc] == Inst::Match {
                        return true;
                    }
                    continue;
                };
                let step = match &self.program[pc] {
                    Inst::Match => return true,
                    Inst::Char(x) => *x == c,
                    Inst::Any => true,
                    Inst::Class { negated, ranges } => {
                        ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
                    }
                    _ => false,
                };
                if step {
                    self.add(&mut next, &mut seen, pc + 1, i + 1, chars.len());
                }
            }
            std::mem::swap(&mut current, &mut next);
            next.clear();
        }
        false
    }

    /// Follows epsilon edges from `pc` at text position `at`, adding consuming states to `list`.
    /// `seen[pc] == at` marks states already visited at this position (breaks `(a*)*` loops).
    fn add(&self, list: &mut Vec<usize>, seen: &mut [usize], pc: usize, at: usize, len: usize) {
        let mut stack = vec![pc];
        while let Some(pc) = stack.pop() {
            if seen[pc] == at {
                continue;
            }
            seen[pc] = at;
            match self.program[pc] {
                Inst::Jmp(t) => stack.push(t),
                Inst::Split(a, b) => {
                    stack.push(b);
                    stack.push(a);
                }
                Inst::AssertStart => {
                    if at == 0 {
                        stack.push(pc + 1);
                    }
                }
                Inst::AssertEnd => {
                    if at == len {
                        stack.push(pc + 1);
                    }
                }
                _ => list.push(pc),
            }
        }
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.source == other.source
    }
}

impl Eq for Pattern {}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pattern({:?})", self.source)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

struct ReParser {
    chars: Vec<(usize, char)>,
    pos: usize,
    depth: usize,
}

impl ReParser {
    fn peek(&self) -> Option<(usize, char)> {
        self.chars.get(self.pos).copied()
    }

    fn offset(&self) -> usize {
        self.peek().map_or_else(
            || self.chars.last().map_or(0, |&(o, c)| o + c.len_utf8()),
            |(o, _)| o,
        )
    }

    fn alt(&mut self) -> Result<Node, PatternError> {
        let mut branches = vec![self.concat()?];
        while let Some((_, '|')) = self.peek() {
            self.pos += 1;
            branches.push(self.concat()?);
        }
        Ok(if branches.len() == 1 {
            branches.remove(0)
        } else {
            Node::Alt(branches)
        })
    }

    fn concat(&mut self) -> Result<Node, PatternError> {
        let mut items = Vec::new();
        while let Some((_, c)) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            items.push(self.repeat()?);
        }
        if items.is_empty() {
            return Err(PatternError::Unsupported {
                what: "an empty alternative",
                offset: self.offset(),
            });
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Node::Concat(items)
        })
    }

    fn repeat(&mut self) -> Result<Node, PatternError> {
        let mut node = self.atom()?;
        while let Some((_, c)) = self.peek() {
            node = match c {
                '*' => Node::Star(Box::new(node)),
                '+' => Node::Plus(Box::new(node)),
                '?' => Node::Opt(Box::new(node)),
                _ => break,
            };
            self.pos += 1;
        }
        Ok(node)
    }

    fn atom(&mut self) -> Result<Node, PatternError> {
        let Some((offset, c)) = self.peek() else {
            return Err(PatternError::Malformed {
                what: "unexpected end",
                offset: self.offset(),
            });
        };
        self.pos += 1;
        match c {
            '(' => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return Err(PatternError::Unsupported {
                        what: "groups nested too deeply",
                        offset,
                    });
                }
                let inner = self.alt()?;
                self.depth -= 1;
                match self.peek() {
                    Some((_, ')')) => {
                        self.pos += 1;
                        Ok(inner)
                    }
                    _ => Err(PatternError::Malformed {
                        what: "unclosed `(`",
                        offset,
                    }),
                }
            }
            '[' => self.class(offset),
            '.' => Ok(Node::Any),
            '^' => Ok(Node::Start),
            '$' => Ok(Node::End),
            '*' | '+' | '?' => Err(PatternError::Malformed {
                what: "a repetition with nothing to repeat",
                offset,
            }),
            '{' | '}' => Err(PatternError::Unsupported {
                what: "an interval `{m,n}`",
                offset,
            }),
            ']' => Err(PatternError::Malformed {
                what: "an unopened `]`",
                offset,
            }),
            '\\' => match self.peek() {
                Some((_, e)) if e.is_ascii_punctuation() && e != '"' => {
                    self.pos += 1;
                    Ok(Node::Char(e))
                }
                Some(_) => Err(PatternError::Unsupported {
                    what: "a letter, digit or non-ASCII escape",
                    offset,
                }),
                None => Err(PatternError::Malformed {
                    what: "a trailing `\\`",
                    offset,
                }),
            },
            c => literal(c, offset).map(Node::Char),
        }
    }

    fn class(&mut self, open: usize) -> Result<Node, PatternError> {
        let mut negated = false;
        if let Some((_, '^')) = self.peek() {
            negated = true;
            self.pos += 1;
        }
        let mut ranges = Vec::new();
        let mut first = true;
        loop {
            let Some((offset, c)) = self.peek() else {
                return Err(PatternError::Malformed {
                    what: "unclosed `[`",
                    offset: open,
                });
            };
            self.pos += 1;
            if c == ']' && !first {
                break;
            }
            first = false;
            if c == '\\' || c == '[' {
                return Err(PatternError::Unsupported {
                    what: "`\\` or `[` inside a bracket (dialects disagree)",
                    offset,
                });
            }
            let lo = literal(c, offset)?;
            let mut hi = lo;
            if let (Some((_, '-')), Some(&(ro, r))) = (self.peek(), self.chars.get(self.pos + 1)) {
                if r != ']' {
                    self.pos += 2;
                    hi = literal(r, ro)?;
                    if hi < lo {
                        return Err(PatternError::Malformed {
                            what: "a reversed range",
                            offset,
                        });
                    }
                }
            }
            ranges.push((lo, hi));
        }
        Ok(Node::Class { negated, ranges })
    }
}

fn literal(c: char, offset: usize) -> Result<char, PatternError> {
    if c.is_control() {
        Err(PatternError::Unsupported {
            what: "a control character",
            offset,
        })
    } else if c == '"' {
        Err(PatternError::Unsupported {
            what: "a `\"` (raw `#\"…\"` strings cannot hold one)",
            offset,
        })
    } else {
        Ok(c)
    }
}

fn compile(node: &Node, out: &mut Vec<Inst>) {
    match node {
        Node::Char(c) => out.push(Inst::Char(*c)),
        Node::Any => out.push(Inst::Any),
        Node::Class { negated, ranges } => out.push(Inst::Class {
            negated: *negated,
            ranges: ranges.clone(),
        }),
        Node::Start => out.push(Inst::AssertStart),
        Node::End => out.push(Inst::AssertEnd),
        Node::Concat(items) => items.iter().for_each(|n| compile(n, out)),
        Node::Alt(branches) => {
            // split L1, next; L1: a; jmp end; next: split L2, ...
            let mut jumps = Vec::new();
            for (i, branch) in branches.iter().enumerate() {
                if i + 1 < branches.len() {
                    let split = out.len();
                    out.push(Inst::Split(split + 1, 0));
                    compile(branch, out);
                    jumps.push(out.len());
                    out.push(Inst::Jmp(0));
                    let after = out.len();
                    out[split] = Inst::Split(split + 1, after);
                } else {
                    compile(branch, out);
                }
            }
            let end = out.len();
            for j in jumps {
                out[j] = Inst::Jmp(end);
            }
        }
        Node::Star(inner) => {
            let split = out.len();
            out.push(Inst::Split(split + 1, 0));
            compile(inner, out);
            out.push(Inst::Jmp(split));
            let after = out.len();
            out[split] = Inst::Split(split + 1, after);
        }
        Node::Plus(inner) => {
            let start = out.len();
            compile(inner, out);
            out.push(Inst::Split(start, out.len() + 1));
        }
        Node::Opt(inner) => {
            let split = out.len();
            out.push(Inst::Split(split + 1, 0));
            compile(inner, out);
            let after = out.len();
            out[split] = Inst::Split(split + 1, after);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pattern: &str, text: &str, expect: bool) {
        let p = Pattern::new(pattern).unwrap();
        assert_eq!(p.is_match(text), expect, "{pattern:?} on {text:?}");
    }

    #[test]
    fn git_component_pattern_matches_any_letter_case_only_as_a_component() {
        let git = r"/\.[Gg][Ii][Tt](/|$)";
        check(git, "/m/.git", true);
        check(git, "/m/.GIT/config", true);
        check(git, "/m/sub/.gIt/HEAD", true);
        check(git, "/m/.github/x", false);
        check(git, "/m/a.git", false);
        check(git, "/m/.gitignore", false);
    }

    #[test]
    fn search_is_unanchored_unless_anchors_say_otherwise() {
        check("b", "abc", true);
        check("^b", "abc", false);
        check("^a", "abc", true);
        check("c$", "abc", true);
        check("b$", "abc", false);
        check("^$", "", true);
    }

    #[test]
    fn repetition_classes_and_alternation_follow_posix() {
        check("^/a(b|cd)*e$", "/acdbcde", true);
        check("^/a(b|cd)*e$", "/ace", false);
        check("^x+$", "", false);
        check("^x+$", "xxx", true);
        check("^ab?c$", "ac", true);
        check("^[^/]+$", "a/b", false);
        check("^[a-c]+$", "abcab", true);
        check("^[]a]$", "]", true);
        check("^a.c$", "a/c", true);
        check(r"^a\.c$", "abc", false);
        check("^(a*)*$", "aaaa", true);
        check("^(a*)*b$", &"a".repeat(200), false);
    }

    #[test]
    fn constructs_outside_the_subset_are_refused_with_a_reason() {
        for bad in [
            r"\d",
            "a{2}",
            "[[:alpha:]]",
            r"[\]]",
            "a|",
            "(a",
            "a)",
            "*a",
            "\"",
            "a\nb",
            "[z-a]",
            "[a",
            r"a\",
        ] {
            assert!(Pattern::new(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
