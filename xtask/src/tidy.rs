//! Tidy checks, run as ordinary tests so that `cargo test` green means the tree is tidy
//! (rust-analyzer's `xtask/src/tidy.rs` pattern).
//!
//! Each check names the file and line it objects to and says what to do instead.

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

/// The layer of each workspace member, as in DESIGN.md: arrows only point down. `testkit` is
/// test-only: it depends on no workspace crate and may be only a dev-dependency (checked in
/// `workspace_dependency_arrows_point_down`).
fn layer(name: &str) -> Option<u8> {
    Some(match name {
        "toolscope" | "fsguard" | "seatbelt" | "linux-sandbox" | "proctree" | "testkit" => 0,
        "exec" => 1,
        "run-tool" | "command-tool" | "argv-tools" | "file-tools" => 2,
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

/// `Some(violation)` when a dependency edge between two workspace crates breaks DESIGN's layering.
/// `dev` edges to `testkit` are allowed from anywhere; any other edge to it is not.
fn forbidden_edge(from: &str, to: &str, dev: bool) -> Option<String> {
    if to == "testkit" {
        return (!dev).then(|| format!("{from} may use testkit only as a dev-dependency"));
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
            "workspace member `{from}` has no layer; add it to tidy::layer and DESIGN.md"
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
