//! The system runtime set of a `command` through the real sandbox (LIVE-1,
//! CMD-10): what the rules withhold stays unreadable — for a root host too, which would read a
//! root-only file as its owner — and what they grant does the everyday work (public `/etc`
//! configuration, compilers, programs built in the workspace). Run as root, then again as uid
//! 65534 by `every_test_also_holds_unprivileged`. Each call is checked for survivors.
#![cfg(target_os = "linux")]
// Helpers outside #[test] fns unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use exec::sysset::Withheld;

const UNPRIVILEGED_ENV: &str = "AGENT_EXEC_SYSTEM_SET_UNPRIVILEGED";

mod common;
use common::{Call, text};

// Skips loudly, or fails where `AGENT_EXEC_REQUIRE` names what is missing.
use testkit::sandbox_available;

/// Single-quoted for `sh` (test-made text only; the paths come from the host's `/etc`).
fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

// ---- what stays private ---------------------------------------------------------------------

#[tokio::test]
async fn the_hosts_secrets_in_etc_stay_unreadable_even_for_a_root_host() {
    if !sandbox_available() {
        return;
    }
    let w = Call::new("agent-exec-sysset");
    let mut secrets: Vec<PathBuf> = [
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/sudoers",
        "/etc/ssl/private",
        "/etc/machine-id",
    ]
    .iter()
    .map(PathBuf::from)
    .filter(|p| p.exists())
    .collect();
    if let Ok(entries) = std::fs::read_dir("/etc/ssh") {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("ssh_host_") && name.ends_with("_key") {
                secrets.push(e.path());
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir("/etc/ssl/private") {
        secrets.extend(entries.flatten().map(|e| e.path()));
    }
    eprintln!("trying {} secrets: {secrets:?}", secrets.len());
    // `cat` for a file, `ls` for a directory: any success prints LEAK.
    let script: String = secrets
        .iter()
        .map(|p| {
            let q = quote(p);
            format!(
                "if [ -d {q} ]; then ls {q}; else cat {q}; fi >/dev/null 2>&1 && echo LEAK {q}\n"
            )
        })
        .collect();
    let out = w.sh(&format!("{script}echo done")).await;
    assert_eq!(text(&out.stdout), "done\n", "{out:?}");
}

#[tokio::test]
async fn every_etc_entry_the_rules_withhold_stays_unreadable() {
    if !sandbox_available() {
        return;
    }
    let set = exec::sysset::current().judged();
    let withheld: Vec<&PathBuf> = set
        .etc
        .withheld
        .iter()
        .filter(|(path, why)| match why {
            // Another layer may give the command a private /proc: a link
            // into it (/etc/mtab) is that layer's to judge.
            Withheld::LinkOutside(Some(target)) => !target.starts_with("/proc"),
            Withheld::LinkOutside(None) => false,
            _ => path.exists(),
        })
        .map(|(p, _)| p)
        .collect();
    eprintln!("{} withheld entries: {withheld:?}", withheld.len());
    let w = Call::new("agent-exec-sysset");
    let script: String = withheld
        .iter()
        .map(|p| {
            let q = quote(p);
            format!(
                "if [ -d {q} ]; then ls {q}; else cat {q}; fi >/dev/null 2>&1 && echo LEAK {q}\n"
            )
        })
        .collect();
    let out = w.sh(&format!("{script}echo done")).await;
    assert_eq!(text(&out.stdout), "done\n", "{out:?}");
}

#[tokio::test]
async fn package_managers_data_and_config_prefixes_stay_private() {
    if !sandbox_available() {
        return;
    }
    let w = Call::new("agent-exec-sysset");
    let candidates = [
        "/usr/local/etc",
        "/usr/local/var",
        "/var/lib",
        "/var/log",
        "/root",
        "/home",
        "/opt",
    ];
    let present: Vec<&str> = candidates
        .into_iter()
        .filter(|p| Path::new(p).is_dir())
        .collect();
    let script: String = present
        .iter()
        .map(|p| format!("ls {p} >/dev/null 2>&1 && echo LEAK {p}\n"))
        .collect();
    let out = w.sh(&format!("{script}echo done")).await;
    assert_eq!(text(&out.stdout), "done\n", "{present:?}: {out:?}");
}

#[tokio::test]
async fn a_link_in_etc_does_not_reach_past_the_set() {
    if !sandbox_available() {
        return;
    }
    let set = exec::sysset::current();
    // The rules never make a rule for a link (what would grant its target).
    for allowed in &set.etc.allowed {
        let meta = std::fs::symlink_metadata(allowed).unwrap();
        assert!(!meta.file_type().is_symlink(), "{allowed:?} is a link");
    }
}

// ---- what works -----------------------------------------------------------------------------

#[tokio::test]
async fn public_configuration_in_etc_is_readable() {
    if !sandbox_available() {
        return;
    }
    let w = Call::new("agent-exec-sysset");
    let public: Vec<&str> = [
        "/etc/passwd",
        "/etc/group",
        "/etc/nsswitch.conf",
        "/etc/ssl/openssl.cnf",
        "/etc/debian_version",
        "/etc/os-release",
        "/etc/java-17-openjdk/security/java.security",
        "/etc/ld.so.cache",
    ]
    .into_iter()
    .filter(|p| {
        std::fs::metadata(p)
            .is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o004 != 0)
    })
    .collect();
    let script: String = public
        .iter()
        .map(|p| format!("cat {p} >/dev/null || echo DENIED {p}\n"))
        .collect();
    let out = w.sh(&format!("{script}echo done")).await;
    assert_eq!(text(&out.stdout), "done\n", "{public:?}: {out:?}");
}

#[tokio::test]
async fn programs_built_in_the_workspace_and_the_temp_dir_run() {
    if !sandbox_available() {
        return;
    }
    let w = Call::new("agent-exec-sysset");
    let out = w
        .sh(
            "printf '#!/bin/sh\\necho from-scope\\n' > t.sh && chmod +x t.sh && ./t.sh && \
             cp t.sh \"$TMPDIR/u.sh\" && \"$TMPDIR/u.sh\"",
        )
        .await;
    assert_eq!(text(&out.stdout), "from-scope\nfrom-scope\n", "{out:?}");
}

#[tokio::test]
async fn a_c_program_compiles_links_libm_and_runs() {
    if !sandbox_available() {
        return;
    }
    if !Path::new("/usr/bin/cc").exists() {
        eprintln!("skipped: no /usr/bin/cc on this machine");
        return;
    }
    let w = Call::new("agent-exec-sysset");
    std::fs::write(
        w.scope.join("m.c"),
        "#include <stdio.h>\n#include <math.h>\nint main(void){printf(\"%.3f\\n\", sqrt(2.0));return 0;}\n",
    )
    .unwrap();
    let out = w.sh("cc -O2 -pthread -o m m.c -lm && ./m").await;
    assert_eq!(text(&out.stdout), "1.414\n", "{out:?}");
}

#[test]
fn every_test_also_holds_unprivileged() {
    if std::env::var_os(UNPRIVILEGED_ENV).is_some() || !testkit::is_root() {
        eprintln!("not root, or already the unprivileged run");
        return;
    }
    let out = testkit::run_as_nobody(
        &[
            "--test-threads=2",
            "--skip",
            "every_test_also_holds_unprivileged",
        ],
        &[(UNPRIVILEGED_ENV, "1")],
    );
    assert!(out.is_empty() || out.contains("test result: ok"), "{out}");
}
