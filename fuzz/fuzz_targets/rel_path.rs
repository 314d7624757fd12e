//! Relative paths from the agent (`fsguard::RelPath::new`).
//!
//! Any bytes → `fsguard::RelPath::new`: never a panic, and a path that is accepted is
//! normalised (no empty, `.` or `..` component, not absolute, no NUL, no `.git` in any
//! disguise), renders back to itself, and its parent joined with its file name is itself.
#![no_main]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use fsguard::RelPath;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(path) = RelPath::new(OsStr::from_bytes(data)) else {
        return;
    };
    let bytes = path.as_path().as_os_str().as_bytes();
    assert!(!bytes.contains(&0), "a NUL survived: {path:?}");
    assert!(!bytes.starts_with(b"/"), "absolute: {path:?}");
    if path.is_root() {
        assert_eq!(bytes, b".");
    } else {
        for comp in bytes.split(|b| *b == b'/') {
            assert!(!comp.is_empty(), "empty component in {path:?}");
            assert!(comp != b"." && comp != b"..", "dot component in {path:?}");
            // Every component is itself a valid one-component path (so not `.git`).
            let one = RelPath::new(OsStr::from_bytes(comp)).expect("component re-validates");
            assert_eq!(one.as_path().as_os_str().as_bytes(), comp);
        }
    }
    let components: Vec<&OsStr> = path.components().collect();
    if path.is_root() {
        assert!(components.is_empty());
    } else {
        let joined = components
            .iter()
            .map(|c| c.as_bytes())
            .collect::<Vec<_>>()
            .join(&b'/');
        assert_eq!(joined, bytes, "components do not join back");
    }
    // Rendered form re-parses to the same path.
    let again = RelPath::new(path.as_path()).expect("the rendering re-parses");
    assert_eq!(again, path);
    assert_eq!(path.to_string(), path.as_path().display().to_string());
    // parent + file_name == self.
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => {
            assert_eq!(parent.join(name).expect("parent/name re-joins"), path);
        }
        (None, None) => assert!(path.is_root()),
        other => panic!("parent and file_name disagree: {other:?} for {path:?}"),
    }
    // `..` can never be joined on.
    assert!(path.join("..").is_err());
});
