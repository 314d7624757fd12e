//! `seatbelt::sbpl` on profiles written the way other teams write theirs (issue 22): the reader's
//! syntax and positions, the Scheme layer and its bounds, decision tables for every modelled
//! operation, explanations, the `sbpl` command, and agreement with the typed evaluator on our
//! own profiles. The profiles in `tests/sbpl/` are this crate's own, written to exercise each
//! construct public profiles use; none is a copy.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use seatbelt::sbpl::{
    self, Datum, DatumKind, Decided, Limits, Outcome, Policy, Pos, Query, SbplErrorKind,
};

const HELPER: &str = include_str!("sbpl/helper.sb");
const TOOL: &str = include_str!("sbpl/tool.sb");

fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn helper_params() -> BTreeMap<String, String> {
    params(&[
        ("HOME_DIR", "/Users/ann"),
        ("APP_DIR", "/System/Volumes/Data/Applications/Example.app"),
        ("OS_VERSION", "1350"),
        ("BROWSER_PID", "42"),
        ("QUIET", "TRUE"),
        ("DEBUG", "TRUE"),
    ])
}

fn expand(text: &str, p: &BTreeMap<String, String>) -> Policy {
    sbpl::expand(text, p, &Limits::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn error(text: &str) -> sbpl::SbplError {
    sbpl::expand(text, &BTreeMap::new(), &Limits::default()).expect_err(text)
}

fn line_of(text: &str, needle: &str) -> u32 {
    let i = text
        .find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not in profile"));
    u32::try_from(text[..i].matches('\n').count() + 1).unwrap()
}

/// Expected outcome of a row: `A`llow, `D`eny or `N`ot modelled, with the deciding rule's line
/// given by a snippet of the profile (`""`: no rule).
#[derive(Clone, Copy)]
enum E {
    A(&'static str),
    D(&'static str),
    N,
}

/// One decision table: `(operation, object, expected)` rows against `text` with `p`.
fn check(text: &str, p: &BTreeMap<String, String>, rows: &[(&str, &str, E)]) {
    let policy = expand(text, p);
    for (op, object, want) in rows {
        let q = Query::parse(op, object).unwrap_or_else(|e| panic!("{op} {object}: {e}"));
        let d = policy.decide(&q, p);
        let (outcome_ok, snippet) = match want {
            E::A(s) => (d.outcome == Outcome::Allow, *s),
            E::D(s) => (d.outcome == Outcome::Deny, *s),
            E::N => (matches!(d.outcome, Outcome::NotModelled(_)), ""),
        };
        assert!(outcome_ok, "{op} {object}: got {d}");
        if !snippet.is_empty() {
            let line = d.rule.map(|r| r.pos.line);
            assert_eq!(
                line,
                Some(line_of(text, snippet)),
                "{op} {object}: decided by {d}"
            );
        }
    }
}

fn decide<'p>(policy: &'p Policy, op: &str, object: &str) -> Decided<'p> {
    policy.decide(&Query::parse(op, object).unwrap(), &helper_params())
}

// ---------------------------------------------------------------- reader

fn read(text: &str) -> Vec<Datum> {
    sbpl::read(text, &Limits::default()).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_reader_reads_every_construct_with_its_position() {
    let text = "; line comment\n(allow #| block #| nested |# |# \"a\\\"b\\x41\\n\"\n  #\"^/a\\.b\" 'sym -12 #t #f #true file-read*)";
    let forms = read(text);
    assert_eq!(forms.len(), 1);
    assert_eq!(forms[0].pos, Pos { line: 2, column: 1 });
    let DatumKind::List(items) = &forms[0].kind else {
        panic!("{:?}", forms[0])
    };
    let kinds: Vec<&DatumKind> = items.iter().map(|d| &d.kind).collect();
    assert_eq!(kinds[0], &DatumKind::Symbol("allow".into()));
    assert_eq!(kinds[1], &DatumKind::Str("a\"bA\n".into()));
    assert_eq!(kinds[2], &DatumKind::Regex(r"^/a\.b".into()));
    assert!(matches!(kinds[3], DatumKind::Quote(q) if q.as_symbol() == Some("sym")));
    assert_eq!(kinds[4], &DatumKind::Int(-12));
    assert_eq!(kinds[5], &DatumKind::Bool(true));
    assert_eq!(kinds[6], &DatumKind::Bool(false));
    assert_eq!(kinds[7], &DatumKind::Bool(true));
    assert_eq!(kinds[8], &DatumKind::Symbol("file-read*".into()));
    let positions: Vec<Pos> = items.iter().map(|d| d.pos).collect();
    assert_eq!(
        positions[1],
        Pos {
            line: 2,
            column: 33
        }
    );
    assert_eq!(positions[2], Pos { line: 3, column: 3 });
    assert_eq!(
        positions[3],
        Pos {
            line: 3,
            column: 13
        }
    );
}

#[test]
fn reader_errors_are_stable_kinds_at_the_right_place() {
    let cases: &[(&str, SbplErrorKind, u32, u32)] = &[
        ("(allow", SbplErrorKind::Syntax, 1, 1),
        ("(a))", SbplErrorKind::Syntax, 1, 4),
        ("\n  \"abc", SbplErrorKind::Syntax, 2, 3),
        ("(x \"\\q\")", SbplErrorKind::Syntax, 1, 5),
        ("(x \"\\x4\")", SbplErrorKind::Syntax, 1, 5),
        ("(x `(a ,b))", SbplErrorKind::Syntax, 1, 4),
        ("(x #\\a)", SbplErrorKind::Syntax, 1, 4),
        ("(x 1.5)", SbplErrorKind::Syntax, 1, 4),
        ("(x 99999999999999999999)", SbplErrorKind::Syntax, 1, 4),
        ("#| never closed", SbplErrorKind::Syntax, 1, 1),
        ("(x #\"open)", SbplErrorKind::Syntax, 1, 4),
        ("(x ')", SbplErrorKind::Syntax, 1, 5),
    ];
    for (text, kind, line, column) in cases {
        let e = sbpl::read(text, &Limits::default()).expect_err(text);
        assert_eq!(
            (e.kind, e.pos.line, e.pos.column),
            (*kind, *line, *column),
            "{text}: {e}"
        );
        assert!(e.to_string().contains(kind.code()), "{e}");
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    for text in [
        "(".repeat(100_000),
        format!("{}{}", "(".repeat(100_000), ")".repeat(100_000)),
        "'".repeat(100_000) + "x",
    ] {
        let e = sbpl::read(&text, &Limits::default()).unwrap_err();
        assert_eq!(e.kind, SbplErrorKind::TooDeep, "{e}");
    }
    // Comments nest without a bound on depth but without recursion either.
    let comment = format!(
        "{}{}(version 1)",
        "#|".repeat(100_000),
        "|#".repeat(100_000)
    );
    assert_eq!(read(&comment).len(), 1);
    // Within the reader's bound but beyond the evaluator's: still an error.
    let deep = format!("{}1{}", "(begin ".repeat(200), ")".repeat(200));
    assert_eq!(error(&deep).kind, SbplErrorKind::TooDeep);
}

#[test]
fn oversized_input_is_refused_before_reading() {
    let limits = Limits {
        max_text: 10,
        ..Limits::default()
    };
    let e = sbpl::read("(version 1) (deny default)", &limits).unwrap_err();
    assert_eq!(e.kind, SbplErrorKind::TooLarge);
    let long = format!("\"{}\"", "a".repeat(70_000));
    assert_eq!(
        sbpl::read(&long, &Limits::default()).unwrap_err().kind,
        SbplErrorKind::TooLarge
    );
}

// ---------------------------------------------------------------- Scheme layer

#[test]
fn the_helper_profile_expands_to_its_rules() {
    let p = expand(HELPER, &helper_params());
    assert_eq!(p.version, Some(1));
    // 3 from the loop, no old-font-server rule (OS 13.5), the network rule (NO_NETWORK unset),
    // the data-volume rule (APP_DIR is under it).
    assert_eq!(p.rules.len(), 21, "{:#?}", p.rules);
    let (_, default) = p.default_rule().unwrap();
    assert_eq!(default.modifiers[0].name, "no-log");
    assert!(default.params.contains("QUIET"));
    assert_eq!(p.debug.len(), 1);
    assert_eq!(p.debug[0].0, "(debug deny)");
    assert!(p.params_missing.contains("NO_NETWORK"));
    assert!(p.params_read.contains("OS_VERSION"));
}

#[test]
fn parameters_steer_the_expansion() {
    let mut q = helper_params();
    q.insert("QUIET".into(), "FALSE".into());
    q.insert("DEBUG".into(), "FALSE".into());
    q.insert("NO_NETWORK".into(), "1".into());
    q.insert("OS_VERSION".into(), "1100".into());
    q.insert("APP_DIR".into(), "/Applications/Example.app".into());
    let p = expand(HELPER, &q);
    // No data-volume rule, the old-font-server rule, no network rule.
    assert_eq!(p.rules.len(), 20);
    assert!(p.default_rule().unwrap().1.modifiers.is_empty());
    assert!(p.debug.is_empty());
    let d = p.decide(
        &Query::parse("file-read-data", "/usr/lib/legacy/x").unwrap(),
        &q,
    );
    assert_eq!(d.outcome, Outcome::Allow);
    assert_eq!(
        p.decide(
            &Query::parse("mach-lookup", "com.example.old-font-server").unwrap(),
            &q
        )
        .outcome,
        Outcome::Allow
    );
}

#[test]
fn the_helper_profile_decides_as_written() {
    let p = helper_params();
    use E::*;
    check(
        HELPER,
        &p,
        &[
            (
                "file-read-data",
                "/Applications/Example.app/Contents/Info.plist",
                A("(allow file-read*\n         (subpath (substring"),
            ),
            (
                "file-read-data",
                "/System/Volumes/Data/Applications/Example.app/x",
                A("(allow file-read* (subpath (param \"APP_DIR\")))"),
            ),
            (
                "file-read-metadata",
                "/Users/ann/secret",
                A("(allow file-read-metadata (subpath \"/\"))"),
            ),
            (
                "file-read-data",
                "/Users/ann/secret",
                D("(deny default (with no-log))"),
            ),
            (
                "file-read-data",
                "/Library/Fonts/a.ttf",
                A("(allow file-read-data\n           (subpath \"/Library/Fonts\")"),
            ),
            (
                "file-read-data",
                "/Users/ann/Library/Fonts/b.ttf",
                A("(allow file-read-data\n           (subpath \"/Library/Fonts\")"),
            ),
            (
                "mach-lookup",
                "com.example.old-font-server",
                D("(deny default (with no-log))"),
            ),
            (
                "file-read-data",
                "/System/Volumes/Preboot/Cryptexes/OS/lib",
                A("(allow file-read* (subpath \"/System/Volumes/Preboot"),
            ),
            (
                "file-read-data",
                "/System/Cryptexes/OS/lib",
                D("(deny default (with no-log))"),
            ),
            (
                "file-read-data",
                "/Users/ann/Library/Preferences/com.x.plist",
                A("(allow file-read-data\n  (regex"),
            ),
            (
                "file-read-data",
                "/Users/ann/Library/Preferences/sub/com.x.plist",
                D("(deny default (with no-log))"),
            ),
            (
                "mach-lookup",
                "com.example.browser.rendezvous.42",
                A("(allow mach-lookup (service"),
            ),
            (
                "mach-lookup",
                "com.example.browser.metrics.42",
                A("(allow mach-lookup (service"),
            ),
            (
                "mach-lookup",
                "com.example.browser.metrics.43",
                D("(deny default (with no-log))"),
            ),
            (
                "mach-lookup",
                "com.example.system.logger",
                A("(allow mach-lookup (apply"),
            ),
            (
                "sysctl-read",
                "kern.proc.pid.42",
                A("(allow sysctl-read\n  (sysctl-name \"hw.ncpu\")"),
            ),
            (
                "sysctl-read",
                "kern.proc.pid.43",
                D("(deny default (with no-log))"),
            ),
            ("iokit-open", "-", N),
            (
                "file-write-data",
                "/Users/ann/Documents/x",
                D("(deny file-write* (with report)"),
            ),
            (
                "file-write-create",
                "/Users/ann/Downloads/x",
                A("(allow file-write*\n  (require-any"),
            ),
            (
                "file-write-data",
                "/dev/null",
                A("(allow file-write*\n  (require-any"),
            ),
            (
                "file-write-data",
                "/tmp/x",
                D("(deny default (with no-log))"),
            ),
            (
                "file-read-data",
                "/dev/example2",
                A("(allow file-read-data\n           (literal (string-append \"/dev/example\""),
            ),
            (
                "file-read-data",
                "/dev/example3",
                D("(deny default (with no-log))"),
            ),
            (
                "network-outbound",
                "tcp:example.com:443",
                A("(allow network-outbound (remote tcp"),
            ),
            (
                "network-outbound",
                "tcp:example.com:80",
                D("(deny default (with no-log))"),
            ),
            (
                "network-outbound",
                "udp:127.0.0.1:53",
                A("(allow network-outbound (remote tcp"),
            ),
            (
                "network-outbound",
                "udp:10.1.1.1:53",
                D("(deny default (with no-log))"),
            ),
            ("network-outbound", "127.0.0.1:53", N),
            (
                "network-bind",
                "tcp:localhost:8080",
                A("(allow network-bind (local ip"),
            ),
            (
                "network-bind",
                "tcp:10.0.0.1:8080",
                D("(deny default (with no-log))"),
            ),
            (
                "network-outbound",
                "/var/run/syslog",
                A("(allow network-outbound (literal"),
            ),
            ("file-read-data", "/etc/hosts", A("(allow read-ops")),
            (
                "file-write-data",
                "/etc/hosts",
                D("(deny default (with no-log))"),
            ),
            ("signal", "self", A("(allow signal (target self))")),
            ("signal", "child", D("(deny default (with no-log))")),
            ("process-fork", "-", D("(deny default (with no-log))")),
        ],
    );
}

#[test]
fn explanations_name_the_rule_the_call_site_the_parameters_and_the_modifiers() {
    let policy = expand(HELPER, &helper_params());
    let d = decide(&policy, "file-read-data", "/Users/ann/Library/Fonts/b.ttf");
    let rule = d.rule.unwrap();
    assert_eq!(
        rule.called_from.map(|p| p.line),
        Some(line_of(HELPER, "\n(allow-fonts)\n") + 1)
    );
    assert_eq!(
        d.params.get("HOME_DIR"),
        Some(&Some("/Users/ann".to_owned()))
    );
    let text = d.to_string();
    assert!(text.starts_with("allow\n  rule at line"), "{text}");
    assert!(
        text.contains("parameter HOME_DIR = \"/Users/ann\""),
        "{text}"
    );
    assert!(
        text.contains("(subpath \"/Users/ann/Library/Fonts\")"),
        "{text}"
    );

    // A rule made under a condition records the condition's parameters.
    let d = decide(
        &policy,
        "file-read-data",
        "/System/Volumes/Preboot/Cryptexes/OS/x",
    );
    assert!(d.params.contains_key("OS_VERSION"), "{d}");

    let d = decide(&policy, "file-write-data", "/Users/ann/Documents/x");
    assert_eq!(d.rule.unwrap().modifiers[0].name, "report");
    assert!(d.to_string().contains("modifier: (with report)"), "{d}");

    let d = decide(&policy, "iokit-open", "-");
    let Outcome::NotModelled(why) = &d.outcome else {
        panic!("{d}")
    };
    assert!(why.contains("iokit-registry-entry-class"), "{why}");
    assert_eq!(
        d.rule.map(|r| r.pos.line),
        Some(line_of(HELPER, "(allow iokit-open"))
    );
}

#[test]
fn an_unknown_match_of_the_same_action_does_not_hide_the_answer() {
    let text = "(version 1)(deny default)\n(allow file-read* (extension \"x\"))\n(allow file-read* (subpath \"/a\"))\n(allow file-read* (extension \"y\"))";
    let policy = expand(text, &BTreeMap::new());
    let d = policy.decide(
        &Query::parse("file-read-data", "/a/b").unwrap(),
        &BTreeMap::new(),
    );
    assert_eq!(d.outcome, Outcome::Allow);
    assert_eq!(d.rule.unwrap().pos.line, 3);
    assert_eq!(d.unknown_passed.len(), 1);
    // Outside /a the extension rules may or may not match, against (deny default).
    let d = policy.decide(
        &Query::parse("file-read-data", "/b").unwrap(),
        &BTreeMap::new(),
    );
    assert!(matches!(d.outcome, Outcome::NotModelled(_)), "{d}");
}

#[test]
fn scheme_forms_evaluate_as_in_tinyscheme() {
    let text = r#"
(version 1)
(define x 5)
(set! x (+ x 1))
(define (fact n) (if (<= n 1) 1 (* n (fact (- n 1)))))
(define (rest-count a . more) (length more))
(define sq (lambda (n) (* n n)))
(deny default)
(when (and (= x 6) (= (fact 5) 120) (= (rest-count 1 2 3) 2) (= (sq 4) 16)
           (equal? (list 1 "a" 'b) (list 1 "a" 'b)) (not (equal? '(1) '(2)))
           (eq? (car (cdr '(a b))) 'b) (null? '()) (pair? (cons 1 '()))
           (string<? "a" "b") (= (string->number "0012") 12)
           (not (string->number "twelve")) (string=? (number->string -3) "-3")
           (eq? (string->symbol "k") 'k) (string=? (symbol->string 'k) "k")
           (= (length (append '(1) '(2 3))) 3) (or #f (> 2 1))
           (string=? (regex-quote "a.b*c") "a\\.b\\*c")
           (string=? (substring "abcdef" 2) "cdef") (= (- 5) -5)
           (symbol? 'a) (number? 1) (boolean? #f) (procedure? sq) (string? "s")
           (let loop ((i 0) (acc 0)) (if (< i 4) (loop (+ i 1) (+ acc i)) (= acc 6)))
           (unless #f #t) (list? '())
           (cond (#f #f) ((= 1 2) #f) (else #t)))
  (allow file-read-data (literal "/ok")))
(for-each (lambda (p) (allow file-read-metadata (literal p))) (list "/a" "/b"))
(allow process-exec (with send-signal SIGKILL) (with message "exec denied") (subpath "/bin"))
"#;
    let p = expand(text, &BTreeMap::new());
    assert_eq!(p.rules.len(), 5, "{:#?}", p.rules);
    assert_eq!(
        p.rules[1].to_string(),
        "(allow file-read-data (literal \"/ok\"))"
    );
    assert_eq!(
        p.rules[3].to_string(),
        "(allow file-read-metadata (literal \"/b\"))"
    );
    assert_eq!(
        p.rules[4].to_string(),
        "(allow process-exec (with send-signal SIGKILL) (with message \"exec denied\") (subpath \"/bin\"))"
    );
}

#[test]
fn scheme_errors_are_stable_kinds_with_positions_and_advice() {
    let cases: &[(&str, SbplErrorKind, u32, &str)] = &[
        (
            "(allow file-reed-data)",
            SbplErrorKind::UnknownOperation,
            1,
            "did you mean `file-read-data`",
        ),
        (
            "(allow (subpath \"/a\"))",
            SbplErrorKind::BadForm,
            1,
            "names no operation",
        ),
        (
            "(allow default (subpath \"/a\"))",
            SbplErrorKind::BadForm,
            1,
            "stands alone",
        ),
        (
            "\n(import \"system.sb\")",
            SbplErrorKind::Unsupported,
            2,
            "paste the imported rules",
        ),
        ("(version 2)", SbplErrorKind::Unsupported, 1, "(version 1)"),
        (
            "(allow file-read* (subpath \"rel\"))",
            SbplErrorKind::BadValue,
            1,
            "absolute",
        ),
        (
            "(allow network-outbound (remote ip \"example.com:80\"))",
            SbplErrorKind::BadValue,
            1,
            "* or localhost",
        ),
        (
            "(allow network-outbound (remote ip \"*:http\"))",
            SbplErrorKind::BadValue,
            1,
            "port",
        ),
        (
            "(allow network-outbound (remote carrier-pigeon))",
            SbplErrorKind::BadValue,
            1,
            "KIND",
        ),
        (
            "(allow file-read* (vnode-type FILE))",
            SbplErrorKind::Type,
            1,
            "REGULAR-FILE",
        ),
        (
            "(allow signal (target everyone))",
            SbplErrorKind::Type,
            1,
            "same-sandbox",
        ),
        (
            "(allow file-read* (require-not))",
            SbplErrorKind::Type,
            1,
            "one filter",
        ),
        (
            "(allow file-read* (subpath (param \"ROOT\")))",
            SbplErrorKind::Type,
            1,
            "pass -D ROOT=VALUE",
        ),
        ("(define (f x) x)\n(f)", SbplErrorKind::Arity, 2, "takes 1"),
        (
            "(string-append \"a\" 1)",
            SbplErrorKind::Type,
            1,
            "a string",
        ),
        (
            "(undefined-thing 1)",
            SbplErrorKind::Unbound,
            1,
            "not defined",
        ),
        ("(car '())", SbplErrorKind::Type, 1, "empty list"),
        ("(substring \"abc\" 2 9)", SbplErrorKind::Type, 1, "outside"),
        (
            "(* 9223372036854775807 2)",
            SbplErrorKind::Type,
            1,
            "overflow",
        ),
        ("(if)", SbplErrorKind::BadForm, 1, "test"),
        ("(let ((x)) x)", SbplErrorKind::BadForm, 1, "bindings"),
        ("(1 2)", SbplErrorKind::Type, 1, "procedure"),
    ];
    for (text, kind, line, advice) in cases {
        let e = error(text);
        assert_eq!((e.kind, e.pos.line), (*kind, *line), "{text}: {e}");
        assert!(e.message.contains(advice), "{text}: {e}");
    }
}

#[test]
fn runaway_programs_stop_at_the_budget() {
    // Unbounded recursion: the depth bound, not the stack.
    assert_eq!(error("(define (f) (f)) (f)").kind, SbplErrorKind::TooDeep);
    assert_eq!(
        error("(let loop ((i 0)) (loop (+ i 1)))").kind,
        SbplErrorKind::TooDeep
    );
    // Exponential but shallow: the step budget.
    let e = error("(define (f n) (if (> n 0) (begin (f (- n 1)) (f (- n 1))))) (f 25)");
    assert_eq!(e.kind, SbplErrorKind::StepBudget, "{e}");
    assert_eq!(e.pos.line, 1);
    // Doubling strings: the size bound.
    let e = error("(define (grow s) (grow (string-append s s))) (grow \"ab\")");
    assert_eq!(e.kind, SbplErrorKind::TooLarge, "{e}");
    // A small budget is honoured.
    let tight = Limits {
        max_steps: 50,
        ..Limits::default()
    };
    let e = sbpl::expand(HELPER, &helper_params(), &tight).unwrap_err();
    assert_eq!(e.kind, SbplErrorKind::StepBudget);
    let few = Limits {
        max_rules: 3,
        ..Limits::default()
    };
    let e = sbpl::expand(HELPER, &helper_params(), &few).unwrap_err();
    assert_eq!(e.kind, SbplErrorKind::TooLarge);
}

// ---------------------------------------------------------------- decision tables

#[test]
fn file_operations_decide_by_path_filters_and_wildcards() {
    let text = r#"(version 1)
(deny default)
(allow file-read* (literal "/private/etc/motd"))
(allow file-read-data (path "/Users/a/one"))
(allow file-write* (subpath "/Users/a/w"))
(allow file* (prefix "/Volumes/Scratch"))
(allow file-read-metadata (regex #"^/opt/[a-z]+/bin$"))
(allow file-write-data (require-all (literal "/dev/null") (vnode-type CHARACTER-DEVICE)))
(deny file-write-unlink (subpath "/Users/a/w/keep"))
(allow file-link (literal "/Users/a/w/hard"))
(allow file-map-executable (regex #"\.dylib$"))
(deny file-read-data (require-all (prefix "/Volumes/Scratch") (regex #"x{2}")))
"#;
    use E::*;
    check(
        text,
        &BTreeMap::new(),
        &[
            (
                "file-read-data",
                "/etc/motd",
                A("(literal \"/private/etc/motd\")"),
            ),
            (
                "file-read-xattr",
                "/private/etc/motd",
                A("(literal \"/private/etc/motd\")"),
            ),
            ("file-read-data", "/etc/motd2", D("(deny default)")),
            (
                "file-read-data",
                "/Users/a/one",
                A("(path \"/Users/a/one\")"),
            ),
            ("file-read-metadata", "/Users/a/one", D("(deny default)")),
            (
                "file-write-create",
                "/Users/a/w/new",
                A("(subpath \"/Users/a/w\")"),
            ),
            (
                "file-write-mode",
                "/Users/a/w",
                A("(subpath \"/Users/a/w\")"),
            ),
            ("file-write-data", "/Users/a/wx", D("(deny default)")),
            (
                "file-write-unlink",
                "/Users/a/w/keep/f",
                D("(deny file-write-unlink"),
            ),
            (
                "file-write-data",
                "/Users/a/w/keep/f",
                A("(subpath \"/Users/a/w\")"),
            ),
            ("file-link", "/Users/a/w/other", D("(deny default)")),
            ("file-link", "/Users/a/w/hard", A("(allow file-link")),
            (
                "file-ioctl",
                "/Volumes/ScratchDisk/x",
                A("(prefix \"/Volumes/Scratch\")"),
            ),
            ("file-read-metadata", "/opt/tool/bin", A("(regex #\"^/opt")),
            ("file-read-metadata", "/opt/Tool/bin", D("(deny default)")),
            (
                "file-map-executable",
                "/usr/lib/libz.dylib",
                A("(allow file-map-executable"),
            ),
            ("file-write-data", "/dev/null", N),
            // The regex outside the modelled subset is unknown only where it could matter.
            ("file-read-data", "/xx", D("(deny default)")),
            ("file-read-data", "/Volumes/Scratch/xx", N),
            (
                "file-read-metadata",
                "/Volumes/Scratch/xx",
                A("(prefix \"/Volumes/Scratch\")"),
            ),
        ],
    );
    let policy = expand(text, &BTreeMap::new());
    let q = |t: &str| {
        Query::parse("file-write-data", "/dev/null")
            .unwrap()
            .with_vnode_type(t)
            .unwrap()
    };
    assert_eq!(
        policy
            .decide(&q("CHARACTER-DEVICE"), &BTreeMap::new())
            .outcome,
        Outcome::Allow
    );
    assert_eq!(
        policy.decide(&q("REGULAR-FILE"), &BTreeMap::new()).outcome,
        Outcome::Deny
    );
}

#[test]
fn process_operations_decide_by_path_and_target() {
    let text = r#"(version 1)
(deny default)
(allow process-exec (subpath "/usr/bin"))
(allow process-exec* (literal "/bin/sh"))
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info-pidinfo (target self))
(allow process-info* (target children))
(allow process-info-rusage (target others))
"#;
    use E::*;
    check(
        text,
        &BTreeMap::new(),
        &[
            ("process-exec", "/usr/bin/awk", A("(subpath \"/usr/bin\")")),
            ("process-exec", "/usr/local/bin/awk", D("(deny default)")),
            (
                "process-exec-interpreter",
                "/bin/sh",
                A("(literal \"/bin/sh\")"),
            ),
            (
                "process-exec-interpreter",
                "/usr/bin/awk",
                D("(deny default)"),
            ),
            ("process-fork", "-", A("(allow process-fork)")),
            ("signal", "self", A("(target same-sandbox)")),
            ("signal", "child", A("(target same-sandbox)")),
            ("signal", "same-sandbox", A("(target same-sandbox)")),
            ("signal", "other", D("(deny default)")),
            ("process-info-pidinfo", "self", A("(target self)")),
            ("process-info-pidinfo", "child", A("(target children)")),
            ("process-info-listpids", "same-sandbox", D("(deny default)")),
            ("process-info-rusage", "other", N),
        ],
    );
}

#[test]
fn network_operations_decide_by_end_protocol_host_and_port() {
    let text = r#"(version 1)
(deny default)
(allow network-outbound (remote tcp "*:443"))
(allow network-outbound (remote udp4 "localhost:53"))
(allow network-outbound (remote ip6 "*:*"))
(allow network-outbound (remote unix-socket (path-literal "/private/var/run/a.sock")))
(allow network-outbound (remote unix-socket (path-regex #"^/private/tmp/s[0-9]$")))
(allow network-bind (local tcp "localhost:8000"))
(allow network-inbound (local ip "*:9000"))
(allow network* (remote ip "localhost:7000"))
"#;
    use E::*;
    check(
        text,
        &BTreeMap::new(),
        &[
            (
                "network-outbound",
                "tcp:example.com:443",
                A("(remote tcp \"*:443\")"),
            ),
            (
                "network-outbound",
                "tcp:127.0.0.1:443",
                A("(remote tcp \"*:443\")"),
            ),
            ("network-outbound", "udp:10.0.0.1:443", D("(deny default)")),
            ("network-outbound", "udp:127.0.0.1:53", A("(remote udp4")),
            ("network-outbound", "udp:[::1]:53", A("(remote ip6")),
            ("network-outbound", "tcp:10.0.0.1:53", D("(deny default)")),
            ("network-outbound", "udp:localhost:53", N),
            ("network-outbound", "/var/run/a.sock", A("(path-literal")),
            ("network-outbound", "/tmp/s1", A("(path-regex")),
            ("network-outbound", "/tmp/s10", D("(deny default)")),
            (
                "network-bind",
                "tcp:127.0.0.1:8000",
                A("(local tcp \"localhost:8000\")"),
            ),
            // Whether the `network*` rule on the remote end matches a bind is unknown.
            ("network-bind", "tcp:127.0.0.1:8001", N),
            (
                "network-inbound",
                "udp:10.0.0.1:9000",
                A("(local ip \"*:9000\")"),
            ),
            (
                "network-outbound",
                "tcp:localhost:7000",
                A("(allow network* (remote ip"),
            ),
            // `remote` on a bind is about the other end: unknown, against the default.
            ("network-bind", "tcp:localhost:7000", N),
        ],
    );
}

#[test]
fn sysctl_and_mach_lookups_decide_by_name() {
    let text = r#"(version 1)
(deny default)
(allow sysctl-read (sysctl-name "hw.ncpu") (sysctl-name-prefix "hw.optional."))
(allow sysctl* (sysctl-name-regex #"^kern\.proc\.pid\.[0-9]+$"))
(allow mach-lookup (global-name "com.example.a") (global-name-prefix "com.example.pre."))
(allow mach-lookup (global-name-regex #"^org\.x\."))
(allow mach-lookup (local-name "com.example.local"))
(allow mach-lookup (xpc-service-name "com.example.xpc"))
(allow sysctl-read (literal "/not/a/sysctl"))
"#;
    use E::*;
    check(
        text,
        &BTreeMap::new(),
        &[
            ("sysctl-read", "hw.ncpu", A("(sysctl-name \"hw.ncpu\")")),
            ("sysctl-read", "hw.ncpu2", D("(deny default)")),
            (
                "sysctl-read",
                "hw.optional.arm.FEAT",
                A("(sysctl-name \"hw.ncpu\")"),
            ),
            ("sysctl-write", "kern.proc.pid.12", A("(allow sysctl*")),
            ("sysctl-write", "hw.ncpu", D("(deny default)")),
            (
                "mach-lookup",
                "com.example.a",
                A("(global-name \"com.example.a\")"),
            ),
            (
                "mach-lookup",
                "com.example.pre.b",
                A("(global-name \"com.example.a\")"),
            ),
            ("mach-lookup", "org.x.y", A("(global-name-regex")),
            ("mach-lookup", "com.example.local", N),
            ("mach-lookup", "com.example.xpc", N),
        ],
    );
}

#[test]
fn unmodelled_operations_are_decided_only_by_unconditional_rules_or_the_default() {
    use E::*;
    check(
        TOOL,
        &params(&[("WRITABLE_ROOT_0", "/Users/bo/proj")]),
        &[
            (
                "user-preference-read",
                "-",
                A("(allow user-preference-read)"),
            ),
            ("mach-host-special-port-set", "-", A("(allow mach-host*)")),
            ("ipc-posix-sem", "-", A("(allow ipc-posix-sem)")),
            ("ipc-posix-sem-open", "-", D("(deny default)")),
            ("pseudo-tty", "-", A("(allow pseudo-tty)")),
            ("iokit-open", "-", N),
            ("system-socket", "-", D("(deny default)")),
            (
                "process-exec",
                "/anything/at/all",
                A("(allow process-exec)"),
            ),
            ("signal", "same-sandbox", A("(allow signal")),
            ("process-info-pidinfo", "other", D("(deny default)")),
            (
                "sysctl-read",
                "hw.optional.arm.FEAT_X",
                A("(allow sysctl-read"),
            ),
            (
                "sysctl-write",
                "kern.example_tunable",
                A("(allow sysctl-write"),
            ),
            (
                "mach-lookup",
                "com.example.libinfo",
                A("(allow mach-lookup"),
            ),
            (
                "file-ioctl",
                "/dev/ptmx",
                A("(allow file-read* file-write* file-ioctl"),
            ),
            ("file-ioctl", "/dev/ttys004", A("(allow file-ioctl (regex")),
            ("file-read-data", "/dev/ttys004", N),
            ("file-write-data", "/dev/null", N),
            (
                "network-outbound",
                "/var/run/example.socket",
                A("(allow network-outbound\n  (remote unix-socket"),
            ),
            (
                "network-outbound",
                "tcp:localhost:8080",
                A("(remote ip \"localhost:*\")"),
            ),
            (
                "network-outbound",
                "tcp:example.com:443",
                D("(deny default)"),
            ),
            (
                "file-write-data",
                "/Users/bo/proj/src/a.rs",
                A("(allow file-write* (subpath"),
            ),
            (
                "file-write-data",
                "/Users/bo/proj/.git/config",
                D("(deny file-write* (with no-log)"),
            ),
            (
                "file-read-data",
                "/Users/bo/proj/.git/config",
                A("(allow file-read* (subpath"),
            ),
            (
                "file-read-data",
                "/Users/bo/.ssh/id_ed25519",
                D("(deny default)"),
            ),
        ],
    );
}

#[test]
fn queries_are_checked_before_deciding() {
    assert!(
        Query::parse("file-read*", "/a")
            .unwrap_err()
            .contains("wildcard")
    );
    assert!(
        Query::parse("file-reed", "/a")
            .unwrap_err()
            .contains("did you mean")
    );
    assert!(
        Query::parse("file-read-data", "a/b")
            .unwrap_err()
            .contains("absolute")
    );
    assert!(
        Query::parse("file-read-data", "/a/../b")
            .unwrap_err()
            .contains("resolved")
    );
    assert!(
        Query::parse("signal", "mother")
            .unwrap_err()
            .contains("same-sandbox")
    );
    assert!(
        Query::parse("network-outbound", "example.com")
            .unwrap_err()
            .contains("HOST:PORT")
    );
    assert!(
        Query::parse("file-read-data", "/a")
            .unwrap()
            .with_vnode_type("FILE")
            .is_err()
    );
}

// ---------------------------------------------------------------- our own profiles

#[test]
fn our_rendered_profiles_decide_the_same_through_both_evaluators() {
    let mut spec = seatbelt::ProfileSpec::command("/Users/u/work", "/private/tmp/call");
    spec.read_only.push("/Users/u/.cargo".into());
    let run = seatbelt::ProfileSpec::run("/usr/bin/awk", "/Users/u/mirror", "/private/tmp/run");
    let paths = [
        "/Users/u/work/a.c",
        "/Users/u/work/.git/config",
        "/Users/u/mirror/.GIT/HEAD",
        "/Users/u/mirror/x",
        "/Users/u/.cargo/bin/cargo",
        "/Users/u/.ssh/id_rsa",
        "/tmp/call/t",
        "/usr/lib/libSystem.B.dylib",
        "/usr/bin/awk",
        "/bin/sh",
        "/dev/null",
        "/",
    ];
    for bound in [spec.build().unwrap(), run.build().unwrap()] {
        let p: BTreeMap<String, String> = bound
            .params()
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let policy = expand(&bound.text(), &p);
        assert_eq!(policy.rules.len(), bound.profile().rules.len() + 1);
        // The operations whose object is a path: the only ones `BoundProfile::decide` asks.
        let path_ops = seatbelt::Operation::ALL.iter().filter(|o| {
            !o.is_wildcard()
                && sbpl::catalog::operation(o.name()).and_then(|(_, k)| k)
                    == Some(sbpl::ObjectKind::Path)
        });
        for op in path_ops {
            for path in paths {
                let old = bound.decide(*op, path).unwrap();
                let new = policy.decide(&Query::parse(op.name(), path).unwrap(), &p);
                let want = match old {
                    seatbelt::Decision::Allow => Outcome::Allow,
                    seatbelt::Decision::Deny => Outcome::Deny,
                };
                // The typed evaluator takes a vnode-type it is not told as "no match"; the
                // sbpl layer says it cannot know. Where they differ, only that may be why.
                if new.outcome != want {
                    assert!(
                        matches!(&new.outcome, Outcome::NotModelled(w) if w.contains("vnode-type")),
                        "{} {path}: typed {old:?}, sbpl {new}",
                        op.name()
                    );
                }
            }
        }
    }
}

#[test]
fn the_docs_table_lists_every_modelled_operation_and_filter() {
    let docs = include_str!("../src/sbpl/mod.rs");
    for (name, kind) in sbpl::OPERATIONS {
        let mentioned = docs.contains(&format!("`{name}`"));
        if kind.is_some() {
            assert!(
                mentioned,
                "modelled operation {name} missing from the table in sbpl/mod.rs"
            );
        }
    }
    for name in sbpl::MODELLED_FILTERS {
        assert!(
            docs.contains(&format!("`{name}`")),
            "modelled filter {name} missing"
        );
    }
    // Recognised operations appear by name or under a family the docs name.
    for (name, kind) in sbpl::OPERATIONS {
        if kind.is_none() {
            let covered = sbpl::OPERATIONS.iter().any(|(family, _)| {
                family.ends_with('*')
                    && seatbelt::sbpl::catalog::covers(family, name)
                    && docs.contains(&format!("`{family}`"))
            });
            assert!(
                covered || docs.contains(&format!("`{name}`")),
                "recognised operation {name} missing from the docs"
            );
        }
    }
}

// ---------------------------------------------------------------- the command

/// `text` written as `name` in a fresh temp dir, removed when the returned guard drops.
fn write_profile(name: &str, text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::Builder::new()
        .prefix("seatbelt-sbpl-")
        .tempdir()
        .unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    let path = path.to_string_lossy().into_owned();
    (dir, path)
}

fn cli(args: &[&str]) -> sbpl::cli::Run {
    sbpl::cli::run(args.iter().map(|s| (*s).to_owned()).collect())
}

#[test]
fn the_command_checks_decides_and_exits_as_documented() {
    let (_dir, file) = write_profile("tool.sb", TOOL);
    let root = "-DWRITABLE_ROOT_0=/Users/bo/proj";

    let run = cli(&["check", &file, "-D", "WRITABLE_ROOT_0=/Users/bo/proj"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("parsed: 22 rules (20 allow, 2 deny)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("parameters read: WRITABLE_ROOT_0"),
        "{}",
        run.stdout
    );

    let run = cli(&["decide", &file, root, "file-write-data", "/Users/bo/proj/a"]);
    assert_eq!(run.code, 0, "{run:?}");
    let line = line_of(TOOL, "(allow file-write* (subpath");
    assert!(
        run.stdout
            .starts_with(&format!("allow\n  rule at line {line}, column 1")),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("parameter WRITABLE_ROOT_0 = \"/Users/bo/proj\"")
    );

    let run = cli(&[
        "decide",
        &file,
        root,
        "file-write-data",
        "/Users/bo/proj/.git/x",
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.contains("modifier: (with no-log)"),
        "{}",
        run.stdout
    );

    let run = cli(&["decide", &file, root, "iokit-open", "-"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stdout.starts_with("not modelled"), "{}", run.stdout);

    let run = cli(&[
        "decide",
        &file,
        root,
        "--type",
        "CHARACTER-DEVICE",
        "file-write-data",
        "/dev/null",
    ]);
    assert_eq!(run.code, 0, "{run:?}");

    // Errors: a missing parameter, with line and column; bad arguments; a missing file.
    let run = cli(&["check", &file]);
    assert_eq!(run.code, 2, "{run:?}");
    let at = format!(
        "tool.sb:{}:19: error[sbpl-type]",
        line_of(TOOL, "(allow file-read* (subpath")
    );
    assert!(run.stderr.contains(&at), "{}", run.stderr);
    for args in [
        &[][..],
        &["frobnicate", "x"][..],
        &["decide", &file, root, "file-read-data"][..],
        &["decide", &file, "-D", "NOEQUALS", "file-read-data", "/a"][..],
        &["decide", &file, root, root, "file-read-data", "/a"][..],
        &["decide", &file, root, "file-read*", "/a"][..],
        &["check", "/nonexistent/profile.sb"][..],
    ] {
        let run = cli(args);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stderr.starts_with("sbpl: "), "{args:?}: {run:?}");
    }
}

#[test]
fn recursion_through_every_higher_order_procedure_stops_at_the_depth_bound() {
    // Each level passes through `map`/`apply`/`for-each` and a filter call, the deepest Rust
    // frames the evaluator has; a test thread's 2 MiB stack must hold the whole bound.
    for text in [
        "(define (f x) (map f (list x))) (f 1)",
        "(define (f x) (apply f (list x))) (f 1)",
        "(define (f x) (for-each f (list x))) (f 1)",
        "(define (f x) (require-any (f x))) (f 1)",
        "(define (f x) (allow file-read* (f x))) (f 1)",
        "(define (f x) (string-append (f x))) (f 1)",
    ] {
        assert_eq!(error(text).kind, SbplErrorKind::TooDeep, "{text}");
    }
}

#[test]
fn values_built_by_loops_and_sharing_stay_bounded() {
    let items = (0..300)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(" ");
    // Nesting grown one level per iteration: the value depth bound, not the stack.
    for grow in ["(list x)", "(require-not x)"] {
        let seed = if grow.starts_with("(list") {
            "'()"
        } else {
            "(literal \"/a\")"
        };
        let text =
            format!("(define x {seed}) (for-each (lambda (i) (set! x {grow})) (list {items}))");
        assert_eq!(error(&text).kind, SbplErrorKind::TooDeep, "{grow}");
    }
    // Doubling by sharing: one step builds twice the value; using it costs per node.
    let double = |seed: &str, grow: &str, then: &str| {
        format!(
            "(define x {seed}) (define (dbl n) (if (> n 0) (begin (set! x {grow}) (dbl (- n 1)))))
             (dbl 30) {then}"
        )
    };
    for text in [
        double("'(1)", "(list x x)", "(equal? x x)"),
        double("'(1)", "(list x x)", "(allow file-read* (extension x))"),
        double("(literal \"/a\")", "(require-any x x)", ""),
    ] {
        assert_eq!(error(&text).kind, SbplErrorKind::StepBudget, "{text}");
    }
}

#[test]
fn an_error_inside_a_function_names_the_call_that_led_there() {
    let e = error(
        "(define (home p)\n  (subpath (string-append (param \"HOME\") p)))\n(deny default)\n(allow file-read* (home \"/x\"))",
    );
    assert_eq!((e.kind, e.pos.line), (SbplErrorKind::Type, 2), "{e}");
    assert!(
        e.message
            .contains("while evaluating the form at line 4, column 1"),
        "{e}"
    );
    assert!(e.message.contains("pass -D HOME=VALUE"), "{e}");
}

#[test]
fn copying_big_strings_and_keeping_scopes_cost_budget() {
    // A 64 KiB string copied into rule after rule: the bytes are paid for.
    let hundred = (0..100)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(" ");
    let text = format!(
        "(define (grow s n) (if (> n 0) (grow (string-append s s) (- n 1)) s))
         (define big (grow \"/aaaaaaaaaaaaaaa\" 12))
         (define l (list {hundred}))
         (for-each (lambda (i) (for-each (lambda (j) (allow file-read* (literal big))) l)) l)"
    );
    let text = text.as_str();
    assert_eq!(error(text).kind, SbplErrorKind::StepBudget);
    // Functions kept in a list keep their scopes alive: capped.
    let few = Limits {
        max_frames: 50,
        ..Limits::default()
    };
    let text = "(define keep '()) (define (mk i) (lambda () i))
        (for-each (lambda (i) (set! keep (cons (mk i) keep))) (list 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30))";
    let e = sbpl::expand(text, &BTreeMap::new(), &few).unwrap_err();
    assert_eq!(e.kind, SbplErrorKind::TooLarge, "{e}");
    // A parameter name is a short key.
    let long = format!("(param \"{}\")", "K".repeat(300));
    assert_eq!(error(&long).kind, SbplErrorKind::BadValue);
}
