//! End to end (LIVE-4): a command that fails on an access the sandbox
//! refused says so in `denials`, derived from the policy; a permission error the sandbox did
//! not cause (the file's own mode) and a successful command have none. Each test runs here and,
//! when we are root, again as uid 65534 (`run_as_nobody`), and skips loudly where the machine
//! cannot sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod support;

use command_tool::{CommandArguments, CommandOutput, Denial, DeniedAccess, DenyAll};
use serde_json::json;
use support::{Fixture, sandbox_available};
use toolscope::CallContext;

async fn call(f: &Fixture, command: &str) -> CommandOutput {
    let (ctx, _h) = CallContext::standalone();
    let args = CommandArguments::from_json(json!({"command": command})).unwrap();
    command_tool::command(args, f.lease.clone(), &DenyAll, &ctx)
        .await
        .unwrap()
}

/// Runs `test` again as uid 65534 when we are root (the body has already run as root).
fn also_as_nobody(test: &str) {
    if testkit::is_root() {
        let text =
            testkit::run_as_nobody(&["--exact", test, "--nocapture", "--test-threads=1"], &[]);
        assert!(
            text.is_empty() || text.contains("1 passed"),
            "{test} as nobody:\n{text}"
        );
    }
}

#[tokio::test]
async fn reading_a_key_outside_the_scope_is_exactly_one_denial_with_the_policys_reason() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let key = f.outside(".ssh/id_rsa", "-----BEGIN KEY-----\n");
    let out = call(&f, &format!("cat '{}'", key.display())).await;
    // The result is otherwise what it was: the shell's exit code and cat's message.
    assert_eq!(out.exit_code, Some(1), "{out:?}");
    // Refused (`Permission denied`) or, in a view of the grants only, absent.
    assert!(
        out.stderr.contains("Permission denied") || out.stderr.contains("No such file"),
        "{out:?}"
    );
    assert_eq!(
        out.denials,
        [Denial {
            path: key.to_string_lossy().into_owned(),
            access: DeniedAccess::Read,
            reason: "outside the work scope and the system runtime".into(),
            remedy: "add it as an extraPaths entry (the user confirms it)".into(),
        }],
        "{out:?}"
    );
    let wire = serde_json::to_value(&out).unwrap();
    assert_eq!(wire["denials"][0]["access"], "read", "{wire}");
    also_as_nobody("reading_a_key_outside_the_scope_is_exactly_one_denial_with_the_policys_reason");
}

#[tokio::test]
async fn a_successful_command_has_no_denials_field() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    f.write("a.txt", "a\n");
    // Output that mentions a path and the words without an error shape is not a denial.
    let out = call(
        &f,
        "cat a.txt; echo 'reading /etc/shadow'; echo 'Permission denied'",
    )
    .await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert!(out.denials.is_empty(), "{out:?}");
    let wire = serde_json::to_value(&out).unwrap();
    assert!(wire.get("denials").is_none(), "{wire}");
    also_as_nobody("a_successful_command_has_no_denials_field");
}

#[tokio::test]
async fn a_files_own_mode_in_the_workspace_is_not_a_sandbox_denial() {
    use std::os::unix::fs::PermissionsExt;
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let locked = f.write("locked.txt", "l\n");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = call(
        &f,
        "cat locked.txt; cat \"$PWD/locked.txt\"; echo x > locked.txt",
    )
    .await;
    if !testkit::is_root() {
        // A real DAC error: the sandbox allows it, the file's mode does not.
        assert!(out.stderr.contains("Permission denied"), "{out:?}");
    }
    assert!(out.denials.is_empty(), "{out:?}");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o600)).unwrap();
    also_as_nobody("a_files_own_mode_in_the_workspace_is_not_a_sandbox_denial");
}

#[tokio::test]
async fn a_write_outside_and_a_system_secret_get_their_own_remedies() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let target = f.outside("keep.txt", "k").with_file_name("new.txt");
    let mut command = format!("touch '{}'", target.display());
    let shadow = std::path::Path::new("/etc/shadow").exists();
    if shadow {
        command.push_str("; cat /etc/shadow");
    }
    let out = call(&f, &command).await;
    assert!(!target.exists());
    let write = out
        .denials
        .iter()
        .find(|d| d.path == target.to_string_lossy())
        .unwrap_or_else(|| panic!("no denial for the write: {out:?}"));
    assert_eq!(write.access, DeniedAccess::Create, "{out:?}");
    assert_eq!(
        write.remedy,
        "write inside the workspace or the call's temp dir, or ask the user for a writable \
         extraPaths entry"
    );
    if shadow {
        let secret = out
            .denials
            .iter()
            .find(|d| d.path == "/etc/shadow")
            .unwrap_or_else(|| panic!("no denial for /etc/shadow: {out:?}"));
        assert_eq!(
            (secret.access, secret.remedy.as_str()),
            (
                DeniedAccess::Read,
                "not part of the system runtime: only world-readable system files are"
            )
        );
    } else {
        eprintln!("skipped the /etc/shadow half: no /etc/shadow here");
    }
    assert_eq!(out.denials.len(), 1 + usize::from(shadow), "{out:?}");
    also_as_nobody("a_write_outside_and_a_system_secret_get_their_own_remedies");
}

#[tokio::test]
async fn real_tools_messages_under_the_sandbox_each_name_their_denial() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let secret = f.outside("private/data.txt", "secret\n");
    let dir = secret.parent().unwrap().to_path_buf();
    let s = secret.display();
    let d = dir.display();
    // (command, path, access) — in C.UTF-8, as the command tool runs them.
    let mut cases: Vec<(String, String, DeniedAccess)> = vec![
        (format!("ls '{d}'"), d.to_string(), DeniedAccess::Read),
        (format!("head -c1 '{s}'"), s.to_string(), DeniedAccess::Read),
        (
            format!("mkdir '{d}/new'"),
            format!("{d}/new"),
            DeniedAccess::Create,
        ),
        (
            format!("cp '{s}' copy.txt"),
            s.to_string(),
            DeniedAccess::Read,
        ),
        (
            format!("echo x > '{d}/out'"),
            format!("{d}/out"),
            DeniedAccess::Create,
        ),
    ];
    for (tool, command) in [
        ("python3", format!("python3 -c \"open('{s}')\"")),
        (
            "node",
            format!("node -e \"require('fs').readFileSync('{s}')\""),
        ),
    ] {
        if std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success())
        {
            cases.push((command, s.to_string(), DeniedAccess::Read));
        } else {
            eprintln!("skipped the {tool} case: no {tool} on PATH");
        }
    }
    for (command, path, access) in cases {
        let out = call(&f, &command).await;
        assert_ne!(out.exit_code, Some(0), "{command}: {out:?}");
        assert_eq!(out.denials.len(), 1, "{command}: {out:?}");
        assert_eq!(
            (out.denials[0].path.as_str(), out.denials[0].access),
            (path.as_str(), access),
            "{command}: {out:?}"
        );
    }
    also_as_nobody("real_tools_messages_under_the_sandbox_each_name_their_denial");
}
