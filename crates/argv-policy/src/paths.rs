//! Lexical path handling and the sensitive-path patterns (RC-4, RC-9, RC-10).
//!
//! Everything here is lexical: no file is opened and no symlink is followed. The executor (the
//! next issue) re-checks the real paths before it moves anything to the trash.

use std::borrow::Cow;
use std::path::{Component, Path, PathBuf};

/// `path` made absolute against `base`, with `.` and `..` folded lexically (`..` at `/` stays
/// at `/`, as the kernel does).
pub fn normalize(base: &Path, path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    let mut out = PathBuf::from("/");
    for comp in joined.components() {
        match comp {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(c) => out.push(c),
        }
    }
    out
}

/// `true` when `path` is `dir` or below it (both already normalised).
pub fn is_within(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

/// One sensitive-path pattern: `/`-separated pieces, each a glob where `*` matches any run of
/// characters within one component. A leading `/` anchors the pattern at the root; otherwise it
/// matches any run of consecutive components. `.ssh/` and `.ssh` are the same pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SensitivePattern {
    anchored: bool,
    pieces: Vec<String>,
}

impl SensitivePattern {
    /// Parses a pattern; `None` for an empty one or one made only of `*` pieces (which would
    /// match every path and is surely a mistake).
    pub fn parse(text: &str) -> Option<SensitivePattern> {
        let anchored = text.starts_with('/');
        let pieces: Vec<String> = text
            .split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .map(str::to_owned)
            .collect();
        if pieces.is_empty() || pieces.iter().all(|p| p.chars().all(|c| c == '*')) {
            return None;
        }
        Some(SensitivePattern { anchored, pieces })
    }

    /// `true` when the normalised absolute `path` contains the pattern.
    #[cfg(test)]
    pub fn matches(&self, path: &Path) -> bool {
        self.matches_components(&components(path))
    }

    /// The component name when the pattern is one literal piece matching anywhere (`.netrc`,
    /// `credentials`), which a set lookup can test.
    pub fn literal_name(&self) -> Option<&str> {
        match self.pieces.as_slice() {
            [one] if !self.anchored && !one.contains('*') => Some(one),
            _ => None,
        }
    }

    /// `SensitivePattern::matches` on a path already split by [`components`], so a caller
    /// testing one path against every pattern splits it once (a split per pattern would be most of
    /// an allowlisted `decide`).
    pub fn matches_components(&self, comps: &[Cow<'_, str>]) -> bool {
        let n = self.pieces.len();
        if comps.len() < n {
            return false;
        }
        let last_start = if self.anchored { 0 } else { comps.len() - n };
        (0..=last_start).any(|s| {
            self.pieces
                .iter()
                .zip(&comps[s..s + n])
                .all(|(p, c)| glob_match(p, c))
        })
    }
}

/// The normal components of `path` (borrowed where they are UTF-8).
pub fn components(path: &Path) -> Vec<Cow<'_, str>> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy()),
            _ => None,
        })
        .collect()
}

/// `*`-only glob over one component, iterative (no recursion, no backtracking blow-up). Works
/// on bytes: with `*` as the only special character, matching bytes is matching characters.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    if !p.contains(&b'*') {
        return p == t;
    }
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

/// The candidate paths inside one argument: the argument itself, and for `--opt=value` or
/// `-Xvalue`-looking flags, the value. `~` and `~/…` expand to `home` (RC-9 "after `~`
/// expansion and normalisation").
pub fn candidate_paths(arg: &str, workdir: &Path, home: &Path) -> Vec<PathBuf> {
    let mut raw: Vec<&str> = vec![arg];
    if arg.starts_with('-') {
        if let Some((_, v)) = arg.split_once('=') {
            raw.push(v);
        }
    } else if let Some((_, v)) = arg.split_once('=') {
        // `if=/dev/x`, `KEY=value`: the value may be a path.
        raw.push(v);
    }
    // Colon-separated lists (`PATH`-like values, `scp host:path`) are checked piece by piece.
    let mut out = Vec::new();
    for r in raw {
        for piece in std::iter::once(r).chain(r.split(':').filter(|p| *p != r)) {
            if piece.is_empty() {
                continue;
            }
            let expanded = if piece == "~" {
                home.to_path_buf()
            } else if let Some(rest) = piece.strip_prefix("~/") {
                home.join(rest)
            } else {
                PathBuf::from(piece)
            };
            out.push(normalize(workdir, &expanded));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_folds_dots_and_never_climbs_above_root() {
        let w = Path::new("/home/u/proj");
        assert_eq!(
            normalize(w, Path::new("a/./b/../c")),
            PathBuf::from("/home/u/proj/a/c")
        );
        assert_eq!(
            normalize(w, Path::new("../../../../..")),
            PathBuf::from("/")
        );
        assert_eq!(normalize(w, Path::new("/etc//x/")), PathBuf::from("/etc/x"));
    }

    #[test]
    fn glob_matches_within_one_component() {
        assert!(glob_match("id_*", "id_rsa"));
        assert!(glob_match("*.pem", "a.b.pem"));
        assert!(glob_match(".env.*", ".env.local"));
        assert!(!glob_match(".env.*", ".env"));
        assert!(!glob_match("*.pem", "pem"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
    }

    #[test]
    fn patterns_match_consecutive_components_and_anchor_on_a_leading_slash() {
        let p = SensitivePattern::parse(".config/gcloud/").unwrap();
        assert!(p.matches(Path::new("/home/u/.config/gcloud/creds.json")));
        assert!(!p.matches(Path::new("/home/u/.config/other/gcloud")));
        let p = SensitivePattern::parse("/etc/shadow").unwrap();
        assert!(p.matches(Path::new("/etc/shadow")));
        assert!(!p.matches(Path::new("/backup/etc/shadow")));
        assert!(SensitivePattern::parse("*").is_none());
        assert!(SensitivePattern::parse("/").is_none());
    }

    #[test]
    fn candidate_paths_expand_tilde_and_split_option_values() {
        let c = candidate_paths("--file=~/.ssh/id", Path::new("/w"), Path::new("/home/u"));
        assert!(c.contains(&PathBuf::from("/home/u/.ssh/id")));
        let c = candidate_paths("host:.aws/x", Path::new("/w"), Path::new("/home/u"));
        assert!(c.contains(&PathBuf::from("/w/.aws/x")));
    }
}
