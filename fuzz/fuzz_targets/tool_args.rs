//! Each tool's JSON arguments (read, write, edit, grep, run, command, run_command, background).
//!
//! Each goes through its own parser and validator, in a fresh temp dir per
//! input (nothing outside it is written; no process is started: `run` and `command` are only
//! validated, `run_command` and `background_command` only parsed and decided). The first byte
//! picks the tool, the rest is the JSON text.
//!
//! Properties: never a panic; every refusal has a message; `write` that succeeds leaves exactly
//! the content at the normalised path inside the root, through no symbolic link (a link to
//! outside is in the fixture); no tool ever creates a `.git` entry; a validated `command`
//! keeps the command as sent, its extra paths absolute and outside the scope; a validated `run`
//! has a `cwd` that is a normalised relative path.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use argv_policy::{Context, Decision, Mode, Policy, RunCommandArgs, decide};
use file_tools::{FileTool, FileToolOptions};
use fsguard::{RelPath, RootLease};
use libfuzzer_sys::fuzz_target;

mod common;
use serde_json::Value;
use toolscope::ToolError;

const FILE_TOOLS: [FileTool; 4] = [
    FileTool::Read,
    FileTool::Write,
    FileTool::Edit,
    FileTool::Grep,
];

fn policy() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY.get_or_init(|| Policy::load(Mode::Safe, None).expect("the built-in policy loads"))
}

fn refused(e: &ToolError) {
    assert!(
        !e.message().trim().is_empty(),
        "a refusal without a message: {e:?}"
    );
}

/// No entry under `dir` is named `.git` in any case.
fn no_git(dir: &Path) {
    for entry in std::fs::read_dir(dir)
        .expect("the fixture is readable")
        .flatten()
    {
        let name = entry.file_name();
        assert!(
            !name.to_string_lossy().eq_ignore_ascii_case(".git"),
            "a tool made {}",
            entry.path().display()
        );
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            no_git(&entry.path());
        }
    }
}

fn fixture(root: &Path) {
    std::fs::write(root.join("a.txt"), "hello\nworld\n").expect("fixture");
    std::fs::create_dir(root.join("sub")).expect("fixture");
    std::fs::write(root.join("sub/b.txt"), "one two\n").expect("fixture");
    std::os::unix::fs::symlink("/etc", root.join("link")).expect("fixture");
}

/// `write` succeeded: the content is at the normalised path, reached through directories only.
fn written(root: &Path, args: &Value) {
    let path = args["path"]
        .as_str()
        .expect("a write that succeeded had a path");
    let content = args["content"].as_str().expect("and content");
    let rel = RelPath::new(path).expect("a written path is valid");
    let mut at = root.to_path_buf();
    for comp in rel.components() {
        at.push(comp);
        let meta = std::fs::symlink_metadata(&at).expect("the written path exists");
        assert!(
            !meta.file_type().is_symlink(),
            "written through a link: {}",
            at.display()
        );
    }
    assert_eq!(std::fs::read(&at).expect("readable"), content.as_bytes());
}

fn run_file_tool(tool: FileTool, root: &Path, args: Value) {
    let lease = RootLease::acquire(root).expect("a lease on the temp dir");
    match tool.run(&lease, args.clone(), &FileToolOptions::default()) {
        Ok(out) => {
            assert!(out.is_object(), "{out}");
            if tool == FileTool::Write {
                written(root, &args);
            }
        }
        Err(e) => refused(&e),
    }
}

/// Extra paths are moved under the temp dir (which holds the scope and a sibling `outside`),
/// so validation only ever looks there.
fn confine_extra_paths(args: &mut Value, base: &Path) {
    let Some(items) = args.get_mut("extraPaths").and_then(Value::as_array_mut) else {
        return;
    };
    for p in items.iter_mut().filter_map(|item| item.get_mut("path")) {
        if let Some(s) = p.as_str() {
            let inside = if s.contains("..") {
                base.join("x").display().to_string()
            } else {
                base.join(s.trim_start_matches('/')).display().to_string()
            };
            *p = Value::from(inside);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    common::let_argv_policy_catch_parser_panics();
    let Some((&which, text)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let which = which % 8;
    if which == 6 {
        // run_command: its own text parser, then the decision.
        match RunCommandArgs::from_json(text) {
            Ok(args) => {
                let ctx = Context::new("/nonexistent/agent-exec-fuzz", "/nonexistent/home");
                if let Decision::Refuse { message, .. } = decide(&args, policy(), &ctx) {
                    assert!(!message.trim().is_empty());
                }
            }
            Err(r) => assert!(!r.message.trim().is_empty()),
        }
        return;
    }
    let Ok(mut args) = serde_json::from_str::<Value>(text) else {
        return;
    };
    if which == 7 {
        if let Err(e) = run_command_tool::background::BackgroundArgs::from_json(&args) {
            refused(&e);
        }
        return;
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    let base = dir.path().canonicalize().expect("the temp dir resolves");
    let root = base.join("scope");
    std::fs::create_dir(&root).expect("fixture");
    std::fs::create_dir(base.join("outside")).expect("fixture");
    std::fs::write(base.join("outside/c.txt"), "c\n").expect("fixture");
    fixture(&root);
    match which {
        0..=3 => run_file_tool(FILE_TOOLS[usize::from(which)], &root, args),
        4 => match run_tool::AgentRunArguments::from_json(args) {
            Ok(parsed) => {
                let lease = RootLease::acquire(&root).expect("a lease");
                match run_tool::validate(&parsed, &lease) {
                    Ok(v) => {
                        let cwd = v.cwd().as_path();
                        assert!(!cwd.is_absolute(), "{cwd:?}");
                        assert_eq!(RelPath::new(cwd).expect("cwd re-validates").as_path(), cwd);
                    }
                    Err(e) => refused(&e),
                }
            }
            Err(e) => refused(&e),
        },
        _ => {
            confine_extra_paths(&mut args, &base);
            match command_tool::CommandArguments::from_json(args) {
                Ok(parsed) => {
                    let lease = RootLease::acquire(&root).expect("a lease");
                    match command_tool::validate(&parsed, &lease) {
                        Ok(v) => {
                            assert_eq!(v.command(), parsed.command);
                            assert!(!v.command().contains('\0'));
                            for extra in v.extra_paths() {
                                assert!(extra.path().is_absolute());
                                assert!(
                                    !extra.path().starts_with(&root),
                                    "an extra path inside the scope: {}",
                                    extra.path().display()
                                );
                            }
                        }
                        Err(e) => refused(&e),
                    }
                }
                Err(e) => refused(&e),
            }
        }
    }
    no_git(&base);
});
