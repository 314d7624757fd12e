//! Render/parse round trips and parser robustness: `parse(render(p)) == p` for generated
//! profiles, hostile strings that must stay strings, and random or mutated text that must never
//! panic the parser (these generated inputs run with every `cargo xtask ci`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use seatbelt::sbpl::{self, Datum, DatumKind, Limits, Pos};
use seatbelt::{
    Action, Filter, Operation, Pattern, Profile, ProfileSpec, Rule, Target, Value, VnodeType,
};

/// Strings biased towards what breaks quoting: quotes, backslashes, parens, `#"`, `;`, control
/// characters, DEL, non-ASCII.
fn hostile_string() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("\"".to_owned()),
        Just("\\".to_owned()),
        Just("(".to_owned()),
        Just(")".to_owned()),
        Just("#\"".to_owned()),
        Just(";".to_owned()),
        Just("\n".to_owned()),
        Just("\r\n\t".to_owned()),
        Just("\u{0}\u{1}\u{1f}\u{7f}".to_owned()),
        Just("\\x41".to_owned()),
        Just("(param \"K\")".to_owned()),
        Just("Café 日本 \u{85}\u{2028}".to_owned()),
        "[a-zA-Z0-9/._ -]{0,8}",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(piece, 0..6).prop_map(|v| v.concat())
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        hostile_string().prop_map(Value::Text),
        hostile_string().prop_map(Value::Param)
    ]
}

fn pattern() -> impl Strategy<Value = Pattern> {
    let atom = prop_oneof![
        Just("a"),
        Just("/"),
        Just(r"\."),
        Just(r"\("),
        Just("[gG]"),
        Just("[^/]"),
        Just("[a-z0-9_]"),
        Just("."),
        Just("(x|yz)"),
        Just("é"),
        Just("#"),
    ];
    let quant = prop_oneof![Just(""), Just("*"), Just("+"), Just("?")];
    (
        any::<bool>(),
        prop::collection::vec((atom, quant), 1..6),
        any::<bool>(),
    )
        .prop_map(|(start, body, end)| {
            let mut s = String::new();
            if start {
                s.push('^');
            }
            for (a, q) in body {
                s.push_str(a);
                s.push_str(q);
            }
            if end {
                s.push('$');
            }
            Pattern::new(&s).unwrap()
        })
}

fn filter() -> impl Strategy<Value = Filter> {
    let leaf = prop_oneof![
        value().prop_map(Filter::Literal),
        value().prop_map(Filter::Subpath),
        value().prop_map(Filter::Prefix),
        value().prop_map(Filter::SysctlName),
        value().prop_map(Filter::SysctlNamePrefix),
        value().prop_map(Filter::GlobalName),
        pattern().prop_map(Filter::Regex),
        prop::sample::select(VnodeType::ALL.to_vec()).prop_map(Filter::VnodeType),
        prop::sample::select(Target::ALL.to_vec()).prop_map(Filter::Target),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Filter::RequireAll),
            prop::collection::vec(inner.clone(), 0..4).prop_map(Filter::RequireAny),
            inner.prop_map(|f| Filter::RequireNot(Box::new(f))),
        ]
    })
}

fn rule() -> impl Strategy<Value = Rule> {
    (
        prop_oneof![Just(Action::Allow), Just(Action::Deny)],
        prop::collection::vec(prop::sample::select(Operation::ALL.to_vec()), 1..4),
        prop::collection::vec(filter(), 0..4),
    )
        .prop_map(|(action, operations, filters)| Rule {
            action,
            operations,
            filters,
        })
}

fn profile() -> impl Strategy<Value = Profile> {
    prop::collection::vec(rule(), 0..6).prop_map(|rules| Profile { rules })
}

/// Random edits of valid text: deletions, insertions of syntax characters, duplications.
fn mutate(text: &str, edits: &[(usize, u8, usize)]) -> String {
    const SPICE: [&str; 10] = [
        "(",
        ")",
        "\"",
        "\\",
        "#\"",
        ";",
        "\n",
        "\\x",
        "(require-not",
        "(param",
    ];
    let mut chars: Vec<char> = text.chars().collect();
    for &(at, kind, len) in edits {
        if chars.is_empty() {
            break;
        }
        let at = at % chars.len();
        match kind % 3 {
            0 => {
                let end = (at + len % 8).min(chars.len());
                chars.drain(at..end);
            }
            1 => {
                let spice: Vec<char> = SPICE[len % SPICE.len()].chars().collect();
                chars.splice(at..at, spice);
            }
            _ => {
                let end = (at + len % 16).min(chars.len());
                let copy: Vec<char> = chars[at..end].to_vec();
                chars.splice(at..at, copy);
            }
        }
    }
    chars.into_iter().collect()
}

/// Trees of the `sbpl` reader: every node kind, symbols that read back as symbols, hostile
/// strings, regex literals with anything but `"`.
fn datum() -> impl Strategy<Value = Datum> {
    let node = |kind| Datum {
        pos: Pos::START,
        kind,
    };
    let symbol = prop_oneof![
        prop::sample::select(vec![
            "allow",
            "file-read*",
            "string=?",
            "->",
            "+",
            "-",
            "...",
            ".",
            "a.b",
            "<=",
            "_IO",
            "x#y",
            "param-true?",
            "é",
            "-x",
            "+x",
            "1st?"
        ])
        .prop_map(str::to_owned),
        "[a-zA-Z*!?<>=/+_.-][a-zA-Z0-9*!?<>=/+_.#-]{0,8}",
    ]
    .prop_filter("reads as a symbol", |s| sbpl::reader::is_symbol_text(s));
    let leaf = prop_oneof![
        symbol.prop_map(move |s| node(DatumKind::Symbol(s))),
        hostile_string().prop_map(move |s| node(DatumKind::Str(s))),
        "[^\"]{0,12}".prop_map(move |s| node(DatumKind::Regex(s))),
        any::<i64>().prop_map(move |n| node(DatumKind::Int(n))),
        any::<bool>().prop_map(move |b| node(DatumKind::Bool(b))),
    ];
    leaf.prop_recursive(5, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(move |v| node(DatumKind::List(v))),
            inner.prop_map(move |d| node(DatumKind::Quote(Box::new(d)))),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_sbpl_reader_reads_back_what_datum_display_writes(forms in prop::collection::vec(datum(), 0..4)) {
        let text = forms.iter().map(|d| format!("{d}\n; comment\n")).collect::<String>();
        let read = sbpl::read(&text, &Limits::default());
        prop_assert_eq!(read.as_deref(), Ok(forms.as_slice()), "{}", text);
        // Each top-level form starts its own line, column 1.
        for (i, d) in read.unwrap().iter().enumerate() {
            prop_assert_eq!(d.pos.column, 1);
            prop_assert!(d.pos.line as usize > i);
        }
    }

    #[test]
    fn the_sbpl_reader_reads_every_rendered_profile(p in profile()) {
        let forms = sbpl::read(&p.render(), &Limits::default()).unwrap();
        prop_assert_eq!(forms.len(), p.rules.len() + 2);
    }

    #[test]
    fn the_sbpl_layer_never_panics_on_mutated_profiles(
        base in prop::sample::select(vec![
            include_str!("sbpl/helper.sb"),
            include_str!("sbpl/tool.sb"),
            include_str!("golden/run.sb"),
        ]),
        edits in prop::collection::vec((any::<usize>(), any::<u8>(), any::<usize>()), 1..6),
    ) {
        let text = mutate(base, &edits);
        let params = [("HOME_DIR", "/Users/a"), ("APP_DIR", "/A"), ("OS_VERSION", "1400"),
            ("BROWSER_PID", "7"), ("QUIET", "TRUE"), ("DEBUG", "FALSE"),
            ("WRITABLE_ROOT_0", "/w"), ("PROGRAM", "/bin/x"), ("READ_WRITE_0", "/m"),
            ("READ_WRITE_1", "/t")]
            .iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        if let Ok(policy) = sbpl::expand(&text, &params, &Limits::default()) {
            for (op, object) in [("file-read-data", "/A/x"), ("mach-lookup", "x"),
                ("network-outbound", "tcp:localhost:1"), ("signal", "self"), ("iokit-open", "-")] {
                let d = policy.decide(&sbpl::Query::parse(op, object).unwrap(), &params);
                prop_assert!(!d.to_string().is_empty());
            }
        }
    }

    #[test]
    fn parse_of_render_is_identity(p in profile()) {
        let text = p.render();
        prop_assert_eq!(Profile::parse(&text), Ok(p));
    }

    #[test]
    fn parser_never_panics_on_arbitrary_text(text in ".{0,400}") {
        let _ = Profile::parse(&text);
    }

    #[test]
    fn parser_never_panics_on_mutated_profiles_and_what_it_accepts_round_trips(
        p in profile(),
        edits in prop::collection::vec((any::<usize>(), any::<u8>(), any::<usize>()), 1..6),
    ) {
        let text = mutate(&p.render(), &edits);
        if let Ok(parsed) = Profile::parse(&text) {
            prop_assert_eq!(Profile::parse(&parsed.render()), Ok(parsed));
        }
    }

    #[test]
    fn spec_paths_never_reach_profile_text(name in hostile_string()) {
        let path = format!("/Users/u/{name}");
        match ProfileSpec::run("/usr/bin/wc", path.as_str(), "/private/tmp/t").build() {
            Ok(b) => {
                let text = b.text();
                prop_assert!(Profile::parse(&text).as_ref() == Ok(b.profile()));
                // The profile text is the same whatever the path: paths are only parameters.
                let plain = ProfileSpec::run("/usr/bin/wc", "/Users/u/plain", "/private/tmp/t").build().unwrap();
                prop_assert_eq!(text, plain.text());
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}

#[test]
fn hostile_literal_strings_parse_back_to_the_same_ast() {
    let hostile = [
        "\"",
        "\\",
        "\\\"",
        "\")(allow default)(\"",
        "\n(allow file-write* (subpath \"/\"))\n",
        "#\"",
        "#\"^/\"",
        "; comment",
        "(param \"X\")",
        "Café 日本語 🦀",
        "\u{0}\u{7}\u{1b}[31m\u{7f}",
        "\r\n\t",
        "\\x41\\n",
        "",
    ];
    for s in hostile {
        let p = Profile::new()
            .rule(
                Rule::allow([Operation::FileReadData])
                    .filter(Filter::Literal(Value::Text(s.to_owned()))),
            )
            .rule(
                Rule::deny([Operation::SysctlRead])
                    .filter(Filter::SysctlName(Value::Param(s.to_owned()))),
            );
        let text = p.render();
        assert_eq!(Profile::parse(&text), Ok(p), "{s:?} rendered as\n{text}");
        // Exactly the two rules and no raw control character made it into the text.
        assert_eq!(
            text.lines().filter(|l| l.starts_with('(')).count(),
            4,
            "{text}"
        );
        assert!(
            !text.chars().any(|c| c.is_ascii_control() && c != '\n'),
            "{text:?}"
        );
    }
}

#[test]
fn patterns_that_raw_strings_cannot_carry_are_refused_up_front() {
    for bad in ["\"", "a\"b", "#\"", "a\nb", "\u{7f}"] {
        assert!(Pattern::new(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn parser_survives_deep_nesting_without_overflowing_the_stack() {
    let deep = format!(
        "(version 1)(deny default)(allow file-read* {}{})",
        "(require-not ".repeat(100_000),
        ")".repeat(100_000)
    );
    assert!(Profile::parse(&deep).is_err());
    let open = "(".repeat(1_000_000);
    assert!(Profile::parse(&open).is_err());
}

#[test]
fn parse_errors_name_the_line_column_and_what_to_do() {
    let check = |text: &str, line: usize, column: usize, needle: &str| {
        let e = Profile::parse(text).unwrap_err();
        assert_eq!((e.line, e.column), (line, column), "{e}");
        assert!(e.to_string().contains(needle), "{e}");
    };
    check("", 1, 1, "(version 1)");
    check("(version 2)", 1, 1, "(version 1)");
    check("(version 1)\n(allow default)", 2, 1, "only deny-default");
    check(
        "(version 1)\n(deny default)\n(allow file-read-everything)",
        3,
        8,
        "operation `file-read-everything`",
    );
    check(
        "(version 1)\n(deny default)\n(allow file-read* (home-subpath \"/x\"))",
        3,
        20,
        "filter `home-subpath`",
    );
    check(
        "(version 1)\n(deny default)\n(allow file-read* (literal \"/x\\q\"))",
        3,
        31,
        "unknown escape",
    );
    check(
        "(version 1)\n(deny default)\n(allow file-read* (literal \"/x",
        3,
        28,
        "unterminated string",
    );
    check(
        "(version 1)\n(deny default)\n(allow file-read* (regex #\"\\d\"))",
        3,
        26,
        "not supported",
    );
    check(
        "(version 1)\n(deny default)\n(define x 1)",
        3,
        2,
        "form `define`",
    );
    check(
        "(version 1)\n(deny default)\n(allow (literal \"/x\"))",
        3,
        1,
        "at least one operation",
    );
    check(
        "(version 1)\n(deny default)\n(allow file-read* (literal \"/x\") file-write*)",
        3,
        34,
        "operations, then filters",
    );
    check(
        "(version 1)\n(deny default)\n(deny default)",
        3,
        7,
        "`default` only",
    );
    check("(version 1)\n(deny default))", 2, 15, "unbalanced");
}

#[test]
fn comments_and_free_whitespace_are_accepted() {
    let text = "; header\n(version 1) ; v\n\n(deny default)\n(allow   file-read*\n\t(subpath \"/usr/lib\") ; libs\n)\n";
    let p = Profile::parse(text).unwrap();
    assert_eq!(
        p,
        Profile::new()
            .rule(Rule::allow([Operation::FileReadAll]).filter(seatbelt::subpath("/usr/lib")))
    );
}
