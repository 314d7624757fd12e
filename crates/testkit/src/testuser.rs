//! The test user of `.ci/run`: a real account with a known password and a sudoers
//! entry for exactly the commands the tests run, so password gates are tested against the
//! system's own check (PAM, `sudo -S -v`), never a mock.
//!
//! `AGENT_EXEC_TEST_USER` names the user and `AGENT_EXEC_TEST_PASSWORD` holds its password.
//! A test asks [`test_user`] (a loud skip, or a failure when `AGENT_EXEC_REQUIRE` names
//! `testuser`), then re-runs itself as that user with [`run_as_test_user`], like
//! [`run_as_nobody`](crate::run_as_nobody).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::require::{Capability, REQUIRE_VAR, require};

/// The environment variable naming the test user.
pub const TEST_USER_VAR: &str = "AGENT_EXEC_TEST_USER";
/// The environment variable holding the test user's password.
pub const TEST_PASSWORD_VAR: &str = "AGENT_EXEC_TEST_PASSWORD";

/// The test user of `.ci/run`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestUser {
    /// The login name.
    pub name: String,
    /// Its password.
    pub password: String,
    /// Its uid.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
    /// Its home directory.
    pub home: PathBuf,
}

/// `/etc/passwd`'s entry for `name`: uid, gid, home.
fn passwd_entry(name: &str) -> Option<(u32, u32, PathBuf)> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        (f.len() >= 7 && f[0] == name)
            .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?, PathBuf::from(f[5]))))?
    })
}

fn lookup() -> Result<TestUser, String> {
    let name = std::env::var(TEST_USER_VAR)
        .map_err(|_| format!("{TEST_USER_VAR} is not set (.ci/run creates the test user)"))?;
    let password = std::env::var(TEST_PASSWORD_VAR)
        .map_err(|_| format!("{TEST_PASSWORD_VAR} is not set (.ci/run sets it)"))?;
    let (uid, gid, home) =
        passwd_entry(&name).ok_or_else(|| format!("user {name:?} does not exist here"))?;
    Ok(TestUser {
        name,
        password,
        uid,
        gid,
        home,
    })
}

/// Why the test user cannot be used here, or `None` when it can (the [`Capability::TestUser`]
/// probe).
pub(crate) fn missing() -> Option<String> {
    if let Err(why) = lookup() {
        return Some(why);
    }
    if !crate::is_root() {
        // Inside the re-run itself, [`test_user`] is not asked again: the re-run is the user.
        return Some("switching to the test user needs root".into());
    }
    if !Path::new("/usr/bin/setpriv").exists() {
        return Some("no /usr/bin/setpriv to switch to the test user".into());
    }
    None
}

/// The test user, when this machine has it and this process may switch to it; otherwise a
/// loud skip (`None`), or a panic when `AGENT_EXEC_REQUIRE` names `testuser`.
pub fn test_user() -> Option<TestUser> {
    if !require(&[Capability::TestUser]) {
        return None;
    }
    lookup().ok()
}

/// The test user's name and password inside a re-run as that user (`None` elsewhere): what
/// the re-run test body reads instead of asking [`test_user`].
pub fn as_test_user() -> Option<TestUser> {
    let user = lookup().ok()?;
    (rustix::process::geteuid().as_raw() == user.uid).then_some(user)
}

/// Runs this test binary again as `user` (its uid, gid and supplementary groups, `HOME` its
/// home) with `args` and `env`, asserts it passed, and returns its output. The test user's
/// variables and `AGENT_EXEC_REQUIRE` are passed on.
pub fn run_as_test_user(user: &TestUser, args: &[&str], env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let exe = dir.path().join("test-binary");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let run = || {
        std::process::Command::new("/usr/bin/setpriv")
            .arg(format!("--reuid={}", user.uid))
            .arg(format!("--regid={}", user.gid))
            .arg("--init-groups")
            .arg("--")
            .arg(&exe)
            .args(args)
            .env_clear()
            .env("HOME", &user.home)
            .env("USER", &user.name)
            .env("LOGNAME", &user.name)
            .env("TMPDIR", &tmp)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env(TEST_USER_VAR, &user.name)
            .env(TEST_PASSWORD_VAR, &user.password)
            .env(REQUIRE_VAR, std::env::var(REQUIRE_VAR).unwrap_or_default())
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    // ETXTBSY: as in run_as_nobody.
    let mut out = run();
    for attempt in 1..=20 {
        let busy = String::from_utf8_lossy(&out.stderr).contains("Text file busy");
        if out.status.success() || !busy {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20 * attempt));
        out = run();
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("re-ran as {} ({args:?}):\n{text}", user.name);
    assert!(out.status.success(), "failed as {}:\n{text}", user.name);
    text
}

/// For a test that must run as the test user: when this process is root and the user exists,
/// runs `test` again as that user, asserts it passed and returns `true` (the caller returns);
/// when the user is absent, skips loudly and returns `true` too. Returns `false` inside the
/// re-run, where the caller runs its body (reading [`as_test_user`]).
pub fn rerun_as_test_user(test: &str) -> bool {
    if as_test_user().is_some() {
        return false;
    }
    let Some(user) = test_user() else {
        return true;
    };
    let text = run_as_test_user(
        &user,
        &["--exact", test, "--nocapture", "--test-threads=1"],
        &[],
    );
    assert!(
        text.contains("1 passed"),
        "{test} did not run as {}:\n{text}",
        user.name
    );
    true
}
