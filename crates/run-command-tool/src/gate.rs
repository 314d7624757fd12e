//! The gate before a command: a confirmation, or the system password (up to three prompts).
//!
//! **Owns:** how many times to ask (a password three times at most; a wrong third answer ends
//! the call), what each non-yes answer means (not executed, with a message saying how to run
//! the command instead), and that cancelling the call stops the asking. **Refuses to know:**
//! how a password is checked (module `verify`) and how the question reaches the user (the
//! host's [`Asker`]).

use toolscope::{CallContext, ToolError};

use crate::ask::{Asker, Confirmation, PasswordReply, Question};
use crate::verify::{Check, Verifier};

/// Password prompts per call (RC-10, RC-11, RC-12).
pub(crate) const PASSWORD_ATTEMPTS: u8 = 3;

/// How to run a call the host could not ask about.
pub(crate) const HOW_TO_ASK: &str = "run it with `agent-exec call run_command` from a terminal (it asks on the terminal), or \
     pass --yes for confirmations / --password-fd N for the password";

/// What the gate decided.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Passed {
    /// Go on.
    Yes,
    /// Do not run; the message says why and how to run it instead.
    No(String),
}

/// Asks `asker` to confirm `q`.
pub(crate) async fn confirm(
    asker: &dyn Asker,
    q: &Question,
    ctx: &CallContext,
) -> Result<Passed, ToolError> {
    let label = &q.label;
    let answer = tokio::select! {
        a = asker.confirm(q) => a,
        reason = ctx.cancelled() => return Err(reason.to_error()),
    };
    Ok(match answer {
        Confirmation::Yes => Passed::Yes,
        Confirmation::No => Passed::No(format!(
            "the user declined `{label}`, so nothing ran; do something else or ask the user \
             what they want"
        )),
        Confirmation::CannotAsk => Passed::No(format!(
            "`{label}` needs the user's confirmation and this host cannot ask, so nothing ran; \
             {}",
            asker.cannot_ask_advice()
        )),
    })
}

/// Asks for the system password for `question` up to three times, each answer checked by
/// `verifier`.
pub(crate) async fn password(
    asker: &dyn Asker,
    verifier: &dyn Verifier,
    question: &Question,
    ctx: &CallContext,
) -> Result<Passed, ToolError> {
    let (label, reason) = (&question.label, &question.reason);
    for attempt in 1..=PASSWORD_ATTEMPTS {
        let q = question.attempt(attempt);
        let reply = tokio::select! {
            r = asker.password(&q) => r,
            reason = ctx.cancelled() => return Err(reason.to_error()),
        };
        let given = match reply {
            PasswordReply::Given(p) => p,
            PasswordReply::Cancelled => {
                return Ok(Passed::No(format!(
                    "the password prompt for `{label}` was cancelled, so nothing ran"
                )));
            }
            PasswordReply::CannotAsk => {
                return Ok(Passed::No(format!(
                    "`{label}` needs the system password ({reason}) and this host cannot ask \
                     for it, so nothing ran; {}",
                    asker.cannot_ask_advice()
                )));
            }
        };
        let check = tokio::select! {
            c = verifier.check(given) => c,
            reason = ctx.cancelled() => return Err(reason.to_error()),
        };
        match check {
            Check::Right => return Ok(Passed::Yes),
            Check::Wrong => continue,
            Check::CannotVerify(why) => {
                return Ok(Passed::No(format!(
                    "cannot verify the password on this machine ({why}), so `{label}` did not \
                     run"
                )));
            }
        }
    }
    Ok(Passed::No(format!(
        "the password was wrong {PASSWORD_ATTEMPTS} times, so `{label}` did not run"
    )))
}
