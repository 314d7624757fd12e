//! How a question reaches the user: the [`Asker`] a host implements, the [`Question`] it is
//! shown, its answers, and the [`Password`] that carries a typed password to the system check.
//!
//! **Owns:** the answer types, which make "no answer" explicit ([`Confirmation::CannotAsk`],
//! [`PasswordReply::CannotAsk`]): a host that cannot ask says so and the call is not executed,
//! never an assumed yes. **Refuses to know:** terminals, MCP elicitation, file descriptors (the
//! host's), and whether a password is right (the system's, module `verify`).

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use zeroize::Zeroizing;

use crate::render::{Granted, TooLong};

/// What the user is asked: the label of the gate (the command, e.g. `sudo: apt install jq`),
/// why it is asked, the attempt number of a password prompt (1..=3), and the text of what a
/// yes grants (TRUST-4).
///
/// A `Question` is made only by [`Question::new`], which renders the text from the call's
/// [`Granted`]: every channel shows [`Question::text`] as it is, and none renders the agent's
/// text itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The gate's label on one line, escaped: what will run if the answer is yes.
    pub label: String,
    /// Why this gate applies (e.g. "writes outside your home directory need your password").
    pub reason: String,
    /// 1 for the first prompt; a password prompt is repeated up to 3 times after a wrong answer.
    pub attempt: u8,
    /// The confirmation's text (module `render`): the reason and what a yes grants.
    text: String,
}

impl Question {
    /// The question for a gate labelled `label`, asked for `reason`, that grants `grants`.
    ///
    /// # Errors
    /// [`TooLong`] when the call is too long to show: it must not be asked.
    pub fn new(label: &str, reason: &str, grants: &Granted) -> Result<Question, TooLong> {
        Ok(Question {
            label: crate::render::one_line(label),
            reason: crate::render::one_line(reason),
            attempt: 1,
            text: grants.text(reason)?,
        })
    }

    /// The same question, for password prompt number `attempt`.
    #[must_use]
    pub fn attempt(&self, attempt: u8) -> Question {
        Question {
            attempt,
            ..self.clone()
        }
    }

    /// What the user is shown, on every channel: the reason, then one line per thing a yes
    /// grants, the agent's text escaped (TRUST-4). It holds no control, format or separator
    /// character but its own line breaks.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// The answer to a confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation {
    /// Run it.
    Yes,
    /// Do not run it.
    No,
    /// The host has no way to ask (no terminal, an MCP client without elicitation): not run.
    CannotAsk,
}

/// The answer to a password prompt.
#[derive(Debug)]
pub enum PasswordReply {
    /// A password to check with the system.
    Given(Password),
    /// The user cancelled the prompt: not run.
    Cancelled,
    /// The host has no way to ask for a password (the MCP server never does): not run.
    CannotAsk,
}

/// A typed password. Its memory is overwritten when it is dropped; it has no `Display`, its
/// `Debug` prints no content, and it is never stored, logged or put in an error.
pub struct Password(Zeroizing<String>);

impl Password {
    /// Takes ownership of the typed text (a trailing newline is the caller's to strip).
    pub fn new(text: String) -> Self {
        Password(Zeroizing::new(text))
    }

    /// The text, for the system check only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<hidden>)")
    }
}

/// How a question reaches the user. A host that cannot ask answers `CannotAsk` (never an
/// assumed yes).
pub trait Asker: Send + Sync {
    /// Asks for a yes/no confirmation of what `q.text()` shows.
    fn confirm<'a>(
        &'a self,
        q: &'a Question,
    ) -> Pin<Box<dyn Future<Output = Confirmation> + Send + 'a>>;

    /// Asks for the system password. Never called over a channel that must not collect
    /// secrets (the MCP server answers `CannotAsk`).
    fn password<'a>(
        &'a self,
        q: &'a Question,
    ) -> Pin<Box<dyn Future<Output = PasswordReply> + Send + 'a>>;

    /// After a `CannotAsk`: why this host cannot ask and how the user can run the call
    /// instead, in the host's own terms, for the not-executed message (an MCP server: "a
    /// password is never collected over MCP; run it with `agent-exec call run_command` from a
    /// terminal"). The default names the command line's ways.
    fn cannot_ask_advice(&self) -> String {
        crate::gate::HOW_TO_ASK.to_owned()
    }
}

/// An [`Asker`] that answers `CannotAsk` to both: every gated call is not executed.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyAllAsker;

impl Asker for DenyAllAsker {
    fn confirm<'a>(
        &'a self,
        _q: &'a Question,
    ) -> Pin<Box<dyn Future<Output = Confirmation> + Send + 'a>> {
        Box::pin(async { Confirmation::CannotAsk })
    }

    fn password<'a>(
        &'a self,
        _q: &'a Question,
    ) -> Pin<Box<dyn Future<Output = PasswordReply> + Send + 'a>> {
        Box::pin(async { PasswordReply::CannotAsk })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_debug_shows_no_content() {
        let p = Password::new("hunter2-secret".into());
        assert_eq!(format!("{p:?}"), "Password(<hidden>)");
        let r = PasswordReply::Given(p);
        assert!(!format!("{r:?}").contains("hunter2"));
    }

    #[tokio::test]
    async fn deny_all_cannot_ask() {
        let q = Question::new("x", "y", &Granted::new()).unwrap();
        assert_eq!(DenyAllAsker.confirm(&q).await, Confirmation::CannotAsk);
        assert!(matches!(
            DenyAllAsker.password(&q).await,
            PasswordReply::CannotAsk
        ));
    }
}
