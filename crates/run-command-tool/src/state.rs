//! Per-session state of `run_command`: the RC-9 lock and the secrets seen so far (RC-14).
//!
//! **Owns:** which calls may overlap (allowlist hits share the lock, every other call takes it
//! alone, after its gates so a prompt never blocks a read-only call) and the growing list of
//! secrets that results are masked with and that the next decision refuses as mask tokens.
//! **Refuses to know:** sessions themselves (the host keeps one state per session, in an `Arc`).

use std::fmt;
use std::sync::Mutex;

use tokio::sync::RwLock;

/// Per-session state: the RC-9 lock (allowlist hits share it, others take it alone) and the
/// secrets seen so far (RC-14). `Default + Send + Sync`; a host keeps one per session (`Arc`).
#[derive(Default)]
pub struct RunCommandState {
    pub(crate) lock: RwLock<()>,
    secrets: Mutex<Vec<String>>,
}

impl fmt::Debug for RunCommandState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The secrets themselves never reach a log.
        f.debug_struct("RunCommandState")
            .field("secrets", &self.secrets().len())
            .finish_non_exhaustive()
    }
}

impl RunCommandState {
    /// The secrets known so far, in the order they were first seen (`[secret:N]` is index N-1).
    pub(crate) fn secrets(&self) -> Vec<String> {
        match self.secrets.lock() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Adds the new ones (order kept, duplicates and empty strings skipped); returns the whole
    /// list.
    pub(crate) fn learn(&self, found: impl IntoIterator<Item = String>) -> Vec<String> {
        let mut s = match self.secrets.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        for secret in found {
            if !secret.is_empty() && !s.contains(&secret) {
                s.push(secret);
            }
        }
        s.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learning_keeps_order_and_skips_duplicates() {
        let st = RunCommandState::default();
        st.learn(["a1234567".to_string(), "b1234567".to_string()]);
        let all = st.learn([
            "b1234567".to_string(),
            String::new(),
            "c1234567".to_string(),
        ]);
        assert_eq!(all, ["a1234567", "b1234567", "c1234567"]);
        assert!(!format!("{st:?}").contains("a1234567"));
    }
}
