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

/// The layer of each workspace member, as in docs/architecture.md: arrows only point down. `testkit` is
/// test-only: it may be only a dev-dependency, and it depends on no workspace crate but the
/// leaves whose probes decide its capability skips ([`TESTKIT_PROBES`]; checked in
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
