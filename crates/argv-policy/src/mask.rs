//! Masking secrets in text, and spotting mask tokens in a new argv (RC-14, issue 9 rule 7).

/// Replaces every occurrence of each known secret with a stable token `[secret:N]`, where `N`
/// is the secret's 1-based position in `secrets`. Longer secrets are replaced first, so a
/// secret that contains another is masked whole. Empty secrets are ignored.
///
/// ```
/// let secrets = vec!["hunter2".to_string()];
/// assert_eq!(argv_policy::mask("pw=hunter2", &secrets), "pw=[secret:1]");
/// ```
pub fn mask(text: &str, secrets: &[String]) -> String {
    let mut order: Vec<(usize, &String)> = secrets
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.is_empty())
        .collect();
    order.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
    // Replace in one left-to-right pass so a token just written is never matched again.
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'outer: while !rest.is_empty() {
        for (i, s) in &order {
            if rest.starts_with(s.as_str()) {
                out.push_str(&format!("[secret:{}]", i + 1));
                rest = &rest[s.len()..];
                continue 'outer;
            }
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            out.push(c);
        }
        rest = chars.as_str();
    }
    out
}

/// The first mask token (`[secret:` digits `]`) in `text`, if any.
pub fn find_token(text: &str) -> Option<&str> {
    let mut from = 0;
    while let Some(pos) = text[from..].find("[secret:") {
        let start = from + pos;
        let after = &text[start + "[secret:".len()..];
        let digits = after.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && after[digits..].starts_with(']') {
            return Some(&text[start..start + "[secret:".len() + digits + 1]);
        }
        from = start + 1;
    }
    None
}
