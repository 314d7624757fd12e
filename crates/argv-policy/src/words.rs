//! The lexical shape of one argv word (RC-2): which characters a shell would read as syntax, and
//! what a bare command name looks like. The policy's config validation and the command checks
//! share these, so they live below both (a leaf module: it uses nothing of the crate).

/// The shell metacharacters (RC-2): `|`, `&`, `;`, `<`, `>`, `*`, `?`, `[`, `~`, `$`, `` ` ``,
/// `(`, `)` and newline. Each one would mean something to a shell. A direct argv element is
/// refused only when its form shows a shell was expected (wholly syntax, a leading `~`, a
/// substitution, a glob where a path goes; see the `decide` docs); an argument of a shell
/// (`["sh", "-c", script, arg…]`) and a read-only rule may hold none of them.
pub const METACHARACTERS: &[char] = &[
    '|', '&', ';', '<', '>', '*', '?', '[', '~', '$', '`', '(', ')', '\n',
];

/// `true` for a character of [`METACHARACTERS`].
pub fn is_metachar(c: char) -> bool {
    METACHARACTERS.contains(&c)
}

/// A bare command name: letters, digits, `_`, `.`, `+`, `-`, not starting with `-`. No `/`, no
/// quotes, no expansion (RC-2). `[` is also a command name.
pub fn is_bare_name(s: &str) -> bool {
    if s == "[" {
        return true;
    }
    !s.is_empty()
        && !s.starts_with('-')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '+' | '-'))
}
