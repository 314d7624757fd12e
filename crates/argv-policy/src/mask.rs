//! Masking secrets in text, and spotting mask tokens in a new argv (RC-14).
//!
//! **Owns**: which environment variables hold secrets ([`secret_env_values`]), which substrings
//! of an output are secrets by their form ([`secrets_in`]), the replacement ([`mask`]) and the
//! token a later argv must not carry ([`find_token`]).
//!
//! **Refuses to know**: where output comes from and when it is flushed; the executor collects
//! the secrets (environment first, then whatever `secrets_in` finds in each chunk) and masks.
//!
//! `secrets_in` is a hand-written scanner, not a regex: every format starts with a fixed prefix
//! found with `str::match_indices`, and a candidate's body is consumed at most once (a match
//! resumes the search after its end; a miss stops at the first character outside the body's
//! alphabet), so the time is linear in the text. A candidate must start at a word boundary
//! (not after a letter, digit, `_` or `-`) so `task-list` or a hash does not hold an `sk-` key,
//! and most formats need a minimum length and a digit, so prose and identifiers do not match.

/// Replaces every occurrence of each known secret with a stable token `[secret:N]`, where `N`
/// is the secret's 1-based position in `secrets`. Longer secrets are replaced first, so a
/// secret that contains another is masked whole. Empty secrets are ignored.
///
/// ```
/// let secrets = vec!["hunter2".to_string()];
/// assert_eq!(argv_policy::mask("pw=hunter2", &secrets), "pw=[secret:1]");
/// ```
pub fn mask(text: &str, secrets: &[String]) -> String {
    // Only the secrets the text holds take part: a session that learned thousands costs one
    // substring search each here, not one comparison each at every position.
    let present: Vec<(usize, &str)> = secrets
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.is_empty() && text.contains(s.as_str()))
        .map(|(i, s)| (i, s.as_str()))
        .collect();
    mask_indexed(text, &present)
}

/// [`mask`] with the candidates given by their 1-based-minus-one number: `(i, s)` is replaced
/// by `[secret:i+1]`. For a caller that already knows which secrets a text holds (an index
/// over thousands of them); the rules are [`mask`]'s.
pub fn mask_indexed(text: &str, secrets: &[(usize, &str)]) -> String {
    let mut order: Vec<(usize, &str)> = secrets
        .iter()
        .copied()
        .filter(|(_, s)| !s.is_empty())
        .collect();
    if order.is_empty() {
        return text.to_owned();
    }
    order.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
    // Replace in one left-to-right pass so a token just written is never matched again.
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'outer: while !rest.is_empty() {
        for (i, s) in &order {
            if rest.starts_with(s) {
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

/// Values (at least 8 characters) of the variables whose names look secret: `*TOKEN*`,
/// `*SECRET*`, `*PASSWORD*`, `*PASSWD*`, `*PASSPHRASE*`, `*CREDENTIAL*`, `*API_KEY*`,
/// `*APIKEY*`, `*PRIVATE_KEY*`, `*ACCESS_KEY*`, `*_KEY`, `*_AUTH`, `*_PAT` (ASCII case
/// ignored), e.g. `AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN`, `NPM_CONFIG__AUTH`. Names that
/// hold a location rather than a secret (`*_DIR`, `*_PATH`, `*_FILE`, `*_HOME`, `*_SOCK`,
/// `*_URL_FILE`…) and look-alikes such as `*_KEYMAP` are not secret. In first-seen order,
/// without duplicates; shorter values are skipped (masking `true` or `1` everywhere would
/// destroy the output and protect nothing).
///
/// ```
/// let env = [("GITHUB_TOKEN", "ghp_abcdefgh12345678"), ("PATH", "/usr/bin:/bin"), ("API_KEY", "short")];
/// assert_eq!(argv_policy::secret_env_values(env), vec!["ghp_abcdefgh12345678".to_string()]);
/// ```
pub fn secret_env_values<'a>(env: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (name, value) in env {
        if value.chars().count() >= 8 && is_secret_name(name) && !out.iter().any(|v| v == value) {
            out.push(value.to_owned());
        }
    }
    out
}

/// `true` when an environment variable's name says it holds a secret.
fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    const LOCATION: &[&str] = &["_DIR", "_PATH", "_FILE", "_HOME", "_SOCK", "_SOCKET", "_FD"];
    if LOCATION.iter().any(|s| n.ends_with(s)) {
        return false;
    }
    const INSIDE: &[&str] = &[
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "CREDENTIAL",
        "API_KEY",
        "APIKEY",
        "PRIVATE_KEY",
        "ACCESS_KEY",
    ];
    if INSIDE.iter().any(|s| n.contains(s)) {
        return true;
    }
    n == "KEY" || n.ends_with("_KEY") || n.ends_with("_AUTH") || n.ends_with("_PAT")
}

/// The substrings of `text` that are secrets by their form (RC-14): PEM private-key blocks
/// (`-----BEGIN … PRIVATE KEY-----` to `-----END … PRIVATE KEY-----`, the whole block; a block
/// cut off before its end runs to the last line of base64), GitHub tokens (`ghp_`, `gho_`,
/// `ghu_`, `ghs_`, `ghr_`, `github_pat_`), AWS access key ids (`AKIA`/`ASIA` + 16), Slack
/// tokens (`xoxa-`, `xoxb-`, `xoxp-`, `xoxr-`, `xoxs-`), OpenAI/Anthropic-style `sk-…` and
/// `sk-ant-…` keys, GitLab `glpat-`, npm `npm_`, PyPI `pypi-`, Stripe `sk_live_`, `rk_live_`,
/// `sk_test_`, `rk_test_`, Google `AIza…` API keys, Hugging Face `hf_` + 30 or more letters and
/// digits, JWTs (`eyJ….eyJ….…`), and the value of a `key=value`, `key: value` or
/// `"key": "value"` pair whose key looks secret by the rule of [`secret_env_values`]
/// (`password=hunter2hunter2`, `"api_key": "…"`, `aws_secret_access_key = wJalr…`; `-` and `.`
/// in the key count as `_`): the value, at least 8 characters, runs to the next whitespace,
/// quote, `,`, `;` or `&`. In order of appearance, without duplicates. Never panics; linear time.
///
/// ```
/// let text = "token ghp_0123456789abcdefghijABCDEFGHIJ012345 in a task-list";
/// assert_eq!(argv_policy::secrets_in(text), vec!["ghp_0123456789abcdefghijABCDEFGHIJ012345".to_string()]);
/// ```
pub fn secrets_in(text: &str) -> Vec<String> {
    let mut found: Vec<(usize, usize)> = pem_blocks(text);
    found.extend(assigned_values(text));
    for f in FORMATS {
        let mut resume = 0;
        for (at, _) in text.match_indices(f.prefix) {
            if at < resume || !boundary_before(text, at) {
                continue;
            }
            if let Some(end) = (f.body)(text, at + f.prefix.len()) {
                found.push((at, end));
                resume = end;
            }
        }
    }
    // Inside a PEM block nothing else is reported separately (the block is masked whole).
    found.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut out: Vec<String> = Vec::new();
    // A set, so a text with many distinct tokens stays linear.
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut covered = 0;
    for (s, e) in found {
        if e <= covered {
            continue;
        }
        covered = e;
        let secret = &text[s..e];
        if seen.insert(secret) {
            out.push(secret.to_owned());
        }
    }
    out
}

/// One token format: a fixed prefix and a function that, given where the body starts, returns
/// the end of the token or `None`.
struct Format {
    prefix: &'static str,
    body: fn(&str, usize) -> Option<usize>,
}

const FORMATS: &[Format] = &[
    Format {
        prefix: "ghp_",
        body: github,
    },
    Format {
        prefix: "gho_",
        body: github,
    },
    Format {
        prefix: "ghu_",
        body: github,
    },
    Format {
        prefix: "ghs_",
        body: github,
    },
    Format {
        prefix: "ghr_",
        body: github,
    },
    Format {
        prefix: "github_pat_",
        body: github_pat,
    },
    Format {
        prefix: "AKIA",
        body: aws,
    },
    Format {
        prefix: "ASIA",
        body: aws,
    },
    Format {
        prefix: "xoxa-",
        body: slack,
    },
    Format {
        prefix: "xoxb-",
        body: slack,
    },
    Format {
        prefix: "xoxp-",
        body: slack,
    },
    Format {
        prefix: "xoxr-",
        body: slack,
    },
    Format {
        prefix: "xoxs-",
        body: slack,
    },
    Format {
        prefix: "sk-",
        body: sk,
    },
    Format {
        prefix: "glpat-",
        body: gitlab,
    },
    Format {
        prefix: "npm_",
        body: npm,
    },
    Format {
        prefix: "pypi-",
        body: pypi,
    },
    Format {
        prefix: "sk_live_",
        body: stripe,
    },
    Format {
        prefix: "rk_live_",
        body: stripe,
    },
    Format {
        prefix: "sk_test_",
        body: stripe,
    },
    Format {
        prefix: "rk_test_",
        body: stripe,
    },
    Format {
        prefix: "AIza",
        body: google,
    },
    Format {
        prefix: "eyJ",
        body: jwt,
    },
    Format {
        prefix: "hf_",
        body: hugging_face,
    },
];

fn hugging_face(text: &str, from: usize) -> Option<usize> {
    body(text, from, alnum, 30, false)
}

/// A byte of a configuration key: `aws_secret_access_key`, `spring.datasource.password`,
/// `api-key`.
fn key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// A byte that ends an assigned value.
fn value_end(b: u8) -> bool {
    b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b'`' | b',' | b';' | b'&')
}

/// The values of `key=value`, `key: value` and `"key": "value"` pairs whose key looks secret
/// ([`is_secret_name`]). Linear: a key is read backwards from its separator and stops at the
/// previous separator, and a value is read only for a secret key, after which the scan resumes
/// past it.
fn assigned_values(text: &str) -> Vec<(usize, usize)> {
    const MAX_KEY: usize = 64;
    const MAX_GAP: usize = 4;
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut resume = 0;
    for (sep, _) in text.match_indices(['=', ':']) {
        if sep < resume {
            continue;
        }
        // Backwards: optional blanks (`key = v`), an optional closing quote (`"key":`), the key.
        let mut k_end = sep;
        let mut gap = 0;
        while k_end > 0 && gap < MAX_GAP && matches!(bytes[k_end - 1], b' ' | b'\t') {
            k_end -= 1;
            gap += 1;
        }
        if k_end > 0 && matches!(bytes[k_end - 1], b'"' | b'\'') {
            k_end -= 1;
        }
        let mut k_start = k_end;
        while k_start > 0 && k_end - k_start < MAX_KEY && key_byte(bytes[k_start - 1]) {
            k_start -= 1;
        }
        if k_start == k_end || k_start > 0 && key_byte(bytes[k_start - 1]) {
            continue;
        }
        let key: String = text[k_start..k_end]
            .chars()
            .map(|c| if c == '-' || c == '.' { '_' } else { c })
            .collect();
        if !is_secret_name(&key) {
            continue;
        }
        // Forwards: optional blanks, an optional opening quote, the value.
        let mut v = sep + 1;
        let mut gap = 0;
        while v < bytes.len() && gap < MAX_GAP && matches!(bytes[v], b' ' | b'\t') {
            v += 1;
            gap += 1;
        }
        if v < bytes.len() && matches!(bytes[v], b'"' | b'\'') {
            v += 1;
        }
        let mut end = v;
        while end < bytes.len() && !value_end(bytes[end]) {
            end += 1;
        }
        // `$VAR` and `${VAR}` name a secret without holding it.
        if end - v >= 8 && bytes[v] != b'$' {
            out.push((v, end));
        }
        // The value is read once, matched or not, so separators inside it are not keys.
        resume = end;
    }
    out
}

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

fn alnum_dash_underscore(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// A token starts at the text's start or after a character that cannot be part of a word of
/// its alphabet (so `task-list` holds no `sk-` key, and base64 or hex runs hold no token).
fn boundary_before(text: &str, at: usize) -> bool {
    match text.as_bytes().get(at.wrapping_sub(1)) {
        None => true,
        Some(&b) => !(alnum_dash_underscore(b) || b == b'+'),
    }
}

/// The end of the run of `class` bytes starting at `from`.
fn run(text: &str, from: usize, class: fn(u8) -> bool) -> usize {
    let bytes = text.as_bytes();
    let mut i = from;
    while i < bytes.len() && class(bytes[i]) {
        i += 1;
    }
    i
}

fn has_digit(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit())
}

/// A body of `class` bytes of at least `min` (with a digit when `digit`), ending at a
/// boundary (the run is taken whole).
fn body(text: &str, from: usize, class: fn(u8) -> bool, min: usize, digit: bool) -> Option<usize> {
    let end = run(text, from, class);
    let b = &text[from..end];
    (b.len() >= min && (!digit || has_digit(b))).then_some(end)
}

fn github(text: &str, from: usize) -> Option<usize> {
    body(text, from, alnum, 36, false)
}

fn github_pat(text: &str, from: usize) -> Option<usize> {
    body(text, from, |b| alnum(b) || b == b'_', 22, true)
}

/// `AKIA`/`ASIA` + exactly 16 upper-case letters or digits, not followed by a letter or digit.
fn aws(text: &str, from: usize) -> Option<usize> {
    let end = run(text, from, |b| b.is_ascii_uppercase() || b.is_ascii_digit());
    let next_is_word = text
        .as_bytes()
        .get(end)
        .is_some_and(|b| alnum_dash_underscore(*b));
    (end - from == 16 && !next_is_word).then_some(end)
}

fn slack(text: &str, from: usize) -> Option<usize> {
    body(text, from, |b| alnum(b) || b == b'-', 10, true)
}

/// `sk-` keys (OpenAI `sk-…`, `sk-proj-…`; Anthropic `sk-ant-…`): 20 or more characters of
/// `[A-Za-z0-9_-]` mixing upper case, lower case and digits, which a kebab-case identifier
/// (`sk-some-long-option-name`) does not.
fn sk(text: &str, from: usize) -> Option<usize> {
    let end = run(text, from, alnum_dash_underscore);
    let b = &text[from..end];
    let mixed = b.bytes().any(|c| c.is_ascii_uppercase())
        && b.bytes().any(|c| c.is_ascii_lowercase())
        && has_digit(b);
    (b.len() >= 20 && mixed).then_some(end)
}

fn gitlab(text: &str, from: usize) -> Option<usize> {
    body(text, from, alnum_dash_underscore, 20, false)
}

fn npm(text: &str, from: usize) -> Option<usize> {
    body(text, from, alnum, 36, false)
}

fn pypi(text: &str, from: usize) -> Option<usize> {
    body(text, from, alnum_dash_underscore, 50, false)
}

fn stripe(text: &str, from: usize) -> Option<usize> {
    body(text, from, alnum, 16, true)
}

/// Google API keys: `AIza` + exactly 35 characters of `[A-Za-z0-9_-]`.
fn google(text: &str, from: usize) -> Option<usize> {
    let end = run(text, from, alnum_dash_underscore);
    (end - from == 35).then_some(end)
}

/// `eyJ<header>.eyJ<payload>.<signature>`: base64url JSON header and payload (both objects, so
/// both start `eyJ`), and a signature that may be empty (`alg: none`).
fn jwt(text: &str, from: usize) -> Option<usize> {
    let b64 = |b: u8| alnum(b) || b == b'-' || b == b'_';
    let bytes = text.as_bytes();
    let h = run(text, from, b64);
    if h - from < 8 || bytes.get(h) != Some(&b'.') {
        return None;
    }
    let p = h + 1;
    if !text[p..].starts_with("eyJ") {
        return None;
    }
    let pe = run(text, p + 3, b64);
    if pe - p < 8 || bytes.get(pe) != Some(&b'.') {
        return None;
    }
    Some(run(text, pe + 1, b64))
}

/// The PEM private-key blocks: from `-----BEGIN … PRIVATE KEY-----` (also `… PRIVATE KEY
/// BLOCK-----`, PGP's) through the matching kind of `-----END` line; a block whose end is
/// missing (cut off by an output cap) runs through its last line of base64.
fn pem_blocks(text: &str) -> Vec<(usize, usize)> {
    const BEGIN: &str = "-----BEGIN ";
    const END: &str = "-----END ";
    let mut out = Vec::new();
    let mut resume = 0;
    // Where the END search stands: ENDs are found left to right once, so a text with many
    // BEGINs and no END is still scanned once.
    let mut end_from = 0;
    let mut no_more_end = false;
    for (at, _) in text.match_indices(BEGIN) {
        if at < resume {
            continue;
        }
        let Some(label_end) = private_label(text, at + BEGIN.len()) else {
            continue;
        };
        let mut block_end = None;
        if !no_more_end {
            end_from = end_from.max(label_end);
            while let Some(pos) = text[end_from..].find(END) {
                let e = end_from + pos;
                end_from = e + END.len();
                if let Some(le) = private_label(text, e + END.len()) {
                    block_end = Some(le);
                    end_from = le;
                    break;
                }
            }
            if block_end.is_none() {
                no_more_end = true;
            }
        }
        let end = block_end.unwrap_or_else(|| base64_lines_end(text, label_end));
        out.push((at, end));
        resume = end;
    }
    out
}

/// After `-----BEGIN ` or `-----END `: `[A-Z0-9 ]*PRIVATE KEY-----` or `… PRIVATE KEY
/// BLOCK-----` on the same line; the end of the label.
fn private_label(text: &str, from: usize) -> Option<usize> {
    let end = run(text, from, |b| {
        b.is_ascii_uppercase() || b.is_ascii_digit() || b == b' '
    });
    let label = &text[from..end];
    if !text[end..].starts_with("-----") {
        return None;
    }
    (label.ends_with("PRIVATE KEY") || label.ends_with("PRIVATE KEY BLOCK")).then_some(end + 5)
}

/// The end of the base64 lines that follow a BEGIN line whose block has no END (the rest of
/// the BEGIN line, then PEM headers and a blank line, then lines of base64 only).
fn base64_lines_end(text: &str, from: usize) -> usize {
    let mut end = from;
    let mut pos = from;
    let mut seen_body = false;
    for (i, line) in text[from..].split_inclusive('\n').enumerate() {
        let content = line.trim_end_matches(['\n', '\r']);
        if i > 0 {
            let t = content.trim();
            let b64 = !t.is_empty()
                && t.bytes()
                    .all(|b| alnum(b) || b == b'+' || b == b'/' || b == b'=');
            let header = !seen_body
                && (t.is_empty() || t.starts_with("Proc-Type:") || t.starts_with("DEK-Info:"));
            if b64 {
                seen_body = true;
            } else if !header {
                break;
            }
            if !t.is_empty() {
                end = pos + content.len();
            }
        }
        pos += line.len();
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GHP: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";

    fn one(text: &str) -> Vec<String> {
        secrets_in(text)
    }

    #[test]
    fn secret_env_names_are_recognised_and_locations_are_not() {
        let v = "s3cr3t-value-123";
        for name in [
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "DB_PASSWORD",
            "MYSQL_PWD_PASSWD",
            "GPG_PASSPHRASE",
            "AZURE_CLIENT_CREDENTIAL",
            "STRIPE_KEY",
            "NPM_CONFIG__AUTH",
            "GITLAB_PAT",
            "my_apikey",
            "KEY",
            "TWINE_PASSWORD",
            "SSH_PRIVATE_KEY",
        ] {
            assert_eq!(
                secret_env_values([(name, v)]),
                vec![v.to_string()],
                "{name}"
            );
        }
        for name in [
            "PATH",
            "HOME",
            "XKB_KEYMAP",
            "KEYBOARD",
            "MONKEY",
            "SSH_AUTH_SOCK",
            "PASSWORD_STORE_DIR",
            "GOOGLE_APPLICATION_CREDENTIALS_FILE",
            "TOKENIZERS_PATH",
            "LANG",
            "TERM",
            "EDITOR",
        ] {
            assert!(secret_env_values([(name, v)]).is_empty(), "{name}");
        }
    }

    #[test]
    fn short_env_values_are_not_masked_and_duplicates_are_merged() {
        let env = [
            ("A_TOKEN", "1234567"),
            ("B_TOKEN", "12345678"),
            ("C_SECRET", "12345678"),
            ("D_SECRET", "ünïcödé"),
        ];
        assert_eq!(secret_env_values(env), vec!["12345678".to_string()]);
    }

    #[test]
    fn pem_private_key_blocks_are_found_whole() {
        let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----";
        let text = format!("cat id:\n{key}\ndone");
        assert_eq!(one(&text), vec![key.to_string()]);
        for kind in [
            "RSA PRIVATE KEY",
            "EC PRIVATE KEY",
            "PRIVATE KEY",
            "ENCRYPTED PRIVATE KEY",
            "PGP PRIVATE KEY BLOCK",
        ] {
            let k = format!("-----BEGIN {kind}-----\nMIIEvQIBADANBg\n-----END {kind}-----");
            assert_eq!(one(&format!("x {k} y")), vec![k.clone()], "{kind}");
        }
        // Public material is not secret.
        let cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----";
        assert!(one(cert).is_empty());
        assert!(one("-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----").is_empty());
    }

    #[test]
    fn a_pem_block_cut_off_before_its_end_is_masked_through_its_base64() {
        let text = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES\n\nMIIEowIBAAKCAQEA\nq2+/xyz==\n[… 1234 bytes omitted …]\ntail line";
        let got = one(text);
        assert_eq!(got.len(), 1);
        assert!(got[0].starts_with("-----BEGIN RSA PRIVATE KEY-----"));
        assert!(got[0].ends_with("q2+/xyz=="), "{:?}", got[0]);
    }

    #[test]
    fn token_formats_are_found() {
        let cases = [
            GHP.to_string(),
            "gho_0123456789abcdefghijABCDEFGHIJ012345".into(),
            "ghs_0123456789abcdefghijABCDEFGHIJ012345".into(),
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP".into(),
            "AKIAIOSFODNN7EXAMPLE".into(),
            "ASIAY34FZKBOKMUTVV7A".into(),
            "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx".into(),
            "xoxp-0123456789-abcdefghij".into(),
            "sk-proj-AbCdEf0123456789GhIjKlMnOpQrStUvWxYz".into(),
            "sk-ant-api03-AbCdEf0123456789_GhIjKlMnOpQrStUvWxYz-0123456789abcdef".into(),
            "sk-0123456789ABCDEFGHIJabcdefghij0123456789KLMNOPQR".into(),
            "glpat-xxxxxxxxxxxxxxxxxxxx".into(),
            "npm_0123456789abcdefghijABCDEFGHIJ012345".into(),
            format!("pypi-AgEIcHlwaS5vcmc{}", "A1b2C3d4".repeat(8)),
            "sk_live_0123456789abcdefABCDEF".into(),
            "rk_live_0123456789abcdefABCDEF".into(),
            "AIzaSyA-0123456789abcdefghijklmnopqrstu".into(),
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U".into(),
            "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxMjM0In0.".into(),
        ];
        for c in &cases {
            for wrap in [
                "{}",
                "token={}",
                "Authorization: Bearer {}\n",
                "\"{}\"",
                "https://{}@github.com/x",
                "x:{},",
            ] {
                let text = wrap.replace("{}", c);
                assert_eq!(one(&text), vec![c.clone()], "{text}");
            }
        }
        let both = format!("a {GHP} b AKIAIOSFODNN7EXAMPLE c {GHP}");
        assert_eq!(
            one(&both),
            vec![GHP.to_string(), "AKIAIOSFODNN7EXAMPLE".to_string()]
        );
    }

    #[test]
    fn look_alikes_are_not_secrets() {
        let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg+/AKIAIOSFODNN7EXAMPLEabc/eyJhbGciOiJIUzI1NiJ9";
        for text in [
            "commit 3f786850e387550fdab836ed7e6dc881de23001b",
            "id 123e4567-e89b-12d3-a456-426614174000",
            png,
            "see the task-list and desk-top and risk-assessment-for-the-quarter-two",
            "--disk-usage-summary-of-all-the-things",
            "sk-some-long-kebab-case-option-name",
            "mask-AKIAIOSFODNN7EXAMPLE",
            "AKIAIOSFODNN7EXAMPLEX",
            "AKIA is a prefix",
            "ghp_short",
            "eyJ alone",
            "eyJhbGciOiJIUzI1NiJ9 without a payload",
            "xoxb-abcdefghijklmnop",
            "npm_config_cache=/home/u/.npm",
            "github_pat_ is a prefix",
            "-----BEGIN PRIVATE KEY----- inline",
            "",
        ] {
            assert!(
                one(text).is_empty() || text.starts_with("-----BEGIN"),
                "{text}: {:?}",
                one(text)
            );
        }
        assert!(one(png).is_empty());
    }

    #[test]
    fn many_unfinished_candidates_stay_linear() {
        // Quadratic scanning would take seconds on these; they must simply return.
        let text = "-----BEGIN PRIVATE KEY-----\n".repeat(20_000);
        assert_eq!(one(&text).len(), 1);
        let text = "sk-".repeat(100_000);
        assert!(one(&text).is_empty());
        let text = format!("ghp_{}", "a".repeat(300_000));
        assert_eq!(one(&text).len(), 1, "one long run, scanned once");
        let text = "x=AKIAABCDEFGHIJKLMNOP ".repeat(20_000);
        assert_eq!(one(&text), vec!["AKIAABCDEFGHIJKLMNOP".to_string()]);
        let text: String = (0..50_000).map(|i| format!("AKIA{i:016} ")).collect();
        assert_eq!(
            one(&text).len(),
            50_000,
            "distinct tokens are deduplicated by a set"
        );
        let text = "eyJaaaaaaaaaaa.x ".repeat(30_000);
        assert!(one(&text).is_empty());
    }

    #[test]
    fn found_secrets_mask_to_tokens() {
        let text = format!("A={GHP} B=AKIAIOSFODNN7EXAMPLE");
        let secrets = one(&text);
        assert_eq!(mask(&text, &secrets), "A=[secret:1] B=[secret:2]");
    }

    #[test]
    fn values_of_secret_keys_are_secrets_by_form() {
        let cases = [
            (
                "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            ),
            ("password=hunter2hunter2", "hunter2hunter2"),
            ("PASSWORD = hunter2hunter2\n", "hunter2hunter2"),
            (r#"{"api_key": "abcdefgh1234"}"#, "abcdefgh1234"),
            ("token: abcdefghijkl", "abcdefghijkl"),
            ("  db.password: 's3cr3tpass', x", "s3cr3tpass"),
            ("https://x/?api-key=abcdefgh12&page=2", "abcdefgh12"),
            ("export GITHUB_TOKEN=abcdefgh12;", "abcdefgh12"),
        ];
        for (text, want) in cases {
            assert_eq!(secrets_in(text), vec![want.to_string()], "{text}");
        }
        let hf = "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH";
        assert_eq!(secrets_in(&format!("HF: {hf} ok")), vec![hf.to_string()]);
    }

    #[test]
    fn short_values_locations_and_prose_are_not_secrets_by_form() {
        for text in [
            "password=",
            "password=\nnext",
            "token_count=3",
            "max_tokens: 4096",
            "password_file=/etc/app/secret.txt",
            "Enter the password: ",
            "the token is not valid, try again",
            "key=value",
            "token: ${GITHUB_TOKEN}",
            "name=hunter2hunter2",
            "hf_short",
            "inside a word: xhf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
        ] {
            assert!(
                secrets_in(text).is_empty(),
                "{text}: {:?}",
                secrets_in(text)
            );
        }
    }

    #[test]
    fn many_secret_keys_in_a_row_stay_linear() {
        // Each value runs to the end of the text; it is read once, not once per separator.
        let text = "password=$".repeat(20_000);
        assert!(secrets_in(&text).is_empty());
        let text = "token=abcdefgh12 ".repeat(20_000);
        assert_eq!(secrets_in(&text), vec!["abcdefgh12".to_string()]);
    }

    proptest! {
        #[test]
        fn secrets_in_never_panics_and_returns_substrings(
            text in "(ghp_|AKIA|sk-|eyJ|hf_|password=|\"token\": |\\.|-----BEGIN |-----END | PRIVATE KEY-----|xoxb-|AIza|[A-Za-z0-9_+/=-]{1,12}|[ \\n]|é|\u{1F600})*"
        ) {
            for s in secrets_in(&text) {
                prop_assert!(!s.is_empty());
                prop_assert!(text.contains(&s));
            }
        }

        #[test]
        fn a_secret_key_with_a_long_value_is_always_found(
            key in "(db_|AWS_|x-)?(password|token|secret|api_key|apikey|Secret)(_value)?",
            sep in "(=| = |: |\": \")",
            value in "[A-Za-z0-9/+_-]{8,40}",
            before in "[ \n{,]?",
        ) {
            let text = format!("{before}{key}{sep}{value}\" next");
            prop_assert!(secrets_in(&text).contains(&value), "{}", text);
        }

        #[test]
        fn secrets_in_any_text_returns_substrings(text in ".{0,200}") {
            for s in secrets_in(&text) {
                prop_assert!(text.contains(&s));
            }
        }
    }
}
