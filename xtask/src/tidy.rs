//! Tidy checks, run as ordinary tests so that `cargo test` green means the tree is tidy
//! (rust-analyzer's `xtask/src/tidy.rs` pattern).
//!
//! Each check names the file and line it objects to and says what to do instead.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workspace_root;

/// Every file under version control (plus new, not yet ignored files), so the checks see exactly
/// what a commit would contain and never `target/`.
fn project_files() -> Vec<PathBuf> {
    let root = workspace_root();
    let out = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(&root)
        .output()
        .expect("git ls-files runs");
    assert!(out.status.success(), "git ls-files failed: {out:?}");
    out.stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| root.join(String::from_utf8_lossy(p).as_ref()))
        .filter(|p| p.is_file())
        .collect()
}

fn files_with_ext(exts: &[&str]) -> Vec<PathBuf> {
    project_files()
        .into_iter()
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| exts.contains(&e))
        })
        .collect()
}

fn rel(path: &Path) -> String {
    path.strip_prefix(workspace_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn every_rust_file_starts_with_a_module_doc() {
    let mut bad = Vec::new();
    for file in files_with_ext(&["rs"]) {
        let text = fs::read_to_string(&file).unwrap();
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        if !first.starts_with("//!") {
            bad.push(rel(&file));
        }
    }
    assert!(
        bad.is_empty(),
        "these files must open with a `//!` doc saying what the module owns: {bad:#?}"
    );
}

#[test]
fn no_trailing_whitespace() {
    let mut bad = Vec::new();
    for file in files_with_ext(&["rs", "toml", "md", "sh", "yml", "yaml", "json"]) {
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.ends_with(' ') || line.ends_with('\t') {
                bad.push(format!("{}:{}", rel(&file), n + 1));
            }
        }
    }
    assert!(bad.is_empty(), "trailing whitespace, remove it: {bad:#?}");
}

#[test]
fn no_ignored_tests() {
    // Built from pieces so this file does not match itself.
    let needle = concat!("#[", "ignore");
    let mut bad = Vec::new();
    for file in files_with_ext(&["rs"]) {
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.contains(needle) {
                bad.push(format!("{}:{}", rel(&file), n + 1));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "ignored tests are not allowed; a test that needs a missing capability prints why and \
         returns early instead: {bad:#?}"
    );
}

/// The layer of each workspace member, as in docs/architecture.md: arrows only point down.
/// `testkit` is test-only: it may be only a dev-dependency, and it depends on no workspace crate
/// but the leaves whose probes decide its capability skips ([`TESTKIT_PROBES`]; checked in
/// `workspace_dependency_arrows_point_down`).
fn layer(name: &str) -> Option<u8> {
    Some(match name {
        "toolscope" | "fsguard" | "gitstage" | "seatbelt" | "linux-sandbox" | "proctree"
        | "argv-policy" | "testkit" => 0,
        "exec" => 1,
        "run-tool" | "command-tool" | "run-command-tool" | "file-tools" => 2,
        "host-shim" => 3,
        "agent-exec" => 4,
        "xtask" | "tests" => 5,
        _ => return None,
    })
}

fn metadata(no_deps: bool) -> serde_json::Value {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(["metadata", "--format-version", "1"])
        .current_dir(workspace_root());
    if no_deps {
        cmd.arg("--no-deps");
    }
    let out = cmd.output().expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata failed: {out:?}");
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// The crates `testkit::require` asks whether a capability is present: the code under test's own
/// probes, so a test skips exactly when that code would refuse to run.
const TESTKIT_PROBES: &[&str] = &["linux-sandbox", "proctree"];

/// `Some(violation)` when a dependency edge between two workspace crates breaks the layering.
/// `dev` edges to `testkit` are allowed from anywhere; any other edge to it is not.
fn forbidden_edge(from: &str, to: &str, dev: bool) -> Option<String> {
    if to == "testkit" {
        return (!dev).then(|| format!("{from} may use testkit only as a dev-dependency"));
    }
    if from == "testkit" {
        return (!TESTKIT_PROBES.contains(&to)).then(|| {
            format!(
                "testkit may depend only on the probes of {TESTKIT_PROBES:?}, not {to}: \
                 fixtures hand out paths and each suite builds its own values from them"
            )
        });
    }
    let (lf, lt) = (layer(from)?, layer(to)?);
    if lf == 0 {
        return Some(format!(
            "{from} is a leaf and may depend on no workspace crate, not {to}"
        ));
    }
    if lt >= lf && lf < 5 {
        return Some(format!(
            "{from} (layer {lf}) may only depend on lower layers, not {to} (layer {lt}); \
             compose through a trait instead"
        ));
    }
    None
}

#[test]
fn layering_rule_rejects_sideways_and_upward_edges() {
    assert!(forbidden_edge("fsguard", "toolscope", false).is_some());
    assert!(forbidden_edge("fsguard", "toolscope", true).is_some());
    assert!(forbidden_edge("run-tool", "command-tool", false).is_some());
    assert!(forbidden_edge("exec", "run-tool", false).is_some());
    assert!(forbidden_edge("exec", "exec", false).is_some());
    assert!(forbidden_edge("testkit", "fsguard", false).is_some());
    assert!(forbidden_edge("testkit", "exec", false).is_some());
    assert!(forbidden_edge("testkit", "linux-sandbox", false).is_none());
    assert!(forbidden_edge("testkit", "proctree", false).is_none());
    assert!(forbidden_edge("run-tool", "exec", false).is_none());
    assert!(forbidden_edge("host-shim", "fsguard", false).is_none());
    assert!(forbidden_edge("tests", "host-shim", false).is_none());
    assert!(forbidden_edge("agent-exec", "host-shim", false).is_none());
    assert!(forbidden_edge("host-shim", "agent-exec", false).is_some());
    assert!(forbidden_edge("file-tools", "host-shim", false).is_some());
    assert!(forbidden_edge("fsguard", "testkit", true).is_none());
    assert!(forbidden_edge("exec", "testkit", false).is_some());
}

#[test]
fn workspace_dependency_arrows_point_down() {
    let meta = metadata(true);
    let mut bad = Vec::new();
    for pkg in meta["packages"].as_array().unwrap() {
        let from = pkg["name"].as_str().unwrap();
        assert!(
            layer(from).is_some(),
            "workspace member `{from}` has no layer; add it to tidy::layer and docs/architecture.md"
        );
        for dep in pkg["dependencies"].as_array().unwrap() {
            if dep["path"].is_string() {
                let to = dep["name"].as_str().unwrap();
                let dev = dep["kind"].as_str() == Some("dev");
                bad.extend(forbidden_edge(from, to, dev));
            }
        }
    }
    assert!(bad.is_empty(), "forbidden dependency arrows: {bad:#?}");
}

/// Whether an SPDX expression leaves a choice free of the GPL family. `OR` alternatives are
/// enough when one of them is clean; every `AND` term of the chosen alternative must be clean.
/// Parentheses are flattened, which is exact for the expressions found on crates.io.
fn licence_is_acceptable(expr: &str) -> bool {
    let flat = expr.replace(['(', ')'], " ").replace('/', " OR ");
    flat.split(" OR ").any(|alt| {
        alt.split(" AND ")
            .all(|term| !term.trim().to_ascii_uppercase().contains("GPL"))
    })
}

#[test]
fn licence_rule_understands_spdx_choices() {
    assert!(licence_is_acceptable("MIT OR Apache-2.0"));
    assert!(licence_is_acceptable("MIT/Apache-2.0"));
    assert!(licence_is_acceptable(
        "MIT OR Apache-2.0 OR LGPL-2.1-or-later"
    ));
    assert!(!licence_is_acceptable("GPL-3.0-only"));
    assert!(!licence_is_acceptable("AGPL-3.0"));
    assert!(!licence_is_acceptable("MIT AND LGPL-2.1"));
    assert!(!licence_is_acceptable("(GPL-2.0 OR LGPL-2.1)"));
}

#[test]
fn no_dependency_is_gpl_only() {
    let meta = metadata(false);
    let mut bad = Vec::new();
    for pkg in meta["packages"].as_array().unwrap() {
        let name = pkg["name"].as_str().unwrap_or("?");
        match pkg["license"].as_str() {
            Some(expr) if !licence_is_acceptable(expr) => bad.push(format!("{name}: {expr}")),
            Some(_) => {}
            None if pkg["source"].is_null() => {} // our own crates inherit the workspace licence
            None => bad.push(format!(
                "{name}: no licence expression (check its licence file)"
            )),
        }
    }
    assert!(
        bad.is_empty(),
        "dependencies without a non-GPL licence choice; pick another crate: {bad:#?}"
    );
}

// ---- drift between the docs, the workspace and its manifests ---------------------------------

/// The directory of each workspace member, relative to the root (`crates/exec`, `xtask`).
fn member_dirs(meta: &serde_json::Value) -> BTreeSet<String> {
    meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pkg| {
            let manifest = Path::new(pkg["manifest_path"].as_str().unwrap());
            rel(manifest.parent().unwrap())
        })
        .collect()
}

/// The member directories `docs/architecture.md` gives a section: every backticked name in a
/// `### ` heading (`### \`crates/exec\` (middle)`, `### \`xtask\` and \`tests\` (dev)`).
fn documented_crates(architecture: &str) -> BTreeSet<String> {
    architecture
        .lines()
        .filter(|l| l.starts_with("### "))
        .flat_map(|l| l.split('`').skip(1).step_by(2).map(str::to_owned))
        .collect()
}

#[test]
fn architecture_headings_are_read_as_crate_directories() {
    let doc = "# A\n### `crates/a` (leaf)\ntext `crates/z`\n### `crates/b`, `crates/c` (tools)\n\
               ### `xtask` and `tests` (dev)\n";
    let found: Vec<String> = documented_crates(doc).into_iter().collect();
    assert_eq!(
        found,
        ["crates/a", "crates/b", "crates/c", "tests", "xtask"]
    );
}

#[test]
fn the_crate_list_in_architecture_md_matches_the_workspace_members() {
    let doc = fs::read_to_string(workspace_root().join("docs/architecture.md")).unwrap();
    let documented = documented_crates(&doc);
    let members = member_dirs(&metadata(true));
    let undocumented: Vec<&String> = members.difference(&documented).collect();
    let gone: Vec<&String> = documented.difference(&members).collect();
    assert!(
        undocumented.is_empty() && gone.is_empty(),
        "docs/architecture.md's code map and the workspace disagree: members without a `### \
         `<dir>`` section (add one with its Architecture Invariant and API boundary): \
         {undocumented:?}; sections naming no member (rename or remove them): {gone:?}"
    );
}

/// Every `cargo xtask …` a text names, as (task, benchmark) words: the benchmark only for a
/// backticked `cargo xtask bench NAME` (alternatives `a|b` split), where the command ends at the
/// closing backtick. Comment markers at the start of a continued line are skipped, so a mention
/// wrapped in a doc comment reads as one.
fn xtask_mentions(text: &str) -> Vec<(String, Option<String>)> {
    let needle = concat!("cargo ", "xtask");
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(needle) {
        let quoted = rest[..at].ends_with('`');
        let after = &rest[at + needle.len()..];
        rest = after;
        // The words after the needle, across at most one line break.
        let mut words = String::new();
        for (n, line) in after.lines().take(2).enumerate() {
            let line = if n == 0 {
                line
            } else {
                line.trim_start()
                    .trim_start_matches(['/', '!', '#'])
                    .trim_start()
            };
            let (line, closed) = match line.find('`') {
                Some(end) if quoted => (&line[..end], true),
                _ => (line, false),
            };
            words.push(' ');
            words.push_str(line);
            if closed || !quoted {
                break;
            }
        }
        let mut tokens = words
            .split_whitespace()
            .map(|w| w.trim_end_matches([',', '.', ';', ':', ')']));
        // A placeholder (`<task>`, `NAME`, `…`, `{name}`) names no task.
        let is_name = |w: &str| {
            w.starts_with(|c: char| c.is_ascii_lowercase())
                && w.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-|".contains(c))
        };
        let Some(task) = tokens.next().filter(|w| is_name(w)) else {
            continue;
        };
        let bench = tokens
            .next()
            .filter(|w| quoted && task == "bench" && is_name(w));
        match bench {
            Some(w) => {
                for name in w.split('|') {
                    found.push((task.to_owned(), Some(name.to_owned())));
                }
            }
            _ => found.push((task.to_owned(), None)),
        }
    }
    found
}

#[test]
fn xtask_mentions_are_read_with_their_benchmark() {
    // Written with `XTASK` so this file does not name those tasks itself.
    let text = "Run `cargo XTASK ci`; benchmarks: `cargo XTASK bench\n//! scan|call --runs 3`.\n\
                cargo XTASK macos on a Mac, `cargo XTASK bench` alone, `cargo XTASK <task>`, \
                `cargo XTASK bench NAME`.";
    let found = xtask_mentions(&text.replace("XTASK", "xtask"));
    let expected = [
        ("ci", None),
        ("bench", Some("scan")),
        ("bench", Some("call")),
        ("macos", None),
        ("bench", None),
        ("bench", None),
    ];
    let expected: Vec<(String, Option<String>)> = expected
        .iter()
        .map(|(t, b)| (t.to_string(), b.map(str::to_owned)))
        .collect();
    assert_eq!(found, expected);
}

#[test]
fn every_xtask_task_the_project_names_exists() {
    let mut bad = Vec::new();
    for file in files_with_ext(&["md", "rs", "toml"]) {
        let text = fs::read_to_string(&file).unwrap();
        for (task, bench) in xtask_mentions(&text) {
            let known = match &bench {
                None => crate::task(&task).is_some(),
                Some(name) => {
                    task == "bench" && crate::bench::BENCHMARKS.iter().any(|(b, _)| b == name)
                }
            };
            if !known {
                let what = bench.map_or(task.clone(), |b| format!("{task} {b}"));
                bad.push(format!("{}: `cargo xtask {what}`", rel(&file)));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "these name an xtask task the dispatcher does not have; build it in xtask/src/main.rs \
         (or bench.rs) or stop naming it: {bad:#?}"
    );
}

#[test]
fn the_task_list_and_the_dispatcher_agree() {
    for (row, _) in crate::TASKS {
        let mut words = row.split_whitespace();
        let task = words.next().unwrap();
        assert!(
            crate::task(task).is_some(),
            "`{row}` is listed but not dispatched"
        );
        if task == "bench" {
            let name = words.next().unwrap();
            assert!(
                crate::bench::BENCHMARKS.iter().any(|(b, _)| *b == name),
                "`{row}` is listed but bench.rs has no `{name}`"
            );
        }
    }
    for (name, _) in crate::DISPATCH {
        assert!(
            crate::TASKS
                .iter()
                .any(|(row, _)| row.split_whitespace().next() == Some(name)),
            "`{name}` is dispatched but `cargo xtask` does not list it"
        );
    }
    for (name, _) in crate::bench::BENCHMARKS {
        let row = format!("bench {name}");
        assert!(
            crate::TASKS.iter().any(|(r, _)| r.starts_with(&row)),
            "`{row}` runs but `cargo xtask` does not list it"
        );
    }
}

/// Dependencies a crate declares without naming them in its sources, each with the reason.
/// Keep this short: a dependency nothing names is usually one nobody needs.
const UNNAMED_DEPENDENCIES: &[(&str, &str, &str)] = &[];

/// Whether Rust source `text` names the crate `ident` as a path (`ident::…`), in a `use` or in
/// an `extern crate`: the forms through which a dependency is used.
fn names_crate(text: &str, ident: &str) -> bool {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(ident).any(|(at, _)| {
        let before = &text[..at];
        let after = &text[at + ident.len()..];
        if before.ends_with(is_ident) || after.starts_with(is_ident) {
            return false;
        }
        after.starts_with("::") || before.ends_with("use ") || before.ends_with("extern crate ")
    })
}

#[test]
fn a_crate_is_named_only_through_its_paths() {
    assert!(names_crate("use serde_json::json;", "serde_json"));
    assert!(names_crate("#[derive(serde::Serialize)]", "serde"));
    assert!(names_crate("use libc;", "libc"));
    assert!(!names_crate("use my_serde::x;", "serde"));
    assert!(!names_crate("serde_json::to_string", "serde"));
    assert!(!names_crate("the tempfile crate", "tempfile"));
}

/// The Rust sources of the package whose manifest is `manifest`: every tracked `.rs` file
/// below its directory that no other member's directory holds.
fn package_sources(manifest: &Path, members: &BTreeSet<String>, files: &[PathBuf]) -> String {
    let dir = manifest.parent().unwrap();
    let own = rel(dir);
    let mut text = String::new();
    for file in files.iter().filter(|f| f.starts_with(dir)) {
        let inner = members.iter().any(|m| {
            m != &own && m.starts_with(&format!("{own}/")) && rel(file).starts_with(m.as_str())
        });
        if !inner {
            text.push_str(&fs::read_to_string(file).unwrap());
            text.push('\n');
        }
    }
    text
}

#[test]
fn every_declared_dependency_is_used() {
    let meta = metadata(true);
    let members = member_dirs(&meta);
    let files = files_with_ext(&["rs"]);
    let mut bad = Vec::new();
    let mut used = BTreeSet::new();
    for pkg in meta["packages"].as_array().unwrap() {
        let name = pkg["name"].as_str().unwrap();
        let manifest = Path::new(pkg["manifest_path"].as_str().unwrap());
        let sources = package_sources(manifest, &members, &files);
        for dep in pkg["dependencies"].as_array().unwrap() {
            let dep_name = dep["name"].as_str().unwrap();
            used.insert(dep_name.to_owned());
            let ident = dep["rename"].as_str().unwrap_or(dep_name).replace('-', "_");
            let excused = UNNAMED_DEPENDENCIES
                .iter()
                .any(|(p, d, _)| *p == name && *d == dep_name);
            if !excused && !names_crate(&sources, &ident) {
                let kind = dep["kind"].as_str().unwrap_or("normal");
                bad.push(format!("{name}: {dep_name} ({kind})"));
            }
        }
    }
    let root = fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
    for dep in workspace_dependency_names(&root) {
        if !used.contains(&dep) {
            bad.push(format!(
                "[workspace.dependencies]: {dep} (no member uses it)"
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "declared dependencies nothing uses; remove them from the Cargo.toml, or, when one is \
         needed without being named (a feature switch), add it to tidy's UNNAMED_DEPENDENCIES \
         with the reason: {bad:#?}"
    );
}

/// The third-party names `[workspace.dependencies]` declares in the root manifest (`name = …`
/// lines of that table). Entries with a `path` are the members themselves, listed so that other
/// members can name them; the top of the house has no member above it to use its entry.
fn workspace_dependency_names(manifest: &str) -> Vec<String> {
    manifest
        .lines()
        .skip_while(|l| l.trim() != "[workspace.dependencies]")
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter(|l| !l.trim_start().starts_with('#') && !l.contains("path ="))
        .filter_map(|l| l.split(['=', '.']).next())
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn workspace_dependency_names_are_read_from_their_table() {
    let manifest = "[workspace]\nmembers = []\n[workspace.dependencies]\n# x\nfoo = \"1\"\n\
                    me = { path = \"crates/me\" }\n\
                    bar-baz = { version = \"2\" }\n\n[workspace.lints.rust]\nqux = \"deny\"\n";
    assert_eq!(workspace_dependency_names(manifest), ["foo", "bar-baz"]);
}

// ---- references a clone resolves, and comments that describe the code as it is ---------------

/// The groups of `docs/requirements.md`: an ID is a group, a dash and a number (`RUN-4`).
const REQUIREMENT_GROUPS: &[&str] = &[
    "TS", "PERM", "RUN", "CMD", "FILE", "RC", "BG", "LIVE", "RCS", "TRUST", "NET", "PORT", "HOST",
    "LIM",
];

/// Whether `c` continues a word, so `USER-DATA-4` or `RUN-4a` is no requirement ID.
fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every requirement ID `text` cites, in order: a group of [`REQUIREMENT_GROUPS`], a dash and
/// digits, with no word character or dash before and no word character after.
fn cited_requirements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices('-') {
        let before = &text[..i];
        let group_start = before
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_uppercase())
            .last()
            .map_or(i, |(j, _)| j);
        let group = &before[group_start..];
        if !REQUIREMENT_GROUPS.contains(&group) {
            continue;
        }
        if before[..group_start]
            .chars()
            .next_back()
            .is_some_and(|c| word_char(c) || c == '-')
        {
            continue;
        }
        let digits: String = text[i + 1..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let after = text[i + 1 + digits.len()..].chars().next();
        if digits.is_empty() || after.is_some_and(word_char) {
            continue;
        }
        out.push(format!("{group}-{digits}"));
    }
    out
}

/// The IDs `docs/requirements.md` defines: each entry opens with `- **ID**`.
fn defined_requirements(requirements: &str) -> BTreeSet<String> {
    requirements
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("- **"))
        .filter_map(|l| l.split("**").next())
        .filter(|id| cited_requirements(id).len() == 1)
        .map(str::to_owned)
        .collect()
}

/// The invariant numbers a text cites (`invariant 4`, `invariants 2, 4 and 5`, `invariants 1–7`),
/// each with the line it is on.
fn cited_invariants(text: &str) -> Vec<(usize, u32)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for (i, _) in line.match_indices("invariant") {
            let mut rest = line[i + "invariant".len()..].trim_start_matches('s');
            let mut range_from = None;
            while let Some(r) = rest.strip_prefix(' ').or(rest.strip_prefix('–')) {
                let digits: String = r.chars().take_while(char::is_ascii_digit).collect();
                let Ok(k) = digits.parse::<u32>() else {
                    break;
                };
                match range_from.take() {
                    Some(from) => out.extend((from + 1..=k).map(|k| (n + 1, k))),
                    None => out.push((n + 1, k)),
                }
                rest = &r[digits.len()..];
                if rest.starts_with('–') {
                    range_from = Some(k);
                } else if let Some(r) = rest.strip_prefix(',').or(rest.strip_prefix(" and")) {
                    rest = r;
                } else {
                    break;
                }
            }
        }
    }
    out
}

/// How many numbered invariants `docs/architecture.md`'s `## Invariants` section lists.
fn defined_invariants(architecture: &str) -> u32 {
    let count = architecture
        .lines()
        .skip_while(|l| l.trim() != "## Invariants")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| {
            l.split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        })
        .count();
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// The text files the reference checks read: sources, manifests, docs and scripts, not the fuzz
/// corpus (inputs, not prose) and not the lock file.
fn prose_files() -> Vec<PathBuf> {
    project_files()
        .into_iter()
        .filter(|p| {
            let r = rel(p);
            let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
            !r.starts_with("fuzz/corpus/")
                && (["rs", "md", "toml", "sh", "yml", "yaml"].contains(&ext) || r == ".ci/run")
        })
        .collect()
}

#[test]
fn requirement_ids_are_read_as_whole_words() {
    let text = "RUN-4, (TRUST-1) RCS-3; RC-2… USER-DATA-4 RUN-4a NF-1 X-RUN-2 RUN- `CMD-12`";
    assert_eq!(
        cited_requirements(text),
        ["RUN-4", "TRUST-1", "RCS-3", "RC-2", "CMD-12"]
    );
    let doc = "# R\n- **RUN-4** text RC-9.\n- **TS-1** more\n  - **nested** no\n";
    let defined: Vec<String> = defined_requirements(doc).into_iter().collect();
    assert_eq!(defined, ["RUN-4", "TS-1"]);
}

#[test]
fn invariants_are_read_with_lists_and_ranges() {
    let text = "(invariant 4)\ninvariants 2, 4 and 5; invariants 1–3.\nArchitecture Invariant: x";
    assert_eq!(
        cited_invariants(text),
        [(1, 4), (2, 2), (2, 4), (2, 5), (2, 1), (2, 2), (2, 3)]
    );
    let doc = "## Invariants\n1. One.\n2. Two\n   wrapped.\n## Next\n3. Not here.\n";
    assert_eq!(defined_invariants(doc), 2);
}

#[test]
fn every_cited_requirement_exists() {
    let root = workspace_root();
    let requirements = fs::read_to_string(root.join("docs/requirements.md")).unwrap();
    let architecture = fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let defined = defined_requirements(&requirements);
    let invariants = defined_invariants(&architecture);
    assert!(!defined.is_empty() && invariants > 0, "nothing defined?");
    let mut bad = Vec::new();
    for file in prose_files() {
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for id in cited_requirements(line) {
                if !defined.contains(&id) {
                    bad.push(format!("{}:{}: {id}", rel(&file), n + 1));
                }
            }
        }
        for (n, k) in cited_invariants(&text) {
            if k == 0 || k > invariants {
                bad.push(format!("{}:{n}: invariant {k}", rel(&file)));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "cited but not defined: a requirement ID must have an entry in docs/requirements.md, an \
         invariant number a numbered item under `## Invariants` in docs/architecture.md: {bad:#?}"
    );
}

/// Whether `rel` is test code: a file under a `tests` or `benches` directory, or a `tests.rs`.
/// Everything else (sources, examples, fuzz targets, manifests, docs, scripts) is not.
fn is_test_file(rel: &str) -> bool {
    let path = Path::new(rel);
    path.components()
        .any(|c| c.as_os_str() == "tests" || c.as_os_str() == "benches")
        || path.file_name().is_some_and(|n| n == "tests.rs")
}

/// Where `line` names an issue by number: `issue`, an optional `s`, spaces or `#`, then a digit,
/// in any letter case. The column of each.
fn issue_numbers(line: &str) -> Vec<usize> {
    let lower = line.to_ascii_lowercase();
    lower
        .match_indices("issue")
        .filter(|(i, _)| !lower[..*i].chars().next_back().is_some_and(word_char))
        .filter(|(i, _)| {
            let rest = lower[i + "issue".len()..].trim_start_matches('s');
            let rest = rest.trim_start_matches(' ').trim_start_matches('#');
            rest.starts_with(|c: char| c.is_ascii_digit())
        })
        .map(|(i, _)| i + 1)
        .collect()
}

#[test]
fn issue_numbers_are_found_in_every_spelling() {
    // Built from pieces so this file does not match itself.
    let (a, b) = (concat!("(Iss", "ue 21)"), concat!("iss", "ues #14 and 16"));
    assert_eq!(issue_numbers(&format!("x {a} and {b}")), [4, 18]);
    assert!(issue_numbers("an issue, tissue 5, issues of 2024's").is_empty());
}

/// Each non-test prose file ([`prose_files`] but for [`is_test_file`]), as its path relative to
/// the root and its text.
fn non_test_prose() -> Vec<(String, String)> {
    prose_files()
        .into_iter()
        .map(|file| (rel(&file), file))
        .filter(|(r, _)| !is_test_file(r))
        .map(|(r, file)| (r, fs::read_to_string(file).unwrap()))
        .collect()
}

#[test]
fn no_issue_numbers_outside_tests() {
    let mut bad = Vec::new();
    for (r, text) in non_test_prose() {
        for (n, line) in text.lines().enumerate() {
            for col in issue_numbers(line) {
                bad.push(format!("{r}:{}:{col}", n + 1));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "issue numbers in non-test sources: say what the code does and why, in the present \
         tense; how it got there belongs in the commit message: {bad:#?}"
    );
}

/// Phrases that narrate how the code got here rather than what it does: rounds of review,
/// passes of attack, what it once did. Lowercase; a trailing `#` stands for any digit.
/// Present-tense uses of the same words (`no longer exists`, `for review`, `attack surface`)
/// are not listed.
const HISTORY_PHRASES: &[&str] = &[
    "review #",
    "review round",
    "review of",
    "(review",
    "reviewer",
    "found in review",
    "attack #",
    "attack of",
    "attack finding",
    "attack pass",
    "(attack",
    "used to be ",
    "used to say",
    "used to keep",
    "used to take",
    "used to run",
    "this once was",
    "before this change",
];

/// The history phrases of [`HISTORY_PHRASES`] a comment line holds.
fn history_phrases(comment: &str) -> Vec<&'static str> {
    let lower = comment.to_ascii_lowercase();
    HISTORY_PHRASES
        .iter()
        .copied()
        .filter(|p| {
            let stem = p.strip_suffix('#').unwrap_or(p);
            lower.match_indices(stem).any(|(i, _)| {
                let whole = !stem.starts_with(char::is_alphanumeric)
                    || !lower[..i].chars().next_back().is_some_and(word_char);
                let digit = lower[i + stem.len()..].starts_with(|c: char| c.is_ascii_digit());
                whole && (digit || !p.ends_with('#'))
            })
        })
        .collect()
}

/// The comment part of each line of a file, by kind: `//` comments of Rust, `#` comments of
/// manifests and scripts, every line of Markdown.
fn comment_lines(rel: &str, text: &str) -> Vec<(usize, String)> {
    let md = rel.ends_with(".md");
    let rust = rel.ends_with(".rs");
    text.lines()
        .enumerate()
        .filter_map(|(n, line)| {
            let t = line.trim_start();
            let comment = if md {
                Some(t)
            } else if rust {
                line.find("//").map(|i| &line[i..])
            } else {
                t.starts_with('#').then_some(t)
            };
            comment.map(|c| (n + 1, c.to_owned()))
        })
        .collect()
}

#[test]
fn history_phrases_are_found_and_present_tense_passes() {
    assert_eq!(
        history_phrases(concat!("// refused (rev", "iew 5); the attack", " of x")),
        ["review #", "(review", "attack of"]
    );
    assert!(
        history_phrases("// no longer exists; for review; refused to run; attack surface")
            .is_empty()
    );
    let lines = comment_lines("a.rs", "let x = 1; // note\nlet y = 2;\n");
    assert_eq!(lines, [(1, "// note".to_owned())]);
}

#[test]
fn no_history_in_comments_outside_tests() {
    let mut bad = Vec::new();
    for (r, text) in non_test_prose() {
        for (n, comment) in comment_lines(&r, &text) {
            for phrase in history_phrases(&comment) {
                bad.push(format!("{r}:{n}: {phrase:?}"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "comments that narrate history (rounds of review, passes of attack, what the code once \
         did): say what it does now and why; the story belongs in the commit message: {bad:#?}"
    );
}
