//! What a confirmation shows (TRUST-4): the one text of "what a yes grants", which every
//! channel — the terminal, MCP elicitation, `agent-exec check` — shows as it is.
//!
//! **Owns:** the [`Granted`] of a call (each simple command, every write path, the network,
//! leaving the sandbox, the trash, git files kept), their text, the escaping of the agent's
//! text, and the bounds: a long fragment shows head and tail, a call too long to show is not
//! asked ([`TooLong`]). **Refuses to know:** which gate applies (module `run`), and how the
//! text reaches the user (the host's `Asker`).
//!
//! **Escaping.** Every piece of the agent's text (an argv, a script's command, a path, a git
//! setting) is shown inside a markdown code span, so a client that renders markdown renders
//! none of it; outside the spans is only this module's own text. Inside, each character that
//! could hide, move or forge text is an escape: `\\` for a backslash, `\n`, `\t`, `\r`, `\x1b`
//! for the other C0 controls and DEL, `\u{..}` for a backtick (it would end the span), every
//! character `char::escape_debug` escapes (C1 controls, Unicode format characters such as bidi
//! overrides and isolates, zero-width characters, the BOM and the soft hyphen, line and
//! paragraph separators, every space but U+0020, combining marks, private use, unassigned code
//! points, noncharacters), the filler characters Unicode draws as blanks (U+115F, U+1160,
//! U+3164, U+FFA0, U+2800) and the right-to-left scripts, so nothing reorders a line. A run of
//! three or more spaces, tabs or newlines collapses into one marker (`\[40 spaces]`), so
//! nothing is pushed out of view. A backslash is always one of these escapes: the agent cannot
//! write one that looks like ours.
//!
//! **Bounds.** A fragment longer than [`FRAGMENT_CHARS`] shows its first [`HEAD_CHARS`] and
//! last [`TAIL_CHARS`] characters (escapes count as written), with the number of characters
//! left out between them, outside the code spans. A call whose argv (with its `write_paths`)
//! holds more than [`MAX_ASKED_CHARS`] characters, or whose text would be longer than
//! [`MAX_TEXT_CHARS`], is not asked: a person cannot review that in a dialog, and a file in the
//! working directory can be read before saying yes.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A fragment of the agent's text longer than this (escaped) shows head and tail.
pub const FRAGMENT_CHARS: usize = 200;
/// The escaped characters shown before the elision marker.
pub const HEAD_CHARS: usize = 120;
/// The escaped characters shown after the elision marker.
pub const TAIL_CHARS: usize = 60;
/// An argv (with its `write_paths`) longer than this, in characters, is never asked.
pub const MAX_ASKED_CHARS: usize = 16 * 1024;
/// A confirmation text longer than this, in characters, is never asked.
pub const MAX_TEXT_CHARS: usize = 8 * 1024;

/// What a yes allows, in the order a confirmation lists it (TRUST-4).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Granted {
    items: Vec<Grant>,
    /// Characters of the agent's text the grants hold (argv, paths, settings).
    agent_chars: usize,
}

/// One thing a yes allows.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Grant {
    /// Runs `argv`, where `place` says; `scripts` are its `sh -c` scripts with the simple
    /// commands the policy checked in each.
    Run {
        /// The program and its arguments, as the call gave them.
        argv: Vec<String>,
        /// The scripts in it (argv-policy's parse).
        scripts: Vec<argv_policy::ShownScript>,
        /// Inside the sandbox or outside it.
        place: Place,
    },
    /// Makes `path` writable for the call (RC-10).
    Write(PathBuf),
    /// Lets the command reach the network (RC-7, NET-3).
    Network(Network),
    /// Moves these paths to the trash (RC-4).
    Trash(Vec<PathBuf>),
    /// Keeps a file the command wrote that host programs run (TRUST-2).
    Keep(PathBuf),
    /// Sets a git setting the allowlist refused (TRUST-1): the file and `key=value`.
    GitSetting {
        /// The git config file.
        file: PathBuf,
        /// The setting as git would store it.
        setting: String,
    },
}

/// Where a command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// In the sandbox.
    Sandbox,
    /// As root, outside the sandbox (`sudo`, RC-11).
    Root,
    /// With the user's full rights, outside the sandbox (`sandbox: false`, RC-12).
    Unsandboxed,
}

/// What `network` grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// Every host on the internet.
    Internet,
    /// Only these domains (NET-3's `allowed_domains`).
    Domains(Vec<String>),
}

/// A call too long to show: it is not asked, so it does not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLong {
    /// How many characters it holds (of the agent's text, or of the whole confirmation).
    pub chars: usize,
    /// The bound it passed.
    pub max: usize,
}

impl Granted {
    /// No grants yet.
    pub fn new() -> Granted {
        Granted::default()
    }

    /// Adds `grant`.
    #[must_use]
    pub fn with(mut self, grant: Grant) -> Granted {
        self.agent_chars += match &grant {
            Grant::Run { argv, .. } => argv.iter().map(|a| a.chars().count()).sum(),
            Grant::Write(p) | Grant::Keep(p) => path_chars(p),
            Grant::Network(Network::Internet) => 0,
            Grant::Network(Network::Domains(d)) => d.iter().map(|d| d.chars().count()).sum(),
            Grant::Trash(paths) => paths.iter().map(|p| path_chars(p)).sum(),
            Grant::GitSetting { file, setting } => path_chars(file) + setting.chars().count(),
        };
        self.items.push(grant);
        self
    }

    /// The grants, in order.
    pub fn items(&self) -> &[Grant] {
        &self.items
    }

    /// The confirmation's text: `reason`, then one line per grant (a script's commands
    /// indented below it). The text never holds a control, format or separator character.
    ///
    /// # Errors
    /// [`TooLong`] past [`MAX_ASKED_CHARS`] of the agent's text or [`MAX_TEXT_CHARS`] of text.
    pub fn text(&self, reason: &str) -> Result<String, TooLong> {
        if self.agent_chars > MAX_ASKED_CHARS {
            return Err(TooLong {
                chars: self.agent_chars,
                max: MAX_ASKED_CHARS,
            });
        }
        let mut out = escape(reason, Quote::Plain);
        out.push_str("\nA yes allows:");
        for g in &self.items {
            out.push_str("\n- ");
            grant_text(g, &mut out);
        }
        let chars = out.chars().count();
        if chars > MAX_TEXT_CHARS {
            return Err(TooLong {
                chars,
                max: MAX_TEXT_CHARS,
            });
        }
        Ok(out)
    }
}

fn path_chars(p: &Path) -> usize {
    p.to_string_lossy().chars().count()
}

fn grant_text(g: &Grant, out: &mut String) {
    match g {
        Grant::Run {
            argv,
            scripts,
            place,
        } => {
            out.push_str("run ");
            out.push_str(&code(&argv_policy::display_argv(argv)));
            out.push_str(match place {
                Place::Sandbox => " in the sandbox",
                Place::Root => {
                    " as root, outside the sandbox (sudo): nothing confines it, and it runs \
                     files the agent changed this session with root's rights"
                }
                Place::Unsandboxed => {
                    " outside the sandbox with your full rights (sandbox: false): nothing \
                     confines it, and it runs files the agent changed this session as you"
                }
            });
            for s in scripts {
                out.push_str("\n  the script runs each of:");
                // The script's words as written (quotes and all), not quoted again.
                for c in &s.commands {
                    out.push_str("\n  - ");
                    out.push_str(&code(&c.join(" ")));
                }
                if s.writes {
                    out.push_str("\n  - and writes files through redirections");
                }
            }
        }
        Grant::Write(p) => {
            out.push_str("write to ");
            out.push_str(&code(&p.to_string_lossy()));
            out.push_str(" during this call");
        }
        Grant::Network(Network::Internet) => out.push_str(
            "network: the command can reach any host on the internet and send it anything it \
             can read",
        ),
        Grant::Network(Network::Domains(domains)) => {
            out.push_str("network to ");
            let shown: Vec<String> = domains.iter().map(|d| code(d)).collect();
            out.push_str(&shown.join(", "));
            out.push_str(": the command can send what it can read to the allowed domains");
        }
        Grant::Trash(paths) => {
            out.push_str("move to the trash: ");
            let shown: Vec<String> = paths.iter().map(|p| code(&p.to_string_lossy())).collect();
            out.push_str(&shown.join(", "));
        }
        Grant::Keep(p) => {
            out.push_str("keep ");
            out.push_str(&code(&p.to_string_lossy()));
            out.push_str(", which the command wrote and other programs run");
        }
        Grant::GitSetting { file, setting } => {
            out.push_str("set ");
            out.push_str(&code(setting));
            out.push_str(" in ");
            out.push_str(&code(&file.to_string_lossy()));
        }
    }
}

/// `text` on one line, escaped, elided past [`FRAGMENT_CHARS`], without code spans: for a
/// label or a message that quotes the agent's text.
pub fn one_line(text: &str) -> String {
    let tokens = tokens(text, Quote::Plain);
    match elide(&tokens) {
        Shown::Whole(s) => s,
        Shown::Elided {
            head,
            left_out,
            tail,
        } => {
            format!("{head} …[{left_out} characters left out]… {tail}")
        }
    }
}

/// `text` escaped in a code span, or head and tail in two spans with the elision between.
fn code(text: &str) -> String {
    if text.is_empty() {
        return "(empty)".to_owned();
    }
    let tokens = tokens(text, Quote::Code);
    match elide(&tokens) {
        Shown::Whole(s) => format!("`{s}`"),
        Shown::Elided {
            head,
            left_out,
            tail,
        } => {
            format!("`{head}` …[{left_out} characters left out]… `{tail}`")
        }
    }
}

enum Shown {
    Whole(String),
    Elided {
        head: String,
        left_out: usize,
        tail: String,
    },
}

/// One shown token: its escaped text and how many characters of the input it stands for.
struct Token {
    text: String,
    chars: usize,
}

fn elide(tokens: &[Token]) -> Shown {
    let total: usize = tokens.iter().map(|t| t.text.chars().count()).sum();
    if total <= FRAGMENT_CHARS {
        return Shown::Whole(tokens.iter().map(|t| t.text.as_str()).collect());
    }
    let mut head_len = 0;
    let mut head_end = 0;
    for t in tokens {
        let n = t.text.chars().count();
        if head_len + n > HEAD_CHARS {
            break;
        }
        head_len += n;
        head_end += 1;
    }
    let mut tail_len = 0;
    let mut tail_start = tokens.len();
    for t in tokens[head_end..].iter().rev() {
        let n = t.text.chars().count();
        if tail_len + n > TAIL_CHARS {
            break;
        }
        tail_len += n;
        tail_start -= 1;
    }
    let join = |ts: &[Token]| ts.iter().map(|t| t.text.as_str()).collect::<String>();
    Shown::Elided {
        head: join(&tokens[..head_end]),
        left_out: tokens[head_end..tail_start].iter().map(|t| t.chars).sum(),
        tail: join(&tokens[tail_start..]),
    }
}

/// Whether the text goes in a code span (a backtick is then escaped too).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    Plain,
    Code,
}

/// The agent's `text` escaped (module docs).
fn escape(text: &str, quote: Quote) -> String {
    tokens(text, quote).into_iter().map(|t| t.text).collect()
}

fn tokens(text: &str, quote: Quote) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let run = chars[i..].iter().take_while(|&&d| d == c).count();
        let name = match c {
            ' ' => Some("spaces"),
            '\t' => Some("tabs"),
            '\n' => Some("newlines"),
            _ => None,
        };
        if let Some(name) = name.filter(|_| run >= 3) {
            out.push(Token {
                text: format!("\\[{run} {name}]"),
                chars: run,
            });
            i += run;
            continue;
        }
        let mut t = String::new();
        escape_char(c, quote, &mut t);
        out.push(Token { text: t, chars: 1 });
        i += 1;
    }
    out
}

fn escape_char(c: char, quote: Quote, out: &mut String) {
    match c {
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        '`' if quote == Quote::Code => out.push_str("\\u{60}"),
        c if c.is_ascii_control() => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        c if hidden(c) => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
        c => out.push(c),
    }
}

/// Characters drawn as blanks or that change how a line reads, beyond what
/// `char::escape_debug` escapes: the Hangul fillers, the braille blank, and the right-to-left
/// scripts (Hebrew, Arabic, Syriac, Thaana, N'Ko … and their presentation forms).
const ALSO_HIDDEN: &[(u32, u32)] = &[
    (0x0590, 0x08FF),
    (0x115F, 0x1160),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFB1D, 0xFDFF),
    (0xFE70, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0x10800, 0x10FFF),
    (0x1E800, 0x1EFFF),
];

/// True when `c` is shown as an escape (module docs). `escape_debug` escapes what Rust's
/// Unicode tables call not printable (controls, format, separators, spaces but U+0020,
/// private use, unassigned, noncharacters) and combining marks.
fn hidden(c: char) -> bool {
    let mut e = c.escape_debug();
    let plain = e.next() == Some(c) && e.next().is_none();
    let quote = matches!(c, '\'' | '"');
    (!plain && !quote)
        || ALSO_HIDDEN
            .iter()
            .any(|&(lo, hi)| (lo..=hi).contains(&u32::from(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(argv: &[&str]) -> Granted {
        let argv: Vec<String> = argv.iter().map(|a| (*a).to_owned()).collect();
        let scripts = argv_policy::shown_scripts(&argv, Path::new("/home/u"));
        Granted::new().with(Grant::Run {
            argv,
            scripts,
            place: Place::Sandbox,
        })
    }

    /// The rendering of `argv` run in the sandbox, without the reason line.
    fn check(argv: &[&str], expect: &str) {
        let text = run(argv).text("why").unwrap();
        let got = text.strip_prefix("why\nA yes allows:\n").unwrap();
        assert_eq!(got, expect);
    }

    #[test]
    fn trust_4_a_newline_in_an_argument_cannot_start_a_forged_line() {
        check(
            &["echo", "x\nRun `ls`? (read-only)"],
            r"- run `echo 'x\nRun \u{60}ls\u{60}? (read-only)'` in the sandbox",
        );
    }

    #[test]
    fn trust_4_esc_and_csi_sequences_are_shown_not_sent() {
        check(
            &["printf", "\u{1b}[2J\u{1b}]0;title\u{7}\u{9b}31m\u{7f}"],
            r"- run `printf '\x1b[2J\x1b]0;title\x07\u{9b}31m\x7f'` in the sandbox",
        );
    }

    #[test]
    fn trust_4_bidi_overrides_and_isolates_are_escaped() {
        check(
            &["ls", "\u{202e}txt.exe\u{202c}", "\u{2066}a\u{2069}"],
            r"- run `ls '\u{202e}txt.exe\u{202c}' '\u{2066}a\u{2069}'` in the sandbox",
        );
    }

    #[test]
    fn trust_4_zero_width_and_invisible_characters_are_escaped() {
        check(
            &[
                "cat",
                "a\u{200b}b\u{200d}c\u{feff}d\u{ad}e\u{34f}f\u{115f}\u{3164}\u{2800}\u{180e}\u{fe0f}\u{e0041}\u{a0}",
            ],
            r"- run `cat 'a\u{200b}b\u{200d}c\u{feff}d\u{ad}e\u{34f}f\u{115f}\u{3164}\u{2800}\u{180e}\u{fe0f}\u{e0041}\u{a0}'` in the sandbox",
        );
    }

    #[test]
    fn trust_4_line_and_paragraph_separators_are_escaped() {
        check(
            &["echo", "a\u{2028}b\u{2029}c\u{85}d"],
            r"- run `echo 'a\u{2028}b\u{2029}c\u{85}d'` in the sandbox",
        );
    }

    #[test]
    fn trust_4_right_to_left_letters_are_escaped_so_nothing_reorders() {
        check(
            &["touch", "\u{5d0}\u{627}.txt"],
            r"- run `touch '\u{5d0}\u{627}.txt'` in the sandbox",
        );
    }

    #[test]
    fn trust_4_runs_of_whitespace_collapse_into_one_marker() {
        let spaces = " ".repeat(500);
        let newlines = "\n".repeat(40);
        check(
            &["echo", &format!("a{spaces}b{newlines}c\t\t\td  e")],
            r"- run `echo 'a\[500 spaces]b\[40 newlines]c\[3 tabs]d  e'` in the sandbox",
        );
    }

    #[test]
    fn trust_4_a_backslash_of_the_agent_cannot_forge_an_escape() {
        check(
            &["echo", r"\[3 spaces]\u{202e}"],
            r"- run `echo '\\[3 spaces]\\u{202e}'` in the sandbox",
        );
    }

    #[test]
    fn trust_4_a_long_argv_shows_head_and_tail_with_what_was_left_out() {
        let long = format!("{}{}{}", "h".repeat(150), "m".repeat(1000), "t".repeat(100));
        let head = format!("python3 -c {}", "h".repeat(109));
        check(
            &["python3", "-c", &long],
            &format!(
                "- run `{head}` …[1081 characters left out]… `{}` in the sandbox",
                "t".repeat(60)
            ),
        );
    }

    #[test]
    fn trust_4_the_elision_never_cuts_an_escape_in_two() {
        let rlo = r"\u{202e}";
        assert_eq!(
            one_line(&"\u{202e}".repeat(300)),
            format!(
                "{} …[278 characters left out]… {}",
                rlo.repeat(15),
                rlo.repeat(7)
            )
        );
    }

    #[test]
    fn trust_4_an_argv_too_long_to_show_is_not_asked() {
        let huge = "x".repeat(MAX_ASKED_CHARS);
        assert_eq!(
            run(&["echo", &huge]).text("why"),
            Err(TooLong {
                chars: MAX_ASKED_CHARS + 4,
                max: MAX_ASKED_CHARS
            })
        );
        // Many short lines are as long to read as one long one.
        let many: Vec<String> = (0..400)
            .map(|i| format!("file{i:04}-{}", "y".repeat(30)))
            .collect();
        let mut argv = vec!["touch"];
        argv.extend(many.iter().map(String::as_str));
        let mut grants = Granted::new();
        for a in &argv[1..] {
            grants = grants.with(Grant::Write(PathBuf::from(a)));
        }
        assert!(matches!(
            grants.text("why"),
            Err(TooLong {
                max: MAX_TEXT_CHARS,
                ..
            })
        ));
    }

    #[test]
    fn trust_4_each_command_of_a_script_is_listed() {
        check(
            &[
                "sh",
                "-c",
                "ls | wc -l > n.txt; A=1 curl -s x.example $(id -u)",
            ],
            "- run `sh -c 'ls | wc -l > n.txt; A=1 curl -s x.example $(id -u)'` in the sandbox\
             \n  the script runs each of:\
             \n  - `ls`\
             \n  - `wc -l`\
             \n  - `id -u`\
             \n  - `A=1 curl -s x.example $(id -u)`\
             \n  - and writes files through redirections",
        );
    }

    #[test]
    fn trust_4_write_paths_network_and_leaving_the_sandbox_are_named() {
        let grants = Granted::new()
            .with(Grant::Run {
                argv: vec!["sh".into(), "wp.sh".into()],
                scripts: Vec::new(),
                place: Place::Unsandboxed,
            })
            .with(Grant::Write(PathBuf::from("/home/u/.local/bin")))
            .with(Grant::Network(Network::Internet));
        assert_eq!(
            grants
                .text("sandbox: false runs it with your full rights")
                .unwrap(),
            "sandbox: false runs it with your full rights\
             \nA yes allows:\
             \n- run `sh wp.sh` outside the sandbox with your full rights (sandbox: false): \
             nothing confines it, and it runs files the agent changed this session as you\
             \n- write to `/home/u/.local/bin` during this call\
             \n- network: the command can reach any host on the internet and send it anything \
             it can read"
        );
        let allowlist = Granted::new().with(Grant::Network(Network::Domains(vec![
            "crates.io".into(),
            "evil`.example".into(),
        ])));
        assert_eq!(
            allowlist.text("r").unwrap(),
            "r\nA yes allows:\n- network to `crates.io`, `evil\\u{60}.example`: the command can \
             send what it can read to the allowed domains"
        );
    }

    #[test]
    fn trust_4_sudo_says_root_and_files_the_agent_changed() {
        let text = Granted::new()
            .with(Grant::Run {
                argv: vec!["apt-get".into(), "install".into(), "jq".into()],
                scripts: Vec::new(),
                place: Place::Root,
            })
            .text("r")
            .unwrap();
        assert!(text.contains("- run `apt-get install jq` as root, outside the sandbox"));
        assert!(text.contains("files the agent changed this session"));
    }

    #[test]
    fn one_line_labels_are_escaped_without_code_spans() {
        assert_eq!(one_line("sudo: ls\n`x`\u{202e}"), "sudo: ls\\n`x`\\u{202e}");
    }

    /// What must never reach a channel: controls, format characters, separators, other
    /// spaces, combining and invisible characters (std's `escape_debug` table, independent of
    /// this module's own list), and the fillers.
    fn forbidden(c: char) -> bool {
        let shown = format!("{:?}", format!("a{c}"));
        let plain = shown == format!("\"a{c}\"") || matches!(c, '"' | '\\');
        !plain
            || matches!(
                c,
                '\u{115f}' | '\u{1160}' | '\u{3164}' | '\u{ffa0}' | '\u{2800}'
            )
    }

    proptest::proptest! {
        /// TRUST-4: whatever the agent sends, the text holds no control, format, separator or
        /// invisible character, and no line but the ones this module starts.
        #[test]
        fn trust_4_rendered_text_never_holds_a_hidden_character(
            argv in proptest::collection::vec(proptest::arbitrary::any::<String>(), 1..6),
            path in proptest::arbitrary::any::<String>(),
        ) {
            let scripts = argv_policy::shown_scripts(&argv, Path::new("/home/u"));
            let grants = Granted::new()
                .with(Grant::Run { argv: argv.clone(), scripts, place: Place::Sandbox })
                .with(Grant::Write(PathBuf::from(&path)))
                .with(Grant::Trash(vec![PathBuf::from(&path)]));
            let text = grants.text("why").unwrap();
            for c in text.chars() {
                proptest::prop_assert!(c == '\n' || !forbidden(c), "{:?} in {:?}", c, text);
            }
            for line in text.lines().skip(2) {
                proptest::prop_assert!(line.starts_with("- ") || line.starts_with("  "), "{}", line);
            }
            proptest::prop_assert!(!one_line(&path).chars().any(forbidden));
        }
    }
}
