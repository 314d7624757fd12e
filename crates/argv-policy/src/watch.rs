//! File-watcher detection (RC-15).
//!
//! A watcher never ends and `run_command` waits for the end, so it is refused before start with a
//! pointer to `background_command`. Detected:
//! - `--watch`, `--watch=…`, `--watchAll`, `--watchAll=…` on any command;
//! - `-w` for tools whose manual defines it as watch: `tsc`, `webpack`, `webpack-cli`, `rollup`,
//!   `mocha`, `ava`, `tailwindcss`, `sass`, `node-sass`, `babel`, `coffee`, `vite`, `tsup`,
//!   `swc`, `stylus`, `postcss`, `jekyll`, `hugo`, `kubectl` (`get -w`);
//! - watcher executables (`chokidar`, `nodemon`, `watchexec`, `entr`, `fswatch`, …) and
//!   subcommands (`cargo watch`, `parcel watch`, `dotnet watch`, `tsx watch`, `vitest watch`,
//!   …), `gradle -t`/`--continuous`, `inotifywait -m`, `bun --hot`, `sbt ~task`;
//! - `npm`/`pnpm`/`yarn`/`bun` scripts resolved through the nearest `package.json`, followed up
//!   to [`MAX_SCRIPT_LEVELS`] levels (the named script is level 1), each script traced once, also
//!   inside `sh -c` and launchers, and `pre`/`post` scripts of a traced script.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::launch::{self, Plan};
use crate::script::{self, Word};

/// How many levels of package scripts are followed (RC-15: 4).
pub const MAX_SCRIPT_LEVELS: usize = 4;

/// The largest `package.json` read.
const MAX_PACKAGE_JSON: u64 = 1024 * 1024;

const WATCH_EXES: &[&str] = &[
    "chokidar",
    "chokidar-cli",
    "nodemon",
    "watchexec",
    "entr",
    "fswatch",
    "tsc-watch",
    "onchange",
    "watchman-make",
    "watchify",
    "watch",
    "reflex",
    "ibazel",
    "cargo-watch",
    "ts-node-dev",
    "node-dev",
    "live-server",
    "browser-sync",
    "npm-watch",
];

const WATCH_SUBCOMMANDS: &[(&str, &str)] = &[
    ("cargo", "watch"),
    ("parcel", "watch"),
    ("dotnet", "watch"),
    ("gulp", "watch"),
    ("grunt", "watch"),
    ("tsx", "watch"),
    ("vitest", "watch"),
    ("vitest", "dev"),
    ("ng", "serve"),
    ("jekyll", "serve"),
    ("hugo", "server"),
];

const DASH_W_TOOLS: &[&str] = &[
    "tsc",
    "webpack",
    "webpack-cli",
    "rollup",
    "mocha",
    "ava",
    "tailwindcss",
    "sass",
    "node-sass",
    "babel",
    "coffee",
    "vite",
    "tsup",
    "swc",
    "stylus",
    "postcss",
    "jekyll",
    "hugo",
    "kubectl",
];

/// Why `name args` is a watcher by its own words, if it is.
pub fn direct(name: &str, args: &[&str]) -> Option<String> {
    if WATCH_EXES.contains(&name) {
        return Some(format!("`{name}` is a file watcher"));
    }
    if let Some(first) = args.iter().find(|a| !a.starts_with('-')) {
        if WATCH_SUBCOMMANDS.contains(&(name, *first)) {
            return Some(format!("`{name} {first}` watches files"));
        }
    }
    for a in args {
        if *a == "--watch"
            || a.starts_with("--watch=")
            || *a == "--watchAll"
            || a.starts_with("--watchAll=")
        {
            return Some(format!("`{name}` is given `{a}`"));
        }
        if *a == "-w" && DASH_W_TOOLS.contains(&name) {
            return Some(format!("`{name} -w` watches files"));
        }
        if matches!(name, "gradle" | "gradlew") && (*a == "-t" || *a == "--continuous") {
            return Some(format!("`{name} {a}` rebuilds on every change"));
        }
        if name == "inotifywait" && (*a == "-m" || *a == "--monitor") {
            return Some("`inotifywait -m` watches files".into());
        }
        if name == "bun" && *a == "--hot" {
            return Some("`bun --hot` reloads on every change".into());
        }
        if name == "sbt" && a.starts_with('~') {
            return Some(format!("`sbt {a}` reruns on every change"));
        }
    }
    None
}

/// A package script to trace: the `package.json` it lives in and its name.
type ScriptKey = (PathBuf, String);

/// The package-script tracer for one decision: remembers what it traced (RC-15 "each script
/// traced once"), so cycles end and shared scripts are read once.
#[derive(Debug, Default)]
pub struct Tracer {
    traced: BTreeSet<ScriptKey>,
}

/// `npm`, `pnpm`, `yarn` and `bun` commands that are not package scripts.
const PNPM_YARN_BUILTINS: &[&str] = &[
    "install",
    "i",
    "add",
    "remove",
    "rm",
    "uninstall",
    "update",
    "up",
    "upgrade",
    "link",
    "unlink",
    "import",
    "rebuild",
    "prune",
    "fetch",
    "store",
    "publish",
    "pack",
    "init",
    "create",
    "dlx",
    "exec",
    "x",
    "list",
    "ls",
    "why",
    "outdated",
    "audit",
    "config",
    "info",
    "view",
    "help",
    "login",
    "logout",
    "cache",
    "workspace",
    "workspaces",
    "set",
    "version",
    "node",
    "env",
    "pm",
    "build",
    "patch",
    "deploy",
    "licenses",
    "setup",
    "server",
    "global",
];

impl Tracer {
    /// A fresh tracer.
    pub fn new() -> Self {
        Tracer::default()
    }

    /// When `name args` (run in `workdir`) is a package manager running a script that reaches a
    /// watcher within [`MAX_SCRIPT_LEVELS`], the chain that leads there.
    pub fn package(
        &mut self,
        name: &str,
        args: &[&str],
        workdir: &Path,
        home: &Path,
    ) -> Option<String> {
        let (dir, script, exec) = script_target(name, args, workdir)?;
        if let Some(inner) = exec {
            let inner: Vec<&str> = inner.iter().map(String::as_str).collect();
            return self.command_line(&inner, &dir, home, 1, &format!("`{name}`"));
        }
        let pkg = nearest_package_json(&dir)?;
        self.trace(
            &pkg,
            &script,
            home,
            1,
            &format!("`{name}` script `{script}`"),
        )
    }

    fn trace(
        &mut self,
        pkg: &Path,
        script: &str,
        home: &Path,
        level: usize,
        chain: &str,
    ) -> Option<String> {
        if level > MAX_SCRIPT_LEVELS {
            return None;
        }
        let scripts = read_scripts(pkg)?;
        let dir = pkg.parent().unwrap_or(Path::new("/")).to_path_buf();
        for s in [
            format!("pre{script}"),
            script.to_owned(),
            format!("post{script}"),
        ] {
            if !self.traced.insert((pkg.to_path_buf(), s.clone())) {
                continue;
            }
            let Some(body) = scripts.get(&s).and_then(|v| v.as_str()) else {
                continue;
            };
            let here = if s == script {
                chain.to_owned()
            } else {
                format!("{chain} (its `{s}` script)")
            };
            if let Some(hit) = self.body(body, &dir, home, level, &here) {
                return Some(hit);
            }
        }
        None
    }

    /// Every command of a script body.
    fn body(
        &mut self,
        body: &str,
        dir: &Path,
        home: &Path,
        level: usize,
        chain: &str,
    ) -> Option<String> {
        match script::parse(body, home, 0) {
            Ok(parsed) => {
                for cmd in &parsed.cmds {
                    let words: Vec<&str> = cmd
                        .words
                        .iter()
                        .map(|w: &Word| w.value.as_deref().unwrap_or(""))
                        .collect();
                    if let Some(hit) = self.command_line(&words, dir, home, level, chain) {
                        return Some(hit);
                    }
                }
                None
            }
            // A script the parser refuses is still searched word by word: a watcher in it
            // would hang the call just the same.
            Err(_) => {
                let words: Vec<&str> = body.split_whitespace().collect();
                words.iter().enumerate().find_map(|(i, w)| {
                    direct(w, &words[i + 1..]).map(|why| format!("{chain} runs `{body}`: {why}"))
                })
            }
        }
    }

    /// One command line inside a traced script.
    fn command_line(
        &mut self,
        words: &[&str],
        dir: &Path,
        home: &Path,
        level: usize,
        chain: &str,
    ) -> Option<String> {
        let (&name, args) = words.split_first()?;
        let name = name.rsplit('/').next().unwrap_or(name);
        if let Some(why) = direct(name, args) {
            return Some(format!("{chain} runs `{}`: {why}", words.join(" ")));
        }
        // `concurrently "tsc -w" "vite"`: an argument that is itself a command line.
        for a in args {
            if a.contains(char::is_whitespace) {
                let inner: Vec<&str> = a.split_whitespace().collect();
                if let Some(hit) = self.command_line(&inner, dir, home, level, chain) {
                    return Some(hit);
                }
            }
        }
        if matches!(name, "sh" | "bash" | "dash") {
            if let Some(pos) = args
                .iter()
                .position(|a| a.starts_with('-') && a.contains('c'))
            {
                if let Some(script) = args.get(pos + 1) {
                    return self.body(script, dir, home, level, chain);
                }
            }
        }
        let wargs: Vec<Word> = args.iter().map(|a| Word::literal(a)).collect();
        if let Ok(Plan::Inner { ranges, .. }) = launch::plan(name, &wargs) {
            for r in ranges {
                let inner = &args[r];
                let mut line = Vec::with_capacity(inner.len());
                line.extend_from_slice(inner);
                if let Some(hit) = self.command_line(&line, dir, home, level, chain) {
                    return Some(hit);
                }
            }
        }
        if matches!(name, "npm" | "pnpm" | "yarn" | "bun") {
            let (target_dir, script, exec) = script_target(name, args, dir)?;
            if let Some(inner) = exec {
                let inner: Vec<&str> = inner.iter().map(String::as_str).collect();
                return self.command_line(&inner, &target_dir, home, level, chain);
            }
            let pkg = nearest_package_json(&target_dir)?;
            let next = format!("{chain} → `{script}`");
            return self.trace(&pkg, &script, home, level + 1, &next);
        }
        None
    }
}

/// The directory, script name and (for `npm exec`/`pnpm dlx`/…) the command line a package
/// manager invocation runs.
fn script_target(
    name: &str,
    args: &[&str],
    workdir: &Path,
) -> Option<(PathBuf, String, Option<Vec<String>>)> {
    let mut dir = workdir.to_path_buf();
    let mut positional: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        let dir_flag = match name {
            "npm" => ["--prefix", "--prefix"],
            "pnpm" => ["-C", "--dir"],
            _ => ["--cwd", "--cwd"],
        };
        if dir_flag.contains(&a) {
            if let Some(d) = args.get(i + 1) {
                dir = crate::paths::normalize(workdir, Path::new(d));
            }
            i += 2;
            continue;
        }
        if let Some((k, v)) = a.split_once('=') {
            if dir_flag.contains(&k) {
                dir = crate::paths::normalize(workdir, Path::new(v));
                i += 1;
                continue;
            }
        }
        if a == "--" {
            positional.extend(&args[i + 1..]);
            break;
        }
        if !a.starts_with('-') {
            positional.push(a);
        }
        i += 1;
    }
    let (&first, rest) = positional.split_first()?;
    let exec = |from: &[&str]| Some(from.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
    let script = match (name, first) {
        (_, "run" | "run-script" | "rum" | "urn") => rest.first()?.to_string(),
        ("npm", "start" | "test" | "t" | "tst" | "stop" | "restart") => match first {
            "t" | "tst" => "test".to_owned(),
            other => other.to_owned(),
        },
        ("npm", "exec" | "x")
        | ("pnpm", "exec" | "dlx")
        | ("yarn", "exec" | "dlx")
        | ("bun", "x") => {
            return Some((dir, String::new(), exec(rest)));
        }
        ("npm", _) => return None,
        ("bun", "test") => return None,
        (_, "t") => "test".to_owned(),
        (_, other) if PNPM_YARN_BUILTINS.contains(&other) => return None,
        (_, other) => other.to_owned(),
    };
    Some((dir, script, None))
}

/// The nearest `package.json` at or above `dir`.
fn nearest_package_json(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .map(|d| d.join("package.json"))
        .find(|p| p.is_file())
}

fn read_scripts(pkg: &Path) -> Option<serde_json::Map<String, serde_json::Value>> {
    let meta = std::fs::metadata(pkg).ok()?;
    if meta.len() > MAX_PACKAGE_JSON {
        return None;
    }
    let text = std::fs::read_to_string(pkg).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value.get("scripts")?.as_object().cloned()
}
