//! The decision table: one `check(input, expect)` helper and one line per case.
//!
//! `input` is the tool's JSON arguments, or just the argv as a JSON array. `expect` is a summary:
//! `run <via> <gate>[ par][ sudo][ trash=N]` or `refuse <CODE>`. Unless a helper says
//! otherwise: mode `safe`, Linux, working directory `/home/u/proj`, `$HOME` `/home/u`.

// Helpers outside #[test] fns may unwrap too: a panic is a test failure, which is what we want.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use argv_policy::{Context, Decision, Mode, Os, Policy, RunCommandArgs, Via, decide};

fn summary(d: &Decision) -> String {
    match d {
        Decision::Refuse { code, .. } => format!("refuse {code}"),
        Decision::Run {
            via,
            gate,
            parallel,
            trash,
            sudo,
        } => {
            let mut s = format!(
                "run {} {}",
                match via {
                    Via::Direct => "direct",
                    Via::Shell(_) => "shell",
                },
                gate.kind()
            );
            if *parallel {
                s.push_str(" par");
            }
            if *sudo {
                s.push_str(" sudo");
            }
            if !trash.is_empty() {
                s.push_str(&format!(" trash={}", trash.len()));
            }
            s
        }
    }
}

fn run(input: &str, mode: Mode, os: Os) -> Decision {
    let json = if input.starts_with('[') {
        format!("{{\"argv\": {input}}}")
    } else {
        input.to_owned()
    };
    let args = RunCommandArgs::from_json(&json).unwrap_or_else(|e| panic!("bad case {input}: {e}"));
    let mut ctx = Context::new("/home/u/proj", "/home/u");
    ctx.os = os;
    decide(&args, &Policy::defaults(mode), &ctx)
}

#[track_caller]
fn check_in(mode: Mode, os: Os, input: &str, expect: &str) {
    let d = run(input, mode, os);
    let got = summary(&d);
    assert_eq!(
        got, expect,
        "\ninput: {input}\nmode: {mode:?}\ndecision: {d:#?}"
    );
}

#[track_caller]
fn check(input: &str, expect: &str) {
    check_in(Mode::Safe, Os::Linux, input, expect);
}

#[track_caller]
fn auto(input: &str, expect: &str) {
    check_in(Mode::Auto, Os::Linux, input, expect);
}

#[track_caller]
fn allow_all(input: &str, expect: &str) {
    check_in(Mode::AllowAll, Os::Linux, input, expect);
}

#[track_caller]
fn mac(input: &str, expect: &str) {
    check_in(Mode::Safe, Os::MacOs, input, expect);
}

/// `['sh', '-c', script]` under `safe`.
#[track_caller]
fn sh(script: &str, expect: &str) {
    let argv = serde_json::to_string(&["sh", "-c", script]).unwrap();
    check(&argv, expect);
}

#[test]
fn plain_argv_read_only_hits_run_in_parallel_without_a_gate() {
    check(r#"["ls"]"#, "run direct none par");
    check(r#"["ls", "-la", "src"]"#, "run direct none par");
    check(r#"["cat", "Cargo.toml"]"#, "run direct none par");
    check(r#"["git", "status"]"#, "run direct none par");
    check(
        r#"["git", "log", "--oneline", "-n", "5"]"#,
        "run direct none par",
    );
    check(r#"["git", "-C", ".", "status"]"#, "run direct none par");
    check(
        r#"["git", "--no-pager", "diff", "HEAD"]"#,
        "run direct none par",
    );
    check(
        r#"["git", "--no-pager", "-C", "/home/u/proj", "log"]"#,
        "run direct none par",
    );
    check(r#"["docker", "ps", "-a"]"#, "run direct none par");
    check(
        r#"["docker", "--context", "x", "images"]"#,
        "run direct none par",
    );
    check(r#"["kubectl", "get", "pods"]"#, "run direct none par");
    check(
        r#"["kubectl", "-n", "kube-system", "get", "pods"]"#,
        "run direct none par",
    );
    check(
        r#"["kubectl", "describe", "pod", "x"]"#,
        "run direct none par",
    );
    check(r#"["npm", "ls", "--depth=0"]"#, "run direct none par");
    check(r#"["pip", "list"]"#, "run direct none par");
    check(r#"["cargo", "--version"]"#, "run direct none par");
    check(
        r#"["cargo", "+nightly", "--version"]"#,
        "run direct none par",
    );
    check(r#"["rustc", "--version"]"#, "run direct none par");
    check(r#"["go", "env", "GOPATH"]"#, "run direct none par");
    check(r#"["grep", "-rn", "TODO", "src"]"#, "run direct none par");
    check(r#"["rg", "-n", "fn main"]"#, "run direct none par");
    check(
        r#"["find", ".", "-name", "Cargo.toml"]"#,
        "run direct none par",
    );
    check(r#"["wc", "-l", "README.md"]"#, "run direct none par");
    check(
        r#"["head", "-n", "20", "src/lib.rs"]"#,
        "run direct none par",
    );
    check(r#"["echo", "hello world"]"#, "run direct none par");
    check(r#"["uname", "-a"]"#, "run direct none par");
    check(r#"["jq", ".name", "package.json"]"#, "run direct none par");
    check(r#"["sort", "-n", "data.txt"]"#, "run direct none par");
    check(r#"["uniq", "-c", "a.txt"]"#, "run direct none par");
    check(r#"["tar", "-tf", "a.tar"]"#, "run direct none par");
    check(r#"["git", "branch", "--list"]"#, "run direct none par");
    check(
        r#"["git", "config", "--get", "user.name"]"#,
        "run direct none par",
    );
    check(r#"["git", "stash", "list"]"#, "run direct none par");
    check(r#"["command", "-v", "cargo"]"#, "run direct none par");
    check(r#"["env"]"#, "run direct none par");
    check(r#"["time", "ls"]"#, "run direct none par");
    check(
        r#"["nice", "-n", "10", "git", "status"]"#,
        "run direct none par",
    );
    check(
        r#"["timeout", "5", "git", "status"]"#,
        "run direct none par",
    );
    check(r#"["date", "+%Y"]"#, "run direct none par");
    check(r#"["stat", "/etc/hostname"]"#, "run direct none par");
}

#[test]
fn misses_and_write_flags_confirm_under_safe() {
    check(r#"["cargo", "build"]"#, "run direct confirm");
    check(r#"["cargo", "test", "-p", "x"]"#, "run direct confirm");
    check(r#"["make"]"#, "run direct confirm");
    check(r#"["python3", "script.py"]"#, "run direct confirm");
    check(r#"["node", "index.js"]"#, "run direct confirm");
    check(r#"["touch", "a"]"#, "run direct confirm");
    check(r#"["mkdir", "-p", "build"]"#, "run direct confirm");
    check(r#"["cp", "a", "b"]"#, "run direct confirm");
    check(r#"["mv", "a", "b"]"#, "run direct confirm");
    check(r#"["git", "commit", "-m", "fix"]"#, "run direct confirm");
    check(r#"["git", "push"]"#, "run direct confirm");
    check(r#"["git", "branch", "new-feature"]"#, "run direct confirm");
    check(r#"["git", "branch", "-D", "old"]"#, "run direct confirm");
    check(
        r#"["git", "branch", "--list", "-D", "x"]"#,
        "run direct confirm",
    );
    check(r#"["git", "tag", "-l", "-d", "v1"]"#, "run direct confirm");
    check(
        r#"["git", "-c", "core.pager=evil", "log"]"#,
        "run direct confirm",
    );
    check(
        r#"["git", "log", "--output=out.txt"]"#,
        "run direct confirm",
    );
    check(r#"["git", "diff", "--ext-diff"]"#, "run direct confirm");
    check(r#"["git", "grep", "-O", "x"]"#, "run direct confirm");
    check(r#"["git", "stash", "list", "drop"]"#, "run direct confirm");
    check(r#"["git", "remote", "-v", "add"]"#, "run direct confirm");
    check(r#"["sort", "-o", "out", "in"]"#, "run direct confirm");
    check(r#"["sort", "-no", "out", "in"]"#, "run direct confirm");
    check(r#"["find", ".", "-delete"]"#, "run direct confirm");
    check(r#"["find", ".", "-fprint", "x"]"#, "run direct confirm");
    check(
        r#"["find", ".", "-exec", "grep", "x", "{}", "+"]"#,
        "run direct confirm",
    );
    check(r#"["rg", "--pre", "cat", "x"]"#, "run direct confirm");
    check(r#"["fd", "-x", "wc"]"#, "run direct confirm");
    check(r#"["yq", "-i", ".a=1", "f.yaml"]"#, "run direct confirm");
    check(r#"["uniq", "in.txt", "out.txt"]"#, "run direct confirm");
    check(r#"["xxd", "-r", "a"]"#, "run direct confirm");
    check(r#"["hostname", "evil"]"#, "run direct confirm");
    check(r#"["date", "-s", "2020-01-01"]"#, "run direct confirm");
    check(r#"["tar", "-xf", "a.tar"]"#, "run direct confirm");
    check(r#"["tar", "xf", "a.tar"]"#, "run direct confirm");
    check(r#"["tree", "-o", "out.txt"]"#, "run direct confirm");
    check(r#"["time", "-o", "t.txt", "ls"]"#, "run direct confirm");
    check(r#"["env", "FOO=1", "ls"]"#, "run direct confirm");
    check(r#"["xargs", "-0", "wc"]"#, "run direct none par");
    check(r#"["nohup", "ls"]"#, "run direct confirm");
    check(r#"["/bin/ls"]"#, "run direct confirm");
    check(r#"["./gradlew", "build"]"#, "run direct confirm");
    check(r#"["bash", "build.sh"]"#, "run direct confirm");
    check(r#"["sed", "-n", "1p", "a"]"#, "run direct confirm");
    check(r#"["awk", "{print}", "a"]"#, "run direct confirm");
    check(r#"["strace", "-f", "ls"]"#, "run direct confirm");
    check(r#"["docker", "run", "alpine"]"#, "run direct confirm");
    check(
        r#"["kubectl", "apply", "-f", "x.yaml"]"#,
        "run direct confirm",
    );
    check(r#"["npm", "install"]"#, "run direct confirm");
}

#[test]
fn auto_and_allow_all_skip_the_confirmation_but_not_the_parallel_rule() {
    auto(r#"["cargo", "build"]"#, "run direct none");
    auto(r#"["git", "status"]"#, "run direct none par");
    auto(r#"["touch", "a"]"#, "run direct none");
    allow_all(r#"["cargo", "build"]"#, "run direct none");
    allow_all(r#"["git", "status"]"#, "run direct none par");
    auto(
        r#"["sh", "-c", "cargo build && cargo test"]"#,
        "run shell none",
    );
}

#[test]
fn network_is_never_read_only() {
    check(
        r#"{"argv": ["git", "status"], "network": true}"#,
        "run direct confirm",
    );
    check(
        r#"{"argv": ["git", "fetch"], "network": true}"#,
        "run direct confirm",
    );
    check(
        r#"{"argv": ["curl", "-sS", "https://example.com"], "network": true}"#,
        "run direct confirm",
    );
    auto(
        r#"{"argv": ["git", "pull"], "network": true}"#,
        "run direct none",
    );
    auto(
        r#"{"argv": ["npm", "install"], "network": true}"#,
        "run direct none",
    );
    allow_all(r#"{"argv": ["ls"], "network": true}"#, "run direct none");
}

#[test]
fn arguments_that_merely_contain_shell_characters_run_directly() {
    // Program text and patterns the program reads itself are data (RC-2).
    for (argv, expect) in [
        (r#"["python3", "-c", "print(1)"]"#, "run direct confirm"),
        (
            r#"["node", "-e", "console.log(1+1)"]"#,
            "run direct confirm",
        ),
        (r#"["awk", "{print $1}", "f"]"#, "run direct confirm"),
        (r#"["grep", "-E", "a|b", "f"]"#, "run direct none par"),
        (r#"["jq", ".[] | .name", "x.json"]"#, "run direct none par"),
        (r#"["find", ".", "-name", "*.rs"]"#, "run direct none par"),
        (
            r#"["git", "log", "--format=%h (%an)"]"#,
            "run direct none par",
        ),
        (r#"["git", "ls-files", "*.rs"]"#, "run direct none par"),
        (
            r#"["rg", "-g", "*.toml", "fn (a|b)", "src"]"#,
            "run direct none par",
        ),
        (r#"["sed", "-n", "s/a*/b/p", "f"]"#, "run direct confirm"),
        (
            r#"["perl", "-ne", "print if /x$/", "f"]"#,
            "run direct confirm",
        ),
        (
            r#"["git", "commit", "-m", "fix: a|b (x) costs $5"]"#,
            "run direct confirm",
        ),
        (
            r#"["env", "timeout", "5", "grep", "-E", "a|b", "f"]"#,
            "run direct none par",
        ),
        (
            r#"["curl", "-d", "{\"a\":[1]}", "https://example.com/?a=1&b=2"]"#,
            "run direct confirm",
        ),
        (
            r##"["echo", "a b", "c,d", "e=f", "{}", "x!y", "#z", "a|b", "a(b)", "a~b"]"##,
            "run direct none par",
        ),
    ] {
        check(argv, expect);
    }
    check(
        r#"{"argv": ["python3", "-c", "print(1)"], "network": true}"#,
        "run direct confirm",
    );
    auto(r#"["python3", "-c", "print(1)"]"#, "run direct none");
}

#[test]
fn elements_that_expect_a_shell_are_refused() {
    // Wholly shell syntax, a leading `~`, a substitution, a glob as a path operand.
    for argv in [
        r#"["ls", "|", "wc"]"#,
        r#"["make", "&&", "make", "test"]"#,
        r#"["echo", "hi", ">", "f"]"#,
        r#"["cmd", "2>&1"]"#,
        r#"["cat", "~/x"]"#,
        r#"["echo", "$(id)"]"#,
        r#"["echo", "`id`"]"#,
        r#"["cat", "*.txt"]"#,
        r#"["rm", "*.log"]"#,
        r#"["ls", "src/*.rs"]"#,
        r#"["ls", "*.rs"]"#,
        r#"["cat", "~/.bashrc"]"#,
        r#"["echo", "$HOME"]"#,
        r#"["echo", "${HOME}"]"#,
        r#"["git", "log", ">", "out"]"#,
        r#"["git", "log", ">out"]"#,
        r#"["cmd", "2>/dev/null"]"#,
        r#"["cmd", "&>", "log"]"#,
        r#"["cat", "<", "in"]"#,
        r#"["ls", ";", "pwd"]"#,
        r#"["sleep", "5", "&"]"#,
        r#"["ls", "a", "||", "b"]"#,
        r#"["cat", "file?.txt"]"#,
        r#"["cp", "a.{c,h}", "dst"]"#,
        r#"["grep", "x", "*.txt"]"#,
        r#"["python3", "x.py", "$(id)"]"#,
        r#"["find", "*.d", "-name", "x"]"#,
        r#"["find", ".", "-exec", "grep", "x", "{}", ";"]"#,
        r#"["env", "cat", "*.txt"]"#,
        r#"["rm", "~/x"]"#,
        r#"["rm", "*.o"]"#,
        r#"["sh", "-c", "ls", "x|y"]"#,
        r#"["bash", "run.sh", "a*"]"#,
    ] {
        check(argv, "refuse RUN_COMMAND_METACHARACTERS");
    }
    // Inside an argument of a shell, every metacharacter is still refused (the script may use
    // it unquoted, where the shell expands it).
    for m in [
        "|", "&", ";", "<", ">", "*", "?", "[", "~", "$", "`", "(", ")", "\n",
    ] {
        let argv =
            serde_json::to_string(&["sh", "-c", "echo \"$1\"", "sh", &format!("a{m}b")]).unwrap();
        check(&argv, "refuse RUN_COMMAND_METACHARACTERS");
    }
    check(
        r#"["zsh", "-c", "ls | wc"]"#,
        "refuse RUN_COMMAND_SHELL_UNSUPPORTED",
    );
}

#[test]
fn sh_c_scripts_are_parsed_and_every_command_checked() {
    sh("ls | wc -l", "run shell none par");
    sh("git status && git log -n 1", "run shell none par");
    sh("ls *.rs", "run shell confirm");
    sh("cat ~/.bashrc", "run shell none par");
    sh("cd src && ls", "run shell none par");
    sh("cd /tmp; cargo build", "run shell confirm");
    sh("cargo build 2>&1 | tail -n 20", "run shell confirm");
    sh("ls > out.txt", "run shell confirm");
    sh("ls >> out.txt", "run shell confirm");
    sh("ls > /dev/null 2>&1", "run shell none par");
    sh("ls 2>/dev/null || true", "run shell none par");
    sh(
        "grep -r TODO . | sort | uniq -c | sort -rn | head",
        "run shell none par",
    );
    sh(
        "if [ -f Cargo.toml ]; then cat Cargo.toml; fi",
        "run shell none par",
    );
    sh("for f in a b; do echo $f; done", "run shell confirm");
    sh("for f in a b; do echo x; done", "run shell none par");
    sh("while true; do ls; break; done", "run shell confirm");
    sh("case x in x) ls ;; esac", "run shell none par");
    sh("(ls; pwd)", "run shell none par");
    sh("{ ls; pwd; }", "run shell none par");
    sh("echo $(git rev-parse HEAD)", "run shell confirm");
    sh("X=1 ls", "run shell none par");
    sh("FOO=bar", "run shell none par");
    sh(
        "set -a; . ./.env; set +a; curl https://x",
        "run shell confirm",
    );
    sh("cat <<EOF\nhello\nEOF", "run shell none par");
    sh("cargo test -- --nocapture", "run shell confirm");
    sh("git diff --stat HEAD~3", "run shell none par");
    sh("ls && cat nonexistent || echo fail", "run shell none par");
    sh("diff <(ls a) <(ls b)", "run shell confirm");
    sh("[[ -d src ]] && ls src", "run shell none par");
    sh("test -f x && echo yes", "run shell none par");
    sh("export FOO=bar; cargo build", "run shell confirm");
    sh("echo hi &", "run shell none par");
    sh("! grep -q x file", "run shell none par");
    sh("time ls", "run shell none par");
    sh("bash -c 'ls | wc -l'", "run shell none par");
    sh("sh -c \"git status\"", "run shell none par");
    sh("GIT_EDITOR=true git commit --amend", "run shell confirm");
    sh("git log --format='%H %s' | head -n 3", "run shell none par");
    check(r#"["bash", "-c", "ls | wc -l"]"#, "run shell none par");
    check(r#"["bash", "-ec", "ls | wc -l"]"#, "run shell none par");
    check(
        r#"["bash", "-o", "pipefail", "-c", "ls | wc -l"]"#,
        "run shell none par",
    );
    check(
        r#"["sh", "-c", "echo $0 $1", "name", "arg"]"#,
        "run shell confirm",
    );
    check(
        r#"["timeout", "60", "sh", "-c", "ls | wc -l"]"#,
        "run direct none par",
    );
    check(
        r#"["env", "bash", "-c", "ls | wc -l"]"#,
        "run direct none par",
    );
    check(r#"["dash", "-c", "ls | wc"]"#, "run direct none par");
}

#[test]
fn hostile_scripts_are_refused() {
    sh("$(echo rm) -rf x", "refuse RUN_COMMAND_NOT_STATIC");
    sh("`which rm` x", "refuse RUN_COMMAND_NOT_STATIC");
    sh("\"r\"\"m\" x", "refuse RUN_COMMAND_NOT_STATIC");
    sh("'rm' x", "refuse RUN_COMMAND_NOT_STATIC");
    sh("\\rm x", "refuse RUN_COMMAND_NOT_STATIC");
    sh("r\\m x", "refuse RUN_COMMAND_NOT_STATIC");
    sh("command rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("builtin rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("env rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("env -i FOO=1 rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("exec rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("nice -n 5 rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("nohup rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("timeout 5 rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("timeout -s KILL 5 rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("timeout -Z 5 rm x", "refuse RUN_COMMAND_NOT_STATIC");
    sh("time rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("stdbuf -oL rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("setsid rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("ls | xargs rm", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh(
        "ls | xargs -0 -n 1 rm -f",
        "refuse RUN_COMMAND_RM_IN_SCRIPT",
    );
    sh("ls | xargs -I{} rm {}", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("find . -exec rm {} \\;", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("find . -execdir rm {} +", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("find . -ok rm {} ';'", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh(
        "find . -name x -exec ls {} \\; -exec rm {} \\;",
        "refuse RUN_COMMAND_RM_IN_SCRIPT",
    );
    sh("bash -c \"sudo ls\"", "refuse RUN_COMMAND_SUDO_IN_SCRIPT");
    sh("sudo ls", "refuse RUN_COMMAND_SUDO_IN_SCRIPT");
    sh("su -c ls", "refuse RUN_COMMAND_SUDO_IN_SCRIPT");
    sh("doas ls", "refuse RUN_COMMAND_SUDO_IN_SCRIPT");
    sh("sh -c 'sh -c \"rm x\"'", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("bash -c 'env xargs rm'", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("rm -rf build", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("ls; rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("ls && rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("ls || rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("ls | rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("(rm x)", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("{ rm x; }", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("echo $(rm x)", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("echo `rm x`", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("echo \"$(rm x)\"", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("echo $(echo $(rm x))", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("if rm x; then ls; fi", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh(
        "if true; then ls; else rm x; fi",
        "refuse RUN_COMMAND_RM_IN_SCRIPT",
    );
    sh(
        "for i in 1; do rm x; done",
        "refuse RUN_COMMAND_RM_IN_SCRIPT",
    );
    sh(
        "for i in $(rm x); do ls; done",
        "refuse RUN_COMMAND_RM_IN_SCRIPT",
    );
    sh("while rm x; do ls; done", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh(
        "until false; do rm x; done",
        "refuse RUN_COMMAND_RM_IN_SCRIPT",
    );
    sh(
        "case $(rm x) in *) ls ;; esac",
        "refuse RUN_COMMAND_RM_IN_SCRIPT",
    );
    sh(
        "case a in a) rm x ;; esac",
        "refuse RUN_COMMAND_RM_IN_SCRIPT",
    );
    sh("ls() { rm x; }; ls", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("git() { curl evil; }; git status", "run shell confirm");
    sh("ls() { cat x; }; ls", "run shell confirm");
    sh("rm() { ls; }; rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("alias ls=rm; ls x", "refuse RUN_COMMAND_DENIED");
    sh("hash -p /bin/rm ls; ls", "refuse RUN_COMMAND_DENIED");
    sh("enable -f x.so rm", "refuse RUN_COMMAND_DENIED");
    sh("cat <<EOF\n$(rm x)\nEOF", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("cat <<'EOF'\n$(rm x)\nEOF", "run shell none par");
    sh("cat <<< $(rm x)", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("ls > $(rm x)", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("X=$(rm x) ls", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("export X=$(rm x)", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("diff <(rm x) a", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("ls >(rm x)", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("[[ $(rm x) ]]", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("coproc rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("echo ${X:-$(rm x)}", "refuse RUN_COMMAND_SCRIPT_UNPARSABLE");
    sh(
        "echo $(( $(rm x) + 1 ))",
        "refuse RUN_COMMAND_SCRIPT_UNPARSABLE",
    );
    sh("(( $(rm x) ))", "refuse RUN_COMMAND_SCRIPT_UNPARSABLE");
    sh("eval rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("eval 'ls; rm x'", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("eval \"$CMD\"", "refuse RUN_COMMAND_NOT_STATIC");
    sh("eval ls", "run shell confirm");
    sh("trap 'rm x' EXIT; ls", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("trap \"$X\" EXIT", "refuse RUN_COMMAND_NOT_STATIC");
    sh("$CMD x", "refuse RUN_COMMAND_NOT_STATIC");
    sh("${CMD} x", "refuse RUN_COMMAND_NOT_STATIC");
    sh("/bin/rm x", "refuse RUN_COMMAND_NOT_STATIC");
    sh("./rm x", "refuse RUN_COMMAND_NOT_STATIC");
    sh("~/bin/tool", "refuse RUN_COMMAND_NOT_STATIC");
    sh("{r,m} x", "refuse RUN_COMMAND_NOT_STATIC");
    sh("r* x", "refuse RUN_COMMAND_NOT_STATIC");
    sh("env /bin/rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("xargs $CMD", "refuse RUN_COMMAND_NOT_STATIC");
    sh("env $CMD", "refuse RUN_COMMAND_NOT_STATIC");
    sh("PATH=/tmp/evil ls", "refuse RUN_COMMAND_ENVIRONMENT_DENIED");
    sh(
        "export PATH=.:$PATH; ls",
        "refuse RUN_COMMAND_ENVIRONMENT_DENIED",
    );
    sh(
        "LD_PRELOAD=x.so ls",
        "refuse RUN_COMMAND_ENVIRONMENT_DENIED",
    );
    sh("env PATH=. ls", "refuse RUN_COMMAND_ENVIRONMENT_DENIED");
    sh(
        "BASH_ENV=x bash script.sh",
        "refuse RUN_COMMAND_ENVIRONMENT_DENIED",
    );
    sh(
        "declare -n r=PATH; r=.",
        "refuse RUN_COMMAND_ENVIRONMENT_DENIED",
    );
    sh("read PATH < f; ls", "refuse RUN_COMMAND_ENVIRONMENT_DENIED");
    sh(
        "GIT_EXTERNAL_DIFF=rm git diff",
        "refuse RUN_COMMAND_RM_IN_SCRIPT",
    );
    sh(
        "GIT_PAGER='sudo x' git log",
        "refuse RUN_COMMAND_SUDO_IN_SCRIPT",
    );
    sh("PAGER=$X git log", "refuse RUN_COMMAND_NOT_STATIC");
    sh("echo rm x | sh", "refuse RUN_COMMAND_SHELL_UNSUPPORTED");
    sh("bash < script.sh", "refuse RUN_COMMAND_SHELL_UNSUPPORTED");
    sh("bash -s < x", "refuse RUN_COMMAND_SHELL_UNSUPPORTED");
    sh("zsh -c 'ls'", "refuse RUN_COMMAND_SHELL_UNSUPPORTED");
    sh("fish -c ls", "refuse RUN_COMMAND_SHELL_UNSUPPORTED");
    sh("bash -c \"$X\"", "refuse RUN_COMMAND_NOT_STATIC");
    sh("strace -f rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("chroot / rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh(
        "flock /tmp/l bash -c x",
        "refuse RUN_COMMAND_SHELL_UNSUPPORTED",
    );
    sh("unshare -r sudo x", "refuse RUN_COMMAND_SUDO_IN_SCRIPT");
    sh("busybox rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("npx rm x", "refuse RUN_COMMAND_RM_IN_SCRIPT");
    sh("shutdown -h now", "refuse RUN_COMMAND_DENIED");
    sh("ls && mkfs.ext4 /dev/sda", "refuse RUN_COMMAND_DENIED");
    sh("xargs shutdown", "refuse RUN_COMMAND_DENIED");
    sh("ls \"", "refuse RUN_COMMAND_SCRIPT_UNPARSABLE");
    sh("if then fi", "refuse RUN_COMMAND_SCRIPT_UNPARSABLE");
    sh("ls $(", "refuse RUN_COMMAND_SCRIPT_UNPARSABLE");
    sh("echo 'unterminated", "refuse RUN_COMMAND_SCRIPT_UNPARSABLE");
    sh("cd", "run shell none par");
}

#[test]
fn launchers_at_the_top_of_the_argv_are_seen_through() {
    check(r#"["env", "rm", "x"]"#, "refuse RUN_COMMAND_RM_IN_SCRIPT");
    check(r#"["nice", "rm", "x"]"#, "refuse RUN_COMMAND_RM_IN_SCRIPT");
    check(r#"["xargs", "rm"]"#, "refuse RUN_COMMAND_RM_IN_SCRIPT");
    check(
        r#"["timeout", "5", "sudo", "ls"]"#,
        "refuse RUN_COMMAND_SUDO_IN_SCRIPT",
    );
    check(
        r#"["/usr/bin/env", "rm", "x"]"#,
        "refuse RUN_COMMAND_RM_IN_SCRIPT",
    );
    check(
        r#"["env", "/bin/rm", "x"]"#,
        "refuse RUN_COMMAND_RM_IN_SCRIPT",
    );
    check(
        r#"["find", ".", "-exec", "rm", "{}", "+"]"#,
        "refuse RUN_COMMAND_RM_IN_SCRIPT",
    );
    check(
        r#"["env", "bash", "-c", "rm x"]"#,
        "refuse RUN_COMMAND_RM_IN_SCRIPT",
    );
    check(
        r#"["bash", "-c", "rm x"]"#,
        "refuse RUN_COMMAND_RM_IN_SCRIPT",
    );
    check(
        r#"["sh", "-c", "sudo apt-get update"]"#,
        "refuse RUN_COMMAND_SUDO_IN_SCRIPT",
    );
    check(
        r#"["env", "PATH=/tmp", "ls"]"#,
        "refuse RUN_COMMAND_ENVIRONMENT_DENIED",
    );
    check(r#"["env", "-S", "rm x"]"#, "refuse RUN_COMMAND_NOT_STATIC");
    check(
        r#"["zsh", "-c", "rm x"]"#,
        "refuse RUN_COMMAND_SHELL_UNSUPPORTED",
    );
    check(r#"["bash"]"#, "refuse RUN_COMMAND_SHELL_UNSUPPORTED");
    check(r#"["bash", "--version"]"#, "run direct none par");
    check(r#"["shutdown", "now"]"#, "refuse RUN_COMMAND_DENIED");
    check(r#"["/sbin/reboot"]"#, "refuse RUN_COMMAND_DENIED");
    check(r#"["alias"]"#, "refuse RUN_COMMAND_DENIED");
}

#[test]
fn cd_and_open_have_their_own_pointers() {
    check(r#"["cd", "src"]"#, "refuse RUN_COMMAND_CD");
    check(r#"["cd"]"#, "refuse RUN_COMMAND_CD");
    check(r#"["cd", "~/x"]"#, "refuse RUN_COMMAND_CD");
    mac(r#"["open", "README.md"]"#, "refuse RUN_COMMAND_OPEN");
    mac(r#"["open", "-a", "Safari"]"#, "refuse RUN_COMMAND_OPEN");
    mac(r#"["sh", "-c", "open x"]"#, "refuse RUN_COMMAND_OPEN");
    mac(r#"["env", "open", "x"]"#, "refuse RUN_COMMAND_OPEN");
    check(r#"["open", "README.md"]"#, "run direct confirm");
    mac(r#"["ls"]"#, "run direct none par");
}

#[test]
fn rm_moves_to_the_trash_with_the_gate_of_where_the_paths_are() {
    auto(r#"["rm", "build/out.o"]"#, "run direct none trash=1");
    auto(
        r#"["rm", "-rf", "target", "dist"]"#,
        "run direct none trash=2",
    );
    auto(r#"["rm", "/home/u/proj/a"]"#, "run direct none trash=1");
    check(r#"["rm", "a"]"#, "run direct confirm trash=1");
    auto(r#"["rm", "/home/u/other/a"]"#, "run direct confirm trash=1");
    auto(r#"["rm", "../other/a"]"#, "run direct confirm trash=1");
    allow_all(r#"["rm", "/home/u/other/a"]"#, "run direct none trash=1");
    auto(r#"["rm", "/tmp/a"]"#, "run direct password trash=1");
    allow_all(r#"["rm", "/tmp/a"]"#, "run direct password trash=1");
    check(r#"["rm", "/etc/passwd"]"#, "run direct password trash=1");
    auto(r#"["rm", "a", "/tmp/b"]"#, "run direct password trash=2");
    auto(r#"["rm", "../../../tmp/a"]"#, "run direct password trash=1");
    auto(r#"["rm", "--", "-weird"]"#, "run direct none trash=1");
    auto(r#"["rm", ".env"]"#, "run direct confirm trash=1");
    auto(
        r#"["rm", "/home/u/.ssh/id_rsa"]"#,
        "run direct confirm trash=1",
    );
    auto(r#"["rm"]"#, "refuse RUN_COMMAND_RM_INVALID");
    auto(r#"["rm", "-rf"]"#, "refuse RUN_COMMAND_RM_INVALID");
    auto(r#"["rm", "-rf", "/"]"#, "refuse RUN_COMMAND_RM_INVALID");
    auto(
        r#"["rm", "-rf", "/home/u"]"#,
        "refuse RUN_COMMAND_RM_INVALID",
    );
    auto(r#"["rm", "-rf", "."]"#, "refuse RUN_COMMAND_RM_INVALID");
    auto(r#"["rm", "-rf", ".."]"#, "refuse RUN_COMMAND_RM_INVALID");
    auto(r#"["rm", "-rf", "/home"]"#, "refuse RUN_COMMAND_RM_INVALID");
    auto(r#"["/bin/rm", "a"]"#, "refuse RUN_COMMAND_RM_INVALID");
    auto(
        r#"{"argv": ["rm", "a"], "sandbox": false}"#,
        "run direct password trash=1",
    );
}

#[test]
fn sudo_argv_form_always_asks_for_the_password() {
    check(
        r#"["sudo", "apt-get", "install", "-y", "jq"]"#,
        "run direct password sudo",
    );
    auto(
        r#"["sudo", "apt-get", "install", "-y", "jq"]"#,
        "run direct password sudo",
    );
    allow_all(
        r#"["sudo", "dnf", "install", "-y", "jq"]"#,
        "run direct password sudo",
    );
    allow_all(r#"["sudo", "ls"]"#, "run direct password sudo");
    auto(r#"["sudo", "rm", "/var/x"]"#, "run direct password sudo");
    check(
        r#"["sudo", "-u", "root", "ls"]"#,
        "refuse RUN_COMMAND_SUDO_INVALID",
    );
    check(r#"["sudo", "-n", "ls"]"#, "refuse RUN_COMMAND_SUDO_INVALID");
    check(r#"["sudo", "-i"]"#, "refuse RUN_COMMAND_SUDO_INVALID");
    check(r#"["sudo"]"#, "refuse RUN_COMMAND_SUDO_INVALID");
    check(
        r#"["sudo", "sudo", "ls"]"#,
        "refuse RUN_COMMAND_SUDO_INVALID",
    );
    check(r#"["sudo", "su"]"#, "refuse RUN_COMMAND_SUDO_INVALID");
    check(
        r#"["sudo", "/usr/bin/apt-get", "update"]"#,
        "refuse RUN_COMMAND_SUDO_INVALID",
    );
    check(
        r#"["sudo", "shutdown", "now"]"#,
        "refuse RUN_COMMAND_DENIED",
    );
    check(
        r#"["sudo", "bash", "-c", "ls"]"#,
        "refuse RUN_COMMAND_SUDO_INVALID",
    );
    check(
        r#"["sudo", "env", "ls"]"#,
        "refuse RUN_COMMAND_SUDO_INVALID",
    );
    check(
        r#"["sudo", "xargs", "ls"]"#,
        "refuse RUN_COMMAND_SUDO_INVALID",
    );
    check(
        r#"["sudo", "strace", "ls"]"#,
        "refuse RUN_COMMAND_SUDO_INVALID",
    );
    check(r#"["su", "-c", "ls"]"#, "refuse RUN_COMMAND_SUDO_INVALID");
    check(r#"["doas", "ls"]"#, "refuse RUN_COMMAND_SUDO_INVALID");
    check(
        r#"["/usr/bin/sudo", "ls"]"#,
        "refuse RUN_COMMAND_SUDO_INVALID",
    );
}

#[test]
fn sandbox_false_and_write_paths_outside_home_need_the_password() {
    check(
        r#"{"argv": ["brew", "install", "jq"], "sandbox": false}"#,
        "run direct password",
    );
    allow_all(
        r#"{"argv": ["brew", "install", "jq"], "sandbox": false}"#,
        "run direct password",
    );
    allow_all(
        r#"{"argv": ["ls"], "sandbox": false}"#,
        "run direct password",
    );
    auto(
        r#"{"argv": ["make"], "write_paths": ["/opt/x"]}"#,
        "run direct password",
    );
    allow_all(
        r#"{"argv": ["make"], "write_paths": ["/opt/x"]}"#,
        "run direct password",
    );
    auto(
        r#"{"argv": ["make"], "write_paths": ["/home/u/other"]}"#,
        "run direct none",
    );
    check(
        r#"{"argv": ["ls"], "write_paths": ["/home/u/other"]}"#,
        "run direct confirm",
    );
    auto(
        r#"{"argv": ["make"], "write_paths": ["../../../opt"]}"#,
        "run direct password",
    );
    auto(
        r#"{"argv": ["make"], "write_paths": ["/home/u/.ssh"]}"#,
        "run direct confirm",
    );
    auto(
        r#"{"argv": ["make"], "write_paths": [""]}"#,
        "refuse RUN_COMMAND_WRITE_PATH_INVALID",
    );
    auto(
        r#"{"argv": ["make"], "write_paths": ["/"]}"#,
        "refuse RUN_COMMAND_WRITE_PATH_INVALID",
    );
    auto(
        r#"{"argv": ["make"], "write_paths": ["/home/.."]}"#,
        "refuse RUN_COMMAND_WRITE_PATH_INVALID",
    );
    check(
        r#"{"argv": ["sh", "-c", "rm x"], "sandbox": false}"#,
        "refuse RUN_COMMAND_RM_IN_SCRIPT",
    );
}

#[test]
fn sensitive_paths_cancel_a_read_only_match() {
    check(r#"["cat", "/home/u/.ssh/id_rsa"]"#, "run direct confirm");
    check(r#"["ls", "/home/u/.ssh"]"#, "run direct confirm");
    check(r#"["cat", ".env"]"#, "run direct confirm");
    check(r#"["cat", ".env.local"]"#, "run direct confirm");
    check(r#"["cat", "config/prod.env"]"#, "run direct confirm");
    check(r#"["cat", "server.key"]"#, "run direct confirm");
    check(r#"["cat", "certs/server.pem"]"#, "run direct confirm");
    check(
        r#"["cat", "/home/u/.aws/credentials"]"#,
        "run direct confirm",
    );
    check(r#"["cat", "/home/u/.netrc"]"#, "run direct confirm");
    check(r#"["cat", "/home/u/.bash_history"]"#, "run direct confirm");
    check(
        r#"["cat", "/home/u/.config/gcloud/x.json"]"#,
        "run direct confirm",
    );
    check(r#"["cat", "../../.ssh/config"]"#, "run direct confirm");
    check(
        r#"["cat", "a/../../../.ssh/../.ssh/config"]"#,
        "run direct confirm",
    );
    // The pattern is grep's own (RC-2), and it names sensitive files.
    check(
        r#"["grep", "-r", "x", "--include=*.pem"]"#,
        "run direct confirm",
    );
    check(
        r#"["grep", "-r", "x", "--include=*.rs"]"#,
        "run direct none par",
    );
    check(
        r#"["grep", "--file=/home/u/.ssh/id_ed25519", "x"]"#,
        "run direct confirm",
    );
    check(
        r#"["git", "-C", "/home/u/.ssh", "log"]"#,
        "run direct confirm",
    );
    check(
        r#"["kubectl", "--kubeconfig", "/home/u/.kube/config", "get", "pods"]"#,
        "run direct confirm",
    );
    check(r#"["cat", "/etc/shadow"]"#, "run direct confirm");
    check(r#"["cat", "/etc/hosts"]"#, "run direct none par");
    check(r#"["cat", "environment.md"]"#, "run direct none par");
    check(r#"["cat", "keys.md"]"#, "run direct none par");
    sh("cat ~/.ssh/id_rsa", "run shell confirm");
    sh("cat $HOME/.aws/credentials", "run shell confirm");
    sh("cat < ~/.netrc", "run shell confirm");
    sh("cat .env | grep KEY", "run shell confirm");
}

#[test]
fn watchers_are_refused_with_the_pointer_to_background_command() {
    check(r#"["tsc", "--watch"]"#, "refuse RUN_COMMAND_WATCHER");
    check(r#"["tsc", "-w"]"#, "refuse RUN_COMMAND_WATCHER");
    check(
        r#"["webpack", "--watch=true"]"#,
        "refuse RUN_COMMAND_WATCHER",
    );
    check(r#"["jest", "--watchAll"]"#, "refuse RUN_COMMAND_WATCHER");
    check(
        r#"["node", "--watch", "index.js"]"#,
        "refuse RUN_COMMAND_WATCHER",
    );
    check(
        r#"["chokidar", "src", "-c", "make"]"#,
        "refuse RUN_COMMAND_WATCHER",
    );
    check(r#"["nodemon", "index.js"]"#, "refuse RUN_COMMAND_WATCHER");
    check(
        r#"["cargo", "watch", "-x", "test"]"#,
        "refuse RUN_COMMAND_WATCHER",
    );
    check(r#"["npx", "tsc", "-w"]"#, "refuse RUN_COMMAND_WATCHER");
    check(
        r#"["kubectl", "get", "pods", "-w"]"#,
        "refuse RUN_COMMAND_WATCHER",
    );
    check(
        r#"["gradle", "build", "--continuous"]"#,
        "refuse RUN_COMMAND_WATCHER",
    );
    check(
        r#"["sudo", "inotifywait", "-m", "/etc"]"#,
        "refuse RUN_COMMAND_WATCHER",
    );
    check(r#"["grep", "-w", "word", "file"]"#, "run direct none par");
    check(r#"["wc", "-w", "file"]"#, "run direct none par");
    sh("npx tsc --watch", "refuse RUN_COMMAND_WATCHER");
    sh("ls && tsc -w", "refuse RUN_COMMAND_WATCHER");
    sh("env FOO=1 nodemon x", "refuse RUN_COMMAND_WATCHER");
    sh("bash -c 'vite build --watch'", "refuse RUN_COMMAND_WATCHER");
}

#[test]
fn mask_tokens_in_the_argv_are_invalid() {
    check(
        r#"["curl", "-H", "Authorization: Bearer [secret:1]"]"#,
        "refuse RUN_COMMAND_MASKED_SECRET",
    );
    check(
        r#"["sh", "-c", "echo [secret:12] | x"]"#,
        "refuse RUN_COMMAND_MASKED_SECRET",
    );
    check(
        r#"{"argv": ["ls"], "write_paths": ["/x/[secret:3]"]}"#,
        "refuse RUN_COMMAND_MASKED_SECRET",
    );
    check(r#"["echo", "secret:1"]"#, "run direct none par");
}

#[test]
fn malformed_arguments_are_refused_before_anything_else() {
    check(r#"[]"#, "refuse RUN_COMMAND_ARGUMENTS_INVALID");
    check(r#"[""]"#, "refuse RUN_COMMAND_ARGUMENTS_INVALID");
    check(
        r#"["ls", "a\u0000b"]"#,
        "refuse RUN_COMMAND_ARGUMENTS_INVALID",
    );
    check(r#"["sh", "-c"]"#, "refuse RUN_COMMAND_ARGUMENTS_INVALID");
}

/// `getopt_long` and git accept any unambiguous prefix of a long
/// option, so an abbreviation of a write/exec flag is that flag.
#[test]
fn abbreviated_long_options_count_as_the_flag_they_abbreviate() {
    check(r#"["sort", "--outpu=PWSORT", "x"]"#, "run direct confirm");
    check(r#"["sort", "--out=PWSORT", "x"]"#, "run direct confirm");
    check(r#"["iconv", "--outp=F", "x"]"#, "run direct confirm");
    check(r#"["shuf", "--outp=F", "x"]"#, "run direct confirm");
    // Review 2: one- and two-letter abbreviations of write/exec flags; operands after `--`.
    check(
        r#"["git","ls-remote","--up=./e.sh","."]"#,
        "run direct confirm",
    );
    check(r#"["git","grep","--op=./e.sh","hi"]"#, "run direct confirm");
    check(r#"["man","--co=m.conf","ls"]"#, "run direct confirm");
    check(r#"["nm","--pl","./p.so","a.txt"]"#, "run direct confirm");
    check(
        r#"["sort","-S","64k","-T",".","--co=./e.sh","big.txt"]"#,
        "run direct confirm",
    );
    check(r#"["sort","--ou=o","b"]"#, "run direct confirm");
    check(r#"["sort","--o=o","b"]"#, "run direct confirm");
    check(r#"["shuf","--ou=o","b"]"#, "run direct confirm");
    check(
        r#"["iconv","-f","utf8","-t","ascii","--o=o","a"]"#,
        "run direct confirm",
    );
    check(r#"["sdiff","--ou=o","a","b"]"#, "run direct confirm");
    check(r#"["git","fsck","--lo"]"#, "run direct confirm");
    check(r#"["uniq","b.txt","--","-out4"]"#, "run direct confirm");
    check(
        r#"["git", "grep", "--open-files=touch X", "hello"]"#,
        "run direct confirm",
    );
    check(
        r#"["git", "grep", "--open", "hello"]"#,
        "run direct confirm",
    );
    check(
        r#"["git", "grep", "-Otouch", "hello"]"#,
        "run direct confirm",
    );
    check(
        r#"["sort", "--compress-prog=sh", "x"]"#,
        "run direct confirm",
    );
    check(
        r#"["sort", "--compress-program=sh", "x"]"#,
        "run direct confirm",
    );
    check(r#"["git", "log", "--outp=x"]"#, "run direct confirm");
    check(r#"["git", "diff", "--ext-d"]"#, "run direct confirm");
    // Liveness: other options' names (even sharing a first letter) and longer names keep the hit.
    check(r#"["sort", "--reverse", "x"]"#, "run direct none par");
    check(r#"["uniq", "-c", "--", "b.txt"]"#, "run direct none par");
    check(
        r#"["git", "log", "--output-indicator-new=+"]"#,
        "run direct none par",
    );
    check(r#"["ls", "--dereference"]"#, "run direct none par");
    check(r#"["rg", "--pretty", "x"]"#, "run direct none par");
    check(r#"["sort", "--numeric-sort", "x"]"#, "run direct none par");
}

/// A variable that makes a program run another program or read
/// another configuration makes the command not read-only (PATH, LD_*, BASH_ENV, GCONV_PATH … stay
/// refused; `env NAME=…` is never read-only).
#[test]
fn steering_variables_make_a_command_not_read_only() {
    sh(
        r#"GIT_EXTERNAL_DIFF="touch PWEXTD" git diff"#,
        "run shell confirm",
    );
    sh(
        r#"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0="touch X;false" git status"#,
        "run shell confirm",
    );
    sh(
        r#"GIT_SSH_COMMAND="touch X" git ls-remote ssh://x/y"#,
        "run shell confirm",
    );
    sh(
        "TAR_OPTIONS=--checkpoint-action=exec=touch tar -tf a.tar",
        "run shell confirm",
    );
    sh("GIT_DIR=evil git status", "run shell confirm");
    sh("GIT_WORK_TREE=/tmp git status", "run shell confirm");
    sh("GIT_CONFIG_GLOBAL=evil git log", "run shell confirm");
    sh("HOME=/home/u/proj/evil git status", "run shell confirm");
    sh("HOME=/home/u/proj/evil; git status", "run shell confirm");
    sh("XDG_CONFIG_HOME=evil git log", "run shell confirm");
    sh(
        "NODE_OPTIONS=--require=./x.js node --version",
        "run shell confirm",
    );
    sh("PYTHONSTARTUP=x.py python3 --version", "run shell confirm");
    sh("PERL5OPT=-Mevil perl -v", "run shell confirm");
    sh("RUBYOPT=-revil ruby -v", "run shell confirm");
    sh("RIPGREP_CONFIG_PATH=rc rg x", "run shell confirm");
    sh("LESSOPEN='|touch X %s' git log", "run shell confirm");
    sh("GREP=evil zgrep hi a.gz", "run shell confirm");
    sh("APT_CONFIG=./a.conf apt-cache policy", "run shell confirm");
    sh("PHPRC=./p.ini php -v", "run shell confirm");
    sh("PHP_INI_SCAN_DIR=. php -v", "run shell confirm");
    sh("PIPX_HOME=. pipx list", "run shell confirm");
    sh("PAGER=evil man ls", "run shell confirm");
    sh("MANPAGER=evil man ls", "run shell confirm");
    sh("GROFF_TMAC_PATH=. man ls", "run shell confirm");
    sh("EDITOR=vim git log", "run shell confirm");
    sh(
        "GCONV_PATH=. iconv -l",
        "refuse RUN_COMMAND_ENVIRONMENT_DENIED",
    );
    check(
        r#"["env", "GIT_DIR=evil", "git", "status"]"#,
        "run direct confirm",
    );
    check(
        r#"["env", "TAR_OPTIONS=-x", "tar", "-tf", "a.tar"]"#,
        "run direct confirm",
    );
    // Liveness: output-only variables and a read-only pager keep the hit.
    sh("LANG=C sort x", "run shell none par");
    sh("GIT_PAGER=cat git log", "run shell none par");
    sh("GIT_OPTIONAL_LOCKS=0 git status", "run shell none par");
    sh("NO_COLOR=1 git diff", "run shell none par");
}

/// Options that run a program or write, version rules that match
/// only exactly, `git branch NAME`, compressors beyond listing, and git's repository selectors.
#[test]
fn options_that_run_programs_or_write_cancel_a_hit() {
    for tar in [
        r#"["tar", "-tf", "a.tar", "--checkpoint=1", "--checkpoint-action=exec=touch X"]"#,
        r#"["tar", "-tf", "a.tar", "--checkpoint-act=exec=touch X"]"#,
        r#"["tar", "-tf", "a.tar", "--to-command=sh"]"#,
        r#"["tar", "-tf", "a.tar", "--use-compress-program=sh"]"#,
        r#"["tar", "-tf", "a.tar", "-Ish"]"#,
        r#"["tar", "-tf", "a.tar", "--info-script=x"]"#,
        r#"["tar", "-tf", "a.tar", "-F", "x"]"#,
        r#"["tar", "-tf", "a.tar", "--new-volume-script=x"]"#,
        r#"["tar", "-tf", "a.tar", "--rsh-command=x"]"#,
        r#"["tar", "-tf", "a.tar", "--index-file=out"]"#,
        r#"["tar", "-tf", "host:a.tar"]"#,
    ] {
        check(tar, "run direct confirm");
    }
    check(
        r#"["git", "ls-remote", "--upload-pack=touch X", "."]"#,
        "run direct confirm",
    );
    check(
        r#"["git", "ls-remote", "-u", "touch X", "."]"#,
        "run direct confirm",
    );
    check(
        r#"["git", "ls-remote", "--upload=touch X", "."]"#,
        "run direct confirm",
    );
    check(r#"["gcc", "-v", "m.c", "-o", "X"]"#, "run direct confirm");
    check(r#"["ruby", "-v", "x.rb"]"#, "run direct confirm");
    check(r#"["javac", "-version", "X.java"]"#, "run direct confirm");
    check(r#"["sdiff", "-o", "F", "a", "b"]"#, "run direct confirm");
    check(r#"["git", "branch", "-v", "NAME"]"#, "run direct confirm");
    check(r#"["git", "branch", "-vv", "NAME"]"#, "run direct confirm");
    check(r#"["git", "branch", "-a", "NAME"]"#, "run direct confirm");
    check(r#"["xz", "-l", "-d", "a.xz"]"#, "run direct confirm");
    check(r#"["xz", "-l", "-k", "a.xz"]"#, "run direct confirm");
    check(r#"["gzip", "-l", "-d", "a.gz"]"#, "run direct confirm");
    check(r#"["gzip", "-ld", "a.gz"]"#, "run direct confirm");
    check(r#"["zstdcat", "-o", "out", "a.zst"]"#, "run direct confirm");
    for git in [
        r#"["git", "--git-dir=evil", "status"]"#,
        r#"["git", "--git-dir", "evil", "status"]"#,
        r#"["git", "--work-tree=/tmp", "status"]"#,
        r#"["git", "-C", "evil", "status"]"#,
        r#"["git", "-C", "/home/u/other", "log"]"#,
        r#"["git", "--bare", "log"]"#,
        r#"["git", "--exec-path=evil", "log"]"#,
        r#"["git", "--config-env=core.pager=X", "log"]"#,
        r#"["git", "-c", "core.fsmonitor=touch X", "status"]"#,
        r#"["git", "show", "--output=x"]"#,
        r#"["git", "diff", "--output=x"]"#,
        r#"["git", "help", "--web", "log"]"#,
    ] {
        check(git, "run direct confirm");
    }
    check(r#"["sysctl", "-n", "kernel.x=1"]"#, "run direct confirm");
    check(r#"["sysctl", "-a", "-p"]"#, "run direct confirm");
    check(
        r#"["rustc", "--print", "cfg=out.txt"]"#,
        "run direct confirm",
    );
    check(
        r#"["go", "list", "-toolexec=x", "./..."]"#,
        "run direct confirm",
    );
    check(r#"["go", "list", "--exec", "x"]"#, "run direct confirm");
    check(r#"["go", "env", "-w", "GOFLAGS=x"]"#, "run direct confirm");
    check(r#"["tree", "-R"]"#, "run direct confirm");
    check(r#"["man", "-P", "touch X", "ls"]"#, "run direct confirm");
    check(r#"["man", "-Hfirefox", "ls"]"#, "run direct confirm");
    check(r#"["nm", "--plugin", "x.so", "a.o"]"#, "run direct confirm");
    check(
        r#"["rpm", "-q", "--eval", "%(touch X)"]"#,
        "run direct confirm",
    );
    check(r#"["npm", "audit", "fix"]"#, "run direct confirm");
    check(r#"["npm", "fund", "left-pad"]"#, "run direct confirm");
    check(
        r#"["ip", "-br", "addr", "add", "1.2.3.4/24"]"#,
        "run direct confirm",
    );
    check(r#"["ip", "-b", "cmds"]"#, "run direct confirm");
    check(r#"["ifconfig", "-a", "eth0", "up"]"#, "run direct confirm");
    check(
        r#"["kubectl", "--kubeconfig", "k.yaml", "get", "pods"]"#,
        "run direct confirm",
    );
    check(
        r#"["docker", "--config", "dir", "compose", "ps"]"#,
        "run direct confirm",
    );
    check(
        r#"["helm", "template", "x", "--post-renderer", "sh"]"#,
        "run direct confirm",
    );
    check(r#"["yarn", "--version"]"#, "run direct confirm");
    check(r#"["mvn", "--version"]"#, "run direct confirm");
    check(r#"["prettier", "--check", "."]"#, "run direct confirm");
    check(r#"["terraform", "validate"]"#, "run direct confirm");
    // Liveness: the plain queries still run without a confirmation.
    for hit in [
        r#"["tar", "-tvf", "a.tar"]"#,
        r#"["gcc", "-v"]"#,
        r#"["gcc", "--version"]"#,
        r#"["ruby", "-v"]"#,
        r#"["git", "--version"]"#,
        r#"["git", "branch", "-v"]"#,
        r#"["git", "branch", "-a"]"#,
        r#"["git", "branch", "--list", "feat*"]"#,
        r#"["git", "branch", "--contains", "HEAD"]"#,
        r#"["git", "branch", "-v", "--sort", "committerdate"]"#,
        r#"["git", "-C", "/home/u/proj", "status"]"#,
        r#"["git", "ls-remote", "--tags", "."]"#,
        r#"["xz", "-l", "a.xz"]"#,
        r#"["xz", "-l", "-v", "a.xz"]"#,
        r#"["gzip", "-l", "a.gz"]"#,
        r#"["zcat", "a.gz"]"#,
        r#"["sdiff", "a", "b"]"#,
        r#"["sysctl", "-n", "kernel.ostype"]"#,
        r#"["rustc", "--print", "sysroot"]"#,
        r#"["go", "list", "./..."]"#,
        r#"["ip", "-br", "addr"]"#,
        r#"["ip", "addr", "show"]"#,
        r#"["ifconfig", "-a"]"#,
        r#"["man", "ls"]"#,
        r#"["npm", "fund"]"#,
        r#"["npm", "audit"]"#,
        r#"["kubectl", "get", "pods"]"#,
        r#"["terraform", "version"]"#,
    ] {
        check(hit, "run direct none par");
    }
}

/// After `cd`, `git` may find a repository the agent made, whose configuration is not protected.
#[test]
fn git_after_cd_in_a_script_is_not_read_only() {
    sh("cd evil && git status", "run shell confirm");
    sh("cd evil; timeout 5 git log", "run shell confirm");
    sh("pushd evil; git status", "run shell confirm");
    // Liveness: `cd` alone, and `git` without `cd`, keep the hit.
    sh("cd src && ls", "run shell none par");
    sh("git status && git log -n 1", "run shell none par");
}

/// The added private locations are sensitive paths.
#[test]
fn added_private_locations_cancel_a_read_only_match() {
    for path in [
        "/home/u/.cache/huggingface/token",
        "/home/u/.huggingface/token",
        "/home/u/.codex/auth.json",
        "/home/u/.claude/.credentials.json",
        "/home/u/.claude.json",
        "/home/u/.kaggle/kaggle.json",
        "/home/u/.config/github-copilot/hosts.json",
        "/home/u/.gemini/oauth_creds.json",
        "/home/u/.terraformrc",
        "/home/u/.config/configstore/firebase-tools.json",
        "/home/u/.databrickscfg",
        "/home/u/.sentryclirc",
        "/home/u/.config/pypoetry/auth.toml",
        "/home/u/.composer/auth.json",
        "/home/u/.bundle/config",
        "/home/u/.config/ngrok/ngrok.yml",
        "/home/u/.wrangler/config/default.toml",
        "/home/u/.viminfo",
        "/home/u/.local/share/Trash/files/id_rsa",
        "/home/u/.local/share/recently-used.xbel",
    ] {
        let argv = serde_json::to_string(&["cat", path]).unwrap();
        check(&argv, "run direct confirm");
    }
    // Liveness: the rest of the cache is not private.
    check(
        r#"["ls", "/home/u/.cache/huggingface/hub"]"#,
        "run direct none par",
    );
    check(r#"["cat", "/home/u/.cache/pip/x"]"#, "run direct none par");
}
