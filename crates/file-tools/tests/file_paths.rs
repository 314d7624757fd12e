//! The file tools never re-resolve a path after validation (issue 14, item 3): every open of a
//! workspace path walks from the pinned root's descriptor with `O_NOFOLLOW`. Each race test
//! has a thread swap a workspace directory for a symlink to an outside directory and back with
//! `renameat2(RENAME_EXCHANGE)`, thousands of times a second, while the tool runs again and
//! again; an inotify watch on the outside tree proves that not one access reached it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::fs;
use std::path::{Path, PathBuf};

use file_tools::{EditArguments, GrepArguments, GrepOutput, ReadArguments, WriteArguments};
use serde_json::{Value, json};
use testkit::{Swapper, TempTree, Watch};

/// Attempts per race test: each races one whole tool call against the swapper.
const ATTEMPTS: usize = 300;

fn lease(tree: &TempTree) -> fsguard::RootLease {
    fsguard::RootLease::acquire(&tree.root).unwrap()
}

fn grep(root: &fsguard::RootLease, args: Value) -> GrepOutput {
    let args: GrepArguments = serde_json::from_value(args).unwrap();
    file_tools::grep(root, args).unwrap()
}

fn paths(out: &GrepOutput) -> Vec<&str> {
    out.matches.iter().map(|m| m.path.as_str()).collect()
}

/// `outside/` beside the workspace: secrets, ignore rules that would hide the workspace's
/// files, and a subdirectory; returns every path in it, for the watch.
fn outside(tree: &TempTree) -> Vec<PathBuf> {
    let mut all = vec![
        tree.outside("secret.txt", "needle SECRET\n"),
        tree.outside("inside.txt", "needle SECRET\n"),
        tree.outside(".gitignore", "*.txt\n"),
        tree.outside(".ignore", "*.txt\n"),
        tree.outside("deeper/more.txt", "needle SECRET\n"),
    ];
    all.push(tree.outside_dir());
    all.push(tree.outside_dir().join("deeper"));
    all
}

/// The finding: `grep` used ripgrep's walker, which opens ignore files by path and follows a
/// symlink there. A `.gitignore` that is a symlink to an outside file, or an `.ignore` that is
/// a hard link to one, is now not used — not read, so it cannot hide (or reveal) anything.
#[test]
fn grep_never_reads_an_ignore_file_through_a_symlink_or_hard_link() {
    let tree = TempTree::new("folder");
    let rules = tree.outside("rules", "*.txt\n");
    std::os::unix::fs::symlink(&rules, tree.root.join(".gitignore")).unwrap();
    tree.write("sub/a.txt", "needle\n");
    fs::hard_link(&rules, tree.root.join("sub/.ignore")).unwrap();
    tree.write("b.txt", "needle\n");
    let dir = Watch::paths(&[tree.outside_dir()]);
    let file = Watch::paths(&[rules]);
    let out = grep(&lease(&tree), json!({"pattern": "needle"}));
    assert_eq!(paths(&out), ["b.txt", "sub/a.txt"]);
    // The hard-linked `.ignore` is also a file to search, and one grep may not read (FILE-1).
    assert!(out.truncated);
    dir.assert_none("the outside directory");
    // Its link count is checked on an open descriptor (FILE-1), so the inode was opened
    // through the workspace's name — and closed unread.
    let events = file.events();
    assert!(
        events
            .iter()
            .all(|e| e.contains("OPEN") || e.contains("CLOSE_NOWRITE")),
        "{events:?}"
    );
}

#[test]
fn grep_never_reads_outside_when_a_directory_is_swapped_for_a_symlink() {
    let tree = TempTree::new("folder");
    tree.write("sub/inside.txt", "needle inside\n");
    tree.write("sub/deeper/more.txt", "needle deeper\n");
    tree.write("top.txt", "needle top\n");
    let watched = outside(&tree);
    std::os::unix::fs::symlink(tree.outside_dir(), tree.root.join("swap")).unwrap();
    let root = lease(&tree);
    let watch = Watch::paths(&watched);
    let swapper = Swapper::new(tree.root.join("sub"), tree.root.join("swap"))
        .pause_up_to(std::time::Duration::from_micros(100))
        .start();
    for _ in 0..ATTEMPTS {
        for start in [".", "sub", "sub/deeper", "swap"] {
            // A start that is the symlink right now is refused; that is fine.
            let Ok(args) = serde_json::from_value(json!({"pattern": "needle", "path": start}))
            else {
                unreachable!()
            };
            if let Ok(out) = file_tools::grep(&root, args) {
                let texts: Vec<&str> = out.matches.iter().map(|m| m.text.as_str()).collect();
                assert!(!texts.iter().any(|t| t.contains("SECRET")), "{texts:?}");
            }
        }
    }
    let swaps = swapper.stop();
    assert!(swaps > 0);
    watch.assert_none(&format!("after {swaps} swaps"));
}

#[test]
fn file_tools_never_touch_outside_when_a_directory_is_swapped_for_a_symlink() {
    let tree = TempTree::new("folder");
    tree.write("sub/inside.txt", "needle inside\n");
    tree.write("sub/e.txt", "a\n");
    let watched = outside(&tree);
    std::os::unix::fs::symlink(tree.outside_dir(), tree.root.join("swap")).unwrap();
    let root = lease(&tree);
    let watch = Watch::paths(&watched);
    // One tool at a time: a write's fsync slows its loop down, not the others'.
    let tools: [(&str, &dyn Fn(usize) -> bool); 3] = [
        ("read", &|_| {
            let args: ReadArguments =
                serde_json::from_value(json!({"path": "sub/inside.txt"})).unwrap();
            file_tools::read(&root, args).is_ok_and(|out| {
                assert_eq!(out.content, "needle inside\n");
                true
            })
        }),
        ("write", &|i| {
            let args: WriteArguments = serde_json::from_value(
                json!({"path": format!("sub/new-{}.txt", i % 8), "content": "x"}),
            )
            .unwrap();
            file_tools::write(&root, args).is_ok()
        }),
        ("edit", &|i| {
            let (from, to) = if i % 2 == 0 { ("a", "b") } else { ("b", "a") };
            let args: EditArguments = serde_json::from_value(
                json!({"path": "sub/e.txt", "oldString": from, "newString": to}),
            )
            .unwrap();
            file_tools::edit(&root, args).is_ok()
        }),
    ];
    for (name, tool) in tools {
        let swapper = Swapper::new(tree.root.join("sub"), tree.root.join("swap"))
            .pause_up_to(std::time::Duration::from_micros(100))
            .start();
        // At least ATTEMPTS calls, and on until some succeeded: on a loaded machine the
        // swapper can sleep through a whole burst with `sub` swapped out (then every call is
        // rightly refused and the burst proves nothing).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let (mut done, mut i) = (0, 0);
        // And on until the swapper ran at all: on a loaded machine its thread may not be
        // scheduled during the whole burst (then the burst raced nothing).
        while i < ATTEMPTS
            || ((done == 0 || swapper.swaps() == 0) && std::time::Instant::now() < deadline)
        {
            if tool(i) {
                done += 1;
            }
            i += 1;
            if i >= ATTEMPTS && (done == 0 || swapper.swaps() == 0) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        let swaps = swapper.stop();
        eprintln!("{name}: {done} of {i} calls done, {swaps} swaps");
        assert!(swaps > 0 && done > 0, "{name}: {done} done, {swaps} swaps");
        watch.assert_none(&format!("{name}, after {swaps} swaps"));
    }
    assert_eq!(
        fs::read_to_string(tree.outside_dir().join("inside.txt")).unwrap(),
        "needle SECRET\n"
    );
}

/// The walk is ours now; its ignore rules must be the ones ripgrep's walker applied with the
/// same options. Every file holds one matching line, so grep's matches are the files it
/// searched: compared with `ignore::WalkBuilder` over the same tree, for several starts and
/// globs (whitelists, directory rules, anchored rules, nested files, `.ignore` over
/// `.gitignore`, a BOM, CRLF line ends, hidden files).
#[test]
fn grep_applies_ignore_rules_as_ripgreps_walker_did() {
    let tree = TempTree::new("folder");
    for (path, content) in [
        (
            ".gitignore",
            "*.log\n!keep.log\nbuild/\n/rootonly.txt\n# a comment\n\\#hash.txt\n",
        ),
        (".ignore", "secret*\n"),
        ("sub/.gitignore", "!b.log\n*.tmp\nrootonly.txt\n"),
        ("sub/deep/.ignore", "!secret3.txt\n"),
        ("bom/.gitignore", "\u{feff}bom.txt\n"),
        ("crlf/.gitignore", "crlf.txt\r\nother.txt\r\n"),
        ("neg/.gitignore", "*\n!*/\n!*.csv\n"),
    ] {
        tree.write(path, content);
    }
    for path in [
        "a.txt",
        "b.log",
        "keep.log",
        "rootonly.txt",
        "secret1.txt",
        "#hash.txt",
        ".hidden",
        "build/x.txt",
        "sub/build/y.txt",
        "sub/b.log",
        "sub/c.tmp",
        "sub/rootonly.txt",
        "sub/secret2.txt",
        "sub/d.txt",
        "sub/deep/secret3.txt",
        "sub/deep/e.txt",
        "sub/deep/f.log",
        "bom/bom.txt",
        "bom/kept.txt",
        "crlf/crlf.txt",
        "crlf/other.txt",
        "crlf/kept.csv",
        "neg/x.txt",
        "neg/y.csv",
        "neg/in/z.csv",
        "neg/in/w.md",
        "with space.txt",
    ] {
        tree.write(path, "hit\n");
    }
    let root = lease(&tree);
    for (start, glob) in [
        (".", None),
        ("sub", None),
        ("sub/deep", None),
        ("neg", None),
        (".", Some("*.txt")),
        (".", Some("!*.log")),
        ("sub", Some("*.log")),
        (".", Some("sub/**")),
    ] {
        let mut args = json!({"pattern": "hit", "path": start, "maxResults": 1000});
        if let Some(g) = glob {
            args["glob"] = json!(g);
        }
        let out = grep(&root, args);
        let mut got: Vec<String> = paths(&out).iter().map(|p| (*p).to_owned()).collect();
        got.sort();
        assert_eq!(
            got,
            reference(&tree.root, start, glob),
            "start {start}, glob {glob:?}"
        );
        assert!(!out.truncated, "start {start}, glob {glob:?}");
    }
}

/// What ripgrep's walker found with the options `grep` used before issue 14.
fn reference(base: &Path, start: &str, glob: Option<&str>) -> Vec<String> {
    let walk_root = base.join(start);
    let mut builder = ignore::WalkBuilder::new(&walk_root);
    builder
        .standard_filters(false)
        .hidden(false)
        .ignore(true)
        .git_ignore(true)
        .require_git(false)
        .parents(false)
        .git_global(false)
        .git_exclude(false)
        .follow_links(false);
    if let Some(glob) = glob {
        let mut over = ignore::overrides::OverrideBuilder::new(&walk_root);
        over.add(glob).unwrap();
        builder.overrides(over.build().unwrap());
    }
    let mut out: Vec<String> = builder
        .build()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .filter(|e| fs::read_to_string(e.path()).unwrap() == "hit\n")
        .map(|e| {
            e.path()
                .strip_prefix(base)
                .unwrap()
                .display()
                .to_string()
                .trim_start_matches("./")
                .to_owned()
        })
        .collect();
    out.sort();
    out
}
