//! The liveness suite (LIVE-1…LIVE-3, invariant 8): each real toolchain an
//! agent is asked to use does its ordinary work through `agent-exec call command` in a fresh
//! workspace, and its real output is checked — C with `make -j2`, C++, Python (pytest, venv
//! with pip, multiprocessing, sqlite3), unix sockets, Node (`npm test`, `require('https')`),
//! Java, every git on `PATH`, `ps`, and a Rust crate's `cargo test --offline` through approved
//! read-only extra paths and through `--toolchains`.
//!
//! A toolchain this machine lacks is skipped loudly (the test prints why); `.ci/run` installs
//! them all. Each call also starts a background `sleep` with a unique marker that must not
//! survive the call (invariant 4). Run as root, then again as uid 65534 by
//! `every_liveness_test_also_holds_unprivileged`.
//!
//! The binary under test is `agent-exec` from the same target directory (built by `cargo test
//! --workspace`, which builds every binary before running any test), or `$AGENT_EXEC_BIN`.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const UNPRIVILEGED_ENV: &str = "AGENT_EXEC_LIVENESS_UNPRIVILEGED";

fn agent_exec() -> PathBuf {
    if let Some(bin) = std::env::var_os("AGENT_EXEC_BIN") {
        return bin.into();
    }
    // target/debug/deps/liveness-… → target/debug/agent-exec
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("agent-exec");
    assert!(
        bin.exists(),
        "no agent-exec binary at {}: run `cargo build -p agent-exec` (or the \
         whole `cargo test --workspace`), or set AGENT_EXEC_BIN",
        bin.display()
    );
    bin
}

// Skips loudly, or fails where `AGENT_EXEC_REQUIRE` names what is missing.
use testkit::sandbox_available;

mod common;

/// The liveness tests that need unix sockets (`socket(AF_UNIX)`), which a shell gets only with
/// Landlock's abstract-socket scope (ABI 6, `common::unix_sockets_here`): below it they end
/// with the documented refusal instead ("unix sockets refused" in the result's `sandbox`).
const NEEDS_UNIX_SOCKETS: &[&str] = &[
    "a_unix_socket_server_and_client_in_the_workspace_talk",
    // `multiprocessing.Manager` listens on a unix socket.
    "python_multiprocessing_manager_and_shared_memory_work",
];

/// Whether this capability level cannot give what `test` needs (`cargo xtask matrix`): at a
/// level that refuses every shell (`common::shell_refusal`), or below ABI 6 for
/// [`NEEDS_UNIX_SOCKETS`]. Then one call shows the documented refusal, a
/// `refused as expected:` line says so, and the caller returns; a level that refuses something
/// else fails the test as before.
fn refused_here(test: &str) -> bool {
    if let Some(reason) = common::shell_refusal() {
        let out = Ws::new().call("echo ran");
        assert_eq!(out["code"], "AGENT_EXEC_SANDBOX_UNAVAILABLE", "{out:#}");
        let message = out["message"].as_str().unwrap_or_default();
        assert!(message.contains(&reason), "{out:#}\nexpected: {reason}");
        eprintln!("{} {test}: {message}", common::REFUSED_MARK);
        return true;
    }
    if NEEDS_UNIX_SOCKETS.contains(&test) && !common::unix_sockets_here() {
        let out = Ws::new().call("python3 -c 'import socket; socket.socket(socket.AF_UNIX)'");
        assert_ne!(out["exitCode"], 0, "{out:#}");
        let sandbox = out["sandbox"].as_str().unwrap_or_default();
        assert!(sandbox.contains("unix sockets refused"), "{out:#}");
        eprintln!("{} {test}: {sandbox}", common::REFUSED_MARK);
        return true;
    }
    false
}

/// Whether `program` exists on the sandbox's `PATH` (what the command will find); prints why a
/// test is skipped when it does not.
fn have(program: &str) -> bool {
    let found = ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .any(|dir| Path::new(dir).join(program).exists());
    if !found {
        eprintln!("skipped: {program} is not installed here (.ci/run installs it)");
    }
    found
}

/// A fresh workspace and state directory.
struct Ws {
    tree: testkit::TempTree,
    state: tempfile::TempDir,
}

impl Ws {
    fn new() -> Ws {
        Ws {
            tree: testkit::TempTree::new("work"),
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn write(&self, rel: &str, contents: &str) -> PathBuf {
        self.tree.write(rel, contents)
    }

    /// `agent-exec call command` with `script`, `flags` before the JSON; the result line.
    fn call_with(&self, script: &str, extra: &[(&Path, bool)], flags: &[&str]) -> Value {
        let marker = testkit::marker();
        let extra_paths: Vec<Value> = extra
            .iter()
            .map(|(p, w)| serde_json::json!({"path": p.display().to_string(), "write": w}))
            .collect();
        let args = serde_json::json!({
            "command": format!("sleep {marker} & {script}"),
            "extraPaths": extra_paths,
            "timeoutMs": 240_000,
        });
        let mut cmd = Command::new(agent_exec());
        cmd.arg("call")
            .arg("command")
            .arg("--workspace")
            .arg(&self.tree.root)
            .arg("--state-dir")
            .arg(self.state.path())
            .args(flags);
        for (p, _) in extra {
            cmd.arg("--approve-extra-path").arg(p);
        }
        let out = cmd.arg("--json").arg(args.to_string()).output().unwrap();
        let line = String::from_utf8_lossy(&out.stdout);
        let value: Value = serde_json::from_str(line.trim()).unwrap_or_else(|e| {
            panic!(
                "not one JSON line ({e}): {line}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert!(
            testkit::alive_with(&marker).is_empty(),
            "a process of the call survived it: {value}"
        );
        value
    }

    fn call(&self, script: &str) -> Value {
        self.call_with(script, &[], &[])
    }

    /// [`Ws::call`] with the workspace as the user's home directory, holding `~/.ssh`.
    fn call_as_home(&self, script: &str) -> Value {
        std::fs::create_dir_all(self.tree.root.join(".ssh")).unwrap();
        let out = Command::new(agent_exec())
            .args(["call", "command", "--workspace"])
            .arg(&self.tree.root)
            .arg("--state-dir")
            .arg(self.state.path())
            .env("HOME", &self.tree.root)
            .arg("--json")
            .arg(serde_json::json!({ "command": script }).to_string())
            .output()
            .unwrap();
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap()
    }
}

/// The call ran, exited 0, and its stdout contains every one of `wanted`.
#[track_caller]
fn assert_ran(out: &Value, wanted: &[&str]) {
    assert_eq!(out["ok"], true, "{out:#}");
    assert_eq!(out["exitCode"], 0, "{out:#}");
    let stdout = out["stdout"].as_str().unwrap_or_default();
    for w in wanted {
        assert!(stdout.contains(w), "{w:?} missing: {out:#}");
    }
}

#[test]
fn c_with_make_headers_libm_and_pthreads_builds_and_its_tests_run() {
    if !sandbox_available()
        || !have("cc")
        || !have("make")
        || refused_here("c_with_make_headers_libm_and_pthreads_builds_and_its_tests_run")
    {
        return;
    }
    let ws = Ws::new();
    ws.write(
        "m.c",
        "#include <math.h>\n#include <pthread.h>\n#include <stdio.h>\n#include \"add.h\"\n\
         static void *work(void *a) { (void)a; return NULL; }\n\
         int main(void) { pthread_t t; pthread_create(&t, NULL, work, NULL); pthread_join(t, NULL);\n\
         printf(\"sqrt=%.1f add=%d\\n\", sqrt(16.0), add(2, 3)); return 0; }\n",
    );
    ws.write("add.h", "int add(int a, int b);\n");
    ws.write(
        "add.c",
        "#include \"add.h\"\nint add(int a, int b) { return a + b; }\n",
    );
    ws.write(
        "Makefile",
        "CFLAGS = -O2 -Wall -pthread\nm: m.o add.o\n\t$(CC) $(CFLAGS) -o $@ $^ -lm\n\
         test: m\n\t./m\n.PHONY: test\n",
    );
    let out = ws.call("make -j2 test");
    assert_ran(&out, &["sqrt=4.0 add=5"]);
}

#[test]
fn cpp_compiles_and_runs() {
    if !sandbox_available() || !have("g++") || refused_here("cpp_compiles_and_runs") {
        return;
    }
    let ws = Ws::new();
    ws.write(
        "a.cpp",
        "#include <iostream>\n#include <vector>\n#include <numeric>\n\
         int main() { std::vector<int> v{1, 2, 3}; std::cout << \"sum \" << std::accumulate(v.begin(), v.end(), 0) << std::endl; }\n",
    );
    let out = ws.call("g++ -O1 -o a a.cpp && ./a");
    assert_ran(&out, &["sum 6"]);
}

#[test]
fn python_pytest_sqlite_and_multiprocessing_pools_work() {
    if !sandbox_available()
        || !have("python3")
        || refused_here("python_pytest_sqlite_and_multiprocessing_pools_work")
    {
        return;
    }
    let ws = Ws::new();
    ws.write(
        "mp.py",
        "import multiprocessing as mp, sqlite3\n\
         def sq(x): return x * x\n\
         if __name__ == '__main__':\n\
         \x20   with mp.Pool(2) as p: print('pool', sum(p.map(sq, range(10))))\n\
         \x20   s = mp.Semaphore(1); s.acquire(); s.release(); print('semaphore ok')\n\
         \x20   with mp.Lock(): print('lock ok')\n\
         \x20   q = mp.Queue(); q.put(41); print('queue', q.get() + 1)\n\
         \x20   db = sqlite3.connect('t.db'); db.execute('create table t(x)'); db.execute('insert into t values (42)')\n\
         \x20   print('sqlite', db.execute('select x from t').fetchone()[0])\n",
    );
    let out = ws.call("python3 mp.py");
    assert_ran(
        &out,
        &[
            "pool 285",
            "semaphore ok",
            "lock ok",
            "queue 42",
            "sqlite 42",
        ],
    );

    if Command::new("python3")
        .args(["-c", "import pytest"])
        .status()
        .is_ok_and(|s| s.success())
    {
        ws.write("test_it.py", "def test_adds():\n    assert 1 + 1 == 2\n");
        let out = ws.call("python3 -m pytest -q -p no:cacheprovider test_it.py");
        assert_ran(&out, &["1 passed"]);
    } else {
        eprintln!("skipped: pytest is not installed here (.ci/run installs python3-pytest)");
    }
}

#[test]
fn python_multiprocessing_manager_and_shared_memory_work() {
    if !sandbox_available()
        || !have("python3")
        || refused_here("python_multiprocessing_manager_and_shared_memory_work")
    {
        return;
    }
    let ws = Ws::new();
    ws.write(
        "mgr.py",
        "import multiprocessing as mp\nfrom multiprocessing import shared_memory\n\
         if __name__ == '__main__':\n\
         \x20   with mp.Manager() as m:\n\
         \x20       d = m.dict(); d['k'] = 7; print('manager', d['k'])\n\
         \x20   shm = shared_memory.SharedMemory(create=True, size=16); shm.buf[0] = 9\n\
         \x20   print('shm', shm.buf[0]); shm.close(); shm.unlink()\n",
    );
    let out = ws.call("python3 mgr.py");
    assert_ran(&out, &["manager 7", "shm 9"]);
}

#[test]
fn python_venv_with_pip_is_created_and_runs() {
    if !sandbox_available()
        || !have("python3")
        || refused_here("python_venv_with_pip_is_created_and_runs")
    {
        return;
    }
    if !Command::new("python3")
        .args(["-c", "import ensurepip, venv"])
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("skipped: python3-venv is not installed here (.ci/run installs it)");
        return;
    }
    let ws = Ws::new();
    // The two steps `python3 -m venv` takes, run apart: venv swallows ensurepip's own output,
    // and a failure here has to say what pip refused.
    let out = ws.call(
        "python3 -m venv --without-pip .venv && .venv/bin/python -m ensurepip --upgrade --default-pip \
         && .venv/bin/python -m pip --version",
    );
    assert_ran(&out, &["pip "]);
}

#[test]
fn a_unix_socket_server_and_client_in_the_workspace_talk() {
    if !sandbox_available()
        || !have("python3")
        || refused_here("a_unix_socket_server_and_client_in_the_workspace_talk")
    {
        return;
    }
    let ws = Ws::new();
    ws.write(
        "sock.py",
        "import os, socket, threading\n\
         path = os.path.abspath('s.sock')\n\
         srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); srv.bind(path); srv.listen(1)\n\
         def serve():\n\
         \x20   c, _ = srv.accept(); c.sendall(b'pong:' + c.recv(16)); c.close()\n\
         t = threading.Thread(target=serve); t.start()\n\
         cl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); cl.connect(path); cl.sendall(b'ping')\n\
         print(cl.recv(32).decode()); t.join()\n",
    );
    let out = ws.call("python3 sock.py");
    assert_ran(&out, &["pong:ping"]);
    // A workspace that is the user's home is refused before anything runs (TRUST-3, HOST-3):
    // it holds startup files, programs on PATH, caches, and ~/.ssh and ~/.gnupg, whose agents'
    // sockets a command could connect to.
    let out = ws.call_as_home("python3 sock.py");
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(out["code"], "AGENT_EXEC_PATH_INVALID", "{out}");
    assert!(
        out["message"]
            .as_str()
            .unwrap_or("")
            .contains("is your home directory"),
        "{out}"
    );
}

/// Where the command could get no network namespace of its own (NET-1), inet sockets stay
/// refused and the result's `sandbox` says so: then `out` must have failed, a `refused as
/// expected:` line says why, and the caller returns.
fn loopback_refused_here(test: &str, out: &Value) -> bool {
    let sandbox = out["sandbox"].as_str().unwrap_or_default();
    if sandbox.contains("a private loopback network") {
        return false;
    }
    assert!(sandbox.contains("inet sockets refused"), "{out:#}");
    assert_ne!(out["exitCode"], 0, "{out:#}");
    eprintln!("{} {test}: {sandbox}", common::REFUSED_MARK);
    true
}

/// NET-1: `python -m http.server` and a client in the same command meet on `127.0.0.1` and
/// `::1`, and the command sees one interface, its own `lo`.
#[test]
fn a_python_http_server_and_its_client_meet_on_the_commands_own_loopback() {
    let test = "a_python_http_server_and_its_client_meet_on_the_commands_own_loopback";
    if !sandbox_available() || !have("python3") || refused_here(test) {
        return;
    }
    let ws = Ws::new();
    ws.write("index.html", "hello from the loopback\n");
    ws.write(
        "client.py",
        "import socket, sys, time, urllib.request\n\
         print(socket.if_nameindex())\n\
         for host in sys.argv[1:]:\n\
         \x20   for _ in range(100):\n\
         \x20       try:\n\
         \x20           print(urllib.request.urlopen(f'http://{host}:8731/index.html').read().decode(), end='')\n\
         \x20           break\n\
         \x20       except OSError:\n\
         \x20           time.sleep(0.1)\n",
    );
    let out = ws.call(
        "python3 -m http.server 8731 --bind 127.0.0.1 >/dev/null 2>&1 & v4=$!; \
         python3 client.py 127.0.0.1; kill $v4; \
         python3 -m http.server 8731 --bind ::1 >/dev/null 2>&1 & v6=$!; \
         python3 client.py [::1]; kill $v6",
    );
    if loopback_refused_here(test, &out) {
        return;
    }
    assert_ran(&out, &["[(1, 'lo')]"]);
    let stdout = out["stdout"].as_str().unwrap_or_default();
    assert_eq!(
        stdout.matches("hello from the loopback").count(),
        2,
        "{out:#}"
    );
}

/// NET-1: a Node `http` server and `fetch` in one command; `os.networkInterfaces()` (which
/// Vite, Next.js and webpack-dev-server call, over `NETLINK_ROUTE`) lists only `lo`.
#[test]
fn a_node_http_server_answers_fetch_and_network_interfaces_lists_lo() {
    let test = "a_node_http_server_answers_fetch_and_network_interfaces_lists_lo";
    if !sandbox_available() || !have("node") || refused_here(test) {
        return;
    }
    let ws = Ws::new();
    ws.write(
        "serve.js",
        "const http = require('http'); const os = require('os');\n\
         console.log('interfaces', Object.keys(os.networkInterfaces()).join(','));\n\
         const server = http.createServer((req, res) => res.end('node says hi'));\n\
         server.listen(0, '127.0.0.1', async () => {\n\
         \x20 const r = await fetch(`http://127.0.0.1:${server.address().port}/`);\n\
         \x20 console.log(await r.text()); server.close();\n\
         });\n",
    );
    let out = ws.call("node serve.js");
    if loopback_refused_here(test, &out) {
        return;
    }
    assert_ran(&out, &["interfaces lo\n", "node says hi"]);
}

/// NET-1: a pytest suite whose fixtures serve TCP and UDP on `localhost`.
#[test]
fn pytest_with_tcp_and_udp_fixtures_on_localhost_passes() {
    let test = "pytest_with_tcp_and_udp_fixtures_on_localhost_passes";
    if !sandbox_available() || !have("pytest") || refused_here(test) {
        return;
    }
    let ws = Ws::new();
    ws.write(
        "test_loopback.py",
        "import socket, threading, pytest\n\
         @pytest.fixture\n\
         def tcp_echo():\n\
         \x20   srv = socket.create_server(('localhost', 0))\n\
         \x20   def serve():\n\
         \x20       c, _ = srv.accept(); c.sendall(c.recv(64)); c.close()\n\
         \x20   threading.Thread(target=serve, daemon=True).start()\n\
         \x20   yield srv.getsockname()[1]\n\
         \x20   srv.close()\n\
         @pytest.fixture\n\
         def udp_echo():\n\
         \x20   srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); srv.bind(('localhost', 0))\n\
         \x20   def serve():\n\
         \x20       data, peer = srv.recvfrom(64); srv.sendto(data, peer)\n\
         \x20   threading.Thread(target=serve, daemon=True).start()\n\
         \x20   yield srv.getsockname()[1]\n\
         \x20   srv.close()\n\
         def test_tcp(tcp_echo):\n\
         \x20   with socket.create_connection(('localhost', tcp_echo), 5) as c:\n\
         \x20       c.sendall(b'ping'); assert c.recv(64) == b'ping'\n\
         def test_udp(udp_echo):\n\
         \x20   c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.settimeout(5)\n\
         \x20   c.sendto(b'pong', ('localhost', udp_echo)); assert c.recvfrom(64)[0] == b'pong'\n",
    );
    let out = ws.call("pytest -q -p no:cacheprovider test_loopback.py 2>&1");
    if loopback_refused_here(test, &out) {
        return;
    }
    assert_ran(&out, &["2 passed"]);
}

/// NET-1: `go test` with `net/http/httptest`, which listens on `127.0.0.1` or `[::1]`.
#[test]
fn go_test_with_httptest_passes() {
    let test = "go_test_with_httptest_passes";
    if !sandbox_available() || !have("go") || refused_here(test) {
        return;
    }
    let ws = Ws::new();
    ws.write("go.mod", "module live\n\ngo 1.18\n");
    ws.write(
        "live_test.go",
        "package live\n\n\
         import (\n\t\"io\"\n\t\"net/http\"\n\t\"net/http/httptest\"\n\t\"testing\"\n)\n\n\
         func TestServer(t *testing.T) {\n\
         \tsrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, \"go says hi\") }))\n\
         \tdefer srv.Close()\n\
         \tres, err := http.Get(srv.URL)\n\
         \tif err != nil {\n\t\tt.Fatal(err)\n\t}\n\
         \tbody, _ := io.ReadAll(res.Body)\n\
         \tif string(body) != \"go says hi\" {\n\t\tt.Fatalf(\"got %q\", body)\n\t}\n\
         }\n",
    );
    let out = ws.call("GOFLAGS=-mod=mod GOPROXY=off go test ./... 2>&1");
    if loopback_refused_here(test, &out) {
        return;
    }
    assert_ran(&out, &["ok"]);
}

/// NET-2: `/tmp` and `/var/tmp` are the command's own and writable: GNU make's output sync
/// (`-O`, which keeps each job's output in a `tmpfile()` that is always in `/tmp`) and Java's
/// `Files.createTempFile` (`java.io.tmpdir` is `/tmp`) work; `TMPDIR` is still the call's.
#[test]
fn make_output_sync_and_java_temp_files_work_in_the_commands_own_tmp() {
    let test = "make_output_sync_and_java_temp_files_work_in_the_commands_own_tmp";
    if !sandbox_available() || !have("make") || refused_here(test) {
        return;
    }
    let ws = Ws::new();
    ws.write("Makefile", "all: a b c d\na b c d:\n\t@echo job $@\n");
    let out = ws.call(
        "make -j4 -O 2>&1 && echo x > /var/tmp/v && cat /var/tmp/v && case $TMPDIR in /tmp/*) \
         test -w \"$TMPDIR\" && echo tmpdir kept;; esac",
    );
    assert_ran(&out, &["job a", "job d", "x\n", "tmpdir kept"]);
    if !have("java") {
        return;
    }
    ws.write(
        "Temp.java",
        "public class Temp { public static void main(String[] a) throws Exception {\n\
         \x20 java.nio.file.Path p = java.nio.file.Files.createTempFile(\"live\", \".txt\");\n\
         \x20 java.nio.file.Files.writeString(p, \"ok\");\n\
         \x20 System.out.println(p.getParent() + \" \" + java.nio.file.Files.readString(p));\n\
         } }\n",
    );
    let out = ws.call("java Temp.java 2>&1");
    assert_ran(&out, &["/tmp ok"]);
}

#[test]
fn node_runs_npm_test_and_loads_https() {
    if !sandbox_available()
        || !have("node")
        || !have("npm")
        || refused_here("node_runs_npm_test_and_loads_https")
    {
        return;
    }
    let ws = Ws::new();
    ws.write(
        "package.json",
        r#"{"name": "live", "version": "1.0.0", "scripts": {"test": "node --test"}}"#,
    );
    ws.write(
        "test/add.test.js",
        "const test = require('node:test'); const assert = require('node:assert');\n\
         test('adds', () => assert.strictEqual(1 + 1, 2));\n",
    );
    let out = ws.call("node -e \"require('https'); console.log('https loaded')\" && npm test 2>&1");
    assert_ran(&out, &["https loaded", "pass 1"]);
}

#[test]
fn java_compiles_and_runs() {
    if !sandbox_available()
        || !have("javac")
        || !have("java")
        || refused_here("java_compiles_and_runs")
    {
        return;
    }
    let ws = Ws::new();
    ws.write(
        "Hello.java",
        "public class Hello { public static void main(String[] a) { System.out.println(\"hello \" + (6 * 7)); } }\n",
    );
    let out = ws.call("javac Hello.java && java Hello");
    assert_ran(&out, &["hello 42"]);
}

#[test]
fn every_git_on_path_inits_commits_and_logs() {
    if !sandbox_available() || refused_here("every_git_on_path_inits_commits_and_logs") {
        return;
    }
    let gits: Vec<&str> = ["/usr/local/bin/git", "/usr/bin/git"]
        .into_iter()
        .filter(|g| Path::new(g).exists())
        .collect();
    if gits.is_empty() {
        eprintln!("skipped: no git installed here (.ci/run installs it)");
        return;
    }
    for git in gits {
        let ws = Ws::new();
        ws.write("README", "hello\n");
        let out = ws.call(&format!(
            "G={git}; $G init -q . && $G config user.email a@b.c && $G config user.name A && \
             $G add README && $G commit -q -m first && $G log --format='%s by %an' && \
             $G status --short && echo clean"
        ));
        assert_ran(&out, &["first by A", "clean"]);
    }
}

#[test]
fn ps_shows_only_the_commands_own_processes() {
    if !sandbox_available()
        || !have("ps")
        || refused_here("ps_shows_only_the_commands_own_processes")
    {
        return;
    }
    // A process of the host's with a recognisable command line, alive during the call.
    let marker = testkit::marker();
    let mut outside = Command::new("sleep").arg(&marker).spawn().unwrap();
    let ws = Ws::new();
    let out = ws
        .call("ps -e -o pid=,comm=; cat /proc/self/status | head -1; ls /proc | grep -c '^[0-9]'");
    outside.kill().unwrap();
    outside.wait().unwrap();
    assert_ran(&out, &["ps", "Name:"]);
    let stdout = out["stdout"].as_str().unwrap();
    assert!(
        !stdout.contains(&marker),
        "a host process is visible: {out:#}"
    );
    let pids: usize = stdout.lines().last().unwrap().trim().parse().unwrap();
    assert!(pids < 10, "the call sees {pids} processes: {out:#}");
}

/// A dependency-free crate, tested offline with the host's own Rust toolchain.
fn rust_crate(ws: &Ws) {
    ws.write(
        "Cargo.toml",
        "[package]\nname = \"live\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    ws.write(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n#[test]\nfn adds() { assert_eq!(add(2, 2), 4); }\n",
    );
}

/// `~/.cargo` and `~/.rustup` of the user running the tests, if they hold a toolchain this user
/// can read.
fn user_rust() -> Option<(PathBuf, PathBuf)> {
    let home = PathBuf::from(std::env::var_os("HOME")?);
    let (cargo, rustup) = (home.join(".cargo"), home.join(".rustup"));
    let usable = std::fs::read_dir(cargo.join("bin")).is_ok() && std::fs::read_dir(&rustup).is_ok();
    if !usable {
        eprintln!(
            "skipped: no readable ~/.cargo/bin and ~/.rustup for this user (HOME={})",
            home.display()
        );
        return None;
    }
    Some((cargo, rustup))
}

#[test]
fn cargo_test_offline_runs_through_approved_read_only_extra_paths() {
    if !sandbox_available()
        || refused_here("cargo_test_offline_runs_through_approved_read_only_extra_paths")
    {
        return;
    }
    let Some((cargo, rustup)) = user_rust() else {
        return;
    };
    let ws = Ws::new();
    rust_crate(&ws);
    let script = format!(
        "CARGO_HOME={c} RUSTUP_HOME={r} {c}/bin/cargo test --offline 2>&1",
        c = cargo.display(),
        r = rustup.display()
    );
    let out = ws.call_with(&script, &[(&cargo, false), (&rustup, false)], &[]);
    assert_ran(&out, &["test adds ... ok"]);
}

#[test]
fn cargo_test_offline_runs_with_toolchains() {
    if !sandbox_available()
        || user_rust().is_none()
        || refused_here("cargo_test_offline_runs_with_toolchains")
    {
        return;
    }
    let ws = Ws::new();
    rust_crate(&ws);
    let out = ws.call_with("cargo test --offline 2>&1", &[], &["--toolchains"]);
    assert_ran(&out, &["test adds ... ok"]);
}

#[test]
fn every_liveness_test_also_holds_unprivileged() {
    if std::env::var_os(UNPRIVILEGED_ENV).is_some() || !testkit::is_root() {
        return;
    }
    let bin = agent_exec();
    // The test binary runs from a copy nobody can read; so does agent-exec.
    let dir = tempfile::Builder::new()
        .prefix("agent-exec-liveness-bin")
        .tempdir()
        .unwrap();
    let copy = dir.path().join("agent-exec");
    std::fs::copy(&bin, &copy).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = testkit::run_as_nobody(
        &["--skip", "every_liveness_test_also_holds_unprivileged"],
        &[
            (UNPRIVILEGED_ENV, "1"),
            ("AGENT_EXEC_BIN", copy.to_str().unwrap()),
            ("HOME", "/nonexistent"),
        ],
    );
    eprintln!("{out}");
}
