//! Checking a password with the system: PAM (service `agent-exec`) and `sudo -S -v`.
//!
//! **Owns:** the [`Verifier`] seam (tests script it) and the two system checks. The password
//! is handed over and dropped (zeroized) at the end of the check; it is never stored, logged or
//! put in a message. **Refuses to know:** prompts and attempts (module `gate`).
//!
//! **PAM.** `libpam.so.0` (macOS: `libpam.2.dylib`) is opened at run time with `libloading`, so
//! building needs no `libpam0g-dev` and a machine without PAM answers "cannot verify the
//! password on this machine" (nothing runs). The service is `agent-exec`: a host may install
//! `/etc/pam.d/agent-exec`; without it PAM uses its `other` service (on Debian and Ubuntu the
//! common-auth/common-account stack, i.e. the login password). `pam_authenticate` then
//! `pam_acct_mgmt` for the user this process runs as; the conversation answers
//! `PAM_PROMPT_ECHO_OFF` (and `ECHO_ON`) with the password and nothing else. An unprivileged
//! process checks only its own password (pam_unix's `unix_chkpwd`), which is what we want.
//!
//! **sudo.** `sudo -k` (no cached timestamp is left from before), then `sudo -S -p '' -v` with
//! the password on its standard input: the password is checked every call (RC-11), and the
//! fresh timestamp lets the `sudo -n` that follows run; `sudo -k` again after it. `-k`, not
//! `-K`: it resets only this process's record (sudo keys it by terminal, or by parent process
//! without one), so another program's sudo of the same user is left alone; within this process
//! one sudo call runs at a time (module `run`), so no call resets another's record. Where sudo would not ask
//! (the caller is root, or the sudoers entry says NOPASSWD: `sudo -n -v` succeeds), the login
//! password is checked through PAM instead, so no password gate is ever a formality. (A root
//! caller whose account has no password, as in most containers, cannot pass it: root needs no
//! sudo.)

use std::ffi::{CString, c_char, c_int, c_void};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::ask::Password;

/// What the system said about one password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Check {
    /// The password is the user's.
    Right,
    /// It is not.
    Wrong,
    /// The machine cannot check passwords (no PAM library, no sudo): nothing runs.
    CannotVerify(String),
}

/// Checks one password; consumes it so it is zeroized when the check ends.
pub(crate) trait Verifier: Send + Sync {
    fn check<'a>(&'a self, password: Password) -> Pin<Box<dyn Future<Output = Check> + Send + 'a>>;
}

/// The PAM service name (module docs).
pub(crate) const PAM_SERVICE: &str = "agent-exec";

/// The login password of the user running this process, through PAM.
#[derive(Debug, Default)]
pub(crate) struct Pam;

impl Verifier for Pam {
    fn check<'a>(&'a self, password: Password) -> Pin<Box<dyn Future<Output = Check> + Send + 'a>> {
        Box::pin(async move {
            // PAM blocks (and delays after a failure): off the async threads.
            tokio::task::spawn_blocking(move || pam_check(&password))
                .await
                .unwrap_or_else(|e| Check::CannotVerify(format!("the PAM check failed: {e}")))
        })
    }
}

/// The password `sudo` asks for, checked by `sudo` itself (root: by PAM).
#[derive(Debug, Default)]
pub(crate) struct Sudo;

impl Verifier for Sudo {
    fn check<'a>(&'a self, password: Password) -> Pin<Box<dyn Future<Output = Check> + Send + 'a>> {
        Box::pin(async move {
            if rustix::process::geteuid().is_root() {
                return Pam.check(password).await;
            }
            sudo_check(password).await
        })
    }
}

/// How long `sudo -v` may take (it sleeps after a wrong password).
const SUDO_CHECK_TIMEOUT: Duration = Duration::from_secs(60);

async fn sudo_check(password: Password) -> Check {
    use tokio::io::AsyncWriteExt;
    let Some(sudo) = crate::outside::sudo_binary() else {
        return Check::CannotVerify("sudo is not installed".into());
    };
    crate::outside::forget_sudo().await;
    // Where sudo would not ask at all (NOPASSWD), `-v` would pass any answer: the login
    // password is checked through PAM instead, so the gate is never a formality.
    if sudo_asks_nothing(&sudo).await {
        return Pam.check(password).await;
    }
    let mut cmd = tokio::process::Command::new(sudo);
    cmd.args(["-S", "-p", "", "-v"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin:/usr/sbin:/sbin")
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Check::CannotVerify(format!("cannot start sudo: {e}")),
    };
    if let Some(mut stdin) = child.stdin.take() {
        // One line, then end of input: sudo's retries read nothing more and fail.
        let mut line = zeroize::Zeroizing::new(Vec::with_capacity(password.expose().len() + 1));
        line.extend_from_slice(password.expose().as_bytes());
        line.push(b'\n');
        let _ = stdin.write_all(&line).await;
        drop(stdin);
    }
    drop(password);
    match tokio::time::timeout(SUDO_CHECK_TIMEOUT, child.wait()).await {
        Ok(Ok(status)) if status.success() => Check::Right,
        Ok(Ok(_)) => Check::Wrong,
        Ok(Err(e)) => Check::CannotVerify(format!("sudo did not finish: {e}")),
        Err(_) => {
            let _ = child.kill().await;
            Check::CannotVerify("sudo -v did not answer within a minute".into())
        }
    }
}

/// `sudo -n -v` succeeds with no cached credential: the policy asks no password.
async fn sudo_asks_nothing(sudo: &std::path::Path) -> bool {
    let status = tokio::process::Command::new(sudo)
        .args(["-n", "-v"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin:/usr/sbin:/sbin")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    matches!(
        tokio::time::timeout(SUDO_CHECK_TIMEOUT, status).await,
        Ok(Ok(s)) if s.success()
    )
}

// ---- PAM, opened at run time ---------------------------------------------------------------

// The constants of Linux-PAM's and OpenPAM's `pam_constants.h` (they differ); the prompt
// styles are the same in both.
const PAM_SUCCESS: c_int = 0;
const PAM_BUF_ERR: c_int = 5;
const PAM_PROMPT_ECHO_OFF: c_int = 1;
const PAM_PROMPT_ECHO_ON: c_int = 2;
const PAM_DISALLOW_NULL_AUTHTOK: c_int = 0x0001;
#[cfg(not(target_os = "macos"))]
mod codes {
    use std::ffi::c_int;
    pub(super) const PAM_CONV_ERR: c_int = 19;
    pub(super) const PAM_SILENT: c_int = 0x8000;
    /// "Not this password": permission denied, auth error, credentials insufficient, unknown
    /// user, maximum tries.
    pub(super) const PAM_WRONG: &[c_int] = &[6, 7, 8, 10, 11];
}
#[cfg(target_os = "macos")]
mod codes {
    use std::ffi::c_int;
    pub(super) const PAM_CONV_ERR: c_int = 6;
    pub(super) const PAM_SILENT: c_int = i32::MIN; // 0x80000000
    /// Permission denied, maximum tries, auth error, credentials insufficient, unknown user.
    pub(super) const PAM_WRONG: &[c_int] = &[7, 8, 9, 11, 13];
}
use codes::{PAM_CONV_ERR, PAM_SILENT, PAM_WRONG};

#[repr(C)]
struct PamMessage {
    msg_style: c_int,
    msg: *const c_char,
}

#[repr(C)]
struct PamResponse {
    resp: *mut c_char,
    resp_retcode: c_int,
}

type ConvFn = unsafe extern "C" fn(
    num_msg: c_int,
    msg: *mut *const PamMessage,
    resp: *mut *mut PamResponse,
    appdata: *mut c_void,
) -> c_int;

#[repr(C)]
struct PamConv {
    conv: ConvFn,
    appdata_ptr: *mut c_void,
}

type PamStart = unsafe extern "C" fn(
    service: *const c_char,
    user: *const c_char,
    conv: *const PamConv,
    pamh: *mut *mut c_void,
) -> c_int;
type PamFlagsFn = unsafe extern "C" fn(pamh: *mut c_void, flags: c_int) -> c_int;
type PamEnd = unsafe extern "C" fn(pamh: *mut c_void, status: c_int) -> c_int;

/// The bytes the conversation answers with.
struct Secret<'a>(&'a [u8]);

/// The conversation: every password prompt gets the password, in a buffer PAM frees (Linux-PAM
/// and OpenPAM overwrite it first); informational messages get an empty answer.
unsafe extern "C" fn conversation(
    num_msg: c_int,
    msg: *mut *const PamMessage,
    resp: *mut *mut PamResponse,
    appdata: *mut c_void,
) -> c_int {
    if num_msg <= 0 || msg.is_null() || resp.is_null() || appdata.is_null() {
        return PAM_CONV_ERR;
    }
    let n = num_msg as usize;
    // SAFETY: calloc'd array of `n` responses, owned by PAM once returned.
    let replies =
        unsafe { libc::calloc(n, std::mem::size_of::<PamResponse>()) } as *mut PamResponse;
    if replies.is_null() {
        return PAM_BUF_ERR;
    }
    // SAFETY: appdata is the `Secret` pam_check passed, alive for the whole pam_* call.
    let secret = unsafe { &*(appdata as *const Secret<'_>) };
    for i in 0..n {
        // SAFETY: Linux-PAM and OpenPAM pass an array of `n` message pointers.
        let m = unsafe { *msg.add(i) };
        if m.is_null() {
            continue;
        }
        // SAFETY: a valid message from PAM.
        let style = unsafe { (*m).msg_style };
        if style == PAM_PROMPT_ECHO_OFF || style == PAM_PROMPT_ECHO_ON {
            let len = secret.0.len();
            // SAFETY: a fresh buffer of len + 1 bytes, filled and NUL-terminated.
            let buf = unsafe { libc::malloc(len + 1) } as *mut u8;
            if buf.is_null() {
                free_replies(replies, n);
                return PAM_BUF_ERR;
            }
            // SAFETY: buf has len + 1 bytes; secret has len bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(secret.0.as_ptr(), buf, len);
                *buf.add(len) = 0;
                (*replies.add(i)).resp = buf as *mut c_char;
            }
        }
    }
    // SAFETY: resp is PAM's out pointer.
    unsafe { *resp = replies };
    PAM_SUCCESS
}

fn free_replies(replies: *mut PamResponse, n: usize) {
    for i in 0..n {
        // SAFETY: entries are null or our malloc'd, NUL-terminated buffers.
        unsafe {
            let r = (*replies.add(i)).resp;
            if !r.is_null() {
                let len = libc::strlen(r);
                std::ptr::write_bytes(r, 0, len);
                libc::free(r as *mut c_void);
            }
        }
    }
    // SAFETY: calloc'd above.
    unsafe { libc::free(replies as *mut c_void) };
}

#[cfg(target_os = "macos")]
const PAM_LIBRARIES: &[&str] = &["/usr/lib/libpam.2.dylib", "libpam.dylib"];
#[cfg(not(target_os = "macos"))]
const PAM_LIBRARIES: &[&str] = &["libpam.so.0", "libpam.so"];

/// The name of the user this process runs as.
fn user_name() -> Option<CString> {
    let uid = rustix::process::geteuid().as_raw();
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: `passwd` is a C struct of integers and pointers, for which all zeros (null
    // pointers) is a valid value; getpwuid_r overwrites it.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: buffers sized as passed; getpwuid_r is thread-safe.
    let rc = unsafe {
        libc::getpwuid_r(
            uid,
            &mut pwd,
            buf.as_mut_ptr() as *mut c_char,
            buf.len(),
            &mut out,
        )
    };
    if rc != 0 || out.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name points into buf, NUL-terminated.
    Some(unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) }.to_owned())
}

/// One PAM transaction: authenticate, then account management.
fn pam_check(password: &Password) -> Check {
    let bytes = password.expose().as_bytes();
    if bytes.contains(&0) {
        return Check::Wrong;
    }
    // SAFETY: loading the system's PAM library runs its initialisers, which is what any
    // PAM-using program does.
    let lib = PAM_LIBRARIES
        .iter()
        .find_map(|name| unsafe { libloading::Library::new(name) }.ok());
    let Some(lib) = lib else {
        return Check::CannotVerify(format!(
            "the PAM library ({}) is not installed",
            PAM_LIBRARIES[0]
        ));
    };
    // SAFETY: the symbols have the C signatures declared above (pam_appl.h).
    let syms = unsafe {
        (
            lib.get::<PamStart>(b"pam_start\0"),
            lib.get::<PamFlagsFn>(b"pam_authenticate\0"),
            lib.get::<PamFlagsFn>(b"pam_acct_mgmt\0"),
            lib.get::<PamEnd>(b"pam_end\0"),
        )
    };
    let (Ok(start), Ok(auth), Ok(acct), Ok(end)) = syms else {
        return Check::CannotVerify("the PAM library lacks pam_start/pam_authenticate".into());
    };
    let Some(user) = user_name() else {
        return Check::CannotVerify("this process's user has no name in the user database".into());
    };
    let Ok(service) = CString::new(PAM_SERVICE) else {
        return Check::CannotVerify("bad PAM service name".into());
    };
    let secret = Secret(bytes);
    let conv = PamConv {
        conv: conversation,
        appdata_ptr: &secret as *const Secret<'_> as *mut c_void,
    };
    let mut handle: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid C strings and conv for the whole transaction; handle is PAM's out pointer.
    let rc = unsafe { start(service.as_ptr(), user.as_ptr(), &conv, &mut handle) };
    if rc != PAM_SUCCESS || handle.is_null() {
        return Check::CannotVerify(format!("pam_start failed ({rc})"));
    }
    // SAFETY: handle came from pam_start and is ended exactly once below.
    let mut rc = unsafe { auth(handle, PAM_SILENT | PAM_DISALLOW_NULL_AUTHTOK) };
    if rc == PAM_SUCCESS {
        // SAFETY: as above.
        rc = unsafe { acct(handle, PAM_SILENT) };
    }
    // SAFETY: as above.
    unsafe { end(handle, rc) };
    match rc {
        PAM_SUCCESS => Check::Right,
        c if PAM_WRONG.contains(&c) => Check::Wrong,
        c => Check::CannotVerify(format!("PAM answered {c}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wrong_password_is_wrong_or_unverifiable_never_right() {
        let c = Pam
            .check(Password::new("certainly-not-the-password-x9".into()))
            .await;
        assert_ne!(c, Check::Right);
    }

    #[tokio::test]
    async fn a_password_with_nul_is_wrong() {
        assert_eq!(Pam.check(Password::new("a\0b".into())).await, Check::Wrong);
    }
}
