//! Per-session state of `run_command`: the RC-9 lock, the secrets seen so far (RC-14) and the
//! caches' kept views (TRUST-3).
//!
//! **Owns:** which calls may overlap (allowlist hits share the lock, every other call takes it
//! alone, after its gates so a prompt never blocks a read-only call) and the growing list of
//! secrets that results are masked with and that the next decision refuses as mask tokens.
//! **Refuses to know:** sessions themselves (the host keeps one state per session, in an `Arc`).

use std::fmt;
use std::sync::{Arc, Mutex};

use tokio::sync::RwLock;

/// Per-session state: the RC-9 lock (allowlist hits share it, others take it alone) and the
/// secrets seen so far (RC-14). `Default + Send + Sync`; a host keeps one per session (`Arc`).
#[derive(Default)]
pub struct RunCommandState {
    pub(crate) lock: RwLock<()>,
    secrets: Mutex<Secrets>,
    /// The toolchains' caches as this session's commands changed them (TRUST-3): kept from one
    /// call to the next, removed with the state.
    pub(crate) views: Arc<exec::SessionViews>,
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
        self.list().list.clone()
    }

    /// Adds the new ones (order kept, duplicates and empty strings skipped, at most
    /// [`MAX_SECRETS`] in all). The list itself is [`RunCommandState::secrets`].
    pub(crate) fn learn(&self, found: impl IntoIterator<Item = String>) {
        self.list().add(found);
    }

    /// `text` masked (RC-14) with the session's secrets and those it holds by form, which are
    /// learned — without copying the session's list (a command that prints thousands of
    /// distinct keys must not make every later line cost thousands of copies).
    pub(crate) fn mask(&self, text: &str) -> String {
        let found = argv_policy::secrets_in(text);
        let mut s = self.list();
        s.add(found.iter().cloned());
        // Past the bound: what this text holds by form is still masked, by a later number.
        let extra: Vec<String> = found.into_iter().filter(|f| !s.known.contains(f)).collect();
        let base = s.list.len();
        s.refresh_index();
        let mut present = s.present(text);
        present.extend(
            extra
                .iter()
                .enumerate()
                .map(|(i, f)| (base + i, f.as_str())),
        );
        argv_policy::mask_indexed(text, &present)
    }

    fn list(&self) -> std::sync::MutexGuard<'_, Secrets> {
        match self.secrets.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// The most secrets a session learns: beyond it, secrets by form are masked where they are
/// found but not remembered (the list is kept small enough to search at every line).
pub(crate) const MAX_SECRETS: usize = 10_000;

/// The secrets in the order first seen, a set of them for the duplicate check, and an index
/// of the first `indexed` of them for finding which a text holds.
#[derive(Default)]
struct Secrets {
    list: Vec<String>,
    known: std::collections::HashSet<String>,
    index: Option<aho_corasick::AhoCorasick>,
    indexed: usize,
}

/// Secrets learned since the index was built that are searched one by one; past this many
/// the index is built again (so building costs O(n²/64) over a session, a line O(its length)).
const UNINDEXED: usize = 64;

impl Secrets {
    /// Builds the index again once too many secrets are outside it.
    fn refresh_index(&mut self) {
        if self.list.len() - self.indexed > UNINDEXED {
            self.index = aho_corasick::AhoCorasick::new(&self.list).ok();
            self.indexed = if self.index.is_some() {
                self.list.len()
            } else {
                0
            };
        }
    }

    /// Which secrets `text` holds, as `(number - 1, secret)`.
    fn present(&self, text: &str) -> Vec<(usize, &str)> {
        let mut ids: Vec<usize> = match &self.index {
            Some(ac) => {
                let mut seen: Vec<usize> = ac
                    .find_overlapping_iter(text)
                    .map(|m| m.pattern().as_usize())
                    .collect();
                seen.sort_unstable();
                seen.dedup();
                seen
            }
            None => Vec::new(),
        };
        ids.extend(
            (self.indexed..self.list.len()).filter(|&i| text.contains(self.list[i].as_str())),
        );
        ids.into_iter()
            .map(|i| (i, self.list[i].as_str()))
            .collect()
    }

    fn add(&mut self, found: impl IntoIterator<Item = String>) {
        for secret in found {
            if self.list.len() >= MAX_SECRETS {
                return;
            }
            if !secret.is_empty() && self.known.insert(secret.clone()) {
                self.list.push(secret);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_of_learned_secrets_stay_masked_and_the_bound_still_masks_by_form() {
        let st = RunCommandState::default();
        st.learn((0..MAX_SECRETS + 5).map(|n| format!("AKIA{n:016}")));
        assert_eq!(st.secrets().len(), MAX_SECRETS);
        let early = format!("key AKIA{:016} end", 3);
        assert_eq!(st.mask(&early), "key [secret:4] end");
        // Past the bound: masked by form all the same, not learned.
        let late = "new ghp_0123456789abcdefghijABCDEFGHIJ012345 key";
        assert_eq!(
            st.mask(late),
            format!("new [secret:{}] key", MAX_SECRETS + 1)
        );
        assert_eq!(st.secrets().len(), MAX_SECRETS);
        // Lines without a secret cost one search per secret, not one per position.
        let plain = "x".repeat(100);
        for _ in 0..200 {
            assert_eq!(st.mask(&plain), plain);
        }
    }

    proptest::proptest! {
        /// The index finds exactly what the plain rule masks: same numbers, same text, for
        /// overlapping and nested secrets, indexed or not yet.
        #[test]
        fn the_index_masks_as_the_plain_rule_does(
            secrets in proptest::collection::vec("[ab]{2,6}", 0..150),
            text in "[ab ]{0,80}",
        ) {
            let st = RunCommandState::default();
            st.learn(secrets.iter().cloned());
            let list = st.secrets();
            proptest::prop_assert_eq!(st.mask(&text), argv_policy::mask(&text, &list));
        }
    }

    #[test]
    fn learning_keeps_order_and_skips_duplicates() {
        let st = RunCommandState::default();
        st.learn(["a1234567".to_string(), "b1234567".to_string()]);
        st.learn([
            "b1234567".to_string(),
            String::new(),
            "c1234567".to_string(),
        ]);
        assert_eq!(st.secrets(), ["a1234567", "b1234567", "c1234567"]);
        assert!(!format!("{st:?}").contains("a1234567"));
    }
}
