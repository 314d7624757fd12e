//! Single-link access (FILE-1) and text classification (FILE-3).

use std::fs;
use std::io::Write;

use fsguard::{
    CheckError, MAX_TEXT_BYTES, OpenError, RelPath, TextFile, open_checked, read_checked, read_text,
};

use crate::util::Fixture;

fn rel(s: &str) -> RelPath {
    RelPath::new(s).unwrap()
}

#[test]
fn a_single_link_file_reads_whole() {
    let fx = Fixture::new();
    fx.put("d/a.txt", "content");
    assert_eq!(
        read_checked(fx.root_fd(), &rel("d/a.txt"), 100).unwrap(),
        b"content"
    );
}

#[test]
fn a_hard_linked_file_is_refused_before_reading() {
    let fx = Fixture::new();
    fx.put("a", "x");
    fs::hard_link(fx.join("a"), fx.join("b")).unwrap();
    let err = open_checked(fx.root_fd(), &rel("b")).unwrap_err();
    assert!(
        matches!(err, CheckError::HardLinked { links: 2, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("copy it to a new file"));
}

#[test]
fn a_link_made_after_open_is_caught_after_reading() {
    let fx = Fixture::new();
    fx.put("a", "x");
    let file = open_checked(fx.root_fd(), &rel("a")).unwrap();
    fs::hard_link(fx.join("a"), fx.join("b")).unwrap();
    let err = file.read_to_end(100).unwrap_err();
    assert!(
        matches!(err, CheckError::HardLinked { links: 2, .. }),
        "{err:?}"
    );
}

#[test]
fn a_file_that_grows_during_the_read_is_refused() {
    let fx = Fixture::new();
    fx.put("a", "1234");
    let file = open_checked(fx.root_fd(), &rel("a")).unwrap();
    fs::OpenOptions::new()
        .append(true)
        .open(fx.join("a"))
        .unwrap()
        .write_all(b"5678")
        .unwrap();
    assert!(matches!(
        file.read_to_end(100),
        Err(CheckError::Changed { .. })
    ));
}

#[test]
fn a_file_over_the_limit_is_too_large() {
    let fx = Fixture::new();
    fx.put("a", "12345");
    let err = read_checked(fx.root_fd(), &rel("a"), 4).unwrap_err();
    assert!(
        matches!(
            err,
            CheckError::TooLarge {
                size: 5,
                limit: 4,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_symlinked_file_is_refused() {
    let fx = Fixture::new();
    fx.put("real", "x");
    std::os::unix::fs::symlink("real", fx.join("link")).unwrap();
    let err = read_checked(fx.root_fd(), &rel("link"), 10).unwrap_err();
    assert!(
        matches!(err, CheckError::Open(OpenError::Symlink { .. })),
        "{err:?}"
    );
}

#[test]
fn text_classification_follows_file_3() {
    let fx = Fixture::new();
    fs::write(fx.join("exact"), vec![b'a'; MAX_TEXT_BYTES as usize]).unwrap();
    fs::write(fx.join("over"), vec![b'a'; MAX_TEXT_BYTES as usize + 1]).unwrap();
    fs::write(fx.join("nul"), b"text\0more").unwrap();
    fs::write(fx.join("latin1"), b"caf\xe9").unwrap();
    fs::write(fx.join("utf8"), "café\n").unwrap();
    fs::write(fx.join("empty"), "").unwrap();
    let root = fx.root_fd();
    let got = |p: &str| read_text(&root, &rel(p)).unwrap();
    assert!(matches!(got("exact"), TextFile::Text(s) if s.len() == MAX_TEXT_BYTES as usize));
    assert_eq!(
        got("over"),
        TextFile::TooLarge {
            size: MAX_TEXT_BYTES + 1
        }
    );
    assert_eq!(got("nul"), TextFile::Binary);
    assert_eq!(got("latin1"), TextFile::Binary);
    assert_eq!(got("utf8"), TextFile::Text("café\n".into()));
    assert_eq!(got("empty"), TextFile::Text(String::new()));
    assert!(got("over").marks_truncation());
    assert!(TextFile::Denied.marks_truncation());
    assert!(!TextFile::Binary.marks_truncation());
    assert!(!got("utf8").marks_truncation());
}
